//! End-to-end: topology domains. On the real control plane with the stock kube-scheduler and
//! muster as its extender (fake nodes, no kubelets), 4 racks × 8 nodes labelled
//! `topology.kubernetes.io/rack`, each node with room for one 1-CPU member (nodes without room
//! have 100m):
//!
//! 1. rack 0 has 6 nodes with room, rack 1 has 8, racks 2 and 3 have 4: a gang of 8 with
//!    `muster.dev/topology-required: topology.kubernetes.io/rack` lands wholly in rack 1, and
//!    no member is bound in rack 0 (members are never unbound or deleted here, so the final
//!    bindings are every binding there ever was);
//! 2. no rack has 8 nodes with room (6, 6, 4, 4): the gang binds nothing and says the numbers
//!    ("needs 8 members in one topology.kubernetes.io/rack; the best … fits 6");
//! 3. `muster.dev/topology-preferred: topology.kubernetes.io/rack` and no rack holds 8 (5, 3, 6,
//!    2 nodes with room): the gang is placed whole, in the fewest racks that can hold it (2).
//!
//! 4. preemption inside one rack (3 racks × 4 one-CPU nodes, low-priority plain pods on some):
//!    a high-priority gang of 4 confined to one rack evicts only in the rack needing the fewest
//!    evictions and is placed whole there; nothing is evicted in the other racks;
//! 5. no rack of 4 holds a gang of 5 even with every low-priority pod gone: nothing evicted,
//!    nothing bound.
//!
//! 6. test 1 with every pod through muster (the alternative to the shipped install).
//!
//! 7. a preferred-rack gang whose first, small member is created alone is seated in the rack
//!    that best fits copies of it; its larger members, created after, fit only in another
//!    rack, which holds the whole gang: the gang moves there before anything is bound and
//!    binds wholly in that rack; the same for a required-rack gang.
//!
//! Without muster (`tests/control-run`) kube-scheduler places members one by one wherever
//! there is room (and preempts per member), so each fails there on cluster truth.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use muster_harness::k8s::KeyScheme;
use muster_harness::{
    ensure_truth, holds_for, muster_view_is_checked, spread, Cluster, ClusterOptions, NodeShape,
    PodBuilder, Timer, CLUSTER_TRUTH, PLACE, REASON, TOGETHER,
};

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");
const RACK: &str = "topology.kubernetes.io/rack";

/// 4 racks × 8 nodes `r<rack>-<i>`; in rack `r`, the first `room[r]` nodes have 1 CPU, the
/// rest 100m (no room for a member).
async fn racks(c: &Cluster, room: [usize; 4]) -> Result<()> {
    for (r, &with_room) in room.iter().enumerate() {
        for i in 0..8 {
            let cpu = if i < with_room { "1" } else { "100m" };
            c.add_node(
                &format!("r{r}-{i}"),
                NodeShape::cpu(cpu).label(RACK, &format!("rack-{r}")),
            )
            .await?;
        }
    }
    Ok(())
}

/// The racks (`r<rack>`) of the nodes the members were bound to.
fn racks_of(bound: &BTreeMap<String, (String, Instant)>) -> BTreeSet<&str> {
    bound
        .values()
        .map(|(n, _)| n.split('-').next().unwrap_or_default())
        .collect()
}

/// Cluster truth: the members were bound together, and all in rack 1.
fn ensure_together_in_rack_1(bound: &BTreeMap<String, (String, Instant)>) -> Result<()> {
    ensure_truth!(spread(bound) <= TOGETHER, "not bound together: {bound:?}");
    ensure_truth!(
        racks_of(bound) == BTreeSet::from(["r1"]),
        "not wholly in rack 1: {bound:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_required_rack_gang_lands_wholly_in_the_rack_that_holds_it() -> Result<()> {
    let _t = Timer(
        "a_required_rack_gang_lands_wholly_in_one_rack",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let ns = "racks";
    let r = lands_wholly_in_rack_1(&c, ns).await;
    c.report(&[ns], r).await
}

/// The same with every pod through muster (`--scope=every-pod`): kube-scheduler's own calls
/// seat the gang, member by member, all in rack 1.
#[tokio::test]
async fn a_required_rack_gang_with_every_pod_through_muster_lands_wholly_in_one_rack() -> Result<()>
{
    let _t = Timer(
        "a_required_rack_gang_with_every_pod_through_muster",
        Instant::now(),
    );
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).every_pod()).await?;
    let ns = "racks-every-pod";
    let r = lands_wholly_in_rack_1(&c, ns).await;
    c.report(&[ns], r).await
}

/// Racks with 6, 8, 4 and 4 nodes with room; a gang of 8 with a required rack lands wholly in
/// rack 1, and nothing is ever bound in rack 0.
async fn lands_wholly_in_rack_1(c: &Cluster, ns: &str) -> Result<()> {
    c.namespace(ns).await?;
    racks(c, [6, 8, 4, 4]).await?;
    let gang = c
        .create_gang(ns, "trainer", 8, 8, KeyScheme::Muster, |p| {
            p.cpu("1").annotation("muster.dev/topology-required", RACK)
        })
        .await?;
    let bound = c.wait_bound(ns, &gang, PLACE).await?;
    ensure_truth!(
        !racks_of(&bound).contains("r0"),
        "a member was bound in rack 0: {bound:?}"
    );
    ensure_together_in_rack_1(&bound)?;
    c.assert_no_overcommit().await?;
    Ok(())
}

#[tokio::test]
async fn a_required_rack_gang_no_rack_holds_binds_nothing_and_says_the_numbers() -> Result<()> {
    let _t = Timer("a_required_rack_gang_no_rack_holds", Instant::now());
    let c = Cluster::start(MUSTER).await?;
    let ns = "norack";
    let r = async {
        c.namespace(ns).await?;
        racks(&c, [6, 6, 4, 4]).await?;
        let gang = c
            .create_gang(ns, "trainer", 8, 8, KeyScheme::Muster, |p| {
                p.cpu("1").annotation("muster.dev/topology-required", RACK)
            })
            .await?;
        let reason = format!(
            "gang {ns}/trainer needs 8 members in one {RACK}; the best {RACK} (rack-0) fits 6 \
             (of 4 domains)"
        );
        c.wait_gang_waiting_whole(ns, "trainer", &gang, &reason, REASON)
            .await?;
        c.assert_none_bound_for(ns, &gang, REASON / 3).await?;
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

#[tokio::test]
async fn a_preferred_rack_gang_no_rack_holds_spans_the_fewest_racks() -> Result<()> {
    let _t = Timer(
        "a_preferred_rack_gang_spans_the_fewest_racks",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let ns = "preferred";
    let r = async {
        c.namespace(ns).await?;
        racks(&c, [5, 3, 6, 2]).await?;
        let gang = c
            .create_gang(ns, "trainer", 8, 8, KeyScheme::Muster, |p| {
                p.cpu("1").annotation("muster.dev/topology-preferred", RACK)
            })
            .await?;
        let bound = c.wait_bound(ns, &gang, PLACE).await?;
        ensure_truth!(spread(&bound) <= TOGETHER, "not bound together: {bound:?}");
        let in_racks = racks_of(&bound);
        // No rack holds 8; two do (the roomiest, rack 2 with 6, and any other with 2 more).
        ensure_truth!(
            in_racks.len() == 2 && in_racks.contains("r2"),
            "not in the fewest racks (2, rack 2 among them): {bound:?}"
        );
        c.assert_no_overcommit().await?;
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

/// Observation window for "nothing is evicted" in the control run: kube-scheduler alone preempts within one
/// scheduling cycle (about 300 ms on a loaded 2-core machine) of the gang's creation; 30 s is
/// the margin `tests/e2e/preemption.rs` uses for the same claim.
const NOTHING_EVICTED: Duration = Duration::from_secs(30);
/// Observation window for "nothing is evicted" after muster's verdict that evicting cannot
/// help: kube-scheduler's preemption acts in the cycle that asked (about 300 ms); 5 s is the
/// margin `tests/e2e/preemption.rs` uses for "stays as it is" after a decisive moment.
const AFTER_VERDICT: Duration = Duration::from_secs(5);

/// PriorityClasses `low` (100) and `high` (100000).
async fn priorities(c: &Cluster) -> Result<()> {
    for (name, value) in [("low", 100), ("high", 100_000)] {
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
    }
    Ok(())
}

/// `racks` racks of 4 one-CPU nodes `r<rack>-<i>`; in rack `r`, the first `busy[r]` nodes
/// run a low-priority 1-CPU plain pod `low-r<rack>-<i>` (bound before this returns). Returns
/// the low pods' names per rack.
async fn racks_with_low_pods(c: &Cluster, ns: &str, busy: &[usize]) -> Result<Vec<Vec<String>>> {
    priorities(c).await?;
    let mut low = Vec::new();
    for (r, &b) in busy.iter().enumerate() {
        let mut in_rack = Vec::new();
        for i in 0..4 {
            let node = format!("r{r}-{i}");
            c.add_node(&node, NodeShape::cpu("1").label(RACK, &format!("rack-{r}")))
                .await?;
            if i < b {
                let name = format!("low-{node}");
                c.create(
                    PodBuilder::new(ns, &name)
                        .cpu("1")
                        .priority_class("low")
                        .node_selector("kubernetes.io/hostname", &node),
                )
                .await?;
                in_rack.push(name);
            }
        }
        low.push(in_rack);
    }
    let all: Vec<String> = low.iter().flatten().cloned().collect();
    c.wait_bound(ns, &all, PLACE).await?;
    Ok(low)
}

/// Gang `trainer` of `n` high-priority one-CPU members, all required in one rack; their names.
async fn high_rack_gang(c: &Cluster, ns: &str, n: u32) -> Result<Vec<String>> {
    c.create_gang(ns, "trainer", n, n, KeyScheme::Muster, |p| {
        p.cpu("1")
            .priority_class("high")
            .annotation("muster.dev/topology-required", RACK)
    })
    .await
}

/// The names of the pods that exist in `ns`.
async fn existing(c: &Cluster, ns: &str) -> Result<BTreeSet<String>> {
    Ok(c.pods(ns)
        .await?
        .iter()
        .map(|p| muster_harness::k8s::pod_name(p).to_string())
        .collect())
}

/// Racks of 4 one-CPU nodes running 2, 1 and 3 low-priority pods: no rack has 4 free nodes,
/// so a high-priority gang of 4 confined to one rack fits only by evicting. Every node kube-scheduler
/// could preempt on has one victim; rack 1 needs that one eviction in all, rack 0 two, rack 2
/// three. muster keeps only rack 1's candidate: the gang is placed whole in rack 1, only rack
/// 1's low pod is evicted, and every low pod of racks 0 and 2 still exists where it was.
/// kube-scheduler alone binds the members to the 6 free nodes, across racks, evicting nothing.
#[tokio::test]
async fn a_required_rack_gang_preempts_only_inside_the_rack_with_the_fewest_victims() -> Result<()>
{
    let _t = Timer(
        "a_required_rack_gang_preempts_only_inside_one_rack",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let ns = "preempt-rack";
    let r = async {
        c.namespace(ns).await?;
        let low = racks_with_low_pods(&c, ns, &[2, 1, 3]).await?;
        let gang = high_rack_gang(&c, ns, 4).await?;
        let bound = c.wait_bound(ns, &gang, PLACE).await?;
        ensure_together_in_rack_1(&bound)?;
        // Pod names are never reused here: a low pod that exists now was never evicted.
        let exist = existing(&c, ns).await?;
        let evicted_elsewhere: Vec<&String> = low[0]
            .iter()
            .chain(&low[2])
            .filter(|n| !exist.contains(*n))
            .collect();
        ensure_truth!(
            evicted_elsewhere.is_empty(),
            "evicted outside rack 1: {evicted_elsewhere:?}"
        );
        ensure_truth!(
            !exist.contains(&low[1][0]),
            "rack 1's low pod {} was not evicted, yet all 4 members are bound there",
            low[1][0]
        );
        c.assert_no_overcommit().await?;
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

/// Two racks of 4 one-CPU nodes, each running a low-priority pod: a high-priority gang of 5
/// confined to one rack fits in no rack even with every low pod gone. Nothing is evicted and
/// nothing bound. kube-scheduler alone evicts 5 low pods, one per member.
#[tokio::test]
async fn a_required_rack_gang_no_rack_holds_even_after_evictions_evicts_nothing() -> Result<()> {
    let _t = Timer(
        "a_required_rack_gang_no_rack_holds_after_evictions",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let ns = "preempt-norack";
    let r = async {
        c.namespace(ns).await?;
        let low: Vec<String> = racks_with_low_pods(&c, ns, &[4, 4])
            .await?
            .into_iter()
            .flatten()
            .collect();
        let gang = high_rack_gang(&c, ns, 5).await?;
        let (cluster, low_pods) = (&c, &low);
        // With every node full kube-scheduler's filters pass no node, so muster hears of the
        // gang through preempt only: its Event on the members says so, written as it answers
        // that call. That verdict is the decisive moment (kube-scheduler would evict within a
        // cycle after it); the control run has none and checks cluster truth at once
        // (kube-scheduler alone evicts within a cycle of the gang's creation).
        // Gathered behind muster's gate (the shipped mode) the gang never reaches kube-scheduler:
        // muster's own look at preemption is the verdict, in the gang's waiting message.
        let verdict = if c.gathers() {
            "even after evicting lower-priority pods the best rack fits 4"
        } else {
            "could place only 4 of 5 members even with every lower-priority pod evicted"
        };
        let window = if muster_view_is_checked() {
            c.wait_event_containing(ns, &gang, verdict, REASON).await?;
            AFTER_VERDICT
        } else {
            NOTHING_EVICTED
        };
        holds_for("every low pod to stay", window, || async move {
            let exist = existing(cluster, ns).await?;
            let gone: Vec<&String> = low_pods.iter().filter(|n| !exist.contains(*n)).collect();
            Ok(if gone.is_empty() {
                Ok(())
            } else {
                Err(format!("{CLUSTER_TRUTH} evicted: {gone:?}"))
            })
        })
        .await?;
        c.assert_none_bound_for(ns, &gang, Duration::ZERO).await?;
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

/// Rack 0: four nodes of 300m; rack 1: four 1-CPU nodes. A gang of 4 preferring one rack: its
/// first member (100m) is created alone and muster seats it in rack 0 (the best fit for four
/// copies of 100m; nothing bound meanwhile). Then three members of 900m are created: they fit
/// nowhere in rack 0, and rack 1 holds all four. The gang moves to rack 1 before anything is
/// bound (the first member's held bind call answers "moves from … rack-0 to rack-1", and
/// kube-scheduler schedules it again) and binds wholly there. kube-scheduler alone binds the
/// first member as soon as it is created, so the test fails there on cluster truth (a member
/// bound while muster should be holding its seat).
#[tokio::test]
async fn a_preferred_rack_gang_seated_before_its_larger_members_existed_moves_whole() -> Result<()>
{
    let _t = Timer(
        "a_preferred_rack_gang_seated_before_its_larger_members_moves",
        Instant::now(),
    );
    moves_whole_to_rack_1_alone("moves", "muster.dev/topology-preferred").await
}

/// The same with `muster.dev/topology-required`: without the move, the larger members would
/// wait for room in rack 0 that never comes (until the gang timed out).
#[tokio::test]
async fn a_required_rack_gang_seated_before_its_larger_members_existed_moves_whole() -> Result<()> {
    let _t = Timer(
        "a_required_rack_gang_seated_before_its_larger_members_moves",
        Instant::now(),
    );
    moves_whole_to_rack_1_alone("moves-required", "muster.dev/topology-required").await
}

/// [`moves_whole_to_rack_1`] on a cluster of its own, in namespace `ns`.
async fn moves_whole_to_rack_1_alone(ns: &str, key: &str) -> Result<()> {
    // With every pod through muster: a member seated before its larger siblings exist is that
    // mode's (the shipped mode holds nothing until every member its quorum needs exists).
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).every_pod()).await?;
    let r = moves_whole_to_rack_1(&c, ns, key).await;
    c.report(&[ns], r).await
}

/// Rack 0 of four 300m nodes, rack 1 of four 1-CPU nodes; a gang of 4 with topology `key`
/// naming the rack label: its first member (100m) alone, seated in rack 0; then three of 900m;
/// the gang binds wholly in rack 1, and the first member was told why it moved.
async fn moves_whole_to_rack_1(c: &Cluster, ns: &str, key: &str) -> Result<()> {
    c.namespace(ns).await?;
    for (r, cpu) in [(0, "300m"), (1, "1")] {
        for i in 0..4 {
            c.add_node(
                &format!("r{r}-{i}"),
                NodeShape::cpu(cpu).label(RACK, &format!("rack-{r}")),
            )
            .await?;
        }
    }
    let member = |i: usize, cpu: &str| {
        PodBuilder::new(ns, &format!("trainer-{i}"))
            .cpu(cpu)
            .gang(KeyScheme::Muster, "trainer", 4)
            .annotation(key, RACK)
    };
    c.create(member(0, "100m")).await?;
    let first = vec!["trainer-0".to_string()];
    c.wait_gang(
        ns,
        "trainer",
        &first,
        "its first member seated in rack 0",
        REASON,
        |g| {
            g.members.iter().any(|m| {
                m.name == "trainer-0"
                    && m.state == "seated"
                    && m.node.as_deref().is_some_and(|n| n.starts_with("r0-"))
            })
        },
    )
    .await?;
    for i in 1..4 {
        c.create(member(i, "900m")).await?;
    }
    let gang: Vec<String> = (0..4).map(|i| format!("trainer-{i}")).collect();
    let bound = c.wait_bound(ns, &gang, PLACE).await?;
    ensure_together_in_rack_1(&bound)?;
    c.assert_no_overcommit().await?;
    if muster_view_is_checked() {
        c.wait_event_containing(
            ns,
            &first,
            &format!("gang {ns}/trainer moves from {RACK} rack-0 to rack-1"),
            REASON,
        )
        .await?;
    }
    Ok(())
}
