//! Why a node was refused, in kube-scheduler's own words, and the counts that explain a
//! refusal to a user ("0/5 nodes are available: 3 node(s) didn't match pod anti-affinity
//! rules, 2 node(s) had untolerated taint(s).").

use std::fmt;

/// One filter's refusal. Cheap to copy: a simulation produces one per node it rejects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    SchedulingGated,
    NodeUnschedulable,
    UntoleratedTaint,
    NodeAffinity,
    NodePorts,
    /// Not decided here (the capacity ledger decides it); listed so one [`Diagnosis`] can
    /// count every reason a node was refused.
    InsufficientResources,
    SpreadMissingLabel,
    SpreadSkew,
    PodAffinity,
    PodAntiAffinity,
    ExistingPodsAntiAffinity,
    /// The member's ResourceClaims cannot all be allocated on the node.
    DynamicResources,
}

impl Reason {
    const ALL: [Reason; 12] = [
        Reason::SchedulingGated,
        Reason::NodeUnschedulable,
        Reason::UntoleratedTaint,
        Reason::NodeAffinity,
        Reason::NodePorts,
        Reason::InsufficientResources,
        Reason::SpreadMissingLabel,
        Reason::SpreadSkew,
        Reason::PodAffinity,
        Reason::PodAntiAffinity,
        Reason::ExistingPodsAntiAffinity,
        Reason::DynamicResources,
    ];

    /// The kube-scheduler plugin whose rule this is.
    pub fn plugin(self) -> &'static str {
        match self {
            Reason::SchedulingGated => "SchedulingGates",
            Reason::NodeUnschedulable => "NodeUnschedulable",
            Reason::UntoleratedTaint => "TaintToleration",
            Reason::NodeAffinity => "NodeAffinity",
            Reason::NodePorts => "NodePorts",
            Reason::InsufficientResources => "NodeResourcesFit",
            Reason::SpreadMissingLabel | Reason::SpreadSkew => "PodTopologySpread",
            Reason::PodAffinity | Reason::PodAntiAffinity | Reason::ExistingPodsAntiAffinity => {
                "InterPodAffinity"
            }
            Reason::DynamicResources => "DynamicResources",
        }
    }

    /// The plugin's message for a refused node (its `ErrReason…` constant).
    pub fn message(self) -> &'static str {
        match self {
            Reason::SchedulingGated => "pod(s) waiting for scheduling gates",
            Reason::NodeUnschedulable => "node(s) were unschedulable",
            Reason::UntoleratedTaint => "node(s) had untolerated taint(s)",
            Reason::NodeAffinity => "node(s) didn't match Pod's node affinity/selector",
            Reason::NodePorts => "node(s) didn't have free ports for the requested pod ports",
            Reason::InsufficientResources => "node(s) didn't have enough room",
            Reason::SpreadMissingLabel => {
                "node(s) didn't match pod topology spread constraints (missing required label)"
            }
            Reason::SpreadSkew => "node(s) didn't match pod topology spread constraints",
            Reason::PodAffinity => "node(s) didn't match pod affinity rules",
            Reason::PodAntiAffinity => "node(s) didn't match pod anti-affinity rules",
            Reason::ExistingPodsAntiAffinity => {
                "node(s) didn't satisfy existing pods anti-affinity rules"
            }
            Reason::DynamicResources => "cannot allocate all claims",
        }
    }

    /// Rules that no placement of other pods can change.
    pub fn is_static(self) -> bool {
        matches!(
            self,
            Reason::SchedulingGated
                | Reason::NodeUnschedulable
                | Reason::UntoleratedTaint
                | Reason::NodeAffinity
        )
    }

    fn index(self) -> usize {
        Reason::ALL
            .iter()
            .position(|r| *r == self)
            .expect("every reason is listed")
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

/// How many nodes each reason refused, for one pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diagnosis {
    nodes: u32,
    refused: [u32; Reason::ALL.len()],
}

impl Diagnosis {
    /// Records the verdict on one node.
    pub fn record(&mut self, verdict: Result<(), Reason>) {
        self.nodes += 1;
        if let Err(r) = verdict {
            self.refused[r.index()] += 1;
        }
    }

    pub fn nodes(&self) -> u32 {
        self.nodes
    }

    pub fn refused_by(&self, reason: Reason) -> u32 {
        self.refused[reason.index()]
    }

    /// Nodes no static rule refused: where the pod could go if other pods were elsewhere.
    pub fn statically_possible(&self) -> u32 {
        self.nodes
            - Reason::ALL
                .iter()
                .filter(|r| r.is_static())
                .map(|r| self.refused_by(*r))
                .sum::<u32>()
    }

    pub fn available(&self) -> u32 {
        self.nodes - self.refused.iter().sum::<u32>()
    }
}

impl fmt::Display for Diagnosis {
    /// `0/5 nodes are available: 2 node(s) had untolerated taint(s), 3 node(s) didn't match
    /// pod anti-affinity rules.` — kube-scheduler's format, reasons sorted by text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{} nodes are available", self.available(), self.nodes)?;
        let mut parts: Vec<String> = Reason::ALL
            .iter()
            .filter(|r| self.refused_by(**r) > 0)
            .map(|r| format!("{} {}", self.refused_by(*r), r.message()))
            .collect();
        parts.sort();
        if !parts.is_empty() {
            write!(f, ": {}", parts.join(", "))?;
        }
        f.write_str(".")
    }
}

#[cfg(test)]
mod tests;
