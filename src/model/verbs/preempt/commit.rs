//! A gang disrupted whole is evicted only once kube-scheduler has committed to the preemption
//! that disrupts it (evict-for-whole).
//!
//! The preempt verb only answers which candidates kube-scheduler may act on; kube-scheduler
//! then may still fail (its API calls, a changed cluster, another pod nominated first). Evicting
//! the rest of a running gang at the answer would leave, on such a failure, half the gang gone
//! and the victims still running. So the decision is kept as a *pending* disruption, and is
//! handed to the evictor ([`GangTable::take_disruptions`]) only when the watch shows
//! kube-scheduler acting on it: a victim on the chosen node being deleted (its
//! `deletionTimestamp`, finished, or gone), or the preemptor nominated to the chosen node when
//! it was not nominated there at the answer (muster's gatherer nominates members too). A
//! pending disruption not committed within [`COMMIT_WAIT`] is forgotten: nothing is evicted.
//! The members hear of it (`Disrupted` Events) at the commit, not before.

use std::time::{Duration, Instant};

use crate::model::inputs::objects::PodUid;
use crate::model::notice::{Notice, NoticeKind, PodRef};
use crate::model::table::disruptions::{GangDisruption, PendingDisruption};
use crate::model::table::GangTable;

/// How long a disruption waits for kube-scheduler's commitment (it evicts and nominates in the
/// same scheduling cycle as the preempt call, well within this).
pub const COMMIT_WAIT: Duration = Duration::from_secs(30);

impl GangTable {
    /// Keeps `disruptions` until kube-scheduler commits to preempting `victims` on `node` for
    /// `preemptor`.
    pub(in crate::model) fn await_commit(
        &mut self,
        preemptor: &PodUid,
        node: &str,
        victims: &[String],
        disruptions: &[GangDisruption],
        now: Instant,
    ) {
        let nominated_before = self
            .pods
            .get(preemptor)
            .is_some_and(|e| e.info.nominated_node.as_deref() == Some(node));
        for d in disruptions {
            // A newer decision for the same gang replaces the older one.
            self.disruptions.keep_pending(PendingDisruption {
                disruption: d.clone(),
                node: node.to_string(),
                victims: victims.iter().map(|v| PodUid::from(v.as_str())).collect(),
                preemptor: preemptor.clone(),
                nominated_before,
                since: now,
            });
        }
    }

    /// The watch changed or removed pod `uid`: commits every pending disruption this shows
    /// kube-scheduler acting on.
    pub(in crate::model) fn note_commit(&mut self, uid: &str) {
        if self.disruptions.pending_len() == 0 {
            return;
        }
        let entry = self.pods.get(uid);
        let committed = |p: &PendingDisruption| {
            if p.victims.iter().any(|v| **v == *uid) {
                // Gone, finished or being deleted: kube-scheduler evicts its victims.
                return entry.is_none_or(|e| e.info.terminating || e.info.terminal);
            }
            // A nomination counts only if kube-scheduler wrote it after the answer: one the
            // preemptor already had (muster's own, to its seat) commits to nothing.
            *p.preemptor == *uid
                && !p.nominated_before
                && entry.is_some_and(|e| e.info.nominated_node.as_deref() == Some(&*p.node))
        };
        for p in self.disruptions.take_pending_where(committed) {
            // These victims' preemption is muster's own decision: not one made without it.
            self.disruptions.answer(p.victims.iter().cloned());
            self.tell_disrupted(&p.disruption);
            self.disruptions.commit(p.disruption);
        }
    }

    /// Every member of a gang disrupted whole hears who displaced it.
    pub(in crate::model) fn tell_disrupted(&mut self, d: &GangDisruption) {
        let Some(gang) = self.gangs.get(&d.gang) else {
            return;
        };
        let notices: Vec<Notice> = self
            .members_of(gang)
            .filter(|p| p.charged_node().is_some())
            .map(|p| Notice {
                pod: PodRef::of(&p.info),
                kind: NoticeKind::Disrupted,
                message: d.message.clone(),
            })
            .collect();
        self.notices.extend(notices);
    }

    /// Forgets pending disruptions kube-scheduler did not commit to within [`COMMIT_WAIT`].
    pub(in crate::model) fn forget_uncommitted(&mut self, now: Instant) {
        self.disruptions
            .retain_pending(|p| now.saturating_duration_since(p.since) < COMMIT_WAIT);
    }

    /// Gangs to evict whole now that kube-scheduler committed to their disruption.
    pub fn take_disruptions(&mut self) -> Vec<GangDisruption> {
        self.disruptions.take_committed()
    }

    /// How many disruptions wait for kube-scheduler's commitment.
    pub fn pending_disruptions(&self) -> usize {
        self.disruptions.pending_len()
    }
}
