//! What the table decides for a gathered gang: whether it is gathered, the rule of its seats,
//! its admission with a seat per quorum member, and whether only preemption could place it.

use std::time::Instant;

use super::{gather_gate_index, let_through};
use crate::model::inputs::membership::GangKey;
use crate::model::inputs::objects::{NodeName, PodInfo};
use crate::model::messages;
use crate::model::notice::{Notice, NoticeKind, PodRef};
use crate::model::planning::planner::{GangPlan, GangShortfall};
use crate::model::planning::selection::task_of;
use crate::model::rules::scheduling_gates;
use crate::model::table::gang::{BeyondPreemption, Gang, Seat, SeatHolder};
use crate::model::table::GangTable;
use crate::model::verbs::preempt::PreemptionOutlook;

impl GangTable {
    /// Whether the gang is gathered behind muster's gate: a live member carries the marker the
    /// admission policy adds with the gate (the marker stays after the gate goes).
    pub(in crate::model) fn is_gathered(&self, gang: &Gang) -> bool {
        self.members_of(gang)
            .any(|p| p.info.gang_marker && p.is_live())
    }

    /// The rule of a gathered gang's seats: an admitted gathered gang holds seats only while
    /// its quorum (and every task's minimum) is met by members with nodes and seated members
    /// that exist, are live and wait for no gate but muster's (under a live preemption hold,
    /// members whose planned room is still being freed count as seated). A member deleted (its seat goes
    /// with it), a node gone, a seat held for a member not created yet: the quorum is short and
    /// every seat goes at once (holds-nothing), never kept until the gang's timeout — unless
    /// the members short of a seat exist and can be seated again beside the seats
    /// kube-scheduler confirmed ([`GangTable::reseat_gathered`]). Returns whether the gang's
    /// seats were released.
    pub(super) fn release_short_gathered(&mut self, key: &GangKey, now: Instant) -> bool {
        let Some(gang) = self.gangs.get(key) else {
            return false;
        };
        if !gang.is_admitted() || !self.is_gathered(gang) {
            return false;
        }
        let facts = self.facts(key);
        if !facts.spec.is_decided() || self.is_placed(key, &facts) {
            return false;
        }
        // While a preemption hold is live, a member whose planned room still has pods of lower
        // priority running (`awaiting_room`, no seat yet: no-overcommit) counts as seated: it
        // was let through to preempt them, its seat is taken once they go, and the hold ends
        // on its own terms (the preemptor's nomination lost, the preemptor deleted, the
        // gang's timeout). Room planned for a member not created yet never counts
        // (holds-nothing).
        let awaiting = gang
            .preemption_hold()
            .is_some()
            .then_some(gang.awaiting_room())
            .into_iter()
            .flatten()
            .filter(|s| self.ledger.position(&s.node).is_some())
            .filter_map(|s| s.holder.member())
            .filter(|u| gang.seat_of(u).is_none());
        let seated: Vec<&PodInfo> = gang
            .seats()
            .keys()
            .filter_map(|h| h.member())
            .chain(awaiting)
            .filter_map(|u| self.pods.get(u))
            .filter(|p| p.is_pending() && scheduling_gates::check(&p.info).is_ok())
            .map(|p| &p.info)
            .collect();
        let have = facts.with_nodes + seated.len() as u32;
        let short = if have < facts.spec.quorum {
            Some((None, have, facts.spec.quorum))
        } else {
            facts.tasks.iter().find_map(|t| {
                let have = t.with_nodes
                    + seated
                        .iter()
                        .filter(|p| task_of(p) == Some(&*t.task))
                        .count() as u32;
                (have < t.min).then(|| (Some(t.task.clone()), have, t.min))
            })
        };
        let Some((task, have, needed)) = short else {
            return false;
        };
        if self.reseat_gathered(key, now) {
            return false;
        }
        let message = messages::gathered_seats_released(key, task.as_deref(), have, needed);
        self.unseat_all(key);
        self.released.push(key.clone());
        self.tell(key, NoticeKind::Waiting, &message, |p| p.is_pending());
        if let Some(g) = self.gangs.get_mut(key) {
            g.settle_after_seats_removed();
            g.note_waiting(message);
        }
        true
    }

    /// A gathered gang short of its quorum only because members that exist lost their seats
    /// (the last look before binding found a seat's room taken by a pod kube-scheduler bound
    /// before it saw the member's nomination, or a seat's node went) is planned again around
    /// the seats kube-scheduler confirmed: those stay where their bind calls wait, the
    /// planned seats not confirmed yet and the lost ones are planned anew, under every rule
    /// the planner applies (holds-nothing). When the quorum fits, the members take their new
    /// seats and the gang stays admitted: muster renominates them, a member kube-scheduler
    /// refused meanwhile is asked to retry, and the gang's other members are untouched.
    /// Before, the whole gang's seats went, and a gang of 11 with one seat taken cost 34
    /// refused binds, 50 Events and 31 nominations before it was placed again. Not while a
    /// preemption hold is live (its room is the hold's). Returns whether the gang is seated
    /// again; when not, nothing was taken and the caller releases every seat.
    fn reseat_gathered(&mut self, key: &GangKey, now: Instant) -> bool {
        let Some(gang) = self.gangs.get(key) else {
            return false;
        };
        if gang.preemption_hold().is_some() {
            return false;
        }
        // A member let through first (one whose seat was lost), else a gated one.
        let Some(first) = self
            .pending_members(key)
            .into_iter()
            .filter(|p| {
                !p.info.terminating
                    && scheduling_gates::check(&p.info).is_ok()
                    && gang.seat_of(&p.info.uid).is_none()
            })
            .min_by_key(|p| gather_gate_index(&p.info).is_some())
            .map(|p| p.info.clone())
        else {
            return false;
        };
        // The planned seats are planned again with the lost ones (the planner counts confirmed
        // seats as had, and places every other member its quorum needs: a planned seat kept
        // would count its room twice).
        let planned: Vec<SeatHolder> = gang
            .seats()
            .iter()
            .filter(|(_, s)| !s.confirmed)
            .map(|(h, _)| h.clone())
            .collect();
        let every_node: Vec<usize> = (0..self.ledger.len()).collect();
        let kept: Vec<(SeatHolder, Seat)> = planned
            .iter()
            .filter_map(|h| Some((h.clone(), self.unseat_to_plan_again(key, h)?)))
            .collect();
        let plan = self.plan(key, &first, &every_node, now);
        let fits = match plan {
            GangPlan::Fits {
                first_node, seats, ..
            } if seats.iter().all(|(h, _)| !h.is_not_created_yet()) => Some((first_node, seats)),
            _ => None,
        };
        let Some((first_node, seats)) = fits else {
            // Put back as they were: the caller releases them all, and says why.
            for (h, seat) in kept {
                self.seat(key, h, seat);
            }
            return false;
        };
        let Some(placed) = self.seat_the_plan(key, &first, first_node, seats) else {
            return false;
        };
        // The planner judged the members it placed against each other, not against the
        // confirmed seats it kept (they are not pods on nodes yet): every seat is checked
        // together under every rule, as the last look will (NodePorts, InterPodAffinity,
        // PodTopologySpread, DRA devices among the gang's own members). A refusal: the caller
        // releases every seat (holds-nothing). Found by the model check: two members of one
        // gang seated with the same host port on one node.
        if self.seat_refusing(key, false).is_some() {
            return false;
        }
        // Members kube-scheduler refused meanwhile wait in its unschedulable pods: a status
        // write (the nomination) does not requeue them. One refused at bind is back in its
        // queue already, and is not written to.
        let refused: Vec<(SeatHolder, NodeName)> = placed
            .into_iter()
            .filter(|(h, _)| {
                h.member()
                    .and_then(|u| self.pods.get(u))
                    .is_some_and(|p| p.info.unschedulable.is_some())
            })
            .collect();
        self.retry_let_through(&refused);
        true
    }

    /// Members let through before, whose gang lost its seats since, wait in kube-scheduler's
    /// queue refused (a status write, such as their nomination, does not requeue a pod): with
    /// seats again, each is asked to retry.
    pub(super) fn retry_let_through(&mut self, seats: &[(SeatHolder, NodeName)]) {
        let told: Vec<Notice> = seats
            .iter()
            .filter_map(|(h, _)| self.pods.get(h.member()?))
            .filter(|p| p.is_pending() && let_through(&p.info))
            .map(|p| Notice {
                pod: PodRef::of(&p.info),
                kind: NoticeKind::Retry,
                message: messages::RETRY_GATHERED.to_string(),
            })
            .collect();
        self.notices.extend(told);
    }

    /// A gathered gang that does not fit now may fit once pods of lower priority than its
    /// members are evicted (the preempt verb's own outlook: every lower-priority pod counted
    /// as gone, under every rule): how many of its members the quorum still needs, to be let
    /// through for kube-scheduler's preemption; its members hear so.
    pub(super) fn preemption_may_place(
        &mut self,
        key: &GangKey,
        first: &PodInfo,
        now: Instant,
    ) -> Option<usize> {
        // Room alone stopped it, anywhere or inside its one domain (a rule, or a member
        // missing, preemption is not tried for).
        if !self.gangs.get(key)?.short_of_room() {
            self.gangs.get_mut(key)?.note_beyond_preemption(None);
            return None;
        }
        // Members already let through are kube-scheduler's to preempt for.
        if self
            .pending_members(key)
            .iter()
            .any(|p| gather_gate_index(&p.info).is_none())
        {
            return None;
        }
        let every_node: Vec<usize> = (0..self.ledger.len()).collect();
        let outlook = self.preemption_outlook(first, &every_node, now)?;
        let may_help = outlook == PreemptionOutlook::MayHelp;
        let beyond = match outlook {
            PreemptionOutlook::MayHelp => None,
            PreemptionOutlook::Hopeless {
                anything_evictable: false,
                ..
            } => None,
            PreemptionOutlook::Hopeless {
                anything_evictable: true,
                best_domain: None,
            } => Some(BeyondPreemption::Anywhere),
            PreemptionOutlook::Hopeless {
                anything_evictable: true,
                best_domain: Some(d),
            } => Some(BeyondPreemption::Domain {
                label: d.label,
                value: d.value,
                fit: d.fit,
                quorum: d.quorum,
            }),
        };
        let gang = self.gangs.get_mut(key)?;
        let changed = gang.note_beyond_preemption(beyond);
        if !may_help {
            // explained: a gang of higher priority that preemption cannot place hears so, as
            // the filter says it when every pod passes through muster.
            if changed {
                if let Some(base) = gang.wait_message().map(str::to_string) {
                    let message = self.with_preemption_verdict(key, base);
                    self.tell(key, NoticeKind::Waiting, &message, |p| p.is_pending());
                    if let Some(g) = self.gangs.get_mut(key) {
                        g.note_waiting(message);
                    }
                }
            }
            return None;
        }
        let facts = self.facts(key);
        let need = facts.spec.quorum.saturating_sub(facts.with_nodes) as usize;
        let message = messages::gathered_for_preemption(key);
        self.tell(key, NoticeKind::Waiting, &message, |p| p.is_pending());
        if let Some(g) = self.gangs.get_mut(key) {
            g.note_waiting(message);
        }
        Some(need)
    }

    /// Plans the gathered gang `key` with `first` among its members; when its quorum is placed
    /// now (every member it needs exists), admits it with a seat per member and returns the
    /// seats. Otherwise it holds nothing and its members hear why (once per reason).
    pub(super) fn admit_gathered(
        &mut self,
        key: &GangKey,
        first: &PodInfo,
        now: Instant,
    ) -> Option<Vec<(SeatHolder, NodeName)>> {
        let every_node: Vec<usize> = (0..self.ledger.len()).collect();
        let plan = self.plan(key, first, &every_node, now);
        self.note_verdict(key, &plan);
        let asked = self.note_room_asked(key, &plan, now);
        if let Some(g) = self.gangs.get_mut(key) {
            g.note_short_of_room(matches!(
                plan,
                GangPlan::DoesNotFit(GangShortfall::Room { rule: None, .. })
                    | GangPlan::DoesNotFit(GangShortfall::Domain { missing: 0, .. })
            ));
        }
        match plan {
            GangPlan::Fits {
                first_node: chosen,
                seats,
                ..
            } if seats.iter().all(|(h, _)| !h.is_not_created_yet()) => {
                let out = self.seat_the_plan(key, first, chosen, seats)?;
                if let Some(g) = self.gangs.get_mut(key) {
                    g.admit(now);
                    g.stop_waiting();
                }
                Some(out)
            }
            GangPlan::Fits { seats, .. } => {
                // Room for the whole quorum, but members are not created yet: nothing is held
                // and no gate goes until they exist (kube-scheduler would only wait for them).
                let missing = seats.iter().filter(|(h, _)| h.is_not_created_yet()).count() as u32;
                let quorum = self.facts(key).spec.quorum;
                let why = GangShortfall::Room {
                    fit: quorum,
                    quorum,
                    missing,
                    rule: None,
                    task: None,
                };
                let message = why.message(key, self.config.creation_window);
                self.tell_waiting(key, &message, &GangPlan::DoesNotFit(why), first, now);
                None
            }
            GangPlan::DoesNotFit(ref why) => {
                let message = why.message(key, self.config.creation_window);
                let message = asked.unwrap_or(message);
                let message = if why.missing() == 0 {
                    self.with_preemption_verdict(key, message)
                } else {
                    message
                };
                self.tell_waiting(key, &message, &plan, first, now);
                None
            }
        }
    }

    /// Seats `first` at ledger position `first_node` and every other holder of a plan that fits
    /// at its position, each planned, not confirmed (kube-scheduler has not chosen it yet; its
    /// bind call confirms it, `take_seat`). Returns the seats by node name.
    fn seat_the_plan(
        &mut self,
        key: &GangKey,
        first: &PodInfo,
        first_node: usize,
        seats: Vec<(SeatHolder, usize)>,
    ) -> Option<Vec<(SeatHolder, NodeName)>> {
        let mut placed = vec![(SeatHolder::Member(first.uid.clone()), first_node)];
        placed.extend(seats);
        let mut out = Vec::with_capacity(placed.len());
        for (holder, position) in placed {
            let requests = holder
                .member()
                .and_then(|u| self.pods.get(u))
                .map(|p| p.info.requests.clone())?;
            let node = self.ledger.at(position).name().clone();
            let seat = Seat {
                node: node.clone(),
                requests,
                confirmed: false,
            };
            self.seat(key, holder.clone(), seat);
            out.push((holder, node));
        }
        Some(out)
    }

    /// `message` (why the gang does not fit now) with the last preemption look's verdict, when
    /// it found that not even evicting every lower-priority pod would place the gang.
    fn with_preemption_verdict(&self, key: &GangKey, message: String) -> String {
        match self.gangs.get(key).and_then(|g| g.beyond_preemption()) {
            None => message,
            // Already said (the verdict was added to the message told last).
            Some(_) if message.contains("preemption cannot help") => message,
            Some(BeyondPreemption::Anywhere) => messages::beyond_preemption(&message),
            Some(BeyondPreemption::Domain {
                label,
                value,
                fit,
                quorum,
            }) => messages::domain_beyond_preemption(key, label, *quorum, *fit, value),
        }
    }

    /// Where a gathered member of a placed gang fits now, if anywhere (its rules and room).
    pub(super) fn gathered_fits(
        &self,
        key: &GangKey,
        pod: &PodInfo,
        now: Instant,
    ) -> Option<NodeName> {
        let every_node: Vec<usize> = (0..self.ledger.len()).collect();
        match self.plan(key, pod, &every_node, now) {
            GangPlan::Fits { first_node, .. } => Some(self.ledger.at(first_node).name().clone()),
            GangPlan::DoesNotFit(_) => None,
        }
    }
}
