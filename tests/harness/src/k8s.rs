//! Kubernetes helpers for tests: fake nodes, gang pods, and what the scheduler did with them.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, Event, Namespace, Node, NodeAffinity, NodeCondition,
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, NodeStatus,
    PersistentVolumeClaimVolumeSource, Pod, PodAffinity, PodAffinityTerm, PodAntiAffinity,
    PodSchedulingGate, PodSchedulingGroup, PodSpec, ResourceRequirements, TopologySpreadConstraint,
    Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};

pub const GPU: &str = "nvidia.com/gpu";
pub const MUSTER_GROUP: &str = "muster.dev/group";
pub const MUSTER_MIN_AVAILABLE: &str = "muster.dev/min-available";
pub const MUSTER_GANG_TIMEOUT: &str = "muster.dev/gang-timeout";

/// Capacity (= allocatable) of a fake node.
#[derive(Debug, Clone)]
pub struct NodeShape {
    pub cpu: String,
    pub memory: String,
    pub pods: u32,
    pub gpus: Option<u32>,
    pub labels: BTreeMap<String, String>,
    /// `(key, value, effect)` taints the node is created with.
    pub taints: Vec<(String, String, String)>,
}

impl NodeShape {
    /// `cpu` cores (e.g. `"150m"`, `"4"`), 16Gi memory, 110 pods, no GPUs.
    pub fn cpu(cpu: &str) -> Self {
        Self {
            cpu: cpu.to_string(),
            memory: "16Gi".into(),
            pods: 110,
            gpus: None,
            labels: BTreeMap::new(),
            taints: Vec::new(),
        }
    }

    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.taints.push((key.into(), value.into(), effect.into()));
        self
    }

    pub fn memory(mut self, m: &str) -> Self {
        self.memory = m.to_string();
        self
    }

    pub fn pods(mut self, n: u32) -> Self {
        self.pods = n;
        self
    }

    pub fn gpus(mut self, n: u32) -> Self {
        self.gpus = Some(n);
        self
    }

    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.labels.insert(k.into(), v.into());
        self
    }
}

/// Creates a Ready node with status.capacity = status.allocatable = `shape`, labelled
/// `kubernetes.io/hostname=<name>` (no kubelet: nothing will ever update it).
pub async fn add_node(client: &Client, name: &str, shape: &NodeShape) -> Result<Node> {
    let mut res = BTreeMap::new();
    res.insert("cpu".to_string(), Quantity(shape.cpu.clone()));
    res.insert("memory".to_string(), Quantity(shape.memory.clone()));
    res.insert("pods".to_string(), Quantity(shape.pods.to_string()));
    res.insert("ephemeral-storage".to_string(), Quantity("100Gi".into()));
    if let Some(g) = shape.gpus {
        res.insert(GPU.to_string(), Quantity(g.to_string()));
    }
    let mut labels = shape.labels.clone();
    labels.insert("kubernetes.io/hostname".into(), name.into());
    labels.insert("kubernetes.io/os".into(), "linux".into());
    labels.insert("kubernetes.io/arch".into(), "amd64".into());
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let node = Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels),
            ..Default::default()
        },
        spec: (!shape.taints.is_empty()).then(|| k8s_openapi::api::core::v1::NodeSpec {
            taints: Some(
                shape
                    .taints
                    .iter()
                    .map(|(key, value, effect)| k8s_openapi::api::core::v1::Taint {
                        key: key.clone(),
                        value: Some(value.clone()),
                        effect: effect.clone(),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        status: Some(NodeStatus {
            capacity: Some(res.clone()),
            allocatable: Some(res),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: Some("KubeletReady".into()),
                message: Some("fake node (muster-harness)".into()),
                last_heartbeat_time: Some(now.clone()),
                last_transition_time: Some(now),
            }]),
            ..Default::default()
        }),
    };
    let api: Api<Node> = Api::all(client.clone());
    let created = api
        .create(&PostParams::default(), &node)
        .await
        .with_context(|| format!("creating node {name}"))?;
    let has_status = created
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .is_some_and(|a| !a.is_empty());
    if has_status {
        return Ok(created);
    }
    // Status dropped on create: set it through the status subresource.
    let mut with_status = created;
    with_status.status = node.status;
    api.replace_status(name, &PostParams::default(), &with_status)
        .await
        .with_context(|| format!("setting status of node {name}"))
}

pub async fn delete_node(client: &Client, name: &str) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("deleting node {name}")),
    }
}

pub async fn create_namespace(client: &Client, name: &str) -> Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("creating namespace {name}")),
    }
}

/// Which keys mark a pod as a gang member: muster's own or another system's (the model's
/// `GangKey` is a gang's (namespace, name), not this).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyScheme {
    /// annotations `muster.dev/group` + `muster.dev/min-available`
    Muster,
    /// label `scheduling.x-k8s.io/pod-group` (+ `muster.dev/min-available`)
    Coscheduling,
    /// annotation `scheduling.k8s.io/group-name` (+ `muster.dev/min-available`)
    K8sGroupName,
    /// annotation `scheduling.volcano.sh/group-name` (+ `muster.dev/min-available`)
    Volcano,
    /// label `kueue.x-k8s.io/pod-group-name` + annotation `kueue.x-k8s.io/pod-group-total-count`
    Kueue,
}

impl KeyScheme {
    pub const ALL_COMPATIBLE: [KeyScheme; 4] = [
        KeyScheme::Coscheduling,
        KeyScheme::K8sGroupName,
        KeyScheme::Volcano,
        KeyScheme::Kueue,
    ];

    /// Short name (usable in object names).
    pub fn slug(self) -> &'static str {
        match self {
            KeyScheme::Muster => "muster",
            KeyScheme::Coscheduling => "coscheduling",
            KeyScheme::K8sGroupName => "k8s-group-name",
            KeyScheme::Volcano => "volcano",
            KeyScheme::Kueue => "kueue",
        }
    }

    fn apply(self, meta: &mut ObjectMeta, group: &str, min_available: u32) {
        let labels = meta.labels.get_or_insert_with(BTreeMap::new);
        let mut l = |k: &str, v: String| {
            labels.insert(k.into(), v);
        };
        let mut ann = BTreeMap::new();
        match self {
            KeyScheme::Muster => {
                ann.insert(MUSTER_GROUP.to_string(), group.to_string());
                ann.insert(MUSTER_MIN_AVAILABLE.to_string(), min_available.to_string());
            }
            KeyScheme::Coscheduling => {
                l("scheduling.x-k8s.io/pod-group", group.into());
                ann.insert(MUSTER_MIN_AVAILABLE.to_string(), min_available.to_string());
            }
            KeyScheme::K8sGroupName => {
                ann.insert("scheduling.k8s.io/group-name".into(), group.into());
                ann.insert(MUSTER_MIN_AVAILABLE.to_string(), min_available.to_string());
            }
            KeyScheme::Volcano => {
                ann.insert("scheduling.volcano.sh/group-name".into(), group.into());
                ann.insert(MUSTER_MIN_AVAILABLE.to_string(), min_available.to_string());
            }
            KeyScheme::Kueue => {
                l("kueue.x-k8s.io/pod-group-name", group.into());
                ann.insert(
                    "kueue.x-k8s.io/pod-group-total-count".into(),
                    min_available.to_string(),
                );
            }
        }
        meta.annotations
            .get_or_insert_with(BTreeMap::new)
            .extend(ann);
    }
}

/// Builds a pod with one busybox container and the given requests.
#[derive(Debug, Clone)]
pub struct PodBuilder {
    ns: String,
    name: String,
    cpu: Option<String>,
    memory: Option<String>,
    gpus: Option<u32>,
    gang: Option<(KeyScheme, String, u32)>,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    node_selector: BTreeMap<String, String>,
    priority_class: Option<String>,
    scheduler_name: Option<String>,
    scheduling_group: Option<String>,
    affinity: Affinity,
    spread: Vec<TopologySpreadConstraint>,
    scheduling_gates: Vec<String>,
    host_port: Option<i32>,
    claim: Option<String>,
}

impl PodBuilder {
    pub fn new(ns: &str, name: &str) -> Self {
        Self {
            ns: ns.into(),
            name: name.into(),
            cpu: Some("100m".into()),
            memory: Some("64Mi".into()),
            gpus: None,
            gang: None,
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            node_selector: BTreeMap::new(),
            priority_class: None,
            scheduler_name: None,
            scheduling_group: None,
            affinity: Affinity::default(),
            spread: Vec::new(),
            scheduling_gates: Vec::new(),
            host_port: None,
            claim: None,
        }
    }

    /// The container asks for host port `port` (TCP, every host IP): kube-scheduler's NodePorts
    /// plugin puts at most one such pod on a node.
    pub fn host_port(mut self, port: i32) -> Self {
        self.host_port = Some(port);
        self
    }

    /// A volume from PersistentVolumeClaim `claim` (kube-scheduler's VolumeBinding plugin
    /// refuses the pod while the claim does not exist).
    pub fn claim(mut self, claim: &str) -> Self {
        self.claim = Some(claim.into());
        self
    }

    /// A scheduling gate (`spec.schedulingGates`): kube-scheduler does not try the pod until
    /// every gate is removed ([`remove_scheduling_gates`]).
    pub fn scheduling_gate(mut self, name: &str) -> Self {
        self.scheduling_gates.push(name.into());
        self
    }

    /// Required pod affinity: on a node whose `topology_key` value is shared by a pod labelled
    /// `k=v` (kube-scheduler's InterPodAffinity plugin).
    pub fn require_pod_affinity_with(mut self, topology_key: &str, k: &str, v: &str) -> Self {
        let term = PodAffinityTerm {
            label_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(k.to_string(), v.to_string())])),
                ..Default::default()
            }),
            topology_key: topology_key.into(),
            ..Default::default()
        };
        self.affinity
            .pod_affinity
            .get_or_insert_with(PodAffinity::default)
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(term);
        self
    }

    /// A topology spread constraint with `whenUnsatisfiable: DoNotSchedule`: pods labelled
    /// `k=v` spread over node label `topology_key` with at most `max_skew` between domains.
    pub fn spread_over(mut self, topology_key: &str, max_skew: i32, k: &str, v: &str) -> Self {
        self.spread.push(TopologySpreadConstraint {
            max_skew,
            topology_key: topology_key.into(),
            when_unsatisfiable: "DoNotSchedule".into(),
            label_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(k.to_string(), v.to_string())])),
                ..Default::default()
            }),
            ..Default::default()
        });
        self
    }

    /// Required node affinity: node label `key` In `values`.
    pub fn require_node_label_in(mut self, key: &str, values: &[&str]) -> Self {
        let term = NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: key.into(),
                operator: "In".into(),
                values: Some(values.iter().map(|v| v.to_string()).collect()),
            }]),
            ..Default::default()
        };
        self.affinity.node_affinity = Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![term],
            }),
            ..Default::default()
        });
        self
    }

    /// Required pod anti-affinity on `kubernetes.io/hostname` against pods labelled `k=v`
    /// (one such pod per node).
    pub fn one_per_node_with(mut self, k: &str, v: &str) -> Self {
        let term = PodAffinityTerm {
            label_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(k.to_string(), v.to_string())])),
                ..Default::default()
            }),
            topology_key: "kubernetes.io/hostname".into(),
            ..Default::default()
        };
        self.affinity
            .pod_anti_affinity
            .get_or_insert_with(PodAntiAffinity::default)
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(term);
        self
    }

    pub fn cpu(mut self, cpu: &str) -> Self {
        self.cpu = Some(cpu.into());
        self
    }

    pub fn memory(mut self, m: &str) -> Self {
        self.memory = Some(m.into());
        self
    }

    /// `nvidia.com/gpu` request and limit.
    pub fn gpus(mut self, n: u32) -> Self {
        self.gpus = Some(n);
        self
    }

    /// Makes it a member of gang `group` (minAvailable `min_available`) through `key`.
    pub fn gang(mut self, key: KeyScheme, group: &str, min_available: u32) -> Self {
        self.gang = Some((key, group.into(), min_available));
        self
    }

    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.labels.insert(k.into(), v.into());
        self
    }

    pub fn annotation(mut self, k: &str, v: &str) -> Self {
        self.annotations.insert(k.into(), v.into());
        self
    }

    pub fn node_selector(mut self, k: &str, v: &str) -> Self {
        self.node_selector.insert(k.into(), v.into());
        self
    }

    pub fn priority_class(mut self, name: &str) -> Self {
        self.priority_class = Some(name.into());
        self
    }

    pub fn scheduler_name(mut self, name: &str) -> Self {
        self.scheduler_name = Some(name.into());
        self
    }

    /// `spec.schedulingGroup.podGroupName`: a member of Kubernetes PodGroup `name`
    /// (`scheduling.k8s.io/v1beta1`; the API server keeps the field only with `GenericWorkload`).
    pub fn scheduling_group(mut self, name: &str) -> Self {
        self.scheduling_group = Some(name.into());
        self
    }

    pub fn build(self) -> Pod {
        let mut requests = BTreeMap::new();
        let mut limits = BTreeMap::new();
        if let Some(c) = &self.cpu {
            requests.insert("cpu".to_string(), Quantity(c.clone()));
        }
        if let Some(m) = &self.memory {
            requests.insert("memory".to_string(), Quantity(m.clone()));
        }
        if let Some(g) = self.gpus {
            requests.insert(GPU.to_string(), Quantity(g.to_string()));
            limits.insert(GPU.to_string(), Quantity(g.to_string()));
        }
        let mut meta = ObjectMeta {
            name: Some(self.name.clone()),
            namespace: Some(self.ns.clone()),
            labels: Some(self.labels.clone()),
            annotations: Some(self.annotations.clone()),
            ..Default::default()
        };
        if let Some((key, group, min)) = &self.gang {
            key.apply(&mut meta, group, *min);
        }
        Pod {
            metadata: meta,
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "main".into(),
                    image: Some("busybox:1.36".into()),
                    command: Some(vec!["sleep".into(), "3600".into()]),
                    ports: self.host_port.map(|port| {
                        vec![ContainerPort {
                            container_port: port,
                            host_port: Some(port),
                            ..Default::default()
                        }]
                    }),
                    resources: Some(ResourceRequirements {
                        requests: Some(requests),
                        limits: if limits.is_empty() {
                            None
                        } else {
                            Some(limits)
                        },
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                termination_grace_period_seconds: Some(0),
                volumes: self.claim.as_ref().map(|claim| {
                    vec![Volume {
                        name: "data".into(),
                        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                            claim_name: claim.clone(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }]
                }),
                node_selector: if self.node_selector.is_empty() {
                    None
                } else {
                    Some(self.node_selector.clone())
                },
                priority_class_name: self.priority_class.clone(),
                scheduler_name: self.scheduler_name.clone(),
                scheduling_group: self
                    .scheduling_group
                    .as_ref()
                    .map(|name| PodSchedulingGroup {
                        pod_group_name: Some(name.clone()),
                    }),
                affinity: (self.affinity != Affinity::default()).then(|| self.affinity.clone()),
                topology_spread_constraints: (!self.spread.is_empty()).then(|| self.spread.clone()),
                scheduling_gates: (!self.scheduling_gates.is_empty()).then(|| {
                    self.scheduling_gates
                        .iter()
                        .map(|name| PodSchedulingGate { name: name.clone() })
                        .collect()
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    /// Builds and creates it.
    pub async fn create(self, client: &Client) -> Result<Pod> {
        let ns = self.ns.clone();
        let pod = self.build();
        create_pod(client, &ns, &pod).await
    }
}

/// Removes every scheduling gate of pod `ns/name` (as a quota controller does when it admits
/// the pod); kube-scheduler then tries it.
pub async fn remove_scheduling_gates(client: &Client, ns: &str, name: &str) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let patch = serde_json::json!({"spec": {"schedulingGates": null}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("removing the scheduling gates of {ns}/{name}"))?;
    Ok(())
}

pub async fn create_pod(client: &Client, ns: &str, pod: &Pod) -> Result<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    api.create(&PostParams::default(), pod)
        .await
        .with_context(|| {
            format!(
                "creating pod {ns}/{}",
                pod.metadata.name.as_deref().unwrap_or("?")
            )
        })
}

pub async fn list_pods(client: &Client, ns: &str) -> Result<Vec<Pod>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    Ok(api
        .list(&ListParams::default())
        .await
        .with_context(|| format!("listing pods in {ns}"))?
        .items)
}

pub async fn list_all_pods(client: &Client) -> Result<Vec<Pod>> {
    let api: Api<Pod> = Api::all(client.clone());
    Ok(api
        .list(&ListParams::default())
        .await
        .context("listing pods")?
        .items)
}

pub fn pod_name(p: &Pod) -> &str {
    p.metadata.name.as_deref().unwrap_or("")
}

pub fn pod_node(p: &Pod) -> Option<&str> {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// Pod name → node, for every bound pod in `ns`.
pub async fn bound_pods(client: &Client, ns: &str) -> Result<BTreeMap<String, String>> {
    Ok(list_pods(client, ns)
        .await?
        .iter()
        .filter_map(|p| pod_node(p).map(|n| (pod_name(p).to_string(), n.to_string())))
        .collect())
}

/// `reason: message` of the pod's PodScheduled condition, if any.
pub fn scheduled_condition(p: &Pod) -> Option<String> {
    let c = p
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")?;
    Some(format!(
        "{}={} {}: {}",
        c.type_,
        c.status,
        c.reason.as_deref().unwrap_or(""),
        c.message.as_deref().unwrap_or("")
    ))
}

/// One line per pod: `name → node` or `name Pending (PodScheduled condition)`.
pub fn describe_pods(pods: &[Pod]) -> String {
    let mut lines: Vec<String> = pods
        .iter()
        .map(|p| match pod_node(p) {
            Some(n) => format!("{} → {n}", pod_name(p)),
            None => format!(
                "{} Pending ({})",
                pod_name(p),
                scheduled_condition(p).unwrap_or_else(|| "not looked at yet".into())
            ),
        })
        .collect();
    lines.sort();
    lines.join("; ")
}

/// An event, flattened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSummary {
    pub type_: String,
    pub reason: String,
    pub message: String,
    pub count: i32,
    pub source: String,
}

impl std::fmt::Display for EventSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} ({}", self.type_, self.reason, self.source)?;
        if self.count > 1 {
            write!(f, ", x{}", self.count)?;
        }
        write!(f, "): {}", self.message)
    }
}

/// Events about pod `ns/name` (core/v1 view; includes events.k8s.io events).
pub async fn events_for(client: &Client, ns: &str, name: &str) -> Result<Vec<EventSummary>> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let list = api
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .with_context(|| format!("listing events of {ns}/{name}"))?;
    Ok(list
        .items
        .into_iter()
        .filter(|e| e.involved_object.kind.as_deref().is_none_or(|k| k == "Pod"))
        .map(|e| EventSummary {
            type_: e.type_.unwrap_or_default(),
            reason: e.reason.unwrap_or_default(),
            message: e.message.unwrap_or_default(),
            count: e
                .count
                .unwrap_or(1)
                .max(e.series.and_then(|s| s.count).unwrap_or(1)),
            source: e
                .reporting_component
                .filter(|s| !s.is_empty())
                .or(e.source.and_then(|s| s.component))
                .unwrap_or_default(),
        })
        .collect())
}

/// All events in `ns`, keyed by involved object name.
pub async fn events_in(client: &Client, ns: &str) -> Result<Vec<(String, EventSummary)>> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let list = api.list(&ListParams::default()).await?;
    Ok(list
        .items
        .into_iter()
        .map(|e| {
            let name = e.involved_object.name.clone().unwrap_or_default();
            let s = EventSummary {
                type_: e.type_.unwrap_or_default(),
                reason: e.reason.unwrap_or_default(),
                message: e.message.unwrap_or_default(),
                count: e.count.unwrap_or(1),
                source: e
                    .reporting_component
                    .filter(|s| !s.is_empty())
                    .or(e.source.and_then(|s| s.component))
                    .unwrap_or_default(),
            };
            (name, s)
        })
        .collect())
}

/// Deletes a pod at once (`gracePeriodSeconds=0`: there is no kubelet). Missing pods are fine.
pub async fn delete_pod(client: &Client, ns: &str, name: &str) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    match api.delete(name, &dp).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("deleting pod {ns}/{name}")),
    }
}

/// Parses a Kubernetes quantity into base units (cores, bytes, count).
pub fn parse_quantity(q: &str) -> Option<f64> {
    let q = q.trim();
    const SUFFIXES: [(&str, f64); 14] = [
        ("Ki", 1024.0),
        ("Mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("Ti", 1099511627776.0),
        ("Pi", 1125899906842624.0),
        ("Ei", 1152921504606846976.0),
        ("n", 1e-9),
        ("u", 1e-6),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
    ];
    for (s, mult) in SUFFIXES {
        if let Some(num) = q.strip_suffix(s) {
            return num.parse::<f64>().ok().map(|n| n * mult);
        }
    }
    if let Some(num) = q.strip_suffix('E') {
        return num.parse::<f64>().ok().map(|n| n * 1e18);
    }
    q.parse::<f64>().ok()
}

/// Effective requests of a pod as kube-scheduler counts them (max of the sum of containers and
/// each init container, plus overhead), in base units.
pub fn pod_requests(p: &Pod) -> BTreeMap<String, f64> {
    let mut total: BTreeMap<String, f64> = BTreeMap::new();
    let Some(spec) = p.spec.as_ref() else {
        return total;
    };
    let reqs = |c: &Container| -> BTreeMap<String, f64> {
        c.resources
            .as_ref()
            .and_then(|r| r.requests.clone().or_else(|| r.limits.clone()))
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(k, v)| parse_quantity(&v.0).map(|n| (k, n)))
            .collect()
    };
    for c in &spec.containers {
        for (k, v) in reqs(c) {
            *total.entry(k).or_default() += v;
        }
    }
    for c in spec.init_containers.iter().flatten() {
        for (k, v) in reqs(c) {
            let e = total.entry(k).or_default();
            *e = e.max(v);
        }
    }
    for (k, v) in spec.overhead.iter().flatten() {
        if let Some(n) = parse_quantity(&v.0) {
            *total.entry(k.clone()).or_default() += n;
        }
    }
    total
}

/// `Err(description)` if on any node the requests of the non-terminal pods bound there exceed its
/// allocatable (cpu, memory, GPUs, pod count). Binding skips every capacity check, so this is
/// what a scheduler that hands out reserved seats twice would break. The description starts
/// with [`CLUSTER_TRUTH`](crate::truth::CLUSTER_TRUTH) (no-overcommit).
pub async fn check_no_overcommit(client: &Client) -> Result<std::result::Result<(), String>> {
    let nodes: Api<Node> = Api::all(client.clone());
    let nodes = nodes.list(&ListParams::default()).await?.items;
    let pods = list_all_pods(client).await?;
    let mut problems = Vec::new();
    for n in &nodes {
        let name = n.metadata.name.as_deref().unwrap_or("");
        let alloc: BTreeMap<String, f64> = n
            .status
            .as_ref()
            .and_then(|s| s.allocatable.clone())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(k, v)| parse_quantity(&v.0).map(|q| (k, q)))
            .collect();
        let mut used: BTreeMap<String, f64> = BTreeMap::new();
        let mut on_node = Vec::new();
        for p in pods.iter().filter(|p| pod_node(p) == Some(name)) {
            let phase = p
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .unwrap_or("");
            if phase == "Succeeded" || phase == "Failed" {
                continue;
            }
            on_node.push(pod_name(p).to_string());
            for (k, v) in pod_requests(p) {
                // muster's marker is no capacity (`ignoredByScheduler` in the scheduler config).
                if k == crate::policy::GANG_MARKER {
                    continue;
                }
                *used.entry(k).or_default() += v;
            }
            *used.entry("pods".into()).or_default() += 1.0;
        }
        for (k, u) in &used {
            let a = alloc.get(k).copied().unwrap_or(0.0);
            if *u > a + 1e-9 {
                problems.push(format!(
                    "node {name} overcommitted on {k}: {u} requested > {a} allocatable (pods {on_node:?})"
                ));
            }
        }
    }
    Ok(if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} {}",
            crate::truth::CLUSTER_TRUTH,
            problems.join("; ")
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("100m"), Some(0.1));
        assert_eq!(parse_quantity("2"), Some(2.0));
        assert_eq!(parse_quantity("1.5"), Some(1.5));
        assert_eq!(parse_quantity("64Mi"), Some(67108864.0));
        assert_eq!(parse_quantity("1G"), Some(1e9));
        assert_eq!(parse_quantity("x"), None);
    }

    #[test]
    fn gang_keys_set_the_right_metadata() {
        let p = PodBuilder::new("ns", "p")
            .gang(KeyScheme::Kueue, "g", 3)
            .gpus(1)
            .build();
        let labels = p.metadata.labels.unwrap();
        let ann = p.metadata.annotations.unwrap();
        assert_eq!(labels["kueue.x-k8s.io/pod-group-name"], "g");
        assert_eq!(ann["kueue.x-k8s.io/pod-group-total-count"], "3");
        let r = pod_requests(&PodBuilder::new("ns", "p").cpu("250m").gpus(2).build());
        assert_eq!(r["cpu"], 0.25);
        assert_eq!(r[GPU], 2.0);
        let p = PodBuilder::new("ns", "p")
            .gang(KeyScheme::Muster, "g", 2)
            .build();
        let ann = p.metadata.annotations.unwrap();
        assert_eq!(ann[MUSTER_GROUP], "g");
        assert_eq!(ann[MUSTER_MIN_AVAILABLE], "2");
    }
}
