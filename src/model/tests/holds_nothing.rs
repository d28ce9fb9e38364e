//! holds-nothing: a gang that cannot run holds nothing. The simulation of the other members applies
//! kube-scheduler's required rules (each test names the plugin it mirrors), room for members
//! not created yet lasts only the creation window, and a member's own filter call is evidence.

use super::*;
use crate::model::inputs::terms::{NodeSelectorTerm, Requirement};
use crate::model::rules::fixtures::{term, PodRulesBuilder, HOSTNAME};

const WINDOW: Duration = Duration::from_secs(5);

fn filter_on(w: &mut World, p: &PodInfo, candidates: &[&str]) -> (Vec<String>, Vec<String>) {
    let verdicts = w.table.filter(p, candidates, w.now);
    let mut ok = vec![];
    let mut reasons = vec![];
    for (n, v) in candidates.iter().zip(verdicts) {
        match v {
            NodeVerdict::Fits => ok.push(n.to_string()),
            NodeVerdict::NotOffered => {}
            NodeVerdict::Unschedulable(r) | NodeVerdict::Unresolvable(r) => {
                if !reasons.contains(&r.to_string()) {
                    reasons.push(r.to_string())
                }
            }
        }
    }
    (ok, reasons)
}

fn total_reserved(w: &World) -> i64 {
    w.all_nodes().iter().map(|n| w.reserved(n)).sum()
}

fn pool_a(p: PodInfo) -> PodInfo {
    let req = Requirement::from_node_expression("pool", "In", &["a".to_string()]).unwrap();
    PodRulesBuilder::default()
        .node_affinity(vec![NodeSelectorTerm::Parsed {
            expressions: vec![req],
            fields: vec![],
        }])
        .on(p)
}

/// NodeAffinity: three members that require pool a, two pool-a nodes of one CPU each.
#[test]
fn a_gang_whose_members_require_too_few_nodes_holds_nothing() {
    let nodes: Vec<NodeInfo> = ["a1", "a2", "b1", "b2"]
        .iter()
        .map(|n| testkit::node(n).cpu(1000).label("pool", &n[..1]).build())
        .collect();
    let mut w = World::new(&nodes);
    let members: Vec<PodInfo> = (0..3)
        .map(|i| pool_a(pod(&format!("m{i}")).cpu(1000).gang("g", 3).build()))
        .collect();
    w.add(&members.iter().collect::<Vec<_>>());
    // kube-scheduler's own NodeAffinity filter passes the pool-a nodes only.
    let (ok, reasons) = filter_on(&mut w, &members[0], &["a1", "a2"]);
    assert!(ok.is_empty());
    assert_eq!(
        reasons,
        ["gang ml/g: 2 of 3 members placed; no node for the next: \
          0/4 nodes are available: 2 node(s) didn't have enough room, \
          2 node(s) didn't match Pod's node affinity/selector."]
    );
    assert!(rejection(&w.bind(&members[0], "a1")).starts_with("gang ml/g: 2 of 3 members placed"));
    assert_eq!(total_reserved(&w), 0, "nothing held");
    let plain = testkit::pod("plain")
        .cpu(1000)
        .node_selector("pool", "a")
        .build();
    w.add(&[&plain]);
    assert_eq!(filter_on(&mut w, &plain, &["a1", "a2"]).0, ["a1", "a2"]);
    assert_eq!(w.state("g"), "waiting");
    let view = w
        .table
        .views(w.now)
        .into_iter()
        .find(|v| v.name == "g")
        .unwrap();
    assert!(view
        .waiting_reason
        .unwrap()
        .contains("didn't match Pod's node affinity"));

    // Given a third pool-a node, the gang fits whole.
    w.table
        .apply_node(testkit::node("a3").cpu(1000).label("pool", "a").build());
    let (ok, _) = filter_on(&mut w, &members[0], &["a1", "a2", "a3"]);
    assert_eq!(ok.len(), 1);
}

fn repelling_worker(name: &str) -> PodInfo {
    PodRulesBuilder::default()
        .anti_affinity(term(&[("job", "train")], HOSTNAME))
        .on(pod(name)
            .cpu(1000)
            .label("job", "train")
            .gang("train", 3)
            .build())
}

fn hostnamed(name: &str) -> NodeInfo {
    testkit::node(name).cpu(4000).label(HOSTNAME, name).build()
}

/// InterPodAffinity among the gang's own members: one worker per node, three workers, two
/// nodes with room for all three by CPU.
#[test]
fn members_that_need_distinct_nodes_hold_nothing_without_enough_nodes() {
    let mut w = World::new(&[hostnamed("n1"), hostnamed("n2")]);
    let workers: Vec<PodInfo> = (0..3).map(|i| repelling_worker(&format!("w{i}"))).collect();
    w.add(&workers.iter().collect::<Vec<_>>());
    let (ok, reasons) = w.filter(&workers[0]);
    assert!(ok.is_empty());
    assert_eq!(
        reasons,
        ["gang ml/train: 3 members need distinct nodes by pod anti-affinity; 2 nodes match"]
    );
    assert_eq!(total_reserved(&w), 0);
    // A plain pod that needs a whole node gets one.
    let whole = testkit::pod("whole").cpu(4000).build();
    w.add(&[&whole]);
    assert_eq!(w.filter(&whole).0, ["n1", "n2"]);

    w.table.apply_node(hostnamed("n3"));
    let (ok, _) = w.filter(&workers[0]);
    assert_eq!(ok.len(), 1, "a third node: the gang fits");
    let first = ok[0].clone();
    wait_message(&w.bind(&workers[0], &first));
    assert_eq!(
        total_reserved(&w),
        3000,
        "one seat per worker, each on its own node"
    );
}

/// Room for a member not created yet lasts the creation window; the member that exists keeps
/// its seat, and the room comes back when the missing member appears.
#[test]
fn room_for_a_member_that_never_comes_is_released_after_the_creation_window() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let m0 = pod("m0").cpu(1000).gang("pair", 2).build();
    w.add(&[&m0]);
    let (ok, _) = w.filter(&m0);
    assert_eq!(ok.len(), 1);
    let seat = ok[0].clone();
    assert!(wait_message(&w.bind(&m0, &seat)).contains("1 of 2 members exist"));
    assert_eq!(
        total_reserved(&w),
        2000,
        "its own seat and room for the missing member"
    );

    let plain = testkit::pod("plain").cpu(1000).build();
    w.add(&[&plain]);
    assert!(w.filter(&plain).0.is_empty(), "both nodes are held");
    w.table.take_notices();

    w.advance(WINDOW);
    w.table.expire(w.now);
    assert_eq!(
        total_reserved(&w),
        1000,
        "only the member's own seat is left"
    );
    let notices = w.table.take_notices();
    assert!(notices.iter().any(|n| n.message
        == "gang ml/pair: waiting for members: 1 of 2 exist; room held for the missing 1 \
            released, as no member appeared for 5s"));
    // kube-scheduler would not retry the refused plain pod by itself: it is asked to, once.
    let retries: Vec<&str> = notices
        .iter()
        .filter(|n| n.kind == NoticeKind::Retry)
        .map(|n| &*n.pod.name)
        .collect();
    assert_eq!(retries, ["plain"]);
    assert!(w.table.take_notices().is_empty(), "asked once");
    assert_eq!(
        w.filter(&plain).0.len(),
        1,
        "the plain pod takes the other node"
    );

    // After its timeout the gang holds nothing at all, and a fresh attempt holds nothing for
    // the member that still does not exist.
    w.advance(Duration::from_secs(60));
    w.table.expire(w.now);
    w.advance(Duration::from_secs(10));
    assert_eq!(total_reserved(&w), 0);
    assert_eq!(
        w.filter(&m0).1,
        [
            "gang ml/pair: waiting for members: 1 of 2 exist; no room is held for the missing 1 \
          once no member has appeared for 5s"
        ]
    );

    // The missing member appears: its arrival opens the window again, and the pair fits.
    let m1 = pod("m1").cpu(1000).gang("pair", 2).build();
    w.add(&[&m1]);
    let (ok, _) = w.filter(&m1);
    assert_eq!(ok.len(), 1);
}

/// Without a declared count, the quorum is the members that exist once the
/// creation window is over, never the first member alone.
#[test]
fn without_a_declared_count_the_quorum_waits_for_the_creation_window() {
    let mut w = World::new(&[node("n1", 4000)]);
    let first = pod("first").annotation("muster.dev/group", "g").build();
    w.add(&[&first]);
    let (ok, reasons) = w.filter(&first);
    assert!(ok.is_empty());
    assert_eq!(
        reasons,
        [
            "gang ml/g: no member declares the gang's size; its quorum is the members that exist \
          once none has appeared for 5s (1 so far)"
        ]
    );
    w.advance(Duration::from_secs(3));
    let second = pod("second").annotation("muster.dev/group", "g").build();
    w.add(&[&second]);
    w.table.expire(w.now);
    w.advance(Duration::from_secs(3));
    assert!(
        w.filter(&first).0.is_empty(),
        "the window restarted with the second member"
    );
    w.advance(Duration::from_secs(2));
    assert_eq!(w.filter(&first).0, ["n1"]);
    wait_message(&w.bind(&first, "n1"));
    assert_eq!(names(&w.bind(&second, "n1")), ["first@n1", "second@n1"]);
}

/// A member not created yet is simulated as the element-wise maximum of the
/// members that exist, not as the "largest" member by some order.
#[test]
fn a_member_not_created_yet_asks_the_element_wise_maximum_of_the_members() {
    let mut w = World::new(&[gpu_node("g1", 8), gpu_node("g2", 8), gpu_node("g3", 8)]);
    let gpu = pod("gpu").cpu(100).gpu(1).gang("mix", 3).build();
    let cpu = pod("cpu").cpu(8000).gang("mix", 3).build();
    w.add(&[&gpu, &cpu]);
    let (ok, _) = w.filter(&gpu);
    wait_message(&w.bind(&gpu, &ok[0]));
    let held = w
        .table
        .gangs
        .values()
        .flat_map(|g| g.seats().iter())
        .find(|(h, _)| h.is_not_created_yet())
        .map(|(_, s)| s.requests.clone())
        .expect("room held for the missing member");
    assert_eq!(held.cpu_milli, 8000);
    assert_eq!(held.extended(testkit::GPU), 1);
}

/// SchedulingGates: a gated member is not ready to be placed, so its gang holds nothing.
#[test]
fn a_gang_with_a_gated_member_holds_nothing() {
    let mut w = World::new(&[node("n1", 4000)]);
    let open = pod("open").gang("g", 2).build();
    let gated = PodRulesBuilder::default()
        .gate("example.com/quota")
        .on(pod("gated").gang("g", 2).build());
    w.add(&[&open, &gated]);
    let (ok, reasons) = w.filter(&open);
    assert!(ok.is_empty());
    assert_eq!(
        reasons,
        ["gang ml/g: 1 of 2 members placed; no node for the next: \
          0/1 nodes are available: 1 pod(s) waiting for scheduling gates."]
    );
    assert_eq!(total_reserved(&w), 0);
}

/// Evidence: the nodes a member's filter call passed bound where the plan puts it.
#[test]
fn a_member_is_planned_only_onto_nodes_its_own_filter_call_passed() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let a = pod("a").cpu(1000).gang("g", 2).build();
    let b = pod("b").cpu(1000).gang("g", 2).build();
    w.add(&[&a, &b]);
    // kube-scheduler passed only n2 for b (say a port or volume rule muster does not model).
    assert_eq!(filter_on(&mut w, &b, &["n2"]).0, ["n2"]);
    // Planning a now puts b on n2, so a is offered n1 (first fit would have put b on n1).
    assert_eq!(w.filter(&a).0, ["n1"]);
    // Evidence ages out.
    w.advance(Duration::from_secs(30));
    assert_eq!(w.filter(&a).0, ["n2"]);
}

/// PodTopologySpread (`DoNotSchedule`, maxSkew 1 over zones): four members, three one-CPU
/// nodes in zone a and one in zone b. Room for all four by CPU, but a 3/1 split has skew 2, so
/// the gang holds nothing; a second zone-b node lets it fit 2/2.
#[test]
fn a_gang_that_cannot_spread_evenly_enough_holds_nothing() {
    use crate::model::inputs::terms::{InclusionPolicy, SpreadConstraint};
    use crate::model::rules::fixtures::{selector, ZONE};
    let zoned = |name: &str, zone: &str| testkit::node(name).cpu(1000).label(ZONE, zone).build();
    let mut w = World::new(&[
        zoned("a1", "a"),
        zoned("a2", "a"),
        zoned("a3", "a"),
        zoned("b1", "b"),
    ]);
    let spread = SpreadConstraint {
        max_skew: 1,
        topology_key: ZONE.to_string(),
        selector: selector(&[("job", "s")]),
        match_label_keys: vec![],
        min_domains: 1,
        node_affinity_policy: InclusionPolicy::Honor,
        node_taints_policy: InclusionPolicy::Ignore,
    };
    let members: Vec<PodInfo> = (0..4)
        .map(|i| {
            PodRulesBuilder::default()
                .spread(spread.clone())
                .on(pod(&format!("s{i}"))
                    .cpu(1000)
                    .label("job", "s")
                    .gang("s", 4)
                    .build())
        })
        .collect();
    w.add(&members.iter().collect::<Vec<_>>());
    let (ok, reasons) = w.filter(&members[0]);
    assert!(ok.is_empty());
    assert_eq!(
        reasons,
        [
            "gang ml/s: 3 of 4 members placed; no node for the next: 0/4 nodes are available: \
          1 node(s) didn't have enough room, \
          3 node(s) didn't match pod topology spread constraints."
        ]
    );
    assert_eq!(total_reserved(&w), 0);

    w.table.apply_node(zoned("b2", "b"));
    assert_eq!(w.filter(&members[0]).0.len(), 1, "2/2 over the zones");
}

/// kube-scheduler retries a pod an extender refused only on a cluster event; the creation
/// window closing is none. A member refused while its gang's quorum was still undecided is
/// asked to retry (once) when the window closes, or a gang without a declared count would wait
/// for an unrelated event or kube-scheduler's five-minute flush.
#[test]
fn members_refused_during_the_creation_window_are_asked_to_retry_when_it_closes() {
    let mut w = World::new(&[node("n1", 4000)]);
    let first = pod("first").annotation("muster.dev/group", "g").build();
    let second = pod("second").annotation("muster.dev/group", "g").build();
    w.add(&[&first, &second]);
    assert!(w.filter(&first).0.is_empty(), "quorum not decided yet");
    assert!(w.filter(&second).0.is_empty(), "quorum not decided yet");
    let retries = |w: &mut World| -> Vec<String> {
        let mut v: Vec<String> = w
            .table
            .take_notices()
            .into_iter()
            .filter(|n| n.kind == NoticeKind::Retry)
            .map(|n| n.pod.name.to_string())
            .collect();
        v.sort();
        v
    };
    w.advance(Duration::from_secs(3));
    w.table.expire(w.now);
    assert!(retries(&mut w).is_empty(), "the window is still open");
    w.advance(Duration::from_secs(3));
    w.table.expire(w.now);
    assert_eq!(retries(&mut w), ["first", "second"]);
    w.advance(Duration::from_secs(1));
    w.table.expire(w.now);
    assert!(retries(&mut w).is_empty(), "asked once");
    assert_eq!(w.filter(&first).0, ["n1"], "decided now: the quorum is 2");
}

/// A member that moves to a planned seat of its gang's other member leaves that member its own
/// old seat only on a node the other member's rules pass (kube-scheduler's NodeUnschedulable
/// and TaintToleration): here its old node was tainted (only it tolerates the taint) and then
/// cordoned, so the other member gets no room there; held there, it would be room for a member
/// that can never use it.
#[test]
fn a_member_leaving_its_seat_hands_it_over_only_to_a_member_whose_rules_pass_that_node() {
    let tainted = || {
        testkit::node("n0")
            .cpu(1000)
            .taint("dedicated", "gang", "NoSchedule")
    };
    let mut w = World::new(&[tainted().build(), node("n1", 1000)]);
    let tol = pod("tol")
        .cpu(1000)
        .gang("pair", 2)
        .tolerate("dedicated")
        .build();
    let plain = pod("plain").cpu(1000).gang("pair", 2).build();
    w.add(&[&tol, &plain]);
    let seat_of = |w: &World, p: &PodInfo| {
        w.table.gangs[&GangKey::new("ml", "pair")]
            .seat_of(&p.uid)
            .map(|s| s.node.to_string())
    };
    assert_eq!(filter_on(&mut w, &tol, &["n0"]).0, ["n0"]);
    wait_message(&w.bind(&tol, "n0"));
    assert_eq!(seat_of(&w, &plain).as_deref(), Some("n1"));

    // n0 is cordoned: kube-scheduler offers `tol` n1 only, where `plain`'s planned seat is.
    w.table.apply_node(tainted().unschedulable().build());
    filter_on(&mut w, &tol, &["n1"]);
    wait_message(&w.bind(&tol, "n1"));
    assert_eq!(seat_of(&w, &tol).as_deref(), Some("n1"));
    assert_eq!(seat_of(&w, &plain), None, "no seat where plain cannot go");
    assert_eq!(w.reserved("n0"), 0);
}

/// DynamicResources before the DRA watches have listed: their lists fill the inventory object
/// by object, so a member's own claim (or its template) can be read while the claims holding
/// the devices it would take are not. Until all four kinds have listed, a gang with claims
/// holds nothing, and its message says what muster waits for; a gang without claims is not
/// affected, and readiness does not wait (a cluster may not serve resource.k8s.io/v1).
#[test]
fn dynamic_resources_a_gang_with_claims_holds_nothing_until_the_dra_objects_are_listed() {
    const KINDS: [&str; 4] = [
        "resourceslices",
        "deviceclasses",
        "resourceclaims",
        "resourceclaimtemplates",
    ];
    let mut w = World::new(&[node("n1", 4000), node("n2", 4000)]);
    w.table.expect_device_lists(&KINDS);
    let (p, q) = dra_gang(&mut w.table, &["n1", "n2"]);
    w.add(&[&p, &q]);
    for kind in &KINDS[..3] {
        w.table.device_kind_listed(kind);
        let (ok, reasons) = w.filter(&p);
        assert!(ok.is_empty(), "{kind} listed: {ok:?}");
        assert!(
            reasons.iter().any(|r| r.contains(
                "muster has not listed the resourceclaimtemplates of resource.k8s.io/v1 yet"
            )) || kind != &KINDS[2],
            "{reasons:?}"
        );
    }
    assert_eq!(total_reserved(&w), 0, "holds nothing");
    let plain = pod("plain").cpu(100).build();
    assert_eq!(w.filter(&plain).0, ["n1", "n2"], "no claims: not affected");

    w.table.device_kind_listed(KINDS[3]);
    assert_eq!(w.filter(&p).0.len(), 1, "one member per node");
}

/// Found by the model check: seats hold their members' devices against the gangs muster
/// simulates, but a pod muster judges by room alone (one in no gang, or a later member of a
/// placed gang: `filter_by_room`) is offered the node whose devices a seat holds, and takes
/// them. Gang g (p with a claim for all 4 devices of n1, the only node with devices, and r)
/// is seated below quorum; a plain pod with the same claim must not be offered n1
/// (no-overcommit: seats + allocations ≤ devices), and the reason names the seat.
#[test]
fn dynamic_resources_a_plain_pod_is_not_offered_the_devices_a_seat_holds() {
    let mut w = World::new(&[node("n1", 4000), node("n2", 4000)]);
    dra_devices(&mut w.table, &["n1"]);
    let p = with_dra_claim(&mut w.table, pod("p").cpu(100).gang("g", 2).build());
    let r = pod("r").cpu(100).gang("g", 2).build();
    w.add(&[&p, &r]);
    assert_eq!(w.filter(&p).0, ["n1"]);
    assert!(matches!(w.bind(&p, "n1"), BindDecision::Wait { .. }));
    assert!(
        w.table.holds_seat(&p.uid),
        "p's seat on n1 holds its devices"
    );
    let plain = with_dra_claim(&mut w.table, pod("plain").cpu(100).build());
    let (ok, reasons) = w.filter(&plain);
    assert!(!ok.contains(&"n1".to_string()), "{ok:?} {reasons:?}");
    let (ok, reasons) = (
        w.table.filter(&plain, &["n1"], w.now),
        "the reason when only n1 is offered",
    );
    assert_eq!(
        ok,
        [NodeVerdict::Unschedulable(std::sync::Arc::from(
            "the devices this pod's claims need here are reserved for gang ml/g (the seat of p)"
        ))],
        "{reasons}"
    );
    // The seat gone (its member deleted), n1's devices are the plain pod's to take.
    w.table.remove_pod(&p.uid);
    assert!(!w.table.holds_seat(&p.uid));
    assert_eq!(w.table.filter(&plain, &["n1"], w.now), [NodeVerdict::Fits]);
}

/// The same for host ports (found with it, and fixed): a member seated on n1 with host port
/// 8080; a plain pod asking for the same port, judged by room alone, is not offered n1, and
/// the reason names the seat.
#[test]
fn node_ports_a_plain_pod_is_not_offered_the_host_port_a_seat_holds() {
    let mut w = World::new(&[node("n1", 4000)]);
    let p = pod("p").cpu(100).gang("g", 2).host_port(8080).build();
    let r = pod("r").cpu(100).gang("g", 2).build();
    w.add(&[&p, &r]);
    assert_eq!(w.filter(&p).0, ["n1"]);
    assert!(matches!(w.bind(&p, "n1"), BindDecision::Wait { .. }));
    assert!(w.table.holds_seat(&p.uid), "p's seat on n1 holds its port");
    let plain = pod("plain").cpu(100).host_port(8080).build();
    let (ok, reasons) = w.filter(&plain);
    assert!(ok.is_empty(), "{ok:?} {reasons:?}");
    assert_eq!(
        reasons,
        ["host port 8080/TCP is reserved here for gang ml/g (the seat of p)"]
    );
    // Another port fits.
    let other = pod("other").cpu(100).host_port(9090).build();
    assert_eq!(w.filter(&other).0, ["n1"]);
}

/// Found by the model check (and fixed): a seat holds its member's host port against another
/// gang's simulation too, whose snapshot had the pods on nodes and not the seated members of
/// other gangs (`GangTable::snapshot`). Gang a is seated on n1 below quorum with host port
/// 8080; gang b of one member asking for the same port is not planned onto n1.
#[test]
fn node_ports_a_gang_is_not_planned_onto_the_host_port_another_gangs_seat_holds() {
    let mut w = World::new(&[node("n1", 4000)]);
    let a1 = pod("a1").cpu(100).gang("a", 2).host_port(8080).build();
    let a2 = pod("a2").cpu(100).gang("a", 2).build();
    w.add(&[&a1, &a2]);
    assert_eq!(w.filter(&a1).0, ["n1"]);
    assert!(matches!(w.bind(&a1, "n1"), BindDecision::Wait { .. }));
    assert!(
        w.table.holds_seat(&a1.uid),
        "a1's seat on n1 holds its port"
    );
    let b1 = pod("b1").cpu(100).gang("b", 1).host_port(8080).build();
    let (ok, reasons) = w.filter(&b1);
    assert!(ok.is_empty(), "{ok:?} {reasons:?}");
    assert!(
        reasons.iter().all(|r| r.contains("8080")),
        "the reason names the port: {reasons:?}"
    );
    assert_eq!(total_reserved(&w), 200, "b holds nothing");
}

/// Found by the model check: the filter offered n1 to a plain pod asking for host port 8080
/// before a gang member asking for the same port was seated there; the plain pod's bind then
/// came to n1. The bind looks again (NodePorts: no two pods on a node share a host port) and
/// refuses it, naming the seat; the seat keeps its port. The same for a member of an admitted
/// gang binding off its own seat.
#[test]
fn node_ports_a_bind_on_a_node_offered_before_a_seat_took_its_host_port_is_refused() {
    let mut w = World::new(&[node("n1", 4000)]);
    let plain = pod("plain").cpu(100).host_port(8080).build();
    w.add(&[&plain]);
    assert_eq!(w.filter(&plain).0, ["n1"], "no seat holds 8080 yet");
    let p = pod("p").cpu(100).gang("g", 2).host_port(8080).build();
    let r = pod("r").cpu(100).gang("g", 2).build();
    w.add(&[&p, &r]);
    assert!(matches!(w.bind(&p, "n1"), BindDecision::Wait { .. }));
    assert!(w.table.holds_seat(&p.uid), "p's seat on n1 holds 8080");
    match w.bind(&plain, "n1") {
        BindDecision::Reject(e @ BindRejection::HostPortHeld { .. }) => assert_eq!(
            e.to_string(),
            "node n1 cannot take pod ml/plain: host port 8080/TCP is reserved here for gang \
             ml/g (the seat of p)"
        ),
        other => panic!("{other:?}"),
    }
    assert!(w.table.holds_seat(&p.uid), "the seat keeps its port");
    // Another port binds.
    let other = pod("other").cpu(100).host_port(9090).build();
    w.add(&[&other]);
    assert!(matches!(w.bind(&other, "n1"), BindDecision::BindNow { .. }));
}

/// A member of an admitted gang binding off its own seat is judged as any pod there (NodePorts):
/// a node where another member's seat holds the host port it asks for is refused, and both
/// seats stay as they were.
#[test]
fn node_ports_a_member_binding_off_its_seat_where_another_seat_holds_its_port_is_refused() {
    let mut w = World::new(&[node("n1", 4000), node("n2", 4000)]);
    let p0 = pod("p0").cpu(100).gang("g", 2).host_port(8080).build();
    let p1 = pod("p1").cpu(100).gang("g", 2).host_port(8080).build();
    w.add(&[&p0, &p1]);
    assert!(matches!(w.bind(&p0, "n1"), BindDecision::Wait { .. }));
    assert!(
        w.table.holds_seat(&p1.uid),
        "the plan seats p1 (on n2: n1's 8080 is p0's)"
    );
    match w.bind(&p1, "n1") {
        BindDecision::Reject(e @ BindRejection::HostPortHeld { .. }) => assert_eq!(
            e.to_string(),
            "node n1 cannot take pod ml/p1: host port 8080/TCP is reserved here for gang \
             ml/g (the seat of p0)"
        ),
        other => panic!("{other:?}"),
    }
    assert!(w.table.holds_seat(&p0.uid) && w.table.holds_seat(&p1.uid));
    assert_eq!(w.reserved("n1") + w.reserved("n2"), 200, "both seats kept");
}

/// The bind looks again at the devices (DynamicResources), as it does at host ports: a plain
/// pod offered n1 before a gang member with a claim for all its devices was seated there is
/// refused at its bind, and the seat keeps the devices.
#[test]
fn dynamic_resources_a_bind_on_a_node_offered_before_a_seat_took_its_devices_is_refused() {
    let mut w = World::new(&[node("n1", 4000), node("n2", 4000)]);
    dra_devices(&mut w.table, &["n1"]);
    let plain = with_dra_claim(&mut w.table, pod("plain").cpu(100).build());
    w.add(&[&plain]);
    assert!(
        w.filter(&plain).0.contains(&"n1".to_string()),
        "no seat holds n1's devices yet"
    );
    let p = with_dra_claim(&mut w.table, pod("p").cpu(100).gang("g", 2).build());
    let r = pod("r").cpu(100).gang("g", 2).build();
    w.add(&[&p, &r]);
    assert!(matches!(w.bind(&p, "n1"), BindDecision::Wait { .. }));
    match w.bind(&plain, "n1") {
        BindDecision::Reject(e @ BindRejection::DevicesHeld { .. }) => assert_eq!(
            e.to_string(),
            "node n1 cannot take pod ml/plain: the devices this pod's claims need here are \
             reserved for gang ml/g (the seat of p)"
        ),
        other => panic!("{other:?}"),
    }
    assert!(w.table.holds_seat(&p.uid), "the seat keeps its devices");
}

/// A later member of an admitted gang is judged by room, and its claims too: a node where its
/// own gang's seat holds the devices it needs is neither offered nor bound (found by the model
/// check: two seats of one gang on a node with one device).
#[test]
fn dynamic_resources_a_later_member_is_not_given_the_devices_its_gangs_seat_holds() {
    let mut w = World::new(&[node("n1", 4000), node("n2", 4000)]);
    dra_devices(&mut w.table, &["n1"]);
    let p = with_dra_claim(&mut w.table, pod("p").cpu(100).gang("g", 2).build());
    let r = pod("r").cpu(100).gang("g", 2).build();
    w.add(&[&p, &r]);
    assert!(matches!(w.bind(&p, "n1"), BindDecision::Wait { .. }));
    let late = with_dra_claim(&mut w.table, pod("late").cpu(100).gang("g", 2).build());
    w.add(&[&late]);
    assert!(!w.filter(&late).0.contains(&"n1".to_string()));
    match w.bind(&late, "n1") {
        BindDecision::Reject(e @ BindRejection::DevicesHeld { .. }) => assert_eq!(
            e.to_string(),
            "node n1 cannot take pod ml/late: the devices this pod's claims need here are \
             reserved for gang ml/g (the seat of p)"
        ),
        other => panic!("{other:?}"),
    }
    assert!(w.table.holds_seat(&p.uid) && !w.table.holds_seat(&late.uid));
}

/// A seat held for a member not created yet holds the host port its gang's members all ask
/// for (one pod template makes them): gang g of 3, p and q created with port 8080, seated on
/// two nodes and the member to come on the third; a plain pod asking for 8080 is offered none
/// of them, and the third's reason names the member to come.
#[test]
fn node_ports_a_seat_for_a_member_not_created_yet_holds_its_gangs_host_port() {
    let mut w = World::new(&[node("n1", 4000), node("n2", 4000), node("n3", 4000)]);
    let p = pod("p").cpu(100).gang("g", 3).host_port(8080).build();
    let q = pod("q").cpu(100).gang("g", 3).host_port(8080).build();
    w.add(&[&p, &q]);
    let (ok, _) = w.filter(&p);
    assert!(matches!(w.bind(&p, &ok[0]), BindDecision::Wait { .. }));
    assert_eq!(total_reserved(&w), 300, "p, q and the member to come");
    let plain = pod("plain").cpu(100).host_port(8080).build();
    let (ok, reasons) = w.filter(&plain);
    assert!(ok.is_empty(), "{ok:?} {reasons:?}");
    assert!(
        reasons.contains(
            &"host port 8080/TCP is reserved here for gang ml/g (the seat of a member not \
              created yet)"
                .to_string()
        ),
        "{reasons:?}"
    );
}

/// Found by the model check: a member binding off its seat takes over a sibling's planned
/// seat, and the sibling gets the taker's old seat only where its device claims fit (with what
/// the other seats there hold). p (no claim) was seated on n0 and q (a claim for n2's devices)
/// planned on n2; p's bind comes to n2, takes q's seat there, and q is not handed n0, which
/// has no devices (a seat its member could never use: holds-nothing).
#[test]
fn dynamic_resources_a_displaced_member_is_not_handed_a_seat_without_its_devices() {
    let mut w = World::new(&[node("n0", 1000), node("n2", 1000)]);
    dra_devices(&mut w.table, &["n2"]);
    let other = pod("other").cpu(200).bound("n2").build();
    let p = pod("p").cpu(500).gang("g", 2).build();
    let q = with_dra_claim(&mut w.table, pod("q").cpu(400).gang("g", 2).build());
    w.add(&[&other, &p, &q]);
    wait_message(&w.bind(&p, "n0"));
    let key = p.gang().unwrap().gang.clone();
    let seat_node =
        |w: &World, uid: &PodUid| w.table.gangs[&key].seat_of(uid).map(|s| s.node.to_string());
    assert_eq!(
        seat_node(&w, &q.uid).as_deref(),
        Some("n2"),
        "q's devices are on n2"
    );
    // A bind of p on n2 (a node its filter offered before): it takes q's planned seat there.
    wait_message(&w.bind(&p, "n2"));
    assert_eq!(seat_node(&w, &p.uid).as_deref(), Some("n2"));
    assert_ne!(
        seat_node(&w, &q.uid).as_deref(),
        Some("n0"),
        "q is not seated where its claim cannot be allocated"
    );
}
