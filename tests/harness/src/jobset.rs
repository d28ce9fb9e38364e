//! JobSet's controller (`sigs.k8s.io/jobset`, built and cached by
//! `tests/cluster/build-jobset.sh`) as a local process beside a cluster's controllers
//! ([`crate::ClusterOptions::with_jobset`]), run as its own install runs it in a cluster, minus
//! what needs a cluster around it:
//! - its CRD (`jobsets.jobset.x-k8s.io`) created before it starts;
//! - its configuration file with internal certificate management off (the rotator writes a
//!   Secret in its namespace and certifies only `<service>.<namespace>.svc`), leader election off,
//!   metrics off, the webhook server and health probes on 127.0.0.1 ports of their own;
//! - a CA and a serving certificate for 127.0.0.1 made by the harness in the directory its webhook
//!   server reads (`tls.crt`, `tls.key`; [`crate::webhooks`], shared with Kueue and Trainer);
//! - the webhook configurations of its install (`config/components/webhook/`, with the pod
//!   webhooks' object selector from its patches), pointing at `https://127.0.0.1:PORT/...` with
//!   that CA. Its defaulting webhook is required: a JobSet it has not defaulted (no
//!   `spec.network`) makes its reconciler panic. So the cluster is handed over only once a
//!   dry-run JobSet comes back defaulted.
//!
//! It runs with the admin kubeconfig. Everything goes with the cluster: the process is killed
//! with the control plane, whose etcd holds the CRD and webhook configurations.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::Client;
use serde_json::json;

use crate::paths::ensure_jobset;
use crate::process::{free_port, Lifetime, ManagedProcess};
use crate::wait::{wait_for, Progress};
use crate::webhooks::{self, ConfigurationNames, LoopbackServing, Selector, Webhook};

/// The label (and annotation) JobSet puts on every Job and pod it creates: the JobSet's name.
pub const JOBSET_NAME: &str = "jobset.sigs.k8s.io/jobset-name";

/// The label JobSet puts on every Job and pod it creates: which replicated job it belongs to.
pub const REPLICATED_JOB_NAME: &str = "jobset.sigs.k8s.io/replicatedjob-name";

/// The label JobSet puts on every Job and pod it creates: the JobSet's `status.restarts` when it
/// created them (0 for the first generation; a restart recreates every Job with the next value).
pub const RESTART_ATTEMPT: &str = "jobset.sigs.k8s.io/restart-attempt";

/// The JobSet API (`jobset.x-k8s.io/v1alpha2`, kind `JobSet`).
pub fn api_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("jobset.x-k8s.io", "v1alpha2", "JobSet"),
        "jobsets",
    )
}

/// The JobSets of namespace `ns`.
pub fn api(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &api_resource())
}

/// The webhooks JobSet serves (`pkg/webhooks/*.go`, `config/components/webhook/manifests.yaml`);
/// the pod ones only for pods JobSet made (`jobset.sigs.k8s.io/jobset-name` exists), as its
/// install's patches select them: other pods never wait on JobSet.
const WEBHOOKS: [Webhook; 4] = [
    Webhook {
        name: "mjobset.kb.io",
        mutating: true,
        path: "/mutate-jobset-x-k8s-io-v1alpha2-jobset",
        rule: ("jobset.x-k8s.io", "v1alpha2", &["jobsets"], &["CREATE"]),
        selector: Selector::All,
    },
    Webhook {
        name: "mpod.kb.io",
        mutating: true,
        path: "/mutate--v1-pod",
        rule: ("", "v1", &["pods"], &["CREATE"]),
        selector: Selector::ObjectLabelExists(JOBSET_NAME),
    },
    Webhook {
        name: "vjobset.kb.io",
        mutating: false,
        path: "/validate-jobset-x-k8s-io-v1alpha2-jobset",
        rule: (
            "jobset.x-k8s.io",
            "v1alpha2",
            &["jobsets"],
            &["CREATE", "UPDATE"],
        ),
        selector: Selector::All,
    },
    Webhook {
        name: "vpod.kb.io",
        mutating: false,
        path: "/validate--v1-pod",
        rule: ("", "v1", &["pods"], &["CREATE"]),
        selector: Selector::ObjectLabelExists(JOBSET_NAME),
    },
];

/// The names of JobSet's webhook configurations, as its install names them.
const CONFIGURATIONS: ConfigurationNames = ConfigurationNames {
    mutating: "jobset-mutating-webhook-configuration",
    validating: "jobset-validating-webhook-configuration",
};

/// JobSet's configuration file (`config.jobset.x-k8s.io/v1alpha1` `Configuration`, decoded
/// strictly): everything on 127.0.0.1, no certificate rotator, no leader election, no metrics.
pub fn config_yaml(webhook_port: u16, cert_dir: &Path, health_port: u16) -> String {
    format!(
        "apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: {webhook_port}
  certDir: {cert_dir}
health:
  healthProbeBindAddress: 127.0.0.1:{health_port}
metrics:
  bindAddress: \"0\"
",
        cert_dir = cert_dir.display()
    )
}

/// The mutating and validating webhook configurations of JobSet's install, each webhook's
/// `clientConfig` the URL `https://127.0.0.1:<port><path>` with `ca_pem` as its CA bundle.
pub fn webhook_configurations(
    port: u16,
    ca_pem: &[u8],
) -> Result<(MutatingWebhookConfiguration, ValidatingWebhookConfiguration)> {
    webhooks::configurations(CONFIGURATIONS, &WEBHOOKS, port, ca_pem)
}

/// A JobSet of one replicated job of one pod, for a dry-run create.
fn probe(ns: &str) -> Result<DynamicObject> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "webhook-probe", "namespace": ns},
        "spec": {"replicatedJobs": [{
            "name": "probe",
            "template": {"spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "probe", "image": "registry.invalid/probe:1"}],
            }}}},
        }]},
    }))?)
}

/// Creates JobSet's CRD, starts its controller (its log `<dir>/jobset.log`, its files in
/// `<dir>/jobset/`), waits for its `/readyz` (the webhook server is listening), creates the webhook
/// configurations and waits until the API server calls them (a dry-run JobSet comes back
/// defaulted). `kubeconfig` is an admin's.
pub(crate) async fn start(
    client: &Client,
    kubeconfig: &Path,
    dir: &Path,
    lifetime: Lifetime,
) -> Result<ManagedProcess> {
    let t0 = Instant::now();
    let files = ensure_jobset()?;
    // The paths served are those its manifests name: a JobSet whose paths moved fails here.
    webhooks::ensure_paths(&files.webhook_manifests, &WEBHOOKS)?;
    crate::pod_groups::install_crd(client, &files.crd.display().to_string()).await?;

    let jdir = dir.join("jobset");
    let serving = LoopbackServing::prepare(&jdir.join("certs"), "jobset-ca")?;
    let health_port = free_port()?;
    let config = jdir.join("config.yaml");
    fs::write(
        &config,
        config_yaml(serving.port, &serving.cert_dir, health_port),
    )
    .with_context(|| format!("writing {}", config.display()))?;

    let mut cmd = Command::new(&files.binary);
    cmd.arg(format!("--config={}", config.display()))
        .arg(format!("--kubeconfig={}", kubeconfig.display()));
    let mut p = ManagedProcess::spawn("jobset", cmd, &dir.join("jobset.log"), lifetime)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    crate::control_plane::wait_http_ok("jobset", &mut p, health_port, "/readyz", deadline).await?;
    let ready = t0.elapsed();
    serving
        .register(client, "JobSet", CONFIGURATIONS, &WEBHOOKS)
        .await?;

    // The API server picks webhook configurations up from a watch: until it has, a JobSet would
    // be stored undefaulted.
    let jobsets = api(client, "default");
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let probe = probe("default")?;
    wait_for(
        "the API server to call JobSet's defaulting webhook",
        Duration::from_secs(30),
        || async {
            Ok(match jobsets.create(&dry_run, &probe).await {
                Ok(o) if o.data["spec"]["network"].is_object() => Progress::Done(()),
                Ok(o) => Progress::NotYet(format!("stored undefaulted: spec {}", o.data["spec"])),
                Err(e) => Progress::NotYet(format!("dry-run create: {e}")),
            })
        },
    )
    .await?;
    eprintln!(
        "muster-harness: jobset up in {:.1}s (CRD, certificates and /readyz {:.1}s, webhooks \
         called {:.1}s later)",
        t0.elapsed().as_secs_f64(),
        ready.as_secs_f64(),
        (t0.elapsed() - ready).as_secs_f64()
    );
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn webhook_configurations_point_at_loopback_with_the_ca() {
        let (m, v) = webhook_configurations(9443, b"PEM").unwrap();
        let m = serde_json::to_value(&m).unwrap();
        let v = serde_json::to_value(&v).unwrap();
        assert_eq!(m["webhooks"].as_array().unwrap().len(), 2);
        assert_eq!(v["webhooks"].as_array().unwrap().len(), 2);
        assert_eq!(
            m["webhooks"][0]["clientConfig"]["url"],
            "https://127.0.0.1:9443/mutate-jobset-x-k8s-io-v1alpha2-jobset"
        );
        // base64 of "PEM"
        assert_eq!(m["webhooks"][0]["clientConfig"]["caBundle"], "UEVN");
        assert_eq!(
            v["webhooks"][1]["objectSelector"]["matchExpressions"][0]["key"],
            JOBSET_NAME
        );
        assert!(m["webhooks"][0].get("objectSelector").is_none());
    }

    #[test]
    fn config_turns_off_what_needs_a_cluster() {
        let c = config_yaml(1, Path::new("/certs"), 2);
        let v: Value = serde_saphyr::from_str(&c).unwrap();
        assert_eq!(v["internalCertManagement"]["enable"], false);
        assert_eq!(v["leaderElection"]["leaderElect"], false);
        assert_eq!(v["webhook"]["host"], "127.0.0.1");
        assert_eq!(v["webhook"]["port"], 1);
        assert_eq!(v["webhook"]["certDir"], "/certs");
        assert_eq!(v["health"]["healthProbeBindAddress"], "127.0.0.1:2");
        assert_eq!(v["metrics"]["bindAddress"], "0");
    }
}
