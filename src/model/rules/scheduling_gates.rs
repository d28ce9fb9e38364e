//! kube-scheduler's SchedulingGates (PreEnqueue): a pod with `spec.schedulingGates` is not
//! ready to be scheduled at all — kube-scheduler does not even try it — so a gated gang member
//! can be placed nowhere and must hold nothing.

use super::Reason;
use crate::model::inputs::objects::PodInfo;

/// muster's own gate ([`crate::model::inputs::membership::GATHER_GATE`]): the simulation counts
/// it as removable; every other gate keeps the pod out of scheduling.
pub use crate::model::inputs::membership::GATHER_GATE;

/// The pod's remaining gates; empty when it may be scheduled.
pub fn gates(pod: &PodInfo) -> &[String] {
    pod.rules.as_ref().map_or(&[], |r| &r.scheduling_gates)
}

/// The gates that keep the pod out of muster's simulation: every gate but muster's own
/// (`muster.dev/gather`), which muster removes itself when it places the gang (see
/// `model::gather`). Another component's gate still blocks.
fn blocking_gates(pod: &PodInfo) -> impl Iterator<Item = &str> {
    gates(pod)
        .iter()
        .map(String::as_str)
        .filter(|g| *g != GATHER_GATE)
}

pub fn check(pod: &PodInfo) -> Result<(), Reason> {
    if blocking_gates(pod).next().is_none() {
        Ok(())
    } else {
        Err(Reason::SchedulingGated)
    }
}

/// kube-scheduler's words for a gated pod, e.g. `waiting for scheduling gates: [example.com/quota]`.
pub fn message(pod: &PodInfo) -> Option<String> {
    let gates: Vec<&str> = blocking_gates(pod).collect();
    (!gates.is_empty()).then(|| format!("waiting for scheduling gates: [{}]", gates.join(" ")))
}

#[cfg(test)]
mod tests;
