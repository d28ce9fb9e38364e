//! Which gang a pod belongs to, read from its labels and annotations.
//!
//! muster's own keys come first; the keys of other gang schedulers are accepted so that users
//! can switch without relabelling their workloads. A pod whose keys name two *different* groups is
//! rejected with an error that names both keys: guessing would silently split a job.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;

/// muster's group-name key; read as an annotation, or as a label.
pub const GROUP: &str = "muster.dev/group";
/// muster's quorum key (annotation): how many members must have nodes before any is bound.
pub const MIN_AVAILABLE: &str = "muster.dev/min-available";
/// Per-gang override of the quorum timeout (annotation), e.g. `"90s"` or `"5m"`.
pub const GANG_TIMEOUT: &str = "muster.dev/gang-timeout";
/// How a running gang may be disrupted by preemption (annotation): `gang` (the default: every
/// member is evicted, or none) or `pod` (an elastic job that tolerates losing members).
pub const DISRUPTION: &str = "muster.dev/disruption";

/// scheduler-plugins coscheduling (label).
pub const COSCHEDULING_POD_GROUP: &str = "scheduling.x-k8s.io/pod-group";
/// Volcano (annotations).
pub const VOLCANO_GROUP_NAME: &str = "scheduling.k8s.io/group-name";
pub const VOLCANO_GROUP_NAME_NEW: &str = "scheduling.volcano.sh/group-name";
/// Kueue plain-pod groups (label + annotation).
pub const KUEUE_POD_GROUP_NAME: &str = "kueue.x-k8s.io/pod-group-name";
pub const KUEUE_POD_GROUP_TOTAL_COUNT: &str = "kueue.x-k8s.io/pod-group-total-count";

/// A gang is named by namespace and group name; gangs never span namespaces.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GangKey {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

impl GangKey {
    pub fn new(namespace: &str, name: &str) -> Self {
        GangKey {
            namespace: Arc::from(namespace),
            name: Arc::from(name),
        }
    }
}

impl fmt::Display for GangKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What one pod says about its gang.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Membership {
    pub gang: GangKey,
    /// The quorum this pod asks for; `None` when no key gives one.
    pub min_available: Option<u32>,
    /// Per-gang timeout override, if this pod carries one.
    pub timeout: Option<Duration>,
    /// Which key named the group (for messages and the gang view).
    pub source: &'static str,
    /// What this pod says about disrupting its gang (`muster.dev/disruption`).
    pub disruption: DisruptionMode,
}

/// How a running gang may lose members to preemption; compare the `disruptionMode` of
/// Kubernetes' own PodGroup (`all` / `single`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum DisruptionMode {
    /// Every member is evicted together, or none is: half a gang is useless.
    #[default]
    Gang,
    /// Members may be evicted one by one (elastic jobs).
    Pod,
}

impl DisruptionMode {
    pub fn as_str(self) -> &'static str {
        match self {
            DisruptionMode::Gang => "gang",
            DisruptionMode::Pod => "pod",
        }
    }
}

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum MembershipError {
    #[error("conflicting gang keys: {first_key}={first_value:?} but {second_key}={second_value:?}; give the pod one group name")]
    ConflictingGroups {
        first_key: &'static str,
        first_value: String,
        second_key: &'static str,
        second_value: String,
    },
    #[error("{key} must be a positive integer, got {value:?}")]
    BadMinAvailable { key: &'static str, value: String },
    #[error("{GANG_TIMEOUT} must be a duration such as \"90s\" or \"5m\", got {value:?}")]
    BadTimeout { value: String },
    #[error("{DISRUPTION} must be \"gang\" or \"pod\", got {value:?}")]
    BadDisruption { value: String },
    #[error("{key} must be a non-empty name of at most 253 characters, got {value:?}")]
    BadGroupName { key: &'static str, value: String },
}

/// Largest quorum accepted from an annotation: far beyond any real job, small enough that
/// arithmetic on it can never overflow.
pub const MAX_MIN_AVAILABLE: u32 = 100_000;

/// Reads the gang membership of a pod in `namespace` from its labels and annotations.
/// `Ok(None)`: the pod is not in any gang.
pub fn membership_of(
    namespace: &str,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> Result<Option<Membership>, MembershipError> {
    // Every place a group name may come from, in order of precedence.
    let sources: [(&'static str, Option<&String>); 6] = [
        (GROUP, annotations.get(GROUP)),
        (GROUP, labels.get(GROUP)),
        (COSCHEDULING_POD_GROUP, labels.get(COSCHEDULING_POD_GROUP)),
        (VOLCANO_GROUP_NAME, annotations.get(VOLCANO_GROUP_NAME)),
        (
            VOLCANO_GROUP_NAME_NEW,
            annotations.get(VOLCANO_GROUP_NAME_NEW),
        ),
        (KUEUE_POD_GROUP_NAME, labels.get(KUEUE_POD_GROUP_NAME)),
    ];
    let mut chosen: Option<(&'static str, &String)> = None;
    for (key, value) in sources {
        let Some(value) = value else { continue };
        if value.is_empty() || value.len() > 253 {
            return Err(MembershipError::BadGroupName {
                key,
                value: value.clone(),
            });
        }
        match chosen {
            None => chosen = Some((key, value)),
            Some((first_key, first_value)) if first_value != value => {
                return Err(MembershipError::ConflictingGroups {
                    first_key,
                    first_value: first_value.clone(),
                    second_key: key,
                    second_value: value.clone(),
                })
            }
            Some(_) => {}
        }
    }
    let Some((source, name)) = chosen else {
        return Ok(None);
    };

    // muster's own quorum key wins over Kueue's total count when both are present.
    let min_available = match (
        annotations.get(MIN_AVAILABLE),
        annotations.get(KUEUE_POD_GROUP_TOTAL_COUNT),
    ) {
        (Some(v), _) => Some(parse_quorum(MIN_AVAILABLE, v)?),
        (None, Some(v)) => Some(parse_quorum(KUEUE_POD_GROUP_TOTAL_COUNT, v)?),
        (None, None) => None,
    };
    let timeout = match annotations.get(GANG_TIMEOUT) {
        None => None,
        Some(v) => match humantime::parse_duration(v.trim()) {
            Ok(d) if !d.is_zero() => Some(d),
            _ => return Err(MembershipError::BadTimeout { value: v.clone() }),
        },
    };
    let disruption = match annotations.get(DISRUPTION).map(|v| v.trim()) {
        None | Some("gang") => DisruptionMode::Gang,
        Some("pod") => DisruptionMode::Pod,
        Some(other) => {
            return Err(MembershipError::BadDisruption {
                value: other.to_string(),
            })
        }
    };
    Ok(Some(Membership {
        gang: GangKey::new(namespace, name),
        min_available,
        timeout,
        source,
        disruption,
    }))
}

fn parse_quorum(key: &'static str, value: &str) -> Result<u32, MembershipError> {
    match value.trim().parse::<u32>() {
        Ok(n) if (1..=MAX_MIN_AVAILABLE).contains(&n) => Ok(n),
        _ => Err(MembershipError::BadMinAvailable {
            key,
            value: value.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    type Case<'a> = (
        &'a [(&'a str, &'a str)],
        &'a [(&'a str, &'a str)],
        &'a str,
        Option<u32>,
    );

    #[test]
    fn every_supported_key_forms_a_gang() {
        let cases: &[Case] = &[
            (&[], &[(GROUP, "job"), (MIN_AVAILABLE, "2")], GROUP, Some(2)),
            (&[(GROUP, "job")], &[(MIN_AVAILABLE, "3")], GROUP, Some(3)),
            (
                &[(COSCHEDULING_POD_GROUP, "job")],
                &[],
                COSCHEDULING_POD_GROUP,
                None,
            ),
            (
                &[],
                &[(VOLCANO_GROUP_NAME, "job")],
                VOLCANO_GROUP_NAME,
                None,
            ),
            (
                &[],
                &[(VOLCANO_GROUP_NAME_NEW, "job")],
                VOLCANO_GROUP_NAME_NEW,
                None,
            ),
            (
                &[(KUEUE_POD_GROUP_NAME, "job")],
                &[(KUEUE_POD_GROUP_TOTAL_COUNT, "4")],
                KUEUE_POD_GROUP_NAME,
                Some(4),
            ),
        ];
        for (labels, annotations, source, min) in cases {
            let m = membership_of("ml", &map(labels), &map(annotations))
                .unwrap()
                .unwrap_or_else(|| panic!("no gang for {labels:?} {annotations:?}"));
            assert_eq!(m.gang, GangKey::new("ml", "job"));
            assert_eq!(m.source, *source);
            assert_eq!(m.min_available, *min);
        }
    }

    #[test]
    fn no_keys_means_no_gang() {
        assert_eq!(
            membership_of("ml", &map(&[("app", "x")]), &map(&[])).unwrap(),
            None
        );
    }

    #[test]
    fn same_name_under_two_keys_is_fine_different_names_are_an_error() {
        let agree = membership_of(
            "ml",
            &map(&[(COSCHEDULING_POD_GROUP, "job")]),
            &map(&[(GROUP, "job")]),
        );
        assert!(agree.unwrap().is_some());
        let err = membership_of(
            "ml",
            &map(&[]),
            &map(&[(GROUP, "a"), (VOLCANO_GROUP_NAME, "b")]),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "conflicting gang keys: muster.dev/group=\"a\" but scheduling.k8s.io/group-name=\"b\"; give the pod one group name"
        );
    }

    #[test]
    fn bad_values_are_named() {
        let bad = |annotations: &[(&str, &str)]| {
            membership_of("ml", &map(&[]), &map(annotations))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            bad(&[(GROUP, "j"), (MIN_AVAILABLE, "two")]),
            "muster.dev/min-available must be a positive integer, got \"two\""
        );
        assert!(bad(&[(GROUP, "j"), (MIN_AVAILABLE, "0")]).contains("positive integer"));
        assert!(bad(&[(GROUP, "j"), (GANG_TIMEOUT, "soon")]).contains("gang-timeout"));
        assert!(bad(&[(GROUP, "")]).contains("non-empty"));
    }

    #[test]
    fn timeout_override_is_parsed() {
        let m = membership_of(
            "ml",
            &map(&[]),
            &map(&[(GROUP, "j"), (GANG_TIMEOUT, "90s")]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(m.timeout, Some(Duration::from_secs(90)));
    }

    #[test]
    fn disruption_mode_defaults_to_the_whole_gang_and_rejects_unknown_values() {
        let mode = |annotations: &[(&str, &str)]| {
            membership_of("ml", &map(&[]), &map(annotations)).map(|m| m.unwrap().disruption)
        };
        assert_eq!(mode(&[(GROUP, "j")]), Ok(DisruptionMode::Gang));
        assert_eq!(
            mode(&[(GROUP, "j"), (DISRUPTION, "gang")]),
            Ok(DisruptionMode::Gang)
        );
        assert_eq!(
            mode(&[(GROUP, "j"), (DISRUPTION, "pod")]),
            Ok(DisruptionMode::Pod)
        );
        assert_eq!(
            mode(&[(GROUP, "j"), (DISRUPTION, "some")])
                .unwrap_err()
                .to_string(),
            "muster.dev/disruption must be \"gang\" or \"pod\", got \"some\""
        );
    }
}
