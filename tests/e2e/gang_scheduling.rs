//! End-to-end: muster as the extender of the real, stock kube-scheduler (v1.37), against a real
//! etcd + kube-apiserver started by `muster-harness` (binaries built once from the Go module proxy
//! and cached; a missing cache is built on first use). Fake nodes, no kubelets.
//!
//! Every test has the cluster to itself, so tests cannot disturb each other's capacity: its own
//! kube-scheduler and muster, and either its own etcd + kube-apiserver or (under `tests/e2e-run`)
//! its slot's pair, emptied of every object earlier tests made (`muster_harness::shared`). Waiting is polling with deadlines; "is not placed" is an observation window
//! in which every poll must see nothing bound.
//!
//! Each test puts its gang *in question* — room for some members but not the quorum, seats that
//! others want, muster down — where the stock kube-scheduler alone does something else: it binds
//! the members that fit. `tests/control-run` runs these tests with `MUSTER_E2E_CONTROL=1` (no
//! extender in the scheduler's config) and requires every one of them to fail.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use muster_harness::k8s::KeyScheme;
use muster_harness::timing;
use muster_harness::{
    ensure_truth, holds_for, pod_names, spread, truth, wait_for, Cluster, ClusterOptions,
    NodeShape, Progress, PLACE, REASON, TOGETHER, WINDOW,
};

use muster_harness::Timer;

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");

fn cpu(c: &'static str) -> impl Fn(muster_harness::PodBuilder) -> muster_harness::PodBuilder {
    move |p| p.cpu(c)
}

/// muster's verdict, word for word, for a gang whose members all exist but of which at most
/// `fit` of the quorum can have nodes at once (docs/operating.md, "What the messages mean").
/// Exact: "waiting for quorum" (an admitted gang holding seats) or "waiting for members" are
/// other verdicts.
fn fit_reason(ns: &str, group: &str, fit: u32, quorum: u32) -> String {
    format!("gang {ns}/{group}: {fit} of {quorum} members fit")
}

/// muster's `/gangs` says the gang is placed.
async fn placed(c: &Cluster, ns: &str, group: &str) -> Result<()> {
    match c.muster.gang(ns, group).await? {
        Some(g) if g.state == "placed" => Ok(()),
        Some(g) => bail!("expected placed; muster's /gangs: {}", g.describe()),
        None => bail!("muster's /gangs does not list gang {ns}/{group}"),
    }
}

// -------------------------------------------------------------------------------------------

/// The README's seed job: master + worker, min-available 2. With room for one member only,
/// neither is bound and muster says exactly why (stock kube-scheduler would bind one); a node is
/// added → both are bound together, within seconds.
#[tokio::test]
async fn seed_example_waits_whole_with_room_for_one_then_binds_together() -> Result<()> {
    let _t = Timer(
        "seed_example_waits_whole_with_room_for_one_then_binds_together",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let r = async {
        c.namespace("ml").await?;
        c.add_node("node-1", NodeShape::cpu("150m")).await?; // room for one 100m member
        let names = pod_names(&["ai-gang-job-master-0", "ai-gang-job-worker-0"]);
        for n in &names {
            c.create(muster_harness::PodBuilder::new("ml", n).cpu("100m").gang(
                KeyScheme::Muster,
                "ai-gang-job",
                2,
            ))
            .await?;
        }
        let reason = fit_reason("ml", "ai-gang-job", 1, 2);
        c.wait_gang_waiting_whole("ml", "ai-gang-job", &names, &reason, REASON)
            .await?;
        c.assert_gang_waits_whole_for("ml", "ai-gang-job", &names, &reason, WINDOW)
            .await?;
        c.add_node("node-2", NodeShape::cpu("150m")).await?;
        let bound = c.wait_bound("ml", &names, PLACE).await?;
        let s = spread(&bound);
        eprintln!("seed gang bound {:.3}s apart: {bound:?}", s.as_secs_f64());
        ensure_truth!(
            s <= TOGETHER,
            "members bound {s:?} apart (> {TOGETHER:?}): {bound:?}"
        );
        placed(&c, "ml", "ai-gang-job").await?;
        c.assert_no_overcommit().await
    }
    .await;
    c.report(&["ml"], r).await
}

/// Not enough room: no member is bound and muster gives the exact reason (in `/gangs` and its own
/// `GangWaiting` Event); add capacity → all bound together, with one `GangPlaced` Event.
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
            .create_gang("room", "trainer", 3, 3, KeyScheme::Muster, cpu("100m"))
            .await?;
        let reason = fit_reason("room", "trainer", 2, 3);
        c.wait_gang_waiting_whole("room", "trainer", &names, &reason, REASON)
            .await?;
        c.assert_gang_waits_whole_for("room", "trainer", &names, &reason, WINDOW)
            .await?;
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
        ensure_truth!(s <= TOGETHER, "members bound {s:?} apart: {bound:?}");
        c.assert_no_overcommit().await
    }
    .await;
    c.report(&["room"], r).await
}

/// 4 replicas, min-available 2. Room for one member at first: none is bound ("1 of 2 members
/// fit"). Room for a second: those 2 together, and it stays at 2; then the rest one by one as
/// room appears (a placed gang's further members bind at once).
#[tokio::test]
async fn more_replicas_than_min_available_first_quorum_then_the_rest_as_they_fit() -> Result<()> {
    let _t = Timer(
        "more_replicas_than_min_available_first_quorum_then_the_rest_as_they_fit",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let r = async {
        c.namespace("elastic").await?;
        // Each node has room for exactly one 100m member.
        c.add_node("node-1", NodeShape::cpu("150m")).await?;
        let names = c
            .create_gang("elastic", "workers", 4, 2, KeyScheme::Muster, cpu("100m"))
            .await?;
        let reason = fit_reason("elastic", "workers", 1, 2);
        c.wait_gang_waiting_whole("elastic", "workers", &names, &reason, REASON)
            .await?;
        c.assert_gang_waits_whole_for("elastic", "workers", &names, &reason, WINDOW)
            .await?;
        c.add_node("node-2", NodeShape::cpu("150m")).await?;
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
        ensure_truth!(
            s <= TOGETHER,
            "first 2 members bound {s:?} apart: {first:?}"
        );
        // Only 2 fit: it stays at 2 without overcommitting.
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
        placed(&c, "elastic", "workers").await?;
        // The rest as they fit: one more node with room for one → 3, another → 4.
        c.add_node("node-3", NodeShape::cpu("150m")).await?;
        wait_for("a 3rd member bound", PLACE, || async {
            let n = c.count_bound("elastic", &names).await?;
            Ok(if n == 3 {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("{n} bound"))
            })
        })
        .await?;
        c.assert_no_overcommit().await?;
        c.add_node("node-4", NodeShape::cpu("150m")).await?;
        c.wait_bound("elastic", &names, PLACE).await?;
        c.assert_no_overcommit().await
    }
    .await;
    c.report(&["elastic"], r).await
}

/// Two gangs of 3, room for 3: exactly one is placed, never part of each, and muster holds no
/// seat for the other; delete the winner → the other is placed.
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
                        .gang(KeyScheme::Muster, group, 3),
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
                return Err(truth(format!(
                    "part of each gang bound: alpha {a}/3, beta {b}/3"
                )));
            }
            Ok(match (a, b) {
                (3, 0) => Progress::Done("alpha"),
                (0, 3) => Progress::Done("beta"),
                _ => Progress::NotYet(format!("alpha {a}/3, beta {b}/3 bound")),
            })
        })
        .await?;
        eprintln!("{winner} placed first");
        let (won, lost, loser) = if winner == "alpha" {
            (&alpha, &beta, "beta")
        } else {
            (&beta, &alpha, "alpha")
        };
        // Placed by muster as one gang (whatever order the scheduler happened to try pods in):
        // its /gangs entry says so. (A `GangPlaced` Event only ends a story its members were
        // told, and the winner may never have waited.)
        c.wait_gang("compete", winner, &[], "placed by muster", PLACE, |g| {
            g.state == "placed" && g.members_with_nodes == 3
        })
        .await?;
        // Once the winner is bound kube-scheduler's own NodeResourcesFit rejects the loser's
        // members before muster is asked, so muster's last reason for it depends on timing:
        // only its state is checked.
        holds_for(
            "winner whole, loser waiting with no seats, no overcommit",
            WINDOW,
            || async {
                let (a, b) = state().await?;
                let ok = if winner == "alpha" {
                    (a, b) == (3, 0)
                } else {
                    (a, b) == (0, 3)
                };
                if !ok {
                    return Ok(Err(format!(
                        "{} alpha {a}/3, beta {b}/3 bound",
                        muster_harness::CLUSTER_TRUTH
                    )));
                }
                match c.muster.gang("compete", loser).await? {
                    Some(g) if g.state == "waiting" && g.seats().is_empty() => {}
                    Some(g) => return Ok(Err(format!("loser: {}", g.describe()))),
                    None => return Ok(Err(format!("/gangs does not list {loser}"))),
                }
                c.check_no_overcommit().await
            },
        )
        .await?;
        c.delete_pods("compete", won).await?;
        let bound = c.wait_bound("compete", lost, PLACE).await?;
        ensure_truth!(
            spread(&bound) <= TOGETHER,
            "second gang bound apart: {bound:?}"
        );
        c.assert_no_overcommit().await
    }
    .await;
    c.report(&["compete"], r).await
}

/// Plain pods schedule while a gang waits. Once a gang is admitted — its seats visible in
/// `/gangs`, the room for its members not created yet held (within the creation window) —
/// plain pods get only the room left over, on every poll of a window; the gang then binds whole
/// into the room it held.
#[tokio::test]
async fn plain_pods_keep_scheduling_and_do_not_take_gang_seats() -> Result<()> {
    let _t = Timer(
        "plain_pods_keep_scheduling_and_do_not_take_gang_seats",
        Instant::now(),
    );
    // Room for members not created yet is held only for the creation window after the newest
    // member appeared (5 s by default); this test observes that room for longer, so it widens
    // the window (tests/e2e/holds_nothing.rs covers its end).
    // With every pod through muster: room held for members not created yet is that mode's (the
    // shipped mode holds nothing until every member its quorum needs exists).
    let c = Cluster::start_with(
        ClusterOptions::new(MUSTER)
            .every_pod()
            .muster_args(["--creation-window", "60s"]),
    )
    .await?;
    let r = async {
        let ns = "mixed";
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("250m")).await?; // room for 2
        let big = c
            .create_gang(ns, "big", 3, 3, KeyScheme::Muster, cpu("100m"))
            .await?;
        c.wait_gang_waiting_whole(ns, "big", &big, &fit_reason(ns, "big", 2, 3), REASON)
            .await?;
        // A plain pod is scheduled while the gang waits (and the gang still binds nothing).
        c.create(muster_harness::PodBuilder::new(ns, "plain-0").cpu("100m"))
            .await?;
        wait_for("plain-0 bound while gang big waits", PLACE, || async {
            let bound = c.bound_pods(ns).await?;
            if let Some(m) = big.iter().find(|m| bound.contains_key(*m)) {
                bail!("{m} of gang big bound without room for all: {bound:?}");
            }
            Ok(if bound.contains_key("plain-0") {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("bound: {bound:?}"))
            })
        })
        .await?;
        // Gang big has had its answer; it leaves (muster sees it go before new room appears),
        // and node-1 has room for one more.
        c.delete_pods(ns, &big).await?;
        wait_for("gang big to leave muster's table", PLACE, || async {
            Ok(match c.muster.gang(ns, "big").await? {
                Some(g) if !g.members.is_empty() => Progress::NotYet(g.describe()),
                _ => Progress::Done(()),
            })
        })
        .await?;

        // Room for 4 × 100m: one on node-1, three on node-2. A gang of 3 whose job controller
        // has created one member so far: muster seats it and holds room for the other two.
        c.add_node("node-2", NodeShape::cpu("300m")).await?;
        let early = pod_names(&["early-0", "early-1", "early-2"]);
        c.create(
            muster_harness::PodBuilder::new(ns, "early-0")
                .cpu("100m")
                .gang(KeyScheme::Muster, "early", 3),
        )
        .await?;
        let admitted = c
            .wait_gang(
                ns,
                "early",
                &early,
                "admitted: early-0 seated, room held for 2 members not created yet",
                PLACE,
                |g| {
                    g.state == "admitted"
                        && g.state_of("early-0") == Some("seated")
                        && g.count("held") == 2
                },
            )
            .await?;
        eprintln!("admitted: {}", admitted.describe());
        // Three plain pods want room: exactly the one slot nobody holds is theirs.
        let plain = pod_names(&["plain-1", "plain-2", "plain-3"]);
        for p in &plain {
            c.create(muster_harness::PodBuilder::new(ns, p).cpu("100m"))
                .await?;
        }
        let seats_intact = || async {
            let bound = c.bound_pods(ns).await?;
            let g = c.muster.gang(ns, "early").await?;
            let plain_bound = plain.iter().filter(|p| bound.contains_key(*p)).count();
            let problem = match g {
                _ if plain_bound > 1 => Some(format!(
                    "{plain_bound} plain pods bound with room for one besides the seats: {bound:?}"
                )),
                _ if bound.contains_key("early-0") => {
                    Some(format!("early-0 bound below quorum: {bound:?}"))
                }
                Some(g) if g.state != "admitted" || g.seats().len() != 3 => {
                    Some(format!("gang early lost seats: {}", g.describe()))
                }
                None => Some("/gangs does not list gang early".into()),
                Some(_) => None,
            };
            Ok::<_, anyhow::Error>((plain_bound, problem))
        };
        wait_for("one plain pod bound in the free slot", PLACE, || async {
            let (n, problem) = seats_intact().await?;
            if let Some(p) = problem {
                bail!("{p}");
            }
            Ok(if n == 1 {
                Progress::Done(())
            } else {
                Progress::NotYet("no plain pod bound yet".into())
            })
        })
        .await?;
        holds_for(
            "the gang's seats held, one plain pod bound, no overcommit",
            WINDOW,
            || async {
                let (n, problem) = seats_intact().await?;
                if let Some(p) = problem {
                    return Ok(Err(p));
                }
                if n != 1 {
                    return Ok(Err(format!("{n} plain pods bound")));
                }
                c.check_no_overcommit().await
            },
        )
        .await?;
        // The rest of the gang arrives and binds whole into the room it held.
        for n in &early[1..] {
            c.create(muster_harness::PodBuilder::new(ns, n).cpu("100m").gang(
                KeyScheme::Muster,
                "early",
                3,
            ))
            .await?;
        }
        let bound = c.wait_bound(ns, &early, PLACE).await?;
        ensure_truth!(spread(&bound) <= TOGETHER, "gang bound apart: {bound:?}");
        let n = c.count_bound(ns, &plain).await?;
        ensure_truth!(n == 1, "{n} plain pods bound; room was left for one");
        c.assert_no_overcommit().await
    }
    .await;
    c.report(&["mixed"], r).await
}

/// muster SIGKILLed while a gang is admitted (two members seated, room held for the third, none
/// bound). While it is down nothing binds, on every poll — not the gang's third member, and not
/// a plain pod created meanwhile: kube-scheduler reports muster unreachable and stops
/// (`ignorable: false`). After the restart the gang binds whole and the plain pod is scheduled.
/// Killed again while a second gang waits whole and room for it appears meanwhile: after the
/// restart the placed gang stays placed and the waiting one is placed whole.
///
/// With every pod through muster: its fail-closed outage (a plain pod waits for muster too) and
/// room held for a member not created yet are that mode's; the shipped mode's outage, where plain
/// pods keep being scheduled, is `gang_members`'s.
#[tokio::test]
async fn muster_killed_while_a_gang_holds_seats_nothing_binds_until_restart_then_gang_whole(
) -> Result<()> {
    let _t = Timer(
        "muster_killed_while_a_gang_holds_seats_nothing_binds_until_restart_then_gang_whole",
        Instant::now(),
    );
    let mut c = Cluster::start_with(ClusterOptions::new(MUSTER).every_pod()).await?;
    let ns = "restart";
    let r = async {
        c.namespace(ns).await?;
        // Room for 4 × 100m: the gang of 3 and the plain pod.
        c.add_node("node-1", NodeShape::cpu("300m")).await?;
        c.add_node("node-2", NodeShape::cpu("150m")).await?;
        let gang = pod_names(&["a-0", "a-1", "a-2"]);
        let member = |name: &str| {
            muster_harness::PodBuilder::new(ns, name)
                .cpu("100m")
                .gang(KeyScheme::Muster, "a", 3)
        };
        for n in &gang[..2] {
            c.create(member(n)).await?;
        }
        let admitted = c
            .wait_gang(
                ns,
                "a",
                &gang,
                "admitted: a-0 and a-1 seated, room held for a-2",
                PLACE,
                |g| {
                    g.state == "admitted"
                        && g.state_of("a-0") == Some("seated")
                        && g.state_of("a-1") == Some("seated")
                        && g.count("held") == 1
                },
            )
            .await?;
        eprintln!("killing muster with {}", admitted.describe());
        c.muster.kill_hard();

        c.create(member("a-2")).await?;
        c.create(muster_harness::PodBuilder::new(ns, "plain-0").cpu("100m"))
            .await?;
        let everyone: Vec<String> = gang.iter().cloned().chain(["plain-0".into()]).collect();
        let nothing_bound = || async {
            let bound = c.bound_pods(ns).await?;
            Ok::<_, anyhow::Error>(if bound.is_empty() {
                Ok(())
            } else {
                Err(format!("bound while muster is down: {bound:?}"))
            })
        };
        let filter_url = format!("{}/filter", c.muster.url());
        let cond = wait_for(
            "kube-scheduler to fail plain-0 because muster is unreachable",
            REASON,
            || async {
                if let Err(e) = nothing_bound().await? {
                    bail!("{e}");
                }
                let pods = c.pods(ns).await?;
                let cond = pods
                    .iter()
                    .find(|p| muster_harness::k8s::pod_name(p) == "plain-0")
                    .and_then(muster_harness::k8s::scheduled_condition)
                    .unwrap_or_default();
                Ok(
                    if cond.contains(&filter_url) && cond.contains("connection refused") {
                        Progress::Done(cond)
                    } else {
                        Progress::NotYet(format!("plain-0: {cond:?}"))
                    },
                )
            },
        )
        .await?;
        eprintln!("while muster was down: {cond}");
        holds_for("nothing bound while muster is down", WINDOW, nothing_bound).await?;

        c.muster.restart().await?;
        eprintln!("muster restarted");
        let bound = c.wait_bound(ns, &everyone, PLACE).await?;
        let gang_bound: BTreeMap<String, (String, Instant)> = bound
            .iter()
            .filter(|(n, _)| gang.contains(n))
            .map(|(n, v)| (n.clone(), v.clone()))
            .collect();
        let s = spread(&gang_bound);
        eprintln!(
            "after the restart: {bound:?}, gang {:.3}s apart",
            s.as_secs_f64()
        );
        ensure_truth!(s <= TOGETHER, "gang a bound {s:?} apart: {bound:?}");
        placed(&c, ns, "a").await?;
        c.assert_no_overcommit().await?;

        // Kill #2 while gang b waits (50m left, it needs 2 × 100m); room for it appears
        // while muster is down. After the restart muster's beliefs come from the cluster: gang
        // a is placed (not gated again), and gang b is placed whole, not stuck.
        let b = c
            .create_gang(ns, "b", 2, 2, KeyScheme::Muster, cpu("100m"))
            .await?;
        // No node has room for one member: kube-scheduler's own NodeResourcesFit refuses them
        // before muster is asked, so muster knows the gang but has no reason of its own.
        c.wait_gang(ns, "b", &b, "known, waiting, no seats", REASON, |g| {
            g.state == "waiting" && g.members.len() == 2 && g.seats().is_empty()
        })
        .await?;
        c.assert_none_bound_for(ns, &b, WINDOW).await?;
        c.muster.kill_hard();
        c.delete_pod(ns, "plain-0").await?;
        c.add_node("node-3", NodeShape::cpu("150m")).await?;
        c.muster.restart().await?;
        let bound = c.wait_bound(ns, &b, PLACE).await?;
        eprintln!("after the second restart gang b was placed: {bound:?}");
        ensure_truth!(spread(&bound) <= TOGETHER, "gang b bound apart: {bound:?}");
        ensure_truth!(c.count_bound(ns, &gang).await? == 3, "gang a lost members");
        placed(&c, ns, "a").await?;
        placed(&c, ns, "b").await?;
        c.assert_no_overcommit().await
    }
    .await;
    c.report(&[ns], r).await
}

/// Each compatible key forms a gang: with room for one member only, none is bound and muster
/// says "1 of 2 members fit" for that gang; with room for both, both are bound together.
#[tokio::test]
async fn each_compatible_key_forms_a_gang() -> Result<()> {
    let _t = Timer("each_compatible_key_forms_a_gang", Instant::now());
    let c = Cluster::start(MUSTER).await?;
    let mut namespaces = Vec::new();
    let r = async {
        c.add_node("node-1", NodeShape::cpu("150m")).await?; // room for one 100m pod
        for key in KeyScheme::ALL_COMPATIBLE {
            let ns = format!("keys-{}", key.slug());
            let group = format!("g-{}", key.slug());
            namespaces.push(ns.clone());
            c.namespace(&ns).await?;
            let names = c.create_gang(&ns, &group, 2, 2, key, cpu("100m")).await?;
            let reason = fit_reason(&ns, &group, 1, 2);
            c.wait_gang_waiting_whole(&ns, &group, &names, &reason, REASON)
                .await
                .map_err(|e| anyhow::anyhow!("key {key:?}: {e:#}"))?;
            c.assert_gang_waits_whole_for(&ns, &group, &names, &reason, Duration::from_secs(2))
                .await
                .map_err(|e| anyhow::anyhow!("key {key:?}: {e:#}"))?;
            let extra = format!("extra-{}", key.slug());
            c.add_node(&extra, NodeShape::cpu("150m")).await?;
            let bound = c
                .wait_bound(&ns, &names, PLACE)
                .await
                .map_err(|e| anyhow::anyhow!("key {key:?}: {e:#}"))?;
            ensure_truth!(
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
        c.assert_no_overcommit().await
    }
    .await;
    let ns: Vec<&str> = namespaces.iter().map(String::as_str).collect();
    c.report(&ns, r).await
}

/// 8 pods × 1 GPU, min-available 8. On one 4-GPU node none is bound (stock kube-scheduler would
/// bind 4 and leave their GPUs idle) and muster says "4 of 8 members fit"; with a second 4-GPU
/// node all 8 are bound together.
#[tokio::test]
async fn gpu_gang_of_8_waits_whole_on_one_4_gpu_node_and_binds_together_on_two() -> Result<()> {
    let _t = Timer(
        "gpu_gang_of_8_waits_whole_on_one_4_gpu_node_and_binds_together_on_two",
        Instant::now(),
    );
    let c = Cluster::start(MUSTER).await?;
    let r = async {
        c.namespace("gpu").await?;
        let gpu_node = || NodeShape::cpu("8").memory("32Gi").gpus(4);
        c.add_node("gpu-a", gpu_node()).await?;
        let names = c
            .create_gang("gpu", "llm", 8, 8, KeyScheme::Muster, |p| {
                p.cpu("500m").gpus(1)
            })
            .await?;
        let reason = fit_reason("gpu", "llm", 4, 8);
        c.wait_gang_waiting_whole("gpu", "llm", &names, &reason, REASON)
            .await?;
        c.assert_gang_waits_whole_for("gpu", "llm", &names, &reason, WINDOW)
            .await?;
        c.add_node("gpu-b", gpu_node()).await?;
        let bound = c.wait_bound("gpu", &names, PLACE).await?;
        let s = spread(&bound);
        eprintln!("8-GPU gang bound {:.3}s apart", s.as_secs_f64());
        ensure_truth!(s <= TOGETHER, "members bound {s:?} apart: {bound:?}");
        c.assert_no_overcommit().await
    }
    .await;
    c.report(&["gpu"], r).await
}

/// The same gang on 4 + 2 GPUs is not placed and nothing is bound; neither is a gang of
/// 2 × 3 GPUs whose sum (6) fits the cluster but which fits no two nodes one by one. muster
/// says so for each ("6 of 8", "1 of 2 members fit") and holds no seat for either.
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
            .create_gang("gpu", "llm", 8, 8, KeyScheme::Muster, |p| {
                p.cpu("500m").gpus(1)
            })
            .await?;
        let frag = c
            .create_gang("frag", "pair", 2, 2, KeyScheme::Muster, |p| {
                p.cpu("500m").gpus(3)
            })
            .await?;
        let llm_reason = fit_reason("gpu", "llm", 6, 8);
        let frag_reason = fit_reason("frag", "pair", 1, 2);
        c.wait_gang_waiting_whole("gpu", "llm", &llm, &llm_reason, REASON)
            .await?;
        c.wait_gang_waiting_whole("frag", "pair", &frag, &frag_reason, REASON)
            .await?;
        holds_for(
            "both gangs waiting whole, nothing bound anywhere",
            WINDOW,
            || async {
                let a = c.bound_pods("gpu").await?;
                let b = c.bound_pods("frag").await?;
                if !a.is_empty() || !b.is_empty() {
                    return Ok(Err(format!("bound: {a:?} {b:?}")));
                }
                for (ns, group, reason) in
                    [("gpu", "llm", &llm_reason), ("frag", "pair", &frag_reason)]
                {
                    match c.muster.gang(ns, group).await? {
                        Some(g) => {
                            if let Err(e) = g.check_waiting_whole(reason) {
                                return Ok(Err(e));
                            }
                        }
                        None => return Ok(Err(format!("/gangs does not list {ns}/{group}"))),
                    }
                }
                Ok(Ok(()))
            },
        )
        .await
    }
    .await;
    c.report(&["gpu", "frag"], r).await
}

/// A job controller creating members one at a time: the first member is seated at once and
/// room is held for the members not created yet, so a complete gang arriving meanwhile cannot
/// take it (muster: "1 of 3 members fit"); nothing binds until the last member exists, then the
/// whole gang binds together.
#[tokio::test]
async fn a_gang_created_one_member_at_a_time_holds_its_room_and_binds_together() -> Result<()> {
    let _t = Timer(
        "a_gang_created_one_member_at_a_time_holds_its_room_and_binds_together",
        Instant::now(),
    );
    // The controller here is slower than the default creation window (5 s): widen it, as a
    // user with such a controller would (tests/e2e/holds_nothing.rs covers the window's end).
    let c =
        // With every pod through muster: room held for members not created yet is that mode's
        // (the shipped mode holds nothing until every member its quorum needs exists).
        Cluster::start_with(
            ClusterOptions::new(MUSTER)
                .every_pod()
                .muster_args(["--creation-window", "60s"]),
        )
            .await?;
    let r = async {
        c.namespace("slow").await?;
        // Room for one gang of 3 × 100m, not two.
        c.add_node("node-1", NodeShape::cpu("400m")).await?;
        let member = |name: &str, group: &str| {
            muster_harness::PodBuilder::new("slow", name)
                .cpu("100m")
                .gang(KeyScheme::Muster, group, 3)
        };
        let early = pod_names(&["early-0", "early-1", "early-2"]);
        c.create(member("early-0", "early")).await?;
        c.wait_gang(
            "slow",
            "early",
            &early,
            "early-0 seated with room held for two members not created yet",
            PLACE,
            |g| g.state_of("early-0") == Some("seated") && g.count("held") == 2,
        )
        .await?;
        // A complete gang arrives while "early" is still being created: it must not fit.
        let late = c
            .create_gang("slow", "late", 3, 3, KeyScheme::Muster, cpu("100m"))
            .await?;
        let reason = fit_reason("slow", "late", 1, 3);
        c.wait_gang_waiting_whole("slow", "late", &late, &reason, REASON)
            .await?;
        let everyone: Vec<String> = early.iter().chain(&late).cloned().collect();
        c.assert_none_bound_for("slow", &everyone, WINDOW).await?;
        for n in &early[1..] {
            c.create(member(n, "early")).await?;
        }
        let bound = c.wait_bound("slow", &early, PLACE).await?;
        let s = spread(&bound);
        ensure_truth!(s <= TOGETHER, "members bound {s:?} apart: {bound:?}");
        ensure_truth!(
            c.count_bound("slow", &late).await? == 0,
            "a member of the late gang was bound"
        );
        c.assert_no_overcommit().await
    }
    .await;
    c.report(&["slow"], r).await
}

/// `--gang-timeout 6s --gang-backoff 10s`: a gang holding seats below quorum (one member of 3
/// created) past its timeout releases them all at once — `GangTimedOut` with the numbers, `/gangs`
/// `backoff` with no seats — and a rival gang that waited whole for that room binds whole: not
/// before the timeout can have passed, and soon after. The timed-out gang is then refused for
/// its backoff.
///
/// `--bind-wait 9s` (below the 10s `httpTimeout`) keeps the seated member's bind call held
/// across the timeout: the expiry answers it, and kube-scheduler's failed bind is the cluster
/// event that makes it retry the rival's pods (it retries extender-refused pods only on events).
///
/// The rival must be seen waiting whole before the timeout can have passed: what is left of
/// the timeout once `slow` is admitted. The timeout is the longest the held bind call allows
/// (8 s: the call is held from the seat, about a second after creation, until the expiry, so
/// 8 s leaves 1 s of the 9 s bind wait). That leaves about 7 s after admission for the rival's
/// filter calls and muster's Event (one scheduling cycle each, well under a second on an idle
/// machine): 2 s more than a 6 s timeout left, for a loaded 2-core machine.
#[tokio::test]
async fn gang_timeout_releases_seats_to_a_rival_and_backs_off() -> Result<()> {
    const TIMEOUT: Duration = Duration::from_secs(8);
    let _t = Timer(
        "gang_timeout_releases_seats_to_a_rival_and_backs_off",
        Instant::now(),
    );
    // With every pod through muster: seats held below quorum while members are still being
    // created, until the gang's timeout, are that mode's (the shipped mode holds nothing until
    // every member its quorum needs exists).
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).every_pod().muster_args([
        "--gang-timeout",
        "8s",
        "--gang-backoff",
        "10s",
        "--bind-wait",
        "9s",
        // Room for the members not created yet is held until the timeout, which is what this
        // test observes (the default 5 s window would release it first).
        "--creation-window",
        "60s",
    ]))
    .await?;
    let ns = "expiry";
    let r = async {
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("300m")).await?; // room for 3 × 100m
        let slow = pod_names(&["slow-0", "slow-1", "slow-2"]);
        let created = Instant::now();
        c.create(
            muster_harness::PodBuilder::new(ns, "slow-0")
                .cpu("100m")
                .gang(KeyScheme::Muster, "slow", 3),
        )
        .await?;
        let admitted = c
            .wait_gang(
                ns,
                "slow",
                &slow,
                "admitted: slow-0 seated, room held for 2 members not created yet",
                PLACE,
                |g| {
                    g.state == "admitted"
                        && g.state_of("slow-0") == Some("seated")
                        && g.count("held") == 2
                },
            )
            .await?;
        let admitted_seen = Instant::now();
        eprintln!(
            "{:.1}s after creation: {}",
            created.elapsed().as_secs_f64(),
            admitted.describe()
        );
        // The rival wants 2 of the 3 seats slow holds.
        let rival = c
            .create_gang(ns, "rival", 2, 2, KeyScheme::Muster, cpu("100m"))
            .await?;
        let reason = fit_reason(ns, "rival", 0, 2);
        // The seats cannot be released before slow-0 was created + the timeout.
        let earliest_release = created + TIMEOUT;
        c.wait_gang_waiting_whole(
            ns,
            "rival",
            &rival,
            &reason,
            earliest_release.saturating_duration_since(Instant::now()),
        )
        .await?;
        // Stop observing one step before the release can come: a check still running then
        // would see the room released.
        let until_release = earliest_release
            .saturating_duration_since(Instant::now())
            .saturating_sub(timing::LOADED_STEP);
        c.assert_gang_waits_whole_for(ns, "rival", &rival, &reason, until_release)
            .await?;

        let expected = format!(
            "gang {ns}/slow did not reach quorum within 8s: 1/3 members had nodes \
             (1 of 3 members exist); seats released, retrying in 10s"
        );
        c.wait_event_matching(ns, &slow[..1], "GangTimedOut", REASON, |e| {
            e.reason == "GangTimedOut" && e.type_ == "Warning" && e.message == expected
        })
        .await?;
        let bound = c.wait_bound(ns, &rival, PLACE).await?;
        let last = bound.values().map(|(_, t)| *t).max().unwrap();
        let after = last.saturating_duration_since(admitted_seen);
        eprintln!(
            "rival bound {:.1}s after slow was seen admitted: {bound:?}",
            after.as_secs_f64()
        );
        ensure_truth!(spread(&bound) <= TOGETHER, "rival bound apart: {bound:?}");
        // Expiry runs every tick; kube-scheduler retries the rival after at most its longest
        // back-off, and binds it in a cycle. A timeout that was not honoured (default 60s)
        // misses this by far.
        let latest =
            TIMEOUT + timing::MUSTER_TICK + timing::SCHEDULER_MAX_BACKOFF + timing::PROMPTLY;
        ensure!(
            after <= latest,
            "rival bound {after:?} after slow was admitted, timeout {TIMEOUT:?}, at most {latest:?}"
        );
        let g = c
            .muster
            .gang(ns, "slow")
            .await?
            .ok_or_else(|| anyhow::anyhow!("/gangs does not list gang slow"))?;
        ensure!(
            g.state == "backoff"
                && g.seats().is_empty()
                && g.seconds_of_backoff_left.is_some_and(|s| s <= 10),
            "expected backoff with no seats: {}",
            g.describe()
        );
        // While it backs off, the gang's member is refused with the reason.
        c.wait_event_matching(ns, &slow[..1], "refused for its backoff", REASON, |e| {
            e.reason == "FailedScheduling"
                && e.message
                    .contains(&format!("gang {ns}/slow: backing off for "))
        })
        .await?;
        ensure_truth!(c.count_bound(ns, &slow).await? == 0, "slow-0 was bound");
        c.assert_no_overcommit().await
    }
    .await;
    c.report(&[ns], r).await
}
