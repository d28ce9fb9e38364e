//! Which PodGroup APIs the cluster serves, asked of API discovery at start and then every
//! `--pod-group-discovery-interval`: a watch runs for each served API, and stops when the API is
//! no longer served (its CRD was deleted, the feature gate turned off).
//!
//! Polling discovery rather than watching CustomResourceDefinitions keeps muster's RBAC to the
//! PodGroups themselves: discovery is open to every authenticated client (`system:discovery`).
//! [`changes`] decides what to start and stop and is pure; the loop around it does the I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use kube::runtime::watcher;
use kube::{Api, Client};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::{Kubernetes, PodGroupKind, PodGroupObject, SchedulerPlugins, Volcano};
use crate::cluster::watch::watch;
use crate::metrics::KindLabel;
use crate::model::PodGroupApi;
use crate::state::Shared;

/// What discovery said about one API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// The group/version is served and lists `podgroups`.
    Served,
    /// The group/version is not served (HTTP 404), or serves no `podgroups`.
    NotServed,
    /// Discovery failed (API server unreachable, 5xx): no conclusion either way.
    Unknown(String),
}

/// A watch to start or stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Start(PodGroupApi),
    Stop(PodGroupApi),
}

/// What to start and stop, given the APIs watched now and what discovery found. A failed
/// discovery changes nothing: a watch is neither started on a guess nor stopped (forgetting its
/// PodGroups) because the API server did not answer once.
pub fn changes(running: &BTreeSet<PodGroupApi>, found: &[(PodGroupApi, Found)]) -> Vec<Change> {
    found
        .iter()
        .filter_map(|(api, found)| match (found, running.contains(api)) {
            (Found::Served, false) => Some(Change::Start(*api)),
            (Found::NotServed, true) => Some(Change::Stop(*api)),
            _ => None,
        })
        .collect()
}

/// Whether a round found out about every API: one that failed says nothing of its API, so the
/// round cannot tell readiness which first lists to wait for.
pub fn conclusive(found: &[(PodGroupApi, Found)]) -> bool {
    !found.iter().any(|(_, f)| matches!(f, Found::Unknown(_)))
}

/// How soon to ask again after a round that was not conclusive while readiness still waits for
/// one (muster restarting while the API server does not answer).
const RETRY_INCONCLUSIVE: Duration = Duration::from_secs(1);

/// The resource of `api`, as in RBAC and the watch metrics' `kind` label.
pub fn resource(api: PodGroupApi) -> &'static str {
    match api {
        PodGroupApi::Volcano => Volcano::RESOURCE,
        PodGroupApi::SchedulerPlugins => SchedulerPlugins::RESOURCE,
        PodGroupApi::Kubernetes => Kubernetes::RESOURCE,
    }
}

async fn discover(client: &Client, api: PodGroupApi) -> Found {
    match client.list_api_group_resources(api.api_version()).await {
        Ok(list) if list.resources.iter().any(|r| r.name == "podgroups") => Found::Served,
        Ok(_) => Found::NotServed,
        Err(kube::Error::Api(e)) if e.code == 404 => Found::NotServed,
        Err(e) => Found::Unknown(e.to_string()),
    }
}

/// The running watches, one task per API; dropping this (muster shutting down) stops them.
#[derive(Default)]
struct Watches(BTreeMap<PodGroupApi, JoinHandle<()>>);

impl Drop for Watches {
    fn drop(&mut self) {
        for task in self.0.values() {
            task.abort();
        }
    }
}

fn spawn_watch(api: PodGroupApi, client: Client, shared: Arc<Shared>) -> JoinHandle<()> {
    fn run<A: PodGroupKind>(client: Client, shared: Arc<Shared>) -> JoinHandle<()> {
        let api: Api<PodGroupObject<A>> = Api::all(client);
        tokio::spawn(watch(api, watcher::Config::default(), shared))
    }
    match api {
        PodGroupApi::Volcano => run::<Volcano>(client, shared),
        PodGroupApi::SchedulerPlugins => run::<SchedulerPlugins>(client, shared),
        PodGroupApi::Kubernetes => run::<Kubernetes>(client, shared),
    }
}

/// Stops the watch of `api` and forgets its PodGroups: the objects went with their API, and a
/// gang naming one goes by its pods' keys again (see `set_pod_group_api_served`).
async fn stop_watch(api: PodGroupApi, task: JoinHandle<()>, shared: &Shared) {
    task.abort();
    // Awaited, so that no event of the old watch is applied after the forgetting below.
    let _ = task.await;
    {
        let mut table = shared.table.lock();
        table.set_pod_group_api_served(api, false);
        table.retain_pod_groups(api, |_| false);
    }
    // Its first list may never have completed: readiness no longer waits for it.
    shared.readiness.set_pod_group_api_listed(api);
    shared.flush_notices();
}

/// Runs until muster stops: asks discovery every `every` (the first time at once) and keeps one
/// watch running per PodGroup API the cluster serves.
pub async fn watch_pod_groups(client: Client, shared: Arc<Shared>, every: Duration) {
    let mut watches = Watches::default();
    let mut awaiting_conclusive_round = true;
    loop {
        let mut found = Vec::with_capacity(PodGroupApi::ALL.len());
        for api in PodGroupApi::ALL {
            let f = discover(&client, api).await;
            if let Found::Unknown(why) = &f {
                warn!(%api, error = %why, "API discovery failed; PodGroup watches left as they are");
                shared
                    .metrics
                    .watch_errors
                    .get_or_create(&KindLabel {
                        kind: resource(api),
                    })
                    .inc();
            }
            found.push((api, f));
        }
        // The first conclusive round decides which first lists readiness waits for.
        let conclusive = conclusive(&found);
        if conclusive && std::mem::take(&mut awaiting_conclusive_round) {
            shared.readiness.pod_group_discovery_done(
                found
                    .iter()
                    .filter(|(_, f)| *f == Found::Served)
                    .map(|(api, _)| *api),
            );
        }
        // A watch task ends only if it panicked: start it again if the API is still served.
        watches.0.retain(|_, task| !task.is_finished());
        let running: BTreeSet<PodGroupApi> = watches.0.keys().copied().collect();
        for change in changes(&running, &found) {
            match change {
                Change::Start(api) => {
                    info!(%api, "the cluster serves this API: watching its PodGroups");
                    watches
                        .0
                        .insert(api, spawn_watch(api, client.clone(), shared.clone()));
                }
                Change::Stop(api) => {
                    info!(%api, "the cluster no longer serves this API: its PodGroups are forgotten");
                    if let Some(task) = watches.0.remove(&api) {
                        stop_watch(api, task, &shared).await;
                    }
                }
            }
        }
        let wait = if awaiting_conclusive_round {
            RETRY_INCONCLUSIVE.min(every)
        } else {
            every
        };
        tokio::time::sleep(wait).await;
    }
}
