//! kube-scheduler's NodeAffinity filter: `nodeSelector` and required node affinity
//! (`component-helpers/scheduling/corev1/nodeaffinity`, `RequiredNodeAffinity.Match`).
//!
//! Both must hold. The required affinity's `nodeSelectorTerms` are ORed; within a term,
//! `matchExpressions` (on node labels) and `matchFields` (on `metadata.name`) are ANDed. A term
//! with neither matches nothing, so does an empty list of terms. A term kube-scheduler cannot
//! parse (an unknown operator, `Gt` with a non-integer) never matches, while the other terms
//! still can (its `LazyErrorNodeSelector`).

use super::labels::Requirement;
use super::Reason;
use crate::model::inputs::objects::{NodeInfo, PodInfo};

/// The field `matchFields` can name: the node's name.
pub const NODE_NAME_FIELD: &str = "metadata.name";

/// `requiredDuringSchedulingIgnoredDuringExecution` of a pod's node affinity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSelector {
    pub terms: Vec<NodeSelectorTerm>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeSelectorTerm {
    /// `matchExpressions` and `matchFields`, all of which must hold.
    Parsed {
        expressions: Vec<Requirement>,
        fields: Vec<FieldRequirement>,
    },
    /// A term with a requirement kube-scheduler rejects; it never matches. Kept with the
    /// reason so messages can say why.
    Invalid(String),
}

/// A `matchFields` requirement: `In` or `NotIn` with exactly one value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldRequirement {
    pub key: String,
    pub value: String,
    /// `In` (the field must equal `value`) or `NotIn` (must differ).
    pub equal: bool,
}

/// One node selector requirement as the API gives it: key, operator, values.
pub type RawRequirement<'a> = (&'a str, &'a str, &'a [String]);

impl NodeSelectorTerm {
    /// Parses a term as `newNodeSelectorTerm` does; any bad requirement makes it `Invalid`.
    pub fn parse<'a>(
        expressions: impl IntoIterator<Item = RawRequirement<'a>>,
        fields: impl IntoIterator<Item = RawRequirement<'a>>,
    ) -> Self {
        let expressions = expressions
            .into_iter()
            .map(|(k, op, values)| Requirement::from_node_expression(k, op, values))
            .collect::<Result<Vec<_>, _>>();
        let fields = fields
            .into_iter()
            .map(|(key, op, values)| match (op, values) {
                ("In" | "NotIn", [value]) => Ok(FieldRequirement {
                    key: key.to_string(),
                    value: value.clone(),
                    equal: op == "In",
                }),
                ("In" | "NotIn", _) => Err(format!(
                    "field {key:?}: {op} needs exactly one value, got {}",
                    values.len()
                )),
                (other, _) => Err(format!(
                    "field {key:?}: {other:?} is not a valid field selector operator (In, NotIn)"
                )),
            })
            .collect::<Result<Vec<_>, _>>();
        match (expressions, fields) {
            (Ok(expressions), Ok(fields)) => NodeSelectorTerm::Parsed {
                expressions,
                fields,
            },
            (Err(e), _) | (_, Err(e)) => NodeSelectorTerm::Invalid(e),
        }
    }

    fn matches(&self, node: &NodeInfo) -> bool {
        let NodeSelectorTerm::Parsed {
            expressions,
            fields,
        } = self
        else {
            return false;
        };
        if expressions.is_empty() && fields.is_empty() {
            return false;
        }
        expressions.iter().all(|r| r.matches(&node.labels))
            && fields.iter().all(|f| {
                // A node has one field, its name; a field selector reads any other as "".
                let actual = if f.key == NODE_NAME_FIELD {
                    &*node.name
                } else {
                    ""
                };
                (actual == f.value) == f.equal
            })
    }
}

impl NodeSelector {
    /// Terms ORed; no terms, no match.
    pub fn matches(&self, node: &NodeInfo) -> bool {
        self.terms.iter().any(|t| t.matches(node))
    }
}

/// Whether the pod's `nodeSelector` and required node affinity both admit the node.
pub fn matches(node: &NodeInfo, pod: &PodInfo) -> bool {
    pod.node_selector
        .iter()
        .all(|(k, v)| node.labels.get(k) == Some(v))
        && pod
            .rules
            .as_ref()
            .and_then(|r| r.node_affinity.as_ref())
            .is_none_or(|s| s.matches(node))
}

pub fn check(node: &NodeInfo, pod: &PodInfo) -> Result<(), Reason> {
    if matches(node, pod) {
        Ok(())
    } else {
        Err(Reason::NodeAffinity)
    }
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn unparsable_terms_say_why() {
        assert_eq!(
            term(&[("gpus", "Gt", &["four"])], &[]),
            NodeSelectorTerm::Invalid(
                "key \"gpus\": Gt needs an integer value, got \"four\"".into()
            )
        );
        assert_eq!(
            term(&[], &[(NODE_NAME_FIELD, "In", &["a", "b"])]),
            NodeSelectorTerm::Invalid(
                "field \"metadata.name\": In needs exactly one value, got 2".into()
            )
        );
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
}
