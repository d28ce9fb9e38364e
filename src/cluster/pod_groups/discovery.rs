//! Which PodGroup APIs the cluster serves, asked of API discovery at start and then every
//! `--pod-group-discovery-interval`: a watch runs for each served API, and stops when the API is
//! no longer served (its CRD was deleted, the feature gate turned off).
//!
//! Polling discovery rather than watching CustomResourceDefinitions keeps muster's RBAC to the
//! PodGroups themselves: discovery is open to every authenticated client (`system:discovery`).
//! [`Rounds`] decides what to start and stop, and when readiness knows what to wait for; it is
//! pure, and the loop around it does the I/O.

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

/// Rounds in a row an API must be found not served before its watch stops and its PodGroups
/// are forgotten: one 404 (an API server that just restarted and has not loaded its CRDs yet)
/// is not a CRD deleted.
pub const GONE_AFTER_ROUNDS: u32 = 2;

/// Inconclusive rounds in a row after which readiness stops waiting for a conclusive one and
/// waits for the first lists of the APIs found served so far: an API whose discovery keeps
/// failing (a broken aggregated API server) must not keep muster unready for ever.
pub const READY_AFTER_INCONCLUSIVE_ROUNDS: u32 = 10;

/// What discovery remembers from round to round.
#[derive(Debug, Default)]
pub struct Rounds {
    /// Per API: rounds in a row it was found not served.
    missing: BTreeMap<PodGroupApi, u32>,
    /// Inconclusive rounds in a row while readiness waits for the first conclusive one.
    inconclusive: u32,
    /// Readiness was told which APIs to wait for.
    readiness_told: bool,
}

/// What one round decided.
#[derive(Debug, PartialEq, Eq)]
pub struct Round {
    pub changes: Vec<Change>,
    /// The first round to tell readiness which first lists to wait for: these.
    pub ready_with: Option<Vec<PodGroupApi>>,
}

impl Rounds {
    /// What to start and stop, given the APIs watched now and what this round found. A failed
    /// discovery changes nothing: a watch is neither started on a guess nor stopped (forgetting
    /// its PodGroups) because the API server did not answer once; nor is one stopped before its
    /// API was missing [`GONE_AFTER_ROUNDS`] rounds in a row.
    pub fn round(
        &mut self,
        running: &BTreeSet<PodGroupApi>,
        found: &[(PodGroupApi, Found)],
    ) -> Round {
        let mut changes = Vec::new();
        for (api, f) in found {
            match f {
                Found::Served => {
                    self.missing.remove(api);
                    if !running.contains(api) {
                        changes.push(Change::Start(*api));
                    }
                }
                Found::NotServed => {
                    let rounds = self.missing.entry(*api).or_default();
                    *rounds += 1;
                    if running.contains(api) && *rounds >= GONE_AFTER_ROUNDS {
                        changes.push(Change::Stop(*api));
                    }
                }
                Found::Unknown(_) => {}
            }
        }
        let mut ready_with = None;
        if !self.readiness_told {
            if conclusive(found) {
                self.inconclusive = 0;
            } else {
                self.inconclusive += 1;
            }
            if conclusive(found) || self.inconclusive >= READY_AFTER_INCONCLUSIVE_ROUNDS {
                self.readiness_told = true;
                ready_with = Some(
                    found
                        .iter()
                        .filter(|(_, f)| *f == Found::Served)
                        .map(|(api, _)| *api)
                        .collect(),
                );
            }
        }
        Round {
            changes,
            ready_with,
        }
    }

    /// Readiness still waits for a conclusive round.
    pub fn awaiting_readiness(&self) -> bool {
        !self.readiness_told
    }
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

/// Stops the watch of `api`: a gang naming a PodGroup of it that muster never saw goes by its
/// pods' keys again (see `set_pod_group_api_served`). The PodGroups last seen are kept, and go
/// on deciding their gangs: a PodGroup is forgotten only when its deletion is seen (a CRD's
/// deletion deletes its objects first, and the watch delivered those deletions before the API
/// went missing for [`GONE_AFTER_ROUNDS`] rounds), never because its API flapped — a gang
/// decided by a PodGroup never falls back to its pods' keys while that PodGroup was last seen.
async fn stop_watch(api: PodGroupApi, task: JoinHandle<()>, shared: &Shared) {
    task.abort();
    let _ = task.await;
    shared.table.lock().set_pod_group_api_served(api, false);
    // Its first list may never have completed: readiness no longer waits for it.
    shared.readiness.set_pod_group_api_listed(api);
    shared.flush_notices();
}

/// Runs until muster stops: asks discovery every `every` (the first time at once) and keeps one
/// watch running per PodGroup API the cluster serves.
pub async fn watch_pod_groups(client: Client, shared: Arc<Shared>, every: Duration) {
    let mut watches = Watches::default();
    let mut rounds = Rounds::default();
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
        // A watch task ends only if it panicked: start it again if the API is still served.
        watches.0.retain(|_, task| !task.is_finished());
        let running: BTreeSet<PodGroupApi> = watches.0.keys().copied().collect();
        let round = rounds.round(&running, &found);
        // The first conclusive round (or the last of too many inconclusive ones) decides which
        // first lists readiness waits for.
        if let Some(served) = round.ready_with {
            if !conclusive(&found) {
                warn!(
                    rounds = READY_AFTER_INCONCLUSIVE_ROUNDS,
                    "PodGroup API discovery keeps failing for some APIs; readiness waits only \
                     for the APIs found served"
                );
            }
            shared.readiness.pod_group_discovery_done(served);
        }
        for change in round.changes {
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
        let wait = if rounds.awaiting_readiness() {
            RETRY_INCONCLUSIVE.min(every)
        } else {
            every
        };
        tokio::time::sleep(wait).await;
    }
}
