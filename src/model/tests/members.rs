//! The members' side of never-half and derived: members being deleted count for nothing, "placed" follows the
//! live members, and only the watch creates pods (a call for a pod muster has not seen, or a
//! forged one, changes nothing).

use super::*;
use crate::model::inputs::membership::{JOBSET_RESTART_ATTEMPT, JOBSET_UID};

fn terminating(p: &PodInfo) -> PodInfo {
    let mut p = p.clone();
    p.terminating = true;
    p
}

fn bound(p: &PodInfo, node: &str) -> PodInfo {
    let mut p = p.clone();
    p.node_name = Some(node.into());
    p
}

/// Finding 1: a job deleted and submitted again under the same group name while its old pods
/// are still terminating. The old pods must not make the new gang "placed".
#[test]
fn members_being_deleted_do_not_count_toward_quorum() {
    let mut w = World::new(&[node("a", 1000), node("b", 1000)]);
    let old: Vec<PodInfo> = (0..2)
        .map(|i| pod(&format!("old{i}")).gang("train", 2).build())
        .collect();
    w.add(&[
        &terminating(&bound(&old[0], "a")),
        &terminating(&bound(&old[1], "b")),
    ]);
    let new: Vec<PodInfo> = (0..2)
        .map(|i| pod(&format!("new{i}")).gang("train", 2).build())
        .collect();
    w.add(&[&new[0], &new[1]]);
    assert_eq!(w.state("train"), "waiting");
    let first = w.bind(&new[0], "a");
    assert_eq!(
        wait_message(&first),
        "gang ml/train waiting for quorum: 1/2 members have nodes"
    );
    assert_eq!(names(&w.bind(&new[1], "b")), vec!["new0@a", "new1@b"]);
}

#[test]
fn a_replacement_member_of_a_gang_that_meets_its_quorum_binds_at_once() {
    let mut w = World::new(&[node("a", 1000), node("b", 1000)]);
    let ms: Vec<PodInfo> = (0..3)
        .map(|i| pod(&format!("m{i}")).gang("g", 2).build())
        .collect();
    w.add(&[&bound(&ms[0], "a"), &bound(&ms[1], "b"), &ms[2]]);
    assert_eq!(w.state("g"), "placed");
    assert_eq!(names(&w.bind(&ms[2], "a")), vec!["m2@a"]);
}

#[test]
fn a_gang_whose_live_members_fell_below_quorum_is_gated_again() {
    let mut w = World::new(&[node("a", 1000), node("b", 1000)]);
    let ms: Vec<PodInfo> = (0..3)
        .map(|i| pod(&format!("m{i}")).gang("g", 2).build())
        .collect();
    w.add(&[&ms[0], &ms[1], &ms[2]]);
    wait_message(&w.bind(&ms[0], "a"));
    let d = w.bind(&ms[1], "b");
    assert_eq!(names(&d), vec!["m0@a", "m1@b"]);
    w.confirm(&d);
    assert_eq!(w.state("g"), "placed");
    // One of the two bound members is being deleted: one live member has a node, of 2.
    w.add(&[&terminating(&bound(&ms[1], "b"))]);
    assert_eq!(w.state("g"), "waiting");
    // The replacement completes the quorum with m0: bound through the gang path, as a gang.
    let d = w.bind(&ms[2], "b");
    assert!(matches!(d, BindDecision::BindGang { .. }), "{d:?}");
    assert_eq!(names(&d), vec!["m2@b"]);
}

#[test]
fn a_member_being_deleted_gives_up_its_seat_and_is_refused() {
    let mut w = World::new(&[node("a", 1000)]);
    let ms: Vec<PodInfo> = (0..2)
        .map(|i| pod(&format!("m{i}")).gang("g", 2).build())
        .collect();
    w.add(&[&ms[0], &ms[1]]);
    wait_message(&w.bind(&ms[0], "a"));
    assert_eq!(w.reserved("a"), 200);
    w.add(&[&terminating(&ms[0])]);
    assert!(!w.table.holds_seat(&ms[0].uid));
    assert_eq!(
        rejection(&w.bind(&ms[0], "a")),
        "pod ml/m0 is being deleted: it holds nothing new"
    );
    let (ok, reasons) = w.filter(&ms[0]);
    assert!(ok.is_empty());
    assert_eq!(
        reasons,
        vec!["pod ml/m0 is being deleted: it holds nothing new"]
    );
}

/// Finding 4: a late filter for a deleted pod used to bring it back into the table.
#[test]
fn a_filter_or_bind_for_a_pod_muster_has_not_seen_changes_nothing() {
    let mut w = World::new(&[node("a", 1000)]);
    let ghost = pod("ghost").gang("g", 2).build();
    let verdicts = w.table.filter(&ghost, &["a"], w.now);
    let unknown =
        "unknown pod ml/ghost (uid uid-ghost): muster has not seen it; it may have been deleted";
    assert_eq!(verdicts, vec![NodeVerdict::Unresolvable(unknown.into())]);
    assert_eq!(rejection(&w.bind(&ghost, "a")), unknown);
    assert_eq!(w.table.pod_count(), 0);
    assert_eq!(w.state("g"), "absent");
    assert_eq!(w.reserved("a"), 0);
}

/// Finding 4: a forged member of another namespace's gang with an enormous quorum.
#[test]
fn a_forged_member_cannot_raise_another_gangs_quorum() {
    let mut w = World::new(&[node("a", 1000)]);
    let real: Vec<PodInfo> = (0..2)
        .map(|i| {
            pod(&format!("r{i}"))
                .namespace("team")
                .gang("train", 2)
                .build()
        })
        .collect();
    w.add(&[&real[0], &real[1]]);
    let forged = pod("evil").namespace("team").gang("train", 100_000).build();
    assert!(matches!(
        w.table.filter(&forged, &["a"], w.now)[0],
        NodeVerdict::Unresolvable(_)
    ));
    // The same UID as a real member, other names: refused too.
    let mut impostor = forged.clone();
    impostor.uid = real[0].uid.clone();
    assert_eq!(
        rejection(&w.bind(&impostor, "a")),
        "pod uid uid-r0 is team/r0, not team/evil"
    );
    assert_eq!(w.table.pod_count(), 2);
    wait_message(&w.bind(&real[0], "a"));
    assert_eq!(names(&w.bind(&real[1], "a")), vec!["r0@a", "r1@a"]);
}

/// Found by the model check: a gang whose last member was deleted kept the room it held for
/// members not created yet, reserved forever.
#[test]
fn a_gang_whose_last_member_leaves_releases_room_held_for_members_not_created_yet() {
    let mut w = World::new(&[node("a", 1000)]);
    let first = pod("first").cpu(400).gang("g", 2).build();
    w.add(&[&first]);
    wait_message(&w.bind(&first, "a"));
    assert_eq!(
        w.reserved("a"),
        800,
        "its seat and one held for the member to come"
    );
    w.table.remove_pod(&first.uid);
    assert_eq!(w.reserved("a"), 0);
    assert_eq!(w.state("g"), "absent");
}

/// explained: a seated member retried by kube-scheduler hears why it waits once per reason.
#[test]
fn a_seated_member_is_told_it_waits_once_per_reason() {
    let mut w = World::new(&[node("a", 1000)]);
    let ms: Vec<PodInfo> = (0..3)
        .map(|i| pod(&format!("m{i}")).gang("g", 3).build())
        .collect();
    w.add(&[&ms[0], &ms[1], &ms[2]]);
    let waiting = |w: &mut World| {
        w.table
            .take_notices()
            .into_iter()
            .filter(|n| n.kind == NoticeKind::Waiting)
            .count()
    };
    let first = wait_message(&w.bind(&ms[0], "a")).to_string();
    w.table.wait_outlasted_hold(&ms[0].uid, &first);
    assert_eq!(waiting(&mut w), 1);
    let again = wait_message(&w.bind(&ms[0], "a")).to_string();
    assert_eq!(again, first);
    w.table.wait_outlasted_hold(&ms[0].uid, &again);
    assert_eq!(waiting(&mut w), 0, "same reason: not told again");
    let changed = wait_message(&w.bind(&ms[1], "a")).to_string();
    w.table.wait_outlasted_hold(&ms[0].uid, &changed);
    assert_eq!(waiting(&mut w), 1, "2/3 now: told");
}

/// A pod of gang "train", quorum 2, a whole node of 1 CPU each, made by JobSet for restart
/// attempt `attempt`.
fn of_attempt(name: &str, attempt: u32) -> PodInfo {
    pod(name)
        .cpu(1000)
        .gang("train", 2)
        .label(JOBSET_RESTART_ATTEMPT, &attempt.to_string())
        .build()
}

/// never-half across a job's restart: JobSet's default `Recreate` creates the next attempt's
/// first pod while the old attempt's pods still run (not yet marked deleted). Counted as
/// members they would make the gang placed and the new pod bound alone; they are not members:
/// the new pod waits for its own generation, and is bound together with it.
#[test]
fn the_first_pod_of_a_restarted_job_waits_for_its_generation_not_beside_the_old_one() {
    let mut w = World::new(&[
        node("a", 1000),
        node("b", 1000),
        node("c", 1000),
        node("d", 1000),
    ]);
    let old = [of_attempt("old0", 0), of_attempt("old1", 0)];
    w.add(&[&bound(&old[0], "a"), &bound(&old[1], "b")]);
    assert_eq!(w.state("train"), "placed");
    w.table.take_notices();

    let new0 = of_attempt("new0", 1);
    w.add(&[&new0]);
    assert_eq!(w.state("train"), "waiting");
    let first = w.bind(&new0, "c");
    assert_eq!(
        wait_message(&first),
        "gang ml/train waiting for quorum: 1/2 members have nodes; 1 of 2 members exist, the \
         rest are not created yet"
    );
    // The old pods hear why they no longer count, once each (a Normal Event).
    let told: Vec<String> = w
        .table
        .take_notices()
        .into_iter()
        .filter(|n| n.kind == NoticeKind::Superseded)
        .map(|n| format!("{}: {}", n.pod.name, n.message))
        .collect();
    assert_eq!(
        told,
        [
            "old0: jobset.sigs.k8s.io/restart-attempt 0: its gang ml/train is at generation 1 \
             now, so this pod is no longer one of its members (muster places only the newest \
             generation)",
            "old1: jobset.sigs.k8s.io/restart-attempt 0: its gang ml/train is at generation 1 \
             now, so this pod is no longer one of its members (muster places only the newest \
             generation)",
        ]
    );
    assert!(!NoticeKind::Superseded.is_warning());
    assert_eq!(NoticeKind::Superseded.reason(), "GangMemberSuperseded");

    // The old pods still use their nodes' room: nothing goes on top of them.
    w.add(&[&bound(&old[0], "a")]);
    assert!(w.table.take_notices().is_empty(), "told once per pod");
    let new1 = of_attempt("new1", 1);
    w.add(&[&new1]);
    let on_old = rejection(&w.bind(&new1, "b"));
    assert!(on_old.contains("free 0m"), "{on_old}");
    w.table.remove_pod(&old[0].uid);
    w.table.remove_pod(&old[1].uid);
    assert_eq!(names(&w.bind(&new1, "b")), vec!["new0@c", "new1@b"]);
}

/// The same whatever order the watch delivers the pods in (a restart of muster re-lists them):
/// an old generation's pod seen after the new one is not a member from the start, and a pod of
/// an older generation waiting for a node is never bound.
#[test]
fn an_old_generations_pod_seen_after_the_new_one_is_never_a_member_nor_bound() {
    let mut w = World::new(&[node("a", 1000), node("b", 1000), node("c", 1000)]);
    let new0 = of_attempt("new0", 2);
    let old0 = of_attempt("old0", 1);
    let old1 = of_attempt("old1", 1);
    w.add(&[&new0, &bound(&old0, "a"), &old1]);
    assert_eq!(w.state("train"), "waiting");
    let refused = rejection(&w.bind(&old1, "b"));
    assert!(
        refused.contains("no longer one of its members"),
        "{refused}"
    );
    let (fits, _) = w.filter(&old1);
    assert!(fits.is_empty(), "an old generation's pod fits nowhere");
    assert_eq!(
        wait_message(&w.bind(&new0, "c")),
        "gang ml/train waiting for quorum: 1/2 members have nodes; 1 of 2 members exist, the \
         rest are not created yet"
    );
}

/// If every pod of the newest generation goes while older ones remain (its job deleted the new
/// attempt, say), the older pods are the gang again: the gang is what its pods are.
#[test]
fn old_generations_pods_are_members_again_once_the_newest_generation_is_gone() {
    let mut w = World::new(&[node("a", 1000), node("b", 1000), node("c", 1000)]);
    let old = [of_attempt("old0", 0), of_attempt("old1", 0)];
    w.add(&[&bound(&old[0], "a"), &bound(&old[1], "b")]);
    let new0 = of_attempt("new0", 1);
    w.add(&[&new0]);
    assert_eq!(w.state("train"), "waiting");
    w.table.remove_pod(&new0.uid);
    assert_eq!(w.state("train"), "placed");
    // A replacement of the old generation joins the placed gang as any replacement does.
    let again = of_attempt("old2", 0);
    w.add(&[&again]);
    assert_eq!(names(&w.bind(&again, "c")), vec!["old2@c"]);
}

/// never-half when a JobSet is deleted and submitted again under its name while its old pods
/// still run (the garbage collector deletes them after the JobSet): the new pods are another
/// incarnation (`jobset.sigs.k8s.io/jobset-uid`), not members joining the old ones, whatever
/// restart attempt each is at: they are bound only together.
#[test]
fn a_jobset_submitted_again_is_not_placed_beside_its_old_incarnations_running_pods() {
    let of = |name: &str, uid: &str, attempt: &str, created: i64| {
        pod(name)
            .cpu(1000)
            .gang("train", 2)
            .label(JOBSET_UID, uid)
            .label(JOBSET_RESTART_ATTEMPT, attempt)
            .created(created)
            .build()
    };
    let mut w = World::new(&[
        node("a", 1000),
        node("b", 1000),
        node("c", 1000),
        node("d", 1000),
    ]);
    // The old JobSet had restarted once; one of its pods is still bound.
    let old = of("old1", "u1", "1", 100);
    w.add(&[&bound(&old, "a")]);
    let new = [of("new0", "u2", "0", 200), of("new1", "u2", "0", 200)];
    w.add(&[&new[0]]);
    assert_eq!(
        wait_message(&w.bind(&new[0], "c")),
        "gang ml/train waiting for quorum: 1/2 members have nodes; 1 of 2 members exist, the \
         rest are not created yet"
    );
    w.add(&[&new[1]]);
    assert_eq!(names(&w.bind(&new[1], "d")), vec!["new0@c", "new1@d"]);
    // An old pod still waiting for a node is never placed.
    let late = of("old2", "u1", "1", 100);
    w.add(&[&late]);
    let refused = rejection(&w.bind(&late, "b"));
    assert!(refused.contains("made by a later JobSet"), "{refused}");
}
