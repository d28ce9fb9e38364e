//! The topology workload (`E2E_WORKLOAD=topology`): the same pods and gangs, on nodes labelled
//! into racks and blocks, and every gang asking to be close together. Even-numbered gangs carry
//! `muster.dev/topology-required: topology.kubernetes.io/rack` (and, in the native
//! configuration, their PodGroup `spec.schedulingConstraints.topology[0].key` names the same
//! label, with the `TopologyAwareWorkloadScheduling` gate on); odd-numbered gangs carry
//! `muster.dev/topology-preferred: topology.kubernetes.io/rack,topology.kubernetes.io/block`
//! (Kubernetes' PodGroup has no preferred form: the native configuration leaves them
//! unconstrained). The report gives, per configuration, the share of whole gangs placed within
//! one rack (and, for preferred gangs, within one block).
//!
//! Nodes `node-<i>`: rack `i / E2E_RACK_NODES` (8), block `rack / E2E_BLOCK_RACKS` (4).

use anyhow::{bail, Result};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1beta1::{PodGroupSchedulingConstraints, TopologyConstraint};
use muster_harness::k8s::{self, NodeShape, PodBuilder};

use crate::params::env_or;
use crate::result::RunResult;
use crate::workload::Workload;

pub const RACK: &str = "topology.kubernetes.io/rack";
pub const BLOCK: &str = "topology.kubernetes.io/block";
/// The gate of Kubernetes' topology-aware PodGroup scheduling (KEP-5732, alpha in 1.36).
pub const NATIVE_GATE: &str = "TopologyAwareWorkloadScheduling=true";

/// How nodes are grouped into racks and blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub rack_nodes: usize,
    pub block_racks: usize,
}

impl Layout {
    /// `E2E_WORKLOAD`: empty or `mixed` (the default workload) → `None`; `topology` → racks of
    /// `E2E_RACK_NODES` nodes, blocks of `E2E_BLOCK_RACKS` racks. Anything else is refused.
    pub fn from_env() -> Result<Option<Self>> {
        let workload = std::env::var("E2E_WORKLOAD").unwrap_or_default();
        match workload.trim() {
            "" | "mixed" | "dra" | "autoscaled" => Ok(None),
            "topology" => {
                let l = Layout {
                    rack_nodes: env_or("E2E_RACK_NODES", 8)?,
                    block_racks: env_or("E2E_BLOCK_RACKS", 4)?,
                };
                if l.rack_nodes == 0 || l.block_racks == 0 {
                    bail!("E2E_RACK_NODES and E2E_BLOCK_RACKS must be at least 1, got {l:?}");
                }
                Ok(Some(l))
            }
            other => {
                bail!("E2E_WORKLOAD must be mixed, topology, dra or autoscaled, got {other:?}")
            }
        }
    }

    fn rack(&self, node: usize) -> usize {
        node / self.rack_nodes
    }

    fn block(&self, node: usize) -> usize {
        self.rack(node) / self.block_racks
    }

    /// Node `i`'s rack and block labels.
    pub fn label(&self, i: usize, shape: NodeShape) -> NodeShape {
        shape
            .label(RACK, &format!("rack-{:03}", self.rack(i)))
            .label(BLOCK, &format!("block-{:02}", self.block(i)))
    }

    /// Gang `g`'s members' topology key.
    pub fn annotate(&self, g: usize, b: PodBuilder) -> PodBuilder {
        if required(g) {
            b.annotation("muster.dev/topology-required", RACK)
        } else {
            b.annotation("muster.dev/topology-preferred", &format!("{RACK},{BLOCK}"))
        }
    }

    /// Gang `g`'s PodGroup constraint in the native configuration (required gangs only).
    pub fn pod_group_constraints(&self, g: usize) -> Option<PodGroupSchedulingConstraints> {
        required(g).then(|| PodGroupSchedulingConstraints {
            topology: Some(vec![TopologyConstraint { key: RACK.into() }]),
        })
    }
}

/// Turns the topology gate on in every `--feature-gates=` argument of `args`.
pub fn with_native_gate(args: &mut [String]) {
    for a in args
        .iter_mut()
        .filter(|a| a.starts_with("--feature-gates="))
    {
        a.push(',');
        a.push_str(NATIVE_GATE);
    }
}

fn required(g: usize) -> bool {
    g.is_multiple_of(2)
}

/// Of the gangs bound whole: how many, and how many within one rack / one block.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Within {
    pub whole: usize,
    pub one_rack: usize,
    pub one_block: usize,
}

/// Required and preferred gangs, counted apart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Share {
    pub required: Within,
    pub preferred: Within,
}

/// Counts, from the pods' nodes (`node-<i>`), the gangs of `w` bound whole within one domain.
pub fn share(l: &Layout, w: &Workload, pods: &[Pod]) -> Share {
    let node_of: std::collections::HashMap<&str, usize> = pods
        .iter()
        .filter_map(|p| {
            let n = k8s::pod_node(p)?.strip_prefix("node-")?.parse().ok()?;
            Some((k8s::pod_name(p), n))
        })
        .collect();
    let mut s = Share::default();
    for (g, gang) in w.gangs.iter().enumerate() {
        let nodes: Option<Vec<usize>> = gang
            .members
            .iter()
            .map(|&m| node_of.get(w.pods[m].name.as_str()).copied())
            .collect();
        let Some(nodes) = nodes else {
            continue;
        };
        let within = if required(g) {
            &mut s.required
        } else {
            &mut s.preferred
        };
        within.whole += 1;
        let one = |f: &dyn Fn(usize) -> usize| nodes.iter().all(|&n| f(n) == f(nodes[0]));
        if one(&|n| l.rack(n)) {
            within.one_rack += 1;
        }
        if one(&|n| l.block(n)) {
            within.one_block += 1;
        }
    }
    s
}

/// The report's topology table: per configuration, the share of whole gangs in one domain.
pub fn report_section(l: &Layout, w: &Workload, results: &[RunResult]) -> String {
    use std::fmt::Write;
    let required = (0..w.gangs.len()).filter(|&g| required(g)).count();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## Topology (`E2E_WORKLOAD=topology`)\n\nRacks of {} nodes (`{RACK}`), blocks of {} \
         racks (`{BLOCK}`). {required} gangs (the even-numbered) carry \
         `muster.dev/topology-required: {RACK}` (native: their PodGroup's \
         `spec.schedulingConstraints.topology[0].key`, gate `{NATIVE_GATE}`), the other {} \
         `muster.dev/topology-preferred: {RACK},{BLOCK}` (native: no preferred form, \
         unconstrained). Of the gangs bound whole:\n",
        l.rack_nodes,
        l.block_racks,
        w.gangs.len() - required
    );
    let _ = writeln!(
        s,
        "| configuration | required: in one rack | preferred: in one rack | preferred: in one block |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|");
    for r in results {
        let Some(t) = &r.topology else {
            continue;
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            r.mode.title(),
            ratio(t.required.one_rack, t.required.whole),
            ratio(t.preferred.one_rack, t.preferred.whole),
            ratio(t.preferred.one_block, t.preferred.whole)
        );
    }
    s.push('\n');
    s
}

/// "a of b (p %)".
pub fn ratio(a: usize, b: usize) -> String {
    if b == 0 {
        return "–".into();
    }
    format!("{a} of {b} ({:.0} %)", 100.0 * a as f64 / b as f64)
}

#[cfg(test)]
#[allow(dead_code, unused_imports)]
mod tests {
    use super::*;
    use crate::workload::{GangPlan, PodPlan};

    #[test]
    fn racks_and_blocks_follow_the_node_index() {
        let l = Layout {
            rack_nodes: 8,
            block_racks: 4,
        };
        assert_eq!(
            (l.rack(7), l.rack(8), l.block(31), l.block(32)),
            (0, 1, 0, 1)
        );
    }

    #[test]
    fn a_gang_counts_within_a_domain_only_when_every_member_is_there() {
        let l = Layout {
            rack_nodes: 2,
            block_racks: 2,
        };
        let pod = |name: &str, gang| PodPlan {
            name: name.into(),
            gang: Some(gang),
            cpu_milli: 100,
        };
        let w = Workload {
            pods: vec![pod("a0", 0), pod("a1", 0), pod("b0", 1), pod("b1", 1)],
            gangs: vec![
                GangPlan {
                    name: "a".into(),
                    members: vec![0, 1],
                },
                GangPlan {
                    name: "b".into(),
                    members: vec![2, 3],
                },
            ],
            order: vec![0, 1, 2, 3],
            topology: Some(l),
            dra: None,
        };
        let bound = |name: &str, node: usize| {
            let mut p = PodBuilder::new("bench", name).build();
            p.spec.as_mut().unwrap().node_name = Some(format!("node-{node:04}"));
            p
        };
        // a: nodes 0 and 1 (rack 0); b: nodes 1 and 2 (racks 0 and 1, block 0).
        let pods = vec![
            bound("a0", 0),
            bound("a1", 1),
            bound("b0", 1),
            bound("b1", 2),
        ];
        let s = share(&l, &w, &pods);
        assert_eq!(
            s.required,
            Within {
                whole: 1,
                one_rack: 1,
                one_block: 1
            }
        );
        assert_eq!(
            s.preferred,
            Within {
                whole: 1,
                one_rack: 0,
                one_block: 1
            }
        );
        // A gang not bound whole is not counted.
        let s = share(&l, &w, &pods[..3]);
        assert_eq!(s.preferred.whole, 0);
    }
}
