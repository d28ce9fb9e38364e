use super::*;
use crate::model::inputs::pod_group::PodGroupDef;
use crate::model::membership::VOLCANO_GROUP_NAME;
use crate::model::{ModelConfig, NodeInfo};
use crate::testkit;

fn node(name: &str, cpu: i64) -> NodeInfo {
    testkit::node(name).cpu(cpu).build()
}

fn def(name: &str, min: Option<i64>) -> PodGroupDef {
    PodGroupDef {
        api: PodGroupApi::Volcano,
        key: GangKey::new("ml", name),
        min_member: 2,
        min_task_member: Default::default(),
        timeout: None,
        topology: None,
        min_resources: min.map(Resources::cpu),
    }
}

fn table(nodes: &[NodeInfo], defs: Vec<PodGroupDef>) -> GangTable {
    let mut t = GangTable::new(ModelConfig::default());
    for n in nodes {
        t.apply_node(n.clone());
    }
    t.set_pod_group_api_served(PodGroupApi::Volcano, true);
    for d in defs {
        t.apply_pod_group(d);
    }
    t
}

fn enqueued(t: &GangTable) -> Vec<(String, Option<Condition>)> {
    t.volcano_enqueue()
        .into_iter()
        .map(|(k, s)| match s {
            DesiredStatus::VolcanoEnqueue { condition } => (k.name.to_string(), condition),
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn volcano_without_min_resources_is_inqueue_at_once_as_without_the_enqueue_action() {
    let t = table(&[], vec![def("a", None)]);
    assert_eq!(enqueued(&t), vec![("a".to_string(), None)]);
}

#[test]
fn volcano_enqueue_checks_min_resources_against_the_free_sum_of_all_nodes() {
    // 1500m asked, no node has it, two together do: Volcano's overcommit check is a sum.
    let t = table(
        &[node("n1", 1000), node("n2", 1000)],
        vec![def("a", Some(1500))],
    );
    assert_eq!(enqueued(&t), vec![("a".to_string(), None)]);
}

#[test]
fn volcano_min_resources_beyond_the_free_sum_stay_pending_not_enough_resources() {
    let t = table(&[node("n1", 1000)], vec![def("a", Some(3000))]);
    let got = enqueued(&t);
    let c = got[0].1.clone().expect("a condition");
    assert_eq!(
        (c.type_, c.status, c.reason),
        ("Unschedulable", true, "NotEnoughResources")
    );
    assert_eq!(
        c.message,
        "gang ml/a: spec.minResources do not fit the cluster's free allocatable in sum \
         (insufficient cpu: requested 3000m, free 1000m); the PodGroup stays Pending, holds \
         nothing, and is checked again"
    );
}

#[test]
fn volcano_enqueue_counts_each_enqueued_group_against_the_next_and_skips_cordoned_nodes() {
    let cordoned = testkit::node("n2").cpu(4000).unschedulable().build();
    let t = table(
        &[node("n1", 1000), cordoned],
        vec![def("a", Some(800)), def("b", Some(800))],
    );
    let got = enqueued(&t);
    assert_eq!(got[0], ("a".to_string(), None));
    assert!(
        got[1]
            .1
            .as_ref()
            .is_some_and(|c| c.message.contains("free 200m")),
        "{got:?}"
    );
}

#[test]
fn volcano_groups_with_members_are_left_to_the_gang_status() {
    let mut t = table(&[node("n1", 1000)], vec![def("a", None)]);
    t.apply_pod(
        testkit::pod("a-0")
            .namespace("ml")
            .annotation(VOLCANO_GROUP_NAME, "a")
            .build(),
    );
    assert!(enqueued(&t).is_empty());
}

#[test]
fn volcano_min_resources_count_what_its_new_resource_counts() {
    for counted in [
        "cpu",
        "memory",
        "pods",
        "ephemeral-storage",
        "nvidia.com/gpu",
        "hugepages-2Mi",
    ] {
        assert!(volcano_counts_min_resource(counted), "{counted}");
    }
    // The quota usage Volcano's job controller also writes there.
    for skipped in [
        "requests.cpu",
        "limits.memory",
        "count/pods",
        "requests.nvidia.com/gpu",
    ] {
        assert!(!volcano_counts_min_resource(skipped), "{skipped}");
    }
}
