//! How many members of a gang the cluster could ever hold, so that a quorum beyond it is refused
//! at once instead of simulated member by member under the table's lock.
//!
//! A quorum of 100,000 (`muster.dev/min-available` or a PodGroup's `minMember`, both set by
//! users) made the planner place that many simulated members, node by node, on every filter
//! and bind call of the gang: seconds per call, with every verb and the watch waiting for the
//! lock (fail-safe). The bound is the room of every node as if nothing else ran on it, counted
//! in copies of the smallest member (the element-wise minimum of the live members' requests:
//! no member asks less, so no more of them could ever fit): per node the fewest copies any
//! requested resource allows (the `pods` slot each pod takes included), summed over nodes. A
//! quorum above it cannot be met by any placement, eviction or wait short of new nodes, and
//! is refused naming the numbers (explained); the gang holds nothing (holds-nothing).
//!
//! Only a quorum of at least [`CHECKED_FROM`] members, and larger than the node count, is
//! checked: for a smaller one the planner's own simulation answers about as fast and says more
//! (how many members fit, and which rule stopped the next), and the check itself walks the
//! nodes.

use crate::model::inputs::resources::Resources;
use crate::model::table::gang::Gang;
use crate::model::table::ledger::NodeLedger;
use crate::model::table::GangTable;

/// The smallest quorum checked against the bound (see the module notes).
pub const CHECKED_FROM: u32 = 1024;

/// At most this many members of `quorum` fit in the cluster: the refusal's numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BeyondCluster {
    pub quorum: u32,
    pub at_most: u64,
    pub nodes: usize,
}

/// How many copies of `request` fit in `allocatable`: the fewest any requested resource allows
/// (`u64::MAX` for a request of nothing at all, which the `pods` slot every pod takes rules out
/// for pods the watch delivered).
pub fn copies_within(request: &Resources, allocatable: &Resources) -> u64 {
    let mut fewest = u64::MAX;
    request.each_against(allocatable, |asked, has| {
        if asked > 0 {
            fewest = fewest.min((has.max(0) / asked) as u64);
        }
    });
    fewest
}

/// The element-wise minimum of `requests` (an extended resource only if every one asks for it);
/// `None` for no requests.
pub fn smallest<'a>(requests: impl IntoIterator<Item = &'a Resources>) -> Option<Resources> {
    let mut it = requests.into_iter();
    let mut min = it.next()?.clone();
    for r in it {
        min.cpu_milli = min.cpu_milli.min(r.cpu_milli);
        min.memory = min.memory.min(r.memory);
        min.ephemeral_storage = min.ephemeral_storage.min(r.ephemeral_storage);
        min.pods = min.pods.min(r.pods);
        let names: Vec<_> = min.extended.iter().map(|(n, _)| n.clone()).collect();
        for name in names {
            let v = min.extended(&name).min(r.extended(&name));
            min.set_extended(&name, v);
        }
    }
    Some(min)
}

/// Copies of `request` every node of `ledger` could hold with nothing else on it, summed
/// (saturating).
pub fn cluster_holds(ledger: &NodeLedger, request: &Resources) -> u64 {
    ledger.iter().fold(0u64, |sum, (_, e)| {
        sum.saturating_add(copies_within(request, &e.info().allocatable))
    })
}

impl GangTable {
    /// `Some` when the gang's quorum is more than the cluster could ever hold (see the module
    /// notes); `None` when it could, or when the quorum is too small to be checked.
    pub(in crate::model) fn quorum_beyond_cluster(
        &self,
        gang: &Gang,
        quorum: u32,
    ) -> Option<BeyondCluster> {
        let nodes = self.ledger.len();
        if quorum < CHECKED_FROM || quorum as usize <= nodes {
            return None;
        }
        let live = self
            .members_of(gang)
            .filter(|p| p.is_live())
            .map(|p| &p.info.requests);
        let least = smallest(live)?;
        let at_most = cluster_holds(&self.ledger, &least);
        (u64::from(quorum) > at_most).then_some(BeyondCluster {
            quorum,
            at_most,
            nodes,
        })
    }
}

#[cfg(test)]
mod tests;
