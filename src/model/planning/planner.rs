//! The planner: whether a gang can reach quorum now, simulated member by member and node by
//! node (never as an aggregate sum, which is blind to fragmentation), and where each member
//! would go.
//!
//! The simulation of the gang being decided applies every required rule kube-scheduler applies
//! to its members ([`GangRules`]: cordons, taints, node selectors and affinity, inter-pod
//! (anti-)affinity against the pods on nodes *and* the members placed so far, topology spread,
//! scheduling gates, and the nodes each member's own filter call excluded). The one
//! [`ClusterSnapshot`] it reads is built per whole-gang simulation only, from the pods the
//! members' rules can see: every pod on a node when a member has affinity, anti-affinity or
//! spread terms of its own, otherwise only the pods with anti-affinity (kept in an index), so
//! a gang without such terms never walks the pod list.
//!
//! Competing gangs ahead are simulated with [`StaticRules`] (resources and the rules that need
//! no other pod; and the devices their claims need when the gang decided has claims:
//! [`AheadRules`]), not with the full rules: a full simulation per gang ahead would multiply the
//! snapshot's cost by up to `max_gangs_ahead` on every member's filter call, and a gang ahead
//! whose own latest full simulation failed on a rule is skipped (`Gang::blocked_by_rule`), so
//! a gang that cannot run never makes room wait for it.

use std::cmp::Reverse;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::quorum_bound::BeyondCluster;
use super::selection::{choose, task_of, Selection};
use super::simulation::{
    admits, diagnose, first_fit_among, first_fit_each, GangRules, Member, Overlay, Rules,
    StaticRules, CHECK_BUDGET,
};
use crate::model::inputs::membership::GangKey;
use crate::model::inputs::objects::{NodeInfo, NodeName, PodInfo, PodUid};
use crate::model::inputs::pod_group::PodGroupApi;
use crate::model::inputs::resources::Resources;
use crate::model::inputs::terms::NodeSelector;
use crate::model::inputs::topology::{GangTopology, Topology, TopologyRefusal};
use crate::model::messages;
use crate::model::planning::domains::{domain_of, smallest_of};
use crate::model::rules::dynamic_resources::{DynamicResources, Outside, Took};
use crate::model::rules::{shortfall_message, ClusterSnapshot, GangPlacement, Reason};
use crate::model::table::evidence::Refused;
use crate::model::table::gang::{Gang, SeatHolder};
use crate::model::table::pods::{has_host_ports, PodEntry};
use crate::model::table::{GangFacts, GangTable};

/// Outcome of planning a gang's placement.
#[derive(Debug)]
pub(in crate::model) enum GangPlan {
    /// `first_node`: the candidate node the requesting member takes (of the candidates left
    /// for it once the others are placed, the tightest fit, [`NodeLedger::tightest_where`]; with
    /// preferred topology levels, the first in the order the others filled); `seats`: where the
    /// other members needed for quorum go (members not created yet included, assumed to
    /// request `not_created` of their task).
    ///
    /// [`NodeLedger::tightest_where`]: crate::model::table::ledger::NodeLedger::tightest_where
    Fits {
        first_node: usize,
        seats: Vec<(SeatHolder, usize)>,
        not_created: Vec<(Option<Arc<str>>, Resources)>,
    },
    /// The gang cannot be placed now; it holds nothing.
    DoesNotFit(GangShortfall),
}

/// Why a gang cannot be placed now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::model) enum GangShortfall {
    /// At most `fit` of `quorum` members can have nodes at the same time; `missing` of them
    /// are not created yet (still within the creation window). `rule`: the rule that stopped
    /// the simulation, with its numbers, when it was not room alone. `task`: the task below
    /// its minimum the simulation stopped at, if it has one.
    Room {
        fit: u32,
        quorum: u32,
        missing: u32,
        rule: Option<String>,
        task: Option<TaskFit>,
    },
    /// Members are missing and the creation window is over: nothing is held for them.
    MembersMissing { existing: u32, quorum: u32 },
    /// Members of a task below its minimum are missing and the creation window is over.
    TaskMembersMissing {
        task: Arc<str>,
        existing: u32,
        min: u32,
    },
    /// Members (of `task`, when a task is below its minimum) are missing from a gathered gang,
    /// which holds nothing for members not created yet, whatever the creation window.
    GatheredMembersMissing {
        task: Option<Arc<str>>,
        existing: u32,
        needed: u32,
    },
    /// No member declares the count, and members may still be appearing: the quorum is not
    /// decided yet.
    QuorumUndecided { existing: u32 },
    /// Members name a PodGroup (of a served API) that does not exist (yet).
    PodGroupMissing { api: PodGroupApi },
    /// The quorum is more than the cluster could ever hold: refused before any simulation.
    BeyondCluster(BeyondCluster),
    /// kube-scheduler refused a member in a cycle that never reached muster (a filter muster
    /// does not simulate): its verdict stands until that member or a node changes.
    RefusedByScheduler(Refused),
    /// The quorum must be inside one domain of `label` and no domain holds it: at most `fit`
    /// of `quorum` fit in the best one (`best`), of `domains`.
    Domain {
        label: Arc<str>,
        best: Option<Arc<str>>,
        fit: u32,
        quorum: u32,
        missing: u32,
        domains: usize,
    },
    /// The gang's topology cannot be kept as asked (see [`TopologyRefusal`]).
    Topology(TopologyRefusal),
}

/// How many members of a task can have nodes at once, of its minimum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::model) struct TaskFit {
    pub task: Arc<str>,
    pub fit: u32,
    pub min: u32,
}

impl GangShortfall {
    /// Why the gang `key` cannot be placed now, as its members are told (it holds nothing
    /// meanwhile).
    pub fn message(&self, key: &GangKey, window: Duration) -> String {
        match self {
            GangShortfall::Room {
                fit,
                quorum,
                missing: 0,
                rule,
                task,
            } => messages::room_short(
                key,
                *fit,
                *quorum,
                rule.as_deref(),
                task.as_ref().map(|t| (&*t.task, t.fit, t.min)),
            ),
            GangShortfall::Room {
                fit,
                quorum,
                missing,
                rule,
                task: _,
            } => messages::room_short_of_members_to_come(
                key,
                *fit,
                *quorum,
                *missing,
                rule.as_deref(),
            ),
            GangShortfall::MembersMissing { existing, quorum } => {
                messages::members_missing(key, *existing, *quorum, window)
            }
            GangShortfall::TaskMembersMissing {
                task,
                existing,
                min,
            } => messages::task_members_missing(key, task, *existing, *min, window),
            GangShortfall::GatheredMembersMissing {
                task,
                existing,
                needed,
            } => messages::gathered_members_missing(key, task.as_deref(), *existing, *needed),
            GangShortfall::PodGroupMissing { api } => messages::pod_group_missing(key, *api),
            GangShortfall::BeyondCluster(b) => {
                messages::beyond_cluster(key, b.quorum, b.nodes, b.at_most)
            }
            GangShortfall::QuorumUndecided { existing } => {
                messages::quorum_undecided(key, *existing, window)
            }
            GangShortfall::RefusedByScheduler(r) => {
                messages::refused_by_scheduler(key, &r.pod, &r.message)
            }
            GangShortfall::Domain {
                label,
                best,
                fit,
                quorum,
                missing: _,
                domains,
            } => messages::domain_short(key, label, *quorum, *fit, best.as_deref(), *domains),
            GangShortfall::Topology(TopologyRefusal::MembersDisagree(values)) => {
                messages::topology_disagreement(key, values)
            }
            GangShortfall::Topology(TopologyRefusal::VolcanoHyperNodes { tier }) => {
                messages::volcano_hypernodes(key, tier)
            }
        }
    }

    pub fn missing(&self) -> u32 {
        match self {
            GangShortfall::Room { missing, .. } | GangShortfall::Domain { missing, .. } => *missing,
            GangShortfall::MembersMissing { existing, quorum } => quorum.saturating_sub(*existing),
            GangShortfall::TaskMembersMissing { existing, min, .. } => {
                min.saturating_sub(*existing)
            }
            GangShortfall::GatheredMembersMissing {
                existing, needed, ..
            } => needed.saturating_sub(*existing),
            GangShortfall::QuorumUndecided { .. }
            | GangShortfall::PodGroupMissing { .. }
            | GangShortfall::BeyondCluster(_)
            | GangShortfall::RefusedByScheduler(_) => 0,
            GangShortfall::Topology(_) => 0,
        }
    }

    /// A rule other than room (or a member or PodGroup that is not there) stopped the gang.
    pub fn blocked_by_rule(&self) -> bool {
        !matches!(self, GangShortfall::Room { rule: None, .. })
    }
}

/// Whether a waiting gang competes for room with the gang being planned: it holds nothing,
/// may take seats, and kube-scheduler tried one of its members recently.
fn competes(gang: &Gang, now: Instant, active_window: std::time::Duration) -> bool {
    !gang.is_placed_flag()
        && !gang.is_admitted()
        && gang.backoff_left(now).is_none()
        && gang
            .last_attempt()
            .is_some_and(|t| now.saturating_duration_since(t) <= active_window)
}

impl GangTable {
    /// Plans the gang of `pod` with `pod` on one of `candidates` (ledger positions) and every
    /// other member its quorum still needs somewhere, after the competing gangs ahead of it.
    pub(in crate::model) fn plan(
        &self,
        key: &GangKey,
        pod: &PodInfo,
        candidates: &[usize],
        now: Instant,
    ) -> GangPlan {
        let facts = self.facts(key);
        let Some(gang) = self.gangs.get(key) else {
            return GangPlan::DoesNotFit(GangShortfall::QuorumUndecided { existing: 0 });
        };
        if let Some((api, _)) = facts.spec.awaited_pod_group() {
            return GangPlan::DoesNotFit(GangShortfall::PodGroupMissing { api });
        }
        if let GangTopology::Refused(why) = &facts.spec.topology {
            return GangPlan::DoesNotFit(GangShortfall::Topology(why.clone()));
        }
        // kube-scheduler's own verdict on a member, for what muster does not simulate
        // (holds-nothing).
        if let Some(refused) = self.refused_member(key, &pod.uid) {
            return GangPlan::DoesNotFit(GangShortfall::RefusedByScheduler(refused));
        }
        // Before anything is simulated: a quorum no placement could meet (fail-safe: the
        // simulation of 100,000 members held the table's lock for seconds).
        if let Some(beyond) = self.quorum_beyond_cluster(gang, facts.spec.quorum) {
            return GangPlan::DoesNotFit(GangShortfall::BeyondCluster(beyond));
        }
        let in_window = gang.within_creation_window(now, self.config.creation_window);
        if !facts.spec.declared && in_window {
            return GangPlan::DoesNotFit(GangShortfall::QuorumUndecided {
                existing: facts.existing,
            });
        }
        let others: Vec<&PodEntry> = self
            .members_to_place(key)
            .into_iter()
            .filter(|p| p.info.uid != pod.uid)
            .collect();
        let selection = choose(&facts, Some(pod), others);
        let missing = selection.missing();
        let short = || {
            selection.not_created.iter().find_map(|(t, _)| {
                let t = t.as_ref()?;
                facts.tasks.iter().find(|f| f.task == *t)
            })
        };
        // A gathered gang (marked by the admission policy) has no creation window: it is let
        // through its gate only once every member its quorum needs exists, and it holds no
        // room for a member that does not (holds-nothing; see `verbs::gather`).
        if missing > 0 && self.is_gathered(gang) {
            return GangPlan::DoesNotFit(GangShortfall::GatheredMembersMissing {
                task: short().map(|t| t.task.clone()),
                existing: short().map_or(facts.existing, |t| t.existing),
                needed: short().map_or(facts.spec.quorum, |t| t.min),
            });
        }
        if missing > 0 && !in_window {
            return GangPlan::DoesNotFit(match short() {
                Some(t) => GangShortfall::TaskMembersMissing {
                    task: t.task.clone(),
                    existing: t.existing,
                    min: t.min,
                },
                None => GangShortfall::MembersMissing {
                    existing: facts.existing,
                    quorum: facts.spec.quorum,
                },
            });
        }
        // Members not created yet are simulated as the element-wise maximum of the members
        // that exist (of their task, for a task below its minimum), so the first bind reserves
        // room for the whole quorum while a controller is still creating pods (refusing until
        // every member existed cost each early member a rejected cycle and a back-off). A guess
        // too small is bounded by the creation window; one too large only delays the gang
        // until the real members exist.
        let templates = self.not_created_templates(gang, pod, &selection);

        // The members the rules judge: this pod (0), the copies, then the members that exist;
        // and who holds the seat of each (from 1).
        let mut judged: Vec<&PodInfo> = vec![pod];
        let mut holders: Vec<SeatHolder> = Vec::new();
        for (task, template, n) in &templates {
            for _ in 0..*n {
                judged.push(template);
                holders.push(SeatHolder::NotCreatedYet {
                    n: holders.len() as u32,
                    task: task.clone(),
                });
            }
        }
        for p in &selection.existing {
            judged.push(&p.info);
            holders.push(SeatHolder::Member(p.info.uid.clone()));
        }
        let need = judged.len();
        let snapshot = self.snapshot(&judged, |_| true);
        let mut rules = GangRules {
            placement: GangPlacement::new(&judged, &snapshot),
            allowed: judged
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    (i > missing)
                        .then(|| self.evidence.passed(&p.uid, now, self.config.evidence_age))?
                })
                .collect(),
            devices: self.dynamic_resources(&judged, missing),
        };
        let chosen: Vec<Member<SeatHolder>> = holders
            .iter()
            .enumerate()
            .map(|(i, holder)| Member {
                holder: holder.clone(),
                index: i + 1,
                pod: judged[i + 1],
            })
            .collect();
        // The task each judged member counts for, for telling which task is short.
        let task_at = |index: usize| match index.checked_sub(1).map(|i| &holders[i]) {
            Some(SeatHolder::NotCreatedYet { task, .. }) => task.as_deref(),
            _ => task_of(judged[index]),
        };
        let mut overlay = Overlay::default();
        self.reserve_gangs_ahead(key, &mut overlay, rules.devices.as_mut(), now);
        let base = overlay.checkpoint();
        let rules_base = rules.checkpoint();
        let fits = |first_node: usize, seats: Vec<(SeatHolder, usize)>| GangPlan::Fits {
            first_node,
            seats,
            not_created: templates
                .iter()
                .map(|(task, t, _)| (task.clone(), t.requests.clone()))
                .collect(),
        };
        let first_fits = |rules: &GangRules, overlay: &Overlay, i: usize| {
            admits(&self.ledger, rules, overlay, 0, pod, i).is_ok()
        };
        // The tightest of `options` left for this pod: judged tightest first, only until one
        // passes (a member's check may allocate its devices on each node).
        let tightest_left = |rules: &GangRules, overlay: &Overlay, options: &[usize]| {
            self.ledger
                .tightest_where(&pod.requests, options.iter().copied(), |i| {
                    first_fits(rules, overlay, i)
                })
        };

        // Topology: the same simulation, one domain of `label` at a time (see
        // `planning::domains`); `Ok` a plan (or the budget ran out), `Err` why none holds it.
        let largest = self.largest_requests(gang, pod);
        let smallest = smallest_of(judged.iter().map(|p| &p.requests));
        let mut in_domains = |label: &Arc<str>,
                              only: Option<Arc<str>>|
         -> Result<GangPlan, GangShortfall> {
            let domains = self.domains(label, (&largest, &smallest), need, only.as_deref());
            let mut best: Option<(usize, Arc<str>)> = None;
            for d in &domains {
                // Room for fewer members than the quorum needs, even of the smallest: not
                // simulated; what room holds is what the message says it fits.
                let at_most = usize::try_from(d.at_most).unwrap_or(0);
                if at_most < need {
                    if best.as_ref().is_none_or(|(b, _)| at_most > *b) {
                        best = Some((at_most, d.value.clone()));
                    }
                    continue;
                }
                let mine: Vec<usize> = candidates
                    .iter()
                    .copied()
                    .filter(|&i| d.contains(i) && first_fits(&rules, &overlay, i))
                    .collect();
                if mine.is_empty() {
                    continue;
                }
                let seats =
                    first_fit_among(&self.ledger, &d.nodes, &chosen, &mut overlay, &mut rules);
                let mut got = seats.len();
                if seats.len() == chosen.len() {
                    if let Some(first) = tightest_left(&rules, &overlay, &mine) {
                        return Ok(fits(first, seats));
                    }
                } else {
                    got += usize::from(mine.iter().any(|&i| first_fits(&rules, &overlay, i)));
                }
                overlay.rollback(base);
                rules.rollback(rules_base);
                for &first in mine.iter().take(self.config.max_first_node_attempts) {
                    if overlay.exhausted() {
                        break;
                    }
                    overlay.take(first, &pod.requests);
                    rules.place(0, self.ledger.at(first).info());
                    let seats =
                        first_fit_among(&self.ledger, &d.nodes, &chosen, &mut overlay, &mut rules);
                    if seats.len() == chosen.len() {
                        return Ok(fits(first, seats));
                    }
                    got = got.max(seats.len() + 1);
                    overlay.rollback(base);
                    rules.rollback(rules_base);
                }
                if best.as_ref().is_none_or(|(b, _)| got > *b) {
                    best = Some((got, d.value.clone()));
                }
                if overlay.exhausted() {
                    let placed = best.map_or(0, |(b, _)| b);
                    return Ok(GangPlan::DoesNotFit(
                        self.out_of_budget(&facts, placed, need, missing),
                    ));
                }
            }
            let already = facts.with_nodes + facts.confirmed_seats;
            Err(GangShortfall::Domain {
                label: label.clone(),
                fit: already + best.as_ref().map_or(0, |(b, _)| *b as u32),
                best: best.map(|(_, v)| v),
                quorum: facts.spec.quorum,
                missing: missing as u32,
                domains: domains.len(),
            })
        };
        // The nodes first-fit walks, when not the ledger's order.
        let order: Option<Vec<usize>> = match facts.spec.topology.constraint().map(|c| &c.topology)
        {
            Some(Topology::Required(label)) => {
                let only = self.gang_domain(key, label);
                return in_domains(label, only).unwrap_or_else(GangPlan::DoesNotFit);
            }
            Some(Topology::Preferred(levels)) => {
                // The narrowest level one domain of which holds the quorum.
                for level in levels {
                    if let Ok(plan) = in_domains(level, None) {
                        return plan;
                    }
                }
                // None: as few domains of the widest level as first-fit finds when it fills
                // the roomiest domain first, then the next (greedy), then unlabelled nodes.
                // Locality alone never makes the gang wait.
                let widest = levels.last().cloned().unwrap_or_default();
                let mut order: Vec<usize> = self
                    .domains(&widest, (&largest, &smallest), 0, None)
                    .into_iter()
                    .rev()
                    .flat_map(|d| d.nodes)
                    .collect();
                order.extend(
                    self.ledger
                        .iter()
                        .filter(|(_, e)| domain_of(e.info(), &widest).is_none())
                        .map(|(i, _)| i),
                );
                Some(order)
            }
            None => None,
        };
        // The first-fit loop over `order` (or every node in ledger order).
        macro_rules! fit_others {
            () => {
                match &order {
                    Some(o) => first_fit_among(&self.ledger, o, &chosen, &mut overlay, &mut rules),
                    None => first_fit_each(&self.ledger, &chosen, &mut overlay, &mut rules),
                }
            };
        }

        // Others first, then see which candidates are left for this pod: sound, and gives
        // kube-scheduler a choice of nodes.
        let seats = fit_others!();
        if overlay.exhausted() {
            return GangPlan::DoesNotFit(self.out_of_budget(&facts, seats.len(), need, missing));
        }
        if seats.len() == chosen.len() {
            let first = match &order {
                // Preferred topology: the first node in `order` too, so the member asking
                // joins the domains the others fill.
                Some(o) => {
                    let offered: rustc_hash::FxHashSet<usize> =
                        candidates.iter().copied().collect();
                    o.iter()
                        .copied()
                        .find(|&i| offered.contains(&i) && first_fits(&rules, &overlay, i))
                }
                None => tightest_left(&rules, &overlay, candidates),
            };
            if let Some(first) = first {
                return fits(first, seats);
            }
        }
        let first_has_room = candidates.iter().any(|&i| first_fits(&rules, &overlay, i));
        let placed_first = seats.len();
        let mut best = placed_first + usize::from(first_has_room);
        overlay.rollback(base);
        rules.rollback(rules_base);

        // The others took the room this pod needs: try this pod first on a few candidates.
        let tries: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|&i| first_fits(&rules, &overlay, i))
            .take(self.config.max_first_node_attempts)
            .collect();
        for first in tries {
            if overlay.exhausted() {
                return GangPlan::DoesNotFit(self.out_of_budget(&facts, best, need, missing));
            }
            overlay.take(first, &pod.requests);
            rules.place(0, self.ledger.at(first).info());
            let seats = fit_others!();
            if seats.len() == chosen.len() {
                return fits(first, seats);
            }
            best = best.max(seats.len() + 1);
            overlay.rollback(base);
            rules.rollback(rules_base);
        }
        if overlay.exhausted() {
            return GangPlan::DoesNotFit(self.out_of_budget(&facts, best, need, missing));
        }
        // Nothing fits: only now say why. The diagnosis walks every node, so it is not made
        // on the way to a plan that fits (kube-scheduler too checks every node only when none
        // is feasible): the others are placed again as in the first attempt (the state is back
        // at `base`, so the same members land on the same nodes), and the member they stopped
        // at is diagnosed.
        fit_others!();
        let (stuck, stuck_pod) = match chosen.get(placed_first) {
            Some(m) => (m.index, m.pod),
            None => (0, pod),
        };
        // When it counts for a task below its minimum: how many of that task fit.
        let task = task_at(stuck).and_then(|stuck_task| {
            let t = facts.tasks.iter().find(|t| &*t.task == stuck_task)?;
            let placed = (1..=placed_first)
                .filter(|&i| task_at(i) == Some(stuck_task))
                .count()
                + usize::from(first_has_room && task_at(0) == Some(stuck_task));
            Some(TaskFit {
                task: t.task.clone(),
                fit: t.with_nodes + t.confirmed_seats + placed as u32,
                min: t.min,
            })
        });
        let diagnosis = diagnose(&self.ledger, &rules, &overlay, stuck, stuck_pod);
        let by_rule = diagnosis.nodes()
            - diagnosis.available()
            - diagnosis.refused_by(Reason::InsufficientResources);
        let rule = (by_rule > 0).then(|| {
            // DynamicResources words its own shortfall, with the class and the numbers.
            rules
                .devices
                .as_ref()
                .filter(|_| diagnosis.refused_by(Reason::DynamicResources) > 0)
                .and_then(|d| {
                    let nodes: Vec<&NodeInfo> = self.ledger.iter().map(|(_, e)| e.info()).collect();
                    d.shortfall(stuck, &nodes)
                })
                .unwrap_or_else(|| shortfall_message(stuck_pod, need, best, &diagnosis))
        });
        GangPlan::DoesNotFit(GangShortfall::Room {
            fit: facts.with_nodes + facts.confirmed_seats + best as u32,
            quorum: facts.spec.quorum,
            missing: missing as u32,
            rule,
            task,
        })
    }

    /// The simulation ran out of [`CHECK_BUDGET`] with `placed` of `need` members placed: the
    /// gang does not fit in what muster simulates per call (a rule's shortfall, so it holds
    /// nothing and gangs behind it are not kept waiting for it).
    fn out_of_budget(
        &self,
        facts: &GangFacts,
        placed: usize,
        need: usize,
        missing: usize,
    ) -> GangShortfall {
        GangShortfall::Room {
            fit: facts.with_nodes + facts.confirmed_seats + placed as u32,
            quorum: facts.spec.quorum,
            missing: missing as u32,
            rule: Some(messages::out_of_checks(CHECK_BUDGET, placed, need)),
            task: None,
        }
    }

    /// The copies the simulation places for members not created yet, per entry of
    /// `selection.not_created`: for a task, the element-wise maximum of that task's members
    /// with the rules of one of them; for any task (or a task with no member yet), the
    /// element-wise maximum of every member with the rules of the member asking.
    pub(in crate::model) fn not_created_templates(
        &self,
        gang: &Gang,
        pod: &PodInfo,
        selection: &Selection<'_>,
    ) -> Vec<(Option<Arc<str>>, PodInfo, usize)> {
        selection
            .not_created
            .iter()
            .map(|(task, n)| {
                let of_task: Vec<&PodInfo> = self
                    .members_of(gang)
                    .filter(|p| !p.info.terminal)
                    .map(|p| &p.info)
                    .filter(|p| task.is_some() && task_of(p) == task.as_deref())
                    .collect();
                let template = match of_task.split_first() {
                    Some((first, rest)) => {
                        let mut requests = first.requests.clone();
                        for p in rest {
                            requests.max_with(&p.requests);
                        }
                        PodInfo {
                            requests,
                            ..(*first).clone()
                        }
                    }
                    None => PodInfo {
                        requests: self.largest_requests(gang, pod),
                        ..pod.clone()
                    },
                };
                (task.clone(), template, *n)
            })
            .collect()
    }

    /// The element-wise maximum of the requests of the gang's members that have not finished.
    pub(in crate::model) fn largest_requests(&self, gang: &Gang, pod: &PodInfo) -> Resources {
        let mut max = pod.requests.clone();
        for p in self.members_of(gang).filter(|p| !p.info.terminal) {
            max.max_with(&p.info.requests);
        }
        max
    }

    /// The DynamicResources state for `judged` (members `1..=missing` stand for members not
    /// created yet), when any has a ResourceClaim. Every other pod with a claim that is placed
    /// (bound, or being bound by muster) or holds a seat holds, on that node, the devices its
    /// claims would get there while muster has not seen them allocated (see
    /// [`DynamicResources::hold`]): kube-scheduler allocates a claim only in the pod's binding
    /// cycle, and muster's claim watch may show the allocation after the pod's binding. So
    /// seats hold devices as they hold resources (no-overcommit), and a node whose devices a
    /// gang just bound is not offered to the next one meanwhile.
    pub(in crate::model) fn dynamic_resources<'a>(
        &'a self,
        judged: &[&'a PodInfo],
        missing: usize,
    ) -> Option<DynamicResources<'a>> {
        let mut devices =
            DynamicResources::new(&self.devices, judged, |i| (1..=missing).contains(&i))?;
        let judged_uids: rustc_hash::FxHashSet<&PodUid> = judged.iter().map(|p| &p.uid).collect();
        let mut holding: Vec<(&'a PodInfo, &'a NodeName)> = self
            .pods
            .iter()
            .filter(|e| e.info.rules.as_ref().is_some_and(|r| !r.claims.is_empty()))
            .filter(|e| !e.info.terminal && !judged_uids.contains(&e.info.uid))
            .filter_map(|e| {
                let node = e.charged_node().or_else(|| {
                    let key = &e.info.gang()?.gang;
                    Some(&self.gangs.get(key)?.seat_of(&e.info.uid)?.node)
                })?;
                Some((&e.info, node))
            })
            .collect();
        // In a fixed order, so that the same table always holds the same devices.
        holding.sort_unstable_by(|a, b| a.0.uid.cmp(&b.0.uid));
        for (p, node) in holding {
            if let Some(e) = self.ledger.get(node) {
                devices.hold(p, e.info());
            }
        }
        Some(devices)
    }

    /// What the rules of `members` read about the cluster: every node, and the pods on nodes
    /// their rules can see (see the module notes) for which `keep` holds (a preemption leaves
    /// out the pods it counts as evictable).
    pub(in crate::model) fn snapshot<'a>(
        &'a self,
        members: &[&PodInfo],
        keep: impl Fn(&PodInfo) -> bool,
    ) -> ClusterSnapshot<'a> {
        let needs_every_pod = members.iter().any(|p| {
            p.rules.as_ref().is_some_and(|r| {
                !r.affinity.is_empty() || !r.anti_affinity.is_empty() || !r.spread.is_empty()
            })
        });
        let on_node = |p: &'a PodEntry| -> Option<(&'a NodeInfo, &'a PodInfo)> {
            if !keep(&p.info) {
                return None;
            }
            let node = p.charged_node()?;
            Some((self.ledger.get(node)?.info(), &p.info))
        };
        let bound: Vec<(&NodeInfo, &PodInfo)> = if needs_every_pod {
            self.pods.iter().filter_map(on_node).collect()
        } else {
            let mut bound: Vec<_> = self.pods.with_anti_affinity().filter_map(on_node).collect();
            // NodePorts reads the pods using host ports (those with anti-affinity are in already).
            if members.iter().any(|p| has_host_ports(p)) {
                bound.extend(
                    self.pods
                        .with_host_ports()
                        .filter(|p| {
                            p.info
                                .rules
                                .as_ref()
                                .is_none_or(|r| r.anti_affinity.is_empty())
                        })
                        .filter_map(on_node),
                );
            }
            bound
        };
        let nodes = self.ledger.iter().map(|(_, e)| e.info()).collect();
        let snapshot = ClusterSnapshot::new(nodes, bound, &self.namespaces);
        // A seat holds its member's host ports as it holds its room: the seated members of
        // other gangs count for NodePorts (only: their other rules are not checked against).
        // Whatever their priority: a preemption evicts pods, never seats (its room credit
        // leaves them held too), so `keep` does not apply to them.
        if !members.iter().any(|p| has_host_ports(p)) {
            return snapshot;
        }
        let own = members.first().and_then(|p| p.gang()).map(|m| &m.gang);
        let seated: Vec<(&NodeInfo, &PodInfo)> = self
            .gangs
            .iter()
            .filter(|(key, _)| Some(*key) != own)
            .flat_map(|(_, g)| g.seats())
            .filter_map(|(holder, seat)| {
                let p = self.pods.get(holder.member()?)?;
                let seated = p.charged_node().is_none() && has_host_ports(&p.info);
                seated.then_some((self.ledger.get(&seat.node)?.info(), &p.info))
            })
            .collect();
        snapshot.with_seated_ports(seated)
    }

    /// Reserves, in the simulation, room for every competing gang that comes before `key`
    /// (higher priority, then older) and fits. Gangs ahead that do not fit are skipped, so a
    /// big gang never blocks a smaller one behind it; so are gangs whose own simulation found
    /// a rule that stops them (they hold nothing and will take nothing). `devices`: the
    /// DynamicResources state of the gang being decided, when it has claims; the gangs ahead
    /// then take the devices their claims need too ([`AheadRules`]).
    fn reserve_gangs_ahead<'a>(
        &'a self,
        key: &GangKey,
        overlay: &mut Overlay,
        mut devices: Option<&mut DynamicResources<'a>>,
        now: Instant,
    ) {
        let me = self.facts(key).spec;
        let my_order = (Reverse(me.priority), me.created, key);
        let mut ahead: Vec<(Reverse<i32>, i64, &GangKey)> = self
            .gangs
            .iter()
            .filter(|(k, g)| {
                *k != key && !g.blocked_by_rule() && competes(g, now, self.config.active_window)
            })
            .map(|(k, g)| (Reverse(g.spec().priority), g.spec().created, k))
            .filter(|o| *o < my_order)
            .collect();
        ahead.sort();
        for (_, _, other) in ahead.into_iter().take(self.config.max_gangs_ahead) {
            let facts = self.facts(other);
            if self.is_placed(other, &facts) || !facts.spec.is_decided() {
                continue;
            }
            let selection = choose(&facts, None, self.members_to_place(other));
            if selection.missing() > 0 {
                continue;
            }
            let chosen: Vec<Member<()>> = selection
                .existing
                .into_iter()
                .enumerate()
                .map(|(index, p)| Member {
                    holder: (),
                    index,
                    pod: &p.info,
                })
                .collect();
            let cp = overlay.checkpoint();
            let placed = match devices.as_deref_mut() {
                Some(devices) => {
                    let claims: Vec<_> = chosen.iter().map(|m| devices.outside(m.pod)).collect();
                    if claims.iter().all(Option::is_none) {
                        first_fit_each(&self.ledger, &chosen, overlay, &mut StaticRules).len()
                    } else {
                        let likeness = ahead_likenesses(&chosen, &claims);
                        let mut rules = AheadRules {
                            devices,
                            claims,
                            likeness,
                            took: Vec::new(),
                        };
                        let placed =
                            first_fit_each(&self.ledger, &chosen, overlay, &mut rules).len();
                        if placed < chosen.len() {
                            rules.rollback(0);
                        } else {
                            rules.devices.note_gang_ahead(&rules.claims);
                        }
                        placed
                    }
                }
                None => first_fit_each(&self.ledger, &chosen, overlay, &mut StaticRules).len(),
            };
            if placed < chosen.len() {
                overlay.rollback(cp);
            }
        }
    }
}

/// The rules a competing gang ahead is simulated with when the gang being decided has
/// ResourceClaims: [`StaticRules`], and the devices its members' claims need, taken from the
/// decided gang's DynamicResources state for the whole simulation, so the gang behind is not
/// planned onto devices a gang ahead of it needs (as it is not onto its room).
struct AheadRules<'r, 'a> {
    devices: &'r mut DynamicResources<'a>,
    /// Per member of the gang ahead, its claims (`None`: none; `Err`: muster cannot judge
    /// them, so it fits nowhere).
    claims: Vec<Option<Result<Outside<'a>, ()>>>,
    /// Per member, its likeness (see [`ahead_likenesses`]).
    likeness: Vec<Option<u64>>,
    took: Vec<Took<'a>>,
}

/// The likeness of each member of a gang ahead (see [`Rules::likeness`]): the same static
/// rules (what [`StaticRules`] reads: `nodeSelector`, tolerations, required node affinity) and
/// claims alike ([`DynamicResources::outside_likenesses`]). First fit then resumes for each
/// where the previous one like it went, instead of walking again every node the gang ahead
/// already filled (quadratic in its size).
fn ahead_likenesses(
    members: &[Member<'_, ()>],
    claims: &[Option<Result<Outside<'_>, ()>>],
) -> Vec<Option<u64>> {
    let by_claims = DynamicResources::outside_likenesses(claims);
    fn node_affinity(p: &PodInfo) -> Option<&NodeSelector> {
        p.rules.as_ref()?.node_affinity.as_ref()
    }
    let mut statics: Vec<&PodInfo> = Vec::new();
    members
        .iter()
        .zip(by_claims)
        .map(|(m, c)| {
            let c = c?;
            let p = m.pod;
            let same = |q: &&PodInfo| {
                q.node_selector == p.node_selector
                    && q.tolerations == p.tolerations
                    && node_affinity(q) == node_affinity(p)
            };
            let s = match statics.iter().position(same) {
                Some(s) => s,
                None if statics.len() < 64 => {
                    statics.push(p);
                    statics.len() - 1
                }
                None => return None,
            };
            Some((s as u64) << 32 | u64::from(c))
        })
        .collect()
}

impl<'a> Rules<'a> for AheadRules<'_, 'a> {
    fn check(&self, member: usize, pod: &PodInfo, node: &NodeInfo) -> Result<(), Reason> {
        StaticRules.check(member, pod, node)?;
        match self.claims.get(member) {
            Some(Some(Ok(c))) if !self.devices.fits_outside(c, node) => {
                Err(Reason::DynamicResources)
            }
            Some(Some(Err(()))) => Err(Reason::DynamicResources),
            _ => Ok(()),
        }
    }
    fn place(&mut self, member: usize, node: &'a NodeInfo) {
        let took = match self.claims.get(member) {
            Some(Some(Ok(c))) => self.devices.take_outside(c, node),
            _ => Took::default(),
        };
        self.took.push(took);
    }
    fn checkpoint(&self) -> usize {
        self.took.len()
    }
    fn rollback(&mut self, checkpoint: usize) {
        while self.took.len() > checkpoint {
            let took = self.took.pop().expect("longer than the checkpoint");
            self.devices.give_back(took);
        }
    }
    fn placement_independent(&self) -> bool {
        true
    }
    fn likeness(&self, member: usize) -> Option<u64> {
        self.likeness.get(member).copied().flatten()
    }
}

#[cfg(test)]
#[path = "planner/tests.rs"]
mod tests;
