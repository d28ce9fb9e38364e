//! Gathering behind the gate, round by round, with time passed in by hand.

use std::time::{Duration, Instant};

use super::*;
use crate::model::objects::PodRules;
use crate::model::{ModelConfig, NodeInfo, PartlyBound, PartlyBoundOutcome};
use crate::testkit::{self, gathered, pod};

fn node(name: &str, cpu_milli: i64) -> NodeInfo {
    testkit::node(name).cpu(cpu_milli).build()
}

fn with_gate(mut p: PodInfo, gate: &str) -> PodInfo {
    let mut rules: PodRules = p.rules.take().map(|b| *b).unwrap_or_default();
    rules.scheduling_gates.push(gate.to_string());
    p.rules = Some(Box::new(rules));
    p
}

/// The watch shows the pod after muster's writes: gates removed, nominated to `node`.
fn let_through(mut p: PodInfo, node: Option<&str>) -> PodInfo {
    if let Some(r) = p.rules.as_mut() {
        r.scheduling_gates.retain(|g| g != GATHER_GATE);
    }
    p.nominated_node = node.map(NodeName::from);
    p
}

struct World {
    table: GangTable,
    gatherer: Gatherer,
    now: Instant,
}

impl World {
    fn new(nodes: &[NodeInfo]) -> Self {
        let mut table = GangTable::new(ModelConfig::default());
        for n in nodes {
            table.apply_node(n.clone());
        }
        // These tests follow what nominations do once written: every seat is published. Which
        // seats a release may leave unpublished has its own tests (`nominations/tests.rs`).
        World {
            table,
            gatherer: Gatherer::new(true).nominating(Nominations::EverySeat),
            now: Instant::now(),
        }
    }

    fn add(&mut self, pods: &[&PodInfo]) {
        for p in pods {
            self.table.apply_pod((*p).clone());
        }
    }

    fn advance(&mut self, by: Duration) {
        self.now += by;
    }

    /// Why gang `name` waits, as `/gangs` shows it.
    fn waiting_reason(&self, name: &str) -> Option<String> {
        self.table
            .views(self.now)
            .into_iter()
            .find(|v| v.name == name)
            .and_then(|v| v.waiting_reason)
    }

    fn round(&mut self) -> GatherPlan {
        self.gatherer.gather(&mut self.table, self.now)
    }

    /// The cluster side wrote everything the plan asked for.
    fn written(&mut self, plan: &GatherPlan) {
        for r in &plan.releases {
            for (p, n) in &r.nominate {
                let gated = r.ungate.iter().any(|u| u.pod.uid == p.uid);
                self.gatherer
                    .nominated(&p.uid, Some(n.clone()), self.now, gated);
            }
            for u in &r.ungate {
                self.gatherer.ungated(&u.pod.uid, self.now);
            }
        }
        for (p, n) in &plan.renominate {
            self.gatherer
                .nominated(&p.uid, Some(n.clone()), self.now, false);
        }
        for p in &plan.clear {
            self.gatherer.nominated(&p.uid, None, self.now, false);
        }
    }

    fn state(&self, gang: &str) -> &'static str {
        self.table
            .views(self.now)
            .into_iter()
            .find(|v| v.name == gang)
            .map(|v| v.state.as_str())
            .unwrap_or("absent")
    }

    fn reserved(&self, node: &str) -> i64 {
        self.table.ledger.get(node).unwrap().reserved().cpu_milli
    }
}

fn released_names(plan: &GatherPlan) -> Vec<String> {
    plan.releases
        .iter()
        .flat_map(|r| r.nominate.iter().map(|(p, n)| format!("{}@{n}", p.name)))
        .collect()
}

/// A gang that fits is admitted with a seat per member, and each member is nominated to its
/// seat and ungated, all in one release (never-half: the quorum goes through together).
#[test]
fn a_gang_that_fits_is_seated_nominated_and_ungated_together() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let a = gathered(pod("a").cpu(1000).gang("g", 2).build());
    let b = gathered(pod("b").cpu(1000).gang("g", 2).build());
    w.add(&[&a, &b]);
    let plan = w.round();
    assert_eq!(plan.releases.len(), 1, "{plan:?}");
    let r = &plan.releases[0];
    assert_eq!(r.gang, GangKey::new("ml", "g"));
    let mut names: Vec<String> = r.nominate.iter().map(|(p, _)| p.name.to_string()).collect();
    names.sort();
    assert_eq!(names, ["a", "b"]);
    let nodes: std::collections::BTreeSet<&str> = r.nominate.iter().map(|(_, n)| &**n).collect();
    assert_eq!(nodes.len(), 2, "one member per node: {r:?}");
    assert_eq!(r.ungate.len(), 2);
    assert!(r.ungate.iter().all(|u| u.gate_index == 0));
    assert_eq!(w.state("g"), "admitted");
    assert_eq!(w.reserved("n1") + w.reserved("n2"), 2000);

    // Written: the next round (the watch not caught up yet) releases nothing again.
    w.written(&plan);
    let again = w.round();
    assert!(again.releases.is_empty(), "{again:?}");
}

/// A gang that cannot run stays gated and holds nothing (holds-nothing); its members hear why.
#[test]
fn a_gang_that_cannot_fit_stays_gated_and_holds_nothing() {
    let mut w = World::new(&[node("n1", 1000)]);
    let a = gathered(pod("a").cpu(1000).gang("g", 2).build());
    let b = gathered(pod("b").cpu(1000).gang("g", 2).build());
    w.add(&[&a, &b]);
    let plan = w.round();
    assert!(plan.is_empty(), "{plan:?}");
    assert_eq!(w.state("g"), "waiting");
    assert_eq!(w.reserved("n1"), 0);
    let notices = w.table.take_notices();
    assert!(
        notices
            .iter()
            .any(|n| n.kind == NoticeKind::Waiting && n.message.contains("1 of 2 members fit")),
        "{notices:?}"
    );
}

/// SchedulingGates: another component's gate still blocks the gang; muster's own does not.
#[test]
fn a_foreign_gate_keeps_the_gang_gathered() {
    let mut w = World::new(&[node("n1", 4000)]);
    let a = gathered(pod("a").gang("g", 2).build());
    let b = with_gate(gathered(pod("b").gang("g", 2).build()), "example.com/quota");
    w.add(&[&a, &b]);
    assert!(w.round().releases.is_empty());
    assert_eq!(w.reserved("n1"), 0);
}

/// Members not created yet: room for them is not enough, no gate goes until they exist.
#[test]
fn no_gate_goes_while_quorum_members_are_missing() {
    let mut w = World::new(&[node("n1", 4000)]);
    let a = gathered(pod("a").gang("g", 3).build());
    let b = gathered(pod("b").gang("g", 3).build());
    w.add(&[&a, &b]);
    assert!(w.round().releases.is_empty());
    assert_eq!(w.reserved("n1"), 0);
    let c = gathered(pod("c").gang("g", 3).build());
    w.add(&[&c]);
    let plan = w.round();
    assert_eq!(plan.releases.len(), 1);
    assert_eq!(plan.releases[0].ungate.len(), 3);
}

/// Members created one by one within the creation window: each round's count ("1 of 3",
/// "2 of 3") is kept where `/gangs` shows it but told to nobody (it would be one Event per
/// member per gang); once the window passes with a member still missing, the member asking
/// hears it, once.
#[test]
fn a_gang_still_being_created_is_told_only_once_its_window_has_passed() {
    let mut w = World::new(&[node("n1", 4000)]);
    let a = gathered(pod("a").gang("g", 3).build());
    let b = gathered(pod("b").gang("g", 3).build());
    let waiting = |w: &mut World| -> Vec<String> {
        w.table
            .take_notices()
            .into_iter()
            .filter(|n| n.kind == NoticeKind::Waiting)
            .map(|n| format!("{}: {}", n.pod.name, n.message))
            .collect()
    };
    w.add(&[&a]);
    assert!(w.round().is_empty());
    w.advance(Duration::from_secs(1));
    w.add(&[&b]);
    assert!(w.round().is_empty());
    assert_eq!(
        waiting(&mut w),
        Vec::<String>::new(),
        "told within the window"
    );
    let kept = w.waiting_reason("g").expect("the reason is kept");
    assert!(kept.contains("waiting for members: 2 of 3 exist"), "{kept}");

    w.advance(ModelConfig::default().creation_window + Duration::from_secs(1));
    assert!(w.round().is_empty());
    let told = waiting(&mut w);
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(told[0].ends_with(&kept), "{told:?}");
    w.advance(Duration::from_secs(10));
    assert!(w.round().is_empty());
    assert_eq!(waiting(&mut w), Vec::<String>::new(), "told once");

    // The last member arrives: the gang is released, and was never told a count in between.
    let c = gathered(pod("c").gang("g", 3).build());
    w.add(&[&c]);
    assert_eq!(w.round().releases.len(), 1);
    assert_eq!(waiting(&mut w), Vec::<String>::new());
}

/// Only the quorum goes through first; a member beyond it is ungated once the gang is placed
/// and it fits.
#[test]
fn members_beyond_the_quorum_go_once_the_gang_is_placed() {
    let mut w = World::new(&[node("n1", 4000)]);
    let a = gathered(pod("a").cpu(1000).gang("g", 2).build());
    let b = gathered(pod("b").cpu(1000).gang("g", 2).build());
    let c = gathered(pod("c").cpu(1000).gang("g", 2).build());
    w.add(&[&a, &b, &c]);
    let plan = w.round();
    assert_eq!(plan.releases.len(), 1);
    let through: Vec<String> = plan.releases[0]
        .ungate
        .iter()
        .map(|u| u.pod.name.to_string())
        .collect();
    assert_eq!(through.len(), 2, "{through:?}");
    let left = ["a", "b", "c"]
        .into_iter()
        .find(|n| !through.iter().any(|t| t == n))
        .unwrap();
    w.written(&plan);
    // The quorum binds (the watch shows them bound).
    for p in [&a, &b, &c] {
        if *p.name != *left {
            let bound = PodInfo {
                node_name: Some(NodeName::from("n1")),
                ..let_through(p.clone(), None)
            };
            w.table.apply_pod(bound);
        }
    }
    assert_eq!(w.state("g"), "placed");
    let plan = w.round();
    assert_eq!(released_names(&plan), [format!("{left}@n1")]);
}

/// Beyond the quorum, one member at a time: while one let through has no node yet, the next
/// stays gated (both let through for the same room would leave one in kube-scheduler's queue).
#[test]
fn members_beyond_the_quorum_go_one_at_a_time() {
    let mut w = World::new(&[node("n1", 2000), node("n2", 1000)]);
    let members: Vec<PodInfo> = (0..4)
        .map(|i| gathered(pod(&format!("m{i}")).cpu(1000).gang("g", 2).build()))
        .collect();
    // The quorum is bound already (n1).
    for m in &members[..2] {
        w.table.apply_pod(PodInfo {
            node_name: Some(NodeName::from("n1")),
            ..let_through(m.clone(), None)
        });
    }
    w.add(&[&members[2], &members[3]]);
    let plan = w.round();
    assert_eq!(released_names(&plan).len(), 1, "{plan:?}");
    w.written(&plan);
    let through = &plan.releases[0].ungate[0].pod.name;
    let p = members.iter().find(|m| &m.name == through).unwrap();
    w.table.apply_pod(let_through(p.clone(), None));
    assert!(
        w.round().releases.is_empty(),
        "the first is still on its way"
    );
    w.table.apply_pod(PodInfo {
        node_name: Some(NodeName::from("n2")),
        ..let_through(p.clone(), None)
    });
    // No room left for the last one: it stays gated.
    assert!(w.round().releases.is_empty());
}

/// kube-scheduler cleared a seated member's nomination: muster writes it again; when the seat
/// goes (the gang timed out), muster clears its nomination.
#[test]
fn nominations_follow_the_seats() {
    let mut w = World::new(&[node("n1", 4000)]);
    let a = gathered(pod("a").gang("g", 2).build());
    let b = gathered(pod("b").gang("g", 2).build());
    w.add(&[&a, &b]);
    let plan = w.round();
    w.written(&plan);
    // The watch: gates gone, a's nomination cleared by kube-scheduler, b's still there.
    w.table.apply_pod(let_through(a.clone(), None));
    w.table.apply_pod(let_through(b.clone(), Some("n1")));
    let plan = w.round();
    assert!(plan.releases.is_empty());
    assert_eq!(
        plan.renominate,
        vec![(PodRef::of(&a), NodeName::from("n1"))],
        "{plan:?}"
    );
    assert!(plan.clear.is_empty());
    w.written(&plan);
    w.table.apply_pod(let_through(a.clone(), Some("n1")));
    // The quorum timeout passes without the members binding: seats go, nominations too.
    w.now += Duration::from_secs(61);
    w.table.expire(w.now);
    let plan = w.round();
    let mut cleared: Vec<&str> = plan.clear.iter().map(|p| &*p.name).collect();
    cleared.sort();
    assert_eq!(cleared, ["a", "b"], "{plan:?}");
}

/// The watch lags muster's own writes under load: a round that still sees a released gang's
/// members gated and unnominated, or a renominated member still without its nomination, writes
/// nothing again (one nomination per member, not one per round); a nomination the watch never
/// shows is written again after NOMINATION_SEEN_WITHIN.
#[test]
fn nominations_are_not_written_again_while_the_watch_lags() {
    let mut w = World::new(&[node("n1", 4000)]);
    let a = gathered(pod("a").gang("g", 2).build());
    let b = gathered(pod("b").gang("g", 2).build());
    w.add(&[&a, &b]);
    let plan = w.round();
    assert_eq!(plan.releases.len(), 1, "{plan:?}");
    w.written(&plan);
    // The watch has shown none of the writes yet.
    w.now += Duration::from_millis(300);
    let plan = w.round();
    assert!(plan.is_empty(), "{plan:?}");
    // The gates gone, b's nomination shown, a's cleared since (by kube-scheduler): a only.
    w.table.apply_pod(let_through(a.clone(), None));
    w.table.apply_pod(let_through(b.clone(), Some("n1")));
    let plan = w.round();
    assert_eq!(
        plan.renominate,
        vec![(PodRef::of(&a), NodeName::from("n1"))],
        "{plan:?}"
    );
    w.written(&plan);
    // The renomination not shown yet: not written again.
    w.now += Duration::from_millis(300);
    let plan = w.round();
    assert!(plan.is_empty(), "{plan:?}");
    // Never shown within the period: written again.
    w.now += NOMINATION_SEEN_WITHIN;
    let plan = w.round();
    assert_eq!(
        plan.renominate,
        vec![(PodRef::of(&a), NodeName::from("n1"))],
        "{plan:?}"
    );
}

/// A gated member whose nomination has no seat (written before a restart of muster) is
/// cleared; a pod nominated by kube-scheduler's preemption (not gated) is left alone.
#[test]
fn a_stale_nomination_of_a_gated_member_is_cleared() {
    let mut w = World::new(&[node("n1", 1000)]);
    let mut a = gathered(pod("a").cpu(1000).gang("g", 2).build());
    a.nominated_node = Some(NodeName::from("n1"));
    let b = gathered(pod("b").cpu(1000).gang("g", 2).build());
    let plain = pod("plain").gang("h", 1).nominated("n1").build();
    w.add(&[&a, &b, &plain]);
    let plan = w.round();
    assert_eq!(plan.clear, vec![PodRef::of(&a)], "{plan:?}");
}

/// A gang member without the marker bypasses muster: one Warning naming the policy, once.
#[test]
fn a_member_without_the_marker_is_warned_once() {
    let mut w = World::new(&[node("n1", 1000)]);
    let unmarked = pod("u").gang("g", 2).build();
    let marked = gathered(pod("m").gang("g", 2).build());
    w.add(&[&unmarked, &marked]);
    w.round();
    let notices: Vec<Notice> = w
        .table
        .take_notices()
        .into_iter()
        .filter(|n| n.kind == NoticeKind::MarkerMissing)
        .collect();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(&*notices[0].pod.name, "u");
    assert!(notices[0].message.contains(POLICY_FILE));
    assert_eq!(NoticeKind::MarkerMissing.reason(), "GangMarkerMissing");
    assert!(NoticeKind::MarkerMissing.is_warning());
    w.round();
    assert!(!w
        .table
        .take_notices()
        .iter()
        .any(|n| n.kind == NoticeKind::MarkerMissing));
    assert_eq!(w.gatherer.warned_count(), 1);

    // Every pod through muster (no marker expected): no warning.
    let mut w = World::new(&[node("n1", 1000)]);
    w.gatherer = Gatherer::new(false);
    w.add(&[&unmarked]);
    w.round();
    assert!(w.table.take_notices().is_empty());
}

/// NodeResourcesFit with the marker in `ignoredResources` (the scheduler configs'
/// `ignoredByScheduler: true`): nodes publish `muster.dev/gang` only for NodeResourcesFit's
/// queueing hint (`cluster::node_marker`), and nothing counts it.
#[test]
fn the_marker_is_no_capacity() {
    let r = crate::model::Resources::from_quantities([(GANG_MARKER, "1"), ("cpu", "1")]).unwrap();
    assert!(r.extended.is_empty(), "{r:?}");
    assert_eq!(r.cpu_milli, 1000);
    assert!(crate::model::Resources::from_quantities([(GANG_MARKER, "lots")]).is_err());
}

/// Gang-members mode after a restart mid-binding: the remaining members were let through
/// before the bindings started (no gate), so they come back through filter and bind to the
/// room the repair held; one still gated (its gate removal lost with muster) is let through
/// to its seat by the next gather round, nominated there (never-half).
#[test]
fn a_partly_bound_gathered_gang_is_finished_through_its_seats_after_a_restart() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let a = let_through(
        gathered(pod("a").cpu(500).gang("g", 3).bound("n1").build()),
        None,
    );
    let b = let_through(gathered(pod("b").cpu(500).gang("g", 3).build()), None);
    let c = gathered(pod("c").cpu(500).gang("g", 3).build());
    w.add(&[&a, &b, &c]);
    let found = w.table.repair_partly_bound(w.now);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(w.state("g"), "admitted");
    assert_eq!(
        w.reserved("n1") + w.reserved("n2"),
        1000,
        "room for b and c"
    );
    let plan = w.round();
    let released = released_names(&plan);
    assert_eq!(released.len(), 1, "{plan:?}");
    assert!(released[0].starts_with("c@"), "{released:?}");
    assert_eq!(plan.releases[0].ungate.len(), 1);
}

/// Gang-members mode after a restart mid-binding, the plain pod winning the race: the repair
/// holds n2 for c and the round publishes it as c's nomination, but kube-scheduler binds a
/// plain pod (which never asks muster) on n2 before it sees the nomination. c fits nowhere
/// now and kube-scheduler never asks muster about it again: the gang is given up at the next
/// tick, its bound members evicted, not at its timeout; its nomination is cleared.
#[test]
fn a_partly_bound_gathered_gang_whose_held_room_a_plain_pod_takes_is_given_up_at_the_next_tick() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 500)]);
    let [a, b] = ["a", "b"].map(|n| {
        let_through(
            gathered(pod(n).cpu(500).gang("g", 3).bound("n1").build()),
            None,
        )
    });
    let c = let_through(gathered(pod("c").cpu(500).gang("g", 3).build()), None);
    w.add(&[&a, &b, &c]);
    let found = w.table.repair_partly_bound(w.now);
    assert!(
        matches!(found[0].outcome, PartlyBoundOutcome::Finishing { .. }),
        "{found:?}"
    );
    w.table.take_partly_bound();
    let plan = w.round();
    assert_eq!(
        plan.renominate.len(),
        1,
        "c nominated to its seat: {plan:?}"
    );
    w.written(&plan);
    w.add(&[&pod("plain").cpu(500).bound("n2").build()]);
    w.round();
    w.now += Duration::from_secs(1);
    assert!(w.table.expire(w.now).is_empty(), "no timeout");
    let after = w.table.take_partly_bound();
    assert!(
        matches!(&after[..], [PartlyBound { outcome: PartlyBoundOutcome::Evicting { members, .. }, .. }] if members.len() == 2),
        "{after:?}"
    );
    assert_eq!(w.table.take_disruptions().len(), 1, "handed to the evictor");
    assert_eq!(w.reserved("n1") + w.reserved("n2"), 0, "it holds nothing");
    // c's nomination is muster's and its seat is gone: cleared.
    w.table.apply_pod(let_through(c.clone(), Some("n2")));
    let plan = w.round();
    assert!(
        plan.clear.iter().any(|p| p.uid == c.uid),
        "c's nomination cleared: {plan:?}"
    );
}

/// kube-scheduler's bind call of `p` on `node`, as the handler makes it: a call told to wait
/// is held from the decision on (`binding::call`), until [`call_ends`].
fn bind(w: &mut World, p: &PodInfo, node: &str) -> crate::model::BindDecision {
    let req = crate::model::BindRequest {
        namespace: &p.namespace,
        name: &p.name,
        uid: &p.uid,
        node,
    };
    let decision = w.table.bind(req, w.now);
    if matches!(decision, crate::model::BindDecision::Wait { .. }) {
        w.table.bind_held(&p.uid);
    }
    decision
}

/// The held bind call of `p` ends unbound (its hold ran out, or it was dropped): kube-scheduler
/// forgets the room it assumed.
fn call_ends(w: &mut World, p: &PodInfo) {
    w.table.bind_released(&p.uid);
}

/// Three members seated, nominated and let through; then the rule of a gathered gang's seats
/// (quorum met by members with nodes and seated members that exist and wait for no foreign
/// gate) holds after `a`, `b` and `c` are let through.
fn three_let_through() -> (World, [PodInfo; 3]) {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000), node("n3", 1000)]);
    let m = ["a", "b", "c"].map(|n| gathered(pod(n).cpu(600).gang("g", 3).build()));
    w.add(&[&m[0], &m[1], &m[2]]);
    let plan = w.round();
    assert_eq!(plan.releases.len(), 1, "{plan:?}");
    w.written(&plan);
    for (p, n) in &plan.releases[0].nominate {
        let member = m.iter().find(|x| x.uid == p.uid).unwrap();
        w.table.apply_pod(let_through(member.clone(), Some(n)));
    }
    assert_eq!(w.state("g"), "admitted");
    (w, m)
}

/// A seated member deleted after its gang was let through: the gang's quorum is short, so every
/// seat goes at once (holds-nothing), not at the gang's timeout, and the members' nominations
/// are cleared; they hear why.
#[test]
fn a_gathered_gang_that_loses_a_seated_member_releases_every_seat_at_once() {
    let (mut w, [a, b, c]) = three_let_through();
    w.table.remove_pod(&c.uid);
    let plan = w.round();
    assert!(plan.releases.is_empty(), "{plan:?}");
    assert_eq!(w.state("g"), "waiting");
    assert_eq!(w.reserved("n1") + w.reserved("n2") + w.reserved("n3"), 0);
    let mut cleared: Vec<&str> = plan.clear.iter().map(|p| &*p.name).collect();
    cleared.sort();
    assert_eq!(cleared, ["a", "b"], "{plan:?}");
    let notices = w.table.take_notices();
    for p in [&a, &b] {
        assert!(
            notices.iter().any(|n| n.pod.uid == p.uid
                && n.kind == NoticeKind::Waiting
                && n.message.contains("seats released: 2 of 3 members")),
            "{notices:?}"
        );
    }
    assert!(w.table.take_released().contains(&GangKey::new("ml", "g")));
}

/// A member that never arrives keeps nobody's room: the members let through are refused by
/// kube-scheduler's calls while one is missing, even within the creation window (a gathered
/// gang has none), and hold nothing.
#[test]
fn a_gathered_gang_holds_no_room_for_a_member_not_created_yet() {
    let (mut w, [a, _b, c]) = three_let_through();
    w.table.remove_pod(&c.uid);
    w.round();
    match bind(&mut w, &a, "n1") {
        crate::model::BindDecision::Reject(r) => assert!(
            r.to_string()
                .contains("waiting for members: 2 of 3 exist; it holds no room"),
            "{r}"
        ),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(w.reserved("n1") + w.reserved("n2") + w.reserved("n3"), 0);
}

/// The replacement arrives gated by another component too: SchedulingGates keeps it out of
/// scheduling, so the gang still holds nothing; once that gate goes, the gang is seated again
/// in one round, the replacement let through and the members let through before nominated to
/// their new seats and asked to retry.
#[test]
fn a_replacement_gated_by_another_component_seats_nothing_until_its_gate_goes() {
    let (mut w, [a, b, c]) = three_let_through();
    w.table.remove_pod(&c.uid);
    let plan = w.round();
    w.written(&plan);
    for p in [&a, &b] {
        w.table.apply_pod(let_through(p.clone(), None));
    }
    let r = gathered(with_gate(
        pod("r").cpu(600).gang("g", 3).build(),
        "example.com/quota",
    ));
    w.add(&[&r]);
    let plan = w.round();
    assert!(plan.is_empty(), "{plan:?}");
    assert_eq!(w.state("g"), "waiting");
    assert_eq!(w.reserved("n1") + w.reserved("n2") + w.reserved("n3"), 0);
    w.table.take_notices();

    // The other component removes its gate.
    w.table
        .apply_pod(gathered(pod("r").cpu(600).gang("g", 3).build()));
    let plan = w.round();
    assert_eq!(released_names(&plan).len(), 1, "{plan:?}");
    assert_eq!(&*plan.releases[0].ungate[0].pod.name, "r");
    let mut renominated: Vec<&str> = plan.renominate.iter().map(|(p, _)| &*p.name).collect();
    renominated.sort();
    assert_eq!(renominated, ["a", "b"], "{plan:?}");
    assert_eq!(w.state("g"), "admitted");
    assert_eq!(w.reserved("n1") + w.reserved("n2") + w.reserved("n3"), 1800);
    let mut retried: Vec<String> = w
        .table
        .take_notices()
        .into_iter()
        .filter(|n| n.kind == NoticeKind::Retry)
        .map(|n| n.pod.name.to_string())
        .collect();
    retried.sort();
    assert_eq!(retried, ["a", "b"]);
}

/// A node going away with a seat on it shortens the quorum like a member lost: every seat goes.
#[test]
fn a_gathered_gang_whose_seat_node_goes_releases_every_seat() {
    let (mut w, _) = three_let_through();
    w.table.remove_node("n3");
    w.round();
    assert_eq!(w.state("g"), "waiting");
    assert_eq!(w.reserved("n1") + w.reserved("n2"), 0);
}

/// The seats still hold the quorum (a member confirmed its seat through kube-scheduler's bind):
/// nothing is released.
#[test]
fn a_gathered_gang_whose_seats_hold_its_quorum_keeps_them() {
    let (mut w, [a, ..]) = three_let_through();
    let seat = w.table.gangs[&GangKey::new("ml", "g")]
        .seat_of(&a.uid)
        .unwrap()
        .node
        .clone();
    assert!(matches!(
        bind(&mut w, &a, &seat),
        crate::model::BindDecision::Wait { .. }
    ));
    let plan = w.round();
    assert!(plan.is_empty(), "{plan:?}");
    assert_eq!(w.state("g"), "admitted");
    assert_eq!(w.reserved("n1") + w.reserved("n2") + w.reserved("n3"), 1800);
}

/// A member let through to replace one of a placed gang holds no seat: the nomination muster
/// wrote for it stays until it binds (it was written, then cleared the next round).
#[test]
fn a_replacements_nomination_stays_until_it_binds() {
    let mut w = World::new(&[node("n1", 4000)]);
    let m: Vec<PodInfo> = (0..3)
        .map(|i| gathered(pod(&format!("m{i}")).cpu(1000).gang("g", 2).build()))
        .collect();
    for p in &m[..2] {
        w.table.apply_pod(PodInfo {
            node_name: Some(NodeName::from("n1")),
            ..let_through(p.clone(), None)
        });
    }
    w.add(&[&m[2]]);
    let plan = w.round();
    assert_eq!(released_names(&plan), ["m2@n1"]);
    w.written(&plan);
    w.table.apply_pod(let_through(m[2].clone(), Some("n1")));
    let plan = w.round();
    assert!(plan.clear.is_empty(), "{plan:?}");
    assert!(plan.is_empty(), "{plan:?}");
}

/// After a restart (a gatherer with no memory), seats rebuilt through kube-scheduler's calls
/// for members muster let through before are published again where kube-scheduler cleared them.
#[test]
fn after_a_restart_rebuilt_seats_are_nominated_again() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let a = let_through(gathered(pod("a").cpu(1000).gang("g", 2).build()), None);
    let b = let_through(gathered(pod("b").cpu(1000).gang("g", 2).build()), None);
    w.add(&[&a, &b]);
    assert!(matches!(
        bind(&mut w, &a, "n1"),
        crate::model::BindDecision::Wait { .. }
    ));
    // Its hold ran out: kube-scheduler tries it again, from its nomination.
    call_ends(&mut w, &a);
    let plan = w.round();
    let mut renominated: Vec<String> = plan
        .renominate
        .iter()
        .map(|(p, n)| format!("{}@{n}", p.name))
        .collect();
    renominated.sort();
    assert_eq!(renominated, ["a@n1", "b@n2"], "{plan:?}");
}

/// A placed gang loses a bound member (deleted, evicted): it is below quorum, and its
/// replacement, gated, is gathered into the room the lost member left, seated and let through
/// in one round; a member let through beyond the quorum is not needed for that.
#[test]
fn a_placed_gang_that_loses_a_bound_member_gathers_its_replacement_into_the_room() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000), node("n3", 1000)]);
    let m: Vec<PodInfo> = (0..3)
        .map(|i| gathered(pod(&format!("m{i}")).cpu(1000).gang("g", 3).build()))
        .collect();
    for (p, n) in m.iter().zip(["n1", "n2", "n3"]) {
        w.table.apply_pod(PodInfo {
            node_name: Some(NodeName::from(n)),
            ..let_through(p.clone(), None)
        });
    }
    assert_eq!(w.state("g"), "placed");
    w.table.remove_pod(&m[1].uid);
    assert_ne!(w.state("g"), "placed");
    let r = gathered(pod("r").cpu(1000).gang("g", 3).build());
    w.add(&[&r]);
    let plan = w.round();
    assert_eq!(released_names(&plan), ["r@n2"], "{plan:?}");
    assert_eq!(w.state("g"), "admitted");
    assert_eq!(w.reserved("n2"), 1000);
    // kube-scheduler binds it on its seat: the gang is whole again.
    w.written(&plan);
    w.table.apply_pod(let_through(r.clone(), Some("n2")));
    assert!(matches!(
        bind(&mut w, &r, "n2"),
        crate::model::BindDecision::BindGang { .. } | crate::model::BindDecision::BindNow { .. }
    ));
}

/// A gathered gang that fits only if pods of lower priority go: its quorum's gates are removed
/// together, with no seat and no nomination, so kube-scheduler's preemption runs for its
/// members through muster's preempt verb (evict-for-whole); once, not every round. A gang of
/// the victims' priority stays gated (preemption never evicts for equal priority).
#[test]
fn a_gathered_gang_that_fits_only_by_preemption_is_let_through_without_seats() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let low = pod("low").cpu(1000).priority(0).bound("n1").build();
    let a = gathered(pod("a").cpu(1000).priority(100).gang("g", 2).build());
    let b = gathered(pod("b").cpu(1000).priority(100).gang("g", 2).build());
    w.add(&[&low, &a, &b]);
    let plan = w.round();
    assert_eq!(plan.releases.len(), 1, "{plan:?}");
    let r = &plan.releases[0];
    assert!(r.nominate.is_empty(), "{r:?}");
    let mut through: Vec<&str> = r.ungate.iter().map(|u| &*u.pod.name).collect();
    through.sort();
    assert_eq!(through, ["a", "b"]);
    assert_eq!(w.state("g"), "waiting");
    assert_eq!(w.reserved("n1") + w.reserved("n2"), 0);
    let notices = w.table.take_notices();
    assert!(
        notices.iter().any(|n| n
            .message
            .contains("fits only if pods of lower priority are preempted")),
        "{notices:?}"
    );
    w.written(&plan);
    assert!(w.round().is_empty(), "let through once");

    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let a = gathered(pod("a").cpu(1000).priority(0).gang("g", 2).build());
    let b = gathered(pod("b").cpu(1000).priority(0).gang("g", 2).build());
    w.add(&[&low, &a, &b]);
    assert!(w.round().is_empty());
}

/// The preemption outlook scans every pod, so a waiting gang is asked at most once per
/// PREEMPTION_LOOK_EVERY: victims that become evictable are seen by the next look.
#[test]
fn whether_preemption_could_place_a_gang_is_looked_at_once_per_period() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let same = pod("same").cpu(1000).priority(100).bound("n1").build();
    let a = gathered(pod("a").cpu(1000).priority(100).gang("g", 2).build());
    let b = gathered(pod("b").cpu(1000).priority(100).gang("g", 2).build());
    w.add(&[&same, &a, &b]);
    assert!(w.round().is_empty(), "equal priority: nothing to preempt");
    // The pod on n1 is replaced by one of lower priority.
    w.table.remove_pod(&same.uid);
    let low = pod("low").cpu(1000).priority(0).bound("n1").build();
    w.add(&[&low]);
    w.now += Duration::from_secs(1);
    assert!(w.round().is_empty(), "not looked at again yet");
    w.now += PREEMPTION_LOOK_EVERY;
    assert_eq!(w.round().releases.len(), 1);
}

/// DynamicResources: kube-scheduler allocates a member's claim only in its binding cycle, so
/// until then the devices a seat needs are free in the cluster. A gang seated on a node's
/// devices holds them (no-overcommit) as it holds the node's CPU: the next gang gathered is
/// seated on other devices, not nominated to a node whose devices kube-scheduler will refuse
/// it (its DynamicResources filter counts the first gang's claims once they are allocated, and
/// a member sent elsewhere than its seat was refused at bind and nominated again).
#[test]
fn a_gathered_gangs_seats_hold_their_devices() {
    seats_hold_devices(false);
}

/// The same, with a pod already bound on n1 whose claim (2 GPUs) muster has not seen
/// allocated yet: n1 has room for one more member only.
#[test]
fn a_bound_pods_claim_holds_its_devices_before_its_allocation_is_seen() {
    seats_hold_devices(true);
}

fn seats_hold_devices(bound_first: bool) {
    use crate::model::inputs::devices::{
        AllocationMode, Claim, ClaimSource, ClaimSpec, PodClaim, Request,
    };
    const GPU: &str = "gpu.example.com";
    let mut w = World::new(&[node("n1", 4000), node("n2", 4000)]);
    // DeviceClass GPU and a node-local slice of 4 GPUs on each node.
    crate::model::tests::dra_devices(&mut w.table, &["n1", "n2"]);
    // Each member has a claim of its own for 2 of a node's 4 GPUs: two members per node.
    let member = |w: &mut World, name: &str, gang: &str| {
        let claim = format!("{name}-gpus");
        w.table.apply_resource_claim(
            (
                std::sync::Arc::from("ml"),
                std::sync::Arc::from(claim.as_str()),
            ),
            Claim {
                spec: ClaimSpec {
                    requests: vec![Request {
                        name: "gpus".into(),
                        class: GPU.into(),
                        mode: AllocationMode::Exact(2),
                        selectors: vec![],
                    }],
                    unsupported: None,
                },
                allocation: None,
            },
        );
        let mut p = gathered(pod(name).cpu(100).gang(gang, 2).build());
        if let Some(r) = p.rules.as_mut() {
            r.claims = vec![PodClaim {
                name: "gpu".into(),
                source: ClaimSource::Claim(claim.as_str().into()),
            }];
        }
        p
    };
    // Muster's claim watch may show an allocation after the pod's binding: a pod bound on n1
    // whose claim muster has not seen allocated holds its devices there all the same.
    if bound_first {
        let mut early = member(&mut w, "early", "g0");
        early.node_name = Some("n1".into());
        if let Some(r) = early.rules.as_mut() {
            r.scheduling_gates.clear();
        }
        w.add(&[&early]);
    }
    let ms = [
        member(&mut w, "a1", "g1"),
        member(&mut w, "a2", "g1"),
        member(&mut w, "b1", "g2"),
        member(&mut w, "b2", "g2"),
    ];
    w.add(&ms.iter().collect::<Vec<_>>());
    let plan = w.round();
    // 8 GPUs for 4 members of 2 each; with the bound pod's 2, room for 3: one gang only.
    let fit = if bound_first { 1 } else { 2 };
    assert_eq!(plan.releases.len(), fit, "{plan:?}");
    let mut per_node: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (p, n) in plan.releases.iter().flat_map(|r| &r.nominate) {
        per_node
            .entry(n.to_string())
            .or_default()
            .push(p.name.to_string());
    }
    for (n, on) in &per_node {
        let free = if bound_first && n == "n1" { 1 } else { 2 };
        assert!(
            on.len() <= free,
            "node {n} has room for {free} members of 2 GPUs, seats for {on:?}: {per_node:?}"
        );
    }
    if !bound_first {
        assert_eq!(per_node.len(), 2, "{per_node:?}");
    }
}

/// A gathered gang confined to one rack (`muster.dev/topology-required`) whose rack has room only
/// once a pod of lower priority there goes: muster looks at preemption for it as for a gang
/// short of room anywhere, and lets its quorum through without seats, so kube-scheduler's
/// preemption runs through muster's preempt verb, which keeps to one rack (evict-for-whole).
/// Before, a shortfall inside one domain counted as a rule preemption could not change, and the
/// gang stayed behind the gate forever.
#[test]
fn a_gathered_gang_held_to_one_rack_that_fits_only_by_preemption_is_let_through() {
    const RACK: &str = "topology.kubernetes.io/rack";
    let rack = |name: &str, r: &str| testkit::node(name).cpu(1000).label(RACK, r).build();
    let mut w = World::new(&[rack("a1", "a"), rack("a2", "a"), rack("b1", "b")]);
    let low = pod("low").cpu(1000).priority(0).bound("a1").build();
    let member = |n: &str| {
        gathered(
            pod(n)
                .cpu(1000)
                .priority(100)
                .gang("g", 2)
                .annotation("muster.dev/topology-required", RACK)
                .build(),
        )
    };
    let (a, b) = (member("a"), member("b"));
    w.add(&[&low, &a, &b]);
    let plan = w.round();
    assert_eq!(plan.releases.len(), 1, "{plan:?}");
    assert!(plan.releases[0].nominate.is_empty(), "{plan:?}");
    assert_eq!(plan.releases[0].ungate.len(), 2, "{plan:?}");
    assert_eq!(w.reserved("a1") + w.reserved("a2") + w.reserved("b1"), 0);
}

/// explained: a gathered gang of higher priority that would not fit even with every pod of
/// lower priority evicted hears so, once (its members are never let through, so the preempt
/// verb, which says it when every pod passes through muster, is never asked).
#[test]
fn a_gathered_gang_preemption_cannot_place_is_told_so_once() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let low = pod("low").cpu(1000).priority(0).bound("n1").build();
    let members: Vec<PodInfo> = ["a", "b", "c"]
        .iter()
        .map(|n| gathered(pod(n).cpu(1000).priority(100).gang("g", 3).build()))
        .collect();
    w.add(&[&low]);
    w.add(&members.iter().collect::<Vec<_>>());
    assert!(w.round().is_empty(), "nothing to let through");
    let said = |w: &mut World| {
        w.table
            .take_notices()
            .into_iter()
            .filter(|n| n.message.contains("preemption cannot help"))
            .count()
    };
    assert_eq!(said(&mut w), 3, "each member hears it");
    w.now += PREEMPTION_LOOK_EVERY;
    assert!(w.round().is_empty());
    assert_eq!(said(&mut w), 0, "told once, not at every look");
}

/// never-half and holds-nothing when a release's writes only partly land (one member's gate
/// removal refused, say throttled by API Priority and Fairness): the two members let through
/// reach bind and wait for the quorum; the member still behind the gate must be let through
/// in a later round, or the gang's seats would hold room for a gang that never completes.
#[test]
fn a_member_whose_gate_removal_failed_is_let_through_after_its_siblings_reached_bind() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000), node("n3", 1000)]);
    let m = ["a", "b", "c"].map(|n| gathered(pod(n).cpu(600).gang("g", 3).build()));
    w.add(&[&m[0], &m[1], &m[2]]);
    let plan = w.round();
    assert_eq!(plan.releases.len(), 1, "{plan:?}");
    // Every nomination written; only b's and c's gates removed.
    let r = &plan.releases[0];
    for (p, n) in &r.nominate {
        w.gatherer.nominated(&p.uid, Some(n.clone()), w.now, true);
    }
    let seat_of = |name: &str| {
        r.nominate
            .iter()
            .find(|(p, _)| &*p.name == name)
            .map(|(_, n)| n.to_string())
            .unwrap()
    };
    for u in r.ungate.iter().filter(|u| &*u.pod.name != "a") {
        w.gatherer.ungated(&u.pod.uid, w.now);
    }
    let a_node = seat_of("a");
    w.table
        .apply_pod(with_nomination(m[0].clone(), Some(&a_node)));
    for (i, name) in [(1, "b"), (2, "c")] {
        let node = seat_of(name);
        w.table.apply_pod(let_through(m[i].clone(), Some(&node)));
        let _ = bind(&mut w, &m[i], &node);
    }
    w.now += Duration::from_millis(100);
    let plan = w.round();
    let again: Vec<&str> = plan
        .releases
        .iter()
        .flat_map(|r| r.ungate.iter().map(|u| &*u.pod.name))
        .collect();
    assert_eq!(again, ["a"], "{plan:?}");
}

/// The watch shows the pod nominated to `node`, still gated.
fn with_nomination(mut p: PodInfo, node: Option<&str>) -> PodInfo {
    p.nominated_node = node.map(NodeName::from);
    p
}

/// A gathered gang preempting on two nodes keeps its hold while the victims terminate: both
/// nodes run a low-priority pod; the gang is let through for preemption, a's preemption on n1
/// is kept, and kube-scheduler nominates n1. The hold seats a on n1 (its victim terminating)
/// and plans b's room on n2, where the other low pod still runs (no seat: no-overcommit). The
/// next gather rounds must count b toward the quorum while the hold is live: before, they
/// unseated a, cleared the hold and told the members "seats released". The hold still ends
/// on its own terms (holds-nothing): a loses its nomination, and every seat goes.
#[test]
fn a_gathered_gang_keeps_its_preemption_hold_while_its_victims_terminate() {
    use crate::model::verbs::preempt::{PreemptCandidate, PreemptOutcome};
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let low1 = pod("low-1").cpu(1000).priority(0).bound("n1").build();
    let low2 = pod("low-2").cpu(1000).priority(0).bound("n2").build();
    let a = gathered(pod("a").cpu(1000).priority(100).gang("g", 2).build());
    let b = gathered(pod("b").cpu(1000).priority(100).gang("g", 2).build());
    w.add(&[&low1, &low2, &a, &b]);
    let plan = w.round();
    assert_eq!(
        plan.releases.len(),
        1,
        "let through for preemption: {plan:?}"
    );
    w.written(&plan);
    let (a, b) = (let_through(a, None), let_through(b, None));
    w.add(&[&a, &b]);
    let d = w.table.preempt(
        &a,
        vec![PreemptCandidate {
            node: "n1".into(),
            victims: vec![low1.uid.to_string()],
            pdb_violations: 0,
        }],
        w.now,
    );
    assert_eq!(d.outcome, PreemptOutcome::Kept);
    let low1 = PodInfo {
        terminating: true,
        ..low1
    };
    let a = PodInfo {
        nominated_node: Some(NodeName::from("n1")),
        ..a
    };
    w.add(&[&low1, &a]);
    let key = a.gang().unwrap().gang.clone();
    assert!(
        w.table.gangs[&key].preemption_hold().is_some(),
        "hold taken"
    );
    assert_eq!((w.reserved("n1"), w.reserved("n2")), (1000, 0));
    w.table.take_notices();
    for _ in 0..3 {
        w.now += Duration::from_millis(100);
        let plan = w.round();
        assert!(plan.releases.is_empty(), "{plan:?}");
        assert!(
            w.table.gangs[&key].preemption_hold().is_some(),
            "the hold survives a gather round while b's room is being freed"
        );
        assert_eq!(w.reserved("n1"), 1000, "a's seat on n1 is kept");
        let notices = w.table.take_notices();
        assert!(
            !notices.iter().any(|n| n.message.contains("seats released")),
            "{notices:?}"
        );
    }
    // b preempts low-2 on its planned node; once low-2 is gone the room is b's seat.
    let low2 = PodInfo {
        terminating: true,
        ..low2
    };
    w.add(&[&low2]);
    w.round();
    assert!(w.table.gangs[&key].preemption_hold().is_some());
    w.table.remove_pod(&low2.uid);
    w.round();
    assert_eq!((w.reserved("n1"), w.reserved("n2")), (1000, 1000));
    // The hold's end is the preemptor's: nominated nowhere, the gang holds nothing.
    let a = PodInfo {
        nominated_node: None,
        ..a
    };
    w.add(&[&a]);
    w.round();
    assert!(w.table.gangs[&key].preemption_hold().is_none());
    assert_eq!((w.reserved("n1"), w.reserved("n2")), (0, 0));
}

/// Holds-nothing under a hold: a gathered gang whose planned member is deleted while the
/// hold waits for its room is short, and every seat goes at once.
#[test]
fn a_gathered_gang_under_a_hold_whose_awaiting_member_is_deleted_holds_nothing() {
    use crate::model::verbs::preempt::{PreemptCandidate, PreemptOutcome};
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let low1 = pod("low-1").cpu(1000).priority(0).bound("n1").build();
    let low2 = pod("low-2").cpu(1000).priority(0).bound("n2").build();
    let a = gathered(pod("a").cpu(1000).priority(100).gang("g", 2).build());
    let b = gathered(pod("b").cpu(1000).priority(100).gang("g", 2).build());
    w.add(&[&low1, &low2, &a, &b]);
    let plan = w.round();
    w.written(&plan);
    let (a, b) = (let_through(a, None), let_through(b, None));
    w.add(&[&a, &b]);
    let d = w.table.preempt(
        &a,
        vec![PreemptCandidate {
            node: "n1".into(),
            victims: vec![low1.uid.to_string()],
            pdb_violations: 0,
        }],
        w.now,
    );
    assert_eq!(d.outcome, PreemptOutcome::Kept);
    let low1 = PodInfo {
        terminating: true,
        ..low1
    };
    let a = PodInfo {
        nominated_node: Some(NodeName::from("n1")),
        ..a
    };
    w.add(&[&low1, &a]);
    let key = a.gang().unwrap().gang.clone();
    assert!(w.table.gangs[&key].preemption_hold().is_some());
    w.table.remove_pod(&b.uid);
    w.round();
    assert_eq!(w.reserved("n1"), 0, "a's seat goes with the quorum short");
    assert!(w.table.gangs[&key].preemption_hold().is_none());
}

/// A placed gang's replacements are not held up by a member stuck on its way: the quorum is
/// bound, one replacement was let through and kube-scheduler found it unschedulable (its room
/// taken meanwhile), and a member without muster's gate (created unmarked) waits too; the next
/// gated replacement that fits elsewhere is let through. A member let through and not refused
/// holds the next one back, but only for IN_FLIGHT_WITHIN.
#[test]
fn a_stuck_member_does_not_block_a_placed_gangs_replacement_that_fits() {
    let mut w = World::new(&[node("n1", 2000), node("n2", 1000), node("n3", 1000)]);
    let members: Vec<PodInfo> = (0..4)
        .map(|i| gathered(pod(&format!("m{i}")).cpu(1000).gang("g", 2).build()))
        .collect();
    for m in &members[..2] {
        w.table.apply_pod(PodInfo {
            node_name: Some(NodeName::from("n1")),
            ..let_through(m.clone(), None)
        });
    }
    let unmarked = pod("m-unmarked").cpu(1000).gang("g", 2).build();
    w.add(&[&members[2], &unmarked]);
    assert_eq!(w.state("g"), "placed");
    let plan = w.round();
    assert_eq!(released_names(&plan).len(), 1, "{plan:?}");
    w.written(&plan);
    let (through, seat) = plan.releases[0].nominate[0].clone();
    assert_eq!(&*through.name, "m2");
    let m2 = let_through(members[2].clone(), Some(&seat));
    w.table.apply_pod(m2.clone());
    // The next replacement arrives while m2 is on its way: it waits.
    w.add(&[&members[3]]);
    w.now += Duration::from_secs(1);
    assert!(w.round().releases.is_empty(), "m2 is still on its way");
    // kube-scheduler refuses m2 (a plain pod took its room): the next one goes.
    w.table.apply_pod(PodInfo {
        unschedulable: Some("0/3 nodes are available: 3 Insufficient cpu.".into()),
        ..m2.clone()
    });
    w.now += Duration::from_secs(1);
    let plan = w.round();
    assert_eq!(
        plan.releases
            .iter()
            .flat_map(|r| r.ungate.iter().map(|u| u.pod.name.to_string()))
            .collect::<Vec<_>>(),
        ["m3"],
        "{plan:?}"
    );

    // Not refused, but pending past IN_FLIGHT_WITHIN: no longer counted as on its way.
    let mut w = World::new(&[node("n1", 2000), node("n2", 1000), node("n3", 1000)]);
    for m in &members[..2] {
        w.table.apply_pod(PodInfo {
            node_name: Some(NodeName::from("n1")),
            ..let_through(m.clone(), None)
        });
    }
    w.add(&[&members[2]]);
    let plan = w.round();
    w.written(&plan);
    let (_, seat) = plan.releases[0].nominate[0].clone();
    w.table
        .apply_pod(let_through(members[2].clone(), Some(&seat)));
    w.add(&[&members[3]]);
    w.now += IN_FLIGHT_WITHIN - Duration::from_secs(1);
    assert!(w.round().releases.is_empty(), "m2 is still on its way");
    w.now += Duration::from_secs(1);
    assert_eq!(w.round().releases.len(), 1, "m2 is stuck: m3 goes");
}

/// A release whose writes are in flight (the cluster side runs each as a task of its own):
/// rounds meanwhile plan nothing for its gang — not the same release again, nor a clear of the
/// nominations it is writing when the gang's seats go (never-half: a gate must not go without
/// its seat published) — while a second gang that fits is released; once the writes settled,
/// the gang is judged from what they did.
#[test]
fn a_gang_whose_writes_are_in_flight_is_left_alone_while_another_is_released() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000), node("n3", 1000)]);
    let a = gathered(pod("a").cpu(1000).gang("g", 2).build());
    let b = gathered(pod("b").cpu(1000).gang("g", 2).build());
    w.add(&[&a, &b]);
    let plan = w.round();
    assert_eq!(released_names(&plan).len(), 2, "{plan:?}");
    let g = plan.releases[0].gang.clone();
    let writing: Vec<PodUid> = vec![a.uid.clone(), b.uid.clone()];
    w.gatherer.writing(Some(&g), writing.clone());
    assert!(w.gatherer.is_writing(&a.uid));

    // Nothing written yet as far as the watch shows: without the in-flight mark the seated
    // gated members would be released again.
    let again = w.round();
    assert!(again.is_empty(), "planned again while in flight: {again:?}");

    // A second gang arrives and fits: released while the first one's writes are in flight.
    let c = gathered(pod("c").cpu(1000).gang("h", 1).build());
    w.add(&[&c]);
    let second = w.round();
    assert_eq!(released_names(&second), ["c@n3"], "{second:?}");
    assert_eq!(second.releases[0].gang, GangKey::new("ml", "h"));
    w.written(&second);

    // a's nomination lands (the watch shows it), then b is deleted: the gang is short, but
    // its seats and a's nomination are left to the release in flight.
    let a_nominated = PodInfo {
        nominated_node: Some(NodeName::from("n1")),
        ..a.clone()
    };
    w.add(&[&a_nominated]);
    w.table.remove_pod(&b.uid);
    let meanwhile = w.round();
    assert!(
        meanwhile.clear.is_empty() && meanwhile.releases.is_empty(),
        "{meanwhile:?}"
    );
    assert_eq!(w.state("g"), "admitted");

    // Settled: the gang is short, its seats go, and the nomination written for a (gated
    // still) is cleared (holds-nothing).
    w.gatherer
        .nominated(&a.uid, Some(NodeName::from("n1")), w.now, true);
    w.gatherer.settled(Some(&g), writing.iter());
    assert!(!w.gatherer.is_writing(&a.uid));
    let after = w.round();
    let cleared: Vec<&str> = after.clear.iter().map(|p| &*p.name).collect();
    assert_eq!(cleared, ["a"], "{after:?}");
    assert_eq!(w.reserved("n1") + w.reserved("n2"), 0);
}

/// A pod whose renomination or clear is in flight is not sent the same write again.
#[test]
fn a_nomination_in_flight_is_not_planned_again() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let a = gathered(pod("a").cpu(1000).gang("g", 2).build());
    let b = gathered(pod("b").cpu(1000).gang("g", 2).build());
    w.add(&[&a, &b]);
    let plan = w.round();
    w.written(&plan);
    // Both let through; kube-scheduler cleared a's nomination: written again.
    let seat_of = |p: &PodInfo| {
        plan.releases[0]
            .nominate
            .iter()
            .find(|(q, _)| q.uid == p.uid)
            .map(|(_, n)| n.to_string())
            .unwrap()
    };
    let b_seat = seat_of(&b);
    let (a, b) = (let_through(a, None), let_through(b, Some(&b_seat)));
    w.now += NOMINATION_SEEN_WITHIN;
    w.add(&[&a, &b]);
    let renominate = w.round().renominate;
    assert_eq!(renominate.len(), 1, "{renominate:?}");
    w.gatherer.writing(None, [a.uid.clone()]);
    let again = w.round();
    assert!(again.renominate.is_empty(), "{again:?}");
    w.gatherer.settled(None, [&a.uid]);
    assert_eq!(w.round().renominate.len(), 1, "tried again once settled");
}

/// The seat of a member let through is taken before kube-scheduler binds it there (a plain pod
/// it bound before it saw the nomination): the last look refuses that member's bind. The gang
/// is seated again around the seats kube-scheduler confirmed — the lost member on a node with
/// room, renominated there — and stays admitted: no seat of its siblings goes, nobody hears
/// "seats released", and the member's next bind there places the gang whole (never-half,
/// no-overcommit). Before, every seat went and the gang was gathered again from nothing.
#[test]
fn a_gathered_member_whose_seat_is_taken_is_seated_again_beside_its_gang() {
    let mut w = World::new(&[
        node("n1", 1000),
        node("n2", 1000),
        node("n3", 1000),
        node("n4", 1000),
    ]);
    let m = ["a", "b", "c"].map(|n| gathered(pod(n).cpu(600).gang("g", 3).build()));
    w.add(&[&m[0], &m[1], &m[2]]);
    let plan = w.round();
    w.written(&plan);
    let seats: Vec<(PodInfo, String)> = plan.releases[0]
        .nominate
        .iter()
        .map(|(p, n)| {
            let member = m.iter().find(|x| x.uid == p.uid).unwrap().clone();
            (member, n.to_string())
        })
        .collect();
    for (p, n) in &seats {
        w.table.apply_pod(let_through(p.clone(), Some(n)));
    }
    let [(a, a_node), (b, b_node), (c, c_node)] = <[_; 3]>::try_from(seats).unwrap();
    for (p, n) in [(&a, &a_node), (&b, &b_node)] {
        assert!(
            matches!(bind(&mut w, p, n), crate::model::BindDecision::Wait { .. }),
            "{} waits at bind",
            p.name
        );
    }
    // A plain pod takes c's room before kube-scheduler saw c's nomination.
    w.add(&[&pod("plain").cpu(500).bound(&c_node).build()]);
    match bind(&mut w, &c, &c_node) {
        crate::model::BindDecision::Reject(r) => {
            assert!(r.to_string().contains("has no room for pod ml/c"), "{r}")
        }
        other => panic!("c's bind must be refused, got {other:?}"),
    }
    w.table.take_notices();
    let plan = w.round();
    let spare: Vec<&str> = ["n1", "n2", "n3", "n4"]
        .into_iter()
        .filter(|n| ![&a_node, &b_node, &c_node].contains(&&n.to_string()))
        .collect();
    assert_eq!(
        plan.renominate,
        vec![(PodRef::of(&c), NodeName::from(spare[0]))],
        "c renominated to the node with room: {plan:?}"
    );
    assert!(
        plan.clear.is_empty() && plan.releases.is_empty(),
        "{plan:?}"
    );
    assert_eq!(w.state("g"), "admitted");
    let gang = &w.table.gangs[&GangKey::new("ml", "g")];
    assert!(gang
        .seat_of(&a.uid)
        .is_some_and(|s| s.confirmed && *s.node == *a_node));
    assert!(gang
        .seat_of(&b.uid)
        .is_some_and(|s| s.confirmed && *s.node == *b_node));
    let notices = w.table.take_notices();
    assert!(
        !notices.iter().any(|n| n.message.contains("seats released")),
        "{notices:?}"
    );
    // c was refused at bind, so it is back in kube-scheduler's queue: no retry is written.
    assert!(
        !notices.iter().any(|n| n.kind == NoticeKind::Retry),
        "{notices:?}"
    );
    w.written(&plan);
    w.table.apply_pod(let_through(c.clone(), Some(spare[0])));
    match bind(&mut w, &c, spare[0]) {
        crate::model::BindDecision::BindGang { members, .. } => {
            assert_eq!(members.len(), 3, "{members:?}")
        }
        other => panic!("the gang binds whole, got {other:?}"),
    }
}

/// The same, with no node that has room for the lost member: every seat goes, as before, and
/// the members hear why (holds-nothing).
#[test]
fn a_gathered_member_whose_seat_is_taken_with_no_room_elsewhere_releases_every_seat() {
    let (mut w, m) = three_let_through();
    let seat_of = |w: &World, p: &PodInfo| {
        w.table.gangs[&GangKey::new("ml", "g")]
            .seat_of(&p.uid)
            .unwrap()
            .node
            .to_string()
    };
    let nodes: Vec<String> = m.iter().map(|p| seat_of(&w, p)).collect();
    for i in 0..2 {
        assert!(matches!(
            bind(&mut w, &m[i], &nodes[i]),
            crate::model::BindDecision::Wait { .. }
        ));
    }
    w.add(&[&pod("plain").cpu(500).bound(&nodes[2]).build()]);
    assert!(matches!(
        bind(&mut w, &m[2], &nodes[2]),
        crate::model::BindDecision::Reject(_)
    ));
    w.round();
    assert_eq!(w.state("g"), "waiting");
    assert_eq!(w.reserved("n1") + w.reserved("n2") + w.reserved("n3"), 0);
    assert!(w
        .table
        .take_notices()
        .iter()
        .any(|n| n.message.contains("seats released")));
}

/// Planned again around a confirmed seat, a member is never seated where that seat's member
/// holds the same host port (NodePorts among the gang's own members): the planner judges the
/// members it places against each other, and every seat is then checked together. Here the node
/// with the most fitting room left is the confirmed member's own; the lost member goes
/// elsewhere or the gang holds nothing, never both on one node with one port (holds-nothing).
/// Found by the model check.
#[test]
fn a_member_planned_again_is_not_seated_beside_a_confirmed_sibling_with_its_host_port() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000), node("n3", 2000)]);
    let m = ["a", "b"].map(|n| gathered(pod(n).cpu(300).host_port(8080).gang("g", 2).build()));
    w.add(&[&m[0], &m[1]]);
    let plan = w.round();
    w.written(&plan);
    let seat = |w: &World, p: &PodInfo| {
        w.table.gangs[&GangKey::new("ml", "g")]
            .seat_of(&p.uid)
            .map(|s| s.node.to_string())
    };
    let (a_node, b_node) = (seat(&w, &m[0]).unwrap(), seat(&w, &m[1]).unwrap());
    assert_ne!(a_node, b_node, "NodePorts: one member per node");
    for p in &m {
        let n = seat(&w, p).unwrap();
        w.table.apply_pod(let_through(p.clone(), Some(&n)));
    }
    assert!(matches!(
        bind(&mut w, &m[0], &a_node),
        crate::model::BindDecision::Wait { .. }
    ));
    // b's room is taken; a's node keeps the most fitting room for b's CPU.
    w.add(&[&pod("plain").cpu(900).bound(&b_node).build()]);
    assert!(matches!(
        bind(&mut w, &m[1], &b_node),
        crate::model::BindDecision::Reject(_)
    ));
    w.round();
    assert_ne!(
        seat(&w, &m[1]).as_deref(),
        Some(a_node.as_str()),
        "b seated with a's host port on {a_node}"
    );
}

/// never-half across a job's restart, behind the gate: a JobSet restart's first new pod comes
/// while the old attempt's pods still run bound (JobSet's default `Recreate`). It is gathered,
/// not let through as a late member of a placed gang; an old attempt's pod still gated is
/// never let through; the new attempt is released whole once it exists and fits.
#[test]
fn a_restarted_jobs_new_pods_are_gathered_whole_while_the_old_attempts_pods_remain() {
    use crate::model::inputs::membership::JOBSET_RESTART_ATTEMPT;
    let of_attempt = |name: &str, attempt: &str| {
        gathered(
            pod(name)
                .cpu(1000)
                .gang("g", 2)
                .label(JOBSET_RESTART_ATTEMPT, attempt)
                .build(),
        )
    };
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000), node("n3", 1000)]);
    let old0 = let_through(of_attempt("old0", "0"), None);
    let mut old0_bound = old0.clone();
    old0_bound.node_name = Some(NodeName::from("n1"));
    let old1 = of_attempt("old1", "0"); // still gated when its job restarted
    w.add(&[&old0_bound, &old1]);

    let new0 = of_attempt("new0", "1");
    w.add(&[&new0]);
    let plan = w.round();
    assert!(plan.is_empty(), "nothing goes through: {plan:?}");
    assert_eq!(w.state("g"), "waiting");
    assert_eq!(w.reserved("n1") + w.reserved("n2") + w.reserved("n3"), 0);

    let new1 = of_attempt("new1", "1");
    w.add(&[&new1]);
    let plan = w.round();
    assert_eq!(plan.releases.len(), 1, "{plan:?}");
    let mut names = released_names(&plan);
    names.sort();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("new") && !n.ends_with("@n1")),
        "the new attempt, beside the old pod still on n1: {names:?}"
    );
}

/// The last look refuses a member because its node lost room, and that node also held a
/// confirmed seat of a sibling (both go: `replan_off`). Planned again, the seats confirmed
/// elsewhere stay exactly where their bind calls wait (only the lost ones move): moving a
/// confirmed seat leaves its held call waiting out `--bind-wait` on a seat it no longer has.
/// Seen in the benchmark: a gang of 15 waited 8 s with ten held calls on moved seats.
#[test]
fn seats_confirmed_elsewhere_stay_when_a_node_with_a_confirmed_seat_loses_room() {
    let mut w = World::new(&[
        node("n1", 1000),
        node("n2", 1000),
        node("n3", 1000),
        node("n4", 1000),
    ]);
    let m = ["a", "b", "c", "d"].map(|n| gathered(pod(n).cpu(500).gang("g", 4).build()));
    w.add(&[&m[0], &m[1], &m[2], &m[3]]);
    let plan = w.round();
    w.written(&plan);
    for (p, n) in &plan.releases[0].nominate {
        let member = m.iter().find(|x| x.uid == p.uid).unwrap();
        w.table.apply_pod(let_through(member.clone(), Some(n)));
    }
    let [a, b, c, d] = m;
    for (p, n) in [(&a, "n1"), (&b, "n1"), (&c, "n2")] {
        assert!(
            matches!(bind(&mut w, p, n), crate::model::BindDecision::Wait { .. }),
            "{} waits at bind on {n}",
            p.name
        );
    }
    w.add(&[&pod("plain").cpu(600).bound("n2").build()]);
    assert!(matches!(
        bind(&mut w, &d, "n2"),
        crate::model::BindDecision::Reject(_)
    ));
    w.table.take_released();
    let plan = w.round();
    assert_eq!(w.state("g"), "admitted", "{plan:?}");
    let gang = &w.table.gangs[&GangKey::new("ml", "g")];
    for p in [&a, &b] {
        let seat = gang.seat_of(&p.uid);
        assert!(
            seat.is_some_and(|s| s.confirmed && *s.node == *"n1"),
            "{}'s confirmed seat stays on n1: {seat:?} {plan:?}",
            p.name
        );
    }
}

/// A gathered gang binds at quorum only the members kube-scheduler holds (no-overcommit): `a`
/// waits at bind, its call ends unbound (kube-scheduler forgets its room, in which it may bind
/// a pod outside the gang before muster's watch shows it), then `b` and `c` arrive: that is no
/// quorum. `a`'s seat is planned again, its room still reserved and nominated, and `a` is bound
/// with the others when kube-scheduler sends it again. With `a`'s call still held, the same
/// arrivals bind all three.
#[test]
fn a_gathered_gang_binds_at_quorum_only_the_members_kube_scheduler_holds() {
    let seat_of = |w: &World, p: &PodInfo| {
        w.table.gangs[&GangKey::new("ml", "g")]
            .seat_of(&p.uid)
            .map(|s| (s.node.to_string(), s.confirmed))
            .unwrap()
    };
    for a_held in [false, true] {
        let (mut w, [a, b, c]) = three_let_through();
        let (a_node, b_node, c_node) = (seat_of(&w, &a).0, seat_of(&w, &b).0, seat_of(&w, &c).0);
        assert!(matches!(
            bind(&mut w, &a, &a_node),
            crate::model::BindDecision::Wait { .. }
        ));
        assert_eq!(seat_of(&w, &a), (a_node.clone(), true));
        if !a_held {
            call_ends(&mut w, &a);
        }
        assert!(matches!(
            bind(&mut w, &b, &b_node),
            crate::model::BindDecision::Wait { .. }
        ));
        let decision = bind(&mut w, &c, &c_node);
        if a_held {
            let crate::model::BindDecision::BindGang { members, .. } = decision else {
                panic!("a held: the gang binds whole, got {decision:?}");
            };
            assert_eq!(members.len(), 3, "{members:?}");
            continue;
        }
        assert!(
            matches!(decision, crate::model::BindDecision::Wait { .. }),
            "a's call ended: no quorum, got {decision:?}"
        );
        assert_eq!(
            seat_of(&w, &a),
            (a_node.clone(), false),
            "a's seat planned again"
        );
        assert_eq!(
            w.reserved(&a_node),
            600,
            "its room still reserved (one member per node)"
        );
        // kube-scheduler cleared `a`'s nomination with its failed binding cycle.
        w.table.apply_pod(let_through(a.clone(), None));
        let plan = w.round();
        assert!(
            plan.renominate
                .iter()
                .any(|(p, n)| p.uid == a.uid && **n == *a_node),
            "a's room is nominated again: {plan:?}"
        );
        // kube-scheduler sends `a` again while `b` and `c` are held: the quorum, bound whole.
        w.table.apply_pod(let_through(a.clone(), Some(&a_node)));
        let decision = bind(&mut w, &a, &a_node);
        let crate::model::BindDecision::BindGang { members, .. } = decision else {
            panic!("a sent again: the gang binds whole, got {decision:?}");
        };
        assert_eq!(members.len(), 3, "{members:?}");
    }
}

/// A member whose bind call is held on its confirmed seat is not nominated again while the
/// call is held (kube-scheduler has it assumed there; the write would race its binding, which
/// the API server then refuses), and is once the call ends unbound.
#[test]
fn a_member_held_at_bind_is_nominated_again_only_after_its_call_ends() {
    let (mut w, [a, _b, _c]) = three_let_through();
    let seat = w.table.gangs[&GangKey::new("ml", "g")]
        .seat_of(&a.uid)
        .unwrap()
        .node
        .to_string();
    assert!(matches!(
        bind(&mut w, &a, &seat),
        crate::model::BindDecision::Wait { .. }
    ));
    // kube-scheduler's nomination of `a` is not where its seat is (cleared, say).
    w.table.apply_pod(let_through(a.clone(), None));
    let plan = w.round();
    assert!(
        !plan.renominate.iter().any(|(p, _)| p.uid == a.uid),
        "{plan:?}"
    );
    call_ends(&mut w, &a);
    let plan = w.round();
    assert_eq!(
        plan.renominate,
        vec![(PodRef::of(&a), NodeName::from(seat.as_str()))],
        "{plan:?}"
    );
}

/// A gang with fewer members than its quorum cannot be let through, so it is planned (its
/// reason refreshed) at most once per INCOMPLETE_PLAN_EVERY, not in every round; the round in
/// which its last member is there plans it at once, and lets it through.
#[test]
fn a_gang_short_of_members_is_planned_once_a_second_and_at_once_when_whole() {
    let mut w = World::new(&[node("n1", 4000)]);
    let a = gathered(pod("a").gang("g", 3).build());
    w.add(&[&a]);
    assert!(w.round().is_empty());
    let first = w.waiting_reason("g").expect("a reason");
    assert!(first.contains("1 of 3 exist"), "{first}");
    // Another member, rounds within the second: the count is not planned again.
    let b = gathered(pod("b").gang("g", 3).build());
    w.add(&[&b]);
    w.advance(INCOMPLETE_PLAN_EVERY / 2);
    assert!(w.round().is_empty());
    assert_eq!(
        w.waiting_reason("g").as_deref(),
        Some(first.as_str()),
        "planned again within the second"
    );
    w.advance(INCOMPLETE_PLAN_EVERY / 2);
    assert!(w.round().is_empty());
    let second = w.waiting_reason("g").expect("a reason");
    assert!(second.contains("2 of 3 exist"), "{second}");
    // The last member, in the same instant: planned and let through in that round.
    let c = gathered(pod("c").gang("g", 3).build());
    w.add(&[&c]);
    let plan = w.round();
    assert_eq!(plan.releases.len(), 1, "{plan:?}");
    assert_eq!(plan.releases[0].ungate.len(), 3);
}

/// A gang whose live members are all bound is passed over by later rounds without a look at its
/// members, until a member joins: its replacement is gathered as before, and a gang created
/// again under the same key (a job submitted again after the first one was deleted) is too.
#[test]
fn a_bound_gang_is_looked_at_again_when_a_member_joins_even_under_a_key_used_before() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let bound = |p: &PodInfo, n: &str| PodInfo {
        node_name: Some(NodeName::from(n)),
        ..let_through(p.clone(), None)
    };
    let a = gathered(pod("a").cpu(1000).gang("g", 2).build());
    let b = gathered(pod("b").cpu(1000).gang("g", 2).build());
    w.table.apply_pod(bound(&a, "n1"));
    w.table.apply_pod(bound(&b, "n2"));
    assert!(w.round().is_empty());
    assert!(w.round().is_empty(), "passed over");
    // b is lost and replaced.
    w.table.remove_pod(&b.uid);
    let r = gathered(pod("r").cpu(1000).gang("g", 2).build());
    w.add(&[&r]);
    assert_eq!(released_names(&w.round()), ["r@n2"]);
    // The job is deleted whole and submitted again under the same key.
    w.table.remove_pod(&a.uid);
    w.table.remove_pod(&r.uid);
    w.advance(RELEASE_AGAIN_AFTER * 2);
    assert!(w.round().is_empty());
    let a2 = gathered(pod("a2").cpu(1000).gang("g", 2).build());
    let b2 = gathered(pod("b2").cpu(1000).gang("g", 2).build());
    w.add(&[&a2, &b2]);
    let plan = w.round();
    assert_eq!(plan.releases.len(), 1, "{plan:?}");
    assert_eq!(plan.releases[0].ungate.len(), 2);
}
