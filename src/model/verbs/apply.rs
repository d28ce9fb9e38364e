//! What the watches report: nodes and pods added, changed and deleted, applied to the table.
//!
//! These are the only entry points that create or delete pods and nodes in the table: a verb
//! naming a pod the watch has not delivered is refused (`GangTable::seen_pod`), so a late
//! call for a deleted pod or a forged one changes nothing.

use crate::model::inputs::membership::{GangKey, MembershipError};
use crate::model::inputs::objects::{NodeInfo, NodeName, PodInfo, PodUid};
use crate::model::inputs::spec::{
    conflicting_quorums, pod_group_disagreements, GangSpec, SpecSource,
};
use crate::model::messages;
use crate::model::notice::{Notice, NoticeKind, PodRef};
use crate::model::table::gang::SeatHolder;
use crate::model::table::generations::{Generations, Standing};
use crate::model::table::pods::Charges;
use crate::model::table::room_waits::RoomWait;
use crate::model::table::GangTable;
use crate::model::verbs::gather::gather_gate_index;

impl GangTable {
    // === nodes ===

    /// A node was added or changed. A node muster did not know may be one kube-scheduler
    /// already offered: pods refused meanwhile are asked to retry (see `take_notices`).
    pub fn apply_node(&mut self, info: NodeInfo) {
        if self.ledger.position(&info.name).is_none() {
            self.retry_asks.note_node_arrived();
        }
        // An update that changes nothing muster reads (a heartbeat, muster's own marker) keeps
        // the entry as it is: replacing it would only churn memory, which the allocator keeps.
        if self
            .ledger
            .get(&info.name)
            .is_none_or(|e| *e.info() != info)
        {
            // A member kube-scheduler refused may fit now (holds-nothing: its verdict stood).
            self.verdicts.situation_changed();
            self.ledger.upsert(info);
        }
    }

    /// A node was deleted: seats on it are released at once.
    pub fn remove_node(&mut self, name: &str) {
        if self.ledger.remove(name) {
            self.unseat_node(name);
        }
        // Its seats went with it, and so did the held calls' reason to wait there. Room
        // planned there stays its gang's plan (`seat_awaiting` skips a node not in the ledger).
        self.room_waits.end(name, RoomWait::PodsLeaving);
    }

    /// Keeps only the nodes for which `keep` is true (after a watch re-list).
    pub fn retain_nodes(&mut self, keep: impl Fn(&str) -> bool) {
        let gone: Vec<NodeName> = self
            .ledger
            .iter()
            .map(|(_, e)| e.name().clone())
            .filter(|n| !keep(n))
            .collect();
        for n in gone {
            self.remove_node(&n);
        }
    }

    // === pods ===

    /// A pod was added or changed (from the watch).
    pub fn apply_pod(&mut self, mut info: PodInfo) {
        let ignored = self.ignore_other_scheduler(&mut info);
        if let Some(before) = self.pods.get(&info.uid) {
            self.generations.forget(&before.info);
        }
        let standing = self.generations.sort(&mut info);
        let uid = info.uid.clone();
        let new_gang = info.gang().map(|m| m.gang.clone());
        let (old, charges) = self.pods.apply(info);
        self.settle_charges(charges);
        let entry = self.pods.get(&uid).expect("just applied");
        let info = &entry.info;
        // An invalid membership is reported once, unless its error changed.
        let invalid_before = old.as_ref().and_then(|o| o.membership.as_ref().err());
        if let Err(e) = &info.membership {
            if invalid_before != Some(e) {
                let (kind, message) = match e {
                    MembershipError::Superseded { .. } => (NoticeKind::Superseded, e.to_string()),
                    _ => (
                        NoticeKind::InvalidKeys,
                        messages::invalid_keys(e, gather_gate_index(info).is_some()),
                    ),
                };
                self.notices.push(Notice {
                    pod: PodRef::of(info),
                    kind,
                    message,
                });
            }
        }
        // schedulerName is immutable and keys are read afresh each time: told once per pod,
        // when its keys first are ignored.
        if let Some(message) = ignored {
            if !old.as_ref().is_some_and(|o| o.gang_keys_ignored) {
                self.notices.push(Notice {
                    pod: PodRef::of(info),
                    kind: NoticeKind::OtherScheduler,
                    message,
                });
            }
        }
        let has_node = entry.node().is_some();
        let live = entry.is_live();
        // A pod on a node starts terminating: perhaps kube-scheduler acting on a preemption.
        let leaving_from = entry
            .charged_node()
            .filter(|_| info.terminating && !old.as_ref().is_some_and(|o| o.terminating))
            .cloned();

        let old_gang = old.as_ref().and_then(|o| o.gang()).map(|m| m.gang.clone());
        if old_gang != new_gang {
            if let Some(g) = old_gang {
                self.leave_gang(&g, &uid);
            }
        }
        if let Some(g) = new_gang {
            self.joins += 1;
            let stamp = self.joins;
            self.gangs
                .entry(g.clone())
                .or_default()
                .join(uid.clone(), stamp);
            if standing == Standing::Newer {
                self.supersede_older_members(&g);
            }
            if has_node || !live {
                // Bound, finished or being deleted: its seat, if any, has served its purpose
                // or is no longer needed.
                self.unseat(&g, &SeatHolder::Member(uid.clone()));
            }
            self.refresh_spec(&g);
            self.tell_quorum_conflict(&g);
            self.tell_pod_group_conflict(&g);
            self.refresh_placed(&g);
            self.follow_nomination(&uid);
        }
        if let Some(node) = leaving_from {
            self.hold_when_victims_leave(&node);
        }
        self.note_commit(&uid);
        self.note_unseen_preemption(&uid);
        self.seen_now(&uid);
        self.weigh_verdict(old.as_ref(), &uid);
        self.note_gated_outside_gangs(&uid);
    }

    /// Keeps `gated_outside_gangs` true for this pod: pending, not being deleted, behind
    /// muster's gate, and with no gang keys (invalid keys keep their gate: `gather::orphans`).
    fn note_gated_outside_gangs(&mut self, uid: &PodUid) {
        let outside = self.pods.get(uid).is_some_and(|p| {
            p.is_pending()
                && !p.info.terminating
                && matches!(p.info.membership, Ok(None))
                && gather_gate_index(&p.info).is_some()
        });
        if outside {
            self.gated_outside_gangs.insert(uid.clone());
        } else {
            self.gated_outside_gangs.remove(uid);
        }
    }

    /// A gang-keyed pod whose `schedulerName` is not one that calls muster is stored as a plain
    /// pod: never gathered, never counted as a member (its scheduler never asks muster, so a
    /// gang counting it would hold room for it, or wait for it, in vain), its requests still
    /// charged to its node like any pod's. Returns the Warning to give when its keys are
    /// ignored (explained).
    fn ignore_other_scheduler(&self, info: &mut PodInfo) -> Option<String> {
        if self.config.calls_muster(info.scheduler_name()) {
            return None;
        }
        let keys = match &info.membership {
            Ok(None) => return None,
            Ok(Some(m)) => Some(format!("{}={}", m.source, m.gang.name)),
            Err(_) => None,
        };
        info.membership = Ok(None);
        info.gang_keys_ignored = true;
        Some(messages::other_scheduler(
            info.scheduler_name(),
            keys.as_deref(),
            &self.config.scheduler_names,
        ))
    }

    /// A pod was deleted: its requests and its seat are released at once.
    pub fn remove_pod(&mut self, uid: &str) {
        let Some((info, uncharge)) = self.pods.remove(uid) else {
            return;
        };
        self.evidence.forget(uid);
        self.verdicts.forget(uid);
        // Nothing to ask of a pod that is gone; its place in the bounded sets goes to others.
        self.retry_asks.forget(uid);
        self.preemptions_under_way.forget(uid);
        self.disruptions.forget_answered(uid);
        self.gated_outside_gangs.remove(uid);
        self.settle_charges(Charges {
            uncharge,
            charge: None,
        });
        self.generations.forget(&info);
        if let Some(m) = info.gang() {
            self.preemptor_gone(&m.gang, &info.uid);
            self.leave_gang(&m.gang, &info.uid);
        }
        self.note_commit(uid);
    }

    /// A pod of a newer generation of `key` joined (its job restarted): the members of older
    /// generations are superseded, no longer members (see `table::generations`). Each goes
    /// through `apply_pod` as the watch's pods do, so it leaves the gang, its seat and its
    /// counts exactly as a pod whose keys changed would.
    fn supersede_older_members(&mut self, key: &GangKey) {
        let Some(gang) = self.gangs.get(key) else {
            return;
        };
        let older: Vec<PodInfo> = self
            .members_of(gang)
            .filter(|p| {
                p.info
                    .gang()
                    .is_some_and(|m| self.generations.is_older(m, p.info.created))
            })
            .map(|p| p.info.clone())
            .collect();
        for info in older {
            self.apply_pod(info);
        }
    }

    /// The gang `key` is gone (no member left): pods of its older generations that are still
    /// there are its members again, the newest of them first.
    fn restore_superseded(&mut self, key: &GangKey) {
        let mut restored: Vec<PodInfo> = self
            .generations
            .gang_gone(key)
            .iter()
            .filter_map(|u| self.pods.get(u))
            .map(|p| Generations::restored(p.info.clone()))
            .collect();
        // Latest first: a later incarnation's pods were created later, a later generation's too.
        restored
            .sort_by_key(|p| std::cmp::Reverse((p.created, p.gang().map_or(0, |m| m.generation))));
        for info in restored {
            self.apply_pod(info);
        }
    }

    /// Keeps only the pods for which `keep` is true (after a watch re-list).
    pub fn retain_pods(&mut self, keep: impl Fn(&str) -> bool) {
        let gone: Vec<PodUid> = self.pods.uids().filter(|u| !keep(u)).cloned().collect();
        for uid in gone {
            self.remove_pod(&uid);
        }
    }

    fn settle_charges(&mut self, charges: Charges) {
        let mut freed = None;
        if let Some((node, r)) = charges.uncharge {
            self.ledger.uncharge(&node, &r);
            freed = Some(node);
        }
        if let Some((node, r)) = charges.charge {
            self.ledger.charge(&node, &r);
        }
        // Once the pod's new charge is counted too: an update on the same node frees nothing.
        if let Some(node) = freed {
            self.room_freed_on(&node);
        }
    }

    /// Room was freed on `node` (a pod left it, or shrank): the gangs waiting for room there
    /// (one index for both waits, see `table::room_waits`) look again.
    fn room_freed_on(&mut self, node: &str) {
        // A preemptor nominated here may have waited for its victims to go.
        self.hold_when_victims_leave(node);
        if self.room_waits.is_empty() {
            return;
        }
        // Quorums waiting for pods being deleted here: their held bind calls decide again.
        for key in self.room_waits.room_freed_on(node) {
            if let Some(g) = self.gangs.get_mut(&key) {
                g.note_room_freed();
            }
        }
        // Preemption holds: the room planned here becomes seats where it is free now.
        self.seat_where_freed(node);
    }

    fn leave_gang(&mut self, key: &GangKey, uid: &PodUid) {
        self.unseat(key, &SeatHolder::Member(uid.clone()));
        let empty = self.gangs.get_mut(key).is_some_and(|g| g.leave(uid));
        if empty {
            // Room it still held for members not created yet goes with it.
            self.unseat_all(key);
            self.released.push(key.clone());
            self.gangs.remove(key);
            self.restore_superseded(key);
        } else {
            self.refresh_spec(key);
            self.refresh_placed(key);
        }
    }

    /// A gang bound together whose live members with nodes fell below its quorum (members
    /// deleted, being deleted, finished, or a binding failed) is gated again: its phase follows
    /// [`GangTable::is_placed`], which is derived from the members.
    pub(in crate::model) fn refresh_placed(&mut self, key: &GangKey) {
        let facts = self.facts(key);
        if let Some(g) = self.gangs.get_mut(key) {
            if g.is_placed_flag() && !facts.quorum_met() {
                g.unplace();
            }
        }
    }

    /// Recomputes the gang's spec after a member joined, changed or left, or its PodGroup
    /// changed. Members being deleted say nothing about the gang a re-submitted job forms
    /// (unless no other is left). An admitted gang whose PodGroup changed what it needs (see
    /// [`GangSpec::replan_needed`]) gives up its seats and waits: they were planned for another
    /// gang.
    pub(in crate::model) fn refresh_spec(&mut self, key: &GangKey) {
        let Some(gang) = self.gangs.get(key) else {
            return;
        };
        let any_live = self.members_of(gang).any(|p| p.is_live());
        let members: Vec<&PodInfo> = self
            .members_of(gang)
            .filter(|p| p.is_live() || !any_live)
            .map(|p| &p.info)
            .collect();
        let spec = GangSpec::decide(&members, key, &self.pod_groups);
        let replan = gang.is_admitted() && gang.spec().replan_needed(&spec);
        if let Some(g) = self.gangs.get_mut(key) {
            g.set_spec(spec);
        }
        if replan {
            self.unseat_all(key);
            self.released.push(key.clone());
            if let Some(g) = self.gangs.get_mut(key) {
                g.settle_after_seats_removed();
            }
        }
    }

    /// Tells every member, once per distinct set of values, that members disagree on the
    /// quorum.
    fn tell_quorum_conflict(&mut self, key: &GangKey) {
        let Some(gang) = self.gangs.get(key) else {
            return;
        };
        if !matches!(
            gang.spec().source,
            SpecSource::Key(_) | SpecSource::EveryMember
        ) {
            // The PodGroup decides; disagreeing with it is told instead (below).
            return;
        }
        let Some(values) = conflicting_quorums(self.members_of(gang).map(|p| &p.info)) else {
            return;
        };
        if gang.quorum_conflict_told(&values) {
            return;
        }
        let message = messages::quorum_conflict(key, &values);
        let told: Vec<Notice> = self
            .members_of(gang)
            .map(|p| Notice {
                pod: PodRef::of(&p.info),
                kind: NoticeKind::QuorumConflict,
                message: message.clone(),
            })
            .collect();
        self.notices.extend(told);
        if let Some(g) = self.gangs.get_mut(key) {
            g.note_quorum_conflict_told(values);
        }
    }

    /// Tells every member, once per distinct set of values, that members' keys disagree with
    /// their gang's PodGroup, which wins.
    pub(in crate::model) fn tell_pod_group_conflict(&mut self, key: &GangKey) {
        let Some(gang) = self.gangs.get(key) else {
            return;
        };
        let SpecSource::PodGroup { api, .. } = &gang.spec().source else {
            return;
        };
        let api = *api;
        let Some(def) = self.pod_groups.get(api, key) else {
            return;
        };
        let members: Vec<&PodInfo> = self
            .members_of(gang)
            .filter(|p| p.is_live())
            .map(|p| &p.info)
            .collect();
        let found = pod_group_disagreements(&members, def);
        if found.is_empty() || gang.pod_group_conflict_told(&found) {
            return;
        }
        let message = messages::pod_group_conflict(key, api, &found);
        let told: Vec<Notice> = members
            .iter()
            .map(|p| Notice {
                pod: PodRef::of(p),
                kind: NoticeKind::PodGroupConflict,
                message: message.clone(),
            })
            .collect();
        self.notices.extend(told);
        if let Some(g) = self.gangs.get_mut(key) {
            g.note_pod_group_conflict_told(found);
        }
    }
}
