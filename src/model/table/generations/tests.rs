use super::*;
use crate::model::inputs::membership::{GENERATION, JOBSET_RESTART_ATTEMPT, JOBSET_UID};
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

fn of_jobset(name: &str, uid: &str, attempt: u64, created: i64) -> PodInfo {
    pod(name)
        .gang("g", 2)
        .label(JOBSET_UID, uid)
        .label(JOBSET_RESTART_ATTEMPT, &attempt.to_string())
        .created(created)
        .build()
}

/// A JobSet deleted and submitted again under its name: the later incarnation's pods are the
/// gang whatever their restart attempt, and the earlier one's are superseded, in either order.
#[test]
fn a_later_incarnation_of_the_job_supersedes_the_earlier_whatever_its_attempt() {
    let mut g = Generations::default();
    let mut old = of_jobset("old", "u1", 2, 100);
    assert_eq!(g.sort(&mut old), Standing::Newer, "attempt 2 of u1");
    let mut new = of_jobset("new", "u2", 0, 160);
    assert_eq!(
        g.sort(&mut new),
        Standing::Newer,
        "u2 is later, at attempt 0"
    );
    let mut old_again = of_jobset("old", "u1", 2, 100);
    assert_eq!(g.sort(&mut old_again), Standing::Superseded);
    assert_eq!(
        old_again.membership.unwrap_err().to_string(),
        "jobset.sigs.k8s.io/jobset-uid u1: its gang ml/g is made by a later JobSet now \
         (jobset.sigs.k8s.io/jobset-uid u2), so this pod is no longer one of its members \
         (muster places only the newest generation)"
    );
    let m = of_jobset("x", "u1", 2, 100);
    assert!(g.is_older(m.gang().unwrap(), m.created));
    // Seen the other way round (a re-list): the earlier incarnation is older at once.
    let mut h = Generations::default();
    let mut new = of_jobset("new", "u2", 0, 160);
    h.sort(&mut new);
    let mut old = of_jobset("old", "u1", 2, 100);
    assert_eq!(h.sort(&mut old), Standing::Superseded);
    // A restart of the later incarnation is newer still.
    let mut next = of_jobset("next", "u2", 1, 200);
    assert_eq!(h.sort(&mut next), Standing::Newer);
}

/// Two incarnations created within the same second (the job deleted and submitted again at
/// once): exactly one is the gang, whichever order their pods' events come in. The pods of the
/// incarnation seen second are older; an update of a pod of the first does not make the second
/// a member beside it (before, a tie counted as newer both ways, and both were one gang).
#[test]
fn two_incarnations_created_in_the_same_second_never_make_one_gang() {
    let mut g = Generations::default();
    let mut old = of_jobset("old", "uid-1", 0, 100);
    assert_eq!(g.sort(&mut old), Standing::Member);
    let mut new = of_jobset("new", "uid-2", 0, 100);
    assert_eq!(g.sort(&mut new), Standing::Superseded);
    assert!(new.gang().is_none());
    // The pod is not told its JobSet is the earlier one: only that the tie keeps it waiting.
    assert_eq!(
        new.membership.clone().unwrap_err().to_string(),
        "jobset.sigs.k8s.io/jobset-uid uid-2: its gang ml/g is held by the pods of another \
         JobSet (jobset.sigs.k8s.io/jobset-uid uid-1) created in the same second (whole seconds \
         cannot tell which JobSet is later; this pod is a member again once they are gone), so \
         this pod is no longer one of its members (muster places only the newest generation)"
    );
    let mut old_again = of_jobset("old", "uid-1", 0, 100);
    assert_eq!(g.sort(&mut old_again), Standing::Member);
    let mut new_again = of_jobset("new", "uid-2", 0, 100);
    assert_eq!(g.sort(&mut new_again), Standing::Superseded);
    // One second later is newer.
    let mut later = of_jobset("later", "uid-2", 0, 101);
    assert_eq!(g.sort(&mut later), Standing::Newer);
    let mut old_after = of_jobset("old", "uid-1", 0, 100);
    assert_eq!(g.sort(&mut old_after), Standing::Superseded);
}
