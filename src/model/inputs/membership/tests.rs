use super::*;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

type Case<'a> = (
    &'a [(&'a str, &'a str)],
    &'a [(&'a str, &'a str)],
    &'a str,
    Option<u32>,
);

#[test]
fn every_supported_key_forms_a_gang() {
    let cases: &[Case] = &[
        (&[], &[(GROUP, "job"), (MIN_AVAILABLE, "2")], GROUP, Some(2)),
        (&[(GROUP, "job")], &[(MIN_AVAILABLE, "3")], GROUP, Some(3)),
        (
            &[(COSCHEDULING_POD_GROUP, "job")],
            &[],
            COSCHEDULING_POD_GROUP,
            None,
        ),
        (
            &[],
            &[(VOLCANO_GROUP_NAME, "job")],
            VOLCANO_GROUP_NAME,
            None,
        ),
        (
            &[],
            &[(VOLCANO_GROUP_NAME_NEW, "job")],
            VOLCANO_GROUP_NAME_NEW,
            None,
        ),
        (
            &[(KUEUE_POD_GROUP_NAME, "job")],
            &[(KUEUE_POD_GROUP_TOTAL_COUNT, "4")],
            KUEUE_POD_GROUP_NAME,
            Some(4),
        ),
    ];
    for (labels, annotations, source, min) in cases {
        let m = membership_of("ml", &map(labels), &map(annotations), None)
            .unwrap()
            .unwrap_or_else(|| panic!("no gang for {labels:?} {annotations:?}"));
        assert_eq!(m.gang, GangKey::new("ml", "job"));
        assert_eq!(m.source, *source);
        assert_eq!(m.min_available, *min);
    }
}

#[test]
fn no_keys_means_no_gang() {
    assert_eq!(
        membership_of("ml", &map(&[("app", "x")]), &map(&[]), None).unwrap(),
        None
    );
}

#[test]
fn same_name_under_two_keys_is_fine_different_names_are_an_error() {
    let agree = membership_of(
        "ml",
        &map(&[(COSCHEDULING_POD_GROUP, "job")]),
        &map(&[(GROUP, "job")]),
        None,
    );
    assert!(agree.unwrap().is_some());
    let err = membership_of(
        "ml",
        &map(&[]),
        &map(&[(GROUP, "a"), (VOLCANO_GROUP_NAME, "b")]),
        None,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "conflicting gang keys: muster.dev/group=\"a\" but scheduling.k8s.io/group-name=\"b\"; give the pod one group name"
    );
}

#[test]
fn bad_values_are_named() {
    let bad = |annotations: &[(&str, &str)]| {
        membership_of("ml", &map(&[]), &map(annotations), None)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        bad(&[(GROUP, "j"), (MIN_AVAILABLE, "two")]),
        "muster.dev/min-available must be a positive integer, got \"two\""
    );
    assert!(bad(&[(GROUP, "j"), (MIN_AVAILABLE, "0")]).contains("positive integer"));
    assert!(bad(&[(GROUP, "j"), (GANG_TIMEOUT, "soon")]).contains("gang-timeout"));
    assert!(bad(&[(GROUP, "")]).contains("non-empty"));
}

#[test]
fn timeout_override_is_parsed() {
    let m = membership_of(
        "ml",
        &map(&[]),
        &map(&[(GROUP, "j"), (GANG_TIMEOUT, "90s")]),
        None,
    )
    .unwrap()
    .unwrap();
    assert_eq!(m.timeout, Some(Duration::from_secs(90)));
}

#[test]
fn disruption_mode_defaults_to_the_whole_gang_and_rejects_unknown_values() {
    let mode = |annotations: &[(&str, &str)]| {
        membership_of("ml", &map(&[]), &map(annotations), None).map(|m| m.unwrap().disruption)
    };
    assert_eq!(mode(&[(GROUP, "j")]), Ok(DisruptionMode::Gang));
    assert_eq!(
        mode(&[(GROUP, "j"), (DISRUPTION, "gang")]),
        Ok(DisruptionMode::Gang)
    );
    assert_eq!(
        mode(&[(GROUP, "j"), (DISRUPTION, "pod")]),
        Ok(DisruptionMode::Pod)
    );
    assert_eq!(
        mode(&[(GROUP, "j"), (DISRUPTION, "some")])
            .unwrap_err()
            .to_string(),
        "muster.dev/disruption must be \"gang\" or \"pod\", got \"some\""
    );
}

fn read(
    labels: &[(&str, &str)],
    annotations: &[(&str, &str)],
    scheduling_group: Option<&str>,
) -> Result<Option<Membership>, MembershipError> {
    membership_of("ml", &map(labels), &map(annotations), scheduling_group)
}

#[test]
fn each_key_names_the_api_of_its_pod_group() {
    let api = |labels: &[(&str, &str)], annotations: &[(&str, &str)], sg: Option<&str>| {
        read(labels, annotations, sg).unwrap().unwrap().pod_group
    };
    use PodGroupApi::*;
    assert_eq!(api(&[], &[(VOLCANO_GROUP_NAME, "j")], None), Some(Volcano));
    assert_eq!(
        api(&[], &[(VOLCANO_GROUP_NAME_NEW, "j")], None),
        Some(Volcano)
    );
    assert_eq!(
        api(&[(COSCHEDULING_POD_GROUP, "j")], &[], None),
        Some(SchedulerPlugins)
    );
    assert_eq!(api(&[], &[], Some("j")), Some(Kubernetes));
    assert_eq!(api(&[], &[(GROUP, "j")], None), None);
    assert_eq!(api(&[(KUEUE_POD_GROUP_NAME, "j")], &[], None), None);
    // muster's key beside Volcano's, same name: the pod still names Volcano's PodGroup.
    assert_eq!(
        api(&[], &[(GROUP, "j"), (VOLCANO_GROUP_NAME, "j")], None),
        Some(Volcano)
    );
    let m = read(&[], &[], Some("j")).unwrap().unwrap();
    assert_eq!(
        (m.source, m.gang),
        (SCHEDULING_GROUP, GangKey::new("ml", "j"))
    );
}

#[test]
fn a_scheduling_group_naming_another_group_is_an_error_naming_both_keys() {
    let err = read(&[], &[(VOLCANO_GROUP_NAME, "a")], Some("b")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "conflicting gang keys: scheduling.k8s.io/group-name=\"a\" but \
         spec.schedulingGroup.podGroupName=\"b\"; give the pod one group name"
    );
    assert!(read(&[], &[], Some("")).is_err());
}

#[test]
fn the_task_comes_from_muster_first_then_volcano() {
    let task = |labels: &[(&str, &str)], annotations: &[(&str, &str)]| {
        read(labels, annotations, None)
            .unwrap()
            .unwrap()
            .task
            .map(|t| t.to_string())
    };
    let g = (GROUP, "j");
    assert_eq!(task(&[], &[g, (TASK, "worker")]), Some("worker".into()));
    assert_eq!(task(&[(TASK, "worker")], &[g]), Some("worker".into()));
    assert_eq!(
        task(&[], &[g, (VOLCANO_TASK_SPEC, "ps")]),
        Some("ps".into())
    );
    assert_eq!(task(&[(VOLCANO_TASK_SPEC, "ps")], &[g]), Some("ps".into()));
    assert_eq!(
        task(&[], &[g, (TASK, "master"), (VOLCANO_TASK_SPEC, "ps")]),
        Some("master".into())
    );
    assert_eq!(task(&[], &[g, (VOLCANO_TASK_SPEC, "")]), None);
    assert_eq!(task(&[], &[g]), None);
    assert!(read(&[], &[g, (TASK, "a b")], None)
        .unwrap_err()
        .to_string()
        .starts_with("muster.dev/task must be a task name"));
}

#[test]
fn task_minimums_are_read_and_bad_ones_refused() {
    let m = read(
        &[],
        &[(GROUP, "j"), (TASK_MIN_AVAILABLE, "master=1,worker=2")],
        None,
    )
    .unwrap()
    .unwrap();
    assert_eq!(m.task_minimums.to_string(), "master=1,worker=2");
    let err = read(&[], &[(GROUP, "j"), (TASK_MIN_AVAILABLE, "worker=0")], None).unwrap_err();
    assert!(matches!(err, MembershipError::BadTaskMinimums { .. }));
    assert_eq!(
        m.min_available_key, None,
        "no quorum key, only per-task minimums"
    );
    let k = read(
        &[(KUEUE_POD_GROUP_NAME, "j")],
        &[(KUEUE_POD_GROUP_TOTAL_COUNT, "4")],
        None,
    )
    .unwrap()
    .unwrap();
    assert_eq!(k.min_available_key, Some(KUEUE_POD_GROUP_TOTAL_COUNT));
}

#[test]
fn the_generation_comes_from_muster_first_then_jobset_then_volcano() {
    let generation = |labels: &[(&str, &str)], annotations: &[(&str, &str)]| {
        read(labels, annotations, None)
            .unwrap()
            .map(|m| (m.generation, m.generation_key))
    };
    let g = (GROUP, "j");
    assert_eq!(generation(&[], &[g]), Some((0, None)));
    assert_eq!(
        generation(&[], &[g, (GENERATION, "3")]),
        Some((3, Some(GENERATION)))
    );
    assert_eq!(
        generation(&[(GENERATION, "2")], &[g]),
        Some((2, Some(GENERATION)))
    );
    assert_eq!(
        generation(&[(JOBSET_RESTART_ATTEMPT, "1")], &[g]),
        Some((1, Some(JOBSET_RESTART_ATTEMPT)))
    );
    assert_eq!(
        generation(&[], &[g, (VOLCANO_JOB_VERSION, "4")]),
        Some((4, Some(VOLCANO_JOB_VERSION)))
    );
    assert_eq!(
        generation(&[(JOBSET_RESTART_ATTEMPT, "1")], &[g, (GENERATION, "7")]),
        Some((7, Some(GENERATION))),
        "muster's own key wins"
    );
    // A pod in no gang carries a restart counter of its own job for nothing: no error.
    assert_eq!(generation(&[(JOBSET_RESTART_ATTEMPT, "x")], &[]), None);
    let err = read(&[(JOBSET_RESTART_ATTEMPT, "-1")], &[g], None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "jobset.sigs.k8s.io/restart-attempt must be a non-negative integer, got \"-1\""
    );
}
