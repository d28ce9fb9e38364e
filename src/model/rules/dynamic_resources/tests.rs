//! Table tests of the DynamicResources rule, named after kube-scheduler's plugin
//! (`pkg/scheduler/framework/plugins/dynamicresources`) and the structured allocator it runs.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::model::inputs::devices::{
    Allocation, AllocationMode, AttrValue, Claim, ClaimSource, ClaimSpec, Device, DeviceClass,
    DeviceId, DeviceInventory, NodeScope, PodClaim, Request, Slice,
};
use crate::model::inputs::objects::{NodeInfo, PodInfo, PodRules};
use crate::model::inputs::terms::{NodeSelector, NodeSelectorTerm};
use crate::model::rules::fixtures::{node, pod};

const GPU: &str = "gpu.example.com";

fn device(name: &str, model: &str) -> Device {
    Device {
        name: name.into(),
        attributes: attributes([("model", AttrValue::String(model.into()))]),
        capacity: BTreeMap::new(),
        scope: None,
        unsupported: None,
    }
}

/// `n` GPUs of `model` on `node`, in a pool of their own.
fn gpus(inv: &mut DeviceInventory, node: &str, n: usize, model: &str) {
    inv.apply_slice(
        format!("{node}-{GPU}").into(),
        Slice {
            driver: GPU.into(),
            pool: node.into(),
            generation: 1,
            slice_count: 1,
            scope: Some(NodeScope::Node(node.into())),
            devices: (0..n).map(|i| device(&format!("gpu-{i}"), model)).collect(),
        },
    );
}

/// Claim `ns/name`, allocated: device gpu-0 of node n1's pool.
fn claim_allocated_gpu_0_of_n1(inv: &mut DeviceInventory, ns: &str, name: &str) {
    inv.apply_claim(
        (ns.into(), name.into()),
        Claim {
            spec: ClaimSpec::default(),
            allocation: Some(Allocation {
                devices: vec![DeviceId {
                    driver: GPU.into(),
                    pool: "n1".into(),
                    name: "gpu-0".into(),
                }],
                node_selector: None,
            }),
        },
    );
}

fn inventory(per_node: &[(&str, usize)]) -> DeviceInventory {
    let mut inv = DeviceInventory::default();
    let class = DeviceClass {
        selectors: vec![inv.selector(&format!("device.driver == '{GPU}'"))],
    };
    inv.apply_class(GPU.into(), class);
    for (n, count) in per_node {
        gpus(&mut inv, n, *count, "a100");
    }
    inv
}

fn request(mode: AllocationMode, selectors: Vec<Arc<Selector>>) -> Request {
    Request {
        name: "gpus".into(),
        class: GPU.into(),
        mode,
        selectors,
    }
}

fn template(inv: &mut DeviceInventory, name: &str, mode: AllocationMode) {
    inv.apply_template(
        ("ml".into(), name.into()),
        ClaimSpec {
            requests: vec![request(mode, vec![])],
            unsupported: None,
        },
    );
}

fn with_claims(mut p: PodInfo, claims: &[ClaimSource]) -> PodInfo {
    let rules = PodRules {
        claims: claims
            .iter()
            .enumerate()
            .map(|(i, source)| PodClaim {
                name: format!("c{i}"),
                source: source.clone(),
            })
            .collect(),
        ..PodRules::default()
    };
    p.rules = Some(Box::new(rules));
    p
}

fn from_template(t: &str) -> ClaimSource {
    ClaimSource::Template {
        template: t.into(),
        generated: None,
    }
}

fn nodes(names: &[&str]) -> Vec<NodeInfo> {
    names.iter().map(|n| node(n)).collect()
}

/// First fit of every member, in order, as the simulation runs it: the node each went to.
fn first_fit(dra: &mut DynamicResources<'_>, members: usize, nodes: &[NodeInfo]) -> Vec<String> {
    let mut placed = Vec::new();
    for m in 0..members {
        let Some(n) = nodes.iter().find(|n| dra.check(m, n).is_ok()) else {
            break;
        };
        dra.place(m, n);
        placed.push(n.name.to_string());
    }
    placed
}

#[test]
fn dynamic_resources_exact_count_is_checked_node_by_node_never_as_a_sum() {
    // 4 + 2 + 2 devices: 8 in all, but only one node has 4.
    let mut inv = inventory(&[("n1", 4), ("n2", 2), ("n3", 2)]);
    template(&mut inv, "four", AllocationMode::Exact(4));
    let p = with_claims(pod("w"), &[from_template("four")]);
    let members = [&p, &p];
    let mut dra = DynamicResources::new(&inv, &members, |_| false).unwrap();
    let ns = nodes(&["n1", "n2", "n3"]);
    assert_eq!(
        first_fit(&mut dra, 2, &ns),
        ["n1"],
        "the second member fits nowhere"
    );
    assert_eq!(dra.check(1, &ns[1]), Err(Reason::DynamicResources));
    assert_eq!(
        dra.shortfall(1, &ns.iter().collect::<Vec<_>>()).unwrap(),
        "2 members need 4 devices of class gpu.example.com each; nodes with 4 free: 1"
    );
    // A fourth node with 4: both placed, each on its own node.
    gpus(&mut inv, "n4", 4, "a100");
    let mut dra = DynamicResources::new(&inv, &members, |_| false).unwrap();
    let ns = nodes(&["n1", "n2", "n3", "n4"]);
    assert_eq!(first_fit(&mut dra, 2, &ns), ["n1", "n4"]);
}

#[test]
fn dynamic_resources_devices_allocated_to_claims_are_taken() {
    let mut inv = inventory(&[("n1", 4)]);
    claim_allocated_gpu_0_of_n1(&mut inv, "other", "held");
    template(&mut inv, "four", AllocationMode::Exact(4));
    template(&mut inv, "three", AllocationMode::Exact(3));
    let four = with_claims(pod("a"), &[from_template("four")]);
    let three = with_claims(pod("b"), &[from_template("three")]);
    let members = [&four, &three];
    let dra = DynamicResources::new(&inv, &members, |_| false).unwrap();
    assert_eq!(dra.check(0, &node("n1")), Err(Reason::DynamicResources));
    assert_eq!(dra.check(1, &node("n1")), Ok(()));
}

/// A seat of a pod outside the simulation holds the devices its claims would get on its node
/// (kube-scheduler allocates them only in the pod's binding cycle); a rollback of the
/// simulation never gives them back; a seat whose claim is allocated holds nothing more (its
/// devices are the claim's).
#[test]
fn dynamic_resources_a_seat_holds_the_devices_its_claims_need() {
    let mut inv = inventory(&[("n1", 4)]);
    template(&mut inv, "two", AllocationMode::Exact(2));
    template(&mut inv, "three", AllocationMode::Exact(3));
    let seated = with_claims(pod("s"), &[from_template("three")]);
    let p = with_claims(pod("w"), &[from_template("two")]);
    let members = [&p];
    let n1 = node("n1");
    let mut dra = DynamicResources::new(&inv, &members, |_| false).unwrap();
    assert_eq!(dra.check(0, &n1), Ok(()));
    dra.hold(&seated, &n1);
    assert_eq!(
        dra.check(0, &n1),
        Err(Reason::DynamicResources),
        "1 of 4 left"
    );
    let cp = dra.checkpoint();
    dra.rollback(cp);
    assert_eq!(
        dra.check(0, &n1),
        Err(Reason::DynamicResources),
        "still held"
    );

    // Its claim allocated (gpu-0): only that device is taken, once.
    claim_allocated_gpu_0_of_n1(&mut inv, "ml", "s-three");
    let seated = with_claims(pod("s"), &[ClaimSource::Claim("s-three".into())]);
    let mut dra = DynamicResources::new(&inv, &members, |_| false).unwrap();
    dra.hold(&seated, &n1);
    assert_eq!(dra.check(0, &n1), Ok(()), "3 of 4 free");
}

#[test]
fn dynamic_resources_rollback_gives_the_devices_back() {
    let mut inv = inventory(&[("n1", 4)]);
    template(&mut inv, "four", AllocationMode::Exact(4));
    let p = with_claims(pod("w"), &[from_template("four")]);
    let members = [&p, &p];
    let mut dra = DynamicResources::new(&inv, &members, |_| false).unwrap();
    let n1 = node("n1");
    let cp = dra.checkpoint();
    dra.place(0, &n1);
    assert_eq!(dra.check(1, &n1), Err(Reason::DynamicResources));
    dra.rollback(cp);
    assert_eq!(dra.check(1, &n1), Ok(()));
}

#[test]
fn dynamic_resources_a_shared_claim_is_allocated_once() {
    let mut inv = inventory(&[("n1", 2), ("n2", 2)]);
    inv.apply_claim(
        ("ml".into(), "shared".into()),
        Claim {
            spec: ClaimSpec {
                requests: vec![request(AllocationMode::Exact(2), vec![])],
                unsupported: None,
            },
            allocation: None,
        },
    );
    let p = with_claims(pod("w"), &[ClaimSource::Claim("shared".into())]);
    let members = [&p, &p, &p];
    let mut dra = DynamicResources::new(&inv, &members, |_| false).unwrap();
    let ns = nodes(&["n1", "n2"]);
    assert_eq!(
        first_fit(&mut dra, 3, &ns),
        ["n1", "n1", "n1"],
        "the members sharing the claim use its devices, on the node that has them"
    );
    assert_eq!(dra.check(0, &ns[1]), Err(Reason::DynamicResources));
}

#[test]
fn dynamic_resources_an_allocated_claim_keeps_its_node() {
    let mut inv = inventory(&[("n1", 2)]);
    let on_n1 = NodeSelectorTerm::parse([], [("metadata.name", "In", &["n1".to_string()][..])]);
    inv.apply_claim(
        ("ml".into(), "mine".into()),
        Claim {
            spec: ClaimSpec::default(),
            allocation: Some(Allocation {
                devices: vec![],
                node_selector: Some(NodeSelector { terms: vec![on_n1] }),
            }),
        },
    );
    let p = with_claims(pod("w"), &[ClaimSource::Claim("mine".into())]);
    let members = [&p];
    let dra = DynamicResources::new(&inv, &members, |_| false).unwrap();
    assert_eq!(dra.check(0, &node("n1")), Ok(()));
    assert_eq!(dra.check(0, &node("n2")), Err(Reason::DynamicResources));
}

#[test]
fn dynamic_resources_cel_selectors_of_class_and_request_are_both_applied() {
    let mut inv = inventory(&[]);
    gpus(&mut inv, "n1", 4, "t4");
    gpus(&mut inv, "n2", 4, "h100");
    let want_h100 = inv.selector(&format!("device.attributes['{GPU}'].model == 'h100'"));
    inv.apply_template(
        ("ml".into(), "h100".into()),
        ClaimSpec {
            requests: vec![request(AllocationMode::Exact(2), vec![want_h100])],
            unsupported: None,
        },
    );
    let p = with_claims(pod("w"), &[from_template("h100")]);
    let members = [&p];
    let dra = DynamicResources::new(&inv, &members, |_| false).unwrap();
    assert_eq!(dra.check(0, &node("n1")), Err(Reason::DynamicResources));
    assert_eq!(dra.check(0, &node("n2")), Ok(()));
    // The class's selector too: a class for another driver matches nothing.
    let other = DeviceClass {
        selectors: vec![inv.selector("device.driver == 'nic.example.com'")],
    };
    inv.apply_class(GPU.into(), other);
    let dra = DynamicResources::new(&inv, &members, |_| false).unwrap();
    assert_eq!(dra.check(0, &node("n2")), Err(Reason::DynamicResources));
}

#[test]
fn dynamic_resources_a_selector_muster_cannot_evaluate_matches_nothing_and_is_quoted() {
    let mut inv = inventory(&[("n1", 4)]);
    // Capacities are quantities, which muster does not evaluate.
    let by_memory = inv.selector(&format!(
        "device.capacity['{GPU}'].memory.compareTo(quantity('40Gi')) >= 0"
    ));
    inv.apply_template(
        ("ml".into(), "big".into()),
        ClaimSpec {
            requests: vec![request(AllocationMode::Exact(1), vec![by_memory])],
            unsupported: None,
        },
    );
    let p = with_claims(pod("w"), &[from_template("big")]);
    let members = [&p];
    let dra = DynamicResources::new(&inv, &members, |_| false).unwrap();
    let n1 = node("n1");
    assert_eq!(dra.check(0, &n1), Err(Reason::DynamicResources));
    let m = dra.shortfall(0, &[&n1]).unwrap();
    assert!(m.contains("muster could not evaluate a selector"), "{m}");
}

#[test]
fn dynamic_resources_allocation_mode_all_takes_every_matching_device_all_free() {
    let mut inv = inventory(&[("n1", 3), ("n2", 0)]);
    template(&mut inv, "all", AllocationMode::All);
    let p = with_claims(pod("w"), &[from_template("all")]);
    let members = [&p, &p];
    let mut dra = DynamicResources::new(&inv, &members, |_| false).unwrap();
    let ns = nodes(&["n1", "n2"]);
    assert_eq!(
        dra.check(0, &ns[1]),
        Err(Reason::DynamicResources),
        "none: no fit"
    );
    assert_eq!(
        first_fit(&mut dra, 2, &ns),
        ["n1"],
        "the second finds n1's devices taken"
    );
}

#[test]
fn dynamic_resources_what_muster_does_not_simulate_never_fits() {
    let mut inv = inventory(&[("n1", 4)]);
    inv.apply_template(
        ("ml".into(), "alternatives".into()),
        ClaimSpec {
            requests: vec![],
            unsupported: Some("request gpus: prioritized alternatives (firstAvailable)".into()),
        },
    );
    let p = with_claims(pod("w"), &[from_template("alternatives")]);
    let members = [&p];
    let dra = DynamicResources::new(&inv, &members, |_| false).unwrap();
    let n1 = node("n1");
    assert_eq!(dra.check(0, &n1), Err(Reason::DynamicResources));
    let m = dra.shortfall(0, &[&n1]).unwrap();
    assert_eq!(
        m,
        "ResourceClaimTemplate ml/alternatives uses request gpus: prioritized alternatives \
         (firstAvailable), which muster does not simulate: the gang holds nothing"
    );
    // A partitionable device is never counted as free.
    let mut inv = inventory(&[]);
    let mut d = device("gpu-0", "a100");
    d.unsupported = Some("shared counters (a partitionable device)");
    inv.apply_slice(
        "s".into(),
        Slice {
            driver: GPU.into(),
            pool: "n1".into(),
            generation: 1,
            slice_count: 1,
            scope: Some(NodeScope::Node("n1".into())),
            devices: vec![d],
        },
    );
    template(&mut inv, "one", AllocationMode::Exact(1));
    let p = with_claims(pod("w"), &[from_template("one")]);
    let members = [&p];
    let dra = DynamicResources::new(&inv, &members, |_| false).unwrap();
    assert_eq!(dra.check(0, &n1), Err(Reason::DynamicResources));
}

#[test]
fn dynamic_resources_missing_claims_and_templates_fit_nowhere() {
    let inv = inventory(&[("n1", 4)]);
    let p = with_claims(pod("w"), &[ClaimSource::Claim("nope".into())]);
    let q = with_claims(pod("v"), &[from_template("nope")]);
    let members = [&p, &q];
    let dra = DynamicResources::new(&inv, &members, |_| false).unwrap();
    assert_eq!(dra.check(0, &node("n1")), Err(Reason::DynamicResources));
    assert_eq!(dra.check(1, &node("n1")), Err(Reason::DynamicResources));
    assert!(dra
        .shortfall(0, &[&node("n1")])
        .unwrap()
        .contains("does not exist"));
}

#[test]
fn dynamic_resources_a_member_not_created_yet_gets_a_new_claim_from_its_template() {
    let mut inv = inventory(&[("n1", 4), ("n2", 4)]);
    template(&mut inv, "four", AllocationMode::Exact(4));
    inv.apply_claim(
        ("ml".into(), "w-c0-abc".into()),
        Claim {
            spec: ClaimSpec {
                requests: vec![request(AllocationMode::Exact(4), vec![])],
                unsupported: None,
            },
            allocation: None,
        },
    );
    let p = with_claims(
        pod("w"),
        &[ClaimSource::Template {
            template: "four".into(),
            generated: Some("w-c0-abc".into()),
        }],
    );
    // Member 1 is a copy of `p` standing for a member not created yet: its claim is new, not
    // `p`'s.
    let members = [&p, &p];
    let mut dra = DynamicResources::new(&inv, &members, |i| i == 1).unwrap();
    assert_eq!(first_fit(&mut dra, 2, &nodes(&["n1", "n2"])), ["n1", "n2"]);
}

#[test]
fn dynamic_resources_pods_without_claims_need_no_state() {
    let inv = inventory(&[("n1", 4)]);
    let p = pod("plain");
    assert!(DynamicResources::new(&inv, &[&p], |_| false).is_none());
}

#[test]
fn dynamic_resources_verdicts_are_kept_across_simulations_until_a_slice_changes() {
    let mut inv = inventory(&[]);
    gpus(&mut inv, "n1", 2, "t4");
    let want_h100 = inv.selector(&format!("device.attributes['{GPU}'].model == 'h100'"));
    inv.apply_template(
        ("ml".into(), "h100".into()),
        ClaimSpec {
            requests: vec![request(AllocationMode::Exact(2), vec![want_h100])],
            unsupported: None,
        },
    );
    let p = with_claims(pod("w"), &[from_template("h100")]);
    let members = [&p];
    let n1 = node("n1");
    for _ in 0..2 {
        let dra = DynamicResources::new(&inv, &members, |_| false).unwrap();
        assert_eq!(dra.check(0, &n1), Err(Reason::DynamicResources));
    }
    // The driver republishes n1's devices as h100s: the kept verdicts are dropped.
    gpus(&mut inv, "n1", 2, "h100");
    let dra = DynamicResources::new(&inv, &members, |_| false).unwrap();
    assert_eq!(dra.check(0, &n1), Ok(()));
}

/// The structured allocator backtracks (`allocateOne`): a request that took a device a later
/// request alone can use takes another. n1 has an a100 then an h100; a claim asks for one
/// device of any model, then one a100. Taking the first free device for each request in turn
/// gives the a100 to the first and leaves the second nothing; kube-scheduler allocates the
/// h100 to the first and the a100 to the second, and so must the simulation.
#[test]
fn dynamic_resources_a_later_request_gets_the_device_only_it_can_use_as_the_allocator_backtracks() {
    let mut inv = inventory(&[]);
    inv.apply_slice(
        format!("n1-{GPU}").into(),
        Slice {
            driver: GPU.into(),
            pool: "n1".into(),
            generation: 1,
            slice_count: 1,
            scope: Some(NodeScope::Node("n1".into())),
            devices: vec![device("gpu-0", "a100"), device("gpu-1", "h100")],
        },
    );
    let a100 = inv.selector(&format!("device.attributes['{GPU}'].model == 'a100'"));
    let named = |name: &str, mode, selectors| Request {
        name: name.into(),
        ..request(mode, selectors)
    };
    inv.apply_template(
        ("ml".into(), "pair".into()),
        ClaimSpec {
            requests: vec![
                named("any", AllocationMode::Exact(1), vec![]),
                named("a100", AllocationMode::Exact(1), vec![a100.clone()]),
            ],
            unsupported: None,
        },
    );
    let p = with_claims(pod("w"), &[from_template("pair")]);
    let members = [&p, &p];
    let mut dra = DynamicResources::new(&inv, &members, |_| false).unwrap();
    let n1 = node("n1");
    assert_eq!(dra.check(0, &n1), Ok(()));
    dra.place(0, &n1);
    assert_eq!(
        dra.check(1, &n1),
        Err(Reason::DynamicResources),
        "both devices taken by the first member"
    );

    // The same across two claims of one member (kube-scheduler allocates a pod's claims
    // together), and an `All` request's devices are never given to another request.
    inv.apply_template(
        ("ml".into(), "any".into()),
        ClaimSpec {
            requests: vec![named("any", AllocationMode::Exact(1), vec![])],
            unsupported: None,
        },
    );
    inv.apply_template(
        ("ml".into(), "every-a100".into()),
        ClaimSpec {
            requests: vec![named("a100", AllocationMode::All, vec![a100])],
            unsupported: None,
        },
    );
    let two = with_claims(
        pod("w"),
        &[from_template("any"), from_template("every-a100")],
    );
    let members = [&two];
    let dra = DynamicResources::new(&inv, &members, |_| false).unwrap();
    assert_eq!(dra.check(0, &n1), Ok(()));
    let both_all = with_claims(
        pod("w"),
        &[from_template("every-a100"), from_template("every-a100")],
    );
    let members = [&both_all];
    let dra = DynamicResources::new(&inv, &members, |_| false).unwrap();
    assert_eq!(
        dra.check(0, &n1),
        Err(Reason::DynamicResources),
        "two `All` requests cannot share the a100"
    );
}
