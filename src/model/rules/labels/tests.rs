use super::*;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (*k, *v)).collect()
}

fn req(key: &str, op: &str, values: &[&str]) -> Requirement {
    let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
    Requirement::from_node_expression(key, op, &values).unwrap()
}

/// apimachinery `labels.Requirement.Matches`, every operator.
#[test]
fn requirements_match_as_apimachinery_does() {
    let l = labels(&[("pool", "a"), ("gpus", "8"), ("rack", "r-1")]);
    let cases = [
        (req("pool", "In", &["a", "b"]), true),
        (req("pool", "In", &["b"]), false),
        (req("zone", "In", &["a"]), false),
        (req("pool", "NotIn", &["b"]), true),
        (req("pool", "NotIn", &["a"]), false),
        (req("zone", "NotIn", &["a"]), true),
        (req("pool", "Exists", &[]), true),
        (req("zone", "Exists", &[]), false),
        (req("zone", "DoesNotExist", &[]), true),
        (req("pool", "DoesNotExist", &[]), false),
        (req("gpus", "Gt", &["4"]), true),
        (req("gpus", "Gt", &["8"]), false),
        (req("gpus", "Lt", &["9"]), true),
        (req("gpus", "Lt", &["-1"]), false),
        (req("rack", "Gt", &["0"]), false),
        (req("zone", "Lt", &["100"]), false),
    ];
    for (r, want) in cases {
        assert_eq!(r.matches(&l), want, "{r:?}");
    }
}

/// `metav1.LabelSelectorAsSelector`: absent selects nothing, `{}` selects everything.
#[test]
fn absent_selector_matches_nothing_and_empty_matches_everything() {
    let l = labels(&[("app", "train")]);
    assert!(!LabelSelector::Nothing.matches(&l));
    assert!(!LabelSelector::Nothing.is_empty());
    let everything = LabelSelector::from_parts([], []).unwrap();
    assert!(everything.matches(&l) && everything.matches(&Labels::default()));
    assert!(everything.is_empty());
    let exists: [String; 0] = [];
    let sel =
        LabelSelector::from_parts([("app", "train")], [("role", "DoesNotExist", &exists[..])])
            .unwrap();
    assert!(sel.matches(&l));
    assert!(!sel.matches(&labels(&[("app", "train"), ("role", "ps")])));
    assert!(!sel.is_empty());
}

#[test]
fn namespaces_carry_their_name_label_unless_told_more() {
    let mut ns = NamespaceLabels::default();
    assert_eq!(ns.of("ml").label(NAMESPACE_NAME_LABEL), Some("ml"));
    assert_eq!(ns.of("ml").label("team"), None);
    ns.insert(
        "ml",
        BTreeMap::from([("team".to_string(), "a".to_string())]),
    );
    assert_eq!(ns.of("ml").label("team"), Some("a"));
    assert_eq!(ns.of("ml").label(NAMESPACE_NAME_LABEL), Some("ml"));
}
