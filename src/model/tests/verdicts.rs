//! holds-nothing for what was not simulated before: NodePorts (members that need one host port
//! cannot share a node) and kube-scheduler's own verdict on a member whose cycle never reached
//! muster (a filter muster does not simulate, such as VolumeBinding), as evidence.

use std::sync::Arc;

use super::*;

const PVC_MISSING: &str = "0/2 nodes are available: persistentvolumeclaim \"data\" not found. \
                           preemption: 0/2 nodes are available: 2 Preemption is not helpful for \
                           scheduling.";

fn two_cpu(name: &str) -> NodeInfo {
    testkit::node(name).cpu(2000).build()
}

fn port_members(n: u32) -> Vec<PodInfo> {
    (0..n)
        .map(|i| {
            pod(&format!("m{i}"))
                .cpu(500)
                .gang("g", n)
                .host_port(8080)
                .build()
        })
        .collect()
}

/// NodePorts: two members that each need host port 8080, one node with room for both: the
/// gang holds nothing, and says which port.
#[test]
fn node_ports_members_that_need_one_host_port_on_one_node_hold_nothing() {
    let mut w = World::new(&[two_cpu("a")]);
    let ms = port_members(2);
    w.add(&ms.iter().collect::<Vec<_>>());
    let (ok, reasons) = w.filter(&ms[0]);
    assert!(ok.is_empty());
    assert_eq!(
        reasons,
        vec![
            "gang ml/g: 2 members need host port 8080/TCP, one member per node; 1 placed, no node \
             for the next: 0/1 nodes are available: 1 node(s) didn't have free ports for the \
             requested pod ports."
                .to_string()
        ]
    );
    assert_eq!(w.reserved("a"), 0, "holds nothing");
}

/// NodePorts: with a second node the same gang is placed whole, one member per node.
#[test]
fn node_ports_members_that_need_one_host_port_are_placed_on_distinct_nodes() {
    let mut w = World::new(&[two_cpu("a"), two_cpu("b")]);
    let ms = port_members(2);
    w.add(&ms.iter().collect::<Vec<_>>());
    let (ok, _) = w.filter(&ms[0]);
    assert_eq!(ok.len(), 1);
    let first = ok[0].clone();
    wait_message(&w.bind(&ms[0], &first));
    let (ok, _) = w.filter(&ms[1]);
    assert_eq!(ok.len(), 1);
    assert_ne!(ok[0], first, "the second member goes to the other node");
    let placed = names(&w.bind(&ms[1], &ok[0]));
    assert_eq!(placed.len(), 2);
}

/// NodePorts: a pod already on a node using the port keeps members off it.
#[test]
fn node_ports_a_port_in_use_on_a_node_keeps_members_off_it() {
    let mut w = World::new(&[two_cpu("a"), two_cpu("b"), two_cpu("c")]);
    let web = pod("web").cpu(100).host_port(8080).bound("a").build();
    w.add(&[&web]);
    let ms = port_members(2);
    w.add(&ms.iter().collect::<Vec<_>>());
    let (ok, _) = w.filter(&ms[0]);
    assert_eq!(ok.len(), 1);
    assert_ne!(ok[0], "a");
    let d = w.bind(&ms[0], &ok[0].clone());
    wait_message(&d);
    let (ok, _) = w.filter(&ms[1]);
    assert_eq!(ok.len(), 1);
    assert_ne!(ok[0], "a", "the port is taken on a");
}

/// NodePorts at the last look: a pod bound by `spec.nodeName` onto a seat's node takes the
/// port while the gang waits; nothing is bound and the member seated there is planned again.
#[test]
fn node_ports_a_port_taken_on_a_seat_node_since_is_not_bound() {
    let mut w = World::new(&[two_cpu("a"), two_cpu("b"), two_cpu("c")]);
    let ms = port_members(2);
    w.add(&ms.iter().collect::<Vec<_>>());
    wait_message(&w.bind(&ms[0], "a"));
    let web = pod("web").cpu(100).host_port(8080).bound("a").build();
    w.add(&[&web]);
    let d = w.bind(&ms[1], "b");
    assert_eq!(
        wait_message(&d),
        "gang ml/g: node a no longer admits member ml/m0 seated there (NodePorts: node(s) \
         didn't have free ports for the requested pod ports); nothing was bound, the members \
         seated there are planned again"
    );
    assert!(!w.table.holds_seat(&ms[0].uid));
}

/// Two members on two nodes; m0 seated on `a` (its bind held), m1 not asked yet.
fn seated_pair() -> (World, Vec<PodInfo>) {
    let mut w = World::new(&[node("a", 1000), node("b", 1000)]);
    let ms: Vec<PodInfo> = (0..2)
        .map(|i| pod(&format!("m{i}")).cpu(1000).gang("g", 2).build())
        .collect();
    w.add(&ms.iter().collect::<Vec<_>>());
    wait_message(&w.bind(&ms[0], "a"));
    assert_eq!(
        w.reserved("a") + w.reserved("b"),
        2000,
        "room held for both"
    );
    w.table.take_released();
    (w, ms)
}

fn refused(p: &PodInfo, message: &str) -> PodInfo {
    PodInfo {
        unschedulable: Some(Arc::from(message)),
        ..p.clone()
    }
}

fn quoted(member: &str) -> String {
    format!(
        "gang ml/g: kube-scheduler found no node for member ml/{member}: \"{PVC_MISSING}\"; the \
         gang holds nothing until that member or a node changes"
    )
}

/// kube-scheduler refused m1 (VolumeBinding: its claim does not exist) in a cycle that never
/// reached muster: the gang releases its seats at once, tells its members why in
/// kube-scheduler's words, and holds nothing; a plain pod gets the room.
#[test]
fn volume_binding_verdict_of_kube_scheduler_releases_the_gangs_seats() {
    let (mut w, ms) = seated_pair();
    w.table.apply_pod(refused(&ms[1], PVC_MISSING));
    assert_eq!(w.reserved("a") + w.reserved("b"), 0, "seats released");
    assert_eq!(w.table.take_released(), vec![GangKey::new("ml", "g")]);
    let told: Vec<Notice> = w.table.take_notices();
    assert!(
        told.iter()
            .any(|n| n.kind == NoticeKind::Waiting && n.message == quoted("m1")),
        "{told:?}"
    );
    // m0's next cycle is refused with the same words, and holds nothing.
    let (ok, reasons) = w.filter(&ms[0]);
    assert!(ok.is_empty());
    assert_eq!(reasons, vec![quoted("m1")]);
    assert_eq!(w.reserved("a") + w.reserved("b"), 0);
    let plain = pod("plain").cpu(1000).build();
    assert_eq!(
        w.filter(&plain).0.len(),
        2,
        "a plain pod may use either node"
    );
}

/// A verdict that quotes muster's own refusal (the every-pod mode: muster's filter refused the
/// member, and kube-scheduler wrote the condition with muster's text) is not evidence.
#[test]
fn a_verdict_holding_musters_own_refusal_changes_nothing() {
    let mut w = World::new(&[node("a", 1000)]);
    let ms: Vec<PodInfo> = (0..2)
        .map(|i| pod(&format!("m{i}")).cpu(1000).gang("g", 2).build())
        .collect();
    w.add(&ms.iter().collect::<Vec<_>>());
    let (ok, reasons) = w.filter(&ms[1]);
    assert!(ok.is_empty());
    let ours = format!("0/1 nodes are available: 1 {}.", reasons[0]);
    w.table.apply_pod(refused(&ms[1], &ours));
    assert!(w.table.verdicts.standing(&ms[1].uid).is_none());
    w.table.apply_pod(refused(&ms[1], PVC_MISSING));
    assert!(
        w.table.verdicts.standing(&ms[1].uid).is_some(),
        "another message is a cycle that never reached muster"
    );
}

/// What happens to the cluster, given the members.
type Change = fn(&mut World, &[PodInfo]);

/// The verdict stands until the member's situation can have changed: a node added, the member
/// changed, or a filter call for it (its cycle reached muster).
#[test]
fn a_verdict_stands_until_a_node_or_the_member_changes() {
    let cases: [(&str, Change); 3] = [
        ("a node added", |w, _| w.table.apply_node(node("c", 1000))),
        ("the member changed", |w, ms| {
            let mut changed = refused(&ms[1], PVC_MISSING);
            changed.requests.cpu_milli = 900;
            w.table.apply_pod(changed);
        }),
        ("its cycle reached muster", |w, ms| {
            w.filter(&ms[1]);
        }),
    ];
    for (name, change) in cases {
        let (mut w, ms) = seated_pair();
        w.table.apply_pod(refused(&ms[1], PVC_MISSING));
        // Muster's own writes (a nomination, the retry annotation) are no change.
        let mut nominated = refused(&ms[1], PVC_MISSING);
        nominated.nominated_node = Some(Arc::from("b"));
        w.table.apply_pod(nominated);
        assert!(w.filter(&ms[0]).0.is_empty(), "{name}: refused before");
        change(&mut w, &ms);
        assert!(
            w.table.verdicts.standing(&ms[1].uid).is_none(),
            "{name}: the verdict no longer stands"
        );
        let (ok, _) = w.filter(&ms[0]);
        assert_eq!(ok.len(), 1, "{name}: the gang is planned again");
    }
}

/// A gang at quorum is not disturbed by a verdict on a replacement member.
#[test]
fn a_verdict_on_a_member_of_a_placed_gang_releases_nothing() {
    let mut w = World::new(&[node("a", 1000), node("b", 1000), node("c", 1000)]);
    let ms: Vec<PodInfo> = (0..3)
        .map(|i| pod(&format!("m{i}")).cpu(1000).gang("g", 2).build())
        .collect();
    let bound = [
        PodInfo {
            node_name: Some(Arc::from("a")),
            ..ms[0].clone()
        },
        PodInfo {
            node_name: Some(Arc::from("b")),
            ..ms[1].clone()
        },
    ];
    w.add(&[&bound[0], &bound[1], &ms[2]]);
    w.table.take_notices();
    w.table.apply_pod(refused(&ms[2], PVC_MISSING));
    assert!(w.table.take_released().is_empty());
    assert!(w.table.take_notices().is_empty());
}

/// DynamicResources: kube-scheduler's verdict on a member with a ResourceClaim stands until a
/// DRA object it reads changes — a slice (devices appear), a claim it uses, or a claim giving
/// its devices back — but not for a claim it does not use that only took devices.
#[test]
fn dynamic_resources_a_slice_or_claim_change_clears_the_verdict_of_members_reading_it() {
    use crate::model::inputs::devices::{
        Allocation, Claim, ClaimSource, ClaimSpec, DeviceId, NodeScope, PodClaim, Slice,
    };
    use crate::model::inputs::objects::PodRules;
    let with_claim = |p: &PodInfo, claim: &str| {
        let mut p = p.clone();
        p.rules = Some(Box::new(PodRules {
            claims: vec![PodClaim {
                name: "gpu".into(),
                source: ClaimSource::Claim(claim.into()),
            }],
            ..PodRules::default()
        }));
        p
    };
    let key = |name: &str| (Arc::from("ml"), Arc::from(name));
    let allocated = Claim {
        spec: ClaimSpec::default(),
        allocation: Some(Allocation {
            devices: vec![DeviceId {
                driver: "gpu.example.com".into(),
                pool: "a".into(),
                name: "g0".into(),
            }],
            node_selector: None,
        }),
    };
    let cases: [(&str, Change, bool); 5] = [
        (
            "a slice",
            |w, _| {
                w.table.apply_resource_slice(
                    "a-gpus".into(),
                    Slice {
                        driver: "gpu.example.com".into(),
                        pool: "a".into(),
                        generation: 1,
                        slice_count: 1,
                        scope: Some(NodeScope::Node("a".into())),
                        devices: vec![],
                    },
                )
            },
            true,
        ),
        (
            "its own claim",
            |w, _| {
                w.table.apply_resource_claim(
                    (Arc::from("ml"), Arc::from("c1")),
                    Claim {
                        spec: ClaimSpec::default(),
                        allocation: None,
                    },
                )
            },
            true,
        ),
        (
            "another claim taking devices",
            |w, _| {
                w.table.apply_resource_claim(
                    (Arc::from("ml"), Arc::from("other")),
                    Claim {
                        spec: ClaimSpec::default(),
                        allocation: Some(Allocation {
                            devices: vec![],
                            node_selector: None,
                        }),
                    },
                )
            },
            false,
        ),
        (
            "another claim deleted, its devices free",
            |w, _| {
                w.table
                    .remove_resource_claim(&(Arc::from("ml"), Arc::from("held")))
            },
            true,
        ),
        (
            "a template the pod does not use",
            |w, _| {
                w.table.apply_claim_template(
                    (Arc::from("ml"), Arc::from("unused")),
                    ClaimSpec::default(),
                )
            },
            false,
        ),
    ];
    for (name, change, clears) in cases {
        let (mut w, ms) = seated_pair();
        w.table.apply_resource_claim(key("held"), allocated.clone());
        let m1 = with_claim(&ms[1], "c1");
        w.table.apply_pod(m1.clone());
        w.table.apply_pod(refused(&m1, PVC_MISSING));
        assert!(
            w.table.verdicts.standing(&ms[1].uid).is_some(),
            "{name}: stands before"
        );
        change(&mut w, &ms);
        assert_eq!(
            w.table.verdicts.standing(&ms[1].uid).is_none(),
            clears,
            "{name}"
        );
    }
}
