//! Label selectors, evaluated as apimachinery's `labels.Selector` evaluates them, on the labels
//! of nodes, pods and namespaces. Every rule that matches labels goes through here; the
//! selectors' types and their parsing (`metav1.LabelSelectorAsSelector` for pod selectors, the
//! node-selector requirements for node affinity) are `inputs::terms`.

use std::collections::{BTreeMap, HashMap};

use crate::model::inputs::terms::{LabelSelector, Labels, Operator, Requirement};

/// Anything a selector can read labels from: a node's map, a pod's [`Labels`], a namespace.
pub trait LabelSet {
    fn label(&self, key: &str) -> Option<&str>;
}

impl LabelSet for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl LabelSet for Labels {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key)
    }
}

impl Requirement {
    /// `labels.Requirement.Matches`: `NotIn` and `DoesNotExist` match a missing key; `Gt`/`Lt`
    /// need the label to parse as a base-10 `i64`, otherwise they do not match.
    pub fn matches(&self, labels: &impl LabelSet) -> bool {
        let value = labels.label(&self.key);
        match &self.operator {
            Operator::In(values) => value.is_some_and(|v| values.iter().any(|x| x == v)),
            Operator::NotIn(values) => value.is_none_or(|v| values.iter().all(|x| x != v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::Gt(bound) => value
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *bound),
            Operator::Lt(bound) => value
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *bound),
        }
    }
}

impl LabelSelector {
    pub fn matches(&self, labels: &impl LabelSet) -> bool {
        match self {
            LabelSelector::Nothing => false,
            LabelSelector::All(requirements) => requirements.iter().all(|r| r.matches(labels)),
        }
    }
}

/// The label the API server puts on every namespace, whose value is the namespace's name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Namespace labels for `namespaceSelector`. muster does not watch namespaces: a namespace
/// not given here is seen with only the label the API server puts on every namespace,
/// `kubernetes.io/metadata.name: <name>`. So a selector on that label (or `{}`) is exact, and a
/// selector on any other label matches as if the namespace did not carry it.
#[derive(Clone, Debug, Default)]
pub struct NamespaceLabels {
    known: HashMap<String, BTreeMap<String, String>>,
}

impl NamespaceLabels {
    pub fn insert(&mut self, namespace: &str, labels: BTreeMap<String, String>) {
        self.known.insert(namespace.to_string(), labels);
    }

    pub fn of<'a>(&'a self, namespace: &'a str) -> NamespaceView<'a> {
        NamespaceView {
            name: namespace,
            labels: self.known.get(namespace),
        }
    }
}

/// One namespace's labels as [`NamespaceLabels`] knows them.
pub struct NamespaceView<'a> {
    name: &'a str,
    labels: Option<&'a BTreeMap<String, String>>,
}

impl LabelSet for NamespaceView<'_> {
    fn label(&self, key: &str) -> Option<&str> {
        match self.labels.and_then(|l| l.get(key)) {
            Some(v) => Some(v),
            None if key == NAMESPACE_NAME_LABEL => Some(self.name),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests;
