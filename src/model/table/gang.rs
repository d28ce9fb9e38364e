//! One gang: its members, its seats and where it is in its life.
//!
//! A *seat* reserves a node's capacity for one gang member before its gang reaches quorum. A
//! *confirmed* seat is on the node kube-scheduler chose for that member (its bind call
//! arrived); a *planned* seat is where muster's plan put a member that has not asked yet, or
//! room held for a member not created yet. The ledger's reservations are changed together with
//! the seats, by the table (see `GangTable::seat`), never here.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::model::inputs::objects::{NodeName, PodUid};
use crate::model::inputs::resources::Resources;
use crate::model::inputs::spec::GangSpec;
use crate::model::table::preemption_plan::PlannedSeat;

/// Where a gang is in its life. Whatever its phase, a gang enough of whose members already
/// have nodes (bound before muster restarted, say) is treated as placed: `GangTable::is_placed`
/// is the one place that decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Holds nothing; its members are tried as kube-scheduler sends them.
    Waiting,
    /// Timed out: refused until `until`, then like `Waiting`.
    BackingOff { until: Instant },
    /// Holds seats for its whole quorum since `since` (its timeout counts from there).
    Admitted { since: Instant },
    /// Reached quorum and was bound together; later members bind at once.
    Placed,
}

/// Who a seat is held for. Seats are kept in this order, room held for members not created
/// yet first: a member that takes over a planned seat of its gang takes room held for a member
/// that may never come before a seat planned for a member that exists.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SeatHolder {
    /// The n-th member the gang's quorum needs that has not been created yet, of `task` when
    /// it is held for a task below its minimum. A member that arrives later (of that task)
    /// takes such a seat over.
    NotCreatedYet { n: u32, task: Option<Arc<str>> },
    /// A member that exists (a pod muster has seen).
    Member(PodUid),
}

impl SeatHolder {
    pub fn member(&self) -> Option<&PodUid> {
        match self {
            SeatHolder::Member(uid) => Some(uid),
            SeatHolder::NotCreatedYet { .. } => None,
        }
    }

    /// Room held for a member not created yet.
    pub fn is_not_created_yet(&self) -> bool {
        matches!(self, SeatHolder::NotCreatedYet { .. })
    }
}

/// Room held for a gang while the victims of its member's preemption terminate (see
/// `verbs::preemption_hold`): the member kube-scheduler nominated and the node it nominated. The seats
/// themselves are ordinary seats of the gang; this says why they exist and when they end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreemptionHold {
    pub preemptor: PodUid,
    pub node: NodeName,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seat {
    pub node: NodeName,
    pub requests: Resources,
    pub confirmed: bool,
}

/// See [`Gang::beyond_preemption`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::model) enum BeyondPreemption {
    /// Not even the whole cluster with every lower-priority pod gone holds the quorum.
    Anywhere,
    /// A gang confined to one domain of `label`: the best domain (`value`) would hold `fit` of
    /// `quorum` even then.
    Domain {
        label: std::sync::Arc<str>,
        value: std::sync::Arc<str>,
        fit: u32,
        quorum: u32,
    },
}

pub struct Gang {
    members: BTreeSet<PodUid>,
    seats: BTreeMap<SeatHolder, Seat>,
    phase: Phase,
    /// What the members declare; see [`GangSpec`].
    spec: GangSpec,
    /// When kube-scheduler last tried one of its members (a gang tried recently competes).
    /// Written only through [`Gang::note_attempt`].
    last_attempt: Option<Instant>,
    /// Why the gang waits, as last decided: shown in `/gangs`, and told to members on change
    /// only (see `wait_message_untold`). Written only through [`Gang::note_waiting`],
    /// [`Gang::note_waiting_untold`], [`Gang::note_waiting_told`] and [`Gang::stop_waiting`] (and
    /// cleared when the gang is placed or backs off).
    last_wait_message: Option<String>,
    /// `last_wait_message` when it was kept without being told: the gang was short only of
    /// members not created yet, within its creation window (see `GangTable::tell_waiting`).
    /// Written only through [`Gang::note_waiting_untold`] and [`Gang::note_waiting_told`].
    wait_message_untold: Option<String>,
    /// The quorum conflict already reported, so it is reported once (written only through
    /// [`Gang::note_quorum_conflict_told`]).
    reported_conflict: Option<Vec<u32>>,
    /// The disagreements with the gang's PodGroup already reported, so each is reported once
    /// (written only through [`Gang::note_pod_group_conflict_told`]).
    reported_pod_group_conflict: Option<Vec<String>>,
    /// A member joined since the table last looked at the gang (see [`Gang::note_arrivals`]).
    arrived_unnoted: bool,
    /// The table's join count when the newest member joined (see [`Gang::last_join`]).
    last_join: u64,
    /// When the table first looked at the gang after its newest member joined: the start of
    /// its creation window.
    newest_arrival: Option<Instant>,
    /// The gang's own latest simulation failed on a rule other than room: it holds nothing and
    /// takes nothing, so gangs behind it do not leave room for it. Set only through
    /// [`Gang::note_blocked_by_rule`].
    blocked_by_rule: bool,
    /// Members refused while the creation window was open (e.g. the quorum not decided yet).
    /// kube-scheduler retries a refused pod only on a cluster event, and the window closing is
    /// none: when it closes, each is asked to retry (see `GangTable::expire`). Written only
    /// through [`Gang::refused_in_window`] and [`Gang::take_refused_once_window_closed`].
    refused_in_window: BTreeSet<PodUid>,
    /// The waiting reason last told to each seated member whose held bind call gave up, so
    /// a member retried every few seconds hears it once per change.
    told_waiting: BTreeMap<PodUid, String>,
    /// Set while the gang's seats hold the room its member's preemption frees. Written only
    /// through [`Gang::hold_for_preemption`], [`Gang::hold_became_seats`] and
    /// [`Gang::end_preemption_hold`] (and cleared when the gang stops being admitted).
    preemption_hold: Option<PreemptionHold>,
    /// The seats a preemption hold planned where pods of lower priority still use the room
    /// (no-overcommit: they are not seats yet). Each becomes a seat once its room is free, and
    /// its member may preempt there meanwhile (see `verbs::preemption_hold`). Kept while the
    /// gang is admitted, even after the hold itself ends. Written only through
    /// [`Gang::hold_for_preemption`], [`Gang::still_awaiting_room`] and
    /// [`Gang::end_preemption_hold`] (and cleared when the gang stops being admitted).
    awaiting_room: Vec<PlannedSeat>,
    /// Members arrived without the marker resource, which kube-scheduler schedules without
    /// muster (set by `gather` through [`Gang::warn_marker_missing`]; shown in `/gangs`).
    marker_warning: Option<String>,
    /// A gathered gang that would not fit even with every lower-priority pod evicted, as the
    /// gatherer's last look at preemption found (set by `gather`, refreshed at each look): its
    /// waiting message says preemption cannot help, as the filter's does (explained). `Some`
    /// holds the domain verdict for a gang confined to one domain. Written only through
    /// [`Gang::note_beyond_preemption`].
    beyond_preemption: Option<BeyondPreemption>,
    /// A gathered gang's latest plan fell short of room alone, anywhere or inside the one
    /// domain it must keep to (set by `gather`): evicting lower-priority pods may place it, so
    /// the gatherer looks at preemption for it. A rule (affinity, a missing member, a refusal)
    /// is not something eviction changes. Written only through [`Gang::note_short_of_room`].
    short_of_room: bool,
    /// Room asked of the cluster autoscaler for the whole gang while it waits gathered, short
    /// of room alone (set by `gather`, `--capacity-buffers`; see `verbs::gather::capacity`).
    /// Written only through [`Gang::ask_for_room`], [`Gang::judge_room_ask`] and
    /// [`Gang::withdraw_room_ask`].
    room_asked: Option<RoomAsked>,
    /// Set when the gang was found partly bound as muster started deciding (see
    /// `verbs::repair`): what was done about it, shown in `/gangs` until the gang is placed.
    /// Set only through [`Gang::found_partly_bound`], cleared by [`Gang::place`].
    partly_bound: Option<String>,
    /// How many times room the gang's quorum waited for was freed (`RoomWait::PodsLeaving`
    /// ended): a held bind call compares it with the count at its decision, so room freed
    /// before the call began to wait still makes it decide again. Only counted up, through
    /// [`Gang::note_room_freed`].
    rooms_freed: u64,
    /// How many times a member's bind planned the gang anew (seats for every member, see
    /// `GangTable::take_planned_seats`).
    plans: u64,
    /// `plans` when kube-scheduler last asked muster's filter about each member: a bind that
    /// follows a filter from before the gang's latest plan names a node chosen under the old one.
    filtered_at_plan: BTreeMap<PodUid, u64>,
    /// A member was told something (an Event: why the gang waits, a preemption, a conflict,
    /// a failed bind) since the gang was last placed: its `GangPlaced` Event ends that story.
    /// A gang placed without having been told anything gets none (kube-scheduler's
    /// `Scheduled` Event on each member already says where it went).
    told_since_placed: bool,
}

/// What a waiting gathered gang asked the cluster autoscaler for, and since when
/// (`verbs::gather::capacity`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoomAsked {
    pub since: Instant,
    /// Members the quorum still needs a node for: the buffer's replicas.
    pub replicas: u32,
    /// How many of them do not fit on the nodes that exist.
    pub short: u32,
    /// The bound passed without the gang fitting: no longer asked.
    pub gave_up: bool,
    /// No NodePool's remaining limits hold the members short of room: not asked, and this
    /// is why (`GangTable::judge_against_pools`).
    pub beyond_pools: Option<String>,
}

impl Default for Gang {
    fn default() -> Self {
        Gang {
            members: BTreeSet::new(),
            seats: BTreeMap::new(),
            phase: Phase::Waiting,
            spec: GangSpec::default(),
            last_attempt: None,
            last_wait_message: None,
            wait_message_untold: None,
            reported_conflict: None,
            reported_pod_group_conflict: None,
            arrived_unnoted: false,
            last_join: 0,
            newest_arrival: None,
            blocked_by_rule: false,
            refused_in_window: BTreeSet::new(),
            told_waiting: BTreeMap::new(),
            preemption_hold: None,
            awaiting_room: Vec::new(),
            marker_warning: None,
            beyond_preemption: None,
            short_of_room: false,
            room_asked: None,
            told_since_placed: false,
            partly_bound: None,
            rooms_freed: 0,
            plans: 0,
            filtered_at_plan: BTreeMap::new(),
        }
    }
}

impl Gang {
    // === spec ===

    pub fn spec(&self) -> &GangSpec {
        &self.spec
    }

    /// Set when a member joins, changes or leaves (the table recomputes it then).
    pub(in crate::model) fn set_spec(&mut self, spec: GangSpec) {
        self.spec = spec;
    }

    // === conflicts told ===

    /// Whether the members were told already that their keys disagree on the quorum, as
    /// `values`.
    pub(in crate::model) fn quorum_conflict_told(&self, values: &[u32]) -> bool {
        self.reported_conflict.as_deref() == Some(values)
    }

    /// The members were told that their keys disagree on the quorum, as `values`.
    pub(in crate::model) fn note_quorum_conflict_told(&mut self, values: Vec<u32>) {
        self.reported_conflict = Some(values);
    }

    /// Whether the members were told already of these disagreements with the PodGroup.
    pub(in crate::model) fn pod_group_conflict_told(&self, found: &[String]) -> bool {
        self.reported_pod_group_conflict.as_deref() == Some(found)
    }

    /// The members were told of these disagreements with the PodGroup.
    pub(in crate::model) fn note_pod_group_conflict_told(&mut self, found: Vec<String>) {
        self.reported_pod_group_conflict = Some(found);
    }

    // === room freed ===

    /// Room the gang's quorum waited for was freed.
    pub(in crate::model) fn note_room_freed(&mut self) {
        self.rooms_freed += 1;
    }

    /// How many times room the gang's quorum waited for was freed so far.
    pub fn rooms_freed(&self) -> u64 {
        self.rooms_freed
    }

    // === members ===

    pub fn members(&self) -> &BTreeSet<PodUid> {
        &self.members
    }

    /// `uid` is a member; `stamp` is the table's join count (unique across gangs, and across a
    /// gang removed and created again under the same key).
    pub fn join(&mut self, uid: PodUid, stamp: u64) {
        if self.members.insert(uid) {
            self.arrived_unnoted = true;
            self.last_join = stamp;
        }
    }

    /// When the newest member joined, as the table's join count: a gang whose live members
    /// were all bound stays so until it changes (a pod's node is never unset; a member leaving
    /// adds none unbound).
    pub fn last_join(&self) -> u64 {
        self.last_join
    }

    // === creation window ===

    /// Starts the creation window at `now` if a member joined since the last look. The table
    /// calls this at every decision and every second, so the window starts within a second of
    /// the watch delivering the newest member, and the model stays free of clocks.
    pub fn note_arrivals(&mut self, now: Instant) {
        if self.arrived_unnoted {
            self.arrived_unnoted = false;
            self.newest_arrival = Some(now);
        }
    }

    /// Whether members may still be on their way: less than `window` since the newest member
    /// appeared. Room is held for members not created yet only meanwhile.
    pub fn within_creation_window(&self, now: Instant, window: Duration) -> bool {
        self.arrived_unnoted
            || self
                .newest_arrival
                .is_none_or(|t| now.saturating_duration_since(t) < window)
    }

    /// Member `uid` was refused while the creation window was open: asked to retry once it
    /// closes.
    pub(in crate::model) fn refused_in_window(&mut self, uid: &PodUid) {
        self.refused_in_window.insert(uid.clone());
    }

    /// The members refused while the creation window was open, once it has closed (then
    /// forgotten); nothing while it is open.
    pub(in crate::model) fn take_refused_once_window_closed(
        &mut self,
        now: Instant,
        window: Duration,
    ) -> BTreeSet<PodUid> {
        if self.refused_in_window.is_empty() || self.within_creation_window(now, window) {
            return BTreeSet::new();
        }
        std::mem::take(&mut self.refused_in_window)
    }

    /// Returns whether the gang has no member left.
    pub fn leave(&mut self, uid: &str) -> bool {
        self.members.remove(uid);
        self.told_waiting.remove(uid);
        self.filtered_at_plan.remove(uid);
        self.members.is_empty()
    }

    /// Records that `uid` was told `message`; false if it was the last thing it was told.
    pub fn tell_waiting_once(&mut self, uid: &PodUid, message: &str) -> bool {
        if self.told_waiting.get(uid).is_some_and(|m| m == message) {
            return false;
        }
        self.told_waiting.insert(uid.clone(), message.to_string());
        true
    }

    // === plans and the filters that saw them ===

    /// A member's bind planned the gang anew.
    pub(in crate::model) fn note_planned(&mut self) {
        self.plans += 1;
    }

    /// kube-scheduler asked muster's filter about member `uid`.
    pub(in crate::model) fn note_filtered(&mut self, uid: &PodUid) {
        self.filtered_at_plan.insert(uid.clone(), self.plans);
    }

    /// Whether member `uid`'s last filter ran before the gang's latest plan: its bind names a
    /// node kube-scheduler chose before that plan gave the member its seat. A member this
    /// replica never filtered (asked before a restart) is not known to be behind.
    pub(in crate::model) fn filtered_before_latest_plan(&self, uid: &str) -> bool {
        self.filtered_at_plan
            .get(uid)
            .is_some_and(|&p| p < self.plans)
    }

    // === attempts ===

    /// kube-scheduler tried one of the gang's members at `now` (a filter call, or the
    /// gatherer's round): a gang tried recently competes for room (see the planner).
    pub(in crate::model) fn note_attempt(&mut self, now: Instant) {
        self.last_attempt = Some(now);
    }

    /// When kube-scheduler last tried one of the gang's members.
    pub fn last_attempt(&self) -> Option<Instant> {
        self.last_attempt
    }

    // === why the gang waits ===

    /// Why the gang waits, as last decided: `/gangs` shows it, and a held bind call that gives
    /// up answers with it.
    pub fn wait_message(&self) -> Option<&str> {
        self.last_wait_message.as_deref()
    }

    /// The gang waits for `why` now, as decided (told to its members or not by the caller):
    /// `/gangs` and held bind calls say so.
    pub(in crate::model) fn note_waiting(&mut self, why: String) {
        self.last_wait_message = Some(why);
    }

    /// The gang waits for `why` but its members are not told yet: it is short only of members
    /// still being created, within its window (`GangTable::tell_waiting` tells it later).
    pub(in crate::model) fn note_waiting_untold(&mut self, why: &str) {
        self.last_wait_message = Some(why.to_string());
        self.wait_message_untold = Some(why.to_string());
    }

    /// The gang's members were told it waits for `why` (`GangTable::tell_waiting`).
    pub(in crate::model) fn note_waiting_told(&mut self, why: &str) {
        self.last_wait_message = Some(why.to_string());
        self.wait_message_untold = None;
    }

    /// Whether `why` is the reason noted last and was not kept untold: telling it again would
    /// repeat it.
    pub(in crate::model) fn wait_already_told(&self, why: &str) -> bool {
        self.last_wait_message.as_deref() == Some(why)
            && self.wait_message_untold.as_deref() != Some(why)
    }

    /// The gang no longer waits for the reason noted last: it took its seats, or its members
    /// were asked to retry.
    pub(in crate::model) fn stop_waiting(&mut self) {
        self.last_wait_message = None;
    }

    // === preemption hold ===

    /// The gang's seats now hold the room `preemptor`'s preemption frees on `node`, and
    /// `awaiting` is the rest of its plan, where pods of lower priority still use the room.
    pub(in crate::model) fn hold_for_preemption(
        &mut self,
        preemptor: PodUid,
        node: NodeName,
        awaiting: Vec<PlannedSeat>,
    ) {
        self.preemption_hold = Some(PreemptionHold { preemptor, node });
        self.awaiting_room = awaiting;
    }

    /// The preemptor was bound, or asked to bind where it was nominated: the hold's seats are
    /// ordinary seats from now on (the room still awaited stays planned).
    pub(in crate::model) fn hold_became_seats(&mut self) {
        self.preemption_hold = None;
    }

    /// Ends the hold and forgets the room it awaited; returns whether the gang was holding.
    pub(in crate::model) fn end_preemption_hold(&mut self) -> bool {
        self.awaiting_room.clear();
        self.preemption_hold.take().is_some()
    }

    /// The hold's planned seats whose room is still not free, once the free ones were seated.
    pub(in crate::model) fn still_awaiting_room(&mut self, left: Vec<PlannedSeat>) {
        self.awaiting_room = left;
    }

    /// The preemption whose room the gang's seats hold, while they do.
    pub fn preemption_hold(&self) -> Option<&PreemptionHold> {
        self.preemption_hold.as_ref()
    }

    /// The hold's planned seats whose room pods of lower priority still use.
    pub(in crate::model) fn awaiting_room(&self) -> &[PlannedSeat] {
        &self.awaiting_room
    }

    // === what the gatherer found ===

    /// A member arrived without the marker resource, so kube-scheduler schedules it without
    /// muster: `/gangs` shows `warning`.
    pub(in crate::model) fn warn_marker_missing(&mut self, warning: String) {
        self.marker_warning = Some(warning);
    }

    /// Why some members are scheduled without muster (the marker resource missing).
    pub fn marker_warning(&self) -> Option<&str> {
        self.marker_warning.as_deref()
    }

    /// Whether the gatherer's latest plan fell short of room alone, the one thing evicting
    /// pods of lower priority may change: only then is preemption looked at for the gang.
    pub(in crate::model) fn note_short_of_room(&mut self, short: bool) {
        self.short_of_room = short;
    }

    /// The gatherer's latest plan fell short of room alone.
    pub(in crate::model) fn short_of_room(&self) -> bool {
        self.short_of_room
    }

    /// The gatherer's latest look at preemption: `Some` when not even evicting every pod of
    /// lower priority would place the gang, so its waiting message says so. Returns whether
    /// the verdict changed.
    pub(in crate::model) fn note_beyond_preemption(
        &mut self,
        beyond: Option<BeyondPreemption>,
    ) -> bool {
        let changed = self.beyond_preemption != beyond;
        self.beyond_preemption = beyond;
        changed
    }

    /// The latest look's verdict that preemption cannot place the gang, if it found so.
    pub(in crate::model) fn beyond_preemption(&self) -> Option<&BeyondPreemption> {
        self.beyond_preemption.as_ref()
    }

    // === room asked of the autoscaler ===

    /// Asks the cluster autoscaler for room for `replicas` members, `short` of which fit on no
    /// node that exists, or keeps asking (since the first ask); once `bound` has passed since
    /// then, the ask is given up. Returns the ask as it stands.
    pub(in crate::model) fn ask_for_room(
        &mut self,
        now: Instant,
        replicas: u32,
        short: u32,
        bound: Duration,
    ) -> &RoomAsked {
        let asked = self.room_asked.get_or_insert(RoomAsked {
            since: now,
            replicas,
            short,
            gave_up: false,
            beyond_pools: None,
        });
        asked.replicas = replicas;
        asked.short = short;
        if !asked.gave_up && now.saturating_duration_since(asked.since) >= bound {
            asked.gave_up = true;
        }
        asked
    }

    /// The standing ask judged against the NodePools' remaining limits: `Some` names the
    /// limit that stops it. Returns whether the judgement changed (never without an ask).
    pub(in crate::model) fn judge_room_ask(&mut self, beyond_pools: Option<String>) -> bool {
        let Some(asked) = self.room_asked.as_mut() else {
            return false;
        };
        if asked.beyond_pools == beyond_pools {
            return false;
        }
        asked.beyond_pools = beyond_pools;
        true
    }

    /// The gang is no longer short of room alone (or nothing is asked of the autoscaler at
    /// all): any ask for it is withdrawn.
    pub(in crate::model) fn withdraw_room_ask(&mut self) {
        self.room_asked = None;
    }

    /// What is asked of the cluster autoscaler for the gang, if anything.
    pub fn room_asked(&self) -> Option<&RoomAsked> {
        self.room_asked.as_ref()
    }

    // === seats (changed only with the ledger, by `GangTable`) ===

    pub fn seats(&self) -> &BTreeMap<SeatHolder, Seat> {
        &self.seats
    }

    pub fn seat_of(&self, uid: &PodUid) -> Option<&Seat> {
        self.seats.get(&SeatHolder::Member(uid.clone()))
    }

    // The seats change only with their reservations, through the table's seat operations
    // (`GangTable::seat`, `unseat`, `reseat`, `unseat_all`, `unseat_node`): visible to the
    // table alone.

    pub(super) fn insert_seat(&mut self, holder: SeatHolder, seat: Seat) -> Option<Seat> {
        self.seats.insert(holder, seat)
    }

    pub(super) fn remove_seat(&mut self, holder: &SeatHolder) -> Option<Seat> {
        self.seats.remove(holder)
    }

    pub(super) fn take_all_seats(&mut self) -> Vec<(SeatHolder, Seat)> {
        std::mem::take(&mut self.seats).into_iter().collect()
    }

    pub(super) fn retain_seats(&mut self, keep: impl FnMut(&SeatHolder, &mut Seat) -> bool) {
        self.seats.retain(keep);
    }

    pub fn confirmed_seats(&self) -> u32 {
        self.seats.values().filter(|s| s.confirmed).count() as u32
    }

    // === phase ===

    pub fn phase(&self) -> Phase {
        self.phase
    }

    pub fn is_admitted(&self) -> bool {
        matches!(self.phase, Phase::Admitted { .. })
    }

    pub fn is_placed_flag(&self) -> bool {
        self.phase == Phase::Placed
    }

    /// How long the gang is still refused after a timeout, if it is.
    pub fn backoff_left(&self, now: Instant) -> Option<Duration> {
        match self.phase {
            Phase::BackingOff { until } if until > now => Some(until - now),
            _ => None,
        }
    }

    /// The plan fitted and the gang took its seats: its timeout starts now.
    pub fn admit(&mut self, now: Instant) {
        self.phase = Phase::Admitted { since: now };
    }

    /// A member of the gang was told something (see `told_since_placed`).
    pub(in crate::model) fn note_told(&mut self) {
        self.told_since_placed = true;
    }

    /// Whether a member was told something since the gang was last placed.
    pub(in crate::model) fn told_since_placed(&self) -> bool {
        self.told_since_placed
    }

    /// Quorum reached and the members are being bound.
    pub fn place(&mut self) {
        self.phase = Phase::Placed;
        self.told_since_placed = false;
        self.last_wait_message = None;
        self.preemption_hold = None;
        self.awaiting_room.clear();
        self.partly_bound = None;
    }

    /// Whether the gang's own latest simulation failed on a rule other than room.
    pub(in crate::model) fn note_blocked_by_rule(&mut self, blocked: bool) {
        self.blocked_by_rule = blocked;
    }

    /// The gang's own latest simulation failed on a rule other than room.
    pub fn blocked_by_rule(&self) -> bool {
        self.blocked_by_rule
    }

    /// The gang was found partly bound as muster started deciding; `what` was done about it.
    pub(in crate::model) fn found_partly_bound(&mut self, what: String) {
        self.partly_bound = Some(what);
    }

    /// What was done about the gang found partly bound, until it is placed.
    pub fn partly_bound(&self) -> Option<&str> {
        self.partly_bound.as_deref()
    }

    /// Timed out: refused until `until`.
    pub fn back_off(&mut self, until: Instant) {
        self.phase = Phase::BackingOff { until };
        self.last_wait_message = None;
        self.preemption_hold = None;
        self.awaiting_room.clear();
    }

    /// A placed gang with no member on any node any more starts again from scratch.
    pub fn unplace(&mut self) {
        if self.phase == Phase::Placed {
            self.phase = Phase::Waiting;
        }
    }

    /// An admitted gang that lost its last seat (members deleted or bound, nodes gone) holds
    /// nothing any more, so it is waiting again.
    pub(in crate::model) fn settle_after_seats_removed(&mut self) {
        if self.is_admitted() && self.seats.is_empty() {
            self.phase = Phase::Waiting;
            self.preemption_hold = None;
            self.awaiting_room.clear();
        }
    }
}

#[cfg(test)]
mod tests;
