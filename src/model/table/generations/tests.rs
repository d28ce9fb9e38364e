use super::*;
use crate::model::inputs::membership::GENERATION;
use crate::testkit::pod;

fn of(name: &str, generation: u64) -> PodInfo {
    pod(name)
        .gang("g", 2)
        .annotation(GENERATION, &generation.to_string())
        .build()
}

fn key() -> GangKey {
    GangKey::new("ml", "g")
}

#[test]
fn a_pod_older_than_its_gangs_newest_is_superseded_and_keeps_what_its_keys_said() {
    let mut g = Generations::default();
    let mut a = of("a", 0);
    assert_eq!(g.sort(&mut a), Standing::Member, "no generation yet: 0");
    let mut b = of("b", 1);
    assert_eq!(g.sort(&mut b), Standing::Newer);
    assert_eq!(g.newest(&key()), 1);
    let mut a_again = of("a", 0);
    assert_eq!(g.sort(&mut a_again), Standing::Superseded);
    assert!(a_again.gang().is_none());
    let restored = Generations::restored(a_again.clone());
    assert_eq!(restored.membership, of("a", 0).membership);

    // Deleted: no longer listed; the gang gone, its superseded pods are handed back once.
    g.forget(&a_again);
    let mut c = of("c", 0);
    assert_eq!(g.sort(&mut c), Standing::Superseded);
    assert_eq!(
        g.gang_gone(&key()).into_iter().collect::<Vec<_>>(),
        [c.uid.clone()]
    );
    assert_eq!(g.newest(&key()), 0);
    assert!(g.gang_gone(&key()).is_empty());
}

#[test]
fn pods_in_no_gang_and_gangs_without_generations_leave_no_trace() {
    let mut g = Generations::default();
    let mut plain = pod("p").build();
    assert_eq!(g.sort(&mut plain), Standing::Member);
    let mut m = pod("m").gang("g", 2).build();
    assert_eq!(g.sort(&mut m), Standing::Member);
    assert!(g.by_gang.is_empty());
}
