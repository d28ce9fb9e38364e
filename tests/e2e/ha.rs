//! High availability on the real control plane, with the shipped leader-election timings
//! (3 s lease, 2 s renew deadline, 500 ms retry): muster processes with `--leader-elect`, each
//! standing for a pod object in `muster-system` (`--pod-name`) that the leader labels
//! `muster.dev/leader=true`, behind a loopback forwarder that plays the shipped Service: each
//! new connection goes to a replica whose pod carries the label and whose `/readyz` is 200.
//!
//! - `both_replicas_are_ready_...`: both replicas Ready, only the leader's pod labelled and
//!   routed to, a gang placed through the Service by the leader (kube-scheduler-semantics).
//! - `under_kube_schedulers_traffic_only_the_leader_decides_...`: the Service's endpoints lag
//!   the label, so kube-scheduler's own filter and bind calls for three gangs reach the standby
//!   too: it refuses each (never a decision), the leader decides all, every gang placed whole.
//! - `sigkill_of_the_leader_...`: the leader is SIGKILLed while one gang is half seated and
//!   another is being created; no gang is ever partly bound beyond the time its members'
//!   concurrent bindings take (never-half), both gangs are placed, the new leader clears the
//!   dead one's label, and the time from the kill to the next gang placed is measured —
//!   `MUSTER_HA_RUNS` times (default 3), the killed replica restarted as the new standby each
//!   time.
//! - `a_leader_cut_off_...`: the leader's kubeconfig points through a forwarder that is cut;
//!   it must stop answering decisions before the standby takes the Lease over, and the new
//!   leader removes the label the cut-off one could not.
//! - `a_leader_stopped_with_sigterm_...`: a leader stopped gracefully gives the Lease and its
//!   label up, so the standby decides within 2 s; never both decide.
//! - `a_rolling_replacement_...`: both replicas replaced one at a time, as a Deployment with
//!   `maxSurge: 1, maxUnavailable: 0` does (a new replica Ready first, then an old one stopped
//!   with SIGTERM and its pod deleted), the leader first, under a steady stream of gangs: every
//!   gang placed whole, none partial, and the scheduler's failed calls counted.
//!
//! - `a_leader_killed_in_the_middle_of_a_gangs_release_...` (gang-members mode): the leader is
//!   SIGKILLed with a gang's nominations sent and its gates not yet removed; the standby places
//!   the gang whole.
//! - `a_leader_frozen_past_its_lease_...` (gang-members mode): the leader is frozen (SIGSTOP)
//!   in the middle of a gang's release, the standby takes over, the gang no longer fits;
//!   resumed, the deposed leader writes nothing more (no gate removed, no nomination) and the
//!   gang stays gated until the new leader places it whole.
//! - `a_drain_evicts_the_leader_...`: the shipped PodDisruptionBudget on the replicas' pods and
//!   the API server's Eviction API: the leader's eviction is allowed and hands over while a gang
//!   is placed, the other replica's is refused (429) until a replacement is Ready.
//!
//! Not covered here (no kube-controller-manager, no kubelets in the harness), and played by the
//! tests instead: the Deployment controller (replicas started and stopped by hand, in its
//! order), the EndpointSlice controller and kube-proxy (the forwarder), the kubelet (probes,
//! pod status, SIGTERM on deletion) and the disruption controller (a budget's status computed
//! from the pods as it does). A real rollout's timing (image pulls, probe periods, endpoint
//! propagation, about a second in a real cluster against 100 ms here) is not measured.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use k8s_openapi::api::core::v1::Pod;
use muster_harness::api_proxy::{ApiProxy, Fault, Pattern, Rule};
use muster_harness::checks::metric;
use muster_harness::forward::http_post_json;
use muster_harness::timing;
use muster_harness::truth::TruthContext;
use muster_harness::{
    control_run_requested, k8s, muster_view_is_checked, ControlPlane, ControlPlaneOptions,
    Forwarder, KeyScheme, Muster, MusterOptions, NodeShape, PodBuilder, Progress, SchedulerOptions,
    Scope, Timer, CONTROL_TRUTH_WINDOW,
};

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");
const NS: &str = "ha";
/// Where the replicas' pod objects and the Lease live, as in the shipped manifests.
const MUSTER_NS: &str = "muster-system";
const LEADER_LABEL: &str = "muster.dev/leader";
/// Members of one gang are bound by concurrent API calls: a poll may fall between them
/// ([`muster_harness::timing::FAN_OUT`]).
const BINDING_GRACE: Duration = muster_harness::timing::FAN_OUT;

/// One muster process and the pod object it stands for.
struct Replica {
    pod: String,
    identity: String,
    muster: Muster,
}

struct Ha {
    replicas: Vec<Replica>,
    /// The Service's candidate endpoints: (pod, port) of every replica.
    behind: Arc<Mutex<Vec<(String, u16)>>>,
    /// The ports that were endpoints at the forwarder's last poll.
    endpoints: Arc<Mutex<Vec<u16>>>,
    front: Forwarder,
    /// Between muster-a and the API server, when the test cuts it off.
    a_to_api: Option<Forwarder>,
    /// Between muster-a and the API server, when the test delays and counts its requests.
    a_proxy: Option<ApiProxy>,
    cp: ControlPlane,
}

/// How muster-a reaches the API server.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum AToApi {
    /// Directly, with the admin kubeconfig.
    Direct,
    /// Through a TCP forwarder the test can cut ([`Ha::a_to_api`]).
    CutAble,
    /// With the shipped RBAC's ServiceAccount token, through an [`ApiProxy`] that delays and
    /// counts chosen requests ([`Ha::a_proxy`]).
    GangMembersThroughProxy,
}

/// The pod object a replica stands for: labelled like the Deployment's pods, and with a
/// scheduler name no scheduler serves, so it stays an API object nobody binds.
async fn create_replica_pod(cp: &ControlPlane, pod: &str) -> Result<()> {
    PodBuilder::new(MUSTER_NS, pod)
        .label("app.kubernetes.io/name", "muster")
        .scheduler_name("no-scheduler-runs-this")
        .create(&cp.client())
        .await?;
    Ok(())
}

fn replica_options(
    cp: &ControlPlane,
    pod: &str,
    identity: &str,
    kubeconfig: &Path,
) -> Result<MusterOptions> {
    let dir = cp.dir().join(identity);
    std::fs::create_dir_all(&dir)?;
    let mut o = MusterOptions::new(MUSTER, kubeconfig, &dir);
    // The shipped Deployment's election flags, its timings (the defaults) included.
    o.args = [
        "--leader-elect",
        "--leader-elect-lease-name=muster",
        "--leader-elect-lease-namespace",
        MUSTER_NS,
        "--leader-elect-identity",
        identity,
        "--pod-name",
        pod,
        "--pod-namespace",
        MUSTER_NS,
    ]
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

/// A filter call straight to one replica: `Ok(true)` if it decided — answered from its table:
/// `NodeNames`, or (the probe pod exists in no cluster, and only the watch adds pods) that it
/// has not seen the pod — `Ok(false)` if it refused as not the leader or does not answer.
async fn decides(port: u16) -> Result<bool> {
    let pod = r#"{"metadata":{"name":"probe","namespace":"ha","uid":"u-probe"},"spec":{"containers":[{"name":"c","image":"x","resources":{"requests":{"cpu":"100m"}}}]},"status":{"phase":"Pending"}}"#;
    let body = format!(r#"{{"Pod":{pod},"Nodes":null,"NodeNames":["node-0"]}}"#);
    let Ok((code, answer)) = http_post_json(port, "/filter", &body, Duration::from_secs(3)).await
    else {
        return Ok(false);
    };
    ensure!(code == 200, "filter: HTTP {code}: {answer}");
    // A standby, or a leader whose watches failed and list again (it decides nothing on a view
    // that may lack what changed meanwhile: cut off from the API server, it stops at once).
    if answer.contains("is not the leader")
        || answer.contains("is the standby")
        || answer.contains("again after its watch failed")
    {
        return Ok(false);
    }
    ensure!(
        answer.contains(r#""NodeNames":["node-0"]"#)
            || answer.contains("unknown pod ha/probe (uid u-probe): muster has not seen it"),
        "filter: {answer}"
    );
    Ok(true)
}

/// The replica pods that carry the leader label.
async fn labelled(cp: &ControlPlane) -> Result<Vec<String>> {
    let api: kube::Api<Pod> = kube::Api::namespaced(cp.client(), MUSTER_NS);
    let list = api
        .list_metadata(&kube::api::ListParams::default().labels(&format!("{LEADER_LABEL}=true")))
        .await?;
    let mut names: Vec<String> = list
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    Ok(names)
}

/// "Error scheduling pod; retrying" lines in kube-scheduler's log: scheduling cycles that failed
/// with an error — here, extender calls that failed or were refused.
fn scheduler_errors(cp: &ControlPlane) -> usize {
    cp.processes()
        .filter(|p| p.name().contains("scheduler"))
        .map(|p| {
            std::fs::read_to_string(p.log_path())
                .unwrap_or_default()
                .matches("Error scheduling pod; retrying")
                .count()
        })
        .sum()
}

impl Ha {
    /// muster-a starts first and takes the Lease; muster-b then stands by, Ready, having seen
    /// muster-a hold it; kube-scheduler calls the forwarder.
    async fn start(cut_able: bool) -> Result<Ha> {
        let a = if cut_able {
            AToApi::CutAble
        } else {
            AToApi::Direct
        };
        Self::start_with(a, &[]).await
    }

    /// [`start`](Self::start), the Service keeping the replicas of the `stale` pods among its
    /// endpoints, labelled or not, first in the turn ([`Forwarder::to_leader_with_stale`]).
    async fn start_with(a_to_api: AToApi, stale: &[&str]) -> Result<Ha> {
        Self::start_in(a_to_api, stale, Scope::GangMembers).await
    }

    /// [`start`](Self::start) with every pod through muster (no policy, `--scope=every-pod`,
    /// scheduler-config/muster-every-pod.yaml), for what only that mode does: seats held for
    /// members not created yet, kube-scheduler's calls reaching the standby.
    async fn start_every_pod(a_to_api: AToApi, stale: &[&str]) -> Result<Ha> {
        Self::start_in(a_to_api, stale, Scope::EveryPod).await
    }

    async fn start_in(a_to_api: AToApi, stale: &[&str], scope: Scope) -> Result<Ha> {
        let cp = ControlPlane::start(ControlPlaneOptions::default()).await?;
        let client = cp.client();
        k8s::create_namespace(&client, NS).await?;
        k8s::create_namespace(&client, MUSTER_NS).await?;
        for pod in ["muster-a", "muster-b"] {
            create_replica_pod(&cp, pod).await?;
        }
        // The shipped install, as `Cluster::start` has it: gang members marked and gated by the
        // admission policy (without muster, the control run, it is not applied, and gang members
        // are plain pods kube-scheduler schedules alone).
        if scope == Scope::GangMembers {
            muster_harness::policy::install_unless_control_run(&client).await?;
        }
        let a_proxy = if a_to_api == AToApi::GangMembersThroughProxy {
            let sa = muster_harness::rbac::service_account_kubeconfig(
                &client,
                cp.kubeconfig_path(),
                cp.dir(),
                24,
            )
            .await?;
            Some(ApiProxy::start(&sa).await?)
        } else {
            None
        };
        let a_to_api = if a_to_api == AToApi::CutAble {
            let addr = cp
                .apiserver_url()
                .trim_start_matches("https://")
                .parse()
                .context("API server address")?;
            Some(Forwarder::to(addr).await?)
        } else {
            None
        };
        let a_kubeconfig = match (&a_to_api, &a_proxy) {
            (Some(f), _) => kubeconfig_through(&cp, f.port())?,
            (None, Some(p)) => p.kubeconfig(cp.dir(), "muster-a-through-proxy")?,
            (None, None) => cp.kubeconfig_path().to_path_buf(),
        };
        let with_scope = |mut o: MusterOptions| {
            o.args.push(scope.flag().to_string());
            o
        };
        let a = Muster::start(with_scope(replica_options(
            &cp,
            "muster-a",
            "muster-a",
            &a_kubeconfig,
        )?))
        .await?;
        muster_harness::wait_for("muster-a to lead", Duration::from_secs(30), || async {
            Ok(if decides(a.port()).await? {
                Progress::Done(())
            } else {
                Progress::NotYet(a.get("/readyz").await?.1)
            })
        })
        .await?;
        let b = Muster::start(with_scope(replica_options(
            &cp,
            "muster-b",
            "muster-b",
            cp.kubeconfig_path(),
        )?))
        .await?;
        let behind = Arc::new(Mutex::new(vec![
            ("muster-a".to_string(), a.port()),
            ("muster-b".to_string(), b.port()),
        ]));
        let (front, endpoints) = Forwarder::to_leader_with_stale(
            client.clone(),
            MUSTER_NS,
            behind.clone(),
            stale.iter().map(|s| s.to_string()).collect(),
        )
        .await?;
        let mut ha = Ha {
            replicas: vec![
                Replica {
                    pod: "muster-a".into(),
                    identity: "muster-a".into(),
                    muster: a,
                },
                Replica {
                    pod: "muster-b".into(),
                    identity: "muster-b".into(),
                    muster: b,
                },
            ],
            behind,
            endpoints,
            front,
            a_to_api,
            a_proxy,
            cp,
        };
        ha.wait_standby(1, "muster-a").await?;
        let config = match scope {
            Scope::GangMembers => "muster-as-default-scheduler.yaml",
            Scope::EveryPod => "muster-every-pod.yaml",
        };
        let so = SchedulerOptions {
            extender_base_url: Some(ha.front.url()),
            without_extenders: control_run_requested(),
            ..SchedulerOptions::default().with_repo_config(config)
        };
        ha.cp.start_scheduler(so).await?;
        for i in 0..4 {
            k8s::add_node(&client, &format!("node-{i}"), &NodeShape::cpu("2")).await?;
        }
        Ok(ha)
    }

    fn port(&self, i: usize) -> u16 {
        self.replicas[i].muster.port()
    }

    /// Waits until replica `i` is Ready and stands by, naming `leader` as the Lease holder.
    async fn wait_standby(&self, i: usize, leader: &str) -> Result<()> {
        let r = &self.replicas[i];
        let want = format!("{leader} holds Lease {MUSTER_NS}/muster");
        muster_harness::wait_for(
            &format!("{} to stand by, Ready, naming {leader}", r.identity),
            Duration::from_secs(30),
            || async {
                let (code, body) = r.muster.get("/readyz").await?;
                Ok(if code == 200 && body.contains(&want) {
                    Progress::Done(())
                } else {
                    Progress::NotYet(format!("HTTP {code}: {body}"))
                })
            },
        )
        .await
    }

    /// Waits until only replica `i`'s pod is labelled and it alone is the Service's endpoint.
    async fn wait_routed_to(&self, i: usize, within: Duration) -> Result<()> {
        let want = vec![self.replicas[i].pod.clone()];
        let port = self.port(i);
        muster_harness::wait_for(
            &format!(
                "the Service to route to {} alone",
                self.replicas[i].identity
            ),
            within,
            || async {
                let labelled = labelled(&self.cp).await?;
                let endpoints = self.endpoints.lock().unwrap().clone();
                Ok(if labelled == want && endpoints == vec![port] {
                    Progress::Done(())
                } else {
                    Progress::NotYet(format!("labelled {labelled:?}, endpoints {endpoints:?}"))
                })
            },
        )
        .await
    }

    /// Starts a new replica process for the pod object `pod` (created unless it exists), with
    /// the given identity, and puts it behind the Service.
    async fn add_replica(&mut self, pod: &str, identity: &str) -> Result<usize> {
        let api: kube::Api<Pod> = kube::Api::namespaced(self.cp.client(), MUSTER_NS);
        if api.get_opt(pod).await?.is_none() {
            create_replica_pod(&self.cp, pod).await?;
        }
        let m = Muster::start(replica_options(
            &self.cp,
            pod,
            identity,
            self.cp.kubeconfig_path(),
        )?)
        .await?;
        let mut behind = self.behind.lock().unwrap();
        behind.retain(|(p, _)| p != pod);
        behind.push((pod.to_string(), m.port()));
        drop(behind);
        self.replicas.push(Replica {
            pod: pod.into(),
            identity: identity.into(),
            muster: m,
        });
        Ok(self.replicas.len() - 1)
    }

    /// What the kubelet does when a pod is deleted: SIGTERM, and the process exits within the
    /// termination grace period. Returns when it has exited.
    async fn terminate(&self, i: usize) -> Result<Instant> {
        let pid = self.replicas[i].muster.pid().context("replica runs")?;
        ensure!(muster_harness::process::signal(pid, 15), "SIGTERM");
        let stopped = Instant::now();
        self.wait_exit(i).await?;
        Ok(stopped)
    }

    /// Waits until replica `i`'s process has exited (30 s: the Deployment's grace period).
    async fn wait_exit(&self, i: usize) -> Result<()> {
        let pid = self.replicas[i].muster.pid().context("replica runs")?;
        muster_harness::wait_for(
            &format!("{} to exit", self.replicas[i].identity),
            Duration::from_secs(30),
            || async {
                Ok(if muster_harness::process::pid_alive(pid) {
                    Progress::NotYet("running".into())
                } else {
                    Progress::Done(())
                })
            },
        )
        .await
    }

    /// The one running replica that decides (asked directly, each replica in turn); errors if
    /// two do (never two deciders), polls until one does.
    async fn leader(&self) -> Result<usize> {
        muster_harness::wait_for("a replica to decide", Duration::from_secs(30), || async {
            let mut deciding = Vec::new();
            for (i, r) in self.replicas.iter().enumerate() {
                let running = r
                    .muster
                    .pid()
                    .is_some_and(muster_harness::process::pid_alive);
                if running && decides(r.muster.port()).await? {
                    deciding.push(i);
                }
            }
            match deciding[..] {
                [] => Ok(Progress::NotYet("no replica decides".into())),
                [i] => Ok(Progress::Done(i)),
                _ => bail!("replicas {deciding:?} all decide"),
            }
        })
        .await
    }

    fn logs(&self) -> String {
        let mut s = String::new();
        for r in &self.replicas {
            s.push_str(&format!("{}:\n{}\n", r.identity, r.muster.log_tail(30)));
        }
        s.push_str(&self.cp.log_tails(20));
        s
    }
}

fn member(gang: &str, i: u32, cpu: &str) -> PodBuilder {
    PodBuilder::new(NS, &format!("{gang}-{i}"))
        .gang(KeyScheme::Muster, gang, 3)
        .cpu(cpu)
}

/// Per gang of `gangs`: how many of its 3 members are bound.
fn bound_per_gang(bound: &BTreeMap<String, String>, gangs: &[String]) -> Vec<usize> {
    gangs
        .iter()
        .map(|g| {
            (0..3)
                .filter(|i| bound.contains_key(&format!("{g}-{i}")))
                .count()
        })
        .collect()
}

/// Watches gangs for being partly bound beyond [`BINDING_GRACE`] (never-half) and notes when
/// each is placed whole.
struct PartialWatch {
    since: BTreeMap<String, Instant>,
    placed: BTreeMap<String, Instant>,
    /// The first violation seen, for a watch run in a task.
    failed: Option<String>,
}

impl PartialWatch {
    fn new() -> Self {
        PartialWatch {
            since: BTreeMap::new(),
            placed: BTreeMap::new(),
            failed: None,
        }
    }

    fn observe(&mut self, bound: &BTreeMap<String, String>, gangs: &[String]) -> Result<()> {
        let now = Instant::now();
        for (g, n) in gangs.iter().zip(bound_per_gang(bound, gangs)) {
            match n {
                0 => {
                    self.since.remove(g);
                }
                3 => {
                    self.since.remove(g);
                    self.placed.entry(g.clone()).or_insert(now);
                }
                _ => {
                    let since = *self.since.entry(g.clone()).or_insert(now);
                    if now - since > BINDING_GRACE {
                        muster_harness::bail_truth!(
                            "gang {NS}/{g} partly bound ({n}/3) for {:?}: {bound:?}",
                            now - since
                        );
                    }
                }
            }
        }
        Ok(())
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

#[tokio::test]
async fn both_replicas_are_ready_and_the_service_routes_to_the_leaders_labelled_pod() -> Result<()>
{
    let _t = Timer("ha_routing", Instant::now());
    let ha = Ha::start(false).await?;
    let client = ha.cp.client();
    let r = async {
        for i in 0..2 {
            let (code, body) = ha.replicas[i].muster.get("/readyz").await?;
            ensure!(code == 200, "{} not Ready: {body}", ha.replicas[i].identity);
        }
        ensure!(decides(ha.port(0)).await?, "muster-a leads");
        ensure!(!decides(ha.port(1)).await?, "muster-b stands by");
        ha.wait_routed_to(0, Duration::from_secs(10)).await?;
        for i in 0..3 {
            member("routed", i, "500m").create(&client).await?;
        }
        muster_harness::wait_for("gang ha/routed placed", Duration::from_secs(60), || async {
            let bound = k8s::bound_pods(&client, NS).await?;
            Ok(if bound.len() == 3 {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("{bound:?}"))
            })
        })
        .await?;
        // Placed by the leader, through the Service, and not by the standby.
        let (_, a) = ha.replicas[0].muster.get("/metrics").await?;
        let (_, b) = ha.replicas[1].muster.get("/metrics").await?;
        ensure!(
            a.contains("\nmuster_gangs_placed_total 1\n"),
            "muster-a did not place the gang: {a}"
        );
        ensure!(
            b.contains("\nmuster_gangs_placed_total 0\n"),
            "muster-b placed a gang: {b}"
        );
        ensure!(labelled(&ha.cp).await? == vec!["muster-a".to_string()]);
        Ok(())
    }
    .await;
    if r.is_err() {
        eprintln!("{}", ha.logs());
    }
    r
}

/// `muster_requests_total{verb,outcome}` of one replica (0 when it has none yet).
fn requests(metrics: &BTreeMap<String, f64>, verb: &str, outcome: &str) -> f64 {
    metrics
        .get(&format!(
            "muster_requests_total{{verb=\"{verb}\",outcome=\"{outcome}\"}}"
        ))
        .copied()
        .unwrap_or(0.0)
}

/// The single decider under kube-scheduler's own traffic (kube-scheduler-semantics,
/// never-half): the Service's endpoints lag the label, so kube-scheduler's calls reach the
/// standby as well as the leader (its first connection goes to the standby). Gangs `left` and
/// `right` of three are created whole, gang `late` with two of its three members first. The
/// leader decides every call: `late`'s two members hold seats and nothing of it is bound until
/// its third member comes, then every gang is placed whole. The standby refuses every call it
/// receives, as designed (an `Error` kube-scheduler retries, never a decision): none answered
/// `ok`, no gang placed, and kube-scheduler's log carries its refusal. kube-scheduler alone
/// (the control run) binds `late`'s two members at once: a partial gang, on cluster truth.
#[tokio::test]
async fn under_kube_schedulers_traffic_only_the_leader_decides_and_every_gang_is_placed_whole(
) -> Result<()> {
    let _t = Timer("single_decider_under_traffic", Instant::now());
    // Every pod through muster: late's seats for a member not created yet, and kube-scheduler
    // calling the standby for them, are that mode's.
    let ha = Ha::start_every_pod(AToApi::Direct, &["muster-b"]).await?;
    let client = ha.cp.client();
    let r = async {
        ensure!(decides(ha.port(0)).await?, "muster-a should lead");
        ensure!(!decides(ha.port(1)).await?, "muster-b should stand by");
        let (a, b) = (ha.port(0), ha.port(1));
        // Both replicas endpoints, the standby first in the turn: kube-scheduler's first call
        // (no pod existed before) reaches the standby.
        muster_harness::wait_for(
            "the Service to list the standby, then the leader",
            Duration::from_secs(10),
            || async {
                let e = ha.endpoints.lock().unwrap().clone();
                Ok(if e == vec![b, a] {
                    Progress::Done(())
                } else {
                    Progress::NotYet(format!("endpoints {e:?}"))
                })
            },
        )
        .await?;
        let gangs: Vec<String> = ["left", "right", "late"].map(String::from).to_vec();
        for g in &gangs[..2] {
            for i in 0..3 {
                member(g, i, "500m").create(&client).await?;
            }
        }
        for i in 0..2 {
            member("late", i, "500m").create(&client).await?;
        }
        let late_created = Instant::now();
        let mut watch = PartialWatch::new();
        let deadline = Instant::now() + Duration::from_secs(90);
        // Phase 1: left and right placed whole; late's two members seated by the leader,
        // nothing of late bound (below its quorum every bound member is half a gang).
        loop {
            let bound = k8s::bound_pods(&client, NS).await?;
            watch.observe(&bound, &gangs)?;
            let late: Vec<&String> = bound.keys().filter(|k| k.starts_with("late-")).collect();
            muster_harness::ensure_truth!(
                late.is_empty(),
                "gang {NS}/late bound below its quorum of 3 ({late:?}): {bound:?}"
            );
            let whole = watch.placed.contains_key("left") && watch.placed.contains_key("right");
            let seated = if muster_view_is_checked() {
                ha.replicas[0]
                    .muster
                    .gang(NS, "late")
                    .await?
                    .is_some_and(|g| g.count("seated") == 2)
            } else {
                // A control run does not read muster's view: late's truth (none bound) is
                // decided within a scheduling cycle of its members' creation.
                late_created.elapsed() >= CONTROL_TRUTH_WINDOW
            };
            if whole && seated {
                break;
            }
            muster_harness::ensure_truth!(
                Instant::now() < deadline,
                "left and right not placed whole (or late not seated) within 90 s: {bound:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        ensure!(
            muster_view_is_checked(),
            "control run: late's seats are muster's view; the cluster truth (none of late bound) held"
        );
        // Phase 2: late's last member; every gang placed whole.
        member("late", 2, "500m").create(&client).await?;
        while watch.placed.len() < gangs.len() {
            let bound = k8s::bound_pods(&client, NS).await?;
            watch.observe(&bound, &gangs)?;
            muster_harness::ensure_truth!(
                Instant::now() < deadline,
                "not every gang placed whole within 90 s: {bound:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        k8s::check_no_overcommit(&client)
            .await?
            .map_err(anyhow::Error::msg)?;

        // Only the leader decided: every decision in its metrics, none in the standby's.
        let leader = ha.replicas[0].muster.metrics().await?;
        let standby = ha.replicas[1].muster.metrics().await?;
        for verb in ["filter", "bind", "preempt", "prioritize"] {
            let ok = requests(&standby, verb, "ok");
            ensure!(ok == 0.0, "the standby answered {ok} {verb} calls with a decision");
        }
        let refused: f64 = ["filter", "bind", "preempt", "prioritize"]
            .iter()
            .map(|v| requests(&standby, v, "refused"))
            .sum();
        ensure!(
            refused >= 1.0,
            "the standby received none of kube-scheduler's calls (the first should have gone to it)"
        );
        ensure!(
            metric(&standby, "muster_gangs_placed_total")? == 0.0,
            "the standby placed a gang"
        );
        ensure!(
            metric(&leader, "muster_gangs_placed_total")? == 3.0,
            "the leader placed {} gangs, not 3",
            metric(&leader, "muster_gangs_placed_total")?
        );
        // Each member filtered by the leader at least once; each gang bound by the leader at
        // the bind call that completed its quorum (a member whose own call comes after is
        // answered that it is bound already, so not every member's call is `ok`).
        let (filters, binds) = (
            requests(&leader, "filter", "ok"),
            requests(&leader, "bind", "ok"),
        );
        ensure!(
            filters >= 9.0 && binds >= 3.0,
            "the leader decided {filters} filter calls (9 members) and {binds} bind calls (3 gangs)"
        );
        // kube-scheduler heard the standby's refusal (and retried on the leader).
        let said = ha
            .cp
            .processes()
            .filter(|p| p.name().contains("scheduler"))
            .map(|p| std::fs::read_to_string(p.log_path()).unwrap_or_default())
            .any(|log| log.contains("muster replica muster-b is the standby, not the leader"));
        ensure!(said, "kube-scheduler's log has no refusal of the standby");
        eprintln!(
            "single decider: the standby refused {refused} calls; the leader decided {filters} filter, {binds} bind calls; kube-scheduler logged {} failed cycles",
            scheduler_errors(&ha.cp)
        );
        ensure!(
            labelled(&ha.cp).await? == vec!["muster-a".to_string()],
            "only the leader's pod is labelled"
        );
        Ok(())
    }
    .await;
    if r.is_err() {
        eprintln!("{}", ha.logs());
    }
    r
}

/// How the leader is stopped.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Stop {
    /// SIGKILL: no chance to release the Lease or remove its label.
    Kill,
    /// SIGTERM, as the kubelet stops a deleted pod (a drain's eviction, a rollout).
    Term,
}

/// One stop of the leader `leader` with `standby` standing by, while one gang is half seated on
/// the leader and another is being created: seconds from the stop to the next gang placed, and
/// to the standby deciding. Never both decide, no gang partly bound (never-half).
async fn one_failover(
    ha: &mut Ha,
    run: usize,
    leader: usize,
    standby: usize,
    stop: Stop,
) -> Result<(f64, f64)> {
    let client = ha.cp.client();
    let one = format!("one-{run}");
    let two = format!("two-{run}");
    // Gang one is half seated on the leader: two of its three members exist.
    for i in 0..2 {
        member(&one, i, "500m").create(&client).await?;
    }
    let leader_muster = &ha.replicas[leader].muster;
    muster_harness::wait_for(
        &format!(
            "gang ha/{one} to hold seats on {}",
            ha.replicas[leader].identity
        ),
        Duration::from_secs(60),
        || async {
            let bound = k8s::bound_pods(&client, NS).await?;
            muster_harness::ensure_truth!(
                !bound.keys().any(|k| k.starts_with(&format!("{one}-"))),
                "a half gang was bound: {bound:?}"
            );
            let g = leader_muster.gang(NS, &one).await?;
            Ok(match g {
                Some(g) if g.members.iter().filter(|m| m.state == "seated").count() == 2 => {
                    Progress::Done(())
                }
                other => Progress::NotYet(format!("{other:?}")),
            })
        },
    )
    .await?;
    // Gang two is being created while the leader dies.
    let creator = {
        let client = client.clone();
        let two = two.clone();
        tokio::spawn(async move {
            for i in 0..3 {
                member(&two, i, "500m").create(&client).await?;
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Ok::<_, anyhow::Error>(())
        })
    };
    // The leader is stopped once gang two has begun to exist (its first member created).
    let first_of_two = format!("{two}-0");
    muster_harness::wait_for(
        &format!("{first_of_two} created"),
        Duration::from_secs(30),
        || async {
            let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), NS);
            Ok(match pods.get_opt(&first_of_two).await? {
                Some(_) => Progress::Done(()),
                None => Progress::NotYet("not yet".into()),
            })
        },
    )
    .await?;
    let leader_port = ha.port(leader);
    match stop {
        Stop::Kill => ha.replicas[leader].muster.kill_hard(),
        Stop::Term => {
            let pid = ha.replicas[leader]
                .muster
                .pid()
                .context("the leader runs")?;
            ensure!(muster_harness::process::signal(pid, 15), "SIGTERM");
        }
    }
    let killed = Instant::now();
    eprintln!(
        "run {run}: {stop:?} {} (the leader)",
        ha.replicas[leader].identity
    );
    // The last member of gang one, while the poll below runs from the stop on.
    let last = {
        let client = client.clone();
        let one = one.clone();
        tokio::spawn(async move { member(&one, 2, "500m").create(&client).await })
    };

    let gangs = vec![one.clone(), two.clone()];
    let mut watch = PartialWatch::new();
    let deadline = killed + Duration::from_secs(120);
    let mut decides_at: Option<Duration> = None;
    let standby_port = ha.port(standby);
    while watch.placed.len() < 2 {
        muster_harness::ensure_truth!(
            Instant::now() < deadline,
            "both gangs not placed 120 s after the kill: {:?}",
            k8s::bound_pods(&client, NS).await?
        );
        let (old_decides, new_decides) = tokio::join!(decides(leader_port), decides(standby_port));
        let (old_decides, new_decides) = (old_decides?, new_decides?);
        ensure!(
            !(old_decides && new_decides),
            "both replicas decided {:?} after the {stop:?}",
            killed.elapsed()
        );
        if decides_at.is_none() && new_decides {
            decides_at = Some(killed.elapsed());
        }
        let bound = k8s::bound_pods(&client, NS).await?;
        watch.observe(&bound, &gangs)?;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    creator.await??;
    last.await??;
    let first = watch.placed.values().min().copied().unwrap() - killed;
    let decides_at = decides_at.context("placed, so the standby decided")?;
    eprintln!(
        "FAILOVER run {run}: {stop:?} → {} decides {:.2} s → next gang placed {:.2} s; {one} at {:.2} s, {two} at {:.2} s",
        ha.replicas[standby].identity,
        decides_at.as_secs_f64(),
        first.as_secs_f64(),
        (watch.placed[&one] - killed).as_secs_f64(),
        (watch.placed[&two] - killed).as_secs_f64(),
    );
    // The old leader's label is gone: it removed it (SIGTERM), or, dead, could not and the new
    // leader cleared it (SIGKILL).
    ha.wait_routed_to(standby, Duration::from_secs(10)).await?;
    k8s::check_no_overcommit(&client)
        .await?
        .map_err(anyhow::Error::msg)?;
    // Room for the next run.
    for g in &gangs {
        for i in 0..3 {
            k8s::delete_pod(&client, NS, &format!("{g}-{i}")).await?;
        }
    }
    Ok((first.as_secs_f64(), decides_at.as_secs_f64()))
}

fn runs() -> usize {
    std::env::var("MUSTER_HA_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
}

/// `runs` stops of the leader in a row, the stopped replica restarted after each as the new
/// standby (its container restarted in the same pod, a new identity): seconds from each stop
/// to the next gang placed, and to the standby deciding, both sorted.
async fn failovers(ha: &mut Ha, runs: usize, stop: Stop) -> Result<(Vec<f64>, Vec<f64>)> {
    let mut placed = Vec::new();
    let mut decided = Vec::new();
    let (mut leader, mut standby) = (0usize, 1usize);
    for run in 1..=runs {
        let (p, d) = one_failover(ha, run, leader, standby, stop).await?;
        placed.push(p);
        decided.push(d);
        if stop == Stop::Term {
            ha.wait_exit(leader).await?;
        }
        let pod = ha.replicas[leader].pod.clone();
        let identity = format!("{pod}-{}", run + 1);
        let new_leader_identity = ha.replicas[standby].identity.clone();
        let restarted = ha.add_replica(&pod, &identity).await?;
        ha.wait_standby(restarted, &new_leader_identity).await?;
        leader = standby;
        standby = restarted;
    }
    let (_, metrics) = ha.replicas[leader].muster.get("/metrics").await?;
    ensure!(
        metrics.contains("\nmuster_leader 1\n")
            && metrics.contains("\nmuster_leader_takeovers_total 1\n"),
        "the last leader's metrics do not show its one takeover: {metrics}"
    );
    placed.sort_by(f64::total_cmp);
    decided.sort_by(f64::total_cmp);
    eprintln!(
        "FAILOVER over {runs} runs ({stop:?}): → next gang placed p50 {:.2} s, max {:.2} s; → standby decides p50 {:.2} s, max {:.2} s; placed {placed:.2?}; decides {decided:.2?}",
        percentile(&placed, 0.5),
        placed[placed.len() - 1],
        percentile(&decided, 0.5),
        decided[decided.len() - 1],
    );
    Ok((placed, decided))
}

#[tokio::test]
async fn sigkill_of_the_leader_leaves_no_partial_gang_and_the_standby_places_both() -> Result<()> {
    let _t = Timer("sigkill_of_the_leader", Instant::now());
    // Every pod through muster: the fail-overs time gangs seated with room held for a member
    // not created yet; the shipped mode's take-over mid-release is tested below.
    let mut ha = Ha::start_every_pod(AToApi::Direct, &[]).await?;
    let r = async {
        let (placed, _) = failovers(&mut ha, runs(), Stop::Kill).await?;
        // The shipped timings take the Lease before kube-scheduler retries the calls that
        // failed meanwhile a third time (`timing::FAILOVER`).
        ensure!(
            placed[placed.len() - 1] <= timing::FAILOVER.as_secs_f64(),
            "a failover took {:.1} s (≤ {:?} with the shipped timings): {placed:?}",
            placed[placed.len() - 1],
            timing::FAILOVER
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

#[tokio::test]
async fn a_leader_cut_off_from_the_api_server_stops_deciding_before_the_standby_takes_over(
) -> Result<()> {
    let _t = Timer("leader_cut_off", Instant::now());
    let ha = Ha::start(true).await?;
    let r = async {
        let (a, b) = (ha.port(0), ha.port(1));
        ensure!(decides(a).await?, "muster-a should lead");
        ensure!(!decides(b).await?, "muster-b should stand by");
        ha.a_to_api.as_ref().unwrap().cut();
        let cut = Instant::now();
        eprintln!("cut muster-a off from the API server");
        let mut a_stopped: Option<Duration> = None;
        let mut b_took_over: Option<Duration> = None;
        // When the last call muster-a decided was sent: it decided after that.
        let mut a_last_decided: Option<Duration> = None;
        while a_stopped.is_none() || b_took_over.is_none() {
            let now = cut.elapsed();
            ensure!(
                now < Duration::from_secs(60),
                "after 60 s: muster-a stopped {a_stopped:?}, muster-b took over {b_took_over:?}"
            );
            let a_sent = cut.elapsed();
            let a = decides(a).await?;
            if a {
                a_last_decided = Some(a_sent);
            }
            let b = decides(b).await?;
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
            "CUT-OFF: muster-a last decided a call sent {:.2} s after the cut, refused from {:.2} s; muster-b took over {:.2} s after it",
            a_last_decided.unwrap_or_default().as_secs_f64(),
            a_stopped.as_secs_f64(),
            b_took_over.as_secs_f64()
        );
        ensure!(
            a_stopped < b_took_over,
            "muster-a stopped at {a_stopped:?}, after muster-b took over at {b_took_over:?}"
        );
        // Its last renewal started before the cut, so it may decide until its renew deadline
        // after the cut at most: a call sent later was refused.
        ensure!(
            a_last_decided.is_none_or(|t| t <= timing::RENEW_DEADLINE),
            "muster-a decided a call sent {a_last_decided:?} after the cut: past its {:?} renew \
             deadline",
            timing::RENEW_DEADLINE
        );
        let (code, body) = ha.replicas[0].muster.get("/readyz").await?;
        ensure!(
            body.contains("muster-a is not the leader"),
            "muster-a /readyz: HTTP {code}: {body}"
        );
        // muster-a could not remove its own label; muster-b did.
        ha.wait_routed_to(1, Duration::from_secs(10)).await?;
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
    // Every pod through muster: the fail-overs time gangs seated with room held for a member
    // not created yet; the shipped mode's take-over mid-release is tested below.
    let mut ha = Ha::start_every_pod(AToApi::Direct, &[]).await?;
    let r = async {
        let (_, decided) = failovers(&mut ha, runs(), Stop::Term).await?;
        // Without the release the standby would wait out the lease duration; with it, one
        // retry period (up to 600 ms with jitter) and change (`timing::HANDOVER`).
        ensure!(
            decided[decided.len() - 1] <= timing::HANDOVER.as_secs_f64(),
            "a hand-over after SIGTERM took {:.2} s (≤ {:?} expected): {decided:?}",
            decided[decided.len() - 1],
            timing::HANDOVER
        );
        let lease = kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
            ha.cp.client(),
            MUSTER_NS,
        )
        .get("muster")
        .await?;
        let holder = lease.spec.and_then(|s| s.holder_identity);
        let leader = ha.leader().await?;
        ensure!(
            holder.as_deref() == Some(ha.replicas[leader].identity.as_str()),
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

#[tokio::test]
async fn a_rolling_replacement_of_both_replicas_under_a_stream_of_gangs_places_every_gang_whole(
) -> Result<()> {
    let _t = Timer("rolling_replacement", Instant::now());
    let mut ha = Ha::start(false).await?;
    let client = ha.cp.client();
    let r = async {
        let errors_before = scheduler_errors(&ha.cp);
        // A gang every 700 ms until told to stop: two members at once, the third four gangs
        // (2.8 s) later, so a gang is partly created across the hand-overs and bound only
        // whole (never-half). `created` lists every gang begun.
        let created: Arc<Mutex<Vec<String>>> = Arc::default();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let stream = {
            let client = client.clone();
            let created = created.clone();
            tokio::spawn(async move {
                const LAG: usize = 4;
                let mut n = 0usize;
                while !*stopped.borrow() {
                    let g = format!("s-{n}");
                    for i in 0..2 {
                        member(&g, i, "50m").create(&client).await?;
                    }
                    created.lock().unwrap().push(g);
                    if n >= LAG {
                        member(&format!("s-{}", n - LAG), 2, "50m")
                            .create(&client)
                            .await?;
                    }
                    n += 1;
                    tokio::time::sleep(Duration::from_millis(700)).await;
                }
                for k in n.saturating_sub(LAG)..n {
                    member(&format!("s-{k}"), 2, "50m").create(&client).await?;
                }
                Ok::<_, anyhow::Error>(())
            })
        };
        let watch = Arc::new(Mutex::new(PartialWatch::new()));
        let (stop_watch, watching) = tokio::sync::watch::channel(false);
        let watcher = {
            let client = client.clone();
            let created = created.clone();
            let watch = watch.clone();
            tokio::spawn(async move {
                while !*watching.borrow() {
                    let gangs = created.lock().unwrap().clone();
                    let bound = k8s::bound_pods(&client, NS).await?;
                    let seen = {
                        let mut w = watch.lock().unwrap();
                        let seen = w.observe(&bound, &gangs);
                        if let Err(e) = &seen {
                            w.failed = Some(e.to_string());
                        }
                        seen
                    };
                    seen?;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Ok::<_, anyhow::Error>(())
            })
        };
        // The rollout starts once the stream is under way: a gang placed.
        muster_harness::wait_for("a gang of the stream placed", Duration::from_secs(60), || async {
            let w = watch.lock().unwrap();
            if let Some(e) = &w.failed {
                bail!("{e}");
            }
            let placed = w.placed.len();
            Ok(if placed > 0 {
                Progress::Done(())
            } else {
                Progress::NotYet("none placed yet".into())
            })
        })
        .await?;
        // The Deployment's rollout: a new pod first (maxSurge 1), Ready; then an old one goes
        // (maxUnavailable 0) and its pod is deleted. muster-a, the leader, goes first, then
        // muster-b, whichever part it plays by then.
        let mut handovers = 0;
        for (old, new_pod) in [(0usize, "muster-c"), (1, "muster-d")] {
            let leader = ha.leader().await?;
            let leader_identity = ha.replicas[leader].identity.clone();
            let new = ha.add_replica(new_pod, new_pod).await?;
            ha.wait_standby(new, &leader_identity).await?;
            let placed_before = watch.lock().unwrap().placed.len();
            let stopped_at = ha.terminate(old).await?;
            k8s::delete_pod(&client, MUSTER_NS, &ha.replicas[old].pod).await?;
            if old != leader {
                ensure!(
                    decides(ha.port(leader)).await?,
                    "{leader_identity} stopped deciding when a standby was stopped"
                );
                eprintln!(
                    "ROLL: SIGTERM {} (a standby): {leader_identity} leads on",
                    ha.replicas[old].identity
                );
                continue;
            }
            handovers += 1;
            let (taker, decided) = muster_harness::wait_for(
                "a replica to take over",
                Duration::from_secs(30),
                || async {
                    let i = ha.leader().await?;
                    Ok(Progress::Done((i, stopped_at.elapsed())))
                },
            )
            .await?;
            let decided_at = stopped_at + decided;
            let next_placed = muster_harness::wait_for(
                "the next gang placed after the hand-over",
                Duration::from_secs(60),
                || async {
                    let w = watch.lock().unwrap();
                    if let Some(e) = &w.failed {
                        bail!("{e}");
                    }
                    let after = w.placed.values().filter(|t| **t > decided_at).min().copied();
                    Ok(match after {
                        Some(t) => Progress::Done(t - stopped_at),
                        None => Progress::NotYet(format!("{} placed", w.placed.len())),
                    })
                },
            )
            .await?;
            ha.wait_routed_to(taker, Duration::from_secs(10)).await?;
            let during = watch.lock().unwrap().placed.len() - placed_before;
            eprintln!(
                "ROLL: SIGTERM {leader_identity} (the leader) → {} decides {:.2} s → next gang placed by it {:.2} s ({during} gangs placed since the SIGTERM)",
                ha.replicas[taker].identity,
                decided.as_secs_f64(),
                next_placed.as_secs_f64()
            );
            ensure!(
                decided <= timing::HANDOVER,
                "hand-over took {decided:?} (≤ {:?} expected)",
                timing::HANDOVER
            );
        }
        ensure!(handovers >= 1, "the leader was stopped, so it handed over");
        tokio::time::sleep(Duration::from_secs(3)).await;
        stop.send(true)?;
        stream.await??;
        let gangs = created.lock().unwrap().clone();
        muster_harness::wait_for(
            "every gang of the stream placed",
            Duration::from_secs(90),
            || async {
                let w = watch.lock().unwrap();
                if let Some(e) = &w.failed {
                    bail!("{e}");
                }
                let placed = w.placed.len();
                Ok(if placed == gangs.len() {
                    Progress::Done(())
                } else {
                    Progress::NotYet(format!("{placed} of {} placed", gangs.len()))
                })
            },
        )
        .await
        .truth()?;
        stop_watch.send(true)?;
        watcher.await??;
        let errors = scheduler_errors(&ha.cp) - errors_before;
        eprintln!(
            "ROLL: {} gangs placed whole, 0 partial, {errors} scheduling cycles failed with an error (extender calls refused or unanswered) during the rollout",
            gangs.len()
        );
        k8s::check_no_overcommit(&client)
                .await?
                .map_err(anyhow::Error::msg)?;
        Ok(())
    }
    .await;
    if r.is_err() {
        eprintln!("{}", ha.logs());
    }
    r
}

/// What the kubelet reports for a replica's pod: Running, and Ready as its `/readyz` says.
async fn report_status(cp: &ControlPlane, pod: &str, ready: bool) -> Result<()> {
    let api: kube::Api<Pod> = kube::Api::namespaced(cp.client(), MUSTER_NS);
    let status = serde_json::json!({"status": {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
    }});
    api.patch_status(
        pod,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&status),
    )
    .await?;
    Ok(())
}

/// What the disruption controller computes for the PodDisruptionBudget from the pods it
/// selects: with `maxUnavailable`, the Deployment's `replicas` expected, the Ready pods not being
/// deleted healthy, and one disruption allowed per healthy pod above `replicas − maxUnavailable`.
async fn compute_pdb_status(cp: &ControlPlane, replicas: i32) -> Result<i32> {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    let pdbs: kube::Api<PodDisruptionBudget> = kube::Api::namespaced(cp.client(), MUSTER_NS);
    let pdb = pdbs.get("muster").await?;
    let spec = pdb.spec.clone().context("PDB spec")?;
    let max_unavailable = match spec.max_unavailable {
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n)) => n,
        other => bail!("the shipped PDB should set maxUnavailable as a number: {other:?}"),
    };
    let selector = spec
        .selector
        .and_then(|s| s.match_labels)
        .context("PDB selector")?
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let pods: kube::Api<Pod> = kube::Api::namespaced(cp.client(), MUSTER_NS);
    let healthy = pods
        .list(&kube::api::ListParams::default().labels(&selector))
        .await?
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count() as i32;
    let desired = replicas - max_unavailable;
    let allowed = (healthy - desired).max(0);
    let status = serde_json::json!({"status": {
        "observedGeneration": pdb.metadata.generation,
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": replicas,
    }});
    pdbs.patch_status(
        "muster",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&status),
    )
    .await?;
    Ok(allowed)
}

/// The Eviction API on a replica's pod: `Ok(true)` evicted, `Ok(false)` refused (429) by the
/// PodDisruptionBudget. Asked once, as `kubectl drain` asks each time (the default client
/// would retry the 429 for minutes).
async fn evict(cp: &ControlPlane, pod: &str) -> Result<bool> {
    let kc = kube::config::Kubeconfig::read_from(cp.kubeconfig_path())?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await?;
    config.default_retry = false;
    let client = kube::Client::try_from(config)?;
    let api: kube::Api<Pod> = kube::Api::namespaced(client, MUSTER_NS);
    match api.evict(pod, &kube::api::EvictParams::default()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 429 => Ok(false),
        Err(e) => Err(e).with_context(|| format!("evicting {MUSTER_NS}/{pod}")),
    }
}

/// A node drain, step by step as `kubectl drain` and the kubelet take it, with the shipped
/// PodDisruptionBudget on muster's pods and the Eviction API of the real API server; what the
/// harness does not run is played: the kubelet (pod status from `/readyz`, SIGTERM on
/// deletion), the disruption controller (the budget's status, from the pods) and the
/// Deployment (a replacement pod).
#[tokio::test]
async fn a_drain_evicts_the_leader_through_the_pdb_one_replica_at_a_time_while_a_gang_is_placed(
) -> Result<()> {
    let _t = Timer("drain", Instant::now());
    let mut ha = Ha::start(false).await?;
    let client = ha.cp.client();
    let r = async {
        let replicas = {
            let docs = muster_harness::rbac::shipped_docs("deploy/deployment.yaml")?;
            docs[0]["spec"]["replicas"].as_i64().context("Deployment replicas")? as i32
        };
        let pdb = muster_harness::rbac::shipped_docs("deploy/pdb.yaml")?
            .pop()
            .context("deploy/pdb.yaml")?;
        kube::Api::<k8s_openapi::api::policy::v1::PodDisruptionBudget>::namespaced(
            client.clone(),
            MUSTER_NS,
        )
        .create(&Default::default(), &serde_json::from_value(pdb)?)
        .await?;
        for r in &ha.replicas {
            let (code, _) = r.muster.get("/readyz").await?;
            report_status(&ha.cp, &r.pod, code == 200).await?;
        }
        ensure!(
            compute_pdb_status(&ha.cp, replicas).await? == 1,
            "both replicas Ready: one disruption allowed"
        );
        ensure!(decides(ha.port(0)).await?, "muster-a leads");

        // The drain of muster-a's node: its eviction is allowed, and a gang arrives meanwhile.
        ensure!(evict(&ha.cp, "muster-a").await?, "the leader's eviction was refused");
        let evicted = Instant::now();
        for i in 0..2 {
            member("drained", i, "500m").create(&client).await?;
        }
        // The kubelet stops the evicted pod's container.
        ha.terminate(0).await?;
        // Two of three members exist: none may be bound (never-half), whoever decides.
        let bound = k8s::bound_pods(&client, NS).await?;
        muster_harness::ensure_truth!(
            !bound.keys().any(|k| k.starts_with("drained-")),
            "part of gang ha/drained was bound: {bound:?}"
        );
        member("drained", 2, "500m").create(&client).await?;
        let watch = Mutex::new(PartialWatch::new());
        let gangs = vec!["drained".to_string()];
        let placed = muster_harness::wait_for(
            "gang ha/drained placed whole",
            Duration::from_secs(60),
            || async {
                let bound = k8s::bound_pods(&client, NS).await?;
                let mut w = watch.lock().unwrap();
                w.observe(&bound, &gangs)?;
                Ok(match w.placed.get("drained") {
                    Some(t) => Progress::Done(*t - evicted),
                    None => Progress::NotYet(format!("{bound:?}")),
                })
            },
        )
        .await
        .truth()?;
        // The other replica, now the leader, may not be evicted while its peer is gone.
        report_status(&ha.cp, "muster-b", true).await?;
        ensure!(
            compute_pdb_status(&ha.cp, replicas).await? == 0,
            "one replica left: no disruption allowed"
        );
        ensure!(
            !evict(&ha.cp, "muster-b").await?,
            "the last replica was evicted"
        );
        ensure!(decides(ha.port(1)).await?, "muster-b took over");
        ha.wait_routed_to(1, Duration::from_secs(10)).await?;
        eprintln!(
            "DRAIN: the leader evicted, gang ha/drained placed {:.2} s later by muster-b; the second eviction refused (429) while one replica is down",
            placed.as_secs_f64()
        );

        // The Deployment's replacement becomes Ready: the drain may take the next one.
        let c = ha.add_replica("muster-c", "muster-c").await?;
        ha.wait_standby(c, "muster-b").await?;
        report_status(&ha.cp, "muster-c", true).await?;
        ensure!(
            compute_pdb_status(&ha.cp, replicas).await? == 1,
            "the replacement Ready: one disruption allowed again"
        );
        ensure!(evict(&ha.cp, "muster-b").await?, "muster-b's eviction refused");
        ha.terminate(1).await?;
        ensure!(ha.leader().await? == c, "muster-c took over");
        ha.wait_routed_to(c, Duration::from_secs(10)).await?;
        k8s::check_no_overcommit(&client)
                .await?
                .map_err(anyhow::Error::msg)?;
        Ok(())
    }
    .await;
    if r.is_err() {
        eprintln!("{}", ha.logs());
    }
    r
}

/// How long muster-a's proxy holds its first nominations of a gang's members: the time the
/// tests have to stop muster-a in the middle of the gang's release (nominations sent, gates
/// not yet removed).
const NOMINATION_HELD: Duration = Duration::from_secs(2);
/// Linux's signal numbers (signal(7)).
const SIGSTOP: i32 = 19;
const SIGCONT: i32 = 18;

/// The indices of the rules on muster-a's proxy: its nominations (pods/status PATCHes in
/// [`NS`]), the first three held for [`NOMINATION_HELD`]; and every PATCH of a pod in [`NS`]
/// (nominations and gate removals), counted.
struct AWrites {
    nominations: usize,
    patches: usize,
}

impl Ha {
    fn proxy(&self) -> &ApiProxy {
        self.a_proxy
            .as_ref()
            .expect("started with AToApi::GangMembersThroughProxy")
    }

    /// `muster_gates_removed_total` of replica `i`.
    async fn gates_removed(&self, i: usize) -> Result<f64> {
        let m = self.replicas[i].muster.metrics().await?;
        Ok(m.get("muster_gates_removed_total").copied().unwrap_or(0.0))
    }
}

fn pod_patches(status: bool) -> Pattern {
    let mut path_contains = vec![format!("/namespaces/{NS}/pods/")];
    if status {
        path_contains.push("/status".into());
    }
    Pattern {
        method: "PATCH",
        path_contains,
    }
}

/// Gang `g` of three members of 2 CPUs (one per node): two created first, which muster-a
/// keeps gated and unbound (the quorum is 3; kube-scheduler alone binds them at once, a
/// partial gang, on cluster truth), then the third; returns once muster-a, releasing the gang,
/// has sent its three nominations, which its proxy holds (the gates are removed only after
/// them).
///
/// A plain pod of 3 CPUs waits in namespace default (it fits on no node): beside each seat its
/// node keeps less room than that pod asks for, so muster publishes every seat as a nomination
/// (a seat at risk, docs/design.md) and the release has a step between its nominations and its
/// gate removals to be caught in.
async fn catch_a_release(ha: &Ha, g: &str) -> Result<AWrites> {
    let client = ha.cp.client();
    let proxy = ha.proxy();
    PodBuilder::new("default", &format!("{g}-outside-muster"))
        .cpu("3")
        .create(&client)
        .await?;
    for i in 0..2 {
        member(g, i, "2").create(&client).await?;
    }
    muster_harness::holds_for(
        &format!("the first two members of gang {NS}/{g} to stay unbound"),
        Duration::from_secs(3),
        || async {
            let bound = k8s::bound_pods(&client, NS).await?;
            muster_harness::ensure_truth!(
                bound.is_empty(),
                "members of gang {NS}/{g} bound before its quorum exists: {bound:?}"
            );
            Ok(Ok(()))
        },
    )
    .await?;
    let pods = k8s::list_pods(&client, NS).await?;
    ensure!(
        pods.iter().all(muster_harness::policy::is_gated),
        "the first two members are gated by the admission policy"
    );
    let writes = AWrites {
        nominations: proxy.add(Rule {
            pattern: pod_patches(true),
            fault: Fault::Delay(NOMINATION_HELD),
            times: Some(3),
        }),
        patches: proxy.add(Rule {
            pattern: pod_patches(false),
            fault: Fault::Delay(Duration::ZERO),
            times: None,
        }),
    };
    member(g, 2, "2").create(&client).await?;
    muster_harness::wait_for(
        "muster-a to send the gang's three nominations",
        Duration::from_secs(30),
        || async {
            let seen = proxy.seen(writes.nominations);
            Ok(if seen >= 3 {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("{seen} sent"))
            })
        },
    )
    .await?;
    ensure!(
        proxy.seen(writes.patches) == 3,
        "only the nominations were sent, no gate removal yet: {} PATCHes",
        proxy.seen(writes.patches)
    );
    Ok(writes)
}

/// Polls until gang `g` is bound whole, never partly beyond [`BINDING_GRACE`] (never-half).
async fn placed_whole(ha: &Ha, g: &str, within: Duration) -> Result<()> {
    let client = ha.cp.client();
    let gangs = vec![g.to_string()];
    let mut watch = PartialWatch::new();
    let deadline = Instant::now() + within;
    while watch.placed.is_empty() {
        let bound = k8s::bound_pods(&client, NS).await?;
        muster_harness::ensure_truth!(
            Instant::now() < deadline,
            "gang {NS}/{g} not placed within {within:?}: bound {bound:?}"
        );
        watch.observe(&bound, &gangs)?;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    k8s::check_no_overcommit(&client)
        .await?
        .map_err(anyhow::Error::msg)
}

/// A take-over in the middle of gathering (gang-members mode, never-half): muster-a is
/// SIGKILLed while releasing a gang, its nominations sent and held, no gate removed; the
/// standby takes over from what the watch shows (the gated members, perhaps nominated by the
/// dead leader, with no seats) and places the gang whole, removing every gate itself.
#[tokio::test]
async fn a_leader_killed_in_the_middle_of_a_gangs_release_leaves_the_standby_to_place_it_whole(
) -> Result<()> {
    let _t = Timer("killed_mid_release", Instant::now());
    let mut ha = Ha::start_with(AToApi::GangMembersThroughProxy, &[]).await?;
    let r = async {
        catch_a_release(&ha, "caught").await?;
        ha.replicas[0].muster.kill_hard();
        let killed = Instant::now();
        placed_whole(&ha, "caught", Duration::from_secs(60)).await?;
        let removed = ha.gates_removed(1).await?;
        ensure!(
            removed == 3.0,
            "muster-b removed the three gates: muster_gates_removed_total {removed}"
        );
        eprintln!(
            "KILLED MID-RELEASE: gang placed whole by muster-b {:.2} s after the kill",
            killed.elapsed().as_secs_f64()
        );
        Ok(())
    }
    .await;
    if r.is_err() {
        eprintln!("{}", ha.logs());
    }
    r
}

/// A deposed leader's writes: muster-a is frozen (SIGSTOP) in the middle of a gang's release,
/// its nominations sent, its gate removals not yet; while it is frozen two nodes go, so the
/// gang no longer fits, and muster-b takes the Lease over, keeps the gang gated and clears the
/// nominations muster-a's held writes left on gated members without seats. muster-a resumed
/// (SIGCONT) finds its lease lapsed: it sends no further write (its proxy counts none), removes
/// no gate (cluster truth: every member stays gated, none bound; its
/// `muster_gates_removed_total` stays 0), and stands by. Once the room is back, muster-b places
/// the gang whole.
#[tokio::test]
async fn a_leader_frozen_past_its_lease_removes_no_gate_and_writes_no_nomination_after_it(
) -> Result<()> {
    let _t = Timer("frozen_past_its_lease", Instant::now());
    let ha = Ha::start_with(AToApi::GangMembersThroughProxy, &[]).await?;
    let client = ha.cp.client();
    let g = "frozen";
    let r = async {
        let writes = catch_a_release(&ha, g).await?;
        let pid = ha.replicas[0].muster.pid().context("muster-a runs")?;
        ensure!(muster_harness::process::signal(pid, SIGSTOP), "SIGSTOP");
        let frozen = Instant::now();
        for n in ["node-2", "node-3"] {
            k8s::delete_node(&client, n).await?;
        }
        muster_harness::wait_for("muster-b to take over", Duration::from_secs(30), || async {
            Ok(if decides(ha.port(1)).await? {
                Progress::Done(())
            } else {
                Progress::NotYet("stands by".into())
            })
        })
        .await?;
        let took_over = frozen.elapsed();
        // muster-a's held nominations landed (the proxy sends them on), and muster-b cleared
        // them: gated members without seats carry no nomination.
        muster_harness::wait_for(
            "muster-b to clear the nominations of the gated members",
            Duration::from_secs(30),
            || async {
                let m = ha.replicas[1].muster.metrics().await?;
                let cleared: f64 = m
                    .iter()
                    .filter(|(k, _)| {
                        k.starts_with("muster_nomination_writes_total{")
                            && k.contains(r#"why="clear""#)
                            && k.contains(r#"outcome="ok""#)
                    })
                    .map(|(_, v)| v)
                    .sum();
                let pods = k8s::list_pods(&client, NS).await?;
                let nominated: Vec<String> = pods
                    .iter()
                    .filter(|p| {
                        p.status
                            .as_ref()
                            .and_then(|s| s.nominated_node_name.as_ref())
                            .is_some()
                    })
                    .filter_map(|p| p.metadata.name.clone())
                    .collect();
                Ok(if cleared >= 3.0 && nominated.is_empty() {
                    Progress::Done(())
                } else {
                    Progress::NotYet(format!("{cleared} cleared; nominated: {nominated:?}"))
                })
            },
        )
        .await?;
        let sent = ha.proxy().seen(writes.patches);
        ensure!(muster_harness::process::signal(pid, SIGCONT), "SIGCONT");
        eprintln!(
            "FROZEN: muster-b decided {:.2} s after the freeze; muster-a resumed after {:.2} s",
            took_over.as_secs_f64(),
            frozen.elapsed().as_secs_f64()
        );
        ha.wait_standby(0, "muster-b").await?;
        muster_harness::holds_for(
            &format!("every member of gang {NS}/{g} to stay gated and unbound"),
            Duration::from_secs(5),
            || async {
                let pods = k8s::list_pods(&client, NS).await?;
                let ungated: Vec<String> = pods
                    .iter()
                    .filter(|p| !muster_harness::policy::is_gated(p))
                    .filter_map(|p| p.metadata.name.clone())
                    .collect();
                muster_harness::ensure_truth!(
                    ungated.is_empty(),
                    "members of gang {NS}/{g}, which does not fit, ungated after muster-a lost \
                     its lease: {ungated:?}"
                );
                let bound = k8s::bound_pods(&client, NS).await?;
                muster_harness::ensure_truth!(bound.is_empty(), "bound: {bound:?}");
                Ok(Ok(()))
            },
        )
        .await?;
        let after = ha.proxy().seen(writes.patches);
        ensure!(
            after == sent,
            "muster-a sent {} PATCHes of gang members after it lost its lease",
            after - sent
        );
        let removed = ha.gates_removed(0).await?;
        ensure!(
            removed == 0.0,
            "muster-a removed gates after it lost its lease: muster_gates_removed_total {removed}"
        );
        let m = ha.replicas[0].muster.metrics().await?;
        let abandoned: Vec<(&String, &f64)> = m
            .iter()
            .filter(|(k, _)| k.starts_with("muster_gather_writes_abandoned_total"))
            .collect();
        eprintln!(
            "FROZEN: muster-a abandoned {abandoned:?}; sent {sent} PATCHes, all before the freeze"
        );
        for n in ["node-2", "node-3"] {
            k8s::add_node(&client, n, &NodeShape::cpu("2")).await?;
        }
        placed_whole(&ha, g, Duration::from_secs(60)).await?;
        ensure!(
            ha.gates_removed(0).await? == 0.0,
            "muster-a removed no gate"
        );
        Ok(())
    }
    .await;
    if r.is_err() {
        eprintln!("{}", ha.logs());
    }
    r
}
