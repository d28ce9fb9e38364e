//! A bound gang is whole (never-half) at the HTTP surface: only the watch adds pods (a filter
//! or bind for a pod muster has not seen, or a forged one, answers `Error` and changes
//! nothing), and bindings at quorum
//! are tried again while the API server's errors are transient.

use super::*;

const HUGE_QUORUM: &str =
    r#"{"muster.dev/group":"ai-gang-job","muster.dev/min-available":"100000"}"#;

#[tokio::test]
async fn a_filter_for_a_pod_muster_has_not_seen_is_an_error_and_adds_nothing() {
    let f = Fixture::new(&[node("node1", 1000)]);
    let ghost = go_pod("ghost", "u-ghost", "100m", GANG);
    let (status, body) = f.post("/filter", &filter_args(&ghost, &["node1"])).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        r#"{"Nodes":null,"NodeNames":null,"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":"unknown pod ml/ghost (uid u-ghost): muster has not seen it; it may have been deleted"}"#
    );
    assert_eq!(f.shared.table.lock().pod_count(), 0);
    let (_, gangs) = f.call("GET", "/gangs", "").await;
    assert_eq!(gangs, r#"{"gangs":[]}"#);
}

#[tokio::test]
async fn a_filter_that_arrives_before_the_watch_delivers_its_pod_waits_for_it() {
    // kube-scheduler's informer and muster's watch get the same event milliseconds apart: a
    // new pod is often filtered first. The call waits for the watch instead of failing the
    // pod into kube-scheduler's backoff.
    let f = Arc::new(Fixture::new(&[node("node1", 1000)]));
    let late = go_pod("late", "u-late", "100m", "{}");
    let call = {
        let (f, late) = (f.clone(), late.clone());
        tokio::spawn(async move { f.post("/filter", &filter_args(&late, &["node1"])).await })
    };
    // Deliver the pod only once the call is waiting for it (it has subscribed to the watch's
    // progress), so the test cannot pass by the pod simply being there first.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while f.shared.cache_waiters() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the filter call never waited"
        );
        tokio::task::yield_now().await;
    }
    f.watch(&[&late]);
    let (status, body) = call.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, FILTER_KEEPS_NODE1);
}

#[tokio::test]
async fn a_forged_member_with_a_huge_quorum_changes_nothing() {
    let f = Fixture::new(&[node("node1", 1000)]);
    f.watch_seed_gang("100m");
    // Never seen by the watch: refused at both verbs.
    let forged = go_pod("evil", "u-evil", "100m", HUGE_QUORUM);
    let (_, body) = f.post("/filter", &filter_args(&forged, &["node1"])).await;
    assert!(body.ends_with(r#""Error":"unknown pod ml/evil (uid u-evil): muster has not seen it; it may have been deleted"}"#), "{body}");
    let (_, body) = f.post("/bind", &bind_args("evil", "u-evil", "node1")).await;
    assert_eq!(
        body,
        r#"{"Error":"unknown pod ml/evil (uid u-evil): muster has not seen it; it may have been deleted"}"#
    );
    // A real member's UID and names with forged annotations: the watch's version is used.
    let rewritten = go_pod("ai-gang-job-master-0", "u-m", "100m", HUGE_QUORUM);
    let (_, body) = f
        .post("/filter", &filter_args(&rewritten, &["node1"]))
        .await;
    assert_eq!(body, FILTER_KEEPS_NODE1);
    // A real member's UID under another name.
    let impostor = go_pod("evil", "u-m", "100m", HUGE_QUORUM);
    let (_, body) = f.post("/filter", &filter_args(&impostor, &["node1"])).await;
    assert!(
        body.ends_with(r#""Error":"pod uid u-m is ml/ai-gang-job-master-0, not ml/evil"}"#),
        "{body}"
    );
    assert_eq!(f.shared.table.lock().pod_count(), 2);
    let (_, body) = f
        .post("/bind", &bind_args("ai-gang-job-master-0", "u-m", "node1"))
        .await;
    assert_eq!(body, SEED_MASTER_WAITING);
    let (_, body) = f
        .post("/bind", &bind_args("ai-gang-job-worker-0", "u-w", "node1"))
        .await;
    assert_eq!(body, r#"{"Error":""}"#);
}

#[tokio::test]
async fn a_binding_throttled_for_a_moment_is_tried_again_and_succeeds() {
    let binder = FakeBinder::default();
    binder.flaky.lock().push(("web".into(), 2));
    let f = Fixture::with_binder(&[node("node1", 1000)], binder);
    f.watch_web("100m");
    let (_, body) = f.post("/bind", &bind_args("web", "u-web", "node1")).await;
    assert_eq!(body, r#"{"Error":""}"#);
    assert_eq!(f.binder.calls.lock().len(), 3);
    let (_, metrics) = f.call("GET", "/metrics", "").await;
    assert!(metrics.contains("muster_bind_retries_total 2"), "{metrics}");
    assert!(
        metrics.contains("muster_bind_failures_total 0"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_gang_binding_refused_for_good_keeps_the_members_room_and_is_counted() {
    let f = Fixture::new(&[node("node1", 1000)]);
    f.watch_seed_gang("400m");
    f.binder.fail.lock().push("ai-gang-job-master-0".into());
    f.post("/bind", &bind_args("ai-gang-job-master-0", "u-m", "node1"))
        .await;
    let (_, body) = f
        .post("/bind", &bind_args("ai-gang-job-worker-0", "u-w", "node1"))
        .await;
    assert_eq!(
        body, r#"{"Error":""}"#,
        "the worker's own binding succeeded"
    );
    assert_eq!(f.seats(), 1, "the master keeps its room as a seat");
    let (_, metrics) = f.call("GET", "/metrics", "").await;
    assert!(
        metrics.contains("muster_bind_failures_total 1"),
        "{metrics}"
    );
    // A plain pod cannot take the master's room (1000m: 400m bound, 400m seated).
    let plain = f.watch_web("300m");
    let (_, body) = f.post("/filter", &filter_args(&plain, &["node1"])).await;
    assert!(body.contains(r#""NodeNames":[]"#), "{body}");
    // kube-scheduler retries the master: it lands on its seat, bound with its gang.
    f.binder.fail.lock().clear();
    let (_, body) = f
        .post("/bind", &bind_args("ai-gang-job-master-0", "u-m", "node1"))
        .await;
    assert_eq!(body, r#"{"Error":""}"#);
    assert_eq!(f.seats(), 0);
}

/// Item 7: the bindings outlast the held call's `--bind-wait`; the call must answer with its
/// binding's result, not "waiting for quorum" for a pod muster is binding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_call_whose_pod_is_being_bound_answers_the_binding_not_waiting() {
    let bind_wait = std::time::Duration::from_millis(300);
    let (f, gate) = Fixture::gated(bind_wait);
    f.watch_seed_gang("100m");
    let spawn_bind = |name, uid| spawn_bind_on_node1(&f, name, uid);
    let held = spawn_bind("ai-gang-job-master-0", "u-m");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while f.seats() == 0 {
        assert!(std::time::Instant::now() < deadline, "master never seated");
        tokio::task::yield_now().await;
    }
    let completing = spawn_bind("ai-gang-job-worker-0", "u-w");
    while f.binder.calls.lock().len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "bindings never started"
        );
        tokio::task::yield_now().await;
    }
    // The held call's --bind-wait passes while both bindings wait at the gate.
    tokio::time::sleep(bind_wait * 2).await;
    assert!(
        !held.is_finished(),
        "answered while its pod was being bound: {:?}",
        held.await
    );
    gate.add_permits(2);
    assert_eq!(completing.await.unwrap().1, r#"{"Error":""}"#);
    assert_eq!(held.await.unwrap().1, r#"{"Error":""}"#);
}

/// Item 7: kube-scheduler retries a seated member every few seconds; its `GangWaiting` Event
/// is raised once per reason, not at every retry.
#[tokio::test]
async fn a_seated_members_waiting_event_is_not_repeated_at_every_retry() {
    let (events, mut told) = EventSink::channel(64);
    let shared = Arc::new(Shared::new(
        ModelConfig::default(),
        Arc::new(FakeBinder::default()),
        events,
    ));
    shared.table.lock().apply_node(node("node1", 1000));
    shared.readiness.set_pods_synced();
    shared.readiness.set_nodes_synced();
    let f = Fixture {
        shared,
        binder: Arc::default(),
        max_body_bytes: 1 << 20,
        bind_wait: std::time::Duration::from_millis(20),
    };
    let three = r#"{"muster.dev/group":"trio","muster.dev/min-available":"3"}"#;
    let a = go_pod("a", "u-a", "100m", three);
    let b = go_pod("b", "u-b", "100m", three);
    f.watch(&[&a, &b]);
    for _ in 0..3 {
        let (_, body) = f.post("/bind", &bind_args("a", "u-a", "node1")).await;
        assert_eq!(
            body,
            r#"{"Error":"gang ml/trio waiting for quorum: 1/3 members have nodes; 2 of 3 members exist, the rest are not created yet"}"#
        );
    }
    let mut waiting = 0;
    while let Ok(n) = told.try_recv() {
        if n.kind == muster::model::NoticeKind::Waiting {
            waiting += 1;
        }
    }
    assert_eq!(waiting, 1);
}
