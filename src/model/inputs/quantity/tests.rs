use super::*;

#[test]
fn parses_the_forms_kubernetes_writes() {
    let cases: &[(&str, i64, i64)] = &[
        // input, milli, units
        ("100m", 100, 1),
        ("1", 1000, 1),
        ("1.5", 1500, 2),
        ("0.1", 100, 1),
        ("2k", 2_000_000, 2000),
        ("1Ki", 1_024_000, 1024),
        ("1Gi", 1_073_741_824_000, 1_073_741_824),
        ("16Gi", 17_179_869_184_000, 17_179_869_184),
        ("1e3", 1_000_000, 1000),
        ("1E3", 1_000_000, 1000),
        ("0", 0, 0),
        ("1500u", 2, 1),
        ("250n", 1, 1),
        ("+4", 4000, 4),
        ("-0", 0, 0),
    ];
    for (input, milli, units) in cases {
        assert_eq!(parse_milli(input), Ok(*milli), "milli of {input}");
        assert_eq!(parse_units(input), Ok(*units), "units of {input}");
    }
}

#[test]
fn rejects_garbage_with_a_reason() {
    for bad in [
        "", "abc", "1.2.3", "1Xi", "-1", "1e", "1e99", "m", ".", "1 Gi",
    ] {
        let e = parse_units(bad).expect_err(bad);
        assert_eq!(e.input, bad);
        assert!(!e.reason.is_empty());
    }
}

#[test]
fn rejects_values_beyond_i64() {
    assert!(parse_milli("9223372036854775807").is_err());
    assert!(parse_units("100Ei").is_err());
}
