//! End-to-end: preemption with muster as the stock kube-scheduler's `preemptVerb` extender
//! (evict-for-whole), on a real control plane with fake nodes (no kubelets).
//!
//! Two PriorityClasses, low (100) and high (100000). Every pod the harness builds has
//! `terminationGracePeriodSeconds: 0` and no finalizers, so a victim kube-scheduler deletes
//! (or muster evicts) is removed from the API server at once, as if a kubelet had confirmed it:
//! "evicted" below means "gone". No kube-controller-manager runs, so a PodDisruptionBudget's
//! status is never computed and the Eviction API refuses every eviction it covers (HTTP 429):
//! exactly the "budget does not allow it" case.
//!
//! `tests/control-run` runs these with kube-scheduler alone; the tests that claim muster's
//! behaviour fail there (kube-scheduler evicts for nothing, takes a gang member where a plain
//! pod would do, splits gangs) on cluster truth: which pods exist and where they are bound.
//! muster's own Events are read only after that, and not in the control run. The tests where
//! kube-scheduler alone leaves the same cluster state are excluded there with the reason.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use muster_harness::checks::metric_sum;
use muster_harness::k8s::KeyScheme;
use muster_harness::{
    ensure_truth, holds_for, muster_view_is_checked, pod_names as names, Cluster, ClusterOptions,
    NodeShape, Pattern, PodBuilder, Timer, TruthContext, CLUSTER_TRUTH, PLACE, REASON,
};

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");
const NS: &str = "ml";
/// Observation window for "stays as it is" after the decisive moment: kube-scheduler's
/// preemption (pick victims, delete them, nominate) takes one scheduling cycle; 5 s is a margin
/// of more than 10x over a 300 ms cycle on a loaded 2-core machine.
const WINDOW: Duration = Duration::from_secs(5);
/// A gang that cannot run even after evictions, in the control run (no verdict of muster's to
/// wait for): nothing is evicted for this long.
const NOTHING_EVICTED: Duration = Duration::from_secs(30);

async fn setup(c: &Cluster, nodes: &[&str]) -> Result<()> {
    c.namespace(NS).await?;
    for (name, value) in [("low", 100), ("high", 100_000)] {
        priority_class(c, name, value).await?;
    }
    for n in nodes {
        c.add_node(n, NodeShape::cpu("1")).await?;
    }
    Ok(())
}

async fn priority_class(c: &Cluster, name: &str, value: i32) -> Result<()> {
    let pc = PriorityClass {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        value: Some(value),
        ..Default::default()
    };
    Api::<PriorityClass>::all(c.client())
        .create(&PostParams::default(), &pc)
        .await
        .with_context(|| format!("creating PriorityClass {name}"))?;
    Ok(())
}

fn plain(name: &str, class: &str, cpu: &str) -> PodBuilder {
    PodBuilder::new(NS, name).cpu(cpu).priority_class(class)
}

fn member(group: &str, i: u32, min: u32, class: &str) -> PodBuilder {
    PodBuilder::new(NS, &format!("{group}-{i}"))
        .cpu("1")
        .priority_class(class)
        .label("app", group)
        .gang(KeyScheme::Muster, group, min)
}

/// Pod name → node of every pod that exists and is bound, and the names that exist.
async fn snapshot(c: &Cluster) -> Result<(BTreeMap<String, String>, Vec<String>)> {
    let pods = c.pods(NS).await?;
    let exist = pods
        .iter()
        .map(|p| muster_harness::k8s::pod_name(p).to_string())
        .collect();
    Ok((c.bound_pods(NS).await?, exist))
}

/// Every one of `names` exists and stays on the node it is on, for `window`.
async fn stay_bound_for(c: &Cluster, names: &[String], window: Duration) -> Result<()> {
    let (before, _) = snapshot(c).await?;
    for n in names {
        ensure_truth!(before.contains_key(n), "{n} is not bound: {before:?}");
    }
    holds_for(&format!("{names:?} to stay bound"), window, || async {
        let (now, _) = snapshot(c).await?;
        let moved: Vec<String> = names
            .iter()
            .filter(|n| now.get(*n) != before.get(*n))
            .map(|n| format!("{n}: {:?} → {:?}", before.get(n), now.get(n)))
            .collect();
        Ok(if moved.is_empty() {
            Ok(())
        } else {
            Err(format!("{CLUSTER_TRUTH} {}", moved.join(", ")))
        })
    })
    .await
}

/// Waits until none of `names` exists any more (cluster truth: evictions).
async fn wait_gone(c: &Cluster, names: &[String], timeout: Duration) -> Result<()> {
    muster_harness::wait_for(&format!("{names:?} to be gone"), timeout, || async {
        let (_, exist) = snapshot(c).await?;
        let left: Vec<&String> = names.iter().filter(|n| exist.contains(n)).collect();
        Ok(if left.is_empty() {
            muster_harness::Progress::Done(())
        } else {
            muster_harness::Progress::NotYet(format!("still there: {left:?}"))
        })
    })
    .await
    .truth()
}

/// A low-priority gang `run` of two, one member on each of two of the nodes.
async fn running_gang(c: &Cluster, mode: Option<&str>) -> Result<Vec<String>> {
    let mut members = Vec::new();
    for i in 0..2 {
        let mut p = member("run", i, 2, "low");
        if let Some(m) = mode {
            p = p.annotation("muster.dev/disruption", m);
        }
        c.create(p).await?;
        members.push(format!("run-{i}"));
    }
    c.wait_bound(NS, &members, PLACE).await?;
    Ok(members)
}

/// Sets the pod's phase to Running, as a kubelet would.
async fn mark_running(c: &Cluster, name: &str) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(c.client(), NS);
    let patch = serde_json::json!({"status": {"phase": "Running"}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("marking {name} Running"))?;
    Ok(())
}

// -------------------------------------------------------------------------------------------

/// Two 1-CPU nodes run low-priority plain pods; a high-priority gang of
/// 3 × 1 CPU can never run on two nodes. kube-scheduler alone evicts both plain pods anyway;
/// with muster, the preempt verb answers "no candidate" (the gang could place only 2 of 3
/// members even with every lower-priority pod gone) and nothing is evicted.
///
/// With every node full, kube-scheduler calls preempt before the extender's filter, often
/// before muster's watch has delivered the member: muster then answers "no candidate" (it
/// cannot judge a gang it has not seen) and asks for a retry once it has. Gathered behind
/// muster's gate (the shipped mode), the gang is never let through, and its waiting message
/// says preemption cannot help.
#[tokio::test]
async fn a_gang_that_cannot_run_even_after_evictions_evicts_nothing() -> Result<()> {
    let _t = Timer(
        "a_gang_that_cannot_run_even_after_evictions_evicts_nothing",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let r = async {
        setup(&c, &["n1", "n2"]).await?;
        let low = names(&["low-0", "low-1"]);
        for n in &low {
            c.create(plain(n, "low", "1")).await?;
        }
        c.wait_bound(NS, &low, PLACE).await?;
        let gang = c
            .create_gang(NS, "big", 3, 3, KeyScheme::Muster, |p| {
                p.cpu("1").priority_class("high")
            })
            .await?;
        // The control run checks cluster truth only: kube-scheduler alone evicts both plain
        // pods within a cycle of the gang's creation, and this fails at once. With muster the
        // decisive moment is its verdict, written as it answers kube-scheduler's preempt call:
        // kube-scheduler would evict within a cycle after it, so nothing evicted for WINDOW
        // after it is the claim (no fixed 30 s of idling).
        // Gathered behind muster's gate (the shipped mode) the gang never reaches kube-scheduler:
        // muster's own look at preemption is the verdict, in the gang's waiting message.
        let verdict = if c.gathers() {
            "even with every lower-priority pod evicted: preemption cannot help"
        } else {
            "evicts nothing"
        };
        let window = if muster_view_is_checked() {
            c.wait_event_containing(NS, &gang, verdict, REASON).await?;
            WINDOW
        } else {
            NOTHING_EVICTED
        };
        stay_bound_for(&c, &low, window).await?;
        c.assert_none_bound_for(NS, &gang, Duration::ZERO).await?;
        Ok(())
    }
    .await;
    c.report(&[NS], r).await
}

/// A low-priority gang of two runs on two nodes; the third node runs two
/// low-priority plain pods (kube-scheduler alone prefers the node with fewer victims: a gang
/// member). A high-priority plain pod arrives: the plain pods are the victims, the gang keeps
/// both members.
#[tokio::test]
async fn a_plain_victim_is_chosen_over_a_member_of_a_running_gang() -> Result<()> {
    let _t = Timer(
        "a_plain_victim_is_chosen_over_a_member_of_a_running_gang",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let r = async {
        setup(&c, &["n1", "n2", "n3"]).await?;
        let gang = running_gang(&c, None).await?;
        let small = names(&["small-0", "small-1"]);
        for n in &small {
            c.create(plain(n, "low", "500m")).await?;
        }
        c.wait_bound(NS, &small, PLACE).await?;
        c.create(plain("urgent", "high", "1")).await?;
        c.wait_bound(NS, &names(&["urgent"]), PLACE).await?;
        // urgent fits only once its victims are gone: whether they were the gang's member (as
        // kube-scheduler alone picks) is decided now.
        stay_bound_for(&c, &gang, Duration::ZERO).await?;
        // REASON, not PLACE, once urgent is bound.
        wait_gone(&c, &small, REASON).await?;
        stay_bound_for(&c, &gang, WINDOW).await
    }
    .await;
    c.report(&[NS], r).await
}

/// Works with kube-scheduler alone too: two nodes run low-priority plain
/// pods; a high-priority gang of two fits only by evicting both, and is placed whole.
#[tokio::test]
async fn a_gang_that_fits_by_evicting_is_placed_whole() -> Result<()> {
    let _t = Timer(
        "a_gang_that_fits_by_evicting_is_placed_whole",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let r = async {
        setup(&c, &["n1", "n2"]).await?;
        let low = names(&["low-0", "low-1"]);
        for n in &low {
            c.create(plain(n, "low", "1")).await?;
        }
        c.wait_bound(NS, &low, PLACE).await?;
        let gang = c
            .create_gang(NS, "pair", 2, 2, KeyScheme::Muster, |p| {
                p.cpu("1").priority_class("high")
            })
            .await?;
        c.wait_bound(NS, &gang, PLACE).await?;
        wait_gone(&c, &low, Duration::ZERO).await?;
        if !muster_view_is_checked() {
            return Ok(());
        }
        match c.muster.gang(NS, "pair").await? {
            Some(g) if g.state == "placed" => Ok(()),
            other => bail!("expected gang ml/pair placed in /gangs, got {other:?}"),
        }
    }
    .await;
    c.report(&[NS], r).await
}

/// A gang's priority is its highest member's: a gang with a high member is never disrupted
/// by a high-priority pod, even though its other member is low (kube-scheduler alone evicts
/// that member).
#[tokio::test]
async fn a_gang_is_never_disrupted_by_a_preemptor_of_equal_priority() -> Result<()> {
    let _t = Timer(
        "a_gang_is_never_disrupted_by_a_preemptor_of_equal_priority",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let r = async {
        setup(&c, &["n1", "n2"]).await?;
        let gang = names(&["run-0", "run-1"]);
        c.create(member("run", 0, 2, "low")).await?;
        c.create(member("run", 1, 2, "high")).await?;
        c.wait_bound(NS, &gang, PLACE).await?;
        c.create(plain("urgent", "high", "1")).await?;
        // muster's Event says it judged the preemption (not read in a control run, where
        // kube-scheduler evicts run-0 within the window below).
        if muster_view_is_checked() {
            c.wait_event_containing(NS, &names(&["urgent"]), "not lower than", PLACE)
                .await?;
        }
        stay_bound_for(&c, &gang, WINDOW).await?;
        c.assert_none_bound_for(NS, &names(&["urgent"]), Duration::ZERO)
            .await
    }
    .await;
    c.report(&[NS], r).await
}

/// Only gang members can make room: the gang (default disruption mode `gang`) is evicted
/// whole — kube-scheduler removes the victim, muster evicts the other member — and every
/// member hears who displaced it.
#[tokio::test]
async fn a_gang_disrupted_by_preemption_is_evicted_whole() -> Result<()> {
    let _t = Timer(
        "a_gang_disrupted_by_preemption_is_evicted_whole",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let r = async {
        setup(&c, &["n1", "n2"]).await?;
        let gang = running_gang(&c, None).await?;
        c.create(plain("urgent", "high", "1")).await?;
        c.wait_bound(NS, &names(&["urgent"]), PLACE).await?;
        // muster evicts the rest of the gang when kube-scheduler commits to the preemption that
        // made room for urgent: REASON, not PLACE, once urgent is bound (in a control run,
        // with nothing left pending, the truth is decided now: see settled_deadline).
        wait_gone(&c, &gang, c.settled_deadline(REASON).await?).await
    }
    .await;
    c.report(&[NS], r).await
}

/// The same, with a PodDisruptionBudget over the gang that does not allow an eviction: the
/// member kube-scheduler picked is removed (kube-scheduler deletes its victims, it does not
/// evict them), muster's eviction of the other member is refused, so that member keeps
/// running and an Event on it says why.
#[tokio::test]
async fn a_gang_disrupted_whole_respects_a_pod_disruption_budget() -> Result<()> {
    let _t = Timer(
        "a_gang_disrupted_whole_respects_a_pod_disruption_budget",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let r = async {
        setup(&c, &["n1", "n2"]).await?;
        let pdb = PodDisruptionBudget {
            metadata: ObjectMeta {
                name: Some("run".into()),
                ..Default::default()
            },
            spec: Some(PodDisruptionBudgetSpec {
                min_available: Some(IntOrString::Int(2)),
                selector: Some(LabelSelector {
                    match_labels: Some([("app".to_string(), "run".to_string())].into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: None,
        };
        Api::<PodDisruptionBudget>::namespaced(c.client(), NS)
            .create(&PostParams::default(), &pdb)
            .await?;
        let gang = running_gang(&c, None).await?;
        // The API server ignores budgets for Pending pods (nothing runs yet, so nothing is
        // disrupted): say they run, as their kubelet would.
        for n in &gang {
            mark_running(&c, n).await?;
        }
        c.create(plain("urgent", "high", "1")).await?;
        c.wait_bound(NS, &names(&["urgent"]), PLACE).await?;
        let (_, exist) = snapshot(&c).await?;
        let left: Vec<String> = gang.iter().filter(|n| exist.contains(n)).cloned().collect();
        ensure_truth!(left.len() == 1, "one member left expected, have {left:?}");
        c.wait_event_containing(NS, &left, "PodDisruptionBudget does not allow", PLACE)
            .await?;
        stay_bound_for(&c, &left, WINDOW).await
    }
    .await;
    c.report(&[NS], r).await
}

/// A gang in `pod` disruption mode (an elastic job) loses the one member preemption needs.
#[tokio::test]
async fn a_gang_in_pod_mode_loses_one_member_only() -> Result<()> {
    let _t = Timer("a_gang_in_pod_mode_loses_one_member_only", Instant::now());
    let c = Cluster::start(MUSTER).await?;
    let r = async {
        setup(&c, &["n1", "n2"]).await?;
        let gang = running_gang(&c, Some("pod")).await?;
        c.create(plain("urgent", "high", "1")).await?;
        let bound = c.wait_bound(NS, &names(&["urgent"]), PLACE).await?;
        let node = &bound["urgent"].0;
        let (now, exist) = snapshot(&c).await?;
        let left: Vec<String> = gang.iter().filter(|n| exist.contains(n)).cloned().collect();
        ensure_truth!(
            left.len() == 1 && now.get(&left[0]) != Some(node),
            "one member left, elsewhere than {node}, expected: {now:?}"
        );
        stay_bound_for(&c, &left, WINDOW).await
    }
    .await;
    c.report(&[NS], r).await
}

/// Plays the kubelet for pods deleted with a grace period (no kubelet runs here): each is
/// removed `after` it was first seen terminating, as a kubelet would once its containers stop.
fn kubelet(c: &Cluster, after: Duration) -> tokio::task::JoinHandle<()> {
    let api: Api<Pod> = Api::namespaced(c.client(), NS);
    tokio::spawn(async move {
        let mut terminating_since: BTreeMap<String, Instant> = BTreeMap::new();
        loop {
            if let Ok(list) = api.list(&ListParams::default()).await {
                for p in list {
                    if p.metadata.deletion_timestamp.is_none() {
                        continue;
                    }
                    let name = muster_harness::k8s::pod_name(&p).to_string();
                    let since = *terminating_since
                        .entry(name.clone())
                        .or_insert_with(Instant::now);
                    if since.elapsed() >= after {
                        let now = DeleteParams {
                            grace_period_seconds: Some(0),
                            ..Default::default()
                        };
                        let _ = api.delete(&name, &now).await;
                    }
                }
            }
            // A kubelet's own pace; the test's conditions are polled with deadlines.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// Two 1-CPU nodes n1 and n2, each running a low-priority pod (`low-0`, `low-1`) that takes
/// `grace` seconds to terminate, the PriorityClass `middle` (1000), and a high-priority gang
/// `pair` of two 1-CPU members, which can run only by preempting both. Returns the low pods'
/// names and the members'.
async fn a_pair_that_must_preempt_twice(
    c: &Cluster,
    grace: i64,
) -> Result<(Vec<String>, Vec<String>)> {
    setup(c, &["n1", "n2"]).await?;
    priority_class(c, "middle", 1000).await?;
    let low = names(&["low-0", "low-1"]);
    for (n, node) in low.iter().zip(["n1", "n2"]) {
        let mut pod = plain(n, "low", "1")
            .node_selector("kubernetes.io/hostname", node)
            .build();
        if let Some(spec) = pod.spec.as_mut() {
            spec.termination_grace_period_seconds = Some(grace);
        }
        muster_harness::k8s::create_pod(&c.client(), NS, &pod).await?;
    }
    c.wait_bound(NS, &low, PLACE).await?;
    let gang = c
        .create_gang(NS, "pair", 2, 2, KeyScheme::Muster, |p| {
            p.cpu("1").priority_class("high")
        })
        .await?;
    Ok((low, gang))
}

/// While a preempting gang's victims terminate, the room they free is held for it, and the
/// hold lasts until the gang binds. n1 and n2 each run a low-priority pod that takes 3 s to
/// terminate. A high-priority gang of two needs both nodes: muster lets it through its gate for
/// preemption; the member kube-scheduler tries first preempts on one node, and muster's plan
/// puts its partner on the other, where a low pod still runs (room planned, no seat until that
/// pod goes: no-overcommit), and the partner preempts it there. A plain pod of middle priority
/// created right after the first eviction starts must not be bound while the gang is placed
/// whole, bound together by muster; and no member is ever told its gang's seats were released
/// (the gathering once counted only seated members, so the next round dropped the hold while
/// the planned member's victim terminated). kube-scheduler alone binds no gang together (no
/// `GangPlaced` Event).
#[tokio::test]
async fn the_room_a_preempting_gang_frees_is_held_while_its_victims_terminate() -> Result<()> {
    let _t = Timer(
        "the_room_a_preempting_gang_frees_is_held_while_its_victims_terminate",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let kubelet = kubelet(&c, Duration::from_secs(3));
    let r = async {
        let (low, gang) = a_pair_that_must_preempt_twice(&c, 30).await?;
        let (cluster, victims, members) = (&c, &low, &gang);
        muster_harness::wait_for("a victim to be terminating", PLACE, || async move {
            let pods = cluster.pods(NS).await?;
            let evicting = pods.iter().any(|p| {
                p.metadata.deletion_timestamp.is_some()
                    && victims
                        .iter()
                        .any(|l| l == muster_harness::k8s::pod_name(p))
            });
            Ok(if evicting {
                muster_harness::Progress::Done(())
            } else {
                muster_harness::Progress::NotYet("no victim is being deleted".into())
            })
        })
        .await?;
        c.create(plain("middle", "middle", "1")).await?;
        muster_harness::wait_for("the gang bound, the middle pod not", PLACE, || async move {
            let (bound, exist) = snapshot(cluster).await?;
            if let Some(node) = bound.get("middle") {
                bail!("the middle pod was bound to {node} while the gang waited: {bound:?}");
            }
            ensure!(
                exist.iter().any(|n| n == "middle"),
                "the middle pod is gone (preempted?)"
            );
            Ok(if members.iter().all(|g| bound.contains_key(g)) {
                muster_harness::Progress::Done(())
            } else {
                muster_harness::Progress::NotYet(format!("bound: {bound:?}"))
            })
        })
        .await?;
        c.wait_event_containing(NS, &gang, "room held on", PLACE)
            .await?;
        c.wait_event_containing(NS, &gang, "members bound together", PLACE)
            .await?;
        for m in &gang {
            let events = c.events_for(NS, m).await?;
            if let Some(e) = events.iter().find(|e| e.message.contains("seats released")) {
                bail!("the hold was dropped while the victims terminated: {m}: {e}");
            }
        }
        wait_gone(&c, &low, Duration::ZERO).await?;
        c.assert_none_bound_for(NS, &names(&["middle"]), WINDOW)
            .await
    }
    .await;
    kubelet.abort();
    c.report(&[NS], r).await
}

/// kube-scheduler's cache can show a preemption's victims gone before muster's watch does; the
/// room the gang preempted for stays its own. As in the test above, a gang of two high-priority
/// members preempts a low pod on each of n1 and n2 (each victim terminating until the test
/// deletes it), and a plain pod of middle priority waits for a node. Then muster's pod watch is
/// stalled at its API proxy and both victims are deleted: kube-scheduler tries the members at
/// once, muster still sees the victims. muster once refused the planned member there, so
/// kube-scheduler's preemption found no victim and cleared its nomination, which was all that
/// kept the middle pod off that node (seen once in CI: the middle pod bound, the gang left
/// waiting). Now muster takes both bind calls and waits for the victims to go: no member
/// loses its nomination, and once the watch delivers the deletions the gang is bound whole,
/// the middle pod not. kube-scheduler alone reaches the same cluster state (it asks no
/// extender, so nothing clears its nominations).
#[tokio::test]
async fn the_room_a_preempting_gang_frees_stays_held_when_muster_sees_its_victims_go_late(
) -> Result<()> {
    let _t = Timer(
        "the_room_a_preempting_gang_frees_stays_held_when_muster_sees_its_victims_go_late",
        Instant::now(),
    );
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).through_api_proxy()).await?;
    let r = async {
        // Terminating until the test deletes them (no kubelet confirms it here).
        let (low, gang) = a_pair_that_must_preempt_twice(&c, 300).await?;
        let (cluster, victims, members) = (&c, &low, &gang);
        muster_harness::wait_for(
            "both victims terminating, each member nominated to its node",
            PLACE,
            || async move {
                let pods = cluster.pods(NS).await?;
                let terminating = victims.iter().all(|v| {
                    pods.iter().any(|p| {
                        muster_harness::k8s::pod_name(p) == v
                            && p.metadata.deletion_timestamp.is_some()
                    })
                });
                let mut nominated: Vec<String> = members
                    .iter()
                    .filter_map(|m| nomination(&pods, m))
                    .collect();
                nominated.sort();
                nominated.dedup();
                Ok(if terminating && nominated.len() == 2 {
                    muster_harness::Progress::Done(())
                } else {
                    muster_harness::Progress::NotYet(format!(
                        "victims terminating: {terminating}, nominated to {nominated:?}"
                    ))
                })
            },
        )
        .await?;
        c.create(plain("middle", "middle", "1")).await?;
        let proxy = c.api_proxy().context("started through the proxy")?;
        let watch = proxy.stall(Pattern {
            method: "GET",
            path_contains: vec!["/api/v1/pods?".into(), "watch=true".into()],
        });
        let waits = |m: &BTreeMap<String, f64>| metric_sum(m, "muster_quorum_waits_total");
        let before = waits(&c.muster.metrics().await?);
        let api: Api<Pod> = Api::namespaced(c.client(), NS);
        let now = DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        for v in &low {
            api.delete(v, &now).await?;
        }
        let muster = &c.muster;
        muster_harness::wait_for(
            "both members' bind calls held by muster, which still sees the victims",
            PLACE,
            || async move {
                let pods = cluster.pods(NS).await?;
                if let Some(m) = members.iter().find(|m| {
                    nomination(&pods, m).is_none() && !cluster_bound(&pods, m)
                }) {
                    bail!(
                        "{CLUSTER_TRUTH} {m}'s nomination was cleared while its victims' room \
                         was free to kube-scheduler and not yet to muster"
                    );
                }
                let held = waits(&muster.metrics().await?) - before;
                Ok(if held >= 2.0 {
                    muster_harness::Progress::Done(())
                } else {
                    muster_harness::Progress::NotYet(format!("{held} bind calls held"))
                })
            },
        )
        .await?;
        proxy.end_stall(watch);
        muster_harness::wait_for("the gang bound, the middle pod not", PLACE, || async move {
            let (bound, exist) = snapshot(cluster).await?;
            if let Some(node) = bound.get("middle") {
                bail!("{CLUSTER_TRUTH} the middle pod was bound to {node} while the gang waited: {bound:?}");
            }
            ensure!(exist.iter().any(|n| n == "middle"), "the middle pod is gone");
            Ok(if members.iter().all(|g| bound.contains_key(g)) {
                muster_harness::Progress::Done(())
            } else {
                muster_harness::Progress::NotYet(format!("bound: {bound:?}"))
            })
        })
        .await?;
        c.assert_none_bound_for(NS, &names(&["middle"]), WINDOW)
            .await
    }
    .await;
    c.report(&[NS], r).await
}

/// The node `name` is nominated to, if it is pending and nominated.
fn nomination(pods: &[Pod], name: &str) -> Option<String> {
    pods.iter()
        .find(|p| muster_harness::k8s::pod_name(p) == name)
        .and_then(|p| p.status.as_ref()?.nominated_node_name.clone())
        .filter(|n| !n.is_empty())
}

/// Whether `name` has a node.
fn cluster_bound(pods: &[Pod], name: &str) -> bool {
    pods.iter()
        .find(|p| muster_harness::k8s::pod_name(p) == name)
        .is_some_and(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
}

/// A gang preempting another gang (evict-for-whole, never-half): three 1-CPU nodes, a
/// low-priority gang `run` of two running on two of them, a high-priority gang `big` of two.
/// One `big` member fits on the free node; the other needs a `run` member's node. muster
/// evicts `run` whole (never half of the victim gang) and places `big` whole, bound together.
/// kube-scheduler alone binds one `big` member to the free node, preempts one `run` member for
/// the other and leaves the second `run` member running: half of the victim gang.
#[tokio::test]
async fn a_gang_preempting_a_lower_gang_evicts_it_whole_and_is_placed_whole() -> Result<()> {
    let _t = Timer(
        "a_gang_preempting_a_lower_gang_evicts_it_whole_and_is_placed_whole",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let r = async {
        setup(&c, &["n1", "n2", "n3"]).await?;
        let run = running_gang(&c, None).await?;
        let big = c
            .create_gang(NS, "big", 2, 2, KeyScheme::Muster, |p| {
                p.cpu("1").priority_class("high")
            })
            .await?;
        let bound = c.wait_bound(NS, &big, PLACE).await?;
        ensure_truth!(
            muster_harness::spread(&bound) <= muster_harness::TOGETHER,
            "the preempting gang was not bound together: {bound:?}"
        );
        // Both victims go, not one: the victim gang is never left half (in a control run, with
        // nothing left pending, decided now: see settled_deadline).
        wait_gone(&c, &run, c.settled_deadline(REASON).await?).await?;
        c.assert_no_overcommit().await
    }
    .await;
    c.report(&[NS], r).await
}

/// A gang's priority is its highest member's, against a preempting gang too: `run` has a low
/// and a high member, and a gang `big` of two high members (equal priority) finds room for one
/// member on the free node only. muster evicts nothing and `big` binds nothing (it cannot run
/// whole, so it holds nothing either). kube-scheduler alone evicts `run`'s low member for the
/// second `big` member and binds both.
#[tokio::test]
async fn a_gang_is_never_preempted_by_a_gang_of_equal_priority() -> Result<()> {
    let _t = Timer(
        "a_gang_is_never_preempted_by_a_gang_of_equal_priority",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let r = async {
        setup(&c, &["n1", "n2", "n3"]).await?;
        let run = names(&["run-0", "run-1"]);
        c.create(member("run", 0, 2, "low")).await?;
        c.create(member("run", 1, 2, "high")).await?;
        c.wait_bound(NS, &run, PLACE).await?;
        let big = c
            .create_gang(NS, "big", 2, 2, KeyScheme::Muster, |p| {
                p.cpu("1").priority_class("high")
            })
            .await?;
        // muster's Event says it judged the preemption (not read in a control run, where
        // kube-scheduler evicts run-0 within the window below).
        if muster_view_is_checked() {
            c.wait_event_containing(NS, &big, "not lower than", PLACE)
                .await?;
        }
        stay_bound_for(&c, &run, WINDOW).await?;
        c.assert_none_bound_for(NS, &big, Duration::ZERO).await?;
        c.assert_no_overcommit().await
    }
    .await;
    c.report(&[NS], r).await
}

/// How soon both victims of a preempting gang must be marked for deletion: each member's
/// preemption is one cycle once kube-scheduler tries it, and a member that failed a cycle is
/// tried again within kube-scheduler's maximum back-off (10 s), plus a margin for a busy
/// machine. Well under the ~40 s the second eviction took when the second member was left
/// waiting for a retry no event brought.
const BOTH_EVICTED: Duration =
    Duration::from_secs(muster_harness::timing::SCHEDULER_MAX_BACKOFF.as_secs() + 5);

/// The finalizer that keeps a victim terminating until the test removes it.
const HELD: &str = "muster.dev/test-held";

/// Every pod through muster (every-pod mode): a high-priority gang of two preempts two
/// low-priority plain pods, one on each 1-CPU node, which terminate slowly (a finalizer holds
/// them until the test removes it). Both victims are marked for deletion within
/// [`BOTH_EVICTED`]: the second member's preemption is not left to wait for a retry while the
/// first member's victim terminates (the room planned for it needs its own victim evicted).
/// Then, the finalizers removed, the gang binds whole (never-half, evict-for-whole).
#[tokio::test]
async fn every_pod_a_gang_preempting_two_slowly_terminating_pods_evicts_both_promptly_and_binds_whole(
) -> Result<()> {
    let _t = Timer(
        "every_pod_a_gang_preempting_two_slowly_terminating_pods_evicts_both_promptly",
        Instant::now(),
    );
    let c = Cluster::start_with(muster_harness::ClusterOptions::new(MUSTER).every_pod()).await?;
    let r = async {
        setup(&c, &["n1", "n2"]).await?;
        let low = names(&["low-0", "low-1"]);
        for n in &low {
            let mut pod = plain(n, "low", "1").build();
            pod.metadata.finalizers = Some(vec![HELD.to_string()]);
            muster_harness::k8s::create_pod(&c.client(), NS, &pod).await?;
        }
        c.wait_bound(NS, &low, PLACE).await?;
        let t0 = Instant::now();
        let gang = c
            .create_gang(NS, "pair", 2, 2, KeyScheme::Muster, |p| {
                p.cpu("1").priority_class("high")
            })
            .await?;
        let (cluster, victims) = (&c, &low);
        muster_harness::wait_for(
            "both victims to be marked for deletion",
            PLACE,
            || async move {
                let pods = cluster.pods(NS).await?;
                let marked: Vec<&str> = pods
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_some())
                    .map(muster_harness::k8s::pod_name)
                    .filter(|n| victims.iter().any(|v| v == n))
                    .collect();
                Ok(if marked.len() == victims.len() {
                    muster_harness::Progress::Done(())
                } else {
                    muster_harness::Progress::NotYet(format!("marked for deletion: {marked:?}"))
                })
            },
        )
        .await
        .truth()?;
        let took = t0.elapsed();
        eprintln!(
            "both victims marked for deletion {:.2}s after the gang's creation (bound: \
             {BOTH_EVICTED:?})",
            took.as_secs_f64()
        );
        ensure_truth!(
            took <= BOTH_EVICTED,
            "the second victim's eviction came {took:?} after the gang's creation \
             (> {BOTH_EVICTED:?})"
        );
        let api: Api<Pod> = Api::namespaced(c.client(), NS);
        for n in &low {
            api.patch(
                n,
                &PatchParams::default(),
                &Patch::Merge(&serde_json::json!({"metadata": {"finalizers": null}})),
            )
            .await
            .with_context(|| format!("removing {n}'s finalizer"))?;
        }
        let bound = c.wait_bound(NS, &gang, PLACE).await?;
        let s = muster_harness::spread(&bound);
        ensure_truth!(
            s <= muster_harness::TOGETHER,
            "members bound {s:?} apart: {bound:?}"
        );
        wait_gone(&c, &low, Duration::ZERO).await?;
        c.assert_no_overcommit().await
    }
    .await;
    c.report(&[NS], r).await
}
