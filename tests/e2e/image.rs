//! End-to-end: the container image built from `deploy/Dockerfile` (by `tests/image/build`, with
//! podman, no Docker daemon), run from its own root filesystem as the image's user against a real
//! etcd + kube-apiserver + kube-scheduler.
//!
//! `podman run` does not work on the CI machine (crun: cgroups v1 "hybrid mode"), so the image is
//! exported to a directory and its entrypoint started with `chroot --userspec=<image user>`: the
//! same files, user and arguments a container runtime would use, without namespaces or cgroups.
//! muster runs with the flags of `deploy/deployment.yaml` (self-managed certificates, verbs over
//! HTTPS on one port, probes and metrics over HTTP on another), so this shows that the static
//! binary does all of that with nothing but itself (no libc, no shell, no CA bundle) as the
//! image's user: it turns ready, kube-scheduler places the README's seed gang through it with
//! the client certificate from muster's Secret, and it stops cleanly on SIGTERM.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use k8s_openapi::api::core::v1::Secret;
use muster_harness::k8s::{self, KeyScheme};
use muster_harness::paths::repo_root;
use muster_harness::process::{free_port, http_get, signal, tail};
use muster_harness::tls::ExtenderTls;
use muster_harness::{
    wait_for, ControlPlane, ControlPlaneOptions, NodeShape, PodBuilder, Progress, SchedulerOptions,
    Timer,
};

/// The image's binary is small; a much larger one means something else got into the image.
const MAX_IMAGE_BYTES: u64 = 64 << 20;
const READY: Duration = Duration::from_secs(60);
const PLACE: Duration = Duration::from_secs(60);
/// muster's own shutdown is immediate once in-flight requests finish.
const STOP: Duration = Duration::from_secs(15);
/// What deploy/deployment.yaml passes.
const NS: &str = "muster-system";
const CERTS_DIR: &str = "/var/run/muster/certs";
const CLIENT_SECRET: &str = "muster-scheduler-client-cert";
/// Linux's SIGTERM (the harness's `signal` takes the raw number).
const SIGTERM: i32 = 15;

/// `key=value` lines of `<out>/facts` written by `tests/image/build`.
fn read_facts(out: &Path) -> Result<BTreeMap<String, String>> {
    let text = fs::read_to_string(out.join("facts"))
        .with_context(|| format!("reading {}/facts", out.display()))?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect())
}

/// Set by `tests/run` after its image stage ran `tests/image/build` into this directory: the
/// test reads that image instead of building it a second time.
const PREBUILT_IMAGE_ENV: &str = "MUSTER_E2E_PREBUILT_IMAGE";

fn build_image(out: &Path) -> Result<BTreeMap<String, String>> {
    if let Some(dir) = std::env::var_os(PREBUILT_IMAGE_ENV).filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        ensure!(
            dir == out,
            "{PREBUILT_IMAGE_ENV}={} but this test runs the image in {}",
            dir.display(),
            out.display()
        );
        eprintln!(
            "image: built by tests/run's image stage into {}",
            dir.display()
        );
        return read_facts(out);
    }
    let script = repo_root().join("tests/image/build");
    let status = Command::new(&script)
        .arg(out)
        .stdin(Stdio::null())
        .status()
        .with_context(|| format!("running {}", script.display()))?;
    ensure!(status.success(), "{} failed: {status}", script.display());
    read_facts(out)
}

/// A copy of the harness's kubeconfig inside the root filesystem, with the CA file beside it,
/// readable by the image's user (the chroot cannot see paths outside it).
fn kubeconfig_inside(cp: &ControlPlane, rootfs: &Path) -> Result<String> {
    let dir = rootfs.join("etc/muster");
    fs::create_dir_all(&dir)?;
    let text = fs::read_to_string(cp.kubeconfig_path())?;
    let ca_line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("certificate-authority: "))
        .context("harness kubeconfig names no certificate-authority file")?
        .to_string();
    fs::copy(&ca_line, dir.join("ca.crt"))?;
    fs::write(
        dir.join("kubeconfig"),
        text.replace(&ca_line, "/etc/muster/ca.crt"),
    )?;
    use std::os::unix::fs::PermissionsExt;
    for f in ["ca.crt", "kubeconfig"] {
        fs::set_permissions(dir.join(f), fs::Permissions::from_mode(0o644))?;
    }
    Ok("/etc/muster/kubeconfig".into())
}

/// `chroot` from this process's PATH (the child's environment is cleared, so it cannot look).
fn chroot_path() -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("chroot"))
        .find(|p| p.is_file())
        .context("no chroot command on PATH (coreutils)")
}

/// Waits for the child to exit; `None` if it is still running at the deadline.
fn wait_exit(child: &mut Child, timeout: Duration) -> Result<Option<ExitStatus>> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(s) = child.try_wait()? {
            return Ok(Some(s));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kills the chrooted muster if the test fails half-way.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn image_runs_as_its_user_places_the_seed_gang_and_stops_on_sigterm() -> Result<()> {
    let _t = Timer(
        "image_runs_as_its_user_places_the_seed_gang_and_stops_on_sigterm",
        Instant::now(),
    );
    let out: PathBuf = repo_root().join("target/image");
    let facts = build_image(&out)?;
    eprintln!("image facts: {facts:?}");
    let fact = |k: &str| facts.get(k).cloned().unwrap_or_default();
    ensure!(fact("user") == "65532:65532", "image user {}", fact("user"));
    ensure!(fact("layers") == "1", "image layers {}", fact("layers"));
    ensure!(
        fact("files").split_whitespace().collect::<Vec<_>>() == ["./muster"],
        "the image should hold nothing but /muster, has {}",
        fact("files")
    );
    let size: u64 = fact("size_bytes").parse().context("size_bytes")?;
    ensure!(
        size <= MAX_IMAGE_BYTES,
        "image is {size} bytes, more than {MAX_IMAGE_BYTES}"
    );
    let entrypoint: Vec<String> =
        serde_json::from_str(&fact("entrypoint")).context("entrypoint is not a JSON list")?;
    ensure!(!entrypoint.is_empty(), "image declares no entrypoint");
    let rootfs = out.join("rootfs");

    let mut cp = ControlPlane::start(ControlPlaneOptions::default()).await?;
    let kubeconfig = kubeconfig_inside(&cp, &rootfs)?;
    let client = cp.client();
    // The shipped install: gang members marked and gated by the policy of deploy/.
    muster_harness::policy::install_unless_control_run(&client).await?;
    k8s::create_namespace(&client, NS).await?;
    let (port, ops_port) = (free_port()?, free_port()?);
    let log_path = cp.dir().join("muster-image.log");
    let log = fs::File::create(&log_path)?;
    let (user, group) = fact("user")
        .split_once(':')
        .map(|(u, g)| (u.to_string(), g.to_string()))
        .context("user is not uid:gid")?;
    // The pod's writable emptyDir for the certificates (the image's root is read-only there).
    let certs_dir = rootfs.join(CERTS_DIR.trim_start_matches('/'));
    fs::create_dir_all(&certs_dir)?;
    std::os::unix::fs::chown(&certs_dir, Some(user.parse()?), Some(group.parse()?))?;
    let started = Instant::now();
    let child = Command::new(chroot_path()?)
        .arg(format!("--userspec={user}:{group}"))
        .arg(&rootfs)
        .args(&entrypoint)
        .arg(format!("--listen-addr=127.0.0.1:{port}"))
        .arg(format!("--ops-listen-addr=127.0.0.1:{ops_port}"))
        .arg(format!("--kubeconfig={kubeconfig}"))
        .arg("--log-format=json")
        .arg("--self-managed-certs")
        .arg(format!("--certs-namespace={NS}"))
        .arg(format!("--certs-dir={CERTS_DIR}"))
        .arg("--serving-cert-hosts=127.0.0.1")
        // What a container gets: no inherited environment beyond what the test sets.
        .env_clear()
        .env("POD_NAME", "muster-image-e2e")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("starting chroot")?;
    let mut muster = Guard(child);
    let pid = muster.0.id();

    // Ready: pod and node caches synced.
    let logs = log_path.clone();
    let ready_after = wait_for("the image's muster to answer /readyz 200", READY, || {
        let logs = logs.clone();
        let exited = muster.0.try_wait();
        async move {
            if let Ok(Some(s)) = exited {
                bail!("muster exited early ({s}):\n{}", tail(&logs, 30));
            }
            Ok(
                match http_get(ops_port, "/readyz", Duration::from_secs(2)).await {
                    Ok((200, _)) => Progress::Done(started.elapsed()),
                    Ok((code, body)) => Progress::NotYet(format!("HTTP {code}: {}", body.trim())),
                    Err(e) => Progress::NotYet(e.to_string()),
                },
            )
        }
    })
    .await?;
    eprintln!(
        "image: start to ready in {:.2}s (image {size} bytes, {:.1} MiB)",
        ready_after.as_secs_f64(),
        size as f64 / (1024.0 * 1024.0)
    );
    // It runs as the image's user, not as root.
    let status = fs::read_to_string(format!("/proc/{pid}/status"))?;
    let uid_line = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .unwrap_or_default();
    ensure!(
        uid_line.split_whitespace().nth(1) == Some(user.as_str()),
        "muster runs with {uid_line}, expected uid {user}"
    );

    // The README's seed gang, through kube-scheduler (with the client certificate muster put in
    // its Secret) → the image's muster over HTTPS.
    let secrets: kube::Api<Secret> = kube::Api::namespaced(client.clone(), NS);
    let secret = secrets.get(CLIENT_SECRET).await?;
    let client_dir = cp.dir().join("scheduler-client");
    fs::create_dir_all(&client_dir)?;
    for key in ["ca.crt", "tls.crt", "tls.key"] {
        let data = secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .with_context(|| format!("{CLIENT_SECRET} has no {key}"))?;
        fs::write(client_dir.join(key), &data.0)?;
    }
    let so = SchedulerOptions {
        extender_base_url: Some(format!("https://127.0.0.1:{port}")),
        extender_tls: Some(ExtenderTls {
            ca_file: Some(client_dir.join("ca.crt")),
            cert_file: Some(client_dir.join("tls.crt")),
            key_file: Some(client_dir.join("tls.key")),
        }),
        ..SchedulerOptions::default()
    };
    cp.start_scheduler(so).await?;
    k8s::create_namespace(&client, "ml").await?;
    k8s::add_node(&client, "node-1", &NodeShape::cpu("1")).await?;
    k8s::add_node(&client, "node-2", &NodeShape::cpu("1")).await?;
    let names = ["ai-gang-job-master-0", "ai-gang-job-worker-0"];
    for n in names {
        PodBuilder::new("ml", n)
            .cpu("100m")
            .gang(KeyScheme::Muster, "ai-gang-job", 2)
            .create(&client)
            .await?;
    }
    let bound = wait_for("the seed gang to be bound", PLACE, || async {
        let bound = k8s::bound_pods(&client, "ml").await?;
        Ok(if names.iter().all(|n| bound.contains_key(*n)) {
            Progress::Done(bound)
        } else {
            Progress::NotYet(format!("bound: {bound:?}"))
        })
    })
    .await
    .with_context(|| format!("muster log:\n{}", tail(&log_path, 30)))?;
    eprintln!("image: seed gang bound: {bound:?}");
    let (code, metrics) = http_get(ops_port, "/metrics", Duration::from_secs(5)).await?;
    ensure!(code == 200, "/metrics: HTTP {code}");
    ensure!(
        metrics
            .lines()
            .any(|l| l.starts_with("muster_requests_total{") && l.contains("verb=\"bind\"")),
        "the image's muster counted no bind requests"
    );

    // SIGTERM: a clean stop, exit status 0.
    ensure!(signal(pid, SIGTERM), "muster (pid {pid}) is gone");
    let stopped_at = Instant::now();
    let status = wait_exit(&mut muster.0, STOP)?
        .with_context(|| format!("muster still running {STOP:?} after SIGTERM"))?;
    eprintln!(
        "image: stopped {:.2}s after SIGTERM with {status}",
        stopped_at.elapsed().as_secs_f64()
    );
    ensure!(
        status.success(),
        "muster exited with {status} after SIGTERM:\n{}",
        tail(&log_path, 30)
    );
    ensure!(
        fs::read_to_string(&log_path)?.contains("shutting down"),
        "muster did not log its shutdown"
    );
    Ok(())
}
