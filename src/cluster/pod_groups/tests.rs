//! PodGroup objects read as each API's controllers write them, fed through the watches' pure
//! `apply_event` (re-lists included), and the discovery decisions: no cluster.

use std::collections::BTreeSet;

use kube::runtime::watcher::Event;
use serde_json::{json, Value};

use super::discovery::{conclusive, Change, Found, Round, Rounds, READY_AFTER_INCONCLUSIVE_ROUNDS};
use super::*;
use crate::cluster::watch::{apply_event, Applied, Relist};
use crate::model::ModelConfig;

fn object<A: PodGroupKind>(ns: &str, name: &str, spec: Value) -> PodGroupObject<A> {
    serde_json::from_value(json!({
        "apiVersion": format!("{}/{}", A::GROUP, A::VERSION),
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}")},
        "spec": spec,
        "status": {"phase": "Pending"},
    }))
    .unwrap()
}

fn read<A: PodGroupKind>(spec: Value) -> Result<PodGroupDef, String> {
    pod_group_def(&object::<A>("ml", "pg", spec)).map_err(|e| e.to_string())
}

fn tasks(list: &[(&str, u32)]) -> BTreeMap<String, u32> {
    list.iter().map(|(t, n)| (t.to_string(), *n)).collect()
}

/// What Volcano's job controller writes for the seed job (`ai-gang-job`: a master and a worker).
#[test]
fn a_volcano_pod_group_gives_its_quorum_and_task_minimums() {
    let def = read::<Volcano>(json!({
        "minMember": 2,
        "minTaskMember": {"master": 1, "worker": 1},
        "queue": "default",
        "minResources": {"cpu": "200m"},
    }))
    .unwrap();
    assert_eq!(
        def,
        PodGroupDef {
            api: PodGroupApi::Volcano,
            key: GangKey::new("ml", "pg"),
            min_member: 2,
            min_task_member: tasks(&[("master", 1), ("worker", 1)]),
            timeout: None,
            topology: None,
            min_resources: Some(crate::model::Resources::cpu(200)),
        }
    );
    // minMember is omitempty in Volcano's Go type: absent is 0.
    let def = read::<Volcano>(json!({"queue": "default"})).unwrap();
    assert_eq!((def.min_member, def.min_task_member.len()), (0, 0));
}

#[test]
fn a_scheduler_plugins_pod_group_gives_its_quorum_and_timeout() {
    let def = read::<SchedulerPlugins>(json!({
        "minMember": 3,
        "scheduleTimeoutSeconds": 90,
        "minResources": {"cpu": "3"},
    }))
    .unwrap();
    assert_eq!(
        (def.api, def.min_member, def.timeout),
        (
            PodGroupApi::SchedulerPlugins,
            3,
            Some(Duration::from_secs(90))
        )
    );
    assert!(def.min_task_member.is_empty());
    // The coscheduling plugin reads 0 as "use the configured default", as it does no value.
    for spec in [
        json!({"minMember": 3, "scheduleTimeoutSeconds": 0}),
        json!({"minMember": 3}),
    ] {
        assert_eq!(read::<SchedulerPlugins>(spec).unwrap().timeout, None);
    }
}

#[test]
fn a_kubernetes_pod_group_gives_the_gang_policy_min_count_or_one_for_basic() {
    let def = read::<Kubernetes>(json!({"schedulingPolicy": {"gang": {"minCount": 3}}})).unwrap();
    assert_eq!((def.api, def.min_member), (PodGroupApi::Kubernetes, 3));
    let def = read::<Kubernetes>(json!({
        "schedulingPolicy": {"basic": {}},
        "disruptionMode": {"single": {}},
    }))
    .unwrap();
    assert_eq!(def.min_member, 1, "basic: each pod on its own");
}

#[test]
fn an_unreadable_spec_is_an_error_naming_the_object_and_the_field() {
    let cases = [
        (
            read::<Volcano>(json!({"minMember": "two"})),
            "scheduling.volcano.sh/v1beta1 PodGroup ml/pg: spec.minMember: invalid type: string \"two\", expected i32",
        ),
        (
            read::<Volcano>(json!({"minMember": 2, "minTaskMember": {"worker": -1}})),
            "scheduling.volcano.sh/v1beta1 PodGroup ml/pg: spec.minTaskMember.worker: -1 is negative; it must be 0 or more",
        ),
        (
            read::<SchedulerPlugins>(json!({"minMember": 2, "scheduleTimeoutSeconds": -5})),
            "scheduling.x-k8s.io/v1alpha1 PodGroup ml/pg: spec.scheduleTimeoutSeconds: -5 is negative; it must be 0 or more",
        ),
        (
            read::<Kubernetes>(json!({"schedulingPolicy": {}})),
            "scheduling.k8s.io/v1beta1 PodGroup ml/pg: spec.schedulingPolicy: sets neither basic nor gang",
        ),
        (
            read::<Kubernetes>(json!({"schedulingPolicy": {"basic": {}, "gang": {"minCount": 2}}})),
            "scheduling.k8s.io/v1beta1 PodGroup ml/pg: spec.schedulingPolicy: sets both basic and gang; one is allowed",
        ),
        (
            read::<Kubernetes>(json!({"schedulingPolicy": {"gang": {"minCount": -2}}})),
            "scheduling.k8s.io/v1beta1 PodGroup ml/pg: spec.schedulingPolicy.gang.minCount: -2 is negative; it must be 0 or more",
        ),
    ];
    for (got, want) in cases {
        assert_eq!(got, Err(want.to_string()));
    }
    let mut nameless = object::<Volcano>("ml", "pg", json!({"minMember": 2}));
    nameless.metadata.name = None;
    assert_eq!(
        pod_group_def(&nameless).unwrap_err().to_string(),
        "a scheduling.volcano.sh/v1beta1 PodGroup object has no metadata.name"
    );
}

#[test]
fn each_api_is_watched_at_its_own_path() {
    use kube::Resource;
    assert_eq!(
        PodGroupObject::<Volcano>::url_path(&(), Some("ml")),
        "/apis/scheduling.volcano.sh/v1beta1/namespaces/ml/podgroups"
    );
    assert_eq!(
        PodGroupObject::<SchedulerPlugins>::url_path(&(), None),
        "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"
    );
    assert_eq!(
        PodGroupObject::<Kubernetes>::url_path(&(), None),
        "/apis/scheduling.k8s.io/v1beta1/podgroups"
    );
    for api in PodGroupApi::ALL {
        let resource = super::discovery::resource(api);
        assert_eq!(
            format!("podgroups.{}", api.api_version().split('/').next().unwrap()),
            resource
        );
    }
}

fn volcano(name: &str, min: i32) -> PodGroupObject<Volcano> {
    object("ml", name, json!({"minMember": min}))
}

fn feed(
    table: &mut GangTable,
    relist: &mut Relist,
    events: Vec<Event<PodGroupObject<Volcano>>>,
) -> Vec<Applied<PodGroupError>> {
    events
        .into_iter()
        .map(|e| apply_event(table, relist, e))
        .collect()
}

fn known(table: &GangTable, name: &str) -> Option<u32> {
    table
        .pod_groups()
        .get(PodGroupApi::Volcano, &GangKey::new("ml", name))
        .map(|d| d.min_member)
}

#[test]
fn pod_group_events_fill_the_index_and_a_relist_forgets_only_once_done() {
    let mut table = GangTable::new(ModelConfig::default());
    let mut relist = Relist::default();
    let first = feed(
        &mut table,
        &mut relist,
        vec![
            Event::Init,
            Event::InitApply(volcano("a", 2)),
            Event::InitApply(volcano("b", 3)),
            Event::InitDone,
        ],
    );
    assert!(
        matches!(first[3], Applied::Synced { remaining: Some(2) }),
        "{first:?}"
    );
    assert_eq!((known(&table, "a"), known(&table, "b")), (Some(2), Some(3)));
    // An update replaces the definition; a delete forgets it.
    feed(
        &mut table,
        &mut relist,
        vec![
            Event::Apply(volcano("a", 4)),
            Event::Delete(volcano("b", 3)),
        ],
    );
    assert_eq!((known(&table, "a"), known(&table, "b")), (Some(4), None));
    // The watch restarts: `a` was deleted while it was down, `c` created.
    feed(
        &mut table,
        &mut relist,
        vec![Event::Init, Event::InitApply(volcano("c", 2))],
    );
    assert_eq!(known(&table, "a"), Some(4), "kept until the list is done");
    let done = feed(&mut table, &mut relist, vec![Event::InitDone]);
    assert!(
        matches!(done[0], Applied::Synced { remaining: Some(1) }),
        "{done:?}"
    );
    assert_eq!((known(&table, "a"), known(&table, "c")), (None, Some(2)));
    assert_eq!(table.pod_groups().len(), 1);
}

#[test]
fn a_relist_of_one_api_leaves_the_others_pod_groups_alone() {
    let mut table = GangTable::new(ModelConfig::default());
    let (mut v, mut k) = (Relist::default(), Relist::default());
    feed(&mut table, &mut v, vec![Event::Apply(volcano("same", 2))]);
    let kube: PodGroupObject<Kubernetes> = object(
        "ml",
        "same",
        json!({"schedulingPolicy": {"gang": {"minCount": 5}}}),
    );
    apply_event(&mut table, &mut k, Event::Apply(kube));
    // An empty re-list of the Kubernetes API.
    apply_event(
        &mut table,
        &mut k,
        Event::<PodGroupObject<Kubernetes>>::Init,
    );
    let done = apply_event(
        &mut table,
        &mut k,
        Event::<PodGroupObject<Kubernetes>>::InitDone,
    );
    assert!(
        matches!(done, Applied::Synced { remaining: Some(0) }),
        "{done:?}"
    );
    assert_eq!(known(&table, "same"), Some(2), "Volcano's is kept");
    let key = GangKey::new("ml", "same");
    assert!(table
        .pod_groups()
        .get(PodGroupApi::Kubernetes, &key)
        .is_none());
    let g = gauges(&table);
    assert_eq!(
        g.map(|g| (g.api, g.known)),
        [
            ("scheduling.volcano.sh/v1beta1", 1),
            ("scheduling.x-k8s.io/v1alpha1", 0),
            ("scheduling.k8s.io/v1beta1", 0),
        ]
    );
    assert_eq!(table.pod_groups().len(), 1, "counting removed nothing");
}

#[test]
fn an_unreadable_pod_group_is_reported_and_changes_nothing() {
    let mut table = GangTable::new(ModelConfig::default());
    let mut relist = Relist::default();
    feed(&mut table, &mut relist, vec![Event::Apply(volcano("a", 2))]);
    let bad = object::<Volcano>("ml", "a", json!({"minMember": -3}));
    match &feed(&mut table, &mut relist, vec![Event::Apply(bad)])[0] {
        Applied::Unreadable(e) => assert_eq!(
            e.to_string(),
            "scheduling.volcano.sh/v1beta1 PodGroup ml/a: spec.minMember: -3 is negative; it must be 0 or more"
        ),
        other => panic!("expected Unreadable, got {other:?}"),
    }
    assert_eq!(
        known(&table, "a"),
        Some(2),
        "the last readable definition stays"
    );
    // Deleting what muster never had is a no-op.
    let applied = feed(
        &mut table,
        &mut relist,
        vec![Event::Delete(volcano("never", 2))],
    );
    assert!(matches!(applied[0], Applied::Changed));
    assert_eq!(table.pod_groups().len(), 1);
}

#[test]
fn discovery_starts_watches_for_served_apis_and_stops_them_when_they_go() {
    let (v, s, k) = (
        PodGroupApi::Volcano,
        PodGroupApi::SchedulerPlugins,
        PodGroupApi::Kubernetes,
    );
    let mut rounds = Rounds::default();
    let found = [
        (v, Found::Served),
        (s, Found::NotServed),
        (k, Found::Served),
    ];
    assert_eq!(
        rounds.round(&BTreeSet::new(), &found),
        Round {
            changes: vec![Change::Start(v), Change::Start(k)],
            ready_with: Some(vec![v, k]),
        }
    );
    // Running as found: nothing to do, and readiness was told once.
    let running = BTreeSet::from([v, k]);
    assert_eq!(
        rounds.round(&running, &found),
        Round {
            changes: vec![],
            ready_with: None
        }
    );
    // Volcano's CRD was deleted; scheduler-plugins' installed. Volcano's watch stops only once
    // its API was missing two rounds in a row.
    let found = [
        (v, Found::NotServed),
        (s, Found::Served),
        (k, Found::Served),
    ];
    assert_eq!(rounds.round(&running, &found).changes, [Change::Start(s)]);
    let running = BTreeSet::from([v, s, k]);
    assert_eq!(rounds.round(&running, &found).changes, [Change::Stop(v)]);
}

/// An API server that just restarted may answer 404 for a served API once: that forgets no
/// PodGroup. Missing rounds count only in a row.
#[test]
fn an_api_missing_for_one_round_keeps_its_watch() {
    let v = PodGroupApi::Volcano;
    let mut rounds = Rounds::default();
    let running = BTreeSet::from([v]);
    let served = [(v, Found::Served)];
    let missing = [(v, Found::NotServed)];
    let failed = [(v, Found::Unknown("connection refused".into()))];
    rounds.round(&running, &served);
    assert!(rounds.round(&running, &missing).changes.is_empty());
    assert!(rounds.round(&running, &served).changes.is_empty());
    assert!(rounds.round(&running, &missing).changes.is_empty());
    // A failed round says nothing either way: it neither counts nor resets.
    assert!(rounds.round(&running, &failed).changes.is_empty());
    assert_eq!(rounds.round(&running, &missing).changes, [Change::Stop(v)]);
}

#[test]
fn a_failed_discovery_neither_starts_nor_stops_a_watch() {
    let (v, s, k) = (
        PodGroupApi::Volcano,
        PodGroupApi::SchedulerPlugins,
        PodGroupApi::Kubernetes,
    );
    let refused = || Found::Unknown("connection refused".into());
    let found = [(v, refused()), (s, refused()), (k, Found::NotServed)];
    let mut rounds = Rounds::default();
    assert_eq!(
        rounds.round(&BTreeSet::from([v]), &found),
        Round {
            changes: vec![],
            ready_with: None
        }
    );
    // Nor does it tell readiness which APIs to wait for: that takes a round that found out
    // about all three.
    assert!(!conclusive(&found));
    assert!(rounds.awaiting_readiness());
    assert!(conclusive(&[
        (v, Found::Served),
        (s, Found::NotServed),
        (k, Found::NotServed)
    ]));
}

/// An API whose discovery keeps failing does not keep muster unready for ever: after enough
/// inconclusive rounds readiness waits for the APIs found served, and no more.
#[test]
fn readiness_stops_waiting_for_a_conclusive_round_after_enough_inconclusive_ones() {
    let (v, s, k) = (
        PodGroupApi::Volcano,
        PodGroupApi::SchedulerPlugins,
        PodGroupApi::Kubernetes,
    );
    let found = [
        (
            v,
            Found::Unknown("the server is currently unable to handle the request".into()),
        ),
        (s, Found::NotServed),
        (k, Found::Served),
    ];
    let mut rounds = Rounds::default();
    let running = BTreeSet::new();
    for _ in 1..READY_AFTER_INCONCLUSIVE_ROUNDS {
        assert_eq!(rounds.round(&running, &found).ready_with, None);
    }
    assert_eq!(rounds.round(&running, &found).ready_with, Some(vec![k]));
    assert!(!rounds.awaiting_readiness());
}

/// A muster whose RBAC predates PodGroups (the API server answers 403) must not stay unready:
/// the forbidden API stops being waited for, and its gangs go by their pods' keys.
#[test]
fn a_pod_group_api_muster_may_not_list_is_no_longer_waited_for() {
    struct NoBinder;
    impl crate::state::binder::Binder for NoBinder {
        fn bind(
            &self,
            _: crate::model::PodRef,
            _: crate::model::NodeName,
        ) -> futures::future::BoxFuture<'static, Result<(), crate::state::binder::BindError>>
        {
            unreachable!("no binding in this test")
        }
    }
    let shared = Shared::new(
        ModelConfig::default(),
        std::sync::Arc::new(NoBinder),
        crate::state::event_sink::EventSink::disabled(),
    );
    shared.readiness.set_pods_synced();
    shared.readiness.set_nodes_synced();
    shared.readiness.expect_pod_group_discovery();
    shared
        .readiness
        .pod_group_discovery_done([PodGroupApi::Volcano]);
    assert!(!shared.readiness.is_ready());
    <PodGroupObject<Volcano> as crate::cluster::watch::Indexed>::forbidden(&shared);
    assert!(shared.readiness.is_ready());
    assert!(!shared
        .table
        .lock()
        .pod_groups()
        .is_served(PodGroupApi::Volcano));
}

/// Kubernetes' `scheduling.k8s.io/v1beta1` PodGroup (`TopologyConstraint` in
/// `k8s.io/api/scheduling/v1beta1/types.go`): `schedulingConstraints.topology[].key`, one at most.
#[test]
fn a_kubernetes_pod_group_gives_its_required_topology_key() {
    use crate::model::topology::PodGroupTopology;
    let def = read::<Kubernetes>(json!({
        "schedulingPolicy": {"gang": {"minCount": 8}},
        "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]},
    }))
    .unwrap();
    assert_eq!(
        def.topology,
        Some(PodGroupTopology::Required(
            "topology.kubernetes.io/rack".into()
        ))
    );
    let none = read::<Kubernetes>(json!({"schedulingPolicy": {"gang": {"minCount": 8}}})).unwrap();
    assert_eq!(none.topology, None);
    let bad = read::<Kubernetes>(json!({
        "schedulingPolicy": {"gang": {"minCount": 8}},
        "schedulingConstraints": {"topology": [{"key": "rack!"}]},
    }))
    .unwrap_err();
    assert!(
        bad.contains("spec.schedulingConstraints.topology[0].key"),
        "{bad}"
    );
    let two = read::<Kubernetes>(json!({
        "schedulingPolicy": {"gang": {"minCount": 8}},
        "schedulingConstraints": {"topology": [{"key": "a"}, {"key": "b"}]},
    }))
    .unwrap_err();
    assert!(two.contains("more than one constraint"), "{two}");
}

/// Volcano's PodGroup `spec.networkTopology` (`NetworkTopologySpec` in volcano.sh/apis
/// `pkg/apis/scheduling/v1beta1/types.go`), as in Volcano's network-topology user guide:
/// `mode: hard, highestTierAllowed: 2`. Read, but its tiers name HyperNodes (see
/// `model::topology`).
#[test]
fn a_volcano_network_topology_is_read_with_its_mode_and_tier() {
    use crate::model::topology::PodGroupTopology;
    let hard = read::<Volcano>(json!({
        "minMember": 4,
        "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
    }))
    .unwrap();
    assert_eq!(
        hard.topology,
        Some(PodGroupTopology::VolcanoNetwork {
            hard: true,
            tier: "highestTierAllowed 2".into()
        })
    );
    let soft = read::<Volcano>(json!({
        "minMember": 4,
        "networkTopology": {"mode": "soft", "highestTierName": "spine"},
    }))
    .unwrap();
    assert_eq!(
        soft.topology,
        Some(PodGroupTopology::VolcanoNetwork {
            hard: false,
            tier: "highestTierName spine".into()
        })
    );
    let bad = read::<Volcano>(json!({"networkTopology": {"mode": "strict"}})).unwrap_err();
    assert!(bad.contains("spec.networkTopology.mode"), "{bad}");
}

#[test]
fn a_volcano_pod_groups_min_resources_are_read_and_a_bad_quantity_is_named() {
    // As Volcano's job controller writes it: the quota usage of the quorum's pods.
    let def = read::<Volcano>(json!({"minMember": 2, "minResources": {
        "cpu": 3, "memory": "1Gi", "pods": "2", "count/pods": "2",
        "requests.cpu": "3", "limits.cpu": "6", "requests.memory": "1Gi",
    }}))
    .unwrap();
    let min = def.min_resources.expect("minResources");
    assert_eq!((min.cpu_milli, min.memory, min.pods), (3000, 1 << 30, 2));
    assert!(min.extended.is_empty(), "{min:?}");
    assert_eq!(
        read::<Volcano>(json!({"minMember": 2}))
            .unwrap()
            .min_resources,
        None
    );
    let bad = read::<Volcano>(json!({"minResources": {"cpu": "lots"}}))
        .unwrap_err()
        .to_string();
    assert!(bad.contains("spec.minResources.cpu"), "{bad}");
}
