//! End-to-end scheduling throughput, side by side, in one run on this machine: the SAME workload
//! (fake nodes; gangs of 4–16 members plus plain pods) scheduled by
//!
//! - (a) the stock kube-scheduler alone, gang keys ignored — the ceiling;
//! - (b) kube-scheduler + muster as `kubectl apply -k deploy/` installs it: the admission policy
//!   marks and gates gang members, `scheduler-config/muster-as-default-scheduler.yaml` sends only
//!   them to muster, muster `--scope=gang-members`;
//! - (c) kube-scheduler's own gang scheduling (feature gate `GenericWorkload`, API
//!   `scheduling.k8s.io/v1beta1` PodGroup, pods naming it in `spec.schedulingGroup`);
//! - (d) on request (`E2E_CONFIGS=vanilla,muster-second`), muster behind a second kube-scheduler
//!   (`scheduler-config/muster-second-scheduler.yaml`, gang members with `schedulerName:
//!   muster-scheduler`, the admission policy applied) beside the stock default scheduler, which
//!   places the plain pods: the mode managed clusters allow. The report counts the pods a kubelet
//!   would refuse because the two schedulers raced for the same room (see `race`);
//! - (e) on request (`E2E_CONFIGS=...,muster-every-pod`), the alternative to the shipped install:
//!   every pod through muster (`scheduler-config/muster-every-pod.yaml`, `--scope=every-pod`);
//! - (b') on request (`E2E_CONFIGS=...,muster-nominate-all`), (b) with every seat published as
//!   a nomination (`--nominate-seats=always`) where (b) publishes only the seats at risk.
//!
//! Each configuration gets a fresh etcd + kube-apiserver + kube-scheduler (+ muster) from
//! `muster-harness`, one after another. Pods are created by a concurrent creator (bounded
//! concurrency) in a deterministic pseudo-random interleaving; a watch on bound pods
//! (`spec.nodeName!=`) timestamps every binding and a sampler counts bound pods once a second,
//! as scheduler_perf's throughput collector does.
//!
//! Run: `cargo bench --bench e2e_throughput` (writes target/muster-bench/e2e-throughput.{md,csv,svg}
//! and e2e-throughput-rounds.csv, every round's numbers). At scale: `E2E_SCALE=5000 cargo bench
//! --bench e2e_throughput` (5,000 nodes, 20,000 pods in gangs of 4–64 and plain pods, one round,
//! 1800 s deadline per configuration), `E2E_SCALE=5000-paced` (the same created at 100 pods/s).
//! Under `cargo test --benches` (no `--bench` argument) it runs a smoke that contends,
//! configurations (a) and (b) only: 8 nodes of 1 cpu, 4 of them added 8 s after the first pod
//! is created; 32 pods of 250m (every slot of the 8 nodes) in gangs of 3–6 plus plain pods.
//! Until the late nodes come, half the pods cannot have a node, so gangs must wait whole; in
//! the end every slot is taken, so a seat given twice shows as an overcommitted node. Run with
//! `E2E_GANG_CHECKS=vanilla,muster` to see the gang checks fail the vanilla configuration.
//!
//! Environment (defaults in parentheses; the smoke's in brackets): E2E_SCALE (500; 5000 and
//! 5000-paced change the defaults of E2E_NODES, E2E_PODS, E2E_GANG_MAX, E2E_ROUNDS,
//! E2E_TIMEOUT_SECS and E2E_CREATE_QPS, see [`params::Scale`]), E2E_NODES (500) [8],
//! E2E_LATE_NODES (0) [4] of those added E2E_LATE_NODES_AFTER_SECS (8) after the first create,
//! E2E_PODS (2000) [32], E2E_PLAIN_PERCENT (25), E2E_GANG_MIN / E2E_GANG_MAX (4 / 16) [3 / 6],
//! E2E_CPU_MIN / E2E_CPU_MAX millicores (100 / 500) [250 / 250], E2E_NODE_CPU (4) [1],
//! E2E_NODE_MEMORY (16Gi), E2E_NODE_PODS (110), E2E_SEED (42), E2E_CONCURRENCY (16 creates in
//! flight), E2E_OPEN_UNITS (8 gangs/plain pods being created at once), E2E_TIMEOUT_SECS (600
//! per configuration) [45], E2E_PARTIAL_GRACE_MS (2000), E2E_CONFIGS (vanilla,muster,native)
//! [vanilla,muster], E2E_GANG_CHECKS (muster: configurations failed by a gang partially bound
//! beyond the grace or an overcommitted node), E2E_ROUNDS (3) [1], E2E_CREATE_QPS (0 =
//! unpaced), E2E_QUIET_WAIT_SECS (300) [0] (wait for other processes to leave the CPUs before
//! each configuration), E2E_OUT_DIR (target/muster-bench), E2E_MUSTER_BIN (the muster binary
//! built with the bench), E2E_MUSTER_SCHEDULER_CONFIG (configuration (b)'s,
//! scheduler-config/muster-as-default-scheduler.yaml). muster is called over HTTPS with a client
//! certificate (HTTP/2), as deploy/ installs it, in every configuration but `muster-http`.
//!
//! Each round also runs every configuration paced at E2E_PACED_QPS (80 pods/s at 500 nodes; 0
//! = none) for the report's first table, [`main_result`]: paced plain-pod and gang latencies,
//! unpaced pods/s against vanilla, and per-pod API requests, CPU and kube-scheduler time
//! (e2e-throughput-main.csv).
//!
//! `E2E_WORKLOAD=autoscaled cargo bench --bench e2e_throughput` runs [`autoscaled`] instead:
//! gangs that fit only once Karpenter adds nodes, muster against kube-scheduler alone.
//!
//! Modules: [`params`] (the knobs), [`workload`] (what is created), [`create`] (creating it),
//! [`setup`] (starting a configuration), [`run`] (one configuration: create, watch, sample),
//! [`gangs`] (per-gang checks and times), [`readout`] (what is read off the cluster after a
//! run), [`stats`] (percentiles,
//! throughput), [`prometheus`] (the text format), [`metrics`] (scraping and summaries),
//! [`process`] (CPU and memory accounting), [`result`], [`main_result`] (the report's first
//! table, what users feel), [`report`] (Markdown, CSV), [`rounds`]
//! (every round against the vanilla run of its round; the rounds CSV), [`chart`] (SVG).

mod autoscaled;
mod chart;
mod create;
mod dra;
mod gangs;
mod main_result;
mod metrics;
mod outage;
mod params;
mod per_member;
mod process;
mod prometheus;
mod race;
mod readout;
mod report;
mod result;
mod rounds;
mod run;
mod setup;
mod stats;
mod topology;
mod workload;

use std::time::Instant;

use anyhow::{Context, Result};

use crate::chart::svg_chart;
use crate::params::{Mode, Params};
use crate::process::clock_ticks;
use crate::report::{csv, report, representatives};
use crate::rounds::rounds_csv;
use crate::run::run_mode;
use crate::workload::build_workload;

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

/// Returns false when (a) or (b) did not complete or a configuration named in E2E_GANG_CHECKS
/// (muster) broke a gang guarantee.
fn run(smoke: bool) -> Result<bool> {
    if !smoke && autoscaled::requested() {
        return autoscaled::run();
    }
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
    let mut paced = Vec::new();
    // The paced runs write their raw metrics and logs beside the unpaced ones, in paced/.
    let paced_params = p
        .paced_qps
        .filter(|_| p.create_qps.is_none())
        .map(|q| Params {
            create_qps: Some(q),
            out_dir: p.out_dir.join("paced"),
            ..p.clone()
        });
    if let Some(pp) = &paced_params {
        std::fs::create_dir_all(&pp.out_dir)
            .with_context(|| format!("creating {}", pp.out_dir.display()))?;
    }
    for round in 1..=p.rounds {
        for &mode in &p.modes {
            let r = rt.block_on(run_mode(mode, round, &p, &w, ticks));
            results.push(r);
        }
        for &mode in paced_params.iter().flat_map(|_| &p.modes) {
            let pp = paced_params.as_ref().expect("checked");
            paced.push(rt.block_on(run_mode(mode, round, pp, &w, ticks)));
        }
    }
    let total_secs = started.elapsed().as_secs_f64();
    let md = report(&p, &w, &results, &paced, total_secs);
    println!("{md}");
    std::fs::create_dir_all(&p.out_dir)
        .with_context(|| format!("creating {}", p.out_dir.display()))?;
    let suffix = if smoke { "-smoke" } else { "" };
    let base = p.out_dir.join(format!("e2e-throughput{suffix}"));
    std::fs::write(base.with_extension("md"), &md)?;
    std::fs::write(base.with_extension("csv"), csv(&results))?;
    if !paced.is_empty() {
        std::fs::write(
            p.out_dir.join(format!("e2e-throughput{suffix}-main.csv")),
            main_result::csv(&p, &w, &results, &paced),
        )?;
    }
    std::fs::write(
        p.out_dir.join(format!("e2e-throughput{suffix}-rounds.csv")),
        rounds_csv(&results),
    )?;
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
    for r in results.iter().chain(&paced) {
        match r.mode {
            Mode::Vanilla
            | Mode::Muster
            | Mode::MusterSecond
            | Mode::MusterEveryPod
            | Mode::MusterNominateAll
            | Mode::MusterHttp
                if !r.completed() =>
            {
                eprintln!(
                    "e2e_throughput: {} did not complete: {:?}",
                    r.mode.title(),
                    r.status
                );
                ok = false;
            }
            _ => {}
        }
        if p.gang_checks.contains(&r.mode) {
            if r.partial_observations > 0 {
                eprintln!(
                    "e2e_throughput: {} left gangs partially bound beyond the grace ({} samples)",
                    r.mode.title(),
                    r.partial_observations
                );
                ok = false;
            }
            if let Some(Err(e)) = &r.overcommit {
                eprintln!(
                    "e2e_throughput: {} overcommitted nodes: {e}",
                    r.mode.title()
                );
                ok = false;
            }
        }
    }
    Ok(ok)
}
