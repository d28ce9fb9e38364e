//! A held bind call and a watch event that lands between its decision and its hold.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::oneshot;

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

thread_local! {
    /// Taken by the next bind call of this thread woken from its hold, between the wake-up and
    /// its new decision: it says it got there, and waits to be let go on.
    static AFTER_WAKE: RefCell<Option<(oneshot::Sender<()>, oneshot::Receiver<()>)>> =
        const { RefCell::new(None) };
}

/// The other hook in `bind`: parks a woken call before it decides again, once.
pub(super) async fn between_wake_and_decision() {
    if let Some((there, go_on)) = AFTER_WAKE.with(|w| w.borrow_mut().take()) {
        let _ = there.send(());
        let _ = go_on.await;
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

/// Muster's shared state with default settings, no Events, and bindings recorded.
fn recording_muster() -> (Arc<Recording>, Arc<Shared>) {
    let binder = Arc::new(Recording::default());
    let shared = Arc::new(Shared::new(
        ModelConfig::default(),
        binder.clone(),
        EventSink::disabled(),
    ));
    (binder, shared)
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
    let (binder, shared) = recording_muster();
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
    let (binder, shared) = recording_muster();
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

/// Calls woken together. A gathered gang of two, let through (seats nominated, gates removed);
/// `a`'s bind call is held for quorum, and woken (room freed somewhere: every held call of the
/// gang decides again). Before `a` decides again — in production, calls woken together queue
/// for the table's lock — `b`'s call comes. `a` is still kube-scheduler's (its call is open), so
/// `b` completes the quorum and the gang is bound whole at once; no seat is let go. Before, a
/// woken call's mark ended with its hold, `b` found `a`'s seat let go (planned again, counted in
/// `muster_gathered_seats_let_go_total`, nominated again) and was held until `a` decided again.
#[tokio::test]
async fn a_call_woken_to_decide_again_still_counts_as_held_for_its_siblings() {
    use crate::model::gather::{Gatherer, Nominations, GATHER_GATE};
    let (binder, shared) = recording_muster();
    let members =
        ["a", "b"].map(|m| crate::testkit::gathered(pod(m).cpu(600).gang("g", 2).build()));
    let seats: Vec<(String, String)> = {
        let mut t = shared.table.lock();
        for n in ["n1", "n2"] {
            t.apply_node(node(n).cpu(1000).build());
        }
        for m in &members {
            t.apply_pod(m.clone());
        }
        let plan = Gatherer::new(true)
            .nominating(Nominations::EverySeat)
            .gather(&mut t, std::time::Instant::now());
        assert_eq!(plan.releases.len(), 1, "{plan:?}");
        // Written: every seat nominated, then every gate removed.
        for (p, n) in &plan.releases[0].nominate {
            let mut let_through = members.iter().find(|m| m.uid == p.uid).unwrap().clone();
            if let Some(r) = let_through.rules.as_mut() {
                r.scheduling_gates.retain(|g| g != GATHER_GATE);
            }
            let_through.nominated_node = Some(n.clone());
            t.apply_pod(let_through);
        }
        let mut seats: Vec<(String, String)> = plan.releases[0]
            .nominate
            .iter()
            .map(|(p, n)| (p.name.to_string(), n.to_string()))
            .collect();
        seats.sort();
        seats
    };
    shared.readiness.set_pods_synced();
    shared.readiness.set_nodes_synced();
    let gang = crate::model::GangKey::new("ml", "g");
    let (there, parked) = oneshot::channel();
    let (go_on, resume) = oneshot::channel();

    let a = call(
        &shared,
        request("a", "uid-a", &seats[0].1),
        Duration::from_secs(20),
    );
    let sibling = async {
        for _ in 0..1000 {
            if shared.held.is_holding(&gang) {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(shared.held.is_holding(&gang), "a's call is held");
        AFTER_WAKE.with(|w| *w.borrow_mut() = Some((there, resume)));
        shared.held.wake(&gang);
        parked
            .await
            .expect("a's call woke and stopped before deciding again");
        let b = tokio::time::timeout(
            Duration::from_secs(5),
            call(
                &shared,
                request("b", "uid-b", &seats[1].1),
                Duration::from_secs(20),
            ),
        )
        .await;
        let let_go = shared.metrics.gathered_seats_let_go.get();
        let _ = go_on.send(());
        (b, let_go)
    };
    let (a, (b, let_go)) = tokio::join!(a, sibling);
    assert_eq!(let_go, 0, "no seat let go: a's call was open");
    assert_eq!(
        b.expect("b completed the quorum at once, not held waiting for a"),
        Ok(())
    );
    assert_eq!(a, Ok(()));
    let mut calls = binder.0.lock().clone();
    calls.sort();
    assert_eq!(
        calls,
        [
            format!("ml/a@{}", seats[0].1),
            format!("ml/b@{}", seats[1].1)
        ]
    );
}
