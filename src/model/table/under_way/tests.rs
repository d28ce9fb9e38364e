use super::*;

fn kept(node: &str, victims: &[&str]) -> KeptNode {
    KeptNode {
        node: node.to_string(),
        victims: victims.iter().map(|v| v.to_string()).collect(),
    }
}

#[test]
fn every_kept_candidate_is_recorded_with_its_victims() {
    let t0 = Instant::now();
    let mut u = PreemptionsUnderWay::default();
    let p: PodUid = PodUid::from("p");
    u.record(&p, vec![kept("n1", &["a"]), kept("n2", &["b", "c"])], t0);
    let found = u.recent("p", t0).expect("recorded");
    assert_eq!(
        found.kept,
        vec![kept("n1", &["a"]), kept("n2", &["b", "c"])]
    );
    assert!(u.recent("p", t0 + UNDER_WAY_FOR).is_none(), "too old");
    u.forget("p");
    assert!(u.recent("p", t0).is_none());
}
