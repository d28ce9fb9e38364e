//! A loopback HTTP proxy in front of the API server, for fault tests that must hit some
//! requests and not others (the bindings, not the watches).
//!
//! The process under test gets a kubeconfig naming `http://127.0.0.1:<port>` ([`ApiProxy::
//! kubeconfig`]); the proxy sends each request on to the API server over TLS, with the
//! credentials the process sent (so the process keeps its own identity and RBAC), unless a
//! [`Rule`] matches it first: then it is delayed, answered with an error status of the
//! proxy's own (429 with `Retry-After`, 500, …), or its connection is dropped before any
//! answer, or held until the test lets it go ([`Fault::Hold`], [`ApiProxy::release`]). Every
//! request a rule's pattern matches is counted, faulted or not. A stall ([`ApiProxy::stall`])
//! acts on answers instead: the bodies of the matching requests, those already streaming
//! included (a watch), deliver nothing more until it ends ([`ApiProxy::end_stall`]), so the
//! process sees the cluster late while every other client sees it as it is.

use std::convert::Infallible;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

type Body = UnsyncBoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// What the proxy does with a request a rule matches.
#[derive(Clone, Debug)]
pub enum Fault {
    /// Sends it on after this long.
    Delay(Duration),
    /// Answers with this status (and `Retry-After: <seconds>` when given) without sending it
    /// on: the API server never sees it.
    Status { code: u16, retry_after: Option<u64> },
    /// Waits this long, then drops the connection without an answer: the API server never
    /// sees the request, and the client learns nothing until the connection goes.
    CutAfter(Duration),
    /// Holds it until [`ApiProxy::release`] (or [`ApiProxy::clear`], or the proxy's drop) of
    /// its rule, then sends it on: a request kept in flight for as long as the test needs,
    /// whatever the machine's speed. The sender's own timeouts still apply (a client that
    /// gives up closes its connection, and the request is never sent).
    Hold,
}

/// Requests whose method is `method` and whose path contains every one of `path_contains`. An
/// entry ending in `$` must be where the path ends (its query aside): `…/pods/job-1$` is the
/// pod itself, not `…/pods/job-1/status`.
#[derive(Clone, Debug)]
pub struct Pattern {
    pub method: &'static str,
    pub path_contains: Vec<String>,
}

impl Pattern {
    /// The binding of pod `name` in namespace `ns` (`POST …/namespaces/ns/pods/name/binding`).
    pub fn binding_of(ns: &str, name: &str) -> Self {
        Pattern {
            method: "POST",
            path_contains: vec![format!("/namespaces/{ns}/pods/{name}/binding")],
        }
    }

    /// An update of pod `name`'s own object in namespace `ns` (`PATCH …/namespaces/ns/pods/name`:
    /// its spec or metadata, such as a scheduling gate's removal), not of its `status`.
    pub fn pod_update(ns: &str, name: &str) -> Self {
        Pattern {
            method: "PATCH",
            path_contains: vec![format!("/namespaces/{ns}/pods/{name}$")],
        }
    }

    /// Every binding.
    pub fn bindings() -> Self {
        Pattern {
            method: "POST",
            path_contains: vec!["/binding".into()],
        }
    }

    fn matches(&self, method: &str, path: &str) -> bool {
        let path_only = path.split_once('?').map_or(path, |(p, _)| p);
        self.method == method
            && self
                .path_contains
                .iter()
                .all(|p| match p.strip_suffix('$') {
                    Some(end) => path_only.ends_with(end),
                    None => path.contains(p.as_str()),
                })
    }
}

/// A fault for the first `times` requests matching `pattern` (all of them with `None`).
#[derive(Clone, Debug)]
pub struct Rule {
    pub pattern: Pattern,
    pub fault: Fault,
    pub times: Option<u32>,
}

#[derive(Default)]
struct Faults {
    rules: Vec<Rule>,
    /// Per rule: how many requests it matched.
    seen: Vec<u32>,
    /// Per rule: `true` once its held requests ([`Fault::Hold`]) may go on. Dropping a sender
    /// lets them go too.
    released: Vec<watch::Sender<bool>>,
    /// Stalled answers: per stall, its pattern and whether it ended (`true`).
    stalls: Vec<(Pattern, watch::Sender<bool>)>,
}

/// The proxy; dropping it stops it and its connections.
pub struct ApiProxy {
    port: u16,
    upstream_kubeconfig: PathBuf,
    faults: Arc<Mutex<Faults>>,
    accept: JoinHandle<()>,
}

impl ApiProxy {
    /// A proxy to the API server `kubeconfig` names (its server and CA; its credentials are
    /// not used: each request carries its sender's).
    pub async fn start(kubeconfig: &Path) -> Result<Self> {
        let kc = Kubeconfig::read_from(kubeconfig)
            .with_context(|| format!("reading {}", kubeconfig.display()))?;
        let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .with_context(|| format!("loading {}", kubeconfig.display()))?;
        config.auth_info = Default::default();
        config.default_retry = false;
        let upstream = kube::Client::try_from(config).context("building the proxy's client")?;
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let port = listener.local_addr()?.port();
        let faults: Arc<Mutex<Faults>> = Arc::default();
        let accept = {
            let faults = faults.clone();
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let cut = Arc::new(Notify::new());
                    let svc = {
                        let (faults, upstream, cut) =
                            (faults.clone(), upstream.clone(), cut.clone());
                        service_fn(move |req| {
                            handle(req, faults.clone(), upstream.clone(), cut.clone())
                        })
                    };
                    tokio::spawn(async move {
                        let conn =
                            http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
                        tokio::select! {
                            _ = conn => {}
                            _ = cut.notified() => {}
                        }
                    });
                }
            })
        };
        Ok(ApiProxy {
            port,
            upstream_kubeconfig: kubeconfig.to_path_buf(),
            faults,
            accept,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Writes `<dir>/<name>`: the kubeconfig the proxy was started with, its server replaced
    /// by the proxy's `http://` address. Returns its path.
    pub fn kubeconfig(&self, dir: &Path, name: &str) -> Result<PathBuf> {
        let text = std::fs::read_to_string(&self.upstream_kubeconfig)?;
        let server = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("server:"))
            .map(str::trim)
            .context("kubeconfig names no server")?
            .to_string();
        let path = dir.join(name);
        std::fs::write(
            &path,
            text.replace(&server, &format!("http://127.0.0.1:{}", self.port)),
        )?;
        Ok(path)
    }

    /// Adds a rule; returns its index for [`seen`](Self::seen).
    pub fn add(&self, rule: Rule) -> usize {
        let mut f = self.faults.lock().unwrap();
        f.rules.push(rule);
        f.seen.push(0);
        f.released.push(watch::channel(false).0);
        f.rules.len() - 1
    }

    /// Lets the requests rule `index` holds ([`Fault::Hold`]) go on, and those it matches from
    /// now on pass without being held.
    pub fn release(&self, index: usize) {
        self.faults.lock().unwrap().released[index].send_replace(true);
    }

    /// How many requests rule `index`'s pattern matched (faulted or, once its `times` ran
    /// out, sent on).
    pub fn seen(&self, index: usize) -> u32 {
        self.faults.lock().unwrap().seen[index]
    }

    /// From now on the answers to requests `pattern` matches deliver no more of their bodies,
    /// those already streaming included (a watch's events wait, in order), until
    /// [`end_stall`](Self::end_stall) with the returned index.
    pub fn stall(&self, pattern: Pattern) -> usize {
        let mut f = self.faults.lock().unwrap();
        f.stalls.push((pattern, watch::channel(false).0));
        f.stalls.len() - 1
    }

    /// Ends stall `index`: what its answers held back is delivered, in order.
    pub fn end_stall(&self, index: usize) {
        self.faults.lock().unwrap().stalls[index]
            .1
            .send_replace(true);
    }

    /// Removes every rule (and forgets what they saw); held requests go on.
    pub fn clear(&self) {
        *self.faults.lock().unwrap() = Faults::default();
    }
}

impl Drop for ApiProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// The fault of the first rule matching the request with tries left, counting it in every
/// rule whose pattern matches.
/// A [`Fault::Hold`] comes with the receiver that says when its rule is released.
fn fault_for(
    faults: &Mutex<Faults>,
    method: &str,
    path: &str,
) -> Option<(Fault, watch::Receiver<bool>)> {
    let mut f = faults.lock().unwrap();
    let mut chosen = None;
    let Faults {
        rules,
        seen,
        released,
        ..
    } = &mut *f;
    for ((rule, seen), released) in rules.iter_mut().zip(seen.iter_mut()).zip(released.iter()) {
        if !rule.pattern.matches(method, path) {
            continue;
        }
        *seen += 1;
        let passes = matches!(rule.fault, Fault::Hold) && *released.borrow();
        if chosen.is_none() && rule.times != Some(0) && !passes {
            if let Some(t) = &mut rule.times {
                *t -= 1;
            }
            chosen = Some((rule.fault.clone(), released.subscribe()));
        }
    }
    chosen
}

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|e| match e {})
        .boxed_unsync()
}

async fn handle(
    req: Request<Incoming>,
    faults: Arc<Mutex<Faults>>,
    upstream: kube::Client,
    cut: Arc<Notify>,
) -> Result<Response<Body>, Infallible> {
    let method = req.method().as_str().to_string();
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    match fault_for(&faults, &method, &path) {
        Some((Fault::Delay(d), _)) => tokio::time::sleep(d).await,
        Some((Fault::Hold, mut released)) => {
            // An error: the rule's sender is gone (cleared, or the proxy stopped), so go on.
            let _ = released.wait_for(|r| *r).await;
        }
        Some((Fault::Status { code, retry_after }, _)) => {
            let reason = match code {
                429 => "TooManyRequests",
                500 => "InternalError",
                503 => "ServiceUnavailable",
                504 => "Timeout",
                _ => "Unknown",
            };
            let status = serde_json::json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": format!("injected by the test's API proxy: HTTP {code}"),
                "reason": reason, "code": code,
            });
            let mut resp = Response::new(full(status.to_string()));
            *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_GATEWAY);
            resp.headers_mut()
                .insert("content-type", "application/json".parse().unwrap());
            if let Some(s) = retry_after {
                resp.headers_mut()
                    .insert("retry-after", s.to_string().parse().unwrap());
            }
            return Ok(resp);
        }
        Some((Fault::CutAfter(d), _)) => {
            tokio::time::sleep(d).await;
            cut.notify_one();
            std::future::pending::<()>().await;
        }
        None => {}
    }
    let resp = forward(req, &path, upstream).await;
    let (parts, body) = resp.into_parts();
    Ok(Response::from_parts(
        parts,
        stallable(body, faults, method, path),
    ))
}

/// A stall on now that matches the request: the receiver that says when it ends.
fn stall_for(faults: &Mutex<Faults>, method: &str, path: &str) -> Option<watch::Receiver<bool>> {
    let f = faults.lock().unwrap();
    f.stalls
        .iter()
        .find(|(pattern, ended)| !*ended.borrow() && pattern.matches(method, path))
        .map(|(_, ended)| ended.subscribe())
}

/// `body`, each of its frames held back while a stall matching the request is on.
fn stallable(body: Body, faults: Arc<Mutex<Faults>>, method: String, path: String) -> Body {
    let frames = http_body_util::BodyStream::new(body);
    let frames = futures_util::stream::unfold(
        (frames, faults, method, path),
        |(mut frames, faults, method, path)| async move {
            let frame = futures_util::StreamExt::next(&mut frames).await?;
            while let Some(mut ended) = stall_for(&faults, &method, &path) {
                // An error: the stall's sender is gone (cleared, or the proxy stopped).
                if ended.wait_for(|e| *e).await.is_err() {
                    break;
                }
            }
            Some((frame, (frames, faults, method, path)))
        },
    );
    http_body_util::StreamBody::new(frames).boxed_unsync()
}

async fn forward(req: Request<Incoming>, path: &str, upstream: kube::Client) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return bad_gateway(format!("reading the request: {e}")),
    };
    let mut out = Request::builder().method(parts.method).uri(path);
    for (name, value) in &parts.headers {
        if !matches!(
            name.as_str(),
            "host" | "connection" | "content-length" | "transfer-encoding"
        ) {
            out = out.header(name, value);
        }
    }
    let out = match out.body(kube::client::Body::from(body.to_vec())) {
        Ok(r) => r,
        Err(e) => return bad_gateway(e.to_string()),
    };
    match upstream.send(out).await {
        Ok(resp) => {
            let (mut parts, body) = resp.into_parts();
            for hop in [
                "connection",
                "transfer-encoding",
                "content-length",
                "keep-alive",
            ] {
                parts.headers.remove(hop);
            }
            let body = body.map_err(|e| Box::new(e) as _).boxed_unsync();
            Response::from_parts(parts, body)
        }
        Err(e) => bad_gateway(e.to_string()),
    }
}

fn bad_gateway(message: String) -> Response<Body> {
    let mut resp = Response::new(full(message));
    *resp.status_mut() = StatusCode::BAD_GATEWAY;
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_update_pattern_matches_the_pod_not_its_status_nor_a_longer_name() {
        let p = Pattern::pod_update("ml", "job-1");
        assert!(p.matches("PATCH", "/api/v1/namespaces/ml/pods/job-1"));
        assert!(p.matches("PATCH", "/api/v1/namespaces/ml/pods/job-1?fieldManager=m"));
        assert!(!p.matches("PATCH", "/api/v1/namespaces/ml/pods/job-1/status"));
        assert!(!p.matches("PATCH", "/api/v1/namespaces/ml/pods/job-10"));
        assert!(!p.matches("GET", "/api/v1/namespaces/ml/pods/job-1"));
    }

    #[test]
    fn a_stall_holds_the_answers_it_matches_until_it_ends() {
        let faults = Mutex::new(Faults::default());
        let watch_pods = Pattern {
            method: "GET",
            path_contains: vec!["/api/v1/pods?".into(), "watch=true".into()],
        };
        faults
            .lock()
            .unwrap()
            .stalls
            .push((watch_pods, watch::channel(false).0));
        let path = "/api/v1/pods?fieldSelector=x&watch=true&resourceVersion=7";
        assert!(stall_for(&faults, "GET", path).is_some());
        assert!(stall_for(&faults, "GET", "/api/v1/pods?fieldSelector=x").is_none());
        assert!(stall_for(&faults, "GET", "/api/v1/nodes?watch=true").is_none());
        faults.lock().unwrap().stalls[0].1.send_replace(true);
        assert!(stall_for(&faults, "GET", path).is_none());
    }

    #[test]
    fn a_held_rule_once_released_lets_its_requests_pass_and_counts_them() {
        let faults = Mutex::new(Faults::default());
        {
            let mut f = faults.lock().unwrap();
            f.rules.push(Rule {
                pattern: Pattern::bindings(),
                fault: Fault::Hold,
                times: None,
            });
            f.seen.push(0);
            f.released.push(watch::channel(false).0);
        }
        let path = "/api/v1/namespaces/ml/pods/a/binding";
        assert!(matches!(
            fault_for(&faults, "POST", path),
            Some((Fault::Hold, _))
        ));
        faults.lock().unwrap().released[0].send_replace(true);
        assert!(fault_for(&faults, "POST", path).is_none());
        assert_eq!(faults.lock().unwrap().seen[0], 2);
    }
}
