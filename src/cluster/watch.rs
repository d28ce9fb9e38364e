//! Watches of pods and nodes (and, in `pod_groups`, of PodGroups) that keep the gang table
//! current.
//!
//! Two halves: [`apply_event`] is pure — it applies one watch event to the table, re-list
//! bookkeeping included, and is unit-tested with synthetic event streams (as kube-rs tests its
//! reflector store) — and the watch loop builds the stream and does the I/O around it: logs,
//! metrics, readiness, Events.
//!
//! Each event is converted to the model's compact form at once and applied under the table
//! lock (microseconds); the full objects are dropped, so the cache holds only what decisions
//! read. After every (re-)list, objects that vanished meanwhile are removed, and the first
//! completed list of both kinds makes `/readyz` true.

use std::collections::HashSet;
use std::fmt::{self, Debug};
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tracing::{info, warn};

use super::convert::{
    bound_pod_info_lenient, node_info, node_info_lenient, pod_info, ConvertError,
};
use crate::metrics::KindLabel;
use crate::model::GangTable;
use crate::state::Shared;

/// Pods that finished no longer hold resources; leaving them out of the watch keeps the cache
/// small on clusters with many completed jobs (the API server sends a delete when a pod stops
/// matching).
const LIVE_PODS: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// What applying one object gave: its key for re-list bookkeeping, and what could not be read
/// of it if it was applied in part; or why it could not be read at all.
pub type Read<E> = Result<(Arc<str>, Option<E>), E>;

/// What differs between the watches (pods, nodes, and each PodGroup API): how an object enters
/// and leaves the table.
pub trait Indexed: Resource + Clone + DeserializeOwned + Debug + Send + 'static {
    /// The resource, as in the watch metrics' `kind` label.
    const KIND: &'static str;
    /// Why an object could not be read.
    type Error: fmt::Display + Debug;
    /// Applies the object; returns its key (pod UID, node name) for re-list bookkeeping, and
    /// what could not be read of it if it was applied in part (see `convert::lenient`).
    fn apply(table: &mut GangTable, obj: &Self) -> Read<Self::Error>;
    fn remove(table: &mut GangTable, obj: &Self);
    /// After a (re-)list: drops what the list did not contain; returns how many remain.
    fn retain(table: &mut GangTable, seen: &HashSet<Arc<str>>) -> usize;
    fn set_synced(shared: &Shared);
    /// The watch failed and lists again (`on`), or its list is done. Pods and nodes are what
    /// room is counted from: while either lists again, no verb decides (`Readiness::relisting`).
    fn set_relisting(_shared: &Shared, _on: bool) {}
    /// Looks at an event before it is applied, for what reads more of the object than the table
    /// keeps (the node marker).
    fn observe(_shared: &Shared, _event: &Event<Self>) {}
    /// The API server refuses muster this kind (HTTP 403: its RBAC lacks the rule). Pods and
    /// nodes are required, so by default the watch keeps retrying and muster stays unready.
    fn forbidden(_shared: &Shared) {}
}

/// Whether a watch error is the API server refusing muster the resource (RBAC).
fn is_forbidden(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => s.code == 403,
        watcher::Error::WatchError(s) => s.code == 403,
        _ => false,
    }
}

impl Indexed for Pod {
    const KIND: &'static str = "pods";
    type Error = ConvertError;
    fn apply(table: &mut GangTable, pod: &Pod) -> Read<ConvertError> {
        let (info, partly) = match pod_info(pod) {
            Ok(info) => (info, None),
            Err(e) => match bound_pod_info_lenient(pod) {
                Some((info, why)) => (info, Some(why)),
                None => return Err(e),
            },
        };
        let uid = info.uid.clone();
        table.apply_pod(info);
        Ok((uid, partly))
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
    fn set_relisting(shared: &Shared, on: bool) {
        shared.readiness.set_pods_relisting(on);
    }
}

impl Indexed for Node {
    const KIND: &'static str = "nodes";
    type Error = ConvertError;
    fn apply(table: &mut GangTable, node: &Node) -> Read<ConvertError> {
        let (info, partly) = match node_info(node) {
            Ok(info) => (info, None),
            Err(e) => match node_info_lenient(node) {
                Some((info, why)) => (info, Some(why)),
                None => return Err(e),
            },
        };
        let name = info.name.clone();
        table.apply_node(info);
        Ok((name, partly))
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
    fn set_relisting(shared: &Shared, on: bool) {
        shared.readiness.set_nodes_relisting(on);
    }
    fn observe(shared: &Shared, event: &Event<Node>) {
        match event {
            Event::InitApply(node) | Event::Apply(node) => {
                if let Some(name) = node.metadata.name.as_deref() {
                    shared
                        .node_markers
                        .observe(name, super::node_marker::marker_short(node));
                }
            }
            Event::Delete(node) => {
                if let Some(name) = node.metadata.name.as_deref() {
                    shared.node_markers.forget(name);
                }
            }
            Event::Init | Event::InitDone => {}
        }
    }
}

/// Re-list bookkeeping of one watch: the keys seen since the current (re-)list began.
#[derive(Default)]
pub struct Relist {
    seen: Option<HashSet<Arc<str>>>,
}

/// What applying one event did, for the watch loop to report.
#[derive(Debug)]
pub enum Applied<E = ConvertError> {
    /// A (re-)list began: nothing was delivered yet.
    ListStarted,
    /// An object was applied or removed.
    Changed,
    /// An object muster cannot read was skipped (the table is unchanged).
    Unreadable(E),
    /// An object was applied with what could be read of it (see `convert::lenient`).
    PartlyRead(E),
    /// A (re-)list completed; `remaining` objects of this kind are in the table, or `None`
    /// when no list was under way.
    Synced { remaining: Option<usize> },
}

impl<E> Applied<E> {
    /// Whether the event is evidence that the watch delivers, which is what
    /// `muster_cache_last_event_age_seconds` measures: an object (even one muster cannot
    /// read) or a completed list. A list beginning is not: kube-rs's watcher emits `Init`
    /// before its list request, so a watch retrying against an API server that is down
    /// emits one on every attempt.
    pub fn shows_delivery(&self) -> bool {
        !matches!(self, Applied::ListStarted)
    }
}

/// The wait before a failed watch lists again, doubling up to [`RELIST_BACKOFF_MAX`] while it
/// keeps failing (an API server that is down is asked every few seconds, not in a loop).
pub const RELIST_BACKOFF_FIRST: Duration = Duration::from_millis(200);
pub const RELIST_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Applies one watch event to the table. A re-list (`Init`, `InitApply`…, `InitDone`) updates
/// what it lists as it goes and, when done, removes what it did not list: objects deleted
/// while the watch was down are forgotten then, not before.
pub fn apply_event<K: Indexed>(
    table: &mut GangTable,
    relist: &mut Relist,
    event: Event<K>,
) -> Applied<K::Error> {
    match event {
        Event::Init => {
            relist.seen = Some(HashSet::new());
            Applied::ListStarted
        }
        Event::InitApply(obj) | Event::Apply(obj) => match K::apply(table, &obj) {
            Ok((key, partly)) => {
                if let Some(seen) = relist.seen.as_mut() {
                    seen.insert(key);
                }
                partly.map_or(Applied::Changed, Applied::PartlyRead)
            }
            Err(e) => Applied::Unreadable(e),
        },
        Event::Delete(obj) => {
            K::remove(table, &obj);
            Applied::Changed
        }
        Event::InitDone => Applied::Synced {
            remaining: relist.seen.take().map(|seen| K::retain(table, &seen)),
        },
    }
}

pub async fn watch_pods(client: Client, shared: Arc<Shared>) {
    let config = watcher::Config::default().fields(LIVE_PODS);
    watch::<Pod>(Api::all(client), config, shared).await
}

pub async fn watch_nodes(client: Client, shared: Arc<Shared>) {
    watch::<Node>(Api::all(client), watcher::Config::default(), shared).await
}

pub(super) async fn watch<K: Indexed>(api: Api<K>, config: watcher::Config, shared: Arc<Shared>)
where
    K::DynamicType: Default,
{
    let start = || {
        watcher::watcher(api.clone(), config.clone())
            .default_backoff()
            .boxed()
    };
    let mut stream = start();
    let mut relist = Relist::default();
    let mut retry_in = RELIST_BACKOFF_FIRST;
    loop {
        let event = match stream.try_next().await {
            Ok(Some(e)) => e,
            Ok(None) => break,
            Err(e) => {
                warn!(kind = K::KIND, error = %e, "watch error; listing again after a back-off");
                if is_forbidden(&e) {
                    K::forbidden(&shared);
                }
                shared
                    .metrics
                    .watch_errors
                    .get_or_create(&KindLabel { kind: K::KIND })
                    .inc();
                // A watch resumed from its last resourceVersion delivers what it missed only
                // as it catches up, and nothing says when it has: muster would decide meanwhile
                // on a view without, say, a pod kube-scheduler bound while the API server was
                // away (over-committing its node at a gang's quorum). So after an error the
                // watch starts over with a list, and no verb decides until that list is done.
                K::set_relisting(&shared, true);
                tokio::time::sleep(retry_in).await;
                retry_in = (retry_in * 2).min(RELIST_BACKOFF_MAX);
                stream = start();
                relist = Relist::default();
                continue;
            }
        };
        K::observe(&shared, &event);
        let applied = apply_event(&mut shared.table.lock(), &mut relist, event);
        shared.cache_changed();
        if applied.shows_delivery() {
            shared.metrics.touch_cache();
        }
        match applied {
            Applied::ListStarted | Applied::Changed => {}
            Applied::Unreadable(e) => {
                warn!(kind = K::KIND, error = %e, "ignoring an object muster cannot read");
                shared.metrics.count_unreadable(K::KIND);
            }
            Applied::PartlyRead(e) => {
                warn!(kind = K::KIND, error = %e, "kept an object with what muster can read of it");
                shared.metrics.count_unreadable(K::KIND);
            }
            Applied::Synced { remaining } => {
                if let Some(count) = remaining {
                    info!(kind = K::KIND, count, "cache synced");
                }
                K::set_synced(&shared);
                K::set_relisting(&shared, false);
                retry_in = RELIST_BACKOFF_FIRST;
            }
        }
        shared.flush_notices();
        // A gang disrupted whole is evicted once the watch shows kube-scheduler committed to
        // the preemption that disrupts it (evict-for-whole).
        shared.submit_committed_disruptions();
    }
}

#[cfg(test)]
mod tests;
