//! `muster-harness`: a real local Kubernetes control plane (etcd, kube-apiserver and the stock
//! kube-scheduler, built from source and cached by `tests/cluster/build-control-plane.sh`) plus the
//! muster process under test, for end-to-end tests and the `muster-local` command.
//!
//! Everything listens on 127.0.0.1 only, on free ports, in a fresh directory per cluster; dropping
//! a handle kills its processes (and removes the directory unless `MUSTER_KEEP_DATA=1`). Under
//! `tests/e2e-run` the etcd + kube-apiserver pair is the test slot's, shared by the tests the slot
//! runs one after another and reset before each ([`shared`]).
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use muster_harness::{Cluster, NodeShape};
//! let cluster = Cluster::start("target/debug/muster").await?; // path of the muster binary
//! cluster.add_node("node-1", NodeShape::cpu("1")).await?;
//! # Ok(()) }
//! ```
//!
//! Options ([`ClusterOptions`]): which pods pass through muster (default: gang members only, as
//! `kubectl apply -k deploy/` installs, with `scheduler-config/muster-as-default-scheduler.yaml`
//! and the admission policy; [`ClusterOptions::every_pod`] for the alternative), the scheduler
//! config file (`scheduler-config/<name>`), and HTTPS between kube-scheduler and muster (a CA, a
//! serving certificate for 127.0.0.1 and a client certificate made with `openssl`; see [`tls`]):
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use muster_harness::{Cluster, ClusterOptions};
//! let opts = ClusterOptions::new("target/debug/muster")
//!     .scheduler_config("muster-second-scheduler.yaml")
//!     .tls(true); // true: muster requires a client certificate signed by the CA
//! let cluster = Cluster::start_with(opts).await?;
//! let tls = cluster.tls().unwrap(); // CA, server and client files; rotate_server_cert()
//! # let _ = tls; Ok(()) }
//! ```
//!
//! **PodGroups**: [`ClusterOptions::crd`] installs a CRD of `tests/crds/` before muster starts
//! (Volcano's, scheduler-plugins'), [`ClusterOptions::kubernetes_pod_groups`] has the API server
//! serve Kubernetes' own; [`pod_groups`] writes PodGroup objects as each project's controller does.
//!
//! **Control run**: with `MUSTER_E2E_CONTROL=1` every [`Cluster`] starts kube-scheduler without
//! the config's `extenders:` (muster runs, unconsulted), so `tests/control-run` can require every
//! gang e2e test to fail without muster, and counts a failure only when a cluster-truth check
//! raised it ([`truth`]: pods' nodes, node use, evictions, kube-scheduler's Events; not muster's
//! own Events, `/gangs` or metrics). [`gangs`] reads muster's own `/gangs` view for tests.
//!
//! muster runs as it is deployed: as ServiceAccount `muster-system/muster` with the ClusterRole
//! of `deploy/rbac.yaml` (a TokenRequest token; see [`rbac`]), so every test proves the shipped
//! RBAC suffices. [`ClusterOptions::admin_muster`] gives it the admin kubeconfig instead.
//!
//! **High availability**: [`Forwarder`] plays a Service in front of several muster replicas (each
//! new connection goes to the Ready one) or a cuttable link to the API server; start a replica
//! that may be a standby with `MusterOptions::ready_path = "/healthz"` (see `tests/e2e/ha.rs`).

pub mod api_proxy;
pub mod checks;
pub mod cluster;
pub mod control_plane;
pub mod dra;
pub mod forward;
pub mod gangs;
pub mod jobset;
pub mod k8s;
pub mod karpenter;
pub mod kueue;
pub mod muster;
pub mod paths;
pub mod pod_groups;
pub mod policy;
pub mod process;
pub mod rbac;
pub mod shared;
pub mod timing;
pub mod tls;
pub mod trainer;
pub mod truth;
pub mod wait;
pub mod webhooks;

pub use api_proxy::{ApiProxy, Fault, Pattern, Rule};
pub use checks::{names, pod_names, spread, PLACE, REASON, TOGETHER, WINDOW};
pub use cluster::{
    control_run_requested, Cluster, ClusterOptions, MusterIdentity, Scope, TlsOptions,
    CONTROL_RUN_ENV,
};
pub use control_plane::{ControlPlane, ControlPlaneOptions, SchedulerOptions};
pub use forward::Forwarder;
pub use gangs::{GangView, MemberView};
pub use k8s::{KeyScheme, NodeShape, PodBuilder};
pub use muster::{Muster, MusterOptions};
pub use tls::{HttpsClient, MusterTls};
pub use truth::{
    muster_view_is_checked, truth, PartialGang, TruthContext, CLUSTER_TRUTH, CONTROL_TRUTH_WINDOW,
};
pub use wait::{holds_for, wait_for, Progress, Timer};
