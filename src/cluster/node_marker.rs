//! The gang marker published on every node, so kube-scheduler retries a gang member when a node
//! is added or grows.
//!
//! In the gang-members mode every member requests `muster.dev/gang` (deploy/gang-admission-policy.yaml),
//! the resource the scheduler config names in `managedResources` with `ignoredByScheduler`:
//! NodeResourcesFit's *filter* skips it. Its *queueing hint* for node events does not
//! (`isSchedulableAfterNodeChange` → `isFit` → `Fits`, which passes no ignored resources:
//! pkg/scheduler/framework/plugins/noderesources/fit.go:547 and :706-707 in v1.37.2). On a node
//! without the resource, the hint answers QueueSkip for every member, so a member kube-scheduler
//! rejected for room (a gang let through whose seats were lost at the quorum check; a floating
//! member refused) would wait for a pod deletion or kube-scheduler's 5-minute flush, not for the
//! node an autoscaler adds for it.
//!
//! So the leader publishes the resource in each node's `status.capacity` and
//! `status.allocatable` — the documented way to advertise a node-level extended resource
//! ("Advertise Extended Resources for a Node"), which kubelet keeps across its status updates.
//! The amount is more than any node runs pods, because kubelet's admission counts published
//! extended resources (where a node does not publish one, kubelet drops it from the request:
//! `removeMissingExtendedResources`, pkg/kubelet/lifecycle/predicate.go:346). kubelet zeroes
//! extended resources when it registers again against a node object it finds after losing its
//! state (`reconcileExtendedResource`, pkg/kubelet/kubelet_node_status.go:192); the watch then
//! shows the node short and it is published again.
//!
//! [`marker_short`] decides (pure); [`NodeMarkers`](crate::state::node_markers::NodeMarkers) is
//! the set of nodes the watch showed short, filled on every replica and drained by the leader's
//! [`run`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use kube::Client;
use tracing::{info, warn};

use crate::metrics::OutcomeLabel;
use crate::model::gather::GANG_MARKER;
use crate::model::quantity::parse_units;
use crate::state::Shared;

/// What each node publishes: more gang members than any node runs pods (kubelet's `maxPods` is
/// 110 by default, 250 on the large-node profiles), so kubelet's admission never refuses a
/// member for it.
pub const NODE_MARKER_AMOUNT: i64 = 10_000;

/// After a failed write, writes pause this long, then go on one node at a time until one goes
/// through (`NodeMarkers::pause_until`); after a refused one (RBAC), [`FORBIDDEN_PAUSE`]. So an
/// operator who grants `nodes/status` sees the markers within seconds, and a cluster without it
/// costs the API server a request every 10 s, not one per node.
const FAILED_PAUSE: Duration = Duration::from_secs(5);
const FORBIDDEN_PAUSE: Duration = Duration::from_secs(10);
/// Writes in flight at once: a cluster's first publication is one write per node.
const PARALLEL_WRITES: usize = 4;
/// How often due retries are looked for when nothing new is short.
const TICK: Duration = Duration::from_secs(1);

/// Whether the node does not publish [`NODE_MARKER_AMOUNT`] of `muster.dev/gang` in both its
/// capacity and its allocatable (absent, zeroed by kubelet, lower, or unreadable).
pub fn marker_short(node: &Node) -> bool {
    let status = node.status.as_ref();
    let publishes = |list: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >| {
        list.and_then(|l| l.get(GANG_MARKER))
            .and_then(|q| parse_units(&q.0).ok())
            .is_some_and(|n| n >= NODE_MARKER_AMOUNT)
    };
    !(publishes(status.and_then(|s| s.capacity.as_ref()))
        && publishes(status.and_then(|s| s.allocatable.as_ref())))
}

/// The merge patch of `nodes/status` that publishes the marker (merge, not JSON patch: it adds
/// the key whether or not the node lists any capacity yet, and touches nothing else).
pub fn marker_patch() -> serde_json::Value {
    let amount = NODE_MARKER_AMOUNT.to_string();
    serde_json::json!({
        "status": {
            "capacity": { GANG_MARKER: amount },
            "allocatable": { GANG_MARKER: amount },
        }
    })
}

/// Publishes the marker on the nodes the watch shows short of it, while this replica leads,
/// until the task is dropped.
pub async fn run(client: Client, shared: Arc<Shared>) {
    let patch = marker_patch();
    let markers = &shared.node_markers;
    // Refusals are warned of once until a write goes through again.
    let mut refusal_warned = false;
    loop {
        tokio::select! {
            _ = markers.woken() => {}
            _ = tokio::time::sleep(TICK) => {}
        }
        shared
            .metrics
            .nodes_without_marker
            .set(markers.short_count() as i64);
        if !shared.readiness.is_ready() {
            continue;
        }
        let Some(term) = shared.leadership.leading_term(Instant::now()) else {
            continue;
        };
        let due = markers.take_due(Instant::now());
        if due.is_empty() {
            continue;
        }
        let work = async {
            let mut writes = futures::stream::iter(due)
                .map(|name| {
                    let client = client.clone();
                    let patch = &patch;
                    async move {
                        let r = publish(&client, &name, patch).await;
                        (name, r)
                    }
                })
                .buffer_unordered(PARALLEL_WRITES);
            while let Some((name, result)) = writes.next().await {
                let outcome = match result {
                    Ok(()) => {
                        if markers.resume() {
                            info!("publishing {GANG_MARKER} on nodes goes through again");
                        }
                        refusal_warned = false;
                        "published"
                    }
                    Err(kube::Error::Api(s)) if s.code == 404 => {
                        markers.forget(&name);
                        "gone"
                    }
                    Err(kube::Error::Api(s)) if s.code == 403 => {
                        markers.pause_until(Instant::now() + FORBIDDEN_PAUSE, &name);
                        if !refusal_warned {
                            warn!(
                                node = %name,
                                error = %s.message,
                                "cannot publish {GANG_MARKER} on nodes (RBAC: patch nodes/status, \
                                 deploy/rbac.yaml): kube-scheduler will not retry a gang member it \
                                 rejected for room when a node is added; trying one node every \
                                 10 s"
                            );
                            refusal_warned = true;
                        }
                        "forbidden"
                    }
                    Err(e) => {
                        markers.pause_until(Instant::now() + FAILED_PAUSE, &name);
                        warn!(node = %name, error = %e, "publishing {GANG_MARKER} on a node failed; trying one node again in 5 s");
                        "failed"
                    }
                };
                shared
                    .metrics
                    .node_marker_writes
                    .get_or_create(&OutcomeLabel { outcome })
                    .inc();
                if matches!(outcome, "forbidden" | "failed") {
                    // The batch's other writes are dropped unsent (those in flight are
                    // cancelled): one refusal speaks for them.
                    break;
                }
            }
        };
        if shared.leadership.while_leading(term, work).await.is_none() {
            continue;
        }
        shared
            .metrics
            .nodes_without_marker
            .set(markers.short_count() as i64);
    }
}

/// One node's patch. The answer (the whole Node) is not read: the watch delivers it anyway, and
/// at a cluster's first publication (10,000 nodes in 11 s here) decoding it twice was that much
/// more memory churned, which glibc's allocator kept as muster's resident memory.
async fn publish(
    client: &Client,
    node: &str,
    patch: &serde_json::Value,
) -> Result<(), kube::Error> {
    let request = kube::core::Request::new("/api/v1/nodes")
        .patch_subresource(
            "status",
            node,
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .map_err(kube::Error::BuildRequest)?;
    client
        .request::<serde::de::IgnoredAny>(request)
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeStatus;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(name: &str, capacity: &[(&str, &str)], allocatable: &[(&str, &str)]) -> Node {
        let list = |items: &[(&str, &str)]| {
            Some(
                items
                    .iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                    .collect(),
            )
        };
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            status: Some(NodeStatus {
                capacity: list(capacity),
                allocatable: list(allocatable),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    const FULL: (&str, &str) = (GANG_MARKER, "10k");

    #[test]
    fn a_node_publishing_the_amount_in_capacity_and_allocatable_is_not_short() {
        assert!(!marker_short(&node(
            "n",
            &[("cpu", "4"), FULL],
            &[("cpu", "4"), FULL]
        )));
        assert!(!marker_short(&node(
            "n",
            &[(GANG_MARKER, "20000")],
            &[(GANG_MARKER, "10000")]
        )));
    }

    #[test]
    fn a_node_without_it_or_zeroed_by_kubelet_or_with_less_is_short() {
        assert!(marker_short(&node("n", &[("cpu", "4")], &[("cpu", "4")])));
        assert!(marker_short(&Node::default()));
        // kubelet registering again after losing its state zeroes extended resources.
        assert!(marker_short(&node(
            "n",
            &[(GANG_MARKER, "0")],
            &[(GANG_MARKER, "0")]
        )));
        // kubelet derives allocatable from capacity; until it does, the node is short.
        assert!(marker_short(&node("n", &[FULL], &[])));
        assert!(marker_short(&node("n", &[FULL], &[(GANG_MARKER, "110")])));
        assert!(marker_short(&node("n", &[FULL], &[(GANG_MARKER, "lots")])));
    }

    #[test]
    fn the_patch_publishes_the_amount_in_both_lists_and_nothing_else() {
        let p = marker_patch();
        assert_eq!(
            p,
            serde_json::json!({"status": {
                "capacity": {"muster.dev/gang": "10000"},
                "allocatable": {"muster.dev/gang": "10000"},
            }})
        );
        let mut n = node("n", &[("cpu", "4")], &[("cpu", "4")]);
        let status = n.status.as_mut().unwrap();
        for list in [status.capacity.as_mut(), status.allocatable.as_mut()] {
            list.unwrap().insert(
                GANG_MARKER.into(),
                Quantity(
                    p["status"]["capacity"][GANG_MARKER]
                        .as_str()
                        .unwrap()
                        .into(),
                ),
            );
        }
        assert!(!marker_short(&n), "the patched node is no longer short");
    }
}
