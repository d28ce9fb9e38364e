use super::*;
use crate::model::rules::node_affinity::NODE_NAME_FIELD;

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A term from `(key, op, values)` expressions and fields.
fn term(exprs: &[(&str, &str, &[&str])], fields: &[(&str, &str, &[&str])]) -> NodeSelectorTerm {
    let exprs: Vec<(String, String, Vec<String>)> = exprs
        .iter()
        .map(|(k, o, v)| (k.to_string(), o.to_string(), strings(v)))
        .collect();
    let fields: Vec<(String, String, Vec<String>)> = fields
        .iter()
        .map(|(k, o, v)| (k.to_string(), o.to_string(), strings(v)))
        .collect();
    NodeSelectorTerm::parse(
        exprs
            .iter()
            .map(|(k, o, v)| (k.as_str(), o.as_str(), v.as_slice())),
        fields
            .iter()
            .map(|(k, o, v)| (k.as_str(), o.as_str(), v.as_slice())),
    )
}

#[test]
fn unparsable_terms_say_why() {
    assert_eq!(
        term(&[("gpus", "Gt", &["four"])], &[]),
        NodeSelectorTerm::Invalid("key \"gpus\": Gt needs an integer value, got \"four\"".into())
    );
    assert_eq!(
        term(&[], &[(NODE_NAME_FIELD, "In", &["a", "b"])]),
        NodeSelectorTerm::Invalid(
            "field \"metadata.name\": In needs exactly one value, got 2".into()
        )
    );
}
