//! Builders of pods and nodes in the model's form, for the unit tests, the router tests and
//! the benchmarks (one set, so a new field is added in one place). Not part of muster's API.
//!
//! ```
//! use muster::testkit::{node, pod};
//! let n = node("gpu-1").cpu(64_000).gpus(8).label("pool", "a").build();
//! let p = pod("worker-0").cpu(1000).gpu(1).gang("train", 8).build();
//! assert_eq!(p.gang().unwrap().min_available, Some(8));
//! assert_eq!(n.allocatable.extended("nvidia.com/gpu"), 8);
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::gather::GATHER_GATE;
use crate::model::membership::{membership_of, GROUP, MIN_AVAILABLE, TASK};
use crate::model::objects::{PodRules, Taint, Toleration, TolerationOperator};
use crate::model::terms::HostPort;
use crate::model::{NodeInfo, PodInfo, Resources};

/// The GPU resource the builders use.
pub const GPU: &str = "nvidia.com/gpu";

/// A pod in namespace `ml` with UID `uid-<name>`, requesting 100m of CPU and one pod slot,
/// in no gang, not bound.
pub fn pod(name: &str) -> PodBuilder {
    PodBuilder {
        info: PodInfo {
            uid: Arc::from(format!("uid-{name}")),
            namespace: Arc::from("ml"),
            name: Arc::from(name),
            requests: Resources {
                cpu_milli: 100,
                pods: 1,
                ..Default::default()
            },
            node_name: None,
            nominated_node: None,
            gang_marker: false,
            terminal: false,
            phase: Default::default(),
            priority: 0,
            created: 0,
            bound_at: None,
            membership: Ok(None),
            scheduler_name: None,
            gang_keys_ignored: false,
            node_selector: vec![],
            tolerations: Vec::new().into(),
            labels: Default::default(),
            terminating: false,
            rules: None,
            unschedulable: None,
            preempted_by_scheduler: false,
        },
        labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
        scheduling_group: None,
    }
}

pub struct PodBuilder {
    info: PodInfo,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    scheduling_group: Option<String>,
}

impl PodBuilder {
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.info.namespace = Arc::from(namespace);
        self
    }
    pub fn cpu(mut self, milli: i64) -> Self {
        self.info.requests.cpu_milli = milli;
        self
    }
    pub fn memory(mut self, bytes: i64) -> Self {
        self.info.requests.memory = bytes;
        self
    }
    pub fn gpu(mut self, n: i64) -> Self {
        self.info.requests.set_extended(GPU, n);
        self
    }
    /// Member of gang `name` with `muster.dev/min-available: min`.
    pub fn gang(self, name: &str, min: u32) -> Self {
        self.annotation(GROUP, name)
            .annotation(MIN_AVAILABLE, &min.to_string())
    }
    /// `spec.schedulingGroup.podGroupName`: names a Kubernetes `scheduling.k8s.io` PodGroup.
    pub fn scheduling_group(mut self, pod_group: &str) -> Self {
        self.scheduling_group = Some(pod_group.into());
        self
    }
    /// The member's task (`muster.dev/task`).
    pub fn task(self, task: &str) -> Self {
        self.annotation(TASK, task)
    }
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.into(), value.into());
        self
    }
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }
    pub fn bound(mut self, node: &str) -> Self {
        self.info.node_name = Some(Arc::from(node));
        self
    }
    /// kube-scheduler nominated `node` for the pod (`status.nominatedNodeName`).
    pub fn nominated(mut self, node: &str) -> Self {
        self.info.nominated_node = Some(Arc::from(node));
        self
    }
    /// Being deleted (`metadata.deletionTimestamp` set): it still uses its node's room.
    pub fn terminating(mut self) -> Self {
        self.info.terminating = true;
        self
    }
    /// kube-scheduler preempted it (`DisruptionTarget`, reason `PreemptionByScheduler`): being
    /// deleted too.
    pub fn preempted_by_scheduler(mut self) -> Self {
        self.info.preempted_by_scheduler = true;
        self.info.terminating = true;
        self
    }
    pub fn terminal(mut self) -> Self {
        self.info.terminal = true;
        self
    }
    /// `status.phase` (`Succeeded` and `Failed` also make the pod terminal).
    pub fn phase(mut self, phase: crate::model::objects::PodPhase) -> Self {
        use crate::model::objects::PodPhase;
        self.info.phase = phase;
        self.info.terminal = matches!(phase, PodPhase::Succeeded | PodPhase::Failed);
        self
    }
    /// Creation time, in seconds since the epoch.
    pub fn created(mut self, seconds: i64) -> Self {
        self.info.created = seconds;
        self
    }
    /// When its binding was made (its `PodScheduled=True` condition), in seconds since the
    /// epoch.
    pub fn bound_at(mut self, seconds: i64) -> Self {
        self.info.bound_at = Some(seconds);
        self
    }
    pub fn priority(mut self, p: i32) -> Self {
        self.info.priority = p;
        self
    }
    pub fn node_selector(mut self, key: &str, value: &str) -> Self {
        self.info.node_selector.push((key.into(), value.into()));
        self
    }
    /// Tolerates every taint with this key.
    pub fn tolerate(mut self, key: &str) -> Self {
        self.info.add_toleration(Toleration {
            key: key.into(),
            operator: TolerationOperator::Exists,
            value: String::new(),
            effect: String::new(),
        });
        self
    }
    /// A container asks for host port `port` (TCP, every host IP).
    pub fn host_port(mut self, port: i32) -> Self {
        let rules = self.info.rules.get_or_insert_with(Default::default);
        rules
            .host_ports
            .extend(HostPort::new(None, None, Some(port)));
        self
    }
    /// kube-scheduler's verdict on the pod: `PodScheduled=False, Unschedulable`, `message`.
    pub fn unschedulable(mut self, message: &str) -> Self {
        self.info.unschedulable = Some(Arc::from(message));
        self
    }
    /// The pod, with its gang membership read from its labels and annotations as the
    /// cluster adapter reads them.
    pub fn build(mut self) -> PodInfo {
        self.info.membership = membership_of(
            &self.info.namespace,
            &self.labels,
            &self.annotations,
            self.scheduling_group.as_deref(),
        );
        self.info.labels = self
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.info
    }
}

/// The pod as deploy/gang-admission-policy.yaml creates it: marked, and behind muster's gate.
pub fn gathered(mut p: PodInfo) -> PodInfo {
    p.gang_marker = true;
    let mut rules: PodRules = p.rules.take().map(|b| *b).unwrap_or_default();
    rules.scheduling_gates.push(GATHER_GATE.to_string());
    p.rules = Some(Box::new(rules));
    p
}

/// A schedulable node with 1 CPU, 16 GiB of memory and room for 110 pods.
pub fn node(name: &str) -> NodeBuilder {
    NodeBuilder(NodeInfo {
        name: Arc::from(name),
        allocatable: Resources {
            cpu_milli: 1000,
            memory: 16 << 30,
            pods: 110,
            ..Default::default()
        },
        labels: BTreeMap::new(),
        unschedulable: false,
        taints: vec![],
    })
}

pub struct NodeBuilder(NodeInfo);

impl NodeBuilder {
    pub fn cpu(mut self, milli: i64) -> Self {
        self.0.allocatable.cpu_milli = milli;
        self
    }
    pub fn memory(mut self, bytes: i64) -> Self {
        self.0.allocatable.memory = bytes;
        self
    }
    pub fn gpus(mut self, n: i64) -> Self {
        self.0.allocatable.set_extended(GPU, n);
        self
    }
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0.labels.insert(key.into(), value.into());
        self
    }
    /// Cordoned (`spec.unschedulable`).
    pub fn unschedulable(mut self) -> Self {
        self.0.unschedulable = true;
        self
    }
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.0.taints.push(Taint {
            key: key.into(),
            value: value.into(),
            effect: effect.into(),
        });
        self
    }
    pub fn build(self) -> NodeInfo {
        self.0
    }
}
