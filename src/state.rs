//! The one shared state value handed to every handler and background task, and the handles it
//! holds: the binder, the bindings muster is making (`bindings`), the bind calls held open
//! (`held`), the Event sink, the disruption queue and the leadership.
//!
//! State holds what is shared; the tasks that act on it (`cluster`'s watches, publisher,
//! evictor and election, `binding`'s calls, `http`'s handlers) import it, never the other way:
//! this module imports only the model and the metrics (`model::tests::module_map` checks it).

pub mod binder;
pub mod bindings;
pub mod disruptions;
pub mod event_sink;
pub mod held;
pub mod leadership;
pub mod node_markers;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use self::binder::Binder;
use self::bindings::Bindings;
use self::disruptions::DisruptionQueue;
use self::event_sink::EventSink;
use self::held::HeldBinds;
use self::leadership::Leadership;
use self::node_markers::NodeMarkers;
use crate::metrics::Metrics;
use crate::model::{GangKey, GangTable, ModelConfig, PodGroupApi};

/// Caches are synced once both watches completed their first list, and the first list of each
/// PodGroup API the cluster served at start (when muster runs with PodGroup discovery).
#[derive(Default)]
pub struct Readiness {
    pods: AtomicBool,
    nodes: AtomicBool,
    /// The pod or node watch failed and is listing again (see `cluster::watch`): until its
    /// list is done, muster's view may lack what changed meanwhile (a pod kube-scheduler bound
    /// while the API server was away), so no verb decides on it (no-overcommit).
    pods_relisting: AtomicBool,
    nodes_relisting: AtomicBool,
    pod_groups: Mutex<PodGroupsPending>,
}

/// What readiness still waits for of the PodGroup APIs: a restarted muster must not decide a gang
/// by its pods' keys before it has read the gang's PodGroup. Nothing by default (tests and
/// benches that build a [`Shared`] by hand never run discovery).
#[derive(Default)]
struct PodGroupsPending {
    /// The first discovery round is under way.
    discovery: bool,
    /// APIs that round found served whose first list has not completed.
    lists: BTreeSet<PodGroupApi>,
    /// APIs whose first list completed (or that need no waiting for): a watch that listed
    /// before the round that tells readiness ended is not waited for again.
    listed: BTreeSet<PodGroupApi>,
}

impl Readiness {
    pub fn set_pods_synced(&self) {
        self.pods.store(true, Ordering::Release);
    }
    pub fn set_nodes_synced(&self) {
        self.nodes.store(true, Ordering::Release);
    }
    pub fn pods_synced(&self) -> bool {
        self.pods.load(Ordering::Acquire)
    }
    pub fn nodes_synced(&self) -> bool {
        self.nodes.load(Ordering::Acquire)
    }
    pub fn set_pods_relisting(&self, on: bool) {
        self.pods_relisting.store(on, Ordering::Release);
    }
    pub fn set_nodes_relisting(&self, on: bool) {
        self.nodes_relisting.store(on, Ordering::Release);
    }
    /// The watch (`pods` or `nodes`) listing again after an error, if one is.
    pub fn relisting(&self) -> Option<&'static str> {
        if self.pods_relisting.load(Ordering::Acquire) {
            Some("pods")
        } else if self.nodes_relisting.load(Ordering::Acquire) {
            Some("nodes")
        } else {
            None
        }
    }
    /// Readiness waits for the first PodGroup discovery round (called before it starts).
    pub fn expect_pod_group_discovery(&self) {
        self.pod_groups.lock().discovery = true;
    }
    /// The first discovery round found `served`: readiness waits for their first lists. Later
    /// rounds change nothing (a CRD installed later makes no ready replica unready).
    pub fn pod_group_discovery_done(&self, served: impl IntoIterator<Item = PodGroupApi>) {
        let mut p = self.pod_groups.lock();
        if std::mem::take(&mut p.discovery) {
            let waiting: Vec<PodGroupApi> = served
                .into_iter()
                .filter(|a| !p.listed.contains(a))
                .collect();
            p.lists.extend(waiting);
        }
    }
    /// Readiness still waits for the first list of `api`.
    pub fn pod_group_api_pending(&self, api: PodGroupApi) -> bool {
        self.pod_groups.lock().lists.contains(&api)
    }
    /// `api`'s first list completed, its watch was stopped, or muster may not list it: nothing
    /// more to wait for.
    pub fn set_pod_group_api_listed(&self, api: PodGroupApi) {
        let mut p = self.pod_groups.lock();
        p.lists.remove(&api);
        p.listed.insert(api);
    }
    /// What readiness still waits for of the PodGroup APIs, if anything.
    pub fn pod_groups_pending(&self) -> Option<String> {
        let p = self.pod_groups.lock();
        if p.discovery {
            return Some("PodGroup API discovery under way".into());
        }
        if p.lists.is_empty() {
            return None;
        }
        let apis: Vec<&str> = p.lists.iter().map(|a| a.api_version()).collect();
        Some(format!("PodGroups not listed yet: {}", apis.join(", ")))
    }
    pub fn is_ready(&self) -> bool {
        self.pods_synced() && self.nodes_synced() && self.pod_groups_pending().is_none()
    }
}

/// The `httpTimeout` of the shipped scheduler configurations (`scheduler-config/`).
pub const DEFAULT_EXTENDER_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything the verbs share.
///
/// The gang table sits behind ONE mutex on purpose: a gang decision reads the free room of many
/// nodes and the seats of every competing gang at once, and must act on that same view (seat,
/// assume). Sharded maps would give torn reads and let two gangs split the same room. The lock
/// is held for the decision only (microseconds to about a millisecond at 5,000 nodes), never
/// across an `.await`: API calls happen after it is released.
pub struct Shared {
    pub table: Mutex<GangTable>,
    pub readiness: Readiness,
    pub metrics: Metrics,
    pub events: EventSink,
    pub binder: Arc<dyn Binder>,
    /// Bind calls held open while their gang waits for quorum.
    pub held: HeldBinds,
    /// The bindings muster is making, for bind calls about the same pods.
    pub bindings: Bindings,
    /// kube-scheduler's `httpTimeout` for muster: every bind call is answered well within it.
    pub extender_timeout: Duration,
    /// Whether this replica decides (always, without leader election).
    pub leadership: Leadership,
    /// Gangs preemption disrupts whole, for the eviction task.
    pub disruptions: DisruptionQueue,
    /// Nodes short of the gang marker, for the leader to publish it on (`cluster::node_marker`).
    pub node_markers: NodeMarkers,
    /// Counts watch events applied to the table, so that a verb asked about an object the
    /// watch has not delivered yet can wait for the next one instead of failing the pod.
    cache_generation: tokio::sync::watch::Sender<u64>,
    /// This replica has not yet looked for gangs left partly bound (set at start and at every
    /// take-over; see [`Shared::start_deciding`]).
    repair_due: AtomicBool,
}

impl Shared {
    pub fn new(config: ModelConfig, binder: Arc<dyn Binder>, events: EventSink) -> Self {
        Shared {
            table: Mutex::new(GangTable::new(config)),
            readiness: Readiness::default(),
            metrics: Metrics::new(events.dropped_counter()),
            events,
            binder,
            held: HeldBinds::default(),
            bindings: Bindings::default(),
            extender_timeout: DEFAULT_EXTENDER_TIMEOUT,
            leadership: Leadership::sole(),
            disruptions: DisruptionQueue::default(),
            node_markers: NodeMarkers::default(),
            cache_generation: tokio::sync::watch::Sender::new(0),
            repair_due: AtomicBool::new(true),
        }
    }

    /// A watch applied an event to the table: wakes the calls waiting for it.
    pub fn cache_changed(&self) {
        self.cache_generation
            .send_modify(|g| *g = g.wrapping_add(1));
    }

    /// Calls waiting for the next watch event (for tests).
    pub fn cache_waiters(&self) -> usize {
        self.cache_generation.receiver_count()
    }

    /// A receiver that sees every later [`Shared::cache_changed`]; take it *before* looking at
    /// the table, so that an event applied in between is not missed.
    pub fn cache_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.cache_generation.subscribe()
    }

    /// kube-scheduler gives up on a call to muster after `timeout` (its `httpTimeout`).
    pub fn with_extender_timeout(mut self, timeout: Duration) -> Self {
        self.extender_timeout = timeout;
        self
    }

    /// With leader election: decides only while the election says so.
    pub fn with_leadership(mut self, leadership: Leadership) -> Self {
        self.leadership = leadership;
        self
    }

    /// This replica takes over as leader: it decides from a table rebuilt from its caches,
    /// as a restart would, not from anything it believed while standing by or led before.
    pub fn take_over(&self) {
        let mut table = self.table.lock();
        *table = table.rebuilt();
        // Under the same lock: no verb decides from the rebuilt table before the repair.
        self.repair_due.store(true, Ordering::Release);
    }

    /// Called before every decision of a replica that leads with synced caches (every verb,
    /// every gather round). The first one after a start or a take-over first finishes the
    /// gangs found partly bound — muster killed, or the Lease lost, in the middle of a gang's
    /// bindings — ahead of every other decision: room is held for their remaining members,
    /// or, where it is gone, their bound part is reported and (mode `gang`) evicted
    /// (never-half; `model::verbs::repair`). Later calls only read a flag.
    pub fn start_deciding(&self, now: Instant) {
        if !self.repair_due.load(Ordering::Acquire) {
            return;
        }
        let found = {
            let mut table = self.table.lock();
            // A verb that saw the flag cleared while the repair runs waits for this lock
            // before it decides.
            if !self.repair_due.swap(false, Ordering::AcqRel) {
                return;
            }
            table.repair_partly_bound(now);
            table.take_partly_bound()
        };
        self.report_partly_bound(found);
        self.submit_committed_disruptions();
        self.flush_notices();
    }

    /// Hands the evictor every gang disruption kube-scheduler has committed to since the last call
    /// (the watch saw a victim on the chosen node deleted, or the preemptor nominated there): a
    /// gang is never evicted on the preempt answer alone (evict-for-whole); and, once the caches
    /// are synced, the rest of every gang whose member kube-scheduler preempted without muster's
    /// say (`model::verbs::unseen_preemption`). Called after every watch event and preempt
    /// decision, and every second.
    pub fn submit_committed_disruptions(&self) {
        let committed = {
            let mut table = self.table.lock();
            // Read the rest of a gang only from complete caches (evict-for-whole).
            if self.readiness.is_ready() {
                table.disrupt_for_unseen_preemptions();
            }
            table.take_disruptions()
        };
        for d in committed {
            self.disruptions.submit(d);
        }
    }

    /// Logs and counts what was done about gangs found partly bound.
    fn report_partly_bound(&self, found: Vec<crate::model::PartlyBound>) {
        use crate::model::PartlyBoundOutcome as O;
        for f in found {
            self.metrics
                .partly_bound_gangs
                .get_or_create(&crate::metrics::OutcomeLabel {
                    outcome: f.outcome.label(),
                })
                .inc();
            match &f.outcome {
                O::Finishing { seats } => tracing::warn!(
                    gang = %f.gang, bound = f.bound, quorum = f.quorum, rest = seats.len(),
                    "gang found partly bound: room held for the rest before any other decision"
                ),
                O::Evicting { members, why } => tracing::warn!(
                    gang = %f.gang, bound = f.bound, quorum = f.quorum, evicted = members.len(), %why,
                    "gang found partly bound and the rest cannot be placed: evicting its bound members"
                ),
                O::Reported { why } => tracing::warn!(
                    gang = %f.gang, bound = f.bound, quorum = f.quorum, %why,
                    "gang found partly bound and the rest cannot be placed: its bound members keep running (disruption mode pod)"
                ),
            }
        }
    }

    /// This replica lost the Lease: its seats and assumptions are the new leader's to rebuild,
    /// and its held bind calls fail now (kube-scheduler retries them on the new leader).
    pub fn step_down(&self) {
        {
            let mut table = self.table.lock();
            *table = table.rebuilt();
        }
        self.held.wake_all();
    }

    /// Wakes every bind call held for this gang.
    pub fn wake_gang(&self, gang: &GangKey) {
        self.held.wake(gang);
    }

    /// Hands notices the table produced to the Event publisher, and wakes the bind calls
    /// held for gangs that lost seats (so a member without a seat answers at once) or whose
    /// awaited room was freed (so they decide again).
    pub fn flush_notices(&self) {
        let (notices, released, room_freed) = {
            let mut table = self.table.lock();
            (
                table.take_notices(),
                table.take_released(),
                table.take_room_freed(),
            )
        };
        // A standby's watches see the same objects as the leader's: only the leader reports.
        if !notices.is_empty() && self.leadership.is_leading(Instant::now()) {
            self.events.send_all(notices);
        }
        for gang in released.iter().chain(&room_freed) {
            self.held.wake(gang);
        }
    }

    /// Releases the seats of gangs past their timeout (called every second).
    pub fn expire_gangs(&self, now: Instant) {
        let (expired, notices, partly_bound) = {
            let mut t = self.table.lock();
            let expired = t.expire(now);
            (expired, t.take_notices(), t.take_partly_bound())
        };
        if !partly_bound.is_empty() {
            self.report_partly_bound(partly_bound);
        }
        // Also the rest of a gang preempted without muster's say, once the caches are synced
        // (a quiet cluster may send no watch event after that).
        self.submit_committed_disruptions();
        for key in &expired {
            tracing::warn!(gang = %key, "gang timed out waiting for quorum; seats released");
            self.metrics.gang_timeouts.inc();
            self.wake_gang(key);
        }
        self.events.send_all(notices);
        self.bindings.purge(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synced() -> Readiness {
        let r = Readiness::default();
        r.set_pods_synced();
        r.set_nodes_synced();
        r
    }

    #[test]
    fn without_pod_group_discovery_the_pod_and_node_lists_make_it_ready() {
        assert!(!Readiness::default().is_ready());
        assert!(synced().is_ready());
    }

    #[test]
    fn it_waits_for_the_first_discovery_round_and_the_first_list_of_each_api_it_found() {
        let r = synced();
        r.expect_pod_group_discovery();
        assert!(!r.is_ready());
        assert_eq!(
            r.pod_groups_pending().as_deref(),
            Some("PodGroup API discovery under way")
        );
        r.pod_group_discovery_done([PodGroupApi::Volcano, PodGroupApi::Kubernetes]);
        assert_eq!(
            r.pod_groups_pending().as_deref(),
            Some("PodGroups not listed yet: scheduling.volcano.sh/v1beta1, scheduling.k8s.io/v1beta1")
        );
        r.set_pod_group_api_listed(PodGroupApi::Volcano);
        assert!(!r.is_ready());
        r.set_pod_group_api_listed(PodGroupApi::Kubernetes);
        assert!(r.is_ready());
        // An API found in a later round (a CRD installed later) makes a ready replica no less so.
        r.pod_group_discovery_done([PodGroupApi::SchedulerPlugins]);
        assert!(r.is_ready());
    }

    /// The round that tells readiness may come after a watch started by an earlier,
    /// inconclusive round has listed: that list is not waited for again (it would never come).
    #[test]
    fn a_first_list_done_before_discovery_concluded_is_not_waited_for_again() {
        let r = synced();
        r.expect_pod_group_discovery();
        r.set_pod_group_api_listed(PodGroupApi::Kubernetes);
        r.pod_group_discovery_done([PodGroupApi::Kubernetes, PodGroupApi::Volcano]);
        assert_eq!(
            r.pod_groups_pending().as_deref(),
            Some("PodGroups not listed yet: scheduling.volcano.sh/v1beta1")
        );
        r.set_pod_group_api_listed(PodGroupApi::Volcano);
        assert!(r.is_ready());
    }

    #[test]
    fn with_no_pod_group_api_served_it_is_ready_once_discovery_has_answered() {
        let r = synced();
        r.expect_pod_group_discovery();
        r.pod_group_discovery_done([]);
        assert!(r.is_ready());
    }
}
