//! The status muster writes back to a gang's PodGroup, in each API's own fields and meanings
//! (explained: `kubectl get podgroup` is where users of these APIs look).
//!
//! Read from each project's types:
//! - Volcano `scheduling.volcano.sh/v1beta1` `PodGroupStatus`: `phase` (`Pending`, `Inqueue`,
//!   `Running`, `Unknown`), `running`, `succeeded`, `failed`, and `conditions` of type
//!   `Unschedulable` (reasons `NotEnoughResources`, `NotEnoughTasks`, `NotEnoughPodsOfTask`) and
//!   `Scheduled` (reason `tasks in gang are ready to be scheduled`, as Volcano's gang plugin
//!   writes it). Phases as Volcano's scheduler derives them (`jobStatus`): `Running` once the
//!   members with nodes and the succeeded ones reach `minMember`; `Unknown` while some run but
//!   the gang is below its quorum; `Inqueue` while muster holds seats for the whole quorum.
//! - scheduler-plugins `scheduling.x-k8s.io/v1alpha1` `PodGroupStatus`: `phase` (`Pending`,
//!   `PreScheduling`, `Scheduling`, `Scheduled`, `Running`, `Finished`, `Failed`), `scheduled`,
//!   `running`, `succeeded`, `failed`, `scheduleStartTime` (the writer sets it once, when the
//!   phase first leaves `Pending`). Phases as its PodGroup controller derives them. The API has
//!   no conditions: muster's reason reaches those users through Events and `kubectl muster`.
//! - Kubernetes `scheduling.k8s.io/v1beta1` `PodGroupStatus`: `conditions`, of which muster
//!   writes `PodGroupInitiallyScheduled` — `False`/`Unschedulable` with muster's reason while the
//!   gang waits, `True`/`Scheduled` once placed, and never back to `False` afterwards (the
//!   condition is terminal once `True`, as kube-scheduler's `updatePodGroupCondition` keeps it).
//!
//! Pure: from a gang's [`GangView`] to the desired status; `cluster::status` compares it with
//! what the object holds and writes only a difference.

use crate::model::inputs::podgroup::PodGroupApi;
use crate::model::messages;

use super::views::{GangState, GangView, SpecSourceView};

/// One condition, as the three APIs share its shape (`type`, `status`, `reason`, `message`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    pub type_: &'static str,
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

/// Volcano's `PodGroupPhase`, the values muster writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VolcanoPhase {
    Pending,
    Inqueue,
    Running,
    Unknown,
}

/// scheduler-plugins' `PodGroupPhase`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedulerPluginsPhase {
    Pending,
    PreScheduling,
    Scheduling,
    Scheduled,
    Running,
    Finished,
    Failed,
}

impl VolcanoPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            VolcanoPhase::Pending => "Pending",
            VolcanoPhase::Inqueue => "Inqueue",
            VolcanoPhase::Running => "Running",
            VolcanoPhase::Unknown => "Unknown",
        }
    }
}

impl SchedulerPluginsPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            SchedulerPluginsPhase::Pending => "Pending",
            SchedulerPluginsPhase::PreScheduling => "PreScheduling",
            SchedulerPluginsPhase::Scheduling => "Scheduling",
            SchedulerPluginsPhase::Scheduled => "Scheduled",
            SchedulerPluginsPhase::Running => "Running",
            SchedulerPluginsPhase::Finished => "Finished",
            SchedulerPluginsPhase::Failed => "Failed",
        }
    }
}

/// The status muster wants a PodGroup to show, per API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DesiredStatus {
    Volcano {
        phase: VolcanoPhase,
        running: u32,
        succeeded: u32,
        failed: u32,
        /// `Unschedulable` (True while waiting, False once placed) and, once placed, `Scheduled`.
        conditions: Vec<Condition>,
    },
    SchedulerPlugins {
        phase: SchedulerPluginsPhase,
        scheduled: u32,
        running: u32,
        succeeded: u32,
        failed: u32,
    },
    Kubernetes {
        /// `PodGroupInitiallyScheduled`.
        condition: Condition,
    },
    /// A Volcano PodGroup without members (`verbs::enqueue`): `Inqueue` (no condition), or
    /// `Pending` with its `Unschedulable` condition. Written only over `Pending` or no phase.
    VolcanoEnqueue { condition: Option<Condition> },
}

impl DesiredStatus {
    /// The phase as `kubectl get podgroup` shows it (Kubernetes' PodGroup has none: the
    /// condition's reason).
    pub fn phase(&self) -> &'static str {
        match self {
            DesiredStatus::Volcano { phase, .. } => phase.as_str(),
            DesiredStatus::SchedulerPlugins { phase, .. } => phase.as_str(),
            DesiredStatus::Kubernetes { condition } => condition.reason,
            DesiredStatus::VolcanoEnqueue { condition: None } => VolcanoPhase::Inqueue.as_str(),
            DesiredStatus::VolcanoEnqueue { .. } => VolcanoPhase::Pending.as_str(),
        }
    }
}

pub const VOLCANO_UNSCHEDULABLE: &str = "Unschedulable";
pub const VOLCANO_SCHEDULED: &str = "Scheduled";
/// The reason Volcano's gang plugin gives its `Scheduled` condition, word for word.
pub const VOLCANO_READY_REASON: &str = "tasks in gang are ready to be scheduled";
pub const KUBERNETES_INITIALLY_SCHEDULED: &str = "PodGroupInitiallyScheduled";

/// The gang's PodGroup (API and name) and the status it should show; `None` for a gang whose
/// spec does not come from a PodGroup that exists.
pub fn desired_status(view: &GangView) -> Option<(PodGroupApi, String, DesiredStatus)> {
    let SpecSourceView::PodGroup { api_version, name } = &view.spec_source else {
        return None;
    };
    let api = PodGroupApi::ALL
        .into_iter()
        .find(|a| a.api_version() == *api_version)?;
    let name = name.rsplit('/').next().unwrap_or(name).to_string();
    Some((api, name, status_for(api, view)))
}

/// Members that count as scheduled: live ones with nodes, and those that finished (they ran).
fn scheduled(view: &GangView) -> u32 {
    view.members_with_nodes + view.succeeded + view.failed
}

/// Placed, or its members with nodes and succeeded ones reach the quorum (a finished job stays
/// "scheduled": it is not waiting).
fn is_scheduled(view: &GangView) -> bool {
    view.state == GangState::Placed || view.members_with_nodes + view.succeeded >= view.quorum
}

/// Why the gang waits, as the condition's message: its last refusal, or the numbers.
fn waiting_message(view: &GangView) -> String {
    view.waiting_reason.clone().unwrap_or_else(|| {
        messages::podgroup_waiting(
            &view.namespace,
            &view.name,
            view.members_with_nodes,
            view.members_live,
            view.quorum,
        )
    })
}

pub fn status_for(api: PodGroupApi, view: &GangView) -> DesiredStatus {
    let placed = is_scheduled(view);
    match api {
        PodGroupApi::Volcano => {
            let phase = if placed {
                VolcanoPhase::Running
            } else if view.running > 0 {
                VolcanoPhase::Unknown
            } else if view.state == GangState::Admitted {
                VolcanoPhase::Inqueue
            } else {
                VolcanoPhase::Pending
            };
            let conditions = if placed {
                vec![
                    Condition {
                        type_: VOLCANO_SCHEDULED,
                        status: true,
                        reason: VOLCANO_READY_REASON,
                        message: String::new(),
                    },
                    Condition {
                        type_: VOLCANO_UNSCHEDULABLE,
                        status: false,
                        reason: "Scheduled",
                        message: messages::podgroup_placed(
                            &view.namespace,
                            &view.name,
                            scheduled(view),
                            view.quorum,
                        ),
                    },
                ]
            } else {
                let reason = if view.members_live < view.quorum {
                    "NotEnoughTasks"
                } else if view.tasks.iter().any(|t| t.present < t.minimum) {
                    "NotEnoughPodsOfTask"
                } else {
                    "NotEnoughResources"
                };
                vec![Condition {
                    type_: VOLCANO_UNSCHEDULABLE,
                    status: true,
                    reason,
                    message: waiting_message(view),
                }]
            };
            DesiredStatus::Volcano {
                phase,
                running: view.running,
                succeeded: view.succeeded,
                failed: view.failed,
                conditions,
            }
        }
        PodGroupApi::SchedulerPlugins => {
            let (s, r, f) = (view.succeeded, view.running, view.failed);
            let present = view.members_live + s + f;
            let phase = if present < view.quorum {
                SchedulerPluginsPhase::Pending
            } else if s >= view.quorum {
                SchedulerPluginsPhase::Finished
            } else if f != 0 && f + r + s >= view.quorum {
                SchedulerPluginsPhase::Failed
            } else if r + s >= view.quorum {
                SchedulerPluginsPhase::Running
            } else if placed {
                SchedulerPluginsPhase::Scheduled
            } else if view.members_with_nodes > 0 || view.state == GangState::Admitted {
                SchedulerPluginsPhase::Scheduling
            } else {
                SchedulerPluginsPhase::PreScheduling
            };
            DesiredStatus::SchedulerPlugins {
                phase,
                scheduled: scheduled(view),
                running: r,
                succeeded: s,
                failed: f,
            }
        }
        PodGroupApi::Kubernetes => DesiredStatus::Kubernetes {
            condition: if placed {
                Condition {
                    type_: KUBERNETES_INITIALLY_SCHEDULED,
                    status: true,
                    reason: "Scheduled",
                    message: messages::podgroup_placed(
                        &view.namespace,
                        &view.name,
                        scheduled(view),
                        view.quorum,
                    ),
                }
            } else {
                Condition {
                    type_: KUBERNETES_INITIALLY_SCHEDULED,
                    status: false,
                    reason: "Unschedulable",
                    message: waiting_message(view),
                }
            },
        },
    }
}

#[cfg(test)]
mod tests {
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
}
