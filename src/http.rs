//! The HTTP surface: the extender verbs, health, metrics and the read-only gang view.
//!
//! Two kinds of "no" are kept apart. A verdict or domain error (the gang is waiting, the pod is
//! unknown, the node has no room) is HTTP 200 with `Error` set: kube-scheduler throws away the
//! body of any other status, and it is the message that tells the user why. A request that is
//! not a valid extender request at all (malformed JSON, wrong types, too large) gets 400/413
//! with the same `{"Error": ...}` body; kube-scheduler never sends those.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::{header, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::future::join_all;
use serde::Deserialize;
use serde_json::json;
use tracing::{debug, info, warn};

use crate::cluster::convert::pod_info;
use crate::metrics::{VerbLabel, VerbOutcomeLabel};
use crate::model::{BindDecision, BindRequest, NodeVerdict, Notice, NoticeKind, PodRef};
use crate::state::Shared;
use crate::wire::{
    ExtenderArgs, ExtenderBindingArgs, ExtenderBindingResult, ExtenderFilterResult, HostPriority,
    NodeList,
};

/// Default limit on request bodies: a full NodeList of 5,000 nodes (nodeCacheCapable: false)
/// is about 20 MiB; node-name requests are far smaller.
pub const DEFAULT_MAX_BODY_BYTES: usize = 32 << 20;

#[derive(Clone)]
pub struct AppState {
    pub shared: Arc<Shared>,
    pub max_body_bytes: usize,
    /// How long a bind call of a member below quorum is held open waiting for the rest of its
    /// gang (zero: answer "waiting" at once). Must stay below the extender's httpTimeout.
    pub bind_wait: Duration,
}

/// Builds the router. `prefix` is the extender `urlPrefix` path ("" or "/something").
pub fn router(state: AppState, prefix: &str) -> Router {
    let verbs = Router::new()
        .route("/filter", post(filter))
        .route("/prioritize", post(prioritize))
        .route("/bind", post(bind));
    let verbs = if prefix.is_empty() {
        verbs
    } else {
        Router::new().nest(prefix, verbs)
    };
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/gangs", get(gangs))
        .merge(verbs)
        .fallback(not_found)
        .with_state(state)
}

/// The extender verbs (under `prefix`) and `/gangs`: what the HTTPS listener serves when the
/// operational endpoints have a listener of their own (`--ops-listen-addr`). `/gangs` stays here
/// because it names pods of every namespace: it gets the verbs' client-certificate check.
pub fn verbs_router(state: AppState, prefix: &str) -> Router {
    let verbs = Router::new()
        .route("/filter", post(filter))
        .route("/prioritize", post(prioritize))
        .route("/bind", post(bind));
    let verbs = if prefix.is_empty() {
        verbs
    } else {
        Router::new().nest(prefix, verbs)
    };
    Router::new()
        .route("/gangs", get(gangs))
        .merge(verbs)
        .fallback(not_found)
        .with_state(state)
}

/// `/healthz`, `/readyz` and `/metrics`: plain HTTP on `--ops-listen-addr`, for kubelet probes
/// and Prometheus, which present no client certificate.
pub fn ops_router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .with_state(state)
}

// ---------------------------------------------------------------- errors

/// A request that is not a valid extender request.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("request body is larger than the limit of {limit} bytes (--max-body-bytes)")]
    TooLarge { limit: usize },
    #[error("could not read the request body: {0}")]
    Body(String),
    #[error("invalid {what} JSON{at}: {message}")]
    BadJson {
        what: &'static str,
        at: String,
        message: String,
    },
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match self {
            ApiError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::BAD_REQUEST,
        };
        (status, Json(json!({ "Error": self.to_string() }))).into_response()
    }
}

/// The raw request body, read with the configured size limit. Decoding happens in the
/// handler so that the decoded request can borrow from these bytes.
pub struct RawBody(pub Bytes);

/// The Go type name a body should decode as, for error messages.
pub trait WireName {
    const NAME: &'static str;
}
impl WireName for ExtenderArgs<'_> {
    const NAME: &'static str = "ExtenderArgs";
}
impl WireName for ExtenderBindingArgs {
    const NAME: &'static str = "ExtenderBindingArgs";
}

impl FromRequest<AppState> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let limit = state.max_body_bytes;
        axum::body::to_bytes(req.into_body(), limit)
            .await
            .map(RawBody)
            .map_err(|e| {
                let is_limit = std::error::Error::source(&e)
                    .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
                if is_limit {
                    ApiError::TooLarge { limit }
                } else {
                    ApiError::Body(e.to_string())
                }
            })
    }
}

/// Decodes a request, naming the offending field on error.
pub fn decode<'a, T: Deserialize<'a> + WireName>(bytes: &'a [u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        ApiError::BadJson {
            what: T::NAME,
            at: if path == "." || path == "?" {
                String::new()
            } else {
                format!(" at {path}")
            },
            message: e.into_inner().to_string(),
        }
    })
}

async fn not_found(method: Method, uri: Uri) -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(json!({
            "Error": format!(
                "no such endpoint: {method} {}; muster serves POST <prefix>/filter, <prefix>/prioritize, <prefix>/bind and GET /healthz, /readyz, /metrics, /gangs",
                uri.path()
            )
        })),
    )
        .into_response()
}

const NOT_READY: &str =
    "muster is starting: its pod and node caches are not synced yet; retry shortly";

fn record(shared: &Shared, verb: &'static str, outcome: &'static str, started: Instant) {
    shared
        .metrics
        .requests
        .get_or_create(&VerbOutcomeLabel { verb, outcome })
        .inc();
    shared
        .metrics
        .latency
        .get_or_create(&VerbLabel { verb })
        .observe(started.elapsed().as_secs_f64());
}

/// Reads and decodes a request body, counting bad requests in the metrics.
fn read<'a, T: Deserialize<'a> + WireName>(
    shared: &Shared,
    verb: &'static str,
    started: Instant,
    body: &'a Result<RawBody, ApiError>,
) -> Result<T, Box<Response>> {
    let decoded = match body {
        Ok(RawBody(bytes)) => decode(bytes),
        Err(ApiError::TooLarge { limit }) => Err(ApiError::TooLarge { limit: *limit }),
        Err(e) => Err(ApiError::Body(e.to_string())),
    };
    decoded.map_err(|e| {
        warn!(verb, error = %e, "bad extender request");
        record(shared, verb, "bad_request", started);
        Box::new(e.into_response())
    })
}

// ---------------------------------------------------------------- filter

async fn filter(State(state): State<AppState>, body: Result<RawBody, ApiError>) -> Response {
    let started = Instant::now();
    let shared = &*state.shared;
    let args: ExtenderArgs = match read(shared, "filter", started, &body) {
        Ok(a) => a,
        Err(r) => return *r,
    };
    let refuse = |error: String| {
        record(shared, "filter", "refused", started);
        Json(ExtenderFilterResult {
            error,
            ..Default::default()
        })
        .into_response()
    };
    if !shared.readiness.is_ready() {
        return refuse(NOT_READY.into());
    }
    let pod = match pod_info(&args.pod) {
        Ok(p) => p,
        Err(e) => return refuse(e.to_string()),
    };
    let names_of_list: Vec<String>;
    let (names, node_list): (Vec<&str>, _) = match (args.node_names, args.nodes) {
        (Some(names), _) => (names, None),
        (None, Some(list)) => {
            names_of_list = list.names();
            (
                names_of_list.iter().map(String::as_str).collect(),
                Some(list),
            )
        }
        (None, None) => {
            return refuse("request has neither NodeNames nor Nodes: nothing to filter".into())
        }
    };
    let verdicts = {
        let mut table = shared.table.lock();
        table.filter(&pod, &names, Instant::now())
    };
    shared.flush_notices();

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
    match node_list {
        None => {
            result.node_names = Some(passing.into_iter().map(|i| names[i]).collect());
        }
        Some(list) => {
            let items = passing.into_iter().map(|i| list.items[i]).collect();
            result.nodes = Some(NodeList {
                metadata: list.metadata,
                items,
            });
        }
    }
    record(shared, "filter", "ok", started);
    Json(result).into_response()
}

// ---------------------------------------------------------------- prioritize

async fn prioritize(State(state): State<AppState>, body: Result<RawBody, ApiError>) -> Response {
    let started = Instant::now();
    let shared = &*state.shared;
    let args: ExtenderArgs = match read(shared, "prioritize", started, &body) {
        Ok(a) => a,
        Err(r) => return *r,
    };
    // kube-scheduler ignores prioritize errors, so a non-200 here costs nothing but a log line.
    let refuse = |status: StatusCode, error: String| {
        record(shared, "prioritize", "refused", started);
        (status, Json(json!({ "Error": error }))).into_response()
    };
    if !shared.readiness.is_ready() {
        return refuse(StatusCode::SERVICE_UNAVAILABLE, NOT_READY.into());
    }
    let pod = match pod_info(&args.pod) {
        Ok(p) => p,
        Err(e) => return refuse(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()),
    };
    let names_of_list: Vec<String>;
    let names: Vec<&str> = match (args.node_names, args.nodes) {
        (Some(names), _) => names,
        (None, Some(list)) => {
            names_of_list = list.names();
            names_of_list.iter().map(String::as_str).collect()
        }
        (None, None) => Vec::new(),
    };
    let scores = shared.table.lock().prioritize(&pod, &names);
    let reply: Vec<HostPriority> = names
        .into_iter()
        .zip(scores)
        .map(|(host, score)| HostPriority { host, score })
        .collect();
    record(shared, "prioritize", "ok", started);
    Json(reply).into_response()
}

// ---------------------------------------------------------------- bind

async fn bind(State(state): State<AppState>, body: Result<RawBody, ApiError>) -> Response {
    let started = Instant::now();
    let shared = &*state.shared;
    let args: ExtenderBindingArgs = match read(shared, "bind", started, &body) {
        Ok(a) => a,
        Err(r) => return *r,
    };
    let answer = |outcome: &'static str, error: String| {
        record(shared, "bind", outcome, started);
        Json(ExtenderBindingResult { error }).into_response()
    };
    if !shared.readiness.is_ready() {
        return answer("refused", NOT_READY.into());
    }
    let request = BindRequest {
        namespace: &args.pod_namespace,
        name: &args.pod_name,
        uid: &args.pod_uid,
        node: &args.node,
    };
    let decision = shared.table.lock().bind(request, Instant::now());
    shared.flush_notices();
    let pod = format!("{}/{}", args.pod_namespace, args.pod_name);
    match decision {
        BindDecision::AlreadyBound => answer("ok", String::new()),
        BindDecision::Reject(r) => {
            info!(%pod, node = %args.node, reason = %r, "bind refused");
            answer("refused", r.to_string())
        }
        BindDecision::Wait { gang, message } => {
            info!(%pod, node = %args.node, %message, "seated; waiting for quorum");
            shared.metrics.quorum_waits.inc();
            match hold_until_placed(shared, &gang, &args.pod_uid, state.bind_wait).await {
                Some(Ok(())) => answer("ok", String::new()),
                Some(Err(e)) => answer("refused", e),
                None => {
                    // The wait outlasted the hold: now it is worth telling the user.
                    shared.events.send_all(vec![Notice {
                        pod: PodRef {
                            namespace: args.pod_namespace.as_str().into(),
                            name: args.pod_name.as_str().into(),
                            uid: args.pod_uid.as_str().into(),
                        },
                        kind: NoticeKind::Waiting,
                        message: message.clone(),
                    }]);
                    answer("refused", message)
                }
            }
        }
        BindDecision::BindNow { pod: who, node } => {
            let result = shared.binder.bind(who.clone(), node.clone()).await;
            finish_binding(shared, &who, &node, &result);
            match result {
                Ok(()) => answer("ok", String::new()),
                Err(e) => answer("refused", format!("binding {who} to {node} failed: {e}")),
            }
        }
        BindDecision::BindGang { gang, members } => {
            info!(%gang, members = members.len(), "quorum reached; binding the gang");
            shared.metrics.gangs_placed.inc();
            let calls = members
                .iter()
                .map(|(p, n)| shared.binder.bind(p.clone(), n.clone()));
            let results = join_all(calls).await;
            let mut mine = Ok(());
            let now = Instant::now();
            for ((p, n), r) in members.iter().zip(results) {
                finish_binding(shared, p, n, &r);
                let r = r.map_err(|e| format!("binding {p} to {n} failed: {e}"));
                if *p.uid == *args.pod_uid {
                    mine = r;
                } else {
                    shared.bind_outcomes.insert(p.uid.clone(), (now, r));
                }
            }
            shared.wake_gang(&gang);
            match mine {
                Ok(()) => answer("ok", String::new()),
                Err(e) => answer("refused", e),
            }
        }
    }
}

/// Holds a bind call of a seated member until muster binds its gang (then answers with the
/// result of this pod's binding), the gang loses its seats (timeout, deletion), or `wait`
/// passes. `None`: still waiting; answer "waiting for quorum" and let kube-scheduler retry.
///
/// Holding the call instead of failing it at once spares kube-scheduler an error, a
/// FailedScheduling Event, a status write and a back-off per member: the gang is bound the
/// moment its last member arrives.
async fn hold_until_placed(
    shared: &Shared,
    gang: &crate::model::GangKey,
    uid: &str,
    wait: Duration,
) -> Option<Result<(), String>> {
    if wait.is_zero() {
        return None;
    }
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let waker = shared.waker(gang);
        let woken = waker.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        if let Some((_, (_, outcome))) = shared.bind_outcomes.remove(uid) {
            return Some(outcome);
        }
        let (waiting, reason) = {
            let t = shared.table.lock();
            // A member with a node has left its seat because its gang reached quorum: muster
            // is binding it, and the outcome arrives with the next wake-up.
            (t.holds_seat(uid) || t.has_node(uid), t.wait_reason(uid))
        };
        if !waiting {
            return Some(Err(reason.unwrap_or_else(|| {
                format!("gang {gang} released its seats before reaching quorum")
            })));
        }
        if tokio::time::timeout_at(deadline, woken).await.is_err() {
            return None;
        }
    }
}

fn finish_binding(
    shared: &Shared,
    pod: &crate::model::PodRef,
    node: &crate::model::NodeName,
    result: &Result<(), String>,
) {
    if let Err(e) = result {
        warn!(%pod, %node, error = %e, "binding failed");
        shared.metrics.bind_failures.inc();
        shared.table.lock().bind_finished(pod, node, Err(e.clone()));
        shared.flush_notices();
    } else {
        debug!(%pod, %node, "bound");
    }
}

// ---------------------------------------------------------------- operations

async fn readyz(State(state): State<AppState>) -> Response {
    let r = &state.shared.readiness;
    if r.is_ready() {
        (StatusCode::OK, "ok").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "not ready: pods synced={}, nodes synced={}",
                r.pods_synced(),
                r.nodes_synced()
            ),
        )
            .into_response()
    }
}

async fn metrics(State(state): State<AppState>) -> Response {
    let shared = &state.shared;
    let (gauges, nodes, pods) = {
        let t = shared.table.lock();
        (t.gauges(Instant::now()), t.node_count(), t.pod_count())
    };
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

async fn gangs(State(state): State<AppState>) -> Response {
    let views = state.shared.table.lock().views(Instant::now());
    Json(json!({ "gangs": views })).into_response()
}
