//! Small builders for the rule tests.

use std::sync::Arc;

use crate::model::inputs::objects::{NodeInfo, PodInfo, PodRules};
use crate::model::inputs::terms::{
    LabelSelector, NodeSelector, NodeSelectorTerm, PodAffinityTerm, SpreadConstraint,
};
use crate::testkit;

pub const HOSTNAME: &str = "kubernetes.io/hostname";
pub const ZONE: &str = "topology.kubernetes.io/zone";

/// A node labelled with its hostname, 8 CPUs.
pub fn node(name: &str) -> NodeInfo {
    testkit::node(name).cpu(8000).label(HOSTNAME, name).build()
}

/// A node in a zone.
pub fn zoned(name: &str, zone: &str) -> NodeInfo {
    let mut n = node(name);
    n.labels.insert(ZONE.to_string(), zone.to_string());
    n
}

/// n0 and n1 in zone z1, n2 in z2, and n3 without a zone label: two domains of different
/// sizes and a node in none, the layout the affinity and spread tables are written against.
pub fn two_zones_and_a_zoneless_node() -> Vec<NodeInfo> {
    vec![
        zoned("n0", "z1"),
        zoned("n1", "z1"),
        zoned("n2", "z2"),
        node("n3"),
    ]
}

/// A plain pod in namespace `ml` requesting one CPU.
pub fn pod(name: &str) -> PodInfo {
    testkit::pod(name).cpu(1000).build()
}

pub fn labelled(mut p: PodInfo, labels: &[(&str, &str)]) -> PodInfo {
    p.labels = labels.iter().map(|(k, v)| (*k, *v)).collect();
    p
}

pub fn in_namespace(mut p: PodInfo, ns: &str) -> PodInfo {
    p.namespace = Arc::from(ns);
    p
}

/// `matchLabels` only.
pub fn selector(labels: &[(&str, &str)]) -> LabelSelector {
    LabelSelector::from_parts(labels.iter().copied(), []).unwrap()
}

/// A term of a pod in `ml` selecting `labels` over `key`.
pub fn term(labels: &[(&str, &str)], key: &str) -> PodAffinityTerm {
    PodAffinityTerm::new("ml", selector(labels), vec![], None, key)
}

#[derive(Default)]
pub struct PodRulesBuilder(PodRules);

impl PodRulesBuilder {
    pub fn node_affinity(mut self, terms: Vec<NodeSelectorTerm>) -> Self {
        self.0.node_affinity = Some(NodeSelector { terms });
        self
    }
    pub fn affinity(mut self, t: PodAffinityTerm) -> Self {
        self.0.affinity.push(t);
        self
    }
    pub fn anti_affinity(mut self, t: PodAffinityTerm) -> Self {
        self.0.anti_affinity.push(t);
        self
    }
    pub fn spread(mut self, c: SpreadConstraint) -> Self {
        self.0.spread.push(c);
        self
    }
    pub fn gate(mut self, name: &str) -> Self {
        self.0.scheduling_gates.push(name.to_string());
        self
    }
    pub fn on(self, mut p: PodInfo) -> PodInfo {
        p.rules = Some(Box::new(self.0));
        p
    }
}
