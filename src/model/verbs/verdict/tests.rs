use super::names_only_simulated_rules;

/// kube-scheduler's FitError text (pkg/scheduler/framework/types.go) for NodeResourcesFit,
/// TaintToleration and NodeAffinity: muster simulates them, so it is not outside evidence.
#[test]
fn a_verdict_naming_only_simulated_plugins_is_not_evidence() {
    for m in [
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: \
         1 Preemption is not helpful for scheduling.",
        "0/3 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint \
         {node-role.kubernetes.io/control-plane: }, 1 node(s) didn't match Pod's node \
         affinity/selector.",
        "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports.",
    ] {
        assert!(names_only_simulated_rules(m), "{m}");
    }
}

/// VolumeBinding, DynamicResources, an out-of-tree plugin: what muster does not simulate.
#[test]
fn a_verdict_naming_an_unsimulated_plugin_is_evidence() {
    for m in [
        "0/1 nodes are available: persistentvolumeclaim \"data\" not found. preemption: \
         0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
        "0/2 nodes are available: 1 Insufficient cpu, 1 cannot allocate all claims.",
        "0/1 nodes are available: 1 node(s) had volume node affinity conflict.",
        "something else entirely",
    ] {
        assert!(!names_only_simulated_rules(m), "{m}");
    }
}
