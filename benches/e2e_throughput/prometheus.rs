//! A small reader of the Prometheus text format: enough to sum counters and read quantiles of
//! histograms from kube-apiserver's, kube-scheduler's and muster's `/metrics`.

use std::collections::BTreeMap;

/// One sample line of Prometheus text: name, labels, value.
pub type MetricSample<'a> = (&'a str, Vec<(&'a str, &'a str)>, f64);

/// Reads `name{k="v",...} value` (or `name value`); `None` for comments, blank lines and lines
/// without a number at the end. Label values with escaped quotes are not unescaped: none of
/// the series read here have them.
pub fn parse_sample(line: &str) -> Option<MetricSample<'_>> {
    if line.starts_with('#') || line.trim().is_empty() {
        return None;
    }
    let (head, value) = line.rsplit_once(' ')?;
    let value: f64 = value.trim().parse().ok()?;
    let (name, labels) = match head.split_once('{') {
        Some((n, rest)) => (n, rest.trim_end_matches('}')),
        None => (head, ""),
    };
    let labels = labels
        .split("\",")
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.trim(), v.trim().trim_matches('"')))
        })
        .collect();
    Some((name, labels, value))
}

/// Sum of the samples of `name` whose labels include all of `filter`.
pub fn metric_sum(text: &str, name: &str, filter: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter_map(parse_sample)
        .filter(|(n, labels, _)| *n == name && filter.iter().all(|f| labels.iter().any(|l| l == f)))
        .map(|(_, _, v)| v)
        .fold(0.0, |a, b| a + b)
}

/// Quantile `q` of a cumulative histogram `name` (upper bound of the bucket that reaches it).
pub fn histogram_quantile(text: &str, name: &str, filter: &[(&str, &str)], q: f64) -> Option<f64> {
    let bucket = format!("{name}_bucket");
    let mut buckets: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    for (n, labels, v) in text.lines().filter_map(parse_sample) {
        if n != bucket || !filter.iter().all(|f| labels.iter().any(|l| l == f)) {
            continue;
        }
        let le = labels.iter().find(|(k, _)| *k == "le")?.1;
        let le: f64 = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().ok()?
        };
        let e = buckets.entry(le.to_bits()).or_insert((le, 0.0));
        e.1 += v;
    }
    let mut b: Vec<(f64, f64)> = buckets.into_values().collect();
    b.sort_by(|x, y| x.0.total_cmp(&y.0));
    let total = b.last()?.1;
    if total <= 0.0 {
        return None;
    }
    b.iter().find(|(_, c)| *c >= q * total).map(|(le, _)| *le)
}

/// kube-apiserver requests by "VERB resource[/subresource]": (count, summed latency seconds).
pub fn apiserver_requests(text: &str) -> BTreeMap<String, (f64, f64)> {
    let mut out: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for (n, labels, v) in text.lines().filter_map(parse_sample) {
        let is_count = n == "apiserver_request_total";
        let is_sum = n == "apiserver_request_duration_seconds_sum";
        if !is_count && !is_sum {
            continue;
        }
        let get = |k: &str| labels.iter().find(|(x, _)| *x == k).map_or("", |l| l.1);
        if get("resource").is_empty() {
            continue;
        }
        let mut key = format!("{} {}", get("verb"), get("resource"));
        if !get("subresource").is_empty() {
            key = format!("{key}/{}", get("subresource"));
        }
        let e = out.entry(key).or_default();
        if is_count {
            e.0 += v;
        } else {
            e.1 += v;
        }
    }
    out
}

/// The requests served between two scrapes, biggest first (WATCH excluded: long-running).
pub fn apiserver_delta(before: &str, after: &str) -> Vec<(String, f64, f64)> {
    let b = apiserver_requests(before);
    let mut v: Vec<(String, f64, f64)> = apiserver_requests(after)
        .into_iter()
        .filter(|(k, _)| !k.starts_with("WATCH"))
        .map(|(k, (c, s))| {
            let (c0, s0) = b.get(&k).copied().unwrap_or_default();
            (k, c - c0, s - s0)
        })
        .filter(|(_, c, _)| *c >= 1.0)
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1));
    v
}

// `cargo test` also builds this module into the `harness = false` bench, where tests do not
// run and their helpers go unused; `e2e_throughput_units` runs them.
#[cfg(test)]
#[allow(dead_code, unused_imports)]
mod tests {
    use super::*;

    #[test]
    fn apiserver_requests_between_two_scrapes_by_verb_and_resource() {
        let before = r#"apiserver_request_total{code="201",resource="pods",subresource="",verb="POST"} 10
apiserver_request_total{code="200",resource="pods",subresource="",verb="WATCH"} 3
apiserver_request_duration_seconds_sum{resource="pods",subresource="",verb="POST"} 1.5
apiserver_request_total{code="200",resource="nodes",subresource="",verb="LIST"} 2
"#;
        let after = r#"apiserver_request_total{code="201",resource="pods",subresource="",verb="POST"} 40
apiserver_request_total{code="409",resource="pods",subresource="",verb="POST"} 2
apiserver_request_total{code="200",resource="pods",subresource="",verb="WATCH"} 9
apiserver_request_duration_seconds_sum{resource="pods",subresource="",verb="POST"} 4.5
apiserver_request_total{code="201",resource="pods",subresource="binding",verb="POST"} 30
apiserver_request_total{code="200",resource="nodes",subresource="",verb="LIST"} 2
apiserver_request_total{code="200",resource="",subresource="",verb="GET"} 5
"#;
        // Codes are added up, WATCH (long-running), unchanged counts and requests without a
        // resource (/healthz, /metrics) are left out; the most frequent comes first.
        assert_eq!(
            apiserver_delta(before, after),
            vec![
                ("POST pods".to_string(), 32.0, 3.0),
                ("POST pods/binding".to_string(), 30.0, 0.0),
            ]
        );
    }

    #[test]
    fn a_sample_line_gives_name_labels_and_value() {
        let (name, labels, value) =
            parse_sample(r#"apiserver_request_total{code="201",resource="pods",verb="POST"} 2000"#)
                .unwrap();
        assert_eq!(name, "apiserver_request_total");
        assert_eq!(
            labels,
            vec![("code", "201"), ("resource", "pods"), ("verb", "POST")]
        );
        assert_eq!(value, 2000.0);

        let (name, labels, value) = parse_sample("muster_seats_reserved 3").unwrap();
        assert_eq!(
            (name, labels.len(), value),
            ("muster_seats_reserved", 0, 3.0)
        );
        let (_, labels, value) = parse_sample(r#"x_bucket{le="+Inf"} 1.5e-05"#).unwrap();
        assert_eq!((labels, value), (vec![("le", "+Inf")], 1.5e-5));
    }

    #[test]
    fn comments_blank_lines_and_unreadable_values_are_not_samples() {
        for line in [
            "# HELP muster_seats_reserved seats held",
            "# TYPE muster_seats_reserved gauge",
            "",
            "   ",
            "muster_seats_reserved many",
            "no_value_at_all",
        ] {
            assert!(parse_sample(line).is_none(), "{line:?}");
        }
    }

    const TEXT: &str = r#"# TYPE muster_requests_total counter
muster_requests_total{verb="filter",outcome="ok"} 10
muster_requests_total{verb="filter",outcome="refused"} 4
muster_requests_total{verb="bind",outcome="ok"} 7
muster_request_duration_seconds_bucket{verb="filter",le="0.001"} 5
muster_request_duration_seconds_bucket{verb="filter",le="0.01"} 9
muster_request_duration_seconds_bucket{verb="filter",le="0.1"} 10
muster_request_duration_seconds_bucket{verb="filter",le="+Inf"} 10
muster_request_duration_seconds_bucket{verb="bind",le="0.001"} 0
muster_request_duration_seconds_bucket{verb="bind",le="0.01"} 0
muster_request_duration_seconds_bucket{verb="bind",le="0.1"} 8
muster_request_duration_seconds_bucket{verb="bind",le="+Inf"} 10
"#;

    #[test]
    fn sums_count_only_samples_with_every_filter_label() {
        assert_eq!(metric_sum(TEXT, "muster_requests_total", &[]), 21.0);
        assert_eq!(
            metric_sum(TEXT, "muster_requests_total", &[("verb", "filter")]),
            14.0
        );
        assert_eq!(
            metric_sum(
                TEXT,
                "muster_requests_total",
                &[("verb", "filter"), ("outcome", "ok")]
            ),
            10.0
        );
        assert_eq!(
            metric_sum(TEXT, "muster_requests", &[]),
            0.0,
            "names match whole"
        );
    }

    /// The upper bound of the first bucket whose cumulative count reaches q of the total.
    #[test]
    fn a_quantile_is_the_upper_bound_of_the_bucket_that_reaches_it() {
        let name = "muster_request_duration_seconds";
        let filter = [("verb", "filter")];
        assert_eq!(histogram_quantile(TEXT, name, &filter, 0.5), Some(0.001));
        assert_eq!(histogram_quantile(TEXT, name, &filter, 0.9), Some(0.01));
        assert_eq!(histogram_quantile(TEXT, name, &filter, 0.99), Some(0.1));
        // Beyond the last finite bucket: +Inf, which the report prints as "> last bucket".
        let bind = [("verb", "bind")];
        assert_eq!(
            histogram_quantile(TEXT, name, &bind, 0.99),
            Some(f64::INFINITY)
        );
        // No filter: both verbs' buckets are added up: 5, 9, 18 and 20 of 20.
        assert_eq!(histogram_quantile(TEXT, name, &[], 0.5), Some(0.1));
        assert_eq!(histogram_quantile(TEXT, name, &[], 0.25), Some(0.001));
        assert_eq!(histogram_quantile(TEXT, "absent", &[], 0.5), None);
    }
}
