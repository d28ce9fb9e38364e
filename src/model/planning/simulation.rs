//! The one first-fit loop every simulation runs through, and what it checks per node.
//!
//! A simulation never changes the ledger: the room it gives away is kept in an [`Overlay`].
//! Which nodes a member may use is a [`Rules`] value: [`StaticRules`] (cordons, taints,
//! `nodeSelector`, required node affinity: what needs no other pod) for the competing gangs
//! ahead, [`GangRules`] (every required rule kube-scheduler applies, with the members placed so
//! far counted, and the nodes each member's own filter call excluded) for the gang being
//! decided. Both take the same checkpoints, so a failed attempt is undone in both at once.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::model::inputs::objects::{NodeInfo, NodeName, PodInfo};
use crate::model::inputs::resources::Resources;
use crate::model::rules::dynamic_resources::DynamicResources;
use crate::model::rules::{node_admits, Diagnosis, GangPlacement, Reason};
use crate::model::table::ledger::NodeLedger;

/// Room given away by a simulation, on top of the ledger. Only nodes touched are stored, so a
/// simulation never copies the whole node list; a checkpoint lets it undo a failed attempt.
/// A preemption's simulation also gives room back (`credit`): what evicting pods would free.
#[derive(Default)]
pub(in crate::model) struct Overlay {
    taken: HashMap<usize, Resources>,
    log: Vec<(usize, Resources)>,
    /// Node checks the first-fit loop made with this overlay (never rolled back): one
    /// simulation's work, bounded by [`CHECK_BUDGET`].
    checks: u64,
    /// Per node position, room the simulation counts as free although pods still use it (the
    /// pods a preemption may evict). Empty in every other simulation.
    credit: HashMap<usize, Resources>,
}

/// The node checks one simulation may make (a few hundred milliseconds at most): the planner's
/// work per call is bounded even for a gang whose members first fit cannot resume for (pod
/// (anti-)affinity or spread terms, or many distinct members) — the table's lock is held
/// throughout (fail-safe). A simulation that runs out places no more members: the gang does not
/// fit, and says why.
#[cfg(not(test))]
pub(super) const CHECK_BUDGET: u64 = 4_000_000;
#[cfg(test)]
pub(super) const CHECK_BUDGET: u64 = 20_000;

impl Overlay {
    /// The simulation ran out of [`CHECK_BUDGET`].
    pub fn exhausted(&self) -> bool {
        self.checks >= CHECK_BUDGET
    }

    /// An overlay that counts `credit` as free room on top of the ledger.
    pub fn with_credit(credit: HashMap<usize, Resources>) -> Self {
        Overlay {
            credit,
            ..Overlay::default()
        }
    }

    pub fn get(&self, position: usize) -> Option<&Resources> {
        self.taken.get(&position)
    }

    pub fn credit(&self, position: usize) -> Option<&Resources> {
        if self.credit.is_empty() {
            return None;
        }
        self.credit.get(&position)
    }

    /// Sets the credit at `position` (none when `None`); returns what it was, to put back.
    pub fn replace_credit(
        &mut self,
        position: usize,
        credit: Option<Resources>,
    ) -> Option<Resources> {
        match credit {
            Some(c) => self.credit.insert(position, c),
            None => self.credit.remove(&position),
        }
    }

    pub fn take(&mut self, position: usize, r: &Resources) {
        self.taken.entry(position).or_default().add(r);
        self.log.push((position, r.clone()));
    }

    pub fn checkpoint(&self) -> usize {
        self.log.len()
    }

    pub fn rollback(&mut self, checkpoint: usize) {
        while self.log.len() > checkpoint {
            let (position, r) = self.log.pop().expect("log is longer than checkpoint");
            if let Some(t) = self.taken.get_mut(&position) {
                t.sub(&r);
            }
        }
    }
}

/// Which nodes a simulated member may use, besides room. `member` indexes the members the
/// rules were built for; rules that need no state read only `pod`.
pub(in crate::model) trait Rules<'a> {
    fn check(&self, member: usize, pod: &PodInfo, node: &NodeInfo) -> Result<(), Reason>;
    /// `member` now runs on `node` in the simulation.
    fn place(&mut self, member: usize, node: &'a NodeInfo);
    fn checkpoint(&self) -> usize;
    fn rollback(&mut self, checkpoint: usize);
    /// No placement changes any verdict: a node refused to a member stays refused to an
    /// identical one, so first-fit may resume where the previous identical member went.
    fn placement_independent(&self) -> bool {
        false
    }
    /// Members judged alike, when [`Rules::placement_independent`]: two members of the same
    /// likeness with equal requests get the same verdict on every node, and placements only
    /// take (room, devices), so a node refused to one stays refused to the other. `None`: the
    /// member is alike only to copies of its own pod.
    fn likeness(&self, _member: usize) -> Option<u64> {
        None
    }
}

/// Only the rules that need no other pod (NodeUnschedulable, TaintToleration, NodeAffinity).
pub(in crate::model) struct StaticRules;

impl<'a> Rules<'a> for StaticRules {
    fn check(&self, _: usize, pod: &PodInfo, node: &NodeInfo) -> Result<(), Reason> {
        if node_admits(node, pod) {
            Ok(())
        } else {
            Err(Reason::NodeAffinity)
        }
    }
    fn place(&mut self, _: usize, _: &'a NodeInfo) {}
    fn checkpoint(&self) -> usize {
        0
    }
    fn rollback(&mut self, _: usize) {}
    fn placement_independent(&self) -> bool {
        true
    }
}

/// Every required rule for the members of one gang ([`GangPlacement`]), and per member the
/// nodes its own latest filter call excluded (`allowed`: the nodes it passed, when known).
pub(in crate::model) struct GangRules<'a> {
    pub placement: GangPlacement<'a>,
    pub allowed: Vec<Option<&'a HashSet<NodeName>>>,
    /// The members' ResourceClaims, when any has one (DynamicResources).
    pub devices: Option<DynamicResources<'a>>,
}

impl<'a> Rules<'a> for GangRules<'a> {
    fn check(&self, member: usize, _: &PodInfo, node: &NodeInfo) -> Result<(), Reason> {
        if let Some(Some(allowed)) = self.allowed.get(member) {
            if !allowed.contains(&node.name) {
                // kube-scheduler's own filters refused this node for this very pod; which of
                // them is not said, and its static rules are the likeliest.
                return Err(Reason::NodeAffinity);
            }
        }
        self.placement.check(member, node)?;
        match &self.devices {
            Some(d) => d.check(member, node),
            None => Ok(()),
        }
    }
    fn place(&mut self, member: usize, node: &'a NodeInfo) {
        self.placement.place(member, node);
        if let Some(d) = &mut self.devices {
            d.place(member, node);
        }
    }
    fn checkpoint(&self) -> usize {
        // One entry per placement in both, so one number serves both.
        debug_assert!(self
            .devices
            .as_ref()
            .is_none_or(|d| d.checkpoint() == self.placement.checkpoint()));
        self.placement.checkpoint()
    }
    fn rollback(&mut self, checkpoint: usize) {
        self.placement.rollback(checkpoint);
        if let Some(d) = &mut self.devices {
            d.rollback(checkpoint);
        }
    }
    fn placement_independent(&self) -> bool {
        self.placement.placement_independent()
    }
    fn likeness(&self, member: usize) -> Option<u64> {
        if self.allowed.get(member).is_some_and(Option::is_some) {
            return None; // its own filter call's nodes
        }
        let spec = self.placement.spec_index(member)? as u64;
        let devices = match &self.devices {
            Some(d) => d.likeness(member)?,
            None => 0,
        };
        Some(spec << 32 | u64::from(devices))
    }
}

/// A member to place: who it is for the caller, its index in the [`Rules`], and its pod.
pub(in crate::model) struct Member<'p, H> {
    pub holder: H,
    pub index: usize,
    pub pod: &'p PodInfo,
}

/// Whether `pod` (member `index` of `rules`) may take `position` now: the rules admit it and
/// the room left after the simulation so far holds it.
pub(in crate::model) fn admits(
    ledger: &NodeLedger,
    rules: &dyn Rules<'_>,
    overlay: &Overlay,
    index: usize,
    pod: &PodInfo,
    position: usize,
) -> Result<(), Reason> {
    rules.check(index, pod, ledger.at(position).info())?;
    let credit = overlay.credit(position);
    match ledger.shortfall(position, &pod.requests, credit, overlay.get(position)) {
        Some(_) => Err(Reason::InsufficientResources),
        None => Ok(()),
    }
}

/// The first-fit loop: places `members` in order, each on the first node (in ledger order)
/// the rules admit with room for it (counting the overlay's credit as room), taking that room
/// in `overlay` and telling the rules. The planner and the preempt decision both run it.
/// Stops at the first member that fits nowhere (what was taken so far stays taken, so the
/// caller can count or roll back); all were placed when the result is as long as `members`.
///
/// The work is bounded by the nodes, not by members times nodes, for the copies the planner
/// places for members not created yet (one `PodInfo` for all of them) and for members alike
/// ([`Rules::likeness`]: the workers of a job, each with its own claim from one template):
/// when no placement changes a verdict ([`Rules::placement_independent`]), such a member
/// starts where the previous one like it went, as every node before it refused that very pod
/// (or one judged the same) and has only less room and fewer free devices since. The result
/// is the same first fit.
pub(in crate::model) fn first_fit_each<'a, H: Clone>(
    ledger: &'a NodeLedger,
    members: &[Member<'_, H>],
    overlay: &mut Overlay,
    rules: &mut dyn Rules<'a>,
) -> Vec<(H, usize)> {
    first_fit_over(ledger, ledger.len(), |j| j, members, overlay, rules)
}

/// [`first_fit_each`] over `nodes` only (ledger positions, in ledger order): one topology
/// domain's nodes, for a gang that must be inside one (see `planning::domains`). The same
/// loop, the same budget; nodes outside are never looked at, so a domain costs its own size.
pub(in crate::model) fn first_fit_among<'a, H: Clone>(
    ledger: &'a NodeLedger,
    nodes: &[usize],
    members: &[Member<'_, H>],
    overlay: &mut Overlay,
    rules: &mut dyn Rules<'a>,
) -> Vec<(H, usize)> {
    first_fit_over(ledger, nodes.len(), |j| nodes[j], members, overlay, rules)
}

fn first_fit_over<'a, H: Clone>(
    ledger: &'a NodeLedger,
    len: usize,
    node_at: impl Fn(usize) -> usize,
    members: &[Member<'_, H>],
    overlay: &mut Overlay,
    rules: &mut dyn Rules<'a>,
) -> Vec<(H, usize)> {
    let mut placed = Vec::with_capacity(members.len());
    let resume = rules.placement_independent();
    let mut previous: Option<(&PodInfo, usize)> = None;
    // Per likeness, the last member of it placed and where.
    let mut alike: HashMap<u64, (&PodInfo, usize)> = HashMap::default();
    for m in members {
        if overlay.exhausted() {
            break;
        }
        let likeness = if resume {
            rules.likeness(m.index)
        } else {
            None
        };
        let start = match previous {
            Some((pod, j)) if resume && std::ptr::eq(pod, m.pod) => j,
            _ => likeness
                .and_then(|l| alike.get(&l))
                .filter(|(pod, _)| pod.requests == m.pod.requests)
                .map_or(0, |(_, j)| *j),
        };
        let found = (start..len)
            .find(|&j| admits(ledger, rules, overlay, m.index, m.pod, node_at(j)).is_ok());
        overlay.checks += (found.map_or(len, |j| j + 1) - start) as u64;
        let Some(j) = found else {
            break;
        };
        previous = Some((m.pod, j));
        if let Some(l) = likeness {
            alike.insert(l, (m.pod, j));
        }
        let i = node_at(j);
        overlay.take(i, &m.pod.requests);
        rules.place(m.index, ledger.at(i).info());
        placed.push((m.holder.clone(), i));
    }
    placed
}

/// Why member `index` fits on no node now, counted per rule over every node.
pub(in crate::model) fn diagnose(
    ledger: &NodeLedger,
    rules: &dyn Rules<'_>,
    overlay: &Overlay,
    index: usize,
    pod: &PodInfo,
) -> Diagnosis {
    let mut d = Diagnosis::default();
    for (i, _) in ledger.iter() {
        d.record(admits(ledger, rules, overlay, index, pod, i));
    }
    d
}

#[cfg(test)]
#[path = "simulation/tests.rs"]
mod tests;
