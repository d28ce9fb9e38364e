//! What kube-scheduler tells muster about a member: the node names in its filter call are the
//! nodes its in-tree filters passed. Kept per member with their age, so the simulation never
//! plans a member onto a node its own filter call excluded.
//!
//! The list is evidence only when it is complete: kube-scheduler stops filtering once it has
//! found `numFeasibleNodesToFind` nodes, which is never fewer than 100 (or every node), so a
//! list of fewer than [`COMPLETE_BELOW`] names is everything that passed. A list of every node
//! excludes nothing and is not kept.
//! Memory is bounded: at most [`MAX_MEMBERS`] members, oldest dropped first, and nothing older
//! than the age the table allows.

use std::time::{Duration, Instant};

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::model::inputs::objects::{NodeName, PodUid};

/// kube-scheduler's `minFeasibleNodesToFind`.
pub const COMPLETE_BELOW: usize = 100;
/// Members whose evidence is kept at most.
pub const MAX_MEMBERS: usize = 4096;

struct Evidence {
    passed: HashSet<NodeName>,
    at: Instant,
}

#[derive(Default)]
pub(in crate::model) struct EvidenceStore {
    by_pod: HashMap<PodUid, Evidence>,
}

impl EvidenceStore {
    /// Whether a filter call that listed `listed` names, `listed_known` of them among the
    /// `known` nodes, says where the member may not go: the list is complete (fewer than
    /// [`COMPLETE_BELOW`]) and leaves some known node out. A list of every node excludes
    /// nothing, so it is not kept (a 5,000-node list would cost a set of 5,000 names per call
    /// for no information). Names muster does not know yet count toward completeness only.
    pub fn is_informative(listed: usize, listed_known: usize, known: usize) -> bool {
        listed < COMPLETE_BELOW && listed_known < known
    }

    /// The nodes `uid`'s latest filter call passed, at `now`.
    pub fn record(&mut self, uid: &PodUid, passed: HashSet<NodeName>, now: Instant) {
        if self.by_pod.len() >= MAX_MEMBERS && !self.by_pod.contains_key(uid) {
            let oldest = self
                .by_pod
                .iter()
                .min_by_key(|(_, e)| e.at)
                .map(|(u, _)| u.clone());
            if let Some(u) = oldest {
                self.by_pod.remove(&u);
            }
        }
        self.by_pod
            .insert(uid.clone(), Evidence { passed, at: now });
    }

    /// The nodes `uid` may be planned on, if its evidence is younger than `max_age`.
    pub fn passed(&self, uid: &str, now: Instant, max_age: Duration) -> Option<&HashSet<NodeName>> {
        self.by_pod
            .get(uid)
            .filter(|e| now.saturating_duration_since(e.at) < max_age)
            .map(|e| &e.passed)
    }

    pub fn forget(&mut self, uid: &str) {
        self.by_pod.remove(uid);
    }

    /// Drops evidence older than `max_age`.
    pub fn expire(&mut self, now: Instant, max_age: Duration) {
        self.by_pod
            .retain(|_, e| now.saturating_duration_since(e.at) < max_age);
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_pod.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> HashSet<NodeName> {
        names.iter().map(|n| NodeName::from(*n)).collect()
    }

    #[test]
    fn evidence_is_kept_with_its_age_and_expires() {
        let t0 = Instant::now();
        let ttl = Duration::from_secs(30);
        let mut s = EvidenceStore::default();
        let uid = PodUid::from("u1");
        s.record(&uid, set(&["a"]), t0);
        assert!(s.passed("u1", t0 + Duration::from_secs(29), ttl).is_some());
        assert!(s.passed("u1", t0 + ttl, ttl).is_none(), "too old to trust");
        assert!(s.passed("u2", t0, ttl).is_none());
        s.expire(t0 + ttl, ttl);
        assert_eq!(s.len(), 0);
        s.record(&uid, set(&["a"]), t0);
        s.forget("u1");
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn memory_is_bounded_by_dropping_the_oldest() {
        let t0 = Instant::now();
        let mut s = EvidenceStore::default();
        for i in 0..MAX_MEMBERS + 10 {
            let uid = PodUid::from(format!("u{i}"));
            s.record(&uid, set(&["a"]), t0 + Duration::from_millis(i as u64));
        }
        assert_eq!(s.len(), MAX_MEMBERS);
        let ttl = Duration::from_secs(3600);
        assert!(s.passed("u0", t0, ttl).is_none(), "the oldest went first");
        assert!(s
            .passed(&format!("u{}", MAX_MEMBERS + 9), t0, ttl)
            .is_some());
    }

    #[test]
    fn a_list_is_evidence_when_complete_and_short_of_every_node() {
        assert!(EvidenceStore::is_informative(99, 99, 5000));
        assert!(
            !EvidenceStore::is_informative(100, 100, 5000),
            "the search may have stopped early"
        );
        assert!(!EvidenceStore::is_informative(4, 4, 4), "every node passed");
        assert!(EvidenceStore::is_informative(2, 2, 4));
        // A node muster does not know yet was listed too.
        assert!(
            !EvidenceStore::is_informative(3, 2, 2),
            "every known node passed"
        );
        assert!(
            EvidenceStore::is_informative(2, 1, 2),
            "a known node was left out"
        );
    }
}
