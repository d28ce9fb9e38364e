//! PodGroup objects of the three APIs that define gangs apart from their pods, read into the
//! model's [`PodGroupDef`].
//!
//! Each API is watched only while the cluster serves it (`discovery` finds out, at start and
//! then periodically, so a CRD installed later is picked up). The objects come through the same
//! pure `watch::apply_event` as pods and nodes, re-lists included; only the part muster uses is
//! kept. The fields are read from each project's own Go types:
//! - Volcano `scheduling.volcano.sh/v1beta1` `PodGroupSpec`: `minMember` (int32, omitempty),
//!   `minTaskMember` (map of task name to int32);
//! - scheduler-plugins `scheduling.x-k8s.io/v1alpha1` `PodGroupSpec`: `minMember`,
//!   `scheduleTimeoutSeconds` (*int32; 0 or unset means the scheduler's default);
//! - Kubernetes `scheduling.k8s.io/v1beta1` `PodGroupSpec` (k8s-openapi's type):
//!   `schedulingPolicy.gang.minCount`; the `basic` policy schedules pods one by one (quorum 1).
//!
//! The spec is kept as raw JSON by the watch and read here, object by object: one object whose
//! spec muster cannot read is skipped with an error naming it and the field, and never breaks
//! the list of the others.

mod discovery;
#[cfg(test)]
mod tests;

pub use discovery::{watch_pod_groups, Change, Found};

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Debug;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::scheduling::v1beta1::PodGroupSpec as KubernetesPodGroupSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::watch::{Indexed, Read};
use crate::metrics::PodGroupGauge;
use crate::model::enqueue::volcano_counts_min_resource;
use crate::model::topology::{parse_label_key, PodGroupTopology, KUBERNETES_TOPOLOGY};
use crate::model::{GangKey, GangTable, PodGroupApi, PodGroupDef, Resources};
use crate::state::Shared;

/// Why a PodGroup object could not be read; the watch skips it and counts it as unreadable.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PodGroupError {
    #[error("a {api} object has no metadata.{field}")]
    MissingField {
        api: PodGroupApi,
        field: &'static str,
    },
    #[error("{api} {key}: {path}: {why}")]
    BadField {
        api: PodGroupApi,
        key: GangKey,
        path: String,
        why: String,
    },
}

/// One of the three APIs, as a type: what differs between them is where the object lives and
/// how its spec is read.
pub trait PodGroupKind: Clone + Debug + Send + Sync + 'static {
    const API: PodGroupApi;
    const GROUP: &'static str;
    const VERSION: &'static str;
    /// `podgroups.<group>`: the resource, as in RBAC and in the watch metrics' `kind` label.
    const RESOURCE: &'static str;
    /// Reads the spec (`None`: the object has none); errors name the field.
    fn read(key: &GangKey, spec: Option<&serde_json::Value>) -> Result<SpecRead, PodGroupError>;
}

/// What a spec gives, before it is put together with the object's key.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SpecRead {
    pub min_member: u32,
    pub min_task_member: BTreeMap<String, u32>,
    pub timeout: Option<Duration>,
    pub topology: Option<PodGroupTopology>,
    pub min_resources: Option<Resources>,
}

#[derive(Clone, Debug)]
pub struct Volcano;
#[derive(Clone, Debug)]
pub struct SchedulerPlugins;
#[derive(Clone, Debug)]
pub struct Kubernetes;

/// Volcano's `PodGroupSpec`, the fields muster uses.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct VolcanoSpec {
    min_member: Option<i32>,
    min_task_member: Option<BTreeMap<String, i32>>,
    network_topology: Option<VolcanoNetworkTopology>,
    /// A resource list: quantities as strings (or numbers, as YAML may give them).
    min_resources: Option<BTreeMap<String, serde_json::Value>>,
}

/// Volcano's `NetworkTopologySpec` (`pkg/apis/scheduling/v1beta1/types.go` of volcano.sh/apis):
/// `mode` (`hard`, the default, or `soft`), and the highest tier a job may cross, by number or
/// by name (one of them).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct VolcanoNetworkTopology {
    mode: Option<String>,
    highest_tier_allowed: Option<i64>,
    highest_tier_name: Option<String>,
}

/// scheduler-plugins' `PodGroupSpec`, the fields muster uses.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SchedulerPluginsSpec {
    min_member: Option<i32>,
    schedule_timeout_seconds: Option<i32>,
}

impl PodGroupKind for Volcano {
    const API: PodGroupApi = PodGroupApi::Volcano;
    const GROUP: &'static str = "scheduling.volcano.sh";
    const VERSION: &'static str = "v1beta1";
    const RESOURCE: &'static str = "podgroups.scheduling.volcano.sh";
    fn read(key: &GangKey, spec: Option<&serde_json::Value>) -> Result<SpecRead, PodGroupError> {
        let Some(spec) = spec else {
            return Ok(SpecRead::default());
        };
        let s: VolcanoSpec = parse::<Self, _>(key, spec)?;
        let mut min_task_member = BTreeMap::new();
        for (task, min) in s.min_task_member.unwrap_or_default() {
            let min = count::<Self>(key, &format!("spec.minTaskMember.{task}"), min)?;
            min_task_member.insert(task, min);
        }
        let topology = match s.network_topology {
            None => None,
            Some(t) => {
                let hard = match t.mode.as_deref() {
                    None | Some("") | Some("hard") => true,
                    Some("soft") => false,
                    Some(other) => {
                        return Err(bad_field::<Self>(
                            key,
                            "spec.networkTopology.mode",
                            format!("must be hard or soft, got {other:?}"),
                        ))
                    }
                };
                let tier = match (t.highest_tier_allowed, t.highest_tier_name) {
                    (Some(n), _) => format!("highestTierAllowed {n}"),
                    (None, Some(name)) => format!("highestTierName {name}"),
                    // The CRD defaults highestTierAllowed to 1.
                    (None, None) => "highestTierAllowed 1".to_string(),
                };
                Some(PodGroupTopology::VolcanoNetwork { hard, tier })
            }
        };
        let min_resources = match s.min_resources {
            None => None,
            Some(list) => {
                let mut r = Resources::default();
                for (name, q) in list {
                    if !volcano_counts_min_resource(&name) {
                        continue;
                    }
                    let q = match q {
                        serde_json::Value::String(s) => s,
                        serde_json::Value::Number(n) => n.to_string(),
                        other => {
                            return Err(bad_field::<Self>(
                                key,
                                &format!("spec.minResources.{name}"),
                                format!("must be a quantity, got {other}"),
                            ))
                        }
                    };
                    r.set(&name, &q).map_err(|e| {
                        bad_field::<Self>(key, &format!("spec.minResources.{name}"), e.to_string())
                    })?;
                }
                Some(r)
            }
        };
        Ok(SpecRead {
            min_member: count::<Self>(key, "spec.minMember", s.min_member.unwrap_or(0))?,
            min_task_member,
            timeout: None,
            topology,
            min_resources,
        })
    }
}

impl PodGroupKind for SchedulerPlugins {
    const API: PodGroupApi = PodGroupApi::SchedulerPlugins;
    const GROUP: &'static str = "scheduling.x-k8s.io";
    const VERSION: &'static str = "v1alpha1";
    const RESOURCE: &'static str = "podgroups.scheduling.x-k8s.io";
    fn read(key: &GangKey, spec: Option<&serde_json::Value>) -> Result<SpecRead, PodGroupError> {
        let Some(spec) = spec else {
            return Ok(SpecRead::default());
        };
        let s: SchedulerPluginsSpec = parse::<Self, _>(key, spec)?;
        let timeout = match s.schedule_timeout_seconds {
            // The coscheduling plugin takes 0 (or no value) as "the configured default".
            None | Some(0) => None,
            Some(secs) => Some(Duration::from_secs(u64::from(count::<Self>(
                key,
                "spec.scheduleTimeoutSeconds",
                secs,
            )?))),
        };
        Ok(SpecRead {
            min_member: count::<Self>(key, "spec.minMember", s.min_member.unwrap_or(0))?,
            min_task_member: BTreeMap::new(),
            timeout,
            topology: None,
            min_resources: None,
        })
    }
}

impl PodGroupKind for Kubernetes {
    const API: PodGroupApi = PodGroupApi::Kubernetes;
    const GROUP: &'static str = "scheduling.k8s.io";
    const VERSION: &'static str = "v1beta1";
    const RESOURCE: &'static str = "podgroups.scheduling.k8s.io";
    fn read(key: &GangKey, spec: Option<&serde_json::Value>) -> Result<SpecRead, PodGroupError> {
        let Some(spec) = spec else {
            return Err(bad_field::<Self>(
                key,
                "spec",
                "missing (the API server requires it)".into(),
            ));
        };
        let bad = |why: &str| bad_field::<Self>(key, "spec.schedulingPolicy", why.to_string());
        let s: KubernetesPodGroupSpec = parse::<Self, _>(key, spec)?;
        let policy = s.scheduling_policy;
        let min_member = match (policy.basic, policy.gang) {
            (Some(_), Some(_)) => return Err(bad("sets both basic and gang; one is allowed")),
            // The basic policy schedules each pod on its own: a quorum of one.
            (Some(_), None) => 1,
            (None, Some(gang)) => {
                count::<Self>(key, "spec.schedulingPolicy.gang.minCount", gang.min_count)?
            }
            (None, None) => return Err(bad("sets neither basic nor gang")),
        };
        // One constraint at most (`+k8s:maxItems=1`); its key is a node label.
        let topology = match s
            .scheduling_constraints
            .map(|c| c.topology.unwrap_or_default())
            .unwrap_or_default()
            .as_slice()
        {
            [] => None,
            [one] => Some(PodGroupTopology::Required(
                parse_label_key(KUBERNETES_TOPOLOGY, &one.key, &one.key).map_err(|e| {
                    bad_field::<Self>(
                        key,
                        "spec.schedulingConstraints.topology[0].key",
                        e.to_string(),
                    )
                })?,
            )),
            _ => {
                return Err(bad_field::<Self>(
                    key,
                    "spec.schedulingConstraints.topology",
                    "lists more than one constraint; the API allows one".into(),
                ))
            }
        };
        Ok(SpecRead {
            min_member,
            min_task_member: BTreeMap::new(),
            timeout: None,
            topology,
            min_resources: None,
        })
    }
}

fn bad_field<A: PodGroupKind>(key: &GangKey, path: &str, why: String) -> PodGroupError {
    PodGroupError::BadField {
        api: A::API,
        key: key.clone(),
        path: path.to_string(),
        why,
    }
}

/// Deserializes `spec`; an error names the field (`spec.minMember`) and what was wrong with it.
fn parse<A: PodGroupKind, T: DeserializeOwned>(
    key: &GangKey,
    spec: &serde_json::Value,
) -> Result<T, PodGroupError> {
    serde_path_to_error::deserialize(spec).map_err(|e| {
        let path = match e.path().to_string() {
            p if p == "." => "spec".to_string(),
            p => format!("spec.{p}"),
        };
        bad_field::<A>(key, &path, e.into_inner().to_string())
    })
}

/// A count from an int32 field: negative values are refused (every API's validation would).
fn count<A: PodGroupKind>(key: &GangKey, path: &str, value: i32) -> Result<u32, PodGroupError> {
    u32::try_from(value).map_err(|_| {
        bad_field::<A>(
            key,
            path,
            format!("{value} is negative; it must be 0 or more"),
        )
    })
}

/// A PodGroup object of API `A`, as the watch receives it: metadata, and the spec left as JSON
/// until [`pod_group_def`] reads it (status and everything else are not kept).
#[derive(Clone, Debug, Deserialize)]
#[serde(bound = "")]
pub struct PodGroupObject<A> {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Option<serde_json::Value>,
    #[serde(skip)]
    api: PhantomData<fn() -> A>,
}

impl<A: PodGroupKind> Resource for PodGroupObject<A> {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "PodGroup".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        A::GROUP.into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        A::VERSION.into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "podgroups".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The gang an object defines: its namespace and name.
fn key_of<A: PodGroupKind>(obj: &PodGroupObject<A>) -> Result<GangKey, PodGroupError> {
    let missing = |field| PodGroupError::MissingField { api: A::API, field };
    let name = obj
        .metadata
        .name
        .as_deref()
        .ok_or_else(|| missing("name"))?;
    let namespace = obj
        .metadata
        .namespace
        .as_deref()
        .ok_or_else(|| missing("namespace"))?;
    Ok(GangKey::new(namespace, name))
}

/// Reads an object into the part muster uses.
pub fn pod_group_def<A: PodGroupKind>(
    obj: &PodGroupObject<A>,
) -> Result<PodGroupDef, PodGroupError> {
    let key = key_of(obj)?;
    let read = A::read(&key, obj.spec.as_ref())?;
    Ok(PodGroupDef {
        api: A::API,
        key,
        min_member: read.min_member,
        min_task_member: read.min_task_member,
        timeout: read.timeout,
        topology: read.topology,
        min_resources: read.min_resources,
    })
}

/// Re-list bookkeeping key of a PodGroup: `namespace/name` (unique within one API).
fn relist_key(key: &GangKey) -> Arc<str> {
    Arc::from(key.to_string())
}

impl<A: PodGroupKind> Indexed for PodGroupObject<A> {
    const KIND: &'static str = A::RESOURCE;
    type Error = PodGroupError;

    fn apply(table: &mut GangTable, obj: &Self) -> Read<PodGroupError> {
        let def = pod_group_def(obj)?;
        let key = relist_key(&def.key);
        table.apply_pod_group(def);
        Ok((key, None))
    }
    fn remove(table: &mut GangTable, obj: &Self) {
        if let Ok(key) = key_of(obj) {
            table.remove_pod_group(A::API, &key);
        }
    }
    fn retain(table: &mut GangTable, seen: &HashSet<Arc<str>>) -> usize {
        table.retain_pod_groups(A::API, |key| seen.contains(key.to_string().as_str()))
    }
    /// Only now may a pod naming a PodGroup of this API that muster has not seen be told the
    /// PodGroup is missing: before the first list, muster could not have seen it.
    fn set_synced(shared: &Shared) {
        shared.table.lock().set_pod_group_api_served(A::API, true);
        shared.readiness.set_pod_group_api_listed(A::API);
    }
    /// PodGroups are optional: a muster whose RBAC predates them (an upgrade that applied the new
    /// image before the new RBAC) must not stay unready. Readiness stops waiting for this API,
    /// whose gangs go by their pods' keys (the API counts as not served) until a list succeeds.
    fn forbidden(shared: &Shared) {
        if shared.readiness.pod_group_api_pending(A::API) {
            tracing::error!(
                api = %A::API,
                "muster may not list {}: apply deploy/rbac.yaml of this version; until then its \
                 gangs are decided by their pods' keys",
                A::RESOURCE
            );
        }
        shared.readiness.set_pod_group_api_listed(A::API);
    }
}

/// Per API: whether the table counts it as served, and how many of its PodGroups it holds.
pub fn gauges(table: &GangTable) -> [PodGroupGauge; 3] {
    PodGroupApi::ALL.map(|api| PodGroupGauge {
        api: api.api_version(),
        served: table.pod_groups().is_served(api),
        known: table.pod_groups().count(api),
    })
}
