//! A gang's spec: the quorum, the per-task minimums, the timeout, and the priority and age that
//! order competing gangs — and where they came from.
//!
//! This is the one place the quorum is decided, in this order of precedence:
//! 1. the gang's PodGroup, when its members name one of an API the cluster serves
//!    ([`PodGroupIndex::is_served`]), or one last seen existing (whatever discovery says of its
//!    API now): `minMember` (or `minCount`), `minTaskMember`,
//!    `scheduleTimeoutSeconds`. Members whose keys say otherwise are overruled (and told, see
//!    [`pod_group_disagreements`]). If that PodGroup does not exist (yet), nothing is decided:
//!    the gang waits for it and holds nothing.
//! 2. muster's own keys on the members: `muster.dev/min-available` (or Kueue's total count)
//!    and `muster.dev/task-min-available`; members that disagree: the largest wins.
//! 3. no key at all: every member that exists (final only once members stopped appearing).

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::membership::{
    GangKey, GANG_TIMEOUT, MAX_MIN_AVAILABLE, MIN_AVAILABLE, TASK_MIN_AVAILABLE,
};
use super::objects::PodInfo;
use super::pod_group::{PodGroupApi, PodGroupDef, PodGroupIndex};
use super::tasks::TaskMinimums;
use super::topology::GangTopology;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GangSpec {
    /// Members that must have nodes before any is bound.
    pub quorum: u32,
    /// The quorum is declared (by a PodGroup or a key); without it, the quorum is every member
    /// that exists, which is final only once members stopped appearing (the creation window).
    pub declared: bool,
    /// Per task, the members that must have nodes besides the quorum (empty for most gangs).
    pub tasks: TaskMinimums,
    /// Where the quorum and the per-task minimums came from.
    pub source: SpecSource,
    /// Per-gang override of the quorum timeout.
    pub timeout: Option<Duration>,
    /// The highest priority among members.
    pub priority: i32,
    /// The oldest member's creation time, in seconds since the epoch.
    pub created: i64,
    /// Where the quorum must (or should) be: the members' topology keys, or the PodGroup's.
    pub topology: GangTopology,
}

/// Where a gang's spec came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpecSource {
    /// The gang's PodGroup object (in the gang's namespace, named like the gang).
    PodGroup { api: PodGroupApi, name: Arc<str> },
    /// Members name a PodGroup of a served API that does not exist (yet): nothing is decided,
    /// and the gang waits for it.
    MissingPodGroup { api: PodGroupApi, name: Arc<str> },
    /// A key on the members: which one gave the quorum.
    Key(&'static str),
    /// No key: every member that exists.
    EveryMember,
}

impl fmt::Display for SpecSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecSource::PodGroup { api, name } => write!(f, "{api} {name}"),
            SpecSource::MissingPodGroup { api, name } => write!(f, "{api} {name} (missing)"),
            SpecSource::Key(key) => write!(f, "members' key {key}"),
            SpecSource::EveryMember => f.write_str("every member that exists"),
        }
    }
}

impl Default for GangSpec {
    /// The spec of a gang with no members: no quorum, and last in every order.
    fn default() -> Self {
        GangSpec {
            quorum: 0,
            declared: false,
            tasks: TaskMinimums::default(),
            source: SpecSource::EveryMember,
            timeout: None,
            priority: i32::MIN,
            created: i64::MAX,
            topology: GangTopology::Unconstrained,
        }
    }
}

impl GangSpec {
    /// The spec of the gang `key` made of `members`, from its PodGroup when one is named and
    /// served, else from the members' keys (see the module notes).
    pub fn decide(members: &[&PodInfo], key: &GangKey, pod_groups: &PodGroupIndex) -> GangSpec {
        let keys = GangSpec::of_members(members.iter().copied());
        // Members naming PodGroups of different APIs under one name: the first API in
        // `PodGroupApi`'s order that the cluster serves. A PodGroup last seen existing counts
        // whether or not its API is served now: an API that flaps (a 404 from an API server
        // that just restarted, discovery rounds that fail) never makes its gangs fall back to
        // their pods' keys — a Volcano gang would then count only the members that exist. It
        // is forgotten only when its deletion is seen (deleting a CRD deletes its objects
        // first, which the watch delivers).
        let named: BTreeSet<PodGroupApi> = members
            .iter()
            .filter_map(|p| p.gang().and_then(|m| m.pod_group))
            .filter(|api| pod_groups.is_served(*api) || pod_groups.get(*api, key).is_some())
            .collect();
        let Some(api) = named.into_iter().next() else {
            return keys;
        };
        match pod_groups.get(api, key) {
            Some(def) => keys.with_pod_group(def),
            None => GangSpec {
                declared: false,
                tasks: TaskMinimums::default(),
                source: SpecSource::MissingPodGroup {
                    api,
                    name: key.name.clone(),
                },
                ..keys
            },
        }
    }

    /// The spec the members' keys declare. Members that disagree on the quorum or a task's
    /// minimum: the largest wins (see [`conflicting_quorums`] for telling them). The quorum is
    /// at least the sum of the per-task minimums. Without any such key, the gang is every
    /// member that exists.
    pub fn of_members<'a>(members: impl IntoIterator<Item = &'a PodInfo>) -> GangSpec {
        let mut spec = GangSpec::default();
        let mut count = 0u32;
        let mut declared: Option<(u32, &'static str)> = None;
        let mut tasks = TaskMinimums::default();
        let mut topologies = Vec::new();
        for p in members {
            count += 1;
            spec.priority = spec.priority.max(p.priority);
            spec.created = spec.created.min(p.created);
            if let Some(m) = p.gang() {
                if let Some(q) = m.min_available {
                    let key = m.min_available_key.unwrap_or(MIN_AVAILABLE);
                    if declared.is_none_or(|(d, _)| q > d) {
                        declared = Some((q, key));
                    }
                }
                if let Some(t) = m.timeout {
                    spec.timeout = Some(spec.timeout.map_or(t, |d: Duration| d.max(t)));
                }
                tasks = tasks.max_with(&m.task_minimums);
                topologies.extend(m.topology.as_ref());
            }
        }
        spec.topology = GangTopology::of_members(topologies);
        if count == 0 {
            return spec;
        }
        let by_tasks = tasks.total();
        (spec.quorum, spec.source) = match declared {
            Some((q, _)) if by_tasks > q => (by_tasks, SpecSource::Key(TASK_MIN_AVAILABLE)),
            Some((q, key)) => (q, SpecSource::Key(key)),
            None if !tasks.is_empty() => (by_tasks, SpecSource::Key(TASK_MIN_AVAILABLE)),
            None => (count, SpecSource::EveryMember),
        };
        spec.quorum = spec.quorum.max(1);
        spec.declared = spec.source != SpecSource::EveryMember;
        spec.tasks = tasks;
        spec
    }

    /// This spec (the members' keys) overruled by the gang's PodGroup. Per-task minimums count
    /// only when `minMember` covers their sum: Volcano's scheduler checks them only then
    /// (`CheckTaskValid`, `CheckTaskReady` in `pkg/scheduler/api/job_info.go`), and its job
    /// controller writes every task's replica count as its minimum when the job sets none, so
    /// an elastic job (`minAvailable` below its replicas) needs only `minMember`.
    fn with_pod_group(self, def: &PodGroupDef) -> GangSpec {
        let quorum = def.min_member.clamp(1, MAX_MIN_AVAILABLE);
        let tasks = TaskMinimums::new(
            def.min_task_member
                .iter()
                .map(|(t, n)| (Arc::from(t.as_str()), (*n).min(MAX_MIN_AVAILABLE))),
        );
        GangSpec {
            quorum,
            declared: true,
            tasks: if tasks.total() <= quorum {
                tasks
            } else {
                TaskMinimums::default()
            },
            source: SpecSource::PodGroup {
                api: def.api,
                name: def.key.name.clone(),
            },
            // muster's timeout key still applies where the PodGroup says nothing.
            timeout: def.timeout.or(self.timeout),
            topology: self.topology.clone().with_pod_group(def.topology.as_ref()),
            ..self
        }
    }

    /// Whether the quorum is decided: not while the gang waits for its PodGroup.
    pub fn is_decided(&self) -> bool {
        !matches!(self.source, SpecSource::MissingPodGroup { .. })
    }

    /// The PodGroup the gang waits for, if it does.
    pub fn awaited_pod_group(&self) -> Option<(PodGroupApi, &Arc<str>)> {
        match &self.source {
            SpecSource::MissingPodGroup { api, name } => Some((*api, name)),
            _ => None,
        }
    }

    /// Whether seats planned under `self` may be wrong under `next`: a PodGroup is involved
    /// and what the gang needs (its source, quorum or per-task minimums) changed.
    pub fn replan_needed(&self, next: &GangSpec) -> bool {
        let pod_group = |s: &GangSpec| {
            matches!(
                s.source,
                SpecSource::PodGroup { .. } | SpecSource::MissingPodGroup { .. }
            )
        };
        (pod_group(self) || pod_group(next))
            && (self.source != next.source
                || self.quorum != next.quorum
                || self.tasks != next.tasks
                || self.topology != next.topology)
    }

    pub fn timeout_or(&self, default: Duration) -> Duration {
        self.timeout.unwrap_or(default)
    }
}

/// The distinct quorums members declare, smallest first, when they declare more than one.
pub fn conflicting_quorums<'a>(members: impl IntoIterator<Item = &'a PodInfo>) -> Option<Vec<u32>> {
    let values: BTreeSet<u32> = members
        .into_iter()
        .filter_map(|p| p.gang().and_then(|m| m.min_available))
        .collect();
    (values.len() >= 2).then(|| values.into_iter().collect())
}

/// What members' keys say that their PodGroup overrules, one line per distinct value, sorted:
/// e.g. `muster.dev/min-available=3 (minMember 2)`. Values are collected first and worded once,
/// as this runs whenever a member of a large gang changes.
pub fn pod_group_disagreements(members: &[&PodInfo], def: &PodGroupDef) -> Vec<String> {
    let theirs_tasks = TaskMinimums::new(
        def.min_task_member
            .iter()
            .map(|(t, n)| (Arc::from(t.as_str()), *n)),
    );
    let mut quorums: BTreeSet<(&'static str, u32)> = BTreeSet::new();
    let mut tasks: Vec<&TaskMinimums> = Vec::new();
    let mut timeouts: BTreeSet<Duration> = BTreeSet::new();
    for m in members.iter().filter_map(|p| p.gang()) {
        if let Some(q) = m.min_available.filter(|q| *q != def.min_member) {
            quorums.insert((m.min_available_key.unwrap_or(MIN_AVAILABLE), q));
        }
        let mine = &m.task_minimums;
        if !mine.is_empty() && *mine != theirs_tasks && !tasks.contains(&mine) {
            tasks.push(mine);
        }
        if let (Some(mine), Some(theirs)) = (m.timeout, def.timeout) {
            if mine != theirs {
                timeouts.insert(mine);
            }
        }
    }
    let theirs_tasks = if theirs_tasks.is_empty() {
        "none".to_string()
    } else {
        theirs_tasks.to_string()
    };
    let mut found: BTreeSet<String> = quorums
        .into_iter()
        .map(|(key, q)| format!("{key}={q} (minMember {})", def.min_member))
        .collect();
    found.extend(
        tasks
            .into_iter()
            .map(|t| format!("{TASK_MIN_AVAILABLE}={t} (minTaskMember {theirs_tasks})")),
    );
    found.extend(timeouts.into_iter().map(|t| {
        format!(
            "{GANG_TIMEOUT}={} (scheduleTimeoutSeconds {})",
            humantime::format_duration(t),
            def.timeout.unwrap_or_default().as_secs()
        )
    }));
    found.into_iter().collect()
}

#[cfg(test)]
#[path = "spec/tests.rs"]
mod tests;
