//! The main result: what a user of each configuration feels, every round, beside vanilla.
//!
//! - **paced** (creates at `E2E_PACED_QPS`, below what every configuration sustains here): how
//!   long a plain pod waits from create to bound, and a gang from its last member created to
//!   all bound — latencies that are the scheduler's own, not a creation queue's;
//! - **unpaced**: pods/s and the ratio to the vanilla run of the same round (on a shared 2-core
//!   machine this is mostly total CPU per pod);
//! - **per pod**, from the unpaced run: API requests, the CPU of kube-apiserver, etcd and muster,
//!   kube-scheduler's serial time per attempt (the ceiling where the API server has cores of its
//!   own) and its attempts per gang member.

use std::fmt::Write as _;

use crate::params::{Mode, Params};
use crate::result::RunResult;
use crate::workload::Workload;

fn f(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".into(), |v| format!("{v:.digits$}"))
}

/// The run of `mode` in `round` among `runs`.
fn of(runs: &[RunResult], mode: Mode, round: usize) -> Option<&RunResult> {
    runs.iter().find(|r| r.mode == mode && r.round == round)
}

/// kube-scheduler's attempts per gang member: each member bound once, plus its failed attempts.
pub fn attempts_per_member(r: &RunResult, w: &Workload) -> Option<f64> {
    let members = w.pods.len() - w.plain();
    let bound_members = members.min(r.bound);
    (members > 0).then(|| (bound_members + r.per_member.failed_on_members) as f64 / members as f64)
}

/// The main result's rows, one per round and configuration.
pub struct Row<'a> {
    pub round: usize,
    pub mode: Mode,
    pub unpaced: Option<&'a RunResult>,
    pub paced: Option<&'a RunResult>,
    pub vanilla_unpaced: Option<&'a RunResult>,
    pub vanilla_paced: Option<&'a RunResult>,
}

pub fn rows<'a>(p: &Params, unpaced: &'a [RunResult], paced: &'a [RunResult]) -> Vec<Row<'a>> {
    let mut out = Vec::new();
    for round in 1..=p.rounds {
        for &mode in &p.modes {
            out.push(Row {
                round,
                mode,
                unpaced: of(unpaced, mode, round),
                paced: of(paced, mode, round),
                vanilla_unpaced: of(unpaced, Mode::Vanilla, round).filter(|v| v.completed()),
                vanilla_paced: of(paced, Mode::Vanilla, round).filter(|v| v.completed()),
            });
        }
    }
    out
}

impl Row<'_> {
    fn paced_ok(&self) -> Option<&RunResult> {
        self.paced.filter(|r| r.completed())
    }

    fn unpaced_ok(&self) -> Option<&RunResult> {
        self.unpaced.filter(|r| r.completed())
    }

    pub fn plain_p50_p99(&self) -> Option<(f64, f64)> {
        self.paced_ok()?.plain_latency.map(|d| (d.p50, d.p99))
    }

    /// Plain pods' paced p99 minus vanilla's in the same round, in milliseconds. A difference,
    /// not a ratio: vanilla's paced p99 is a few milliseconds or rounds to 0, and a ratio over
    /// it read 100× for 0.1 s, or nothing at all.
    pub fn plain_p99_over_vanilla_ms(&self) -> Option<f64> {
        let v = self.vanilla_paced?.plain_latency?.p99;
        let (_, x) = self.plain_p50_p99()?;
        Some((x - v) * 1000.0)
    }

    pub fn gang_p50_p99(&self) -> Option<(f64, f64)> {
        self.paced_ok()?.gang_latency.map(|d| (d.p50, d.p99))
    }

    pub fn pods_per_s(&self) -> Option<f64> {
        self.unpaced_ok()?.avg_pps()
    }

    pub fn vs_vanilla(&self) -> Option<f64> {
        let v = self.vanilla_unpaced?.avg_pps()?;
        let x = self.pods_per_s()?;
        (v > 0.0).then(|| x / v)
    }
}

pub fn table(p: &Params, w: &Workload, unpaced: &[RunResult], paced: &[RunResult]) -> String {
    let mut s = String::new();
    let Some(qps) = p.paced_qps.filter(|_| !paced.is_empty()) else {
        return s;
    };
    let _ = writeln!(
        s,
        "## Main result: what users feel\n\nEvery round, each configuration ran twice on a fresh \
         control plane: **paced** (creates at {qps:.0} pods/s, below what every configuration \
         sustains here, so the latencies are the schedulers' own) and **unpaced** (as fast as the \
         creators go). Per pod: from the unpaced run, in its measured phase.\n"
    );
    let _ = writeln!(
        s,
        "| round | configuration | paced: plain pod create→bound p50 / p99 (s) | plain p99 − (a), ms | \
         paced: gang last member created→all bound p50 / p99 (s) | unpaced pods/s | vs (a) | \
         API requests per pod | CPU-ms per pod: kube-apiserver / etcd / muster | kube-scheduler \
         serial ms per attempt | attempts per gang member |"
    );
    let _ = writeln!(s, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in rows(p, unpaced, paced) {
        let u = row.unpaced_ok();
        let pair =
            |v: Option<(f64, f64)>| v.map_or("–".into(), |(a, b)| format!("{a:.2} / {b:.2}"));
        let cpu = |name: &str| f(u.and_then(|r| r.cpu_ms_per_pod(name)), 2);
        let muster = if row.mode == Mode::Vanilla || row.mode == Mode::Native {
            "–".to_string()
        } else {
            cpu("muster")
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} / {} / {muster} | {} | {} |",
            row.round,
            row.mode.title(),
            pair(row.plain_p50_p99()),
            row.plain_p99_over_vanilla_ms()
                .map_or("–".into(), |ms| format!("{ms:+.0}")),
            pair(row.gang_p50_p99()),
            f(row.pods_per_s(), 1),
            f(row.vs_vanilla(), 2) + "×",
            f(u.and_then(RunResult::requests_per_pod), 2),
            cpu("kube-apiserver"),
            cpu("etcd"),
            f(u.and_then(|r| r.serial_ms_per_attempt), 2),
            f(u.and_then(|r| attempts_per_member(r, w)), 2),
        );
    }
    let _ = writeln!(
        s,
        "\nA cell is – where its run did not complete. The paced runs' own details are in \
         paced/ beside this file (raw metrics and logs); everything below this section is the \
         unpaced runs'.\n"
    );
    s
}

/// One line per round and configuration: the main result's numbers.
pub fn csv(p: &Params, w: &Workload, unpaced: &[RunResult], paced: &[RunResult]) -> String {
    let mut s = String::from(
        "configuration,round,paced_qps,plain_p50_s,plain_p99_s,plain_p99_minus_vanilla_ms,gang_p50_s,\
         gang_p99_s,unpaced_pods_per_s,vs_vanilla,requests_per_pod,apiserver_cpu_ms_per_pod,\
         etcd_cpu_ms_per_pod,muster_cpu_ms_per_pod,scheduler_serial_ms_per_attempt,\
         attempts_per_gang_member\n",
    );
    let o = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.3}"));
    for row in rows(p, unpaced, paced) {
        let u = row.unpaced.filter(|r| r.completed());
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            row.mode.slug(),
            row.round,
            o(p.paced_qps),
            o(row.plain_p50_p99().map(|x| x.0)),
            o(row.plain_p50_p99().map(|x| x.1)),
            o(row.plain_p99_over_vanilla_ms()),
            o(row.gang_p50_p99().map(|x| x.0)),
            o(row.gang_p50_p99().map(|x| x.1)),
            o(row.pods_per_s()),
            o(row.vs_vanilla()),
            o(u.and_then(RunResult::requests_per_pod)),
            o(u.and_then(|r| r.cpu_ms_per_pod("kube-apiserver"))),
            o(u.and_then(|r| r.cpu_ms_per_pod("etcd"))),
            o(u.and_then(|r| r.cpu_ms_per_pod("muster"))),
            o(u.and_then(|r| r.serial_ms_per_attempt)),
            o(u.and_then(|r| attempts_per_member(r, w))),
        );
    }
    s
}

#[cfg(test)]
#[allow(dead_code, unused_imports)]
mod tests {
    use super::*;
    use crate::result::Status;
    use crate::stats::Dist;

    fn run(mode: Mode, round: usize, pps: f64, plain_p99: f64) -> RunResult {
        let mut r = RunResult::new(mode, round, 100);
        r.status = Status::Completed;
        r.bound = 100;
        r.tput = Some(Dist {
            n: 10,
            mean: pps,
            ..Dist::default()
        });
        r.plain_latency = Some(Dist {
            n: 25,
            p50: plain_p99 / 2.0,
            p99: plain_p99,
            ..Dist::default()
        });
        r.api_requests = vec![
            ("POST pods".into(), 100.0, 1.0),
            ("POST events".into(), 50.0, 1.0),
        ];
        r.cpu = vec![("kube-apiserver".into(), 0.25)];
        r
    }

    /// Each row pairs a configuration's paced and unpaced runs of one round with the vanilla
    /// runs of that round and pacing: never another round's.
    #[test]
    fn each_row_is_compared_with_vanilla_of_its_round_and_pacing() {
        let p = Params {
            rounds: 2,
            modes: vec![Mode::Vanilla, Mode::Muster],
            paced_qps: Some(120.0),
            ..crate::params::Params::from_env(true).expect("the smoke's defaults")
        };
        let unpaced = vec![
            run(Mode::Vanilla, 1, 400.0, 9.0),
            run(Mode::Muster, 1, 200.0, 9.0),
            run(Mode::Vanilla, 2, 300.0, 9.0),
            run(Mode::Muster, 2, 240.0, 9.0),
        ];
        let paced = vec![
            run(Mode::Vanilla, 1, 120.0, 0.10),
            run(Mode::Muster, 1, 120.0, 0.11),
            run(Mode::Vanilla, 2, 120.0, 0.20),
            run(Mode::Muster, 2, 120.0, 0.30),
        ];
        let rows = rows(&p, &unpaced, &paced);
        assert_eq!(rows.len(), 4);
        let muster: Vec<&Row> = rows.iter().filter(|r| r.mode == Mode::Muster).collect();
        assert_eq!(muster[0].vs_vanilla(), Some(0.5));
        assert_eq!(muster[1].vs_vanilla(), Some(0.8));
        assert_eq!(muster[0].plain_p50_p99(), Some((0.055, 0.11)));
        assert!((muster[1].plain_p99_over_vanilla_ms().unwrap() - 100.0).abs() < 1e-9);
        assert_eq!(muster[0].unpaced.unwrap().requests_per_pod(), Some(1.5));
        assert_eq!(
            muster[0].unpaced.unwrap().cpu_ms_per_pod("kube-apiserver"),
            Some(2.5)
        );
    }
}
