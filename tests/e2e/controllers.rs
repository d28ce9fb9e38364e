//! End-to-end: gangs as the controllers users run submit them, on a cluster with the controllers
//! a real one has (`ClusterOptions::with_controllers`: kube-controller-manager, and KWOK playing
//! the kubelets, so bound pods turn Running and finish when the test sets
//! `muster.dev/test-finish`; tests/cluster/kwok-stages.yaml). muster is installed as
//! `kubectl apply -k deploy/` installs it: the admission policy marks and gates the pods the
//! controller creates from a template carrying muster's keys.
//!
//! 1. batch/v1 Job, indexed, `completions = parallelism = 4`: nothing bound while only three
//!    fit; placed whole once a node is added; its pods run; a failed pod's replacement from the
//!    Job controller joins the running gang (the others keep running); the Job completes.
//!
//! 2. Jobs whose pods claim devices from a ResourceClaimTemplate (DRA): kube-controller-manager
//!    creates each pod's claim; a second Job waits whole, holding nothing, while the first holds
//!    the devices; the first Job deleted, its claims are deallocated and deleted by the
//!    resourceclaim controller, and the second is placed whole on the devices it freed.
//!
//! Without muster (`tests/control-run`) kube-scheduler binds the pods that fit at once, so each
//! test fails there on its first cluster-truth check.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Context, Result};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use muster_harness::k8s;
use muster_harness::{
    holds_for, truth, wait_for, Cluster, ClusterOptions, NodeShape, Progress, Timer, PLACE, WINDOW,
};
use serde_json::json;

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");

/// The annotation tests/cluster/kwok-stages.yaml finishes a running pod on.
const FINISH: &str = "muster.dev/test-finish";

/// An indexed Job of `n` pods of 100m CPU, all at once (`completions = parallelism = n`), with
/// muster's keys in its pod template (group = the Job's name, quorum `n`), as a user writes it.
fn indexed_job(ns: &str, name: &str, n: i32) -> Result<Job> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "completionMode": "Indexed",
            "completions": n,
            "parallelism": n,
            "backoffLimit": 3,
            "template": {
                "metadata": {"annotations": {
                    "muster.dev/group": name,
                    "muster.dev/min-available": n.to_string(),
                }},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "train",
                        "image": "registry.invalid/train:1",
                        "resources": {"requests": {"cpu": "100m"}},
                    }],
                },
            },
        },
    }))?)
}

/// An indexed Job like [`indexed_job`] whose pods also claim, each, the devices of
/// ResourceClaimTemplate `template` (as `gpus`).
fn indexed_job_with_claims(ns: &str, name: &str, n: i32, template: &str) -> Result<Job> {
    let mut job = serde_json::to_value(indexed_job(ns, name, n)?)?;
    job["spec"]["template"]["spec"]["resourceClaims"] =
        json!([{"name": "gpus", "resourceClaimTemplateName": template}]);
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["claims"] =
        json!([{"name": "gpus"}]);
    Ok(serde_json::from_value(job)?)
}

/// The Job's pods that are not finished (neither Succeeded nor Failed), by name.
async fn live_pods(c: &Cluster, ns: &str, job: &str) -> Result<BTreeMap<String, Pod>> {
    Ok(c.pods(ns)
        .await?
        .into_iter()
        .filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("batch.kubernetes.io/job-name"))
                .is_some_and(|j| j == job)
        })
        .filter(|p| {
            !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        })
        .map(|p| (k8s::pod_name(&p).to_string(), p))
        .collect())
}

fn is_running(p: &Pod) -> bool {
    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

fn completion_index(p: &Pod) -> Option<&str> {
    p.metadata
        .annotations
        .as_ref()?
        .get("batch.kubernetes.io/job-completion-index")
        .map(String::as_str)
}

/// Whether some but not all of a Job's live pods may be bound while waiting: not while the gang
/// is being placed (never-half), but while a replacement joins a placed gang.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Partly {
    Forbidden,
    Allowed,
}

/// Waits until the Job has `n` live pods, all bound and Running; fails at once (cluster truth)
/// when a node is over-committed, and, with [`Partly::Forbidden`], on a poll where some but not
/// all of its live pods are bound for longer than a scheduling cycle's fan-out allows.
async fn wait_running_whole(
    c: &Cluster,
    ns: &str,
    job: &str,
    n: usize,
    partly: Partly,
) -> Result<Vec<String>> {
    let partial_since: Cell<Option<Instant>> = Cell::new(None);
    wait_for(&format!("job {job}: {n} pods running"), PLACE, || {
        let partial = &partial_since;
        async move {
            let live = live_pods(c, ns, job).await?;
            let bound = live.values().filter(|p| k8s::pod_node(p).is_some()).count();
            if partly == Partly::Forbidden && bound > 0 && bound < n {
                let since = partial.get().unwrap_or_else(Instant::now);
                partial.set(Some(since));
                if since.elapsed() > muster_harness::timing::TOGETHER {
                    return Err(truth(format!(
                        "job {job} partly bound: {bound} of {n} live pods bound for {:?}",
                        since.elapsed()
                    )));
                }
            } else {
                partial.set(None);
            }
            if let Err(e) = c.check_no_overcommit().await? {
                anyhow::bail!("{e}");
            }
            let running: Vec<String> = live
                .iter()
                .filter(|(_, p)| is_running(p))
                .map(|(n, _)| n.clone())
                .collect();
            Ok(if running.len() == n && live.len() == n {
                Progress::Done(running)
            } else {
                Progress::NotYet(format!(
                    "{} live, {bound} bound, {} running",
                    live.len(),
                    running.len()
                ))
            })
        }
    })
    .await
}

async fn annotate(c: &Cluster, ns: &str, pod: &str, key: &str, value: &str) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(c.client(), ns);
    api.patch(
        pod,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {key: value}}})),
    )
    .await
    .with_context(|| format!("annotating {ns}/{pod}"))?;
    Ok(())
}

/// Case 1: an indexed Job of 4 on room for 3 binds nothing, on every poll of a window; a second
/// node makes room and the Job's pods are bound whole and run; the pod of index 1 fails, the Job
/// controller replaces it, and the replacement joins the running gang while the other three keep
/// running (never-half: a placed gang takes its replacements); then every pod succeeds and the
/// Job completes.
#[tokio::test]
async fn an_indexed_job_is_placed_whole_runs_takes_its_replacement_and_completes() -> Result<()> {
    let _t = Timer(
        "an_indexed_job_is_placed_whole_runs_takes_its_replacement_and_completes",
        Instant::now(),
    );
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).with_controllers()).await?;
    let ns = "jobs";
    let r = async {
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("350m")).await?; // room for 3 × 100m
        let jobs: Api<Job> = Api::namespaced(c.client(), ns);
        jobs.create(&PostParams::default(), &indexed_job(ns, "train", 4)?)
            .await?;
        wait_for("the Job controller to create 4 pods", PLACE, || async {
            let live = live_pods(&c, ns, "train").await?;
            Ok(if live.len() == 4 {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("{} pods", live.len()))
            })
        })
        .await?;
        holds_for("no pod of job train bound", WINDOW, || async {
            let live = live_pods(&c, ns, "train").await?;
            let bound: Vec<String> = live
                .iter()
                .filter_map(|(n, p)| k8s::pod_node(p).map(|node| format!("{n} → {node}")))
                .collect();
            Ok(if bound.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "{} job train partly bound with room for 3 of 4: {}",
                    muster_harness::CLUSTER_TRUTH,
                    bound.join(", ")
                ))
            })
        })
        .await?;
        c.add_node("node-2", NodeShape::cpu("350m")).await?;
        let running = wait_running_whole(&c, ns, "train", 4, Partly::Forbidden).await?;
        eprintln!("running whole: {running:?}");

        let live = live_pods(&c, ns, "train").await?;
        let (failing, _) = live
            .iter()
            .find(|(_, p)| completion_index(p) == Some("1"))
            .context("no pod of index 1")?;
        let failing = failing.clone();
        let others: Vec<String> = running.iter().filter(|n| **n != failing).cloned().collect();
        annotate(&c, ns, &failing, FINISH, "Failed").await?;
        wait_for(&format!("{failing} to fail"), PLACE, || async {
            let live = live_pods(&c, ns, "train").await?;
            Ok(if live.contains_key(&failing) {
                Progress::NotYet(format!("{failing} still live"))
            } else {
                Progress::Done(())
            })
        })
        .await?;
        let replaced = wait_running_whole(&c, ns, "train", 4, Partly::Allowed).await?;
        let replacement: Vec<&String> = replaced.iter().filter(|n| !others.contains(n)).collect();
        anyhow::ensure!(
            replacement.len() == 1 && *replacement[0] != failing,
            "expected one replacement of {failing} beside {others:?}, running: {replaced:?}"
        );
        eprintln!("{failing} failed; {} replaced it", replacement[0]);
        let pods = c.pods(ns).await?;
        for o in &others {
            let p = pods
                .iter()
                .find(|p| k8s::pod_name(p) == o.as_str())
                .with_context(|| format!("{o} is gone"))?;
            muster_harness::ensure_truth!(
                is_running(p) && p.metadata.deletion_timestamp.is_none(),
                "{o} did not keep running while {failing} was replaced"
            );
        }

        for p in &replaced {
            annotate(&c, ns, p, FINISH, "Succeeded").await?;
        }
        wait_for("job train to complete", PLACE, || async {
            let job = jobs.get("train").await?;
            let complete = job
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "Complete" && c.status == "True")
                });
            Ok(if complete {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("status: {:?}", job.status))
            })
        })
        .await
    }
    .await;
    c.report(&[ns], r).await
}

const CLASS: &str = "gpu.example.com";

/// Case 2: three nodes of 2 devices; Job `first` (2 pods × 2 devices) runs on two of them; Job
/// `second` (the same) fits only one pod on the node left, so nothing of it is bound on any poll
/// of a window (holds-nothing: a gang that cannot run takes no devices); `first` deleted, the
/// resourceclaim controller deallocates its pods' claims, and `second` is placed whole, runs,
/// and its claims are allocated.
#[tokio::test]
async fn a_deleted_jobs_devices_are_deallocated_and_a_waiting_job_is_placed_whole_on_them(
) -> Result<()> {
    use k8s_openapi::api::resource::v1::{
        DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
    };
    use kube::api::DeleteParams;
    let _t = Timer(
        "a_deleted_jobs_devices_are_deallocated_and_a_waiting_job_is_placed_whole_on_them",
        Instant::now(),
    );
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).with_controllers()).await?;
    let ns = "dra-jobs";
    let r = async {
        c.namespace(ns).await?;
        Api::<DeviceClass>::all(c.client())
            .create(
                &PostParams::default(),
                &muster_harness::dra::driver_class(CLASS)?,
            )
            .await?;
        for n in ["node-1", "node-2", "node-3"] {
            c.add_node(n, NodeShape::cpu("8")).await?;
            let devices = (0..2)
                .map(|i| json!({"name": format!("gpu-{i}")}))
                .collect();
            Api::<ResourceSlice>::all(c.client())
                .create(
                    &PostParams::default(),
                    &muster_harness::dra::node_slice(CLASS, n, devices)?,
                )
                .await?;
        }
        let template: ResourceClaimTemplate = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "two-gpus", "namespace": ns},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpus", "exactly": {"deviceClassName": CLASS, "count": 2}}
            ]}}}
        }))?;
        Api::<ResourceClaimTemplate>::namespaced(c.client(), ns)
            .create(&PostParams::default(), &template)
            .await?;
        let jobs: Api<Job> = Api::namespaced(c.client(), ns);
        jobs.create(
            &PostParams::default(),
            &indexed_job_with_claims(ns, "first", 2, "two-gpus")?,
        )
        .await?;
        wait_running_whole(&c, ns, "first", 2, Partly::Forbidden).await?;
        jobs.create(
            &PostParams::default(),
            &indexed_job_with_claims(ns, "second", 2, "two-gpus")?,
        )
        .await?;
        wait_for(
            "the Job controller to create second's 2 pods",
            PLACE,
            || async {
                let live = live_pods(&c, ns, "second").await?;
                Ok(if live.len() == 2 {
                    Progress::Done(())
                } else {
                    Progress::NotYet(format!("{} pods", live.len()))
                })
            },
        )
        .await?;
        holds_for("no pod of job second bound", WINDOW, || async {
            let live = live_pods(&c, ns, "second").await?;
            let bound: Vec<String> = live
                .iter()
                .filter_map(|(n, p)| k8s::pod_node(p).map(|node| format!("{n} → {node}")))
                .collect();
            Ok(if bound.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "{} job second partly bound with devices for 1 of 2 pods: {}",
                    muster_harness::CLUSTER_TRUTH,
                    bound.join(", ")
                ))
            })
        })
        .await?;
        let t0 = Instant::now();
        jobs.delete("first", &DeleteParams::background()).await?;
        wait_running_whole(&c, ns, "second", 2, Partly::Forbidden).await?;
        eprintln!(
            "second placed whole {:?} after first was deleted",
            t0.elapsed()
        );
        let claims = Api::<ResourceClaim>::namespaced(c.client(), ns)
            .list(&Default::default())
            .await?;
        let allocated: Vec<String> = claims
            .items
            .iter()
            .filter(|cl| cl.status.as_ref().is_some_and(|s| s.allocation.is_some()))
            .filter_map(|cl| cl.metadata.name.clone())
            .collect();
        muster_harness::ensure_truth!(
            allocated.len() == 2 && allocated.iter().all(|n| n.starts_with("second-")),
            "the allocated claims are not exactly second's two: {allocated:?}"
        );
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}
