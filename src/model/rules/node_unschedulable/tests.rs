use super::*;
use crate::model::inputs::objects::{Toleration, TolerationOperator};
use crate::model::rules::fixtures::{node, pod};

fn tol(key: &str, operator: TolerationOperator, effect: &str) -> Toleration {
    Toleration {
        key: key.into(),
        operator,
        value: String::new(),
        effect: effect.into(),
    }
}

/// Mirrors NodeUnschedulable: a cordon is a NoSchedule taint the pod may tolerate.
#[test]
fn cordoned_node_takes_only_pods_tolerating_unschedulable() {
    use TolerationOperator::*;
    let mut cordoned = node("n1");
    cordoned.unschedulable = true;
    let cases = [
        ("no tolerations", vec![], false),
        (
            "exists on the key",
            vec![tol(UNSCHEDULABLE_TAINT_KEY, Exists, "NoSchedule")],
            true,
        ),
        (
            "exists on the key, any effect",
            vec![tol(UNSCHEDULABLE_TAINT_KEY, Exists, "")],
            true,
        ),
        (
            "equal with empty value",
            vec![tol(UNSCHEDULABLE_TAINT_KEY, Equal, "")],
            true,
        ),
        (
            "wrong effect",
            vec![tol(UNSCHEDULABLE_TAINT_KEY, Exists, "NoExecute")],
            false,
        ),
        ("tolerate everything", vec![tol("", Exists, "")], true),
        (
            "other key",
            vec![tol("node.kubernetes.io/not-ready", Exists, "")],
            false,
        ),
    ];
    for (name, tolerations, want) in cases {
        let mut p = pod("p");
        p.tolerations = tolerations.into();
        let got = check(&cordoned, &p);
        assert_eq!(got.is_ok(), want, "{name}");
        if !want {
            assert_eq!(got, Err(Reason::NodeUnschedulable), "{name}");
        }
        assert_eq!(check(&node("n2"), &p), Ok(()), "uncordoned: {name}");
    }
}
