//! The I/O of asking the cluster autoscaler for a gathered gang's room (`--capacity-buffers`;
//! the decision is `model::gather::capacity`): per gang that asks, one CapacityBuffer
//! (`autoscaling.x-k8s.io/v1beta1`, Karpenter's `CapacityBuffer` feature) and the PodTemplate it
//! names, in the gang's namespace, both named after the gang ([`buffer_name`]) and labelled
//! [`MANAGED_BY`]. Karpenter reads the buffer's `spec.podTemplateRef` (a PodTemplate in the
//! same namespace: the shape of one member) and `spec.replicas` (how many), simulates that many
//! pods on the room free on the nodes that exist, and launches nodes for the rest in one batch;
//! it writes `status.replicas` and the conditions `ReadyForProvisioning` and `Provisioning`.
//! muster reads none of that: the nodes themselves, once the watch shows them, are what places
//! the gang.
//!
//! A buffer is standing capacity: Karpenter keeps its pods' room free for as long as it exists,
//! adding nodes again once the gang has taken the first ones. So the buffer lives exactly as
//! long as its gang asks: deleted once the gang fits (admitted, its seats being published), is
//! deleted, stops waiting for room alone, or waited past `--capacity-buffer-timeout`.
//!
//! Leader-tied like the gatherer's writes: only while this replica leads, each write cancelled
//! once the lease lapses. Each term starts by listing the buffers labelled [`MANAGED_BY`] in
//! every namespace, so the buffers a deposed leader or an earlier run left are deleted by the
//! new one when no gang asks for them (derived: what exists is read back, never remembered
//! across terms). muster stopped for good leaves its buffers: delete them by that label.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::PodTemplate;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::Client;
use rustc_hash::FxHashMap as HashMap;
use serde_json::{json, Map, Value};
use tracing::{debug, info, warn};

use crate::model::gather::{CapacityAsk, PoolRequirement, PoolRoom};
use crate::model::objects::Taint;
use crate::model::objects::TolerationOperator;
use crate::model::quantity;
use crate::model::GangKey;
use crate::state::leadership::Leadership;
use crate::state::Shared;

/// The label on every object muster makes for the autoscaler (listed by it after a take-over).
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "muster");
/// The annotation naming the gang a buffer asks for.
pub const GANG_ANNOTATION: &str = "muster.dev/capacity-for";
/// Karpenter's default (and only) strategy: its pods are simulated and nodes launched for them.
const ACTIVE_CAPACITY: &str = "buffer.x-k8s.io/active-capacity";
/// The image of the buffer's pod template: never run (the autoscaler only simulates the pods).
const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.10";
/// Rounds happen on watch changes and at least this often.
const TICK: Duration = Duration::from_secs(1);
/// Rounds start at most this often.
const MIN_ROUND_GAP: Duration = Duration::from_millis(200);
/// NodePools (their limits and what their nodes have) are read at most this often.
const POOLS_EVERY: Duration = Duration::from_secs(5);
/// A buffer whose write or deletion failed is not tried again sooner.
const RETRY_AFTER: Duration = Duration::from_secs(5);
const FIELD_MANAGER: &str = "muster";

fn node_pools() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("karpenter.sh", "v1", "NodePool"),
        "nodepools",
    )
}

/// What each NodePool may still add (`spec.limits` less `status.resources`); an error when
/// NodePools are not served (another autoscaler: nothing is judged against them).
async fn list_pools(client: &Client) -> kube::Result<Vec<PoolRoom>> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &node_pools());
    let list = api.list(&ListParams::default()).await?;
    Ok(list.items.iter().map(pool_room).collect())
}

/// A quantity as the API server returns an int-or-string field (`cpu: 1000` or `cpu: "1k"`).
fn quantity_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn pool_room(pool: &DynamicObject) -> PoolRoom {
    let limit = |r: &str| quantity_text(&pool.data["spec"]["limits"][r]);
    let used = |r: &str| quantity_text(&pool.data["status"]["resources"][r]);
    let room = |r: &str, parse: fn(&str) -> Option<i64>| {
        let l = parse(limit(r)?.as_str())?;
        let u = used(r).and_then(|u| parse(&u)).unwrap_or(0);
        Some((l - u).max(0))
    };
    PoolRoom {
        name: pool.metadata.name.clone().unwrap_or_default(),
        cpu_milli: room("cpu", |q| quantity::parse_milli(q).ok()),
        memory: room("memory", |q| quantity::parse_units(q).ok()),
        cpu_limit: limit("cpu").unwrap_or_else(|| "none".into()),
        memory_limit: limit("memory").unwrap_or_else(|| "none".into()),
        requirements: pool_requirements(&pool.data["spec"]["template"]["spec"]["requirements"]),
        labels: pool.data["spec"]["template"]["metadata"]["labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default(),
        taints: pool.data["spec"]["template"]["spec"]["taints"]
            .as_array()
            .map(|ts| {
                ts.iter()
                    .filter_map(|t| {
                        let effect = t["effect"].as_str()?;
                        (effect == "NoSchedule" || effect == "NoExecute").then(|| Taint {
                            key: t["key"].as_str().unwrap_or_default().to_string(),
                            value: t["value"].as_str().unwrap_or_default().to_string(),
                            effect: effect.to_string(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// A NodePool template's requirements; entries without a key are skipped.
fn pool_requirements(v: &Value) -> Vec<PoolRequirement> {
    v.as_array()
        .map(|rs| {
            rs.iter()
                .filter_map(|r| {
                    Some(PoolRequirement {
                        key: r["key"].as_str()?.to_string(),
                        operator: r["operator"].as_str().unwrap_or("In").to_string(),
                        values: r["values"]
                            .as_array()
                            .map(|vs| {
                                vs.iter()
                                    .filter_map(|v| v.as_str().map(str::to_string))
                                    .collect()
                            })
                            .unwrap_or_default(),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

fn buffers() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("autoscaling.x-k8s.io", "v1beta1", "CapacityBuffer"),
        "capacitybuffers",
    )
}

/// The buffer's (and its PodTemplate's) name: `muster-<gang>`, its tail replaced by a hash
/// of the gang's name when that would be longer than a name may be.
pub fn buffer_name(gang: &GangKey) -> String {
    let name = format!("muster-{}", gang.name);
    if name.len() <= 200 {
        return name;
    }
    let hash = gang.name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let mut cut = 183;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{hash:016x}", name[..cut].trim_end_matches(['-', '.']))
}

/// Runs rounds until the task is dropped.
pub async fn run(client: Client, shared: Arc<Shared>) {
    let mut changes = shared.cache_changes();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut term = None;
    // What this term wrote (or listed): buffer by namespace and name → replicas asked.
    let mut known: Option<HashMap<(String, String), u32>> = None;
    let mut warned_unserved = false;
    let mut failed: HashMap<(String, String), Instant> = HashMap::default();
    let mut pools: Vec<PoolRoom> = Vec::new();
    let mut pools_read: Option<Instant> = None;
    loop {
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            _ = tick.tick() => {}
        }
        changes.borrow_and_update();
        if !shared.readiness.is_ready() {
            continue;
        }
        let Some(now_term) = shared.leadership.leading_term(Instant::now()) else {
            known = None;
            continue;
        };
        if term != Some(now_term) {
            known = None;
            term = Some(now_term);
        }
        let leadership = &shared.leadership;
        if pools_read.is_none_or(|at| at.elapsed() >= POOLS_EVERY) {
            pools_read = Some(Instant::now());
            match leadership
                .while_leading(now_term, list_pools(&client))
                .await
            {
                Some(Ok(read)) => pools = read,
                Some(Err(e)) => {
                    debug!(error = %e, "NodePools not read: gangs are not judged against their limits");
                    pools.clear();
                }
                None => continue,
            }
        }
        let asks = {
            let mut table = shared.table.lock();
            table.judge_against_pools(&pools);
            table.capacity_asks()
        };
        shared.flush_notices();
        if known.is_none() {
            match leadership.while_leading(now_term, list_own(&client)).await {
                Some(Ok(listed)) => {
                    warned_unserved = false;
                    known = Some(listed);
                }
                Some(Err(e)) if !warned_unserved => {
                    warn!(
                        error = %e,
                        "--capacity-buffers: cannot list CapacityBuffers \
                         (autoscaling.x-k8s.io/v1beta1); is the CRD installed and \
                         deploy/capacity-buffers-rbac.yaml applied? gangs are not asked for"
                    );
                    warned_unserved = true;
                }
                Some(Err(_)) => {}
                None => {}
            }
        }
        if let Some(known) = known.as_mut() {
            failed.retain(|_, at| at.elapsed() < RETRY_AFTER);
            reconcile(&client, leadership, now_term, &asks, known, &mut failed).await;
        }
        tokio::time::sleep(MIN_ROUND_GAP).await;
    }
}

/// Creates or resizes the buffers `asks` want, deletes the others this term knows of.
async fn reconcile(
    client: &Client,
    leadership: &Leadership,
    term: u64,
    asks: &[CapacityAsk],
    known: &mut HashMap<(String, String), u32>,
    failed: &mut HashMap<(String, String), Instant>,
) {
    let wanted: HashMap<(String, String), &CapacityAsk> = asks
        .iter()
        .map(|a| ((a.gang.namespace.to_string(), buffer_name(&a.gang)), a))
        .collect();
    for (at, ask) in &wanted {
        if known.get(at) == Some(&ask.replicas) || failed.contains_key(at) {
            continue;
        }
        match leadership
            .while_leading(term, write(client, &at.0, &at.1, ask))
            .await
        {
            Some(Ok(())) => {
                info!(
                    gang = %ask.gang, buffer = %at.1, replicas = ask.replicas, short = ask.short,
                    "asked the cluster autoscaler for room for the whole gang (CapacityBuffer)"
                );
                known.insert(at.clone(), ask.replicas);
            }
            Some(Err(e)) => {
                warn!(gang = %ask.gang, buffer = %at.1, error = %e, "cannot write CapacityBuffer");
                failed.insert(at.clone(), Instant::now());
            }
            None => return,
        }
    }
    let stale: Vec<(String, String)> = known
        .keys()
        .filter(|k| !wanted.contains_key(*k) && !failed.contains_key(*k))
        .cloned()
        .collect();
    for at in stale {
        match leadership
            .while_leading(term, delete(client, &at.0, &at.1))
            .await
        {
            Some(Ok(())) => {
                info!(namespace = %at.0, buffer = %at.1, "CapacityBuffer deleted: no gang waits for it");
                known.remove(&at);
            }
            Some(Err(e)) => {
                warn!(namespace = %at.0, buffer = %at.1, error = %e, "cannot delete CapacityBuffer");
                failed.insert(at, Instant::now());
            }
            None => return,
        }
    }
}

fn label_selector() -> String {
    format!("{}={}", MANAGED_BY.0, MANAGED_BY.1)
}

/// The buffers muster made, in every namespace, with the replicas they ask for.
async fn list_own(client: &Client) -> kube::Result<HashMap<(String, String), u32>> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &buffers());
    let list = api
        .list(&ListParams::default().labels(&label_selector()))
        .await?;
    let listed: HashMap<(String, String), u32> = list
        .items
        .into_iter()
        .filter_map(|b| {
            let replicas = b.data["spec"]["replicas"].as_u64().unwrap_or(0) as u32;
            Some(((b.metadata.namespace?, b.metadata.name?), replicas))
        })
        .collect();
    debug!(buffers = listed.len(), "listed muster's CapacityBuffers");
    Ok(listed)
}

fn metadata(ask: &CapacityAsk, name: &str) -> Value {
    json!({
        "name": name,
        "namespace": &*ask.gang.namespace,
        "labels": {MANAGED_BY.0: MANAGED_BY.1},
        "annotations": {GANG_ANNOTATION: &*ask.gang.name},
    })
}

/// The PodTemplate of one member of `ask`'s gang, as the autoscaler is to simulate it.
fn pod_template(ask: &CapacityAsk, name: &str) -> Value {
    let r = &ask.shape.requests;
    let mut requests = Map::new();
    if r.cpu_milli > 0 {
        requests.insert("cpu".into(), json!(format!("{}m", r.cpu_milli)));
    }
    if r.memory > 0 {
        requests.insert("memory".into(), json!(r.memory.to_string()));
    }
    if r.ephemeral_storage > 0 {
        requests.insert(
            "ephemeral-storage".into(),
            json!(r.ephemeral_storage.to_string()),
        );
    }
    for (resource, amount) in &r.extended {
        requests.insert(resource.to_string(), json!(amount.to_string()));
    }
    let node_selector: Map<String, Value> = ask
        .shape
        .node_selector
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    let tolerations: Vec<Value> = ask
        .shape
        .tolerations
        .iter()
        .filter_map(|t| {
            // One kube-scheduler lets tolerate nothing is left out: it tolerates nothing.
            let operator = match t.operator {
                TolerationOperator::Exists => "Exists",
                TolerationOperator::Equal => "Equal",
                TolerationOperator::Unsupported => return None,
            };
            let mut v = Map::new();
            if !t.key.is_empty() {
                v.insert("key".into(), json!(t.key));
            }
            v.insert("operator".into(), json!(operator));
            if !t.value.is_empty() {
                v.insert("value".into(), json!(t.value));
            }
            if !t.effect.is_empty() {
                v.insert("effect".into(), json!(t.effect));
            }
            Some(Value::Object(v))
        })
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": metadata(ask, name),
        "template": {
            "metadata": {"labels": {MANAGED_BY.0: MANAGED_BY.1}},
            "spec": {
                "containers": [{
                    "name": "member",
                    "image": PAUSE_IMAGE,
                    "resources": {"requests": requests},
                }],
                "nodeSelector": node_selector,
                "tolerations": tolerations,
            },
        },
    })
}

/// Writes (server-side apply: create or update) the PodTemplate, then the buffer naming it.
async fn write(client: &Client, ns: &str, name: &str, ask: &CapacityAsk) -> kube::Result<()> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let templates: Api<PodTemplate> = Api::namespaced(client.clone(), ns);
    let template: PodTemplate =
        serde_json::from_value(pod_template(ask, name)).map_err(kube::Error::SerdeError)?;
    templates
        .patch(name, &params, &Patch::Apply(&template))
        .await?;
    let buffer = json!({
        "apiVersion": "autoscaling.x-k8s.io/v1beta1",
        "kind": "CapacityBuffer",
        "metadata": metadata(ask, name),
        "spec": {
            "provisioningStrategy": ACTIVE_CAPACITY,
            "podTemplateRef": {"name": name},
            "replicas": ask.replicas,
        },
    });
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &buffers());
    api.patch(name, &params, &Patch::Apply(&buffer)).await?;
    Ok(())
}

/// Deletes the buffer, then its PodTemplate; either already gone is fine.
async fn delete(client: &Client, ns: &str, name: &str) -> kube::Result<()> {
    let gone = |r: kube::Result<()>| match r {
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        r => r,
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &buffers());
    gone(api.delete(name, &DeleteParams::default()).await.map(|_| ()))?;
    let templates: Api<PodTemplate> = Api::namespaced(client.clone(), ns);
    gone(
        templates
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(limits: Value, used: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "p"},
            "spec": {"limits": limits},
            "status": {"resources": used},
        }))
        .unwrap()
    }

    #[test]
    fn a_pools_room_is_its_limits_less_what_its_nodes_have() {
        let r = pool_room(&pool(
            json!({"cpu": 16, "memory": "64Gi"}),
            json!({"cpu": "4"}),
        ));
        assert_eq!(r.cpu_milli, Some(12_000));
        assert_eq!(r.memory, Some(64 << 30));
        assert_eq!(r.cpu_limit, "16");
        let r = pool_room(&pool(json!({}), json!({"cpu": "4"})));
        assert_eq!((r.cpu_milli, r.memory), (None, None));
        // Over its limit (a limit lowered): nothing left, never negative.
        let r = pool_room(&pool(json!({"cpu": "2"}), json!({"cpu": "4"})));
        assert_eq!(r.cpu_milli, Some(0));
    }

    #[test]
    fn a_long_gang_name_makes_a_valid_buffer_name() {
        let short = GangKey::new("ml", "trainer");
        assert_eq!(buffer_name(&short), "muster-trainer");
        let long = GangKey::new("ml", &"x".repeat(250));
        let name = buffer_name(&long);
        assert!(name.len() <= 253, "{}", name.len());
        assert_ne!(name, buffer_name(&GangKey::new("ml", &"x".repeat(249))));
    }
}
