//! What the model tells the outside world: notices that become Kubernetes Events.

use std::fmt;
use std::sync::Arc;

use crate::model::inputs::objects::{PodInfo, PodUid};

/// Identity of a pod, for Events and binding calls.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodRef {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    pub uid: PodUid,
}

impl PodRef {
    pub fn of(info: &PodInfo) -> PodRef {
        PodRef {
            namespace: info.namespace.clone(),
            name: info.name.clone(),
            uid: info.uid.clone(),
        }
    }
}

impl fmt::Display for PodRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Something worth telling the pod's owner, as a Kubernetes Event (and a log line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub pod: PodRef,
    pub kind: NoticeKind,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoticeKind {
    /// Normal `GangWaiting`: the gang is below quorum (k/n), or cannot fit yet.
    Waiting,
    /// Normal `GangPlaced`: quorum reached, members bound together.
    Placed,
    /// Warning `GangTimedOut`: seats released after the quorum timeout.
    TimedOut,
    /// Warning `GangQuorumConflict`: members disagree on minAvailable.
    QuorumConflict,
    /// Warning `GangPodGroupConflict`: members' keys disagree with their gang's PodGroup,
    /// which wins.
    PodGroupConflict,
    /// Warning `InvalidGangKeys`: the pod's gang labels/annotations cannot be used.
    InvalidKeys,
    /// Warning `GangBindFailed`: muster could not bind a member at quorum.
    BindFailed,
    /// Not an Event: the pod was refused for room gang seats held, and seats were released
    /// since. The publisher annotates the pod (`muster.dev/retry`) so kube-scheduler, which
    /// re-queues an unschedulable pod when the pod itself is updated, tries it again now.
    Retry,
    /// Normal `GangPreempting`: which victims preemption for this pod may evict, and why
    /// other candidates were dropped (or why nothing is evicted).
    Preempting,
    /// Warning `GangDisrupted`: this member's gang is evicted whole by preemption.
    Disrupted,
    /// Warning `GangMarkerMissing`: a gang member without the marker resource, which
    /// kube-scheduler schedules without muster (see `model::gather`).
    MarkerMissing,
    /// Warning `GangPartlyBound`: the gang was found partly bound when muster started deciding
    /// and its remaining members cannot be placed; its bound members are evicted (mode `gang`)
    /// or said to keep running (mode `pod`).
    PartlyBound,
    /// Warning `GangKeysIgnored`: a gang-keyed pod whose `schedulerName` does not call muster;
    /// muster treats it as a plain pod.
    OtherScheduler,
    /// Warning `GangGateReleased`: a pod behind muster's gate that is no longer a gang member
    /// (its keys were removed, or its scheduler does not call muster): the gate is removed.
    GateReleased,
    /// Normal `GangMemberSuperseded`: the pod's gang has a newer generation (its job
    /// restarted), so the pod is no longer one of its members.
    Superseded,
}

impl NoticeKind {
    pub fn reason(self) -> &'static str {
        match self {
            NoticeKind::Waiting => "GangWaiting",
            NoticeKind::Placed => "GangPlaced",
            NoticeKind::TimedOut => "GangTimedOut",
            NoticeKind::QuorumConflict => "GangQuorumConflict",
            NoticeKind::PodGroupConflict => "GangPodGroupConflict",
            NoticeKind::InvalidKeys => "InvalidGangKeys",
            NoticeKind::BindFailed => "GangBindFailed",
            NoticeKind::Retry => "RetryAfterRelease",
            NoticeKind::Preempting => "GangPreempting",
            NoticeKind::Disrupted => "GangDisrupted",
            NoticeKind::MarkerMissing => "GangMarkerMissing",
            NoticeKind::PartlyBound => "GangPartlyBound",
            NoticeKind::OtherScheduler => "GangKeysIgnored",
            NoticeKind::GateReleased => "GangGateReleased",
            NoticeKind::Superseded => "GangMemberSuperseded",
        }
    }

    pub fn is_warning(self) -> bool {
        !matches!(
            self,
            NoticeKind::Waiting
                | NoticeKind::Placed
                | NoticeKind::Preempting
                | NoticeKind::Superseded
        )
    }
}
