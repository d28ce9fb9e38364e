//! The rules together, as the planner will use them: gangs placed member by member.

use std::time::Instant;

use super::*;
use crate::model::inputs::terms::{InclusionPolicy, NodeSelectorTerm, SpreadConstraint};
use crate::model::rules::fixtures::{
    labelled, node, pod, selector, term, zoned, PodRulesBuilder, HOSTNAME, ZONE,
};

/// First fit, member by member, as the planner does: the node index of each member placed,
/// stopping at the first member that fits nowhere.
fn first_fit<'a>(
    gang: &mut GangPlacement<'a>,
    nodes: &'a [NodeInfo],
    members: usize,
) -> Vec<usize> {
    let mut placed = Vec::new();
    for m in 0..members {
        let Some(at) = nodes.iter().position(|n| gang.check(m, n).is_ok()) else {
            break;
        };
        gang.place(m, &nodes[at]);
        placed.push(at);
    }
    placed
}

fn snapshot<'a>(
    nodes: &'a [NodeInfo],
    bound: &'a [(usize, PodInfo)],
    namespaces: &'a NamespaceLabels,
) -> ClusterSnapshot<'a> {
    ClusterSnapshot::new(
        nodes.iter().collect(),
        bound.iter().map(|(i, p)| (&nodes[*i], p)).collect(),
        namespaces,
    )
}

fn worker(name: &str) -> PodInfo {
    labelled(pod(name), &[("job", "j1"), ("role", "worker")])
}

/// Three workers of job j1, each repelling the others over `key`: one per node or zone.
fn three_workers_one_per(key: &str) -> Vec<PodInfo> {
    (0..3)
        .map(|i| {
            PodRulesBuilder::default()
                .anti_affinity(term(&[("job", "j1")], key))
                .on(worker(&format!("w{i}")))
        })
        .collect()
}

/// Job j1 spread over zones with maxSkew 1, the other fields at their defaults.
fn job_spread_over_zones() -> SpreadConstraint {
    SpreadConstraint {
        max_skew: 1,
        topology_key: ZONE.into(),
        selector: selector(&[("job", "j1")]),
        match_label_keys: vec![],
        min_domains: 1,
        node_affinity_policy: InclusionPolicy::Honor,
        node_taints_policy: InclusionPolicy::Ignore,
    }
}

/// holds-nothing, under inter-pod anti-affinity: one worker per node by anti-affinity; three workers, two nodes.
#[test]
fn one_worker_per_node_on_two_nodes_places_two_of_three() {
    let nodes = vec![node("n0"), node("n1")];
    let ns = NamespaceLabels::default();
    let members = three_workers_one_per(HOSTNAME);
    let refs: Vec<&PodInfo> = members.iter().collect();
    let cluster = snapshot(&nodes, &[], &ns);
    let mut gang = GangPlacement::new(&refs, &cluster);
    assert_eq!(gang.spec_count(), 1, "identical members share one state");
    let placed = first_fit(&mut gang, &nodes, 3);
    assert_eq!(placed, [0, 1]);
    let d = gang.diagnose(2, &nodes);
    assert_eq!(d.refused_by(Reason::PodAntiAffinity), 2);
    assert_eq!(
        shortfall_message(refs[2], 3, placed.len(), &d),
        "3 members need distinct nodes by pod anti-affinity; 2 nodes match"
    );
    let three = vec![node("n0"), node("n1"), node("n2")];
    let cluster = snapshot(&three, &[], &ns);
    let mut gang = GangPlacement::new(&refs, &cluster);
    assert_eq!(
        first_fit(&mut gang, &three, 3),
        [0, 1, 2],
        "given a third node: whole"
    );
}

/// Index labels (Indexed Jobs, StatefulSets) do not split a gang into one state per member;
/// a label some bound pod's anti-affinity selects does.
#[test]
fn members_share_a_state_unless_a_selector_tells_them_apart() {
    let nodes = vec![node("n0"), node("n1")];
    let ns = NamespaceLabels::default();
    let indexed = |i: usize, role: &str| {
        PodRulesBuilder::default()
            .anti_affinity(term(&[("job", "j1")], HOSTNAME))
            .on(labelled(
                pod(&format!("w{i}")),
                &[("job", "j1"), ("role", role), ("index", &i.to_string())],
            ))
    };
    let members = [indexed(0, "worker"), indexed(1, "worker"), indexed(2, "ps")];
    let refs: Vec<&PodInfo> = members.iter().collect();
    let cluster = snapshot(&nodes, &[], &ns);
    assert_eq!(GangPlacement::new(&refs, &cluster).spec_count(), 1);

    let repels_ps = PodRulesBuilder::default()
        .anti_affinity(term(&[("role", "ps")], HOSTNAME))
        .on(labelled(pod("guard"), &[("app", "guard")]));
    let bound = [(0, repels_ps)];
    let cluster = snapshot(&nodes, &bound, &ns);
    let gang = GangPlacement::new(&refs, &cluster);
    assert_eq!(
        gang.spec_count(),
        2,
        "the role label is read by the guard's term"
    );
    assert_eq!(gang.check(0, &nodes[0]), Ok(()));
    assert_eq!(
        gang.check(2, &nodes[0]),
        Err(Reason::ExistingPodsAntiAffinity)
    );
    assert_eq!(gang.check(2, &nodes[1]), Ok(()));
}

/// A simulation that tries a placement and backs out leaves the states as they were.
#[test]
fn rollback_undoes_placements() {
    let nodes = vec![zoned("n0", "z1"), zoned("n1", "z2")];
    let ns = NamespaceLabels::default();
    let members = three_workers_one_per(ZONE);
    let refs: Vec<&PodInfo> = members.iter().collect();
    let cluster = snapshot(&nodes, &[], &ns);
    let mut gang = GangPlacement::new(&refs, &cluster);
    gang.place(0, &nodes[0]);
    let cp = gang.checkpoint();
    gang.place(1, &nodes[1]);
    assert_eq!(gang.check(2, &nodes[1]), Err(Reason::PodAntiAffinity));
    gang.rollback(cp);
    assert_eq!(gang.check(2, &nodes[1]), Ok(()), "w1 is gone from z2");
    assert_eq!(
        gang.check(2, &nodes[0]),
        Err(Reason::PodAntiAffinity),
        "w0 stays"
    );
    gang.rollback(0);
    assert_eq!(gang.check(2, &nodes[0]), Ok(()));
}

/// holds-nothing, under node affinity: required node affinity `pool In [a]` with two pool-a nodes.
#[test]
fn required_node_affinity_limits_the_gang_to_its_pool() {
    let mut nodes: Vec<NodeInfo> = (0..4).map(|i| node(&format!("n{i}"))).collect();
    for (i, n) in nodes.iter_mut().enumerate() {
        n.labels
            .insert("pool".into(), if i < 2 { "a" } else { "b" }.into());
    }
    let pool_a = NodeSelectorTerm::parse([("pool", "In", &["a".to_string()][..])], []);
    let m = PodRulesBuilder::default()
        .node_affinity(vec![pool_a])
        .on(worker("w"));
    let ns = NamespaceLabels::default();
    let cluster = snapshot(&nodes, &[], &ns);
    let placement = PodPlacement::new(&m, &cluster);
    let d = placement.diagnose(&nodes);
    assert_eq!(d.available(), 2);
    assert_eq!(d.refused_by(Reason::NodeAffinity), 2);
    assert_eq!(
        shortfall_message(&m, 3, 2, &d),
        "2 of 3 members placed; no node for the next: 2/4 nodes are available: \
         2 node(s) didn't match Pod's node affinity/selector."
    );
}

/// SchedulingGates: a gated member fits nowhere.
#[test]
fn a_gated_member_fits_nowhere() {
    let nodes = vec![node("n0")];
    let ns = NamespaceLabels::default();
    let gated = PodRulesBuilder::default()
        .gate("example.com/wait")
        .on(worker("w"));
    let cluster = snapshot(&nodes, &[], &ns);
    assert_eq!(
        PodPlacement::new(&gated, &cluster).check(&nodes[0]),
        Err(Reason::SchedulingGated)
    );
}

/// Members of different specs each see every member placed: a launcher with affinity to the
/// job's workers must follow them into their zone.
#[test]
fn different_specs_see_each_others_placements() {
    let nodes = vec![zoned("a0", "za"), zoned("b0", "zb"), zoned("b1", "zb")];
    let ns = NamespaceLabels::default();
    let launcher = PodRulesBuilder::default()
        .affinity(term(&[("role", "worker")], ZONE))
        .on(labelled(pod("l"), &[("job", "j1"), ("role", "launcher")]));
    let mut w = worker("w0");
    w.node_selector = vec![(ZONE.into(), "zb".into())];
    let members = [&w, &launcher];
    let cluster = snapshot(&nodes, &[], &ns);
    let mut gang = GangPlacement::new(&members, &cluster);
    assert_eq!(gang.spec_count(), 2);
    assert_eq!(
        gang.check(1, &nodes[0]),
        Err(Reason::PodAffinity),
        "no worker yet"
    );
    gang.place(0, &nodes[1]);
    assert_eq!(gang.check(1, &nodes[0]), Err(Reason::PodAffinity));
    assert_eq!(gang.check(1, &nodes[2]), Ok(()), "the workers' zone");
}

/// kube-scheduler's filter order: static rules first, then PodTopologySpread, then
/// InterPodAffinity.
#[test]
fn first_refusal_follows_kube_schedulers_filter_order() {
    let mut nodes = vec![node("n0")];
    nodes[0].unschedulable = true;
    let ns = NamespaceLabels::default();
    let bound = [(0, worker("w0"))];
    let m = PodRulesBuilder::default()
        .anti_affinity(term(&[("job", "j1")], HOSTNAME))
        .spread(job_spread_over_zones())
        .on(worker("w1"));
    let cluster = snapshot(&nodes, &bound, &ns);
    let p = PodPlacement::new(&m, &cluster);
    assert_eq!(p.check(&nodes[0]), Err(Reason::NodeUnschedulable));
    nodes[0].unschedulable = false;
    let cluster = snapshot(&nodes, &bound, &ns);
    let p = PodPlacement::new(&m, &cluster);
    assert_eq!(p.check(&nodes[0]), Err(Reason::SpreadMissingLabel));
}

/// A decision at scale: a gang of 64 (one per node by anti-affinity, spread
/// over zones with maxSkew 1) over 5,000 nodes and 20,000 bound pods, a tenth of them with
/// anti-affinity of their own. Run with `--ignored --nocapture` (release for real numbers).
#[test]
#[ignore]
fn timing_gang_of_64_over_5000_nodes_and_20000_pods() {
    let nodes: Vec<NodeInfo> = (0..5000)
        .map(|i| zoned(&format!("n{i}"), &format!("z{}", i % 50)))
        .collect();
    let bound: Vec<(usize, PodInfo)> = (0..20_000)
        .map(|i| {
            let p = labelled(
                pod(&format!("b{i}")),
                &[("app", if i % 3 == 0 { "db" } else { "web" })],
            );
            let p = if i % 10 == 0 {
                PodRulesBuilder::default()
                    .anti_affinity(term(&[("app", "db")], HOSTNAME))
                    .on(p)
            } else {
                p
            };
            (i % 5000, p)
        })
        .collect();
    let ns = NamespaceLabels::default();
    let members: Vec<PodInfo> = (0..64)
        .map(|i| {
            PodRulesBuilder::default()
                .anti_affinity(term(&[("job", "j1")], HOSTNAME))
                .spread(job_spread_over_zones())
                .on(labelled(
                    pod(&format!("w{i}")),
                    &[
                        ("job", "j1"),
                        ("batch.kubernetes.io/job-completion-index", &i.to_string()),
                    ],
                ))
        })
        .collect();
    let refs: Vec<&PodInfo> = members.iter().collect();

    // The machine may be shared: repeat, and report the fastest and the median run.
    let mut runs = Vec::new();
    let mut scans = Vec::new();
    for _ in 0..15 {
        let start = Instant::now();
        let cluster = snapshot(&nodes, &bound, &ns);
        let mut gang = GangPlacement::new(&refs, &cluster);
        let built = start.elapsed();
        let placed = first_fit(&mut gang, &nodes, refs.len());
        let total = start.elapsed();
        assert_eq!(placed.len(), 64);
        assert_eq!(gang.spec_count(), 1);
        runs.push((total, built));
        // A gang that cannot fit scans every node for the member that fails: time that too.
        let scan = Instant::now();
        assert_eq!(gang.diagnose(0, &nodes).nodes(), 5000);
        scans.push(scan.elapsed());
    }
    runs.sort();
    scans.sort();
    let (fastest, median) = (runs[0], runs[runs.len() / 2]);
    println!(
        "gang of 64 over 5000 nodes and 20000 bound pods: whole decision (snapshot, states, \
         64 placements) fastest {:?} (states {:?}), median {:?}; a full 5000-node scan fastest \
         {:?}, median {:?}",
        fastest.0,
        fastest.1,
        median.0,
        scans[0],
        scans[scans.len() / 2]
    );
}
