//! kube-scheduler's NodeUnschedulable filter: a cordoned node (`spec.unschedulable`) takes only
//! pods that tolerate the `node.kubernetes.io/unschedulable:NoSchedule` taint.

use super::taint_toleration::tolerated;
use super::Reason;
use crate::model::inputs::objects::{NodeInfo, PodInfo, Taint};

/// The taint a pod must tolerate to be placed on a cordoned node.
pub const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";

pub fn check(node: &NodeInfo, pod: &PodInfo) -> Result<(), Reason> {
    if !node.unschedulable {
        return Ok(());
    }
    let cordon = Taint {
        key: UNSCHEDULABLE_TAINT_KEY.to_string(),
        value: String::new(),
        effect: "NoSchedule".to_string(),
    };
    if tolerated(&pod.tolerations, &cordon) {
        Ok(())
    } else {
        Err(Reason::NodeUnschedulable)
    }
}

#[cfg(test)]
mod tests;
