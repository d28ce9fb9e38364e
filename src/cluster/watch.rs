//! Watches of pods and nodes that keep the gang table current.
//!
//! Each watch event is converted to the model's compact form at once and applied under the
//! table lock (microseconds); the full objects are dropped, so the cache holds only what
//! decisions read. After every (re-)list, objects that vanished meanwhile are removed, and the
//! first completed list of both kinds makes `/readyz` true.

use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tracing::{info, warn};

use super::convert::{node_info, pod_info, ConvertError};
use crate::metrics::KindLabel;
use crate::model::GangTable;
use crate::state::Shared;

/// Pods that finished no longer hold resources; leaving them out of the watch keeps the cache
/// small on clusters with many completed jobs (the API server sends a delete when a pod stops
/// matching).
const LIVE_PODS: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// What differs between the pod and the node watch: how an object enters and leaves the table.
trait Indexed: Resource + Clone + DeserializeOwned + Debug + Send + 'static {
    const KIND: &'static str;
    /// Applies the object; returns its key (pod UID, node name) for re-list bookkeeping.
    fn apply(table: &mut GangTable, obj: &Self) -> Result<Arc<str>, ConvertError>;
    fn remove(table: &mut GangTable, obj: &Self);
    /// After a (re-)list: drops what the list did not contain; returns how many remain.
    fn retain(table: &mut GangTable, seen: &HashSet<Arc<str>>) -> usize;
    fn set_synced(shared: &Shared);
}

impl Indexed for Pod {
    const KIND: &'static str = "pods";
    fn apply(table: &mut GangTable, pod: &Pod) -> Result<Arc<str>, ConvertError> {
        let info = pod_info(pod)?;
        let uid = info.uid.clone();
        table.apply_pod(info);
        Ok(uid)
    }
    fn remove(table: &mut GangTable, pod: &Pod) {
        if let Some(uid) = pod.metadata.uid.as_deref() {
            table.remove_pod(uid);
        }
    }
    fn retain(table: &mut GangTable, seen: &HashSet<Arc<str>>) -> usize {
        table.retain_pods(|uid| seen.contains(uid));
        table.pod_count()
    }
    fn set_synced(shared: &Shared) {
        shared.readiness.set_pods_synced();
    }
}

impl Indexed for Node {
    const KIND: &'static str = "nodes";
    fn apply(table: &mut GangTable, node: &Node) -> Result<Arc<str>, ConvertError> {
        let info = node_info(node)?;
        let name = info.name.clone();
        table.apply_node(info);
        Ok(name)
    }
    fn remove(table: &mut GangTable, node: &Node) {
        if let Some(name) = node.metadata.name.as_deref() {
            table.remove_node(name);
        }
    }
    fn retain(table: &mut GangTable, seen: &HashSet<Arc<str>>) -> usize {
        table.retain_nodes(|name| seen.contains(name));
        table.node_count()
    }
    fn set_synced(shared: &Shared) {
        shared.readiness.set_nodes_synced();
    }
}

pub async fn watch_pods(client: Client, shared: Arc<Shared>) {
    let config = watcher::Config::default().fields(LIVE_PODS);
    watch::<Pod>(Api::all(client), config, shared).await
}

pub async fn watch_nodes(client: Client, shared: Arc<Shared>) {
    watch::<Node>(Api::all(client), watcher::Config::default(), shared).await
}

async fn watch<K: Indexed>(api: Api<K>, config: watcher::Config, shared: Arc<Shared>)
where
    K::DynamicType: Default,
{
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    let mut relist: Option<HashSet<Arc<str>>> = None;
    loop {
        let event = match stream.try_next().await {
            Ok(Some(e)) => e,
            Ok(None) => break,
            Err(e) => {
                warn!(kind = K::KIND, error = %e, "watch error; retrying with backoff");
                shared
                    .metrics
                    .watch_errors
                    .get_or_create(&KindLabel { kind: K::KIND })
                    .inc();
                continue;
            }
        };
        shared.metrics.touch_cache();
        match event {
            Event::Init => relist = Some(HashSet::new()),
            Event::InitApply(obj) | Event::Apply(obj) => {
                let applied = K::apply(&mut shared.table.lock(), &obj);
                match applied {
                    Ok(key) => {
                        if let Some(seen) = relist.as_mut() {
                            seen.insert(key);
                        }
                    }
                    Err(e) => {
                        warn!(kind = K::KIND, error = %e, "ignoring an object muster cannot read")
                    }
                }
            }
            Event::Delete(obj) => K::remove(&mut shared.table.lock(), &obj),
            Event::InitDone => {
                if let Some(seen) = relist.take() {
                    let count = K::retain(&mut shared.table.lock(), &seen);
                    info!(kind = K::KIND, count, "cache synced");
                }
                K::set_synced(&shared);
            }
        }
        shared.flush_notices();
    }
}
