//! Watch events of Dynamic Resource Allocation objects (ResourceSlices, DeviceClasses,
//! ResourceClaims, ResourceClaimTemplates): they change the device inventory the
//! DynamicResources rule reads, and kube-scheduler's standing verdicts on the members that
//! read what changed no longer stand (holds-nothing: a slice, class or claim's devices may be
//! what the member lacked). kube-scheduler itself re-queues the pods such a change may help,
//! and their filter calls plan again.

use std::sync::Arc;

use crate::model::inputs::devices::{
    Claim, ClaimSource, ClaimSpec, DeviceClass, ObjectKey, Selector, Slice,
};
use crate::model::inputs::objects::PodInfo;
use crate::model::GangTable;

/// The pod's ResourceClaims.
fn claims_of(p: &PodInfo) -> &[crate::model::inputs::devices::PodClaim] {
    p.rules.as_ref().map_or(&[], |r| &r.claims)
}

/// Whether `p` uses the claim `(ns, name)`: by name, or as the claim made for it from a
/// template.
fn uses_claim(p: &PodInfo, (ns, name): &ObjectKey) -> bool {
    *p.namespace == **ns
        && claims_of(p).iter().any(|c| match &c.source {
            ClaimSource::Claim(n) => n == name,
            ClaimSource::Template { generated, .. } => generated.as_ref() == Some(name),
        })
}

/// Whether `p` makes a claim from the template `(ns, name)`.
fn uses_template(p: &PodInfo, (ns, name): &ObjectKey) -> bool {
    *p.namespace == **ns
        && claims_of(p).iter().any(
            |c| matches!(&c.source, ClaimSource::Template { template, .. } if template == name),
        )
}

impl GangTable {
    /// A DRA object changed: the standing verdicts on the pods `reads` it no longer stand.
    fn devices_changed(&mut self, reads: impl Fn(&PodInfo) -> bool) {
        if self.verdicts.is_empty() {
            return; // the common case: no lookup per pod
        }
        let pods = &self.pods;
        self.verdicts
            .situation_changed_for(|uid| pods.get(uid).is_some_and(|e| reads(&e.info)));
    }

    /// Any member with a claim may read a slice or class (devices appear, go or match).
    fn devices_changed_for_every_claim(&mut self) {
        self.devices_changed(|p| !claims_of(p).is_empty());
    }

    /// The watches of the DRA `kinds` are starting: until each has listed, gangs with claims
    /// hold nothing (see `DeviceInventory::unlisted`).
    pub fn expect_device_lists(&mut self, kinds: &[&'static str]) {
        self.devices.expect_lists(kinds);
    }

    /// The first list of the DRA `kind` completed.
    pub fn device_kind_listed(&mut self, kind: &str) {
        let waiting = self.devices.unlisted().is_some();
        self.devices.listed(kind);
        if waiting && self.devices.unlisted().is_none() {
            self.devices_changed_for_every_claim();
        }
    }

    /// The compiled selector for a CEL expression (each expression compiled once).
    pub fn compile_selector(&mut self, expression: &str) -> Arc<Selector> {
        self.devices.selector(expression)
    }

    pub fn apply_resource_slice(&mut self, name: Arc<str>, slice: Slice) {
        self.devices.apply_slice(name, slice);
        self.devices_changed_for_every_claim();
    }

    pub fn remove_resource_slice(&mut self, name: &str) {
        self.devices.remove_slice(name);
        self.devices_changed_for_every_claim();
    }

    /// After a re-list: drops the slices not listed; returns how many remain.
    pub fn retain_resource_slices(&mut self, keep: impl Fn(&str) -> bool) -> usize {
        let before = self.devices.slice_count();
        self.devices.retain_slices(keep);
        if self.devices.slice_count() != before {
            self.devices_changed_for_every_claim();
        }
        self.devices.slice_count()
    }

    pub fn apply_device_class(&mut self, name: Arc<str>, class: DeviceClass) {
        if self.devices.class(&name) != Some(&class) {
            self.devices_changed_for_every_claim();
        }
        self.devices.apply_class(name, class);
    }

    pub fn remove_device_class(&mut self, name: &str) {
        self.devices.remove_class(name);
        self.devices_changed_for_every_claim();
    }

    pub fn retain_device_classes(&mut self, keep: impl Fn(&str) -> bool) -> usize {
        self.devices.retain_classes(keep);
        self.devices.class_count()
    }

    /// A claim changed: the verdicts on the pods using it no longer stand; and if it gave
    /// devices back (its allocation went or changed), neither do those on any member with a
    /// claim.
    pub fn apply_resource_claim(&mut self, key: ObjectKey, claim: Claim) {
        let gave_back = self
            .devices
            .claim(&key.0, &key.1)
            .is_some_and(|old| old.allocation.is_some() && old.allocation != claim.allocation);
        if gave_back {
            self.devices_changed_for_every_claim();
        } else {
            self.devices_changed(|p| uses_claim(p, &key));
        }
        self.devices.apply_claim(key, claim);
    }

    /// A claim deleted: its devices are free again.
    pub fn remove_resource_claim(&mut self, key: &ObjectKey) {
        if self.devices.claim(&key.0, &key.1).is_some() {
            self.devices_changed_for_every_claim();
        }
        self.devices.remove_claim(key);
    }

    pub fn retain_resource_claims(&mut self, keep: impl Fn(&ObjectKey) -> bool) -> usize {
        self.devices.retain_claims(keep);
        self.devices.claim_count()
    }

    pub fn apply_claim_template(&mut self, key: ObjectKey, spec: ClaimSpec) {
        self.devices_changed(|p| uses_template(p, &key));
        self.devices.apply_template(key, spec);
    }

    pub fn remove_claim_template(&mut self, key: &ObjectKey) {
        self.devices_changed(|p| uses_template(p, key));
        self.devices.remove_template(key);
    }

    pub fn retain_claim_templates(&mut self, keep: impl Fn(&ObjectKey) -> bool) -> usize {
        self.devices.retain_templates(keep);
        self.devices.template_count()
    }
}
