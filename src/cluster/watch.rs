//! Watches of pods and nodes that keep the gang table current.
//!
//! Each watch event is converted to the model's compact form at once and applied under the
//! table lock (microseconds); the full objects are dropped, so the cache holds only what
//! decisions read. After every (re-)list, objects that vanished meanwhile are removed, and the
//! first completed list of both kinds makes `/readyz` true.

use std::collections::HashSet;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};
use tracing::{info, warn};

use super::convert::{node_info, pod_info};
use crate::state::Shared;

/// Pods that finished no longer hold resources; leaving them out of the watch keeps the cache
/// small on clusters with many completed jobs (the API server sends a delete when a pod stops
/// matching).
const LIVE_PODS: &str = "status.phase!=Succeeded,status.phase!=Failed";

pub async fn watch_pods(client: Client, shared: Arc<Shared>) {
    let api: Api<Pod> = Api::all(client);
    let config = watcher::Config::default().fields(LIVE_PODS);
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    let mut relist: Option<HashSet<Arc<str>>> = None;
    loop {
        let event = match stream.try_next().await {
            Ok(Some(e)) => e,
            Ok(None) => break,
            Err(e) => {
                warn!(error = %e, "pod watch error; retrying with backoff");
                shared
                    .metrics
                    .watch_errors
                    .get_or_create(&kind("pods"))
                    .inc();
                continue;
            }
        };
        shared.metrics.touch_cache();
        match event {
            Event::Init => relist = Some(HashSet::new()),
            Event::InitApply(p) | Event::Apply(p) => match pod_info(&p) {
                Ok(info) => {
                    if let Some(seen) = relist.as_mut() {
                        seen.insert(info.uid.clone());
                    }
                    shared.table.lock().apply_pod(info);
                }
                Err(e) => warn!(error = %e, "ignoring pod muster cannot read"),
            },
            Event::Delete(p) => {
                if let Some(uid) = p.metadata.uid.as_deref() {
                    shared.table.lock().remove_pod(uid);
                }
            }
            Event::InitDone => {
                if let Some(seen) = relist.take() {
                    let mut table = shared.table.lock();
                    table.retain_pods(|uid| seen.contains(uid));
                    info!(pods = table.pod_count(), "pod cache synced");
                }
                shared.readiness.set_pods_synced();
            }
        }
        shared.flush_notices();
    }
}

pub async fn watch_nodes(client: Client, shared: Arc<Shared>) {
    let api: Api<Node> = Api::all(client);
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut relist: Option<HashSet<String>> = None;
    loop {
        let event = match stream.try_next().await {
            Ok(Some(e)) => e,
            Ok(None) => break,
            Err(e) => {
                warn!(error = %e, "node watch error; retrying with backoff");
                shared
                    .metrics
                    .watch_errors
                    .get_or_create(&kind("nodes"))
                    .inc();
                continue;
            }
        };
        shared.metrics.touch_cache();
        match event {
            Event::Init => relist = Some(HashSet::new()),
            Event::InitApply(n) | Event::Apply(n) => match node_info(&n) {
                Ok(info) => {
                    if let Some(seen) = relist.as_mut() {
                        seen.insert(info.name.to_string());
                    }
                    shared.table.lock().apply_node(info);
                }
                Err(e) => warn!(error = %e, "ignoring node muster cannot read"),
            },
            Event::Delete(n) => {
                if let Some(name) = n.metadata.name.as_deref() {
                    shared.table.lock().remove_node(name);
                }
            }
            Event::InitDone => {
                if let Some(seen) = relist.take() {
                    let mut table = shared.table.lock();
                    table.retain_nodes(|n| seen.contains(n));
                    info!(nodes = table.node_count(), "node cache synced");
                }
                shared.readiness.set_nodes_synced();
            }
        }
    }
}

fn kind(k: &'static str) -> crate::metrics::KindLabel {
    crate::metrics::KindLabel { kind: k }
}
