//! kube-scheduler's SchedulingGates (PreEnqueue): a pod with `spec.schedulingGates` is not
//! ready to be scheduled at all — kube-scheduler does not even try it — so a gated gang member
//! can be placed nowhere and must hold nothing.

use super::Reason;
use crate::model::inputs::objects::PodInfo;

/// The pod's remaining gates; empty when it may be scheduled.
pub fn gates(pod: &PodInfo) -> &[String] {
    pod.rules.as_ref().map_or(&[], |r| &r.scheduling_gates)
}

pub fn check(pod: &PodInfo) -> Result<(), Reason> {
    if gates(pod).is_empty() {
        Ok(())
    } else {
        Err(Reason::SchedulingGated)
    }
}

/// kube-scheduler's words for a gated pod, e.g. `waiting for scheduling gates: [example.com/quota]`.
pub fn message(pod: &PodInfo) -> Option<String> {
    let gates = gates(pod);
    (!gates.is_empty()).then(|| format!("waiting for scheduling gates: [{}]", gates.join(" ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::rules::fixtures::{pod, PodRulesBuilder};

    /// Mirrors SchedulingGates: any gate keeps the pod out of scheduling.
    #[test]
    fn a_gated_pod_is_not_ready() {
        assert_eq!(check(&pod("free")), Ok(()));
        assert_eq!(message(&pod("free")), None);
        let gated = PodRulesBuilder::default()
            .gate("example.com/quota")
            .gate("example.com/data")
            .on(pod("gated"));
        assert_eq!(check(&gated), Err(Reason::SchedulingGated));
        assert_eq!(
            message(&gated).unwrap(),
            "waiting for scheduling gates: [example.com/quota example.com/data]"
        );
    }
}
