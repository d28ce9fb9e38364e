//! A model-based property test of the whole table. Random interleavings of watch
//! events (nodes and pods added, changed, deleted; re-lists, some after a lost delete; all
//! through `apply_event`, from Kubernetes JSON), filter and bind calls as kube-scheduler makes
//! them (on the node the filter chose, or on any node), binding results (success, or refused
//! for good), deletions with and without grace, pods placed by another scheduler, restarts
//! (a new table rebuilt from a re-list), clock jumps past timeouts, back-offs and windows, and
//! a gang's Volcano PodGroup (with per-task minimums) created and deleted, nodes cordoned and
//! uncordoned while gangs gather, preempt calls whose body claims a priority the pod does
//! not have, restarts and leader hand-overs (a table rebuilt from the standby's caches) of a
//! muster killed in the middle of its bindings (those in flight lost), whose new table first
//! repairs the gangs left partly bound.
//! After every step the invariants are checked (see [`Check`]): among them, a gang bound
//! together never lands on a node cordoned at that moment (the last look before binding), a
//! preempt call never evicts for a priority the watch does not show and never hands a
//! disruption to the evictor by itself (evict-for-whole), and no gang holds seats longer than
//! its timeout plus one expiry tick (liveness). After the last step, everything is deleted and
//! the table must be empty.
//!
//! A failure prints the minimal failing script and the seed of the run: `MODEL_CHECK_SEED=<hex>`
//! replays the same cases.
//!
//! The normal test run tries 1,500 cases (`PROPTEST_CASES` sets another number). A long run,
//! with the totals printed:
//! `PROPTEST_CASES=1000000 cargo test --release --lib model_check -- --nocapture`

mod cluster;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::watcher::Event;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};

use self::cluster::{g1_pod_group, Cluster, SimNode, SimPod, NODES, NODE_CPU, SLOTS};
use super::*;
use crate::cluster::watch::{apply_event, Relist};

#[derive(Clone, Debug)]
enum Step {
    /// Adds the node, or changes its labels if it exists.
    PutNode(usize),
    /// Deletes the node if nothing runs or is being bound there.
    DeleteNode(usize),
    CreatePod(usize),
    DeletePod {
        slot: usize,
        grace: bool,
    },
    /// The pods being deleted with grace are gone.
    FinishDeletes,
    Filter(usize),
    /// A filter for a pod muster never saw (deleted, or forged).
    FilterGhost,
    /// kube-scheduler's bind call: on the node its filter call chose (a whole scheduling
    /// cycle), or on any node.
    Bind {
        slot: usize,
        anywhere: Option<usize>,
    },
    /// One binding in flight finishes: created, or refused for good.
    Finish {
        pick: usize,
        ok: bool,
    },
    /// Another scheduler puts a plain pod on a node (only where its kubelet has room).
    Foreign {
        node: usize,
        cpu: i64,
    },
    /// A watch re-lists; for pods, optionally after a delete it missed.
    Relist {
        pods: bool,
        lost: Option<usize>,
    },
    /// muster restarts; with `cut`, it was killed in the middle of its bindings: those in
    /// flight are never made (a gang may be left partly bound), and the new table's first
    /// decision is the repair of partly bound gangs, as a restarted muster's is.
    Restart {
        cut: bool,
    },
    /// Leadership moves to the standby, which decides from a table rebuilt from its own caches
    /// (`Shared::take_over`); with `cut`, the old leader's bindings in flight are lost.
    HandOver {
        cut: bool,
    },
    Advance(Duration),
    /// `g1`'s PodGroup is created (or changed to the same) or deleted.
    PodGroup(bool),
    /// The node is cordoned, or uncordoned if it was.
    Cordon(usize),
    /// kube-scheduler's preempt call for the pod in the slot, on the node, with every pod
    /// there as a victim; the body claims a priority of 1000 (every pod here has 0).
    Preempt {
        slot: usize,
        node: usize,
    },
}

fn step() -> impl Strategy<Value = Step> {
    let node = 0..NODES.len();
    let slot = 0..SLOTS.len();
    prop_oneof![
        2 => node.clone().prop_map(Step::PutNode),
        1 => node.clone().prop_map(Step::DeleteNode),
        6 => slot.clone().prop_map(Step::CreatePod),
        1 => (slot.clone(), any::<bool>()).prop_map(|(slot, grace)| Step::DeletePod { slot, grace }),
        1 => Just(Step::FinishDeletes),
        4 => slot.clone().prop_map(Step::Filter),
        1 => Just(Step::FilterGhost),
        8 => (slot.clone(), proptest::option::weighted(0.15, node.clone()))
            .prop_map(|(slot, anywhere)| Step::Bind { slot, anywhere }),
        4 => (0..8usize, proptest::bool::weighted(0.85)).prop_map(|(pick, ok)| Step::Finish { pick, ok }),
        1 => (node, 1..6i64).prop_map(|(node, c)| Step::Foreign { node, cpu: c * 100 }),
        1 => (any::<bool>(), proptest::option::weighted(0.2, slot))
            .prop_map(|(pods, lost)| Step::Relist { pods, lost }),
        1 => any::<bool>().prop_map(|cut| Step::Restart { cut }),
        1 => any::<bool>().prop_map(|cut| Step::HandOver { cut }),
        2 => prop_oneof![Just(1u64), Just(6), Just(31), Just(301)]
            .prop_map(|s| Step::Advance(Duration::from_secs(s))),
        1 => proptest::bool::weighted(0.7).prop_map(Step::PodGroup),
        1 => (0..NODES.len()).prop_map(Step::Cordon),
        1 => (0..SLOTS.len(), 0..NODES.len()).prop_map(|(slot, node)| Step::Preempt { slot, node }),
    ]
}

/// The table, the cluster it follows, and what the checks need to remember.
struct Check {
    table: GangTable,
    cluster: Cluster,
    pod_watch: Relist,
    node_watch: Relist,
    now: Instant,
    /// The node each pod's last filter call chose.
    chosen: Vec<(String, String)>,
    /// Gangs allowed some but fewer than quorum members with nodes, and why: a member with a
    /// node was deleted, or a binding failed for good (and a `GangBindFailed` Event said so).
    excused: BTreeSet<&'static str>,
    /// Gangs a restarted table found partly bound (muster killed mid-binding) and is finishing
    /// or evicting: allowed partial until they are whole or their bound part is evicted.
    repairing: BTreeSet<&'static str>,
    /// Nodes where another scheduler's pod landed on seats (bound + seats may exceed
    /// allocatable there until the seats are re-planned or released).
    disturbed: BTreeSet<String>,
    checks: u64,
    /// The decisions of this step (filter verdicts, bind decisions), kept only when
    /// `MODEL_CHECK_TRACE` names a file: see [`Trace`].
    decisions: Option<String>,
    /// What the case exercised: gangs bound together (of them, `g1` with its per-task
    /// minimums from its PodGroup), bindings refused, restarts, preempt calls judged.
    seen: [u64; 7],
}

impl Check {
    fn new() -> Self {
        let cluster = Cluster::with_pod_group();
        Check {
            table: cluster.fresh_table(),
            cluster,
            pod_watch: Relist::default(),
            node_watch: Relist::default(),
            now: Instant::now(),
            chosen: Vec::new(),
            excused: BTreeSet::new(),
            repairing: BTreeSet::new(),
            disturbed: BTreeSet::new(),
            checks: 0,
            decisions: Trace::wanted().then(String::new),
            seen: [0; 7],
        }
    }

    /// What this step decided and left: its decisions, the notices raised, every gang's view
    /// and each node's use and reservations. Only when a trace is written.
    fn outcome(&mut self) -> Option<String> {
        let decisions = std::mem::take(self.decisions.as_mut()?);
        let mut nodes: Vec<String> = self
            .table
            .ledger
            .iter()
            .map(|(_, e)| format!("{} {:?} {:?}", e.name(), e.used(), e.reserved()))
            .collect();
        nodes.sort();
        Some(format!(
            "{decisions}{:?}\n{:?}\n{:?}\n{nodes:?}",
            self.table.notices,
            self.table.views(self.now),
            self.table.gauges(self.now),
        ))
    }

    fn pod_event(&mut self, e: Event<Pod>) {
        apply_event(&mut self.table, &mut self.pod_watch, e);
    }

    fn node_event(&mut self, e: Event<Node>) {
        apply_event(&mut self.table, &mut self.node_watch, e);
    }

    /// A member that has a node leaves (deleted, or being deleted): its gang may be partial.
    fn excuse_if_placed(&mut self, p: &SimPod) {
        if let Some((gang, quorum)) = p.gang() {
            // Or any member of a gang left partly bound: the repair covers gangs whose members
            // all exist (a gang that lost one is not finished whole, see `verbs::repair`).
            if self.cluster.node_of(p).is_some()
                || self.cluster.partial_gang(gang, quorum).is_some()
            {
                self.excused.insert(gang);
            }
        }
    }

    fn apply(&mut self, step: &Step) -> Result<(), TestCaseError> {
        match *step {
            Step::PutNode(i) => {
                let name = NODES[i].to_string();
                let node = self.cluster.nodes.entry(name.clone()).or_insert(SimNode {
                    name,
                    labelled: false,
                    cordoned: false,
                });
                node.labelled = !node.labelled;
                let obj = node.object();
                self.node_event(Event::Apply(obj));
            }
            Step::DeleteNode(i) => {
                let name = NODES[i];
                if self.cluster.used(name) == 0 {
                    if let Some(n) = self.cluster.nodes.remove(name) {
                        self.node_event(Event::Delete(n.object()));
                    }
                }
            }
            Step::CreatePod(slot) => {
                if self.cluster.live_in_slot(slot).is_none() {
                    let g = self.cluster.next_generation();
                    let p = SimPod {
                        uid: format!("uid-{slot}-{g}"),
                        name: format!("p{slot}-{g}"),
                        slot: Some(slot),
                        cpu: SLOTS[slot].1,
                        node: None,
                        terminating: false,
                    };
                    self.pod_event(Event::Apply(p.object()));
                    self.cluster.pods.push(p);
                }
            }
            Step::DeletePod { slot, grace } => {
                if let Some(p) = self.cluster.live_in_slot(slot).cloned() {
                    self.excuse_if_placed(&p);
                    if grace {
                        let q = self.cluster.pod_mut(&p.uid).expect("live");
                        q.terminating = true;
                        let obj = q.object();
                        self.pod_event(Event::Apply(obj));
                    } else {
                        self.cluster.pods.retain(|q| q.uid != p.uid);
                        self.pod_event(Event::Delete(p.object()));
                    }
                }
            }
            Step::FinishDeletes => {
                let (gone, kept) = std::mem::take(&mut self.cluster.pods)
                    .into_iter()
                    .partition(|p| p.terminating);
                self.cluster.pods = kept;
                for p in gone {
                    self.pod_event(Event::Delete(p.object()));
                }
            }
            Step::Filter(slot) => self.filter(slot)?,
            Step::FilterGhost => {
                let (pods, gangs) = (self.table.pod_count(), self.table.gangs.len());
                let ghost = testkit::pod("ghost").gang("g0", 100_000).build();
                let names: Vec<&str> = NODES.to_vec();
                let verdicts = self.table.filter(&ghost, &names, self.now);
                decided(&mut self.decisions, || {
                    format!("filter ghost: {verdicts:?}")
                });
                prop_assert!(verdicts
                    .iter()
                    .all(|v| matches!(v, NodeVerdict::Unresolvable(_))));
                prop_assert_eq!(
                    (pods, gangs),
                    (self.table.pod_count(), self.table.gangs.len())
                );
            }
            Step::Bind { slot, anywhere } => self.bind(slot, anywhere)?,
            Step::Finish { pick, ok } => self.finish(pick, ok)?,
            Step::Foreign { node, cpu } => {
                let name = NODES[node];
                if self.cluster.nodes.contains_key(name)
                    && self.cluster.used(name) + cpu <= NODE_CPU
                {
                    let g = self.cluster.next_generation();
                    let p = SimPod {
                        uid: format!("uid-foreign-{g}"),
                        name: format!("foreign-{g}"),
                        slot: None,
                        cpu,
                        node: Some(name.to_string()),
                        terminating: false,
                    };
                    self.pod_event(Event::Apply(p.object()));
                    self.cluster.pods.push(p);
                    self.disturbed.insert(name.to_string());
                }
            }
            Step::Relist { pods, lost } => {
                if pods {
                    if let Some(p) = lost.and_then(|s| self.cluster.live_in_slot(s)).cloned() {
                        // Deleted while the watch was down: only the re-list tells.
                        self.excuse_if_placed(&p);
                        self.cluster.pods.retain(|q| q.uid != p.uid);
                    }
                    self.relist_pods();
                } else {
                    self.relist_nodes();
                }
            }
            Step::Restart { cut } => self.restart(cut, false)?,
            Step::HandOver { cut } => self.restart(cut, true)?,
            Step::Advance(d) => {
                self.now += d;
                self.table.expire(self.now);
            }
            Step::Cordon(i) => {
                if let Some(node) = self.cluster.nodes.get_mut(NODES[i]) {
                    node.cordoned = !node.cordoned;
                    let obj = node.object();
                    self.node_event(Event::Apply(obj));
                }
            }
            Step::Preempt { slot, node } => self.preempt(slot, node)?,
            Step::PodGroup(present) => {
                self.cluster.pod_group = present;
                let def = g1_pod_group();
                if present {
                    self.table.apply_pod_group(def);
                } else {
                    self.table.remove_pod_group(def.api, &def.key);
                }
            }
        }
        Ok(())
    }

    fn relist_pods(&mut self) {
        self.pod_event(Event::Init);
        for p in self.cluster.pods.clone() {
            self.pod_event(Event::InitApply(p.object()));
        }
        self.pod_event(Event::InitDone);
    }

    fn relist_nodes(&mut self) {
        self.node_event(Event::Init);
        for n in self.cluster.nodes.values().cloned().collect::<Vec<_>>() {
            self.node_event(Event::InitApply(n.object()));
        }
        self.node_event(Event::InitDone);
    }

    /// A pod kube-scheduler would try: live, no node, not being bound.
    fn schedulable(&self, slot: usize) -> Option<SimPod> {
        self.cluster
            .live_in_slot(slot)
            .filter(|p| self.cluster.node_of(p).is_none())
            .cloned()
    }

    fn filter(&mut self, slot: usize) -> Result<(), TestCaseError> {
        let Some(p) = self.schedulable(slot) else {
            return Ok(());
        };
        let seen = self.table.seen_pod("ml", &p.name, &p.uid);
        prop_assert!(seen.is_ok(), "the watch delivered {}", p.name);
        let seen = seen.expect("checked").clone();
        let names: Vec<&str> = self.cluster.nodes.keys().map(String::as_str).collect();
        let verdicts = self.table.filter(&seen, &names, self.now);
        decided(&mut self.decisions, || {
            format!("filter {}: {verdicts:?}", p.name)
        });
        let fits = names
            .iter()
            .zip(&verdicts)
            .find(|(_, v)| **v == NodeVerdict::Fits);
        self.chosen.retain(|(u, _)| *u != p.uid);
        if let Some((n, _)) = fits {
            self.chosen.push((p.uid.clone(), n.to_string()));
        }
        Ok(())
    }

    fn bind(&mut self, slot: usize, anywhere: Option<usize>) -> Result<(), TestCaseError> {
        let Some(p) = self.schedulable(slot) else {
            return Ok(());
        };
        let node = match anywhere {
            Some(i) => NODES[i].to_string(),
            None => {
                // A scheduling cycle: the filter (unless one just ran), then the bind call
                // on the node it offered.
                if !self.chosen.iter().any(|(u, _)| *u == p.uid) {
                    self.filter(slot)?;
                }
                match self.chosen.iter().find(|(u, _)| *u == p.uid) {
                    Some((_, n)) => n.clone(),
                    None => return Ok(()),
                }
            }
        };
        self.chosen.retain(|(u, _)| *u != p.uid);
        let request = BindRequest {
            namespace: "ml",
            name: &p.name,
            uid: &p.uid,
            node: &node,
        };
        let decision = self.table.bind(request, self.now);
        decided(&mut self.decisions, || {
            format!("bind {} on {node}: {decision:?}", p.name)
        });
        let together = matches!(decision, BindDecision::BindGang { .. });
        let members = match decision {
            BindDecision::BindNow { pod, node } => vec![(pod, node)],
            BindDecision::BindGang { gang, members } => {
                self.seen[0] += 1;
                self.seen[3] += u64::from(&*gang.name == "g1");
                members
            }
            _ => Vec::new(),
        };
        for (pod, node) in members {
            // The last look before binding: muster binds no member of a gang on a node
            // cordoned now (kube-scheduler's own cycle checked the requester's node; muster
            // decides for the others).
            prop_assert!(
                !together || self.cluster.nodes.get(&*node).is_none_or(|n| !n.cordoned),
                "{} bound with its gang to cordoned node {}",
                pod.name,
                node
            );
            prop_assert!(
                self.cluster.in_flight_node(&pod.uid).is_none(),
                "{} bound twice",
                pod.name
            );
            self.cluster
                .in_flight
                .push((pod.uid.to_string(), node.to_string()));
        }
        Ok(())
    }

    /// A preempt call with a forged priority: muster judges the pod as its watch has it
    /// (priority 0, like every pod here), so no victim is of lower priority: no candidate with
    /// a victim is kept, and nothing is handed to the evictor.
    fn preempt(&mut self, slot: usize, node: usize) -> Result<(), TestCaseError> {
        let Some(p) = self.schedulable(slot) else {
            return Ok(());
        };
        let Ok(seen) = self.table.seen_pod("ml", &p.name, &p.uid).cloned() else {
            return Ok(());
        };
        let name = NODES[node];
        let victims: Vec<String> = self
            .cluster
            .pods
            .iter()
            .filter(|q| q.node.as_deref() == Some(name))
            .map(|q| q.uid.clone())
            .collect();
        let forged = PodInfo {
            priority: 1000,
            ..seen
        };
        let candidate = PreemptCandidate {
            node: name.to_string(),
            victims,
            pdb_violations: 0,
        };
        let d = self.table.preempt(&forged, vec![candidate], self.now);
        prop_assert!(
            d.kept.iter().all(|c| c.victims.is_empty()),
            "evicts for a forged priority: {:?}",
            d.kept
        );
        prop_assert!(self.table.take_disruptions().is_empty());
        self.seen[4] += 1;
        Ok(())
    }

    fn finish(&mut self, pick: usize, ok: bool) -> Result<(), TestCaseError> {
        if self.cluster.in_flight.is_empty() {
            return Ok(());
        }
        let (uid, node) = self
            .cluster
            .in_flight
            .remove(pick % self.cluster.in_flight.len());
        let exists = self.cluster.pod(&uid).is_some();
        if ok && exists {
            let p = self.cluster.pod_mut(&uid).expect("exists");
            p.node = Some(node);
            let obj = p.object();
            self.pod_event(Event::Apply(obj));
            return Ok(());
        }
        // Refused for good (or the pod is gone: 404).
        self.seen[1] += 1;
        let pod = PodRef {
            namespace: Arc::from("ml"),
            name: Arc::from(self.cluster.pod(&uid).map_or("gone", |p| p.name.as_str())),
            uid: Arc::from(uid.as_str()),
        };
        self.table.bind_finished(
            &pod,
            &Arc::from(node.as_str()),
            Err("refused".into()),
            self.now,
        );
        let told = self
            .table
            .take_notices()
            .iter()
            .any(|n| n.kind == NoticeKind::BindFailed && *n.pod.uid == *uid);
        if let Some((gang, _)) = self.cluster.pod(&uid).and_then(|p| p.gang()) {
            prop_assert!(
                told,
                "a failed binding of a member of {gang} raises an Event"
            );
            self.excused.insert(gang);
        }
        Ok(())
    }

    /// muster restarts: bindings it sent are made, and a new table is built from re-lists.
    /// It must agree with the old one on what is bound, what each node has in use, and
    /// which gangs are placed.
    fn restart(&mut self, cut: bool, hand_over: bool) -> Result<(), TestCaseError> {
        self.seen[2] += 1;
        // Killed mid-binding: the bindings in flight are lost, their pods stay pending.
        let in_flight = std::mem::take(&mut self.cluster.in_flight);
        for (uid, node) in in_flight.into_iter().filter(|_| !cut) {
            if let Some(p) = self.cluster.pod_mut(&uid) {
                p.node = Some(node);
                let obj = p.object();
                self.pod_event(Event::Apply(obj));
            }
        }
        let old = if hand_over {
            // The standby's caches saw the same watch events; it rebuilds from them.
            let fresh = self.table.rebuilt();
            std::mem::replace(&mut self.table, fresh)
        } else {
            let old = std::mem::replace(&mut self.table, self.cluster.fresh_table());
            self.pod_watch = Relist::default();
            self.node_watch = Relist::default();
            self.relist_nodes();
            self.relist_pods();
            old
        };
        self.table.take_notices();
        for p in &self.cluster.pods {
            let node = |t: &GangTable| {
                t.pods
                    .get(p.uid.as_str())
                    .and_then(|e| e.info.node_name.clone())
            };
            prop_assert_eq!(node(&old), node(&self.table), "{} bound", &p.name);
        }
        // The old table counted the lost bindings as made (assumed): only without a cut do
        // the two agree on use and placed gangs.
        if !cut {
            for (_, e) in old.ledger.iter() {
                let new = self.table.ledger.get(e.name()).map(|n| n.used().clone());
                prop_assert_eq!(Some(e.used().clone()), new, "use of {}", e.name());
            }
            let placed = |t: &GangTable| -> BTreeSet<String> {
                t.views(self.now)
                    .into_iter()
                    .filter(|v| v.state == GangState::Placed)
                    .map(|v| v.name)
                    .collect()
            };
            prop_assert_eq!(placed(&old), placed(&self.table));
        }
        self.chosen.clear();
        // The new leader's first decision (`Shared::start_deciding`): gangs left partly bound
        // are finished first, or their bound part is evicted (never-half).
        let found = self.table.repair_partly_bound(self.now);
        self.table.take_partly_bound();
        self.seen[5] += found.len() as u64;
        for f in &found {
            if let Some(gang) = sim_gang(&f.gang.name) {
                self.repairing.insert(gang);
            }
            if let PartlyBoundOutcome::Finishing { seats } = &f.outcome {
                // Room held for every remaining member, ahead of any other decision.
                for (pod, _) in seats {
                    prop_assert!(self.table.holds_seat(&pod.uid), "{} has no seat", pod.name);
                }
            }
        }
        // Every gang left partly bound, with its members all there and its quorum decided,
        // was found.
        for (gang, quorum) in [("g0", 2u32), ("g1", 3)] {
            if self.cluster.partial_gang(gang, quorum).is_some() && !self.repairing.contains(gang) {
                let key = GangKey::new("ml", gang);
                prop_assert!(
                    self.table.partly_bound_counts(&key).is_none(),
                    "gang {} left partly bound and not repaired",
                    gang
                );
                self.excused.insert(gang);
            }
        }
        Ok(())
    }

    /// The evictor: every member of a gang handed to it is evicted (with grace: Terminating
    /// until `FinishDeletes`). Only gangs found partly bound are (no preempt call here keeps a
    /// candidate, so none commits a preemption).
    fn evict(&mut self) -> Result<(), TestCaseError> {
        for f in self.table.take_partly_bound() {
            if let Some(gang) = sim_gang(&f.gang.name) {
                self.repairing.insert(gang);
            }
        }
        for d in self.table.take_disruptions() {
            prop_assert!(
                sim_gang(&d.gang.name).is_some_and(|g| self.repairing.contains(g)),
                "gang {} evicted but not found partly bound",
                d.gang
            );
            for pod in &d.others {
                let Some(p) = self.cluster.pod_mut(&pod.uid) else {
                    continue;
                };
                prop_assert!(p.node.is_some(), "{} evicted without a node", pod.name);
                p.terminating = true;
                let obj = p.object();
                self.pod_event(Event::Apply(obj));
            }
            self.seen[6] += 1;
        }
        Ok(())
    }

    /// The invariants, after every step.
    fn check(&mut self) -> Result<(), TestCaseError> {
        self.evict()?;
        self.table.take_notices();
        self.table.take_released();
        // Liveness: seats are held only by an admitted gang, for at most its timeout plus one
        // expiry tick (the clock moves only with `Advance`, which runs the expiry).
        let tick = Duration::from_secs(1);
        for (key, g) in &self.table.gangs {
            if g.seats().is_empty() {
                continue;
            }
            let timeout = g.spec().timeout_or(self.table.config.default_timeout);
            match g.phase() {
                Phase::Admitted { since } => prop_assert!(
                    self.now.saturating_duration_since(since) <= timeout + tick,
                    "gang {} holds seats {:?} after admission (timeout {:?})",
                    key,
                    self.now.saturating_duration_since(since),
                    timeout
                ),
                other => prop_assert!(false, "gang {} holds seats while {:?}", key, other),
            }
            self.checks += 1;
        }
        prop_assert_eq!(self.table.pod_count(), self.cluster.pods.len());
        prop_assert_eq!(self.table.node_count(), self.cluster.nodes.len());
        for (_, e) in self.table.ledger.iter() {
            let name = e.name().to_string();
            let alloc = &e.info().allocatable;
            // What muster believes is in use is what the cluster runs there, and fits.
            prop_assert_eq!(
                e.used().cpu_milli,
                self.cluster.used(&name),
                "use of {}",
                name
            );
            prop_assert!(
                e.used().cpu_milli <= alloc.cpu_milli,
                "{} over-committed",
                name
            );
            // The ledger's reservations are exactly the seats on the node.
            let seats: i64 = self
                .table
                .gangs
                .values()
                .flat_map(|g| g.seats().values())
                .filter(|s| *s.node == *name)
                .map(|s| s.requests.cpu_milli)
                .sum();
            prop_assert_eq!(e.reserved().cpu_milli, seats, "seats on {}", name);
            // Bound + seats within allocatable, unless another scheduler's pod landed there.
            if e.used().cpu_milli + seats <= alloc.cpu_milli {
                self.disturbed.remove(&name);
            } else {
                prop_assert!(
                    self.disturbed.contains(&name),
                    "{} over-committed by seats: {} used + {} seated",
                    name,
                    e.used().cpu_milli,
                    seats
                );
            }
            self.checks += 4;
        }
        // Never half a gang: live members with nodes are none, or meet the quorum and (g1)
        // every task's minimum.
        for (gang, quorum) in [("g0", 2u32), ("g1", 3)] {
            match self.cluster.partial_gang(gang, quorum) {
                None => {
                    self.excused.remove(gang);
                    self.repairing.remove(gang);
                }
                Some(counts) => prop_assert!(
                    self.excused.contains(gang) || self.repairing.contains(gang),
                    "gang {} has {} with nodes",
                    gang,
                    counts
                ),
            }
            self.checks += 1;
        }
        self.checks += 2;
        Ok(())
    }

    /// Everything is deleted: nothing may be left in the table.
    fn delete_everything(&mut self) -> Result<(), TestCaseError> {
        for (uid, node) in std::mem::take(&mut self.cluster.in_flight) {
            let pod = PodRef {
                namespace: Arc::from("ml"),
                name: Arc::from("any"),
                uid: Arc::from(uid.as_str()),
            };
            self.table.bind_finished(
                &pod,
                &Arc::from(node.as_str()),
                Err("gone".into()),
                self.now,
            );
        }
        for p in std::mem::take(&mut self.cluster.pods) {
            self.pod_event(Event::Delete(p.object()));
        }
        for n in std::mem::take(&mut self.cluster.nodes).into_values() {
            self.node_event(Event::Delete(n.object()));
        }
        prop_assert_eq!(self.table.pod_count(), 0);
        prop_assert_eq!(self.table.node_count(), 0);
        prop_assert_eq!(self.table.gangs.len(), 0);
        self.checks += 3;
        Ok(())
    }
}

/// The model check's name of a gang (`g0`, `g1`).
fn sim_gang(name: &str) -> Option<&'static str> {
    ["g0", "g1"].into_iter().find(|g| *g == name)
}

/// Keeps a decision for the trace, when one is written.
fn decided(decisions: &mut Option<String>, what: impl FnOnce() -> String) {
    if let Some(d) = decisions {
        d.push_str(&what());
        d.push('\n');
    }
}

/// A differential trace of the model check: with `MODEL_CHECK_TRACE=<file>` (and a fixed
/// `MODEL_CHECK_SEED`), one line per case is appended to the file: a hash of every step and
/// of what it decided and left (see [`Check::outcome`]), then the case's hash. Two versions of
/// the model that decide alike write the same file, so a refactoring shows it changed no
/// decision by `cmp` of the two files.
#[derive(Default)]
struct Trace {
    steps: Vec<u64>,
}

impl Trace {
    fn wanted() -> bool {
        std::env::var_os("MODEL_CHECK_TRACE").is_some()
    }

    fn step(&mut self, step: &Step, outcome: &str) {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut h = DefaultHasher::new();
        format!("{step:?}").hash(&mut h);
        outcome.hash(&mut h);
        self.steps.push(h.finish());
    }

    fn finish(self) {
        use std::hash::{DefaultHasher, Hash, Hasher};
        use std::io::Write;
        let Some(path) = std::env::var_os("MODEL_CHECK_TRACE") else {
            return;
        };
        let mut h = DefaultHasher::new();
        self.steps.hash(&mut h);
        let steps: Vec<String> = self.steps.iter().map(|s| format!("{s:016x}")).collect();
        let line = format!("{:016x} {}\n", h.finish(), steps.join(" "));
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("the trace file opens");
        f.write_all(line.as_bytes()).expect("the trace is written");
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500)
}

#[test]
fn the_table_keeps_its_invariants_under_any_interleaving() {
    let config = Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    };
    // A fresh seed per run, unless one is given to replay a failure.
    let seed: [u8; 32] = match std::env::var("MODEL_CHECK_SEED") {
        Ok(hex) => {
            let bytes: Vec<u8> = (0..hex.len())
                .step_by(2)
                .filter_map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
                .collect();
            bytes
                .try_into()
                .expect("MODEL_CHECK_SEED: 64 hex digits, as a failure prints it")
        }
        Err(_) => {
            let mut seed = [0u8; 32];
            let clock = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            seed[..16].copy_from_slice(&clock.to_le_bytes());
            seed[16..20].copy_from_slice(&std::process::id().to_le_bytes());
            seed
        }
    };
    let seed_hex: String = seed.iter().map(|b| format!("{b:02x}")).collect();
    let rng = proptest::test_runner::TestRng::from_seed(
        proptest::test_runner::RngAlgorithm::ChaCha,
        &seed,
    );
    let mut runner = TestRunner::new_with_rng(config, rng);
    // Cases passed (shrinking's included), steps, checks, and what was exercised.
    let totals: [AtomicU64; 10] = Default::default();
    let result = runner.run(&proptest::collection::vec(step(), 1..80), |script| {
        let mut c = Check::new();
        // A cluster starts with its nodes; steps delete and add them again.
        for i in 0..NODES.len() {
            c.apply(&Step::PutNode(i))?;
        }
        let mut trace = Trace::default();
        for s in &script {
            c.apply(s)?;
            if let Some(outcome) = c.outcome() {
                trace.step(s, &outcome);
            }
            c.check()?;
        }
        trace.finish();
        c.delete_everything()?;
        let counts = [
            1,
            script.len() as u64,
            c.checks,
            c.seen[0],
            c.seen[1],
            c.seen[2],
            c.seen[3],
            c.seen[4],
            c.seen[5],
            c.seen[6],
        ];
        for (total, n) in totals.iter().zip(counts) {
            total.fetch_add(n, Ordering::Relaxed);
        }
        Ok(())
    });
    let [cases, steps, checks, gangs, refused, restarts, with_tasks, preempts, repaired, evicted] =
        totals.map(AtomicU64::into_inner);
    eprintln!(
        "model check (MODEL_CHECK_SEED={seed_hex}): {cases} cases passed, {steps} steps, \
         {checks} invariant checks; exercised {gangs} gangs bound together ({with_tasks} with \
         per-task minimums), {refused} bindings refused, {restarts} restarts, {preempts} \
         preempt calls judged, {repaired} gangs found partly bound at a restart ({evicted} \
         evicted)",
    );
    if let Err(e) = result {
        match e {
            TestError::Fail(why, script) => panic!(
                "{why}\nminimal failing script: {script:#?}\nreplay: MODEL_CHECK_SEED={seed_hex} \
                 cargo test --lib model_check"
            ),
            TestError::Abort(why) => panic!("aborted: {why}\nreplay: MODEL_CHECK_SEED={seed_hex}"),
        }
    }
}
