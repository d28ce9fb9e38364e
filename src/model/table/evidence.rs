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
mod tests;
