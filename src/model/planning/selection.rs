//! Which members a simulation of a gang places: the members its quorum still needs, chosen so
//! that every task below its minimum is covered first, then the smallest of the rest; and how
//! many members not created yet it must assume, per task. The planner and the preemption check
//! choose the same way.

use std::sync::Arc;

use crate::model::inputs::objects::PodInfo;
use crate::model::table::pods::PodEntry;
use crate::model::table::GangFacts;

/// The members a simulation places besides the member asking (if any).
pub(in crate::model) struct Selection<'a> {
    /// Existing members, largest first (first-fit decreasing).
    pub existing: Vec<&'a PodEntry>,
    /// Members not created yet: per task below its minimum (`Some`), then for the quorum
    /// alone (`None`, any task), how many.
    pub not_created: Vec<(Option<Arc<str>>, usize)>,
}

impl Selection<'_> {
    /// How many members not created yet the simulation assumes.
    pub fn missing(&self) -> usize {
        self.not_created.iter().map(|(_, n)| n).sum()
    }
}

/// The task of a member, if it has one.
pub(in crate::model) fn task_of(pod: &PodInfo) -> Option<&str> {
    pod.gang()?.task.as_deref()
}

/// Chooses, among `candidates` (pending members other than `asking`), the members the gang
/// still needs when `asking` (placed by the caller) is placed too: for each task below its
/// minimum its smallest members, then the smallest others until the quorum is met; what is
/// still missing is counted per task.
pub(in crate::model) fn choose<'a>(
    facts: &GangFacts,
    asking: Option<&PodInfo>,
    mut candidates: Vec<&'a PodEntry>,
) -> Selection<'a> {
    sort_smallest_first(&mut candidates);
    let asking_task = asking.and_then(task_of);
    let have = facts.with_nodes + facts.confirmed_seats;
    let total = (facts.spec.quorum.saturating_sub(have) as usize)
        .saturating_sub(usize::from(asking.is_some()));
    let mut taken = vec![false; candidates.len()];
    let mut chosen: Vec<&PodEntry> = Vec::new();
    let mut not_created = Vec::new();
    let mut for_tasks = 0usize;
    for t in &facts.tasks {
        let mut short = t.short(true) as usize;
        if asking_task == Some(&*t.task) {
            short = short.saturating_sub(1);
        }
        for (i, c) in candidates.iter().enumerate() {
            if short == 0 {
                break;
            }
            if !taken[i] && task_of(&c.info) == Some(&*t.task) {
                taken[i] = true;
                chosen.push(*c);
                short -= 1;
                for_tasks += 1;
            }
        }
        if short > 0 {
            not_created.push((Some(t.task.clone()), short));
            for_tasks += short;
        }
    }
    let mut rest = total.saturating_sub(for_tasks);
    for (i, c) in candidates.iter().enumerate() {
        if rest == 0 {
            break;
        }
        if !taken[i] {
            chosen.push(*c);
            rest -= 1;
        }
    }
    if rest > 0 {
        not_created.push((None, rest));
    }
    Selection {
        existing: largest_first(&chosen),
        not_created,
    }
}

/// Smallest requests first, then by name: the members easiest to fit are the ones a
/// simulation commits to, which gives the gang its best chance.
pub(in crate::model) fn sort_smallest_first(members: &mut [&PodEntry]) {
    members.sort_by(|a, b| {
        let (ra, rb) = (&a.info.requests, &b.info.requests);
        (ra.cpu_milli, ra.memory, &ra.extended, &a.info.name).cmp(&(
            rb.cpu_milli,
            rb.memory,
            &rb.extended,
            &b.info.name,
        ))
    });
}

/// The same members, largest first, for first-fit-decreasing packing.
pub(in crate::model) fn largest_first<'a>(members: &[&'a PodEntry]) -> Vec<&'a PodEntry> {
    let mut v = members.to_vec();
    v.sort_by(|a, b| {
        let (ra, rb) = (&a.info.requests, &b.info.requests);
        (&rb.extended, rb.cpu_milli, rb.memory, &a.info.name).cmp(&(
            &ra.extended,
            ra.cpu_milli,
            ra.memory,
            &b.info.name,
        ))
    });
    v
}
