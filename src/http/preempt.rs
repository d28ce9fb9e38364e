//! `POST <prefix>/preempt`: kube-scheduler's `ProcessPreemption`, called after its own dry run
//! chose candidate nodes and victims for one pod. The answer replaces those candidates.

use std::time::Instant;

use axum::response::{IntoResponse, Response};
use axum::Json;
use tracing::{debug, warn};

use super::call::{Call, Preempt};
use crate::cluster::convert::pod_info;
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
    // The pod as sent: kube-scheduler calls preempt right after its own filters failed, often
    // before the watch has reported a new pod. A plain pod is judged as sent (its victims are
    // what matters); a gang member muster has not seen is refused and asked to retry once the
    // watch delivers it (the model decides; this call adds no pod to the table).
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
    for d in decision.disruptions {
        call.shared.disruptions.submit(d);
    }
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
