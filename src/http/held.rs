//! Bind calls held open while their gang gathers: both sides of the protocol.
//!
//! A seated member's bind call is held (up to `--bind-wait`) instead of failed at once: that
//! spares kube-scheduler an error, a FailedScheduling Event, a status write and a back-off per
//! member, and the gang is bound the moment its last member arrives. The call that completes
//! the quorum binds every member, leaves each held call its own binding's result and wakes
//! them ([`HeldBinds::deliver`], [`HeldBinds::wake`]); a gang that loses its seats (timeout, deletion) wakes its
//! held calls so they answer at once ([`HeldBinds::wake`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::model::{GangKey, GangTable, PodUid};

/// How long a binding result waits for the held call it belongs to (which may have given up).
const UNCLAIMED_RESULT_TTL: Duration = Duration::from_secs(60);

/// How much longer a held call waits, past `--bind-wait`, when muster is binding its pod at
/// that moment: the binder's retries end well within it, and the call must answer with the
/// binding's result, never "waiting for quorum" for a pod that is being bound.
const BINDING_GRACE: Duration = Duration::from_secs(30);

#[derive(Default)]
pub struct HeldBinds {
    /// Woken when the gang is bound or loses its seats. Sharded maps are right here: each
    /// entry is independent and touched by few tasks.
    wakers: DashMap<GangKey, Arc<Notify>>,
    /// Result of a binding muster made for a member whose own bind call is being held.
    results: DashMap<PodUid, (Instant, Result<(), String>)>,
}

impl HeldBinds {
    /// Holds the bind call of seated member `uid` until muster binds its gang (then answers
    /// with the result of this pod's binding), the gang loses its seats, or `wait` passes.
    /// `None`: still waiting; the caller answers "waiting for quorum" and kube-scheduler
    /// retries later.
    pub async fn hold(
        &self,
        table: &Mutex<GangTable>,
        gang: &GangKey,
        uid: &str,
        wait: Duration,
    ) -> Option<Result<(), String>> {
        if wait.is_zero() {
            return None;
        }
        let mut deadline = tokio::time::Instant::now() + wait;
        let mut graced = false;
        loop {
            let waker = self.wakers.entry(gang.clone()).or_default().clone();
            let woken = waker.notified();
            tokio::pin!(woken);
            // Registered before looking, so a wake-up between the look and the wait is kept.
            woken.as_mut().enable();
            if let Some((_, (_, result))) = self.results.remove(uid) {
                return Some(result);
            }
            let (waiting, reason) = {
                let t = table.lock();
                // A member with a node has left its seat because its gang reached quorum:
                // muster is binding it, and the result arrives with the next wake-up.
                (t.holds_seat(uid) || t.has_node(uid), t.wait_reason(uid))
            };
            if !waiting {
                return Some(Err(reason.unwrap_or_else(|| {
                    format!("gang {gang} released its seats before reaching quorum")
                })));
            }
            if tokio::time::timeout_at(deadline, woken).await.is_err() {
                if !graced && table.lock().has_node(uid) {
                    graced = true;
                    deadline = tokio::time::Instant::now() + BINDING_GRACE;
                    continue;
                }
                return None;
            }
        }
    }

    /// Leaves a held member the result of the binding muster made for it (picked up when
    /// its call is woken by [`HeldBinds::wake`]).
    pub fn deliver(&self, uid: PodUid, result: Result<(), String>, now: Instant) {
        self.results.insert(uid, (now, result));
    }

    /// Wakes every bind call held for this gang (it was bound, or lost its seats).
    pub fn wake(&self, gang: &GangKey) {
        if let Some((_, n)) = self.wakers.remove(gang) {
            n.notify_waiters();
        }
    }

    /// Wakes every held bind call (this replica stopped deciding).
    pub fn wake_all(&self) {
        let gangs: Vec<GangKey> = self.wakers.iter().map(|e| e.key().clone()).collect();
        for gang in gangs {
            self.wake(&gang);
        }
    }

    /// Forgets results nobody picked up (the held call had already given up).
    pub fn purge(&self, now: Instant) {
        self.results
            .retain(|_, (at, _)| now.saturating_duration_since(*at) < UNCLAIMED_RESULT_TTL);
    }
}
