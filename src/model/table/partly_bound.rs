//! What was done about a gang found partly bound when muster started deciding (see
//! `verbs::repair`), kept until the shared state counts and logs it.

use crate::model::inputs::membership::GangKey;
use crate::model::inputs::objects::NodeName;
use crate::model::notice::PodRef;

/// One gang found partly bound: some quorum members bound, none deleted or failed, the rest
/// pending.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartlyBound {
    pub gang: GangKey,
    /// Live members bound, and the quorum.
    pub bound: u32,
    pub quorum: u32,
    pub outcome: PartlyBoundOutcome,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PartlyBoundOutcome {
    /// Room is held for the remaining members (a seat each, ahead of every other decision);
    /// kube-scheduler's next calls for them bind the gang whole.
    Finishing { seats: Vec<(PodRef, NodeName)> },
    /// The remaining members cannot be placed: the bound ones are evicted (disruption mode
    /// `gang`; never-half, evict-for-whole).
    Evicting { members: Vec<PodRef>, why: String },
    /// The remaining members cannot be placed, and the gang's disruption mode is `pod`: said,
    /// and its bound members keep running.
    Reported { why: String },
}

impl PartlyBoundOutcome {
    /// The label of `muster_partly_bound_gangs_total{outcome}`.
    pub fn label(&self) -> &'static str {
        match self {
            PartlyBoundOutcome::Finishing { .. } => "finishing",
            PartlyBoundOutcome::Evicting { .. } => "evicted",
            PartlyBoundOutcome::Reported { .. } => "reported",
        }
    }
}
