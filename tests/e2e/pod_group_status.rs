//! End-to-end: muster writes each gang's state back to its PodGroup's status, in that API's own
//! fields (explained), against the real control plane with muster as its ServiceAccount under
//! the shipped RBAC (so these also prove it may write them):
//! - Volcano `scheduling.volcano.sh/v1beta1` (its CRD, like upstream's, has no status
//!   subresource): `phase` Pending and an `Unschedulable` condition naming "1 of 2 members fit"
//!   while the gang waits, `phase` Running and a `Scheduled` condition once placed;
//! - scheduler-plugins `scheduling.x-k8s.io/v1alpha1` (status subresource): `phase`
//!   PreScheduling while waiting, Scheduled with `scheduled` and `scheduleStartTime` once placed;
//! - Kubernetes `scheduling.k8s.io/v1beta1`: `PodGroupInitiallyScheduled` False/Unschedulable
//!   with muster's reason, then True/Scheduled.
//! - A Volcano PodGroup without members is enqueued (`Inqueue`, `--enqueue-volcano-podgroups`)
//!   when its `minResources` fit the cluster's free allocatable in sum, so that Volcano's job
//!   controller (played by the test) creates its pods; one whose `minResources` do not fit
//!   stays `Pending` with `NotEnoughResources` until a node brings the room.
//!
//! Each gang has room for only part of its quorum first, where kube-scheduler alone binds the
//! members that fit: every poll checks first that no member is bound (cluster truth), so
//! `tests/control-run` sees each fail without muster.

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::Api;
use muster_harness::pod_groups::{self, PodGroupApi};
use muster_harness::{
    holds_for, pod_names as names, truth, wait_for, Cluster, ClusterOptions, NodeShape, PodBuilder,
    Progress, Timer, CLUSTER_TRUTH, PLACE, REASON, WINDOW,
};
use serde_json::Value;

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");
const SECOND_SCHEDULER: &str = "muster-scheduler";

fn resource(api: PodGroupApi) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(api.group(), api.version(), "PodGroup"),
        "podgroups",
    )
}

/// The PodGroup's `status` (`Null` if none).
async fn status(c: &Cluster, api: PodGroupApi, ns: &str, name: &str) -> Result<Value> {
    let pgs: Api<DynamicObject> = Api::namespaced_with(c.client(), ns, &resource(api));
    let o = pgs.get(name).await?;
    Ok(o.data.get("status").cloned().unwrap_or(Value::Null))
}

fn condition<'a>(status: &'a Value, type_: &str) -> Option<&'a Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Polls until the PodGroup's status satisfies `want`, failing at once (cluster truth) if a
/// member of `members` is bound meanwhile; then checks over [`WINDOW`] that none is.
async fn status_while_waiting(
    c: &Cluster,
    api: PodGroupApi,
    ns: &str,
    name: &str,
    members: &[String],
    what: &str,
    want: impl Fn(&Value) -> bool,
) -> Result<Value> {
    let none_bound = || async {
        let bound = c.bound_pods(ns).await?;
        Ok::<_, anyhow::Error>(
            members
                .iter()
                .find(|m| bound.contains_key(*m))
                .map(|m| format!("{m} was bound to {} while its gang waits", bound[m])),
        )
    };
    let got = wait_for(what, REASON, || async {
        if let Some(e) = none_bound().await? {
            return Err(truth(e));
        }
        let s = status(c, api, ns, name).await?;
        Ok(if want(&s) {
            Progress::Done(s)
        } else {
            Progress::NotYet(format!("status {s}"))
        })
    })
    .await?;
    holds_for(&format!("{ns}/{name} to wait whole"), WINDOW, || async {
        Ok(match none_bound().await? {
            Some(e) => Err(format!("{CLUSTER_TRUTH} {e}")),
            None => Ok(()),
        })
    })
    .await?;
    Ok(got)
}

async fn status_once_placed(
    c: &Cluster,
    api: PodGroupApi,
    ns: &str,
    name: &str,
    members: &[String],
    want: impl Fn(&Value) -> bool,
) -> Result<Value> {
    c.wait_bound(ns, members, PLACE).await?;
    wait_for(
        &format!("{ns}/{name}'s status once placed"),
        PLACE,
        || async {
            let s = status(c, api, ns, name).await?;
            Ok(if want(&s) {
                Progress::Done(s)
            } else {
                Progress::NotYet(format!("status {s}"))
            })
        },
    )
    .await
}

#[tokio::test]
async fn volcano_podgroup_status_shows_pending_and_why_then_running() -> Result<()> {
    let _t = Timer(
        "volcano_podgroup_status_shows_pending_and_why_then_running",
        Instant::now(),
    );
    let c = Cluster::start_with(pod_groups::waiting_volcano_job_cluster(MUSTER)).await?;
    let r = async {
        let ns = "ml";
        // Room for one of its two 100m members.
        let members = pod_groups::create_waiting_volcano_job(&c, ns).await?;
        let reason = format!("gang {ns}/job: 1 of 2 members fit");
        let s = status_while_waiting(
            &c,
            PodGroupApi::Volcano,
            ns,
            "job",
            &members,
            "phase Pending, Unschedulable: 1 of 2 members fit",
            |s| {
                s["phase"] == "Pending"
                    && condition(s, "Unschedulable").is_some_and(|c| {
                        c["status"] == "True"
                            && c["reason"] == "NotEnoughResources"
                            && c["message"] == reason.as_str()
                    })
            },
        )
        .await?;
        ensure!(
            condition(&s, "Unschedulable").is_some_and(|c| c["lastTransitionTime"].is_string()),
            "no lastTransitionTime: {s}"
        );
        c.add_node("node-2", NodeShape::cpu("150m")).await?;
        status_once_placed(&c, PodGroupApi::Volcano, ns, "job", &members, |s| {
            s["phase"] == "Running"
                && condition(s, "Scheduled").is_some_and(|c| c["status"] == "True")
                && condition(s, "Unschedulable").is_some_and(|c| c["status"] == "False")
        })
        .await?;
        // Written only when it changes: a quiet gang costs no writes.
        let written = |m: &std::collections::BTreeMap<String, f64>| {
            m.get("muster_podgroup_status_writes_total{api=\"scheduling.volcano.sh/v1beta1\",outcome=\"written\"}")
                .copied()
                .unwrap_or(0.0)
        };
        let before = written(&c.muster.metrics().await?);
        ensure!(before >= 2.0, "expected at least 2 writes, metrics say {before}");
        // Over more than two rounds (2 s each) of a settled gang.
        holds_for("a settled gang's status not to be written again", WINDOW.max(Duration::from_secs(5)), || async {
            let after = written(&c.muster.metrics().await?);
            Ok(if after == before {
                Ok(())
            } else {
                Err(format!("written again: {before} -> {after}"))
            })
        })
        .await
    }
    .await;
    c.report(&["ml"], r).await
}

#[tokio::test]
async fn scheduler_plugins_podgroup_status_shows_prescheduling_then_scheduled() -> Result<()> {
    let _t = Timer(
        "scheduler_plugins_podgroup_status_shows_prescheduling_then_scheduled",
        Instant::now(),
    );
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).crd(pod_groups::SCHEDULER_PLUGINS_CRD))
        .await?;
    let r = async {
        let ns = "train";
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("150m")).await?;
        pod_groups::create(
            &c.client(),
            PodGroupApi::SchedulerPlugins,
            pod_groups::scheduler_plugins(ns, "pytorch", 2, 60),
        )
        .await?;
        let members = names(&["pytorch-0", "pytorch-1"]);
        for m in &members {
            c.create(
                PodBuilder::new(ns, m)
                    .cpu("100m")
                    .label("scheduling.x-k8s.io/pod-group", "pytorch"),
            )
            .await?;
        }
        status_while_waiting(
            &c,
            PodGroupApi::SchedulerPlugins,
            ns,
            "pytorch",
            &members,
            "phase PreScheduling",
            |s| s["phase"] == "PreScheduling" && s["scheduleStartTime"].is_string(),
        )
        .await?;
        c.add_node("node-2", NodeShape::cpu("150m")).await?;
        status_once_placed(
            &c,
            PodGroupApi::SchedulerPlugins,
            ns,
            "pytorch",
            &members,
            |s| s["phase"] == "Scheduled" && s["scheduled"] == 2,
        )
        .await?;
        Ok(())
    }
    .await;
    c.report(&["train"], r).await
}

#[tokio::test]
async fn kubernetes_podgroup_status_initially_scheduled_false_with_reason_then_true() -> Result<()>
{
    let _t = Timer(
        "kubernetes_podgroup_status_initially_scheduled_false_with_reason_then_true",
        Instant::now(),
    );
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).kubernetes_pod_groups()).await?;
    let r = async {
        let ns = "workloads";
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("150m")).await?;
        pod_groups::create(
            &c.client(),
            PodGroupApi::Kubernetes,
            pod_groups::kubernetes(ns, "trainer", 2),
        )
        .await?;
        let members = names(&["trainer-0", "trainer-1"]);
        for m in &members {
            c.create(
                PodBuilder::new(ns, m)
                    .cpu("100m")
                    .scheduling_group("trainer"),
            )
            .await?;
        }
        let reason = format!("gang {ns}/trainer: 1 of 2 members fit");
        status_while_waiting(
            &c,
            PodGroupApi::Kubernetes,
            ns,
            "trainer",
            &members,
            "PodGroupInitiallyScheduled False: 1 of 2 members fit",
            |s| {
                condition(s, "PodGroupInitiallyScheduled").is_some_and(|c| {
                    c["status"] == "False"
                        && c["reason"] == "Unschedulable"
                        && c["message"] == reason.as_str()
                })
            },
        )
        .await?;
        c.add_node("node-2", NodeShape::cpu("150m")).await?;
        status_once_placed(&c, PodGroupApi::Kubernetes, ns, "trainer", &members, |s| {
            condition(s, "PodGroupInitiallyScheduled")
                .is_some_and(|c| c["status"] == "True" && c["reason"] == "Scheduled")
        })
        .await?;
        Ok(())
    }
    .await;
    c.report(&["workloads"], r).await
}

/// Polls until the Volcano PodGroup's status satisfies `want` (no members exist meanwhile).
async fn volcano_status(
    c: &Cluster,
    ns: &str,
    name: &str,
    what: &str,
    want: impl Fn(&Value) -> bool,
) -> Result<Value> {
    wait_for(what, REASON, || async {
        let s = status(c, PodGroupApi::Volcano, ns, name).await?;
        Ok(if want(&s) {
            Progress::Done(s)
        } else {
            Progress::NotYet(format!("status {s}"))
        })
    })
    .await
}

/// A Volcano PodGroup with `spec.minResources` as its job controller fills them: the quota
/// usage of the quorum's pods (`requests.cpu`, `limits.cpu`, `count/pods`: not counted).
fn volcano_with_min_resources(ns: &str, name: &str, min_member: u32, cpu: &str) -> Value {
    let mut pg = pod_groups::volcano(ns, name, min_member, &[]);
    pg["spec"]["minResources"] = serde_json::json!({
        "cpu": cpu, "requests.cpu": cpu, "limits.cpu": cpu,
        "pods": min_member.to_string(), "count/pods": min_member.to_string(),
    });
    pg
}

#[tokio::test]
async fn volcano_podgroup_without_members_is_enqueued_then_its_pods_are_placed_whole() -> Result<()>
{
    let _t = Timer(
        "volcano_podgroup_without_members_is_enqueued_then_its_pods_are_placed_whole",
        Instant::now(),
    );
    let c = Cluster::start_with(
        ClusterOptions::new(MUSTER)
            .scheduler_config("muster-second-scheduler.yaml")
            .crd(pod_groups::VOLCANO_CRD),
    )
    .await?;
    let r = async {
        let ns = "ml";
        c.namespace(ns).await?;
        // 150m free in sum: minResources 100m fit (Volcano's check is a sum), the gang of two
        // 100m members does not fit whole until node-2 comes.
        c.add_node("node-1", NodeShape::cpu("150m")).await?;
        pod_groups::create(
            &c.client(),
            PodGroupApi::Volcano,
            volcano_with_min_resources(ns, "job", 2, "100m"),
        )
        .await?;
        volcano_status(
            &c,
            ns,
            "job",
            "the member-less PodGroup to be Inqueue",
            |s| s["phase"] == "Inqueue",
        )
        .await?;
        // Volcano's job controller creates the pods only now, past Pending.
        let members = names(&["job-worker-0", "job-worker-1"]);
        for m in &members {
            c.create(
                PodBuilder::new(ns, m)
                    .cpu("100m")
                    .annotation("scheduling.k8s.io/group-name", "job")
                    .annotation("volcano.sh/task-spec", "worker")
                    .scheduler_name(SECOND_SCHEDULER),
            )
            .await?;
        }
        let s = status_while_waiting(
            &c,
            PodGroupApi::Volcano,
            ns,
            "job",
            &members,
            "Unschedulable: 1 of 2 members fit, still Inqueue",
            |s| {
                condition(s, "Unschedulable").is_some_and(|c| {
                    c["status"] == "True" && c["message"] == "gang ml/job: 1 of 2 members fit"
                })
            },
        )
        .await?;
        // Never back to Pending: the job controller keeps managing the pods.
        ensure!(s["phase"] == "Inqueue", "phase left Inqueue: {s}");
        c.add_node("node-2", NodeShape::cpu("150m")).await?;
        status_once_placed(&c, PodGroupApi::Volcano, ns, "job", &members, |s| {
            s["phase"] == "Running"
        })
        .await?;
        Ok(())
    }
    .await;
    c.report(&["ml"], r).await
}

#[tokio::test]
async fn volcano_podgroup_whose_min_resources_exceed_the_cluster_stays_pending_with_the_reason(
) -> Result<()> {
    let _t = Timer(
        "volcano_podgroup_whose_min_resources_exceed_the_cluster_stays_pending_with_the_reason",
        Instant::now(),
    );
    let c = Cluster::start_with(
        ClusterOptions::new(MUSTER)
            .scheduler_config("muster-second-scheduler.yaml")
            .crd(pod_groups::VOLCANO_CRD),
    )
    .await?;
    let r = async {
        let ns = "ml";
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("150m")).await?;
        pod_groups::create(
            &c.client(),
            PodGroupApi::Volcano,
            volcano_with_min_resources(ns, "big", 2, "3"),
        )
        .await?;
        volcano_status(
            &c,
            ns,
            "big",
            "Pending, Unschedulable NotEnoughResources with the numbers",
            |s| {
                s["phase"] == "Pending"
                    && condition(s, "Unschedulable").is_some_and(|c| {
                        c["status"] == "True"
                            && c["reason"] == "NotEnoughResources"
                            && c["message"]
                                .as_str()
                                .is_some_and(|m| m.contains("insufficient cpu: requested 3000m"))
                    })
            },
        )
        .await?;
        holds_for("the PodGroup to stay Pending", WINDOW, || async {
            let s = status(&c, PodGroupApi::Volcano, ns, "big").await?;
            Ok(if s["phase"] == "Pending" {
                Ok(())
            } else {
                Err(format!("status {s}"))
            })
        })
        .await?;
        // Checked again every round: room arrives, it is enqueued.
        c.add_node("node-2", NodeShape::cpu("3")).await?;
        volcano_status(&c, ns, "big", "Inqueue once the room exists", |s| {
            s["phase"] == "Inqueue"
        })
        .await?;
        Ok(())
    }
    .await;
    c.report(&["ml"], r).await
}
