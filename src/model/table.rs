//! The gang reservation table and capacity ledger.
//!
//! Vocabulary:
//! - a pod is *bound* when the API server says so (`spec.nodeName`), *assumed* when muster has
//!   decided to bind it and the watch has not confirmed it yet; both count as "has a node";
//! - a *seat* reserves a node's capacity for one gang member before its gang reaches quorum.
//!   A *confirmed* seat is on the node kube-scheduler chose for that member (its bind call
//!   arrived); a *planned* seat is where muster's simulation put a member that has not asked
//!   yet. Planned seats are what stop two gangs from each holding half of what both need: the
//!   moment a gang takes its first seat, it holds room for all of its quorum (members not
//!   created yet included, assumed as large as the largest member that exists);
//! - filter offers a member below quorum exactly one node (its seat, a planned seat of its
//!   gang, or the tightest fit), so kube-scheduler skips scoring it and it lands on the plan;
//! - a gang is *admitted* while it holds seats, and *placed* once bound + seated members reached
//!   quorum (then every seated member is bound, and later members bind at once).

use std::cmp::Reverse;
use std::collections::BTreeSet;

use rustc_hash::FxHashMap as HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use thiserror::Error;

use super::membership::GangKey;
use super::objects::{node_admits, NodeInfo, NodeName, PodInfo, PodUid};
use super::resources::{shortfall_against, Resources, Shortfall};

/// Tunables of the gang model; the binary fills these from flags.
#[derive(Clone, Debug)]
pub struct ModelConfig {
    /// How long an admitted gang may hold seats without reaching quorum.
    pub default_timeout: Duration,
    /// After a timeout, how long the gang is refused before it may take seats again, so that
    /// other gangs get a chance at the capacity it released.
    pub backoff: Duration,
    /// A waiting gang counts as *competing* (and is served before younger, lower-priority gangs)
    /// only if kube-scheduler tried one of its members this recently: a gang whose pods stopped
    /// coming must not block the others.
    pub active_window: Duration,
    /// Upper bound on competing gangs simulated ahead of the one being decided.
    pub max_gangs_ahead: usize,
    /// Upper bound on candidate nodes tried one by one for the member being filtered.
    pub max_first_node_attempts: usize,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            default_timeout: Duration::from_secs(60),
            backoff: Duration::from_secs(10),
            active_window: Duration::from_secs(30),
            max_gangs_ahead: 32,
            max_first_node_attempts: 16,
        }
    }
}

/// Identity of a pod, for Events and binding calls.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodRef {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    pub uid: PodUid,
}

impl fmt::Display for PodRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Something worth telling the pod's owner, as a Kubernetes Event (and a log line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub pod: PodRef,
    pub kind: NoticeKind,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoticeKind {
    /// Normal `GangWaiting`: the gang is below quorum (k/n), or cannot fit yet.
    Waiting,
    /// Normal `GangPlaced`: quorum reached, members bound together.
    Placed,
    /// Warning `GangTimedOut`: seats released after the quorum timeout.
    TimedOut,
    /// Warning `GangQuorumConflict`: members disagree on minAvailable.
    QuorumConflict,
    /// Warning `InvalidGangKeys`: the pod's gang labels/annotations cannot be used.
    InvalidKeys,
    /// Warning `GangBindFailed`: muster could not bind a member at quorum.
    BindFailed,
}

impl NoticeKind {
    pub fn reason(self) -> &'static str {
        match self {
            NoticeKind::Waiting => "GangWaiting",
            NoticeKind::Placed => "GangPlaced",
            NoticeKind::TimedOut => "GangTimedOut",
            NoticeKind::QuorumConflict => "GangQuorumConflict",
            NoticeKind::InvalidKeys => "InvalidGangKeys",
            NoticeKind::BindFailed => "GangBindFailed",
        }
    }

    pub fn is_warning(self) -> bool {
        !matches!(self, NoticeKind::Waiting | NoticeKind::Placed)
    }
}

/// The filter verdict for one candidate node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeVerdict {
    Fits,
    /// Not offered, and no reason given: another node of the same answer fits, and
    /// kube-scheduler reads reasons only when no node does (so making them would be waste).
    NotOffered,
    /// Goes to `FailedNodes`: preemption may still help.
    Unschedulable(Arc<str>),
    /// Goes to `FailedAndUnresolvableNodes`: nothing on this node can help.
    Unresolvable(Arc<str>),
}

/// A bind call as kube-scheduler sends it.
#[derive(Clone, Copy, Debug)]
pub struct BindRequest<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
    pub node: &'a str,
}

/// What the bind handler must do.
#[derive(Debug, PartialEq, Eq)]
pub enum BindDecision {
    /// Create this pod's binding now (not in a gang, or its gang is already placed).
    BindNow { pod: PodRef, node: NodeName },
    /// The API server already has the pod on this node: answer success, do nothing.
    AlreadyBound,
    /// Seated; its gang is below quorum. The handler may hold the call until the gang is
    /// placed; otherwise it answers with this message as the error, so kube-scheduler retries
    /// the pod later (its seat is kept).
    Wait { gang: GangKey, message: String },
    /// This bind completed the quorum: bind every listed member (the requester included).
    BindGang {
        gang: GangKey,
        members: Vec<(PodRef, NodeName)>,
    },
    /// Refused; the table is unchanged.
    Reject(BindRejection),
}

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum BindRejection {
    #[error("unknown pod {namespace}/{name} (uid {uid}): muster has not seen it; it may have been deleted")]
    UnknownPod {
        namespace: String,
        name: String,
        uid: String,
    },
    #[error("pod uid {uid} is {actual}, not {namespace}/{name}")]
    PodMismatch {
        namespace: String,
        name: String,
        uid: String,
        actual: String,
    },
    #[error("unknown node {0:?}: muster has no such node in its cache")]
    UnknownNode(String),
    #[error("pod {pod} is already bound to node {node}")]
    BoundElsewhere { pod: String, node: String },
    #[error("pod {pod} is already being bound to node {node} with its gang")]
    BindInFlight { pod: String, node: String },
    #[error("pod {0} has terminated")]
    Terminal(String),
    #[error("pod {pod}: {message}")]
    InvalidMembership { pod: String, message: String },
    #[error("node {node} has no room for pod {pod}: {shortfall}")]
    NoRoom {
        pod: String,
        node: String,
        shortfall: Shortfall,
    },
    #[error("{0}")]
    GangCannotBePlaced(String),
}

/// Counters for `/metrics`.
#[derive(Clone, Debug, Default)]
pub struct ModelStats {
    pub gangs_placed: u64,
    pub gang_timeouts: u64,
}

/// Read-only description of one gang for the `/gangs` endpoint.
#[derive(Clone, Debug, serde::Serialize)]
pub struct GangView {
    pub namespace: String,
    pub name: String,
    pub state: &'static str,
    pub quorum: u32,
    pub members_with_nodes: u32,
    pub members: Vec<MemberView>,
    /// Why the gang waits, in the words of its last refusal.
    pub waiting_reason: Option<String>,
    pub seconds_until_timeout: Option<u64>,
    pub seconds_of_backoff_left: Option<u64>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct MemberView {
    pub name: String,
    /// `bound`, `binding`, `seated`, `planned` or `pending`; `held` for room held for a
    /// member not created yet (its name is then `(not created yet)`).
    pub state: &'static str,
    pub node: Option<String>,
}

#[derive(Clone, Debug)]
struct Seat {
    node: NodeName,
    requests: Resources,
    confirmed: bool,
}

struct NodeEntry {
    info: NodeInfo,
    /// Position in `GangTable::nodes`.
    index: usize,
    /// Requests of the non-terminal pods bound or assumed here.
    used: Resources,
    /// Requests of the seats here.
    reserved: Resources,
    /// `info.zone()`, looked up once: prioritize compares it for every candidate.
    zone: Option<Arc<str>>,
}

struct PodEntry {
    info: PodInfo,
    /// Node muster bound (or is binding) the pod to, until the watch shows `spec.nodeName`.
    assumed: Option<NodeName>,
}

impl PodEntry {
    fn node(&self) -> Option<&NodeName> {
        self.info.node_name.as_ref().or(self.assumed.as_ref())
    }

    /// The node whose capacity this pod consumes, if any.
    fn charged_node(&self) -> Option<&NodeName> {
        if self.info.terminal {
            None
        } else {
            self.node()
        }
    }
}

#[derive(Default)]
struct Gang {
    members: BTreeSet<PodUid>,
    seats: HashMap<PodUid, Seat>,
    admitted_at: Option<Instant>,
    placed: bool,
    backoff_until: Option<Instant>,
    last_attempt: Option<Instant>,
    /// The last waiting message told to members, so Events are emitted on change only.
    last_wait_message: Option<String>,
    /// The quorum conflict already reported, so it is reported once.
    reported_conflict: Option<Vec<u32>>,
}

/// Derived, per-decision facts about a gang.
struct GangFacts {
    quorum: u32,
    /// Members that exist (pods muster has seen).
    existing: u32,
    /// Members bound or assumed.
    with_nodes: u32,
    confirmed_seats: u32,
    priority: i32,
    created: i64,
    timeout: Option<Duration>,
}

/// Nodes consumed by a simulation, on top of the ledger. Only nodes touched are stored, so a
/// simulation never copies the whole node list.
#[derive(Default)]
struct Overlay {
    taken: HashMap<usize, Resources>,
    log: Vec<(usize, Resources)>,
}

impl Overlay {
    fn get(&self, index: usize) -> Option<&Resources> {
        self.taken.get(&index)
    }

    fn take(&mut self, index: usize, r: &Resources) {
        self.taken.entry(index).or_default().add(r);
        self.log.push((index, r.clone()));
    }

    fn checkpoint(&self) -> usize {
        self.log.len()
    }

    fn rollback(&mut self, checkpoint: usize) {
        while self.log.len() > checkpoint {
            let (index, r) = self.log.pop().expect("log is longer than checkpoint");
            if let Some(t) = self.taken.get_mut(&index) {
                t.sub(&r);
            }
        }
    }
}

/// Outcome of simulating a gang's placement.
enum Admission {
    /// `first_nodes`: the candidate nodes the requesting member may take;
    /// `plan`: where the other members needed for quorum go, including members not created
    /// yet (under [`not_created_uid`] keys), which are assumed to request `not_created`.
    Fits {
        first_nodes: Vec<usize>,
        plan: Vec<(PodUid, usize)>,
        not_created: Resources,
    },
    /// At most `fit` of `quorum` members can have nodes at the same time; `missing` of them
    /// are not created yet.
    DoesNotFit { fit: u32, quorum: u32, missing: u32 },
}

/// The gang reservation table: the whole state muster decides from.
pub struct GangTable {
    config: ModelConfig,
    /// Nodes in a stable order (first-fit simulations walk them in this order); a simulation
    /// refers to a node by its position here.
    nodes: Vec<NodeEntry>,
    node_index: HashMap<NodeName, usize>,
    /// Usage of pods bound to nodes not (yet) in the cache; moved in when the node appears.
    orphan_usage: HashMap<NodeName, Resources>,
    pods: HashMap<PodUid, PodEntry>,
    gangs: HashMap<GangKey, Gang>,
    notices: Vec<Notice>,
    stats: ModelStats,
}

impl GangTable {
    pub fn new(config: ModelConfig) -> Self {
        GangTable {
            config,
            nodes: Vec::new(),
            node_index: HashMap::default(),
            orphan_usage: HashMap::default(),
            pods: HashMap::default(),
            gangs: HashMap::default(),
            notices: Vec::new(),
            stats: ModelStats::default(),
        }
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// Notices produced since the last call.
    pub fn take_notices(&mut self) -> Vec<Notice> {
        std::mem::take(&mut self.notices)
    }

    pub fn stats(&self) -> &ModelStats {
        &self.stats
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    pub fn has_pod(&self, uid: &str) -> bool {
        self.pods.contains_key(uid)
    }

    /// Whether the pod holds a seat in its gang (it is waiting for quorum).
    pub fn holds_seat(&self, uid: &str) -> bool {
        self.pods
            .get(uid)
            .and_then(|p| p.info.gang())
            .and_then(|m| self.gangs.get(&m.gang))
            .is_some_and(|g| g.seats.contains_key(uid))
    }

    /// Whether the pod has a node: bound, or being bound by muster (its gang reached quorum
    /// and the binding call is in flight).
    pub fn has_node(&self, uid: &str) -> bool {
        self.pods.get(uid).is_some_and(|p| p.node().is_some())
    }

    /// Why the pod's gang is waiting, as last told (for a bind call that gives up waiting).
    pub fn wait_reason(&self, uid: &str) -> Option<String> {
        let key = &self.pods.get(uid)?.info.gang()?.gang;
        self.gangs.get(key)?.last_wait_message.clone()
    }

    // ---------------------------------------------------------------- cluster events

    /// A node was added or changed.
    pub fn apply_node(&mut self, info: NodeInfo) {
        let zone = info.zone().map(Arc::from);
        if let Some(entry) = self.node_mut(&info.name) {
            entry.info = info;
            entry.zone = zone;
            return;
        }
        let used = self.orphan_usage.remove(&info.name).unwrap_or_default();
        let index = self.nodes.len();
        self.node_index.insert(info.name.clone(), index);
        self.nodes.push(NodeEntry {
            info,
            index,
            used,
            reserved: Resources::default(),
            zone,
        });
    }

    /// A node was deleted: seats on it are released at once.
    pub fn remove_node(&mut self, name: &str) {
        let Some(index) = self.node_index.remove(name) else {
            return;
        };
        let entry = self.nodes.swap_remove(index);
        if let Some(moved) = self.nodes.get_mut(index) {
            moved.index = index;
            self.node_index.insert(moved.info.name.clone(), index);
        }
        if !entry.used.is_zero() {
            self.orphan_usage
                .insert(entry.info.name.clone(), entry.used);
        }
        for gang in self.gangs.values_mut() {
            gang.seats.retain(|_, seat| &*seat.node != name);
            if gang.seats.is_empty() {
                gang.admitted_at = None;
            }
        }
    }

    /// Keeps only the nodes for which `keep` is true (after a watch re-list).
    pub fn retain_nodes(&mut self, keep: impl Fn(&str) -> bool) {
        let gone: Vec<NodeName> = self
            .nodes
            .iter()
            .map(|e| e.info.name.clone())
            .filter(|n| !keep(n))
            .collect();
        for n in gone {
            self.remove_node(&n);
        }
    }

    fn node(&self, name: &str) -> Option<&NodeEntry> {
        self.node_index.get(name).map(|&i| &self.nodes[i])
    }

    fn node_mut(&mut self, name: &str) -> Option<&mut NodeEntry> {
        let i = *self.node_index.get(name)?;
        Some(&mut self.nodes[i])
    }

    /// A pod was added or changed (from the watch).
    pub fn apply_pod(&mut self, info: PodInfo) {
        let uid = info.uid.clone();
        let old = self.pods.remove(&uid);
        let (old_gang, assumed) = match &old {
            Some(entry) => {
                if let Some(node) = entry.charged_node().cloned() {
                    self.uncharge(&node, &entry.info.requests);
                }
                (
                    entry.info.gang().map(|m| m.gang.clone()),
                    entry.assumed.clone(),
                )
            }
            None => (None, None),
        };
        if let Some(Err(e)) = old.as_ref().map(|o| &o.info.membership) {
            // Already reported unless the error changed.
            if info.membership.as_ref().err() != Some(e) {
                self.report_invalid(&info);
            }
        } else if info.membership.is_err() {
            self.report_invalid(&info);
        }
        // The API server's nodeName supersedes what muster assumed.
        let assumed = if info.node_name.is_some() {
            None
        } else {
            assumed
        };
        let new_gang = info.gang().map(|m| m.gang.clone());
        let entry = PodEntry { info, assumed };
        if let Some(node) = entry.charged_node().cloned() {
            self.charge(&node, &entry.info.requests);
        }
        let has_node = entry.node().is_some();
        let terminal = entry.info.terminal;
        self.pods.insert(uid.clone(), entry);

        if old_gang != new_gang {
            if let Some(g) = old_gang {
                self.leave_gang(&g, &uid);
            }
        }
        if let Some(g) = new_gang {
            let gang = self.gangs.entry(g.clone()).or_default();
            gang.members.insert(uid.clone());
            if has_node || terminal {
                // Bound (or finished): its seat, if any, has served its purpose.
                self.release_seat(&g, &uid);
            }
            self.check_quorum_agreement(&g);
            self.refresh_placed(&g);
        }
    }

    /// A pod seen in a filter request: recorded if the watch has not delivered it yet, so that
    /// the bind that follows can find it. Never overrides what the watch said.
    pub fn observe_pod(&mut self, info: &PodInfo) {
        if !self.pods.contains_key(&info.uid) {
            self.apply_pod(info.clone());
        }
    }

    /// A pod was deleted: its requests and its seat are released at once.
    pub fn remove_pod(&mut self, uid: &str) {
        let Some(entry) = self.pods.remove(uid) else {
            return;
        };
        if let Some(node) = entry.charged_node().cloned() {
            self.uncharge(&node, &entry.info.requests);
        }
        if let Some(m) = entry.info.gang() {
            let key = m.gang.clone();
            self.leave_gang(&key, &entry.info.uid);
        }
    }

    /// Keeps only the pods for which `keep` is true (after a watch re-list).
    pub fn retain_pods(&mut self, keep: impl Fn(&str) -> bool) {
        let gone: Vec<PodUid> = self.pods.keys().filter(|u| !keep(u)).cloned().collect();
        for uid in gone {
            self.remove_pod(&uid);
        }
    }

    fn leave_gang(&mut self, key: &GangKey, uid: &PodUid) {
        self.release_seat(key, uid);
        let empty = match self.gangs.get_mut(key) {
            Some(g) => {
                g.members.remove(uid);
                g.members.is_empty()
            }
            None => false,
        };
        if empty {
            self.gangs.remove(key);
        } else {
            self.refresh_placed(key);
        }
    }

    /// A placed gang with no member on any node any more (all deleted, finished or failed to
    /// bind) gathers again from scratch.
    fn refresh_placed(&mut self, key: &GangKey) {
        let Some(gang) = self.gangs.get(key) else {
            return;
        };
        if gang.placed {
            let any = gang
                .members
                .iter()
                .any(|u| self.pods.get(u).and_then(|p| p.charged_node()).is_some());
            if !any {
                if let Some(g) = self.gangs.get_mut(key) {
                    g.placed = false;
                }
            }
        }
    }

    fn release_seat(&mut self, key: &GangKey, uid: &str) {
        let Some(seat) = self.gangs.get_mut(key).and_then(|g| g.seats.remove(uid)) else {
            return;
        };
        if let Some(n) = self.node_mut(&seat.node) {
            n.reserved.sub(&seat.requests);
        }
        if let Some(g) = self.gangs.get_mut(key) {
            if g.seats.is_empty() {
                g.admitted_at = None;
            }
        }
    }

    fn add_seat(&mut self, key: &GangKey, uid: PodUid, seat: Seat) {
        if let Some(n) = self.node_mut(&seat.node) {
            n.reserved.add(&seat.requests);
        }
        if let Some(g) = self.gangs.get_mut(key) {
            g.seats.insert(uid, seat);
        }
    }

    fn charge(&mut self, node: &NodeName, r: &Resources) {
        match self.node_mut(node) {
            Some(e) => e.used.add(r),
            None => self.orphan_usage.entry(node.clone()).or_default().add(r),
        }
    }

    fn uncharge(&mut self, node: &NodeName, r: &Resources) {
        match self.node_mut(node) {
            Some(e) => e.used.sub(r),
            None => {
                if let Some(u) = self.orphan_usage.get_mut(node) {
                    u.sub(r);
                    if u.is_zero() {
                        self.orphan_usage.remove(node);
                    }
                }
            }
        }
    }

    fn report_invalid(&mut self, info: &PodInfo) {
        if let Err(e) = &info.membership {
            self.notices.push(Notice {
                pod: pod_ref(info),
                kind: NoticeKind::InvalidKeys,
                message: format!("{e}; muster will not schedule this pod until it is fixed"),
            });
        }
    }

    fn check_quorum_agreement(&mut self, key: &GangKey) {
        let Some(gang) = self.gangs.get(key) else {
            return;
        };
        let values: BTreeSet<u32> = gang
            .members
            .iter()
            .filter_map(|u| self.pods.get(u))
            .filter_map(|p| p.info.gang().and_then(|m| m.min_available))
            .collect();
        if values.len() < 2 {
            return;
        }
        let values: Vec<u32> = values.into_iter().collect();
        if gang.reported_conflict.as_ref() == Some(&values) {
            return;
        }
        let used = *values.last().expect("two values");
        let listed = values
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        let message = format!(
            "members of gang {key} disagree on minAvailable ({listed}); using the largest, {used}"
        );
        let members: Vec<PodRef> = gang
            .members
            .iter()
            .filter_map(|u| self.pods.get(u))
            .map(|p| pod_ref(&p.info))
            .collect();
        for pod in members {
            self.notices.push(Notice {
                pod,
                kind: NoticeKind::QuorumConflict,
                message: message.clone(),
            });
        }
        if let Some(g) = self.gangs.get_mut(key) {
            g.reported_conflict = Some(values);
        }
    }

    // ---------------------------------------------------------------- derived facts

    fn facts(&self, key: &GangKey) -> GangFacts {
        let mut f = GangFacts {
            quorum: 0,
            existing: 0,
            with_nodes: 0,
            confirmed_seats: 0,
            priority: i32::MIN,
            created: i64::MAX,
            timeout: None,
        };
        let Some(gang) = self.gangs.get(key) else {
            return f;
        };
        let mut members = 0u32;
        let mut explicit: Option<u32> = None;
        for uid in &gang.members {
            let Some(p) = self.pods.get(uid) else {
                continue;
            };
            members += 1;
            if p.charged_node().is_some() {
                f.with_nodes += 1;
            }
            f.priority = f.priority.max(p.info.priority);
            f.created = f.created.min(p.info.created);
            if let Some(m) = p.info.gang() {
                if let Some(q) = m.min_available {
                    explicit = Some(explicit.map_or(q, |e| e.max(q)));
                }
                if let Some(t) = m.timeout {
                    f.timeout = Some(f.timeout.map_or(t, |e: Duration| e.max(t)));
                }
            }
        }
        // Without any quorum key, the gang is every member that exists.
        f.quorum = explicit.unwrap_or(members).max(1);
        f.existing = members;
        f.confirmed_seats = gang.seats.values().filter(|s| s.confirmed).count() as u32;
        f
    }

    fn timeout_of(&self, facts: &GangFacts) -> Duration {
        facts.timeout.unwrap_or(self.config.default_timeout)
    }

    /// Whether the gang no longer needs all-or-nothing treatment.
    fn is_placed(&self, key: &GangKey, facts: &GangFacts) -> bool {
        self.gangs.get(key).is_some_and(|g| g.placed) || facts.with_nodes >= facts.quorum
    }

    /// Members that still need a node: existing, not terminal, not bound or assumed.
    fn pending_members(&self, key: &GangKey) -> Vec<&PodEntry> {
        let Some(gang) = self.gangs.get(key) else {
            return Vec::new();
        };
        gang.members
            .iter()
            .filter_map(|u| self.pods.get(u))
            .filter(|p| !p.info.terminal && p.node().is_none() && p.info.membership.is_ok())
            .collect()
    }

    fn node_shortfall(
        &self,
        entry: &NodeEntry,
        request: &Resources,
        credit: Option<&Resources>,
        overlay: Option<&Overlay>,
    ) -> Option<Shortfall> {
        let extra = overlay.and_then(|o| o.get(entry.index));
        match extra {
            Some(x) => shortfall_against(
                request,
                &entry.info.allocatable,
                credit,
                &[&entry.used, &entry.reserved, x],
            ),
            None => shortfall_against(
                request,
                &entry.info.allocatable,
                credit,
                &[&entry.used, &entry.reserved],
            ),
        }
    }

    /// First node (in stable order) that admits `pod` and has room for it in the simulation.
    fn first_fit(&self, pod: &PodInfo, overlay: &Overlay) -> Option<usize> {
        self.nodes.iter().enumerate().find_map(|(i, e)| {
            (node_admits(&e.info, pod)
                && self
                    .node_shortfall(e, &pod.requests, None, Some(overlay))
                    .is_none())
            .then_some(i)
        })
    }

    /// Reserves, in the simulation, room for every competing gang that comes before `key`
    /// (higher priority, then older) and fits. Gangs ahead that do not fit are skipped, so a
    /// big gang never blocks a smaller one behind it.
    fn reserve_gangs_ahead(&self, key: &GangKey, overlay: &mut Overlay, now: Instant) {
        let me = self.facts(key);
        let my_order = (Reverse(me.priority), me.created, key);
        let mut ahead: Vec<(Reverse<i32>, i64, &GangKey)> = self
            .gangs
            .iter()
            .filter(|(k, g)| {
                *k != key
                    && !g.placed
                    && g.admitted_at.is_none()
                    && g.backoff_until.is_none_or(|t| t <= now)
                    && g.last_attempt.is_some_and(|t| {
                        now.saturating_duration_since(t) <= self.config.active_window
                    })
            })
            .map(|(k, _)| {
                let f = self.facts(k);
                (Reverse(f.priority), f.created, k)
            })
            .filter(|o| *o < my_order)
            .collect();
        ahead.sort();
        for (_, _, other) in ahead.into_iter().take(self.config.max_gangs_ahead) {
            let facts = self.facts(other);
            if self.is_placed(other, &facts) {
                continue;
            }
            let need = facts.quorum.saturating_sub(facts.with_nodes) as usize;
            let mut pending = self.pending_members(other);
            if pending.len() < need {
                continue;
            }
            sort_smallest_first(&mut pending);
            let chosen = &pending[..need];
            let cp = overlay.checkpoint();
            let mut all = true;
            for p in largest_first(chosen) {
                match self.first_fit(&p.info, overlay) {
                    Some(i) => overlay.take(i, &p.info.requests),
                    None => {
                        all = false;
                        break;
                    }
                }
            }
            if !all {
                overlay.rollback(cp);
            }
        }
    }

    /// Simulates whether the gang of `pod` can reach quorum now, with `pod` on one of
    /// `candidates` (indices into `nodes`) and every other missing member somewhere,
    /// member by member and node by node (never as an aggregate sum).
    fn admission(
        &self,
        key: &GangKey,
        pod: &PodInfo,
        candidates: &[usize],
        now: Instant,
    ) -> Admission {
        let facts = self.facts(key);
        let need = facts
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
        // one too large only delays admission until the real members exist.
        let missing = need.saturating_sub(others.len() + 1);
        let template = existing.first().map_or(pod, |p| larger(pod, &p.info));
        let chosen: Vec<(PodUid, &PodInfo)> = (0..missing)
            .map(|n| (not_created_uid(n), template))
            .chain(existing.iter().map(|p| (p.info.uid.clone(), &p.info)))
            .collect();

        let mut overlay = Overlay::default();
        self.reserve_gangs_ahead(key, &mut overlay, now);
        let base = overlay.checkpoint();
        let fits_first = |overlay: &Overlay, i: usize| {
            let e = &self.nodes[i];
            self.node_shortfall(e, &pod.requests, None, Some(overlay))
                .is_none()
        };
        let mut best = 0usize;

        // Others first, then see which candidates are left for this pod: sound, and gives
        // kube-scheduler a choice of nodes.
        let mut plan = Vec::with_capacity(chosen.len());
        for (uid, p) in &chosen {
            match self.first_fit(p, &overlay) {
                Some(i) => {
                    overlay.take(i, &p.requests);
                    plan.push((uid.clone(), i));
                }
                None => break,
            }
        }
        if plan.len() == chosen.len() {
            let first_nodes: Vec<usize> = candidates
                .iter()
                .copied()
                .filter(|&i| fits_first(&overlay, i))
                .collect();
            if !first_nodes.is_empty() {
                return Admission::Fits {
                    first_nodes,
                    plan,
                    not_created: template.requests.clone(),
                };
            }
        }
        best =
            best.max(plan.len() + usize::from(candidates.iter().any(|&i| fits_first(&overlay, i))));
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
            let mut plan = Vec::with_capacity(chosen.len());
            for (uid, p) in &chosen {
                match self.first_fit(p, &overlay) {
                    Some(i) => {
                        overlay.take(i, &p.requests);
                        plan.push((uid.clone(), i));
                    }
                    None => break,
                }
            }
            if plan.len() == chosen.len() {
                return Admission::Fits {
                    first_nodes: vec![first],
                    plan,
                    not_created: template.requests.clone(),
                };
            }
            best = best.max(plan.len() + 1);
            overlay.rollback(base);
        }
        Admission::DoesNotFit {
            fit: facts.with_nodes + facts.confirmed_seats + best as u32,
            quorum: facts.quorum,
            missing: missing as u32,
        }
    }

    fn admission_message(key: &GangKey, a: &Admission) -> String {
        match a {
            Admission::DoesNotFit {
                fit,
                quorum,
                missing: 0,
            } => format!("gang {key}: {fit} of {quorum} members fit"),
            Admission::DoesNotFit {
                fit,
                quorum,
                missing,
            } => format!(
                "gang {key}: waiting for members: {} of {quorum} exist, and room for {fit} \
                 if the rest ask as much as the largest",
                quorum - missing
            ),
            Admission::Fits { .. } => format!("gang {key}: fits"),
        }
    }

    // ---------------------------------------------------------------- filter

    /// Verdict for each candidate node (same order as `candidates`).
    pub fn filter(&mut self, pod: &PodInfo, candidates: &[&str], now: Instant) -> Vec<NodeVerdict> {
        self.observe_pod(pod);
        if let Err(e) = &pod.membership {
            let reason: Arc<str> = Arc::from(format!("pod {}: {e}", pod.display_name()));
            return vec![NodeVerdict::Unresolvable(reason); candidates.len()];
        }
        let indices: Vec<Option<usize>> = candidates
            .iter()
            .map(|n| self.node_index.get(*n).copied())
            .collect();
        let unknown = |n: &str| -> NodeVerdict {
            NodeVerdict::Unresolvable(Arc::from(format!(
                "node {n} is not in muster's cache (yet)"
            )))
        };
        let Some(key) = pod.gang().map(|m| m.gang.clone()) else {
            return self.filter_by_room(pod, candidates, &indices, None);
        };
        let facts = self.facts(&key);
        if self.is_placed(&key, &facts) {
            return self.filter_by_room(pod, candidates, &indices, None);
        }
        let Some(gang) = self.gangs.get_mut(&key) else {
            // The cached pod names another gang than this request (labels changed in
            // between); the watch will catch up, meanwhile only room is checked.
            return self.filter_by_room(pod, candidates, &indices, None);
        };
        gang.last_attempt = Some(now);
        if let Some(until) = gang.backoff_until.filter(|t| *t > now) {
            let reason: Arc<str> = Arc::from(format!(
                "gang {key}: backing off for {}s after its quorum timeout",
                until.saturating_duration_since(now).as_secs().max(1)
            ));
            return vec![NodeVerdict::Unschedulable(reason); candidates.len()];
        }
        if gang.admitted_at.is_some() {
            return self.filter_by_room(pod, candidates, &indices, Some(&key));
        }
        let known: Vec<usize> = indices.iter().flatten().copied().collect();
        let admission = self.admission(&key, pod, &known, now);
        match admission {
            Admission::Fits { first_nodes, .. } => {
                // One node, muster's choice: kube-scheduler then skips scoring (and the
                // prioritize call) for this pod, and the member lands where the plan expects.
                // Every other node is simply not offered: with one node passing, kube-scheduler
                // never reads failure reasons, so none are made.
                let chosen = self.tightest(pod, first_nodes.iter().copied());
                indices
                    .iter()
                    .map(|idx| match idx {
                        Some(i) if Some(*i) == chosen => NodeVerdict::Fits,
                        _ => NodeVerdict::NotOffered,
                    })
                    .collect()
            }
            other => {
                let message = Self::admission_message(&key, &other);
                self.tell_waiting(&key, &message, &other, pod);
                let reason: Arc<str> = Arc::from(message);
                candidates
                    .iter()
                    .zip(&indices)
                    .map(|(name, idx)| match idx {
                        None => unknown(name),
                        Some(_) => NodeVerdict::Unschedulable(reason.clone()),
                    })
                    .collect()
            }
        }
    }

    /// Plain room check: the pod fits in what is left after bound pods and every seat. A gang
    /// member may also use its own seat, or a planned seat of its gang on that node; of the
    /// nodes it may use, it is offered exactly one (its seat, else a planned seat of its gang,
    /// else the tightest fit), so it lands where its gang's plan expects and kube-scheduler
    /// skips scoring for it.
    fn filter_by_room(
        &self,
        pod: &PodInfo,
        candidates: &[&str],
        indices: &[Option<usize>],
        gang: Option<&GangKey>,
    ) -> Vec<NodeVerdict> {
        let seats = gang.and_then(|k| self.gangs.get(k)).map(|g| &g.seats);
        let own_seat = seats
            .and_then(|s| s.get(&pod.uid))
            .and_then(|s| self.node_index.get(&s.node).copied());
        // Planned seats of the gang a member may take over, by node index (few per gang, so
        // candidates are matched with one lookup each).
        let mut donors: HashMap<usize, Vec<&Resources>> = HashMap::default();
        for (uid, s) in seats.into_iter().flatten() {
            if *uid != pod.uid && !s.confirmed {
                if let Some(&i) = self.node_index.get(&s.node) {
                    donors.entry(i).or_default().push(&s.requests);
                }
            }
        }
        // First pass, no strings: which nodes the pod may use, and (gang members only) the
        // best of them as (preference, packing score, position).
        let mut best: Option<(u8, f64, usize)> = None;
        let mut any_fits = false;
        let mut verdicts: Vec<NodeVerdict> = indices
            .iter()
            .enumerate()
            .map(|(pos, idx)| {
                let Some(i) = *idx else {
                    return NodeVerdict::NotOffered;
                };
                let entry = &self.nodes[i];
                let preference = if own_seat == Some(i) {
                    2
                } else if donors.get(&i).is_some_and(|d| {
                    d.iter().any(|r| {
                        self.node_shortfall(entry, &pod.requests, Some(r), None)
                            .is_none()
                    })
                }) {
                    1
                } else if self
                    .node_shortfall(entry, &pod.requests, None, None)
                    .is_none()
                {
                    0
                } else {
                    return NodeVerdict::NotOffered;
                };
                any_fits = true;
                if gang.is_some() {
                    let packing = packing_score(entry, &pod.requests);
                    if best.is_none_or(|(p, s, _)| (preference, packing) > (p, s)) {
                        best = Some((preference, packing, pos));
                    }
                }
                NodeVerdict::Fits
            })
            .collect();
        if let Some((_, _, keep)) = best {
            for (pos, v) in verdicts.iter_mut().enumerate() {
                if pos != keep {
                    *v = NodeVerdict::NotOffered;
                }
            }
        }
        if any_fits {
            // kube-scheduler reads failure reasons only when no node passes.
            return verdicts;
        }
        // Second pass, nothing fits: say why for each node.
        candidates
            .iter()
            .zip(indices)
            .map(|(name, idx)| {
                let Some(i) = *idx else {
                    return NodeVerdict::Unresolvable(Arc::from(format!(
                        "node {name} is not in muster's cache (yet)"
                    )));
                };
                let entry = &self.nodes[i];
                let short = self
                    .node_shortfall(entry, &pod.requests, None, None)
                    .expect("the first pass found no room here");
                let reserved = if entry.reserved.is_zero() {
                    ""
                } else {
                    " (some of it is reserved for gangs)"
                };
                NodeVerdict::Unschedulable(Arc::from(format!("{short}{reserved}")))
            })
            .collect()
    }

    /// The node of `options` where `pod` packs tightest (lowest position on ties).
    fn tightest(&self, pod: &PodInfo, options: impl Iterator<Item = usize>) -> Option<usize> {
        let mut best: Option<(f64, usize)> = None;
        for i in options {
            let score = packing_score(&self.nodes[i], &pod.requests);
            if best.is_none_or(|(s, b)| score > s || (score == s && i < b)) {
                best = Some((score, i));
            }
        }
        best.map(|(_, i)| i)
    }

    fn tell_waiting(
        &mut self,
        key: &GangKey,
        message: &str,
        admission: &Admission,
        asking: &PodInfo,
    ) {
        let Some(gang) = self.gangs.get_mut(key) else {
            return;
        };
        if gang.last_wait_message.as_deref() == Some(message) {
            return;
        }
        gang.last_wait_message = Some(message.to_string());
        let still_arriving =
            matches!(admission, Admission::DoesNotFit { missing, .. } if *missing > 0);
        let members: Vec<PodRef> = if still_arriving {
            vec![pod_ref(asking)]
        } else {
            gang.members
                .iter()
                .filter_map(|u| self.pods.get(u))
                .filter(|p| p.node().is_none() && !p.info.terminal)
                .map(|p| pod_ref(&p.info))
                .collect()
        };
        for pod in members {
            self.notices.push(Notice {
                pod,
                kind: NoticeKind::Waiting,
                message: message.to_string(),
            });
        }
    }

    // ---------------------------------------------------------------- prioritize

    /// Scores 0..=10 for each candidate (same order). A member's seated node scores 10; then
    /// nodes and zones already holding its gang, then tight packing.
    pub fn prioritize(&self, pod: &PodInfo, candidates: &[&str]) -> Vec<i64> {
        let gang = pod.gang().and_then(|m| self.gangs.get(&m.gang));
        let own_seat = gang
            .and_then(|g| g.seats.get(&pod.uid))
            .map(|s| s.node.clone());
        let mut gang_nodes: Vec<&str> = Vec::new();
        let mut gang_zones: Vec<&str> = Vec::new();
        if let Some(g) = gang {
            let member_nodes = g
                .members
                .iter()
                .filter_map(|u| self.pods.get(u))
                .filter_map(|p| p.charged_node())
                .chain(g.seats.values().map(|s| &s.node));
            for n in member_nodes {
                if !gang_nodes.contains(&&**n) {
                    gang_nodes.push(n);
                    if let Some(z) = self.node(n).and_then(|e| e.zone.as_deref()) {
                        if !gang_zones.contains(&z) {
                            gang_zones.push(z);
                        }
                    }
                }
            }
        }
        candidates
            .iter()
            .map(|name| {
                let Some(e) = self.node(name) else {
                    return 0;
                };
                if own_seat.as_deref() == Some(*name) {
                    return 10;
                }
                let packing = packing_score(e, &pod.requests);
                if gang.is_none() {
                    return (packing * 10.0).round() as i64;
                }
                let mut score = packing * 5.0;
                if gang_nodes.contains(name) {
                    score += 3.0;
                }
                if e.zone.as_deref().is_some_and(|z| gang_zones.contains(&z)) {
                    score += 2.0;
                }
                (score.round() as i64).clamp(0, 10)
            })
            .collect()
    }

    // ---------------------------------------------------------------- bind

    pub fn bind(&mut self, req: BindRequest<'_>, now: Instant) -> BindDecision {
        use BindDecision::Reject;
        let Some(entry) = self.pods.get(req.uid) else {
            return Reject(BindRejection::UnknownPod {
                namespace: req.namespace.into(),
                name: req.name.into(),
                uid: req.uid.into(),
            });
        };
        let info = entry.info.clone();
        if *info.namespace != *req.namespace || *info.name != *req.name {
            return Reject(BindRejection::PodMismatch {
                namespace: req.namespace.into(),
                name: req.name.into(),
                uid: req.uid.into(),
                actual: info.display_name(),
            });
        }
        let Some(node) = self.node(req.node).map(|e| e.info.name.clone()) else {
            return Reject(BindRejection::UnknownNode(req.node.into()));
        };
        if let Some(bound) = &info.node_name {
            if *bound == node {
                return BindDecision::AlreadyBound;
            }
            return Reject(BindRejection::BoundElsewhere {
                pod: info.display_name(),
                node: bound.to_string(),
            });
        }
        if let Some(assumed) = &entry.assumed {
            return Reject(BindRejection::BindInFlight {
                pod: info.display_name(),
                node: assumed.to_string(),
            });
        }
        if info.terminal {
            return Reject(BindRejection::Terminal(info.display_name()));
        }
        let key = match &info.membership {
            Err(e) => {
                return Reject(BindRejection::InvalidMembership {
                    pod: info.display_name(),
                    message: e.to_string(),
                })
            }
            Ok(m) => m.as_ref().map(|m| m.gang.clone()),
        };
        let facts = key.as_ref().map(|k| (k, self.facts(k)));
        match facts {
            Some((k, f)) if !self.is_placed(k, &f) => {
                let k = k.clone();
                self.bind_gang_member(&k, &info, node, now)
            }
            _ => self.bind_plain(&info, node),
        }
    }

    fn bind_plain(&mut self, info: &PodInfo, node: NodeName) -> BindDecision {
        let entry = self.node(&node).expect("bind checked the node");
        if let Some(shortfall) = self.node_shortfall(entry, &info.requests, None, None) {
            return BindDecision::Reject(BindRejection::NoRoom {
                pod: info.display_name(),
                node: node.to_string(),
                shortfall,
            });
        }
        self.assume(&info.uid, node.clone());
        BindDecision::BindNow {
            pod: pod_ref(info),
            node,
        }
    }

    fn assume(&mut self, uid: &PodUid, node: NodeName) {
        let requests = match self.pods.get_mut(uid) {
            Some(p) => {
                p.assumed = Some(node.clone());
                (!p.info.terminal).then(|| p.info.requests.clone())
            }
            None => None,
        };
        if let Some(r) = requests {
            self.charge(&node, &r);
        }
    }

    fn bind_gang_member(
        &mut self,
        key: &GangKey,
        info: &PodInfo,
        node: NodeName,
        now: Instant,
    ) -> BindDecision {
        let gang = self.gangs.get(key).expect("member's gang exists");
        if let Some(until) = gang.backoff_until.filter(|t| *t > now) {
            return BindDecision::Reject(BindRejection::GangCannotBePlaced(format!(
                "gang {key}: backing off for {}s after its quorum timeout",
                until.saturating_duration_since(now).as_secs().max(1)
            )));
        }
        if gang.admitted_at.is_some() {
            if let Err(r) = self.take_seat(key, info, &node) {
                return BindDecision::Reject(r);
            }
        } else {
            let index = self.node_index[&node];
            match self.admission(key, info, &[index], now) {
                Admission::Fits {
                    plan, not_created, ..
                } => {
                    self.add_seat(
                        key,
                        info.uid.clone(),
                        Seat {
                            node: node.clone(),
                            requests: info.requests.clone(),
                            confirmed: true,
                        },
                    );
                    for (uid, i) in plan {
                        let requests = self
                            .pods
                            .get(&uid)
                            .map_or_else(|| not_created.clone(), |p| p.info.requests.clone());
                        let node = self.nodes[i].info.name.clone();
                        self.add_seat(
                            key,
                            uid,
                            Seat {
                                node,
                                requests,
                                confirmed: false,
                            },
                        );
                    }
                    if let Some(g) = self.gangs.get_mut(key) {
                        g.admitted_at = Some(now);
                    }
                }
                refused => {
                    let message = Self::admission_message(key, &refused);
                    self.tell_waiting(key, &message, &refused, info);
                    return BindDecision::Reject(BindRejection::GangCannotBePlaced(message));
                }
            }
        }

        let facts = self.facts(key);
        let have = facts.with_nodes + facts.confirmed_seats;
        if have < facts.quorum {
            let mut message = format!(
                "gang {key} waiting for quorum: {have}/{} members have nodes",
                facts.quorum
            );
            if facts.existing < facts.quorum {
                message.push_str(&format!(
                    "; {} of {} members exist, the rest are not created yet",
                    facts.existing, facts.quorum
                ));
            }
            // No Event here: the bind handler holds the call and tells the member only if the
            // wait outlasts the hold (most gangs complete within it). Telling every member on
            // every seat was n^2 Events per gang.
            if let Some(g) = self.gangs.get_mut(key) {
                g.last_wait_message = Some(message.clone());
            }
            return BindDecision::Wait {
                gang: key.clone(),
                message,
            };
        }

        // Quorum: every confirmed seat becomes a binding; planned seats are let go.
        let seats: Vec<(PodUid, Seat)> = self
            .gangs
            .get_mut(key)
            .map(|g| g.seats.drain().collect())
            .unwrap_or_default();
        let mut members = Vec::new();
        for (uid, seat) in seats {
            if let Some(n) = self.node_mut(&seat.node) {
                n.reserved.sub(&seat.requests);
            }
            if seat.confirmed {
                self.assume(&uid, seat.node.clone());
                if let Some(p) = self.pods.get(&uid) {
                    members.push((pod_ref(&p.info), seat.node));
                }
            }
        }
        members.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        if let Some(g) = self.gangs.get_mut(key) {
            g.placed = true;
            g.admitted_at = None;
            g.last_wait_message = None;
        }
        self.stats.gangs_placed += 1;
        // One Event per gang, on its first member by name, naming every member's node:
        // kube-scheduler already puts a Scheduled Event with the node on each member, and an
        // Event per member was a quarter of all API writes in the end-to-end benchmark.
        if let Some((first, _)) = members.first() {
            let placements: Vec<String> = members
                .iter()
                .map(|(p, n)| format!("{} on {n}", p.name))
                .collect();
            self.notices.push(Notice {
                pod: first.clone(),
                kind: NoticeKind::Placed,
                message: format!(
                    "gang {key} placed: {} members bound together ({} already had nodes): {}",
                    members.len(),
                    facts.with_nodes,
                    placements.join(", ")
                ),
            });
        }
        BindDecision::BindGang {
            gang: key.clone(),
            members,
        }
    }

    /// Seats `info` on `node` for an admitted gang: its own seat if it is there, otherwise free
    /// room, otherwise a planned seat of its gang on that node (members are interchangeable).
    fn take_seat(
        &mut self,
        key: &GangKey,
        info: &PodInfo,
        node: &NodeName,
    ) -> Result<(), BindRejection> {
        let gang = &self.gangs[key];
        if let Some(seat) = gang.seats.get(&info.uid) {
            if seat.node == *node {
                let seat = Seat {
                    confirmed: true,
                    ..seat.clone()
                };
                self.gangs
                    .get_mut(key)
                    .expect("exists")
                    .seats
                    .insert(info.uid.clone(), seat);
                return Ok(());
            }
        }
        let previous = gang.seats.get(&info.uid).cloned();
        self.release_seat_keep_admitted(key, &info.uid);
        let entry = self.node(node).expect("bind checked the node");
        let shortfall = self.node_shortfall(entry, &info.requests, None, None);
        let new_seat = Seat {
            node: node.clone(),
            requests: info.requests.clone(),
            confirmed: true,
        };
        // A member without a seat is one the gang's admission did not know: a seat held for a
        // member not created yet is its own, here if there is one, else released elsewhere so
        // the gang never holds more than its quorum.
        let held_for_late: Vec<(PodUid, bool)> = if previous.is_none() {
            self.gangs[key]
                .seats
                .iter()
                .filter(|(uid, _)| is_not_created_uid(uid))
                .map(|(uid, s)| {
                    let usable_here = s.node == *node
                        && self
                            .node_shortfall(entry, &info.requests, Some(&s.requests), None)
                            .is_none();
                    (uid.clone(), usable_here)
                })
                .collect()
        } else {
            Vec::new()
        };
        if let Some((held, _)) = held_for_late.iter().find(|(_, here)| *here) {
            self.release_seat_keep_admitted(key, held);
            self.add_seat(key, info.uid.clone(), new_seat);
            return Ok(());
        }
        let Some(shortfall) = shortfall else {
            if let Some((held, _)) = held_for_late.first() {
                self.release_seat_keep_admitted(key, held);
            }
            self.add_seat(key, info.uid.clone(), new_seat);
            return Ok(());
        };
        let donor = self.gangs[key]
            .seats
            .iter()
            .find(|(uid, s)| {
                **uid != info.uid
                    && !s.confirmed
                    && s.node == *node
                    && self
                        .node_shortfall(entry, &info.requests, Some(&s.requests), None)
                        .is_none()
            })
            .map(|(uid, _)| uid.clone());
        if let Some(donor) = donor {
            self.release_seat_keep_admitted(key, &donor);
            self.add_seat(key, info.uid.clone(), new_seat);
            return Ok(());
        }
        if let Some(prev) = previous {
            self.add_seat(key, info.uid.clone(), prev);
        }
        Err(BindRejection::NoRoom {
            pod: info.display_name(),
            node: node.to_string(),
            shortfall,
        })
    }

    fn release_seat_keep_admitted(&mut self, key: &GangKey, uid: &str) {
        let admitted = self.gangs.get(key).and_then(|g| g.admitted_at);
        self.release_seat(key, uid);
        if let Some(g) = self.gangs.get_mut(key) {
            g.admitted_at = admitted;
        }
    }

    /// Reports the result of a binding call muster made. On failure the pod is no longer
    /// assumed: it goes back to kube-scheduler, and its gang stays placed.
    pub fn bind_finished(&mut self, pod: &PodRef, node: &NodeName, result: Result<(), String>) {
        let Err(error) = result else { return };
        let requests = match self.pods.get_mut(&pod.uid) {
            Some(p) if p.assumed.as_ref() == Some(node) => {
                p.assumed = None;
                (!p.info.terminal).then(|| p.info.requests.clone())
            }
            _ => None,
        };
        if let Some(r) = requests {
            self.uncharge(node, &r);
        }
        self.notices.push(Notice {
            pod: pod.clone(),
            kind: NoticeKind::BindFailed,
            message: format!("muster could not bind the pod to node {node}: {error}"),
        });
        if let Some(key) = self
            .pods
            .get(&pod.uid)
            .and_then(|p| p.info.gang())
            .map(|m| m.gang.clone())
        {
            self.refresh_placed(&key);
        }
    }

    // ---------------------------------------------------------------- time

    /// Releases the seats of every admitted gang that has waited past its timeout.
    /// Returns the gangs that timed out.
    pub fn expire(&mut self, now: Instant) -> Vec<GangKey> {
        let expired: Vec<GangKey> = self
            .gangs
            .iter()
            .filter(|(_, g)| !g.placed)
            .filter_map(|(k, g)| g.admitted_at.map(|t| (k, t)))
            .filter(|(k, t)| {
                let facts = self.facts(k);
                now.saturating_duration_since(*t) >= self.timeout_of(&facts)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in &expired {
            let facts = self.facts(key);
            let timeout = self.timeout_of(&facts);
            let seated: Vec<PodUid> = self.gangs[key].seats.keys().cloned().collect();
            for uid in seated {
                self.release_seat(key, &uid);
            }
            let backoff = self.config.backoff;
            let gang = self.gangs.get_mut(key).expect("exists");
            gang.admitted_at = None;
            gang.backoff_until = Some(now + backoff);
            gang.last_wait_message = None;
            self.stats.gang_timeouts += 1;
            let missing = if facts.existing < facts.quorum {
                format!(" ({} of {} members exist)", facts.existing, facts.quorum)
            } else {
                String::new()
            };
            let message = format!(
                "gang {key} did not reach quorum within {}: {}/{} members had nodes{missing}; seats released, retrying in {}",
                humantime::format_duration(timeout),
                facts.with_nodes + facts.confirmed_seats,
                facts.quorum,
                humantime::format_duration(backoff),
            );
            let members: Vec<PodRef> = self.gangs[key]
                .members
                .iter()
                .filter_map(|u| self.pods.get(u))
                .filter(|p| p.node().is_none())
                .map(|p| pod_ref(&p.info))
                .collect();
            for pod in members {
                self.notices.push(Notice {
                    pod,
                    kind: NoticeKind::TimedOut,
                    message: message.clone(),
                });
            }
        }
        expired
    }

    // ---------------------------------------------------------------- views

    /// Counts for gauges: (waiting, admitted, placed, backing off) gangs and seats held.
    pub fn gauges(&self, now: Instant) -> GangGauges {
        let mut g = GangGauges::default();
        for (key, gang) in &self.gangs {
            g.seats += gang.seats.len() as u64;
            match gang_state(self, key, gang, now) {
                "placed" => g.placed += 1,
                "admitted" => g.admitted += 1,
                "backoff" => g.backing_off += 1,
                _ => g.waiting += 1,
            }
        }
        g
    }

    pub fn views(&self, now: Instant) -> Vec<GangView> {
        let mut out: Vec<GangView> = self
            .gangs
            .iter()
            .map(|(key, gang)| {
                let facts = self.facts(key);
                let members = gang
                    .members
                    .iter()
                    .filter_map(|u| self.pods.get(u))
                    .map(|p| {
                        let seat = gang.seats.get(&p.info.uid);
                        let (state, node) = if let Some(n) = &p.info.node_name {
                            ("bound", Some(n.to_string()))
                        } else if let Some(n) = &p.assumed {
                            ("binding", Some(n.to_string()))
                        } else if let Some(s) = seat {
                            (
                                if s.confirmed { "seated" } else { "planned" },
                                Some(s.node.to_string()),
                            )
                        } else {
                            ("pending", None)
                        };
                        MemberView {
                            name: p.info.name.to_string(),
                            state,
                            node,
                        }
                    })
                    .chain(
                        gang.seats
                            .iter()
                            .filter(|(uid, _)| is_not_created_uid(uid))
                            .map(|(_, s)| MemberView {
                                name: "(not created yet)".to_string(),
                                state: "held",
                                node: Some(s.node.to_string()),
                            }),
                    )
                    .collect();
                let state = gang_state(self, key, gang, now);
                GangView {
                    namespace: key.namespace.to_string(),
                    name: key.name.to_string(),
                    state,
                    quorum: facts.quorum,
                    members_with_nodes: facts.with_nodes,
                    members,
                    waiting_reason: (state != "placed")
                        .then(|| gang.last_wait_message.clone())
                        .flatten(),
                    seconds_until_timeout: gang.admitted_at.map(|t| {
                        self.timeout_of(&facts)
                            .saturating_sub(now.saturating_duration_since(t))
                            .as_secs()
                    }),
                    seconds_of_backoff_left: gang
                        .backoff_until
                        .filter(|t| *t > now)
                        .map(|t| t.saturating_duration_since(now).as_secs()),
                }
            })
            .collect();
        out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        out
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GangGauges {
    pub waiting: u64,
    pub admitted: u64,
    pub placed: u64,
    pub backing_off: u64,
    pub seats: u64,
}

fn gang_state(table: &GangTable, key: &GangKey, gang: &Gang, now: Instant) -> &'static str {
    let facts = table.facts(key);
    if table.is_placed(key, &facts) {
        "placed"
    } else if gang.admitted_at.is_some() {
        "admitted"
    } else if gang.backoff_until.is_some_and(|t| t > now) {
        "backoff"
    } else {
        "waiting"
    }
}

fn pod_ref(info: &PodInfo) -> PodRef {
    PodRef {
        namespace: info.namespace.clone(),
        name: info.name.clone(),
        uid: info.uid.clone(),
    }
}

/// Used share of a node after placing `request`, averaged over cpu, memory and any extended
/// resource the pod asks for: 0.0 (empty) to 1.0 (full). Higher packs tighter.
fn packing_score(e: &NodeEntry, request: &Resources) -> f64 {
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

/// Smallest requests first, then by name: the members easiest to fit are the ones a
/// simulation commits to, which gives the gang its best chance.
fn sort_smallest_first(members: &mut [&PodEntry]) {
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

/// Key of the planned seat held for the `n`th member of a gang not created yet; never a real
/// UID (those are UUIDs). A member that arrives later takes such a seat over like any planned
/// seat of its gang.
fn not_created_uid(n: usize) -> PodUid {
    PodUid::from(format!("(member not created yet #{n})"))
}

fn is_not_created_uid(uid: &str) -> bool {
    uid.starts_with("(member not created yet #")
}

/// The larger of two pods in the order of [`largest_first`].
fn larger<'a>(a: &'a PodInfo, b: &'a PodInfo) -> &'a PodInfo {
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
fn largest_first<'a>(members: &[&'a PodEntry]) -> Vec<&'a PodEntry> {
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
mod tests;
