//! `POST <prefix>/bind`.

use std::time::Instant;

use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::future::join_all;
use tracing::{debug, info, warn};

use super::bindings::Pending;
use super::call::{Bind, Call};
use super::held::HoldEnd;
use crate::cluster::binder::{self, RetryPolicy};
use crate::model::{BindDecision, BindRejection, BindRequest, NodeName, PodRef};
use crate::state::Shared;
use crate::wire::{ExtenderBindingArgs, ExtenderBindingResult};

pub(super) async fn bind(call: Call<Bind>) -> Response {
    let args: ExtenderBindingArgs = match call.decode() {
        Ok(a) => a,
        Err(r) => return *r,
    };
    let answer = |outcome: &'static str, error: String| {
        call.record(outcome);
        Json(ExtenderBindingResult { error }).into_response()
    };
    let answer_with = |result: Result<(), String>| match result {
        Ok(()) => answer("ok", String::new()),
        Err(e) => answer("refused", e),
    };
    if let Err(refusal) = call.admit() {
        return answer("refused", refusal.message());
    }
    let shared = &*call.shared;
    let request = BindRequest {
        namespace: &args.pod_namespace,
        name: &args.pod_name,
        uid: &args.pod_uid,
        node: &args.node,
    };
    let (decision, in_flight) = decide(shared, request);
    shared.flush_notices();
    let pod = format!("{}/{}", args.pod_namespace, args.pod_name);
    match decision {
        BindDecision::AlreadyBound => answer("ok", String::new()),
        BindDecision::Reject(r) => {
            info!(%pod, node = %args.node, reason = %r, "bind refused");
            answer("refused", r.to_string())
        }
        BindDecision::InFlight { pod: who, node } => {
            debug!(%pod, %node, "bind asked while muster binds the pod; answering its outcome");
            answer_with(
                binding_answer(&who, &node, in_flight, request.node, call.answer_by()).await,
            )
        }
        BindDecision::Wait { gang, message } => {
            info!(%pod, node = %args.node, %message, "seated; waiting for quorum");
            shared.metrics.quorum_waits.inc();
            // Held for --bind-wait, and never past the moment kube-scheduler stops listening.
            let until = (tokio::time::Instant::now() + call.bind_wait).min(call.answer_by());
            let end = shared
                .held
                .hold(&shared.table, &shared.bindings, &gang, &args.pod_uid, until)
                .await;
            let who = PodRef {
                namespace: args.pod_namespace.as_str().into(),
                name: args.pod_name.as_str().into(),
                uid: args.pod_uid.as_str().into(),
            };
            match end {
                HoldEnd::HasNode { node, binding } => {
                    let result = match binding {
                        Some(b) => {
                            binding_answer(&who, &node, Some(b), request.node, call.answer_by())
                                .await
                        }
                        // On a node without a binding of muster's: bound by the API server's
                        // word (placed by someone else, or muster's binding long done).
                        None if *node == *request.node => Ok(()),
                        None => Err(BindRejection::BoundElsewhere {
                            pod: who.to_string(),
                            node: node.to_string(),
                        }
                        .to_string()),
                    };
                    answer_with(result)
                }
                HoldEnd::Released(reason) => {
                    // Stepped down while holding: the seat is gone with the table, and the new
                    // leader decides when kube-scheduler retries there.
                    if let Err(refusal) = call.admit() {
                        return answer("refused", refusal.message());
                    }
                    answer("refused", reason)
                }
                HoldEnd::StillWaiting => {
                    if let Err(refusal) = call.admit() {
                        return answer("refused", refusal.message());
                    }
                    // The wait outlasted the hold: now it is worth telling the user (once
                    // per reason: kube-scheduler retries the member every few seconds).
                    shared
                        .table
                        .lock()
                        .wait_outlasted_hold(&args.pod_uid, &message);
                    shared.flush_notices();
                    answer("refused", message)
                }
            }
        }
        BindDecision::BindNow { pod: who, node } => {
            let result = bind_retrying(shared, &who, &node).await;
            finish_binding(shared, &who, &node, &result);
            answer_with(result.map_err(|e| binding_failed(&who, &node, &e)))
        }
        BindDecision::BindGang { gang, members } => {
            info!(%gang, members = members.len(), "quorum reached; binding the gang");
            shared.metrics.gangs_placed.inc();
            // The held calls of the other members now wait on their own bindings.
            shared.held.wake(&gang);
            let calls = members.iter().map(|(p, n)| async move {
                let result = bind_retrying(shared, p, n).await;
                finish_binding(shared, p, n, &result);
                result.map_err(|e| binding_failed(p, n, &e))
            });
            let results = join_all(calls).await;
            let mine = members
                .iter()
                .zip(results)
                .find(|((p, _), _)| *p.uid == *args.pod_uid)
                .map(|(_, r)| r);
            answer_with(mine.unwrap_or(Ok(())))
        }
    }
}

/// The table's decision, and for a pod muster is binding, that binding: both under the table's
/// lock, where the bindings the decision starts are registered too.
fn decide(shared: &Shared, request: BindRequest<'_>) -> (BindDecision, Option<Pending>) {
    let mut table = shared.table.lock();
    let decision = table.bind(request, Instant::now());
    let mut in_flight = None;
    match &decision {
        BindDecision::BindNow { pod, node } => shared.bindings.begin(&pod.uid, node),
        BindDecision::BindGang { members, .. } => {
            for (pod, node) in members {
                shared.bindings.begin(&pod.uid, node);
            }
        }
        BindDecision::InFlight { pod, node } => {
            in_flight = shared.bindings.find(&pod.uid).filter(|b| b.node == *node);
        }
        _ => {}
    }
    (decision, in_flight)
}

/// The answer to a bind call for `pod` to `asked` while muster binds it to `node`: the
/// binding's outcome once it ends (success only for the node kube-scheduler asked for; for
/// another node, kube-scheduler must not believe its own choice), or if it has not ended
/// before kube-scheduler stops listening, that it is still being bound.
async fn binding_answer(
    pod: &PodRef,
    node: &NodeName,
    binding: Option<Pending>,
    asked: &str,
    answer_by: tokio::time::Instant,
) -> Result<(), String> {
    let outcome = match binding {
        Some(b) => b.outcome(answer_by).await,
        None => None,
    };
    match outcome {
        Some(Ok(())) if **node == *asked => Ok(()),
        Some(Ok(())) => Err(BindRejection::BoundElsewhere {
            pod: pod.to_string(),
            node: node.to_string(),
        }
        .to_string()),
        Some(Err(e)) => Err(e),
        None => Err(BindRejection::BindInFlight {
            pod: pod.to_string(),
            node: node.to_string(),
        }
        .to_string()),
    }
}

/// One binding, tried again while the API server's errors are transient; the pod keeps its
/// node in the table meanwhile.
async fn bind_retrying(shared: &Shared, pod: &PodRef, node: &NodeName) -> Result<(), String> {
    let retried = || {
        shared.metrics.bind_retries.inc();
    };
    let binding = binder::bind_retrying(
        &*shared.binder,
        pod.clone(),
        node.clone(),
        RetryPolicy::default(),
        retried,
    );
    // Retries stop when this replica stops deciding: the leader-election margin (lease
    // duration − renew deadline) is shorter than the retry budget, and a binding landing after
    // a standby took over could spend room the new leader gave away (no-overcommit). The new
    // leader completes a gang left partly bound.
    tokio::select! {
        result = binding => result,
        () = shared.leadership.lapsed() => Err(format!(
            "not tried further: {}",
            shared
                .leadership
                .refusal(Instant::now())
                .unwrap_or_else(|| "this replica stopped deciding".into())
        )),
    }
}

fn binding_failed(pod: &PodRef, node: &NodeName, error: &str) -> String {
    format!("binding {pod} to {node} failed: {error}")
}

/// Tells the table how a binding muster made ended (after its retries), then every bind call
/// waiting on it: in that order, so a call told of a failure finds the pod free in the table.
fn finish_binding(shared: &Shared, pod: &PodRef, node: &NodeName, result: &Result<(), String>) {
    let now = Instant::now();
    if let Err(e) = result {
        warn!(%pod, %node, error = %e, "binding failed");
        shared.metrics.bind_failures.inc();
        shared
            .table
            .lock()
            .bind_finished(pod, node, Err(e.clone()), now);
        shared.flush_notices();
    } else {
        debug!(%pod, %node, "bound");
    }
    let outcome = result.clone().map_err(|e| binding_failed(pod, node, &e));
    shared.bindings.end(&pod.uid, node, outcome, now);
}
