//! Enqueueing Volcano PodGroups that have no members yet (explained, holds-nothing).
//!
//! Volcano's job controller creates a Job's pods only once its PodGroup's `status.phase` has
//! left `Pending` (`syncJob` in `pkg/controllers/job/job_controller_actions.go` sets `syncTask`
//! only for a phase that is neither empty nor `Pending`). Volcano's scheduler moves it to
//! `Inqueue`: its `enqueue` action when the PodGroup has no `spec.minResources` or they pass
//! `JobEnqueueable` (the overcommit plugin: a sum over the cluster, not per node), and its
//! `allocate` action at once when no `enqueue` action is configured. Without Volcano's
//! scheduler nobody does, so muster's leader does it in its PodGroup status rounds.
//!
//! `Inqueue` holds nothing: the pods, once they exist, pass muster's whole-gang per-node check
//! like any gang (no-overcommit, never-half). A PodGroup whose `minResources` do not fit stays
//! `Pending` with an `Unschedulable` condition, reason `NotEnoughResources` (the reason
//! Volcano's API defines; its design notes' `NotInqueueable` is in no released type), and is
//! checked again every round. Pure: from the table to the statuses to write.

use crate::model::inputs::membership::GangKey;
use crate::model::inputs::pod_group::PodGroupApi;
use crate::model::inputs::resources::Resources;
use crate::model::messages;
use crate::model::table::GangTable;

use super::pod_group_status::{Condition, DesiredStatus, VOLCANO_UNSCHEDULABLE};

/// Whether Volcano's scheduler counts resource `name` of a PodGroup's `minResources`
/// (`NewResource` in its `pkg/scheduler/api/resource_info.go`). Volcano's job controller fills
/// `minResources` from the quota usage of the quorum's pods, which also lists `requests.cpu`,
/// `limits.memory`, `count/pods` and the like: the scheduler skips count quotas and every name
/// that is neither cpu, memory, pods, ephemeral-storage nor a scalar resource (extended,
/// `kubernetes.io/`-prefixed, `hugepages-*`, `attachable-volumes-*`), and so does muster.
pub fn volcano_counts_min_resource(name: &str) -> bool {
    match name {
        "cpu" | "memory" | "pods" | "ephemeral-storage" => true,
        _ if name.starts_with("count/") || name.starts_with("requests.") => false,
        _ => {
            name.contains('/')
                || name.starts_with("hugepages-")
                || name.starts_with("attachable-volumes-")
        }
    }
}

/// The reason of the condition on a PodGroup that is not enqueued (Volcano's
/// `NotEnoughResourcesReason`).
pub const NOT_ENOUGH_RESOURCES: &str = "NotEnoughResources";

impl GangTable {
    /// The Volcano PodGroups without members muster would enqueue, and those it would leave
    /// `Pending` with their reason, in key order. Each one enqueued counts against the free
    /// sum of the ones after it (as Volcano's overcommit plugin adds each enqueued job's
    /// `minResources` to what is in queue), so one round never enqueues more than fits.
    pub fn volcano_enqueue(&self) -> Vec<(GangKey, DesiredStatus)> {
        let mut free = self.free_allocatable();
        let mut keys: Vec<&GangKey> = self
            .pod_groups
            .keys(PodGroupApi::Volcano)
            .filter(|k| !self.gangs.contains_key(*k))
            .collect();
        keys.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            let Some(def) = self.pod_groups.get(PodGroupApi::Volcano, key) else {
                continue;
            };
            let condition = match &def.min_resources {
                None => None,
                Some(min) => match free.shortfall(min) {
                    None => {
                        free.sub(min);
                        None
                    }
                    Some(short) => Some(Condition {
                        type_: VOLCANO_UNSCHEDULABLE,
                        status: true,
                        reason: NOT_ENOUGH_RESOURCES,
                        message: messages::podgroup_not_enqueued(key, &short),
                    }),
                },
            };
            out.push((key.clone(), DesiredStatus::VolcanoEnqueue { condition }));
        }
        out
    }

    /// Allocatable minus what bound pods use and seats reserve, summed over the nodes that
    /// take new pods (a cordoned node takes none).
    fn free_allocatable(&self) -> Resources {
        let mut free = Resources::default();
        for (_, e) in self.ledger.iter() {
            if e.info().unschedulable {
                continue;
            }
            free.add(&e.info().allocatable);
            free.sub(e.used());
            free.sub(e.reserved());
        }
        free
    }
}

#[cfg(test)]
mod tests;
