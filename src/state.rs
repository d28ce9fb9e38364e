//! The one shared state value handed to every handler and background task.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use dashmap::DashMap;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::cluster::binder::Binder;
use crate::cluster::events::EventSink;
use crate::metrics::Metrics;
use crate::model::{GangKey, GangTable, ModelConfig, PodUid};

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
    /// Bind calls held open while their gang gathers, woken when it is placed or released.
    /// Sharded maps are right here: each entry is independent and touched by few tasks.
    pub gang_wakers: DashMap<GangKey, Arc<Notify>>,
    /// Result of a binding muster made for a member whose own bind call is being held,
    /// picked up by that call (and purged if nobody does).
    pub bind_outcomes: DashMap<PodUid, (Instant, Result<(), String>)>,
}

impl Shared {
    pub fn new(config: ModelConfig, binder: Arc<dyn Binder>, events: EventSink) -> Self {
        Shared {
            table: Mutex::new(GangTable::new(config)),
            readiness: Readiness::default(),
            metrics: Metrics::new(events.dropped_counter()),
            events,
            binder,
            gang_wakers: DashMap::new(),
            bind_outcomes: DashMap::new(),
        }
    }

    pub fn waker(&self, gang: &GangKey) -> Arc<Notify> {
        self.gang_wakers.entry(gang.clone()).or_default().clone()
    }

    /// Wakes every bind call held for this gang.
    pub fn wake_gang(&self, gang: &GangKey) {
        if let Some((_, n)) = self.gang_wakers.remove(gang) {
            n.notify_waiters();
        }
    }

    /// Hands notices the table produced to the Event publisher.
    pub fn flush_notices(&self) {
        let notices = self.table.lock().take_notices();
        if !notices.is_empty() {
            self.events.send_all(notices);
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
        // Outcomes nobody picked up (the held call had already given up).
        self.bind_outcomes
            .retain(|_, (at, _)| now.saturating_duration_since(*at).as_secs() < 60);
    }
}
