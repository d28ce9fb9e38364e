//! Evicts the rest of a gang that preemption disrupts whole.
//!
//! kube-scheduler evicts the victims on the node it picked; when those victims belong to a
//! running gang in `gang` disruption mode, the gang's other members are useless on their own,
//! so muster evicts them too, through the Eviction API so that PodDisruptionBudgets are
//! honoured. An eviction the budget forbids now (HTTP 429) is retried every
//! [`RETRY_EVERY`] until [`GIVE_UP_AFTER`]; if the budget never allows it, the member keeps
//! running, a Warning Event on it says so, and the gang is left as the budget demands (the
//! budget's owner chose that; muster does not override it by deleting the pod).

use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, EvictParams};
use kube::Client;
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::model::{GangDisruption, Notice, NoticeKind, PodRef};
use crate::state::event_sink::EventSink;

/// How often an eviction refused by a PodDisruptionBudget is tried again.
pub const RETRY_EVERY: Duration = Duration::from_secs(5);
/// How long muster keeps trying an eviction a PodDisruptionBudget refuses.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(600);

/// The outcome of one eviction attempt.
#[derive(Debug, PartialEq, Eq)]
pub enum EvictOutcome {
    /// Evicted, or already gone.
    Done,
    /// A PodDisruptionBudget does not allow it now (HTTP 429): try again later.
    Budget(String),
    /// Refused for good (the message says why).
    Failed(String),
    /// Not tried: this replica is not the leader (any more); only the leader evicts.
    NotLeader,
}

/// Whether this replica leads now (only the leader evicts). Always true without election.
pub type Leading = std::sync::Arc<dyn Fn() -> bool + Send + Sync>;

/// Something that can evict a pod. The real one calls the Eviction API; tests record calls.
pub trait Evictor: Send + Sync + 'static {
    fn evict(&self, pod: PodRef) -> BoxFuture<'static, EvictOutcome>;
}

pub struct KubeEvictor {
    client: Client,
}

impl KubeEvictor {
    pub fn new(client: Client) -> Self {
        KubeEvictor { client }
    }
}

impl Evictor for KubeEvictor {
    fn evict(&self, pod: PodRef) -> BoxFuture<'static, EvictOutcome> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        Box::pin(async move {
            // Only this pod: a new pod of the same name is not a member of the gang decided on.
            let delete = kube::api::DeleteParams {
                preconditions: Some(kube::api::Preconditions {
                    uid: Some(pod.uid.to_string()),
                    resource_version: None,
                }),
                ..Default::default()
            };
            let params = EvictParams {
                delete_options: Some(delete),
                ..Default::default()
            };
            match api.evict(&pod.name, &params).await {
                Ok(_) => EvictOutcome::Done,
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => EvictOutcome::Done,
                Err(kube::Error::Api(s)) if s.code == 429 => EvictOutcome::Budget(s.message),
                Err(e) => EvictOutcome::Failed(e.to_string()),
            }
        })
    }
}

/// Evicts every member of each disrupted gang, members concurrently.
pub async fn run_evictions(
    evictor: std::sync::Arc<dyn Evictor>,
    leading: Leading,
    events: EventSink,
    mut rx: mpsc::UnboundedReceiver<GangDisruption>,
    retry_every: Duration,
    give_up_after: Duration,
) {
    while let Some(d) = rx.recv().await {
        if !leading() {
            warn!(gang = %d.gang, "not the leader: the disrupted gang is not evicted by this replica");
            continue;
        }
        info!(gang = %d.gang, members = d.others.len(), "evicting a gang disrupted whole");
        for pod in d.others {
            let evictor = evictor.clone();
            let events = events.clone();
            let gang = d.gang.clone();
            let leading = leading.clone();
            tokio::spawn(async move {
                let tell = |m: &str| {
                    events.send_all(vec![Notice {
                        pod: pod.clone(),
                        kind: NoticeKind::Disrupted,
                        message: budget_wait_message(&gang, m, retry_every, give_up_after),
                    }])
                };
                let outcome = evict_with_retries(
                    &*evictor,
                    &*leading,
                    pod.clone(),
                    retry_every,
                    give_up_after,
                    tell,
                )
                .await;
                if outcome == EvictOutcome::NotLeader {
                    warn!(pod = %pod, gang = %gang, "stopped leading: this replica does not evict the gang member");
                    return;
                }
                if let Some(message) = failure_message(&gang, &outcome, give_up_after) {
                    warn!(pod = %pod, gang = %gang, %message, "eviction of a gang member failed");
                    events.send_all(vec![Notice {
                        pod,
                        kind: NoticeKind::Disrupted,
                        message,
                    }]);
                }
            });
        }
    }
}

/// Tries until done, refused for good, or a budget has refused for `give_up_after`.
/// `on_first_refusal` is called once, with the budget's message, the first time a budget
/// refuses (so the user hears at once why the member is still running). Before every
/// attempt `leading` is asked: a replica that is not the leader does not evict
/// ([`EvictOutcome::NotLeader`]).
pub async fn evict_with_retries(
    evictor: &dyn Evictor,
    leading: &(dyn Fn() -> bool + Send + Sync),
    pod: PodRef,
    retry_every: Duration,
    give_up_after: Duration,
    on_first_refusal: impl FnOnce(&str),
) -> EvictOutcome {
    let deadline = tokio::time::Instant::now() + give_up_after;
    let mut on_first_refusal = Some(on_first_refusal);
    loop {
        if !leading() {
            return EvictOutcome::NotLeader;
        }
        match evictor.evict(pod.clone()).await {
            EvictOutcome::Budget(m) if tokio::time::Instant::now() + retry_every <= deadline => {
                info!(pod = %pod, message = %m, "eviction refused by a PodDisruptionBudget; retrying");
                if let Some(tell) = on_first_refusal.take() {
                    tell(&m);
                }
                tokio::time::sleep(retry_every).await;
            }
            other => return other,
        }
    }
}

fn budget_wait_message(
    gang: &crate::model::GangKey,
    budget: &str,
    retry_every: Duration,
    give_up_after: Duration,
) -> String {
    format!(
        "gang {gang} is disrupted by preemption, but a PodDisruptionBudget does not allow evicting this member now ({budget}); muster retries every {}s for up to {}s",
        retry_every.as_secs(),
        give_up_after.as_secs()
    )
}

fn failure_message(
    gang: &crate::model::GangKey,
    outcome: &EvictOutcome,
    waited: Duration,
) -> Option<String> {
    match outcome {
        EvictOutcome::Done | EvictOutcome::NotLeader => None,
        EvictOutcome::Budget(m) => Some(format!(
            "gang {gang} is disrupted by preemption, but a PodDisruptionBudget refused this member's eviction for {}s ({m}); it keeps running",
            waited.as_secs()
        )),
        EvictOutcome::Failed(m) => Some(format!(
            "gang {gang} is disrupted by preemption, but this member could not be evicted: {m}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;
    use std::sync::Arc;

    /// Answers from a script, then `Done`; counts calls.
    struct Scripted {
        answers: Mutex<Vec<EvictOutcome>>,
        calls: Mutex<u32>,
    }

    impl Evictor for Scripted {
        fn evict(&self, _pod: PodRef) -> BoxFuture<'static, EvictOutcome> {
            *self.calls.lock() += 1;
            let mut a = self.answers.lock();
            let next = if a.is_empty() {
                EvictOutcome::Done
            } else {
                a.remove(0)
            };
            Box::pin(async move { next })
        }
    }

    fn pod() -> PodRef {
        PodRef {
            namespace: Arc::from("ml"),
            name: Arc::from("run-1"),
            uid: Arc::from("uid-run-1"),
        }
    }

    #[tokio::test]
    async fn a_budget_refusal_is_retried_until_the_budget_allows_it() {
        let e = Scripted {
            answers: Mutex::new(vec![
                EvictOutcome::Budget("Cannot evict pod".into()),
                EvictOutcome::Budget("Cannot evict pod".into()),
            ]),
            calls: Mutex::new(0),
        };
        let told = Mutex::new(Vec::new());
        let outcome = evict_with_retries(
            &e,
            &|| true,
            pod(),
            Duration::from_millis(5),
            Duration::from_secs(60),
            |m| told.lock().push(m.to_string()),
        )
        .await;
        assert_eq!(outcome, EvictOutcome::Done);
        assert_eq!(*e.calls.lock(), 3);
        assert_eq!(
            *told.lock(),
            vec!["Cannot evict pod"],
            "told once, at the first refusal"
        );
    }

    #[tokio::test]
    async fn a_budget_that_never_allows_it_is_given_up_and_said() {
        let e = Scripted {
            answers: Mutex::new(
                (0..100)
                    .map(|_| EvictOutcome::Budget("no".into()))
                    .collect(),
            ),
            calls: Mutex::new(0),
        };
        let outcome = evict_with_retries(
            &e,
            &|| true,
            pod(),
            Duration::from_millis(10),
            Duration::from_millis(45),
            |_| {},
        )
        .await;
        assert!(matches!(outcome, EvictOutcome::Budget(_)));
        // Retried while the deadline allowed (timer slack decides whether 3, 4 or 5 times),
        // then given up instead of trying forever.
        assert!((2..=5).contains(&*e.calls.lock()), "{}", e.calls.lock());
        let gang = crate::model::GangKey::new("ml", "run");
        let message = failure_message(&gang, &outcome, Duration::from_secs(20)).unwrap();
        assert!(
            message.contains("PodDisruptionBudget refused") && message.contains("keeps running")
        );
    }

    #[tokio::test]
    async fn a_replica_that_is_not_the_leader_evicts_nothing() {
        let e = Scripted {
            answers: Mutex::new(vec![EvictOutcome::Budget("Cannot evict pod".into())]),
            calls: Mutex::new(0),
        };
        let outcome = evict_with_retries(
            &e,
            &|| false,
            pod(),
            Duration::from_millis(5),
            Duration::from_secs(60),
            |_| {},
        )
        .await;
        assert_eq!(outcome, EvictOutcome::NotLeader);
        assert_eq!(*e.calls.lock(), 0, "no eviction attempted");
    }

    #[tokio::test]
    async fn losing_the_lease_between_budget_retries_stops_the_evictions() {
        let e = Scripted {
            answers: Mutex::new(vec![EvictOutcome::Budget("Cannot evict pod".into())]),
            calls: Mutex::new(0),
        };
        let asked = Mutex::new(0u32);
        let leading = || {
            let mut n = asked.lock();
            *n += 1;
            *n == 1
        };
        let outcome = evict_with_retries(
            &e,
            &leading,
            pod(),
            Duration::from_millis(5),
            Duration::from_secs(60),
            |_| {},
        )
        .await;
        assert_eq!(outcome, EvictOutcome::NotLeader);
        assert_eq!(*e.calls.lock(), 1, "tried once while leading, never after");
    }
}
