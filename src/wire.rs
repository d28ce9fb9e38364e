//! The extender wire types, named exactly as kube-scheduler's Go structs
//! (`k8s.io/kube-scheduler/extender/v1/types.go`). Those structs have no json tags, so Go's
//! encoder uses the field names verbatim (`Pod`, `NodeNames`, `PodUID`...) and writes nil as
//! `null`. serde matches names exactly, so every field is renamed by hand: `rename_all =
//! "PascalCase"` would produce `PodUid`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Body of `filter` and `prioritize`. Node names and node objects borrow from the request
/// bytes: at 5,000 nodes, one allocation per name is most of the decoding cost. (Node names
/// are DNS subdomains, so they never contain a JSON escape that would prevent borrowing.)
#[derive(Debug, Deserialize)]
pub struct ExtenderArgs<'a> {
    #[serde(rename = "Pod")]
    pub pod: Pod,
    /// Set when the extender is configured with `nodeCacheCapable: false`.
    #[serde(rename = "Nodes", default, borrow)]
    pub nodes: Option<NodeList<'a>>,
    /// Set when the extender is configured with `nodeCacheCapable: true`.
    #[serde(rename = "NodeNames", default, borrow)]
    pub node_names: Option<Vec<&'a str>>,
}

/// A `v1.NodeList` whose items are kept as the raw bytes received: muster reads only each
/// item's name and hands back the items it keeps exactly as kube-scheduler sent them.
#[derive(Debug, Deserialize, Serialize, Default)]
pub struct NodeList<'a> {
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    #[serde(borrow)]
    pub items: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
struct NameOnly {
    #[serde(default)]
    metadata: MetaName,
}

#[derive(Deserialize, Default)]
struct MetaName {
    #[serde(default)]
    name: String,
}

impl NodeList<'_> {
    /// The node names, in order; an item without `metadata.name` gets an empty name, which
    /// matches no node and is failed with a reason.
    pub fn names(&self) -> Vec<String> {
        self.items
            .iter()
            .map(|n| {
                serde_json::from_str::<NameOnly>(n.get())
                    .map(|n| n.metadata.name)
                    .unwrap_or_default()
            })
            .collect()
    }
}

/// Reply of `filter`.
#[derive(Debug, Serialize, Deserialize, Default, PartialEq)]
pub struct ExtenderFilterResult<'a> {
    #[serde(rename = "Nodes", borrow)]
    pub nodes: Option<NodeList<'a>>,
    #[serde(rename = "NodeNames", borrow)]
    pub node_names: Option<Vec<&'a str>>,
    #[serde(rename = "FailedNodes")]
    pub failed_nodes: BTreeMap<String, String>,
    #[serde(rename = "FailedAndUnresolvableNodes")]
    pub failed_and_unresolvable_nodes: BTreeMap<String, String>,
    #[serde(rename = "Error")]
    pub error: String,
}

impl PartialEq for NodeList<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.items.len() == other.items.len()
            && self
                .items
                .iter()
                .zip(&other.items)
                .all(|(a, b)| a.get() == b.get())
    }
}

/// One entry of the `prioritize` reply (a top-level JSON array).
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct HostPriority<'a> {
    #[serde(rename = "Host")]
    pub host: &'a str,
    #[serde(rename = "Score")]
    pub score: i64,
}

/// Body of `bind`.
#[derive(Debug, Deserialize)]
pub struct ExtenderBindingArgs {
    #[serde(rename = "PodName")]
    pub pod_name: String,
    #[serde(rename = "PodNamespace")]
    pub pod_namespace: String,
    #[serde(rename = "PodUID")]
    pub pod_uid: String,
    #[serde(rename = "Node")]
    pub node: String,
}

/// Reply of `bind`; an empty `Error` means bound.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExtenderBindingResult {
    #[serde(rename = "Error")]
    pub error: String,
}

/// Highest score an extender may give (`extenderv1.MaxExtenderPriority`).
pub const MAX_EXTENDER_PRIORITY: i64 = 10;

/// Body of `preempt` (`ExtenderPreemptionArgs`), after kube-scheduler's own dry run chose
/// candidate nodes and victims for one pod. Exactly one of the two maps is set, by the
/// extender's `nodeCacheCapable`; the other is `null`.
#[derive(Debug, Deserialize)]
pub struct ExtenderPreemptionArgs {
    #[serde(rename = "Pod")]
    pub pod: Pod,
    /// `nodeCacheCapable: false`: whole victim pods.
    #[serde(rename = "NodeNameToVictims", default)]
    pub node_name_to_victims: Option<BTreeMap<String, Option<Victims>>>,
    /// `nodeCacheCapable: true`: victim UIDs only.
    #[serde(rename = "NodeNameToMetaVictims", default)]
    pub node_name_to_meta_victims: Option<BTreeMap<String, Option<MetaVictims>>>,
}

/// Reply of `preempt`: always UIDs. The map *replaces* kube-scheduler's candidates; an empty
/// map means no candidate, so nothing is evicted. Every node in it must have a victim.
#[derive(Debug, Serialize, Deserialize, Default, PartialEq, Eq)]
pub struct ExtenderPreemptionResult {
    #[serde(rename = "NodeNameToMetaVictims")]
    pub node_name_to_meta_victims: BTreeMap<String, MetaVictims>,
}

/// `Victims`: the pods kube-scheduler would evict on one node. muster reads only each pod's
/// UID (it knows the pods from its own cache), so the rest of every pod is skipped unread.
#[derive(Debug, Deserialize)]
pub struct Victims {
    #[serde(rename = "Pods", default)]
    pub pods: Option<Vec<VictimPod>>,
    #[serde(rename = "NumPDBViolations", default)]
    pub num_pdb_violations: i64,
}

/// A victim `v1.Pod`, of which only `metadata.uid` is read.
#[derive(Debug, Deserialize)]
pub struct VictimPod {
    pub metadata: VictimMeta,
}

#[derive(Debug, Deserialize)]
pub struct VictimMeta {
    pub uid: String,
}

/// `MetaVictims`: the victims of one node by UID.
#[derive(Debug, Serialize, Deserialize, Default, PartialEq, Eq, Clone)]
pub struct MetaVictims {
    #[serde(rename = "Pods", default, deserialize_with = "null_as_empty")]
    pub pods: Vec<MetaPod>,
    #[serde(rename = "NumPDBViolations", default)]
    pub num_pdb_violations: i64,
}

/// `MetaPod`: `UID`, not `Uid`.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq, Clone)]
pub struct MetaPod {
    #[serde(rename = "UID")]
    pub uid: String,
}

/// Go writes a nil slice as `null`.
fn null_as_empty<'de, D, T>(de: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(de)?.unwrap_or_default())
}

impl ExtenderPreemptionArgs {
    /// The candidates in one form, whichever was sent: node → (victim UIDs, PDB violations).
    /// A node with a `null` entry has no victims.
    pub fn candidates(&self) -> Vec<(&str, Vec<&str>, i64)> {
        if let Some(map) = &self.node_name_to_meta_victims {
            return map
                .iter()
                .map(|(node, v)| match v {
                    Some(v) => (
                        node.as_str(),
                        v.pods.iter().map(|p| p.uid.as_str()).collect(),
                        v.num_pdb_violations,
                    ),
                    None => (node.as_str(), Vec::new(), 0),
                })
                .collect();
        }
        self.node_name_to_victims
            .iter()
            .flatten()
            .map(|(node, v)| match v {
                Some(v) => (
                    node.as_str(),
                    v.pods
                        .iter()
                        .flatten()
                        .map(|p| p.metadata.uid.as_str())
                        .collect(),
                    v.num_pdb_violations,
                ),
                None => (node.as_str(), Vec::new(), 0),
            })
            .collect()
    }
}
