//! A running gang member that kube-scheduler preempted without muster's say: the rest of its
//! gang is evicted, so the gang is disrupted whole, never half (evict-for-whole).
//!
//! In the default-scheduler mode, plain pods reach muster only through the preempt-only
//! extender entry, which is `ignorable: true` so that a muster outage never blocks their
//! preemption (scheduler-config/muster-as-default-scheduler.yaml). While muster is away, or when
//! its answer does not come in time, kube-scheduler picks victims on its own and may take one
//! member of a running gang. The watch shows it: kube-scheduler patches the victim's
//! `DisruptionTarget=True` condition, reason `PreemptionByScheduler`, before deleting it
//! (pkg/scheduler/framework/preemption/executor.go, v1.37.2), and the victim keeps it while it
//! terminates, so a muster that restarts meanwhile sees it in its first list too.
//!
//! For a gang in disruption mode `gang` (the default) the rest of its running members are
//! evicted through the Eviction API, as muster's own preempt decision would have disrupted it
//! whole; in mode `pod` they keep running. Victims of muster's own decisions are answered for
//! (`Disruptions::is_answered`, filled at the commit) and not acted on twice. A victim already gone
//! when muster returns leaves no trace in the pod, and is not caught.
//!
//! The rest of the gang is read when the evictor is handed the disruption, and only once the
//! caches are synced ([`GangTable::disrupt_for_unseen_preemptions`]): a restarted muster lists
//! the victim perhaps before its gang mates, and must not evict only those listed so far.

use crate::model::inputs::membership::DisruptionMode;
use crate::model::messages;
use crate::model::notice::PodRef;
use crate::model::table::disruptions::{GangDisruption, UnseenPreemption};
use crate::model::table::GangTable;

impl GangTable {
    /// The watch changed pod `uid`: notes it if kube-scheduler preempted it, a bound member of
    /// a gang in disruption mode `gang`, without muster's decision.
    pub(in crate::model) fn note_unseen_preemption(&mut self, uid: &str) {
        let Some(entry) = self.pods.get(uid) else {
            return;
        };
        let victim = &entry.info;
        if !self.config.evict_after_unseen_preemption
            || !victim.preempted_by_scheduler
            || victim.node_name.is_none()
            || self.disruptions.is_answered(uid)
        {
            return;
        }
        let Some(m) = victim.gang() else { return };
        if m.disruption != DisruptionMode::Gang {
            return;
        }
        let gang = m.gang.clone();
        // muster's own decision on this gang, waiting for kube-scheduler's commitment or for
        // the evictor: it already disrupts the gang whole.
        let decided = self.disruptions.decided(&gang, uid);
        self.disruptions.answer([victim.uid.clone()]);
        if !decided {
            self.disruptions.note_unseen(UnseenPreemption {
                victim: PodRef::of(victim),
                gang,
            });
        }
    }

    /// Hands the evictor the rest of every gang with a member preempted without muster's say
    /// (see the module): its members bound and running, neither being deleted nor preempted
    /// themselves. The caller calls this only once its caches are synced.
    pub fn disrupt_for_unseen_preemptions(&mut self) {
        for UnseenPreemption { victim, gang } in self.disruptions.take_unseen() {
            let Some(g) = self.gangs.get(&gang) else {
                continue;
            };
            let others: Vec<PodRef> = self
                .members_of(g)
                .filter(|p| {
                    *p.info.uid != *victim.uid
                        && p.charged_node().is_some()
                        && !p.info.terminating
                        && !p.info.preempted_by_scheduler
                })
                .map(|p| PodRef::of(&p.info))
                .collect();
            if others.is_empty() {
                continue;
            }
            let disruption = GangDisruption {
                message: messages::preempted_without_muster(&gang, &victim, others.len()),
                gang,
                others,
            };
            self.tell_disrupted(&disruption);
            self.disruptions.commit(disruption);
        }
    }
}
