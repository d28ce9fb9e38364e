//! The gang reservation table: the one value muster decides from, under the one lock.
//!
//! It is made of narrow parts, each the only writer of its own numbers: the [`NodeLedger`]
//! (allocatable, used, reserved), the [`PodIndex`] (pods and what muster assumed), and the
//! [`Gang`]s (members, seats, phase, spec); what the verbs hand on (notices, released gangs,
//! gangs found partly bound) goes into an [`Outbox`], which is only added to and taken whole.
//! This file holds the few operations that must change two parts at once — a seat and its
//! reservation, an assumption and its charge — so that each pair changes together in exactly
//! one place. The verbs are in their own files: `apply` (watch events), `filter`,
//! `prioritize`, `bind`, `expiry`, `views`; the simulation of a gang's placement is the
//! `planner`.
//!
//! Filter offers a member below quorum exactly one node (its seat, a planned seat of its gang,
//! or the tightest fit), so kube-scheduler skips scoring it and it lands on the plan. Planned
//! seats are what stop two gangs from each holding half of what both need: the moment a gang
//! takes its first seat, it holds room for all of its quorum (members not created yet
//! included, assumed as large as the largest member that exists, or of their task when a task
//! is below its minimum).

pub(crate) mod disruptions;
pub(crate) mod evidence;
pub(crate) mod gang;
pub(crate) mod generations;
pub(crate) mod ledger;
pub(crate) mod outbox;
pub(crate) mod partly_bound;
pub(crate) mod pods;
pub(crate) mod preemption_plan;
pub(crate) mod retry_asks;
pub(crate) mod room_waits;
pub(crate) mod under_way;

use std::sync::Arc;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use self::disruptions::Disruptions;
use self::evidence::{EvidenceStore, SchedulerVerdicts};
use self::gang::{Gang, Seat, SeatHolder};
use self::generations::Generations;
use self::ledger::NodeLedger;
use self::outbox::Outbox;
use self::pods::{PodEntry, PodIndex};
use self::preemption_plan::PreemptionPlans;
use self::retry_asks::RetryAsks;
use self::room_waits::RoomWaits;
use self::under_way::PreemptionsUnderWay;
use crate::model::inputs::config::ModelConfig;
use crate::model::inputs::devices::DeviceInventory;
use crate::model::inputs::membership::GangKey;
use crate::model::inputs::objects::{NodeName, PodInfo, PodUid};
use crate::model::inputs::pod_group::PodGroupIndex;
use crate::model::inputs::spec::GangSpec;
use crate::model::messages;
use crate::model::notice::{Notice, NoticeKind, PodRef};
use crate::model::rules::NamespaceLabels;

/// The gang reservation table: the whole state muster decides from.
pub struct GangTable {
    pub(super) config: ModelConfig,
    pub(super) ledger: NodeLedger,
    pub(super) pods: PodIndex,
    /// PodGroup objects, where the cluster serves their APIs.
    pub(super) pod_groups: PodGroupIndex,
    pub(super) gangs: HashMap<GangKey, Gang>,
    /// Notices for the cluster side to tell, added to only (see `outbox`) until
    /// [`GangTable::take_notices`].
    pub(super) notices: Outbox<Notice>,
    /// How many of `notices` have had their gang marked told (see `note_gangs_told`).
    notices_noted: usize,
    /// Per member, the nodes its latest filter call passed.
    pub(super) evidence: EvidenceStore,
    /// kube-scheduler's verdicts on members whose cycles never reached muster.
    pub(super) verdicts: SchedulerVerdicts,
    /// Namespace labels for `namespaceSelector` terms. muster does not watch namespaces, so
    /// this stays empty: each namespace is seen with only `kubernetes.io/metadata.name`.
    pub(super) namespaces: NamespaceLabels,
    /// Pods refused for a reason whose end kube-scheduler does not see (room seats held, a
    /// node not in muster's cache, a preemptor not delivered yet), to ask to retry once it ends.
    pub(super) retry_asks: RetryAsks,
    /// Gangs that lost seats since the last call of [`GangTable::take_released`]: the bind
    /// calls held for them must look again (a member without a seat answers at once).
    pub(super) released: Outbox<GangKey>,
    /// Per node, the gangs waiting for room there: quorums waiting for pods being deleted
    /// there to go (their room is on its way: kube-scheduler's cache may already show them
    /// gone while muster's watch has not delivered it; the first pod leaving the node ends
    /// their wait, and `take_room_freed` hands them on), and preemption holds whose planned
    /// seats wait for pods of lower priority to go (`Gang::awaiting_room`). One index for
    /// both: see `room_waits`.
    pub(super) room_waits: RoomWaits,
    /// Per preempting gang member, where its preempt decision put the rest of its gang, until
    /// kube-scheduler nominates one of the kept nodes (see `preemption_hold`).
    pub(super) preempt_plans: PreemptionPlans,
    /// The preemptions muster kept, per preemptor, while they are under way (see `under_way`).
    pub(super) preemptions_under_way: PreemptionsUnderWay,
    /// Gangs to disrupt whole, until kube-scheduler commits to the preemption (see
    /// `verbs::preempt::commit`), and then until the evictor takes them; the victims of
    /// kube-scheduler's preemptions answered for, and those made without muster's say (see
    /// `verbs::unseen_preemption`).
    pub(super) disruptions: Disruptions,
    /// What was done about each gang found partly bound since the last call of
    /// [`GangTable::take_partly_bound`] (`verbs::repair`), for the metric and the log.
    pub(super) partly_bound: Outbox<partly_bound::PartlyBound>,
    /// Dynamic Resource Allocation: slices, classes, claims and templates.
    pub(super) devices: DeviceInventory,
    /// Pending pods behind muster's gate that are in no gang (their keys were removed, or
    /// their scheduler does not call muster): muster releases them (`gather::orphans`).
    /// Kept up to date by `apply_pod`/`remove_pod`, so a round does not scan every pod.
    pub(super) gated_outside_gangs: HashSet<PodUid>,
    /// Per gang whose job restarts by recreating its pods, its newest generation and the pods
    /// of older ones, which are not members (see `generations`).
    pub(super) generations: Generations,
    /// Members whose bind call is held now, and by how many calls (a retry may overlap the
    /// call kube-scheduler gave up on): kube-scheduler has such a member assumed on its
    /// seat's node, so a nomination written meanwhile routes nothing and races the binding
    /// (the API server refuses it once the pod is bound).
    held_binds: HashMap<PodUid, u32>,
    /// Confirmed seats planned again since the last [`GangTable::take_seats_let_go`]: their
    /// members' bind calls had ended unbound (see `unconfirm_seats_kube_scheduler_let_go`).
    seats_let_go: u64,
    /// Pod applications that named a gang, counted: each gang's [`Gang::last_join`] stamp.
    pub(super) joins: u64,
}

/// A gang's spec with the counts of its members, read at the moment of a decision.
#[derive(Clone, Debug)]
pub(super) struct GangFacts {
    pub spec: GangSpec,
    /// Live members that exist (pods muster has seen, neither finished nor being deleted).
    pub existing: u32,
    /// Live members bound or assumed.
    pub with_nodes: u32,
    pub confirmed_seats: u32,
    /// The same counts for each task with a minimum (empty when the gang has none).
    pub tasks: Vec<TaskFacts>,
}

/// The counts of one task's members, and its minimum.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct TaskFacts {
    pub task: Arc<str>,
    pub min: u32,
    pub existing: u32,
    pub with_nodes: u32,
    pub confirmed_seats: u32,
}

impl TaskFacts {
    fn counts(&self) -> messages::TaskCounts<'_> {
        messages::TaskCounts {
            task: &self.task,
            min: self.min,
            existing: self.existing,
            with_nodes: self.with_nodes,
            confirmed_seats: self.confirmed_seats,
        }
    }

    /// Members of this task still needed beyond those with nodes and (when `seated`) those
    /// with confirmed seats.
    pub fn short(&self, seated: bool) -> u32 {
        let have = self.with_nodes + if seated { self.confirmed_seats } else { 0 };
        self.min.saturating_sub(have)
    }
}

impl GangFacts {
    /// Enough live members have nodes, in all and of every task with a minimum: the gang is
    /// placed (and a gang without members is). Never while the gang waits for its PodGroup.
    pub fn quorum_met(&self) -> bool {
        self.spec.is_decided()
            && self.with_nodes >= self.spec.quorum
            && self.short_task(false).is_none()
    }

    /// Members with nodes or confirmed seats meet the quorum and every task's minimum: the
    /// confirmed seats can be bound.
    pub fn seated_quorum_met(&self) -> bool {
        self.spec.is_decided()
            && self.with_nodes + self.confirmed_seats >= self.spec.quorum
            && self.short_task(true).is_none()
    }

    /// The first task (by name) below its minimum, counting members with nodes and, when
    /// `seated`, confirmed seats.
    pub fn short_task(&self, seated: bool) -> Option<&TaskFacts> {
        self.tasks.iter().find(|t| t.short(seated) > 0)
    }

    /// The counts as the sentences tell them (`messages` takes plain values only).
    pub fn counts(&self) -> messages::GangCounts<'_> {
        messages::GangCounts {
            quorum: self.spec.quorum,
            existing: self.existing,
            with_nodes: self.with_nodes,
            confirmed_seats: self.confirmed_seats,
            short_task: self.short_task(true).map(TaskFacts::counts),
            task_missing_members: self
                .tasks
                .iter()
                .find(|t| t.existing < t.min)
                .map(TaskFacts::counts),
        }
    }
}

impl GangTable {
    pub fn new(config: ModelConfig) -> Self {
        GangTable {
            config,
            ledger: NodeLedger::default(),
            pods: PodIndex::default(),
            pod_groups: PodGroupIndex::default(),
            gangs: HashMap::default(),
            notices: Outbox::default(),
            notices_noted: 0,
            evidence: EvidenceStore::default(),
            verdicts: SchedulerVerdicts::default(),
            namespaces: NamespaceLabels::default(),
            retry_asks: RetryAsks::default(),
            released: Outbox::default(),
            room_waits: RoomWaits::default(),
            preempt_plans: PreemptionPlans::default(),
            preemptions_under_way: PreemptionsUnderWay::default(),
            disruptions: Disruptions::default(),
            partly_bound: Outbox::default(),
            devices: DeviceInventory::default(),
            gated_outside_gangs: HashSet::default(),
            generations: Generations::default(),
            held_binds: HashMap::default(),
            seats_let_go: 0,
            joins: 0,
        }
    }

    /// A bind call of `uid` is held from now (`state::held`), until [`GangTable::bind_released`].
    pub fn bind_held(&mut self, uid: &str) {
        *self.held_binds.entry(PodUid::from(uid)).or_default() += 1;
    }

    /// A held bind call of `uid` ended, however it ended.
    pub fn bind_released(&mut self, uid: &str) {
        if let Some(n) = self.held_binds.get_mut(uid) {
            *n -= 1;
            if *n == 0 {
                self.held_binds.remove(uid);
            }
        }
    }

    /// Whether a bind call of `uid` is held now.
    pub(in crate::model) fn is_bind_held(&self, uid: &str) -> bool {
        self.held_binds.contains_key(uid)
    }

    /// The confirmed seats of `key` whose members kube-scheduler no longer holds there become
    /// planned seats again (their room stays reserved); `requester`, whose call is deciding
    /// now, keeps its own. Returns how many were demoted.
    ///
    /// For a gathered gang only: the pods outside it never pass through muster, so a seat
    /// keeps them off its room only while kube-scheduler has its member assumed there (a held
    /// bind call) or sees its nomination. A member whose call ended unbound (its hold ran out,
    /// its binding failed for good, the call was dropped) is forgotten by kube-scheduler, which
    /// may bind a pod into that room before muster's watch shows it: binding that member at
    /// quorum, on muster's word alone, over-commits the node (no-overcommit; seen on the real
    /// control plane after a kube-apiserver outage). It is bound when kube-scheduler sends it
    /// again, with the quorum (never-half), as the coscheduling plugin's Permit counts only
    /// the pods waiting in it.
    pub(in crate::model) fn unconfirm_seats_kube_scheduler_let_go(
        &mut self,
        key: &GangKey,
        requester: &str,
    ) -> usize {
        let Some(gang) = self.gangs.get_mut(key) else {
            return 0;
        };
        let held = &self.held_binds;
        let mut demoted = 0;
        gang.retain_seats(|holder, seat| {
            if let SeatHolder::Member(uid) = holder {
                if seat.confirmed && **uid != *requester && !held.contains_key(uid) {
                    seat.confirmed = false;
                    demoted += 1;
                }
            }
            true
        });
        self.seats_let_go += demoted as u64;
        demoted
    }

    /// Seats planned again because kube-scheduler let their members go unbound, since the last
    /// call (for the metric).
    pub fn take_seats_let_go(&mut self) -> u64 {
        std::mem::take(&mut self.seats_let_go)
    }

    /// Gangs that lost seats since the last call (see the field).
    pub fn take_released(&mut self) -> Vec<GangKey> {
        self.released.take()
    }

    /// Gangs whose awaited room was freed since the last call: their held bind calls decide
    /// again.
    pub fn take_room_freed(&mut self) -> Vec<GangKey> {
        self.room_waits.take_freed()
    }

    /// How many times room the gang waited for was freed so far (0 for a gang not in the
    /// table). Read under the lock of a bind decision that waits, and again by its held call
    /// before it sleeps: a change means the room came in between, when the wake-up
    /// (`take_room_freed`) found no held call to wake.
    pub fn rooms_freed(&self, key: &GangKey) -> u64 {
        self.gangs.get(key).map_or(0, |g| g.rooms_freed())
    }

    /// Notices produced since the last call; a `Retry` for every pod refused for held room
    /// when seats were released meanwhile, and for every pod refused while a node it was
    /// offered was unknown when a new node arrived meanwhile (one per pod, even if both hold).
    pub fn take_notices(&mut self) -> Vec<Notice> {
        let retry = self.retry_asks.take_due();
        let mut asked: HashSet<PodUid> = HashSet::default();
        let told: Vec<Notice> = retry
            .into_iter()
            .filter(|(u, _)| asked.insert(u.clone()))
            .filter_map(|(u, message)| {
                let p = self.pods.get(&u).filter(|p| p.is_pending())?;
                Some(Notice {
                    pod: PodRef::of(&p.info),
                    kind: NoticeKind::Retry,
                    message: message.to_string(),
                })
            })
            .collect();
        self.notices.extend(told);
        self.note_gangs_told();
        self.notices_noted = 0;
        self.notices.take()
    }

    /// Marks the gang of each notice not looked at yet as told (`Gang::note_told`): an Event
    /// on a member, so the gang's `GangPlaced` ends what its members were told. A `Retry` is
    /// an annotation, not an Event; `GangPlaced` is the end itself.
    pub(super) fn note_gangs_told(&mut self) {
        for n in &self.notices.waiting()[self.notices_noted..] {
            if matches!(n.kind, NoticeKind::Retry | NoticeKind::Placed) {
                continue;
            }
            let Some(m) = self.pods.get(&n.pod.uid).and_then(|p| p.info.gang()) else {
                continue;
            };
            if let Some(g) = self.gangs.get_mut(&m.gang) {
                g.note_told();
            }
        }
        self.notices_noted = self.notices.waiting().len();
    }

    /// The filter refused `uid` because seats held the room it needed.
    pub(super) fn refused_for_seats(&mut self, uid: &PodUid) {
        self.retry_asks.refused_for_seats(uid);
    }

    /// The filter refused `uid` while a node offered for it was not in muster's cache.
    pub(super) fn refused_for_unknown_node(&mut self, uid: &PodUid) {
        self.retry_asks.refused_for_unknown_node(uid);
    }

    /// `uid`'s preemption was refused because the watch had not delivered it yet.
    pub(super) fn retry_when_seen(&mut self, uid: &PodUid) {
        self.retry_asks.retry_when_seen(uid);
    }

    /// The watch delivered `uid`: if its preemption was refused for not being seen, it is
    /// asked to retry now that muster can judge it.
    pub(super) fn seen_now(&mut self, uid: &PodUid) {
        if !self.retry_asks.seen(uid) {
            return;
        }
        if let Some(p) = self.pods.get(uid).filter(|p| p.is_pending()) {
            self.notices.push(Notice {
                pod: PodRef::of(&p.info),
                kind: NoticeKind::Retry,
                message: messages::RETRY_SEEN.to_string(),
            });
        }
    }

    pub fn node_count(&self) -> usize {
        self.ledger.len()
    }

    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// Whether the pod holds a seat in its gang (it is waiting for quorum).
    pub fn holds_seat(&self, uid: &str) -> bool {
        let Some(p) = self.pods.get(uid) else {
            return false;
        };
        p.info
            .gang()
            .and_then(|m| self.gangs.get(&m.gang))
            .is_some_and(|g| g.seat_of(&p.info.uid).is_some())
    }

    /// The node of the pod's seat in its gang, if it holds one.
    pub fn seat_node(&self, uid: &str) -> Option<String> {
        let p = self.pods.get(uid)?;
        let gang = self.gangs.get(&p.info.gang()?.gang)?;
        gang.seat_of(&p.info.uid).map(|s| s.node.to_string())
    }

    /// For a bind call of `uid` held on its seat on `node`: `None` while that seat is still
    /// there; otherwise why the call must answer now. A seat that moved to another node (the
    /// gang was placed again: it moved to another topology domain, or lost a node's room, and
    /// a sibling's call planned it anew) is not the seat the call was held for: deciding again
    /// with `node`, kube-scheduler's choice under the old plan, would move the seat back there
    /// and bind the gang split across domains. The call answers, and kube-scheduler schedules
    /// the pod again, onto the node the filter now offers (never-half,
    /// kube-scheduler-semantics).
    /// A pod no longer known (deleted) holds nothing: the call answers with `held_for`'s reason.
    pub fn held_seat_lost(&self, held_for: &GangKey, uid: &str, node: &str) -> Option<String> {
        let released = || {
            self.gangs
                .get(held_for)
                .and_then(|g| g.wait_message().map(str::to_string))
                .unwrap_or_else(|| messages::seats_released_before_quorum(held_for))
        };
        let Some(p) = self.pods.get(uid) else {
            return Some(released());
        };
        let seat = p
            .info
            .gang()
            .filter(|m| m.gang == *held_for)
            .and_then(|_| self.gangs.get(held_for))
            .and_then(|g| g.seat_of(&p.info.uid));
        match seat {
            Some(seat) if *seat.node == *node => None,
            Some(seat) => Some(messages::held_seat_moved(
                held_for,
                &p.info.display_name(),
                node,
                &seat.node,
            )),
            None => Some(released()),
        }
    }

    /// Whether the pod has a node: bound, or being bound by muster (its gang reached quorum
    /// and the binding call is in flight).
    pub fn has_node(&self, uid: &str) -> bool {
        self.node_of(uid).is_some()
    }

    /// The node the pod is bound to, or that muster is binding it to.
    pub fn node_of(&self, uid: &str) -> Option<NodeName> {
        self.pods.get(uid).and_then(|p| p.node().cloned())
    }

    /// Why the pod's gang is waiting, as last told (for a bind call that gives up waiting).
    pub fn wait_reason(&self, uid: &str) -> Option<String> {
        let key = &self.pods.get(uid)?.info.gang()?.gang;
        self.gangs.get(key)?.wait_message().map(str::to_string)
    }

    // === seats and reservations: the only code that changes both ===
    // The ledger's `reserve`/`unreserve` and a gang's seat changes are visible to the table
    // alone, so every seat taken or given up changes its reservation here, in one step
    // (no-overcommit); the verbs call these.

    /// Takes a seat for `holder` (replacing any seat it had).
    pub(super) fn seat(&mut self, key: &GangKey, holder: SeatHolder, seat: Seat) {
        let Some(gang) = self.gangs.get_mut(key) else {
            return;
        };
        self.ledger.reserve(&seat.node, &seat.requests);
        let node = seat.node.clone();
        if let Some(old) = gang.insert_seat(holder, seat) {
            self.ledger.unreserve(&old.node, &old.requests);
            self.retry_asks.note_seats_released();
            // A bind call held on the old seat answers now (`held_seat_lost`), not when
            // `--bind-wait` runs out.
            if old.node != node {
                self.released.push(key.clone());
            }
        }
    }

    /// Gives up the seat of `holder`; a gang left without seats is waiting again.
    pub(super) fn unseat(&mut self, key: &GangKey, holder: &SeatHolder) -> Option<Seat> {
        let gang = self.gangs.get_mut(key)?;
        let seat = gang.remove_seat(holder)?;
        self.ledger.unreserve(&seat.node, &seat.requests);
        self.retry_asks.note_seats_released();
        gang.settle_after_seats_removed();
        self.released.push(key.clone());
        Some(seat)
    }

    /// Gives up `holder`'s seat of `key` in a step that plans it again at once (see
    /// `reseat_gathered`): its room is unreserved, and the gang stays admitted and is not
    /// counted as released (the caller seats it again, or releases every seat itself).
    pub(super) fn unseat_to_plan_again(
        &mut self,
        key: &GangKey,
        holder: &SeatHolder,
    ) -> Option<Seat> {
        let seat = self.gangs.get_mut(key)?.remove_seat(holder)?;
        self.ledger.unreserve(&seat.node, &seat.requests);
        Some(seat)
    }

    /// Gives up the seats of `release` and seats `holder`, as one step: the gang never
    /// passes through "no seats", so it stays admitted.
    pub(super) fn reseat(
        &mut self,
        key: &GangKey,
        release: &[SeatHolder],
        holder: SeatHolder,
        seat: Seat,
    ) {
        self.seat(key, holder, seat);
        let Some(gang) = self.gangs.get_mut(key) else {
            return;
        };
        for h in release {
            if let Some(s) = gang.remove_seat(h) {
                self.ledger.unreserve(&s.node, &s.requests);
                self.retry_asks.note_seats_released();
            }
        }
    }

    /// Gives up every seat of the gang (quorum reached, or timed out); the caller sets the
    /// gang's next phase.
    pub(super) fn unseat_all(&mut self, key: &GangKey) -> Vec<(SeatHolder, Seat)> {
        let Some(gang) = self.gangs.get_mut(key) else {
            return Vec::new();
        };
        let seats = gang.take_all_seats();
        for (_, s) in &seats {
            self.ledger.unreserve(&s.node, &s.requests);
        }
        if !seats.is_empty() {
            self.retry_asks.note_seats_released();
        }
        seats
    }

    /// Drops every seat on a node that is gone (the ledger dropped its reservations with it).
    pub(super) fn unseat_node(&mut self, name: &str) {
        for (key, gang) in self.gangs.iter_mut() {
            let before = gang.seats().len();
            gang.retain_seats(|_, seat| &*seat.node != name);
            if gang.seats().len() < before {
                gang.settle_after_seats_removed();
                self.released.push(key.clone());
            }
        }
    }

    // === assumptions and charges ===

    /// muster is binding the pod to `node`: it has that node, and its requests count there.
    pub(super) fn assume(&mut self, uid: &PodUid, node: NodeName) {
        if let Some((node, requests)) = self.pods.assume(uid, node) {
            self.ledger.charge(&node, &requests);
        }
    }

    // === derived facts ===

    pub(super) fn facts(&self, key: &GangKey) -> GangFacts {
        let mut f = GangFacts {
            spec: GangSpec::default(),
            existing: 0,
            with_nodes: 0,
            confirmed_seats: 0,
            tasks: Vec::new(),
        };
        let Some(gang) = self.gangs.get(key) else {
            return f;
        };
        f.spec = gang.spec().clone();
        f.tasks = f
            .spec
            .tasks
            .iter()
            .map(|(task, min)| TaskFacts {
                task: task.clone(),
                min,
                existing: 0,
                with_nodes: 0,
                confirmed_seats: 0,
            })
            .collect();
        for uid in gang.members() {
            let Some(p) = self.pods.get(uid).filter(|p| p.is_live()) else {
                continue;
            };
            let with_node = p.charged_node().is_some();
            f.existing += 1;
            f.with_nodes += u32::from(with_node);
            if let Some(t) = task_facts(&mut f.tasks, &p.info) {
                t.existing += 1;
                t.with_nodes += u32::from(with_node);
            }
        }
        f.confirmed_seats = gang.confirmed_seats();
        if !f.tasks.is_empty() {
            for (holder, seat) in gang.seats() {
                let member = holder.member().and_then(|u| self.pods.get(u));
                if let (true, Some(p)) = (seat.confirmed, member) {
                    if let Some(t) = task_facts(&mut f.tasks, &p.info) {
                        t.confirmed_seats += 1;
                    }
                }
            }
        }
        f
    }

    /// Whether the gang no longer needs all-or-nothing treatment: its live members with nodes
    /// meet its quorum. Derived, never remembered: members being deleted do not count, so a
    /// gang whose live members fell below quorum (a job deleted and submitted again, a member
    /// whose binding failed for good) is gated again, and a restart decides the same.
    pub(super) fn is_placed(&self, _key: &GangKey, facts: &GangFacts) -> bool {
        facts.quorum_met()
    }

    /// Members that still need a node: live, not bound or assumed.
    /// The pending members a plan of `key` may place: those without a confirmed seat. A
    /// confirmed seat is counted as had (`GangFacts::confirmed_seats`) and stays where its
    /// bind call waits: planned again, its member would be counted twice and its seat moved
    /// under a held call that waits out `--bind-wait` for a seat it no longer has (never-half
    /// holds either way; a gang of 15 in the benchmark lost 8 s to it).
    pub(in crate::model) fn members_to_place(&self, key: &GangKey) -> Vec<&PodEntry> {
        let Some(gang) = self.gangs.get(key) else {
            return Vec::new();
        };
        self.pending_members(key)
            .into_iter()
            .filter(|p| !gang.seat_of(&p.info.uid).is_some_and(|s| s.confirmed))
            .collect()
    }

    pub(super) fn pending_members(&self, key: &GangKey) -> Vec<&PodEntry> {
        let Some(gang) = self.gangs.get(key) else {
            return Vec::new();
        };
        gang.members()
            .iter()
            .filter_map(|u| self.pods.get(u))
            .filter(|p| p.is_pending())
            .collect()
    }

    /// Tells the members of `key` that `which` selects, one notice of `kind` each (they become
    /// the gang's Events): the one way a verb speaks to a gang's pods.
    pub(super) fn tell(
        &mut self,
        key: &GangKey,
        kind: NoticeKind,
        message: &str,
        which: impl Fn(&PodEntry) -> bool,
    ) {
        let Some(gang) = self.gangs.get(key) else {
            return;
        };
        let told: Vec<Notice> = self
            .members_of(gang)
            .filter(|p| which(p))
            .map(|p| Notice {
                pod: PodRef::of(&p.info),
                kind,
                message: message.to_owned(),
            })
            .collect();
        self.notices.extend(told);
    }

    /// Members of the gang muster knows, in name order of UIDs.
    pub(super) fn members_of<'a>(
        &'a self,
        gang: &'a Gang,
    ) -> impl Iterator<Item = &'a PodEntry> + 'a {
        gang.members().iter().filter_map(|u| self.pods.get(u))
    }
}

/// The counts of `pod`'s task, if its task has a minimum.
fn task_facts<'a>(tasks: &'a mut [TaskFacts], pod: &PodInfo) -> Option<&'a mut TaskFacts> {
    let task = pod.gang()?.task.as_deref()?;
    tasks.iter_mut().find(|t| &*t.task == task)
}
