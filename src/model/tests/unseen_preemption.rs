//! A running gang member preempted by kube-scheduler without muster's say (muster away, or its
//! answer to the `ignorable` preempt-only entry late): the rest of the gang is evicted
//! (evict-for-whole), read from synced caches, once; never in disruption mode `pod`.

use super::*;
use crate::model::inputs::membership::DISRUPTION;

/// A gang `run` of three, mode `mode`, running on n1..n3.
fn running_gang_of_three(mode: &str) -> (World, Vec<PodInfo>) {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000), node("n3", 1000)]);
    let members: Vec<PodInfo> = (0..3)
        .map(|i| {
            pod(&format!("run-{i}"))
                .cpu(1000)
                .gang("run", 3)
                .annotation(DISRUPTION, mode)
                .bound(&format!("n{}", i + 1))
                .build()
        })
        .collect();
    w.add(&members.iter().collect::<Vec<_>>());
    (w, members)
}

/// kube-scheduler's preemption of `p`: `DisruptionTarget` (PreemptionByScheduler), then the
/// deletion.
fn preempted(p: &PodInfo) -> PodInfo {
    let mut p = p.clone();
    p.preempted_by_scheduler = true;
    p.terminating = true;
    p
}

fn evicted_names(d: &[crate::model::table::disruptions::GangDisruption]) -> Vec<Vec<String>> {
    d.iter()
        .map(|d| d.others.iter().map(|p| p.name.to_string()).collect())
        .collect()
}

#[test]
fn a_member_preempted_without_muster_gets_the_rest_of_its_gang_evicted() {
    let (mut w, ms) = running_gang_of_three("gang");
    w.add(&[&preempted(&ms[1])]);
    w.table.disrupt_for_unseen_preemptions();
    let d = w.table.take_disruptions();
    assert_eq!(evicted_names(&d), vec![vec!["run-0", "run-2"]]);
    assert_eq!(
        d[0].message,
        "gang ml/run: member ml/run-1 was preempted by kube-scheduler without muster's say \
         (muster was away or did not answer in time); its other 2 running members are evicted \
         so the gang is disrupted whole, not left half running (disruption mode gang)"
    );
    let told: Vec<Notice> = w
        .table
        .take_notices()
        .into_iter()
        .filter(|n| n.kind == NoticeKind::Disrupted)
        .collect();
    assert_eq!(told.len(), 3, "every member hears it, the victim too");

    // Later updates of the same victim (the kubelet's status while it terminates) and the
    // evicted members' own deletions evict nothing more.
    w.add(&[&preempted(&ms[1])]);
    let mut evicting = ms[0].clone();
    evicting.terminating = true;
    w.add(&[&evicting]);
    w.table.disrupt_for_unseen_preemptions();
    assert!(w.table.take_disruptions().is_empty());
}

/// Noticed while the caches were still listing (a restarted muster): the rest is read only
/// when the caller says they are synced, so gang mates listed after the victim are evicted
/// too.
#[test]
fn the_rest_of_the_gang_is_read_when_the_evictor_is_handed_it_not_when_noticed() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let ms: Vec<PodInfo> = (0..2)
        .map(|i| {
            pod(&format!("run-{i}"))
                .cpu(1000)
                .gang("run", 2)
                .bound(&format!("n{}", i + 1))
                .build()
        })
        .collect();
    w.add(&[&preempted(&ms[0])]);
    w.add(&[&ms[1]]);
    w.table.disrupt_for_unseen_preemptions();
    assert_eq!(
        evicted_names(&w.table.take_disruptions()),
        vec![vec!["run-1"]]
    );
}

#[test]
fn in_disruption_mode_pod_the_rest_keeps_running() {
    let (mut w, ms) = running_gang_of_three("pod");
    w.add(&[&preempted(&ms[1])]);
    w.table.disrupt_for_unseen_preemptions();
    assert!(w.table.take_disruptions().is_empty());
}

/// Other disruptions are not kube-scheduler's preemption: a member deleted or evicted through
/// the Eviction API (no `PreemptionByScheduler` condition) leaves its gang as it is.
#[test]
fn a_member_deleted_otherwise_is_not_a_preemption() {
    let (mut w, ms) = running_gang_of_three("gang");
    let mut deleted = ms[1].clone();
    deleted.terminating = true;
    w.add(&[&deleted]);
    w.table.remove_pod(&ms[2].uid);
    w.table.disrupt_for_unseen_preemptions();
    assert!(w.table.take_disruptions().is_empty());
}

/// A pending pod kube-scheduler preempted (a member not bound: it held nothing) disrupts nothing.
#[test]
fn a_preempted_member_without_a_node_disrupts_nothing() {
    let (mut w, ms) = running_gang_of_three("gang");
    let mut unbound = preempted(&pod("run-3").cpu(1000).gang("run", 3).build());
    unbound.node_name = None;
    w.add(&[&unbound]);
    w.table.disrupt_for_unseen_preemptions();
    assert!(w.table.take_disruptions().is_empty());
    assert!(w.table.has_node(&ms[0].uid), "its gang keeps running");
}

/// muster's own preempt decision disrupted the gang whole: its victim, preempted by
/// kube-scheduler as muster answered, is not a preemption without muster's say (the rest is
/// evicted once, by that decision).
#[test]
fn a_victim_of_musters_own_decision_is_not_acted_on_twice() {
    let (mut w, ms) = running_gang_of_three("gang");
    let high = pod("high").cpu(1000).priority(100_000).build();
    w.add(&[&high]);
    let d = w.preempt(
        &high,
        vec![PreemptCandidate {
            node: "n1".into(),
            victims: vec![ms[0].uid.to_string()],
            pdb_violations: 0,
        }],
    );
    assert_eq!(
        d.disruptions.len(),
        1,
        "muster disrupts the gang whole itself"
    );
    w.add(&[&preempted(&ms[0])]);
    assert_eq!(
        evicted_names(&w.table.take_disruptions()),
        vec![vec!["run-1", "run-2"]],
        "committed: muster's own decision"
    );
    w.add(&[&preempted(&ms[0])]);
    w.table.disrupt_for_unseen_preemptions();
    assert!(w.table.take_disruptions().is_empty());
}
