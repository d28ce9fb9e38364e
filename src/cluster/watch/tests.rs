//! `apply_event` fed with synthetic watch streams, re-lists included: no cluster.

use std::time::Instant;

use serde_json::json;

use super::*;
use crate::model::{BindDecision, BindRequest, ModelConfig, NodeVerdict, NoticeKind};

fn pod(name: &str, cpu: &str, node: Option<&str>, annotations: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": format!("uid-{name}"),
            "annotations": annotations,
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": if node.is_some() { "Running" } else { "Pending" }},
    }))
    .unwrap()
}

fn plain(name: &str, cpu: &str, node: Option<&str>) -> Pod {
    pod(name, cpu, node, json!({}))
}

fn member(name: &str, cpu: &str) -> Pod {
    pod(
        name,
        cpu,
        None,
        json!({"muster.dev/group": "g", "muster.dev/min-available": "2"}),
    )
}

fn node(name: &str, cpu: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }))
    .unwrap()
}

/// Names of the nodes where a plain pod asking `cpu_milli` fits now.
fn room_for(table: &mut GangTable, cpu: &str) -> Vec<String> {
    let probe = pod_info(&plain("probe", cpu, None)).unwrap();
    // As the watch would deliver it: the verbs answer only for pods muster has seen.
    table.apply_pod(probe.clone());
    let names = ["n1", "n2"];
    let verdicts = table.filter(&probe, &names, Instant::now());
    table.remove_pod(&probe.uid);
    names
        .iter()
        .zip(verdicts)
        .filter(|(_, v)| *v == NodeVerdict::Fits)
        .map(|(n, _)| n.to_string())
        .collect()
}

fn feed<K: Indexed<Error = ConvertError>>(
    table: &mut GangTable,
    relist: &mut Relist,
    events: Vec<Event<K>>,
) -> Vec<Applied> {
    events
        .into_iter()
        .map(|e| apply_event(table, relist, e))
        .collect()
}

#[test]
fn applies_updates_and_deletes_as_the_watch_reports_them() {
    let mut table = GangTable::new(ModelConfig::default());
    let (mut nodes, mut pods) = (Relist::default(), Relist::default());
    feed(
        &mut table,
        &mut nodes,
        vec![Event::Apply(node("n1", "1")), Event::Apply(node("n2", "1"))],
    );
    assert_eq!(table.node_count(), 2);
    feed(
        &mut table,
        &mut pods,
        vec![Event::Apply(plain("web", "600m", Some("n1")))],
    );
    assert_eq!(table.pod_count(), 1);
    assert!(table.has_node("uid-web"));
    assert_eq!(
        room_for(&mut table, "500m"),
        vec!["n2"],
        "web's requests count on n1"
    );
    // An update moves nothing twice: the old requests leave, the new ones count.
    feed(
        &mut table,
        &mut pods,
        vec![Event::Apply(plain("web", "300m", Some("n1")))],
    );
    assert_eq!(room_for(&mut table, "500m"), vec!["n1", "n2"]);
    feed(
        &mut table,
        &mut pods,
        vec![Event::Delete(plain("web", "300m", Some("n1")))],
    );
    assert_eq!(table.pod_count(), 0);
    assert_eq!(room_for(&mut table, "1"), vec!["n1", "n2"]);
    feed(&mut table, &mut nodes, vec![Event::Delete(node("n2", "1"))]);
    assert_eq!(table.node_count(), 1);
}

#[test]
fn a_relist_forgets_what_it_did_not_list_only_once_it_is_done() {
    let mut table = GangTable::new(ModelConfig::default());
    let mut relist = Relist::default();
    let bound = |name: &str| plain(name, "100m", Some("n1"));
    let first = feed(
        &mut table,
        &mut relist,
        vec![
            Event::Init,
            Event::InitApply(bound("a")),
            Event::InitApply(bound("b")),
            Event::InitDone,
        ],
    );
    assert!(
        matches!(first[3], Applied::Synced { remaining: Some(2) }),
        "{first:?}"
    );
    // The watch restarts; `b` was deleted while it was down, `c` created.
    feed(
        &mut table,
        &mut relist,
        vec![
            Event::Init,
            Event::InitApply(bound("a")),
            Event::InitApply(bound("c")),
        ],
    );
    assert!(table.has_node("uid-b"), "b is kept until the list is done");
    assert_eq!(table.pod_count(), 3);
    let done = feed(&mut table, &mut relist, vec![Event::<Pod>::InitDone]);
    assert!(
        matches!(done[0], Applied::Synced { remaining: Some(2) }),
        "{done:?}"
    );
    assert!(!table.has_node("uid-b"));
    assert!(table.has_node("uid-a") && table.has_node("uid-c"));
    // Events after the re-list are applied as they come, with no re-list bookkeeping.
    let later = feed(
        &mut table,
        &mut relist,
        vec![Event::Apply(bound("d")), Event::InitDone],
    );
    assert!(
        matches!(later[1], Applied::Synced { remaining: None }),
        "{later:?}"
    );
    assert_eq!(
        table.pod_count(),
        3,
        "an InitDone without a list removes nothing"
    );
}

#[test]
fn a_relist_of_nodes_drops_deleted_nodes_and_the_seats_on_them() {
    let mut table = GangTable::new(ModelConfig::default());
    let (mut nodes, mut pods) = (Relist::default(), Relist::default());
    feed(
        &mut table,
        &mut nodes,
        vec![
            Event::Init,
            Event::InitApply(node("n1", "1")),
            Event::InitApply(node("n2", "1")),
            Event::InitDone,
        ],
    );
    feed(
        &mut table,
        &mut pods,
        vec![
            Event::Apply(member("m0", "600m")),
            Event::Apply(member("m1", "600m")),
        ],
    );
    let d = table.bind(
        BindRequest {
            namespace: "ml",
            name: "m0",
            uid: "uid-m0",
            node: "n2",
        },
        Instant::now(),
    );
    assert!(matches!(d, BindDecision::Wait { .. }), "{d:?}");
    assert_eq!(
        table.gauges(Instant::now()).seats,
        2,
        "m0 on n2, m1 planned on n1"
    );
    // n2 was deleted while the watch was down.
    let done = feed(
        &mut table,
        &mut nodes,
        vec![
            Event::Init,
            Event::InitApply(node("n1", "1")),
            Event::InitDone,
        ],
    );
    assert!(
        matches!(done[2], Applied::Synced { remaining: Some(1) }),
        "{done:?}"
    );
    assert_eq!(table.node_count(), 1);
    assert!(!table.holds_seat("uid-m0"), "its seat went with its node");
    assert_eq!(table.gauges(Instant::now()).seats, 1);
}

#[test]
fn an_object_muster_cannot_read_is_reported_and_changes_nothing() {
    let mut table = GangTable::new(ModelConfig::default());
    let mut relist = Relist::default();
    let applied = feed(
        &mut table,
        &mut relist,
        vec![Event::Apply(plain("bad", "lots", None))],
    );
    match &applied[0] {
        Applied::Unreadable(e) => assert_eq!(
            e.to_string(),
            "pod ml/bad: invalid quantity \"lots\": expected a decimal number"
        ),
        other => panic!("expected Unreadable, got {other:?}"),
    }
    assert_eq!(table.pod_count(), 0);
    let mut nameless = plain("x", "100m", None);
    nameless.metadata.uid = None;
    assert!(matches!(
        apply_event(&mut table, &mut relist, Event::Apply(nameless.clone())),
        Applied::Unreadable(_)
    ));
    // Deleting what muster never had is a no-op.
    assert!(matches!(
        apply_event(&mut table, &mut relist, Event::Delete(nameless)),
        Applied::Changed
    ));
    assert_eq!(table.pod_count(), 0);
}

/// fail-safe: a node muster cannot read in full is kept with what it can read (not
/// dropped, which failed every pod on it), and a bound pod it cannot read still fills its
/// node (not skipped, which freed room its kubelet uses).
#[test]
fn a_node_or_a_bound_pod_read_in_part_is_kept() {
    let mut table = GangTable::new(ModelConfig::default());
    let mut relist = Relist::default();
    let mut n1 = node("n1", "1");
    let allocatable = n1.status.as_mut().unwrap().allocatable.as_mut().unwrap();
    allocatable.insert(
        "example.com/fpga".into(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("two".into()),
    );
    let applied = apply_event(&mut table, &mut relist, Event::Apply(n1));
    assert!(matches!(applied, Applied::PartlyRead(_)), "{applied:?}");
    assert_eq!(room_for(&mut table, "100m"), vec!["n1"]);
    let unreadable = plain("bound", "lots", Some("n1"));
    let applied = apply_event(&mut table, &mut relist, Event::Apply(unreadable.clone()));
    assert!(matches!(applied, Applied::PartlyRead(_)), "{applied:?}");
    assert!(room_for(&mut table, "100m").is_empty(), "n1 counts as full");
    apply_event(&mut table, &mut relist, Event::Delete(unreadable));
    assert_eq!(room_for(&mut table, "100m"), vec!["n1"]);
}

/// `muster_cache_last_event_age_seconds` is refreshed only by events that show the watch
/// delivers: objects and completed lists. kube-rs emits `Init` before each list request, so
/// while the API server is down every retry starts a list that never delivers.
#[test]
fn only_objects_and_completed_lists_refresh_the_cache_age() {
    let mut table = GangTable::new(ModelConfig::default());
    let mut relist = Relist::default();
    let retrying = feed::<Node>(&mut table, &mut relist, vec![Event::Init, Event::Init]);
    assert!(retrying.iter().all(|a| !a.shows_delivery()), "{retrying:?}");
    let delivered = feed(
        &mut table,
        &mut relist,
        vec![
            Event::Init,
            Event::InitApply(node("n1", "1")),
            Event::InitDone,
            Event::Apply(node("n2", "1")),
            Event::Delete(node("n2", "1")),
            Event::Apply(node("bad", "lots")),
        ],
    );
    let shows: Vec<bool> = delivered.iter().map(Applied::shows_delivery).collect();
    assert_eq!(
        shows,
        [false, true, true, true, true, true],
        "{delivered:?}"
    );
}

/// A pod refused while its node was not in muster's cache yet is asked to retry when the node
/// watch delivers that node, whether by a re-list after an outage or by a plain event.
#[test]
fn a_node_delivered_by_a_relist_asks_pods_refused_for_it_to_retry() {
    let mut table = GangTable::new(ModelConfig::default());
    let (mut nodes, mut pods) = (Relist::default(), Relist::default());
    feed(&mut table, &mut nodes, vec![Event::Apply(node("n1", "1"))]);
    feed(
        &mut table,
        &mut pods,
        vec![Event::Apply(plain("web", "2", None))],
    );
    table.take_notices();
    let web = pod_info(&plain("web", "2", None)).unwrap();
    let verdicts = table.filter(&web, &["n1", "n2"], Instant::now());
    assert!(
        matches!(&verdicts[1], NodeVerdict::Unresolvable(r) if r.starts_with("node n2 is not in muster's cache yet")),
        "{verdicts:?}"
    );
    feed(
        &mut table,
        &mut nodes,
        vec![Event::Init, Event::InitApply(node("n1", "1"))],
    );
    assert!(table.take_notices().is_empty(), "n2 has not arrived");
    feed(
        &mut table,
        &mut nodes,
        vec![Event::InitApply(node("n2", "4")), Event::InitDone],
    );
    let asked: Vec<(String, NoticeKind)> = table
        .take_notices()
        .into_iter()
        .map(|n| (n.pod.name.to_string(), n.kind))
        .collect();
    assert_eq!(asked, [("web".to_string(), NoticeKind::Retry)]);
}

#[test]
fn only_a_403_from_the_api_server_counts_as_forbidden() {
    let status =
        |code: u16| Box::new(kube::core::Status::failure("no", "Forbidden").with_code(code));
    assert!(is_forbidden(&watcher::Error::InitialListFailed(
        kube::Error::Api(status(403))
    )));
    assert!(is_forbidden(&watcher::Error::WatchStartFailed(
        kube::Error::Api(status(403))
    )));
    assert!(is_forbidden(&watcher::Error::WatchError(status(403))));
    assert!(!is_forbidden(&watcher::Error::InitialListFailed(
        kube::Error::Api(status(404))
    )));
    assert!(!is_forbidden(&watcher::Error::InitialListFailed(
        kube::Error::Api(status(500))
    )));
    assert!(!is_forbidden(&watcher::Error::NoResourceVersion));
}
