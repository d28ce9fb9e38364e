//! The model's compact view of pods and nodes: only what gang decisions read.
//!
//! The cluster adapter (`crate::cluster::convert`) builds these from Kubernetes objects; tests
//! build them directly. Keeping them small is what lets 50,000 cached pods cost megabytes.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::membership::{Membership, MembershipError};
use super::resources::Resources;
use super::terms::{HostPort, Labels, NodeSelector, PodAffinityTerm, SpreadConstraint};

pub type PodUid = Arc<str>;
pub type NodeName = Arc<str>;

/// A pod's `status.phase`, as PodGroup statuses count it; `Pending` also stands for an
/// unknown or missing phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PodPhase {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
}

impl PodPhase {
    /// From `status.phase` (`None` or anything else: `Pending`).
    pub fn parse(phase: Option<&str>) -> Self {
        match phase {
            Some("Running") => PodPhase::Running,
            Some("Succeeded") => PodPhase::Succeeded,
            Some("Failed") => PodPhase::Failed,
            _ => PodPhase::Pending,
        }
    }
}

/// The scheduler a pod without `spec.schedulerName` gets (`v1.DefaultSchedulerName`).
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// A pod as the model sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct PodInfo {
    pub uid: PodUid,
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    /// Effective requests by kube-scheduler's formula (see [`pod_requests`]), plus one pod.
    pub requests: Resources,
    /// `spec.nodeName` as last seen from the API server.
    pub node_name: Option<NodeName>,
    /// `status.nominatedNodeName`: the node kube-scheduler's preemption freed for this pod,
    /// while its victims terminate (see `verbs::preemption_hold`), or the seat muster published
    /// for a gathered member (see `verbs::gather`).
    pub nominated_node: Option<NodeName>,
    /// A container requests or limits `muster.dev/gang` (the marker
    /// deploy/gang-admission-policy.yaml adds): kube-scheduler sends the pod to muster's gang
    /// extender, whose `managedResources` name it.
    pub gang_marker: bool,
    /// Succeeded or Failed: its requests no longer count against its node.
    pub terminal: bool,
    /// `status.phase`: what PodGroup statuses count (running, succeeded, failed).
    pub phase: PodPhase,
    pub priority: i32,
    /// Seconds since the epoch of `metadata.creationTimestamp` (orders competing gangs).
    pub created: i64,
    /// Seconds since the epoch of the bound pod's `PodScheduled=True` condition's
    /// `lastTransitionTime`: when its binding was made (the API server's binding sets it; a
    /// pod created with `spec.nodeName` has none). Tells a gang cut mid-binding from one that
    /// lost a member later (see `verbs::repair`).
    pub bound_at: Option<i64>,
    pub membership: Result<Option<Membership>, MembershipError>,
    /// `spec.schedulerName`; `None` for `default-scheduler` (what the API server defaults an
    /// empty one to, `SetDefaults_PodSpec`, pkg/apis/core/v1/defaults.go:271, v1.37.2), so the
    /// common case costs no allocation.
    pub scheduler_name: Option<Arc<str>>,
    /// The pod has gang keys but its scheduler does not call muster (not in
    /// `ModelConfig::scheduler_names`): the table stores it with `membership` cleared, as a
    /// plain pod (set by `GangTable::apply_pod`, never by converters).
    pub gang_keys_ignored: bool,
    /// Enough of the pod's placement rules to simulate where *other* members of its gang can
    /// go: kube-scheduler only tells us the feasible nodes of the pod being scheduled.
    pub node_selector: Vec<(String, String)>,
    /// Shared among the pods that carry the same list (`cluster::convert` interns them: every
    /// pod carries the two tolerations `DefaultTolerationSeconds` adds).
    pub tolerations: Arc<[Toleration]>,
    /// Read by other pods' affinity terms and spread constraints.
    pub labels: Labels,
    /// `metadata.deletionTimestamp` is set: topology spread no longer counts the pod.
    pub terminating: bool,
    /// The placement rules few pods carry, behind one pointer so that the many pods without
    /// them cost eight bytes.
    pub rules: Option<Box<PodRules>>,
    /// kube-scheduler's latest verdict on the unbound pod: the message of its
    /// `PodScheduled=False` condition with reason `Unschedulable` (see
    /// `table::evidence::SchedulerVerdicts` for when it counts).
    pub unschedulable: Option<Arc<str>>,
    /// kube-scheduler preempted the pod: its `DisruptionTarget=True` condition with reason
    /// `PreemptionByScheduler`, which kube-scheduler writes before deleting a victim
    /// (pkg/scheduler/framework/preemption/executor.go, v1.37.2).
    pub preempted_by_scheduler: bool,
}

/// A pod's required placement rules beyond `nodeSelector`, tolerations and resources.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodRules {
    /// Required node affinity; `None` when the pod has none (every node passes).
    pub node_affinity: Option<NodeSelector>,
    /// Required pod affinity terms.
    pub affinity: Vec<PodAffinityTerm>,
    /// Required pod anti-affinity terms.
    pub anti_affinity: Vec<PodAffinityTerm>,
    /// Topology spread constraints with `whenUnsatisfiable: DoNotSchedule` (the others only
    /// score).
    pub spread: Vec<SpreadConstraint>,
    /// `spec.schedulingGates` names: while any remains, the pod is not ready to be placed.
    pub scheduling_gates: Vec<String>,
    /// The host ports of its containers and sidecars (kube-scheduler's NodePorts).
    pub host_ports: Vec<HostPort>,
    /// `spec.resourceClaims` (Dynamic Resource Allocation), each with the claim made for it
    /// when it comes from a template.
    pub claims: Vec<super::devices::PodClaim>,
}

impl PodRules {
    pub fn is_empty(&self) -> bool {
        *self == PodRules::default()
    }
}

impl PodInfo {
    pub fn gang(&self) -> Option<&Membership> {
        self.membership.as_ref().ok().and_then(|m| m.as_ref())
    }

    /// The scheduler the pod asks for (`spec.schedulerName`).
    pub fn scheduler_name(&self) -> &str {
        self.scheduler_name.as_deref().unwrap_or(DEFAULT_SCHEDULER)
    }

    pub fn display_name(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Adds a toleration (a copy of the list: it may be shared with other pods).
    pub fn add_toleration(&mut self, toleration: Toleration) {
        let mut list = self.tolerations.to_vec();
        list.push(toleration);
        self.tolerations = list.into();
    }
}

/// A node as the model sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeInfo {
    pub name: NodeName,
    pub allocatable: Resources,
    pub labels: BTreeMap<String, String>,
    pub unschedulable: bool,
    /// Only NoSchedule and NoExecute taints: PreferNoSchedule never makes a node infeasible.
    pub taints: Vec<Taint>,
}

impl NodeInfo {
    /// The node's topology domain for pulling a gang together (zone, then region).
    pub fn zone(&self) -> Option<&str> {
        self.labels
            .get("topology.kubernetes.io/zone")
            .or_else(|| self.labels.get("topology.kubernetes.io/region"))
            .map(String::as_str)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: String,
}

/// Matching rules: [`Toleration::tolerates`] in `rules::taint_toleration`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Toleration {
    /// Empty = every key.
    pub key: String,
    pub operator: TolerationOperator,
    pub value: String,
    /// Empty = every effect.
    pub effect: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TolerationOperator {
    /// `Equal`, or no operator: the values must be equal.
    Equal,
    Exists,
    /// `Lt`, `Gt` (behind a feature gate that is off by default) or anything else: kube-scheduler
    /// lets such a toleration tolerate nothing.
    Unsupported,
}

impl TolerationOperator {
    pub fn parse(operator: Option<&str>) -> Self {
        match operator {
            None | Some("") | Some("Equal") => TolerationOperator::Equal,
            Some("Exists") => TolerationOperator::Exists,
            Some(_) => TolerationOperator::Unsupported,
        }
    }
}

/// One container's requests and whether it is a sidecar (an init container with
/// `restartPolicy: Always`, which keeps running beside the main containers).
pub struct ContainerRequests {
    pub requests: Resources,
    pub sidecar: bool,
}

/// kube-scheduler's request formula (`resourcehelper.PodRequests`, as used by NodeResourcesFit):
/// the larger of (main containers + sidecars) and the peak of the init phase, where each
/// regular init container runs beside the sidecars started before it; plus the pod overhead.
/// Pod-level requests (`spec.resources`), when given, replace the container sum for the
/// resources they name. One pod slot is added.
pub fn pod_requests(
    containers: &[Resources],
    init_containers: &[ContainerRequests],
    overhead: Option<&Resources>,
    pod_level: Option<&Resources>,
) -> Resources {
    let mut steady = Resources::default();
    for c in containers {
        steady.add(c);
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for init in init_containers {
        let mut during = init.requests.clone();
        if init.sidecar {
            steady.add(&init.requests);
            sidecars.add(&init.requests);
            during = sidecars.clone();
        } else {
            during.add(&sidecars);
        }
        init_peak.max_with(&during);
    }
    steady.max_with(&init_peak);
    if let Some(pod_level) = pod_level {
        if pod_level.cpu_milli > 0 {
            steady.cpu_milli = pod_level.cpu_milli;
        }
        if pod_level.memory > 0 {
            steady.memory = pod_level.memory;
        }
    }
    if let Some(o) = overhead {
        steady.add(o);
    }
    steady.pods = 1;
    steady
}

#[cfg(test)]
mod tests;
