//! Kubeflow Trainer v2's controller manager (`github.com/kubeflow/trainer/v2`, built and cached by
//! `tests/cluster/build-trainer.sh`) as a local process beside a cluster's controllers and
//! JobSet's ([`crate::ClusterOptions::with_trainer`]), run as its own install runs it in a
//! cluster, minus what needs a cluster around it:
//! - its CRDs (`manifests/base/crds`: TrainJob, TrainingRuntime, ClusterTrainingRuntime) and
//!   scheduler-plugins' PodGroup CRD (`tests/crds/scheduler-plugins-podgroups.yaml`) created
//!   before it starts: it runs TrainJobs as JobSets (JobSet's CRD comes with
//!   [`crate::jobset`], started first) and, for a runtime with `podGroupPolicy.coscheduling`,
//!   writes a PodGroup, and it watches each kind only if it is served when it starts;
//! - its certificate rotator skipped (`TRAINER_EXTERNAL_WEBHOOK_CERTS`, the one line
//!   build-trainer.sh patches: no flag turns it off, and it certifies only
//!   `<service>.<namespace>.svc` through a Secret a kubelet would mount), a CA and a serving
//!   certificate for 127.0.0.1 made by the harness ([`crate::webhooks`], shared with JobSet and
//!   Kueue) in controller-runtime's default directory, `$TMPDIR/k8s-webhook-server/serving-certs`
//!   (`TMPDIR` is the cluster directory's `trainer/tmp`);
//! - leader election and metrics off (its defaults), the webhook server on a free port and the
//!   health probes on 127.0.0.1;
//! - its install's validating webhooks (`manifests/base/webhook/manifests.yaml`: TrainJobs,
//!   TrainingRuntimes, ClusterTrainingRuntimes; it has no mutating one) pointing at
//!   `https://127.0.0.1:PORT/...` with that CA. The cluster is handed over only once the API
//!   server calls them: a dry-run ClusterTrainingRuntime its webhook refuses is refused.
//!
//! It runs with the admin kubeconfig (`KUBECONFIG`). Everything goes with the cluster: the process
//! is killed with the control plane, whose etcd holds the CRDs and webhook configurations.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Result;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::Client;
use serde_json::json;

use crate::paths::ensure_trainer;
use crate::process::{free_port, Lifetime, ManagedProcess};
use crate::wait::{wait_for, Progress};
use crate::webhooks::{self, ConfigurationNames, LoopbackServing, Selector, Webhook};

/// The label Trainer's runtimes put on a replicated job's template to say which step of the
/// TrainJob it runs (`trainer.kubeflow.org/trainjob-ancestor-step`): `trainer` for the training
/// nodes, whose count is the TrainJob's `spec.trainer.numNodes`.
pub const ANCESTOR_STEP: &str = "trainer.kubeflow.org/trainjob-ancestor-step";

/// The label Trainer puts on every pod of a TrainJob whose runtime has
/// `podGroupPolicy.coscheduling` (scheduler-plugins' `PodGroupLabel`): the TrainJob's name, which
/// is also its PodGroup's.
pub const POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("trainer.kubeflow.org", "v1alpha1", kind),
        plural,
    )
}

/// The TrainJobs of namespace `ns` (`trainer.kubeflow.org/v1alpha1`).
pub fn train_jobs(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &resource("TrainJob", "trainjobs"))
}

/// ClusterTrainingRuntimes (cluster-scoped).
pub fn cluster_training_runtimes(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &resource("ClusterTrainingRuntime", "clustertrainingruntimes"),
    )
}

/// The webhooks Trainer serves (`pkg/webhooks/*.go`, `manifests/base/webhook/manifests.yaml`):
/// three validating ones, none mutating.
const WEBHOOKS: [Webhook; 3] = [
    Webhook {
        name: "validator.clustertrainingruntime.trainer.kubeflow.org",
        mutating: false,
        path: "/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime",
        rule: (
            "trainer.kubeflow.org",
            "v1alpha1",
            &["clustertrainingruntimes"],
            &["CREATE", "UPDATE"],
        ),
        selector: Selector::All,
    },
    Webhook {
        name: "validator.trainingruntime.trainer.kubeflow.org",
        mutating: false,
        path: "/validate-trainer-kubeflow-org-v1alpha1-trainingruntime",
        rule: (
            "trainer.kubeflow.org",
            "v1alpha1",
            &["trainingruntimes"],
            &["CREATE", "UPDATE"],
        ),
        selector: Selector::All,
    },
    Webhook {
        name: "validator.trainjob.trainer.kubeflow.org",
        mutating: false,
        path: "/validate-trainer-kubeflow-org-v1alpha1-trainjob",
        rule: (
            "trainer.kubeflow.org",
            "v1alpha1",
            &["trainjobs"],
            &["CREATE", "UPDATE"],
        ),
        selector: Selector::All,
    },
];

/// The name of Trainer's validating webhook configuration, as its controller manager names it
/// (`webhookConfigurationName` in cmd/trainer-controller-manager/main.go); it has no mutating
/// one, so none is made.
const CONFIGURATIONS: ConfigurationNames = ConfigurationNames {
    mutating: "validator.trainer.kubeflow.org-mutating-unused",
    validating: "validator.trainer.kubeflow.org",
};

/// Trainer's webhook configurations, each webhook's `clientConfig` the URL
/// `https://127.0.0.1:<port><path>` with `ca_pem` as its CA bundle (the mutating one is empty).
pub fn webhook_configurations(
    port: u16,
    ca_pem: &[u8],
) -> Result<(MutatingWebhookConfiguration, ValidatingWebhookConfiguration)> {
    webhooks::configurations(CONFIGURATIONS, &WEBHOOKS, port, ca_pem)
}

/// A ClusterTrainingRuntime Trainer's webhook refuses (a trainer replicated job with 2 replicas:
/// "always must be 1"), for a dry-run create.
fn probe() -> Result<DynamicObject> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "webhook-probe"},
        "spec": {"template": {"spec": {"replicatedJobs": [{
            "name": "node",
            "replicas": 2,
            "template": {
                "metadata": {"labels": {ANCESTOR_STEP: "trainer"}},
                "spec": {"template": {"spec": {
                    "containers": [{"name": "node", "image": "registry.invalid/probe:1"}],
                }}},
            },
        }]}}},
    }))?)
}

/// Creates Trainer's CRDs and scheduler-plugins' PodGroup CRD, starts its controller manager (its
/// log `<dir>/trainer.log`, its files in `<dir>/trainer/`), waits for its `/readyz` (the webhook
/// server is listening), creates its webhook configuration and waits until the API server calls
/// it. `kubeconfig` is an admin's. JobSet's CRD must exist already ([`crate::jobset`]).
pub(crate) async fn start(
    client: &Client,
    kubeconfig: &Path,
    dir: &Path,
    lifetime: Lifetime,
) -> Result<ManagedProcess> {
    let t0 = Instant::now();
    let files = ensure_trainer()?;
    // The paths served are those its manifest names: a Trainer whose paths moved fails here.
    webhooks::ensure_paths(&files.webhook_manifests, &WEBHOOKS)?;
    for crd in &files.crds {
        crate::pod_groups::install_crd(client, &crd.display().to_string()).await?;
    }
    crate::pod_groups::install_crd(client, crate::pod_groups::SCHEDULER_PLUGINS_CRD).await?;
    let crds = t0.elapsed();

    let tdir = dir.join("trainer");
    let tmp = tdir.join("tmp");
    // controller-runtime's default for its webhook server: os.TempDir()/k8s-webhook-server/
    // serving-certs, with tls.crt and tls.key.
    let serving = LoopbackServing::prepare(
        &tmp.join("k8s-webhook-server").join("serving-certs"),
        "trainer-ca",
    )?;
    let health_port = free_port()?;

    let mut cmd = Command::new(&files.binary);
    cmd.arg(format!("--webhook-server-port={}", serving.port))
        .arg(format!(
            "--health-probe-bind-address=127.0.0.1:{health_port}"
        ))
        .arg("--metrics-bind-address=0")
        .arg("--leader-elect=false")
        .env("KUBECONFIG", kubeconfig)
        .env("TMPDIR", &tmp)
        .env("TRAINER_EXTERNAL_WEBHOOK_CERTS", "1");
    let mut p = ManagedProcess::spawn("trainer", cmd, &dir.join("trainer.log"), lifetime)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    crate::control_plane::wait_http_ok("trainer", &mut p, health_port, "/readyz", deadline).await?;
    let ready = t0.elapsed();
    serving
        .register(client, "Trainer", CONFIGURATIONS, &WEBHOOKS)
        .await?;

    // The API server picks webhook configurations up from a watch: until it has, a runtime or
    // TrainJob would be stored unvalidated.
    let runtimes = cluster_training_runtimes(client);
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let probe = probe()?;
    wait_for(
        "the API server to call Trainer's validating webhook",
        Duration::from_secs(30),
        || async {
            Ok(match runtimes.create(&dry_run, &probe).await {
                Err(kube::Error::Api(e)) if e.message.contains("always must be 1") => {
                    Progress::Done(())
                }
                Err(e) => Progress::NotYet(format!("dry-run create: {e}")),
                Ok(_) => Progress::NotYet("stored unvalidated".into()),
            })
        },
    )
    .await?;
    eprintln!(
        "muster-harness: trainer up in {:.1}s (CRDs {:.1}s, /readyz {:.1}s, webhooks called \
         {:.1}s later)",
        t0.elapsed().as_secs_f64(),
        crds.as_secs_f64(),
        (ready - crds).as_secs_f64(),
        (t0.elapsed() - ready).as_secs_f64()
    );
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_validating_configuration_pointing_at_loopback_with_the_ca() {
        let (m, v) = webhook_configurations(9443, b"PEM").unwrap();
        assert!(m.webhooks.unwrap_or_default().is_empty());
        let v = serde_json::to_value(&v).unwrap();
        assert_eq!(v["metadata"]["name"], "validator.trainer.kubeflow.org");
        assert_eq!(v["webhooks"].as_array().unwrap().len(), 3);
        assert_eq!(
            v["webhooks"][2]["clientConfig"]["url"],
            "https://127.0.0.1:9443/validate-trainer-kubeflow-org-v1alpha1-trainjob"
        );
        // base64 of "PEM"
        assert_eq!(v["webhooks"][2]["clientConfig"]["caBundle"], "UEVN");
        assert_eq!(
            v["webhooks"][2]["rules"][0]["resources"],
            json!(["trainjobs"])
        );
    }
}
