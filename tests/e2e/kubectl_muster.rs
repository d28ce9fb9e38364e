//! End-to-end: `kubectl muster` (the `kubectl-muster` binary) against the real control plane,
//! as a user runs it, with the admin kubeconfig.
//!
//! The harness runs muster as a local process on 127.0.0.1, and the API server refuses a
//! loopback address in Endpoints and EndpointSlices (`ValidateEndpointIP`: "may not be in the
//! loopback range"), so its service proxy cannot reach this muster. So: muster's view is read
//! with `--muster-url` (the same `/gangs` the proxy serves), and the path through the API server
//! is the one where the proxy fails (no Service here) and the plugin falls back to the
//! PodGroup's status and the pod's Events — which muster wrote — and says so.
//!
//! The gang has room for one of two members, where kube-scheduler alone binds one: every check
//! first asks that no member is bound (cluster truth), so `tests/control-run` sees it fail.

use std::process::Command;
use std::time::Instant;

use anyhow::{bail, ensure, Result};
use muster_harness::pod_groups;
use muster_harness::{truth, wait_for, Cluster, PodBuilder, Progress, Timer, REASON};

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");
const PLUGIN: &str = env!("CARGO_BIN_EXE_kubectl-muster");

struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

fn plugin(c: &Cluster, args: &[&str]) -> Result<Run> {
    let out = Command::new(PLUGIN)
        .args(args)
        .env("KUBECONFIG", c.cp.kubeconfig_path())
        .env("KUBECACHEDIR", muster_harness::paths::kube_cache_dir())
        .env_remove("MUSTER_URL")
        .output()?;
    Ok(Run {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

async fn none_bound(c: &Cluster, ns: &str, members: &[String]) -> Result<()> {
    let bound = c.bound_pods(ns).await?;
    if let Some(m) = members.iter().find(|m| bound.contains_key(*m)) {
        return Err(truth(format!(
            "{m} was bound to {} while its gang waits",
            bound[m]
        )));
    }
    Ok(())
}

#[tokio::test]
async fn kubectl_muster_says_why_a_volcano_job_waits_in_one_command() -> Result<()> {
    let _t = Timer(
        "kubectl_muster_says_why_a_volcano_job_waits_in_one_command",
        Instant::now(),
    );
    let c = Cluster::start_with(pod_groups::waiting_volcano_job_cluster(MUSTER)).await?;
    let r = async {
        let ns = "ml";
        // Room for one of its two 100m members.
        let members = pod_groups::create_waiting_volcano_job(&c, ns).await?;
        c.create(PodBuilder::new(ns, "plain").cpu("10m")).await?;
        let url = c.muster.url();
        let why = "gang ml/job: 1 of 2 members fit";

        // One command, muster's view: the decision and the numbers; and kube-scheduler's. Both
        // waited for: kube-scheduler writes the pod's condition after its FailedScheduling Event,
        // and muster's verdict can come first (a run once printed muster's view and the Event
        // but not yet the condition).
        // Behind muster's gate (the shipped mode) kube-scheduler's condition says only
        // SchedulingGated, and the plugin shows the gate; with every pod through muster (the
        // control run's members are plain pods too) it is Unschedulable.
        let gathers = c.gathers();
        let scheduler_line = move |l: &str| {
            if gathers {
                l.starts_with("Scheduler:   PodScheduled=False SchedulingGated: ")
            } else {
                l.starts_with("Scheduler:   PodScheduled=False Unschedulable: ")
            }
        };
        let out = wait_for("kubectl muster why to name the shortfall", REASON, || async {
            none_bound(&c, ns, &members).await?;
            let run = plugin(&c, &["why", "ml/job-worker-1", "--muster-url", &url])?;
            // muster's verdict line itself, not only the Event quoting it: the gatherer may
            // tell the Event before /gangs carries the reason.
            let why_line = format!("Why:         {why}");
            Ok(if run.ok
                && run.stdout.lines().any(|l| l == why_line)
                && run.stdout.lines().any(scheduler_line)
            {
                Progress::Done(run.stdout)
            } else {
                Progress::NotYet(format!("{}{}", run.stdout, run.stderr))
            })
        })
        .await?;
        let lines: Vec<&str> = out.lines().collect();
        ensure!(
            lines.first() == Some(&"Pod:         ml/job-worker-1 (Pending, no node)"),
            "{out}"
        );
        for want in [
            "Gang:        ml/job (scheduling.volcano.sh/v1beta1 PodGroup ml/job), waiting: 0 of 2 members have nodes",
            "Decision:    this member holds nothing; it waits with its gang",
            "Why:         gang ml/job: 1 of 2 members fit",
        ] {
            ensure!(lines.contains(&want), "no line {want:?} in:\n{out}");
        }


        // The table.
        let run = plugin(&c, &["gangs", "-n", ns, "--muster-url", &url])?;
        ensure!(run.ok, "gangs: {}", run.stderr);
        let rows: Vec<&str> = run.stdout.lines().collect();
        ensure!(
            rows.len() == 2
                && rows[0].split_whitespace().collect::<Vec<_>>()
                    == [
                        "NAMESPACE", "GANG", "SOURCE", "PHASE", "MEMBERS", "(PRESENT/PLACED/MIN)",
                        "SEATS", "AGE", "WAITING"
                    ],
            "{}",
            run.stdout
        );
        let cells: Vec<&str> = rows[1].split_whitespace().collect();
        ensure!(
            cells[..7] == ["ml", "job", "volcano", "PodGroup", "waiting", "2/0/2", "0"]
                && rows[1].ends_with(why),
            "{}",
            run.stdout
        );
        none_bound(&c, ns, &members).await?;

        // Through the API server, with muster out of its reach: the PodGroup's status that
        // muster wrote, and the Events, with the reason said.
        let out = wait_for("the fallback to show the PodGroup's status", REASON, || async {
            none_bound(&c, ns, &members).await?;
            let run = plugin(&c, &["why", "job-worker-1", "-n", ns])?;
            ensure!(run.ok, "why (fallback): {}", run.stderr);
            Ok(if run.stdout.contains(&format!("Unschedulable=True NotEnoughResources: {why}")) {
                Progress::Done(run.stdout)
            } else {
                Progress::NotYet(run.stdout)
            })
        })
        .await?;
        let lines: Vec<&str> = out.lines().collect();
        ensure!(
            lines[0].starts_with("muster is not reachable (the API server's proxy to service muster-system/muster port ops answered ")
                && lines[0].ends_with("showing PodGroup status and Events instead, which muster wrote when it last could"),
            "{out}"
        );
        ensure!(
            lines.contains(&"PodGroup:    scheduling.volcano.sh/v1beta1 PodGroup ml/job: phase Pending"),
            "{out}"
        );

        // Precise errors.
        let run = plugin(&c, &["why", "ml/nope", "--muster-url", &url])?;
        ensure!(!run.ok && run.stderr.trim() == "error: no such pod: ml/nope", "{}", run.stderr);
        let run = plugin(&c, &["why", "ml/plain", "--muster-url", &url])?;
        ensure!(
            !run.ok && run.stderr.contains("pod ml/plain is not in a gang"),
            "{}",
            run.stderr
        );
        let out = Command::new(PLUGIN)
            .args(["gangs"])
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .env("HOME", "/nonexistent")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .output()?;
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() || !err.contains("no usable kubeconfig") {
            bail!("without a kubeconfig: {err}");
        }
        none_bound(&c, ns, &members).await
    }
    .await;
    c.report(&["ml"], r).await
}
