//! Issue 11 at the HTTP surface: only the watch adds pods (a filter or bind for a pod muster
//! has not seen, or a forged one, answers `Error` and changes nothing), and bindings at quorum
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
async fn a_forged_member_with_a_huge_quorum_changes_nothing() {
    let f = Fixture::new(&[node("node1", 1000)]);
    let master = go_pod("ai-gang-job-master-0", "u-m", "100m", GANG);
    let worker = go_pod("ai-gang-job-worker-0", "u-w", "100m", GANG);
    f.watch(&[&master, &worker]);
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
    assert_eq!(
        body,
        r#"{"Nodes":null,"NodeNames":["node1"],"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""}"#
    );
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
    assert_eq!(
        body,
        r#"{"Error":"gang ml/ai-gang-job waiting for quorum: 1/2 members have nodes"}"#
    );
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
    let pod = go_pod("web", "u-web", "100m", "{}");
    f.watch(&[&pod]);
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
    let master = go_pod("ai-gang-job-master-0", "u-m", "400m", GANG);
    let worker = go_pod("ai-gang-job-worker-0", "u-w", "400m", GANG);
    f.watch(&[&master, &worker]);
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
    let plain = go_pod("web", "u-web", "300m", "{}");
    f.watch(&[&plain]);
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
