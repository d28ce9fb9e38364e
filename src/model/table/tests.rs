//! Table-driven tests of the gang model: no HTTP, no cluster, time passed in by hand.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::*;
use crate::model::membership::{membership_of, GANG_TIMEOUT, GROUP, MIN_AVAILABLE};
use crate::model::objects::{NodeInfo, PodInfo};
use crate::model::resources::Resources;

// ---------------------------------------------------------------- builders

struct PodBuilder(PodInfo, BTreeMap<String, String>);

fn pod(name: &str) -> PodBuilder {
    PodBuilder(
        PodInfo {
            uid: Arc::from(format!("uid-{name}")),
            namespace: Arc::from("ml"),
            name: Arc::from(name),
            requests: Resources {
                cpu_milli: 100,
                pods: 1,
                ..Default::default()
            },
            node_name: None,
            terminal: false,
            priority: 0,
            created: 0,
            membership: Ok(None),
            node_selector: vec![],
            tolerations: vec![],
            labels: Default::default(),
            terminating: false,
            rules: None,
        },
        BTreeMap::new(),
    )
}

impl PodBuilder {
    fn cpu(mut self, milli: i64) -> Self {
        self.0.requests.cpu_milli = milli;
        self
    }
    fn gpu(mut self, n: i64) -> Self {
        self.0.requests.set_extended("nvidia.com/gpu", n);
        self
    }
    fn gang(mut self, name: &str, min: u32) -> Self {
        self.1.insert(GROUP.into(), name.into());
        self.1.insert(MIN_AVAILABLE.into(), min.to_string());
        self
    }
    fn annotation(mut self, k: &str, v: &str) -> Self {
        self.1.insert(k.into(), v.into());
        self
    }
    fn bound(mut self, node: &str) -> Self {
        self.0.node_name = Some(Arc::from(node));
        self
    }
    fn created(mut self, t: i64) -> Self {
        self.0.created = t;
        self
    }
    fn priority(mut self, p: i32) -> Self {
        self.0.priority = p;
        self
    }
    fn build(mut self) -> PodInfo {
        self.0.membership = membership_of(&self.0.namespace, &BTreeMap::new(), &self.1);
        self.0
    }
}

fn node(name: &str, cpu_milli: i64) -> NodeInfo {
    NodeInfo {
        name: Arc::from(name),
        allocatable: Resources {
            cpu_milli,
            memory: 16 << 30,
            pods: 110,
            ..Default::default()
        },
        labels: BTreeMap::new(),
        unschedulable: false,
        taints: vec![],
    }
}

fn gpu_node(name: &str, gpus: i64) -> NodeInfo {
    let mut n = node(name, 64_000);
    n.allocatable.set_extended("nvidia.com/gpu", gpus);
    n
}

/// A table plus a clock.
struct World {
    table: GangTable,
    t0: Instant,
    now: Instant,
}

impl World {
    fn new(nodes: &[NodeInfo]) -> Self {
        let mut table = GangTable::new(ModelConfig::default());
        for n in nodes {
            table.apply_node(n.clone());
        }
        let t0 = Instant::now();
        World { table, t0, now: t0 }
    }

    fn add(&mut self, pods: &[&PodInfo]) {
        for p in pods {
            self.table.apply_pod((*p).clone());
        }
    }

    fn advance(&mut self, d: Duration) {
        self.now += d;
    }

    fn all_nodes(&self) -> Vec<String> {
        self.table
            .nodes
            .iter()
            .map(|e| e.info.name.to_string())
            .collect()
    }

    /// Nodes that pass the filter for `p` among all nodes, and the distinct failure reasons.
    fn filter(&mut self, p: &PodInfo) -> (Vec<String>, Vec<String>) {
        let names = self.all_nodes();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let verdicts = self.table.filter(p, &refs, self.now);
        let mut ok = vec![];
        let mut reasons = vec![];
        for (n, v) in names.iter().zip(verdicts) {
            match v {
                NodeVerdict::Fits => ok.push(n.clone()),
                NodeVerdict::NotOffered => {}
                NodeVerdict::Unschedulable(r) | NodeVerdict::Unresolvable(r) => {
                    if !reasons.contains(&r.to_string()) {
                        reasons.push(r.to_string())
                    }
                }
            }
        }
        (ok, reasons)
    }

    fn bind(&mut self, p: &PodInfo, node: &str) -> BindDecision {
        self.table.bind(
            BindRequest {
                namespace: &p.namespace,
                name: &p.name,
                uid: &p.uid,
                node,
            },
            self.now,
        )
    }

    /// Simulates the watch confirming muster's bindings.
    fn confirm(&mut self, decision: &BindDecision) {
        let pairs: Vec<(PodRef, NodeName)> = match decision {
            BindDecision::BindNow { pod, node } => vec![(pod.clone(), node.clone())],
            BindDecision::BindGang { members, .. } => members.clone(),
            _ => vec![],
        };
        for (r, n) in pairs {
            let mut info = self.table.pods[&r.uid].info.clone();
            info.node_name = Some(n);
            self.table.apply_pod(info);
        }
    }

    fn reserved(&self, node: &str) -> i64 {
        self.table.node(node).unwrap().reserved.cpu_milli
    }

    fn state(&self, gang: &str) -> &'static str {
        self.table
            .views(self.now)
            .into_iter()
            .find(|v| v.name == gang)
            .map(|v| v.state)
            .unwrap_or("absent")
    }
}

fn names(d: &BindDecision) -> Vec<String> {
    match d {
        BindDecision::BindGang { members, .. } => members
            .iter()
            .map(|(p, n)| format!("{}@{n}", p.name))
            .collect(),
        BindDecision::BindNow { pod, node } => vec![format!("{}@{node}", pod.name)],
        other => panic!("expected a binding, got {other:?}"),
    }
}

fn wait_message(d: &BindDecision) -> &str {
    match d {
        BindDecision::Wait { message, .. } => message,
        other => panic!("expected Wait, got {other:?}"),
    }
}

fn rejection(d: &BindDecision) -> String {
    match d {
        BindDecision::Reject(r) => r.to_string(),
        other => panic!("expected Reject, got {other:?}"),
    }
}

// ---------------------------------------------------------------- plain pods

#[test]
fn plain_pods_fit_by_room_and_say_what_is_short() {
    let mut w = World::new(&[node("small", 150), node("big", 1000)]);
    let p = pod("web").cpu(500).build();
    w.add(&[&p]);
    let (ok, reasons) = w.filter(&p);
    assert_eq!(ok, vec!["big"]);
    assert!(
        reasons.is_empty(),
        "no reasons while a node passes: {reasons:?}"
    );
    // Reasons are given when nothing passes (they become the FailedScheduling message).
    let huge = pod("huge").cpu(2000).build();
    w.add(&[&huge]);
    let (ok, reasons) = w.filter(&huge);
    assert!(ok.is_empty());
    assert_eq!(
        reasons,
        vec![
            "insufficient cpu: requested 2000m, free 150m",
            "insufficient cpu: requested 2000m, free 1000m"
        ]
    );
    let d = w.bind(&p, "big");
    assert_eq!(names(&d), vec!["web@big"]);
    // Assumed at once: a second pod cannot double-book the node before the watch confirms.
    let q = pod("api").cpu(600).build();
    w.add(&[&q]);
    assert!(rejection(&w.bind(&q, "big")).contains("insufficient cpu: requested 600m, free 500m"));
}

// ---------------------------------------------------------------- the seed example

#[test]
fn seed_gang_waits_whole_until_a_node_is_added_then_binds_together() {
    let mut w = World::new(&[node("node-1", 150)]);
    let master = pod("ai-gang-job-master-0").gang("ai-gang-job", 2).build();
    let worker = pod("ai-gang-job-worker-0").gang("ai-gang-job", 2).build();
    w.add(&[&master, &worker]);

    for p in [&master, &worker] {
        let (ok, reasons) = w.filter(p);
        assert!(ok.is_empty(), "no node offered while the gang cannot fit");
        assert_eq!(reasons, vec!["gang ml/ai-gang-job: 1 of 2 members fit"]);
    }
    // Binding anyway (a stale scheduler decision) is refused and seats nothing.
    assert_eq!(
        rejection(&w.bind(&master, "node-1")),
        "gang ml/ai-gang-job: 1 of 2 members fit"
    );
    assert_eq!(w.reserved("node-1"), 0);
    let notices = w.table.take_notices();
    assert_eq!(
        notices.len(),
        2,
        "one GangWaiting per member, only once: {notices:?}"
    );
    assert!(notices.iter().all(|n| n.kind == NoticeKind::Waiting));

    w.table.apply_node(node("node-2", 150));
    // The simulation puts the worker on node-1 first, so the master is offered node-2.
    let (ok, _) = w.filter(&master);
    assert_eq!(ok, vec!["node-2"]);
    let first = w.bind(&master, "node-2");
    assert_eq!(
        wait_message(&first),
        "gang ml/ai-gang-job waiting for quorum: 1/2 members have nodes"
    );
    // The worker's room on node-1 is held by a planned seat.
    assert_eq!((w.reserved("node-1"), w.reserved("node-2")), (100, 100));
    assert_eq!(w.state("ai-gang-job"), "admitted");

    let (ok, _) = w.filter(&worker);
    assert_eq!(ok, vec!["node-1"]);
    let second = w.bind(&worker, "node-1");
    assert_eq!(
        names(&second),
        vec!["ai-gang-job-master-0@node-2", "ai-gang-job-worker-0@node-1"]
    );
    assert_eq!((w.reserved("node-1"), w.reserved("node-2")), (0, 0));
    let placed: Vec<_> = w
        .table
        .take_notices()
        .into_iter()
        .filter(|n| n.kind == NoticeKind::Placed)
        .collect();
    assert_eq!(placed.len(), 1, "one GangPlaced per gang: {placed:?}");
    assert_eq!(&*placed[0].pod.name, "ai-gang-job-master-0");
    assert_eq!(
        placed[0].message,
        "gang ml/ai-gang-job placed: 2 members bound together (0 already had nodes): \
         ai-gang-job-master-0 on node-2, ai-gang-job-worker-0 on node-1"
    );
    w.confirm(&second);
    assert_eq!(w.state("ai-gang-job"), "placed");
    assert_eq!(w.table.stats().gangs_placed, 1);
}

#[test]
fn bind_is_idempotent_and_reports_in_flight_and_bound_pods() {
    let mut w = World::new(&[node("a", 1000), node("b", 1000)]);
    let m = pod("m").gang("g", 2).build();
    let x = pod("x").gang("g", 2).build();
    w.add(&[&m, &x]);
    wait_message(&w.bind(&m, "a"));
    let again = w.bind(&m, "a");
    assert_eq!(
        wait_message(&again),
        "gang ml/g waiting for quorum: 1/2 members have nodes"
    );
    assert_eq!(
        w.reserved("a"),
        100 + 100,
        "own seat + planned seat, not double-counted"
    );
    // A retry on another node moves the seat.
    wait_message(&w.bind(&m, "b"));
    assert_eq!(
        w.table.gangs[&GangKey::new("ml", "g")].seats[&m.uid]
            .node
            .as_ref(),
        "b"
    );

    let d = w.bind(&x, "a");
    assert_eq!(names(&d).len(), 2);
    assert_eq!(
        rejection(&w.bind(&x, "a")),
        "pod ml/x is already being bound to node a with its gang"
    );
    w.confirm(&d);
    assert_eq!(w.bind(&x, "a"), BindDecision::AlreadyBound);
    assert_eq!(
        rejection(&w.bind(&x, "b")),
        "pod ml/x is already bound to node a"
    );
}

#[test]
fn bad_bind_requests_are_refused_and_change_nothing() {
    let mut w = World::new(&[node("a", 1000)]);
    let m = pod("m").gang("g", 2).build();
    w.add(&[&m]);
    let cases: Vec<(BindRequest, &str)> = vec![
        (
            BindRequest {
                namespace: "ml",
                name: "ghost",
                uid: "nope",
                node: "a",
            },
            "unknown pod ml/ghost (uid nope): muster has not seen it; it may have been deleted",
        ),
        (
            BindRequest {
                namespace: "ml",
                name: "other",
                uid: "uid-m",
                node: "a",
            },
            "pod uid uid-m is ml/m, not ml/other",
        ),
        (
            BindRequest {
                namespace: "ml",
                name: "m",
                uid: "uid-m",
                node: "missing",
            },
            "unknown node \"missing\": muster has no such node in its cache",
        ),
    ];
    for (req, want) in cases {
        let d = w.table.bind(req, w.now);
        assert_eq!(rejection(&d), want);
        assert_eq!(w.reserved("a"), 0);
        assert_eq!(w.state("g"), "waiting");
    }
}

#[test]
fn conflicting_gang_keys_are_unresolvable_and_never_bound() {
    let mut w = World::new(&[node("a", 1000)]);
    let p = pod("p")
        .gang("one", 2)
        .annotation("scheduling.k8s.io/group-name", "two")
        .build();
    w.add(&[&p]);
    let names = w.all_nodes();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let v = w.table.filter(&p, &refs, w.now);
    assert!(matches!(&v[0], NodeVerdict::Unresolvable(r) if r.contains("conflicting gang keys")));
    assert!(rejection(&w.bind(&p, "a")).contains("conflicting gang keys"));
    let notices = w.table.take_notices();
    assert_eq!(notices[0].kind, NoticeKind::InvalidKeys);
}

// ---------------------------------------------------------------- whole-gang feasibility

#[test]
fn feasibility_is_node_by_node_not_an_aggregate_sum() {
    // 3 nodes x 1000m = 3000m in total; two 1500m members need 3000m, but no node holds one.
    let mut w = World::new(&[node("a", 1000), node("b", 1000), node("c", 1000)]);
    let p = pod("p").cpu(1500).gang("g", 2).build();
    let q = pod("q").cpu(1500).gang("g", 2).build();
    w.add(&[&p, &q]);
    let (ok, reasons) = w.filter(&p);
    assert!(ok.is_empty());
    assert_eq!(reasons, vec!["gang ml/g: 0 of 2 members fit"]);
}

#[test]
fn members_not_created_yet_take_room_when_they_arrive() {
    let mut w = World::new(&[node("a", 10_000)]);
    let p = pod("p").gang("g", 3).build();
    let q = pod("q").gang("g", 3).build();
    w.add(&[&p, &q]);
    // The members that exist are simulated and seated; the bind waits for the third.
    assert_eq!(w.filter(&p).0, vec!["a"]);
    assert_eq!(
        wait_message(&w.bind(&p, "a")),
        "gang ml/g waiting for quorum: 1/3 members have nodes; \
         2 of 3 members exist, the rest are not created yet"
    );
    assert_eq!(
        w.reserved("a"),
        300,
        "p's seat, q's planned seat and one held for the member not created yet"
    );
    assert_eq!(w.filter(&q).0, vec!["a"]);
    assert_eq!(
        wait_message(&w.bind(&q, "a")),
        "gang ml/g waiting for quorum: 2/3 members have nodes; \
         2 of 3 members exist, the rest are not created yet"
    );
    let r = pod("r").gang("g", 3).build();
    w.add(&[&r]);
    assert_eq!(w.filter(&r).0, vec!["a"]);
    assert_eq!(names(&w.bind(&r, "a")), vec!["p@a", "q@a", "r@a"]);
    assert_eq!(w.reserved("a"), 0, "seats became bindings or were let go");
}

#[test]
fn a_gang_still_being_created_holds_room_for_its_whole_quorum() {
    // Room for three members; two gangs of three, each with one member created so far.
    let mut w = World::new(&[node("n1", 300)]);
    let a0 = pod("a0").gang("alpha", 3).created(1).build();
    let b0 = pod("b0").gang("beta", 3).created(2).build();
    w.add(&[&a0, &b0]);
    assert_eq!(w.filter(&a0).0, vec!["n1"]);
    wait_message(&w.bind(&a0, "n1"));
    assert_eq!(w.reserved("n1"), 300, "alpha holds room for all three");
    let (ok, reasons) = w.filter(&b0);
    assert!(ok.is_empty());
    assert_eq!(
        reasons,
        vec![
            "gang ml/beta: waiting for members: 1 of 3 exist, and room for 0 \
             if the rest ask as much as the largest"
        ]
    );
    let a1 = pod("a1").gang("alpha", 3).created(3).build();
    let a2 = pod("a2").gang("alpha", 3).created(4).build();
    w.add(&[&a1, &a2]);
    for p in [&a1, &a2] {
        assert_eq!(w.filter(p).0, vec!["n1"]);
    }
    wait_message(&w.bind(&a1, "n1"));
    assert_eq!(w.reserved("n1"), 300, "a1 took a seat held for it");
    assert_eq!(names(&w.bind(&a2, "n1")), vec!["a0@n1", "a1@n1", "a2@n1"]);
}

#[test]
fn a_guess_too_large_for_members_not_created_yet_only_delays_admission() {
    let mut w = World::new(&[node("n1", 1000)]);
    let big = pod("big").cpu(600).gang("g", 2).build();
    w.add(&[&big]);
    // Room for one 600m pod, not for two.
    assert_eq!(
        w.filter(&big).1,
        vec![
            "gang ml/g: waiting for members: 1 of 2 exist, and room for 1 \
              if the rest ask as much as the largest"
        ]
    );
    let small = pod("small").cpu(300).gang("g", 2).build();
    w.add(&[&small]);
    assert_eq!(w.filter(&big).0, vec!["n1"]);
    wait_message(&w.bind(&big, "n1"));
    assert_eq!(names(&w.bind(&small, "n1")), vec!["big@n1", "small@n1"]);
}

#[test]
fn a_member_below_quorum_is_offered_one_node_and_a_seated_member_its_seat() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000), node("n3", 1000)]);
    let p = pod("p").cpu(600).gang("g", 2).build();
    let q = pod("q").cpu(600).gang("g", 2).build();
    let plain = pod("plain").cpu(100).build();
    w.add(&[&p, &q, &plain]);
    // Plain pods get every node with room: kube-scheduler scores them as usual.
    assert_eq!(w.filter(&plain).0, vec!["n1", "n2", "n3"]);
    // The simulation plans q on n1, so p may use n2 or n3; it is offered one of them.
    assert_eq!(w.filter(&p).0, vec!["n2"]);
    wait_message(&w.bind(&p, "n2"));
    // q is offered its planned seat, not n3, which has as much room.
    assert_eq!(w.filter(&q).0, vec!["n1"]);
    assert_eq!(names(&w.bind(&q, "n1")), vec!["p@n2", "q@n1"]);
}

#[test]
fn seats_of_a_gang_whose_members_never_come_are_released_at_its_timeout() {
    let mut w = World::new(&[node("a", 1000)]);
    let p = pod("p").gang("g", 2).build();
    w.add(&[&p]);
    wait_message(&w.bind(&p, "a"));
    assert_eq!(
        w.reserved("a"),
        200,
        "p's seat and one for the member not created yet"
    );
    let view = &w.table.views(w.now)[0];
    let members: Vec<(&str, &str)> = view
        .members
        .iter()
        .map(|m| (m.name.as_str(), m.state))
        .collect();
    assert_eq!(
        members,
        vec![("p", "seated"), ("(not created yet)", "held")]
    );
    w.advance(ModelConfig::default().default_timeout + Duration::from_secs(1));
    let now = w.now;
    assert_eq!(w.table.expire(now).len(), 1);
    assert_eq!(w.reserved("a"), 0);
    assert_eq!(w.state("g"), "backoff");
    let notices = w.table.take_notices();
    assert_eq!(
        notices.last().map(|n| n.message.as_str()),
        Some(
            "gang ml/g did not reach quorum within 1m: 1/2 members had nodes \
             (1 of 2 members exist); seats released, retrying in 10s"
        )
    );
}

#[test]
fn gpu_gang_fits_two_four_gpu_nodes_but_not_four_plus_two() {
    let members: Vec<PodInfo> = (0..8)
        .map(|i| pod(&format!("w{i}")).gpu(1).gang("train", 8).build())
        .collect();
    let refs: Vec<&PodInfo> = members.iter().collect();

    let mut fits = World::new(&[gpu_node("g1", 4), gpu_node("g2", 4)]);
    fits.add(&refs);
    let mut last = None;
    for (i, m) in members.iter().enumerate() {
        let (ok, _) = fits.filter(m);
        assert!(!ok.is_empty(), "member {i} has a node");
        last = Some(fits.bind(m, &ok[0]));
    }
    let bound = names(&last.unwrap());
    assert_eq!(bound.len(), 8);
    assert_eq!(bound.iter().filter(|b| b.ends_with("@g1")).count(), 4);

    let mut short = World::new(&[gpu_node("g1", 4), gpu_node("g2", 2)]);
    short.add(&refs);
    for m in &members {
        let (ok, reasons) = short.filter(m);
        assert!(ok.is_empty());
        assert_eq!(reasons, vec!["gang ml/train: 6 of 8 members fit"]);
        assert!(matches!(short.bind(m, "g1"), BindDecision::Reject(_)));
    }
    assert_eq!(
        short
            .table
            .node("g1")
            .unwrap()
            .reserved
            .extended("nvidia.com/gpu"),
        0
    );
}

#[test]
fn replicas_beyond_min_available_bind_at_once_after_quorum() {
    let mut w = World::new(&[node("a", 1000)]);
    let ps: Vec<PodInfo> = (0..4)
        .map(|i| pod(&format!("p{i}")).gang("g", 2).build())
        .collect();
    w.add(&ps.iter().collect::<Vec<_>>());
    wait_message(&w.bind(&ps[0], "a"));
    let d = w.bind(&ps[1], "a");
    assert_eq!(names(&d), vec!["p0@a", "p1@a"]);
    w.confirm(&d);
    let d = w.bind(&ps[2], "a");
    assert_eq!(
        names(&d),
        vec!["p2@a"],
        "a placed gang's later members bind at once"
    );
}

#[test]
fn a_member_outside_the_plan_can_take_a_planned_seat_on_its_node() {
    // Room for exactly two 500m pods; the plan seats p1 on b, but p2 arrives for b first.
    let mut w = World::new(&[node("a", 500), node("b", 500)]);
    let p0 = pod("p0").cpu(500).gang("g", 2).build();
    let p1 = pod("p1").cpu(500).gang("g", 2).build();
    let p2 = pod("p2").cpu(500).gang("g", 2).build();
    w.add(&[&p0, &p1, &p2]);
    wait_message(&w.bind(&p0, "a"));
    assert_eq!(w.filter(&p2).0, vec!["b"]);
    let d = w.bind(&p2, "b");
    assert_eq!(names(&d), vec!["p0@a", "p2@b"]);
}

// ---------------------------------------------------------------- competing gangs

#[test]
fn two_gangs_never_each_hold_half_of_what_both_need() {
    // Room for two 1000m pods. Gangs A and B each need two.
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let a: Vec<PodInfo> = (0..2)
        .map(|i| pod(&format!("a{i}")).cpu(1000).gang("a", 2).build())
        .collect();
    let b: Vec<PodInfo> = (0..2)
        .map(|i| pod(&format!("b{i}")).cpu(1000).gang("b", 2).build())
        .collect();
    w.add(&[&a[0], &a[1], &b[0], &b[1]]);
    // Interleaved, as kube-scheduler would: a0 binds, then b0 tries, then a1.
    wait_message(&w.bind(&a[0], "n1"));
    let (ok, reasons) = w.filter(&b[0]);
    assert!(ok.is_empty());
    assert_eq!(reasons, vec!["gang ml/b: 0 of 2 members fit"]);
    assert!(matches!(w.bind(&b[0], "n2"), BindDecision::Reject(_)));
    let d = w.bind(&a[1], "n2");
    assert_eq!(names(&d), vec!["a0@n1", "a1@n2"]);
    w.confirm(&d);
    assert_eq!(w.state("a"), "placed");
    assert_eq!(w.state("b"), "waiting");

    // Delete gang A: B fits.
    w.table.remove_pod(&a[0].uid);
    w.table.remove_pod(&a[1].uid);
    assert_eq!(w.filter(&b[0]).0.len(), 1);
}

#[test]
fn older_gang_goes_first_but_a_gang_that_cannot_fit_blocks_nobody() {
    let mut w = World::new(&[node("n1", 1000)]);
    let old: Vec<PodInfo> = (0..2)
        .map(|i| {
            pod(&format!("old{i}"))
                .cpu(500)
                .created(1)
                .gang("old", 2)
                .build()
        })
        .collect();
    let young: Vec<PodInfo> = (0..2)
        .map(|i| {
            pod(&format!("young{i}"))
                .cpu(500)
                .created(2)
                .gang("young", 2)
                .build()
        })
        .collect();
    let huge: Vec<PodInfo> = (0..2)
        .map(|i| {
            pod(&format!("huge{i}"))
                .cpu(5000)
                .created(0)
                .gang("huge", 2)
                .build()
        })
        .collect();
    w.add(&[&old[0], &old[1], &young[0], &young[1], &huge[0], &huge[1]]);
    // All three are being tried by the scheduler.
    w.filter(&huge[0]);
    w.filter(&old[0]);
    let (ok, reasons) = w.filter(&young[0]);
    assert!(ok.is_empty(), "the older gang that fits is served first");
    assert_eq!(reasons, vec!["gang ml/young: 0 of 2 members fit"]);
    assert_eq!(
        w.filter(&old[1]).0,
        vec!["n1"],
        "huge (oldest) cannot fit and does not block old"
    );

    // Once the older gang stops competing (no attempts within the window), young may go.
    w.advance(ModelConfig::default().active_window + Duration::from_secs(1));
    w.filter(&huge[0]);
    assert_eq!(w.filter(&young[0]).0, vec!["n1"]);
}

#[test]
fn higher_priority_gang_goes_before_an_older_one() {
    let mut w = World::new(&[node("n1", 1000)]);
    let low: Vec<PodInfo> = (0..2)
        .map(|i| {
            pod(&format!("low{i}"))
                .cpu(500)
                .created(1)
                .gang("low", 2)
                .build()
        })
        .collect();
    let high: Vec<PodInfo> = (0..2)
        .map(|i| {
            pod(&format!("high{i}"))
                .cpu(500)
                .created(5)
                .priority(100)
                .gang("high", 2)
                .build()
        })
        .collect();
    w.add(&[&low[0], &low[1], &high[0], &high[1]]);
    w.filter(&high[0]);
    assert!(w.filter(&low[0]).0.is_empty());
    assert_eq!(w.filter(&high[1]).0, vec!["n1"]);
}

#[test]
fn plain_pods_cannot_take_seats_reserved_for_a_gang() {
    let mut w = World::new(&[node("n1", 1000)]);
    let g: Vec<PodInfo> = (0..2)
        .map(|i| pod(&format!("g{i}")).cpu(400).gang("g", 2).build())
        .collect();
    w.add(&[&g[0], &g[1]]);
    wait_message(&w.bind(&g[0], "n1"));
    let plain = pod("plain").cpu(300).build();
    w.add(&[&plain]);
    let (ok, reasons) = w.filter(&plain);
    assert!(ok.is_empty());
    assert_eq!(
        reasons,
        vec!["insufficient cpu: requested 300m, free 200m (some of it is reserved for gangs)"]
    );
    assert!(matches!(
        w.bind(&plain, "n1"),
        BindDecision::Reject(BindRejection::NoRoom { .. })
    ));
    let small = pod("small").cpu(200).build();
    w.add(&[&small]);
    assert_eq!(w.filter(&small).0, vec!["n1"]);
}

// ---------------------------------------------------------------- lifetimes

#[test]
fn a_gang_that_misses_its_timeout_releases_every_seat_and_backs_off() {
    let mut w = World::new(&[node("n1", 1000)]);
    let p = pod("p")
        .gang("g", 2)
        .annotation(GANG_TIMEOUT, "20s")
        .build();
    let q = pod("q").gang("g", 2).build();
    w.add(&[&p, &q]);
    wait_message(&w.bind(&p, "n1"));
    assert_eq!(w.reserved("n1"), 200);
    w.advance(Duration::from_secs(19));
    assert!(
        w.table.expire(w.now).is_empty(),
        "not before the per-gang timeout"
    );
    w.advance(Duration::from_secs(1));
    assert_eq!(w.table.expire(w.now), vec![GangKey::new("ml", "g")]);
    assert_eq!(w.reserved("n1"), 0);
    assert_eq!(w.state("g"), "backoff");
    let timed_out: Vec<_> = w
        .table
        .take_notices()
        .into_iter()
        .filter(|n| n.kind == NoticeKind::TimedOut)
        .collect();
    assert_eq!(timed_out.len(), 2);
    assert!(timed_out[0]
        .message
        .starts_with("gang ml/g did not reach quorum within 20s: 1/2"));
    let (ok, reasons) = w.filter(&q);
    assert!(ok.is_empty());
    assert_eq!(
        reasons,
        vec!["gang ml/g: backing off for 10s after its quorum timeout"]
    );
    w.advance(ModelConfig::default().backoff);
    assert_eq!(w.filter(&q).0, vec!["n1"]);
    assert_eq!(w.table.stats().gang_timeouts, 1);
}

#[test]
fn deleting_a_member_or_a_node_frees_seats_at_once() {
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let ps: Vec<PodInfo> = (0..3)
        .map(|i| pod(&format!("p{i}")).gang("g", 3).build())
        .collect();
    w.add(&ps.iter().collect::<Vec<_>>());
    wait_message(&w.bind(&ps[0], "n2"));
    assert_eq!(w.reserved("n1") + w.reserved("n2"), 300);
    w.table.remove_pod(&ps[1].uid);
    assert_eq!(w.reserved("n1") + w.reserved("n2"), 200);
    w.table.remove_node("n2");
    assert_eq!(w.reserved("n1"), 100, "only the seat on n1 is left");
    assert_eq!(w.all_nodes(), vec!["n1"]);
}

#[test]
fn restart_rebuilds_from_bound_members() {
    // After a restart the table is new; one member was bound before the crash.
    let mut w = World::new(&[node("n1", 1000), node("n2", 1000)]);
    let p0 = pod("p0").gang("g", 3).bound("n1").build();
    let p1 = pod("p1").gang("g", 3).build();
    let p2 = pod("p2").gang("g", 3).build();
    w.add(&[&p0, &p1, &p2]);
    assert_eq!(w.table.node("n1").unwrap().used.cpu_milli, 100);
    // One node offered: the tightest fit, next to the bound member.
    assert_eq!(w.filter(&p1).0, vec!["n1"]);
    assert_eq!(
        wait_message(&w.bind(&p1, "n1")),
        "gang ml/g waiting for quorum: 2/3 members have nodes"
    );
    let d = w.bind(&p2, "n2");
    assert_eq!(names(&d), vec!["p1@n1", "p2@n2"]);
}

#[test]
fn pods_bound_to_a_node_seen_later_still_count() {
    let mut w = World::new(&[]);
    let p = pod("p").cpu(800).bound("late").build();
    w.add(&[&p]);
    w.table.apply_node(node("late", 1000));
    let q = pod("q").cpu(300).build();
    w.add(&[&q]);
    assert!(w.filter(&q).0.is_empty());
}

#[test]
fn terminal_pods_free_their_requests() {
    let mut w = World::new(&[node("n1", 1000)]);
    let mut p = pod("done").cpu(1000).bound("n1").build();
    w.add(&[&p]);
    let q = pod("q").cpu(500).build();
    w.add(&[&q]);
    assert!(w.filter(&q).0.is_empty());
    p.terminal = true;
    w.add(&[&p]);
    assert_eq!(w.filter(&q).0, vec!["n1"]);
}

#[test]
fn members_that_disagree_on_min_available_use_the_largest_and_say_so() {
    let mut w = World::new(&[node("n1", 1000)]);
    let p = pod("p").gang("g", 2).build();
    let q = pod("q").gang("g", 3).build();
    w.add(&[&p, &q]);
    let notices = w.table.take_notices();
    assert_eq!(notices.len(), 2);
    assert_eq!(notices[0].kind, NoticeKind::QuorumConflict);
    assert_eq!(
        notices[0].message,
        "members of gang ml/g disagree on minAvailable (2, 3); using the largest, 3"
    );
    w.table.take_notices();
    assert_eq!(w.filter(&p).0, vec!["n1"]);
    assert_eq!(
        wait_message(&w.bind(&p, "n1")),
        "gang ml/g waiting for quorum: 1/3 members have nodes; \
         2 of 3 members exist, the rest are not created yet"
    );
    // Reported once, not on every update.
    w.add(&[&p]);
    assert!(w.table.take_notices().is_empty());
}

#[test]
fn prioritize_prefers_the_seat_then_the_gang_then_tight_packing() {
    let mut w = World::new(&[node("empty", 4000), node("busy", 4000), node("seat", 4000)]);
    let filler = pod("filler").cpu(3000).bound("busy").build();
    let ps: Vec<PodInfo> = (0..3)
        .map(|i| pod(&format!("p{i}")).gang("g", 3).build())
        .collect();
    w.add(&[&filler, &ps[0], &ps[1], &ps[2]]);
    wait_message(&w.bind(&ps[0], "seat"));
    let plan_node = w.table.gangs[&GangKey::new("ml", "g")].seats[&ps[1].uid]
        .node
        .to_string();
    let scores = w.table.prioritize(&ps[1], &["empty", "busy", "seat"]);
    let score_of = |n: &str| {
        scores[["empty", "busy", "seat"]
            .iter()
            .position(|x| *x == n)
            .unwrap()]
    };
    assert_eq!(score_of(&plan_node), 10, "its planned seat: {scores:?}");
    let plain = pod("plain").build();
    let s = w.table.prioritize(&plain, &["empty", "busy"]);
    assert!(s[1] > s[0], "plain pods pack onto the busier node: {s:?}");
    assert_eq!(w.table.prioritize(&plain, &["nope"]), vec![0]);
    let _ = w.t0;
}
