//! `POST <prefix>/preempt`: kube-scheduler's `ProcessPreemption`, called after its own dry run
//! chose candidate nodes and victims for one pod. The answer replaces those candidates.

use std::time::Instant;

use axum::response::{IntoResponse, Response};
use axum::Json;
use tracing::{debug, warn};

use super::call::{Call, Preempt};
use super::filter::UNSEEN_POD_WAIT;
use crate::cluster::convert::pod_info;
use crate::cluster::evictor::submit_committed;
use crate::metrics::OutcomeLabel;
use crate::model::objects::PodInfo;
use crate::model::{BindRejection, PreemptCandidate};
use crate::wire::{ExtenderPreemptionArgs, ExtenderPreemptionResult, MetaPod, MetaVictims};

pub(super) async fn preempt(call: Call<Preempt>) -> Response {
    let args: ExtenderPreemptionArgs = match call.decode() {
        Ok(a) => a,
        Err(r) => return *r,
    };
    // The result has no error field: when muster cannot judge, it answers "no candidate", so
    // nothing is evicted, and kube-scheduler tries the pod again later.
    let refuse = |why: String| {
        warn!(pod = ?args.pod.metadata.name, %why, "preemption refused");
        call.record("refused");
        Json(ExtenderPreemptionResult::default()).into_response()
    };
    // A standby never decides (and never evicts): the leader answers, like the other verbs.
    if let Err(r) = call.admit() {
        return refuse(r.message());
    }
    // The pod as sent names the preemptor only: the model judges the pod as its watch has it
    // (priority, gang, requests) and the victims where its cache has them (derived). A pod
    // muster has not seen yet is waited for, up to `UNSEEN_POD_WAIT` as the filter does, and
    // refused and asked to retry if the watch has still not delivered it (this call adds no pod
    // to the table).
    let pod = match pod_info(&args.pod) {
        Ok(p) => p,
        Err(e) => return refuse(e.to_string()),
    };
    let candidates: Vec<PreemptCandidate> = args
        .candidates()
        .into_iter()
        .map(|(node, victims, pdb_violations)| PreemptCandidate {
            node: node.to_string(),
            victims: victims.into_iter().map(str::to_string).collect(),
            pdb_violations,
        })
        .collect();
    wait_until_seen(&call, &pod).await;
    let decision = call
        .shared
        .table
        .lock()
        .preempt(&pod, candidates, Instant::now());
    call.shared.flush_notices();
    call.shared
        .metrics
        .preemptions
        .get_or_create(&OutcomeLabel {
            outcome: decision.outcome.as_str(),
        })
        .inc();
    // The gangs this decision disrupts whole are evicted only once kube-scheduler commits to
    // it (the watch sees a victim deleted or the preemptor nominated), never on this answer:
    // only disruptions committed before it are handed over.
    submit_committed(&call.shared);
    debug!(
        pod = %pod.display_name(),
        kept = decision.kept.len(),
        dropped = decision.dropped.len(),
        outcome = decision.outcome.as_str(),
        "preempt"
    );
    let result = ExtenderPreemptionResult {
        node_name_to_meta_victims: decision
            .kept
            .into_iter()
            .map(|c| {
                let victims = MetaVictims {
                    pods: c.victims.into_iter().map(|uid| MetaPod { uid }).collect(),
                    num_pdb_violations: c.pdb_violations,
                };
                (c.node, victims)
            })
            .collect(),
    };
    call.record("ok");
    Json(result).into_response()
}

/// Waits, up to [`UNSEEN_POD_WAIT`], for the watch to deliver `pod` (by UID), one watch event at
/// a time. kube-scheduler calls preempt in the same cycle as the filters that failed, often
/// before muster's watch has the new pod; refused then, the pod is asked to retry by an update
/// of itself, which kube-scheduler's own plugins (NodeResourcesFit's queueing hint) ignore for a
/// pod they rejected, so it would wait for an unrelated cluster event. Whether it was seen, the
/// model decides.
async fn wait_until_seen(call: &Call<Preempt>, pod: &PodInfo) {
    let deadline = tokio::time::Instant::now() + UNSEEN_POD_WAIT;
    // Subscribed before the first look, so that an event applied in between wakes us.
    let mut changes = call.shared.cache_changes();
    loop {
        let unknown = matches!(
            call.shared
                .table
                .lock()
                .seen_pod(&pod.namespace, &pod.name, &pod.uid),
            Err(BindRejection::UnknownPod { .. })
        );
        if !unknown {
            return;
        }
        match tokio::time::timeout_at(deadline, changes.changed()).await {
            Ok(Ok(())) => {}
            _ => return,
        }
    }
}
