//! Every round, not only the median: each run's ratio to the vanilla run of the same round
//! (the configurations of a round run one after another, so they saw the same machine), the
//! worst round of a configuration, and the CSV with every round's numbers.

use std::fmt::Write as _;

use crate::params::Mode;
use crate::result::{RunResult, Status};

/// `r`'s pods/s avg over that of the vanilla run of its round, if that one completed.
pub fn ratio_to_vanilla(all: &[RunResult], r: &RunResult) -> Option<f64> {
    let vanilla = all
        .iter()
        .find(|v| v.mode == Mode::Vanilla && v.round == r.round && v.completed())?;
    match (vanilla.avg_pps(), r.avg_pps()) {
        (Some(v), Some(x)) if v > 0.0 => Some(x / v),
        _ => None,
    }
}

/// The worst round of a configuration: its lowest ratio to vanilla and its highest gang
/// placement p99, each with the round it came from.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Worst {
    pub ratio: Option<(f64, usize)>,
    pub gang_p99: Option<(f64, usize)>,
}

pub fn worst(all: &[RunResult], mode: Mode) -> Worst {
    let runs = || all.iter().filter(move |r| r.mode == mode);
    let ratio = runs()
        .filter_map(|r| ratio_to_vanilla(all, r).map(|x| (x, r.round)))
        .min_by(|a, b| a.0.total_cmp(&b.0));
    let gang_p99 = runs()
        .filter_map(|r| r.gang_latency.map(|d| (d.p99, r.round)))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    Worst { ratio, gang_p99 }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or(String::new(), |v| format!("{v:.digits$}"))
}

/// One line per run: what the Markdown shows for the median run, for every round.
pub fn rounds_csv(all: &[RunResult]) -> String {
    let mut s = String::from(
        "configuration,round,status,bound,total,pods_per_s_avg,pods_per_s_overall,\
         vs_vanilla_same_round,time_to_all_bound_s,gang_p50_s,gang_p99_s,gang_max_s,\
         pod_p50_s,pod_p99_s,partial_gang_samples,overcommit,muster_peak_rss_mib,\
         others_cpu_share\n",
    );
    for r in all {
        let status = match r.status {
            Status::Completed => "completed",
            Status::Incomplete(_) => "incomplete",
            Status::NotEnabled(_) => "not_enabled",
            Status::Failed(_) => "failed",
        };
        let overcommit = match &r.overcommit {
            Some(Ok(())) => "none",
            Some(Err(_)) => "yes",
            None => "",
        };
        let muster_peak = r.memory.iter().find(|m| m.0 == "muster").map(|m| m.2);
        let _ = writeln!(
            s,
            "{},{},{status},{},{},{},{},{},{},{},{},{},{},{},{},{overcommit},{},{}",
            r.mode.slug(),
            r.round,
            r.bound,
            r.total,
            opt(r.avg_pps(), 1),
            opt(r.overall_pps, 1),
            opt(ratio_to_vanilla(all, r), 3),
            opt(r.all_bound_secs, 1),
            opt(r.gang_latency.map(|d| d.p50), 3),
            opt(r.gang_latency.map(|d| d.p99), 3),
            opt(r.gang_latency.map(|d| d.max), 3),
            opt(r.pod_latency.map(|d| d.p50), 3),
            opt(r.pod_latency.map(|d| d.p99), 3),
            r.partial_observations,
            opt(muster_peak, 0),
            opt(r.others_share(), 3),
        );
    }
    s
}

#[cfg(test)]
#[allow(dead_code, unused_imports)]
mod tests {
    use super::*;
    use crate::stats::Dist;

    fn run(mode: Mode, round: usize, pps: f64, gang_p99: f64) -> RunResult {
        let mut r = RunResult::new(mode, round, 100);
        r.status = Status::Completed;
        r.bound = 100;
        r.tput = Some(Dist {
            n: 10,
            mean: pps,
            ..Dist::default()
        });
        r.gang_latency = Some(Dist {
            n: 5,
            p99: gang_p99,
            ..Dist::default()
        });
        r
    }

    #[test]
    fn each_round_is_compared_with_the_vanilla_run_of_its_own_round() {
        let all = vec![
            run(Mode::Vanilla, 1, 400.0, 1.0),
            run(Mode::Muster, 1, 300.0, 1.5),
            run(Mode::Vanilla, 2, 200.0, 1.0),
            run(Mode::Muster, 2, 190.0, 6.5),
            run(Mode::Vanilla, 3, 350.0, 1.0),
            run(Mode::Muster, 3, 340.0, 1.8),
        ];
        assert_eq!(ratio_to_vanilla(&all, &all[1]), Some(0.75));
        assert_eq!(ratio_to_vanilla(&all, &all[3]), Some(0.95));
        let w = worst(&all, Mode::Muster);
        assert_eq!(w.ratio, Some((0.75, 1)));
        assert_eq!(w.gang_p99, Some((6.5, 2)));
    }

    #[test]
    fn a_round_whose_vanilla_run_failed_has_no_ratio() {
        let mut vanilla = run(Mode::Vanilla, 1, 400.0, 1.0);
        vanilla.status = Status::Failed("etcd".into());
        let all = vec![vanilla, run(Mode::Muster, 1, 300.0, 1.5)];
        assert_eq!(ratio_to_vanilla(&all, &all[1]), None);
        assert_eq!(worst(&all, Mode::Muster).ratio, None);
        assert_eq!(worst(&all, Mode::Native), Worst::default());
    }

    #[test]
    fn the_csv_has_a_line_per_run_with_its_ratio_and_memory() {
        let mut m = run(Mode::Muster, 1, 300.0, 1.5);
        m.memory = vec![("muster".into(), 80.0, 120.4)];
        m.overcommit = Some(Ok(()));
        let all = vec![run(Mode::Vanilla, 1, 400.0, 1.0), m];
        let csv = rounds_csv(&all);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("configuration,round,status,"));
        assert_eq!(
            lines[2],
            "muster,1,completed,100,100,300.0,,0.750,,0.000,1.500,0.000,,,0,none,120,"
        );
        assert_eq!(
            lines[0].split(',').count(),
            lines[2].split(',').count(),
            "a value for every column"
        );
    }
}
