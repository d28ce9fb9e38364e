use super::*;
use crate::model::rules::fixtures::{node, pod, PodRulesBuilder};

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A term from `(key, op, values)` expressions and fields.
fn term(exprs: &[(&str, &str, &[&str])], fields: &[(&str, &str, &[&str])]) -> NodeSelectorTerm {
    let exprs: Vec<(String, String, Vec<String>)> = exprs
        .iter()
        .map(|(k, o, v)| (k.to_string(), o.to_string(), strings(v)))
        .collect();
    let fields: Vec<(String, String, Vec<String>)> = fields
        .iter()
        .map(|(k, o, v)| (k.to_string(), o.to_string(), strings(v)))
        .collect();
    NodeSelectorTerm::parse(
        exprs
            .iter()
            .map(|(k, o, v)| (k.as_str(), o.as_str(), v.as_slice())),
        fields
            .iter()
            .map(|(k, o, v)| (k.as_str(), o.as_str(), v.as_slice())),
    )
}

fn labelled(name: &str, labels: &[(&str, &str)]) -> NodeInfo {
    let mut n = node(name);
    for (k, v) in labels {
        n.labels.insert(k.to_string(), v.to_string());
    }
    n
}

/// Mirrors NodeAffinity (`RequiredNodeAffinity.Match` and `LazyErrorNodeSelector`).
#[test]
fn required_node_affinity_mirrors_node_affinity() {
    let a1 = labelled("a1", &[("pool", "a"), ("gpus", "8"), ("zone", "z1")]);
    let b1 = labelled("b1", &[("pool", "b"), ("gpus", "2")]);
    let unlabelled = node("bare");
    struct Case {
        name: &'static str,
        terms: Vec<NodeSelectorTerm>,
        want: [bool; 3],
    }
    let cases = [
        Case {
            name: "In",
            terms: vec![term(&[("pool", "In", &["a"])], &[])],
            want: [true, false, false],
        },
        Case {
            name: "NotIn matches a node without the label",
            terms: vec![term(&[("pool", "NotIn", &["a"])], &[])],
            want: [false, true, true],
        },
        Case {
            name: "Exists",
            terms: vec![term(&[("zone", "Exists", &[])], &[])],
            want: [true, false, false],
        },
        Case {
            name: "DoesNotExist",
            terms: vec![term(&[("zone", "DoesNotExist", &[])], &[])],
            want: [false, true, true],
        },
        Case {
            name: "Gt compares integers",
            terms: vec![term(&[("gpus", "Gt", &["4"])], &[])],
            want: [true, false, false],
        },
        Case {
            name: "Lt compares integers",
            terms: vec![term(&[("gpus", "Lt", &["4"])], &[])],
            want: [false, true, false],
        },
        Case {
            name: "expressions in a term are ANDed",
            terms: vec![term(
                &[("pool", "In", &["a", "b"]), ("gpus", "Gt", &["4"])],
                &[],
            )],
            want: [true, false, false],
        },
        Case {
            name: "terms are ORed",
            terms: vec![
                term(&[("pool", "In", &["a"])], &[]),
                term(&[("gpus", "Lt", &["4"])], &[]),
            ],
            want: [true, true, false],
        },
        Case {
            name: "matchFields on metadata.name",
            terms: vec![term(&[], &[(NODE_NAME_FIELD, "In", &["b1"])])],
            want: [false, true, false],
        },
        Case {
            name: "matchFields NotIn",
            terms: vec![term(&[], &[(NODE_NAME_FIELD, "NotIn", &["b1"])])],
            want: [true, false, true],
        },
        Case {
            name: "expressions and fields are ANDed",
            terms: vec![term(
                &[("pool", "In", &["a"])],
                &[(NODE_NAME_FIELD, "In", &["b1"])],
            )],
            want: [false, false, false],
        },
        Case {
            name: "an empty list of terms matches nothing",
            terms: vec![],
            want: [false, false, false],
        },
        Case {
            name: "a term with no requirements matches nothing",
            terms: vec![term(&[], &[])],
            want: [false, false, false],
        },
        Case {
            name: "an empty term does not spoil the others",
            terms: vec![term(&[], &[]), term(&[("pool", "In", &["b"])], &[])],
            want: [false, true, false],
        },
        Case {
            name: "Gt with a non-integer makes its term never match",
            terms: vec![term(&[("gpus", "Gt", &["four"])], &[])],
            want: [false, false, false],
        },
        Case {
            name: "an unparsable term does not spoil the others",
            terms: vec![
                term(&[("gpus", "Gt", &["four"])], &[]),
                term(&[("pool", "In", &["a"])], &[]),
            ],
            want: [true, false, false],
        },
        Case {
            name: "matchFields with two values is refused",
            terms: vec![term(&[], &[(NODE_NAME_FIELD, "In", &["a1", "b1"])])],
            want: [false, false, false],
        },
        Case {
            name: "matchFields with Exists is refused",
            terms: vec![term(&[], &[(NODE_NAME_FIELD, "Exists", &[])])],
            want: [false, false, false],
        },
    ];
    for c in cases {
        let p = PodRulesBuilder::default()
            .node_affinity(c.terms)
            .on(pod("p"));
        let got = [&a1, &b1, &unlabelled].map(|n| matches(n, &p));
        assert_eq!(got, c.want, "{}", c.name);
    }
}

/// NodeAffinity: `nodeSelector` and required affinity must both hold.
#[test]
fn node_selector_and_affinity_both_apply() {
    let a1 = labelled("a1", &[("pool", "a"), ("disk", "ssd")]);
    let a2 = labelled("a2", &[("pool", "a")]);
    let mut p = PodRulesBuilder::default()
        .node_affinity(vec![term(&[("disk", "In", &["ssd"])], &[])])
        .on(pod("p"));
    p.node_selector = vec![("pool".into(), "a".into())];
    assert_eq!(check(&a1, &p), Ok(()));
    assert_eq!(check(&a2, &p), Err(Reason::NodeAffinity));
    p.node_selector = vec![("pool".into(), "b".into())];
    assert_eq!(check(&a1, &p), Err(Reason::NodeAffinity));
    assert_eq!(
        check(&a1, &pod("plain")),
        Ok(()),
        "no rules admit every node"
    );
}
