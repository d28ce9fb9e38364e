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
//!
//! [`SchedulerVerdicts`] keeps the other kind of evidence: kube-scheduler's own verdict on a
//! member whose cycle never reached muster (its `PodScheduled=False` condition with reason
//! `Unschedulable`), for every filter muster does not simulate.

use std::sync::Arc;
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

/// Refusal texts muster gave one pod that are kept at most (a filter call gives one or two).
const MAX_TEXTS: usize = 8;

/// A gang member kube-scheduler refused, and what it said (its `PodScheduled=False`
/// `Unschedulable` condition): the planner's reason a gang holds nothing (`verbs::verdict`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::model) struct Refused {
    pub pod: String,
    pub message: Arc<str>,
}

/// kube-scheduler's verdicts on gang members, as evidence for the filters muster does not
/// simulate (volumes, DRA parts, out-of-tree plugins): a member it reported unschedulable in a
/// cycle that never reached muster fits nowhere until its situation can have changed.
///
/// Which verdicts count. kube-scheduler writes `PodScheduled=False, Unschedulable` with its
/// `FitError` message (`schedule_one.go` `handleSchedulingFailure`, `framework.FitError.Error`):
/// "0/N nodes are available: " and either the PreFilter message or, per reason, the count of
/// nodes refused for it — an extender's refusal among them, word for word (`FailedNodes` and
/// `FailedAndUnresolvableNodes` become those nodes' statuses in `findNodesThatPassExtenders`).
/// So in the every-pod mode, where kube-scheduler also writes the condition when muster's own
/// filter refused the pod, a message holding a text muster's filter gave that pod recently is
/// muster's verdict, not evidence; any other is a cycle that stopped before the extender. The
/// condition is written only when it changes (`UpdatePodCondition`), and its
/// `lastTransitionTime` stays put while the status stays False, so a verdict counts when the
/// watch shows the condition change (or a pod first seen with it), not by its timestamps.
///
/// A verdict stands until the member's situation can have changed: a node added or changed,
/// the pod itself changed, or a filter call for it reached muster (kube-scheduler's filters
/// passed some node), or, for a member with ResourceClaims, a DRA object it reads changed
/// ([`SchedulerVerdicts::situation_changed_for`]).
#[derive(Default)]
pub(in crate::model) struct SchedulerVerdicts {
    standing: HashMap<PodUid, std::sync::Arc<str>>,
    /// Per pod, the texts muster's filter refused it with lately, with their time.
    refusals: HashMap<PodUid, Vec<(std::sync::Arc<str>, Instant)>>,
}

impl SchedulerVerdicts {
    /// muster's filter refused `uid` on every node with `texts`.
    pub fn refused(&mut self, uid: &PodUid, texts: Vec<std::sync::Arc<str>>, now: Instant) {
        if self.refusals.len() >= MAX_MEMBERS && !self.refusals.contains_key(uid) {
            let oldest = self
                .refusals
                .iter()
                .min_by_key(|(_, t)| t.iter().map(|(_, at)| *at).max())
                .map(|(u, _)| u.clone());
            if let Some(u) = oldest {
                self.refusals.remove(&u);
            }
        }
        let kept = self.refusals.entry(uid.clone()).or_default();
        for text in texts {
            kept.retain(|(t, _)| *t != text);
            kept.push((text, now));
        }
        let over = kept.len().saturating_sub(MAX_TEXTS);
        kept.drain(..over);
    }

    /// Whether `message` (a PodScheduled condition of `uid`) holds a refusal muster's filter
    /// gave `uid` lately (texts older than the table's evidence age are expired).
    pub fn is_musters_own(&self, uid: &str, message: &str) -> bool {
        self.refusals
            .get(uid)
            .is_some_and(|texts| texts.iter().any(|(t, _)| message.contains(&**t)))
    }

    /// kube-scheduler refused `uid` in a cycle that never reached muster, saying `message`.
    pub fn stand(&mut self, uid: &PodUid, message: std::sync::Arc<str>) {
        if self.standing.len() >= MAX_MEMBERS && !self.standing.contains_key(uid) {
            return;
        }
        self.standing.insert(uid.clone(), message);
    }

    /// No verdict stands.
    pub fn is_empty(&self) -> bool {
        self.standing.is_empty()
    }

    /// kube-scheduler's standing verdict on `uid`, if any.
    pub fn standing(&self, uid: &str) -> Option<&std::sync::Arc<str>> {
        self.standing.get(uid)
    }

    /// `uid`'s situation changed (the pod changed, or a filter call for it reached muster):
    /// its verdict no longer stands.
    pub fn pod_changed(&mut self, uid: &str) {
        self.standing.remove(uid);
    }

    /// Something every member's verdict may depend on changed (a node added or changed): no
    /// verdict stands any longer.
    pub fn situation_changed(&mut self) {
        self.standing.clear();
    }

    /// Something the verdicts on some pods may depend on changed (a DRA slice, class, claim or
    /// template they read): the verdicts on the pods `touched` names no longer stand.
    pub fn situation_changed_for(&mut self, touched: impl Fn(&PodUid) -> bool) {
        self.standing.retain(|uid, _| !touched(uid));
    }

    /// The pod is gone.
    pub fn forget(&mut self, uid: &str) {
        self.standing.remove(uid);
        self.refusals.remove(uid);
    }

    /// Drops refusal texts older than `max_age`.
    pub fn expire(&mut self, now: Instant, max_age: Duration) {
        self.refusals.retain(|_, texts| {
            texts.retain(|(_, at)| now.saturating_duration_since(*at) < max_age);
            !texts.is_empty()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_holding_musters_own_refusal_is_not_evidence() {
        let t0 = Instant::now();
        let age = Duration::from_secs(30);
        let mut v = SchedulerVerdicts::default();
        let uid = PodUid::from("u1");
        let ours = "gang ml/g: 1 of 2 members placed";
        v.refused(&uid, vec![std::sync::Arc::from(ours)], t0);
        let by_muster = format!("0/3 nodes are available: 3 {ours}. preemption: not helpful.");
        assert!(v.is_musters_own("u1", &by_muster));
        let outside = "0/3 nodes are available: persistentvolumeclaim \"data\" not found.";
        assert!(!v.is_musters_own("u1", outside));
        assert!(!v.is_musters_own("u2", &by_muster), "another pod");
        v.expire(t0 + age - Duration::from_millis(1), age);
        assert!(v.is_musters_own("u1", &by_muster));
        v.expire(t0 + age, age);
        assert!(
            !v.is_musters_own("u1", &by_muster),
            "too old to be a cycle's of now"
        );
        assert!(v.refusals.is_empty());
    }

    #[test]
    fn a_verdict_stands_until_the_pod_or_the_cluster_changes() {
        let mut v = SchedulerVerdicts::default();
        let (a, b) = (PodUid::from("a"), PodUid::from("b"));
        v.stand(&a, "no volume".into());
        v.stand(&b, "no volume".into());
        assert_eq!(v.standing("a").map(|m| &**m), Some("no volume"));
        v.pod_changed("a");
        assert!(v.standing("a").is_none());
        assert!(v.standing("b").is_some());
        v.situation_changed();
        assert!(v.standing("b").is_none());
        v.stand(&a, "x".into());
        v.forget("a");
        assert!(v.standing("a").is_none());
    }

    #[test]
    fn refusal_texts_are_bounded_per_pod() {
        let t0 = Instant::now();
        let mut v = SchedulerVerdicts::default();
        let uid = PodUid::from("u");
        for i in 0..MAX_TEXTS + 3 {
            v.refused(&uid, vec![format!("text {i}").into()], t0);
        }
        assert_eq!(v.refusals["u"].len(), MAX_TEXTS);
        assert!(!v.is_musters_own("u", "text 0"), "the oldest went first");
        assert!(v.is_musters_own("u", &format!("text {}", MAX_TEXTS + 2)));
    }

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
