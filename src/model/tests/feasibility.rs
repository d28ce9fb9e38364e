use std::time::Duration;

use super::*;

// ---------------------------------------------------------------- whole-gang feasibility

#[test]
fn feasibility_is_node_by_node_not_an_aggregate_sum() {
    // 3 nodes x 1000m = 3000m in total; two 1500m members need 3000m, but no node holds one.
    let mut w = World::new(&[node("a", 1000), node("b", 1000), node("c", 1000)]);
    let p = pod("p").cpu(1500).gang("g", 2).build();
    let q = pod("q").cpu(1500).gang("g", 2).build();
    w.add(&[&p, &q]);
    let (ok, reasons) = w.filter(&p);
    assert!(ok.is_empty());
    assert_eq!(reasons, vec!["gang ml/g: 0 of 2 members fit"]);
}

#[test]
fn members_not_created_yet_take_room_when_they_arrive() {
    let mut w = World::new(&[node("a", 10_000)]);
    let p = pod("p").gang("g", 3).build();
    let q = pod("q").gang("g", 3).build();
    w.add(&[&p, &q]);
    // The members that exist are simulated and seated; the bind waits for the third.
    assert_eq!(w.filter(&p).0, vec!["a"]);
    assert_eq!(
        wait_message(&w.bind(&p, "a")),
        "gang ml/g waiting for quorum: 1/3 members have nodes; \
         2 of 3 members exist, the rest are not created yet"
    );
    assert_eq!(
        w.reserved("a"),
        300,
        "p's seat, q's planned seat and one held for the member not created yet"
    );
    assert_eq!(w.filter(&q).0, vec!["a"]);
    assert_eq!(
        wait_message(&w.bind(&q, "a")),
        "gang ml/g waiting for quorum: 2/3 members have nodes; \
         2 of 3 members exist, the rest are not created yet"
    );
    let r = pod("r").gang("g", 3).build();
    w.add(&[&r]);
    assert_eq!(w.filter(&r).0, vec!["a"]);
    assert_eq!(names(&w.bind(&r, "a")), vec!["p@a", "q@a", "r@a"]);
    assert_eq!(w.reserved("a"), 0, "seats became bindings or were let go");
}

#[test]
fn a_gang_still_being_created_holds_room_for_its_whole_quorum() {
    // Room for three members; two gangs of three, each with one member created so far.
    let mut w = World::new(&[node("n1", 300)]);
    let a0 = pod("a0").gang("alpha", 3).created(1).build();
    let b0 = pod("b0").gang("beta", 3).created(2).build();
    w.add(&[&a0, &b0]);
    assert_eq!(w.filter(&a0).0, vec!["n1"]);
    wait_message(&w.bind(&a0, "n1"));
    assert_eq!(w.reserved("n1"), 300, "alpha holds room for all three");
    let (ok, reasons) = w.filter(&b0);
    assert!(ok.is_empty());
    assert_eq!(
        reasons,
        vec![
            "gang ml/beta: waiting for members: 1 of 3 exist, and room for 0 \
             if the rest ask as much as the largest"
        ]
    );
    let a1 = pod("a1").gang("alpha", 3).created(3).build();
    let a2 = pod("a2").gang("alpha", 3).created(4).build();
    w.add(&[&a1, &a2]);
    for p in [&a1, &a2] {
        assert_eq!(w.filter(p).0, vec!["n1"]);
    }
    wait_message(&w.bind(&a1, "n1"));
    assert_eq!(w.reserved("n1"), 300, "a1 took a seat held for it");
    assert_eq!(names(&w.bind(&a2, "n1")), vec!["a0@n1", "a1@n1", "a2@n1"]);
}

#[test]
fn a_guess_too_large_for_members_not_created_yet_only_delays_admission() {
    let mut w = World::new(&[node("n1", 1000)]);
    let big = pod("big").cpu(600).gang("g", 2).build();
    w.add(&[&big]);
    // Room for one 600m pod, not for two.
    assert_eq!(
        w.filter(&big).1,
        vec![
            "gang ml/g: waiting for members: 1 of 2 exist, and room for 1 \
              if the rest ask as much as the largest"
        ]
    );
    let small = pod("small").cpu(300).gang("g", 2).build();
    w.add(&[&small]);
    assert_eq!(w.filter(&big).0, vec!["n1"]);
    wait_message(&w.bind(&big, "n1"));
    assert_eq!(names(&w.bind(&small, "n1")), vec!["big@n1", "small@n1"]);
}

#[test]
fn a_member_below_quorum_is_offered_one_node_and_a_seated_member_its_seat() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000), node("n3", 1000)]);
    let p = pod("p").cpu(600).gang("g", 2).build();
    let q = pod("q").cpu(600).gang("g", 2).build();
    let plain = pod("plain").cpu(100).build();
    w.add(&[&p, &q, &plain]);
    // Plain pods get every node with room: kube-scheduler scores them as usual.
    assert_eq!(w.filter(&plain).0, vec!["n1", "n2", "n3"]);
    // The simulation plans q on n1, so p may use n2 or n3; it is offered one of them.
    assert_eq!(w.filter(&p).0, vec!["n2"]);
    wait_message(&w.bind(&p, "n2"));
    // q is offered its planned seat, not n3, which has as much room.
    assert_eq!(w.filter(&q).0, vec!["n1"]);
    assert_eq!(names(&w.bind(&q, "n1")), vec!["p@n2", "q@n1"]);
}

#[test]
fn seats_of_a_gang_whose_members_never_come_are_released_at_its_timeout() {
    let mut w = World::new(&[node("a", 1000)]);
    let p = pod("p").gang("g", 2).build();
    w.add(&[&p]);
    wait_message(&w.bind(&p, "a"));
    assert_eq!(
        w.reserved("a"),
        200,
        "p's seat and one for the member not created yet"
    );
    let view = &w.table.views(w.now)[0];
    let members: Vec<(&str, &str)> = view
        .members
        .iter()
        .map(|m| (m.name.as_str(), m.state.as_str()))
        .collect();
    assert_eq!(
        members,
        vec![("p", "seated"), ("(not created yet)", "held")]
    );
    w.advance(ModelConfig::default().default_timeout + Duration::from_secs(1));
    let now = w.now;
    assert_eq!(w.table.expire(now).len(), 1);
    assert_eq!(w.reserved("a"), 0);
    assert_eq!(w.state("g"), "backoff");
    let notices = w.table.take_notices();
    assert_eq!(
        notices.last().map(|n| n.message.as_str()),
        Some(
            "gang ml/g did not reach quorum within 1m: 1/2 members had nodes \
             (1 of 2 members exist); seats released, retrying in 10s"
        )
    );
}

#[test]
fn gpu_gang_fits_two_four_gpu_nodes_but_not_four_plus_two() {
    let members: Vec<PodInfo> = (0..8)
        .map(|i| pod(&format!("w{i}")).gpu(1).gang("train", 8).build())
        .collect();
    let refs: Vec<&PodInfo> = members.iter().collect();

    let mut fits = World::new(&[gpu_node("g1", 4), gpu_node("g2", 4)]);
    fits.add(&refs);
    let mut last = None;
    for (i, m) in members.iter().enumerate() {
        let (ok, _) = fits.filter(m);
        assert!(!ok.is_empty(), "member {i} has a node");
        last = Some(fits.bind(m, &ok[0]));
    }
    let bound = names(&last.unwrap());
    assert_eq!(bound.len(), 8);
    assert_eq!(bound.iter().filter(|b| b.ends_with("@g1")).count(), 4);

    let mut short = World::new(&[gpu_node("g1", 4), gpu_node("g2", 2)]);
    short.add(&refs);
    for m in &members {
        let (ok, reasons) = short.filter(m);
        assert!(ok.is_empty());
        assert_eq!(reasons, vec!["gang ml/train: 6 of 8 members fit"]);
        assert!(matches!(short.bind(m, "g1"), BindDecision::Reject(_)));
    }
    assert_eq!(
        short
            .table
            .ledger
            .get("g1")
            .unwrap()
            .reserved()
            .extended("nvidia.com/gpu"),
        0
    );
}

#[test]
fn replicas_beyond_min_available_bind_at_once_after_quorum() {
    let mut w = World::new(&[node("a", 1000)]);
    let ps: Vec<PodInfo> = (0..4)
        .map(|i| pod(&format!("p{i}")).gang("g", 2).build())
        .collect();
    w.add(&ps.iter().collect::<Vec<_>>());
    wait_message(&w.bind(&ps[0], "a"));
    let d = w.bind(&ps[1], "a");
    assert_eq!(names(&d), vec!["p0@a", "p1@a"]);
    w.confirm(&d);
    let d = w.bind(&ps[2], "a");
    assert_eq!(
        names(&d),
        vec!["p2@a"],
        "a placed gang's later members bind at once"
    );
}

#[test]
fn a_member_outside_the_plan_can_take_a_planned_seat_on_its_node() {
    // Room for exactly two 500m pods; the plan seats p1 on b, but p2 arrives for b first.
    let mut w = World::new(&[node("a", 500), node("b", 500)]);
    let p0 = pod("p0").cpu(500).gang("g", 2).build();
    let p1 = pod("p1").cpu(500).gang("g", 2).build();
    let p2 = pod("p2").cpu(500).gang("g", 2).build();
    w.add(&[&p0, &p1, &p2]);
    wait_message(&w.bind(&p0, "a"));
    assert_eq!(w.filter(&p2).0, vec!["b"]);
    let d = w.bind(&p2, "b");
    assert_eq!(names(&d), vec!["p0@a", "p2@b"]);
}
