//! A held bind call that is woken decides again (`HoldEnd::Woken`). At quorum, the room a
//! seat lacks may be used only by pods being deleted: a preemption's victims, which
//! kube-scheduler's cache already shows gone while muster's watch still has them. The gang then
//! keeps every seat and the call is held; each pod leaving that node wakes it, and it answers
//! with the decision taken then.

use std::time::{Duration, Instant};

use super::*;

/// `go_pod`'s pod bound to `node` and being deleted, as the watch delivers a preemption's
/// victim.
fn go_pod_being_deleted(name: &str, uid: &str, cpu: &str, node: &str) -> String {
    let mut pod: serde_json::Value = serde_json::from_str(&go_pod(name, uid, cpu, "{}")).unwrap();
    pod["metadata"]["deletionTimestamp"] = "2026-11-29T10:01:00Z".into();
    pod["metadata"]["deletionGracePeriodSeconds"] = 30.into();
    pod["spec"]["nodeName"] = node.into();
    pod["status"]["phase"] = "Running".into();
    pod.to_string()
}

/// Polls `/gangs` until the gang's waiting reason contains `reason` (yielding in between, so
/// the held call runs).
async fn until_waiting_for(f: &Fixture, reason: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, gangs) = f.call("GET", "/gangs", "").await;
        if gangs.contains(reason) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the gang never waited for {reason:?}: {gangs}"
        );
        tokio::task::yield_now().await;
    }
}

/// Nodes a and b of 1 CPU; the seed gang of two 600m members. The master's call gave up
/// waiting (`--bind-wait 0s`) and its seat on a is kept; two pods of 500m being deleted are on
/// a. The worker's call on b completes the quorum, but a's room is used by those two: the call
/// is held. The first leaving wakes it: it decides again, and waits again for the second; the
/// second leaving wakes it again, and it binds the gang whole. Without the wake-up the call
/// would answer "waiting" only when its `--bind-wait` (20 s) ran out.
///
/// One thread (the default test runtime): the spawned call runs from its decision into its
/// wait without yielding, so once `/gangs` shows the decision the call is waiting, and the
/// wake-up cannot come before it.
#[tokio::test]
async fn a_held_bind_call_woken_by_a_pod_leaving_decides_again_and_binds_the_gang() {
    let mut f = Fixture::new(&[node("a", 1000), node("b", 1000)]);
    f.watch_seed_gang("600m");
    let (_, body) = f
        .post("/bind", &bind_args("ai-gang-job-master-0", "u-m", "a"))
        .await;
    assert_eq!(body, SEED_MASTER_WAITING);
    let leaving = [
        go_pod_being_deleted("victim-0", "u-v0", "500m", "a"),
        go_pod_being_deleted("victim-1", "u-v1", "500m", "a"),
    ];
    f.watch(&[&leaving[0], &leaving[1]]);
    f.bind_wait = Duration::from_secs(20);
    let f = Arc::new(f);
    let held = {
        let f = f.clone();
        tokio::spawn(async move {
            f.post("/bind", &bind_args("ai-gang-job-worker-0", "u-w", "b"))
                .await
        })
    };
    until_waiting_for(&f, "waiting for 2 pods being deleted on node a to go").await;
    assert!(!held.is_finished(), "held while the room is on its way");

    f.watch_deleted("u-v0");
    // Woken, it decided again: the other pod still uses the room, so it waits again.
    until_waiting_for(&f, "waiting for 1 pod being deleted on node a to go").await;
    assert!(!held.is_finished(), "held again");
    assert!(f.binder.calls.lock().is_empty(), "nothing bound yet");

    f.watch_deleted("u-v1");
    let (status, body) = tokio::time::timeout(Duration::from_secs(5), held)
        .await
        .expect("answered once woken, long before its --bind-wait")
        .unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, r#"{"Error":""}"#);
    let mut calls = f.binder.calls.lock().clone();
    calls.sort();
    assert_eq!(
        calls,
        ["ml/ai-gang-job-master-0@a", "ml/ai-gang-job-worker-0@b"]
    );
}
