//! The preempt verb: which of the candidates kube-scheduler's own dry run proposed (a node and
//! the victims to evict there, for one pod) muster lets it act on.
//!
//! kube-scheduler's dry run knows nothing of gangs. It frees one node for one pod, so for a
//! gang it may evict pods for a member whose gang can never run (evictions for nothing), and
//! it happily picks one member of a running gang as a victim (half a gang left, useless).
//! What muster judges is what its caches say, never what the request claims (derived): the
//! preemptor is the pod as the watch has it (its priority and gang), and a candidate is kept
//! only if every victim is a pod muster knows on that very node, of lower priority than the
//! preemptor. A preemptor the watch has not delivered is refused (nothing is evicted) and
//! asked to retry once it is.
//!
//! The rules here, in order:
//! 0. Every victim on its candidate node, per the cache, of lower priority than the preemptor.
//! 1. A gang member as preemptor is judged only when muster knows its gang: the watch has
//!    delivered the pod, the quorum is decided (a gang without a declared count decides it when
//!    its creation window closes), the gang is not backing off and no member is missing past
//!    the window. Otherwise no candidate is kept — the safe answer, nothing is evicted — and
//!    the pod is asked to retry once muster can judge (see [`gang_check`]).
//! 2. A candidate whose node, with its victims gone, still has no room for the preemptor
//!    because seats of another gang hold it (room held while that gang's own victims
//!    terminate included, see `preemption_hold`) is dropped: filter would refuse the pod there anyway.
//! 3. A member of a gang below quorum as preemptor: a candidate is kept only if, with its
//!    victims gone and every lower-priority pod elsewhere counted as evictable, the rest of
//!    the gang's quorum can also be placed (the planner's first-fit loop under every required
//!    rule, see [`gang_check`]). Where the rest would go is remembered: when kube-scheduler
//!    nominates one of the kept nodes, that room is held for the gang (`preemption_hold`).
//! 4. Whenever a kept candidate has no victim in a running gang, candidates with such victims
//!    are dropped.
//! 5. Only candidates with gang victims left: a gang of equal or higher priority than the
//!    preemptor is never disrupted; of the rest, one candidate is kept (the one disrupting the
//!    fewest pods). A gang in `gang` disruption mode loses every member: its members on that
//!    node join the victims, the others are listed for eviction by muster itself — only once
//!    kube-scheduler commits to the preemption ([`commit`]). A gang in `pod` mode loses only
//!    the proposed victims.
//!
//! The answer replaces kube-scheduler's candidates; no candidate means nothing is evicted.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::model::inputs::membership::{DisruptionMode, GangKey};
use crate::model::inputs::objects::PodInfo;
use crate::model::inputs::pod_group::PodGroupApi;
use crate::model::inputs::resources::Resources;
use crate::model::messages;
use crate::model::notice::{Notice, NoticeKind, PodRef};
use crate::model::planning::quorum_bound::BeyondCluster;
pub use crate::model::table::disruptions::GangDisruption;
use crate::model::table::preemption_plan::PlannedSeat;
use crate::model::table::room_waits::RoomWait;
use crate::model::table::under_way::KeptNode;
use crate::model::table::GangTable;

pub(in crate::model) mod commit;
mod dropped;
mod gang_check;

pub(in crate::model) use gang_check::{GangCheck, PreemptionOutlook};

/// One candidate of kube-scheduler's dry run: a node and the pods it would evict there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreemptCandidate {
    pub node: String,
    pub victims: Vec<String>,
    pub pdb_violations: i64,
}

/// How a preemption request was answered, for the metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreemptOutcome {
    /// Every candidate kept as proposed.
    Kept,
    /// Some candidates dropped or changed, at least one kept.
    Trimmed,
    /// No candidate kept: nothing is evicted.
    Refused,
}

impl PreemptOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            PreemptOutcome::Kept => "kept",
            PreemptOutcome::Trimmed => "trimmed",
            PreemptOutcome::Refused => "refused",
        }
    }
}

/// Why a candidate was dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// muster's watch has not delivered the preemptor yet: its gang is not known.
    NotSeenYet,
    /// The preemptor's gang declares no member count and members may still be arriving.
    QuorumUndecided { existing: u32 },
    /// The preemptor's members name a PodGroup that does not exist: the gang is placed
    /// nowhere until it does, so nothing evicted would let it run (evict-for-whole).
    PodGroupMissing { api: PodGroupApi },
    /// The preemptor's gang lacks members and its creation window is over.
    MembersMissing { existing: u32, quorum: u32 },
    /// The preemptor's gang is backing off after a timeout.
    GangBackingOff { left: Duration },
    /// Another member of the preemptor's gang preempted a moment ago; the room it frees is
    /// planned for the whole gang.
    SiblingPreempting,
    /// The preemptor's earlier preemption, which muster kept, is still under way on `nodes`
    /// (its victims still exist): a second round elsewhere would evict for nothing.
    PreemptionUnderWay { nodes: Vec<String> },
    /// The preemptor's gang's quorum is more than the cluster could ever hold.
    BeyondCluster(BeyondCluster),
    /// The request's pod UID is another pod's in muster's cache.
    NotThePod { actual: String },
    /// A victim is not on the candidate node as muster's cache has it (`on`: where it is;
    /// `None`: muster does not know the pod).
    VictimNotOnNode { victim: String, on: Option<String> },
    /// A victim's priority (as cached) is not lower than the preemptor's.
    VictimNotLowerPriority { victim: String, priority: i32 },
    /// With its victims gone, the node's room is still held by seats of another gang.
    HeldForGang { gang: GangKey },
    /// Seats on the node hold a host port the preemptor asks for, or the devices its claims
    /// need there (`reason` says which, and whose seat).
    SeatsHold { reason: String },
    /// The preemptor's gang could not reach quorum even with these victims gone.
    GangCannotFollow { fit: u32, quorum: u32 },
    /// A victim belongs to a running gang, and another candidate has no such victim.
    RunningGangVictim { gang: GangKey },
    /// A victim belongs to a gang of equal or higher priority than the preemptor.
    GangNotLowerPriority { gang: GangKey, priority: i32 },
    /// Another candidate disrupts fewer pods.
    DisruptsMore,
    /// The preemptor's gang is confined to one topology domain, and the gang would evict
    /// `victims` pods in all inside this candidate's domain, where another candidate's needs
    /// `best`.
    DomainEvictsMore { victims: usize, best: usize },
}

/// The answer to one preemption request.
#[derive(Debug)]
pub struct PreemptDecision {
    pub kept: Vec<PreemptCandidate>,
    pub dropped: Vec<(String, DropReason)>,
    pub outcome: PreemptOutcome,
    /// The gangs the kept candidate disrupts whole: kept pending, and evicted only once
    /// kube-scheduler commits ([`GangTable::take_disruptions`]).
    pub disruptions: Vec<GangDisruption>,
}

/// A victim's running gang, as far as preemption cares.
struct VictimGang {
    key: GangKey,
    priority: i32,
    mode: DisruptionMode,
}

impl GangTable {
    /// Decides which of `candidates` kube-scheduler may act on to place `pod`. Adds notices
    /// (the preemptor hears what was kept or refused and why; every member of a gang
    /// disrupted whole hears who displaced it).
    pub fn preempt(
        &mut self,
        sent: &PodInfo,
        candidates: Vec<PreemptCandidate>,
        now: Instant,
    ) -> PreemptDecision {
        // The preemptor as the watch has it: a priority or gang in the request counts for
        // nothing (derived).
        let pod = match self.pods.get(&sent.uid) {
            Some(p) if p.info.namespace == sent.namespace && p.info.name == sent.name => {
                p.info.clone()
            }
            found => {
                let why = match found {
                    Some(p) => DropReason::NotThePod {
                        actual: p.info.display_name(),
                    },
                    None => {
                        self.retry_when_seen(&sent.uid);
                        DropReason::NotSeenYet
                    }
                };
                let dropped: Vec<(String, DropReason)> = candidates
                    .into_iter()
                    .map(|c| (c.node, why.clone()))
                    .collect();
                self.tell_preemption(sent, &[], &dropped);
                return PreemptDecision {
                    kept: Vec::new(),
                    dropped,
                    outcome: PreemptOutcome::Refused,
                    disruptions: Vec::new(),
                };
            }
        };
        let pod = &pod;
        let proposed = candidates.len();
        let mut dropped: Vec<(String, DropReason)> = Vec::new();
        let key = pod.gang().map(|m| m.gang.clone());
        if let Some(g) = key.as_ref().and_then(|k| self.gangs.get_mut(k)) {
            g.note_arrivals(now);
        }

        // Rule 0: every victim where the request says, as muster's cache has it.
        let mut survivors = candidates;
        survivors.retain(|c| match self.victim_refused(pod, c) {
            Some(why) => {
                dropped.push((c.node.clone(), why));
                false
            }
            None => true,
        });
        // Rule 0b: while this pod's earlier preemption is under way, it preempts nowhere else
        // (kube-scheduler's own rule, judged on what muster kept; see `table::under_way`).
        if let Some(nodes) = self.preemption_under_way(&pod.uid, now) {
            survivors.retain(|c| {
                let same = nodes.contains(&c.node);
                if !same {
                    dropped.push((
                        c.node.clone(),
                        DropReason::PreemptionUnderWay {
                            nodes: nodes.clone(),
                        },
                    ));
                }
                same
            });
        }
        let mut plans: Vec<(String, Vec<PlannedSeat>)> = Vec::new();
        let mut cannot_judge = None;
        let mut held_out = false;
        {
            // Rule 1: the preemptor's gang must be known.
            let check = self.gang_check(pod, now);
            if let GangCheck::OnlyOwnSeat(seats) = &check {
                survivors.retain(|c| {
                    let own = seats.contains(&c.node);
                    if !own {
                        dropped.push((c.node.clone(), DropReason::SiblingPreempting));
                    }
                    own
                });
            }
            if let GangCheck::CannotJudge(why) = &check {
                for c in survivors.drain(..) {
                    dropped.push((c.node, why.clone()));
                }
                cannot_judge = Some(why.clone());
            }

            // Rule 2: room held for another gang stays held, and so do the host ports and
            // devices seats hold (no-overcommit): evicting for a node they keep evicts for
            // nothing (evict-for-whole).
            survivors.retain(|c| {
                let why = match self.held_for_other_gang(pod, c) {
                    Some(gang) => DropReason::HeldForGang { gang },
                    None => match self.seats_keep_from(pod, &c.node) {
                        Some(reason) => DropReason::SeatsHold { reason },
                        None => return true,
                    },
                };
                held_out = true;
                dropped.push((c.node.clone(), why));
                false
            });

            // Rule 3: the rest of the gang must be able to follow.
            if let GangCheck::Judge(need) = &check {
                let verdicts = self.follow(pod, need, &survivors);
                let mut kept = Vec::new();
                for (c, verdict) in survivors.into_iter().zip(verdicts) {
                    match verdict {
                        Ok((seats, more)) => {
                            plans.push((c.node.clone(), self.planned_seats(need, seats)));
                            let victims = c.victims.len() + more;
                            kept.push((c, victims));
                        }
                        Err((fit, quorum)) => {
                            dropped.push((c.node, DropReason::GangCannotFollow { fit, quorum }))
                        }
                    }
                }
                // A gang confined to one domain evicts inside the domain that needs the fewest
                // evictions in all; kube-scheduler picks among those the cheapest node.
                if need.is_confined_to_a_domain() {
                    let best = kept.iter().map(|(_, v)| *v).min().unwrap_or(0);
                    let (fewest, more): (Vec<_>, Vec<_>) =
                        kept.into_iter().partition(|(_, v)| *v == best);
                    for (c, victims) in more {
                        dropped.push((c.node, DropReason::DomainEvictsMore { victims, best }));
                    }
                    kept = fewest;
                }
                survivors = kept.into_iter().map(|(c, _)| c).collect();
            }
        }

        // Rule 4: spare running gangs whenever another candidate will do.
        let gangs_of = |c: &PreemptCandidate| -> Vec<VictimGang> {
            let mut found: Vec<VictimGang> = Vec::new();
            for uid in &c.victims {
                if let Some(g) = self.running_gang_of(uid) {
                    if !found.iter().any(|f| f.key == g.key) {
                        found.push(g);
                    }
                }
            }
            found
        };
        let (plain, with_gangs): (Vec<_>, Vec<_>) = survivors
            .into_iter()
            .map(|c| {
                let gangs = gangs_of(&c);
                (c, gangs)
            })
            .partition(|(_, gangs)| gangs.is_empty());
        let mut disruptions = Vec::new();
        let kept: Vec<PreemptCandidate> = if !plain.is_empty() {
            for (c, gangs) in with_gangs {
                dropped.push((
                    c.node,
                    DropReason::RunningGangVictim {
                        gang: gangs[0].key.clone(),
                    },
                ));
            }
            plain.into_iter().map(|(c, _)| c).collect()
        } else {
            // Rule 5: only gang victims remain.
            let mut allowed = Vec::new();
            for (c, gangs) in with_gangs {
                match gangs.iter().find(|g| g.priority >= pod.priority) {
                    Some(g) => dropped.push((
                        c.node,
                        DropReason::GangNotLowerPriority {
                            gang: g.key.clone(),
                            priority: g.priority,
                        },
                    )),
                    None => {
                        let (expanded, cost) = self.expand_whole_gangs(&c, &gangs);
                        allowed.push((cost, expanded, gangs));
                    }
                }
            }
            allowed.sort_by(|a, b| (a.0, &a.1.node).cmp(&(b.0, &b.1.node)));
            let mut allowed = allowed.into_iter();
            match allowed.next() {
                None => Vec::new(),
                Some((_, c, gangs)) => {
                    for (_, other, _) in allowed {
                        dropped.push((other.node, DropReason::DisruptsMore));
                    }
                    disruptions = self.disruptions(pod, &c, &gangs);
                    vec![c]
                }
            }
        };

        let outcome = if kept.is_empty() {
            PreemptOutcome::Refused
        } else if kept.len() == proposed && disruptions.is_empty() {
            PreemptOutcome::Kept
        } else {
            PreemptOutcome::Trimmed
        };
        self.tell_preemption(pod, &kept, &dropped);
        if !kept.is_empty() {
            // Every kept candidate: kube-scheduler acts on one of them, by its own order.
            let nodes = kept
                .iter()
                .map(|c| KeptNode {
                    node: c.node.clone(),
                    victims: c.victims.clone(),
                })
                .collect();
            self.preemptions_under_way.record(&pod.uid, nodes, now);
        }
        if let Some(c) = kept.first().filter(|_| !disruptions.is_empty()) {
            self.await_commit(&pod.uid, &c.node, &c.victims, &disruptions, now);
        }
        // What muster cannot judge yet, it judges again when it can: kube-scheduler retries a
        // pod whose preemption failed only on a cluster event, and none may come.
        match cannot_judge {
            Some(DropReason::NotSeenYet) => self.retry_when_seen(&pod.uid),
            Some(DropReason::QuorumUndecided { .. }) => {
                if let Some(g) = key.as_ref().and_then(|k| self.gangs.get_mut(k)) {
                    g.refused_in_window(&pod.uid);
                }
            }
            _ => {}
        }
        if held_out && kept.is_empty() {
            self.refused_for_seats(&pod.uid);
        }
        if let Some(key) = key {
            plans.retain(|(node, _)| kept.iter().any(|c| c.node == *node));
            if !plans.is_empty() {
                self.remember_preemption(pod, key, plans, now);
            }
        }
        PreemptDecision {
            kept,
            dropped,
            outcome,
            disruptions,
        }
    }

    /// Rule 0: why `candidate` cannot be acted on as muster's cache has its victims: one that
    /// muster does not know, that is on another node (or none), or whose priority is not lower
    /// than the preemptor's (kube-scheduler's dry run never proposes such a victim).
    fn victim_refused(&self, pod: &PodInfo, candidate: &PreemptCandidate) -> Option<DropReason> {
        candidate.victims.iter().find_map(|uid| {
            let Some(v) = self.pods.get(uid.as_str()) else {
                return Some(DropReason::VictimNotOnNode {
                    victim: format!("uid {uid}"),
                    on: None,
                });
            };
            let on = v.charged_node();
            if on.is_none_or(|n| **n != *candidate.node) {
                return Some(DropReason::VictimNotOnNode {
                    victim: v.info.display_name(),
                    on: on.map(|n| n.to_string()),
                });
            }
            (v.info.priority >= pod.priority).then(|| DropReason::VictimNotLowerPriority {
                victim: v.info.display_name(),
                priority: v.info.priority,
            })
        })
    }

    /// The nodes of `preemptor`'s earlier kept preemption while it is under way: recent, and
    /// a victim of a kept candidate still on its node as the watch has it (running or
    /// terminating, as kube-scheduler's rule reads a terminating pod on the nominated node).
    /// Every kept candidate counts until the watch shows which one kube-scheduler acted on
    /// (the preemptor nominated to its node, or one of its victims being deleted or gone);
    /// from then on only that one, which stays under way while the room its victims freed
    /// waits for the preemptor (within the record's 30 s).
    fn preemption_under_way(&self, preemptor: &str, now: Instant) -> Option<Vec<String>> {
        let u = self.preemptions_under_way.recent(preemptor, now)?;
        let nominated = self
            .pods
            .get(preemptor)
            .and_then(|p| p.info.nominated_node.clone());
        let acted = |k: &KeptNode| {
            nominated.as_deref() == Some(k.node.as_str())
                || k.victims.iter().any(|uid| {
                    self.pods
                        .get(uid.as_str())
                        .is_none_or(|v| v.info.terminating || v.info.terminal)
                })
        };
        let still_there = |k: &KeptNode| {
            k.victims.iter().any(|uid| {
                self.pods
                    .get(uid.as_str())
                    .and_then(|v| v.charged_node())
                    .is_some_and(|n| **n == *k.node)
            })
        };
        // Its victims gone (deleted without grace, say), the room they freed waits for the
        // preemptor: kube-scheduler's cache may still show them running, and it preempts
        // again elsewhere for a pod whose room is already free. Its own seat there counts
        // as its room.
        let room_waits = |k: &KeptNode| {
            let Some(p) = self.pods.get(preemptor) else {
                return false;
            };
            let Some(i) = self.ledger.position(&k.node) else {
                return false;
            };
            let own = p
                .info
                .gang()
                .and_then(|m| self.gangs.get(&m.gang))
                .and_then(|g| g.seat_of(&p.info.uid))
                .filter(|s| *s.node == *k.node)
                .map(|s| s.requests.clone());
            self.ledger
                .shortfall(i, &p.info.requests, own.as_ref(), None)
                .is_none()
        };
        let acted_on: Vec<&KeptNode> = u.kept.iter().filter(|k| acted(k)).collect();
        let under_way = if acted_on.is_empty() {
            u.kept.iter().any(still_there)
        } else {
            acted_on.iter().any(|k| still_there(k) || room_waits(k))
        };
        let judged = if acted_on.is_empty() {
            u.kept.iter().collect()
        } else {
            acted_on
        };
        under_way.then(|| judged.iter().map(|k| k.node.clone()).collect())
    }

    /// What `candidate`'s victims free on its node, as muster knows them.
    fn freed_by(&self, candidate: &PreemptCandidate) -> Resources {
        let mut freed = Resources::default();
        for uid in &candidate.victims {
            if let Some(v) = self.pods.get(uid.as_str()) {
                if v.charged_node()
                    .is_some_and(|node| **node == *candidate.node)
                {
                    freed.add(&v.info.requests);
                }
            }
        }
        freed
    }

    /// Rule 2: the gang whose seats hold the room `pod` needs on the candidate's node once its
    /// victims are gone, if seats are what stops it (the seats of `pod`'s own gang count as its
    /// own). When something else stops it (muster's ledger and kube-scheduler's disagree for a
    /// moment), kube-scheduler's dry run has judged the node and the candidate is kept.
    fn held_for_other_gang(&self, pod: &PodInfo, candidate: &PreemptCandidate) -> Option<GangKey> {
        let n = self.ledger.position(&candidate.node)?;
        let own = pod.gang().map(|m| &m.gang);
        // Room a preempting gang's hold planned here, where pods of lower priority still run,
        // is not seated (no-overcommit) but is that gang's all the same: its member preempts
        // here in turn, and evicting those pods for another would be evicting for nothing.
        let mut planned = Resources::default();
        let planned_here = self.room_waits.on(&candidate.node, RoomWait::PlannedSeats);
        for key in planned_here.filter(|k| Some(*k) != own) {
            let Some(g) = self.gangs.get(key).filter(|g| g.is_admitted()) else {
                continue;
            };
            for s in g
                .awaiting_room()
                .iter()
                .filter(|s| *s.node == *candidate.node)
            {
                planned.add(&s.requests);
            }
        }
        let reserved = self.ledger.at(n).reserved();
        if reserved.is_zero() && planned.is_zero() {
            return None;
        }
        let on_node = |seat: &crate::model::table::gang::Seat| *seat.node == *candidate.node;
        let mut credit = self.freed_by(candidate);
        if let Some(g) = own.and_then(|k| self.gangs.get(k)) {
            for seat in g.seats().values().filter(|s| on_node(s)) {
                credit.add(&seat.requests);
            }
        }
        // Room enough with its victims gone: nothing is held against it.
        self.ledger
            .shortfall(n, &pod.requests, Some(&credit), Some(&planned))?;
        let mut without_seats = self.freed_by(candidate);
        without_seats.add(reserved);
        if self
            .ledger
            .shortfall(n, &pod.requests, Some(&without_seats), None)
            .is_some()
        {
            return None;
        }
        let holder = self
            .gangs
            .iter()
            .filter(|(k, _)| Some(*k) != own)
            .find(|(_, g)| {
                g.seats().values().any(on_node)
                    || (g.is_admitted()
                        && g.awaiting_room().iter().any(|s| *s.node == *candidate.node))
            });
        holder.map(|(k, _)| k.clone())
    }

    /// What seats of other pods on `node` keep from `pod` whatever is evicted there: a host
    /// port it asks for, or the devices its claims need (its own seat left out).
    fn seats_keep_from(&self, pod: &PodInfo, node: &str) -> Option<String> {
        let n = self.ledger.position(node)?;
        self.ports_held_by_seats(pod, Some(n))
            .remove(&n)
            .or_else(|| {
                self.devices_held_by_seats(pod, |_, h| h.member() == Some(&pod.uid), Some(n))
                    .remove(&n)
            })
    }

    /// The running gang a pod belongs to, if any: a gang with at least one member bound.
    fn running_gang_of(&self, uid: &str) -> Option<VictimGang> {
        let key = &self.pods.get(uid)?.info.gang()?.gang;
        let gang = self.gangs.get(key)?;
        let mut running = false;
        let mut mode = DisruptionMode::Pod;
        for p in self.members_of(gang) {
            running |= p.charged_node().is_some();
            // Members that disagree: the safer mode, the whole gang, wins.
            if let Some(m) = p.info.gang() {
                mode = mode.min(m.disruption);
            }
        }
        running.then(|| VictimGang {
            key: key.clone(),
            priority: gang.spec().priority,
            mode,
        })
    }

    /// The candidate with every member of its `gang`-mode gangs on that node among the
    /// victims, and how many pods it disrupts in all (whole gangs counted whole).
    fn expand_whole_gangs(
        &self,
        c: &PreemptCandidate,
        gangs: &[VictimGang],
    ) -> (PreemptCandidate, usize) {
        let mut expanded = c.clone();
        let mut cost = c.victims.len();
        for g in gangs.iter().filter(|g| g.mode == DisruptionMode::Gang) {
            let Some(gang) = self.gangs.get(&g.key) else {
                continue;
            };
            for p in self.members_of(gang) {
                let Some(node) = p.charged_node() else {
                    continue;
                };
                if expanded.victims.iter().any(|v| **v == *p.info.uid) {
                    continue;
                }
                cost += 1;
                if **node == *c.node {
                    expanded.victims.push(p.info.uid.to_string());
                }
            }
        }
        (expanded, cost)
    }

    /// The gangs the kept candidate disrupts whole, with the members muster must evict itself.
    fn disruptions(
        &self,
        pod: &PodInfo,
        c: &PreemptCandidate,
        gangs: &[VictimGang],
    ) -> Vec<GangDisruption> {
        gangs
            .iter()
            .filter(|g| g.mode == DisruptionMode::Gang)
            .filter_map(|g| {
                let gang = self.gangs.get(&g.key)?;
                let others = self
                    .members_of(gang)
                    .filter(|p| p.charged_node().is_some())
                    .filter(|p| !c.victims.iter().any(|v| **v == *p.info.uid))
                    .map(|p| PodRef::of(&p.info))
                    .collect();
                Some(GangDisruption {
                    gang: g.key.clone(),
                    others,
                    message: messages::gang_disrupted(&g.key, pod, &c.node),
                })
            })
            .collect()
    }

    /// Events: the preemptor hears which victims and why (or why none). The members of a gang
    /// disrupted whole hear it when kube-scheduler commits ([`commit`]).
    fn tell_preemption(
        &mut self,
        pod: &PodInfo,
        kept: &[PreemptCandidate],
        dropped: &[(String, DropReason)],
    ) {
        let mut notices = Vec::new();
        let victims: BTreeMap<&str, Vec<String>> = kept
            .iter()
            .map(|c| {
                let names = c
                    .victims
                    .iter()
                    .map(|uid| match self.pods.get(uid.as_str()) {
                        Some(p) => p.info.display_name(),
                        None => format!("uid {uid}"),
                    })
                    .collect();
                (c.node.as_str(), names)
            })
            .collect();
        notices.push(Notice {
            pod: PodRef::of(pod),
            kind: NoticeKind::Preempting,
            message: messages::preemption(pod, &victims, &DropReason::explain_all(dropped, pod)),
        });
        self.notices.extend(notices);
    }
}
