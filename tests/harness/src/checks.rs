//! What every e2e file used to define for itself: the deadlines and windows, how far apart a
//! gang's members were bound, pod names, and muster's `/metrics` as numbers.
//!
//! Deadlines only bound a wait for something that must happen (a long one costs nothing when
//! it does); windows are observation windows in which every poll must see the same thing.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};

use crate::muster::Muster;
use crate::wait::{wait_for, Progress};

/// Deadline for something that should happen (a gang placed, a pod bound, a victim gone).
pub const PLACE: Duration = Duration::from_secs(60);

/// Deadline for muster's verdict (a reason in `/gangs`, an Event, a metric) to show up.
pub const REASON: Duration = Duration::from_secs(30);

/// Observation window for "nothing gets bound" / "stays as it is" ([`crate::timing::WINDOW`]).
pub use crate::timing::WINDOW;

/// How far apart a gang's members may be bound and still count as bound together
/// ([`crate::timing::TOGETHER`]).
pub use crate::timing::TOGETHER;

/// Time between the first and the last binding in `bound` (as [`crate::Cluster::wait_bound`]
/// returns it: name → (node, first seen bound)).
pub fn spread<K>(bound: &BTreeMap<K, (String, Instant)>) -> Duration {
    let times: Vec<Instant> = bound.values().map(|(_, t)| *t).collect();
    match (times.iter().min(), times.iter().max()) {
        (Some(a), Some(b)) => b.duration_since(*a),
        _ => Duration::ZERO,
    }
}

/// `<prefix>-0` … `<prefix>-<n-1>`: the names [`crate::Cluster::create_gang`] gives.
pub fn names(prefix: &str, n: u32) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// Owned pod names from a list of literals.
pub fn pod_names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Prometheus text as `name{labels}` → value (comments and unparsable lines skipped).
pub fn parse_metrics(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (key, value) = l.rsplit_once(' ')?;
            Some((key.to_string(), value.trim().parse().ok()?))
        })
        .collect()
}

/// The sum of every sample of metric `name` (any labels) in `metrics`.
pub fn metric_sum(metrics: &BTreeMap<String, f64>, name: &str) -> f64 {
    metrics
        .iter()
        .filter(|(k, _)| {
            k.strip_prefix(name)
                .is_some_and(|r| r.is_empty() || r.starts_with('{'))
        })
        .map(|(_, v)| v)
        .sum()
}

/// Sample `key` (`name{labels}` exactly as exposed) of `metrics`, or an error naming it.
pub fn metric(metrics: &BTreeMap<String, f64>, key: &str) -> Result<f64> {
    metrics
        .get(key)
        .copied()
        .with_context(|| format!("{key} is not in /metrics"))
}

impl Muster {
    /// muster's `/metrics` (muster's own view), parsed by [`parse_metrics`].
    pub async fn metrics(&self) -> Result<BTreeMap<String, f64>> {
        let (code, body) = self.get("/metrics").await?;
        ensure!(code == 200, "GET /metrics: HTTP {code}: {}", body.trim());
        Ok(parse_metrics(&body))
    }

    /// Polls `/metrics` until every `(sample, value)` of `want` holds; the error shows what was
    /// seen.
    pub async fn wait_metrics(
        &self,
        what: &str,
        timeout: Duration,
        want: &[(&str, f64)],
    ) -> Result<()> {
        wait_for(what, timeout, || async {
            let m = self.metrics().await?;
            let off: Vec<String> = want
                .iter()
                .filter(|(k, v)| m.get(*k) != Some(v))
                .map(|(k, v)| format!("{k} = {:?} (want {v})", m.get(*k)))
                .collect();
            Ok(if off.is_empty() {
                Progress::Done(())
            } else {
                Progress::NotYet(off.join(", "))
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_read_by_sample_and_summed_by_name() {
        let m = parse_metrics(
            "# HELP muster_requests_total x\n\
             muster_requests_total{verb=\"bind\"} 3\n\
             muster_requests_total{verb=\"filter\"} 4\n\
             muster_requests_total_other 100\n\
             muster_gangs 2\n",
        );
        assert_eq!(metric_sum(&m, "muster_requests_total"), 7.0);
        assert_eq!(metric_sum(&m, "muster_gangs"), 2.0);
        assert_eq!(
            metric(&m, "muster_requests_total{verb=\"bind\"}").unwrap(),
            3.0
        );
        assert!(metric(&m, "muster_missing").is_err());
    }

    #[test]
    fn spread_is_first_to_last() {
        let t = Instant::now();
        let mut b = BTreeMap::new();
        assert_eq!(spread::<&str>(&b), Duration::ZERO);
        b.insert("a", ("n".to_string(), t));
        b.insert("b", ("n".to_string(), t + Duration::from_millis(250)));
        assert_eq!(spread(&b), Duration::from_millis(250));
        assert_eq!(names("g", 2), ["g-0", "g-1"]);
    }
}
