//! Counts per gang member that do not depend on the machine's load: kube-scheduler's
//! scheduling attempts (one per member bound, plus one per `FailedScheduling` Event on a
//! member, repeats counted), muster's nomination writes by why and its gate removals, held
//! binds, `GangWaiting` Events. A wall-clock number on a shared machine swings with everyone
//! else's work; these do not.

use std::collections::HashSet;
use std::fmt::Write as _;

use crate::prometheus::metric_sum;
use crate::result::RunResult;
use crate::workload::Workload;

/// What one run counted, per kind of pod.
#[derive(Debug, Clone, Default)]
pub struct PerMember {
    /// `FailedScheduling` Events on gang members, on plain pods (each a failed attempt).
    pub failed_on_members: usize,
    pub failed_on_plain: usize,
    /// muster's `status.nominatedNodeName` writes by why and outcome ("release ok", …).
    pub nominations: Vec<(String, f64)>,
    pub gates_removed: f64,
    pub quorum_waits: f64,
    pub scheduled: f64,
    pub attempts: f64,
}

/// Counts `FailedScheduling` Events by whether their pod is a gang member.
pub fn count_failed(events: &[k8s_openapi::api::core::v1::Event], w: &Workload) -> (usize, usize) {
    let members: HashSet<&str> = w
        .pods
        .iter()
        .filter(|p| p.gang.is_some())
        .map(|p| p.name.as_str())
        .collect();
    let (mut on_members, mut on_plain) = (0, 0);
    for e in events {
        if e.reason.as_deref() != Some("FailedScheduling") {
            continue;
        }
        let n = e
            .count
            .unwrap_or(1)
            .max(e.series.as_ref().and_then(|s| s.count).unwrap_or(1))
            .max(1) as usize;
        match e.involved_object.name.as_deref() {
            Some(name) if members.contains(name) => on_members += n,
            Some(_) => on_plain += n,
            None => {}
        }
    }
    (on_members, on_plain)
}

/// Lists the namespace's Events and counts `FailedScheduling` by kind of pod.
pub async fn list_failed(client: &kube::Client, w: &Workload) -> anyhow::Result<(usize, usize)> {
    use k8s_openapi::api::core::v1::Event;
    use kube::api::{Api, ListParams};
    let api: Api<Event> = Api::namespaced(client.clone(), crate::workload::NS);
    let list = api.list(&ListParams::default()).await?;
    Ok(count_failed(&list.items, w))
}

/// muster's counters from its /metrics text.
pub fn read_muster(text: &str, m: &mut PerMember) {
    for why in ["release", "renominate", "clear"] {
        for outcome in ["ok", "failed"] {
            let v = metric_sum(
                text,
                "muster_nomination_writes_total",
                &[("why", why), ("outcome", outcome)],
            );
            if v > 0.0 {
                m.nominations.push((format!("{why} {outcome}"), v));
            }
        }
    }
    m.gates_removed = metric_sum(text, "muster_gates_removed_total", &[]);
    m.quorum_waits = metric_sum(text, "muster_quorum_waits_total", &[]);
}

/// kube-scheduler's own attempt counters.
pub fn read_scheduler(text: &str, m: &mut PerMember) {
    m.scheduled = metric_sum(
        text,
        "scheduler_schedule_attempts_total",
        &[("result", "scheduled")],
    );
    m.attempts = metric_sum(text, "scheduler_schedule_attempts_total", &[]);
}

/// The table: one row per configuration.
pub fn table(results: &[RunResult], w: &Workload) -> String {
    let members = w.pods.len() - w.plain();
    let plain = w.plain();
    let per = |v: f64, n: usize| {
        if n == 0 {
            "–".to_string()
        } else {
            format!("{:.2}", v / n as f64)
        }
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Per pod, independent of the machine's load ({members} gang members, {plain} plain pods):\n"
    );
    let _ = writeln!(
        s,
        "| configuration | kube-scheduler attempts per gang member | per plain pod | all attempts per pod (its metrics) | nomination writes per member | gate removals per member | held binds per member | `GangWaiting` Events | partial-gang samples |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in results {
        let m = &r.per_member;
        let bound_members = w
            .pods
            .iter()
            .filter(|p| p.gang.is_some())
            .count()
            .min(r.bound);
        let nominated: f64 = m.nominations.iter().map(|x| x.1).sum();
        let detail: Vec<String> = m
            .nominations
            .iter()
            .map(|(k, v)| format!("{k} {v:.0}"))
            .collect();
        let waiting: usize = r
            .events
            .iter()
            .filter(|(k, _)| k.ends_with(" GangWaiting"))
            .map(|x| x.1)
            .sum();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {waiting} | {} |",
            r.mode.title(),
            per((bound_members + m.failed_on_members) as f64, members),
            per(
                (r.bound.saturating_sub(bound_members) + m.failed_on_plain) as f64,
                plain
            ),
            per(m.attempts, r.total),
            if detail.is_empty() {
                "–".to_string()
            } else {
                format!("{} ({})", per(nominated, members), detail.join(", "))
            },
            if m.gates_removed > 0.0 {
                per(m.gates_removed, members)
            } else {
                "–".into()
            },
            if m.quorum_waits > 0.0 {
                per(m.quorum_waits, members)
            } else {
                "–".into()
            },
            r.partial_observations
        );
    }
    let _ = writeln!(
        s,
        "\nAttempts per gang member = (members bound + `FailedScheduling` Events on members, \
         repeats counted) / members: kube-scheduler records one such Event per failed attempt. \
         Nomination writes: muster's `muster_nomination_writes_total` (release: a gang let \
         through; renominate: written again; clear: a seat gone). Held binds: bind calls muster \
         answered only once the quorum was in.\n"
    );
    s
}

#[cfg(test)]
#[allow(dead_code, unused_imports)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Event, ObjectReference};

    fn event(pod: &str, reason: &str, count: i32) -> Event {
        Event {
            reason: Some(reason.into()),
            count: Some(count),
            involved_object: ObjectReference {
                name: Some(pod.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn failed_attempts_are_split_between_gang_members_and_plain_pods() {
        let w = Workload {
            pods: vec![
                crate::workload::PodPlan {
                    name: "g0000-00".into(),
                    gang: Some(0),
                    cpu_milli: 100,
                },
                crate::workload::PodPlan {
                    name: "p0001".into(),
                    gang: None,
                    cpu_milli: 100,
                },
            ],
            gangs: Vec::new(),
            order: vec![0, 1],
            topology: None,
            dra: None,
        };
        let events = [
            event("g0000-00", "FailedScheduling", 3),
            event("p0001", "FailedScheduling", 1),
            event("g0000-00", "Scheduled", 1),
        ];
        assert_eq!(count_failed(&events, &w), (3, 1));
    }

    #[test]
    fn musters_writes_are_read_by_why() {
        let text = "muster_nomination_writes_total{why=\"release\",outcome=\"ok\"} 40\n\
                    muster_nomination_writes_total{why=\"renominate\",outcome=\"failed\"} 2\n\
                    muster_gates_removed_total 40\n";
        let mut m = PerMember::default();
        read_muster(text, &mut m);
        assert_eq!(
            m.nominations,
            vec![
                ("release ok".to_string(), 40.0),
                ("renominate failed".to_string(), 2.0)
            ]
        );
        assert_eq!(m.gates_removed, 40.0);
    }
}
