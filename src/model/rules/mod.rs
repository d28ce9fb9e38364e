//! kube-scheduler's required (filter-time) predicates as pure functions and states: what the
//! stock scheduler will check for each gang member, so that muster's simulation of a whole gang
//! agrees with it (kube-scheduler-semantics). One file per kube-scheduler plugin, each with its own table
//! tests naming the plugin; differences from the Go code are written down where they are.
//! Only the checks: the terms a pod carries for them (label selectors, node affinity, host
//! ports, pod affinity terms, spread constraints) and their parsing are `inputs::terms`, which
//! the rules extend with `impl` blocks that evaluate them.
//!
//! - stateless, per node: [`node_fits`] = NodeUnschedulable, TaintToleration, NodeAffinity
//!   (in kube-scheduler's filter order); [`scheduling_gates`] per pod;
//! - stateful, per decision: [`NodePorts`], [`InterPodAffinity`] and [`PodTopologySpread`], built once from the
//!   pods already on nodes, updated as a simulation places members (`add`), checked per node.
//!   [`GangPlacement`] bundles them for a gang whose members are placed one by one.
//!
//! Resources (`NodeResourcesFit`, including the `pods` count, which is part of
//! [`crate::model::Resources`]) stay with the capacity ledger.

mod diagnosis;
pub mod dynamic_resources;
pub mod inter_pod_affinity;
pub mod labels;
pub mod node_affinity;
pub mod node_ports;
pub mod node_unschedulable;
mod placement;
pub mod pod_topology_spread;
pub mod scheduling_gates;
pub mod taint_toleration;

#[cfg(test)]
pub(crate) mod fixtures;

pub use diagnosis::{Diagnosis, Reason};
pub use inter_pod_affinity::InterPodAffinity;
pub use labels::NamespaceLabels;
pub use node_ports::NodePorts;
pub use placement::{
    shortfall_message, ClusterSnapshot, GangPlacement, PodPlacement, HOSTNAME_KEY,
};
pub use pod_topology_spread::PodTopologySpread;

use crate::model::inputs::objects::{NodeInfo, PodInfo};

/// The rules that need no other pod, in kube-scheduler's order (NodeUnschedulable,
/// TaintToleration, NodeAffinity); the first that fails is the reason.
pub fn node_fits(node: &NodeInfo, pod: &PodInfo) -> Result<(), Reason> {
    node_unschedulable::check(node, pod)?;
    taint_toleration::check(node, pod)?;
    node_affinity::check(node, pod)
}

/// Whether `pod` could be placed on `node` by the rules that need no other pod: cordon,
/// taints, `nodeSelector` and required node affinity (kube-scheduler's NodeUnschedulable,
/// TaintToleration and NodeAffinity; see [`node_fits`]). Used only to simulate other
/// gang members, never to veto the pod that kube-scheduler already filtered.
pub fn node_admits(node: &NodeInfo, pod: &PodInfo) -> bool {
    node_fits(node, pod).is_ok()
}

#[cfg(test)]
mod tests;
