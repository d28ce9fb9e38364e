//! What `kubectl muster` prints, from muster's `/gangs` (as read back from its JSON) or, when
//! muster is unreachable, from PodGroup status and Events. Pure: every output is a golden test.

use std::fmt::Write as _;

use serde::Deserialize;

/// One gang of `/gangs` (`muster::model::GangView`, the fields the plugin shows).
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Gang {
    pub namespace: String,
    pub name: String,
    pub state: String,
    pub quorum: u32,
    pub spec_source: SpecSource,
    #[serde(default)]
    pub tasks: Vec<Task>,
    pub members_with_nodes: u32,
    #[serde(default)]
    pub members_live: u32,
    #[serde(default)]
    pub created: i64,
    #[serde(default)]
    pub members: Vec<Member>,
    pub waiting_reason: Option<String>,
    #[serde(default)]
    pub marker_warning: Option<String>,
    pub seconds_until_timeout: Option<u64>,
    pub seconds_of_backoff_left: Option<u64>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum SpecSource {
    PodGroup { api_version: String, name: String },
    MissingPodGroup { api_version: String, name: String },
    Key { key: String },
    EveryMember,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Task {
    pub task: String,
    pub present: u32,
    pub placed: u32,
    pub minimum: u32,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Member {
    pub name: String,
    pub state: String,
    pub node: Option<String>,
}

/// `/gangs`' body.
#[derive(Debug, Deserialize)]
pub struct Gangs {
    pub gangs: Vec<Gang>,
}

/// A PodGroup's project, short, from its `apiVersion`.
fn project(api_version: &str) -> &str {
    match api_version.split('/').next().unwrap_or("") {
        "scheduling.volcano.sh" => "volcano",
        "scheduling.x-k8s.io" => "scheduler-plugins",
        "scheduling.k8s.io" => "kubernetes",
        other => other,
    }
}

impl SpecSource {
    fn short(&self) -> String {
        match self {
            SpecSource::PodGroup { api_version, .. } => {
                format!("{} PodGroup", project(api_version))
            }
            SpecSource::MissingPodGroup { api_version, .. } => {
                format!("{} PodGroup (missing)", project(api_version))
            }
            SpecSource::Key { key } => format!("key {key}"),
            SpecSource::EveryMember => "every member".into(),
        }
    }

    fn long(&self) -> String {
        match self {
            SpecSource::PodGroup { api_version, name } => format!("{api_version} PodGroup {name}"),
            SpecSource::MissingPodGroup { api_version, name } => {
                format!("{api_version} PodGroup {name}, which does not exist (yet)")
            }
            SpecSource::Key { key } => format!("the members' key {key}"),
            SpecSource::EveryMember => "no key: every member that exists".into(),
        }
    }
}

/// kubectl's short age: `45s`, `7m`, `3h`, `2d`.
pub fn age(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 48 * 3600 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// Members present/placed/minimum: per task when a task has a minimum of its own, else for the
/// gang (tasks named only by their members have no minimum to show).
fn members_column(g: &Gang) -> String {
    if g.tasks.iter().all(|t| t.minimum == 0) {
        format!("{}/{}/{}", g.members_live, g.members_with_nodes, g.quorum)
    } else {
        g.tasks
            .iter()
            .map(|t| format!("{} {}/{}/{}", t.task, t.present, t.placed, t.minimum))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn seats(g: &Gang) -> usize {
    g.members
        .iter()
        .filter(|m| matches!(m.state.as_str(), "seated" | "planned" | "held"))
        .count()
}

/// Columns padded to their widest cell, two spaces apart, as kubectl prints tables.
pub fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c + 1 == r.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  ", w = widths[c]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `kubectl muster gangs`: one row per gang. `now` in seconds since the epoch.
pub fn gangs_table(gangs: &[Gang], now: i64) -> String {
    if gangs.is_empty() {
        return "No gangs.\n".into();
    }
    let mut rows = vec![[
        "NAMESPACE",
        "GANG",
        "SOURCE",
        "PHASE",
        "MEMBERS (PRESENT/PLACED/MIN)",
        "SEATS",
        "AGE",
        "WAITING",
    ]
    .map(String::from)
    .to_vec()];
    for g in gangs {
        rows.push(vec![
            g.namespace.clone(),
            g.name.clone(),
            g.spec_source.short(),
            g.state.clone(),
            members_column(g),
            seats(g).to_string(),
            if g.created > 0 {
                age(now - g.created)
            } else {
                "-".into()
            },
            g.waiting_reason.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    table(&rows)
}

/// `kubectl muster describe GANG`.
pub fn describe(g: &Gang, now: i64) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Gang:        {}/{}", g.namespace, g.name);
    let _ = writeln!(out, "Defined by:  {}", g.spec_source.long());
    let _ = writeln!(out, "Phase:       {}", g.state);
    let _ = writeln!(
        out,
        "Quorum:      {} ({} members have nodes, {} present)",
        g.quorum, g.members_with_nodes, g.members_live
    );
    if g.created > 0 {
        let _ = writeln!(out, "Age:         {}", age(now - g.created));
    }
    if let Some(r) = &g.waiting_reason {
        let _ = writeln!(out, "Waiting:     {r}");
    }
    if let Some(s) = g.seconds_until_timeout {
        let _ = writeln!(out, "Timeout in:  {s}s (seats are released together then)");
    }
    if let Some(s) = g.seconds_of_backoff_left {
        let _ = writeln!(out, "Backoff:     {s}s left");
    }
    if let Some(w) = &g.marker_warning {
        let _ = writeln!(out, "Warning:     {w}");
    }
    if !g.tasks.is_empty() {
        let _ = writeln!(out, "Tasks:");
        let mut rows = vec![["TASK", "PRESENT", "PLACED", "MINIMUM"]
            .map(String::from)
            .to_vec()];
        for t in &g.tasks {
            rows.push(vec![
                t.task.clone(),
                t.present.to_string(),
                t.placed.to_string(),
                t.minimum.to_string(),
            ]);
        }
        out.push_str(&indent(&table(&rows)));
    }
    let _ = writeln!(out, "Members:");
    let mut rows = vec![["POD", "STATE", "NODE"].map(String::from).to_vec()];
    for m in &g.members {
        rows.push(vec![
            m.name.clone(),
            m.state.clone(),
            m.node.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    out.push_str(&indent(&table(&rows)));
    out
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("  {l}\n")).collect()
}

/// What kube-scheduler and the API server say of a pod (cluster truth, read by the plugin).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodFacts {
    pub namespace: String,
    pub name: String,
    pub node: Option<String>,
    pub phase: String,
    /// `PodScheduled` condition: status, reason, message.
    pub scheduled: Option<(String, String, String)>,
    /// Scheduling gates left on the pod.
    pub gates: Vec<String>,
    /// The pod's latest Events (type, reason, message), oldest first.
    pub events: Vec<(String, String, String)>,
}

fn pod_lines(out: &mut String, p: &PodFacts) {
    let _ = writeln!(
        out,
        "Pod:         {}/{} ({}, {})",
        p.namespace,
        p.name,
        p.phase,
        p.node
            .as_deref()
            .map_or("no node".to_string(), |n| format!("on {n}"))
    );
    if !p.gates.is_empty() {
        let _ = writeln!(out, "Gates:       {}", p.gates.join(", "));
    }
    if let Some((status, reason, message)) = &p.scheduled {
        let _ = writeln!(
            out,
            "Scheduler:   PodScheduled={status} {reason}{}",
            if message.is_empty() {
                String::new()
            } else {
                format!(": {message}")
            }
        );
    }
}

fn events_lines(out: &mut String, p: &PodFacts) {
    if p.events.is_empty() {
        return;
    }
    let _ = writeln!(out, "Events:");
    let mut rows = vec![["TYPE", "REASON", "MESSAGE"].map(String::from).to_vec()];
    for (t, r, m) in &p.events {
        rows.push(vec![t.clone(), r.clone(), m.clone()]);
    }
    out.push_str(&indent(&table(&rows)));
}

/// `kubectl muster why POD`, with muster's view of the pod's gang.
pub fn why(p: &PodFacts, g: &Gang) -> String {
    let mut out = String::new();
    pod_lines(&mut out, p);
    let member = g.members.iter().find(|m| m.name == p.name);
    let _ = writeln!(
        out,
        "Gang:        {}/{} ({}), {}: {} of {} members have nodes",
        g.namespace,
        g.name,
        g.spec_source.long(),
        g.state,
        g.members_with_nodes,
        g.quorum
    );
    let verdict = match (g.state.as_str(), member) {
        ("placed", _) => {
            "the gang is placed; this member binds as soon as kube-scheduler picks a node"
                .to_string()
        }
        (_, Some(m)) if m.node.is_some() && m.state != "bound" => format!(
            "this member holds a seat on {} ({}); it binds when the whole quorum has seats",
            m.node.as_deref().unwrap_or_default(),
            m.state
        ),
        (_, Some(m)) if m.state == "bound" => "this member is bound".to_string(),
        _ => "this member holds nothing; it waits with its gang".to_string(),
    };
    let _ = writeln!(out, "Decision:    {verdict}");
    if let Some(r) = &g.waiting_reason {
        let _ = writeln!(out, "Why:         {r}");
    }
    if let Some(s) = g.seconds_until_timeout {
        let _ = writeln!(out, "Timeout in:  {s}s");
    }
    if let Some(s) = g.seconds_of_backoff_left {
        let _ = writeln!(out, "Backoff:     {s}s left");
    }
    events_lines(&mut out, p);
    out
}

/// A PodGroup as its status shows it (the fallback when muster is unreachable).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodGroupFacts {
    pub api_version: String,
    pub namespace: String,
    pub name: String,
    pub min_member: Option<i64>,
    pub phase: Option<String>,
    /// Conditions: type, status, reason, message.
    pub conditions: Vec<(String, String, String, String)>,
}

/// The first line of every fallback output.
pub fn unreachable_banner(why: &str) -> String {
    format!(
        "muster is not reachable ({why}); showing PodGroup status and Events instead, which muster wrote when it last could\n"
    )
}

fn podgroup_reason(pg: &PodGroupFacts) -> String {
    pg.conditions
        .iter()
        .find(|(t, s, _, _)| {
            (t == "Unschedulable" && s == "True")
                || (t == "PodGroupInitiallyScheduled" && s == "False")
        })
        .map(|(_, _, r, m)| if m.is_empty() { r.clone() } else { m.clone() })
        .unwrap_or_else(|| "-".into())
}

/// `kubectl muster gangs` without muster: the PodGroups.
pub fn podgroups_table(pgs: &[PodGroupFacts]) -> String {
    if pgs.is_empty() {
        return "No PodGroups.\n".into();
    }
    let mut rows = vec![
        ["NAMESPACE", "PODGROUP", "SOURCE", "PHASE", "MIN", "WAITING"]
            .map(String::from)
            .to_vec(),
    ];
    for pg in pgs {
        rows.push(vec![
            pg.namespace.clone(),
            pg.name.clone(),
            format!("{} PodGroup", project(&pg.api_version)),
            pg.phase.clone().unwrap_or_else(|| "-".into()),
            pg.min_member.map_or("-".into(), |m| m.to_string()),
            podgroup_reason(pg),
        ]);
    }
    table(&rows)
}

/// `kubectl muster why POD` (and `describe`) without muster: the pod's condition and Events,
/// and its PodGroup's status if it names one.
pub fn why_fallback(p: &PodFacts, pg: Option<&PodGroupFacts>) -> String {
    let mut out = String::new();
    pod_lines(&mut out, p);
    if let Some(pg) = pg {
        let _ = writeln!(
            out,
            "PodGroup:    {} PodGroup {}/{}: phase {}",
            pg.api_version,
            pg.namespace,
            pg.name,
            pg.phase.as_deref().unwrap_or("(none written)")
        );
        for (t, s, r, m) in &pg.conditions {
            let _ = writeln!(
                out,
                "  {t}={s} {r}{}",
                if m.is_empty() {
                    String::new()
                } else {
                    format!(": {m}")
                }
            );
        }
    }
    events_lines(&mut out, p);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000;

    fn gang() -> Gang {
        Gang {
            namespace: "ml".into(),
            name: "job".into(),
            state: "waiting".into(),
            quorum: 3,
            spec_source: SpecSource::PodGroup {
                api_version: "scheduling.volcano.sh/v1beta1".into(),
                name: "ml/job".into(),
            },
            tasks: vec![
                Task {
                    task: "ps".into(),
                    present: 1,
                    placed: 0,
                    minimum: 1,
                },
                Task {
                    task: "worker".into(),
                    present: 2,
                    placed: 0,
                    minimum: 2,
                },
            ],
            members_with_nodes: 0,
            members_live: 3,
            created: NOW - 420,
            members: vec![
                Member {
                    name: "job-ps-0".into(),
                    state: "pending".into(),
                    node: None,
                },
                Member {
                    name: "job-worker-0".into(),
                    state: "pending".into(),
                    node: None,
                },
                Member {
                    name: "job-worker-1".into(),
                    state: "pending".into(),
                    node: None,
                },
            ],
            waiting_reason: Some("gang ml/job: 2 of 3 members fit".into()),
            marker_warning: None,
            seconds_until_timeout: None,
            seconds_of_backoff_left: None,
        }
    }

    fn pod() -> PodFacts {
        PodFacts {
            namespace: "ml".into(),
            name: "job-worker-1".into(),
            node: None,
            phase: "Pending".into(),
            scheduled: Some((
                "False".into(),
                "Unschedulable".into(),
                "0/2 nodes are available: 2 gang ml/job: 2 of 3 members fit.".into(),
            )),
            gates: vec![],
            events: vec![(
                "Warning".into(),
                "GangWaiting".into(),
                "gang ml/job: 2 of 3 members fit".into(),
            )],
        }
    }

    #[test]
    fn gangs_table_golden() {
        let mut placed = gang();
        placed.namespace = "ml".into();
        placed.name = "seed".into();
        placed.state = "placed".into();
        placed.quorum = 2;
        placed.tasks = vec![];
        placed.members_live = 2;
        placed.members_with_nodes = 2;
        placed.waiting_reason = None;
        placed.created = NOW - 7300;
        placed.spec_source = SpecSource::Key {
            key: "muster.dev/group".into(),
        };
        assert_eq!(
            gangs_table(&[gang(), placed], NOW),
            "\
NAMESPACE  GANG  SOURCE                PHASE    MEMBERS (PRESENT/PLACED/MIN)  SEATS  AGE  WAITING
ml         job   volcano PodGroup      waiting  ps 1/0/1, worker 2/0/2        0      7m   gang ml/job: 2 of 3 members fit
ml         seed  key muster.dev/group  placed   2/2/2                         0      2h   -
"
        );
        assert_eq!(gangs_table(&[], NOW), "No gangs.\n");
        // Tasks named only by their members: the gang's own numbers.
        let mut g = gang();
        for t in &mut g.tasks {
            t.minimum = 0;
        }
        assert_eq!(members_column(&g), "3/0/3");
    }

    #[test]
    fn why_golden() {
        assert_eq!(
            why(&pod(), &gang()),
            "\
Pod:         ml/job-worker-1 (Pending, no node)
Scheduler:   PodScheduled=False Unschedulable: 0/2 nodes are available: 2 gang ml/job: 2 of 3 members fit.
Gang:        ml/job (scheduling.volcano.sh/v1beta1 PodGroup ml/job), waiting: 0 of 3 members have nodes
Decision:    this member holds nothing; it waits with its gang
Why:         gang ml/job: 2 of 3 members fit
Events:
  TYPE     REASON       MESSAGE
  Warning  GangWaiting  gang ml/job: 2 of 3 members fit
"
        );
    }

    #[test]
    fn why_of_a_seated_member_names_its_seat() {
        let mut g = gang();
        g.state = "admitted".into();
        g.members[2].state = "seated".into();
        g.members[2].node = Some("n1".into());
        g.seconds_until_timeout = Some(42);
        let out = why(&pod(), &g);
        assert!(
            out.contains("Decision:    this member holds a seat on n1 (seated); it binds when the whole quorum has seats\n"),
            "{out}"
        );
        assert!(out.contains("Timeout in:  42s\n"), "{out}");
    }

    #[test]
    fn describe_golden() {
        assert_eq!(
            describe(&gang(), NOW),
            "\
Gang:        ml/job
Defined by:  scheduling.volcano.sh/v1beta1 PodGroup ml/job
Phase:       waiting
Quorum:      3 (0 members have nodes, 3 present)
Age:         7m
Waiting:     gang ml/job: 2 of 3 members fit
Tasks:
  TASK    PRESENT  PLACED  MINIMUM
  ps      1        0       1
  worker  2        0       2
Members:
  POD           STATE    NODE
  job-ps-0      pending  -
  job-worker-0  pending  -
  job-worker-1  pending  -
"
        );
    }

    #[test]
    fn fallback_golden() {
        let pg = PodGroupFacts {
            api_version: "scheduling.volcano.sh/v1beta1".into(),
            namespace: "ml".into(),
            name: "job".into(),
            min_member: Some(3),
            phase: Some("Pending".into()),
            conditions: vec![(
                "Unschedulable".into(),
                "True".into(),
                "NotEnoughResources".into(),
                "gang ml/job: 2 of 3 members fit".into(),
            )],
        };
        assert_eq!(
            podgroups_table(std::slice::from_ref(&pg)),
            "\
NAMESPACE  PODGROUP  SOURCE            PHASE    MIN  WAITING
ml         job       volcano PodGroup  Pending  3    gang ml/job: 2 of 3 members fit
"
        );
        assert_eq!(
            why_fallback(&pod(), Some(&pg)),
            "\
Pod:         ml/job-worker-1 (Pending, no node)
Scheduler:   PodScheduled=False Unschedulable: 0/2 nodes are available: 2 gang ml/job: 2 of 3 members fit.
PodGroup:    scheduling.volcano.sh/v1beta1 PodGroup ml/job: phase Pending
  Unschedulable=True NotEnoughResources: gang ml/job: 2 of 3 members fit
Events:
  TYPE     REASON       MESSAGE
  Warning  GangWaiting  gang ml/job: 2 of 3 members fit
"
        );
    }

    #[test]
    fn ages_like_kubectl() {
        assert_eq!(age(45), "45s");
        assert_eq!(age(420), "7m");
        assert_eq!(age(7300), "2h");
        assert_eq!(age(3 * 86400), "3d");
    }

    #[test]
    fn reads_the_gangs_json_muster_serves() {
        let body = r#"{"gangs":[{"namespace":"ml","name":"job","state":"waiting","quorum":2,
            "spec_source":{"kind":"key","key":"muster.dev/group"},"tasks":[],
            "members_with_nodes":0,"members_live":1,"running":0,"succeeded":0,"failed":0,
            "created":1,"members":[{"name":"a","state":"pending","node":null}],
            "waiting_reason":null,"seconds_until_timeout":null,"seconds_of_backoff_left":null}]}"#;
        let g: Gangs = serde_json::from_str(body).unwrap();
        assert_eq!(g.gangs[0].spec_source.short(), "key muster.dev/group");
        assert_eq!(g.gangs[0].members[0].name, "a");
    }
}
