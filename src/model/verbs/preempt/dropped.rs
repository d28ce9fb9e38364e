//! Why a preemption candidate was dropped, in the preemptor's Event: each reason's sentence
//! is in `messages`, which takes plain values only.

use super::DropReason;
use crate::model::inputs::objects::PodInfo;
use crate::model::messages;

impl DropReason {
    /// Why the candidate was dropped, as the preemptor's Event tells it.
    pub(in crate::model) fn explain(&self, pod: &PodInfo) -> String {
        match self {
            DropReason::GangCannotFollow { fit, quorum } => {
                messages::dropped_gang_cannot_follow(pod, *fit, *quorum)
            }
            DropReason::RunningGangVictim { gang } => messages::dropped_running_gang_victim(gang),
            DropReason::GangNotLowerPriority { gang, priority } => {
                messages::dropped_gang_not_lower_priority(pod, gang, *priority)
            }
            DropReason::DisruptsMore => messages::DROPPED_DISRUPTS_MORE.to_string(),
            DropReason::DomainEvictsMore { victims, best } => {
                messages::dropped_domain_evicts_more(pod, *victims, *best)
            }
            DropReason::NotSeenYet => messages::DROPPED_NOT_SEEN_YET.to_string(),
            DropReason::QuorumUndecided { existing } => {
                messages::dropped_quorum_undecided(pod, *existing)
            }
            DropReason::PodGroupMissing { api } => messages::dropped_pod_group_missing(pod, *api),
            DropReason::MembersMissing { existing, quorum } => {
                messages::dropped_members_missing(pod, *existing, *quorum)
            }
            DropReason::GangBackingOff { left } => messages::dropped_backing_off(pod, *left),
            DropReason::SiblingPreempting => messages::dropped_sibling_preempting(pod),
            DropReason::PreemptionUnderWay { nodes } => {
                messages::dropped_preemption_under_way(pod, nodes)
            }
            DropReason::HeldForGang { gang } => messages::dropped_held_for_gang(gang),
            DropReason::SeatsHold { reason } => messages::dropped_seats_hold(reason),
            DropReason::NotThePod { actual } => messages::dropped_not_the_pod(pod, actual),
            DropReason::VictimNotOnNode { victim, on } => {
                messages::dropped_victim_not_on_node(victim, on.as_deref())
            }
            DropReason::VictimNotLowerPriority { victim, priority } => {
                messages::dropped_victim_not_lower_priority(pod, victim, *priority)
            }
            DropReason::BeyondCluster(b) => {
                messages::dropped_beyond_cluster(pod, b.quorum, b.nodes, b.at_most)
            }
        }
    }

    /// Each dropped node with why, for the preemptor's Event.
    pub(in crate::model) fn explain_all(
        dropped: &[(String, DropReason)],
        pod: &PodInfo,
    ) -> Vec<(String, String)> {
        dropped
            .iter()
            .map(|(node, why)| (node.clone(), why.explain(pod)))
            .collect()
    }
}
