//! High availability on the real control plane: two muster processes with `--leader-elect`
//! (kube-scheduler's default Lease timings: 15 s / 10 s / 2 s) behind a loopback forwarder
//! that, as a Service would, sends kube-scheduler's calls to whichever replica is Ready.
//!
//! - `sigkill_of_the_leader_...`: the leader is SIGKILLed while one gang is half seated and
//!   another is being created; no gang is ever seen partly bound beyond the time its members'
//!   concurrent bindings take, both gangs are placed, and the time from the kill to the next
//!   gang placed is measured (printed; the README carries the figure).
//! - `a_leader_cut_off_...`: the leader's kubeconfig points through a forwarder that is cut;
//!   it must stop answering decisions before the standby takes the Lease over.
//! - `a_leader_stopped_with_sigterm_...`: a leader stopped gracefully gives the Lease up, so the
//!   standby takes over at its next try instead of after the lease duration.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use muster_harness::forward::http_post_json;
use muster_harness::{
    control_run_requested, k8s, ControlPlane, ControlPlaneOptions, Forwarder, GangKey, Muster,
    MusterOptions, NodeShape, PodBuilder, SchedulerOptions, Timer,
};

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");
const NS: &str = "ha";
/// Members of one gang are bound by concurrent API calls: a poll may fall between them.
const BINDING_GRACE: Duration = Duration::from_secs(2);

struct Ha {
    a: Muster,
    b: Muster,
    front: Forwarder,
    /// Between muster-a and the API server, when the test cuts it off.
    a_to_api: Option<Forwarder>,
    cp: ControlPlane,
}

fn replica(cp: &ControlPlane, name: &str, kubeconfig: &Path) -> Result<MusterOptions> {
    let dir = cp.dir().join(name);
    std::fs::create_dir_all(&dir)?;
    let mut o = MusterOptions::new(MUSTER, kubeconfig, &dir);
    o.args = ["--leader-elect", "--leader-elect-identity", name]
        .map(String::from)
        .to_vec();
    Ok(o)
}

/// A kubeconfig like the admin one, but reaching the API server through `port`.
fn kubeconfig_through(cp: &ControlPlane, port: u16) -> Result<PathBuf> {
    let text = std::fs::read_to_string(cp.kubeconfig_path())?;
    let direct = cp.apiserver_url();
    ensure!(text.contains(&direct), "kubeconfig does not name {direct}");
    let path = cp.dir().join("kubeconfig-through-forwarder");
    std::fs::write(
        &path,
        text.replace(&direct, &format!("https://127.0.0.1:{port}")),
    )?;
    Ok(path)
}

/// muster-a starts first and takes the Lease (it is Ready when `start` returns); muster-b then
/// stands by, having seen muster-a hold the Lease; kube-scheduler calls the forwarder.
async fn start(cut_able: bool) -> Result<Ha> {
    let mut cp = ControlPlane::start(ControlPlaneOptions::default()).await?;
    let a_to_api = if cut_able {
        let addr = cp
            .apiserver_url()
            .trim_start_matches("https://")
            .parse()
            .context("API server address")?;
        Some(Forwarder::to(addr).await?)
    } else {
        None
    };
    let a_kubeconfig = match &a_to_api {
        Some(f) => kubeconfig_through(&cp, f.port())?,
        None => cp.kubeconfig_path().to_path_buf(),
    };
    let a = Muster::start(replica(&cp, "muster-a", &a_kubeconfig)?).await?;
    let mut b_opts = replica(&cp, "muster-b", cp.kubeconfig_path())?;
    b_opts.ready_path = "/healthz";
    let b = Muster::start(b_opts).await?;
    muster_harness::wait_for(
        "muster-b to stand by, naming muster-a",
        Duration::from_secs(30),
        || async {
            let (code, body) = b.get("/readyz").await?;
            Ok(if code == 503 && body.contains("muster-a holds Lease") {
                muster_harness::Progress::Done(())
            } else {
                muster_harness::Progress::NotYet(format!("HTTP {code}: {body}"))
            })
        },
    )
    .await?;
    let front = Forwarder::to_ready(vec![a.port(), b.port()]).await?;
    let so = SchedulerOptions {
        extender_base_url: Some(front.url()),
        without_extenders: control_run_requested(),
        ..SchedulerOptions::default()
    };
    cp.start_scheduler(so).await?;
    let client = cp.client();
    k8s::create_namespace(&client, NS).await?;
    for i in 0..4 {
        k8s::add_node(&client, &format!("node-{i}"), &NodeShape::cpu("2")).await?;
    }
    Ok(Ha {
        a,
        b,
        front,
        a_to_api,
        cp,
    })
}

fn member(gang: &str, i: u32) -> PodBuilder {
    PodBuilder::new(NS, &format!("{gang}-{i}"))
        .gang(GangKey::Muster, gang, 3)
        .cpu("500m")
}

/// Per gang of `gangs`: how many of its 3 members are bound.
fn bound_per_gang(bound: &BTreeMap<String, String>, gangs: &[&str]) -> Vec<usize> {
    gangs
        .iter()
        .map(|g| {
            (0..3)
                .filter(|i| bound.contains_key(&format!("{g}-{i}")))
                .count()
        })
        .collect()
}

impl Ha {
    fn logs(&self) -> String {
        format!(
            "muster-a:\n{}\nmuster-b:\n{}\n{}",
            self.a.log_tail(30),
            self.b.log_tail(30),
            self.cp.log_tails(20)
        )
    }
}

#[tokio::test]
async fn sigkill_of_the_leader_leaves_no_partial_gang_and_the_standby_places_both() -> Result<()> {
    let _t = Timer("sigkill_of_the_leader", Instant::now());
    let mut ha = start(false).await?;
    let client = ha.cp.client();
    let r = async {
        // Gang one is half seated on the leader: two of its three members exist.
        for i in 0..2 {
            member("one", i).create(&client).await?;
        }
        muster_harness::wait_for(
            "gang ha/one to hold seats on muster-a",
            Duration::from_secs(60),
            || async {
                let bound = k8s::bound_pods(&client, NS).await?;
                muster_harness::ensure_truth!(bound.is_empty(), "a half gang was bound: {bound:?}");
                let g = ha.a.gang(NS, "one").await?;
                Ok(match g {
                    Some(g) if g.members.iter().filter(|m| m.state == "seated").count() == 2 => {
                        muster_harness::Progress::Done(())
                    }
                    other => muster_harness::Progress::NotYet(format!("{other:?}")),
                })
            },
        )
        .await?;
        // Gang two is being created while the leader dies.
        let creator = {
            let client = client.clone();
            tokio::spawn(async move {
                for i in 0..3 {
                    member("two", i).create(&client).await?;
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                Ok::<_, anyhow::Error>(())
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        ha.a.kill_hard();
        let killed = Instant::now();
        eprintln!("SIGKILLed muster-a (the leader)");
        member("one", 2).create(&client).await?;
        creator.await??;

        let gangs = ["one", "two"];
        let mut partly_since: Vec<Option<Instant>> = vec![None; 2];
        let mut placed_at: Vec<Option<Duration>> = vec![None; 2];
        let deadline = killed + Duration::from_secs(120);
        let mut polls = 0u32;
        let mut b_leads_at: Option<Duration> = None;
        while placed_at.iter().any(Option::is_none) {
            ensure!(
                Instant::now() < deadline,
                "both gangs not placed 120 s after the kill: {:?}",
                k8s::bound_pods(&client, NS).await?
            );
            if b_leads_at.is_none() && matches!(ha.b.get("/readyz").await, Ok((200, _))) {
                b_leads_at = Some(killed.elapsed());
            }
            let bound = k8s::bound_pods(&client, NS).await?;
            let now = Instant::now();
            polls += 1;
            for (i, n) in bound_per_gang(&bound, &gangs).into_iter().enumerate() {
                match n {
                    0 => partly_since[i] = None,
                    3 => {
                        partly_since[i] = None;
                        placed_at[i].get_or_insert(now - killed);
                    }
                    _ => {
                        let since = *partly_since[i].get_or_insert(now);
                        if now - since > BINDING_GRACE {
                            muster_harness::bail_truth!(
                                "gang ha/{} partly bound ({n}/3) for {:?}: {bound:?}",
                                gangs[i],
                                now - since
                            );
                        }
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let first = placed_at.iter().flatten().min().copied().unwrap();
        eprintln!(
            "FAILOVER: kill → muster-b Ready (leader) {:.1} s → next gang placed {:.1} s; gang one at {:.1} s, gang two at {:.1} s ({polls} polls, none partial beyond {BINDING_GRACE:?})",
            b_leads_at.map_or(f64::NAN, |d| d.as_secs_f64()),
            first.as_secs_f64(),
            placed_at[0].unwrap().as_secs_f64(),
            placed_at[1].unwrap().as_secs_f64(),
        );
        let (code, body) = ha.b.get("/readyz").await?;
        ensure!(code == 200, "muster-b is not the leader: {body}");
        let (_, metrics) = ha.b.get("/metrics").await?;
        ensure!(
            metrics.contains("\nmuster_leader 1\n")
                && metrics.contains("\nmuster_leader_takeovers_total 1\n"),
            "muster-b's metrics do not show one takeover: {metrics}"
        );
        ensure!(
            k8s::check_no_overcommit(&client).await?.is_ok(),
            "a node is over-committed"
        );
        // The figure to report. The bound leaves room for the worst case: up to 17.4 s until the
        // standby may take the Lease (15 s from its last sight of a renewal, seen up to 2.4 s
        // late) plus kube-scheduler's pod back-off (up to 10 s) for calls that failed meanwhile.
        ensure!(
            first <= Duration::from_secs(30),
            "failover took {first:?} (target ≤ 15 s)"
        );
        Ok(())
    }
    .await;
    if r.is_err() {
        eprintln!("{}", ha.logs());
    }
    drop(ha.front);
    r
}

/// A filter call straight to one replica: `Ok(true)` if it decided — answered from its table:
/// `NodeNames`, or (the probe pod exists in no cluster, and only the watch adds pods) that it
/// has not seen the pod — `Ok(false)` if it refused as not the leader.
async fn decides(port: u16) -> Result<bool> {
    let pod = r#"{"metadata":{"name":"probe","namespace":"ha","uid":"u-probe"},"spec":{"containers":[{"name":"c","image":"x","resources":{"requests":{"cpu":"100m"}}}]},"status":{"phase":"Pending"}}"#;
    let body = format!(r#"{{"Pod":{pod},"Nodes":null,"NodeNames":["node-0"]}}"#);
    let (code, answer) = http_post_json(port, "/filter", &body, Duration::from_secs(3)).await?;
    ensure!(code == 200, "filter: HTTP {code}: {answer}");
    if answer.contains("is not the leader") || answer.contains("is the standby") {
        return Ok(false);
    }
    ensure!(
        answer.contains(r#""NodeNames":["node-0"]"#)
            || answer.contains("unknown pod ha/probe (uid u-probe): muster has not seen it"),
        "filter: {answer}"
    );
    Ok(true)
}

#[tokio::test]
async fn a_leader_cut_off_from_the_api_server_stops_deciding_before_the_standby_takes_over(
) -> Result<()> {
    let _t = Timer("leader_cut_off", Instant::now());
    let ha = start(true).await?;
    let r = async {
        ensure!(decides(ha.a.port()).await?, "muster-a should lead");
        ensure!(!decides(ha.b.port()).await?, "muster-b should stand by");
        ha.a_to_api.as_ref().unwrap().cut();
        let cut = Instant::now();
        eprintln!("cut muster-a off from the API server");
        let mut a_stopped: Option<Duration> = None;
        let mut b_took_over: Option<Duration> = None;
        while a_stopped.is_none() || b_took_over.is_none() {
            let now = cut.elapsed();
            ensure!(
                now < Duration::from_secs(60),
                "after 60 s: muster-a stopped {a_stopped:?}, muster-b took over {b_took_over:?}"
            );
            let a = decides(ha.a.port()).await?;
            let b = decides(ha.b.port()).await?;
            ensure!(!(a && b), "both replicas decided at {now:?} after the cut");
            if !a {
                a_stopped.get_or_insert(now);
            } else {
                ensure!(a_stopped.is_none(), "muster-a decided again after it stopped");
            }
            if b {
                b_took_over.get_or_insert(now);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (a_stopped, b_took_over) = (a_stopped.unwrap(), b_took_over.unwrap());
        eprintln!(
            "CUT-OFF: muster-a stopped deciding {:.1} s after the cut; muster-b took over {:.1} s after it",
            a_stopped.as_secs_f64(),
            b_took_over.as_secs_f64()
        );
        ensure!(
            a_stopped < b_took_over,
            "muster-a stopped at {a_stopped:?}, after muster-b took over at {b_took_over:?}"
        );
        ensure!(
            a_stopped <= Duration::from_secs(11),
            "muster-a decided {a_stopped:?} after the cut: past its 10 s renew deadline"
        );
        let (code, body) = ha.a.get("/readyz").await?;
        ensure!(
            code == 503 && body.contains("muster-a is not the leader"),
            "muster-a /readyz: HTTP {code}: {body}"
        );
        Ok(())
    }
    .await;
    if r.is_err() {
        eprintln!("{}", ha.logs());
    }
    r
}

#[tokio::test]
async fn a_leader_stopped_with_sigterm_releases_the_lease_and_the_standby_takes_over_at_once(
) -> Result<()> {
    let _t = Timer("leader_sigterm", Instant::now());
    let ha = start(false).await?;
    let r = async {
        ensure!(decides(ha.a.port()).await?, "muster-a should lead");
        let pid = ha.a.pid().context("muster-a runs")?;
        ensure!(muster_harness::process::signal(pid, 15), "SIGTERM muster-a");
        let stopped = Instant::now();
        let took_over =
            muster_harness::wait_for("muster-b to take over", Duration::from_secs(30), || async {
                Ok(if decides(ha.b.port()).await? {
                    muster_harness::Progress::Done(stopped.elapsed())
                } else {
                    muster_harness::Progress::NotYet("muster-b stands by".into())
                })
            })
            .await?;
        eprintln!(
            "SIGTERM: muster-b decides {:.1} s after muster-a was stopped",
            took_over.as_secs_f64()
        );
        // Without the release it would wait out the 15 s lease duration; with it, one retry
        // period (2 s, up to 2.4 s with jitter) and change.
        ensure!(
            took_over < Duration::from_secs(6),
            "muster-b took over {took_over:?} after SIGTERM: the Lease was not released"
        );
        let lease = kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
            ha.cp.client(),
            "kube-system",
        )
        .get("muster")
        .await?;
        let holder = lease.spec.and_then(|s| s.holder_identity);
        ensure!(
            holder.as_deref() == Some("muster-b"),
            "Lease holder {holder:?}"
        );
        Ok(())
    }
    .await;
    if r.is_err() {
        eprintln!("{}", ha.logs());
    }
    r
}
