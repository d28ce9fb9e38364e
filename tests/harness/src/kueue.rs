//! Kueue's controller manager (`sigs.k8s.io/kueue`, built and cached by
//! `tests/cluster/build-kueue.sh`) as a local process beside a cluster's controllers
//! ([`crate::ClusterOptions::with_kueue`]), run as its own install runs it in a cluster, minus
//! what needs a cluster around it:
//! - its CRDs (`config/components/crd/bases`: ClusterQueue, LocalQueue, Workload,
//!   ResourceFlavor, Cohort, …) created before it starts (its caches watch every one);
//! - its configuration file (`config.kueue.x-k8s.io/v1beta2`, decoded strictly) with internal
//!   certificate management off (the rotator writes a Secret in its namespace and certifies only
//!   `<service>.<namespace>.svc`), leader election off, metrics off, the visibility API server off
//!   (feature gate `VisibilityOnDemand`: an aggregated API server needs a Service), the webhook
//!   server and health probes on 127.0.0.1 ports of their own; the pod integration only
//!   (`integrations.frameworks: [pod]`), for namespaces labelled [`MANAGED_NAMESPACE_LABEL`]
//!   (`managedJobsNamespaceSelector`, required with the pod integration, and the pod webhooks'
//!   `namespaceSelector`, as its install's patches set both); `muster.dev/` resources excluded
//!   from quota (`resources.excludeResourcePrefixes`: the admission policy's marker
//!   `muster.dev/gang` is no resource a ClusterQueue covers, and a Workload asking for one is
//!   never admitted);
//! - a CA and a serving certificate for 127.0.0.1 made by the harness in the directory its webhook
//!   server reads (`tls.crt`, `tls.key`; [`crate::webhooks`], shared with JobSet and Trainer),
//!   and another for its metrics server
//!   in the directory `KUEUE_METRICS_CERT_DIR` names (with its certificate management off Kueue
//!   reads one at start even with metrics off; build-kueue.sh makes the directory configurable);
//! - the webhook configurations of its install for what it serves with only the pod integration
//!   (pods, Workloads, ClusterQueues, ResourceFlavors, Cohorts; `config/components/webhook/`),
//!   pointing at `https://127.0.0.1:PORT/...` with that CA. Its pod webhook gates each pod of a
//!   managed namespace that names a queue (`kueue.x-k8s.io/queue-name`) with
//!   [`ADMISSION_GATE`] (and, with topology-aware scheduling on, as by default, [`TOPOLOGY_GATE`])
//!   and adds its finalizer; Kueue removes both gates once the pod's Workload is admitted. The
//!   cluster is handed over only once a dry-run pod comes back gated.
//!
//! It runs with the admin kubeconfig. Everything goes with the cluster: the process is killed
//! with the control plane, whose etcd holds the CRDs, queues and webhook configurations.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::Client;
use serde_json::{json, Value};

use crate::paths::ensure_kueue;
use crate::process::{free_port, Lifetime, ManagedProcess};
use crate::tls::{CertPair, Usage};
use crate::wait::{wait_for, Progress};
use crate::webhooks::{self, ConfigurationNames, LoopbackServing, Selector, Webhook};

/// The label a pod (or job) names its LocalQueue with: Kueue manages only what names one.
pub const QUEUE_NAME: &str = "kueue.x-k8s.io/queue-name";

/// The scheduling gate Kueue's pod webhook adds and Kueue removes once the Workload is admitted.
pub const ADMISSION_GATE: &str = "kueue.x-k8s.io/admission";

/// The scheduling gate of Kueue's topology-aware scheduling (on by default in v0.17): added beside
/// [`ADMISSION_GATE`] and removed with it when the Workload asks for no topology.
pub const TOPOLOGY_GATE: &str = "kueue.x-k8s.io/topology";

/// The label (key, value) of the namespaces whose pods Kueue manages here: its
/// `managedJobsNamespaceSelector` and its pod webhooks' `namespaceSelector`.
pub const MANAGED_NAMESPACE_LABEL: (&str, &str) = ("kueue-managed", "true");

/// The ResourceFlavor [`create_queues`] makes (no node labels: any node).
pub const FLAVOR: &str = "default-flavor";

fn gvk_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", kind),
        plural,
    )
}

/// ClusterQueues (`kueue.x-k8s.io/v1beta2`, cluster-scoped).
pub fn cluster_queues(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &gvk_resource("ClusterQueue", "clusterqueues"),
    )
}

/// The LocalQueues of namespace `ns`.
pub fn local_queues(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &gvk_resource("LocalQueue", "localqueues"),
    )
}

/// The Workloads of namespace `ns` (a pod group's is named after the group).
pub fn workloads(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &gvk_resource("Workload", "workloads"))
}

/// ResourceFlavors (cluster-scoped).
pub fn resource_flavors(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &gvk_resource("ResourceFlavor", "resourceflavors"),
    )
}

/// Condition `type_` of a Kueue object's `status.conditions`: `(status, reason, message)`.
pub fn condition(obj: &DynamicObject, type_: &str) -> Option<(String, String, String)> {
    let c = obj.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?;
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    Some((s("status"), s("reason"), s("message")))
}

/// Whether condition `type_` is True.
pub fn condition_true(obj: &DynamicObject, type_: &str) -> bool {
    condition(obj, type_).is_some_and(|(s, _, _)| s == "True")
}

/// Creates namespace `name` labelled [`MANAGED_NAMESPACE_LABEL`]: Kueue manages its pods.
pub async fn managed_namespace(client: &Client, name: &str) -> Result<()> {
    let (k, v) = MANAGED_NAMESPACE_LABEL;
    let ns: Namespace = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {k: v}},
    }))?;
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("creating namespace {name}")),
    }
}

/// The `spec.resourceGroups` of a ClusterQueue of one flavor ([`FLAVOR`]) covering cpu and
/// memory, with `cpu` as its CPU quota and room enough for memory.
fn resource_groups(cpu: &str) -> Value {
    json!([{
        "coveredResources": ["cpu", "memory"],
        "flavors": [{
            "name": FLAVOR,
            "resources": [
                {"name": "cpu", "nominalQuota": cpu},
                {"name": "memory", "nominalQuota": "64Gi"},
            ],
        }],
    }])
}

/// What a Kueue user sets up once: ResourceFlavor [`FLAVOR`], ClusterQueue `cluster_queue`
/// (every namespace, `namespaceSelector: {}`; `cpu` of CPU quota), and LocalQueue `local_queue`
/// in `ns` pointing at it. Waits until both queues are Active.
pub async fn create_queues(
    client: &Client,
    ns: &str,
    cluster_queue: &str,
    local_queue: &str,
    cpu: &str,
) -> Result<()> {
    let pp = PostParams::default();
    let flavor: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": FLAVOR},
    }))?;
    match resource_flavors(client).create(&pp, &flavor).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e).context("creating Kueue's ResourceFlavor"),
    }
    let cq: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": cluster_queue},
        "spec": {"namespaceSelector": {}, "resourceGroups": resource_groups(cpu)},
    }))?;
    cluster_queues(client)
        .create(&pp, &cq)
        .await
        .with_context(|| format!("creating ClusterQueue {cluster_queue}"))?;
    let lq: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": local_queue, "namespace": ns},
        "spec": {"clusterQueue": cluster_queue},
    }))?;
    local_queues(client, ns)
        .create(&pp, &lq)
        .await
        .with_context(|| format!("creating LocalQueue {ns}/{local_queue}"))?;
    wait_for(
        &format!("ClusterQueue {cluster_queue} and LocalQueue {ns}/{local_queue} Active"),
        Duration::from_secs(30),
        || async {
            let cq = cluster_queues(client).get(cluster_queue).await?;
            let lq = local_queues(client, ns).get(local_queue).await?;
            Ok(
                if condition_true(&cq, "Active") && condition_true(&lq, "Active") {
                    Progress::Done(())
                } else {
                    Progress::NotYet(format!(
                        "ClusterQueue {:?}, LocalQueue {:?}",
                        condition(&cq, "Active"),
                        condition(&lq, "Active")
                    ))
                },
            )
        },
    )
    .await
}

/// Sets ClusterQueue `name`'s CPU quota to `cpu` (what an administrator does to let more in).
pub async fn set_cpu_quota(client: &Client, name: &str, cpu: &str) -> Result<()> {
    cluster_queues(client)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resourceGroups": resource_groups(cpu)}})),
        )
        .await
        .with_context(|| format!("setting ClusterQueue {name}'s cpu quota to {cpu}"))?;
    Ok(())
}

/// The webhooks Kueue serves with only the pod integration (`pkg/webhooks/*.go`,
/// `pkg/controller/jobs/pod/pod_webhook.go`, `config/components/webhook/manifests.yaml`); the pod
/// ones only for namespaces labelled [`MANAGED_NAMESPACE_LABEL`], as its install's patches limit
/// them to the namespaces it manages.
const WEBHOOKS: [Webhook; 9] = [
    Webhook {
        name: "mpod.kb.io",
        mutating: true,
        path: "/mutate--v1-pod",
        rule: ("", "v1", &["pods"], &["CREATE"]),
        selector: Selector::NamespaceLabel(MANAGED_NAMESPACE_LABEL.0, MANAGED_NAMESPACE_LABEL.1),
    },
    Webhook {
        name: "vpod.kb.io",
        mutating: false,
        path: "/validate--v1-pod",
        rule: ("", "v1", &["pods"], &["CREATE", "UPDATE"]),
        selector: Selector::NamespaceLabel(MANAGED_NAMESPACE_LABEL.0, MANAGED_NAMESPACE_LABEL.1),
    },
    Webhook {
        name: "mworkload.kb.io",
        mutating: true,
        path: "/mutate-kueue-x-k8s-io-v1beta2-workload",
        rule: ("kueue.x-k8s.io", "v1beta2", &["workloads"], &["CREATE"]),
        selector: Selector::All,
    },
    Webhook {
        name: "vworkload.kb.io",
        mutating: false,
        path: "/validate-kueue-x-k8s-io-v1beta2-workload",
        rule: (
            "kueue.x-k8s.io",
            "v1beta2",
            &["workloads", "workloads/status"],
            &["CREATE", "UPDATE"],
        ),
        selector: Selector::All,
    },
    Webhook {
        name: "mclusterqueue.kb.io",
        mutating: true,
        path: "/mutate-kueue-x-k8s-io-v1beta2-clusterqueue",
        rule: ("kueue.x-k8s.io", "v1beta2", &["clusterqueues"], &["CREATE"]),
        selector: Selector::All,
    },
    Webhook {
        name: "vclusterqueue.kb.io",
        mutating: false,
        path: "/validate-kueue-x-k8s-io-v1beta2-clusterqueue",
        rule: (
            "kueue.x-k8s.io",
            "v1beta2",
            &["clusterqueues"],
            &["CREATE", "UPDATE"],
        ),
        selector: Selector::All,
    },
    Webhook {
        name: "mresourceflavor.kb.io",
        mutating: true,
        path: "/mutate-kueue-x-k8s-io-v1beta2-resourceflavor",
        rule: (
            "kueue.x-k8s.io",
            "v1beta2",
            &["resourceflavors"],
            &["CREATE"],
        ),
        selector: Selector::All,
    },
    Webhook {
        name: "vresourceflavor.kb.io",
        mutating: false,
        path: "/validate-kueue-x-k8s-io-v1beta2-resourceflavor",
        rule: (
            "kueue.x-k8s.io",
            "v1beta2",
            &["resourceflavors"],
            &["CREATE", "UPDATE"],
        ),
        selector: Selector::All,
    },
    Webhook {
        name: "vcohort.kb.io",
        mutating: false,
        path: "/validate-kueue-x-k8s-io-v1beta2-cohort",
        rule: (
            "kueue.x-k8s.io",
            "v1beta2",
            &["cohorts"],
            &["CREATE", "UPDATE"],
        ),
        selector: Selector::All,
    },
];

/// The names of Kueue's webhook configurations, as its install names them.
const CONFIGURATIONS: ConfigurationNames = ConfigurationNames {
    mutating: "kueue-mutating-webhook-configuration",
    validating: "kueue-validating-webhook-configuration",
};

/// Kueue's configuration file (`config.kueue.x-k8s.io/v1beta2` `Configuration`, decoded
/// strictly): everything on 127.0.0.1, no certificate rotator, no leader election, no metrics,
/// no visibility server; the pod integration for managed namespaces; `muster.dev/` resources not
/// counted against quota.
pub fn config_yaml(webhook_port: u16, cert_dir: &Path, health_port: u16) -> String {
    let (k, v) = MANAGED_NAMESPACE_LABEL;
    format!(
        "apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
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
clientConnection:
  qps: 50
  burst: 100
manageJobsWithoutQueueName: false
managedJobsNamespaceSelector:
  matchLabels:
    {k}: \"{v}\"
integrations:
  frameworks:
  - pod
resources:
  excludeResourcePrefixes:
  - muster.dev/
featureGates:
  VisibilityOnDemand: false
",
        cert_dir = cert_dir.display()
    )
}

/// The mutating and validating webhook configurations of Kueue's install for the webhooks it
/// serves here, each webhook's `clientConfig` the URL `https://127.0.0.1:<port><path>` with
/// `ca_pem` as its CA bundle.
pub fn webhook_configurations(
    port: u16,
    ca_pem: &[u8],
) -> Result<(MutatingWebhookConfiguration, ValidatingWebhookConfiguration)> {
    webhooks::configurations(CONFIGURATIONS, &WEBHOOKS, port, ca_pem)
}

/// The namespace of the dry-run pod that tells Kueue's pod webhook is called.
const PROBE_NAMESPACE: &str = "kueue-webhook-probe";

/// A pod naming a queue, for a dry-run create in [`PROBE_NAMESPACE`].
fn probe() -> Result<Pod> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "webhook-probe",
            "namespace": PROBE_NAMESPACE,
            "labels": {QUEUE_NAME: "probe"},
        },
        "spec": {"containers": [{"name": "probe", "image": "registry.invalid/probe:1"}]},
    }))?)
}

/// The names of `pod`'s scheduling gates.
pub fn gates(pod: &Pod) -> Vec<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .map(|g| g.iter().map(|g| g.name.as_str()).collect())
        .unwrap_or_default()
}

/// Creates Kueue's CRDs, starts its controller manager (its log `<dir>/kueue.log`, its files in
/// `<dir>/kueue/`), waits for its `/readyz` (the webhook server is listening), creates the
/// webhook configurations and waits until the API server calls them (a dry-run pod naming a
/// queue comes back behind [`ADMISSION_GATE`]). `kubeconfig` is an admin's.
pub(crate) async fn start(
    client: &Client,
    kubeconfig: &Path,
    dir: &Path,
    lifetime: Lifetime,
) -> Result<ManagedProcess> {
    let t0 = Instant::now();
    let files = ensure_kueue()?;
    // The paths served are those its manifests name: a Kueue whose paths moved fails here.
    webhooks::ensure_paths(&files.webhook_manifests, &WEBHOOKS)?;
    for crd in &files.crds {
        crate::pod_groups::install_crd(client, &crd.display().to_string()).await?;
    }
    let crds = t0.elapsed();

    let kdir = dir.join("kueue");
    let serving = LoopbackServing::prepare(&kdir.join("certs"), "kueue-ca")?;
    let metrics_dir = kdir.join("metrics-certs");
    fs::create_dir_all(&metrics_dir)?;
    serving.ca.issue_to(
        "kueue-metrics",
        Usage::Server,
        &CertPair {
            cert: metrics_dir.join("tls.crt"),
            key: metrics_dir.join("tls.key"),
        },
    )?;
    let health_port = free_port()?;
    let config = kdir.join("config.yaml");
    fs::write(
        &config,
        config_yaml(serving.port, &serving.cert_dir, health_port),
    )
    .with_context(|| format!("writing {}", config.display()))?;

    let mut cmd = Command::new(&files.binary);
    cmd.arg(format!("--config={}", config.display()))
        .env("KUBECONFIG", kubeconfig)
        .env("KUEUE_METRICS_CERT_DIR", &metrics_dir);
    let mut p = ManagedProcess::spawn("kueue", cmd, &dir.join("kueue.log"), lifetime)?;
    let deadline = Instant::now() + Duration::from_secs(90);
    crate::control_plane::wait_http_ok("kueue", &mut p, health_port, "/readyz", deadline).await?;
    let ready = t0.elapsed();
    serving
        .register(client, "Kueue", CONFIGURATIONS, &WEBHOOKS)
        .await?;

    // The API server picks webhook configurations up from a watch: until it has, a pod would be
    // stored without Kueue's gate.
    managed_namespace(client, PROBE_NAMESPACE).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), PROBE_NAMESPACE);
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let probe = probe()?;
    wait_for(
        "the API server to call Kueue's pod webhook",
        Duration::from_secs(30),
        || async {
            Ok(match pods.create(&dry_run, &probe).await {
                Ok(p) if gates(&p).contains(&ADMISSION_GATE) => Progress::Done(()),
                Ok(p) => Progress::NotYet(format!("stored with gates {:?}", gates(&p))),
                Err(e) => Progress::NotYet(format!("dry-run create: {e}")),
            })
        },
    )
    .await?;
    eprintln!(
        "muster-harness: kueue up in {:.1}s (CRDs {:.1}s, certificates and /readyz {:.1}s, \
         webhooks called {:.1}s later)",
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
    fn webhook_configurations_point_at_loopback_with_the_ca() {
        let (m, v) = webhook_configurations(9443, b"PEM").unwrap();
        let m = serde_json::to_value(&m).unwrap();
        let v = serde_json::to_value(&v).unwrap();
        assert_eq!(m["webhooks"].as_array().unwrap().len(), 4);
        assert_eq!(v["webhooks"].as_array().unwrap().len(), 5);
        assert_eq!(
            m["webhooks"][0]["clientConfig"]["url"],
            "https://127.0.0.1:9443/mutate--v1-pod"
        );
        // base64 of "PEM"
        assert_eq!(m["webhooks"][0]["clientConfig"]["caBundle"], "UEVN");
        assert_eq!(v["webhooks"][4]["clientConfig"]["caBundle"], "UEVN");
        assert_eq!(
            m["webhooks"][0]["namespaceSelector"]["matchLabels"]["kueue-managed"],
            "true"
        );
        assert_eq!(
            v["webhooks"][0]["namespaceSelector"]["matchLabels"]["kueue-managed"],
            "true"
        );
        assert!(m["webhooks"][1].get("namespaceSelector").is_none());
        assert_eq!(
            v["webhooks"][1]["rules"][0]["resources"],
            json!(["workloads", "workloads/status"])
        );
    }

    #[test]
    fn config_turns_off_what_needs_a_cluster_and_manages_pods_of_labelled_namespaces() {
        let c = config_yaml(1, Path::new("/certs"), 2);
        let v: Value = serde_saphyr::from_str(&c).unwrap();
        assert_eq!(v["internalCertManagement"]["enable"], false);
        assert_eq!(v["leaderElection"]["leaderElect"], false);
        assert_eq!(v["webhook"]["host"], "127.0.0.1");
        assert_eq!(v["webhook"]["port"], 1);
        assert_eq!(v["webhook"]["certDir"], "/certs");
        assert_eq!(v["health"]["healthProbeBindAddress"], "127.0.0.1:2");
        assert_eq!(v["metrics"]["bindAddress"], "0");
        assert_eq!(v["featureGates"]["VisibilityOnDemand"], false);
        assert_eq!(v["integrations"]["frameworks"], json!(["pod"]));
        assert_eq!(
            v["managedJobsNamespaceSelector"]["matchLabels"]["kueue-managed"],
            "true"
        );
        assert_eq!(
            v["resources"]["excludeResourcePrefixes"],
            json!(["muster.dev/"])
        );
    }
}
