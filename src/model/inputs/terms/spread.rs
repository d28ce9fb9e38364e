//! A topology spread constraint with `whenUnsatisfiable: DoNotSchedule` (the others only
//! score), with its node inclusion policies. Counting the pods of each domain, and the
//! PodTopologySpread filter, are `rules::pod_topology_spread`.

use super::labels::LabelSelector;

/// Whether a node inclusion policy applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InclusionPolicy {
    Honor,
    Ignore,
}

impl InclusionPolicy {
    /// Reads `Honor`/`Ignore`; absent takes `default`.
    pub fn parse(value: Option<&str>, default: InclusionPolicy) -> Result<Self, String> {
        match value {
            None => Ok(default),
            Some("Honor") => Ok(InclusionPolicy::Honor),
            Some("Ignore") => Ok(InclusionPolicy::Ignore),
            Some(other) => Err(format!(
                "node inclusion policy {other:?} is neither Honor nor Ignore"
            )),
        }
    }
}

/// One `topologySpreadConstraints` entry with `whenUnsatisfiable: DoNotSchedule`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpreadConstraint {
    pub max_skew: i32,
    pub topology_key: String,
    pub selector: LabelSelector,
    pub match_label_keys: Vec<String>,
    /// 1 when absent.
    pub min_domains: i32,
    /// Honor when absent.
    pub node_affinity_policy: InclusionPolicy,
    /// Ignore when absent.
    pub node_taints_policy: InclusionPolicy,
}

#[cfg(test)]
mod tests;
