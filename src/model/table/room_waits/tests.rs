use super::*;

fn key(name: &str) -> GangKey {
    GangKey::new("ml", name)
}

#[test]
fn each_wait_is_kept_once_in_the_order_it_began_and_ends_alone() {
    let mut waits = RoomWaits::default();
    waits.wait("n1".into(), &key("b"), RoomWait::PlannedSeats);
    waits.wait("n1".into(), &key("a"), RoomWait::PodsLeaving);
    waits.wait("n1".into(), &key("a"), RoomWait::PlannedSeats);
    waits.wait("n1".into(), &key("b"), RoomWait::PlannedSeats);
    waits.wait("n2".into(), &key("c"), RoomWait::PodsLeaving);
    let planned: Vec<&GangKey> = waits.on("n1", RoomWait::PlannedSeats).collect();
    assert_eq!(planned, [&key("b"), &key("a")]);
    assert_eq!(waits.end("n1", RoomWait::PodsLeaving), [key("a")]);
    assert!(waits.end("n1", RoomWait::PodsLeaving).is_empty());
    assert_eq!(waits.on("n1", RoomWait::PlannedSeats).count(), 2);
    assert_eq!(waits.end("n2", RoomWait::PodsLeaving), [key("c")]);
    waits.retain(&key("b"), RoomWait::PlannedSeats, |_| false);
    assert_eq!(waits.gangs(RoomWait::PlannedSeats), [key("a")]);
    waits.retain(&key("a"), RoomWait::PlannedSeats, |n| n == "n2");
    assert!(waits.is_empty());
}
