//! Table tests mirroring kube-scheduler's PodTopologySpread filter (`filtering_test.go`).

use super::*;
use crate::model::inputs::objects::{Taint, Toleration, TolerationOperator};
use crate::model::inputs::terms::NodeSelectorTerm;
use crate::model::rules::fixtures::{
    in_namespace, labelled, node, pod, selector, two_zones_and_a_zoneless_node, zoned,
    PodRulesBuilder, HOSTNAME, ZONE,
};

const OK: Result<(), Reason> = Ok(());
const SKEW: Result<(), Reason> = Err(Reason::SpreadSkew);
const NO_LABEL: Result<(), Reason> = Err(Reason::SpreadMissingLabel);

fn constraint(key: &str, max_skew: i32, sel: LabelSelector) -> SpreadConstraint {
    SpreadConstraint {
        max_skew,
        topology_key: key.to_string(),
        selector: sel,
        match_label_keys: vec![],
        min_domains: 1,
        node_affinity_policy: InclusionPolicy::Honor,
        node_taints_policy: InclusionPolicy::Ignore,
    }
}

fn train(name: &str) -> PodInfo {
    labelled(pod(name), &[("app", "train")])
}

fn spread_pod(c: SpreadConstraint) -> PodInfo {
    PodRulesBuilder::default().spread(c).on(train("p"))
}

/// Verdicts for `incoming` on each node with `bound` pods (node index, pod).
fn verdicts(
    incoming: &PodInfo,
    nodes: &[NodeInfo],
    bound: &[(usize, PodInfo)],
) -> Vec<Result<(), Reason>> {
    let state = PodTopologySpread::new(incoming, nodes, bound.iter().map(|(i, p)| (&nodes[*i], p)));
    nodes.iter().map(|n| state.check(n)).collect()
}

/// PodTopologySpread: matching + self - global minimum must not exceed maxSkew; a node
/// without the topology key is refused.
#[test]
fn skew_against_the_global_minimum() {
    let nodes = two_zones_and_a_zoneless_node();
    let p = spread_pod(constraint(ZONE, 1, selector(&[("app", "train")])));
    assert_eq!(verdicts(&p, &nodes, &[]), [OK, OK, OK, NO_LABEL]);
    assert_eq!(
        verdicts(&p, &nodes, &[(0, train("a"))]),
        [SKEW, SKEW, OK, NO_LABEL]
    );
    assert_eq!(
        verdicts(&p, &nodes, &[(0, train("a")), (2, train("b"))]),
        [OK, OK, OK, NO_LABEL]
    );
    let loose = spread_pod(constraint(ZONE, 2, selector(&[("app", "train")])));
    assert_eq!(
        verdicts(&loose, &nodes, &[(0, train("a"))]),
        [OK, OK, OK, NO_LABEL]
    );
}

/// PodTopologySpread: a pod that does not match its own selector does not add itself.
#[test]
fn a_pod_outside_its_selector_does_not_count_itself() {
    let nodes = two_zones_and_a_zoneless_node();
    let p = PodRulesBuilder::default()
        .spread(constraint(ZONE, 1, selector(&[("app", "train")])))
        .on(labelled(pod("p"), &[("app", "other")]));
    assert_eq!(
        verdicts(&p, &nodes, &[(0, train("a"))]),
        [OK, OK, OK, NO_LABEL]
    );
}

/// PodTopologySpread: fewer eligible domains than minDomains make the global minimum 0.
#[test]
fn min_domains_makes_the_minimum_zero() {
    let nodes = two_zones_and_a_zoneless_node();
    let bound = [(0, train("a")), (2, train("b"))];
    let mut c = constraint(ZONE, 1, selector(&[("app", "train")]));
    assert_eq!(
        verdicts(&spread_pod(c.clone()), &nodes, &bound),
        [OK, OK, OK, NO_LABEL]
    );
    c.min_domains = 3;
    assert_eq!(
        verdicts(&spread_pod(c), &nodes, &bound),
        [SKEW, SKEW, SKEW, NO_LABEL],
        "two zones < minDomains 3: minimum 0, every zone already has 1"
    );
}

/// PodTopologySpread `nodeAffinityPolicy`: Honor (default) leaves nodes the pod cannot use
/// out of the domains; Ignore counts them.
#[test]
fn node_affinity_policy() {
    let mut nodes = two_zones_and_a_zoneless_node();
    nodes[0].labels.insert("pool".into(), "a".into());
    nodes[1].labels.insert("pool".into(), "a".into());
    let pool_a = vec![NodeSelectorTerm::parse(
        [("pool", "In", &["a".to_string()][..])],
        [],
    )];
    let bound = [(0, train("a")), (1, train("b"))];
    let mut c = constraint(ZONE, 1, selector(&[("app", "train")]));
    let p = PodRulesBuilder::default()
        .spread(c.clone())
        .node_affinity(pool_a.clone())
        .on(train("p"));
    assert_eq!(
        verdicts(&p, &nodes, &bound)[..2],
        [OK, OK],
        "Honor: z2 is not the pod's, so z1 is the minimum (2 + 1 - 2)"
    );
    c.node_affinity_policy = InclusionPolicy::Ignore;
    let p = PodRulesBuilder::default()
        .spread(c)
        .node_affinity(pool_a)
        .on(train("p"));
    assert_eq!(
        verdicts(&p, &nodes, &bound)[..2],
        [SKEW, SKEW],
        "Ignore: z2 counts with 0"
    );
}

/// PodTopologySpread `nodeTaintsPolicy`: Ignore (default) counts tainted nodes' domains;
/// Honor leaves out nodes with taints the pod does not tolerate.
#[test]
fn node_taints_policy() {
    let mut nodes = two_zones_and_a_zoneless_node();
    nodes[2].taints.push(Taint {
        key: "dedicated".into(),
        value: String::new(),
        effect: "NoSchedule".into(),
    });
    let bound = [(0, train("a"))];
    let mut c = constraint(ZONE, 1, selector(&[("app", "train")]));
    assert_eq!(
        verdicts(&spread_pod(c.clone()), &nodes, &bound)[..2],
        [SKEW, SKEW]
    );
    c.node_taints_policy = InclusionPolicy::Honor;
    assert_eq!(
        verdicts(&spread_pod(c.clone()), &nodes, &bound)[..2],
        [OK, OK]
    );
    let mut tolerant = spread_pod(c);
    tolerant.add_toleration(Toleration {
        key: "dedicated".into(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: String::new(),
    });
    assert_eq!(
        verdicts(&tolerant, &nodes, &bound)[..2],
        [SKEW, SKEW],
        "a tolerated taint does not exclude the node"
    );
}

/// PodTopologySpread (`countPodsMatchSelector`): only pods of the same namespace that are
/// not terminating count; Succeeded/Failed pods are not seen at all.
#[test]
fn which_pods_count() {
    let nodes = two_zones_and_a_zoneless_node();
    let p = spread_pod(constraint(ZONE, 1, selector(&[("app", "train")])));
    let mut terminating = train("t");
    terminating.terminating = true;
    let mut done = train("d");
    done.terminal = true;
    let elsewhere = in_namespace(train("o"), "other");
    let unrelated = labelled(pod("u"), &[("app", "web")]);
    for (name, other) in [
        ("terminating", terminating),
        ("terminal", done),
        ("other namespace", elsewhere),
        ("selector mismatch", unrelated),
    ] {
        assert_eq!(verdicts(&p, &nodes, &[(0, other)])[0], OK, "{name}");
    }
}

/// PodTopologySpread `matchLabelKeys`: the pod's own values join the selector.
#[test]
fn match_label_keys_narrow_the_selector_to_the_pods_values() {
    let nodes = two_zones_and_a_zoneless_node();
    let job = |name: &str, j: &str| labelled(pod(name), &[("app", "train"), ("job", j)]);
    let mut c = constraint(ZONE, 1, selector(&[("app", "train")]));
    c.match_label_keys = vec!["job".into(), "absent-key".into()];
    let p = PodRulesBuilder::default().spread(c).on(job("p", "a"));
    assert_eq!(
        verdicts(&p, &nodes, &[(0, job("x", "b"))])[0],
        OK,
        "a pod of job b does not count for job a"
    );
    assert_eq!(verdicts(&p, &nodes, &[(0, job("y", "a"))])[0], SKEW);
}

/// PodTopologySpread quirks of the selector: `{}` counts no existing pod (but the pod itself),
/// an absent selector counts nothing at all.
#[test]
fn empty_and_absent_selectors() {
    let nodes = two_zones_and_a_zoneless_node();
    let bound = [(0, train("a")), (0, train("b"))];
    let everything = spread_pod(constraint(ZONE, 1, selector(&[])));
    assert_eq!(verdicts(&everything, &nodes, &bound)[..3], [OK, OK, OK]);
    let nothing = spread_pod(constraint(ZONE, 0, LabelSelector::Nothing));
    assert_eq!(
        verdicts(&nothing, &nodes, &bound)[..3],
        [OK, OK, OK],
        "maxSkew 0 still passes: nothing matches, not even the pod"
    );
    let mut s = PodTopologySpread::new(&everything, &nodes, []);
    s.add(&nodes[0], &bound[0].1);
    assert_eq!(
        s.check(&nodes[0]),
        OK,
        "a placed pod does not count under {{}} either"
    );
}

/// PodTopologySpread: a node missing one constraint's key takes no part in any constraint.
#[test]
fn nodes_need_every_constraints_key() {
    let nodes = vec![zoned("n0", "z1"), node("n1"), zoned("n2", "z2")];
    let mut hosts = nodes.clone();
    hosts[1].labels.insert(ZONE.into(), "z3".into());
    let p = PodRulesBuilder::default()
        .spread(constraint(ZONE, 1, selector(&[("app", "train")])))
        .spread(constraint(HOSTNAME, 1, selector(&[("app", "train")])))
        .on(train("p"));
    assert_eq!(
        verdicts(&p, &nodes, &[(0, train("a"))]),
        [SKEW, NO_LABEL, OK]
    );
    assert_eq!(
        verdicts(&p, &hosts, &[(0, train("a"))]),
        [SKEW, OK, OK],
        "with the label, z3 is a domain"
    );
}

/// PodTopologySpread `AddPod`/`RemovePod`: a gang placed one by one alternates zones.
#[test]
fn placed_members_shift_the_minimum() {
    let nodes = two_zones_and_a_zoneless_node();
    let p = spread_pod(constraint(ZONE, 1, selector(&[("app", "train")])));
    let members: Vec<PodInfo> = (0..4).map(|i| train(&format!("m{i}"))).collect();
    let mut s = PodTopologySpread::new(&p, &nodes, []);
    let mut zones = Vec::new();
    for m in &members {
        let at = nodes.iter().position(|n| s.check(n).is_ok()).unwrap();
        s.add(&nodes[at], m);
        zones.push(nodes[at].labels[ZONE].clone());
    }
    assert_eq!(zones, ["z1", "z2", "z1", "z2"]);
    s.remove(&nodes[2], &members[1]);
    assert_eq!(s.check(&nodes[0]), SKEW, "z1 holds 2, z2 now 1");
    s.remove(&nodes[2], &members[3]);
    assert_eq!(s.check(&nodes[2]), OK);
    assert_eq!(s.check(&nodes[0]), SKEW, "z2 back to 0");
}
