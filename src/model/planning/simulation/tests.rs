use super::*;
use crate::model::rules::fixtures::{term, PodRulesBuilder, HOSTNAME};
use crate::model::rules::{ClusterSnapshot, NamespaceLabels};
use crate::testkit::{node, pod};

fn ledger(nodes: &[(&str, i64)]) -> NodeLedger {
    let mut l = NodeLedger::default();
    for (name, cpu) in nodes {
        l.upsert(node(name).cpu(*cpu).build());
    }
    l
}

fn names(l: &NodeLedger, placed: &[(&str, usize)]) -> Vec<String> {
    placed
        .iter()
        .map(|(who, i)| format!("{who}@{}", l.at(*i).name()))
        .collect()
}

fn members<'p>(pods: &[(&'static str, &'p PodInfo)]) -> Vec<Member<'p, &'static str>> {
    pods.iter()
        .enumerate()
        .map(|(index, (holder, pod))| Member {
            holder: *holder,
            index,
            pod,
        })
        .collect()
}

#[test]
fn first_fit_walks_nodes_in_ledger_order_and_counts_what_it_already_placed() {
    let l = ledger(&[("a", 1000), ("b", 1000)]);
    let p: Vec<PodInfo> = (0..3)
        .map(|i| pod(&format!("p{i}")).cpu(600).build())
        .collect();
    let m = members(&[("p0", &p[0]), ("p1", &p[1]), ("p2", &p[2])]);
    let mut overlay = Overlay::default();
    let placed = first_fit_each(&l, &m, &mut overlay, &mut StaticRules);
    // Two 600m pods never share a 1000m node; the third fits nowhere and stops the loop.
    assert_eq!(names(&l, &placed), vec!["p0@a", "p1@b"]);
    assert_eq!(overlay.get(0), Some(&p[0].requests));
    // The ledger itself is untouched.
    assert!(l.at(0).reserved().is_zero() && l.at(0).used().is_zero());
}

#[test]
fn credit_counts_as_room_until_it_is_replaced() {
    let mut l = ledger(&[("full", 1000), ("free", 1000)]);
    l.charge(&NodeName::from("full"), &Resources::cpu(1000));
    let p = pod("p").cpu(1000).build();
    let m = members(&[("p", &p)]);
    let credit: HashMap<usize, Resources> = [(0, Resources::cpu(1000))].into_iter().collect();
    let mut overlay = Overlay::with_credit(credit);
    // The full node's pods may be evicted: it comes first in ledger order and takes p.
    let placed = first_fit_each(&l, &m, &mut overlay, &mut StaticRules);
    assert_eq!(names(&l, &placed), vec!["p@full"]);
    overlay.rollback(0);
    let saved = overlay.replace_credit(0, None);
    assert_eq!(saved, Some(Resources::cpu(1000)));
    let placed = first_fit_each(&l, &m, &mut overlay, &mut StaticRules);
    assert_eq!(
        names(&l, &placed),
        vec!["p@free"],
        "without the credit, full is full"
    );
}

#[test]
fn first_fit_skips_nodes_the_member_may_not_use() {
    let mut l = ledger(&[("cordoned", 1000), ("gpu", 1000), ("plain", 1000)]);
    l.upsert(node("cordoned").cpu(1000).unschedulable().build());
    l.upsert(node("gpu").cpu(1000).label("pool", "gpu").build());
    let wants_gpu = pod("w").node_selector("pool", "gpu").build();
    let any = pod("any").build();
    let mut overlay = Overlay::default();
    let m = members(&[("w", &wants_gpu), ("any", &any)]);
    let placed = first_fit_each(&l, &m, &mut overlay, &mut StaticRules);
    assert_eq!(names(&l, &placed), vec!["w@gpu", "any@gpu"]);
}

#[test]
fn a_rollback_gives_back_exactly_what_was_taken_after_the_checkpoint() {
    let l = ledger(&[("a", 1000)]);
    let p = pod("p").cpu(400).build();
    let mut overlay = Overlay::default();
    overlay.take(0, &p.requests);
    let cp = overlay.checkpoint();
    let m = members(&[("p", &p)]);
    assert_eq!(
        first_fit_each(&l, &m, &mut overlay, &mut StaticRules).len(),
        1
    );
    assert_eq!(
        first_fit_each(&l, &m, &mut overlay, &mut StaticRules).len(),
        0,
        "1000m holds two 400m pods, not three"
    );
    overlay.rollback(cp);
    assert_eq!(overlay.get(0).map(|r| r.cpu_milli), Some(400));
    overlay.rollback(0);
    assert_eq!(overlay.get(0).map(|r| r.cpu_milli), Some(0));
}

fn worker(name: &str) -> PodInfo {
    PodRulesBuilder::default()
        .anti_affinity(term(&[("job", "j1")], HOSTNAME))
        .on(pod(name).label("job", "j1").build())
}

fn hostnamed(l: &mut NodeLedger, names: &[&str]) {
    for n in names {
        l.upsert(node(n).cpu(4000).label(HOSTNAME, n).build());
    }
}

/// InterPodAffinity among the gang's own members: three workers that repel each other per
/// node fit on three nodes, not on two, though two nodes have room for all of them.
#[test]
fn members_placed_by_the_simulation_count_for_the_next_members_anti_affinity() {
    let ns = NamespaceLabels::default();
    let w: Vec<PodInfo> = (0..3).map(|i| worker(&format!("w{i}"))).collect();
    let refs: Vec<&PodInfo> = w.iter().collect();
    let m = members(&[("w0", &w[0]), ("w1", &w[1]), ("w2", &w[2])]);

    let mut two = NodeLedger::default();
    hostnamed(&mut two, &["n0", "n1"]);
    let nodes: Vec<&NodeInfo> = two.iter().map(|(_, e)| e.info()).collect();
    let cluster = ClusterSnapshot::new(nodes, vec![], &ns);
    let mut rules = GangRules {
        devices: None,
        placement: GangPlacement::new(&refs, &cluster),
        allowed: vec![None; 3],
    };
    let mut overlay = Overlay::default();
    let placed = first_fit_each(&two, &m, &mut overlay, &mut rules);
    assert_eq!(names(&two, &placed), vec!["w0@n0", "w1@n1"]);
    let d = diagnose(&two, &rules, &overlay, 2, &w[2]);
    assert_eq!(d.refused_by(Reason::PodAntiAffinity), 2);
    // Rolling both back together leaves no trace of the attempt.
    rules.rollback(0);
    overlay.rollback(0);
    assert!(admits(&two, &rules, &overlay, 2, &w[2], 0).is_ok());

    let mut three = NodeLedger::default();
    hostnamed(&mut three, &["n0", "n1", "n2"]);
    let nodes: Vec<&NodeInfo> = three.iter().map(|(_, e)| e.info()).collect();
    let cluster = ClusterSnapshot::new(nodes, vec![], &ns);
    let mut rules = GangRules {
        devices: None,
        placement: GangPlacement::new(&refs, &cluster),
        allowed: vec![None; 3],
    };
    let placed = first_fit_each(&three, &m, &mut Overlay::default(), &mut rules);
    assert_eq!(placed.len(), 3, "a third node: the gang fits whole");
}

/// Evidence: a node the member's own filter call left out is not planned for it.
#[test]
fn a_member_is_not_planned_onto_a_node_its_own_filter_call_excluded() {
    let ns = NamespaceLabels::default();
    let l = ledger(&[("a", 1000), ("b", 1000)]);
    let p = pod("p").build();
    let refs = [&p];
    let nodes: Vec<&NodeInfo> = l.iter().map(|(_, e)| e.info()).collect();
    let cluster = ClusterSnapshot::new(nodes, vec![], &ns);
    let passed: HashSet<NodeName> = [NodeName::from("b")].into_iter().collect();
    let mut rules = GangRules {
        devices: None,
        placement: GangPlacement::new(&refs, &cluster),
        allowed: vec![Some(&passed)],
    };
    let placed = first_fit_each(
        &l,
        &members(&[("p", &p)]),
        &mut Overlay::default(),
        &mut rules,
    );
    assert_eq!(names(&l, &placed), vec!["p@b"]);
}

/// DynamicResources (kube-scheduler's plugin) with first fit resuming: the workers of a job,
/// each a pod of its own with its own claim from one template, are alike, so each starts where
/// the previous one went; the placement is the same first fit, and the nodes checked grow with
/// the nodes, not with members × nodes. A claim two members share makes them not alike (where
/// the first allocates it decides where the second can go).
#[test]
fn dynamic_resources_members_alike_resume_first_fit_where_the_previous_one_went() {
    use crate::model::inputs::devices::{
        AllocationMode, ClaimSource, ClaimSpec, Device, DeviceClass, DeviceInventory, NodeScope,
        PodClaim, Request, Slice,
    };
    use crate::model::inputs::objects::PodRules;
    use crate::model::rules::dynamic_resources::DynamicResources;
    let ns = NamespaceLabels::default();
    let l = ledger(&[
        ("n0", 8000),
        ("n1", 8000),
        ("n2", 8000),
        ("n3", 8000),
        ("n4", 8000),
        ("n5", 8000),
    ]);
    let mut inv = DeviceInventory::default();
    let class = DeviceClass {
        selectors: vec![inv.selector("device.driver == 'gpu.example.com'")],
    };
    inv.apply_class("gpu".into(), class);
    for (_, e) in l.iter() {
        let name = e.name().clone();
        inv.apply_slice(
            format!("{name}-gpus").into(),
            Slice {
                driver: "gpu.example.com".into(),
                pool: name.clone(),
                generation: 1,
                slice_count: 1,
                scope: Some(NodeScope::Node(name)),
                devices: (0..8)
                    .map(|d| Device {
                        name: format!("gpu-{d}").into(),
                        attributes: Default::default(),
                        capacity: Default::default(),
                        scope: None,
                        unsupported: None,
                    })
                    .collect(),
            },
        );
    }
    inv.apply_template(
        ("ml".into(), "eight".into()),
        ClaimSpec {
            requests: vec![Request {
                name: "gpus".into(),
                class: "gpu".into(),
                mode: AllocationMode::Exact(8),
                selectors: vec![],
            }],
            unsupported: None,
        },
    );
    let with_claim = |name: &str| {
        let mut p = pod(name).cpu(1000).build();
        p.rules = Some(Box::new(PodRules {
            claims: vec![PodClaim {
                name: "gpus".into(),
                source: ClaimSource::Template {
                    template: "eight".into(),
                    generated: None,
                },
            }],
            ..PodRules::default()
        }));
        p
    };
    let w: Vec<PodInfo> = (0..4).map(|i| with_claim(&format!("w{i}"))).collect();
    let refs: Vec<&PodInfo> = w.iter().collect();
    let m = members(&[("w0", &w[0]), ("w1", &w[1]), ("w2", &w[2]), ("w3", &w[3])]);
    let nodes: Vec<&NodeInfo> = l.iter().map(|(_, e)| e.info()).collect();
    let cluster = ClusterSnapshot::new(nodes, vec![], &ns);
    let mut rules = GangRules {
        placement: GangPlacement::new(&refs, &cluster),
        allowed: vec![None; 4],
        devices: DynamicResources::new(&inv, &refs, |_| false),
    };
    assert!(rules.likeness(1).is_some() && rules.likeness(1) == rules.likeness(3));
    let mut overlay = Overlay::default();
    let placed = first_fit_each(&l, &m, &mut overlay, &mut rules);
    assert_eq!(names(&l, &placed), ["w0@n0", "w1@n1", "w2@n2", "w3@n3"]);
    // w0: n0; each next one: the previous one's node (refused: no device left), then its own.
    assert_eq!(
        overlay.checks,
        1 + 2 + 2 + 2,
        "restarting would check 1+2+3+4"
    );

    // w0 and w1 share one claim: not alike to each other, nor to the others.
    let mut shared = with_claim("s0");
    shared.rules.as_mut().unwrap().claims[0].source = ClaimSource::Claim("one".into());
    let spec = inv.template("ml", "eight").unwrap().clone();
    inv.apply_claim(
        ("ml".into(), "one".into()),
        crate::model::inputs::devices::Claim {
            spec,
            allocation: None,
        },
    );
    let refs = [&shared, &shared, &w[2]];
    let dra = DynamicResources::new(&inv, &refs, |_| false).unwrap();
    assert_eq!(dra.likeness(0), None);
    assert_eq!(dra.likeness(1), None);
    assert!(dra.likeness(2).is_some());
}
