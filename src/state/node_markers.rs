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
    short: Mutex<HashMap<Arc<str>, Option<Instant>>>,
    wake: Notify,
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
        let mut short = self.short.lock();
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
        self.short.lock().remove(name);
    }

    /// Nodes short of the marker and due now; each is not due again for `IN_FLIGHT_FOR`.
    pub fn take_due(&self, now: Instant) -> Vec<Arc<str>> {
        let mut short = self.short.lock();
        let mut due = Vec::new();
        for (name, not_before) in short.iter_mut() {
            if not_before.is_none_or(|at| at <= now) {
                *not_before = Some(now + IN_FLIGHT_FOR);
                due.push(name.clone());
            }
        }
        due
    }

    /// A write for `name` failed: not tried again before `at` (unless the watch meanwhile shows
    /// the node published, or deleted).
    pub fn retry_at(&self, name: &str, at: Instant) {
        if let Some(not_before) = self.short.lock().get_mut(name) {
            *not_before = Some(at);
        }
    }

    /// Nodes short of the marker as the watch shows them.
    pub fn short_count(&self) -> usize {
        self.short.lock().len()
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
    fn a_failed_write_is_due_again_at_its_retry_time_and_a_write_never_settled_after_the_in_flight_time(
    ) {
        let m = NodeMarkers::default();
        m.turn_on();
        let t0 = Instant::now();
        m.observe("a", true);
        m.observe("b", true);
        assert_eq!(m.take_due(t0).len(), 2);
        m.retry_at("a", t0 + Duration::from_secs(5));
        assert_eq!(
            m.take_due(t0 + Duration::from_secs(5)),
            vec![Arc::from("a")]
        );
        // b's write neither failed nor showed in the watch (lost): written again.
        assert_eq!(m.take_due(t0 + IN_FLIGHT_FOR), vec![Arc::from("b")]);
    }
}
