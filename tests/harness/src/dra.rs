//! Dynamic Resource Allocation (resource.k8s.io/v1) objects for tests and benchmarks, as a DRA
//! driver and a cluster administrator would publish them (the harness runs no driver).

use anyhow::Result;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};
use serde_json::{json, Value};

/// The node-local ResourceSlice `<node>-gpus` of `driver`: the whole pool named after the node
/// (generation 1, one slice), holding `devices` (each a `Device`, e.g. `{"name": "gpu-0"}`).
pub fn node_slice(driver: &str, node: &str, devices: Vec<Value>) -> Result<ResourceSlice> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("{node}-gpus")},
        "spec": {
            "driver": driver, "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices
        }
    }))?)
}

/// The DeviceClass `driver`: every device of the driver of that name.
pub fn driver_class(driver: &str) -> Result<DeviceClass> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": driver},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == '{driver}'")}}]}
    }))?)
}
