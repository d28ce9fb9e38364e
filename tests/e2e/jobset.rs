//! End-to-end: gangs as JobSet (`jobset.x-k8s.io/v1alpha2`) submits them, on a cluster with the
//! controllers a real one has and JobSet's own controller and webhooks
//! (`ClusterOptions::with_jobset`: kube-controller-manager, KWOK playing the kubelets, JobSet
//! v0.10.1 as a local process; tests/harness/src/jobset.rs). muster is installed as
//! `kubectl apply -k deploy/` installs it. One JobSet is one gang: a leader replicated job (1 pod)
//! and a workers replicated job (3 pods), muster's keys in both pod templates (the JobSet's name
//! as the group, the 4 pods as the quorum).
//!
//! 1. On room for 3 of the 4 pods nothing is bound, on every poll of a window; every pod is
//!    `SchedulingGated` behind muster's gate; a node added, the 4 are bound together (never part
//!    of them on any poll), run, and the JobSet completes.
//!
//! 2. A restart (`failurePolicy.maxRestarts: 1`): the leader fails, JobSet deletes the first
//!    generation's Jobs and creates the next. The old workers are held terminating (a finalizer,
//!    as a kubelet's grace period would hold them) while the new leader comes: it is gathered
//!    alone and bound nowhere; once the old workers are gone JobSet creates the new workers, and
//!    the new generation is placed whole (never part of it on any poll) and runs.
//!
//! 3. A restart with `restartStrategy: BlockingRecreate` while the old workers are slow to go (a
//!    policy refuses their deletion, so they stay live and bound): JobSet creates no pod of the
//!    next generation until they are gone; then, a plain pod having taken the failed leader's
//!    room, the new generation fits 3 of 4 and nothing of it is bound, and once the plain pod
//!    goes it is placed whole.
//!
//! 4. The same restart with the default `restartStrategy: Recreate`: the new leader comes while
//!    the old workers still run bound. Pods carry JobSet's `jobset.sigs.k8s.io/restart-attempt`,
//!    and a gang is its newest generation, so the new leader is not a late member of the old
//!    workers' placed gang: nothing of the new generation is bound on any poll of a window, the
//!    old workers hear `GangMemberSuperseded`, and once they go the new generation is placed
//!    whole.
//!
//! 5. A JobSet deleted and submitted again under its name while the first one's workers still
//!    run bound, on room for 3 of the new 4 beside them: the new pods (another
//!    `jobset.sigs.k8s.io/jobset-uid`) are not members joining the old workers; nothing of
//!    them is bound until the old workers go, then the new JobSet is placed whole.
//!
//! Without muster (`tests/control-run`) kube-scheduler binds the pods that fit at once, so each
//! test fails there on a cluster-truth check: the first binds 3 of 4, the second binds the new
//! leader alone while the old workers terminate, the third binds 3 of the new 4, the fourth binds
//! the new leader alone beside the old workers, the fifth 3 of the new JobSet's 4.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Context, Result};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::Api;
use muster_harness::jobset::{self, JOBSET_NAME, REPLICATED_JOB_NAME, RESTART_ATTEMPT};

/// JobSet's uid on every pod of a JobSet (`JobSetUIDKey`).
const JOBSET_UID: &str = "jobset.sigs.k8s.io/jobset-uid";
use muster_harness::policy::GATHER_GATE;
use muster_harness::PartialGang;
use muster_harness::{
    holds_for, k8s, wait_for, Cluster, ClusterOptions, NodeShape, PodBuilder, Progress, Timer,
    CLUSTER_TRUTH, PLACE, REASON, WINDOW,
};
use serde_json::json;

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");

/// The annotation tests/cluster/kwok-stages.yaml finishes a running pod on.
const FINISH: &str = "muster.dev/test-finish";

/// A finalizer of the test's own: holds a deleted pod in Terminating until the test removes it.
const HOLD: &str = "muster.dev/test-hold";

/// The pods of the JobSet: 1 leader and 3 workers.
const MEMBERS: usize = 4;

/// JobSet `ns/name` of a leader replicated job (1 pod) and a workers replicated job (3 pods) of
/// 100m CPU each, muster's keys in both pod templates (group = the JobSet's name, quorum 4), as a
/// user writes it, with `failure_policy` (none: the first failed Job fails the JobSet). Each Job
/// fails at its first failed pod (`backoffLimit: 0`, `restartPolicy: Never`).
fn leader_and_workers(
    ns: &str,
    name: &str,
    failure_policy: Option<serde_json::Value>,
) -> Result<DynamicObject> {
    let replicated = |rjob: &str, pods: usize| {
        json!({
            "name": rjob,
            "replicas": 1,
            "template": {"spec": {
                "parallelism": pods,
                "completions": pods,
                "backoffLimit": 0,
                "template": {
                    "metadata": {"annotations": {
                        "muster.dev/group": name,
                        "muster.dev/min-available": MEMBERS.to_string(),
                    }},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{
                            "name": rjob,
                            "image": "registry.invalid/train:1",
                            "resources": {"requests": {"cpu": "100m"}},
                        }],
                    },
                },
            }},
        })
    };
    let mut js = json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicatedJobs": [replicated("leader", 1), replicated("workers", 3)]},
    });
    if let Some(p) = failure_policy {
        js["spec"]["failurePolicy"] = p;
    }
    Ok(serde_json::from_value(js)?)
}

fn label<'a>(p: &'a Pod, key: &str) -> Option<&'a str> {
    p.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn phase(p: &Pod) -> Option<&str> {
    p.status.as_ref().and_then(|s| s.phase.as_deref())
}

fn is_running(p: &Pod) -> bool {
    phase(p) == Some("Running")
}

fn is_terminating(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_some()
}

/// The JobSet's pods, by name.
async fn pods_of(c: &Cluster, ns: &str, js: &str) -> Result<BTreeMap<String, Pod>> {
    Ok(c.pods(ns)
        .await?
        .into_iter()
        .filter(|p| label(p, JOBSET_NAME) == Some(js))
        .map(|p| (k8s::pod_name(&p).to_string(), p))
        .collect())
}

/// One generation of a JobSet's pods (those JobSet created at one `restart-attempt`), watched for
/// the gang's invariant across polls: some but fewer than quorum of its live pods bound for longer
/// than `FAN_OUT` is a partial gang (cluster truth).
struct Generation<'a> {
    ns: &'a str,
    jobset: &'a str,
    attempt: &'a str,
    /// Only the pods of this JobSet uid (a JobSet submitted again under its name), if set.
    uid: Option<String>,
    partial: PartialGang,
}

impl<'a> Generation<'a> {
    fn new(ns: &'a str, jobset: &'a str, attempt: &'a str) -> Self {
        Self {
            ns,
            jobset,
            attempt,
            uid: None,
            partial: PartialGang::default(),
        }
    }

    /// The same generation of the JobSet of `uid` only.
    fn of_uid(mut self, uid: &str) -> Self {
        self.uid = Some(uid.to_string());
        self
    }

    /// The generation's live pods (neither terminating nor finished), by name.
    async fn live(&self, c: &Cluster) -> Result<BTreeMap<String, Pod>> {
        Ok(pods_of(c, self.ns, self.jobset)
            .await?
            .into_iter()
            .filter(|(_, p)| label(p, RESTART_ATTEMPT) == Some(self.attempt))
            .filter(|(_, p)| {
                self.uid
                    .as_deref()
                    .is_none_or(|u| label(p, JOBSET_UID) == Some(u))
            })
            .filter(|(_, p)| {
                !is_terminating(p) && !matches!(phase(p), Some("Succeeded" | "Failed"))
            })
            .collect())
    }

    /// One poll: the live pods, or the cluster truth broken (a partial gang, an over-committed
    /// node).
    async fn check(
        &self,
        c: &Cluster,
    ) -> Result<std::result::Result<BTreeMap<String, Pod>, String>> {
        let live = self.live(c).await?;
        let bound: Vec<String> = live
            .iter()
            .filter_map(|(n, p)| k8s::pod_node(p).map(|node| format!("{n} → {node}")))
            .collect();
        let what = format!("jobset {} restart-attempt {}: ", self.jobset, self.attempt);
        if let Err(e) = self.partial.judge(&what, &bound, MEMBERS) {
            return Ok(Err(e));
        }
        if let Err(e) = c.check_no_overcommit().await? {
            return Ok(Err(e));
        }
        Ok(Ok(live))
    }

    /// Waits until the generation has all its pods live, bound and Running; fails at the first
    /// partial gang. Returns their names.
    async fn wait_running_whole(&self, c: &Cluster) -> Result<Vec<String>> {
        wait_for(
            &format!(
                "jobset {} restart-attempt {}: {MEMBERS} pods running",
                self.jobset, self.attempt
            ),
            PLACE,
            || async {
                let live = match self.check(c).await? {
                    Ok(live) => live,
                    Err(e) => anyhow::bail!("{e}"),
                };
                let bound = live.values().filter(|p| k8s::pod_node(p).is_some()).count();
                let running: Vec<String> = live
                    .iter()
                    .filter(|(_, p)| is_running(p))
                    .map(|(n, _)| n.clone())
                    .collect();
                Ok(if live.len() == MEMBERS && running.len() == MEMBERS {
                    Progress::Done(running)
                } else {
                    Progress::NotYet(format!(
                        "{} live, {bound} bound, {} running",
                        live.len(),
                        running.len()
                    ))
                })
            },
        )
        .await
    }

    /// On every poll of [`WINDOW`]: none of the generation's pods bound.
    async fn holds_none_bound(&self, c: &Cluster, why: &str) -> Result<()> {
        holds_for(
            &format!(
                "no pod of jobset {} restart-attempt {} bound ({why})",
                self.jobset, self.attempt
            ),
            WINDOW,
            || async {
                let live = self.live(c).await?;
                let bound: Vec<String> = live
                    .iter()
                    .filter_map(|(n, p)| k8s::pod_node(p).map(|node| format!("{n} → {node}")))
                    .collect();
                Ok(if bound.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "{CLUSTER_TRUTH} jobset {} partly bound: {}",
                        self.jobset,
                        bound.join(", ")
                    ))
                })
            },
        )
        .await
    }
}

/// Each of `pods` is held behind muster's gate, and the API server reports it
/// `PodScheduled=False/SchedulingGated` (what `kubectl get pods` shows as `SchedulingGated`).
fn ensure_gated<'p>(pods: impl IntoIterator<Item = &'p Pod>) -> Result<()> {
    for p in pods {
        let name = k8s::pod_name(p);
        let gates: Vec<&str> = p
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_gates.as_ref())
            .map(|g| g.iter().map(|g| g.name.as_str()).collect())
            .unwrap_or_default();
        anyhow::ensure!(
            gates.contains(&GATHER_GATE),
            "{name} is not behind {GATHER_GATE}: gates {gates:?}"
        );
        let reason = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
            .and_then(|c| c.reason.as_deref());
        anyhow::ensure!(
            reason == Some("SchedulingGated"),
            "{name}: PodScheduled reason {reason:?}, expected SchedulingGated"
        );
    }
    Ok(())
}

async fn patch_pod(c: &Cluster, ns: &str, pod: &str, patch: serde_json::Value) -> Result<()> {
    Api::<Pod>::namespaced(c.client(), ns)
        .patch(pod, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .with_context(|| format!("patching {ns}/{pod}"))?;
    Ok(())
}

/// Waits for JobSet `ns/name`'s condition `type_` to be True.
async fn wait_jobset_condition(c: &Cluster, ns: &str, name: &str, type_: &str) -> Result<()> {
    let api = jobset::api(&c.client(), ns);
    wait_for(&format!("jobset {name} {type_}"), PLACE, || async {
        let js = api.get(name).await?;
        let done = js.data["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == type_ && c["status"] == "True")
            });
        Ok(if done {
            Progress::Done(())
        } else {
            Progress::NotYet(format!("status: {}", js.data["status"]))
        })
    })
    .await
}

/// Creates JobSet `ns/train` ([`leader_and_workers`] with `failure_policy`), waits until its
/// first generation runs whole, and returns the names of its leader pod and its worker pods.
async fn first_generation_running(
    c: &Cluster,
    ns: &str,
    failure_policy: serde_json::Value,
) -> Result<(String, Vec<String>)> {
    jobset::api(&c.client(), ns)
        .create(
            &PostParams::default(),
            &leader_and_workers(ns, "train", Some(failure_policy))?,
        )
        .await?;
    let first = Generation::new(ns, "train", "0");
    first.wait_running_whole(c).await?;
    let live = first.live(c).await?;
    let leader = live
        .iter()
        .find(|(_, p)| label(p, REPLICATED_JOB_NAME) == Some("leader"))
        .map(|(n, _)| n.clone())
        .context("no leader pod")?;
    let workers = live.keys().filter(|n| **n != leader).cloned().collect();
    Ok((leader, workers))
}

/// Case 1: a JobSet of a leader and 3 workers on room for 3 binds nothing, on every poll of a
/// window, every pod gated behind muster's gate; a second node makes room and the 4 pods are
/// bound whole (never part of them on any poll) and run; they succeed and the JobSet completes.
#[tokio::test]
async fn a_jobset_of_a_leader_and_three_workers_waits_gated_and_is_placed_whole() -> Result<()> {
    let _t = Timer(
        "a_jobset_of_a_leader_and_three_workers_waits_gated_and_is_placed_whole",
        Instant::now(),
    );
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).with_jobset()).await?;
    let ns = "jobsets";
    let r = async {
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("350m")).await?; // room for 3 × 100m
        jobset::api(&c.client(), ns)
            .create(
                &PostParams::default(),
                &leader_and_workers(ns, "train", None)?,
            )
            .await?;
        let first = Generation::new(ns, "train", "0");
        wait_for("JobSet's Jobs to create 4 pods", PLACE, || async {
            let live = first.live(&c).await?;
            Ok(if live.len() == MEMBERS {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("{} pods", live.len()))
            })
        })
        .await?;
        first.holds_none_bound(&c, "room for 3 of 4").await?;
        let live = first.live(&c).await?;
        ensure_gated(live.values())?;
        // What a user sees while it waits (for the log; muster's view is not asserted here).
        for n in live.keys() {
            for e in c.events_for(ns, n).await? {
                eprintln!("event on {n}: {e}");
            }
        }
        let js = jobset::api(&c.client(), ns).get("train").await?;
        eprintln!("jobset train while it waits: status {}", js.data["status"]);
        let roles: Vec<&str> = live
            .values()
            .filter_map(|p| label(p, REPLICATED_JOB_NAME))
            .collect();
        anyhow::ensure!(
            roles.iter().filter(|r| **r == "leader").count() == 1
                && roles.iter().filter(|r| **r == "workers").count() == 3,
            "expected 1 leader and 3 workers: {roles:?}"
        );

        let t0 = Instant::now();
        c.add_node("node-2", NodeShape::cpu("350m")).await?;
        let running = first.wait_running_whole(&c).await?;
        eprintln!(
            "placed whole and running {:.1}s after node-2: {running:?}",
            t0.elapsed().as_secs_f64()
        );
        for p in &running {
            patch_pod(
                &c,
                ns,
                p,
                json!({"metadata": {"annotations": {FINISH: "Succeeded"}}}),
            )
            .await?;
        }
        wait_jobset_condition(&c, ns, "train", "Completed").await
    }
    .await;
    c.report(&[ns], r).await
}

/// Case 2: a JobSet of a leader and 3 workers with `maxRestarts: 1` runs whole on room for 6;
/// its workers are held terminating once deleted (the test's finalizer), and the leader fails.
/// JobSet restarts: the new leader comes while the old workers terminate, and is bound nowhere on
/// any poll of a window (gathered alone, behind muster's gate); the old workers let go, JobSet
/// creates the new workers and the new generation is placed whole (never part of it on any poll)
/// and runs.
#[tokio::test]
async fn a_jobset_restart_gathers_the_new_pods_while_the_old_terminate_and_places_them_whole(
) -> Result<()> {
    let _t = Timer(
        "a_jobset_restart_gathers_the_new_pods_while_the_old_terminate_and_places_them_whole",
        Instant::now(),
    );
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).with_jobset()).await?;
    let ns = "jobset-restarts";
    let r = async {
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("350m")).await?;
        c.add_node("node-2", NodeShape::cpu("350m")).await?; // room for 6 × 100m
        let api = jobset::api(&c.client(), ns);
        let (leader, old_workers) =
            first_generation_running(&c, ns, json!({"maxRestarts": 1})).await?;
        for w in &old_workers {
            patch_pod(&c, ns, w, json!({"metadata": {"finalizers": [HOLD]}})).await?;
        }
        let second = Generation::new(ns, "train", "1");
        let new_leader =
            fail_leader_for_a_lone_new_one(&c, &second, &leader, &old_workers, true).await?;
        second
            .holds_none_bound(&c, "its workers not created while the old terminate")
            .await?;
        let pods = pods_of(&c, ns, "train").await?;
        for w in &old_workers {
            anyhow::ensure!(
                pods.get(w).is_some_and(is_terminating),
                "{w} was to stay terminating while the new leader waited"
            );
        }
        ensure_gated([pods.get(&new_leader).context("the new leader is gone")?])?;

        let t0 = Instant::now();
        for w in &old_workers {
            patch_pod(
                &c,
                ns,
                w,
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [HOLD]}}),
            )
            .await?;
        }
        let running = second.wait_running_whole(&c).await?;
        eprintln!(
            "new generation placed whole and running {:.1}s after the old workers let go: {running:?}",
            t0.elapsed().as_secs_f64()
        );
        let js = api.get("train").await?;
        anyhow::ensure!(
            js.data["status"]["restarts"] == 1,
            "expected 1 restart, status: {}",
            js.data["status"]
        );
        let left: Vec<String> = pods_of(&c, ns, "train")
            .await?
            .into_iter()
            .filter(|(_, p)| label(p, RESTART_ATTEMPT) != Some("1"))
            .map(|(n, _)| n)
            .collect();
        anyhow::ensure!(left.is_empty(), "old pods left: {left:?}");
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

/// Fails the first generation's `leader` and waits until JobSet's restart has made the leader
/// of generation `next` and nothing else of it (with `old_terminating`, once every one of
/// `old_workers` is terminating too); fails at a partial gang of `next` on any poll. Returns
/// the new leader's name.
async fn fail_leader_for_a_lone_new_one(
    c: &Cluster,
    next: &Generation<'_>,
    leader: &str,
    old_workers: &[String],
    old_terminating: bool,
) -> Result<String> {
    let ns = next.ns;
    patch_pod(
        c,
        ns,
        leader,
        json!({"metadata": {"annotations": {FINISH: "Failed"}}}),
    )
    .await?;
    wait_for(
        &format!(
            "the restart: a new leader while the old workers {}",
            if old_terminating { "terminate" } else { "run" }
        ),
        PLACE,
        || async {
            if let Err(e) = next.check(c).await? {
                anyhow::bail!("{e}");
            }
            let pods = pods_of(c, ns, next.jobset).await?;
            let terminating = old_workers
                .iter()
                .filter(|w| pods.get(*w).is_some_and(is_terminating))
                .count();
            let new: Vec<&String> = pods
                .iter()
                .filter(|(_, p)| label(p, RESTART_ATTEMPT) == Some(next.attempt))
                .map(|(n, _)| n)
                .collect();
            Ok(match new.as_slice() {
                [one] if !old_terminating || terminating == old_workers.len() => {
                    Progress::Done((*one).clone())
                }
                _ => Progress::NotYet(format!(
                    "{terminating} old workers terminating, new pods {new:?}"
                )),
            })
        },
    )
    .await
}

/// The name of the policy (and its binding) [`keep_old_workers`] installs.
const KEEP: &str = "keep-old-workers";

/// Installs a ValidatingAdmissionPolicy refusing the deletion of the first generation's workers
/// of every JobSet (as a garbage collector that is slow to get to them would leave them: live and
/// bound), and waits until the API server enforces it (a dry-run delete of `probe` is refused).
async fn keep_old_workers(c: &Cluster, ns: &str, probe: &str) -> Result<()> {
    let policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
        "metadata": {"name": KEEP},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["DELETE"], "resources": ["pods"]
            }]},
            "validations": [{
                "expression": format!(
                    "!(has(oldObject.metadata.labels) && \
                     oldObject.metadata.labels[?'{RESTART_ATTEMPT}'].orValue('') == '0' && \
                     oldObject.metadata.labels[?'{REPLICATED_JOB_NAME}'].orValue('') == 'workers')"
                ),
                "message": "test policy: the old workers are kept"
            }]
        }
    }))?;
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
        "metadata": {"name": KEEP},
        "spec": {"policyName": KEEP, "validationActions": ["Deny"]}
    }))?;
    let pp = PostParams::default();
    Api::<ValidatingAdmissionPolicy>::all(c.client())
        .create(&pp, &policy)
        .await?;
    Api::<ValidatingAdmissionPolicyBinding>::all(c.client())
        .create(&pp, &binding)
        .await?;
    let pods: Api<Pod> = Api::namespaced(c.client(), ns);
    let dry_run = DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    wait_for(
        "the policy keeping the old workers to be enforced",
        REASON,
        || async {
            Ok(match pods.delete(probe, &dry_run).await {
                Err(kube::Error::Api(e)) if e.message.contains("test policy") => Progress::Done(()),
                Err(e) => anyhow::bail!("a dry-run delete of {probe} failed otherwise: {e}"),
                Ok(_) => Progress::NotYet("a dry-run delete was accepted".into()),
            })
        },
    )
    .await
}

/// Case 3: a JobSet of a leader and 3 workers with `maxRestarts: 1` and `restartStrategy:
/// BlockingRecreate` runs whole on room for exactly 4; its old workers' deletion is refused (they
/// stay live and bound, as behind a slow garbage collector) and the leader fails. JobSet restarts
/// but creates no pod of the next generation while they are there (every poll of a window); a
/// plain pod takes the failed leader's room. The old workers let go, the new generation comes,
/// fits 3 of 4 and nothing of it is bound on any poll of a window; the plain pod deleted, the new
/// generation is placed whole (never part of it on any poll) and runs.
#[tokio::test]
async fn a_jobset_with_blocking_recreate_restarts_after_the_old_pods_are_gone_and_is_placed_whole(
) -> Result<()> {
    let _t = Timer(
        "a_jobset_with_blocking_recreate_restarts_after_the_old_pods_are_gone_and_is_placed_whole",
        Instant::now(),
    );
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).with_jobset()).await?;
    let ns = "jobset-blocking";
    let r = async {
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("200m")).await?;
        c.add_node("node-2", NodeShape::cpu("200m")).await?; // room for 4 × 100m
        let api = jobset::api(&c.client(), ns);
        let policy = json!({"maxRestarts": 1, "restartStrategy": "BlockingRecreate"});
        let (leader, old_workers) = first_generation_running(&c, ns, policy).await?;
        keep_old_workers(&c, ns, &old_workers[0]).await?;
        patch_pod(
            &c,
            ns,
            &leader,
            json!({"metadata": {"annotations": {FINISH: "Failed"}}}),
        )
        .await?;
        wait_for("the restart: the old leader gone", PLACE, || async {
            let js = api.get("train").await?;
            let pods = pods_of(&c, ns, "train").await?;
            Ok(
                if js.data["status"]["restarts"] == 1 && !pods.contains_key(&leader) {
                    Progress::Done(())
                } else {
                    Progress::NotYet(format!(
                        "restarts {}, pods {:?}",
                        js.data["status"]["restarts"],
                        pods.keys()
                    ))
                },
            )
        })
        .await?;
        holds_for(
            "no pod of the next generation while the old workers are there",
            WINDOW,
            || async {
                let pods = pods_of(&c, ns, "train").await?;
                let new: Vec<&String> = pods
                    .iter()
                    .filter(|(_, p)| label(p, RESTART_ATTEMPT) != Some("0"))
                    .map(|(n, _)| n)
                    .collect();
                let kept = old_workers
                    .iter()
                    .filter(|w| pods.get(*w).is_some_and(|p| k8s::pod_node(p).is_some()))
                    .count();
                Ok(if new.is_empty() && kept == old_workers.len() {
                    Ok(())
                } else {
                    Err(format!("new pods {new:?}, {kept} old workers bound"))
                })
            },
        )
        .await?;
        c.create(PodBuilder::new(ns, "plain").cpu("100m")).await?;
        c.wait_bound(ns, &muster_harness::pod_names(&["plain"]), PLACE)
            .await?;

        Api::<ValidatingAdmissionPolicyBinding>::all(c.client())
            .delete(KEEP, &DeleteParams::default())
            .await?;
        let second = Generation::new(ns, "train", "1");
        wait_for("JobSet to create the next generation", PLACE, || async {
            let live = match second.check(&c).await? {
                Ok(live) => live,
                Err(e) => anyhow::bail!("{e}"),
            };
            Ok(if live.len() == MEMBERS {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("{} pods", live.len()))
            })
        })
        .await?;
        second
            .holds_none_bound(&c, "room for 3 of 4: a plain pod took the fourth")
            .await?;
        ensure_gated(second.live(&c).await?.values())?;
        c.delete_pod(ns, "plain").await?;
        let running = second.wait_running_whole(&c).await?;
        eprintln!("new generation placed whole once the plain pod went: {running:?}");
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

/// Case 4: the same restart with JobSet's default `restartStrategy: Recreate`, the old workers'
/// deletion refused (live and bound, as behind a slow garbage collector): JobSet recreates the
/// failed leader's Job at once, so the new leader (`restart-attempt: 1`) comes while the old
/// generation's workers still run bound. It is not a late member of their placed gang: nothing of
/// the new generation is bound on any poll of a window, the new leader stays behind muster's gate,
/// and the old workers are told they are no longer members (`GangMemberSuperseded`). The old
/// workers let go, JobSet creates the new workers and the new generation is placed whole (never
/// part of it on any poll) and runs.
#[tokio::test]
async fn a_jobset_recreated_while_its_old_workers_still_run_binds_nothing_of_the_new_generation_until_it_is_whole(
) -> Result<()> {
    let _t = Timer(
        "a_jobset_recreated_while_its_old_workers_still_run_binds_nothing_of_the_new_generation_until_it_is_whole",
        Instant::now(),
    );
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).with_jobset()).await?;
    let ns = "jobset-recreate";
    let r = async {
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("350m")).await?;
        c.add_node("node-2", NodeShape::cpu("350m")).await?; // room for 6 × 100m
        let (leader, old_workers) =
            first_generation_running(&c, ns, json!({"maxRestarts": 1})).await?;
        keep_old_workers(&c, ns, &old_workers[0]).await?;
        let second = Generation::new(ns, "train", "1");
        let new_leader =
            fail_leader_for_a_lone_new_one(&c, &second, &leader, &old_workers, false).await?;
        second
            .holds_none_bound(&c, "its old workers still run bound")
            .await?;
        let pods = pods_of(&c, ns, "train").await?;
        for w in &old_workers {
            let p = pods.get(w).with_context(|| format!("{w} is gone"))?;
            anyhow::ensure!(
                !is_terminating(p) && k8s::pod_node(p).is_some(),
                "{w} was to stay live and bound while the new leader waited"
            );
        }
        ensure_gated([pods.get(&new_leader).context("the new leader is gone")?])?;
        for w in &old_workers {
            c.wait_event_matching(
                ns,
                std::slice::from_ref(w),
                "GangMemberSuperseded (Normal)",
                REASON,
                |e| e.reason == "GangMemberSuperseded" && e.type_ == "Normal",
            )
            .await?;
        }

        let t0 = Instant::now();
        Api::<ValidatingAdmissionPolicyBinding>::all(c.client())
            .delete(KEEP, &DeleteParams::default())
            .await?;
        let running = second.wait_running_whole(&c).await?;
        eprintln!(
            "new generation placed whole and running {:.1}s after the old workers let go: {running:?}",
            t0.elapsed().as_secs_f64()
        );
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}

/// Case 5: a JobSet deleted and submitted again under its name while the first one's workers
/// still run bound (their deletion refused, as behind a slow garbage collector), on room for 3
/// of the new 4 pods beside them. The new pods are another incarnation of the gang
/// (`jobset.sigs.k8s.io/jobset-uid`), not members joining the old workers: nothing of them is
/// bound on any poll of a window, all behind muster's gate. The old workers gone, the new
/// JobSet is placed whole (never part of it on any poll) and runs.
#[tokio::test]
async fn a_jobset_submitted_again_while_its_old_workers_run_binds_nothing_until_it_is_whole(
) -> Result<()> {
    let _t = Timer(
        "a_jobset_submitted_again_while_its_old_workers_run_binds_nothing_until_it_is_whole",
        Instant::now(),
    );
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).with_jobset()).await?;
    let ns = "jobset-again";
    let r = async {
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("300m")).await?;
        c.add_node("node-2", NodeShape::cpu("300m")).await?; // room for 6 × 100m
        let api = jobset::api(&c.client(), ns);
        let (old_leader, old_workers) =
            first_generation_running(&c, ns, json!({"maxRestarts": 1})).await?;
        let old_uid = api
            .get("train")
            .await?
            .metadata
            .uid
            .context("the JobSet has no uid")?;
        keep_old_workers(&c, ns, &old_workers[0]).await?;
        api.delete("train", &DeleteParams::default()).await?;
        // The first JobSet and its Jobs gone, their workers kept: as the garbage collector
        // leaves them when it has deleted the Jobs and not yet their pods (here it would take
        // its time retrying the refused deletions; the Jobs are deleted orphaning their pods
        // instead), so the new JobSet's Jobs, of the same names, can be created at once. The
        // old leader goes as the garbage collector takes it: orphaned with its Job, it would
        // run on for good, and while an old pod lives, a JobSet submitted again within the
        // same second of the first one's pods waits for it (whole seconds cannot tell which
        // JobSet is later).
        let jobs: Api<Job> = Api::namespaced(c.client(), ns);
        let orphan = DeleteParams {
            propagation_policy: Some(kube::api::PropagationPolicy::Orphan),
            ..Default::default()
        };
        wait_for("the first JobSet and its Jobs gone", PLACE, || async {
            let left: Vec<String> = jobs
                .list(&ListParams::default())
                .await?
                .items
                .into_iter()
                .filter_map(|j| j.metadata.name)
                .collect();
            for j in &left {
                match jobs.delete(j, &orphan).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                    Err(e) => return Err(e.into()),
                }
            }
            let leader_left = pods_of(&c, ns, "train").await?.contains_key(&old_leader);
            if leader_left {
                c.delete_pod(ns, &old_leader).await?;
            }
            Ok(match api.get_opt("train").await? {
                None if left.is_empty() && !leader_left => Progress::Done(()),
                js => Progress::NotYet(format!(
                    "JobSet there: {}, Jobs {left:?}, old leader there: {leader_left}",
                    js.is_some()
                )),
            })
        })
        .await?;
        api.create(
            &PostParams::default(),
            &leader_and_workers(ns, "train", Some(json!({"maxRestarts": 1})))?,
        )
        .await?;
        let new_uid = api
            .get("train")
            .await?
            .metadata
            .uid
            .context("the JobSet has no uid")?;
        anyhow::ensure!(new_uid != old_uid, "the JobSet kept its uid");
        let again = Generation::new(ns, "train", "0").of_uid(&new_uid);
        wait_for("the new JobSet's 4 pods", PLACE, || async {
            let live = match again.check(&c).await? {
                Ok(live) => live,
                Err(e) => anyhow::bail!("{e}"),
            };
            Ok(if live.len() == MEMBERS {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("{} pods", live.len()))
            })
        })
        .await?;
        again
            .holds_none_bound(&c, "room for 3 of 4 beside the old workers")
            .await?;
        let pods = pods_of(&c, ns, "train").await?;
        for w in &old_workers {
            let p = pods.get(w).with_context(|| format!("{w} is gone"))?;
            anyhow::ensure!(
                !is_terminating(p) && k8s::pod_node(p).is_some(),
                "{w} was to stay live and bound while the new JobSet waited"
            );
        }
        ensure_gated(again.live(&c).await?.values())?;

        Api::<ValidatingAdmissionPolicyBinding>::all(c.client())
            .delete(KEEP, &DeleteParams::default())
            .await?;
        // What the garbage collector does once it may (its retries back off): the old pods go,
        // once the API server no longer enforces the removed binding.
        wait_for("the old workers deleted", REASON, || async {
            let mut refused = Vec::new();
            for w in &old_workers {
                if let Err(e) = c.delete_pod(ns, w).await {
                    refused.push(format!("{w}: {e}"));
                }
            }
            Ok(if refused.is_empty() {
                Progress::Done(())
            } else {
                Progress::NotYet(refused.join("; "))
            })
        })
        .await?;
        let running = again.wait_running_whole(&c).await?;
        eprintln!("the JobSet submitted again placed whole once the old workers went: {running:?}");
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}
