//! Server under load: muster's real router on a loopback port, with 5,000 nodes and 50,000
//! pods in its table, driven by an HTTP/1.1 keep-alive load generator at concurrency 1, 16 and
//! 64. Bounded in requests and time; touches nothing but 127.0.0.1.
//!
//! Run: `cargo bench --bench load` (env LOAD_REQUESTS per level, default 2000;
//! LOAD_NODES / LOAD_PODS to change the cluster). Writes target/muster-bench/load.txt.
//! Under `cargo test --benches` it runs a few requests only (smoke).
//!
//! Every answer is checked, not only timed: a non-200 status, a filter answer with `Error` set
//! or offering no node, or a prioritize answer that is not a list fails the run (exit 1), so
//! a server answering errors fast cannot pass for a fast server.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use muster::http::{router, AppState};
use muster::model::{ModelConfig, NodeName, PodRef};
use muster::state::binder::{BindError, Binder};
use muster::state::event_sink::EventSink;
use muster::state::Shared;

mod support;

struct NoBinder;
impl Binder for NoBinder {
    fn bind(&self, _: PodRef, _: NodeName) -> BoxFuture<'static, Result<(), BindError>> {
        Box::pin(async { Ok(()) })
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

/// Why an answer does not count as served: `None` when it is a real answer of `verb`.
fn bad_answer(verb: &str, status: hyper::StatusCode, body: &[u8]) -> Option<String> {
    let text = || String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
    if status != hyper::StatusCode::OK {
        return Some(format!("HTTP {status}: {}", text()));
    }
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Some(format!("not JSON: {}", text()));
    };
    match verb {
        "filter" => {
            let error = json.get("Error").and_then(|e| e.as_str()).unwrap_or("");
            let offered = json
                .get("NodeNames")
                .and_then(|n| n.as_array())
                .is_some_and(|n| !n.is_empty());
            if !error.is_empty() {
                Some(format!("filter answered Error {error:?}"))
            } else if !offered {
                Some(format!("filter offered no node: {}", text()))
            } else {
                None
            }
        }
        _ if !json.is_array() => Some(format!("{verb} did not answer a list: {}", text())),
        _ => None,
    }
}

struct LevelResult {
    verb: &'static str,
    concurrency: usize,
    requests: usize,
    seconds: f64,
    p50_us: f64,
    p99_us: f64,
    max_us: f64,
}

async fn run_level(
    url: &str,
    verb: &'static str,
    body: Bytes,
    concurrency: usize,
    requests: usize,
    deadline: Duration,
) -> Result<LevelResult, String> {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(concurrency)
        .build_http();
    let started = Instant::now();
    let per_worker = requests.div_ceil(concurrency);
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let client = client.clone();
        let body = body.clone();
        let uri: hyper::Uri = format!("{url}/{verb}").parse().unwrap();
        workers.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(per_worker);
            for _ in 0..per_worker {
                if started.elapsed() > deadline {
                    break;
                }
                let req = hyper::Request::post(uri.clone())
                    .header("content-type", "application/json")
                    .body(Full::new(body.clone()))
                    .unwrap();
                let t = Instant::now();
                let resp = client.request(req).await.expect("loopback request");
                let status = resp.status();
                let bytes = resp.into_body().collect().await.unwrap().to_bytes();
                lat.push(t.elapsed());
                if let Some(why) = bad_answer(verb, status, &bytes) {
                    return Err(format!("{verb} at concurrency {concurrency}: {why}"));
                }
            }
            Ok(lat)
        }));
    }
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.await.unwrap()?);
    }
    let seconds = started.elapsed().as_secs_f64();
    all.sort();
    let pct = |p: f64| {
        let i = ((all.len() as f64 * p).ceil() as usize).clamp(1, all.len()) - 1;
        all[i].as_secs_f64() * 1e6
    };
    Ok(LevelResult {
        verb,
        concurrency,
        requests: all.len(),
        seconds,
        p50_us: pct(0.50),
        p99_us: pct(0.99),
        max_us: pct(1.0),
    })
}

fn main() {
    let smoke = !std::env::args().any(|a| a == "--bench");
    let nodes = env_usize("LOAD_NODES", if smoke { 100 } else { 5_000 });
    let pods = env_usize("LOAD_PODS", if smoke { 1_000 } else { 50_000 });
    let requests = env_usize("LOAD_REQUESTS", if smoke { 20 } else { 2_000 });
    let deadline = Duration::from_secs(if smoke { 10 } else { 60 });

    let rss_before = peak_rss_mib();
    let (table, names) = support::cluster(nodes, pods, 8);
    let rss_table = peak_rss_mib();
    let shared = Arc::new(Shared::new(
        ModelConfig::default(),
        Arc::new(NoBinder),
        EventSink::disabled(),
    ));
    let mut table = table;
    // The plain pod the requests name, as the watch would report it: only the watch adds pods,
    // and a filter for a pod muster has not seen is an `Error` (the gang members are in the
    // table already).
    let plain_json = support::pod_json("plain-0", "none", 1).replace(
        r#""muster.dev/group":"none","muster.dev/min-available":"1","#,
        "",
    );
    let plain_pod: k8s_openapi::api::core::v1::Pod =
        serde_json::from_str(&plain_json).expect("the bench's pod JSON");
    table.apply_pod(muster::cluster::convert::pod_info(&plain_pod).expect("a readable pod"));
    *shared.table.lock() = table;
    shared.readiness.set_pods_synced();
    shared.readiness.set_nodes_synced();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let results = rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = router(
            AppState {
                shared,
                max_body_bytes: 64 << 20,
                bind_wait: Duration::ZERO,
            },
            "",
        );
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let url = format!("http://{addr}");
        let member = Bytes::from(support::extender_args(
            &support::pod_json("gang0-0", "gang0", 8),
            &names,
        ));
        let plain = Bytes::from(support::extender_args(&plain_json, &names));
        let mut out = Vec::new();
        for c in [1usize, 16, 64] {
            out.push(run_level(&url, "filter", member.clone(), c, requests, deadline).await?);
            out.push(run_level(&url, "filter", plain.clone(), c, requests, deadline).await?);
            out.push(run_level(&url, "prioritize", member.clone(), c, requests, deadline).await?);
        }
        server.abort();
        Ok::<_, String>(out)
    });
    let results = match results {
        Ok(r) => r,
        Err(e) => {
            eprintln!("load: a request was not served: {e}");
            std::process::exit(1);
        }
    };

    let mut report = format!(
        "muster load test: {nodes} nodes, {pods} bound pods, 10 waiting gangs of 8; every request names all {nodes} nodes\n\
         peak RSS: {:.1} MiB before the table, {:.1} MiB with it, {:.1} MiB at the end\n\n\
         | verb | pod | concurrency | requests | req/s | p50 | p99 | max |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
        rss_before,
        rss_table,
        peak_rss_mib()
    );
    for (i, r) in results.iter().enumerate() {
        let pod = if i % 3 == 1 { "plain" } else { "gang member" };
        report.push_str(&format!(
            "| {} | {pod} | {} | {} | {:.0} | {:.0} µs | {:.0} µs | {:.0} µs |\n",
            r.verb,
            r.concurrency,
            r.requests,
            r.requests as f64 / r.seconds,
            r.p50_us,
            r.p99_us,
            r.max_us
        ));
    }
    println!("{report}");
    if !smoke {
        let dir = muster_harness::paths::repo_root().join("target/muster-bench");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("load.txt"), &report).unwrap();
    }
}
