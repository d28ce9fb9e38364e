//! A gang's topology constraint: the node label whose domains (racks, blocks, …) hold its
//! quorum, read where users already write it.
//!
//! - muster's own pod annotations: `muster.dev/topology-required: <node label key>` (the quorum
//!   inside one domain of that label) and `muster.dev/topology-preferred: <key>[,<key>…]`
//!   (levels from the narrowest to the widest: as close together as room allows).
//! - Kueue's pod-set annotations (Topology-Aware Scheduling, `PodSetRequiredTopologyAnnotation`
//!   and `PodSetPreferredTopologyAnnotation` in Kueue's `apis/kueue/v1beta1/topology_types.go`):
//!   `kueue.x-k8s.io/podset-required-topology` and `kueue.x-k8s.io/podset-preferred-topology`,
//!   one node label each. Kueue's webhook refuses a pod set with more than one of them; so does
//!   muster.
//! - Kubernetes' `scheduling.k8s.io/v1beta1` PodGroup `spec.schedulingConstraints.topology[].key`
//!   (one required key: `TopologyConstraint` in `k8s.io/api/scheduling/v1beta1/types.go`), read by
//!   the PodGroup watch into [`PodGroupTopology::Required`].
//! - Volcano's PodGroup `spec.networkTopology` (`mode` hard/soft, `highestTierAllowed` or
//!   `highestTierName`) names tiers of HyperNode objects, not node labels; muster does not read
//!   HyperNodes. A `soft` constraint is a preference muster leaves out; a `hard` one muster
//!   cannot keep by itself, so the gang holds nothing and says so, unless its members also carry
//!   `muster.dev/topology-required` naming the node label of that tier (then that key is used).

use std::fmt;
use std::sync::Arc;

use thiserror::Error;

pub const TOPOLOGY_REQUIRED: &str = "muster.dev/topology-required";
pub const TOPOLOGY_PREFERRED: &str = "muster.dev/topology-preferred";
pub const KUEUE_REQUIRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-required-topology";
pub const KUEUE_PREFERRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-preferred-topology";
/// Kubernetes' PodGroup field, as messages name it.
pub const KUBERNETES_TOPOLOGY: &str = "spec.schedulingConstraints.topology[].key";

/// Where a gang's members must (or should) be, by node label.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Topology {
    /// The quorum inside one domain (one value) of this node label; nodes without the label
    /// are in no domain.
    Required(Arc<str>),
    /// Levels from the narrowest to the widest: the narrowest level one domain of which holds
    /// the quorum, else the fewest domains of the widest level; never a reason to wait.
    Preferred(Vec<Arc<str>>),
}

impl Topology {
    /// The label whose domain a gang is said to be in (the required key, or the narrowest
    /// preferred level).
    pub fn narrowest(&self) -> &str {
        match self {
            Topology::Required(k) => k,
            Topology::Preferred(levels) => levels.first().map_or("", |k| k),
        }
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Topology::Required(k) => write!(f, "required {k}"),
            Topology::Preferred(levels) => {
                let levels: Vec<&str> = levels.iter().map(|k| &**k).collect();
                write!(f, "preferred {}", levels.join(" < "))
            }
        }
    }
}

/// A topology and the key or field it was read from.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopologyConstraint {
    pub topology: Topology,
    pub source: &'static str,
}

/// What a PodGroup object says about topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodGroupTopology {
    /// Kubernetes' `spec.schedulingConstraints.topology[0].key`.
    Required(Arc<str>),
    /// Volcano's `spec.networkTopology`: `hard` (the default) or `soft`, and the highest tier
    /// as written (`highestTierAllowed` or `highestTierName`).
    VolcanoNetwork { hard: bool, tier: String },
}

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum TopologyError {
    #[error("{key} must name node labels (such as \"topology.kubernetes.io/rack\"): {why}; got {value:?}")]
    BadKey {
        key: &'static str,
        value: String,
        why: String,
    },
    #[error("conflicting topology keys: {first_key}={first_value:?} but {second_key}={second_value:?}; give the pod one topology")]
    Conflicting {
        first_key: &'static str,
        first_value: String,
        second_key: &'static str,
        second_value: String,
    },
}

/// Reads a pod's topology keys. `Ok(None)`: none. A required and a preferred key, or two keys
/// that say different things, are an error naming both.
pub fn topology_of(
    annotation: impl Fn(&str) -> Option<String>,
) -> Result<Option<TopologyConstraint>, TopologyError> {
    let keys: [(&'static str, bool); 4] = [
        (TOPOLOGY_REQUIRED, true),
        (TOPOLOGY_PREFERRED, false),
        (KUEUE_REQUIRED_TOPOLOGY, true),
        (KUEUE_PREFERRED_TOPOLOGY, false),
    ];
    let mut found: Option<(TopologyConstraint, String)> = None;
    for (key, required) in keys {
        let Some(value) = annotation(key) else {
            continue;
        };
        let topology = if required {
            Topology::Required(parse_label_key(key, value.trim(), &value)?)
        } else {
            let mut levels: Vec<Arc<str>> = Vec::new();
            for level in value.split(',') {
                let level = parse_label_key(key, level.trim(), &value)?;
                if levels.contains(&level) {
                    return Err(bad(key, &value, format!("{level:?} is listed twice")));
                }
                levels.push(level);
            }
            // Kueue's annotation names one level.
            if key == KUEUE_PREFERRED_TOPOLOGY && levels.len() > 1 {
                return Err(bad(
                    key,
                    &value,
                    "Kueue's annotation names one level".into(),
                ));
            }
            Topology::Preferred(levels)
        };
        match &found {
            None => {
                found = Some((
                    TopologyConstraint {
                        topology,
                        source: key,
                    },
                    value,
                ))
            }
            Some((first, first_value)) if first.topology != topology => {
                return Err(TopologyError::Conflicting {
                    first_key: first.source,
                    first_value: first_value.clone(),
                    second_key: key,
                    second_value: value,
                })
            }
            Some(_) => {}
        }
    }
    Ok(found.map(|(c, _)| c))
}

fn bad(key: &'static str, value: &str, why: String) -> TopologyError {
    TopologyError::BadKey {
        key,
        value: value.to_string(),
        why,
    }
}

/// A node label key as Kubernetes validates one (`IsQualifiedName`): an optional DNS subdomain
/// prefix of at most 253 characters and a `/`, then a name of at most 63 characters,
/// alphanumeric at both ends, with `-`, `_` and `.` inside.
pub fn parse_label_key(
    key: &'static str,
    level: &str,
    value: &str,
) -> Result<Arc<str>, TopologyError> {
    let (prefix, name) = match level.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, level),
    };
    if name.is_empty() {
        return Err(bad(key, value, "a label key cannot be empty".into()));
    }
    if name.len() > 63 {
        return Err(bad(
            key,
            value,
            format!("{name:?} is longer than 63 characters"),
        ));
    }
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let ends_ok = name.starts_with(alnum) && name.ends_with(alnum);
    if !ends_ok
        || !name
            .chars()
            .all(|c| alnum(c) || c == '-' || c == '_' || c == '.')
    {
        return Err(bad(
            key,
            value,
            format!("{name:?} is not a label name (letters, digits, '-', '_', '.', alphanumeric at both ends)"),
        ));
    }
    if let Some(prefix) = prefix {
        let dns = !prefix.is_empty()
            && prefix.len() <= 253
            && prefix.split('.').all(|part| {
                !part.is_empty()
                    && part.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && part.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            });
        if !dns {
            return Err(bad(
                key,
                value,
                format!("{prefix:?} is not a DNS subdomain prefix"),
            ));
        }
    }
    Ok(Arc::from(level))
}

#[cfg(test)]
#[path = "topology/tests.rs"]
mod tests;

/// A gang's topology, decided with its spec from its members' keys and its PodGroup.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum GangTopology {
    /// Anywhere.
    #[default]
    Unconstrained,
    Constrained(TopologyConstraint),
    /// muster cannot place the gang as asked: it holds nothing, and says why.
    Refused(TopologyRefusal),
}

impl GangTopology {
    /// The required node label, if the gang has one.
    pub fn required(&self) -> Option<&Arc<str>> {
        match self {
            GangTopology::Constrained(TopologyConstraint {
                topology: Topology::Required(k),
                ..
            }) => Some(k),
            _ => None,
        }
    }

    pub fn constraint(&self) -> Option<&TopologyConstraint> {
        match self {
            GangTopology::Constrained(c) => Some(c),
            _ => None,
        }
    }

    /// The topology members' keys ask for: every distinct one; more than one is refused.
    pub fn of_members<'a>(asked: impl IntoIterator<Item = &'a TopologyConstraint>) -> Self {
        let mut distinct: Vec<&TopologyConstraint> = Vec::new();
        for c in asked {
            if !distinct.iter().any(|d| d.topology == c.topology) {
                distinct.push(c);
            }
        }
        match distinct.as_slice() {
            [] => GangTopology::Unconstrained,
            [one] => GangTopology::Constrained((*one).clone()),
            many => {
                let mut values: Vec<String> = many
                    .iter()
                    .map(|c| format!("{}={:?}", c.source, c.topology.to_string()))
                    .collect();
                values.sort();
                GangTopology::Refused(TopologyRefusal::MembersDisagree(values))
            }
        }
    }

    /// This topology (the members' keys) with the gang's PodGroup's: Kubernetes' required key
    /// overrules the members' keys (as its quorum does); Volcano's hard HyperNode tier is kept
    /// only through a members' required key, else refused; a soft one is a preference muster
    /// leaves out.
    pub fn with_pod_group(self, theirs: Option<&PodGroupTopology>) -> Self {
        match theirs {
            None => self,
            Some(PodGroupTopology::Required(k)) => GangTopology::Constrained(TopologyConstraint {
                topology: Topology::Required(k.clone()),
                source: KUBERNETES_TOPOLOGY,
            }),
            Some(PodGroupTopology::VolcanoNetwork { hard: false, .. }) => self,
            Some(PodGroupTopology::VolcanoNetwork { hard: true, tier }) => {
                if self.required().is_some() {
                    self
                } else {
                    GangTopology::Refused(TopologyRefusal::VolcanoHyperNodes { tier: tier.clone() })
                }
            }
        }
    }
}

/// Why muster cannot place a gang under its topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopologyRefusal {
    /// Members ask for different topologies: `key="what"` per distinct one, sorted.
    MembersDisagree(Vec<String>),
    /// Volcano's `networkTopology` in hard mode names a HyperNode tier, which muster cannot read.
    VolcanoHyperNodes { tier: String },
}
