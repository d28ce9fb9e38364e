//! One etcd + kube-apiserver per slot of `tests/e2e-run`, shared by the tests that slot runs one
//! after another, each test starting from the cluster as the API server first made it.
//!
//! Why: on a 2-core machine over half of the suite's CPU was kube-apiserver starting (3.3 CPU-s
//! of a 12-second gang test; docs/testing.md). A test still gets its own kube-scheduler, its own
//! muster and its own directory; only etcd and kube-apiserver are reused.
//!
//! How a test gets a clean cluster: when the slot's API server is first ready, the UIDs of every
//! object in it are written down (the *baseline*: system namespaces, bootstrap RBAC, priority
//! classes, the API server's own lease). Before each test, [`reset`] deletes every object whose
//! UID is not in the baseline — with grace period 0 and finalizers removed (no kubelet or
//! controller would ever finish them; a CRD keeps its own, which the API server finishes by
//! deleting its custom resources), namespaces last and only once empty (finalized by hand:
//! kube-controller-manager, which would, does not run) — and lists again until nothing else is
//! left. A reset that fails, or finds one of the baseline's objects changed or gone, has the
//! slot started afresh (`ControlPlane::start`), noted in `restarts.log`. A test that kills, restarts or reconfigures kube-apiserver gets its own
//! ([`ControlPlaneOptions::own`](crate::ControlPlaneOptions::own), or any `apiserver_args`).
//!
//! Enabled by `MUSTER_E2E_SHARED_CONTROL_PLANES=<dir>` (set by `tests/e2e-run`, which also stops
//! the slots' processes at the end): slot `k` (`MUSTER_E2E_PORT_SLOT`) lives in `<dir>/slot-k`.
//! A slot whose processes died or whose API server does not answer is started afresh.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{verbs, ApiCapabilities, Discovery, Scope};
use kube::Client;
use serde_json::{json, Value};

use crate::control_plane::{client_from_kubeconfig, ControlPlane, ControlPlaneOptions};
use crate::process::{pid_alive, signal, Lifetime};
use crate::wait::{wait_for, Progress};

/// The directory under which `tests/e2e-run` keeps one shared control plane per slot.
pub const SHARED_ENV: &str = "MUSTER_E2E_SHARED_CONTROL_PLANES";

/// Namespaces the API server creates itself and keeps: never deleted.
const SYSTEM_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

/// The label of kube-apiserver's own identity Lease (renewed, and made again if it expires).
const APISERVER_IDENTITY_LABEL: &str = "apiserver.kubernetes.io/identity";

/// How long a reset may take before the test fails (a stuck object is named).
const RESET_TIMEOUT: Duration = Duration::from_secs(60);

/// This process's slot directory, when `tests/e2e-run` shares control planes.
pub fn slot_dir() -> Option<PathBuf> {
    let root = std::env::var_os(SHARED_ENV).filter(|v| !v.is_empty())?;
    let slot = std::env::var("MUSTER_E2E_PORT_SLOT").ok()?;
    Some(PathBuf::from(root).join(format!("slot-{slot}")))
}

/// Whether a control plane started with `opts` may be the slot's shared one.
pub fn may_share(opts: &ControlPlaneOptions) -> bool {
    !opts.own
        && opts.dir.is_none()
        && opts.apiserver_args.is_empty()
        && opts.lifetime == Lifetime::Attached
}

/// A slot's running etcd + kube-apiserver, as its state file records them.
#[derive(Debug, Clone)]
pub struct Slot {
    pub dir: PathBuf,
    pub apiserver_port: u16,
    pub etcd_port: u16,
    /// The admin kubeconfig (its CA file lives in the slot's `pki/`).
    pub kubeconfig: PathBuf,
    /// The objects the API server made before any test ran: UID -> resourceVersion.
    baseline: HashMap<String, String>,
    /// Whether this call started it (the first test of the slot, or after a crash).
    pub started_now: bool,
}

impl Slot {
    fn state_file(dir: &Path) -> PathBuf {
        dir.join("shared.json")
    }

    /// The slot's control plane, started first if it is not running and ready.
    pub async fn ready(dir: &Path, start_timeout: Duration) -> Result<Self> {
        if let Some(slot) = Self::running(dir).await {
            return Ok(slot);
        }
        Self::start_afresh(dir, start_timeout).await
    }

    /// Stops whatever runs in the slot and starts a new etcd + kube-apiserver there.
    pub async fn start_afresh(dir: &Path, start_timeout: Duration) -> Result<Self> {
        stop_slot(dir);
        if dir.exists() {
            fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        // Boxed: ControlPlane::start comes back here for a shared plane (never with these options).
        let cp = Box::pin(ControlPlane::start(ControlPlaneOptions {
            dir: Some(dir.to_path_buf()),
            lifetime: Lifetime::Detached,
            start_timeout,
            apiserver_args: Vec::new(),
            own: true,
        }))
        .await?;
        let client = cp.client();
        wait_for_bootstrap(&client).await?;
        let baseline = settled_baseline(&client).await?;
        let slot = Self {
            dir: cp.dir().to_path_buf(),
            apiserver_port: cp.apiserver_port(),
            etcd_port: cp.etcd_port(),
            kubeconfig: cp.kubeconfig_path().to_path_buf(),
            baseline,
            started_now: true,
        };
        cp.detach()?;
        let state = json!({
            "apiserverPort": slot.apiserver_port,
            "etcdPort": slot.etcd_port,
            "kubeconfig": slot.kubeconfig,
            "baseline": slot.baseline.iter().collect::<BTreeMap<_, _>>(),
        });
        let tmp = dir.join("shared.json.tmp");
        fs::write(&tmp, serde_json::to_vec_pretty(&state)?)?;
        fs::rename(&tmp, Self::state_file(dir))?;
        eprintln!(
            "muster-harness: shared control plane {} started ({} objects in its baseline)",
            dir.display(),
            slot.baseline.len()
        );
        Ok(slot)
    }

    /// The slot as its state file says, if its processes live and its API server answers.
    async fn running(dir: &Path) -> Option<Self> {
        let text = fs::read_to_string(Self::state_file(dir)).ok()?;
        let state: Value = serde_json::from_str(&text).ok()?;
        let pids = slot_pids(dir);
        if pids.len() < 2 || !pids.iter().all(|p| pid_alive(*p)) {
            eprintln!(
                "muster-harness: shared control plane {}: a process is gone; starting it again",
                dir.display()
            );
            return None;
        }
        let kubeconfig = PathBuf::from(state["kubeconfig"].as_str()?);
        let client = client_from_kubeconfig(&kubeconfig).await.ok()?;
        let readyz = http::Request::get("/readyz").body(Vec::new()).ok()?;
        match tokio::time::timeout(Duration::from_secs(10), client.request_text(readyz)).await {
            Ok(Ok(_)) => {}
            other => {
                eprintln!(
                    "muster-harness: shared control plane {}: not ready ({other:?}); starting it again",
                    dir.display()
                );
                return None;
            }
        }
        Some(Self {
            dir: dir.to_path_buf(),
            apiserver_port: u16::try_from(state["apiserverPort"].as_u64()?).ok()?,
            etcd_port: u16::try_from(state["etcdPort"].as_u64()?).ok()?,
            kubeconfig,
            baseline: state["baseline"]
                .as_object()?
                .iter()
                .filter_map(|(uid, rv)| Some((uid.clone(), rv.as_str()?.to_string())))
                .collect(),
            started_now: false,
        })
    }

    /// Deletes every object not in the baseline and waits until they are gone.
    pub async fn reset(&self, client: &Client) -> Result<ResetReport> {
        reset(client, &self.baseline).await
    }

    /// Stops the slot's etcd and kube-apiserver (SIGKILL) and removes its directory.
    pub fn stop(&self) {
        stop_slot(&self.dir);
        let _ = fs::remove_dir_all(&self.dir);
    }

    /// Records why the slot was started afresh (one line per restart, in `restarts.log` beside
    /// the slots; `tests/e2e-run` prints them at the end).
    pub fn note_restart(&self, why: &str) {
        use std::io::Write;
        let Some(root) = self.dir.parent() else {
            return;
        };
        if let Ok(mut f) = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(root.join("restarts.log"))
        {
            let _ = writeln!(f, "{}: {why}", self.dir.display());
        }
    }
}

/// The pids `ControlPlane::detach` wrote for the slot.
fn slot_pids(dir: &Path) -> Vec<u32> {
    let Ok(entries) = fs::read_dir(dir.join("pids")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| fs::read_to_string(e.path()).ok())
        .filter_map(|t| t.trim().parse().ok())
        .collect()
}

/// SIGKILLs what is left of a slot's processes.
fn stop_slot(dir: &Path) {
    for pid in slot_pids(dir) {
        signal(pid, libc::SIGKILL);
    }
}

/// The objects the API server made, once two listings a second apart agree (UIDs and
/// resourceVersions): some of its bootstrap controllers write after `/readyz` (the `kubernetes`
/// Service and its ClusterIP, status of the default ServiceCIDR), and an object written after
/// the baseline would be deleted by every reset or counted as changed.
async fn settled_baseline(client: &Client) -> Result<HashMap<String, String>> {
    let resources = discover(client).await?;
    let listing = || async {
        Ok::<_, anyhow::Error>(
            all_objects(client, &resources)
                .await?
                .into_iter()
                .map(|o| (o.uid, o.resource_version))
                .collect::<HashMap<_, _>>(),
        )
    };
    let mut last = listing().await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = listing().await?;
        let changed = now
            .iter()
            .filter(|(uid, rv)| last.get(*uid) != Some(rv))
            .count()
            + last.keys().filter(|uid| !now.contains_key(*uid)).count();
        if changed == 0 {
            return Ok(now);
        }
        if Instant::now() > deadline {
            bail!(
                "the API server's own objects kept changing for 60s ({changed} in the last second)"
            );
        }
        last = now;
    }
}

/// Waits for what the API server makes just after it is ready (the system namespaces, its
/// identity Lease, the `kubernetes` Service), so that they are in the baseline.
async fn wait_for_bootstrap(client: &Client) -> Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let leases: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "kube-system",
        &ApiResource::from_gvk(&GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease")),
    );
    wait_for(
        "the API server's system namespaces and identity Lease",
        Duration::from_secs(60),
        || async {
            let have: HashSet<String> = namespaces
                .list_metadata(&ListParams::default())
                .await?
                .items
                .into_iter()
                .filter_map(|n| n.metadata.name)
                .collect();
            let missing: Vec<&str> = SYSTEM_NAMESPACES
                .into_iter()
                .filter(|n| !have.contains(*n))
                .collect();
            if !missing.is_empty() {
                return Ok(Progress::NotYet(format!("namespaces missing: {missing:?}")));
            }
            let lease = leases
                .list_metadata(&ListParams::default().labels(APISERVER_IDENTITY_LABEL))
                .await?;
            if lease.items.is_empty() {
                return Ok(Progress::NotYet("no identity Lease yet".into()));
            }
            let services: Api<Service> = Api::namespaced(client.clone(), "default");
            Ok(match services.get_opt("kubernetes").await? {
                Some(_) => Progress::Done(()),
                None => Progress::NotYet("no default/kubernetes Service yet".into()),
            })
        },
    )
    .await
}

/// One object, as a reset sees it.
#[derive(Debug, Clone)]
struct Seen {
    uid: String,
    resource_version: String,
    kind: String,
    name: String,
    namespace: Option<String>,
    finalizers: bool,
    deleting: bool,
    apiserver_identity: bool,
}

/// Every listable and deletable resource type (its preferred version), in deletion order:
/// admission configuration first (within one pass a policy still applied from the API server's
/// informer may refuse a deletion; the reset then fails and the slot starts afresh), custom
/// resources before their definitions, namespaces left out (deleted last, by hand).
async fn discover(client: &Client) -> Result<Vec<(ApiResource, ApiCapabilities)>> {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .context("discovering the API server's resources")?;
    let mut out: Vec<(ApiResource, ApiCapabilities)> = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .filter(|(ar, caps)| {
            caps.supports_operation(verbs::LIST)
                && caps.supports_operation(verbs::DELETE)
                && !(ar.group.is_empty() && ar.plural == "namespaces")
        })
        .collect();
    let rank = |ar: &ApiResource| match ar.group.as_str() {
        "admissionregistration.k8s.io" => 0,
        "apiextensions.k8s.io" => 2,
        _ => 1,
    };
    out.sort_by_key(|(ar, _)| rank(ar));
    Ok(out)
}

async fn list(client: &Client, ar: &ApiResource) -> Result<Option<Vec<Seen>>> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
    let list = match api.list_metadata(&ListParams::default()).await {
        Ok(l) => l,
        // A custom resource whose definition went away during the reset.
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 405 => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("listing {}", ar.plural)),
    };
    Ok(Some(
        list.items
            .into_iter()
            .filter_map(|o| {
                let m = o.metadata;
                Some(Seen {
                    uid: m.uid?,
                    resource_version: m.resource_version.unwrap_or_default(),
                    kind: ar.kind.clone(),
                    name: m.name?,
                    namespace: m.namespace,
                    finalizers: m.finalizers.is_some_and(|f| !f.is_empty()),
                    deleting: m.deletion_timestamp.is_some(),
                    apiserver_identity: m
                        .labels
                        .is_some_and(|l| l.contains_key(APISERVER_IDENTITY_LABEL)),
                })
            })
            .collect(),
    ))
}

/// [`list`] of every resource type, all at once (a pass over ~60 types one after another took
/// 0.28 s), in the order of `resources`.
async fn list_all(
    client: &Client,
    resources: &[(ApiResource, ApiCapabilities)],
) -> Result<Vec<Option<Vec<Seen>>>> {
    let mut tasks = tokio::task::JoinSet::new();
    for (i, (ar, _)) in resources.iter().enumerate() {
        let (client, ar) = (client.clone(), ar.clone());
        tasks.spawn(async move { (i, list(&client, &ar).await) });
    }
    let mut out: Vec<Option<Vec<Seen>>> = vec![None; resources.len()];
    while let Some(joined) = tasks.join_next().await {
        let (i, listed) = joined.context("a listing task panicked")?;
        out[i] = listed?;
    }
    Ok(out)
}

async fn all_objects(
    client: &Client,
    resources: &[(ApiResource, ApiCapabilities)],
) -> Result<Vec<Seen>> {
    let mut out: Vec<Seen> = list_all(client, resources)
        .await?
        .into_iter()
        .flatten()
        .flatten()
        .collect();
    let namespaces = ApiResource::erase::<Namespace>(&());
    out.extend(list(client, &namespaces).await?.unwrap_or_default());
    Ok(out)
}

/// What a reset did.
#[derive(Debug, Clone, Default)]
pub struct ResetReport {
    /// Objects deleted (namespaces included).
    pub deleted: usize,
    /// Passes over every resource type (the last one finds nothing).
    pub passes: usize,
    pub took: Duration,
    /// The API server's own objects an earlier test changed or deleted ("Kind ns/name"): a
    /// reset cannot undo that, so the slot is started afresh instead.
    pub baseline_changed: Vec<String>,
}

fn ignore_gone<T>(r: kube::Result<T>) -> Result<()> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Deletes every object whose UID is not in `baseline`, pass after pass, until a pass finds
/// none. See the module's documentation.
pub async fn reset(client: &Client, baseline: &HashMap<String, String>) -> Result<ResetReport> {
    let t0 = Instant::now();
    let deadline = t0 + RESET_TIMEOUT;
    let resources = discover(client).await?;
    let mut report = ResetReport::default();
    let mut gang_policy_deleted = false;
    let now = DeleteParams::background().grace_period(0);
    let unfinalize = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    loop {
        report.passes += 1;
        let mut left: Vec<String> = Vec::new();
        let mut baseline_seen: Vec<Seen> = Vec::new();
        for ((ar, caps), objects) in resources.iter().zip(list_all(client, &resources).await?) {
            let Some(objects) = objects else {
                continue;
            };
            let (kept, stale): (Vec<Seen>, Vec<Seen>) = objects
                .into_iter()
                .partition(|o| baseline.contains_key(&o.uid) || o.apiserver_identity);
            baseline_seen.extend(kept.iter().cloned());
            if stale.is_empty() {
                continue;
            }
            if ar.group == "admissionregistration.k8s.io" && ar.kind.starts_with("Mutating") {
                gang_policy_deleted = true;
            }
            let api_for = |ns: &Option<String>| -> Api<DynamicObject> {
                match ns {
                    Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
                    None => Api::all_with(client.clone(), ar),
                }
            };
            for o in &stale {
                left.push(format!(
                    "{} {}{}",
                    ar.kind,
                    o.namespace
                        .as_deref()
                        .map(|n| format!("{n}/"))
                        .unwrap_or_default(),
                    o.name
                ));
                // A definition's own finalizer deletes its custom resources: left to the API
                // server, or they would outlive it and come back with the next definition.
                if o.finalizers && ar.group != "apiextensions.k8s.io" {
                    ignore_gone(
                        api_for(&o.namespace)
                            .patch(&o.name, &PatchParams::default(), &unfinalize)
                            .await,
                    )?;
                }
            }
            let all_stale = kept.is_empty() && caps.supports_operation(verbs::DELETE_COLLECTION);
            if all_stale && caps.scope == Scope::Namespaced {
                let namespaces: BTreeSet<&Option<String>> =
                    stale.iter().map(|o| &o.namespace).collect();
                for ns in namespaces {
                    ignore_gone(
                        api_for(ns)
                            .delete_collection(&now, &ListParams::default())
                            .await,
                    )?;
                }
            } else if all_stale {
                ignore_gone(
                    api_for(&None)
                        .delete_collection(&now, &ListParams::default())
                        .await,
                )?;
            } else {
                for o in stale.iter().filter(|o| !o.deleting) {
                    ignore_gone(api_for(&o.namespace).delete(&o.name, &now).await)?;
                }
            }
            report.deleted += stale.iter().filter(|o| !o.deleting).count();
        }
        // Namespaces once nothing else is left (objects of a namespace deleted by hand would
        // outlive it in etcd and come back with the next namespace of that name).
        if left.is_empty() {
            let namespaces: Api<Namespace> = Api::all(client.clone());
            let listed = list(client, &ApiResource::erase::<Namespace>(&()))
                .await?
                .unwrap_or_default();
            let (kept, stale): (Vec<Seen>, Vec<Seen>) = listed.into_iter().partition(|n| {
                baseline.contains_key(&n.uid) || SYSTEM_NAMESPACES.contains(&n.name.as_str())
            });
            baseline_seen.extend(kept);
            for o in stale {
                let name = o.name;
                left.push(format!("Namespace {name}"));
                if !o.deleting {
                    ignore_gone(namespaces.delete(&name, &now).await)?;
                    report.deleted += 1;
                }
                if o.finalizers {
                    ignore_gone(
                        namespaces
                            .patch(&name, &PatchParams::default(), &unfinalize)
                            .await,
                    )?;
                    continue; // finalized by the next pass
                }
                // At its resourceVersion after the deletion (None: gone already).
                let Some(mut ns) = namespaces.get_opt(&name).await? else {
                    continue;
                };
                // kube-controller-manager's namespace controller would empty and finalize it;
                // it is empty already. (A conflict is retried by the next pass.)
                ns.spec.get_or_insert_with(Default::default).finalizers = Some(Vec::new());
                ignore_gone(
                    namespaces
                        .replace_subresource("finalize", &name, &PostParams::default(), &ns)
                        .await,
                )?;
            }
        }
        if left.is_empty() {
            report.baseline_changed = baseline_changes(baseline, &baseline_seen);
            break;
        }
        if Instant::now() > deadline {
            left.truncate(20);
            bail!(
                "the shared control plane's reset left objects after {RESET_TIMEOUT:?}: {}",
                left.join(", ")
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The next test may run muster for every pod, with no policy: the deleted one must no
    // longer be applied (the API server applies policies from an informer).
    if gang_policy_deleted {
        crate::policy::wait_policy_marks(client, "default", false).await?;
    }
    report.took = t0.elapsed();
    Ok(report)
}

/// Kinds whose objects the API server itself keeps updating (its identity Lease is renewed;
/// APIService status follows availability): their changes are not a test's doing.
const UPDATED_BY_THE_API_SERVER: [&str; 2] = ["Lease", "APIService"];

/// The baseline objects missing or at another resourceVersion, the API server's own updates aside.
fn baseline_changes(baseline: &HashMap<String, String>, seen: &[Seen]) -> Vec<String> {
    let by_uid: HashSet<&str> = seen.iter().map(|o| o.uid.as_str()).collect();
    let mut changed: Vec<String> = seen
        .iter()
        .filter(|o| !UPDATED_BY_THE_API_SERVER.contains(&o.kind.as_str()))
        .filter(|o| {
            baseline
                .get(&o.uid)
                .is_some_and(|rv| *rv != o.resource_version)
        })
        .map(|o| {
            let ns = o
                .namespace
                .as_deref()
                .map(|n| format!("{n}/"))
                .unwrap_or_default();
            format!("{} {ns}{} changed", o.kind, o.name)
        })
        .collect();
    let missing: Vec<&String> = baseline
        .keys()
        .filter(|uid| !by_uid.contains(uid.as_str()))
        .collect();
    if !missing.is_empty() {
        changed.push(format!(
            "{} of the API server's own objects deleted (UIDs {:?})",
            missing.len(),
            missing.iter().take(5).collect::<Vec<_>>()
        ));
    }
    changed.sort();
    changed
}
