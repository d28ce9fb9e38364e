//! End-to-end: muster behind a *second* kube-scheduler, started by `muster-harness` from
//! `scheduler-config/muster-second-scheduler.yaml` as shipped (profile `schedulerName:
//! muster-scheduler`; the harness rewrites only the kubeconfig, qps/burst, leader election and
//! muster's host:port). No default scheduler runs, so only pods that opt in with
//! `schedulerName: muster-scheduler` are scheduled at all.
//!
//! Waiting is polling with deadlines; "stays Pending" is an observation window in which every
//! poll must see the pod unbound.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use k8s_openapi::api::core::v1::Pod;
use muster_harness::k8s::{self, KeyScheme};
use muster_harness::{
    bail_truth, ensure_truth, holds_for, muster_view_is_checked, spread, Cluster, ClusterOptions,
    NodeShape, PodBuilder, CLUSTER_TRUTH, PLACE, TOGETHER, WINDOW,
};

use muster_harness::Timer;

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");
const SCHEDULER_NAME: &str = "muster-scheduler";

/// `Err(why)` unless every pod in `names` exists, is unbound, in phase Pending, and was not even
/// looked at by a scheduler (no PodScheduled condition). `why` is cluster truth.
fn untouched(pods: &[Pod], names: &[String]) -> std::result::Result<(), String> {
    for n in names {
        let Some(p) = pods.iter().find(|p| k8s::pod_name(p) == n) else {
            return Err(format!("{CLUSTER_TRUTH} {n} is gone"));
        };
        if let Some(node) = k8s::pod_node(p) {
            return Err(format!("{CLUSTER_TRUTH} {n} was bound to {node}"));
        }
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        if phase != Some("Pending") {
            return Err(format!("{CLUSTER_TRUTH} {n} is in phase {phase:?}"));
        }
        if let Some(c) = k8s::scheduled_condition(p) {
            return Err(format!(
                "{CLUSTER_TRUTH} {n} was looked at by a scheduler: {c}"
            ));
        }
    }
    Ok(())
}

/// Only `schedulerName: muster-scheduler` pods are scheduled, and as gangs: with room for 2 of
/// its 3 members the opted-in gang waits whole (muster: "2 of 3 members fit"), then is placed
/// whole when a node arrives; a second gang waits whole until capacity arrives too. Pods with
/// the default schedulerName — plain, and a would-be gang — stay Pending the whole time.
#[tokio::test]
async fn second_scheduler_places_opted_in_gangs_and_leaves_other_pods_alone() -> Result<()> {
    let _t = Timer(
        "second_scheduler_places_opted_in_gangs_and_leaves_other_pods_alone",
        Instant::now(),
    );
    let c = Cluster::start_with(
        ClusterOptions::new(MUSTER).scheduler_config("muster-second-scheduler.yaml"),
    )
    .await?;
    let r = async {
        let ns = "second";
        // The scheduler runs the shipped file's profile, nothing else.
        let cfg_path = c.cp.dir().join("kube-scheduler-config.yaml");
        let cfg: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&cfg_path)?)?;
        let profiles: Vec<&str> = cfg["profiles"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|p| p["schedulerName"].as_str())
                    .collect()
            })
            .unwrap_or_default();
        ensure!(
            profiles == [SCHEDULER_NAME],
            "scheduler profiles {profiles:?} in {}",
            cfg_path.display()
        );

        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("1")).await?;

        // Pods nobody should schedule: two plain ones and a gang, all with the default
        // schedulerName (created first, so they were there all along).
        let mut others = Vec::new();
        for i in 0..2 {
            let name = format!("plain-{i}");
            c.create(PodBuilder::new(ns, &name).cpu("100m")).await?;
            others.push(name);
        }
        others.extend(
            c.create_gang(ns, "default-gang", 2, 2, KeyScheme::Muster, |p| {
                p.cpu("100m")
            })
            .await?,
        );

        // The opted-in gang: 3 members of 500m (min-available 3), room for 2 of them.
        let gang = c
            .create_gang(ns, "trainer", 3, 3, KeyScheme::Muster, |p| {
                p.cpu("500m").scheduler_name(SCHEDULER_NAME)
            })
            .await?;
        let reason = format!("gang {ns}/trainer: 2 of 3 members fit");
        c.wait_gang_waiting_whole(ns, "trainer", &gang, &reason, PLACE)
            .await?;
        holds_for(
            "gang trainer to wait whole and the other pods to stay untouched",
            WINDOW,
            || async {
                if let Err(e) = untouched(&c.pods(ns).await?, &others) {
                    return Ok(Err(e));
                }
                if !muster_view_is_checked() {
                    return Ok(Ok(()));
                }
                Ok(match c.muster.gang(ns, "trainer").await? {
                    Some(g) => g.check_waiting_whole(&reason),
                    None => Err("/gangs does not list gang trainer".into()),
                })
            },
        )
        .await?;
        // Room for the third member: the gang is placed whole.
        c.add_node("node-2", NodeShape::cpu("1")).await?;

        // Poll until the gang is bound; every poll, the others must still be untouched.
        let deadline = Instant::now() + PLACE;
        let mut seen: BTreeMap<String, (String, Instant)> = BTreeMap::new();
        loop {
            let pods = c.pods(ns).await?;
            if let Err(e) = untouched(&pods, &others) {
                bail_truth!("while the gang was being placed: {e}");
            }
            let now = Instant::now();
            for p in &pods {
                if let Some(node) = k8s::pod_node(p) {
                    seen.entry(k8s::pod_name(p).to_string())
                        .or_insert_with(|| (node.to_string(), now));
                }
            }
            if gang.iter().all(|n| seen.contains_key(n)) {
                break;
            }
            if now > deadline {
                bail_truth!(
                    "gang not placed within {PLACE:?}: {}",
                    k8s::describe_pods(&pods)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let s = spread(&seen);
        eprintln!(
            "gang {ns}/trainer bound {:.3}s apart: {seen:?}",
            s.as_secs_f64()
        );
        ensure_truth!(s <= TOGETHER, "members bound {s:?} apart: {seen:?}");
        c.assert_no_overcommit().await?;

        // And they stay Pending afterwards too.
        holds_for(
            "pods with the default schedulerName to stay Pending",
            WINDOW,
            || async { Ok(untouched(&c.pods(ns).await?, &others)) },
        )
        .await?;

        // All-or-nothing holds under the second scheduler: 0.5 CPU is left on the two nodes, a
        // second opted-in gang of 2 x 400m can seat only one member, so none is bound ...
        let second = c
            .create_gang(ns, "eval", 2, 2, KeyScheme::Muster, |p| {
                p.cpu("400m").scheduler_name(SCHEDULER_NAME)
            })
            .await?;
        let reason = format!("gang {ns}/eval: 1 of 2 members fit");
        c.wait_gang_waiting_whole(ns, "eval", &second, &reason, PLACE)
            .await?;
        c.assert_gang_waits_whole_for(ns, "eval", &second, &reason, WINDOW)
            .await?;
        // ... until a node arrives; then both are bound together, and the others still wait.
        c.add_node("node-3", NodeShape::cpu("1")).await?;
        let bound = c.wait_bound(ns, &second, PLACE).await?;
        let s = spread(&bound);
        ensure_truth!(s <= TOGETHER, "eval bound {s:?} apart: {bound:?}");
        if let Err(e) = untouched(&c.pods(ns).await?, &others) {
            bail_truth!("after the second gang: {e}");
        }
        c.assert_no_overcommit().await?;
        Ok(())
    }
    .await;
    c.report(&["second"], r).await
}

/// The stock default scheduler (no extender) that runs beside the second one in a real cluster.
const DEFAULT_SCHEDULER_CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /set/by/the/harness
leaderElection:
  leaderElect: false
profiles:
  - schedulerName: default-scheduler
";

/// One of the gang nodes, created tainted and labelled (README, second scheduler).
fn gang_node() -> NodeShape {
    let key = muster_harness::policy::GANG_NODES_KEY;
    NodeShape::cpu("1")
        .label(key, "true")
        .taint(key, "true", "NoSchedule")
}

/// deploy/second-scheduler/gang-nodes-policy.yaml with the default scheduler running beside
/// the second one: a `muster-scheduler` gang member is created with the gang nodes' toleration
/// and node selector; the gang waits whole on the tainted node while 2 of its 3 members fit, and
/// is placed whole, on gang nodes only, once a second one is added. A plain pod of the default
/// scheduler that fits only the gang node's free room is kept off it the whole time (its
/// TaintToleration filter), and a plain pod that fits the plain node is bound there.
#[tokio::test]
async fn gang_nodes_policy_keeps_the_default_scheduler_off_the_gang_nodes() -> Result<()> {
    let _t = Timer(
        "gang_nodes_policy_keeps_the_default_scheduler_off_the_gang_nodes",
        Instant::now(),
    );
    let mut c = Cluster::start_with(
        ClusterOptions::new(MUSTER).scheduler_config("muster-second-scheduler.yaml"),
    )
    .await?;
    let path = c.cp.dir().join("default-scheduler.yaml");
    std::fs::write(&path, DEFAULT_SCHEDULER_CONFIG)?;
    c.cp.start_scheduler(muster_harness::control_plane::SchedulerOptions {
        config: Some(path),
        ..Default::default()
    })
    .await?;
    let r = async {
        let ns = "gang-nodes";
        c.namespace(ns).await?;
        muster_harness::policy::apply_gang_nodes_policy(&c.client(), ns).await?;
        c.add_node("gang-1", gang_node()).await?;
        c.add_node("plain-1", NodeShape::cpu("500m")).await?;

        // 3 x 400m: 2 fit gang-1, none may go to plain-1 (the node selector).
        let gang = c
            .create_gang(ns, "trainer", 3, 3, KeyScheme::Muster, |p| {
                p.cpu("400m").scheduler_name(SCHEDULER_NAME)
            })
            .await?;
        for p in c.pods(ns).await? {
            ensure_truth!(
                muster_harness::policy::keeps_to_gang_nodes(&p),
                "{} was created without the gang nodes' toleration and node selector: {:?}",
                k8s::pod_name(&p),
                p.spec
            );
        }
        // 600m fits only gang-1's free room; 200m fits plain-1.
        c.create(PodBuilder::new(ns, "plain-big").cpu("600m"))
            .await?;
        c.create(PodBuilder::new(ns, "plain-small").cpu("200m"))
            .await?;
        c.wait_bound(ns, &["plain-small".to_string()], PLACE)
            .await?;
        let reason = format!(
            "gang {ns}/trainer: 2 of 3 members placed; no node for the next: 0/2 nodes are \
             available: 1 node(s) didn't have enough room, 1 node(s) didn't match Pod's node \
             affinity/selector."
        );
        c.wait_gang_waiting_whole(ns, "trainer", &gang, &reason, PLACE)
            .await?;
        let off_gang_nodes = |pods: &[Pod]| -> std::result::Result<(), String> {
            for p in pods {
                let (name, node) = (k8s::pod_name(p), k8s::pod_node(p));
                if name.starts_with("plain-") && node.is_some_and(|n| n.starts_with("gang-")) {
                    return Err(format!(
                        "{CLUSTER_TRUTH} plain pod {name} was bound to {node:?}"
                    ));
                }
                if gang.iter().any(|g| g == name) && node.is_some_and(|n| !n.starts_with("gang-")) {
                    return Err(format!(
                        "{CLUSTER_TRUTH} member {name} was bound to {node:?}"
                    ));
                }
            }
            Ok(())
        };
        holds_for(
            "plain-big to stay off gang-1 while the gang waits whole",
            WINDOW,
            || async {
                let pods = c.pods(ns).await?;
                if let Err(e) = off_gang_nodes(&pods) {
                    return Ok(Err(e));
                }
                Ok(untouched_by_binding(&pods, &gang))
            },
        )
        .await?;
        let pods = c.pods(ns).await?;
        match pods.iter().find(|p| k8s::pod_name(p) == "plain-big") {
            Some(p) if k8s::pod_node(p).is_none() => {}
            other => bail_truth!("plain-big is not Pending: {:?}", other.map(k8s::pod_node)),
        }

        c.add_node("gang-2", gang_node()).await?;
        let bound = c.wait_bound(ns, &gang, PLACE).await?;
        let s = spread(&bound);
        ensure_truth!(s <= TOGETHER, "trainer bound {s:?} apart: {bound:?}");
        if let Err(e) = off_gang_nodes(&c.pods(ns).await?) {
            bail_truth!("after the gang was placed: {e}");
        }
        c.assert_no_overcommit().await?;
        Ok(())
    }
    .await;
    c.report(&["gang-nodes"], r).await
}

/// `Err(why)` if any of `names` is bound (cluster truth).
fn untouched_by_binding(pods: &[Pod], names: &[String]) -> std::result::Result<(), String> {
    for p in pods {
        if let Some(node) = k8s::pod_node(p) {
            if names.iter().any(|n| n == k8s::pod_name(p)) {
                return Err(format!(
                    "{CLUSTER_TRUTH} {} was bound to {node}",
                    k8s::pod_name(p)
                ));
            }
        }
    }
    Ok(())
}
