//! etcd + kube-apiserver (+ optionally the stock kube-scheduler) on free 127.0.0.1 ports.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;
use serde_json::{json, Value};

use crate::paths::{ensure_control_plane_binaries, repo_root, ControlPlaneBinaries};
use crate::process::{free_port, http_get, random_string, Lifetime, ManagedProcess};
use crate::tls::{openssl, Ca, ExtenderTls, Usage};

/// Options of [`ControlPlane::start`].
#[derive(Debug, Clone)]
pub struct ControlPlaneOptions {
    /// Directory for data, certificates, kubeconfig and logs. `None`: a fresh directory under the
    /// system temp dir, removed on drop unless `MUSTER_KEEP_DATA=1`.
    pub dir: Option<PathBuf>,
    /// Attached (killed with the handle) or detached (left running, for `muster-local up`).
    pub lifetime: Lifetime,
    /// How long to wait for etcd and kube-apiserver to become ready.
    pub start_timeout: Duration,
    /// Extra kube-apiserver flags.
    pub apiserver_args: Vec<String>,
    /// Its own etcd and kube-apiserver even when `tests/e2e-run` shares one per slot
    /// ([`crate::shared`]): for a test that kills, restarts or pauses kube-apiserver or etcd.
    /// (A plane with `apiserver_args`, a `dir` or a detached lifetime is always its own.)
    pub own: bool,
}

impl Default for ControlPlaneOptions {
    fn default() -> Self {
        Self {
            dir: None,
            lifetime: Lifetime::Attached,
            start_timeout: Duration::from_secs(120),
            apiserver_args: Vec::new(),
            own: false,
        }
    }
}

/// Options of [`ControlPlane::start_scheduler`].
#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    /// KubeSchedulerConfiguration to start from. `None`: `MUSTER_SCHEDULER_CONFIG`, else
    /// `scheduler-config/muster-as-default-scheduler.yaml`, the shipped install's (only gang
    /// members through muster; [`crate::ClusterOptions::every_pod`] starts
    /// `muster-every-pod.yaml`).
    pub config: Option<PathBuf>,
    /// Replaces scheme, host and port of every `extenders[].urlPrefix` (the path is kept), e.g.
    /// `http://127.0.0.1:31234` (sets `enableHTTPS: false`) or `https://127.0.0.1:31234` (sets
    /// `enableHTTPS: true`).
    pub extender_base_url: Option<String>,
    /// Sets `enableHTTPS: true` and this `tlsConfig` on every extender (what a muster started
    /// with [`MusterTls`](crate::tls::MusterTls) needs: [`MusterTls::extender_tls`](crate::tls::MusterTls::extender_tls)).
    pub extender_tls: Option<ExtenderTls>,
    /// `clientConnection.qps` / `burst`.
    pub qps: f64,
    pub burst: u32,
    /// How long to wait for the scheduler's `/readyz`.
    pub start_timeout: Duration,
    /// Extra kube-scheduler flags.
    pub args: Vec<String>,
    /// Start kube-scheduler with the config's `extenders:` removed: stock scheduling that never
    /// consults muster (the control run, see [`crate::cluster::CONTROL_RUN_ENV`]).
    pub without_extenders: bool,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        Self {
            config: None,
            extender_base_url: None,
            extender_tls: None,
            qps: 5000.0,
            burst: 10000,
            start_timeout: Duration::from_secs(60),
            args: Vec::new(),
            without_extenders: false,
        }
    }
}

impl SchedulerOptions {
    /// Starts from `scheduler-config/<name>` of the repository (e.g.
    /// `muster-second-scheduler.yaml`) instead of the default file.
    pub fn with_repo_config(mut self, name: &str) -> Self {
        self.config = Some(scheduler_config_file(name));
        self
    }
}

/// `<repo>/scheduler-config/<name>`.
pub fn scheduler_config_file(name: &str) -> PathBuf {
    repo_root().join("scheduler-config").join(name)
}

/// A running etcd + kube-apiserver (+ kube-scheduler once started). Drop kills them all.
pub struct ControlPlane {
    dir: PathBuf,
    remove_dir: bool,
    bins: ControlPlaneBinaries,
    procs: Vec<ManagedProcess>,
    detached: bool,
    lifetime: Lifetime,
    apiserver_port: u16,
    etcd_port: u16,
    scheduler_port: Option<u16>,
    kubeconfig: PathBuf,
    client: Client,
    startup: Duration,
    phases: StartPhases,
    /// The slot whose etcd and kube-apiserver this plane borrows ([`crate::shared`]); `procs`
    /// then holds only the schedulers this test started.
    shared: Option<crate::shared::Slot>,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("dir", &self.dir)
            .field("apiserver_port", &self.apiserver_port)
            .field("etcd_port", &self.etcd_port)
            .field("scheduler_port", &self.scheduler_port)
            .finish_non_exhaustive()
    }
}

/// A kube-apiserver stopped by [`ControlPlane::kill_apiserver`], to start again.
#[derive(Debug)]
pub struct StoppedApiserver {
    argv: Vec<String>,
    log: PathBuf,
    index: usize,
}

/// The parts of [`ControlPlane::start`], one after the other.
#[derive(Debug, Clone, Copy)]
pub struct StartPhases {
    /// Binaries found, directory, certificates and keys (`openssl`), token and kubeconfig.
    pub pki: Duration,
    /// etcd started until its `/health` answers.
    pub etcd: Duration,
    /// kube-apiserver started until its `/readyz` answers.
    pub apiserver: Duration,
}

/// Removes the directory and kills processes when startup fails half-way.
struct StartGuard {
    dir: PathBuf,
    remove_dir: bool,
    procs: Vec<ManagedProcess>,
}

impl Drop for StartGuard {
    fn drop(&mut self) {
        for p in self.procs.iter_mut().rev() {
            p.kill();
        }
        if self.remove_dir {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

fn keep_data() -> bool {
    std::env::var("MUSTER_KEEP_DATA").is_ok_and(|v| !v.is_empty() && v != "0")
}

impl ControlPlane {
    /// Starts etcd and kube-apiserver (building the binaries first if they are not cached) and
    /// waits for `/readyz`. Under `tests/e2e-run` (which sets
    /// [`MUSTER_E2E_SHARED_CONTROL_PLANES`](crate::shared::SHARED_ENV)) a plane that
    /// [may be shared](crate::shared::may_share) is instead the slot's running one, reset to
    /// what the API server first made.
    pub async fn start(opts: ControlPlaneOptions) -> Result<Self> {
        if crate::shared::may_share(&opts) {
            if let Some(slot) = crate::shared::slot_dir() {
                return Self::adopt_shared(&slot, opts).await;
            }
        }
        Self::start_own(opts).await
    }

    /// The slot's shared etcd + kube-apiserver (started if need be), every object a test made
    /// there deleted; a fresh directory of this test's own for the rest.
    async fn adopt_shared(slot_dir: &Path, opts: ControlPlaneOptions) -> Result<Self> {
        let t0 = Instant::now();
        let bins = ensure_control_plane_binaries()?;
        let mut slot = crate::shared::Slot::ready(slot_dir, opts.start_timeout).await?;
        let dir = std::env::temp_dir().join(format!(
            "muster-e2e-{}-{}",
            std::process::id(),
            random_string(6)
        ));
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let dir = dir.canonicalize()?;
        let kubeconfig = dir.join("kubeconfig");
        fs::copy(&slot.kubeconfig, &kubeconfig)
            .with_context(|| format!("copying {}", slot.kubeconfig.display()))?;
        let mut client = client_from_kubeconfig(&kubeconfig).await?;
        if !slot.started_now {
            let afresh = match slot.reset(&client).await {
                Ok(report) => {
                    eprintln!(
                        "muster-harness: shared control plane {}, reset in {:.2}s: {} objects deleted in {} passes",
                        slot.dir.display(),
                        report.took.as_secs_f64(),
                        report.deleted,
                        report.passes
                    );
                    // What the API server made itself cannot be put back by deleting.
                    (!report.baseline_changed.is_empty()).then(|| {
                        format!(
                            "an earlier test changed the API server's own objects: {}",
                            report.baseline_changed.join(", ")
                        )
                    })
                }
                // One test's leftovers must not fail every later test of the slot.
                Err(e) => Some(format!("the reset failed: {e:#}")),
            };
            if let Some(why) = afresh {
                eprintln!("muster-harness: {why}; starting the slot afresh");
                slot.note_restart(&why);
                slot = crate::shared::Slot::start_afresh(slot_dir, opts.start_timeout).await?;
                fs::copy(&slot.kubeconfig, &kubeconfig)
                    .with_context(|| format!("copying {}", slot.kubeconfig.display()))?;
                client = client_from_kubeconfig(&kubeconfig).await?;
            }
        }
        Ok(Self {
            dir,
            remove_dir: !keep_data(),
            bins,
            procs: Vec::new(),
            detached: false,
            lifetime: opts.lifetime,
            apiserver_port: slot.apiserver_port,
            etcd_port: slot.etcd_port,
            scheduler_port: None,
            kubeconfig,
            client,
            startup: t0.elapsed(),
            phases: StartPhases {
                pki: Duration::ZERO,
                etcd: Duration::ZERO,
                apiserver: t0.elapsed(),
            },
            shared: Some(slot),
        })
    }

    async fn start_own(opts: ControlPlaneOptions) -> Result<Self> {
        let t0 = Instant::now();
        let bins = ensure_control_plane_binaries()?;
        let (dir, remove_dir) = match &opts.dir {
            Some(d) => (d.clone(), false),
            None => (
                std::env::temp_dir().join(format!(
                    "muster-e2e-{}-{}",
                    std::process::id(),
                    random_string(6)
                )),
                !keep_data(),
            ),
        };
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let dir = dir.canonicalize()?;
        let mut guard = StartGuard {
            dir: dir.clone(),
            remove_dir,
            procs: Vec::new(),
        };
        let deadline = Instant::now() + opts.start_timeout;

        // --- PKI, token, kubeconfig
        let pki = Pki::generate(&dir.join("pki"))?;
        let token = random_string(32);
        let tokens = dir.join("pki/tokens.csv");
        fs::write(&tokens, format!("{token},admin,admin,\"system:masters\"\n"))?;
        let etcd_port = free_port()?;
        let etcd_peer_port = free_port()?;
        let apiserver_port = free_port()?;
        let kubeconfig = dir.join("kubeconfig");
        write_kubeconfig(&kubeconfig, apiserver_port, &pki.ca_cert, &token)?;
        let pki_ready = t0.elapsed();

        // --- etcd
        let etcd_client = format!("http://127.0.0.1:{etcd_port}");
        let etcd_peer = format!("http://127.0.0.1:{etcd_peer_port}");
        let mut cmd = Command::new(&bins.etcd);
        cmd.arg("--name=default")
            .arg(format!("--data-dir={}", dir.join("etcd-data").display()))
            .arg(format!("--listen-client-urls={etcd_client}"))
            .arg(format!("--advertise-client-urls={etcd_client}"))
            .arg(format!("--listen-peer-urls={etcd_peer}"))
            .arg(format!("--initial-advertise-peer-urls={etcd_peer}"))
            .arg(format!("--initial-cluster=default={etcd_peer}"))
            .arg("--unsafe-no-fsync=true")
            .arg("--quota-backend-bytes=8589934592")
            .arg("--log-level=warn");
        let etcd = ManagedProcess::spawn("etcd", cmd, &dir.join("etcd.log"), opts.lifetime)?;
        guard.procs.push(etcd);
        wait_http_ok(
            "etcd",
            guard.procs.last_mut().unwrap(),
            etcd_port,
            "/health",
            deadline,
        )
        .await?;
        let etcd_ready = t0.elapsed();

        // --- kube-apiserver
        let mut cmd = Command::new(&bins.kube_apiserver);
        cmd.arg(format!("--etcd-servers={etcd_client}"))
            .arg("--bind-address=127.0.0.1")
            .arg("--advertise-address=127.0.0.1")
            .arg(format!("--secure-port={apiserver_port}"))
            .arg(format!("--cert-dir={}", dir.join("pki").display()))
            .arg(format!("--tls-cert-file={}", pki.serving_cert.display()))
            .arg(format!(
                "--tls-private-key-file={}",
                pki.serving_key.display()
            ))
            .arg(format!("--client-ca-file={}", pki.ca_cert.display()))
            .arg("--service-cluster-ip-range=10.0.0.0/24")
            .arg("--service-account-issuer=https://kubernetes.default.svc.cluster.local")
            .arg(format!(
                "--service-account-key-file={}",
                pki.sa_pub.display()
            ))
            .arg(format!(
                "--service-account-signing-key-file={}",
                pki.sa_key.display()
            ))
            .arg(format!("--token-auth-file={}", tokens.display()))
            .arg("--authorization-mode=RBAC")
            .arg("--disable-admission-plugins=ServiceAccount,TaintNodesByCondition")
            .arg("--endpoint-reconciler-type=none")
            .arg("--enable-priority-and-fairness=false")
            .arg("--max-requests-inflight=0")
            .arg("--max-mutating-requests-inflight=0")
            .arg("--profiling=false")
            .args(&opts.apiserver_args);
        let apiserver = ManagedProcess::spawn(
            "kube-apiserver",
            cmd,
            &dir.join("kube-apiserver.log"),
            opts.lifetime,
        )?;
        guard.procs.push(apiserver);

        let client = client_from_kubeconfig(&kubeconfig).await?;
        loop {
            for p in guard.procs.iter_mut() {
                p.check_running()?;
            }
            let last = match client.request_text(get("/readyz?verbose")?).await {
                Ok(_) => break,
                Err(e) => e.to_string(),
            };
            if Instant::now() > deadline {
                let p = guard.procs.last().unwrap();
                bail!(
                    "kube-apiserver not ready after {:?}: {last}\nlast lines of {}:\n{}",
                    opts.start_timeout,
                    p.log_path().display(),
                    p.log_tail(40)
                );
            }
            tokio::time::sleep(READY_POLL).await;
        }

        let procs = std::mem::take(&mut guard.procs);
        guard.remove_dir = false;
        drop(guard);
        Ok(Self {
            dir,
            remove_dir,
            bins,
            procs,
            detached: false,
            lifetime: opts.lifetime,
            apiserver_port,
            etcd_port,
            scheduler_port: None,
            kubeconfig,
            client,
            startup: t0.elapsed(),
            phases: StartPhases {
                pki: pki_ready,
                etcd: etcd_ready - pki_ready,
                apiserver: t0.elapsed() - etcd_ready,
            },
            shared: None,
        })
    }

    /// Path of an admin kubeconfig (token in group `system:masters`).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// A client with admin rights.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The directory holding data, logs and the kubeconfig.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn apiserver_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.apiserver_port)
    }

    pub fn etcd_port(&self) -> u16 {
        self.etcd_port
    }

    pub fn apiserver_port(&self) -> u16 {
        self.apiserver_port
    }

    /// Whether etcd and kube-apiserver are a slot's shared ones ([`crate::shared`]).
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// How long `start` took (binaries already cached: the control-plane start time).
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// How long each part of `start` took.
    pub fn start_phases(&self) -> StartPhases {
        self.phases
    }

    /// The processes started so far (name, pid, log); on a shared plane only the schedulers.
    pub fn processes(&self) -> impl Iterator<Item = &ManagedProcess> {
        self.procs.iter()
    }

    /// SIGSTOP to the first kube-scheduler this test started: it schedules nothing (its
    /// back-off timers run on) until the guard thaws it.
    pub fn freeze_scheduler(&self) -> Result<crate::process::Frozen> {
        let scheduler = self
            .procs
            .iter()
            .find(|p| p.name() == "kube-scheduler")
            .context("no kube-scheduler was started")?;
        crate::process::freeze(scheduler.pid(), "kube-scheduler")
    }

    /// Starts the stock kube-scheduler from a KubeSchedulerConfiguration (rewritten for this
    /// cluster: kubeconfig, no leader election, high qps, extender URL) and waits for `/readyz`.
    /// May be called again for a second scheduler beside the first (another profile's
    /// `schedulerName`): the first is `kube-scheduler` (its config, log and certificates under
    /// that name), the next `kube-scheduler-2` and so on.
    /// In a control run ([`crate::cluster::CONTROL_RUN_ENV`]) every scheduler started here —
    /// by [`crate::Cluster`], by `muster-local`, by a test — runs without extenders.
    pub async fn start_scheduler(&mut self, mut opts: SchedulerOptions) -> Result<()> {
        if crate::cluster::control_run_requested() {
            opts.without_extenders = true;
            eprintln!(
                "muster-harness: CONTROL RUN ({}): kube-scheduler starts without extenders; \
                 muster runs but is never consulted",
                crate::cluster::CONTROL_RUN_ENV
            );
        }
        let source = match &opts.config {
            Some(p) => p.clone(),
            None => default_scheduler_config()?,
        };
        let text = fs::read_to_string(&source)
            .with_context(|| format!("reading scheduler config {}", source.display()))?;
        let mut rendered = render_scheduler_config(
            &text,
            &self.kubeconfig,
            opts.extender_base_url.as_deref(),
            opts.qps,
            opts.burst,
        )
        .with_context(|| format!("in {}", source.display()))?;
        if let Some(tls) = &opts.extender_tls {
            apply_extender_tls(&mut rendered, tls);
        }
        if opts.without_extenders {
            remove_extenders(&mut rendered);
        }
        let earlier = self
            .procs
            .iter()
            .filter(|p| p.name().starts_with("kube-scheduler"))
            .count();
        let stem = match earlier {
            0 => "kube-scheduler".to_string(),
            n => format!("kube-scheduler-{}", n + 1),
        };
        let config_path = self.dir.join(format!("{stem}-config.yaml"));
        // JSON is YAML: the scheduler reads it as is.
        fs::write(&config_path, serde_json::to_string_pretty(&rendered)?)?;
        let port = free_port()?;
        let mut cmd = Command::new(&self.bins.kube_scheduler);
        cmd.arg(format!("--config={}", config_path.display()))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={port}"))
            .arg(format!(
                "--cert-dir={}",
                self.dir.join("pki").join(&stem).display()
            ))
            .args(&opts.args);
        let lifetime = self.lifetime;
        let mut p =
            ManagedProcess::spawn(&stem, cmd, &self.dir.join(format!("{stem}.log")), lifetime)?;
        let deadline = Instant::now() + opts.start_timeout;
        let probe = insecure_client(port)?;
        loop {
            p.check_running()?;
            let last = match probe.request_text(get("/readyz")?).await {
                Ok(_) => break,
                Err(e) => e.to_string(),
            };
            if Instant::now() > deadline {
                bail!(
                    "kube-scheduler not ready after {:?}: {last}\nlast lines of {}:\n{}",
                    opts.start_timeout,
                    p.log_path().display(),
                    p.log_tail(40)
                );
            }
            tokio::time::sleep(READY_POLL).await;
        }
        if earlier == 0 {
            self.scheduler_port = Some(port);
        }
        self.procs.push(p);
        Ok(())
    }

    /// Starts the controllers a real cluster has beside its control plane: kube-controller-manager
    /// (Job, ReplicaSet, garbage collector, ResourceClaim, namespace, node lifecycle …, all its
    /// default controllers) and KWOK's controller playing the kubelets of every node, with the
    /// stages of tests/cluster/kwok-stages.yaml (bound pods turn Running; they finish when asked;
    /// a deleted pod goes once no finalizer holds it) and each node's Lease renewed as its
    /// heartbeat. Only on a plane of the test's own: two controller managers on one API server
    /// would both act on every Job.
    pub async fn start_controllers(&mut self) -> Result<()> {
        if self.shared.is_some() {
            bail!(
                "controllers act on the whole API server: start the cluster with its own control \
                 plane (ControlPlaneOptions::own, ClusterOptions::with_controllers sets it)"
            );
        }
        let bins = crate::paths::ensure_controller_binaries()?;
        let lifetime = self.lifetime;
        let deadline = Instant::now() + Duration::from_secs(60);

        let port = free_port()?;
        let mut cmd = Command::new(&bins.kube_controller_manager);
        cmd.arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .arg("--leader-elect=false")
            .arg("--controllers=*")
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={port}"))
            .arg(format!(
                "--cert-dir={}",
                self.dir
                    .join("pki")
                    .join("kube-controller-manager")
                    .display()
            ))
            // The harness's clients create pods in bursts: the default 20/30 would pace the Job
            // controller's own creations behind them.
            .arg("--kube-api-qps=100")
            .arg("--kube-api-burst=200");
        let mut kcm = ManagedProcess::spawn(
            "kube-controller-manager",
            cmd,
            &self.dir.join("kube-controller-manager.log"),
            lifetime,
        )?;
        let probe = insecure_client(port)?;
        loop {
            kcm.check_running()?;
            let last = match probe.request_text(get("/healthz")?).await {
                Ok(_) => break,
                Err(e) => e.to_string(),
            };
            if Instant::now() > deadline {
                bail!(
                    "kube-controller-manager not healthy after 60 s: {last}\nlast lines of {}:\n{}",
                    kcm.log_path().display(),
                    kcm.log_tail(40)
                );
            }
            tokio::time::sleep(READY_POLL).await;
        }
        self.procs.push(kcm);

        let port = free_port()?;
        let mut cmd = Command::new(&bins.kwok);
        cmd.arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .arg(format!(
                "--config={}",
                repo_root().join("tests/cluster/kwok-stages.yaml").display()
            ))
            .arg("--manage-all-nodes=true")
            .arg("--node-lease-duration-seconds=40")
            .arg(format!("--server-address=127.0.0.1:{port}"));
        let mut kwok = ManagedProcess::spawn("kwok", cmd, &self.dir.join("kwok.log"), lifetime)?;
        wait_http_ok("kwok", &mut kwok, port, "/healthz", deadline).await?;
        self.procs.push(kwok);
        Ok(())
    }

    /// Starts JobSet's controller and webhooks beside the controllers ([`crate::jobset`]): its
    /// CRD, its process (stopped with the others), its webhook configurations on 127.0.0.1. Only
    /// on a plane of the test's own, as [`start_controllers`](Self::start_controllers), which it
    /// needs (JobSet creates Jobs; the Job controller creates their pods).
    pub async fn start_jobset(&mut self) -> Result<()> {
        if self.shared.is_some() {
            bail!(
                "JobSet's webhooks and CRD act on the whole API server: start the cluster with \
                 its own control plane (ClusterOptions::with_jobset sets it)"
            );
        }
        let p =
            crate::jobset::start(&self.client, &self.kubeconfig, &self.dir, self.lifetime).await?;
        self.procs.push(p);
        Ok(())
    }

    /// Starts Kueue's controller manager and webhooks beside the controllers ([`crate::kueue`]):
    /// its CRDs, its process (stopped with the others), its webhook configurations on 127.0.0.1.
    /// Only on a plane of the test's own, as [`start_controllers`](Self::start_controllers): its
    /// pod webhook acts on every managed namespace of the API server.
    pub async fn start_kueue(&mut self) -> Result<()> {
        if self.shared.is_some() {
            bail!(
                "Kueue's webhooks and CRDs act on the whole API server: start the cluster with \
                 its own control plane (ClusterOptions::with_kueue sets it)"
            );
        }
        let p =
            crate::kueue::start(&self.client, &self.kubeconfig, &self.dir, self.lifetime).await?;
        self.procs.push(p);
        Ok(())
    }

    /// Starts Kubeflow Trainer's controller manager and webhooks beside the controllers and
    /// JobSet's ([`crate::trainer`]): its CRDs and scheduler-plugins' PodGroup CRD, its process
    /// (stopped with the others), its webhook configuration on 127.0.0.1. Only on a plane of the
    /// test's own, after [`start_jobset`](Self::start_jobset): it runs TrainJobs as JobSets.
    pub async fn start_trainer(&mut self) -> Result<()> {
        if self.shared.is_some() {
            bail!(
                "Trainer's webhooks and CRDs act on the whole API server: start the cluster with \
                 its own control plane (ClusterOptions::with_trainer sets it)"
            );
        }
        let p =
            crate::trainer::start(&self.client, &self.kubeconfig, &self.dir, self.lifetime).await?;
        self.procs.push(p);
        Ok(())
    }

    /// Starts Karpenter's KWOK cloud provider (`bin`, built by tests/cluster/build-karpenter.sh)
    /// against this control plane, as a local process: leader election off (it would look for
    /// its Lease in a namespace it is deployed in), the `CapacityBuffer` feature gate on (it acts
    /// on `autoscaling.x-k8s.io` CapacityBuffers, the way muster asks it for a gang's nodes), its
    /// metrics and health probes on free ports. It launches the nodes its NodePools allow as Node
    /// objects that KWOK's controller ([`start_controllers`](Self::start_controllers), started
    /// first) then plays. Its CRDs must be installed before ([`crate::karpenter`]).
    pub async fn start_karpenter(&mut self, bin: &Path) -> Result<()> {
        if self.shared.is_some() {
            bail!("Karpenter acts on every node and pod: start it on a control plane of its own");
        }
        let metrics = free_port()?;
        let health = free_port()?;
        let mut cmd = Command::new(bin);
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .env("DISABLE_LEADER_ELECTION", "true")
            .env("FEATURE_GATES", "CapacityBuffer=true")
            .env("METRICS_PORT", metrics.to_string())
            .env("HEALTH_PROBE_PORT", health.to_string())
            .env("SYSTEM_NAMESPACE", "kube-system")
            .env("LOG_LEVEL", "debug")
            // One decision per second at most for a burst of pods: the defaults (1 s idle,
            // 10 s max) are a cloud's, where a node takes a minute to come.
            .env("BATCH_IDLE_DURATION", "1s")
            .env("BATCH_MAX_DURATION", "3s");
        let mut p = ManagedProcess::spawn(
            "karpenter",
            cmd,
            &self.dir.join("karpenter.log"),
            self.lifetime,
        )?;
        let deadline = Instant::now() + Duration::from_secs(60);
        wait_http_ok("karpenter", &mut p, health, "/readyz", deadline).await?;
        self.procs.push(p);
        Ok(())
    }

    /// Kills kube-apiserver (SIGKILL, as in a crash): every client's connection drops and new
    /// ones are refused until [`start_apiserver_again`](Self::start_apiserver_again). etcd keeps
    /// the data. Returns its command line.
    pub fn kill_apiserver(&mut self) -> Result<StoppedApiserver> {
        if let Some(slot) = &self.shared {
            bail!(
                "kube-apiserver is shared by the tests of {} (tests/e2e-run): a test that kills \
                 it starts with ControlPlaneOptions::own (ClusterOptions::own_control_plane)",
                slot.dir.display()
            );
        }
        let i = self
            .procs
            .iter()
            .position(|p| p.name() == "kube-apiserver")
            .context("kube-apiserver is not running")?;
        let pid = self.procs[i].pid();
        // The exact command line it was started with, so the restart is the same server.
        let raw = fs::read(format!("/proc/{pid}/cmdline"))
            .with_context(|| format!("reading the command line of kube-apiserver ({pid})"))?;
        let argv: Vec<String> = raw
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let log = self.procs[i].log_path().to_path_buf();
        self.procs.remove(i).kill();
        Ok(StoppedApiserver {
            argv,
            log,
            index: i,
        })
    }

    /// Starts kube-apiserver again, exactly as before [`kill_apiserver`](Self::kill_apiserver)
    /// (same port, certificates and etcd), and waits for its `/readyz`.
    pub async fn start_apiserver_again(&mut self, stopped: StoppedApiserver) -> Result<()> {
        let Some((program, args)) = stopped.argv.split_first() else {
            bail!("kube-apiserver had an empty command line");
        };
        let mut cmd = Command::new(program);
        cmd.args(args);
        let p = ManagedProcess::spawn("kube-apiserver", cmd, &stopped.log, self.lifetime)?;
        // Same place in the list: processes stop in reverse start order.
        self.procs.insert(stopped.index.min(self.procs.len()), p);
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            for p in self.procs.iter_mut() {
                p.check_running()?;
            }
            let last = match self.client.request_text(get("/readyz")?).await {
                Ok(_) => return Ok(()),
                Err(e) => e.to_string(),
            };
            if Instant::now() > deadline {
                bail!("kube-apiserver not ready again after 120s: {last}");
            }
            tokio::time::sleep(READY_POLL).await;
        }
    }

    /// Leaves every process running and the directory in place (for `muster-local up`); writes
    /// `<dir>/pids/<name>.pid`. Returns the directory.
    pub fn detach(mut self) -> Result<PathBuf> {
        let pids = self.dir.join("pids");
        fs::create_dir_all(&pids)?;
        for p in std::mem::take(&mut self.procs) {
            let name = p.name().to_string();
            let pid = p.detach();
            fs::write(pids.join(format!("{name}.pid")), format!("{pid}\n"))?;
        }
        self.detached = true;
        self.remove_dir = false;
        Ok(self.dir.clone())
    }

    /// The last lines of every process log (for failure messages).
    pub fn log_tails(&self, n: usize) -> String {
        let shared = self.shared.iter().map(|slot| {
            let log = slot.dir.join("kube-apiserver.log");
            format!(
                "--- kube-apiserver, shared ({})\n{}",
                log.display(),
                crate::process::tail(&log, n)
            )
        });
        shared
            .chain(self.procs.iter().map(|p| {
                format!(
                    "--- {} ({})\n{}",
                    p.name(),
                    p.log_path().display(),
                    p.log_tail(n)
                )
            }))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if self.detached {
            return;
        }
        // Reverse start order: scheduler, apiserver, etcd.
        while let Some(mut p) = self.procs.pop() {
            p.kill();
        }
        if self.remove_dir {
            let _ = fs::remove_dir_all(&self.dir);
        } else {
            eprintln!(
                "muster-harness: kept control-plane data in {}",
                self.dir.display()
            );
        }
    }
}

/// The scheduler config used when none is given.
pub fn default_scheduler_config() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("MUSTER_SCHEDULER_CONFIG") {
        return Ok(PathBuf::from(p));
    }
    let p = repo_root()
        .join("scheduler-config")
        .join("muster-as-default-scheduler.yaml");
    if !p.exists() {
        bail!("scheduler config {} is missing", p.display());
    }
    Ok(p)
}

/// Rewrites a KubeSchedulerConfiguration for a local cluster. Pure; unit-tested.
pub fn render_scheduler_config(
    yaml: &str,
    kubeconfig: &Path,
    extender_base_url: Option<&str>,
    qps: f64,
    burst: u32,
) -> Result<Value> {
    let mut v: Value = serde_saphyr::from_str(yaml).context("parsing YAML")?;
    let obj = v
        .as_object_mut()
        .ok_or_else(|| anyhow!("scheduler config is not a mapping"))?;
    match obj.get("kind").and_then(Value::as_str) {
        Some("KubeSchedulerConfiguration") => {}
        other => bail!("kind is {other:?}, expected KubeSchedulerConfiguration"),
    }
    let cc = obj
        .entry("clientConnection")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| anyhow!("clientConnection is not a mapping"))?;
    cc.insert("kubeconfig".into(), json!(kubeconfig.display().to_string()));
    cc.insert("qps".into(), json!(qps));
    cc.insert("burst".into(), json!(burst));
    let le = obj
        .entry("leaderElection")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| anyhow!("leaderElection is not a mapping"))?;
    le.insert("leaderElect".into(), json!(false));
    if let Some(base) = extender_base_url {
        let base = base.trim_end_matches('/');
        if let Some(exts) = obj.get_mut("extenders").and_then(Value::as_array_mut) {
            for e in exts {
                let old = e
                    .get("urlPrefix")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let path = url_path(&old);
                e["urlPrefix"] = json!(format!("{base}{path}"));
                if base.starts_with("http://") {
                    e["enableHTTPS"] = json!(false);
                    // The shipped files name certificate files of a real install; kube-scheduler
                    // loads them even for http:// and would not start without them.
                    if let Some(e) = e.as_object_mut() {
                        e.remove("tlsConfig");
                    }
                } else if base.starts_with("https://") {
                    e["enableHTTPS"] = json!(true);
                }
            }
        }
    }
    Ok(v)
}

/// Sets `enableHTTPS: true` and `tlsConfig` (`caFile`, `certFile`, `keyFile`, whichever are
/// given; other `tlsConfig` keys are dropped) on every extender. Pure; unit-tested.
pub fn apply_extender_tls(config: &mut Value, tls: &ExtenderTls) {
    let Some(exts) = config.get_mut("extenders").and_then(Value::as_array_mut) else {
        return;
    };
    let mut tc = serde_json::Map::new();
    for (k, v) in [
        ("caFile", &tls.ca_file),
        ("certFile", &tls.cert_file),
        ("keyFile", &tls.key_file),
    ] {
        if let Some(p) = v {
            tc.insert(k.into(), json!(p.display().to_string()));
        }
    }
    for e in exts {
        if let Some(url) = e.get("urlPrefix").and_then(Value::as_str) {
            if let Some(rest) = url.strip_prefix("http://") {
                e["urlPrefix"] = json!(format!("https://{rest}"));
            }
        }
        e["enableHTTPS"] = json!(true);
        e["tlsConfig"] = Value::Object(tc.clone());
    }
}

/// Removes `extenders:`: kube-scheduler then schedules every pod on its own, as if muster were
/// not installed. Pure; unit-tested.
pub fn remove_extenders(config: &mut Value) {
    if let Some(config) = config.as_object_mut() {
        config.remove("extenders");
    }
}

/// The path part of an absolute URL (`http://h:1/a/b` → `/a/b`, `http://h:1` → ``).
fn url_path(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.find('/').map_or("", |i| &rest[i..])
}

/// A client from a kubeconfig file.
pub async fn client_from_kubeconfig(path: &Path) -> Result<Client> {
    let kc = Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("loading {}", path.display()))?;
    Client::try_from(cfg).context("building a kube client")
}

fn insecure_client(port: u16) -> Result<Client> {
    let mut cfg = kube::Config::new(format!("https://127.0.0.1:{port}").parse()?);
    cfg.accept_invalid_certs = true;
    cfg.connect_timeout = Some(Duration::from_secs(2));
    cfg.read_timeout = Some(Duration::from_secs(5));
    Client::try_from(cfg).context("building a probe client")
}

/// How often a starting process's readiness endpoint is asked. Every test starts a kube-scheduler
/// (ready about 0.3 s after it is spawned) and many their own kube-apiserver: at 200 ms each start
/// waited 100 ms on average past readiness, 271 times a suite; a local GET costs far less.
const READY_POLL: Duration = Duration::from_millis(50);

fn get(path: &str) -> Result<http::Request<Vec<u8>>> {
    Ok(http::Request::get(path).body(Vec::new())?)
}

/// Polls `GET http://127.0.0.1:<port><path>` until 200, failing when `p` exits or at `deadline`.
pub(crate) async fn wait_http_ok(
    what: &str,
    p: &mut ManagedProcess,
    port: u16,
    path: &str,
    deadline: Instant,
) -> Result<()> {
    loop {
        p.check_running()?;
        let last = match http_get(port, path, Duration::from_secs(2)).await {
            Ok((200, _)) => return Ok(()),
            Ok((code, body)) => format!("HTTP {code}: {}", body.trim()),
            Err(e) => e.to_string(),
        };
        if Instant::now() > deadline {
            bail!(
                "{what} not ready on 127.0.0.1:{port}{path}: {last}\nlast lines of {}:\n{}",
                p.log_path().display(),
                p.log_tail(40)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn write_kubeconfig(path: &Path, port: u16, ca: &Path, token: &str) -> Result<()> {
    let text = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: muster-local
  cluster:
    server: https://127.0.0.1:{port}
    certificate-authority: {ca}
users:
- name: admin
  user:
    token: {token}
contexts:
- name: muster-local
  context:
    cluster: muster-local
    user: admin
current-context: muster-local
",
        ca = ca.display()
    );
    fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Certificates and keys made with the `openssl` command.
struct Pki {
    ca_cert: PathBuf,
    serving_cert: PathBuf,
    serving_key: PathBuf,
    sa_key: PathBuf,
    sa_pub: PathBuf,
}

impl Pki {
    fn generate(dir: &Path) -> Result<Self> {
        fs::create_dir_all(dir)?;
        let p = |n: &str| dir.join(n);
        let s = |n: &str| dir.join(n).display().to_string();
        openssl(&[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            &s("sa.key"),
        ])?;
        openssl(&["ec", "-in", &s("sa.key"), "-pubout", "-out", &s("sa.pub")])?;
        // The same throw-away CA code that makes muster's TLS certificates; the serving
        // certificate's SAN (IP:127.0.0.1) is all a loopback apiserver needs.
        let ca = Ca::generate(dir, "ca")?;
        let serving = ca.issue("apiserver", Usage::Server)?;
        Ok(Self {
            ca_cert: ca.cert,
            serving_cert: serving.cert,
            serving_key: serving.key,
            sa_key: p("sa.key"),
            sa_pub: p("sa.pub"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_scheduler_config() {
        let yaml = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
extenders:
  - urlPrefix: http://127.0.0.1:8888/muster
    filterVerb: filter
    bindVerb: bind
    nodeCacheCapable: true
";
        let v = render_scheduler_config(
            yaml,
            Path::new("/tmp/kc"),
            Some("http://127.0.0.1:4242"),
            100.0,
            200,
        )
        .unwrap();
        assert_eq!(v["clientConnection"]["kubeconfig"], "/tmp/kc");
        assert_eq!(v["clientConnection"]["burst"], 200);
        assert_eq!(v["leaderElection"]["leaderElect"], false);
        assert_eq!(
            v["extenders"][0]["urlPrefix"],
            "http://127.0.0.1:4242/muster"
        );
        assert_eq!(v["extenders"][0]["nodeCacheCapable"], true);
        assert_eq!(url_path("http://127.0.0.1:8888"), "");

        // The shipped files' tlsConfig is dropped for a plain-HTTP muster.
        let shipped = "kind: KubeSchedulerConfiguration
extenders:
  - urlPrefix: https://muster.muster-system.svc:8888
    enableHTTPS: true
    tlsConfig:
      caFile: /etc/muster/client/ca.crt
";
        let v =
            render_scheduler_config(shipped, Path::new("/k"), Some("http://h:1"), 1.0, 1).unwrap();
        assert_eq!(v["extenders"][0]["enableHTTPS"], false);
        assert!(v["extenders"][0].get("tlsConfig").is_none(), "{v}");
    }

    #[test]
    fn sets_extender_tls() {
        let yaml = "kind: KubeSchedulerConfiguration
extenders:
  - urlPrefix: http://muster.muster-system.svc:8888
    enableHTTPS: false
    tlsConfig:
      insecure: true
";
        let mut v = render_scheduler_config(
            yaml,
            Path::new("/k"),
            Some("https://127.0.0.1:4243"),
            1.0,
            1,
        )
        .unwrap();
        assert_eq!(v["extenders"][0]["urlPrefix"], "https://127.0.0.1:4243");
        assert_eq!(v["extenders"][0]["enableHTTPS"], true);
        apply_extender_tls(
            &mut v,
            &ExtenderTls {
                ca_file: Some("/p/ca.crt".into()),
                cert_file: Some("/p/client.crt".into()),
                key_file: Some("/p/client.key".into()),
            },
        );
        assert_eq!(
            v["extenders"][0]["tlsConfig"],
            json!({"caFile": "/p/ca.crt", "certFile": "/p/client.crt", "keyFile": "/p/client.key"})
        );
        assert_eq!(v["extenders"][0]["enableHTTPS"], true);
        // Without a base URL the scheme is switched too.
        let mut v = render_scheduler_config(yaml, Path::new("/k"), None, 1.0, 1).unwrap();
        apply_extender_tls(&mut v, &ExtenderTls::default());
        assert_eq!(
            v["extenders"][0]["urlPrefix"],
            "https://muster.muster-system.svc:8888"
        );
        assert_eq!(v["extenders"][0]["tlsConfig"], json!({}));
    }

    #[test]
    fn second_scheduler_config_renders() {
        let p = scheduler_config_file("muster-second-scheduler.yaml");
        let text = fs::read_to_string(&p).unwrap();
        let v = render_scheduler_config(&text, Path::new("/k"), Some("http://127.0.0.1:1"), 1.0, 1)
            .unwrap();
        assert_eq!(v["profiles"][0]["schedulerName"], "muster-scheduler");
        assert_eq!(v["leaderElection"]["leaderElect"], false);
        assert_eq!(v["clientConnection"]["kubeconfig"], "/k");
    }

    #[test]
    fn control_run_config_has_no_extenders_and_keeps_the_rest() {
        let p = scheduler_config_file("muster-as-default-scheduler.yaml");
        let text = fs::read_to_string(&p).unwrap();
        let mut v =
            render_scheduler_config(&text, Path::new("/k"), Some("http://127.0.0.1:1"), 1.0, 1)
                .unwrap();
        assert!(v["extenders"].is_array());
        remove_extenders(&mut v);
        assert!(v.get("extenders").is_none(), "{v}");
        assert_eq!(v["profiles"][0]["schedulerName"], "default-scheduler");
        assert_eq!(v["clientConnection"]["kubeconfig"], "/k");
    }

    #[test]
    fn rejects_other_kinds() {
        let err =
            render_scheduler_config("kind: Pod\n", Path::new("/k"), None, 1.0, 1).unwrap_err();
        assert!(err.to_string().contains("KubeSchedulerConfiguration"));
    }
}

#[cfg(test)]
mod tls_tests {
    #[tokio::test]
    async fn a_tls_client_can_be_built() {
        super::insecure_client(1).expect("kube client with rustls");
    }
}
