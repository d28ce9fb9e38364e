use super::*;
use crate::testkit::node;

fn ledger(nodes: &[(&str, i64)]) -> NodeLedger {
    let mut l = NodeLedger::default();
    for (name, cpu) in nodes {
        l.upsert(node(name).cpu(*cpu).build());
    }
    l
}

fn free_cpu(l: &NodeLedger, name: &str) -> i64 {
    let e = l.get(name).unwrap();
    e.info().allocatable.cpu_milli - e.used().cpu_milli - e.reserved().cpu_milli
}

#[test]
fn reservations_and_usage_both_take_room_and_give_it_back() {
    let mut l = ledger(&[("a", 1000)]);
    let a: NodeName = Arc::from("a");
    l.charge(&a, &Resources::cpu(300));
    l.reserve("a", &Resources::cpu(500));
    assert_eq!(free_cpu(&l, "a"), 200);
    let short = l.shortfall(0, &Resources::cpu(300), None, None).unwrap();
    assert_eq!(
        short.to_string(),
        "insufficient cpu: requested 300m, free 200m"
    );
    // A seat the pod may take over counts as free for it.
    assert!(l
        .shortfall(0, &Resources::cpu(300), Some(&Resources::cpu(500)), None)
        .is_none());
    // Room a simulation already gave away does not.
    assert!(l
        .shortfall(0, &Resources::cpu(100), None, Some(&Resources::cpu(150)))
        .is_some());
    l.unreserve("a", &Resources::cpu(500));
    l.uncharge(&a, &Resources::cpu(300));
    assert_eq!(free_cpu(&l, "a"), 1000);
    assert!(l.get("a").unwrap().reserved().is_zero());
}

#[test]
fn seats_on_unknown_nodes_reserve_nothing() {
    let mut l = ledger(&[("a", 1000)]);
    l.reserve("ghost", &Resources::cpu(500));
    l.unreserve("ghost", &Resources::cpu(500));
    assert_eq!(free_cpu(&l, "a"), 1000);
    assert!(l.get("ghost").is_none());
}

#[test]
fn usage_on_a_node_not_seen_yet_moves_in_when_it_appears_and_survives_its_deletion() {
    let mut l = NodeLedger::default();
    let late: NodeName = Arc::from("late");
    l.charge(&late, &Resources::cpu(800));
    l.upsert(node("late").cpu(1000).build());
    assert_eq!(free_cpu(&l, "late"), 200);
    l.reserve("late", &Resources::cpu(100));
    assert!(l.remove("late"));
    assert!(!l.remove("late"), "a second delete is a no-op");
    l.upsert(node("late").cpu(1000).build());
    assert_eq!(
        free_cpu(&l, "late"),
        200,
        "usage kept, the seat gone with the node"
    );
    l.uncharge(&late, &Resources::cpu(800));
    assert_eq!(free_cpu(&l, "late"), 1000);
}

#[test]
fn removing_a_node_keeps_every_other_position_valid() {
    let mut l = ledger(&[("a", 1), ("b", 2), ("c", 3)]);
    l.remove("a");
    let order: Vec<(usize, &str)> = l.iter().map(|(i, e)| (i, &**e.name())).collect();
    // The last node takes the removed slot (first-fit order changes only there).
    assert_eq!(order, vec![(0, "c"), (1, "b")]);
    assert_eq!(l.position("c"), Some(0));
    assert_eq!(l.position("b"), Some(1));
    assert_eq!(l.len(), 2);
}

#[test]
fn tightest_prefers_the_fuller_node_then_the_lower_position() {
    let mut l = ledger(&[("empty", 4000), ("busy", 4000), ("busy2", 4000)]);
    l.charge(&Arc::from("busy"), &Resources::cpu(2000));
    l.reserve("busy2", &Resources::cpu(2000));
    let r = Resources::cpu(1000);
    assert_eq!(l.tightest(&r, 0..3), Some(1));
    assert_eq!(l.tightest(&r, [0].into_iter()), Some(0));
    assert_eq!(l.tightest(&r, std::iter::empty()), None);
    assert!(l.packing_score(1, &r) > l.packing_score(0, &r));
}

#[test]
fn tightest_where_is_the_tightest_of_the_options_admitted_asking_only_until_one_is() {
    let mut l = ledger(&[
        ("empty", 4000),
        ("busy", 4000),
        ("busy2", 4000),
        ("b3", 4000),
    ]);
    l.charge(&Arc::from("busy"), &Resources::cpu(2000));
    l.charge(&Arc::from("b3"), &Resources::cpu(2000));
    l.reserve("busy2", &Resources::cpu(1000));
    let r = Resources::cpu(1000);
    for refused in [vec![], vec![1], vec![1, 3], vec![1, 2, 3], vec![0, 1, 2, 3]] {
        let admitted = |i: &usize| !refused.contains(i);
        let mut asked = Vec::new();
        let got = l.tightest_where(&r, 0..4, |i| {
            asked.push(i);
            admitted(&i)
        });
        assert_eq!(got, l.tightest(&r, (0..4).filter(admitted)), "{refused:?}");
        // Tightest first (1 and 3 tie: the lower position), then 2, then 0.
        let order = [1, 3, 2, 0];
        let stop = order.iter().position(admitted).map_or(4, |p| p + 1);
        assert_eq!(asked, order[..stop], "{refused:?}");
    }
}
