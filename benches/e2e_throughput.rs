//! End-to-end scheduling throughput, side by side, in one run on this machine: the SAME workload
//! (fake nodes; gangs of 4–16 members plus plain pods) scheduled by
//!
//! - (a) the stock kube-scheduler alone, gang keys ignored — the ceiling;
//! - (b) kube-scheduler + muster (`scheduler-config/muster-as-default-scheduler.yaml`);
//! - (c) kube-scheduler's own gang scheduling (feature gate `GenericWorkload`, API
//!   `scheduling.k8s.io/v1beta1` PodGroup, pods naming it in `spec.schedulingGroup`).
//!
//! Each configuration gets a fresh etcd + kube-apiserver + kube-scheduler (+ muster) from
//! `muster-harness`, one after another. Pods are created by a concurrent creator (bounded
//! concurrency) in a deterministic pseudo-random interleaving; a watch on bound pods
//! (`spec.nodeName!=`) timestamps every binding and a sampler counts bound pods once a second,
//! as scheduler_perf's throughput collector does.
//!
//! Run: `cargo bench --bench e2e_throughput` (writes target/muster-bench/e2e-throughput.{md,csv,svg}).
//! Under `cargo test --benches` (no `--bench` argument) it runs a smoke: 10 nodes, 40 pods,
//! configurations (a) and (b) only.
//!
//! Environment (defaults in parentheses): E2E_NODES (500), E2E_PODS (2000), E2E_PLAIN_PERCENT
//! (25), E2E_GANG_MIN / E2E_GANG_MAX (4 / 16), E2E_CPU_MIN / E2E_CPU_MAX millicores (100 / 500),
//! E2E_NODE_CPU (4), E2E_NODE_MEMORY (16Gi), E2E_NODE_PODS (110), E2E_SEED (42),
//! E2E_CONCURRENCY (16 creates in flight), E2E_OPEN_UNITS (8 gangs/plain pods being created at
//! once), E2E_TIMEOUT_SECS (600 per configuration), E2E_PARTIAL_GRACE_MS (2000),
//! E2E_CONFIGS (vanilla,muster,native), E2E_ROUNDS (3; 1 in the smoke), E2E_CREATE_QPS (0 = unpaced), E2E_QUIET_WAIT_SECS (300:
//! wait for other processes to leave the CPUs before each configuration), E2E_OUT_DIR
//! (target/muster-bench), E2E_MUSTER_BIN (the muster binary built with the bench),
//! E2E_MUSTER_SCHEDULER_CONFIG (scheduler-config/muster-as-default-scheduler.yaml).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, PodSchedulingGroup};
use k8s_openapi::api::scheduling::v1beta1::{
    GangSchedulingPolicy, PodGroup, PodGroupSchedulingPolicy, PodGroupSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use muster_harness::control_plane::{ControlPlane, ControlPlaneOptions, SchedulerOptions};
use muster_harness::k8s::{self, GangKey, NodeShape, PodBuilder};
use muster_harness::muster::{Muster, MusterOptions};
use muster_harness::paths::{k8s_version, repo_root};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;

const NS: &str = "bench";
const MUSTER_BIN: &str = env!("CARGO_BIN_EXE_muster");
/// kube-apiserver flags that serve the PodGroup API (as scheduler_perf does for GenericWorkload).
const NATIVE_APISERVER_ARGS: [&str; 2] = [
    "--feature-gates=GenericWorkload=true",
    "--runtime-config=scheduling.k8s.io/v1beta1=true",
];
/// kube-scheduler flag that turns on its GangScheduling plugin (added to the default plugins).
const NATIVE_SCHEDULER_ARGS: [&str; 1] = ["--feature-gates=GenericWorkload=true"];
/// Lets the bench read kube-scheduler's /metrics without credentials (loopback only).
const SCHEDULER_METRICS_ARG: &str =
    "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics";
const VANILLA_SCHEDULER_CONFIG: &str =
    "# written by benches/e2e_throughput.rs: stock kube-scheduler, no extender
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /set/by/the/harness
leaderElection:
  leaderElect: false
profiles:
  - schedulerName: default-scheduler
";

// ------------------------------------------------------------------------------------------
// Parameters and workload

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Vanilla,
    Muster,
    Native,
}

impl Mode {
    fn slug(self) -> &'static str {
        match self {
            Mode::Vanilla => "vanilla",
            Mode::Muster => "muster",
            Mode::Native => "native",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Mode::Vanilla => "(a) vanilla kube-scheduler",
            Mode::Muster => "(b) kube-scheduler + muster",
            Mode::Native => "(c) native gang scheduling",
        }
    }

    fn parse(s: &str) -> Result<Self> {
        match s.trim() {
            "vanilla" | "a" => Ok(Mode::Vanilla),
            "muster" | "b" => Ok(Mode::Muster),
            "native" | "c" => Ok(Mode::Native),
            other => {
                bail!("E2E_CONFIGS: unknown configuration {other:?} (vanilla, muster, native)")
            }
        }
    }
}

#[derive(Debug, Clone)]
struct Params {
    smoke: bool,
    nodes: usize,
    node_cpu: String,
    node_memory: String,
    node_pods: u32,
    pods: usize,
    plain_percent: usize,
    gang_min: usize,
    gang_max: usize,
    cpu_min: u32,
    cpu_max: u32,
    seed: u64,
    concurrency: usize,
    open_units: usize,
    timeout: Duration,
    grace: Duration,
    /// Creates per second (None: as fast as the creators go).
    create_qps: Option<f64>,
    /// How long to wait for other processes to leave the CPUs alone before each configuration.
    quiet_wait: Duration,
    modes: Vec<Mode>,
    /// Every configuration runs this many times (a, b, c, a, b, c, ...); the report shows the
    /// median run of each.
    rounds: usize,
    out_dir: PathBuf,
    muster_scheduler_config: PathBuf,
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> Result<T> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .map_err(|_| anyhow!("{name}={v:?} is not a valid value")),
        _ => Ok(default),
    }
}

impl Params {
    fn from_env(smoke: bool) -> Result<Self> {
        let modes: Vec<Mode> = env_or(
            "E2E_CONFIGS",
            if smoke {
                "vanilla,muster".to_string()
            } else {
                "vanilla,muster,native".to_string()
            },
        )?
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(Mode::parse)
        .collect::<Result<_>>()?;
        let p = Params {
            smoke,
            nodes: env_or("E2E_NODES", if smoke { 10 } else { 500 })?,
            node_cpu: env_or("E2E_NODE_CPU", "4".to_string())?,
            node_memory: env_or("E2E_NODE_MEMORY", "16Gi".to_string())?,
            node_pods: env_or("E2E_NODE_PODS", 110)?,
            pods: env_or("E2E_PODS", if smoke { 40 } else { 2000 })?,
            plain_percent: env_or("E2E_PLAIN_PERCENT", 25)?,
            gang_min: env_or("E2E_GANG_MIN", 4)?,
            gang_max: env_or("E2E_GANG_MAX", 16)?,
            cpu_min: env_or("E2E_CPU_MIN", 100)?,
            cpu_max: env_or("E2E_CPU_MAX", 500)?,
            seed: env_or("E2E_SEED", 42)?,
            concurrency: env_or("E2E_CONCURRENCY", 16)?,
            open_units: env_or("E2E_OPEN_UNITS", 8)?,
            timeout: Duration::from_secs(env_or("E2E_TIMEOUT_SECS", if smoke { 45 } else { 600 })?),
            grace: Duration::from_millis(env_or("E2E_PARTIAL_GRACE_MS", 2000)?),
            create_qps: Some(env_or("E2E_CREATE_QPS", 0.0)?).filter(|q| *q > 0.0),
            quiet_wait: Duration::from_secs(env_or(
                "E2E_QUIET_WAIT_SECS",
                if smoke { 0 } else { 300 },
            )?),
            muster_scheduler_config: std::env::var_os("E2E_MUSTER_SCHEDULER_CONFIG")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    repo_root().join("scheduler-config/muster-as-default-scheduler.yaml")
                }),
            modes,
            rounds: env_or("E2E_ROUNDS", if smoke { 1 } else { 3 })?,
            out_dir: std::env::var_os("E2E_OUT_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/muster-bench")
                }),
        };
        if p.gang_min < 2 || p.gang_max < p.gang_min {
            bail!("need 2 <= E2E_GANG_MIN <= E2E_GANG_MAX");
        }
        if p.cpu_max < p.cpu_min || p.cpu_min == 0 {
            bail!("need 0 < E2E_CPU_MIN <= E2E_CPU_MAX");
        }
        if p.modes.is_empty() || p.nodes == 0 || p.pods == 0 || p.concurrency == 0 || p.rounds == 0
        {
            bail!("E2E_CONFIGS, E2E_NODES, E2E_PODS, E2E_CONCURRENCY and E2E_ROUNDS must not be empty/zero");
        }
        Ok(p)
    }
}

/// splitmix64: deterministic, good enough for workload shapes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
}

#[derive(Debug, Clone)]
struct PodPlan {
    name: String,
    gang: Option<usize>,
    cpu_milli: u32,
}

#[derive(Debug, Clone)]
struct GangPlan {
    name: String,
    /// Indices into `Workload::pods`; min-available = size.
    members: Vec<usize>,
}

#[derive(Debug, Clone)]
struct Workload {
    pods: Vec<PodPlan>,
    gangs: Vec<GangPlan>,
    /// Creation order (indices into `pods`).
    order: Vec<usize>,
}

impl Workload {
    fn plain(&self) -> usize {
        self.pods.iter().filter(|p| p.gang.is_none()).count()
    }

    fn gang_size_range(&self) -> (usize, usize) {
        let sizes = self.gangs.iter().map(|g| g.members.len());
        (sizes.clone().min().unwrap_or(0), sizes.max().unwrap_or(0))
    }
}

/// Gang sizes uniform in gang_min..=gang_max (min-available = size), ~plain_percent plain pods,
/// pods of 100m–500m cpu; creation interleaves up to `open_units` gangs/plain pods at a time.
fn build_workload(p: &Params) -> Workload {
    let mut rng = Rng(p.seed);
    let plain_target = (p.pods * p.plain_percent + 50) / 100;
    let mut left = p.pods - plain_target.min(p.pods);
    let mut sizes = Vec::new();
    while left >= p.gang_min {
        let mut s = rng.range(p.gang_min, p.gang_max.min(left));
        let rest = left - s;
        if rest > 0 && rest < p.gang_min {
            // The remainder could not form a gang: grow this one, or shrink it to leave one.
            if s + rest <= p.gang_max {
                s += rest;
            } else if s >= 2 * p.gang_min - rest {
                s -= p.gang_min - rest;
            }
        }
        sizes.push(s);
        left -= s;
    }
    let plain = p.pods - sizes.iter().sum::<usize>();

    let cpu = |rng: &mut Rng| {
        let lo = p.cpu_min.div_ceil(10) as usize;
        let hi = (p.cpu_max / 10).max(lo as u32) as usize;
        (rng.range(lo, hi) * 10) as u32
    };
    let mut pods = Vec::with_capacity(p.pods);
    let mut gangs = Vec::with_capacity(sizes.len());
    for (g, &s) in sizes.iter().enumerate() {
        let name = format!("g{g:04}");
        let mut members = Vec::with_capacity(s);
        for m in 0..s {
            members.push(pods.len());
            pods.push(PodPlan {
                name: format!("{name}-{m:02}"),
                gang: Some(g),
                cpu_milli: cpu(&mut rng),
            });
        }
        gangs.push(GangPlan { name, members });
    }
    // Units: a gang (its members in order) or one plain pod.
    let mut units: Vec<Vec<usize>> = gangs.iter().map(|g| g.members.clone()).collect();
    for j in 0..plain {
        units.push(vec![pods.len()]);
        pods.push(PodPlan {
            name: format!("p{j:05}"),
            gang: None,
            cpu_milli: cpu(&mut rng),
        });
    }
    for i in (1..units.len()).rev() {
        let j = rng.range(0, i);
        units.swap(i, j);
    }
    // Interleave: keep `open_units` units open, emit the next pod of a random open one.
    let mut order = Vec::with_capacity(pods.len());
    let mut queue = units.into_iter();
    let mut open: Vec<(Vec<usize>, usize)> = Vec::new();
    loop {
        while open.len() < p.open_units.max(1) {
            match queue.next() {
                Some(u) => open.push((u, 0)),
                None => break,
            }
        }
        if open.is_empty() {
            break;
        }
        let k = rng.range(0, open.len() - 1);
        let (u, next) = &mut open[k];
        order.push(u[*next]);
        *next += 1;
        if *next == u.len() {
            open.swap_remove(k);
        }
    }
    Workload { pods, gangs, order }
}

fn pod_object(w: &Workload, i: usize, mode: Mode) -> Pod {
    let plan = &w.pods[i];
    let mut b = PodBuilder::new(NS, &plan.name)
        .cpu(&format!("{}m", plan.cpu_milli))
        .memory("256Mi");
    // The same gang keys in every configuration: vanilla ignores them, native reads only
    // spec.schedulingGroup.
    if let Some(g) = plan.gang {
        let gang = &w.gangs[g];
        b = b.gang(GangKey::Muster, &gang.name, gang.members.len() as u32);
    }
    let mut pod = b.build();
    if mode == Mode::Native {
        if let (Some(g), Some(spec)) = (plan.gang, pod.spec.as_mut()) {
            spec.scheduling_group = Some(PodSchedulingGroup {
                pod_group_name: Some(w.gangs[g].name.clone()),
            });
        }
    }
    pod
}

fn pod_group_object(g: &GangPlan) -> PodGroup {
    PodGroup {
        metadata: ObjectMeta {
            name: Some(g.name.clone()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        spec: PodGroupSpec {
            scheduling_policy: PodGroupSchedulingPolicy {
                gang: Some(GangSchedulingPolicy {
                    min_count: g.members.len() as i32,
                }),
                ..Default::default()
            },
            ..Default::default()
        },
        ..Default::default()
    }
}

// ------------------------------------------------------------------------------------------
// Measurement

/// What the watch saw: when each pod was first seen bound.
struct Tracker {
    index: HashMap<String, usize>,
    bound_at: Vec<Option<Instant>>,
    bound: usize,
    watch_errors: usize,
    last_watch_error: Option<String>,
}

async fn watch_bound(client: Client, tracker: Arc<Mutex<Tracker>>, ready: Arc<Notify>) {
    let api: Api<Pod> = Api::namespaced(client, NS);
    let cfg = watcher::Config::default().fields("spec.nodeName!=");
    let mut stream = watcher::watcher(api, cfg).default_backoff().boxed();
    while let Some(ev) = stream.next().await {
        let now = Instant::now();
        match ev {
            Ok(Event::Apply(p)) | Ok(Event::InitApply(p)) => {
                if k8s::pod_node(&p).is_none() {
                    continue;
                }
                let mut t = tracker.lock().unwrap();
                if let Some(&i) = t.index.get(k8s::pod_name(&p)) {
                    if t.bound_at[i].is_none() {
                        t.bound_at[i] = Some(now);
                        t.bound += 1;
                    }
                }
            }
            Ok(Event::InitDone) => ready.notify_one(),
            Ok(_) => {}
            Err(e) => {
                let mut t = tracker.lock().unwrap();
                t.watch_errors += 1;
                t.last_watch_error = Some(e.to_string());
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    t: f64,
    bound: usize,
}

#[derive(Debug, Default, Clone, Copy)]
struct Dist {
    n: usize,
    p50: f64,
    p90: f64,
    p99: f64,
    max: f64,
    mean: f64,
}

/// Nearest-rank percentiles (scheduler_perf: `sorted[ceil(n*p/100)-1]`).
fn dist(mut v: Vec<f64>) -> Option<Dist> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let at = |p: usize| v[((n * p).div_ceil(100)).clamp(1, n) - 1];
    Some(Dist {
        n,
        p50: at(50),
        p90: at(90),
        p99: at(99),
        max: v[n - 1],
        mean: v.iter().sum::<f64>() / n as f64,
    })
}

/// scheduler_perf's throughput collector on our samples: skip until something is bound, skip
/// the first sample, merge intervals in which nothing got bound into the next non-empty one.
fn throughput_samples(samples: &[Sample]) -> Vec<f64> {
    let mut out = Vec::new();
    let mut started = false;
    let (mut last_n, mut last_t, mut skipped) = (0usize, 0f64, 0usize);
    for s in samples {
        if s.bound == 0 {
            continue;
        }
        if !started {
            started = true;
            last_n = s.bound;
            last_t = s.t;
            continue;
        }
        let new = s.bound - last_n;
        if new == 0 {
            skipped += 1;
            continue;
        }
        let tput = new as f64 / (s.t - last_t);
        out.extend(std::iter::repeat_n(tput, skipped + 1));
        last_n = s.bound;
        last_t = s.t;
        skipped = 0;
    }
    out
}

#[derive(Debug, Clone)]
enum Status {
    Completed,
    /// Ran, but not every pod was bound by the deadline.
    Incomplete(String),
    /// Native gang scheduling could not be enabled (why).
    NotEnabled(String),
    /// The run itself broke (control plane, muster, API errors).
    Failed(String),
}

#[derive(Debug, Clone)]
struct RunResult {
    mode: Mode,
    /// 1-based.
    round: usize,
    status: Status,
    notes: Vec<String>,
    total: usize,
    bound: usize,
    startup_secs: f64,
    create_secs: Option<f64>,
    all_bound_secs: Option<f64>,
    samples: Vec<Sample>,
    tput: Option<Dist>,
    overall_pps: Option<f64>,
    gang_latency: Option<Dist>,
    gangs_complete: usize,
    pod_latency: Option<Dist>,
    partial_observations: usize,
    max_gang_spread: Option<f64>,
    overcommit: Option<std::result::Result<(), String>>,
    cpu: Vec<(String, f64)>,
    /// CPU seconds used by processes not part of this run during the measured phase, and the
    /// machine's capacity in that time.
    other_cpu: Option<(f64, f64)>,
    /// Share of the machine other processes used just before the measured phase.
    others_before: Option<f64>,
    muster_summary: Vec<String>,
    scheduler_summary: Vec<String>,
    native_groups_scheduled: Option<(usize, usize)>,
    /// API requests during the measured phase: "VERB resource", count, summed latency.
    api_requests: Vec<(String, f64, f64)>,
    /// Events in the namespace at the end: "component reason" → count (series included).
    events: Vec<(String, usize)>,
    wall_secs: f64,
}

impl RunResult {
    fn new(mode: Mode, round: usize, total: usize) -> Self {
        Self {
            mode,
            round,
            status: Status::Failed("did not run".into()),
            notes: Vec::new(),
            total,
            bound: 0,
            startup_secs: 0.0,
            create_secs: None,
            all_bound_secs: None,
            samples: Vec::new(),
            tput: None,
            overall_pps: None,
            gang_latency: None,
            gangs_complete: 0,
            pod_latency: None,
            partial_observations: 0,
            max_gang_spread: None,
            overcommit: None,
            cpu: Vec::new(),
            other_cpu: None,
            others_before: None,
            muster_summary: Vec::new(),
            scheduler_summary: Vec::new(),
            native_groups_scheduled: None,
            api_requests: Vec::new(),
            events: Vec::new(),
            wall_secs: 0.0,
        }
    }

    fn completed(&self) -> bool {
        matches!(self.status, Status::Completed)
    }

    /// Share of the machine's CPU that processes outside this run used while it was measured.
    fn others_share(&self) -> Option<f64> {
        self.other_cpu
            .filter(|(_, cap)| *cap > 0.0)
            .map(|(o, cap)| o / cap)
    }

    /// scheduler_perf's average when there are enough per-second samples, else pods/s overall.
    fn avg_pps(&self) -> Option<f64> {
        self.tput
            .filter(|d| d.n >= 3)
            .map(|d| d.mean)
            .or(self.overall_pps)
    }
}

// ------------------------------------------------------------------------------------------
// Process CPU time and metrics scraping

fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

/// utime + stime of a process, in seconds.
fn cpu_seconds(pid: u32, ticks: f64) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ut: f64 = f.get(11)?.parse().ok()?;
    let st: f64 = f.get(12)?.parse().ok()?;
    Some((ut + st) / ticks)
}

/// (busy, total) CPU seconds of the whole machine since boot, from /proc/stat.
fn system_cpu(ticks: f64) -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: f64 = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4).unwrap_or(&0.0);
    Some(((total - idle) / ticks, total / ticks))
}

/// Waits (up to `max`) until processes other than `ours` use less than 10% of the machine in
/// three 2 s windows in a row; returns what others used in the last window (fraction of the
/// machine).
async fn wait_for_quiet(ours: &[(String, u32)], ticks: f64, max: Duration) -> f64 {
    let start = Instant::now();
    let mut quiet_windows = 0;
    loop {
        let (b0, t0) = system_cpu(ticks).unwrap_or_default();
        let o0: f64 = cpu_snapshot(ours, ticks).iter().map(|x| x.1).sum();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (b1, t1) = system_cpu(ticks).unwrap_or_default();
        let o1: f64 = cpu_snapshot(ours, ticks).iter().map(|x| x.1).sum();
        let others = if t1 > t0 {
            ((b1 - b0) - (o1 - o0)).max(0.0) / (t1 - t0)
        } else {
            0.0
        };
        quiet_windows = if others < 0.10 { quiet_windows + 1 } else { 0 };
        if quiet_windows >= 3 || start.elapsed() >= max {
            return others;
        }
        if quiet_windows > 0 {
            continue;
        }
        eprintln!(
            "e2e_throughput: other processes use {:.0}% of the CPUs; waiting for a quiet machine ({:.0}s of {:.0}s)",
            others * 100.0,
            start.elapsed().as_secs_f64(),
            max.as_secs_f64()
        );
    }
}

fn cpu_snapshot(procs: &[(String, u32)], ticks: f64) -> Vec<(String, f64)> {
    procs
        .iter()
        .map(|(n, pid)| (n.clone(), cpu_seconds(*pid, ticks).unwrap_or(f64::NAN)))
        .collect()
}

/// The `--secure-port` kube-scheduler was started with (from its command line).
fn scheduler_port(pid: u32) -> Option<u16> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    cmdline
        .split(|b| *b == 0)
        .filter_map(|a| std::str::from_utf8(a).ok())
        .find_map(|a| a.strip_prefix("--secure-port="))
        .and_then(|p| p.parse().ok())
}

fn scrape_scheduler_metrics(pid: u32) -> Result<String> {
    let port = scheduler_port(pid).ok_or_else(|| anyhow!("no --secure-port in its cmdline"))?;
    let out = std::process::Command::new("curl")
        .args(["-sSk", "-m", "10", "--fail"])
        .arg(format!("https://127.0.0.1:{port}/metrics"))
        .output()
        .context("running curl")?;
    if !out.status.success() {
        bail!("curl: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// kube-apiserver's /metrics, read with the admin token of the harness's kubeconfig.
fn scrape_apiserver_metrics(cp: &ControlPlane) -> Result<String> {
    let kubeconfig = std::fs::read_to_string(cp.kubeconfig_path())?;
    let token = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("token:"))
        .map(str::trim)
        .ok_or_else(|| anyhow!("no token in {}", cp.kubeconfig_path().display()))?;
    let out = std::process::Command::new("curl")
        .args(["-sSk", "-m", "10", "--fail", "-H"])
        .arg(format!("Authorization: Bearer {token}"))
        .arg(format!("{}/metrics", cp.apiserver_url()))
        .output()
        .context("running curl")?;
    if !out.status.success() {
        bail!("curl: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// kube-apiserver requests by "VERB resource[/subresource]": (count, summed latency seconds).
fn apiserver_requests(text: &str) -> BTreeMap<String, (f64, f64)> {
    let mut out: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for (n, labels, v) in text.lines().filter_map(parse_sample) {
        let is_count = n == "apiserver_request_total";
        let is_sum = n == "apiserver_request_duration_seconds_sum";
        if !is_count && !is_sum {
            continue;
        }
        let get = |k: &str| labels.iter().find(|(x, _)| *x == k).map_or("", |l| l.1);
        if get("resource").is_empty() {
            continue;
        }
        let mut key = format!("{} {}", get("verb"), get("resource"));
        if !get("subresource").is_empty() {
            key = format!("{key}/{}", get("subresource"));
        }
        let e = out.entry(key).or_default();
        if is_count {
            e.0 += v;
        } else {
            e.1 += v;
        }
    }
    out
}

/// The requests served between two scrapes, biggest first (WATCH excluded: long-running).
fn apiserver_delta(before: &str, after: &str) -> Vec<(String, f64, f64)> {
    let b = apiserver_requests(before);
    let mut v: Vec<(String, f64, f64)> = apiserver_requests(after)
        .into_iter()
        .filter(|(k, _)| !k.starts_with("WATCH"))
        .map(|(k, (c, s))| {
            let (c0, s0) = b.get(&k).copied().unwrap_or_default();
            (k, c - c0, s - s0)
        })
        .filter(|(_, c, _)| *c >= 1.0)
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1));
    v
}

/// One sample line of Prometheus text: name, labels, value.
type MetricSample<'a> = (&'a str, Vec<(&'a str, &'a str)>, f64);

fn parse_sample(line: &str) -> Option<MetricSample<'_>> {
    if line.starts_with('#') || line.trim().is_empty() {
        return None;
    }
    let (head, value) = line.rsplit_once(' ')?;
    let value: f64 = value.trim().parse().ok()?;
    let (name, labels) = match head.split_once('{') {
        Some((n, rest)) => (n, rest.trim_end_matches('}')),
        None => (head, ""),
    };
    let labels = labels
        .split("\",")
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.trim(), v.trim().trim_matches('"')))
        })
        .collect();
    Some((name, labels, value))
}

/// Sum of the samples of `name` whose labels include all of `filter`.
fn metric_sum(text: &str, name: &str, filter: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter_map(parse_sample)
        .filter(|(n, labels, _)| *n == name && filter.iter().all(|f| labels.iter().any(|l| l == f)))
        .map(|(_, _, v)| v)
        .fold(0.0, |a, b| a + b)
}

/// Quantile `q` of a cumulative histogram `name` (upper bound of the bucket that reaches it).
fn histogram_quantile(text: &str, name: &str, filter: &[(&str, &str)], q: f64) -> Option<f64> {
    let bucket = format!("{name}_bucket");
    let mut buckets: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    for (n, labels, v) in text.lines().filter_map(parse_sample) {
        if n != bucket || !filter.iter().all(|f| labels.iter().any(|l| l == f)) {
            continue;
        }
        let le = labels.iter().find(|(k, _)| *k == "le")?.1;
        let le: f64 = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().ok()?
        };
        let e = buckets.entry(le.to_bits()).or_insert((le, 0.0));
        e.1 += v;
    }
    let mut b: Vec<(f64, f64)> = buckets.into_values().collect();
    b.sort_by(|x, y| x.0.total_cmp(&y.0));
    let total = b.last()?.1;
    if total <= 0.0 {
        return None;
    }
    b.iter().find(|(_, c)| *c >= q * total).map(|(le, _)| *le)
}

fn fmt_secs_short(s: f64) -> String {
    if s.is_infinite() {
        "> last bucket".into()
    } else if s < 0.001 {
        format!("{:.0} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

fn summarize_muster_metrics(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for verb in ["filter", "prioritize", "bind"] {
        let f = [("verb", verb)];
        let count = metric_sum(text, "muster_request_duration_seconds_count", &f);
        if count == 0.0 {
            continue;
        }
        let sum = metric_sum(text, "muster_request_duration_seconds_sum", &f);
        let q = |q| {
            histogram_quantile(text, "muster_request_duration_seconds", &f, q)
                .map(fmt_secs_short)
                .unwrap_or_else(|| "?".into())
        };
        out.push(format!(
            "`{verb}`: {count:.0} requests, mean {}, p50 ≤ {}, p99 ≤ {}, total {:.2} s",
            fmt_secs_short(sum / count),
            q(0.5),
            q(0.99),
            sum
        ));
    }
    let mut outcomes: BTreeMap<String, f64> = BTreeMap::new();
    for (n, labels, v) in text.lines().filter_map(parse_sample) {
        if n == "muster_requests_total" {
            let key = labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            *outcomes.entry(key).or_default() += v;
        }
    }
    if !outcomes.is_empty() {
        out.push(format!(
            "requests by outcome: {}",
            outcomes
                .iter()
                .map(|(k, v)| format!("{k}: {v:.0}"))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    for (name, what) in [
        ("muster_gangs_placed_total", "gangs placed"),
        (
            "muster_quorum_waits_total",
            "bind calls answered 'waiting for quorum'",
        ),
        ("muster_bind_failures_total", "bind failures"),
        ("muster_gang_timeouts_total", "gang timeouts"),
        ("muster_events_dropped_total", "Events dropped"),
    ] {
        out.push(format!("{what}: {:.0}", metric_sum(text, name, &[])));
    }
    out
}

fn summarize_scheduler_metrics(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let attempts: Vec<String> = ["scheduled", "unschedulable", "error"]
        .iter()
        .map(|r| {
            format!(
                "{r} {:.0}",
                metric_sum(text, "scheduler_schedule_attempts_total", &[("result", r)])
            )
        })
        .collect();
    out.push(format!("schedule attempts: {}", attempts.join(", ")));
    for (name, what) in [
        (
            "scheduler_scheduling_attempt_duration_seconds",
            "scheduling attempt (algorithm incl. extender filter/prioritize)",
        ),
        (
            "scheduler_pod_scheduling_sli_duration_seconds",
            "pod scheduling SLI (queue in → bound, excl. gating)",
        ),
    ] {
        let count = metric_sum(text, &format!("{name}_count"), &[]);
        if count > 0.0 {
            let sum = metric_sum(text, &format!("{name}_sum"), &[]);
            let p99 = histogram_quantile(text, name, &[], 0.99)
                .map(fmt_secs_short)
                .unwrap_or_else(|| "?".into());
            out.push(format!(
                "{what}: n={count:.0}, mean {}, p99 ≤ {p99}",
                fmt_secs_short(sum / count)
            ));
        }
    }
    let algo_n = metric_sum(
        text,
        "scheduler_scheduling_algorithm_duration_seconds_count",
        &[],
    );
    if algo_n > 0.0 {
        let algo = metric_sum(
            text,
            "scheduler_scheduling_algorithm_duration_seconds_sum",
            &[],
        );
        let in_tree: f64 = ["PreFilter", "Filter", "PreScore", "Score"]
            .iter()
            .map(|ep| {
                metric_sum(
                    text,
                    "scheduler_framework_extension_point_duration_seconds_sum",
                    &[("extension_point", ep)],
                )
            })
            .sum();
        out.push(format!(
            "scheduling algorithm (the serial part of a cycle): {algo:.1} s over {algo_n:.0} attempts = \
             {} per attempt, of which in-tree PreFilter/Filter/PreScore/Score {} and extender calls + \
             the rest {}",
            fmt_secs_short(algo / algo_n),
            fmt_secs_short(in_tree / algo_n),
            fmt_secs_short((algo - in_tree).max(0.0) / algo_n)
        ));
    }
    for ep in ["Filter", "Score", "Permit", "Bind", "PreBind", "Reserve"] {
        let f = [("extension_point", ep), ("status", "Success")];
        let count = metric_sum(
            text,
            "scheduler_framework_extension_point_duration_seconds_count",
            &f,
        );
        if count > 0.0 {
            let sum = metric_sum(
                text,
                "scheduler_framework_extension_point_duration_seconds_sum",
                &f,
            );
            out.push(format!(
                "extension point {ep} (in-tree plugins): n={count:.0}, mean {}",
                fmt_secs_short(sum / count)
            ));
        }
    }
    let binding_count = metric_sum(text, "scheduler_binding_duration_seconds_count", &[]);
    if binding_count > 0.0 {
        let sum = metric_sum(text, "scheduler_binding_duration_seconds_sum", &[]);
        out.push(format!(
            "binding: n={binding_count:.0}, mean {}",
            fmt_secs_short(sum / binding_count)
        ));
    }
    out
}

// ------------------------------------------------------------------------------------------
// One configuration

async fn create_nodes(client: &Client, p: &Params) -> Result<()> {
    let sem = Arc::new(Semaphore::new(16));
    let mut set = JoinSet::new();
    for i in 0..p.nodes {
        let permit = sem.clone().acquire_owned().await?;
        let client = client.clone();
        let shape = NodeShape::cpu(&p.node_cpu)
            .memory(&p.node_memory)
            .pods(p.node_pods);
        set.spawn(async move {
            let _permit = permit;
            k8s::add_node(&client, &format!("node-{i:04}"), &shape).await
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    Ok(())
}

async fn create_pod_groups(client: &Client, w: &Workload) -> Result<()> {
    let api: Api<PodGroup> = Api::namespaced(client.clone(), NS);
    let sem = Arc::new(Semaphore::new(16));
    let mut set = JoinSet::new();
    for g in &w.gangs {
        let permit = sem.clone().acquire_owned().await?;
        let api = api.clone();
        let pg = pod_group_object(g);
        set.spawn(async move {
            let _permit = permit;
            api.create(&PostParams::default(), &pg)
                .await
                .with_context(|| {
                    format!(
                        "creating PodGroup {NS}/{}",
                        pg.metadata.name.as_deref().unwrap_or("?")
                    )
                })
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    Ok(())
}

/// Creates a pod, retrying transient errors; `None` if it already existed (409 on a retry).
async fn create_pod(api: &Api<Pod>, pod: &Pod) -> Result<Option<Pod>> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match api.create(&PostParams::default(), pod).await {
            Ok(p) => return Ok(Some(p)),
            Err(kube::Error::Api(e)) if e.code == 409 && attempt > 1 => return Ok(None),
            Err(e) if attempt < 5 => {
                eprintln!(
                    "e2e_throughput: creating pod {} failed (attempt {attempt}): {e}",
                    k8s::pod_name(pod)
                );
                tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
            }
            Err(e) => {
                return Err(e).with_context(|| format!("creating pod {NS}/{}", k8s::pod_name(pod)))
            }
        }
    }
}

struct Created {
    at: Vec<Option<Instant>>,
    errors: Vec<String>,
    scheduling_group_dropped: usize,
    done_at: Option<Instant>,
}

async fn create_all(
    client: Client,
    pods: Vec<(usize, Pod)>,
    concurrency: usize,
    qps: Option<f64>,
    created: Arc<Mutex<Created>>,
) {
    let start = tokio::time::Instant::now();
    let api: Api<Pod> = Api::namespaced(client, NS);
    let sem = Arc::new(Semaphore::new(concurrency));
    let mut set = JoinSet::new();
    let handle =
        |r: std::result::Result<(usize, bool, Result<Option<Pod>>), tokio::task::JoinError>| {
            let mut c = created.lock().unwrap();
            match r {
                Ok((i, wants_group, Ok(p))) => {
                    c.at[i] = Some(Instant::now());
                    if wants_group
                        && p.is_some_and(|p| p.spec.and_then(|s| s.scheduling_group).is_none())
                    {
                        c.scheduling_group_dropped += 1;
                    }
                }
                Ok((_, _, Err(e))) => c.errors.push(format!("{e:#}")),
                Err(e) => c.errors.push(e.to_string()),
            }
        };
    for (k, (i, pod)) in pods.into_iter().enumerate() {
        if let Some(q) = qps {
            tokio::time::sleep_until(start + Duration::from_secs_f64(k as f64 / q)).await;
        }
        let Ok(permit) = sem.clone().acquire_owned().await else {
            break;
        };
        let api = api.clone();
        let wants_group = pod
            .spec
            .as_ref()
            .is_some_and(|s| s.scheduling_group.is_some());
        set.spawn(async move {
            let _permit = permit;
            (i, wants_group, create_pod(&api, &pod).await)
        });
        while let Some(r) = set.try_join_next() {
            handle(r);
        }
    }
    while let Some(r) = set.join_next().await {
        handle(r);
    }
    created.lock().unwrap().done_at = Some(Instant::now());
}

async fn run_mode(mode: Mode, round: usize, p: &Params, w: &Workload, ticks: f64) -> RunResult {
    let t = Instant::now();
    let mut r = RunResult::new(mode, round, w.pods.len());
    eprintln!(
        "e2e_throughput: ==> {} (round {round}/{})",
        mode.title(),
        p.rounds
    );
    if let Err(e) = run_mode_inner(mode, p, w, ticks, &mut r).await {
        let msg = format!("{e:#}");
        r.status = if mode == Mode::Native && r.create_secs.is_none() {
            Status::NotEnabled(msg)
        } else {
            Status::Failed(msg)
        };
    }
    r.wall_secs = t.elapsed().as_secs_f64();
    eprintln!(
        "e2e_throughput: <== {} in {:.0}s: {:?}",
        mode.title(),
        r.wall_secs,
        r.status
    );
    r
}

async fn run_mode_inner(
    mode: Mode,
    p: &Params,
    w: &Workload,
    ticks: f64,
    r: &mut RunResult,
) -> Result<()> {
    let t_start = Instant::now();
    let mut cpo = ControlPlaneOptions::default();
    if mode == Mode::Native {
        cpo.apiserver_args = NATIVE_APISERVER_ARGS
            .iter()
            .map(|s| s.to_string())
            .collect();
    }
    let mut cp = ControlPlane::start(cpo).await.with_context(|| {
        if mode == Mode::Native {
            format!(
                "kube-apiserver did not start with {}",
                NATIVE_APISERVER_ARGS.join(" ")
            )
        } else {
            "starting etcd + kube-apiserver".to_string()
        }
    })?;
    let client = cp.client();
    k8s::create_namespace(&client, NS).await?;
    create_nodes(&client, p).await.context("creating nodes")?;
    if mode == Mode::Native {
        create_pod_groups(&client, w)
            .await
            .context("the PodGroup API (scheduling.k8s.io/v1beta1) is not usable")?;
    }
    let muster = if mode == Mode::Muster {
        let bin = std::env::var_os("E2E_MUSTER_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(MUSTER_BIN));
        let mo = MusterOptions::new(bin, cp.kubeconfig_path(), cp.dir());
        Some(Muster::start(mo).await.context("starting muster")?)
    } else {
        None
    };
    let mut so = SchedulerOptions::default();
    so.args.push(SCHEDULER_METRICS_ARG.into());
    match &muster {
        Some(m) => {
            so.config = Some(p.muster_scheduler_config.clone());
            so.extender_base_url = Some(m.url());
        }
        None => {
            let path = cp.dir().join("bench-vanilla-scheduler.yaml");
            std::fs::write(&path, VANILLA_SCHEDULER_CONFIG)?;
            so.config = Some(path);
        }
    }
    if mode == Mode::Native {
        so.args
            .extend(NATIVE_SCHEDULER_ARGS.iter().map(|s| s.to_string()));
    }
    cp.start_scheduler(so).await.with_context(|| {
        if mode == Mode::Native {
            format!(
                "kube-scheduler did not start with {}",
                NATIVE_SCHEDULER_ARGS.join(" ")
            )
        } else {
            "starting kube-scheduler".to_string()
        }
    })?;
    r.startup_secs = t_start.elapsed().as_secs_f64();

    let mut procs: Vec<(String, u32)> = cp
        .processes()
        .map(|p| (p.name().to_string(), p.pid()))
        .collect();
    if let Some(pid) = muster.as_ref().and_then(Muster::pid) {
        procs.push(("muster".into(), pid));
    }
    procs.push(("bench (creator + watch)".into(), std::process::id()));
    let scheduler_pid = procs
        .iter()
        .find(|(n, _)| n == "kube-scheduler")
        .map(|(_, pid)| *pid);

    // Watch bound pods before the first create.
    let tracker = Arc::new(Mutex::new(Tracker {
        index: w
            .pods
            .iter()
            .enumerate()
            .map(|(i, pp)| (pp.name.clone(), i))
            .collect(),
        bound_at: vec![None; w.pods.len()],
        bound: 0,
        watch_errors: 0,
        last_watch_error: None,
    }));
    let ready = Arc::new(Notify::new());
    let watch = tokio::spawn(watch_bound(client.clone(), tracker.clone(), ready.clone()));
    tokio::time::timeout(Duration::from_secs(30), ready.notified())
        .await
        .map_err(|_| anyhow!("the watch of bound pods did not sync within 30s"))?;

    let pods: Vec<(usize, Pod)> = w
        .order
        .iter()
        .map(|&i| (i, pod_object(w, i, mode)))
        .collect();
    let created = Arc::new(Mutex::new(Created {
        at: vec![None; w.pods.len()],
        errors: Vec::new(),
        scheduling_group_dropped: 0,
        done_at: None,
    }));
    if !p.quiet_wait.is_zero() {
        r.others_before = Some(wait_for_quiet(&procs, ticks, p.quiet_wait).await);
    }
    let api_before = scrape_apiserver_metrics(&cp);
    let sys0 = system_cpu(ticks);
    let cpu0 = cpu_snapshot(&procs, ticks);
    let t0 = Instant::now();
    let deadline = t0 + p.timeout;
    let creator = tokio::spawn(create_all(
        client.clone(),
        pods,
        p.concurrency,
        p.create_qps,
        created.clone(),
    ));

    // Sample once a second until everything is bound or the deadline passes.
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::from_std(t0 + Duration::from_secs(1)),
        Duration::from_secs(1),
    );
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let total = w.pods.len();
    let mut first_partial: Vec<Option<Instant>> = vec![None; w.gangs.len()];
    let mut last_progress = (0usize, Instant::now());
    loop {
        tick.tick().await;
        let now = Instant::now();
        let bound = {
            let t = tracker.lock().unwrap();
            for (g, gang) in w.gangs.iter().enumerate() {
                let times: Vec<Instant> =
                    gang.members.iter().filter_map(|&i| t.bound_at[i]).collect();
                if !times.is_empty() && times.len() < gang.members.len() {
                    let first = *times.iter().min().unwrap();
                    first_partial[g].get_or_insert(first);
                    if now.duration_since(first) > p.grace {
                        r.partial_observations += 1;
                    }
                }
            }
            t.bound
        };
        r.samples.push(Sample {
            t: now.duration_since(t0).as_secs_f64(),
            bound,
        });
        if bound != last_progress.0 {
            last_progress = (bound, now);
        }
        if !p.smoke && r.samples.len().is_multiple_of(10) {
            eprintln!(
                "e2e_throughput: {} t={:.0}s bound {bound}/{total}",
                mode.slug(),
                now.duration_since(t0).as_secs_f64()
            );
        }
        let creating_failed = !created.lock().unwrap().errors.is_empty() && creator.is_finished();
        if bound >= total || now >= deadline || creating_failed {
            break;
        }
    }
    let cpu1 = cpu_snapshot(&procs, ticks);
    let sys1 = system_cpu(ticks);
    match (&api_before, scrape_apiserver_metrics(&cp)) {
        (Ok(b), Ok(a)) => r.api_requests = apiserver_delta(b, &a),
        (Err(e), _) => r.notes.push(format!("kube-apiserver /metrics: {e:#}")),
        (_, Err(e)) => r.notes.push(format!("kube-apiserver /metrics: {e:#}")),
    }
    if !creator.is_finished() {
        creator.abort();
    }
    let _ = creator.await;
    watch.abort();

    // ---- results
    let (bound_at, watch_errors, last_watch_error) = {
        let t = tracker.lock().unwrap();
        (
            t.bound_at.clone(),
            t.watch_errors,
            t.last_watch_error.clone(),
        )
    };
    let c = {
        let mut g = created.lock().unwrap();
        Created {
            at: std::mem::take(&mut g.at),
            errors: std::mem::take(&mut g.errors),
            scheduling_group_dropped: g.scheduling_group_dropped,
            done_at: g.done_at,
        }
    };
    r.bound = bound_at.iter().flatten().count();
    r.create_secs = c.done_at.map(|d| d.duration_since(t0).as_secs_f64());
    if r.bound == total {
        let last = bound_at.iter().flatten().max().copied().unwrap_or(t0);
        r.all_bound_secs = Some(last.duration_since(t0).as_secs_f64());
    }
    let tput = throughput_samples(&r.samples);
    r.tput = dist(tput);
    if let Some(last) = bound_at.iter().flatten().max() {
        let secs = last.duration_since(t0).as_secs_f64();
        if secs > 0.0 {
            r.overall_pps = Some(r.bound as f64 / secs);
        }
    }
    let mut gang_lat = Vec::new();
    let mut spreads = Vec::new();
    for gang in &w.gangs {
        let bt: Option<Vec<Instant>> = gang.members.iter().map(|&i| bound_at[i]).collect();
        let ct: Option<Vec<Instant>> = gang.members.iter().map(|&i| c.at[i]).collect();
        if let (Some(bt), Some(ct)) = (bt, ct) {
            let last_bound = *bt.iter().max().unwrap();
            let first_bound = *bt.iter().min().unwrap();
            let last_created = *ct.iter().max().unwrap();
            gang_lat.push(
                last_bound
                    .saturating_duration_since(last_created)
                    .as_secs_f64(),
            );
            spreads.push(last_bound.duration_since(first_bound).as_secs_f64());
        }
    }
    r.gangs_complete = gang_lat.len();
    r.gang_latency = dist(gang_lat);
    r.max_gang_spread = spreads.iter().copied().reduce(f64::max);
    r.pod_latency = dist(
        (0..total)
            .filter_map(|i| match (c.at[i], bound_at[i]) {
                (Some(ct), Some(bt)) => Some(bt.saturating_duration_since(ct).as_secs_f64()),
                _ => None,
            })
            .collect(),
    );
    r.cpu = cpu0
        .iter()
        .zip(&cpu1)
        .map(|((n, a), (_, b))| (n.clone(), b - a))
        .collect();
    if let (Some((b0, t0s)), Some((b1, t1s))) = (sys0, sys1) {
        let ours: f64 = r.cpu.iter().map(|x| x.1).filter(|c| c.is_finite()).sum();
        r.other_cpu = Some((((b1 - b0) - ours).max(0.0), t1s - t0s));
    }
    if watch_errors > 0 {
        r.notes.push(format!(
            "the bound-pod watch saw {watch_errors} errors (last: {})",
            last_watch_error.unwrap_or_default()
        ));
    }
    if !c.errors.is_empty() {
        r.notes.push(format!(
            "{} pod creations failed; first: {}",
            c.errors.len(),
            c.errors[0]
        ));
    }
    let dropped = c.scheduling_group_dropped;
    if mode == Mode::Native && dropped > 0 {
        r.notes.push(format!(
            "kube-apiserver dropped spec.schedulingGroup from {dropped} pods (GenericWorkload off in the apiserver?)"
        ));
    }

    r.overcommit = Some(k8s::check_no_overcommit(&client).await?);
    let evs: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), NS);
    match evs.list(&ListParams::default()).await {
        Ok(list) => {
            let mut by: BTreeMap<String, usize> = BTreeMap::new();
            for e in list.items {
                let who = e
                    .reporting_component
                    .filter(|s| !s.is_empty())
                    .or(e.source.and_then(|s| s.component))
                    .unwrap_or_else(|| "?".into());
                let n = e
                    .count
                    .unwrap_or(1)
                    .max(e.series.and_then(|s| s.count).unwrap_or(1))
                    .max(1) as usize;
                *by.entry(format!("{who} {}", e.reason.unwrap_or_default()))
                    .or_default() += n;
            }
            r.events = by.into_iter().collect();
            r.events.sort_by_key(|e| std::cmp::Reverse(e.1));
        }
        Err(e) => r.notes.push(format!("listing Events: {e}")),
    }
    if mode == Mode::Native {
        let api: Api<PodGroup> = Api::namespaced(client.clone(), NS);
        let groups = api.list(&ListParams::default()).await?.items;
        let scheduled = groups
            .iter()
            .filter(|g| {
                g.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c.type_ == "PodGroupInitiallyScheduled" && c.status == "True")
                    })
            })
            .count();
        r.native_groups_scheduled = Some((scheduled, groups.len()));
    }
    std::fs::create_dir_all(&p.out_dir)?;
    let suffix = match (p.smoke, p.rounds) {
        (true, _) => "-smoke".to_string(),
        (false, 1) => String::new(),
        (false, _) => format!("-r{}", r.round),
    };
    if let Some(m) = &muster {
        match m.get("/metrics").await {
            Ok((200, text)) => {
                r.muster_summary = summarize_muster_metrics(&text);
                let path = p
                    .out_dir
                    .join(format!("e2e-throughput{suffix}-muster-metrics.txt"));
                std::fs::write(path, &text)?;
            }
            Ok((code, _)) => r.notes.push(format!("muster /metrics: HTTP {code}")),
            Err(e) => r.notes.push(format!("muster /metrics: {e:#}")),
        }
    }
    if let Some(pid) = scheduler_pid {
        match scrape_scheduler_metrics(pid) {
            Ok(text) => {
                r.scheduler_summary = summarize_scheduler_metrics(&text);
                let path = p.out_dir.join(format!(
                    "e2e-throughput{suffix}-{}-scheduler-metrics.txt",
                    mode.slug()
                ));
                std::fs::write(path, &text)?;
            }
            Err(e) => r.notes.push(format!("kube-scheduler /metrics: {e:#}")),
        }
    }
    // Keep the logs of every run next to the results (small: info level).
    for (name, src) in [
        ("kube-scheduler", cp.dir().join("kube-scheduler.log")),
        ("muster", cp.dir().join("muster.log")),
    ] {
        if src.exists() {
            let dst = p
                .out_dir
                .join(format!("e2e-throughput{suffix}-{}-{name}.log", mode.slug()));
            let _ = std::fs::copy(&src, dst);
        }
    }

    r.status = if r.bound == total {
        Status::Completed
    } else {
        let state = k8s::list_pods(&client, NS).await.ok().map(|pods| {
            let pending: Vec<Pod> = pods
                .into_iter()
                .filter(|p| k8s::pod_node(p).is_none())
                .take(5)
                .collect();
            k8s::describe_pods(&pending)
        });
        Status::Incomplete(format!(
            "{}/{total} pods bound after {:.0}s (no progress for the last {:.0}s); some pending: {}",
            r.bound,
            p.timeout.as_secs_f64(),
            last_progress.1.elapsed().as_secs_f64(),
            state.unwrap_or_default()
        ))
    };
    drop(muster);
    drop(cp);
    Ok(())
}

// ------------------------------------------------------------------------------------------
// Report

fn f1(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.1}"))
}

fn f2(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.2}"))
}

fn status_word(r: &RunResult) -> String {
    match &r.status {
        Status::Completed => "completed".into(),
        Status::Incomplete(_) => "INCOMPLETE".into(),
        Status::NotEnabled(_) => "not enabled".into(),
        Status::Failed(_) => "FAILED".into(),
    }
}

/// The run shown for each configuration: the median by pods/s among its rounds, or a run that
/// did not complete if there is one (problems are not averaged away).
fn representatives(p: &Params, all: &[RunResult]) -> Vec<RunResult> {
    let mut out = Vec::new();
    for &m in &p.modes {
        let mut runs: Vec<&RunResult> = all.iter().filter(|r| r.mode == m).collect();
        if runs.is_empty() {
            continue;
        }
        if let Some(bad) = runs.iter().find(|r| !r.completed()) {
            out.push((*bad).clone());
            continue;
        }
        // Prefer runs the rest of the machine left alone (other processes < 10% of the CPUs).
        if runs
            .iter()
            .any(|r| r.others_share().is_some_and(|o| o < 0.10))
        {
            runs.retain(|r| r.others_share().is_none_or(|o| o < 0.10));
        }
        runs.sort_by(|a, b| {
            a.avg_pps()
                .unwrap_or(0.0)
                .total_cmp(&b.avg_pps().unwrap_or(0.0))
        });
        out.push(runs[(runs.len() - 1) / 2].clone());
    }
    out
}

fn report(p: &Params, w: &Workload, all: &[RunResult], total_secs: f64) -> String {
    let reps = representatives(p, all);
    let results = &reps[..];
    let mut s = String::new();
    let (gmin, gmax) = w.gang_size_range();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let _ = writeln!(
        s,
        "# End-to-end scheduling throughput{}\n",
        if p.smoke { " (smoke)" } else { "" }
    );
    let _ = writeln!(
        s,
        "Stock kube-scheduler {} with etcd + kube-apiserver on this machine ({cores} cores), fresh \
         control plane per configuration, run {}; whole run {:.0} s.\n",
        k8s_version(),
        k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M UTC"),
        total_secs
    );
    let _ = writeln!(s, "muster: {}.\n", muster_version());
    let _ = writeln!(
        s,
        "Workload (seed {}): {} fake nodes ({} cpu, {}, {} pods each); {} pods = {} gangs of \
         {gmin}–{gmax} (min-available = size; {} pods) + {} plain pods; {}m–{}m cpu and 256Mi \
         each. Created by {} concurrent creators{}, {} gangs/plain pods interleaved at a time. \
         Deadline {} s per configuration.\n",
        p.seed,
        p.nodes,
        p.node_cpu,
        p.node_memory,
        p.node_pods,
        w.pods.len(),
        w.gangs.len(),
        w.pods.len() - w.plain(),
        w.plain(),
        p.cpu_min,
        p.cpu_max,
        p.concurrency,
        p.create_qps
            .map_or(String::new(), |q| format!(" paced at {q:.0} pods/s")),
        p.open_units,
        p.timeout.as_secs()
    );
    let vanilla = results
        .iter()
        .find(|r| r.mode == Mode::Vanilla && r.completed());
    let ratio = |r: &RunResult| -> String {
        if r.mode == Mode::Vanilla {
            return "1× / 1×".into();
        }
        let q = |v: Option<f64>, x: Option<f64>| match (v, x) {
            (Some(v), Some(x)) if v > 0.0 => format!("{:.2}×", x / v),
            _ => "–".into(),
        };
        format!(
            "{} / {}",
            q(vanilla.and_then(RunResult::avg_pps), r.avg_pps()),
            q(vanilla.and_then(|v| v.overall_pps), r.overall_pps)
        )
    };
    let _ = writeln!(
        s,
        "| configuration | status | bound | time to all bound (s) | pods/s avg | pods/s p50 / p90 / p99 | \
         pods/s overall | vs (a): avg / overall | gang placement p50 / p99 / max (s) | pod create→bound p50 / p99 (s) | \
         partial-gang samples > {:.0} s | max gang spread (s) | overcommit |",
        p.grace.as_secs_f64()
    );
    let _ = writeln!(
        s,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for r in results {
        let ran = !matches!(r.status, Status::NotEnabled(_) | Status::Failed(_));
        let tput = r.tput.map_or("–".into(), |d| {
            format!("{:.0} / {:.0} / {:.0}", d.p50, d.p90, d.p99)
        });
        let gl = r.gang_latency.map_or("–".into(), |d| {
            format!("{:.2} / {:.2} / {:.2}", d.p50, d.p99, d.max)
        });
        let pl = r
            .pod_latency
            .map_or("–".into(), |d| format!("{:.2} / {:.2}", d.p50, d.p99));
        let oc = match &r.overcommit {
            Some(Ok(())) => "none".to_string(),
            Some(Err(e)) => format!("**YES**: {}", e.chars().take(120).collect::<String>()),
            None => "–".into(),
        };
        if ran {
            let _ = writeln!(
                s,
                "| {} | {} | {}/{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.mode.title(),
                status_word(r),
                r.bound,
                r.total,
                f1(r.all_bound_secs),
                f1(r.tput.map(|d| d.mean)),
                tput,
                f1(r.overall_pps),
                ratio(r),
                gl,
                pl,
                r.partial_observations,
                f2(r.max_gang_spread),
                oc
            );
        } else {
            let _ = writeln!(
                s,
                "| {} | {} | – | – | – | – | – | – | – | – | – | – | – |",
                r.mode.title(),
                status_word(r)
            );
        }
    }
    let _ = writeln!(
        s,
        "\npods/s avg and percentiles: scheduler_perf's way — bound pods (`spec.nodeName` set, seen \
         by a watch) sampled once a second; the first sample and empty seconds are folded as \
         scheduler_perf does; percentiles over the per-second rates. pods/s overall = pods bound / \
         time from the first create to the last binding. Gang placement = last member created → \
         all members bound. Partial-gang samples: a gang seen with some but not all members bound \
         longer than the grace after its first binding, counted once per sample. Gang spread = \
         last − first member binding.\n"
    );

    if p.rounds > 1 {
        let _ = writeln!(
            s,
            "Each configuration ran {} times, interleaved (a, b, c, a, b, c, …), each on a fresh \
             control plane; the table shows the median run (by pods/s avg) of each, among the runs \
             during which processes outside the benchmark used < 10% of the CPUs if there are \
             any. All runs:\n",
            p.rounds
        );
        let _ = writeln!(
            s,
            "| configuration | round | status | pods/s avg | pods/s overall | time to all bound (s) | gang placement p50 / p99 (s) | scheduling algorithm per attempt | CPU used by other processes |\n|---|---:|---|---:|---:|---:|---:|---|---:|"
        );
        for m in &p.modes {
            for r in all.iter().filter(|r| r.mode == *m) {
                let algo = r
                    .scheduler_summary
                    .iter()
                    .find_map(|l| {
                        l.split_once(" attempts = ")
                            .map(|(_, rest)| rest.split(',').next().unwrap_or(rest).to_string())
                    })
                    .unwrap_or_else(|| "–".into());
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    r.mode.title(),
                    r.round,
                    status_word(r),
                    f1(r.tput.map(|d| d.mean)),
                    f1(r.overall_pps),
                    f1(r.all_bound_secs),
                    r.gang_latency
                        .map_or("–".into(), |d| format!("{:.2} / {:.2}", d.p50, d.p99)),
                    algo,
                    r.others_share()
                        .map_or("–".into(), |o| format!("{:.0}%", 100.0 * o))
                );
            }
        }
        s.push('\n');
    }

    // Targets.
    let get = |m: Mode| results.iter().find(|r| r.mode == m && r.completed());
    let (mv, mm, mn) = (get(Mode::Vanilla), get(Mode::Muster), get(Mode::Native));
    if mm.is_some() || results.iter().any(|r| r.mode == Mode::Muster) {
        let _ = writeln!(s, "| target | measured | verdict |\n|---|---|---|");
        let verdict = |ok: bool| if ok { "met" } else { "**MISSED**" };
        match (
            mv.and_then(RunResult::avg_pps),
            mm.and_then(RunResult::avg_pps),
        ) {
            (Some(v), Some(m)) => {
                let _ = writeln!(
                    s,
                    "| muster ≥ 0.8 × vanilla throughput | {:.2}× ({m:.1} vs {v:.1} pods/s) | {} |",
                    m / v,
                    verdict(m >= 0.8 * v)
                );
            }
            _ => {
                let _ = writeln!(
                    s,
                    "| muster ≥ 0.8 × vanilla throughput | – | not measured |"
                );
            }
        }
        match (
            mn.and_then(RunResult::avg_pps),
            mm.and_then(RunResult::avg_pps),
        ) {
            (Some(n), Some(m)) => {
                let _ = writeln!(
                    s,
                    "| muster ≥ native gang scheduling | {:.2}× ({m:.1} vs {n:.1} pods/s) | {} |",
                    m / n,
                    verdict(m >= n)
                );
            }
            _ => {
                let _ = writeln!(
                    s,
                    "| muster ≥ native gang scheduling | – | not measured (see (c) below) |"
                );
            }
        }
        match mm.and_then(|r| r.gang_latency) {
            Some(d) => {
                let _ = writeln!(
                    s,
                    "| muster gang placement p99 ≤ 2 s | {:.2} s (p50 {:.2} s, max {:.2} s) | {} |",
                    d.p99,
                    d.p50,
                    d.max,
                    verdict(d.p99 <= 2.0)
                );
            }
            None => {
                let _ = writeln!(s, "| muster gang placement p99 ≤ 2 s | – | not measured |");
            }
        }
        if let Some(m) = results.iter().find(|r| r.mode == Mode::Muster) {
            let ok = m.partial_observations == 0 && matches!(m.overcommit, Some(Ok(())));
            let _ = writeln!(
                s,
                "| muster: no gang partially bound > {:.0} s, no node overcommitted | {} partial samples, max spread {} s, overcommit {} | {} |",
                p.grace.as_secs_f64(),
                m.partial_observations,
                f2(m.max_gang_spread),
                match &m.overcommit {
                    Some(Ok(())) => "none",
                    Some(Err(_)) => "YES",
                    None => "not checked",
                },
                verdict(ok)
            );
        }
        s.push('\n');
    }

    // Per-configuration details.
    for r in results {
        if p.rounds > 1 {
            let _ = writeln!(s, "## {} (round {}, the median)\n", r.mode.title(), r.round);
        } else {
            let _ = writeln!(s, "## {}\n", r.mode.title());
        }
        match &r.status {
            Status::Completed => {}
            Status::Incomplete(m) => {
                let _ = writeln!(s, "Incomplete: {m}\n");
            }
            Status::NotEnabled(m) => {
                let _ = writeln!(s, "Native gang scheduling could not be enabled: {m}\n");
            }
            Status::Failed(m) => {
                let _ = writeln!(s, "Failed: {m}\n");
            }
        }
        if r.mode == Mode::Native {
            let _ = writeln!(
                s,
                "- enabled with: kube-apiserver `{}`; kube-scheduler `{}` (its GangScheduling \
                 plugin joins the default plugins); one `scheduling.k8s.io/v1beta1` PodGroup per \
                 gang (`spec.schedulingPolicy.gang.minCount` = size), created before the pods; \
                 pods name it in `spec.schedulingGroup.podGroupName`",
                NATIVE_APISERVER_ARGS.join(" "),
                NATIVE_SCHEDULER_ARGS.join(" ")
            );
            if let Some((done, all)) = r.native_groups_scheduled {
                let _ = writeln!(
                    s,
                    "- PodGroups with condition PodGroupInitiallyScheduled=True (set by kube-scheduler): {done}/{all}"
                );
            }
        }
        if r.startup_secs > 0.0 {
            let _ = writeln!(
                s,
                "- start-up (control plane, {} nodes{}, scheduler): {:.1} s; pods created in {} s; whole configuration {:.0} s",
                p.nodes,
                if r.mode == Mode::Muster { ", muster" } else { "" },
                r.startup_secs,
                f1(r.create_secs),
                r.wall_secs
            );
        }
        if let Some(d) = r.gang_latency {
            let _ = writeln!(
                s,
                "- gangs fully bound: {}/{}; placement mean {:.2} s, p90 {:.2} s",
                r.gangs_complete,
                w.gangs.len(),
                d.mean,
                d.p90
            );
        }
        if let Some(d) = r.tput {
            let _ = writeln!(
                s,
                "- per-second throughput over {} samples: mean {:.1}, p50 {:.0}, max {:.0} pods/s",
                d.n, d.mean, d.p50, d.max
            );
        }
        if !r.cpu.is_empty() {
            let measured = r.samples.last().map_or(0.0, |x| x.t);
            let parts: Vec<String> = r.cpu.iter().map(|(n, c)| format!("{n} {c:.1}")).collect();
            let sum: f64 = r.cpu.iter().map(|(_, c)| c).filter(|c| c.is_finite()).sum();
            let _ = writeln!(
                s,
                "- CPU seconds during the measured {measured:.0} s: {} (total {sum:.1} of {:.0} available){}",
                parts.join(", "),
                measured * cores as f64,
                match r.other_cpu {
                    Some((o, cap)) => format!(
                        "; processes outside this run: {o:.1} CPU-s ({:.0}% of the machine){}",
                        100.0 * o / cap.max(1e-9),
                        r.others_before.map_or(String::new(), |b| format!(
                            ", {:.0}% just before",
                            100.0 * b
                        ))
                    ),
                    None => String::new(),
                }
            );
        }
        if !r.api_requests.is_empty() {
            let total: f64 = r.api_requests.iter().map(|x| x.1).sum();
            let top: Vec<String> = r
                .api_requests
                .iter()
                .take(10)
                .map(|(k, c, secs)| format!("{k} {c:.0} ({secs:.1} s)"))
                .collect();
            let _ = writeln!(
                s,
                "- kube-apiserver requests in the measured phase (not WATCH): {total:.0}, {:.2} per pod; \
                 by verb and resource (count, summed latency): {}",
                total / r.total.max(1) as f64,
                top.join(", ")
            );
        }
        if !r.events.is_empty() {
            let total: usize = r.events.iter().map(|x| x.1).sum();
            let parts: Vec<String> = r.events.iter().map(|(k, n)| format!("{k} {n}")).collect();
            let _ = writeln!(
                s,
                "- Events at the end (counting series/repeats): {total}: {}",
                parts.join(", ")
            );
        }
        for line in &r.scheduler_summary {
            let _ = writeln!(s, "- kube-scheduler: {line}");
        }
        for line in &r.muster_summary {
            let _ = writeln!(s, "- muster: {line}");
        }
        for n in &r.notes {
            let _ = writeln!(s, "- note: {n}");
        }
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "Files: e2e-throughput{0}.csv (bound pods per second per configuration), \
         e2e-throughput{0}.svg (chart), *-scheduler-metrics.txt / *-muster-metrics.txt (raw \
         /metrics at the end of each run), *.log (kube-scheduler and muster logs).",
        if p.smoke { "-smoke" } else { "" }
    );
    s
}

/// The commit the bench (and the muster binary built with it) comes from, and whether src/ had
/// uncommitted changes.
fn muster_version() -> String {
    if std::env::var_os("E2E_MUSTER_BIN").is_some() {
        return "binary from E2E_MUSTER_BIN".into();
    }
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(repo_root())
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(rev) => {
            let dirty = git(&["status", "--porcelain", "--", "src", "Cargo.toml"])
                .is_some_and(|s| !s.is_empty());
            format!(
                "built from commit {rev}{}",
                if dirty {
                    " plus uncommitted changes in src/"
                } else {
                    ""
                }
            )
        }
        None => "version unknown (no git)".into(),
    }
}

fn csv(results: &[RunResult]) -> String {
    let mut s =
        String::from("configuration,round,second,elapsed_s,bound_total,bound_in_interval\n");
    for r in results {
        let mut last = 0;
        for (i, x) in r.samples.iter().enumerate() {
            let _ = writeln!(
                s,
                "{},{},{},{:.3},{},{}",
                r.mode.slug(),
                r.round,
                i + 1,
                x.t,
                x.bound,
                x.bound - last
            );
            last = x.bound;
        }
    }
    s
}

/// Throughput over time (pods bound per second) and cumulative bound pods, as SVG.
fn svg_chart(results: &[RunResult], title: &str) -> String {
    let colors = [
        (Mode::Vanilla, "#1f77b4"),
        (Mode::Muster, "#d62728"),
        (Mode::Native, "#2ca02c"),
    ];
    let color = |m: Mode| colors.iter().find(|(x, _)| *x == m).map_or("#000", |c| c.1);
    let (w, h) = (900.0, 640.0);
    let (left, right) = (70.0, 20.0);
    let panel_h = 230.0;
    let tops = [60.0, 360.0];
    let max_t = results
        .iter()
        .filter_map(|r| r.samples.last().map(|s| s.t))
        .fold(1.0f64, f64::max)
        .ceil();
    let rates: Vec<(Mode, Vec<(f64, f64)>)> = results
        .iter()
        .map(|r| {
            let mut last = (0.0, 0usize);
            let pts = r
                .samples
                .iter()
                .map(|s| {
                    let rate = (s.bound - last.1) as f64 / (s.t - last.0).max(1e-9);
                    last = (s.t, s.bound);
                    (s.t, rate)
                })
                .collect();
            (r.mode, pts)
        })
        .collect();
    let max_rate = rates
        .iter()
        .flat_map(|(_, v)| v.iter().map(|x| x.1))
        .fold(1.0f64, f64::max);
    let max_bound = results.iter().map(|r| r.total).max().unwrap_or(1).max(1) as f64;
    let nice = |v: f64| {
        let mag = 10f64.powf(v.log10().floor());
        let n = v / mag;
        let step = if n <= 2.0 {
            0.5
        } else if n <= 5.0 {
            1.0
        } else {
            2.0
        };
        (step * mag, ((v / (step * mag)).ceil()) * step * mag)
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" font-size="16" text-anchor="middle">{title}</text>"#,
        w / 2.0
    );
    let pw = w - left - right;
    let (tstep, tmax) = nice(max_t);
    for (panel, top) in tops.iter().enumerate() {
        let (ystep, ymax) = if panel == 0 {
            nice(max_rate)
        } else {
            nice(max_bound)
        };
        let ylabel = if panel == 0 {
            "pods bound per second"
        } else {
            "pods bound (cumulative)"
        };
        let x = |t: f64| left + t / tmax * pw;
        let y = |v: f64| top + panel_h - v / ymax * panel_h;
        // Grid and axes.
        let mut v = 0.0;
        while v <= ymax + 1e-9 {
            let _ = writeln!(
                s,
                r##"<line x1="{left}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="#ddd"/><text x="{2}" y="{3:.1}" text-anchor="end">{4}</text>"##,
                y(v),
                left + pw,
                left - 6.0,
                y(v) + 4.0,
                v
            );
            v += ystep;
        }
        let mut t = 0.0;
        while t <= tmax + 1e-9 {
            let _ = writeln!(
                s,
                r##"<line x1="{0:.1}" y1="{top}" x2="{0:.1}" y2="{1}" stroke="#eee"/><text x="{0:.1}" y="{2}" text-anchor="middle">{3}</text>"##,
                x(t),
                top + panel_h,
                top + panel_h + 16.0,
                t
            );
            t += tstep;
        }
        let _ = writeln!(
            s,
            r##"<rect x="{left}" y="{top}" width="{pw}" height="{panel_h}" fill="none" stroke="#333"/>"##
        );
        let _ = writeln!(
            s,
            r#"<text transform="translate(18,{:.1}) rotate(-90)" text-anchor="middle">{ylabel}</text>"#,
            top + panel_h / 2.0
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">seconds since the first pod was created</text>"#,
            left + pw / 2.0,
            top + panel_h + 34.0
        );
        for (mode, pts) in &rates {
            let r = results.iter().find(|r| r.mode == *mode).unwrap();
            let pts: Vec<(f64, f64)> = if panel == 0 {
                pts.clone()
            } else {
                r.samples.iter().map(|s| (s.t, s.bound as f64)).collect()
            };
            if pts.is_empty() {
                continue;
            }
            let mut d = format!("M{:.1},{:.1}", x(0.0), y(0.0));
            for (t, v) in pts {
                let _ = write!(d, " L{:.1},{:.1}", x(t), y(v));
            }
            let _ = writeln!(
                s,
                r#"<path d="{d}" fill="none" stroke="{}" stroke-width="2"/>"#,
                color(*mode)
            );
        }
    }
    for (i, r) in results.iter().enumerate() {
        let lx = left + 10.0 + i as f64 * 250.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="44" x2="{}" y2="44" stroke="{}" stroke-width="3"/><text x="{}" y="48">{}</text>"#,
            lx + 24.0,
            color(r.mode),
            lx + 30.0,
            r.mode.title()
        );
    }
    s.push_str("</svg>\n");
    s
}

// ------------------------------------------------------------------------------------------

fn main() {
    let smoke = !std::env::args().any(|a| a == "--bench");
    match run(smoke) {
        Ok(ok) => {
            if !ok {
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("e2e_throughput: {e:#}");
            std::process::exit(2);
        }
    }
}

/// Returns false when (a) or (b) did not complete or muster broke a gang guarantee.
fn run(smoke: bool) -> Result<bool> {
    let started = Instant::now();
    let p = Params::from_env(smoke)?;
    let w = build_workload(&p);
    let (gmin, gmax) = w.gang_size_range();
    eprintln!(
        "e2e_throughput: {} nodes, {} pods ({} gangs of {gmin}-{gmax}, {} plain), configurations {:?}",
        p.nodes,
        w.pods.len(),
        w.gangs.len(),
        w.plain(),
        p.modes.iter().map(|m| m.slug()).collect::<Vec<_>>()
    );
    let ticks = clock_ticks();
    // One thread: the harness ties the control-plane processes to the thread that spawned them
    // (PR_SET_PDEATHSIG), and the creator + watch need little CPU.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut results = Vec::new();
    for round in 1..=p.rounds {
        for &mode in &p.modes {
            let r = rt.block_on(run_mode(mode, round, &p, &w, ticks));
            results.push(r);
        }
    }
    let total_secs = started.elapsed().as_secs_f64();
    let md = report(&p, &w, &results, total_secs);
    println!("{md}");
    std::fs::create_dir_all(&p.out_dir)
        .with_context(|| format!("creating {}", p.out_dir.display()))?;
    let suffix = if smoke { "-smoke" } else { "" };
    let base = p.out_dir.join(format!("e2e-throughput{suffix}"));
    std::fs::write(base.with_extension("md"), &md)?;
    std::fs::write(base.with_extension("csv"), csv(&results))?;
    std::fs::write(
        base.with_extension("svg"),
        svg_chart(
            &representatives(&p, &results),
            &format!(
                "{} nodes, {} pods ({} gangs + {} plain): throughput over time",
                p.nodes,
                w.pods.len(),
                w.gangs.len(),
                w.plain()
            ),
        ),
    )?;
    eprintln!(
        "e2e_throughput: wrote {}.{{md,csv,svg}}; whole run {:.0}s",
        base.display(),
        total_secs
    );

    let mut ok = true;
    for r in &results {
        match r.mode {
            Mode::Vanilla | Mode::Muster if !r.completed() => {
                eprintln!(
                    "e2e_throughput: {} did not complete: {:?}",
                    r.mode.title(),
                    r.status
                );
                ok = false;
            }
            _ => {}
        }
        if r.mode == Mode::Muster {
            if r.partial_observations > 0 {
                eprintln!(
                    "e2e_throughput: muster left gangs partially bound beyond the grace ({} samples)",
                    r.partial_observations
                );
                ok = false;
            }
            if let Some(Err(e)) = &r.overcommit {
                eprintln!("e2e_throughput: muster overcommitted nodes: {e}");
                ok = false;
            }
        }
    }
    Ok(ok)
}
