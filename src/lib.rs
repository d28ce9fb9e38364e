//! muster: all-or-nothing (gang) scheduling for Kubernetes, as an HTTP extender of the stock
//! kube-scheduler.
//!
//! - [`model`]: the gang reservation table and capacity ledger — pure, no I/O;
//! - [`wire`]: the extender protocol types, named as kube-scheduler's Go structs;
//! - [`http`]: the verbs and operational endpoints;
//! - [`binding`]: what a bind call does: bindings that outlive the call, held calls;
//! - [`cluster`]: watches, binder and Event publisher (Kubernetes I/O).
#![forbid(unsafe_code)]

pub mod binding;
pub mod cluster;
pub mod config;
pub mod http;
pub mod metrics;
pub mod model;
pub mod pki;
pub mod state;
#[doc(hidden)]
pub mod testkit;
pub mod tls;
pub mod wire;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::serve::ListenerExt;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::net::TcpListener;
use tracing::info;

use crate::cluster::binder::KubeBinder;
use crate::cluster::certs::CertsConfig;
use crate::cluster::events::publish_events;
use crate::config::{Args, LogFormat};
use crate::http::{ops_router, router, verbs_router, AppState};
use crate::state::event_sink::EventSink;
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

/// A client that reports HTTP 429/503/504 instead of retrying them: for the Eviction API a 429
/// means "a PodDisruptionBudget does not allow it now", which the evictor retries on its own
/// terms (and tells the user about), where the default retry would wait silently for minutes;
/// the binder tries a binding again within its own budget (`cluster::binder::RetryPolicy`), and
/// the gatherer its pod patches (`cluster::gather::WRITE_RETRY`).
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

/// How the self-managed certificates are named and made, from the flags.
fn certs_config(args: &Args) -> CertsConfig {
    CertsConfig {
        namespace: args.certs_namespace.clone(),
        ca_secret: args.ca_secret.clone(),
        serving_secret: args.serving_cert_secret.clone(),
        client_secret: args.client_cert_secret.clone(),
        serving_hosts: args.serving_hosts(),
        client_common_name: "muster-scheduler".into(),
        lifetime: args.cert_lifetime,
        dir: args.certs_dir.clone(),
    }
}

async fn listen(addr: std::net::SocketAddr, flag: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("{flag} {addr}: cannot listen"))
}

/// Serves `app` on `listener` (over TLS when `tls` is given) until `stop` fires.
async fn serve(
    listener: TcpListener,
    tls: Option<(Arc<rustls::ServerConfig>, tls::OnConnection)>,
    app: axum::Router,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let stopped = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    match tls {
        None => axum::serve(listener.tap_io(tls::no_delay), app)
            .with_graceful_shutdown(stopped)
            .await
            .context("server failed"),
        Some((config, connections)) => {
            axum::serve(tls::TlsListener::new(listener, config, connections)?, app)
                .with_graceful_shutdown(stopped)
                .await
                .context("server failed")
        }
    }
}

/// How often the listener looks for a renewed self-managed certificate pair (two `stat`s).
const SELF_MANAGED_RELOAD: Duration = Duration::from_secs(1);

/// Runs muster until SIGTERM or Ctrl-C.
pub async fn run(args: Args) -> anyhow::Result<()> {
    args.check().map_err(anyhow::Error::msg)?;
    // Certificate files first: a bad file is a configuration error to report before anything
    // runs. Self-managed certificates need the API server, so they come after the client.
    let mut tls_config = match args.tls() {
        Some(files) => Some((
            tls::server_config(&files, Duration::from_secs(10))?,
            files.client_ca.is_some(),
        )),
        None => None,
    };
    let election = args.election().map_err(|e| anyhow::anyhow!(e))?;
    let own_pod = args.own_pod();
    if own_pod.is_none() && args.leader_elect && args.pod_name.is_some() {
        tracing::warn!(pod = ?args.pod_name, "--pod-name (POD_NAME) without --pod-namespace (POD_NAMESPACE): this replica does not label its pod muster.dev/leader when it leads, so a Service selecting that label sends it nothing");
    }
    let client = kube_client(&args).await?;
    let mut tasks = tokio::task::JoinSet::new();
    if args.self_managed_certs {
        let certs = certs_config(&args);
        cluster::certs::ensure(&client, &certs)
            .await
            .context("--self-managed-certs")?;
        info!(
            namespace = %certs.namespace,
            serving = %certs.serving_secret,
            client = %certs.client_secret,
            "self-managed certificates in place"
        );
        // muster writes these files itself when it renews them (at two thirds of their life),
        // so the listener looks for a new pair every second: a 10 s look served a certificate
        // past its end for a second in CI, under the tests' 30 s lifetimes (the look came
        // 9 s after the write, 1 s after the old pair expired).
        tls_config = Some((
            tls::server_config(&certs.tls_files(), SELF_MANAGED_RELOAD)?,
            true,
        ));
        tasks.spawn(cluster::certs::keep_current(client.clone(), certs));
    }
    let listener = listen(args.listen_addr, "--listen-addr").await?;
    let ops_listener = match args.ops_listen_addr {
        Some(addr) => Some(listen(addr, "--ops-listen-addr").await?),
        None => None,
    };

    let (events, event_rx) = EventSink::channel(4096);
    // Bindings are tried again by the binder's own policy, bounded by its budget: a client
    // without kube-client's retry layer, so one attempt is one request.
    let binder = Arc::new(KubeBinder::new(kube_client_without_retries(&args).await?));
    let mut shared = Shared::new(args.model_config(), binder, events)
        .with_extender_timeout(args.extender_http_timeout);
    if let Some(e) = &election {
        shared = shared.with_leadership(state::leadership::Leadership::candidate(
            &e.identity,
            &e.namespace,
            &e.name,
        ));
    }
    let shared = Arc::new(shared);

    let instance = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "muster".into());
    // PodGroups of the APIs the cluster serves. None is required, but readiness waits for the
    // first list of each one served at start, so no gang is decided by its pods' keys alone
    // before its PodGroup is read (set before any watch runs).
    shared.readiness.expect_pod_group_discovery();
    tasks.spawn(cluster::watch::watch_pods(client.clone(), shared.clone()));
    // Set before the node watch starts, so its first list fills the set to publish on.
    let publish_node_marker = args.publish_node_marker && args.scope == config::Scope::GangMembers;
    if publish_node_marker {
        shared.node_markers.turn_on();
    }
    tasks.spawn(cluster::watch::watch_nodes(client.clone(), shared.clone()));
    // Gangs with ResourceClaims hold nothing until the DRA objects are listed (readiness does
    // not wait for them: a cluster may not serve resource.k8s.io/v1).
    cluster::devices::expect_lists(&shared);
    tasks.spawn(cluster::devices::watch_devices(
        client.clone(),
        shared.clone(),
    ));
    tasks.spawn(cluster::pod_groups::watch_pod_groups(
        client.clone(),
        shared.clone(),
        args.pod_group_discovery_interval,
    ));
    tasks.spawn(publish_events(client.clone(), instance, event_rx));
    // Gangs gathered behind muster's scheduling gate: placed from the watch, let through whole.
    // Its writes are tried again by its own policy, honouring a 429's Retry-After within a
    // budget, as bindings are: a client without kube-client's retry layer.
    tasks.spawn(cluster::gather::run(
        kube_client_without_retries(&args).await?,
        shared.clone(),
        args.scope == config::Scope::GangMembers,
        args.nominate_seats.into(),
    ));
    // The gang marker on every node, so kube-scheduler retries members when nodes come
    // (cluster::node_marker); tried again by its own policy, as the gatherer's writes.
    if publish_node_marker {
        tasks.spawn(cluster::node_marker::run(
            kube_client_without_retries(&args).await?,
            shared.clone(),
        ));
    }
    // Room asked of the cluster autoscaler for gathered gangs short of room alone, as
    // CapacityBuffers muster owns (leader-tied, like the gatherer's writes).
    if args.capacity_buffers {
        tasks.spawn(cluster::capacity::run(
            kube_client_without_retries(&args).await?,
            shared.clone(),
        ));
    }
    // The Lease on a client of its own: renewals never wait behind the bulk traffic's
    // connections, and are tried again by the election's own cadence (no retry layer holding
    // one renewal past the renew deadline). deploy/flowcontrol.yaml gives them a priority level
    // of their own on the API server.
    let lease_client = kube_client_without_retries(&args).await?;
    // Apart from the other tasks: on SIGTERM it is stopped first, so the Lease can be given up
    // while the servers drain.
    let election_task = election.clone().map(|e| {
        info!(identity = %e.identity, lease = %format!("{}/{}", e.namespace, e.name), "leader election on; standing by");
        tokio::spawn(cluster::leader::run(lease_client.clone(), e, shared.clone()))
    });
    if let Some(pod) = own_pod.clone() {
        tasks.spawn(cluster::leader::label::run(
            client.clone(),
            pod,
            shared.clone(),
        ));
    }
    if let Some(rx) = shared.disruptions.take_receiver() {
        tasks.spawn(cluster::evictor::run_evictions(
            Arc::new(cluster::evictor::KubeEvictor::new(
                kube_client_without_retries(&args).await?,
            )),
            {
                // Only the leader evicts: a standby (or a leader that lost its Lease) does not.
                let shared = shared.clone();
                Arc::new(move || shared.leadership.is_leading(Instant::now()))
            },
            shared.events.clone(),
            rx,
            cluster::evictor::RETRY_EVERY,
            cluster::evictor::GIVE_UP_AFTER,
        ));
    }
    // PodGroup status written back by the leader (explained).
    if !args.podgroup_status_interval.is_zero() {
        tasks.spawn(cluster::status::run(
            client.clone(),
            shared.clone(),
            args.podgroup_status_interval,
            args.enqueue_volcano_podgroups,
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

    let state = AppState {
        shared: shared.clone(),
        max_body_bytes: args.max_body_bytes,
        bind_wait: args.bind_wait,
    };
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let mut stopping = stop.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop_tx.send(true);
    });
    let scheme = if tls_config.is_some() {
        "HTTPS"
    } else {
        "HTTP"
    };
    let client_certificates = tls_config.as_ref().is_some_and(|(_, c)| *c);
    let tls_config = tls_config.map(|(c, _)| {
        let connections = state.shared.metrics.tls_connections.clone();
        let on_connection: tls::OnConnection = Arc::new(move |protocol| {
            connections
                .get_or_create(&metrics::ProtocolLabel { protocol })
                .inc();
        });
        (c, on_connection)
    });
    let serving = async {
        match ops_listener {
            None => {
                info!(
                    addr = %args.listen_addr,
                    prefix = %args.url_prefix,
                    client_certificates,
                    "muster serving the verbs, /gangs, probes and metrics over {scheme}"
                );
                serve(listener, tls_config, router(state, &args.url_prefix), stop).await
            }
            Some(ops) => {
                info!(
                    addr = %args.listen_addr,
                    prefix = %args.url_prefix,
                    client_certificates,
                    "muster serving the verbs and /gangs over {scheme}"
                );
                let also = if args.ops_gangs {
                    " and the read-only /gangs"
                } else {
                    ""
                };
                info!(addr = %args.ops_listen_addr.expect("set"), "muster serving /healthz, /readyz and /metrics{also} over HTTP");
                let verbs = serve(
                    listener,
                    tls_config,
                    verbs_router(state.clone(), &args.url_prefix),
                    stop.clone(),
                );
                let ops = serve(ops, None, ops_router(state, args.ops_gangs), stop);
                tokio::try_join!(verbs, ops).map(|_| ())
            }
        }
    };
    // On SIGTERM, while the servers drain: the election stops (so nothing renews the Lease
    // once it is given up), then this replica stops deciding — its held bind calls fail at
    // once, kube-scheduler retries them on the new leader — and gives up the Lease and its
    // label together. The standby takes the Lease at its next try and labels its own pod
    // (and clears a label this replica could not remove). Without this the drain would wait
    // for held bind calls to run out while the standby waits for the Lease.
    let hand_over = async {
        if let Some(task) = election_task {
            task.abort();
            let _ = task.await;
        }
        let release = async {
            if let Some(e) = &election {
                cluster::leader::release(lease_client.clone(), e, &shared).await;
            }
        };
        let unlabel = async {
            if let Some(pod) = &own_pod {
                cluster::leader::label::unlabel(client.clone(), pod, Duration::from_secs(1)).await;
            }
        };
        tokio::join!(release, unlabel);
    };
    tokio::pin!(serving);
    tokio::select! {
        // First: once stopping, the servers end too (they drain), and the hand-over must run.
        biased;
        _ = stopping.wait_for(|s| *s) => {
            info!("shutting down");
            let (served, ()) = tokio::join!(&mut serving, hand_over);
            served?;
        }
        // The servers failed: exit, the Lease expires.
        served = &mut serving => served?,
    }
    // Bindings outlive the calls that started them: those in flight get their budget to end
    // (they stop retrying once this replica stopped deciding), so none is cut off between the
    // API server's answer and the table's.
    let bindings_end_by = Instant::now() + cluster::binder::RetryPolicy::default().budget;
    while shared.bindings.in_flight() > 0 && Instant::now() < bindings_end_by {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
