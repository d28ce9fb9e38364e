//! Room asked of the cluster autoscaler for a gathered gang, round by round.

use std::time::{Duration, Instant};

use crate::model::gather::{Gatherer, MemberShape, PoolRequirement, PoolRoom};
use crate::model::notice::NoticeKind;
use crate::model::objects::{Taint, Toleration, TolerationOperator};
use crate::model::table::GangTable;
use crate::model::{GangKey, ModelConfig, NodeInfo};
use crate::testkit::{self, gathered, pod};

const BOUND: Duration = Duration::from_secs(300);

fn node(name: &str, cpu_milli: i64) -> NodeInfo {
    testkit::node(name).cpu(cpu_milli).build()
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
        requirements: vec![],
        // The label the members of these tests select.
        labels: vec![("pool".into(), "gpu".into())],
        taints: vec![],
    }
}

fn requirement(key: &str, operator: &str, values: &[&str]) -> PoolRequirement {
    PoolRequirement {
        key: key.into(),
        operator: operator.into(),
        values: values.iter().map(|v| v.to_string()).collect(),
    }
}

fn shape(selector: &[(&str, &str)], tolerations: Vec<Toleration>) -> MemberShape {
    MemberShape {
        requests: Default::default(),
        node_selector: selector
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        tolerations: tolerations.into(),
    }
}

/// Karpenter's rule for the labels a NodePool's nodes may have; its taints judged by
/// kube-scheduler's TaintToleration rule (`rules::taint_toleration`), as on a node.
#[test]
fn a_pool_admits_members_whose_selector_its_labels_and_requirements_allow_and_who_tolerate_its_taints(
) {
    let bare = PoolRoom {
        labels: vec![],
        ..pool("p", None)
    };
    // Well-known labels come from instance types muster does not read: allowed.
    assert_eq!(
        bare.admits(&shape(
            &[
                ("kubernetes.io/arch", "arm64"),
                ("topology.kubernetes.io/zone", "z1"),
                ("karpenter.kwok.sh/instance-family", "c")
            ],
            vec![]
        )),
        Ok(())
    );
    // A label of its own no requirement or template label gives: refused.
    assert_eq!(
        bare.admits(&shape(&[("example.com/accel", "tpu")], vec![])),
        Err(
            "nodeSelector example.com/accel=tpu, a label none of its requirements or template \
             labels gives its nodes"
                .into()
        )
    );
    let with = |r: PoolRequirement| PoolRoom {
        requirements: vec![r],
        ..bare.clone()
    };
    let tpu = shape(&[("example.com/accel", "tpu")], vec![]);
    assert_eq!(
        with(requirement("example.com/accel", "In", &["tpu", "gpu"])).admits(&tpu),
        Ok(())
    );
    assert_eq!(
        with(requirement("example.com/accel", "Exists", &[])).admits(&tpu),
        Ok(())
    );
    assert_eq!(
        with(requirement("example.com/accel", "In", &["gpu"])).admits(&tpu),
        Err("nodeSelector example.com/accel=tpu, against its requirement example.com/accel In [gpu]".into())
    );
    assert!(with(requirement("example.com/accel", "NotIn", &["tpu"]))
        .admits(&tpu)
        .is_err());
    assert!(with(requirement("example.com/accel", "DoesNotExist", &[]))
        .admits(&tpu)
        .is_err());
    assert!(with(requirement("kubernetes.io/arch", "In", &["amd64"]))
        .admits(&shape(&[("kubernetes.io/arch", "arm64")], vec![]))
        .is_err());
    // karpenter.sh/nodepool is the pool's name.
    assert_eq!(
        bare.admits(&shape(&[("karpenter.sh/nodepool", "p")], vec![])),
        Ok(())
    );
    assert!(bare
        .admits(&shape(&[("karpenter.sh/nodepool", "q")], vec![]))
        .is_err());
    // Template labels are what every node has.
    assert!(pool("p", None)
        .admits(&shape(&[("pool", "cpu")], vec![]))
        .is_err());
    // Taints must be tolerated.
    let tainted = PoolRoom {
        taints: vec![Taint {
            key: "dedicated".into(),
            value: "ml".into(),
            effect: "NoSchedule".into(),
        }],
        ..bare.clone()
    };
    assert_eq!(
        tainted.admits(&shape(&[], vec![])),
        Err("its nodes' taint dedicated=ml:NoSchedule, which the members do not tolerate".into())
    );
    let tolerates = Toleration {
        key: "dedicated".into(),
        operator: TolerationOperator::Equal,
        value: "ml".into(),
        effect: String::new(),
    };
    assert_eq!(tainted.admits(&shape(&[], vec![tolerates])), Ok(()));
}

/// A gang whose members no pool's nodes could take gets no buffer (no node would serve it),
/// and its members hear each pool's reason; a pool that admits them brings the ask back.
#[test]
fn a_gang_no_pools_nodes_could_take_is_not_asked_for_and_hears_each_pools_reason() {
    let mut t = table(
        Some(BOUND),
        &[testkit::node("n1").cpu(3000).label("pool", "gpu").build()],
    );
    gang_of_4(&mut t);
    let mut g = Gatherer::new(true);
    let now = Instant::now();
    g.gather(&mut t, now);
    t.take_notices();
    let cpu_pool = PoolRoom {
        labels: vec![],
        requirements: vec![requirement("pool", "In", &["cpu"])],
        ..pool("cpu", None)
    };
    let tainted = PoolRoom {
        taints: vec![Taint {
            key: "dedicated".into(),
            value: String::new(),
            effect: "NoExecute".into(),
        }],
        ..pool("reserved", None)
    };
    t.judge_against_pools(&[cpu_pool.clone(), tainted]);
    assert!(t.capacity_asks().is_empty(), "{:?}", t.capacity_asks());
    let told: Vec<String> = t
        .take_notices()
        .into_iter()
        .filter(|n| n.kind == NoticeKind::Waiting)
        .map(|n| n.message)
        .collect();
    assert!(!told.is_empty());
    assert!(
        told.iter().all(|m| m
            == "gang ml/g: 1 members do not fit on the nodes that exist, and no NodePool may add \
                a node they could use (NodePool cpu: nodeSelector pool=gpu, against its \
                requirement pool In [cpu]; NodePool reserved: its nodes' taint dedicated:NoExecute, \
                which the members do not tolerate); no node is asked for, the gang waits for room, \
                holding nothing"),
        "{told:?}"
    );
    t.judge_against_pools(&[cpu_pool, pool("gpu", None)]);
    assert_eq!(t.capacity_asks().len(), 1);
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
