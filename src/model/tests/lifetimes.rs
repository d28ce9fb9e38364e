use std::time::Duration;

use super::*;
use crate::model::inputs::membership::GANG_TIMEOUT;

// ---------------------------------------------------------------- lifetimes

#[test]
fn a_gang_that_misses_its_timeout_releases_every_seat_and_backs_off() {
    let mut w = World::new(&[node("n1", 1000)]);
    let p = pod("p")
        .gang("g", 2)
        .annotation(GANG_TIMEOUT, "20s")
        .build();
    let q = pod("q").gang("g", 2).build();
    w.add(&[&p, &q]);
    wait_message(&w.bind(&p, "n1"));
    assert_eq!(w.reserved("n1"), 200);
    w.advance(Duration::from_secs(19));
    assert!(
        w.table.expire(w.now).is_empty(),
        "not before the per-gang timeout"
    );
    w.advance(Duration::from_secs(1));
    assert_eq!(w.table.expire(w.now), vec![GangKey::new("ml", "g")]);
    assert_eq!(w.reserved("n1"), 0);
    assert_eq!(w.state("g"), "backoff");
    let timed_out: Vec<_> = w
        .table
        .take_notices()
        .into_iter()
        .filter(|n| n.kind == NoticeKind::TimedOut)
        .collect();
    assert_eq!(timed_out.len(), 2);
    assert!(timed_out[0]
        .message
        .starts_with("gang ml/g did not reach quorum within 20s: 1/2"));
    let (ok, reasons) = w.filter(&q);
    assert!(ok.is_empty());
    assert_eq!(
        reasons,
        vec!["gang ml/g: backing off for 10s after its quorum timeout"]
    );
    w.advance(ModelConfig::default().backoff);
    assert_eq!(w.filter(&q).0, vec!["n1"]);
    assert!(
        w.table.expire(w.now).is_empty(),
        "a gang times out once, not again"
    );
}

#[test]
fn deleting_a_member_or_a_node_frees_seats_at_once() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let ps: Vec<PodInfo> = (0..3)
        .map(|i| pod(&format!("p{i}")).gang("g", 3).build())
        .collect();
    w.add(&ps.iter().collect::<Vec<_>>());
    wait_message(&w.bind(&ps[0], "n2"));
    assert_eq!(w.reserved("n1") + w.reserved("n2"), 300);
    w.table.remove_pod(&ps[1].uid);
    assert_eq!(w.reserved("n1") + w.reserved("n2"), 200);
    w.table.remove_node("n2");
    assert_eq!(w.reserved("n1"), 100, "only the seat on n1 is left");
    assert_eq!(w.all_nodes(), vec!["n1"]);
}

#[test]
fn restart_rebuilds_from_bound_members() {
    // After a restart the table is new; one member was bound before the crash.
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let p0 = pod("p0").gang("g", 3).bound("n1").build();
    let p1 = pod("p1").gang("g", 3).build();
    let p2 = pod("p2").gang("g", 3).build();
    w.add(&[&p0, &p1, &p2]);
    assert_eq!(w.table.ledger.get("n1").unwrap().used().cpu_milli, 100);
    // One node offered: the tightest fit, next to the bound member.
    assert_eq!(w.filter(&p1).0, vec!["n1"]);
    assert_eq!(
        wait_message(&w.bind(&p1, "n1")),
        "gang ml/g waiting for quorum: 2/3 members have nodes"
    );
    let d = w.bind(&p2, "n2");
    assert_eq!(names(&d), vec!["p1@n1", "p2@n2"]);
}

#[test]
fn pods_bound_to_a_node_seen_later_still_count() {
    let mut w = World::new(&[]);
    let p = pod("p").cpu(800).bound("late").build();
    w.add(&[&p]);
    w.table.apply_node(node("late", 1000));
    let q = pod("q").cpu(300).build();
    w.add(&[&q]);
    assert!(w.filter(&q).0.is_empty());
}

#[test]
fn terminal_pods_free_their_requests() {
    let mut w = World::new(&[node("n1", 1000)]);
    let mut p = pod("done").cpu(1000).bound("n1").build();
    w.add(&[&p]);
    let q = pod("q").cpu(500).build();
    w.add(&[&q]);
    assert!(w.filter(&q).0.is_empty());
    p.terminal = true;
    w.add(&[&p]);
    assert_eq!(w.filter(&q).0, vec!["n1"]);
}

#[test]
fn members_that_disagree_on_min_available_use_the_largest_and_say_so() {
    let mut w = World::new(&[node("n1", 1000)]);
    let p = pod("p").gang("g", 2).build();
    let q = pod("q").gang("g", 3).build();
    w.add(&[&p, &q]);
    let notices = w.table.take_notices();
    assert_eq!(notices.len(), 2);
    assert_eq!(notices[0].kind, NoticeKind::QuorumConflict);
    assert_eq!(
        notices[0].message,
        "members of gang ml/g disagree on minAvailable (2, 3); using the largest, 3"
    );
    w.table.take_notices();
    assert_eq!(w.filter(&p).0, vec!["n1"]);
    assert_eq!(
        wait_message(&w.bind(&p, "n1")),
        "gang ml/g waiting for quorum: 1/3 members have nodes; \
         2 of 3 members exist, the rest are not created yet"
    );
    // Reported once, not on every update.
    w.add(&[&p]);
    assert!(w.table.take_notices().is_empty());
}

#[test]
fn prioritize_prefers_the_seat_then_the_gang_then_tight_packing() {
    let mut w = World::new(&[node("empty", 4000), node("busy", 4000), node("seat", 4000)]);
    let filler = pod("filler").cpu(3000).bound("busy").build();
    let ps: Vec<PodInfo> = (0..3)
        .map(|i| pod(&format!("p{i}")).gang("g", 3).build())
        .collect();
    w.add(&[&filler, &ps[0], &ps[1], &ps[2]]);
    wait_message(&w.bind(&ps[0], "seat"));
    let plan_node = w.table.gangs[&GangKey::new("ml", "g")]
        .seat_of(&ps[1].uid)
        .unwrap()
        .node
        .to_string();
    let scores = w.table.prioritize(&ps[1], &["empty", "busy", "seat"]);
    let score_of = |n: &str| {
        scores[["empty", "busy", "seat"]
            .iter()
            .position(|x| *x == n)
            .unwrap()]
    };
    assert_eq!(score_of(&plan_node), 10, "its planned seat: {scores:?}");
    let plain = pod("plain").build();
    let s = w.table.prioritize(&plain, &["empty", "busy"]);
    assert!(s[1] > s[0], "plain pods pack onto the busier node: {s:?}");
    assert_eq!(w.table.prioritize(&plain, &["nope"]), vec![0]);
    let _ = w.t0;
}

#[test]
fn the_quorum_follows_the_members_as_they_change_and_leave() {
    let mut w = World::new(&[node("n1", 1000)]);
    let p = pod("p").gang("g", 2).build();
    let q = pod("q").gang("g", 3).build();
    w.add(&[&p, &q]);
    let quorum = |w: &World| w.table.views(w.now)[0].quorum;
    assert_eq!(quorum(&w), 3);
    w.table.remove_pod(&q.uid);
    assert_eq!(quorum(&w), 2, "the member that asked for 3 is gone");
    w.add(&[&pod("p").gang("g", 4).build()]);
    assert_eq!(quorum(&w), 4, "p now asks for 4");
    w.add(&[&pod("p").annotation("muster.dev/group", "g").build()]);
    assert_eq!(quorum(&w), 1, "no quorum key: every member that exists");
}
