use super::*;
use crate::model::rules::fixtures::node;

fn slice(node: &str, pool: &str, generation: i64, count: i64, devices: &[&str]) -> Slice {
    Slice {
        driver: "gpu.example.com".into(),
        pool: pool.into(),
        generation,
        slice_count: count,
        scope: Some(NodeScope::Node(node.into())),
        devices: devices
            .iter()
            .map(|n| Device {
                name: (*n).into(),
                attributes: BTreeMap::new(),
                capacity: BTreeMap::new(),
                scope: None,
                unsupported: None,
            })
            .collect(),
    }
}

fn names(inv: &DeviceInventory, n: &NodeInfo) -> Vec<String> {
    inv.devices_on(n).map(|(id, _)| id.to_string()).collect()
}

#[test]
fn node_local_slices_belong_to_their_node() {
    let mut inv = DeviceInventory::default();
    inv.apply_slice("a".into(), slice("n1", "n1", 1, 1, &["g0", "g1"]));
    inv.apply_slice("b".into(), slice("n2", "n2", 1, 1, &["g0"]));
    assert_eq!(
        names(&inv, &node("n1")),
        ["gpu.example.com/n1/g0", "gpu.example.com/n1/g1"]
    );
    assert_eq!(names(&inv, &node("n2")), ["gpu.example.com/n2/g0"]);
    inv.remove_slice("a");
    assert!(names(&inv, &node("n1")).is_empty());
}

#[test]
fn only_the_newest_complete_generation_of_a_pool_counts() {
    let mut inv = DeviceInventory::default();
    inv.apply_slice("old".into(), slice("n1", "p", 1, 1, &["g0"]));
    // Generation 2 announces two slices; one is there: the pool is being updated.
    inv.apply_slice("new-a".into(), slice("n1", "p", 2, 2, &["g1"]));
    assert!(names(&inv, &node("n1")).is_empty(), "incomplete pool");
    inv.apply_slice("new-b".into(), slice("n1", "p", 2, 2, &["g2"]));
    assert_eq!(
        names(&inv, &node("n1")),
        ["gpu.example.com/p/g1", "gpu.example.com/p/g2"]
    );
}

#[test]
fn wide_slices_reach_the_nodes_they_select() {
    let mut inv = DeviceInventory::default();
    let mut s = slice("x", "net", 1, 1, &["nic"]);
    s.scope = Some(NodeScope::AllNodes);
    inv.apply_slice("net".into(), s);
    assert_eq!(names(&inv, &node("n9")), ["gpu.example.com/net/nic"]);
}

#[test]
fn allocations_are_counted_per_claim() {
    let mut inv = DeviceInventory::default();
    let id = DeviceId {
        driver: "d".into(),
        pool: "p".into(),
        name: "g0".into(),
    };
    let claim = Claim {
        spec: ClaimSpec::default(),
        allocation: Some(Allocation {
            devices: vec![id.clone()],
            node_selector: None,
        }),
    };
    inv.apply_claim(("ns".into(), "c".into()), claim.clone());
    inv.apply_claim(("ns".into(), "c".into()), claim);
    assert!(inv.is_allocated(&id));
    inv.remove_claim(&("ns".into(), "c".into()));
    assert!(!inv.is_allocated(&id), "an update does not count twice");
}
