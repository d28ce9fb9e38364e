//! Cluster truth and muster's own view, kept apart.
//!
//! **Cluster truth** is what the API server holds whoever decided it: pods' `spec.nodeName`, what
//! the bound pods request of each node, evictions, and Events written by kube-scheduler.
//! **muster's view** is what muster says about itself: its own Events, `/gangs`, its metrics.
//!
//! A gang test proves something about muster only through cluster truth: `tests/control-run`
//! runs the gang tests with kube-scheduler alone (`MUSTER_E2E_CONTROL=1`) and counts a test as
//! "failed without muster" only when its output carries [`CLUSTER_TRUTH`], the prefix of every
//! error a cluster-truth check raises ([`truth`], [`ensure_truth!`](crate::ensure_truth), and the
//! harness's own checks: [`Cluster::wait_bound`](crate::Cluster::wait_bound),
//! [`Cluster::assert_none_bound_for`](crate::Cluster::assert_none_bound_for),
//! [`Cluster::assert_no_overcommit`](crate::Cluster::assert_no_overcommit), the "none bound" part
//! of the `/gangs` waits).
//!
//! In a control run muster is never consulted, so its view never arrives: the harness's waits on
//! muster's view ([`Cluster::wait_gang`](crate::Cluster::wait_gang),
//! [`Cluster::wait_gang_waiting_whole`](crate::Cluster::wait_gang_waiting_whole),
//! [`Cluster::assert_gang_waits_whole_for`](crate::Cluster::assert_gang_waits_whole_for)) check only
//! their cluster-truth part there, for at most [`CONTROL_TRUTH_WINDOW`], instead of running out a
//! 30-60 s deadline on a view that cannot come.

use std::fmt::Display;
use std::time::Duration;

use crate::cluster::control_run_requested;

/// The prefix of every error raised by a cluster-truth check; `tests/control-run` looks for it.
pub const CLUSTER_TRUTH: &str = "cluster truth:";

/// A gang's partial binding across polls: some but fewer than its quorum of members bound is
/// the moment its bindings land, and a partial gang (never-half broken) once it lasts longer
/// than [`FAN_OUT`](crate::timing::FAN_OUT).
#[derive(Debug, Default)]
pub struct PartialGang {
    since: std::cell::Cell<Option<std::time::Instant>>,
}

impl PartialGang {
    /// One poll: `bound` are the gang's members on nodes (`name → node`), of a quorum of
    /// `quorum`. `Err`, the cluster-truth message (`what` names the gang, e.g. `"TrainJob ml/x: "`),
    /// once the gang has been partly bound longer than `FAN_OUT`.
    pub fn judge(&self, what: &str, bound: &[String], quorum: usize) -> Result<(), String> {
        let n = bound.len();
        if n == 0 || n >= quorum {
            self.since.set(None);
            return Ok(());
        }
        let since = self.since.get().unwrap_or_else(std::time::Instant::now);
        self.since.set(Some(since));
        if since.elapsed() >= crate::timing::FAN_OUT {
            return Err(format!(
                "{CLUSTER_TRUTH} partial gang: {what}{n} of quorum {quorum} bound for {:.1}s: {}",
                since.elapsed().as_secs_f64(),
                bound.join(", ")
            ));
        }
        Ok(())
    }
}

/// In a control run, how long a wait on muster's view observes its cluster-truth part instead.
/// kube-scheduler alone binds a pod that fits within [`crate::timing::PROMPTLY`] of its creation.
pub const CONTROL_TRUTH_WINDOW: Duration = crate::timing::PROMPTLY;

/// An error of a cluster-truth check: `cluster truth: <what>`.
pub fn truth(what: impl Display) -> anyhow::Error {
    anyhow::anyhow!("{CLUSTER_TRUTH} {what}")
}

/// Whether muster's own view (its Events, `/gangs`, metrics) is read: not in a control run, where
/// muster is never consulted and only cluster truth can tell the runs apart.
pub fn muster_view_is_checked() -> bool {
    !control_run_requested()
}

/// Marks the error of a cluster-truth check: `r.map_err(truth)` with the whole chain kept.
pub trait TruthContext<T> {
    fn truth(self) -> anyhow::Result<T>;
}

impl<T> TruthContext<T> for anyhow::Result<T> {
    fn truth(self) -> anyhow::Result<T> {
        self.map_err(|e| {
            if format!("{e:#}").contains(CLUSTER_TRUTH) {
                e
            } else {
                truth(format!("{e:#}"))
            }
        })
    }
}

/// `ensure!` for a cluster-truth check: fails with [`CLUSTER_TRUTH`] and the message.
#[macro_export]
macro_rules! ensure_truth {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            return Err($crate::truth::truth(format!($($arg)+)).into());
        }
    };
}

/// `bail!` for a cluster-truth check.
#[macro_export]
macro_rules! bail_truth {
    ($($arg:tt)+) => {
        return Err($crate::truth::truth(format!($($arg)+)).into())
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fails_truth(ok: bool) -> anyhow::Result<()> {
        ensure_truth!(ok, "{} of {} bound", 1, 2);
        Ok(())
    }

    /// Partly bound is allowed while the bindings land (`FAN_OUT`), a partial gang after it; none
    /// or a quorum bound resets the clock.
    #[test]
    fn a_gang_partly_bound_longer_than_the_fan_out_is_a_partial_gang() {
        let g = PartialGang::default();
        let one = ["a → n1".to_string()];
        assert!(g.judge("x: ", &[], 2).is_ok());
        assert!(g.judge("x: ", &one, 2).is_ok(), "the first partial poll");
        let long_ago = std::time::Instant::now() - crate::timing::FAN_OUT;
        g.since.set(Some(long_ago));
        let e = g.judge("x: ", &one, 2).unwrap_err();
        assert!(
            e.starts_with("cluster truth: partial gang: x: 1 of quorum 2 bound for ")
                && e.ends_with(": a → n1"),
            "{e}"
        );
        let both = ["a → n1".to_string(), "b → n1".to_string()];
        assert!(g.judge("x: ", &both, 2).is_ok());
        assert!(g.since.get().is_none(), "a quorum bound resets the clock");
        assert!(g.judge("x: ", &one, 2).is_ok(), "the clock restarted");
    }

    #[test]
    fn truth_errors_carry_the_marker_once() {
        let e = fails_truth(false).unwrap_err().to_string();
        assert_eq!(e, "cluster truth: 1 of 2 bound");
        assert!(fails_truth(true).is_ok());
        let chained: anyhow::Result<()> = Err(truth("x"));
        let e = format!("{:#}", chained.truth().unwrap_err());
        assert_eq!(e.matches(CLUSTER_TRUTH).count(), 1, "{e}");
        let plain: anyhow::Result<()> = Err(anyhow::anyhow!("y"));
        assert_eq!(plain.truth().unwrap_err().to_string(), "cluster truth: y");
    }
}
