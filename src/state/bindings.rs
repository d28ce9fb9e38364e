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
//! Every binding ends: the task that makes it owns its [`Binding`], and a `Binding` dropped
//! without an outcome (its task cancelled at shutdown, or panicked) ends as failed.

use std::time::{Duration, Instant};

use dashmap::DashMap;
use tokio::sync::watch;

use crate::model::{NodeName, PodUid};

/// How long the outcome of a finished binding is kept for bind calls that come after it.
const ENDED_KEPT_FOR: Duration = Duration::from_secs(60);

/// A binding's outcome: `Err` carries the message to answer kube-scheduler with.
pub type Outcome = Result<(), String>;

/// How a binding ended, and when.
type Ended = Option<(Outcome, Instant)>;

#[derive(Default)]
pub struct Bindings {
    by_pod: DashMap<PodUid, Entry>,
}

struct Entry {
    node: NodeName,
    ended: watch::Receiver<Ended>,
}

/// A binding muster began: whoever owns it ends it ([`Binding::end`]). Dropped without an
/// end (the task that owned it was cancelled or panicked), it ends as failed, so no bind call
/// waits on it forever and no entry stays "in flight".
#[must_use = "a binding must be ended"]
pub struct Binding {
    node: NodeName,
    ended: Option<watch::Sender<Ended>>,
}

/// A binding a bind call waits on.
pub struct Pending {
    pub node: NodeName,
    outcome: watch::Receiver<Ended>,
}

impl Bindings {
    /// muster starts binding `pod` to `node` (call it while holding the table's lock, where
    /// the pod was assumed). A binding begun again replaces the older one in the registry
    /// (the older one's waiters still get its outcome).
    pub fn begin(&self, pod: &PodUid, node: &NodeName) -> Binding {
        let (sender, ended) = watch::channel(None);
        let entry = Entry {
            node: node.clone(),
            ended,
        };
        self.by_pod.insert(pod.clone(), entry);
        Binding {
            node: node.clone(),
            ended: Some(sender),
        }
    }

    /// The binding muster is making (or made, recently) for `pod`.
    pub fn find(&self, pod: &str) -> Option<Pending> {
        self.by_pod.get(pod).map(|b| Pending {
            node: b.node.clone(),
            outcome: b.ended.clone(),
        })
    }

    /// Forgets outcomes kept longer than [`ENDED_KEPT_FOR`].
    pub fn purge(&self, now: Instant) {
        self.by_pod.retain(|_, b| match &*b.ended.borrow() {
            Some((_, at)) => now.saturating_duration_since(*at) < ENDED_KEPT_FOR,
            None => true,
        });
    }

    /// Bindings remembered (in flight or ended recently).
    pub fn len(&self) -> usize {
        self.by_pod.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_pod.is_empty()
    }

    /// Bindings muster is making that have not ended.
    pub fn in_flight(&self) -> usize {
        self.by_pod
            .iter()
            .filter(|b| b.ended.borrow().is_none())
            .count()
    }
}

impl Binding {
    pub fn node(&self) -> &NodeName {
        &self.node
    }

    /// What a bind call about this binding waits on.
    pub fn pending(&self) -> Pending {
        let sender = self.ended.as_ref().expect("not ended");
        Pending {
            node: self.node.clone(),
            outcome: sender.subscribe(),
        }
    }

    /// The binding ended (after the binder's retries). Call it after the table was told of a
    /// failure, so that a call woken by the failure finds the pod free.
    pub fn end(mut self, outcome: Outcome, now: Instant) {
        if let Some(sender) = self.ended.take() {
            sender.send_replace(Some((outcome, now)));
        }
    }
}

impl Drop for Binding {
    fn drop(&mut self) {
        if let Some(sender) = self.ended.take() {
            let message = format!(
                "muster stopped binding the pod to {} before the API server answered",
                self.node
            );
            sender.send_replace(Some((Err(message), Instant::now())));
        }
    }
}

impl Pending {
    /// The binding's outcome, or `None` if it has not ended by `deadline`.
    pub async fn outcome(mut self, deadline: tokio::time::Instant) -> Option<Outcome> {
        let ended = self.outcome.wait_for(Option::is_some);
        match tokio::time::timeout_at(deadline, ended).await {
            Ok(Ok(ended)) => ended.as_ref().map(|(o, _)| o.clone()),
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
        let binding = b.begin(&pod, &node);
        let early = b.find("u").unwrap();
        assert_eq!(&*early.node, "n1");
        let waiting = tokio::spawn(early.outcome(soon()));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "answered before the binding ended");
        assert_eq!(b.in_flight(), 1);
        binding.end(Ok(()), Instant::now());
        assert_eq!(waiting.await.unwrap(), Some(Ok(())));
        let late = b.find("u").unwrap();
        assert_eq!(late.outcome(soon()).await, Some(Ok(())));
        assert_eq!(b.in_flight(), 0);
    }

    #[tokio::test]
    async fn a_binding_dropped_without_an_end_ends_as_failed() {
        let b = Bindings::default();
        let (pod, node): (PodUid, NodeName) = (Arc::from("u"), Arc::from("n1"));
        let binding = b.begin(&pod, &node);
        let waiting = tokio::spawn(b.find("u").unwrap().outcome(soon()));
        drop(binding);
        assert_eq!(
            waiting.await.unwrap(),
            Some(Err(
                "muster stopped binding the pod to n1 before the API server answered".into()
            ))
        );
        assert_eq!(b.in_flight(), 0);
    }

    #[tokio::test]
    async fn a_replaced_binding_still_tells_its_own_waiters_its_outcome() {
        let b = Bindings::default();
        let (pod, node): (PodUid, NodeName) = (Arc::from("u"), Arc::from("n1"));
        let first = b.begin(&pod, &node);
        let old = b.find("u").unwrap();
        let second = b.begin(&pod, &Arc::from("n2"));
        first.end(Err("gone".into()), Instant::now());
        assert_eq!(old.outcome(soon()).await, Some(Err("gone".into())));
        let now = b.find("u").unwrap();
        assert_eq!(&*now.node, "n2");
        assert_eq!(
            now.outcome(tokio::time::Instant::now()).await,
            None,
            "not ended"
        );
        second.end(Ok(()), Instant::now());
    }

    #[test]
    fn ended_bindings_are_forgotten_after_a_while_and_running_ones_never() {
        let b = Bindings::default();
        let (running, ended): (PodUid, PodUid) = (Arc::from("r"), Arc::from("e"));
        let node: NodeName = Arc::from("n1");
        let _running = b.begin(&running, &node);
        let t0 = Instant::now();
        b.begin(&ended, &node).end(Ok(()), t0);
        b.purge(t0 + ENDED_KEPT_FOR - Duration::from_secs(1));
        assert_eq!(b.len(), 2);
        b.purge(t0 + ENDED_KEPT_FOR);
        assert!(b.find("e").is_none());
        assert!(b.find("r").is_some());
    }
}
