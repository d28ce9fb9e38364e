//! The terms a pod carries for kube-scheduler's rules, as muster parses them from the API
//! objects: the types and their constructors only. What a term says about a node (matching,
//! conflicts, counting) is a check, and lives in `rules/`, as `impl` blocks on these types.
//!
//! - `labels`: a pod's [`Labels`], and label selectors ([`LabelSelector`], their
//!   [`Requirement`]s and [`Operator`]s), as `metav1.LabelSelectorAsSelector` and the node
//!   selector requirements validate them;
//! - `node_selector`: required node affinity ([`NodeSelector`], [`NodeSelectorTerm`]);
//! - `host_port`: the host ports a pod binds ([`HostPort`]);
//! - `affinity`: a required pod (anti-)affinity term ([`PodAffinityTerm`]);
//! - `spread`: a topology spread constraint ([`SpreadConstraint`], [`InclusionPolicy`]).
//!
//! The device selectors of Dynamic Resource Allocation are read with the devices, in
//! `inputs::devices`.

mod affinity;
mod host_port;
mod labels;
mod node_selector;
mod spread;

pub use affinity::PodAffinityTerm;
pub use host_port::{HostPort, ALL_HOST_IPS};
pub use labels::{LabelSelector, Labels, Operator, Requirement};
pub use node_selector::{FieldRequirement, NodeSelector, NodeSelectorTerm, RawRequirement};
pub use spread::{InclusionPolicy, SpreadConstraint};
