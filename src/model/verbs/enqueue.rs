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
use crate::model::inputs::podgroup::PodGroupApi;
use crate::model::inputs::resources::Resources;
use crate::model::messages;
use crate::model::table::GangTable;

use super::podgroup_status::{Condition, DesiredStatus, VOLCANO_UNSCHEDULABLE};

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
mod tests {
    use super::*;
    use crate::model::inputs::podgroup::PodGroupDef;
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
}
