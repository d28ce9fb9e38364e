//! The capacity ledger: per node, what it can hold (allocatable), what pods bound there use,
//! and what gang seats reserve there.
//!
//! Free(node) = allocatable − used − reserved. This is the only code that changes `used` and
//! `reserved`; the table tells it when a pod is charged to a node and when a seat is taken or
//! given up, so the sums cannot drift apart from the pods and seats they stand for.

use std::sync::Arc;

use parking_lot::Mutex;
use rustc_hash::FxHashMap as HashMap;

use crate::model::inputs::objects::{NodeInfo, NodeName};
use crate::model::inputs::resources::{shortfall_against, InsufficientResource, Resources};

/// One node of the ledger.
pub struct NodeEntry {
    info: NodeInfo,
    /// Requests of the non-terminal pods bound or assumed here.
    used: Resources,
    /// Requests of the seats here.
    reserved: Resources,
    /// `info.zone()`, looked up once: prioritize compares it for every candidate.
    zone: Option<Arc<str>>,
}

impl NodeEntry {
    pub fn info(&self) -> &NodeInfo {
        &self.info
    }

    pub fn name(&self) -> &NodeName {
        &self.info.name
    }

    pub fn used(&self) -> &Resources {
        &self.used
    }

    pub fn reserved(&self) -> &Resources {
        &self.reserved
    }

    pub fn zone(&self) -> Option<&str> {
        self.zone.as_deref()
    }
}

/// Nodes in a stable order (first-fit simulations walk them in this order); a simulation
/// refers to a node by its position here.
#[derive(Default)]
pub struct NodeLedger {
    nodes: Vec<NodeEntry>,
    positions: HashMap<NodeName, usize>,
    /// Usage of pods bound to nodes not (yet) known; moved in when the node appears.
    orphan_usage: HashMap<NodeName, Resources>,
    /// Per node label a plan grouped the nodes by (a topology level), its values and their
    /// nodes (see [`NodeLedger::by_label`]). A gang confined to one domain groups every node by its
    /// label on every filter call; labels and positions change only in `upsert` (a new node, or
    /// changed labels) and `remove`, which clear it.
    by_label: Mutex<HashMap<Arc<str>, LabelIndex>>,
}

/// The values of one node label, ascending, each with the positions of its nodes
/// (ascending); nodes without the label are in none.
pub type LabelIndex = Arc<[(Arc<str>, Vec<usize>)]>;

impl NodeLedger {
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn position(&self, name: &str) -> Option<usize> {
        self.positions.get(name).copied()
    }

    pub fn at(&self, position: usize) -> &NodeEntry {
        &self.nodes[position]
    }

    pub fn get(&self, name: &str) -> Option<&NodeEntry> {
        self.position(name).map(|i| &self.nodes[i])
    }

    /// Nodes with their positions, in first-fit order.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &NodeEntry)> {
        self.nodes.iter().enumerate()
    }

    /// The nodes grouped by the values of `label` ([`LabelIndex`]), made once per label until a
    /// node is added, removed or relabelled.
    pub fn by_label(&self, label: &str) -> LabelIndex {
        if let Some(index) = self.by_label.lock().get(label) {
            return index.clone();
        }
        let mut values: std::collections::BTreeMap<&str, Vec<usize>> = Default::default();
        for (i, e) in self.nodes.iter().enumerate() {
            if let Some(v) = e.info.labels.get(label) {
                values.entry(v.as_str()).or_default().push(i);
            }
        }
        let index: LabelIndex = values
            .into_iter()
            .map(|(v, nodes)| (Arc::from(v), nodes))
            .collect();
        self.by_label.lock().insert(Arc::from(label), index.clone());
        index
    }

    /// A node was added or changed. A new node starts with the usage of pods already bound to
    /// it, and no seats.
    pub fn upsert(&mut self, info: NodeInfo) {
        let zone = info.zone().map(Arc::from);
        if let Some(&i) = self.positions.get(&info.name) {
            let entry = &mut self.nodes[i];
            if entry.info.labels != info.labels {
                self.by_label.get_mut().clear();
            }
            entry.info = info;
            entry.zone = zone;
            return;
        }
        self.by_label.get_mut().clear();
        let used = self.orphan_usage.remove(&info.name).unwrap_or_default();
        self.positions.insert(info.name.clone(), self.nodes.len());
        self.nodes.push(NodeEntry {
            info,
            used,
            reserved: Resources::default(),
            zone,
        });
    }

    /// A node was deleted: its reservations go with it (the caller drops the seats), the usage
    /// of pods still bound to it is kept in case it comes back. Returns whether it was known.
    pub fn remove(&mut self, name: &str) -> bool {
        let Some(i) = self.positions.remove(name) else {
            return false;
        };
        self.by_label.get_mut().clear();
        let entry = self.nodes.swap_remove(i);
        if let Some(moved) = self.nodes.get(i) {
            self.positions.insert(moved.info.name.clone(), i);
        }
        if !entry.used.is_zero() {
            self.orphan_usage
                .insert(entry.info.name.clone(), entry.used);
        }
        true
    }

    /// A pod's requests now count on `node` (bound, or being bound by muster).
    pub fn charge(&mut self, node: &NodeName, requests: &Resources) {
        match self.positions.get(node) {
            Some(&i) => self.nodes[i].used.add(requests),
            None => self
                .orphan_usage
                .entry(node.clone())
                .or_default()
                .add(requests),
        }
    }

    /// A pod's requests no longer count on `node` (deleted, finished, or its binding failed).
    pub fn uncharge(&mut self, node: &NodeName, requests: &Resources) {
        match self.positions.get(node) {
            Some(&i) => self.nodes[i].used.sub(requests),
            None => {
                if let Some(u) = self.orphan_usage.get_mut(node) {
                    u.sub(requests);
                    if u.is_zero() {
                        self.orphan_usage.remove(node);
                    }
                }
            }
        }
    }

    /// A seat on `node` was taken. A seat on an unknown node reserves nothing: there is no
    /// room there to protect. Only the table's seat operations call this (no-overcommit:
    /// the reservations are exactly the seats), hence visible to the table alone.
    pub(super) fn reserve(&mut self, node: &str, requests: &Resources) {
        if let Some(&i) = self.positions.get(node) {
            self.nodes[i].reserved.add(requests);
        }
    }

    /// A seat on `node` was given up (see `reserve`).
    pub(super) fn unreserve(&mut self, node: &str, requests: &Resources) {
        if let Some(&i) = self.positions.get(node) {
            self.nodes[i].reserved.sub(requests);
        }
    }

    /// What `request` lacks at `position`, after bound pods, seats and `extra` (room a
    /// simulation already gave away), with `credit` (a seat the pod may take over) added back.
    pub fn shortfall(
        &self,
        position: usize,
        request: &Resources,
        credit: Option<&Resources>,
        extra: Option<&Resources>,
    ) -> Option<InsufficientResource> {
        let e = &self.nodes[position];
        match extra {
            Some(x) => shortfall_against(
                request,
                &e.info.allocatable,
                credit,
                &[&e.used, &e.reserved, x],
            ),
            None => shortfall_against(
                request,
                &e.info.allocatable,
                credit,
                &[&e.used, &e.reserved],
            ),
        }
    }

    /// Used share of a node after placing `request`, averaged over cpu, memory and any
    /// extended resource the pod asks for: 0.0 (empty) to 1.0 (full). Higher packs tighter.
    pub fn packing_score(&self, position: usize, request: &Resources) -> f64 {
        let e = &self.nodes[position];
        // Runs once per candidate node: accumulate, never allocate.
        let (mut sum, mut count) = (0.0f64, 0u32);
        let mut add = |alloc: i64, used: i64, reserved: i64, want: i64| {
            if alloc > 0 {
                sum += ((used + reserved + want) as f64 / alloc as f64).clamp(0.0, 1.0);
                count += 1;
            }
        };
        let a = &e.info.allocatable;
        add(
            a.cpu_milli,
            e.used.cpu_milli,
            e.reserved.cpu_milli,
            request.cpu_milli,
        );
        add(a.memory, e.used.memory, e.reserved.memory, request.memory);
        for (name, want) in &request.extended {
            add(
                a.extended(name),
                e.used.extended(name),
                e.reserved.extended(name),
                *want,
            );
        }
        if count == 0 {
            0.0
        } else {
            sum / count as f64
        }
    }

    /// The position among the `options` that `admits` passes where `request` packs tightest
    /// (the highest [`NodeLedger::packing_score`], the lowest position on ties), asking
    /// `admits` tightest first and only until it passes one: the planner's check of a node can
    /// allocate a member's devices, and judging every candidate to keep one was most of a DRA
    /// gang's filter call.
    pub fn tightest_where(
        &self,
        request: &Resources,
        options: impl Iterator<Item = usize>,
        mut admits: impl FnMut(usize) -> bool,
    ) -> Option<usize> {
        let mut scored: Vec<(f64, usize)> = options
            .map(|i| (self.packing_score(i, request), i))
            .collect();
        // Highest score first, then the lowest position: `tightest`'s preference.
        scored.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        scored.into_iter().map(|(_, i)| i).find(|&i| admits(i))
    }

    /// The position among `options` where `request` packs tightest (lowest position on ties):
    /// what [`NodeLedger::tightest_where`] finds, judged the plain way for its tests.
    #[cfg(test)]
    pub fn tightest(
        &self,
        request: &Resources,
        options: impl Iterator<Item = usize>,
    ) -> Option<usize> {
        let mut best: Option<(f64, usize)> = None;
        for i in options {
            let score = self.packing_score(i, request);
            if best.is_none_or(|(s, b)| score > s || (score == s && i < b)) {
                best = Some((score, i));
            }
        }
        best.map(|(_, i)| i)
    }
}

#[cfg(test)]
mod tests;
