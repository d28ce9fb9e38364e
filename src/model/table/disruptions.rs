//! Gangs a preempt decision disrupts whole, kept in the table until kube-scheduler commits to
//! the preemption and then until the evictor takes them (see `verbs::preempt::commit`).

use std::time::Instant;

use crate::model::inputs::membership::GangKey;
use crate::model::inputs::objects::PodUid;
use crate::model::notice::PodRef;

/// A running gang the kept candidate disrupts whole: muster evicts `others` (the members not
/// among the candidate's victims) through the Eviction API, once kube-scheduler commits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GangDisruption {
    pub gang: GangKey,
    pub others: Vec<PodRef>,
    pub message: String,
}

/// One gang to disrupt whole once kube-scheduler commits to the preemption.
pub(in crate::model) struct PendingDisruption {
    pub disruption: GangDisruption,
    pub node: String,
    /// The kept candidate's victims (on `node`, per the cache).
    pub victims: Vec<PodUid>,
    pub preemptor: PodUid,
    /// The preemptor was nominated to `node` already when muster answered (in the
    /// gang-members mode muster's gatherer nominates members to their seats): that nomination
    /// is not kube-scheduler acting on this preemption.
    pub nominated_before: bool,
    pub since: Instant,
}

/// Disruptions waiting for kube-scheduler's commitment, and those committed, for the evictor.
#[derive(Default)]
pub(in crate::model) struct Disruptions {
    pub pending: Vec<PendingDisruption>,
    pub committed: Vec<GangDisruption>,
}

/// A member kube-scheduler preempted without muster's say, noticed by the watch; the rest of
/// its gang is evicted once the caches are synced (`verbs::unseen_preemption`).
#[derive(Clone, Debug)]
pub(in crate::model) struct UnseenPreemption {
    pub victim: PodRef,
    pub gang: GangKey,
}
