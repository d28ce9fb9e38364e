//! End-to-end: gangs defined by PodGroup objects — Volcano's (`scheduling.volcano.sh/v1beta1`),
//! scheduler-plugins' (`scheduling.x-k8s.io/v1alpha1`), both from the CRDs in `tests/crds/`,
//! and Kubernetes' own (`scheduling.k8s.io/v1beta1`, API server with `GenericWorkload`,
//! kube-scheduler without it so muster alone gates) — against the real control plane, with muster
//! running as its ServiceAccount with the shipped RBAC (so these also prove it may read them).
//!
//! Each gang's pods carry no quorum of muster's own: only the PodGroup says how many must have
//! nodes (and, for Volcano, how many of each task), and each test is built so that the pods'
//! keys alone would give another answer. Every test puts its gang in question where the stock
//! kube-scheduler alone binds the members that fit; `tests/control-run` requires each to fail
//! without muster. Waiting is polling with deadlines.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use muster_harness::api_proxy::{ApiProxy, Fault, Pattern, Rule};
use muster_harness::pod_groups::{self, PodGroupApi};
use muster_harness::truth::TruthContext;
use muster_harness::{
    bail_truth, ensure_truth, holds_for, muster_view_is_checked, pod_names as names, spread,
    wait_for, Cluster, ClusterOptions, NodeShape, PodBuilder, Progress, Timer, CLUSTER_TRUTH,
    PLACE, REASON, TOGETHER, WINDOW,
};
use muster_harness::{
    k8s, rbac, ControlPlane, ControlPlaneOptions, Muster, MusterOptions, SchedulerOptions,
};

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");
/// The second scheduler of `scheduler-config/muster-second-scheduler.yaml`: Volcano users set
/// their jobs' `schedulerName` to the scheduler that calls muster.
const SECOND_SCHEDULER: &str = "muster-scheduler";

/// muster's verdict for a gang of which at most `fit` of the quorum can have nodes at once
/// (docs/operating.md, "What the messages mean").
fn fit_reason(ns: &str, group: &str, fit: u32, quorum: u32) -> String {
    format!("gang {ns}/{group}: {fit} of {quorum} members fit")
}

/// muster's verdict for a gang whose members name a PodGroup of `api` that does not exist (yet)
/// (docs/design.md, "Where a gang's definition comes from").
fn missing_reason(ns: &str, group: &str, api: PodGroupApi) -> String {
    format!(
        "gang {ns}/{group}: waiting for its {} PodGroup {ns}/{group}, which does not exist (yet); \
         nothing is held until it does",
        api.api_version()
    )
}

/// A pod of a Volcano Job as Volcano's job controller creates it: named `<job>-<task>-<i>`,
/// annotated with its PodGroup (`scheduling.k8s.io/group-name`) and task (`volcano.sh/task-spec`),
/// and scheduled by the scheduler the Job names.
fn volcano_pod(ns: &str, job: &str, pod_group: &str, task: &str, i: u32, cpu: &str) -> PodBuilder {
    PodBuilder::new(ns, &format!("{job}-{task}-{i}"))
        .cpu(cpu)
        .annotation("scheduling.k8s.io/group-name", pod_group)
        .annotation("volcano.sh/job-name", job)
        .annotation("volcano.sh/job-version", "0")
        .annotation("volcano.sh/queue-name", "default")
        .annotation("volcano.sh/task-spec", task)
        .label("volcano.sh/job-name", job)
        .label("volcano.sh/job-namespace", ns)
        .label("volcano.sh/queue-name", "default")
        .scheduler_name(SECOND_SCHEDULER)
}

/// Waits until muster's `/gangs` says gang `ns/group` waits whole — `waiting`, no seats, no
/// member with a node — for a reason `want` accepts, then checks on every poll over [`WINDOW`]
/// that it still does (and that no member is bound). Fails at once if a member is bound.
/// Returns the first such reason.
///
/// `want`, not one exact string: where two verdicts are equally true (with room for one member
/// of a gang needing one of each task, either task is the short one), muster's reason names the
/// one found short for the member it was last asked about.
async fn waits_whole(
    c: &Cluster,
    ns: &str,
    group: &str,
    members: &[String],
    what: &str,
    want: impl Fn(&str) -> bool,
) -> Result<String> {
    let whole = |g: &muster_harness::GangView| {
        g.state == "waiting"
            && g.seats().is_empty()
            && g.members.iter().all(|m| m.node.is_none())
            && g.waiting_reason.as_deref().is_some_and(&want)
    };
    let g = c.wait_gang(ns, group, members, what, REASON, whole).await?;
    holds_for(
        &format!("gang {ns}/{group} to wait whole ({what})"),
        WINDOW,
        || async {
            let bound = c.bound_pods(ns).await?;
            if let Some(m) = members.iter().find(|m| bound.contains_key(*m)) {
                return Ok(Err(format!(
                    "{CLUSTER_TRUTH} {m} was bound to {}",
                    bound[m]
                )));
            }
            if !muster_view_is_checked() {
                return Ok(Ok(()));
            }
            Ok(match c.muster.gang(ns, group).await? {
                Some(g) if whole(&g) => Ok(()),
                Some(g) => Err(format!("muster's /gangs: {}", g.describe())),
                None => Err("muster's /gangs does not list it".into()),
            })
        },
    )
    .await?;
    Ok(g.waiting_reason.unwrap_or_default())
}

/// Waits until all of `members` are bound, within [`TOGETHER`] of each other, and muster says
/// the gang is placed.
async fn placed_whole(c: &Cluster, ns: &str, group: &str, members: &[String]) -> Result<()> {
    let bound = first_bound(c, ns, members, |b| b.len() == members.len()).await?;
    let s = spread(&bound);
    ensure_truth!(
        s <= TOGETHER,
        "members of {ns}/{group} bound {s:?} apart: {bound:?}"
    );
    placed(c, ns, group).await
}

/// muster says gang `ns/group` is placed, and no node is overcommitted.
async fn placed(c: &Cluster, ns: &str, group: &str) -> Result<()> {
    match c.muster.gang(ns, group).await? {
        Some(g) if g.state == "placed" => {}
        Some(g) => bail!("expected placed; muster's /gangs: {}", g.describe()),
        None => bail!("muster's /gangs does not list gang {ns}/{group}"),
    }
    c.assert_no_overcommit().await?;
    Ok(())
}

/// The value of a gauge sample in muster's `/metrics`, e.g. `muster_pod_groups{api="…"}`.
async fn gauge(c: &Cluster, sample: &str) -> Result<Option<f64>> {
    Ok(c.muster.metrics().await?.get(sample).copied())
}

async fn wait_gauge(c: &Cluster, sample: &str, want: f64) -> Result<()> {
    wait_for(&format!("{sample} = {want}"), PLACE, || async {
        Ok(match gauge(c, sample).await? {
            Some(v) if v == want => Progress::Done(()),
            other => Progress::NotYet(format!("{sample} is {other:?}")),
        })
    })
    .await
}

/// `spec_source` of gang `ns/group` in muster's `/gangs`.
async fn spec_source(c: &Cluster, ns: &str, group: &str) -> Result<serde_json::Value> {
    let (code, body) = c.muster.get("/gangs").await?;
    ensure!(code == 200, "GET /gangs: HTTP {code}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body)?;
    v["gangs"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|g| g["namespace"] == ns && g["name"] == group)
        .map(|g| g["spec_source"].clone())
        .ok_or_else(|| anyhow::anyhow!("muster's /gangs does not list {ns}/{group}: {body}"))
}

/// Checks that muster took gang `ns/group`'s spec from its PodGroup of `api` (`kind`
/// `pod-group`), or, with `missing`, that it waits for that PodGroup (`missing-pod-group`).
async fn check_source(
    c: &Cluster,
    ns: &str,
    group: &str,
    api: PodGroupApi,
    missing: bool,
) -> Result<()> {
    let kind = if missing {
        "missing-pod-group"
    } else {
        "pod-group"
    };
    let want = serde_json::json!({
        "kind": kind,
        "api_version": api.api_version(),
        "name": format!("{ns}/{group}"),
    });
    let got = spec_source(c, ns, group).await?;
    ensure!(
        got == want,
        "gang {ns}/{group}: spec_source {got}, expected {want}"
    );
    Ok(())
}

fn served(api: PodGroupApi) -> String {
    format!(
        "muster_pod_group_api_served{{api=\"{}\"}}",
        api.api_version()
    )
}

fn known(api: PodGroupApi) -> String {
    format!("muster_pod_groups{{api=\"{}\"}}", api.api_version())
}

// -------------------------------------------------------------------------------------------

/// A cluster with Volcano's PodGroup CRD, and the second scheduler (`schedulerName` on the
/// pods, as Volcano jobs set it) calling muster.
async fn volcano_cluster() -> Result<Cluster> {
    Cluster::start_with(
        ClusterOptions::new(MUSTER)
            .scheduler_config("muster-second-scheduler.yaml")
            .crd(pod_groups::VOLCANO_CRD),
    )
    .await
}

/// The seed tutorial's job as Volcano's controller creates it: PodGroup `ai-gang-job-<uid>`
/// (`minMember: 2`, `minTaskMember {master: 1, worker: 1}`) and a master and a worker naming it,
/// with `schedulerName` set to the scheduler that calls muster. With room for one member the
/// job waits whole; a second node → both bound together.
#[tokio::test]
async fn volcano_seed_job_waits_whole_with_room_for_one_then_is_placed_whole() -> Result<()> {
    let _t = Timer(
        "volcano_seed_job_waits_whole_with_room_for_one_then_is_placed_whole",
        Instant::now(),
    );
    let c = volcano_cluster().await?;
    let r = async {
        let ns = "ml";
        let pg = "ai-gang-job-6d1f3c0a-8b2e-4f5d-9a7c-1e2b3c4d5e6f";
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("150m")).await?; // room for one 100m member
        wait_gauge(&c, &served(PodGroupApi::Volcano), 1.0).await?;
        pod_groups::create(
            &c.client(),
            PodGroupApi::Volcano,
            pod_groups::volcano(ns, pg, 2, &[("master", 1), ("worker", 1)]),
        )
        .await?;
        wait_gauge(&c, &known(PodGroupApi::Volcano), 1.0).await?;
        let members = names(&["ai-gang-job-master-0", "ai-gang-job-worker-0"]);
        for task in ["master", "worker"] {
            c.create(volcano_pod(ns, "ai-gang-job", pg, task, 0, "100m"))
                .await?;
        }
        // Room for one: whichever task it goes to in the simulation, the other task is short.
        let short = |task: &str| {
            format!("gang {ns}/{pg}: task {task}: 0 of 1 members fit; 1 of 2 members fit")
        };
        let (master, worker) = (short("master"), short("worker"));
        waits_whole(
            &c,
            ns,
            pg,
            &members,
            "1 of 2 members fit, one task short",
            |r| r == master || r == worker,
        )
        .await?;
        check_source(&c, ns, pg, PodGroupApi::Volcano, false).await?;
        c.add_node("node-2", NodeShape::cpu("150m")).await?;
        placed_whole(&c, ns, pg, &members).await
    }
    .await;
    c.report(&["ml"], r).await
}

/// A scheduler-plugins PodGroup (`minMember: 3`) for 4 pods labelled
/// `scheduling.x-k8s.io/pod-group`, as the Kubeflow training operator writes them. Room for 2:
/// the gang waits whole ("2 of 3", the PodGroup's quorum, not the 4 pods'), also across a muster
/// restart; room for a third → 3 members bound together.
#[tokio::test]
async fn scheduler_plugins_pod_group_gang_waits_whole_then_its_quorum_is_placed() -> Result<()> {
    let _t = Timer(
        "scheduler_plugins_pod_group_gang_waits_whole_then_its_quorum_is_placed",
        Instant::now(),
    );
    let mut c =
        Cluster::start_with(ClusterOptions::new(MUSTER).crd(pod_groups::SCHEDULER_PLUGINS_CRD))
            .await?;
    let r = async {
        let ns = "kubeflow";
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("250m")).await?; // room for 2
        wait_gauge(&c, &served(PodGroupApi::SchedulerPlugins), 1.0).await?;
        pod_groups::create(
            &c.client(),
            PodGroupApi::SchedulerPlugins,
            pod_groups::scheduler_plugins(ns, "pytorch", 3, 60),
        )
        .await?;
        wait_gauge(&c, &known(PodGroupApi::SchedulerPlugins), 1.0).await?;
        let members = names(&["pytorch-0", "pytorch-1", "pytorch-2", "pytorch-3"]);
        for n in &members {
            c.create(
                PodBuilder::new(ns, n)
                    .cpu("100m")
                    .label("scheduling.x-k8s.io/pod-group", "pytorch"),
            )
            .await?;
        }
        let reason = fit_reason(ns, "pytorch", 2, 3);
        waits_whole(&c, ns, "pytorch", &members, "2 of 3 members fit", |r| {
            r == reason
        })
        .await?;
        check_source(&c, ns, "pytorch", PodGroupApi::SchedulerPlugins, false).await?;
        // A restarted muster is Ready only once it has listed the PodGroups again: from its
        // first answer on, the gang's spec is the PodGroup's, never its pods' keys alone.
        c.muster.restart().await?;
        check_source(&c, ns, "pytorch", PodGroupApi::SchedulerPlugins, false).await?;
        ensure!(
            c.muster
                .gang(ns, "pytorch")
                .await?
                .is_some_and(|g| g.quorum == 3),
            "after a restart, muster's quorum for kubeflow/pytorch is not its PodGroup's 3"
        );
        c.add_node("node-2", NodeShape::cpu("150m")).await?; // room for a third
        quorum_bound_together(&c, ns, &members, 3).await
    }
    .await;
    c.report(&["kubeflow"], r).await
}

/// A Kubernetes PodGroup (`schedulingPolicy.gang.minCount: 3`) for 4 pods naming it in
/// `spec.schedulingGroup`; kube-scheduler runs without `GenericWorkload`, so only muster gates.
/// Room for 2: waits whole ("2 of 3"); room for a third → 3 bound together.
#[tokio::test]
async fn kubernetes_pod_group_gang_waits_whole_then_its_quorum_is_placed() -> Result<()> {
    let _t = Timer(
        "kubernetes_pod_group_gang_waits_whole_then_its_quorum_is_placed",
        Instant::now(),
    );
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).kubernetes_pod_groups()).await?;
    let r = async {
        let ns = "workloads";
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("250m")).await?; // room for 2
        wait_gauge(&c, &served(PodGroupApi::Kubernetes), 1.0).await?;
        pod_groups::create(
            &c.client(),
            PodGroupApi::Kubernetes,
            pod_groups::kubernetes(ns, "trainer", 3),
        )
        .await?;
        wait_gauge(&c, &known(PodGroupApi::Kubernetes), 1.0).await?;
        let members = names(&["trainer-0", "trainer-1", "trainer-2", "trainer-3"]);
        for n in &members {
            let pod = c
                .create(
                    PodBuilder::new(ns, n)
                        .cpu("100m")
                        .scheduling_group("trainer"),
                )
                .await?;
            let kept = pod
                .spec
                .as_ref()
                .and_then(|s| s.scheduling_group.as_ref())
                .and_then(|g| g.pod_group_name.as_deref());
            ensure!(
                kept == Some("trainer"),
                "the API server dropped spec.schedulingGroup of {n} (GenericWorkload off?)"
            );
        }
        let reason = fit_reason(ns, "trainer", 2, 3);
        waits_whole(&c, ns, "trainer", &members, "2 of 3 members fit", |r| {
            r == reason
        })
        .await?;
        check_source(&c, ns, "trainer", PodGroupApi::Kubernetes, false).await?;
        c.add_node("node-2", NodeShape::cpu("150m")).await?; // room for a third
        quorum_bound_together(&c, ns, &members, 3).await
    }
    .await;
    c.report(&["workloads"], r).await
}

/// Polls every 50 ms until the members of `members` bound so far satisfy `enough`; returns
/// each one's node and when it was first seen bound.
async fn first_bound(
    c: &Cluster,
    ns: &str,
    members: &[String],
    enough: impl Fn(&BTreeMap<String, (String, Instant)>) -> bool,
) -> Result<BTreeMap<String, (String, Instant)>> {
    let mut first: BTreeMap<String, (String, Instant)> = BTreeMap::new();
    let deadline = Instant::now() + PLACE;
    loop {
        let bound = c.bound_pods(ns).await?;
        let now = Instant::now();
        for m in members {
            if let Some(node) = bound.get(m) {
                first.entry(m.clone()).or_insert((node.clone(), now));
            }
        }
        if enough(&first) {
            return Ok(first);
        }
        if now >= deadline {
            bail_truth!("timed out after {PLACE:?} waiting for members of {members:?} to be bound; bound: {first:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `quorum` of `members` are bound, within [`TOGETHER`] of each other (times as first
/// seen on 50 ms polls), then checks no more are bound over [`WINDOW`] (there is room for no
/// more) and no node is overcommitted.
async fn quorum_bound_together(
    c: &Cluster,
    ns: &str,
    members: &[String],
    quorum: usize,
) -> Result<()> {
    let first = first_bound(c, ns, members, |b| b.len() >= quorum).await?;
    let s = spread(&first);
    ensure_truth!(s <= TOGETHER, "quorum bound {s:?} apart: {first:?}");
    holds_for(
        &format!("exactly {quorum} members bound, no overcommit"),
        WINDOW,
        || async {
            let n = c.count_bound(ns, members).await?;
            if n != quorum {
                return Ok(Err(format!("{CLUSTER_TRUTH} {n} members bound")));
            }
            c.check_no_overcommit().await
        },
    )
    .await
}

/// Volcano's per-task minimum: 1 master + 3 workers, `minMember: 3`,
/// `minTaskMember {master: 1, worker: 2}`. Room for the 3 workers but not the master: the total
/// would be met by workers alone, yet nothing is bound. Room for the master → placed.
#[tokio::test]
async fn a_per_task_minimum_keeps_the_gang_waiting_until_its_master_fits() -> Result<()> {
    let _t = Timer(
        "a_per_task_minimum_keeps_the_gang_waiting_until_its_master_fits",
        Instant::now(),
    );
    let c = volcano_cluster().await?;
    let r = async {
        let ns = "tasks";
        let pg = "mpi-job-0b9e2f4a";
        c.namespace(ns).await?;
        // 3 workers of 100m fit; the 500m master does not.
        c.add_node("node-1", NodeShape::cpu("350m")).await?;
        wait_gauge(&c, &served(PodGroupApi::Volcano), 1.0).await?;
        pod_groups::create(
            &c.client(),
            PodGroupApi::Volcano,
            pod_groups::volcano(ns, pg, 3, &[("master", 1), ("worker", 2)]),
        )
        .await?;
        wait_gauge(&c, &known(PodGroupApi::Volcano), 1.0).await?;
        c.create(volcano_pod(ns, "mpi-job", pg, "master", 0, "500m"))
            .await?;
        for i in 0..3 {
            c.create(volcano_pod(ns, "mpi-job", pg, "worker", i, "100m"))
                .await?;
        }
        let members = names(&[
            "mpi-job-master-0",
            "mpi-job-worker-0",
            "mpi-job-worker-1",
            "mpi-job-worker-2",
        ]);
        // The total would be met by workers alone: the reason is the master task's minimum.
        let short = format!("gang {ns}/{pg}: task master: 0 of 1 members fit; ");
        let reason = waits_whole(
            &c,
            ns,
            pg,
            &members,
            "the master task's minimum unmet",
            |r| r.starts_with(&short),
        )
        .await?;
        eprintln!("per-task wait: {reason}");
        check_source(&c, ns, pg, PodGroupApi::Volcano, false).await?;
        c.add_node("node-2", NodeShape::cpu("600m")).await?; // room for the master
                                                             // The quorum (the master and two workers) together; the third worker is a member beyond
                                                             // the quorum of a placed gang, bound as soon as kube-scheduler tries it.
        let first = first_bound(&c, ns, &members, |b| {
            b.contains_key("mpi-job-master-0") && b.len() >= 3
        })
        .await?;
        let s = spread(&first);
        ensure_truth!(s <= TOGETHER, "quorum bound {s:?} apart: {first:?}");
        c.wait_bound(ns, &members, PLACE).await?;
        placed(&c, ns, pg).await
    }
    .await;
    c.report(&["tasks"], r).await
}

/// Pods naming a Volcano PodGroup that does not exist yet (its controller creates it a moment
/// later): they wait, whole, with a message naming the PodGroup, though there is room for all;
/// once it is created (`minMember: 2`) the gang is placed.
#[tokio::test]
async fn a_pod_group_created_after_its_pods_is_waited_for_then_followed() -> Result<()> {
    let _t = Timer(
        "a_pod_group_created_after_its_pods_is_waited_for_then_followed",
        Instant::now(),
    );
    let c = volcano_cluster().await?;
    let r = async {
        let ns = "late";
        let pg = "late-job-3c4d";
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("1")).await?; // room for everything
        wait_gauge(&c, &served(PodGroupApi::Volcano), 1.0).await?;
        let members = names(&["late-job-master-0", "late-job-worker-0"]);
        for task in ["master", "worker"] {
            c.create(volcano_pod(ns, "late-job", pg, task, 0, "100m"))
                .await?;
        }
        let missing = missing_reason(ns, pg, PodGroupApi::Volcano);
        waits_whole(&c, ns, pg, &members, "a message naming the PodGroup", |r| {
            r == missing
        })
        .await?;
        check_source(&c, ns, pg, PodGroupApi::Volcano, true).await?;
        pod_groups::create(
            &c.client(),
            PodGroupApi::Volcano,
            pod_groups::volcano(ns, pg, 2, &[("master", 1), ("worker", 1)]),
        )
        .await?;
        placed_whole(&c, ns, pg, &members).await
    }
    .await;
    c.report(&["late"], r).await
}

/// A scheduler-plugins PodGroup deleted while its gang waits (room for 2 of its 3): the gang
/// keeps waiting whole, holding nothing, now for its missing PodGroup (as for one never created:
/// docs/design.md, "Where a gang's definition comes from"), even once there is room for all;
/// created again, the gang is placed.
#[tokio::test]
async fn a_pod_group_deleted_while_its_gang_waits_leaves_it_waiting_for_the_pod_group() -> Result<()>
{
    let _t = Timer(
        "a_pod_group_deleted_while_its_gang_waits_leaves_it_waiting_for_the_pod_group",
        Instant::now(),
    );
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).crd(pod_groups::SCHEDULER_PLUGINS_CRD))
        .await?;
    let r = async {
        let ns = "gone";
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("250m")).await?; // room for 2
        wait_gauge(&c, &served(PodGroupApi::SchedulerPlugins), 1.0).await?;
        let api = PodGroupApi::SchedulerPlugins;
        pod_groups::create(
            &c.client(),
            api,
            pod_groups::scheduler_plugins(ns, "job", 3, 60),
        )
        .await?;
        wait_gauge(&c, &known(api), 1.0).await?;
        let members = names(&["job-0", "job-1", "job-2"]);
        for n in &members {
            c.create(
                PodBuilder::new(ns, n)
                    .cpu("100m")
                    .label("scheduling.x-k8s.io/pod-group", "job"),
            )
            .await?;
        }
        let fit = fit_reason(ns, "job", 2, 3);
        waits_whole(&c, ns, "job", &members, "2 of 3 members fit", |r| r == fit).await?;
        pod_groups::delete(&c.client(), api, ns, "job").await?;
        wait_gauge(&c, &known(api), 0.0).await?;
        c.add_node("node-2", NodeShape::cpu("250m")).await?; // room for all now
        let missing = missing_reason(ns, "job", api);
        waits_whole(
            &c,
            ns,
            "job",
            &members,
            "a message naming the PodGroup",
            |r| r == missing,
        )
        .await?;
        check_source(&c, ns, "job", api, true).await?;
        pod_groups::create(
            &c.client(),
            api,
            pod_groups::scheduler_plugins(ns, "job", 3, 60),
        )
        .await?;
        placed_whole(&c, ns, "job", &members).await
    }
    .await;
    c.report(&["gone"], r).await
}

/// The scheduler-plugins CRD installed while muster runs (discovery every second here): muster
/// starts watching it, and a gang of its PodGroup (`minMember: 3`, 4 pods, room for 2) waits
/// whole for the PodGroup's quorum, then 3 are bound together once a third fits.
#[tokio::test]
async fn a_crd_installed_while_muster_runs_is_picked_up() -> Result<()> {
    let _t = Timer(
        "a_crd_installed_while_muster_runs_is_picked_up",
        Instant::now(),
    );
    let c = Cluster::start_with(
        ClusterOptions::new(MUSTER).muster_args(["--pod-group-discovery-interval", "1s"]),
    )
    .await?;
    let r = async {
        let ns = "later";
        let api = PodGroupApi::SchedulerPlugins;
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("250m")).await?; // room for 2
                                                             // muster is Ready without any PodGroup API, and says none is served.
        for other in [
            PodGroupApi::Volcano,
            PodGroupApi::SchedulerPlugins,
            PodGroupApi::Kubernetes,
        ] {
            ensure!(
                gauge(&c, &served(other)).await? == Some(0.0),
                "{} should not be served yet",
                other.api_version()
            );
        }
        pod_groups::install_crd(&c.client(), pod_groups::SCHEDULER_PLUGINS_CRD).await?;
        wait_gauge(&c, &served(api), 1.0).await?;
        pod_groups::create(
            &c.client(),
            api,
            pod_groups::scheduler_plugins(ns, "late-crd", 3, 60),
        )
        .await?;
        wait_gauge(&c, &known(api), 1.0).await?;
        let members = names(&["late-crd-0", "late-crd-1", "late-crd-2", "late-crd-3"]);
        for n in &members {
            c.create(
                PodBuilder::new(ns, n)
                    .cpu("100m")
                    .label("scheduling.x-k8s.io/pod-group", "late-crd"),
            )
            .await?;
        }
        let reason = fit_reason(ns, "late-crd", 2, 3);
        waits_whole(&c, ns, "late-crd", &members, "2 of 3 members fit", |r| {
            r == reason
        })
        .await?;
        check_source(&c, ns, "late-crd", api, false).await?;
        c.add_node("node-2", NodeShape::cpu("150m")).await?;
        quorum_bound_together(&c, ns, &members, 3).await
    }
    .await;
    c.report(&["later"], r).await
}

/// A gang whose Volcano PodGroup does not exist holds nothing (holds-nothing), shown by the
/// cluster, not only by muster's word: two members of 500m on one 1-CPU node wait whole for
/// their PodGroup, and a plain pod that needs the whole node is bound — a seat held for either
/// member would leave it no room for as long as the PodGroup is missing. With the plain
/// pod gone and the PodGroup created, the gang is placed whole. The second scheduler alone
/// binds both members at once.
#[tokio::test]
async fn a_gang_waiting_for_its_missing_pod_group_leaves_its_room_to_a_plain_pod() -> Result<()> {
    let _t = Timer(
        "a_gang_waiting_for_its_missing_pod_group_leaves_its_room_to_a_plain_pod",
        Instant::now(),
    );
    let c = volcano_cluster().await?;
    let r = async {
        let ns = "absent";
        let pg = "absent-job-9f1e";
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("1")).await?; // room for both members
        wait_gauge(&c, &served(PodGroupApi::Volcano), 1.0).await?;
        let members = names(&["absent-job-master-0", "absent-job-worker-0"]);
        for task in ["master", "worker"] {
            c.create(volcano_pod(ns, "absent-job", pg, task, 0, "500m"))
                .await?;
        }
        let missing = missing_reason(ns, pg, PodGroupApi::Volcano);
        waits_whole(&c, ns, pg, &members, "a message naming the PodGroup", |r| {
            r == missing
        })
        .await?;
        let plain = muster_harness::pod_names(&["plain"]);
        c.create(
            PodBuilder::new(ns, "plain")
                .cpu("1")
                .scheduler_name(SECOND_SCHEDULER),
        )
        .await?;
        c.wait_bound(ns, &plain, PLACE).await?;
        ensure_truth!(
            c.count_bound(ns, &members).await? == 0,
            "a member of the gang without its PodGroup was bound"
        );
        c.delete_pod(ns, "plain").await?;
        pod_groups::create(
            &c.client(),
            PodGroupApi::Volcano,
            pod_groups::volcano(ns, pg, 2, &[("master", 1), ("worker", 1)]),
        )
        .await?;
        placed_whole(&c, ns, pg, &members).await
    }
    .await;
    c.report(&["absent"], r).await
}

/// The Volcano PodGroup API flaps: the API server answers 404 for it (as one that has just
/// restarted and not loaded its CRDs yet does), long enough for muster's discovery to stop its
/// watch. The gang keeps its PodGroup's `minMember: 3`: two members whose keys alone would make
/// a gang of two (no quorum key: every member that exists) are not bound; once the third
/// exists (and the API answers again) the three are bound together. muster reaches the API
/// server through the faulting proxy, as its ServiceAccount.
#[tokio::test]
async fn a_gang_keeps_its_pod_groups_quorum_while_the_pod_group_api_answers_404() -> Result<()> {
    let _t = Timer(
        "a_gang_keeps_its_pod_groups_quorum_while_the_pod_group_api_answers_404",
        Instant::now(),
    );
    let mut cp = ControlPlane::start(ControlPlaneOptions::default()).await?;
    let client = cp.client();
    pod_groups::install_crd(&client, pod_groups::VOLCANO_CRD).await?;
    // The shipped install: gang members marked and gated by the policy of deploy/.
    muster_harness::policy::install_unless_control_run(&client).await?;
    let sa = rbac::service_account_kubeconfig(&client, cp.kubeconfig_path(), cp.dir(), 24).await?;
    let proxy = ApiProxy::start(&sa).await?;
    let kubeconfig = proxy.kubeconfig(cp.dir(), "muster-kubeconfig-through-proxy")?;
    let mut mo = MusterOptions::new(MUSTER, &kubeconfig, cp.dir());
    // A creation window of 2 s (the default is 5 s): past it a gang of every member that exists
    // is decided, which the hold below waits out.
    let creation_window = Duration::from_secs(2);
    mo.args = [
        "--pod-group-discovery-interval".into(),
        "1s".into(),
        "--creation-window".into(),
        format!("{}s", creation_window.as_secs()),
    ]
    .to_vec();
    let muster = Muster::start(mo).await?;
    cp.start_scheduler(SchedulerOptions {
        extender_base_url: Some(muster.url()),
        without_extenders: muster_harness::control_run_requested(),
        ..SchedulerOptions::default()
    })
    .await?;
    let ns = "flap";
    let member = |i: u32| {
        PodBuilder::new(ns, &format!("job-worker-{i}"))
            .cpu("100m")
            .annotation("scheduling.k8s.io/group-name", "job")
            .annotation("volcano.sh/task-spec", "worker")
    };
    let sample = |name: String| {
        let muster = &muster;
        async move {
            wait_for(&format!("{name} on muster"), PLACE, || async {
                Ok(match muster.metrics().await?.get(&name).copied() {
                    Some(v) => Progress::Done(v),
                    None => Progress::NotYet(format!("{name} absent")),
                })
            })
            .await
        }
    };
    let r = async {
        k8s::create_namespace(&client, ns).await?;
        k8s::add_node(&client, "node-0", &NodeShape::cpu("2")).await?;
        pod_groups::create(
            &client,
            PodGroupApi::Volcano,
            pod_groups::volcano(ns, "job", 3, &[]),
        )
        .await?;
        wait_for("muster to read the PodGroup", PLACE, || async {
            let known = sample(known(PodGroupApi::Volcano)).await?;
            Ok(if known == 1.0 {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("{known} PodGroups known"))
            })
        })
        .await?;
        let flap = proxy.add(Rule {
            pattern: Pattern {
                method: "GET",
                path_contains: vec!["/apis/scheduling.volcano.sh/v1beta1".into()],
            },
            fault: Fault::Status {
                code: 404,
                retry_after: None,
            },
            times: None,
        });
        wait_for("muster to stop watching the API", PLACE, || async {
            let served = sample(served(PodGroupApi::Volcano)).await?;
            Ok(if served == 0.0 {
                Progress::Done(())
            } else {
                Progress::NotYet(format!(
                    "served {served}, {} requests answered 404",
                    proxy.seen(flap)
                ))
            })
        })
        .await?;
        for i in 0..2 {
            member(i).create(&client).await?;
        }
        // Past the creation window, when a gang of every member that exists is decided, by an
        // observation window.
        holds_for(
            "no member bound: the PodGroup asks for 3",
            creation_window + WINDOW,
            || async {
                let bound = k8s::bound_pods(&client, ns).await?;
                Ok(if bound.is_empty() {
                    Ok(())
                } else {
                    Err(format!("bound: {bound:?}"))
                })
            },
        )
        .await
        .truth()?;
        proxy.clear();
        member(2).create(&client).await?;
        let all = names(&["job-worker-0", "job-worker-1", "job-worker-2"]);
        wait_for("the three bound", PLACE, || async {
            let bound = k8s::bound_pods(&client, ns).await?;
            Ok(if all.iter().all(|n| bound.contains_key(n)) {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("bound: {bound:?}"))
            })
        })
        .await
        .truth()?;
        Ok(())
    }
    .await;
    if r.is_err() {
        let pods = k8s::list_pods(&client, ns).await.unwrap_or_default();
        eprintln!(
            "pods:\n{}\nmuster:\n{}",
            k8s::describe_pods(&pods),
            muster.log_tail(40)
        );
    }
    r
}
