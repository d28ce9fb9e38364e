//! PodGroup status written back (explained): every gang whose spec comes from a PodGroup gets
//! its phase, counts and muster's reason in that PodGroup's own status fields
//! (`model::pod_group_status` decides them; `render` turns them into the object's `status`).
//!
//! - Only the leader writes (a standby's table may lag; two writers would fight).
//! - Rate-limited: one round every `every` (2 s by default), at most [`WRITES_PER_ROUND`]
//!   writes a round; the rest wait for the next round.
//! - Skipped when nothing changed: a gang whose desired status equals the one last written is
//!   not touched at all; otherwise the object is read and written only if its status differs
//!   (after a restart or a take-over, an object that already shows it costs one read).
//! - Through the `status` subresource, as a JSON merge patch carrying the `resourceVersion`
//!   read (on the object itself where the API has no status subresource: Volcano's CRD has
//!   none, its scheduler updates the whole object; the patch still holds only `status`): a write that raced another writer fails with a conflict and is tried again next
//!   round, on the fresh object.
//! - With `enqueue` (`--enqueue-volcano-podgroups`), Volcano PodGroups without members are
//!   moved from `Pending` to `Inqueue` in the same rounds, writes and metric
//!   (`model::enqueue` decides which), so Volcano's job controller creates their pods.
//! - Every outcome is counted in `muster_podgroup_status_writes_total{api,outcome}`.

pub mod render;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{json, Value};
use tracing::{debug, warn};

use crate::metrics::ApiOutcomeLabel;
use crate::model::pod_group_status::{desired_status, DesiredStatus};
use crate::model::PodGroupApi;
use crate::state::Shared;

/// How often a round runs by default.
pub const EVERY: Duration = Duration::from_secs(2);
/// Writes (a read and a patch each) per round, at most.
pub const WRITES_PER_ROUND: usize = 50;

type Key = (PodGroupApi, String, String);

/// Runs rounds until the task is dropped.
pub async fn run(client: Client, shared: Arc<Shared>, every: Duration, enqueue: bool) {
    let mut written: HashMap<Key, DesiredStatus> = HashMap::new();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if !shared.readiness.is_ready() || !shared.leadership.is_leading(Instant::now()) {
            // Another replica may write meanwhile: what this one wrote is no longer known.
            written.clear();
            continue;
        }
        round(&client, &shared, &mut written, enqueue).await;
    }
}

/// One round: the desired status of every PodGroup gang (and, with `enqueue`, of every
/// Volcano PodGroup without members), written where it changed.
pub async fn round(
    client: &Client,
    shared: &Shared,
    written: &mut HashMap<Key, DesiredStatus>,
    enqueue: bool,
) {
    let desired: Vec<(Key, DesiredStatus)> = {
        let table = shared.table.lock();
        let views = table.views(Instant::now());
        let mut desired: Vec<(Key, DesiredStatus)> = views
            .iter()
            .filter_map(|v| {
                let (api, name, status) = desired_status(v)?;
                Some(((api, v.namespace.clone(), name), status))
            })
            .collect();
        if enqueue {
            desired.extend(table.volcano_enqueue().into_iter().map(|(k, s)| {
                (
                    (
                        PodGroupApi::Volcano,
                        k.namespace.to_string(),
                        k.name.to_string(),
                    ),
                    s,
                )
            }));
        }
        desired
    };
    // Forget gangs that are gone, so a PodGroup created again under the same name is written.
    written.retain(|k, _| desired.iter().any(|(d, _)| d == k));
    let mut writes = 0;
    for (key, status) in desired {
        if written.get(&key) == Some(&status) {
            continue;
        }
        if writes == WRITES_PER_ROUND {
            break;
        }
        writes += 1;
        let outcome = write(client, &key, &status).await;
        shared
            .metrics
            .podgroup_status_writes
            .get_or_create(&ApiOutcomeLabel {
                api: key.0.api_version(),
                outcome: outcome.as_str(),
            })
            .inc();
        match outcome {
            Outcome::Written | Outcome::Unchanged => {
                written.insert(key, status);
            }
            Outcome::Gone => {
                written.remove(&key);
            }
            Outcome::Conflict | Outcome::Failed => {
                written.remove(&key);
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Written,
    Unchanged,
    Conflict,
    Gone,
    Failed,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Written => "written",
            Outcome::Unchanged => "unchanged",
            Outcome::Conflict => "conflict",
            Outcome::Gone => "gone",
            Outcome::Failed => "failed",
        }
    }
}

/// The API resource of one PodGroup API (group, version, kind `PodGroup`, plural `podgroups`).
pub fn api_resource(api: PodGroupApi) -> ApiResource {
    let (group, version) = api.api_version().split_once('/').expect("group/version");
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, "PodGroup"),
        "podgroups",
    )
}

async fn write(client: &Client, key: &Key, desired: &DesiredStatus) -> Outcome {
    let (api, ns, name) = key;
    let pgs: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &api_resource(*api));
    let current = match pgs.get(name).await {
        Ok(o) => o,
        Err(kube::Error::Api(e)) if e.code == 404 => return Outcome::Gone,
        Err(e) => {
            warn!(podgroup = %format!("{ns}/{name}"), api = api.api_version(), error = %e, "cannot read the PodGroup to write its status");
            return Outcome::Failed;
        }
    };
    let now = wall_now();
    let status = current.data.get("status").cloned().unwrap_or(Value::Null);
    let Some(next) = render::status_patch(&status, desired, &now, current.metadata.generation)
    else {
        return Outcome::Unchanged;
    };
    let patch = json!({
        "metadata": {"resourceVersion": current.metadata.resource_version},
        "status": next,
    });
    let pp = PatchParams::default();
    let written = match pgs.patch_status(name, &pp, &Patch::Merge(&patch)).await {
        // No status subresource (Volcano's CRD has none; its scheduler writes the whole
        // object): the same patch, of `status` only, on the object itself.
        Err(kube::Error::Api(e)) if e.code == 404 => {
            pgs.patch(name, &pp, &Patch::Merge(&patch)).await
        }
        other => other,
    };
    match written {
        Ok(_) => {
            debug!(podgroup = %format!("{ns}/{name}"), api = api.api_version(), phase = desired.phase(), "PodGroup status written");
            Outcome::Written
        }
        Err(kube::Error::Api(e)) if e.code == 409 => Outcome::Conflict,
        Err(kube::Error::Api(e)) if e.code == 404 => Outcome::Gone,
        Err(e) => {
            warn!(podgroup = %format!("{ns}/{name}"), api = api.api_version(), error = %e, "cannot write the PodGroup's status");
            Outcome::Failed
        }
    }
}

/// Now, as a `metav1.Time` serializes (RFC 3339, whole seconds, UTC).
fn wall_now() -> String {
    let now =
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    match serde_json::to_value(now) {
        Ok(Value::String(s)) => s,
        _ => String::new(),
    }
}
