//! Table tests mirroring kube-scheduler's InterPodAffinity filter (`filtering_test.go`).

use std::collections::BTreeMap;

use super::*;
use crate::model::inputs::terms::LabelSelector;
use crate::model::rules::fixtures::{
    in_namespace, labelled, pod, selector, term, two_zones_and_a_zoneless_node, PodRulesBuilder,
    HOSTNAME, ZONE,
};
use crate::model::rules::labels::NAMESPACE_NAME_LABEL;

fn no_ns() -> NamespaceLabels {
    NamespaceLabels::default()
}

/// Verdicts of `incoming` on each node, with `bound` pods in place.
fn verdicts(
    incoming: &PodInfo,
    nodes: &[NodeInfo],
    bound: &[(usize, PodInfo)],
    ns: &NamespaceLabels,
) -> Vec<Result<(), Reason>> {
    let state = InterPodAffinity::new(incoming, bound.iter().map(|(i, p)| (&nodes[*i], p)), ns);
    nodes.iter().map(|n| state.check(n)).collect()
}

const OK: Result<(), Reason> = Ok(());
const AFF: Result<(), Reason> = Err(Reason::PodAffinity);
const ANTI: Result<(), Reason> = Err(Reason::PodAntiAffinity);
const EXISTING: Result<(), Reason> = Err(Reason::ExistingPodsAntiAffinity);

fn db(name: &str) -> PodInfo {
    labelled(pod(name), &[("app", "db")])
}

fn web(name: &str) -> PodInfo {
    labelled(pod(name), &[("app", "web")])
}

/// InterPodAffinity: no terms anywhere, nothing to refuse (PreFilter `Skip`).
#[test]
fn no_terms_admit_every_node() {
    let nodes = two_zones_and_a_zoneless_node();
    let (incoming, existing, ns) = (web("p"), db("d"), no_ns());
    let state = InterPodAffinity::new(&incoming, [(&nodes[0], &existing)], &ns);
    assert!(state.is_trivial());
    assert!(nodes.iter().all(|n| state.check(n).is_ok()));
}

/// InterPodAffinity: required affinity, by hostname and by zone.
#[test]
fn affinity_needs_a_matching_pod_in_the_nodes_domain() {
    let nodes = two_zones_and_a_zoneless_node();
    let bound = [(0, db("d"))];
    let by_host = PodRulesBuilder::default()
        .affinity(term(&[("app", "db")], HOSTNAME))
        .on(web("p"));
    assert_eq!(
        verdicts(&by_host, &nodes, &bound, &no_ns()),
        [OK, AFF, AFF, AFF]
    );
    let by_zone = PodRulesBuilder::default()
        .affinity(term(&[("app", "db")], ZONE))
        .on(web("p"));
    assert_eq!(
        verdicts(&by_zone, &nodes, &bound, &no_ns()),
        [OK, OK, AFF, AFF],
        "the whole zone of the db pod; a node without the zone label never"
    );
}

/// InterPodAffinity: an existing pod counts only if it matches *all* the affinity terms.
#[test]
fn affinity_terms_must_all_match_one_pod() {
    let nodes = two_zones_and_a_zoneless_node();
    let p = PodRulesBuilder::default()
        .affinity(term(&[("app", "db")], ZONE))
        .affinity(term(&[("tier", "hot")], ZONE))
        .on(web("p"));
    let split = [(0, db("d")), (1, labelled(pod("h"), &[("tier", "hot")]))];
    assert_eq!(verdicts(&p, &nodes, &split, &no_ns()), [AFF, AFF, AFF, AFF]);
    let both = [(2, labelled(pod("dh"), &[("app", "db"), ("tier", "hot")]))];
    assert_eq!(verdicts(&p, &nodes, &both, &no_ns()), [AFF, AFF, OK, AFF]);
}

/// InterPodAffinity: the first pod of a group whose terms match itself goes anywhere its
/// topology keys exist — but only while no pod anywhere matches the terms.
#[test]
fn first_pod_of_a_self_affine_group_may_go_anywhere() {
    let nodes = two_zones_and_a_zoneless_node();
    let p = PodRulesBuilder::default()
        .affinity(term(&[("app", "web")], ZONE))
        .on(web("p"));
    assert_eq!(verdicts(&p, &nodes, &[], &no_ns()), [OK, OK, OK, AFF]);
    assert_eq!(
        verdicts(&p, &nodes, &[(2, web("w"))], &no_ns()),
        [AFF, AFF, OK, AFF],
        "once a member exists, the rest must join its zone"
    );
    let not_self = PodRulesBuilder::default()
        .affinity(term(&[("app", "db")], ZONE))
        .on(web("p"));
    assert_eq!(
        verdicts(&not_self, &nodes, &[], &no_ns()),
        [AFF, AFF, AFF, AFF],
        "a pod that does not match its own terms gets no exception"
    );
}

/// InterPodAffinity: the incoming pod's anti-affinity, by hostname and zone.
#[test]
fn anti_affinity_keeps_the_pod_out_of_matching_domains() {
    let nodes = two_zones_and_a_zoneless_node();
    let bound = [(0, db("d"))];
    let by_host = PodRulesBuilder::default()
        .anti_affinity(term(&[("app", "db")], HOSTNAME))
        .on(web("p"));
    assert_eq!(
        verdicts(&by_host, &nodes, &bound, &no_ns()),
        [ANTI, OK, OK, OK]
    );
    let by_zone = PodRulesBuilder::default()
        .anti_affinity(term(&[("app", "db")], ZONE))
        .on(web("p"));
    assert_eq!(
        verdicts(&by_zone, &nodes, &bound, &no_ns()),
        [ANTI, ANTI, OK, OK],
        "a node without the key is in no domain, so nothing repels it"
    );
}

/// InterPodAffinity: existing pods' anti-affinity applies to the incoming pod (symmetry),
/// even when the incoming pod has no terms.
#[test]
fn existing_pods_anti_affinity_is_symmetric() {
    let nodes = two_zones_and_a_zoneless_node();
    let repels_web = PodRulesBuilder::default()
        .anti_affinity(term(&[("app", "web")], ZONE))
        .on(db("d"));
    let bound = [(2, repels_web)];
    assert_eq!(
        verdicts(&web("p"), &nodes, &bound, &no_ns()),
        [OK, OK, EXISTING, OK]
    );
    assert_eq!(
        verdicts(&db("p2"), &nodes, &bound, &no_ns()),
        [OK, OK, OK, OK],
        "the term does not match a db pod"
    );
}

/// InterPodAffinity (`AffinityTerm.Matches`): which namespaces a term considers.
#[test]
fn namespaces_and_namespace_selectors() {
    let nodes = two_zones_and_a_zoneless_node();
    let other = in_namespace(db("d"), "other");
    let bound = [(0, other)];
    let with = |namespaces: Vec<String>, ns_selector: Option<LabelSelector>| {
        PodRulesBuilder::default()
            .anti_affinity(PodAffinityTerm::new(
                "ml",
                selector(&[("app", "db")]),
                namespaces,
                ns_selector,
                HOSTNAME,
            ))
            .on(web("p"))
    };
    let mut ns = no_ns();
    let cases: [(&str, PodInfo, Result<(), Reason>); 6] = [
        ("own namespace by default", with(vec![], None), OK),
        ("named namespace", with(vec!["other".into()], None), ANTI),
        (
            "empty namespaceSelector: every namespace",
            with(vec![], Some(selector(&[]))),
            ANTI,
        ),
        (
            "selector on the automatic name label is exact",
            with(vec![], Some(selector(&[(NAMESPACE_NAME_LABEL, "other")]))),
            ANTI,
        ),
        (
            "selector on another label: muster sees no such label",
            with(vec![], Some(selector(&[("team", "a")]))),
            OK,
        ),
        (
            "namespaces and selector are ORed",
            with(
                vec!["ml".into()],
                Some(selector(&[(NAMESPACE_NAME_LABEL, "other")])),
            ),
            ANTI,
        ),
    ];
    for (name, p, want) in cases {
        assert_eq!(verdicts(&p, &nodes, &bound, &ns)[0], want, "{name}");
    }
    ns.insert(
        "other",
        BTreeMap::from([("team".to_string(), "a".to_string())]),
    );
    let p = with(vec![], Some(selector(&[("team", "a")])));
    assert_eq!(
        verdicts(&p, &nodes, &bound, &ns)[0],
        ANTI,
        "given the namespace's labels, the selector matches as in kube-scheduler"
    );
}

/// kube-scheduler never sees Succeeded or Failed pods.
#[test]
fn terminal_pods_do_not_count() {
    let nodes = two_zones_and_a_zoneless_node();
    let mut done = db("d");
    done.terminal = true;
    let p = PodRulesBuilder::default()
        .anti_affinity(term(&[("app", "db")], HOSTNAME))
        .on(web("p"));
    assert_eq!(
        verdicts(&p, &nodes, &[(0, done)], &no_ns()),
        [OK, OK, OK, OK]
    );
}

/// InterPodAffinity `AddPod`/`RemovePod`: members placed by a simulation count at once.
#[test]
fn placed_members_repel_and_attract_the_next() {
    let nodes = two_zones_and_a_zoneless_node();
    let ns = no_ns();
    let spread_out = PodRulesBuilder::default()
        .anti_affinity(term(&[("app", "web")], HOSTNAME))
        .on(web("m0"));
    let mut state = InterPodAffinity::new(&spread_out, [], &ns);
    assert_eq!(state.check(&nodes[0]), OK);
    state.add(&nodes[0], &spread_out);
    assert_eq!(state.check(&nodes[0]), ANTI, "one member per node");
    assert_eq!(state.check(&nodes[1]), OK);
    state.remove(&nodes[0], &spread_out);
    assert_eq!(state.check(&nodes[0]), OK, "removed again");

    let together = PodRulesBuilder::default()
        .affinity(term(&[("app", "web")], ZONE))
        .on(web("m0"));
    let mut state = InterPodAffinity::new(&together, [], &ns);
    assert!(
        nodes[..3].iter().all(|n| state.check(n).is_ok()),
        "first member: anywhere"
    );
    state.add(&nodes[2], &together);
    let got: Vec<_> = nodes.iter().map(|n| state.check(n)).collect();
    assert_eq!(
        got,
        [AFF, AFF, OK, AFF],
        "the rest: the first member's zone"
    );
}
