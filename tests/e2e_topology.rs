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
//! Without muster (`tests/control-run`) kube-scheduler places members one by one wherever
//! there is room, so both fail there on cluster truth.

use std::collections::BTreeSet;
use std::time::Instant;

use anyhow::Result;
use muster_harness::k8s::GangKey;
use muster_harness::{ensure_truth, spread, Cluster, NodeShape, Timer, PLACE, REASON, TOGETHER};

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

#[tokio::test]
async fn a_required_rack_gang_lands_wholly_in_the_rack_that_holds_it() -> Result<()> {
    let _t = Timer(
        "a_required_rack_gang_lands_wholly_in_one_rack",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let ns = "racks";
    let r = async {
        c.namespace(ns).await?;
        racks(&c, [6, 8, 4, 4]).await?;
        let gang = c
            .create_gang(ns, "trainer", 8, 8, GangKey::Muster, |p| {
                p.cpu("1").annotation("muster.dev/topology-required", RACK)
            })
            .await?;
        let bound = c.wait_bound(ns, &gang, PLACE).await?;
        ensure_truth!(spread(&bound) <= TOGETHER, "not bound together: {bound:?}");
        let in_rack: BTreeSet<&str> = bound
            .values()
            .map(|(n, _)| n.split('-').next().unwrap_or_default())
            .collect();
        ensure_truth!(
            !in_rack.contains("r0"),
            "a member was bound in rack 0: {bound:?}"
        );
        ensure_truth!(
            in_rack == BTreeSet::from(["r1"]),
            "not wholly in rack 1: {bound:?}"
        );
        c.assert_no_overcommit().await?;
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
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
            .create_gang(ns, "trainer", 8, 8, GangKey::Muster, |p| {
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
            .create_gang(ns, "trainer", 8, 8, GangKey::Muster, |p| {
                p.cpu("1").annotation("muster.dev/topology-preferred", RACK)
            })
            .await?;
        let bound = c.wait_bound(ns, &gang, PLACE).await?;
        ensure_truth!(spread(&bound) <= TOGETHER, "not bound together: {bound:?}");
        let in_racks: BTreeSet<&str> = bound
            .values()
            .map(|(n, _)| n.split('-').next().unwrap_or_default())
            .collect();
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
