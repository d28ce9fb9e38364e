//! Tasks: the roles inside one gang ("master", "worker"), and the per-task minimums its quorum
//! also needs ("1 master and at least 2 workers").
//!
//! A member's task comes from muster's own `muster.dev/task` (annotation or label), else from
//! Volcano's `volcano.sh/task-spec`, which Volcano's job controller puts on every pod it creates
//! (`TaskSpecKey` in volcano.sh/apis `pkg/apis/batch/v1alpha1/labels.go`; Volcano's scheduler
//! reads it as an annotation, then as a label: `getTaskRole` in `pkg/scheduler/api/job_info.go`).
//! Per-task minimums come from a Volcano PodGroup's `minTaskMember`, or from muster's own
//! `muster.dev/task-min-available` for users without a PodGroup API.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::membership::{MembershipError, MAX_MIN_AVAILABLE, TASK};

/// A gang's per-task minimums: each named task needs at least this many members with nodes.
/// Most gangs have none, and then this costs no allocation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskMinimums(Option<Arc<BTreeMap<Arc<str>, u32>>>);

impl TaskMinimums {
    /// The minimums, without the tasks whose minimum is zero (they ask for nothing, as in
    /// Volcano, which skips them).
    pub fn new(entries: impl IntoIterator<Item = (Arc<str>, u32)>) -> Self {
        let map: BTreeMap<Arc<str>, u32> = entries.into_iter().filter(|(_, n)| *n > 0).collect();
        TaskMinimums((!map.is_empty()).then(|| Arc::new(map)))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// Tasks and minimums, by task name.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<str>, u32)> + '_ {
        self.0.iter().flat_map(|m| m.iter().map(|(t, n)| (t, *n)))
    }

    /// The minimum of `task` (0 when it has none).
    pub fn get(&self, task: &str) -> u32 {
        self.0
            .as_ref()
            .and_then(|m| m.get(task).copied())
            .unwrap_or(0)
    }

    /// The sum of the minimums: the fewest members that can meet all of them.
    pub fn total(&self) -> u32 {
        self.iter().fold(0u32, |sum, (_, n)| sum.saturating_add(n))
    }

    /// Per task, the larger of the two minimums (members that disagree: the most demanding
    /// wins, as for the quorum).
    pub fn max_with(&self, other: &TaskMinimums) -> TaskMinimums {
        if other.is_empty() {
            return self.clone();
        }
        if self.is_empty() {
            return other.clone();
        }
        let mut merged: BTreeMap<Arc<str>, u32> =
            self.iter().map(|(t, n)| (t.clone(), n)).collect();
        for (t, n) in other.iter() {
            let e = merged.entry(t.clone()).or_insert(0);
            *e = (*e).max(n);
        }
        TaskMinimums::new(merged)
    }
}

impl fmt::Display for TaskMinimums {
    /// The annotation's own syntax: `master=1,worker=2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (t, n)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{t}={n}")?;
        }
        Ok(())
    }
}

/// Longest task name accepted: a DNS label, as Volcano's task names are.
const MAX_TASK_NAME: usize = 63;

fn valid_task_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TASK_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Reads `muster.dev/task`: a name that `muster.dev/task-min-available` can refer to.
pub fn parse_task(value: &str) -> Result<Arc<str>, MembershipError> {
    let name = value.trim();
    if valid_task_name(name) {
        Ok(Arc::from(name))
    } else {
        Err(MembershipError::BadTask {
            key: TASK,
            value: value.to_string(),
        })
    }
}

/// Reads `muster.dev/task-min-available`, e.g. `"master=1,worker=2"`: every entry a task name
/// and a positive minimum, no task twice.
pub fn parse_task_minimums(value: &str) -> Result<TaskMinimums, MembershipError> {
    let bad = |why: String| MembershipError::BadTaskMinimums {
        value: value.to_string(),
        why,
    };
    let mut map: BTreeMap<Arc<str>, u32> = BTreeMap::new();
    for entry in value.split(',') {
        let entry = entry.trim();
        if entry.is_empty() {
            return Err(bad("an entry is empty".into()));
        }
        let Some((name, min)) = entry.split_once('=') else {
            return Err(bad(format!("entry {entry:?} has no '='")));
        };
        let name = name.trim();
        if !valid_task_name(name) {
            return Err(bad(format!(
                "{name:?} is not a task name (letters, digits, '-', '_' or '.', at most \
                 {MAX_TASK_NAME} characters)"
            )));
        }
        let min = match min.trim().parse::<u32>() {
            Ok(n) if (1..=MAX_MIN_AVAILABLE).contains(&n) => n,
            _ => {
                return Err(bad(format!(
                    "the minimum of task {name} must be a positive integer, got {:?}",
                    min.trim()
                )))
            }
        };
        if map.insert(Arc::from(name), min).is_some() {
            return Err(bad(format!("task {name} is listed twice")));
        }
    }
    Ok(TaskMinimums::new(map))
}

#[cfg(test)]
mod tests;
