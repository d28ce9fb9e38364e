//! The autoscaled workload (`E2E_WORKLOAD=autoscaled`): gangs that fit only once nodes are
//! added, on a cluster with Karpenter v1.15's KWOK cloud provider (the harness's
//! `ClusterOptions::with_karpenter`: kube-controller-manager, KWOK, Karpenter, a NodePool of
//! 4-CPU nodes). One fake node `node-1` of E2E_AUTOSCALED_ROOM CPUs (3) is there at the start.
//! Gangs of E2E_GANG_MIN..=E2E_GANG_MAX members (4..=10, seeded by E2E_SEED) of 1 CPU each:
//!
//! - one after another: E2E_AUTOSCALED_GANGS gangs (6), each created once the one before is
//!   bound whole and E2E_AUTOSCALED_SETTLE_SECS (5) have passed with the NodeClaims counted, so
//!   the nodes added are the gang's own;
//! - then a burst: E2E_AUTOSCALED_BURST gangs (4) created together, whose nodes are counted
//!   together (two waiting gangs must not have nodes added for the same members).
//!
//! Per gang: the seconds from its first member's creation to its last member bound, and the
//! seconds it was partly bound (polled every 100 ms). Per step: the nodes Karpenter added against
//! the fewest that hold the members short of room (the free 1-CPU slots of the nodes there at
//! the step's start subtracted; an added node holds as many as its allocatable whole CPUs). The
//! settle window is an observation window for late NodeClaims, not a wait for a condition.
//!
//! Configurations (E2E_CONFIGS, default `muster,vanilla`): `muster` as the e2e tests run it
//! (the admission policy, `--capacity-buffers`: one CapacityBuffer per waiting gang), and
//! `vanilla`, kube-scheduler alone (the harness's control run: no policy, no extender; muster
//! runs without `--capacity-buffers` and is not consulted), where Karpenter adds nodes for the
//! members kube-scheduler marks unschedulable. E2E_TIMEOUT_SECS (120) per step. Writes
//! E2E_OUT_DIR/e2e-autoscaled.{md,csv}.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use muster_harness::karpenter::{self, KarpenterPool, NODEPOOL_LABEL};
use muster_harness::{names, Cluster, ClusterOptions, KeyScheme, NodeShape, PodBuilder};

use crate::params::{env_or, Mode};
use crate::setup::MUSTER_BIN;
use crate::stats::dist;
use crate::workload::Rng;

const NS: &str = "autoscaled";
const POLL: Duration = Duration::from_millis(100);

/// Whether `E2E_WORKLOAD` asks for this workload.
pub fn requested() -> bool {
    std::env::var("E2E_WORKLOAD").is_ok_and(|w| w.trim() == "autoscaled")
}

struct Knobs {
    gangs: usize,
    burst: usize,
    gang_min: usize,
    gang_max: usize,
    room: u32,
    settle: Duration,
    timeout: Duration,
    seed: u64,
    modes: Vec<Mode>,
    out_dir: std::path::PathBuf,
}

impl Knobs {
    fn from_env() -> Result<Self> {
        let modes = std::env::var("E2E_CONFIGS")
            .unwrap_or_else(|_| "muster,vanilla".into())
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| match Mode::parse("E2E_CONFIGS", s)? {
                m @ (Mode::Muster | Mode::Vanilla) => Ok(m),
                m => bail!(
                    "E2E_WORKLOAD=autoscaled runs muster and vanilla only, not {}",
                    m.slug()
                ),
            })
            .collect::<Result<Vec<_>>>()?;
        let k = Knobs {
            gangs: env_or("E2E_AUTOSCALED_GANGS", 6)?,
            burst: env_or("E2E_AUTOSCALED_BURST", 4)?,
            gang_min: env_or("E2E_GANG_MIN", 4)?,
            gang_max: env_or("E2E_GANG_MAX", 10)?,
            room: env_or("E2E_AUTOSCALED_ROOM", 3)?,
            settle: Duration::from_secs(env_or("E2E_AUTOSCALED_SETTLE_SECS", 5)?),
            timeout: Duration::from_secs(env_or("E2E_TIMEOUT_SECS", 120)?),
            seed: env_or("E2E_SEED", 42)?,
            modes,
            out_dir: std::env::var_os("E2E_OUT_DIR")
                .map(Into::into)
                .unwrap_or_else(|| muster_harness::paths::repo_root().join("target/muster-bench")),
        };
        if k.gang_min < 2 || k.gang_min > k.gang_max || k.gangs + k.burst == 0 || k.modes.is_empty()
        {
            bail!("E2E_WORKLOAD=autoscaled wants 2 <= E2E_GANG_MIN <= E2E_GANG_MAX, gangs and configurations");
        }
        Ok(k)
    }
}

/// One gang's numbers.
struct GangRun {
    name: String,
    size: usize,
    /// Creation of its first member to its last member bound; `None`: not within the timeout.
    bound_secs: Option<f64>,
    /// How long some but not all of its members were bound (polled every 100 ms).
    partial_secs: f64,
}

/// One step: one gang (one after another) or the burst, with the nodes added for it.
struct Step {
    gangs: Vec<GangRun>,
    free_slots: usize,
    nodes_needed: usize,
    nodes_added: usize,
}

impl Step {
    fn size(&self) -> usize {
        self.gangs.iter().map(|g| g.size).sum()
    }
}

struct ModeRun {
    mode: Mode,
    sequential: Vec<Step>,
    burst: Option<Step>,
    per_node: usize,
    error: Option<String>,
}

impl ModeRun {
    fn gangs(&self) -> impl Iterator<Item = &GangRun> {
        self.sequential
            .iter()
            .chain(&self.burst)
            .flat_map(|s| &s.gangs)
    }
}

/// Runs the workload in every configuration and writes the report; false if a gang was not
/// bound whole within the timeout under muster.
pub fn run() -> Result<bool> {
    let k = Knobs::from_env()?;
    let mut rng = Rng(k.seed);
    let sizes: Vec<usize> = (0..k.gangs + k.burst)
        .map(|_| rng.range(k.gang_min, k.gang_max))
        .collect();
    let (sequential, burst) = sizes.split_at(k.gangs);
    eprintln!(
        "e2e_throughput: E2E_WORKLOAD=autoscaled: gangs of {sequential:?} one after another, then \
         {burst:?} together (1 CPU a member) on room for {}, configurations {:?}",
        k.room,
        k.modes.iter().map(|m| m.slug()).collect::<Vec<_>>()
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut runs = Vec::new();
    // muster first: the vanilla run is the harness's control run, asked for by its variable.
    let mut modes = k.modes.clone();
    modes.sort_by_key(|m| *m == Mode::Vanilla);
    for mode in modes {
        if mode == Mode::Vanilla {
            std::env::set_var(muster_harness::cluster::CONTROL_RUN_ENV, "1");
        }
        let t = Instant::now();
        eprintln!("e2e_throughput: ==> autoscaled, {}", mode.title());
        let r = rt.block_on(run_mode(mode, &k, sequential, burst));
        std::env::remove_var(muster_harness::cluster::CONTROL_RUN_ENV);
        eprintln!(
            "e2e_throughput: <== autoscaled, {} in {:.0}s{}",
            mode.title(),
            t.elapsed().as_secs_f64(),
            r.error
                .as_deref()
                .map_or(String::new(), |e| format!(": {e}"))
        );
        runs.push(r);
    }
    let md = report(&k, &runs);
    println!("{md}");
    std::fs::create_dir_all(&k.out_dir)
        .with_context(|| format!("creating {}", k.out_dir.display()))?;
    let base = k.out_dir.join("e2e-autoscaled");
    std::fs::write(base.with_extension("md"), &md)?;
    std::fs::write(base.with_extension("csv"), csv(&runs))?;
    eprintln!("e2e_throughput: wrote {}.{{md,csv}}", base.display());
    Ok(runs.iter().all(|r| {
        r.mode != Mode::Muster
            || (r.error.is_none()
                && r.gangs().count() == k.gangs + k.burst
                && r.gangs().all(|g| g.bound_secs.is_some()))
    }))
}

async fn run_mode(mode: Mode, k: &Knobs, sequential: &[usize], burst: &[usize]) -> ModeRun {
    let mut r = ModeRun {
        mode,
        sequential: Vec::new(),
        burst: None,
        per_node: 0,
        error: None,
    };
    if let Err(e) = run_mode_inner(mode, k, sequential, burst, &mut r).await {
        r.error = Some(format!("{e:#}"));
    }
    r
}

async fn run_mode_inner(
    mode: Mode,
    k: &Knobs,
    sequential: &[usize],
    burst: &[usize],
    r: &mut ModeRun,
) -> Result<()> {
    let mut opts = ClusterOptions::new(MUSTER_BIN).with_karpenter(KarpenterPool {
        cpu_limit: Some(1024),
        ..KarpenterPool::default()
    });
    if mode == Mode::Muster {
        opts = opts.muster_args(["--capacity-buffers"]);
    }
    let c = Cluster::start_with(opts).await?;
    c.namespace(NS).await?;
    c.add_node("node-1", NodeShape::cpu(&k.room.to_string()))
        .await?;
    let named = |from: usize, sizes: &[usize]| -> Vec<(String, usize)> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, &s)| (format!("g{}", from + i), s))
            .collect()
    };
    for (i, &size) in sequential.iter().enumerate() {
        let step = step(&c, k, &named(i, &[size]), &mut r.per_node).await?;
        eprintln!(
            "e2e_throughput: autoscaled {}: gang {i} of {size}: {}",
            mode.slug(),
            describe(&step)
        );
        let done = step.gangs.iter().all(|g| g.bound_secs.is_some());
        r.sequential.push(step);
        if !done {
            bail!("gang {i} not bound whole within {:?}", k.timeout);
        }
    }
    if !burst.is_empty() {
        let step = step(&c, k, &named(sequential.len(), burst), &mut r.per_node).await?;
        eprintln!(
            "e2e_throughput: autoscaled {}: burst of {burst:?}: {}",
            mode.slug(),
            describe(&step)
        );
        r.burst = Some(step);
    }
    Ok(())
}

/// Creates the gangs `(name, size)` together, polls until every one is bound whole (or the
/// timeout), then counts the NodeClaims made from the start through the settle window.
async fn step(
    c: &Cluster,
    k: &Knobs,
    gangs: &[(String, usize)],
    per_node: &mut usize,
) -> Result<Step> {
    let free_slots = free_slots(c).await?;
    let claims_before = karpenter::node_claim_names(&c.client()).await?.len();
    let t_step = Instant::now();
    let mut runs = Vec::new();
    for (group, size) in gangs {
        let members = names(group, *size as u32);
        let t0 = Instant::now();
        for m in &members {
            c.create(
                PodBuilder::new(NS, m)
                    .cpu("1")
                    .gang(KeyScheme::Muster, group, *size as u32),
            )
            .await?;
        }
        runs.push((t0, members, Duration::ZERO, None::<f64>));
    }
    let mut last = Instant::now();
    loop {
        let bound = c.bound_pods(NS).await?;
        let now = Instant::now();
        for (t0, members, partial, bound_secs) in runs.iter_mut() {
            if bound_secs.is_some() {
                continue;
            }
            let n = members.iter().filter(|m| bound.contains_key(*m)).count();
            if n > 0 && n < members.len() {
                *partial += now - last;
            }
            if n == members.len() {
                *bound_secs = Some((now - *t0).as_secs_f64());
            }
        }
        last = now;
        if runs.iter().all(|r| r.3.is_some()) || t_step.elapsed() > k.timeout {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    tokio::time::sleep(k.settle).await;
    let claims_after = karpenter::node_claim_names(&c.client()).await?.len();
    if *per_node == 0 {
        *per_node = slots_per_added_node(c).await?;
    }
    let size: usize = gangs.iter().map(|g| g.1).sum();
    Ok(Step {
        gangs: gangs
            .iter()
            .zip(runs)
            .map(|((name, size), (_, _, partial, bound_secs))| GangRun {
                name: name.clone(),
                size: *size,
                bound_secs,
                partial_secs: partial.as_secs_f64(),
            })
            .collect(),
        free_slots,
        nodes_needed: size.saturating_sub(free_slots).div_ceil((*per_node).max(1)),
        nodes_added: claims_after.saturating_sub(claims_before),
    })
}

fn describe(s: &Step) -> String {
    let times: Vec<String> = s
        .gangs
        .iter()
        .map(|g| {
            format!(
                "{} bound whole in {}, partly bound {:.1}s",
                g.name,
                g.bound_secs.map_or("never".into(), |t| format!("{t:.1}s")),
                g.partial_secs
            )
        })
        .collect();
    format!(
        "{} free slots, {} nodes needed, {} added; {}",
        s.free_slots,
        s.nodes_needed,
        s.nodes_added,
        times.join("; ")
    )
}

fn cpu_millis(q: &str) -> Option<u64> {
    match q.strip_suffix('m') {
        Some(m) => m.parse().ok(),
        None => q.parse::<f64>().ok().map(|c| (c * 1000.0) as u64),
    }
}

async fn nodes(c: &Cluster, lp: &ListParams) -> Result<Vec<Node>> {
    Ok(Api::<Node>::all(c.client()).list(lp).await?.items)
}

fn allocatable_cpu(n: &Node) -> u64 {
    n.status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .and_then(|a| a.get("cpu"))
        .and_then(|q| cpu_millis(&q.0))
        .unwrap_or(0)
}

/// 1-CPU pods an added node holds (its allocatable CPU, whole CPUs).
async fn slots_per_added_node(c: &Cluster) -> Result<usize> {
    let added = nodes(c, &ListParams::default().labels(NODEPOOL_LABEL)).await?;
    Ok(added
        .iter()
        .map(|n| (allocatable_cpu(n) / 1000) as usize)
        .max()
        .unwrap_or(0))
}

/// Free 1-CPU slots on every node (every pod here asks for 1 CPU).
async fn free_slots(c: &Cluster) -> Result<usize> {
    let mut on: BTreeMap<String, usize> = BTreeMap::new();
    for node in c.bound_pods(NS).await?.into_values() {
        *on.entry(node).or_default() += 1;
    }
    Ok(nodes(c, &ListParams::default())
        .await?
        .iter()
        .map(|n| {
            let name = n.metadata.name.clone().unwrap_or_default();
            ((allocatable_cpu(n) / 1000) as usize)
                .saturating_sub(on.get(&name).copied().unwrap_or(0))
        })
        .sum())
}

fn fmt_secs(t: Option<f64>) -> String {
    t.map_or("not within the timeout".into(), |s| format!("{s:.1} s"))
}

fn report(k: &Knobs, runs: &[ModeRun]) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## Autoscaled (`E2E_WORKLOAD=autoscaled`)\n\nKarpenter v1.15.0's KWOK provider, a NodePool \
         of 4-CPU nodes; node-1 with room for {} at the start; gangs of {}–{} members of 1 CPU: \
         {} one after another (each once the one before is bound whole and {} s have passed), \
         then {} together. Nodes needed: the fewest added nodes that hold the members the nodes \
         there at the step's start have no room for.\n",
        k.room,
        k.gang_min,
        k.gang_max,
        k.gangs,
        k.settle.as_secs(),
        k.burst
    );
    let _ = writeln!(
        md,
        "| configuration | gangs bound whole | creation → all bound p50 / max | partly bound (sum over gangs) | nodes added / needed, one after another | nodes added / needed, together |\n|---|---|---|---|---|---|"
    );
    for r in runs {
        let times: Vec<f64> = r.gangs().filter_map(|g| g.bound_secs).collect();
        let (p50, max) = dist(times.clone()).map_or(("—".to_string(), "—".to_string()), |d| {
            (format!("{:.1} s", d.p50), format!("{:.1} s", d.max))
        });
        let _ = writeln!(
            md,
            "| {} | {} of {} | {p50} / {max} | {:.1} s | {} / {} | {} |",
            r.mode.title(),
            times.len(),
            k.gangs + k.burst,
            r.gangs().map(|g| g.partial_secs).sum::<f64>(),
            r.sequential.iter().map(|s| s.nodes_added).sum::<usize>(),
            r.sequential.iter().map(|s| s.nodes_needed).sum::<usize>(),
            r.burst.as_ref().map_or("—".into(), |s| format!(
                "{} / {}",
                s.nodes_added, s.nodes_needed
            )),
        );
    }
    for r in runs {
        let _ = writeln!(
            md,
            "\n{} (an added node holds {} members){}:\n\n| step | members | free slots | nodes needed | nodes added | creation → all bound | partly bound |\n|---|---|---|---|---|---|---|",
            r.mode.title(),
            r.per_node,
            r.error
                .as_deref()
                .map_or(String::new(), |e| format!(" — stopped: {e}"))
        );
        for s in &r.sequential {
            for g in &s.gangs {
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {} | {} | {:.1} s |",
                    g.name,
                    g.size,
                    s.free_slots,
                    s.nodes_needed,
                    s.nodes_added,
                    fmt_secs(g.bound_secs),
                    g.partial_secs
                );
            }
        }
        if let Some(s) = &r.burst {
            let _ = writeln!(
                md,
                "| together: {} | {} | {} | {} | {} | {} | {} |",
                s.gangs
                    .iter()
                    .map(|g| format!("{} ({})", g.name, g.size))
                    .collect::<Vec<_>>()
                    .join(", "),
                s.size(),
                s.free_slots,
                s.nodes_needed,
                s.nodes_added,
                s.gangs
                    .iter()
                    .map(|g| fmt_secs(g.bound_secs))
                    .collect::<Vec<_>>()
                    .join(", "),
                s.gangs
                    .iter()
                    .map(|g| format!("{:.1} s", g.partial_secs))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    md
}

fn csv(runs: &[ModeRun]) -> String {
    let mut out = String::from(
        "configuration,step,gang,members,step_free_slots,step_nodes_needed,step_nodes_added,bound_secs,partial_secs\n",
    );
    for r in runs {
        let steps = r
            .sequential
            .iter()
            .map(|s| ("one-after-another", s))
            .chain(r.burst.iter().map(|s| ("together", s)));
        for (kind, s) in steps {
            for g in &s.gangs {
                let _ = writeln!(
                    out,
                    "{},{kind},{},{},{},{},{},{},{:.2}",
                    r.mode.slug(),
                    g.name,
                    g.size,
                    s.free_slots,
                    s.nodes_needed,
                    s.nodes_added,
                    g.bound_secs.map_or(String::new(), |t| format!("{t:.2}")),
                    g.partial_secs
                );
            }
        }
    }
    out
}
