//! Which seats a release publishes as nominations, and which members float.
//!
//! A nomination is a write per member (`pods/status`, about as dear to the API server as the
//! pod's create: docs/benchmarks.md), and it does two things for a seat (v1.37.2):
//! - it **routes**: kube-scheduler tries the nominated node first and alone
//!   (`evaluateNominatedNode`, pkg/scheduler/schedule_one.go:668-752). Without one it runs its
//!   filters from a rotating start and stops at `numFeasibleNodesToFind` feasible nodes, never
//!   fewer than 100 (`minFeasibleNodesToFind`, schedule_one.go:57, :866-892), and sends only
//!   those to muster's filter: on a large cluster the seat's node may not be among them;
//! - it **protects**: kube-scheduler counts a nominated pod against every pod of equal or
//!   lower priority on that node (`addGENominatedPods`, framework/runtime/framework.go:1338).
//!   Pods that are not gang members never reach muster's filter, so nothing else keeps them
//!   off a seat's room.
//!
//! Where neither is needed the member **floats**: its gate goes without a nomination,
//! kube-scheduler offers it the nodes its filters pass, and muster's filter offers back one
//! node with room for it after every seat: its seat when offered, else a planned seat of its
//! gang, else the tightest fit (`filter_by_room`); the seat moves there. Binding is still held
//! until the quorum's binds are in and re-checks the room (never-half, no-overcommit), so a
//! float can only cost time, never a partial gang. A seat needs its nomination when
//! ([`SeatRisk`]):
//! - the member is **pinned** to where the plan put it (a topology domain, pod affinity or
//!   anti-affinity, spread, host ports, devices): another node would need the whole plan again;
//! - kube-scheduler may offer **only nodes without room** for it: at least
//!   [`KUBE_SCHEDULER_FINDS_AT_LEAST`] nodes have room for it beside their bound pods (so
//!   kube-scheduler's NodeResourcesFit may pass them: it does not see seats) but not after
//!   their seats (so muster's filter refuses them). Fewer than that, and whichever nodes
//!   kube-scheduler offers, one of them has room: it offers every node its filters pass when
//!   they are fewer than 100 (the seat's node among them), else at least 100 of them, and
//!   fewer than 100 are refused (whatever `percentageOfNodesToScore` is);
//! - the seats are **contested**: the pods waiting for kube-scheduler that do not pass through
//!   muster, of the member's priority or lower (one of higher priority ignores a nomination
//!   anyway), could spoil as many places for a member of its shape as there are outside the
//!   seats. Such a pod may well land in a seat's room (kube-scheduler does not see seats); the
//!   member it displaces is then seated by muster's filter on another offered node with room
//!   (kube-scheduler never offers a node whose room it already gave away: its own cache counts
//!   the pods it placed), so what must not run out is the room outside the seats. A pod spoils
//!   at most as many member-sized places as its request spans in member requests
//!   ([`places_spoiled`]);
//! - the seat's node is **thin**: beside its seats it keeps less room than the largest pod
//!   outside muster asks for (the largest of the live pods without the marker, of the member's
//!   priority or lower, resource by resource). One such pod created after the release could take the seat's room while
//!   muster's watch has not shown it yet, and muster's filter then offers the member a node
//!   whose room is gone: kube-scheduler's binding of the member fails and it is tried again.
//!   The planner packs seats tight, so where the cluster is nearly full most seats are thin.
//!
//! The "sampled" argument assumes muster is the only extender that filters nodes, or the
//! first: one filtering before it could send muster fewer nodes than kube-scheduler found. A
//! member that is then offered no node with room is refused once and nominated (below).
//!
//! A floating member kube-scheduler refused is nominated then (`Gatherer::keep_nominations`).
//! One that muster's filter offers another node than its seat has its seat moved there at once
//! (`GangTable::seat_where_offered`): kube-scheduler assumes it there from then on.

use rustc_hash::FxHashMap as HashMap;

use crate::model::inputs::membership::GangKey;
use crate::model::inputs::objects::{NodeName, PodInfo};
use crate::model::inputs::resources::Resources;
use crate::model::planning::quorum_bound::copies_within;
use crate::model::rules::scheduling_gates;
use crate::model::table::GangTable;

/// kube-scheduler sends the extender every node its filters pass when they are fewer than
/// this, else at least this many (`minFeasibleNodesToFind`, pkg/scheduler/schedule_one.go:57,
/// v1.37.2: the floor under any `percentageOfNodesToScore`).
pub const KUBE_SCHEDULER_FINDS_AT_LEAST: usize = 100;

/// kube-scheduler's share of nodes to find at `nodes` nodes with `percentageOfNodesToScore`
/// unset (`numFeasibleNodesToFind`, pkg/scheduler/schedule_one.go:866-892, v1.37.2): every node
/// below 100, else 50% less one point per 125 nodes, at least 5%, never fewer than 100.
pub fn nodes_kube_scheduler_finds(nodes: usize) -> usize {
    if nodes < KUBE_SCHEDULER_FINDS_AT_LEAST {
        return nodes;
    }
    let percentage = 50usize.saturating_sub(nodes / 125).max(5);
    (nodes * percentage / 100).max(KUBE_SCHEDULER_FINDS_AT_LEAST)
}

/// A member floats only while kube-scheduler sends muster at most this many node names for it:
/// each floating member's scheduling cycle filters that many nodes and its extender call
/// carries them. Measured (docs/benchmarks.md): at 500 nodes (230 names) floating saved
/// requests and gang latency; at 5,000 nodes (500 names) it cost 2 ms of kube-scheduler's serial
/// time per attempt, 13% of the throughput and twice the gang p99.
pub const FLOAT_WHILE_NODES_SENT_AT_MOST: usize = 250;

/// Why a seat is published as the member's nomination (see the module notes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeatRisk {
    /// The member may only go where the plan put it.
    Pinned,
    /// kube-scheduler may offer the member only nodes without room for it, or would send muster
    /// more node names for it than floating is worth ([`FLOAT_WHILE_NODES_SENT_AT_MOST`]).
    Sampled,
    /// Pods that do not pass through muster could take the seats' room.
    Contested,
    /// One pod outside muster could take the seat's room.
    Thin,
}

/// What the checks of one gather round share, computed when first needed: each costs a walk
/// over every node or every pod.
#[derive(Default)]
pub(in crate::model) struct RiskView {
    /// Per request shape: how many nodes only seats fill for it (counted up to
    /// [`KUBE_SCHEDULER_FINDS_AT_LEAST`]).
    only_seats_fill: HashMap<Resources, usize>,
    /// The pending pods that do not pass through muster: (priority, requests).
    pending: Option<Vec<(i32, Resources)>>,
    /// Per (request shape, priority): whether the seats are contested.
    contested: HashMap<(Resources, i32), bool>,
    /// The live pods without the marker: (priority, requests).
    outside: Option<Vec<(i32, Resources)>>,
    /// Their largest request, resource by resource, per priority ceiling asked.
    largest_outside: HashMap<i32, Resources>,
}

impl GangTable {
    /// Whether `member` of `gang`, seated on `seat`, needs its seat published as a
    /// nomination, and why; `None`: it may float.
    pub(in crate::model) fn seat_risk(
        &self,
        gang: &GangKey,
        member: &PodInfo,
        seat: &NodeName,
        view: &mut RiskView,
    ) -> Option<SeatRisk> {
        if self.is_pinned(gang, member) {
            return Some(SeatRisk::Pinned);
        }
        if nodes_kube_scheduler_finds(self.ledger.len()) > FLOAT_WHILE_NODES_SENT_AT_MOST {
            return Some(SeatRisk::Sampled);
        }
        let seat_position = self.ledger.position(seat)?;
        let filled = *view
            .only_seats_fill
            .entry(member.requests.clone())
            .or_insert_with(|| self.nodes_only_seats_fill(&member.requests));
        // Its own seat's node may count (its seat fills it for anyone else) but is room for it.
        let own = usize::from(
            self.ledger
                .shortfall(seat_position, &member.requests, None, None)
                .is_some(),
        );
        if filled.saturating_sub(own) >= KUBE_SCHEDULER_FINDS_AT_LEAST {
            return Some(SeatRisk::Sampled);
        }
        let largest = self.largest_outside(member.priority, view);
        if !largest.is_zero()
            && self
                .ledger
                .shortfall(seat_position, &largest, None, None)
                .is_some()
        {
            return Some(SeatRisk::Thin);
        }
        let key = (member.requests.clone(), member.priority);
        if let Some(&contested) = view.contested.get(&key) {
            return contested.then_some(SeatRisk::Contested);
        }
        let spoiled = self.places_pending_pods_spoil(&member.requests, member.priority, view);
        let contested =
            spoiled > 0 && self.places_outside_seats(&member.requests, spoiled) <= spoiled;
        view.contested.insert(key, contested);
        contested.then_some(SeatRisk::Contested)
    }

    /// Placement rules that tie the member to the plan's node or domain: kube-scheduler's
    /// filters and muster's plan must agree on them, and only the plan knows where the rest
    /// of the gang goes.
    fn is_pinned(&self, gang: &GangKey, member: &PodInfo) -> bool {
        let topology = self
            .gangs
            .get(gang)
            .is_some_and(|g| g.spec().topology.constraint().is_some());
        topology
            || member.rules.as_ref().is_some_and(|r| {
                !r.affinity.is_empty()
                    || !r.anti_affinity.is_empty()
                    || !r.spread.is_empty()
                    || !r.host_ports.is_empty()
                    || !r.claims.is_empty()
            })
    }

    /// Nodes kube-scheduler's filters may pass for `requests` that muster's filter refuses:
    /// it fits beside the pods bound there (NodeResourcesFit) but not after the seats there.
    /// Counted up to [`KUBE_SCHEDULER_FINDS_AT_LEAST`].
    fn nodes_only_seats_fill(&self, requests: &Resources) -> usize {
        let mut filled = 0;
        for (position, entry) in self.ledger.iter() {
            if entry.reserved().is_zero() {
                continue;
            }
            let beside_bound = self
                .ledger
                .shortfall(position, requests, Some(entry.reserved()), None)
                .is_none();
            if beside_bound
                && self
                    .ledger
                    .shortfall(position, requests, None, None)
                    .is_some()
            {
                filled += 1;
                if filled > KUBE_SCHEDULER_FINDS_AT_LEAST {
                    break;
                }
            }
        }
        filled
    }

    /// How many places for a member of `shape` the pods kube-scheduler may place before it,
    /// without asking muster, could spoil: pending, ready to be scheduled (no gate), without
    /// the marker (a marked member passes through muster's filter, which counts every seat; an
    /// unmarked member does not), of `priority` or lower.
    fn places_pending_pods_spoil(
        &self,
        shape: &Resources,
        priority: i32,
        view: &mut RiskView,
    ) -> u64 {
        let pending = view.pending.get_or_insert_with(|| {
            self.pods
                .iter()
                .filter(|p| p.is_pending() && !p.info.gang_marker)
                .filter(|p| scheduling_gates::gates(&p.info).is_empty())
                .map(|p| (p.info.priority, p.info.requests.clone()))
                .collect()
        });
        pending
            .iter()
            .filter(|(p, _)| *p <= priority)
            .map(|(_, requests)| places_spoiled(requests, shape))
            .sum()
    }

    /// The largest request, resource by resource, of the live pods without the marker of
    /// `priority` or lower.
    fn largest_outside(&self, priority: i32, view: &mut RiskView) -> Resources {
        if let Some(largest) = view.largest_outside.get(&priority) {
            return largest.clone();
        }
        let outside = view.outside.get_or_insert_with(|| {
            self.pods
                .iter()
                .filter(|p| p.is_live() && !p.info.gang_marker)
                .map(|p| (p.info.priority, p.info.requests.clone()))
                .collect()
        });
        let mut largest = Resources::default();
        for (_, requests) in outside.iter().filter(|(p, _)| *p <= priority) {
            largest.max_with(requests);
        }
        view.largest_outside.insert(priority, largest.clone());
        largest
    }

    /// Places for a member of `shape` left on the nodes after bound pods and every seat (how
    /// many such members would still fit, node by node), counted up to `enough` + 1.
    fn places_outside_seats(&self, shape: &Resources, enough: u64) -> u64 {
        let mut places = 0;
        for (_, entry) in self.ledger.iter() {
            let mut free = entry.info().allocatable.clone();
            free.sub(entry.used());
            free.sub(entry.reserved());
            // Every pod takes a `pods` slot, so a shape never asks for nothing.
            places += copies_within(shape, &free).min(enough + 1);
            if places > enough {
                break;
            }
        }
        places
    }
}

/// At most how many places for a member of `shape` a pod asking for `requests` can spoil on
/// the node it lands on: per resource the member asks for, the pod's request in member
/// requests, rounded up (a place is lost only where the pod takes a share of it); the most
/// of those (a pod that asks for nothing a member asks for spoils none).
pub(super) fn places_spoiled(requests: &Resources, shape: &Resources) -> u64 {
    let mut spoiled = 0u64;
    shape.each_against(requests, |want, asks| {
        if want > 0 && asks > 0 {
            spoiled = spoiled.max(u64::try_from((asks + want - 1) / want).unwrap_or(u64::MAX));
        }
    });
    spoiled
}

#[cfg(test)]
#[path = "nominations/tests.rs"]
mod tests;
