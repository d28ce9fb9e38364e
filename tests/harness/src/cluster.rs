//! A whole local cluster for one test: control plane, muster, and kube-scheduler with muster as
//! its extender.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;

use crate::api_proxy::ApiProxy;
use crate::control_plane::{ControlPlane, ControlPlaneOptions, SchedulerOptions};
use crate::k8s::{self, EventSummary, KeyScheme, NodeShape, PodBuilder};
use crate::muster::{Muster, MusterOptions};
use crate::process::Lifetime;
use crate::rbac;
use crate::tls::MusterTls;
use crate::truth::{truth, CLUSTER_TRUTH, CONTROL_TRUTH_WINDOW};
use crate::wait::{holds_for, wait_for, Progress};

/// Set to `1` to make every [`Cluster`] a *control run*: kube-scheduler starts without the
/// extender stanza, so it schedules on its own; muster still runs and watches, but is never
/// consulted. Gang e2e tests must fail there (`tests/control-run`): one that passes is not
/// testing muster.
pub const CONTROL_RUN_ENV: &str = "MUSTER_E2E_CONTROL";

/// Whether [`CONTROL_RUN_ENV`] asks for a control run.
pub fn control_run_requested() -> bool {
    std::env::var(CONTROL_RUN_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Options of [`Cluster::start_with`].
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    pub muster_binary: PathBuf,
    pub muster_args: Vec<String>,
    /// The scheduler runs scheduler-config/muster-second-scheduler.yaml: installed as
    /// deploy/second-scheduler/ installs it (its admission policy, muster
    /// `--scheduler-names=muster-scheduler`).
    pub second_scheduler: bool,
    pub control_plane: ControlPlaneOptions,
    pub scheduler: SchedulerOptions,
    /// HTTPS between kube-scheduler and muster: certificates are generated in
    /// `<cluster dir>/muster-tls`, muster serves them, and the scheduler's extender gets
    /// `https://`, `enableHTTPS: true` and a `tlsConfig` (CA + client certificate) unless
    /// `scheduler.extender_tls` is already set.
    pub tls: Option<TlsOptions>,
    /// Whose permissions muster runs with (default: the shipped RBAC's ServiceAccount).
    pub muster_identity: MusterIdentity,
    /// CRD files (relative to the repository) installed before muster starts.
    pub crds: Vec<String>,
    /// Which pods pass through muster. The default is what `kubectl apply -k deploy/` installs,
    /// [`Scope::GangMembers`]; [`ClusterOptions::every_pod`] asks for the alternative.
    pub scope: Scope,
    /// muster reaches the API server through an [`ApiProxy`] (with the shipped RBAC's token:
    /// the proxy speaks plain HTTP to muster), for tests that fault or count its requests
    /// ([`Cluster::api_proxy`]).
    pub through_api_proxy: bool,
    /// kube-controller-manager and KWOK's controller run beside the control plane
    /// ([`ClusterOptions::with_controllers`]).
    pub controllers: bool,
    /// JobSet's controller and webhooks run beside them ([`ClusterOptions::with_jobset`]).
    pub jobset: bool,
    /// Kueue's controller manager and webhooks run beside them ([`ClusterOptions::with_kueue`]).
    pub kueue: bool,
    /// Kubeflow Trainer's controller manager and webhooks run beside them and JobSet's
    /// ([`ClusterOptions::with_trainer`]).
    pub trainer: bool,
    /// Karpenter's KWOK cloud provider runs beside the controllers, with this NodePool
    /// ([`ClusterOptions::with_karpenter`]).
    pub karpenter: Option<crate::karpenter::KarpenterPool>,
}

/// muster's `--scope`: which pods kube-scheduler sends to muster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scope {
    /// The shipped install: deploy/gang-admission-policy.yaml is applied before muster starts
    /// (it marks and gates gang members), kube-scheduler uses
    /// scheduler-config/muster-as-default-scheduler.yaml (only marked pods reach muster), and
    /// muster runs with `--scope=gang-members`, gathering gangs behind its gate. In a control
    /// run the policy is not applied (see [`Cluster::gathers`]).
    #[default]
    GangMembers,
    /// The alternative for clusters without the policy: every pod through muster
    /// (scheduler-config/muster-every-pod.yaml, `--scope=every-pod`).
    EveryPod,
}

impl Scope {
    /// The value of muster's `--scope` flag.
    pub fn flag(self) -> &'static str {
        match self {
            Scope::GangMembers => "--scope=gang-members",
            Scope::EveryPod => "--scope=every-pod",
        }
    }
}

/// See [`ClusterOptions::muster_identity`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MusterIdentity {
    /// A token of ServiceAccount `muster-system/muster`, bound to the ClusterRole of
    /// `deploy/rbac.yaml` (see [`crate::rbac`]): what muster has when deployed, so a test that
    /// passes this way proves the shipped RBAC is enough.
    #[default]
    ShippedRbac,
    /// The admin kubeconfig (group `system:masters`).
    Admin,
}

/// See [`ClusterOptions::tls`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlsOptions {
    /// Start muster with `--tls-client-ca-file` (the generated CA).
    pub require_client_cert: bool,
}

impl ClusterOptions {
    pub fn new(muster_binary: impl Into<PathBuf>) -> Self {
        Self {
            muster_binary: muster_binary.into(),
            muster_args: Vec::new(),
            second_scheduler: false,
            control_plane: ControlPlaneOptions::default(),
            scheduler: SchedulerOptions::default(),
            tls: None,
            muster_identity: MusterIdentity::default(),
            crds: Vec::new(),
            scope: Scope::default(),
            through_api_proxy: false,
            controllers: false,
            jobset: false,
            kueue: false,
            trainer: false,
            karpenter: None,
        }
    }

    /// An autoscaled cluster: the controllers ([`ClusterOptions::with_controllers`]) and
    /// Karpenter's KWOK cloud provider (its CRDs, a KWOKNodeClass and `pool`'s NodePool; see
    /// [`ControlPlane::start_karpenter`]), which adds nodes for pods kube-scheduler marked
    /// unschedulable and for CapacityBuffers, all torn down with the cluster.
    pub fn with_karpenter(mut self, pool: crate::karpenter::KarpenterPool) -> Self {
        self.karpenter = Some(pool);
        self.with_controllers()
    }

    /// A cluster with the controllers a real one has: kube-controller-manager (Jobs create
    /// pods, the garbage collector, ResourceClaims deallocated …) and KWOK playing the kubelets
    /// (bound pods turn Running, and finish when a test sets `muster.dev/test-finish`; see
    /// [`ControlPlane::start_controllers`]). Its own control plane: controllers act on the
    /// whole API server.
    pub fn with_controllers(mut self) -> Self {
        self.controllers = true;
        self.control_plane.own = true;
        self
    }

    /// [`with_controllers`](Self::with_controllers), and JobSet's controller (v0.10.1, built
    /// and cached by tests/cluster/build-jobset.sh) with its CRD and webhooks, as a local process
    /// (see [`crate::jobset`]): JobSets create their Jobs, restart them by their failure policy.
    pub fn with_jobset(mut self) -> Self {
        self.jobset = true;
        self.with_controllers()
    }

    /// [`with_controllers`](Self::with_controllers), and Kueue's controller manager (v0.17.0,
    /// built and cached by tests/cluster/build-kueue.sh) with its CRDs and webhooks, as a local
    /// process (see [`crate::kueue`]): the pod integration for namespaces made with
    /// [`kueue::managed_namespace`](crate::kueue::managed_namespace), whose pods naming a queue
    /// Kueue gates until their Workload is admitted by quota.
    pub fn with_kueue(mut self) -> Self {
        self.kueue = true;
        self.with_controllers()
    }

    /// [`with_jobset`](Self::with_jobset), and Kubeflow Trainer v2's controller manager (v2.0.0,
    /// built and cached by tests/cluster/build-trainer.sh) with its CRDs, scheduler-plugins'
    /// PodGroup CRD and its webhooks, as a local process (see [`crate::trainer`]): TrainJobs
    /// become JobSets, and a runtime with `podGroupPolicy.coscheduling` gets each TrainJob a
    /// PodGroup and its pods the label `scheduling.x-k8s.io/pod-group`.
    pub fn with_trainer(mut self) -> Self {
        self.trainer = true;
        self.with_jobset()
    }

    /// Every pod through muster, the alternative to the shipped install: no admission policy,
    /// scheduler-config/muster-every-pod.yaml, `--scope=every-pod`. Only for what is specific
    /// to that mode (its fail-closed outage, plain pods through filter).
    pub fn every_pod(mut self) -> Self {
        self.scope = Scope::EveryPod;
        self.scheduler_config("muster-every-pod.yaml")
    }

    /// muster's requests go through an [`ApiProxy`] ([`Cluster::api_proxy`]).
    pub fn through_api_proxy(mut self) -> Self {
        self.through_api_proxy = true;
        self
    }

    /// Installs the CRD in `file` (relative to the repository, e.g.
    /// [`pod_groups::VOLCANO_CRD`](crate::pod_groups::VOLCANO_CRD)) before muster starts.
    pub fn crd(mut self, file: &str) -> Self {
        self.crds.push(file.to_string());
        self
    }

    /// kube-apiserver serves Kubernetes' own PodGroups (`scheduling.k8s.io/v1beta1`, gate
    /// `GenericWorkload`); kube-scheduler keeps the gate off, so muster alone gates their gangs.
    pub fn kubernetes_pod_groups(mut self) -> Self {
        self.control_plane.apiserver_args.extend(
            crate::pod_groups::KUBERNETES_POD_GROUP_APISERVER_ARGS
                .iter()
                .map(|a| a.to_string()),
        );
        self
    }

    /// Runs muster with the admin kubeconfig instead of the shipped RBAC's ServiceAccount.
    pub fn admin_muster(mut self) -> Self {
        self.muster_identity = MusterIdentity::Admin;
        self
    }

    /// Starts kube-scheduler from `scheduler-config/<name>` (default:
    /// `muster-every-pod.yaml`).
    pub fn scheduler_config(mut self, name: &str) -> Self {
        self.scheduler = self.scheduler.with_repo_config(name);
        self.second_scheduler = name == "muster-second-scheduler.yaml";
        self
    }

    /// Extra muster flags (e.g. `["--gang-timeout", "5s"]`), after the ones the harness sets.
    pub fn muster_args<S: Into<String>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.muster_args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Its own etcd and kube-apiserver, never the slot's shared ones (see [`crate::shared`]):
    /// for a test that kills, restarts or pauses them.
    pub fn own_control_plane(mut self) -> Self {
        self.control_plane.own = true;
        self
    }

    /// HTTPS between kube-scheduler and muster; see [`ClusterOptions::tls`].
    pub fn tls(mut self, require_client_cert: bool) -> Self {
        self.tls = Some(TlsOptions {
            require_client_cert,
        });
        self
    }
}

/// How long each part took to start.
#[derive(Debug, Clone, Copy)]
pub struct StartupTimes {
    pub control_plane: Duration,
    pub muster: Duration,
    pub scheduler: Duration,
    pub total: Duration,
}

/// etcd + kube-apiserver + muster + kube-scheduler. Drop stops them all.
pub struct Cluster {
    // Field order = drop order: the scheduler (inside `cp`) outlives muster by a few ms only.
    pub muster: Muster,
    pub cp: ControlPlane,
    client: Client,
    pub startup: StartupTimes,
    gathers: bool,
    api_proxy: Option<ApiProxy>,
}

impl Cluster {
    /// Starts a cluster with default options and the given muster binary.
    pub async fn start(muster_binary: impl Into<PathBuf>) -> Result<Self> {
        Self::start_with(ClusterOptions::new(muster_binary)).await
    }

    pub async fn start_with(opts: ClusterOptions) -> Result<Self> {
        let t0 = Instant::now();
        let mut cp = ControlPlane::start(opts.control_plane.clone()).await?;
        if opts.controllers {
            cp.start_controllers().await?;
        }
        if opts.jobset {
            cp.start_jobset().await?;
        }
        if opts.kueue {
            cp.start_kueue().await?;
        }
        if opts.trainer {
            cp.start_trainer().await?;
        }
        if let Some(pool) = &opts.karpenter {
            let build = crate::karpenter::ensure_karpenter()?;
            crate::karpenter::install_crds(&cp.client(), &build).await?;
            crate::karpenter::create_pool(&cp.client(), pool).await?;
            cp.start_karpenter(&build.binary).await?;
            rbac::apply_capacity_buffers_rbac(&cp.client()).await?;
        }
        for file in &opts.crds {
            crate::pod_groups::install_crd(&cp.client(), file).await?;
        }
        // The gang-members mode without muster is the stock scheduler alone: neither muster's extender
        // (dropped by start_scheduler below) nor its admission policy, whose marker
        // (muster.dev/gang, which the stock config would look for on nodes) and gate (muster.dev/gather, which only muster
        // removes) are muster's part of the install. Gang members are then plain pods that
        // kube-scheduler schedules one by one, so a test's cluster truth is decided at once,
        // instead of every member waiting out a deadline as "Insufficient muster.dev/gang".
        let gang_members = opts.scope == Scope::GangMembers;
        let gathers = gang_members && !control_run_requested();
        if gathers && opts.second_scheduler {
            crate::policy::apply_second_scheduler_policy(&cp.client()).await?;
        } else if gathers {
            crate::policy::apply_gang_admission_policy(&cp.client()).await?;
        } else if gang_members {
            eprintln!(
                "muster-harness: control run ({CONTROL_RUN_ENV}), gang-members mode: {} not applied; \
                 gang members are created unmarked and ungated",
                crate::policy::POLICY_FILE
            );
        }
        let cp_time = t0.elapsed();
        let t1 = Instant::now();
        let muster_kubeconfig = match opts.muster_identity {
            MusterIdentity::ShippedRbac => {
                rbac::service_account_kubeconfig(&cp.client(), cp.kubeconfig_path(), cp.dir(), 24)
                    .await?
            }
            MusterIdentity::Admin => cp.kubeconfig_path().to_path_buf(),
        };
        let api_proxy = if opts.through_api_proxy {
            anyhow::ensure!(
                opts.muster_identity == MusterIdentity::ShippedRbac,
                "the API proxy passes a token on, not a client certificate: use the shipped RBAC"
            );
            Some(ApiProxy::start(&muster_kubeconfig).await?)
        } else {
            None
        };
        let muster_kubeconfig = match &api_proxy {
            Some(p) => p.kubeconfig(cp.dir(), "muster-kubeconfig-through-proxy")?,
            None => muster_kubeconfig,
        };
        let mut mo = MusterOptions::new(&opts.muster_binary, &muster_kubeconfig, cp.dir());
        mo.args = opts.muster_args.clone();
        if !mo.args.iter().any(|a| a.starts_with("--scope")) {
            mo.args.insert(0, opts.scope.flag().to_string());
        }
        if opts.second_scheduler && !mo.args.iter().any(|a| a.starts_with("--scheduler-names")) {
            mo.args.push(format!(
                "--scheduler-names={}",
                crate::policy::SECOND_SCHEDULER_NAME
            ));
        }
        mo.lifetime = opts.control_plane.lifetime;
        if let Some(t) = opts.tls {
            mo.tls = Some(MusterTls::generate(
                &cp.dir().join("muster-tls"),
                t.require_client_cert,
            )?);
        }
        let muster = Muster::start(mo).await?;
        let muster_time = t1.elapsed();
        let t2 = Instant::now();
        let mut so = opts.scheduler.clone();
        so.extender_base_url = Some(muster.url());
        if so.extender_tls.is_none() {
            so.extender_tls = muster.tls().map(MusterTls::extender_tls);
        }
        // In a control run, start_scheduler drops the extenders (for every scheduler it starts).
        cp.start_scheduler(so).await?;
        let startup = StartupTimes {
            control_plane: cp_time,
            muster: muster_time,
            scheduler: t2.elapsed(),
            total: t0.elapsed(),
        };
        let phases = cp.start_phases();
        let control_plane = if cp.is_shared() {
            // The slot's pair: its reset (and, for the slot's first test, its start).
            "shared etcd+apiserver, reset".to_string()
        } else {
            format!(
                "etcd+apiserver [pki {:.1}s, etcd {:.1}s, apiserver {:.1}s]",
                phases.pki.as_secs_f64(),
                phases.etcd.as_secs_f64(),
                phases.apiserver.as_secs_f64()
            )
        };
        eprintln!(
            "muster-harness: cluster up in {:.1}s ({control_plane} {:.1}s, muster {:.1}s, \
             kube-scheduler {:.1}s) in {}",
            startup.total.as_secs_f64(),
            startup.control_plane.as_secs_f64(),
            startup.muster.as_secs_f64(),
            startup.scheduler.as_secs_f64(),
            cp.dir().display()
        );
        let client = cp.client();
        Ok(Self {
            muster,
            cp,
            client,
            startup,
            gathers,
            api_proxy,
        })
    }

    /// Whether gang members are created marked and gated by deploy/gang-admission-policy.yaml
    /// for muster to gather: a [`Scope::GangMembers`] cluster (the default), except in a control
    /// run, where that mode without muster is kube-scheduler alone with neither the
    /// extender nor the policy (members are plain pods).
    pub fn gathers(&self) -> bool {
        self.gathers
    }

    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The proxy between muster and the API server (started with
    /// [`ClusterOptions::through_api_proxy`]).
    pub fn api_proxy(&self) -> Option<&ApiProxy> {
        self.api_proxy.as_ref()
    }

    /// The certificates muster serves with (when started with [`ClusterOptions::tls`]).
    pub fn tls(&self) -> Option<&MusterTls> {
        self.muster.tls()
    }

    pub fn lifetime(&self) -> Lifetime {
        Lifetime::Attached
    }

    pub async fn add_node(&self, name: &str, shape: NodeShape) -> Result<Node> {
        k8s::add_node(&self.client, name, &shape).await
    }

    pub async fn delete_node(&self, name: &str) -> Result<()> {
        k8s::delete_node(&self.client, name).await
    }

    pub async fn namespace(&self, name: &str) -> Result<()> {
        k8s::create_namespace(&self.client, name).await
    }

    pub async fn create(&self, pod: PodBuilder) -> Result<Pod> {
        pod.create(&self.client).await
    }

    pub async fn bound_pods(&self, ns: &str) -> Result<BTreeMap<String, String>> {
        k8s::bound_pods(&self.client, ns).await
    }

    pub async fn pods(&self, ns: &str) -> Result<Vec<Pod>> {
        k8s::list_pods(&self.client, ns).await
    }

    pub async fn events_for(&self, ns: &str, pod: &str) -> Result<Vec<EventSummary>> {
        k8s::events_for(&self.client, ns, pod).await
    }

    pub async fn delete_pod(&self, ns: &str, name: &str) -> Result<()> {
        k8s::delete_pod(&self.client, ns, name).await
    }

    pub async fn delete_pods(&self, ns: &str, names: &[String]) -> Result<()> {
        for n in names {
            self.delete_pod(ns, n).await?;
        }
        Ok(())
    }

    /// Creates `replicas` pods `<group>-0..` of gang `ns/group` (min-available `min`) through
    /// `key`; `shape` sets their requests (default 100m CPU, 64Mi memory). Returns the names.
    pub async fn create_gang(
        &self,
        ns: &str,
        group: &str,
        replicas: u32,
        min: u32,
        key: KeyScheme,
        shape: impl Fn(PodBuilder) -> PodBuilder,
    ) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for i in 0..replicas {
            let name = format!("{group}-{i}");
            let pod = shape(PodBuilder::new(ns, &name).gang(key, group, min));
            self.create(pod).await?;
            names.push(name);
        }
        Ok(names)
    }

    /// How many of `names` are bound.
    pub async fn count_bound(&self, ns: &str, names: &[String]) -> Result<usize> {
        let bound = self.bound_pods(ns).await?;
        Ok(names.iter().filter(|n| bound.contains_key(*n)).count())
    }

    /// `Err(description)` if any node's bound pods request more than it has.
    pub async fn check_no_overcommit(&self) -> Result<std::result::Result<(), String>> {
        k8s::check_no_overcommit(&self.client).await
    }

    /// Cluster truth (no-overcommit): fails if any node's bound pods request more than it has.
    pub async fn assert_no_overcommit(&self) -> Result<()> {
        match self.check_no_overcommit().await? {
            Ok(()) => Ok(()),
            // Already starts with CLUSTER_TRUTH.
            Err(e) => Err(anyhow::anyhow!(e)),
        }
    }

    /// Waits until every pod in `names` is bound; returns name → (node, when first seen bound).
    /// Polls every 50 ms so the times are good to ~50 ms. A timeout is a cluster-truth failure.
    pub async fn wait_bound(
        &self,
        ns: &str,
        names: &[String],
        timeout: Duration,
    ) -> Result<BTreeMap<String, (String, Instant)>> {
        self.wait_bound_while_unbound(ns, names, &[], timeout).await
    }

    /// [`wait_bound`](Self::wait_bound), failing at once (cluster truth) when one of `unbound`
    /// is seen bound on a poll: for "the plain pods take the room and no member does", which
    /// is decided the moment a member binds, not when the plain pods' deadline runs out.
    pub async fn wait_bound_while_unbound(
        &self,
        ns: &str,
        names: &[String],
        unbound: &[String],
        timeout: Duration,
    ) -> Result<BTreeMap<String, (String, Instant)>> {
        let mut seen: BTreeMap<String, (String, Instant)> = BTreeMap::new();
        let deadline = Instant::now() + timeout;
        loop {
            let pods = self.pods(ns).await?;
            let now = Instant::now();
            for p in &pods {
                if let Some(node) = k8s::pod_node(p) {
                    let name = k8s::pod_name(p);
                    if unbound.iter().any(|u| u == name) {
                        return Err(truth(format!(
                            "{name} was bound to {node} while waiting for {names:?} in {ns} to be \
                             bound (none of {unbound:?} may be)"
                        )));
                    }
                    seen.entry(name.to_string())
                        .or_insert_with(|| (node.to_string(), now));
                }
            }
            if names.iter().all(|n| seen.contains_key(n)) {
                return Ok(names.iter().map(|n| (n.clone(), seen[n].clone())).collect());
            }
            if now >= deadline {
                let wanted: Vec<&Pod> = pods
                    .iter()
                    .filter(|p| names.iter().any(|n| n == k8s::pod_name(p)))
                    .collect();
                let wanted: Vec<Pod> = wanted.into_iter().cloned().collect();
                return Err(truth(format!(
                    "timed out after {timeout:?} waiting for {}/{} pods in {ns} to be bound: {}",
                    names.len() - names.iter().filter(|n| seen.contains_key(*n)).count(),
                    names.len(),
                    k8s::describe_pods(&wanted)
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The deadline of a wait on cluster truth that only muster brings about (the rest of a
    /// gang evicted, say), asked once the test's pods have settled. With muster: `deadline`. In a
    /// control run with no pod pending anywhere (each bound or being deleted), the truth is
    /// already decided: kube-scheduler has nothing left to schedule, so nothing left to change
    /// (it deletes pods only as victims of a pending preemptor), no controller runs in these
    /// clusters and muster is never consulted; the wait then runs [`CONTROL_TRUTH_WINDOW`] only.
    /// A pod still pending keeps `deadline` (kube-scheduler may yet act, after its back-off).
    pub async fn settled_deadline(&self, deadline: Duration) -> Result<Duration> {
        if !control_run_requested() {
            return Ok(deadline);
        }
        let pods = k8s::list_all_pods(&self.client).await?;
        let pending: Vec<String> = pods
            .iter()
            .filter(|p| k8s::pod_node(p).is_none() && p.metadata.deletion_timestamp.is_none())
            .map(|p| k8s::pod_name(p).to_string())
            .collect();
        Ok(if pending.is_empty() {
            deadline.min(CONTROL_TRUTH_WINDOW)
        } else {
            eprintln!(
                "muster-harness: control run: {pending:?} pending, full deadline {deadline:?}"
            );
            deadline
        })
    }

    /// Asserts that none of `names` gets bound during `window` (polling, not sleeping); a pod
    /// bound is a cluster-truth failure.
    pub async fn assert_none_bound_for(
        &self,
        ns: &str,
        names: &[String],
        window: Duration,
    ) -> Result<()> {
        holds_for(
            &format!("none of {names:?} in {ns} to be bound"),
            window,
            || async {
                let bound = self.bound_pods(ns).await?;
                let b: Vec<String> = names
                    .iter()
                    .filter_map(|n| bound.get(n).map(|node| format!("{n} → {node}")))
                    .collect();
                Ok(if b.is_empty() {
                    Ok(())
                } else {
                    Err(format!("{CLUSTER_TRUTH} bound: {}", b.join(", ")))
                })
            },
        )
        .await
    }

    /// Waits until some event of one of `pods` has a message containing `needle`; returns it.
    pub async fn wait_event_containing(
        &self,
        ns: &str,
        pods: &[String],
        needle: &str,
        timeout: Duration,
    ) -> Result<(String, EventSummary)> {
        self.wait_event_matching(ns, pods, &format!("containing {needle:?}"), timeout, |e| {
            e.message.contains(needle)
        })
        .await
    }

    /// Waits until some event of one of `pods` satisfies `pred` (described by `what`).
    pub async fn wait_event_matching(
        &self,
        ns: &str,
        pods: &[String],
        what: &str,
        timeout: Duration,
        pred: impl Fn(&EventSummary) -> bool,
    ) -> Result<(String, EventSummary)> {
        let pred = &pred;
        wait_for(
            &format!("an event {what} on {pods:?}"),
            timeout,
            || async move {
                let mut all = Vec::new();
                for p in pods {
                    for e in self.events_for(ns, p).await? {
                        if pred(&e) {
                            return Ok(Progress::Done((p.clone(), e)));
                        }
                        all.push(format!("{p}: {e}"));
                    }
                }
                Ok(Progress::NotYet(if all.is_empty() {
                    "no events".into()
                } else {
                    all.join(" | ")
                }))
            },
        )
        .await
    }

    /// Error context for a failed test: pods, events and process log tails.
    pub async fn diagnostics(&self, namespaces: &[&str]) -> String {
        let mut out = String::new();
        for ns in namespaces {
            if let Ok(pods) = self.pods(ns).await {
                out.push_str(&format!("pods in {ns}: {}\n", k8s::describe_pods(&pods)));
            }
            if let Ok(evs) = k8s::events_in(&self.client, ns).await {
                for (obj, e) in evs.iter().rev().take(15) {
                    out.push_str(&format!("  event {obj}: {e}\n"));
                }
            }
        }
        if let Ok(gangs) = self.muster.get("/gangs").await {
            out.push_str(&format!(
                "muster /gangs: HTTP {} {}\n",
                gangs.0,
                gangs.1.trim()
            ));
        }
        out.push_str(&format!(
            "--- muster log tail ({}):\n{}\n",
            self.muster.log_path().display(),
            self.muster.log_tail(25)
        ));
        out.push_str(&self.cp.log_tails(8));
        out
    }

    /// Passes `r` through, adding [`diagnostics`](Self::diagnostics) to an error.
    pub async fn report(&self, namespaces: &[&str], r: Result<()>) -> Result<()> {
        match r {
            Ok(()) => Ok(()),
            Err(e) => {
                let d = self.diagnostics(namespaces).await;
                Err(anyhow::anyhow!("{e:#}\n\n==== diagnostics ====\n{d}"))
            }
        }
    }
}
