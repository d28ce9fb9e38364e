//! What a preempt decision planned for a gang, kept in the table until kube-scheduler
//! nominates one of its nodes (the preemption hold, see `verbs::preemption_hold`).

use std::time::Instant;

use super::gang::SeatHolder;
use crate::model::inputs::membership::GangKey;
use crate::model::inputs::objects::NodeName;
use crate::model::inputs::resources::Resources;

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
