//! kube-scheduler's PodTopologySpread filter for constraints with
//! `whenUnsatisfiable: DoNotSchedule` (`plugins/podtopologyspread/{common,filtering}.go`).
//!
//! For each constraint, a node must carry the topology key, and placing the pod in the
//! node's domain must keep `matching pods there + (1 if the pod matches itself) - global
//! minimum <= maxSkew`. The global minimum is taken over the *eligible* domains — those of nodes
//! that carry every constraint's key and pass the constraint's node inclusion policies
//! (`nodeAffinityPolicy`, default Honor: the pod's nodeSelector and required node affinity;
//! `nodeTaintsPolicy`, default Ignore: honouring it means untolerated NoSchedule/NoExecute
//! taints exclude the node) — and is 0 while fewer than `minDomains` (default 1) domains are
//! eligible.
//!
//! Counted pods: on eligible nodes, in the incoming pod's namespace, matching the selector,
//! not terminating (`deletionTimestamp` set) and not Succeeded or Failed (kube-scheduler's
//! informer never sees those). `matchLabelKeys` adds `key In [the pod's value]` for each listed
//! key the pod carries, as kube-scheduler does.
//!
//! [`PodTopologySpread`] is the PreFilter state: built once from the nodes and the bound pods,
//! updated with [`PodTopologySpread::add`] as a simulation places pods, checked per node in
//! O(constraints). Its global minimum is exact after every update, where kube-scheduler's two
//! "critical paths" only approximate it within one cycle: each member's own scheduling cycle
//! recomputes it from scratch, and that is what a simulation must predict.
//!
//! One kube-scheduler quirk is kept on purpose: a selector `{}` counts no pod at all
//! (`countPodsMatchSelector` returns 0 for an empty selector), while the pod still matches it
//! itself. `add` follows that rule too, because what a simulation must predict is the
//! PreFilter of the *next* member's scheduling cycle, where the placed member is an existing
//! pod.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use super::{node_affinity, taint_toleration, Reason};
use crate::model::inputs::objects::{NodeInfo, PodInfo};
use crate::model::inputs::terms::{
    InclusionPolicy, LabelSelector, Operator, Requirement, SpreadConstraint,
};

impl SpreadConstraint {
    /// The selector with `matchLabelKeys` merged in (`filterTopologySpreadConstraints`): an
    /// absent selector stays one that matches nothing.
    fn effective_selector(&self, pod: &PodInfo) -> LabelSelector {
        let extra: Vec<Requirement> = self
            .match_label_keys
            .iter()
            .filter_map(|k| {
                pod.labels.get(k).map(|v| Requirement {
                    key: k.clone(),
                    operator: Operator::In(vec![v.to_string()]),
                })
            })
            .collect();
        match &self.selector {
            LabelSelector::All(own) if !extra.is_empty() => {
                LabelSelector::All(extra.into_iter().chain(own.iter().cloned()).collect())
            }
            other => other.clone(),
        }
    }

    /// `matchNodeInclusionPolicies`.
    fn includes(&self, node: &NodeInfo, pod: &PodInfo) -> bool {
        (self.node_affinity_policy == InclusionPolicy::Ignore || node_affinity::matches(node, pod))
            && (self.node_taints_policy == InclusionPolicy::Ignore
                || taint_toleration::untolerated_taint(node, pod).is_none())
    }
}

/// The per-constraint counts.
struct Counted<'a> {
    spec: &'a SpreadConstraint,
    selector: LabelSelector,
    /// The selector is `{}`: no existing pod counts (see the module notes).
    counts_nothing: bool,
    matches_self: bool,
    /// Matching pods per eligible domain value.
    per_domain: FxHashMap<&'a str, i32>,
    /// How many domains hold each count: the first key is the global minimum.
    domains_at: BTreeMap<i32, u32>,
}

impl<'a> Counted<'a> {
    fn bump(&mut self, domain: &'a str, delta: i32) {
        let before = self.per_domain.get(domain).copied();
        let after = before.unwrap_or(0) + delta;
        if let Some(b) = before {
            if let Some(n) = self.domains_at.get_mut(&b) {
                *n -= 1;
                if *n == 0 {
                    self.domains_at.remove(&b);
                }
            }
        }
        *self.domains_at.entry(after).or_insert(0) += 1;
        self.per_domain.insert(domain, after);
    }

    fn global_min(&self) -> i32 {
        if (self.per_domain.len() as i64) < i64::from(self.spec.min_domains) {
            return 0;
        }
        self.domains_at.keys().next().copied().unwrap_or(0)
    }
}

/// PodTopologySpread's PreFilter state for one incoming pod.
pub struct PodTopologySpread<'a> {
    pod: &'a PodInfo,
    constraints: Vec<Counted<'a>>,
}

impl<'a> PodTopologySpread<'a> {
    /// Registers the eligible domains of `nodes` and counts the matching pods among `bound`
    /// (`(node, pod)` pairs).
    pub fn new(
        pod: &'a PodInfo,
        nodes: impl IntoIterator<Item = &'a NodeInfo>,
        bound: impl IntoIterator<Item = (&'a NodeInfo, &'a PodInfo)>,
    ) -> Self {
        let specs = pod.rules.as_ref().map_or(&[][..], |r| &r.spread[..]);
        let mut constraints: Vec<Counted<'a>> = specs
            .iter()
            .map(|spec| {
                let selector = spec.effective_selector(pod);
                Counted {
                    spec,
                    counts_nothing: selector.is_empty(),
                    matches_self: selector.matches(&pod.labels),
                    selector,
                    per_domain: FxHashMap::default(),
                    domains_at: BTreeMap::new(),
                }
            })
            .collect();
        let mut state = PodTopologySpread {
            pod,
            constraints: Vec::new(),
        };
        if specs.is_empty() {
            return state;
        }
        for node in nodes {
            if !has_every_key(node, specs) {
                continue;
            }
            for c in constraints.iter_mut() {
                if c.spec.includes(node, pod) {
                    let v = node.labels[&c.spec.topology_key].as_str();
                    if !c.per_domain.contains_key(v) {
                        c.bump(v, 0);
                    }
                }
            }
        }
        state.constraints = constraints;
        for (node, other) in bound {
            if !other.terminal && !other.terminating {
                state.update(node, other, 1);
            }
        }
        state
    }

    /// Whether this rule can reject any node at all.
    pub fn is_trivial(&self) -> bool {
        self.constraints.is_empty()
    }

    /// A pod placed on `node` (`AddPod`).
    pub fn add(&mut self, node: &'a NodeInfo, pod: &'a PodInfo) {
        self.update(node, pod, 1);
    }

    /// A pod taken off `node` (`RemovePod`).
    pub fn remove(&mut self, node: &'a NodeInfo, pod: &'a PodInfo) {
        self.update(node, pod, -1);
    }

    fn update(&mut self, node: &'a NodeInfo, other: &PodInfo, delta: i32) {
        if other.namespace != self.pod.namespace
            || self.constraints.is_empty()
            || !self
                .constraints
                .iter()
                .all(|c| node.labels.contains_key(&c.spec.topology_key))
        {
            return;
        }
        let pod = self.pod;
        for c in self.constraints.iter_mut() {
            if c.counts_nothing || !c.selector.matches(&other.labels) || !c.spec.includes(node, pod)
            {
                continue;
            }
            let v = node.labels[&c.spec.topology_key].as_str();
            c.bump(v, delta);
        }
    }

    /// PodTopologySpread's Filter for one node.
    pub fn check(&self, node: &NodeInfo) -> Result<(), Reason> {
        for c in &self.constraints {
            let Some(v) = node.labels.get(&c.spec.topology_key) else {
                return Err(Reason::SpreadMissingLabel);
            };
            let here = c.per_domain.get(v.as_str()).copied().unwrap_or(0);
            let skew = i64::from(here) + i64::from(c.matches_self) - i64::from(c.global_min());
            if skew > i64::from(c.spec.max_skew) {
                return Err(Reason::SpreadSkew);
            }
        }
        Ok(())
    }
}

/// `nodeLabelsMatchSpreadConstraints`: a node missing any constraint's key takes no part.
fn has_every_key(node: &NodeInfo, specs: &[SpreadConstraint]) -> bool {
    specs
        .iter()
        .all(|c| node.labels.contains_key(&c.topology_key))
}

#[cfg(test)]
#[path = "pod_topology_spread/tests.rs"]
mod tests;
