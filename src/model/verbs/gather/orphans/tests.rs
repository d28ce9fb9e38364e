//! Pods behind muster's gate outside every gang, and gang keys of schedulers that do not call
//! muster.

use std::sync::Arc;
use std::time::Instant;

use crate::model::gather::{GatherPlan, Gatherer};
use crate::model::membership::{COSCHEDULING_POD_GROUP, GROUP};
use crate::model::notice::{Notice, NoticeKind};
use crate::model::objects::PodInfo;
use crate::model::table::GangTable;
use crate::model::{GangKey, ModelConfig};
use crate::testkit::{self, gathered, pod};

fn for_scheduler(mut p: PodInfo, name: &str) -> PodInfo {
    p.scheduler_name = Some(Arc::from(name));
    p
}

struct World {
    table: GangTable,
    gatherer: Gatherer,
}

impl World {
    fn new() -> Self {
        let mut table = GangTable::new(ModelConfig::default());
        for n in ["a", "b"] {
            table.apply_node(testkit::node(n).cpu(2000).build());
        }
        World {
            table,
            gatherer: Gatherer::new(true),
        }
    }

    fn round(&mut self) -> GatherPlan {
        self.gatherer.gather(&mut self.table, Instant::now())
    }

    fn told(&mut self, kind: NoticeKind) -> Vec<Notice> {
        self.table
            .take_notices()
            .into_iter()
            .filter(|n| n.kind == kind)
            .collect()
    }

    fn freed(plan: &GatherPlan) -> Vec<String> {
        plan.outside_gangs
            .iter()
            .map(|u| u.pod.name.to_string())
            .collect()
    }
}

/// A gang-keyed pod for Volcano's scheduler is a plain pod to muster: in no gang, so the muster
/// gang of the same name neither counts it nor waits for it; told once, naming its scheduler
/// and the ones that call muster.
#[test]
fn a_gang_keyed_pod_of_another_scheduler_is_no_member_and_is_told_once() {
    let mut w = World::new();
    let foreign = for_scheduler(pod("v0").gang("job", 2).build(), "volcano");
    w.table.apply_pod(foreign.clone());
    let told = w.told(NoticeKind::OtherScheduler);
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(
        told[0].message,
        "muster ignores this pod's gang keys (muster.dev/group=job): its schedulerName volcano \
         does not call muster (the schedulers that do: default-scheduler), so it is scheduled \
         by volcano alone and is not a member of any muster gang"
    );
    assert_eq!(NoticeKind::OtherScheduler.reason(), "GangKeysIgnored");
    assert!(NoticeKind::OtherScheduler.is_warning());
    // Seen again (any update): not told again.
    w.table.apply_pod(foreign.clone());
    assert!(w.told(NoticeKind::OtherScheduler).is_empty());

    // The muster gang of the same name: one member of two, the Volcano pod not among them.
    let m0 = gathered(pod("m0").gang("job", 2).build());
    w.table.apply_pod(m0);
    let key = GangKey::new("ml", "job");
    let members: Vec<String> = w
        .table
        .members_of(&w.table.gangs[&key])
        .map(|p| p.info.name.to_string())
        .collect();
    assert_eq!(members, ["m0"]);
    let plan = w.round();
    assert!(plan.releases.is_empty(), "gang of 1/2 released: {plan:?}");
    assert!(plan.outside_gangs.is_empty(), "{plan:?}");
}

/// The schedulers that call muster are its config's: with `muster-scheduler` only (the
/// second-scheduler install), a default-scheduler gang pod is the one ignored.
#[test]
fn only_the_configured_schedulers_pods_are_members() {
    let mut table = GangTable::new(ModelConfig {
        scheduler_names: vec![Arc::from("muster-scheduler")],
        ..ModelConfig::default()
    });
    table.apply_pod(for_scheduler(
        pod("in").gang("a", 1).build(),
        "muster-scheduler",
    ));
    table.apply_pod(pod("out").gang("b", 1).build());
    assert!(table.gangs.contains_key(&GangKey::new("ml", "a")));
    assert!(!table.gangs.contains_key(&GangKey::new("ml", "b")));
    let told: Vec<String> = table
        .take_notices()
        .into_iter()
        .filter(|n| n.kind == NoticeKind::OtherScheduler)
        .map(|n| n.pod.name.to_string())
        .collect();
    assert_eq!(told, ["out"]);
}

/// Finding: a gated member whose gang label is removed left the gate on forever. Now it is
/// released as a plain pod (gate removed, no nomination), told once; the release is not sent
/// again while the watch has not shown the gate gone.
#[test]
fn a_gated_pod_whose_gang_label_is_removed_is_released_and_told_once() {
    let mut w = World::new();
    let member = gathered(pod("p").label(GROUP, "job").build());
    w.table.apply_pod(member.clone());
    let key = GangKey::new("ml", "job");
    assert!(w.table.gangs.contains_key(&key));
    w.table.take_notices();

    // `kubectl label pod p muster.dev/group-`
    let mut unlabelled = member.clone();
    unlabelled.membership = Ok(None);
    w.table.apply_pod(unlabelled.clone());
    let plan = w.round();
    assert_eq!(World::freed(&plan), ["p"]);
    assert!(
        plan.releases.is_empty() && plan.renominate.is_empty(),
        "{plan:?}"
    );
    let told = w.told(NoticeKind::GateReleased);
    assert_eq!(told.len(), 1);
    assert_eq!(
        told[0].message,
        "this pod is behind muster's gate muster.dev/gather but has no gang keys (any more): \
         muster removes the gate, and kube-scheduler schedules it as a plain pod"
    );
    assert_eq!(NoticeKind::GateReleased.reason(), "GangGateReleased");

    // The removal was written; the watch has not shown it yet: nothing again.
    w.gatherer.ungated(&unlabelled.uid, Instant::now());
    let plan = w.round();
    assert!(plan.outside_gangs.is_empty(), "{plan:?}");
    // The watch shows the gate gone: the pod is a plain pod, nothing left to do.
    let mut ungated = unlabelled;
    ungated.rules = None;
    w.table.apply_pod(ungated);
    assert!(w.table.gated_outside_gangs.is_empty());
    assert!(w.told(NoticeKind::GateReleased).is_empty());
}

/// A pod whose keys name two groups keeps its gate (released alone it could bind part of a
/// gang: never-half), and its Warning names both keys and says it stays gated; fixed, it
/// joins its gang.
#[test]
fn a_gated_pod_with_conflicting_groups_stays_gated_and_is_told_both_keys() {
    let mut w = World::new();
    let p = gathered(
        pod("p")
            .annotation(GROUP, "alpha")
            .label(COSCHEDULING_POD_GROUP, "beta")
            .build(),
    );
    assert!(p.membership.is_err());
    w.table.apply_pod(p.clone());
    let plan = w.round();
    assert!(plan.is_empty(), "{plan:?}");
    let told = w.told(NoticeKind::InvalidKeys);
    assert_eq!(told.len(), 1);
    assert_eq!(
        told[0].message,
        "conflicting gang keys: muster.dev/group=\"alpha\" but \
         scheduling.x-k8s.io/pod-group=\"beta\"; give the pod one group name; the pod stays \
         behind muster's gate muster.dev/gather until its keys are fixed (edit them, or delete \
         the pod), since released alone it could run without its gang"
    );
    // Seen again unchanged: not told again, still gated.
    w.table.apply_pod(p);
    assert!(w.round().is_empty());
    assert!(w.told(NoticeKind::InvalidKeys).is_empty());

    // The label fixed: a member of gang alpha (one of one), gathered as any.
    let fixed = gathered(pod("p").gang("alpha", 1).build());
    w.table.apply_pod(fixed);
    assert!(w.table.gangs.contains_key(&GangKey::new("ml", "alpha")));
    let plan = w.round();
    assert_eq!(plan.releases.len(), 1, "{plan:?}");
    assert!(plan.outside_gangs.is_empty());
}

/// A gated pod of a scheduler that does not call muster (marked by an older policy) is let go
/// too: muster will never gather it.
#[test]
fn a_gated_pod_of_another_scheduler_is_released() {
    let mut w = World::new();
    w.table.apply_pod(for_scheduler(
        gathered(pod("v").gang("job", 1).build()),
        "volcano",
    ));
    let plan = w.round();
    assert_eq!(World::freed(&plan), ["v"]);
    let told = w.told(NoticeKind::GateReleased);
    assert_eq!(
        told[0].message,
        "this pod is behind muster's gate muster.dev/gather, but its schedulerName volcano does \
         not call muster: muster removes the gate and leaves the pod to volcano"
    );
}
