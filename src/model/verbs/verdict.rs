//! kube-scheduler's own verdict as evidence (holds-nothing): a gang member that kube-scheduler
//! reported unschedulable in a cycle that never reached muster — a filter muster does not
//! simulate refused it everywhere (a volume, a DRA part, an out-of-tree plugin) — makes its
//! gang hold nothing: the seats it held are released at once, and it is planned nowhere until
//! the member's situation can have changed. The gang's message quotes kube-scheduler
//! (explained). Which verdicts count, and until when: `table::evidence::SchedulerVerdicts`.

use std::sync::Arc;

use crate::model::inputs::membership::GangKey;
use crate::model::inputs::objects::{PodInfo, PodUid};
use crate::model::messages;
use crate::model::notice::{Notice, NoticeKind, PodRef};
use crate::model::table::GangTable;

/// A gang member kube-scheduler refused, and what it said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::model) struct Refused {
    pub pod: String,
    pub message: Arc<str>,
}

impl GangTable {
    /// The watch delivered `info` (its previous state `old`): weighs its PodScheduled
    /// condition. A pod that changed otherwise loses its standing verdict; a new
    /// `Unschedulable` verdict that is not muster's own refusal stands, and the member's gang,
    /// if it holds seats below quorum, releases them.
    pub(in crate::model) fn weigh_verdict(&mut self, old: Option<&PodInfo>, uid: &PodUid) {
        let Some(entry) = self.pods.get(uid) else {
            return;
        };
        let info = &entry.info;
        // (Compared only while some verdict stands: the watch's hot path stays a lookup.)
        if !self.verdicts.is_empty() && old.is_some_and(|o| changed_for_scheduling(o, info)) {
            self.verdicts.pod_changed(uid);
        }
        let Some(message) = &info.unschedulable else {
            self.verdicts.pod_changed(uid);
            return;
        };
        if old.and_then(|o| o.unschedulable.as_ref()) == Some(message) {
            return; // not a new verdict (kube-scheduler writes only a changed condition)
        }
        let Some(key) = info.gang().map(|m| m.gang.clone()) else {
            return;
        };
        if !entry.is_pending() || self.verdicts.is_musters_own(uid, message) {
            return;
        }
        let (message, pod) = (message.clone(), info.display_name());
        self.verdicts.stand(uid, message.clone());
        if self.facts(&key).quorum_met() {
            return;
        }
        let message = messages::refused_by_scheduler(&key, &pod, &message);
        let released = !self.unseat_all(&key).is_empty();
        if released {
            self.released.push(key.clone());
        }
        let Some(gang) = self.gangs.get_mut(&key) else {
            return;
        };
        gang.settle_after_seats_removed();
        if gang.last_wait_message.as_deref() == Some(&*message) {
            return;
        }
        gang.last_wait_message = Some(message.clone());
        let told: Vec<Notice> = self
            .members_of(&self.gangs[&key])
            .filter(|p| p.node().is_none() && p.is_live())
            .map(|p| Notice {
                pod: PodRef::of(&p.info),
                kind: NoticeKind::Waiting,
                message: message.clone(),
            })
            .collect();
        self.notices.extend(told);
    }

    /// The first pending member of `key` with a standing verdict of kube-scheduler's, other
    /// than `asking` (whose filter call shows its cycle reached muster).
    pub(in crate::model) fn refused_member(&self, key: &GangKey, asking: &str) -> Option<Refused> {
        if self.verdicts.is_empty() {
            return None; // the common case: no lookup per member
        }
        let mut members = self.pending_members(key);
        members.sort_by(|a, b| a.info.name.cmp(&b.info.name));
        members
            .into_iter()
            .filter(|p| &*p.info.uid != asking)
            .find_map(|p| {
                let message = self.verdicts.standing(&p.info.uid)?;
                Some(Refused {
                    pod: p.info.display_name(),
                    message: message.clone(),
                })
            })
    }
}

/// Whether a pod changed in what kube-scheduler's filters read (its requests, placement rules,
/// labels or gang), as opposed to its status or muster's own annotations and nominations.
fn changed_for_scheduling(old: &PodInfo, new: &PodInfo) -> bool {
    old.requests != new.requests
        || old.node_selector != new.node_selector
        || old.tolerations != new.tolerations
        || old.rules != new.rules
        || old.labels != new.labels
        || old.membership != new.membership
        || old.priority != new.priority
}
