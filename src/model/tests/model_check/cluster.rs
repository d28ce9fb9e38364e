//! The cluster as the API server holds it, for the model check: nodes (with memory, GPUs, a pod
//! count, a label and a taint that come and go, and a ResourceSlice of DRA devices), pods
//! (bound or not, being deleted or not, gated or not, nominated or not, with a host port or a
//! ResourceClaim made from a template), the claims (allocated by kube-scheduler's part, played
//! here, when a pod is bound), the PodGroups of the three APIs and the bindings muster has in
//! flight; objects are written as the watch would deliver them (Kubernetes JSON through
//! `apply_event`).
//!
//! Each case draws a [`Shape`]: what every node offers and what every slot's pod asks for
//! (resources, a node selector or required node affinity, a toleration, a scheduling gate of
//! another component, a priority, a host port, a device claim). The rules a pod's placement
//! must pass are evaluated here a second time, independently of `model::rules`
//! ([`Cluster::admits`]): they are what the test holds muster's seats and bindings to.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use proptest::prelude::*;
use serde_json::json;

use crate::model::gather::{GANG_MARKER, GATHER_GATE};
use crate::model::topology::PodGroupTopology;
use crate::model::{GangKey, GangTable, ModelConfig, PodGroupApi, PodGroupDef};

/// Node allocatable CPU, in millicores.
pub const NODE_CPU: i64 = 1000;
pub const NODES: [&str; 3] = ["n0", "n1", "n2"];
pub const GPU: &str = "nvidia.com/gpu";
const GI: i64 = 1 << 30;
/// The label a member's node selector or affinity asks for (`pool=a`; a node's update toggles
/// it between `a` and `b`).
const POOL: &str = "pool";
/// The taint a node may carry (`dedicated=gang:NoSchedule`), and the toleration of it.
const TAINT_KEY: &str = "dedicated";
/// Another component's scheduling gate (not muster's): the pod is placeable nowhere while it
/// stays.
pub const FOREIGN_GATE: &str = "example.com/quota";
/// The DRA driver and device class of every slice, and the template members' claims are made
/// from (one device of the class; kube-scheduler's DynamicResources allocates it).
pub const DRA_CLASS: &str = "gpu.example.com";
const TEMPLATE: &str = "one-gpu";
/// The host ports a slot's pod may ask for (NodePorts: one pod per port and node).
const HOST_PORTS: [i32; 2] = [8080, 9090];
/// The node label of the topology domains (`rack-0`, `rack-1`; some nodes have none).
pub const RACK: &str = "topology.kubernetes.io/rack";

/// Where `g0`'s members ask their gang to be, by muster's keys (drawn per case).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    Anywhere,
    /// `muster.dev/topology-required: <RACK>`: the quorum and every later member in one rack.
    Required,
    /// `muster.dev/topology-preferred: <RACK>`: one rack if any holds the quorum.
    Preferred,
}

/// Slots of pods that come and go: which gang (and its quorum by the pods' keys) and how much
/// CPU. `g0` declares its quorum with muster's keys; `g1` is a Volcano job (its PodGroup comes
/// and goes) of 1 master (slot 3) and workers, with per-task minimums [`G1_TASKS`]; `g2` is a
/// scheduler-plugins gang and `g3` a Kubernetes `scheduling.k8s.io` one, whose members' keys
/// say a quorum of 1 that their PodGroup overrules; slot 7 is a plain pod.
pub const SLOTS: [(Option<(&str, u32)>, i64); 12] = [
    (Some(("g0", 2)), 300),
    (Some(("g0", 2)), 400),
    (Some(("g0", 2)), 500),
    (Some(("g1", 3)), 300),
    (Some(("g1", 3)), 200),
    (Some(("g1", 3)), 400),
    (Some(("g1", 3)), 600),
    (None, 300),
    (Some(("g2", 1)), 200),
    (Some(("g2", 1)), 300),
    (Some(("g3", 1)), 200),
    (Some(("g3", 1)), 400),
];

/// The gangs, each with the PodGroup API that defines it (`None`: muster's keys).
/// The position of gang `name` in [`GANGS`].
pub fn gang_index(name: &str) -> usize {
    GANGS
        .iter()
        .position(|(g, _)| *g == name)
        .expect("a gang of GANGS")
}

pub const GANGS: [(&str, Option<PodGroupApi>); 4] = [
    ("g0", None),
    ("g1", Some(PodGroupApi::Volcano)),
    ("g2", Some(PodGroupApi::SchedulerPlugins)),
    ("g3", Some(PodGroupApi::Kubernetes)),
];

/// `g1`'s PodGroup's `minTaskMember`.
pub const G1_TASKS: [(&str, u32); 2] = [("master", 1), ("worker", 2)];

/// What a slot's pod may require of its node, besides resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    Anywhere,
    /// `nodeSelector: {pool: a}`.
    Selector,
    /// Required node affinity `pool In [a]`.
    AffinityIn,
    /// Required node affinity `pool NotIn [a]`.
    AffinityNotIn,
}

#[derive(Clone, Debug)]
pub struct NodeShape {
    pub memory_gi: i64,
    pub gpus: i64,
    pub pods: i64,
    /// DRA devices in the node's ResourceSlice (none: no slice).
    pub devices: usize,
    /// The value of its [`RACK`] label (`rack-<n>`), if it has one; it never changes.
    pub rack: Option<u8>,
}

#[derive(Clone, Debug)]
pub struct SlotShape {
    pub memory_gi: i64,
    pub gpus: i64,
    pub placement: Placement,
    pub tolerates: bool,
    /// Created with [`FOREIGN_GATE`].
    pub gated: bool,
    pub priority: i32,
    /// `hostPort` of its container (TCP, every host IP).
    pub host_port: Option<i32>,
    /// A claim for one device, from the template.
    pub claim: bool,
}

/// The cluster a case runs on, and what its pods ask for.
#[derive(Clone, Debug)]
pub struct Shape {
    pub nodes: Vec<NodeShape>,
    pub slots: Vec<SlotShape>,
    /// `minMember` of each PodGroup (`g1`, `g2`, `g3`) when first created.
    pub min_member: [u32; 3],
    /// The priority of each gang's members (one priority class per job, as job controllers
    /// write them), by [`GANGS`]; a slot's own priority is the plain pod's.
    pub gang_priority: [i32; 4],
    /// `g0`'s topology keys.
    pub g0_topology: Topology,
    /// `g3`'s PodGroup (Kubernetes) asks for one rack (`spec.schedulingConstraints.topology`).
    pub g3_one_rack: bool,
    /// The gang-members install: deploy/gang-admission-policy.yaml marks every gang member
    /// at creation with [`GANG_MARKER`] and muster's gate [`GATHER_GATE`], and muster's
    /// gatherer lets them through.
    pub gathered: bool,
}

pub fn shape() -> impl Strategy<Value = Shape> {
    // Mostly rack-0, so that a gang confined to one rack often has one to fit in.
    let rack = prop_oneof![1 => Just(None), 5 => Just(Some(0u8)), 2 => Just(Some(1u8))];
    let node = (1..=4i64, 0..=2i64, 2..=5i64, 0..=2usize, rack).prop_map(
        |(memory_gi, gpus, pods, devices, rack)| NodeShape {
            memory_gi,
            gpus,
            pods,
            devices,
            rack,
        },
    );
    let topology = prop_oneof![
        1 => Just(Topology::Anywhere),
        2 => Just(Topology::Required),
        1 => Just(Topology::Preferred),
    ];
    let placement = prop_oneof![
        6 => Just(Placement::Anywhere),
        1 => Just(Placement::Selector),
        1 => Just(Placement::AffinityIn),
        1 => Just(Placement::AffinityNotIn),
    ];
    let slot = (
        0..=2i64,
        proptest::bool::weighted(0.2),
        placement,
        any::<bool>(),
        proptest::bool::weighted(0.1),
        prop_oneof![Just(0), Just(100), Just(1000)],
        proptest::option::weighted(0.25, proptest::sample::select(&HOST_PORTS[..])),
        proptest::bool::weighted(0.3),
    )
        .prop_map(
            |(memory_gi, gpu, placement, tolerates, gated, priority, host_port, claim)| SlotShape {
                memory_gi,
                gpus: i64::from(gpu),
                placement,
                tolerates,
                gated,
                priority,
                host_port,
                claim,
            },
        );
    (
        proptest::collection::vec(node, NODES.len()),
        proptest::collection::vec(slot, SLOTS.len()),
        (2..=4u32, 1..=3u32, 1..=3u32),
        proptest::array::uniform4(prop_oneof![Just(0), Just(100), Just(1000)]),
        topology,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(nodes, slots, (a, b, c), gang_priority, g0_topology, g3_one_rack, gathered)| Shape {
                nodes,
                slots,
                min_member: [a, b, c],
                gang_priority,
                g0_topology,
                g3_one_rack,
                gathered,
            },
        )
}

/// `gang`'s PodGroup with `min_member`, as the watch reads it (`g3`'s with one rack required
/// when the shape says so).
pub fn pod_group(shape: &Shape, gang: &str, min_member: u32) -> Option<PodGroupDef> {
    let api = GANGS.iter().find(|(g, _)| *g == gang)?.1?;
    Some(PodGroupDef {
        api,
        key: GangKey::new("ml", gang),
        min_member,
        min_task_member: if gang == "g1" {
            G1_TASKS.iter().map(|(t, n)| (t.to_string(), *n)).collect()
        } else {
            BTreeMap::new()
        },
        timeout: None,
        topology: (gang == "g3" && shape.g3_one_rack)
            .then(|| PodGroupTopology::Required(RACK.into())),
        min_resources: None,
    })
}

/// Requests, as the ledger counts them: CPU (milli), memory (bytes), GPUs, pods.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Use {
    pub cpu: i64,
    pub memory: i64,
    pub gpus: i64,
    pub pods: i64,
}

impl Use {
    pub fn of(r: &crate::model::Resources) -> Use {
        Use {
            cpu: r.cpu_milli,
            memory: r.memory,
            gpus: r
                .extended
                .iter()
                .find(|(n, _)| &**n == GPU)
                .map_or(0, |(_, v)| *v),
            pods: r.pods,
        }
    }

    pub fn plus(self, o: Use) -> Use {
        Use {
            cpu: self.cpu + o.cpu,
            memory: self.memory + o.memory,
            gpus: self.gpus + o.gpus,
            pods: self.pods + o.pods,
        }
    }

    /// Every resource within `cap`.
    pub fn within(self, cap: Use) -> bool {
        self.cpu <= cap.cpu
            && self.memory <= cap.memory
            && self.gpus <= cap.gpus
            && self.pods <= cap.pods
    }
}

#[derive(Clone, Debug)]
pub struct SimPod {
    pub uid: String,
    pub name: String,
    /// Index into [`SLOTS`]; `None` for a pod another scheduler placed.
    pub slot: Option<usize>,
    pub requests: Use,
    pub node: Option<String>,
    pub terminating: bool,
    pub placement: Placement,
    pub tolerates: bool,
    pub gated: bool,
    /// Created marked by the admission policy (the marker resource stays for good).
    pub marked: bool,
    /// Behind muster's gate (the policy adds it to every member it marks; muster removes it).
    pub muster_gate: bool,
    pub priority: i32,
    /// `status.nominatedNodeName` (kube-scheduler's preemption, or muster's seat).
    pub nominated: Option<String>,
    pub host_port: Option<i32>,
    /// The name of the claim made for it from the template (`<name>-gpu`).
    pub claim: Option<String>,
    /// Its topology keys (`g0`'s members only).
    pub topology: Topology,
    /// The restart attempt of its gang's job it was made for (its generation key, when above 0).
    pub attempt: u32,
    /// Its gang's job restarted since it was made: it is not a member any more (its keys still
    /// name the gang, with an older attempt), and may still run until its controller deletes it.
    pub superseded: bool,
}

impl SimPod {
    /// A pod in no gang and no slot, bound to `node` by someone other than muster (another
    /// scheduler, or kube-scheduler alone): `<kind>-<g>`, asking for `cpu` millicores.
    pub fn bound_outside(kind: &str, g: u32, node: &str, cpu: i64, priority: i32) -> SimPod {
        SimPod {
            uid: format!("uid-{kind}-{g}"),
            name: format!("{kind}-{g}"),
            slot: None,
            requests: Use {
                cpu,
                pods: 1,
                ..Use::default()
            },
            node: Some(node.to_string()),
            terminating: false,
            placement: Placement::Anywhere,
            tolerates: false,
            gated: false,
            marked: false,
            muster_gate: false,
            priority,
            nominated: None,
            host_port: None,
            claim: None,
            topology: Topology::Anywhere,
            attempt: 0,
            superseded: false,
        }
    }

    /// The gang the pod is a member of: its keys' gang, unless its job restarted since.
    pub fn gang(&self) -> Option<(&'static str, u32)> {
        self.keys_gang().filter(|_| !self.superseded)
    }

    /// The gang its keys name, whatever its generation.
    pub fn keys_gang(&self) -> Option<(&'static str, u32)> {
        self.slot.and_then(|s| SLOTS[s].0)
    }

    /// The task of a `g1` member: slot 3 is the master.
    pub fn task(&self) -> Option<&'static str> {
        match (self.keys_gang(), self.slot) {
            (Some(("g1", _)), Some(3)) => Some("master"),
            (Some(("g1", _)), _) => Some("worker"),
            _ => None,
        }
    }

    pub fn object(&self) -> Pod {
        let (mut annotations, mut labels, scheduling_group) = match (self.keys_gang(), self.task())
        {
            (Some((g, _)), Some(task)) => (
                json!({"scheduling.k8s.io/group-name": g, "volcano.sh/task-spec": task}),
                json!({}),
                None,
            ),
            (Some(("g2", q)), None) => (
                json!({"muster.dev/min-available": q.to_string()}),
                json!({"scheduling.x-k8s.io/pod-group": "g2"}),
                None,
            ),
            (Some(("g3", q)), None) => (
                json!({"muster.dev/group": "g3", "muster.dev/min-available": q.to_string()}),
                json!({}),
                Some(json!({"podGroupName": "g3"})),
            ),
            (Some((g, q)), None) => {
                let mut keys =
                    json!({"muster.dev/group": g, "muster.dev/min-available": q.to_string()});
                match self.topology {
                    Topology::Anywhere => {}
                    Topology::Required => keys["muster.dev/topology-required"] = json!(RACK),
                    Topology::Preferred => keys["muster.dev/topology-preferred"] = json!(RACK),
                }
                (keys, json!({}), None)
            }
            (None, _) => (json!({}), json!({}), None),
        };
        // Each gang's generation under another key: muster's own (g0, g3), JobSet's label
        // (g2), Volcano's annotation (g1). Attempt 0 carries none, as a job never restarted.
        if self.attempt > 0 {
            let attempt = json!(self.attempt.to_string());
            match self.keys_gang() {
                Some(("g1", _)) => annotations["volcano.sh/job-version"] = attempt,
                Some(("g2", _)) => labels["jobset.sigs.k8s.io/restart-attempt"] = attempt,
                Some(_) => annotations["muster.dev/generation"] = attempt,
                None => {}
            }
        }
        let mut meta = json!({
            "name": self.name,
            "namespace": "ml",
            "uid": self.uid,
            "annotations": annotations,
            "labels": labels,
        });
        if self.terminating {
            meta["deletionTimestamp"] = json!("2026-12-01T00:00:00Z");
        }
        let mut requests = json!({
            "cpu": format!("{}m", self.requests.cpu),
            "memory": self.requests.memory.to_string(),
        });
        if self.requests.gpus > 0 {
            requests[GPU] = json!(self.requests.gpus.to_string());
        }
        let mut resources = json!({"requests": requests});
        if self.marked {
            resources["requests"][GANG_MARKER] = json!("1");
            resources["limits"] = json!({GANG_MARKER: "1"});
        }
        let mut container = json!({"name": "main", "resources": resources});
        if let Some(port) = self.host_port {
            container["ports"] =
                json!([{"containerPort": port, "hostPort": port, "protocol": "TCP"}]);
        }
        let mut spec = json!({
            "nodeName": self.node,
            "priority": self.priority,
            "containers": [container],
        });
        if self.claim.is_some() {
            spec["resourceClaims"] =
                json!([{"name": "gpu", "resourceClaimTemplateName": TEMPLATE}]);
        }
        match self.placement {
            Placement::Anywhere => {}
            Placement::Selector => spec["nodeSelector"] = json!({POOL: "a"}),
            Placement::AffinityIn | Placement::AffinityNotIn => {
                let operator = if self.placement == Placement::AffinityIn {
                    "In"
                } else {
                    "NotIn"
                };
                spec["affinity"] = json!({"nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": POOL, "operator": operator, "values": ["a"]}]}
                    ]}
                }});
            }
        }
        if self.tolerates {
            spec["tolerations"] = json!([
                {"key": TAINT_KEY, "operator": "Equal", "value": "gang", "effect": "NoSchedule"}
            ]);
        }
        let gates: Vec<serde_json::Value> =
            [(self.muster_gate, GATHER_GATE), (self.gated, FOREIGN_GATE)]
                .into_iter()
                .filter(|(on, _)| *on)
                .map(|(_, g)| json!({"name": g}))
                .collect();
        if !gates.is_empty() {
            spec["schedulingGates"] = json!(gates);
        }
        if let Some(g) = scheduling_group {
            spec["schedulingGroup"] = g;
        }
        let mut status = json!({"phase": if self.node.is_some() { "Running" } else { "Pending" }});
        if let Some(n) = &self.nominated {
            status["nominatedNodeName"] = json!(n);
        }
        if let Some(claim) = &self.claim {
            status["resourceClaimStatuses"] = json!([{"name": "gpu", "resourceClaimName": claim}]);
        }
        serde_json::from_value(json!({"metadata": meta, "spec": spec, "status": status}))
            .expect("a valid pod")
    }
}

#[derive(Clone, Debug)]
pub struct SimNode {
    pub name: String,
    pub shape: NodeShape,
    /// `pool=a` (else `pool=b`); toggled by updates, so an update is a real change.
    pub labelled: bool,
    /// `spec.unschedulable` (cordoned): kube-scheduler's NodeUnschedulable refuses it.
    pub cordoned: bool,
    /// Carries `dedicated=gang:NoSchedule`.
    pub tainted: bool,
}

impl SimNode {
    pub fn allocatable(&self) -> Use {
        Use {
            cpu: NODE_CPU,
            memory: self.shape.memory_gi * GI,
            gpus: self.shape.gpus,
            pods: self.shape.pods,
        }
    }

    pub fn object(&self) -> Node {
        let mut allocatable = json!({
            "cpu": format!("{NODE_CPU}m"),
            "memory": format!("{}Gi", self.shape.memory_gi),
            "pods": self.shape.pods.to_string(),
        });
        if self.shape.gpus > 0 {
            allocatable[GPU] = json!(self.shape.gpus.to_string());
        }
        let taints = if self.tainted {
            json!([{"key": TAINT_KEY, "value": "gang", "effect": "NoSchedule"}])
        } else {
            json!([])
        };
        let mut labels = json!({POOL: if self.labelled { "a" } else { "b" }});
        if let Some(r) = self.shape.rack {
            labels[RACK] = json!(format!("rack-{r}"));
        }
        serde_json::from_value(json!({
            "metadata": {"name": self.name, "labels": labels},
            "spec": {"unschedulable": self.cordoned, "taints": taints},
            "status": {"allocatable": allocatable},
        }))
        .expect("a valid node")
    }

    /// The node's ResourceSlice (a pool of its own, one slice), if it has devices.
    pub fn slice(&self) -> Option<ResourceSlice> {
        let devices: Vec<serde_json::Value> = (0..self.shape.devices)
            .map(|i| json!({"name": format!("gpu-{i}")}))
            .collect();
        (!devices.is_empty()).then(|| {
            serde_json::from_value(json!({
                "metadata": {"name": format!("{}-gpus", self.name)},
                "spec": {
                    "driver": DRA_CLASS,
                    "pool": {"name": self.name, "generation": 1, "resourceSliceCount": 1},
                    "nodeName": self.name,
                    "devices": devices,
                },
            }))
            .expect("a valid slice")
        })
    }
}

/// A claim's spec, the template's: one device of the class.
fn claim_spec() -> serde_json::Value {
    json!({"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": DRA_CLASS, "allocationMode": "ExactCount", "count": 1}}
    ]}})
}

pub fn device_class() -> DeviceClass {
    serde_json::from_value(json!({
        "metadata": {"name": DRA_CLASS},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == '{DRA_CLASS}'")}}]},
    }))
    .expect("a valid device class")
}

pub fn claim_template() -> ResourceClaimTemplate {
    serde_json::from_value(json!({
        "metadata": {"name": TEMPLATE, "namespace": "ml"},
        "spec": {"spec": claim_spec()},
    }))
    .expect("a valid claim template")
}

pub struct Cluster {
    pub shape: Shape,
    pub nodes: BTreeMap<String, SimNode>,
    pub pods: Vec<SimPod>,
    /// Bindings muster decided and has not reported yet: (pod UID, node).
    pub in_flight: Vec<(String, String)>,
    /// The PodGroups of `g1`, `g2`, `g3` that exist: their `minMember`.
    pub pod_groups: [Option<u32>; 3],
    /// The claims made from the template, by name: the node and device allocated, if any.
    pub claims: BTreeMap<String, Option<(String, usize)>>,
    /// The latest `minMember` of each, also after its deletion (the quorum its members were
    /// bound under).
    pub last_min_member: [u32; 3],
    generation: u32,
    /// Each gang's (of [`GANGS`]) job restart attempt: new members are made for it.
    pub attempts: [u32; 4],
}

impl Cluster {
    /// An empty cluster of `shape`, where every gang's PodGroup exists.
    pub fn new(shape: Shape) -> Self {
        let min = shape.min_member;
        Cluster {
            shape,
            nodes: BTreeMap::new(),
            pods: Vec::new(),
            in_flight: Vec::new(),
            pod_groups: min.map(Some),
            claims: BTreeMap::new(),
            last_min_member: min,
            generation: 0,
            attempts: [0; 4],
        }
    }

    pub fn next_generation(&mut self) -> u32 {
        self.generation += 1;
        self.generation
    }

    /// A new pod for `slot`, as its shape says.
    pub fn new_pod(&mut self, slot: usize) -> SimPod {
        let g = self.next_generation();
        let s = &self.shape.slots[slot];
        SimPod {
            uid: format!("uid-{slot}-{g}"),
            name: format!("p{slot}-{g}"),
            slot: Some(slot),
            requests: Use {
                cpu: SLOTS[slot].1,
                memory: s.memory_gi * GI,
                gpus: s.gpus,
                pods: 1,
            },
            node: None,
            terminating: false,
            placement: s.placement,
            tolerates: s.tolerates,
            gated: s.gated,
            marked: self.shape.gathered && SLOTS[slot].0.is_some(),
            muster_gate: self.shape.gathered && SLOTS[slot].0.is_some(),
            priority: match SLOTS[slot].0 {
                Some((gang, _)) => {
                    let i = GANGS.iter().position(|(g, _)| *g == gang).expect("a gang");
                    self.shape.gang_priority[i]
                }
                None => s.priority,
            },
            nominated: None,
            host_port: s.host_port,
            claim: s.claim.then(|| format!("p{slot}-{g}-gpu")),
            topology: match SLOTS[slot].0 {
                Some(("g0", _)) => self.shape.g0_topology,
                _ => Topology::Anywhere,
            },
            attempt: SLOTS[slot]
                .0
                .map_or(0, |(gang, _)| self.attempts[gang_index(gang)]),
            superseded: false,
        }
    }

    /// The job of gang `gang` restarts: its attempt goes up, and its pods are superseded.
    /// Returns them.
    pub fn restart_job(&mut self, gang: usize) -> Vec<String> {
        self.attempts[gang] += 1;
        let name = GANGS[gang].0;
        let mut old = Vec::new();
        for p in &mut self.pods {
            if p.gang().is_some_and(|(g, _)| g == name) {
                p.superseded = true;
                old.push(p.uid.clone());
            }
        }
        old
    }

    /// The live (not being deleted) pod of a slot, of its gang's newest attempt.
    pub fn live_in_slot(&self, slot: usize) -> Option<&SimPod> {
        self.pods
            .iter()
            .find(|p| p.slot == Some(slot) && !p.terminating && !p.superseded)
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

    /// What the pods on `node` or being bound there request (what its kubelet will run).
    pub fn used(&self, node: &str) -> Use {
        self.pods
            .iter()
            .filter(|p| self.node_of(p).as_deref() == Some(node))
            .fold(Use::default(), |u, p| u.plus(p.requests))
    }

    /// Whether a pod is being deleted on `node` (its room is still in use).
    pub fn terminating_on(&self, node: &str) -> bool {
        // Bound there, or being bound there (muster's binding in flight: its room counts there
        // too, and it is leaving all the same).
        self.pods
            .iter()
            .any(|p| p.terminating && self.node_of(p).as_deref() == Some(node))
    }

    /// kube-scheduler's rules that need no other pod, evaluated here independently:
    /// NodeUnschedulable (no pod here tolerates the cordon), TaintToleration (`dedicated=gang`
    /// with effect NoSchedule) and NodeAffinity (`nodeSelector` and required affinity on
    /// `pool`).
    pub fn admits(&self, node: &str, p: &SimPod) -> bool {
        self.admits_for(node, p, false)
    }

    /// [`Cluster::admits`] for a seat: the host ports of pods being deleted there do not count
    /// (room a preemption frees is held while its victims terminate, see `preemption_hold`),
    /// nor do devices (see `Check::check_ports`).
    pub fn admits_seat(&self, node: &str, p: &SimPod) -> bool {
        self.admits_for(node, p, true)
    }

    fn admits_for(&self, node: &str, p: &SimPod, seat: bool) -> bool {
        let Some(n) = self.nodes.get(node) else {
            return false;
        };
        let affinity = match p.placement {
            Placement::Anywhere => true,
            Placement::Selector | Placement::AffinityIn => n.labelled,
            Placement::AffinityNotIn => !n.labelled,
        };
        !n.cordoned
            && (!n.tainted || p.tolerates)
            && affinity
            && self.ports_free(node, p, !seat)
            && (seat || self.claim_fits(node, p))
    }

    /// NodePorts: no other pod on `node` (bound or being bound; being deleted too, with
    /// `leaving`) uses the pod's host port.
    pub fn ports_free(&self, node: &str, p: &SimPod, leaving: bool) -> bool {
        p.host_port.is_none_or(|port| {
            !self.pods.iter().any(|q| {
                q.uid != p.uid
                    && q.host_port == Some(port)
                    && (leaving || !q.terminating)
                    && self.node_of(q).as_deref() == Some(node)
            })
        })
    }

    /// DynamicResources: the pod's claim is allocated on `node`, or one of the node's devices
    /// is in no claim's allocation.
    pub fn claim_fits(&self, node: &str, p: &SimPod) -> bool {
        match p.claim.as_ref().and_then(|c| self.claims.get(c)) {
            None => true,
            Some(Some((n, _))) => n == node,
            Some(None) => self.free_device(node).is_some(),
        }
    }

    /// The devices of `node`'s slice (none while the node does not exist).
    pub fn devices(&self, node: &str) -> usize {
        self.nodes.get(node).map_or(0, |n| n.shape.devices)
    }

    /// The first device of `node` in no claim's allocation.
    pub fn free_device(&self, node: &str) -> Option<usize> {
        (0..self.devices(node)).find(|d| {
            !self
                .claims
                .values()
                .any(|a| a.as_ref().is_some_and(|(n, i)| n == node && i == d))
        })
    }

    /// kube-scheduler's DynamicResources, as the pod is bound to `node`: its claim gets the
    /// node's first free device (kept if already allocated there). `Err` when no device is
    /// free there: the binding would need a device allocated twice.
    pub fn allocate(&mut self, uid: &str, node: &str) -> Result<Option<ResourceClaim>, String> {
        let Some(claim) = self.pod(uid).and_then(|p| p.claim.clone()) else {
            return Ok(None);
        };
        match self.claims.get(&claim) {
            Some(Some((n, _))) if n == node => return Ok(None),
            Some(Some((n, d))) => {
                return Err(format!(
                    "claim {claim} is allocated on {n} (gpu-{d}), not {node}"
                ))
            }
            Some(None) => {}
            None => return Err(format!("claim {claim} does not exist")),
        }
        let device = self.free_device(node).ok_or_else(|| {
            format!(
                "claim {claim} bound to {node}, whose {} devices are all allocated",
                self.devices(node)
            )
        })?;
        self.claims
            .insert(claim.clone(), Some((node.to_string(), device)));
        Ok(Some(self.claim_object(&claim)))
    }

    /// The pod's binding did not happen: its claim's allocation is taken back (kube-scheduler's
    /// DynamicResources `Unreserve`).
    pub fn deallocate(&mut self, uid: &str) -> Option<ResourceClaim> {
        let claim = self.pod(uid)?.claim.clone()?;
        let allocation = self.claims.get_mut(&claim)?;
        allocation.take()?;
        Some(self.claim_object(&claim))
    }

    /// The claim as the claim watch delivers it.
    pub fn claim_object(&self, name: &str) -> ResourceClaim {
        let mut status = json!({});
        if let Some(Some((node, device))) = self.claims.get(name) {
            status["allocation"] = json!({
                "devices": {"results": [
                    {"request": "gpu", "driver": DRA_CLASS, "pool": node, "device": format!("gpu-{device}")}
                ]},
                "nodeSelector": {"nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]},
            });
        }
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ml"},
            "spec": claim_spec(),
            "status": status,
        }))
        .expect("a valid claim")
    }

    /// A table as muster starts it: every PodGroup API is served, and the PodGroups and the
    /// DRA objects that exist are listed (before the pods, as the watches would deliver them).
    pub fn fresh_table(&self) -> GangTable {
        use crate::cluster::watch::{apply_event, Relist};
        use kube::runtime::watcher::Event;
        let mut table = GangTable::new(ModelConfig::default());
        for api in PodGroupApi::ALL {
            table.set_pod_group_api_served(api, true);
        }
        apply_event(
            &mut table,
            &mut Relist::default(),
            Event::Apply(device_class()),
        );
        apply_event(
            &mut table,
            &mut Relist::default(),
            Event::Apply(claim_template()),
        );
        let mut slices = Relist::default();
        for n in self.nodes.values() {
            if let Some(s) = n.slice() {
                apply_event(&mut table, &mut slices, Event::Apply(s));
            }
        }
        let mut claims = Relist::default();
        for c in self.claims.keys() {
            apply_event(&mut table, &mut claims, Event::Apply(self.claim_object(c)));
        }
        for (i, (gang, _)) in GANGS[1..].iter().enumerate() {
            if let Some(def) = self.pod_groups[i].and_then(|m| pod_group(&self.shape, gang, m)) {
                table.apply_pod_group(def);
            }
        }
        table
    }

    /// The quorum `gang` must reach: its PodGroup's `minMember` (the latest, when it was
    /// deleted), else its members' key; and whether `g1`'s per-task minimums count (only when
    /// `minMember` covers their sum, as Volcano's scheduler checks them).
    pub fn quorum(&self, gang: &str) -> (u32, bool) {
        match GANGS.iter().position(|(g, _)| *g == gang) {
            Some(i) if i > 0 => {
                let q = self.last_min_member[i - 1];
                let tasks: u32 = G1_TASKS.iter().map(|(_, n)| n).sum();
                (q, gang == "g1" && tasks <= q)
            }
            _ => (2, false),
        }
    }

    /// Never half a gang: the live members of `gang` with nodes are none, or meet its quorum
    /// and every task's minimum. Otherwise, the counts.
    pub fn partial_gang(&self, gang: &str) -> Option<String> {
        let (quorum, tasks) = self.quorum(gang);
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
        if tasks {
            for (task, min) in G1_TASKS {
                let n = placed.iter().filter(|p| p.task() == Some(task)).count() as u32;
                short |= n < min;
                counts.push_str(&format!(", {n}/{min} {task}"));
            }
        }
        short.then_some(counts)
    }

    /// The rack of `node` (by its shape: the label never changes, and a deleted node's pods
    /// keep the rack it had).
    pub fn rack(&self, node: &str) -> Option<u8> {
        let i = NODES.iter().position(|n| *n == node)?;
        self.shape.nodes[i].rack
    }

    /// The highest priority among `gang`'s members (its priority, as muster orders gangs).
    pub fn gang_priority(&self, gang: &str) -> Option<i32> {
        self.pods
            .iter()
            .filter(|p| p.gang().is_some_and(|(g, _)| g == gang))
            .map(|p| p.priority)
            .max()
    }
}
