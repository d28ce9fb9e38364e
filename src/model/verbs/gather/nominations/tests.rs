//! Which seats a release publishes as nominations: a member floats only where kube-scheduler
//! will offer it a node with room and nothing outside muster can take its seat.

use std::time::Instant;

use super::super::*;
use super::places_spoiled;
use crate::model::ModelConfig;
use crate::model::NodeInfo;
use crate::testkit::{self, gathered, pod};

fn node(name: &str, cpu_milli: i64) -> NodeInfo {
    testkit::node(name).cpu(cpu_milli).build()
}

fn table(nodes: &[NodeInfo], pods: &[PodInfo]) -> GangTable {
    let mut table = GangTable::new(ModelConfig::default());
    for n in nodes {
        table.apply_node(n.clone());
    }
    for p in pods {
        table.apply_pod(p.clone());
    }
    table
}

fn gang_of_two() -> Vec<PodInfo> {
    vec![
        gathered(pod("a").cpu(1000).gang("g", 2).build()),
        gathered(pod("b").cpu(1000).gang("g", 2).build()),
    ]
}

/// The one release of a round, its nominated and its ungated member names, sorted.
fn released(plan: &GatherPlan) -> (Vec<String>, Vec<String>) {
    assert_eq!(plan.releases.len(), 1, "{plan:?}");
    let r = &plan.releases[0];
    let mut nominated: Vec<String> = r.nominate.iter().map(|(p, _)| p.name.to_string()).collect();
    let mut ungated: Vec<String> = r.ungate.iter().map(|u| u.pod.name.to_string()).collect();
    nominated.sort();
    ungated.sort();
    (nominated, ungated)
}

/// kube-scheduler offers every node its filters pass on a small cluster, and nothing else waits
/// for the room: the gang's gates go without a nomination (one write per member saved).
#[test]
fn a_gang_with_room_everywhere_and_no_rival_floats_without_nominations() {
    let mut t = table(
        &[node("n1", 1000), node("n2", 1000), node("n3", 1000)],
        &gang_of_two(),
    );
    let plan = Gatherer::new(true).gather(&mut t, Instant::now());
    let (nominated, ungated) = released(&plan);
    assert!(nominated.is_empty(), "{plan:?}");
    assert_eq!(ungated, ["a", "b"]);
}

/// `--nominate-seats=always`: every seat is published, as before the choice existed.
#[test]
fn every_seat_is_nominated_when_asked_to() {
    let mut t = table(&[node("n1", 1000), node("n2", 1000)], &gang_of_two());
    let plan = Gatherer::new(true)
        .nominating(Nominations::EverySeat)
        .gather(&mut t, Instant::now());
    let (nominated, ungated) = released(&plan);
    assert_eq!(nominated, ["a", "b"]);
    assert_eq!(ungated, ["a", "b"]);
}

/// A member asking for a host port (NodePorts) or a gang confined to a topology domain goes
/// only where the plan put it: its seat is published.
#[test]
fn members_pinned_by_host_ports_or_a_topology_domain_are_nominated() {
    let ports: Vec<PodInfo> = ["a", "b"]
        .iter()
        .map(|n| gathered(pod(n).cpu(1000).gang("g", 2).host_port(8080).build()))
        .collect();
    let mut t = table(&[node("n1", 1000), node("n2", 1000)], &ports);
    let plan = Gatherer::new(true).gather(&mut t, Instant::now());
    assert_eq!(released(&plan).0, ["a", "b"], "host ports: {plan:?}");

    let rack = |n: &str| testkit::node(n).cpu(1000).label("rack", "r1").build();
    let confined: Vec<PodInfo> = ["a", "b"]
        .iter()
        .map(|n| {
            gathered(
                pod(n)
                    .cpu(1000)
                    .gang("g", 2)
                    .annotation("muster.dev/topology-required", "rack")
                    .build(),
            )
        })
        .collect();
    let mut t = table(&[rack("n1"), rack("n2")], &confined);
    let plan = Gatherer::new(true).gather(&mut t, Instant::now());
    assert_eq!(released(&plan).0, ["a", "b"], "topology: {plan:?}");
}

/// A pending plain pod of the members' priority could land in a seat's room (it never passes
/// through muster's filter, and only a nomination makes kube-scheduler count the seat against
/// it): with no place for a member left outside the seats, the displaced member would have
/// nowhere to go, so the seats are nominated; a pod of higher priority ignores nominations, so
/// it does not count; with a place left outside the seats for each place the waiting pods could
/// spoil, the members float.
#[test]
fn seats_are_nominated_when_waiting_plain_pods_could_spoil_every_place_outside_them() {
    // 1.5 CPUs per node: room for the waiting pod beside each seat (not thin), but no 1-CPU
    // place left outside the seats.
    let plain = pod("plain").cpu(500).build();
    let mut pods = gang_of_two();
    pods.push(plain.clone());
    let mut t = table(&[node("n1", 1500), node("n2", 1500)], &pods);
    let plan = Gatherer::new(true).gather(&mut t, Instant::now());
    assert_eq!(
        released(&plan).0,
        ["a", "b"],
        "no place outside the seats: {plan:?}"
    );

    let urgent = pod("urgent").cpu(500).priority(1000).build();
    let mut pods = gang_of_two();
    pods.push(urgent);
    let mut t = table(&[node("n1", 1500), node("n2", 1500)], &pods);
    let plan = Gatherer::new(true).gather(&mut t, Instant::now());
    assert!(released(&plan).0.is_empty(), "higher priority: {plan:?}");

    // 2.5 CPUs per node: one 1-CPU place left beside each seat, two in all, against the one
    // place the 500m pod could spoil.
    let mut pods = gang_of_two();
    pods.push(plain);
    let mut t = table(&[node("n1", 2500), node("n2", 2500)], &pods);
    let plan = Gatherer::new(true).gather(&mut t, Instant::now());
    assert!(released(&plan).0.is_empty(), "places to spare: {plan:?}");
}

/// A waiting pod spoils at most as many member-sized places as its request spans in member
/// requests, on the resource it spans most.
#[test]
fn a_pod_spoils_at_most_its_request_in_member_requests() {
    let member = pod("m").cpu(1000).memory(1 << 30).build().requests;
    let small = pod("s").cpu(100).build().requests;
    let big = pod("b").cpu(2500).memory(1 << 29).build().requests;
    assert_eq!(places_spoiled(&small, &member), 1);
    assert_eq!(places_spoiled(&big, &member), 3);
}

/// kube-scheduler sends the extender at least 100 of the nodes its filters pass, and those
/// include nodes whose room only seats hold (it does not see seats): with 100 such nodes it
/// may send only those, so the seat is nominated; with 99, whatever it sends holds a node with
/// room, and the member floats. Nodes full of bound pods do not count: its own filters
/// (NodeResourcesFit) never pass them.
#[test]
fn min_feasible_nodes_to_find_with_a_hundred_nodes_only_seats_fill_seats_are_nominated_and_with_ninety_nine_they_float(
) {
    // Another gang's seats fill `others` nodes; g's sibling seat fills one more. 1.1 CPUs per
    // node: 100m beside each seat, as much as the largest pod outside muster (not thin).
    for (others, nominated) in [(KUBE_SCHEDULER_FINDS_AT_LEAST - 1, true), (98, false)] {
        let mut nodes: Vec<NodeInfo> = (0..others + 3)
            .map(|i| node(&format!("n{i}"), 1100))
            .collect();
        nodes.extend((0..200).map(|i| node(&format!("busy{i}"), 100)));
        let mut pods: Vec<PodInfo> = (0..200)
            .map(|i| {
                pod(&format!("bound{i}"))
                    .cpu(100)
                    .bound(&format!("busy{i}"))
                    .build()
            })
            .collect();
        pods.extend((0..others).map(|i| {
            gathered(
                pod(&format!("big{i}"))
                    .cpu(1000)
                    .gang("big", others as u32)
                    .build(),
            )
        }));
        let mut t = table(&nodes, &pods);
        let now = Instant::now();
        let mut g = Gatherer::new(true);
        let first = g.gather(&mut t, now);
        assert_eq!(first.releases.len(), 1, "big is seated first");
        for u in &first.releases[0].ungate {
            g.ungated(&u.pod.uid, now);
        }
        for p in gang_of_two() {
            t.apply_pod(p);
        }
        let plan = g.gather(&mut t, now);
        let names = released(&plan).0;
        assert_eq!(
            !names.is_empty(),
            nominated,
            "{others} nodes filled by other seats: {names:?}"
        );
    }
}

/// A floating member is left unnominated while its seat stays safe, and nominated to its seat
/// once kube-scheduler refused it (the nodes it was offered had no room for it).
#[test]
fn a_floating_member_is_nominated_once_kube_scheduler_refused_it() {
    let mut t = table(&[node("n1", 1000), node("n2", 1000)], &gang_of_two());
    let mut g = Gatherer::new(true);
    let now = Instant::now();
    let plan = g.gather(&mut t, now);
    let r = &plan.releases[0];
    for u in &r.ungate {
        g.ungated(&u.pod.uid, now);
    }
    // The watch shows the gates gone, no nomination.
    let ungated = |p: &PodInfo| {
        let mut p = p.clone();
        if let Some(r) = p.rules.as_mut() {
            r.scheduling_gates.retain(|g| g != GATHER_GATE);
        }
        p
    };
    let [a, b] = [&gang_of_two()[0], &gang_of_two()[1]].map(ungated);
    t.apply_pod(a.clone());
    t.apply_pod(b.clone());
    let next = g.gather(&mut t, now);
    assert!(next.renominate.is_empty(), "{next:?}");

    let mut refused = a.clone();
    // kube-scheduler's verdict on muster's refusal (the nodes it offered had no room beside the
    // seats): a rule muster simulates, so the gang keeps its seats.
    refused.unschedulable = Some("0/2 nodes are available: 2 Insufficient cpu.".into());
    t.apply_pod(refused);
    let next = g.gather(&mut t, now);
    let seat = t.gangs[&GangKey::new("ml", "g")]
        .seat_of(&a.uid)
        .expect("a is seated")
        .node
        .clone();
    assert_eq!(
        next.renominate,
        vec![(PodRef::of(&a), seat)],
        "the refused member, to its seat: {next:?}"
    );
}

/// kube-scheduler offers a floating member nodes that do not include its seat's: muster's
/// filter offers it one with room after every seat and moves its seat there at once, so the
/// room it is about to take is reserved (no-overcommit: another gang's plan cannot use it
/// before the member's bind), and its old seat's room is free again.
#[test]
fn a_floating_member_offered_another_node_has_its_seat_moved_there_by_the_filter() {
    let mut t = table(
        &[node("n1", 1000), node("n2", 1000), node("n3", 1000)],
        &gang_of_two(),
    );
    let now = Instant::now();
    let plan = Gatherer::new(true).gather(&mut t, now);
    assert!(released(&plan).0.is_empty(), "both float: {plan:?}");
    let key = GangKey::new("ml", "g");
    let a = &gang_of_two()[0];
    let seat = t.gangs[&key]
        .seat_of(&a.uid)
        .expect("a is seated")
        .node
        .clone();
    let free = ["n1", "n2", "n3"]
        .into_iter()
        .find(|n| t.gangs[&key].seats().values().all(|s| &*s.node != *n))
        .expect("one node holds no seat");
    let mut ungated = a.clone();
    if let Some(r) = ungated.rules.as_mut() {
        r.scheduling_gates.retain(|g| g != GATHER_GATE);
    }
    t.apply_pod(ungated.clone());
    let verdicts = t.filter(&ungated, &[free], now);
    assert_eq!(
        verdicts,
        vec![crate::model::verbs::filter::NodeVerdict::Fits]
    );
    assert_eq!(
        &*t.gangs[&key].seat_of(&a.uid).expect("still seated").node,
        free
    );
    assert_eq!(t.ledger.get(free).unwrap().reserved().cpu_milli, 1000);
    assert_eq!(
        t.ledger.get(&seat).unwrap().reserved().cpu_milli,
        0,
        "old seat freed"
    );
}

/// One pod outside muster as large as the largest there (here a bound one of 300m) could take a
/// seat's room before muster's watch shows it: a seat whose node keeps less than that beside its
/// seats is nominated; with as much room beside it, the member floats.
#[test]
fn a_seat_whose_node_keeps_less_room_than_the_largest_pod_outside_muster_is_nominated() {
    for (cpu, nominated) in [(1000, true), (1300, false)] {
        let mut pods = gang_of_two();
        pods.push(pod("web").cpu(300).bound("n3").build());
        let mut t = table(&[node("n1", cpu), node("n2", cpu), node("n3", 300)], &pods);
        let plan = Gatherer::new(true).gather(&mut t, Instant::now());
        assert_eq!(
            !released(&plan).0.is_empty(),
            nominated,
            "{cpu}m nodes: {plan:?}"
        );
    }
}

/// On a cluster where kube-scheduler would send muster more than
/// FLOAT_WHILE_NODES_SENT_AT_MOST node names per member, every seat is nominated (a floating
/// member's cycle would filter them all); its share follows `numFeasibleNodesToFind`.
#[test]
fn num_feasible_nodes_to_find_above_250_every_seat_is_nominated_at_540_nodes_they_float() {
    use super::nodes_kube_scheduler_finds as finds;
    assert_eq!(
        (finds(99), finds(100), finds(500), finds(5000)),
        (99, 100, 230, 500)
    );
    for (nodes, nominated) in [(540, false), (600, true)] {
        let all: Vec<NodeInfo> = (0..nodes).map(|i| node(&format!("n{i}"), 1000)).collect();
        let mut t = table(&all, &gang_of_two());
        let plan = Gatherer::new(true).gather(&mut t, Instant::now());
        assert_eq!(
            !released(&plan).0.is_empty(),
            nominated,
            "{nodes} nodes ({} sent)",
            finds(nodes)
        );
    }
}
