//! Kubernetes objects → the model's compact [`PodInfo`] / [`NodeInfo`].
//!
//! This is the only place that reads `k8s-openapi` pod and node types; the model never does.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Container, Node, NodeSelector as ApiNodeSelector, NodeSelectorRequirement, Pod,
    PodAffinityTerm as ApiPodAffinityTerm, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as ApiLabelSelector;

use crate::model::devices::{ClaimSource, PodClaim};
use crate::model::gather::GANG_MARKER;
use crate::model::membership::membership_of;
use crate::model::objects::{
    pod_requests, ContainerRequests, PodPhase, PodRules, Taint, Toleration, TolerationOperator,
    DEFAULT_SCHEDULER,
};
use crate::model::quantity::QuantityError;
use crate::model::terms::{
    HostPort, InclusionPolicy, LabelSelector, NodeSelector, NodeSelectorTerm, PodAffinityTerm,
    SpreadConstraint,
};
use crate::model::{NodeInfo, PodInfo, Resources};

mod interned;
mod lenient;
pub use lenient::{bound_pod_info_lenient, node_info_lenient};

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
    /// The API server validates these fields, so this means a client bypassed validation
    /// or a newer API added an operator muster does not know.
    #[error("pod {pod}: {field}: {why}")]
    BadRule {
        pod: String,
        field: String,
        why: String,
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

    let rules = match &pod.spec {
        Some(spec) => rules_of(spec, namespace, &display, pod.status.as_ref())?,
        None => None,
    };
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
                    operator: TolerationOperator::parse(t.operator.as_deref()),
                    value: t.value.clone().unwrap_or_default(),
                    effect: t.effect.clone().unwrap_or_default(),
                })
                .collect();
            let tolerations = interned::tolerations(tolerations);
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
            interned::tolerations(Vec::new()),
        ),
    };
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    // As kube-scheduler decides whether to call an extender with `managedResources`: any
    // container or init container naming the resource in its requests or limits
    // (`HTTPExtender.hasManagedResources`, pkg/scheduler/extender.go:442, v1.37.2).
    let gang_marker = pod.spec.as_ref().is_some_and(|spec| {
        spec.containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .filter_map(|c| c.resources.as_ref())
            .any(|r| {
                [r.requests.as_ref(), r.limits.as_ref()]
                    .into_iter()
                    .flatten()
                    .any(|m| m.contains_key(GANG_MARKER))
            })
    });
    Ok(PodInfo {
        uid: Arc::from(uid),
        namespace: Arc::from(namespace),
        name: Arc::from(name),
        requests,
        node_name,
        nominated_node: pod
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_deref())
            .filter(|n| !n.is_empty())
            .map(Arc::from),
        gang_marker,
        terminal: matches!(phase, Some("Succeeded") | Some("Failed")),
        phase: PodPhase::parse(phase),
        priority,
        created: meta
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_second())
            .unwrap_or(0),
        bound_at: bound_at(pod),
        membership: membership_of(
            namespace,
            labels,
            annotations,
            pod.spec
                .as_ref()
                .and_then(|s| s.scheduling_group.as_ref())
                .and_then(|g| g.pod_group_name.as_deref()),
        ),
        scheduler_name: pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .filter(|n| !n.is_empty() && *n != DEFAULT_SCHEDULER)
            .map(Arc::from),
        gang_keys_ignored: false,
        node_selector,
        tolerations,
        labels: labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect(),
        terminating: meta.deletion_timestamp.is_some(),
        rules,
        unschedulable: unschedulable_verdict(pod),
        preempted_by_scheduler: preempted_by_scheduler(pod),
    })
}

/// The pod's required placement rules; `None` when it has none (most pods).
fn rules_of(
    spec: &PodSpec,
    namespace: &str,
    pod: &str,
    status: Option<&PodStatus>,
) -> Result<Option<Box<PodRules>>, ConvertError> {
    let bad = |field: String| {
        move |why: String| ConvertError::BadRule {
            pod: pod.to_string(),
            field,
            why,
        }
    };
    let affinity = spec.affinity.as_ref();
    let node_affinity = affinity
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(node_selector_of);
    let terms = |kind: &str, list: Option<&Vec<ApiPodAffinityTerm>>| {
        list.into_iter()
            .flatten()
            .enumerate()
            .map(|(i, t)| -> Result<PodAffinityTerm, ConvertError> {
                let field = |what: &str| format!("{kind}[{i}].{what}");
                // matchLabelKeys/mismatchLabelKeys are not read: the API server merged them
                // into labelSelector when the pod was created, and kube-scheduler reads only
                // that selector.
                Ok(PodAffinityTerm::new(
                    namespace,
                    selector_of(t.label_selector.as_ref()).map_err(bad(field("labelSelector")))?,
                    t.namespaces.clone().unwrap_or_default(),
                    t.namespace_selector
                        .as_ref()
                        .map(|s| selector_of(Some(s)))
                        .transpose()
                        .map_err(bad(field("namespaceSelector")))?,
                    &t.topology_key,
                ))
            })
            .collect::<Result<Vec<_>, ConvertError>>()
    };
    let pod_affinity = affinity
        .and_then(|a| a.pod_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    let pod_anti_affinity = affinity
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    let spread = spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
        .filter(|(_, c)| c.when_unsatisfiable == "DoNotSchedule")
        .map(|(i, c)| -> Result<SpreadConstraint, ConvertError> {
            let field = |what: &str| format!("topologySpreadConstraints[{i}].{what}");
            Ok(SpreadConstraint {
                max_skew: c.max_skew,
                topology_key: c.topology_key.clone(),
                selector: selector_of(c.label_selector.as_ref())
                    .map_err(bad(field("labelSelector")))?,
                match_label_keys: c.match_label_keys.clone().unwrap_or_default(),
                min_domains: c.min_domains.unwrap_or(1),
                node_affinity_policy: InclusionPolicy::parse(
                    c.node_affinity_policy.as_deref(),
                    InclusionPolicy::Honor,
                )
                .map_err(bad(field("nodeAffinityPolicy")))?,
                node_taints_policy: InclusionPolicy::parse(
                    c.node_taints_policy.as_deref(),
                    InclusionPolicy::Ignore,
                )
                .map_err(bad(field("nodeTaintsPolicy")))?,
            })
        })
        .collect::<Result<Vec<_>, ConvertError>>()?;
    let rules = PodRules {
        node_affinity,
        affinity: terms("podAffinity.required", pod_affinity)?,
        anti_affinity: terms("podAntiAffinity.required", pod_anti_affinity)?,
        spread,
        scheduling_gates: spec
            .scheduling_gates
            .iter()
            .flatten()
            .map(|g| g.name.clone())
            .collect(),
        host_ports: host_ports_of(spec),
        claims: pod_claims(spec, status),
    };
    Ok((!rules.is_empty()).then(|| Box::new(rules)))
}

/// The message of the pod's `PodScheduled=False` condition with reason `Unschedulable`, as
/// kube-scheduler writes it for a pod no node passed (`handleSchedulingFailure`); `None` for a
/// pod with a node or any other condition.
/// When the bound pod's binding was made: its `PodScheduled=True` condition's
/// `lastTransitionTime` (the binding sets the condition, with the time of the change,
/// `podutil.UpdatePodCondition`, pkg/registry/core/pod/storage/storage.go, v1.37.2).
fn bound_at(pod: &Pod) -> Option<i64> {
    pod.spec
        .as_ref()?
        .node_name
        .as_deref()
        .filter(|n| !n.is_empty())?;
    pod.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "True")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0.as_second())
}

/// Whether kube-scheduler preempted the pod: the `DisruptionTarget` condition it patches onto a
/// victim before deleting it (status `True`, reason `PreemptionByScheduler`,
/// pkg/scheduler/framework/preemption/executor.go, v1.37.2). Other disruptions (the Eviction API,
/// taint manager, garbage collection) carry other reasons.
fn preempted_by_scheduler(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.type_ == "DisruptionTarget"
                    && c.status == "True"
                    && c.reason.as_deref() == Some("PreemptionByScheduler")
            })
        })
}

fn unschedulable_verdict(pod: &Pod) -> Option<Arc<str>> {
    if pod
        .spec
        .as_ref()
        .is_some_and(|s| s.node_name.as_deref().is_some_and(|n| !n.is_empty()))
    {
        return None;
    }
    pod.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled")
        .filter(|c| c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
        .map(|c| Arc::from(c.message.as_deref().unwrap_or_default()))
}

/// kube-scheduler's `util.GetHostPorts`: the ports with `hostPort > 0` of the sidecars (init
/// containers with `restartPolicy: Always`, which run for the pod's whole life) and of the
/// containers, in that order.
fn host_ports_of(spec: &PodSpec) -> Vec<HostPort> {
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    sidecars
        .chain(&spec.containers)
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| HostPort::new(p.host_ip.as_deref(), p.protocol.as_deref(), p.host_port))
        .collect()
}

/// `spec.resourceClaims`, each from a claim or a template; a template's claim is named by
/// `status.resourceClaimStatuses` once the claim is made for the pod.
fn pod_claims(spec: &PodSpec, status: Option<&PodStatus>) -> Vec<PodClaim> {
    let generated = |name: &str| {
        status
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .into_iter()
            .flatten()
            .find(|s| s.name == name)
            .and_then(|s| s.resource_claim_name.as_deref())
            .map(Arc::from)
    };
    spec.resource_claims
        .iter()
        .flatten()
        .filter_map(|c| {
            let source = match (&c.resource_claim_name, &c.resource_claim_template_name) {
                (Some(claim), _) => ClaimSource::Claim(claim.as_str().into()),
                (None, Some(template)) => ClaimSource::Template {
                    template: template.as_str().into(),
                    generated: generated(&c.name),
                },
                // The API server refuses a pod claim with neither.
                (None, None) => return None,
            };
            Some(PodClaim {
                name: c.name.clone(),
                source,
            })
        })
        .collect()
}

/// A Kubernetes node selector (required node affinity, a ResourceSlice's or an allocation's
/// `nodeSelector`) in the model's form.
pub(crate) fn node_selector_of(required: &ApiNodeSelector) -> NodeSelector {
    NodeSelector {
        terms: required
            .node_selector_terms
            .iter()
            .map(|t| {
                let raw = |list: &Option<Vec<NodeSelectorRequirement>>| {
                    list.iter()
                        .flatten()
                        .map(|r| {
                            (
                                r.key.clone(),
                                r.operator.clone(),
                                r.values.clone().unwrap_or_default(),
                            )
                        })
                        .collect::<Vec<_>>()
                };
                let (exprs, fields) = (raw(&t.match_expressions), raw(&t.match_fields));
                NodeSelectorTerm::parse(
                    exprs
                        .iter()
                        .map(|(k, o, v)| (k.as_str(), o.as_str(), v.as_slice())),
                    fields
                        .iter()
                        .map(|(k, o, v)| (k.as_str(), o.as_str(), v.as_slice())),
                )
            })
            .collect(),
    }
}

/// `metav1.LabelSelectorAsSelector`: absent selects nothing.
fn selector_of(s: Option<&ApiLabelSelector>) -> Result<LabelSelector, String> {
    let Some(s) = s else {
        return Ok(LabelSelector::Nothing);
    };
    LabelSelector::from_parts(
        s.match_labels
            .iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.as_str())),
        s.match_expressions.iter().flatten().map(|e| {
            (
                e.key.as_str(),
                e.operator.as_str(),
                e.values.as_deref().unwrap_or(&[]),
            )
        }),
    )
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
            "status": {"phase": "Pending", "nominatedNodeName": "n2"}
        }));
        let info = pod_info(&p).unwrap();
        assert_eq!(info.nominated_node.as_deref(), Some("n2"));
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
        assert_eq!(info.tolerations[0].operator, TolerationOperator::Exists);
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
        assert_eq!(info.nominated_node, None);

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

    /// NodePorts reads `util.GetHostPorts`: containers and sidecars, `hostPort > 0` only.
    #[test]
    fn reads_host_ports_of_containers_and_sidecars() {
        let p = pod_json(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ml", "uid": "u"},
            "spec": {
                "initContainers": [
                    {"name": "setup", "ports": [{"containerPort": 1, "hostPort": 7000}]},
                    {"name": "proxy", "restartPolicy": "Always",
                     "ports": [{"containerPort": 2, "hostPort": 7001, "protocol": "UDP"}]}
                ],
                "containers": [{"name": "c", "ports": [
                    {"containerPort": 80, "hostPort": 8080},
                    {"containerPort": 81, "hostPort": 8081, "hostIP": "10.0.0.1"},
                    {"containerPort": 82}
                ]}]
            }
        }));
        let info = pod_info(&p).unwrap();
        let ports: Vec<String> = info
            .rules
            .as_ref()
            .unwrap()
            .host_ports
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(ports, ["7001/UDP", "8080/TCP", "10.0.0.1:8081/TCP"]);
    }

    /// kube-scheduler's verdict (`PodScheduled=False`, `Unschedulable`) is read; any other
    /// condition, or a pod with a node, carries none.
    #[test]
    fn reads_kube_schedulers_unschedulable_verdict() {
        let with = |condition: serde_json::Value, node: Option<&str>| {
            let p = pod_json(serde_json::json!({
                "metadata": {"name": "m", "namespace": "ml", "uid": "u"},
                "spec": {"containers": [{"name": "c"}], "nodeName": node},
                "status": {"conditions": [condition]}
            }));
            pod_info(&p).unwrap().unschedulable.map(|m| m.to_string())
        };
        let refused = serde_json::json!({"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "message": "0/1 nodes are available: x."});
        assert_eq!(
            with(refused.clone(), None).as_deref(),
            Some("0/1 nodes are available: x.")
        );
        assert_eq!(with(refused, Some("n1")), None, "bound since");
        let gated = serde_json::json!({"type": "PodScheduled", "status": "False",
            "reason": "SchedulingGated"});
        assert_eq!(with(gated, None), None);
        let error = serde_json::json!({"type": "PodScheduled", "status": "False",
            "reason": "SchedulerError", "message": "extender failed"});
        assert_eq!(with(error, None), None);
    }

    /// When a bound pod's binding was made: its `PodScheduled=True` condition's time; none
    /// for an unbound pod or one bound without the condition (created with `spec.nodeName`).
    #[test]
    fn reads_when_a_bound_pod_was_bound() {
        let with = |conditions: serde_json::Value, node: Option<&str>| {
            let p = pod_json(serde_json::json!({
                "metadata": {"name": "m", "namespace": "ml", "uid": "u"},
                "spec": {"containers": [{"name": "c"}], "nodeName": node},
                "status": {"conditions": conditions}
            }));
            pod_info(&p).unwrap().bound_at
        };
        let scheduled = serde_json::json!([{"type": "PodScheduled", "status": "True",
            "lastTransitionTime": "2026-11-29T10:00:07Z"}]);
        assert_eq!(with(scheduled.clone(), Some("n1")), Some(1_795_946_407));
        assert_eq!(with(scheduled, None), None, "not bound");
        assert_eq!(with(serde_json::json!([]), Some("n1")), None);
        let refused = serde_json::json!([{"type": "PodScheduled", "status": "False",
            "lastTransitionTime": "2026-11-29T10:00:07Z"}]);
        assert_eq!(with(refused, Some("n1")), None);
    }

    /// kube-scheduler's preemption of a victim: `DisruptionTarget=True`, reason
    /// `PreemptionByScheduler`; other disruptions' reasons are not it.
    #[test]
    fn reads_that_kube_scheduler_preempted_the_pod() {
        let with = |reason: &str, status: &str| {
            let p = pod_json(serde_json::json!({
                "metadata": {"name": "m", "namespace": "ml", "uid": "u"},
                "spec": {"containers": [{"name": "c"}], "nodeName": "n1"},
                "status": {"conditions": [{"type": "DisruptionTarget", "status": status,
                    "reason": reason}]}
            }));
            pod_info(&p).unwrap().preempted_by_scheduler
        };
        assert!(with("PreemptionByScheduler", "True"));
        assert!(!with("PreemptionByScheduler", "False"));
        assert!(!with("EvictionByEvictionAPI", "True"));
        assert!(!with("DeletionByTaintManager", "True"));
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

    #[test]
    fn reads_placement_rules() {
        use crate::model::terms::{LabelSelector, NodeSelectorTerm, Requirement};
        let p = pod_json(serde_json::json!({
            "metadata": {"name": "w-1", "namespace": "ml", "uid": "u2",
                "labels": {"app": "train", "job": "j1"},
                "deletionTimestamp": "2026-11-29T10:05:00Z"},
            "spec": {
                "containers": [{"name": "c"}],
                "schedulingGates": [{"name": "example.com/quota"}],
                "tolerations": [{"key": "k", "operator": "Gt", "value": "3"}],
                "affinity": {
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}],
                             "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]},
                            {"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["x"]}]}
                        ]}},
                    "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "train"}},
                         "matchLabelKeys": ["job"],
                         "topologyKey": "topology.kubernetes.io/zone"}
                    ]},
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchExpressions": [{"key": "job", "operator": "In", "values": ["j1"]}]},
                         "namespaceSelector": {},
                         "topologyKey": "kubernetes.io/hostname"}
                    ]}
                },
                "topologySpreadConstraints": [
                    {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                     "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "train"}},
                     "matchLabelKeys": ["job"], "minDomains": 3, "nodeTaintsPolicy": "Honor"},
                    {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                     "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {}}
                ]
            }
        }));
        let info = pod_info(&p).unwrap();
        assert_eq!(info.labels.get("job"), Some("j1"));
        assert!(info.terminating);
        assert_eq!(
            info.tolerations[0].operator,
            TolerationOperator::Unsupported
        );
        let rules = info.rules.as_ref().unwrap();
        assert_eq!(rules.scheduling_gates, ["example.com/quota"]);
        let terms = &rules.node_affinity.as_ref().unwrap().terms;
        assert!(
            matches!(&terms[0], NodeSelectorTerm::Parsed { expressions, fields }
            if expressions.len() == 1 && fields.len() == 1 && !fields[0].equal)
        );
        assert!(
            matches!(terms[1], NodeSelectorTerm::Invalid(_)),
            "Gt needs an integer"
        );
        let affinity = &rules.affinity[0];
        assert_eq!(
            affinity.selector,
            LabelSelector::from_parts([("app", "train")], []).unwrap(),
            "matchLabelKeys are the API server's to merge; the stored selector is read as is"
        );
        assert_eq!(affinity.namespaces, ["ml"], "own namespace by default");
        assert_eq!(affinity.namespace_selector, LabelSelector::Nothing);
        let anti = &rules.anti_affinity[0];
        assert!(anti.namespaces.is_empty());
        assert!(
            anti.namespace_selector.is_empty(),
            "{{}} selects every namespace"
        );
        assert!(
            matches!(&anti.selector, LabelSelector::All(r) if r == &[Requirement::from_label_expression("job", "In", &["j1".into()]).unwrap()])
        );
        assert_eq!(rules.spread.len(), 1, "ScheduleAnyway only scores");
        let c = &rules.spread[0];
        assert_eq!((c.min_domains, c.match_label_keys.len()), (3, 1));
        assert_eq!(c.node_affinity_policy, InclusionPolicy::Honor);
        assert_eq!(c.node_taints_policy, InclusionPolicy::Honor);
    }

    /// The marker is read as kube-scheduler's `HTTPExtender.IsInterested` reads managed
    /// resources: a request or a limit of any container or init container; it is never
    /// counted as capacity.
    #[test]
    fn the_gang_marker_is_seen_in_requests_or_limits_of_any_container() {
        let marked = |resources: serde_json::Value, init: bool| {
            let container = serde_json::json!({"name": "c", "resources": resources});
            let spec = if init {
                serde_json::json!({"containers": [{"name": "main"}], "initContainers": [container]})
            } else {
                serde_json::json!({"containers": [container]})
            };
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "namespace": "ml", "uid": "u"},
                "spec": spec,
            }))
            .unwrap();
            let info = pod_info(&pod).unwrap();
            assert!(info.requests.extended.is_empty(), "{:?}", info.requests);
            info.gang_marker
        };
        let gang = |r: &str| serde_json::json!({ r: {GANG_MARKER: "1"} });
        assert!(marked(gang("limits"), false));
        assert!(marked(gang("requests"), false));
        assert!(marked(gang("limits"), true));
        assert!(!marked(
            serde_json::json!({"limits": {"nvidia.com/gpu": "1"}}),
            false
        ));
    }

    #[test]
    fn pods_without_rules_carry_none_and_bad_selectors_are_named() {
        let plain = pod_json(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ml", "uid": "u"},
            "spec": {"containers": [{"name": "c"}],
                     "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}
        }));
        let info = pod_info(&plain).unwrap();
        assert!(info.rules.is_none() && info.labels.is_empty() && !info.terminating);

        let bad = pod_json(serde_json::json!({
            "metadata": {"name": "bad", "namespace": "ml", "uid": "u"},
            "spec": {"containers": [{"name": "c"}],
                     "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchExpressions": [{"key": "job", "operator": "Near", "values": ["a"]}]},
                         "topologyKey": "kubernetes.io/hostname"}]}}}
        }));
        assert_eq!(
            pod_info(&bad).unwrap_err().to_string(),
            "pod ml/bad: podAntiAffinity.required[0].labelSelector: key \"job\": \"Near\" is not \
             a valid label selector operator (In, NotIn, Exists, DoesNotExist)"
        );
    }
}
