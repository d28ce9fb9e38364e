//! Rules 1 and 3 of the preempt verb: whether muster knows the preemptor's gang well enough to
//! judge it, and whether the rest of the gang can follow the preemptor onto a candidate.
//!
//! Rule 3 runs the planner's one first-fit loop ([`first_fit_each`]) under every required rule
//! kube-scheduler applies ([`GangRules`]: node selectors and affinity, taints, inter-pod
//! (anti-)affinity, topology spread, gates), in the world after preemption: on the candidate's
//! node its victims are gone; on every other node each pod of lower priority than the
//! preemptor counts as evictable — its room as free (the overlay's credit) and its labels as
//! absent to the rules. That is where kube-scheduler's own dry run starts on each node
//! (`SelectVictimsOnNode` removes every lower-priority pod first), and like it, a member whose
//! required affinity needs a lower-priority pod is judged without that pod (a limit
//! kube-scheduler documents for its preemption too). The nodes each member's own filter call
//! passed are not used: kube-scheduler's filters exclude the full nodes, which are exactly the
//! ones preemption frees.

use std::sync::Arc;
use std::time::Instant;

use rustc_hash::FxHashMap as HashMap;

use super::{DropReason, PreemptCandidate};
use crate::model::inputs::objects::{PodInfo, PodUid};
use crate::model::inputs::resources::Resources;
use crate::model::inputs::topology::GangTopology;
use crate::model::planning::domains::domain_of;
use crate::model::planning::selection::choose;
use crate::model::planning::simulation::{
    admits, first_fit_among, first_fit_each, GangRules, Member, Overlay, Rules,
};
use crate::model::rules::GangPlacement;
use crate::model::table::gang::SeatHolder;
use crate::model::table::preemption_plan::PlannedSeat;
use crate::model::table::GangTable;
use crate::model::verbs::preemption_hold::NOMINATION_WAIT;

/// What rule 3 reads about the preemptor's gang, computed once per request.
pub(in crate::model) struct GangNeed<'a> {
    /// The guesses for members not created yet, one per member, with the task each stands for
    /// (the element-wise maximum of the members, of their task when a task is short).
    templates: Vec<(Option<Arc<str>>, PodInfo)>,
    /// How many members the quorum needs that are not created yet.
    missing: usize,
    /// The other existing members the quorum needs, largest first.
    existing: Vec<&'a PodInfo>,
    quorum: u32,
    /// Members with nodes or confirmed seats already.
    already: u32,
    /// The node label whose one domain must hold the quorum (topology required), if any: the
    /// rest of the gang follows the preemptor only inside the candidate's domain.
    required: Option<Arc<str>>,
}

impl GangNeed<'_> {
    /// The gang's quorum must be inside one domain of a node label (topology required).
    pub(in crate::model) fn is_confined_to_a_domain(&self) -> bool {
        self.required.is_some()
    }
}

/// Whether muster can judge the preemptor's gang now.
pub(in crate::model) enum GangCheck<'a> {
    /// Not a member of a gang below quorum, or its gang already holds seats: rule 3 does not
    /// apply.
    NotNeeded,
    /// muster cannot judge the gang now; the safe answer is no candidate.
    CannotJudge(DropReason),
    /// Another member's preemption is under way and room is held or planned for this one:
    /// only candidates on these nodes (its own seat, held or planned) may be kept.
    OnlyOwnSeat(Vec<String>),
    /// The gang is known: rule 3 applies.
    Judge(Box<GangNeed<'a>>),
}

/// Whether preemption could let a gang below quorum run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::model) enum PreemptionOutlook {
    /// With every lower-priority pod gone, the quorum could be placed.
    MayHelp,
    /// Not even then; `anything_evictable` says whether there was anything to evict at all;
    /// `best_domain`, for a gang confined to one domain, the domain that would hold the most of it.
    Hopeless {
        anything_evictable: bool,
        best_domain: Option<DomainAfterEviction>,
    },
}

/// For a gang confined to one domain of `label` that no domain holds even after evictions: the
/// domain (`value`) that would hold the most members, `fit` of `quorum` (the members already
/// with nodes or confirmed seats included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::model) struct DomainAfterEviction {
    pub label: Arc<str>,
    pub value: Arc<str>,
    pub fit: u32,
    pub quorum: u32,
}

/// Where the other members go when the preemptor takes a candidate, by ledger position.
type Seats = Vec<(SeatHolder, usize)>;

impl GangTable {
    /// Rule 1: whether `pod` is a member of a gang below quorum that muster can judge now.
    pub(in crate::model) fn gang_check<'a>(&'a self, pod: &PodInfo, now: Instant) -> GangCheck<'a> {
        let Some(m) = pod.gang() else {
            return GangCheck::NotNeeded;
        };
        let key = &m.gang;
        // Only the watch tells muster who is in a gang (derived). kube-scheduler calls
        // preempt right after its own filters fail — with every node full, the extender's
        // filter is not even called first — often before muster's watch has delivered the
        // pod: judged then, the gang would be unknown (or some members missing) and every
        // candidate kept, evicting pods for a gang that may never run.
        if self.pods.get(&pod.uid).is_none() {
            return GangCheck::CannotJudge(DropReason::NotSeenYet);
        }
        let Some(gang) = self.gangs.get(key) else {
            return GangCheck::CannotJudge(DropReason::NotSeenYet);
        };
        let facts = self.facts(key);
        // A gang waiting for its PodGroup is placed nowhere (the planner's `PodGroupMissing`),
        // and no quorum of it binds until the PodGroup exists (`GangFacts::quorum_met`):
        // evicting for it now would free room it cannot take, and a hold would keep that room
        // for nothing (evict-for-whole, holds-nothing).
        if let Some((api, _)) = facts.spec.awaited_pod_group() {
            return GangCheck::CannotJudge(DropReason::PodGroupMissing { api });
        }
        // Another member's preemption is under way: room is held for the whole gang while its
        // victims terminate (`preemption_hold`), or its plan waits for kube-scheduler's
        // nomination (and then holds room for this member too). Evicting more now, elsewhere,
        // would be for nothing; kube-scheduler retries this member when the victims go.
        let held = gang
            .preemption_hold()
            .is_some_and(|h| h.preemptor != pod.uid);
        let planned = self.preempt_plans.iter().any(|(uid, plan)| {
            plan.gang == *key
                && *uid != pod.uid
                && now.saturating_duration_since(plan.at) < NOMINATION_WAIT
        });
        // A hold's planned seats whose room pods of lower priority still use are not seats
        // (no-overcommit) but stay the gang's plan while it is admitted, the hold ended or not.
        let awaiting = gang.is_admitted() && !gang.awaiting_room().is_empty();
        if !self.is_placed(key, &facts) && (held || planned || awaiting) {
            // Its own seat's node, held or planned, is where it may still need room freed.
            let me = SeatHolder::Member(pod.uid.clone());
            let mut seats: Vec<String> = gang
                .seat_of(&pod.uid)
                .map(|s| s.node.to_string())
                .into_iter()
                .collect();
            for plan in self.preempt_plans.for_gang(key) {
                for (_, planned) in &plan.by_node {
                    seats.extend(
                        planned
                            .iter()
                            .filter(|s| s.holder == me)
                            .map(|s| s.node.to_string()),
                    );
                }
            }
            let waiting = gang.awaiting_room().iter().filter(|s| s.holder == me);
            seats.extend(waiting.map(|s| s.node.to_string()));
            if seats.is_empty() {
                // A member the hold planned nothing for (delivered after the decision, or whose
                // seat another member took) may preempt where room waits for a member not
                // created yet, or for one that no longer needs it: members are
                // interchangeable, and that room becomes its seat once free.
                let needs = |uid: &PodUid| {
                    gang.seat_of(uid).is_none()
                        && self.pods.get(uid).is_some_and(|p| p.is_pending())
                };
                seats.extend(
                    gang.awaiting_room()
                        .iter()
                        .filter(|s| s.holder.member().is_none_or(|m| !needs(m)))
                        .filter(|s| pod.requests.fits_in(&s.requests))
                        .map(|s| s.node.to_string()),
                );
                // So may it where a sibling's plan, not yet nominated, put such a member: the
                // sibling preempted before the watch delivered this member, so its plan names
                // a member not created yet. Refused here, this member would wait for a
                // retry no cluster event brings while the sibling's victims terminate
                // (kube-scheduler requeues a pod NodeResourcesFit rejected when a pod is
                // deleted, not when one starts terminating): the second eviction came only
                // when the first victim was gone.
                for plan in self.preempt_plans.for_gang(key) {
                    for (_, planned) in &plan.by_node {
                        seats.extend(
                            planned
                                .iter()
                                .filter(|s| s.holder.member().is_none_or(|m| !needs(m)))
                                .filter(|s| pod.requests.fits_in(&s.requests))
                                .map(|s| s.node.to_string()),
                        );
                    }
                }
            }
            return GangCheck::OnlyOwnSeat(seats);
        }
        if self.is_placed(key, &facts) || gang.is_admitted() {
            return GangCheck::NotNeeded;
        }
        // Room freed now would go to others meanwhile: evicting for a gang that may not take
        // seats is evicting for nothing.
        if let Some(left) = gang.backoff_left(now) {
            return GangCheck::CannotJudge(DropReason::GangBackingOff { left });
        }
        // A topology muster cannot keep (members disagree, a Volcano hard tier): the gang is
        // not placed whatever is evicted.
        if matches!(facts.spec.topology, GangTopology::Refused(_)) {
            return GangCheck::CannotJudge(DropReason::GangCannotFollow {
                fit: facts.with_nodes + facts.confirmed_seats,
                quorum: facts.spec.quorum,
            });
        }
        // Nothing evicted lets a quorum beyond the cluster run; judged before any simulation.
        if let Some(beyond) = self.quorum_beyond_cluster(gang, facts.spec.quorum) {
            return GangCheck::CannotJudge(DropReason::BeyondCluster(beyond));
        }
        let in_window = gang.within_creation_window(now, self.config.creation_window);
        if !facts.spec.declared && in_window {
            return GangCheck::CannotJudge(DropReason::QuorumUndecided {
                existing: facts.existing,
            });
        }
        let pending: Vec<_> = self
            .members_to_place(key)
            .into_iter()
            .filter(|p| p.info.uid != pod.uid)
            .collect();
        // The same choice as the planner's: every task below its minimum first.
        let selection = choose(&facts, Some(pod), pending);
        let missing = selection.missing();
        // A gathered gang has no creation window (see `verbs::gather`).
        if missing > 0 && (!in_window || self.is_gathered(gang)) {
            return GangCheck::CannotJudge(DropReason::MembersMissing {
                existing: facts.existing,
                quorum: facts.spec.quorum,
            });
        }
        // The planner's guesses for members not created yet, per task.
        let templates: Vec<(Option<Arc<str>>, PodInfo)> = self
            .not_created_templates(gang, pod, &selection)
            .into_iter()
            .flat_map(|(task, t, n)| std::iter::repeat_n((task, t), n))
            .collect();
        let existing: Vec<&PodInfo> = selection.existing.iter().map(|p| &p.info).collect();
        GangCheck::Judge(Box::new(GangNeed {
            templates,
            missing,
            existing,
            quorum: facts.spec.quorum,
            already: facts.with_nodes + facts.confirmed_seats,
            required: facts.spec.topology.required().cloned(),
        }))
    }

    /// Rule 3 for each candidate: where the other members go with `pod` on the candidate's
    /// node and its victims gone, and how many more lower-priority pods they would evict (of a
    /// gang confined to one domain; 0 otherwise), or `Err((fit, quorum))` when they cannot all be
    /// placed.
    ///
    /// Inside a domain the others take room that needs no eviction first (nodes with no
    /// lower-priority pod, and what is left on the candidate's node), then nodes with
    /// lower-priority pods, each counted with all of them (kube-scheduler's dry run may spare
    /// some: an upper bound). Members first fit stops at are placed in the second pass, which
    /// may use a node with victims where a later free node would have done (greedy, as the
    /// planner's first fit is).
    pub(in crate::model) fn follow(
        &self,
        pod: &PodInfo,
        need: &GangNeed<'_>,
        candidates: &[PreemptCandidate],
    ) -> Vec<Result<(Seats, usize), (u32, u32)>> {
        let judged = judged(pod, need);
        let snapshot = self.snapshot(&judged, |p| p.priority >= pod.priority);
        let mut rules = GangRules {
            placement: GangPlacement::new(&judged, &snapshot),
            allowed: vec![None; judged.len()],
            // Devices evictions would free are not counted: preemption is judged as if they
            // stayed taken (never assumed to fit).
            devices: self.dynamic_resources(&judged, need.missing),
        };
        let members = members(&judged, need);
        let mut overlay = Overlay::with_credit(self.evictable_below(pod.priority));
        let (base, rules_base) = (overlay.checkpoint(), rules.checkpoint());
        // Every candidate frees at most the lower-priority pods of its node, which the credit
        // already counts: if the others cannot be placed even then, no candidate can help, and
        // one simulation answers for all of them.
        let bound = first_fit_each(&self.ledger, &members, &mut overlay, &mut rules).len();
        overlay.rollback(base);
        rules.rollback(rules_base);
        if bound < members.len() {
            let fit = need.already + bound as u32 + 1;
            return candidates.iter().map(|_| Err((fit, need.quorum))).collect();
        }
        // A gang confined to one domain: each candidate's domain, by value, and how many
        // lower-priority pods each node runs.
        let victims_on = match &need.required {
            Some(_) => self.evictable_count_below(pod.priority),
            None => HashMap::default(),
        };
        let domains: HashMap<Arc<str>, Vec<usize>> = match &need.required {
            Some(label) => self
                .domains(
                    label,
                    (&Resources::default(), &Resources::default()),
                    0,
                    None,
                )
                .into_iter()
                .map(|d| (d.value, d.nodes))
                .collect(),
            None => HashMap::default(),
        };
        candidates
            .iter()
            .map(|c| {
                let refuse = |placed: usize| -> Result<(Seats, usize), (u32, u32)> {
                    Err((need.already + placed as u32, need.quorum))
                };
                let Some(n) = self.ledger.position(&c.node) else {
                    return refuse(0);
                };
                // Inside the candidate's domain only; a node in no domain cannot help.
                let domain = match &need.required {
                    Some(label) => {
                        match domain_of(self.ledger.at(n).info(), label)
                            .and_then(|v| domains.get(v))
                        {
                            Some(nodes) => Some(nodes.as_slice()),
                            None => return refuse(0),
                        }
                    }
                    None => None,
                };
                // On the candidate's node only its own victims go.
                let saved = overlay.replace_credit(n, Some(self.freed_by(c)));
                let short = self
                    .ledger
                    .shortfall(n, &pod.requests, overlay.credit(n), None);
                // kube-scheduler's dry run judged the preemptor's own rules on this node; muster
                // places it there so the others' rules see it.
                let verdict = if short.is_some() {
                    refuse(0)
                } else {
                    overlay.take(n, &pod.requests);
                    rules.place(0, self.ledger.at(n).info());
                    let (seats, more) = match domain {
                        Some(nodes) => {
                            // Room that needs no eviction first, then the rest of the domain.
                            let free: Vec<usize> = nodes
                                .iter()
                                .copied()
                                .filter(|&i| i == n || !victims_on.contains_key(&i))
                                .collect();
                            let mut seats = first_fit_among(
                                &self.ledger,
                                &free,
                                &members,
                                &mut overlay,
                                &mut rules,
                            );
                            let evicting = first_fit_among(
                                &self.ledger,
                                nodes,
                                &members[seats.len()..],
                                &mut overlay,
                                &mut rules,
                            );
                            let mut on: Vec<usize> = evicting
                                .iter()
                                .map(|&(_, i)| i)
                                .filter(|&i| i != n)
                                .collect();
                            on.sort_unstable();
                            on.dedup();
                            let more = on.iter().filter_map(|i| victims_on.get(i)).sum();
                            seats.extend(evicting);
                            (seats, more)
                        }
                        None => (
                            first_fit_each(&self.ledger, &members, &mut overlay, &mut rules),
                            0,
                        ),
                    };
                    if seats.len() < members.len() {
                        refuse(seats.len() + 1)
                    } else {
                        Ok((seats, more))
                    }
                };
                overlay.rollback(base);
                rules.rollback(rules_base);
                overlay.replace_credit(n, saved);
                verdict
            })
            .collect()
    }

    /// Whether preemption could help the gang of `pod` reach quorum, with `pod` on one of
    /// `candidates` (ledger positions): could it if every pod of lower priority than `pod`
    /// were gone? `None` when `pod` is not a member of a gang below quorum that muster can
    /// judge now. Filter uses it to tell kube-scheduler that preemption cannot help.
    pub(in crate::model) fn preemption_outlook(
        &self,
        pod: &PodInfo,
        candidates: &[usize],
        now: Instant,
    ) -> Option<PreemptionOutlook> {
        let GangCheck::Judge(need) = self.gang_check(pod, now) else {
            return None;
        };
        let evictable = self.evictable_below(pod.priority);
        let hopeless = PreemptionOutlook::Hopeless {
            anything_evictable: !evictable.is_empty(),
            best_domain: None,
        };
        let judged = judged(pod, &need);
        let snapshot = self.snapshot(&judged, |p| p.priority >= pod.priority);
        let mut rules = GangRules {
            placement: GangPlacement::new(&judged, &snapshot),
            allowed: vec![None; judged.len()],
            // Devices evictions would free are not counted: preemption is judged as if they
            // stayed taken (never assumed to fit).
            devices: self.dynamic_resources(&judged, need.missing),
        };
        let members = members(&judged, &need);
        let evictable_empty = evictable.is_empty();
        let mut overlay = Overlay::with_credit(evictable);
        if let Some(label) = &need.required {
            if evictable_empty {
                // Nothing to evict: the planner's own verdict stands.
                return Some(hopeless);
            }
            // Some one domain must hold the whole gang once its lower-priority pods are gone.
            let (base, rules_base) = (overlay.checkpoint(), rules.checkpoint());
            // The domain that would hold the most members, for the message (explained).
            let mut best: Option<(u32, Arc<str>)> = None;
            let offered: rustc_hash::FxHashSet<usize> = candidates.iter().copied().collect();
            for d in self.domains(
                label,
                (&Resources::default(), &Resources::default()),
                0,
                None,
            ) {
                let placed =
                    first_fit_among(&self.ledger, &d.nodes, &members, &mut overlay, &mut rules)
                        .len();
                let first_here = d.nodes.iter().any(|&i| {
                    offered.contains(&i)
                        && admits(&self.ledger, &rules, &overlay, 0, pod, i).is_ok()
                });
                overlay.rollback(base);
                rules.rollback(rules_base);
                if placed == members.len() && first_here {
                    return Some(PreemptionOutlook::MayHelp);
                }
                let fit = need.already + placed as u32 + u32::from(first_here);
                if best.as_ref().is_none_or(|(b, _)| fit > *b) {
                    best = Some((fit, d.value.clone()));
                }
            }
            return Some(PreemptionOutlook::Hopeless {
                anything_evictable: true,
                best_domain: best.map(|(fit, value)| DomainAfterEviction {
                    label: label.clone(),
                    value,
                    fit: fit.min(need.quorum),
                    quorum: need.quorum,
                }),
            });
        }
        let placed = first_fit_each(&self.ledger, &members, &mut overlay, &mut rules).len();
        if placed < members.len() {
            return Some(hopeless);
        }
        let first_fits = candidates
            .iter()
            .any(|&i| admits(&self.ledger, &rules, &overlay, 0, pod, i).is_ok());
        Some(if first_fits {
            PreemptionOutlook::MayHelp
        } else {
            hopeless
        })
    }

    /// Per node position, the requests of the pods of lower priority than `priority`: the
    /// room a preemption may free there.
    fn evictable_below(&self, priority: i32) -> HashMap<usize, Resources> {
        let mut evictable: HashMap<usize, Resources> = HashMap::default();
        // One pass over the pods, no lookups by UID: this scan is most of a decision's cost.
        for p in self.pods.entries() {
            if p.info.priority >= priority {
                continue;
            }
            if let Some(i) = p.charged_node().and_then(|n| self.ledger.position(n)) {
                evictable.entry(i).or_default().add(&p.info.requests);
            }
        }
        evictable
    }

    /// Per node position, how many pods of lower priority than `priority` run there.
    fn evictable_count_below(&self, priority: i32) -> HashMap<usize, usize> {
        let mut count: HashMap<usize, usize> = HashMap::default();
        for p in self.pods.entries() {
            if p.info.priority >= priority {
                continue;
            }
            if let Some(i) = p.charged_node().and_then(|n| self.ledger.position(n)) {
                *count.entry(i).or_default() += 1;
            }
        }
        count
    }

    /// The seats of a kept candidate's plan, with their nodes and requests, for the hold.
    pub(in crate::model) fn planned_seats(
        &self,
        need: &GangNeed<'_>,
        seats: Seats,
    ) -> Vec<PlannedSeat> {
        seats
            .into_iter()
            .filter_map(|(holder, position)| {
                let requests = match &holder {
                    SeatHolder::Member(uid) => self.pods.get(uid)?.info.requests.clone(),
                    SeatHolder::NotCreatedYet { n, .. } => {
                        need.templates.get(*n as usize)?.1.requests.clone()
                    }
                };
                Some(PlannedSeat {
                    holder,
                    node: self.ledger.at(position).name().clone(),
                    requests,
                })
            })
            .collect()
    }
}

/// The members the rules judge: the preemptor (0), the copies for members not created yet,
/// then the members that exist.
fn judged<'a>(pod: &'a PodInfo, need: &'a GangNeed<'a>) -> Vec<&'a PodInfo> {
    let mut judged = vec![pod];
    judged.extend(need.templates.iter().map(|(_, t)| t));
    judged.extend(need.existing.iter().copied());
    judged
}

/// The members to place (all but the preemptor), as the seats they would hold.
fn members<'p>(judged: &[&'p PodInfo], need: &GangNeed<'_>) -> Vec<Member<'p, SeatHolder>> {
    (1..judged.len())
        .map(|index| Member {
            holder: if index <= need.missing {
                SeatHolder::NotCreatedYet {
                    n: index as u32 - 1,
                    task: need.templates[index - 1].0.clone(),
                }
            } else {
                SeatHolder::Member(judged[index].uid.clone())
            },
            index,
            pod: judged[index],
        })
        .collect()
}
