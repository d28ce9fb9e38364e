//! `POST <prefix>/preempt`: kube-scheduler's `ProcessPreemption`, called after its own dry run
//! chose candidate nodes and victims for one pod. The answer replaces those candidates.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use tracing::{debug, warn};

use super::call::{Call, Preempt};
use super::filter::UNSEEN_POD_WAIT;
use crate::cluster::convert::pod_info;
use crate::metrics::OutcomeLabel;
use crate::model::objects::PodInfo;
use crate::model::{BindRejection, PreemptCandidate};
use crate::wire::{ExtenderPreemptionArgs, ExtenderPreemptionResult, MetaPod, MetaVictims};

/// muster answers every preempt call within this, from the moment its body is in: below the
/// 1 s `httpTimeout` of the preempt-only extender entry (scheduler-config/
/// muster-as-default-scheduler.yaml), which kube-scheduler waits out inside its serial
/// scheduling cycle (`callExtenders`, pkg/scheduler/framework/preemption/preemption.go:229-283,
/// v1.37.2, called from `Evaluator.evaluate` in PostFilter). The decision itself takes
/// milliseconds (docs/benchmarks.md, "The preempt decision"); what can take longer is waiting
/// for the watch to deliver the pod and for the table's lock. The rest of the entry's timeout
/// is left for the answer's way back and a loaded machine.
pub const PREEMPT_ANSWER_BUDGET: Duration = Duration::from_millis(500);

/// Kept of [`PREEMPT_ANSWER_BUDGET`] for the decision once the pod is seen.
const DECISION_RESERVE: Duration = Duration::from_millis(100);

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
    let answer_by = call.started() + PREEMPT_ANSWER_BUDGET;
    wait_until_seen(&call, &pod, answer_by - DECISION_RESERVE).await;
    // Past the budget, muster does not decide: it answers an error, before kube-scheduler's
    // timeout, which is what kube-scheduler hears when muster is away. For the preempt-only
    // entry (ignorable) kube-scheduler then goes on with its own candidates (preemption.go:
    // 246-252): a plain pod's preemption is never stopped by a slow muster (fail-safe), and a
    // running gang member it takes has the rest of its gang evicted by muster once it sees the
    // victim's DisruptionTarget condition, so the gang is disrupted whole (evict-for-whole;
    // `model::verbs::unseen_preemption`). For the gang entry (not ignorable) the error fails
    // that cycle's preemption: nothing is evicted and kube-scheduler retries the pod after its
    // back-off. An empty answer ("no candidate") would instead keep a plain pod from preempting
    // for as long as muster stays slow. Nothing is decided, so nothing is remembered.
    let Some(mut table) = call.shared.table.try_lock_until(answer_by) else {
        let why = format!(
            "muster could not judge this preemption within its budget of {} ms (its table \
             was busy); kube-scheduler decides without muster",
            PREEMPT_ANSWER_BUDGET.as_millis()
        );
        warn!(pod = %pod.display_name(), %why, "preemption not judged in time");
        call.record("late");
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "Error": why })),
        )
            .into_response();
    };
    let decision = table.preempt(&pod, candidates, Instant::now());
    drop(table);
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
    call.shared.submit_committed_disruptions();
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

/// Waits, up to [`UNSEEN_POD_WAIT`] and at most until `by`, for the watch to deliver `pod` (by
/// UID), one watch event at a time. kube-scheduler calls preempt in the same cycle as the filters that failed, often
/// before muster's watch has the new pod; refused then, the pod is asked to retry by an update
/// of itself, which kube-scheduler's own plugins (NodeResourcesFit's queueing hint) ignore for a
/// pod they rejected, so it would wait for an unrelated cluster event. Whether it was seen, the
/// model decides.
async fn wait_until_seen(call: &Call<Preempt>, pod: &PodInfo, by: Instant) {
    let deadline = (tokio::time::Instant::now() + UNSEEN_POD_WAIT).min(by.into());
    // Subscribed before the first look, so that an event applied in between wakes us.
    let mut changes = call.shared.cache_changes();
    loop {
        // The lock, too, only within the budget: a busy table is answered for by the caller.
        let unknown = match call.shared.table.try_lock_until(by) {
            Some(table) => matches!(
                table.seen_pod(&pod.namespace, &pod.name, &pod.uid),
                Err(BindRejection::UnknownPod { .. })
            ),
            None => return,
        };
        if !unknown {
            return;
        }
        match tokio::time::timeout_at(deadline, changes.changed()).await {
            Ok(Ok(())) => {}
            _ => return,
        }
    }
}
