//! muster: all-or-nothing (gang) scheduling for Kubernetes, as an HTTP extender of the stock
//! kube-scheduler.
//!
//! - [`model`]: the gang reservation table and capacity ledger — pure, no I/O;
//! - [`wire`]: the extender protocol types, named as kube-scheduler's Go structs;
//! - [`http`]: the verbs and operational endpoints;
//! - [`cluster`]: watches, binder and Event publisher (Kubernetes I/O).
#![forbid(unsafe_code)]

pub mod cluster;
pub mod config;
pub mod http;
pub mod metrics;
pub mod model;
pub mod state;
#[doc(hidden)]
pub mod testkit;
pub mod tls;
pub mod wire;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::net::TcpListener;
use tracing::info;

use crate::cluster::binder::KubeBinder;
use crate::cluster::events::{publish_events, EventSink};
use crate::config::{Args, LogFormat};
use crate::http::{router, AppState};
use crate::state::Shared;

pub fn init_logging(args: &Args) {
    let filter = tracing_subscriber::EnvFilter::new(&args.log_level);
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match args.log_format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

async fn kube_client(args: &Args) -> anyhow::Result<kube::Client> {
    kube::Client::try_from(kube_config(args).await?).context("cannot build a Kubernetes client")
}

/// A client that reports HTTP 429 instead of retrying it: for the Eviction API a 429 means "a
/// PodDisruptionBudget does not allow it now", which the evictor retries on its own terms
/// (and tells the user about), where the default retry would wait silently for minutes.
async fn kube_client_without_retries(args: &Args) -> anyhow::Result<kube::Client> {
    let mut config = kube_config(args).await?;
    config.default_retry = false;
    kube::Client::try_from(config).context("cannot build a Kubernetes client")
}

async fn kube_config(args: &Args) -> anyhow::Result<kube::Config> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .with_context(|| format!("--kubeconfig {}: cannot read it", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("--kubeconfig {}: not usable", path.display()))?
        }
        None => kube::Config::infer().await.context(
            "no cluster configuration: pass --kubeconfig, set KUBECONFIG, or run in a pod",
        )?,
    };
    Ok(config)
}

/// Runs muster until SIGTERM or Ctrl-C.
pub async fn run(args: Args) -> anyhow::Result<()> {
    // Certificates first: a bad file is a configuration error to report before anything runs.
    let tls_config = match args.tls() {
        Some(files) => Some((
            tls::server_config(&files, Duration::from_secs(10))?,
            files.client_ca.is_some(),
        )),
        None => None,
    };
    let client = kube_client(&args).await?;
    let listener = TcpListener::bind(args.listen_addr)
        .await
        .with_context(|| format!("--listen-addr {}: cannot listen", args.listen_addr))?;

    let (events, event_rx) = EventSink::channel(4096);
    let binder = Arc::new(KubeBinder::new(client.clone()));
    let shared = Arc::new(Shared::new(args.model_config(), binder, events));

    let instance = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "muster".into());
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(cluster::watch::watch_pods(client.clone(), shared.clone()));
    tasks.spawn(cluster::watch::watch_nodes(client.clone(), shared.clone()));
    tasks.spawn(publish_events(client.clone(), instance, event_rx));
    if let Some(rx) = shared.disruptions.take_receiver() {
        tasks.spawn(cluster::evictor::run_evictions(
            Arc::new(cluster::evictor::KubeEvictor::new(
                kube_client_without_retries(&args).await?,
            )),
            shared.events.clone(),
            rx,
            cluster::evictor::RETRY_EVERY,
            cluster::evictor::GIVE_UP_AFTER,
        ));
    }
    let expiry = shared.clone();
    tasks.spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            expiry.expire_gangs(Instant::now());
        }
    });

    let app = router(
        AppState {
            shared: shared.clone(),
            max_body_bytes: args.max_body_bytes,
            bind_wait: args.bind_wait,
        },
        &args.url_prefix,
    );
    match tls_config {
        None => {
            info!(addr = %args.listen_addr, prefix = %args.url_prefix, "muster serving HTTP");
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown_signal())
                .await
                .context("server failed")?;
        }
        Some((config, client_certificates)) => {
            let listener = tls::TlsListener::new(listener, config)?;
            info!(
                addr = %args.listen_addr,
                prefix = %args.url_prefix,
                client_certificates,
                "muster serving HTTPS"
            );
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown_signal())
                .await
                .context("server failed")?;
        }
    }
    info!("shutting down");
    tasks.shutdown().await;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
