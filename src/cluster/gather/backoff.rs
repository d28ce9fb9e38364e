//! Per-pod back-off of the gatherer's writes (nominations and gate removals): a write the API
//! server refused is not sent again before its back-off ends, so a PATCH that keeps failing
//! (a webhook refusing it, a quota, a persistent conflict) costs a few requests a minute, not
//! one a round. Pure: the clock is passed in.

use std::time::{Duration, Instant};

use rustc_hash::FxHashMap as HashMap;

use crate::model::{NodeName, PodUid};

/// The first wait after a failure, doubled after each further one, up to [`MAX`].
pub const FIRST: Duration = Duration::from_millis(100);
pub const MAX: Duration = Duration::from_secs(10);

/// A write of one pod, as the back-off tells writes apart: a different write for the same
/// pod (another node, the gate instead of the nomination) means the pod or its plan changed,
/// and starts without waiting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    /// `status.nominatedNodeName` set (`Some`) or cleared (`None`).
    Nominate(Option<NodeName>),
    /// muster's scheduling gate removed.
    Ungate,
}

#[derive(Debug)]
struct Failing {
    write: Write,
    failures: u32,
    until: Instant,
}

/// The pods whose last write failed, and until when each waits.
#[derive(Debug, Default)]
pub struct WriteBackoff {
    pods: HashMap<PodUid, Failing>,
}

/// The wait after the `failures`-th failure in a row (1-based): [`FIRST`] doubling to [`MAX`].
pub fn delay(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(31);
    FIRST.saturating_mul(1u32 << doublings).min(MAX)
}

impl WriteBackoff {
    /// Whether `write` of `uid` may be sent at `now`: not while an earlier failure of the same
    /// write waits out its back-off.
    pub fn ready(&self, uid: &PodUid, write: &Write, now: Instant) -> bool {
        match self.pods.get(uid) {
            Some(f) if f.write == *write => now >= f.until,
            _ => true,
        }
    }

    /// `write` of `uid` failed at `now`; returns the wait before it is sent again. A failure of
    /// another write than the one backing off starts a new back-off.
    pub fn failed(&mut self, uid: &PodUid, write: Write, now: Instant) -> Duration {
        let failures = match self.pods.get(uid) {
            Some(f) if f.write == write => f.failures + 1,
            _ => 1,
        };
        let wait = delay(failures);
        self.pods.insert(
            uid.clone(),
            Failing {
                write,
                failures,
                until: now + wait,
            },
        );
        wait
    }

    /// `write` of `uid` succeeded: its next failure starts from [`FIRST`] again. (A success of
    /// another write of the pod does not end this one's back-off: a release writes the
    /// nomination before the gate, and a gate removal that keeps failing must not start over
    /// each time the nomination before it succeeds.)
    pub fn succeeded(&mut self, uid: &PodUid, write: &Write) {
        if self.pods.get(uid).is_some_and(|f| f.write == *write) {
            self.pods.remove(uid);
        }
    }

    /// Forgets back-offs that ended more than [`MAX`] before `now`: a write still wanted is
    /// tried again as its back-off ends, so what is left is of pods gone or plans changed.
    pub fn forget_stale(&mut self, now: Instant) {
        self.pods
            .retain(|_, f| now.saturating_duration_since(f.until) <= MAX);
    }

    /// Pods backing off now.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.pods.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn uid(s: &str) -> PodUid {
        Arc::from(s)
    }

    fn on(node: &str) -> Write {
        Write::Nominate(Some(Arc::from(node)))
    }

    #[test]
    fn the_wait_doubles_from_100_ms_to_10_s() {
        let waits: Vec<u128> = (1..=10).map(|n| delay(n).as_millis()).collect();
        assert_eq!(
            waits,
            [100, 200, 400, 800, 1600, 3200, 6400, 10_000, 10_000, 10_000]
        );
        assert_eq!(delay(u32::MAX), MAX);
    }

    /// What the schedule costs a write that never succeeds: the number of attempts within a
    /// window (the e2e test's bound on PATCHes counted at the proxy rests on it).
    #[test]
    fn a_write_that_always_fails_is_sent_nine_times_in_thirty_seconds() {
        let mut b = WriteBackoff::default();
        let (p, w) = (uid("p"), on("n1"));
        let t0 = Instant::now();
        let mut sent = Vec::new();
        // A round every 50 ms (the gatherer's shortest gap), 30 s long.
        for round in 0..600u32 {
            let now = t0 + Duration::from_millis(50) * round;
            if b.ready(&p, &w, now) {
                sent.push((now - t0).as_millis());
                b.failed(&p, w.clone(), now);
            }
        }
        assert_eq!(sent, [0, 100, 300, 700, 1500, 3100, 6300, 12_700, 22_700]);
    }

    #[test]
    fn a_success_or_another_write_starts_again_at_once() {
        let mut b = WriteBackoff::default();
        let p = uid("p");
        let t0 = Instant::now();
        for _ in 0..5 {
            b.failed(&p, on("n1"), t0);
        }
        assert!(!b.ready(&p, &on("n1"), t0 + Duration::from_secs(1)));
        assert!(b.ready(&p, &on("n1"), t0 + delay(5)));
        // The plan changed (another node, the gate): not held back by the old failures.
        assert!(b.ready(&p, &on("n2"), t0));
        assert!(b.ready(&p, &Write::Ungate, t0));
        assert_eq!(b.failed(&p, on("n2"), t0), FIRST);
        // A success resets it; a success of another write does not.
        b.failed(&p, on("n2"), t0);
        b.succeeded(&p, &Write::Ungate);
        assert!(!b.ready(&p, &on("n2"), t0));
        b.succeeded(&p, &on("n2"));
        assert!(b.ready(&p, &on("n2"), t0));
        assert_eq!(b.failed(&p, on("n2"), t0), FIRST);
        // Other pods are not held back.
        assert!(b.ready(&uid("q"), &on("n2"), t0));
        // A back-off nobody came back for is forgotten.
        b.forget_stale(t0 + FIRST + MAX);
        assert_eq!(b.len(), 1);
        b.forget_stale(t0 + FIRST + MAX + Duration::from_millis(1));
        assert!(b.is_empty());
    }
}
