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
use super::resources::Resources;
use super::topology::PodGroupTopology;

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
    /// `spec.schedulingConstraints.topology` (Kubernetes), `spec.networkTopology` (Volcano).
    pub topology: Option<PodGroupTopology>,
    /// `spec.minResources` (Volcano): what its job controller sums over the quorum's members;
    /// muster enqueues the PodGroup only while it fits the cluster's free allocatable in sum.
    pub min_resources: Option<Resources>,
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

    /// The gangs `api`'s PodGroups define.
    pub fn keys(&self, api: PodGroupApi) -> impl Iterator<Item = &GangKey> {
        self.defs
            .keys()
            .filter(move |(a, _)| *a == api)
            .map(|(_, k)| k)
    }

    pub(in crate::model) fn insert(&mut self, def: PodGroupDef) {
        self.defs.insert((def.api, def.key.clone()), def);
    }

    /// Whether it had that PodGroup.
    pub(in crate::model) fn remove(&mut self, api: PodGroupApi, key: &GangKey) -> bool {
        self.defs.remove(&(api, key.clone())).is_some()
    }

    /// Whether that changed anything.
    pub(in crate::model) fn set_served(&mut self, api: PodGroupApi, served: bool) -> bool {
        if served {
            self.served.insert(api)
        } else {
            self.served.remove(&api)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }
}
