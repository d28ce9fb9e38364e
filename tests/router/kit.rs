//! What the router test crates (`router.rs`, `router_leader.rs`) share: a recording binder, one
//! request through the router, and the bind arguments as kube-scheduler's Go encoder writes them.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use futures::future::BoxFuture;
use http_body_util::BodyExt;
use parking_lot::Mutex;
use tower::ServiceExt;

use muster::http::{router, AppState};
use muster::model::{NodeName, PodRef};
use muster::state::binder::{BindError, Binder};

/// Records binding calls; fails for good for pods named in `fail`, and for a moment (429)
/// as many times as `flaky` says for the pods it names; with a `gate`, each binding waits for
/// a permit, as a slow API server would make it wait.
#[derive(Default)]
pub struct FakeBinder {
    pub calls: Mutex<Vec<String>>,
    pub fail: Mutex<Vec<String>>,
    pub flaky: Mutex<Vec<(String, u32)>>,
    pub gate: Option<Arc<tokio::sync::Semaphore>>,
}

impl Binder for FakeBinder {
    fn bind(&self, pod: PodRef, node: NodeName) -> BoxFuture<'static, Result<(), BindError>> {
        self.calls.lock().push(format!("{pod}@{node}"));
        let fail = self.fail.lock().contains(&pod.name.to_string());
        let throttled = self
            .flaky
            .lock()
            .iter_mut()
            .find(|(name, left)| **name == *pod.name && *left > 0)
            .map(|(_, left)| *left -= 1)
            .is_some();
        let gate = self.gate.clone();
        Box::pin(async move {
            if let Some(gate) = gate {
                gate.acquire().await.expect("gate open").forget();
            }
            if fail {
                Err(BindError::Permanent("the API server said no".to_string()))
            } else if throttled {
                Err(BindError::Transient("Too Many Requests".to_string()))
            } else {
                Ok(())
            }
        })
    }
}

/// One request through a router serving `state` at the root, driven with `oneshot`: the
/// status, the headers and the body of the answer.
pub async fn call(
    state: AppState,
    method: &str,
    path: &str,
    body: &str,
) -> (StatusCode, HeaderMap, String) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp = router(state, "").oneshot(req).await.unwrap();
    let (status, headers) = (resp.status(), resp.headers().clone());
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, headers, String::from_utf8(bytes.to_vec()).unwrap())
}

/// `ExtenderBindingArgs` for a pod of namespace `ml`.
pub fn bind_args(name: &str, uid: &str, node: &str) -> String {
    format!(r#"{{"PodName":"{name}","PodNamespace":"ml","PodUID":"{uid}","Node":"{node}"}}"#)
}
