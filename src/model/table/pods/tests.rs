use super::*;
use crate::testkit::pod;

fn node(name: &str) -> NodeName {
    NodeName::from(name)
}

#[test]
fn a_bound_pod_is_charged_to_its_node_and_uncharged_when_removed() {
    let mut index = PodIndex::default();
    let p = pod("p").cpu(300).bound("n1").build();
    let (old, charges) = index.apply(p.clone());
    assert!(old.is_none());
    assert_eq!(charges.uncharge, None);
    assert_eq!(charges.charge, Some((node("n1"), p.requests.clone())));
    let (info, uncharge) = index.remove(&p.uid).unwrap();
    assert_eq!(info, p);
    assert_eq!(uncharge, Some((node("n1"), p.requests.clone())));
    assert!(index.remove(&p.uid).is_none());
    assert_eq!(index.len(), 0);
}

#[test]
fn an_assumed_node_survives_updates_until_the_api_server_names_one() {
    let mut index = PodIndex::default();
    let p = pod("p").build();
    index.apply(p.clone());
    assert!(index.get(&p.uid).unwrap().is_pending());
    let charge = index.assume(&p.uid, node("n1"));
    assert_eq!(charge, Some((node("n1"), p.requests.clone())));
    // A label change from the watch: still assumed, charged once (off, then on again).
    let (_, charges) = index.apply(p.clone());
    assert_eq!(charges.uncharge, charges.charge);
    assert_eq!(index.get(&p.uid).unwrap().assumed(), Some(&node("n1")));
    // The watch confirms the binding: the assumption is dropped, the charge stays.
    let bound = pod("p").bound("n1").build();
    index.apply(bound);
    let entry = index.get(&p.uid).unwrap();
    assert_eq!(entry.assumed(), None);
    assert_eq!(entry.node(), Some(&node("n1")));
}

#[test]
fn a_failed_binding_takes_the_pod_off_its_assumed_node_only() {
    let mut index = PodIndex::default();
    let p = pod("p").build();
    index.apply(p.clone());
    index.assume(&p.uid, node("n1"));
    assert_eq!(
        index.unassume(&p.uid, &node("n2")),
        None,
        "not assumed there"
    );
    assert_eq!(
        index.unassume(&p.uid, &node("n1")),
        Some((node("n1"), p.requests.clone()))
    );
    assert!(index.get(&p.uid).unwrap().is_pending());
    assert_eq!(index.unassume(&p.uid, &node("n1")), None, "only once");
}

#[test]
fn pods_with_anti_affinity_are_indexed_while_they_have_it() {
    use crate::model::rules::fixtures::{term, PodRulesBuilder, HOSTNAME};
    let mut index = PodIndex::default();
    let repels = PodRulesBuilder::default()
        .anti_affinity(term(&[("job", "j")], HOSTNAME))
        .on(pod("r").build());
    index.apply(repels.clone());
    index.apply(pod("plain").build());
    let names = |i: &PodIndex| -> Vec<String> {
        i.with_anti_affinity()
            .map(|p| p.info.name.to_string())
            .collect()
    };
    assert_eq!(names(&index), ["r"]);
    index.apply(pod("r").build());
    assert!(names(&index).is_empty(), "the update dropped the term");
    index.apply(repels);
    index.remove("uid-r");
    assert!(names(&index).is_empty());
}

#[test]
fn finished_pods_are_charged_nowhere_and_are_not_pending() {
    let mut index = PodIndex::default();
    let done = pod("done").bound("n1").terminal().build();
    let (_, charges) = index.apply(done.clone());
    assert_eq!(charges, Charges::default());
    let entry = index.get(&done.uid).unwrap();
    assert_eq!(entry.node(), Some(&node("n1")));
    assert!(!entry.is_pending());
    assert_eq!(index.assume(&done.uid, node("n2")), None);
}
