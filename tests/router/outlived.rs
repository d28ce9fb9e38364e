//! Bindings outlive the bind call that started them: kube-scheduler closes its connection at
//! its `httpTimeout`, hyper drops the call's future, and the bindings the call started still
//! end (bound or failed) in the table and the registry; kube-scheduler's retry of the pod is
//! answered with the outcome (fail-safe, never-half).

use std::time::{Duration, Instant};

use super::*;
use muster_harness::timing::LATE_ANSWER;

/// A gang of two on node1, each binding waiting at the returned gate. The master's first call
/// gave up waiting (`--bind-wait 0s`); the worker's call completed the gang, its bindings
/// started, and then the call was dropped (its task aborted), as hyper drops a handler whose
/// client closed the connection.
async fn gang_whose_call_was_dropped(
    binder: FakeBinder,
) -> (Arc<Fixture>, Arc<tokio::sync::Semaphore>) {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let binder = FakeBinder {
        gate: Some(gate.clone()),
        ..binder
    };
    let f = Arc::new(Fixture::with_binder(&[node("node1", 1000)], binder));
    let master = go_pod("m", "u-m", "100m", GANG);
    let worker = go_pod("w", "u-w", "100m", GANG);
    f.watch(&[&master, &worker]);
    let (_, body) = f.post("/bind", &bind_args("m", "u-m", "node1")).await;
    assert!(body.contains("waiting for quorum"), "{body}");
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
    completing.abort();
    assert!(completing.await.unwrap_err().is_cancelled());
    (f, gate)
}

/// Polls until no binding is in flight.
async fn bindings_ended(f: &Fixture) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while f.shared.bindings.in_flight() > 0 {
        assert!(
            Instant::now() < deadline,
            "{} bindings still in flight after their call was dropped and the API server answered",
            f.shared.bindings.in_flight()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_whose_bind_call_was_dropped_is_still_bound_and_its_retries_hear_so() {
    let (f, gate) = gang_whose_call_was_dropped(FakeBinder::default()).await;
    gate.add_permits(2);
    bindings_ended(&f).await;
    // kube-scheduler's retries of both members: success, at once, and no second binding.
    for (name, uid) in [("w", "u-w"), ("m", "u-m")] {
        let started = Instant::now();
        let answer = f.post("/bind", &bind_args(name, uid, "node1")).await;
        assert_eq!(
            answer,
            (StatusCode::OK, r#"{"Error":""}"#.to_string()),
            "{name}"
        );
        // Due at once; the wrong answer would wait for the binding's deadline (seconds).
        assert!(started.elapsed() < LATE_ANSWER, "{name}: waited");
    }
    assert_eq!(f.binder.calls.lock().len(), 2, "bound once, not twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_that_fails_after_its_call_was_dropped_frees_the_pod_and_says_why() {
    let fail = FakeBinder::default();
    fail.fail.lock().push("w".into());
    let (f, gate) = gang_whose_call_was_dropped(fail).await;
    gate.add_permits(2);
    bindings_ended(&f).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let failures = f.shared.metrics.bind_failures.get();
        if failures == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the table never heard: {failures} failures"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        f.shared.table.lock().node_of("u-w"),
        None,
        "the failed member still has its node in the table"
    );
    // kube-scheduler's retry of the failed member gets a binding of its own, and its outcome.
    gate.add_permits(1);
    let (_, body) = f.post("/bind", &bind_args("w", "u-w", "node1")).await;
    assert_eq!(
        body,
        r#"{"Error":"binding ml/w to node1 failed: the API server said no"}"#
    );
}

/// kube-scheduler's retry arrives while the bindings of the dropped call are still in flight:
/// it waits on the binding muster is making (no second binding, no "already being bound"
/// error while the API server has not answered) and is answered with how it ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_while_a_dropped_calls_bindings_are_in_flight_is_answered_with_their_outcome() {
    let fail = FakeBinder::default();
    fail.fail.lock().push("m".into());
    let (f, gate) = gang_whose_call_was_dropped(fail).await;
    let retry = |name: &'static str, uid: &'static str| {
        let f = f.clone();
        tokio::spawn(async move { f.post("/bind", &bind_args(name, uid, "node1")).await })
    };
    let (w, m) = (retry("w", "u-w"), retry("m", "u-m"));
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !w.is_finished() && !m.is_finished(),
        "answered before the bindings ended: w {:?}, m {:?}",
        w.is_finished(),
        m.is_finished()
    );
    assert_eq!(f.shared.bindings.in_flight(), 2);
    gate.add_permits(2);
    assert_eq!(w.await.unwrap(), (StatusCode::OK, r#"{"Error":""}"#.into()));
    assert_eq!(
        m.await.unwrap().1,
        r#"{"Error":"binding ml/m to node1 failed: the API server said no"}"#
    );
    assert_eq!(
        f.binder.calls.lock().len(),
        2,
        "each member bound once, not twice"
    );
}
