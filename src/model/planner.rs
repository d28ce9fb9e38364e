//! The planner: whether a gang can reach quorum now, simulated member by member and node by
//! node (never as an aggregate sum, which is blind to fragmentation), and where each member
//! would go.
//!
//! A simulation never changes the ledger: the room it gives away is kept in an [`Overlay`],
//! and every simulation — of the gang being decided and of the competing gangs ahead of it —
//! runs through the one first-fit loop, [`first_fit_each`].

use std::cmp::Reverse;
use std::time::Instant;

use rustc_hash::FxHashMap as HashMap;

use super::gang::{Gang, SeatHolder};
use super::ledger::NodeLedger;
use super::membership::GangKey;
use super::objects::{node_admits, PodInfo};
use super::pods::PodEntry;
use super::resources::Resources;
use super::table::GangTable;

/// Room given away by a simulation, on top of the ledger. Only nodes touched are stored, so a
/// simulation never copies the whole node list; a checkpoint lets it undo a failed attempt.
#[derive(Default)]
pub(super) struct Overlay {
    taken: HashMap<usize, Resources>,
    log: Vec<(usize, Resources)>,
}

impl Overlay {
    pub fn get(&self, position: usize) -> Option<&Resources> {
        self.taken.get(&position)
    }

    pub fn take(&mut self, position: usize, r: &Resources) {
        self.taken.entry(position).or_default().add(r);
        self.log.push((position, r.clone()));
    }

    pub fn checkpoint(&self) -> usize {
        self.log.len()
    }

    pub fn rollback(&mut self, checkpoint: usize) {
        while self.log.len() > checkpoint {
            let (position, r) = self.log.pop().expect("log is longer than checkpoint");
            if let Some(t) = self.taken.get_mut(&position) {
                t.sub(&r);
            }
        }
    }
}

/// Outcome of planning a gang's placement.
#[derive(Debug)]
pub(super) enum GangPlan {
    /// `first_nodes`: the candidate nodes the requesting member may take; `seats`: where the
    /// other members needed for quorum go (members not created yet included, assumed to
    /// request `not_created`).
    Fits {
        first_nodes: Vec<usize>,
        seats: Vec<(SeatHolder, usize)>,
        not_created: Resources,
    },
    /// At most `fit` of `quorum` members can have nodes at the same time; `missing` of them
    /// are not created yet.
    DoesNotFit { fit: u32, quorum: u32, missing: u32 },
}

/// First node (in ledger order) that admits `pod` and has room for it in the simulation.
fn first_fit(ledger: &NodeLedger, pod: &PodInfo, overlay: &Overlay) -> Option<usize> {
    ledger.iter().find_map(|(i, e)| {
        (node_admits(e.info(), pod)
            && ledger
                .shortfall(i, &pod.requests, None, overlay.get(i))
                .is_none())
        .then_some(i)
    })
}

/// The first-fit loop: places `members` in order, each on the first node with room, taking
/// that room in `overlay`. Stops at the first member that fits nowhere (the room taken so far
/// stays taken, so the caller can count or roll back); all were placed when the result is as
/// long as `members`.
pub(super) fn first_fit_each<H: Clone>(
    ledger: &NodeLedger,
    members: &[(H, &PodInfo)],
    overlay: &mut Overlay,
) -> Vec<(H, usize)> {
    let mut placed = Vec::with_capacity(members.len());
    for (holder, p) in members {
        let Some(i) = first_fit(ledger, p, overlay) else {
            break;
        };
        overlay.take(i, &p.requests);
        placed.push((holder.clone(), i));
    }
    placed
}

/// Whether a waiting gang competes for room with the gang being planned: it holds nothing,
/// may take seats, and kube-scheduler tried one of its members recently.
fn competes(gang: &Gang, now: Instant, active_window: std::time::Duration) -> bool {
    !gang.is_placed_flag()
        && !gang.is_admitted()
        && gang.backoff_left(now).is_none()
        && gang
            .last_attempt
            .is_some_and(|t| now.saturating_duration_since(t) <= active_window)
}

impl GangTable {
    /// Plans the gang of `pod` with `pod` on one of `candidates` (ledger positions) and every
    /// other member its quorum still needs somewhere, after the competing gangs ahead of it.
    pub(super) fn plan(
        &self,
        key: &GangKey,
        pod: &PodInfo,
        candidates: &[usize],
        now: Instant,
    ) -> GangPlan {
        let facts = self.facts(key);
        let need = facts
            .spec
            .quorum
            .saturating_sub(facts.with_nodes + facts.confirmed_seats) as usize;
        let mut others: Vec<&PodEntry> = self
            .pending_members(key)
            .into_iter()
            .filter(|p| p.info.uid != pod.uid)
            .collect();
        sort_smallest_first(&mut others);
        let existing = largest_first(&others[..need.saturating_sub(1).min(others.len())]);
        // Members not created yet are simulated as copies of the largest member that exists,
        // so the first bind reserves room for the whole quorum even while a controller is
        // still creating pods (refusing until every member existed cost each early member a
        // rejected cycle and a back-off). A guess too small is bounded by the gang's timeout;
        // one too large only delays the gang until the real members exist.
        let missing = need.saturating_sub(others.len() + 1);
        let template = existing.first().map_or(pod, |p| larger(pod, &p.info));
        let chosen: Vec<(SeatHolder, &PodInfo)> = (0..missing as u32)
            .map(|n| (SeatHolder::NotCreatedYet(n), template))
            .chain(
                existing
                    .iter()
                    .map(|p| (SeatHolder::Member(p.info.uid.clone()), &p.info)),
            )
            .collect();

        let mut overlay = Overlay::default();
        self.reserve_gangs_ahead(key, &mut overlay, now);
        let base = overlay.checkpoint();
        let fits_first = |overlay: &Overlay, i: usize| {
            self.ledger
                .shortfall(i, &pod.requests, None, overlay.get(i))
                .is_none()
        };
        let fits = |first_nodes: Vec<usize>, seats: Vec<(SeatHolder, usize)>| GangPlan::Fits {
            first_nodes,
            seats,
            not_created: template.requests.clone(),
        };

        // Others first, then see which candidates are left for this pod: sound, and gives
        // kube-scheduler a choice of nodes.
        let seats = first_fit_each(&self.ledger, &chosen, &mut overlay);
        if seats.len() == chosen.len() {
            let first_nodes: Vec<usize> = candidates
                .iter()
                .copied()
                .filter(|&i| fits_first(&overlay, i))
                .collect();
            if !first_nodes.is_empty() {
                return fits(first_nodes, seats);
            }
        }
        let mut best =
            seats.len() + usize::from(candidates.iter().any(|&i| fits_first(&overlay, i)));
        overlay.rollback(base);

        // The others took the room this pod needs: try this pod first on a few candidates.
        let tries: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|&i| fits_first(&overlay, i))
            .take(self.config.max_first_node_attempts)
            .collect();
        for first in tries {
            overlay.take(first, &pod.requests);
            let seats = first_fit_each(&self.ledger, &chosen, &mut overlay);
            if seats.len() == chosen.len() {
                return fits(vec![first], seats);
            }
            best = best.max(seats.len() + 1);
            overlay.rollback(base);
        }
        GangPlan::DoesNotFit {
            fit: facts.with_nodes + facts.confirmed_seats + best as u32,
            quorum: facts.spec.quorum,
            missing: missing as u32,
        }
    }

    /// Reserves, in the simulation, room for every competing gang that comes before `key`
    /// (higher priority, then older) and fits. Gangs ahead that do not fit are skipped, so a
    /// big gang never blocks a smaller one behind it.
    fn reserve_gangs_ahead(&self, key: &GangKey, overlay: &mut Overlay, now: Instant) {
        let me = self.facts(key).spec;
        let my_order = (Reverse(me.priority), me.created, key);
        let mut ahead: Vec<(Reverse<i32>, i64, &GangKey)> = self
            .gangs
            .iter()
            .filter(|(k, g)| *k != key && competes(g, now, self.config.active_window))
            .map(|(k, g)| (Reverse(g.spec().priority), g.spec().created, k))
            .filter(|o| *o < my_order)
            .collect();
        ahead.sort();
        for (_, _, other) in ahead.into_iter().take(self.config.max_gangs_ahead) {
            let facts = self.facts(other);
            if self.is_placed(other, &facts) {
                continue;
            }
            let need = facts.spec.quorum.saturating_sub(facts.with_nodes) as usize;
            let mut pending = self.pending_members(other);
            if pending.len() < need {
                continue;
            }
            sort_smallest_first(&mut pending);
            let chosen: Vec<((), &PodInfo)> = largest_first(&pending[..need])
                .into_iter()
                .map(|p| ((), &p.info))
                .collect();
            let cp = overlay.checkpoint();
            if first_fit_each(&self.ledger, &chosen, overlay).len() < chosen.len() {
                overlay.rollback(cp);
            }
        }
    }
}

/// Smallest requests first, then by name: the members easiest to fit are the ones a
/// simulation commits to, which gives the gang its best chance.
pub(super) fn sort_smallest_first(members: &mut [&PodEntry]) {
    members.sort_by(|a, b| {
        let (ra, rb) = (&a.info.requests, &b.info.requests);
        (ra.cpu_milli, ra.memory, &ra.extended, &a.info.name).cmp(&(
            rb.cpu_milli,
            rb.memory,
            &rb.extended,
            &b.info.name,
        ))
    });
}

/// The larger of two pods in the order of [`largest_first`].
pub(super) fn larger<'a>(a: &'a PodInfo, b: &'a PodInfo) -> &'a PodInfo {
    let key = |p: &'a PodInfo| {
        let r = &p.requests;
        (&r.extended, r.cpu_milli, r.memory)
    };
    if key(b) > key(a) {
        b
    } else {
        a
    }
}

/// The same members, largest first, for first-fit-decreasing packing.
pub(super) fn largest_first<'a>(members: &[&'a PodEntry]) -> Vec<&'a PodEntry> {
    let mut v = members.to_vec();
    v.sort_by(|a, b| {
        let (ra, rb) = (&a.info.requests, &b.info.requests);
        (&rb.extended, rb.cpu_milli, rb.memory, &a.info.name).cmp(&(
            &ra.extended,
            ra.cpu_milli,
            ra.memory,
            &b.info.name,
        ))
    });
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{node, pod};

    fn ledger(nodes: &[(&str, i64)]) -> NodeLedger {
        let mut l = NodeLedger::default();
        for (name, cpu) in nodes {
            l.upsert(node(name).cpu(*cpu).build());
        }
        l
    }

    fn names(l: &NodeLedger, placed: &[(&str, usize)]) -> Vec<String> {
        placed
            .iter()
            .map(|(who, i)| format!("{who}@{}", l.at(*i).name()))
            .collect()
    }

    #[test]
    fn first_fit_walks_nodes_in_ledger_order_and_counts_what_it_already_placed() {
        let l = ledger(&[("a", 1000), ("b", 1000)]);
        let p: Vec<PodInfo> = (0..3)
            .map(|i| pod(&format!("p{i}")).cpu(600).build())
            .collect();
        let members: Vec<(&str, &PodInfo)> = vec![("p0", &p[0]), ("p1", &p[1]), ("p2", &p[2])];
        let mut overlay = Overlay::default();
        let placed = first_fit_each(&l, &members, &mut overlay);
        // Two 600m pods never share a 1000m node; the third fits nowhere and stops the loop.
        assert_eq!(names(&l, &placed), vec!["p0@a", "p1@b"]);
        assert_eq!(overlay.get(0), Some(&p[0].requests));
        // The ledger itself is untouched.
        assert!(l.at(0).reserved().is_zero() && l.at(0).used().is_zero());
    }

    #[test]
    fn first_fit_skips_nodes_the_member_may_not_use() {
        let mut l = ledger(&[("cordoned", 1000), ("gpu", 1000), ("plain", 1000)]);
        l.upsert(node("cordoned").cpu(1000).unschedulable().build());
        l.upsert(node("gpu").cpu(1000).label("pool", "gpu").build());
        let wants_gpu = pod("w").node_selector("pool", "gpu").build();
        let any = pod("any").build();
        let mut overlay = Overlay::default();
        let placed = first_fit_each(&l, &[("w", &wants_gpu), ("any", &any)], &mut overlay);
        assert_eq!(names(&l, &placed), vec!["w@gpu", "any@gpu"]);
    }

    #[test]
    fn a_rollback_gives_back_exactly_what_was_taken_after_the_checkpoint() {
        let l = ledger(&[("a", 1000)]);
        let p = pod("p").cpu(400).build();
        let mut overlay = Overlay::default();
        overlay.take(0, &p.requests);
        let cp = overlay.checkpoint();
        assert_eq!(first_fit_each(&l, &[((), &p)], &mut overlay).len(), 1);
        assert_eq!(
            first_fit_each(&l, &[((), &p)], &mut overlay).len(),
            0,
            "1000m holds two 400m pods, not three"
        );
        overlay.rollback(cp);
        assert_eq!(overlay.get(0).map(|r| r.cpu_milli), Some(400));
        overlay.rollback(0);
        assert_eq!(overlay.get(0).map(|r| r.cpu_milli), Some(0));
    }

    #[test]
    fn members_not_created_yet_are_assumed_as_large_as_the_largest_member() {
        let small = pod("small").cpu(100).build();
        let big = pod("big").cpu(900).build();
        let gpu = pod("gpu").cpu(50).gpu(1).build();
        assert_eq!(larger(&small, &big).name, big.name);
        assert_eq!(larger(&big, &small).name, big.name);
        // Extended resources rank first: a GPU pod is larger than any CPU-only pod.
        assert_eq!(larger(&big, &gpu).name, gpu.name);
    }
}
