//! `muster-local`: a real local cluster with muster as the scheduler's extender.
//!
//! ```text
//! muster-local up [--scope gang-members|every-pod] [--nodes 2] [--cpu 4] [--memory 16Gi] [--pods 110] [--gpus N]
//! muster-local status
//! muster-local add-node NAME [--cpu 4] [--memory 16Gi] [--pods 110] [--gpus N]
//! muster-local down
//! muster-local demo
//! ```
//! State of `up` lives in `${MUSTER_LOCAL_DIR:-$HOME/.cache/muster/local}`.
//!
//! Both `up` and `demo` run what `kubectl apply -k deploy/` installs: the admission policy of
//! deploy/ (gang members are created marked and behind muster's gate), kube-scheduler with
//! scheduler-config/muster-as-default-scheduler.yaml (only gang members reach muster) and
//! muster with `--scope=gang-members`. `up --scope every-pod` starts the alternative (every pod
//! through muster, scheduler-config/muster-every-pod.yaml, no policy).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, PostParams};
use muster_harness::control_plane::client_from_kubeconfig;
use muster_harness::k8s::{self, NodeShape};
use muster_harness::paths::{cache_dir, find_muster_binary, k8s_version};
use muster_harness::policy::{apply_gang_admission_policy, is_gated, GATHER_GATE, POLICY_FILE};
use muster_harness::process::{pid_alive, signal, Lifetime};
use muster_harness::{
    control_run_requested, ControlPlane, ControlPlaneOptions, Muster, MusterOptions,
    SchedulerOptions, Scope, CLUSTER_TRUTH, CONTROL_RUN_ENV,
};

#[derive(Parser)]
#[command(
    name = "muster-local",
    about = "Run a local Kubernetes control plane (etcd, kube-apiserver, kube-scheduler) with muster as the scheduler's extender"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start a cluster that keeps running after this command exits; prints `export KUBECONFIG=...`.
    Up {
        /// Which pods pass through muster: `gang-members` (the shipped install: the admission
        /// policy, muster's gate, nominations) or `every-pod` (the alternative, no policy).
        #[arg(long, value_enum, default_value_t = ScopeArg::GangMembers)]
        scope: ScopeArg,
        /// Number of fake nodes to create (node-1 .. node-N).
        #[arg(long, default_value_t = 2)]
        nodes: u32,
        #[command(flatten)]
        shape: ShapeArgs,
        /// Extra flag for muster (repeatable), e.g. --muster-arg=--gang-timeout=30s.
        #[arg(long = "muster-arg", allow_hyphen_values = true)]
        muster_args: Vec<String>,
    },
    /// Stop the cluster started by `up` and delete its state directory.
    Down,
    /// Show whether the processes of `up` are running.
    Status,
    /// Add a fake node to the cluster started by `up`.
    AddNode {
        name: String,
        #[command(flatten)]
        shape: ShapeArgs,
    },
    /// Run the README's main job: gang ml/ai-gang-job on a fresh, throwaway cluster.
    Demo,
}

/// `up --scope`.
#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
enum ScopeArg {
    GangMembers,
    EveryPod,
}

impl From<ScopeArg> for Scope {
    fn from(s: ScopeArg) -> Self {
        match s {
            ScopeArg::GangMembers => Scope::GangMembers,
            ScopeArg::EveryPod => Scope::EveryPod,
        }
    }
}

/// Starts muster and kube-scheduler on `cp` in `scope`, as that install has them: for
/// gang-members the policy first (so no gang member is created before it marks them), then
/// muster, then kube-scheduler with the matching config.
async fn start_muster_and_scheduler(
    cp: &mut ControlPlane,
    muster_bin: &Path,
    scope: Scope,
    muster_args: Vec<String>,
    lifetime: Lifetime,
) -> Result<Muster> {
    // In a control run (MUSTER_E2E_CONTROL) the stock scheduler runs alone: neither muster's
    // extender (start_scheduler drops it) nor its admission policy, whose marker (muster.dev/gang,
    // which the stock config would look for on nodes) and gate (muster.dev/gather, which only muster removes) are muster's part
    // of the install, as the harness's Cluster does. Gang members are then plain pods that
    // kube-scheduler binds one by one, so the demo's cluster truth (one of two bound while the
    // gang does not fit) is decided at once instead of every member waiting out the demo's
    // 90-second placement deadline as "Insufficient muster.dev/gang".
    if scope == Scope::GangMembers && !control_run_requested() {
        apply_gang_admission_policy(&cp.client()).await?;
    } else if scope == Scope::GangMembers {
        eprintln!(
            "muster-harness: control run ({CONTROL_RUN_ENV}), gang-members mode: {POLICY_FILE} not \
             applied; gang members are created unmarked and ungated"
        );
    }
    let mut mo = MusterOptions::new(muster_bin, cp.kubeconfig_path(), cp.dir());
    mo.lifetime = lifetime;
    mo.args = vec![scope.flag().to_string()];
    mo.args.extend(muster_args);
    let muster = Muster::start(mo).await?;
    let config = match scope {
        Scope::GangMembers => "muster-as-default-scheduler.yaml",
        Scope::EveryPod => "muster-every-pod.yaml",
    };
    cp.start_scheduler(SchedulerOptions {
        extender_base_url: Some(muster.url()),
        ..SchedulerOptions::default().with_repo_config(config)
    })
    .await?;
    Ok(muster)
}

#[derive(Args, Clone)]
struct ShapeArgs {
    /// CPU allocatable per node.
    #[arg(long, default_value = "4")]
    cpu: String,
    /// Memory allocatable per node.
    #[arg(long, default_value = "16Gi")]
    memory: String,
    /// Max pods per node.
    #[arg(long, default_value_t = 110)]
    pods: u32,
    /// nvidia.com/gpu allocatable per node (none if omitted).
    #[arg(long)]
    gpus: Option<u32>,
}

impl ShapeArgs {
    fn shape(&self) -> NodeShape {
        let s = NodeShape::cpu(&self.cpu)
            .memory(&self.memory)
            .pods(self.pods);
        match self.gpus {
            Some(g) => s.gpus(g),
            None => s,
        }
    }
}

fn state_dir() -> PathBuf {
    std::env::var_os("MUSTER_LOCAL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir().join("local"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let res = rt.block_on(async {
        match cli.cmd {
            Cmd::Up {
                scope,
                nodes,
                shape,
                muster_args,
            } => up(scope.into(), nodes, &shape, muster_args).await,
            Cmd::Down => down(),
            Cmd::Status => status(),
            Cmd::AddNode { name, shape } => add_node(&name, &shape).await,
            Cmd::Demo => return demo().await,
        }
        .map(|()| ExitCode::SUCCESS)
    });
    match res {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// pid files of a running `up`: name → pid.
fn read_pids(dir: &Path) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    if let Ok(rd) = std::fs::read_dir(dir.join("pids")) {
        for e in rd.flatten() {
            let name = e
                .file_name()
                .to_string_lossy()
                .trim_end_matches(".pid")
                .to_string();
            if let Some(pid) = std::fs::read_to_string(e.path())
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
            {
                out.insert(name, pid);
            }
        }
    }
    out
}

async fn up(scope: Scope, nodes: u32, shape: &ShapeArgs, muster_args: Vec<String>) -> Result<()> {
    let dir = state_dir();
    let alive: Vec<String> = read_pids(&dir)
        .into_iter()
        .filter(|(_, pid)| pid_alive(*pid))
        .map(|(n, pid)| format!("{n} ({pid})"))
        .collect();
    if !alive.is_empty() {
        bail!(
            "a local cluster is already running from {} ({}); run `muster-local down` first",
            dir.display(),
            alive.join(", ")
        );
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("removing stale {}", dir.display()))?;
    }
    let t0 = Instant::now();
    let muster_bin = find_muster_binary(true)?;
    eprintln!(
        "starting etcd + kube-apiserver (Kubernetes {}) in {}",
        k8s_version(),
        dir.display()
    );
    let mut cp = ControlPlane::start(ControlPlaneOptions {
        dir: Some(dir.clone()),
        lifetime: Lifetime::Detached,
        ..Default::default()
    })
    .await?;
    eprintln!(
        "starting muster ({}, {}) and kube-scheduler with muster as its extender{}",
        muster_bin.display(),
        scope.flag(),
        if scope == Scope::GangMembers {
            format!(" (after applying {POLICY_FILE})")
        } else {
            String::new()
        }
    );
    cp.start_controllers().await?;
    eprintln!("started kube-controller-manager and KWOK (playing the nodes' kubelets)");
    let muster =
        start_muster_and_scheduler(&mut cp, &muster_bin, scope, muster_args, Lifetime::Detached)
            .await?;
    let client = cp.client();
    for i in 1..=nodes {
        k8s::add_node(&client, &format!("node-{i}"), &shape.shape()).await?;
    }
    let muster_url = muster.url();
    let kubeconfig = cp.kubeconfig_path().to_path_buf();
    let apiserver = cp.apiserver_url();
    let muster_pid = muster.detach();
    let dir = cp.detach()?;
    if let Some(pid) = muster_pid {
        std::fs::write(dir.join("pids/muster.pid"), format!("{pid}\n"))?;
    }
    std::fs::write(
        dir.join("env"),
        format!("export KUBECONFIG={}\n", kubeconfig.display()),
    )?;
    eprintln!(
        "local cluster up in {:.1}s: apiserver {apiserver}, muster {muster_url}, {nodes} node(s) of {} CPU / {} memory{}",
        t0.elapsed().as_secs_f64(),
        shape.cpu,
        shape.memory,
        shape.gpus.map(|g| format!(" / {g} nvidia.com/gpu")).unwrap_or_default()
    );
    eprintln!(
        "logs: {}/{{etcd,kube-apiserver,kube-controller-manager,kwok,kube-scheduler,muster}}.log; stop with `muster-local down`",
        dir.display()
    );
    println!("export KUBECONFIG={}", kubeconfig.display());
    Ok(())
}

fn down() -> Result<()> {
    let dir = state_dir();
    if !dir.exists() {
        eprintln!("no local cluster in {}", dir.display());
        return Ok(());
    }
    let pids = read_pids(&dir);
    // Stop the scheduler and muster before the apiserver, and etcd last.
    let order = ["kube-scheduler", "muster", "kube-apiserver", "etcd"];
    let mut names: Vec<&String> = pids.keys().collect();
    names.sort_by_key(|n| order.iter().position(|o| o == n).unwrap_or(order.len()));
    for name in names {
        let pid = pids[name];
        if !pid_alive(pid) {
            continue;
        }
        signal(pid, libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while pid_alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if pid_alive(pid) {
            signal(pid, libc::SIGKILL);
        }
        eprintln!("stopped {name} ({pid})");
    }
    std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    eprintln!("removed {}", dir.display());
    Ok(())
}

fn status() -> Result<()> {
    let dir = state_dir();
    let pids = read_pids(&dir);
    if pids.is_empty() {
        println!("no local cluster in {}", dir.display());
        return Ok(());
    }
    for (name, pid) in &pids {
        println!(
            "{name:15} pid {pid:7} {}",
            if pid_alive(*pid) {
                "running"
            } else {
                "NOT RUNNING"
            }
        );
    }
    println!("export KUBECONFIG={}", dir.join("kubeconfig").display());
    Ok(())
}

async fn add_node(name: &str, shape: &ShapeArgs) -> Result<()> {
    let kc = state_dir().join("kubeconfig");
    if !kc.exists() {
        bail!(
            "no local cluster ({} missing); run `muster-local up` first",
            kc.display()
        );
    }
    let client = client_from_kubeconfig(&kc).await?;
    k8s::add_node(&client, name, &shape.shape()).await?;
    println!("node/{name} created");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// demo

const NS: &str = "ml";
const GROUP: &str = "ai-gang-job";

struct Clock(Instant);

impl Clock {
    fn say(&self, msg: impl AsRef<str>) {
        println!("[{:6.1}s] {}", self.0.elapsed().as_secs_f64(), msg.as_ref());
    }
}

async fn demo() -> Result<ExitCode> {
    let clock = Clock(Instant::now());
    let verdict = match run_demo(&clock).await {
        Ok(Ok(pass)) => {
            println!("PASS: {pass}");
            ExitCode::SUCCESS
        }
        Ok(Err(fail)) => {
            println!("FAIL: {fail}");
            ExitCode::FAILURE
        }
        Err(e) => {
            println!(
                "FAIL: demo could not run: {}",
                format!("{e:#}").replace('\n', " | ")
            );
            ExitCode::FAILURE
        }
    };
    Ok(verdict)
}

/// `Ok(Ok(pass message))`, `Ok(Err(fail message))`, or `Err` when the cluster could not run.
/// Everything is torn down before this returns.
async fn run_demo(clock: &Clock) -> Result<std::result::Result<String, String>> {
    clock.say(format!(
        "muster demo: gang {NS}/{GROUP} (master + worker, 100m CPU each, min-available 2) on the stock kube-scheduler {}",
        k8s_version()
    ));
    let muster_bin = find_muster_binary(true)?;
    clock.say("starting etcd + kube-apiserver ...");
    let mut cp = ControlPlane::start(ControlPlaneOptions::default()).await?;
    clock.say(format!(
        "control plane ready at {} (data in {})",
        cp.apiserver_url(),
        cp.dir().display()
    ));
    cp.start_controllers().await?;
    clock.say(
        "kube-controller-manager ready (its Job controller creates the job's pods), and KWOK \
         playing the nodes' kubelets (bound pods run)",
    );
    let muster = start_muster_and_scheduler(
        &mut cp,
        &muster_bin,
        Scope::GangMembers,
        Vec::new(),
        Lifetime::Attached,
    )
    .await?;
    clock.say(format!(
        "installed as `kubectl apply -k deploy/` does: {POLICY_FILE} applied (gang members are \
         created behind the gate {GATHER_GATE}), muster ready at {} ({}, --scope=gang-members), \
         kube-scheduler ready with scheduler-config/muster-as-default-scheduler.yaml (only gang \
         members reach muster)",
        muster.url(),
        muster_bin.display()
    ));
    let result = demo_steps(clock, &cp, &muster).await;
    if let Ok(Err(_)) | Err(_) = &result {
        println!("--- muster log (last lines):\n{}", muster.log_tail(15));
        println!(
            "--- kube-scheduler + apiserver logs (last lines):\n{}",
            cp.log_tails(5)
        );
    }
    clock.say("tearing down the cluster");
    drop(muster);
    drop(cp);
    result
}

async fn demo_steps(
    clock: &Clock,
    cp: &ControlPlane,
    muster: &Muster,
) -> Result<std::result::Result<String, String>> {
    let client = cp.client();
    k8s::create_namespace(&client, NS).await?;
    k8s::add_node(&client, "node-1", &NodeShape::cpu("150m")).await?;
    clock.say("node node-1 added: 150m CPU allocatable, room for only ONE of the two 100m pods");
    // The seed's job (a master and a worker, minAvailable 2) as a batch/v1 user submits it: a
    // Job per task, both carrying the gang's keys in their pod template.
    for task in ["master", "worker"] {
        let job = demo_job(task)?;
        Api::<Job>::namespaced(client.clone(), NS)
            .create(&PostParams::default(), &job)
            .await
            .with_context(|| format!("creating job {NS}/{GROUP}-{task}"))?;
        clock.say(format!(
            "created job {NS}/{GROUP}-{task} (1 pod of 100m CPU; pod template: muster.dev/group={GROUP}, \
             muster.dev/min-available=2, muster.dev/task={task})"
        ));
    }
    let names = job_pods(&client).await?;
    clock.say(format!(
        "the Job controller created {}",
        names.join(" and ")
    ));

    // Phase 1: both must stay Pending, and say why.
    let created = Instant::now();
    let mut shown: BTreeSet<String> = BTreeSet::new();
    let mut why: BTreeMap<String, String> = BTreeMap::new();
    let min_hold = Duration::from_secs(5);
    let max_wait = Duration::from_secs(30);
    loop {
        let pods = k8s::list_pods(&client, NS).await?;
        if let Some(p) = pods.iter().find(|p| k8s::pod_node(p).is_some()) {
            return Ok(Err(format!(
                "{CLUSTER_TRUTH} {} was bound to {} while the gang could not fit whole: partial gang",
                k8s::pod_name(p),
                k8s::pod_node(p).unwrap_or("?")
            )));
        }
        for n in &names {
            for e in k8s::events_for(&client, NS, n).await? {
                let line = format!("{n}: event {} {}: {}", e.type_, e.reason, e.message);
                if shown.insert(line.clone()) {
                    clock.say(&line);
                }
                if e.message.contains(&format!("gang {NS}/{GROUP}")) || e.reason.starts_with("Gang")
                {
                    why.insert(n.clone(), format!("{}: {}", e.reason, e.message));
                }
            }
            if let Some(p) = pods.iter().find(|p| k8s::pod_name(p) == n) {
                if let Some(c) = k8s::scheduled_condition(p) {
                    // Print the condition only when it says something no event said.
                    let said = shown.iter().any(|l| {
                        l.starts_with(&format!("{n}: event"))
                            && c.split_once(": ").is_some_and(|(_, m)| l.ends_with(m))
                    });
                    let line = format!("{n}: condition {c}");
                    if !said && shown.insert(line.clone()) {
                        clock.say(&line);
                    }
                    why.entry(n.clone()).or_insert(c);
                }
            }
        }
        // The shipped mode's promise: a gang that does not fit waits behind muster's gate,
        // where kube-scheduler does not even try it. A control run applies no policy (see
        // start_muster_and_scheduler): there the pods are ungated by design, and the check that
        // decides it is the partial-gang one above, on cluster truth.
        for n in names.iter().filter(|_| !control_run_requested()) {
            let gated = pods
                .iter()
                .find(|p| k8s::pod_name(p) == n)
                .is_some_and(is_gated);
            if !gated {
                return Ok(Err(format!(
                    "{n} is not behind muster's gate {GATHER_GATE} while its gang does not fit: \
                     was {POLICY_FILE} applied?"
                )));
            }
        }
        let waited = created.elapsed();
        if waited >= min_hold && why.len() == names.len() {
            break;
        }
        if waited >= max_wait {
            if why.is_empty() {
                return Ok(Err(format!(
                    "both pods stayed Pending for {:.0}s but nothing (no event, no PodScheduled condition) said why",
                    waited.as_secs_f64()
                )));
            }
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    clock.say(format!(
        "both pods still Pending and SchedulingGated ({GATHER_GATE}) after {:.1}s, neither bound: the gang does not fit whole, so muster keeps both behind its gate (the stock scheduler alone would have bound one)",
        created.elapsed().as_secs_f64()
    ));
    // What `kubectl muster why` and the gang's PodGroup status show: muster's view of the gang.
    match muster.gang(NS, GROUP).await? {
        Some(g) => clock.say(format!(
            "muster's /gangs (what `kubectl muster why {}` shows): {} {}/{} members placed, {}",
            names[0],
            g.state,
            g.members_with_nodes,
            g.quorum,
            g.waiting_reason.as_deref().unwrap_or("no reason given")
        )),
        None => {
            return Ok(Err(format!(
                "muster's /gangs does not list gang {NS}/{GROUP}"
            )))
        }
    }

    // Phase 2: add room; both must be bound, together.
    k8s::add_node(&client, "node-2", &NodeShape::cpu("150m")).await?;
    let added = Instant::now();
    clock.say("node node-2 added (150m CPU): now the whole gang fits");
    let mut bound: BTreeMap<String, (String, Instant)> = BTreeMap::new();
    let mut ungated: BTreeSet<String> = BTreeSet::new();
    let deadline = added + Duration::from_secs(90);
    while bound.len() < names.len() {
        if Instant::now() > deadline {
            let pods = k8s::list_pods(&client, NS).await?;
            return Ok(Err(format!(
                "{CLUSTER_TRUTH} gang {NS}/{GROUP} not placed {:.0}s after capacity was added: {}",
                added.elapsed().as_secs_f64(),
                k8s::describe_pods(&pods)
            )));
        }
        for p in k8s::list_pods(&client, NS).await? {
            let name = k8s::pod_name(&p).to_string();
            if !is_gated(&p) && ungated.insert(name.clone()) {
                clock.say(format!("{name}: muster removed its gate {GATHER_GATE}"));
            }
            if let Some(node) = k8s::pod_node(&p) {
                let name = k8s::pod_name(&p).to_string();
                if let std::collections::btree_map::Entry::Vacant(e) = bound.entry(name) {
                    clock.say(format!("{} bound to {node}", e.key()));
                    e.insert((node.to_string(), Instant::now()));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let running_by = Instant::now() + Duration::from_secs(30);
    loop {
        let pods = k8s::list_pods(&client, NS).await?;
        let running = names
            .iter()
            .filter(|n| {
                pods.iter().any(|p| {
                    k8s::pod_name(p) == n.as_str()
                        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                })
            })
            .count();
        if running == names.len() {
            clock.say("both pods Running (KWOK plays the kubelets): the job has started whole");
            break;
        }
        if Instant::now() > running_by {
            return Ok(Err(format!(
                "the gang's pods were bound but {running} of {} Running after 30 s: {}",
                names.len(),
                k8s::describe_pods(&pods)
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let times: Vec<Instant> = bound.values().map(|(_, t)| *t).collect();
    let first = *times.iter().min().unwrap_or(&added);
    let last = *times.iter().max().unwrap_or(&added);
    let apart = last.duration_since(first).as_secs_f64();
    for n in &names {
        for e in k8s::events_for(&client, NS, n).await? {
            let line = format!("{n}: event {} {}: {}", e.type_, e.reason, e.message);
            if shown.insert(line.clone()) {
                clock.say(&line);
            }
        }
    }
    let placement = names
        .iter()
        .map(|n| format!("{n}→{}", bound[n].0))
        .collect::<Vec<_>>()
        .join(", ");
    clock.say(format!(
        "bindings {apart:.2}s apart; whole gang placed {:.1}s after capacity was added",
        last.duration_since(added).as_secs_f64()
    ));
    if apart > 5.0 {
        return Ok(Err(format!(
            "{CLUSTER_TRUTH} gang {NS}/{GROUP} bound {apart:.1}s apart ({placement}): not together"
        )));
    }
    Ok(Ok(format!(
        "gang {NS}/{GROUP} placed whole: {placement}, bound {apart:.2}s apart, after waiting whole while it did not fit ({})",
        short_reason(why.values().next().map(String::as_str).unwrap_or(""))
    )))
}

/// The Job of the seed's `task` (master or worker): one pod of 100m CPU whose template carries
/// the gang's keys, as a user of batch/v1 writes them.
fn demo_job(task: &str) -> Result<Job> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": format!("{GROUP}-{task}"), "namespace": NS},
        "spec": {
            "completions": 1,
            "parallelism": 1,
            "completionMode": "Indexed",
            "backoffLimit": 0,
            "template": {
                "metadata": {
                    "labels": {"app": GROUP, "role": task},
                    "annotations": {
                        "muster.dev/group": GROUP,
                        "muster.dev/min-available": "2",
                        "muster.dev/task": task,
                    },
                },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": task,
                        "image": "busybox",
                        "command": ["sh", "-c", "sleep 3600"],
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                    }],
                },
            },
        },
    }))?)
}

/// The names of the pods the Job controller created for the demo's two Jobs (master first),
/// once both exist.
async fn job_pods(client: &kube::Client) -> Result<Vec<String>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pods = k8s::list_pods(client, NS).await?;
        let of = |task: &str| {
            pods.iter()
                .map(k8s::pod_name)
                .find(|n| n.starts_with(&format!("{GROUP}-{task}-")))
                .map(str::to_string)
        };
        if let (Some(m), Some(w)) = (of("master"), of("worker")) {
            return Ok(vec![m, w]);
        }
        if Instant::now() > deadline {
            bail!(
                "the Job controller did not create both pods within 30 s: {}",
                k8s::describe_pods(&pods)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The part of a scheduler message that names the gang (`gang ml/ai-gang-job: 1 of 2 members
/// fit`), or the whole message.
fn short_reason(msg: &str) -> &str {
    let Some(i) = msg.find(&format!("gang {NS}/{GROUP}")) else {
        return msg.trim();
    };
    let rest = &msg[i..];
    rest.find(['.', ',']).map_or(rest, |j| &rest[..j]).trim()
}
