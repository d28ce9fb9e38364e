//! A gang with a topology that moves whole to another domain before it binds (the every-pod
//! mode).
//!
//! In the every-pod mode a gang's first member often asks before its siblings exist: the plan
//! then sizes the members not created yet as copies of the members that exist (see
//! `GangTable::not_created_templates`) and seats the gang in the domain that best fits those
//! copies. When larger siblings arrive, that domain may not hold them, while another domain
//! would hold the whole gang; left alone, a preferred gang's siblings take room elsewhere and
//! the gang binds split across domains although one would have held it, and a required gang's
//! wait for room in its domain that will not come (until the gang times out).
//!
//! Nothing of the gang is bound yet, so its seats can still move: a seat is only room muster
//! holds, and the seated members' bind calls are held, not answered. When a member of such a
//! gang fits nowhere in the gang's domain of the narrowest level, muster plans the gang again
//! with every member as it is now (the gang's own seats counted as free); if that plan puts
//! the whole quorum in one domain of the narrowest level, the gang gives up its seats (its held
//! bind calls answer with the reason, and kube-scheduler schedules those members again) and
//! the asking member is planned like any waiting gang's, in the new domain. Otherwise nothing
//! changes: a preferred gang's member goes to the nearest room (a preference never makes a
//! gang wait), a required gang's waits for room in its domain.
//!
//! The invariants: nothing is bound while the gang moves (never-half); the gang holds no room
//! once its seats are released, and the new plan holds only what its real members fit
//! (holds-nothing); the released members are scheduled by kube-scheduler again, onto the
//! nodes muster's filter offers (kube-scheduler-semantics). Gathered gangs (the gang-members mode)
//! never need this: they are placed only once every member exists.

use std::time::Instant;

use crate::model::inputs::membership::GangKey;
use crate::model::inputs::objects::PodInfo;
use crate::model::inputs::resources::Resources;
use crate::model::inputs::topology::Topology;
use crate::model::messages;
use crate::model::notice::NoticeKind;
use crate::model::planning::domains::domain_of;
use crate::model::planning::planner::GangPlan;
use crate::model::table::gang::Phase;
use crate::model::table::GangTable;

impl GangTable {
    /// For a member `pod` of the admitted gang `key` asking with `candidates` (ledger
    /// positions kube-scheduler's filters passed): moves the gang to another domain when its
    /// domain (the required label's, or the narrowest preferred level's) cannot take `pod` and
    /// another one holds the whole quorum (see the module). `true`: the gang gave up its seats
    /// and holds nothing now.
    pub(in crate::model) fn move_gang_domain(
        &mut self,
        key: &GangKey,
        pod: &PodInfo,
        candidates: &[usize],
        now: Instant,
    ) -> bool {
        let Some(gang) = self.gangs.get(key) else {
            return false;
        };
        let label = match gang.spec().topology.constraint().map(|c| &c.topology) {
            Some(Topology::Preferred(levels)) => match levels.first() {
                Some(l) => l.clone(),
                None => return false,
            },
            Some(Topology::Required(l)) => l.clone(),
            None => return false,
        };
        // Only a gang nothing of which is bound can move, and only its own seats: not one
        // holding room for a preemption, not a gathered one, not a member with a seat.
        let Phase::Admitted { since } = gang.phase() else {
            return false;
        };
        if gang.preemption_hold().is_some()
            || gang.seat_of(&pod.uid).is_some()
            || self.is_gathered(gang)
            || self.facts(key).with_nodes > 0
        {
            return false;
        }
        let Some(from) = self.gang_domain(key, &label) else {
            return false;
        };
        // The member fits in the gang's domain (free room, or a planned seat of its gang it
        // may take over): nothing to move.
        let mut planned: Vec<(usize, Resources)> = Vec::new();
        for s in gang.seats().values().filter(|s| !s.confirmed) {
            if let Some(i) = self.ledger.position(&s.node) {
                planned.push((i, s.requests.clone()));
            }
        }
        let in_from =
            |t: &GangTable, i: usize| domain_of(t.ledger.at(i).info(), &label) == Some(&*from);
        let fits_in_domain = candidates.iter().any(|&i| {
            in_from(self, i)
                && (self
                    .ledger
                    .shortfall(i, &pod.requests, None, None)
                    .is_none()
                    || planned.iter().any(|(at, r)| {
                        *at == i
                            && self
                                .ledger
                                .shortfall(i, &pod.requests, Some(r), None)
                                .is_none()
                    }))
        });
        if fits_in_domain {
            return false;
        }

        // Plan the gang again with its seats given up; keep the move only if one other domain
        // of that label holds the whole quorum.
        let was_released = self.retry_asks.seats_released();
        let given_up = self.unseat_all(key);
        if let Some(g) = self.gangs.get_mut(key) {
            g.settle_after_seats_removed();
        }
        let plan = self.plan(key, pod, candidates, now);
        let to = match &plan {
            GangPlan::Fits {
                first_node, seats, ..
            } => {
                let mut values = std::iter::once(first_node)
                    .chain(seats.iter().map(|(_, i)| i))
                    .map(|&i| domain_of(self.ledger.at(i).info(), &label));
                let first = values.next().flatten();
                first
                    .filter(|v| *v != &*from && values.all(|o| o == Some(*v)))
                    .map(str::to_owned)
            }
            GangPlan::DoesNotFit(_) => None,
        };
        let Some(to) = to else {
            // No better domain: everything back as it was.
            for (holder, seat) in given_up {
                self.seat(key, holder, seat);
            }
            if let Some(g) = self.gangs.get_mut(key) {
                g.admit(since);
            }
            self.retry_asks.restore_seats_released(was_released);
            return false;
        };
        let quorum = self.facts(key).spec.quorum;
        let message = messages::gang_moves_domain(key, &label, &from, &to, quorum);
        let seated: Vec<_> = given_up
            .iter()
            .filter_map(|(h, _)| h.member().cloned())
            .collect();
        self.tell(key, NoticeKind::Waiting, &message, |p| {
            seated.contains(&p.info.uid)
        });
        if let Some(g) = self.gangs.get_mut(key) {
            g.note_waiting(message);
        }
        // The held bind calls look again: without a seat, they answer with the message.
        self.released.push(key.clone());
        true
    }
}
