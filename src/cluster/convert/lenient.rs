//! Reading what can be read of a node or a bound pod with a quantity muster cannot parse.
//!
//! Dropping such an object is the wrong failure in both cases. A node left out of the cache
//! fails every pod on it ("not in muster's cache"), though muster could judge most of them;
//! a bound pod left out frees room that its kubelet is using, so muster would over-commit
//! the node. So: a node is kept without the resources it cannot read (nothing that asks for
//! one of them fits there: never over-committed, never wrongly refused for the rest), and a
//! bound pod is kept with each request it cannot read replaced by more than any node holds,
//! so its node counts as full for that resource until the pod goes. A pending pod with such
//! a quantity is still skipped: the verbs refuse it with the value named.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::{node_info, pod_info, ConvertError};
use crate::model::{NodeInfo, PodInfo, Resources};

/// More than any node holds, per kind of resource, and small enough that sums never
/// saturate (so charging and uncharging a pod cancel exactly).
fn beyond_any_node(resource: &str) -> Quantity {
    Quantity(match resource {
        "memory" | "ephemeral-storage" => "1Pi".into(),
        _ => "1G".into(),
    })
}

fn readable(resource: &str, q: &Quantity) -> bool {
    Resources::default().set(resource, &q.0).is_ok()
}

/// Replaces each unreadable quantity of `list` (by `replace`, or removes it on `None`).
fn mend(list: &mut BTreeMap<String, Quantity>, replace: fn(&str) -> Option<Quantity>) {
    let bad: Vec<String> = list
        .iter()
        .filter(|(k, q)| !readable(k, q))
        .map(|(k, _)| k.clone())
        .collect();
    for k in bad {
        match replace(&k) {
            Some(q) => list.insert(k, q),
            None => list.remove(&k),
        };
    }
}

/// A node with an allocatable (or capacity) quantity muster cannot read, without it; with
/// the reason. `None` when the node cannot be read for another reason.
pub fn node_info_lenient(node: &Node) -> Option<(NodeInfo, ConvertError)> {
    let error = match node_info(node) {
        Err(e @ ConvertError::BadQuantity { .. }) => e,
        _ => return None,
    };
    let mut mended = node.clone();
    if let Some(status) = mended.status.as_mut() {
        for list in [status.allocatable.as_mut(), status.capacity.as_mut()]
            .into_iter()
            .flatten()
        {
            mend(list, |_| None);
        }
    }
    node_info(&mended).ok().map(|info| (info, error))
}

/// A bound pod with a request muster cannot read, with that request beyond any node; with
/// the reason. `None` for a pod not bound, or not readable for another reason.
pub fn bound_pod_info_lenient(pod: &Pod) -> Option<(PodInfo, ConvertError)> {
    let spec = pod.spec.as_ref()?;
    spec.node_name.as_ref().filter(|n| !n.is_empty())?;
    let error = match pod_info(pod) {
        Err(e @ ConvertError::BadQuantity { .. }) => e,
        _ => return None,
    };
    let mut mended = pod.clone();
    let spec = mended.spec.as_mut()?;
    let containers = spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten());
    for c in containers {
        if let Some(requests) = c.resources.as_mut().and_then(|r| r.requests.as_mut()) {
            mend(requests, |k| Some(beyond_any_node(k)));
        }
    }
    if let Some(overhead) = spec.overhead.as_mut() {
        mend(overhead, |k| Some(beyond_any_node(k)));
    }
    if let Some(requests) = spec.resources.as_mut().and_then(|r| r.requests.as_mut()) {
        mend(requests, |k| Some(beyond_any_node(k)));
    }
    pod_info(&mended).ok().map(|info| (info, error))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(cpu: &str, gpus: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110", "nvidia.com/gpu": gpus}},
        }))
        .unwrap()
    }

    fn pod(node: Option<&str>, cpu: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ml", "uid": "u-p"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
        }))
        .unwrap()
    }

    #[test]
    fn a_node_is_kept_without_the_resources_it_cannot_read() {
        assert!(node_info_lenient(&node("4", "8")).is_none(), "readable");
        let (info, why) = node_info_lenient(&node("4", "eight")).unwrap();
        assert_eq!(info.allocatable.cpu_milli, 4000);
        assert_eq!(info.allocatable.extended("nvidia.com/gpu"), 0);
        assert!(why.to_string().contains("\"eight\""), "{why}");
    }

    #[test]
    fn a_bound_pod_that_cannot_be_read_fills_its_node_for_that_resource() {
        assert!(
            bound_pod_info_lenient(&pod(None, "lots")).is_none(),
            "not bound"
        );
        assert!(
            bound_pod_info_lenient(&pod(Some("n1"), "1")).is_none(),
            "readable"
        );
        let (info, _) = bound_pod_info_lenient(&pod(Some("n1"), "lots")).unwrap();
        assert_eq!(info.requests.cpu_milli, 1_000_000_000_000);
        assert_eq!(info.requests.memory, 1 << 30, "what can be read is kept");
        assert_eq!(info.node_name.as_deref(), Some("n1"));
    }
}
