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

use crate::model::inputs::pod_group::PodGroupApi;
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
mod tests;
