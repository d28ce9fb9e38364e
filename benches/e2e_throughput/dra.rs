//! The DRA workload (`E2E_WORKLOAD=dra`): the same pods and gangs, and every gang member asks
//! for GPUs through Dynamic Resource Allocation (resource.k8s.io/v1) instead of only CPU. Each
//! node publishes a node-local ResourceSlice of `E2E_DRA_NODE_DEVICES` (8) devices of the class
//! `gpu.bench.muster.dev`; each gang member has a ResourceClaim of its own, named after it and
//! created before the measured phase (the harness runs no kube-controller-manager, so no claims
//! from templates), asking for `E2E_DRA_MEMBER_DEVICES` (2) devices of that class. kube-scheduler's
//! DynamicResources plugin allocates them in every configuration; muster's whole-gang check
//! counts them node by node. Plain pods claim nothing. The usual report applies (gang placement,
//! partial gangs, overcommit of CPU); the devices are sized so that every member fits.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use k8s_openapi::api::core::v1::{Pod, PodResourceClaim};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::api::{Api, PostParams};
use kube::Client;
use muster_harness::dra;
use serde_json::json;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::params::env_or;
use crate::workload::{Workload, NS};

pub const CLASS: &str = "gpu.bench.muster.dev";

/// How many devices each node has and each gang member claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Devices {
    pub per_node: u32,
    pub per_member: u32,
}

impl Devices {
    /// `E2E_WORKLOAD=dra` → the device counts; any other workload → `None`.
    pub fn from_env() -> Result<Option<Self>> {
        if std::env::var("E2E_WORKLOAD").unwrap_or_default().trim() != "dra" {
            return Ok(None);
        }
        let d = Devices {
            per_node: env_or("E2E_DRA_NODE_DEVICES", 8)?,
            per_member: env_or("E2E_DRA_MEMBER_DEVICES", 2)?,
        };
        if d.per_member == 0 || d.per_member > d.per_node {
            bail!("need 0 < E2E_DRA_MEMBER_DEVICES <= E2E_DRA_NODE_DEVICES, got {d:?}");
        }
        Ok(Some(d))
    }

    /// Devices every gang member needs together, and what `nodes` nodes publish.
    pub fn demand_and_supply(&self, w: &Workload, nodes: usize) -> (u64, u64) {
        let members = w.pods.iter().filter(|p| p.gang.is_some()).count() as u64;
        (
            members * u64::from(self.per_member),
            nodes as u64 * u64::from(self.per_node),
        )
    }

    /// The DeviceClass and one node-local slice per node `node-<i>`, `i` in `0..nodes`.
    pub async fn create_inventory(&self, client: &Client, nodes: usize) -> Result<()> {
        let class = dra::driver_class(CLASS)?;
        Api::<DeviceClass>::all(client.clone())
            .create(&PostParams::default(), &class)
            .await
            .context("creating the DeviceClass (is resource.k8s.io/v1 served?)")?;
        let sem = Arc::new(Semaphore::new(16));
        let mut set = JoinSet::new();
        for i in 0..nodes {
            let node = format!("node-{i:04}");
            let devices: Vec<_> = (0..self.per_node)
                .map(|d| json!({"name": format!("gpu-{d}")}))
                .collect();
            let slice = dra::node_slice(CLASS, &node, devices)?;
            let api = Api::<ResourceSlice>::all(client.clone());
            let permit = sem.clone().acquire_owned().await?;
            set.spawn(async move {
                let _permit = permit;
                api.create(&PostParams::default(), &slice)
                    .await
                    .with_context(|| format!("creating the slice of {node}"))
            });
        }
        while let Some(r) = set.join_next().await {
            r??;
        }
        Ok(())
    }

    /// One claim per gang member, named after it.
    pub async fn create_claims(&self, client: &Client, w: &Workload) -> Result<()> {
        let api = Api::<ResourceClaim>::namespaced(client.clone(), NS);
        let sem = Arc::new(Semaphore::new(16));
        let mut set = JoinSet::new();
        for p in w.pods.iter().filter(|p| p.gang.is_some()) {
            let claim: ResourceClaim = serde_json::from_value(json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": claim_name(&p.name), "namespace": NS},
                "spec": {"devices": {"requests": [
                    {"name": "gpus", "exactly": {"deviceClassName": CLASS, "count": self.per_member}}
                ]}}
            }))?;
            let api = api.clone();
            let permit = sem.clone().acquire_owned().await?;
            set.spawn(async move {
                let _permit = permit;
                api.create(&PostParams::default(), &claim)
                    .await
                    .context("creating a member's ResourceClaim")
            });
        }
        while let Some(r) = set.join_next().await {
            r??;
        }
        Ok(())
    }
}

fn claim_name(pod: &str) -> String {
    format!("{pod}-gpus")
}

/// Points a gang member's pod at its claim.
pub fn attach(pod: &mut Pod) {
    let name = pod.metadata.name.clone().unwrap_or_default();
    if let Some(spec) = pod.spec.as_mut() {
        spec.resource_claims = Some(vec![PodResourceClaim {
            name: "gpus".into(),
            resource_claim_name: Some(claim_name(&name)),
            ..Default::default()
        }]);
    }
}

#[cfg(test)]
#[allow(dead_code, unused_imports)]
mod tests {
    use super::*;

    #[test]
    fn a_member_points_at_the_claim_named_after_it() {
        let mut pod = muster_harness::k8s::PodBuilder::new(NS, "g-1-0").build();
        attach(&mut pod);
        let claims = pod.spec.unwrap().resource_claims.unwrap();
        assert_eq!(claims.len(), 1);
        assert_eq!(claims[0].resource_claim_name.as_deref(), Some("g-1-0-gpus"));
    }
}
