use std::collections::BTreeMap;

use super::*;

fn read(pairs: &[(&str, &str)]) -> Result<Option<TopologyConstraint>, TopologyError> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    topology_of(|k| map.get(k).cloned())
}

fn required(key: &str, source: &'static str) -> Option<TopologyConstraint> {
    Some(TopologyConstraint {
        topology: Topology::Required(Arc::from(key)),
        source,
    })
}

#[test]
fn muster_required_and_preferred_keys() {
    assert_eq!(
        read(&[(TOPOLOGY_REQUIRED, "topology.kubernetes.io/rack")]),
        Ok(required("topology.kubernetes.io/rack", TOPOLOGY_REQUIRED))
    );
    let preferred = read(&[(
        TOPOLOGY_PREFERRED,
        "kubernetes.io/hostname, example.com/rack ,example.com/block",
    )])
    .unwrap()
    .unwrap();
    assert_eq!(
        preferred.topology,
        Topology::Preferred(vec![
            Arc::from("kubernetes.io/hostname"),
            Arc::from("example.com/rack"),
            Arc::from("example.com/block"),
        ])
    );
    assert_eq!(preferred.topology.narrowest(), "kubernetes.io/hostname");
    assert_eq!(read(&[("app", "x")]), Ok(None));
}

/// Kueue TAS, "Run Workloads with Topology-Aware Scheduling": a Job's pod template annotated
/// `kueue.x-k8s.io/podset-required-topology: cloud.provider.com/topology-rack`, or
/// `kueue.x-k8s.io/podset-preferred-topology: cloud.provider.com/topology-block`.
#[test]
fn kueue_pod_set_annotations_as_documented() {
    assert_eq!(
        read(&[(KUEUE_REQUIRED_TOPOLOGY, "cloud.provider.com/topology-rack")]),
        Ok(required(
            "cloud.provider.com/topology-rack",
            KUEUE_REQUIRED_TOPOLOGY
        ))
    );
    assert_eq!(
        read(&[(
            KUEUE_PREFERRED_TOPOLOGY,
            "cloud.provider.com/topology-block"
        )])
        .unwrap()
        .unwrap()
        .topology,
        Topology::Preferred(vec![Arc::from("cloud.provider.com/topology-block")])
    );
    // Kueue's webhook: "must not contain more than one topology annotation".
    let err = read(&[
        (KUEUE_REQUIRED_TOPOLOGY, "cloud.com/block"),
        (KUEUE_PREFERRED_TOPOLOGY, "cloud.com/block"),
    ])
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "conflicting topology keys: kueue.x-k8s.io/podset-required-topology=\"cloud.com/block\" but kueue.x-k8s.io/podset-preferred-topology=\"cloud.com/block\"; give the pod one topology"
    );
}

#[test]
fn muster_and_kueue_keys_that_agree_are_one_constraint_that_differ_an_error() {
    assert_eq!(
        read(&[
            (TOPOLOGY_REQUIRED, "example.com/rack"),
            (KUEUE_REQUIRED_TOPOLOGY, "example.com/rack"),
        ]),
        Ok(required("example.com/rack", TOPOLOGY_REQUIRED))
    );
    let err = read(&[
        (TOPOLOGY_REQUIRED, "example.com/rack"),
        (KUEUE_REQUIRED_TOPOLOGY, "example.com/block"),
    ])
    .unwrap_err();
    assert!(err.to_string().contains("muster.dev/topology-required=\"example.com/rack\" but kueue.x-k8s.io/podset-required-topology=\"example.com/block\""));
    assert!(read(&[
        (TOPOLOGY_REQUIRED, "example.com/rack"),
        (TOPOLOGY_PREFERRED, "example.com/rack"),
    ])
    .is_err());
}

#[test]
fn malformed_label_keys_are_named() {
    let why = |key: &'static str, v: &str| read(&[(key, v)]).unwrap_err().to_string();
    assert_eq!(
        why(TOPOLOGY_REQUIRED, ""),
        "muster.dev/topology-required must name node labels (such as \"topology.kubernetes.io/rack\"): a label key cannot be empty; got \"\""
    );
    assert!(why(TOPOLOGY_REQUIRED, "rack!").contains("\"rack!\" is not a label name"));
    assert!(why(TOPOLOGY_REQUIRED, "Example.COM/rack").contains("not a DNS subdomain prefix"));
    assert!(why(TOPOLOGY_REQUIRED, &"r".repeat(64)).contains("longer than 63"));
    assert!(why(TOPOLOGY_PREFERRED, "a,,b").contains("cannot be empty"));
    assert!(why(TOPOLOGY_PREFERRED, "a,b,a").contains("listed twice"));
    assert!(why(KUEUE_PREFERRED_TOPOLOGY, "a,b").contains("one level"));
}
