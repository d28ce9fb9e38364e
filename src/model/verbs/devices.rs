//! Watch events of Dynamic Resource Allocation objects (ResourceSlices, DeviceClasses,
//! ResourceClaims, ResourceClaimTemplates): they change only the device inventory the
//! DynamicResources rule reads. kube-scheduler itself re-queues the pods such a change may help,
//! and their filter calls plan again.

use std::sync::Arc;

use crate::model::inputs::devices::{Claim, ClaimSpec, DeviceClass, ObjectKey, Slice};
use crate::model::rules::dynamic_resources::Selector;
use crate::model::GangTable;

impl GangTable {
    /// The compiled selector for a CEL expression (each expression compiled once).
    pub fn compile_selector(&mut self, expression: &str) -> Arc<Selector> {
        self.devices.selector(expression)
    }

    pub fn apply_resource_slice(&mut self, name: Arc<str>, slice: Slice) {
        self.devices.apply_slice(name, slice);
    }

    pub fn remove_resource_slice(&mut self, name: &str) {
        self.devices.remove_slice(name);
    }

    /// After a re-list: drops the slices not listed; returns how many remain.
    pub fn retain_resource_slices(&mut self, keep: impl Fn(&str) -> bool) -> usize {
        self.devices.retain_slices(keep);
        self.devices.slice_count()
    }

    pub fn apply_device_class(&mut self, name: Arc<str>, class: DeviceClass) {
        self.devices.apply_class(name, class);
    }

    pub fn remove_device_class(&mut self, name: &str) {
        self.devices.remove_class(name);
    }

    pub fn retain_device_classes(&mut self, keep: impl Fn(&str) -> bool) -> usize {
        self.devices.retain_classes(keep);
        self.devices.class_count()
    }

    pub fn apply_resource_claim(&mut self, key: ObjectKey, claim: Claim) {
        self.devices.apply_claim(key, claim);
    }

    pub fn remove_resource_claim(&mut self, key: &ObjectKey) {
        self.devices.remove_claim(key);
    }

    pub fn retain_resource_claims(&mut self, keep: impl Fn(&ObjectKey) -> bool) -> usize {
        self.devices.retain_claims(keep);
        self.devices.claim_count()
    }

    pub fn apply_claim_template(&mut self, key: ObjectKey, spec: ClaimSpec) {
        self.devices.apply_template(key, spec);
    }

    pub fn remove_claim_template(&mut self, key: &ObjectKey) {
        self.devices.remove_template(key);
    }

    pub fn retain_claim_templates(&mut self, keep: impl Fn(&ObjectKey) -> bool) -> usize {
        self.devices.retain_templates(keep);
        self.devices.template_count()
    }
}
