use super::*;
use crate::testkit;

fn r(cpu: i64, pods: i64) -> Resources {
    Resources {
        cpu_milli: cpu,
        pods,
        ..Resources::default()
    }
}

#[test]
fn a_node_holds_the_fewest_copies_any_requested_resource_allows() {
    let node = testkit::node("n").cpu(64_000).gpus(8).build();
    let mut request = r(1000, 1);
    assert_eq!(
        copies_within(&request, &node.allocatable),
        64.min(node.allocatable.pods as u64)
    );
    request.set_extended("nvidia.com/gpu", 3);
    assert_eq!(copies_within(&request, &node.allocatable), 2);
    request.set_extended("example.com/fpga", 1);
    assert_eq!(
        copies_within(&request, &node.allocatable),
        0,
        "the node has none"
    );
}

#[test]
fn the_pod_slot_bounds_members_that_ask_for_little() {
    let node = testkit::node("n").cpu(64_000).build();
    let tiny = r(1, 1);
    assert_eq!(
        copies_within(&tiny, &node.allocatable),
        node.allocatable.pods as u64
    );
}

#[test]
fn the_smallest_member_is_the_element_wise_minimum() {
    let mut a = r(2000, 1);
    a.set_extended("nvidia.com/gpu", 1);
    let b = r(500, 1);
    let least = smallest([&a, &b]).unwrap();
    assert_eq!(
        least,
        r(500, 1),
        "b asks for no GPU, so the minimum asks for none"
    );
    assert_eq!(smallest(std::iter::empty()), None);
}
