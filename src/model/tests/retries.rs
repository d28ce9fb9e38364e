//! Pods kube-scheduler would leave parked. It re-queues a pod an extender refused only on a
//! cluster event (its own update included), and what muster waited for — a node reaching its
//! cache, room held by seats released — is none; so muster asks for a retry
//! (`NoticeKind::Retry`, published as the `muster.dev/retry` annotation), exactly once and only
//! after what the pod waited for happened.

use std::sync::Arc;

use super::*;
use crate::model::messages;
use crate::model::table::retry_asks::MAX_REFUSED_REMEMBERED;

/// The filter as kube-scheduler calls it: with the nodes its in-tree filters passed.
fn filter_on(w: &mut World, p: &PodInfo, candidates: &[&str]) -> Vec<NodeVerdict> {
    w.table.filter(p, candidates, w.now)
}

/// The `Retry` notices since the last call, as (pod, message).
fn retries(w: &mut World) -> Vec<(String, String)> {
    w.table
        .take_notices()
        .into_iter()
        .filter(|n| n.kind == NoticeKind::Retry)
        .map(|n| (n.pod.name.to_string(), n.message))
        .collect()
}

fn sorted_names(asked: Vec<(String, String)>) -> Vec<String> {
    let mut names: Vec<String> = asked.into_iter().map(|(n, _)| n).collect();
    names.sort();
    names
}

const UNKNOWN_N2: &str =
    "node n2 is not in muster's cache yet; muster asks kube-scheduler to retry the pod when it \
     arrives";

/// kube-scheduler's informer saw n2 before muster's node watch did (after a restart of muster
/// or of the API server). Refusing the pod is right, but nothing in the cluster changes when
/// n2 reaches muster's cache: without a retry the pod waits for an unrelated event or
/// kube-scheduler's 5-minute flush.
#[test]
fn a_pod_refused_while_an_offered_node_is_unknown_is_asked_to_retry_when_it_arrives() {
    let mut w = World::new(&[node("n1", 1000)]);
    let filler = pod("filler").cpu(800).bound("n1").build();
    let web = pod("web").cpu(500).build();
    let gone = pod("gone").cpu(500).build();
    w.add(&[&filler, &web, &gone]);
    w.table.take_notices();

    for p in [&web, &gone] {
        let verdicts = filter_on(&mut w, p, &["n1", "n2"]);
        assert!(!verdicts.contains(&NodeVerdict::Fits));
        assert_eq!(
            verdicts[1],
            NodeVerdict::Unresolvable(Arc::from(UNKNOWN_N2))
        );
    }
    assert!(retries(&mut w).is_empty(), "nothing happened yet");
    // A node muster knows changing is not what they wait for.
    w.table.apply_node(node("n1", 1000));
    assert!(retries(&mut w).is_empty());
    // A pod deleted meanwhile is not asked.
    w.table.remove_pod(&gone.uid);

    w.table.apply_node(node("n2", 1000));
    assert_eq!(
        retries(&mut w),
        [(
            "web".to_string(),
            messages::RETRY_AFTER_NODE_ARRIVED.to_string()
        )]
    );
    assert!(retries(&mut w).is_empty(), "asked once");
    assert_eq!(
        filter_on(&mut w, &web, &["n1", "n2"]),
        [NodeVerdict::NotOffered, NodeVerdict::Fits]
    );
}

/// A gang refused because the plan could not use a node muster did not know: every member
/// refused is asked to retry when it arrives, and the gang is then placed whole.
#[test]
fn a_gang_refused_while_a_node_is_unknown_is_placed_whole_once_it_arrives() {
    let mut w = World::new(&[node("n1", 1000)]);
    let a = pod("a").cpu(600).gang("pair", 2).build();
    let b = pod("b").cpu(600).gang("pair", 2).build();
    w.add(&[&a, &b]);
    w.table.take_notices();
    for p in [&a, &b] {
        let verdicts = filter_on(&mut w, p, &["n1", "n2"]);
        assert!(
            matches!(&verdicts[0],
                NodeVerdict::Unschedulable(r) | NodeVerdict::Unresolvable(r)
                    if &**r == "gang ml/pair: 1 of 2 members fit"),
            "{verdicts:?}"
        );
        assert_eq!(
            verdicts[1],
            NodeVerdict::Unresolvable(Arc::from(UNKNOWN_N2))
        );
    }
    assert!(retries(&mut w).is_empty());

    w.table.apply_node(node("n2", 1000));
    assert_eq!(sorted_names(retries(&mut w)), ["a", "b"]);
    let offered = |verdicts: Vec<NodeVerdict>| -> String {
        let i = verdicts
            .iter()
            .position(|v| *v == NodeVerdict::Fits)
            .expect("one node offered");
        ["n1", "n2"][i].to_string()
    };
    let first = offered(filter_on(&mut w, &a, &["n1", "n2"]));
    wait_message(&w.bind(&a, &first));
    let second = offered(filter_on(&mut w, &b, &["n1", "n2"]));
    assert_ne!(first, second);
    assert_eq!(names(&w.bind(&b, &second)).len(), 2, "bound together");
}

/// The nodes a member's filter call names are evidence of where it may go. A node named
/// before muster knew it passed kube-scheduler's filters too: once it arrives, the simulation
/// may plan that member there, rather than take it for a node its filters excluded.
#[test]
fn a_node_offered_before_muster_knew_it_counts_as_passed_once_it_arrives() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let a = pod("a").cpu(1000).gang("pair", 2).build();
    let b = pod("b").cpu(1000).gang("pair", 2).build();
    w.add(&[&a, &b]);
    // kube-scheduler's filters excluded n2 for a, and passed n3, which muster does not know.
    let verdicts = filter_on(&mut w, &a, &["n1", "n3"]);
    assert_eq!(verdicts[0], NodeVerdict::Fits, "a on n1, b on n2");
    // n1 is taken meanwhile, and n3 arrives: a can now go only to n3.
    let filler = pod("filler").cpu(1000).bound("n1").build();
    w.add(&[&filler]);
    w.table.apply_node(node("n3", 1000));
    assert_eq!(
        filter_on(&mut w, &b, &["n2", "n3"]),
        [NodeVerdict::Fits, NodeVerdict::NotOffered],
        "b on n2, a on n3"
    );
}

/// A pod refused by kube-scheduler's own filters on some nodes (here NodeAffinity on
/// every node but one) and by muster on the rest, for room seats hold, is asked to retry when
/// that room is released, like a pod only muster refused. kube-scheduler then re-queues it:
/// `findNodesThatFitPod` adds the pseudo-plugin `Extender` to the pod's rejectors whenever an
/// extender filtered out a node, and the default enqueue extension registered for it queues
/// the pod on every event, its own update (`TargetPod`/`Update`) included.
#[test]
fn a_pod_in_tree_filters_refused_elsewhere_is_asked_to_retry_when_seats_release() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let m0 = pod("m0").cpu(1000).gang("pair", 2).build();
    w.add(&[&m0]);
    let (ok, _) = w.filter(&m0);
    let seat = ok[0].clone();
    wait_message(&w.bind(&m0, &seat));
    // Room for the missing member is held on the other node: the only one the plain pod's
    // node affinity allows.
    let other = if seat == "n1" { "n2" } else { "n1" };
    assert_eq!(w.reserved(other), 1000);
    let plain = pod("plain").cpu(1000).build();
    w.add(&[&plain]);
    w.table.take_notices();
    let verdicts = filter_on(&mut w, &plain, &[other]);
    assert!(
        matches!(&verdicts[0], NodeVerdict::Unschedulable(r) if r.contains("reserved for gangs")),
        "{verdicts:?}"
    );

    w.advance(w.table.config.creation_window);
    w.table.expire(w.now);
    assert_eq!(w.reserved(other), 0, "the creation window closed");
    assert_eq!(
        retries(&mut w),
        [("plain".to_string(), messages::RETRY.to_string())]
    );
    assert_eq!(filter_on(&mut w, &plain, &[other]), [NodeVerdict::Fits]);
}

/// The pods remembered for a retry are bounded (kube-scheduler's periodic flush still retries
/// the rest).
#[test]
fn pods_remembered_for_unknown_nodes_are_bounded() {
    let mut table = GangTable::new(ModelConfig::default());
    for i in 0..MAX_REFUSED_REMEMBERED + 5 {
        table.refused_for_unknown_node(&PodUid::from(format!("u{i}")));
    }
    assert_eq!(
        table.retry_asks.refused_for_unknown_nodes(),
        MAX_REFUSED_REMEMBERED
    );
}
