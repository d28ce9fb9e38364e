//! Self-test of the harness: a control plane starts, takes a fake node and a pod, and stops.

use std::time::Instant;

use anyhow::Result;
use muster_harness::k8s::{self, NodeShape, PodBuilder};
use muster_harness::{ControlPlane, ControlPlaneOptions};

#[tokio::test]
async fn control_plane_starts_and_serves_nodes_and_pods() -> Result<()> {
    let t0 = Instant::now();
    let cp = ControlPlane::start(ControlPlaneOptions::default()).await?;
    eprintln!(
        "control plane (etcd + kube-apiserver) ready in {:.1}s",
        t0.elapsed().as_secs_f64()
    );
    let client = cp.client();
    let node = k8s::add_node(&client, "n1", &NodeShape::cpu("2").gpus(4)).await?;
    let alloc = node.status.unwrap().allocatable.unwrap();
    assert_eq!(alloc["nvidia.com/gpu"].0, "4");
    k8s::create_namespace(&client, "t").await?;
    PodBuilder::new("t", "p").gpus(1).create(&client).await?;
    assert_eq!(k8s::list_pods(&client, "t").await?.len(), 1);
    k8s::delete_pod(&client, "t", "p").await?;
    let dir = cp.dir().to_path_buf();
    drop(cp);
    assert!(!dir.exists() || std::env::var_os("MUSTER_KEEP_DATA").is_some());
    Ok(())
}
