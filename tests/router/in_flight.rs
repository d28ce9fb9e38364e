//! A bind call for a pod muster is already binding answers with that binding's
//! outcome, never with an error of its own for a pod that is bound; and no call is answered
//! after kube-scheduler's `httpTimeout` has passed.
//!
//! The case from the 500-node benchmark: a member's held call gives up (`--bind-wait`) with its
//! gang below quorum; kube-scheduler backs the member off; the last member completes the gang
//! and muster binds every member, the first one included; kube-scheduler's retry of the first
//! member arrives while that binding is in flight.

use std::time::{Duration, Instant};

use super::*;
use muster_harness::timing::{ANSWER_MARGIN, LATE_ANSWER};

/// kube-scheduler's `httpTimeout` in these tests: short, so that a held call's answer is due
/// ([`DUE`]) well before any `--bind-wait` they set.
const HTTP_TIMEOUT: Duration = Duration::from_millis(1500);
/// When muster answers a call it holds: [`ANSWER_MARGIN`] before kube-scheduler stops listening.
const DUE: Duration = HTTP_TIMEOUT.saturating_sub(ANSWER_MARGIN);

/// Two members on `nodes`; the gang's bindings wait at the returned gate. The master's first
/// call gave up waiting (`--bind-wait 0s`, as after a hold that ran out); the worker's call
/// completed the gang and its bindings are in flight.
async fn gang_being_bound(
    nodes: &[NodeInfo],
    binder: FakeBinder,
    extender_timeout: Duration,
) -> (
    Arc<Fixture>,
    Arc<tokio::sync::Semaphore>,
    tokio::task::JoinHandle<(StatusCode, String)>,
) {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let binder = Arc::new(FakeBinder {
        gate: Some(gate.clone()),
        ..binder
    });
    let shared = Shared::new(
        ModelConfig::default(),
        binder.clone(),
        EventSink::disabled(),
    )
    .with_extender_timeout(extender_timeout);
    for n in nodes {
        shared.table.lock().apply_node(n.clone());
    }
    shared.readiness.set_pods_synced();
    shared.readiness.set_nodes_synced();
    let f = Arc::new(Fixture {
        shared: Arc::new(shared),
        binder,
        max_body_bytes: 64 * 1024,
        bind_wait: Duration::ZERO,
    });
    let master = go_pod("m", "u-m", "100m", GANG);
    let worker = go_pod("w", "u-w", "100m", GANG);
    f.watch(&[&master, &worker]);
    let (_, body) = f.post("/bind", &bind_args("m", "u-m", "node1")).await;
    assert_eq!(body, SEED_MASTER_WAITING);
    let completing = {
        let f = f.clone();
        tokio::spawn(async move { f.post("/bind", &bind_args("w", "u-w", "node1")).await })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while f.binder.calls.lock().len() < 2 {
        assert!(
            Instant::now() < deadline,
            "the gang's bindings never started"
        );
        tokio::task::yield_now().await;
    }
    (f, gate, completing)
}

fn retry(f: &Arc<Fixture>, node: &'static str) -> tokio::task::JoinHandle<(StatusCode, String)> {
    let f = f.clone();
    tokio::spawn(async move { f.post("/bind", &bind_args("m", "u-m", node)).await })
}

/// Lets the spawned calls run for a while on the test's runtime.
async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_for_a_member_being_bound_to_that_node_answers_success_once_bound() {
    let (f, gate, completing) = gang_being_bound(
        &[node("node1", 1000)],
        FakeBinder::default(),
        Duration::from_secs(10),
    )
    .await;
    let retried = retry(&f, "node1");
    settle().await;
    assert!(
        !retried.is_finished(),
        "answered before its binding ended: {:?}",
        retried.await
    );
    gate.add_permits(2);
    assert_eq!(
        retried.await.unwrap(),
        (StatusCode::OK, r#"{"Error":""}"#.to_string())
    );
    assert_eq!(completing.await.unwrap().1, r#"{"Error":""}"#);
    assert_eq!(f.binder.calls.lock().len(), 2, "bound once, not twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_for_a_member_whose_binding_fails_answers_that_failure() {
    let fail = FakeBinder::default();
    fail.fail.lock().push("m".into());
    let (f, gate, completing) =
        gang_being_bound(&[node("node1", 1000)], fail, Duration::from_secs(10)).await;
    let retried = retry(&f, "node1");
    settle().await;
    assert!(!retried.is_finished(), "{:?}", retried.await);
    gate.add_permits(2);
    assert_eq!(
        retried.await.unwrap().1,
        r#"{"Error":"binding ml/m to node1 failed: the API server said no"}"#
    );
    assert_eq!(completing.await.unwrap().1, r#"{"Error":""}"#);
}

/// kube-scheduler chose another node than the one muster is binding the member to: success
/// would make it believe its own choice (its Scheduled Event would name the wrong node).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_on_another_node_than_muster_binds_to_names_the_node() {
    let (f, gate, completing) = gang_being_bound(
        &[node("node1", 1000), node("node2", 1000)],
        FakeBinder::default(),
        Duration::from_secs(10),
    )
    .await;
    let retried = retry(&f, "node2");
    settle().await;
    assert!(!retried.is_finished(), "{:?}", retried.await);
    gate.add_permits(2);
    assert_eq!(
        retried.await.unwrap().1,
        r#"{"Error":"pod ml/m is already bound to node node1"}"#
    );
    assert_eq!(completing.await.unwrap().1, r#"{"Error":""}"#);
    let calls = f.binder.calls.lock().clone();
    assert!(!calls.iter().any(|c| c.ends_with("@node2")), "{calls:?}");
}

/// A binding that has not ended when kube-scheduler would stop listening (httpTimeout minus a
/// second) is answered as still in flight, at that moment: not earlier, and not later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_is_answered_before_kube_scheduler_stops_listening() {
    let (f, gate, completing) =
        gang_being_bound(&[node("node1", 1000)], FakeBinder::default(), HTTP_TIMEOUT).await;
    let started = Instant::now();
    let (status, body) = retry(&f, "node1").await.unwrap();
    let took = started.elapsed();
    assert_eq!(
        (status, body.as_str()),
        (
            StatusCode::OK,
            r#"{"Error":"pod ml/m is already being bound to node node1 by muster; the API server has not answered yet"}"#
        )
    );
    assert!(
        (DUE..DUE + LATE_ANSWER).contains(&took),
        "answered after {took:?}, not at httpTimeout - {ANSWER_MARGIN:?} = {DUE:?}"
    );
    // The call that completed the gang is answered before kube-scheduler stops listening
    // too; its binding goes on and a later retry hears how it ended.
    assert_eq!(
        completing.await.unwrap().1,
        r#"{"Error":"pod ml/w is already being bound to node node1 by muster; the API server has not answered yet"}"#
    );
    gate.add_permits(2);
    let deadline = Instant::now() + Duration::from_secs(10);
    while f.shared.bindings.in_flight() > 0 {
        assert!(Instant::now() < deadline, "the gang's bindings never ended");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        f.post("/bind", &bind_args("w", "u-w", "node1")).await.1,
        r#"{"Error":""}"#
    );
}

/// `--bind-wait` longer than kube-scheduler listens: the hold ends at httpTimeout minus a
/// second all the same.
#[tokio::test]
async fn a_held_call_never_outlasts_kube_schedulers_http_timeout() {
    let shared = Shared::new(
        ModelConfig::default(),
        Arc::new(FakeBinder::default()),
        EventSink::disabled(),
    )
    .with_extender_timeout(HTTP_TIMEOUT);
    shared.table.lock().apply_node(node("node1", 1000));
    shared.readiness.set_pods_synced();
    shared.readiness.set_nodes_synced();
    let f = Fixture {
        shared: Arc::new(shared),
        binder: Arc::default(),
        max_body_bytes: 64 * 1024,
        bind_wait: Duration::from_secs(20),
    };
    f.watch(&[
        &go_pod("m", "u-m", "100m", GANG),
        &go_pod("w", "u-w", "100m", GANG),
    ]);
    let started = Instant::now();
    let (_, body) = f.post("/bind", &bind_args("m", "u-m", "node1")).await;
    let took = started.elapsed();
    assert_eq!(body, SEED_MASTER_WAITING);
    assert!(
        (DUE..DUE + LATE_ANSWER).contains(&took),
        "held for {took:?}, not until httpTimeout - {ANSWER_MARGIN:?} = {DUE:?}"
    );
    assert_eq!(f.seats(), 2, "its seat (and the planned one) are kept");
}
