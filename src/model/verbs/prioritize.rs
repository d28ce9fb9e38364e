//! The prioritize verb: scores that keep a member on its seat, pull a gang together and pack
//! tightly; a later member of a gang with a preferred topology, into the nearest domain.

use std::sync::Arc;

use crate::model::inputs::objects::{NodeInfo, PodInfo};
use crate::model::inputs::topology::Topology;
use crate::model::planning::domains::domain_of;
use crate::model::table::GangTable;

impl GangTable {
    /// Scores 0..=10 for each candidate (same order). A member's seated node scores 10; then
    /// nodes and zones already holding its gang, then tight packing.
    ///
    /// A member of a gang with `topology-preferred` levels whose members already have nodes
    /// (a replacement, an elastic member beyond the quorum) scores by nearness alone: a node in
    /// a domain of the narrowest level the gang uses scores 10, else one in a domain the gang
    /// uses at the next level (the same block) less, down to 0 for a node in none of them
    /// (`10 × (levels − k) / levels` at level `k`, from 0). Filter still offers every node with
    /// room: locality never makes a preferred gang's member wait.
    pub fn prioritize(&self, pod: &PodInfo, candidates: &[&str]) -> Vec<i64> {
        let gang = pod.gang().and_then(|m| self.gangs.get(&m.gang));
        let own_seat = gang
            .and_then(|g| g.seat_of(&pod.uid))
            .map(|s| s.node.clone());
        let mut gang_nodes: Vec<&str> = Vec::new();
        let mut gang_zones: Vec<&str> = Vec::new();
        if let Some(g) = gang {
            let member_nodes = self
                .members_of(g)
                .filter_map(|p| p.charged_node())
                .chain(g.seats().values().map(|s| &s.node));
            for n in member_nodes {
                if !gang_nodes.contains(&&**n) {
                    gang_nodes.push(n);
                    if let Some(z) = self.ledger.get(n).and_then(|e| e.zone()) {
                        if !gang_zones.contains(&z) {
                            gang_zones.push(z);
                        }
                    }
                }
            }
        }
        let preferred = gang.and_then(|g| match g.spec().topology.constraint() {
            Some(c) => match &c.topology {
                Topology::Preferred(levels) => Nearness::of(self, levels, &gang_nodes),
                Topology::Required(_) => None,
            },
            None => None,
        });
        candidates
            .iter()
            .map(|name| {
                let Some(i) = self.ledger.position(name) else {
                    return 0;
                };
                if own_seat.as_deref() == Some(*name) {
                    return 10;
                }
                if let Some(near) = &preferred {
                    return near.score(self.ledger.at(i).info());
                }
                let packing = self.ledger.packing_score(i, &pod.requests);
                if gang.is_none() {
                    return (packing * 10.0).round() as i64;
                }
                let mut score = packing * 5.0;
                if gang_nodes.contains(name) {
                    score += 3.0;
                }
                if self
                    .ledger
                    .at(i)
                    .zone()
                    .is_some_and(|z| gang_zones.contains(&z))
                {
                    score += 2.0;
                }
                (score.round() as i64).clamp(0, 10)
            })
            .collect()
    }
}

/// The domains a gang with preferred topology levels uses, per level from the narrowest (also
/// the filter's choice among nodes with room for such a gang's member).
pub(in crate::model) struct Nearness<'a> {
    levels: &'a [Arc<str>],
    used: Vec<Vec<&'a str>>,
}

impl<'a> Nearness<'a> {
    /// `None` while the gang's nodes are in no domain of any level.
    pub(in crate::model) fn of(
        table: &'a GangTable,
        levels: &'a [Arc<str>],
        gang_nodes: &[&str],
    ) -> Option<Self> {
        let used: Vec<Vec<&str>> = levels
            .iter()
            .map(|label| {
                let mut values: Vec<&str> = gang_nodes
                    .iter()
                    .filter_map(|n| table.ledger.get(n))
                    .filter_map(|e| domain_of(e.info(), label))
                    .collect();
                values.sort_unstable();
                values.dedup();
                values
            })
            .collect();
        used.iter()
            .any(|v| !v.is_empty())
            .then_some(Nearness { levels, used })
    }

    /// `10 × (levels − k) / levels` for the narrowest level `k` at which `node` is in a domain
    /// the gang uses; 0 when in none.
    pub(in crate::model) fn score(&self, node: &NodeInfo) -> i64 {
        let nearest = self
            .levels
            .iter()
            .zip(&self.used)
            .position(|(label, values)| {
                domain_of(node, label).is_some_and(|v| values.contains(&v))
            });
        let n = self.levels.len() as i64;
        nearest.map_or(0, |k| 10 * (n - k as i64) / n)
    }
}
