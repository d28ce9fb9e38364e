//! The bindings' side of never-half: room re-checked at quorum, and a binding refused for good.

use super::*;

fn bound(p: &PodInfo, node: &str) -> PodInfo {
    let mut p = p.clone();
    p.node_name = Some(node.into());
    p
}

/// Nodes `a` and `b` of 1 CPU, a gang `g` of two 600m members; m0 seated on `a`.
fn gang_of_two_with_m0_seated_on_a() -> (World, Vec<PodInfo>) {
    let mut w = World::new(&[node("a", 1000), node("b", 1000)]);
    let ms: Vec<PodInfo> = (0..2)
        .map(|i| pod(&format!("m{i}")).cpu(600).gang("g", 2).build())
        .collect();
    w.add(&[&ms[0], &ms[1]]);
    wait_message(&w.bind(&ms[0], "a"));
    (w, ms)
}

/// Finding 3: a pod landed on a seated node (a second scheduler, `spec.nodeName`) before the
/// quorum. Binding the member there anyway would be rejected by the kubelet: a partial gang.
#[test]
fn at_quorum_a_node_that_lost_room_is_rechecked_and_nothing_is_bound() {
    let (mut w, ms) = gang_of_two_with_m0_seated_on_a();
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

/// The room a seat lacks at quorum is used only by pods being deleted (a preemption's victims
/// that kube-scheduler's cache already shows gone while muster's watch still has them): the
/// gang keeps every seat and waits instead of giving the room up (kube-scheduler clears a
/// nomination whose binding failed, and a pod of lower priority would take the room the gang
/// preempted for). The first pod leaving the node wakes the gang's held calls; the next
/// decision binds the gang whole there.
#[test]
fn at_quorum_room_used_only_by_pods_being_deleted_is_waited_for_with_every_seat_kept() {
    let (mut w, ms) = gang_of_two_with_m0_seated_on_a();
    let victims: Vec<PodInfo> = (0..2)
        .map(|i| {
            pod(&format!("victim-{i}"))
                .cpu(500)
                .bound("a")
                .terminating()
                .build()
        })
        .collect();
    w.add(&[&victims[0], &victims[1]]);
    w.table.take_released();
    let d = w.bind(&ms[1], "b");
    assert_eq!(
        wait_message(&d),
        "gang ml/g: every member has a seat; waiting for 2 pods being deleted on node a to go, \
         to make room for the members seated there"
    );
    assert!(w.table.holds_seat(&ms[0].uid) && w.table.holds_seat(&ms[1].uid));
    assert_eq!(w.reserved("a"), 600, "the seat on a is kept");
    assert!(w.table.take_released().is_empty(), "no seat was given up");
    assert!(w.table.take_room_freed().is_empty());

    // One victim gone: the held calls decide again; the other still lacks room, so they wait.
    w.table.remove_pod(&victims[0].uid);
    assert_eq!(w.table.take_room_freed(), vec![GangKey::new("ml", "g")]);
    assert_eq!(
        wait_message(&w.bind(&ms[1], "b")),
        "gang ml/g: every member has a seat; waiting for 1 pod being deleted on node a to go, \
         to make room for the members seated there"
    );
    w.table.remove_pod(&victims[1].uid);
    assert_eq!(w.table.take_room_freed(), vec![GangKey::new("ml", "g")]);
    assert_eq!(names(&w.bind(&ms[1], "b")), vec!["m0@a", "m1@b"]);
}

/// Room a pod still running uses is not on its way: with one running and one being deleted,
/// the seats on the node are given up as before.
#[test]
fn at_quorum_room_used_by_a_running_pod_is_not_waited_for() {
    let (mut w, ms) = gang_of_two_with_m0_seated_on_a();
    let running = pod("running").cpu(500).bound("a").build();
    let leaving = pod("leaving").cpu(300).bound("a").terminating().build();
    w.add(&[&running, &leaving]);
    let d = w.bind(&ms[1], "b");
    assert!(
        wait_message(&d).contains("no longer has room"),
        "{}",
        wait_message(&d)
    );
    assert!(!w.table.holds_seat(&ms[0].uid), "m0 is planned again");
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
