//! A gang reaching its quorum, and what its bindings come to.
//!
//! At quorum every confirmed seat becomes a binding at once — but only after checking that
//! each seat's node still has room for it, counting everything muster knows: a pod may have
//! landed there since the seat was taken (a second scheduler, `spec.nodeName`, a held bind
//! call that gave up so kube-scheduler forgot the room it assumed), or the node's allocatable
//! may have shrunk. Binding a member there anyway would let the kubelet reject it: a partial
//! gang. So if any seat fails the check, nothing is bound, the seats on that node are given
//! up and those members are planned again.
//!
//! Room is not the only thing that changes while a gang waits: a seat's node may have been
//! cordoned, tainted NoSchedule/NoExecute (a node that went NotReady is tainted so by the node
//! lifecycle controller), lost a label a member's node affinity or `nodeSelector` requires, or
//! received a pod its member's (anti-)affinity or spread constraint now counts. So the last
//! look also checks every confirmed seat under every rule the planner applies (the rules
//! library: NodeUnschedulable, TaintToleration, NodeAffinity, PodTopologySpread,
//! InterPodAffinity, with the members seated so far counted as placed) against the node as the
//! watch has it now, not against the filter calls that seated them (holds-nothing,
//! never-half). A node that refuses is planned around the same way: nothing is bound, the seats
//! on it are given up.
//!
//! A binding refused for good (after the binder's retries of transient errors) cannot undo
//! the others. The failed member keeps its room as a confirmed seat on the same node, until
//! the gang's timeout, so no other pod takes it while kube-scheduler retries the member; the
//! gang, below quorum again, is gated again, and a Warning Event names the member and the API
//! server's answer.
//!
//! In a gathered gang only the seats kube-scheduler holds reach this point confirmed: the bind
//! verb first plans again every confirmed seat whose member's call ended unbound
//! (`GangTable::unconfirm_seats_kube_scheduler_let_go`), since the pods outside the gang are
//! placed by kube-scheduler alone, into room it no longer counts for that member.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use super::bind::{BindDecision, BindRejection};
use crate::model::inputs::membership::GangKey;
use crate::model::inputs::objects::{NodeName, PodInfo};
use crate::model::inputs::resources::{InsufficientResource, Resources};
use crate::model::messages;
use crate::model::notice::{Notice, NoticeKind, PodRef};
use crate::model::planning::domains::domain_of;
use crate::model::rules::{GangPlacement, Reason};
use crate::model::table::gang::{Seat, SeatHolder};
use crate::model::table::room_waits::RoomWait;
use crate::model::table::{GangFacts, GangTable};

/// Why a confirmed seat cannot be bound where it is.
enum SeatLost {
    /// The node has no room left for the seats on it.
    Room(InsufficientResource),
    /// The node now refuses member `pod` under a kube-scheduler rule.
    Rule { pod: String, reason: Reason },
    /// The node is not (any more) in the gang's domain of `label` (`value`): its label changed
    /// while the gang waited.
    Domain { label: Arc<str>, value: Arc<str> },
}

impl GangTable {
    /// `requester`'s seat completed the quorum: bind every confirmed seat, or none.
    pub(in crate::model) fn bind_at_quorum(
        &mut self,
        key: &GangKey,
        requester: &PodInfo,
        facts: GangFacts,
    ) -> BindDecision {
        if let Some((node, shortfall)) = self.seated_node_without_room(key) {
            if let Some(leaving) = self.room_on_its_way(key, &node) {
                return self.wait_for_leaving(key, node, leaving);
            }
            return self.replan_off(key, requester, node, SeatLost::Room(shortfall));
        }
        if let Some((node, label, value)) = self.seated_node_outside_domain(key) {
            return self.replan_off(key, requester, node, SeatLost::Domain { label, value });
        }
        if let Some((node, pod, reason)) = self.seated_node_refusing(key) {
            return self.replan_off(key, requester, node, SeatLost::Rule { pod, reason });
        }
        // Every confirmed seat becomes a binding; planned seats are let go.
        let mut members = Vec::new();
        for (holder, seat) in self.unseat_all(key) {
            let SeatHolder::Member(uid) = holder else {
                continue;
            };
            if seat.confirmed {
                self.assume(&uid, seat.node.clone());
                if let Some(p) = self.pods.get(&uid) {
                    members.push((PodRef::of(&p.info), seat.node));
                }
            }
        }
        members.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        self.note_gangs_told();
        let told = self.gangs.get(key).is_some_and(|g| g.told_since_placed());
        if let Some(g) = self.gangs.get_mut(key) {
            g.place();
        }
        // One Event per gang, on its first member by name, naming every member's node, and
        // only for a gang whose members were told something (why it waited, a preemption, a
        // failed bind): it ends that story. kube-scheduler already puts a Scheduled Event with
        // the node on each member; an Event per member was a quarter of all API writes in the
        // end-to-end benchmark, and one per gang placed at once 0.07 requests per pod.
        if let Some((first, _)) = members.first().filter(|_| told) {
            self.notices.push(Notice {
                pod: first.clone(),
                kind: NoticeKind::Placed,
                message: self.placed_message(key, &members, &facts),
            });
        }
        BindDecision::BindGang {
            gang: key.clone(),
            members,
        }
    }

    /// The first node (by name) where the gang's confirmed seats no longer fit beside the
    /// bound pods and every other gang's seats, and what they lack there.
    fn seated_node_without_room(&self, key: &GangKey) -> Option<(NodeName, InsufficientResource)> {
        let gang = self.gangs.get(key)?;
        // Per node: the confirmed seats (to be bound) and all of this gang's seats (released
        // at quorum, so they are credited back).
        let mut per_node: BTreeMap<&NodeName, (Resources, Resources)> = BTreeMap::new();
        for seat in gang.seats().values() {
            let (confirmed, all) = per_node.entry(&seat.node).or_default();
            all.add(&seat.requests);
            if seat.confirmed {
                confirmed.add(&seat.requests);
            }
        }
        per_node.into_iter().find_map(|(node, (confirmed, all))| {
            let position = self.ledger.position(node)?;
            let short = self
                .ledger
                .shortfall(position, &confirmed, Some(&all), None)?;
            Some((node.clone(), short))
        })
    }

    /// For a node where the gang's confirmed seats lack room: how many pods being deleted
    /// there would make that room by going, if their going would make it (`None` if it would
    /// not, or none is being deleted). A preemption's victims are such pods: kube-scheduler
    /// sends the last member's bind once its own cache shows them gone, and muster's watch can
    /// deliver their deletions a moment later. Giving the seats up then would let a pod of lower
    /// priority take the room the gang preempted for (kube-scheduler clears a nomination whose
    /// binding failed), so the room the victims free is waited for instead.
    fn room_on_its_way(&self, key: &GangKey, node: &NodeName) -> Option<usize> {
        let gang = self.gangs.get(key)?;
        let position = self.ledger.position(node)?;
        let (mut confirmed, mut credit) = (Resources::default(), Resources::default());
        for seat in gang.seats().values().filter(|s| s.node == *node) {
            credit.add(&seat.requests);
            if seat.confirmed {
                confirmed.add(&seat.requests);
            }
        }
        let mut leaving = 0;
        for p in self.pods.iter() {
            if p.info.terminating && p.charged_node() == Some(node) {
                credit.add(&p.info.requests);
                leaving += 1;
            }
        }
        let fits = self
            .ledger
            .shortfall(position, &confirmed, Some(&credit), None)
            .is_none();
        (leaving > 0 && fits).then_some(leaving)
    }

    /// The quorum waits, every seat kept, for `leaving` pods being deleted on `node` to go; the
    /// first pod leaving that node wakes the gang's held bind calls, which decide again.
    fn wait_for_leaving(&mut self, key: &GangKey, node: NodeName, leaving: usize) -> BindDecision {
        let message = messages::waiting_for_leaving(key, &node, leaving);
        self.room_waits.wait(node, key, RoomWait::PodsLeaving);
        if let Some(g) = self.gangs.get_mut(key) {
            g.note_waiting(message.clone());
        }
        BindDecision::Wait {
            gang: key.clone(),
            message,
        }
    }

    /// The first confirmed seat whose node now refuses its member under a rule the planner
    /// applies, checked as kube-scheduler would check the members one after another: each
    /// seat that passes counts as placed for the next (spread, affinity among members). The
    /// seats are tried in sweeps, any order that passes being one kube-scheduler could have
    /// taken (a spread constraint may admit `a, b, a` but not `a, a, b`); a seat that passes in
    /// no order is the refusal, the first by member name. Scheduling gates are not a node's
    /// rule: a member with a confirmed seat came through a bind call, so it had none.
    /// For a gang confined to one domain of a node label: a confirmed seat whose node is not in
    /// the gang's domain (members with nodes decide it, else the first confirmed seat by
    /// member name), with the label and that domain. The plan put every seat in one domain;
    /// a node relabelled since is caught here (holds-nothing, never-half).
    fn seated_node_outside_domain(&self, key: &GangKey) -> Option<(NodeName, Arc<str>, Arc<str>)> {
        let gang = self.gangs.get(key)?;
        let label = gang.spec().topology.required()?.clone();
        let mut seated: Vec<(&str, &NodeName)> = gang
            .seats()
            .iter()
            .filter(|(_, s)| s.confirmed)
            .filter_map(|(h, s)| match h {
                SeatHolder::Member(uid) => Some((&*self.pods.get(uid)?.info.name, &s.node)),
                SeatHolder::NotCreatedYet { .. } => None,
            })
            .collect();
        seated.sort();
        let value_at = |n: &NodeName| {
            self.ledger
                .get(n)
                .and_then(|e| domain_of(e.info(), &label))
                .map(Arc::<str>::from)
        };
        let bound = self
            .members_of(gang)
            .filter(|p| p.is_live())
            .filter_map(|p| p.charged_node())
            .find_map(&value_at);
        let value = bound.or_else(|| seated.first().and_then(|(_, n)| value_at(n)))?;
        seated
            .iter()
            .find(|(_, n)| self.ledger.get(n).is_some() && value_at(n).as_ref() != Some(&value))
            .map(|(_, n)| ((*n).clone(), label.clone(), value.clone()))
    }

    fn seated_node_refusing(&self, key: &GangKey) -> Option<(NodeName, String, Reason)> {
        self.seat_refusing(key, true)
    }

    /// [`GangTable::seated_node_refusing`] over the confirmed seats only (`confirmed_only`), or
    /// over every seat of the gang, planned ones too: a gathered gang planned again around its
    /// confirmed seats (`reseat_gathered`) is checked whole this way, since the planner judged
    /// the members it placed against each other but not against the confirmed seats kept.
    pub(in crate::model) fn seat_refusing(
        &self,
        key: &GangKey,
        confirmed_only: bool,
    ) -> Option<(NodeName, String, Reason)> {
        let gang = self.gangs.get(key)?;
        let mut seated: Vec<(&PodInfo, &NodeName)> = gang
            .seats()
            .iter()
            .filter(|(_, s)| s.confirmed || !confirmed_only)
            .filter_map(|(h, s)| match h {
                SeatHolder::Member(uid) => Some((&self.pods.get(uid)?.info, &s.node)),
                SeatHolder::NotCreatedYet { .. } => None,
            })
            .collect();
        seated.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        let members: Vec<&PodInfo> = seated.iter().map(|(p, _)| *p).collect();
        // The confirmed seats are not in the snapshot (it has pods bound or being bound): each
        // is added as it passes.
        let snapshot = self.snapshot(&members, |_| true);
        let mut placement = GangPlacement::new(&members, &snapshot);
        let mut devices = self.dynamic_resources(&members, 0);
        let mut left: Vec<usize> = (0..seated.len()).collect();
        loop {
            let mut refused = Vec::new();
            let before = left.len();
            for i in left {
                let Some(node) = self.ledger.get(seated[i].1).map(|e| e.info()) else {
                    // A deleted node's seats are released by the watch; not this check's.
                    continue;
                };
                let verdict = placement
                    .check(i, node)
                    .and_then(|()| devices.as_ref().map_or(Ok(()), |d| d.check(i, node)));
                match verdict {
                    Ok(()) | Err(Reason::SchedulingGated) => {
                        placement.place(i, node);
                        if let Some(d) = &mut devices {
                            d.place(i, node);
                        }
                    }
                    Err(reason) => refused.push((i, reason)),
                }
            }
            if refused.is_empty() {
                return None;
            }
            if refused.len() == before {
                let (i, reason) = refused[0];
                let (pod, node) = seated[i];
                return Some((node.clone(), pod.display_name(), reason));
            }
            left = refused.into_iter().map(|(i, _)| i).collect();
        }
    }

    /// Binds nothing: the members seated on `node` give up their seats (kube-scheduler will
    /// try them again, and the plan puts them where there is room); the rest keep theirs.
    fn replan_off(
        &mut self,
        key: &GangKey,
        requester: &PodInfo,
        node: NodeName,
        lost: SeatLost,
    ) -> BindDecision {
        let off: Vec<SeatHolder> = self.gangs[key]
            .seats()
            .iter()
            .filter(|(_, s)| s.node == node)
            .map(|(h, _)| h.clone())
            .collect();
        for holder in &off {
            self.unseat(key, holder);
        }
        let message = match &lost {
            SeatLost::Room(shortfall) => messages::seat_lost_room(key, &node, shortfall),
            SeatLost::Rule { pod, reason } => {
                messages::seat_node_refuses(key, &node, pod, reason.plugin(), reason.message())
            }
            SeatLost::Domain { label, value } => {
                messages::seat_outside_domain(key, &node, label, value)
            }
        };
        if let Some(g) = self.gangs.get_mut(key) {
            g.note_waiting(message.clone());
        }
        if off.contains(&SeatHolder::Member(requester.uid.clone())) {
            return BindDecision::Reject(match lost {
                SeatLost::Room(shortfall) => BindRejection::NoRoom {
                    pod: requester.display_name(),
                    node: node.to_string(),
                    shortfall,
                },
                SeatLost::Rule { .. } | SeatLost::Domain { .. } => {
                    BindRejection::GangCannotBePlaced(message)
                }
            });
        }
        BindDecision::Wait {
            gang: key.clone(),
            message,
        }
    }

    /// Reports the result of a binding muster made (after the binder's retries). On failure
    /// the pod is no longer assumed. A member of a gang bound together, whose failure leaves
    /// its gang below quorum, keeps its room as a confirmed seat until the gang's timeout
    /// (kube-scheduler retries it, and it lands there); a Warning Event says so either way.
    pub fn bind_finished(
        &mut self,
        pod: &PodRef,
        node: &NodeName,
        result: Result<(), String>,
        now: Instant,
    ) {
        let Err(error) = result else { return };
        let requests = match self.pods.unassume(&pod.uid, node) {
            Some((node, requests)) => {
                self.ledger.uncharge(&node, &requests);
                Some(requests)
            }
            None => None,
        };
        let key = self
            .pods
            .get(&pod.uid)
            .filter(|p| p.is_live())
            .and_then(|p| p.info.gang())
            .map(|m| m.gang.clone());
        let Some(key) = key else {
            self.notices.push(Notice {
                pod: pod.clone(),
                kind: NoticeKind::BindFailed,
                message: messages::bind_failed(node, &error),
            });
            return;
        };
        self.refresh_placed(&key);
        let facts = self.facts(&key);
        if facts.quorum_met() {
            // A replacement member of a placed gang: it goes back to kube-scheduler as any pod.
            self.notices.push(Notice {
                pod: pod.clone(),
                kind: NoticeKind::BindFailed,
                message: messages::bind_failed(node, &error),
            });
            return;
        }
        if let (Some(requests), true) = (requests, self.ledger.position(node).is_some()) {
            let seat = Seat {
                node: node.clone(),
                requests,
                confirmed: true,
            };
            self.seat(&key, SeatHolder::Member(pod.uid.clone()), seat);
            if let Some(g) = self.gangs.get_mut(&key) {
                if !g.is_admitted() {
                    g.admit(now);
                }
            }
        }
        self.notices.push(Notice {
            pod: pod.clone(),
            kind: NoticeKind::BindFailed,
            message: messages::gang_bind_failed(&key, pod, node, &error, &facts.counts()),
        });
    }
}

impl GangTable {
    /// The Placed Event's text; for a gang confined to a domain, naming it.
    fn placed_message(
        &self,
        key: &GangKey,
        members: &[(PodRef, NodeName)],
        facts: &GangFacts,
    ) -> String {
        let placed = messages::placed(key, members, facts.with_nodes);
        let domain = facts
            .spec
            .topology
            .required()
            .and_then(|label| Some((label, self.gang_domain(key, label)?)));
        match domain {
            Some((label, value)) => messages::in_domain(&placed, label, &value),
            None => placed,
        }
    }
}
