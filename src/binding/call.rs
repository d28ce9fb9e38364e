//! One bind call, from the table's decision to its answer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use crate::cluster::binder::{self, RetryPolicy};
use crate::model::{BindDecision, BindRejection, BindRequest, NodeName, PodRef};
use crate::state::bindings::{Binding, Outcome, Pending};
use crate::state::held::{HeldSeat, HoldEnd, HoldMark};
use crate::state::Shared;

/// One bind call as the HTTP layer hands it over.
pub struct BindCall<'a> {
    pub request: BindRequest<'a>,
    /// The latest moment to answer so that kube-scheduler still hears it.
    pub answer_by: tokio::time::Instant,
    /// How long the call of a member below quorum is held (`--bind-wait`).
    pub bind_wait: Duration,
}

/// Decides the bind call and carries the decision out: `Ok` is the success kube-scheduler is
/// answered with, `Err` the message of a refusal or a failed binding. `admit` says whether
/// this replica may still decide (asked again after a held call's wait).
pub async fn bind(
    shared: &Arc<Shared>,
    call: BindCall<'_>,
    admit: impl Fn() -> Result<(), String>,
) -> Outcome {
    let request = call.request;
    let pod = format!("{}/{}", request.namespace, request.name);
    // Set by the first hold: a call that decides again after a wake-up is held no longer in all.
    let mut held_until: Option<tokio::time::Instant> = None;
    // The call's mark in the table as held, from its first decision to wait until the call
    // ends, however it ends: a call woken to decide again is still kube-scheduler's, so a
    // sibling deciding the quorum before it does counts its seat as held (no-overcommit's
    // held-call rule) instead of letting it go. Ended only when this function returns, or
    // replaced by the mark of a new decision to wait (made before this one ends).
    let mut marked: Option<HoldMark<'_>> = None;
    loop {
        // The bindings the decision starts are spawned before anything here awaits: they belong
        // to tasks of their own, which end them whether or not this call is still there to hear
        // it (kube-scheduler closes the connection at its httpTimeout, and the call is dropped).
        let Decided {
            decision,
            in_flight,
            started,
            rooms_freed,
            held,
        } = decide(shared, request);
        shared.flush_notices();
        return match decision {
            BindDecision::AlreadyBound => Ok(()),
            BindDecision::Reject(r) => {
                info!(%pod, node = %request.node, reason = %r, "bind refused");
                Err(r.to_string())
            }
            BindDecision::InFlight { pod: who, node } => {
                debug!(%pod, %node, "bind asked while muster binds the pod; answering its outcome");
                binding_answer(&who, &node, in_flight, request.node, call.answer_by).await
            }
            BindDecision::Wait { gang, message } => {
                let until = match held_until {
                    Some(until) => until,
                    None => {
                        info!(%pod, node = %request.node, %message, "seated; waiting for quorum");
                        shared.metrics.quorum_waits.inc();
                        // Held for --bind-wait, and never past the moment kube-scheduler stops
                        // listening.
                        *held_until.insert(
                            (tokio::time::Instant::now() + call.bind_wait).min(call.answer_by),
                        )
                    }
                };
                // Tests put a watch event here: after the decision, before the hold.
                #[cfg(test)]
                tests::between_decision_and_hold();
                if let Some(mark) = held {
                    marked = Some(mark);
                }
                let end = shared
                    .held
                    .hold(
                        &shared.table,
                        &shared.bindings,
                        HeldSeat {
                            gang: &gang,
                            uid: request.uid,
                            node: request.node,
                        },
                        rooms_freed,
                        until,
                        marked
                            .as_ref()
                            .expect("a decision to wait marks its call held"),
                    )
                    .await;
                let who = PodRef {
                    namespace: request.namespace.into(),
                    name: request.name.into(),
                    uid: request.uid.into(),
                };
                match end {
                    HoldEnd::HasNode { node, binding } => match binding {
                        Some(b) => {
                            binding_answer(&who, &node, Some(b), request.node, call.answer_by).await
                        }
                        // On a node without a binding of muster's: bound by the API server's
                        // word (placed by someone else, or muster's binding long done).
                        None if *node == *request.node => Ok(()),
                        None => Err(BindRejection::BoundElsewhere {
                            pod: who.to_string(),
                            node: node.to_string(),
                        }
                        .to_string()),
                    },
                    HoldEnd::Released(reason) => {
                        // Stepped down while holding: the seat is gone with the table, and the new
                        // leader decides when kube-scheduler retries there.
                        admit()?;
                        Err(reason)
                    }
                    HoldEnd::Woken => {
                        // The room the quorum waited for was freed: decide again, if this replica
                        // still decides.
                        admit()?;
                        // Tests put a sibling's call here: after the wake-up, before deciding
                        // again (where calls woken together queue for the table's lock).
                        #[cfg(test)]
                        tests::between_wake_and_decision().await;
                        continue;
                    }
                    HoldEnd::StillWaiting => {
                        admit()?;
                        // The wait outlasted the hold: now it is worth telling the user (once
                        // per reason: kube-scheduler retries the member every few seconds).
                        shared
                            .table
                            .lock()
                            .wait_outlasted_hold(request.uid, &message);
                        shared.flush_notices();
                        Err(message)
                    }
                }
            }
            BindDecision::BindNow { pod: who, node } => {
                let mine = started
                    .into_iter()
                    .next()
                    .map(|(_, b)| spawn_binding(shared, who.clone(), b));
                binding_answer(&who, &node, mine, request.node, call.answer_by).await
            }
            BindDecision::BindGang { gang, members } => {
                info!(%gang, members = members.len(), "quorum reached; binding the gang");
                shared.metrics.gangs_placed.inc();
                // The held calls of the other members now wait on their own bindings.
                shared.held.wake(&gang);
                let mut mine = None;
                for (pod, binding) in started {
                    let pending = spawn_binding(shared, pod.clone(), binding);
                    if *pod.uid == *request.uid {
                        mine = Some((pod, pending));
                    }
                }
                match mine {
                    Some((who, pending)) => {
                        let node = pending.node.clone();
                        binding_answer(&who, &node, Some(pending), request.node, call.answer_by)
                            .await
                    }
                    None => Ok(()),
                }
            }
        };
    }
}

/// The table's decision and what it started.
struct Decided<'a> {
    decision: BindDecision,
    /// For a pod muster is binding: that binding.
    in_flight: Option<Pending>,
    /// The bindings the decision starts, to be spawned.
    started: Vec<(PodRef, Binding)>,
    /// For a call to be held: how many times room its gang waited for was freed, read with
    /// the decision (see `HeldBinds::hold`).
    rooms_freed: u64,
    /// For a call to be held: its mark in the table, made with the decision.
    held: Option<HoldMark<'a>>,
}

/// The table's decision, and for a pod muster is binding, that binding: both under the table's
/// lock, where the bindings the decision starts are registered too, and for a call to be held
/// the count of freed room its hold compares with.
fn decide<'a>(shared: &'a Shared, request: BindRequest<'a>) -> Decided<'a> {
    let mut table = shared.table.lock();
    let decision = table.bind(request, Instant::now());
    shared
        .metrics
        .gathered_seats_let_go
        .inc_by(table.take_seats_let_go());
    let mut in_flight = None;
    let mut started = Vec::new();
    let mut rooms_freed = 0;
    let mut held = None;
    match &decision {
        BindDecision::BindNow { pod, node } => {
            started.push((pod.clone(), shared.bindings.begin(&pod.uid, node)));
        }
        BindDecision::BindGang { members, .. } => {
            for (pod, node) in members {
                started.push((pod.clone(), shared.bindings.begin(&pod.uid, node)));
            }
        }
        BindDecision::InFlight { pod, node } => {
            in_flight = shared.bindings.find(&pod.uid).filter(|b| b.node == *node);
        }
        BindDecision::Wait { gang, .. } => {
            rooms_freed = table.rooms_freed(gang);
            // Held from this decision on, under the lock that made it: a sibling's decision
            // meanwhile counts this member's seat as kube-scheduler's.
            held = Some(HoldMark::new(&shared.table, &mut table, request.uid));
        }
        _ => {}
    }
    Decided {
        decision,
        in_flight,
        started,
        rooms_freed,
        held,
    }
}

/// Makes `binding` in a task of its own, which tells the table and the registry how it ended;
/// returns what a bind call waits on.
fn spawn_binding(shared: &Arc<Shared>, pod: PodRef, binding: Binding) -> Pending {
    let pending = binding.pending();
    let mut making = Making {
        shared: shared.clone(),
        pod,
        binding: Some(binding),
    };
    tokio::spawn(async move {
        let node = making.binding.as_ref().expect("not ended").node().clone();
        let result = bind_retrying(&making.shared, &making.pod, &node).await;
        if let Some(binding) = making.binding.take() {
            finish_binding(&making.shared, &making.pod, binding, &result);
        }
    });
    pending
}

/// A binding being made by its task. Dropped before it ended (the task was cancelled at
/// shutdown, or panicked), it ends as failed, in the table as in the registry: no pod stays
/// "being bound" (fail-safe).
struct Making {
    shared: Arc<Shared>,
    pod: PodRef,
    binding: Option<Binding>,
}

impl Drop for Making {
    fn drop(&mut self) {
        if let Some(binding) = self.binding.take() {
            let error = "muster stopped binding it before the API server answered".to_string();
            finish_binding(&self.shared, &self.pod, binding, &Err(error));
        }
    }
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
) -> Outcome {
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
    // a standby took over could spend room the new leader gave away (no-overcommit).
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
fn finish_binding(shared: &Shared, pod: &PodRef, binding: Binding, result: &Result<(), String>) {
    let now = Instant::now();
    let node = binding.node();
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
    binding.end(outcome, now);
}

#[cfg(test)]
mod tests;
