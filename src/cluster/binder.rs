//! Creates `pods/binding` objects: muster is kube-scheduler's bind extender, so every binding
//! of every pod it is asked about is made here.
//!
//! A binding the API server refuses for a moment (throttled, a server error, a timeout, a
//! conflict other than "already bound") is tried again with backoff while the pod keeps its
//! node in the table, so nothing takes its room meanwhile; one refused for good (the pod is
//! gone or bound elsewhere, the request is invalid) is reported at once. A forbidden binding is
//! tried again too: a restarted API server refuses for a moment what its RBAC allows.

use std::fmt;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::Client;

use crate::model::{NodeName, PodRef};

/// Why a binding was not created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BindError {
    /// Worth another try: throttled (429), a server error (5xx), a timeout or a lost
    /// connection, a conflict other than "already bound", forbidden (403: an API server just
    /// restarted may refuse for a moment what RBAC allows).
    Transient(String),
    /// Another try cannot help: the pod is gone or bound elsewhere, or the request is refused.
    Permanent(String),
}

impl fmt::Display for BindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BindError::Transient(m) | BindError::Permanent(m) => f.write_str(m),
        }
    }
}

/// Something that can bind a pod to a node. The real one talks to the API server; tests use
/// one that records calls.
pub trait Binder: Send + Sync + 'static {
    fn bind(&self, pod: PodRef, node: NodeName) -> BoxFuture<'static, Result<(), BindError>>;
}

/// How often, and how far apart, one binding is tried while its errors are transient.
#[derive(Clone, Copy, Debug)]
pub struct RetryPolicy {
    pub attempts: u32,
    pub first_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    /// Six attempts over about three seconds: long enough to ride out a throttled or
    /// restarting API server's blip, short enough that a held bind call still gets its answer.
    fn default() -> Self {
        RetryPolicy {
            attempts: 6,
            first_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(2),
        }
    }
}

/// Binds `pod` to `node`, trying again after transient errors with doubling delays.
/// `on_retry` is called before each further attempt (for a metric). The final error names
/// the API server's last answer and how many attempts were made.
pub async fn bind_retrying(
    binder: &dyn Binder,
    pod: PodRef,
    node: NodeName,
    policy: RetryPolicy,
    on_retry: impl Fn(),
) -> Result<(), String> {
    let mut delay = policy.first_delay;
    let mut attempt = 1;
    loop {
        match binder.bind(pod.clone(), node.clone()).await {
            Ok(()) => return Ok(()),
            Err(BindError::Permanent(m)) => return Err(m),
            Err(BindError::Transient(m)) if attempt >= policy.attempts => {
                return Err(format!("{m} (still failing after {attempt} attempts)"))
            }
            Err(BindError::Transient(_)) => {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(policy.max_delay);
                attempt += 1;
                on_retry();
            }
        }
    }
}

/// What an answer of the API server to a binding means for muster.
pub fn classify(code: u16, message: &str, node: &str) -> Result<(), BindError> {
    match code {
        // Bound to the same node by an earlier attempt (e.g. before a restart, or an attempt
        // whose answer was lost): done.
        409 if message.contains(&format!("already assigned to node \"{node}\"")) => Ok(()),
        409 if message.contains("already assigned to node") => {
            Err(BindError::Permanent(message.to_string()))
        }
        // A conflict on the pod's resourceVersion or an etcd race: another try may pass.
        // Forbidden too, for the few retries' worth: a kube-apiserver that has just
        // (re)started answers before its RBAC authorizer has loaded the roles, and refuses
        // requests its roles allow (seen in the API-server-restart fault test: a gang member's
        // binding refused 403 right after the restart, its gang left partly bound). A real
        // missing permission still fails, after the retries (about three seconds).
        403 | 409 | 429 | 500..=599 => Err(BindError::Transient(message.to_string())),
        _ => Err(BindError::Permanent(message.to_string())),
    }
}

pub struct KubeBinder {
    client: Client,
}

impl KubeBinder {
    pub fn new(client: Client) -> Self {
        KubeBinder { client }
    }
}

impl Binder for KubeBinder {
    fn bind(&self, pod: PodRef, node: NodeName) -> BoxFuture<'static, Result<(), BindError>> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        Box::pin(async move {
            let binding = Binding {
                metadata: ObjectMeta {
                    name: Some(pod.name.to_string()),
                    namespace: Some(pod.namespace.to_string()),
                    // The API server refuses the binding if the pod was replaced by another
                    // with the same name since muster decided.
                    uid: Some(pod.uid.to_string()),
                    ..Default::default()
                },
                target: ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Node".into()),
                    name: Some(node.to_string()),
                    ..Default::default()
                },
            };
            let result: Result<serde_json::Value, kube::Error> = api
                .create_subresource("binding", &pod.name, &PostParams::default(), &binding)
                .await;
            match result {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) => classify(s.code, &s.message, &node),
                // No answer at all (connection refused or lost, a timeout): try again.
                Err(e) => Err(BindError::Transient(e.to_string())),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    #[test]
    fn the_api_servers_answers_are_told_apart() {
        let n = "n1";
        assert_eq!(
            classify(409, "pod p is already assigned to node \"n1\"", n),
            Ok(())
        );
        let elsewhere = "pod p is already assigned to node \"n2\"";
        assert_eq!(
            classify(409, elsewhere, n),
            Err(BindError::Permanent(elsewhere.into()))
        );
        for code in [403, 409, 429, 500, 503, 504] {
            assert!(
                matches!(classify(code, "x", n), Err(BindError::Transient(_))),
                "{code}"
            );
        }
        for code in [400, 404, 422] {
            assert!(
                matches!(classify(code, "x", n), Err(BindError::Permanent(_))),
                "{code}"
            );
        }
    }

    /// Fails with `errors` in turn, then succeeds.
    struct Scripted {
        errors: parking_lot::Mutex<Vec<BindError>>,
        calls: AtomicU32,
    }

    impl Binder for Scripted {
        fn bind(&self, _: PodRef, _: NodeName) -> BoxFuture<'static, Result<(), BindError>> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let next = self.errors.lock().pop();
            Box::pin(async move { next.map_or(Ok(()), Err) })
        }
    }

    fn scripted(mut errors: Vec<BindError>) -> Scripted {
        errors.reverse();
        Scripted {
            errors: parking_lot::Mutex::new(errors),
            calls: AtomicU32::new(0),
        }
    }

    fn pod() -> PodRef {
        PodRef {
            namespace: Arc::from("ml"),
            name: Arc::from("p"),
            uid: Arc::from("u"),
        }
    }

    const FAST: RetryPolicy = RetryPolicy {
        attempts: 3,
        first_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(2),
    };

    #[tokio::test]
    async fn transient_errors_are_tried_again_and_permanent_ones_are_not() {
        let t = |m: &str| BindError::Transient(m.into());
        let retried = AtomicU32::new(0);
        let count = || {
            retried.fetch_add(1, Ordering::SeqCst);
        };
        let b = scripted(vec![t("429"), t("etcd timeout")]);
        assert_eq!(
            bind_retrying(&b, pod(), "n".into(), FAST, count).await,
            Ok(())
        );
        assert_eq!(b.calls.load(Ordering::SeqCst), 3);
        assert_eq!(retried.load(Ordering::SeqCst), 2);

        let b = scripted(vec![t("a"), t("b"), t("c"), t("d")]);
        assert_eq!(
            bind_retrying(&b, pod(), "n".into(), FAST, || ()).await,
            Err("c (still failing after 3 attempts)".into())
        );
        assert_eq!(b.calls.load(Ordering::SeqCst), 3);

        let b = scripted(vec![BindError::Permanent("pods \"p\" not found".into())]);
        assert_eq!(
            bind_retrying(&b, pod(), "n".into(), FAST, || ()).await,
            Err("pods \"p\" not found".into())
        );
        assert_eq!(b.calls.load(Ordering::SeqCst), 1);
    }
}
