//! End-to-end: a gang that cannot run holds nothing (holds-nothing). On the real control plane with
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

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use muster_harness::k8s::KeyScheme;
use muster_harness::timing::{self, CREATION_WINDOW, PROMPTLY};
use muster_harness::{
    ensure_truth, spread, wait_for, Cluster, ClusterOptions, NodeShape, PodBuilder, Progress,
    Timer, PLACE, REASON, TOGETHER,
};

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");
/// One scheduling cycle after muster releases room ([`timing::RETRIED_AFTER_RELEASE`]). Without
/// the `muster.dev/retry` annotation kube-scheduler would wait for an unrelated event (it took
/// 11-12 s here, when the seated member's held bind call timed out) or its 5-minute flush.
const ONE_CYCLE: Duration = timing::RETRIED_AFTER_RELEASE;

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

/// Case 1 (NodeAffinity): 4 one-CPU nodes, two in pool a; a gang of 3 × 1 CPU that
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
            .create_gang(ns, "trainer", 3, 3, KeyScheme::Kueue, |p| {
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
        ensure_truth!(c.count_bound(ns, &gang).await? == 0, "a member was bound");

        c.delete_pod(ns, "plain").await?;
        c.add_node("a3", NodeShape::cpu("1").label("pool", "a"))
            .await?;
        let bound = c.wait_bound(ns, &gang, PLACE).await?;
        ensure_truth!(spread(&bound) <= TOGETHER, "not bound together: {bound:?}");
        let nodes: BTreeSet<&str> = bound.values().map(|(n, _)| n.as_str()).collect();
        ensure_truth!(
            nodes == BTreeSet::from(["a1", "a2", "a3"]),
            "placed outside pool a: {bound:?}"
        );
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

/// Case 2 (InterPodAffinity among the members): two 4-CPU nodes; 3 workers of 1 CPU
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
            .create_gang(ns, "workers", 3, 3, KeyScheme::Kueue, |p| {
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
        ensure_truth!(c.count_bound(ns, &gang).await? == 0, "a member was bound");

        c.delete_pod(ns, "whole").await?;
        c.add_node("n3", NodeShape::cpu("4")).await?;
        let bound = c.wait_bound(ns, &gang, PLACE).await?;
        ensure_truth!(spread(&bound) <= TOGETHER, "not bound together: {bound:?}");
        let nodes: BTreeSet<&str> = bound.values().map(|(n, _)| n.as_str()).collect();
        ensure_truth!(nodes.len() == 3, "two workers share a node: {bound:?}");
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

/// Case 3 (a member that never comes): two 1-CPU nodes, a gang of 2 of which one
/// member exists. Within the creation window muster holds both nodes (the member's seat and room
/// for the missing one); after it only the member's own seat, so a plain 1-CPU pod, refused
/// meanwhile, is asked to retry and bound within the window plus one cycle. The missing member created (the plain
/// pod gone), the pair is placed whole.
///
/// With every pod through muster: room held for a member not created yet is that mode's.
#[tokio::test]
async fn a_member_that_never_comes_holds_room_only_for_the_creation_window() -> Result<()> {
    let _t = Timer("a_member_that_never_comes", Instant::now());
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).every_pod()).await?;
    let ns = "late";
    let r = async {
        c.namespace(ns).await?;
        for name in ["n1", "n2"] {
            c.add_node(name, NodeShape::cpu("1")).await?;
        }
        let member = |i: u32| {
            PodBuilder::new(ns, &format!("pair-{i}"))
                .cpu("1")
                .gang(KeyScheme::Kueue, "pair", 2)
        };
        c.create(member(0)).await?;
        // muster seats pair-0 and holds room for pair-1, which does not exist; pair-0 stays
        // unbound (cluster truth, checked first: kube-scheduler alone binds it at once).
        c.wait_gang(
            ns,
            "pair",
            &["pair-0".into()],
            "pair-0 seated with room held for pair-1",
            REASON,
            |g| g.count("seated") == 1 && g.count("held") == 1,
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
        ensure_truth!(
            c.count_bound(ns, &["pair-0".into()]).await? == 0,
            "pair-0 was bound without its pair"
        );

        c.delete_pod(ns, "plain").await?;
        c.create(member(1)).await?;
        let gang = vec!["pair-0".to_string(), "pair-1".to_string()];
        let bound = c.wait_bound(ns, &gang, PLACE).await?;
        ensure_truth!(spread(&bound) <= TOGETHER, "not bound together: {bound:?}");
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
            .create_gang(ns, "trainer", 3, 3, KeyScheme::Kueue, |p| {
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
        ensure_truth!(c.count_bound(ns, &gang).await? == 0, "a member was bound");

        c.delete_pod(ns, "wide").await?;
        c.add_node("c2", NodeShape::cpu("1").label(ZONE, "c"))
            .await?;
        let bound = c.wait_bound(ns, &gang, PLACE).await?;
        ensure_truth!(spread(&bound) <= TOGETHER, "not bound together: {bound:?}");
        let nodes: BTreeSet<&str> = bound.values().map(|(n, _)| n.as_str()).collect();
        ensure_truth!(
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
///
/// With every pod through muster: room held for a member not created yet (within the creation
/// window) is that mode's; the shipped mode holds nothing until every member its quorum needs
/// exists.
#[tokio::test]
async fn a_pod_pinned_to_held_room_is_retried_when_the_creation_window_closes() -> Result<()> {
    let _t = Timer("a_pod_pinned_to_held_room", Instant::now());
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).every_pod()).await?;
    let ns = "pinned";
    let r = async {
        c.namespace(ns).await?;
        for name in ["n1", "n2"] {
            c.add_node(name, NodeShape::cpu("1")).await?;
        }
        c.create(
            PodBuilder::new(ns, "pair-0")
                .cpu("1")
                .gang(KeyScheme::Kueue, "pair", 2),
        )
        .await?;
        // pair-0 stays unbound (cluster truth, checked first: kube-scheduler alone binds it at
        // once) while muster seats it and holds room for pair-1.
        let held_room = |g: &muster_harness::GangView| {
            let held = g.members.iter().find(|m| m.state == "held")?;
            (g.count("seated") == 1).then(|| held.node.clone())?
        };
        let view = c
            .wait_gang(
                ns,
                "pair",
                &["pair-0".into()],
                "pair-0 seated with room held for pair-1",
                REASON,
                |g| held_room(g).is_some(),
            )
            .await?;
        let held = held_room(&view).context("the wait returned without room held")?;
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
        ensure_truth!(
            c.count_bound(ns, &["pair-0".into()]).await? == 0,
            "pair-0 was bound without its pair"
        );
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

/// SchedulingGates (kube-scheduler's PreEnqueue plugin): a gang of 2 × 500m on one 1-CPU node,
/// one member gated (`example.com/quota`, as a quota controller holds it). kube-scheduler does
/// not try the gated member at all, so the gang cannot run and holds nothing: a plain pod that
/// needs the whole node is bound at once. Once the plain pod is gone and the gate removed, the
/// gang is placed whole. kube-scheduler alone binds the open member at once.
#[tokio::test]
async fn a_gang_with_a_gated_member_holds_nothing_then_places_whole_once_the_gate_is_removed(
) -> Result<()> {
    let _t = Timer("a_gang_with_a_gated_member_holds_nothing", Instant::now());
    let c = Cluster::start(MUSTER).await?;
    let ns = "gated";
    let r = async {
        c.namespace(ns).await?;
        c.add_node("n1", NodeShape::cpu("1")).await?;
        let member = |name: &str| {
            PodBuilder::new(ns, name)
                .cpu("500m")
                .gang(KeyScheme::Kueue, "g", 2)
        };
        // The gated member first: muster's pod watch delivers it before the open one, so the
        // open member's filter finds the gang with its gated member. (The other order races: a
        // gang seated while its gated member was "not created yet" keeps its seat until the gang
        // timeout — a holds-nothing gap written down in the closing note.)
        c.create(member("g-gated").scheduling_gate("example.com/quota"))
            .await?;
        c.create(member("g-open")).await?;
        let gang = muster_harness::pod_names(&["g-open", "g-gated"]);
        let reason = format!(
            "gang {ns}/g: 1 of 2 members placed; no node for the next: 0/1 nodes are \
             available: 1 pod(s) waiting for scheduling gates."
        );
        c.wait_gang_waiting_whole(ns, "g", &gang, &reason, REASON)
            .await?;
        bound_within(&c, ns, PodBuilder::new(ns, "plain").cpu("1"), PROMPTLY).await?;
        ensure_truth!(c.count_bound(ns, &gang).await? == 0, "a member was bound");

        c.delete_pod(ns, "plain").await?;
        muster_harness::k8s::remove_scheduling_gates(&c.client(), ns, "g-gated").await?;
        let bound = c.wait_bound(ns, &gang, PLACE).await?;
        ensure_truth!(spread(&bound) <= TOGETHER, "not bound together: {bound:?}");
        c.assert_no_overcommit().await
    }
    .await;
    c.report(&[ns], r).await
}

/// Required *positive* pod affinity (kube-scheduler's InterPodAffinity plugin): members must
/// run on a node that runs a pod labelled `app=db` (`topologyKey: kubernetes.io/hostname`).
/// Only n1 runs one, with room for one 500m member; n2 has room but no db pod. The gang of 2
/// cannot run and holds nothing: a plain pod pinned to n1 that needs all of n1's room left is
/// bound at once. With the plain pod gone and a db pod on a third node, the gang is placed
/// whole on n1 and n3. kube-scheduler alone binds one member to n1 at once.
#[tokio::test]
async fn members_that_need_a_pod_affinity_peer_hold_nothing_then_place_whole_next_to_a_second(
) -> Result<()> {
    let _t = Timer(
        "members_that_need_a_pod_affinity_peer_hold_nothing",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let ns = "peers";
    let r = async {
        c.namespace(ns).await?;
        c.add_node("n1", NodeShape::cpu("1")).await?;
        c.add_node("n2", NodeShape::cpu("2")).await?;
        let db = |name: &str, node: &str| {
            PodBuilder::new(ns, name)
                .cpu("200m")
                .label("app", "db")
                .node_selector("kubernetes.io/hostname", node)
        };
        c.create(db("db-1", "n1")).await?;
        c.wait_bound(ns, &muster_harness::pod_names(&["db-1"]), PLACE)
            .await?;
        let gang = c
            .create_gang(ns, "g", 2, 2, KeyScheme::Kueue, |p| {
                p.cpu("500m")
                    .require_pod_affinity_with("kubernetes.io/hostname", "app", "db")
            })
            .await?;
        // muster's words name the rule as kube-scheduler's plugin does.
        c.wait_gang(
            ns,
            "g",
            &gang,
            "waiting whole, no seats, a reason naming pod affinity",
            REASON,
            |g| {
                g.state == "waiting"
                    && g.seats().is_empty()
                    && g.waiting_reason
                        .as_deref()
                        .is_some_and(|r| r.contains("didn't match pod affinity rules"))
            },
        )
        .await?;
        c.assert_none_bound_for(ns, &gang, muster_harness::WINDOW)
            .await?;
        let plain = PodBuilder::new(ns, "plain")
            .cpu("800m")
            .node_selector("kubernetes.io/hostname", "n1");
        bound_within(&c, ns, plain, PROMPTLY).await?;
        ensure_truth!(c.count_bound(ns, &gang).await? == 0, "a member was bound");

        c.delete_pod(ns, "plain").await?;
        c.add_node("n3", NodeShape::cpu("1")).await?;
        c.create(db("db-3", "n3")).await?;
        let bound = c.wait_bound(ns, &gang, PLACE).await?;
        ensure_truth!(spread(&bound) <= TOGETHER, "not bound together: {bound:?}");
        let nodes: BTreeSet<&str> = bound.values().map(|(n, _)| n.as_str()).collect();
        ensure_truth!(
            nodes == BTreeSet::from(["n1", "n3"]),
            "not one member next to each db pod: {bound:?}"
        );
        c.assert_no_overcommit().await
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
/// cordon: the test fails there on cluster truth (pair-0 bound while it should wait seated).
///
/// With every pod through muster: the seat held while pair-1 does not exist yet is that mode's.
#[tokio::test]
async fn a_seat_on_a_node_cordoned_while_the_gang_gathers_is_not_bound_and_the_pair_is_placed_elsewhere(
) -> Result<()> {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Api, Patch, PatchParams};

    let _t = Timer(
        "a_seat_on_a_node_cordoned_while_the_gang_gathers",
        Instant::now(),
    );
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).every_pod()).await?;
    let ns = "cordon";
    let r = async {
        c.namespace(ns).await?;
        for name in ["n1", "n2", "n3"] {
            c.add_node(name, NodeShape::cpu("1")).await?;
        }
        let member = |i: u32| {
            PodBuilder::new(ns, &format!("pair-{i}"))
                .cpu("1")
                .gang(KeyScheme::Kueue, "pair", 2)
        };
        c.create(member(0)).await?;
        // Cluster truth while muster seats it: pair-0 is not bound (kube-scheduler alone binds
        // it at once, and the test fails there).
        let view = c
            .wait_gang(
                ns,
                "pair",
                &muster_harness::pod_names(&["pair-0"]),
                "pair-0 seated with room held for pair-1",
                REASON,
                |g| {
                    g.count("held") == 1
                        && g.members
                            .iter()
                            .any(|m| m.state == "seated" && m.node.is_some())
                },
            )
            .await?;
        let seated = view
            .members
            .iter()
            .find(|m| m.state == "seated")
            .and_then(|m| m.node.clone())
            .context("pair-0 seated on a node")?;
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
        let gang = muster_harness::pod_names(&["pair-0", "pair-1"]);
        let bound = c.wait_bound(ns, &gang, PLACE).await?;
        ensure_truth!(
            bound.values().all(|(n, _)| *n != seated),
            "a member was bound on the cordoned node {seated}: {bound:?}"
        );
        ensure_truth!(spread(&bound) <= TOGETHER, "not bound together: {bound:?}");
        let nodes: BTreeSet<&str> = bound.values().map(|(n, _)| n.as_str()).collect();
        ensure_truth!(nodes.len() == 2, "the pair shares a node: {bound:?}");
        let why = format!(
            "node {seated} no longer admits member {ns}/pair-0 seated there (NodeUnschedulable"
        );
        c.wait_event_containing(ns, &gang, &why, REASON).await?;
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}
