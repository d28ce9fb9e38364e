//! Topology domains: a gang whose quorum must be inside one domain of a node label
//! (`muster.dev/topology-required`, Kueue's `kueue.x-k8s.io/podset-required-topology`,
//! Kubernetes' PodGroup `spec.schedulingConstraints.topology[].key`).

use proptest::prelude::*;

use super::*;
use crate::model::topology::{KUEUE_REQUIRED_TOPOLOGY, TOPOLOGY_REQUIRED};

const RACK: &str = "example.com/rack";

/// `racks[r]` nodes of 1000m in rack `r`, named `r<r>-<i>`; the first `full[r]` of them are
/// taken by a plain pod (of priority 0).
fn racks(racks: &[usize], full: &[usize]) -> (World, Vec<PodInfo>) {
    let busy: Vec<Vec<Option<i32>>> = racks
        .iter()
        .enumerate()
        .map(|(r, &n)| {
            let full = full.get(r).copied().unwrap_or(0);
            (0..n).map(|i| (i < full).then_some(0)).collect()
        })
        .collect();
    racks_running(&busy)
}

/// Racks of 1000m nodes, named `r<r>-<i>`: node `i` of rack `r` runs a plain pod of 1000m
/// `busy-r<r>-<i>` of priority `p` where `busy[r][i]` is `Some(p)`, and nothing where `None`.
fn racks_running(busy: &[Vec<Option<i32>>]) -> (World, Vec<PodInfo>) {
    let mut nodes = Vec::new();
    let mut running = Vec::new();
    for (r, priorities) in busy.iter().enumerate() {
        for (i, priority) in priorities.iter().enumerate() {
            let name = format!("r{r}-{i}");
            nodes.push(
                testkit::node(&name)
                    .cpu(1000)
                    .label(RACK, &format!("rack-{r}"))
                    .build(),
            );
            if let Some(p) = priority {
                running.push(
                    pod(&format!("busy-{name}"))
                        .cpu(1000)
                        .priority(*p)
                        .bound(&name)
                        .build(),
                );
            }
        }
    }
    let mut w = World::new(&nodes);
    w.add(&running.iter().collect::<Vec<_>>());
    (w, running)
}

fn member(i: usize, quorum: u32, key: &str) -> PodInfo {
    pod(&format!("m{i}"))
        .cpu(1000)
        .gang("g", quorum)
        .annotation(key, RACK)
        .build()
}

fn rack_of(node: &str) -> &str {
    node.split('-').next().unwrap()
}

/// Filters and binds every member in turn; the bindings at quorum, or the first refusal.
fn run(w: &mut World, members: &[PodInfo]) -> Result<Vec<String>, Vec<String>> {
    w.add(&members.iter().collect::<Vec<_>>());
    for m in members {
        let (ok, reasons) = w.filter(m);
        let Some(node) = ok.first() else {
            return Err(reasons);
        };
        assert_eq!(ok.len(), 1, "one node offered");
        match w.bind(m, node) {
            d @ BindDecision::BindGang { .. } => {
                w.confirm(&d);
                return Ok(names(&d));
            }
            BindDecision::Wait { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    Err(vec!["no quorum".into()])
}

#[test]
fn a_required_gang_lands_wholly_in_the_one_rack_that_holds_it() {
    // Rack 0: 3 free of 4; rack 1: 4 free; racks 2 and 3: 1 free each.
    let (mut w, _) = racks(&[4, 4, 4, 4], &[1, 0, 3, 3]);
    let members: Vec<PodInfo> = (0..4).map(|i| member(i, 4, TOPOLOGY_REQUIRED)).collect();
    let bound = run(&mut w, &members).unwrap();
    assert_eq!(bound.len(), 4);
    assert!(
        bound
            .iter()
            .all(|b| b.split('@').nth(1).map(rack_of) == Some("r1")),
        "{bound:?}"
    );
}

#[test]
fn best_fit_takes_the_rack_that_strands_the_least_room() {
    // Rack 0 has 8 free nodes, rack 1 exactly 4: a gang of 4 takes rack 1, leaving rack 0
    // whole for a gang of 8.
    let (mut w, _) = racks(&[8, 4], &[0, 0]);
    let members: Vec<PodInfo> = (0..4).map(|i| member(i, 4, TOPOLOGY_REQUIRED)).collect();
    let bound = run(&mut w, &members).unwrap();
    assert!(bound.iter().all(|b| b.contains("@r1-")), "{bound:?}");
}

#[test]
fn no_rack_holds_the_gang_it_holds_nothing_and_says_the_numbers() {
    let (mut w, _) = racks(&[4, 4, 4, 4], &[1, 2, 3, 4]);
    let members: Vec<PodInfo> = (0..4)
        .map(|i| member(i, 4, KUEUE_REQUIRED_TOPOLOGY))
        .collect();
    let refused = run(&mut w, &members).unwrap_err();
    assert_eq!(
        refused,
        vec![
            "gang ml/g needs 4 members in one example.com/rack; the best example.com/rack \
             (rack-0) fits 3 (of 4 domains)"
        ]
    );
    for r in 0..4 {
        for i in 0..4 {
            assert_eq!(w.reserved(&format!("r{r}-{i}")), 0, "holds nothing");
        }
    }
    // Unconstrained, the same gang fits across racks.
    let (mut w, _) = racks(&[4, 4, 4, 4], &[1, 2, 3, 4]);
    let members: Vec<PodInfo> = (0..4)
        .map(|i| pod(&format!("m{i}")).cpu(1000).gang("g", 4).build())
        .collect();
    assert_eq!(run(&mut w, &members).unwrap().len(), 4);
}

#[test]
fn nodes_without_the_label_are_in_no_domain() {
    let mut w = World::new(&[
        testkit::node("bare-0").cpu(1000).build(),
        testkit::node("bare-1").cpu(1000).build(),
        testkit::node("r0-0")
            .cpu(1000)
            .label(RACK, "rack-0")
            .build(),
    ]);
    let members: Vec<PodInfo> = (0..2).map(|i| member(i, 2, TOPOLOGY_REQUIRED)).collect();
    let refused = run(&mut w, &members).unwrap_err();
    assert!(
        refused[0].contains("the best example.com/rack (rack-0) fits 1"),
        "{refused:?}"
    );
}

#[test]
fn a_malformed_or_conflicting_topology_is_refused_with_its_reason() {
    let (mut w, _) = racks(&[4], &[0]);
    let bad = pod("bad")
        .gang("g", 2)
        .annotation(TOPOLOGY_REQUIRED, "rack!")
        .build();
    let (ok, reasons) = w.filter(&bad);
    assert!(ok.is_empty());
    assert!(
        reasons[0].contains("muster.dev/topology-required must name node labels"),
        "{reasons:?}"
    );

    // Two members asking for different topologies: the gang holds nothing and says why.
    let a = pod("a")
        .gang("h", 2)
        .annotation(TOPOLOGY_REQUIRED, RACK)
        .build();
    let b = pod("b")
        .gang("h", 2)
        .annotation(TOPOLOGY_REQUIRED, "example.com/block")
        .build();
    w.add(&[&a, &b]);
    let (ok, reasons) = w.filter(&a);
    assert!(ok.is_empty());
    assert_eq!(
        reasons,
        vec![
            "gang ml/h: members ask for different topologies: \
             muster.dev/topology-required=\"required example.com/block\", \
             muster.dev/topology-required=\"required example.com/rack\"; give every member the \
             same topology key, and nothing is held meanwhile"
        ]
    );
    assert_eq!(w.reserved("r0-0") + w.reserved("r0-1"), 0);
    // Preemption cannot help it: every node unresolvable, and no candidate kept.
    let names = w.all_nodes();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let verdicts = w.table.filter(&a, &refs, w.now);
    assert!(verdicts
        .iter()
        .all(|v| matches!(v, NodeVerdict::Unresolvable(_))));
    let d = w.preempt(
        &a,
        vec![PreemptCandidate {
            node: "r0-0".into(),
            victims: vec![],
            pdb_violations: 0,
        }],
    );
    assert!(d.kept.is_empty(), "{d:?}");
}

#[test]
fn a_replacement_member_of_a_placed_gang_goes_only_into_its_rack() {
    let (mut w, _) = racks(&[2, 4], &[0, 2]);
    let members: Vec<PodInfo> = (0..2).map(|i| member(i, 2, TOPOLOGY_REQUIRED)).collect();
    let bound = run(&mut w, &members).unwrap();
    assert!(bound.iter().all(|b| b.contains("@r0-")), "{bound:?}");
    // A third member (beyond the quorum): rack 0 is full, rack 1 has room, but the gang is
    // confined to rack 0, so it waits.
    let extra = member(2, 2, TOPOLOGY_REQUIRED);
    let (ok, reasons) = w.filter(&extra);
    assert!(ok.is_empty(), "{ok:?}");
    assert!(
        reasons.contains(&"node is outside its gang's example.com/rack rack-0".to_string()),
        "{reasons:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// A required gang's seats are always in one domain, and it is seated exactly when some
    /// rack has room for its whole quorum.
    #[test]
    fn a_required_gangs_seats_are_always_in_one_domain(
        free in proptest::collection::vec(0usize..5, 1..5),
        quorum in 1u32..5,
    ) {
        let sizes = vec![4usize; free.len()];
        let full: Vec<usize> = free.iter().map(|f| 4 - f).collect();
        let (mut w, _) = racks(&sizes, &full);
        let members: Vec<PodInfo> =
            (0..quorum as usize).map(|i| member(i, quorum, TOPOLOGY_REQUIRED)).collect();
        w.add(&members.iter().collect::<Vec<_>>());
        let (ok, _) = w.filter(&members[0]);
        let fits = free.iter().any(|&f| f >= quorum as usize);
        prop_assert_eq!(!ok.is_empty(), fits);
        if let Some(node) = ok.first() {
            let _ = w.bind(&members[0], node);
            let key = GangKey::new("ml", "g");
            let seats: Vec<String> = w.table.gangs.get(&key)
                .map(|g| g.seats().values().map(|s| s.node.to_string()).collect())
                .unwrap_or_default();
            let mut all = seats.clone();
            all.push(node.clone());
            let first = rack_of(&all[0]).to_string();
            prop_assert!(all.iter().all(|n| rack_of(n) == first), "{:?}", all);
        }
    }
}

#[test]
fn a_kubernetes_pod_group_topology_overrules_and_a_hard_volcano_one_is_refused() {
    use crate::model::topology::PodGroupTopology;
    let (mut w, _) = racks(&[4, 4], &[1, 0]);
    w.table
        .set_pod_group_api_served(PodGroupApi::Kubernetes, true);
    w.table.apply_pod_group(PodGroupDef {
        topology: Some(PodGroupTopology::Required(RACK.into())),
        ..pod_groups::pod_group(PodGroupApi::Kubernetes, 4, &[])
    });
    let members: Vec<PodInfo> = (0..4)
        .map(|i| {
            pod(&format!("m{i}"))
                .cpu(1000)
                .scheduling_group("job")
                .build()
        })
        .collect();
    let bound = run(&mut w, &members).unwrap();
    assert!(bound.iter().all(|b| b.contains("@r1-")), "{bound:?}");

    let (mut w, _) = racks(&[4], &[0]);
    w.table.set_pod_group_api_served(PodGroupApi::Volcano, true);
    w.table.apply_pod_group(PodGroupDef {
        topology: Some(PodGroupTopology::VolcanoNetwork {
            hard: true,
            tier: "highestTierAllowed 1".into(),
        }),
        ..pod_groups::pod_group(PodGroupApi::Volcano, 2, &[])
    });
    let v: Vec<PodInfo> = (0..2)
        .map(|i| {
            pod(&format!("v{i}"))
                .annotation("scheduling.k8s.io/group-name", "job")
                .build()
        })
        .collect();
    let refused = run(&mut w, &v).unwrap_err();
    assert!(
        refused[0].contains("spec.networkTopology mode hard (highestTierAllowed 1)"),
        "{refused:?}"
    );
}

#[test]
fn gangs_view_shows_the_constraint_and_the_domain() {
    let (mut w, _) = racks(&[4, 4], &[1, 0]);
    let members: Vec<PodInfo> = (0..4).map(|i| member(i, 4, TOPOLOGY_REQUIRED)).collect();
    run(&mut w, &members).unwrap();
    let view = w
        .table
        .views(w.now)
        .into_iter()
        .find(|v| v.name == "g")
        .unwrap();
    let t = view.topology.unwrap();
    assert_eq!(t.constraint, "required example.com/rack");
    assert_eq!(t.source, TOPOLOGY_REQUIRED);
    assert_eq!(t.domain.as_deref(), Some("rack-1"));
}

/// Preemption inside one domain: racks 0 and 1 of two 1-CPU nodes, each node running a
/// low-priority plain pod. A high-priority gang of 2 confined to one rack: a candidate whose
/// rack can hold the rest of the gang once its low pods go is kept; kube-scheduler's
/// candidates in a rack where the rest cannot follow are dropped (nothing evicted for them).
#[test]
fn a_required_gang_preempts_only_inside_one_rack() {
    let mut w = World::new(&[
        testkit::node("r0-0")
            .cpu(1000)
            .label(RACK, "rack-0")
            .build(),
        testkit::node("r0-1")
            .cpu(1000)
            .label(RACK, "rack-0")
            .build(),
        testkit::node("r1-0")
            .cpu(1000)
            .label(RACK, "rack-1")
            .build(),
        testkit::node("solo")
            .cpu(1000)
            .label(RACK, "rack-2")
            .build(),
    ]);
    // rack-0's two nodes run low pods; rack-1's only node too; rack-2's one node is free.
    let low: Vec<PodInfo> = ["r0-0", "r0-1", "r1-0"]
        .iter()
        .map(|n| {
            pod(&format!("low-{n}"))
                .cpu(1000)
                .priority(100)
                .bound(n)
                .build()
        })
        .collect();
    w.add(&low.iter().collect::<Vec<_>>());
    let gang = add_rack_gang(&mut w, 2, 100_000);
    let cand = |node: &str, victim: &PodInfo| PreemptCandidate {
        node: node.to_string(),
        victims: vec![victim.uid.to_string()],
        pdb_violations: 0,
    };
    // Without the rack, r1-0 (with the free node "solo" for the other member) would do.
    let d = w.preempt(&gang[0], vec![cand("r1-0", &low[2]), cand("r0-0", &low[0])]);
    let kept: Vec<&str> = d.kept.iter().map(|c| c.node.as_str()).collect();
    assert_eq!(kept, vec!["r0-0"], "{d:?}");
    assert!(d.dropped.iter().any(|(n, _)| n == "r1-0"), "{d:?}");
}

/// `muster.dev/topology-preferred: <host>,<rack>,<block>`, from the narrowest level: the
/// narrowest level one domain of which holds the quorum.
fn preferred(i: usize, quorum: u32) -> PodInfo {
    pod(&format!("m{i}"))
        .cpu(1000)
        .gang("g", quorum)
        .annotation(
            crate::model::topology::TOPOLOGY_PREFERRED,
            "example.com/rack,example.com/block",
        )
        .build()
}

/// Racks of 2 nodes `b<block>r<rack>-<i>`; `free[block][rack]` of them with room.
fn blocks(free: &[&[usize]]) -> World {
    let mut nodes = Vec::new();
    for (b, racks) in free.iter().enumerate() {
        for (r, &f) in racks.iter().enumerate() {
            for i in 0..2 {
                nodes.push(
                    testkit::node(&format!("b{b}r{r}-{i}"))
                        .cpu(if i < f { 1000 } else { 100 })
                        .label(RACK, &format!("rack-{b}-{r}"))
                        .label("example.com/block", &format!("block-{b}"))
                        .build(),
                );
            }
        }
    }
    World::new(&nodes)
}

#[test]
fn preferred_takes_the_narrowest_level_that_holds_the_quorum() {
    // A gang of 2: block 0's racks have 1 free node each, block 1's second rack has 2.
    let mut w = blocks(&[&[1, 1], &[1, 2]]);
    let members: Vec<PodInfo> = (0..2).map(|i| preferred(i, 2)).collect();
    let bound = run(&mut w, &members).unwrap();
    assert!(
        bound.iter().all(|b| b.contains("@b1r1-")),
        "one rack: {bound:?}"
    );

    // A gang of 3: no rack holds it; block 1 does (3 free), block 0 does not (2).
    let mut w = blocks(&[&[1, 1], &[1, 2]]);
    let members: Vec<PodInfo> = (0..3).map(|i| preferred(i, 3)).collect();
    let bound = run(&mut w, &members).unwrap();
    assert!(
        bound.iter().all(|b| b.contains("@b1")),
        "one block: {bound:?}"
    );
}

#[test]
fn preferred_never_waits_for_locality_and_spans_the_fewest_blocks() {
    // A gang of 5: no block holds it (3 and 2 free, and block 2 has 1): the roomiest block
    // first, then the next: blocks 1 and 0, never block 2.
    let mut w = blocks(&[&[1, 1], &[1, 2], &[1, 0]]);
    let members: Vec<PodInfo> = (0..5).map(|i| preferred(i, 5)).collect();
    let bound = run(&mut w, &members).unwrap();
    assert_eq!(bound.len(), 5);
    assert!(!bound.iter().any(|b| b.contains("@b2")), "{bound:?}");
}

/// The last look before binding: a seat's node relabelled into another rack while the gang
/// gathered is not bound; nothing is.
#[test]
fn the_last_look_binds_nothing_when_a_seat_left_the_gangs_rack() {
    let (mut w, _) = racks(&[2, 2], &[0, 2]);
    let members: Vec<PodInfo> = (0..2).map(|i| member(i, 2, TOPOLOGY_REQUIRED)).collect();
    w.add(&members.iter().collect::<Vec<_>>());
    let (ok, _) = w.filter(&members[0]);
    let first = ok[0].clone();
    wait_message(&w.bind(&members[0], &first));
    let (ok, _) = w.filter(&members[1]);
    let second = ok[0].clone();
    assert_eq!(rack_of(&first), rack_of(&second));
    // The second node moves to rack 1 before the second member's bind.
    w.table.apply_node(
        testkit::node(&second)
            .cpu(1000)
            .label(RACK, "rack-1")
            .build(),
    );
    let d = w.bind(&members[1], &second);
    assert!(!matches!(d, BindDecision::BindGang { .. }), "{d:?}");
    let said = match &d {
        BindDecision::Wait { message, .. } => message.clone(),
        BindDecision::Reject(r) => r.to_string(),
        other => panic!("{other:?}"),
    };
    assert!(
        said.contains(&format!(
            "node {second} is no longer in its example.com/rack rack-0"
        )),
        "{said}"
    );
}

/// Preemption inside the domain with the fewest victims: racks of 4 one-CPU nodes; rack 0
/// runs 2 plain pods of priority 0, rack 1 one, rack 2 three. A high-priority gang of 4 confined to one
/// rack fits only by evicting; every candidate has one victim, but the rest of the gang
/// follows into rack 0 only with 1 more eviction and into rack 2 with 2 more: only rack 1's
/// candidate is kept, and its plan seats the others on rack 1's free nodes.
#[test]
fn a_required_gang_preempts_in_the_rack_with_the_fewest_victims() {
    // The plain pods have priority 0.
    let (mut w, low) = racks(&[4, 4, 4], &[2, 1, 3]);
    let gang = add_rack_gang(&mut w, 4, 100_000);
    let candidates: Vec<PreemptCandidate> = low
        .iter()
        .map(|v| PreemptCandidate {
            node: v.node_name.as_ref().unwrap().to_string(),
            victims: vec![v.uid.to_string()],
            pdb_violations: 0,
        })
        .collect();
    let d = w.preempt(&gang[0], candidates);
    let kept: Vec<&str> = d.kept.iter().map(|c| c.node.as_str()).collect();
    assert_eq!(kept, vec!["r1-0"], "{d:?}");
    let more: Vec<(&str, usize)> = d
        .dropped
        .iter()
        .filter_map(|(n, why)| match why {
            DropReason::DomainEvictsMore { victims, best: 1 } => Some((n.as_str(), *victims)),
            _ => None,
        })
        .collect();
    assert_eq!(
        more,
        vec![
            ("r0-0", 2),
            ("r0-1", 2),
            ("r2-0", 3),
            ("r2-1", 3),
            ("r2-2", 3)
        ],
        "{d:?}"
    );
    assert!(DropReason::DomainEvictsMore {
        victims: 2,
        best: 1
    }
    .explain(&gang[0])
    .contains(
        "would evict 2 pods inside this node's topology domain; another domain needs only 1"
    ),);
}

/// A later member of a placed gang with `topology-preferred: rack,block` (a replacement, an
/// elastic member beyond the quorum): prioritize scores nodes in the gang's rack highest, then
/// nodes of the gang's block, then the rest; filter still offers every node with room, so when
/// the gang's rack is full the member goes to the nearest room (same block first) and never
/// waits for locality.
#[test]
fn a_later_member_of_a_preferred_gang_goes_to_the_nearest_domain() {
    // Block 0: rack 0 with 2 free nodes, rack 1 with 2; block 1: rack 0 with 2.
    let mut w = blocks(&[&[2, 2], &[2]]);
    let members: Vec<PodInfo> = (0..2).map(|i| preferred(i, 2)).collect();
    let bound = run(&mut w, &members).unwrap();
    let rack: Vec<&str> = bound
        .iter()
        .map(|b| b.split('@').nth(1).unwrap().split('-').next().unwrap())
        .collect();
    assert!(rack.iter().all(|r| *r == rack[0]), "one rack: {bound:?}");
    let (block, gang_rack) = (&rack[0][..2], rack[0]);
    let all = w.all_nodes();
    let extra = preferred(2, 2);
    w.add(&[&extra]);
    let (ok, _) = w.filter(&extra);
    // The gang's rack is full now: every other node with room is offered.
    assert_eq!(ok.len(), 4, "{ok:?}");
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let scores = w.table.prioritize(&extra, &refs);
    for (node, score) in all.iter().zip(&scores) {
        let want = if node.starts_with(gang_rack) {
            10
        } else if node.starts_with(block) {
            5
        } else {
            0
        };
        assert_eq!(*score, want, "{node}: {all:?} {scores:?}");
    }
    // The best-scored node with room is in the gang's block.
    let best = ok
        .iter()
        .max_by_key(|n| scores[all.iter().position(|a| a == *n).unwrap()])
        .unwrap();
    assert!(best.starts_with(block), "{best} {ok:?}");
}

/// Two members of a gang confined to one rack ask to preempt at once (kube-scheduler works on
/// both before the first one's nomination shows): the first is kept inside rack 1; the second,
/// while that plan waits for its nomination, is refused (its room is planned already), so
/// nothing is evicted for it in another rack.
#[test]
fn a_second_member_preempting_while_the_first_ones_plan_waits_evicts_nothing() {
    let (mut w, low) = racks(&[4, 4, 4], &[2, 1, 3]);
    let gang = add_rack_gang(&mut w, 4, 100_000);
    let candidates: Vec<PreemptCandidate> = low
        .iter()
        .map(|v| PreemptCandidate {
            node: v.node_name.as_ref().unwrap().to_string(),
            victims: vec![v.uid.to_string()],
            pdb_violations: 0,
        })
        .collect();
    let d = w.preempt(&gang[0], candidates.clone());
    assert_eq!(d.kept.len(), 1, "{d:?}");
    let rest: Vec<PreemptCandidate> = candidates
        .into_iter()
        .filter(|c| !c.node.starts_with("r1"))
        .collect();
    let d = w.preempt(&gang[1], rest);
    assert!(d.kept.is_empty(), "{d:?}");
    assert!(
        d.dropped
            .iter()
            .all(|(_, why)| *why == DropReason::SiblingPreempting),
        "{d:?}"
    );
}

/// Gang `g` of `n` one-CPU members `g-<i>` of `priority`, required in one rack, delivered by
/// the watch.
fn add_rack_gang(w: &mut World, n: u32, priority: i32) -> Vec<PodInfo> {
    let gang: Vec<PodInfo> = (0..n)
        .map(|i| {
            pod(&format!("g-{i}"))
                .cpu(1000)
                .priority(priority)
                .gang("g", n)
                .annotation(TOPOLOGY_REQUIRED, RACK)
                .build()
        })
        .collect();
    w.add(&gang.iter().collect::<Vec<_>>());
    gang
}

/// Racks `b0r<r>-<i>` in one block: `racks[r]` is (nodes, cpu of each).
fn one_block(racks: &[(usize, i64)]) -> World {
    let mut nodes = Vec::new();
    for (r, &(n, cpu)) in racks.iter().enumerate() {
        for i in 0..n {
            nodes.push(
                testkit::node(&format!("b0r{r}-{i}"))
                    .cpu(cpu)
                    .label(RACK, &format!("rack-0-{r}"))
                    .label("example.com/block", "block-0")
                    .build(),
            );
        }
    }
    World::new(&nodes)
}

/// Member `i` of a preferred (rack, then block) gang of 4, of `cpu` millicores.
fn preferred_of(i: usize, cpu: i64) -> PodInfo {
    pod(&format!("m{i}"))
        .cpu(cpu)
        .gang("g", 4)
        .annotation(
            crate::model::topology::TOPOLOGY_PREFERRED,
            "example.com/rack,example.com/block",
        )
        .build()
}

/// Member `i` of a gang of 4 required in one rack, of `cpu` millicores.
fn required_of(i: usize, cpu: i64) -> PodInfo {
    pod(&format!("m{i}"))
        .cpu(cpu)
        .gang("g", 4)
        .annotation(TOPOLOGY_REQUIRED, RACK)
        .build()
}

/// The every-pod mode, members created one by one: the first, `member(0, 100)`, asks alone
/// (and is seated where its plan puts it, the rest of the gang held as copies of it), then the
/// rest appear, three of 900m. The first, the rest, and the first's seat.
fn first_alone_then_larger(
    w: &mut World,
    member: fn(usize, i64) -> PodInfo,
) -> (PodInfo, Vec<PodInfo>, String) {
    let first = member(0, 100);
    let rest: Vec<PodInfo> = (1..4).map(|i| member(i, 900)).collect();
    w.add(&[&first]);
    let (ok, _) = w.filter(&first);
    assert_eq!(ok.len(), 1, "{ok:?}");
    assert!(matches!(w.bind(&first, &ok[0]), BindDecision::Wait { .. }));
    w.table.take_released();
    w.add(&rest.iter().collect::<Vec<_>>());
    (first, rest, ok[0].clone())
}

/// [`bind_each`] for the whole gang of 4: every member bound in rack `r` of block 0.
fn bind_all_in_rack(w: &mut World, members: &[&PodInfo], r: usize) {
    let bound = bind_each(w, members);
    assert_eq!(bound.len(), 4, "{bound:?}");
    let rack = format!("@b0r{r}-");
    assert!(
        bound.iter().all(|b| b.contains(&rack)),
        "one rack: {bound:?}"
    );
}

/// Filters and binds each of `members` once, in order; the bindings at quorum.
fn bind_each(w: &mut World, members: &[&PodInfo]) -> Vec<String> {
    let mut bound = Vec::new();
    for m in members {
        let (ok, reasons) = w.filter(m);
        assert_eq!(ok.len(), 1, "{}: {ok:?} {reasons:?}", m.name);
        match w.bind(m, &ok[0]) {
            BindDecision::Wait { .. } => {}
            d @ BindDecision::BindGang { .. } => {
                w.confirm(&d);
                bound = names(&d);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    bound
}

/// A preferred gang whose first member asks before its larger siblings exist (the every-pod
/// mode, members created one by one): its plan seats copies of its own size in the rack that
/// fits them best, rack 0 (four nodes of 200m), and holds room for the rest there. The
/// siblings of 900m fit nowhere in rack 0 but all fit in rack 1 (four nodes of 1000m) with the
/// first member: the gang moves to rack 1 whole (the first member's seat is released, its held
/// bind call is answered and it asks again) instead of binding across two racks.
#[test]
fn a_preferred_gang_moves_whole_to_the_rack_that_holds_its_real_members() {
    let mut w = one_block(&[(4, 200), (4, 1000)]);
    let (first, rest, seat) = first_alone_then_larger(&mut w, preferred_of);
    assert!(
        seat.starts_with("b0r0-"),
        "best fit for copies of 100m: {seat}"
    );

    let (ok, _) = w.filter(&rest[0]);
    assert_eq!(ok.len(), 1, "{ok:?}");
    assert!(ok[0].starts_with("b0r1-"), "{ok:?}");
    // The first member's seat in rack 0 is given up: its held call answers, it asks again.
    assert!(!w.table.holds_seat(&first.uid), "seat in rack 0 released");
    assert_eq!(w.table.take_released(), vec![GangKey::new("ml", "g")]);
    assert_eq!(
        w.table.wait_reason(&first.uid).unwrap(),
        "gang ml/g moves from example.com/rack rack-0-0 to rack-0-1, which holds all 4 members \
         as they are now (rack-0-0 held room sized for members not created yet); its seats in \
         rack-0-0 are released and its seated members are scheduled again"
    );
    for i in 0..4 {
        assert_eq!(
            w.reserved(&format!("b0r0-{i}")),
            0,
            "nothing held in rack 0"
        );
    }

    // Everyone binds (the first member again, now offered its seat in rack 1).
    bind_all_in_rack(&mut w, &[&rest[0], &rest[1], &rest[2], &first], 1);
}

/// The gang above, with the first member's bind racing the move: kube-scheduler chose its
/// seat's node in rack 0 (its filter ran before the move), then a sibling's filter moved the
/// gang to rack 1 and the sibling's bind planned it there, the first member's seat with it.
/// The first member's bind then names the node chosen under the old plan: taking it would move
/// its seat back to rack 0 and seat the gang across two racks. It is refused (saying so), the
/// seat stays in rack 1, and the member, scheduled again, is offered its seat there.
#[test]
fn a_bind_chosen_before_its_gang_moved_racks_is_refused_and_its_seat_stays_in_the_new_rack() {
    let mut w = one_block(&[(4, 200), (4, 1000)]);
    let (first, rest, seat) = first_alone_then_larger(&mut w, preferred_of);
    // kube-scheduler tries the first member again (its held call gave up): offered its seat.
    let (ok, _) = w.filter(&first);
    assert_eq!(ok, vec![seat.clone()]);
    // Before its bind arrives, a sibling moves the gang and plans it in rack 1.
    let (ok, _) = w.filter(&rest[0]);
    assert!(ok.len() == 1 && ok[0].starts_with("b0r1-"), "{ok:?}");
    assert!(matches!(
        w.bind(&rest[0], &ok[0]),
        BindDecision::Wait { .. }
    ));
    let moved_to = w
        .table
        .seat_node(&first.uid)
        .expect("seated by the sibling's plan");
    assert!(moved_to.starts_with("b0r1-"), "{moved_to}");

    match w.bind(&first, &seat) {
        BindDecision::Reject(e @ BindRejection::SeatMoved(_)) => assert_eq!(
            e.to_string(),
            format!(
                "gang ml/g was placed again after node {seat} was chosen for ml/m0: its seat is \
                 now on node {moved_to}, in another topology domain; the pod is scheduled again \
                 and offered node {moved_to}"
            )
        ),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(
        w.table.seat_node(&first.uid).as_deref(),
        Some(&*moved_to),
        "the seat stays in rack 1"
    );
    assert_eq!(w.reserved(&seat), 0, "nothing held in rack 0");

    // Scheduled again, it is offered its seat; the gang binds whole in rack 1.
    bind_all_in_rack(&mut w, &[&first, &rest[1], &rest[2]], 1);
}

/// The same race, but the first member's filter ran after the sibling's plan: kube-scheduler's
/// choice of a node in rack 0 was made knowing the seat in rack 1 (its own filters excluded
/// that node), so the bind is taken and the seat moves: a member is never refused a node it
/// was offered after the plan it would break (no retry loop until the gang times out).
#[test]
fn a_bind_chosen_after_its_gang_moved_racks_is_taken() {
    let mut w = one_block(&[(4, 200), (4, 1000)]);
    let (first, rest, seat) = first_alone_then_larger(&mut w, preferred_of);
    let (ok, _) = w.filter(&rest[0]);
    assert!(matches!(
        w.bind(&rest[0], &ok[0]),
        BindDecision::Wait { .. }
    ));
    // Filtered after the plan (whatever it was offered).
    w.filter(&first);
    assert!(
        matches!(w.bind(&first, &seat), BindDecision::Wait { .. }),
        "taken"
    );
    assert_eq!(w.table.seat_node(&first.uid).as_deref(), Some(&*seat));
}

/// The same gang when no rack holds its real members (rack 1 has only two nodes of 1000m):
/// nothing moves, the first member keeps its seat, and the gang binds across racks (a
/// preference never makes a gang wait).
#[test]
fn a_preferred_gang_no_rack_of_which_holds_it_keeps_its_seats() {
    let mut w = one_block(&[(4, 200), (2, 1000), (2, 1000)]);
    let (first, rest, seat) = first_alone_then_larger(&mut w, preferred_of);
    let held: i64 = (0..4).map(|i| w.reserved(&format!("b0r0-{i}"))).sum();
    let (ok, _) = w.filter(&rest[0]);
    assert_eq!(ok.len(), 1, "{ok:?}");
    assert!(w.table.holds_seat(&first.uid), "seat kept");
    assert!(w.table.take_released().is_empty(), "no seat was given up");
    let still: i64 = (0..4).map(|i| w.reserved(&format!("b0r0-{i}"))).sum();
    assert_eq!(still, held, "the same room held");
    let bound = bind_each(&mut w, &[&rest[0], &rest[1], &rest[2]]);
    assert_eq!(bound.len(), 4, "{bound:?}");
    assert!(bound.contains(&format!("m0@{seat}")), "{bound:?}");
}

/// A member that cannot take a planned seat of its gang (they are sized for copies of the
/// first member) goes to free room in its gang's rack before a tighter node in another rack.
#[test]
fn a_preferred_gangs_member_takes_room_in_its_rack_before_a_tighter_node_elsewhere() {
    // Rack 0: four nodes of 1000m; rack 1: eight of 920m (tighter for 900m, but more room in
    // all, so copies of 100m fit rack 0 best).
    let mut w = one_block(&[(4, 1000), (8, 920)]);
    let (_, rest, seat) = first_alone_then_larger(&mut w, preferred_of);
    assert!(seat.starts_with("b0r0-"), "{seat}");
    bind_all_in_rack(&mut w, &[&rest[0], &rest[1], &rest[2]], 0);
}

/// A gang confined to one rack that no rack holds even with every lower-priority pod evicted:
/// the filter says so with the best rack after evictions and how many it would fit (explained),
/// and nothing is held. Racks of 4 one-CPU nodes; rack 0: one free node, three running pods of
/// the gang's priority; rack 1: one free, two running lower-priority pods, one of the gang's
/// priority; rack 2: every node running a pod of the gang's priority.
#[test]
fn no_rack_even_after_evictions_names_the_best_rack_and_its_numbers() {
    let (mut w, _) = racks_running(&[
        vec![None, Some(100), Some(100), Some(100)],
        vec![None, Some(0), Some(0), Some(100)],
        vec![Some(100); 4],
    ]);
    let gang = add_rack_gang(&mut w, 4, 100);
    let (ok, reasons) = w.filter(&gang[0]);
    assert!(ok.is_empty(), "{ok:?}");
    assert_eq!(
        reasons,
        vec![
            "gang ml/g needs 4 members in one example.com/rack; even after evicting \
             lower-priority pods the best rack fits 3 (rack-1)"
        ]
    );
    for n in w.all_nodes() {
        assert_eq!(w.reserved(&n), 0, "holds nothing");
    }
}

/// The same sequence for a gang that requires one rack: its seats are first in rack 0 (best
/// fit for copies of its first member); its larger members fit nowhere there, and would wait
/// for room in rack 0 until the gang timed out. Rack 1 holds them all: the gang moves there
/// whole before anything is bound, and binds there.
#[test]
fn a_required_gang_seated_before_its_larger_members_existed_moves_to_the_rack_that_holds_them() {
    let mut w = one_block(&[(4, 200), (4, 1000)]);
    let (first, rest, seat) = first_alone_then_larger(&mut w, required_of);
    assert!(seat.starts_with("b0r0-"), "{seat}");
    let (ok, _) = w.filter(&rest[0]);
    assert_eq!(ok.len(), 1, "{ok:?}");
    assert!(!w.table.holds_seat(&first.uid), "seat in rack 0 released");
    bind_all_in_rack(&mut w, &[&rest[0], &rest[1], &rest[2], &first], 1);
}

/// A gang confined to one rack that preempts: kube-scheduler's preemption on r0-0 is kept, and its
/// plan puts the other member on r0-1, where a lower-priority pod still runs (room planned,
/// no seat confirmed yet). That member is offered no node outside rack 0, not even r1-0,
/// which is free, and a bind there (a node chosen before the gang took rack 0) is refused: the
/// gang never holds or binds across two racks (holds-nothing).
#[test]
fn a_rack_gang_holding_room_for_its_preemption_is_offered_and_bound_only_in_that_rack() {
    let (mut w, low) = racks_running(&[vec![Some(0), Some(0)], vec![None, Some(0)]]);
    let gang = add_rack_gang(&mut w, 2, 100_000);
    let d = w.preempt(
        &gang[0],
        vec![PreemptCandidate {
            node: "r0-0".into(),
            victims: vec![low[0].uid.to_string()],
            pdb_violations: 0,
        }],
    );
    assert_eq!(d.outcome, PreemptOutcome::Kept, "{d:?}");
    // kube-scheduler acts: the victim terminates, the preemptor is nominated there.
    let victim = PodInfo {
        terminating: true,
        ..low[0].clone()
    };
    let preemptor = PodInfo {
        nominated_node: Some(NodeName::from("r0-0")),
        ..gang[0].clone()
    };
    w.add(&[&victim, &preemptor]);
    let (ok, reasons) = w.filter(&gang[1]);
    assert!(ok.iter().all(|n| rack_of(n) == "r0"), "{ok:?}");
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("node is outside its gang's example.com/rack rack-0")),
        "{reasons:?}"
    );
    match w.bind(&gang[1], "r1-0") {
        BindDecision::Reject(r @ BindRejection::OutsideDomain(_)) => assert_eq!(
            r.to_string(),
            "gang ml/g is held to example.com/rack rack-0, and node r1-0 chosen for ml/g-1 is \
             outside it; the pod is scheduled again and offered nodes there"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(w.reserved("r1-0"), 0);
}

/// A placed gang confined to one rack: a later member's bind on a node outside the rack (chosen
/// by a filter that ran before the gang was placed) is refused, as its filter now refuses
/// that node.
#[test]
fn a_later_member_of_a_placed_rack_gang_is_not_bound_outside_its_rack() {
    let (mut w, _) = racks(&[2, 2], &[0, 0]);
    let members: Vec<PodInfo> = (0..2).map(|i| member(i, 2, TOPOLOGY_REQUIRED)).collect();
    let bound = run(&mut w, &members).unwrap();
    let rack = rack_of(bound[0].split('@').nth(1).unwrap()).to_string();
    let other = if rack == "r0" { "r1-0" } else { "r0-0" };
    let later = member(2, 2, TOPOLOGY_REQUIRED);
    w.add(&[&later]);
    let (ok, _) = w.filter(&later);
    assert!(ok.iter().all(|n| rack_of(n) == rack), "{ok:?}");
    assert!(
        matches!(
            w.bind(&later, other),
            BindDecision::Reject(BindRejection::OutsideDomain(_))
        ),
        "bound outside {rack}"
    );
}

/// A gang confined to one rack found partly bound when muster starts deciding (killed in the
/// middle of its bindings): its rest fits only outside the rack of its bound member, so it is
/// given up and its bound member evicted, not left partly bound because no rack holds it
/// (never-half). Before, a domain shortfall counted as "not decidable yet".
#[test]
fn a_partly_bound_rack_gang_whose_rest_fits_only_in_another_rack_is_evicted() {
    // Rack 0: r0-0 runs m0 (of the gang), r0-1 a plain pod; rack 1: two free nodes.
    let (mut w, _) = racks_running(&[vec![None, Some(0)], vec![None, None]]);
    let bound = pod("m0")
        .cpu(1000)
        .gang("g", 2)
        .annotation(TOPOLOGY_REQUIRED, RACK)
        .bound("r0-0")
        .build();
    w.add(&[&bound, &member(1, 2, TOPOLOGY_REQUIRED)]);
    let found = w.table.repair_partly_bound(w.now);
    assert_eq!(found.len(), 1, "found and decided");
    let crate::model::PartlyBoundOutcome::Evicting { members, why } = &found[0].outcome else {
        panic!("expected eviction, got {:?}", found[0].outcome);
    };
    let evicted: Vec<&str> = members.iter().map(|p| &*p.name).collect();
    assert_eq!(evicted, vec!["m0"]);
    assert!(why.contains("example.com/rack"), "{why}");
    assert_eq!(w.reserved("r1-0") + w.reserved("r1-1"), 0, "holds nothing");
}
