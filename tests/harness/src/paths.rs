//! Where things are: the repository, the cached control-plane binaries, the muster binary.

use std::fs::{self, File};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use anyhow::{bail, Context, Result};

/// The Kubernetes version whose control plane the harness runs (override: `MUSTER_K8S_VERSION`).
pub const K8S_VERSION: &str = "v1.37.2";

/// The repository root (override: `MUSTER_REPO_ROOT`), found from this crate's manifest dir.
pub fn repo_root() -> PathBuf {
    if let Some(p) = std::env::var_os("MUSTER_REPO_ROOT") {
        return PathBuf::from(p);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// `${MUSTER_CACHE_DIR:-$HOME/.cache/muster}`.
pub fn cache_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("MUSTER_CACHE_DIR") {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    home.join(".cache/muster")
}

pub fn k8s_version() -> String {
    std::env::var("MUSTER_K8S_VERSION").unwrap_or_else(|_| K8S_VERSION.to_string())
}

/// Paths of the stock control-plane binaries.
#[derive(Debug, Clone)]
pub struct ControlPlaneBinaries {
    pub etcd: PathBuf,
    pub kube_apiserver: PathBuf,
    pub kube_scheduler: PathBuf,
}

impl ControlPlaneBinaries {
    pub fn in_dir(bin: &Path) -> Self {
        Self {
            etcd: bin.join("etcd"),
            kube_apiserver: bin.join("kube-apiserver"),
            kube_scheduler: bin.join("kube-scheduler"),
        }
    }

    fn all(&self) -> [&Path; 3] {
        [&self.etcd, &self.kube_apiserver, &self.kube_scheduler]
    }

    fn missing(&self) -> Vec<PathBuf> {
        self.all()
            .into_iter()
            .filter(|p| !is_executable(p))
            .map(Path::to_path_buf)
            .collect()
    }
}

/// The directory holding the cached binaries (override: `MUSTER_K8S_BIN_DIR`).
pub fn control_plane_bin_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("MUSTER_K8S_BIN_DIR") {
        return PathBuf::from(p);
    }
    cache_dir()
        .join(format!("k8s-{}", k8s_version()))
        .join("bin")
}

fn is_executable(p: &Path) -> bool {
    fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

static BUILD_LOCK: Mutex<()> = Mutex::new(());

/// Returns the control-plane binaries, building them with `tests/cluster/build-control-plane.sh`
/// when any is missing. Serialized within the process (a mutex) and across processes (`flock` on
/// a file in the cache dir), so parallel tests build once.
pub fn ensure_control_plane_binaries() -> Result<ControlPlaneBinaries> {
    let bins = ControlPlaneBinaries::in_dir(&control_plane_bin_dir());
    if bins.missing().is_empty() {
        return Ok(bins);
    }
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    fs::create_dir_all(cache_dir())
        .with_context(|| format!("creating {}", cache_dir().display()))?;
    let lock_path = cache_dir().join(".harness-build.lock");
    let lock =
        File::create(&lock_path).with_context(|| format!("creating {}", lock_path.display()))?;
    flock_exclusive(&lock)?;
    if bins.missing().is_empty() {
        return Ok(bins);
    }
    let script = repo_root().join("tests/cluster/build-control-plane.sh");
    if !script.exists() {
        bail!(
            "control-plane binaries missing ({}) and the build script {} does not exist",
            bins.missing()
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            script.display()
        );
    }
    eprintln!(
        "muster-harness: control-plane binaries missing in {}; building them with {} (first time only, takes a while)",
        control_plane_bin_dir().display(),
        script.display()
    );
    // stdout -> our stderr too, so `cargo test` (which captures only print! output) shows progress.
    let status = Command::new("bash")
        .arg(&script)
        .current_dir(repo_root())
        .stdout(std::io::stderr())
        .status()
        .with_context(|| format!("running {}", script.display()))?;
    if !status.success() {
        bail!("{} failed: {status}", script.display());
    }
    let missing = bins.missing();
    if !missing.is_empty() {
        bail!(
            "{} succeeded but these binaries are still missing: {:?}",
            script.display(),
            missing
        );
    }
    Ok(bins)
}

fn flock_exclusive(f: &File) -> Result<()> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: flock on a valid, owned file descriptor.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        if rc == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err).context("flock on the build lock");
        }
    }
}

/// Locates a built `muster` binary: `MUSTER_BIN`, next to the current executable, or
/// `target/{release,debug}/muster` (`CARGO_TARGET_DIR` respected). Optionally builds it with
/// `cargo build --release -p muster` when none is found.
pub fn find_muster_binary(build_if_missing: bool) -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("MUSTER_BIN") {
        let p = PathBuf::from(p);
        if is_executable(&p) {
            return Ok(p);
        }
        bail!("MUSTER_BIN={} is not an executable file", p.display());
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| {
            if p.is_relative() {
                repo_root().join(p)
            } else {
                p
            }
        })
        .unwrap_or_else(|| repo_root().join("target"));
    let mut candidates = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            candidates.push(dir.join("muster"));
        }
    }
    candidates.push(target.join("release/muster"));
    candidates.push(target.join("debug/muster"));
    if let Some(found) = candidates.iter().find(|p| is_executable(p)) {
        return Ok(found.clone());
    }
    if !build_if_missing {
        bail!("no muster binary found (looked at {candidates:?}); build it with `cargo build --release -p muster` or set MUSTER_BIN");
    }
    eprintln!("muster-harness: building muster (cargo build --release -p muster)");
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--release", "-p", "muster"])
        .current_dir(repo_root())
        .status()
        .context("running cargo build --release -p muster")?;
    if !status.success() {
        bail!("cargo build --release -p muster failed: {status}");
    }
    let built = target.join("release/muster");
    if !is_executable(&built) {
        bail!("cargo build succeeded but {} is missing", built.display());
    }
    Ok(built)
}

/// A kubectl/helm discovery cache of this test process's own (`KUBECACHEDIR`): the default,
/// `~/.kube/cache/discovery/<host_port>/`, is kept by API server address for hours, and under
/// `tests/e2e-run` one address serves a slot's tests one after another (`crate::shared`), so a
/// test could read the resources an earlier test's CRDs added or miss the ones its own add.
pub fn kube_cache_dir() -> PathBuf {
    std::env::temp_dir().join(format!("muster-kube-cache-{}", std::process::id()))
}

/// Paths of the controllers a cluster started with controllers runs beside its control plane
/// ([`crate::ControlPlane::start_controllers`]).
#[derive(Debug, Clone)]
pub struct ControllerBinaries {
    pub kube_controller_manager: PathBuf,
    pub kwok: PathBuf,
}

static CONTROLLERS_BUILD_LOCK: Mutex<()> = Mutex::new(());

/// Returns kube-controller-manager (`tests/cluster/build-control-plane.sh --controllers`) and
/// KWOK's controller (`tests/cluster/build-kwok.sh`), building each the first time: the scripts
/// return at once when their binary is cached, and serialize builds across processes.
pub fn ensure_controller_binaries() -> Result<ControllerBinaries> {
    let _guard = CONTROLLERS_BUILD_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let bins = ControllerBinaries {
        kube_controller_manager: run_build_script(&[
            "tests/cluster/build-control-plane.sh",
            "--controllers",
        ])?
        .join("kube-controller-manager"),
        kwok: run_build_script(&["tests/cluster/build-kwok.sh"])?.join("kwok"),
    };
    for p in [&bins.kube_controller_manager, &bins.kwok] {
        if !is_executable(p) {
            bail!(
                "{} is missing after its build script succeeded",
                p.display()
            );
        }
    }
    Ok(bins)
}

/// Runs `bash <repo>/<args[0]> <args[1..]>` (a build script of tests/cluster/, which returns at
/// once when its output is cached) and returns the directory it printed last on stdout; its
/// progress goes to stderr.
pub(crate) fn run_build_script(args: &[&str]) -> Result<PathBuf> {
    let script = repo_root().join(args[0]);
    let out = Command::new("bash")
        .arg(&script)
        .args(&args[1..])
        .current_dir(repo_root())
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!("{} failed: {}", script.display(), out.status);
    }
    let dir = String::from_utf8_lossy(&out.stdout);
    let dir = dir
        .lines()
        .last()
        .context("the build script printed no directory")?;
    Ok(PathBuf::from(dir.trim()))
}

/// JobSet's controller and the files of its source it needs beside it
/// ([`crate::jobset`]), built by `tests/cluster/build-jobset.sh`.
#[derive(Debug, Clone)]
pub struct JobSetFiles {
    /// The controller (`sigs.k8s.io/jobset`'s main package): controllers and webhooks in one.
    pub binary: PathBuf,
    /// Its CRD (`jobsets.jobset.x-k8s.io`, v1alpha2).
    pub crd: PathBuf,
    /// Its webhook manifests (`config/components/webhook/manifests.yaml`): the paths it serves.
    pub webhook_manifests: PathBuf,
}

/// Returns JobSet's controller and files, building them the first time with
/// `tests/cluster/build-jobset.sh` (which returns at once when they are cached, and serializes
/// builds across processes).
pub fn ensure_jobset() -> Result<JobSetFiles> {
    let _guard = CONTROLLERS_BUILD_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let bin = run_build_script(&["tests/cluster/build-jobset.sh"])?;
    let files = bin.with_file_name("files");
    let found = JobSetFiles {
        binary: bin.join("jobset"),
        crd: files.join("jobset.x-k8s.io_jobsets.yaml"),
        webhook_manifests: files.join("manifests.yaml"),
    };
    for (f, ok) in [
        (&found.binary, is_executable(&found.binary)),
        (&found.crd, found.crd.is_file()),
        (&found.webhook_manifests, found.webhook_manifests.is_file()),
    ] {
        if !ok {
            bail!(
                "{} is missing after its build script succeeded",
                f.display()
            );
        }
    }
    Ok(found)
}

/// A controller manager built from the Go module proxy by its `tests/cluster/build-*.sh`, with
/// the files of its source it needs beside it: Kubeflow Trainer's ([`crate::trainer`]) and
/// Kueue's ([`crate::kueue`]).
#[derive(Debug, Clone)]
pub struct ControllerFiles {
    /// The controller manager.
    pub binary: PathBuf,
    /// Its CRDs, sorted by file name.
    pub crds: Vec<PathBuf>,
    /// Its webhook manifest: the paths it serves.
    pub webhook_manifests: PathBuf,
}

/// Kubeflow Trainer's: the controller manager
/// (`github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager`, one line patched:
/// `TRAINER_EXTERNAL_WEBHOOK_CERTS` skips its certificate rotator), its CRDs
/// (`manifests/base/crds/trainer.kubeflow.org_*.yaml`: ClusterTrainingRuntime, TrainingRuntime,
/// TrainJob) and its webhook manifest (`manifests/base/webhook/manifests.yaml`).
pub type TrainerFiles = ControllerFiles;

/// Kueue's: the controller manager (`sigs.k8s.io/kueue/cmd/kueue`: controllers, scheduler and
/// webhooks in one), its CRDs (`config/components/crd/bases/*.yaml`) and its webhook manifests
/// (`config/components/webhook/manifests.yaml`).
pub type KueueFiles = ControllerFiles;

/// Runs `script` (which returns at once when its build is cached, and serializes builds across
/// processes) and finds its binary `binary` and, in `files` beside it, the CRDs whose file
/// names start with `crd_prefix` and the webhook manifest.
fn ensure_controller(script: &str, binary: &str, crd_prefix: &str) -> Result<ControllerFiles> {
    let _guard = CONTROLLERS_BUILD_LOCK
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let bin = run_build_script(&[script])?;
    let files = bin.with_file_name("files");
    let mut crds: Vec<PathBuf> = std::fs::read_dir(&files)
        .with_context(|| format!("reading {}", files.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(crd_prefix) && n.ends_with(".yaml"))
        })
        .collect();
    crds.sort();
    let found = ControllerFiles {
        binary: bin.join(binary),
        crds,
        webhook_manifests: files.join("manifests.yaml"),
    };
    if !is_executable(&found.binary) || !found.webhook_manifests.is_file() {
        bail!(
            "{} or {} is missing after its build script succeeded",
            found.binary.display(),
            found.webhook_manifests.display()
        );
    }
    if found.crds.is_empty() {
        bail!("no {crd_prefix}*.yaml CRD in {}", files.display());
    }
    Ok(found)
}

/// Returns Trainer's controller manager and files, building them the first time with
/// `tests/cluster/build-trainer.sh`.
pub fn ensure_trainer() -> Result<TrainerFiles> {
    let found = ensure_controller(
        "tests/cluster/build-trainer.sh",
        "trainer-controller-manager",
        "trainer.kubeflow.org_",
    )?;
    if found.crds.len() != 3 {
        bail!("expected Trainer's 3 CRDs, found {:?}", found.crds);
    }
    Ok(found)
}

/// Returns Kueue's controller manager and files, building them the first time with
/// `tests/cluster/build-kueue.sh`.
pub fn ensure_kueue() -> Result<KueueFiles> {
    ensure_controller("tests/cluster/build-kueue.sh", "kueue", "kueue.x-k8s.io_")
}
