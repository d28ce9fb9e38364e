//! The pod index: every pod muster knows, by UID, and the node muster assumed for the ones it
//! is binding.
//!
//! A pod is *bound* when the API server says so (`spec.nodeName`), *assumed* when muster has
//! decided to bind it and the watch has not confirmed it yet; both count as "has a node".

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::model::inputs::objects::{NodeName, PodInfo, PodUid};
use crate::model::inputs::resources::Resources;

pub struct PodEntry {
    pub info: PodInfo,
    /// Node muster bound (or is binding) the pod to, until the watch shows `spec.nodeName`.
    assumed: Option<NodeName>,
}

impl PodEntry {
    /// The node the pod is on or going to: bound, else assumed.
    pub fn node(&self) -> Option<&NodeName> {
        self.info.node_name.as_ref().or(self.assumed.as_ref())
    }

    pub fn assumed(&self) -> Option<&NodeName> {
        self.assumed.as_ref()
    }

    /// The node whose capacity this pod consumes, if any: finished pods consume none.
    pub fn charged_node(&self) -> Option<&NodeName> {
        if self.info.terminal {
            None
        } else {
            self.node()
        }
    }

    /// Neither finished nor being deleted: the only members that count toward a quorum. A
    /// terminating pod still uses its node's room until it is gone, but holds nothing new.
    pub fn is_live(&self) -> bool {
        !self.info.terminal && !self.info.terminating
    }

    /// Still needs a node: live, not bound or assumed, and readable keys.
    pub fn is_pending(&self) -> bool {
        self.is_live() && self.node().is_none() && self.info.membership.is_ok()
    }
}

/// What the ledger must be told after a change to the index: the requests to take off one node
/// and to put on another.
#[derive(Debug, Default, PartialEq)]
pub struct Charges {
    pub uncharge: Option<(NodeName, Resources)>,
    pub charge: Option<(NodeName, Resources)>,
}

#[derive(Default)]
pub struct PodIndex {
    pods: HashMap<PodUid, PodEntry>,
    /// Pods with required pod anti-affinity: the only pods a simulation of members without
    /// (anti-)affinity terms or spread constraints of their own must read (kube-scheduler's
    /// `HavePodsWithRequiredAntiAffinityList`), so it never walks every pod.
    with_anti_affinity: HashSet<PodUid>,
    /// Pods using host ports: all the NodePorts rule of a simulation reads.
    with_host_ports: HashSet<PodUid>,
}

impl PodIndex {
    pub fn len(&self) -> usize {
        self.pods.len()
    }

    pub fn get(&self, uid: &str) -> Option<&PodEntry> {
        self.pods.get(uid)
    }

    /// Every pod, in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = &PodEntry> {
        self.pods.values()
    }

    pub fn uids(&self) -> impl Iterator<Item = &PodUid> {
        self.pods.keys()
    }

    pub fn iter(&self) -> impl Iterator<Item = &PodEntry> {
        self.pods.values()
    }

    /// The pods with required pod anti-affinity terms.
    pub fn with_anti_affinity(&self) -> impl Iterator<Item = &PodEntry> {
        self.with_anti_affinity
            .iter()
            .filter_map(|u| self.pods.get(u))
    }

    /// The pods using host ports.
    pub fn with_host_ports(&self) -> impl Iterator<Item = &PodEntry> {
        self.with_host_ports.iter().filter_map(|u| self.pods.get(u))
    }

    /// Stores what the watch says about a pod. What muster assumed survives an update until
    /// the API server names a node itself. Returns the previous entry (if any) and the charges.
    pub fn apply(&mut self, info: PodInfo) -> (Option<PodInfo>, Charges) {
        let old = self.pods.remove(&info.uid);
        let mut charges = Charges::default();
        let mut assumed = None;
        if let Some(old) = &old {
            charges.uncharge = charged(old);
            // The API server's nodeName supersedes what muster assumed.
            if info.node_name.is_none() {
                assumed = old.assumed.clone();
            }
        }
        let entry = PodEntry { info, assumed };
        charges.charge = charged(&entry);
        if has_anti_affinity(&entry.info) {
            self.with_anti_affinity.insert(entry.info.uid.clone());
        } else {
            self.with_anti_affinity.remove(&entry.info.uid);
        }
        if has_host_ports(&entry.info) {
            self.with_host_ports.insert(entry.info.uid.clone());
        } else {
            self.with_host_ports.remove(&entry.info.uid);
        }
        self.pods.insert(entry.info.uid.clone(), entry);
        (old.map(|o| o.info), charges)
    }

    /// Forgets a pod; returns it and the requests to take off its node.
    pub fn remove(&mut self, uid: &str) -> Option<(PodInfo, Option<(NodeName, Resources)>)> {
        let entry = self.pods.remove(uid)?;
        self.with_anti_affinity.remove(uid);
        self.with_host_ports.remove(uid);
        let uncharge = charged(&entry);
        Some((entry.info, uncharge))
    }

    /// muster is binding the pod to `node`; returns the requests to put on it.
    pub fn assume(&mut self, uid: &str, node: NodeName) -> Option<(NodeName, Resources)> {
        let entry = self.pods.get_mut(uid)?;
        entry.assumed = Some(node);
        charged(entry)
    }

    /// muster's binding to `node` failed: the pod has no node again. Returns the requests to
    /// take off the node, if the pod was assumed there.
    pub fn unassume(&mut self, uid: &str, node: &NodeName) -> Option<(NodeName, Resources)> {
        let entry = self.pods.get_mut(uid)?;
        if entry.assumed.as_ref() != Some(node) {
            return None;
        }
        let uncharge = charged(entry);
        entry.assumed = None;
        uncharge
    }
}

fn has_anti_affinity(info: &PodInfo) -> bool {
    info.rules
        .as_ref()
        .is_some_and(|r| !r.anti_affinity.is_empty())
}

pub(in crate::model) fn has_host_ports(info: &PodInfo) -> bool {
    info.rules
        .as_ref()
        .is_some_and(|r| !r.host_ports.is_empty())
}

fn charged(entry: &PodEntry) -> Option<(NodeName, Resources)> {
    entry
        .charged_node()
        .map(|n| (n.clone(), entry.info.requests.clone()))
}

#[cfg(test)]
mod tests;
