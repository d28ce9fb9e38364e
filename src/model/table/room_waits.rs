//! Per node, the gangs waiting for room there to be freed, and what each waits for.
//!
//! Two waits end when a pod leaves a node (its charge there goes, or shrinks):
//! - a gang at quorum whose seat's room is used only by pods being deleted there
//!   (`verbs::quorum`): its held bind calls decide again ([`RoomWait::PodsLeaving`]);
//! - a preempting gang whose hold planned seats where pods of lower priority still run
//!   (`verbs::preemption_hold`): the freed room becomes its seats ([`RoomWait::PlannedSeats`]).
//!
//! Both ask one question of a node, "who waits for room here?", so one index answers it and
//! the table has one hook for freed room (`GangTable::room_freed_on`, called from
//! `settle_charges`). Kept apart, the two hooks sat side by side there, each with its own list
//! to keep in step with the gangs. A pod event on a node no gang waits on costs a lookup.

use rustc_hash::FxHashMap as HashMap;

use crate::model::inputs::membership::GangKey;
use crate::model::inputs::objects::NodeName;

/// What a gang waits for on a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::model) enum RoomWait {
    /// Its quorum waits for pods being deleted here to go; the first one leaving ends the wait.
    PodsLeaving,
    /// Its preemption hold planned seats here (`Gang::awaiting_room`); the wait lasts while
    /// any of them is still planned.
    PlannedSeats,
}

/// The index: per node, the gangs waiting there, in the order they began to; and the gangs
/// whose wait for pods leaving ended, until they are taken. Written only through the methods
/// below.
#[derive(Default)]
pub(in crate::model) struct RoomWaits {
    by_node: HashMap<NodeName, Vec<(GangKey, RoomWait)>>,
    /// Gangs whose awaited room was freed since the last [`RoomWaits::take_freed`]: their held
    /// bind calls decide again.
    freed: Vec<GangKey>,
}

impl RoomWaits {
    /// `gang` waits for room on `node`, for `why`; a wait already there keeps its place.
    pub fn wait(&mut self, node: NodeName, gang: &GangKey, why: RoomWait) {
        let waiting = self.by_node.entry(node).or_default();
        if !waiting.iter().any(|(g, w)| g == gang && *w == why) {
            waiting.push((gang.clone(), why));
        }
    }

    /// No gang waits anywhere.
    pub fn is_empty(&self) -> bool {
        self.by_node.is_empty()
    }

    /// The gangs waiting on `node` for `why`, in the order they began to.
    pub fn on<'a>(&'a self, node: &str, why: RoomWait) -> impl Iterator<Item = &'a GangKey> {
        self.by_node
            .get(node)
            .into_iter()
            .flatten()
            .filter(move |(_, w)| *w == why)
            .map(|(g, _)| g)
    }

    /// Every gang waiting somewhere for `why`, each once (in no particular order).
    pub fn gangs(&self, why: RoomWait) -> Vec<GangKey> {
        let mut gangs: Vec<GangKey> = Vec::new();
        for (g, _) in self.by_node.values().flatten().filter(|(_, w)| *w == why) {
            if !gangs.contains(g) {
                gangs.push(g.clone());
            }
        }
        gangs
    }

    /// Ends the waits for `why` on `node`: the gangs that waited, in the order they began to.
    pub fn end(&mut self, node: &str, why: RoomWait) -> Vec<GangKey> {
        let Some(waiting) = self.by_node.get_mut(node) else {
            return Vec::new();
        };
        let mut ended = Vec::new();
        waiting.retain(|(g, w)| {
            if *w == why {
                ended.push(g.clone());
            }
            *w != why
        });
        if waiting.is_empty() {
            self.by_node.remove(node);
        }
        ended
    }

    /// A pod left `node`: ends the waits for pods leaving there and notes their gangs as freed
    /// (see [`RoomWaits::take_freed`]); returns them, in the order they began to wait.
    pub fn room_freed_on(&mut self, node: &str) -> Vec<GangKey> {
        let woken = self.end(node, RoomWait::PodsLeaving);
        self.freed.extend(woken.iter().cloned());
        woken
    }

    /// The gangs whose awaited room was freed since the last call.
    pub fn take_freed(&mut self) -> Vec<GangKey> {
        std::mem::take(&mut self.freed)
    }

    /// Keeps the waits of `gang` for `why` only on the nodes where `keep` says so.
    pub fn retain(&mut self, gang: &GangKey, why: RoomWait, keep: impl Fn(&str) -> bool) {
        self.by_node.retain(|node, waiting| {
            if !keep(node) {
                waiting.retain(|(g, w)| g != gang || *w != why);
            }
            !waiting.is_empty()
        });
    }
}

#[cfg(test)]
mod tests;
