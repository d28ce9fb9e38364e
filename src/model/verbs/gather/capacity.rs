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
use crate::model::inputs::objects::{Taint, Toleration};
use crate::model::inputs::resources::Resources;
use crate::model::messages;
use crate::model::notice::NoticeKind;
use crate::model::planning::planner::{GangPlan, GangShortfall};
use crate::model::rules::taint_toleration::tolerated;
use crate::model::table::GangTable;

/// The shape of one member, as the autoscaler is shown it: the element-wise largest request
/// of the members still waiting (so every one of them fits where one buffer pod fits), and the
/// node selector and tolerations of one of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberShape {
    /// Never muster's marker resource: it is not counted as a request (kube-scheduler
    /// ignores it; what nodes publish of it is only for NodeResourcesFit's queueing hint).
    pub requests: Resources,
    pub node_selector: Vec<(String, String)>,
    pub tolerations: std::sync::Arc<[Toleration]>,
}

/// What one NodePool may still add: its `spec.limits` less its `status.resources`, per
/// resource it limits (None: no limit on it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolRoom {
    pub name: String,
    pub cpu_milli: Option<i64>,
    pub memory: Option<i64>,
    /// The limits as written, for the message.
    pub cpu_limit: String,
    pub memory_limit: String,
    /// `spec.template.spec.requirements`: what its nodes' labels may be.
    pub requirements: Vec<PoolRequirement>,
    /// `spec.template.metadata.labels`: labels every node it adds has.
    pub labels: Vec<(String, String)>,
    /// `spec.template.spec.taints` that keep pods off (`NoSchedule`, `NoExecute`); its
    /// `startupTaints` go once a node is ready and are not here.
    pub taints: Vec<Taint>,
}

/// One requirement of a NodePool's node template (`key`, `operator`, `values`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolRequirement {
    pub key: String,
    pub operator: String,
    pub values: Vec<String>,
}

impl PoolRoom {
    /// Whether a node this pool adds could take a member of `shape`: every `nodeSelector`
    /// pair must be a label its nodes may have, and every taint its nodes carry must be
    /// tolerated; else why not, for the message. Karpenter's rule for labels (its scheduler's
    /// requirements, sigs.k8s.io/karpenter v1.15 `pkg/scheduling`): a label is given by the
    /// template's labels, or allowed by a requirement on its key; a key neither names is
    /// allowed only if it is one of the well-known labels the instance types give (zone,
    /// instance type, architecture…), which muster does not know, so those pass. Required node
    /// affinity is not judged here (a member it keeps off every pool's nodes is given up after
    /// `--capacity-buffer-timeout`).
    pub fn admits(&self, shape: &MemberShape) -> Result<(), String> {
        for (key, value) in &shape.node_selector {
            if let Some((_, v)) = self.labels.iter().find(|(k, _)| k == key) {
                if v != value {
                    return Err(format!(
                        "nodeSelector {key}={value}, but its nodes are labelled {key}={v}"
                    ));
                }
                continue;
            }
            if key == "karpenter.sh/nodepool" {
                if *value != self.name {
                    return Err(format!("nodeSelector {key}={value}"));
                }
                continue;
            }
            let on_key: Vec<&PoolRequirement> =
                self.requirements.iter().filter(|r| r.key == *key).collect();
            if on_key.is_empty() {
                if well_known(key) {
                    continue;
                }
                return Err(format!(
                    "nodeSelector {key}={value}, a label none of its requirements or template \
                     labels gives its nodes"
                ));
            }
            for r in on_key {
                let listed = r.values.iter().any(|v| v == value);
                let refused = match r.operator.as_str() {
                    "In" => !listed,
                    "NotIn" => listed,
                    "DoesNotExist" => true,
                    // Exists, Gt, Lt: allowed, or judged by instance types muster does not read.
                    _ => false,
                };
                if refused {
                    return Err(format!(
                        "nodeSelector {key}={value}, against its requirement {key} {} [{}]",
                        r.operator,
                        r.values.join(", ")
                    ));
                }
            }
        }
        if let Some(t) = self
            .taints
            .iter()
            .find(|t| !tolerated(&shape.tolerations, t))
        {
            let value = if t.value.is_empty() {
                String::new()
            } else {
                format!("={}", t.value)
            };
            return Err(format!(
                "its nodes' taint {}{value}:{}, which the members do not tolerate",
                t.key, t.effect
            ));
        }
        Ok(())
    }
}

/// A label the cloud provider's instance types give nodes (Kubernetes' own and Karpenter's
/// domains): muster cannot tell which values a pool's instance types offer, so it assumes any.
fn well_known(key: &str) -> bool {
    let domain = key.split_once('/').map_or("", |(d, _)| d);
    domain == "kubernetes.io"
        || domain.ends_with(".kubernetes.io")
        || domain == "k8s.io"
        || domain.ends_with(".k8s.io")
        || domain.contains("karpenter")
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
            gang.withdraw_room_ask();
            return None;
        };
        let replicas = quorum.saturating_sub(facts.with_nodes);
        let asked = gang.ask_for_room(now, replicas, quorum - fit, bound);
        Some(if asked.gave_up {
            messages::autoscaler_gave_up(key, fit, quorum, bound)
        } else if let Some(beyond) = &asked.beyond_pools {
            beyond.clone()
        } else {
            messages::autoscaler_asked(key, fit, quorum, replicas)
        })
    }

    /// Every gathered gang that waits, holding nothing, for room the autoscaler is asked for.
    pub fn capacity_asks(&self) -> Vec<CapacityAsk> {
        let mut asks = Vec::new();
        for (key, gang) in &self.gangs {
            let Some(asked) = gang
                .room_asked()
                .filter(|a| !a.gave_up && a.beyond_pools.is_none())
            else {
                continue;
            };
            if gang.is_admitted() || !self.is_gathered(gang) {
                continue;
            }
            let facts = self.facts(key);
            if self.is_placed(key, &facts) {
                continue;
            }
            // Members let through (for kube-scheduler's preemption) are kube-scheduler's: room
            // freed by evicting lower-priority pods needs no node.
            if self
                .pending_members(key)
                .iter()
                .any(|p| super::gather_gate_index(&p.info).is_none())
            {
                continue;
            }
            let Some(shape) = self.member_shape(key) else {
                continue;
            };
            asks.push(CapacityAsk {
                gang: key.clone(),
                replicas: asked.replicas,
                short: asked.short,
                shape,
            });
        }
        asks.sort_by(|a, b| a.gang.cmp(&b.gang));
        asks
    }

    /// The shape the autoscaler is shown for the gang's members (see [`MemberShape`]).
    fn member_shape(&self, key: &GangKey) -> Option<MemberShape> {
        let waiting = self.pending_members(key);
        let first = waiting.first()?;
        let mut requests = Resources::default();
        for p in &waiting {
            requests.max_with(&p.info.requests);
        }
        requests.pods = 0;
        Some(MemberShape {
            requests,
            node_selector: first.info.node_selector.clone(),
            tolerations: first.info.tolerations.clone(),
        })
    }

    /// Judges every gang waiting for room against what the cluster's NodePools may still add
    /// (read, never written): a gang no pool's nodes could take (its members' `nodeSelector`
    /// or tolerations, see [`PoolRoom::admits`]) is not asked for, and its members hear each
    /// pool's reason; a gang whose members short of room ask, together, for more CPU
    /// or memory than every pool's limit leaves is not asked for (nodes added up to a limit
    /// would hold part of it: wasted), and its members hear which limit stops it; one a pool
    /// holds again is asked for again. `pools` empty: nothing is judged (no NodePool is read:
    /// another autoscaler). A necessary condition only: nodes come whole, so a shortfall just
    /// under a pool's room may still need one node more than the limit allows.
    pub fn judge_against_pools(&mut self, pools: &[PoolRoom]) {
        if pools.is_empty() {
            return;
        }
        let keys: Vec<GangKey> = self
            .gangs
            .iter()
            .filter(|(_, g)| g.room_asked().is_some_and(|a| !a.gave_up))
            .filter(|(_, g)| !g.is_admitted())
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            let Some(shape) = self.member_shape(&key) else {
                continue;
            };
            let Some(short) = self
                .gangs
                .get(&key)
                .and_then(|g| g.room_asked())
                .map(|a| a.short)
            else {
                continue;
            };
            let need_cpu = shape.requests.cpu_milli * i64::from(short);
            let need_memory = shape.requests.memory * i64::from(short);
            let holds = |p: &PoolRoom| {
                p.cpu_milli.is_none_or(|room| need_cpu <= room)
                    && p.memory.is_none_or(|room| need_memory <= room)
            };
            let admitting: Vec<&PoolRoom> =
                pools.iter().filter(|p| p.admits(&shape).is_ok()).collect();
            let beyond = if admitting.is_empty() {
                let why: Vec<String> = pools
                    .iter()
                    .filter_map(|p| {
                        Some(format!("NodePool {}: {}", p.name, p.admits(&shape).err()?))
                    })
                    .collect();
                Some(messages::no_node_pool_admits(&key, short, &why))
            } else if admitting.iter().any(|p| holds(p)) {
                None
            } else {
                // The pool with the most CPU left names the limit.
                let best = admitting
                    .iter()
                    .max_by_key(|p| p.cpu_milli.unwrap_or(i64::MAX))
                    .expect("admitting is not empty");
                let (resource, need, room, limit) = match (best.cpu_milli, best.memory) {
                    (Some(room), _) if need_cpu > room => (
                        "cpu",
                        format!("{}m", need_cpu),
                        format!("{room}m"),
                        best.cpu_limit.clone(),
                    ),
                    (_, Some(room)) => (
                        "memory",
                        need_memory.to_string(),
                        room.to_string(),
                        best.memory_limit.clone(),
                    ),
                    _ => (
                        "cpu",
                        format!("{need_cpu}m"),
                        "0".into(),
                        best.cpu_limit.clone(),
                    ),
                };
                Some(messages::beyond_node_pools(
                    &key,
                    short,
                    resource,
                    &need,
                    &best.name,
                    &room,
                    &limit,
                    admitting.len(),
                ))
            };
            let judged_anew = self
                .gangs
                .get_mut(&key)
                .is_some_and(|g| g.judge_room_ask(beyond.clone()));
            if !judged_anew {
                continue;
            }
            if let Some(message) = beyond {
                self.tell(&key, NoticeKind::Waiting, &message, |p| p.is_pending());
                if let Some(g) = self.gangs.get_mut(&key) {
                    g.note_waiting(message);
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "capacity/tests.rs"]
mod tests;
