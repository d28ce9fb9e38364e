//! The bindings' side of never-half: room re-checked at quorum, and a binding refused for good.

use super::*;

fn bound(p: &PodInfo, node: &str) -> PodInfo {
    let mut p = p.clone();
    p.node_name = Some(node.into());
    p
}

/// Finding 3: a pod landed on a seated node (a second scheduler, `spec.nodeName`) before the
/// quorum. Binding the member there anyway would be rejected by the kubelet: a partial gang.
#[test]
fn at_quorum_a_node_that_lost_room_is_rechecked_and_nothing_is_bound() {
    let mut w = World::new(&[node("a", 1000), node("b", 1000)]);
    let ms: Vec<PodInfo> = (0..2)
        .map(|i| pod(&format!("m{i}")).cpu(600).gang("g", 2).build())
        .collect();
    w.add(&[&ms[0], &ms[1]]);
    wait_message(&w.bind(&ms[0], "a"));
    let intruder = pod("intruder").cpu(600).bound("a").build();
    w.add(&[&intruder]);
    let d = w.bind(&ms[1], "b");
    assert_eq!(
        wait_message(&d),
        "gang ml/g: node a no longer has room for the members seated there \
         (insufficient cpu: requested 600m, free 400m); nothing was bound, those members are \
         planned again"
    );
    assert!(!w.table.has_node(&ms[0].uid) && !w.table.has_node(&ms[1].uid));
    assert!(!w.table.holds_seat(&ms[0].uid), "m0 is planned again");
    assert!(w.table.holds_seat(&ms[1].uid), "m1 keeps its seat on b");
    assert_eq!(w.reserved("a"), 0);
    assert_eq!(w.table.take_released(), vec![GangKey::new("ml", "g")]);
}

/// Finding 2: one binding at quorum refused for good after the others succeeded.
#[test]
fn a_binding_refused_for_good_keeps_the_members_room_and_raises_a_warning() {
    let mut w = World::new(&[node("a", 1000), node("b", 1000)]);
    let ms: Vec<PodInfo> = (0..2)
        .map(|i| pod(&format!("m{i}")).cpu(600).gang("g", 2).build())
        .collect();
    w.add(&[&ms[0], &ms[1]]);
    wait_message(&w.bind(&ms[0], "a"));
    assert_eq!(names(&w.bind(&ms[1], "b")), vec!["m0@a", "m1@b"]);
    w.add(&[&bound(&ms[1], "b")]);
    w.table.take_notices();
    let m0 = PodRef::of(&ms[0]);
    w.table.bind_finished(
        &m0,
        &"a".into(),
        Err("etcdserver: request timed out".into()),
        w.now,
    );
    let notices = w.table.take_notices();
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].kind, NoticeKind::BindFailed);
    assert_eq!(
        notices[0].message,
        "gang ml/g: binding member ml/m0 to node a failed for good: etcdserver: request timed \
         out; 1/2 members have nodes; its room on a is held until the gang's timeout while \
         kube-scheduler retries it"
    );
    assert!(w.table.holds_seat(&ms[0].uid));
    assert_eq!(w.reserved("a"), 600);
    assert_eq!(w.state("g"), "admitted", "below quorum: gated again");
    let plain = pod("plain").cpu(500).build();
    assert!(w.filter(&plain).0.is_empty(), "m0's room is not free");
    assert_eq!(w.filter(&ms[0]).0, vec!["a"]);
    assert_eq!(names(&w.bind(&ms[0], "a")), vec!["m0@a"]);
}
