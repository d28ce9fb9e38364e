//! The preempt verb (evict-for-whole): its three cases, the running-gang rules, and filter's
//! "preemption cannot help". Priorities as in the e2e suite: low 100, high 100000.

use super::*;
use crate::model::inputs::membership::DISRUPTION;

const LOW: i32 = 100;
const HIGH: i32 = 100_000;

fn candidate(node: &str, victims: &[&PodInfo]) -> PreemptCandidate {
    PreemptCandidate {
        node: node.to_string(),
        victims: victims.iter().map(|p| p.uid.to_string()).collect(),
        pdb_violations: 0,
    }
}

fn kept_nodes(d: &PreemptDecision) -> Vec<&str> {
    d.kept.iter().map(|c| c.node.as_str()).collect()
}

/// Two 1-CPU nodes, each running a low-priority plain pod.
fn two_full_nodes() -> (World, PodInfo, PodInfo) {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let a = pod("a").cpu(1000).priority(LOW).bound("n1").build();
    let b = pod("b").cpu(1000).priority(LOW).bound("n2").build();
    w.add(&[&a, &b]);
    (w, a, b)
}

/// A low-priority gang of two running on n1 and n2, and a low plain pod on n3.
fn running_gang(mode: &str) -> (World, Vec<PodInfo>, PodInfo) {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000), node("n3", 1000)]);
    let members: Vec<PodInfo> = (0..2)
        .map(|i| {
            pod(&format!("run-{i}"))
                .cpu(1000)
                .priority(LOW)
                .gang("run", 2)
                .annotation(DISRUPTION, mode)
                .bound(&format!("n{}", i + 1))
                .build()
        })
        .collect();
    let plain = pod("plain").cpu(1000).priority(LOW).bound("n3").build();
    w.add(&[&members[0], &members[1], &plain]);
    (w, members, plain)
}

#[test]
fn case_1_a_gang_that_cannot_run_even_after_evictions_evicts_nothing() {
    let (mut w, a, b) = two_full_nodes();
    let gang: Vec<PodInfo> = (0..3)
        .map(|i| {
            pod(&format!("g-{i}"))
                .cpu(1000)
                .priority(HIGH)
                .gang("g", 3)
                .build()
        })
        .collect();
    w.add(&gang.iter().collect::<Vec<_>>());
    let d = w.preempt(
        &gang[0],
        vec![candidate("n1", &[&a]), candidate("n2", &[&b])],
    );
    assert_eq!(d.outcome, PreemptOutcome::Refused);
    assert!(d.kept.is_empty());
    assert_eq!(
        d.dropped[0].1,
        DropReason::GangCannotFollow { fit: 2, quorum: 3 }
    );
    // Filter already says so, as unresolvable: kube-scheduler does not even try.
    let names = w.all_nodes();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let verdicts = w.table.filter(&gang[0], &refs, w.now);
    for v in verdicts {
        match v {
            NodeVerdict::Unresolvable(r) => assert!(
                r.contains("of 3 members fit") && r.contains("preemption cannot help"),
                "{r}"
            ),
            other => panic!("expected unresolvable, got {other:?}"),
        }
    }
    let told = w.table.take_notices();
    assert!(told
        .iter()
        .any(|n| n.kind == NoticeKind::Preempting && n.message.contains("evicts nothing")));
}

#[test]
fn case_2_a_plain_victim_is_chosen_over_a_member_of_a_running_gang() {
    let (mut w, members, plain) = running_gang("gang");
    let high = pod("high").cpu(1000).priority(HIGH).build();
    w.add(&[&high]);
    let d = w.preempt(
        &high,
        vec![
            candidate("n1", &[&members[0]]),
            candidate("n2", &[&members[1]]),
            candidate("n3", &[&plain]),
        ],
    );
    assert_eq!(kept_nodes(&d), vec!["n3"]);
    assert_eq!(d.kept[0].victims, vec![plain.uid.to_string()]);
    assert_eq!(d.outcome, PreemptOutcome::Trimmed);
    assert!(d.disruptions.is_empty());
    assert!(d.dropped.iter().all(|(_, r)| matches!(
        r,
        DropReason::RunningGangVictim { gang } if &*gang.name == "run"
    )));
}

/// kube-scheduler re-queues a preemptor as soon as its victims' deletions are sent; its next
/// cycle can run before its cache shows them terminating, so `PodEligibleToPreemptOthers`
/// (defaultpreemption) lets it preempt again, now offering only the gang's nodes. muster
/// refuses that second round while the first one's victims are still there, so the running gang
/// is not evicted for a pod whose room is already being freed (evict-for-whole); once they are
/// gone, a new round is judged as any other.
#[test]
fn a_second_round_while_the_first_preemption_is_under_way_disrupts_no_gang() {
    let (mut w, members, plain) = running_gang("gang");
    let high = pod("high").cpu(1000).priority(HIGH).build();
    w.add(&[&high]);
    let first = w.preempt(
        &high,
        vec![
            candidate("n1", &[&members[0]]),
            candidate("n2", &[&members[1]]),
            candidate("n3", &[&plain]),
        ],
    );
    assert_eq!(kept_nodes(&first), vec!["n3"]);

    let second = w.preempt(
        &high,
        vec![
            candidate("n1", &[&members[0]]),
            candidate("n2", &[&members[1]]),
        ],
    );
    assert!(second.kept.is_empty(), "{second:?}");
    assert!(second.disruptions.is_empty(), "{second:?}");
    assert!(
        second.dropped.iter().all(|(_, r)| matches!(
            r,
            DropReason::PreemptionUnderWay { nodes } if nodes == &["n3"]
        )),
        "{second:?}"
    );

    // The victim is being deleted: still under way, as kube-scheduler reads a terminating pod.
    w.add(&[&terminating(&plain)]);
    let third = w.preempt(&high, vec![candidate("n1", &[&members[0]])]);
    assert!(third.kept.is_empty(), "{third:?}");

    // Gone (kube-scheduler's cache may still show it running): the room it freed waits for
    // the preemptor, so the round is still under way.
    w.table.remove_pod(&plain.uid);
    let fourth = w.preempt(&high, vec![candidate("n1", &[&members[0]])]);
    assert!(fourth.kept.is_empty(), "{fourth:?}");

    // Another pod took that room: the earlier round is over, and the next is judged on its own.
    let other = pod("other").cpu(1000).priority(LOW).bound("n3").build();
    w.add(&[&other]);
    let fifth = w.preempt(&high, vec![candidate("n1", &[&members[0]])]);
    assert_eq!(kept_nodes(&fifth), vec!["n1"], "{fifth:?}");
    assert!(!fifth.disruptions.is_empty(), "{fifth:?}");
}

/// Several plain candidates kept: kube-scheduler acts on one of them by its own order, not
/// necessarily the first. Every kept node counts as under way (a retry on the node it picked
/// is judged, not refused while the first candidate's victims run), no other node does; once
/// the watch shows which candidate it acted on (a victim being deleted), only that one
/// (`PodEligibleToPreemptOthers`, defaultpreemption).
#[test]
fn every_kept_candidate_is_under_way_until_kube_scheduler_acts_on_one() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000), node("n3", 1000)]);
    let a = pod("a").cpu(1000).priority(LOW).bound("n1").build();
    let b = pod("b").cpu(1000).priority(LOW).bound("n2").build();
    let c = pod("c").cpu(1000).priority(LOW).bound("n3").build();
    let high = pod("high").cpu(1000).priority(HIGH).build();
    w.add(&[&a, &b, &c, &high]);
    let first = w.preempt(&high, vec![candidate("n1", &[&a]), candidate("n2", &[&b])]);
    assert_eq!(kept_nodes(&first), vec!["n1", "n2"]);

    // kube-scheduler picked n2; its next cycle proposes n2 again before its cache caught up.
    let retry = w.preempt(&high, vec![candidate("n2", &[&b])]);
    assert_eq!(kept_nodes(&retry), vec!["n2"], "{retry:?}");
    let elsewhere = w.preempt(&high, vec![candidate("n3", &[&c])]);
    assert!(elsewhere.kept.is_empty(), "{elsewhere:?}");
    assert!(
        matches!(
            elsewhere.dropped.as_slice(),
            [(n, DropReason::PreemptionUnderWay { nodes })] if n == "n3" && nodes == &["n2"]
        ),
        "{elsewhere:?}"
    );

    // Both kept again; the watch shows b being deleted: n2 is the one under way.
    w.preempt(&high, vec![candidate("n1", &[&a]), candidate("n2", &[&b])]);
    w.add(&[&terminating(&b)]);
    let other = w.preempt(&high, vec![candidate("n1", &[&a])]);
    assert!(other.kept.is_empty(), "{other:?}");
    assert!(
        matches!(
            other.dropped.as_slice(),
            [(_, DropReason::PreemptionUnderWay { nodes })] if nodes == &["n2"]
        ),
        "{other:?}"
    );
    // b is gone and another pod took its room: that preemption is over, whatever still runs
    // on n1.
    w.table.remove_pod(&b.uid);
    let other = pod("other").cpu(1000).priority(LOW).bound("n2").build();
    w.add(&[&other]);
    let next = w.preempt(&high, vec![candidate("n1", &[&a])]);
    assert_eq!(kept_nodes(&next), vec!["n1"], "{next:?}");
}

/// The victims were deleted without grace: gone from the watch at once, while
/// kube-scheduler's cache may still show them running, so its next cycle preempts again
/// elsewhere (a running gang there would be evicted for a pod whose room is already free).
/// While that room waits for the preemptor, the round stays under way (evict-for-whole,
/// `PodEligibleToPreemptOthers` judged on a stale cache).
#[test]
fn a_second_round_after_the_victims_vanished_is_refused_while_their_room_waits() {
    let (mut w, members, plain) = running_gang("gang");
    let high = pod("high").cpu(1000).priority(HIGH).build();
    w.add(&[&high]);
    let first = w.preempt(&high, vec![candidate("n3", &[&plain])]);
    assert_eq!(kept_nodes(&first), vec!["n3"]);
    w.table.remove_pod(&plain.uid);
    let second = w.preempt(&high, vec![candidate("n1", &[&members[0]])]);
    assert!(second.kept.is_empty(), "{second:?}");
    assert!(second.disruptions.is_empty(), "{second:?}");
    assert!(
        matches!(
            second.dropped.as_slice(),
            [(_, DropReason::PreemptionUnderWay { nodes })] if nodes == &["n3"]
        ),
        "{second:?}"
    );
}

#[test]
fn case_3_a_gang_that_fits_once_both_nodes_are_freed_keeps_every_candidate() {
    let (mut w, a, b) = two_full_nodes();
    let gang: Vec<PodInfo> = (0..2)
        .map(|i| {
            pod(&format!("g-{i}"))
                .cpu(1000)
                .priority(HIGH)
                .gang("g", 2)
                .build()
        })
        .collect();
    w.add(&gang.iter().collect::<Vec<_>>());
    // Filter leaves the nodes resolvable, so kube-scheduler may preempt.
    let names = w.all_nodes();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    assert!(w
        .table
        .filter(&gang[0], &refs, w.now)
        .iter()
        .all(|v| matches!(v, NodeVerdict::Unschedulable(_))));
    let d = w.preempt(
        &gang[0],
        vec![candidate("n1", &[&a]), candidate("n2", &[&b])],
    );
    assert_eq!(d.outcome, PreemptOutcome::Kept);
    assert_eq!(kept_nodes(&d), vec!["n1", "n2"]);
}

#[test]
fn only_lower_priority_pods_count_as_evictable_for_the_rest_of_the_gang() {
    // n2 runs a pod as important as the gang: evicting a on n1 frees room for one member only.
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let a = pod("a").cpu(1000).priority(LOW).bound("n1").build();
    let peer = pod("peer").cpu(1000).priority(HIGH).bound("n2").build();
    let gang: Vec<PodInfo> = (0..2)
        .map(|i| {
            pod(&format!("g-{i}"))
                .cpu(1000)
                .priority(HIGH)
                .gang("g", 2)
                .build()
        })
        .collect();
    w.add(&[&a, &peer, &gang[0], &gang[1]]);
    let d = w.preempt(&gang[0], vec![candidate("n1", &[&a])]);
    assert_eq!(d.outcome, PreemptOutcome::Refused);
}

#[test]
fn a_gang_is_never_disrupted_by_a_preemptor_of_equal_priority() {
    let (mut w, members, _) = running_gang("gang");
    let peer = pod("peer").cpu(1000).priority(LOW).build();
    w.add(&[&peer]);
    let d = w.preempt(
        &peer,
        vec![
            candidate("n1", &[&members[0]]),
            candidate("n2", &[&members[1]]),
        ],
    );
    assert_eq!(d.outcome, PreemptOutcome::Refused);
    // Each victim's own priority, as cached, is judged first (rule 0).
    assert!(matches!(
        d.dropped[0].1,
        DropReason::VictimNotLowerPriority { priority: LOW, .. }
    ));
}

#[test]
fn with_only_gang_victims_a_gang_in_gang_mode_is_disrupted_whole() {
    let (mut w, members, _) = running_gang("gang");
    let high = pod("high").cpu(1000).priority(HIGH).build();
    w.add(&[&high]);
    let d = w.preempt(
        &high,
        vec![
            candidate("n1", &[&members[0]]),
            candidate("n2", &[&members[1]]),
        ],
    );
    assert_eq!(d.outcome, PreemptOutcome::Trimmed);
    // One node kept, so muster knows which gang it disrupts.
    assert_eq!(kept_nodes(&d), vec!["n1"]);
    assert_eq!(d.disruptions.len(), 1);
    let others: Vec<&str> = d.disruptions[0].others.iter().map(|p| &*p.name).collect();
    assert_eq!(others, vec!["run-1"]);
    // Nothing is evicted, and no member told, before kube-scheduler commits.
    assert!(w.table.take_disruptions().is_empty());
    assert!(disrupted_notices(&mut w).is_empty());
    // kube-scheduler evicts its victim on n1: the watch shows its deletionTimestamp.
    w.add(&[&terminating(&members[0])]);
    let evict = w.table.take_disruptions();
    assert_eq!(
        evict, d.disruptions,
        "committed: the rest of the gang is evicted"
    );
    let told = disrupted_notices(&mut w);
    assert_eq!(told.len(), 2, "every member hears it");
    assert!(told[0].message.contains("pod ml/high (priority 100000)"));
}

fn terminating(p: &PodInfo) -> PodInfo {
    let mut p = p.clone();
    p.terminating = true;
    p
}

fn disrupted_notices(w: &mut World) -> Vec<Notice> {
    w.table
        .take_notices()
        .into_iter()
        .filter(|n| n.kind == NoticeKind::Disrupted)
        .collect()
}

/// A gang disrupted whole, decided: the preemptor `high` kept on n1 with victim run-0.
fn disruption_decided() -> (World, Vec<PodInfo>, PodInfo) {
    let (mut w, members, _) = running_gang("gang");
    let high = pod("high").cpu(1000).priority(HIGH).build();
    w.add(&[&high]);
    let d = w.preempt(&high, vec![candidate("n1", &[&members[0]])]);
    assert_eq!(kept_nodes(&d), vec!["n1"]);
    assert_eq!(d.disruptions.len(), 1);
    assert_eq!(w.table.pending_disruptions(), 1);
    (w, members, high)
}

/// evict-for-whole: kube-scheduler nominating the preemptor to the chosen node commits it.
#[test]
fn the_rest_of_a_gang_is_evicted_once_the_preemptor_is_nominated_to_the_chosen_node() {
    let (mut w, _, high) = disruption_decided();
    let mut elsewhere = high.clone();
    elsewhere.nominated_node = Some("n3".into());
    w.add(&[&elsewhere]);
    assert!(
        w.table.take_disruptions().is_empty(),
        "another node: not this preemption"
    );
    let mut nominated = high.clone();
    nominated.nominated_node = Some("n1".into());
    w.add(&[&nominated]);
    let evict = w.table.take_disruptions();
    assert_eq!(evict.len(), 1);
    assert_eq!(&*evict[0].others[0].name, "run-1");
    assert_eq!(w.table.pending_disruptions(), 0);
}

/// evict-for-whole: a victim deleted outright (no deletionTimestamp seen) commits it too.
#[test]
fn the_rest_of_a_gang_is_evicted_once_a_victim_is_gone() {
    let (mut w, members, _) = disruption_decided();
    w.table.remove_pod(&members[0].uid);
    assert_eq!(w.table.take_disruptions().len(), 1);
}

/// evict-for-whole: kube-scheduler never acts on the answer (its API calls failed, another
/// pod took the node): nothing of the running gang is ever evicted, and the pending
/// disruption is forgotten after the commit wait.
#[test]
fn no_eviction_before_kube_scheduler_commits_and_none_if_it_never_does() {
    let (mut w, members, _) = disruption_decided();
    // Unrelated changes to the gang's members and other pods commit nothing.
    w.add(&[&members[1]]);
    let other = pod("other").cpu(100).priority(LOW).bound("n3").build();
    w.add(&[&other]);
    w.table.remove_pod(&other.uid);
    assert!(w.table.take_disruptions().is_empty());
    assert!(disrupted_notices(&mut w).is_empty());
    w.advance(crate::model::verbs::preempt::commit::COMMIT_WAIT);
    w.table.expire(w.now);
    assert_eq!(w.table.pending_disruptions(), 0, "forgotten");
    w.add(&[&terminating(&members[0])]);
    assert!(
        w.table.take_disruptions().is_empty(),
        "too late to count as this preemption"
    );
}

/// derived: the priority in the request counts for nothing; the cached one is judged. A low
/// pod claiming a high priority evicts nothing of a running gang of its own priority.
#[test]
fn a_forged_priority_in_the_request_is_not_believed() {
    let (mut w, members, _) = running_gang("gang");
    let low = pod("low").cpu(1000).priority(LOW).build();
    w.add(&[&low]);
    let mut forged = low.clone();
    forged.priority = HIGH;
    let d = w.preempt(&forged, vec![candidate("n1", &[&members[0]])]);
    assert_eq!(d.outcome, PreemptOutcome::Refused);
    assert!(matches!(
        d.dropped[0].1,
        DropReason::VictimNotLowerPriority { priority: LOW, .. }
    ));
    assert_eq!(w.table.pending_disruptions(), 0);
}

/// derived: a victim is judged where muster's cache has it; a candidate naming a victim on
/// another node, or a pod muster does not know, is dropped.
#[test]
fn a_victim_not_on_its_candidate_node_drops_the_candidate() {
    let (mut w, members, plain) = running_gang("gang");
    let high = pod("high").cpu(1000).priority(HIGH).build();
    w.add(&[&high]);
    let mut unknown = candidate("n3", &[]);
    unknown.victims.push("uid-nobody".into());
    let d = w.preempt(
        &high,
        vec![
            candidate("n1", &[&members[1]]),
            unknown,
            candidate("n3", &[&plain]),
        ],
    );
    assert_eq!(kept_nodes(&d), vec!["n3"]);
    assert!(matches!(
        &d.dropped[0],
        (n, DropReason::VictimNotOnNode { victim, on: Some(on) })
            if n == "n1" && victim == "ml/run-1" && on == "n2"
    ));
    assert!(matches!(
        &d.dropped[1],
        (_, DropReason::VictimNotOnNode { on: None, .. })
    ));
}

/// derived: a preemptor the watch has not delivered is judged by nothing in the request:
/// nothing is evicted, and it is asked to retry once the watch has it.
#[test]
fn a_preemptor_the_watch_has_not_delivered_evicts_nothing() {
    let (mut w, _, plain) = running_gang("gang");
    let high = pod("high").cpu(1000).priority(HIGH).build();
    let d = w.preempt(&high, vec![candidate("n3", &[&plain])]);
    assert_eq!(d.outcome, PreemptOutcome::Refused);
    assert!(matches!(d.dropped[0].1, DropReason::NotSeenYet));
    w.table.take_notices();
    w.add(&[&high]);
    let retry: Vec<Notice> = w
        .table
        .take_notices()
        .into_iter()
        .filter(|n| n.kind == NoticeKind::Retry)
        .collect();
    assert_eq!(retry.len(), 1, "asked to retry once seen");
}

#[test]
fn a_gang_in_pod_mode_loses_the_proposed_victim_only() {
    let (mut w, members, _) = running_gang("pod");
    let high = pod("high").cpu(1000).priority(HIGH).build();
    w.add(&[&high]);
    let d = w.preempt(
        &high,
        vec![
            candidate("n1", &[&members[0]]),
            candidate("n2", &[&members[1]]),
        ],
    );
    assert_eq!(kept_nodes(&d), vec!["n1"]);
    assert_eq!(d.kept[0].victims, vec![members[0].uid.to_string()]);
    assert!(d.disruptions.is_empty());
}

#[test]
fn a_whole_gang_disruption_adds_its_members_on_the_same_node_to_the_victims() {
    let mut w = World::new(&[node("n1", 2000), node("n2", 1000)]);
    let members: Vec<PodInfo> = ["n1", "n1", "n2"]
        .iter()
        .enumerate()
        .map(|(i, n)| {
            pod(&format!("run-{i}"))
                .cpu(1000)
                .priority(LOW)
                .gang("run", 3)
                .bound(n)
                .build()
        })
        .collect();
    w.add(&members.iter().collect::<Vec<_>>());
    let high = pod("high").cpu(1000).priority(HIGH).build();
    w.add(&[&high]);
    let d = w.preempt(&high, vec![candidate("n1", &[&members[0]])]);
    let mut victims = d.kept[0].victims.clone();
    victims.sort();
    assert_eq!(victims, vec!["uid-run-0", "uid-run-1"]);
    let others: Vec<&str> = d.disruptions[0].others.iter().map(|p| &*p.name).collect();
    assert_eq!(others, vec!["run-2"]);
}

/// The case-1 race of the end-to-end suite: with every node full, kube-scheduler calls preempt
/// before the extender's filter, often before muster's watch has delivered the pod. Judged
/// then, the gang was unknown and every candidate kept: two pods evicted for a gang that can
/// never run.
#[test]
fn a_member_the_watch_has_not_delivered_evicts_nothing_and_is_retried_once_seen() {
    let (mut w, a, b) = two_full_nodes();
    let gang: Vec<PodInfo> = (0..3)
        .map(|i| {
            pod(&format!("g-{i}"))
                .cpu(1000)
                .priority(HIGH)
                .gang("g", 3)
                .build()
        })
        .collect();
    let candidates = || vec![candidate("n1", &[&a]), candidate("n2", &[&b])];
    let d = w.preempt(&gang[0], candidates());
    assert_eq!(d.outcome, PreemptOutcome::Refused);
    assert!(d.dropped.iter().all(|(_, r)| *r == DropReason::NotSeenYet));
    let told = w.table.take_notices();
    assert!(told.iter().any(|n| n.kind == NoticeKind::Preempting
        && n.message.contains("evicts nothing")
        && n.message.contains("has not seen this pod yet")));

    // The watch delivers the first member: it is asked to retry, and judged for what it is.
    w.add(&[&gang[0]]);
    let told = w.table.take_notices();
    assert!(told
        .iter()
        .any(|n| n.kind == NoticeKind::Retry && &*n.pod.name == "g-0"));
    let d = w.preempt(&gang[0], candidates());
    assert_eq!(d.outcome, PreemptOutcome::Refused);
    assert_eq!(
        d.dropped[0].1,
        DropReason::GangCannotFollow { fit: 2, quorum: 3 }
    );
    assert!(
        w.table
            .take_notices()
            .iter()
            .all(|n| n.kind != NoticeKind::Retry),
        "asked to retry once"
    );
}

/// A gang whose members declare no count: its quorum is every member that exists, decided when
/// its creation window closes. Before that, preemption evicts nothing; after, the member is
/// asked to retry and the gang is judged.
#[test]
fn a_gang_whose_quorum_is_not_decided_yet_evicts_nothing_until_it_is() {
    use crate::model::inputs::membership::GROUP;
    let (mut w, a, b) = two_full_nodes();
    let gang: Vec<PodInfo> = (0..2)
        .map(|i| {
            pod(&format!("u-{i}"))
                .cpu(1000)
                .priority(HIGH)
                .annotation(GROUP, "u")
                .build()
        })
        .collect();
    w.add(&gang.iter().collect::<Vec<_>>());
    let candidates = || vec![candidate("n1", &[&a]), candidate("n2", &[&b])];
    let d = w.preempt(&gang[0], candidates());
    assert_eq!(d.outcome, PreemptOutcome::Refused);
    assert_eq!(d.dropped[0].1, DropReason::QuorumUndecided { existing: 2 });
    w.table.take_notices();

    w.advance(Duration::from_secs(6));
    w.table.expire(w.now);
    assert!(w
        .table
        .take_notices()
        .iter()
        .any(|n| n.kind == NoticeKind::Retry && &*n.pod.name == "u-0"));
    let d = w.preempt(&gang[0], candidates());
    assert_eq!(d.outcome, PreemptOutcome::Kept, "{:?}", d.dropped);
}

/// InterPodAffinity: two members that repel each other per node need two nodes. One 2-CPU
/// node running a low-priority 2-CPU pod has room for both once it is evicted, but only one may
/// run there: evicting it lets no gang run. (The resource check alone kept the candidate.)
#[test]
fn a_gang_whose_members_repel_each_other_per_node_evicts_nothing() {
    use crate::model::rules::fixtures::{term, PodRulesBuilder, HOSTNAME};
    let n1 = crate::testkit::node("n1")
        .cpu(2000)
        .label(HOSTNAME, "n1")
        .build();
    let mut w = World::new(&[n1]);
    let low = pod("low").cpu(2000).priority(LOW).bound("n1").build();
    let gang: Vec<PodInfo> = (0..2)
        .map(|i| {
            PodRulesBuilder::default()
                .anti_affinity(term(&[("job", "train")], HOSTNAME))
                .on(pod(&format!("w{i}"))
                    .cpu(1000)
                    .priority(HIGH)
                    .label("job", "train")
                    .gang("train", 2)
                    .build())
        })
        .collect();
    w.add(&[&low, &gang[0], &gang[1]]);
    let d = w.preempt(&gang[0], vec![candidate("n1", &[&low])]);
    assert_eq!(d.outcome, PreemptOutcome::Refused);
    assert_eq!(
        d.dropped[0].1,
        DropReason::GangCannotFollow { fit: 1, quorum: 2 }
    );
    // Filter says so first, as unresolvable: kube-scheduler does not even try.
    let verdicts = w.table.filter(&gang[0], &["n1"], w.now);
    assert!(
        matches!(&verdicts[0], NodeVerdict::Unresolvable(r) if r.contains("preemption cannot help")),
        "{verdicts:?}"
    );
}

/// Per-task minimums in the preempt decision: the rest of the gang must include its master.
/// Another worker would fit in the room evictions free, the master (2 CPUs) on no 1-CPU node:
/// choosing members as if they were interchangeable would evict both pods for nothing.
#[test]
fn a_gang_whose_short_task_cannot_follow_evicts_nothing_though_another_member_could() {
    use crate::model::inputs::membership::{TASK, TASK_MIN_AVAILABLE};
    let (mut w, a, b) = two_full_nodes();
    let member = |name: &str, task: &str, cpu: i64| {
        pod(name)
            .cpu(cpu)
            .priority(HIGH)
            .gang("job", 2)
            .annotation(TASK, task)
            .annotation(TASK_MIN_AVAILABLE, "master=1,worker=1")
            .build()
    };
    let (w0, w1, master) = (
        member("w-0", "worker", 1000),
        member("w-1", "worker", 1000),
        member("master", "master", 2000),
    );
    w.add(&[&w0, &w1, &master]);
    let d = w.preempt(&w0, vec![candidate("n1", &[&a]), candidate("n2", &[&b])]);
    assert!(kept_nodes(&d).is_empty(), "{d:?}");
    assert_eq!(d.outcome, PreemptOutcome::Refused);
}

/// A gang of two preempts on two full nodes; its first member preempts before the watch has
/// delivered the second, so the plan names a member not created yet. The second member,
/// delivered then, preempting before kube-scheduler's nomination of the first reaches the
/// watch, keeps its candidate on the node that plan puts a member on: refused, it would wait
/// for a retry no cluster event brings while the first victim terminates (kube-scheduler
/// requeues a pod NodeResourcesFit rejected when a pod is deleted, not when it starts
/// terminating).
#[test]
fn a_member_delivered_after_its_siblings_preemption_may_preempt_where_the_plan_put_a_member_to_come(
) {
    let (mut w, a, b) = two_full_nodes();
    let first = pod("g-0").cpu(1000).priority(HIGH).gang("g", 2).build();
    let second = pod("g-1").cpu(1000).priority(HIGH).gang("g", 2).build();
    w.add(&[&first]);
    let d = w.preempt(&first, vec![candidate("n1", &[&a]), candidate("n2", &[&b])]);
    assert_eq!(kept_nodes(&d), vec!["n1", "n2"]);
    w.add(&[&second]);
    // kube-scheduler chose n1 for the first member: its dry run for the second counts that
    // nomination and proposes n2 only.
    let d = w.preempt(&second, vec![candidate("n2", &[&b])]);
    assert_eq!(kept_nodes(&d), vec!["n2"], "dropped: {:?}", d.dropped);
}
