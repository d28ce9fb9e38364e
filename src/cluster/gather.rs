//! The I/O of gathering behind the gate (the decisions are `model::gather`): on every watch
//! change and every tick, one round under the table lock, then its writes.
//!
//! Per released gang, every member's `status.nominatedNodeName` is written first (pods/status
//! patches, concurrently), and only when all of them succeeded are the members' gates removed
//! (pods patches, concurrently): kube-scheduler never sees a member of the gang without its
//! seat published. A gang whose nominations failed keeps its gates; the next round tries again.
//! Every patch names the pod's UID, so a pod deleted and created again under the same name is
//! never touched by mistake.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use tracing::{debug, info, warn};

use crate::metrics::NominationLabel;
use crate::model::gather::{GatherPlan, Gatherer, Release, GATHER_GATE};
use crate::model::{NodeName, PodRef};
use crate::state::Shared;

/// Rounds happen on watch changes, and at least this often (time alone changes decisions:
/// creation windows close, back-offs end).
pub const TICK: Duration = Duration::from_secs(1);
/// Patches in flight at once.
const CONCURRENCY: usize = 16;
/// Rounds start at most this often: a burst of watch events makes one round, not one each
/// (a round walks every gang under the table lock).
const MIN_ROUND_GAP: Duration = Duration::from_millis(50);

/// Runs rounds until the task is dropped. `expect_marker`: gang members are marked by the
/// admission policy (the scheduler config names `muster.dev/gang` in `managedResources`), so
/// one without the marker is warned about.
pub async fn run(client: Client, shared: Arc<Shared>, expect_marker: bool) {
    let mut gatherer = Gatherer::new(expect_marker);
    let mut changes = shared.cache_changes();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            _ = tick.tick() => {}
        }
        // Mark the generation seen before reading the table: a change applied meanwhile
        // wakes the next round.
        changes.borrow_and_update();
        if !shared.readiness.is_ready() || !shared.leadership.is_leading(Instant::now()) {
            continue;
        }
        // A gang left partly bound before this replica started deciding comes first.
        shared.start_deciding(Instant::now());
        let plan = {
            let mut table = shared.table.lock();
            gatherer.gather(&mut table, Instant::now())
        };
        shared.flush_notices();
        if plan.markers_missing > 0 {
            shared
                .metrics
                .gang_markers_missing
                .inc_by(plan.markers_missing);
        }
        if !plan.is_empty() {
            write(&client, &shared, &mut gatherer, plan).await;
        }
        tokio::time::sleep(MIN_ROUND_GAP).await;
    }
}

async fn write(client: &Client, shared: &Shared, gatherer: &mut Gatherer, plan: GatherPlan) {
    let GatherPlan {
        releases,
        renominate,
        clear,
        outside_gangs,
        ..
    } = plan;
    // Pods in no gang: their gates go, with no nomination (see `model::gather::orphans`).
    let freed: Vec<bool> = stream::iter(outside_gangs.clone())
        .map(|u| {
            let client = client.clone();
            async move { ungate(&client, &u.pod).await }
        })
        .buffered(CONCURRENCY)
        .collect()
        .await;
    let now = Instant::now();
    for (u, ok) in outside_gangs.iter().zip(freed) {
        if ok {
            gatherer.ungated(&u.pod.uid, now);
            shared.metrics.gates_removed.inc();
            info!(pod = %u.pod, "pod behind muster's gate in no gang: gate removed");
        }
    }
    let outcomes: Vec<(Release, Vec<bool>, Vec<bool>)> = stream::iter(releases)
        .map(|r| release(client.clone(), r))
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let now = Instant::now();
    for (r, nominated, ungated) in outcomes {
        for ((pod, node), ok) in r.nominate.iter().zip(&nominated) {
            count(shared, "release", *ok);
            if *ok {
                let gated = r.ungate.iter().any(|u| u.pod.uid == pod.uid);
                gatherer.nominated(&pod.uid, Some(node.clone()), now, gated);
            }
        }
        let mut removed = 0;
        for (u, ok) in r.ungate.iter().zip(&ungated) {
            if *ok {
                gatherer.ungated(&u.pod.uid, now);
                removed += 1;
            }
        }
        if removed > 0 {
            shared.metrics.gates_removed.inc_by(removed);
            info!(gang = %r.gang, members = removed, "gang placed by muster: seats published, gates removed");
        }
    }
    let renominated = nominate_all(client, renominate.clone()).await;
    let now = Instant::now();
    for ((pod, node), ok) in renominate.into_iter().zip(renominated) {
        count(shared, "renominate", ok);
        if ok {
            gatherer.nominated(&pod.uid, Some(node), now, false);
        }
    }
    let cleared: Vec<bool> = stream::iter(clear.clone())
        .map(|p| {
            let client = client.clone();
            async move { set_nomination(&client, &p, None).await }
        })
        .buffered(CONCURRENCY)
        .collect()
        .await;
    let now = Instant::now();
    for (p, ok) in clear.iter().zip(cleared) {
        count(shared, "clear", ok);
        if ok {
            gatherer.nominated(&p.uid, None, now, false);
        }
    }
}

fn count(shared: &Shared, why: &'static str, ok: bool) {
    let outcome = if ok { "ok" } else { "failed" };
    shared
        .metrics
        .nomination_writes
        .get_or_create(&NominationLabel { why, outcome })
        .inc();
}

/// One gang's release: every nomination, then (only if all were written) every gate.
async fn release(client: Client, r: Release) -> (Release, Vec<bool>, Vec<bool>) {
    let nominated = nominate_all(&client, r.nominate.clone()).await;
    let ungated = if nominated.iter().all(|ok| *ok) {
        stream::iter(r.ungate.clone())
            .map(|u| {
                let client = client.clone();
                async move { ungate(&client, &u.pod).await }
            })
            .buffered(CONCURRENCY)
            .collect::<Vec<bool>>()
            .await
    } else {
        warn!(gang = %r.gang, "not every seat could be published as a nomination; the gates stay, tried again next round");
        Vec::new()
    };
    (r, nominated, ungated)
}

async fn nominate_all(client: &Client, nominate: Vec<(PodRef, NodeName)>) -> Vec<bool> {
    stream::iter(nominate)
        .map(|(p, n)| {
            let client = client.clone();
            async move { set_nomination(&client, &p, Some(&n)).await }
        })
        .buffered(CONCURRENCY)
        .collect()
        .await
}

/// Writes (or clears) `status.nominatedNodeName` of the pod with this UID.
async fn set_nomination(client: &Client, pod: &PodRef, node: Option<&NodeName>) -> bool {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    // The UID in the patch is a precondition: a pod of the same name but another UID is refused.
    let patch = json!({
        "metadata": {"uid": &*pod.uid},
        "status": {"nominatedNodeName": node.map(|n| &**n)},
    });
    match api
        .patch_status(&pod.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => true,
        Err(e) => {
            warn!(pod = %pod, node = ?node, error = %e, "could not write the pod's nominatedNodeName");
            false
        }
    }
}

/// Removes muster's gate from the pod's `spec.schedulingGates` (the API server allows gates
/// only to be removed after creation, `validateOnlyDeletedSchedulingGates`,
/// pkg/apis/core/validation/validation.go:4438 in v1.37.2). A strategic merge patch deletes the
/// gate by name (`schedulingGates` merges on `name`), leaving other gates as they are.
async fn ungate(client: &Client, pod: &PodRef) -> bool {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let patch = json!({
        "metadata": {"uid": &*pod.uid},
        "spec": {"schedulingGates": [{"name": GATHER_GATE, "$patch": "delete"}]},
    });
    match api
        .patch(
            &pod.name,
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await
    {
        Ok(_) => true,
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {
            // Gone or replaced meanwhile: the watch will tell.
            debug!(pod = %pod, error = %e.message, "gate not removed: the pod changed");
            false
        }
        Err(e) => {
            warn!(pod = %pod, error = %e, "could not remove the pod's scheduling gate");
            false
        }
    }
}
