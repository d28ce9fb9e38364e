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

use super::pod_group::PodGroupApi;
use super::tasks::{parse_task, parse_task_minimums, TaskMinimums};
use super::topology::{topology_of, TopologyConstraint, TopologyError};

/// The scheduling gate deploy/gang-admission-policy.yaml puts on every gang member; muster
/// removes it when the member's gang can be placed (see `verbs::gather`).
pub const GATHER_GATE: &str = "muster.dev/gather";

/// muster's group-name key; read as an annotation, or as a label.
pub const GROUP: &str = "muster.dev/group";
/// muster's quorum key (annotation): how many members must have nodes before any is bound.
pub const MIN_AVAILABLE: &str = "muster.dev/min-available";
/// Per-gang override of the quorum timeout (annotation), e.g. `"90s"` or `"5m"`.
pub const GANG_TIMEOUT: &str = "muster.dev/gang-timeout";
/// How a running gang may be disrupted by preemption (annotation): `gang` (the default: every
/// member is evicted, or none) or `pod` (an elastic job that tolerates losing members).
pub const DISRUPTION: &str = "muster.dev/disruption";

/// A member's task (annotation, or label), e.g. `"worker"`.
pub const TASK: &str = "muster.dev/task";
/// Per-task minimums (annotation), e.g. `"master=1,worker=2"`: the quorum also needs that many
/// members of each task with nodes.
pub const TASK_MIN_AVAILABLE: &str = "muster.dev/task-min-available";

/// muster's generation key (annotation, or label): a non-negative integer. A gang's members are
/// the pods of its newest generation; a pod of an older one (its job restarted, and the old
/// pods not gone yet) is no longer a member (see `table::generations`).
pub const GENERATION: &str = "muster.dev/generation";
/// JobSet's restart counter (label) on every pod of a JobSet: JobSet recreates its Jobs with
/// the next value after a failure (`RestartsKey` in sigs.k8s.io/jobset `api/jobset/v1alpha2`,
/// v0.10.1).
pub const JOBSET_RESTART_ATTEMPT: &str = "jobset.sigs.k8s.io/restart-attempt";
/// JobSet's uid (label) on every pod of a JobSet: a JobSet deleted and submitted again under the
/// same name is another incarnation of its gang (`JobSetUIDKey`, sigs.k8s.io/jobset
/// `api/jobset/v1alpha2`, v0.10.1).
pub const JOBSET_UID: &str = "jobset.sigs.k8s.io/jobset-uid";
/// Volcano's job version (annotation) on every pod of a Volcano Job: the job controller raises
/// it when it restarts the job (`JobVersion` in volcano.sh/apis `pkg/apis/batch/v1alpha1`).
pub const VOLCANO_JOB_VERSION: &str = "volcano.sh/job-version";

/// scheduler-plugins coscheduling (label).
pub const COSCHEDULING_POD_GROUP: &str = "scheduling.x-k8s.io/pod-group";
/// Volcano (annotations): `KubeGroupNameAnnotationKey` and `VolcanoGroupNameAnnotationKey` in
/// volcano.sh/apis `pkg/apis/scheduling/v1beta1/labels.go`.
pub const VOLCANO_GROUP_NAME: &str = "scheduling.k8s.io/group-name";
pub const VOLCANO_GROUP_NAME_NEW: &str = "scheduling.volcano.sh/group-name";
/// Volcano's task of a pod (annotation, or label): `TaskSpecKey` in volcano.sh/apis
/// `pkg/apis/batch/v1alpha1/labels.go`.
pub const VOLCANO_TASK_SPEC: &str = "volcano.sh/task-spec";
/// Kubernetes 1.37's `PodSchedulingGroup`: a field of the pod spec, not a label.
pub const SCHEDULING_GROUP: &str = "spec.schedulingGroup.podGroupName";
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
    /// The key `min_available` was read from (muster's, or Kueue's total count).
    pub min_available_key: Option<&'static str>,
    /// Per-gang timeout override, if this pod carries one.
    pub timeout: Option<Duration>,
    /// Which key named the group (for messages and the gang view).
    pub source: &'static str,
    /// What this pod says about disrupting its gang (`muster.dev/disruption`).
    pub disruption: DisruptionMode,
    /// The API of the PodGroup object the group name refers to: Volcano's annotations name a
    /// Volcano PodGroup, the coscheduling label a scheduler-plugins one, `spec.schedulingGroup`
    /// a Kubernetes one; muster's and Kueue's keys name none.
    pub pod_group: Option<PodGroupApi>,
    /// The member's task (`muster.dev/task`, else Volcano's `volcano.sh/task-spec`).
    pub task: Option<Arc<str>>,
    /// Per-task minimums this pod asks for (`muster.dev/task-min-available`).
    pub task_minimums: TaskMinimums,
    /// Where this pod asks its gang to be (muster's or Kueue's topology keys).
    pub topology: Option<TopologyConstraint>,
    /// The generation of its gang the pod was made for (0 when no key gives one): the newest
    /// generation's pods are the gang; an older one's are not members (a job restarted while
    /// its old pods are still there).
    pub generation: u64,
    /// The key `generation` was read from, if any.
    pub generation_key: Option<&'static str>,
    /// The job object the pod was made by, where its controller says (JobSet's uid): a job
    /// deleted and submitted again under the same name makes pods of another incarnation, and
    /// the later one is the gang (see `table::generations`).
    pub incarnation: Option<Arc<str>>,
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
    #[error("{key} must be a task name (letters, digits, '-', '_' or '.', at most 63 characters), got {value:?}")]
    BadTask { key: &'static str, value: String },
    #[error("{TASK_MIN_AVAILABLE} must list tasks and their minimums, such as \"master=1,worker=2\": {why}; got {value:?}")]
    BadTaskMinimums { value: String, why: String },
    #[error("{key} must be a non-negative integer, got {value:?}")]
    BadGeneration { key: &'static str, value: String },
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// Not a fault of the keys: the pod's gang has a newer generation (its job restarted), so
    /// this pod is no longer one of its members. Set by the table (`table::generations`),
    /// never by [`membership_of`]; holds what the keys said, restored if the newer
    /// generation's pods all go first.
    #[error("{why}, so this pod is no longer one of its members (muster places only the newest generation)")]
    Superseded {
        superseded: Box<Membership>,
        /// What is newer, e.g. `muster.dev/generation 0: its gang ml/x is at generation 1 now`.
        why: String,
    },
}

/// Largest quorum accepted from an annotation: far beyond any real job, small enough that
/// arithmetic on it can never overflow.
pub const MAX_MIN_AVAILABLE: u32 = 100_000;

/// Reads the gang membership of a pod in `namespace` from its labels and annotations, and the
/// PodGroup its `spec.schedulingGroup` names (`scheduling_group`), if any.
/// `Ok(None)`: the pod is not in any gang.
pub fn membership_of(
    namespace: &str,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    scheduling_group: Option<&str>,
) -> Result<Option<Membership>, MembershipError> {
    use PodGroupApi::{Kubernetes, SchedulerPlugins, Volcano};
    let annotation = |k: &str| annotations.get(k).map(String::as_str);
    let label = |k: &str| labels.get(k).map(String::as_str);
    // Every place a group name may come from, in order of precedence, and the API of the
    // PodGroup object it names.
    let sources: [(&'static str, Option<&str>, Option<PodGroupApi>); 7] = [
        (GROUP, annotation(GROUP), None),
        (GROUP, label(GROUP), None),
        (
            COSCHEDULING_POD_GROUP,
            label(COSCHEDULING_POD_GROUP),
            Some(SchedulerPlugins),
        ),
        (
            VOLCANO_GROUP_NAME,
            annotation(VOLCANO_GROUP_NAME),
            Some(Volcano),
        ),
        (
            VOLCANO_GROUP_NAME_NEW,
            annotation(VOLCANO_GROUP_NAME_NEW),
            Some(Volcano),
        ),
        (KUEUE_POD_GROUP_NAME, label(KUEUE_POD_GROUP_NAME), None),
        (SCHEDULING_GROUP, scheduling_group, Some(Kubernetes)),
    ];
    let mut chosen: Option<(&'static str, &str)> = None;
    let mut pod_group: Option<PodGroupApi> = None;
    for (key, value, api) in sources {
        let Some(value) = value else { continue };
        if value.is_empty() || value.len() > 253 {
            return Err(MembershipError::BadGroupName {
                key,
                value: value.to_string(),
            });
        }
        match chosen {
            None => chosen = Some((key, value)),
            Some((first_key, first_value)) if first_value != value => {
                return Err(MembershipError::ConflictingGroups {
                    first_key,
                    first_value: first_value.to_string(),
                    second_key: key,
                    second_value: value.to_string(),
                })
            }
            Some(_) => {}
        }
        // The first key naming a PodGroup API decides which (two APIs under one name is a
        // pod no controller writes).
        pod_group = pod_group.or(api);
    }
    let Some((source, name)) = chosen else {
        return Ok(None);
    };

    // muster's own quorum key wins over Kueue's total count when both are present.
    let (min_available, min_available_key) = match (
        annotations.get(MIN_AVAILABLE),
        annotations.get(KUEUE_POD_GROUP_TOTAL_COUNT),
    ) {
        (Some(v), _) => (Some(parse_quorum(MIN_AVAILABLE, v)?), Some(MIN_AVAILABLE)),
        (None, Some(v)) => (
            Some(parse_quorum(KUEUE_POD_GROUP_TOTAL_COUNT, v)?),
            Some(KUEUE_POD_GROUP_TOTAL_COUNT),
        ),
        (None, None) => (None, None),
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
    // muster's task key first (annotation, then label); else Volcano's, which Volcano's own
    // scheduler reads as an annotation, then as a label, ignoring an empty value.
    let task = match annotations.get(TASK).or_else(|| labels.get(TASK)) {
        Some(v) => Some(parse_task(v)?),
        None => annotation(VOLCANO_TASK_SPEC)
            .filter(|v| !v.is_empty())
            .or_else(|| label(VOLCANO_TASK_SPEC).filter(|v| !v.is_empty()))
            .map(Arc::from),
    };
    let task_minimums = match annotations.get(TASK_MIN_AVAILABLE) {
        Some(v) => parse_task_minimums(v)?,
        None => TaskMinimums::default(),
    };
    let topology = topology_of(|k| annotations.get(k).cloned())?;
    // muster's key first (annotation, then label); else the restart counters of the job
    // controllers that restart a gang by recreating its pods.
    let generation_source = [
        (GENERATION, annotation(GENERATION)),
        (GENERATION, label(GENERATION)),
        (JOBSET_RESTART_ATTEMPT, label(JOBSET_RESTART_ATTEMPT)),
        (VOLCANO_JOB_VERSION, annotation(VOLCANO_JOB_VERSION)),
    ]
    .into_iter()
    .find_map(|(key, value)| value.map(|v| (key, v)));
    let (generation, generation_key) = match generation_source {
        None => (0, None),
        Some((key, value)) => match value.trim().parse::<u64>() {
            Ok(n) => (n, Some(key)),
            Err(_) => {
                return Err(MembershipError::BadGeneration {
                    key,
                    value: value.to_string(),
                })
            }
        },
    };
    Ok(Some(Membership {
        gang: GangKey::new(namespace, name),
        min_available,
        min_available_key,
        timeout,
        source,
        disruption,
        pod_group,
        task,
        task_minimums,
        topology,
        generation,
        generation_key,
        incarnation: label(JOBSET_UID).filter(|v| !v.is_empty()).map(Arc::from),
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
mod tests;
