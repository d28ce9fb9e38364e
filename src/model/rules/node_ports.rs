//! kube-scheduler's NodePorts filter (`plugins/nodeports/node_ports.go`, v1.37.2): a pod that
//! asks for host ports fits a node only if none of them is in use there.
//!
//! - The ports a pod uses are `util.GetHostPorts`: every port with `hostPort > 0` of its
//!   containers and of its sidecars (init containers with `restartPolicy: Always`); other init
//!   containers do not run beside the pod's life and are skipped.
//! - A port is `(hostIP, protocol, hostPort)`; an empty hostIP is `0.0.0.0`, an empty protocol
//!   `TCP` (`HostPortInfo.sanitize`).
//! - `HostPortInfo.CheckConflict`: a wanted port on `0.0.0.0` conflicts with the same
//!   protocol and port on any IP; a wanted port on a given IP conflicts with the same protocol
//!   and port on that IP or on `0.0.0.0`.
//!
//! [`NodePorts`] is the PreFilter state: built once from the pods already on nodes, updated
//! with [`NodePorts::add`] as a simulation places pods (kube-scheduler's `NodeInfo.AddPod`), so
//! two members of one gang that need the same host port are never planned onto one node.
//!
//! Difference from kube-scheduler, on purpose: the ports in use are counted per pod, not kept
//! as a set, so a simulation's rollback of one of two pods using one port on a node (possible
//! only for pods bound by `spec.nodeName`) leaves the port in use; kube-scheduler's
//! `HostPortInfo.Remove` would free it. Succeeded and Failed pods are never counted, as
//! kube-scheduler's informer does not see them.

use rustc_hash::FxHashMap;

use super::Reason;
use crate::model::inputs::objects::{NodeInfo, PodInfo};
use crate::model::inputs::terms::{HostPort, ALL_HOST_IPS};

impl HostPort {
    /// `HostPortInfo.CheckConflict`, with `self` wanted and `used` in use on the node.
    pub fn conflicts_with(&self, used: &HostPort) -> bool {
        self.protocol == used.protocol
            && self.port == used.port
            && (self.ip == ALL_HOST_IPS || used.ip == ALL_HOST_IPS || self.ip == used.ip)
    }
}

/// The host ports `pod` uses.
pub fn host_ports(pod: &PodInfo) -> &[HostPort] {
    pod.rules.as_ref().map_or(&[], |r| &r.host_ports)
}

/// The pod's host ports, as a user reads them: `8080/TCP, 9090/UDP`.
pub fn describe(ports: &[HostPort]) -> String {
    ports
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// NodePorts' PreFilter state for one incoming pod: per node, how many pods use each of the
/// ports that could conflict with the pod's own (other ports are never looked at).
pub struct NodePorts<'a> {
    wanted: &'a [HostPort],
    used: FxHashMap<&'a str, Vec<(&'a HostPort, u32)>>,
}

impl<'a> NodePorts<'a> {
    /// The state for `pod`, from the pods on nodes (`on_nodes`; pods without host ports may be
    /// among them and are skipped at once).
    pub fn new(
        pod: &'a PodInfo,
        on_nodes: impl IntoIterator<Item = (&'a NodeInfo, &'a PodInfo)>,
    ) -> Self {
        let mut state = NodePorts {
            wanted: host_ports(pod),
            used: FxHashMap::default(),
        };
        if !state.wanted.is_empty() {
            for (node, p) in on_nodes {
                state.add(node, p);
            }
        }
        state
    }

    /// `placed` now runs on `node`.
    pub fn add(&mut self, node: &'a NodeInfo, placed: &'a PodInfo) {
        self.update(node, placed, true);
    }

    /// `gone` no longer runs on `node`.
    pub fn remove(&mut self, node: &'a NodeInfo, gone: &'a PodInfo) {
        self.update(node, gone, false);
    }

    fn update(&mut self, node: &'a NodeInfo, pod: &'a PodInfo, add: bool) {
        if self.wanted.is_empty() || pod.terminal {
            return;
        }
        for port in host_ports(pod) {
            if !self.wanted.iter().any(|w| w.conflicts_with(port)) {
                continue;
            }
            let list = self.used.entry(&node.name).or_default();
            match list.iter_mut().find(|(p, _)| *p == port) {
                Some((_, n)) if add => *n += 1,
                Some((_, n)) => *n = n.saturating_sub(1),
                None if add => list.push((port, 1)),
                None => {}
            }
            list.retain(|(_, n)| *n > 0);
        }
    }

    /// kube-scheduler's `Filter`: no wanted port conflicts with one in use on `node`.
    pub fn check(&self, node: &NodeInfo) -> Result<(), Reason> {
        let Some(used) = self.used.get(&*node.name) else {
            return Ok(());
        };
        let conflict = self
            .wanted
            .iter()
            .any(|w| used.iter().any(|(u, _)| w.conflicts_with(u)));
        if conflict {
            Err(Reason::NodePorts)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests;
