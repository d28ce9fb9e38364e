//! PodGroup objects: the gang definitions users' job controllers already write.
//!
//! Three APIs define gangs as objects apart from their pods: Volcano's
//! `scheduling.volcano.sh/v1beta1` PodGroup (pods name it with `scheduling.k8s.io/group-name`),
//! scheduler-plugins' `scheduling.x-k8s.io/v1alpha1` PodGroup (label
//! `scheduling.x-k8s.io/pod-group`) and Kubernetes' own `scheduling.k8s.io/v1beta1` PodGroup
//! (`spec.schedulingGroup.podGroupName`). The watch (`cluster`) reads each object into a
//! [`PodGroupDef`], the part muster uses; this index keeps them, keyed like gangs, so that a
//! gang's spec can be taken from its PodGroup when one exists.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::membership::GangKey;
use crate::model::messages;
use crate::model::notice::{Notice, NoticeKind, PodRef};
use crate::model::table::GangTable;

/// Which API a PodGroup object comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PodGroupApi {
    /// `scheduling.volcano.sh/v1beta1`, kind `PodGroup`.
    Volcano,
    /// `scheduling.x-k8s.io/v1alpha1`, kind `PodGroup` (scheduler-plugins coscheduling).
    SchedulerPlugins,
    /// `scheduling.k8s.io/v1beta1`, kind `PodGroup` (Kubernetes' workload-aware scheduling).
    Kubernetes,
}

impl PodGroupApi {
    pub const ALL: [PodGroupApi; 3] = [
        PodGroupApi::Volcano,
        PodGroupApi::SchedulerPlugins,
        PodGroupApi::Kubernetes,
    ];

    /// `group/version`, as in an object's `apiVersion`.
    pub fn api_version(self) -> &'static str {
        match self {
            PodGroupApi::Volcano => "scheduling.volcano.sh/v1beta1",
            PodGroupApi::SchedulerPlugins => "scheduling.x-k8s.io/v1alpha1",
            PodGroupApi::Kubernetes => "scheduling.k8s.io/v1beta1",
        }
    }
}

impl fmt::Display for PodGroupApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} PodGroup", self.api_version())
    }
}

/// The part of a PodGroup object muster uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodGroupDef {
    pub api: PodGroupApi,
    /// Namespace and name of the object: the gang it defines.
    pub key: GangKey,
    /// Members that must have nodes before any is bound: `minMember` (Volcano,
    /// scheduler-plugins) or the gang policy's `minCount` (Kubernetes; 1 for the basic policy).
    pub min_member: u32,
    /// Per-task minimums (Volcano's `minTaskMember`; tasks named by `volcano.sh/task-spec`).
    pub min_task_member: BTreeMap<String, u32>,
    /// `scheduleTimeoutSeconds` (scheduler-plugins).
    pub timeout: Option<Duration>,
}

/// The PodGroups the watches have seen, and which APIs the cluster serves.
#[derive(Clone, Debug, Default)]
pub struct PodGroupIndex {
    defs: HashMap<(PodGroupApi, GangKey), PodGroupDef>,
    served: HashSet<PodGroupApi>,
}

impl PodGroupIndex {
    pub fn get(&self, api: PodGroupApi, key: &GangKey) -> Option<&PodGroupDef> {
        self.defs.get(&(api, key.clone()))
    }

    pub fn is_served(&self, api: PodGroupApi) -> bool {
        self.served.contains(&api)
    }

    pub fn len(&self) -> usize {
        self.defs.len()
    }

    /// PodGroups of one API.
    pub fn count(&self, api: PodGroupApi) -> usize {
        self.defs.keys().filter(|(a, _)| *a == api).count()
    }

    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }
}

impl GangTable {
    /// A PodGroup was created or changed.
    pub fn apply_pod_group(&mut self, def: PodGroupDef) {
        let key = def.key.clone();
        self.pod_groups.defs.insert((def.api, key.clone()), def);
        self.pod_group_changed(&key);
    }

    /// A PodGroup was deleted.
    pub fn remove_pod_group(&mut self, api: PodGroupApi, key: &GangKey) {
        if self.pod_groups.defs.remove(&(api, key.clone())).is_some() {
            self.pod_group_changed(key);
        }
    }

    /// A re-list of `api`'s PodGroups completed: forgets those it did not list. Returns how many
    /// of that API remain.
    pub fn retain_pod_groups(
        &mut self,
        api: PodGroupApi,
        keep: impl Fn(&GangKey) -> bool,
    ) -> usize {
        let gone: Vec<GangKey> = self
            .pod_groups
            .defs
            .keys()
            .filter(|(a, k)| *a == api && !keep(k))
            .map(|(_, k)| k.clone())
            .collect();
        for key in &gone {
            self.remove_pod_group(api, key);
        }
        self.pod_groups
            .defs
            .keys()
            .filter(|(a, _)| *a == api)
            .count()
    }

    /// Whether the cluster serves `api` (found through discovery; a CRD may be installed or
    /// removed while muster runs). A pod naming a PodGroup of an API the cluster does not serve
    /// is a gang by its keys alone, as before PodGroups were read.
    pub fn set_pod_group_api_served(&mut self, api: PodGroupApi, served: bool) {
        let changed = if served {
            self.pod_groups.served.insert(api)
        } else {
            self.pod_groups.served.remove(&api)
        };
        if changed {
            let keys: Vec<GangKey> = self.gangs.keys().cloned().collect();
            for key in &keys {
                self.pod_group_changed(key);
            }
        }
    }

    pub fn pod_groups(&self) -> &PodGroupIndex {
        &self.pod_groups
    }

    /// The definition of gang `key` changed: its spec is decided again. A gang that holds
    /// seats planned for what it no longer needs gives them all up and waits (the next member's
    /// call plans it again): its PodGroup was deleted (it waits for it again, holding nothing),
    /// or changed its quorum or per-task minimums. A gang that waited for its PodGroup and can
    /// now proceed has its members asked to retry (kube-scheduler does not retry a pod for a
    /// PodGroup's creation). Members already bound stay bound: muster never unbinds a pod, so
    /// a placed gang whose PodGroup is deleted keeps running, and only its new members wait.
    fn pod_group_changed(&mut self, key: &GangKey) {
        let Some(before) = self.gangs.get(key).map(|g| g.spec().clone()) else {
            return;
        };
        self.refresh_spec(key);
        let after = self.gangs[key].spec().clone();
        // Its waiting members hear of the change: why they wait now, or to retry.
        let (kind, message) = match (before.is_decided(), after.awaited_pod_group()) {
            (true, Some((api, _))) => (NoticeKind::Waiting, messages::pod_group_missing(key, api)),
            (false, None) => (NoticeKind::Retry, messages::RETRY_POD_GROUP.to_string()),
            _ => return self.finish_pod_group_change(key),
        };
        let told: Vec<Notice> = self
            .members_of(&self.gangs[key])
            .filter(|p| p.is_pending())
            .map(|p| Notice {
                pod: PodRef::of(&p.info),
                kind,
                message: message.clone(),
            })
            .collect();
        self.notices.extend(told);
        if let Some(g) = self.gangs.get_mut(key) {
            g.last_wait_message = (kind == NoticeKind::Waiting).then_some(message);
        }
        self.finish_pod_group_change(key);
    }

    fn finish_pod_group_change(&mut self, key: &GangKey) {
        self.tell_pod_group_conflict(key);
        self.refresh_placed(key);
    }
}
