//! The last look before binding a gang at quorum: every confirmed seat's node is checked under
//! every rule the planner applies, as the watch has the node and its pods now, not only for
//! room (holds-nothing, never-half). Each test names the kube-scheduler plugin whose rule
//! changed while the gang waited; in each, nothing is bound, the members seated on the node
//! that refuses are planned again, the others keep their seats, and the gang is then placed
//! whole elsewhere.

use super::*;
use crate::model::inputs::terms::{InclusionPolicy, SpreadConstraint};
use crate::model::rules::fixtures::{selector, term, PodRulesBuilder, HOSTNAME};

fn hostnamed(name: &str) -> crate::testkit::NodeBuilder {
    testkit::node(name).cpu(1000).label(HOSTNAME, name)
}

fn members(n: u32, rules: impl Fn(PodInfo) -> PodInfo) -> Vec<PodInfo> {
    (0..n)
        .map(|i| rules(pod(&format!("m{i}")).cpu(600).gang("g", n).build()))
        .collect()
}

/// m0 seated on `a`; `change` happens to the cluster; m1 completes the quorum on `b`. Returns
/// the decision of m1's bind call.
fn seat_m0_on_a_then_complete(
    w: &mut World,
    ms: &[PodInfo],
    change: impl FnOnce(&mut World),
) -> BindDecision {
    w.add(&ms.iter().collect::<Vec<_>>());
    wait_message(&w.bind(&ms[0], "a"));
    change(w);
    w.bind(&ms[1], "b")
}

/// Nothing bound; m0 gives up its seat on `a` and is told why; m1 keeps its seat; the held bind
/// calls of the gang are woken; then m0, retried on `c`, completes the gang there.
fn assert_planned_around_a(w: &mut World, ms: &[PodInfo], d: &BindDecision, why: &str) {
    let expected = format!(
        "gang ml/g: node a no longer admits member ml/m0 seated there ({why}); nothing was \
         bound, the members seated there are planned again"
    );
    assert_eq!(wait_message(d), expected);
    assert!(!w.table.has_node(&ms[0].uid) && !w.table.has_node(&ms[1].uid));
    assert!(!w.table.holds_seat(&ms[0].uid), "m0 is planned again");
    assert!(w.table.holds_seat(&ms[1].uid), "m1 keeps its seat on b");
    assert_eq!(w.reserved("a"), 0, "nothing is held on a");
    assert_eq!(w.table.take_released(), vec![GangKey::new("ml", "g")]);
    assert_eq!(names(&w.bind(&ms[0], "c")), vec!["m0@c", "m1@b"]);
}

/// NodeUnschedulable: the seat's node was cordoned while the gang waited.
#[test]
fn node_unschedulable_a_seat_on_a_node_cordoned_since_is_not_bound() {
    let mut w = World::new(&[node("a", 1000), node("b", 1000), node("c", 1000)]);
    let ms = members(2, |p| p);
    let d = seat_m0_on_a_then_complete(&mut w, &ms, |w| {
        w.table
            .apply_node(testkit::node("a").cpu(1000).unschedulable().build());
    });
    assert_planned_around_a(
        &mut w,
        &ms,
        &d,
        "NodeUnschedulable: node(s) were unschedulable",
    );
}

/// TaintToleration: the seat's node was tainted NoExecute (as the node lifecycle controller
/// taints a node that went NotReady) and the member does not tolerate it.
#[test]
fn taint_toleration_a_seat_on_a_node_tainted_since_is_not_bound() {
    let mut w = World::new(&[node("a", 1000), node("b", 1000), node("c", 1000)]);
    let ms = members(2, |p| p);
    let d = seat_m0_on_a_then_complete(&mut w, &ms, |w| {
        w.table.apply_node(
            testkit::node("a")
                .cpu(1000)
                .taint("node.kubernetes.io/not-ready", "", "NoExecute")
                .build(),
        );
    });
    assert_planned_around_a(
        &mut w,
        &ms,
        &d,
        "TaintToleration: node(s) had untolerated taint(s)",
    );
}

/// TaintToleration: a taint the members tolerate changes nothing: the gang is bound.
#[test]
fn taint_toleration_a_tolerated_taint_added_since_binds_the_gang() {
    let mut w = World::new(&[node("a", 1000), node("b", 1000)]);
    let ms: Vec<PodInfo> = (0..2)
        .map(|i| {
            pod(&format!("m{i}"))
                .cpu(600)
                .gang("g", 2)
                .tolerate("dedicated")
                .build()
        })
        .collect();
    let d = seat_m0_on_a_then_complete(&mut w, &ms, |w| {
        w.table.apply_node(
            testkit::node("a")
                .cpu(1000)
                .taint("dedicated", "ml", "NoSchedule")
                .build(),
        );
    });
    assert_eq!(names(&d), vec!["m0@a", "m1@b"]);
}

/// NodeAffinity: the seat's node lost the label the members' `nodeSelector` requires.
#[test]
fn node_affinity_a_seat_on_a_node_that_lost_a_required_label_is_not_bound() {
    let pool = |n: &str| testkit::node(n).cpu(1000).label("pool", "gpu").build();
    let mut w = World::new(&[pool("a"), pool("b"), pool("c")]);
    let ms: Vec<PodInfo> = (0..2)
        .map(|i| {
            pod(&format!("m{i}"))
                .cpu(600)
                .gang("g", 2)
                .node_selector("pool", "gpu")
                .build()
        })
        .collect();
    let d = seat_m0_on_a_then_complete(&mut w, &ms, |w| {
        w.table.apply_node(testkit::node("a").cpu(1000).build());
    });
    assert_planned_around_a(
        &mut w,
        &ms,
        &d,
        "NodeAffinity: node(s) didn't match Pod's node affinity/selector",
    );
}

/// InterPodAffinity: the members repel `app=db` per node, and such a pod landed on the seat's
/// node since (bound by someone else, with room left for the member).
#[test]
fn inter_pod_affinity_a_seat_beside_a_pod_its_anti_affinity_repels_is_not_bound() {
    let mut w = World::new(&[
        hostnamed("a").build(),
        hostnamed("b").build(),
        hostnamed("c").build(),
    ]);
    let ms = members(2, |p| {
        PodRulesBuilder::default()
            .anti_affinity(term(&[("app", "db")], HOSTNAME))
            .on(p)
    });
    let d = seat_m0_on_a_then_complete(&mut w, &ms, |w| {
        let db = pod("db").cpu(100).label("app", "db").bound("a").build();
        w.add(&[&db]);
    });
    assert_planned_around_a(
        &mut w,
        &ms,
        &d,
        "InterPodAffinity: node(s) didn't match pod anti-affinity rules",
    );
}

fn spread_per_node() -> SpreadConstraint {
    SpreadConstraint {
        max_skew: 1,
        topology_key: HOSTNAME.to_string(),
        selector: selector(&[("job", "s")]),
        match_label_keys: vec![],
        min_domains: 1,
        node_affinity_policy: InclusionPolicy::Honor,
        node_taints_policy: InclusionPolicy::Ignore,
    }
}

/// Members labelled `job=s` that spread per node by that label.
fn spread_members(n: u32) -> Vec<PodInfo> {
    (0..n)
        .map(|i| {
            let p = pod(&format!("m{i}"))
                .cpu(600)
                .label("job", "s")
                .gang("g", n)
                .build();
            PodRulesBuilder::default().spread(spread_per_node()).on(p)
        })
        .collect()
}

/// PodTopologySpread: the members spread per node with maxSkew 1; two pods their selector
/// counts landed on the seat's node since, so a member there would make the skew 2.
#[test]
fn pod_topology_spread_a_seat_on_a_node_that_became_too_crowded_is_not_bound() {
    let mut w = World::new(&[
        hostnamed("a").cpu(4000).build(),
        hostnamed("b").cpu(4000).build(),
        hostnamed("c").cpu(4000).build(),
    ]);
    let ms = spread_members(2);
    let d = seat_m0_on_a_then_complete(&mut w, &ms, |w| {
        for name in ["s-x", "s-y"] {
            let other = pod(name).cpu(100).label("job", "s").bound("a").build();
            w.add(&[&other]);
        }
    });
    assert_eq!(
        wait_message(&d),
        "gang ml/g: node a no longer admits member ml/m0 seated there (PodTopologySpread: \
         node(s) didn't match pod topology spread constraints); nothing was bound, the members \
         seated there are planned again"
    );
    assert!(!w.table.holds_seat(&ms[0].uid), "m0 is planned again");
    assert!(w.table.holds_seat(&ms[1].uid), "m1 keeps its seat on b");
    assert_eq!(w.reserved("a"), 0);
}

/// PodTopologySpread is checked in an order kube-scheduler could have bound the members in:
/// seats a, a, b with maxSkew 1 per node pass as a, b, a, though not in name order (m0@a,
/// m1@a: skew 2 before m2@b). The gang is bound.
#[test]
fn pod_topology_spread_seats_that_pass_in_some_order_are_bound() {
    let mut w = World::new(&[hostnamed("a").cpu(4000).build(), hostnamed("b").build()]);
    let ms = spread_members(3);
    w.add(&ms.iter().collect::<Vec<_>>());
    wait_message(&w.bind(&ms[0], "a"));
    wait_message(&w.bind(&ms[1], "a"));
    assert_eq!(names(&w.bind(&ms[2], "b")), vec!["m0@a", "m1@a", "m2@b"]);
}

/// The requester's own seat on a node that refuses it: its bind call is refused with the
/// reason (kube-scheduler retries it elsewhere), and nothing is bound.
#[test]
fn node_unschedulable_the_requesters_own_node_cordoned_refuses_its_call_and_binds_nothing() {
    let mut w = World::new(&[node("a", 1000), node("b", 1000), node("c", 1000)]);
    let ms = members(2, |p| p);
    w.add(&[&ms[0], &ms[1]]);
    wait_message(&w.bind(&ms[0], "a"));
    // m1 lands on a second seat of m0's node (kube-scheduler's cycle began before the cordon).
    w.table.apply_node(testkit::node("a").cpu(2000).build());
    w.table
        .apply_node(testkit::node("a").cpu(2000).unschedulable().build());
    let d = w.bind(&ms[1], "a");
    assert_eq!(
        rejection(&d),
        "gang ml/g: node a no longer admits member ml/m0 seated there (NodeUnschedulable: \
         node(s) were unschedulable); nothing was bound, the members seated there are planned \
         again"
    );
    assert!(!w.table.has_node(&ms[0].uid) && !w.table.has_node(&ms[1].uid));
    assert!(!w.table.holds_seat(&ms[0].uid) && !w.table.holds_seat(&ms[1].uid));
    assert_eq!(w.reserved("a"), 0);
}
