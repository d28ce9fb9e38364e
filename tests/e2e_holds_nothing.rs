//! End-to-end, issue 10: a gang that cannot run holds nothing. On the real control plane with
//! the stock kube-scheduler and muster as its extender (fake nodes, no kubelets), with
//! Kueue-style keys (`kueue.x-k8s.io/pod-group-name` label + `pod-group-total-count`):
//!
//! 1. members that require `pool In [a]`, too few pool-a nodes;
//! 2. members that need distinct nodes by anti-affinity on `kubernetes.io/hostname`, too few
//!    nodes;
//! 3. a member that never comes;
//! 4. members spread over zones with `whenUnsatisfiable: DoNotSchedule`, one zone without room.
//!
//! In each, the impossible gang binds nothing, muster says exactly why, and a plain pod that
//! needs the room the gang would have held is scheduled within a few seconds (the creation
//! window plus one scheduling cycle in case 3); given room, the same gang is placed whole.
//! Without muster (`tests/control-run`) kube-scheduler binds the members that fit, so every test
//! here fails there.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use muster_harness::k8s::GangKey;
use muster_harness::{wait_for, Cluster, NodeShape, PodBuilder, Progress, Timer};

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");
/// Deadline for something that should happen.
const PLACE: Duration = Duration::from_secs(60);
/// Deadline for a wait reason to show up in `/gangs` and Events.
const REASON: Duration = Duration::from_secs(30);
/// A plain pod next to a gang that holds nothing is scheduled within this.
const PROMPTLY: Duration = Duration::from_secs(5);
/// muster's default `--creation-window`.
const CREATION_WINDOW: Duration = Duration::from_secs(5);
/// One scheduling cycle after muster releases room: its once-a-second release tick, the
/// `muster.dev/retry` annotation that re-queues the refused pod, and the pod's cycle. Without
/// the annotation kube-scheduler would wait for an unrelated event (it took 11-12 s here, when
/// the seated member's held bind call timed out) or its 5-minute flush.
const ONE_CYCLE: Duration = Duration::from_secs(3);
/// Members of one gang must be bound within this of each other.
const TOGETHER: Duration = Duration::from_secs(3);

fn spread(bound: &BTreeMap<String, (String, Instant)>) -> Duration {
    let times: Vec<Instant> = bound.values().map(|(_, t)| *t).collect();
    match (times.iter().min(), times.iter().max()) {
        (Some(a), Some(b)) => b.duration_since(*a),
        _ => Duration::ZERO,
    }
}

/// Creates `pod` and returns how long it took to be bound (deadline `within`).
async fn bound_within(
    c: &Cluster,
    ns: &str,
    pod: PodBuilder,
    within: Duration,
) -> Result<Duration> {
    let name = pod.clone().build().metadata.name.unwrap_or_default();
    let t0 = Instant::now();
    c.create(pod).await?;
    let bound = c
        .wait_bound(ns, std::slice::from_ref(&name), within)
        .await?;
    let took = bound[&name].1.duration_since(t0);
    eprintln!("{ns}/{name} bound to {} after {took:?}", bound[&name].0);
    Ok(took)
}

/// Issue 10, case 1 (NodeAffinity): 4 one-CPU nodes, two in pool a; a gang of 3 × 1 CPU that
/// requires pool a holds nothing, so a plain pool-a pod is bound at once; with a third pool-a
/// node (and the plain pod gone) the gang is placed whole.
#[tokio::test]
async fn required_node_affinity_gang_holds_nothing_then_places_whole_with_a_third_pool_node(
) -> Result<()> {
    let _t = Timer("required_node_affinity_gang_holds_nothing", Instant::now());
    let c = Cluster::start(MUSTER).await?;
    let ns = "affinity";
    let r = async {
        c.namespace(ns).await?;
        for (name, pool) in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")] {
            c.add_node(name, NodeShape::cpu("1").label("pool", pool))
                .await?;
        }
        let gang = c
            .create_gang(ns, "trainer", 3, 3, GangKey::Kueue, |p| {
                p.cpu("1").require_node_label_in("pool", &["a"])
            })
            .await?;
        let reason = format!(
            "gang {ns}/trainer: 2 of 3 members placed; no node for the next: 0/4 nodes are \
             available: 2 node(s) didn't have enough room, 2 node(s) didn't match Pod's node \
             affinity/selector."
        );
        c.wait_gang_waiting_whole(ns, "trainer", &gang, &reason, REASON)
            .await?;
        let plain = PodBuilder::new(ns, "plain")
            .cpu("1")
            .node_selector("pool", "a");
        bound_within(&c, ns, plain, PROMPTLY).await?;
        ensure!(c.count_bound(ns, &gang).await? == 0, "a member was bound");

        c.delete_pod(ns, "plain").await?;
        c.add_node("a3", NodeShape::cpu("1").label("pool", "a"))
            .await?;
        let bound = c.wait_bound(ns, &gang, PLACE).await?;
        ensure!(spread(&bound) <= TOGETHER, "not bound together: {bound:?}");
        let nodes: BTreeSet<&str> = bound.values().map(|(n, _)| n.as_str()).collect();
        ensure!(
            nodes == BTreeSet::from(["a1", "a2", "a3"]),
            "placed outside pool a: {bound:?}"
        );
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

/// Issue 10, case 2 (InterPodAffinity among the members): two 4-CPU nodes; 3 workers of 1 CPU
/// that need distinct nodes hold nothing, so a plain pod that needs a whole node is bound at
/// once; with a third node (and the plain pod gone) the gang is placed whole, one per node.
#[tokio::test]
async fn members_that_need_distinct_nodes_hold_nothing_then_place_whole_on_a_third_node(
) -> Result<()> {
    let _t = Timer(
        "members_that_need_distinct_nodes_hold_nothing",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let ns = "anti";
    let r = async {
        c.namespace(ns).await?;
        for name in ["n1", "n2"] {
            c.add_node(name, NodeShape::cpu("4")).await?;
        }
        let gang = c
            .create_gang(ns, "workers", 3, 3, GangKey::Kueue, |p| {
                p.cpu("1")
                    .label("job", "workers")
                    .one_per_node_with("job", "workers")
            })
            .await?;
        let reason = format!(
            "gang {ns}/workers: 3 members need distinct nodes by pod anti-affinity; 2 nodes match"
        );
        c.wait_gang_waiting_whole(ns, "workers", &gang, &reason, REASON)
            .await?;
        bound_within(&c, ns, PodBuilder::new(ns, "whole").cpu("4"), PROMPTLY).await?;
        ensure!(c.count_bound(ns, &gang).await? == 0, "a member was bound");

        c.delete_pod(ns, "whole").await?;
        c.add_node("n3", NodeShape::cpu("4")).await?;
        let bound = c.wait_bound(ns, &gang, PLACE).await?;
        ensure!(spread(&bound) <= TOGETHER, "not bound together: {bound:?}");
        let nodes: BTreeSet<&str> = bound.values().map(|(n, _)| n.as_str()).collect();
        ensure!(nodes.len() == 3, "two workers share a node: {bound:?}");
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

/// Issue 10, case 3 (a member that never comes): two 1-CPU nodes, a gang of 2 of which one
/// member exists. Within the creation window muster holds both nodes (the member's seat and room
/// for the missing one); after it only the member's own seat, so a plain 1-CPU pod, refused
/// meanwhile, is asked to retry and bound within the window plus one cycle. The missing member created (the plain
/// pod gone), the pair is placed whole.
#[tokio::test]
async fn a_member_that_never_comes_holds_room_only_for_the_creation_window() -> Result<()> {
    let _t = Timer("a_member_that_never_comes", Instant::now());
    let c = Cluster::start(MUSTER).await?;
    let ns = "late";
    let r = async {
        c.namespace(ns).await?;
        for name in ["n1", "n2"] {
            c.add_node(name, NodeShape::cpu("1")).await?;
        }
        let member = |i: u32| {
            PodBuilder::new(ns, &format!("pair-{i}"))
                .cpu("1")
                .gang(GangKey::Kueue, "pair", 2)
        };
        c.create(member(0)).await?;
        // muster seats pair-0 and holds room for pair-1, which does not exist.
        wait_for(
            "pair-0 seated with room held for pair-1",
            REASON,
            || async {
                let view = c.muster.gang(ns, "pair").await?;
                Ok(match view {
                    Some(g) if g.count("seated") == 1 && g.count("held") == 1 => Progress::Done(()),
                    other => Progress::NotYet(format!("{:?}", other.map(|g| g.describe()))),
                })
            },
        )
        .await?;
        let took = bound_within(
            &c,
            ns,
            PodBuilder::new(ns, "plain").cpu("1"),
            CREATION_WINDOW + ONE_CYCLE,
        )
        .await?;
        eprintln!("plain pod bound {took:?} after pair-0 was seated");
        let released = format!(
            "gang {ns}/pair: waiting for members: 1 of 2 exist; room held for the missing 1 \
             released, as no member appeared for 5s"
        );
        c.wait_event_matching(ns, &["pair-0".into()], &released, REASON, |e| {
            e.reason == "GangWaiting" && e.message == released
        })
        .await?;
        ensure!(
            c.count_bound(ns, &["pair-0".into()]).await? == 0,
            "pair-0 was bound without its pair"
        );

        c.delete_pod(ns, "plain").await?;
        c.create(member(1)).await?;
        let gang = vec!["pair-0".to_string(), "pair-1".to_string()];
        let bound = c.wait_bound(ns, &gang, PLACE).await?;
        ensure!(spread(&bound) <= TOGETHER, "not bound together: {bound:?}");
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

/// Zone label of the fake nodes (the well-known key).
const ZONE: &str = "topology.kubernetes.io/zone";

/// PodTopologySpread (`whenUnsatisfiable: DoNotSchedule`, maxSkew 1 over zones): zones a and b
/// have a 2-CPU node each, zone c only a node too small for a member. kube-scheduler counts zone
/// c as a domain all the same (a domain is any eligible node's label value, room or not), so
/// with one member in a and one in b the third fits nowhere: a and b would reach skew 2 against
/// c's 0. The gang of 3 × 1 CPU holds nothing, so a plain pod that needs a whole 2-CPU node is
/// bound at once; with a node with room in zone c (and the plain pod gone) the gang is placed
/// whole, one member per zone. kube-scheduler alone binds two members and leaves the third
/// pending.
#[tokio::test]
async fn members_spread_over_zones_hold_nothing_then_place_whole_with_room_in_the_third_zone(
) -> Result<()> {
    let _t = Timer("members_spread_over_zones_hold_nothing", Instant::now());
    let c = Cluster::start(MUSTER).await?;
    let ns = "spread";
    let r = async {
        c.namespace(ns).await?;
        for (name, cpu, zone) in [("a1", "2", "a"), ("b1", "2", "b"), ("c1", "500m", "c")] {
            c.add_node(name, NodeShape::cpu(cpu).label(ZONE, zone))
                .await?;
        }
        let gang = c
            .create_gang(ns, "trainer", 3, 3, GangKey::Kueue, |p| {
                p.cpu("1")
                    .label("job", "trainer")
                    .spread_over(ZONE, 1, "job", "trainer")
            })
            .await?;
        let reason = format!(
            "gang {ns}/trainer: 2 of 3 members placed; no node for the next: 0/3 nodes are \
             available: 1 node(s) didn't have enough room, 2 node(s) didn't match pod topology \
             spread constraints."
        );
        c.wait_gang_waiting_whole(ns, "trainer", &gang, &reason, REASON)
            .await?;
        bound_within(&c, ns, PodBuilder::new(ns, "wide").cpu("2"), PROMPTLY).await?;
        ensure!(c.count_bound(ns, &gang).await? == 0, "a member was bound");

        c.delete_pod(ns, "wide").await?;
        c.add_node("c2", NodeShape::cpu("1").label(ZONE, "c"))
            .await?;
        let bound = c.wait_bound(ns, &gang, PLACE).await?;
        ensure!(spread(&bound) <= TOGETHER, "not bound together: {bound:?}");
        let nodes: BTreeSet<&str> = bound.values().map(|(n, _)| n.as_str()).collect();
        ensure!(
            nodes == BTreeSet::from(["a1", "b1", "c2"]),
            "not one member per zone: {bound:?}"
        );
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

/// Case 3 with a pod that kube-scheduler's own filters also refuse: a plain pod pinned by
/// `nodeSelector` (NodeAffinity) to the node where muster holds room for the member not created
/// yet is refused there by muster, and everywhere else by NodeAffinity. When the creation
/// window closes, muster's `muster.dev/retry` annotation still re-queues it: kube-scheduler
/// counts the pseudo-plugin `Extender` among the pod's rejectors whenever an extender filtered
/// a node out, and every event re-queues for that one, the pod's own update included.
#[tokio::test]
async fn a_pod_pinned_to_held_room_is_retried_when_the_creation_window_closes() -> Result<()> {
    let _t = Timer("a_pod_pinned_to_held_room", Instant::now());
    let c = Cluster::start(MUSTER).await?;
    let ns = "pinned";
    let r = async {
        c.namespace(ns).await?;
        for name in ["n1", "n2"] {
            c.add_node(name, NodeShape::cpu("1")).await?;
        }
        c.create(
            PodBuilder::new(ns, "pair-0")
                .cpu("1")
                .gang(GangKey::Kueue, "pair", 2),
        )
        .await?;
        let held = wait_for(
            "pair-0 seated with room held for pair-1",
            REASON,
            || async {
                let view = c.muster.gang(ns, "pair").await?;
                let node = view.as_ref().and_then(|g| {
                    let held = g.members.iter().find(|m| m.state == "held")?;
                    (g.count("seated") == 1).then(|| held.node.clone())?
                });
                Ok(match node {
                    Some(n) => Progress::Done(n),
                    None => Progress::NotYet(format!("{:?}", view.map(|g| g.describe()))),
                })
            },
        )
        .await?;
        let plain = PodBuilder::new(ns, "plain")
            .cpu("1")
            .node_selector("kubernetes.io/hostname", &held);
        bound_within(&c, ns, plain, CREATION_WINDOW + ONE_CYCLE).await?;
        // Proof that the retry came from muster (its patch is made before kube-scheduler can
        // act on it, but read it with a deadline all the same).
        wait_for("plain to carry muster.dev/retry", REASON, || async {
            let pods = c.pods(ns).await?;
            let annotated = pods.iter().any(|p| {
                p.metadata.name.as_deref() == Some("plain")
                    && p.metadata
                        .annotations
                        .as_ref()
                        .is_some_and(|a| a.contains_key("muster.dev/retry"))
            });
            Ok(if annotated {
                Progress::Done(())
            } else {
                Progress::NotYet("no muster.dev/retry annotation".into())
            })
        })
        .await?;
        ensure!(
            c.count_bound(ns, &["pair-0".into()]).await? == 0,
            "pair-0 was bound without its pair"
        );
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

/// muster's `muster_cache_nodes` gauge, from `/metrics`.
async fn cached_nodes(c: &Cluster) -> Result<Option<f64>> {
    let (_, body) = c.muster.get("/metrics").await?;
    Ok(body
        .lines()
        .find_map(|l| l.strip_prefix("muster_cache_nodes "))
        .and_then(|v| v.trim().parse().ok()))
}

/// The last look before binding (NodeUnschedulable): three 1-CPU nodes, a pair of 1-CPU
/// members. pair-0 is seated on one node with room held for pair-1, which does not exist yet;
/// that node is then cordoned, and pair-1 is created within the creation window. At quorum
/// muster checks every seat's node under every rule the planner applies, not only room: it
/// binds nothing on the cordoned node, says why, and the pair is placed whole on the two other
/// nodes, bound together. Without muster kube-scheduler binds pair-0 at once, before the
/// cordon, and no seat is ever seen, so the test fails there.
#[tokio::test]
async fn a_seat_on_a_node_cordoned_while_the_gang_gathers_is_not_bound_and_the_pair_is_placed_elsewhere(
) -> Result<()> {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Api, Patch, PatchParams};

    let _t = Timer(
        "a_seat_on_a_node_cordoned_while_the_gang_gathers",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let ns = "cordon";
    let r = async {
        c.namespace(ns).await?;
        for name in ["n1", "n2", "n3"] {
            c.add_node(name, NodeShape::cpu("1")).await?;
        }
        let member = |i: u32| {
            PodBuilder::new(ns, &format!("pair-{i}"))
                .cpu("1")
                .gang(GangKey::Kueue, "pair", 2)
        };
        c.create(member(0)).await?;
        let seated = wait_for(
            "pair-0 seated with room held for pair-1",
            REASON,
            || async {
                let view = c.muster.gang(ns, "pair").await?;
                let node = view.as_ref().and_then(|g| {
                    let seated = g.members.iter().find(|m| m.state == "seated")?;
                    (g.count("held") == 1).then(|| seated.node.clone())?
                });
                Ok(match node {
                    Some(n) => Progress::Done(n),
                    None => Progress::NotYet(format!("{:?}", view.map(|g| g.describe()))),
                })
            },
        )
        .await?;
        eprintln!("pair-0 seated on {seated}; cordoning it");
        let nodes: Api<Node> = Api::all(c.client());
        let cordon = serde_json::json!({ "spec": { "unschedulable": true } });
        nodes
            .patch(&seated, &PatchParams::default(), &Patch::Merge(&cordon))
            .await?;
        // muster's node watch delivers events in order: once it has a node added after the
        // cordon, it has the cordon too (too small for a member, so it changes no placement).
        c.add_node("probe", NodeShape::cpu("100m")).await?;
        wait_for("muster's cache to have the probe node", REASON, || async {
            Ok(match cached_nodes(&c).await? {
                Some(n) if n >= 4.0 => Progress::Done(()),
                other => Progress::NotYet(format!("muster_cache_nodes = {other:?}")),
            })
        })
        .await?;

        c.create(member(1)).await?;
        let gang = vec!["pair-0".to_string(), "pair-1".to_string()];
        let bound = c.wait_bound(ns, &gang, PLACE).await?;
        ensure!(
            bound.values().all(|(n, _)| *n != seated),
            "a member was bound on the cordoned node {seated}: {bound:?}"
        );
        ensure!(spread(&bound) <= TOGETHER, "not bound together: {bound:?}");
        let nodes: BTreeSet<&str> = bound.values().map(|(n, _)| n.as_str()).collect();
        ensure!(nodes.len() == 2, "the pair shares a node: {bound:?}");
        let why = format!(
            "node {seated} no longer admits member {ns}/pair-0 seated there (NodeUnschedulable"
        );
        c.wait_event_containing(ns, &gang, &why, REASON).await?;
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}
