//! The outage mode (`E2E_MUSTER_OUTAGE_SECS`): mid-round muster is killed (SIGKILL) and started
//! again after the given seconds. A kill, not a SIGSTOP: an outage is a crash, a rollout or a
//! failover, after which a new process starts with an empty memory and rebuilds its state from
//! the cluster (the repair of gangs cut mid-binding runs then); a frozen process would instead
//! hold its TCP connections and resume with a stale table. The pods keep arriving meanwhile
//! (pace them with `E2E_CREATE_QPS` so creation spans the outage). Reported: plain pods bound
//! per second during the outage against before it in the same run (in the shipped mode
//! kube-scheduler never asks muster about them), their create→bound times, gang members bound
//! during the outage (only members let through before the kill may bind), and whether every
//! gang was placed whole after muster returned.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::stats::{dist, Dist};
use crate::workload::Workload;

/// When, relative to the first create, muster was killed and back (ready).
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub killed: f64,
    pub back: f64,
}

#[derive(Debug, Clone)]
pub struct OutageResult {
    pub window: Window,
    /// Plain pods bound per second before the kill (from the first create) and during the outage.
    pub plain_pps_before: f64,
    pub plain_pps_during: f64,
    /// create→bound of plain pods created before the kill, and during the outage.
    pub plain_latency_before: Option<Dist>,
    pub plain_latency_during: Option<Dist>,
    /// Plain pods created during the outage, and how many of them were bound before it ended
    /// (the arrival rate bounds the per-second ratio under paced creation; this does not).
    pub plain_created_during: usize,
    pub plain_created_during_bound_during: usize,
    /// Gang members bound while muster was away.
    pub members_bound_during: usize,
    /// Gangs with a member created during the outage, and how many of them ended whole.
    pub gangs_created_during: usize,
    pub gangs_created_during_whole: usize,
}

pub fn measure(
    w: &Workload,
    t0: Instant,
    window: Window,
    created: &[Option<Instant>],
    bound: &[Option<Instant>],
) -> OutageResult {
    let rel = |t: Instant| t.saturating_duration_since(t0).as_secs_f64();
    let during = |t: f64| t >= window.killed && t < window.back;
    let plain: Vec<usize> = (0..w.pods.len())
        .filter(|&i| w.pods[i].gang.is_none())
        .collect();
    let bound_in = |lo: f64, hi: f64| {
        plain
            .iter()
            .filter(|&&i| bound[i].map(rel).is_some_and(|t| t >= lo && t < hi))
            .count()
    };
    let latency = |pick: &dyn Fn(f64) -> bool| {
        dist(
            plain
                .iter()
                .filter_map(|&i| match (created[i], bound[i]) {
                    (Some(c), Some(b)) if pick(rel(c)) => {
                        Some(b.saturating_duration_since(c).as_secs_f64())
                    }
                    _ => None,
                })
                .collect(),
        )
    };
    let outage_secs = (window.back - window.killed).max(1e-9);
    let gangs_during: Vec<&crate::workload::GangPlan> = w
        .gangs
        .iter()
        .filter(|g| {
            g.members
                .iter()
                .any(|&i| created[i].map(rel).is_some_and(during))
        })
        .collect();
    OutageResult {
        window,
        plain_pps_before: bound_in(0.0, window.killed) as f64 / window.killed.max(1e-9),
        plain_pps_during: bound_in(window.killed, window.back) as f64 / outage_secs,
        plain_latency_before: latency(&|t| t < window.killed),
        plain_latency_during: latency(&|t| during(t)),
        plain_created_during: plain
            .iter()
            .filter(|&&i| created[i].map(rel).is_some_and(during))
            .count(),
        plain_created_during_bound_during: plain
            .iter()
            .filter(|&&i| {
                created[i].map(rel).is_some_and(during) && bound[i].map(rel).is_some_and(during)
            })
            .count(),
        members_bound_during: (0..w.pods.len())
            .filter(|&i| w.pods[i].gang.is_some())
            .filter(|&i| bound[i].map(rel).is_some_and(during))
            .count(),
        gangs_created_during: gangs_during.len(),
        gangs_created_during_whole: gangs_during
            .iter()
            .filter(|g| g.members.iter().all(|&i| bound[i].is_some()))
            .count(),
    }
}

pub fn section(o: &OutageResult, partial_samples: usize) -> String {
    let mut s = String::new();
    let lat = |d: &Option<Dist>| {
        d.map_or("–".to_string(), |d| {
            format!("p50 {:.2} s / p99 {:.2} s (n={})", d.p50, d.p99, d.n)
        })
    };
    let ratio = if o.plain_pps_before > 0.0 {
        format!("{:.2}×", o.plain_pps_during / o.plain_pps_before)
    } else {
        "–".into()
    };
    let _ = writeln!(
        s,
        "- outage: muster killed (SIGKILL) at t={:.1} s, back (ready) at t={:.1} s",
        o.window.killed, o.window.back
    );
    let _ = writeln!(
        s,
        "- outage: plain pods bound per second: {:.2} before, {:.2} during = **{ratio}**; \
         create→bound before {}, during {}; created during the outage {}, of them bound before \
         it ended {}",
        o.plain_pps_before,
        o.plain_pps_during,
        lat(&o.plain_latency_before),
        lat(&o.plain_latency_during),
        o.plain_created_during,
        o.plain_created_during_bound_during
    );
    let _ = writeln!(
        s,
        "- outage: gang members bound while muster was away: {} (only members let through \
         before the kill can bind: their bind calls wait for muster); gangs with a member \
         created during the outage: {}, placed whole by the end: {}; partial-gang samples in the \
         whole run: {partial_samples}",
        o.members_bound_during, o.gangs_created_during, o.gangs_created_during_whole
    );
    s
}

/// `E2E_MUSTER_OUTAGE_SECS` (0: none) and `E2E_MUSTER_OUTAGE_AT_SECS` (after the first create).
pub fn from_env() -> anyhow::Result<Option<(Duration, Duration)>> {
    let secs: u64 = crate::params::env_or("E2E_MUSTER_OUTAGE_SECS", 0)?;
    let at: u64 = crate::params::env_or("E2E_MUSTER_OUTAGE_AT_SECS", 10)?;
    Ok((secs > 0).then(|| (Duration::from_secs(at), Duration::from_secs(secs))))
}

#[cfg(test)]
#[allow(dead_code, unused_imports)]
mod tests {
    use super::*;
    use crate::workload::{GangPlan, PodPlan};

    #[test]
    fn plain_pods_and_gangs_are_counted_by_when_they_were_created_and_bound() {
        let pod = |name: &str, gang: Option<usize>| PodPlan {
            name: name.into(),
            gang,
            cpu_milli: 100,
        };
        let w = Workload {
            pods: vec![
                pod("p0", None),
                pod("p1", None),
                pod("g0-0", Some(0)),
                pod("g0-1", Some(0)),
            ],
            gangs: vec![GangPlan {
                name: "g0".into(),
                members: vec![2, 3],
            }],
            order: vec![0, 1, 2, 3],
            topology: None,
            dra: None,
        };
        let t0 = Instant::now();
        let at = |s: f64| Some(t0 + Duration::from_secs_f64(s));
        let created = [at(1.0), at(12.0), at(13.0), at(14.0)];
        let bound = [at(1.5), at(12.5), at(41.0), at(41.0)];
        let o = measure(
            &w,
            t0,
            Window {
                killed: 10.0,
                back: 40.0,
            },
            &created,
            &bound,
        );
        assert!((o.plain_pps_before - 0.1).abs() < 1e-9, "{o:?}");
        assert!((o.plain_pps_during - 1.0 / 30.0).abs() < 1e-9, "{o:?}");
        assert_eq!(o.members_bound_during, 0);
        assert_eq!(
            (o.gangs_created_during, o.gangs_created_during_whole),
            (1, 1)
        );
        assert_eq!(o.plain_latency_during.unwrap().n, 1);
        assert_eq!(
            (o.plain_created_during, o.plain_created_during_bound_during),
            (1, 1)
        );
    }
}
