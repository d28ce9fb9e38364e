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
mod tests;
