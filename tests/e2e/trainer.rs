//! End-to-end: gangs as Kubeflow Trainer v2 submits them, on a cluster with the controllers a real
//! one has, JobSet's controller and webhooks and Trainer's controller manager and webhooks
//! (`ClusterOptions::with_trainer`: kube-controller-manager, KWOK playing the kubelets, JobSet
//! v0.10.1 and Trainer v2.0.0 as local processes; tests/harness/src/trainer.rs). muster is
//! installed as `kubectl apply -k deploy/` installs it. The user writes nothing of muster's: a
//! ClusterTrainingRuntime with `podGroupPolicy.coscheduling` (as for scheduler-plugins'
//! coscheduling plugin) and TrainJobs on it. Trainer turns each TrainJob into a JobSet whose pods
//! carry `scheduling.x-k8s.io/pod-group: <TrainJob>` and writes a scheduler-plugins PodGroup of
//! that name with `minMember` the TrainJob's `numNodes`; muster reads the label as the gang and
//! the PodGroup's `minMember` as its quorum.
//!
//! 1. A TrainJob of 4 nodes on room for 3: nothing is bound on every poll of a window, every pod
//!    is `SchedulingGated` behind muster's gate with muster's `GangWaiting` reason (`3 of 4
//!    members fit`); a node added, the 4 are bound together (never part of them on any poll),
//!    run, and the TrainJob completes.
//!
//! 2. Two TrainJobs of 4 nodes each on room for 6, submitted together: Trainer writes their
//!    PodGroups and JobSets in no fixed order (its plugins are a Go map), and stock
//!    kube-scheduler would bind pods of both as they come (4 + 2, or 3 + 3: two half-placed jobs,
//!    the coscheduling plugin's reason to exist). With muster one is placed whole and the other
//!    binds nothing, on every poll of a window, holding nothing (`2 of 4 members fit`); once the
//!    first completes, the second is placed whole.
//!
//! Without muster (`tests/control-run`) kube-scheduler binds the pods that fit at once, so each
//! test fails there on a cluster-truth check: the first binds 3 of 4, the second leaves one
//! TrainJob partly bound.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::Api;
use muster_harness::jobset::JOBSET_NAME;
use muster_harness::pod_groups::PodGroupApi;
use muster_harness::policy::GATHER_GATE;
use muster_harness::trainer::{self, ANCESTOR_STEP, POD_GROUP_LABEL};
use muster_harness::PartialGang;
use muster_harness::{
    holds_for, k8s, wait_for, Cluster, ClusterOptions, NodeShape, Progress, Timer, CLUSTER_TRUTH,
    PLACE, REASON, WINDOW,
};
use serde_json::json;

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");

/// The annotation tests/cluster/kwok-stages.yaml finishes a running pod on.
const FINISH: &str = "muster.dev/test-finish";

/// The ClusterTrainingRuntime the tests' TrainJobs run on.
const RUNTIME: &str = "muster-gang";

/// The nodes of each TrainJob (`spec.trainer.numNodes`): its pods, and its PodGroup's minMember.
const NODES: usize = 4;

/// A ClusterTrainingRuntime as a cluster administrator writes one for gang scheduling with
/// scheduler-plugins' coscheduling: `podGroupPolicy.coscheduling` (its `scheduleTimeoutSeconds`
/// left to Trainer's default, 60), a plain ML policy of 1 node (each TrainJob says how many), and
/// a JobSet template of one replicated job, `node`, marked as the trainer step, its container
/// asking 100m CPU.
fn runtime() -> Result<DynamicObject> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": RUNTIME},
        "spec": {
            "mlPolicy": {"numNodes": 1},
            "podGroupPolicy": {"coscheduling": {}},
            "template": {"spec": {"replicatedJobs": [{
                "name": "node",
                "template": {
                    "metadata": {"labels": {ANCESTOR_STEP: "trainer"}},
                    "spec": {"template": {"spec": {
                        "restartPolicy": "Never",
                        "containers": [{
                            "name": "node",
                            "image": "registry.invalid/train:1",
                            "resources": {"requests": {"cpu": "100m"}},
                        }],
                    }}},
                },
            }]}},
        },
    }))?)
}

/// A TrainJob `ns/name` of [`NODES`] nodes on [`RUNTIME`], as a user writes it.
fn train_job(ns: &str, name: &str) -> Result<DynamicObject> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "runtimeRef": {"name": RUNTIME},
            "trainer": {"numNodes": NODES},
        },
    }))?)
}

fn label<'a>(p: &'a Pod, key: &str) -> Option<&'a str> {
    p.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn phase(p: &Pod) -> Option<&str> {
    p.status.as_ref().and_then(|s| s.phase.as_deref())
}

/// One TrainJob's pods (those of its JobSet, named after it), watched for the gang's invariant
/// across polls: some but fewer than quorum of its live pods bound for longer than `FAN_OUT`
/// is a partial gang (cluster truth).
struct TrainJob<'a> {
    c: &'a Cluster,
    ns: &'a str,
    name: &'a str,
    partial: PartialGang,
}

impl<'a> TrainJob<'a> {
    /// Creates TrainJob `ns/name` ([`train_job`]).
    async fn submit(c: &'a Cluster, ns: &'a str, name: &'a str) -> Result<Self> {
        trainer::train_jobs(&c.client(), ns)
            .create(&PostParams::default(), &train_job(ns, name)?)
            .await
            .with_context(|| format!("creating TrainJob {ns}/{name}"))?;
        Ok(Self {
            c,
            ns,
            name,
            partial: PartialGang::default(),
        })
    }

    /// The TrainJob's live pods (neither terminating nor finished), by name.
    async fn live(&self) -> Result<BTreeMap<String, Pod>> {
        Ok(self
            .c
            .pods(self.ns)
            .await?
            .into_iter()
            .filter(|p| label(p, JOBSET_NAME) == Some(self.name))
            .filter(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && !matches!(phase(p), Some("Succeeded" | "Failed"))
            })
            .map(|p| (k8s::pod_name(&p).to_string(), p))
            .collect())
    }

    /// The live pods' names, once all [`NODES`] exist.
    async fn wait_created(&self) -> Result<Vec<String>> {
        wait_for(
            &format!("TrainJob {}/{}: {NODES} pods created", self.ns, self.name),
            PLACE,
            || async {
                let live = self.live().await?;
                Ok(if live.len() == NODES {
                    Progress::Done(live.keys().cloned().collect())
                } else {
                    Progress::NotYet(format!("{} pods", live.len()))
                })
            },
        )
        .await
    }

    /// One poll: the live pods, or the cluster truth broken (a partial gang, an over-committed
    /// node).
    async fn check(&self) -> Result<std::result::Result<BTreeMap<String, Pod>, String>> {
        let live = self.live().await?;
        let bound: Vec<String> = live
            .iter()
            .filter_map(|(n, p)| k8s::pod_node(p).map(|node| format!("{n} → {node}")))
            .collect();
        let what = format!("TrainJob {}/{}: ", self.ns, self.name);
        if let Err(e) = self.partial.judge(&what, &bound, NODES) {
            return Ok(Err(e));
        }
        if let Err(e) = self.c.check_no_overcommit().await? {
            return Ok(Err(e));
        }
        Ok(Ok(live))
    }

    /// How many of the live pods run; an error when the check finds the cluster truth broken.
    async fn running(&self) -> Result<usize> {
        let live = match self.check().await? {
            Ok(live) => live,
            Err(e) => anyhow::bail!("{e}"),
        };
        Ok(live
            .values()
            .filter(|p| phase(p) == Some("Running"))
            .count())
    }

    /// Waits until all [`NODES`] pods are live, bound and Running; fails at the first partial
    /// gang. Returns their names.
    async fn wait_running_whole(&self) -> Result<Vec<String>> {
        wait_for(
            &format!("TrainJob {}/{}: {NODES} pods running", self.ns, self.name),
            PLACE,
            || async {
                let live = match self.check().await? {
                    Ok(live) => live,
                    Err(e) => anyhow::bail!("{e}"),
                };
                let bound = live.values().filter(|p| k8s::pod_node(p).is_some()).count();
                let running: Vec<String> = live
                    .iter()
                    .filter(|(_, p)| phase(p) == Some("Running"))
                    .map(|(n, _)| n.clone())
                    .collect();
                Ok(if running.len() == NODES {
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

    /// On every poll of [`WINDOW`]: none of the TrainJob's pods bound.
    async fn holds_none_bound(&self, why: &str) -> Result<()> {
        holds_for(
            &format!("no pod of TrainJob {}/{} bound ({why})", self.ns, self.name),
            WINDOW,
            || async {
                let bound: Vec<String> = self
                    .live()
                    .await?
                    .iter()
                    .filter_map(|(n, p)| k8s::pod_node(p).map(|node| format!("{n} → {node}")))
                    .collect();
                Ok(if bound.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "{CLUSTER_TRUTH} TrainJob {}/{} partly bound: {}",
                        self.ns,
                        self.name,
                        bound.join(", ")
                    ))
                })
            },
        )
        .await
    }

    /// The scheduler-plugins PodGroups of the TrainJob's namespace.
    fn pod_groups(&self) -> Api<DynamicObject> {
        let api = PodGroupApi::SchedulerPlugins;
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(api.group(), api.version(), "PodGroup"),
            "podgroups",
        );
        Api::namespaced_with(self.c.client(), self.ns, &resource)
    }

    /// What Trainer wrote for the gang: its PodGroup (named after the TrainJob) with `minMember`
    /// [`NODES`], and the PodGroup label on every pod.
    async fn ensure_trainers_pod_group(&self) -> Result<()> {
        let pg = wait_for(
            &format!("Trainer's PodGroup {}/{}", self.ns, self.name),
            REASON,
            || async {
                Ok(match self.pod_groups().get_opt(self.name).await? {
                    Some(pg) => Progress::Done(pg),
                    None => Progress::NotYet("no PodGroup".into()),
                })
            },
        )
        .await?;
        eprintln!(
            "Trainer's PodGroup {}/{}: spec {}",
            self.ns, self.name, pg.data["spec"]
        );
        ensure!(
            pg.data["spec"]["minMember"] == json!(NODES),
            "PodGroup {}/{}: minMember {}, expected {NODES}",
            self.ns,
            self.name,
            pg.data["spec"]["minMember"]
        );
        for (n, p) in self.live().await? {
            ensure!(
                label(&p, POD_GROUP_LABEL) == Some(self.name),
                "{n}: label {POD_GROUP_LABEL} is {:?}, expected {}",
                label(&p, POD_GROUP_LABEL),
                self.name
            );
        }
        Ok(())
    }

    /// Each pod is held behind muster's gate, and the API server reports it
    /// `PodScheduled=False/SchedulingGated` (what `kubectl get pods` shows as `SchedulingGated`).
    async fn ensure_gated(&self) -> Result<()> {
        for (name, p) in self.live().await? {
            let gates: Vec<&str> = p
                .spec
                .as_ref()
                .and_then(|s| s.scheduling_gates.as_ref())
                .map(|g| g.iter().map(|g| g.name.as_str()).collect())
                .unwrap_or_default();
            ensure!(
                gates.contains(&GATHER_GATE),
                "{name} is not behind {GATHER_GATE}: gates {gates:?}"
            );
            let reason = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
                .and_then(|c| c.reason.as_deref());
            ensure!(
                reason == Some("SchedulingGated"),
                "{name}: PodScheduled reason {reason:?}, expected SchedulingGated"
            );
        }
        Ok(())
    }

    /// Prints what a user sees while the TrainJob waits: the pods' Events, the TrainJob's status.
    async fn log_what_users_see(&self) -> Result<()> {
        for n in self.live().await?.keys() {
            for e in self.c.events_for(self.ns, n).await? {
                eprintln!("event on {n}: {e}");
            }
        }
        let tj = trainer::train_jobs(&self.c.client(), self.ns)
            .get(self.name)
            .await?;
        eprintln!(
            "TrainJob {}/{} while it waits: status {}",
            self.ns, self.name, tj.data["status"]
        );
        let js = muster_harness::jobset::api(&self.c.client(), self.ns)
            .get(self.name)
            .await?;
        eprintln!(
            "JobSet {}/{} while it waits: status {}",
            self.ns, self.name, js.data["status"]
        );
        let pg = self.pod_groups().get(self.name).await?;
        eprintln!(
            "PodGroup {}/{} while it waits: status {}",
            self.ns, self.name, pg.data["status"]
        );
        Ok(())
    }

    /// Finishes every pod (KWOK marks it Succeeded) and waits for the TrainJob's `Complete`
    /// condition.
    async fn finish(&self, pods: &[String]) -> Result<()> {
        let api = Api::<Pod>::namespaced(self.c.client(), self.ns);
        for p in pods {
            api.patch(
                p,
                &PatchParams::default(),
                &Patch::Strategic(json!({"metadata": {"annotations": {FINISH: "Succeeded"}}})),
            )
            .await
            .with_context(|| format!("finishing {}/{p}", self.ns))?;
        }
        let tjs = trainer::train_jobs(&self.c.client(), self.ns);
        wait_for(
            &format!("TrainJob {}/{} Complete", self.ns, self.name),
            PLACE,
            || async {
                let tj = tjs.get(self.name).await?;
                let done = tj.data["status"]["conditions"]
                    .as_array()
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == "Complete" && c["status"] == "True")
                    });
                Ok(if done {
                    Progress::Done(())
                } else {
                    Progress::NotYet(format!("status: {}", tj.data["status"]))
                })
            },
        )
        .await
    }
}

/// The cluster both tests run on, with the runtime created (Trainer's webhook validates it).
async fn cluster_with_runtime() -> Result<Cluster> {
    let c = Cluster::start_with(ClusterOptions::new(MUSTER).with_trainer()).await?;
    trainer::cluster_training_runtimes(&c.client())
        .create(&PostParams::default(), &runtime()?)
        .await
        .context("creating the ClusterTrainingRuntime")?;
    // Trainer's TrainJob webhook looks the runtime up in its informer cache, which may not have
    // it yet: a TrainJob created at once is then refused ("must be created before the TrainJob",
    // seen under load). Wait until a dry-run TrainJob on it passes the webhook.
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let probe = train_job("default", "runtime-probe")?;
    wait_for("Trainer's webhook to know the runtime", REASON, || async {
        match trainer::train_jobs(&c.client(), "default")
            .create(&dry_run, &probe)
            .await
        {
            Ok(_) => Ok(Progress::Done(())),
            Err(kube::Error::Api(e)) if e.message.contains("must be created before") => {
                Ok(Progress::NotYet(e.message))
            }
            Err(e) => Err(anyhow::Error::new(e).context("a dry-run TrainJob on the runtime")),
        }
    })
    .await?;
    Ok(c)
}

/// Case 1: a TrainJob of 4 nodes on a coscheduling runtime, on room for 3, binds nothing on
/// every poll of a window, every pod gated behind muster's gate with muster's reason; a second
/// node makes room and the 4 pods are bound whole (never part of them on any poll) and run; they
/// succeed and the TrainJob completes.
#[tokio::test]
async fn a_trainjob_on_a_coscheduling_runtime_waits_gated_and_is_placed_whole() -> Result<()> {
    let _t = Timer(
        "a_trainjob_on_a_coscheduling_runtime_waits_gated_and_is_placed_whole",
        Instant::now(),
    );
    let c = cluster_with_runtime().await?;
    let ns = "trainjobs";
    let r = async {
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("350m")).await?; // room for 3 × 100m
        let job = TrainJob::submit(&c, ns, "train").await?;
        let pods = job.wait_created().await?;
        job.ensure_trainers_pod_group().await?;
        job.holds_none_bound("room for 3 of 4").await?;
        job.ensure_gated().await?;
        c.wait_gang_waiting_event(
            ns,
            &pods,
            &format!("gang {ns}/train: 3 of {NODES} members fit"),
            REASON,
        )
        .await?;
        job.log_what_users_see().await?;

        let t0 = Instant::now();
        c.add_node("node-2", NodeShape::cpu("350m")).await?;
        let running = job.wait_running_whole().await?;
        eprintln!(
            "placed whole and running {:.1}s after node-2: {running:?}",
            t0.elapsed().as_secs_f64()
        );
        job.finish(&running).await
    }
    .await;
    c.report(&[ns], r).await
}

/// Case 2: two TrainJobs of 4 nodes each, submitted together on room for 6: one is placed whole
/// and runs while the other binds nothing (never part of either on any poll), gated with muster's
/// reason; once the first completes, the second is placed whole and runs.
#[tokio::test]
async fn two_trainjobs_competing_for_room_for_one_run_one_after_the_other_each_whole() -> Result<()>
{
    let _t = Timer(
        "two_trainjobs_competing_for_room_for_one_run_one_after_the_other_each_whole",
        Instant::now(),
    );
    let c = cluster_with_runtime().await?;
    let ns = "trainjob-rivals";
    let r = async {
        c.namespace(ns).await?;
        c.add_node("node-1", NodeShape::cpu("350m")).await?;
        c.add_node("node-2", NodeShape::cpu("350m")).await?; // room for 6 × 100m
        let a = TrainJob::submit(&c, ns, "train-a").await?;
        let b = TrainJob::submit(&c, ns, "train-b").await?;

        // Whichever muster places first (priority, then age) runs whole; the other may not be
        // partly bound on any poll meanwhile.
        let first_is_a = wait_for("one of the two TrainJobs running whole", PLACE, || async {
            let (ra, rb) = (a.running().await?, b.running().await?);
            Ok(if ra == NODES {
                Progress::Done(true)
            } else if rb == NODES {
                Progress::Done(false)
            } else {
                Progress::NotYet(format!("train-a {ra} running, train-b {rb} running"))
            })
        })
        .await?;
        let (first, second) = if first_is_a { (&a, &b) } else { (&b, &a) };
        let second_pods = second.wait_created().await?;
        second.ensure_trainers_pod_group().await?;
        second
            .holds_none_bound("the other TrainJob holds 4 of the room for 6")
            .await?;
        second.ensure_gated().await?;
        c.wait_gang_waiting_event(
            ns,
            &second_pods,
            &format!("gang {ns}/{}: 2 of {NODES} members fit", second.name),
            REASON,
        )
        .await?;
        second.log_what_users_see().await?;

        let t0 = Instant::now();
        let first_pods: Vec<String> = first.live().await?.keys().cloned().collect();
        first.finish(&first_pods).await?;
        let running = second.wait_running_whole().await?;
        eprintln!(
            "{} placed whole and running {:.1}s after {} finished: {running:?}",
            second.name,
            t0.elapsed().as_secs_f64(),
            first.name
        );
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}
