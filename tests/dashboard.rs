//! `deploy/grafana-dashboard.json` names only metrics muster exports: every `muster_…` name in a
//! panel's PromQL (and in the template variables' queries) must be a series name of `/metrics` as
//! muster renders it (counters with `_total`, histograms as `_bucket`/`_sum`/`_count`). Also: the
//! JSON parses, every panel has a title and uses the `${datasource}` variable, and no datasource
//! UID is written into the file.

use std::collections::BTreeSet;

use muster::metrics::{
    KindLabel, Metrics, OutcomeLabel, PodGroupGauge, VerbLabel, VerbOutcomeLabel,
};
use muster::model::GangGauges;
use serde_json::Value;

const DATASOURCE: &str = "${datasource}";

fn dashboard() -> Value {
    // Compiled in, so cargo rebuilds this test when the file changes (a path read at run time
    // may name another clone's copy: tests/run shares one cargo target dir between clones).
    let text = include_str!("../deploy/grafana-dashboard.json");
    serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("deploy/grafana-dashboard.json is not JSON: {e}"))
}

/// The series names `/metrics` renders once every labelled family has a series (as it does
/// once kube-scheduler has called each verb and the watches have reported).
fn rendered_names() -> BTreeSet<String> {
    let m = Metrics::default();
    for verb in ["filter", "prioritize", "bind", "preempt"] {
        for outcome in ["ok", "refused", "bad_request"] {
            m.requests
                .get_or_create(&VerbOutcomeLabel { verb, outcome })
                .inc();
        }
        m.latency.get_or_create(&VerbLabel { verb }).observe(0.001);
    }
    for outcome in ["kept", "trimmed", "refused"] {
        m.preemptions.get_or_create(&OutcomeLabel { outcome }).inc();
    }
    for kind in ["pods", "nodes"] {
        m.watch_errors.get_or_create(&KindLabel { kind }).inc();
        m.count_unreadable(kind);
    }
    m.set_pod_groups(&[PodGroupGauge {
        api: "scheduling.volcano.sh/v1beta1",
        served: true,
        known: 1,
    }]);
    let text = m.render(GangGauges::default(), 1, 1);
    let names: BTreeSet<String> = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split(['{', ' ']).next().unwrap_or_default().to_string())
        .collect();
    // The rendering was read, not an empty page: a histogram and a counter are in it.
    assert!(
        names.contains("muster_request_duration_seconds_bucket")
            && names.contains("muster_gangs_placed_total"),
        "unexpected /metrics text:\n{text}"
    );
    names
}

/// Every panel, rows' nested panels included.
fn panels(d: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("`panels` is an array") {
        out.push(p);
        if let Some(nested) = p["panels"].as_array() {
            out.extend(nested);
        }
    }
    out
}

/// `(where, PromQL)` for every panel target and every query variable.
fn queries(d: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in panels(d) {
        let title = p["title"].as_str().unwrap_or("(untitled)");
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().unwrap_or_default();
            assert!(
                !expr.trim().is_empty(),
                "panel {title:?}: a target without `expr`"
            );
            out.push((format!("panel {title:?}"), expr.to_string()));
        }
    }
    for v in d["templating"]["list"].as_array().into_iter().flatten() {
        if let Some(q) = v["query"]["query"].as_str().or(v["definition"].as_str()) {
            if v["type"] == "query" {
                out.push((format!("variable {:?}", v["name"]), q.to_string()));
            }
        }
    }
    out
}

/// Identifiers `muster_[a-z0-9_]+` in a PromQL expression.
fn metric_names(expr: &str) -> Vec<String> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("muster_") {
        let before = rest[..i].chars().next_back();
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        if !before.is_some_and(ident) {
            out.push(tail[..end].to_string());
        }
        rest = &tail[end..];
    }
    out
}

#[test]
fn every_metric_a_panel_names_is_one_muster_renders() {
    let d = dashboard();
    let rendered = rendered_names();
    let queries = queries(&d);
    assert!(!queries.is_empty(), "the dashboard has no queries");
    let mut missing = Vec::new();
    let mut named = BTreeSet::new();
    for (place, expr) in &queries {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{place}: no muster metric in {expr:?}");
        for name in names {
            if !rendered.contains(&name) {
                missing.push(format!("{place}: {name}"));
            }
            named.insert(name);
        }
    }
    assert!(
        missing.is_empty(),
        "the dashboard names metrics muster does not render:\n  {}\nmuster renders: {rendered:?}",
        missing.join("\n  ")
    );
    // What the dashboard is for: gangs, placement and request latency, bind outcomes, seats,
    // leader, gang-members mode, watch health.
    for wanted in [
        "muster_gangs",
        "muster_seats_reserved",
        "muster_request_duration_seconds_bucket",
        "muster_gangs_placed_total",
        "muster_bind_retries_total",
        "muster_bind_failures_total",
        "muster_leader",
        "muster_gates_removed_total",
        "muster_gang_markers_missing_total",
        "muster_watch_errors_total",
        "muster_cache_last_event_age_seconds",
    ] {
        assert!(named.contains(wanted), "no panel shows {wanted}");
    }
}

#[test]
fn metric_names_are_read_from_promql() {
    assert_eq!(
        metric_names(
            r#"histogram_quantile(0.99, sum by (verb, le) (rate(muster_request_duration_seconds_bucket{job=~"$job"}[5m]))) and on (instance) (muster_leader == 1)"#
        ),
        ["muster_request_duration_seconds_bucket", "muster_leader"]
    );
    assert!(metric_names(r#"up{job="not_muster_x"}"#).is_empty());
}

#[test]
fn dashboard_parses_and_every_panel_has_a_title_and_the_datasource_variable() {
    let d = dashboard();
    assert!(d["title"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(
        d["schemaVersion"].as_u64().is_some_and(|v| v >= 36),
        "schemaVersion {}",
        d["schemaVersion"]
    );
    let vars = d["templating"]["list"].as_array().expect("templating.list");
    assert!(
        vars.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "no Prometheus `datasource` template variable"
    );
    let panels = panels(&d);
    assert!(!panels.is_empty());
    let mut ids = BTreeSet::new();
    for p in &panels {
        let title = p["title"].as_str().unwrap_or_default();
        assert!(!title.trim().is_empty(), "a panel without a title: {p}");
        let id = p["id"]
            .as_u64()
            .unwrap_or_else(|| panic!("panel {title:?}: id missing"));
        assert!(ids.insert(id), "panel {title:?}: id repeated");
        assert_eq!(p["datasource"]["type"], "prometheus", "panel {title:?}");
        assert_eq!(p["datasource"]["uid"], DATASOURCE, "panel {title:?}");
        for t in p["targets"].as_array().into_iter().flatten() {
            assert_eq!(t["datasource"]["uid"], DATASOURCE, "panel {title:?} target");
        }
        if p["type"] != "row" {
            assert!(
                p["targets"].as_array().is_some_and(|t| !t.is_empty()),
                "panel {title:?} has no query"
            );
        }
    }
    // No UID written in: every `uid` in the file is the variable (or null for the dashboard's
    // own, which Grafana assigns at import).
    fn uids<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
        match v {
            Value::Object(o) => {
                for (k, x) in o {
                    if k == "uid" {
                        out.push(x);
                    }
                    uids(x, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|x| uids(x, out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    uids(&d, &mut found);
    for uid in found {
        assert!(
            uid.is_null() || uid == DATASOURCE,
            "a hard-coded uid: {uid}"
        );
    }
}
