//! Read-only views of the table: the `/gangs` endpoint and the gauges of `/metrics`.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

use crate::model::inputs::membership::GangKey;
use crate::model::inputs::objects::PodPhase;
use crate::model::inputs::spec::SpecSource;
use crate::model::inputs::topology::GangTopology;
use crate::model::planning::domains::domain_of;
use crate::model::planning::selection::task_of;
use crate::model::table::gang::{Gang, Phase};
use crate::model::table::GangTable;

/// A gang's state as users see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GangState {
    /// Holds nothing; members are tried as they come.
    Waiting,
    /// Holds seats for its quorum, waiting for the rest of its members' bind calls.
    Admitted,
    /// Refused for a while after a timeout.
    Backoff,
    /// Quorum reached; later members bind at once.
    Placed,
}

impl GangState {
    pub fn as_str(self) -> &'static str {
        match self {
            GangState::Waiting => "waiting",
            GangState::Admitted => "admitted",
            GangState::Backoff => "backoff",
            GangState::Placed => "placed",
        }
    }
}

/// A member's state as users see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MemberState {
    Bound,
    /// muster is creating its binding.
    Binding,
    /// Holds a confirmed seat (its bind call came).
    Seated,
    /// Holds a seat where the plan put it (its bind call has not come yet).
    Planned,
    /// Holds nothing.
    Pending,
    /// Room held for a member not created yet.
    Held,
}

impl MemberState {
    pub fn as_str(self) -> &'static str {
        match self {
            MemberState::Bound => "bound",
            MemberState::Binding => "binding",
            MemberState::Seated => "seated",
            MemberState::Planned => "planned",
            MemberState::Pending => "pending",
            MemberState::Held => "held",
        }
    }
}

/// Read-only description of one gang for the `/gangs` endpoint.
#[derive(Clone, Debug, Serialize)]
pub struct GangView {
    pub namespace: String,
    pub name: String,
    pub state: GangState,
    pub quorum: u32,
    /// Where the quorum and the per-task minimums came from.
    pub spec_source: SpecSourceView,
    /// Per task (named by a minimum or by a live member): members present, placed, minimum.
    pub tasks: Vec<TaskView>,
    pub members_with_nodes: u32,
    /// Live members (not finished, not being deleted).
    pub members_live: u32,
    /// Members by `status.phase`, as PodGroup statuses count them.
    pub running: u32,
    pub succeeded: u32,
    pub failed: u32,
    /// Seconds since the epoch of the oldest member's `creationTimestamp` (the gang's age).
    pub created: i64,
    pub members: Vec<MemberView>,
    /// Why the gang waits, in the words of its last refusal.
    pub waiting_reason: Option<String>,
    /// Members without the marker resource bypass muster (deploy/gang-admission-policy.yaml
    /// missing when they were created); absent when every member is marked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub marker_warning: Option<String>,
    /// The gang was found partly bound when muster started deciding: what was done (room held
    /// for the rest, or its bound members evicted or left running, and why); absent otherwise
    /// and once it is placed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partly_bound: Option<String>,
    /// Room a preempting gang's hold planned where pods of lower priority still run, as
    /// `member@node` (`(not created yet)@node` for a member to come): not held until they go
    /// (no-overcommit); absent when there is none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub planned_room: Vec<String>,
    pub seconds_until_timeout: Option<u64>,
    pub seconds_of_backoff_left: Option<u64>,
    /// The gang's topology constraint and the domain it uses; absent for a gang without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologyView>,
}

/// A gang's topology, as `/gangs` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TopologyView {
    /// `required <label>` or `preferred <label> < …`; `refused` when muster cannot keep it.
    pub constraint: String,
    /// The key or field it was read from.
    pub source: &'static str,
    /// The node label the domain is named by, and the gang's domain (value of that label on
    /// its members' nodes and seats), once it has one.
    pub label: Option<String>,
    pub domain: Option<String>,
}

/// Where a gang's spec came from, as `/gangs` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum SpecSourceView {
    /// The gang's PodGroup (`name` is `namespace/name`).
    PodGroup {
        api_version: &'static str,
        name: String,
    },
    /// Members name this PodGroup, which does not exist (yet): the gang waits for it.
    MissingPodGroup {
        api_version: &'static str,
        name: String,
    },
    /// A key on the members.
    Key { key: &'static str },
    /// No key: every member that exists.
    EveryMember,
}

impl SpecSourceView {
    fn of(key: &GangKey, source: &SpecSource) -> Self {
        match source {
            SpecSource::PodGroup { api, name } => SpecSourceView::PodGroup {
                api_version: api.api_version(),
                name: format!("{}/{name}", key.namespace),
            },
            SpecSource::MissingPodGroup { api, name } => SpecSourceView::MissingPodGroup {
                api_version: api.api_version(),
                name: format!("{}/{name}", key.namespace),
            },
            SpecSource::Key(k) => SpecSourceView::Key { key: k },
            SpecSource::EveryMember => SpecSourceView::EveryMember,
        }
    }
}

/// One task of a gang: its live members, how many have nodes, and its minimum (0: none).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TaskView {
    pub task: String,
    pub present: u32,
    pub placed: u32,
    pub minimum: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct MemberView {
    /// The pod's name; `(not created yet)` for room held for a member not created yet.
    pub name: String,
    pub state: MemberState,
    pub node: Option<String>,
}

/// Counts for gauges: gangs in each state, and seats held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GangGauges {
    pub waiting: u64,
    pub admitted: u64,
    pub placed: u64,
    pub backing_off: u64,
    pub seats: u64,
}

impl GangTable {
    fn gang_state(&self, key: &GangKey, gang: &Gang, now: Instant) -> GangState {
        if self.is_placed(key, &self.facts(key)) {
            GangState::Placed
        } else if gang.is_admitted() {
            GangState::Admitted
        } else if gang.backoff_left(now).is_some() {
            GangState::Backoff
        } else {
            GangState::Waiting
        }
    }

    pub fn gauges(&self, now: Instant) -> GangGauges {
        let mut g = GangGauges::default();
        for (key, gang) in &self.gangs {
            g.seats += gang.seats().len() as u64;
            match self.gang_state(key, gang, now) {
                GangState::Placed => g.placed += 1,
                GangState::Admitted => g.admitted += 1,
                GangState::Backoff => g.backing_off += 1,
                GangState::Waiting => g.waiting += 1,
            }
        }
        g
    }

    pub fn views(&self, now: Instant) -> Vec<GangView> {
        let mut out: Vec<GangView> = self
            .gangs
            .iter()
            .map(|(key, gang)| self.view(key, gang, now))
            .collect();
        out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        out
    }

    fn view(&self, key: &GangKey, gang: &Gang, now: Instant) -> GangView {
        let facts = self.facts(key);
        let members = self
            .members_of(gang)
            .map(|p| {
                let (state, node) = if let Some(n) = &p.info.node_name {
                    (MemberState::Bound, Some(n.to_string()))
                } else if let Some(n) = p.assumed() {
                    (MemberState::Binding, Some(n.to_string()))
                } else if let Some(s) = gang.seat_of(&p.info.uid) {
                    let state = if s.confirmed {
                        MemberState::Seated
                    } else {
                        MemberState::Planned
                    };
                    (state, Some(s.node.to_string()))
                } else {
                    (MemberState::Pending, None)
                };
                MemberView {
                    name: p.info.name.to_string(),
                    state,
                    node,
                }
            })
            .chain(
                gang.seats()
                    .iter()
                    .filter(|(h, _)| h.is_not_created_yet())
                    .map(|(_, s)| MemberView {
                        name: "(not created yet)".to_string(),
                        state: MemberState::Held,
                        node: Some(s.node.to_string()),
                    }),
            )
            .collect();
        let mut tasks: BTreeMap<&str, TaskView> = facts
            .spec
            .tasks
            .iter()
            .map(|(t, min)| {
                let view = TaskView {
                    task: t.to_string(),
                    present: 0,
                    placed: 0,
                    minimum: min,
                };
                (&**t, view)
            })
            .collect();
        for p in self.members_of(gang).filter(|p| p.is_live()) {
            if let Some(t) = task_of(&p.info) {
                let view = tasks.entry(t).or_insert_with(|| TaskView {
                    task: t.to_string(),
                    present: 0,
                    placed: 0,
                    minimum: 0,
                });
                view.present += 1;
                view.placed += u32::from(p.charged_node().is_some());
            }
        }
        let (mut live, mut running, mut succeeded, mut failed) = (0, 0, 0, 0);
        let mut created = i64::MAX;
        for p in self.members_of(gang) {
            live += u32::from(p.is_live());
            created = created.min(p.info.created);
            match p.info.phase {
                PodPhase::Running => running += 1,
                PodPhase::Succeeded => succeeded += 1,
                PodPhase::Failed => failed += 1,
                PodPhase::Pending => {}
            }
        }
        let state = self.gang_state(key, gang, now);
        let timeout = facts.spec.timeout_or(self.config.default_timeout);
        GangView {
            namespace: key.namespace.to_string(),
            name: key.name.to_string(),
            state,
            quorum: facts.spec.quorum,
            spec_source: SpecSourceView::of(key, &facts.spec.source),
            tasks: tasks.into_values().collect(),
            members_with_nodes: facts.with_nodes,
            members_live: live,
            running,
            succeeded,
            failed,
            created: if created == i64::MAX { 0 } else { created },
            members,
            waiting_reason: (state != GangState::Placed)
                .then(|| gang.wait_message().map(str::to_string))
                .flatten(),
            marker_warning: gang.marker_warning().map(str::to_string),
            partly_bound: (state != GangState::Placed)
                .then(|| gang.partly_bound().map(str::to_string))
                .flatten(),
            planned_room: gang
                .awaiting_room()
                .iter()
                .filter(|_| gang.is_admitted())
                .map(|s| {
                    let who = match s.holder.member().and_then(|m| self.pods.get(m)) {
                        Some(p) => p.info.name.to_string(),
                        None => "(not created yet)".to_string(),
                    };
                    format!("{who}@{}", s.node)
                })
                .collect(),
            seconds_until_timeout: match gang.phase() {
                Phase::Admitted { since } => Some(
                    timeout
                        .saturating_sub(now.saturating_duration_since(since))
                        .as_secs(),
                ),
                _ => None,
            },
            seconds_of_backoff_left: gang.backoff_left(now).map(|d| d.as_secs()),
            topology: self.topology_view(gang, &facts.spec.topology),
        }
    }

    fn topology_view(&self, gang: &Gang, topology: &GangTopology) -> Option<TopologyView> {
        match topology {
            GangTopology::Unconstrained => None,
            GangTopology::Refused(_) => Some(TopologyView {
                constraint: "refused".into(),
                source: "see waitingReason",
                label: None,
                domain: None,
            }),
            GangTopology::Constrained(c) => {
                let label = c.topology.narrowest();
                let on_node = self.members_of(gang).filter_map(|p| p.charged_node());
                let seated = gang.seats().values().map(|s| &s.node);
                let domain = on_node
                    .chain(seated)
                    .filter_map(|n| self.ledger.get(n))
                    .find_map(|e| domain_of(e.info(), label))
                    .map(str::to_string);
                Some(TopologyView {
                    constraint: c.topology.to_string(),
                    source: c.source,
                    label: Some(label.to_string()),
                    domain,
                })
            }
        }
    }
}
