//! HTTPS for the extender: a rustls server whose certificate is re-read when its files change
//! (cert-manager and kubelet rotate Secrets in place), optionally requiring a client certificate
//! signed by a given CA (kube-scheduler presents one with `tlsConfig.certFile/keyFile`).

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context};
use rustls::crypto::ring::default_provider;
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tracing::{info, warn};

/// Where the serving certificate, its key and (optionally) the client CA come from.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: Option<PathBuf>,
}

fn load_certified_key(files: &TlsFiles) -> anyhow::Result<CertifiedKey> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .with_context(|| format!("--tls-cert-file {}: cannot read", files.cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| {
            format!(
                "--tls-cert-file {}: not PEM certificates",
                files.cert.display()
            )
        })?;
    if certs.is_empty() {
        bail!(
            "--tls-cert-file {}: no certificate in it",
            files.cert.display()
        );
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).with_context(|| {
        format!(
            "--tls-key-file {}: no PEM private key in it",
            files.key.display()
        )
    })?;
    let signing = default_provider()
        .key_provider
        .load_private_key(key)
        .with_context(|| format!("--tls-key-file {}: unsupported key", files.key.display()))?;
    let ck = CertifiedKey::new(certs, signing);
    ck.keys_match()
        .with_context(|| "--tls-cert-file and --tls-key-file do not belong together".to_string())?;
    Ok(ck)
}

/// Serves whatever certificate was loaded last.
#[derive(Debug)]
struct ReloadingCert {
    current: RwLock<Arc<CertifiedKey>>,
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().expect("not poisoned").clone())
    }
}

fn modified(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// Builds the rustls config and starts a task that reloads the certificate when the files'
/// modification times change (checked every `interval`). A bad new pair is logged and the old
/// one kept: a half-written rotation never takes the extender down.
pub fn server_config(files: &TlsFiles, interval: Duration) -> anyhow::Result<Arc<ServerConfig>> {
    let resolver = Arc::new(ReloadingCert {
        current: RwLock::new(Arc::new(load_certified_key(files)?)),
    });
    let provider = Arc::new(default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(ca)
                .with_context(|| format!("--tls-client-ca-file {}: cannot read", ca.display()))?
            {
                let cert = cert.with_context(|| {
                    format!(
                        "--tls-client-ca-file {}: not PEM certificates",
                        ca.display()
                    )
                })?;
                roots.add(cert).with_context(|| {
                    format!(
                        "--tls-client-ca-file {}: not a usable CA certificate",
                        ca.display()
                    )
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .with_context(|| format!("--tls-client-ca-file {}", ca.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_cert_resolver(resolver.clone());
    // HTTP/2 first: kube-scheduler's extender client (Go's transport through
    // `utilnet.SetTransportDefaults`, pkg/scheduler/extender.go:57-85) then carries every call as
    // a stream of one connection. Over HTTP/1.1 each concurrent call — every held bind — needs a
    // connection of its own, Go keeps two idle per host, and each new one costs a TLS handshake
    // (measured: about 0.75 per gang member in the 500-node benchmark, some of them inside
    // kube-scheduler's serial filter call).
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];

    let files = files.clone();
    tokio::spawn(async move {
        let mut seen = (modified(&files.cert), modified(&files.key));
        let mut tick = tokio::time::interval(interval);
        loop {
            tick.tick().await;
            let now = (modified(&files.cert), modified(&files.key));
            if now == seen {
                continue;
            }
            match load_certified_key(&files) {
                Ok(ck) => {
                    *resolver.current.write().expect("not poisoned") = Arc::new(ck);
                    // Only a successful load counts as seen: a half-written pair is retried
                    // on the next check even if its timestamps do not change again.
                    seen = now;
                    info!(cert = %files.cert.display(), "reloaded the serving certificate");
                }
                Err(e) => warn!(error = %format!("{e:#}"), "keeping the old certificate"),
            }
        }
    });
    Ok(Arc::new(config))
}

/// Sends each response as soon as it is written (TCP_NODELAY), as kube-scheduler's Go client
/// does its requests. With Nagle's algorithm on, a write that finds data of its own still
/// unacknowledged waits for that ACK, and the peer may delay it: over HTTP/2 a response often
/// follows a frame of the same connection (a WINDOW_UPDATE, a SETTINGS or PING ACK, another
/// stream's answer), so a filter call inside kube-scheduler's serial cycle could wait on it.
pub fn no_delay(tcp: &mut TcpStream) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "TCP_NODELAY not set");
    }
}

/// Told of each TLS connection accepted, with the protocol agreed (`h2`, `http/1.1`, `other`,
/// `none`): how the caller counts them, without this module knowing metrics.
pub type OnConnection = Arc<dyn Fn(&'static str) + Send + Sync>;

/// An `axum::serve` listener that completes TLS handshakes off the accept loop, so one slow
/// or hostile client cannot stall the others. Failed handshakes (for instance a client without
/// a valid certificate when one is required) are logged and dropped.
pub struct TlsListener {
    local: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
}

impl TlsListener {
    pub fn new(
        listener: TcpListener,
        config: Arc<ServerConfig>,
        on_connection: OnConnection,
    ) -> io::Result<Self> {
        let local = listener.local_addr()?;
        let acceptor = TlsAcceptor::from(config);
        let (tx, ready) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let (mut tcp, peer) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                no_delay(&mut tcp);
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                let on_connection = on_connection.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await
                    {
                        Ok(Ok(tls)) => {
                            let protocol = match tls.get_ref().1.alpn_protocol() {
                                Some(b"h2") => "h2",
                                Some(b"http/1.1") => "http/1.1",
                                Some(_) => "other",
                                None => "none",
                            };
                            on_connection(protocol);
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => warn!(%peer, error = %e, "TLS handshake refused"),
                        Err(_) => warn!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { local, ready })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(c) => c,
            // The accept task only ends with the runtime.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local)
    }
}
