//! The filter verb: which of kube-scheduler's candidate nodes a pod may use.

use std::sync::Arc;
use std::time::Instant;

use rustc_hash::FxHashMap as HashMap;

use super::bind::BindRejection;
use super::preempt::PreemptionOutlook;
use crate::model::inputs::membership::GangKey;
use crate::model::inputs::objects::{NodeName, PodInfo};
use crate::model::inputs::resources::Resources;
use crate::model::inputs::terms::HostPort;
use crate::model::inputs::topology::Topology;
use crate::model::messages;
use crate::model::notice::{Notice, NoticeKind, PodRef};
use crate::model::planning::domains::domain_of;
use crate::model::planning::planner::{GangPlan, GangShortfall};
use crate::model::planning::selection::task_of;
use crate::model::rules::dynamic_resources::DynamicResources;
use crate::model::rules::node_ports;
use crate::model::table::evidence::EvidenceStore;
use crate::model::table::gang::{Gang, Seat, SeatHolder};
use crate::model::table::GangTable;
use crate::model::verbs::prioritize::Nearness;

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

/// The verdict on a node kube-scheduler offered that muster's node watch has not delivered
/// yet. Whichever of the two maps names it, kube-scheduler parks the pod until a cluster event
/// (`findNodesThatFitPod` puts the pseudo-plugin `Extender` among its rejectors, which every
/// event re-queues), and the node reaching muster's cache is none: so the filter remembers the
/// pod for a `Retry` notice (`refused_for_unknown_node`). The maps differ only for preemption,
/// which dry-runs the nodes in `FailedNodes`; this one passed every in-tree filter already, so
/// a dry run there finds no victim (or fails: "expected at least one victim pod"). Hence
/// unresolvable.
fn unknown_node_verdict(name: &str) -> NodeVerdict {
    NodeVerdict::Unresolvable(Arc::from(messages::unknown_node(name)))
}

impl GangTable {
    /// Verdict for each candidate node (same order as `candidates`), for `pod` as the watch
    /// reported it (see [`GangTable::seen_pod`]). A pod muster has not seen, or one being
    /// deleted, fits nowhere and changes nothing.
    pub fn filter(&mut self, pod: &PodInfo, candidates: &[&str], now: Instant) -> Vec<NodeVerdict> {
        let verdicts = self.filter_each(pod, candidates, now);
        if self.seen_pod(&pod.namespace, &pod.name, &pod.uid).is_ok() {
            // The pod's cycle reached muster: kube-scheduler's filters passed some node, so a
            // verdict of its own from an earlier cycle no longer stands; and when no node is
            // offered, muster's texts are what kube-scheduler's next verdict on it will hold.
            self.verdicts.pod_changed(&pod.uid);
            if !verdicts.contains(&NodeVerdict::Fits) {
                let mut texts: Vec<Arc<str>> = Vec::new();
                for v in &verdicts {
                    if let NodeVerdict::Unschedulable(t) | NodeVerdict::Unresolvable(t) = v {
                        if !texts.contains(t) {
                            texts.push(t.clone());
                        }
                    }
                }
                self.verdicts.refused(&pod.uid, texts, now);
            }
        }
        verdicts
    }

    fn filter_each(
        &mut self,
        pod: &PodInfo,
        candidates: &[&str],
        now: Instant,
    ) -> Vec<NodeVerdict> {
        let refusal = match self.seen_pod(&pod.namespace, &pod.name, &pod.uid) {
            Err(r) => Some(r.to_string()),
            Ok(seen) if seen.terminating => {
                Some(BindRejection::Terminating(seen.display_name()).to_string())
            }
            Ok(_) => None,
        };
        if let Some(reason) = refusal {
            return vec![NodeVerdict::Unresolvable(Arc::from(reason)); candidates.len()];
        }
        if let Err(e) = &pod.membership {
            let reason: Arc<str> = Arc::from(messages::invalid_membership(pod, e));
            return vec![NodeVerdict::Unresolvable(reason); candidates.len()];
        }
        let positions: Vec<Option<usize>> =
            candidates.iter().map(|n| self.ledger.position(n)).collect();
        let Some(key) = pod.gang().map(|m| m.gang.clone()) else {
            return self.filter_by_room(pod, candidates, &positions, None);
        };
        let facts = self.facts(&key);
        if self.is_placed(&key, &facts) {
            // A placed gang's later members go where room is; one confined to a domain, only there.
            let held = facts.spec.topology.required().is_some().then_some(&key);
            return self.filter_by_room(pod, candidates, &positions, held);
        }
        let Some(gang) = self.gangs.get_mut(&key) else {
            // The cached pod names another gang than this request (labels changed in
            // between); the watch will catch up, meanwhile only room is checked.
            return self.filter_by_room(pod, candidates, &positions, None);
        };
        gang.note_attempt(now);
        gang.note_filtered(&pod.uid);
        gang.note_arrivals(now);
        if let Some(left) = gang.backoff_left(now) {
            let reason: Arc<str> = Arc::from(messages::backing_off(&key, left));
            return vec![NodeVerdict::Unschedulable(reason); candidates.len()];
        }
        let known: Vec<usize> = positions.iter().flatten().copied().collect();
        // An admitted gang of the every-pod mode with a topology may still move whole to a
        // domain that holds its real members (see `verbs::move_domain`).
        if gang.is_admitted() && !self.move_gang_domain(&key, pod, &known, now) {
            let verdicts = self.filter_by_room(pod, candidates, &positions, Some(&key));
            self.seat_where_offered(&key, pod, candidates, &verdicts);
            return verdicts;
        }
        if EvidenceStore::is_informative(candidates.len(), known.len(), self.ledger.len()) {
            // Every name passed, nodes not in muster's cache yet included: one that arrives
            // later is not mistaken for a node this member's own filters excluded.
            let passed = candidates
                .iter()
                .map(|&n| NodeName::from(n))
                .collect::<rustc_hash::FxHashSet<NodeName>>();
            self.evidence.record(&pod.uid, passed, now);
        } else {
            // Every node passed, or the list may be cut short: nothing is known to be
            // excluded, and older evidence is superseded.
            self.evidence.forget(&pod.uid);
        }
        let plan = self.plan(&key, pod, &known, now);
        self.note_verdict(&key, &plan);
        match &plan {
            GangPlan::Fits { first_node, .. } => {
                // One node, muster's choice: kube-scheduler then skips scoring (and the
                // prioritize call) for this pod, and the member lands where the plan expects.
                // Every other node is simply not offered: with one node passing,
                // kube-scheduler never reads failure reasons, so none are made.
                positions
                    .iter()
                    .map(|p| match p {
                        Some(i) if i == first_node => NodeVerdict::Fits,
                        _ => NodeVerdict::NotOffered,
                    })
                    .collect()
            }
            GangPlan::DoesNotFit(why) => {
                let for_room = matches!(why, GangShortfall::Room { rule: None, .. });
                if for_room && self.ledger.iter().any(|(_, e)| !e.reserved().is_zero()) {
                    self.refused_for_seats(&pod.uid);
                }
                if known.len() < candidates.len() {
                    // The plan could not use the nodes muster does not know yet.
                    self.refused_for_unknown_node(&pod.uid);
                }
                let window = self.config.creation_window;
                if let Some(gang) = self.gangs.get_mut(&key) {
                    if gang.within_creation_window(now, window) {
                        gang.refused_in_window(&pod.uid);
                    }
                }
                let message = why.message(&key, self.config.creation_window);
                // Preemption cannot help a gang that would not fit even with every
                // lower-priority pod gone: say so, and kube-scheduler evicts nothing for it.
                // A gang waiting for its PodGroup cannot run whatever is evicted, nor one whose
                // quorum is beyond what the cluster could ever hold.
                let evicting_cannot_help = matches!(
                    why,
                    GangShortfall::PodGroupMissing { .. }
                        | GangShortfall::BeyondCluster(_)
                        | GangShortfall::RefusedByScheduler(_)
                        | GangShortfall::Topology(_)
                );
                let outlook = if evicting_cannot_help {
                    None
                } else {
                    self.preemption_outlook(pod, &known, now)
                };
                let hopeless = evicting_cannot_help
                    || matches!(outlook, Some(PreemptionOutlook::Hopeless { .. }));
                let message = match outlook {
                    Some(PreemptionOutlook::Hopeless {
                        anything_evictable: true,
                        best_domain: Some(d),
                    }) => messages::domain_beyond_preemption(
                        &key, &d.label, d.quorum, d.fit, &d.value,
                    ),
                    Some(PreemptionOutlook::Hopeless {
                        anything_evictable: true,
                        best_domain: None,
                    }) => messages::beyond_preemption(&message),
                    _ => message,
                };
                self.tell_waiting(&key, &message, &plan, pod, now);
                let reason: Arc<str> = Arc::from(message);
                candidates
                    .iter()
                    .zip(&positions)
                    .map(|(name, p)| match p {
                        None => unknown_node_verdict(name),
                        Some(_) if hopeless => NodeVerdict::Unresolvable(reason.clone()),
                        Some(_) => NodeVerdict::Unschedulable(reason.clone()),
                    })
                    .collect()
            }
        }
    }

    /// A seated member of a gathered gang offered a node other than its seat where it has
    /// room after every seat (a member let through without a nomination, to whom
    /// kube-scheduler did not offer its seat's node): its seat moves there now. kube-scheduler
    /// assumes the member there from this answer on; a seat left behind until the bind would
    /// leave that room unreserved meanwhile, and the gatherer would plan another gang into it
    /// (no-overcommit: the bind then finds the room gone). A member offered a planned seat of
    /// a sibling takes that seat over at its bind, as before.
    fn seat_where_offered(
        &mut self,
        key: &GangKey,
        pod: &PodInfo,
        candidates: &[&str],
        verdicts: &[NodeVerdict],
    ) {
        let Some(offered) = candidates
            .iter()
            .zip(verdicts)
            .find_map(|(n, v)| (*v == NodeVerdict::Fits).then_some(*n))
        else {
            return;
        };
        let Some(gang) = self.gangs.get(key) else {
            return;
        };
        if !self.is_gathered(gang) {
            return;
        }
        let Some(seat) = gang
            .seat_of(&pod.uid)
            .filter(|s| !s.confirmed && *s.node != *offered)
        else {
            return;
        };
        let Some(position) = self.ledger.position(offered) else {
            return;
        };
        if self
            .ledger
            .shortfall(position, &seat.requests, None, None)
            .is_some()
        {
            return;
        }
        let moved = Seat {
            node: NodeName::from(offered),
            ..seat.clone()
        };
        self.seat(key, SeatHolder::Member(pod.uid.clone()), moved);
    }

    /// Plain room check: the pod fits in what is left after bound pods and every seat. A gang
    /// member may also use its own seat, or a planned seat of its gang on that node; of the
    /// nodes it may use, it is offered exactly one (its seat, else a planned seat of its gang,
    /// else the tightest fit), so it lands where its gang's plan expects and kube-scheduler
    /// skips scoring for it.
    fn filter_by_room(
        &mut self,
        pod: &PodInfo,
        candidates: &[&str],
        positions: &[Option<usize>],
        gang: Option<&GangKey>,
    ) -> Vec<NodeVerdict> {
        let (verdicts, for_seats) = self.verdicts_by_room(pod, candidates, positions, gang);
        if for_seats {
            self.refused_for_seats(&pod.uid);
        }
        let refused = !verdicts.contains(&NodeVerdict::Fits);
        if refused && positions.iter().any(Option::is_none) {
            self.refused_for_unknown_node(&pod.uid);
        }
        verdicts
    }

    /// The verdicts of [`GangTable::filter_by_room`], and whether the pod was refused only
    /// because seats hold the room: it would fit on some node if that node's seats were gone.
    fn verdicts_by_room(
        &self,
        pod: &PodInfo,
        candidates: &[&str],
        positions: &[Option<usize>],
        gang: Option<&GangKey>,
    ) -> (Vec<NodeVerdict>, bool) {
        // A gang confined to one domain of a node label (topology required) has members only
        // there once it uses one (members on nodes, or seats, planned ones included): later
        // members and replacements wait for room in it.
        let domain = gang.and_then(|k| self.confined_domain(k));
        let in_domain = |i: usize| {
            domain.as_ref().is_none_or(|(label, value)| {
                domain_of(self.ledger.at(i).info(), label) == Some(&**value)
            })
        };
        let gang_key = gang;
        let gang = gang.and_then(|k| self.gangs.get(k));
        // A gang with preferred topology levels: of the nodes with room, the nearest to where
        // its members are or are seated (its rack, then its block), so a member that cannot
        // take a planned seat still joins its gang's domain when it has room.
        let gang_nodes: Vec<&str> = gang
            .filter(|g| {
                matches!(
                    g.spec().topology.constraint().map(|c| &c.topology),
                    Some(Topology::Preferred(_))
                )
            })
            .map(|g| {
                self.members_of(g)
                    .filter(|p| p.is_live())
                    .filter_map(|p| p.charged_node())
                    .chain(g.seats().values().map(|s| &s.node))
                    .map(|n| &**n)
                    .collect()
            })
            .unwrap_or_default();
        let nearness =
            gang.and_then(
                |g| match g.spec().topology.constraint().map(|c| &c.topology) {
                    Some(Topology::Preferred(levels)) => Nearness::of(self, levels, &gang_nodes),
                    _ => None,
                },
            );
        let own_seat = gang
            .and_then(|g| g.seat_of(&pod.uid))
            .and_then(|s| self.ledger.position(&s.node));
        // Room its gang's preemption planned for it where pods being deleted still use it
        // (`Gang::awaiting_room`), counted as free: kube-scheduler offers that node only once
        // its own cache shows them gone, and muster's watch may deliver their deletions a
        // moment later. Refused then, a preemptor finds no victim there and kube-scheduler
        // clears its nomination (`preemption.go:135-147`, v1.37.2), which was all that kept
        // the room from plain pods. The bind takes it on top of the leaving pods and the
        // quorum waits for them to go (`take_seat`, `room_on_its_way`: no-overcommit).
        let planned_here = gang
            .and_then(|g| {
                g.awaiting_room()
                    .iter()
                    .find(|s| s.holder.member() == Some(&pod.uid))
            })
            .filter(|s| self.fits_once_leaving_pods_go(&s.node, &pod.requests))
            .and_then(|s| self.ledger.position(&s.node));
        // Planned seats of the gang a member may take over, by node position (few per gang,
        // so candidates are matched with one lookup each).
        let mut donors: HashMap<usize, Vec<&Resources>> = HashMap::default();
        for (holder, s) in gang.into_iter().flat_map(|g| g.seats()) {
            if holder.member() != Some(&pod.uid) && !s.confirmed {
                if let Some(i) = self.ledger.position(&s.node) {
                    donors.entry(i).or_default().push(&s.requests);
                }
            }
        }
        // Nodes where a seat holds a host port the pod asks for: a seat holds its member's ports
        // as it holds its room (NodePorts; no two pods on a node share a host port).
        let ports_held = self.ports_held_by_seats(pod, None);
        // Nodes where seats of other gangs hold the devices its claims need (DynamicResources).
        // A member of an admitted gang may take over its gang's planned seats: those hold
        // nothing against it.
        let devices_held = self.devices_held_by_seats(
            pod,
            |k, h| {
                gang_key == Some(k) && self.gangs[k].seats().get(h).is_some_and(|s| !s.confirmed)
            },
            None,
        );
        // First pass, no strings: which nodes the pod may use, and (gang members only) the
        // best of them as (preference, packing score, position).
        let mut best: Option<(u8, i64, f64, usize)> = None;
        let mut any_fits = false;
        let mut verdicts: Vec<NodeVerdict> = positions
            .iter()
            .enumerate()
            .map(|(pos, p)| {
                let Some(i) = *p else {
                    return NodeVerdict::NotOffered;
                };
                if !in_domain(i) || ports_held.contains_key(&i) || devices_held.contains_key(&i) {
                    return NodeVerdict::NotOffered;
                }
                let preference = if own_seat == Some(i) || planned_here == Some(i) {
                    2
                } else if donors.get(&i).is_some_and(|d| {
                    d.iter().any(|r| {
                        self.ledger
                            .shortfall(i, &pod.requests, Some(r), None)
                            .is_none()
                    })
                }) {
                    1
                } else if self
                    .ledger
                    .shortfall(i, &pod.requests, None, None)
                    .is_none()
                {
                    0
                } else {
                    return NodeVerdict::NotOffered;
                };
                any_fits = true;
                if gang.is_some() {
                    let near = nearness
                        .as_ref()
                        .map_or(0, |n| n.score(self.ledger.at(i).info()));
                    let packing = self.ledger.packing_score(i, &pod.requests);
                    if best.is_none_or(|(p, n, s, _)| (preference, near, packing) > (p, n, s)) {
                        best = Some((preference, near, packing, pos));
                    }
                }
                NodeVerdict::Fits
            })
            .collect();
        if let Some((_, _, _, keep)) = best {
            for (pos, v) in verdicts.iter_mut().enumerate() {
                if pos != keep {
                    *v = NodeVerdict::NotOffered;
                }
            }
        }
        if any_fits {
            // kube-scheduler reads failure reasons only when no node passes.
            return (verdicts, false);
        }
        // Second pass, nothing fits: say why for each node.
        let mut for_seats = false;
        let verdicts = candidates
            .iter()
            .zip(positions)
            .map(|(name, p)| {
                let Some(i) = *p else {
                    return unknown_node_verdict(name);
                };
                if let Some((label, value)) = domain.as_ref().filter(|_| !in_domain(i)) {
                    return NodeVerdict::Unresolvable(Arc::from(messages::outside_domain(
                        label, value,
                    )));
                }
                if let Some(why) = ports_held.get(&i).or_else(|| devices_held.get(&i)) {
                    for_seats = true;
                    return NodeVerdict::Unschedulable(Arc::from(why.as_str()));
                }
                let short = self
                    .ledger
                    .shortfall(i, &pod.requests, None, None)
                    .expect("the first pass found no room here");
                let reserved = self.ledger.at(i).reserved();
                let seats_here = !reserved.is_zero();
                for_seats |= seats_here
                    && self
                        .ledger
                        .shortfall(i, &pod.requests, Some(reserved), None)
                        .is_none();
                NodeVerdict::Unschedulable(Arc::from(messages::no_room(&short, seats_here)))
            })
            .collect();
        (verdicts, for_seats)
    }

    /// For a pod with host ports: the nodes (by position) where the seat of another pod holds
    /// one of them, with the message saying so; only the node at `only`, when given (a bind
    /// asks about one node: no message is built for the others). A seat held for a member not
    /// created yet holds the host ports its gang's members (of its task) all ask for, as one
    /// pod template makes them; not against the pod's own gang, whose member it may be.
    pub(in crate::model) fn ports_held_by_seats(
        &self,
        pod: &PodInfo,
        only: Option<usize>,
    ) -> HashMap<usize, String> {
        let mut held = HashMap::default();
        let wanted = node_ports::host_ports(pod);
        if wanted.is_empty() {
            return held;
        }
        let own_gang = pod.gang().map(|m| &m.gang);
        for (key, g) in &self.gangs {
            for (holder, seat) in g.seats() {
                let Some(i) = self.ledger.position(&seat.node) else {
                    continue;
                };
                if only.is_some_and(|o| o != i) {
                    continue;
                }
                let (used, whose): (&[HostPort], &str) = match holder {
                    SeatHolder::Member(uid) if **uid != *pod.uid => match self.pods.get(uid) {
                        Some(member) => (node_ports::host_ports(&member.info), &member.info.name),
                        None => continue,
                    },
                    SeatHolder::NotCreatedYet { task, .. } if own_gang != Some(key) => {
                        match self.template_host_ports(g, task.as_deref()) {
                            Some(ports) => (ports, messages::MEMBER_NOT_CREATED_YET),
                            None => continue,
                        }
                    }
                    _ => continue,
                };
                let Some(port) = wanted
                    .iter()
                    .find(|w| used.iter().any(|u| w.conflicts_with(u)))
                else {
                    continue;
                };
                held.entry(i)
                    .or_insert_with(|| messages::host_port_held(port, key, &whose));
            }
        }
        held
    }

    /// The host ports a member of `gang` not created yet will ask for: those every member of
    /// its task (any task: every member) that has not finished asks for, when they all ask
    /// for the same ones (one pod template); `None` when they ask for none or differ.
    fn template_host_ports<'a>(
        &'a self,
        gang: &'a Gang,
        task: Option<&str>,
    ) -> Option<&'a [HostPort]> {
        let mut ports = self
            .members_of(gang)
            .filter(|p| !p.info.terminal)
            .filter(|p| task.is_none() || task_of(&p.info) == task)
            .map(|p| node_ports::host_ports(&p.info));
        let first = ports.next()?;
        (!first.is_empty() && ports.all(|p| p == first)).then_some(first)
    }

    /// For a pod with ResourceClaims: the nodes (by position) where the devices its claims need
    /// are free but for what seats hold there, with the message saying so. A seat holds its
    /// member's devices as it holds its room (no-overcommit): kube-scheduler, which allocates a
    /// claim only in the pod's binding cycle, does not see a seat's devices, so a pod muster
    /// judges by room (a plain pod in the every-pod mode, a member of an admitted gang) could
    /// be given them. Seats `skip` names are left out (the pod's own, or one it would take
    /// over); only the node at `only`, when given. Only nodes with a seat holding claims are
    /// looked at, and only a refusal the seats cause: where the pod's claims do not fit even
    /// without them, kube-scheduler's own DynamicResources verdict stands (it passed the node),
    /// and a claim muster does not simulate refuses nothing here.
    pub(in crate::model) fn devices_held_by_seats(
        &self,
        pod: &PodInfo,
        skip: impl Fn(&GangKey, &SeatHolder) -> bool,
        only: Option<usize>,
    ) -> HashMap<usize, String> {
        let mut held = HashMap::default();
        if pod.rules.as_ref().is_none_or(|r| r.claims.is_empty()) {
            return held;
        }
        let mut seated: Vec<(&GangKey, &PodInfo, usize)> = Vec::new();
        for (key, g) in &self.gangs {
            for (holder, seat) in g.seats() {
                if skip(key, holder) {
                    continue;
                }
                let Some(member) = holder.member().and_then(|u| self.pods.get(u)) else {
                    continue;
                };
                let has_claims = member
                    .info
                    .rules
                    .as_ref()
                    .is_some_and(|r| !r.claims.is_empty());
                // A member being bound holds its devices through the bind (kube-scheduler's
                // allocation), not through its seat.
                if !has_claims
                    || member.info.terminal
                    || member.info.uid == pod.uid
                    || member.charged_node().is_some()
                {
                    continue;
                }
                let Some(i) = self.ledger.position(&seat.node) else {
                    continue;
                };
                if only.is_none_or(|o| o == i) {
                    seated.push((key, &member.info, i));
                }
            }
        }
        if seated.is_empty() {
            return held;
        }
        let Some(bare) = DynamicResources::new(&self.devices, &[pod], |_| false) else {
            return held;
        };
        let Some(mut with_seats) = DynamicResources::new(&self.devices, &[pod], |_| false) else {
            return held;
        };
        // In a fixed order, as the gang simulation holds them.
        seated.sort_unstable_by(|a, b| a.1.uid.cmp(&b.1.uid));
        for (_, member, i) in &seated {
            with_seats.hold(member, self.ledger.at(*i).info());
        }
        for (key, member, i) in &seated {
            if held.contains_key(i) {
                continue;
            }
            let node = self.ledger.at(*i).info();
            // With the seats first: most nodes pass, and then the bare look is not needed.
            if with_seats.check(0, node).is_err() && bare.check(0, node).is_ok() {
                held.insert(*i, messages::devices_held(key, &member.name));
            }
        }
        held
    }

    /// Remembers whether the gang's own simulation found a rule that stops it (gangs behind it
    /// then do not leave room for it).
    pub(in crate::model) fn note_verdict(&mut self, key: &GangKey, plan: &GangPlan) {
        if let Some(g) = self.gangs.get_mut(key) {
            g.note_blocked_by_rule(
                matches!(plan, GangPlan::DoesNotFit(why) if why.blocked_by_rule()),
            );
        }
    }

    /// Tells the gang's members why it waits, when the reason changed, and remembers it.
    ///
    /// A gang short only of members not created yet, within its creation window, is not told:
    /// its count changes with every member created (one Event per member per gang), and most
    /// gangs are whole within the window. The reason is kept (`/gangs` shows it) and told once
    /// the window has passed with members still missing.
    pub(in crate::model) fn tell_waiting(
        &mut self,
        key: &GangKey,
        message: &str,
        plan: &GangPlan,
        asking: &PodInfo,
        now: Instant,
    ) {
        let window = self.config.creation_window;
        let Some(gang) = self.gangs.get(key) else {
            return;
        };
        let still_arriving = matches!(plan, GangPlan::DoesNotFit(why) if why.missing() > 0);
        if still_arriving && gang.within_creation_window(now, window) {
            if let Some(g) = self.gangs.get_mut(key) {
                g.note_waiting_untold(message);
            }
            return;
        }
        if gang.wait_already_told(message) {
            return;
        }
        // While members are still being created, only the one asking hears it: the others
        // will ask soon enough, and would hear it again for every new member.
        let told: Vec<PodRef> = if still_arriving {
            vec![PodRef::of(asking)]
        } else {
            self.members_of(gang)
                .filter(|p| p.node().is_none() && p.is_live())
                .map(|p| PodRef::of(&p.info))
                .collect()
        };
        self.notices.extend(told.into_iter().map(|pod| Notice {
            pod,
            kind: NoticeKind::Waiting,
            message: message.to_string(),
        }));
        if let Some(g) = self.gangs.get_mut(key) {
            g.note_waiting_told(message);
        }
    }
}
