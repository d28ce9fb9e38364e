//! Starting one configuration: a fresh control plane with the nodes there from the start,
//! PodGroups (native), muster (its configuration) and kube-scheduler configured for it.

use std::path::PathBuf;

use anyhow::{Context, Result};
use muster_harness::control_plane::{ControlPlane, ControlPlaneOptions, SchedulerOptions};
use muster_harness::k8s;
use muster_harness::muster::{Muster, MusterOptions};
use muster_harness::tls::MusterTls;

use crate::create::{create_nodes, create_pod_groups};
use crate::params::{Mode, Params};
use crate::workload::{Workload, NS};

pub const MUSTER_BIN: &str = env!("CARGO_BIN_EXE_muster");
/// kube-apiserver flags that serve the PodGroup API (as scheduler_perf does for GenericWorkload).
pub const NATIVE_APISERVER_ARGS: [&str; 2] = [
    "--feature-gates=GenericWorkload=true",
    "--runtime-config=scheduling.k8s.io/v1beta1=true",
];
/// kube-scheduler flag that turns on its GangScheduling plugin (added to the default plugins).
pub const NATIVE_SCHEDULER_ARGS: [&str; 1] = ["--feature-gates=GenericWorkload=true"];
/// kube-scheduler flag of configuration `vanilla-unbatched` (beta, on by default since 1.35:
/// pkg/features/kube_features.go:1926 in v1.37.2).
pub const UNBATCHED_SCHEDULER_ARG: &str = "--feature-gates=OpportunisticBatching=false";
/// Lets the bench read kube-scheduler's /metrics without credentials (loopback only).
pub const SCHEDULER_METRICS_ARG: &str =
    "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics";
/// Configuration (d)'s second scheduler: scheduler-config/ as shipped, profile
/// [`SECOND_SCHEDULER_NAME`].
pub const SECOND_SCHEDULER_CONFIG: &str = "muster-second-scheduler.yaml";
pub const VANILLA_SCHEDULER_CONFIG: &str =
    "# written by the e2e_throughput bench: stock kube-scheduler, no extender
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /set/by/the/harness
leaderElection:
  leaderElect: false
profiles:
  - schedulerName: default-scheduler
";

/// Everything up to a running scheduler; the late nodes are created by the run.
pub async fn start(mode: Mode, p: &Params, w: &Workload) -> Result<(ControlPlane, Option<Muster>)> {
    let mut cpo = ControlPlaneOptions::default();
    if mode == Mode::Native {
        cpo.apiserver_args = NATIVE_APISERVER_ARGS
            .iter()
            .map(|s| s.to_string())
            .collect();
        if p.topology.is_some() {
            crate::topology::with_native_gate(&mut cpo.apiserver_args);
        }
    }
    if p.apiserver_profile.is_some() {
        cpo.apiserver_args.push("--profiling=true".into());
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
    create_nodes(
        &client,
        p,
        0..p.nodes - p.late_nodes,
        mode == Mode::MusterSecond,
    )
    .await
    .context("creating nodes")?;
    if let Some(d) = &w.dra {
        let (demand, supply) = d.demand_and_supply(w, p.nodes);
        if demand > supply {
            anyhow::bail!(
                "E2E_WORKLOAD=dra: gang members claim {demand} devices, nodes publish {supply}"
            );
        }
        d.create_inventory(&client, p.nodes)
            .await
            .context("creating the DRA devices")?;
        d.create_claims(&client, w)
            .await
            .context("creating the members' ResourceClaims")?;
    }
    if mode == Mode::Native {
        create_pod_groups(&client, w)
            .await
            .context("the PodGroup API (scheduling.k8s.io/v1beta1) is not usable")?;
    }
    let muster = if mode.has_muster() {
        let bin = std::env::var_os("E2E_MUSTER_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(MUSTER_BIN));
        let mut mo = MusterOptions::new(bin, cp.kubeconfig_path(), cp.dir());
        // (b) and (d) are installed as deploy/ installs them: the policy marks and gates gang
        // members. (e) is the alternative, every pod through muster.
        if mode == Mode::MusterEveryPod {
            mo.args.push("--scope=every-pod".into());
        } else if mode == Mode::MusterSecond {
            // deploy/second-scheduler/'s policy (only muster-scheduler pods), and muster told.
            muster_harness::policy::apply_second_scheduler_policy(&client)
                .await
                .context("applying deploy/second-scheduler/gang-admission-policy.yaml")?;
            // deploy/second-scheduler/'s other policy: gang members (muster-scheduler) on the
            // gang nodes only, the default scheduler's plain pods off them.
            muster_harness::policy::apply_gang_nodes_policy(&client, NS)
                .await
                .context("applying deploy/second-scheduler/gang-nodes-policy.yaml")?;
            mo.args.push("--scope=gang-members".into());
            mo.args.push("--scheduler-names=muster-scheduler".into());
        } else {
            muster_harness::policy::apply_gang_admission_policy(&client)
                .await
                .context("applying deploy/gang-admission-policy.yaml")?;
            mo.args.push("--scope=gang-members".into());
            if mode == Mode::MusterNominateAll {
                mo.args.push("--nominate-seats=always".into());
            }
        }
        // Every muster configuration but (b'') is served as deploy/ installs it: HTTPS, the
        // client certificate required (kube-scheduler's extender client then speaks HTTP/2).
        if mode != Mode::MusterHttp {
            mo.tls = Some(
                MusterTls::generate(&cp.dir().join("muster-tls"), true)
                    .context("generating muster's certificates")?,
            );
        }
        Some(Muster::start(mo).await.context("starting muster")?)
    } else {
        None
    };
    let mut so = SchedulerOptions::default();
    so.args.push(SCHEDULER_METRICS_ARG.into());
    match &muster {
        // (d): the stock default scheduler here; muster's own scheduler is started below.
        Some(_) if mode == Mode::MusterSecond => {
            let path = cp.dir().join("bench-vanilla-scheduler.yaml");
            std::fs::write(&path, VANILLA_SCHEDULER_CONFIG)?;
            so.config = Some(path);
        }
        Some(m) => {
            so.config = Some(if mode == Mode::MusterEveryPod {
                muster_harness::control_plane::scheduler_config_file("muster-every-pod.yaml")
            } else {
                p.muster_scheduler_config.clone()
            });
            so.extender_base_url = Some(m.url());
            so.extender_tls = m.tls().map(MusterTls::extender_tls);
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
        if p.topology.is_some() {
            crate::topology::with_native_gate(&mut so.args);
        }
    }
    if mode == Mode::VanillaUnbatched {
        so.args.push(UNBATCHED_SCHEDULER_ARG.into());
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
    if let (Mode::MusterSecond, Some(m)) = (mode, &muster) {
        // The second scheduler, from the file deploy/second-scheduler/ ships (its profile
        // `muster-scheduler` sends every pod of its own to muster).
        let mut second = SchedulerOptions::default();
        second.args.push(SCHEDULER_METRICS_ARG.into());
        second.config = Some(muster_harness::control_plane::scheduler_config_file(
            SECOND_SCHEDULER_CONFIG,
        ));
        second.extender_base_url = Some(m.url());
        second.extender_tls = m.tls().map(MusterTls::extender_tls);
        cp.start_scheduler(second).await.with_context(|| {
            format!("starting the second kube-scheduler ({SECOND_SCHEDULER_CONFIG})")
        })?;
    }
    if let Some(m) = &muster {
        if mode != Mode::MusterEveryPod {
            wait_for_node_markers(m, p.nodes - p.late_nodes).await?;
        }
    }
    Ok((cp, muster))
}

/// muster publishes its marker on every node it finds (one `nodes/status` patch each, once per
/// cluster): waited for here, so the measured run counts only the writes a run's pods cause
/// (the late nodes' are in it, as on a cluster that grows). Reads muster's own gauges.
async fn wait_for_node_markers(m: &Muster, nodes: usize) -> Result<()> {
    let t0 = std::time::Instant::now();
    let deadline = t0 + std::time::Duration::from_secs(300);
    loop {
        let text = match m.get("/metrics").await {
            Ok((200, text)) => text,
            _ => String::new(),
        };
        let seen = crate::prometheus::metric_sum(&text, "muster_cache_nodes", &[]);
        let short = crate::prometheus::metric_sum(&text, "muster_nodes_without_marker", &[]);
        let published = crate::prometheus::metric_sum(
            &text,
            "muster_node_marker_writes_total",
            &[("outcome", "published")],
        );
        // On the bench's fresh cluster every node needs one write.
        if seen as usize == nodes && published as usize >= nodes && short == 0.0 {
            eprintln!(
                "e2e_throughput: muster published its marker on {published} of {nodes} nodes in {:.1}s",
                t0.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            anyhow::bail!(
                "muster did not publish its marker on the nodes within 300s: {seen} nodes seen, {short} short, {published} published"
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}
