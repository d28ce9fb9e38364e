//! Behaviour tests of the whole table, verb by verb and over time: no HTTP, no cluster, time
//! passed in by hand. The parts have their own unit tests next to their code.

use std::time::{Duration, Instant};

use super::*;
use crate::testkit;

mod binding;
mod competing;
mod feasibility;
mod holds_nothing;
mod huge_quorum;
mod last_look;
mod lifetimes;
mod members;
mod model_check;
mod module_map;
mod partly_bound;
mod pod_groups;
mod preemption;
mod preemption_hold;
mod retries;
mod tasks;
mod topology;
mod unseen_preemption;
mod verbs;
mod verdicts;

pub(super) use crate::testkit::pod;

pub(super) fn node(name: &str, cpu_milli: i64) -> NodeInfo {
    testkit::node(name).cpu(cpu_milli).build()
}

pub(super) fn gpu_node(name: &str, gpus: i64) -> NodeInfo {
    testkit::node(name).cpu(64_000).gpus(gpus).build()
}

/// A table plus a clock.
pub(super) struct World {
    pub table: GangTable,
    pub t0: Instant,
    pub now: Instant,
}

impl World {
    pub fn new(nodes: &[NodeInfo]) -> Self {
        let mut table = GangTable::new(ModelConfig::default());
        for n in nodes {
            table.apply_node(n.clone());
        }
        let t0 = Instant::now();
        World { table, t0, now: t0 }
    }

    pub fn add(&mut self, pods: &[&PodInfo]) {
        for p in pods {
            self.table.apply_pod((*p).clone());
        }
    }

    pub fn advance(&mut self, d: Duration) {
        self.now += d;
    }

    pub fn all_nodes(&self) -> Vec<String> {
        self.table
            .ledger
            .iter()
            .map(|(_, e)| e.name().to_string())
            .collect()
    }

    /// Nodes that pass the filter for `p` among all nodes, and the distinct failure reasons.
    pub fn filter(&mut self, p: &PodInfo) -> (Vec<String>, Vec<String>) {
        // The watch delivers a pod before kube-scheduler can ask about it.
        if self.table.pods.get(&p.uid).is_none() {
            self.table.apply_pod(p.clone());
        }
        let names = self.all_nodes();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        // As the HTTP layer does: the verdicts are for the pod as the watch reported it.
        let seen = self.table.seen_pod(&p.namespace, &p.name, &p.uid).cloned();
        let verdicts = self
            .table
            .filter(seen.as_ref().unwrap_or(p), &refs, self.now);
        let mut ok = vec![];
        let mut reasons = vec![];
        for (n, v) in names.iter().zip(verdicts) {
            match v {
                NodeVerdict::Fits => ok.push(n.clone()),
                NodeVerdict::NotOffered => {}
                NodeVerdict::Unschedulable(r) | NodeVerdict::Unresolvable(r) => {
                    if !reasons.contains(&r.to_string()) {
                        reasons.push(r.to_string())
                    }
                }
            }
        }
        (ok, reasons)
    }

    pub fn bind(&mut self, p: &PodInfo, node: &str) -> BindDecision {
        self.table.bind(
            BindRequest {
                namespace: &p.namespace,
                name: &p.name,
                uid: &p.uid,
                node,
            },
            self.now,
        )
    }

    /// Simulates the watch confirming muster's bindings.
    pub fn confirm(&mut self, decision: &BindDecision) {
        let pairs: Vec<(PodRef, NodeName)> = match decision {
            BindDecision::BindNow { pod, node } => vec![(pod.clone(), node.clone())],
            BindDecision::BindGang { members, .. } => members.clone(),
            _ => vec![],
        };
        for (r, n) in pairs {
            let mut info = self.table.pods.get(&r.uid).unwrap().info.clone();
            info.node_name = Some(n);
            self.table.apply_pod(info);
        }
    }

    /// kube-scheduler's preempt call for `p`, now.
    pub fn preempt(&mut self, p: &PodInfo, candidates: Vec<PreemptCandidate>) -> PreemptDecision {
        self.table.preempt(p, candidates, self.now)
    }

    pub fn reserved(&self, node: &str) -> i64 {
        self.table.ledger.get(node).unwrap().reserved().cpu_milli
    }

    pub fn state(&self, gang: &str) -> &'static str {
        self.table
            .views(self.now)
            .into_iter()
            .find(|v| v.name == gang)
            .map(|v| v.state.as_str())
            .unwrap_or("absent")
    }
}

pub(super) fn names(d: &BindDecision) -> Vec<String> {
    match d {
        BindDecision::BindGang { members, .. } => members
            .iter()
            .map(|(p, n)| format!("{}@{n}", p.name))
            .collect(),
        BindDecision::BindNow { pod, node } => vec![format!("{}@{node}", pod.name)],
        other => panic!("expected a binding, got {other:?}"),
    }
}

pub(super) fn wait_message(d: &BindDecision) -> &str {
    match d {
        BindDecision::Wait { message, .. } => message,
        other => panic!("expected Wait, got {other:?}"),
    }
}

pub(super) fn rejection(d: &BindDecision) -> String {
    match d {
        BindDecision::Reject(r) => r.to_string(),
        other => panic!("expected Reject, got {other:?}"),
    }
}

/// DynamicResources set-up: DeviceClass `gpu.example.com` and a node-local slice of 4 GPUs on
/// each of `nodes`.
pub(super) fn dra_devices(table: &mut GangTable, nodes: &[&str]) {
    use crate::model::inputs::devices::{Device, DeviceClass, NodeScope, Slice};
    let selector = table.compile_selector(&format!("device.driver == '{DRA_CLASS}'"));
    table.apply_device_class(
        DRA_CLASS.into(),
        DeviceClass {
            selectors: vec![selector],
        },
    );
    for n in nodes {
        table.apply_resource_slice(
            format!("{n}-gpus").into(),
            Slice {
                driver: DRA_CLASS.into(),
                pool: (*n).into(),
                generation: 1,
                slice_count: 1,
                scope: Some(NodeScope::Node((*n).into())),
                devices: (0..4)
                    .map(|i| Device {
                        name: format!("gpu-{i}").into(),
                        attributes: Default::default(),
                        capacity: Default::default(),
                        scope: None,
                        unsupported: None,
                    })
                    .collect(),
            },
        );
    }
}

const DRA_CLASS: &str = "gpu.example.com";

/// `p` with a claim of its own, `<name>-gpus`, for 4 GPUs of [`dra_devices`] (a node's all).
pub(super) fn with_dra_claim(table: &mut GangTable, mut p: PodInfo) -> PodInfo {
    use crate::model::inputs::devices::{
        AllocationMode, Claim, ClaimSource, ClaimSpec, PodClaim, Request,
    };
    let claim = format!("{}-gpus", p.name);
    table.apply_resource_claim(
        (p.namespace.clone(), std::sync::Arc::from(claim.as_str())),
        Claim {
            spec: ClaimSpec {
                requests: vec![Request {
                    name: "gpus".into(),
                    class: DRA_CLASS.into(),
                    mode: AllocationMode::Exact(4),
                    selectors: vec![],
                }],
                unsupported: None,
            },
            allocation: None,
        },
    );
    p.rules.get_or_insert_with(Default::default).claims = vec![PodClaim {
        name: "gpu".into(),
        source: ClaimSource::Claim(claim.as_str().into()),
    }];
    p
}

/// [`dra_devices`] on `nodes`, and a gang `g` of 2 whose members `p` and `q` each have a
/// claim of their own for 4 GPUs (one member per node).
pub(super) fn dra_gang(table: &mut GangTable, nodes: &[&str]) -> (PodInfo, PodInfo) {
    dra_devices(table, nodes);
    let p = with_dra_claim(table, pod("p").cpu(100).gang("g", 2).build());
    let q = with_dra_claim(table, pod("q").cpu(100).gang("g", 2).build());
    (p, q)
}
