//! Room asked of the cluster autoscaler for a gathered gang, round by round.

use std::time::{Duration, Instant};

use crate::model::gather::{Gatherer, PoolRoom, GATHER_GATE};
use crate::model::notice::NoticeKind;
use crate::model::objects::PodRules;
use crate::model::table::GangTable;
use crate::model::{GangKey, ModelConfig, NodeInfo, PodInfo};
use crate::testkit::{self, pod};

const BOUND: Duration = Duration::from_secs(300);

fn node(name: &str, cpu_milli: i64) -> NodeInfo {
    testkit::node(name).cpu(cpu_milli).build()
}

/// As deploy/gang-admission-policy.yaml creates it: marked, gated.
fn gathered(mut p: PodInfo) -> PodInfo {
    p.gang_marker = true;
    let mut rules: PodRules = p.rules.take().map(|b| *b).unwrap_or_default();
    rules.scheduling_gates.push(GATHER_GATE.to_string());
    p.rules = Some(Box::new(rules));
    p
}

fn table(capacity_buffers: Option<Duration>, nodes: &[NodeInfo]) -> GangTable {
    let mut t = GangTable::new(ModelConfig {
        capacity_buffers,
        ..ModelConfig::default()
    });
    for n in nodes {
        t.apply_node(n.clone());
    }
    t
}

/// A gang of 4 members of 1 CPU, 3 of which fit on `n1`.
fn gang_of_4(t: &mut GangTable) {
    for i in 0..4 {
        t.apply_pod(gathered(
            pod(&format!("m{i}"))
                .cpu(1000)
                .gang("g", 4)
                .node_selector("pool", "gpu")
                .build(),
        ));
    }
}

#[test]
fn a_gang_short_of_room_alone_asks_for_the_whole_gang_and_says_so() {
    let mut t = table(
        Some(BOUND),
        &[testkit::node("n1").cpu(3000).label("pool", "gpu").build()],
    );
    gang_of_4(&mut t);
    let mut g = Gatherer::new(true);
    let now = Instant::now();
    let plan = g.gather(&mut t, now);
    assert!(plan.releases.is_empty(), "{plan:?}");
    let asks = t.capacity_asks();
    assert_eq!(asks.len(), 1, "{asks:?}");
    let a = &asks[0];
    assert_eq!(a.gang, GangKey::new("ml", "g"));
    // Every member the quorum needs a node for: the autoscaler fills the room that exists first.
    assert_eq!((a.replicas, a.short), (4, 1), "{a:?}");
    assert_eq!(a.shape.requests.cpu_milli, 1000);
    assert!(
        a.shape.requests.extended.is_empty(),
        "the marker is no node's: {a:?}"
    );
    assert_eq!(
        a.shape.node_selector,
        [("pool".to_string(), "gpu".to_string())]
    );
    let notices = t.take_notices();
    assert!(
        notices.iter().any(|n| n.kind == NoticeKind::Waiting
            && n.message.contains("3 of 4 members fit")
            && n.message.contains("cluster autoscaler is asked for")),
        "{notices:?}"
    );
}

#[test]
fn nothing_is_asked_without_the_flag() {
    let mut t = table(
        None,
        &[testkit::node("n1").cpu(3000).label("pool", "gpu").build()],
    );
    gang_of_4(&mut t);
    Gatherer::new(true).gather(&mut t, Instant::now());
    assert!(t.capacity_asks().is_empty());
}

#[test]
fn the_ask_goes_once_the_gang_fits_and_is_admitted() {
    let mut t = table(
        Some(BOUND),
        &[testkit::node("n1").cpu(3000).label("pool", "gpu").build()],
    );
    gang_of_4(&mut t);
    let mut g = Gatherer::new(true);
    let now = Instant::now();
    g.gather(&mut t, now);
    assert_eq!(t.capacity_asks().len(), 1);
    // The node the autoscaler added.
    t.apply_node(testkit::node("n2").cpu(4000).label("pool", "gpu").build());
    let plan = g.gather(&mut t, now + Duration::from_secs(3));
    assert_eq!(plan.releases.len(), 1, "{plan:?}");
    assert!(t.capacity_asks().is_empty(), "{:?}", t.capacity_asks());
}

#[test]
fn a_gang_a_rule_stops_asks_for_nothing() {
    // No node is in pool gpu: nodes added for room would not take the members either.
    let mut t = table(Some(BOUND), &[node("n1", 3000)]);
    gang_of_4(&mut t);
    Gatherer::new(true).gather(&mut t, Instant::now());
    assert!(t.capacity_asks().is_empty(), "{:?}", t.capacity_asks());
}

#[test]
fn past_the_bound_the_ask_is_given_up_and_the_gang_told() {
    let mut t = table(
        Some(BOUND),
        &[testkit::node("n1").cpu(3000).label("pool", "gpu").build()],
    );
    gang_of_4(&mut t);
    let mut g = Gatherer::new(true);
    let now = Instant::now();
    g.gather(&mut t, now);
    assert_eq!(t.capacity_asks().len(), 1);
    t.take_notices();
    g.gather(&mut t, now + BOUND + Duration::from_secs(1));
    assert!(t.capacity_asks().is_empty(), "{:?}", t.capacity_asks());
    let notices = t.take_notices();
    assert!(
        notices
            .iter()
            .any(|n| n.message.contains("did not come within 5m")),
        "{notices:?}"
    );
}

fn pool(name: &str, cpu_left: Option<i64>) -> PoolRoom {
    PoolRoom {
        name: name.into(),
        cpu_milli: cpu_left,
        memory: None,
        cpu_limit: "8".into(),
        memory_limit: "none".into(),
    }
}

#[test]
fn a_shortfall_beyond_every_pools_limit_is_not_asked_for_and_names_the_limit() {
    let mut t = table(
        Some(BOUND),
        &[testkit::node("n1").cpu(3000).label("pool", "gpu").build()],
    );
    // 6 members, 3 fit: 3 CPUs short.
    for i in 0..6 {
        t.apply_pod(gathered(
            pod(&format!("m{i}"))
                .cpu(1000)
                .gang("g", 6)
                .node_selector("pool", "gpu")
                .build(),
        ));
    }
    let mut g = Gatherer::new(true);
    let now = Instant::now();
    g.gather(&mut t, now);
    t.take_notices();
    t.judge_against_pools(&[pool("small", Some(2000)), pool("tiny", Some(1000))]);
    assert!(t.capacity_asks().is_empty(), "{:?}", t.capacity_asks());
    let notices = t.take_notices();
    assert!(
        notices
            .iter()
            .any(|n| n.message.contains("NodePool small has 2000m left")
                && n.message.contains("limit cpu 8")),
        "{notices:?}"
    );
    // The next round keeps the same message (no new Event).
    g.gather(&mut t, now + Duration::from_secs(1));
    t.judge_against_pools(&[pool("small", Some(2000)), pool("tiny", Some(1000))]);
    let again = t.take_notices();
    assert!(again.is_empty(), "{again:?}");
    // A pool with room again (its limit raised): asked for.
    t.judge_against_pools(&[pool("small", Some(3000))]);
    assert_eq!(t.capacity_asks().len(), 1);
    // No limit at all: asked for.
    t.judge_against_pools(&[pool("any", None)]);
    assert_eq!(t.capacity_asks().len(), 1);
}

#[test]
fn a_gang_deleted_while_it_waits_asks_for_nothing() {
    let mut t = table(
        Some(BOUND),
        &[testkit::node("n1").cpu(3000).label("pool", "gpu").build()],
    );
    gang_of_4(&mut t);
    let mut g = Gatherer::new(true);
    let now = Instant::now();
    g.gather(&mut t, now);
    assert_eq!(t.capacity_asks().len(), 1);
    for i in 0..4 {
        t.remove_pod(&format!("uid-m{i}"));
    }
    g.gather(&mut t, now + Duration::from_secs(1));
    assert!(t.capacity_asks().is_empty(), "{:?}", t.capacity_asks());
}
