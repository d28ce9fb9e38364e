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
