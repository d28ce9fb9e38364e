//! Room held for a gang while the victims of its member's preemption terminate.
//!
//! When the preempt verb keeps a candidate for a member of a gang below quorum, it has just
//! simulated where the rest of the gang goes (rule 3 in `preempt`); that plan is remembered per
//! kept node. kube-scheduler then evicts the victims of the node it picked and nominates it
//! (`status.nominatedNodeName`). When muster's watch shows that nomination, the plan for that
//! node becomes seats: the preemptor's on its nominated node, the other members' where the plan
//! put them. The gang is admitted, so no plain pod and no other gang takes that room (filter,
//! bind, the planner and the preempt verb all count seats), and its members bind together as
//! any admitted gang's do. While victims still terminate, a seat on their node counts on top of
//! them, as kube-scheduler counts a nominated pod on top of the pods still on its node.
//!
//! What kube-scheduler does for nominated pods, and where muster differs:
//! - kube-scheduler (`framework/runtime`: `RunFilterPluginsWithNominatedPods`,
//!   `addGENominatedPods`; `backend/queue/nominator.go`) adds each pod nominated to a node to
//!   that node, on top of the pods still there, whenever it filters a pod of *equal or lower*
//!   priority; a higher-priority pod may take the room. muster's hold is gang seats, which no
//!   other pod may take whatever its priority: a pod taking held room would leave the node
//!   over-committed once the victims are gone (bound + seats > allocatable: no-overcommit). The
//!   hold is bounded instead: by the gang's timeout, and by the nomination itself.
//! - kube-scheduler knows one nominated pod per preemption; muster also holds the planned
//!   seats of the gang's other members, which kube-scheduler knows nothing of.
//! - kube-scheduler's nomination ends when the pod is assumed (`DeleteNominatedPodIfExists`),
//!   deleted, or its `nominatedNodeName` is cleared or changed. muster's hold ends the same
//!   way: the preemptor bound or asking to bind (its seat is confirmed, the gang's ordinary
//!   seats carry on), deleted or being deleted, or nominated elsewhere or nowhere; and when the
//!   gang is bound, or times out.
//! - kube-scheduler filters a second time without the nominated pods (some rules, such as
//!   pod affinity, pass only without them); seats are room only and need no second pass.
//! - kube-scheduler records its nomination in memory before it writes it; muster learns it
//!   from the watch, so between the preempt answer and that event only kube-scheduler's own
//!   nominator protects the preemptor's node (the other members' planned room is held from the
//!   event on). After a restart the plans are gone, and so is the hold until the gang seats
//!   itself again: kube-scheduler's nomination still protects the preemptor's node.
//! - kube-scheduler's cache may show the victims gone before muster's watch does; it then offers
//!   a member its planned node and binds it there. Filter and bind accept that room on top of
//!   the pods muster still sees leaving (`GangTable::take_room_on_its_way`): refused, the
//!   member's nomination would be cleared, and with it the only protection of planned room
//!   against plain pods.

use std::time::{Duration, Instant};

use crate::model::inputs::membership::GangKey;
use crate::model::inputs::objects::{NodeName, PodInfo, PodUid};
use crate::model::messages;
use crate::model::notice::{Notice, NoticeKind, PodRef};
use crate::model::planning::selection::task_of;
use crate::model::resources::Resources;
use crate::model::rules::{node_admits, node_ports, scheduling_gates};
use crate::model::table::gang::{Gang, Seat, SeatHolder};
use crate::model::table::preemption_plan::{PlannedSeat, PreemptionPlan};
use crate::model::table::room_waits::RoomWait;
use crate::model::table::GangTable;

/// How long a preempt decision's plans wait for kube-scheduler's nomination. It writes the
/// nomination right after acting on the answer, so this is generous; a plan it never acted
/// on (it picked no candidate, or could not delete the victims) is forgotten then.
pub(in crate::model) const NOMINATION_WAIT: Duration = Duration::from_secs(10);

impl GangTable {
    /// Remembers the plans of a preempt decision for `pod`, until kube-scheduler nominates one
    /// of their nodes (or [`NOMINATION_WAIT`] passes).
    pub(in crate::model) fn remember_preemption(
        &mut self,
        pod: &PodInfo,
        gang: GangKey,
        by_node: Vec<(String, Vec<PlannedSeat>)>,
        now: Instant,
    ) {
        let plan = PreemptionPlan {
            gang,
            at: now,
            requests: pod.requests.clone(),
            by_node,
        };
        self.preempt_plans.remember(&pod.uid, plan);
    }

    /// Forgets the plans kube-scheduler did not act on in time.
    pub(in crate::model) fn forget_stale_plans(&mut self, now: Instant) {
        self.preempt_plans.forget_older_than(now, NOMINATION_WAIT);
    }

    /// The watch delivered `uid`: starts, keeps or ends the hold its nomination stands for.
    pub(in crate::model) fn follow_nomination(&mut self, uid: &PodUid) {
        let Some(entry) = self.pods.get(uid) else {
            return;
        };
        let Some(key) = entry.info.gang().map(|m| m.gang.clone()) else {
            return;
        };
        let nominated = entry.info.nominated_node.clone();
        let pending = entry.is_pending();
        let has_node = entry.node().is_some();
        let Some(gang) = self.gangs.get_mut(&key) else {
            return;
        };
        if let Some(hold) = gang
            .preemption_hold()
            .cloned()
            .filter(|h| h.preemptor == *uid)
        {
            let confirmed = gang.seat_of(uid).is_some_and(|s| s.confirmed);
            if has_node || confirmed {
                // Bound, or asked to bind where kube-scheduler put it: the gang's seats are
                // ordinary seats from now on (its nomination is cleared when a held bind call
                // answers "waiting", which must not release them).
                gang.hold_became_seats();
                return;
            }
            if pending && nominated.as_ref() == Some(&hold.node) {
                return;
            }
            self.release_hold(&key);
        }
        let Some(node) = nominated else {
            return;
        };
        if !pending {
            return;
        }
        self.take_hold(&key, uid, &node);
    }

    /// The preemptor `uid` of `key` was deleted: its plans and its gang's hold go with it.
    pub(in crate::model) fn preemptor_gone(&mut self, key: &GangKey, uid: &str) {
        self.preempt_plans.forget(uid);
        let holds = self
            .gangs
            .get(key)
            .and_then(|g| g.preemption_hold())
            .is_some_and(|h| *h.preemptor == *uid);
        if holds {
            self.release_hold(key);
        }
    }

    /// kube-scheduler nominated `node` for `uid`: if a preempt decision planned the rest of its
    /// gang for that node, the plan becomes the gang's seats.
    fn take_hold(&mut self, key: &GangKey, uid: &PodUid, node: &NodeName) {
        let Some(gang) = self.gangs.get(key) else {
            return;
        };
        // A gang that holds seats already, is placed or backs off has no room to wait for.
        if gang.preemption_hold().is_some() || gang.is_admitted() || gang.is_placed_flag() {
            return;
        }
        if matches!(
            gang.phase(),
            crate::model::table::gang::Phase::BackingOff { .. }
        ) {
            return;
        }
        let Some(plan) = self.preempt_plans.get(uid).filter(|p| p.gang == *key) else {
            return;
        };
        let Some((_, others)) = plan.by_node.iter().find(|(n, _)| **n == **node) else {
            return;
        };
        let Some(entry) = self.ledger.get(node) else {
            return;
        };
        // kube-scheduler's dry run judged the preemptor's rules on this node when it chose it;
        // the node may have changed since (relabelled, tainted, cordoned): a seat there would
        // hold room its member cannot use (holds-nothing), and kube-scheduler will not bind it
        // there either. No hold: the preemptor is scheduled again.
        if !self
            .pods
            .get(uid)
            .is_some_and(|p| node_admits(entry.info(), &p.info))
        {
            return;
        }
        // The seat counts on top of the victims still terminating there, never on top of pods
        // that stay (no-overcommit): a nomination left from an earlier preemption that the
        // watch delivers again (a re-list) while kube-scheduler has not acted on this plan
        // holds nothing. When it acts, its victims' deletion brings the hold
        // (`hold_when_victims_leave`).
        if !self.fits_once_leaving_pods_go(node, &plan.requests) {
            return;
        }
        let (since, requests, others) = (plan.at, plan.requests.clone(), others.clone());
        self.preempt_plans.forget(uid);
        let own = Seat {
            node: node.clone(),
            requests,
            confirmed: false,
        };
        self.seat(key, SeatHolder::Member(uid.clone()), own);
        let others = self.members_for_late_seats(key, uid, others);
        let mut held = vec![format!("{node} (nominated)")];
        let mut awaiting = Vec::new();
        for s in others {
            // Members bound, deleted or seated meanwhile need no room held.
            let still_needed = match &s.holder {
                SeatHolder::Member(m) => self.pods.get(m).is_some_and(|p| p.is_pending()),
                SeatHolder::NotCreatedYet { .. } => true,
            };
            let Some(position) = self.ledger.position(&s.node) else {
                continue;
            };
            if !still_needed {
                continue;
            }
            // The plan counted the pods of lower priority there as evictable, but they still
            // run: a seat on top of them would over-commit the node (no-overcommit), or hold a
            // host port one of them uses (NodePorts). The member may preempt them itself there,
            // and the seat is taken once the room is free.
            let member = s.holder.member().and_then(|m| self.pods.get(m));
            if !self.planned_room_free(position, &s.requests, member.map(|m| &m.info)) {
                awaiting.push(s);
                continue;
            }
            held.push(s.node.to_string());
            let seat = Seat {
                node: s.node,
                requests: s.requests,
                confirmed: false,
            };
            self.seat(key, s.holder, seat);
        }
        let planned: Vec<String> = awaiting.iter().map(|s| s.node.to_string()).collect();
        let message = messages::holding(key, &held, &planned);
        for s in &awaiting {
            self.room_waits
                .wait(s.node.clone(), key, RoomWait::PlannedSeats);
        }
        let Some(gang) = self.gangs.get_mut(key) else {
            return;
        };
        gang.admit(since);
        gang.hold_for_preemption(uid.clone(), node.clone(), awaiting);
        // `/gangs` says why the gang waits, as the Event does.
        gang.note_waiting(message.clone());
        if let Some(p) = self.pods.get(uid) {
            self.notices.push(Notice {
                pod: PodRef::of(&p.info),
                kind: NoticeKind::Waiting,
                message,
            });
        }
    }

    /// The plan's seats for members not created yet, given to members that exist now and have
    /// no seat (the watch may have delivered them since the decision), when they fit in them,
    /// their rules pass the seat's node, no other component's scheduling gate holds them and,
    /// with per-task minimums, the seat was planned for their task: room held for a member not
    /// created yet is released when the creation window closes, but a seat given to a member
    /// its node refuses would be held for nothing (holds-nothing). A seat no arrived member
    /// can take stays with the member not created yet.
    fn members_for_late_seats(
        &self,
        key: &GangKey,
        preemptor: &PodUid,
        mut seats: Vec<PlannedSeat>,
    ) -> Vec<PlannedSeat> {
        let Some(gang) = self.gangs.get(key) else {
            return seats;
        };
        let planned: Vec<PodUid> = seats
            .iter()
            .filter_map(|s| s.holder.member().cloned())
            .collect();
        let mut arrived: Vec<&PodInfo> = self
            .members_of(gang)
            .filter(|p| {
                p.is_pending()
                    && p.info.uid != *preemptor
                    && gang.seat_of(&p.info.uid).is_none()
                    && !planned.contains(&p.info.uid)
                    && scheduling_gates::check(&p.info).is_ok()
            })
            .map(|p| &p.info)
            .collect();
        for s in seats.iter_mut().filter(|s| s.holder.is_not_created_yet()) {
            let Some(i) = arrived
                .iter()
                .position(|p| self.may_take_planned_room(gang, p, s))
            else {
                continue;
            };
            let p = arrived.remove(i);
            s.holder = SeatHolder::Member(p.uid.clone());
            s.requests = p.requests.clone();
        }
        seats
    }

    /// Whether member `p` (arrived, seatless, not gated) may take room planned for `seat`'s
    /// holder: it fits in it, its rules pass the seat's node (holds-nothing: a seat its node
    /// refuses would be held for nothing), and, with per-task minimums, it is of the task the
    /// room was planned for. The one test for both hand-overs: at the hold, and when planned
    /// room is freed later.
    fn may_take_planned_room(&self, gang: &Gang, p: &PodInfo, seat: &PlannedSeat) -> bool {
        let same_task = match &seat.holder {
            SeatHolder::NotCreatedYet { task, .. } => {
                task.is_none() || task.as_deref() == task_of(p)
            }
            SeatHolder::Member(m) => {
                gang.spec().tasks.is_empty()
                    || self.pods.get(m).and_then(|o| task_of(&o.info)) == task_of(p)
            }
        };
        p.requests.fits_in(&seat.requests)
            && same_task
            && self
                .ledger
                .get(&seat.node)
                .is_some_and(|n| node_admits(n.info(), p))
    }

    /// Room was freed on `node` (a pod left it, or shrank): the planned seats of preempting
    /// gangs that waited for room there become seats where they now fit (no-overcommit: on
    /// free room only), so no other pod takes the room the gang's members preempted for.
    ///
    /// The gangs planned here go first, in the order they began waiting (they compete for this
    /// room). The other gangs with planned room are looked at too, though nothing of theirs is
    /// seated here: `seat_awaiting` also hands a planned seat whose member no longer needs it
    /// to one that does, or forgets it, and the preempt verb and `/gangs` read the planned
    /// seats between two freed rooms.
    pub(in crate::model) fn seat_where_freed(&mut self, node: &str) {
        let mut keys: Vec<GangKey> = self
            .room_waits
            .on(node, RoomWait::PlannedSeats)
            .cloned()
            .collect();
        for key in self.room_waits.gangs(RoomWait::PlannedSeats) {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        for key in keys {
            self.seat_awaiting(&key, node);
            let planned: Vec<NodeName> = self
                .gangs
                .get(&key)
                .filter(|g| g.is_admitted())
                .map(|g| g.awaiting_room().iter().map(|s| s.node.clone()).collect())
                .unwrap_or_default();
            self.room_waits.retain(&key, RoomWait::PlannedSeats, |n| {
                planned.iter().any(|p| **p == *n)
            });
        }
    }

    /// Seats the members of `key` whose planned room on `node` is free now. A planned seat
    /// whose member no longer needs it (bound, deleted, or seated elsewhere: members are
    /// interchangeable, one may have taken another's seat) goes to a member of the gang that
    /// has neither a seat nor planned room, or is forgotten; room planned for a member not
    /// created yet waits for one (it is never seated here: such room is held only within
    /// the creation window).
    fn seat_awaiting(&mut self, key: &GangKey, node: &str) {
        let Some(gang) = self.gangs.get(key) else {
            return;
        };
        if !gang.is_admitted() {
            return;
        }
        // A member another component's scheduling gate keeps out of scheduling is placed
        // nowhere (holds-nothing): the room waits for one that may be scheduled.
        let needs = |uid: &PodUid| {
            gang.seat_of(uid).is_none()
                && self
                    .pods
                    .get(uid)
                    .is_some_and(|p| p.is_pending() && scheduling_gates::check(&p.info).is_ok())
        };
        let mut planned = gang.awaiting_room().to_vec();
        let mut homeless: Vec<&PodInfo> = self
            .members_of(gang)
            .filter(|p| needs(&p.info.uid))
            .filter(|p| {
                !planned
                    .iter()
                    .any(|s| s.holder.member() == Some(&p.info.uid))
            })
            .map(|p| &p.info)
            .collect();
        planned.retain_mut(|s| {
            if s.holder.member().is_some_and(&needs) {
                return true;
            }
            match homeless
                .iter()
                .position(|p| self.may_take_planned_room(gang, p, s))
            {
                Some(i) => {
                    let p = homeless.remove(i);
                    s.holder = SeatHolder::Member(p.uid.clone());
                    s.requests = p.requests.clone();
                    true
                }
                None => s.holder.is_not_created_yet(),
            }
        });
        let position = self.ledger.position(node);
        let mut left = Vec::new();
        let mut seats = Vec::new();
        for s in planned {
            let member = s.holder.member().and_then(|m| self.pods.get(m));
            let admitted =
                |p: &PodInfo| position.is_some_and(|i| node_admits(self.ledger.at(i).info(), p));
            match member {
                Some(p) if *s.node == *node && admitted(&p.info) => seats.push(s),
                _ => left.push(s),
            }
        }
        for s in seats {
            // One by one: two members planned on one node may not both fit yet. A host port
            // of the member still used there (a pod of lower priority not gone yet) is not free.
            let member = s.holder.member().and_then(|m| self.pods.get(m));
            let free = position
                .is_some_and(|i| self.planned_room_free(i, &s.requests, member.map(|m| &m.info)));
            if !free {
                left.push(s);
                continue;
            }
            let seat = Seat {
                node: s.node,
                requests: s.requests,
                confirmed: false,
            };
            self.seat(key, s.holder, seat);
        }
        if let Some(g) = self.gangs.get_mut(key) {
            g.still_awaiting_room(left);
        }
    }

    /// Whether `requests` fit on `node` beside its bound pods and seats once the pods being
    /// deleted there are gone (room a preemption frees, counted as free).
    pub(in crate::model) fn fits_once_leaving_pods_go(
        &self,
        node: &str,
        requests: &Resources,
    ) -> bool {
        let Some(position) = self.ledger.position(node) else {
            return false;
        };
        let leaving = self.room_of_pods_leaving(node);
        self.ledger
            .shortfall(position, requests, Some(&leaving), None)
            .is_none()
    }

    /// What the pods being deleted on `node` request: room a preemption frees.
    fn room_of_pods_leaving(&self, node: &str) -> Resources {
        let mut room = Resources::default();
        for p in self.pods.entries() {
            if p.info.terminating && p.charged_node().is_some_and(|n| **n == *node) {
                room.add(&p.info.requests);
            }
        }
        room
    }

    /// A pod on `node` is being deleted, or is gone: a preemptor nominated there, whose plan
    /// waited for kube-scheduler to act (its victims to go), may take its hold now.
    pub(in crate::model) fn hold_when_victims_leave(&mut self, node: &str) {
        if self.preempt_plans.is_empty() {
            return;
        }
        let waiting: Vec<PodUid> = self
            .preempt_plans
            .iter()
            .filter(|(_, plan)| plan.by_node.iter().any(|(n, _)| **n == *node))
            .map(|(uid, _)| uid.clone())
            .filter(|uid| {
                self.pods
                    .get(uid)
                    .is_some_and(|p| p.info.nominated_node.as_deref() == Some(node))
            })
            .collect();
        for uid in waiting {
            self.follow_nomination(&uid);
        }
    }

    /// Whether room planned for `member` (`None`: a member not created yet) with `requests`
    /// on the node at `position` is free now to become its seat: the resources (no-overcommit),
    /// its host ports, which no pod there uses (NodePorts), and the devices its claims need,
    /// which no other seat there holds (DynamicResources: two seats on one device would
    /// over-commit it once both bind).
    fn planned_room_free(
        &self,
        position: usize,
        requests: &Resources,
        member: Option<&PodInfo>,
    ) -> bool {
        if self
            .ledger
            .shortfall(position, requests, None, None)
            .is_some()
        {
            return false;
        }
        let Some(m) = member else {
            return true;
        };
        let node = self.ledger.at(position).name();
        !self.host_port_used_on(node, m)
            && self
                .devices_held_by_seats(m, |_, h| h.member() == Some(&m.uid), Some(position))
                .is_empty()
    }

    /// Whether a pod on `node` (bound, being bound or being deleted) uses a host port `member`
    /// asks for (NodePorts: one pod per port and node).
    fn host_port_used_on(&self, node: &str, member: &PodInfo) -> bool {
        let wanted = node_ports::host_ports(member);
        !wanted.is_empty()
            && self.pods.with_host_ports().any(|p| {
                p.info.uid != member.uid
                    && p.charged_node().is_some_and(|n| **n == *node)
                    && node_ports::host_ports(&p.info)
                        .iter()
                        .any(|u| wanted.iter().any(|w| w.conflicts_with(u)))
            })
    }

    /// Ends the gang's hold: the seats no member has asked to bind to are given up (pods
    /// refused for that room are asked to retry); seats of members whose bind calls came stay.
    pub(in crate::model) fn release_hold(&mut self, key: &GangKey) {
        let Some(gang) = self.gangs.get_mut(key) else {
            return;
        };
        if !gang.end_preemption_hold() {
            return;
        }
        let planned: Vec<SeatHolder> = gang
            .seats()
            .iter()
            .filter(|(_, s)| !s.confirmed)
            .map(|(h, _)| h.clone())
            .collect();
        for holder in &planned {
            self.unseat(key, holder);
        }
    }
}
