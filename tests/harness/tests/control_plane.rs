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

/// `tests/e2e-run`'s shared control planes (`muster_harness::shared`): a reset deletes every kind
/// of object the e2e tests leave behind — a pod bound to a node and held by a finalizer, the
/// node, a namespace, a CRD and its custom resource, a DeviceClass, a PriorityClass and the gang
/// admission policy — so that the next test finds the cluster as the API server made it: a
/// namespace of the same name comes back empty (nothing orphaned in etcd), the CRD can be
/// installed again and a gang pod is no longer marked. A change to one of the API server's own
/// objects is reported (the slot is then started afresh), not silently kept.
#[tokio::test]
async fn a_shared_control_plane_is_reset_to_what_the_api_server_made() -> Result<()> {
    use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
    use k8s_openapi::api::resource::v1::DeviceClass;
    use k8s_openapi::api::scheduling::v1::PriorityClass;
    use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
    use muster_harness::pod_groups::{self, PodGroupApi};
    use muster_harness::shared::Slot;
    use muster_harness::{control_plane::client_from_kubeconfig, dra, policy};
    use serde_json::json;

    /// Stops the detached pair however the test ends (a failed assertion panics).
    struct StopOnDrop(Slot, std::path::PathBuf);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.stop();
            let _ = std::fs::remove_dir_all(&self.1);
        }
    }
    let root = std::env::temp_dir().join(format!("muster-shared-selftest-{}", std::process::id()));
    let slot =
        Slot::start_afresh(&root.join("slot-0"), std::time::Duration::from_secs(120)).await?;
    let guard = StopOnDrop(slot, root);
    let slot = &guard.0;
    async {
        let client = client_from_kubeconfig(&slot.kubeconfig).await?;
        k8s::add_node(&client, "n1", &NodeShape::cpu("2")).await?;
        k8s::create_namespace(&client, "t").await?;
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "held", "namespace": "t", "finalizers": ["example.com/hold"]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "example.invalid/none"}]},
        }))?;
        k8s::create_pod(&client, "t", &pod).await?;
        pod_groups::install_crd(&client, pod_groups::VOLCANO_CRD).await?;
        pod_groups::create(&client, PodGroupApi::Volcano, pod_groups::volcano("t", "g", 2, &[]))
            .await?;
        Api::<DeviceClass>::all(client.clone())
            .create(&PostParams::default(), &dra::driver_class("gpu.example.com")?)
            .await?;
        let pc: PriorityClass =
            serde_json::from_value(json!({"metadata": {"name": "high"}, "value": 1000}))?;
        Api::<PriorityClass>::all(client.clone())
            .create(&PostParams::default(), &pc)
            .await?;
        policy::apply_gang_admission_policy(&client).await?;

        let report = slot.reset(&client).await?;
        assert!(report.deleted >= 8, "deleted only {}: {report:?}", report.deleted);
        assert!(report.baseline_changed.is_empty(), "{report:?}");

        assert!(Api::<Node>::all(client.clone()).list(&ListParams::default()).await?.items.is_empty());
        let names: Vec<String> = Api::<Namespace>::all(client.clone())
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect();
        assert!(!names.iter().any(|n| n == "t" || n == "muster-policy-probe"), "{names:?}");
        assert!(Api::<PriorityClass>::all(client.clone()).get_opt("high").await?.is_none());
        // The same namespace again is empty: its pod did not outlive it in etcd.
        k8s::create_namespace(&client, "t").await?;
        assert!(k8s::list_pods(&client, "t").await?.is_empty());
        // The CRD went with its custom resources and installs again.
        pod_groups::install_crd(&client, pod_groups::VOLCANO_CRD).await?;
        // A gang pod is no longer marked and gated by the deleted policy.
        let probe = PodBuilder::new("t", "probe").annotation("muster.dev/group", "g").build();
        let created = k8s::create_pod(&client, "t", &probe).await?;
        assert!(!policy::is_marked(&created), "{created:?}");

        // One of the API server's own objects changed: reported, for the slot to start afresh.
        Api::<Namespace>::all(client.clone())
            .patch(
                "default",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
            )
            .await?;
        let report = slot.reset(&client).await?;
        assert_eq!(report.baseline_changed, ["Namespace default changed"], "{report:?}");
        Ok::<(), anyhow::Error>(())
    }
    .await
}
