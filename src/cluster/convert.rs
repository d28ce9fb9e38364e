//! Kubernetes objects → the model's compact [`PodInfo`] / [`NodeInfo`].
//!
//! This is the only place that reads `k8s-openapi` pod and node types; the model never does.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::model::membership::membership_of;
use crate::model::objects::{pod_requests, ContainerRequests, Taint, Toleration};
use crate::model::quantity::QuantityError;
use crate::model::{NodeInfo, PodInfo, Resources};

/// Why a pod or node could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConvertError {
    #[error("{object} has no metadata.{field}")]
    MissingField {
        object: &'static str,
        field: &'static str,
    },
    #[error("{object} {name}: {source}")]
    BadQuantity {
        object: &'static str,
        name: String,
        source: QuantityError,
    },
}

fn resources_of(
    list: Option<&BTreeMap<String, Quantity>>,
    object: &'static str,
    name: &str,
) -> Result<Resources, ConvertError> {
    let mut r = Resources::default();
    for (k, q) in list.into_iter().flatten() {
        r.set(k, &q.0).map_err(|source| ConvertError::BadQuantity {
            object,
            name: name.to_string(),
            source,
        })?;
    }
    Ok(r)
}

fn container_requests(c: &Container, pod: &str) -> Result<Resources, ConvertError> {
    resources_of(
        c.resources.as_ref().and_then(|r| r.requests.as_ref()),
        "pod",
        pod,
    )
}

/// Reads a pod. Errors name the pod and the bad field; such a pod is skipped by the watch and
/// refused by the verbs.
pub fn pod_info(pod: &Pod) -> Result<PodInfo, ConvertError> {
    let meta = &pod.metadata;
    let missing = |field| ConvertError::MissingField {
        object: "pod",
        field,
    };
    let name = meta.name.as_deref().ok_or_else(|| missing("name"))?;
    let namespace = meta.namespace.as_deref().unwrap_or("default");
    let uid = meta.uid.as_deref().ok_or_else(|| missing("uid"))?;
    let display = format!("{namespace}/{name}");
    let empty = BTreeMap::new();
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    let annotations = meta.annotations.as_ref().unwrap_or(&empty);

    let (requests, node_name, priority, node_selector, tolerations) = match &pod.spec {
        Some(spec) => {
            let containers = spec
                .containers
                .iter()
                .map(|c| container_requests(c, &display))
                .collect::<Result<Vec<_>, _>>()?;
            let init = spec
                .init_containers
                .iter()
                .flatten()
                .map(|c| {
                    Ok(ContainerRequests {
                        requests: container_requests(c, &display)?,
                        sidecar: c.restart_policy.as_deref() == Some("Always"),
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let overhead = spec
                .overhead
                .as_ref()
                .map(|o| resources_of(Some(o), "pod", &display))
                .transpose()?;
            let pod_level = spec
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .map(|r| resources_of(Some(r), "pod", &display))
                .transpose()?;
            let requests = pod_requests(&containers, &init, overhead.as_ref(), pod_level.as_ref());
            let tolerations = spec
                .tolerations
                .iter()
                .flatten()
                .map(|t| Toleration {
                    key: t.key.clone().unwrap_or_default(),
                    exists: t.operator.as_deref() == Some("Exists"),
                    value: t.value.clone().unwrap_or_default(),
                    effect: t.effect.clone().unwrap_or_default(),
                })
                .collect();
            let selector = spec
                .node_selector
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            (
                requests,
                spec.node_name
                    .as_deref()
                    .filter(|n| !n.is_empty())
                    .map(Arc::from),
                spec.priority.unwrap_or(0),
                selector,
                tolerations,
            )
        }
        None => (
            pod_requests(&[], &[], None, None),
            None,
            0,
            Vec::new(),
            Vec::new(),
        ),
    };
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    Ok(PodInfo {
        uid: Arc::from(uid),
        namespace: Arc::from(namespace),
        name: Arc::from(name),
        requests,
        node_name,
        terminal: matches!(phase, Some("Succeeded") | Some("Failed")),
        priority,
        created: meta
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_second())
            .unwrap_or(0),
        membership: membership_of(namespace, labels, annotations),
        node_selector,
        tolerations,
    })
}

/// Reads a node: allocatable (or capacity, when a node reports no allocatable), labels,
/// cordon and hard taints.
pub fn node_info(node: &Node) -> Result<NodeInfo, ConvertError> {
    let name = node
        .metadata
        .name
        .as_deref()
        .ok_or(ConvertError::MissingField {
            object: "node",
            field: "name",
        })?;
    let status = node.status.as_ref();
    let list = status
        .and_then(|s| s.allocatable.as_ref())
        .or_else(|| status.and_then(|s| s.capacity.as_ref()));
    let allocatable = resources_of(list, "node", name)?;
    let spec = node.spec.as_ref();
    Ok(NodeInfo {
        name: Arc::from(name),
        allocatable,
        labels: node.metadata.labels.clone().unwrap_or_default(),
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        taints: spec
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
            .map(|t| Taint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect: t.effect.clone(),
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_json(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn reads_a_gang_member_with_sidecars_and_gpus() {
        let p = pod_json(serde_json::json!({
            "metadata": {"name": "w-0", "namespace": "ml", "uid": "u1",
                "creationTimestamp": "2026-11-29T10:00:00Z",
                "annotations": {"muster.dev/group": "job", "muster.dev/min-available": "2"}},
            "spec": {
                "priority": 7,
                "nodeName": "",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "2"}}}],
                "initContainers": [
                    {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
                    {"name": "setup", "resources": {"requests": {"cpu": "2"}}}
                ],
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
            },
            "status": {"phase": "Pending"}
        }));
        let info = pod_info(&p).unwrap();
        assert_eq!(
            info.requests.cpu_milli, 2100,
            "init 2 cpu beside the 100m sidecar"
        );
        assert_eq!(info.requests.memory, 1 << 30);
        assert_eq!(info.requests.extended("nvidia.com/gpu"), 2);
        assert_eq!(info.requests.pods, 1);
        assert_eq!(info.node_name, None, "empty nodeName is unbound");
        assert_eq!(info.priority, 7);
        assert!(info.created > 0);
        assert_eq!(info.gang().unwrap().gang.to_string(), "ml/job");
        assert!(info.tolerations[0].exists);
    }

    #[test]
    fn terminal_phases_and_bad_quantities() {
        let p = pod_json(serde_json::json!({
            "metadata": {"name": "done", "namespace": "ml", "uid": "u"},
            "spec": {"containers": [{"name": "c"}], "nodeName": "n1"},
            "status": {"phase": "Succeeded"}
        }));
        let info = pod_info(&p).unwrap();
        assert!(info.terminal);
        assert_eq!(info.node_name.as_deref(), Some("n1"));

        let bad = pod_json(serde_json::json!({
            "metadata": {"name": "bad", "namespace": "ml", "uid": "u"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}
        }));
        assert_eq!(
            pod_info(&bad).unwrap_err().to_string(),
            "pod ml/bad: invalid quantity \"lots\": expected a decimal number"
        );
        let nameless = pod_json(serde_json::json!({"metadata": {"uid": "u"}}));
        assert_eq!(
            pod_info(&nameless).unwrap_err().to_string(),
            "pod has no metadata.name"
        );
    }

    #[test]
    fn reads_a_node() {
        let n: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "gpu-1", "labels": {"topology.kubernetes.io/zone": "z1"}},
            "spec": {"taints": [
                {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
                {"key": "soft", "effect": "PreferNoSchedule"}
            ]},
            "status": {"capacity": {"cpu": "8", "pods": "110"},
                       "allocatable": {"cpu": "7500m", "memory": "30Gi", "pods": "110", "nvidia.com/gpu": "4"}}
        }))
        .unwrap();
        let info = node_info(&n).unwrap();
        assert_eq!(info.allocatable.cpu_milli, 7500);
        assert_eq!(info.allocatable.extended("nvidia.com/gpu"), 4);
        assert_eq!(info.taints.len(), 1, "PreferNoSchedule never blocks");
        assert_eq!(info.zone(), Some("z1"));
    }
}
