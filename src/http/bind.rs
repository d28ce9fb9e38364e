//! `POST <prefix>/bind`.

use std::time::Instant;

use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::future::join_all;
use tracing::{debug, info, warn};

use super::call::{Bind, Call};
use crate::cluster::binder::{self, RetryPolicy};
use crate::model::{BindDecision, BindRequest, NodeName, PodRef};
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
    let decision = shared.table.lock().bind(request, Instant::now());
    shared.flush_notices();
    let pod = format!("{}/{}", args.pod_namespace, args.pod_name);
    match decision {
        BindDecision::AlreadyBound => answer("ok", String::new()),
        BindDecision::Reject(r) => {
            info!(%pod, node = %args.node, reason = %r, "bind refused");
            answer("refused", r.to_string())
        }
        BindDecision::Wait { gang, message } => {
            info!(%pod, node = %args.node, %message, "seated; waiting for quorum");
            shared.metrics.quorum_waits.inc();
            let held = shared
                .held
                .hold(&shared.table, &gang, &args.pod_uid, call.bind_wait)
                .await;
            if !matches!(held, Some(Ok(()))) {
                // Stepped down while holding: the seat is gone with the table, and the new
                // leader decides when kube-scheduler retries there.
                if let Err(refusal) = call.admit() {
                    return answer("refused", refusal.message());
                }
            }
            match held {
                Some(Ok(())) => answer("ok", String::new()),
                Some(Err(e)) => answer("refused", e),
                None => {
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
            match result {
                Ok(()) => answer("ok", String::new()),
                Err(e) => answer("refused", binding_failed(&who, &node, &e)),
            }
        }
        BindDecision::BindGang { gang, members } => {
            info!(%gang, members = members.len(), "quorum reached; binding the gang");
            shared.metrics.gangs_placed.inc();
            let calls = members.iter().map(|(p, n)| bind_retrying(shared, p, n));
            let results = join_all(calls).await;
            let mut mine = Ok(());
            let now = Instant::now();
            for ((p, n), r) in members.iter().zip(results) {
                finish_binding(shared, p, n, &r);
                let r = r.map_err(|e| binding_failed(p, n, &e));
                if *p.uid == *args.pod_uid {
                    mine = r;
                } else {
                    shared.held.deliver(p.uid.clone(), r, now);
                }
            }
            shared.held.wake(&gang);
            match mine {
                Ok(()) => answer("ok", String::new()),
                Err(e) => answer("refused", e),
            }
        }
    }
}

/// One binding, tried again while the API server's errors are transient; the pod keeps its
/// node in the table meanwhile.
async fn bind_retrying(shared: &Shared, pod: &PodRef, node: &NodeName) -> Result<(), String> {
    let retried = || {
        shared.metrics.bind_retries.inc();
    };
    binder::bind_retrying(
        &*shared.binder,
        pod.clone(),
        node.clone(),
        RetryPolicy::default(),
        retried,
    )
    .await
}

fn binding_failed(pod: &PodRef, node: &NodeName, error: &str) -> String {
    format!("binding {pod} to {node} failed: {error}")
}

/// Tells the table how a binding muster made ended (after its retries).
fn finish_binding(shared: &Shared, pod: &PodRef, node: &NodeName, result: &Result<(), String>) {
    if let Err(e) = result {
        warn!(%pod, %node, error = %e, "binding failed");
        shared.metrics.bind_failures.inc();
        shared
            .table
            .lock()
            .bind_finished(pod, node, Err(e.clone()), Instant::now());
        shared.flush_notices();
    } else {
        debug!(%pod, %node, "bound");
    }
}
