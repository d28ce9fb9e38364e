use super::*;
use crate::model::planning::selection::{largest_first, sort_smallest_first};

#[test]
fn only_room_alone_leaves_a_gang_among_the_gangs_ahead() {
    let room = GangShortfall::Room {
        fit: 1,
        quorum: 2,
        missing: 0,
        rule: None,
        task: None,
    };
    assert!(!room.blocked_by_rule());
    let rule = GangShortfall::Room {
        fit: 2,
        quorum: 3,
        missing: 1,
        rule: Some("3 members need distinct nodes by pod anti-affinity; 2 nodes match".into()),
        task: None,
    };
    assert!(rule.blocked_by_rule());
    assert_eq!(rule.missing(), 1);
    let missing = GangShortfall::MembersMissing {
        existing: 1,
        quorum: 4,
    };
    assert!(missing.blocked_by_rule());
    assert_eq!(missing.missing(), 3);
    assert!(GangShortfall::QuorumUndecided { existing: 2 }.blocked_by_rule());
    let pod_group = GangShortfall::PodGroupMissing {
        api: PodGroupApi::Volcano,
    };
    assert!(pod_group.blocked_by_rule());
    assert_eq!(pod_group.missing(), 0);
    let task = GangShortfall::TaskMembersMissing {
        task: Arc::from("master"),
        existing: 0,
        min: 1,
    };
    assert!(task.blocked_by_rule());
    assert_eq!(task.missing(), 1);
}

#[test]
fn smallest_first_then_largest_first_orders_by_requests_then_name() {
    use crate::model::table::pods::PodIndex;
    use crate::testkit::pod;
    let mut index = PodIndex::default();
    for (name, cpu) in [("b", 300), ("a", 300), ("c", 100)] {
        index.apply(pod(name).cpu(cpu).build());
    }
    let mut v: Vec<&PodEntry> = ["uid-a", "uid-b", "uid-c"]
        .iter()
        .map(|u| index.get(u).unwrap())
        .collect();
    sort_smallest_first(&mut v);
    let names =
        |v: &[&PodEntry]| -> Vec<String> { v.iter().map(|p| p.info.name.to_string()).collect() };
    assert_eq!(names(&v), ["c", "a", "b"]);
    assert_eq!(names(&largest_first(&v)), ["a", "b", "c"]);
}
