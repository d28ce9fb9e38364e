//! kube-scheduler's own verdict as evidence (holds-nothing): a gang member that kube-scheduler
//! reported unschedulable in a cycle that never reached muster — a filter muster does not
//! simulate refused it everywhere (a volume, a DRA part, an out-of-tree plugin) — makes its
//! gang hold nothing: the seats it held are released at once, and it is planned nowhere until
//! the member's situation can have changed. The gang's message quotes kube-scheduler
//! (explained). Which verdicts count, and until when: `table::evidence::SchedulerVerdicts`.

use crate::model::inputs::membership::GangKey;
use crate::model::inputs::objects::{PodInfo, PodUid};
use crate::model::messages;
use crate::model::notice::NoticeKind;
use crate::model::table::evidence::Refused;
use crate::model::table::GangTable;

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
        if !entry.is_pending()
            || self.verdicts.is_musters_own(uid, message)
            || names_only_simulated_rules(message)
        {
            return;
        }
        let (message, pod) = (message.clone(), info.display_name());
        self.verdicts.stand(uid, message.clone());
        if self.facts(&key).quorum_met() {
            return;
        }
        // Only a gang that held seats is told now: one that holds nothing keeps its own
        // reason (the verdict still stands, and the planner quotes it when muster's own
        // simulation would place the gang), so a member NodeResourcesFit refused reads as the
        // room the gang lacks, with muster's numbers (explained).
        if self.unseat_all(&key).is_empty() {
            return;
        }
        self.released.push(key.clone());
        let message = messages::refused_by_scheduler(&key, &pod, &message);
        let Some(gang) = self.gangs.get_mut(&key) else {
            return;
        };
        gang.settle_after_seats_removed();
        if gang.wait_message() == Some(&*message) {
            return;
        }
        gang.note_waiting(message.clone());
        self.tell(&key, NoticeKind::Waiting, &message, |p| {
            p.node().is_none() && p.is_live()
        });
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

/// What kube-scheduler says, per node, for the filters muster simulates itself (v1.37.2:
/// NodeResourcesFit `Insufficient <resource>` and `Too many pods`, NodeUnschedulable,
/// TaintToleration, NodeAffinity, NodePorts, InterPodAffinity, PodTopologySpread).
const SIMULATED_RULE_TEXTS: &[&str] = &[
    "Insufficient ",
    "Too many pods",
    "node(s) were unschedulable",
    "node(s) had untolerated taint",
    "node(s) didn't match Pod's node affinity/selector",
    "node(s) didn't have free ports for the requested pod ports",
    "node(s) didn't match pod affinity rules",
    "node(s) didn't match pod anti-affinity rules",
    "node(s) didn't satisfy existing pods anti-affinity rules",
    "node(s) didn't match pod topology spread constraints",
];

/// Whether kube-scheduler's `0/N nodes are available: …` names only rules muster simulates: then
/// muster's own simulation already knows the member's shortfall and says it with its numbers;
/// the verdict is evidence only for what muster does not simulate (a volume, a DRA part, an
/// out-of-tree plugin). A message in another form counts as evidence.
fn names_only_simulated_rules(message: &str) -> bool {
    let Some((_, reasons)) = message.split_once("nodes are available: ") else {
        return false;
    };
    let reasons = reasons.split(" preemption:").next().unwrap_or(reasons);
    let reasons = reasons.trim_end().trim_end_matches('.');
    !reasons.is_empty()
        && reasons.split(", ").all(|part| {
            let text = part
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .trim_start();
            SIMULATED_RULE_TEXTS.iter().any(|t| text.starts_with(t))
        })
}

#[cfg(test)]
mod tests;
