use super::*;

// ---------------------------------------------------------------- plain pods

#[test]
fn plain_pods_fit_by_room_and_say_what_is_short() {
    let mut w = World::new(&[node("small", 150), node("big", 1000)]);
    let p = pod("web").cpu(500).build();
    w.add(&[&p]);
    let (ok, reasons) = w.filter(&p);
    assert_eq!(ok, vec!["big"]);
    assert!(
        reasons.is_empty(),
        "no reasons while a node passes: {reasons:?}"
    );
    // Reasons are given when nothing passes (they become the FailedScheduling message).
    let huge = pod("huge").cpu(2000).build();
    w.add(&[&huge]);
    let (ok, reasons) = w.filter(&huge);
    assert!(ok.is_empty());
    assert_eq!(
        reasons,
        vec![
            "insufficient cpu: requested 2000m, free 150m",
            "insufficient cpu: requested 2000m, free 1000m"
        ]
    );
    let d = w.bind(&p, "big");
    assert_eq!(names(&d), vec!["web@big"]);
    // Assumed at once: a second pod cannot double-book the node before the watch confirms.
    let q = pod("api").cpu(600).build();
    w.add(&[&q]);
    assert!(rejection(&w.bind(&q, "big")).contains("insufficient cpu: requested 600m, free 500m"));
}

// ---------------------------------------------------------------- the seed example

#[test]
fn seed_gang_waits_whole_until_a_node_is_added_then_binds_together() {
    let mut w = World::new(&[node("node-1", 150)]);
    let master = pod("ai-gang-job-master-0").gang("ai-gang-job", 2).build();
    let worker = pod("ai-gang-job-worker-0").gang("ai-gang-job", 2).build();
    w.add(&[&master, &worker]);

    for p in [&master, &worker] {
        let (ok, reasons) = w.filter(p);
        assert!(ok.is_empty(), "no node offered while the gang cannot fit");
        assert_eq!(reasons, vec!["gang ml/ai-gang-job: 1 of 2 members fit"]);
    }
    // Binding anyway (a stale scheduler decision) is refused and seats nothing.
    assert_eq!(
        rejection(&w.bind(&master, "node-1")),
        "gang ml/ai-gang-job: 1 of 2 members fit"
    );
    assert_eq!(w.reserved("node-1"), 0);
    let notices = w.table.take_notices();
    assert_eq!(
        notices.len(),
        2,
        "one GangWaiting per member, only once: {notices:?}"
    );
    assert!(notices.iter().all(|n| n.kind == NoticeKind::Waiting));

    w.table.apply_node(node("node-2", 150));
    // The simulation puts the worker on node-1 first, so the master is offered node-2.
    let (ok, _) = w.filter(&master);
    assert_eq!(ok, vec!["node-2"]);
    let first = w.bind(&master, "node-2");
    assert_eq!(
        wait_message(&first),
        "gang ml/ai-gang-job waiting for quorum: 1/2 members have nodes"
    );
    // The worker's room on node-1 is held by a planned seat.
    assert_eq!((w.reserved("node-1"), w.reserved("node-2")), (100, 100));
    assert_eq!(w.state("ai-gang-job"), "admitted");

    let (ok, _) = w.filter(&worker);
    assert_eq!(ok, vec!["node-1"]);
    let second = w.bind(&worker, "node-1");
    assert_eq!(
        names(&second),
        vec!["ai-gang-job-master-0@node-2", "ai-gang-job-worker-0@node-1"]
    );
    assert_eq!((w.reserved("node-1"), w.reserved("node-2")), (0, 0));
    let placed: Vec<_> = w
        .table
        .take_notices()
        .into_iter()
        .filter(|n| n.kind == NoticeKind::Placed)
        .collect();
    assert_eq!(placed.len(), 1, "one GangPlaced per gang: {placed:?}");
    assert_eq!(&*placed[0].pod.name, "ai-gang-job-master-0");
    assert_eq!(
        placed[0].message,
        "gang ml/ai-gang-job placed: 2 members bound together (0 already had nodes): \
         ai-gang-job-master-0 on node-2, ai-gang-job-worker-0 on node-1"
    );
    w.confirm(&second);
    assert_eq!(w.state("ai-gang-job"), "placed");
    assert_eq!(w.table.gauges(w.now).placed, 1);
}

/// `GangPlaced` ends what a gang's members were told; a gang that fits at once and whose
/// members were told nothing gets no Event of muster's (each member has kube-scheduler's
/// `Scheduled`), and a notice told in the same batch as the placement still counts.
#[test]
fn a_gang_placed_without_being_told_anything_gets_no_gang_placed_event() {
    let mut w = World::new(&[node("node-1", 150), node("node-2", 150)]);
    let master = pod("quick-master-0").gang("quick", 2).build();
    let worker = pod("quick-worker-0").gang("quick", 2).build();
    w.add(&[&master, &worker]);
    let (ok, _) = w.filter(&master);
    wait_message(&w.bind(&master, &ok[0]));
    let (ok, _) = w.filter(&worker);
    let placed = w.bind(&worker, &ok[0]);
    assert_eq!(names(&placed).len(), 2, "placed whole: {placed:?}");
    let notices = w.table.take_notices();
    assert!(
        notices.iter().all(|n| n.kind != NoticeKind::Placed),
        "no GangPlaced for a gang told nothing: {notices:?}"
    );

    // A gang told it waits, the notice not taken yet when it is placed: one GangPlaced.
    let mut w = World::new(&[node("node-1", 150)]);
    let master = pod("slow-master-0").gang("slow", 2).build();
    let worker = pod("slow-worker-0").gang("slow", 2).build();
    w.add(&[&master, &worker]);
    let (ok, _) = w.filter(&master);
    assert!(ok.is_empty(), "1 of 2 fits: nothing offered");
    w.table.apply_node(node("node-2", 150));
    for p in [&master, &worker] {
        w.filter(p);
    }
    let (ok, _) = w.filter(&master);
    let first = ok[0].clone();
    w.bind(&master, &first);
    let (ok, _) = w.filter(&worker);
    w.bind(&worker, &ok[0]);
    let notices = w.table.take_notices();
    let kinds: Vec<NoticeKind> = notices.iter().map(|n| n.kind).collect();
    assert!(
        kinds.contains(&NoticeKind::Waiting),
        "told it waits: {notices:?}"
    );
    assert_eq!(
        kinds.iter().filter(|k| **k == NoticeKind::Placed).count(),
        1,
        "one GangPlaced ends the wait: {notices:?}"
    );
}

#[test]
fn bind_is_idempotent_and_reports_in_flight_and_bound_pods() {
    let mut w = World::new(&[node("a", 1000), node("b", 1000)]);
    let m = pod("m").gang("g", 2).build();
    let x = pod("x").gang("g", 2).build();
    w.add(&[&m, &x]);
    wait_message(&w.bind(&m, "a"));
    let again = w.bind(&m, "a");
    assert_eq!(
        wait_message(&again),
        "gang ml/g waiting for quorum: 1/2 members have nodes"
    );
    assert_eq!(
        w.reserved("a"),
        100 + 100,
        "own seat + planned seat, not double-counted"
    );
    // A retry on another node moves the seat.
    wait_message(&w.bind(&m, "b"));
    assert_eq!(
        w.table.gangs[&GangKey::new("ml", "g")]
            .seat_of(&m.uid)
            .unwrap()
            .node
            .as_ref(),
        "b"
    );

    let d = w.bind(&x, "a");
    assert_eq!(names(&d).len(), 2);
    // Asked again while muster binds it: the handler answers with that binding's outcome.
    let again = w.bind(&x, "a");
    assert!(
        matches!(&again, BindDecision::InFlight { pod, node } if *pod.uid == *x.uid && &**node == "a"),
        "{again:?}"
    );
    assert!(
        matches!(w.bind(&x, "b"), BindDecision::InFlight { node, .. } if &*node == "a"),
        "the node muster is binding it to, whatever kube-scheduler asks"
    );
    w.confirm(&d);
    assert_eq!(w.bind(&x, "a"), BindDecision::AlreadyBound);
    assert_eq!(
        rejection(&w.bind(&x, "b")),
        "pod ml/x is already bound to node a"
    );
}

#[test]
fn bad_bind_requests_are_refused_and_change_nothing() {
    let mut w = World::new(&[node("a", 1000)]);
    let m = pod("m").gang("g", 2).build();
    w.add(&[&m]);
    let cases: Vec<(BindRequest, &str)> = vec![
        (
            BindRequest {
                namespace: "ml",
                name: "ghost",
                uid: "nope",
                node: "a",
            },
            "unknown pod ml/ghost (uid nope): muster has not seen it; it may have been deleted",
        ),
        (
            BindRequest {
                namespace: "ml",
                name: "other",
                uid: "uid-m",
                node: "a",
            },
            "pod uid uid-m is ml/m, not ml/other",
        ),
        (
            BindRequest {
                namespace: "ml",
                name: "m",
                uid: "uid-m",
                node: "missing",
            },
            "unknown node \"missing\": muster has no such node in its cache",
        ),
    ];
    for (req, want) in cases {
        let d = w.table.bind(req, w.now);
        assert_eq!(rejection(&d), want);
        assert_eq!(w.reserved("a"), 0);
        assert_eq!(w.state("g"), "waiting");
    }
}

#[test]
fn conflicting_gang_keys_are_unresolvable_and_never_bound() {
    let mut w = World::new(&[node("a", 1000)]);
    let p = pod("p")
        .gang("one", 2)
        .annotation("scheduling.k8s.io/group-name", "two")
        .build();
    w.add(&[&p]);
    let names = w.all_nodes();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let v = w.table.filter(&p, &refs, w.now);
    assert!(matches!(&v[0], NodeVerdict::Unresolvable(r) if r.contains("conflicting gang keys")));
    assert!(rejection(&w.bind(&p, "a")).contains("conflicting gang keys"));
    let notices = w.table.take_notices();
    assert_eq!(notices[0].kind, NoticeKind::InvalidKeys);
}
