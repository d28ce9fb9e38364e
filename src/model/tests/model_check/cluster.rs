//! The cluster as the API server holds it, for the model check: nodes, pods (bound or not,
//! being deleted or not), and the bindings muster has in flight; objects are written as the
//! watch would deliver them (Kubernetes JSON through `apply_event`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;

/// Node allocatable CPU, in millicores.
pub const NODE_CPU: i64 = 1000;
pub const NODES: [&str; 3] = ["n0", "n1", "n2"];
/// Slots of pods that come and go: which gang (and its declared quorum) and how much CPU.
/// Two gangs of quorum 2 and 3, and a plain pod.
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

    pub fn object(&self) -> Pod {
        let annotations = match self.gang() {
            Some((g, q)) => {
                json!({"muster.dev/group": g, "muster.dev/min-available": q.to_string()})
            }
            None => json!({}),
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
}

impl SimNode {
    pub fn object(&self) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": self.name, "labels": {"pool": if self.labelled { "a" } else { "b" }}},
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
    generation: u32,
}

impl Cluster {
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
}
