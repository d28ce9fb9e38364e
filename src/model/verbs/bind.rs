//! The bind verb: bind a pod now, seat it until its gang reaches quorum, or bind the whole
//! gang at once.

use std::sync::Arc;
use std::time::Instant;

use thiserror::Error;

use crate::model::inputs::membership::GangKey;
use crate::model::inputs::objects::{NodeName, PodInfo};
use crate::model::inputs::resources::{InsufficientResource, Resources};
use crate::model::messages;
use crate::model::notice::{Notice, NoticeKind, PodRef};
use crate::model::planning::domains::domain_of;
use crate::model::planning::planner::GangPlan;
use crate::model::planning::selection::task_of;
use crate::model::rules::dynamic_resources::DynamicResources;
use crate::model::rules::node_admits;
use crate::model::table::gang::{Seat, SeatHolder};
use crate::model::table::GangTable;

/// A bind call as kube-scheduler sends it.
#[derive(Clone, Copy, Debug)]
pub struct BindRequest<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
    pub node: &'a str,
}

/// What the bind handler must do.
#[derive(Debug, PartialEq, Eq)]
pub enum BindDecision {
    /// Create this pod's binding now (not in a gang, or its gang is already placed).
    BindNow { pod: PodRef, node: NodeName },
    /// The API server already has the pod on this node: answer success, do nothing.
    AlreadyBound,
    /// muster is binding the pod to `node` itself (its gang reached quorum while this call was
    /// on its way, or an earlier call of kube-scheduler's is binding it): the handler answers
    /// with that binding's outcome, which is what kube-scheduler needs to hear (an error would
    /// make it forget the pod, back it off and retry every pod refused by the extender).
    InFlight { pod: PodRef, node: NodeName },
    /// Seated; its gang is below quorum. The handler may hold the call until the gang is
    /// placed; otherwise it answers with this message as the error, so kube-scheduler retries
    /// the pod later (its seat is kept).
    Wait { gang: GangKey, message: String },
    /// This bind completed the quorum: bind every listed member (the requester included).
    BindGang {
        gang: GangKey,
        members: Vec<(PodRef, NodeName)>,
    },
    /// Refused; the table is unchanged.
    Reject(BindRejection),
}

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum BindRejection {
    #[error("unknown pod {namespace}/{name} (uid {uid}): muster has not seen it; it may have been deleted")]
    UnknownPod {
        namespace: String,
        name: String,
        uid: String,
    },
    #[error("pod uid {uid} is {actual}, not {namespace}/{name}")]
    PodMismatch {
        namespace: String,
        name: String,
        uid: String,
        actual: String,
    },
    #[error("unknown node {0:?}: muster has no such node in its cache")]
    UnknownNode(String),
    #[error("pod {pod} is already bound to node {node}")]
    BoundElsewhere { pod: String, node: String },
    /// The answer to a call for a pod muster is binding when that binding's outcome does not
    /// come before kube-scheduler's client would give up.
    #[error("pod {pod} is already being bound to node {node} by muster; the API server has not answered yet")]
    BindInFlight { pod: String, node: String },
    #[error("pod {0} has terminated")]
    Terminal(String),
    #[error("pod {0} is being deleted: it holds nothing new")]
    Terminating(String),
    #[error("pod {pod}: {message}")]
    InvalidMembership { pod: String, message: String },
    #[error("node {node} has no room for pod {pod}: {shortfall}")]
    NoRoom {
        pod: String,
        node: String,
        shortfall: InsufficientResource,
    },
    /// A seat of a gang holds a host port the pod asks for on that node (NodePorts: no two
    /// pods on a node share a host port; a seat holds its member's ports as it holds its room).
    #[error("node {node} cannot take pod {pod}: {reason}")]
    HostPortHeld {
        pod: String,
        node: String,
        reason: String,
    },
    /// Seats on that node hold the devices the pod's claims need (DynamicResources: a seat
    /// holds its member's devices as it holds its room).
    #[error("node {node} cannot take pod {pod}: {reason}")]
    DevicesHeld {
        pod: String,
        node: String,
        reason: String,
    },
    #[error("{0}")]
    GangCannotBePlaced(String),
    /// The member's gang was planned anew, its seat in another topology domain, after
    /// kube-scheduler chose the node of this call (see `GangTable::take_seat`).
    #[error("{0}")]
    SeatMoved(String),
    /// The member's gang is confined to one topology domain and the node is outside it (see
    /// `GangTable::confined_domain`).
    #[error("{0}")]
    OutsideDomain(String),
}

impl GangTable {
    /// The pod as the watch reported it, for a call that names it. Only the watches create
    /// pods in the table: a pod muster has not seen (not created yet in its cache, deleted,
    /// or forged) is refused and the table is unchanged; kube-scheduler retries it later.
    pub fn seen_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> Result<&PodInfo, BindRejection> {
        let Some(entry) = self.pods.get(uid) else {
            return Err(BindRejection::UnknownPod {
                namespace: namespace.into(),
                name: name.into(),
                uid: uid.into(),
            });
        };
        let info = &entry.info;
        if *info.namespace != *namespace || *info.name != *name {
            return Err(BindRejection::PodMismatch {
                namespace: namespace.into(),
                name: name.into(),
                uid: uid.into(),
                actual: info.display_name(),
            });
        }
        Ok(info)
    }
}

impl GangTable {
    pub fn bind(&mut self, req: BindRequest<'_>, now: Instant) -> BindDecision {
        use BindDecision::Reject;
        let info = match self.seen_pod(req.namespace, req.name, req.uid) {
            Ok(info) => info.clone(),
            Err(r) => return Reject(r),
        };
        let entry = self.pods.get(req.uid).expect("seen_pod found it");
        let Some(node) = self.ledger.get(req.node).map(|e| e.name().clone()) else {
            return Reject(BindRejection::UnknownNode(req.node.into()));
        };
        if let Some(bound) = &info.node_name {
            if *bound == node {
                return BindDecision::AlreadyBound;
            }
            return Reject(BindRejection::BoundElsewhere {
                pod: info.display_name(),
                node: bound.to_string(),
            });
        }
        if let Some(assumed) = entry.assumed() {
            return BindDecision::InFlight {
                pod: PodRef::of(&info),
                node: assumed.clone(),
            };
        }
        if info.terminal {
            return Reject(BindRejection::Terminal(info.display_name()));
        }
        if info.terminating {
            return Reject(BindRejection::Terminating(info.display_name()));
        }
        let key = match &info.membership {
            Err(e) => {
                return Reject(BindRejection::InvalidMembership {
                    pod: info.display_name(),
                    message: e.to_string(),
                })
            }
            Ok(m) => m.as_ref().map(|m| m.gang.clone()),
        };
        if let Some(r) = key
            .as_ref()
            .and_then(|k| self.outside_confined_domain(k, &info, &node))
        {
            return Reject(r);
        }
        match key {
            Some(k) if !self.is_placed(&k, &self.facts(&k)) => {
                self.bind_gang_member(&k, &info, node, now)
            }
            _ => self.bind_plain(&info, node),
        }
    }

    /// A gang confined to one domain (topology required) binds nothing outside it: the node may
    /// have been chosen by a filter before the gang took its domain (a preemption's hold, a
    /// sibling's plan), and a filter now would not offer it (holds-nothing). The member's own
    /// seat is left to the last look before binding, which places the gang again when that
    /// node left the domain since.
    fn outside_confined_domain(
        &self,
        key: &GangKey,
        info: &PodInfo,
        node: &NodeName,
    ) -> Option<BindRejection> {
        let (label, value) = self.confined_domain(key)?;
        let on_own_seat = self
            .gangs
            .get(key)
            .and_then(|g| g.seat_of(&info.uid))
            .is_some_and(|s| s.node == *node);
        let here = self
            .ledger
            .get(node)
            .and_then(|e| domain_of(e.info(), &label));
        (!on_own_seat && here != Some(&*value)).then(|| {
            BindRejection::OutsideDomain(messages::bind_outside_domain(
                key,
                &info.display_name(),
                node,
                &label,
                &value,
            ))
        })
    }

    /// A seated member's held bind call gave up waiting: it is told why (a `GangWaiting`
    /// Event), once per distinct reason, not at every retry of kube-scheduler.
    pub fn wait_outlasted_hold(&mut self, uid: &str, message: &str) {
        let Some(p) = self.pods.get(uid) else { return };
        let Some(key) = p.info.gang().map(|m| &m.gang) else {
            return;
        };
        let pod = PodRef::of(&p.info);
        let Some(gang) = self.gangs.get_mut(key) else {
            return;
        };
        if gang.tell_waiting_once(&pod.uid, message) {
            self.notices.push(Notice {
                pod,
                kind: NoticeKind::Waiting,
                message: message.to_string(),
            });
        }
    }

    fn bind_plain(&mut self, info: &PodInfo, node: NodeName) -> BindDecision {
        let position = self.ledger.position(&node).expect("bind checked the node");
        if let Some(shortfall) = self.ledger.shortfall(position, &info.requests, None, None) {
            return BindDecision::Reject(BindRejection::NoRoom {
                pod: info.display_name(),
                node: node.to_string(),
                shortfall,
            });
        }
        // The filter that offered this node may have run before a seat there took a host port
        // the pod asks for (no-overcommit, NodePorts): the bind looks again.
        if let Err(r) = self.no_seat_holds_its_ports(info, &node, position) {
            return BindDecision::Reject(r);
        }
        // Likewise the devices its claims need (no-overcommit, DynamicResources).
        if let Err(r) = self.no_seat_holds_its_devices(info, &node, position, |_, _| false) {
            return BindDecision::Reject(r);
        }
        self.assume(&info.uid, node.clone());
        BindDecision::BindNow {
            pod: PodRef::of(info),
            node,
        }
    }

    fn bind_gang_member(
        &mut self,
        key: &GangKey,
        info: &PodInfo,
        node: NodeName,
        now: Instant,
    ) -> BindDecision {
        let gang = self.gangs.get_mut(key).expect("member's gang exists");
        gang.note_arrivals(now);
        if let Some(left) = gang.backoff_left(now) {
            return BindDecision::Reject(BindRejection::GangCannotBePlaced(messages::backing_off(
                key, left,
            )));
        }
        if gang.is_admitted() {
            if let Err(r) = self.take_seat(key, info, &node) {
                return BindDecision::Reject(r);
            }
        } else {
            let position = self.ledger.position(&node).expect("bind checked the node");
            let plan = self.plan(key, info, &[position], now);
            self.note_verdict(key, &plan);
            match plan {
                GangPlan::Fits {
                    seats, not_created, ..
                } => self.take_planned_seats(key, info, node, seats, not_created, now),
                GangPlan::DoesNotFit(ref why) => {
                    let message = why.message(key, self.config.creation_window);
                    self.tell_waiting(key, &message, &plan, info, now);
                    return BindDecision::Reject(BindRejection::GangCannotBePlaced(message));
                }
            }
        }

        // Of a gathered gang, only the seats kube-scheduler holds count toward the quorum and
        // are bound at it (no-overcommit, see the method).
        if self.gangs.get(key).is_some_and(|g| self.is_gathered(g)) {
            self.unconfirm_seats_kube_scheduler_let_go(key, &info.uid);
        }
        let facts = self.facts(key);
        if !facts.seated_quorum_met() {
            let message = messages::waiting_for_quorum(key, &facts.counts());
            // No Event here: the bind handler holds the call and tells the member only if the
            // wait outlasts the hold (most gangs complete within it). Telling every member on
            // every seat was n^2 Events per gang.
            if let Some(g) = self.gangs.get_mut(key) {
                g.note_waiting(message.clone());
            }
            return BindDecision::Wait {
                gang: key.clone(),
                message,
            };
        }

        self.bind_at_quorum(key, info, facts)
    }

    /// `Err` when a seat of another pod on `node` (at `position`) holds a host port `info`
    /// asks for.
    fn no_seat_holds_its_ports(
        &self,
        info: &PodInfo,
        node: &NodeName,
        position: usize,
    ) -> Result<(), BindRejection> {
        match self
            .ports_held_by_seats(info, Some(position))
            .remove(&position)
        {
            Some(reason) => Err(BindRejection::HostPortHeld {
                pod: info.display_name(),
                node: node.to_string(),
                reason,
            }),
            None => Ok(()),
        }
    }

    /// `Err` when seats on `node` (at `position`), but those `skip` names, hold the devices the
    /// claims of `info` need there.
    fn no_seat_holds_its_devices(
        &self,
        info: &PodInfo,
        node: &NodeName,
        position: usize,
        skip: impl Fn(&GangKey, &SeatHolder) -> bool,
    ) -> Result<(), BindRejection> {
        match self
            .devices_held_by_seats(info, skip, Some(position))
            .remove(&position)
        {
            Some(reason) => Err(BindRejection::DevicesHeld {
                pod: info.display_name(),
                node: node.to_string(),
                reason,
            }),
            None => Ok(()),
        }
    }

    /// The plan fitted: the member takes its seat on `node`, every other member its planned
    /// seat, and the gang is admitted.
    fn take_planned_seats(
        &mut self,
        key: &GangKey,
        info: &PodInfo,
        node: NodeName,
        seats: Vec<(SeatHolder, usize)>,
        not_created: Vec<(Option<Arc<str>>, Resources)>,
        now: Instant,
    ) {
        let own = Seat {
            node,
            requests: info.requests.clone(),
            confirmed: true,
        };
        self.seat(key, SeatHolder::Member(info.uid.clone()), own);
        for (holder, position) in seats {
            let requests = match &holder {
                SeatHolder::Member(uid) => self.pods.get(uid).map(|p| p.info.requests.clone()),
                SeatHolder::NotCreatedYet { task, .. } => not_created
                    .iter()
                    .find(|(t, _)| t == task)
                    .map(|(_, r)| r.clone()),
            }
            .unwrap_or_else(|| info.requests.clone());
            let node = self.ledger.at(position).name().clone();
            let seat = Seat {
                node,
                requests,
                confirmed: false,
            };
            self.seat(key, holder, seat);
        }
        if let Some(g) = self.gangs.get_mut(key) {
            g.note_planned();
            g.admit(now);
        }
    }

    /// The room its gang's preemption planned for `info` on `node` (at `position`), where pods
    /// being deleted still use it (`Gang::awaiting_room`): kube-scheduler asks to bind there
    /// once its own cache shows them gone, and muster's watch may deliver their deletions a
    /// moment later. Refusing would clear the member's nomination (kube-scheduler clears it
    /// when a binding fails), which is all that keeps the room from plain pods. So the member
    /// takes it as its seat, on top of the leaving pods as the preemptor's seat is on top of
    /// its victims, and the quorum waits for them to go before anything is bound
    /// (`room_on_its_way`: no-overcommit). `Ok(false)`: no such room here, nothing changed.
    fn take_room_on_its_way(
        &mut self,
        key: &GangKey,
        info: &PodInfo,
        node: &NodeName,
    ) -> Result<bool, BindRejection> {
        let me = SeatHolder::Member(info.uid.clone());
        let Some(planned) = self.gangs[key]
            .awaiting_room()
            .iter()
            .position(|s| s.holder == me && s.node == *node)
        else {
            return Ok(false);
        };
        if !self.fits_once_leaving_pods_go(node, &info.requests) {
            return Ok(false);
        }
        let position = self.ledger.position(node).expect("bind checked the node");
        // Judged as any pod off a seat of its own: no other seat there may hold its host
        // ports (NodePorts) or its devices (DynamicResources).
        self.no_seat_holds_its_ports(info, node, position)?;
        self.no_seat_holds_its_devices(info, node, position, |k, h| k == key && *h == me)?;
        let gang = self.gangs.get_mut(key).expect("checked above");
        let mut rest = gang.awaiting_room().to_vec();
        rest.remove(planned);
        gang.still_awaiting_room(rest);
        let seat = Seat {
            node: node.clone(),
            requests: info.requests.clone(),
            confirmed: true,
        };
        self.seat(key, me, seat);
        Ok(true)
    }

    /// Seats `info` on `node` for an admitted gang: its own seat if it is there, otherwise free
    /// room, otherwise a planned seat of its gang on that node (members are interchangeable).
    fn take_seat(
        &mut self,
        key: &GangKey,
        info: &PodInfo,
        node: &NodeName,
    ) -> Result<(), BindRejection> {
        let me = SeatHolder::Member(info.uid.clone());
        if self.gangs[key].seat_of(&info.uid).is_none()
            && self.take_room_on_its_way(key, info, node)?
        {
            return Ok(());
        }
        let gang = &self.gangs[key];
        let previous = gang.seats().get(&me);
        // With per-task minimums, a member takes over only a seat of its own task (or room
        // held for any task): taking another task's would leave that task short.
        let my_task = task_of(info);
        let with_tasks = !gang.spec().tasks.is_empty();
        let same_task = |holder: &SeatHolder| {
            !with_tasks
                || match holder {
                    SeatHolder::NotCreatedYet { task, .. } => {
                        task.is_none() || task.as_deref() == my_task
                    }
                    SeatHolder::Member(uid) => {
                        self.pods.get(uid).and_then(|p| task_of(&p.info)) == my_task
                    }
                }
        };
        if let Some(seat) = previous.filter(|s| s.node == *node) {
            let confirmed = Seat {
                confirmed: true,
                ..seat.clone()
            };
            self.seat(key, me, confirmed);
            return Ok(());
        }
        if let Some(seat) = previous.filter(|s| !s.confirmed) {
            // A sibling's bind planned the gang anew (it moved to another topology domain)
            // after kube-scheduler chose `node` for this member: that choice was made for the
            // old plan. Moving the seat to it would seat the gang across two domains; the
            // member is scheduled again and offered its seat (never-half). Only a stale choice
            // is refused: one made after the plan (kube-scheduler's own filters excluded the
            // seat's node) is taken, so the member is never refused forever.
            if gang.filtered_before_latest_plan(&info.uid)
                && !self.same_topology_domain(gang, node, &seat.node)
            {
                return Err(BindRejection::SeatMoved(messages::seat_moved_after_filter(
                    key,
                    &info.display_name(),
                    node,
                    &seat.node,
                )));
            }
        }
        let position = self.ledger.position(node).expect("bind checked the node");
        // Off its own seat the member is judged as any pod: a seat of another member there may
        // hold a host port it asks for (no-overcommit, NodePorts).
        self.no_seat_holds_its_ports(info, node, position)?;
        let fits_with = |credit: &Resources| {
            self.ledger
                .shortfall(position, &info.requests, Some(credit), None)
                .is_none()
        };
        let shortfall = self.ledger.shortfall(position, &info.requests, None, None);
        // A member without a seat is one the gang's plan did not know: a seat held for a
        // member not created yet is its own, here if there is one, else released elsewhere so
        // the gang never holds more than its quorum.
        let held_for_late: Vec<(&SeatHolder, bool)> = if previous.is_none() {
            gang.seats()
                .iter()
                .filter(|(h, _)| h.is_not_created_yet() && same_task(h))
                .map(|(h, s)| (h, s.node == *node && fits_with(&s.requests)))
                .collect()
        } else {
            Vec::new()
        };
        let release: Option<&SeatHolder> =
            if let Some((held, _)) = held_for_late.iter().find(|(_, here)| *here) {
                Some(*held)
            } else if let Some(shortfall) = shortfall {
                // No room of its own: take over a planned seat of its gang on this node.
                let donor = gang.seats().iter().find(|(h, s)| {
                    **h != me
                        && !s.confirmed
                        && s.node == *node
                        && same_task(h)
                        && fits_with(&s.requests)
                });
                match donor {
                    Some((h, _)) => Some(h),
                    None => {
                        return Err(BindRejection::NoRoom {
                            pod: info.display_name(),
                            node: node.to_string(),
                            shortfall,
                        })
                    }
                }
            } else {
                held_for_late.first().map(|(held, _)| *held)
            };
        // Off its own seat, the devices its claims need there must not be held by another seat
        // (no-overcommit, DynamicResources), its gang's included: a seat it takes over here
        // holds nothing against it.
        let released_here =
            release.filter(|h| gang.seats().get(*h).is_some_and(|s| s.node == *node));
        self.no_seat_holds_its_devices(info, node, position, |k, h| {
            k == key && (*h == me || Some(h) == released_here)
        })?;
        // The member whose planned seat is taken over gets the taker's old seat, when it fits in
        // it and its rules pass that node (the taker may be leaving it because the node was
        // cordoned or tainted since; a member not created yet is judged by the taker, as the
        // plan judges it by the members that exist): the gang keeps room for its whole quorum
        // (such as the room a preemption's hold keeps for a member whose victims are still
        // there) instead of one seat less, and never room its member cannot use
        // (holds-nothing).
        // A member with device claims also needs them to fit there, with what the other seats
        // there hold (not its own, nor the taker's, which leaves): a seat on a node without
        // its devices would hold room it cannot use (holds-nothing, DynamicResources).
        let admitted_there = |displaced: &SeatHolder, old: &NodeName| {
            let (Some(node), Some(at)) = (self.ledger.get(old), self.ledger.position(old)) else {
                return false;
            };
            let member = match displaced {
                SeatHolder::Member(uid) => self.pods.get(uid).map(|p| &p.info),
                SeatHolder::NotCreatedYet { .. } => Some(info),
            };
            member.is_some_and(|p| {
                node_admits(node.info(), p)
                    && DynamicResources::new(&self.devices, &[p], |_| false)
                        .is_none_or(|d| d.check(0, node.info()).is_ok())
                    && self
                        .devices_held_by_seats(
                            p,
                            |k, h| k == key && (h == displaced || *h == me),
                            Some(at),
                        )
                        .is_empty()
            })
        };
        let swap = match (previous, release) {
            (Some(old), Some(displaced))
                if old.node != *node && admitted_there(displaced, &old.node) =>
            {
                let wanted = &gang.seats()[displaced].requests;
                wanted.fits_in(&old.requests).then(|| {
                    let seat = Seat {
                        node: old.node.clone(),
                        requests: wanted.clone(),
                        confirmed: false,
                    };
                    (displaced.clone(), seat)
                })
            }
            _ => None,
        };
        let release: Vec<SeatHolder> = release.into_iter().cloned().collect();
        let seat = Seat {
            node: node.clone(),
            requests: info.requests.clone(),
            confirmed: true,
        };
        self.reseat(key, &release, me, seat);
        if let Some((displaced, seat)) = swap {
            self.seat(key, displaced, seat);
        }
        Ok(())
    }
}
