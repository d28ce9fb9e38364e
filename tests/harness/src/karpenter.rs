//! Karpenter on the test's own control plane ([`ClusterOptions::with_karpenter`]): its KWOK
//! cloud provider built from the Go module proxy (tests/cluster/build-karpenter.sh), its CRDs
//! from the same source, one KWOKNodeClass and one NodePool the test shapes
//! ([`KarpenterPool`]), and what a test reads back (NodeClaims, the nodes Karpenter added,
//! CapacityBuffers).
//!
//! [`ClusterOptions::with_karpenter`]: crate::cluster::ClusterOptions::with_karpenter

use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::Client;
use serde_json::json;

use crate::paths::run_build_script;

/// The label Karpenter puts on every node it launched (the NodePool's name).
pub const NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";

/// The KWOK instance type the harness's NodePool launches by default: 4 CPUs, 16 GiB (what is
/// allocatable on it is a little less: the provider subtracts its overhead).
pub const DEFAULT_INSTANCE_TYPE: &str = "c-4x-amd64-linux";

/// The NodePool a cluster with Karpenter gets: one instance type, a CPU limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KarpenterPool {
    pub name: String,
    /// `node.kubernetes.io/instance-type` values the pool may launch (KWOK's names).
    pub instance_types: Vec<String>,
    /// `spec.limits.cpu` (whole CPUs): Karpenter launches nothing that would take the pool's
    /// nodes beyond it.
    pub cpu_limit: Option<u32>,
}

impl Default for KarpenterPool {
    fn default() -> Self {
        KarpenterPool {
            name: "default".into(),
            instance_types: vec![DEFAULT_INSTANCE_TYPE.into()],
            cpu_limit: Some(64),
        }
    }
}

static BUILD_LOCK: Mutex<()> = Mutex::new(());

/// Karpenter's build: the binary and the directory of its CRDs.
#[derive(Debug, Clone)]
pub struct KarpenterBuild {
    pub binary: PathBuf,
    pub files: PathBuf,
}

/// Builds (once; cached like the control plane) Karpenter's KWOK cloud provider.
pub fn ensure_karpenter() -> Result<KarpenterBuild> {
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let bin = run_build_script(&["tests/cluster/build-karpenter.sh"])?;
    let build = KarpenterBuild {
        binary: bin.join("karpenter-kwok"),
        files: bin.parent().context("no cache directory")?.join("files"),
    };
    if !build.binary.is_file() || !build.files.is_dir() {
        bail!(
            "{} or {} missing after build-karpenter.sh succeeded",
            build.binary.display(),
            build.files.display()
        );
    }
    Ok(build)
}

/// Installs every CRD of Karpenter's build (NodePool, NodeClaim, NodeOverlay, KWOKNodeClass,
/// CapacityBuffer) and waits until each is served.
pub async fn install_crds(client: &Client, build: &KarpenterBuild) -> Result<()> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(&build.files)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    for f in files {
        crate::pod_groups::install_crd(client, &f.to_string_lossy()).await?;
    }
    Ok(())
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// `karpenter.sh/v1` NodePools.
pub fn node_pools() -> ApiResource {
    resource("karpenter.sh", "v1", "NodePool", "nodepools")
}

/// `karpenter.sh/v1` NodeClaims.
pub fn node_claims() -> ApiResource {
    resource("karpenter.sh", "v1", "NodeClaim", "nodeclaims")
}

/// `autoscaling.x-k8s.io/v1beta1` CapacityBuffers.
pub fn capacity_buffers() -> ApiResource {
    resource(
        "autoscaling.x-k8s.io",
        "v1beta1",
        "CapacityBuffer",
        "capacitybuffers",
    )
}

/// Creates the KWOKNodeClass `default` and `pool`'s NodePool (no disruption: a test counts
/// the nodes Karpenter added, and consolidation would take them away under it).
pub async fn create_pool(client: &Client, pool: &KarpenterPool) -> Result<()> {
    let classes = resource(
        "karpenter.kwok.sh",
        "v1alpha1",
        "KWOKNodeClass",
        "kwoknodeclasses",
    );
    let class: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": "default"},
    }))?;
    match Api::<DynamicObject>::all_with(client.clone(), &classes)
        .create(&PostParams::default(), &class)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e).context("creating KWOKNodeClass default"),
    }
    let mut spec = json!({
        "template": {"spec": {
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In",
                 "values": pool.instance_types},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            ],
            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass",
                             "name": "default"},
            "expireAfter": "Never",
        }},
        "disruption": {"consolidateAfter": "Never", "budgets": [{"nodes": "0"}]},
    });
    if let Some(cpu) = pool.cpu_limit {
        spec["limits"] = json!({"cpu": cpu.to_string()});
    }
    let np: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": pool.name},
        "spec": spec,
    }))?;
    Api::<DynamicObject>::all_with(client.clone(), &node_pools())
        .create(&PostParams::default(), &np)
        .await
        .with_context(|| format!("creating NodePool {}", pool.name))?;
    Ok(())
}

/// Every NodeClaim Karpenter made (a node launched or being launched), by name.
pub async fn node_claim_names(client: &Client) -> Result<Vec<String>> {
    let list = Api::<DynamicObject>::all_with(client.clone(), &node_claims())
        .list(&ListParams::default())
        .await?;
    let mut names: Vec<String> = list
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    names.sort();
    Ok(names)
}

/// Every CapacityBuffer of namespace `ns`, by name.
pub async fn capacity_buffer_names(client: &Client, ns: &str) -> Result<Vec<String>> {
    let list = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &capacity_buffers())
        .list(&ListParams::default())
        .await?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect())
}
