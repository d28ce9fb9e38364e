use std::collections::BTreeMap;

use super::*;
use crate::model::inputs::membership::{GANG_TIMEOUT, TASK_MIN_AVAILABLE, VOLCANO_GROUP_NAME};
use crate::model::table::GangTable;
use crate::model::ModelConfig;
use crate::testkit::pod;

#[test]
fn the_largest_declared_quorum_wins_and_the_conflict_is_named() {
    let members = [
        pod("a").gang("g", 2).build(),
        pod("b").gang("g", 3).build(),
        pod("c").gang("g", 3).build(),
    ];
    assert_eq!(GangSpec::of_members(&members).quorum, 3);
    assert!(GangSpec::of_members(&members).declared);
    assert_eq!(
        GangSpec::of_members(&members).source,
        SpecSource::Key(MIN_AVAILABLE)
    );
    assert_eq!(conflicting_quorums(&members), Some(vec![2, 3]));
    assert_eq!(conflicting_quorums(&members[1..]), None);
}

#[test]
fn without_a_quorum_key_every_existing_member_is_needed() {
    let members = [
        pod("a").annotation("muster.dev/group", "g").build(),
        pod("b").annotation("muster.dev/group", "g").build(),
    ];
    assert_eq!(GangSpec::of_members(&members).quorum, 2);
    assert!(!GangSpec::of_members(&members).declared);
    assert_eq!(
        GangSpec::of_members(&members).source,
        SpecSource::EveryMember
    );
    assert_eq!(GangSpec::of_members(&members[..1]).quorum, 1);
    assert_eq!(
        GangSpec::of_members(std::iter::empty()),
        GangSpec::default()
    );
    assert_eq!(GangSpec::default().quorum, 0);
}

#[test]
fn priority_age_and_timeout_come_from_the_most_demanding_member() {
    let members = [
        pod("a").gang("g", 2).priority(5).created(20).build(),
        pod("b")
            .gang("g", 2)
            .priority(100)
            .created(30)
            .annotation(GANG_TIMEOUT, "20s")
            .build(),
        pod("c")
            .gang("g", 2)
            .created(10)
            .annotation(GANG_TIMEOUT, "5s")
            .build(),
    ];
    let spec = GangSpec::of_members(&members);
    assert_eq!(spec.priority, 100);
    assert_eq!(spec.created, 10);
    assert_eq!(spec.timeout, Some(Duration::from_secs(20)));
    assert_eq!(
        spec.timeout_or(Duration::from_secs(60)),
        Duration::from_secs(20)
    );
    assert_eq!(
        GangSpec::of_members(&members[..1]).timeout_or(Duration::from_secs(60)),
        Duration::from_secs(60)
    );
}

#[test]
fn per_task_minimums_from_keys_merge_per_task_and_raise_the_quorum_to_their_sum() {
    let members = [
        pod("m")
            .gang("g", 2)
            .annotation(TASK_MIN_AVAILABLE, "master=1,worker=1")
            .build(),
        pod("w")
            .gang("g", 2)
            .annotation(TASK_MIN_AVAILABLE, "worker=2")
            .build(),
    ];
    let spec = GangSpec::of_members(&members);
    assert_eq!(spec.tasks.to_string(), "master=1,worker=2");
    assert_eq!(spec.quorum, 3, "1 master + 2 workers need 3 members");
    assert_eq!(spec.source, SpecSource::Key(TASK_MIN_AVAILABLE));
    // Only per-task minimums, no quorum key: their sum is the declared quorum.
    let only_tasks = [pod("w")
        .annotation("muster.dev/group", "g")
        .annotation(TASK_MIN_AVAILABLE, "worker=2")
        .build()];
    let spec = GangSpec::of_members(&only_tasks);
    assert_eq!((spec.quorum, spec.declared), (2, true));
}

fn volcano_member(name: &str) -> PodInfo {
    pod(name).annotation(VOLCANO_GROUP_NAME, "job").build()
}

fn def(min_member: u32, tasks: &[(&str, u32)]) -> PodGroupDef {
    PodGroupDef {
        api: PodGroupApi::Volcano,
        key: GangKey::new("ml", "job"),
        min_member,
        min_task_member: tasks
            .iter()
            .map(|(t, n)| (t.to_string(), *n))
            .collect::<BTreeMap<_, _>>(),
        timeout: None,
        topology: None,
        min_resources: None,
    }
}

/// A PodGroup index filled through the table's own entry points, as the watches fill it.
fn index(served: bool, defs: &[PodGroupDef]) -> GangTable {
    let mut t = GangTable::new(ModelConfig::default());
    t.set_pod_group_api_served(PodGroupApi::Volcano, served);
    for d in defs {
        t.apply_pod_group(d.clone());
    }
    t
}

#[test]
fn a_served_pod_group_decides_over_the_members_keys() {
    let members = [
        volcano_member("a"),
        pod("b")
            .annotation(VOLCANO_GROUP_NAME, "job")
            .annotation(MIN_AVAILABLE, "5")
            .build(),
    ];
    let refs: Vec<&PodInfo> = members.iter().collect();
    let key = GangKey::new("ml", "job");
    let t = index(true, &[def(2, &[("master", 1), ("worker", 1)])]);
    let spec = GangSpec::decide(&refs, &key, t.pod_groups());
    assert_eq!(spec.quorum, 2);
    assert!(spec.declared && spec.is_decided());
    assert_eq!(spec.tasks.to_string(), "master=1,worker=1");
    assert_eq!(
        spec.source,
        SpecSource::PodGroup {
            api: PodGroupApi::Volcano,
            name: Arc::from("job")
        }
    );
    assert_eq!(
        pod_group_disagreements(&refs, &def(2, &[("master", 1), ("worker", 1)])),
        vec!["muster.dev/min-available=5 (minMember 2)".to_string()]
    );
}

#[test]
fn a_named_pod_group_that_does_not_exist_decides_nothing() {
    let members = [volcano_member("a")];
    let refs: Vec<&PodInfo> = members.iter().collect();
    let key = GangKey::new("ml", "job");
    let spec = GangSpec::decide(&refs, &key, index(true, &[]).pod_groups());
    assert!(!spec.is_decided());
    assert_eq!(
        spec.awaited_pod_group(),
        Some((PodGroupApi::Volcano, &Arc::from("job")))
    );
}

#[test]
fn an_api_the_cluster_does_not_serve_leaves_the_keys_to_decide() {
    let members = [pod("a")
        .annotation(VOLCANO_GROUP_NAME, "job")
        .annotation(MIN_AVAILABLE, "3")
        .build()];
    let refs: Vec<&PodInfo> = members.iter().collect();
    let key = GangKey::new("ml", "job");
    let spec = GangSpec::decide(&refs, &key, index(false, &[]).pod_groups());
    assert_eq!(spec.quorum, 3);
    assert_eq!(spec.source, SpecSource::Key(MIN_AVAILABLE));
}

#[test]
fn per_task_minimums_count_only_when_min_member_covers_their_sum_as_in_volcano() {
    let members = [volcano_member("a")];
    let refs: Vec<&PodInfo> = members.iter().collect();
    let key = GangKey::new("ml", "job");
    let covered = index(true, &[def(3, &[("master", 1), ("worker", 2)])]);
    let spec = GangSpec::decide(&refs, &key, covered.pod_groups());
    assert_eq!(spec.tasks.to_string(), "master=1,worker=2");
    // An elastic Volcano job: minAvailable 2 of 1 master + 3 workers, no task minimum set, so
    // the controller wrote the replica counts; Volcano then asks for minMember only.
    let elastic = index(true, &[def(2, &[("master", 1), ("worker", 3)])]);
    let spec = GangSpec::decide(&refs, &key, elastic.pod_groups());
    assert_eq!(spec.quorum, 2);
    assert!(spec.tasks.is_empty());
}

#[test]
fn seats_are_planned_again_only_when_a_pod_group_changes_what_the_gang_needs() {
    let members = [volcano_member("a")];
    let refs: Vec<&PodInfo> = members.iter().collect();
    let key = GangKey::new("ml", "job");
    let two = GangSpec::decide(&refs, &key, index(true, &[def(2, &[])]).pod_groups());
    let three = GangSpec::decide(&refs, &key, index(true, &[def(3, &[])]).pod_groups());
    let missing = GangSpec::decide(&refs, &key, index(true, &[]).pod_groups());
    assert!(!two.replan_needed(&two.clone()));
    assert!(two.replan_needed(&three));
    assert!(two.replan_needed(&missing));
    let keys_a = GangSpec::of_members(&[pod("a").gang("g", 2).build()]);
    let keys_b = GangSpec::of_members(&[pod("a").gang("g", 3).build()]);
    assert!(
        !keys_a.replan_needed(&keys_b),
        "keys alone keep today's behaviour"
    );
}

#[test]
fn every_distinct_disagreement_with_the_pod_group_is_named_once() {
    let disagreeing = || {
        pod("a")
            .annotation(VOLCANO_GROUP_NAME, "job")
            .annotation(MIN_AVAILABLE, "3")
            .annotation(TASK_MIN_AVAILABLE, "worker=3")
            .annotation(GANG_TIMEOUT, "90s")
            .build()
    };
    let agreeing = pod("c")
        .annotation(VOLCANO_GROUP_NAME, "job")
        .annotation(MIN_AVAILABLE, "2")
        .annotation(TASK_MIN_AVAILABLE, "worker=2")
        .build();
    let members = [disagreeing(), disagreeing(), agreeing];
    let refs: Vec<&PodInfo> = members.iter().collect();
    let def = PodGroupDef {
        timeout: Some(Duration::from_secs(60)),
        ..def(2, &[("worker", 2)])
    };
    assert_eq!(
        pod_group_disagreements(&refs, &def),
        vec![
            "muster.dev/gang-timeout=1m 30s (scheduleTimeoutSeconds 60)".to_string(),
            "muster.dev/min-available=3 (minMember 2)".to_string(),
            "muster.dev/task-min-available=worker=3 (minTaskMember worker=2)".to_string(),
        ]
    );
    assert!(pod_group_disagreements(&refs[2..], &def).is_empty());
    let spec = GangSpec::decide(
        &refs,
        &GangKey::new("ml", "job"),
        index(true, &[def]).pod_groups(),
    );
    assert_eq!(
        spec.timeout,
        Some(Duration::from_secs(60)),
        "the PodGroup's timeout wins"
    );
}

/// The API flapped (discovery found it missing, its watch stopped): the PodGroup last seen
/// still decides, so the gang never falls back to its pods' keys.
#[test]
fn a_pod_group_last_seen_decides_while_its_api_is_not_served() {
    let members = [pod("a")
        .annotation(VOLCANO_GROUP_NAME, "job")
        .annotation(MIN_AVAILABLE, "1")
        .build()];
    let refs: Vec<&PodInfo> = members.iter().collect();
    let key = GangKey::new("ml", "job");
    let mut t = index(true, &[def(3, &[])]);
    t.set_pod_group_api_served(PodGroupApi::Volcano, false);
    let spec = GangSpec::decide(&refs, &key, t.pod_groups());
    assert_eq!(spec.quorum, 3);
    assert_eq!(
        spec.source,
        SpecSource::PodGroup {
            api: PodGroupApi::Volcano,
            name: Arc::from("job")
        }
    );
}
