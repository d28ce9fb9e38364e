//! End-to-end: muster as the extender of the real, stock kube-scheduler (v1.37), against a real
//! etcd + kube-apiserver started by `muster-harness` (binaries built once from the Go module proxy
//! and cached; a missing cache is built on first use). Fake nodes, no kubelets.
//!
//! Every test gets its own control plane (a few seconds to start) so tests cannot disturb each
//! other's capacity. Waiting is polling with deadlines; "is not placed" is an observation window
//! in which every poll must see nothing bound.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use muster_harness::k8s::GangKey;
use muster_harness::{holds_for, wait_for, Cluster, NodeShape, Progress};

use muster_harness::Timer;

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");
/// Deadline for something that should happen.
const PLACE: Duration = Duration::from_secs(60);
/// Deadline for a wait reason to show up in Events.
const REASON: Duration = Duration::from_secs(30);
/// Observation window for "nothing gets bound" / "stays as it is".
const WINDOW: Duration = Duration::from_secs(3);
/// Members of one gang must be bound within this of each other.
const TOGETHER: Duration = Duration::from_secs(3);

fn spread<K>(bound: &BTreeMap<K, (String, Instant)>) -> Duration {
    let times: Vec<Instant> = bound.values().map(|(_, t)| *t).collect();
    match (times.iter().min(), times.iter().max()) {
        (Some(a), Some(b)) => b.duration_since(*a),
        _ => Duration::ZERO,
    }
}

fn cpu(c: &'static str) -> impl Fn(muster_harness::PodBuilder) -> muster_harness::PodBuilder {
    move |p| p.cpu(c)
}

/// An Event that names the gang and says its members do not fit (as opposed to, say, "waiting for
/// the other members to be created").
fn capacity_reason(ns: &str, group: &str) -> impl Fn(&muster_harness::k8s::EventSummary) -> bool {
    let gang = format!("gang {ns}/{group}");
    move |e| {
        e.message.contains(&gang) && (e.message.contains("fit") || e.message.contains("quorum"))
    }
}

/// Fails on every poll where a node is overcommitted.
async fn no_overcommit(c: &Cluster) -> Result<()> {
    if let Err(e) = c.check_no_overcommit().await? {
        bail!("{e}");
    }
    Ok(())
}

// -------------------------------------------------------------------------------------------

/// The README's seed job: master + worker, min-available 2 → both bound, within seconds.
#[tokio::test]
async fn seed_example_master_and_worker_bound_together() -> Result<()> {
    let _t = Timer(
        "seed_example_master_and_worker_bound_together",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let r = async {
        c.namespace("ml").await?;
        c.add_node("node-1", NodeShape::cpu("1")).await?;
        c.add_node("node-2", NodeShape::cpu("1")).await?;
        let names = vec![
            "ai-gang-job-master-0".to_string(),
            "ai-gang-job-worker-0".to_string(),
        ];
        for n in &names {
            c.create(muster_harness::PodBuilder::new("ml", n).cpu("100m").gang(
                GangKey::Muster,
                "ai-gang-job",
                2,
            ))
            .await?;
        }
        let bound = c.wait_bound("ml", &names, PLACE).await?;
        let s = spread(&bound);
        eprintln!("seed gang bound {:.3}s apart: {bound:?}", s.as_secs_f64());
        ensure!(
            s <= TOGETHER,
            "members bound {s:?} apart (> {TOGETHER:?}): {bound:?}"
        );
        no_overcommit(&c).await
    }
    .await;
    c.report(&["ml"], r).await
}

/// Not enough room: no member is bound and the reason is in Events; add capacity → all bound.
#[tokio::test]
async fn not_enough_room_waits_whole_then_places_when_capacity_added() -> Result<()> {
    let _t = Timer(
        "not_enough_room_waits_whole_then_places_when_capacity_added",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let r = async {
        c.namespace("room").await?;
        // Room for 2 of the 3 members.
        c.add_node("node-1", NodeShape::cpu("250m")).await?;
        let names = c
            .create_gang("room", "trainer", 3, 3, GangKey::Muster, cpu("100m"))
            .await?;
        let (pod, ev) = c
            .wait_event_matching(
                "room",
                &names,
                "saying gang room/trainer does not fit",
                REASON,
                capacity_reason("room", "trainer"),
            )
            .await?;
        eprintln!("wait reason on {pod}: {ev}");
        // muster's own Event, not only kube-scheduler's FailedScheduling.
        let (pod, ev) = c
            .wait_event_matching("room", &names, "GangWaiting from muster", REASON, |e| {
                e.reason == "GangWaiting" && e.message.contains("gang room/trainer")
            })
            .await?;
        eprintln!("muster's event on {pod}: {ev}");
        c.assert_none_bound_for("room", &names, WINDOW).await?;
        c.add_node("node-2", NodeShape::cpu("250m")).await?;
        let bound = c.wait_bound("room", &names, PLACE).await?;
        // One GangPlaced for the gang, on its first member, naming where each member went.
        let mut sorted = names.clone();
        sorted.sort();
        let (_, ev) = c
            .wait_event_matching(
                "room",
                &sorted[..1],
                "GangPlaced from muster",
                REASON,
                |e| e.reason == "GangPlaced" && e.message.starts_with("gang room/trainer placed"),
            )
            .await?;
        for (pod, (node, _)) in &bound {
            ensure!(
                ev.message.contains(&format!("{pod} on {node}")),
                "GangPlaced does not say {pod} is on {node}: {ev}"
            );
        }
        let s = spread(&bound);
        eprintln!(
            "gang bound {:.3}s apart after capacity was added",
            s.as_secs_f64()
        );
        ensure!(s <= TOGETHER, "members bound {s:?} apart: {bound:?}");
        no_overcommit(&c).await
    }
    .await;
    c.report(&["room"], r).await
}

/// 4 replicas, min-available 2, room for 2: those 2 together, then the rest one by one as room
/// appears.
#[tokio::test]
async fn more_replicas_than_min_available_first_quorum_then_the_rest_as_they_fit() -> Result<()> {
    let _t = Timer(
        "more_replicas_than_min_available_first_quorum_then_the_rest_as_they_fit",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let r = async {
        c.namespace("elastic").await?;
        c.add_node("node-1", NodeShape::cpu("250m")).await?; // room for 2
        let names = c
            .create_gang("elastic", "workers", 4, 2, GangKey::Muster, cpu("100m"))
            .await?;
        // First minAvailable members, together.
        let first: RefCell<BTreeMap<String, (String, Instant)>> = RefCell::default();
        wait_for("2 members bound", PLACE, || async {
            let bound = c.bound_pods("elastic").await?;
            let now = Instant::now();
            let mut first = first.borrow_mut();
            for n in &names {
                if let Some(node) = bound.get(n) {
                    first.entry(n.clone()).or_insert((node.clone(), now));
                }
            }
            Ok(if first.len() >= 2 {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("bound: {bound:?}"))
            })
        })
        .await?;
        let first = first.into_inner();
        let s = spread(&first);
        ensure!(
            s <= TOGETHER,
            "first 2 members bound {s:?} apart: {first:?}"
        );
        // Only 2 fit: it stays at 2 without overcommitting node-1.
        holds_for(
            "exactly 2 members bound and no overcommit",
            WINDOW,
            || async {
                let n = c.count_bound("elastic", &names).await?;
                if n != 2 {
                    return Ok(Err(format!("{n} members bound")));
                }
                c.check_no_overcommit().await
            },
        )
        .await?;
        // The rest as they fit: one more node with room for one → 3, another → 4.
        c.add_node("node-2", NodeShape::cpu("150m")).await?;
        wait_for("a 3rd member bound", PLACE, || async {
            let n = c.count_bound("elastic", &names).await?;
            Ok(if n == 3 {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("{n} bound"))
            })
        })
        .await?;
        no_overcommit(&c).await?;
        c.add_node("node-3", NodeShape::cpu("150m")).await?;
        c.wait_bound("elastic", &names, PLACE).await?;
        no_overcommit(&c).await
    }
    .await;
    c.report(&["elastic"], r).await
}

/// Two gangs of 3, room for 3: exactly one is placed, never part of each; delete it → the other.
#[tokio::test]
async fn two_gangs_competing_for_room_for_one_exactly_one_placed() -> Result<()> {
    let _t = Timer(
        "two_gangs_competing_for_room_for_one_exactly_one_placed",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let r = async {
        c.namespace("compete").await?;
        c.add_node("node-1", NodeShape::cpu("350m")).await?; // room for 3
        let mut alpha = Vec::new();
        let mut beta = Vec::new();
        // Interleaved, as two jobs submitted at the same time would be.
        for i in 0..3 {
            for (group, list) in [("alpha", &mut alpha), ("beta", &mut beta)] {
                let name = format!("{group}-{i}");
                c.create(
                    muster_harness::PodBuilder::new("compete", &name)
                        .cpu("100m")
                        .gang(GangKey::Muster, group, 3),
                )
                .await?;
                list.push(name);
            }
        }
        let state = || async {
            let a = c.count_bound("compete", &alpha).await?;
            let b = c.count_bound("compete", &beta).await?;
            Ok::<_, anyhow::Error>((a, b))
        };
        let winner = wait_for("one whole gang placed", PLACE, || async {
            let (a, b) = state().await?;
            if a > 0 && b > 0 {
                bail!("part of each gang bound: alpha {a}/3, beta {b}/3");
            }
            Ok(match (a, b) {
                (3, 0) => Progress::Done("alpha"),
                (0, 3) => Progress::Done("beta"),
                _ => Progress::NotYet(format!("alpha {a}/3, beta {b}/3 bound")),
            })
        })
        .await?;
        eprintln!("{winner} placed first");
        holds_for(
            "winner whole, loser nothing, no overcommit",
            WINDOW,
            || async {
                let (a, b) = state().await?;
                let ok = if winner == "alpha" {
                    (a, b) == (3, 0)
                } else {
                    (a, b) == (0, 3)
                };
                if !ok {
                    return Ok(Err(format!("alpha {a}/3, beta {b}/3 bound")));
                }
                c.check_no_overcommit().await
            },
        )
        .await?;
        let (won, lost) = if winner == "alpha" {
            (&alpha, &beta)
        } else {
            (&beta, &alpha)
        };
        c.delete_pods("compete", won).await?;
        let bound = c.wait_bound("compete", lost, PLACE).await?;
        ensure!(
            spread(&bound) <= TOGETHER,
            "second gang bound apart: {bound:?}"
        );
        no_overcommit(&c).await
    }
    .await;
    c.report(&["compete"], r).await
}

/// Plain pods schedule while a gang waits, and never take the seats of a gang being placed: no
/// node is ever overcommitted, the gang is whole or absent, and it is placed once room frees.
#[tokio::test]
async fn plain_pods_keep_scheduling_and_do_not_take_gang_seats() -> Result<()> {
    let _t = Timer(
        "plain_pods_keep_scheduling_and_do_not_take_gang_seats",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let r = async {
        let ns = "mixed";
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("250m")).await?; // room for 2
        let gang = c
            .create_gang(ns, "big", 3, 3, GangKey::Muster, cpu("100m"))
            .await?;
        c.wait_event_containing(ns, &gang, "gang mixed/big", REASON)
            .await?;
        // A plain pod is scheduled while the gang waits.
        c.create(muster_harness::PodBuilder::new(ns, "plain-0").cpu("100m"))
            .await?;
        c.wait_bound(ns, &["plain-0".to_string()], PLACE).await?;
        ensure!(
            c.count_bound(ns, &gang).await? == 0,
            "gang member bound without room for all"
        );

        // Race: room for 4 more appears (1 on node-1, 3 on node-2) while 3 plain pods arrive.
        c.add_node("node-2", NodeShape::cpu("300m")).await?;
        let plain: Vec<String> = (1..=3).map(|i| format!("plain-{i}")).collect();
        for p in &plain {
            c.create(muster_harness::PodBuilder::new(ns, p).cpu("100m"))
                .await?;
        }
        // Settles as gang 3 + one plain pod, or 3 plain pods + no gang.
        let outcome = wait_for("the race to settle", PLACE, || async {
            no_overcommit(&c).await?;
            let g = c.count_bound(ns, &gang).await?;
            let p = c.count_bound(ns, &plain).await?;
            Ok(match (g, p) {
                (3, n) if n >= 1 => Progress::Done("gang placed"),
                (0, 3) => Progress::Done("plain pods took the room first"),
                _ => Progress::NotYet(format!("gang {g}/3, plain {p}/3 bound")),
            })
        })
        .await?;
        eprintln!("race outcome: {outcome}");
        holds_for("gang whole or absent, no overcommit", WINDOW, || async {
            let g = c.count_bound(ns, &gang).await?;
            if g != 0 && g != 3 {
                return Ok(Err(format!("gang partially bound: {g}/3")));
            }
            c.check_no_overcommit().await
        })
        .await?;
        // Free the room: the gang must not be stuck.
        let mut all_plain = plain.clone();
        all_plain.push("plain-0".into());
        c.delete_pods(ns, &all_plain).await?;
        let bound = c.wait_bound(ns, &gang, PLACE).await?;
        ensure!(
            spread(&bound) <= TOGETHER || outcome == "gang placed",
            "gang bound apart: {bound:?}"
        );
        no_overcommit(&c).await
    }
    .await;
    c.report(&["mixed"], r).await
}

/// muster SIGKILLed and restarted (twice) while gangs wait: every gang ends placed whole or
/// waiting whole, never partial, never stuck.
#[tokio::test]
async fn muster_killed_and_restarted_while_gangs_wait_never_partial_never_stuck() -> Result<()> {
    let _t = Timer(
        "muster_killed_and_restarted_while_gangs_wait_never_partial_never_stuck",
        Instant::now(),
    );
    let mut c = Cluster::start(MUSTER).await?;
    let ns = "restart";
    let r = async {
        c.namespace(ns).await?;
        // 5 seats: one gang of 3 plus the gang of 2 fit; both gangs of 3 never do.
        c.add_node("node-1", NodeShape::cpu("350m")).await?;
        c.add_node("node-2", NodeShape::cpu("250m")).await?;
        let mut gangs: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (g, n) in [("a", 3), ("b", 3), ("c", 2)] {
            gangs.insert(
                g,
                c.create_gang(ns, g, n, n, GangKey::Muster, cpu("100m"))
                    .await?,
            );
        }
        // Kill #1: the moment the first member of any gang is seen bound (placement in flight).
        let all: Vec<String> = gangs.values().flatten().cloned().collect();
        let t = Instant::now();
        loop {
            let n = c.count_bound(ns, &all).await?;
            if n > 0 {
                c.muster.kill_hard();
                eprintln!(
                    "muster SIGKILLed with {n} pod(s) bound, {:.2}s after the gangs were created",
                    t.elapsed().as_secs_f64()
                );
                break;
            }
            ensure!(t.elapsed() < PLACE, "nothing bound within {PLACE:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The scheduler now fails its extender calls (ignorable: false) and nothing more is bound.
        let seen = wait_for(
            "the scheduler to report muster unreachable",
            Duration::from_secs(5),
            || async {
                for p in c.pods(ns).await? {
                    if muster_harness::k8s::pod_node(&p).is_some() {
                        continue;
                    }
                    let cond = muster_harness::k8s::scheduled_condition(&p).unwrap_or_default();
                    if cond.contains("extender") || cond.contains("connection refused") {
                        return Ok(Progress::Done(cond));
                    }
                }
                Ok(Progress::NotYet("no extender error yet".into()))
            },
        )
        .await;
        match seen {
            Ok(cond) => eprintln!("while muster was down: {cond}"),
            Err(e) => eprintln!("(no extender error observed while muster was down: {e})"),
        }
        c.muster.restart().await?;
        eprintln!("muster restarted");

        let counts = |gangs: BTreeMap<&'static str, Vec<String>>| {
            let c = &c;
            async move {
                let bound = c.bound_pods(ns).await?;
                let mut out = BTreeMap::new();
                for (g, names) in &gangs {
                    out.insert(*g, names.iter().filter(|n| bound.contains_key(*n)).count());
                }
                Ok::<_, anyhow::Error>(out)
            }
        };
        let first = wait_for(
            "one gang of 3 and the gang of 2 placed whole",
            PLACE * 2,
            || async {
                no_overcommit(&c).await?;
                let k = counts(gangs.clone()).await?;
                if k["a"] > 0 && k["b"] > 0 {
                    bail!("both gangs of 3 partly bound: {k:?}");
                }
                Ok(match (k["a"], k["b"], k["c"]) {
                    (3, 0, 2) => Progress::Done("a"),
                    (0, 3, 2) => Progress::Done("b"),
                    _ => Progress::NotYet(format!("bound per gang: {k:?}")),
                })
            },
        )
        .await?;
        let waiting = if first == "a" { "b" } else { "a" };
        holds_for("placed gangs whole, waiting gang empty", WINDOW, || async {
            let k = counts(gangs.clone()).await?;
            if k[first] != 3 || k[waiting] != 0 || k["c"] != 2 {
                return Ok(Err(format!("bound per gang: {k:?}")));
            }
            c.check_no_overcommit().await
        })
        .await?;

        // Kill #2: gang `waiting` waits; free its room while muster is down, then restart.
        c.muster.kill_hard();
        c.delete_pods(ns, &gangs[first]).await?;
        c.muster.restart().await?;
        let bound = c.wait_bound(ns, &gangs[waiting], PLACE * 2).await?;
        eprintln!("after the second restart gang {waiting} was placed: {bound:?}");
        ensure!(
            c.count_bound(ns, &gangs["c"]).await? == 2,
            "gang c lost members"
        );
        no_overcommit(&c).await
    }
    .await;
    c.report(&[ns], r).await
}

/// Each compatible key forms a gang: with room for one member only, none is bound (and the
/// Event names the gang); with room for both, both are bound together.
#[tokio::test]
async fn each_compatible_key_forms_a_gang() -> Result<()> {
    let _t = Timer("each_compatible_key_forms_a_gang", Instant::now());
    let c = Cluster::start(MUSTER).await?;
    let mut namespaces = Vec::new();
    let r = async {
        c.add_node("node-1", NodeShape::cpu("150m")).await?; // room for one 100m pod
        for key in GangKey::ALL_COMPATIBLE {
            let ns = format!("keys-{}", key.slug());
            let group = format!("g-{}", key.slug());
            namespaces.push(ns.clone());
            c.namespace(&ns).await?;
            let names = c.create_gang(&ns, &group, 2, 2, key, cpu("100m")).await?;
            let needle = format!("gang {ns}/{group}");
            c.wait_event_containing(&ns, &names, &needle, REASON)
                .await
                .map_err(|e| anyhow::anyhow!("key {key:?}: {e:#}"))?;
            c.assert_none_bound_for(&ns, &names, Duration::from_secs(2))
                .await
                .map_err(|e| anyhow::anyhow!("key {key:?}: {e:#}"))?;
            let extra = format!("extra-{}", key.slug());
            c.add_node(&extra, NodeShape::cpu("150m")).await?;
            let bound = c
                .wait_bound(&ns, &names, PLACE)
                .await
                .map_err(|e| anyhow::anyhow!("key {key:?}: {e:#}"))?;
            ensure!(
                spread(&bound) <= TOGETHER,
                "key {key:?}: bound apart: {bound:?}"
            );
            eprintln!("key {key:?} formed gang {ns}/{group}: {bound:?}");
            // Back to room for one, for the next key.
            c.delete_pods(&ns, &names).await?;
            c.delete_node(&extra).await?;
            wait_for("the pods to be gone", PLACE, || async {
                let n = c.pods(&ns).await?.len();
                Ok(if n == 0 {
                    Progress::Done(())
                } else {
                    Progress::NotYet(format!("{n} left"))
                })
            })
            .await?;
        }
        no_overcommit(&c).await
    }
    .await;
    let ns: Vec<&str> = namespaces.iter().map(String::as_str).collect();
    c.report(&ns, r).await
}

/// 8 pods × 1 GPU, min-available 8, on two 4-GPU nodes: placed.
#[tokio::test]
async fn gpu_gang_of_8_on_two_4_gpu_nodes_is_placed() -> Result<()> {
    let _t = Timer("gpu_gang_of_8_on_two_4_gpu_nodes_is_placed", Instant::now());
    let c = Cluster::start(MUSTER).await?;
    let r = async {
        c.namespace("gpu").await?;
        for n in ["gpu-a", "gpu-b"] {
            c.add_node(n, NodeShape::cpu("8").memory("32Gi").gpus(4))
                .await?;
        }
        let names = c
            .create_gang("gpu", "llm", 8, 8, GangKey::Muster, |p| {
                p.cpu("500m").gpus(1)
            })
            .await?;
        let bound = c.wait_bound("gpu", &names, PLACE).await?;
        let s = spread(&bound);
        eprintln!("8-GPU gang bound {:.3}s apart", s.as_secs_f64());
        ensure!(s <= TOGETHER, "members bound {s:?} apart: {bound:?}");
        no_overcommit(&c).await
    }
    .await;
    c.report(&["gpu"], r).await
}

/// The same gang on 4 + 2 GPUs is not placed and nothing is bound; neither is a gang of
/// 2 × 3 GPUs whose sum (6) fits the cluster but which fits no two nodes one by one.
#[tokio::test]
async fn gpu_gang_of_8_on_4_plus_2_gpus_is_not_placed_and_nothing_is_bound() -> Result<()> {
    let _t = Timer(
        "gpu_gang_of_8_on_4_plus_2_gpus_is_not_placed_and_nothing_is_bound",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let r = async {
        c.namespace("gpu").await?;
        c.namespace("frag").await?;
        c.add_node("gpu-4", NodeShape::cpu("8").memory("32Gi").gpus(4))
            .await?;
        c.add_node("gpu-2", NodeShape::cpu("8").memory("32Gi").gpus(2))
            .await?;
        let llm = c
            .create_gang("gpu", "llm", 8, 8, GangKey::Muster, |p| {
                p.cpu("500m").gpus(1)
            })
            .await?;
        let frag = c
            .create_gang("frag", "pair", 2, 2, GangKey::Muster, |p| {
                p.cpu("500m").gpus(3)
            })
            .await?;
        let (pod, ev) = c
            .wait_event_matching(
                "gpu",
                &llm,
                "saying gang gpu/llm does not fit",
                REASON,
                capacity_reason("gpu", "llm"),
            )
            .await?;
        eprintln!("llm waits: {pod}: {ev}");
        let (pod, ev) = c
            .wait_event_matching(
                "frag",
                &frag,
                "saying gang frag/pair does not fit",
                REASON,
                capacity_reason("frag", "pair"),
            )
            .await?;
        eprintln!("frag waits: {pod}: {ev}");
        holds_for("nothing bound anywhere", WINDOW, || async {
            let a = c.bound_pods("gpu").await?;
            let b = c.bound_pods("frag").await?;
            Ok(if a.is_empty() && b.is_empty() {
                Ok(())
            } else {
                Err(format!("bound: {a:?} {b:?}"))
            })
        })
        .await
    }
    .await;
    c.report(&["gpu", "frag"], r).await
}

/// A job controller creating members one at a time: the first member is seated at once and
/// room is held for the members not created yet, so a complete gang arriving meanwhile cannot
/// take it; nothing binds until the last member exists, then the whole gang binds together.
#[tokio::test]
async fn a_gang_created_one_member_at_a_time_holds_its_room_and_binds_together() -> Result<()> {
    let _t = Timer(
        "a_gang_created_one_member_at_a_time_holds_its_room_and_binds_together",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let r = async {
        c.namespace("slow").await?;
        // Room for one gang of 3 × 100m, not two.
        c.add_node("node-1", NodeShape::cpu("400m")).await?;
        let member = |name: &str, group: &str| {
            muster_harness::PodBuilder::new("slow", name)
                .cpu("100m")
                .gang(GangKey::Muster, group, 3)
        };
        c.create(member("early-0", "early")).await?;
        wait_for(
            "early-0 seated with room held for two members not created yet",
            PLACE,
            || async {
                let (_, body) = c.muster.get("/gangs").await?;
                let gangs: serde_json::Value = serde_json::from_str(&body)?;
                let states: Vec<String> = gangs["gangs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|g| g["name"] == "early")
                    .flat_map(|g| g["members"].as_array().cloned().unwrap_or_default())
                    .map(|m| format!("{}={}", m["name"], m["state"]))
                    .collect();
                let held = states.iter().filter(|s| s.ends_with("=\"held\"")).count();
                let seated = states.iter().any(|s| s == "\"early-0\"=\"seated\"");
                Ok(if seated && held == 2 {
                    Progress::Done(())
                } else {
                    Progress::NotYet(format!("members of gang early: {states:?} in {body}"))
                })
            },
        )
        .await?;
        // A complete gang arrives while "early" is still being created: it must not fit.
        let late = c
            .create_gang("slow", "late", 3, 3, GangKey::Muster, cpu("100m"))
            .await?;
        c.wait_event_matching(
            "slow",
            &late,
            "saying gang slow/late does not fit",
            REASON,
            capacity_reason("slow", "late"),
        )
        .await?;
        let early = vec![
            "early-0".to_string(),
            "early-1".to_string(),
            "early-2".to_string(),
        ];
        let everyone: Vec<String> = early.iter().chain(&late).cloned().collect();
        c.assert_none_bound_for("slow", &everyone, WINDOW).await?;
        for n in &early[1..] {
            c.create(member(n, "early")).await?;
        }
        let bound = c.wait_bound("slow", &early, PLACE).await?;
        let s = spread(&bound);
        ensure!(s <= TOGETHER, "members bound {s:?} apart: {bound:?}");
        ensure!(
            c.count_bound("slow", &late).await? == 0,
            "a member of the late gang was bound"
        );
        no_overcommit(&c).await
    }
    .await;
    c.report(&["slow"], r).await
}
