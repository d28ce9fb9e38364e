//! kube-scheduler's InterPodAffinity filter, required terms only
//! (`plugins/interpodaffinity/filtering.go`, with `InterPodAffinityHostnameFastPath` off as it
//! is by default in v1.37, so every topology key — hostname included — is a domain of nodes
//! sharing the label's value).
//!
//! Three checks, in kube-scheduler's order:
//! 1. the incoming pod's affinity: every term's topology key must be on the node, and the
//!    node's domain must hold a pod matching *all* its terms — unless no such pod exists
//!    anywhere and the pod matches its own terms (the first pod of a group);
//! 2. the incoming pod's anti-affinity: no domain of the node may hold a pod matching a term;
//! 3. existing pods' anti-affinity (symmetry): no pod in any of the node's domains may have a
//!    term that matches the incoming pod.
//!
//! [`InterPodAffinity`] is the PreFilter state: built once from the bound pods, updated with
//! [`InterPodAffinity::add`] as a simulation places pods (kube-scheduler's `AddPod`), and
//! checked per node with a few hash lookups.
//!
//! Differences from kube-scheduler, on purpose:
//! - `matchLabelKeys`/`mismatchLabelKeys` are not read: the API server merges them into
//!   `labelSelector` when the pod is created, and kube-scheduler reads only the merged selector.
//! - `namespaceSelector` is evaluated against [`NamespaceLabels`], which (muster not watching
//!   namespaces) knows by default only each namespace's `kubernetes.io/metadata.name` label.
//! - Succeeded and Failed pods are never counted: kube-scheduler's informer does not see them.

use rustc_hash::FxHashMap;

use super::labels::NamespaceLabels;
use super::Reason;
use crate::model::inputs::objects::{NodeInfo, PodInfo};
use crate::model::inputs::terms::PodAffinityTerm;

impl PodAffinityTerm {
    /// `AffinityTerm.Matches`: the pod's namespace is named or selected, and its labels match.
    pub fn matches(&self, pod: &PodInfo, namespaces: &NamespaceLabels) -> bool {
        let ns = &*pod.namespace;
        (self.namespaces.iter().any(|n| n == ns)
            || self.namespace_selector.matches(&namespaces.of(ns)))
            && self.selector.matches(&pod.labels)
    }
}

/// Pods counted per topology domain `(key, value)`; entries at zero are removed, so
/// "no pod anywhere" is an empty map.
#[derive(Default)]
struct DomainCounts<'a> {
    counts: FxHashMap<(&'a str, &'a str), i64>,
}

impl<'a> DomainCounts<'a> {
    fn update(&mut self, node: &'a NodeInfo, key: &str, delta: i64) {
        if let Some((k, v)) = node.labels.get_key_value(key) {
            let entry = self.counts.entry((k.as_str(), v.as_str())).or_insert(0);
            *entry += delta;
            if *entry == 0 {
                self.counts.remove(&(k.as_str(), v.as_str()));
            }
        }
    }

    fn get(&self, key: &str, value: &str) -> i64 {
        self.counts.get(&(key, value)).copied().unwrap_or(0)
    }

    fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}

/// InterPodAffinity's PreFilter state for one incoming pod.
pub struct InterPodAffinity<'a> {
    pod: &'a PodInfo,
    affinity: &'a [PodAffinityTerm],
    anti_affinity: &'a [PodAffinityTerm],
    namespaces: &'a NamespaceLabels,
    /// Whether the incoming pod matches all of its own affinity terms.
    matches_own_affinity: bool,
    /// Domains holding pods whose anti-affinity terms match the incoming pod.
    existing_anti_affinity: DomainCounts<'a>,
    /// Domains holding pods that match all the incoming pod's affinity terms.
    affinity_counts: DomainCounts<'a>,
    /// Domains holding pods that match one of the incoming pod's anti-affinity terms.
    anti_affinity_counts: DomainCounts<'a>,
}

impl<'a> InterPodAffinity<'a> {
    /// Counts the pods already on nodes (`(node, pod)` pairs); Succeeded and Failed pods are
    /// skipped.
    pub fn new(
        pod: &'a PodInfo,
        bound: impl IntoIterator<Item = (&'a NodeInfo, &'a PodInfo)>,
        namespaces: &'a NamespaceLabels,
    ) -> Self {
        let (affinity, anti_affinity) = match &pod.rules {
            Some(r) => (&r.affinity[..], &r.anti_affinity[..]),
            None => (&[][..], &[][..]),
        };
        let mut state = InterPodAffinity {
            pod,
            affinity,
            anti_affinity,
            namespaces,
            matches_own_affinity: matches_all(affinity, pod, namespaces),
            existing_anti_affinity: DomainCounts::default(),
            affinity_counts: DomainCounts::default(),
            anti_affinity_counts: DomainCounts::default(),
        };
        let own_terms = !affinity.is_empty() || !anti_affinity.is_empty();
        for (node, other) in bound {
            // Without terms of its own, only pods with anti-affinity can matter.
            let has_anti = other
                .rules
                .as_ref()
                .is_some_and(|r| !r.anti_affinity.is_empty());
            if !other.terminal && (own_terms || has_anti) {
                state.update(node, other, 1);
            }
        }
        state
    }

    /// Whether this rule can reject any node at all (kube-scheduler's PreFilter `Skip`).
    pub fn is_trivial(&self) -> bool {
        self.affinity.is_empty()
            && self.anti_affinity.is_empty()
            && self.existing_anti_affinity.is_empty()
    }

    /// A pod placed on `node` (`AddPod`).
    pub fn add(&mut self, node: &'a NodeInfo, pod: &'a PodInfo) {
        self.update(node, pod, 1);
    }

    /// A pod taken off `node` (`RemovePod`), e.g. a simulated eviction.
    pub fn remove(&mut self, node: &'a NodeInfo, pod: &'a PodInfo) {
        self.update(node, pod, -1);
    }

    fn update(&mut self, node: &'a NodeInfo, other: &'a PodInfo, delta: i64) {
        if let Some(rules) = &other.rules {
            for term in &rules.anti_affinity {
                if term.matches(self.pod, self.namespaces) {
                    self.existing_anti_affinity
                        .update(node, &term.topology_key, delta);
                }
            }
        }
        if matches_all(self.affinity, other, self.namespaces) {
            for term in self.affinity {
                self.affinity_counts.update(node, &term.topology_key, delta);
            }
        }
        for term in self.anti_affinity {
            if term.matches(other, self.namespaces) {
                self.anti_affinity_counts
                    .update(node, &term.topology_key, delta);
            }
        }
    }

    /// InterPodAffinity's Filter for one node.
    pub fn check(&self, node: &NodeInfo) -> Result<(), Reason> {
        if !self.affinity.is_empty() {
            let mut pods_exist = true;
            for term in self.affinity {
                match node.labels.get(&term.topology_key) {
                    None => return Err(Reason::PodAffinity),
                    Some(v) => {
                        if self.affinity_counts.get(&term.topology_key, v) <= 0 {
                            pods_exist = false;
                        }
                    }
                }
            }
            // The first pod of a group with affinity to itself goes anywhere its topology keys
            // exist, as long as no pod anywhere matches its terms yet.
            let first_of_its_group = self.affinity_counts.is_empty() && self.matches_own_affinity;
            if !pods_exist && !first_of_its_group {
                return Err(Reason::PodAffinity);
            }
        }
        if !self.anti_affinity_counts.is_empty() {
            for term in self.anti_affinity {
                if let Some(v) = node.labels.get(&term.topology_key) {
                    if self.anti_affinity_counts.get(&term.topology_key, v) > 0 {
                        return Err(Reason::PodAntiAffinity);
                    }
                }
            }
        }
        if !self.existing_anti_affinity.is_empty()
            && node
                .labels
                .iter()
                .any(|(k, v)| self.existing_anti_affinity.get(k, v) > 0)
        {
            return Err(Reason::ExistingPodsAntiAffinity);
        }
        Ok(())
    }
}

/// `podMatchesAllAffinityTerms`: false for no terms.
fn matches_all(terms: &[PodAffinityTerm], pod: &PodInfo, namespaces: &NamespaceLabels) -> bool {
    !terms.is_empty() && terms.iter().all(|t| t.matches(pod, namespaces))
}

#[cfg(test)]
#[path = "inter_pod_affinity/tests.rs"]
mod tests;
