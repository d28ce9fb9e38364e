//! Label sets and label selectors, evaluated as apimachinery's `labels.Selector` evaluates them
//! (`metav1.LabelSelectorAsSelector` for pod selectors, the node-selector requirements for
//! node affinity). Every rule that matches labels goes through here.

use std::collections::{BTreeMap, HashMap};

/// Anything a selector can read labels from: a node's map, a pod's [`Labels`], a namespace.
pub trait LabelSet {
    fn label(&self, key: &str) -> Option<&str>;
}

impl LabelSet for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// A pod's labels: a sorted boxed slice, 16 bytes and no allocation when empty, one allocation
/// (plus the strings) otherwise — 50,000 cached pods cannot afford a map node each.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Labels(Box<[(Box<str>, Box<str>)]>);

impl Labels {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &*self.0[i].1)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }
}

impl<K: Into<Box<str>>, V: Into<Box<str>>> FromIterator<(K, V)> for Labels {
    /// A later duplicate key wins, as in a map.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut pairs: Vec<(Box<str>, Box<str>)> = iter
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        pairs.reverse();
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        pairs.dedup_by(|later, earlier| later.0 == earlier.0);
        Labels(pairs.into_boxed_slice())
    }
}

impl LabelSet for Labels {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key)
    }
}

/// A requirement's operator and operands. `Gt`/`Lt` occur only in node selectors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operator {
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    Gt(i64),
    Lt(i64),
}

/// One `key <operator> values` requirement of a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
}

impl Requirement {
    /// A `matchExpressions` entry of a pod label selector (`In`, `NotIn`, `Exists`,
    /// `DoesNotExist`), validated as `labels.NewRequirement` does.
    pub fn from_label_expression(
        key: &str,
        operator: &str,
        values: &[String],
    ) -> Result<Self, String> {
        match operator {
            "In" | "NotIn" | "Exists" | "DoesNotExist" => Self::parse(key, operator, values),
            other => Err(format!(
                "key {key:?}: {other:?} is not a valid label selector operator \
                 (In, NotIn, Exists, DoesNotExist)"
            )),
        }
    }

    /// A node selector requirement (`In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`),
    /// validated as `nodeSelectorRequirementsAsSelector` does.
    pub fn from_node_expression(
        key: &str,
        operator: &str,
        values: &[String],
    ) -> Result<Self, String> {
        Self::parse(key, operator, values)
    }

    fn parse(key: &str, operator: &str, values: &[String]) -> Result<Self, String> {
        let one_integer = || match values {
            [v] => v
                .parse::<i64>()
                .map_err(|_| format!("key {key:?}: {operator} needs an integer value, got {v:?}")),
            _ => Err(format!(
                "key {key:?}: {operator} needs exactly one value, got {}",
                values.len()
            )),
        };
        let some_values = || {
            if values.is_empty() {
                Err(format!("key {key:?}: {operator} needs at least one value"))
            } else {
                Ok(values.to_vec())
            }
        };
        let no_values = || {
            if values.is_empty() {
                Ok(())
            } else {
                Err(format!("key {key:?}: {operator} takes no values"))
            }
        };
        let operator = match operator {
            "In" => Operator::In(some_values()?),
            "NotIn" => Operator::NotIn(some_values()?),
            "Exists" => no_values().map(|()| Operator::Exists)?,
            "DoesNotExist" => no_values().map(|()| Operator::DoesNotExist)?,
            "Gt" => Operator::Gt(one_integer()?),
            "Lt" => Operator::Lt(one_integer()?),
            other => {
                return Err(format!(
                    "key {key:?}: {other:?} is not a valid node selector operator \
                     (In, NotIn, Exists, DoesNotExist, Gt, Lt)"
                ))
            }
        };
        Ok(Requirement {
            key: key.to_string(),
            operator,
        })
    }

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

/// A pod label selector after `metav1.LabelSelectorAsSelector`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LabelSelector {
    /// No selector at all (`labelSelector` absent): matches nothing.
    Nothing,
    /// `matchLabels` (as `In [value]`) and `matchExpressions`, ANDed. No requirements — the
    /// selector `{}` — matches everything.
    All(Vec<Requirement>),
}

impl LabelSelector {
    /// Builds a selector from `matchLabels` and `matchExpressions` (key, operator, values).
    pub fn from_parts<'a>(
        match_labels: impl IntoIterator<Item = (&'a str, &'a str)>,
        match_expressions: impl IntoIterator<Item = (&'a str, &'a str, &'a [String])>,
    ) -> Result<Self, String> {
        let mut requirements: Vec<Requirement> = match_labels
            .into_iter()
            .map(|(k, v)| Requirement {
                key: k.to_string(),
                operator: Operator::In(vec![v.to_string()]),
            })
            .collect();
        for (key, operator, values) in match_expressions {
            requirements.push(Requirement::from_label_expression(key, operator, values)?);
        }
        Ok(LabelSelector::All(requirements))
    }

    pub fn matches(&self, labels: &impl LabelSet) -> bool {
        match self {
            LabelSelector::Nothing => false,
            LabelSelector::All(requirements) => requirements.iter().all(|r| r.matches(labels)),
        }
    }

    /// The label keys the selector reads.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        let requirements = match self {
            LabelSelector::Nothing => &[][..],
            LabelSelector::All(r) => &r[..],
        };
        requirements.iter().map(|r| r.key.as_str())
    }

    /// `labels.Selector.Empty()`: the selector `{}` (true) — not the absent selector (false).
    pub fn is_empty(&self) -> bool {
        matches!(self, LabelSelector::All(r) if r.is_empty())
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
