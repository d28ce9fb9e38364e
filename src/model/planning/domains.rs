//! Topology domains: the nodes sharing one value of a node label (a rack, a block), for a gang
//! whose quorum must be inside one of them (`muster.dev/topology-required`, Kueue's
//! `podset-required-topology`, Kubernetes' PodGroup `schedulingConstraints.topology`).
//!
//! Nodes without the label are in no domain. The planner runs its one first-fit loop
//! ([`first_fit_among`](super::simulation::first_fit_among)) over one domain's nodes at a
//! time, in the order [`GangTable::domains`] gives: best fit first (the domain whose free room
//! would hold the fewest more copies of the gang's largest member while still holding the
//! quorum: the least room stranded, so a big gang later still finds a whole rack), and the first
//! domain where the simulation places the whole quorum is the gang's. A gang with members
//! already on nodes or seated is confined to their domain ([`GangTable::gang_domain`]).

use std::sync::Arc;

use crate::model::inputs::membership::GangKey;
use crate::model::inputs::objects::NodeInfo;
use crate::model::inputs::resources::Resources;
use crate::model::table::gang::Gang;
use crate::model::table::ledger::NodeLedger;
use crate::model::table::GangTable;

/// One value of the label, and its nodes (ledger positions, ascending).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::model) struct Domain {
    pub value: Arc<str>,
    pub nodes: Vec<usize>,
    /// How many copies of the smallest member's requests its free room holds: no more members
    /// than that fit there, so a domain below the quorum is not simulated.
    pub at_most: i64,
}

impl Domain {
    pub fn contains(&self, position: usize) -> bool {
        self.nodes.binary_search(&position).is_ok()
    }
}

/// The domain value of `node` for `label`, if it has the label.
pub(in crate::model) fn domain_of<'n>(node: &'n NodeInfo, label: &str) -> Option<&'n str> {
    node.labels.get(label).map(String::as_str)
}

/// How many copies of `request` fit in the free room of `position` (resources the request
/// does not ask for set no bound).
fn copies(ledger: &NodeLedger, position: usize, request: &Resources) -> i64 {
    let e = ledger.at(position);
    let a = &e.info().allocatable;
    let (used, reserved) = (e.used(), e.reserved());
    let mut n = i64::MAX;
    let mut per = |alloc: i64, used: i64, reserved: i64, want: i64| {
        if want > 0 {
            n = n.min(((alloc - used - reserved).max(0)) / want);
        }
    };
    per(
        a.cpu_milli,
        used.cpu_milli,
        reserved.cpu_milli,
        request.cpu_milli,
    );
    per(a.memory, used.memory, reserved.memory, request.memory);
    per(
        a.ephemeral_storage,
        used.ephemeral_storage,
        reserved.ephemeral_storage,
        request.ephemeral_storage,
    );
    per(a.pods, used.pods, reserved.pods, request.pods);
    for (name, want) in &request.extended {
        per(
            a.extended(name),
            used.extended(name),
            reserved.extended(name),
            *want,
        );
    }
    // A request of nothing: no bound from room (large, and sums saturate).
    n.min(i64::MAX >> 8)
}

impl GangTable {
    /// The domains of `label`, in the order the planner tries them for a gang of `need`
    /// members whose largest requests `largest`: first those whose room holds at least `need`
    /// copies, fewest copies first (best fit); then the others, most copies first (they can
    /// still fit smaller members; they are tried last). Ties by value. `only`: the one domain
    /// the gang is confined to.
    pub(in crate::model) fn domains(
        &self,
        label: &str,
        (largest, smallest): (&Resources, &Resources),
        need: usize,
        only: Option<&str>,
    ) -> Vec<Domain> {
        // The grouping is the ledger's (made once per label); only the room is counted here.
        let by_label = self.ledger.by_label(label);
        let need = need as i64;
        let mut domains: Vec<_> = by_label
            .iter()
            .filter(|(value, _)| only.is_none_or(|o| o == &**value))
            .map(|(value, nodes)| {
                let (mut room, mut at_most) = (0i64, 0i64);
                for &i in nodes {
                    room = room.saturating_add(copies(&self.ledger, i, largest));
                    at_most = at_most.saturating_add(copies(&self.ledger, i, smallest));
                }
                let holds = room >= need;
                // Ascending sort: holding domains first, fewest copies first; then the rest,
                // most copies first.
                (
                    !holds,
                    if holds { room } else { -room },
                    value,
                    nodes,
                    at_most,
                )
            })
            .collect();
        domains.sort_unstable_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)));
        domains
            .into_iter()
            .map(|(_, _, value, nodes, at_most)| Domain {
                value: value.clone(),
                nodes: nodes.clone(),
                at_most,
            })
            .collect()
    }

    /// The domain of `label` the gang `key` already uses: the node of a member bound (or
    /// assumed), else of a confirmed seat; the first found. `None` while it uses none.
    pub(in crate::model) fn gang_domain(&self, key: &GangKey, label: &str) -> Option<Arc<str>> {
        let gang = self.gangs.get(key)?;
        let on_node = self
            .members_of(gang)
            .filter(|p| p.is_live())
            .filter_map(|p| p.charged_node());
        // Confirmed seats only: planned ones are the plan being redone.
        let seated = gang
            .seats()
            .values()
            .filter(|s| s.confirmed)
            .map(|s| &s.node);
        on_node
            .chain(seated)
            .filter_map(|n| self.ledger.get(n))
            .find_map(|e| domain_of(e.info(), label))
            .map(Arc::from)
    }

    /// The domain a gang confined to one domain (topology required) is in now, as
    /// `(label, value)`: that of its members on nodes and confirmed seats
    /// ([`GangTable::gang_domain`]), else that of its planned seats (a preemption's hold
    /// plans them all in the preemptor's domain before any is confirmed). `None` for a gang
    /// without a required topology, or one that holds and runs nothing yet. Filters offer its
    /// later members only nodes there, and binds elsewhere are refused (holds-nothing).
    pub(in crate::model) fn confined_domain(&self, key: &GangKey) -> Option<(Arc<str>, Arc<str>)> {
        let gang = self.gangs.get(key)?;
        let label = gang.spec().topology.required()?.clone();
        let value = self.gang_domain(key, &label).or_else(|| {
            gang.seats()
                .values()
                .filter_map(|s| self.ledger.get(&s.node))
                .find_map(|e| domain_of(e.info(), &label))
                .map(Arc::from)
        })?;
        Some((label, value))
    }

    /// Whether nodes `a` and `b` are in the same domain of `gang`'s topology (the required
    /// label, or the narrowest preferred level); always for a gang without one. A node
    /// without the label, or unknown, is in no domain: not the same as any.
    pub(in crate::model) fn same_topology_domain(&self, gang: &Gang, a: &str, b: &str) -> bool {
        let Some(c) = gang.spec().topology.constraint() else {
            return true;
        };
        let label = c.topology.narrowest();
        let value = |n: &str| self.ledger.get(n).and_then(|e| domain_of(e.info(), label));
        matches!((value(a), value(b)), (Some(x), Some(y)) if x == y)
    }
}

/// The element-wise minimum of `requests` (a resource one of them does not ask for is not
/// asked): no member asks for less of anything.
pub(in crate::model) fn smallest_of<'r>(
    mut requests: impl Iterator<Item = &'r Resources>,
) -> Resources {
    let Some(first) = requests.next() else {
        return Resources::default();
    };
    let mut min = first.clone();
    for r in requests {
        min.cpu_milli = min.cpu_milli.min(r.cpu_milli);
        min.memory = min.memory.min(r.memory);
        min.ephemeral_storage = min.ephemeral_storage.min(r.ephemeral_storage);
        min.pods = min.pods.min(r.pods);
        min.extended = min
            .extended
            .iter()
            .filter_map(|(name, v)| {
                let theirs = r.extended(name);
                (theirs > 0).then(|| (name.clone(), (*v).min(theirs)))
            })
            .collect();
    }
    min
}
