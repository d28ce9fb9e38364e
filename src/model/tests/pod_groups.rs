//! PodGroups, the model side: a gang's spec from its PodGroup (Volcano, scheduler-plugins,
//! Kubernetes), a PodGroup that does not exist yet or is deleted, and members whose keys
//! disagree with it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::model::inputs::membership::{
    COSCHEDULING_POD_GROUP, MIN_AVAILABLE, VOLCANO_GROUP_NAME, VOLCANO_TASK_SPEC,
};

pub(super) fn pod_group(api: PodGroupApi, min_member: u32, tasks: &[(&str, u32)]) -> PodGroupDef {
    PodGroupDef {
        api,
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

/// A member of Volcano job `job`, as Volcano's job controller writes it.
pub(super) fn volcano(name: &str, task: &str) -> testkit::PodBuilder {
    pod(name)
        .annotation(VOLCANO_GROUP_NAME, "job")
        .annotation(VOLCANO_TASK_SPEC, task)
}

fn key() -> GangKey {
    GangKey::new("ml", "job")
}

fn served(w: &mut World, api: PodGroupApi) {
    w.table.set_pod_group_api_served(api, true);
}

fn verdicts(w: &mut World, p: &PodInfo) -> Vec<NodeVerdict> {
    let names = w.all_nodes();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    w.table.filter(p, &refs, w.now)
}

#[test]
fn a_gang_whose_pod_group_does_not_exist_yet_waits_holding_nothing_then_is_placed_whole() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    served(&mut w, PodGroupApi::Volcano);
    let m = volcano("master", "master").build();
    let wk = volcano("worker", "worker").build();
    w.add(&[&m, &wk]);
    let missing = "gang ml/job: waiting for its scheduling.volcano.sh/v1beta1 PodGroup ml/job, \
                   which does not exist (yet); nothing is held until it does";
    // Preemption cannot make a PodGroup appear: every node is unresolvable.
    let v = verdicts(&mut w, &m);
    assert!(v
        .iter()
        .all(|v| *v == NodeVerdict::Unresolvable(Arc::from(missing))));
    assert_eq!(
        rejection(&w.bind(&m, "n1")),
        missing,
        "a bind call holds nothing either"
    );
    assert_eq!(w.reserved("n1") + w.reserved("n2"), 0);
    assert_eq!(w.state("job"), "waiting");
    let view = w.table.views(w.now).remove(0);
    assert_eq!(view.waiting_reason.as_deref(), Some(missing));
    assert_eq!(
        view.spec_source,
        SpecSourceView::MissingPodGroup {
            api_version: "scheduling.volcano.sh/v1beta1",
            name: "ml/job".into()
        }
    );
    w.table.take_notices();

    // The controller creates the PodGroup a moment later: the refused members are asked to
    // retry (kube-scheduler would not, for a PodGroup), and the gang proceeds.
    w.table.apply_pod_group(pod_group(
        PodGroupApi::Volcano,
        2,
        &[("master", 1), ("worker", 1)],
    ));
    let retried: Vec<String> = w
        .table
        .take_notices()
        .into_iter()
        .filter(|n| n.kind == NoticeKind::Retry)
        .map(|n| n.pod.name.to_string())
        .collect();
    assert_eq!(retried, vec!["master", "worker"]);
    wait_message(&w.bind(&m, "n1"));
    assert_eq!(names(&w.bind(&wk, "n2")), vec!["master@n1", "worker@n2"]);
}

#[test]
fn a_pod_group_deleted_while_its_gang_waits_releases_every_seat_and_the_gang_waits_for_it() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    served(&mut w, PodGroupApi::Volcano);
    w.table
        .apply_pod_group(pod_group(PodGroupApi::Volcano, 2, &[]));
    let a = volcano("a", "worker").build();
    let b = volcano("b", "worker").build();
    w.add(&[&a, &b]);
    wait_message(&w.bind(&a, "n1"));
    assert_eq!(w.state("job"), "admitted");
    assert!(w.reserved("n1") + w.reserved("n2") >= 200);
    w.table.take_released();

    w.table.remove_pod_group(PodGroupApi::Volcano, &key());
    assert_eq!(w.reserved("n1") + w.reserved("n2"), 0, "holds nothing");
    assert!(!w.table.holds_seat(&a.uid));
    assert_eq!(w.state("job"), "waiting");
    assert_eq!(
        w.table.take_released(),
        vec![key()],
        "the held bind call looks again"
    );
    assert!(w
        .table
        .wait_reason(&a.uid)
        .unwrap()
        .contains("waiting for its scheduling.volcano.sh/v1beta1 PodGroup ml/job"));
    assert!(rejection(&w.bind(&b, "n2")).contains("which does not exist (yet)"));

    w.table
        .apply_pod_group(pod_group(PodGroupApi::Volcano, 2, &[]));
    wait_message(&w.bind(&a, "n1"));
    assert_eq!(names(&w.bind(&b, "n2")), vec!["a@n1", "b@n2"]);
}

/// Documented: muster never unbinds a pod. A placed gang whose PodGroup is deleted keeps its
/// bound members; only its new members wait for the PodGroup.
#[test]
fn a_placed_gang_whose_pod_group_is_deleted_stays_bound_and_new_members_wait() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    served(&mut w, PodGroupApi::Volcano);
    w.table
        .apply_pod_group(pod_group(PodGroupApi::Volcano, 2, &[]));
    let a = volcano("a", "worker").build();
    let b = volcano("b", "worker").build();
    w.add(&[&a, &b]);
    wait_message(&w.bind(&a, "n1"));
    let d = w.bind(&b, "n2");
    w.confirm(&d);
    assert_eq!(w.state("job"), "placed");

    w.table.remove_pod_group(PodGroupApi::Volcano, &key());
    assert!(w.table.has_node(&a.uid) && w.table.has_node(&b.uid));
    let c = volcano("c", "worker").build();
    w.add(&[&c]);
    let (ok, reasons) = w.filter(&c);
    assert!(ok.is_empty());
    assert!(reasons[0].contains("does not exist (yet)"), "{reasons:?}");
}

#[test]
fn an_api_the_cluster_does_not_serve_leaves_the_gang_to_its_keys() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let a = volcano("a", "worker")
        .annotation(MIN_AVAILABLE, "2")
        .build();
    let b = volcano("b", "worker")
        .annotation(MIN_AVAILABLE, "2")
        .build();
    w.add(&[&a, &b]);
    wait_message(&w.bind(&a, "n1"));
    assert_eq!(names(&w.bind(&b, "n2")), vec!["a@n1", "b@n2"]);
    let view = w.table.views(w.now).remove(0);
    assert_eq!(
        view.spec_source,
        SpecSourceView::Key {
            key: "muster.dev/min-available"
        }
    );
}

#[test]
fn the_pod_group_overrules_the_members_keys_and_says_so_once() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    served(&mut w, PodGroupApi::Volcano);
    w.table
        .apply_pod_group(pod_group(PodGroupApi::Volcano, 2, &[]));
    let members: Vec<PodInfo> = (0..3)
        .map(|i| {
            volcano(&format!("p{i}"), "worker")
                .annotation(MIN_AVAILABLE, "3")
                .build()
        })
        .collect();
    w.add(&[&members[0], &members[1]]);
    let conflicts: Vec<Notice> = w
        .table
        .take_notices()
        .into_iter()
        .filter(|n| n.kind == NoticeKind::PodGroupConflict)
        .collect();
    assert!(NoticeKind::PodGroupConflict.is_warning());
    assert_eq!(
        conflicts.last().unwrap().message,
        "members of gang ml/job disagree with their scheduling.volcano.sh/v1beta1 PodGroup \
         ml/job: muster.dev/min-available=3 (minMember 2); the PodGroup wins"
    );
    // The same disagreement again is not told again; no quorum conflict is told either.
    w.add(&[&members[2]]);
    assert!(w.table.take_notices().is_empty());
    // Two members make the quorum, as the PodGroup says.
    wait_message(&w.bind(&members[0], "n1"));
    assert_eq!(names(&w.bind(&members[1], "n2")).len(), 2);
}

#[test]
fn a_scheduler_plugins_pod_group_gives_the_quorum_and_the_timeout() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    served(&mut w, PodGroupApi::SchedulerPlugins);
    w.table.apply_pod_group(PodGroupDef {
        timeout: Some(Duration::from_secs(7)),
        ..pod_group(PodGroupApi::SchedulerPlugins, 3, &[])
    });
    let ms: Vec<PodInfo> = (0..3)
        .map(|i| {
            pod(&format!("m{i}"))
                .label(COSCHEDULING_POD_GROUP, "job")
                .build()
        })
        .collect();
    w.add(&[&ms[0], &ms[1], &ms[2]]);
    assert_eq!(
        wait_message(&w.bind(&ms[0], "n1")),
        "gang ml/job waiting for quorum: 1/3 members have nodes"
    );
    w.advance(Duration::from_secs(6));
    assert!(w.table.expire(w.now).is_empty());
    w.advance(Duration::from_secs(1));
    assert_eq!(w.table.expire(w.now), vec![key()], "scheduleTimeoutSeconds");
}

#[test]
fn a_kubernetes_pod_group_named_in_the_pod_spec_decides_the_quorum() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    served(&mut w, PodGroupApi::Kubernetes);
    w.table
        .apply_pod_group(pod_group(PodGroupApi::Kubernetes, 2, &[]));
    let a = pod("a").scheduling_group("job").build();
    let b = pod("b").scheduling_group("job").build();
    w.add(&[&a, &b]);
    wait_message(&w.bind(&a, "n1"));
    assert_eq!(names(&w.bind(&b, "n2")), vec!["a@n1", "b@n2"]);
    let view = w.table.views(w.now).remove(0);
    assert_eq!(
        view.spec_source,
        SpecSourceView::PodGroup {
            api_version: "scheduling.k8s.io/v1beta1",
            name: "ml/job".into()
        }
    );
}

#[test]
fn an_api_served_later_makes_its_pod_group_decide_and_a_takeover_keeps_both() {
    let mut w = World::new(&[node("n1", 1000)]);
    let a = volcano("a", "worker")
        .annotation(MIN_AVAILABLE, "1")
        .build();
    w.add(&[&a]);
    assert_eq!(w.table.views(w.now)[0].quorum, 1, "not served: the key");
    // The API is served (its watch lists the PodGroup, then says the API is served).
    w.table
        .apply_pod_group(pod_group(PodGroupApi::Volcano, 3, &[]));
    served(&mut w, PodGroupApi::Volcano);
    assert_eq!(w.table.views(w.now)[0].quorum, 3, "served: the PodGroup");

    let fresh = w.table.rebuilt();
    assert_eq!(fresh.pod_groups().len(), 1);
    assert!(fresh.pod_groups().is_served(PodGroupApi::Volcano));
    assert_eq!(fresh.views(w.now)[0].quorum, 3);
}

/// The PodGroup API flaps (a 404 from an API server that just restarted, twice, stops its
/// watch): the gang keeps its PodGroup's minMember, and two members whose keys say 2 are not
/// bound as a gang of three would be half (never-half). Only the PodGroup's deletion, seen,
/// hands the gang back to its keys.
#[test]
fn a_gang_keeps_its_pod_groups_quorum_while_the_api_flaps() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    served(&mut w, PodGroupApi::Volcano);
    w.table
        .apply_pod_group(pod_group(PodGroupApi::Volcano, 3, &[]));
    let ms: Vec<PodInfo> = (0..2)
        .map(|i| {
            volcano(&format!("p{i}"), "worker")
                .annotation(MIN_AVAILABLE, "2")
                .build()
        })
        .collect();
    w.add(&[&ms[0], &ms[1]]);
    // What the discovery loop does when the API is missing two rounds in a row.
    w.table
        .set_pod_group_api_served(PodGroupApi::Volcano, false);
    let view = w.table.views(w.now).remove(0);
    assert_eq!(view.quorum, 3);
    assert_eq!(
        view.spec_source,
        SpecSourceView::PodGroup {
            api_version: "scheduling.volcano.sh/v1beta1",
            name: "ml/job".into()
        }
    );
    wait_message(&w.bind(&ms[0], "n1"));
    let d = w.bind(&ms[1], "n2");
    assert!(
        matches!(d, BindDecision::Wait { .. } | BindDecision::Reject(_)),
        "two of three are not bound: {d:?}"
    );
    assert!(!w.table.has_node(&ms[0].uid) && !w.table.has_node(&ms[1].uid));
    // The PodGroup's deletion seen: the keys decide.
    w.table.remove_pod_group(PodGroupApi::Volcano, &key());
    assert_eq!(w.table.views(w.now).remove(0).quorum, 2);
}
