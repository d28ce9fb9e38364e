//! API Priority and Fairness on the real kube-apiserver: with `deploy/flowcontrol.yaml` applied,
//! the Lease requests of muster's ServiceAccount are classified into muster's own priority level
//! (`muster-leader-election`), and its other requests are not. The API server names the
//! FlowSchema and priority level of every request it classifies in the response headers
//! `X-Kubernetes-PF-FlowSchema-UID` and `X-Kubernetes-PF-PriorityLevel-UID`.

use std::process::Command;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use kube::Api;
use muster_harness::control_plane::client_from_kubeconfig;
use muster_harness::paths::{control_plane_bin_dir, repo_root};
use muster_harness::{rbac, wait_for, ControlPlane, ControlPlaneOptions, Progress};

const NAME: &str = "muster-leader-election";

/// The FlowSchema and priority level UIDs the API server classified a GET of `path` into.
async fn classified(client: &kube::Client, path: &str) -> Result<(String, String)> {
    let req = axum::http::Request::get(path).body(kube::client::Body::from(Vec::new()))?;
    let resp = client
        .send(req)
        .await
        .with_context(|| format!("GET {path}"))?;
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
            .with_context(|| format!("GET {path}: no {name} header (HTTP {})", resp.status()))
    };
    Ok((
        header("x-kubernetes-pf-flowschema-uid")?,
        header("x-kubernetes-pf-prioritylevel-uid")?,
    ))
}

#[tokio::test]
async fn musters_lease_requests_have_a_priority_level_of_their_own() -> Result<()> {
    // The harness turns APF off for speed; this test turns it back on (later flags win).
    let cp = ControlPlane::start(ControlPlaneOptions {
        apiserver_args: [
            "--enable-priority-and-fairness=true",
            "--max-requests-inflight=400",
            "--max-mutating-requests-inflight=200",
        ]
        .map(String::from)
        .to_vec(),
        ..ControlPlaneOptions::default()
    })
    .await?;
    let admin = cp.client();
    let sa_kubeconfig =
        rbac::service_account_kubeconfig(&admin, cp.kubeconfig_path(), cp.dir(), 1).await?;
    let kubectl = control_plane_bin_dir().join("kubectl");
    let out = Command::new(if kubectl.is_file() {
        kubectl
    } else {
        "kubectl".into()
    })
    .current_dir(repo_root())
    .env_remove("KUBECONFIG")
    .args(["--kubeconfig"])
    .arg(cp.kubeconfig_path())
    .args(["apply", "-f", "deploy/flowcontrol.yaml"])
    .output()
    .context("running kubectl")?;
    ensure!(
        out.status.success(),
        "kubectl apply -f deploy/flowcontrol.yaml: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let schema = Api::<FlowSchema>::all(admin.clone()).get(NAME).await?;
    let level = Api::<PriorityLevelConfiguration>::all(admin.clone())
        .get(NAME)
        .await?;
    let ours = (
        schema.metadata.uid.context("FlowSchema without uid")?,
        level.metadata.uid.context("level without uid")?,
    );
    let muster = client_from_kubeconfig(&sa_kubeconfig).await?;
    let lease = "/apis/coordination.k8s.io/v1/namespaces/muster-system/leases/muster";
    // The API server's APF configuration controller picks the new objects up from its informer.
    wait_for(
        "muster's Lease request in its own priority level",
        Duration::from_secs(30),
        || async {
            let got = classified(&muster, lease).await?;
            Ok(if got == ours {
                Progress::Done(())
            } else {
                Progress::NotYet(format!("classified as {got:?}, ours are {ours:?}"))
            })
        },
    )
    .await?;
    // Only the Lease: muster's bulk traffic stays where it was.
    let pods = classified(&muster, "/api/v1/pods?limit=1").await?;
    ensure!(
        pods.0 != ours.0 && pods.1 != ours.1,
        "a pod list of muster's landed in its Lease level: {pods:?}"
    );
    Ok(())
}
