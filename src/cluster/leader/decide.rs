//! When to take, keep and give up the Lease: pure decisions with both clocks passed in.
//!
//! The semantics are client-go's `leaderelection` (which kube-scheduler uses):
//! - a Lease held by someone else is live until `leaseDurationSeconds` after *this* replica
//!   last saw its record change, measured on this replica's monotonic clock — never by
//!   comparing the record's wall-clock `renewTime` with ours, so clock skew between nodes does
//!   not matter, only clock *rate*;
//! - the holder renews every retry period and counts as leader only until the renew deadline
//!   after the *start* of its last successful write. Every other replica saw that write no
//!   earlier than it started, and waits the longer lease duration from then: so a leader that
//!   cannot renew stops deciding at least `lease duration − renew deadline` before anyone else
//!   may take the Lease.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

/// The three durations of a leader election, with muster's defaults: 3 s lease, 2 s renew
/// deadline, 500 ms retry period.
///
/// Shorter than kube-scheduler's 15 s / 10 s / 2 s because of kube-scheduler's error back-off:
/// a pod whose extender call failed is retried after 1, 2, 4, 8 s, each aligned up to its
/// 1 s queue window — measured on the harness, a pod whose bind call died with the leader is
/// retried about 2, 5 and 10 s later. The new leader must be routed to before the retry at
/// 5 s, else the gang waits for the one at 10 s. A standby may take the Lease `lease_duration`
/// after it first saw the last renewal, which it sees up to 1.2 retry periods after it was
/// written, and the leader died up to a retry period after writing it: takeover lands between
/// `lease_duration − retry_period` and `lease_duration + 1.2 × retry_period` after a SIGKILL,
/// 2.5 to 3.6 s here, leaving about a second for the label to reach the Service's endpoints.
///
/// Safety keeps kube-scheduler's proportions: the leader stops deciding `renew_deadline` (2 s)
/// after the start of its last successful renewal; any other replica waits `lease_duration`
/// (3 s) after it saw that write, which is after it started. Both are measured on monotonic
/// clocks, so wall-clock skew between nodes plays no part; the 1 s margin covers a clock rate
/// difference of up to 50 % and a decision taken just before the deadline whose binding is in
/// flight for up to a second (bindings are not retried once the replica stopped deciding).
/// What the shorter times cost is tolerance of a slow API server: each renewal (a read and a
/// write of the Lease) must complete within a retry period (500 ms), and the leader stops
/// deciding after about 1.5 s of failed renewals (`renew_deadline − retry_period`) — a stop,
/// never a second decider (fail-safe).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timings {
    /// How long others wait, after last seeing the Lease change, before taking it.
    pub lease_duration: Duration,
    /// How long the leader keeps deciding after the start of its last successful renewal.
    pub renew_deadline: Duration,
    /// How often the Lease is renewed, or tried by a standby.
    pub retry_period: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            lease_duration: Duration::from_secs(3),
            renew_deadline: Duration::from_secs(2),
            retry_period: Duration::from_millis(500),
        }
    }
}

impl Timings {
    /// kube-scheduler's (client-go's) defaults, 15 s / 10 s / 2 s.
    pub fn kube_scheduler() -> Self {
        Timings {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// client-go's jitter factor: a standby waits up to 1.2 retry periods between tries.
const JITTER: f64 = 1.2;

impl Timings {
    /// The orderings client-go's `NewLeaderElector` insists on, with the flags named.
    pub fn validate(&self) -> Result<(), String> {
        if self.lease_duration <= self.renew_deadline {
            return Err(format!(
                "--leader-elect-lease-duration ({:?}) must be longer than --leader-elect-renew-deadline ({:?}): the leader must stop deciding before its Lease can expire for others",
                self.lease_duration, self.renew_deadline
            ));
        }
        if self.renew_deadline.as_secs_f64() <= JITTER * self.retry_period.as_secs_f64() {
            return Err(format!(
                "--leader-elect-renew-deadline ({:?}) must be longer than 1.2 × --leader-elect-retry-period ({:?}): the leader needs more than one try to renew",
                self.renew_deadline, self.retry_period
            ));
        }
        if self.lease_duration.subsec_nanos() != 0 {
            return Err(format!(
                "--leader-elect-lease-duration ({:?}) must be whole seconds: the Lease records it in seconds, and others wait what it records",
                self.lease_duration
            ));
        }
        if self.retry_period.is_zero() {
            return Err("--leader-elect-retry-period must be longer than zero".into());
        }
        Ok(())
    }

    /// How long a standby waits before its next try: the retry period stretched by a jitter
    /// in [0, 0.2) derived from `seed`, so standbys do not try in lock-step.
    pub fn standby_wait(&self, seed: u64) -> Duration {
        let fraction = (seed % 1000) as f64 / 1000.0 * (JITTER - 1.0);
        self.retry_period.mul_f64(1.0 + fraction)
    }
}

/// What to do after reading the Lease.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Write the Lease naming this replica as holder: create it when it does not exist,
    /// otherwise update the version just read (a race with another writer then fails).
    Claim(LeaseSpec),
    /// Another replica holds a live Lease.
    Follow { leader: String },
}

/// One replica's view of the election.
#[derive(Debug)]
pub struct Candidate {
    identity: String,
    timings: Timings,
    /// The Lease as last read, and when (this replica's clock) it was first seen so.
    observed: Option<(LeaseSpec, Instant)>,
    /// While leading: until when this replica may decide.
    leading_until: Option<Instant>,
}

impl Candidate {
    pub fn new(identity: impl Into<String>, timings: Timings) -> Self {
        Candidate {
            identity: identity.into(),
            timings,
            observed: None,
            leading_until: None,
        }
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Decides from the Lease as just read (`None`: it does not exist). `now` is this
    /// replica's monotonic clock, `wall` the time to write into the record.
    pub fn next(&mut self, current: Option<&LeaseSpec>, now: Instant, wall: MicroTime) -> Next {
        let Some(spec) = current else {
            return Next::Claim(self.record(None, wall));
        };
        if self.observed.as_ref().map(|(seen, _)| seen) != Some(spec) {
            self.observed = Some((spec.clone(), now));
        }
        let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty());
        if let Some(leader) = holder.filter(|h| *h != self.identity) {
            let seen_at = self.observed.as_ref().map_or(now, |(_, at)| *at);
            if seen_at + self.lease_duration_of(spec) > now {
                // Someone else holds it: whatever this replica believed, it no longer leads.
                self.leading_until = None;
                return Next::Follow {
                    leader: leader.to_string(),
                };
            }
        }
        Next::Claim(self.record(Some(spec), wall))
    }

    /// When the Lease another replica holds, as last read, may be taken: a standby tries then
    /// rather than up to a retry period later. `None` when this replica holds it or none was
    /// read.
    pub fn others_lease_expires(&self) -> Option<Instant> {
        let (spec, seen_at) = self.observed.as_ref()?;
        let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty())?;
        if holder == self.identity {
            return None;
        }
        Some(*seen_at + self.lease_duration_of(spec))
    }

    fn lease_duration_of(&self, spec: &LeaseSpec) -> Duration {
        spec.lease_duration_seconds
            .filter(|s| *s > 0)
            .map_or(self.timings.lease_duration, |s| {
                Duration::from_secs(s as u64)
            })
    }

    /// The record naming this replica: a renewal keeps the acquire time and transition count,
    /// a takeover starts a new term.
    fn record(&self, current: Option<&LeaseSpec>, wall: MicroTime) -> LeaseSpec {
        let renewal = current.filter(|s| s.holder_identity.as_deref() == Some(&self.identity));
        let (acquire_time, transitions) = match (renewal, current) {
            (Some(mine), _) => (mine.acquire_time.clone(), mine.lease_transitions),
            (None, Some(other)) => (
                Some(wall.clone()),
                Some(other.lease_transitions.unwrap_or(0) + 1),
            ),
            (None, None) => (Some(wall.clone()), Some(0)),
        };
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.timings.lease_duration.as_secs().max(1) as i32),
            acquire_time,
            renew_time: Some(wall),
            lease_transitions: transitions,
            ..LeaseSpec::default()
        }
    }

    /// The claim written at `attempt_started` was accepted by the API server.
    pub fn claimed(&mut self, written: LeaseSpec, attempt_started: Instant, now: Instant) {
        self.observed = Some((written, now));
        self.leading_until = Some(attempt_started + self.timings.renew_deadline);
    }

    /// Until when this replica may decide, if it leads at `now`.
    pub fn leading_until(&self, now: Instant) -> Option<Instant> {
        self.leading_until.filter(|until| *until > now)
    }
}

/// The record a leader leaves when it shuts down (client-go's `ReleaseOnCancel`): no holder and
/// a one-second duration, so a standby takes it at its next try instead of waiting out the
/// lease duration. The term's acquire time and transition count stay for the record.
pub fn released(held: &LeaseSpec, wall: MicroTime) -> LeaseSpec {
    LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        renew_time: Some(wall),
        ..held.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wall(second: i64) -> MicroTime {
        MicroTime(k8s_openapi::jiff::Timestamp::from_second(1_800_000_000 + second).unwrap())
    }

    fn held_by(holder: &str, renewed: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            acquire_time: Some(wall(0)),
            renew_time: Some(wall(renewed)),
            lease_transitions: Some(3),
            ..LeaseSpec::default()
        }
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn muster_defaults_fail_over_before_kube_schedulers_second_retry_and_stay_safe() {
        let t = Timings::default();
        assert_eq!(
            (t.lease_duration, t.renew_deadline, t.retry_period),
            (secs(3), secs(2), Duration::from_millis(500))
        );
        assert_eq!(t.validate(), Ok(()));
        // The latest takeover after a SIGKILL, with a second for the label to be routed, before
        // kube-scheduler's retry about 5 s after a call failed.
        let latest_takeover = t.lease_duration + t.retry_period.mul_f64(JITTER);
        assert!(latest_takeover + secs(1) < secs(5), "{latest_takeover:?}");
        // The leader stops at least 1 s (a third of the lease, as kube-scheduler's 5 s of 15 s)
        // before anyone may take its Lease.
        assert!(t.lease_duration - t.renew_deadline >= secs(1));
        assert!((t.lease_duration - t.renew_deadline) * 3 >= t.lease_duration);
        // At least three renewal attempts fit in the renew deadline.
        assert!(t.renew_deadline >= t.retry_period * 3);
        let fractional = Timings {
            lease_duration: Duration::from_millis(2500),
            renew_deadline: secs(1),
            ..t
        };
        assert!(fractional.validate().unwrap_err().contains("whole seconds"));
    }

    #[test]
    fn kube_schedulers_defaults_and_orderings() {
        let t = Timings::kube_scheduler();
        assert_eq!(
            (t.lease_duration, t.renew_deadline, t.retry_period),
            (secs(15), secs(10), secs(2))
        );
        assert_eq!(t.validate(), Ok(()));
        let bad = Timings {
            renew_deadline: secs(15),
            ..t
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .contains("--leader-elect-lease-duration"));
        let bad = Timings {
            retry_period: secs(9),
            ..t
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .contains("--leader-elect-retry-period"));
        assert!(t.standby_wait(999) < secs(2).mul_f64(1.2) && t.standby_wait(0) == secs(2));
    }

    #[test]
    fn a_missing_lease_is_created_naming_this_replica() {
        let mut c = Candidate::new("a", Timings::kube_scheduler());
        let t0 = Instant::now();
        let Next::Claim(spec) = c.next(None, t0, wall(1)) else {
            panic!("must claim")
        };
        assert_eq!(spec.holder_identity.as_deref(), Some("a"));
        assert_eq!(spec.lease_duration_seconds, Some(15));
        assert_eq!(spec.lease_transitions, Some(0));
        assert_eq!(spec.acquire_time, Some(wall(1)));
        assert_eq!(
            c.leading_until(t0),
            None,
            "not leading before the write succeeds"
        );
        c.claimed(spec, t0, t0 + secs(1));
        assert_eq!(c.leading_until(t0), Some(t0 + secs(10)));
        assert_eq!(c.others_lease_expires(), None, "its own Lease");
    }

    #[test]
    fn a_live_lease_of_another_is_followed_until_it_goes_unrenewed_for_the_lease_duration() {
        let mut c = Candidate::new("b", Timings::kube_scheduler());
        let t0 = Instant::now();
        let lease = held_by("a", 0);
        let follow = Next::Follow { leader: "a".into() };
        assert_eq!(c.next(Some(&lease), t0, wall(0)), follow);
        // Unchanged for 14.9 s of this replica's clock: still live, whatever the wall clocks say.
        assert_eq!(c.next(Some(&lease), t0 + secs(14), wall(100)), follow);
        // Renewed meanwhile: the 15 s count again from when the change was seen.
        let renewed = held_by("a", 14);
        assert_eq!(c.next(Some(&renewed), t0 + secs(14), wall(14)), follow);
        assert_eq!(c.next(Some(&renewed), t0 + secs(28), wall(28)), follow);
        assert_eq!(
            c.others_lease_expires(),
            Some(t0 + secs(29)),
            "when to try next"
        );
        let Next::Claim(spec) = c.next(Some(&renewed), t0 + secs(29), wall(29)) else {
            panic!("an expired Lease is taken")
        };
        assert_eq!(spec.holder_identity.as_deref(), Some("b"));
        assert_eq!(
            spec.lease_transitions,
            Some(4),
            "a takeover is a transition"
        );
        assert_eq!(spec.acquire_time, Some(wall(29)));
    }

    #[test]
    fn a_renewal_keeps_the_term_and_an_empty_holder_is_free() {
        let mut c = Candidate::new("a", Timings::kube_scheduler());
        let t0 = Instant::now();
        let Next::Claim(spec) = c.next(Some(&held_by("a", 5)), t0, wall(7)) else {
            panic!("own Lease is renewed")
        };
        assert_eq!(spec.acquire_time, Some(wall(0)));
        assert_eq!(spec.lease_transitions, Some(3));
        assert_eq!(spec.renew_time, Some(wall(7)));
        let released = LeaseSpec {
            holder_identity: Some(String::new()),
            ..held_by("x", 7)
        };
        assert!(matches!(
            c.next(Some(&released), t0, wall(8)),
            Next::Claim(_)
        ));
    }

    #[test]
    fn a_leader_that_cannot_renew_stops_before_the_lease_can_expire_for_others() {
        let timings = Timings::kube_scheduler();
        let mut leader = Candidate::new("a", timings);
        let mut standby = Candidate::new("b", timings);
        let t0 = Instant::now();
        // The leader starts its last successful renewal at t0; the write lands at t0 + 1 s,
        // and the standby reads it the moment it lands.
        let Next::Claim(spec) = leader.next(Some(&held_by("a", 0)), t0, wall(0)) else {
            panic!()
        };
        leader.claimed(spec.clone(), t0, t0 + secs(1));
        standby.next(Some(&spec), t0 + secs(1), wall(1));
        // From here on no renewal succeeds.
        let leader_stops = (0..60)
            .map(|tenth| t0 + Duration::from_millis(tenth * 500))
            .find(|t| leader.leading_until(*t).is_none())
            .unwrap();
        let standby_may_take = (0..60)
            .map(|tenth| t0 + Duration::from_millis(tenth * 500))
            .find(|t| matches!(standby.next(Some(&spec), *t, wall(2)), Next::Claim(_)))
            .unwrap();
        assert_eq!(leader_stops, t0 + secs(10));
        assert_eq!(standby_may_take, t0 + secs(16));
        assert!(
            leader_stops + (timings.lease_duration - timings.renew_deadline) <= standby_may_take
        );
    }

    #[test]
    fn a_released_lease_is_taken_at_the_next_try() {
        let mut standby = Candidate::new("b", Timings::kube_scheduler());
        let t0 = Instant::now();
        let held = held_by("a", 0);
        assert!(matches!(
            standby.next(Some(&held), t0, wall(0)),
            Next::Follow { .. }
        ));
        let free = released(&held, wall(1));
        assert_eq!(free.holder_identity, None);
        assert_eq!(free.lease_transitions, Some(3));
        let Next::Claim(spec) = standby.next(Some(&free), t0 + secs(2), wall(2)) else {
            panic!("a released Lease is free")
        };
        assert_eq!(spec.holder_identity.as_deref(), Some("b"));
        assert_eq!(spec.lease_transitions, Some(4));
    }

    #[test]
    fn a_leader_that_sees_another_holder_stops_at_once() {
        let mut c = Candidate::new("a", Timings::kube_scheduler());
        let t0 = Instant::now();
        let Next::Claim(spec) = c.next(None, t0, wall(0)) else {
            panic!()
        };
        c.claimed(spec, t0, t0);
        assert!(c.leading_until(t0 + secs(1)).is_some());
        let taken = held_by("b", 1);
        assert_eq!(
            c.next(Some(&taken), t0 + secs(1), wall(1)),
            Next::Follow { leader: "b".into() }
        );
        assert_eq!(c.leading_until(t0 + secs(1)), None);
    }
}
