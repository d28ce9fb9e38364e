use super::*;
use crate::model::rules::fixtures::{node, pod};

fn tol(key: &str, operator: TolerationOperator, value: &str, effect: &str) -> Toleration {
    Toleration {
        key: key.into(),
        operator,
        value: value.into(),
        effect: effect.into(),
    }
}

fn taint(key: &str, value: &str, effect: &str) -> Taint {
    Taint {
        key: key.into(),
        value: value.into(),
        effect: effect.into(),
    }
}

const GPU: &str = "nvidia.com/gpu";

/// Mirrors TaintToleration (`v1.Toleration.ToleratesTaint`), case by case.
#[test]
fn toleration_matching_mirrors_taint_toleration() {
    use TolerationOperator::*;
    let gpu = taint(GPU, "present", "NoSchedule");
    // One line a case (rustfmt would spread each over five): what it shows, the toleration,
    // whether it tolerates the gpu taint.
    #[rustfmt::skip]
    let cases = [
        ("exists on the key, any effect",                  tol(GPU, Exists, "", ""),                    true),
        ("equal value and effect",                         tol(GPU, Equal, "present", "NoSchedule"),    true),
        ("equal, other value",                             tol(GPU, Equal, "absent", ""),               false),
        ("exists, other effect",                           tol(GPU, Exists, "", "NoExecute"),           false),
        ("empty key with Exists tolerates everything",     tol("", Exists, "", ""),                     true),
        ("empty key with Exists, effect must still match", tol("", Exists, "", "NoExecute"),            false),
        ("empty key with Equal compares the value",        tol("", Equal, "present", ""),               true),
        ("empty key with Equal, other value",              tol("", Equal, "other", ""),                 false),
        ("other key",                                      tol("other", Exists, "", ""),                false),
        ("Gt is gated off: never tolerates",               tol(GPU, Unsupported, "present", ""),        false),
    ];
    for (name, t, want) in cases {
        assert_eq!(t.tolerates(&gpu), want, "{name}");
    }
    let no_value = taint("dedicated", "", "NoExecute");
    assert!(
        tol("dedicated", Equal, "", "").tolerates(&no_value),
        "empty equals empty"
    );
}

/// TaintToleration filter: NoSchedule and NoExecute taints block, each must be tolerated.
#[test]
fn every_hard_taint_must_be_tolerated() {
    let mut n = node("n1");
    n.taints = vec![
        taint("a", "1", "NoSchedule"),
        taint("b", "", "NoExecute"),
        taint("soft", "", "PreferNoSchedule"),
    ];
    let mut p = pod("p");
    assert_eq!(check(&n, &p), Err(Reason::UntoleratedTaint));
    assert_eq!(untolerated_taint(&n, &p).unwrap().key, "a");
    p.tolerations = vec![tol("a", TolerationOperator::Equal, "1", "NoSchedule")].into();
    assert_eq!(
        untolerated_taint(&n, &p).unwrap().key,
        "b",
        "NoExecute blocks too"
    );
    p.add_toleration(tol("b", TolerationOperator::Exists, "", ""));
    assert_eq!(check(&n, &p), Ok(()), "PreferNoSchedule never blocks");
}
