//! Gangs a preempt decision disrupts whole, kept in the table until kube-scheduler commits to
//! the preemption and then until the evictor takes them (see `verbs::preempt::commit`); and the
//! preemptions kube-scheduler made that muster has answered for, or has yet to (members it
//! preempted without muster's say, `verbs::unseen_preemption`).

use std::time::Instant;

use rustc_hash::FxHashSet as HashSet;

use crate::model::inputs::membership::GangKey;
use crate::model::inputs::objects::PodUid;
use crate::model::notice::PodRef;

/// A running gang the kept candidate disrupts whole: muster evicts `others` (the members not
/// among the candidate's victims) through the Eviction API, once kube-scheduler commits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GangDisruption {
    pub gang: GangKey,
    pub others: Vec<PodRef>,
    pub message: String,
}

/// One gang to disrupt whole once kube-scheduler commits to the preemption.
pub(in crate::model) struct PendingDisruption {
    pub disruption: GangDisruption,
    pub node: String,
    /// The kept candidate's victims (on `node`, per the cache).
    pub victims: Vec<PodUid>,
    pub preemptor: PodUid,
    /// The preemptor was nominated to `node` already when muster answered (in the
    /// gang-members mode muster's gatherer nominates members to their seats): that nomination
    /// is not kube-scheduler acting on this preemption.
    pub nominated_before: bool,
    pub since: Instant,
}

/// Disruptions waiting for kube-scheduler's commitment, and those committed, for the evictor;
/// the victims answered for, and the members preempted without muster's say not handed on yet.
/// Every field is written only through the methods below, so what moves a disruption from
/// pending to committed, and what marks a victim answered for, is visible here.
#[derive(Default)]
pub(in crate::model) struct Disruptions {
    pending: Vec<PendingDisruption>,
    committed: Vec<GangDisruption>,
    /// Victims of kube-scheduler's preemptions already answered for: muster's own decisions'
    /// victims (at the commit) and those a preemption without muster's say was noticed on.
    /// Forgotten with the pod.
    answered: HashSet<PodUid>,
    /// Members preempted without muster's say, for the evictor once the caches are synced.
    unseen: Vec<UnseenPreemption>,
}

impl Disruptions {
    /// Keeps `p` until kube-scheduler commits to it: a newer decision for the same gang
    /// replaces the older one.
    pub fn keep_pending(&mut self, p: PendingDisruption) {
        self.pending
            .retain(|q| q.disruption.gang != p.disruption.gang);
        self.pending.push(p);
    }

    /// How many disruptions wait for kube-scheduler's commitment.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Takes the pending disruptions `committed` says kube-scheduler acts on, in the order kept;
    /// the others stay pending.
    pub fn take_pending_where(
        &mut self,
        committed: impl FnMut(&PendingDisruption) -> bool,
    ) -> Vec<PendingDisruption> {
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(committed);
        self.pending = later;
        now
    }

    /// Keeps only the pending disruptions `keep` says are still worth waiting for.
    pub fn retain_pending(&mut self, keep: impl FnMut(&PendingDisruption) -> bool) {
        self.pending.retain(keep);
    }

    /// `d` is to be evicted whole (kube-scheduler committed, or muster decided alone).
    pub fn commit(&mut self, d: GangDisruption) {
        self.committed.push(d);
    }

    /// The committed disruptions, for the evictor.
    pub fn take_committed(&mut self) -> Vec<GangDisruption> {
        std::mem::take(&mut self.committed)
    }

    /// `victims` are answered for: a preemption that took them is not acted on again.
    pub fn answer(&mut self, victims: impl IntoIterator<Item = PodUid>) {
        self.answered.extend(victims);
    }

    /// Whether victim `uid` was answered for.
    pub fn is_answered(&self, uid: &str) -> bool {
        self.answered.contains(uid)
    }

    /// Pod `uid` is gone: it is forgotten as a victim answered for.
    pub fn forget_answered(&mut self, uid: &str) {
        self.answered.remove(uid);
    }

    /// `u` was preempted without muster's say: the rest of its gang is for the evictor.
    pub fn note_unseen(&mut self, u: UnseenPreemption) {
        self.unseen.push(u);
    }

    /// The members preempted without muster's say noted since the last call.
    pub fn take_unseen(&mut self) -> Vec<UnseenPreemption> {
        std::mem::take(&mut self.unseen)
    }

    /// Whether a disruption of `gang` is pending or committed, or one pending has `victim` among
    /// its victims: the evictor already disrupts that gang whole.
    pub fn decided(&self, gang: &GangKey, victim: &str) -> bool {
        self.pending
            .iter()
            .any(|p| p.disruption.gang == *gang || p.victims.iter().any(|v| **v == *victim))
            || self.committed.iter().any(|d| d.gang == *gang)
    }
}

/// A member kube-scheduler preempted without muster's say, noticed by the watch; the rest of
/// its gang is evicted once the caches are synced (`verbs::unseen_preemption`).
#[derive(Clone, Debug)]
pub(in crate::model) struct UnseenPreemption {
    pub victim: PodRef,
    pub gang: GangKey,
}
