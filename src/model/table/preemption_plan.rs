//! What a preempt decision planned for a gang, kept in the table until kube-scheduler
//! nominates one of its nodes (the preemption hold, see `verbs::preemption_hold`).

use std::time::{Duration, Instant};

use rustc_hash::FxHashMap as HashMap;

use super::gang::SeatHolder;
use crate::model::inputs::membership::GangKey;
use crate::model::inputs::objects::{NodeName, PodUid};
use crate::model::inputs::resources::Resources;

/// Preemptors whose plans are remembered, at most (a decision for one more is not held).
const MAX_PLANS: usize = 10_000;

/// One seat of a preemption plan: who, where, and how much.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::model) struct PlannedSeat {
    pub holder: SeatHolder,
    pub node: NodeName,
    pub requests: Resources,
}

/// What a preempt decision kept for a gang member: per kept node, where the rest of the
/// gang's quorum goes.
pub(in crate::model) struct PreemptionPlan {
    pub gang: GangKey,
    /// When the decision was made: the hold's gang timeout counts from here.
    pub at: Instant,
    pub requests: Resources,
    pub by_node: Vec<(String, Vec<PlannedSeat>)>,
}

/// Per preempting gang member, the plan its latest preempt decision made, until kube-scheduler
/// nominates one of the kept nodes or the plan goes stale. The map is written only through the
/// methods here, which keep it within [`MAX_PLANS`].
#[derive(Default)]
pub(in crate::model) struct PreemptionPlans {
    by_preemptor: HashMap<PodUid, PreemptionPlan>,
}

impl PreemptionPlans {
    /// Remembers `plan` for `preemptor`, replacing its older one; a preemptor past
    /// [`MAX_PLANS`] others gets none.
    pub fn remember(&mut self, preemptor: &PodUid, plan: PreemptionPlan) {
        if self.by_preemptor.len() >= MAX_PLANS && !self.by_preemptor.contains_key(preemptor) {
            return;
        }
        self.by_preemptor.insert(preemptor.clone(), plan);
    }

    /// Forgets the plans made `wait` or longer before `now`.
    pub fn forget_older_than(&mut self, now: Instant, wait: Duration) {
        self.by_preemptor
            .retain(|_, p| now.saturating_duration_since(p.at) < wait);
    }

    /// Forgets the plan of `preemptor`, if any.
    pub fn forget(&mut self, preemptor: &str) {
        self.by_preemptor.remove(preemptor);
    }

    /// The plan of `preemptor`, if any.
    pub fn get(&self, preemptor: &str) -> Option<&PreemptionPlan> {
        self.by_preemptor.get(preemptor)
    }

    pub fn is_empty(&self) -> bool {
        self.by_preemptor.is_empty()
    }

    /// Every plan, with its preemptor (in no particular order).
    pub fn iter(&self) -> impl Iterator<Item = (&PodUid, &PreemptionPlan)> {
        self.by_preemptor.iter()
    }

    /// The plans for `gang` (in no particular order).
    pub fn for_gang<'a>(&'a self, gang: &'a GangKey) -> impl Iterator<Item = &'a PreemptionPlan> {
        self.by_preemptor.values().filter(move |p| p.gang == *gang)
    }
}
