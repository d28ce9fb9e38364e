//! A gang found partly bound when muster starts deciding (killed, or its Lease lost, in the
//! middle of a gang's bindings) is finished first, or its bound part is reported and evicted:
//! never left half running silently (never-half, evict-for-whole).

use super::*;
use crate::model::PartlyBoundOutcome;

/// The table a restarted muster builds from the watches: `bound` members of gang `g`
/// (quorum 3, 500m each) bound as named, the others pending; two nodes of 1 CPU.
fn restarted(bound: &[(&str, &str)], pending: &[&str], mode: Option<&str>) -> World {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let member = |name: &str| {
        let b = pod(name).cpu(500).gang("g", 3);
        match mode {
            Some(m) => b.annotation("muster.dev/disruption", m),
            None => b,
        }
    };
    for (name, n) in bound {
        w.add(&[&member(name).bound(n).build()]);
    }
    for name in pending {
        w.add(&[&member(name).build()]);
    }
    w
}

fn member_info(w: &World, name: &str) -> PodInfo {
    w.table
        .pods
        .uids()
        .filter_map(|u| w.table.pods.get(u))
        .find(|p| &*p.info.name == name)
        .map(|p| p.info.clone())
        .expect("member exists")
}

#[test]
fn the_rest_of_a_partly_bound_gang_gets_room_before_anything_else_and_is_bound_whole() {
    let mut w = restarted(&[("g0", "n1"), ("g1", "n1")], &["g2"], None);
    let found = w.table.repair_partly_bound(w.now);
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].bound, found[0].quorum), (2, 3));
    let PartlyBoundOutcome::Finishing { seats } = &found[0].outcome else {
        panic!(
            "expected the gang to be finished, got {:?}",
            found[0].outcome
        );
    };
    assert_eq!(seats.len(), 1);
    assert_eq!((&*seats[0].0.name, &*seats[0].1), ("g2", "n2"));
    assert_eq!(w.reserved("n2"), 500, "g2's room is held");
    assert_eq!(w.state("g"), "admitted");
    let notices = w.table.take_notices();
    assert!(
        notices
            .iter()
            .any(|n| n.kind == NoticeKind::Retry && &*n.pod.name == "g2"),
        "g2 is asked to retry now: {notices:?}"
    );
    assert_eq!(
        notices
            .iter()
            .filter(|n| n.kind == NoticeKind::Waiting)
            .count(),
        3,
        "every member is told"
    );
    assert!(notices.iter().any(|n| n.message
        == "gang ml/g was found partly bound when muster started deciding (2 of 3 members \
            bound): room is held for the rest before anything else is decided (g2 on n2); they \
            are bound as kube-scheduler tries them again"));
    let view = w.table.views(w.now);
    assert!(view[0].partly_bound.is_some(), "/gangs shows it");

    // A plain pod that would take the room is refused it (ahead of every other decision): n2
    // has 1000m, 500m of it held for g2.
    let plain = pod("plain").cpu(600).build();
    assert!(w.filter(&plain).0.is_empty(), "g2's room is not free");
    // g2 is offered its seat and bound: the gang is whole.
    let g2 = member_info(&w, "g2");
    assert_eq!(w.filter(&g2).0, vec!["n2"]);
    let d = w.bind(&g2, "n2");
    assert_eq!(names(&d), vec!["g2@n2"]);
    w.confirm(&d);
    assert_eq!(w.state("g"), "placed");
    assert!(w.table.views(w.now)[0].partly_bound.is_none());
    assert!(w.table.repair_partly_bound(w.now).is_empty());
}

#[test]
fn a_partly_bound_gang_whose_room_is_gone_is_reported_and_its_bound_members_evicted() {
    let mut w = restarted(&[("g0", "n1"), ("g1", "n1")], &["g2"], None);
    // The room g2 needed was taken while muster was away.
    w.add(&[&pod("squatter").cpu(600).bound("n2").build()]);
    let found = w.table.repair_partly_bound(w.now);
    assert_eq!(found.len(), 1);
    let PartlyBoundOutcome::Evicting { members, why } = &found[0].outcome else {
        panic!("expected eviction, got {:?}", found[0].outcome);
    };
    let evicted: Vec<&str> = members.iter().map(|p| &*p.name).collect();
    assert_eq!(evicted, vec!["g0", "g1"]);
    assert_eq!(why, "gang ml/g: 2 of 3 members fit");
    let disruptions = w.table.take_disruptions();
    assert_eq!(disruptions.len(), 1, "handed to the evictor");
    assert_eq!(disruptions[0].others, *members);
    let notices = w.table.take_notices();
    let warned: Vec<&str> = notices
        .iter()
        .filter(|n| n.kind == NoticeKind::PartlyBound)
        .map(|n| &*n.pod.name)
        .collect();
    assert_eq!(warned.len(), 3, "every member hears why: {notices:?}");
    assert_eq!(
        notices[0].message,
        "gang ml/g is partly bound (2 of 3 members bound) and the rest cannot be placed: gang \
         ml/g: 2 of 3 members fit; its bound members are evicted so that the gang can start \
         again whole (disruption mode gang)"
    );
    assert_eq!(NoticeKind::PartlyBound.reason(), "GangPartlyBound");
    assert!(NoticeKind::PartlyBound.is_warning());
    assert_eq!(w.reserved("n1") + w.reserved("n2"), 0, "it holds nothing");
    assert!(w.table.views(w.now)[0].partly_bound.is_some());
}

#[test]
fn in_disruption_mode_pod_a_stuck_partly_bound_gang_is_reported_not_evicted() {
    let mut w = restarted(&[("g0", "n1"), ("g1", "n1")], &["g2"], Some("pod"));
    w.add(&[&pod("squatter").cpu(600).bound("n2").build()]);
    let found = w.table.repair_partly_bound(w.now);
    assert!(matches!(
        found[0].outcome,
        PartlyBoundOutcome::Reported { .. }
    ));
    assert!(w.table.take_disruptions().is_empty(), "nothing evicted");
    assert!(w
        .table
        .take_notices()
        .iter()
        .any(|n| n.kind == NoticeKind::PartlyBound && n.message.contains("keep running")));
}

#[test]
fn only_gangs_partly_bound_with_every_member_alive_and_the_rest_pending_are_repaired() {
    // Nothing bound: an ordinary waiting gang.
    let mut w = restarted(&[], &["g0", "g1", "g2"], None);
    assert!(w.table.repair_partly_bound(w.now).is_empty());
    // Whole.
    let mut w = restarted(&[("g0", "n1"), ("g1", "n1"), ("g2", "n2")], &[], None);
    assert!(w.table.repair_partly_bound(w.now).is_empty());
    // A member being deleted: the gang lost a member, which is not this case.
    let mut w = restarted(&[("g0", "n1"), ("g1", "n1")], &[], None);
    let mut gone = pod("g2").cpu(500).gang("g", 3).build();
    gone.terminating = true;
    w.add(&[&gone]);
    assert!(w.table.repair_partly_bound(w.now).is_empty());
    assert!(w.table.take_disruptions().is_empty());
    // Members missing (a controller still creating them): not this case either.
    let mut w = restarted(&[("g0", "n1")], &["g1"], None);
    assert!(w.table.repair_partly_bound(w.now).is_empty());
    assert_eq!(w.reserved("n1") + w.reserved("n2"), 0);
}

/// muster killed between two bindings of one gang, as the table shows it after the restart:
/// the decision bound three members, the watch shows two of them bound.
#[test]
fn a_gang_cut_off_mid_binding_is_finished_from_the_rebuilt_table() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let ms: Vec<PodInfo> = (0..3)
        .map(|i| pod(&format!("m{i}")).cpu(500).gang("g", 3).build())
        .collect();
    w.add(&[&ms[0], &ms[1], &ms[2]]);
    wait_message(&w.bind(&ms[0], "n1"));
    wait_message(&w.bind(&ms[1], "n1"));
    let d = w.bind(&ms[2], "n2");
    let BindDecision::BindGang { members, .. } = &d else {
        panic!("expected the gang's bindings, got {d:?}");
    };
    // Only the first two bindings reached the API server.
    for (p, n) in members.iter().take(2) {
        let mut info = w.table.pods.get(&p.uid).unwrap().info.clone();
        info.node_name = Some(n.clone());
        w.table.apply_pod(info);
    }
    let mut fresh = World {
        table: w.table.rebuilt(),
        t0: w.t0,
        now: w.now,
    };
    assert!(!fresh.table.has_node(&ms[2].uid));
    let found = fresh.table.repair_partly_bound(fresh.now);
    assert!(matches!(
        found[0].outcome,
        PartlyBoundOutcome::Finishing { .. }
    ));
    assert_eq!(fresh.filter(&ms[2]).0, vec!["n2"]);
    assert_eq!(names(&fresh.bind(&ms[2], "n2")), vec!["m2@n2"]);
}

/// The room held for the rest ends with the gang's timeout; a gang still partly bound then is
/// not left half running silently.
#[test]
fn a_partly_bound_gang_whose_rest_never_comes_is_evicted_at_its_timeout() {
    let mut w = restarted(&[("g0", "n1"), ("g1", "n1")], &["g2"], None);
    w.table.repair_partly_bound(w.now);
    assert_eq!(w.table.take_partly_bound().len(), 1);
    w.table.take_notices();
    w.advance(ModelConfig::default().default_timeout + Duration::from_secs(1));
    let expired = w.table.expire(w.now);
    assert_eq!(expired, vec![GangKey::new("ml", "g")]);
    let after = w.table.take_partly_bound();
    assert_eq!(after.len(), 1);
    let PartlyBoundOutcome::Evicting { why, .. } = &after[0].outcome else {
        panic!("expected eviction, got {:?}", after[0].outcome);
    };
    assert_eq!(
        why,
        "its remaining members were not bound within its timeout of 60s"
    );
    assert_eq!(w.table.take_disruptions().len(), 1);
    assert!(w
        .table
        .take_notices()
        .iter()
        .any(|n| n.kind == NoticeKind::PartlyBound));
}

/// An ordinary admitted gang timing out is not treated as partly bound.
#[test]
fn an_ordinary_gang_timing_out_is_not_evicted() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let ms: Vec<PodInfo> = (0..2)
        .map(|i| pod(&format!("m{i}")).cpu(500).gang("g", 2).build())
        .collect();
    w.add(&[&ms[0], &ms[1]]);
    wait_message(&w.bind(&ms[0], "n1"));
    w.advance(ModelConfig::default().default_timeout + Duration::from_secs(1));
    assert_eq!(w.table.expire(w.now).len(), 1);
    assert!(w.table.take_partly_bound().is_empty());
    assert!(w.table.take_disruptions().is_empty());
}

/// The table a restarted muster builds: g0 and g1 of gang `g` (quorum 3, 500m, created at
/// 50 s) bound to n1 by bindings made at `bound_at`, the `pending` members created at the
/// times given, and n2's room taken by a pod bound while muster was away.
fn restarted_with_times(bound_at: i64, pending: &[(&str, i64)]) -> World {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let member = |name: &str, created: i64| pod(name).cpu(500).gang("g", 3).created(created);
    for name in ["g0", "g1"] {
        let p = member(name, 50).bound("n1").bound_at(bound_at).build();
        w.add(&[&p]);
    }
    for (name, created) in pending {
        w.add(&[&member(name, *created).build()]);
    }
    w.add(&[&pod("squatter").cpu(600).bound("n2").build()]);
    w
}

#[test]
fn a_replacement_created_after_the_bound_members_were_bound_leaves_the_gang_waiting_not_evicted() {
    // g2 was deleted while muster was away (gone from the cluster) and g3 replaces it, created
    // after g0's and g1's bindings: no fan-out was cut, the gang lost a member after it ran.
    let mut w = restarted_with_times(100, &[("g3", 200)]);
    let found = w.table.repair_partly_bound(w.now);
    assert!(found.is_empty(), "not repaired: {found:?}");
    assert!(w.table.take_disruptions().is_empty(), "nothing evicted");
    assert!(
        w.table
            .take_notices()
            .iter()
            .all(|n| n.kind != NoticeKind::PartlyBound),
        "no GangPartlyBound"
    );
    assert!(w.table.views(w.now)[0].partly_bound.is_none());
    // The replacement waits as a running muster would have it wait: no room, no node.
    let g3 = member_info(&w, "g3");
    assert!(w.filter(&g3).0.is_empty(), "g3 does not fit");
    assert!(
        w.table.take_disruptions().is_empty(),
        "still nothing evicted"
    );
}

#[test]
fn members_that_existed_at_the_bindings_make_a_cut_fan_out_and_the_same_second_counts_as_one() {
    // (pending members and their creation times, bindings at 100 s): repaired (and, with the
    // room gone, evicted) when the members there at the bindings complete the quorum.
    let cases: [(&[(&str, i64)], bool); 4] = [
        // A fan-out cut before g2's binding.
        (&[("g2", 50)], true),
        // Ambiguous: created in the same second as the bindings, counted as cut mid-binding.
        (&[("g2", 100)], true),
        // The cut fan-out's g2, and a later member beyond it: still a cut fan-out.
        (&[("g2", 50), ("g3", 200)], true),
        // Only a replacement.
        (&[("g3", 101)], false),
    ];
    for (pending, repaired) in cases {
        let mut w = restarted_with_times(100, pending);
        let found = w.table.repair_partly_bound(w.now);
        assert_eq!(found.len(), usize::from(repaired), "{pending:?}: {found:?}");
        assert_eq!(
            w.table.take_disruptions().len(),
            usize::from(repaired),
            "{pending:?}: evicted"
        );
    }
    // Without the bindings' times (a member created with spec.nodeName), as before: repaired.
    let mut w = restarted(&[("g0", "n1"), ("g1", "n1")], &["g3"], None);
    w.add(&[&pod("squatter").cpu(600).bound("n2").build()]);
    assert_eq!(w.table.repair_partly_bound(w.now).len(), 1);
}

/// The room held for the rest after the repair is taken by a pod muster did not place (in
/// gang-members mode kube-scheduler binds plain pods without muster, and g2's seat was not yet
/// its nomination; in either mode a `spec.nodeName` pod): kube-scheduler finds no node for g2
/// and never asks muster again, so the gang is given up at the next tick, not at its timeout.
#[test]
fn a_partly_bound_gang_whose_held_room_a_pod_takes_after_the_repair_is_evicted_at_the_next_tick() {
    let mut w = restarted(&[("g0", "n1"), ("g1", "n1")], &["g2"], None);
    let found = w.table.repair_partly_bound(w.now);
    assert!(matches!(
        found[0].outcome,
        PartlyBoundOutcome::Finishing { .. }
    ));
    assert_eq!(w.table.take_partly_bound().len(), 1);
    w.table.take_notices();
    assert_eq!(w.reserved("n2"), 500, "g2's room is held");
    // Bound while the seat was held: n2 is over-committed in muster's books.
    w.add(&[&pod("plain").cpu(600).bound("n2").build()]);
    w.advance(Duration::from_secs(1));
    assert!(w.table.expire(w.now).is_empty(), "no timeout");
    let after = w.table.take_partly_bound();
    assert_eq!(after.len(), 1, "decided again at once: {after:?}");
    let PartlyBoundOutcome::Evicting { members, why } = &after[0].outcome else {
        panic!("expected eviction, got {:?}", after[0].outcome);
    };
    let evicted: Vec<&str> = members.iter().map(|p| &*p.name).collect();
    assert_eq!(evicted, vec!["g0", "g1"]);
    assert_eq!(why, "gang ml/g: 2 of 3 members fit");
    assert_eq!(w.table.take_disruptions().len(), 1, "handed to the evictor");
    let warned = w
        .table
        .take_notices()
        .into_iter()
        .filter(|n| n.kind == NoticeKind::PartlyBound)
        .count();
    assert_eq!(warned, 3, "every member hears why");
    assert_eq!(w.reserved("n1") + w.reserved("n2"), 0, "it holds nothing");
    // Decided once: the next tick changes nothing.
    w.advance(Duration::from_secs(1));
    w.table.expire(w.now);
    assert!(w.table.take_partly_bound().is_empty());
    assert!(w.table.take_disruptions().is_empty());
}

/// The same with room elsewhere: the rest is held there instead, and asked to retry.
#[test]
fn a_partly_bound_gang_whose_held_room_is_taken_is_finished_elsewhere_when_there_is_room() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000), node("n3", 1000)]);
    for name in ["g0", "g1"] {
        w.add(&[&pod(name).cpu(500).gang("g", 3).bound("n1").build()]);
    }
    w.add(&[&pod("g2").cpu(500).gang("g", 3).build()]);
    let found = w.table.repair_partly_bound(w.now);
    let PartlyBoundOutcome::Finishing { seats } = &found[0].outcome else {
        panic!(
            "expected the gang to be finished, got {:?}",
            found[0].outcome
        );
    };
    let (held, other) = match &*seats[0].1 {
        "n2" => ("n2", "n3"),
        _ => ("n3", "n2"),
    };
    w.table.take_partly_bound();
    w.table.take_notices();
    w.add(&[&pod("plain").cpu(600).bound(held).build()]);
    w.table.expire(w.now);
    let after = w.table.take_partly_bound();
    let PartlyBoundOutcome::Finishing { seats } = &after[0].outcome else {
        panic!("expected the gang to be finished, got {after:?}");
    };
    assert_eq!((&*seats[0].0.name, &*seats[0].1), ("g2", other));
    assert_eq!((w.reserved(held), w.reserved(other)), (0, 500));
    assert!(w.table.take_disruptions().is_empty(), "nothing evicted");
    assert!(w
        .table
        .take_notices()
        .iter()
        .any(|n| n.kind == NoticeKind::Retry && &*n.pod.name == "g2"));
    let g2 = member_info(&w, "g2");
    assert_eq!(w.filter(&g2).0, vec![other]);
}

/// A pod that leaves room for the seat beside it changes nothing.
#[test]
fn a_pod_bound_beside_the_room_held_for_a_partly_bound_gang_changes_nothing() {
    let mut w = restarted(&[("g0", "n1"), ("g1", "n1")], &["g2"], None);
    w.table.repair_partly_bound(w.now);
    w.table.take_partly_bound();
    w.add(&[&pod("small").cpu(500).bound("n2").build()]);
    w.table.expire(w.now);
    assert!(w.table.take_partly_bound().is_empty());
    assert!(w.table.take_disruptions().is_empty());
    assert_eq!(w.reserved("n2"), 500);
    assert_eq!(w.state("g"), "admitted");
}
