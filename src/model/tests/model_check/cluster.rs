//! The cluster as the API server holds it, for the model check: nodes, pods (bound or not,
//! being deleted or not), and the bindings muster has in flight; objects are written as the
//! watch would deliver them (Kubernetes JSON through `apply_event`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;

use crate::model::{GangKey, GangTable, ModelConfig, PodGroupApi, PodGroupDef};

/// Node allocatable CPU, in millicores.
pub const NODE_CPU: i64 = 1000;
pub const NODES: [&str; 3] = ["n0", "n1", "n2"];
/// Slots of pods that come and go: which gang (and its quorum) and how much CPU. Two gangs
/// of quorum 2 and 3, and a plain pod. `g0` declares its quorum with muster's keys; `g1` is a
/// Volcano job (its PodGroup comes and goes) of 1 master (slot 3) and workers, with per-task
/// minimums [`G1_TASKS`].
pub const SLOTS: [(Option<(&str, u32)>, i64); 8] = [
    (Some(("g0", 2)), 300),
    (Some(("g0", 2)), 400),
    (Some(("g0", 2)), 500),
    (Some(("g1", 3)), 300),
    (Some(("g1", 3)), 200),
    (Some(("g1", 3)), 400),
    (Some(("g1", 3)), 600),
    (None, 300),
];

/// `g1`'s PodGroup's `minTaskMember`.
pub const G1_TASKS: [(&str, u32); 2] = [("master", 1), ("worker", 2)];

/// `g1`'s PodGroup, as the watch reads it.
pub fn g1_pod_group() -> PodGroupDef {
    PodGroupDef {
        api: PodGroupApi::Volcano,
        key: GangKey::new("ml", "g1"),
        min_member: 3,
        min_task_member: G1_TASKS.iter().map(|(t, n)| (t.to_string(), *n)).collect(),
        timeout: None,
        topology: None,
        min_resources: None,
    }
}

#[derive(Clone, Debug)]
pub struct SimPod {
    pub uid: String,
    pub name: String,
    /// Index into [`SLOTS`]; `None` for a pod another scheduler placed.
    pub slot: Option<usize>,
    pub cpu: i64,
    pub node: Option<String>,
    pub terminating: bool,
}

impl SimPod {
    pub fn gang(&self) -> Option<(&'static str, u32)> {
        self.slot.and_then(|s| SLOTS[s].0)
    }

    /// The task of a `g1` member: slot 3 is the master.
    pub fn task(&self) -> Option<&'static str> {
        match (self.gang(), self.slot) {
            (Some(("g1", _)), Some(3)) => Some("master"),
            (Some(("g1", _)), _) => Some("worker"),
            _ => None,
        }
    }

    pub fn object(&self) -> Pod {
        let annotations = match (self.gang(), self.task()) {
            (Some((g, _)), Some(task)) => {
                json!({"scheduling.k8s.io/group-name": g, "volcano.sh/task-spec": task})
            }
            (Some((g, q)), None) => {
                json!({"muster.dev/group": g, "muster.dev/min-available": q.to_string()})
            }
            (None, _) => json!({}),
        };
        let mut meta = json!({
            "name": self.name,
            "namespace": "ml",
            "uid": self.uid,
            "annotations": annotations,
        });
        if self.terminating {
            meta["deletionTimestamp"] = json!("2026-12-01T00:00:00Z");
        }
        serde_json::from_value(json!({
            "metadata": meta,
            "spec": {
                "nodeName": self.node,
                "containers": [{"name": "main", "resources": {"requests": {"cpu": format!("{}m", self.cpu)}}}],
            },
            "status": {"phase": if self.node.is_some() { "Running" } else { "Pending" }},
        }))
        .expect("a valid pod")
    }
}

#[derive(Clone, Debug)]
pub struct SimNode {
    pub name: String,
    /// Toggled by updates, so an update is a real change.
    pub labelled: bool,
    /// `spec.unschedulable` (cordoned): kube-scheduler's NodeUnschedulable refuses it.
    pub cordoned: bool,
}

impl SimNode {
    pub fn object(&self) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": self.name, "labels": {"pool": if self.labelled { "a" } else { "b" }}},
            "spec": {"unschedulable": self.cordoned},
            "status": {"allocatable": {"cpu": format!("{NODE_CPU}m"), "memory": "8Gi", "pods": "110"}},
        }))
        .expect("a valid node")
    }
}

#[derive(Default)]
pub struct Cluster {
    pub nodes: BTreeMap<String, SimNode>,
    pub pods: Vec<SimPod>,
    /// Bindings muster decided and has not reported yet: (pod UID, node).
    pub in_flight: Vec<(String, String)>,
    /// `g1`'s PodGroup exists.
    pub pod_group: bool,
    generation: u32,
}

impl Cluster {
    /// An empty cluster where `g1`'s PodGroup exists.
    pub fn with_pod_group() -> Self {
        Cluster {
            pod_group: true,
            ..Cluster::default()
        }
    }

    pub fn next_generation(&mut self) -> u32 {
        self.generation += 1;
        self.generation
    }

    /// The live (not being deleted) pod of a slot.
    pub fn live_in_slot(&self, slot: usize) -> Option<&SimPod> {
        self.pods
            .iter()
            .find(|p| p.slot == Some(slot) && !p.terminating)
    }

    pub fn pod(&self, uid: &str) -> Option<&SimPod> {
        self.pods.iter().find(|p| p.uid == uid)
    }

    pub fn pod_mut(&mut self, uid: &str) -> Option<&mut SimPod> {
        self.pods.iter_mut().find(|p| p.uid == uid)
    }

    pub fn in_flight_node(&self, uid: &str) -> Option<&str> {
        self.in_flight
            .iter()
            .find(|(u, _)| u == uid)
            .map(|(_, n)| n.as_str())
    }

    /// The node a pod is on or being bound to.
    pub fn node_of(&self, p: &SimPod) -> Option<String> {
        p.node
            .clone()
            .or_else(|| self.in_flight_node(&p.uid).map(String::from))
    }

    /// CPU of the pods on `node` or being bound there (what its kubelet will run).
    pub fn used(&self, node: &str) -> i64 {
        self.pods
            .iter()
            .filter(|p| self.node_of(p).as_deref() == Some(node))
            .map(|p| p.cpu)
            .sum()
    }

    /// A table as muster starts it: the Volcano PodGroup API is served, and `g1`'s PodGroup
    /// is listed if it exists (before the pods, as the watches would deliver them).
    pub fn fresh_table(&self) -> GangTable {
        let mut table = GangTable::new(ModelConfig::default());
        table.set_pod_group_api_served(PodGroupApi::Volcano, true);
        if self.pod_group {
            table.apply_pod_group(g1_pod_group());
        }
        table
    }

    /// Never half a gang: the live members of `gang` with nodes are none, or meet its quorum
    /// and every task's minimum. Otherwise, the counts.
    pub fn partial_gang(&self, gang: &str, quorum: u32) -> Option<String> {
        let placed: Vec<&SimPod> = self
            .pods
            .iter()
            .filter(|p| p.gang().is_some_and(|(g, _)| g == gang) && !p.terminating)
            .filter(|p| self.node_of(p).is_some())
            .collect();
        if placed.is_empty() {
            return None;
        }
        let mut short = (placed.len() as u32) < quorum;
        let mut counts = format!("{}/{quorum} members", placed.len());
        if gang == "g1" {
            for (task, min) in G1_TASKS {
                let n = placed.iter().filter(|p| p.task() == Some(task)).count() as u32;
                short |= n < min;
                counts.push_str(&format!(", {n}/{min} {task}"));
            }
        }
        short.then_some(counts)
    }
}
