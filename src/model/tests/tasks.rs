//! Per-task minimums (never-half, for every task). The quorum holds only when the total and every task's minimum
//! are met — in the simulation, the seats, the bind path and the gang's state.

use std::time::Duration;

use super::pod_groups::{pod_group, volcano};
use super::*;
use crate::model::inputs::membership::{GROUP, MIN_AVAILABLE, TASK_MIN_AVAILABLE};

/// Three 300m workers fit on `w` (1000m); the master asks for a GPU.
fn volcano_job(w: &mut World) -> (PodInfo, Vec<PodInfo>) {
    w.table.set_pod_group_api_served(PodGroupApi::Volcano, true);
    w.table.apply_pod_group(pod_group(
        PodGroupApi::Volcano,
        3,
        &[("master", 1), ("worker", 2)],
    ));
    let master = volcano("master", "master").cpu(300).gpu(1).build();
    let workers: Vec<PodInfo> = (0..3)
        .map(|i| volcano(&format!("worker{i}"), "worker").cpu(300).build())
        .collect();
    w.add(&[&master, &workers[0], &workers[1], &workers[2]]);
    (master, workers)
}

#[test]
fn three_workers_without_room_for_their_master_are_not_placed_and_bind_nothing() {
    let mut w = World::new(&[node("w", 1000)]);
    let (_, workers) = volcano_job(&mut w);
    let (ok, reasons) = w.filter(&workers[0]);
    assert!(ok.is_empty());
    assert!(
        reasons[0].starts_with("gang ml/job: task master: 0 of 1 members fit; "),
        "{reasons:?}"
    );
    for p in &workers {
        let d = w.bind(p, "w");
        assert!(rejection(&d).contains("task master: 0 of 1 members fit"));
    }
    assert_eq!(w.reserved("w"), 0, "holds nothing");
    assert_eq!(w.state("job"), "waiting");
    let view = w.table.views(w.now).remove(0);
    let tasks: Vec<(String, u32, u32, u32)> = view
        .tasks
        .iter()
        .map(|t| (t.task.clone(), t.present, t.placed, t.minimum))
        .collect();
    assert_eq!(
        tasks,
        vec![("master".into(), 1, 0, 1), ("worker".into(), 3, 0, 2)]
    );
}

#[test]
fn with_room_for_the_master_the_gang_is_placed_whole() {
    let mut w = World::new(&[node("w", 1000), gpu_node("g", 1)]);
    let (master, workers) = volcano_job(&mut w);
    assert_eq!(
        wait_message(&w.bind(&workers[0], "w")),
        "gang ml/job waiting for quorum: 1/3 members have nodes; \
         task master: 0/1 members have nodes"
    );
    wait_message(&w.bind(&workers[1], "w"));
    let d = w.bind(&master, "g");
    assert_eq!(names(&d), vec!["master@g", "worker0@w", "worker1@w"]);
    w.confirm(&d);
    assert_eq!(w.state("job"), "placed");
    // A worker beyond the minimums binds at once.
    assert_eq!(names(&w.bind(&workers[2], "w")), vec!["worker2@w"]);
}

#[test]
fn three_workers_with_nodes_but_no_master_are_not_a_placed_gang() {
    let mut w = World::new(&[node("w", 1000), gpu_node("g", 1)]);
    let (master, workers) = volcano_job(&mut w);
    // Bound by another scheduler, say: the total quorum is met, the master's minimum is not.
    for p in &workers {
        let mut p = p.clone();
        p.node_name = Some("w".into());
        w.table.apply_pod(p);
    }
    assert_eq!(w.state("job"), "waiting");
    // The master completes it through the gang path.
    let d = w.bind(&master, "g");
    assert!(matches!(d, BindDecision::BindGang { .. }), "{d:?}");
}

#[test]
fn a_missing_member_of_a_short_task_is_simulated_like_its_task_and_keeps_its_seat() {
    // muster's own keys, no PodGroup API: 1 master and 2 workers; the master is not created
    // yet. The room held for it is as large as a master would be (the largest member, as no
    // master exists), and a worker arriving later does not take it.
    let mut w = World::new(&[node("a", 10_000)]);
    let member = |name: &str, task: &str, cpu: i64| {
        pod(name)
            .cpu(cpu)
            .annotation(GROUP, "job")
            .annotation(MIN_AVAILABLE, "3")
            .annotation(TASK_MIN_AVAILABLE, "master=1,worker=2")
            .task(task)
            .build()
    };
    let w0 = member("w0", "worker", 200);
    let w1 = member("w1", "worker", 700);
    w.add(&[&w0, &w1]);
    wait_message(&w.bind(&w0, "a"));
    let held: Vec<(SeatHolder, i64)> = w.table.gangs[&GangKey::new("ml", "job")]
        .seats()
        .iter()
        .filter(|(h, _)| h.is_not_created_yet())
        .map(|(h, s)| (h.clone(), s.requests.cpu_milli))
        .collect();
    assert_eq!(
        held,
        vec![(
            SeatHolder::NotCreatedYet {
                n: 0,
                task: Some("master".into())
            },
            700
        )]
    );
    let w2 = member("w2", "worker", 200);
    w.add(&[&w2]);
    wait_message(&w.bind(&w2, "a"));
    assert!(
        w.table.gangs[&GangKey::new("ml", "job")]
            .seats()
            .keys()
            .any(SeatHolder::is_not_created_yet),
        "the master's room is still held"
    );
    // The creation window ends without a master: its room is released, and the gang says
    // which task is missing.
    w.advance(Duration::from_secs(6));
    w.table.expire(w.now);
    assert_eq!(w.table.gangs[&GangKey::new("ml", "job")].seats().len(), 3);
    assert_eq!(
        w.table.wait_reason(&w1.uid).as_deref(),
        Some(
            "gang ml/job: waiting for members of task master: 0 of 1 exist; room held for the \
             missing 1 released, as no member appeared for 5s"
        )
    );
    // Planned afresh (after its timeout), the gang says which task is missing.
    w.advance(Duration::from_secs(60));
    w.table.expire(w.now);
    w.advance(Duration::from_secs(10));
    let (ok, reasons) = w.filter(&w1);
    assert!(ok.is_empty());
    assert_eq!(
        reasons,
        vec![
            "gang ml/job: waiting for members of task master: 0 of 1 exist; no room is held \
             for the missing 1 once no member has appeared for 5s"
        ]
    );
}

#[test]
fn members_of_a_task_without_a_minimum_count_toward_the_total_only() {
    let mut w = World::new(&[node("a", 1000), node("b", 1000)]);
    w.table.set_pod_group_api_served(PodGroupApi::Volcano, true);
    w.table
        .apply_pod_group(pod_group(PodGroupApi::Volcano, 2, &[("worker", 1)]));
    let ps = volcano("ps", "ps").build();
    let wk = volcano("worker", "worker").build();
    w.add(&[&ps, &wk]);
    wait_message(&w.bind(&ps, "a"));
    assert_eq!(names(&w.bind(&wk, "b")), vec!["ps@a", "worker@b"]);
}

/// What `/gangs` serialises for a gang with a PodGroup and tasks (the JSON the end-to-end
/// tests read).
#[test]
fn the_gang_view_names_the_pod_group_and_counts_each_task() {
    let mut w = World::new(&[node("w", 1000)]);
    volcano_job(&mut w);
    let view = serde_json::to_value(w.table.views(w.now)).unwrap();
    assert_eq!(
        view[0]["spec_source"],
        serde_json::json!({
            "kind": "pod-group",
            "api_version": "scheduling.volcano.sh/v1beta1",
            "name": "ml/job"
        })
    );
    assert_eq!(
        view[0]["tasks"],
        serde_json::json!([
            {"task": "master", "present": 1, "placed": 0, "minimum": 1},
            {"task": "worker", "present": 3, "placed": 0, "minimum": 2}
        ])
    );
    let keys = serde_json::to_value(SpecSourceView::Key {
        key: "muster.dev/min-available",
    })
    .unwrap();
    assert_eq!(
        keys,
        serde_json::json!({"kind": "key", "key": "muster.dev/min-available"})
    );
    assert_eq!(
        serde_json::to_value(SpecSourceView::EveryMember).unwrap(),
        serde_json::json!({"kind": "every-member"})
    );
}

#[test]
fn a_missing_member_of_a_task_with_members_is_as_large_as_they_are_not_as_the_largest_member() {
    let mut w = World::new(&[node("a", 10_000)]);
    let member = |name: &str, task: &str, cpu: i64| {
        pod(name)
            .cpu(cpu)
            .annotation(GROUP, "job")
            .annotation(TASK_MIN_AVAILABLE, "master=2,worker=1")
            .task(task)
            .build()
    };
    let m0 = member("m0", "master", 300);
    let w0 = member("w0", "worker", 900);
    w.add(&[&m0, &w0]);
    wait_message(&w.bind(&w0, "a"));
    let held: Vec<i64> = w.table.gangs[&GangKey::new("ml", "job")]
        .seats()
        .iter()
        .filter(|(h, _)| h.is_not_created_yet())
        .map(|(_, s)| s.requests.cpu_milli)
        .collect();
    assert_eq!(held, vec![300], "the second master, like the first");
}

#[test]
fn bad_per_task_minimums_are_reported_like_other_bad_keys() {
    let mut w = World::new(&[node("a", 1000)]);
    let p = pod("p")
        .annotation(GROUP, "job")
        .annotation(TASK_MIN_AVAILABLE, "master=1,master=2")
        .build();
    w.add(&[&p]);
    let told: Vec<Notice> = w.table.take_notices();
    assert_eq!(told.len(), 1);
    assert_eq!(told[0].kind, NoticeKind::InvalidKeys);
    assert!(told[0].message.contains("task master is listed twice"));
    let (ok, reasons) = w.filter(&p);
    assert!(ok.is_empty());
    assert_eq!(
        reasons,
        vec![
            "pod ml/p: muster.dev/task-min-available must list tasks and their minimums, such \
             as \"master=1,worker=2\": task master is listed twice; got \"master=1,master=2\""
        ]
    );
}
