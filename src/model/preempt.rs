//! The preempt verb: which of the candidates kube-scheduler's own dry run proposed (a node and
//! the victims to evict there, for one pod) muster lets it act on.
//!
//! kube-scheduler's dry run knows nothing of gangs. It frees one node for one pod, so for a
//! gang it may evict pods for a member whose gang can never run (evictions for nothing), and
//! it happily picks one member of a running gang as a victim (half a gang left, useless).
//! The rules here, in order:
//! 1. A member of a gang below quorum as preemptor: a candidate is kept only if, with its
//!    victims gone and every lower-priority pod elsewhere counted as evictable, the rest of
//!    the gang's quorum can also be placed (the same first-fit simulation as the planner).
//! 2. Whenever a kept candidate has no victim in a running gang, candidates with such victims
//!    are dropped.
//! 3. Only candidates with gang victims left: a gang of equal or higher priority than the
//!    preemptor is never disrupted; of the rest, one candidate is kept (the one disrupting the
//!    fewest pods). A gang in `gang` disruption mode loses every member: its members on that
//!    node join the victims, the others are listed for eviction by muster itself. A gang in
//!    `pod` mode loses only the proposed victims.
//!
//! The answer replaces kube-scheduler's candidates; no candidate means nothing is evicted.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;

use super::membership::{DisruptionMode, GangKey};
use super::messages;
use super::notice::{Notice, NoticeKind, PodRef};
use super::objects::{node_admits, PodInfo};
use super::resources::Resources;
use super::selection::choose;
use super::simulation::Overlay;
use super::table::GangTable;

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
    /// The preemptor's gang could not reach quorum even with these victims gone.
    GangCannotFollow { fit: u32, quorum: u32 },
    /// A victim belongs to a running gang, and another candidate has no such victim.
    RunningGangVictim { gang: GangKey },
    /// A victim belongs to a gang of equal or higher priority than the preemptor.
    GangNotLowerPriority { gang: GangKey, priority: i32 },
    /// Another candidate disrupts fewer pods.
    DisruptsMore,
}

/// A running gang the kept candidate disrupts whole: muster evicts `others` (the members not
/// among the candidate's victims) through the Eviction API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GangDisruption {
    pub gang: GangKey,
    pub others: Vec<PodRef>,
    pub message: String,
}

/// The answer to one preemption request.
#[derive(Debug)]
pub struct PreemptDecision {
    pub kept: Vec<PreemptCandidate>,
    pub dropped: Vec<(String, DropReason)>,
    pub outcome: PreemptOutcome,
    pub disruptions: Vec<GangDisruption>,
}

/// Whether preemption could let a gang below quorum run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PreemptionOutlook {
    /// With every lower-priority pod gone, the quorum could be placed.
    MayHelp,
    /// Not even then; `anything_evictable` says whether there was anything to evict at all.
    Hopeless { anything_evictable: bool },
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
    pub fn preempt(&mut self, pod: &PodInfo, candidates: Vec<PreemptCandidate>) -> PreemptDecision {
        let proposed = candidates.len();
        let mut dropped: Vec<(String, DropReason)> = Vec::new();

        // Rule 1: the preemptor's gang must be able to follow.
        let mut survivors = candidates;
        if let Some(check) = self.quorum_check(pod) {
            // Every candidate frees at most the lower-priority pods of its node, which the
            // bound already counts as evictable: if the other members cannot be placed even
            // then, no candidate can help, and one simulation answers for all of them.
            let mut overlay = Overlay::default();
            let bound = place_with_credit(&self.ledger, &check.others(), &mut overlay, |i| {
                check.evictable.get(&i)
            });
            let hopeless = (bound < check.missing + check.existing.len()).then_some(bound);
            let mut kept = Vec::new();
            for c in survivors {
                let verdict = match hopeless {
                    Some(placed) => Err((check.already + placed as u32 + 1, check.quorum)),
                    None => self.gang_follows(pod, &check, &c),
                };
                match verdict {
                    Ok(()) => kept.push(c),
                    Err((fit, quorum)) => {
                        dropped.push((c.node.clone(), DropReason::GangCannotFollow { fit, quorum }))
                    }
                }
            }
            survivors = kept;
        }

        // Rule 2: spare running gangs whenever another candidate will do.
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
            // Rule 3: only gang victims remain.
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
        self.tell_preemption(pod, &kept, &dropped, &disruptions);
        PreemptDecision {
            kept,
            dropped,
            outcome,
            disruptions,
        }
    }

    /// Whether preemption could help the gang of `pod` reach quorum, with `pod` on one of
    /// `candidates` (ledger positions): could it if every pod of lower priority than `pod`
    /// were gone? `None` when `pod` is not a member of a gang below quorum. Filter uses it to
    /// tell kube-scheduler that preemption cannot help.
    pub(super) fn preemption_outlook(
        &self,
        pod: &PodInfo,
        candidates: &[usize],
    ) -> Option<PreemptionOutlook> {
        let check = self.quorum_check(pod)?;
        let hopeless = PreemptionOutlook::Hopeless {
            anything_evictable: !check.evictable.is_empty(),
        };
        let mut overlay = Overlay::default();
        let placed = place_with_credit(&self.ledger, &check.others(), &mut overlay, |i| {
            check.evictable.get(&i)
        });
        if placed < check.missing + check.existing.len() {
            return Some(hopeless);
        }
        let first_fits = candidates.iter().any(|&i| {
            node_admits(self.ledger.at(i).info(), pod)
                && self
                    .ledger
                    .shortfall(i, &pod.requests, check.evictable.get(&i), overlay.get(i))
                    .is_none()
        });
        Some(if first_fits {
            PreemptionOutlook::MayHelp
        } else {
            hopeless
        })
    }

    /// What rule 1 needs, computed once per request: the other members the gang's quorum
    /// still needs (members not created yet as the element-wise maximum of the members, as
    /// the planner simulates them), and per node the
    /// requests of pods of lower priority than `pod`.
    fn quorum_check<'a>(&'a self, pod: &'a PodInfo) -> Option<QuorumCheck<'a>> {
        let key = &pod.gang()?.gang;
        let facts = self.facts(key);
        let gang = self.gangs.get(key)?;
        if self.is_placed(key, &facts) || gang.is_admitted() {
            return None;
        }
        let pending: Vec<_> = self
            .pending_members(key)
            .into_iter()
            .filter(|p| p.info.uid != pod.uid)
            .collect();
        let selection = choose(&facts, Some(pod), pending);
        let missing = selection.missing();
        // The planner's guesses for members not created yet, per task.
        let templates: Vec<PodInfo> = self
            .not_created_templates(gang, pod, &selection)
            .into_iter()
            .flat_map(|(_, t, n)| std::iter::repeat_n(t, n))
            .collect();
        let existing: Vec<&PodInfo> = selection.existing.iter().map(|p| &p.info).collect();
        let mut evictable: HashMap<usize, Resources> = HashMap::default();
        // One pass over the pods, no lookups by UID: this scan is most of a decision's cost.
        for p in self.pods.entries() {
            if p.info.priority >= pod.priority {
                continue;
            }
            if let Some(i) = p.charged_node().and_then(|n| self.ledger.position(n)) {
                evictable.entry(i).or_default().add(&p.info.requests);
            }
        }
        Some(QuorumCheck {
            templates,
            missing,
            existing,
            evictable,
            quorum: facts.spec.quorum,
            already: facts.with_nodes + facts.confirmed_seats,
        })
    }

    /// Rule 1 for one candidate: `pod` on the candidate's node with its victims gone, then
    /// the other members first-fit, with lower-priority pods evictable everywhere else.
    /// `Err((fit, quorum))` when the gang cannot follow.
    fn gang_follows(
        &self,
        pod: &PodInfo,
        check: &QuorumCheck<'_>,
        c: &PreemptCandidate,
    ) -> Result<(), (u32, u32)> {
        let refuse = |placed: usize| Err((check.already + placed as u32, check.quorum));
        let Some(n) = self.ledger.position(&c.node) else {
            return refuse(0);
        };
        let mut freed = Resources::default();
        for uid in &c.victims {
            if let Some(v) = self.pods.get(uid.as_str()) {
                if v.charged_node().is_some_and(|node| **node == *c.node) {
                    freed.add(&v.info.requests);
                }
            }
        }
        let credit = |i: usize| {
            if i == n {
                Some(&freed)
            } else {
                check.evictable.get(&i)
            }
        };
        if self
            .ledger
            .shortfall(n, &pod.requests, credit(n), None)
            .is_some()
        {
            return refuse(0);
        }
        let mut overlay = Overlay::default();
        overlay.take(n, &pod.requests);
        let placed = place_with_credit(&self.ledger, &check.others(), &mut overlay, credit);
        if placed < check.missing + check.existing.len() {
            return refuse(placed + 1);
        }
        Ok(())
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

    /// Events: the preemptor hears which victims and why (or why none); every member of a
    /// gang disrupted whole hears who displaced it.
    fn tell_preemption(
        &mut self,
        pod: &PodInfo,
        kept: &[PreemptCandidate],
        dropped: &[(String, DropReason)],
        disruptions: &[GangDisruption],
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
            message: messages::preemption(pod, &victims, dropped),
        });
        for d in disruptions {
            let Some(gang) = self.gangs.get(&d.gang) else {
                continue;
            };
            for p in self.members_of(gang).filter(|p| p.charged_node().is_some()) {
                notices.push(Notice {
                    pod: PodRef::of(&p.info),
                    kind: NoticeKind::Disrupted,
                    message: d.message.clone(),
                });
            }
        }
        self.notices.extend(notices);
    }
}

/// What rule 1 reads, computed once per request.
struct QuorumCheck<'a> {
    /// The guesses for members not created yet (the element-wise maximum of the members, of
    /// their task when a task is short), one per member.
    templates: Vec<PodInfo>,
    /// How many members the quorum needs that are not created yet.
    missing: usize,
    /// The other existing members the quorum needs, largest first.
    existing: Vec<&'a PodInfo>,
    /// Per node position, the requests of pods of lower priority than the preemptor.
    evictable: HashMap<usize, Resources>,
    quorum: u32,
    /// Members with nodes or confirmed seats already.
    already: u32,
}

/// First-fit of `members` where each node's room is counted with `credit(node)` (room that
/// evictions would free) added back; returns how many were placed before one fit nowhere.
/// The planner's loop without credit is `first_fit_each`; this one differs only in the credit.
fn place_with_credit<'r>(
    ledger: &super::ledger::NodeLedger,
    members: &[&PodInfo],
    overlay: &mut Overlay,
    credit: impl Fn(usize) -> Option<&'r Resources>,
) -> usize {
    for (placed, p) in members.iter().enumerate() {
        let found = ledger.iter().find_map(|(i, e)| {
            (node_admits(e.info(), p)
                && ledger
                    .shortfall(i, &p.requests, credit(i), overlay.get(i))
                    .is_none())
            .then_some(i)
        });
        match found {
            Some(i) => overlay.take(i, &p.requests),
            None => return placed,
        }
    }
    members.len()
}

impl QuorumCheck<'_> {
    /// The other members the quorum needs: the copies for members not created yet, then the
    /// existing ones, largest first.
    fn others(&self) -> Vec<&PodInfo> {
        self.templates
            .iter()
            .chain(self.existing.iter().copied())
            .collect()
    }
}
