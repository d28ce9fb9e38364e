use crate::model::tests::{names, node, pod, wait_message, World};

#[test]
fn a_rebuilt_table_keeps_pods_and_nodes_and_forgets_seats_and_assumptions() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let solo = pod("solo").cpu(300).bound("n2").build();
    let p = pod("p").gang("g", 2).build();
    let q = pod("q").gang("g", 2).build();
    w.add(&[&solo, &p, &q]);
    wait_message(&w.bind(&p, "n1"));
    assert!(
        w.reserved("n1") + w.reserved("n2") >= 200,
        "g holds room for its quorum"
    );
    assert!(w.table.holds_seat(&p.uid));

    let fresh = w.table.rebuilt();
    assert_eq!(fresh.node_count(), 2);
    assert_eq!(fresh.pod_count(), 3);
    assert!(
        !fresh.holds_seat(&p.uid),
        "seats are the old leader's decisions"
    );
    assert!(fresh
        .ledger
        .iter()
        .all(|(_, e)| e.reserved().cpu_milli == 0));
    let n2 = fresh.ledger.get("n2").unwrap();
    assert_eq!(n2.used().cpu_milli, 300, "a bound pod still uses its node");
    assert!(fresh.has_node(&solo.uid));
    assert!(!fresh.has_node(&p.uid));
}

#[test]
fn a_rebuilt_table_forgets_a_binding_muster_made_but_the_watch_has_not_shown() {
    let mut w = World::new(&[node("n1", 1000)]);
    let p = pod("p").gang("g", 2).build();
    let q = pod("q").gang("g", 2).build();
    w.add(&[&p, &q]);
    wait_message(&w.bind(&p, "n1"));
    assert_eq!(names(&w.bind(&q, "n1")).len(), 2);
    assert!(
        w.table.has_node(&p.uid),
        "assumed while its binding is in flight"
    );

    let fresh = w.table.rebuilt();
    assert!(!fresh.has_node(&p.uid) && !fresh.has_node(&q.uid));
    assert_eq!(fresh.ledger.get("n1").unwrap().used().cpu_milli, 0);
}

/// DynamicResources after a take-over: the DRA watches keep running and do not list again,
/// so the rebuilt table keeps the slices, classes and claims they delivered; without them
/// every gang with claims would fit nowhere on the new leader, holding nothing until each
/// object happened to change.
#[test]
fn a_rebuilt_table_keeps_the_dra_objects() {
    let mut w = World::new(&[node("n1", 4000), node("n2", 4000)]);
    let (p, q) = crate::model::tests::dra_gang(&mut w.table, &["n1", "n2"]);
    w.add(&[&p, &q]);
    assert_eq!(w.filter(&p).0.len(), 1, "one member per node");

    w.table = w.table.rebuilt();
    let (ok, reasons) = w.filter(&p);
    assert_eq!(ok.len(), 1, "{reasons:?}");
}
