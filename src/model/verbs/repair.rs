//! A gang found partly bound when this replica starts deciding — muster was killed (or lost its
//! Lease) in the middle of a gang's binding fan-out: some quorum members bound, none deleted
//! or failed, the rest pending — is finished first (never-half).
//!
//! [`GangTable::repair_partly_bound`] runs once, before any other decision of a restarted
//! muster or of a replica taking over (the shared state calls it from the first verb or gather
//! round after the caches are synced and this replica leads): each such gang is planned under
//! every rule with every node to choose from, before any other gang or pod has been offered
//! anything, and its remaining members take a seat each (planned seats; the gang is admitted,
//! so its timeout counts). kube-scheduler's next calls for them confirm those seats and the
//! bind that completes the quorum binds them together — in every-pod mode as any member's, and
//! in gang-members mode the same way (they passed their gate before their bindings started).
//!
//! The seats keep off only pods that ask muster, or that kube-scheduler sees nominated room
//! for: a pod bound by kube-scheduler without muster before the seat is published as the
//! member's nomination (gang-members mode), or one created with `spec.nodeName`, can take their
//! room. [`GangTable::recheck_partly_bound`] then decides the gang again at the next tick, as a
//! restart would decide it now.
//!
//! If the remaining members cannot be placed (the room was taken meanwhile, say by a pod bound
//! while muster was down or since), or their seats time out, the bound part is never left running
//! silently: a `GangPartlyBound` Warning on every member says so, `/gangs` shows it, and in
//! disruption mode `gang` the bound members are evicted (evict-for-whole: half a gang is
//! useless; the gang then starts again whole), in mode `pod` they keep running and the rest
//! bind when room appears.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::model::inputs::membership::{DisruptionMode, GangKey};
use crate::model::inputs::objects::NodeName;
use crate::model::inputs::resources::Resources;
use crate::model::messages;
use crate::model::notice::{Notice, NoticeKind, PodRef};
use crate::model::planning::planner::{GangPlan, GangShortfall};
use crate::model::table::disruptions::GangDisruption;
use crate::model::table::gang::{Seat, SeatHolder};
use crate::model::table::partly_bound::{PartlyBound, PartlyBoundOutcome};
use crate::model::table::GangTable;

impl GangTable {
    /// Finishes, or reports and (mode `gang`) evicts, every gang found partly bound; see the
    /// module notes. Call it once, when this replica starts deciding, before any verb decides.
    /// What was done is also kept for [`GangTable::take_partly_bound`].
    pub fn repair_partly_bound(&mut self, now: Instant) -> Vec<PartlyBound> {
        let mut keys: Vec<GangKey> = self
            .gangs
            .iter()
            .filter(|(_, g)| !g.is_admitted() && g.preemption_hold().is_none())
            .map(|(k, _)| k.clone())
            .collect();
        keys.sort();
        let mut found = Vec::new();
        for key in keys {
            let Some((bound, quorum)) = self.partly_bound_counts(&key) else {
                continue;
            };
            let Some(outcome) = self.decide_partly_bound(&key, bound, quorum, now) else {
                continue;
            };
            found.push(PartlyBound {
                gang: key,
                bound,
                quorum,
                outcome,
            });
        }
        self.partly_bound.extend(found.iter().cloned());
        found
    }

    /// Room held for the rest of a gang found partly bound is room no longer once a pod muster
    /// did not place is bound there: in gang-members mode kube-scheduler binds plain pods
    /// without asking muster, and a seat not yet published as its member's nomination keeps
    /// none of them off it (nor does one of lower priority than a pod that ignores it); in
    /// either mode a pod created with `spec.nodeName`, or bound by another scheduler, lands
    /// where it likes. kube-scheduler then finds no node for the member and never calls muster
    /// for it again, so the gang stayed half running until its timeout. Instead, each tick
    /// (`expire`), such a gang is decided again as a restart would decide it now: its seats go,
    /// the rest is planned with every node to choose from, and room elsewhere is held; with
    /// none, the gang is given up at once (never-half, evict-for-whole, explained). Room on its
    /// way (pods being deleted there) is not waited for: nothing was committed to it.
    pub(in crate::model) fn recheck_partly_bound(&mut self, now: Instant) {
        let keys: Vec<GangKey> = self
            .gangs
            .iter()
            .filter(|(_, g)| {
                g.partly_bound().is_some() && g.is_admitted() && g.preemption_hold().is_none()
            })
            .map(|(k, _)| k.clone())
            .filter(|k| self.seat_without_room(k))
            .collect();
        for key in keys {
            let Some((bound, quorum)) = self.partly_bound_counts(&key) else {
                continue;
            };
            self.unseat_all(&key);
            self.released.push(key.clone());
            if let Some(g) = self.gangs.get_mut(&key) {
                g.settle_after_seats_removed();
            }
            // Not decidable (a rule muster cannot judge now): the ordinary path decides it,
            // as after a restart.
            let Some(outcome) = self.decide_partly_bound(&key, bound, quorum, now) else {
                continue;
            };
            self.partly_bound.push(PartlyBound {
                gang: key,
                bound,
                quorum,
                outcome,
            });
        }
    }

    /// Whether a node where the gang holds seats has no room left for them beside what is
    /// bound there and every other gang's seats (bound + seats > allocatable: no-overcommit).
    fn seat_without_room(&self, key: &GangKey) -> bool {
        let Some(gang) = self.gangs.get(key) else {
            return false;
        };
        let mut per_node: BTreeMap<&NodeName, Resources> = BTreeMap::new();
        for seat in gang.seats().values() {
            per_node.entry(&seat.node).or_default().add(&seat.requests);
        }
        per_node.into_iter().any(|(node, seats)| {
            self.ledger.position(node).is_some_and(|position| {
                self.ledger
                    .shortfall(position, &seats, Some(&seats), None)
                    .is_some()
            })
        })
    }

    /// Holds room for the rest of a partly bound gang and tells its members, or gives it up
    /// where there is none; `None` when it cannot be decided yet (no declared count within
    /// the creation window, the PodGroup not seen): the ordinary path decides it later.
    fn decide_partly_bound(
        &mut self,
        key: &GangKey,
        bound: u32,
        quorum: u32,
        now: Instant,
    ) -> Option<PartlyBoundOutcome> {
        match self.hold_room_for_the_rest(key, now) {
            Ok(seats) => {
                let message = messages::partly_bound_finishing(key, bound, quorum, &seats);
                self.tell_members(key, NoticeKind::Waiting, &message);
                for (pod, _) in &seats {
                    // An update of the pod: kube-scheduler tries it now, not after its
                    // back-off from the calls that failed while muster was away.
                    self.notices.push(Notice {
                        pod: pod.clone(),
                        kind: NoticeKind::Retry,
                        message: message.clone(),
                    });
                }
                if let Some(g) = self.gangs.get_mut(key) {
                    g.found_partly_bound(message);
                }
                Some(PartlyBoundOutcome::Finishing { seats })
            }
            Err(Some(why)) => Some(self.give_up_partly_bound(key, bound, quorum, &why)),
            Err(None) => None,
        }
    }

    /// What was done about gangs found partly bound (by [`GangTable::repair_partly_bound`]
    /// or when their seats timed out) since the last call.
    pub fn take_partly_bound(&mut self) -> Vec<PartlyBound> {
        self.partly_bound.take()
    }

    /// `(bound, quorum)` when the gang is partly bound as this module means it: its quorum
    /// decided, some but fewer than quorum live members bound (or a task below its minimum),
    /// no member finished or being deleted, and enough pending members to complete it among
    /// those that existed when the bound ones were bound.
    ///
    /// A fan-out binds members that exist when it starts, so a pending member created after
    /// the latest binding of the bound ones (their `PodScheduled` condition's time) was not
    /// part of it: it replaces a member the gang lost after it was placed (deleted while
    /// muster was away, and gone from the cluster). Such a gang is a running gang short of a
    /// member, and it waits as a running muster would have it wait — it is not repaired, and
    /// never evicted for it (derived). Ambiguous — a member created in the same second as that
    /// binding (the API server's times are in seconds), or a bound member without the
    /// condition (created with `spec.nodeName`) — counts as part of the fan-out (repaired).
    pub(in crate::model) fn partly_bound_counts(&self, key: &GangKey) -> Option<(u32, u32)> {
        let gang = self.gangs.get(key)?;
        let facts = self.facts(key);
        if !facts.spec.is_decided() || facts.with_nodes == 0 || facts.quorum_met() {
            return None;
        }
        if self.members_of(gang).any(|p| !p.is_live()) {
            return None;
        }
        // The latest binding of the bound members, if every one of them says when it was made.
        let latest_binding = self
            .members_of(gang)
            .filter(|p| p.info.node_name.is_some())
            .map(|p| p.info.bound_at)
            .try_fold(i64::MIN, |latest, at| at.map(|at| latest.max(at)));
        let pending = self
            .pending_members(key)
            .iter()
            .filter(|p| latest_binding.is_none_or(|latest| p.info.created <= latest))
            .count() as u32;
        let members_enough = facts.with_nodes + pending >= facts.spec.quorum
            && facts.tasks.iter().all(|t| t.existing >= t.min);
        members_enough.then_some((facts.with_nodes, facts.spec.quorum))
    }

    /// Plans the gang's remaining members with every node to choose from and seats them
    /// (planned seats; the gang is admitted). `Err(Some(why))`: they cannot be placed now;
    /// `Err(None)`: the gang cannot be decided yet.
    fn hold_room_for_the_rest(
        &mut self,
        key: &GangKey,
        now: Instant,
    ) -> Result<Vec<(PodRef, NodeName)>, Option<String>> {
        let first = self
            .pending_members(key)
            .first()
            .map(|p| p.info.clone())
            .ok_or(None)?;
        let every_node: Vec<usize> = (0..self.ledger.len()).collect();
        let plan = self.plan(key, &first, &every_node, now);
        self.note_verdict(key, &plan);
        let window = self.config.creation_window;
        let (chosen, seats) = match plan {
            GangPlan::Fits {
                first_node, seats, ..
            } if seats.iter().all(|(h, _)| !h.is_not_created_yet()) => (first_node, seats),
            GangPlan::Fits { .. } => return Err(None),
            // Room, inside its topology domain too (a gang confined to one domain is finished
            // only there: the domain of its bound members), is decided now (never-half).
            GangPlan::DoesNotFit(
                ref why @ (GangShortfall::Room { .. }
                | GangShortfall::Domain { .. }
                | GangShortfall::BeyondCluster(_)),
            ) => return Err(Some(why.message(key, window))),
            GangPlan::DoesNotFit(_) => return Err(None),
        };
        let mut placed = vec![(SeatHolder::Member(first.uid.clone()), chosen)];
        placed.extend(seats);
        let mut out = Vec::with_capacity(placed.len());
        for (holder, position) in placed {
            let Some(p) = holder.member().and_then(|u| self.pods.get(u)) else {
                continue;
            };
            let (pod, requests) = (PodRef::of(&p.info), p.info.requests.clone());
            let node = self.ledger.at(position).name().clone();
            // Planned, not confirmed: kube-scheduler's bind call for the member confirms it.
            let seat = Seat {
                node: node.clone(),
                requests,
                confirmed: false,
            };
            self.seat(key, holder, seat);
            out.push((pod, node));
        }
        if let Some(g) = self.gangs.get_mut(key) {
            g.admit(now);
            g.stop_waiting();
        }
        out.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        Ok(out)
    }

    /// The gang's remaining members cannot be placed (`why`): every member is told, and in
    /// disruption mode `gang` its bound members are handed to the evictor.
    pub(in crate::model) fn give_up_partly_bound(
        &mut self,
        key: &GangKey,
        bound: u32,
        quorum: u32,
        why: &str,
    ) -> PartlyBoundOutcome {
        let Some(gang) = self.gangs.get(key) else {
            return PartlyBoundOutcome::Reported { why: why.into() };
        };
        // Members that disagree: the safer mode, the whole gang, wins (as for preemption).
        let mut mode = DisruptionMode::Pod;
        let mut members = Vec::new();
        for p in self.members_of(gang) {
            if let Some(m) = p.info.gang() {
                mode = mode.min(m.disruption);
            }
            if p.is_live() && p.charged_node().is_some() {
                members.push(PodRef::of(&p.info));
            }
        }
        members.sort_by(|a, b| a.name.cmp(&b.name));
        let evict = mode == DisruptionMode::Gang;
        let message = messages::partly_bound_stuck(key, bound, quorum, why, evict);
        self.tell_members(key, NoticeKind::PartlyBound, &message);
        if let Some(g) = self.gangs.get_mut(key) {
            g.found_partly_bound(message.clone());
        }
        if !evict {
            return PartlyBoundOutcome::Reported { why: why.into() };
        }
        self.disruptions.commit(GangDisruption {
            gang: key.clone(),
            others: members.clone(),
            message,
        });
        PartlyBoundOutcome::Evicting {
            members,
            why: why.into(),
        }
    }

    /// One notice of `kind` per live member of the gang.
    fn tell_members(&mut self, key: &GangKey, kind: NoticeKind, message: &str) {
        self.tell(key, kind, message, |p| p.is_live());
    }
}
