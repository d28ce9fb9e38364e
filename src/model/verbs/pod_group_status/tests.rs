use super::*;
use crate::model::verbs::views::TaskView;

fn view(state: GangState, quorum: u32, live: u32, with_nodes: u32) -> GangView {
    GangView {
        namespace: "ml".into(),
        name: "job".into(),
        state,
        quorum,
        spec_source: SpecSourceView::PodGroup {
            api_version: "scheduling.volcano.sh/v1beta1",
            name: "ml/job".into(),
        },
        tasks: vec![],
        members_with_nodes: with_nodes,
        members_live: live,
        running: 0,
        succeeded: 0,
        failed: 0,
        created: 0,
        members: vec![],
        waiting_reason: (state != GangState::Placed)
            .then(|| "gang ml/job: 1 of 2 members fit".to_string()),
        marker_warning: None,
        partly_bound: None,
        planned_room: Vec::new(),
        topology: None,
        seconds_until_timeout: None,
        seconds_of_backoff_left: None,
    }
}

fn volcano(v: &GangView) -> (VolcanoPhase, Vec<Condition>, (u32, u32, u32)) {
    match status_for(PodGroupApi::Volcano, v) {
        DesiredStatus::Volcano {
            phase,
            conditions,
            running,
            succeeded,
            failed,
        } => (phase, conditions, (running, succeeded, failed)),
        other => panic!("{other:?}"),
    }
}

fn plugins(v: &GangView) -> (SchedulerPluginsPhase, u32) {
    match status_for(PodGroupApi::SchedulerPlugins, v) {
        DesiredStatus::SchedulerPlugins {
            phase, scheduled, ..
        } => (phase, scheduled),
        other => panic!("{other:?}"),
    }
}

fn kubernetes(v: &GangView) -> Condition {
    match status_for(PodGroupApi::Kubernetes, v) {
        DesiredStatus::Kubernetes { condition } => condition,
        other => panic!("{other:?}"),
    }
}

#[test]
fn volcano_status_phase_pending_with_an_unschedulable_condition_naming_the_numbers() {
    let (phase, conditions, _) = volcano(&view(GangState::Waiting, 2, 2, 0));
    assert_eq!(phase, VolcanoPhase::Pending);
    assert_eq!(
        conditions,
        vec![Condition {
            type_: "Unschedulable",
            status: true,
            reason: "NotEnoughResources",
            message: "gang ml/job: 1 of 2 members fit".into(),
        }]
    );
}

#[test]
fn volcano_status_reason_not_enough_tasks_or_pods_of_task() {
    let (_, c, _) = volcano(&view(GangState::Waiting, 3, 2, 0));
    assert_eq!(c[0].reason, "NotEnoughTasks");
    let mut v = view(GangState::Waiting, 2, 2, 0);
    v.tasks = vec![TaskView {
        task: "ps".into(),
        present: 0,
        placed: 0,
        minimum: 1,
    }];
    let (_, c, _) = volcano(&v);
    assert_eq!(c[0].reason, "NotEnoughPodsOfTask");
}

#[test]
fn volcano_status_phase_inqueue_while_seats_are_held_running_once_placed() {
    let (phase, _, _) = volcano(&view(GangState::Admitted, 2, 2, 0));
    assert_eq!(phase, VolcanoPhase::Inqueue);
    let mut v = view(GangState::Placed, 2, 2, 2);
    v.running = 1;
    let (phase, conditions, counts) = volcano(&v);
    assert_eq!(phase, VolcanoPhase::Running);
    assert_eq!(counts, (1, 0, 0));
    assert_eq!(conditions[0].type_, "Scheduled");
    assert!(conditions[0].status);
    assert_eq!(conditions[0].reason, VOLCANO_READY_REASON);
    assert_eq!(conditions[1].type_, "Unschedulable");
    assert!(!conditions[1].status);
}

#[test]
fn volcano_status_phase_unknown_when_members_run_below_quorum() {
    let mut v = view(GangState::Waiting, 3, 3, 1);
    v.running = 1;
    assert_eq!(volcano(&v).0, VolcanoPhase::Unknown);
}

#[test]
fn volcano_status_a_finished_job_stays_running_not_pending() {
    let mut v = view(GangState::Waiting, 2, 0, 0);
    v.succeeded = 2;
    assert_eq!(volcano(&v).0, VolcanoPhase::Running);
}

#[test]
fn scheduler_plugins_status_phases_follow_its_podgroup_controller() {
    assert_eq!(
        plugins(&view(GangState::Waiting, 3, 2, 0)).0,
        SchedulerPluginsPhase::Pending
    );
    assert_eq!(
        plugins(&view(GangState::Waiting, 2, 2, 0)).0,
        SchedulerPluginsPhase::PreScheduling
    );
    assert_eq!(
        plugins(&view(GangState::Admitted, 2, 2, 0)).0,
        SchedulerPluginsPhase::Scheduling
    );
    assert_eq!(
        plugins(&view(GangState::Placed, 2, 2, 2)),
        (SchedulerPluginsPhase::Scheduled, 2)
    );
    let mut v = view(GangState::Placed, 2, 2, 2);
    v.running = 2;
    assert_eq!(plugins(&v).0, SchedulerPluginsPhase::Running);
    let mut v = view(GangState::Placed, 2, 1, 1);
    v.running = 1;
    v.failed = 1;
    assert_eq!(plugins(&v).0, SchedulerPluginsPhase::Failed);
    let mut v = view(GangState::Waiting, 2, 0, 0);
    v.succeeded = 2;
    assert_eq!(plugins(&v), (SchedulerPluginsPhase::Finished, 2));
}

#[test]
fn kubernetes_status_pod_group_initially_scheduled_false_then_true() {
    let c = kubernetes(&view(GangState::Waiting, 2, 2, 0));
    assert_eq!(c.type_, "PodGroupInitiallyScheduled");
    assert!(!c.status);
    assert_eq!(c.reason, "Unschedulable");
    assert_eq!(c.message, "gang ml/job: 1 of 2 members fit");
    let c = kubernetes(&view(GangState::Placed, 2, 2, 2));
    assert!(c.status);
    assert_eq!(c.reason, "Scheduled");
    assert_eq!(c.message, "gang ml/job: 2 of 2 members have nodes");
}

#[test]
fn waiting_without_a_refusal_says_the_numbers() {
    let mut v = view(GangState::Waiting, 3, 1, 0);
    v.waiting_reason = None;
    assert_eq!(
        kubernetes(&v).message,
        "gang ml/job waiting: 0 of 3 members have nodes, 1 exists"
    );
}

#[test]
fn only_gangs_defined_by_an_existing_pod_group_get_a_status() {
    let v = view(GangState::Waiting, 2, 2, 0);
    let (api, name, _) = desired_status(&v).expect("a PodGroup");
    assert_eq!((api, name.as_str()), (PodGroupApi::Volcano, "job"));
    let mut v = view(GangState::Waiting, 2, 2, 0);
    v.spec_source = SpecSourceView::MissingPodGroup {
        api_version: "scheduling.volcano.sh/v1beta1",
        name: "ml/job".into(),
    };
    assert!(desired_status(&v).is_none());
    v.spec_source = SpecSourceView::Key {
        key: "muster.dev/group",
    };
    assert!(desired_status(&v).is_none());
}
