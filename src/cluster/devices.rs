//! Watches of the Dynamic Resource Allocation objects (resource.k8s.io/v1: ResourceSlices,
//! DeviceClasses, ResourceClaims, ResourceClaimTemplates) and their conversion to the model's
//! device inventory (`model::devices`). This is the only reader of the `resource::v1` types.
//!
//! These watches do not gate readiness: until all four have completed their first list, a gang
//! whose members have claims fits nowhere and holds nothing, its message naming the kinds not
//! listed yet (fail-safe: the lists fill the inventory object by object, see
//! `DeviceInventory::unlisted`); gangs without claims are not affected. A cluster that does
//! not serve resource.k8s.io/v1 (or RBAC that does not let muster list it) leaves them
//! retrying with back-off and a warning per attempt; muster is ready all the same.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{
    DeviceAttribute, DeviceClass as ApiDeviceClass, DeviceRequest, DeviceSelector, ResourceClaim,
    ResourceClaimSpec, ResourceClaimTemplate, ResourceSlice,
};
use kube::runtime::watcher;
use kube::{Api, Client};

use super::convert::{node_selector_of, ConvertError};
use super::watch::{watch, Indexed, Read};
use crate::model::devices::{
    Allocation, AllocationMode, AttrValue, Claim, ClaimSpec, Device, DeviceClass, DeviceId,
    NodeScope, ObjectKey, Request, Selector, Slice,
};
use crate::model::GangTable;
use crate::state::Shared;

fn missing(object: &'static str, field: &'static str) -> ConvertError {
    ConvertError::MissingField { object, field }
}

fn attr_of(a: &DeviceAttribute) -> Option<AttrValue> {
    let list = |v: Vec<AttrValue>| Some(AttrValue::List(v));
    if let Some(b) = a.bool {
        return Some(AttrValue::Bool(b));
    }
    if let Some(i) = a.int {
        return Some(AttrValue::Int(i));
    }
    if let Some(s) = &a.string {
        return Some(AttrValue::String(s.clone()));
    }
    if let Some(v) = &a.version {
        return Some(AttrValue::Version(v.clone()));
    }
    if let Some(l) = &a.bools {
        return list(l.iter().map(|b| AttrValue::Bool(*b)).collect());
    }
    if let Some(l) = &a.ints {
        return list(l.iter().map(|i| AttrValue::Int(*i)).collect());
    }
    if let Some(l) = &a.strings {
        return list(l.iter().map(|s| AttrValue::String(s.clone())).collect());
    }
    if let Some(l) = &a.versions {
        return list(l.iter().map(|s| AttrValue::Version(s.clone())).collect());
    }
    None
}

/// A ResourceSlice in the model's form.
pub fn slice_of(s: &ResourceSlice) -> Slice {
    let spec = &s.spec;
    let scope = |node_name: &Option<String>,
                 selector: &Option<k8s_openapi::api::core::v1::NodeSelector>,
                 all: Option<bool>| {
        if let Some(n) = node_name {
            Some(NodeScope::Node(n.as_str().into()))
        } else if let Some(sel) = selector {
            Some(NodeScope::Selector(node_selector_of(sel)))
        } else if all == Some(true) {
            Some(NodeScope::AllNodes)
        } else {
            None
        }
    };
    let per_device = spec.per_device_node_selection == Some(true);
    let devices = spec
        .devices
        .iter()
        .flatten()
        .map(|d| {
            let unsupported = if d.consumes_counters.as_ref().is_some_and(|c| !c.is_empty()) {
                Some("shared counters (a partitionable device)")
            } else if d.allow_multiple_allocations == Some(true) {
                Some("multiple allocations (consumable capacity)")
            } else if d.taints.as_ref().is_some_and(|t| !t.is_empty()) {
                Some("device taints")
            } else if d.binding_conditions.as_ref().is_some_and(|c| !c.is_empty()) {
                Some("binding conditions")
            } else {
                None
            };
            Device {
                name: d.name.as_str().into(),
                attributes: d
                    .attributes
                    .iter()
                    .flatten()
                    .filter_map(|(k, v)| Some((k.clone(), attr_of(v)?)))
                    .collect(),
                capacity: d
                    .capacity
                    .iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.value.0.clone()))
                    .collect(),
                scope: per_device
                    .then(|| scope(&d.node_name, &d.node_selector, d.all_nodes))
                    .flatten(),
                unsupported,
            }
        })
        .collect();
    Slice {
        driver: spec.driver.as_str().into(),
        pool: spec.pool.name.as_str().into(),
        generation: spec.pool.generation,
        slice_count: spec.pool.resource_slice_count,
        scope: if per_device {
            None
        } else {
            scope(&spec.node_name, &spec.node_selector, spec.all_nodes)
        },
        devices,
    }
}

fn selectors_of(
    list: &Option<Vec<DeviceSelector>>,
    compile: &mut impl FnMut(&str) -> Arc<Selector>,
) -> Vec<Arc<Selector>> {
    list.iter()
        .flatten()
        .filter_map(|s| s.cel.as_ref())
        .map(|c| compile(&c.expression))
        .collect()
}

fn request_of(
    r: &DeviceRequest,
    compile: &mut impl FnMut(&str) -> Arc<Selector>,
) -> Result<Request, String> {
    if r.first_available.as_ref().is_some_and(|f| !f.is_empty()) {
        return Err(format!(
            "request {}: prioritized alternatives (firstAvailable)",
            r.name
        ));
    }
    let Some(e) = &r.exactly else {
        return Err(format!(
            "request {}: neither exactly nor firstAvailable",
            r.name
        ));
    };
    if e.admin_access == Some(true) {
        return Err(format!("request {}: adminAccess", r.name));
    }
    if e.capacity.is_some() {
        return Err(format!("request {}: capacity requests", r.name));
    }
    if e.tolerations.as_ref().is_some_and(|t| !t.is_empty()) {
        return Err(format!("request {}: device tolerations", r.name));
    }
    let mode = match e.allocation_mode.as_deref() {
        None | Some("") | Some("ExactCount") => {
            AllocationMode::Exact(e.count.unwrap_or(1).clamp(0, u32::MAX as i64) as u32)
        }
        Some("All") => AllocationMode::All,
        Some(other) => {
            return Err(format!("request {}: allocationMode {other}", r.name));
        }
    };
    Ok(Request {
        name: r.name.clone(),
        class: e.device_class_name.as_str().into(),
        mode,
        selectors: selectors_of(&e.selectors, compile),
    })
}

/// A claim's (or a template's) spec in the model's form.
pub fn claim_spec_of(
    spec: &ResourceClaimSpec,
    compile: &mut impl FnMut(&str) -> Arc<Selector>,
) -> ClaimSpec {
    let Some(devices) = &spec.devices else {
        return ClaimSpec::default();
    };
    if devices.constraints.as_ref().is_some_and(|c| !c.is_empty()) {
        return ClaimSpec {
            requests: Vec::new(),
            unsupported: Some("constraints (matchAttribute)".to_string()),
        };
    }
    let mut requests = Vec::new();
    for r in devices.requests.iter().flatten() {
        match request_of(r, compile) {
            Ok(r) => requests.push(r),
            Err(why) => {
                return ClaimSpec {
                    requests: Vec::new(),
                    unsupported: Some(why),
                }
            }
        }
    }
    ClaimSpec {
        requests,
        unsupported: None,
    }
}

/// A ResourceClaim in the model's form.
pub fn claim_of(c: &ResourceClaim, compile: &mut impl FnMut(&str) -> Arc<Selector>) -> Claim {
    let allocation = c
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .map(|a| Allocation {
            devices: a
                .devices
                .as_ref()
                .and_then(|d| d.results.as_ref())
                .into_iter()
                .flatten()
                .map(|r| DeviceId {
                    driver: r.driver.as_str().into(),
                    pool: r.pool.as_str().into(),
                    name: r.device.as_str().into(),
                })
                .collect(),
            node_selector: a.node_selector.as_ref().map(node_selector_of),
        });
    Claim {
        spec: c
            .spec
            .as_ref()
            .map_or_else(ClaimSpec::default, |s| claim_spec_of(s, compile)),
        allocation,
    }
}

fn name_of(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    object: &'static str,
) -> Result<Arc<str>, ConvertError> {
    meta.name
        .as_deref()
        .map(Arc::from)
        .ok_or_else(|| missing(object, "name"))
}

fn object_key(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    object: &'static str,
) -> Result<ObjectKey, ConvertError> {
    let ns = meta.namespace.as_deref().unwrap_or("default");
    Ok((Arc::from(ns), name_of(meta, object)?))
}

/// The re-list key of a namespaced object.
fn relist_key((ns, name): &ObjectKey) -> Arc<str> {
    Arc::from(format!("{ns}/{name}"))
}

impl Indexed for ResourceSlice {
    const KIND: &'static str = "resourceslices";
    type Error = ConvertError;
    fn apply(table: &mut GangTable, obj: &Self) -> Read<ConvertError> {
        let name = name_of(&obj.metadata, "resourceslice")?;
        table.apply_resource_slice(name.clone(), slice_of(obj));
        Ok((name, None))
    }
    fn remove(table: &mut GangTable, obj: &Self) {
        if let Some(name) = obj.metadata.name.as_deref() {
            table.remove_resource_slice(name);
        }
    }
    fn retain(table: &mut GangTable, seen: &HashSet<Arc<str>>) -> usize {
        table.retain_resource_slices(|n| seen.contains(n))
    }
    fn set_synced(shared: &Shared) {
        shared.table.lock().device_kind_listed(Self::KIND);
    }
}

impl Indexed for ApiDeviceClass {
    const KIND: &'static str = "deviceclasses";
    type Error = ConvertError;
    fn apply(table: &mut GangTable, obj: &Self) -> Read<ConvertError> {
        let name = name_of(&obj.metadata, "deviceclass")?;
        let class = DeviceClass {
            selectors: match &obj.spec {
                Some(spec) => selectors_of(&spec.selectors, &mut |e| table.compile_selector(e)),
                None => Vec::new(),
            },
        };
        table.apply_device_class(name.clone(), class);
        Ok((name, None))
    }
    fn remove(table: &mut GangTable, obj: &Self) {
        if let Some(name) = obj.metadata.name.as_deref() {
            table.remove_device_class(name);
        }
    }
    fn retain(table: &mut GangTable, seen: &HashSet<Arc<str>>) -> usize {
        table.retain_device_classes(|n| seen.contains(n))
    }
    fn set_synced(shared: &Shared) {
        shared.table.lock().device_kind_listed(Self::KIND);
    }
}

impl Indexed for ResourceClaim {
    const KIND: &'static str = "resourceclaims";
    type Error = ConvertError;
    fn apply(table: &mut GangTable, obj: &Self) -> Read<ConvertError> {
        let key = object_key(&obj.metadata, "resourceclaim")?;
        let claim = claim_of(obj, &mut |e| table.compile_selector(e));
        let relist = relist_key(&key);
        table.apply_resource_claim(key, claim);
        Ok((relist, None))
    }
    fn remove(table: &mut GangTable, obj: &Self) {
        if let Ok(key) = object_key(&obj.metadata, "resourceclaim") {
            table.remove_resource_claim(&key);
        }
    }
    fn retain(table: &mut GangTable, seen: &HashSet<Arc<str>>) -> usize {
        table.retain_resource_claims(|k| seen.contains(&relist_key(k)))
    }
    fn set_synced(shared: &Shared) {
        shared.table.lock().device_kind_listed(Self::KIND);
    }
}

impl Indexed for ResourceClaimTemplate {
    const KIND: &'static str = "resourceclaimtemplates";
    type Error = ConvertError;
    fn apply(table: &mut GangTable, obj: &Self) -> Read<ConvertError> {
        let key = object_key(&obj.metadata, "resourceclaimtemplate")?;
        let spec = match obj.spec.as_ref().and_then(|s| s.spec.as_ref()) {
            Some(spec) => claim_spec_of(spec, &mut |e| table.compile_selector(e)),
            None => ClaimSpec::default(),
        };
        let relist = relist_key(&key);
        table.apply_claim_template(key, spec);
        Ok((relist, None))
    }
    fn remove(table: &mut GangTable, obj: &Self) {
        if let Ok(key) = object_key(&obj.metadata, "resourceclaimtemplate") {
            table.remove_claim_template(&key);
        }
    }
    fn retain(table: &mut GangTable, seen: &HashSet<Arc<str>>) -> usize {
        table.retain_claim_templates(|k| seen.contains(&relist_key(k)))
    }
    fn set_synced(shared: &Shared) {
        shared.table.lock().device_kind_listed(Self::KIND);
    }
}

/// The kinds of the four DRA watches.
const KINDS: [&str; 4] = [
    ResourceSlice::KIND,
    ApiDeviceClass::KIND,
    ResourceClaim::KIND,
    ResourceClaimTemplate::KIND,
];

/// Before the watches start (and any decision): gangs with claims hold nothing until each of
/// the four has listed.
pub fn expect_lists(shared: &Shared) {
    shared.table.lock().expect_device_lists(&KINDS);
}

/// The four DRA watches, each until the process ends.
pub async fn watch_devices(client: Client, shared: Arc<Shared>) {
    let config = watcher::Config::default;
    tokio::join!(
        watch::<ResourceSlice>(Api::all(client.clone()), config(), shared.clone()),
        watch::<ApiDeviceClass>(Api::all(client.clone()), config(), shared.clone()),
        watch::<ResourceClaim>(Api::all(client.clone()), config(), shared.clone()),
        watch::<ResourceClaimTemplate>(Api::all(client), config(), shared),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::rules::fixtures::node;
    use serde_json::json;

    fn compile(e: &str) -> Arc<Selector> {
        Arc::new(Selector::compile(e))
    }

    #[test]
    fn a_node_local_slice_converts_with_its_attributes() {
        let s: ResourceSlice = serde_json::from_value(json!({
            "metadata": {"name": "n1-gpus"},
            "spec": {
                "driver": "gpu.example.com", "nodeName": "n1",
                "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {"name": "g0", "attributes": {"model": {"string": "a100"}},
                     "capacity": {"memory": {"value": "80Gi"}}},
                    {"name": "g1", "consumesCounters": [{"counterSet": "s", "counters": {}}]}
                ]
            }
        }))
        .unwrap();
        let slice = slice_of(&s);
        assert_eq!(slice.scope, Some(NodeScope::Node("n1".into())));
        assert_eq!(
            slice.devices[0].attributes["model"],
            AttrValue::String("a100".into())
        );
        assert_eq!(slice.devices[0].capacity["memory"], "80Gi");
        assert!(slice.devices[0].unsupported.is_none());
        assert!(
            slice.devices[1].unsupported.is_some(),
            "a partitionable device is never counted as free"
        );
        assert!(NodeScope::Node("n1".into()).admits(&node("n1")));
    }

    #[test]
    fn claims_convert_with_allocation_and_what_is_not_simulated() {
        let c: ResourceClaim = serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"devices": {"requests": [
                {"name": "gpus", "exactly": {"deviceClassName": "gpu.example.com", "count": 4,
                 "selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}
            ]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpus", "driver": "gpu.example.com", "pool": "n1", "device": "g0"}
            ]}}}
        }))
        .unwrap();
        let claim = claim_of(&c, &mut compile);
        assert_eq!(claim.spec.requests[0].mode, AllocationMode::Exact(4));
        assert_eq!(claim.spec.requests[0].selectors.len(), 1);
        assert_eq!(claim.allocation.unwrap().devices[0].name.as_ref(), "g0");

        let spec: ResourceClaimSpec = serde_json::from_value(json!({"devices": {"requests": [
            {"name": "any", "firstAvailable": [{"name": "a", "deviceClassName": "x"}]}
        ]}}))
        .unwrap();
        let why = claim_spec_of(&spec, &mut compile).unsupported.unwrap();
        assert!(why.contains("firstAvailable"), "{why}");
        let spec: ResourceClaimSpec = serde_json::from_value(json!({"devices": {"requests": [
            {"name": "all", "exactly": {"deviceClassName": "x", "allocationMode": "All"}}
        ]}}))
        .unwrap();
        assert_eq!(
            claim_spec_of(&spec, &mut compile).requests[0].mode,
            AllocationMode::All
        );
    }
}
