//! kube-scheduler's NodeAffinity filter: `nodeSelector` and required node affinity
//! (`component-helpers/scheduling/corev1/nodeaffinity`, `RequiredNodeAffinity.Match`).
//!
//! Both must hold. The required affinity's `nodeSelectorTerms` are ORed; within a term,
//! `matchExpressions` (on node labels) and `matchFields` (on `metadata.name`) are ANDed. A term
//! with neither matches nothing, so does an empty list of terms. A term kube-scheduler cannot
//! parse (an unknown operator, `Gt` with a non-integer) never matches, while the other terms
//! still can (its `LazyErrorNodeSelector`). The terms' types and their parsing are
//! `inputs::terms`.

use super::Reason;
use crate::model::inputs::objects::{NodeInfo, PodInfo};
use crate::model::inputs::terms::{NodeSelector, NodeSelectorTerm};

/// The field `matchFields` can name: the node's name.
pub const NODE_NAME_FIELD: &str = "metadata.name";

impl NodeSelectorTerm {
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
