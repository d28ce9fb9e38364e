//! API Priority and Fairness on the real kube-apiserver: with `deploy/flowcontrol.yaml` applied,
//! the Lease requests of muster's ServiceAccount are classified into muster's own priority level
//! (`muster-leader-election`), and its other requests are not. The API server names the
//! FlowSchema and priority level of every request it classifies in the response headers
//! `X-Kubernetes-PF-FlowSchema-UID` and `X-Kubernetes-PF-PriorityLevel-UID`.
//!
//! Under throttling: a test-only priority level of one seat takes muster's other requests and
//! is loaded from loopback until the API server refuses some of muster's own (its per-FlowSchema
//! refusal count); the leader keeps its Lease (same holder and transitions, renewed well within
//! the lease duration), never steps down, and a gang created under the load waits whole (2 of 3
//! fit; kube-scheduler alone binds two, so the control run requires it to fail) and is then
//! bound whole (never-half, fail-safe).
//!
//! Starved: the same one-seat level kept taken for [`STARVED_FOR`] by requests that each hold it
//! 3 s (their bodies sent slowly) — with `deploy/flowcontrol.yaml` the leader keeps its Lease; without it, the
//! same load leaves the Lease unrenewed past its duration and the leader steps down, so the
//! Lease level is what keeps it.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::PostParams;
use kube::Api;
use muster_harness::checks::metric;
use muster_harness::control_plane::client_from_kubeconfig;
use muster_harness::k8s::{self, KeyScheme};
use muster_harness::paths::{control_plane_bin_dir, repo_root};
use muster_harness::timing;
use muster_harness::truth::TruthContext;
use muster_harness::{
    control_run_requested, ensure_truth, holds_for, muster_view_is_checked, names, rbac, wait_for,
    ControlPlane, ControlPlaneOptions, Muster, MusterOptions, NodeShape, PodBuilder, Progress,
    SchedulerOptions, PLACE, WINDOW,
};

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");

const NAME: &str = "muster-leader-election";

/// The FlowSchema and priority level UIDs the API server classified a GET of `path` into.
async fn classified(client: &kube::Client, path: &str) -> Result<(String, String)> {
    let req = axum::http::Request::get(path).body(kube::client::Body::from(Vec::new()))?;
    let resp = client
        .send(req)
        .await
        .with_context(|| format!("GET {path}"))?;
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
            .with_context(|| format!("GET {path}: no {name} header (HTTP {})", resp.status()))
    };
    Ok((
        header("x-kubernetes-pf-flowschema-uid")?,
        header("x-kubernetes-pf-prioritylevel-uid")?,
    ))
}

#[tokio::test]
async fn musters_lease_requests_have_a_priority_level_of_their_own() -> Result<()> {
    let cp = control_plane_with_apf(400, 200).await?;
    let admin = cp.client();
    let sa_kubeconfig =
        rbac::service_account_kubeconfig(&admin, cp.kubeconfig_path(), cp.dir(), 1).await?;
    apply_shipped_flowcontrol(&cp)?;
    let schema = Api::<FlowSchema>::all(admin.clone()).get(NAME).await?;
    let level = Api::<PriorityLevelConfiguration>::all(admin.clone())
        .get(NAME)
        .await?;
    let ours = (
        schema.metadata.uid.context("FlowSchema without uid")?,
        level.metadata.uid.context("level without uid")?,
    );
    let muster = client_from_kubeconfig(&sa_kubeconfig).await?;
    let lease = "/apis/coordination.k8s.io/v1/namespaces/muster-system/leases/muster";
    // The API server's APF configuration controller picks the new objects up from its informer.
    wait_for(
        "muster's Lease request in its own priority level",
        Duration::from_secs(30),
        || async {
            let got = classified(&muster, lease).await?;
            Ok(if got == ours {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("classified as {got:?}, ours are {ours:?}"))
            })
        },
    )
    .await?;
    // Only the Lease: muster's bulk traffic stays where it was.
    let pods = classified(&muster, "/api/v1/pods?limit=1").await?;
    ensure!(
        pods.0 != ours.0 && pods.1 != ours.1,
        "a pod list of muster's landed in its Lease level: {pods:?}"
    );
    Ok(())
}

/// The test-only priority level that throttles muster's bulk traffic: one share of the API
/// server's concurrency (a few seats), nothing borrowed or lent, no queue (a request finding
/// every seat taken is refused 429 at once).
const THROTTLED: &str = "muster-throttled";
const MUSTER_NS: &str = "muster-system";
const IDENTITY: &str = "muster-under-apf";
const GANG_NS: &str = "apf";
/// How long the API server is loaded, and by how many clients at once (loopback only): five
/// times the Lease's duration (`timing::LEASE_DURATION`), which no sample may see unrenewed.
const LOAD: Duration = timing::LEASE_DURATION.saturating_mul(5);
/// The load goes on past [`LOAD`] until the API server has refused one of muster's own
/// requests, up to this long in all.
const MAX_LOAD: Duration = Duration::from_secs(60);
const LOADERS: usize = 48;
/// The loaders' identity: another ServiceAccount, in the same throttled level by a FlowSchema of
/// its own, so the API server's counts per FlowSchema tell muster's refused requests apart.
const LOADER: &str = "muster-load";

/// `deploy/flowcontrol.yaml`, applied with kubectl as an operator would.
fn apply_shipped_flowcontrol(cp: &ControlPlane) -> Result<()> {
    let kubectl = control_plane_bin_dir().join("kubectl");
    let out = Command::new(if kubectl.is_file() {
        kubectl
    } else {
        "kubectl".into()
    })
    .current_dir(repo_root())
    .env_remove("KUBECONFIG")
    .args(["--kubeconfig"])
    .arg(cp.kubeconfig_path())
    .args(["apply", "-f", "deploy/flowcontrol.yaml"])
    .output()
    .context("running kubectl")?;
    ensure!(
        out.status.success(),
        "kubectl apply -f deploy/flowcontrol.yaml: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// A control plane with APF on (the harness turns it off for speed; later flags win), its
/// concurrency `inflight` read-only plus `mutating` requests, shared out among the levels.
/// The shipped install's admission policy is applied (gang members marked and gated).
async fn control_plane_with_apf(inflight: u32, mutating: u32) -> Result<ControlPlane> {
    let cp = ControlPlane::start(ControlPlaneOptions {
        apiserver_args: vec![
            "--enable-priority-and-fairness=true".into(),
            format!("--max-requests-inflight={inflight}"),
            format!("--max-mutating-requests-inflight={mutating}"),
        ],
        ..ControlPlaneOptions::default()
    })
    .await?;
    muster_harness::policy::install_unless_control_run(&cp.client()).await?;
    Ok(cp)
}

/// Every request of muster's ServiceAccount into [`THROTTLED`], at a precedence ahead of the
/// cluster's `service-accounts` (9000) and behind `deploy/flowcontrol.yaml`'s Lease schema
/// (190), which still takes the Lease requests.
async fn throttle_muster(admin: &kube::Client) -> Result<()> {
    let level: PriorityLevelConfiguration = serde_json::from_value(serde_json::json!({
        "metadata": {"name": THROTTLED},
        "spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": 1,
            "lendablePercent": 0,
            "borrowingLimitPercent": 0,
            "limitResponse": {"type": "Reject"}}}
    }))?;
    let schema: FlowSchema = serde_json::from_value(serde_json::json!({
        "metadata": {"name": THROTTLED},
        "spec": {
            "priorityLevelConfiguration": {"name": THROTTLED},
            "matchingPrecedence": 500,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{
                "subjects": [{"kind": "ServiceAccount",
                    "serviceAccount": {"name": "muster", "namespace": MUSTER_NS}}],
                "resourceRules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"],
                    "clusterScope": true, "namespaces": ["*"]}],
                "nonResourceRules": [{"nonResourceURLs": ["*"], "verbs": ["*"]}]
            }]
        }
    }))?;
    let mut loader_schema = schema.clone();
    loader_schema.metadata.name = Some(format!("{THROTTLED}-load"));
    let spec = &mut loader_schema.spec;
    spec.matching_precedence = Some(501);
    for rule in spec.rules.iter_mut().flatten() {
        for subject in &mut rule.subjects {
            if let Some(sa) = subject.service_account.as_mut() {
                sa.name = LOADER.into();
            }
        }
    }
    // The loaders may list pods (their requests must reach the storage, past authorization).
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": LOADER},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": LOADER, "namespace": MUSTER_NS}]
    }))?;
    let pp = PostParams::default();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&pp, &binding)
        .await
        .context("letting the loaders list pods")?;
    Api::<FlowSchema>::all(admin.clone())
        .create(&pp, &loader_schema)
        .await
        .context("creating the loaders' FlowSchema")?;
    Api::<PriorityLevelConfiguration>::all(admin.clone())
        .create(&pp, &level)
        .await
        .context("creating the throttling priority level")?;
    Api::<FlowSchema>::all(admin.clone())
        .create(&pp, &schema)
        .await
        .context("creating the throttling FlowSchema")?;
    Ok(())
}

/// The API server's count of requests it refused (429) whose `label` (`priority_level` or
/// `flow_schema`) is `value`, from its own `/metrics`.
async fn rejected_in(admin: &kube::Client, label: &str, value: &str) -> Result<f64> {
    let req = axum::http::Request::get("/metrics").body(Vec::new())?;
    let text = admin.request_text(req).await.context("GET /metrics")?;
    let label = format!("{label}=\"{value}\"");
    Ok(text
        .lines()
        .filter(|l| l.starts_with("apiserver_flowcontrol_rejected_requests_total{"))
        .filter(|l| l.contains(&label))
        .filter_map(|l| l.rsplit_once(' ')?.1.trim().parse::<f64>().ok())
        .sum())
}

/// One look at muster's Lease: holder, transitions, renew time (microseconds).
#[derive(Clone, Debug, PartialEq)]
struct LeaseSeen {
    holder: Option<String>,
    transitions: Option<i32>,
    renewed: Option<i64>,
}

async fn lease_seen(leases: &Api<Lease>) -> Result<Option<LeaseSeen>> {
    Ok(leases.get_opt("muster").await?.map(|l| {
        let spec = l.spec.unwrap_or_default();
        LeaseSeen {
            holder: spec.holder_identity,
            transitions: spec.lease_transitions,
            renewed: spec.renew_time.map(|t| t.0.as_microsecond()),
        }
    }))
}

/// In the shipped mode each member needs a nomination and a gate removal through the throttled
/// level besides its binding. The level keeps refusing the loaders, so API Priority and
/// Fairness raises its `Retry-After` (up to 32 s): a write of muster's refused then is tried
/// again in its own task after at most 2 s, and one gang's writes never hold up a round
/// (waiting the `Retry-After` out, the gang was bound up to 59 s after its room appeared).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn musters_leader_keeps_its_lease_and_binds_a_gang_whole_while_its_priority_level_throttles_it(
) -> Result<()> {
    // 75 seats in all: the throttled level's one share of about 250 gets one seat, the Lease
    // level's five get two.
    let mut cp = control_plane_with_apf(50, 25).await?;
    let admin = cp.client();
    let sa_kubeconfig =
        rbac::service_account_kubeconfig(&admin, cp.kubeconfig_path(), cp.dir(), 1).await?;
    apply_shipped_flowcontrol(&cp)?;
    // muster starts before its level is throttled (its first lists, refused in one seat and
    // tried again after their back-offs, took it about 11 s to be ready); the load and the gang
    // come once the API server classifies its requests into the throttled level.
    let mo = leader_elected_muster(&sa_kubeconfig, &cp);
    let muster = Muster::start(mo).await?;
    throttle_muster(&admin).await?;
    let level_uid = |name: &'static str| {
        let admin = admin.clone();
        async move {
            Api::<PriorityLevelConfiguration>::all(admin)
                .get(name)
                .await?
                .metadata
                .uid
                .context("level without uid")
        }
    };
    let (lease_level, throttled) = (level_uid(NAME).await?, level_uid(THROTTLED).await?);
    let sa = client_from_kubeconfig(&sa_kubeconfig).await?;
    let lease_path = "/apis/coordination.k8s.io/v1/namespaces/muster-system/leases/muster";
    wait_for(
        "muster's Lease requests in their level, its pod lists in the throttled one",
        Duration::from_secs(30),
        || async {
            let lease = classified(&sa, lease_path).await?.1;
            let pods = classified(&sa, "/api/v1/pods?limit=1").await?.1;
            Ok(if lease == lease_level && pods == throttled {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("Lease in {lease}, pods in {pods}"))
            })
        },
    )
    .await?;

    cp.start_scheduler(SchedulerOptions {
        extender_base_url: Some(muster.url()),
        without_extenders: control_run_requested(),
        ..SchedulerOptions::default()
    })
    .await?;
    k8s::create_namespace(&admin, GANG_NS).await?;
    k8s::add_node(&admin, "node-0", &NodeShape::cpu("1")).await?;
    let leases = Api::<Lease>::namespaced(admin.clone(), MUSTER_NS);
    let first = wait_for("muster to take its Lease", PLACE, || async {
        Ok(match lease_seen(&leases).await? {
            Some(l) if l.holder.as_deref() == Some(IDENTITY) => Progress::Done(l),
            other => Progress::NotYet(format!("Lease: {other:?}")),
        })
    })
    .await?;
    let rejected_before = rejected_in(&admin, "priority_level", THROTTLED).await?;
    let musters_rejected_before = rejected_in(&admin, "flow_schema", THROTTLED).await?;

    // The load: LOADERS clients in the throttled level listing pods back to back until
    // stopped; a refused request is tried again after its `Retry-After` (1 s), as client-go
    // would.
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let mut loaders = tokio::task::JoinSet::new();
    let user = format!("system:serviceaccount:{MUSTER_NS}:{LOADER}");
    for _ in 0..LOADERS {
        let (admin, user, stop) = (admin.clone(), user.clone(), stop.clone());
        loaders.spawn(async move {
            let mut sent = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let req = axum::http::Request::get("/api/v1/pods?limit=50")
                    .header("Impersonate-User", user.as_str())
                    .header("Impersonate-Group", "system:serviceaccounts")
                    .header("Impersonate-Group", "system:authenticated")
                    .body(kube::client::Body::from(Vec::new()))
                    .expect("a request");
                sent += 1;
                let answer = tokio::time::timeout(Duration::from_secs(5), admin.send(req)).await;
                if matches!(answer, Ok(Ok(ref r)) if r.status() == 429) {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
            sent
        });
    }
    // The Lease as the API server holds it, every 200 ms while loaded (the admin client is
    // exempt from APF).
    let sampler = {
        let (leases, stop) = (leases.clone(), stop.clone());
        tokio::spawn(async move {
            let mut seen = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                if let Ok(Some(l)) = lease_seen(&leases).await {
                    seen.push((Instant::now(), l));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            seen
        })
    };

    let r = async {
        // A gang created under the load: three members of 500m where two fit (kube-scheduler
        // alone binds two): none bound; then room for all three: bound whole.
        let client = cp.client();
        for i in 0..3 {
            PodBuilder::new(GANG_NS, &format!("g-{i}"))
                .gang(KeyScheme::Muster, "g", 3)
                .cpu("500m")
                .create(&client)
                .await?;
        }
        holds_for("no member of g bound while only 2 fit", WINDOW, || async {
            let bound = k8s::bound_pods(&client, GANG_NS).await?;
            Ok(if bound.is_empty() {
                Ok(())
            } else {
                Err(format!("bound: {bound:?}"))
            })
        })
        .await
        .truth()?;
        k8s::add_node(&client, "node-1", &NodeShape::cpu("1")).await?;
        let room = Instant::now();
        let names = names("g", 3);
        let bound_at = wait_for("every member of g bound", PLACE, || async {
            let bound = k8s::bound_pods(&client, GANG_NS).await?;
            Ok(if names.iter().all(|n| bound.contains_key(n)) {
                Progress::Done(started.elapsed())
            } else {
                Progress::NotYet(format!("bound: {bound:?}"))
            })
        })
        .await
        .truth()?;
        eprintln!(
            "gang g bound whole {bound_at:?} into the load, {:?} after the node with its room",
            room.elapsed()
        );
        Ok::<_, anyhow::Error>(())
    }
    .await;
    if let Err(e) = r {
        // The loaders end with the test's runtime.
        stop.store(true, Ordering::Relaxed);
        let pods = k8s::list_pods(&admin, GANG_NS).await.unwrap_or_default();
        eprintln!(
            "pods:\n{}\nmuster:\n{}",
            k8s::describe_pods(&pods),
            muster.log_tail(40)
        );
        return Err(e);
    }
    // At least LOAD, and until one of muster's own requests was refused (at most MAX_LOAD).
    let musters_refused = wait_for(
        "the API server to refuse one of muster's own requests",
        MAX_LOAD,
        || async {
            if started.elapsed() < LOAD {
                return Ok(Progress::NotYet("loading".into()));
            }
            let n = rejected_in(&admin, "flow_schema", THROTTLED).await? - musters_rejected_before;
            Ok(if n > 0.0 {
                Progress::Done(n)
            } else {
                Progress::NotYet(format!("none after {:?}", started.elapsed()))
            })
        },
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    let until = Instant::now();
    let mut sent = 0;
    while let Some(n) = loaders.join_next().await {
        sent += n?;
    }
    let samples = sampler.await?;
    let rejected = rejected_in(&admin, "priority_level", THROTTLED).await? - rejected_before;
    let musters_rejected = musters_refused
        .with_context(|| format!("{rejected} refused in {THROTTLED}, {sent} lists"))
        .truth()?;
    eprintln!(
        "{sent} pod lists of the loaders in {:?}; {rejected} requests of the throttled level \
         refused, {musters_rejected} of them muster's; {} Lease samples",
        until - started,
        samples.len()
    );
    // The Lease, as the API server held it throughout: the same holder and transitions, and
    // renewed more often than its duration, `timing::LEASE_DURATION` (a standby could otherwise
    // have taken it).
    let mut last_renewal = (started, first.renewed);
    let mut longest = Duration::ZERO;
    for (at, l) in &samples {
        ensure_truth!(
            l.holder == first.holder && l.transitions == first.transitions,
            "muster's Lease changed hands under the load: {l:?}, before it: {first:?}"
        );
        if l.renewed != last_renewal.1 {
            longest = longest.max(*at - last_renewal.0);
            last_renewal = (*at, l.renewed);
        }
    }
    longest = longest.max(until - last_renewal.0);
    eprintln!("longest time the Lease was seen unrenewed under the load: {longest:?}");
    ensure_truth!(
        longest < timing::LEASE_DURATION,
        "muster's Lease went {longest:?} without a renewal under the load (lease duration {:?})",
        timing::LEASE_DURATION
    );
    if muster_view_is_checked() {
        let log = muster.log_tail(2000);
        ensure!(
            !log.contains("lost the leader Lease"),
            "muster stepped down under the load:\n{log}"
        );
        let metrics = muster.metrics().await?;
        let takeovers = metric(&metrics, "muster_leader_takeovers_total")?;
        ensure!(takeovers == 1.0, "muster took its Lease {takeovers} times");
        eprintln!(
            "muster's binding retries: {}",
            metric(&metrics, "muster_bind_retries_total")?
        );
    }
    Ok(())
}

/// Holds the throttled level's seat for `hold` with one request of muster's ServiceAccount: an
/// Event created with its body sent slowly (the API server reads a request's body only once
/// APF has admitted it). curl uploads the body from a pipe this test writes to. Returns the
/// HTTP status.
async fn slow_post(url: &str, ca: &str, token: &str, hold: Duration) -> Result<u16> {
    use tokio::io::AsyncWriteExt;
    let mut curl = tokio::process::Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "20",
        ])
        .args(["--cacert", ca, "-X", "POST", "-T", "-"])
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args(["-H", "Content-Type: application/json", "-H", "Expect:"])
        .arg(url)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("running curl")?;
    let body = br#"{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"generateName":"slow-"},"eventTime":"2026-12-01T00:00:00.000000Z","reportingController":"test/slow","reportingInstance":"slow","action":"Test","reason":"Test","type":"Normal","regarding":{"kind":"Pod","namespace":"apf-load","name":"none"}}"#;
    let mut stdin = curl.stdin.take().context("curl's stdin")?;
    stdin.write_all(&body[..10]).await?;
    stdin.flush().await?;
    tokio::time::sleep(hold).await;
    stdin.write_all(&body[10..]).await?;
    drop(stdin);
    let out = curl.wait_with_output().await?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0))
}

/// What happened to muster's Lease while its level was starved.
#[derive(Debug)]
struct Starved {
    /// The longest time the API server held the Lease unrenewed (sampled every 200 ms).
    longest_unrenewed: Duration,
    /// Its holder or transitions changed.
    changed_hands: bool,
    /// muster's log says it lost the Lease (muster's view).
    stepped_down: bool,
    /// The seat holders' answers: HTTP status → count (0: no answer).
    statuses: std::collections::BTreeMap<u16, u32>,
}

impl Starved {
    /// The level was starved: seat holders were admitted (201 after holding it) and the rest
    /// refused (429) meanwhile.
    fn check_starved(&self) -> Result<()> {
        let got = |code| self.statuses.get(&code).copied().unwrap_or(0);
        ensure_truth!(
            got(201) >= 2 && got(429) >= 5,
            "the level was not starved: answers {:?}",
            self.statuses
        );
        Ok(())
    }
}

/// How long the starving load keeps muster's level taken: three times the Lease's duration
/// (`timing::LEASE_DURATION`): long enough for the Lease to lapse without its own level, and to
/// be renewed through three of its durations with it.
const STARVED_FOR: Duration = timing::LEASE_DURATION.saturating_mul(3);

/// A control plane with muster's requests in the one-seat level (and, `with_lease_level`, its
/// Lease requests in `deploy/flowcontrol.yaml`'s), muster leading; then for [`STARVED_FOR`] eight clients
/// keep that seat taken, each request holding it 3 s and a refused one tried again after its
/// `Retry-After` (loopback, at most a few dozen requests). No gang: only the Lease is judged.
async fn starve_musters_level(with_lease_level: bool) -> Result<Starved> {
    let cp = control_plane_with_apf(50, 25).await?;
    let admin = cp.client();
    let sa_kubeconfig =
        rbac::service_account_kubeconfig(&admin, cp.kubeconfig_path(), cp.dir(), 1).await?;
    if with_lease_level {
        apply_shipped_flowcontrol(&cp)?;
    }
    k8s::create_namespace(&admin, "apf-load").await?;
    let text = std::fs::read_to_string(&sa_kubeconfig)?;
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(key).map(|v| v.trim().to_string()))
            .with_context(|| format!("{key} not in muster's kubeconfig"))
    };
    let (token, ca) = (field("token:")?, field("certificate-authority:")?);
    let url = format!(
        "{}/apis/events.k8s.io/v1/namespaces/apf-load/events",
        cp.apiserver_url()
    );
    let mo = leader_elected_muster(&sa_kubeconfig, &cp);
    // muster starts before its level is throttled: its first lists, refused in one seat and
    // tried again after their back-offs, took it about 11 s to be ready, and only the Lease
    // under the starvation is judged. The starvation starts once the API server classifies its
    // requests into the one-seat level.
    let muster = Muster::start(mo).await?;
    throttle_muster(&admin).await?;
    let throttled = Api::<PriorityLevelConfiguration>::all(admin.clone())
        .get(THROTTLED)
        .await?
        .metadata
        .uid
        .context("level without uid")?;
    let sa = client_from_kubeconfig(&sa_kubeconfig).await?;
    wait_for(
        "muster's pod lists in the throttled level",
        Duration::from_secs(30),
        || async {
            let pods = classified(&sa, "/api/v1/pods?limit=1").await?.1;
            Ok(if pods == throttled {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("pods in {pods}"))
            })
        },
    )
    .await?;
    let leases = Api::<Lease>::namespaced(admin.clone(), MUSTER_NS);
    let first = wait_for("muster to take its Lease", PLACE, || async {
        Ok(match lease_seen(&leases).await? {
            Some(l) if l.holder.as_deref() == Some(IDENTITY) => Progress::Done(l),
            other => Progress::NotYet(format!("Lease: {other:?}")),
        })
    })
    .await?;
    let started = Instant::now();
    let until = started + STARVED_FOR;
    let mut holders = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (url, ca, token) = (url.clone(), ca.clone(), token.clone());
        holders.spawn(async move {
            let mut statuses = std::collections::BTreeMap::new();
            while Instant::now() < until {
                let status = slow_post(&url, &ca, &token, Duration::from_secs(3))
                    .await
                    .unwrap_or(0);
                *statuses.entry(status).or_insert(0) += 1;
                if status == 429 {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
            statuses
        });
    }
    let mut samples = Vec::new();
    while Instant::now() < until {
        if let Ok(Some(l)) = lease_seen(&leases).await {
            samples.push((Instant::now(), l));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut statuses = std::collections::BTreeMap::new();
    while let Some(s) = holders.join_next().await {
        for (k, v) in s? {
            *statuses.entry(k).or_insert(0) += v;
        }
    }
    let mut last = (started, first.renewed);
    let mut longest = Duration::ZERO;
    let mut changed_hands = false;
    for (at, l) in &samples {
        changed_hands |= l.holder != first.holder || l.transitions != first.transitions;
        if l.renewed != last.1 {
            longest = longest.max(*at - last.0);
            last = (*at, l.renewed);
        }
    }
    longest = longest.max(until - last.0);
    Ok(Starved {
        longest_unrenewed: longest,
        changed_hands,
        stepped_down: muster.log_tail(5000).contains("lost the leader Lease"),
        statuses,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn musters_leader_keeps_its_lease_while_its_other_requests_are_starved() -> Result<()> {
    let s = starve_musters_level(true).await?;
    eprintln!("with deploy/flowcontrol.yaml: {s:?}");
    s.check_starved()?;
    ensure_truth!(
        !s.changed_hands && s.longest_unrenewed < timing::LEASE_DURATION,
        "muster's Lease lapsed while its other requests were starved: {s:?}"
    );
    if muster_view_is_checked() {
        ensure!(!s.stepped_down, "muster stepped down: {s:?}");
    }
    Ok(())
}

/// The same starvation without `deploy/flowcontrol.yaml`: the Lease requests share the starved
/// level and the leader loses its Lease — so the Lease level is what keeps it in the test above,
/// and that load is heavy enough to show it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_its_lease_level_the_same_starvation_makes_musters_leader_step_down() -> Result<()>
{
    let s = starve_musters_level(false).await?;
    eprintln!("without deploy/flowcontrol.yaml: {s:?}");
    s.check_starved()?;
    ensure_truth!(
        s.longest_unrenewed >= timing::LEASE_DURATION,
        "muster's Lease was renewed throughout although its requests shared the starved level: \
         {s:?}"
    );
    ensure!(s.stepped_down, "muster did not step down: {s:?}");
    Ok(())
}

/// muster as the shipped Deployment runs it, electing a leader (Lease `MUSTER_NS/muster`, this
/// test's identity), with the ServiceAccount's kubeconfig.
fn leader_elected_muster(sa_kubeconfig: &std::path::Path, cp: &ControlPlane) -> MusterOptions {
    let mut mo = MusterOptions::new(MUSTER, sa_kubeconfig, cp.dir());
    mo.args = [
        "--leader-elect",
        "--leader-elect-lease-name=muster",
        "--leader-elect-lease-namespace",
        MUSTER_NS,
        "--leader-elect-identity",
        IDENTITY,
    ]
    .map(String::from)
    .to_vec();
    mo
}
