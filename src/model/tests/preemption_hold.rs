//! The preemption hold: while a preempting gang's victims terminate, the room they free (the preemptor's
//! nominated node and the planned seats of its other members) is held for that gang, until it
//! binds, the preemptor is deleted or loses its nomination, or the gang times out.
//! Priorities: low 100, middle 1000, high 100000.

use super::*;

const LOW: i32 = 100;
const MIDDLE: i32 = 1000;
const HIGH: i32 = 100_000;

fn candidate(node: &str, victims: &[&PodInfo]) -> PreemptCandidate {
    PreemptCandidate {
        node: node.to_string(),
        victims: victims.iter().map(|p| p.uid.to_string()).collect(),
        pdb_violations: 0,
    }
}

/// A gang `pair` of two high-priority 1-CPU members.
fn high_pair() -> Vec<PodInfo> {
    (0..2)
        .map(|i| {
            pod(&format!("pair-{i}"))
                .cpu(1000)
                .priority(HIGH)
                .gang("pair", 2)
                .build()
        })
        .collect()
}

fn terminating(p: &PodInfo) -> PodInfo {
    PodInfo {
        terminating: true,
        ..p.clone()
    }
}

fn nominated(p: &PodInfo, node: Option<&str>) -> PodInfo {
    PodInfo {
        nominated_node: node.map(NodeName::from),
        ..p.clone()
    }
}

fn verdict(w: &mut World, p: &PodInfo, node: &str) -> NodeVerdict {
    w.table.filter(p, &[node], w.now).remove(0)
}

/// n1 runs a low-priority pod; n2 is free. A high-priority gang of two needs both nodes; a
/// plain pod of middle priority needs a whole node too.
struct Scene {
    w: World,
    low: PodInfo,
    pair: Vec<PodInfo>,
    middle: PodInfo,
}

fn scene() -> Scene {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let low = pod("low").cpu(1000).priority(LOW).bound("n1").build();
    let pair = high_pair();
    let middle = pod("middle").cpu(1000).priority(MIDDLE).build();
    w.add(&[&low, &pair[0], &pair[1], &middle]);
    Scene {
        w,
        low,
        pair,
        middle,
    }
}

/// pair-0 is tried first: only n2 passes kube-scheduler's filters, and muster refuses it (its
/// partner would have no node), so kube-scheduler preempts on n1; muster keeps that candidate.
/// Then kube-scheduler deletes the victim (it terminates for a while) and nominates n1.
fn preempt_and_nominate(s: &mut Scene) {
    let w = &mut s.w;
    assert!(matches!(
        verdict(w, &s.pair[0], "n2"),
        NodeVerdict::Unschedulable(_)
    ));
    let d = w.preempt(&s.pair[0], vec![candidate("n1", &[&s.low])]);
    assert_eq!(d.outcome, PreemptOutcome::Kept);
    assert_eq!(
        (w.reserved("n1"), w.reserved("n2")),
        (0, 0),
        "nothing held before kube-scheduler acts on the answer"
    );
    w.add(&[&terminating(&s.low), &nominated(&s.pair[0], Some("n1"))]);
    assert_eq!((w.reserved("n1"), w.reserved("n2")), (1000, 1000));
    assert!(w
        .table
        .take_notices()
        .iter()
        .any(|n| n.kind == NoticeKind::Waiting && n.message.contains("room held on n1")));
    let view = w.table.views(w.now).into_iter().find(|v| v.name == "pair");
    let reason = view.and_then(|v| v.waiting_reason).unwrap_or_default();
    assert!(
        reason.contains("room held on n1 (nominated), n2"),
        "{reason}"
    );
}

#[test]
fn the_room_a_preempting_gang_frees_is_held_until_the_gang_binds_together() {
    let mut s = scene();
    preempt_and_nominate(&mut s);
    let w = &mut s.w;
    // The middle pod passes kube-scheduler's filters on n2 (seats are muster's): refused.
    assert!(matches!(
        verdict(w, &s.middle, "n2"),
        NodeVerdict::Unschedulable(r) if r.contains("reserved for gangs")
    ));
    // pair-1 is offered its planned seat and waits there.
    assert_eq!(verdict(w, &s.pair[1], "n2"), NodeVerdict::Fits);
    wait_message(&w.bind(&s.pair[1], "n2"));
    // The victim is gone: pair-0 takes its nominated node and the gang binds together.
    w.table.remove_pod(&s.low.uid);
    assert_eq!(verdict(w, &s.pair[0], "n1"), NodeVerdict::Fits);
    let placed = w.bind(&s.pair[0], "n1");
    assert_eq!(names(&placed), ["pair-0@n1", "pair-1@n2"]);
    assert_eq!((w.reserved("n1"), w.reserved("n2")), (0, 0));
    assert!(w.table.gangs[&s.pair[0].gang().unwrap().gang]
        .preemption_hold()
        .is_none());
    // The refused pod is asked to retry now that the seats are gone.
    assert!(w
        .table
        .take_notices()
        .iter()
        .any(|n| n.kind == NoticeKind::Retry && &*n.pod.name == "middle"));
}

#[test]
fn a_hold_ends_when_the_preemptor_loses_its_nomination() {
    let mut s = scene();
    preempt_and_nominate(&mut s);
    let w = &mut s.w;
    assert!(matches!(
        verdict(w, &s.middle, "n2"),
        NodeVerdict::Unschedulable(_)
    ));
    w.add(&[&nominated(&s.pair[0], None)]);
    assert_eq!((w.reserved("n1"), w.reserved("n2")), (0, 0));
    assert_eq!(w.state("pair"), "waiting");
    assert!(w
        .table
        .take_notices()
        .iter()
        .any(|n| n.kind == NoticeKind::Retry && &*n.pod.name == "middle"));
}

#[test]
fn a_hold_ends_when_the_preemptor_is_deleted() {
    let mut s = scene();
    preempt_and_nominate(&mut s);
    s.w.table.remove_pod(&s.pair[0].uid);
    assert_eq!((s.w.reserved("n1"), s.w.reserved("n2")), (0, 0));
}

#[test]
fn a_hold_ends_with_the_gang_timeout() {
    let mut s = scene();
    preempt_and_nominate(&mut s);
    s.w.advance(Duration::from_secs(61));
    let expired = s.w.table.expire(s.w.now);
    assert_eq!(expired.len(), 1);
    assert_eq!((s.w.reserved("n1"), s.w.reserved("n2")), (0, 0));
    assert!(s.w.table.gangs[&expired[0]].preemption_hold().is_none());
}

#[test]
fn a_member_asking_to_bind_keeps_its_seat_when_its_nomination_is_cleared() {
    let mut s = scene();
    preempt_and_nominate(&mut s);
    let w = &mut s.w;
    w.table.remove_pod(&s.low.uid);
    wait_message(&w.bind(&s.pair[0], "n1"));
    // kube-scheduler clears the nomination of a pod whose bind call answered "waiting".
    w.add(&[&nominated(&s.pair[0], None)]);
    assert_eq!((w.reserved("n1"), w.reserved("n2")), (1000, 1000));
    let placed = w.bind(&s.pair[1], "n2");
    assert_eq!(names(&placed), ["pair-0@n1", "pair-1@n2"]);
}

#[test]
fn a_nomination_muster_planned_nothing_for_holds_nothing() {
    let mut s = scene();
    // Nominated without a preempt decision of muster's (or after its plans were forgotten).
    s.w.add(&[&nominated(&s.pair[0], Some("n1"))]);
    assert_eq!((s.w.reserved("n1"), s.w.reserved("n2")), (0, 0));

    let mut s = scene();
    let d = s.w.preempt(&s.pair[0], vec![candidate("n1", &[&s.low])]);
    assert_eq!(d.outcome, PreemptOutcome::Kept);
    s.w.advance(Duration::from_secs(11));
    s.w.table.expire(s.w.now);
    s.w.add(&[&nominated(&s.pair[0], Some("n1"))]);
    assert_eq!((s.w.reserved("n1"), s.w.reserved("n2")), (0, 0));
}

/// Both nodes run a low-priority pod. pair-0 preempts on n1; the plan puts pair-1 on n2, whose
/// pod pair-1 will have to evict in turn. That room is planned, not held (the pod still runs
/// there). Meanwhile the middle pod's own preemption would evict that pod for itself: muster
/// refuses it (the room is the gang's), and pair-1's is kept.
#[test]
fn no_other_pod_preempts_its_way_into_held_room() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let a = pod("a").cpu(1000).priority(LOW).bound("n1").build();
    let b = pod("b").cpu(1000).priority(LOW).bound("n2").build();
    let pair = high_pair();
    let middle = pod("middle").cpu(1000).priority(MIDDLE).build();
    w.add(&[&a, &b, &pair[0], &pair[1], &middle]);
    let d = w.preempt(
        &pair[0],
        vec![candidate("n1", &[&a]), candidate("n2", &[&b])],
    );
    assert_eq!(d.outcome, PreemptOutcome::Kept);
    w.add(&[&terminating(&a), &nominated(&pair[0], Some("n1"))]);
    assert_eq!((w.reserved("n1"), w.reserved("n2")), (1000, 0));

    let d = w.preempt(&middle, vec![candidate("n2", &[&b])]);
    assert_eq!(d.outcome, PreemptOutcome::Refused);
    assert!(matches!(
        &d.dropped[0].1,
        DropReason::HeldForGang { gang } if &*gang.name == "pair"
    ));
    let d = w.preempt(&pair[1], vec![candidate("n2", &[&b])]);
    assert_eq!(d.outcome, PreemptOutcome::Kept);
}

/// The decision was made before the watch delivered pair-1, so its plan held room for a member
/// not created yet. By the nomination pair-1 exists: the room is held for it, and so outlasts
/// the creation window (room for members not created yet does not).
#[test]
fn a_member_delivered_after_the_decision_takes_the_room_planned_for_it() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let low = pod("low").cpu(1000).priority(LOW).bound("n1").build();
    let pair = high_pair();
    w.add(&[&low, &pair[0]]);
    let d = w.preempt(&pair[0], vec![candidate("n1", &[&low])]);
    assert_eq!(d.outcome, PreemptOutcome::Kept);
    w.add(&[&pair[1]]);
    w.add(&[&terminating(&low), &nominated(&pair[0], Some("n1"))]);
    assert_eq!((w.reserved("n1"), w.reserved("n2")), (1000, 1000));
    w.advance(Duration::from_secs(6));
    w.table.expire(w.now);
    assert_eq!(
        w.reserved("n2"),
        1000,
        "held for pair-1, not for a member to come"
    );
    assert_eq!(verdict(&mut w, &pair[1], "n2"), NodeVerdict::Fits);
}

/// A gang of three: pair-0's preemption frees n1, the plan puts g-1 on n2 (whose pod it will
/// have to evict: planned, not held yet) and g-2 on n3 (free: held). kube-scheduler offers g-1
/// the only node with room, n3: g-1 takes g-2's seat, and g-2 inherits g-1's planned room on
/// n2: it may preempt there, and the room is its seat once free.
#[test]
fn a_member_taking_another_members_planned_seat_leaves_it_its_own() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000), node("n3", 1000)]);
    let a = pod("a").cpu(1000).priority(LOW).bound("n1").build();
    let b = pod("b").cpu(1000).priority(LOW).bound("n2").build();
    let g: Vec<PodInfo> = (0..3)
        .map(|i| {
            pod(&format!("g-{i}"))
                .cpu(1000)
                .priority(HIGH)
                .gang("g", 3)
                .build()
        })
        .collect();
    w.add(&[&a, &b, &g[0], &g[1], &g[2]]);
    let d = w.preempt(&g[0], vec![candidate("n1", &[&a])]);
    assert_eq!(d.outcome, PreemptOutcome::Kept);
    w.add(&[&terminating(&a), &nominated(&g[0], Some("n1"))]);
    let seat_of = |w: &World, p: &PodInfo| {
        let gang = &w.table.gangs[&p.gang().unwrap().gang];
        gang.seat_of(&p.uid).map(|s| s.node.to_string())
    };
    assert_eq!(seat_of(&w, &g[1]), None, "b still runs on n2");
    assert_eq!(seat_of(&w, &g[2]).as_deref(), Some("n3"));

    assert_eq!(verdict(&mut w, &g[1], "n3"), NodeVerdict::Fits);
    wait_message(&w.bind(&g[1], "n3"));
    assert_eq!(seat_of(&w, &g[1]).as_deref(), Some("n3"));
    assert_eq!(seat_of(&w, &g[2]), None);
    // g-2 preempts on n2, the room planned there (and nowhere else).
    let d = w.preempt(&g[2], vec![candidate("n2", &[&b])]);
    assert_eq!(d.outcome, PreemptOutcome::Kept);
    w.add(&[&terminating(&b), &nominated(&g[2], Some("n2"))]);
    assert_eq!(
        (w.reserved("n1"), w.reserved("n2"), w.reserved("n3")),
        (1000, 0, 1000),
        "nothing seated on top of b (no-overcommit)"
    );
    w.table.remove_pod(&b.uid);
    assert_eq!(seat_of(&w, &g[2]).as_deref(), Some("n2"));
    assert_eq!(
        (w.reserved("n1"), w.reserved("n2"), w.reserved("n3")),
        (1000, 1000, 1000)
    );
}

/// The departure from no-overcommit, closed: both nodes run a low-priority pod and pair-0
/// preempts on n1. The plan puts pair-1 on n2, where b still runs: the hold seats pair-0 on its
/// nominated node (on top of its terminating victim, as kube-scheduler counts a nominated pod)
/// but holds nothing on n2 (bound + seats within allocatable), and says the room there is
/// planned. pair-1 may still preempt b (its planned node, and no other: evict-for-whole); once
/// b is gone the room is its seat, and the gang binds whole (never-half).
#[test]
fn a_planned_seat_where_lower_priority_pods_still_run_is_held_only_once_they_go() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000), node("n3", 1000)]);
    let a = pod("a").cpu(1000).priority(LOW).bound("n1").build();
    let b = pod("b").cpu(1000).priority(LOW).bound("n2").build();
    let c = pod("c").cpu(1000).priority(LOW).bound("n3").build();
    let pair = high_pair();
    w.add(&[&a, &b, &c, &pair[0], &pair[1]]);
    let d = w.preempt(&pair[0], vec![candidate("n1", &[&a])]);
    assert_eq!(d.outcome, PreemptOutcome::Kept);
    w.add(&[&terminating(&a), &nominated(&pair[0], Some("n1"))]);
    assert_eq!(
        (w.reserved("n1"), w.reserved("n2"), w.reserved("n3")),
        (1000, 0, 0)
    );
    let told = w.table.take_notices();
    let message = told
        .iter()
        .find(|n| n.kind == NoticeKind::Waiting)
        .map(|n| n.message.clone())
        .unwrap_or_default();
    assert!(
        message.contains("room held on n1 (nominated)") && message.contains("room planned on n2"),
        "{message}"
    );
    let view = w.table.views(w.now).into_iter().find(|v| v.name == "pair");
    assert_eq!(
        view.map(|v| v.planned_room),
        Some(vec!["pair-1@n2".to_string()]),
        "/gangs shows the planned room"
    );
    // pair-1 preempts only on its planned node.
    let d = w.preempt(
        &pair[1],
        vec![candidate("n3", &[&c]), candidate("n2", &[&b])],
    );
    assert_eq!(d.outcome, PreemptOutcome::Trimmed);
    assert_eq!(d.kept.len(), 1);
    assert_eq!(d.kept[0].node, "n2");
    assert!(matches!(
        d.dropped.as_slice(),
        [(n, DropReason::SiblingPreempting)] if n == "n3"
    ));
    w.add(&[&terminating(&b), &nominated(&pair[1], Some("n2"))]);
    assert_eq!(
        w.reserved("n2"),
        0,
        "nothing on top of b while it terminates"
    );
    w.table.remove_pod(&b.uid);
    assert_eq!(w.reserved("n2"), 1000, "held for pair-1 once b is gone");
    let view = w.table.views(w.now).into_iter().find(|v| v.name == "pair");
    assert_eq!(view.map(|v| v.planned_room), Some(vec![]));
    assert_eq!(verdict(&mut w, &pair[1], "n2"), NodeVerdict::Fits);
    wait_message(&w.bind(&pair[1], "n2"));
    w.table.remove_pod(&a.uid);
    let placed = w.bind(&pair[0], "n1");
    assert_eq!(names(&placed), ["pair-0@n1", "pair-1@n2"]);
    assert_eq!(
        (w.reserved("n1"), w.reserved("n2"), w.reserved("n3")),
        (0, 0, 0)
    );
}

/// The room planned for pair-1, not created yet: pair-0's preemption frees n1 (a terminates,
/// pair-0 nominated there) and plans pair-1's room on n2, where b (low priority) still runs.
/// Returns the world, the pair and b.
fn room_planned_for_a_member_to_come() -> (World, Vec<PodInfo>, PodInfo) {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let a = pod("a").cpu(1000).priority(LOW).bound("n1").build();
    let b = pod("b").cpu(1000).priority(LOW).bound("n2").build();
    let pair = high_pair();
    w.add(&[&a, &b, &pair[0]]);
    let d = w.preempt(&pair[0], vec![candidate("n1", &[&a])]);
    assert_eq!(d.outcome, PreemptOutcome::Kept);
    w.add(&[&terminating(&a), &nominated(&pair[0], Some("n1"))]);
    assert_eq!(planned(&w), Some(vec!["(not created yet)@n2".to_string()]));
    (w, pair, b)
}

/// The room `pair` has planned (`/gangs`'s `plannedRoom`).
fn planned(w: &World) -> Option<Vec<String>> {
    w.table
        .views(w.now)
        .into_iter()
        .find(|v| v.name == "pair")
        .map(|v| v.planned_room)
}

/// Found by the model check: room a preemption planned for a member not created yet, where a
/// pod of lower priority still runs, went to the member that then arrived even though another
/// component's scheduling gate keeps it out of scheduling (holds-nothing: a gated member is
/// placed nowhere). It waits for a member that may be scheduled.
#[test]
fn planned_room_freed_does_not_go_to_a_gated_member() {
    let (mut w, pair, b) = room_planned_for_a_member_to_come();
    let mut gated = pair[1].clone();
    gated
        .rules
        .get_or_insert_with(Default::default)
        .scheduling_gates = vec!["example.com/quota".to_string()];
    w.add(&[&gated]);
    w.table.remove_pod(&b.uid);
    assert!(
        !w.table.holds_seat(&gated.uid),
        "no seat for a gated member"
    );
    assert_eq!(w.reserved("n2"), 0, "nothing held on n2 for it");
}

/// Room a preemption planned for a member not created yet goes, at the hold, to a member that
/// arrived since only where that member's rules pass the node (NodeAffinity's nodeSelector
/// here): otherwise the seat would hold room its member can never use (holds-nothing). Found
/// by the model check (seed c3c693ff…c05d).
#[test]
fn a_member_delivered_after_the_decision_takes_planned_room_only_where_its_rules_pass() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let low = pod("low").cpu(1000).priority(LOW).bound("n1").build();
    let pair = high_pair();
    let mut picky = pair[1].clone();
    picky.node_selector = vec![("pool".into(), "a".into())];
    w.add(&[&low, &pair[0]]);
    let d = w.preempt(&pair[0], vec![candidate("n1", &[&low])]);
    assert_eq!(d.outcome, PreemptOutcome::Kept);
    w.add(&[&picky]);
    w.add(&[&terminating(&low), &nominated(&pair[0], Some("n1"))]);
    assert!(
        !w.table.holds_seat(&picky.uid),
        "no seat on n2 for a member whose nodeSelector refuses n2"
    );
    w.table.remove_pod(&low.uid);
    assert!(
        !w.table.holds_seat(&picky.uid),
        "nor once room is freed elsewhere"
    );
}

/// Room planned for a member not created yet, freed later, is handed to an arrived member only
/// where that member's rules pass the node: a member whose nodeSelector refuses it leaves the
/// room planned for a member to come (holds-nothing), as the hold itself does above.
#[test]
fn planned_room_freed_does_not_go_to_a_member_its_node_refuses() {
    let (mut w, pair, b) = room_planned_for_a_member_to_come();
    let mut picky = pair[1].clone();
    picky.node_selector = vec![("pool".into(), "a".into())];
    w.add(&[&picky]);
    w.table.remove_pod(&b.uid);
    assert!(!w.table.holds_seat(&picky.uid), "no seat on n2 for it");
    assert_eq!(w.reserved("n2"), 0, "nothing held on n2 for it");
    assert_eq!(
        planned(&w),
        Some(vec!["(not created yet)@n2".to_string()]),
        "the room stays planned for a member to come"
    );
}

/// A seat holds its member's host port (no-overcommit, NodePorts): a preemption on that node
/// for a pod asking for the same port is refused, however much room its victims free, since
/// evicting them would let nothing run (evict-for-whole). Its other candidates are judged as
/// usual.
#[test]
fn a_preemption_onto_a_host_port_a_seat_holds_is_refused() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000), node("n3", 1000)]);
    // Gang `ported` waits for its second member (room for it is held on n3); its first holds
    // a seat on n1 with port 9090.
    let seated = pod("ported-0")
        .cpu(500)
        .gang("ported", 2)
        .host_port(9090)
        .build();
    let low = pod("low").cpu(500).priority(LOW).bound("n1").build();
    let other = pod("other").cpu(1000).priority(LOW).bound("n2").build();
    let web = pod("web").cpu(500).priority(HIGH).host_port(9090).build();
    w.add(&[&seated, &low, &other, &web]);
    wait_message(&w.bind(&seated, "n1"));
    assert_eq!(w.reserved("n1"), 500);
    let d = w.preempt(
        &web,
        vec![candidate("n1", &[&low]), candidate("n2", &[&other])],
    );
    let kept: Vec<&str> = d.kept.iter().map(|c| c.node.as_str()).collect();
    assert_eq!(kept, ["n2"], "{d:?}");
    assert_eq!(d.dropped.len(), 1, "{d:?}");
    let (node, why) = &d.dropped[0];
    assert_eq!(node, "n1");
    assert_eq!(
        why.explain(&web),
        "evicting there would not help: host port 9090/TCP is reserved here for gang \
         ml/ported (the seat of ported-0)"
    );
}

/// A gang `pair` of two high-priority members: pair-0 (1 CPU) preempts, pair-1 (500m) asks for
/// host port 8080.
fn pair_with_port() -> Vec<PodInfo> {
    vec![
        pod("pair-0")
            .cpu(1000)
            .priority(HIGH)
            .gang("pair", 2)
            .build(),
        pod("pair-1")
            .cpu(500)
            .priority(HIGH)
            .gang("pair", 2)
            .host_port(8080)
            .build(),
    ]
}

/// n1 (1 CPU) runs `low`; n2 has 2 CPUs. `low` is returned, not added yet.
fn low_on_n1_wide_n2() -> (World, PodInfo) {
    let w = World::new(&[node("n1", 1000), node("n2", 2000)]);
    (w, pod("low").cpu(1000).priority(LOW).bound("n1").build())
}

/// A low-priority 500m pod asking for host port 8080.
fn low_on_8080(name: &str) -> testkit::PodBuilder {
    pod(name).cpu(500).priority(LOW).host_port(8080)
}

/// Found by the model check: where the rest of a preempting gang goes, pods of lower priority
/// count as evictable, but seats of a lower-priority gang do not go with a preemption (their
/// room stays held, rule 2): their host ports stay held too. pair-1 fits n2 by room, but a seat
/// of the low gang there holds port 8080, and no other node takes it: the candidate is dropped
/// (evict-for-whole), not kept with pair-1 planned onto a port another seat holds.
#[test]
fn the_rest_of_a_preempting_gang_is_not_planned_onto_a_host_port_a_lower_gangs_seat_holds() {
    let (mut w, low) = low_on_n1_wide_n2();
    let seated = low_on_8080("lg-0").gang("lg", 2).build();
    let other = pod("lg-1").cpu(500).priority(LOW).gang("lg", 2).build();
    let pair = pair_with_port();
    w.add(&[&low, &seated, &other, &pair[0], &pair[1]]);
    wait_message(&w.bind(&seated, "n2"));
    assert_eq!(w.reserved("n2"), 1000, "gang lg holds half of n2");
    let d = w.preempt(&pair[0], vec![candidate("n1", &[&low])]);
    assert_eq!(d.outcome, PreemptOutcome::Refused, "{d:?}");
    assert!(
        matches!(
            d.dropped[0].1,
            DropReason::GangCannotFollow { fit: 1, quorum: 2 }
        ),
        "{d:?}"
    );
}

/// Found by the model check: the hold seats a member only where its room is free now, and a
/// host port a pod of lower priority still uses there is not free (NodePorts): pair-1's room
/// on n2, where `lowport` has port 8080, is planned, not held, and held once `lowport` is gone.
#[test]
fn the_hold_plans_a_member_whose_host_port_a_lower_pod_still_uses_and_seats_it_once_gone() {
    let (mut w, low) = low_on_n1_wide_n2();
    let lowport = low_on_8080("lowport").bound("n2").build();
    let pair = pair_with_port();
    w.add(&[&low, &lowport, &pair[0], &pair[1]]);
    let d = w.preempt(&pair[0], vec![candidate("n1", &[&low])]);
    assert_eq!(d.outcome, PreemptOutcome::Kept, "{d:?}");
    w.add(&[&terminating(&low), &nominated(&pair[0], Some("n1"))]);
    assert_eq!(w.reserved("n1"), 1000, "the preemptor's room is held");
    assert_eq!(w.reserved("n2"), 0, "port 8080 is lowport's still");
    assert_eq!(planned(&w), Some(vec!["pair-1@n2".to_string()]));
    w.table.remove_pod(&lowport.uid);
    assert_eq!(w.reserved("n2"), 500, "held once lowport is gone");
}

/// Found by the model check: room planned for a member with a device claim becomes its seat
/// once the pods there are gone only if no other seat there holds the devices it needs
/// (DynamicResources; no-overcommit). n1 has one node's worth of devices; `b` (a claim for
/// all of them) waits for `low` to go; meanwhile `c`, also with a claim, takes over the
/// preemptor's seat there. When `low` is gone, `b`'s room is not free: its devices are `c`'s.
#[test]
fn planned_room_whose_devices_another_seat_took_meanwhile_is_not_seated() {
    let mut w = World::new(&[node("n1", 1000)]);
    dra_devices(&mut w.table, &["n1"]);
    let low = pod("low").cpu(500).priority(LOW).bound("n1").build();
    let a = pod("a").cpu(300).priority(HIGH).gang("g", 2).build();
    let b = with_dra_claim(
        &mut w.table,
        pod("b").cpu(300).priority(HIGH).gang("g", 2).build(),
    );
    w.add(&[&low, &a, &b]);
    let d = w.preempt(&a, vec![candidate("n1", &[&low])]);
    assert_eq!(d.outcome, PreemptOutcome::Kept, "{d:?}");
    w.add(&[&terminating(&low), &nominated(&a, Some("n1"))]);
    assert_eq!(
        w.reserved("n1"),
        300,
        "a's room; b's is planned (low still runs)"
    );
    let c = with_dra_claim(
        &mut w.table,
        pod("c").cpu(300).priority(HIGH).gang("g", 2).build(),
    );
    w.add(&[&c]);
    wait_message(&w.bind(&c, "n1"));
    assert!(w.table.holds_seat(&c.uid), "c holds n1's devices");
    w.table.remove_pod(&low.uid);
    assert!(
        !w.table.holds_seat(&b.uid),
        "b's devices are c's: its room is not seated"
    );
    assert!(w.table.holds_seat(&c.uid));
}

/// pair-0 preempts on n1 (its victim `low`) and muster keeps the candidate; kube-scheduler
/// has not acted yet.
fn preempt_on_n1(s: &mut Scene) {
    let d = s.w.preempt(&s.pair[0], vec![candidate("n1", &[&s.low])]);
    assert_eq!(d.outcome, PreemptOutcome::Kept);
}

/// Found by the model check: the hold seated the preemptor on its nominated node without
/// looking at the node again; a node cordoned (or relabelled, tainted) since kube-scheduler's
/// dry run chose it takes no seat: kube-scheduler will not bind the preemptor there either,
/// and a seat would hold room nobody can use (holds-nothing).
#[test]
fn no_hold_on_a_nominated_node_that_refuses_the_preemptor_since_the_decision() {
    let mut s = scene();
    preempt_on_n1(&mut s);
    let w = &mut s.w;
    w.table
        .apply_node(testkit::node("n1").cpu(1000).unschedulable().build());
    w.add(&[&terminating(&s.low), &nominated(&s.pair[0], Some("n1"))]);
    assert_eq!((w.reserved("n1"), w.reserved("n2")), (0, 0), "nothing held");
    assert_ne!(w.state("pair"), "admitted");
}

/// Found by the model check: the hold seats the preemptor on top of its victims only while
/// they terminate. A nomination the watch delivers before (or without) kube-scheduler acting
/// on the plan — one left from an earlier preemption, seen again at a re-list — holds nothing,
/// which would over-commit n1 with `low` still running there (no-overcommit); once `low`
/// leaves (`victim_leaves`), the hold is taken.
fn the_hold_follows_its_victim(victim_leaves: impl FnOnce(&mut World, &PodInfo)) {
    let mut s = scene();
    preempt_on_n1(&mut s);
    let w = &mut s.w;
    w.add(&[&nominated(&s.pair[0], Some("n1"))]);
    assert_eq!(
        (w.reserved("n1"), w.reserved("n2")),
        (0, 0),
        "low still runs on n1: nothing held on top of it"
    );
    victim_leaves(w, &s.low);
    assert_eq!((w.reserved("n1"), w.reserved("n2")), (1000, 1000));
    assert_eq!(w.state("pair"), "admitted");
}

#[test]
fn the_hold_waits_for_its_victims_to_be_deleted_not_just_for_the_nomination() {
    the_hold_follows_its_victim(|w, low| w.add(&[&terminating(low)]));
}

/// Deleted at once (no grace: gone rather than terminating): the hold is taken when the room
/// is freed.
#[test]
fn the_hold_is_taken_when_a_victim_deleted_at_once_is_gone() {
    the_hold_follows_its_victim(|w, low| w.table.remove_pod(&low.uid));
}

/// kube-scheduler's cache can show a victim gone before muster's watch does: it then offers
/// the planned member the node its gang preempted for, and asks to bind it there. The three
/// nodes each run a low pod; pair-0 preempts `a` on n1, the plan puts pair-1 on n2 where `b`
/// runs, and pair-1 preempts `b`. While muster still sees `b` terminating, pair-1 is offered
/// n2 (refused, its nomination would be cleared: a preemption that finds no victim clears it,
/// and nothing else keeps the room from plain pods), its bind takes the room on top of `b`
/// (waiting for the quorum), the quorum waits for `b` to go instead of binding onto it
/// (no-overcommit), and the gang binds whole once it has gone (never-half). Before `b` is
/// being deleted its room is not offered (no-overcommit).
#[test]
fn planned_room_kube_scheduler_sees_free_before_muster_does_is_taken_and_bound_once_free() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000), node("n3", 1000)]);
    let a = pod("a").cpu(1000).priority(LOW).bound("n1").build();
    let b = pod("b").cpu(1000).priority(LOW).bound("n2").build();
    let c = pod("c").cpu(1000).priority(LOW).bound("n3").build();
    let middle = pod("middle").cpu(1000).priority(MIDDLE).build();
    let pair = high_pair();
    w.add(&[&a, &b, &c, &middle, &pair[0], &pair[1]]);
    let d = w.preempt(&pair[0], vec![candidate("n1", &[&a])]);
    assert_eq!(d.outcome, PreemptOutcome::Kept);
    w.add(&[&terminating(&a), &nominated(&pair[0], Some("n1"))]);
    assert!(
        matches!(
            verdict(&mut w, &pair[1], "n2"),
            NodeVerdict::Unschedulable(_)
        ),
        "b runs: its room is planned, not free"
    );
    let d = w.preempt(&pair[1], vec![candidate("n2", &[&b])]);
    assert_eq!(d.outcome, PreemptOutcome::Kept);
    w.add(&[&terminating(&b), &nominated(&pair[1], Some("n2"))]);
    assert_eq!(
        w.reserved("n2"),
        0,
        "nothing on top of b while it terminates"
    );
    // kube-scheduler's cache has b gone; muster's not yet.
    assert_eq!(verdict(&mut w, &pair[1], "n2"), NodeVerdict::Fits);
    wait_message(&w.bind(&pair[1], "n2"));
    assert_eq!(w.reserved("n2"), 1000, "pair-1's seat, on top of b");
    assert!(matches!(
        verdict(&mut w, &middle, "n2"),
        NodeVerdict::Unschedulable(_)
    ));
    // a is gone in both caches: pair-0 completes the quorum, which waits for b.
    w.table.remove_pod(&a.uid);
    let waiting = w.bind(&pair[0], "n1");
    assert!(
        wait_message(&waiting).contains("n2"),
        "waits for the pod leaving n2: {waiting:?}"
    );
    w.table.remove_pod(&b.uid);
    let placed = w.bind(&pair[0], "n1");
    assert_eq!(names(&placed), ["pair-0@n1", "pair-1@n2"]);
    assert_eq!(
        (w.reserved("n1"), w.reserved("n2"), w.reserved("n3")),
        (0, 0, 0)
    );
}
