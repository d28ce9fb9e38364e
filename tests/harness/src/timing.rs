//! Every timing limit a test asserts *as the behaviour* ("bound together", "partly bound for no
//! longer than", "answered at httpTimeout minus a second", "the Lease never went unrenewed for
//! its duration"), derived in this one place from the timings it depends on, with its margin.
//!
//! Three kinds of figure:
//! - **configured**: what the suite configures, or leaves at a default it relies on (muster's
//!   flags, `scheduler-config/*.yaml`, kube-scheduler's defaults). A test that passes another
//!   value passes it to muster and to the limit alike.
//! - **measured**: what one step costs on the project machine (2 cores, 3 e2e tests at a time).
//! - **derived**: the limits the tests assert, each from the figures above.
//!
//! Deadlines of waits for something that must happen ([`crate::PLACE`], [`crate::REASON`]) are
//! not here: a generous deadline costs nothing when the thing happens and cannot make a test pass
//! that should fail.

use std::time::Duration;

// === Configured ===

/// kube-scheduler's `podInitialBackoffSeconds`: left at its default (1 s,
/// `pkg/scheduler/apis/config/v1/defaults.go`) by every `scheduler-config/*.yaml`. A pod that
/// failed a cycle is retried after it, doubled on each further failure.
pub const SCHEDULER_INITIAL_BACKOFF: Duration = Duration::from_secs(1);

/// kube-scheduler's `podMaxBackoffSeconds`: left at its default (10 s, same file). A pod that
/// failed a cycle is retried within this, however often it failed before.
pub const SCHEDULER_MAX_BACKOFF: Duration = Duration::from_secs(10);

/// The extender's `httpTimeout` in `scheduler-config/*.yaml` (the harness keeps it).
pub const EXTENDER_HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// The `httpTimeout` of the preempt-only extender entry in
/// `scheduler-config/muster-as-default-scheduler.yaml`: what a frozen muster costs each
/// preempting pod of kube-scheduler's serial cycle.
pub const PREEMPT_ONLY_HTTP_TIMEOUT: Duration = Duration::from_secs(1);

/// muster answers a call it holds (a bind below quorum, a binding still in flight) this long
/// before kube-scheduler stops listening, its `httpTimeout` (`src/http/call.rs`, `ANSWER_MARGIN`).
pub const ANSWER_MARGIN: Duration = Duration::from_secs(1);

/// muster's periodic work (`src/cluster/gather.rs` `TICK`, the seat expiry in `src/lib.rs`):
/// once a second.
pub const MUSTER_TICK: Duration = Duration::from_secs(1);

/// muster's `--creation-window` default: how long room is held for members not created yet.
pub const CREATION_WINDOW: Duration = Duration::from_secs(5);

/// muster's `--gang-timeout` default: how long an admitted gang's seats are held for members that
/// have not bound (the latest a stuck partly bound gang is given up without being seen stuck).
pub const GANG_TIMEOUT: Duration = Duration::from_secs(60);

/// muster's `--leader-elect-lease-duration` default: a standby takes a Lease not renewed for this.
pub const LEASE_DURATION: Duration = Duration::from_secs(3);

/// muster's `--leader-elect-renew-deadline` default: a leader whose renewal has not succeeded for
/// this stops deciding.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(2);

/// muster's `--leader-elect-retry-period` default: how often the leader renews and a standby
/// tries for the Lease.
pub const RETRY_PERIOD: Duration = Duration::from_millis(500);

/// The budget of one binding's requests (`RetryPolicy::default().budget`,
/// `src/cluster/binder.rs`): a binding has failed or succeeded this long after its first request.
pub const BINDING_BUDGET: Duration = Duration::from_secs(6);

/// How often muster re-reads its certificate files (README, "TLS").
pub const CERT_CHECK: Duration = Duration::from_secs(10);

/// [`crate::wait_for`]'s and [`crate::holds_for`]'s pause between polls.
pub const POLL: Duration = crate::wait::POLL_INTERVAL;

// === Measured ===

/// One API write (a binding, a delete) or one scheduling cycle of one pod on the project machine
/// with 3 e2e tests running: tens of milliseconds when idle, up to about 300 ms loaded (the
/// slowest seen in the e2e logs). Every margin below is a multiple of it.
pub const LOADED_STEP: Duration = Duration::from_millis(300);

// === Derived ===

/// Observation window for "nothing gets bound" / "stays as it is": a pod that *can* be bound
/// (kube-scheduler alone, in the control run) is bound within one scheduling cycle plus one
/// binding write of its creation or of the event that let it fit. 10 × [`LOADED_STEP`].
pub const WINDOW: Duration = LOADED_STEP.saturating_mul(10);

/// How far apart a gang's members may be bound and still count as bound together: muster binds
/// every member of a gang at quorum with concurrent API calls once the last bind call has
/// arrived, so the spread is those calls' latency plus `wait_bound`'s 50 ms poll.
/// 10 × [`LOADED_STEP`].
pub const TOGETHER: Duration = LOADED_STEP.saturating_mul(10);

/// How long some but fewer than quorum of a gang's members may be *seen* bound: a list can fall
/// between two of one fan-out's concurrent bindings. The fan-out's writes (one [`LOADED_STEP`]
/// each, concurrent) with a margin of 5, the list that sees them (one step) and the watcher's
/// pause between lists ([`POLL`]): 1.9 s. A partial gang (one left by an outage, a failover or a
/// half-decided gang) stays partial until repaired, far longer than this.
pub const FAN_OUT: Duration = LOADED_STEP.saturating_mul(6).saturating_add(POLL);

/// A plain pod with room is bound within this of its creation: one cycle with its margin
/// ([`WINDOW`]), and one retry after kube-scheduler's first back-off, doubled
/// ([`SCHEDULER_INITIAL_BACKOFF`] × 2) should the first cycle have run before its cache saw
/// the room.
pub const PROMPTLY: Duration = WINDOW.saturating_add(SCHEDULER_INITIAL_BACKOFF.saturating_mul(2));

/// Once muster releases room (its [`MUSTER_TICK`]), a pod it refused is retried and bound: the
/// `muster.dev/retry` annotation that re-queues it, its cycle and its binding (3 steps with a
/// margin of 2), seen by a test polling every [`POLL`] (2 polls).
pub const RETRIED_AFTER_RELEASE: Duration = MUSTER_TICK
    .saturating_add(LOADED_STEP.saturating_mul(6))
    .saturating_add(POLL.saturating_mul(2));

/// A gang found partly bound after a restart, whose remaining members' room a pod took, is given
/// up within this of muster seeing that pod bound: its next periodic round ([`MUSTER_TICK`]),
/// the evictions of the bound members (concurrent writes, the watch showing them: 3 steps with
/// a margin of 2), seen by a test polling every [`POLL`] (2 polls). Far below
/// [`GANG_TIMEOUT`], when a gang still partly bound is given up anyway.
pub const PARTLY_BOUND_GIVEN_UP: Duration = MUSTER_TICK
    .saturating_add(LOADED_STEP.saturating_mul(6))
    .saturating_add(POLL.saturating_mul(2));

/// Observation window after which a pod kube-scheduler could not place has had its retry after
/// the longest back-off ([`SCHEDULER_MAX_BACKOFF`]) and that retry's cycle ([`PROMPTLY`]); if
/// nothing changed it is parked.
pub const PARKED: Duration = SCHEDULER_MAX_BACKOFF.saturating_add(PROMPTLY);

/// Slack for an in-process answer (the router tests: no API server, no network) to come after
/// the moment it is due, on a loaded machine: 10 × [`LOADED_STEP`]. Shorter than any wait the
/// answer could wrongly be held for instead (a `--bind-wait`, kube-scheduler's `httpTimeout`).
pub const LATE_ANSWER: Duration = LOADED_STEP.saturating_mul(10);

/// An answer that awaits nothing ("at once"): half of [`MUSTER_TICK`], so a call wrongly held
/// until muster's next periodic round fails the check, while an idle answer (microseconds) has
/// 500 ms for a descheduled thread.
pub const AT_ONCE: Duration = Duration::from_millis(MUSTER_TICK.as_millis() as u64 / 2);

/// A leader stopped with SIGTERM gives its Lease up: the standby takes it on its next try (one
/// [`RETRY_PERIOD`]) and then labels itself and turns Ready (a few writes: 5 × [`LOADED_STEP`]).
pub const HANDOVER: Duration = RETRY_PERIOD.saturating_add(LOADED_STEP.saturating_mul(5));

/// A leader killed with SIGKILL: the standby takes the Lease once it has gone unrenewed for
/// [`LEASE_DURATION`] (2.5 to 3.6 s after the kill, measured); the calls that failed meanwhile are
/// retried by kube-scheduler after its error back-offs (1, 2, 4 s: [`SCHEDULER_INITIAL_BACKOFF`]
/// doubled, 7 s in all, each aligned up to its 1 s window). The third retry comes after the
/// Lease can have been taken; with one cycle's margin ([`WINDOW`]) the next gang is placed by then.
pub const FAILOVER: Duration = SCHEDULER_INITIAL_BACKOFF
    .saturating_mul(1 + 2 + 4)
    .saturating_add(SCHEDULER_INITIAL_BACKOFF)
    .saturating_add(WINDOW);

#[cfg(test)]
mod tests {
    use super::*;

    /// The derived figures, as the tests' messages and docs quote them.
    #[test]
    fn derived_figures() {
        assert_eq!(WINDOW, Duration::from_secs(3));
        assert_eq!(TOGETHER, Duration::from_secs(3));
        assert_eq!(FAN_OUT, Duration::from_millis(1900));
        assert_eq!(PROMPTLY, Duration::from_secs(5));
        assert_eq!(PARKED, Duration::from_secs(15));
        assert_eq!(RETRIED_AFTER_RELEASE, Duration::from_secs(3));
        assert_eq!(PARTLY_BOUND_GIVEN_UP, Duration::from_secs(3));
        assert_eq!(LATE_ANSWER, Duration::from_secs(3));
        assert_eq!(AT_ONCE, Duration::from_millis(500));
        assert_eq!(HANDOVER, Duration::from_secs(2));
        assert_eq!(FAILOVER, Duration::from_secs(11));
    }

    /// The shipped scheduler configurations the suite starts kube-scheduler with set the
    /// extender's `httpTimeout` assumed here and leave kube-scheduler's back-offs at their
    /// defaults.
    #[test]
    fn scheduler_configs_match() {
        let dir = crate::paths::repo_root().join("scheduler-config");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let want = format!("httpTimeout: {}s", EXTENDER_HTTP_TIMEOUT.as_secs());
            assert!(text.contains(&want), "{}: no {want:?}", path.display());
            assert!(
                !text.contains("podInitialBackoffSeconds")
                    && !text.contains("podMaxBackoffSeconds"),
                "{}: sets a back-off",
                path.display()
            );
            seen += 1;
        }
        assert!(seen >= 3, "{seen} configurations in {}", dir.display());
        let text = std::fs::read_to_string(dir.join("muster-as-default-scheduler.yaml")).unwrap();
        let preempt_only = text
            .split("  - urlPrefix:")
            .find(|e| e.contains("preemptVerb") && !e.contains("filterVerb"))
            .expect("the preempt-only entry");
        let want = format!("httpTimeout: {}s", PREEMPT_ONLY_HTTP_TIMEOUT.as_secs());
        assert!(
            preempt_only.contains(&want),
            "preempt-only entry: no {want:?}"
        );
    }

    /// The figures each limit is built from keep their order: the partial-gang grace is shorter
    /// than any configured period a repair would take, a settled wait longer than a cycle.
    #[test]
    fn margins_hold() {
        assert!(FAN_OUT < LEASE_DURATION && FAN_OUT < CREATION_WINDOW);
        assert!(AT_ONCE < MUSTER_TICK);
        // Given up "at once" is told apart from given up at the gang's timeout.
        assert!(PARTLY_BOUND_GIVEN_UP.saturating_mul(10) < GANG_TIMEOUT);
        // A plain pod kept out for a gang's creation window is not bound "promptly".
        assert!(PROMPTLY <= CREATION_WINDOW);
        assert!(LATE_ANSWER < EXTENDER_HTTP_TIMEOUT);
        assert!(RENEW_DEADLINE < LEASE_DURATION);
        assert!(LEASE_DURATION.saturating_add(RETRY_PERIOD) < FAILOVER);
        // A hand-over that waited the Lease out instead of taking it released fails the check.
        assert!(HANDOVER < LEASE_DURATION);
    }
}
