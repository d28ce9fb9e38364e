//! The one shared state value handed to every handler and background task.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::cluster::binder::Binder;
use crate::cluster::events::EventSink;
use crate::cluster::evictor::DisruptionQueue;
use crate::cluster::leader::role::Leadership;
use crate::http::bindings::Bindings;
use crate::http::held::HeldBinds;
use crate::metrics::Metrics;
use crate::model::{GangKey, GangTable, ModelConfig};

/// Caches are synced once both watches completed their first list.
#[derive(Default)]
pub struct Readiness {
    pods: AtomicBool,
    nodes: AtomicBool,
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
    pub fn is_ready(&self) -> bool {
        self.pods_synced() && self.nodes_synced()
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
    /// Bind calls held open while their gang gathers.
    pub held: HeldBinds,
    /// The bindings muster is making, for bind calls about the same pods.
    pub bindings: Bindings,
    /// kube-scheduler's `httpTimeout` for muster: every bind call is answered well within it.
    pub extender_timeout: Duration,
    /// Whether this replica decides (always, without leader election).
    pub leadership: Leadership,
    /// Gangs preemption disrupts whole, for the eviction task.
    pub disruptions: DisruptionQueue,
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
        }
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
    /// held for gangs that lost seats (so a member without a seat answers at once).
    pub fn flush_notices(&self) {
        let (notices, released) = {
            let mut table = self.table.lock();
            (table.take_notices(), table.take_released())
        };
        // A standby's watches see the same objects as the leader's: only the leader reports.
        if !notices.is_empty() && self.leadership.is_leading(Instant::now()) {
            self.events.send_all(notices);
        }
        for gang in &released {
            self.held.wake(gang);
        }
    }

    /// Releases the seats of gangs past their timeout (called every second).
    pub fn expire_gangs(&self, now: Instant) {
        let (expired, notices) = {
            let mut t = self.table.lock();
            let expired = t.expire(now);
            (expired, t.take_notices())
        };
        for key in &expired {
            tracing::warn!(gang = %key, "gang timed out waiting for quorum; seats released");
            self.metrics.gang_timeouts.inc();
            self.wake_gang(key);
        }
        self.events.send_all(notices);
        self.bindings.purge(now);
    }
}
