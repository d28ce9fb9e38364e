//! Fault tests on the real control plane (never-half, no-overcommit): a bound gang is whole — never some but
//! fewer than quorum members bound, no node over-committed — when the API server dies while a
//! gang is being bound, a member is deleted while seated, a pod lands with `spec.nodeName` on a
//! node where members hold seats, muster's connection to the API server is cut (also while a
//! node is added, which kube-scheduler then offers before muster knows it), and a job is
//! re-submitted under the same group name while its old pods still terminate.
//!
//! The API server killed mid-binding, the member deleted or terminating and the `spec.nodeName`
//! pod run in both modes: in the gang-members mode (the default) while a released gang's members
//! wait at muster's bind, and as `every_pod_…` tests with two members seated and room held for a
//! third not created yet (a window the gang-members mode never opens).
//!
//! Every test gets its own kube-scheduler and muster, fake nodes and no kubelets; the tests that
//! kill or restart kube-apiserver get their own etcd and kube-apiserver too (the others a test
//! slot's shared pair, reset before each test: `muster_harness::shared`). Tests wait by polling
//! with deadlines. Pods are held in Terminating with a finalizer, as no kubelet would ever finish
//! deleting them. Each test first puts its gang where
//! the stock kube-scheduler alone binds members that fit, so `tests/control-run` requires every
//! test here to fail without muster.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{ListParams, Patch, PatchParams};
use kube::Api;
use muster_harness::checks::metric_sum;
use muster_harness::gangs::SEAT_STATES;
use muster_harness::k8s::{self, KeyScheme};
use muster_harness::policy::is_gated;
use muster_harness::process::{pid_alive, Lifetime, ManagedProcess};
use muster_harness::timing::PARKED;
use muster_harness::PartialGang;
use muster_harness::{
    ensure_truth, holds_for, wait_for, Cluster, ClusterOptions, Fault, NodeShape, Pattern,
    PodBuilder, Progress, Rule, Timer, CLUSTER_TRUTH, PLACE, REASON, WINDOW,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");
/// Finalizer that holds a deleted pod in Terminating until the test removes it.
const HOLD: &str = "muster.test/hold";

fn names(prefix: &str, range: std::ops::Range<u32>) -> Vec<String> {
    range.map(|i| format!("{prefix}-{i}")).collect()
}

fn member(ns: &str, name: &str, group: &str, quorum: u32) -> PodBuilder {
    PodBuilder::new(ns, name)
        .cpu("100m")
        .gang(KeyScheme::Muster, group, quorum)
}

/// Creates `pod` with the [`HOLD`] finalizer: deleting it leaves it Terminating (with a
/// `deletionTimestamp`, and its node if it had one) until [`release`].
async fn create_held(c: &Cluster, pod: PodBuilder) -> Result<()> {
    let mut pod = pod.build();
    pod.metadata.finalizers = Some(vec![HOLD.into()]);
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    k8s::create_pod(&c.client(), &ns, &pod).await?;
    Ok(())
}

/// Removes the finalizers of `pods`: the deleted ones are then gone.
async fn release(c: &Cluster, ns: &str, pods: &[String]) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(c.client(), ns);
    let patch = Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}}));
    for p in pods {
        api.patch(p, &PatchParams::default(), &patch)
            .await
            .with_context(|| format!("removing the finalizer of {ns}/{p}"))?;
    }
    Ok(())
}

/// Deletes `pods` and waits until the API server shows each one Terminating.
async fn delete_into_terminating(c: &Cluster, ns: &str, pods: &[String]) -> Result<()> {
    c.delete_pods(ns, pods).await?;
    wait_for(&format!("{pods:?} to be Terminating"), REASON, || async {
        let listed = c.pods(ns).await?;
        let terminating = pods.iter().all(|n| {
            listed
                .iter()
                .any(|p| k8s::pod_name(p) == n && p.metadata.deletion_timestamp.is_some())
        });
        Ok(if terminating {
            Progress::Done(())
        } else {
            Progress::NotYet(k8s::describe_pods(&listed))
        })
    })
    .await
}

/// Watches one gang for the bound-gang-is-whole invariant across polls: some but fewer than
/// `quorum` of `members` bound for longer than `FAN_OUT` is a partial gang. Polled without
/// pause until the gang is whole, it also shows that the first quorum was bound together.
pub(crate) struct WholeOrNone<'a> {
    ns: &'a str,
    members: &'a [String],
    quorum: usize,
    partial: PartialGang,
}

impl<'a> WholeOrNone<'a> {
    pub(crate) fn new(ns: &'a str, members: &'a [String], quorum: usize) -> Self {
        Self {
            ns,
            members,
            quorum,
            partial: PartialGang::default(),
        }
    }

    /// One poll: the members bound (`name → node`), or what breaks the invariant.
    pub(crate) async fn check(
        &self,
        c: &Cluster,
    ) -> Result<std::result::Result<Vec<String>, String>> {
        let bound = c.bound_pods(self.ns).await?;
        let on_nodes: Vec<String> = self
            .members
            .iter()
            .filter_map(|m| bound.get(m).map(|n| format!("{m} → {n}")))
            .collect();
        if let Err(e) = self.partial.judge("", &on_nodes, self.quorum) {
            return Ok(Err(e));
        }
        if let Err(e) = c.check_no_overcommit().await? {
            return Ok(Err(e));
        }
        Ok(Ok(on_nodes))
    }

    /// Polls until every member is bound, failing at the first partial gang or overcommit.
    pub(crate) async fn wait_whole(&self, c: &Cluster, timeout: Duration) -> Result<()> {
        let all = self.members.len();
        wait_for(
            &format!("{:?} bound whole", self.members),
            timeout,
            || async {
                match self.check(c).await? {
                    Err(e) => bail!("{e}"),
                    Ok(b) if b.len() == all => Ok(Progress::Done(())),
                    Ok(b) => Ok(Progress::NotYet(format!(
                        "{} of {all} bound: {b:?}",
                        b.len()
                    ))),
                }
            },
        )
        .await
    }

    /// The room is the gang's or the pod `other`'s, never both: polls (failing at the first
    /// partial gang or overcommit) until the gang is whole with `other` unbound, or `other` is
    /// bound with no member bound; then the gang must stay unbound while `other` holds the room,
    /// and once `other` is deleted, end whole in the room it frees.
    async fn ends_whole_beside(&self, c: &Cluster, other: &str, timeout: Duration) -> Result<()> {
        let all = self.members.len();
        let other_first = wait_for(
            &format!(
                "{:?} bound whole, or {other} bound and none of them",
                self.members
            ),
            timeout,
            || async {
                let b = match self.check(c).await? {
                    Err(e) => bail!("{e}"),
                    Ok(b) => b,
                };
                let other_bound = c.bound_pods(self.ns).await?.contains_key(other);
                Ok(match (b.len(), other_bound) {
                    (n, false) if n == all => Progress::Done(false),
                    (0, true) => Progress::Done(true),
                    (n, o) => {
                        Progress::NotYet(format!("{n} of {all} bound: {b:?}; {other} bound: {o}"))
                    }
                })
            },
        )
        .await?;
        if other_first {
            eprintln!("{other} took the room first; the gang waits whole until it goes");
            self.assert_none_for(c, WINDOW).await?;
            c.delete_pods(self.ns, &[other.to_string()]).await?;
        }
        self.wait_whole(c, timeout).await
    }

    /// On every poll for `window`: no member bound, and no overcommit.
    async fn assert_none_for(&self, c: &Cluster, window: Duration) -> Result<()> {
        let what = format!("none of {:?} bound", self.members);
        holds_for(&what, window, || async {
            Ok(match self.check(c).await? {
                Err(e) => Err(e),
                Ok(b) if b.is_empty() => Ok(()),
                Ok(b) => Err(format!("{CLUSTER_TRUTH} bound: {}", b.join(", "))),
            })
        })
        .await
    }
}

/// Binding attempts muster saw fail: given up (`muster_bind_failures_total`) or to be tried
/// again (`muster_bind_retries_total`, where muster retries transient errors).
async fn failed_binding_attempts(c: &Cluster) -> Result<f64> {
    Ok(counter(c, "muster_bind_failures_total").await?
        + counter(c, "muster_bind_retries_total").await?)
}

/// The value of counter `name` (summed over its labels) on muster's `/metrics`.
async fn counter(c: &Cluster, name: &str) -> Result<f64> {
    Ok(metric_sum(&c.muster.metrics().await?, name))
}

/// Waits until counter `name` on muster's `/metrics` exceeds `above`.
async fn wait_counter_above(c: &Cluster, name: &str, above: f64) -> Result<f64> {
    wait_for(&format!("{name} > {above}"), REASON, || async {
        let v = counter(c, name).await?;
        Ok(if v > above {
            Progress::Done(v)
        } else {
            Progress::NotYet(format!("{name} = {v}"))
        })
    })
    .await
}

/// Sends a signal by name (`STOP`, `CONT`, `KILL`) with the `kill` command.
fn send_signal(pid: u32, signal: &str) -> Result<()> {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .context("running kill")?;
    ensure!(status.success(), "kill -{signal} {pid}: {status}");
    Ok(())
}

/// A kube-apiserver killed by [`kill_apiserver`], with what it takes to start it again.
struct StoppedApiserver {
    argv: Vec<String>,
    log: PathBuf,
}

/// SIGKILLs kube-apiserver, as in a crash: every connection drops and new ones are refused.
/// etcd keeps the data. Returns once the process is gone.
async fn kill_apiserver(c: &Cluster) -> Result<StoppedApiserver> {
    let p =
        c.cp.processes()
            .find(|p| p.name() == "kube-apiserver")
            .ok_or_else(|| anyhow!("kube-apiserver is not running"))?;
    let pid = p.pid();
    // Its exact command line, so the restart is the same server (port, certificates, etcd).
    let raw = std::fs::read(format!("/proc/{pid}/cmdline"))
        .with_context(|| format!("reading the command line of kube-apiserver ({pid})"))?;
    let argv = raw
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let log = p.log_path().to_path_buf();
    let port = apiserver_port(c)?;
    send_signal(pid, "KILL")?;
    // Gone means its port is free: a killed Go process's main thread shows as a zombie while
    // its other threads, which still hold the listening socket, are being torn down.
    wait_for("kube-apiserver to be gone", REASON, || async {
        Ok(if pid_alive(pid) {
            Progress::NotYet(format!("pid {pid} alive"))
        } else if let Err(e) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            Progress::NotYet(format!("pid {pid} exited, port {port} still taken: {e}"))
        } else {
            Progress::Done(())
        })
    })
    .await?;
    Ok(StoppedApiserver { argv, log })
}

/// Starts a killed kube-apiserver again and waits until it serves; the returned process is
/// killed when dropped.
async fn start_apiserver_again(c: &Cluster, stopped: StoppedApiserver) -> Result<ManagedProcess> {
    let (program, args) = stopped
        .argv
        .split_first()
        .ok_or_else(|| anyhow!("kube-apiserver had an empty command line"))?;
    let mut cmd = Command::new(program);
    cmd.args(args);
    let mut p = ManagedProcess::spawn("kube-apiserver", cmd, &stopped.log, Lifetime::Attached)?;
    let nodes: Api<Node> = Api::all(c.client());
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        p.check_running()?;
        let last = match nodes.list(&ListParams::default()).await {
            Ok(_) => return Ok(p),
            Err(e) => e.to_string(),
        };
        ensure!(
            Instant::now() < deadline,
            "kube-apiserver not serving again after 120s: {last}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A TCP proxy between muster and kube-apiserver that the test can cut: [`cut`] closes every
/// connection through it and refuses new ones until [`heal`]. TLS passes through untouched
/// (the apiserver's certificate is for 127.0.0.1, whatever the port).
///
/// [`cut`]: CuttableProxy::cut
/// [`heal`]: CuttableProxy::heal
struct CuttableProxy {
    port: u16,
    cut: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<AbortHandle>>>,
    accept: AbortHandle,
}

impl CuttableProxy {
    async fn start(target_port: u16) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let cut = Arc::new(AtomicBool::new(false));
        let connections: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let (is_cut, conns) = (cut.clone(), connections.clone());
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if is_cut.load(Ordering::SeqCst) {
                    continue; // dropped: the connection is closed at once
                }
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", target_port)).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                conns.lock().unwrap().push(task.abort_handle());
            }
        })
        .abort_handle();
        Ok(Self {
            port,
            cut,
            connections,
            accept,
        })
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for c in self.connections.lock().unwrap().drain(..) {
            c.abort();
        }
    }

    fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for CuttableProxy {
    fn drop(&mut self) {
        self.accept.abort();
        for c in self.connections.lock().unwrap().drain(..) {
            c.abort();
        }
    }
}

/// Restarts muster with its API server connection through `proxy`: its kubeconfig (found on
/// its command line) is rewritten to the proxy's port. The test's own client and
/// kube-scheduler keep talking to kube-apiserver directly.
async fn route_muster_through(c: &mut Cluster, proxy: &CuttableProxy) -> Result<()> {
    let pid = c
        .muster
        .pid()
        .ok_or_else(|| anyhow!("muster is not running"))?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))?;
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let kubeconfig = args
        .iter()
        .position(|a| a == "--kubeconfig")
        .and_then(|i| args.get(i + 1))
        .ok_or_else(|| anyhow!("muster runs without --kubeconfig: {args:?}"))?;
    let apiserver = c.cp.apiserver_url();
    let text = std::fs::read_to_string(kubeconfig)?;
    ensure!(
        text.contains(&format!("server: {apiserver}")),
        "{kubeconfig} does not name {apiserver}"
    );
    let proxied = text.replace(
        &format!("server: {apiserver}"),
        &format!("server: https://127.0.0.1:{}", proxy.port),
    );
    std::fs::write(kubeconfig, proxied)?;
    c.muster.restart().await
}

/// How many times each of muster's watches (pods, nodes) completed a (re-)list, from its log
/// (`cache synced` is logged when a list is done).
fn cache_syncs(c: &Cluster) -> (usize, usize) {
    let log = std::fs::read_to_string(c.muster.log_path()).unwrap_or_default();
    let synced = |kind: &str| {
        log.lines()
            .filter(|l| l.contains("cache synced") && l.contains(&format!("\"{kind}\"")))
            .count()
    };
    (synced("pods"), synced("nodes"))
}

/// POSTs a JSON body to muster's plain-HTTP port, as kube-scheduler does; returns the status
/// and the raw rest of the response.
async fn post_json(port: u16, path: &str, body: &str) -> Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    s.read_to_end(&mut response).await?;
    let text = String::from_utf8_lossy(&response).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| anyhow!("not an HTTP response from muster: {head:?}"))?;
    Ok((code, rest.to_string()))
}

fn apiserver_port(c: &Cluster) -> Result<u16> {
    let url = c.cp.apiserver_url();
    url.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| anyhow!("no port in {url}"))
}

// -------------------------------------------------------------------------------------------

/// kube-apiserver killed while a gang is being bound, every pod through muster: as
/// [`apiserver_killed_while_a_gang_is_bound_ends_whole_or_none`], the members seated by
/// kube-scheduler's own filter and bind calls.
#[tokio::test]
async fn every_pod_apiserver_killed_while_a_gang_is_bound_ends_whole_or_none() -> Result<()> {
    let _t = Timer(
        "every_pod_apiserver_killed_while_a_gang_is_bound_ends_whole_or_none",
        Instant::now(),
    );
    apiserver_killed_while_bound(ClusterOptions::new(MUSTER).every_pod()).await
}

/// A seated member deleted right before quorum, held in Terminating by a finalizer (as a
/// kubelet would hold it for its grace period): it no longer counts. Two members of a gang of 3
/// are seated; one of them is deleted, then the third member arrives: two live members are not
/// a quorum, so nothing is bound (binding the terminating pod fails, which would leave the
/// other two bound alone). A replacement member completes the gang: it binds whole.
#[tokio::test]
async fn every_pod_a_member_terminating_while_seated_does_not_count_and_a_replacement_completes_the_gang(
) -> Result<()> {
    let _t = Timer(
        "every_pod_a_member_terminating_while_seated_does_not_count_and_a_replacement_completes_the_gang",
        Instant::now(),
    );
    every_pod_member_deleted_while_seated(Deletion::HeldTerminating).await
}

/// The same with the member gone at once (no finalizer, no grace): its seat is released, the
/// two live members wait, and a replacement completes the gang in the room it freed.
#[tokio::test]
async fn every_pod_a_member_deleted_while_seated_frees_its_seat_and_a_replacement_completes_the_gang(
) -> Result<()> {
    let _t = Timer(
        "every_pod_a_member_deleted_while_seated_frees_its_seat_and_a_replacement_completes_the_gang",
        Instant::now(),
    );
    every_pod_member_deleted_while_seated(Deletion::Gone).await
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Deletion {
    /// Held in Terminating by [`HOLD`] until the end of the test.
    HeldTerminating,
    /// Deleted with no grace and no finalizer: gone at once.
    Gone,
}

// Every pod through muster: the members are seated by kube-scheduler's own calls with room held
// for one not created yet, which the shipped mode never holds.
async fn every_pod_member_deleted_while_seated(deletion: Deletion) -> Result<()> {
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).every_pod()).await?;
    let ns = "deleted";
    let r = async {
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("350m")).await?; // room for 3 × 100m
        let all = names("g", 0..4);
        let create = |name: &str| {
            let pod = member(ns, name, "g", 3);
            let c = &c;
            async move {
                match deletion {
                    Deletion::HeldTerminating => create_held(c, pod).await,
                    Deletion::Gone => c.create(pod).await.map(drop),
                }
            }
        };
        for n in &all[..2] {
            create(n).await?;
        }
        c.wait_gang(
            ns,
            "g",
            &all,
            "g-0 and g-1 seated, room held for the third",
            PLACE,
            |g| g.state_of("g-0") == Some("seated") && g.state_of("g-1") == Some("seated"),
        )
        .await?;
        match deletion {
            Deletion::HeldTerminating => delete_into_terminating(&c, ns, &all[1..2]).await?,
            Deletion::Gone => c.delete_pod(ns, "g-1").await?,
        }
        create("g-2").await?;
        let live = vec![all[0].clone(), all[2].clone(), all[3].clone()];
        let gang = WholeOrNone::new(ns, &live, 3);
        // g-0 and g-2 are two of three: they wait, and g-1 is never bound.
        c.wait_gang(ns, "g", &all, "g-2 known to muster", REASON, |g| {
            g.state_of("g-2").is_some()
        })
        .await?;
        gang.assert_none_for(&c, WINDOW).await?;
        create("g-3").await?;
        gang.wait_whole(&c, PLACE).await?;
        let bound = c.bound_pods(ns).await?;
        ensure_truth!(
            !bound.contains_key("g-1"),
            "the deleted g-1 was bound: {bound:?}"
        );
        if deletion == Deletion::HeldTerminating {
            release(&c, ns, &all).await?;
        }
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

/// A pod created with `spec.nodeName` (no scheduler involved) takes room on the node where two
/// members of a gang of 3 hold their seats. When the third member arrives muster must re-check
/// that room: binding the seated members there would over-commit the node (the API server does
/// not check room on bind, a kubelet would reject them: a partial gang). On every poll no node
/// is over-committed and the gang is whole or none; once a node with room is added it binds
/// whole.
///
/// With every pod through muster: two members are seated by kube-scheduler's own calls with
/// room held for the third (the shipped mode holds nothing for a member not created yet).
#[tokio::test]
async fn every_pod_a_pod_bound_by_node_name_onto_seats_is_not_overcommitted_and_the_gang_binds_whole(
) -> Result<()> {
    let _t = Timer(
        "every_pod_a_pod_bound_by_node_name_onto_seats_is_not_overcommitted_and_the_gang_binds_whole",
        Instant::now(),
    );
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).every_pod()).await?;
    let ns = "intruder";
    let gang = names("s", 0..3);
    let r = async {
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("350m")).await?; // room for 3 × 100m
        for n in &gang[..2] {
            c.create(member(ns, n, "s", 3)).await?;
        }
        c.wait_gang(ns, "s", &gang, "s-0 and s-1 seated on node-1", PLACE, |g| {
            ["s-0", "s-1"].iter().all(|n| {
                g.members.iter().any(|m| {
                    m.name == *n && m.state == "seated" && m.node.as_deref() == Some("node-1")
                })
            })
        })
        .await?;
        // 200m by spec.nodeName: node-1 keeps room for one member, not two.
        let mut intruder = PodBuilder::new(ns, "by-node-name").cpu("200m").build();
        intruder.spec.as_mut().unwrap().node_name = Some("node-1".into());
        k8s::create_pod(&c.client(), ns, &intruder).await?;
        // Room for the third member elsewhere; it arrives.
        c.add_node("node-2", NodeShape::cpu("150m")).await?;
        c.create(member(ns, "s-2", "s", 3)).await?;
        let whole = WholeOrNone::new(ns, &gang, 3);
        // Room for 2 of 3 now (one on node-1, one on node-2): nothing may be bound.
        whole.assert_none_for(&c, WINDOW * 2).await?;
        c.add_node("node-3", NodeShape::cpu("150m")).await?;
        whole.wait_whole(&c, PLACE).await?;
        c.assert_no_overcommit().await?;
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

/// muster's connection to the API server cut (a proxy in between closes it and refuses new
/// ones) while a gang waits whole for room; meanwhile kube-apiserver restarts (so muster's
/// watch cannot resume and must list again), a member is deleted and a replacement created,
/// which muster cannot see. Once the connection heals muster lists again and its table follows
/// the cluster — the deleted member is gone from `/gangs`, the replacement is there — and a
/// late filter call for the deleted member does not bring it back. When room appears the gang
/// binds whole.
#[tokio::test]
async fn a_cut_watch_relists_invents_no_member_and_the_gang_binds_whole_afterwards() -> Result<()> {
    let _t = Timer(
        "a_cut_watch_relists_invents_no_member_and_the_gang_binds_whole_afterwards",
        Instant::now(),
    );
    // Restarts kube-apiserver: its own, not the slot's shared one.
    let mut c = Cluster::start_with(ClusterOptions::new(MUSTER).own_control_plane()).await?;
    let ns = "cut";
    let proxy = CuttableProxy::start(apiserver_port(&c)?).await?;
    let mut restarted = None;
    let r = async {
        route_muster_through(&mut c, &proxy).await?;
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("250m")).await?; // room for 2 × 100m
        let first = names("w", 0..3);
        let mut created = Vec::new();
        for n in &first {
            created.push(c.create(member(ns, n, "w", 3)).await?);
        }
        let reason = "gang cut/w: 2 of 3 members fit";
        c.wait_gang_waiting_whole(ns, "w", &first, reason, PLACE)
            .await?;

        let errors_before = counter(&c, "muster_watch_errors_total").await?;
        let (pods_before, nodes_before) = cache_syncs(&c);
        proxy.cut();
        wait_counter_above(&c, "muster_watch_errors_total", errors_before)
            .await
            .context("muster's watch should have noticed the cut")?;
        // kube-apiserver restarted meanwhile: its watch cache starts afresh, so muster cannot
        // resume its watch where it stopped and must list again.
        let stopped = kill_apiserver(&c).await?;
        restarted = Some(start_apiserver_again(&c, stopped).await?);
        // What muster misses: w-2 deleted, w-3 created in its place.
        c.delete_pod(ns, "w-2").await?;
        c.create(member(ns, "w-3", "w", 3)).await?;
        let now = names("w", 0..2)
            .into_iter()
            .chain(["w-3".to_string()])
            .collect::<Vec<_>>();
        let everyone = names("w", 0..4);
        let whole = WholeOrNone::new(ns, &now, 3);
        whole.assert_none_for(&c, WINDOW).await?;

        proxy.heal();
        let healed = Instant::now();
        // Both watches list again before room is added, so what follows checks the re-listed
        // members (a node offered before muster's node watch is back is refused as not in its
        // cache yet and its pods asked to retry when it arrives: tests/e2e/claims.rs covers that).
        wait_for("muster to list pods and nodes again", PLACE, || async {
            let (pods, nodes) = cache_syncs(&c);
            Ok(if pods > pods_before && nodes > nodes_before {
                Progress::Done(())
            } else {
                Progress::NotYet(format!(
                    "completed lists since the start: {pods} of pods, {nodes} of nodes"
                ))
            })
        })
        .await?;
        let g = c
            .wait_gang(
                ns,
                "w",
                &everyone,
                "muster's members to be w-0, w-1, w-3 again",
                PLACE,
                |g| {
                    let mut m: Vec<&str> = g.members.iter().map(|m| m.name.as_str()).collect();
                    m.sort();
                    m == ["w-0", "w-1", "w-3"]
                },
            )
            .await?;
        eprintln!(
            "{:.1}s after the heal: {}",
            healed.elapsed().as_secs_f64(),
            g.describe()
        );
        // kube-scheduler's filter call for w-2 arriving late, after muster saw it deleted
        // (the pod as the scheduler had it): it must not bring w-2 back.
        let late = serde_json::json!({"Pod": &created[2], "NodeNames": ["node-1"]});
        let (code, answer) = post_json(c.muster.port(), "/filter", &late.to_string()).await?;
        eprintln!("late filter for the deleted w-2: HTTP {code} {answer}");
        // Nothing invented on any poll of a window, and still nothing bound.
        holds_for("muster lists exactly w-0, w-1, w-3", WINDOW, || async {
            let Some(g) = c.muster.gang(ns, "w").await? else {
                return Ok(Err("muster's /gangs does not list gang w".into()));
            };
            let mut m: Vec<String> = g.members.iter().map(|m| m.name.clone()).collect();
            m.sort();
            if m != now {
                return Ok(Err(format!("members {m:?}: {}", g.describe())));
            }
            Ok(match whole.check(&c).await? {
                Ok(b) if b.is_empty() => Ok(()),
                Ok(b) => Err(format!("{CLUSTER_TRUTH} bound: {}", b.join(", "))),
                Err(e) => Err(e),
            })
        })
        .await?;
        c.add_node("node-2", NodeShape::cpu("150m")).await?;
        whole.wait_whole(&c, PLACE).await?;
        ensure_truth!(
            !c.bound_pods(ns).await?.contains_key("w-2"),
            "the deleted w-2 is bound"
        );
        Ok(())
    }
    .await;
    let r = c.report(&[ns], r).await;
    drop(restarted);
    r
}

/// A node added while muster's API connection is cut: kube-scheduler offers it at once, and
/// muster, whose watches failed and list again, decides nothing until they have (its view
/// lacks the node, and whatever else changed meanwhile): the members are refused with that
/// reason, none is bound, and kube-scheduler retries them after its back-off (an extender's
/// error is retried, not parked). When the connection heals the watches list again and the gang
/// is placed whole on both nodes. (A node merely behind in a healthy watch is refused as not in
/// muster's cache yet, and its members asked to retry when it arrives: `muster.dev/retry`.)
///
/// With every pod through muster: a node kube-scheduler offers to muster's filter before muster
/// sees it (in the shipped mode muster places gathered gangs on the nodes it sees, and only those).
#[tokio::test]
async fn a_node_offered_before_muster_sees_it_places_the_gang_once_muster_does() -> Result<()> {
    let _t = Timer(
        "a_node_offered_before_muster_sees_it_places_the_gang_once_muster_does",
        Instant::now(),
    );
    let mut c = Cluster::start_with(ClusterOptions::new(MUSTER).every_pod()).await?;
    let ns = "late-node";
    let proxy = CuttableProxy::start(apiserver_port(&c)?).await?;
    let r = async {
        route_muster_through(&mut c, &proxy).await?;
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("150m")).await?; // room for 1 × 100m
        let gang = names("w", 0..2);
        for n in &gang {
            c.create(member(ns, n, "w", 2)).await?;
        }
        let reason = format!("gang {ns}/w: 1 of 2 members fit");
        c.wait_gang_waiting_whole(ns, "w", &gang, &reason, PLACE)
            .await?;

        let errors_before = counter(&c, "muster_watch_errors_total").await?;
        proxy.cut();
        wait_counter_above(&c, "muster_watch_errors_total", errors_before)
            .await
            .context("muster's watch should have noticed the cut")?;
        c.add_node("node-2", NodeShape::cpu("150m")).await?;
        // kube-scheduler re-queues the members for the new node at once; muster, cut off and
        // listing again, refuses to decide (kube-scheduler's FailedScheduling Event says why).
        let relisting = "muster is listing pods again after its watch failed";
        c.wait_event_matching(
            ns,
            &gang,
            &format!("FailedScheduling with {relisting:?}"),
            REASON,
            |e| e.reason == "FailedScheduling" && e.message.contains(relisting),
        )
        .await?;
        // An observation window long enough for the members' retries after back-off (at most
        // 10 s, kube-scheduler's podMaxBackoffSeconds) to be refused the same way.
        let whole = WholeOrNone::new(ns, &gang, 2);
        whole.assert_none_for(&c, PARKED).await?;

        proxy.heal();
        let healed = Instant::now();
        whole.wait_whole(&c, PLACE).await?;
        eprintln!(
            "gang placed {:.1}s after muster's connection healed",
            healed.elapsed().as_secs_f64()
        );
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

/// A job deleted and re-submitted under the same group name while its old pods still
/// terminate (held by a finalizer, still on their node). The old members must not make the
/// new gang "placed": its members would be bound one by one as room allows — here 2 of 3. None
/// is bound while the old pods hold the room; once they are gone the new gang binds whole.
#[tokio::test]
async fn a_job_resubmitted_while_its_old_pods_terminate_is_not_bound_one_by_one() -> Result<()> {
    let _t = Timer(
        "a_job_resubmitted_while_its_old_pods_terminate_is_not_bound_one_by_one",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let ns = "resubmit";
    let r = async {
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("350m")).await?; // room for 3 × 100m
        let old = names("job-old", 0..3);
        for n in &old {
            create_held(&c, member(ns, n, "job", 3)).await?;
        }
        WholeOrNone::new(ns, &old, 3).wait_whole(&c, PLACE).await?;
        delete_into_terminating(&c, ns, &old).await?;

        // Room for 2 of the 3 new members besides the terminating ones.
        c.add_node("node-2", NodeShape::cpu("250m")).await?;
        let new = names("job-new", 0..3);
        for n in &new {
            c.create(member(ns, n, "job", 3)).await?;
        }
        let whole = WholeOrNone::new(ns, &new, 3);
        c.wait_gang(
            ns,
            "job",
            &new,
            "muster knows the new members",
            REASON,
            |g| new.iter().all(|n| g.state_of(n).is_some()),
        )
        .await?;
        whole.assert_none_for(&c, WINDOW * 2).await?;
        release(&c, ns, &old).await?;
        whole.wait_whole(&c, PLACE).await
    }
    .await;
    c.report(&[ns], r).await
}

// -------------------------------------------------------------------------------------------
// The same faults in the gang-members mode (the default). Its window is after a gang's release
// (nominations written, gates removed) while its members wait at muster's bind: muster holds
// nothing before every member its quorum needs exists, and its bind holds the bind calls until
// the whole quorum is there, then binds them together. muster's API proxy holds one member's
// gate removal (the others are let through and wait at bind) or the bindings at quorum, as long
// as the test needs.

/// kube-apiserver killed while a gang's bindings are made. muster lets a gang of 3 that fits
/// through; kube-scheduler brings each member to muster's bind, and at quorum muster creates the
/// three bindings, which its API proxy holds. kube-apiserver is killed, the proxy lets them go:
/// they meet a dead API server until muster gives them up (`muster_bind_failures_total`), and
/// kube-scheduler's retries of the members meet it too. muster's watches fail with it, and until
/// they have listed again no verb of muster's decides: a bind on the view from before the
/// outage would miss a pod kube-scheduler bound meanwhile. A plain pod is created as soon as
/// kube-apiserver is back; kube-scheduler forgot the members' nominations with their failed
/// bindings, so node-1 (room for 3 × 100m) ends with the gang or the plain pod, never both and
/// never part of the gang: on no poll is the gang partly bound or a node over-committed, and if
/// the plain pod took the room, the gang waits whole and is placed whole once it is deleted.
#[tokio::test]
async fn apiserver_killed_while_a_gang_is_bound_ends_whole_or_none() -> Result<()> {
    let _t = Timer(
        "apiserver_killed_while_a_gang_is_bound_ends_whole_or_none",
        Instant::now(),
    );
    apiserver_killed_while_bound(ClusterOptions::new(MUSTER)).await
}

/// The outage of [`apiserver_killed_while_a_gang_is_bound_ends_whole_or_none`], in the mode
/// `options` ask for.
async fn apiserver_killed_while_bound(options: ClusterOptions) -> Result<()> {
    // Kills kube-apiserver: its own, not the slot's shared one.
    let c = Cluster::start_with(options.own_control_plane().through_api_proxy()).await?;
    let ns = "outage";
    let gang = names("a", 0..3);
    let mut restarted = None;
    let r = async {
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("350m")).await?; // room for 3 × 100m
        let proxy = c.api_proxy().context("started through the proxy")?;
        let bindings = proxy.add(Rule {
            pattern: Pattern::bindings(),
            fault: Fault::Hold,
            times: None,
        });
        let attempts_before = failed_binding_attempts(&c).await?;
        let gave_up_before = counter(&c, "muster_bind_failures_total").await?;
        for n in &gang {
            c.create(member(ns, n, "a", 3)).await?;
        }
        c.wait_gang(
            ns,
            "a",
            &gang,
            "the three bindings at quorum sent, held by muster's API proxy",
            PLACE,
            |_| proxy.seen(bindings) >= 3,
        )
        .await?;
        let stopped = kill_apiserver(&c).await?;
        proxy.release(bindings);
        // Down past the bindings' budget: muster gives them up (its bind calls answer the
        // error, kube-scheduler forgets the members' room and tries them again).
        wait_counter_above(&c, "muster_bind_failures_total", gave_up_before)
            .await
            .context("muster should have given up the bindings at quorum")?;
        eprintln!(
            "binding attempts failed while kube-apiserver was down: {}",
            failed_binding_attempts(&c).await? - attempts_before
        );
        restarted = Some(start_apiserver_again(&c, stopped).await?);
        eprintln!("kube-apiserver is back");
        c.create(PodBuilder::new(ns, "plain").cpu("100m")).await?;
        WholeOrNone::new(ns, &gang, 3)
            .ends_whole_beside(&c, "plain", PLACE)
            .await
    }
    .await;
    let r = c.report(&[ns], r).await;
    drop(restarted);
    r
}

/// A member deleted while its gang waits at muster's bind, held in Terminating by a finalizer
/// (as a kubelet would hold it for its grace period): it no longer counts. muster lets a gang
/// of 3 through; its API proxy holds g-2's gate removal, so g-0 and g-1 come to muster's bind
/// (seated) and wait there. g-1 is deleted: every seat goes, and once g-2 is let through, two
/// live members are not a quorum, so nothing is bound (binding the terminating pod fails, which
/// would leave the other two bound alone). A replacement member completes the gang: it binds
/// whole, and g-1 is never bound.
#[tokio::test]
async fn a_member_terminating_while_seated_does_not_count_and_a_replacement_completes_the_gang(
) -> Result<()> {
    let _t = Timer(
        "a_member_terminating_while_seated_does_not_count_and_a_replacement_completes_the_gang",
        Instant::now(),
    );
    member_deleted_while_seated(Deletion::HeldTerminating).await
}

/// The same with the member gone at once (no finalizer, no grace): its seat is released, the
/// two live members wait, and a replacement completes the gang in the room it freed.
#[tokio::test]
async fn a_member_deleted_while_seated_frees_its_seat_and_a_replacement_completes_the_gang(
) -> Result<()> {
    let _t = Timer(
        "a_member_deleted_while_seated_frees_its_seat_and_a_replacement_completes_the_gang",
        Instant::now(),
    );
    member_deleted_while_seated(Deletion::Gone).await
}

/// Holds the gate removal of `name` (`PATCH …/pods/<name>`, not its nomination, a `pods/status`
/// PATCH) at muster's API proxy; returns the rule's index for [`ApiProxy::release`].
///
/// [`ApiProxy::release`]: muster_harness::ApiProxy::release
fn hold_gate_removal(c: &Cluster, ns: &str, name: &str) -> Result<usize> {
    let proxy = c.api_proxy().context("started through the proxy")?;
    Ok(proxy.add(Rule {
        pattern: Pattern::pod_update(ns, name),
        fault: Fault::Hold,
        times: None,
    }))
}

/// Waits until `name` no longer carries muster's gate (its held removal let go).
async fn wait_ungated(c: &Cluster, ns: &str, name: &str) -> Result<()> {
    wait_for(
        &format!("{ns}/{name} let through its gate"),
        REASON,
        || async {
            let pods = c.pods(ns).await?;
            Ok(match pods.iter().find(|p| k8s::pod_name(p) == name) {
                Some(p) if !is_gated(p) => Progress::Done(()),
                Some(_) => Progress::NotYet(format!("{name} is still gated")),
                None => Progress::NotYet(format!("{name} is not listed")),
            })
        },
    )
    .await
}

/// The gang-members twin of [`every_pod_member_deleted_while_seated`]: the members wait at
/// muster's bind after their release, one member's gate removal held back.
async fn member_deleted_while_seated(deletion: Deletion) -> Result<()> {
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).through_api_proxy()).await?;
    let ns = "deleted";
    let r = async {
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("350m")).await?; // room for 3 × 100m
        let all = names("g", 0..4);
        let create = |name: &str| {
            let pod = member(ns, name, "g", 3);
            let c = &c;
            async move {
                match deletion {
                    Deletion::HeldTerminating => create_held(c, pod).await,
                    Deletion::Gone => c.create(pod).await.map(drop),
                }
            }
        };
        let held = hold_gate_removal(&c, ns, "g-2")?;
        let proxy = c.api_proxy().context("started through the proxy")?;
        for n in &all[..3] {
            create(n).await?;
        }
        c.wait_gang(
            ns,
            "g",
            &all,
            "g-0 and g-1 seated at muster's bind, g-2's gate removal held",
            PLACE,
            |g| {
                g.state_of("g-0") == Some("seated")
                    && g.state_of("g-1") == Some("seated")
                    && proxy.seen(held) >= 1
            },
        )
        .await?;
        match deletion {
            Deletion::HeldTerminating => delete_into_terminating(&c, ns, &all[1..2]).await?,
            Deletion::Gone => c.delete_pod(ns, "g-1").await?,
        }
        // muster's watch has the deletion (g-1 gave up its seat) before g-2 is let through:
        // the quorum g-2 brings to muster's bind is then two live members and a deleted one.
        // The rest of the gang's seats go in muster's next gathering round, which waits for
        // the gate removal the proxy holds.
        c.wait_gang(ns, "g", &all, "g-1 to hold no seat", REASON, |g| {
            g.state_of("g-1").is_none_or(|s| !SEAT_STATES.contains(&s))
        })
        .await?;
        proxy.release(held);
        wait_ungated(&c, ns, "g-2").await?;
        let live = vec![all[0].clone(), all[2].clone(), all[3].clone()];
        let gang = WholeOrNone::new(ns, &live, 3);
        // g-0 and g-2 are two of three: they wait, and g-1 is never bound.
        gang.assert_none_for(&c, WINDOW).await?;
        create("g-3").await?;
        gang.wait_whole(&c, PLACE).await?;
        let bound = c.bound_pods(ns).await?;
        ensure_truth!(
            !bound.contains_key("g-1"),
            "the deleted g-1 was bound: {bound:?}"
        );
        if deletion == Deletion::HeldTerminating {
            release(&c, ns, &all).await?;
        }
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

/// The start both tests below share: node-1 with room for the gang `s` of 3 × 100m, the gang
/// let through onto it with s-2's gate removal held at muster's API proxy, until s-0 and s-1
/// wait at muster's bind, seated on node-1. Returns the proxy rule holding s-2's gate removal.
async fn two_waiting_at_bind_on_node_1(c: &Cluster, ns: &str, gang: &[String]) -> Result<usize> {
    c.namespace(ns).await?;
    c.add_node("node-1", NodeShape::cpu("350m")).await?; // room for 3 × 100m
    let held = hold_gate_removal(c, ns, "s-2")?;
    let proxy = c.api_proxy().context("started through the proxy")?;
    for n in gang {
        c.create(member(ns, n, "s", 3)).await?;
    }
    c.wait_gang(
        ns,
        "s",
        gang,
        "s-0 and s-1 seated on node-1 at muster's bind, s-2's gate removal held",
        PLACE,
        |g| {
            proxy.seen(held) >= 1
                && ["s-0", "s-1"].iter().all(|n| {
                    g.members.iter().any(|m| {
                        m.name == *n && m.state == "seated" && m.node.as_deref() == Some("node-1")
                    })
                })
        },
    )
    .await?;
    Ok(held)
}

/// Seats lost while a gang gathers are planned again beside the gang, not the whole gang given
/// up. muster lets a gang of 3 through onto node-1 (room for 3 × 100m); its API proxy holds
/// s-2's gate removal, so s-0 and s-1 come to muster's bind, seated on node-1, and wait there.
/// node-1 is then cordoned (NodeUnschedulable) and node-2 added with room for the gang; s-2 is
/// let through and kube-scheduler binds it onto node-2. At quorum the last look finds node-1
/// refusing s-0 and s-1: nothing is bound, their seats go — and muster seats them again beside
/// s-2 on node-2 and renominates them there, keeping s-2's seat. The gang is placed whole on
/// node-2, never partly at any poll, and no member is told its gang's seats were released
/// (before, every seat went at that point and the gang was gathered again from nothing: a
/// GangWaiting Event "seats released" on each member, and its held binds refused). Without
/// muster kube-scheduler binds the members at once: the test fails on cluster truth.
#[tokio::test]
async fn seats_lost_at_the_last_look_are_planned_again_beside_the_gang_without_releasing_it(
) -> Result<()> {
    let _t = Timer(
        "seats_lost_at_the_last_look_are_planned_again_beside_the_gang_without_releasing_it",
        Instant::now(),
    );
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).through_api_proxy()).await?;
    let ns = "reseat";
    let gang = names("s", 0..3);
    let r = async {
        let held = two_waiting_at_bind_on_node_1(&c, ns, &gang).await?;
        let proxy = c.api_proxy().context("started through the proxy")?;
        let nodes: Api<Node> = Api::all(c.client());
        let cordon = serde_json::json!({ "spec": { "unschedulable": true } });
        nodes
            .patch("node-1", &PatchParams::default(), &Patch::Merge(&cordon))
            .await?;
        // muster's node watch delivers events in order: once it has node-2, added after the
        // cordon, it has the cordon too.
        let cached = counter(&c, "muster_cache_nodes").await?;
        c.add_node("node-2", NodeShape::cpu("350m")).await?;
        wait_counter_above(&c, "muster_cache_nodes", cached).await?;
        proxy.release(held);
        wait_ungated(&c, ns, "s-2").await?;
        let whole = WholeOrNone::new(ns, &gang, 3);
        whole.wait_whole(&c, PLACE).await?;
        let bound = c.bound_pods(ns).await?;
        ensure_truth!(
            gang.iter()
                .all(|m| bound.get(m).map(String::as_str) == Some("node-2")),
            "the gang is not whole on node-2 (node-1 is cordoned): {bound:?}"
        );
        c.assert_no_overcommit().await?;
        // muster's own story: the members were never told the gang's seats went.
        let events = k8s::events_in(&c.client(), ns).await?;
        let released: Vec<String> = events
            .iter()
            .filter(|(pod, e)| gang.contains(pod) && e.message.contains("seats released"))
            .map(|(pod, e)| format!("{pod}: {e}"))
            .collect();
        ensure!(
            released.is_empty(),
            "the gang's seats were released instead of planned again: {released:?}"
        );
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

/// A pod created with `spec.nodeName` (no scheduler involved) takes room on the node where
/// members of a gang of 3 wait at muster's bind. muster lets the gang through onto node-1; its
/// API proxy holds s-2's gate removal, so s-0 and s-1 come to muster's bind (seated on node-1)
/// and wait there; the intruder takes 200m of node-1, node-2 is added with room for one
/// member, and s-2 is let through. At quorum muster must look at node-1 again: binding the
/// seated members there would over-commit it (the API server does not check room on bind, a
/// kubelet would reject them: a partial gang). On every poll no node is over-committed and the
/// gang is whole or none; once a node with room is added it binds whole.
#[tokio::test]
async fn a_pod_bound_by_node_name_onto_seats_is_not_overcommitted_and_the_gang_binds_whole(
) -> Result<()> {
    let _t = Timer(
        "a_pod_bound_by_node_name_onto_seats_is_not_overcommitted_and_the_gang_binds_whole",
        Instant::now(),
    );
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).through_api_proxy()).await?;
    let ns = "intruder";
    let gang = names("s", 0..3);
    let r = async {
        let held = two_waiting_at_bind_on_node_1(&c, ns, &gang).await?;
        let proxy = c.api_proxy().context("started through the proxy")?;
        let cached = counter(&c, "muster_cache_pods").await?;
        // 200m by spec.nodeName: node-1 keeps room for one member, not two.
        let mut intruder = PodBuilder::new(ns, "by-node-name").cpu("200m").build();
        intruder.spec.as_mut().unwrap().node_name = Some("node-1".into());
        k8s::create_pod(&c.client(), ns, &intruder).await?;
        // muster's watch has it before s-2 completes the quorum at bind (a pod muster has not
        // seen yet is no room muster can know of).
        wait_counter_above(&c, "muster_cache_pods", cached).await?;
        // Room for the third member elsewhere; it is let through.
        c.add_node("node-2", NodeShape::cpu("150m")).await?;
        proxy.release(held);
        wait_ungated(&c, ns, "s-2").await?;
        let whole = WholeOrNone::new(ns, &gang, 3);
        // Room for 2 of 3 now (one on node-1, one on node-2): nothing may be bound.
        whole.assert_none_for(&c, WINDOW * 2).await?;
        c.add_node("node-3", NodeShape::cpu("150m")).await?;
        whole.wait_whole(&c, PLACE).await?;
        c.assert_no_overcommit().await?;
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}
