//! End-to-end: Dynamic Resource Allocation (resource.k8s.io/v1) in muster's whole-gang check, on
//! the real control plane with the stock kube-scheduler (its DynamicResources plugin, on by
//! default) and muster as its extender. DRA objects are plain API objects: the test publishes
//! ResourceSlices for fake nodes, a DeviceClass, and for each pod whose claim comes from a
//! ResourceClaimTemplate it does what kube-controller-manager's resourceclaim controller would
//! (which the harness does not run): creates the claim, owned by the pod, and names it in the
//! pod's `status.resourceClaimStatuses`. kube-scheduler allocates the claims (`status.allocation`)
//! when it binds.
//!
//! Without muster (`tests/control-run`) kube-scheduler binds the member that fits on the one node
//! with 4 free devices, so the test fails there on cluster truth.

use std::collections::BTreeSet;
use std::time::Instant;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{Pod, PodResourceClaim};
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use muster_harness::dra;
use muster_harness::k8s::{self, KeyScheme};
use muster_harness::timing::PROMPTLY;
use muster_harness::{
    ensure_truth, spread, wait_for, Cluster, NodeShape, PodBuilder, Progress, Timer, PLACE, REASON,
    TOGETHER,
};
use serde_json::json;

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");
const CLASS: &str = "gpu.example.com";

/// A node with `gpus` devices of class `gpu.example.com`, published in a node-local slice
/// (pool = node name).
async fn gpu_node(c: &Cluster, name: &str, gpus: usize) -> Result<()> {
    c.add_node(name, NodeShape::cpu("8")).await?;
    let devices: Vec<_> = (0..gpus)
        .map(|i| json!({"name": format!("gpu-{i}"), "attributes": {"model": {"string": "a100"}}}))
        .collect();
    let slice = dra::node_slice(CLASS, name, devices)?;
    Api::<ResourceSlice>::all(c.client())
        .create(&PostParams::default(), &slice)
        .await
        .with_context(|| format!("creating the slice of {name}"))?;
    Ok(())
}

async fn device_class(c: &Cluster) -> Result<()> {
    Api::<DeviceClass>::all(c.client())
        .create(&PostParams::default(), &dra::driver_class(CLASS)?)
        .await?;
    Ok(())
}

fn claim_spec(count: u32) -> serde_json::Value {
    json!({"devices": {"requests": [
        {"name": "gpus", "exactly": {"deviceClassName": CLASS, "count": count}}
    ]}})
}

/// Creates `pod` with one claim `gpus`: from template `template`, with the claim made for it as
/// the resourceclaim controller would; or, with `claim`, that claim by name.
async fn create_with_claim(
    c: &Cluster,
    ns: &str,
    pod: PodBuilder,
    source: ClaimOf<'_>,
) -> Result<()> {
    let mut p: Pod = pod.build();
    let name = p.metadata.name.clone().unwrap_or_default();
    let spec = p.spec.as_mut().context("pod without spec")?;
    spec.resource_claims = Some(vec![match source {
        ClaimOf::Template(t) => PodResourceClaim {
            name: "gpus".into(),
            resource_claim_template_name: Some(t.into()),
            ..Default::default()
        },
        ClaimOf::Claim(c) => PodResourceClaim {
            name: "gpus".into(),
            resource_claim_name: Some(c.into()),
            ..Default::default()
        },
    }]);
    let created = k8s::create_pod(&c.client(), ns, &p).await?;
    let ClaimOf::Template(t) = source else {
        return Ok(());
    };
    let template = Api::<ResourceClaimTemplate>::namespaced(c.client(), ns)
        .get(t)
        .await?;
    let claim_name = format!("{name}-gpus");
    let claim: ResourceClaim = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {
            "name": claim_name, "namespace": ns,
            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpus"},
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "Pod", "name": name,
                "uid": created.metadata.uid, "controller": true, "blockOwnerDeletion": true
            }]
        },
        "spec": template.spec.and_then(|s| s.spec),
    }))?;
    Api::<ResourceClaim>::namespaced(c.client(), ns)
        .create(&PostParams::default(), &claim)
        .await?;
    let status = json!({"status": {"resourceClaimStatuses": [
        {"name": "gpus", "resourceClaimName": claim_name}
    ]}});
    Api::<Pod>::namespaced(c.client(), ns)
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

#[derive(Clone, Copy)]
enum ClaimOf<'a> {
    Template(&'a str),
    Claim(&'a str),
}

/// The pool (= node) of the devices allocated to `ns/claim`, if it is allocated.
async fn allocated_on(c: &Cluster, ns: &str, claim: &str) -> Result<Option<BTreeSet<String>>> {
    let claim = Api::<ResourceClaim>::namespaced(c.client(), ns)
        .get(claim)
        .await?;
    Ok(claim
        .status
        .and_then(|s| s.allocation)
        .and_then(|a| a.devices)
        .and_then(|d| d.results)
        .map(|r| r.into_iter().map(|r| r.pool).collect()))
}

/// 3 nodes with 4 + 2 + 2 devices; a gang of 2 members, each with a claim from a template for 4
/// devices: 8 devices in all, but only one node with 4. The gang binds nothing and says why
/// with the class and the numbers; a plain pod with a 4-device claim takes n1 at once. With the
/// plain pod gone and a fourth node with 4 devices, the gang is placed whole, and
/// kube-scheduler allocates each member's claim on its own node.
#[tokio::test]
async fn dynamic_resources_gang_of_device_claims_holds_nothing_until_each_member_has_a_node_with_4_devices(
) -> Result<()> {
    let _t = Timer("dra_gang_of_device_claims", Instant::now());
    let c = Cluster::start(MUSTER).await?;
    let ns = "dra";
    let r = async {
        c.namespace(ns).await?;
        device_class(&c).await?;
        for (name, gpus) in [("n1", 4), ("n2", 2), ("n3", 2)] {
            gpu_node(&c, name, gpus).await?;
        }
        let template: ResourceClaimTemplate = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "four-gpus", "namespace": ns},
            "spec": {"spec": claim_spec(4)}
        }))?;
        Api::<ResourceClaimTemplate>::namespaced(c.client(), ns)
            .create(&PostParams::default(), &template)
            .await?;

        let gang: Vec<String> = (0..2).map(|i| format!("train-{i}")).collect();
        for name in &gang {
            let pod = PodBuilder::new(ns, name)
                .cpu("1")
                .gang(KeyScheme::Kueue, "train", 2);
            create_with_claim(&c, ns, pod, ClaimOf::Template("four-gpus")).await?;
        }
        let reason = format!(
            "gang {ns}/train: 2 members need 4 devices of class {CLASS} each; nodes with 4 \
             free: 1"
        );
        c.wait_gang_waiting_whole(ns, "train", &gang, &reason, REASON)
            .await?;

        // A plain pod with a claim for 4 devices takes the room at once.
        let plain: ResourceClaim = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "plain-gpus", "namespace": ns},
            "spec": claim_spec(4)
        }))?;
        Api::<ResourceClaim>::namespaced(c.client(), ns)
            .create(&PostParams::default(), &plain)
            .await?;
        let t0 = Instant::now();
        create_with_claim(
            &c,
            ns,
            PodBuilder::new(ns, "plain").cpu("1"),
            ClaimOf::Claim("plain-gpus"),
        )
        .await?;
        let bound = c.wait_bound(ns, &["plain".to_string()], PROMPTLY).await?;
        eprintln!(
            "plain bound to {} after {:?}",
            bound["plain"].0,
            bound["plain"].1.duration_since(t0)
        );
        ensure_truth!(bound["plain"].0 == "n1", "plain pod not on n1: {bound:?}");
        ensure_truth!(c.count_bound(ns, &gang).await? == 0, "a member was bound");

        // The plain pod gone (its claim too: no controller deallocates it here), and a fourth
        // node with 4 devices: the gang is placed whole, one member per 4-device node.
        c.delete_pod(ns, "plain").await?;
        let claims = Api::<ResourceClaim>::namespaced(c.client(), ns);
        claims
            .delete("plain-gpus", &DeleteParams::default())
            .await?;
        claims
            .patch(
                "plain-gpus",
                &PatchParams::default(),
                &Patch::Merge(&json!({"metadata": {"finalizers": null}})),
            )
            .await
            .ok();
        wait_for("the plain pod's claim to be gone", REASON, || async {
            Ok(match claims.get_opt("plain-gpus").await? {
                None => Progress::Done(()),
                Some(_) => Progress::NotYet("still there".to_string()),
            })
        })
        .await?;
        gpu_node(&c, "n4", 4).await?;
        let bound = c.wait_bound(ns, &gang, PLACE).await?;
        ensure_truth!(spread(&bound) <= TOGETHER, "not bound together: {bound:?}");
        let nodes: BTreeSet<&str> = bound.values().map(|(n, _)| n.as_str()).collect();
        ensure_truth!(
            nodes == BTreeSet::from(["n1", "n4"]),
            "not on the two 4-device nodes: {bound:?}"
        );
        for (name, (node, _)) in &bound {
            let pools = allocated_on(&c, ns, &format!("{name}-gpus")).await?;
            ensure_truth!(
                pools == Some(BTreeSet::from([node.clone()])),
                "{name} on {node}, its claim allocated on {pools:?}"
            );
        }
        Ok(())
    }
    .await;
    c.report(&[ns], r).await
}
