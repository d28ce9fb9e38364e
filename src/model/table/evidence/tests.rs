use super::*;

#[test]
fn a_verdict_holding_musters_own_refusal_is_not_evidence() {
    let t0 = Instant::now();
    let age = Duration::from_secs(30);
    let mut v = SchedulerVerdicts::default();
    let uid = PodUid::from("u1");
    let ours = "gang ml/g: 1 of 2 members placed";
    v.refused(&uid, vec![std::sync::Arc::from(ours)], t0);
    let by_muster = format!("0/3 nodes are available: 3 {ours}. preemption: not helpful.");
    assert!(v.is_musters_own("u1", &by_muster));
    let outside = "0/3 nodes are available: persistentvolumeclaim \"data\" not found.";
    assert!(!v.is_musters_own("u1", outside));
    assert!(!v.is_musters_own("u2", &by_muster), "another pod");
    v.expire(t0 + age - Duration::from_millis(1), age);
    assert!(v.is_musters_own("u1", &by_muster));
    v.expire(t0 + age, age);
    assert!(
        !v.is_musters_own("u1", &by_muster),
        "too old to be a cycle's of now"
    );
    assert!(v.refusals.is_empty());
}

#[test]
fn a_verdict_stands_until_the_pod_or_the_cluster_changes() {
    let mut v = SchedulerVerdicts::default();
    let (a, b) = (PodUid::from("a"), PodUid::from("b"));
    v.stand(&a, "no volume".into());
    v.stand(&b, "no volume".into());
    assert_eq!(v.standing("a").map(|m| &**m), Some("no volume"));
    v.pod_changed("a");
    assert!(v.standing("a").is_none());
    assert!(v.standing("b").is_some());
    v.situation_changed();
    assert!(v.standing("b").is_none());
    v.stand(&a, "x".into());
    v.forget("a");
    assert!(v.standing("a").is_none());
}

#[test]
fn refusal_texts_are_bounded_per_pod() {
    let t0 = Instant::now();
    let mut v = SchedulerVerdicts::default();
    let uid = PodUid::from("u");
    for i in 0..MAX_TEXTS + 3 {
        v.refused(&uid, vec![format!("text {i}").into()], t0);
    }
    assert_eq!(v.refusals["u"].len(), MAX_TEXTS);
    assert!(!v.is_musters_own("u", "text 0"), "the oldest went first");
    assert!(v.is_musters_own("u", &format!("text {}", MAX_TEXTS + 2)));
}

fn set(names: &[&str]) -> HashSet<NodeName> {
    names.iter().map(|n| NodeName::from(*n)).collect()
}

#[test]
fn evidence_is_kept_with_its_age_and_expires() {
    let t0 = Instant::now();
    let ttl = Duration::from_secs(30);
    let mut s = EvidenceStore::default();
    let uid = PodUid::from("u1");
    s.record(&uid, set(&["a"]), t0);
    assert!(s.passed("u1", t0 + Duration::from_secs(29), ttl).is_some());
    assert!(s.passed("u1", t0 + ttl, ttl).is_none(), "too old to trust");
    assert!(s.passed("u2", t0, ttl).is_none());
    s.expire(t0 + ttl, ttl);
    assert_eq!(s.len(), 0);
    s.record(&uid, set(&["a"]), t0);
    s.forget("u1");
    assert_eq!(s.len(), 0);
}

#[test]
fn memory_is_bounded_by_dropping_the_oldest() {
    let t0 = Instant::now();
    let mut s = EvidenceStore::default();
    for i in 0..MAX_MEMBERS + 10 {
        let uid = PodUid::from(format!("u{i}"));
        s.record(&uid, set(&["a"]), t0 + Duration::from_millis(i as u64));
    }
    assert_eq!(s.len(), MAX_MEMBERS);
    let ttl = Duration::from_secs(3600);
    assert!(s.passed("u0", t0, ttl).is_none(), "the oldest went first");
    assert!(s
        .passed(&format!("u{}", MAX_MEMBERS + 9), t0, ttl)
        .is_some());
}

#[test]
fn a_list_is_evidence_when_complete_and_short_of_every_node() {
    assert!(EvidenceStore::is_informative(99, 99, 5000));
    assert!(
        !EvidenceStore::is_informative(100, 100, 5000),
        "the search may have stopped early"
    );
    assert!(!EvidenceStore::is_informative(4, 4, 4), "every node passed");
    assert!(EvidenceStore::is_informative(2, 2, 4));
    // A node muster does not know yet was listed too.
    assert!(
        !EvidenceStore::is_informative(3, 2, 2),
        "every known node passed"
    );
    assert!(
        EvidenceStore::is_informative(2, 1, 2),
        "a known node was left out"
    );
}
