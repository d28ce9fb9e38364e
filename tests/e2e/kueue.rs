//! End-to-end: gangs as Kueue admits them, on a cluster with the controllers a real one has and
//! Kueue's own controller manager and webhooks (`ClusterOptions::with_kueue`:
//! kube-controller-manager, KWOK playing the kubelets, Kueue v0.17.0 as a local process with its
//! pod integration; tests/harness/src/kueue.rs). muster is installed as `kubectl apply -k deploy/`
//! installs it. A gang is a Kueue *plain pod group*: 4 pods labelled
//! `kueue.x-k8s.io/pod-group-name: train` and `kueue.x-k8s.io/queue-name: user-queue`, annotated
//! `kueue.x-k8s.io/pod-group-total-count: "4"`, in a namespace Kueue manages, with a ClusterQueue
//! (`namespaceSelector: {}`, a CPU quota) and a LocalQueue. Each pod is created behind two
//! components' gates: Kueue's `kueue.x-k8s.io/admission` (with `kueue.x-k8s.io/topology`), which
//! Kueue removes once the group's Workload is admitted by quota, and muster's `muster.dev/gather`,
//! which muster removes once the whole group fits.
//!
//! 1. Within quota, on room for 3 of the 4 pods: Kueue admits the Workload and removes its
//!    gates; muster keeps its own, so nothing is bound on any poll of a window; a node added,
//!    the 4 are bound together (never part of them on any poll) and run.
//!
//! 2. Over the ClusterQueue's quota (300m for 4 × 100m): Kueue never admits, nothing is bound on
//!    any poll of a window, and muster holds nothing for the group: another gang of 4 (muster's
//!    own keys, not Kueue's) is placed meanwhile on the 7 pods' room, which it could not be if 4
//!    seats were held. The quota raised, Kueue admits and removes its gates with room for 3 of 4
//!    left: nothing is bound on any poll of a window; the other gang deleted, the 4 are bound
//!    together and run.
//!
//! Without muster (`tests/control-run`) Kueue still admits and removes its gates, and
//! kube-scheduler binds the pods that fit at once, so each test fails there on a cluster-truth
//! check: the first binds 3 of 4 once Kueue admits, the second 3 of 4 once the quota is raised.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{ensure, Result};
use k8s_openapi::api::core::v1::Pod;
use muster_harness::kueue::{self, ADMISSION_GATE, QUEUE_NAME, TOPOLOGY_GATE};
use muster_harness::policy::GATHER_GATE;
use muster_harness::timing::FAN_OUT;
use muster_harness::{
    holds_for, k8s, muster_view_is_checked, names, wait_for, Cluster, ClusterOptions, KeyScheme,
    NodeShape, PodBuilder, Progress, Timer, CLUSTER_TRUTH, PLACE, REASON, WINDOW,
};

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");

/// The pods of the group.
const MEMBERS: u32 = 4;

/// The group's name (and its Workload's: Kueue names a pod group's Workload after the group).
const GROUP: &str = "train";

const CLUSTER_QUEUE: &str = "cluster-queue";
const LOCAL_QUEUE: &str = "user-queue";

fn phase(p: &Pod) -> Option<&str> {
    p.status.as_ref().and_then(|s| s.phase.as_deref())
}

fn scheduled_reason(p: &Pod) -> Option<&str> {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
        .and_then(|c| c.reason.as_deref())
}

/// A Kueue plain pod group of [`MEMBERS`] pods of 100m CPU in `ns`, named `train-0..`, watched
/// for the gang's invariant across polls: some but fewer than all of its pods bound for longer
/// than [`FAN_OUT`] is a partial gang (cluster truth).
struct Group<'a> {
    c: &'a Cluster,
    ns: &'a str,
    members: Vec<String>,
    partial_since: Cell<Option<Instant>>,
}

impl<'a> Group<'a> {
    /// Creates the group's pods as a Kueue user writes them (group name, total count, queue).
    /// Each comes back from the API server behind Kueue's gate and, when muster gathers,
    /// muster's: the two admission steps composed at creation.
    async fn create(c: &'a Cluster, ns: &'a str) -> Result<Self> {
        let members = names(GROUP, MEMBERS);
        for m in &members {
            let p = c
                .create(
                    PodBuilder::new(ns, m)
                        .cpu("100m")
                        .gang(KeyScheme::Kueue, GROUP, MEMBERS)
                        .label(QUEUE_NAME, LOCAL_QUEUE),
                )
                .await?;
            let gates = kueue::gates(&p);
            ensure!(
                gates.contains(&ADMISSION_GATE),
                "{m} was created without Kueue's gate {ADMISSION_GATE}: gates {gates:?}"
            );
            ensure!(
                !c.gathers() || gates.contains(&GATHER_GATE),
                "{m} was created without muster's gate {GATHER_GATE}: gates {gates:?}"
            );
            eprintln!("{m} created behind {gates:?}");
        }
        Ok(Self {
            c,
            ns,
            members,
            partial_since: Cell::new(None),
        })
    }

    /// The group's pods, by name.
    async fn pods(&self) -> Result<BTreeMap<String, Pod>> {
        Ok(self
            .c
            .pods(self.ns)
            .await?
            .into_iter()
            .filter(|p| self.members.iter().any(|m| m == k8s::pod_name(p)))
            .map(|p| (k8s::pod_name(&p).to_string(), p))
            .collect())
    }

    fn bound(pods: &BTreeMap<String, Pod>) -> Vec<String> {
        pods.iter()
            .filter_map(|(n, p)| k8s::pod_node(p).map(|node| format!("{n} → {node}")))
            .collect()
    }

    /// One poll: the pods, or the cluster truth broken (a partial gang for longer than
    /// [`FAN_OUT`], an over-committed node).
    async fn check(&self) -> Result<BTreeMap<String, Pod>> {
        let pods = self.pods().await?;
        let bound = Self::bound(&pods);
        if bound.is_empty() || bound.len() >= self.members.len() {
            self.partial_since.set(None);
        } else {
            let since = self.partial_since.get().unwrap_or_else(Instant::now);
            self.partial_since.set(Some(since));
            if since.elapsed() >= FAN_OUT {
                anyhow::bail!(
                    "{CLUSTER_TRUTH} partial gang: pod group {}/{GROUP}: {} of {} bound for \
                     {:.1}s: {}",
                    self.ns,
                    bound.len(),
                    self.members.len(),
                    since.elapsed().as_secs_f64(),
                    bound.join(", ")
                );
            }
        }
        if let Err(e) = self.c.check_no_overcommit().await? {
            anyhow::bail!("{e}");
        }
        Ok(pods)
    }

    /// On every poll of [`WINDOW`]: none of the pods bound (cluster truth), and, with
    /// `kueue_gated`, each still behind Kueue's gate (Kueue has not admitted the group).
    async fn holds_none_bound(&self, why: &str, kueue_gated: bool) -> Result<()> {
        holds_for(
            &format!("no pod of group {}/{GROUP} bound ({why})", self.ns),
            WINDOW,
            || async {
                let pods = self.pods().await?;
                let bound = Self::bound(&pods);
                if !bound.is_empty() {
                    return Ok(Err(format!(
                        "{CLUSTER_TRUTH} pod group {}/{GROUP} partly bound: {}",
                        self.ns,
                        bound.join(", ")
                    )));
                }
                let admitted: Vec<&String> = pods
                    .iter()
                    .filter(|(_, p)| !kueue::gates(p).contains(&ADMISSION_GATE))
                    .map(|(n, _)| n)
                    .collect();
                Ok(if kueue_gated && !admitted.is_empty() {
                    Err(format!("Kueue removed its gate from {admitted:?}"))
                } else {
                    Ok(())
                })
            },
        )
        .await
    }

    /// Waits until Kueue has admitted the group's Workload and removed its gates from every pod;
    /// fails at once on a partial gang. Prints the Workload's admission.
    async fn wait_admitted_by_kueue(&self) -> Result<()> {
        let workloads = kueue::workloads(&self.c.client(), self.ns);
        wait_for(
            &format!(
                "Kueue to admit pod group {}/{GROUP} and remove its gates",
                self.ns
            ),
            PLACE,
            || async {
                let pods = self.check().await?;
                let still: Vec<String> = pods
                    .iter()
                    .filter(|(_, p)| {
                        let g = kueue::gates(p);
                        g.contains(&ADMISSION_GATE) || g.contains(&TOPOLOGY_GATE)
                    })
                    .map(|(n, _)| n.clone())
                    .collect();
                let admitted = match workloads.get_opt(GROUP).await? {
                    Some(wl) => kueue::condition(&wl, "Admitted"),
                    None => None,
                };
                Ok(
                    if admitted.as_ref().is_some_and(|(s, _, _)| s == "True")
                        && still.is_empty()
                        && pods.len() == self.members.len()
                    {
                        Progress::Done(())
                    } else {
                        Progress::NotYet(format!(
                            "Workload Admitted {admitted:?}; Kueue's gates still on {still:?}"
                        ))
                    },
                )
            },
        )
        .await?;
        let wl = workloads.get(GROUP).await?;
        eprintln!(
            "Workload {}/{GROUP} admitted: {}",
            self.ns, wl.data["status"]["admission"]
        );
        Ok(())
    }

    /// Each pod is behind muster's gate alone (Kueue's are gone) and the API server reports it
    /// `PodScheduled=False/SchedulingGated` (`kubectl get pods`: `SchedulingGated`).
    async fn ensure_behind_musters_gate_alone(&self) -> Result<()> {
        for (name, p) in self.pods().await? {
            let gates = kueue::gates(&p);
            ensure!(
                gates == [GATHER_GATE],
                "{name}: gates {gates:?}, expected muster's {GATHER_GATE} alone"
            );
            let reason = scheduled_reason(&p);
            ensure!(
                reason == Some("SchedulingGated"),
                "{name}: PodScheduled reason {reason:?}, expected SchedulingGated"
            );
        }
        Ok(())
    }

    /// Prints what a user sees on the pods while the group waits (Events, gates).
    async fn log_what_users_see(&self, when: &str) -> Result<()> {
        for (name, p) in self.pods().await? {
            eprintln!("{when}: {name} gates {:?}", kueue::gates(&p));
            for e in self.c.events_for(self.ns, &name).await? {
                eprintln!("{when}: event on {name}: {e}");
            }
        }
        Ok(())
    }

    /// Waits until all the pods are bound and Running; fails at the first partial gang.
    /// Returns how far apart their bindings were seen.
    async fn wait_running_whole(&self) -> Result<f64> {
        let first_bound: Cell<Option<Instant>> = Cell::new(None);
        let all_bound: Cell<Option<Instant>> = Cell::new(None);
        wait_for(
            &format!("pod group {}/{GROUP}: {MEMBERS} pods running", self.ns),
            PLACE,
            || async {
                let pods = self.check().await?;
                let bound = pods.values().filter(|p| k8s::pod_node(p).is_some()).count();
                if bound > 0 && first_bound.get().is_none() {
                    first_bound.set(Some(Instant::now()));
                }
                if bound == self.members.len() && all_bound.get().is_none() {
                    all_bound.set(Some(Instant::now()));
                }
                let running = pods
                    .values()
                    .filter(|p| phase(p) == Some("Running"))
                    .count();
                Ok(if running == self.members.len() {
                    Progress::Done(())
                } else {
                    Progress::NotYet(format!("{bound} bound, {running} running"))
                })
            },
        )
        .await?;
        Ok(match (first_bound.get(), all_bound.get()) {
            (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
            _ => 0.0,
        })
    }
}

/// Case 1: a Kueue pod group of 4 within quota on room for 3: Kueue admits it and removes its
/// gates, muster keeps its own, so nothing is bound on every poll of a window; a second node
/// makes room and the 4 pods are bound whole (never part of them on any poll) and run.
#[tokio::test]
async fn a_kueue_pod_group_admitted_by_quota_waits_behind_musters_gate_and_is_placed_whole(
) -> Result<()> {
    let _t = Timer(
        "a_kueue_pod_group_admitted_by_quota_waits_behind_musters_gate_and_is_placed_whole",
        Instant::now(),
    );
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).with_kueue()).await?;
    let ns = "kueue-groups";
    let r = async {
        let client = c.client();
        kueue::managed_namespace(&client, ns).await?;
        c.add_node("node-1", NodeShape::cpu("350m")).await?; // room for 3 × 100m
        kueue::create_queues(&client, ns, CLUSTER_QUEUE, LOCAL_QUEUE, "1").await?; // 10 × 100m
        let group = Group::create(&c, ns).await?;

        group.wait_admitted_by_kueue().await?;
        group
            .holds_none_bound("admitted by Kueue, room for 3 of 4", false)
            .await?;
        group.ensure_behind_musters_gate_alone().await?;
        group.log_what_users_see("while it waits").await?;

        let t0 = Instant::now();
        c.add_node("node-2", NodeShape::cpu("350m")).await?;
        let spread = group.wait_running_whole().await?;
        eprintln!(
            "placed whole and running {:.1}s after node-2 (bindings seen {spread:.2}s apart)",
            t0.elapsed().as_secs_f64()
        );
        c.assert_no_overcommit().await
    }
    .await;
    c.report(&[ns], r).await
}

/// Case 2: a Kueue pod group of 4 over its ClusterQueue's quota (300m of CPU for 4 × 100m) is
/// never admitted: nothing bound and every pod behind Kueue's gate on every poll of a window.
/// muster holds nothing for it: another gang of 4 (muster's keys) is placed whole meanwhile on
/// room for 7. The quota raised to 1 CPU, Kueue admits the group and removes its gates with room
/// for 3 of its 4 pods left: nothing bound on any poll of a window; the other gang deleted, the
/// group is bound whole (never part of it on any poll) and runs.
#[tokio::test]
async fn a_kueue_pod_group_over_quota_is_never_admitted_holds_nothing_and_is_placed_whole_later(
) -> Result<()> {
    let _t = Timer(
        "a_kueue_pod_group_over_quota_is_never_admitted_holds_nothing_and_is_placed_whole_later",
        Instant::now(),
    );
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).with_kueue()).await?;
    let ns = "kueue-quota";
    let other_ns = "gangs";
    let r = async {
        let client = c.client();
        kueue::managed_namespace(&client, ns).await?;
        c.namespace(other_ns).await?;
        c.add_node("node-1", NodeShape::cpu("400m")).await?;
        c.add_node("node-2", NodeShape::cpu("300m")).await?; // room for 7 × 100m
        kueue::create_queues(&client, ns, CLUSTER_QUEUE, LOCAL_QUEUE, "300m").await?;
        let group = Group::create(&c, ns).await?;

        // Kueue's verdict: the Workload exists and reserves no quota.
        let workloads = kueue::workloads(&client, ns);
        let pending = wait_for("Kueue to find the group over its quota", REASON, || async {
            group.check().await?;
            Ok(match workloads.get_opt(GROUP).await? {
                Some(wl) => match kueue::condition(&wl, "QuotaReserved") {
                    Some((s, reason, message)) if s == "False" => {
                        Progress::Done(format!("{reason}: {message}"))
                    }
                    other => Progress::NotYet(format!("QuotaReserved {other:?}")),
                },
                None => Progress::NotYet("no Workload yet".into()),
            })
        })
        .await?;
        eprintln!("Workload {ns}/{GROUP} QuotaReserved=False: {pending}");
        group
            .holds_none_bound("over quota: Kueue does not admit it", true)
            .await?;

        // Room for 7: the other gang of 4 fits only if the group holds nothing.
        let other = c
            .create_gang(
                other_ns,
                "other",
                MEMBERS,
                MEMBERS,
                KeyScheme::Muster,
                |p| p,
            )
            .await?;
        let bound = c.wait_bound(other_ns, &other, PLACE).await?;
        eprintln!(
            "the other gang was placed while the group waits for quota: {:?}",
            bound.values().map(|(n, _)| n).collect::<Vec<_>>()
        );
        group
            .holds_none_bound("over quota, the other gang placed", true)
            .await?;
        if muster_view_is_checked() {
            // muster's own word for it (the cluster truth above is what proves it).
            match c.muster.gang(ns, GROUP).await? {
                Some(view) => {
                    ensure!(
                        view.seats().is_empty(),
                        "muster holds seats for a group Kueue has not admitted: {}",
                        view.describe()
                    );
                    eprintln!("muster's view of the group: {}", view.describe());
                }
                None => eprintln!("muster lists no gang {ns}/{GROUP}: it holds nothing"),
            }
        }
        group.log_what_users_see("over quota").await?;

        kueue::set_cpu_quota(&client, CLUSTER_QUEUE, "1").await?;
        group.wait_admitted_by_kueue().await?;
        group
            .holds_none_bound("admitted by Kueue, room for 3 of 4", false)
            .await?;
        group.ensure_behind_musters_gate_alone().await?;

        let t0 = Instant::now();
        c.delete_pods(other_ns, &other).await?;
        let spread = group.wait_running_whole().await?;
        eprintln!(
            "placed whole and running {:.1}s after the other gang was deleted (bindings seen \
             {spread:.2}s apart)",
            t0.elapsed().as_secs_f64()
        );
        c.assert_no_overcommit().await
    }
    .await;
    c.report(&[ns, other_ns], r).await
}
