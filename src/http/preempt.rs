//! `POST <prefix>/preempt`: kube-scheduler's `ProcessPreemption`, called after its own dry run
//! chose candidate nodes and victims for one pod. The answer replaces those candidates.

use std::time::Instant;

use axum::response::{IntoResponse, Response};
use axum::Json;
use tracing::{debug, warn};

use super::call::{Call, Preempt};
use crate::cluster::convert::pod_info;
use crate::cluster::evictor::submit_committed;
use crate::metrics::OutcomeLabel;
use crate::model::PreemptCandidate;
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
    // muster has not seen yet is refused and asked to retry once the watch delivers it (this
    // call adds no pod to the table).
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
