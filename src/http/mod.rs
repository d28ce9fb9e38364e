//! The HTTP surface: the extender verbs, health, metrics and the read-only gang view.
//!
//! Two kinds of "no" are kept apart. A verdict or domain error (the gang is waiting, the pod is
//! unknown, the node has no room) is HTTP 200 with `Error` set: kube-scheduler throws away the
//! body of any other status, and it is the message that tells the user why. A request that is
//! not a valid extender request at all (malformed JSON, wrong types, too large) gets 400/413
//! with the same `{"Error": ...}` body; kube-scheduler never sends those.
//!
//! One file per verb; what every verb does first (timing, reading and decoding the body,
//! readiness, the pod and the node names) is the [`call::Call`] extractor. What a bind call does
//! beyond its wire form is [`crate::binding`]'s.

mod bind;
mod call;
mod error;
mod filter;
mod ops;
mod preempt;
mod prioritize;

use std::sync::Arc;
use std::time::Duration;

use axum::routing::{get, post};
use axum::Router;

pub use call::ANSWER_MARGIN;
pub use error::{decode, ApiError, WireName};

use crate::state::Shared;

/// Default limit on request bodies: a full NodeList of 5,000 nodes (nodeCacheCapable: false)
/// is about 20 MiB; node-name requests are far smaller.
pub const DEFAULT_MAX_BODY_BYTES: usize = 32 << 20;

#[derive(Clone)]
pub struct AppState {
    pub shared: Arc<Shared>,
    pub max_body_bytes: usize,
    /// How long a bind call of a member below quorum is held open waiting for the rest of its
    /// gang (zero: answer "waiting" at once). `--bind-wait` is checked to stay below the
    /// extender's httpTimeout.
    pub bind_wait: Duration,
}

/// The extender verbs under `prefix` ("" or "/something", the path of the extender
/// `urlPrefix`), each answered only by the leader.
fn verbs(state: &AppState, prefix: &str) -> Router<AppState> {
    let verbs = Router::new()
        .route("/filter", post(filter::filter))
        .route("/prioritize", post(prioritize::prioritize))
        .route("/bind", post(bind::bind))
        .route("/preempt", post(preempt::preempt))
        .layer(axum::middleware::map_response_with_state(
            state.clone(),
            ops::close_unless_leading,
        ));
    if prefix.is_empty() {
        verbs
    } else {
        Router::new().nest(prefix, verbs)
    }
}

/// `/healthz`, `/readyz` and `/metrics`.
fn probes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
}

/// Everything on one port: the verbs, `/gangs`, probes and metrics (local use, and the
/// single-listener mode when `--ops-listen-addr` is unset).
pub fn router(state: AppState, prefix: &str) -> Router {
    Router::new()
        .route("/gangs", get(ops::gangs))
        .merge(probes())
        .merge(verbs(&state, prefix))
        .fallback(ops::not_found)
        .with_state(state)
}

/// The extender verbs (under `prefix`) and `/gangs`: what the HTTPS listener serves when the
/// operational endpoints have a listener of their own (`--ops-listen-addr`). `/gangs` stays here
/// because it names pods of every namespace: it gets the verbs' client-certificate check.
pub fn verbs_router(state: AppState, prefix: &str) -> Router {
    Router::new()
        .route("/gangs", get(ops::gangs))
        .merge(verbs(&state, prefix))
        .fallback(ops::not_found)
        .with_state(state)
}

/// `/healthz`, `/readyz` and `/metrics`: plain HTTP on `--ops-listen-addr`, for kubelet probes
/// and Prometheus, which present no client certificate; with `gangs` (`--ops-gangs`) also the
/// read-only `/gangs`, which `kubectl muster` reads through the API server's service proxy
/// (the user's RBAC on `services/proxy` decides who may; the verbs stay behind the client
/// certificate).
pub fn ops_router(state: AppState, gangs: bool) -> Router {
    let probes = probes();
    let probes = if gangs {
        probes.route("/gangs", get(ops::gangs))
    } else {
        probes
    };
    probes.fallback(ops::not_found).with_state(state)
}
