//! Scraping `/metrics` of kube-apiserver and kube-scheduler, and the one-line summaries of
//! kube-scheduler's and muster's metrics in the report.

use std::collections::BTreeMap;

use anyhow::{anyhow, bail, Context, Result};
use muster_harness::control_plane::ControlPlane;

use crate::process::scheduler_port;
use crate::prometheus::{histogram_quantile, metric_sum, parse_sample};

pub fn scrape_scheduler_metrics(pid: u32) -> Result<String> {
    let port = scheduler_port(pid).ok_or_else(|| anyhow!("no --secure-port in its cmdline"))?;
    let out = std::process::Command::new("curl")
        .args(["-sSk", "-m", "10", "--fail"])
        .arg(format!("https://127.0.0.1:{port}/metrics"))
        .output()
        .context("running curl")?;
    if !out.status.success() {
        bail!("curl: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// kube-apiserver's /metrics, read with the admin token of the harness's kubeconfig.
pub fn scrape_apiserver_metrics(cp: &ControlPlane) -> Result<String> {
    let kubeconfig = std::fs::read_to_string(cp.kubeconfig_path())?;
    let token = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("token:"))
        .map(str::trim)
        .ok_or_else(|| anyhow!("no token in {}", cp.kubeconfig_path().display()))?;
    let out = std::process::Command::new("curl")
        .args(["-sSk", "-m", "10", "--fail", "-H"])
        .arg(format!("Authorization: Bearer {token}"))
        .arg(format!("{}/metrics", cp.apiserver_url()))
        .output()
        .context("running curl")?;
    if !out.status.success() {
        bail!("curl: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub fn fmt_secs_short(s: f64) -> String {
    if s.is_infinite() {
        "> last bucket".into()
    } else if s < 0.001 {
        format!("{:.0} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

pub fn summarize_muster_metrics(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for verb in ["filter", "prioritize", "bind"] {
        let f = [("verb", verb)];
        let count = metric_sum(text, "muster_request_duration_seconds_count", &f);
        if count == 0.0 {
            continue;
        }
        let sum = metric_sum(text, "muster_request_duration_seconds_sum", &f);
        let q = |q| {
            histogram_quantile(text, "muster_request_duration_seconds", &f, q)
                .map(fmt_secs_short)
                .unwrap_or_else(|| "?".into())
        };
        out.push(format!(
            "`{verb}`: {count:.0} requests, mean {}, p50 ≤ {}, p99 ≤ {}, total {:.2} s",
            fmt_secs_short(sum / count),
            q(0.5),
            q(0.99),
            sum
        ));
    }
    let mut outcomes: BTreeMap<String, f64> = BTreeMap::new();
    for (n, labels, v) in text.lines().filter_map(parse_sample) {
        if n == "muster_requests_total" {
            let key = labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            *outcomes.entry(key).or_default() += v;
        }
    }
    if !outcomes.is_empty() {
        out.push(format!(
            "requests by outcome: {}",
            outcomes
                .iter()
                .map(|(k, v)| format!("{k}: {v:.0}"))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    let h2 = metric_sum(text, "muster_tls_connections_total", &[("protocol", "h2")]);
    let h1 = metric_sum(
        text,
        "muster_tls_connections_total",
        &[("protocol", "http/1.1")],
    );
    if h2 + h1 > 0.0 {
        // kube-scheduler's extender client speaks HTTP/2 when offered; the bench's own polls
        // of muster's /metrics are the HTTP/1.1 ones.
        out.push(format!(
            "TLS connections accepted (each a handshake): HTTP/2 {h2:.0}, HTTP/1.1 {h1:.0}"
        ));
    }
    for (name, what) in [
        ("muster_gangs_placed_total", "gangs placed"),
        (
            "muster_quorum_waits_total",
            "bind calls answered 'waiting for quorum'",
        ),
        ("muster_bind_failures_total", "bind failures"),
        ("muster_gang_timeouts_total", "gang timeouts"),
        ("muster_events_dropped_total", "Events dropped"),
    ] {
        out.push(format!("{what}: {:.0}", metric_sum(text, name, &[])));
    }
    out
}

pub fn summarize_scheduler_metrics(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let attempts: Vec<String> = ["scheduled", "unschedulable", "error"]
        .iter()
        .map(|r| {
            format!(
                "{r} {:.0}",
                metric_sum(text, "scheduler_schedule_attempts_total", &[("result", r)])
            )
        })
        .collect();
    out.push(format!("schedule attempts: {}", attempts.join(", ")));
    for (name, what) in [
        (
            "scheduler_scheduling_attempt_duration_seconds",
            "scheduling attempt (algorithm incl. extender filter/prioritize)",
        ),
        (
            "scheduler_pod_scheduling_sli_duration_seconds",
            "pod scheduling SLI (queue in → bound, excl. gating)",
        ),
    ] {
        let count = metric_sum(text, &format!("{name}_count"), &[]);
        if count > 0.0 {
            let sum = metric_sum(text, &format!("{name}_sum"), &[]);
            let p99 = histogram_quantile(text, name, &[], 0.99)
                .map(fmt_secs_short)
                .unwrap_or_else(|| "?".into());
            out.push(format!(
                "{what}: n={count:.0}, mean {}, p99 ≤ {p99}",
                fmt_secs_short(sum / count)
            ));
        }
    }
    let algo_n = metric_sum(
        text,
        "scheduler_scheduling_algorithm_duration_seconds_count",
        &[],
    );
    if algo_n > 0.0 {
        let algo = metric_sum(
            text,
            "scheduler_scheduling_algorithm_duration_seconds_sum",
            &[],
        );
        let in_tree: f64 = ["PreFilter", "Filter", "PreScore", "Score"]
            .iter()
            .map(|ep| {
                metric_sum(
                    text,
                    "scheduler_framework_extension_point_duration_seconds_sum",
                    &[("extension_point", ep)],
                )
            })
            .sum();
        out.push(format!(
            "scheduling algorithm (the serial part of a cycle): {algo:.1} s over {algo_n:.0} attempts = \
             {} per attempt, of which in-tree PreFilter/Filter/PreScore/Score {} and extender calls + \
             the rest {}",
            fmt_secs_short(algo / algo_n),
            fmt_secs_short(in_tree / algo_n),
            fmt_secs_short((algo - in_tree).max(0.0) / algo_n)
        ));
    }
    for ep in ["Filter", "Score", "Permit", "Bind", "PreBind", "Reserve"] {
        let f = [("extension_point", ep), ("status", "Success")];
        let count = metric_sum(
            text,
            "scheduler_framework_extension_point_duration_seconds_count",
            &f,
        );
        if count > 0.0 {
            let sum = metric_sum(
                text,
                "scheduler_framework_extension_point_duration_seconds_sum",
                &f,
            );
            out.push(format!(
                "extension point {ep} (in-tree plugins): n={count:.0}, mean {}",
                fmt_secs_short(sum / count)
            ));
        }
    }
    let binding_count = metric_sum(text, "scheduler_binding_duration_seconds_count", &[]);
    if binding_count > 0.0 {
        let sum = metric_sum(text, "scheduler_binding_duration_seconds_sum", &[]);
        out.push(format!(
            "binding: n={binding_count:.0}, mean {}",
            fmt_secs_short(sum / binding_count)
        ));
    }
    out
}

/// kube-scheduler's serial time per scheduling attempt, in ms: its scheduling-algorithm
/// histogram (PreFilter through Score and the extenders' filter and prioritize calls, the part
/// of a cycle no other pod runs beside) over its count.
pub fn serial_ms_per_attempt(text: &str) -> Option<f64> {
    let n = metric_sum(
        text,
        "scheduler_scheduling_algorithm_duration_seconds_count",
        &[],
    );
    let sum = metric_sum(
        text,
        "scheduler_scheduling_algorithm_duration_seconds_sum",
        &[],
    );
    (n > 0.0).then(|| 1000.0 * sum / n)
}
