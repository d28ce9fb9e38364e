//! Label sets and label selectors as apimachinery parses them (`metav1.LabelSelectorAsSelector`
//! for pod selectors, the node-selector requirements for node affinity). Their evaluation,
//! `labels.Selector.Matches`, is `rules::labels`.

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

#[cfg(test)]
mod tests;
