//! Creates `pods/binding` objects: muster is kube-scheduler's bind extender, so every binding
//! of every pod it is asked about is made here.
//!
//! A binding the API server refuses for a moment (throttled, a server error, a timeout, a
//! conflict other than "already bound") is tried again with backoff while the pod keeps its
//! node in the table, so nothing takes its room meanwhile; one refused for good (the pod is
//! gone or bound elsewhere, the request is invalid) is reported at once. A forbidden binding is
//! tried again too: a restarted API server refuses for a moment what its RBAC allows.
//!
//! Every retry is this module's, and says so: the binder's client has kube-client's own retry
//! layer off (it would repeat 429/503/504 up to 15 times, honouring `Retry-After`, silently and
//! past any budget), so one attempt here is one request, and a binding takes at most
//! [`RetryPolicy::attempts`] requests within [`RetryPolicy::budget`], a 429's `Retry-After`
//! honoured when it fits in what is left of the budget.

use std::future::Future;
use std::time::Duration;

use futures::future::BoxFuture;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{Binding, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::Client;

use crate::model::{NodeName, PodRef};
use crate::state::binder::{BindError, Binder};

/// How often, how far apart and for how long one binding is tried while its errors are
/// transient.
#[derive(Clone, Copy, Debug)]
pub struct RetryPolicy {
    /// Requests at most (the first included).
    pub attempts: u32,
    pub first_delay: Duration,
    pub max_delay: Duration,
    /// From the first request to the last answer: no request runs, and no wait ends, past it.
    pub budget: Duration,
    /// A 429's `Retry-After` is waited for at most this long before the next attempt; `None`:
    /// all of it, and the write fails at once when that would end past the budget.
    pub longest_retry_after: Option<Duration>,
}

impl Default for RetryPolicy {
    /// Six attempts, 0.1 s apart doubling (3.1 s of waiting between them), within 6 s in all:
    /// long enough to ride out a throttled or restarting API server's blip, short enough that
    /// a bind call still gets its binding's outcome before kube-scheduler's `httpTimeout`
    /// (10 s in the shipped configurations).
    fn default() -> Self {
        RetryPolicy {
            attempts: 6,
            first_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(2),
            budget: Duration::from_secs(6),
            longest_retry_after: None,
        }
    }
}

/// Binds `pod` to `node`, trying again after transient errors with doubling delays (a 429's
/// `Retry-After` when longer), within the policy's attempts and budget. `on_retry` is called
/// before each further attempt (for a metric). The final error names the API server's last
/// answer and why muster stopped trying.
pub async fn bind_retrying(
    binder: &dyn Binder,
    pod: PodRef,
    node: NodeName,
    policy: RetryPolicy,
    on_retry: impl Fn(),
) -> Result<(), String> {
    retrying(policy, "binding", on_retry, || {
        binder.bind(pod.clone(), node.clone())
    })
    .await
}

/// Makes `attempt` until it succeeds or fails for good, trying again after transient errors
/// with doubling delays (a 429's `Retry-After` when longer, up to the policy's
/// `longest_retry_after`) within the policy's attempts and budget: a wait that would end past
/// the budget ends it at once. `what` names the
/// write in the final error ("the binding's budget"). Shared by the binder and the gatherer's
/// pod patches (`cluster::gather`), so both honour the API server's throttling alike.
pub async fn retrying<F: Future<Output = Result<(), BindError>>>(
    policy: RetryPolicy,
    what: &str,
    on_retry: impl Fn(),
    mut attempt: impl FnMut() -> F,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + policy.budget;
    let mut delay = policy.first_delay;
    let mut n = 1;
    loop {
        let answer = tokio::time::timeout_at(deadline, attempt());
        let (message, wait) = match answer.await {
            Err(_) => {
                return Err(format!(
                    "no answer from the API server within the {what}'s budget of {:?} \
                     ({n} attempts)",
                    policy.budget
                ))
            }
            Ok(Ok(())) => return Ok(()),
            Ok(Err(BindError::Permanent(m))) => return Err(m),
            Ok(Err(BindError::Transient(m))) => (m, delay),
            Ok(Err(BindError::Throttled {
                message,
                retry_after,
            })) => {
                let retry_after = match policy.longest_retry_after {
                    Some(longest) => retry_after.map(|r| r.min(longest)),
                    None => retry_after,
                };
                (message, retry_after.map_or(delay, |r| r.max(delay)))
            }
        };
        if n >= policy.attempts {
            return Err(format!("{message} (still failing after {n} attempts)"));
        }
        if tokio::time::Instant::now() + wait >= deadline {
            return Err(format!(
                "{message} (gave up after {n} attempts: the next, {wait:?} later, would \
                 end past the {what}'s budget of {:?})",
                policy.budget
            ));
        }
        tokio::time::sleep(wait).await;
        delay = (delay * 2).min(policy.max_delay);
        n += 1;
        on_retry();
    }
}

/// Sends one request (no retry: the client has none, see the module's comment). `Ok` on a
/// success; else what the API server answered: a 429 as [`BindError::Throttled`] with its
/// `Retry-After`, any other refusal passed to `classify` with its code and message; no answer
/// at all (connection refused or lost, a timeout) is transient.
pub async fn send_once(
    client: &Client,
    request: axum::http::Request<Vec<u8>>,
    classify: impl FnOnce(u16, &str) -> Result<(), BindError>,
) -> Result<(), BindError> {
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .map_err(|e| BindError::Transient(e.to_string()))?;
    let code = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    if response.status().is_success() {
        return Ok(());
    }
    let body = match response.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return Err(BindError::Transient(format!("HTTP {code}: {e}"))),
    };
    let message = status_message(code, &body);
    if code == 429 {
        return Err(BindError::Throttled {
            message,
            retry_after,
        });
    }
    classify(code, &message)
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
        403 | 409 | 500..=599 => Err(BindError::Transient(message.to_string())),
        429 => Err(BindError::Throttled {
            message: message.to_string(),
            retry_after: None,
        }),
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
        let client = self.client.clone();
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
            let body = serde_json::to_vec(&binding)
                .map_err(|e| BindError::Permanent(format!("cannot encode the binding: {e}")))?;
            let request =
                kube::core::Request::new(format!("/api/v1/namespaces/{}/pods", pod.namespace))
                    .create_subresource("binding", &pod.name, &PostParams::default(), body)
                    .map_err(|e| {
                        BindError::Permanent(format!("cannot build the binding request: {e}"))
                    })?;
            // One request: the client has no retry layer (see the module's comment).
            send_once(&client, request, |code, message| {
                classify(code, message, &node)
            })
            .await
        })
    }
}

/// The message of the API server's error answer: the `Status` object's, else the body's text
/// (a throttled request's answer is plain text).
fn status_message(code: u16, body: &[u8]) -> String {
    let status: Option<kube::core::Status> = serde_json::from_slice(body).ok();
    match status {
        Some(s) if !s.message.is_empty() => s.message,
        _ => {
            let text = String::from_utf8_lossy(body);
            let text = text.trim();
            if text.is_empty() {
                format!("HTTP {code}")
            } else {
                format!("HTTP {code}: {text}")
            }
        }
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
        assert_eq!(
            classify(429, "x", n),
            Err(BindError::Throttled {
                message: "x".into(),
                retry_after: None
            })
        );
        for code in [403, 409, 500, 503, 504] {
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
        budget: Duration::from_secs(5),
        longest_retry_after: None,
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

    fn throttled(after: Option<Duration>) -> BindError {
        BindError::Throttled {
            message: "Too many requests".into(),
            retry_after: after,
        }
    }

    #[tokio::test]
    async fn a_429_is_tried_again_after_its_retry_after_when_that_fits_in_the_budget() {
        let b = scripted(vec![throttled(Some(Duration::from_millis(300)))]);
        let started = std::time::Instant::now();
        assert_eq!(
            bind_retrying(&b, pod(), "n".into(), FAST, || ()).await,
            Ok(())
        );
        assert!(
            started.elapsed() >= Duration::from_millis(300),
            "tried again after {:?}, before Retry-After",
            started.elapsed()
        );
        assert_eq!(b.calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_retry_after_past_the_budget_ends_the_binding_at_once_and_says_why() {
        let policy = RetryPolicy {
            budget: Duration::from_secs(2),
            ..FAST
        };
        let b = scripted(vec![throttled(Some(Duration::from_secs(30)))]);
        let started = std::time::Instant::now();
        let result = bind_retrying(&b, pod(), "n".into(), policy, || ()).await;
        assert!(started.elapsed() < Duration::from_secs(1), "waited for it");
        assert_eq!(
            result,
            Err(
                "Too many requests (gave up after 1 attempts: the next, 30s later, would end \
                 past the binding's budget of 2s)"
                    .into()
            )
        );
        assert_eq!(b.calls.load(Ordering::SeqCst), 1);
    }

    /// Never answers, as an API server that took the request and hung.
    struct Hung;

    impl Binder for Hung {
        fn bind(&self, _: PodRef, _: NodeName) -> BoxFuture<'static, Result<(), BindError>> {
            Box::pin(std::future::pending())
        }
    }

    #[tokio::test]
    async fn an_attempt_without_an_answer_ends_with_the_budget() {
        let policy = RetryPolicy {
            budget: Duration::from_millis(300),
            ..FAST
        };
        let started = std::time::Instant::now();
        let result = bind_retrying(&Hung, pod(), "n".into(), policy, || ()).await;
        let took = started.elapsed();
        assert!(
            (Duration::from_millis(300)..Duration::from_secs(2)).contains(&took),
            "{took:?}"
        );
        assert_eq!(
            result,
            Err(
                "no answer from the API server within the binding's budget of 300ms \
                 (1 attempts)"
                    .into()
            )
        );
    }

    #[test]
    fn the_default_policy_is_six_attempts_within_six_seconds() {
        let p = RetryPolicy::default();
        let waits: Duration = (0..p.attempts - 1)
            .map(|i| (p.first_delay * 2u32.pow(i)).min(p.max_delay))
            .sum();
        assert_eq!(
            (p.attempts, waits, p.budget),
            (6, Duration::from_millis(3100), Duration::from_secs(6))
        );
    }

    /// docs/operating.md (its configuration section) and docs/design.md state the default
    /// policy's figures (the docs once said "6 attempts over about 3 s" while kube-client's
    /// retries ran unbounded underneath).
    #[test]
    fn the_operating_guide_and_the_design_state_the_default_policys_figures() {
        let p = RetryPolicy::default();
        let secs = |d: Duration| format!("{}", d.as_secs_f64());
        let mut waits: Vec<String> = (0..p.attempts - 1)
            .map(|i| secs((p.first_delay * 2u32.pow(i)).min(p.max_delay)))
            .collect();
        let last = waits.pop().expect("more than one attempt");
        let stated = [
            format!("at most {} requests", p.attempts),
            format!("waits of {} and {last} s between", waits.join(", ")),
            format!("budget of {} s", secs(p.budget)),
        ];
        for (file, text) in [
            ("docs/operating.md", include_str!("../../docs/operating.md")),
            ("docs/design.md", include_str!("../../docs/design.md")),
        ] {
            let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
            for s in &stated {
                assert!(text.contains(s.as_str()), "{file} does not say {s:?}");
            }
        }
    }

    #[test]
    fn an_error_answer_is_told_by_its_status_message_or_its_text() {
        let status = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"p\" not found","reason":"NotFound","code":404}"#;
        assert_eq!(status_message(404, status), "pods \"p\" not found");
        assert_eq!(
            status_message(429, b"Too many requests, please try again later.\n"),
            "HTTP 429: Too many requests, please try again later."
        );
        assert_eq!(status_message(503, b""), "HTTP 503");
    }
}
