//! Bind calls held open while their gang waits for quorum: both sides of the protocol.
//!
//! A seated member's bind call is held (up to `--bind-wait`) instead of failed at once: that
//! spares kube-scheduler an error, a FailedScheduling Event, a status write, a back-off and a
//! retry of every pod the extender had refused, per member; and the gang is bound the moment its
//! last member arrives. The call that completes the quorum binds every member and wakes the held
//! calls ([`HeldBinds::wake`]); each then answers with its own pod's binding
//! ([`super::bindings`]). A gang that loses its seats (timeout, deletion) wakes its held calls
//! so they answer at once.
//!
//! Every held call answers before kube-scheduler's client gives up (`--extender-http-timeout`):
//! an answer after that is lost, and kube-scheduler counts the call as a failed binding.

use std::sync::Arc;

use dashmap::DashMap;
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::bindings::{Bindings, Pending};
use crate::model::{GangKey, GangTable, NodeName};

#[derive(Default)]
pub struct HeldBinds {
    /// Woken when the gang is bound or loses its seats. Sharded maps are right here: each
    /// entry is independent and touched by few tasks.
    wakers: DashMap<GangKey, Arc<Notify>>,
}

/// The seat a bind call is held for: member `uid` of `gang`, on `node` (the node of the call).
#[derive(Clone, Copy)]
pub struct HeldSeat<'a> {
    pub gang: &'a GangKey,
    pub uid: &'a str,
    pub node: &'a str,
}

/// How a held bind call ends.
pub enum HoldEnd {
    /// The pod has a node: muster is binding it (with its binding to wait on), or the API
    /// server already has it on `node` (bound by someone else, or long ago).
    HasNode {
        node: NodeName,
        binding: Option<Pending>,
    },
    /// The pod holds no seat on the call's node any more (its gang timed out, lost room, was
    /// placed again elsewhere, or this replica stepped down): why, as the table tells it.
    Released(String),
    /// The hold ran out with the gang still below quorum; the seat is kept.
    StillWaiting,
    /// Woken with the seat still held and no node, or found `GangTable::rooms_freed` changed
    /// since the decision: the room the gang's quorum waited for was freed (see
    /// `GangTable::take_room_freed`), so the call decides again.
    Woken,
}

impl HeldBinds {
    /// Holds the bind call of a member for its `seat` until muster binds it, the seat is
    /// released or moves to another node, the room its quorum waits for is freed, or `until`
    /// passes. `rooms_freed` is `GangTable::rooms_freed` read under the lock of the decision
    /// to hold: room freed after that decision and before this hold registered its waker sent
    /// a wake-up that reached no one, and the count tells it instead (the call decides again
    /// at once). `_mark` is the call's mark in the table as held, made with that decision; the
    /// call keeps it past the hold while it decides again, and ends it when it ends.
    pub async fn hold(
        &self,
        table: &Mutex<GangTable>,
        bindings: &Bindings,
        seat: HeldSeat<'_>,
        rooms_freed: u64,
        until: tokio::time::Instant,
        _mark: &HoldMark<'_>,
    ) -> HoldEnd {
        let HeldSeat { gang, uid, node } = seat;
        if until <= tokio::time::Instant::now() {
            return HoldEnd::StillWaiting;
        }
        let (mut last_look, mut woken_once) = (false, false);
        loop {
            let waker = self.wakers.entry(gang.clone()).or_default().clone();
            let woken = waker.notified();
            tokio::pin!(woken);
            // Registered before looking, so a wake-up between the look and the wait is kept.
            woken.as_mut().enable();
            {
                let t = table.lock();
                // Looked up under the table's lock, where muster assumed the pod and began
                // its binding: a pod with a node muster is binding always has it here.
                if let Some(node) = t.node_of(uid) {
                    let binding = bindings.find(uid).filter(|b| b.node == node);
                    return HoldEnd::HasNode { node, binding };
                }
                // Held for its seat on `node`: gone or moved, the call answers (see
                // `GangTable::held_seat_lost`).
                if let Some(reason) = t.held_seat_lost(gang, uid, node) {
                    return HoldEnd::Released(reason);
                }
                // The room came before the waker was registered (or while it slept).
                if t.rooms_freed(gang) != rooms_freed {
                    return HoldEnd::Woken;
                }
            }
            if last_look {
                return HoldEnd::StillWaiting;
            }
            if woken_once {
                return HoldEnd::Woken;
            }
            match tokio::time::timeout_at(until, woken).await {
                Ok(()) => woken_once = true,
                // One more look: the gang may have been bound as the hold ran out.
                Err(_) => last_look = true,
            }
        }
    }

    /// Wakes every bind call held for this gang (it is being bound, lost its seats, or the room
    /// its quorum waited for was freed).
    pub fn wake(&self, gang: &GangKey) {
        if let Some((_, n)) = self.wakers.remove(gang) {
            n.notify_waiters();
        }
    }

    /// Whether a bind call of `gang` is held (registered, waiting to be woken).
    #[cfg(test)]
    pub fn is_holding(&self, gang: &GangKey) -> bool {
        self.wakers.contains_key(gang)
    }

    /// Wakes every held bind call (this replica stopped deciding).
    pub fn wake_all(&self) {
        let gangs: Vec<GangKey> = self.wakers.iter().map(|e| e.key().clone()).collect();
        for gang in gangs {
            self.wake(&gang);
        }
    }
}

/// A bind call counted as held in the table (`GangTable::bind_held`) from the decision to hold
/// it, made under the lock that decided; dropped, it tells the table the call ended, however it
/// ended (answered, or its future dropped when kube-scheduler closes the connection).
pub struct HoldMark<'a> {
    table: &'a Mutex<GangTable>,
    uid: &'a str,
}

impl<'a> HoldMark<'a> {
    /// Marks `uid`'s call held in `locked`, the table behind `table` whose lock the caller holds.
    pub fn new(table: &'a Mutex<GangTable>, locked: &mut GangTable, uid: &'a str) -> Self {
        locked.bind_held(uid);
        HoldMark { table, uid }
    }
}

impl Drop for HoldMark<'_> {
    fn drop(&mut self) {
        self.table.lock().bind_released(self.uid);
    }
}
