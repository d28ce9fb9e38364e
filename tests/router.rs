//! Router tests: the HTTP surface driven with `oneshot`, request bodies byte-for-byte as
//! kube-scheduler's Go encoder writes them (capitalised field names, `null` for nil), in both
//! node-cache modes, plus the bad inputs. No cluster: the table is filled by hand and binding
//! goes to a recording fake.

use std::sync::Arc;

use axum::http::StatusCode;

use muster::http::AppState;
use muster::model::{ModelConfig, NodeInfo};
use muster::state::event_sink::EventSink;
use muster::state::Shared;

#[path = "router/kit.rs"]
mod kit;
use kit::{bind_args, FakeBinder};

struct Fixture {
    shared: Arc<Shared>,
    binder: Arc<FakeBinder>,
    max_body_bytes: usize,
    bind_wait: std::time::Duration,
}

fn node(name: &str, cpu_milli: i64) -> NodeInfo {
    muster::testkit::node(name)
        .cpu(cpu_milli)
        .memory(8 << 30)
        .build()
}

impl Fixture {
    fn new(nodes: &[NodeInfo]) -> Self {
        Self::with_binder(nodes, FakeBinder::default())
    }

    fn with_binder(nodes: &[NodeInfo], binder: FakeBinder) -> Self {
        let binder = Arc::new(binder);
        let shared = Arc::new(Shared::new(
            ModelConfig::default(),
            binder.clone(),
            EventSink::disabled(),
        ));
        for n in nodes {
            shared.table.lock().apply_node(n.clone());
        }
        shared.readiness.set_pods_synced();
        shared.readiness.set_nodes_synced();
        Fixture {
            shared,
            binder,
            max_body_bytes: 64 * 1024,
            bind_wait: std::time::Duration::ZERO,
        }
    }

    /// One node, bind calls held up to `bind_wait`, and a binder whose every binding waits
    /// for a permit of the returned gate.
    fn gated(bind_wait: std::time::Duration) -> (Arc<Self>, Arc<tokio::sync::Semaphore>) {
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let binder = FakeBinder {
            gate: Some(gate.clone()),
            ..Default::default()
        };
        let mut f = Self::with_binder(&[node("node1", 1000)], binder);
        f.bind_wait = bind_wait;
        (Arc::new(f), gate)
    }

    async fn call(&self, method: &str, path: &str, body: &str) -> (StatusCode, String) {
        let state = AppState {
            shared: self.shared.clone(),
            max_body_bytes: self.max_body_bytes,
            bind_wait: self.bind_wait,
        };
        let (status, _, body) = kit::call(state, method, path, body).await;
        (status, body)
    }

    async fn post(&self, path: &str, body: &str) -> (StatusCode, String) {
        self.call("POST", path, body).await
    }

    /// The watch delivers these pods (Go-encoded v1.Pod JSON): only the watch adds pods.
    fn watch(&self, pods: &[&String]) {
        for json in pods {
            let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_str(json).unwrap();
            let info = muster::cluster::convert::pod_info(&pod).unwrap();
            self.shared.table.lock().apply_pod(info);
            self.shared.cache_changed();
        }
    }

    /// The watch delivers the deletion of pod `uid`, and then, as after every event, the
    /// table's notices are flushed (which wakes the bind calls held for gangs whose awaited
    /// room was freed).
    fn watch_deleted(&self, uid: &str) {
        self.shared.table.lock().remove_pod(uid);
        self.shared.cache_changed();
        self.shared.flush_notices();
    }

    /// The README's seed gang (master and worker of ml/ai-gang-job, min-available 2), each
    /// requesting `cpu`, delivered by the watch; their JSON, as kube-scheduler will send them.
    fn watch_seed_gang(&self, cpu: &str) -> (String, String) {
        let master = go_pod("ai-gang-job-master-0", "u-m", cpu, GANG);
        let worker = go_pod("ai-gang-job-worker-0", "u-w", cpu, GANG);
        self.watch(&[&master, &worker]);
        (master, worker)
    }

    /// Pod ml/web, in no gang, requesting `cpu`, delivered by the watch; its JSON.
    fn watch_web(&self, cpu: &str) -> String {
        let pod = go_pod("web", "u-web", cpu, "{}");
        self.watch(&[&pod]);
        pod
    }

    fn seats(&self) -> u64 {
        self.shared
            .table
            .lock()
            .gauges(std::time::Instant::now())
            .seats
    }
}

/// A pod as Go's encoding/json writes a v1.Pod (kube-scheduler sends the whole object).
fn go_pod(name: &str, uid: &str, cpu: &str, annotations: &str) -> String {
    format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ml","uid":"{uid}","resourceVersion":"612","creationTimestamp":"2026-11-29T10:00:00Z","labels":{{"volcano.sh/job-name":"ai-gang-job"}},"annotations":{annotations}}},"spec":{{"containers":[{{"name":"main","image":"busybox","command":["sh","-c","sleep 3600"],"resources":{{"requests":{{"cpu":"{cpu}"}}}},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"Always"}}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{{}},"schedulerName":"default-scheduler","priority":0,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority"}},"status":{{"phase":"Pending","qosClass":"Burstable"}}}}"#
    )
}

const GANG: &str = r#"{"muster.dev/group":"ai-gang-job","muster.dev/min-available":"2"}"#;

/// The bind answer for the seed gang's first member to ask, below quorum, byte for byte.
const SEED_MASTER_WAITING: &str =
    r#"{"Error":"gang ml/ai-gang-job waiting for quorum: 1/2 members have nodes"}"#;

/// A filter answer keeping node1 and failing no node, byte for byte.
const FILTER_KEEPS_NODE1: &str = r#"{"Nodes":null,"NodeNames":["node1"],"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""}"#;

/// A bind call to node1 in a task of its own, so the test can act while it is held.
fn spawn_bind_on_node1(
    f: &Arc<Fixture>,
    name: &'static str,
    uid: &'static str,
) -> tokio::task::JoinHandle<(StatusCode, String)> {
    let f = f.clone();
    tokio::spawn(async move { f.post("/bind", &bind_args(name, uid, "node1")).await })
}

fn filter_args(pod: &str, nodes: &[&str]) -> String {
    let names: Vec<String> = nodes.iter().map(|n| format!("\"{n}\"")).collect();
    format!(
        r#"{{"Pod":{pod},"Nodes":null,"NodeNames":[{}]}}"#,
        names.join(",")
    )
}

// ---------------------------------------------------------------- filter

#[tokio::test]
async fn filter_in_node_cache_mode_answers_in_go_field_names() {
    let f = Fixture::new(&[node("node1", 1000), node("node2", 50)]);
    let pod = f.watch_web("100m");
    let (status, body) = f
        .post("/filter", &filter_args(&pod, &["node1", "node2"]))
        .await;
    assert_eq!(status, StatusCode::OK);
    // With a node left, kube-scheduler never reads the reasons: they are left out.
    assert_eq!(body, FILTER_KEEPS_NODE1);
    // With none left, they become the pod's FailedScheduling message.
    let (status, body) = f.post("/filter", &filter_args(&pod, &["node2"])).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        r#"{"Nodes":null,"NodeNames":[],"FailedNodes":{"node2":"insufficient cpu: requested 100m, free 50m"},"FailedAndUnresolvableNodes":{},"Error":""}"#
    );
}

#[tokio::test]
async fn filter_with_full_node_list_returns_the_kept_items_verbatim() {
    let f = Fixture::new(&[node("node1", 1000), node("node2", 50)]);
    let pod = f.watch_web("100m");
    let n1 = r#"{"metadata":{"name":"node1","labels":{"kubernetes.io/hostname":"node1"}},"spec":{},"status":{"allocatable":{"cpu":"1"}}}"#;
    let n2 = r#"{"metadata":{"name":"node2"},"spec":{},"status":{"allocatable":{"cpu":"50m"}}}"#;
    let req = format!(
        r#"{{"Pod":{pod},"Nodes":{{"metadata":{{}},"items":[{n1},{n2}]}},"NodeNames":null}}"#
    );
    let (status, body) = f.post("/filter", &req).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        format!(
            r#"{{"Nodes":{{"items":[{n1}]}},"NodeNames":null,"FailedNodes":{{}},"FailedAndUnresolvableNodes":{{}},"Error":""}}"#
        )
    );
}

#[tokio::test]
async fn filter_refuses_every_node_while_the_gang_cannot_fit_and_names_it() {
    let f = Fixture::new(&[node("node1", 150)]);
    let (master, worker) = f.watch_seed_gang("100m");
    // kube-scheduler tried the worker first; now the master is filtered.
    f.post("/filter", &filter_args(&worker, &["node1"])).await;
    let (status, body) = f.post("/filter", &filter_args(&master, &["node1"])).await;
    assert_eq!(status, StatusCode::OK);
    // Unresolvable: nothing here has a lower priority than the gang, so preemption cannot
    // help and kube-scheduler should not try (the pod is retried on cluster events all the same).
    assert_eq!(
        body,
        r#"{"Nodes":null,"NodeNames":[],"FailedNodes":{},"FailedAndUnresolvableNodes":{"node1":"gang ml/ai-gang-job: 1 of 2 members fit"},"Error":""}"#
    );
}

#[tokio::test]
async fn filter_fails_unknown_nodes_as_unresolvable() {
    let f = Fixture::new(&[node("node1", 1000)]);
    let pod = f.watch_web("100m");
    let (_, body) = f.post("/filter", &filter_args(&pod, &["ghost"])).await;
    assert_eq!(
        body,
        r#"{"Nodes":null,"NodeNames":[],"FailedNodes":{},"FailedAndUnresolvableNodes":{"ghost":"node ghost is not in muster's cache yet; muster asks kube-scheduler to retry the pod when it arrives"},"Error":""}"#
    );
    let (_, body) = f
        .post("/filter", &filter_args(&pod, &["node1", "ghost"]))
        .await;
    assert_eq!(body, FILTER_KEEPS_NODE1);
}

#[tokio::test]
async fn conflicting_gang_annotations_are_unresolvable_with_the_keys_named() {
    let f = Fixture::new(&[node("node1", 1000)]);
    let pod = go_pod(
        "p",
        "u-p",
        "100m",
        r#"{"muster.dev/group":"a","scheduling.volcano.sh/group-name":"b"}"#,
    );
    f.watch(&[&pod]);
    let (_, body) = f.post("/filter", &filter_args(&pod, &["node1"])).await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["FailedAndUnresolvableNodes"]["node1"],
        "pod ml/p: conflicting gang keys: muster.dev/group=\"a\" but scheduling.volcano.sh/group-name=\"b\"; give the pod one group name"
    );
}

// ---------------------------------------------------------------- prioritize

#[tokio::test]
async fn prioritize_returns_a_top_level_host_priority_list() {
    let f = Fixture::new(&[node("empty", 4000), node("half", 4000)]);
    let filler = go_pod("filler", "u-f", "2", "{}");
    f.watch(&[&filler]);
    f.post("/filter", &filter_args(&filler, &["half"])).await;
    f.post("/bind", &bind_args("filler", "u-f", "half")).await;
    let pod = f.watch_web("1");
    let (status, body) = f
        .post("/prioritize", &filter_args(&pod, &["empty", "half"]))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        r#"[{"Host":"empty","Score":1},{"Host":"half","Score":4}]"#
    );
}

// ---------------------------------------------------------------- bind

#[tokio::test]
async fn bind_waits_below_quorum_then_binds_the_whole_gang() {
    let f = Fixture::new(&[node("node1", 1000), node("node2", 1000)]);
    let (master, worker) = f.watch_seed_gang("100m");
    f.post("/filter", &filter_args(&master, &["node1", "node2"]))
        .await;
    f.post("/filter", &filter_args(&worker, &["node1", "node2"]))
        .await;

    let (status, body) = f
        .post("/bind", &bind_args("ai-gang-job-master-0", "u-m", "node1"))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, SEED_MASTER_WAITING);
    assert!(
        f.binder.calls.lock().is_empty(),
        "nothing bound below quorum"
    );

    let (_, body) = f
        .post("/bind", &bind_args("ai-gang-job-worker-0", "u-w", "node2"))
        .await;
    assert_eq!(body, r#"{"Error":""}"#);
    let mut calls = f.binder.calls.lock().clone();
    calls.sort();
    assert_eq!(
        calls,
        vec![
            "ml/ai-gang-job-master-0@node1",
            "ml/ai-gang-job-worker-0@node2"
        ]
    );
    let (_, metrics) = f.call("GET", "/metrics", "").await;
    assert!(metrics.contains("muster_gangs_placed_total 1"), "{metrics}");
    assert!(metrics.contains("muster_quorum_waits_total 1"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_bind_call_answers_success_once_its_gang_is_bound() {
    let mut f = Fixture::new(&[node("node1", 1000), node("node2", 1000)]);
    f.bind_wait = std::time::Duration::from_secs(20);
    let f = Arc::new(f);
    let (master, worker) = f.watch_seed_gang("100m");
    f.post("/filter", &filter_args(&master, &["node1", "node2"]))
        .await;
    f.post("/filter", &filter_args(&worker, &["node1", "node2"]))
        .await;

    let held = {
        let f = f.clone();
        tokio::spawn(async move {
            f.post("/bind", &bind_args("ai-gang-job-master-0", "u-m", "node1"))
                .await
        })
    };
    // The first call is held (not answered) while its member is seated.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while f.seats() == 0 {
        assert!(std::time::Instant::now() < deadline, "master never seated");
        tokio::task::yield_now().await;
    }
    assert!(!held.is_finished(), "held until the gang is complete");
    let (_, body) = f
        .post("/bind", &bind_args("ai-gang-job-worker-0", "u-w", "node2"))
        .await;
    assert_eq!(body, r#"{"Error":""}"#);
    let (status, body) = held.await.unwrap();
    assert_eq!((status, body.as_str()), (StatusCode::OK, r#"{"Error":""}"#));
    assert_eq!(f.binder.calls.lock().len(), 2);
}

/// The held call must not mistake "seat given up because the gang is being bound" for "seat
/// lost": between the quorum decision and the binding results, a wake-up finds no seat and no
/// outcome yet. Single-threaded runtime, so each `yield_now` lets the held task run.
#[tokio::test]
async fn a_held_bind_call_woken_while_its_gang_is_being_bound_keeps_waiting() {
    let (f, gate) = Fixture::gated(std::time::Duration::from_secs(20));
    let (master, worker) = f.watch_seed_gang("100m");
    f.post("/filter", &filter_args(&master, &["node1"])).await;
    f.post("/filter", &filter_args(&worker, &["node1"])).await;
    let spawn_bind = |name, uid| spawn_bind_on_node1(&f, name, uid);
    let held = spawn_bind("ai-gang-job-master-0", "u-m");
    while f.seats() == 0 {
        tokio::task::yield_now().await;
    }
    let completing = spawn_bind("ai-gang-job-worker-0", "u-w");
    // Both bindings started (and wait at the gate): the gang's seats are gone.
    while f.binder.calls.lock().len() < 2 {
        tokio::task::yield_now().await;
    }
    assert_eq!(f.seats(), 0);
    f.shared
        .wake_gang(&muster::model::GangKey::new("ml", "ai-gang-job"));
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(
        !held.is_finished(),
        "answered before its binding finished: {:?}",
        held.await
    );
    gate.add_permits(2);
    let (_, body) = completing.await.unwrap();
    assert_eq!(body, r#"{"Error":""}"#);
    let (status, body) = held.await.unwrap();
    assert_eq!((status, body.as_str()), (StatusCode::OK, r#"{"Error":""}"#));
}

/// `--bind-wait`: the call of a seated member below quorum is held for the wait, not less and
/// not much more, then answers the wait reason; `0s` answers it at once. The bounds leave room
/// for a loaded machine, none for a wait that is ignored, replaced or never ends.
#[tokio::test]
async fn a_held_bind_call_gives_up_with_the_wait_reason_after_bind_wait() {
    use muster_harness::timing::{AT_ONCE, LATE_ANSWER};
    use std::time::{Duration, Instant};
    for (wait, earliest, latest) in [
        (
            Duration::from_secs(1),
            Duration::from_secs(1),
            Duration::from_secs(1) + LATE_ANSWER,
        ),
        (Duration::ZERO, Duration::ZERO, AT_ONCE),
    ] {
        let mut f = Fixture::new(&[node("node1", 1000)]);
        f.bind_wait = wait;
        let master = go_pod("m", "u-m", "100m", GANG);
        let worker = go_pod("w", "u-w", "100m", GANG);
        f.watch(&[&master, &worker]);
        f.post("/filter", &filter_args(&master, &["node1"])).await;
        f.post("/filter", &filter_args(&worker, &["node1"])).await;
        let started = Instant::now();
        let args = bind_args("m", "u-m", "node1");
        let bind = f.post("/bind", &args);
        let (_, body) = tokio::time::timeout(latest + Duration::from_secs(5), bind)
            .await
            .unwrap_or_else(|_| panic!("--bind-wait {wait:?}: no answer"));
        let took = started.elapsed();
        assert_eq!(body, SEED_MASTER_WAITING);
        assert!(
            (earliest..=latest).contains(&took),
            "--bind-wait {wait:?} answered after {took:?}, not within {earliest:?}..={latest:?}"
        );
        assert_eq!(f.seats(), 2, "its seat (and the planned one) are kept");
    }
}

#[tokio::test]
async fn a_failed_binding_is_reported_to_the_scheduler_and_frees_the_room() {
    let f = Fixture::new(&[node("node1", 1000)]);
    let pod = f.watch_web("1");
    f.post("/filter", &filter_args(&pod, &["node1"])).await;
    f.binder.fail.lock().push("web".into());
    let (_, body) = f.post("/bind", &bind_args("web", "u-web", "node1")).await;
    assert_eq!(
        body,
        r#"{"Error":"binding ml/web to node1 failed: the API server said no"}"#
    );
    f.binder.fail.lock().clear();
    let (_, body) = f.post("/bind", &bind_args("web", "u-web", "node1")).await;
    assert_eq!(
        body, r#"{"Error":""}"#,
        "the retry finds the room free again"
    );
}

#[tokio::test]
async fn bind_of_unknown_pod_or_node_is_a_precise_error_and_changes_nothing() {
    let f = Fixture::new(&[node("node1", 1000)]);
    let master = go_pod("m", "u-m", "100m", GANG);
    f.watch(&[&master]);
    f.post("/filter", &filter_args(&master, &["node1"])).await;
    let cases = [
        (
            bind_args("ghost", "u-ghost", "node1"),
            r#"{"Error":"unknown pod ml/ghost (uid u-ghost): muster has not seen it; it may have been deleted"}"#,
        ),
        (
            bind_args("m", "u-m", "node9"),
            r#"{"Error":"unknown node \"node9\": muster has no such node in its cache"}"#,
        ),
    ];
    for (req, want) in cases {
        let (status, body) = f.post("/bind", &req).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, want);
        assert_eq!(f.seats(), 0);
    }
    assert!(f.binder.calls.lock().is_empty());
}

// ---------------------------------------------------------------- bad input

#[tokio::test]
async fn malformed_and_mistyped_bodies_get_400_naming_the_problem() {
    let f = Fixture::new(&[node("node1", 1000)]);
    let cases = [
        (
            "/filter",
            "{not json".to_string(),
            "invalid ExtenderArgs JSON: key must be a string at line 1 column 2",
        ),
        (
            "/filter",
            r#"{"Nodes":null,"NodeNames":["node1"]}"#.to_string(),
            "invalid ExtenderArgs JSON: missing field `Pod` at line 1 column 36",
        ),
        (
            "/filter",
            r#"{"Pod":null,"NodeNames":["node1"]}"#.to_string(),
            "invalid ExtenderArgs JSON at Pod: invalid type: null, expected Pod at line 1 column 11",
        ),
        (
            "/filter",
            r#"{"Pod":{"metadata":{"name":"p"}},"NodeNames":"node1"}"#.to_string(),
            "invalid ExtenderArgs JSON at NodeNames: invalid type: string \"node1\", expected a sequence at line 1 column 52",
        ),
        (
            "/prioritize",
            r#"{"Pod":{"spec":{"containers":5}},"NodeNames":[]}"#.to_string(),
            "invalid ExtenderArgs JSON at Pod.spec.containers: invalid type: integer `5`, expected a sequence at line 1 column 30",
        ),
        (
            "/bind",
            r#"{"PodName":"p","PodNamespace":"ml","Node":"node1"}"#.to_string(),
            "invalid ExtenderBindingArgs JSON: missing field `PodUID` at line 1 column 50",
        ),
        (
            "/bind",
            r#"{"PodName":"p","PodNamespace":"ml","PodUid":"u","Node":"node1"}"#.to_string(),
            "invalid ExtenderBindingArgs JSON: missing field `PodUID` at line 1 column 63",
        ),
        (
            "/bind",
            "".to_string(),
            "invalid ExtenderBindingArgs JSON: EOF while parsing a value at line 1 column 0",
        ),
    ];
    for (path, body, want) in cases {
        let (status, reply) = f.post(path, &body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path} {body}");
        let v: serde_json::Value = serde_json::from_str(&reply).unwrap();
        assert_eq!(v["Error"], want, "{path} {body}");
    }
    // Still serving, nothing changed.
    assert_eq!(f.seats(), 0);
    let (status, _) = f.call("GET", "/healthz", "").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn oversized_bodies_get_413_and_the_server_keeps_serving() {
    let mut f = Fixture::new(&[node("node1", 1000)]);
    f.max_body_bytes = 2048;
    let pod = f.watch_web("100m");
    let many: Vec<String> = (0..500).map(|i| format!("node{i}")).collect();
    let refs: Vec<&str> = many.iter().map(String::as_str).collect();
    let (status, body) = f.post("/filter", &filter_args(&pod, &refs)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        body,
        r#"{"Error":"request body is larger than the limit of 2048 bytes (--max-body-bytes)"}"#
    );
    let (status, _) = f.post("/filter", &filter_args(&pod, &["node1"])).await;
    assert_eq!(status, StatusCode::OK);
    let (_, metrics) = f.call("GET", "/metrics", "").await;
    assert!(
        metrics.contains(r#"muster_requests_total{verb="filter",outcome="bad_request"} 1"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_pod_with_a_bad_quantity_is_refused_with_the_value_named() {
    let f = Fixture::new(&[node("node1", 1000)]);
    let pod = go_pod("web", "u-web", "lots", "{}");
    let (status, body) = f.post("/filter", &filter_args(&pod, &["node1"])).await;
    assert_eq!(status, StatusCode::OK);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["Error"],
        "pod ml/web: invalid quantity \"lots\": expected a decimal number"
    );
}

#[tokio::test]
async fn before_caches_sync_verbs_say_so_and_readyz_is_503() {
    let binder = Arc::new(FakeBinder::default());
    let shared = Arc::new(Shared::new(
        ModelConfig::default(),
        binder,
        EventSink::disabled(),
    ));
    let f = Fixture {
        shared,
        binder: Arc::default(),
        max_body_bytes: 1 << 20,
        bind_wait: std::time::Duration::ZERO,
    };
    let (status, body) = f.call("GET", "/readyz", "").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body, "not ready: pods synced=false, nodes synced=false");
    let (status, _) = f.call("GET", "/healthz", "").await;
    assert_eq!(status, StatusCode::OK);
    let pod = go_pod("web", "u-web", "100m", "{}");
    let (status, body) = f.post("/filter", &filter_args(&pod, &["node1"])).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.ends_with(r#""Error":"muster is starting: its pod and node caches are not synced yet; retry shortly"}"#), "{body}");
    let (_, body) = f.post("/bind", &bind_args("web", "u-web", "node1")).await;
    assert!(body.contains("not synced yet"));
}

/// After a pod or node watch error muster lists again, and until that list is done no verb
/// decides (a bind on a view that missed a pod bound meanwhile would over-commit its node):
/// each answers why, exactly, changes nothing, and decides again once the list is done.
#[tokio::test]
async fn while_a_watch_lists_again_after_an_error_verbs_say_so_and_bind_nothing() {
    let f = Fixture::new(&[node("node1", 1000)]);
    let pod = f.watch_web("100m");
    f.shared.readiness.set_pods_relisting(true);
    let (status, body) = f.post("/filter", &filter_args(&pod, &["node1"])).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body.ends_with(r#""Error":"muster is listing pods again after its watch failed (its view may lack what changed meanwhile); retry shortly"}"#),
        "{body}"
    );
    let (_, body) = f.post("/bind", &bind_args("web", "u-web", "node1")).await;
    assert!(body.contains("muster is listing pods again"), "{body}");
    assert!(
        f.binder.calls.lock().is_empty(),
        "nothing bound while the pods are listed again"
    );
    f.shared.readiness.set_pods_relisting(false);
    f.shared.readiness.set_nodes_relisting(true);
    let (_, body) = f.post("/bind", &bind_args("web", "u-web", "node1")).await;
    assert!(body.contains("muster is listing nodes again"), "{body}");
    f.shared.readiness.set_nodes_relisting(false);
    let (_, body) = f.post("/bind", &bind_args("web", "u-web", "node1")).await;
    assert_eq!(body, r#"{"Error":""}"#, "bound once the list is done");
    assert_eq!(*f.binder.calls.lock(), vec!["ml/web@node1".to_string()]);
}

#[tokio::test]
async fn unknown_paths_and_methods_are_refused_clearly() {
    let f = Fixture::new(&[]);
    let (status, body) = f.post("/filtre", "{}").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("no such endpoint: POST /filtre"), "{body}");
    let (status, _) = f.call("GET", "/filter", "").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn gangs_view_lists_members_and_why_they_wait() {
    let f = Fixture::new(&[node("node1", 150)]);
    let (master, worker) = f.watch_seed_gang("100m");
    f.post("/filter", &filter_args(&worker, &["node1"])).await;
    f.post("/filter", &filter_args(&master, &["node1"])).await;
    let (status, body) = f.call("GET", "/gangs", "").await;
    assert_eq!(status, StatusCode::OK);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let g = &v["gangs"][0];
    assert_eq!(g["namespace"], "ml");
    assert_eq!(g["name"], "ai-gang-job");
    assert_eq!(g["state"], "waiting");
    assert_eq!(g["quorum"], 2);
    assert_eq!(
        g["waiting_reason"],
        "gang ml/ai-gang-job: 1 of 2 members fit"
    );
    assert_eq!(g["members"].as_array().unwrap().len(), 2);
    assert_eq!(g["members"][0]["state"], "pending");
}

// ---------------------------------------------------------------- preempt

/// `go_pod` with `spec.priority` set, as kube-scheduler sends a pod of a PriorityClass.
fn go_pod_with_priority(name: &str, uid: &str, cpu: &str, annotations: &str, p: i32) -> String {
    go_pod(name, uid, cpu, annotations).replace(r#""priority":0"#, &format!(r#""priority":{p}"#))
}

/// Three 1-CPU nodes: a low-priority gang of two runs on n1 and n2 (disruption mode `mode`),
/// a low-priority plain pod on n3.
fn running_gang_fixture(mode: &str) -> Fixture {
    let f = Fixture::new(&[node("n1", 1000), node("n2", 1000), node("n3", 1000)]);
    let mut t = f.shared.table.lock();
    for (name, on) in [("run-0", "n1"), ("run-1", "n2")] {
        t.apply_pod(
            muster::testkit::pod(name)
                .cpu(1000)
                .priority(100)
                .gang("run", 2)
                .annotation("muster.dev/disruption", mode)
                .bound(on)
                .build(),
        );
    }
    t.apply_pod(
        muster::testkit::pod("plain")
            .cpu(1000)
            .priority(100)
            .bound("n3")
            .build(),
    );
    drop(t);
    f
}

fn meta_victims(entries: &[(&str, &[&str], i64)]) -> String {
    let nodes: Vec<String> = entries
        .iter()
        .map(|(node, uids, pdb)| {
            let pods: Vec<String> = uids.iter().map(|u| format!(r#"{{"UID":"{u}"}}"#)).collect();
            format!(
                r#""{node}":{{"Pods":[{}],"NumPDBViolations":{pdb}}}"#,
                pods.join(",")
            )
        })
        .collect();
    format!("{{{}}}", nodes.join(","))
}

#[tokio::test]
async fn preempt_in_node_cache_mode_keeps_the_plain_victim_and_answers_meta_victims() {
    let f = running_gang_fixture("gang");
    let high = go_pod_with_priority("high", "u-high", "1", "{}", 100_000);
    f.watch(&[&high]);
    // nodeCacheCapable: true — Go sends the nil map as null and UIDs only.
    let req = format!(
        r#"{{"Pod":{high},"NodeNameToVictims":null,"NodeNameToMetaVictims":{}}}"#,
        meta_victims(&[
            ("n1", &["uid-run-0"], 0),
            ("n2", &["uid-run-1"], 0),
            ("n3", &["uid-plain"], 1),
        ])
    );
    let (status, body) = f.post("/preempt", &req).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        r#"{"NodeNameToMetaVictims":{"n3":{"Pods":[{"UID":"uid-plain"}],"NumPDBViolations":1}}}"#
    );
    let (_, metrics) = f.call("GET", "/metrics", "").await;
    assert!(
        metrics.contains(r#"muster_preemptions_total{outcome="trimmed"} 1"#),
        "{metrics}"
    );
    assert!(metrics.contains(r#"muster_requests_total{verb="preempt",outcome="ok"} 1"#));
}

#[tokio::test]
async fn a_preempt_call_that_arrives_before_the_watch_delivers_its_pod_waits_for_it() {
    // kube-scheduler calls preempt in the cycle whose filters just failed, often before
    // muster's watch has the new pod. The call waits for the watch (as the filter does), then
    // judges the pod as the watch has it; refused instead, the pod would be asked to retry by
    // an update of itself, which NodeResourcesFit's queueing hint ignores.
    let f = Arc::new(running_gang_fixture("gang"));
    let high = go_pod_with_priority("high", "u-high", "1", "{}", 100_000);
    let req = format!(
        r#"{{"Pod":{high},"NodeNameToVictims":null,"NodeNameToMetaVictims":{}}}"#,
        meta_victims(&[("n1", &["uid-run-0"], 0), ("n3", &["uid-plain"], 0)])
    );
    let call = {
        let f = f.clone();
        tokio::spawn(async move { f.post("/preempt", &req).await })
    };
    // Deliver the pod only once the call waits for it, so the test cannot pass by the pod
    // simply being there first.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while f.shared.cache_waiters() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the preempt call never waited"
        );
        tokio::task::yield_now().await;
    }
    f.watch(&[&high]);
    let (status, body) = call.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        r#"{"NodeNameToMetaVictims":{"n3":{"Pods":[{"UID":"uid-plain"}],"NumPDBViolations":0}}}"#
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preempt_call_that_cannot_get_the_table_within_its_budget_answers_an_error_and_decides_nothing(
) {
    // kube-scheduler waits for the preempt-only entry inside its serial cycle: muster answers
    // within its budget, and past it answers an error (for that ignorable entry
    // kube-scheduler then decides alone, as when muster is away) instead of deciding late.
    let f = running_gang_fixture("gang");
    let high = go_pod_with_priority("high", "u-high", "1", "{}", 100_000);
    f.watch(&[&high]);
    let req = format!(
        r#"{{"Pod":{high},"NodeNameToVictims":null,"NodeNameToMetaVictims":{}}}"#,
        meta_victims(&[("n3", &["uid-plain"], 0)])
    );
    // The one-time repair of a first decision is done (it takes the lock unbounded, once).
    f.shared.start_deciding(std::time::Instant::now());
    // The table stays locked (a long decision elsewhere) until the call has answered.
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let shared = f.shared.clone();
    let holder = std::thread::spawn(move || {
        let _t = shared.table.lock();
        locked_tx.send(()).unwrap();
        let _ = done_rx.recv();
    });
    locked_rx.recv().unwrap();
    let (status, body) = f.post("/preempt", &req).await;
    done_tx.send(()).unwrap();
    holder.join().unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(
        body.contains("could not judge this preemption within its budget of 500 ms"),
        "{body}"
    );
    let (_, metrics) = f.call("GET", "/metrics", "").await;
    assert!(
        metrics.contains(r#"muster_requests_total{verb="preempt",outcome="late"} 1"#),
        "{metrics}"
    );
    // No decision was made: every outcome's series is there, at 0.
    for outcome in ["kept", "trimmed", "refused"] {
        let series = format!("muster_preemptions_total{{outcome=\"{outcome}\"}} 0\n");
        assert!(
            metrics.contains(&series),
            "{series} missing from: {metrics}"
        );
    }
}

#[tokio::test]
async fn preempt_with_whole_victim_pods_answers_in_uids_all_the_same() {
    let f = running_gang_fixture("gang");
    let high = go_pod_with_priority("high", "u-high", "1", "{}", 100_000);
    f.watch(&[&high]);
    let victim = |name: &str, uid: &str| go_pod_with_priority(name, uid, "1", "{}", 100);
    // nodeCacheCapable: false — whole v1.Pods, the meta map null.
    let req = format!(
        r#"{{"Pod":{high},"NodeNameToVictims":{{"n1":{{"Pods":[{}],"NumPDBViolations":0}},"n3":{{"Pods":[{}],"NumPDBViolations":0}}}},"NodeNameToMetaVictims":null}}"#,
        victim("run-0", "uid-run-0"),
        victim("plain", "uid-plain"),
    );
    let (status, body) = f.post("/preempt", &req).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        r#"{"NodeNameToMetaVictims":{"n3":{"Pods":[{"UID":"uid-plain"}],"NumPDBViolations":0}}}"#
    );
}

#[tokio::test]
async fn preempt_for_a_gang_that_cannot_run_answers_no_candidate() {
    let f = Fixture::new(&[node("n1", 1000), node("n2", 1000)]);
    {
        let mut t = f.shared.table.lock();
        for (name, on) in [("a", "n1"), ("b", "n2")] {
            t.apply_pod(
                muster::testkit::pod(name)
                    .cpu(1000)
                    .priority(100)
                    .bound(on)
                    .build(),
            );
        }
    }
    let three = r#"{"muster.dev/group":"big","muster.dev/min-available":"3"}"#;
    let member = go_pod_with_priority("big-0", "u-big-0", "1", three, 100_000);
    let others: Vec<String> = (1..3)
        .map(|i| {
            go_pod_with_priority(
                &format!("big-{i}"),
                &format!("u-big-{i}"),
                "1",
                three,
                100_000,
            )
        })
        .collect();
    // Pods come through the watch first; a request never adds one.
    f.watch(&[&member, &others[0], &others[1]]);
    for other in &others {
        f.post("/filter", &filter_args(other, &["n1", "n2"])).await;
    }
    // Filter says preemption cannot help...
    let (_, body) = f
        .post("/filter", &filter_args(&member, &["n1", "n2"]))
        .await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["FailedNodes"], serde_json::json!({}));
    assert!(v["FailedAndUnresolvableNodes"]["n1"]
        .as_str()
        .unwrap()
        .ends_with("preemption cannot help"));
    // ...and were kube-scheduler to ask anyway, nothing is evicted.
    let req = format!(
        r#"{{"Pod":{member},"NodeNameToVictims":null,"NodeNameToMetaVictims":{}}}"#,
        meta_victims(&[("n1", &["uid-a"], 0), ("n2", &["uid-b"], 0)])
    );
    let (status, body) = f.post("/preempt", &req).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, r#"{"NodeNameToMetaVictims":{}}"#);
}

#[tokio::test]
async fn preempt_that_disrupts_a_gang_whole_queues_its_other_members_for_eviction() {
    let f = running_gang_fixture("gang");
    let mut queue = f.shared.disruptions.take_receiver().unwrap();
    let high = go_pod_with_priority("high", "u-high", "1", "{}", 100_000);
    f.watch(&[&high]);
    let req = format!(
        r#"{{"Pod":{high},"NodeNameToVictims":null,"NodeNameToMetaVictims":{}}}"#,
        meta_victims(&[("n1", &["uid-run-0"], 0), ("n2", &["uid-run-1"], 0)])
    );
    let (_, body) = f.post("/preempt", &req).await;
    assert_eq!(
        body,
        r#"{"NodeNameToMetaVictims":{"n1":{"Pods":[{"UID":"uid-run-0"}],"NumPDBViolations":0}}}"#
    );
    // evict-for-whole: nothing is queued on the answer alone, before kube-scheduler commits.
    assert!(
        queue.try_recv().is_err(),
        "queued before kube-scheduler acted"
    );
    f.shared.submit_committed_disruptions();
    assert!(
        queue.try_recv().is_err(),
        "queued before kube-scheduler acted"
    );
    // kube-scheduler evicts its victim on n1: the watch shows its deletionTimestamp.
    let mut run0 = muster::testkit::pod("run-0")
        .cpu(1000)
        .priority(100)
        .gang("run", 2)
        .annotation("muster.dev/disruption", "gang")
        .bound("n1")
        .build();
    run0.terminating = true;
    f.shared.table.lock().apply_pod(run0);
    f.shared.submit_committed_disruptions();
    let d = queue.try_recv().expect("a disruption was queued");
    assert_eq!(&*d.gang.name, "run");
    let names: Vec<&str> = d.others.iter().map(|p| &*p.name).collect();
    assert_eq!(names, vec!["run-1"]);
}

/// derived: the priority in the body counts for nothing. The watch has `low` at priority 100,
/// the body claims 100000; the running gang (priority 100) is no victim for it, and a plain
/// victim of its own priority is none either: no candidate, nothing queued.
#[tokio::test]
async fn preempt_with_a_forged_priority_judges_the_cached_one_and_keeps_no_candidate() {
    let f = running_gang_fixture("gang");
    let mut queue = f.shared.disruptions.take_receiver().unwrap();
    let low = go_pod_with_priority("low", "u-low", "1", "{}", 100);
    f.watch(&[&low]);
    let forged = go_pod_with_priority("low", "u-low", "1", "{}", 100_000);
    let req = format!(
        r#"{{"Pod":{forged},"NodeNameToVictims":null,"NodeNameToMetaVictims":{}}}"#,
        meta_victims(&[("n1", &["uid-run-0"], 0), ("n3", &["uid-plain"], 0)])
    );
    let (status, body) = f.post("/preempt", &req).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, r#"{"NodeNameToMetaVictims":{}}"#);
    assert!(queue.try_recv().is_err());
    let (_, metrics) = f.call("GET", "/metrics", "").await;
    assert!(metrics.contains(r#"muster_preemptions_total{outcome="refused"} 1"#));
}

/// derived: a victim is judged where muster's cache has it. n1's victim is run-1, which runs on
/// n2; n3's is a UID muster does not know; only n2 (its own victim, run-1, on it) is kept.
#[tokio::test]
async fn preempt_drops_candidates_whose_victims_are_not_on_their_node() {
    let f = running_gang_fixture("pod");
    let high = go_pod_with_priority("high", "u-high", "1", "{}", 100_000);
    f.watch(&[&high]);
    let req = format!(
        r#"{{"Pod":{high},"NodeNameToVictims":null,"NodeNameToMetaVictims":{}}}"#,
        meta_victims(&[
            ("n1", &["uid-run-1"], 0),
            ("n2", &["uid-run-1"], 0),
            ("n3", &["uid-forged"], 0),
        ])
    );
    let (status, body) = f.post("/preempt", &req).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        r#"{"NodeNameToMetaVictims":{"n2":{"Pods":[{"UID":"uid-run-1"}],"NumPDBViolations":0}}}"#
    );
}

/// derived: a preemptor the watch has not delivered is refused, whatever the body says.
#[tokio::test]
async fn preempt_for_a_pod_muster_has_not_seen_keeps_no_candidate() {
    let f = running_gang_fixture("gang");
    let high = go_pod_with_priority("high", "u-high", "1", "{}", 100_000);
    let req = format!(
        r#"{{"Pod":{high},"NodeNameToVictims":null,"NodeNameToMetaVictims":{}}}"#,
        meta_victims(&[("n3", &["uid-plain"], 0)])
    );
    let (status, body) = f.post("/preempt", &req).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, r#"{"NodeNameToMetaVictims":{}}"#);
}

#[tokio::test]
async fn malformed_preempt_bodies_get_400_naming_the_json_path() {
    let f = Fixture::new(&[node("n1", 1000)]);
    let pod = go_pod("web", "u-web", "100m", "{}");
    let cases = [
        (
            r#"{"NodeNameToVictims":null,"NodeNameToMetaVictims":{}}"#.to_string(),
            "invalid ExtenderPreemptionArgs JSON: missing field `Pod` at line 1 column 53",
        ),
        (
            format!(r#"{{"Pod":{pod},"NodeNameToMetaVictims":{{"n1":{{"Pods":[{{"Uid":"x"}}],"NumPDBViolations":0}}}}}}"#),
            "invalid ExtenderPreemptionArgs JSON at NodeNameToMetaVictims.n1.Pods[0]: missing field `UID`",
        ),
        (
            format!(r#"{{"Pod":{pod},"NodeNameToMetaVictims":{{"n1":{{"Pods":[],"NumPDBViolations":"1"}}}}}}"#),
            "invalid ExtenderPreemptionArgs JSON at NodeNameToMetaVictims.n1.NumPDBViolations: invalid type: string \"1\", expected i64",
        ),
        (
            format!(r#"{{"Pod":{pod},"NodeNameToVictims":{{"n1":{{"Pods":[{{"metadata":{{}}}}],"NumPDBViolations":0}}}}}}"#),
            "invalid ExtenderPreemptionArgs JSON at NodeNameToVictims.n1.Pods[0].metadata: missing field `uid`",
        ),
    ];
    for (body, want) in cases {
        let (status, reply) = f.post("/preempt", &body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        let v: serde_json::Value = serde_json::from_str(&reply).unwrap();
        let got = v["Error"].as_str().unwrap();
        assert!(got.starts_with(want), "got {got:?}, want {want:?}");
    }
    let (_, metrics) = f.call("GET", "/metrics", "").await;
    assert!(metrics.contains(r#"muster_requests_total{verb="preempt",outcome="bad_request"} 4"#));
}

/// The figures the suite's timing limits are derived from (`muster_harness::timing`) are
/// muster's own defaults and constants: a change to one of them fails here, not as a flaky limit.
#[test]
fn the_suites_timing_figures_are_musters_defaults() {
    use clap::Parser;
    use muster_harness::timing;
    let args = muster::config::Args::try_parse_from(["muster"]).unwrap();
    assert_eq!(args.creation_window, timing::CREATION_WINDOW);
    assert_eq!(args.leader_elect_lease_duration, timing::LEASE_DURATION);
    assert_eq!(args.leader_elect_renew_deadline, timing::RENEW_DEADLINE);
    assert_eq!(args.leader_elect_retry_period, timing::RETRY_PERIOD);
    assert_eq!(muster::cluster::gather::TICK, timing::MUSTER_TICK);
    assert_eq!(muster::http::ANSWER_MARGIN, timing::ANSWER_MARGIN);
    assert_eq!(
        muster::cluster::binder::RetryPolicy::default().budget,
        timing::BINDING_BUDGET
    );
}

#[path = "router/whole.rs"]
mod whole;

#[path = "router/in_flight.rs"]
mod in_flight;

#[path = "router/outlived.rs"]
mod outlived;

#[path = "router/woken.rs"]
mod woken;
