//! Handler cost without HTTP: filter, prioritize and the bind decision over synthetic
//! clusters, and the JSON decode of a realistic request as the floor to compare against.
//! Run: `cargo bench --bench handlers` (add `-- filter` etc. to select).
//!
//! Under `cargo test` (no `--bench` argument: criterion's test mode, each benchmark run once,
//! as `tests/run`'s benchmark smoke does) the single-call p99 loops make [`SMOKE_P99_CALLS`]
//! calls instead of [`P99_CALLS`] and `scale` runs at 5,000 nodes only (the 20,000-node tables
//! run the same code): every benchmark and every assertion still runs, in a fraction of the
//! time (the p99 loops of 5,000 debug-build calls each were most of the smoke's minutes).

use std::time::Instant;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use muster::model::{BindDecision, BindRequest};
use muster::wire::ExtenderArgs;

mod support;

fn sizes() -> Vec<(usize, usize, u32)> {
    // (nodes, bound pods, gang size)
    let mut v = vec![];
    for nodes in [100, 1_000, 5_000] {
        for pods in [10_000, 50_000] {
            for gang in [8, 64] {
                v.push((nodes, pods, gang));
            }
        }
    }
    v
}

fn filter(c: &mut Criterion) {
    let mut group = c.benchmark_group("filter");
    for (nodes, pods, gang) in sizes() {
        let (mut table, names) = support::cluster(nodes, pods, gang);
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let member = support::pod("gang0-0", 1000, Some(("gang0", gang)), None);
        let plain = support::pod("plain", 1000, None, None);
        // Only the watch adds pods: a pod the table has not seen is refused at once.
        table.apply_pod(plain.clone());
        let id = format!("{nodes}n/{pods}p/gang{gang}");
        group.bench_function(BenchmarkId::new("gang_member", &id), |b| {
            b.iter(|| table.filter(&member, &refs, Instant::now()))
        });
        if gang == 8 {
            group.bench_function(BenchmarkId::new("plain_pod", &id), |b| {
                b.iter(|| table.filter(&plain, &refs, Instant::now()))
            });
        }
    }
    group.finish();
}

fn prioritize(c: &mut Criterion) {
    let mut group = c.benchmark_group("prioritize");
    for (nodes, pods, gang) in sizes().into_iter().filter(|s| s.2 == 8) {
        let (table, names) = support::cluster(nodes, pods, gang);
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let member = support::pod("gang0-0", 1000, Some(("gang0", gang)), None);
        group.bench_function(
            BenchmarkId::from_parameter(format!("{nodes}n/{pods}p")),
            |b| b.iter(|| table.prioritize(&member, &refs)),
        );
    }
    group.finish();
}

/// One member's bind: admission (the simulation that seats the whole gang), measured on a
/// fresh clone of the state each time by re-running on a table where it was not yet seated.
fn bind_decision(c: &mut Criterion) {
    let mut group = c.benchmark_group("bind_decision");
    for (nodes, pods, gang) in sizes().into_iter().filter(|s| s.1 == 50_000) {
        let id = format!("{nodes}n/{pods}p/gang{gang}");
        group.bench_function(BenchmarkId::from_parameter(&id), |b| {
            b.iter_batched(
                || support::cluster(nodes, 0, gang).0,
                |mut table| {
                    let d = table.bind(
                        BindRequest {
                            namespace: "bench",
                            name: "gang0-0",
                            uid: "uid-gang0-0",
                            node: "node-0",
                        },
                        Instant::now(),
                    );
                    assert!(matches!(d, BindDecision::Wait { .. }), "{d:?}");
                    table
                },
                criterion::BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

fn decode(c: &mut Criterion) {
    let mut group = c.benchmark_group("decode");
    let pod = support::pod_json("gang0-0", "gang0", 8);
    for nodes in [100usize, 1_000, 5_000] {
        let names: Vec<String> = (0..nodes).map(|i| format!("node-{i}")).collect();
        let body = support::extender_args(&pod, &names);
        group.bench_function(BenchmarkId::new("extender_args", nodes), |b| {
            b.iter(|| serde_json::from_str::<ExtenderArgs>(&body).unwrap())
        });
    }
    let body = support::extender_args(&pod, &[]);
    let args: ExtenderArgs = serde_json::from_str(&body).unwrap();
    group.bench_function("pod_to_model", |b| {
        b.iter(|| muster::cluster::convert::pod_info(&args.pod).unwrap())
    });
    group.finish();
}

/// The preempt decision at 5,000 full 8-CPU nodes (40,000 bound pods) for a gang of 8 and
/// 100 candidate nodes of kube-scheduler's dry run, one victim each. `kept`: every node runs
/// low-priority pods only, so the gang follows on the first nodes. `refused`: every node also
/// runs one pod as important as the gang, and the other members ask for a whole node, so each
/// candidate's simulation walks all 5,000 nodes before refusing (the worst case). `plain`: a
/// plain preemptor (what the preempt-only extender entry asks about), every pod on the nodes a
/// member of a running gang of 8 except on every other candidate node, so rule 4 looks up the
/// gang of every victim and drops half the candidates; printed with the p99 of single calls
/// (`preempt p99`), which the preempt-only entry's `httpTimeout` is set from.
fn preempt(c: &mut Criterion) {
    use muster::model::{GangTable, ModelConfig, PreemptCandidate};
    use muster::testkit;
    let mut group = c.benchmark_group("preempt");
    for case in ["kept", "refused", "plain"] {
        let nodes = 5_000;
        let mut t = GangTable::new(ModelConfig::default());
        for i in 0..nodes {
            t.apply_node(
                testkit::node(&format!("node-{i}"))
                    .cpu(8_000)
                    .memory(64 << 30)
                    .build(),
            );
            for j in 0..8 {
                let important = case == "refused" && j == 0;
                let mut pod = testkit::pod(&format!("bound-{i}-{j}"))
                    .cpu(1000)
                    .priority(if important { 100_000 } else { 100 })
                    .bound(&format!("node-{i}"));
                // Every other candidate node (every 100th node) runs plain pods only.
                if case == "plain" && i % 100 != 0 {
                    pod = pod.gang(&format!("run-{i}"), 8);
                }
                t.apply_pod(pod.build());
            }
        }
        if case == "plain" {
            let preemptor = testkit::pod("plain").cpu(1000).priority(100_000).build();
            t.apply_pod(preemptor.clone());
            let candidates: Vec<PreemptCandidate> = (0..100)
                .map(|i| PreemptCandidate {
                    node: format!("node-{}", i * 50),
                    victims: vec![format!("uid-bound-{}-7", i * 50)],
                    pdb_violations: 0,
                })
                .collect();
            let d = t.preempt(&preemptor, candidates.clone(), Instant::now());
            assert_eq!(
                (d.outcome.as_str(), d.kept.len()),
                ("trimmed", 50),
                "the bench measures what it names"
            );
            group.bench_function(BenchmarkId::new(case, "5000n/40000p/gang8/100cand"), |b| {
                b.iter(|| {
                    let d = t.preempt(&preemptor, candidates.clone(), Instant::now());
                    t.take_notices();
                    d
                })
            });
            let slowest = p99(|| {
                t.preempt(&preemptor, candidates.clone(), Instant::now());
                t.take_notices();
            });
            eprintln!("preempt p99 plain_preemptor/5000n/40000p/100cand: {slowest:?}");
            continue;
        }
        let other_cpu = if case == "refused" { 8000 } else { 1000 };
        for m in 1..8 {
            t.apply_pod(
                testkit::pod(&format!("gang-{m}"))
                    .cpu(other_cpu)
                    .priority(100_000)
                    .gang("gang", 8)
                    .build(),
            );
        }
        let preemptor = testkit::pod("gang-0")
            .cpu(1000)
            .priority(100_000)
            .gang("gang", 8)
            .build();
        t.apply_pod(preemptor.clone());
        let candidates: Vec<PreemptCandidate> = (0..100)
            .map(|i| PreemptCandidate {
                node: format!("node-{}", i * 50),
                victims: vec![format!("uid-bound-{}-7", i * 50)],
                pdb_violations: 0,
            })
            .collect();
        let decision = t.preempt(&preemptor, candidates.clone(), std::time::Instant::now());
        assert_eq!(
            decision.outcome.as_str(),
            case,
            "the bench measures what it names"
        );
        group.bench_function(BenchmarkId::new(case, "5000n/40000p/gang8/100cand"), |b| {
            b.iter(|| {
                let d = t.preempt(&preemptor, candidates.clone(), std::time::Instant::now());
                t.take_notices();
                d
            })
        });
    }
    group.finish();
}

/// The costs that could grow with the cluster, at 5,000 and 20,000 nodes with
/// 20,000 bound pods. kube-scheduler's own per-pod cost is bounded by the nodes it samples
/// (percentageOfNodesToScore: a few hundred names reach the extender), so muster's must not
/// grow with the node count either:
/// - `filter`: a call with 500 node names, for a member of a gang of 64 below quorum (the
///   whole-gang simulation) and for a plain pod;
/// - `admit_gang64`: the bind that seats a whole gang of 64 (its simulation) on the node muster's
///   filter offered, each iteration a gang not seated yet; `admit_gang64_on_a_filled_node`: the
///   same on a node the plan's other members fill first;
/// - `watch_pod`: one pod event from the watch (a bound pod's update), with 20,000 pods.
fn scale(c: &mut Criterion) {
    use std::time::Duration;
    const GANGS: usize = 50;
    let mut group = c.benchmark_group("scale");
    let sizes: &[usize] = if smoke() { &[5_000] } else { &[5_000, 20_000] };
    for &nodes in sizes {
        let (mut table, names) = support::cluster_with_gangs(nodes, 20_000, 64, GANGS);
        let step = nodes / 500;
        let sample: Vec<&str> = names.iter().step_by(step).map(String::as_str).collect();
        assert_eq!(sample.len(), 500);
        let member = support::pod("gang0-0", 1000, Some(("gang0", 64)), None);
        let plain = support::pod("plain", 1000, None, None);
        table.apply_pod(plain.clone());
        let id = format!("{nodes}n/20000p/500names");
        group.bench_function(BenchmarkId::new("filter_gang64_member", &id), |b| {
            b.iter(|| table.filter(&member, &sample, Instant::now()))
        });
        group.bench_function(BenchmarkId::new("filter_plain_pod", &id), |b| {
            b.iter(|| table.filter(&plain, &sample, Instant::now()))
        });
        let bound = support::pod("bound-7", 500, None, Some(format!("node-{}", 7 % nodes)));
        group.bench_function(
            BenchmarkId::new("watch_pod", format!("{nodes}n/20000p")),
            |b| b.iter(|| table.apply_pod(bound.clone())),
        );
        drop(table);
        group.bench_function(
            BenchmarkId::new("admit_gang64", format!("{nodes}n/20000p")),
            |b| {
                b.iter_custom(|iters| {
                    let mut spent = Duration::ZERO;
                    let mut left = iters as usize;
                    while left > 0 {
                        // A fresh table per GANGS iterations, built outside the timing.
                        let (mut t, names) = support::cluster_with_gangs(nodes, 20_000, 64, GANGS);
                        // kube-scheduler's candidates: the nodes its own filters passed.
                        let candidates: Vec<&str> =
                            names.iter().take(500).map(String::as_str).collect();
                        let n = left.min(GANGS);
                        for g in 0..n {
                            // The node muster's filter offers (untimed), as kube-scheduler
                            // then binds there: the tightest fit, which the plan's other
                            // members fill first, so the member asking is placed first.
                            let first = support::pod(
                                &format!("gang{g}-0"),
                                1000,
                                Some((&format!("gang{g}"), 64)),
                                None,
                            );
                            let verdicts = t.filter(&first, &candidates, Instant::now());
                            let offered = verdicts
                                .iter()
                                .position(|v| matches!(v, muster::model::NodeVerdict::Fits))
                                .map(|i| candidates[i])
                                .expect("the filter offers a node");
                            let started = Instant::now();
                            let d = t.bind(
                                BindRequest {
                                    namespace: "bench",
                                    name: &format!("gang{g}-0"),
                                    uid: &format!("uid-gang{g}-0"),
                                    node: offered,
                                },
                                Instant::now(),
                            );
                            spent += started.elapsed();
                            assert!(matches!(d, BindDecision::Wait { .. }), "{d:?}");
                        }
                        left -= n;
                    }
                    spent
                })
            },
        );
        // kube-scheduler binds the member asking on a node the plan's other members fill
        // first (here node-g, in the first-fit area, for gangs below ELSEWHERE, all of which
        // fit): the plan places the others, finds no room left for the member asking, and
        // tries it first instead. Before that second try it used to diagnose the first one
        // over every node.
        const ELSEWHERE: usize = 25;
        group.bench_function(
            BenchmarkId::new("admit_gang64_on_a_filled_node", format!("{nodes}n/20000p")),
            |b| {
                b.iter_custom(|iters| {
                    let mut spent = Duration::ZERO;
                    let mut left = iters as usize;
                    while left > 0 {
                        let (mut t, _) = support::cluster_with_gangs(nodes, 20_000, 64, ELSEWHERE);
                        let n = left.min(ELSEWHERE);
                        let started = Instant::now();
                        for g in 0..n {
                            let d = t.bind(
                                BindRequest {
                                    namespace: "bench",
                                    name: &format!("gang{g}-0"),
                                    uid: &format!("uid-gang{g}-0"),
                                    node: &format!("node-{g}"),
                                },
                                Instant::now(),
                            );
                            assert!(matches!(d, BindDecision::Wait { .. }), "{d:?}");
                        }
                        spent += started.elapsed();
                        left -= n;
                    }
                    spent
                })
            },
        );
    }
    group.finish();
}

/// Calls in each p99 measurement of [`huge_quorum`], [`topology`] and [`dra`].
const P99_CALLS: usize = 5_000;
/// The same in the smoke (criterion's test mode): the loop runs, its number is not a measure.
const SMOKE_P99_CALLS: usize = 20;

/// Criterion's test mode (`cargo test`), not a measurement (`cargo bench` passes `--bench`).
fn smoke() -> bool {
    !std::env::args().any(|a| a == "--bench")
}

fn p99_calls() -> usize {
    if smoke() {
        SMOKE_P99_CALLS
    } else {
        P99_CALLS
    }
}

/// The 99th percentile of [`p99_calls`] single calls of `f`.
fn p99(mut f: impl FnMut()) -> std::time::Duration {
    let calls = p99_calls();
    let mut took: Vec<std::time::Duration> = (0..calls)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    took.sort();
    took[calls * 99 / 100]
}

/// A gang whose quorum (100,000) is more than the cluster could ever hold (500 nodes of 110 pod
/// slots), beside the plain pods: its members' filter calls are refused at once, before any
/// simulation, and a plain pod's filter costs what it costs without that gang. Criterion's
/// estimates, and the p99 of single calls printed (`huge_quorum p99`), as the bound is on the
/// slowest calls.
fn huge_quorum(c: &mut Criterion) {
    let mut group = c.benchmark_group("huge_quorum");
    let (mut table, names) = support::cluster(500, 20_000, 8);
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let plain = support::pod("plain", 1000, None, None);
    table.apply_pod(plain.clone());
    let before = p99(|| {
        std::hint::black_box(table.filter(&plain, &refs, Instant::now()));
    });
    let huge = support::pod("huge-0", 1000, Some(("huge", 100_000)), None);
    for m in 0..10 {
        table.apply_pod(support::pod(
            &format!("huge-{m}"),
            1000,
            Some(("huge", 100_000)),
            None,
        ));
    }
    let verdicts = table.filter(&huge, &refs, Instant::now());
    assert!(
        verdicts
            .iter()
            .all(|v| matches!(v, muster::model::NodeVerdict::Unresolvable(_))),
        "the huge gang is refused"
    );
    let member = p99(|| {
        std::hint::black_box(table.filter(&huge, &refs, Instant::now()));
    });
    let after = p99(|| {
        std::hint::black_box(table.filter(&plain, &refs, Instant::now()));
    });
    eprintln!(
        "huge_quorum p99 over {} calls, 500 nodes/20000 pods: gang member of quorum \
         100000 {member:?}; plain pod {before:?} without that gang, {after:?} beside it",
        p99_calls()
    );
    group.bench_function("filter_member_of_100000/500n/20000p", |b| {
        b.iter(|| table.filter(&huge, &refs, Instant::now()))
    });
    group.bench_function("filter_plain_pod_beside_it/500n/20000p", |b| {
        b.iter(|| table.filter(&plain, &refs, Instant::now()))
    });
    group.finish();
}

/// Topology domains: a gang of 64 (1 GPU each) that must be inside one rack, over 5,000
/// nodes of 8 GPUs in 200 racks of 25 nodes (50 racks in each of 4 blocks,
/// `example.com/rack`, `example.com/block`). In racks 0-149 every node runs a 6-GPU pod, so
/// they hold 50 members each; `fits`: racks 150-199 are free (best fit picks one of them);
/// `no_rack_fits`: every rack is like the first 150, so the planner simulates every rack
/// and refuses with the numbers. The filter call with all 5,000 names; p99 of single calls
/// printed (`topology p99`).
fn topology(c: &mut Criterion) {
    use muster::model::{GangTable, ModelConfig, NodeVerdict};
    use muster::testkit;
    let mut group = c.benchmark_group("topology");
    for (case, busy_racks) in [("fits", 150usize), ("no_rack_fits", 200)] {
        let mut t = GangTable::new(ModelConfig::default());
        let mut names = Vec::new();
        for i in 0..5_000usize {
            let (rack, block) = (i / 25, i / 25 / 50);
            let name = format!("node-{i}");
            t.apply_node(
                testkit::node(&name)
                    .cpu(64_000)
                    .memory(256 << 30)
                    .gpus(8)
                    .label("example.com/rack", &format!("rack-{rack}"))
                    .label("example.com/block", &format!("block-{block}"))
                    .build(),
            );
            if rack < busy_racks {
                t.apply_pod(
                    testkit::pod(&format!("busy-{i}"))
                        .namespace("bench")
                        .gpu(6)
                        .bound(&name)
                        .build(),
                );
            }
            names.push(name);
        }
        let members: Vec<_> = (0..64)
            .map(|m| {
                testkit::pod(&format!("g-{m}"))
                    .namespace("bench")
                    .cpu(1000)
                    .gpu(1)
                    .gang("g", 64)
                    .annotation("muster.dev/topology-required", "example.com/rack")
                    .build()
            })
            .collect();
        for m in &members {
            t.apply_pod(m.clone());
        }
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let verdicts = t.filter(&members[0], &refs, Instant::now());
        let offered = verdicts.iter().any(|v| matches!(v, NodeVerdict::Fits));
        assert_eq!(
            offered,
            case == "fits",
            "{case}: {:?}",
            verdicts
                .iter()
                .find(|v| !matches!(v, NodeVerdict::NotOffered))
        );
        let took = p99(|| {
            std::hint::black_box(t.filter(&members[0], &refs, Instant::now()));
        });
        eprintln!("topology p99 over {} calls, gang64 required rack, 5000n/200 racks/4 blocks, {case}: {took:?}", p99_calls());
        group.bench_function(
            BenchmarkId::new(
                "filter_gang64_required_rack",
                format!("5000n/200racks/{case}"),
            ),
            |b| b.iter(|| t.filter(&members[0], &refs, Instant::now())),
        );
    }
    group.finish();
}

/// Dynamic Resource Allocation: 5,000 nodes with a slice of 8 devices each, a class with a CEL
/// selector, and waiting gangs of 64 whose members each claim 8 devices from a template (a whole
/// node's). The filter call of a member (500 node names) simulates the whole gang, allocating
/// every member's claim node by node. Criterion's estimate, and the p99 of single calls printed
/// (`dra p99`).
fn dra(c: &mut Criterion) {
    use muster::model::devices::{
        AllocationMode, AttrValue, ClaimSource, ClaimSpec, Device, DeviceClass, NodeScope,
        PodClaim, Request, Slice,
    };
    use muster::model::objects::PodRules;
    const NODES: usize = 5_000;
    const DRIVER: &str = "gpu.example.com";
    let mut group = c.benchmark_group("dra");
    let (mut table, names) = support::cluster_with_gangs(NODES, 20_000, 0, 0);
    let class = DeviceClass {
        selectors: vec![table.compile_selector(&format!("device.driver == '{DRIVER}'"))],
    };
    table.apply_device_class(DRIVER.into(), class);
    for (i, name) in names.iter().enumerate() {
        let devices = (0..8)
            .map(|d| Device {
                name: format!("gpu-{d}").into(),
                attributes: [("model".to_string(), AttrValue::String("a100".into()))].into(),
                capacity: Default::default(),
                scope: None,
                unsupported: None,
            })
            .collect();
        table.apply_resource_slice(
            format!("{name}-gpus").into(),
            Slice {
                driver: DRIVER.into(),
                pool: format!("pool-{i}").into(),
                generation: 1,
                slice_count: 1,
                scope: Some(NodeScope::Node(name.as_str().into())),
                devices,
            },
        );
    }
    let model = table.compile_selector(&format!("device.attributes['{DRIVER}'].model == 'a100'"));
    table.apply_claim_template(
        ("bench".into(), "eight-gpus".into()),
        ClaimSpec {
            requests: vec![Request {
                name: "gpus".into(),
                class: DRIVER.into(),
                mode: AllocationMode::Exact(8),
                selectors: vec![model],
            }],
            unsupported: None,
        },
    );
    let with_claim = |mut p: muster::model::PodInfo| {
        let rules = PodRules {
            claims: vec![PodClaim {
                name: "gpus".into(),
                source: ClaimSource::Template {
                    template: "eight-gpus".into(),
                    generated: None,
                },
            }],
            ..PodRules::default()
        };
        p.rules = Some(Box::new(rules));
        p
    };
    for g in 0..10 {
        for m in 0..64 {
            let name = format!("gang{g}-{m}");
            let gang = format!("gang{g}");
            table.apply_pod(with_claim(support::pod(
                &name,
                1000,
                Some((&gang, 64)),
                None,
            )));
        }
    }
    let sample: Vec<&str> = names
        .iter()
        .step_by(NODES / 500)
        .map(String::as_str)
        .collect();
    let member = with_claim(support::pod("gang0-0", 1000, Some(("gang0", 64)), None));
    let verdicts = table.filter(&member, &sample, Instant::now());
    assert!(
        verdicts
            .iter()
            .any(|v| matches!(v, muster::model::NodeVerdict::Fits)),
        "the gang fits"
    );
    let took = p99(|| {
        std::hint::black_box(table.filter(&member, &sample, Instant::now()));
    });
    eprintln!(
        "dra p99 over {} calls, {NODES} nodes x 8 devices/20000 pods, gang of 64 x 8 \
         devices: {took:?}",
        p99_calls()
    );
    group.bench_function("filter_gang64_member/5000n_x_8dev/500names", |b| {
        b.iter(|| table.filter(&member, &sample, Instant::now()))
    });

    // Ten gangs ahead: a member of each of the ten asks once (so each competes), and a gang
    // created later (`late`) is decided behind all ten, whose members' claims take 8 devices
    // of a node each first (640 nodes' worth, first fit from the first node).
    // kube-scheduler tries each again well within the active window (30 s): every 500 calls
    // measured, untimed.
    let firsts: Vec<muster::model::PodInfo> = (0..10)
        .map(|g| {
            let gang = format!("gang{g}");
            with_claim(support::pod(
                &format!("{gang}-0"),
                1000,
                Some((&gang, 64)),
                None,
            ))
        })
        .collect();
    let ask_again = |table: &mut muster::model::GangTable| {
        for first in &firsts {
            table.filter(first, &sample, Instant::now());
        }
    };
    ask_again(&mut table);
    let late: Vec<muster::model::PodInfo> = (0..64)
        .map(|m| {
            let mut p = with_claim(support::pod(
                &format!("late-{m}"),
                1000,
                Some(("late", 64)),
                None,
            ));
            p.created = 1;
            p
        })
        .collect();
    for p in &late {
        table.apply_pod(p.clone());
    }
    let verdicts = table.filter(&late[0], &sample, Instant::now());
    let offered = verdicts
        .iter()
        .position(|v| matches!(v, muster::model::NodeVerdict::Fits))
        .expect("the late gang fits behind the ten");
    assert!(
        offered * (NODES / 500) >= 10 * 64,
        "the ten gangs ahead keep their devices: node-{} offered",
        offered * (NODES / 500)
    );
    let mut took: Vec<std::time::Duration> = (0..p99_calls())
        .map(|n| {
            if n % 500 == 0 {
                ask_again(&mut table);
            }
            let t = Instant::now();
            std::hint::black_box(table.filter(&late[0], &sample, Instant::now()));
            t.elapsed()
        })
        .collect();
    took.sort();
    eprintln!(
        "dra p99 over {} calls, {NODES} nodes x 8 devices/20000 pods, gang of 64 x 8 \
         devices behind 10 such gangs: {:?}",
        p99_calls(),
        took[took.len() * 99 / 100]
    );
    group.bench_function(
        "filter_gang64_member_behind_10_gangs/5000n_x_8dev/500names",
        |b| {
            b.iter_custom(|iters| {
                let mut spent = std::time::Duration::ZERO;
                for n in 0..iters {
                    if n % 500 == 0 {
                        ask_again(&mut table);
                    }
                    let t = Instant::now();
                    std::hint::black_box(table.filter(&late[0], &sample, Instant::now()));
                    spent += t.elapsed();
                }
                spent
            })
        },
    );
    group.finish();
}

/// One gather round (gang-members mode) at the end state of the 5,000-node benchmark: 436 gangs
/// of 34 bound (14,824 members) and 5,000 plain pods bound, with 8 gangs of 16 gated and
/// waiting for members not created yet (what rounds under a steady stream of creations find). A
/// round walks every gang under the table lock, so this is what filter and bind calls may wait
/// for, and most of muster's CPU at that size.
fn gather_round(c: &mut Criterion) {
    use muster::model::gather::Gatherer;
    use muster::testkit;
    let mut group = c.benchmark_group("gather_round");
    let nodes = 5_000;
    let mut table = support::cluster_with_gangs(nodes, 0, 1, 0).0;
    let mut n = 0usize;
    for g in 0..436 {
        for m in 0..34 {
            table.apply_pod(support::pod(
                &format!("bound{g}-{m}"),
                300,
                Some((&format!("bound{g}"), 34)),
                Some(format!("node-{}", n % nodes)),
            ));
            n += 1;
        }
    }
    for i in 0..5_000 {
        table.apply_pod(support::pod(
            &format!("plain-{i}"),
            300,
            None,
            Some(format!("node-{}", (n + i) % nodes)),
        ));
    }
    for g in 0..8 {
        for m in 0..8 {
            table.apply_pod(testkit::gathered(support::pod(
                &format!("wait{g}-{m}"),
                300,
                Some((&format!("wait{g}"), 16)),
                None,
            )));
        }
    }
    let mut gatherer = Gatherer::new(true);
    group.bench_function("5000n/20000p/436_bound_gangs/8_waiting", |b| {
        b.iter(|| {
            let plan = gatherer.gather(&mut table, Instant::now());
            assert!(plan.releases.is_empty());
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(2));
    targets = filter, prioritize, bind_decision, decode, preempt, scale, huge_quorum, topology, dra, gather_round
}
criterion_main!(benches);
