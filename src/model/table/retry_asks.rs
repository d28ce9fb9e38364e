//! Pods muster refused for a reason whose end kube-scheduler does not see: room that seats
//! held, a node not in muster's cache yet, a preemptor the watch had not delivered yet.
//! kube-scheduler re-queues a refused pod only on a cluster event, and none of these ending is
//! one, so each pod is remembered (at most [`MAX_REFUSED_REMEMBERED`] per reason) until its
//! reason ends, then asked to retry (`NoticeKind::Retry`) and forgotten. The fields are written
//! only through the methods here.

use rustc_hash::FxHashSet as HashSet;

use crate::model::inputs::objects::PodUid;
use crate::model::messages;

/// Pods remembered as refused for held room, and as refused for unknown nodes, at most each
/// (the ones past it are not told; kube-scheduler's own periodic flush still retries them).
pub(in crate::model) const MAX_REFUSED_REMEMBERED: usize = 10_000;

#[derive(Default)]
pub(in crate::model) struct RetryAsks {
    /// Pods the filter refused because gang seats held the room they needed: asked to retry
    /// when seats are released.
    refused_for_seats: HashSet<PodUid>,
    /// Seats were released since the last [`RetryAsks::take_due`].
    seats_released: bool,
    /// Pods the filter refused while a node kube-scheduler offered for them was not in
    /// muster's cache yet (its watch behind kube-scheduler's informer, e.g. after a restart of
    /// muster or of the API server): asked to retry when a node muster did not know arrives.
    refused_for_unknown_nodes: HashSet<PodUid>,
    /// A node muster did not know arrived since the last [`RetryAsks::take_due`].
    nodes_arrived: bool,
    /// Gang members whose preemption was refused because the watch had not delivered them
    /// yet: asked to retry when it does.
    when_seen: HashSet<PodUid>,
}

impl RetryAsks {
    /// The filter refused `uid` because seats held the room it needed.
    pub fn refused_for_seats(&mut self, uid: &PodUid) {
        if self.refused_for_seats.len() < MAX_REFUSED_REMEMBERED {
            self.refused_for_seats.insert(uid.clone());
        }
    }

    /// The filter refused `uid` while a node offered for it was not in muster's cache.
    pub fn refused_for_unknown_node(&mut self, uid: &PodUid) {
        if self.refused_for_unknown_nodes.len() < MAX_REFUSED_REMEMBERED {
            self.refused_for_unknown_nodes.insert(uid.clone());
        }
    }

    /// `uid`'s preemption was refused because the watch had not delivered it yet.
    pub fn retry_when_seen(&mut self, uid: &PodUid) {
        if self.when_seen.len() < MAX_REFUSED_REMEMBERED {
            self.when_seen.insert(uid.clone());
        }
    }

    /// The watch delivered `uid`: whether it waited to be seen (then it is forgotten).
    pub fn seen(&mut self, uid: &PodUid) -> bool {
        !self.when_seen.is_empty() && self.when_seen.remove(uid)
    }

    /// Seats were released: the pods refused for held room are due.
    pub fn note_seats_released(&mut self) {
        self.seats_released = true;
    }

    /// Whether seats were released since the last [`RetryAsks::take_due`].
    pub fn seats_released(&self) -> bool {
        self.seats_released
    }

    /// Sets back what [`RetryAsks::seats_released`] said before a step that was undone (a
    /// gang's seats given up and taken again as they were release nothing).
    pub fn restore_seats_released(&mut self, was: bool) {
        self.seats_released = was;
    }

    /// A node muster did not know arrived: the pods refused for unknown nodes are due.
    pub fn note_node_arrived(&mut self) {
        self.nodes_arrived = true;
    }

    /// Pod `uid` is gone: nothing to ask of it, and its place in the bounded sets goes to
    /// others.
    pub fn forget(&mut self, uid: &str) {
        self.refused_for_seats.remove(uid);
        self.refused_for_unknown_nodes.remove(uid);
    }

    /// The pods due to be asked to retry, each with the message that says why: those refused
    /// for held room if seats were released, then those refused for unknown nodes if a node
    /// arrived. Both are forgotten.
    pub fn take_due(&mut self) -> Vec<(PodUid, &'static str)> {
        let mut retry: Vec<(PodUid, &'static str)> = Vec::new();
        if std::mem::take(&mut self.seats_released) {
            let refused = std::mem::take(&mut self.refused_for_seats);
            retry.extend(refused.into_iter().map(|u| (u, messages::RETRY)));
        }
        if std::mem::take(&mut self.nodes_arrived) {
            let refused = std::mem::take(&mut self.refused_for_unknown_nodes);
            retry.extend(
                refused
                    .into_iter()
                    .map(|u| (u, messages::RETRY_AFTER_NODE_ARRIVED)),
            );
        }
        retry
    }

    /// How many pods are remembered as refused for unknown nodes (for tests of the bound).
    #[cfg(test)]
    pub fn refused_for_unknown_nodes(&self) -> usize {
        self.refused_for_unknown_nodes.len()
    }
}
