//! A model-based property test of the whole table. Each case draws a cluster (per node:
//! memory, GPUs as an extended resource, a pod count, DRA devices in a ResourceSlice, a rack
//! label or none; a label and a NoSchedule taint that come and go), whether `g0`'s members
//! require or prefer one rack, and what each slot's pod asks for (CPU, memory,
//! GPUs, a node selector or required node affinity, a toleration, another component's
//! scheduling gate, a priority, a host port, a claim for a device made from a template), then random
//! interleavings of watch events (nodes and pods added, changed, deleted — nodes also with pods
//! on them, which the pod garbage collector deletes later; plain pods bound and pods gone shown
//! a step late; re-lists, some after a lost delete;
//! all through `apply_event`, from Kubernetes JSON), filter and bind calls as kube-scheduler
//! makes them (a whole cycle on the nodes its own filters pass, counting the pods it assumed;
//! a refusal on a pod's nominated node clears the nomination, as its preemption then finds no
//! victim there), binding results (success, or refused for good), deletions with and without grace,
//! gates removed, pods placed by another scheduler, clock jumps past timeouts, back-offs and
//! windows, the PodGroups of all three APIs (Volcano with per-task minimums, scheduler-plugins,
//! Kubernetes `scheduling.k8s.io`) created, changed and deleted — their `minMember` overrules
//! the quorum their pods' keys say — nodes cordoned and uncordoned while gangs wait, preempt
//! calls (victims of lower priority on the candidate node, members of running gangs among
//! them, or a forged body claiming a priority the pod does not have) that kube-scheduler then
//! acts on (victims deleted, the preemptor nominated: room held for its gang), rounds of the
//! gatherer when the case's gang members are created marked and behind muster's gate (the
//! plan written back: nominations, then gates, some gate removals refused), job restarts (a
//! gang's pods superseded by a newer attempt's, under each API's generation key, the old ones
//! deleted at once or left running a while), restarts and leader hand-overs (a table rebuilt from the standby's caches) of a muster killed in the
//! middle of its bindings (those in flight lost), whose new table first repairs the gangs left
//! partly bound.
//! After every step the invariants are checked (see [`Check`]), by name: never-half (live
//! members with nodes are none or meet the quorum and every task's minimum, outside the
//! documented repair, deletions and failed bindings), no-overcommit (every resource, pods
//! included; reservations are exactly the seats; no binding needs a device allocated already;
//! no two pods or seats on a node share a host port), holds-nothing (no seat on a deleted node, for
//! a gated member, or on a node the member's rules refuse — checked by the test's own rules in
//! `cluster`, not `model::rules`; room for members not created yet only within the creation
//! window; a gang required in one rack has its members on nodes and its seats in one rack), the last look before binding (a gang bound together never lands on a node its
//! member's rules refuse at that moment), evict-for-whole (every victim muster keeps is on its
//! node and of lower priority than the preemptor as the watch has it; a gang is handed to the
//! evictor only after a preempt decision for a higher priority, or a repair), and liveness (no
//! gang holds seats longer than its timeout plus one expiry tick), and the hold (a preemption
//! hold ends only on its own terms: see [`Check::check_holds_kept`]; a member is never refused
//! the node it is nominated to where its gang holds or planned room for it, which would cost
//! the nomination). After the last step,
//! everything is deleted and the table must be empty.
//!
//! A failure prints the minimal failing script and the seed of the run: `MODEL_CHECK_SEED=<hex>`
//! replays the same cases.
//!
//! The normal test run tries 1,000 cases (`PROPTEST_CASES` sets another number). A long run,
//! with the totals printed:
//! `PROPTEST_CASES=1000000 cargo test --release --lib model_check -- --nocapture`

mod cluster;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::watcher::Event;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};

use self::cluster::{
    pod_group, Cluster, NodeShape, Placement, Shape, SimNode, SimPod, SlotShape, Topology, Use,
    GANGS, NODES, SLOTS,
};
use super::*;
use crate::cluster::watch::{apply_event, Applied, Relist};

/// What a run exercised, counted per case (indices into `Check::seen`).
const SEEN: usize = 23;
const SEEN_NAMES: [&str; SEEN] = [
    "gangs bound together",
    "of them g1 with per-task minimums",
    "bindings refused",
    "restarts and hand-overs",
    "preempt calls judged",
    "gangs found partly bound at a restart",
    "of them evicted",
    "preemptions acted on (victims deleted, preemptor nominated)",
    "gangs disrupted whole by a preemption",
    "nodes deleted with pods on them",
    "holds that left room planned where lower-priority pods still ran",
    "bindings of pods with a device claim",
    "bindings of pods with a host port",
    "of the gangs bound together confined to one rack (g0 by its pods' keys, g3 by its PodGroup)",
    "gathered gangs let through with seats",
    "gathered gangs let through for preemption",
    "holds of gathered gangs kept through a gather round with room planned",
    "job restarts (a gang's pods superseded by a newer attempt's)",
    "of the gathered gangs let through with seats, some members floating (no nomination)",
    "plain pods bound by kube-scheduler that muster's watch showed a step late",
    "seats of gathered gangs planned again at a bind (their members' calls had ended unbound)",
    "deletions muster's watch showed a step late",
    "members that took the room their gang's preemption planned while muster still saw its victims there",
];
struct Seen;
impl Seen {
    const BOUND: usize = 0;
    const WITH_TASKS: usize = 1;
    const REFUSED: usize = 2;
    const RESTARTS: usize = 3;
    const PREEMPTS: usize = 4;
    const REPAIRED: usize = 5;
    const EVICTED: usize = 6;
    const ACTED: usize = 7;
    const DISRUPTED: usize = 8;
    const NODES_WITH_PODS: usize = 9;
    const PLANNED: usize = 10;
    const CLAIMS: usize = 11;
    const PORTS: usize = 12;
    const ONE_RACK: usize = 13;
    const GATHERED: usize = 14;
    const GATHERED_PREEMPTING: usize = 15;
    const GATHERED_HOLDS: usize = 16;
    const JOB_RESTARTS: usize = 17;
    const GATHERED_FLOATING: usize = 18;
    const PLAIN_UNSEEN: usize = 19;
    const SEATS_LET_GO: usize = 20;
    const GONE_UNSEEN: usize = 21;
    const ROOM_ON_ITS_WAY: usize = 22;
}

#[derive(Clone, Debug)]
enum Step {
    /// Adds the node, or changes its labels if it exists.
    PutNode(usize),
    /// Deletes the node if nothing runs or is being bound there; with `force`, also when
    /// pods run there (they stay bound to it until [`Step::PodGc`]).
    DeleteNode {
        node: usize,
        force: bool,
    },
    /// The pod garbage collector deletes the pods bound to nodes that no longer exist.
    PodGc,
    /// The node gets the taint `dedicated=gang:NoSchedule`, or loses it.
    Taint(usize),
    /// Another component removes its scheduling gate from the pod in the slot.
    Ungate(usize),
    CreatePod(usize),
    DeletePod {
        slot: usize,
        grace: bool,
    },
    /// The pods being deleted with grace are gone; with `late`, muster's watch shows it only
    /// after the next step (kube-scheduler's cache may show a deletion first: a preemption's
    /// victims gone there while muster still counts them).
    FinishDeletes {
        late: bool,
    },
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
        priority: i32,
    },
    /// In the gang-members mode, kube-scheduler binds a plain pod (priority 0; it never reaches
    /// muster) on the node if its own view has room there: pods bound or being bound, members
    /// it has assumed (a held bind call), and pending pods nominated there. With `late`,
    /// muster's watch shows it only after the next step.
    Plain {
        node: usize,
        cpu: i64,
        late: bool,
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
    /// The PodGroup of `g1` (Volcano), `g2` (scheduler-plugins) or `g3` (Kubernetes) is
    /// created or changed to that `minMember`, or deleted.
    PodGroup {
        which: usize,
        min_member: Option<u32>,
    },
    /// The node is cordoned, or uncordoned if it was.
    Cordon(usize),
    /// A round of muster's gatherer (`Gatherer::gather`), its plan written as the cluster
    /// side writes it (each release's nominations, then its gates; nominations renewed and
    /// cleared) and delivered by the watch; with `gates_fail`, every gate removal is refused.
    Gather {
        gates_fail: bool,
    },
    /// The job of gang `gang` (index into [`GANGS`]) restarts, as JobSet or Volcano restart
    /// one: its pods are of the old attempt now (new members come with `CreatePod`, under the
    /// gang's generation key); with `old_go`, they are deleted with grace at once, else they
    /// keep running (a garbage collector that is slow to get to them) until
    /// [`Step::CollectSuperseded`].
    RestartJob {
        gang: usize,
        old_go: bool,
    },
    /// The old attempts' pods still live are deleted with grace.
    CollectSuperseded,
    /// kube-scheduler's preempt call for the pod in the slot, on the node, with the pods there
    /// of lower priority as victims; with `forge`, the body claims a priority of 1000 and names
    /// every pod there. With `act` (and no forgery), kube-scheduler acts on the first candidate
    /// muster kept: deletes its victims (with grace) and nominates the preemptor there.
    Preempt {
        slot: usize,
        node: usize,
        forge: bool,
        act: bool,
    },
}

fn step() -> impl Strategy<Value = Step> {
    let node = 0..NODES.len();
    let slot = 0..SLOTS.len();
    prop_oneof![
        2 => node.clone().prop_map(Step::PutNode),
        1 => (node.clone(), any::<bool>()).prop_map(|(node, force)| Step::DeleteNode { node, force }),
        1 => Just(Step::PodGc),
        1 => node.clone().prop_map(Step::Taint),
        1 => slot.clone().prop_map(Step::Ungate),
        6 => slot.clone().prop_map(Step::CreatePod),
        1 => (slot.clone(), any::<bool>()).prop_map(|(slot, grace)| Step::DeletePod { slot, grace }),
        1 => proptest::bool::weighted(0.3).prop_map(|late| Step::FinishDeletes { late }),
        4 => slot.clone().prop_map(Step::Filter),
        1 => Just(Step::FilterGhost),
        8 => (slot.clone(), proptest::option::weighted(0.15, node.clone()))
            .prop_map(|(slot, anywhere)| Step::Bind { slot, anywhere }),
        4 => (0..8usize, proptest::bool::weighted(0.85)).prop_map(|(pick, ok)| Step::Finish { pick, ok }),
        1 => (node.clone(), 1..6i64, prop_oneof![Just(0), Just(100)])
            .prop_map(|(node, c, priority)| Step::Foreign { node, cpu: c * 100, priority }),
        2 => (node, 1..4i64, proptest::bool::weighted(0.7))
            .prop_map(|(node, c, late)| Step::Plain { node, cpu: c * 100, late }),
        1 => (any::<bool>(), proptest::option::weighted(0.2, slot))
            .prop_map(|(pods, lost)| Step::Relist { pods, lost }),
        1 => any::<bool>().prop_map(|cut| Step::Restart { cut }),
        1 => any::<bool>().prop_map(|cut| Step::HandOver { cut }),
        2 => prop_oneof![Just(1u64), Just(6), Just(31), Just(301)]
            .prop_map(|s| Step::Advance(Duration::from_secs(s))),
        2 => (0..3usize, proptest::option::weighted(0.75, 1..=4u32))
            .prop_map(|(which, min_member)| Step::PodGroup { which, min_member }),
        1 => (0..NODES.len()).prop_map(Step::Cordon),
        5 => proptest::bool::weighted(0.1).prop_map(|gates_fail| Step::Gather { gates_fail }),
        1 => (0..GANGS.len(), any::<bool>()).prop_map(|(gang, old_go)| Step::RestartJob { gang, old_go }),
        1 => Just(Step::CollectSuperseded),
        3 => (0..SLOTS.len(), 0..NODES.len(), proptest::bool::weighted(0.2), proptest::bool::weighted(0.7))
            .prop_map(|(slot, node, forge, act)| Step::Preempt { slot, node, forge, act }),
    ]
}

/// The table, the cluster it follows, and what the checks need to remember.
struct Check {
    table: GangTable,
    /// muster's gatherer beside the table (a new one on a restart and in the standby).
    gatherer: crate::model::gather::Gatherer,
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
    /// Seats (member UID, node) on a node whose labels, taints or cordon changed after the
    /// seat was taken: the rules are checked again only at the last look before binding.
    stale: BTreeSet<(String, String)>,
    /// Gangs the one-rack check leaves alone until they hold and run nothing (and, for g3,
    /// its PodGroup is back): a member's node was deleted under it (while it is gone, the
    /// member holds no rack, and the gang is planned, and may be bound, without it: written
    /// down in design.md), or g3's PodGroup, the source of its topology, was deleted (g3 is
    /// then placed by its pods' keys, which ask for none).
    rack_unknown: BTreeSet<&'static str>,
    /// Gangs a preempt decision would disrupt whole, with the preemptor's priority (as the
    /// watch has it): only these may be handed to the evictor for a preemption.
    disrupting: BTreeMap<String, i32>,
    /// When each gang's newest member appeared (or the table was rebuilt): the creation
    /// window runs from then.
    appeared: BTreeMap<&'static str, Instant>,
    checks: u64,
    /// Confirmed seats at the last check, (gang, member uid) → node: a bind call may be held on
    /// each (see the held-call check in `check`).
    confirmed: BTreeMap<(String, String), String>,
    /// The decisions of this step (filter verdicts, bind decisions), kept only when
    /// `MODEL_CHECK_TRACE` names a file: see [`Trace`].
    decisions: Option<String>,
    /// What the case exercised: see [`Seen`].
    seen: [u64; SEEN],
    /// Bind calls muster's handler holds (a call told to wait): kube-scheduler has each pod
    /// assumed and sends nothing else for it until the call answers (see `settle_held_calls`).
    held_calls: Vec<HeldCall>,
    /// Pods kube-scheduler bound that muster's watch shows only after the next step.
    unseen: Vec<String>,
    /// Pods gone from the cluster whose deletion muster's watch shows only after the next
    /// step (`Step::FinishDeletes { late: true }`).
    gone_unseen: Vec<SimPod>,
}

/// A bind call held by muster's handler (`binding::call`, `state::held`).
struct HeldCall {
    uid: String,
    gang: GangKey,
    node: String,
    /// When `--bind-wait` runs out.
    until: Instant,
}

/// muster's default `--bind-wait`.
const BIND_WAIT: Duration = Duration::from_secs(8);

impl Check {
    fn new(shape: Shape) -> Self {
        let cluster = Cluster::new(shape);
        Check {
            table: cluster.fresh_table(),
            gatherer: crate::model::gather::Gatherer::new(true),
            cluster,
            pod_watch: Relist::default(),
            node_watch: Relist::default(),
            unseen: Vec::new(),
            gone_unseen: Vec::new(),
            held_calls: Vec::new(),
            now: Instant::now(),
            chosen: Vec::new(),
            excused: BTreeSet::new(),
            repairing: BTreeSet::new(),
            disturbed: BTreeSet::new(),
            stale: BTreeSet::new(),
            rack_unknown: BTreeSet::new(),
            disrupting: BTreeMap::new(),
            appeared: BTreeMap::new(),
            checks: 0,
            confirmed: BTreeMap::new(),
            decisions: Trace::wanted().then(String::new),
            seen: [0; SEEN],
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

    /// A ResourceSlice or ResourceClaim event (their re-lists are not modelled).
    fn dra_event<K: crate::cluster::watch::Indexed>(
        &mut self,
        e: Event<K>,
    ) -> Result<(), TestCaseError> {
        let applied = apply_event(&mut self.table, &mut Relist::default(), e);
        prop_assert!(
            matches!(applied, Applied::Changed),
            "a DRA object the watch cannot read"
        );
        Ok(())
    }

    /// The resourceclaim controller deletes the claims of pods that are gone.
    fn collect_claims(&mut self) -> Result<(), TestCaseError> {
        let gone: Vec<String> = self
            .cluster
            .claims
            .keys()
            .filter(|c| {
                !self
                    .cluster
                    .pods
                    .iter()
                    .any(|p| p.claim.as_ref() == Some(*c))
            })
            .cloned()
            .collect();
        for c in gone {
            let obj = self.cluster.claim_object(&c);
            self.cluster.claims.remove(&c);
            self.dra_event(Event::Delete(obj))?;
        }
        Ok(())
    }

    /// A member that has a node leaves (deleted, or being deleted): its gang may be partial.
    /// The pod is deleted with grace: terminating, gone at [`Step::FinishDeletes`].
    fn delete_with_grace(&mut self, uid: &str) {
        if let Some(q) = self.cluster.pod_mut(uid) {
            q.terminating = true;
            let obj = q.object();
            self.pod_event(Event::Apply(obj));
        }
    }

    fn excuse_if_placed(&mut self, p: &SimPod) {
        if let Some((gang, _)) = p.gang() {
            // Or any member of a gang left partly bound: the repair covers gangs whose members
            // all exist (a gang that lost one is not finished whole, see `verbs::repair`).
            if self.cluster.node_of(p).is_some() || self.cluster.partial_gang(gang).is_some() {
                self.excused.insert(gang);
            }
        }
    }

    fn apply(&mut self, step: &Step) -> Result<(), TestCaseError> {
        match *step {
            Step::PutNode(i) => {
                let name = NODES[i].to_string();
                self.stale_seats_on(&name);
                let shape = self.cluster.shape.nodes[i].clone();
                let created = !self.cluster.nodes.contains_key(&name);
                let node = self.cluster.nodes.entry(name.clone()).or_insert(SimNode {
                    name,
                    shape,
                    labelled: false,
                    cordoned: false,
                    tainted: false,
                });
                node.labelled = !node.labelled;
                let (obj, slice) = (node.object(), node.slice().filter(|_| created));
                self.node_event(Event::Apply(obj));
                // Its DRA driver publishes the node's devices once the node is there.
                if let Some(s) = slice {
                    self.dra_event(Event::Apply(s))?;
                }
            }
            Step::DeleteNode { node, force } => {
                let name = NODES[node];
                let used = self.cluster.used(name).pods > 0;
                if force || !used {
                    if let Some(n) = self.cluster.nodes.remove(name) {
                        self.seen[Seen::NODES_WITH_PODS] += u64::from(used);
                        let on: Vec<&'static str> = self
                            .cluster
                            .pods
                            .iter()
                            .filter(|p| self.cluster.node_of(p).as_deref() == Some(name))
                            .filter_map(|p| Some(p.gang()?.0))
                            .collect();
                        self.rack_unknown.extend(on);
                        self.node_event(Event::Delete(n.object()));
                        if let Some(s) = n.slice() {
                            self.dra_event(Event::Delete(s))?;
                        }
                    }
                }
            }
            Step::PodGc => {
                let orphans: Vec<SimPod> = self
                    .cluster
                    .pods
                    .iter()
                    .filter(|p| {
                        p.node
                            .as_ref()
                            .is_some_and(|n| !self.cluster.nodes.contains_key(n))
                    })
                    .cloned()
                    .collect();
                for p in orphans {
                    self.excuse_if_placed(&p);
                    self.cluster.pods.retain(|q| q.uid != p.uid);
                    self.pod_event(Event::Delete(p.object()));
                }
            }
            Step::Taint(i) => {
                self.stale_seats_on(NODES[i]);
                if let Some(node) = self.cluster.nodes.get_mut(NODES[i]) {
                    node.tainted = !node.tainted;
                    let obj = node.object();
                    self.node_event(Event::Apply(obj));
                }
            }
            Step::Ungate(slot) => {
                if let Some(uid) = self.cluster.live_in_slot(slot).map(|p| p.uid.clone()) {
                    let p = self.cluster.pod_mut(&uid).expect("live");
                    if p.gated {
                        p.gated = false;
                        let obj = p.object();
                        self.pod_event(Event::Apply(obj));
                    }
                }
            }
            Step::CreatePod(slot) => {
                if self.cluster.live_in_slot(slot).is_none() {
                    let p = self.cluster.new_pod(slot);
                    if let Some((gang, _)) = p.gang() {
                        self.appeared.insert(gang, self.now);
                    }
                    // The resourceclaim controller makes its claim from the template.
                    if let Some(c) = &p.claim {
                        self.cluster.claims.insert(c.clone(), None);
                        let obj = self.cluster.claim_object(c);
                        self.dra_event(Event::Apply(obj))?;
                    }
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
            Step::RestartJob { gang, old_go } => {
                for uid in self.cluster.restart_job(gang) {
                    if old_go {
                        self.delete_with_grace(&uid);
                    }
                }
                self.seen[Seen::JOB_RESTARTS] += 1;
            }
            Step::CollectSuperseded => {
                let old: Vec<String> = self
                    .cluster
                    .pods
                    .iter()
                    .filter(|p| p.superseded && !p.terminating)
                    .map(|p| p.uid.clone())
                    .collect();
                for uid in old {
                    self.delete_with_grace(&uid);
                }
            }
            Step::FinishDeletes { late } => {
                let (gone, kept) = std::mem::take(&mut self.cluster.pods)
                    .into_iter()
                    .partition(|p| p.terminating);
                self.cluster.pods = kept;
                for p in gone {
                    if late {
                        self.seen[Seen::GONE_UNSEEN] += 1;
                        self.gone_unseen.push(p);
                    } else {
                        self.pod_event(Event::Delete(p.object()));
                    }
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
            Step::Foreign {
                node,
                cpu,
                priority,
            } => {
                let name = NODES[node];
                let requests = Use {
                    cpu,
                    pods: 1,
                    ..Use::default()
                };
                let room = self.cluster.nodes.get(name).is_some_and(|n| {
                    self.cluster
                        .used(name)
                        .plus(requests)
                        .within(n.allocatable())
                });
                if room {
                    let g = self.cluster.next_generation();
                    let p = SimPod::bound_outside("foreign", g, name, cpu, priority);
                    self.pod_event(Event::Apply(p.object()));
                    self.cluster.pods.push(p);
                    self.disturbed.insert(name.to_string());
                }
            }
            Step::Plain { node, cpu, late } => self.plain(NODES[node], cpu, late),
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
                // muster's expiry ticks every second: the tick before the jump notes the
                // members that arrived since the last verb (their creation window starts
                // then, not at the end of the jump).
                self.table.expire(self.now);
                self.now += d;
                self.table.expire(self.now);
            }
            Step::Cordon(i) => {
                self.stale_seats_on(NODES[i]);
                if let Some(node) = self.cluster.nodes.get_mut(NODES[i]) {
                    node.cordoned = !node.cordoned;
                    let obj = node.object();
                    self.node_event(Event::Apply(obj));
                }
            }
            Step::Preempt {
                slot,
                node,
                forge,
                act,
            } => self.preempt(slot, node, forge, act)?,
            Step::Gather { gates_fail } => self.gather(gates_fail)?,
            Step::PodGroup { which, min_member } => {
                let (gang, api) = GANGS[which + 1];
                let api = api.expect("a PodGroup gang");
                if let Some(m) = min_member {
                    // A larger quorum over members already bound: not muster's doing.
                    if m > self.cluster.last_min_member[which]
                        && self.cluster.pods.iter().any(|p| {
                            p.gang().is_some_and(|(g, _)| g == gang)
                                && self.cluster.node_of(p).is_some()
                        })
                    {
                        self.excused.insert(gang);
                    }
                    self.cluster.last_min_member[which] = m;
                }
                self.cluster.pod_groups[which] = min_member;
                if gang == "g3" && min_member.is_none() {
                    self.rack_unknown.insert("g3");
                }
                match min_member.and_then(|m| pod_group(&self.cluster.shape, gang, m)) {
                    Some(def) => self.table.apply_pod_group(def),
                    None => self.table.remove_pod_group(api, &GangKey::new("ml", gang)),
                }
            }
        }
        self.settle_held_calls();
        self.collect_claims()
    }

    /// kube-scheduler binds a plain pod on `node` where its own view has room (see
    /// [`Step::Plain`]); only in the gang-members mode, where such pods never reach muster.
    fn plain(&mut self, node: &str, cpu: i64, late: bool) {
        if !self.cluster.shape.gathered {
            return;
        }
        let Some(alloc) = self.cluster.nodes.get(node).map(|n| n.allocatable()) else {
            return;
        };
        let requests = Use {
            cpu,
            pods: 1,
            ..Use::default()
        };
        let assumed = self.assumed_on(node);
        let nominated = self.cluster.pods.iter().filter(|p| {
            p.nominated.as_deref() == Some(node)
                && self.cluster.node_of(p).is_none()
                && !p.terminating
                && !self.held_calls.iter().any(|c| c.uid == p.uid)
        });
        let view = assumed
            .chain(nominated)
            .fold(self.cluster.used(node), |u, p| u.plus(p.requests));
        if !view.plus(requests).within(alloc) {
            return;
        }
        let g = self.cluster.next_generation();
        let p = SimPod::bound_outside("plain", g, node, cpu, 0);
        if late {
            self.unseen.push(p.uid.clone());
        } else {
            self.pod_event(Event::Apply(p.object()));
        }
        self.cluster.pods.push(p);
        // It may land on a floating member's seat (no nomination): bound + seats may exceed
        // allocatable there until the seat is planned again.
        self.disturbed.insert(node.to_string());
        self.seen[Seen::PLAIN_UNSEEN] += u64::from(late);
    }

    /// muster's watch shows the pods of `late` (made unseen before the step just applied) that
    /// still exist.
    fn deliver_late(&mut self, late: Vec<String>) {
        for uid in late {
            if let Some(p) = self.cluster.pod(&uid) {
                let (obj, node) = (p.object(), p.node.clone());
                self.pod_event(Event::Apply(obj));
                // Shown now on seats muster had counted free room beside.
                self.disturbed.extend(node);
            }
        }
    }

    /// The held bind calls that answer after this step, as `HeldBinds::hold` ends them: the
    /// pod has a node (muster bound it with its gang: success), its seat on the call's node is
    /// gone, or `--bind-wait` ran out (an error: kube-scheduler forgets the pod's room and
    /// clears its nomination, as after any failed binding cycle). Each ends its mark in the
    /// table (`GangTable::bind_released`).
    fn settle_held_calls(&mut self) {
        let mut failed = Vec::new();
        let (table, now) = (&mut self.table, self.now);
        self.held_calls.retain(|call| {
            let bound = table.node_of(&call.uid).is_some();
            let lost = table
                .held_seat_lost(&call.gang, &call.uid, &call.node)
                .is_some();
            let ends = bound || lost || now >= call.until;
            if ends {
                table.bind_released(&call.uid);
                if !bound {
                    failed.push(call.uid.clone());
                }
            }
            !ends
        });
        for uid in failed {
            self.binding_cycle_failed(&uid);
        }
    }

    fn relist_pods(&mut self) {
        // A re-list shows every deletion the watch had not.
        self.gone_unseen.clear();
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

    /// A pod kube-scheduler would try: live, no node, not being bound, not gated (by another
    /// component, or by muster).
    fn schedulable(&self, slot: usize) -> Option<SimPod> {
        self.cluster
            .live_in_slot(slot)
            .filter(|p| self.cluster.node_of(p).is_none() && !p.gated && !p.muster_gate)
            .filter(|p| !self.held_calls.iter().any(|c| c.uid == p.uid))
            .cloned()
    }

    /// One gather round, written back as `cluster::gather` writes it: per release every
    /// nomination, then (all written) every gate; then the nominations renewed and cleared.
    /// A write to a pod that is gone fails (the UID precondition). Never-half still rests on
    /// the bind path: the members let through are bound by the bind steps.
    fn gather(&mut self, gates_fail: bool) -> Result<(), TestCaseError> {
        let plan = self.gatherer.gather(&mut self.table, self.now);
        decided(&mut self.decisions, || format!("gather: {plan:?}"));
        for r in &plan.releases {
            // With seats (some members may float: no nomination), or for preemption (none).
            let seated = self
                .table
                .gangs
                .get(&r.gang)
                .is_some_and(|g| !g.seats().is_empty());
            if seated {
                self.seen[Seen::GATHERED] += 1;
                self.seen[Seen::GATHERED_FLOATING] += u64::from(r.nominate.len() < r.ungate.len());
            } else {
                self.seen[Seen::GATHERED_PREEMPTING] += 1;
            }
            let mut all = true;
            for (pod, node) in &r.nominate {
                let gated = r.ungate.iter().any(|u| u.pod.uid == pod.uid);
                all &= self.write_nomination(&pod.uid, Some(node), gated);
            }
            if !all || gates_fail {
                continue;
            }
            for u in &r.ungate {
                let Some(p) = self.cluster.pod_mut(&u.pod.uid) else {
                    continue;
                };
                prop_assert!(p.muster_gate, "{} ungated without muster's gate", p.name);
                p.muster_gate = false;
                let obj = p.object();
                self.pod_event(Event::Apply(obj));
                self.gatherer.ungated(&u.pod.uid, self.now);
            }
        }
        for (pod, node) in &plan.renominate {
            self.write_nomination(&pod.uid, Some(node), false);
        }
        for pod in &plan.clear {
            self.write_nomination(&pod.uid, None, false);
        }
        let kept = self.table.gangs.values().filter(|g| {
            self.table.is_gathered(g)
                && g.preemption_hold().is_some()
                && !g.awaiting_room().is_empty()
        });
        self.seen[Seen::GATHERED_HOLDS] += kept.count() as u64;
        Ok(())
    }

    /// muster writes (or clears) the pod's `status.nominatedNodeName`; false if it is gone.
    fn write_nomination(&mut self, uid: &str, node: Option<&NodeName>, gated: bool) -> bool {
        let Some(p) = self.cluster.pod_mut(uid) else {
            return false;
        };
        p.nominated = node.map(|n| n.to_string());
        let obj = p.object();
        self.pod_event(Event::Apply(obj));
        self.gatherer
            .nominated(&Arc::from(uid), node.cloned(), self.now, gated);
        true
    }

    /// kube-scheduler's binding cycle for the pod failed (muster's bind answered an error):
    /// it clears the pod's nomination, in its queue and in the API (`handleBindingCycleError`
    /// calls the failure handler with `clearNominatedNode`, whose `updatePod` patches
    /// `status.nominatedNodeName` to "" when it was set: pkg/scheduler/schedule_one.go:537,
    /// :1296-1306 in v1.37.2). A preemption hold that rested on that nomination ends there.
    fn binding_cycle_failed(&mut self, uid: &str) {
        let Some(p) = self.cluster.pod_mut(uid) else {
            return;
        };
        if p.nominated.take().is_none() {
            return;
        }
        let obj = p.object();
        self.pod_event(Event::Apply(obj));
    }

    /// The nodes kube-scheduler's own filters pass for `p` before it asks muster: the rules
    /// of [`Cluster::admits`], and room among the pods bound or being bound and those it
    /// assumed for bind calls muster holds (NodeResourcesFit).
    fn feasible(&self, p: &SimPod) -> Vec<String> {
        self.cluster
            .nodes
            .values()
            .filter(|n| self.cluster.admits(&n.name, p))
            .filter(|n| {
                self.assumed_on(&n.name)
                    .filter(|q| q.uid != p.uid)
                    .fold(self.cluster.used(&n.name), |u, q| u.plus(q.requests))
                    .plus(p.requests)
                    .within(n.allocatable())
            })
            .map(|n| n.name.clone())
            .collect()
    }

    /// The pods kube-scheduler has assumed on `node` and the cluster not bound yet: those a
    /// filter call chose `node` for, whose bind calls have not come yet (kube-scheduler
    /// assumes a pod at the end of its scheduling cycle and binds it in a goroutine of its
    /// own, while it schedules other pods), and those whose bind calls muster holds. It counts
    /// them there until the call ends.
    fn assumed_on<'a>(&'a self, node: &'a str) -> impl Iterator<Item = &'a SimPod> + 'a {
        let chosen = self.chosen.iter().map(|(u, n)| (u, n));
        let held = self.held_calls.iter().map(|c| (&c.uid, &c.node));
        chosen
            .chain(held)
            .filter(move |(_, n)| *n == node)
            .filter_map(|(u, _)| self.cluster.pod(u))
            .filter(|p| self.cluster.node_of(p).is_none())
    }

    /// The seats held for existing members: (member UID, node).
    fn member_seats(&self) -> Vec<(String, String)> {
        self.table
            .gangs
            .values()
            .flat_map(|g| g.seats())
            .filter_map(|(h, s)| Some((h.member()?.to_string(), s.node.to_string())))
            .collect()
    }

    /// The node is about to change its labels, taints or cordon: the seats on it were taken
    /// under the old ones (and so were the bindings in flight there: a binding refused for
    /// good gives its member a seat where it was being bound).
    fn stale_seats_on(&mut self, node: &str) {
        let on: Vec<(String, String)> = self
            .member_seats()
            .into_iter()
            .chain(self.cluster.in_flight.iter().cloned())
            .filter(|(_, n)| n == node)
            .collect();
        self.stale.extend(on);
    }

    fn filter(&mut self, slot: usize) -> Result<(), TestCaseError> {
        let Some(p) = self.schedulable(slot) else {
            return Ok(());
        };
        let seen = self.table.seen_pod("ml", &p.name, &p.uid);
        prop_assert!(seen.is_ok(), "the watch delivered {}", p.name);
        let seen = seen.expect("checked").clone();
        let feasible = self.feasible(&p);
        self.chosen.retain(|(u, _)| *u != p.uid);
        if feasible.is_empty() {
            // No node passes kube-scheduler's own filters: it does not call the extender.
            return Ok(());
        }
        let names: Vec<&str> = feasible.iter().map(String::as_str).collect();
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
            return Ok(());
        }
        // Refused everywhere, on the node it is nominated to among them: kube-scheduler's
        // preemption finds no victim where its own filters pass and clears the nomination
        // (`framework/preemption/preemption.go:135-147`, v1.37.2) — the only thing that kept
        // that room from plain pods. muster never refuses a member the room its gang holds or
        // its gang's preemption planned for it there (its victims gone to kube-scheduler,
        // maybe not yet to muster's watch).
        let Some(nominated) = p.nominated.clone().filter(|n| names.contains(&n.as_str())) else {
            return Ok(());
        };
        if let Some(g) = p
            .gang()
            .and_then(|(g, _)| self.table.gangs.get(&GangKey::new("ml", g)))
        {
            let seated = g
                .seat_of(&Arc::from(p.uid.as_str()))
                .is_some_and(|s| *s.node == *nominated);
            let planned = g
                .awaiting_room()
                .iter()
                .any(|s| s.holder.member().is_some_and(|m| **m == *p.uid) && *s.node == *nominated);
            prop_assert!(
                !seated && !planned,
                "{} refused on {nominated}, where its gang {} room for it (seated: {seated}, \
                 planned: {planned}): {verdicts:?}",
                p.name,
                if seated { "holds" } else { "planned" }
            );
        }
        self.binding_cycle_failed(&p.uid);
        Ok(())
    }

    fn bind(&mut self, slot: usize, anywhere: Option<usize>) -> Result<(), TestCaseError> {
        let Some(p) = self.schedulable(slot) else {
            return Ok(());
        };
        let node = match anywhere {
            // Any node kube-scheduler's own filters pass (seats are muster's to check): its
            // rules, and room in its cache, which has every pod bound there (muster's watch
            // may show one a step late) and the pods it assumed there.
            Some(i) if self.feasible(&p).iter().any(|n| n == NODES[i]) => NODES[i].to_string(),
            Some(_) => return Ok(()),
            None => {
                // A scheduling cycle: the filter (unless one just ran and its node still
                // passes kube-scheduler's rules: one cycle sees one snapshot), then the bind
                // call on the node it offered.
                let current = self
                    .chosen
                    .iter()
                    .any(|(u, n)| *u == p.uid && self.cluster.admits(n, &p));
                if !current {
                    self.filter(slot)?;
                }
                match self.chosen.iter().find(|(u, _)| *u == p.uid) {
                    Some((_, n)) => n.clone(),
                    None => return Ok(()),
                }
            }
        };
        self.chosen.retain(|(u, _)| *u != p.uid);
        let planned_here = p
            .gang()
            .and_then(|(g, _)| self.table.gangs.get(&GangKey::new("ml", g)))
            .is_some_and(|g| {
                g.awaiting_room()
                    .iter()
                    .any(|s| s.holder.member().is_some_and(|m| **m == *p.uid) && *s.node == *node)
            });
        let request = BindRequest {
            namespace: "ml",
            name: &p.name,
            uid: &p.uid,
            node: &node,
        };
        let decision = self.table.bind(request, self.now);
        self.seen[Seen::SEATS_LET_GO] += self.table.take_seats_let_go();
        if planned_here && !matches!(decision, BindDecision::Reject(_)) {
            self.seen[Seen::ROOM_ON_ITS_WAY] += 1;
        }
        decided(&mut self.decisions, || {
            format!("bind {} on {node}: {decision:?}", p.name)
        });
        if matches!(decision, BindDecision::Reject(_)) {
            self.binding_cycle_failed(&p.uid);
        }
        if let BindDecision::Wait { gang, .. } = &decision {
            self.table.bind_held(&p.uid);
            self.held_calls.push(HeldCall {
                uid: p.uid.clone(),
                gang: gang.clone(),
                node: node.clone(),
                until: self.now + BIND_WAIT,
            });
        }
        let together = matches!(decision, BindDecision::BindGang { .. });
        // A pod bound on a node muster's filter did not offer it (`anywhere`: its bind checks
        // room, not the host ports of seats) may take a host port a seat on that node holds:
        // those seats are checked again only at the last look before binding, like seats on a
        // node that changed.
        if let BindDecision::BindNow { pod, node } = &decision {
            let port = self
                .cluster
                .pod(&pod.uid)
                .is_some_and(|q| q.host_port.is_some());
            if port && anywhere.is_some() {
                self.stale_seats_on(node);
            }
        }
        let members = match decision {
            BindDecision::BindNow { pod, node } => vec![(pod, node)],
            BindDecision::BindGang { gang, members } => {
                self.seen[Seen::BOUND] += 1;
                self.seen[Seen::WITH_TASKS] += u64::from(&*gang.name == "g1");
                self.seen[Seen::ONE_RACK] += u64::from(
                    (&*gang.name == "g0" && self.cluster.shape.g0_topology == Topology::Required)
                        || (&*gang.name == "g3" && self.cluster.shape.g3_one_rack),
                );
                members
            }
            _ => Vec::new(),
        };
        for (pod, node) in members {
            // The last look before binding: muster binds no member of a gang on a node that
            // its rules refuse now (cordoned, tainted, labelled otherwise), nor one still gated
            // by another component (kube-scheduler's own cycle checked the requester's node;
            // muster decides for the others).
            if together {
                let sim = self.cluster.pod(&pod.uid).cloned();
                prop_assert!(
                    sim.as_ref().is_some_and(|q| self.cluster.admits(&node, q)),
                    "{} bound with its gang to node {} its rules refuse: {:?} on {:?}",
                    pod.name,
                    node,
                    sim,
                    self.cluster.nodes.get(&*node)
                );
                prop_assert!(
                    sim.is_some_and(|q| !q.gated),
                    "{} bound with its gang while gated",
                    pod.name
                );
            }
            prop_assert!(
                self.cluster.in_flight_node(&pod.uid).is_none(),
                "{} bound twice",
                pod.name
            );
            // NodePorts, as the kubelet admits the pod: no other pod there has its host port.
            let sim = self.cluster.pod(&pod.uid).cloned();
            if let Some(q) = sim.as_ref().filter(|q| q.host_port.is_some()) {
                prop_assert!(
                    self.cluster.ports_free(&node, q, true),
                    "{} bound to {} where its host port {:?} is taken",
                    pod.name,
                    node,
                    q.host_port
                );
                self.seen[Seen::PORTS] += 1;
            }
            // kube-scheduler allocates its claim there: never a device allocated already.
            match self.cluster.allocate(&pod.uid, &node) {
                Ok(claim) => {
                    if let Some(obj) = claim {
                        self.seen[Seen::CLAIMS] += 1;
                        self.dra_event(Event::Apply(obj))?;
                    }
                }
                Err(why) => prop_assert!(false, "{} bound to {}: {}", pod.name, node, why),
            }
            self.cluster
                .in_flight
                .push((pod.uid.to_string(), node.to_string()));
        }
        Ok(())
    }

    /// kube-scheduler's preempt call: its dry run proposes the node with the pods there of
    /// lower priority than the preemptor as victims (with `forge`, a body claiming priority
    /// 1000 and every pod there). Whatever muster keeps must hold up against the cluster as
    /// it is (evict-for-whole): every victim on the candidate node, of lower priority than the
    /// preemptor as the watch has it, and every gang disrupted of lower priority. With `act`,
    /// kube-scheduler acts on the first kept candidate as it does: deletes its victims (with
    /// grace) and nominates the preemptor there; the room freed is held for the preemptor's
    /// gang while they terminate.
    fn preempt(
        &mut self,
        slot: usize,
        node: usize,
        forge: bool,
        act: bool,
    ) -> Result<(), TestCaseError> {
        let Some(p) = self.schedulable(slot) else {
            return Ok(());
        };
        let Ok(seen) = self.table.seen_pod("ml", &p.name, &p.uid).cloned() else {
            return Ok(());
        };
        // The dry run proposes a node the preemptor's rules pass with pods of lower priority
        // there: the first such from `node` on.
        let victims_on = |name: &str| -> Vec<String> {
            self.cluster
                .pods
                .iter()
                .filter(|q| q.node.as_deref() == Some(name) && !q.terminating)
                .filter(|q| forge || q.priority < p.priority)
                .map(|q| q.uid.clone())
                .collect()
        };
        let proposed = (0..NODES.len())
            .map(|i| NODES[(node + i) % NODES.len()])
            .filter(|n| forge || self.cluster.admits(n, &p))
            .map(|n| (n, victims_on(n)))
            .find(|(_, v)| !v.is_empty());
        let Some((name, victims)) = proposed else {
            return Ok(());
        };
        let sent = PodInfo {
            priority: if forge { 1000 } else { seen.priority },
            ..seen
        };
        let candidate = PreemptCandidate {
            node: name.to_string(),
            victims,
            pdb_violations: 0,
        };
        let d = self.table.preempt(&sent, vec![candidate], self.now);
        self.seen[Seen::PREEMPTS] += 1;
        decided(&mut self.decisions, || {
            format!("preempt {} on {name}: {d:?}", p.name)
        });
        for c in &d.kept {
            prop_assert_eq!(&c.node, name);
            for v in &c.victims {
                // On the node, or being bound there (muster's cache assumes it there; a gang
                // disrupted whole loses such a member too).
                let victim = self.cluster.pod(v);
                prop_assert!(
                    victim.is_some_and(|q| self.cluster.node_of(q).as_deref() == Some(name)),
                    "victim {} is not on {}: {:?}",
                    v,
                    name,
                    victim
                );
                let victim = victim.expect("checked");
                prop_assert!(
                    victim.priority < p.priority,
                    "victim {} of priority {} evicted for {} of priority {}",
                    victim.name,
                    victim.priority,
                    p.name,
                    p.priority
                );
                // A gang is disrupted only for a higher priority than its own.
                if let Some((g, _)) = victim.gang() {
                    let gp = self.cluster.gang_priority(g).unwrap_or(i32::MIN);
                    prop_assert!(
                        gp < p.priority,
                        "gang {} of priority {} disrupted for {} of priority {}",
                        g,
                        gp,
                        p.name,
                        p.priority
                    );
                }
            }
        }
        for g in &d.disruptions {
            let was = self.disrupting.entry(g.gang.name.to_string()).or_default();
            *was = (*was).max(p.priority);
        }
        let Some(kept) = d.kept.into_iter().next().filter(|_| act && !forge) else {
            return Ok(());
        };
        // kube-scheduler acts: the victims are deleted with grace, the preemptor nominated.
        self.seen[Seen::ACTED] += 1;
        for v in &kept.victims {
            if let Some(q) = self.cluster.pod_mut(v) {
                q.terminating = true;
                let obj = q.object();
                self.pod_event(Event::Apply(obj));
            }
        }
        if let Some(q) = self.cluster.pod_mut(&p.uid) {
            q.nominated = Some(name.to_string());
            let obj = q.object();
            self.pod_event(Event::Apply(obj));
        }
        // The hold seated only free room and planned the rest (no-overcommit, checked after
        // every step like any seat).
        let planned = self
            .table
            .gangs
            .values()
            .filter(|g| g.preemption_hold().is_some_and(|h| *h.preemptor == *p.uid))
            .any(|g| !g.awaiting_room().is_empty());
        self.seen[Seen::PLANNED] += u64::from(planned);
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
        // Refused for good (or the pod is gone: 404): its claim's allocation is taken back.
        self.seen[Seen::REFUSED] += 1;
        if let Some(obj) = self.cluster.deallocate(&uid) {
            self.dra_event(Event::Apply(obj))?;
        }
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
        self.seen[Seen::RESTARTS] += 1;
        // The nodes of pods gone whose deletion the old table's watch had not shown: a re-list
        // shows it, so the two tables' use differs there.
        let gone_on: BTreeSet<String> = self
            .gone_unseen
            .iter()
            .filter_map(|p| self.cluster.node_of(p))
            .collect();
        // The old process's held calls end with it (dropped, or answered by a replica that
        // stepped down): failed binding cycles to kube-scheduler.
        for call in std::mem::take(&mut self.held_calls) {
            self.binding_cycle_failed(&call.uid);
        }
        // The new table sees every member appear now.
        for (gang, _) in GANGS {
            self.appeared.insert(gang, self.now);
        }
        // Killed mid-binding: the bindings in flight are lost, their pods stay pending (and
        // their claims' allocations are taken back).
        let in_flight = std::mem::take(&mut self.cluster.in_flight);
        if cut {
            for (uid, _) in &in_flight {
                if let Some(obj) = self.cluster.deallocate(uid) {
                    self.dra_event(Event::Apply(obj))?;
                }
            }
        }
        for (uid, node) in in_flight.into_iter().filter(|_| !cut) {
            if let Some(p) = self.cluster.pod_mut(&uid) {
                p.node = Some(node);
                let obj = p.object();
                self.pod_event(Event::Apply(obj));
            }
        }
        self.gatherer = crate::model::gather::Gatherer::new(true);
        // The held calls of the old table were woken (a take-over) or died with it.
        self.confirmed.clear();
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
        // A re-list shows the pods the old table's watch had not shown yet.
        let unseen_on: BTreeSet<String> = self
            .unseen
            .iter()
            .filter_map(|u| self.cluster.pod(u)?.node.clone())
            .collect();
        for p in &self.cluster.pods {
            if self.unseen.contains(&p.uid) {
                continue;
            }
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
                if unseen_on.contains(&**e.name()) || gone_on.contains(&**e.name()) {
                    continue;
                }
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
        self.seen[Seen::REPAIRED] += found.len() as u64;
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
        for (gang, _) in GANGS {
            if self.cluster.partial_gang(gang).is_some() && !self.repairing.contains(gang) {
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
    /// until `FinishDeletes`). Only gangs found partly bound are, and gangs a preempt decision
    /// disrupts whole for a preemptor of higher priority (evict-for-whole).
    fn evict(&mut self) -> Result<(), TestCaseError> {
        for f in self.table.take_partly_bound() {
            if let Some(gang) = sim_gang(&f.gang.name) {
                self.repairing.insert(gang);
            }
        }
        for d in self.table.take_disruptions() {
            let repaired = sim_gang(&d.gang.name).is_some_and(|g| self.repairing.contains(g));
            let preempted = self.disrupting.get(&*d.gang.name).copied();
            prop_assert!(
                repaired || preempted.is_some(),
                "gang {} evicted but neither found partly bound nor disrupted by a preemption",
                d.gang
            );
            if let Some(by) = preempted.filter(|_| !repaired) {
                let own = self.cluster.gang_priority(&d.gang.name).unwrap_or(i32::MIN);
                prop_assert!(
                    own < by,
                    "gang {} of priority {} evicted for priority {}",
                    d.gang,
                    own,
                    by
                );
                self.seen[Seen::DISRUPTED] += 1;
            }
            for pod in &d.others {
                // Bound, or being bound (muster assumes it on its node).
                let placed = self
                    .cluster
                    .pod(&pod.uid)
                    .map(|p| self.cluster.node_of(p).is_some());
                let Some(placed) = placed else {
                    continue;
                };
                prop_assert!(placed, "{} evicted without a node", pod.name);
                let p = self.cluster.pod_mut(&pod.uid).expect("exists");
                p.terminating = true;
                let obj = p.object();
                self.pod_event(Event::Apply(obj));
            }
            self.seen[Seen::EVICTED] += u64::from(repaired);
        }
        Ok(())
    }

    /// The invariants, after every step.
    fn check(&mut self) -> Result<(), TestCaseError> {
        self.evict()?;
        self.table.take_notices();
        let released: BTreeSet<String> = self
            .table
            .take_released()
            .iter()
            .map(|k| k.to_string())
            .collect();
        // Held calls answer at once: a seat confirmed at the last check (a bind call may be
        // held on it) that some other step planned on another node wakes its gang's held
        // calls (`released`), or the call waits out --bind-wait on a seat it no longer has. A
        // seat moved by its own member's bind is confirmed where that new call waits.
        let mut confirmed = BTreeMap::new();
        for (key, g) in &self.table.gangs {
            for (holder, seat) in g.seats() {
                let Some(uid) = holder.member() else { continue };
                let id = (key.to_string(), uid.to_string());
                if let Some(before) = self.confirmed.get(&id) {
                    prop_assert!(
                        seat.confirmed || **before == *seat.node || released.contains(&id.0),
                        "gang {}: the confirmed seat of {} moved from {} to {} unconfirmed, and its held call was not woken",
                        key,
                        uid,
                        before,
                        seat.node
                    );
                    self.checks += 1;
                }
                if seat.confirmed {
                    confirmed.insert(id, seat.node.to_string());
                }
            }
        }
        self.confirmed = confirmed;
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
        // Holds-nothing: room for members not created yet only within the creation window
        // after the newest member appeared (plus one expiry tick); the members that exist
        // keep their seats until the timeout, which the liveness check bounds.
        let window = self.table.config.creation_window;
        for (key, g) in &self.table.gangs {
            if g.seats().keys().all(|h| h.member().is_some()) {
                continue;
            }
            let appeared = sim_gang(&key.name).and_then(|n| self.appeared.get(n));
            prop_assert!(
                appeared.is_some_and(|t| self.now.saturating_duration_since(*t) <= window + tick),
                "gang {} holds room for members not created yet {:?} after the newest appeared",
                key,
                appeared.map(|t| self.now.saturating_duration_since(*t))
            );
            self.checks += 1;
        }
        // The cluster itself: what each node's kubelet is asked to run fits it, in every
        // resource (no-overcommit, whoever bound the pods: muster, kube-scheduler alone, or
        // another scheduler; muster's view may lag behind the plain pods kube-scheduler bound).
        for (name, n) in &self.cluster.nodes {
            let used = self.cluster.used(name);
            prop_assert!(
                used.within(n.allocatable()),
                "node {} over-committed in the cluster: {:?} of {:?} ({:?})",
                name,
                used,
                n.allocatable(),
                self.cluster
                    .pods
                    .iter()
                    .filter(|p| self.cluster.node_of(p).as_deref() == Some(name.as_str()))
                    .map(|p| &p.name)
                    .collect::<Vec<_>>()
            );
            self.checks += 1;
        }
        let unseen: Vec<&SimPod> = self
            .unseen
            .iter()
            .filter_map(|u| self.cluster.pod(u))
            .collect();
        prop_assert_eq!(
            self.table.pod_count() + unseen.len(),
            self.cluster.pods.len() + self.gone_unseen.len()
        );
        prop_assert_eq!(self.table.node_count(), self.cluster.nodes.len());
        for (_, e) in self.table.ledger.iter() {
            let name = e.name().to_string();
            let alloc = Use::of(&e.info().allocatable);
            let used = Use::of(e.used());
            let not_seen_yet = unseen
                .iter()
                .filter(|p| p.node.as_deref() == Some(name.as_str()))
                .fold(Use::default(), |u, p| u.plus(p.requests));
            let gone_not_seen = self
                .gone_unseen
                .iter()
                .filter(|p| self.cluster.node_of(p).as_deref() == Some(name.as_str()))
                .fold(Use::default(), |u, p| u.plus(p.requests));
            // What muster believes is in use is what the cluster runs there (but the pods its
            // watch shows a step late, bound or gone), and fits, in every resource: CPU,
            // memory, GPUs and the pod count (no-overcommit): the cluster's own use is checked
            // above, so a pod gone there muster still counts is allowed to exceed it.
            prop_assert_eq!(
                used.plus(not_seen_yet),
                self.cluster.used(&name).plus(gone_not_seen),
                "use of {}",
                name
            );
            prop_assert!(
                used.within(alloc) || gone_not_seen != Use::default(),
                "{} over-committed: {:?}",
                name,
                used
            );
            // The ledger's reservations are exactly the seats on the node.
            let seats = self
                .table
                .gangs
                .values()
                .flat_map(|g| g.seats().values())
                .filter(|s| *s.node == *name)
                .fold(Use::default(), |u, s| u.plus(Use::of(&s.requests)));
            prop_assert_eq!(Use::of(e.reserved()), seats, "seats on {}", name);
            // Bound + seats within allocatable, unless another scheduler's pod landed there,
            // or room is held for a preempting gang while its victims terminate (counted on
            // top of them, as kube-scheduler counts a nominated pod), or are gone and muster's
            // watch has not shown it yet.
            if used.plus(seats).within(alloc) {
                self.disturbed.remove(&name);
            } else {
                prop_assert!(
                    self.disturbed.contains(&name)
                        || self.cluster.terminating_on(&name)
                        || gone_not_seen != Use::default(),
                    "{} over-committed by seats: {:?} used + {:?} seated of {:?}",
                    name,
                    used,
                    seats,
                    alloc
                );
            }
            self.checks += 4;
        }
        // Seats: only on nodes that exist, only for members that exist and are not gated by
        // another component, and on a node the member's rules pass (cordon, taints, selector,
        // affinity) unless the node changed after the seat was taken (holds-nothing).
        let seats = self.member_seats();
        self.stale
            .retain(|s| seats.contains(s) || self.cluster.in_flight.contains(s));
        for (uid, node) in &seats {
            prop_assert!(
                self.cluster.nodes.contains_key(node),
                "seat of {} on deleted node {}",
                uid,
                node
            );
            let member = self.cluster.pod(uid);
            prop_assert!(member.is_some(), "seat of {} who does not exist", uid);
            let member = member.expect("checked");
            prop_assert!(!member.gated, "seat of {} who is gated", member.name);
            prop_assert!(
                self.stale.contains(&(uid.clone(), node.clone()))
                    || self.cluster.admits_seat(node, member),
                "seat of {} on {} which its rules refuse: {:?} on {:?}",
                member.name,
                node,
                member,
                self.cluster.nodes.get(node)
            );
            self.checks += 4;
        }
        self.check_ports(&seats)?;
        // Never half a gang: live members with nodes are none, or meet the quorum and (g1)
        // every task's minimum.
        for (gang, _) in GANGS {
            match self.cluster.partial_gang(gang) {
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
        self.check_one_rack()?;
        self.checks += 2;
        Ok(())
    }

    /// Holds-nothing, topology domains: when `g0`'s members require one rack (or `g3`'s
    /// PodGroup does), the gang's members with nodes (bound or being bound, not leaving) and
    /// its seats (for members and for members not created yet) are all in one rack, on nodes
    /// that have the label; except for a gang in `rack_unknown`. The racks are the test's own
    /// (the nodes' shapes), not `model::planning::domains`.
    fn check_one_rack(&mut self) -> Result<(), TestCaseError> {
        let idle = |gang: &str| {
            (gang != "g3" || self.cluster.pod_groups[2].is_some())
                && self.cluster.pods.iter().all(|p| {
                    p.gang().is_none_or(|(g, _)| g != gang) || self.cluster.node_of(p).is_none()
                })
                && self
                    .table
                    .gangs
                    .get(&GangKey::new("ml", gang))
                    .is_none_or(|g| g.seats().is_empty())
        };
        let settled: Vec<&'static str> = self
            .rack_unknown
            .iter()
            .copied()
            .filter(|g| idle(g))
            .collect();
        for g in settled {
            self.rack_unknown.remove(g);
        }
        if self.cluster.shape.g0_topology == Topology::Required {
            self.check_one_rack_of("g0")?;
        }
        if self.cluster.shape.g3_one_rack {
            self.check_one_rack_of("g3")?;
        }
        Ok(())
    }

    fn check_one_rack_of(&mut self, gang: &str) -> Result<(), TestCaseError> {
        if self.rack_unknown.contains(gang) {
            return Ok(());
        }
        let mut nodes: Vec<String> = self
            .cluster
            .pods
            .iter()
            .filter(|p| p.gang().is_some_and(|(g, _)| g == gang) && !p.terminating)
            .filter_map(|p| self.cluster.node_of(p))
            .collect();
        if let Some(g) = self.table.gangs.get(&GangKey::new("ml", gang)) {
            nodes.extend(g.seats().values().map(|s| s.node.to_string()));
        }
        let racks: BTreeSet<Option<u8>> = nodes.iter().map(|n| self.cluster.rack(n)).collect();
        prop_assert!(
            racks.len() <= 1 && !racks.contains(&None),
            "gang {} (one rack required) has members and seats on {:?}: racks {:?}",
            gang,
            nodes,
            racks
        );
        self.checks += 1;
        Ok(())
    }

    /// Host ports, per node: no two pods there (bound, being bound or being deleted) share a
    /// host port (NodePorts), and the seats there hold their ports too: no seated member's
    /// host port is another's or a placed pod's (holds-nothing), unless the node changed
    /// after the seat was taken. DRA devices: no device is in two claims' allocations, by
    /// construction ([`Cluster::allocate`] fails the case first), and the seats hold their
    /// devices too (no-overcommit): the claims allocated on a node to pods that are not
    /// leaving, plus the seated members there whose claim is not allocated yet, are at most
    /// the node's devices, unless the node changed after the seat was taken.
    fn check_ports(&mut self, seats: &[(String, String)]) -> Result<(), TestCaseError> {
        for name in self.cluster.nodes.keys() {
            // (port, pod, being deleted)
            let mut ports: Vec<(i32, &str, bool)> = Vec::new();
            for p in &self.cluster.pods {
                if self.cluster.node_of(p).as_deref() != Some(name.as_str()) {
                    continue;
                }
                if let Some(port) = p.host_port {
                    let other = ports.iter().find(|(q, _, _)| *q == port);
                    prop_assert!(
                        other.is_none(),
                        "{} and {} share host port {} on {}",
                        p.name,
                        other.map_or("", |o| o.1),
                        port,
                        name
                    );
                    ports.push((port, &p.name, p.terminating));
                }
            }
            let mut seated: BTreeSet<&str> = BTreeSet::new();
            for (uid, node) in seats {
                if node != name || self.stale.contains(&(uid.clone(), node.clone())) {
                    continue;
                }
                let Some(p) = self.cluster.pod(uid) else {
                    continue;
                };
                // Being bound: counted with the placed pods above.
                if self.cluster.node_of(p).is_some() || !seated.insert(uid.as_str()) {
                    continue;
                }
                if let Some(port) = p.host_port {
                    // A seat may hold room a preemption's victims still use (see
                    // `Cluster::admits_seat`).
                    let other = ports.iter().find(|(q, _, leaving)| *q == port && !leaving);
                    prop_assert!(
                        other.is_none(),
                        "seat of {} on {} with host port {} that {} has",
                        p.name,
                        name,
                        port,
                        other.map_or("", |o| o.1)
                    );
                    ports.push((port, &p.name, false));
                }
            }
            // Devices: allocated here to pods that stay, and wanted by the seats here.
            let allocated_here = |c: &String| {
                self.cluster
                    .claims
                    .get(c)
                    .is_some_and(|a| a.as_ref().is_some_and(|(n, _)| n == name))
            };
            let staying = self
                .cluster
                .pods
                .iter()
                .filter(|p| !p.terminating && p.claim.as_ref().is_some_and(allocated_here))
                .count();
            let mut wanted: Vec<&str> = Vec::new();
            for uid in &seated {
                let Some(p) = self.cluster.pod(uid) else {
                    continue;
                };
                let unallocated = p
                    .claim
                    .as_ref()
                    .and_then(|c| self.cluster.claims.get(c))
                    .is_some_and(Option::is_none);
                if unallocated {
                    wanted.push(&p.name);
                }
            }
            prop_assert!(
                staying + wanted.len() <= self.cluster.devices(name),
                "seats of {:?} on {} want devices of {} where {} of its {} are allocated",
                wanted,
                name,
                name,
                staying,
                self.cluster.devices(name)
            );
            self.checks += 3;
        }
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
        for p in std::mem::take(&mut self.gone_unseen) {
            self.pod_event(Event::Delete(p.object()));
        }
        for p in std::mem::take(&mut self.cluster.pods) {
            self.pod_event(Event::Delete(p.object()));
        }
        self.collect_claims()?;
        for n in std::mem::take(&mut self.cluster.nodes).into_values() {
            self.node_event(Event::Delete(n.object()));
            if let Some(s) = n.slice() {
                self.dra_event(Event::Delete(s))?;
            }
        }
        prop_assert_eq!(self.table.pod_count(), 0);
        prop_assert_eq!(self.table.node_count(), 0);
        prop_assert_eq!(self.table.gangs.len(), 0);
        prop_assert!(self.table.generations.is_empty(), "generations left");
        self.checks += 4;
        Ok(())
    }
}

/// A preemption hold before a step: the gang, its preemptor, the node kube-scheduler
/// nominated, and the members it seated or planned room for.
struct HeldBefore {
    gang: GangKey,
    preemptor: String,
    node: String,
    /// The members it seated or planned room for, with the node of that seat or room.
    members: Vec<(String, String)>,
}

impl Check {
    fn holds(&self) -> Vec<HeldBefore> {
        self.table
            .gangs
            .iter()
            .filter_map(|(key, g)| {
                let h = g.preemption_hold()?;
                let members = g
                    .seats()
                    .iter()
                    .filter_map(|(h, s)| Some((h.member()?, &s.node)))
                    .chain(
                        g.awaiting_room()
                            .iter()
                            .filter_map(|s| Some((s.holder.member()?, &s.node))),
                    )
                    .map(|(u, n)| (u.to_string(), n.to_string()))
                    .collect();
                Some(HeldBefore {
                    gang: key.clone(),
                    preemptor: h.preemptor.to_string(),
                    node: h.node.to_string(),
                    members,
                })
            })
            .collect()
    }

    /// Evict-for-whole, the hold: the room a preemption frees is held for the preemptor's
    /// gang until it binds. A hold ends without its seats (the gang admitted no more) only on
    /// its own terms: the preemptor deleted, bound
    /// or being bound, or nominated elsewhere or nowhere; its node gone or refusing it; the
    /// gang placed or timed out (a clock jump); its quorum (or a task's minimum) no longer met
    /// by its members with nodes and the members the hold seated or planned room for that are
    /// still pending and not gated by another component; a PodGroup's change of quorum, a
    /// binding refused, or a restart or hand-over (the plans are in memory only: written
    /// down in preemption_hold.rs).
    fn check_holds_kept(
        &mut self,
        before: &[HeldBefore],
        step: &Step,
    ) -> Result<(), TestCaseError> {
        if matches!(
            step,
            Step::Restart { .. }
                | Step::HandOver { .. }
                | Step::Advance(_)
                | Step::PodGroup { .. }
                | Step::Finish { ok: false, .. }
        ) {
            return Ok(());
        }
        for h in before {
            let Some(g) = self.table.gangs.get(&h.gang) else {
                continue;
            };
            // Still admitted: its seats hold the room (a preemptor asking to bind turns the
            // hold into the gang's ordinary seats).
            if g.preemption_hold().is_some()
                || g.is_admitted()
                || g.is_placed_flag()
                || matches!(g.phase(), Phase::BackingOff { .. })
            {
                continue;
            }
            let preemptor = self.cluster.pod(&h.preemptor);
            let preemptor_ends = preemptor.is_none_or(|p| {
                p.terminating
                    || self.cluster.node_of(p).is_some()
                    || p.nominated.as_deref() != Some(h.node.as_str())
                    || !self.cluster.nodes.contains_key(&h.node)
                    || !self.cluster.admits(&h.node, p)
            });
            if preemptor_ends {
                continue;
            }
            let gang = h.gang.name.as_ref();
            let counted: Vec<&SimPod> = self
                .cluster
                .pods
                .iter()
                .filter(|p| p.gang().is_some_and(|(g, _)| g == gang) && !p.terminating)
                .filter(|p| {
                    // A seat or room on a node deleted since counts for nothing.
                    let held = h
                        .members
                        .iter()
                        .any(|(u, n)| *u == p.uid && self.cluster.nodes.contains_key(n));
                    self.cluster.node_of(p).is_some() || (held && !p.gated)
                })
                .collect();
            let spec = g.spec();
            let short = (counted.len() as u32) < spec.quorum
                || spec.tasks.iter().any(|(t, min)| {
                    (counted.iter().filter(|p| p.task() == Some(&**t)).count() as u32) < min
                });
            prop_assert!(
                short,
                "gang {} lost its preemption hold (preemptor {} nominated to {}) while {} of its \
                 quorum {} were with nodes, seated or planned",
                h.gang,
                h.preemptor,
                h.node,
                counted.len(),
                spec.quorum
            );
            self.checks += 1;
        }
        Ok(())
    }
}

/// The model check's name of a gang (`g0` … `g3`).
fn sim_gang(name: &str) -> Option<&'static str> {
    GANGS.into_iter().map(|(g, _)| g).find(|g| *g == name)
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

/// Runs one case: the cluster's nodes, the script with every check after every step, then
/// everything deleted (the table must end empty). Returns the checks, for their counts.
fn run_case(shape: Shape, script: &[Step]) -> Result<Check, TestCaseError> {
    let mut c = Check::new(shape);
    // A cluster starts with its nodes; steps delete and add them again.
    for i in 0..NODES.len() {
        c.apply(&Step::PutNode(i))?;
    }
    let mut trace = Trace::default();
    for (i, s) in script.iter().enumerate() {
        // Which step broke what, for the failure message.
        let at = |e: TestCaseError| match e {
            TestCaseError::Fail(why) => TestCaseError::fail(format!("{why} (step {i}: {s:?})")),
            other => other,
        };
        let held = c.holds();
        // The pods muster's watch had not shown before this step: shown after it.
        let late = c.unseen.len();
        let late_gone = c.gone_unseen.len();
        c.apply(s).map_err(at)?;
        let gone: Vec<SimPod> = c
            .gone_unseen
            .drain(..late_gone.min(c.gone_unseen.len()))
            .collect();
        for p in gone {
            c.pod_event(Event::Delete(p.object()));
        }
        let due: Vec<String> = c.unseen.drain(..late).collect();
        c.deliver_late(due);
        c.check_holds_kept(&held, s).map_err(at)?;
        if let Some(outcome) = c.outcome() {
            trace.step(s, &outcome);
        }
        c.check().map_err(at)?;
    }
    trace.finish();
    c.delete_everything()?;
    Ok(c)
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
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
    let totals: [AtomicU64; 3 + SEEN] = Default::default();
    let case = (cluster::shape(), proptest::collection::vec(step(), 1..100));
    let result = runner.run(&case, |(shape, script)| {
        let c = run_case(shape, &script)?;
        let counts = [1, script.len() as u64, c.checks].into_iter().chain(c.seen);
        for (total, n) in totals.iter().zip(counts) {
            total.fetch_add(n, Ordering::Relaxed);
        }
        Ok(())
    });
    let totals = totals.map(AtomicU64::into_inner);
    let seen: Vec<String> = SEEN_NAMES
        .iter()
        .zip(&totals[3..])
        .map(|(what, n)| format!("{n} {what}"))
        .collect();
    eprintln!(
        "model check (MODEL_CHECK_SEED={seed_hex}): {} cases passed, {} steps, {} invariant \
         checks; exercised {}",
        totals[0],
        totals[1],
        totals[2],
        seen.join(", "),
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

/// A case the model check found (seed 477af075…, case 53,494), kept as a fixed script: gathered
/// `g0` (priority 100, quorum 2) is let through; its member in slot 1 preempts foreign pods on
/// n2 and is nominated there (room held: n2 for it, n1 for slot 2); slot 2 asks to bind on n1,
/// n1 is tainted, and slot 1's next cycle, its victims still terminating, binds it on n1 too.
/// The last look refuses the gang (slot 2 does not tolerate the taint), so kube-scheduler's
/// binding cycle fails and it clears slot 1's nomination: the hold ends on its own terms. The
/// check had kept the nomination, and called the hold lost.
#[test]
fn a_preemptors_refused_binding_elsewhere_ends_its_hold_as_kube_scheduler_clears_its_nomination() {
    let node = |memory_gi, devices, rack| NodeShape {
        memory_gi,
        gpus: 0,
        pods: 2,
        devices,
        rack,
    };
    let slot = |tolerates| SlotShape {
        memory_gi: 0,
        gpus: 0,
        placement: Placement::Anywhere,
        tolerates,
        gated: false,
        priority: 0,
        host_port: None,
        claim: false,
    };
    let mut slots = vec![slot(false); SLOTS.len()];
    slots[1] = slot(true);
    let shape = Shape {
        nodes: vec![node(1, 0, None), node(1, 1, Some(0)), node(3, 0, None)],
        slots,
        min_member: [2, 1, 1],
        gang_priority: [100, 0, 0, 0],
        g0_topology: Topology::Preferred,
        g3_one_rack: false,
        gathered: true,
    };
    let foreign = Step::Foreign {
        node: 2,
        cpu: 100,
        priority: 0,
    };
    let script = [
        Step::PutNode(0),
        Step::Taint(0),
        foreign.clone(),
        Step::Ungate(0),
        Step::CreatePod(2),
        Step::CreatePod(1),
        Step::PutNode(0),
        Step::Ungate(0),
        Step::Gather { gates_fail: false },
        Step::Restart { cut: false },
        foreign,
        Step::Preempt {
            slot: 1,
            node: 0,
            forge: false,
            act: true,
        },
        Step::Bind {
            slot: 2,
            anywhere: None,
        },
        Step::Taint(1),
        Step::Bind {
            slot: 1,
            anywhere: None,
        },
    ];
    if let Err(e) = run_case(shape, &script) {
        panic!("{e}");
    }
}

/// A case the model check found (seed 155ab120…, after 52,730 cases): gathered `g1` (quorum 2)
/// is bound, p5-1 on n1; gathered `g3` (priority 100) had been let through earlier with its
/// member p11-3 nominated by muster's gatherer to a seat on n1. After a hand-over, p11-3's
/// preempt call keeps n1 with p5-1 as victim, disrupting `g1` whole, and kube-scheduler does
/// not act on it. A re-list then shows p11-3 nominated to n1 — muster's own nomination, there
/// before the answer — and the table took it for kube-scheduler's commitment: it evicted the
/// rest of `g1` (p6-2) while p5-1 kept running, half a gang (never-half, evict-for-whole).
/// A nomination commits a disruption only if it was not there when muster answered.
#[test]
fn a_nomination_muster_wrote_before_a_preempt_answer_commits_no_disruption() {
    let mut slots = vec![bare_slot(); SLOTS.len()];
    slots[5].memory_gi = 1;
    slots[11].placement = Placement::Selector;
    let shape = Shape {
        nodes: vec![two_pod_node(2), two_pod_node(1), two_pod_node(1)],
        slots,
        min_member: [2, 1, 1],
        gang_priority: [0, 0, 0, 100],
        g0_topology: Topology::Required,
        g3_one_rack: false,
        gathered: true,
    };
    let script = [
        Step::CreatePod(5),
        Step::CreatePod(6),
        Step::Gather { gates_fail: false },
        Step::CreatePod(11),
        Step::Cordon(0),
        Step::Gather { gates_fail: false },
        Step::Bind {
            slot: 5,
            anywhere: None,
        },
        Step::Bind {
            slot: 6,
            anywhere: None,
        },
        Step::HandOver { cut: false },
        Step::Preempt {
            slot: 11,
            node: 0,
            forge: false,
            act: false,
        },
        Step::Relist {
            pods: true,
            lost: None,
        },
    ];
    if let Err(e) = run_case(shape, &script) {
        panic!("{e}");
    }
}

/// The scripted cases' cluster: three nodes of 1 CPU, 4 GiB and 4 pods, every slot's pod
/// asking for CPU only, with no rule but room; `g0`'s quorum 2; gathered or every pod through
/// muster.
/// A node of the scripted cases: `memory_gi` GiB, room for two pods, nothing else.
fn two_pod_node(memory_gi: i64) -> NodeShape {
    NodeShape {
        memory_gi,
        gpus: 0,
        pods: 2,
        devices: 0,
        rack: None,
    }
}

/// A slot of the scripted cases asking for nothing but its CPU, placed anywhere.
fn bare_slot() -> SlotShape {
    SlotShape {
        memory_gi: 0,
        gpus: 0,
        placement: Placement::Anywhere,
        tolerates: false,
        gated: false,
        priority: 0,
        host_port: None,
        claim: false,
    }
}

fn plain_shape(gathered: bool) -> Shape {
    let slot = SlotShape {
        memory_gi: 0,
        gpus: 0,
        placement: Placement::Anywhere,
        tolerates: false,
        gated: false,
        priority: 0,
        host_port: None,
        claim: false,
    };
    let node = NodeShape {
        memory_gi: 4,
        gpus: 0,
        pods: 4,
        devices: 0,
        rack: None,
    };
    Shape {
        nodes: vec![node.clone(), node.clone(), node],
        slots: vec![slot; SLOTS.len()],
        min_member: [2, 1, 1],
        gang_priority: [0; 4],
        g0_topology: Topology::Anywhere,
        g3_one_rack: false,
        gathered,
    }
}

/// A job restarted while its old pods still run (JobSet's default `Recreate`, the garbage
/// collector not there yet): the new attempt's first pod must not be bound as a late member of
/// the old pods' placed gang (never-half), in either mode; the new attempt is bound whole once
/// it exists. Scripted so the case is always run, whatever the random cases draw.
#[test]
fn a_restarted_jobs_first_new_pod_is_not_bound_beside_the_old_attempts_running_pods() {
    for gathered in [false, true] {
        let shape = plain_shape(gathered);
        let bind = |slot| Step::Bind {
            slot,
            anywhere: None,
        };
        let finish = Step::Finish { pick: 0, ok: true };
        let mut script = vec![Step::CreatePod(0), Step::CreatePod(1)];
        if gathered {
            script.push(Step::Gather { gates_fail: false });
        }
        script.extend([
            bind(0),
            bind(1),
            finish.clone(),
            finish.clone(),
            Step::RestartJob {
                gang: 0,
                old_go: false,
            },
            Step::CreatePod(0),
        ]);
        if gathered {
            script.push(Step::Gather { gates_fail: false });
        }
        script.extend([bind(0), finish.clone(), Step::CreatePod(1)]);
        if gathered {
            script.push(Step::Gather { gates_fail: false });
        }
        script.extend([bind(1), bind(0), finish.clone(), finish]);
        match run_case(shape, &script) {
            Ok(c) => assert!(
                c.seen[Seen::BOUND] >= 2,
                "gathered {gathered}: both attempts bound whole, {:?}",
                c.seen
            ),
            Err(e) => panic!("gathered {gathered}: {e}"),
        }
    }
}

/// The case found on the real control plane after a kube-apiserver outage, scripted: gathered
/// `g0` (quorum 2) is let through onto `n0`, the only node; `p0-0`'s bind call is held, then
/// runs out (kube-scheduler forgets its room and clears its nomination). kube-scheduler binds a
/// plain pod into that room, and muster's watch shows it only after the next step, in which
/// `p1-0`'s bind call arrives. Binding `p0-0` with it, on muster's word that its seat's room is
/// free, over-commits `n0` (no-overcommit); `p0-0`'s seat is planned again instead, and the
/// gang waits for kube-scheduler to send it again.
#[test]
fn a_member_kube_scheduler_let_go_is_not_bound_into_room_a_plain_pod_took() {
    let shape = plain_shape(true);
    let bind = |slot| Step::Bind {
        slot,
        anywhere: None,
    };
    let script = [
        Step::DeleteNode {
            node: 1,
            force: false,
        },
        Step::DeleteNode {
            node: 2,
            force: false,
        },
        Step::CreatePod(0),
        Step::CreatePod(1),
        Step::Gather { gates_fail: false },
        bind(0),
        Step::Advance(Duration::from_secs(6)),
        Step::Advance(Duration::from_secs(6)),
        Step::Plain {
            node: 0,
            cpu: 600,
            late: true,
        },
        bind(1),
        Step::Gather { gates_fail: false },
        bind(0),
    ];
    match run_case(shape, &script) {
        Ok(c) => assert!(
            c.seen[Seen::SEATS_LET_GO] >= 1 && c.seen[Seen::PLAIN_UNSEEN] == 1,
            "the case ran as scripted: {:?}",
            c.seen
        ),
        Err(e) => panic!("{e}"),
    }
}

/// Seed `4082ddf1e6e4ee180000000000000000d7650000000000000000000000000000` (300,000 cases,
/// failed after 60,745): g1's Volcano PodGroup is deleted, so g1 waits for it (placed
/// nowhere, no quorum of it binds); its worker's preempt call once kept a candidate anyway —
/// the foreign pod on n0 evicted and room held for a gang that cannot run — and deleting the
/// master then dropped the hold. A gang waiting for its PodGroup keeps no candidate
/// (evict-for-whole, holds-nothing): nothing is evicted, nothing held.
#[test]
fn a_gang_waiting_for_its_pod_group_evicts_nothing_for_a_preemption() {
    let mut slots = vec![bare_slot(); SLOTS.len()];
    slots[1].claim = true;
    slots[6].placement = Placement::AffinityNotIn;
    let shape = Shape {
        nodes: vec![two_pod_node(2), two_pod_node(1), two_pod_node(1)],
        slots,
        min_member: [2, 1, 1],
        gang_priority: [0, 100, 0, 0],
        g0_topology: Topology::Anywhere,
        g3_one_rack: false,
        gathered: false,
    };
    let script = [
        Step::PutNode(0),
        Step::CreatePod(4),
        Step::CreatePod(3),
        Step::Foreign {
            node: 0,
            cpu: 100,
            priority: 0,
        },
        Step::PodGroup {
            which: 0,
            min_member: None,
        },
        Step::Advance(Duration::from_secs(6)),
        Step::Preempt {
            slot: 4,
            node: 0,
            forge: false,
            act: true,
        },
        Step::DeletePod {
            slot: 3,
            grace: false,
        },
    ];
    let c = match run_case(shape, &script) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(c.seen[Seen::ACTED], 0, "no preemption acted on for g1");
}
