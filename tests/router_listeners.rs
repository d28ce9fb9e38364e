//! Which endpoints each listener serves (`--ops-listen-addr`), driven with `oneshot`: the verbs
//! and `/gangs` only on the verbs router (the HTTPS, client-certificate port), `/healthz`,
//! `/readyz` and `/metrics` only on the ops router (plain HTTP), everything on the single-port
//! router. A route that exists answers something other than 404 (a verb given `{}` answers 400).

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use futures::future::BoxFuture;
use tower::ServiceExt;

use muster::http::{ops_router, router, verbs_router, AppState};
use muster::model::{ModelConfig, NodeName, PodRef};
use muster::state::binder::{BindError, Binder};
use muster::state::event_sink::EventSink;
use muster::state::Shared;

/// Never called: no test here reaches a bind.
struct NoBinder;

impl Binder for NoBinder {
    fn bind(&self, _: PodRef, _: NodeName) -> BoxFuture<'static, Result<(), BindError>> {
        Box::pin(async { Err(BindError::Permanent("not in this test".to_string())) })
    }
}

fn state() -> AppState {
    let shared = Arc::new(Shared::new(
        ModelConfig::default(),
        Arc::new(NoBinder),
        EventSink::disabled(),
    ));
    shared.readiness.set_pods_synced();
    shared.readiness.set_nodes_synced();
    AppState {
        shared,
        max_body_bytes: 64 * 1024,
        bind_wait: std::time::Duration::ZERO,
    }
}

async fn status(app: &Router, method: &str, path: &str) -> StatusCode {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from("{}"))
        .unwrap();
    app.clone().oneshot(req).await.unwrap().status()
}

const VERBS: [(&str, &str); 4] = [
    ("POST", "/muster/filter"),
    ("POST", "/muster/prioritize"),
    ("POST", "/muster/bind"),
    ("GET", "/gangs"),
];
const OPS: [(&str, &str); 3] = [("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/metrics")];

#[tokio::test]
async fn verbs_router_serves_the_verbs_and_gangs_only() {
    let app = verbs_router(state(), "/muster");
    for (m, p) in VERBS {
        assert_ne!(status(&app, m, p).await, StatusCode::NOT_FOUND, "{m} {p}");
    }
    for (m, p) in OPS {
        assert_eq!(status(&app, m, p).await, StatusCode::NOT_FOUND, "{m} {p}");
    }
}

#[tokio::test]
async fn ops_router_serves_probes_and_metrics_only() {
    let app = ops_router(state(), false);
    for (m, p) in OPS {
        assert_eq!(status(&app, m, p).await, StatusCode::OK, "{m} {p}");
    }
    for (m, p) in VERBS
        .into_iter()
        .chain([("POST", "/filter"), ("POST", "/bind")])
    {
        assert_eq!(status(&app, m, p).await, StatusCode::NOT_FOUND, "{m} {p}");
    }
}

/// `--ops-gangs`: the read-only `/gangs` joins the probes (for `kubectl muster` through the API
/// server's service proxy); the verbs still do not.
#[tokio::test]
async fn ops_router_with_ops_gangs_serves_gangs_but_no_verb() {
    let app = ops_router(state(), true);
    assert_eq!(status(&app, "GET", "/gangs").await, StatusCode::OK);
    for (m, p) in OPS {
        assert_eq!(status(&app, m, p).await, StatusCode::OK, "{m} {p}");
    }
    for (m, p) in VERBS
        .into_iter()
        .filter(|(_, p)| *p != "/gangs")
        .chain([("POST", "/filter"), ("POST", "/bind")])
    {
        assert_eq!(status(&app, m, p).await, StatusCode::NOT_FOUND, "{m} {p}");
    }
}

#[tokio::test]
async fn single_port_router_serves_everything() {
    let app = router(state(), "/muster");
    for (m, p) in VERBS {
        assert_ne!(status(&app, m, p).await, StatusCode::NOT_FOUND, "{m} {p}");
    }
    for (m, p) in OPS {
        assert_eq!(status(&app, m, p).await, StatusCode::OK, "{m} {p}");
    }
}
