//! Process accounting from /proc: CPU seconds per process and for the whole machine, and
//! waiting for a quiet machine before measuring.

use std::time::{Duration, Instant};

pub fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

/// utime + stime of a process, in seconds.
pub fn cpu_seconds(pid: u32, ticks: f64) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ut: f64 = f.get(11)?.parse().ok()?;
    let st: f64 = f.get(12)?.parse().ok()?;
    Some((ut + st) / ticks)
}

/// (busy, total) CPU seconds of the whole machine since boot, from /proc/stat.
pub fn system_cpu(ticks: f64) -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: f64 = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4).unwrap_or(&0.0);
    Some(((total - idle) / ticks, total / ticks))
}

/// Waits (up to `max`) until processes other than `ours` use less than 10% of the machine in
/// three 2 s windows in a row; returns what others used in the last window (fraction of the
/// machine).
pub async fn wait_for_quiet(ours: &[(String, u32)], ticks: f64, max: Duration) -> f64 {
    let start = Instant::now();
    let mut quiet_windows = 0;
    loop {
        let (b0, t0) = system_cpu(ticks).unwrap_or_default();
        let o0: f64 = cpu_snapshot(ours, ticks).iter().map(|x| x.1).sum();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (b1, t1) = system_cpu(ticks).unwrap_or_default();
        let o1: f64 = cpu_snapshot(ours, ticks).iter().map(|x| x.1).sum();
        let others = if t1 > t0 {
            ((b1 - b0) - (o1 - o0)).max(0.0) / (t1 - t0)
        } else {
            0.0
        };
        quiet_windows = if others < 0.10 { quiet_windows + 1 } else { 0 };
        if quiet_windows >= 3 || start.elapsed() >= max {
            return others;
        }
        if quiet_windows > 0 {
            continue;
        }
        eprintln!(
            "e2e_throughput: other processes use {:.0}% of the CPUs; waiting for a quiet machine ({:.0}s of {:.0}s)",
            others * 100.0,
            start.elapsed().as_secs_f64(),
            max.as_secs_f64()
        );
    }
}

pub fn cpu_snapshot(procs: &[(String, u32)], ticks: f64) -> Vec<(String, f64)> {
    procs
        .iter()
        .map(|(n, pid)| (n.clone(), cpu_seconds(*pid, ticks).unwrap_or(f64::NAN)))
        .collect()
}

/// The `--secure-port` kube-scheduler was started with (from its command line).
pub fn scheduler_port(pid: u32) -> Option<u16> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    cmdline
        .split(|b| *b == 0)
        .filter_map(|a| std::str::from_utf8(a).ok())
        .find_map(|a| a.strip_prefix("--secure-port="))
        .and_then(|p| p.parse().ok())
}

/// Resident and peak resident memory of a process, in MiB (`VmRSS`, `VmHWM`).
pub fn memory_mib(pid: u32) -> Option<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |key: &str| -> Option<f64> {
        let line = status.lines().find(|l| l.starts_with(key))?;
        line[key.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()
    };
    Some((kib("VmRSS:")? / 1024.0, kib("VmHWM:")? / 1024.0))
}
