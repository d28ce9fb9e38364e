//! The rules together, shaped for a simulation that places a gang's members one by one:
//! [`PodPlacement`] is every required rule for one pod (kube-scheduler's PreFilter state plus its
//! Filter), [`GangPlacement`] one such state per distinct member spec, each told of every
//! member placed.
//!
//! Cost: building reads, once per distinct spec, every bound pod if the spec has (anti-)affinity
//! terms of its own (otherwise only the pods with anti-affinity) and every node if it has
//! spread constraints; `check` is a few label and hash lookups; `place` is one update per spec.

use std::collections::BTreeSet;

use super::inter_pod_affinity::InterPodAffinity;
use super::labels::NamespaceLabels;
use super::node_ports::{self, NodePorts};
use super::pod_topology_spread::PodTopologySpread;
use super::{node_fits, scheduling_gates, Diagnosis, Reason};
use crate::model::inputs::objects::{NodeInfo, PodInfo};
use crate::model::inputs::terms::{HostPort, NodeSelector, PodAffinityTerm, SpreadConstraint};

/// The topology key of one node per domain.
pub const HOSTNAME_KEY: &str = "kubernetes.io/hostname";

/// What the rules read about the cluster at one decision.
pub struct ClusterSnapshot<'a> {
    nodes: Vec<&'a NodeInfo>,
    bound: Vec<(&'a NodeInfo, &'a PodInfo)>,
    /// The part of `bound` with required anti-affinity (kube-scheduler's
    /// `HavePodsWithRequiredAntiAffinityList`): all that a pod without terms of its own checks.
    with_anti_affinity: Vec<(&'a NodeInfo, &'a PodInfo)>,
    /// The part of `bound` using host ports: all NodePorts reads.
    with_host_ports: Vec<(&'a NodeInfo, &'a PodInfo)>,
    namespaces: &'a NamespaceLabels,
}

impl<'a> ClusterSnapshot<'a> {
    /// `nodes`: every node (topology spread registers the domains of all of them); `bound`:
    /// every pod on a node — bound, assumed or holding a seat — with its node (or, for members
    /// without (anti-)affinity or spread terms, at least those with anti-affinity or host ports).
    pub fn new(
        nodes: Vec<&'a NodeInfo>,
        bound: Vec<(&'a NodeInfo, &'a PodInfo)>,
        namespaces: &'a NamespaceLabels,
    ) -> Self {
        let with_anti_affinity = bound
            .iter()
            .copied()
            .filter(|(_, p)| !anti_affinity_of(p).is_empty())
            .collect();
        let with_host_ports = bound
            .iter()
            .copied()
            .filter(|(_, p)| !node_ports::host_ports(p).is_empty())
            .collect();
        ClusterSnapshot {
            nodes,
            bound,
            with_anti_affinity,
            with_host_ports,
            namespaces,
        }
    }

    pub fn nodes(&self) -> &[&'a NodeInfo] {
        &self.nodes
    }

    /// Members of other gangs holding seats (`seated`, on their seats' nodes) whose host ports
    /// NodePorts counts as in use there; no other rule reads them.
    pub fn with_seated_ports(mut self, seated: Vec<(&'a NodeInfo, &'a PodInfo)>) -> Self {
        self.with_host_ports.extend(seated);
        self
    }
}

fn anti_affinity_of(pod: &PodInfo) -> &[PodAffinityTerm] {
    pod.rules.as_ref().map_or(&[], |r| &r.anti_affinity)
}

/// Every required rule but resources, for one pod, at one decision.
pub struct PodPlacement<'a> {
    pod: &'a PodInfo,
    ports: NodePorts<'a>,
    inter_pod: InterPodAffinity<'a>,
    spread: PodTopologySpread<'a>,
}

impl<'a> PodPlacement<'a> {
    pub fn new(pod: &'a PodInfo, cluster: &ClusterSnapshot<'a>) -> Self {
        PodPlacement {
            pod,
            ports: NodePorts::new(pod, cluster.with_host_ports.iter().copied()),
            inter_pod: InterPodAffinity::new(
                pod,
                if has_own_terms(pod) {
                    &cluster.bound
                } else {
                    &cluster.with_anti_affinity
                }
                .iter()
                .copied(),
                cluster.namespaces,
            ),
            spread: PodTopologySpread::new(
                pod,
                cluster.nodes.iter().copied(),
                cluster.bound.iter().copied(),
            ),
        }
    }

    pub fn pod(&self) -> &'a PodInfo {
        self.pod
    }

    /// kube-scheduler's filters in its order (SchedulingGates, NodeUnschedulable,
    /// TaintToleration, NodeAffinity, NodePorts, [NodeResourcesFit: the ledger's],
    /// PodTopologySpread, InterPodAffinity); the first refusal is the reason.
    pub fn check(&self, node: &NodeInfo) -> Result<(), Reason> {
        scheduling_gates::check(self.pod)?;
        node_fits(node, self.pod)?;
        self.ports.check(node)?;
        self.spread.check(node)?;
        self.inter_pod.check(node)
    }

    /// `placed` now runs on `node` (a gang member the simulation placed).
    pub fn add(&mut self, node: &'a NodeInfo, placed: &'a PodInfo) {
        self.ports.add(node, placed);
        self.inter_pod.add(node, placed);
        self.spread.add(node, placed);
    }

    /// `gone` no longer runs on `node` (e.g. a simulated eviction).
    pub fn remove(&mut self, node: &'a NodeInfo, gone: &'a PodInfo) {
        self.ports.remove(node, gone);
        self.inter_pod.remove(node, gone);
        self.spread.remove(node, gone);
    }

    /// The verdict on every node, counted.
    pub fn diagnose<'n>(&self, nodes: impl IntoIterator<Item = &'n NodeInfo>) -> Diagnosis {
        let mut d = Diagnosis::default();
        for n in nodes {
            d.record(self.check(n));
        }
        d
    }
}

/// One [`PodPlacement`] per distinct spec among a gang's members, each updated with every
/// member placed. Members share a spec when they agree on namespace, rules, `nodeSelector`,
/// tolerations and the values of every label key some selector that judges them reads — so
/// the per-pod index labels of Indexed Jobs, StatefulSets or training operators do not split a
/// gang into one state per member.
pub struct GangPlacement<'a> {
    specs: Vec<PodPlacement<'a>>,
    /// Member index → index in `specs`.
    spec_of: Vec<usize>,
    members: Vec<&'a PodInfo>,
    /// Placements in order, so a simulation can roll back to a checkpoint.
    placed: Vec<(usize, &'a NodeInfo)>,
    /// No member has (anti-)affinity or spread terms or host ports: placing members changes no
    /// verdict.
    independent: bool,
}

impl<'a> GangPlacement<'a> {
    pub fn new(members: &[&'a PodInfo], cluster: &ClusterSnapshot<'a>) -> Self {
        let keys = label_keys_read(members, cluster);
        let mut specs: Vec<PodPlacement<'a>> = Vec::new();
        let mut spec_of = Vec::with_capacity(members.len());
        for &m in members {
            let i = match specs.iter().position(|s| same_spec(s.pod, m, &keys)) {
                Some(i) => i,
                None => {
                    specs.push(PodPlacement::new(m, cluster));
                    specs.len() - 1
                }
            };
            spec_of.push(i);
        }
        let independent = members.iter().all(|m| {
            m.rules.as_ref().is_none_or(|r| {
                r.affinity.is_empty()
                    && r.anti_affinity.is_empty()
                    && r.spread.is_empty()
                    && r.host_ports.is_empty()
            })
        });
        GangPlacement {
            specs,
            spec_of,
            members: members.to_vec(),
            placed: Vec::new(),
            independent,
        }
    }

    /// Whether placing members can change any member's verdict: only through members' own pod
    /// (anti-)affinity or spread terms or host ports (the terms of pods already on nodes do not change as
    /// members are placed).
    pub fn placement_independent(&self) -> bool {
        self.independent
    }

    /// Which spec (state) judges member `member`: members of one spec get the same verdict on
    /// every node.
    pub fn spec_index(&self, member: usize) -> Option<usize> {
        self.spec_of.get(member).copied()
    }

    /// How many distinct specs (states) the gang needed.
    pub fn spec_count(&self) -> usize {
        self.specs.len()
    }

    /// Whether member `member` (index into the slice given to `new`) may go on `node`.
    pub fn check(&self, member: usize, node: &NodeInfo) -> Result<(), Reason> {
        self.specs[self.spec_of[member]].check(node)
    }

    /// Member `member` is placed on `node`: every spec's state counts it from now on.
    pub fn place(&mut self, member: usize, node: &'a NodeInfo) {
        let pod = self.members[member];
        for s in &mut self.specs {
            s.add(node, pod);
        }
        self.placed.push((member, node));
    }

    /// A point [`GangPlacement::rollback`] returns to (as the planner's resource overlay).
    pub fn checkpoint(&self) -> usize {
        self.placed.len()
    }

    /// Undoes the placements made since `checkpoint`.
    pub fn rollback(&mut self, checkpoint: usize) {
        while self.placed.len() > checkpoint {
            let (member, node) = self.placed.pop().expect("longer than the checkpoint");
            let pod = self.members[member];
            for s in &mut self.specs {
                s.remove(node, pod);
            }
        }
    }

    pub fn diagnose<'n>(
        &self,
        member: usize,
        nodes: impl IntoIterator<Item = &'n NodeInfo>,
    ) -> Diagnosis {
        self.specs[self.spec_of[member]].diagnose(nodes)
    }
}

fn has_own_terms(pod: &PodInfo) -> bool {
    pod.rules
        .as_ref()
        .is_some_and(|r| !r.affinity.is_empty() || !r.anti_affinity.is_empty())
}

/// A pod's rules but its claims: node affinity, pod affinity and anti-affinity, spread,
/// scheduling gates, host ports.
type PlacementRules<'p> = (
    Option<&'p NodeSelector>,
    &'p [PodAffinityTerm],
    &'p [PodAffinityTerm],
    &'p [SpreadConstraint],
    &'p [String],
    &'p [HostPort],
);

/// A pod's [`PlacementRules`]; a pod without rules has them all empty.
fn placement_rules(p: &PodInfo) -> PlacementRules<'_> {
    match p.rules.as_deref() {
        Some(r) => (
            r.node_affinity.as_ref(),
            &r.affinity,
            &r.anti_affinity,
            &r.spread,
            &r.scheduling_gates,
            &r.host_ports,
        ),
        None => (None, &[], &[], &[], &[], &[]),
    }
}

/// Every pod label key a selector that judges these members reads: their own terms and spread
/// constraints (self-matching, `matchLabelKeys`), and the anti-affinity terms of every bound
/// pod and member (existing pods' anti-affinity is checked against the incoming pod).
fn label_keys_read<'k>(
    members: &[&'k PodInfo],
    cluster: &ClusterSnapshot<'k>,
) -> BTreeSet<&'k str> {
    let mut keys = BTreeSet::new();
    let holders = cluster.with_anti_affinity.iter().map(|(_, p)| *p);
    for pod in members.iter().copied().chain(holders) {
        let Some(rules) = &pod.rules else { continue };
        for t in rules.affinity.iter().chain(&rules.anti_affinity) {
            keys.extend(t.selector.keys());
        }
        for c in &rules.spread {
            keys.extend(c.selector.keys());
            keys.extend(c.match_label_keys.iter().map(String::as_str));
        }
    }
    keys
}

/// Whether two pods are the same to every rule (so one state serves both). Their
/// ResourceClaims are not read here (DynamicResources judges them on its own), so the claims
/// each member gets from one template do not split the gang into one state per member.
fn same_spec(a: &PodInfo, b: &PodInfo, label_keys_read: &BTreeSet<&str>) -> bool {
    a.namespace == b.namespace
        && a.node_selector == b.node_selector
        && a.tolerations == b.tolerations
        && placement_rules(a) == placement_rules(b)
        && label_keys_read
            .iter()
            .all(|k| a.labels.get(k) == b.labels.get(k))
}

/// Why a gang's members stopped fitting: `placed` of `need` members were placed and the next
/// one (`pod`) fit nowhere, `diagnosis` saying why per node. A gang whose members repel each
/// other per node gets the count the user must act on.
pub fn shortfall_message(
    pod: &PodInfo,
    need: usize,
    placed: usize,
    diagnosis: &Diagnosis,
) -> String {
    let possible = diagnosis.statically_possible() as usize;
    let ports = node_ports::host_ports(pod);
    if !ports.is_empty() && diagnosis.refused_by(Reason::NodePorts) > 0 {
        return format!(
            "{need} members need host port {}, one member per node; {placed} placed, \
             no node for the next: {diagnosis}",
            node_ports::describe(ports)
        );
    }
    if possible < need && repels_itself_per_node(pod) {
        return format!(
            "{need} members need distinct nodes by pod anti-affinity; {possible} nodes match"
        );
    }
    format!("{placed} of {need} members placed; no node for the next: {diagnosis}")
}

/// The pod has a hostname anti-affinity term that matches the pod itself.
fn repels_itself_per_node(pod: &PodInfo) -> bool {
    let none = NamespaceLabels::default();
    pod.rules.as_ref().is_some_and(|r| {
        r.anti_affinity
            .iter()
            .any(|t| t.topology_key == HOSTNAME_KEY && t.matches(pod, &none))
    })
}

#[cfg(test)]
#[path = "placement/tests.rs"]
mod tests;
