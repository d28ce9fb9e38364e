//! The muster process under test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::process::{free_port, http_get, Frozen, Lifetime, ManagedProcess};
use crate::tls::{HttpsResponse, MusterTls};

/// Options of [`Muster::start`].
#[derive(Debug, Clone)]
pub struct MusterOptions {
    /// The muster binary (in tests: `env!("CARGO_BIN_EXE_muster")`).
    pub binary: PathBuf,
    pub kubeconfig: PathBuf,
    /// Where `muster.log` goes.
    pub log_dir: PathBuf,
    /// `None`: a free port.
    pub port: Option<u16>,
    /// Extra flags after `--listen-addr` and `--kubeconfig`. Without a `--scope` flag among them,
    /// muster runs with its own default, `--scope=gang-members` ([`crate::Cluster`] always
    /// passes one: [`crate::ClusterOptions::scope`]).
    pub args: Vec<String>,
    /// How long to wait for `/readyz`.
    pub ready_timeout: Duration,
    /// The path that must answer 200 before [`Muster::start`] returns: `/readyz`, or
    /// `/healthz` for a replica that may start as a standby (never Ready).
    pub ready_path: &'static str,
    pub lifetime: Lifetime,
    /// Serve HTTPS with these files (`--tls-cert-file`, `--tls-key-file`, and
    /// `--tls-client-ca-file` when it requires client certificates). Readiness polling, [`get`]
    /// and [`url`] then use HTTPS, trusting its CA and presenting its client certificate.
    ///
    /// [`get`]: Muster::get
    /// [`url`]: Muster::url
    pub tls: Option<MusterTls>,
}

impl MusterOptions {
    pub fn new(binary: impl Into<PathBuf>, kubeconfig: &Path, log_dir: &Path) -> Self {
        Self {
            binary: binary.into(),
            kubeconfig: kubeconfig.to_path_buf(),
            log_dir: log_dir.to_path_buf(),
            port: None,
            args: Vec::new(),
            ready_timeout: Duration::from_secs(60),
            ready_path: "/readyz",
            lifetime: Lifetime::Attached,
            tls: None,
        }
    }
}

/// A running muster. Drop kills it.
#[derive(Debug)]
pub struct Muster {
    opts: MusterOptions,
    port: u16,
    proc: Option<ManagedProcess>,
    starts: u32,
}

impl Muster {
    /// Starts muster and waits until `/readyz` answers 200.
    pub async fn start(opts: MusterOptions) -> Result<Self> {
        let port = match opts.port {
            Some(p) => p,
            None => free_port()?,
        };
        let mut m = Self {
            opts,
            port,
            proc: None,
            starts: 0,
        };
        m.spawn_and_wait().await?;
        Ok(m)
    }

    async fn spawn_and_wait(&mut self) -> Result<()> {
        self.starts += 1;
        let mut cmd = Command::new(&self.opts.binary);
        cmd.arg("--listen-addr")
            .arg(format!("127.0.0.1:{}", self.port))
            .arg("--kubeconfig")
            .arg(&self.opts.kubeconfig)
            .args(self.opts.tls.iter().flat_map(MusterTls::muster_args))
            // A control run is kube-scheduler alone: muster runs (tests read its view) but acts
            // on nothing kube-scheduler decided without it, such as evicting the rest of a gang
            // kube-scheduler preempted a member of.
            .args(
                crate::cluster::control_run_requested()
                    .then_some("--evict-gangs-preempted-without-muster=false"),
            )
            .args(&self.opts.args)
            .env("KUBECONFIG", &self.opts.kubeconfig);
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        let log = self.opts.log_dir.join("muster.log");
        mark_start(&log, self.starts)?;
        let p = ManagedProcess::spawn("muster", cmd, &log, self.opts.lifetime)?;
        self.proc = Some(p);
        self.wait_ready(self.opts.ready_timeout).await
    }

    /// Polls `/readyz` (or the options' `ready_path`) until 200.
    pub async fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(p) = self.proc.as_mut() {
                p.check_running()?;
            } else {
                bail!("muster is not running");
            }
            let last = match self
                .get_with_timeout(self.opts.ready_path, Duration::from_secs(2))
                .await
            {
                Ok((200, _)) => return Ok(()),
                Ok((code, body)) => format!("HTTP {code}: {}", body.trim()),
                Err(e) => e.to_string(),
            };
            if Instant::now() > deadline {
                bail!(
                    "muster not ready on 127.0.0.1:{} after {timeout:?}: {last}\nlast lines of its log:\n{}",
                    self.port,
                    self.log_tail(40)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:<port>` (`https://` with TLS): the base for the scheduler's extender
    /// urlPrefix.
    pub fn url(&self) -> String {
        let scheme = if self.opts.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The certificates it serves with, if it serves HTTPS.
    pub fn tls(&self) -> Option<&MusterTls> {
        self.opts.tls.as_ref()
    }

    pub fn pid(&self) -> Option<u32> {
        self.proc.as_ref().map(ManagedProcess::pid)
    }

    /// The kubeconfig it runs with (whose identity it has).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.opts.kubeconfig
    }

    pub fn log_path(&self) -> PathBuf {
        self.opts.log_dir.join("muster.log")
    }

    pub fn log_tail(&self, n: usize) -> String {
        crate::process::tail(&self.log_path(), n)
    }

    /// SIGKILL, no chance to clean up.
    pub fn kill_hard(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.kill();
        }
    }

    /// Starts it again on the same port (after [`kill_hard`](Self::kill_hard), or kills first)
    /// and waits for `/readyz`.
    pub async fn restart(&mut self) -> Result<()> {
        self.kill_hard();
        self.spawn_and_wait().await
    }

    /// GET a path of muster's HTTP server (e.g. `/gangs`, `/metrics`); over HTTPS (with the
    /// client certificate) when it serves TLS.
    pub async fn get(&self, path: &str) -> Result<(u16, String)> {
        self.get_with_timeout(path, Duration::from_secs(5)).await
    }

    async fn get_with_timeout(&self, path: &str, timeout: Duration) -> Result<(u16, String)> {
        match &self.opts.tls {
            None => http_get(self.port, path, timeout).await,
            Some(tls) => {
                let r = tls.client()?.get(self.port, path, timeout).await?;
                Ok((r.status, r.body))
            }
        }
    }

    /// GET over HTTPS (trusting its CA, presenting its client certificate), with the certificate
    /// it presented. Errors if it does not serve TLS.
    pub async fn get_https(&self, path: &str) -> Result<HttpsResponse> {
        let Some(tls) = &self.opts.tls else {
            bail!("muster was started without TLS");
        };
        tls.client()?
            .get(self.port, path, Duration::from_secs(5))
            .await
    }

    /// SIGSTOP: muster keeps its connections, caches and table but does nothing (no round, no
    /// answer, no write) until the returned guard thaws it (or is dropped).
    pub fn freeze(&self) -> Result<Frozen> {
        let Some(pid) = self.pid() else {
            bail!("muster is not running");
        };
        crate::process::freeze(pid, "muster")
    }

    /// Leaves the process running when dropped; returns its pid.
    pub fn detach(mut self) -> Option<u32> {
        self.proc.take().map(ManagedProcess::detach)
    }
}

/// Marks (re)starts in the shared log file.
fn mark_start(path: &Path, start: u32) -> Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    writeln!(f, "=== muster-harness: start #{start} ===")?;
    Ok(())
}
