//! A quorum larger than the cluster could ever hold is refused at once, before any simulation
//! (fail-safe: simulating 100,000 members held the table's lock for seconds), with the numbers
//! (explained), and the gang holds nothing (holds-nothing).

use super::*;

/// 20 nodes of 64 CPUs and 110 pod slots: at most 1,280 one-CPU members.
fn cluster() -> World {
    let nodes: Vec<NodeInfo> = (0..20)
        .map(|i| testkit::node(&format!("n{i}")).cpu(64_000).build())
        .collect();
    World::new(&nodes)
}

const REFUSED: &str = "gang ml/huge: quorum 100000 is more than the cluster could ever hold: \
    its 20 nodes have room for at most 1280 members as small as its smallest, with nothing else \
    running; nothing is held (lower the gang's min-available or add nodes)";

#[test]
fn a_quorum_beyond_the_cluster_is_refused_at_once_naming_the_numbers() {
    let mut w = cluster();
    let m = pod("m0").cpu(1000).gang("huge", 100_000).build();
    let (ok, reasons) = w.filter(&m);
    assert!(ok.is_empty());
    assert_eq!(reasons, vec![REFUSED]);
    let names = w.all_nodes();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let verdicts = w.table.filter(&m, &refs, w.now);
    assert!(
        verdicts
            .iter()
            .all(|v| matches!(v, NodeVerdict::Unresolvable(_))),
        "no eviction can help: kube-scheduler must not preempt for it"
    );
    assert_eq!(rejection(&w.bind(&m, "n0")), REFUSED);
    assert!(!w.table.holds_seat(&m.uid));
    assert_eq!(
        (0..20).map(|i| w.reserved(&format!("n{i}"))).sum::<i64>(),
        0
    );
}

/// The bound counts the smallest member: one that asks for less than the others makes room
/// for more, so a quorum within that is simulated as usual.
#[test]
fn the_smallest_member_sets_the_bound() {
    let mut w = cluster();
    // 20 nodes × 110 pod slots = 2,200 members of 100m; 1,280 of one CPU.
    let big = pod("m0").cpu(1000).gang("huge", 2000).build();
    let small = pod("m1").cpu(100).gang("huge", 2000).build();
    w.add(&[&big]);
    let (_, reasons) = w.filter(&big);
    assert_eq!(reasons, vec![REFUSED.replace("100000", "2000")]);
    w.add(&[&small]);
    let (_, reasons) = w.filter(&big);
    assert!(
        !reasons[0].contains("could ever hold"),
        "2,000 members of 100m fit in 2,200 pod slots: planned as usual, got {reasons:?}"
    );
}

/// A quorum the cluster could hold, even a large one, is planned as before.
#[test]
fn a_large_quorum_within_the_cluster_is_planned_as_usual() {
    let mut w = cluster();
    let m = pod("m0").cpu(1000).gang("big", 1200).build();
    let (ok, reasons) = w.filter(&m);
    assert_eq!(
        ok.len(),
        1,
        "room for 1,200 of 1,280: one node offered, got {reasons:?}"
    );
}

/// The preempt verb refuses to evict anything for such a gang, before any simulation.
#[test]
fn preemption_for_a_quorum_beyond_the_cluster_evicts_nothing() {
    let mut w = cluster();
    let victim = pod("low").cpu(64_000).priority(-10).bound("n0").build();
    let m = pod("m0").cpu(1000).gang("huge", 100_000).build();
    w.add(&[&victim, &m]);
    let d = w.preempt(
        &m,
        vec![PreemptCandidate {
            node: "n0".into(),
            victims: vec![victim.uid.to_string()],
            pdb_violations: 0,
        }],
    );
    assert!(d.kept.is_empty());
    assert_eq!(d.dropped.len(), 1);
    assert!(matches!(d.dropped[0].1, DropReason::BeyondCluster(_)));
}

/// 40 nodes of 64 CPUs and 110 pod slots: 4,400 members of 100m.
fn forty_nodes() -> World {
    let nodes: Vec<NodeInfo> = (0..40)
        .map(|i| {
            testkit::node(&format!("n{i}"))
                .cpu(64_000)
                .label(crate::model::rules::HOSTNAME_KEY, &format!("n{i}"))
                .build()
        })
        .collect();
    World::new(&nodes)
}

/// The planner's work per call is bounded: members with spread terms cost a walk over the nodes
/// each, and a gang of 4,000 of them stops at the check budget, holds nothing, and says so.
#[test]
fn a_simulation_that_runs_out_of_its_check_budget_holds_nothing_and_says_so() {
    use crate::model::inputs::terms::{InclusionPolicy, SpreadConstraint};
    use crate::model::rules::fixtures::selector;
    let mut w = forty_nodes();
    let spread = SpreadConstraint {
        max_skew: 10_000,
        topology_key: crate::model::rules::HOSTNAME_KEY.to_string(),
        selector: selector(&[("job", "big")]),
        match_label_keys: vec![],
        min_domains: 1,
        node_affinity_policy: InclusionPolicy::Honor,
        node_taints_policy: InclusionPolicy::Ignore,
    };
    let m = crate::model::rules::fixtures::PodRulesBuilder::default()
        .spread(spread)
        .on(pod("m0")
            .cpu(100)
            .label("job", "big")
            .gang("big", 4000)
            .build());
    let (ok, reasons) = w.filter(&m);
    assert!(ok.is_empty());
    assert!(
        reasons[0].contains("the simulation stopped after 20000 node checks with"),
        "{reasons:?}"
    );
    assert!(!w.table.holds_seat(&m.uid));
}

/// Without such terms the copies resume where the previous one went: the same gang fits within
/// the budget.
#[test]
fn copies_without_terms_fit_within_the_check_budget() {
    let mut w = forty_nodes();
    let m = pod("m0").cpu(100).gang("big", 4000).build();
    let (ok, reasons) = w.filter(&m);
    assert_eq!(ok.len(), 1, "{reasons:?}");
}
