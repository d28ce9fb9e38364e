//! One configuration, one round: started (see `setup`), the pods created, bound pods watched
//! and sampled once a second until all are bound or the deadline passes, then the results
//! computed (throughput, gang and pod times, CPU, API requests) and read off the cluster (see
//! `readout`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use muster_harness::k8s;
use muster_harness::muster::Muster;
use tokio::sync::Notify;

use crate::create::{create_all, create_nodes, Created};
use crate::gangs::{gangs_partly_bound_beyond, whole_gang_times};
use crate::metrics::scrape_apiserver_metrics;
use crate::params::{Mode, Params};
use crate::process::{cpu_snapshot, memory_mib, system_cpu, wait_for_quiet};
use crate::prometheus::apiserver_delta;
use crate::readout;
use crate::result::{RunResult, Status};
use crate::setup::start;
use crate::stats::{dist, throughput_samples, Sample};
use crate::workload::{pod_object, Workload, NS};

/// What the watch saw: when each pod was first seen bound.
pub struct Tracker {
    pub index: HashMap<String, usize>,
    pub bound_at: Vec<Option<Instant>>,
    pub bound: usize,
    pub watch_errors: usize,
    pub last_watch_error: Option<String>,
}

pub async fn watch_bound(client: Client, tracker: Arc<Mutex<Tracker>>, ready: Arc<Notify>) {
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

pub async fn run_mode(mode: Mode, round: usize, p: &Params, w: &Workload, ticks: f64) -> RunResult {
    let t = Instant::now();
    let mut r = RunResult::new(mode, round, w.pods.len());
    r.paced_at = p.create_qps;
    eprintln!(
        "e2e_throughput: ==> {} (round {round}/{}{})",
        mode.title(),
        p.rounds,
        p.create_qps
            .map_or(String::new(), |q| format!(", paced at {q:.0} pods/s"))
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

pub async fn run_mode_inner(
    mode: Mode,
    p: &Params,
    w: &Workload,
    ticks: f64,
    r: &mut RunResult,
) -> Result<()> {
    let t_start = Instant::now();
    let (cp, mut muster) = start(mode, p, w).await?;
    r.startup_secs = t_start.elapsed().as_secs_f64();
    let client = cp.client();

    let mut procs: Vec<(String, u32)> = cp
        .processes()
        .map(|p| (p.name().to_string(), p.pid()))
        .collect();
    if let Some(pid) = muster.as_ref().and_then(Muster::pid) {
        procs.push(("muster".into(), pid));
    }
    procs.push(("bench (creator + watch)".into(), std::process::id()));
    // The scheduler the gang members go through: in (d) the second one, muster's.
    let gang_scheduler = if mode == Mode::MusterSecond {
        "kube-scheduler-2"
    } else {
        "kube-scheduler"
    };
    let scheduler_pid = procs
        .iter()
        .find(|(n, _)| n == gang_scheduler)
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
    let profile = p
        .apiserver_profile
        .map(|d| tokio::spawn(apiserver_cpu_profile(client.clone(), d)));
    let creator = tokio::spawn(create_all(
        client.clone(),
        pods,
        p.concurrency,
        p.create_qps,
        created.clone(),
    ));
    // Until the late nodes come, the pods compete for too little room.
    let late_nodes = (p.late_nodes > 0).then(|| {
        let (client, p) = (client.clone(), p.clone());
        tokio::spawn(async move {
            tokio::time::sleep_until((t0 + p.late_nodes_after).into()).await;
            create_nodes(
                &client,
                &p,
                p.nodes - p.late_nodes..p.nodes,
                mode == Mode::MusterSecond,
            )
            .await
        })
    });

    // Sample once a second until everything is bound or the deadline passes.
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::from_std(t0 + Duration::from_secs(1)),
        Duration::from_secs(1),
    );
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let total = w.pods.len();
    let mut last_progress = (0usize, Instant::now());
    // The outage mode: when muster was killed, and when it was back.
    let mut killed: Option<Instant> = None;
    let mut back: Option<Instant> = None;
    loop {
        tick.tick().await;
        let now = Instant::now();
        if let (Some((at, secs)), Some(m)) = (p.muster_outage, muster.as_mut()) {
            if killed.is_none() && now >= t0 + at {
                eprintln!("e2e_throughput: outage: killing muster (SIGKILL) for {secs:?}");
                m.kill_hard();
                killed = Some(Instant::now());
            } else if let Some(k) = killed.filter(|k| back.is_none() && now >= *k + secs) {
                if let Err(e) = m.restart().await {
                    r.notes.push(format!("outage: restarting muster: {e:#}"));
                }
                back = Some(Instant::now());
                eprintln!(
                    "e2e_throughput: outage: muster back after {:.1}s",
                    k.elapsed().as_secs_f64()
                );
            }
        }
        let outage_pending = muster.is_some() && p.muster_outage.is_some() && back.is_none();
        let bound = {
            let t = tracker.lock().unwrap();
            r.partial_observations +=
                gangs_partly_bound_beyond(&w.gangs, &t.bound_at, now, p.grace);
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
        if (bound >= total && !outage_pending) || now >= deadline || creating_failed {
            break;
        }
    }
    let cpu1 = cpu_snapshot(&procs, ticks);
    r.memory = procs
        .iter()
        .filter_map(|(n, pid)| memory_mib(*pid).map(|(rss, peak)| (n.clone(), rss, peak)))
        .collect();
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
    if let Some(late) = late_nodes {
        late.abort();
        if let Ok(Err(e)) = late.await {
            r.notes.push(format!("creating the late nodes: {e:#}"));
        }
    }
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
    if let (Some(k), Some(b)) = (killed, back) {
        let window = crate::outage::Window {
            killed: k.duration_since(t0).as_secs_f64(),
            back: b.duration_since(t0).as_secs_f64(),
        };
        r.outage = Some(crate::outage::measure(w, t0, window, &c.at, &bound_at));
        r.notes.push(
            "outage: muster's metrics and CPU below are those of the process started after the \
             outage"
                .into(),
        );
    }
    let (gang_lat, spreads) = whole_gang_times(&w.gangs, &bound_at, &c.at);
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
    r.plain_latency = dist(
        (0..total)
            .filter(|&i| w.pods[i].gang.is_none())
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

    if let Some(profile) = profile {
        match profile.await.map_err(anyhow::Error::from).and_then(|p| p) {
            Ok(bytes) => {
                let path = p.out_dir.join(format!(
                    "e2e-throughput{}-{}-apiserver.pprof",
                    readout::file_suffix(p, r.round),
                    mode.slug()
                ));
                std::fs::create_dir_all(&p.out_dir)?;
                std::fs::write(path, bytes)?;
            }
            Err(e) => r.notes.push(format!("kube-apiserver CPU profile: {e:#}")),
        }
    }
    readout::cluster_state(mode, p, r, &client, &cp, muster.as_ref(), scheduler_pid).await?;
    match k8s::list_pods(&client, NS).await {
        Ok(pods) => {
            let node_cpu = crate::race::cpu_milli(&p.node_cpu)?;
            r.kubelet_refusals = Some(crate::race::kubelet_refusals(w, &pods, &bound_at, node_cpu));
        }
        Err(e) => r
            .notes
            .push(format!("listing pods for the kubelet's admission: {e:#}")),
    }
    match crate::per_member::list_failed(&client, w).await {
        Ok((members, plain)) => {
            r.per_member.failed_on_members = members;
            r.per_member.failed_on_plain = plain;
        }
        Err(e) => r
            .notes
            .push(format!("listing FailedScheduling Events: {e:#}")),
    }
    if let Some(l) = &w.topology {
        match k8s::list_pods(&client, NS).await {
            Ok(pods) => r.topology = Some(crate::topology::share(l, w, &pods)),
            Err(e) => r
                .notes
                .push(format!("listing pods for the topology share: {e:#}")),
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

/// kube-apiserver's CPU profile (pprof's protobuf) over `secs` from now (it must run with
/// `--profiling`).
async fn apiserver_cpu_profile(client: Client, secs: Duration) -> Result<Vec<u8>> {
    use http_body_util::BodyExt;
    let request =
        axum::http::Request::get(format!("/debug/pprof/profile?seconds={}", secs.as_secs()))
            .body(Vec::new())?;
    let response = client.send(request.map(kube::client::Body::from)).await?;
    let status = response.status();
    let bytes = response.into_body().collect().await?.to_bytes().to_vec();
    if !status.is_success() {
        return Err(anyhow!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
        ));
    }
    Ok(bytes)
}
