//! `muster_events_dropped_total` (docs/operating.md metrics table): "Events dropped because the API server
//! was too slow to take them". Provoking it on a real cluster needs more notices than the
//! publisher's queue holds (4,096) queued while the API server stalls, i.e. thousands of
//! scheduling decisions; here the queue is made small and never drained, which is exactly the
//! state a stalled publisher leaves it in. The end-to-end metrics test checks the counter stays 0
//! in a normal run (`tests/e2e/claims.rs`).

use muster::metrics::Metrics;
use muster::model::{GangGauges, Notice, NoticeKind, PodRef};
use muster::state::event_sink::EventSink;

fn notice(i: usize) -> Notice {
    Notice {
        pod: PodRef {
            namespace: "ml".into(),
            name: format!("worker-{i}").into(),
            uid: format!("uid-{i}").into(),
        },
        kind: NoticeKind::Waiting,
        message: "gang ml/job: 1 of 2 members fit".into(),
    }
}

#[test]
fn notices_beyond_a_full_publisher_queue_are_dropped_and_counted_in_metrics() {
    let (sink, mut queue) = EventSink::channel(2);
    let metrics = Metrics::new(sink.dropped_counter());
    let before = metrics.render(GangGauges::default(), 0, 0);
    assert!(
        before.lines().any(|l| l == "muster_events_dropped_total 0"),
        "{before}"
    );

    // Nobody takes from the queue (a publisher stuck on a slow API server).
    sink.send_all((0..5).map(notice).collect());

    let kept: Vec<String> = std::iter::from_fn(|| queue.try_recv().ok())
        .map(|n| n.pod.name.to_string())
        .collect();
    assert_eq!(kept, ["worker-0", "worker-1"], "the queue keeps the oldest");
    let after = metrics.render(GangGauges::default(), 0, 0);
    assert!(
        after.lines().any(|l| l == "muster_events_dropped_total 3"),
        "{after}"
    );

    // Room again: the next notice is queued, not dropped.
    sink.send_all(vec![notice(5)]);
    assert_eq!(
        queue.try_recv().map(|n| n.pod.name.to_string()).ok(),
        Some("worker-5".to_string())
    );
    let last = metrics.render(GangGauges::default(), 0, 0);
    assert!(
        last.lines().any(|l| l == "muster_events_dropped_total 3"),
        "{last}"
    );
}
