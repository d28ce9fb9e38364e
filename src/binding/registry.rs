//! The bindings muster is making, by pod, and how each ended: what a bind call about a pod
//! muster is already binding answers with.
//!
//! kube-scheduler can ask to bind a pod muster is binding: the held call of a member whose gang
//! was completed by another member's call, or its next try of a member whose held call gave up
//! before the gang was complete (the binding cycle failed, so it forgot the pod, backed it off
//! and scheduled it again). An error answer there costs kube-scheduler a failed binding cycle
//! for a pod that is bound: it forgets the pod, moves every pod the extender had refused back to
//! its queues, records a `FailedScheduling` Event, writes `PodScheduled=False` into the status of
//! a pod that may already be bound, and backs the pod off. So the call waits for the binding's
//! outcome and answers with it: success for a binding to the node kube-scheduler assumed (its
//! assumed pod then matches the watch's update exactly), the binding's error if it failed.
//!
//! A binding begins under the table's lock, in the same critical section that assumed the pod,
//! so a call that finds the pod assumed always finds its binding here; it ends with the API
//! server's answer after the binder's retries, and is kept a while for calls that come late.

use std::time::{Duration, Instant};

use dashmap::DashMap;
use tokio::sync::watch;

use crate::model::{NodeName, PodUid};

/// How long the outcome of a finished binding is kept for bind calls that come after it.
const ENDED_KEPT_FOR: Duration = Duration::from_secs(60);

/// A binding's outcome: `Err` carries the message to answer kube-scheduler with.
pub type Outcome = Result<(), String>;

#[derive(Default)]
pub struct Bindings {
    by_pod: DashMap<PodUid, Binding>,
}

struct Binding {
    node: NodeName,
    outcome: watch::Sender<Option<Outcome>>,
    ended_at: Option<Instant>,
}

/// A binding a bind call waits on.
pub struct Pending {
    pub node: NodeName,
    outcome: watch::Receiver<Option<Outcome>>,
}

impl Bindings {
    /// muster starts binding `pod` to `node` (call it while holding the table's lock, where
    /// the pod was assumed). A binding begun again replaces the older one.
    pub fn begin(&self, pod: &PodUid, node: &NodeName) {
        let (outcome, _) = watch::channel(None);
        let binding = Binding {
            node: node.clone(),
            outcome,
            ended_at: None,
        };
        self.by_pod.insert(pod.clone(), binding);
    }

    /// The binding of `pod` to `node` ended (after the binder's retries). Call it after the
    /// table was told of a failure, so that a call woken by the failure finds the pod free.
    pub fn end(&self, pod: &str, node: &NodeName, outcome: Outcome, now: Instant) {
        if let Some(mut b) = self.by_pod.get_mut(pod) {
            if b.node == *node && b.ended_at.is_none() {
                b.outcome.send_replace(Some(outcome));
                b.ended_at = Some(now);
            }
        }
    }

    /// The binding muster is making (or made, recently) for `pod`.
    pub fn find(&self, pod: &str) -> Option<Pending> {
        self.by_pod.get(pod).map(|b| Pending {
            node: b.node.clone(),
            outcome: b.outcome.subscribe(),
        })
    }

    /// Forgets outcomes kept longer than [`ENDED_KEPT_FOR`].
    pub fn purge(&self, now: Instant) {
        self.by_pod.retain(|_, b| {
            b.ended_at
                .is_none_or(|at| now.saturating_duration_since(at) < ENDED_KEPT_FOR)
        });
    }

    /// Bindings remembered (in flight or ended recently).
    pub fn len(&self) -> usize {
        self.by_pod.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_pod.is_empty()
    }
}

impl Pending {
    /// The binding's outcome, or `None` if it has not ended by `deadline` (or was replaced).
    pub async fn outcome(mut self, deadline: tokio::time::Instant) -> Option<Outcome> {
        let ended = self.outcome.wait_for(Option::is_some);
        match tokio::time::timeout_at(deadline, ended).await {
            Ok(Ok(outcome)) => outcome.clone(),
            Ok(Err(_)) | Err(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn soon() -> tokio::time::Instant {
        tokio::time::Instant::now() + Duration::from_secs(5)
    }

    #[tokio::test]
    async fn a_waiter_gets_the_outcome_whether_it_came_before_or_after_the_end() {
        let b = Bindings::default();
        let (pod, node): (PodUid, NodeName) = (Arc::from("u"), Arc::from("n1"));
        b.begin(&pod, &node);
        let early = b.find("u").unwrap();
        assert_eq!(&*early.node, "n1");
        let waiting = tokio::spawn(early.outcome(soon()));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "answered before the binding ended");
        b.end("u", &node, Ok(()), Instant::now());
        assert_eq!(waiting.await.unwrap(), Some(Ok(())));
        let late = b.find("u").unwrap();
        assert_eq!(late.outcome(soon()).await, Some(Ok(())));
    }

    #[tokio::test]
    async fn an_outcome_for_another_node_or_a_second_end_changes_nothing() {
        let b = Bindings::default();
        let pod: PodUid = Arc::from("u");
        b.begin(&pod, &Arc::from("n1"));
        b.end("u", &Arc::from("n2"), Ok(()), Instant::now());
        let past = tokio::time::Instant::now();
        assert_eq!(b.find("u").unwrap().outcome(past).await, None, "not ended");
        b.end("u", &Arc::from("n1"), Err("gone".into()), Instant::now());
        b.end("u", &Arc::from("n1"), Ok(()), Instant::now());
        assert_eq!(
            b.find("u").unwrap().outcome(soon()).await,
            Some(Err("gone".into()))
        );
    }

    #[tokio::test]
    async fn a_replaced_binding_leaves_its_waiters_without_an_outcome() {
        let b = Bindings::default();
        let (pod, node): (PodUid, NodeName) = (Arc::from("u"), Arc::from("n1"));
        b.begin(&pod, &node);
        let old = b.find("u").unwrap();
        b.begin(&pod, &node);
        assert_eq!(old.outcome(soon()).await, None);
    }

    #[test]
    fn ended_bindings_are_forgotten_after_a_while_and_running_ones_never() {
        let b = Bindings::default();
        let (running, ended): (PodUid, PodUid) = (Arc::from("r"), Arc::from("e"));
        let node: NodeName = Arc::from("n1");
        b.begin(&running, &node);
        b.begin(&ended, &node);
        let t0 = Instant::now();
        b.end("e", &node, Ok(()), t0);
        b.purge(t0 + ENDED_KEPT_FOR - Duration::from_secs(1));
        assert_eq!(b.len(), 2);
        b.purge(t0 + ENDED_KEPT_FOR);
        assert!(b.find("e").is_none());
        assert!(b.find("r").is_some());
    }
}
