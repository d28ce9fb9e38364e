//! A pod's required node affinity as `component-helpers/scheduling/corev1/nodeaffinity` parses
//! it (`newNodeSelectorTerm`): its terms, each with the requirements on node labels
//! (`matchExpressions`) and on node fields (`matchFields`). A term with a requirement
//! kube-scheduler rejects is kept, as `Invalid`, with why. Matching a node is
//! `rules::node_affinity`.

use super::labels::Requirement;

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
}

#[cfg(test)]
mod tests;
