//! `POST <prefix>/filter`.

use std::time::{Duration, Instant};

use axum::response::{IntoResponse, Response};
use axum::Json;
use tracing::debug;

use super::call::{Call, Filter, Nodes};
use crate::model::{BindRejection, NodeVerdict, PodInfo};
use crate::wire::{ExtenderArgs, ExtenderFilterResult, NodeList};

/// How long a filter call for a pod muster has not seen waits for the watch to deliver it.
/// kube-scheduler's informer and muster's watch receive the same event from the API server
/// milliseconds apart, and a newly created pod is often filtered before muster's watch has it;
/// failing the call would cost the pod kube-scheduler's backoff (1 s, then 2 s, …). A pod that
/// never arrives (deleted, forged) is refused after this wait, and the table is unchanged.
pub const UNSEEN_POD_WAIT: Duration = Duration::from_millis(500);

const NO_NODES: &str = "request has neither NodeNames nor Nodes: nothing to filter";

pub(super) async fn filter(call: Call<Filter>) -> Response {
    let args: ExtenderArgs = match call.decode() {
        Ok(a) => a,
        Err(r) => return *r,
    };
    let refuse = |error: String| {
        call.record("refused");
        Json(ExtenderFilterResult {
            error,
            ..Default::default()
        })
        .into_response()
    };
    let (pod, nodes) = match call.pod_and_nodes(args) {
        Ok(p) => p,
        Err(r) => return refuse(r.message()),
    };
    if let Nodes::Missing = nodes {
        return refuse(NO_NODES.into());
    }
    let names = nodes.names();
    let verdicts = match filter_seen_pod(&call, &pod, &names).await {
        Ok(v) => v,
        Err(unseen) => return refuse(unseen.to_string()),
    };
    call.shared.flush_notices();

    let mut result = ExtenderFilterResult::default();
    let mut passing = Vec::new();
    // The model gives reasons only when no node passes (NotOffered otherwise): that is the only
    // time kube-scheduler reads them.
    for (i, (name, verdict)) in names.iter().zip(verdicts).enumerate() {
        match verdict {
            NodeVerdict::Fits => passing.push(i),
            NodeVerdict::NotOffered => {}
            NodeVerdict::Unschedulable(reason) => {
                result
                    .failed_nodes
                    .insert(name.to_string(), reason.to_string());
            }
            NodeVerdict::Unresolvable(reason) => {
                result
                    .failed_and_unresolvable_nodes
                    .insert(name.to_string(), reason.to_string());
            }
        }
    }
    debug!(pod = %pod.display_name(), passing = passing.len(), of = names.len(), "filter");
    // Answer in the form of the request.
    match &nodes {
        Nodes::List { list, .. } => {
            let items = passing.into_iter().map(|i| list.items[i]).collect();
            result.nodes = Some(NodeList {
                metadata: list.metadata.clone(),
                items,
            });
        }
        Nodes::Names(_) | Nodes::Missing => {
            result.node_names = Some(passing.into_iter().map(|i| names[i]).collect());
        }
    }
    call.record("ok");
    Json(result).into_response()
}

/// The filter's verdicts for the pod as the watch reported it: a request never adds a pod or
/// changes what muster believes about one (a late call for a deleted pod, a forged member). A pod
/// not seen yet is waited for, up to [`UNSEEN_POD_WAIT`], one watch event at a time.
async fn filter_seen_pod(
    call: &Call<Filter>,
    pod: &PodInfo,
    names: &[&str],
) -> Result<Vec<NodeVerdict>, BindRejection> {
    let deadline = tokio::time::Instant::now() + UNSEEN_POD_WAIT;
    // Subscribed before the first look, so that an event applied in between wakes us.
    let mut changes = call.shared.cache_changes();
    loop {
        {
            let mut table = call.shared.table.lock();
            match table.seen_pod(&pod.namespace, &pod.name, &pod.uid) {
                Ok(seen) => {
                    let seen = seen.clone();
                    return Ok(table.filter(&seen, names, Instant::now()));
                }
                Err(e @ BindRejection::UnknownPod { .. }) => {
                    if tokio::time::Instant::now() >= deadline {
                        return Err(e);
                    }
                }
                Err(other) => return Err(other),
            }
        }
        match tokio::time::timeout_at(deadline, changes.changed()).await {
            Ok(Ok(())) => {}
            // The deadline passed, or the sender is gone: one last look, then the answer.
            _ => {
                let mut table = call.shared.table.lock();
                let seen = table.seen_pod(&pod.namespace, &pod.name, &pod.uid)?.clone();
                return Ok(table.filter(&seen, names, Instant::now()));
            }
        }
    }
}
