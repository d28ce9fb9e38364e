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

/// muster's own gate is the one muster removes when it places the gang: the simulation
/// counts it as gone; any other gate beside it still blocks.
#[test]
fn musters_own_gate_is_removable_and_others_still_block() {
    let gathered = PodRulesBuilder::default()
        .gate(GATHER_GATE)
        .on(pod("gathered"));
    assert_eq!(check(&gathered), Ok(()));
    assert_eq!(message(&gathered), None);
    let both = PodRulesBuilder::default()
        .gate(GATHER_GATE)
        .gate("example.com/quota")
        .on(pod("both"));
    assert_eq!(check(&both), Err(Reason::SchedulingGated));
    assert_eq!(
        message(&both).unwrap(),
        "waiting for scheduling gates: [example.com/quota]"
    );
}
