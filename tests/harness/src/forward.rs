//! Loopback TCP forwarders for the high-availability tests.
//!
//! - [`Forwarder::to_ready`] plays a Service in front of several muster replicas: each new
//!   connection goes to a replica whose `/readyz` answered 200 at the last poll (every 100 ms),
//!   none when no replica is Ready (the connection is closed at once, as a Service without
//!   endpoints refuses). Established connections stay where they are, as with kube-proxy.
//! - [`Forwarder::to_leader`] plays the shipped Service (`deploy/service.yaml`, selector
//!   `muster.dev/leader: "true"`) in front of muster replicas run as processes, each standing
//!   for a pod object it was told to label (`--pod-name`): each new connection goes to a
//!   replica whose pod carries the leader label and whose `/readyz` answered 200 at the last
//!   poll (every 100 ms), in turn when there are several.
//!   [`Forwarder::to_leader_with_stale`] also keeps named replicas among the endpoints, labelled
//!   or not, first in the turn: endpoints that lag the label, so kube-scheduler's calls reach a
//!   standby too.
//! - [`Forwarder::to`] sends everything to one address until [`Forwarder::cut`]: then every
//!   open connection is dropped and new ones are closed at once — an API server that became
//!   unreachable, for the process whose kubeconfig points here.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::process::http_get;

/// A forwarder on 127.0.0.1; dropping it stops it and drops its connections.
pub struct Forwarder {
    port: u16,
    cut: Arc<AtomicBool>,
    /// Bumped on cut: every connection task watching it ends.
    generation: watch::Sender<u64>,
    tasks: Vec<JoinHandle<()>>,
}

type Choose = Arc<dyn Fn() -> Option<SocketAddr> + Send + Sync>;

impl Forwarder {
    /// Forwards to whichever of `ports` (muster replicas on 127.0.0.1) is Ready.
    pub async fn to_ready(ports: Vec<u16>) -> Result<Self> {
        let ready: Arc<Mutex<Option<u16>>> = Arc::default();
        let poll = {
            let ready = ready.clone();
            tokio::spawn(async move {
                loop {
                    let mut found = None;
                    for &p in &ports {
                        if let Ok((200, _)) =
                            http_get(p, "/readyz", Duration::from_millis(500)).await
                        {
                            found = Some(p);
                            break;
                        }
                    }
                    *ready.lock().unwrap() = found;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        let choose: Choose = Arc::new(move || {
            ready
                .lock()
                .unwrap()
                .map(|p| SocketAddr::from((Ipv4Addr::LOCALHOST, p)))
        });
        let mut f = Self::start(choose).await?;
        f.tasks.push(poll);
        Ok(f)
    }

    /// Forwards to the replicas whose pod (in `namespace`, named with each replica's port in
    /// `pods`, which the caller updates as replicas come and go) is labelled
    /// `muster.dev/leader=true` and whose `/readyz` answers 200 — what the EndpointSlice
    /// controller and kube-proxy make of the shipped Service. The second value lists the ports
    /// that were endpoints at the last poll.
    pub async fn to_leader(
        client: kube::Client,
        namespace: &str,
        pods: Arc<Mutex<Vec<(String, u16)>>>,
    ) -> Result<(Self, Arc<Mutex<Vec<u16>>>)> {
        Self::to_leader_with_stale(client, namespace, pods, Vec::new()).await
    }

    /// [`to_leader`](Self::to_leader), with the replicas of the pods named in `stale` kept among
    /// the endpoints while Ready, labelled or not, ahead of the labelled ones (so the first new
    /// connection goes to one of them): a Service whose endpoints have not caught up with the
    /// label, the case where a standby receives kube-scheduler's calls.
    pub async fn to_leader_with_stale(
        client: kube::Client,
        namespace: &str,
        pods: Arc<Mutex<Vec<(String, u16)>>>,
        stale: Vec<String>,
    ) -> Result<(Self, Arc<Mutex<Vec<u16>>>)> {
        let endpoints: Arc<Mutex<Vec<u16>>> = Arc::default();
        let poll = {
            let endpoints = endpoints.clone();
            let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
                kube::Api::namespaced(client, namespace);
            tokio::spawn(async move {
                let selector = kube::api::ListParams::default().labels("muster.dev/leader=true");
                loop {
                    // An API error keeps the last endpoints, as kube-proxy keeps its rules.
                    if let Ok(labelled) = api.list_metadata(&selector).await {
                        let mut found = Vec::new();
                        let mut pods = pods.lock().unwrap().clone();
                        // Stale endpoints first (a stable sort keeps the rest in order).
                        pods.sort_by_key(|(pod, _)| !stale.contains(pod));
                        for (pod, port) in &pods {
                            let is_labelled = labelled
                                .items
                                .iter()
                                .any(|p| p.metadata.name.as_deref() == Some(pod.as_str()));
                            if !is_labelled && !stale.contains(pod) {
                                continue;
                            }
                            if let Ok((200, _)) =
                                http_get(*port, "/readyz", Duration::from_millis(500)).await
                            {
                                found.push(*port);
                            }
                        }
                        *endpoints.lock().unwrap() = found;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        let turn = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let choose: Choose = {
            let endpoints = endpoints.clone();
            Arc::new(move || {
                let e = endpoints.lock().unwrap();
                if e.is_empty() {
                    return None;
                }
                let i = turn.fetch_add(1, Ordering::Relaxed) % e.len();
                Some(SocketAddr::from((Ipv4Addr::LOCALHOST, e[i])))
            })
        };
        let mut f = Self::start(choose).await?;
        f.tasks.push(poll);
        Ok((f, endpoints))
    }

    /// Forwards everything to `target` until [`cut`](Self::cut).
    pub async fn to(target: SocketAddr) -> Result<Self> {
        Self::start(Arc::new(move || Some(target))).await
    }

    async fn start(choose: Choose) -> Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let port = listener.local_addr()?.port();
        let cut = Arc::new(AtomicBool::new(false));
        let (generation, _) = watch::channel(0u64);
        let accept = {
            let cut = cut.clone();
            let generation = generation.clone();
            tokio::spawn(async move {
                while let Ok((inbound, _)) = listener.accept().await {
                    let target = if cut.load(Ordering::Acquire) {
                        None
                    } else {
                        choose()
                    };
                    let Some(target) = target else {
                        drop(inbound);
                        continue;
                    };
                    let mut cut_seen = generation.subscribe();
                    tokio::spawn(async move {
                        let Ok(mut outbound) = TcpStream::connect(target).await else {
                            return;
                        };
                        let mut inbound = inbound;
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                            _ = cut_seen.changed() => {}
                        }
                    });
                }
            })
        };
        Ok(Forwarder {
            port,
            cut,
            generation,
            tasks: vec![accept],
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Drops every open connection and closes every new one from now on.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::Release);
        self.generation.send_modify(|g| *g += 1);
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.cut();
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Plain-HTTP POST of a JSON body to 127.0.0.1:`port` (`Connection: close`): status and body.
pub async fn http_post_json(
    port: u16,
    path: &str,
    body: &str,
    timeout: Duration,
) -> Result<(u16, String)> {
    tokio::time::timeout(timeout, async {
        let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await?;
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).await?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await?;
        crate::process::parse_http_response(&buf, port, path)
    })
    .await
    .map_err(|_| anyhow!("POST 127.0.0.1:{port}{path} timed out after {timeout:?}"))?
}
