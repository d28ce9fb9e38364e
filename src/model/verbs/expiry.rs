//! Time: a gang that holds seats past its timeout releases all of them together and backs off,
//! so no partial gang holds capacity for long; room held for members not created yet is
//! released when the creation window ends (the members that exist keep their seats).

use std::time::Instant;

use crate::model::inputs::membership::GangKey;
use crate::model::messages;
use crate::model::notice::{Notice, NoticeKind, PodRef};
use crate::model::table::gang::{Phase, SeatHolder};
use crate::model::table::GangTable;

impl GangTable {
    /// Releases the seats of every admitted gang that has waited past its timeout.
    /// Returns the gangs that timed out.
    pub fn expire(&mut self, now: Instant) -> Vec<GangKey> {
        for g in self.gangs.values_mut() {
            g.note_arrivals(now);
        }
        self.evidence.expire(now, self.config.evidence_age);
        self.verdicts.expire(now, self.config.evidence_age);
        self.forget_stale_plans(now);
        self.forget_uncommitted(now);
        self.release_room_for_late_members(now);
        self.retry_refused_when_window_closes(now);
        // Before the timeouts: a partly bound gang whose held room was taken is decided now,
        // not at its timeout.
        self.recheck_partly_bound(now);
        let default_timeout = self.config.default_timeout;
        let expired: Vec<GangKey> = self
            .gangs
            .iter()
            .filter(|(_, g)| match g.phase() {
                Phase::Admitted { since } => {
                    now.saturating_duration_since(since) >= g.spec().timeout_or(default_timeout)
                }
                _ => false,
            })
            .map(|(k, _)| k.clone())
            .collect();
        let backoff = self.config.backoff;
        for key in &expired {
            let facts = self.facts(key);
            self.unseat_all(key);
            let gang = self.gangs.get_mut(key).expect("exists");
            gang.back_off(now + backoff);
            let message = messages::timed_out(
                key,
                facts.spec.timeout_or(default_timeout),
                &facts.counts(),
                backoff,
            );
            self.tell(key, NoticeKind::TimedOut, &message, |p| p.node().is_none());
            self.partly_bound_timed_out(key, facts.spec.timeout_or(default_timeout));
        }
        expired
    }

    /// A gang found partly bound whose remaining members' seats timed out is not left half
    /// running silently (never-half): see `verbs::repair`.
    fn partly_bound_timed_out(&mut self, key: &GangKey, timeout: std::time::Duration) {
        if self
            .gangs
            .get(key)
            .is_none_or(|g| g.partly_bound().is_none())
        {
            return;
        }
        let Some((bound, quorum)) = self.partly_bound_counts(key) else {
            return;
        };
        let why = messages::partly_bound_timed_out(timeout);
        let outcome = self.give_up_partly_bound(key, bound, quorum, &why);
        self.partly_bound
            .push(crate::model::table::partly_bound::PartlyBound {
                gang: key.clone(),
                bound,
                quorum,
                outcome,
            });
    }
}

impl GangTable {
    /// Releases the room held for members not created yet of every gang whose creation window
    /// is over, and tells its members why it waits.
    fn release_room_for_late_members(&mut self, now: Instant) {
        let window = self.config.creation_window;
        let late: Vec<(GangKey, Vec<SeatHolder>)> = self
            .gangs
            .iter()
            .filter(|(_, g)| !g.within_creation_window(now, window))
            .map(|(k, g)| {
                let held: Vec<SeatHolder> = g
                    .seats()
                    .keys()
                    .filter(|h| h.is_not_created_yet())
                    .cloned()
                    .collect();
                (k.clone(), held)
            })
            .filter(|(_, held)| !held.is_empty())
            .collect();
        for (key, held) in late {
            for h in &held {
                self.unseat(&key, h);
            }
            let facts = self.facts(&key);
            let message = messages::window_over(&key, &facts.counts(), window);
            self.tell(&key, NoticeKind::Waiting, &message, |p| {
                p.node().is_none() && !p.info.terminal
            });
            if let Some(g) = self.gangs.get_mut(&key) {
                g.note_waiting(message);
            }
        }
    }
}

impl GangTable {
    /// Members refused while their gang's creation window was open are asked to retry once it
    /// closes: what they waited for (the quorum of a gang without a declared count, room held
    /// for members on their way) is decided then, and kube-scheduler would otherwise retry
    /// them only on an unrelated cluster event or its periodic flush.
    fn retry_refused_when_window_closes(&mut self, now: Instant) {
        let window = self.config.creation_window;
        let mut retry = Vec::new();
        for gang in self.gangs.values_mut() {
            retry.extend(gang.take_refused_once_window_closed(now, window));
        }
        let told: Vec<Notice> = retry
            .iter()
            .filter_map(|uid| self.pods.get(uid))
            .filter(|p| p.is_pending())
            .map(|p| Notice {
                pod: PodRef::of(&p.info),
                kind: NoticeKind::Retry,
                message: messages::RETRY_AFTER_WINDOW.to_string(),
            })
            .collect();
        self.notices.extend(told);
    }
}
