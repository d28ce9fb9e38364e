//! Whether this replica may decide now: read by every verb call and `/readyz`, written by the
//! election loop.

use std::time::Instant;

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use tokio::sync::watch;

/// This replica's part.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Role {
    /// Leader election is off: the only replica decides.
    Sole,
    /// Holds the Lease; decides until `until` unless it renews meanwhile. The deadline is
    /// checked at every call, so a leader stuck in an API call to an unreachable server stops
    /// deciding on time even before its election loop notices.
    Leading { until: Instant },
    /// Another replica (or none yet) holds the Lease.
    Standby { leader: Option<String> },
    /// Led, could not renew in time, and has not seen who holds the Lease since.
    Lapsed,
}

/// The role and what a refusal names.
#[derive(Debug)]
pub struct Leadership {
    role: Mutex<Role>,
    /// Terms this replica began leading (changed under the `role` lock): work planned in one
    /// term is not done in another (`cluster::gather` writes only in the term that planned
    /// them, and starts each term from what the watch shows).
    term: AtomicU64,
    identity: String,
    /// `namespace/name` of the Lease.
    lease: String,
    /// Bumped whenever the election changes the role, for tasks that follow it (the leader
    /// label). A leader passing its deadline unrenewed is no change here: followers also look
    /// at [`Leadership::is_leading`] on their own.
    changes: watch::Sender<u64>,
}

impl Default for Leadership {
    fn default() -> Self {
        Leadership::sole()
    }
}

impl Leadership {
    /// Without leader election: always decides.
    pub fn sole() -> Self {
        Leadership {
            role: Mutex::new(Role::Sole),
            term: AtomicU64::new(0),
            identity: String::new(),
            lease: String::new(),
            changes: watch::Sender::new(0),
        }
    }

    /// With leader election: a standby until the election loop says otherwise.
    pub fn candidate(identity: &str, lease_namespace: &str, lease_name: &str) -> Self {
        Leadership {
            role: Mutex::new(Role::Standby { leader: None }),
            term: AtomicU64::new(0),
            identity: identity.to_string(),
            lease: format!("{lease_namespace}/{lease_name}"),
            changes: watch::Sender::new(0),
        }
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Why this replica must not decide at `now`, or `None` when it may.
    pub fn refusal(&self, now: Instant) -> Option<String> {
        match &*self.role.lock() {
            Role::Sole => None,
            Role::Leading { until } if now < *until => None,
            Role::Leading { .. } | Role::Lapsed => Some(format!(
                "muster replica {} is not the leader: it could not renew Lease {} within its renew deadline and has stopped deciding; the replica that takes the Lease over answers",
                self.identity, self.lease
            )),
            Role::Standby { leader: Some(leader) } => Some(format!(
                "muster replica {} is the standby, not the leader: {leader} holds Lease {} and answers the verbs",
                self.identity, self.lease
            )),
            Role::Standby { leader: None } => Some(format!(
                "muster replica {} is the standby, not the leader: no replica holds Lease {} yet",
                self.identity, self.lease
            )),
        }
    }

    pub fn is_leading(&self, now: Instant) -> bool {
        self.refusal(now).is_none()
    }

    /// Until when this replica decides, if it leads by the Lease at `now` (`None` when it runs
    /// alone or does not lead).
    pub fn leading_until(&self, now: Instant) -> Option<Instant> {
        match &*self.role.lock() {
            Role::Leading { until } if now < *until => Some(*until),
            _ => None,
        }
    }

    /// The term this replica leads in at `now`, if it decides (always 0 when it runs alone).
    /// A new term begins at every take-over, also by a leader that lapsed and took the Lease
    /// again: what it planned before is not its to finish.
    pub fn leading_term(&self, now: Instant) -> Option<u64> {
        let role = self.role.lock();
        match &*role {
            Role::Sole => Some(0),
            Role::Leading { until } if now < *until => Some(self.term.load(Ordering::Acquire)),
            _ => None,
        }
    }

    /// Completes once this replica does not decide (never when it runs alone): at a step-down,
    /// or at its renew deadline unless renewed meanwhile. Work a decision started (a binding
    /// being retried) stops there, so it cannot land after a standby may have taken over.
    pub async fn lapsed(&self) {
        let mut changes = self.subscribe();
        loop {
            let now = Instant::now();
            match self.leading_until(now) {
                Some(until) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(until.into()) => {}
                        _ = changes.changed() => {}
                    }
                }
                None if self.refusal(now).is_none() => std::future::pending::<()>().await,
                None => return,
            }
        }
    }

    /// Runs `work` only if this replica leads in `term` when it would start, and cancels it if
    /// the lease lapses meanwhile ([`Leadership::lapsed`]): `None` when it did not run to the
    /// end. The writes a leader plans (gates, nominations, capacity requests) go through this,
    /// so none lands once a standby may have taken over. Cancelling drops the request; one
    /// already on the wire may still land, within the margin between the renew deadline and
    /// the lease duration.
    pub async fn while_leading<T>(
        &self,
        term: u64,
        work: impl std::future::Future<Output = T>,
    ) -> Option<T> {
        if self.leading_term(Instant::now()) != Some(term) {
            return None;
        }
        tokio::select! {
            v = work => Some(v),
            () = self.lapsed() => None,
        }
    }

    /// Tells when the election changed the role (the value is a counter).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Leads (again) until `until`. Returns whether it was not leading just before.
    pub fn lead_until(&self, until: Instant, now: Instant) -> bool {
        let mut role = self.role.lock();
        let took_over = !matches!(*role, Role::Leading { until: u } if now < u);
        if took_over {
            self.term.fetch_add(1, Ordering::AcqRel);
        }
        *role = Role::Leading { until };
        drop(role);
        if took_over {
            self.changes.send_modify(|n| *n += 1);
        }
        took_over
    }

    /// Follows `leader` (or nobody known). Returns whether it was leading just before.
    pub fn follow(&self, leader: Option<String>) -> bool {
        let mut role = self.role.lock();
        let was_leading = matches!(*role, Role::Leading { .. });
        *role = match leader {
            Some(leader) => Role::Standby {
                leader: Some(leader),
            },
            None if was_leading || *role == Role::Lapsed => Role::Lapsed,
            None => Role::Standby { leader: None },
        };
        drop(role);
        if was_leading {
            self.changes.send_modify(|n| *n += 1);
        }
        was_leading
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_sole_replica_always_decides() {
        assert_eq!(Leadership::sole().refusal(Instant::now()), None);
    }

    #[test]
    fn a_standby_names_the_leader_and_the_lease() {
        let l = Leadership::candidate("muster-b", "muster-system", "muster");
        let now = Instant::now();
        assert_eq!(
            l.refusal(now).unwrap(),
            "muster replica muster-b is the standby, not the leader: no replica holds Lease muster-system/muster yet"
        );
        assert!(!l.follow(Some("muster-a".into())));
        assert_eq!(
            l.refusal(now).unwrap(),
            "muster replica muster-b is the standby, not the leader: muster-a holds Lease muster-system/muster and answers the verbs"
        );
    }

    #[test]
    fn a_leader_stops_deciding_at_its_deadline_without_being_told() {
        let l = Leadership::candidate("a", "ns", "muster");
        let t0 = Instant::now();
        assert!(l.lead_until(t0 + Duration::from_secs(10), t0));
        assert!(!l.lead_until(t0 + Duration::from_secs(12), t0 + Duration::from_secs(2)));
        assert!(l.is_leading(t0 + Duration::from_millis(11_999)));
        let refusal = l.refusal(t0 + Duration::from_secs(12)).unwrap();
        assert!(
            refusal.contains("could not renew Lease ns/muster"),
            "{refusal}"
        );
        assert!(l.follow(None), "it was the leader");
    }

    #[tokio::test]
    async fn lapsed_completes_at_the_deadline_unless_renewed_and_at_a_step_down() {
        let l = std::sync::Arc::new(Leadership::candidate("a", "ns", "muster"));
        tokio::time::timeout(Duration::from_millis(10), l.lapsed())
            .await
            .expect("a standby does not decide");
        let t0 = Instant::now();
        l.lead_until(t0 + Duration::from_millis(300), t0);
        let watcher = {
            let l = l.clone();
            tokio::spawn(async move { l.lapsed().await })
        };
        // Renewed before the first deadline: it lapses at the second, not before.
        l.lead_until(t0 + Duration::from_millis(600), Instant::now());
        tokio::time::timeout(Duration::from_secs(5), watcher)
            .await
            .expect("it lapses")
            .unwrap();
        assert!(
            t0.elapsed() >= Duration::from_millis(600),
            "{:?}",
            t0.elapsed()
        );
        // A step-down ends it at once, long before the deadline.
        let now = Instant::now();
        l.lead_until(now + Duration::from_secs(60), now);
        let watcher = {
            let l = l.clone();
            tokio::spawn(async move { l.lapsed().await })
        };
        l.follow(Some("b".into()));
        tokio::time::timeout(Duration::from_secs(5), watcher)
            .await
            .expect("a step-down ends it")
            .unwrap();
        let sole = Leadership::sole();
        assert!(
            tokio::time::timeout(Duration::from_millis(50), sole.lapsed())
                .await
                .is_err(),
            "a sole replica never lapses"
        );
    }

    #[test]
    fn every_take_over_begins_a_new_term_and_a_renewal_does_not() {
        let l = Leadership::candidate("a", "ns", "muster");
        let t0 = Instant::now();
        let s = Duration::from_secs;
        assert_eq!(l.leading_term(t0), None, "a standby has no term");
        l.lead_until(t0 + s(2), t0);
        let first = l.leading_term(t0).expect("leads");
        l.lead_until(t0 + s(3), t0 + s(1));
        assert_eq!(l.leading_term(t0 + s(1)), Some(first), "a renewal");
        assert_eq!(l.leading_term(t0 + s(3)), None, "past its deadline");
        // Lapsed, then the Lease taken again: a new term.
        l.lead_until(t0 + s(6), t0 + s(4));
        let second = l.leading_term(t0 + s(4)).expect("leads again");
        assert_ne!(second, first);
        // Stepped down, then taken over again: another.
        l.follow(Some("b".into()));
        assert_eq!(l.leading_term(t0 + s(4)), None);
        l.lead_until(t0 + s(9), t0 + s(7));
        let third = l.leading_term(t0 + s(7)).expect("leads again");
        assert!(third != first && third != second);
        assert_eq!(Leadership::sole().leading_term(t0), Some(0));
    }

    #[test]
    fn taking_over_and_stepping_down_are_announced_renewals_are_not() {
        let l = Leadership::candidate("a", "ns", "muster");
        let changes = l.subscribe();
        let t0 = Instant::now();
        assert!(!changes.has_changed().unwrap());
        l.lead_until(t0 + Duration::from_secs(4), t0);
        assert!(changes.has_changed().unwrap(), "a takeover is announced");
        assert_eq!(l.leading_until(t0), Some(t0 + Duration::from_secs(4)));
        let seen = *changes.borrow();
        l.lead_until(t0 + Duration::from_secs(5), t0 + Duration::from_secs(1));
        assert_eq!(*changes.borrow(), seen, "a renewal is no change");
        l.follow(Some("b".into()));
        assert_eq!(*changes.borrow(), seen + 1, "stepping down is announced");
        assert_eq!(l.leading_until(t0), None);
        l.follow(Some("b".into()));
        assert_eq!(*changes.borrow(), seen + 1, "following on is no change");
        assert_eq!(Leadership::sole().leading_until(t0), None);
    }
}
