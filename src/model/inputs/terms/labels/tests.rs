use super::*;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (*k, *v)).collect()
}

#[test]
fn labels_are_sorted_and_a_later_duplicate_wins() {
    let l = labels(&[("b", "1"), ("a", "2"), ("b", "3")]);
    assert_eq!(l.iter().collect::<Vec<_>>(), vec![("a", "2"), ("b", "3")]);
    assert_eq!(l.get("b"), Some("3"));
    assert_eq!(l.get("c"), None);
    assert!(Labels::default().is_empty());
}

#[test]
fn malformed_requirements_are_refused_with_the_key_named() {
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let err = |k, op, vals: &[&str]| Requirement::from_node_expression(k, op, &v(vals));
    assert_eq!(
        err("gpus", "Gt", &["many"]).unwrap_err(),
        "key \"gpus\": Gt needs an integer value, got \"many\""
    );
    assert_eq!(
        err("gpus", "Lt", &["1", "2"]).unwrap_err(),
        "key \"gpus\": Lt needs exactly one value, got 2"
    );
    assert!(err("pool", "In", &[]).is_err());
    assert!(err("pool", "Exists", &["a"]).is_err());
    assert!(err("pool", "Near", &["a"]).is_err());
    assert!(
        Requirement::from_label_expression("n", "Gt", &v(&["1"])).is_err(),
        "Gt is a node selector operator only"
    );
}
