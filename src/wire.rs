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
