//! `POST <prefix>/filter`.

use std::time::Instant;

use axum::response::{IntoResponse, Response};
use axum::Json;
use tracing::debug;

use super::call::{Call, Filter, Nodes};
use crate::model::NodeVerdict;
use crate::wire::{ExtenderArgs, ExtenderFilterResult, NodeList};

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
    let verdicts = {
        let mut table = call.shared.table.lock();
        // The pod as the watch reported it: a request never adds a pod or changes what muster
        // believes about one (a late call for a deleted pod, a forged member).
        match table.seen_pod(&pod.namespace, &pod.name, &pod.uid) {
            Ok(seen) => {
                let seen = seen.clone();
                table.filter(&seen, &names, Instant::now())
            }
            Err(unseen) => {
                drop(table);
                return refuse(unseen.to_string());
            }
        }
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
