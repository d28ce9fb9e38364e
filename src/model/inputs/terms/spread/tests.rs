use super::*;

#[test]
fn inclusion_policies_parse_with_their_defaults() {
    assert_eq!(
        InclusionPolicy::parse(None, InclusionPolicy::Honor),
        Ok(InclusionPolicy::Honor)
    );
    assert_eq!(
        InclusionPolicy::parse(Some("Ignore"), InclusionPolicy::Honor),
        Ok(InclusionPolicy::Ignore)
    );
    assert!(InclusionPolicy::parse(Some("Sometimes"), InclusionPolicy::Honor).is_err());
}
