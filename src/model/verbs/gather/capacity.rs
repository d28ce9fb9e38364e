//! Room asked of the cluster autoscaler for a gathered gang (`--capacity-buffers`): the
//! decision; `cluster::capacity` writes it as a CapacityBuffer.
//!
//! Autoscalers add nodes for pods kube-scheduler marked unschedulable and ignore gated ones,
//! so a gang behind muster's gate waiting for nodes that do not exist would wait forever on an
//! autoscaled cluster; letting its members through one by one would have nodes added for part
//! of it. Instead, while the gang stays gated and holds nothing, muster asks the autoscaler for
//! room for the whole gang at once: one CapacityBuffer of the members its quorum still needs a
//! node for, each of the members' shape (Karpenter's `CapacityBuffer` feature: it simulates
//! the buffer's replicas as pods, on the room free on the nodes that exist first, and launches
//! nodes for the rest, in one batch). Asked only when room alone stops the gang (no rule, no
//! member missing: nodes added for a gang a rule keeps off them would be wasted), and only for
//! [`ModelConfig::capacity_buffers`]: past it the gang is told the nodes did not come, and
//! the buffer goes. The buffer goes as soon as the gang fits (it is admitted and its seats
//! published), is deleted, or stops waiting for room alone, so no standing capacity is kept
//! for it (holds-nothing, in the autoscaler too). Each waiting gang has its own buffer: the
//! autoscaler simulates every buffer's pods together, so two gangs never count the same room.
//!
//! [`ModelConfig::capacity_buffers`]: crate::model::inputs::config::ModelConfig::capacity_buffers

use std::time::Instant;

use crate::model::inputs::membership::GangKey;
use crate::model::inputs::objects::Toleration;
use crate::model::inputs::resources::Resources;
use crate::model::messages;
use crate::model::planning::planner::{GangPlan, GangShortfall};
use crate::model::table::gang::RoomAsked;
use crate::model::table::GangTable;

/// The shape of one member, as the autoscaler is shown it: the element-wise largest request
/// of the members still waiting (so every one of them fits where one buffer pod fits), and the
/// node selector and tolerations of one of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberShape {
    /// Never muster's marker resource: it is not counted as a request (no node has it).
    pub requests: Resources,
    pub node_selector: Vec<(String, String)>,
    pub tolerations: Vec<Toleration>,
}

/// One gang's request to the autoscaler (`cluster::capacity` writes it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapacityAsk {
    pub gang: GangKey,
    pub replicas: u32,
    pub short: u32,
    pub shape: MemberShape,
}

impl GangTable {
    /// Notes what the gathered gang's latest plan means for the autoscaler: short of room
    /// alone, with every member there, it is asked for (or keeps being asked, until the bound
    /// passes); anything else withdraws the ask. Returns the waiting message to tell instead of
    /// the plan's own, while an ask stands or once it was given up.
    pub(super) fn note_room_asked(
        &mut self,
        key: &GangKey,
        plan: &GangPlan,
        now: Instant,
    ) -> Option<String> {
        let bound = self.config.capacity_buffers;
        let short = match plan {
            GangPlan::DoesNotFit(GangShortfall::Room {
                fit,
                quorum,
                missing: 0,
                rule: None,
                task: None,
            }) if fit < quorum => Some((*fit, *quorum)),
            _ => None,
        };
        let facts = self.facts(key);
        let gang = self.gangs.get_mut(key)?;
        let (Some(bound), Some((fit, quorum))) = (bound, short) else {
            gang.room_asked = None;
            return None;
        };
        let replicas = quorum.saturating_sub(facts.with_nodes);
        let asked = gang.room_asked.get_or_insert(RoomAsked {
            since: now,
            replicas,
            short: quorum - fit,
            gave_up: false,
        });
        asked.replicas = replicas;
        asked.short = quorum - fit;
        if !asked.gave_up && now.saturating_duration_since(asked.since) >= bound {
            asked.gave_up = true;
        }
        Some(if asked.gave_up {
            messages::autoscaler_gave_up(key, fit, quorum, bound)
        } else {
            messages::autoscaler_asked(key, fit, quorum, replicas)
        })
    }

    /// Every gathered gang that waits, holding nothing, for room the autoscaler is asked for.
    pub fn capacity_asks(&self) -> Vec<CapacityAsk> {
        let mut asks = Vec::new();
        for (key, gang) in &self.gangs {
            let Some(asked) = gang.room_asked.as_ref().filter(|a| !a.gave_up) else {
                continue;
            };
            if gang.is_admitted() || !self.is_gathered(gang) {
                continue;
            }
            let facts = self.facts(key);
            if self.is_placed(key, &facts) {
                continue;
            }
            let waiting = self.pending_members(key);
            let Some(first) = waiting.first() else {
                continue;
            };
            let mut requests = Resources::default();
            for p in &waiting {
                requests = largest(&requests, &p.info.requests);
            }
            requests.pods = 0;
            asks.push(CapacityAsk {
                gang: key.clone(),
                replicas: asked.replicas,
                short: asked.short,
                shape: MemberShape {
                    requests,
                    node_selector: first.info.node_selector.clone(),
                    tolerations: first.info.tolerations.clone(),
                },
            });
        }
        asks.sort_by(|a, b| a.gang.cmp(&b.gang));
        asks
    }
}

/// The element-wise largest of two requests.
fn largest(a: &Resources, b: &Resources) -> Resources {
    let mut extended = a.extended.clone();
    for (name, amount) in &b.extended {
        match extended.iter_mut().find(|(n, _)| n == name) {
            Some((_, have)) => *have = (*have).max(*amount),
            None => extended.push((name.clone(), *amount)),
        }
    }
    extended.sort_by(|x, y| x.0.cmp(&y.0));
    Resources {
        cpu_milli: a.cpu_milli.max(b.cpu_milli),
        memory: a.memory.max(b.memory),
        ephemeral_storage: a.ephemeral_storage.max(b.ephemeral_storage),
        pods: a.pods.max(b.pods),
        extended,
    }
}

#[cfg(test)]
#[path = "capacity/tests.rs"]
mod tests;
