use super::*;

fn cpu(m: i64) -> Resources {
    Resources::cpu(m)
}

#[test]
fn request_formula_matches_node_resources_fit() {
    struct Case {
        name: &'static str,
        containers: Vec<i64>,
        init: Vec<(i64, bool)>,
        overhead: Option<i64>,
        pod_level: Option<i64>,
        want: i64,
    }
    let cases = [
        Case {
            name: "containers sum",
            containers: vec![100, 200],
            init: vec![],
            overhead: None,
            pod_level: None,
            want: 300,
        },
        Case {
            name: "big init dominates",
            containers: vec![100],
            init: vec![(500, false)],
            overhead: None,
            pod_level: None,
            want: 500,
        },
        Case {
            name: "sidecar adds to steady state",
            containers: vec![100],
            init: vec![(50, true)],
            overhead: None,
            pod_level: None,
            want: 150,
        },
        Case {
            name: "init runs beside earlier sidecar",
            containers: vec![100],
            init: vec![(50, true), (400, false)],
            overhead: None,
            pod_level: None,
            want: 450,
        },
        Case {
            name: "init before sidecar does not see it",
            containers: vec![100],
            init: vec![(400, false), (50, true)],
            overhead: None,
            pod_level: None,
            want: 400,
        },
        Case {
            name: "overhead added",
            containers: vec![100],
            init: vec![],
            overhead: Some(25),
            pod_level: None,
            want: 125,
        },
        Case {
            name: "pod-level requests replace containers",
            containers: vec![100, 100],
            init: vec![],
            overhead: Some(10),
            pod_level: Some(500),
            want: 510,
        },
    ];
    for c in cases {
        let containers: Vec<_> = c.containers.iter().map(|m| cpu(*m)).collect();
        let init: Vec<_> = c
            .init
            .iter()
            .map(|(m, sidecar)| ContainerRequests {
                requests: cpu(*m),
                sidecar: *sidecar,
            })
            .collect();
        let overhead = c.overhead.map(cpu);
        let pod_level = c.pod_level.map(cpu);
        let got = pod_requests(&containers, &init, overhead.as_ref(), pod_level.as_ref());
        assert_eq!(got.cpu_milli, c.want, "{}", c.name);
        assert_eq!(got.pods, 1, "{}", c.name);
    }
}

#[test]
fn toleration_operators_parse_as_kube_scheduler_reads_them() {
    use TolerationOperator::*;
    assert_eq!(TolerationOperator::parse(None), Equal);
    assert_eq!(TolerationOperator::parse(Some("Equal")), Equal);
    assert_eq!(TolerationOperator::parse(Some("Exists")), Exists);
    assert_eq!(TolerationOperator::parse(Some("Gt")), Unsupported);
}

#[test]
fn pods_without_rules_stay_small() {
    assert_eq!(std::mem::size_of::<Option<Box<PodRules>>>(), 8);
    assert_eq!(std::mem::size_of::<Labels>(), 16);
    assert!(PodRules::default().is_empty());
}
