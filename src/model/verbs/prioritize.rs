//! The prioritize verb: scores that keep a member on its seat, pull a gang together and pack
//! tightly.

use crate::model::inputs::objects::PodInfo;
use crate::model::table::GangTable;

impl GangTable {
    /// Scores 0..=10 for each candidate (same order). A member's seated node scores 10; then
    /// nodes and zones already holding its gang, then tight packing.
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
        candidates
            .iter()
            .map(|name| {
                let Some(i) = self.ledger.position(name) else {
                    return 0;
                };
                if own_seat.as_deref() == Some(*name) {
                    return 10;
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
