//! `POST <prefix>/prioritize`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::call::{Call, Prioritize, Refusal};
use crate::wire::{ExtenderArgs, HostPriority};

pub(super) async fn prioritize(call: Call<Prioritize>) -> Response {
    let args: ExtenderArgs = match call.decode() {
        Ok(a) => a,
        Err(r) => return *r,
    };
    let (pod, nodes) = match call.pod_and_nodes(args) {
        Ok(p) => p,
        Err(refusal) => {
            // kube-scheduler ignores prioritize errors, so a non-200 here costs nothing but a
            // log line.
            let status = match refusal {
                Refusal::NotLeader(_) | Refusal::NotReady | Refusal::Relisting(_) => {
                    StatusCode::SERVICE_UNAVAILABLE
                }
                Refusal::BadPod(_) => StatusCode::UNPROCESSABLE_ENTITY,
            };
            call.record("refused");
            return (status, Json(json!({ "Error": refusal.message() }))).into_response();
        }
    };
    let names = nodes.names();
    let scores = call.shared.table.lock().prioritize(&pod, &names);
    let reply: Vec<HostPriority> = names
        .into_iter()
        .zip(scores)
        .map(|(host, score)| HostPriority { host, score })
        .collect();
    call.record("ok");
    Json(reply).into_response()
}
