//! A held bind call and a watch event that lands between its decision and its hold.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;

use super::{bind, BindCall};
use crate::model::{BindRequest, ModelConfig, NodeName, PodRef};
use crate::state::binder::{BindError, Binder};
use crate::state::event_sink::EventSink;
use crate::state::Shared;
use crate::testkit::{node, pod};

thread_local! {
    /// Run once by the next bind call of this thread that is held, between its decision and
    /// its hold (the tests run on a current-thread runtime: the call runs on this thread).
    static BETWEEN: RefCell<Option<Box<dyn FnOnce()>>> = RefCell::new(None);
}

/// The hook in `bind`: runs what the test put there, once.
pub(super) fn between_decision_and_hold() {
    if let Some(f) = BETWEEN.with(|b| b.borrow_mut().take()) {
        f();
    }
}

/// Records the bindings; every one succeeds.
#[derive(Default)]
struct Recording(Mutex<Vec<String>>);

impl Binder for Recording {
    fn bind(&self, pod: PodRef, node: NodeName) -> BoxFuture<'static, Result<(), BindError>> {
        self.0.lock().push(format!("{pod}@{node}"));
        Box::pin(async { Ok(()) })
    }
}

fn request<'a>(name: &'a str, uid: &'a str, node: &'a str) -> BindRequest<'a> {
    BindRequest {
        namespace: "ml",
        name,
        uid,
        node,
    }
}

async fn call(
    shared: &Arc<Shared>,
    req: BindRequest<'_>,
    bind_wait: Duration,
) -> Result<(), String> {
    let call = BindCall {
        request: req,
        answer_by: tokio::time::Instant::now() + Duration::from_secs(60),
        bind_wait,
    };
    bind(shared, call, || Ok(())).await
}

/// The watch delivers the deletion of `uid`, then flushes the table's notices (which wakes
/// the bind calls held for gangs whose awaited room was freed), as after every event.
fn watch_deleted(shared: &Shared, uid: &str) {
    shared.table.lock().remove_pod(uid);
    shared.cache_changed();
    shared.flush_notices();
}

/// The lost wake-up. Nodes a and b of 1 CPU; a gang of two 600m members; the master's call
/// gave up waiting and its seat on a is kept; two pods of 500m being deleted use a's room. The
/// worker's call completes the quorum but a's room is still theirs: the call is to be held,
/// waiting for them to go. Both go exactly after that decision and before the hold begins:
/// the wake-up they send finds no held call yet. The call must see the freed room anyway and
/// bind the gang at once, not answer "waiting" when its `--bind-wait` runs out.
#[tokio::test]
async fn room_freed_between_the_decision_and_the_hold_is_not_missed() {
    let binder = Arc::new(Recording::default());
    let shared = Arc::new(Shared::new(
        ModelConfig::default(),
        binder.clone(),
        EventSink::disabled(),
    ));
    {
        let mut t = shared.table.lock();
        for n in ["a", "b"] {
            t.apply_node(node(n).cpu(1000).build());
        }
        for m in ["master", "worker"] {
            t.apply_pod(pod(m).cpu(600).gang("job", 2).build());
        }
    }
    shared.readiness.set_pods_synced();
    shared.readiness.set_nodes_synced();
    let waiting = call(
        &shared,
        request("master", "uid-master", "a"),
        Duration::ZERO,
    )
    .await;
    assert!(
        waiting
            .as_ref()
            .is_err_and(|e| e.contains("waiting for quorum")),
        "{waiting:?}"
    );
    {
        let mut t = shared.table.lock();
        for v in ["victim-0", "victim-1"] {
            t.apply_pod(pod(v).cpu(500).bound("a").terminating().build());
        }
    }
    let freeing = shared.clone();
    BETWEEN.with(|b| {
        *b.borrow_mut() = Some(Box::new(move || {
            let t = freeing.table.lock();
            let reason = t.wait_reason("uid-worker").unwrap_or_default();
            assert!(
                reason.contains("2 pods being deleted on node a"),
                "decided to wait for the room: {reason:?}"
            );
            drop(t);
            watch_deleted(&freeing, "uid-victim-0");
            watch_deleted(&freeing, "uid-victim-1");
        }))
    });
    let bind_wait = Duration::from_secs(20);
    let started = tokio::time::Instant::now();
    let answer = tokio::time::timeout(
        Duration::from_secs(5),
        call(&shared, request("worker", "uid-worker", "b"), bind_wait),
    )
    .await
    .expect("answered at once, long before its --bind-wait (the wake-up was lost)");
    assert!(BETWEEN.with(|b| b.borrow().is_none()), "the hook ran");
    assert_eq!(answer, Ok(()), "after {:?}", started.elapsed());
    let mut calls = binder.0.lock().clone();
    calls.sort();
    assert_eq!(calls, ["ml/master@a", "ml/worker@b"]);
}

/// The nodes the filter offers `pod` of `nodes`.
fn offered<'n>(
    t: &mut crate::model::GangTable,
    pod: &crate::model::PodInfo,
    nodes: &[&'n str],
) -> Vec<&'n str> {
    let verdicts = t.filter(pod, nodes, std::time::Instant::now());
    nodes
        .iter()
        .zip(&verdicts)
        .filter(|(_, v)| matches!(v, crate::model::NodeVerdict::Fits))
        .map(|(n, _)| *n)
        .collect()
}

/// The held call whose gang was placed again. A gang of 4 that prefers one rack; its first
/// member (100m) asks alone and is seated in rack 0 (four nodes of 200m, best fit for copies
/// of it); its bind call is held for quorum. Then its three siblings of 900m appear: the
/// first's filter moves the gang to rack 1 (four nodes of 1000m) and releases its seats in
/// rack 0, waking the held call; before the call looks, the sibling's bind plans the gang
/// anew and the first member has a seat again, in rack 1. The held call must not take that
/// as its own seat and decide again with its node in rack 0 (which would move the seat back
/// and bind the gang across two racks): it answers, saying so, and the seat stays in rack 1.
#[tokio::test]
async fn a_held_call_whose_seat_moved_to_another_rack_answers_and_leaves_it_there() {
    const RACK: &str = "example.com/rack";
    let binder = Arc::new(Recording::default());
    let shared = Arc::new(Shared::new(
        ModelConfig::default(),
        binder.clone(),
        EventSink::disabled(),
    ));
    let member = |i: usize, cpu: i64| {
        pod(&format!("m{i}"))
            .cpu(cpu)
            .gang("g", 4)
            .annotation(crate::model::topology::TOPOLOGY_PREFERRED, RACK)
            .build()
    };
    let names: Vec<String> = (0..2)
        .flat_map(|r| (0..4).map(move |i| format!("r{r}-{i}")))
        .collect();
    let nodes: Vec<&str> = names.iter().map(String::as_str).collect();
    let first = member(0, 100);
    let first_node = {
        let mut t = shared.table.lock();
        for (r, cpu) in [(0, 200), (1, 1000)] {
            for i in 0..4 {
                t.apply_node(
                    node(&format!("r{r}-{i}"))
                        .cpu(cpu)
                        .label(RACK, &format!("rack-{r}"))
                        .build(),
                );
            }
        }
        t.apply_pod(first.clone());
        let offered = offered(&mut t, &first, &nodes);
        assert_eq!(offered.len(), 1, "{offered:?}");
        assert!(offered[0].starts_with("r0-"), "best fit: {offered:?}");
        offered[0].to_string()
    };
    shared.readiness.set_pods_synced();
    shared.readiness.set_nodes_synced();

    let gang = crate::model::GangKey::new("ml", "g");
    let placed_again = async {
        // The held call runs first, to its hold.
        for _ in 0..1000 {
            if shared.held.is_holding(&gang) {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(
            shared.held.is_holding(&gang),
            "the first member's call is held"
        );
        let sibling = member(1, 900);
        let sibling_node = {
            let mut t = shared.table.lock();
            for i in 1..4 {
                t.apply_pod(member(i, 900));
            }
            let offered = offered(&mut t, &sibling, &nodes);
            assert!(
                offered.len() == 1 && offered[0].starts_with("r1-"),
                "the gang moved to rack 1: {offered:?}"
            );
            offered[0].to_string()
        };
        {
            let mut t = shared.table.lock();
            let planned = t.bind(
                request("m1", "uid-m1", &sibling_node),
                std::time::Instant::now(),
            );
            assert!(
                matches!(planned, crate::model::BindDecision::Wait { .. }),
                "{planned:?}"
            );
            assert!(t.holds_seat("uid-m0"), "the first member is seated again");
        }
        shared.cache_changed();
        // The seats released by the move wake the held call.
        shared.flush_notices();
    };
    let held = tokio::time::timeout(
        Duration::from_secs(10),
        call(
            &shared,
            request("m0", "uid-m0", &first_node),
            Duration::from_secs(3),
        ),
    );
    let (answer, ()) = tokio::join!(held, placed_again);
    let answer = answer.expect("answered");
    assert!(
        answer
            .as_ref()
            .is_err_and(|e| e.contains("was placed again") && e.contains(&first_node)),
        "{answer:?}"
    );
    let t = shared.table.lock();
    assert!(
        t.held_seat_lost(&gang, "uid-m0", &first_node).is_some(),
        "the seat is not back on {first_node}"
    );
    assert!(binder.0.lock().is_empty(), "nothing bound");
}
