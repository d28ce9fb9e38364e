//! End-to-end: gangs on an autoscaled cluster (`ClusterOptions::with_karpenter`: Karpenter
//! v1.15's KWOK cloud provider beside kube-controller-manager and KWOK, with a NodePool of 4-CPU
//! nodes; muster with `--capacity-buffers`). Autoscalers add nodes only for pods kube-scheduler
//! marked unschedulable, and a gang gathered behind muster's gate is not: muster asks Karpenter
//! for room for the whole gang as one CapacityBuffer while the gang stays gated, and deletes it
//! once the gang fits.
//!
//! 1. A gang of 8 members of 1 CPU on a cluster with room for 3: Karpenter adds the two nodes
//!    the other 5 need, the gang is placed whole (never some of its members bound at any poll),
//!    its members were told why they waited, and the buffer is gone once it is placed: no node
//!    is added after (no standing capacity).
//!
//! 2. The same gang created with two plain pods: the plain pods are bound at once (they never
//!    wait for muster or for the gang's nodes), and the gang is placed whole on the nodes
//!    Karpenter adds for it.
//!
//! 3. A gang whose members Karpenter has no instance type for (5 CPUs on 4-CPU nodes): the
//!    buffer stands while the gang waits, nothing bound; past `--capacity-buffer-timeout` it
//!    is deleted and the members are told the nodes did not come; no node was added.
//!
//! 4. muster killed while that buffer stands, the gang deleted meanwhile: muster started again
//!    lists the buffers it labelled and deletes the one no gang asks for (no standing
//!    capacity left behind by an earlier run or a deposed leader).
//!
//! 5. The same gang of 8 with a NodePool whose CPU limit leaves room for one node: the 5 CPUs its
//!    members short of room need are beyond every pool's limit, so muster asks for nothing, no
//!    node is added, nothing is bound, and the members' message names the pool and its limit.
//!
//! 6. The gang of 8 on room for 3 with muster killed once its buffer stands: Karpenter adds the
//!    two nodes while muster is down, and no member is bound at any poll while it stays down
//!    (the room is there, but the members stay gated: muster down lets no gang bind partly);
//!    once muster is back the gang is placed whole (never partly bound at any poll) on those
//!    nodes, its buffer deleted, and no third node added.
//!
//! 7. A gang whose members select a label no NodePool gives its nodes, on room for 3 of 8 on a
//!    node that has it: muster asks for nothing (no node Karpenter adds would serve it), no node
//!    is added, nothing is bound, and the message names the pool and the label.
//!
//! Without muster (`tests/control-run`) kube-scheduler binds the 3 members that fit at once and
//! Karpenter adds nodes for the others as they are marked unschedulable, so the gang is partly
//! bound for seconds: the tests fail on their whole-or-none (1) and nothing-bound (2)
//! cluster-truth checks.

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use muster_harness::karpenter::{self, KarpenterPool, NODEPOOL_LABEL};
use muster_harness::{
    holds_for, k8s, names, wait_for, Cluster, ClusterOptions, KeyScheme, NodeShape, PodBuilder,
    Progress, Timer, CLUSTER_TRUTH, PLACE, REASON, WINDOW,
};

use crate::faults::WholeOrNone;

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");

/// A cluster with Karpenter (4-CPU nodes, 3 members of 1 CPU each after its overhead) and
/// muster asking it for gangs' room.
async fn autoscaled(pool: KarpenterPool) -> Result<Cluster> {
    autoscaled_with(pool, &[]).await
}

async fn autoscaled_with(pool: KarpenterPool, args: &[&str]) -> Result<Cluster> {
    Cluster::start_with(
        ClusterOptions::new(MUSTER)
            .with_karpenter(pool)
            .muster_args(["--capacity-buffers"])
            .muster_args(args.iter().copied()),
    )
    .await
}

/// A gang of 3 members of 5 CPUs (no KWOK instance type of the pool holds one) on room for 1.
async fn unfillable_gang(c: &Cluster, ns: &str) -> Result<Vec<String>> {
    c.namespace(ns).await?;
    c.add_node("node-1", NodeShape::cpu("5")).await?;
    let members = names("g", 3);
    for m in &members {
        c.create(
            PodBuilder::new(ns, m)
                .cpu("5")
                .gang(KeyScheme::Muster, "g", 3),
        )
        .await?;
    }
    c.wait_gang(ns, "g", &members, "the autoscaler asked", REASON, |g| {
        g.waiting_reason
            .as_deref()
            .is_some_and(|r| r.contains("cluster autoscaler is asked for"))
    })
    .await?;
    buffers_are(c, ns, 1).await?;
    Ok(members)
}

async fn buffers_are(c: &Cluster, ns: &str, want: usize) -> Result<()> {
    wait_for(
        &format!("{want} CapacityBuffers in {ns}"),
        REASON,
        || async {
            let left = karpenter::capacity_buffer_names(&c.client(), ns).await?;
            Ok(if left.len() == want {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("buffers: {left:?}"))
            })
        },
    )
    .await
}

/// On every poll of a window: no member of `ns` bound (cluster truth), no NodeClaim and no
/// CapacityBuffer: a gang the autoscaler cannot serve gets nothing.
async fn nothing_added_nor_bound(c: &Cluster, ns: &str) -> Result<()> {
    holds_for(
        "no node added, no buffer and no member bound",
        WINDOW.max(Duration::from_secs(10)),
        || async {
            let claims = karpenter::node_claim_names(&c.client()).await?;
            let buffers = karpenter::capacity_buffer_names(&c.client(), ns).await?;
            let bound = c.bound_pods(ns).await?;
            Ok(if !bound.is_empty() {
                Err(format!("{CLUSTER_TRUTH} members bound: {bound:?}"))
            } else if !claims.is_empty() || !buffers.is_empty() {
                Err(format!(
                    "NodeClaims {claims:?}, CapacityBuffers {buffers:?}"
                ))
            } else {
                Ok(())
            })
        },
    )
    .await
}

/// The nodes Karpenter launched that are Ready and carry no NoSchedule or NoExecute taint
/// (Karpenter's and the node lifecycle's startup taints are gone): room a pod can be bound to.
async fn karpenter_nodes_ready(c: &Cluster) -> Result<Vec<String>> {
    let nodes: Api<Node> = Api::all(c.client());
    let mut ready: Vec<String> = nodes
        .list(&ListParams::default().labels(NODEPOOL_LABEL))
        .await?
        .items
        .into_iter()
        .filter(|n| {
            let status_ready = n
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            let untainted = n
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_none_or(|ts| {
                    ts.iter()
                        .all(|t| t.effect != "NoSchedule" && t.effect != "NoExecute")
                });
            status_ready && untainted
        })
        .filter_map(|n| n.metadata.name)
        .collect();
    ready.sort();
    Ok(ready)
}

fn member(ns: &str, name: &str, group: &str, quorum: u32) -> PodBuilder {
    PodBuilder::new(ns, name)
        .cpu("1")
        .gang(KeyScheme::Muster, group, quorum)
}

#[tokio::test]
async fn a_gang_of_8_on_room_for_3_gets_its_nodes_from_karpenter_and_is_placed_whole() -> Result<()>
{
    let _t = Timer(
        "a_gang_of_8_on_room_for_3_gets_its_nodes_from_karpenter_and_is_placed_whole",
        Instant::now(),
    );
    let c = autoscaled(KarpenterPool::default()).await?;
    let ns = "autoscaled";
    let r = async {
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("3")).await?; // room for 3 of the 8
        let members = names("g", 8);
        let t0 = Instant::now();
        for m in &members {
            c.create(member(ns, m, "g", 8)).await?;
        }
        // Never some of the gang bound, at any poll, until it is whole.
        WholeOrNone::new(ns, &members, 8)
            .wait_whole(&c, PLACE * 2)
            .await?;
        let claims = karpenter::node_claim_names(&c.client()).await?;
        eprintln!(
            "gang of 8 placed whole {:.1}s after its creation; Karpenter's NodeClaims: {claims:?}",
            t0.elapsed().as_secs_f64()
        );
        // 5 members short of room, 3 to a 4-CPU node: the two nodes they need, no more.
        ensure!(
            claims.len() == 2,
            "Karpenter launched {} nodes for 5 members that need 2: {claims:?}",
            claims.len()
        );
        // Its members were told what they waited for.
        let events = k8s::events_in(&c.client(), ns).await?;
        ensure!(
            events.iter().any(|(pod, e)| members.contains(pod)
                && e.reason == "GangWaiting"
                && e.message.contains("cluster autoscaler is asked for")),
            "no GangWaiting Event naming the autoscaler: {events:?}"
        );
        // The buffer goes once the gang fits: no standing capacity.
        buffers_are(&c, ns, 0).await?;
        holds_for(
            "no node added after the gang was placed",
            WINDOW.max(Duration::from_secs(10)),
            || async {
                let now = karpenter::node_claim_names(&c.client()).await?;
                Ok(if now == claims {
                    Ok(())
                } else {
                    Err(format!("NodeClaims {now:?}, were {claims:?}"))
                })
            },
        )
        .await?;
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

#[tokio::test]
async fn a_gang_beyond_the_node_pools_cpu_limit_gets_no_node_and_is_told_the_limit() -> Result<()> {
    let _t = Timer(
        "a_gang_beyond_the_node_pools_cpu_limit_gets_no_node_and_is_told_the_limit",
        Instant::now(),
    );
    let c = autoscaled(KarpenterPool {
        cpu_limit: Some(4),
        ..KarpenterPool::default()
    })
    .await?;
    let ns = "beyond-limit";
    let r = async {
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("3")).await?; // room for 3 of the 8
        let members = names("g", 8);
        for m in &members {
            c.create(member(ns, m, "g", 8)).await?;
        }
        // Nothing bound (cluster truth first on every poll) while muster says which limit
        // stops the gang.
        c.wait_gang(
            ns,
            "g",
            &members,
            "the NodePool's limit named",
            REASON,
            |g| {
                g.waiting_reason.as_deref().is_some_and(|r| {
                    r.contains("more than any NodePool may add") && r.contains("limit cpu 4")
                })
            },
        )
        .await?;
        nothing_added_nor_bound(&c, ns).await?;
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

#[tokio::test]
async fn a_buffer_karpenter_cannot_fill_is_given_up_after_the_bound_and_the_gang_told() -> Result<()>
{
    let _t = Timer(
        "a_buffer_karpenter_cannot_fill_is_given_up_after_the_bound_and_the_gang_told",
        Instant::now(),
    );
    let c = autoscaled_with(KarpenterPool::default(), &["--capacity-buffer-timeout=10s"]).await?;
    let ns = "no-instance-type";
    let r = async {
        let members = unfillable_gang(&c, ns).await?;
        c.wait_gang(ns, "g", &members, "the ask given up", REASON, |g| {
            g.waiting_reason
                .as_deref()
                .is_some_and(|r| r.contains("did not come within 10s"))
        })
        .await?;
        buffers_are(&c, ns, 0).await?;
        let claims = karpenter::node_claim_names(&c.client()).await?;
        let bound = c.bound_pods(ns).await?;
        ensure!(bound.is_empty(), "{CLUSTER_TRUTH} members bound: {bound:?}");
        ensure!(
            claims.is_empty(),
            "Karpenter launched {claims:?} for members no node holds"
        );
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

#[tokio::test]
async fn a_buffer_left_by_a_killed_muster_is_deleted_once_muster_is_back() -> Result<()> {
    let _t = Timer(
        "a_buffer_left_by_a_killed_muster_is_deleted_once_muster_is_back",
        Instant::now(),
    );
    let mut c = autoscaled(KarpenterPool::default()).await?;
    let ns = "left-behind";
    let r = async {
        let members = unfillable_gang(&c, ns).await?;
        c.muster.kill_hard();
        c.delete_pods(ns, &members).await?;
        c.muster.restart().await?;
        buffers_are(&c, ns, 0).await?;
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

#[tokio::test]
async fn plain_pods_beside_a_gang_waiting_for_nodes_are_bound_at_once() -> Result<()> {
    let _t = Timer(
        "plain_pods_beside_a_gang_waiting_for_nodes_are_bound_at_once",
        Instant::now(),
    );
    let c = autoscaled(KarpenterPool::default()).await?;
    let ns = "with-plain-pods";
    let r = async {
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("3")).await?;
        let members = names("g", 8);
        let plain = names("plain", 2);
        for m in &members {
            c.create(member(ns, m, "g", 8)).await?;
        }
        for p in &plain {
            c.create(PodBuilder::new(ns, p).cpu("1")).await?;
        }
        let t0 = Instant::now();
        // The gang whole or none at every poll from its creation on.
        let gang = WholeOrNone::new(ns, &members, 8);
        wait_for("the plain pods bound", REASON, || async {
            if let Err(e) = gang.check(&c).await? {
                bail!("{e}");
            }
            let bound = c.bound_pods(ns).await?;
            Ok(if plain.iter().all(|p| bound.contains_key(p)) {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("bound: {bound:?}"))
            })
        })
        .await?;
        eprintln!(
            "plain pods bound {:.1}s after the gang's creation",
            t0.elapsed().as_secs_f64()
        );
        gang.wait_whole(&c, PLACE * 2).await?;
        buffers_are(&c, ns, 0).await?;
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

#[tokio::test]
async fn with_muster_down_while_karpenter_adds_the_nodes_the_gang_is_never_partly_bound(
) -> Result<()> {
    let _t = Timer(
        "with_muster_down_while_karpenter_adds_the_nodes_the_gang_is_never_partly_bound",
        Instant::now(),
    );
    let mut c = autoscaled(KarpenterPool::default()).await?;
    let ns = "muster-down";
    let r = async {
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("3")).await?; // room for 3 of the 8
        let members = names("g", 8);
        for m in &members {
            c.create(member(ns, m, "g", 8)).await?;
        }
        // Nothing bound (cluster truth first on every poll) until muster has asked for the
        // gang's room.
        c.wait_gang(ns, "g", &members, "the autoscaler asked", REASON, |g| {
            g.waiting_reason
                .as_deref()
                .is_some_and(|r| r.contains("cluster autoscaler is asked for"))
        })
        .await?;
        buffers_are(&c, ns, 1).await?;

        c.muster.kill_hard();
        let down = Instant::now();
        // While muster is down, no member bound at any poll: first until Karpenter's two nodes
        // are up and free of startup taints (the room the gang lacked is there), then for a
        // window after it, in which kube-scheduler alone would have bound them.
        let none_bound = |what: &'static str| {
            let c = &c;
            let members = &members;
            async move {
                let bound = c.bound_pods(ns).await?;
                let on: Vec<String> = members
                    .iter()
                    .filter_map(|m| bound.get(m).map(|n| format!("{m} → {n}")))
                    .collect();
                Ok::<_, anyhow::Error>(if on.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "{CLUSTER_TRUTH} {what}, muster down: {} of 8 members bound: {}",
                        on.len(),
                        on.join(", ")
                    ))
                })
            }
        };
        let added = wait_for(
            "Karpenter's two nodes ready while muster is down",
            PLACE,
            || async {
                if let Err(e) = none_bound("waiting for the nodes").await? {
                    bail!("{e}");
                }
                let ready = karpenter_nodes_ready(&c).await?;
                Ok(if ready.len() >= 2 {
                    Progress::Done(ready)
                } else {
                    Progress::NotYet(format!("Karpenter's nodes ready: {ready:?}"))
                })
            },
        )
        .await?;
        eprintln!(
            "Karpenter's nodes {added:?} ready {:.1}s after muster was killed",
            down.elapsed().as_secs_f64()
        );
        holds_for(
            "no member bound while muster is down and the nodes are there",
            WINDOW.max(Duration::from_secs(5)),
            || none_bound("the nodes ready"),
        )
        .await?;

        c.muster.restart().await?;
        let back = Instant::now();
        // Once muster is back: the gang whole, never partly bound at any poll.
        WholeOrNone::new(ns, &members, 8)
            .wait_whole(&c, PLACE)
            .await?;
        eprintln!(
            "gang placed whole {:.1}s after muster was started again",
            back.elapsed().as_secs_f64()
        );
        // On the nodes Karpenter added meanwhile: node-1 holds 3, so at least 5 are there.
        let bound = c.bound_pods(ns).await?;
        let on_added = members
            .iter()
            .filter(|m| bound.get(*m).is_some_and(|n| added.contains(n)))
            .count();
        ensure!(
            on_added >= 5
                && members.iter().all(|m| bound
                    .get(m)
                    .is_some_and(|n| n == "node-1" || added.contains(n))),
            "{CLUSTER_TRUTH} the gang is not on node-1 and Karpenter's nodes {added:?} \
             ({on_added} members on these): {bound:?}"
        );
        buffers_are(&c, ns, 0).await?;
        let claims = karpenter::node_claim_names(&c.client()).await?;
        ensure!(
            claims.len() == 2,
            "Karpenter launched {} nodes for 5 members that need 2: {claims:?}",
            claims.len()
        );
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

/// Case 7: a gang whose members select a label no NodePool gives its nodes
/// (`example.com/accel=tpu`; the pool's requirements name only instance type and capacity
/// type), on a node that has it with room for 3 of the 8: no node Karpenter could add would
/// serve it, so muster asks for nothing, no node is added, nothing is bound on any poll of a
/// window, and the members' message names the pool and the label it cannot give.
#[tokio::test]
async fn a_gang_whose_node_selector_no_node_pool_gives_gets_no_node_and_is_told_why() -> Result<()>
{
    let _t = Timer(
        "a_gang_whose_node_selector_no_node_pool_gives_gets_no_node_and_is_told_why",
        Instant::now(),
    );
    let c = autoscaled(KarpenterPool::default()).await?;
    let ns = "no-pool-admits";
    let r = async {
        c.namespace(ns).await?;
        c.add_node(
            "node-1",
            NodeShape::cpu("3").label("example.com/accel", "tpu"),
        )
        .await?; // room for 3 of the 8
        let members = names("g", 8);
        for m in &members {
            c.create(member(ns, m, "g", 8).node_selector("example.com/accel", "tpu"))
                .await?;
        }
        c.wait_gang(
            ns,
            "g",
            &members,
            "the NodePool's missing label named",
            REASON,
            |g| {
                g.waiting_reason.as_deref().is_some_and(|r| {
                    r.contains("no NodePool may add a node they could use")
                        && r.contains("nodeSelector example.com/accel=tpu")
                })
            },
        )
        .await?;
        nothing_added_nor_bound(&c, ns).await?;
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}
