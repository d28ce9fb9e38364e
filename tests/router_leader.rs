//! Router tests of leader election: what a standby and a deposed leader answer, byte for byte
//! as kube-scheduler reads it. No cluster: the election's verdicts are set by hand.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;

use muster::http::AppState;
use muster::model::ModelConfig;
use muster::state::event_sink::EventSink;
use muster::state::leadership::Leadership;
use muster::state::Shared;

#[path = "router/kit.rs"]
mod kit;
use kit::{bind_args, FakeBinder};

struct Replica {
    shared: Arc<Shared>,
    binder: Arc<FakeBinder>,
    bind_wait: Duration,
}

struct Answer {
    status: StatusCode,
    connection: Option<String>,
    body: String,
}

impl Replica {
    /// A replica named muster-b with synced caches (two nodes, a gang of two pods), leader
    /// election on, and not yet told anything by the election.
    fn new(bind_wait: Duration) -> Self {
        let binder = Arc::new(FakeBinder::default());
        let shared = Shared::new(
            ModelConfig::default(),
            binder.clone(),
            EventSink::disabled(),
        )
        .with_leadership(Leadership::candidate("muster-b", "muster-system", "muster"));
        for n in ["node1", "node2"] {
            shared
                .table
                .lock()
                .apply_node(muster::testkit::node(n).cpu(4000).build());
        }
        for (name, uid) in [("w0", "u-w0"), ("w1", "u-w1")] {
            let pod = muster::testkit::pod(name)
                .namespace("ml")
                .cpu(100)
                .gang("ai-gang-job", 2)
                .build();
            let pod = muster::model::PodInfo {
                uid: uid.into(),
                ..pod
            };
            shared.table.lock().apply_pod(pod);
        }
        shared.readiness.set_pods_synced();
        shared.readiness.set_nodes_synced();
        Replica {
            shared: Arc::new(shared),
            binder,
            bind_wait,
        }
    }

    async fn call(&self, method: &str, path: &str, body: &str) -> Answer {
        let state = AppState {
            shared: self.shared.clone(),
            max_body_bytes: 1 << 20,
            bind_wait: self.bind_wait,
        };
        let (status, headers, body) = kit::call(state, method, path, body).await;
        Answer {
            status,
            connection: headers
                .get("connection")
                .map(|v| v.to_str().unwrap().to_string()),
            body,
        }
    }

    fn seats(&self) -> u64 {
        self.shared.table.lock().gauges(Instant::now()).seats
    }
}

/// A gang member as Go's encoding/json writes a v1.Pod.
fn go_pod(name: &str, uid: &str) -> String {
    format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ml","uid":"{uid}","resourceVersion":"612","creationTimestamp":"2026-11-29T10:00:00Z","annotations":{{"muster.dev/group":"ai-gang-job","muster.dev/min-available":"2"}}}},"spec":{{"containers":[{{"name":"main","image":"busybox","resources":{{"requests":{{"cpu":"100m"}}}}}}],"schedulerName":"default-scheduler","priority":0}},"status":{{"phase":"Pending"}}}}"#
    )
}

fn filter_args(name: &str, uid: &str) -> String {
    format!(
        r#"{{"Pod":{},"Nodes":null,"NodeNames":["node1","node2"]}}"#,
        go_pod(name, uid)
    )
}

const STANDBY: &str = "muster replica muster-b is the standby, not the leader: muster-a holds Lease muster-system/muster and answers the verbs";

#[tokio::test]
async fn a_standby_answers_every_verb_with_an_error_naming_the_leader_and_decides_nothing() {
    let r = Replica::new(Duration::ZERO);
    r.shared.leadership.follow(Some("muster-a".into()));

    let a = r.call("POST", "/filter", &filter_args("w0", "u-w0")).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(
        a.body,
        format!(
            r#"{{"Nodes":null,"NodeNames":null,"FailedNodes":{{}},"FailedAndUnresolvableNodes":{{}},"Error":"{STANDBY}"}}"#
        )
    );
    assert_eq!(
        a.connection.as_deref(),
        Some("close"),
        "so kube-scheduler reconnects"
    );

    let a = r
        .call("POST", "/bind", &bind_args("w0", "u-w0", "node1"))
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.body, format!(r#"{{"Error":"{STANDBY}"}}"#));
    assert_eq!(a.connection.as_deref(), Some("close"));

    let a = r
        .call("POST", "/prioritize", &filter_args("w0", "u-w0"))
        .await;
    assert_eq!(
        a.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "kube-scheduler ignores it"
    );
    assert_eq!(a.body, format!(r#"{{"Error":"{STANDBY}"}}"#));

    assert_eq!(r.seats(), 0, "a standby takes no seat");
    assert!(r.binder.calls.lock().is_empty(), "and binds nothing");

    // Ready (caches synced), so a drain or a rolling update can count on it; the Service
    // routes by the leader label, not by readiness.
    let a = r.call("GET", "/readyz", "").await;
    assert_eq!(
        a.status,
        StatusCode::OK,
        "a standby with synced caches is Ready"
    );
    assert_eq!(a.body, format!("ok, not deciding: {STANDBY}"));
    let a = r.call("GET", "/healthz", "").await;
    assert_eq!(a.status, StatusCode::OK, "alive: it must not be restarted");
    let a = r.call("GET", "/metrics", "").await;
    assert!(a.body.contains("\nmuster_leader 0\n"), "{}", a.body);
}

#[tokio::test]
async fn a_standby_with_no_leader_known_says_so() {
    let r = Replica::new(Duration::ZERO);
    let a = r.call("GET", "/readyz", "").await;
    assert_eq!(
        a.body,
        "ok, not deciding: muster replica muster-b is the standby, not the leader: no replica holds Lease muster-system/muster yet"
    );
    let a = r.call("POST", "/filter", &filter_args("w0", "u-w0")).await;
    assert!(
        a.body
            .contains(r#""Error":"muster replica muster-b is the standby"#),
        "{}",
        a.body
    );
}

#[tokio::test]
async fn the_leader_decides_and_keeps_its_connections() {
    let r = Replica::new(Duration::ZERO);
    let now = Instant::now();
    r.shared
        .leadership
        .lead_until(now + Duration::from_secs(10), now);
    let a = r.call("GET", "/readyz", "").await;
    assert_eq!((a.status, a.body.as_str()), (StatusCode::OK, "ok"));
    let a = r.call("GET", "/metrics", "").await;
    assert!(a.body.contains("\nmuster_leader 1\n"), "{}", a.body);
    let a = r
        .call("POST", "/bind", &bind_args("w0", "u-w0", "node1"))
        .await;
    assert_eq!(
        a.body,
        r#"{"Error":"gang ml/ai-gang-job waiting for quorum: 1/2 members have nodes"}"#
    );
    assert_eq!(a.connection, None);
    assert!(r.seats() > 0);
}

#[tokio::test]
async fn a_leader_past_its_renew_deadline_refuses_without_being_told() {
    let r = Replica::new(Duration::ZERO);
    let now = Instant::now();
    r.shared
        .leadership
        .lead_until(now + Duration::from_millis(50), now);
    tokio::time::sleep(Duration::from_millis(60)).await;
    let a = r
        .call("POST", "/bind", &bind_args("w0", "u-w0", "node1"))
        .await;
    assert_eq!(
        a.body,
        r#"{"Error":"muster replica muster-b is not the leader: it could not renew Lease muster-system/muster within its renew deadline and has stopped deciding; the replica that takes the Lease over answers"}"#
    );
    assert_eq!(r.seats(), 0);
}

#[tokio::test]
async fn a_bind_call_held_when_the_leader_steps_down_fails_naming_the_new_leader() {
    let r = Arc::new(Replica::new(Duration::from_secs(30)));
    let now = Instant::now();
    r.shared
        .leadership
        .lead_until(now + Duration::from_secs(30), now);
    let held = {
        let r = r.clone();
        tokio::spawn(async move {
            r.call("POST", "/bind", &bind_args("w0", "u-w0", "node1"))
                .await
        })
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while r.seats() == 0 {
        assert!(Instant::now() < deadline, "w0 never took its seat");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // What the election loop does when another replica is seen holding the Lease.
    assert!(r.shared.leadership.follow(Some("muster-a".into())));
    r.shared.step_down();
    let a = tokio::time::timeout(Duration::from_secs(5), held)
        .await
        .expect("the held call answers at once, not after --bind-wait")
        .unwrap();
    assert_eq!(a.body, format!(r#"{{"Error":"{STANDBY}"}}"#));
    assert_eq!(r.seats(), 0, "the seats went with the old table");
    assert!(r.binder.calls.lock().is_empty());
}
