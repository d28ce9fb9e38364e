//! What is read off the cluster and the processes after a run: the overcommit check, Events,
//! PodGroup conditions (native), muster's and kube-scheduler's metrics (summarised and kept
//! as files) and their logs.

use std::collections::BTreeMap;

use anyhow::Result;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use kube::api::{Api, ListParams};
use kube::Client;
use muster_harness::control_plane::ControlPlane;
use muster_harness::k8s;
use muster_harness::muster::Muster;

use crate::metrics::{
    scrape_scheduler_metrics, summarize_muster_metrics, summarize_scheduler_metrics,
};
use crate::params::{Mode, Params};
use crate::per_member;
use crate::result::RunResult;
use crate::workload::NS;

pub async fn cluster_state(
    mode: Mode,
    p: &Params,
    r: &mut RunResult,
    client: &Client,
    cp: &ControlPlane,
    muster: Option<&Muster>,
    scheduler_pid: Option<u32>,
) -> Result<()> {
    r.overcommit = Some(k8s::check_no_overcommit(client).await?);
    let evs: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), NS);
    match evs.list(&ListParams::default()).await {
        Ok(list) => {
            let mut by: BTreeMap<String, usize> = BTreeMap::new();
            for e in list.items {
                let who = e
                    .reporting_component
                    .filter(|s| !s.is_empty())
                    .or(e.source.and_then(|s| s.component))
                    .unwrap_or_else(|| "?".into());
                let n = e
                    .count
                    .unwrap_or(1)
                    .max(e.series.and_then(|s| s.count).unwrap_or(1))
                    .max(1) as usize;
                *by.entry(format!("{who} {}", e.reason.unwrap_or_default()))
                    .or_default() += n;
            }
            r.events = by.into_iter().collect();
            r.events.sort_by_key(|e| std::cmp::Reverse(e.1));
        }
        Err(e) => r.notes.push(format!("listing Events: {e}")),
    }
    if mode == Mode::Native {
        let api: Api<PodGroup> = Api::namespaced(client.clone(), NS);
        let groups = api.list(&ListParams::default()).await?.items;
        let scheduled = groups
            .iter()
            .filter(|g| {
                g.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c.type_ == "PodGroupInitiallyScheduled" && c.status == "True")
                    })
            })
            .count();
        r.native_groups_scheduled = Some((scheduled, groups.len()));
    }
    std::fs::create_dir_all(&p.out_dir)?;
    let suffix = file_suffix(p, r.round);
    if let Some(m) = muster {
        match m.get("/metrics").await {
            Ok((200, text)) => {
                r.muster_summary = summarize_muster_metrics(&text);
                per_member::read_muster(&text, &mut r.per_member);
                // Named by configuration: two configurations with muster in one round would
                // write the same file.
                let path = p.out_dir.join(format!(
                    "e2e-throughput{suffix}-{}-muster-metrics.txt",
                    mode.slug()
                ));
                std::fs::write(path, &text)?;
            }
            Ok((code, _)) => r.notes.push(format!("muster /metrics: HTTP {code}")),
            Err(e) => r.notes.push(format!("muster /metrics: {e:#}")),
        }
    }
    if let Some(pid) = scheduler_pid {
        match scrape_scheduler_metrics(pid) {
            Ok(text) => {
                r.scheduler_summary = summarize_scheduler_metrics(&text);
                r.serial_ms_per_attempt = crate::metrics::serial_ms_per_attempt(&text);
                per_member::read_scheduler(&text, &mut r.per_member);
                let path = p.out_dir.join(format!(
                    "e2e-throughput{suffix}-{}-scheduler-metrics.txt",
                    mode.slug()
                ));
                std::fs::write(path, &text)?;
            }
            Err(e) => r.notes.push(format!("kube-scheduler /metrics: {e:#}")),
        }
    }
    // Keep the logs of every run next to the results (small: info level).
    for (name, src) in [
        ("kube-scheduler", cp.dir().join("kube-scheduler.log")),
        // (d)'s second scheduler, muster's.
        ("kube-scheduler-2", cp.dir().join("kube-scheduler-2.log")),
        ("muster", cp.dir().join("muster.log")),
    ] {
        if src.exists() {
            let dst = p
                .out_dir
                .join(format!("e2e-throughput{suffix}-{}-{name}.log", mode.slug()));
            let _ = std::fs::copy(&src, dst);
        }
    }
    Ok(())
}

/// What the files of one run add to `e2e-throughput`: `-smoke`, nothing for a single round,
/// else `-rN`.
pub fn file_suffix(p: &Params, round: usize) -> String {
    match (p.smoke, p.rounds) {
        (true, _) => "-smoke".to_string(),
        (false, 1) => String::new(),
        (false, _) => format!("-r{round}"),
    }
}
