//! Nodes short of the gang marker, for the leader to publish it on (`cluster::node_marker`):
//! filled by the node watch on every replica, drained by the leader's publishing task.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::Notify;

/// A node written for is not written again before this, whatever the watch shows meanwhile (an
/// update from before the write may still arrive).
pub const IN_FLIGHT_FOR: Duration = Duration::from_secs(10);

/// Nodes the watch showed short of the marker, each with the time before which it is not
/// written (again). Empty, and never filled, unless publishing is on.
#[derive(Default)]
pub struct NodeMarkers {
    on: AtomicBool,
    inner: Mutex<Inner>,
    wake: Notify,
}

#[derive(Default)]
struct Inner {
    short: HashMap<Arc<str>, Option<Instant>>,
    /// Set when a write was refused or failed: until then nothing is written, and from then on
    /// one node at a time (a probe), until a write goes through. So a cluster of 10,000 nodes
    /// whose RBAC lacks `nodes/status`, or an API server in trouble, costs one request per
    /// pause, not one per node.
    paused_until: Option<Instant>,
}

impl NodeMarkers {
    /// Publishing is on (the gang-members mode with `--publish-node-marker`): set before the
    /// node watch starts.
    pub fn turn_on(&self) {
        self.on.store(true, Ordering::Relaxed);
    }

    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// The watch delivered node `name` (added, changed, or listed), `short` of the marker or not
    /// (`cluster::node_marker::marker_short`).
    pub fn observe(&self, name: &str, short_of_marker: bool) {
        if !self.is_on() {
            return;
        }
        let short = &mut self.inner.lock().short;
        if short_of_marker {
            if !short.contains_key(name) {
                short.insert(Arc::from(name), None);
                self.wake.notify_one();
            }
        } else {
            short.remove(name);
        }
    }

    /// The watch delivered `node`'s deletion.
    pub fn forget(&self, name: &str) {
        self.inner.lock().short.remove(name);
    }

    /// Nodes short of the marker and due now, each not due again for `IN_FLIGHT_FOR`; while
    /// writes are paused ([`NodeMarkers::pause_until`]) none, and once the pause is over one
    /// (the probe), with no other before its answer or `IN_FLIGHT_FOR`.
    pub fn take_due(&self, now: Instant) -> Vec<Arc<str>> {
        let mut inner = self.inner.lock();
        let probe = match inner.paused_until {
            Some(until) if now < until => return Vec::new(),
            Some(_) => true,
            None => false,
        };
        let mut due = Vec::new();
        for (name, not_before) in inner.short.iter_mut() {
            if not_before.is_none_or(|at| at <= now) {
                *not_before = Some(now + IN_FLIGHT_FOR);
                due.push(name.clone());
                if probe {
                    break;
                }
            }
        }
        if probe && !due.is_empty() {
            // No second probe before this one's answer (which pauses or resumes).
            inner.paused_until = Some(now + IN_FLIGHT_FOR);
        }
        due
    }

    /// The write for `failed` was refused or failed: nothing is written before `until`, then
    /// one node at a time until a write goes through ([`NodeMarkers::resume`]). Every node
    /// still short is due again then, those whose writes were taken but not sent included;
    /// `failed` itself only after the others' turn, so a refusal of one node's write (an
    /// admission rule about that node) does not stop the rest.
    pub fn pause_until(&self, until: Instant, failed: &str) {
        let mut inner = self.inner.lock();
        inner.paused_until = Some(until);
        for (name, not_before) in inner.short.iter_mut() {
            *not_before = (**name == *failed).then_some(until + IN_FLIGHT_FOR);
        }
    }

    /// A write went through: the other nodes short of the marker are written at once. Whether
    /// writes were paused before.
    pub fn resume(&self) -> bool {
        let was_paused = self.inner.lock().paused_until.take().is_some();
        if was_paused {
            self.wake.notify_one();
        }
        was_paused
    }

    /// Nodes short of the marker as the watch shows them.
    pub fn short_count(&self) -> usize {
        self.inner.lock().short.len()
    }

    pub async fn woken(&self) {
        self.wake.notified().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_it_keeps_nothing() {
        let m = NodeMarkers::default();
        m.observe("n", true);
        assert_eq!(m.short_count(), 0);
        assert!(m.take_due(Instant::now()).is_empty());
    }

    #[test]
    fn a_short_node_is_due_once_until_its_write_settles_and_published_or_deleted_it_is_dropped() {
        let m = NodeMarkers::default();
        m.turn_on();
        let t0 = Instant::now();
        m.observe("a", true);
        m.observe("b", true);
        let mut due = m.take_due(t0);
        due.sort();
        assert_eq!(due, vec![Arc::from("a"), Arc::from("b")]);
        // An update from before the write: still short, but its write is in flight.
        m.observe("a", true);
        assert!(m.take_due(t0 + Duration::from_secs(1)).is_empty());
        // Written: the watch shows it published.
        m.observe("a", false);
        m.forget("b");
        assert_eq!(m.short_count(), 0);
        assert!(m.take_due(t0 + IN_FLIGHT_FOR * 2).is_empty());
    }

    #[test]
    fn a_write_never_settled_is_due_again_after_the_in_flight_time() {
        let m = NodeMarkers::default();
        m.turn_on();
        let t0 = Instant::now();
        m.observe("a", true);
        m.observe("b", true);
        assert_eq!(m.take_due(t0).len(), 2);
        m.observe("a", false);
        // b's write neither failed nor showed in the watch (lost): written again.
        assert_eq!(m.take_due(t0 + IN_FLIGHT_FOR), vec![Arc::from("b")]);
    }

    #[test]
    fn a_refused_write_pauses_every_node_then_one_probe_at_a_time_until_one_goes_through() {
        let m = NodeMarkers::default();
        m.turn_on();
        let t0 = Instant::now();
        for n in ["a", "b", "c", "d"] {
            m.observe(n, true);
        }
        assert_eq!(m.take_due(t0).len(), 4);
        // The first answer is a refusal (of a): the batch's other writes are dropped unsent.
        let pause = Duration::from_secs(10);
        m.pause_until(t0 + pause, "a");
        assert!(m.take_due(t0 + pause / 2).is_empty(), "paused");
        let probe = m.take_due(t0 + pause);
        assert_eq!(probe.len(), 1, "one probe: {probe:?}");
        assert_ne!(
            probe[0],
            Arc::from("a"),
            "the refused node's turn comes last"
        );
        assert!(
            m.take_due(t0 + pause).is_empty(),
            "one probe in flight at a time"
        );
        // Refused again: the next probe after the next pause, and never the whole set.
        m.pause_until(t0 + pause * 2, &probe[0]);
        assert!(m.take_due(t0 + pause + Duration::from_secs(1)).is_empty());
        let second = m.take_due(t0 + pause * 2);
        assert_eq!(second.len(), 1);
        assert_ne!(second[0], probe[0]);
        // It went through: the other nodes short of the marker are due at once; the node refused
        // last and the probe itself after the in-flight time.
        assert!(m.resume());
        let rest = m.take_due(t0 + pause * 2);
        assert_eq!(rest.len(), 2);
        for n in &rest {
            m.observe(n, false);
        }
        assert_eq!(m.take_due(t0 + pause * 2 + IN_FLIGHT_FOR).len(), 2);
        assert!(!m.resume(), "not paused any more");
    }
}
