//! The operational endpoints: readiness, metrics, the gang view, and unknown paths.

use std::time::Instant;

use axum::extract::State;
use axum::http::{header, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::AppState;

pub(super) async fn not_found(method: Method, uri: Uri) -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(json!({
            "Error": format!(
                "no such endpoint: {method} {}; muster serves POST <prefix>/filter, <prefix>/prioritize, <prefix>/bind, <prefix>/preempt and GET /healthz, /readyz, /metrics, /gangs",
                uri.path()
            )
        })),
    )
        .into_response()
}

pub(super) async fn readyz(State(state): State<AppState>) -> Response {
    let r = &state.shared.readiness;
    // Ready once the caches are synced, leader or standby: a drain and a rolling update wait for
    // Ready replicas, and a standby is one that can take over at once. Which replica receives
    // kube-scheduler's calls is the leader label's business (cluster::leader::label), and a
    // standby refuses any call that reaches it.
    if r.is_ready() {
        let body = match state.shared.leadership.refusal(Instant::now()) {
            None => "ok".to_string(),
            Some(refusal) => format!("ok, not deciding: {refusal}"),
        };
        (StatusCode::OK, body).into_response()
    } else {
        let mut message = format!(
            "not ready: pods synced={}, nodes synced={}",
            r.pods_synced(),
            r.nodes_synced()
        );
        if let Some(pending) = r.pod_groups_pending() {
            message.push_str(&format!(", {pending}"));
        }
        (StatusCode::SERVICE_UNAVAILABLE, message).into_response()
    }
}

/// A verb call answered by a replica that does not decide closes its connection:
/// kube-scheduler keeps connections alive, and a Service only picks an endpoint for a new one
/// (by then the new leader's pod carries the leader label), so this is what moves the
/// scheduler's calls over to the new leader.
pub(super) async fn close_unless_leading(
    State(state): State<AppState>,
    mut response: Response,
) -> Response {
    if !state.shared.leadership.is_leading(Instant::now()) {
        response.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
    }
    response
}

pub(super) async fn metrics(State(state): State<AppState>) -> Response {
    let shared = &state.shared;
    let leading = shared.leadership.is_leading(Instant::now());
    shared.metrics.leader.set(i64::from(leading));
    let (gauges, nodes, pods, pod_groups) = {
        let t = shared.table.lock();
        let pod_groups = crate::cluster::pod_groups::gauges(&t);
        (
            t.gauges(Instant::now()),
            t.node_count(),
            t.pod_count(),
            pod_groups,
        )
    };
    shared.metrics.set_pod_groups(&pod_groups);
    let body = shared.metrics.render(gauges, nodes, pods);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

pub(super) async fn gangs(State(state): State<AppState>) -> Response {
    let views = state.shared.table.lock().views(Instant::now());
    Json(json!({ "gangs": views })).into_response()
}
