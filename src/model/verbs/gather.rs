//! Gathering behind the gate: muster places a marked gang itself, from the watch, and lets
//! kube-scheduler see its members only once the whole quorum can run.
//!
//! deploy/gang-admission-policy.yaml gives every gang member, at creation, the scheduling gate
//! [`GATHER_GATE`] and the marker resource [`GANG_MARKER`]. kube-scheduler does not try a gated
//! pod at all (PreEnqueue plugin SchedulingGates), so a gang that cannot run costs it nothing:
//! no held binds, no retries, no preemption attempts. On every watch change and every tick,
//! [`Gatherer::gather`] simulates each gathered gang with the planner (every required rule
//! kube-scheduler applies; muster's own gate counts as removable, any other gate still blocks,
//! see `rules::scheduling_gates`). When the quorum is placed *now*, the gang is admitted with a
//! seat per member, and the plan says, per gang: publish each seat as the member's
//! `status.nominatedNodeName`, *then* remove the quorum members' gates together (the cluster
//! side does the I/O in that order). kube-scheduler tries a nominated node first and counts a
//! nominated pod against every pod of equal or lower priority on that node
//! (`NominatedNodeNameForExpectation`, beta and on since 1.35); the nomination of a gated pod
//! counts already (pkg/scheduler/backend/queue/scheduling_queue.go:885, v1.37.2). The members
//! then pass through muster's filter (their seats) and bind (held until the quorum's binds
//! are in, then bound together), so never-half rests on the bind path as before.
//!
//! kube-scheduler clears nominations on many paths (a scheduling failure, preemption with no
//! candidate, the API server on binding: pkg/scheduler/schedule_one.go:166, :537,
//! pkg/registry/core/pod/storage/storage.go:246), so a seated member's nomination is written
//! again while its seat exists, and cleared when its seat goes. Members beyond the quorum and
//! replacements for a placed gang are ungated as they fit.

use std::time::Instant;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::model::inputs::membership::GangKey;
use crate::model::inputs::objects::{NodeName, PodInfo, PodUid};
use crate::model::notice::{Notice, NoticeKind, PodRef};
use crate::model::rules::scheduling_gates;
use crate::model::table::GangTable;

pub use crate::model::inputs::resources::GANG_MARKER;
pub use crate::model::rules::scheduling_gates::GATHER_GATE;
/// The policy to apply when gang members arrive without the marker.
pub const POLICY_FILE: &str = "deploy/gang-admission-policy.yaml";

/// Index of muster's gate in the pod's `spec.schedulingGates`, if it carries it.
pub fn gather_gate_index(pod: &PodInfo) -> Option<usize> {
    scheduling_gates::gates(pod)
        .iter()
        .position(|g| g == GATHER_GATE)
}

/// A member whose gate muster removes: which pod, and where its gate was when planned. The
/// patch (`cluster::gather`) deletes the gate by name and names the pod's UID, which is what
/// keeps a pod replaced meanwhile untouched; the index is not sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ungate {
    pub pod: PodRef,
    pub gate_index: usize,
}

/// One gang's members let through to kube-scheduler together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Release {
    pub gang: GangKey,
    /// Written first, each before any gate of the gang is removed.
    pub nominate: Vec<(PodRef, NodeName)>,
    /// Removed together, once every nomination above is written.
    pub ungate: Vec<Ungate>,
}

/// What the cluster side must write after one round.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GatherPlan {
    pub releases: Vec<Release>,
    /// Seated members already let through whose nomination is not their seat's node (cleared
    /// or changed by kube-scheduler): written again.
    pub renominate: Vec<(PodRef, NodeName)>,
    /// Nominations muster wrote whose seat is gone.
    pub clear: Vec<PodRef>,
    /// Members newly warned about a missing marker this round (for the metric).
    pub markers_missing: u64,
    /// Pods behind muster's gate in no gang: released as plain pods (see `orphans`).
    pub outside_gangs: Vec<Ungate>,
}

impl GatherPlan {
    pub fn is_empty(&self) -> bool {
        self.releases.is_empty()
            && self.renominate.is_empty()
            && self.clear.is_empty()
            && self.outside_gangs.is_empty()
    }
}

/// The gatherer's memory between rounds (kept beside the table, not in it: it is what muster
/// wrote to the API server, not what it believes exists). Lost on restart, and rebuilt: a
/// gated member's nomination can only be muster's (kube-scheduler never tries a gated pod),
/// and an admitted gang's seats are re-published as the members' nominations.
#[derive(Debug, Default)]
pub struct Gatherer {
    /// Nominations muster wrote and saw succeed, by pod.
    nominated: HashMap<PodUid, NodeName>,
    /// Nomination writes (a node, or `None` for a clear) the watch has not shown yet, and when
    /// they were written: not written again meanwhile. Under load the watch lags muster's own
    /// writes by hundreds of milliseconds; without this, the next round saw the old value and
    /// wrote the same nomination again (often after the member had bound: refused).
    unseen: HashMap<PodUid, Unseen>,
    /// Members whose gate removal was written, and when: not released again until the watch
    /// shows the gate gone, or [`RELEASE_AGAIN_AFTER`] passed.
    released: HashMap<PodUid, Instant>,
    /// Members whose gate removal was written, and when, while they wait for a node: a placed
    /// gang's next replacement waits while one of them is on its way (see [`IN_FLIGHT_WITHIN`]).
    let_through_at: HashMap<PodUid, Instant>,
    /// When each waiting gathered gang was last asked whether only preemption could place it.
    preemption_looked: HashMap<GangKey, Instant>,
    /// When each gang with fewer live members than its quorum was last planned (see
    /// [`INCOMPLETE_PLAN_EVERY`]).
    planned_incomplete: HashMap<GangKey, Instant>,
    /// Gangs whose live members were all bound when last looked at, with their
    /// [`Gang::last_join`](crate::model::table::Gang::last_join) then: passed over without a look
    /// at their members until a member joins.
    settled: HashMap<GangKey, u64>,
    /// Members already warned about a missing marker.
    warned: HashSet<PodUid>,
    /// Pods told their gate goes because they are in no gang (see `orphans`).
    told_outside: HashSet<PodUid>,
    /// Writes the cluster side has sent and not settled yet (each release runs as a task of
    /// its own, so a round never waits on one gang's writes): their gangs and pods are left
    /// alone until they settle, and then judged from what the writes did ([`Gatherer::writing`]).
    writing: Writing,
    /// Gang members must carry the marker (the scheduler config names it in
    /// `managedResources`): warn about those that do not.
    expect_marker: bool,
    /// Which seats a release publishes as nominations.
    nominations: Nominations,
    /// Seated members let through without a nomination (their seats were not at risk): not
    /// nominated again while their seats stay safe (see `nominations`).
    floating: HashSet<PodUid>,
}

/// Which seats a release publishes as its members' nominations (`--nominate-seats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Nominations {
    /// Only seats at risk ([`SeatRisk`]); the other members float.
    #[default]
    AtRisk,
    /// Every seat.
    EverySeat,
}

impl Gatherer {
    pub fn new(expect_marker: bool) -> Self {
        Gatherer {
            expect_marker,
            ..Default::default()
        }
    }

    /// The same gatherer publishing `nominations`.
    pub fn nominating(self, nominations: Nominations) -> Self {
        Gatherer {
            nominations,
            ..self
        }
    }

    /// A nomination was written (`Some`) or cleared (`None`) at `now`; `gated`: the pod
    /// still carried muster's gate (a release writes the nomination before the gate goes).
    pub fn nominated(&mut self, uid: &PodUid, node: Option<NodeName>, now: Instant, gated: bool) {
        self.unseen.insert(
            uid.clone(),
            Unseen {
                node: node.clone(),
                at: now,
                gated,
            },
        );
        match node {
            Some(n) => {
                self.nominated.insert(uid.clone(), n);
            }
            None => {
                self.nominated.remove(uid);
            }
        }
    }

    /// The gate of `uid` was removed (the API server answered).
    pub fn ungated(&mut self, uid: &PodUid, now: Instant) {
        self.released.insert(uid.clone(), now);
        self.let_through_at.insert(uid.clone(), now);
    }

    /// Writes of `gang` (a release) or of `pods` alone were sent: until [`Gatherer::settled`],
    /// rounds plan nothing for that gang (its seats are neither released nor planned again,
    /// its members neither released again nor renominated) nor for those pods (no
    /// renomination, no clear, no gate removal). Without this a round would plan a release
    /// whose nominations are still being written a second time, or clear a nomination that a
    /// release in flight wrote before removing the gate (never-half: the gate would go without
    /// the seat published).
    pub fn writing(&mut self, gang: Option<&GangKey>, pods: impl IntoIterator<Item = PodUid>) {
        if let Some(g) = gang {
            self.writing.gangs.insert(g.clone());
        }
        self.writing.pods.extend(pods);
    }

    /// The writes announced by [`Gatherer::writing`] for `gang` and `pods` ended (their
    /// outcomes already told through [`Gatherer::nominated`] and [`Gatherer::ungated`]).
    pub fn settled<'a>(
        &mut self,
        gang: Option<&GangKey>,
        pods: impl IntoIterator<Item = &'a PodUid>,
    ) {
        if let Some(g) = gang {
            self.writing.gangs.remove(g);
        }
        for p in pods {
            self.writing.pods.remove(p);
        }
    }

    /// Whether a write of `uid` is in flight.
    pub fn is_writing(&self, uid: &PodUid) -> bool {
        self.writing.pods.contains(uid)
    }

    /// Members warned about a missing marker so far (for the metric).
    pub fn warned_count(&self) -> usize {
        self.warned.len()
    }

    /// One round over every gang: see the module notes.
    pub fn gather(&mut self, table: &mut GangTable, now: Instant) -> GatherPlan {
        let mut plan = GatherPlan::default();
        self.preemption_looked
            .retain(|k, _| table.gangs.contains_key(k));
        self.planned_incomplete.retain(|k, at| {
            now.saturating_duration_since(*at) < INCOMPLETE_PLAN_EVERY
                && table.gangs.contains_key(k)
        });
        self.released.retain(|uid, at| {
            now.saturating_duration_since(*at) < RELEASE_AGAIN_AFTER
                && table
                    .pods
                    .get(uid)
                    .is_some_and(|p| gather_gate_index(&p.info).is_some())
        });
        self.floating
            .retain(|uid| table.pods.get(uid).is_some_and(|p| p.is_pending()));
        let mut risk = RiskView::default();
        self.let_through_at.retain(|uid, at| {
            now.saturating_duration_since(*at) < IN_FLIGHT_WITHIN
                && table.pods.get(uid).is_some_and(|p| p.is_pending())
        });
        // A write is no longer waited for once the watch shows it: its value, or for a
        // release the gate gone (the watch delivers one pod's changes in order, and the gate
        // went after the nomination, so a nomination missing then was cleared since). One the
        // watch never showed within NOMINATION_SEEN_WITHIN (written and cleared again between
        // two rounds) is written again if still wanted.
        self.unseen.retain(|uid, w| {
            now.saturating_duration_since(w.at) < NOMINATION_SEEN_WITHIN
                && table.pods.get(uid).is_some_and(|p| {
                    p.is_pending()
                        && p.info.nominated_node != w.node
                        && !(w.gated && gather_gate_index(&p.info).is_none())
                })
        });
        // Only gangs a step below can concern: holding seats, or with a live member not bound
        // (its gate, its marker). A gang whose live members are all bound is none of this
        // round's business, and stays so until a member joins (a pod's node is never unset), so
        // it is passed over without a look at its members; most gangs of a busy cluster are. A
        // round at the 5,000-node benchmark's end state (436 gangs bound) took 1.19 ms walking
        // every gang's members four times (`cargo bench --bench handlers -- gather_round`).
        self.settled.retain(|k, _| table.gangs.contains_key(k));
        let mut keys: Vec<GangKey> = Vec::new();
        for (key, gang) in &table.gangs {
            if !gang.is_admitted() {
                if self.settled.get(key) == Some(&gang.last_join()) {
                    continue;
                }
                let unbound = table
                    .members_of(gang)
                    .any(|p| p.is_live() && p.info.node_name.is_none());
                if !unbound {
                    self.settled.insert(key.clone(), gang.last_join());
                    continue;
                }
            }
            self.settled.remove(key);
            keys.push(key.clone());
        }
        for key in &keys {
            plan.markers_missing += self.warn_unmarked(table, key);
            // A release of this gang is being written: judged again once it settled.
            if self.writing.gangs.contains(key) {
                continue;
            }
            // An admitted gathered gang whose seats no longer hold its whole quorum (a member
            // deleted or lost its seat, a node gone) is seated again around its confirmed seats
            // if its quorum still fits; else it holds nothing from now on and is planned again
            // from scratch next round (its held bind calls answer meanwhile).
            if table.release_short_gathered(key, now) {
                continue;
            }
            let gated: Vec<PodInfo> = table
                .pending_members(key)
                .into_iter()
                .filter(|p| !p.info.terminating && gather_gate_index(&p.info).is_some())
                .filter(|p| !self.released.contains_key(&p.info.uid))
                .filter(|p| !self.writing.pods.contains(&p.info.uid))
                .map(|p| p.info.clone())
                .collect();
            // Every step below lets gated members through; a gang without any is left alone.
            if gated.is_empty() {
                continue;
            }
            let facts = table.facts(key);
            if table.is_placed(key, &facts) {
                // Members beyond the quorum and replacements: one at a time, as each fits. A
                // member let through holds no seat, so while one is on its way to a node the
                // next waits: two let through for the same room would leave one in
                // kube-scheduler's queue. On its way means muster let it through recently and
                // kube-scheduler has not refused it: a pending member muster did not let
                // through (created without the marker, or before a restart of muster), or one
                // kube-scheduler found unschedulable (its room taken meanwhile), or one let
                // through longer than IN_FLIGHT_WITHIN ago, blocks no replacement that fits
                // elsewhere.
                let in_flight = table.pending_members(key).iter().any(|p| {
                    self.released.contains_key(&p.info.uid)
                        || (self.let_through_at.contains_key(&p.info.uid)
                            && p.info.unschedulable.is_none())
                });
                if in_flight {
                    continue;
                }
                if let Some((pod, node)) = gated
                    .iter()
                    .find_map(|p| Some((p, table.gathered_fits(key, p, now)?)))
                {
                    plan.releases.push(release(key, vec![(pod, node)]));
                }
                continue;
            }
            let Some(gang) = table.gangs.get_mut(key) else {
                continue;
            };
            if gang.is_admitted() {
                // Seats are held (by an earlier round whose gates did not all go, or through
                // kube-scheduler's own calls): seated gated members go through.
                let seated: Vec<(&PodInfo, NodeName)> = gated
                    .iter()
                    .filter_map(|p| Some((p, gang.seat_of(&p.uid)?.node.clone())))
                    .collect();
                if !seated.is_empty() {
                    let r = self.release_seated(table, key, seated, &mut risk);
                    plan.releases.push(r);
                }
                continue;
            }
            let first = &gated[0];
            if gang.backoff_left(now).is_some() {
                continue;
            }
            gang.note_arrivals(now);
            gang.note_attempt(now);
            let on_its_way = table
                .pending_members(key)
                .iter()
                .any(|p| self.released.contains_key(&p.info.uid));
            // The outlook scans every pod: looked at once per gang per PREEMPTION_LOOK_EVERY.
            let look_at_preemption = !on_its_way
                && self
                    .preemption_looked
                    .get(key)
                    .is_none_or(|t| now.saturating_duration_since(*t) >= PREEMPTION_LOOK_EVERY);
            // A gang with fewer live members than its quorum cannot be let through (seats for
            // members not created yet hold nothing), so its plan only refreshes why it waits
            // and what room it would need: once per INCOMPLETE_PLAN_EVERY, not every round.
            let complete = !(facts.spec.is_decided() && facts.existing < facts.spec.quorum);
            let plan_now = complete || !self.planned_incomplete.contains_key(key);
            if !complete && plan_now {
                self.planned_incomplete.insert(key.clone(), now);
            }
            if let Some(seats) = plan_now
                .then(|| table.admit_gathered(key, first, now))
                .flatten()
            {
                let through: Vec<(&PodInfo, NodeName)> = gated
                    .iter()
                    .filter_map(|p| {
                        let (_, node) = seats.iter().find(|(h, _)| h.member() == Some(&p.uid))?;
                        Some((p, node.clone()))
                    })
                    .collect();
                let r = self.release_seated(table, key, through, &mut risk);
                plan.releases.push(r);
                table.retry_let_through(&seats);
            } else if let Some(need) = look_at_preemption
                .then(|| {
                    self.preemption_looked.insert(key.clone(), now);
                    table.preemption_may_place(key, first, now)
                })
                .flatten()
            {
                // Only by preempting pods of lower priority: the quorum's gates go, without
                // seats or nominations, so kube-scheduler's preemption runs for the members,
                // through muster's preempt verb, which keeps a candidate only when the whole
                // gang then fits and holds the room it frees while the victims terminate
                // (evict-for-whole). Once, while none of them is on its way.
                plan.releases.push(Release {
                    gang: key.clone(),
                    nominate: Vec::new(),
                    ungate: gated
                        .iter()
                        .take(need)
                        .filter_map(|p| {
                            Some(Ungate {
                                pod: PodRef::of(p),
                                gate_index: gather_gate_index(p)?,
                            })
                        })
                        .collect(),
                });
            }
        }
        plan.outside_gangs = self.release_outside_gangs(table);
        self.keep_nominations(table, &mut plan);
        plan
    }

    /// Seated members let through: each seat at risk is published as the member's nomination
    /// (unless every seat is), the other members float (see `nominations`).
    fn release_seated(
        &mut self,
        table: &GangTable,
        key: &GangKey,
        members: Vec<(&PodInfo, NodeName)>,
        risk: &mut RiskView,
    ) -> Release {
        let mut r = release(key, Vec::new());
        for (p, node) in members {
            let pod = PodRef::of(p);
            if let Some(gate_index) = gather_gate_index(p) {
                r.ungate.push(Ungate {
                    pod: pod.clone(),
                    gate_index,
                });
            }
            if self.nominations == Nominations::EverySeat
                || table.seat_risk(key, p, &node, risk).is_some()
            {
                self.floating.remove(&p.uid);
                r.nominate.push((pod, node));
            } else {
                self.floating.insert(p.uid.clone());
            }
        }
        r
    }

    /// Seated members' nominations equal to their seats; muster's nominations without a seat
    /// cleared.
    fn keep_nominations(&mut self, table: &GangTable, plan: &mut GatherPlan) {
        let releasing: HashSet<&PodUid> = plan
            .releases
            .iter()
            .flat_map(|r| r.nominate.iter().map(|(p, _)| &p.uid))
            .collect();
        let mut renominate = Vec::new();
        let mut clear = Vec::new();
        for gang in table.gangs.values() {
            if !gang.is_admitted() {
                continue;
            }
            for (holder, seat) in gang.seats() {
                let Some(p) = holder.member().and_then(|u| table.pods.get(u)) else {
                    continue;
                };
                // A member whose bind call is held on its confirmed seat is assumed there by
                // kube-scheduler: a nomination now routes nothing and races its binding. It is
                // written once the call ends unbound (kube-scheduler then tries the pod again).
                if !p.is_pending()
                    || (seat.confirmed && table.is_bind_held(&p.info.uid))
                    || releasing.contains(&p.info.uid)
                    || self.unseen.contains_key(&p.info.uid)
                    || self.writing.pods.contains(&p.info.uid)
                {
                    continue;
                }
                // Only members muster let through (also before a restart of muster: a marked
                // member without muster's gate): a gang admitted through kube-scheduler's own
                // calls (every pod through muster) keeps its nominations as kube-scheduler set
                // them (see `hold`).
                if (self.nominated.contains_key(&p.info.uid) || let_through(&p.info))
                    && p.info.nominated_node.as_ref() != Some(&seat.node)
                {
                    // A floating member stays unnominated until kube-scheduler refuses it (the
                    // nodes it was offered had no room); then it is nominated to its seat from
                    // now on. Its risk is judged once, at its release: by the time it changes
                    // the member is mostly in kube-scheduler's cycle already, and a nomination
                    // then races its binding (the API server refuses it on a bound pod).
                    if self.floating.contains(&p.info.uid) {
                        if p.info.unschedulable.is_none() {
                            continue;
                        }
                        self.floating.remove(&p.info.uid);
                    }
                    renominate.push((PodRef::of(&p.info), seat.node.clone()));
                }
            }
        }
        self.nominated.retain(|uid, node| {
            let Some(p) = table.pods.get(uid) else {
                return false;
            };
            if !p.is_pending() {
                return false;
            }
            let key = p.info.gang().map(|m| &m.gang);
            let seated = key
                .and_then(|k| table.gangs.get(k))
                .and_then(|g| g.seat_of(uid))
                .is_some();
            // A member let through beyond the quorum, or to replace one, holds no seat (its
            // gang is placed): its nomination keeps the room it was let through for until it
            // binds.
            let placed = key.is_some_and(|k| table.is_placed(k, &table.facts(k)));
            if !seated
                && !placed
                && p.info.nominated_node.as_ref() == Some(node)
                && !self.unseen.contains_key(uid)
                && !self.writing.pods.contains(uid)
            {
                clear.push(PodRef::of(&p.info));
            }
            true
        });
        // A gated member nominated by an earlier muster (before a restart) without a seat now.
        for gang in table.gangs.values() {
            for p in table.members_of(gang) {
                if p.is_pending()
                    && p.info.nominated_node.is_some()
                    && gather_gate_index(&p.info).is_some()
                    && gang.seat_of(&p.info.uid).is_none()
                    && !self.nominated.contains_key(&p.info.uid)
                    && !self.unseen.contains_key(&p.info.uid)
                    && !self.writing.pods.contains(&p.info.uid)
                {
                    clear.push(PodRef::of(&p.info));
                }
            }
        }
        plan.renominate = renominate;
        plan.clear = clear;
    }

    /// A gang member without the marker bypasses muster entirely (kube-scheduler binds it
    /// alone): said once per member with a Warning Event naming the policy to apply.
    fn warn_unmarked(&mut self, table: &mut GangTable, key: &GangKey) -> u64 {
        if !self.expect_marker {
            return 0;
        }
        let Some(gang) = table.gangs.get(key) else {
            return 0;
        };
        let unmarked: Vec<PodRef> = table
            .members_of(gang)
            .filter(|p| !p.info.gang_marker && p.info.node_name.is_none() && p.is_live())
            .filter(|p| !self.warned.contains(&p.info.uid))
            .map(|p| PodRef::of(&p.info))
            .collect();
        let warned = unmarked.len() as u64;
        if let (Some(first), Some(gang)) = (unmarked.first(), table.gangs.get_mut(key)) {
            gang.warn_marker_missing(format!(
                "member {} has no {GANG_MARKER} resource: kube-scheduler schedules it without \
                 muster; apply {POLICY_FILE}",
                first.name
            ));
        }
        for pod in unmarked {
            self.warned.insert(pod.uid.clone());
            table.notices.push(Notice {
                message: marker_missing_message(key),
                kind: NoticeKind::MarkerMissing,
                pod,
            });
        }
        if self.warned.len() > MAX_WARNED {
            self.warned.retain(|u| table.pods.get(u).is_some());
        }
        warned
    }
}

/// A member muster let through: marked by the admission policy, without muster's gate (only
/// muster removes it).
fn let_through(pod: &PodInfo) -> bool {
    pod.gang_marker && gather_gate_index(pod).is_none()
}

/// How long a member whose gate removal succeeded is not released again while the watch has
/// not shown its gate gone yet.
pub const RELEASE_AGAIN_AFTER: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a member muster let through counts as on its way to a node, unless kube-scheduler
/// refuses it sooner (its `Unschedulable` condition): the update removing its gate moves it
/// out of the gated pods (`PriorityQueue.Update`, pkg/scheduler/backend/queue/
/// scheduling_queue.go:1353, v1.37.2) and it is tried within a scheduling cycle or two, so a
/// member still pending after this is stuck, not on its way, and a placed gang's next
/// replacement is let through.
pub const IN_FLIGHT_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a nomination muster wrote is not written again while the watch has not shown it.
pub const NOMINATION_SEEN_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Writes sent and not settled yet (see [`Gatherer::writing`]).
#[derive(Debug, Default)]
struct Writing {
    gangs: HashSet<GangKey>,
    pods: HashSet<PodUid>,
}

/// A nomination write the watch has not shown yet.
#[derive(Debug)]
struct Unseen {
    node: Option<NodeName>,
    at: Instant,
    gated: bool,
}

/// How often a waiting gathered gang that does not fit is asked whether preemption could place
/// it (the outlook scans every pod; room changes are seen by the next look).
pub const PREEMPTION_LOOK_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// How often a gang with fewer live members than its quorum is planned: its plan cannot let it
/// through, only say why it waits (the count of members to come, or room short whole) and what
/// room an autoscaler should add. Rounds come every 5–50 ms; planning each such gang in each of
/// them was most of a round at the 5,000-node benchmark's pace (eight gangs being created at a
/// time, each planned over every node). Once the last member is there, it is planned at once.
pub const INCOMPLETE_PLAN_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Members remembered as warned at most (those gone are forgotten past it).
const MAX_WARNED: usize = 10_000;

/// The Warning Event's text: what happened and what to apply.
pub fn marker_missing_message(key: &GangKey) -> String {
    format!(
        "gang {key}: this member has no {GANG_MARKER} resource, so kube-scheduler schedules it \
         without muster and its gang may run partly; apply {POLICY_FILE} (kubectl apply -k \
         deploy/) and create the pod again"
    )
}

fn release(key: &GangKey, members: Vec<(&PodInfo, NodeName)>) -> Release {
    let mut nominate = Vec::new();
    let mut ungate = Vec::new();
    for (p, node) in members {
        let pod = PodRef::of(p);
        if let Some(gate_index) = gather_gate_index(p) {
            ungate.push(Ungate {
                pod: pod.clone(),
                gate_index,
            });
        }
        nominate.push((pod, node));
    }
    Release {
        gang: key.clone(),
        nominate,
        ungate,
    }
}

#[path = "gather/capacity.rs"]
mod capacity;
#[path = "gather/nominations.rs"]
mod nominations;
#[path = "gather/orphans.rs"]
mod orphans;
#[path = "gather/seats.rs"]
mod seats;
pub use capacity::{CapacityAsk, MemberShape, PoolRequirement, PoolRoom};
use nominations::RiskView;
pub use nominations::{SeatRisk, KUBE_SCHEDULER_FINDS_AT_LEAST};

#[cfg(test)]
#[path = "gather/tests.rs"]
mod tests;
