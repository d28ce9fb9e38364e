//! Command-line flags (each also settable by environment variable), validated at start-up so a
//! bad value fails at once with the flag named.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::cluster::leader::decide::Timings;
use crate::cluster::leader::Election;
use crate::http::{ANSWER_MARGIN, DEFAULT_MAX_BODY_BYTES};
use crate::model::ModelConfig;

/// Which pods kube-scheduler sends to muster, as its scheduler config says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Scope {
    /// The default, as `kubectl apply -k deploy/` installs it:
    /// scheduler-config/muster-as-default-scheduler.yaml with deploy/gang-admission-policy.yaml:
    /// only pods carrying `muster.dev/gang` (`managedResources`); a gang member without it is
    /// warned about (Event GangMarkerMissing, metric muster_gang_markers_missing).
    GangMembers,
    /// The alternative for clusters without the policy: scheduler-config/muster-every-pod.yaml,
    /// every pod, no marker expected.
    EveryPod,
}

/// Which seats of a gang muster lets through are published as nominations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum NominateSeats {
    /// Only seats at risk: the member is pinned to its node (topology, pod affinity, spread,
    /// host ports, devices), kube-scheduler might offer it only nodes seats fill, or pods that
    /// do not pass through muster could take the seat's room. The other members float: muster's
    /// filter seats them on a node kube-scheduler offers (docs/design.md).
    AtRisk,
    /// Every seat (one more write per member).
    Always,
}

impl From<NominateSeats> for crate::model::gather::Nominations {
    fn from(n: NominateSeats) -> Self {
        match n {
            NominateSeats::AtRisk => crate::model::gather::Nominations::AtRisk,
            NominateSeats::Always => crate::model::gather::Nominations::EverySeat,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Gang scheduling for the stock kube-scheduler, as an HTTP extender.
#[derive(Clone, Debug, Parser)]
#[command(name = "muster", version, about)]
pub struct Args {
    /// Address to serve the extender verbs and /gangs on (HTTPS with --tls-cert-file or
    /// --self-managed-certs); also /healthz, /readyz and /metrics unless --ops-listen-addr is set.
    #[arg(long, env = "MUSTER_LISTEN_ADDR", default_value = "0.0.0.0:8888")]
    pub listen_addr: SocketAddr,

    /// Serve /healthz, /readyz and /metrics on this address instead, over plain HTTP (kubelet
    /// probes and Prometheus present no client certificate). Unset: one port serves everything.
    #[arg(long, env = "MUSTER_OPS_LISTEN_ADDR")]
    pub ops_listen_addr: Option<SocketAddr>,

    /// Also serve the read-only gang view, /gangs, on --ops-listen-addr (plain HTTP): what
    /// `kubectl muster` reads through the API server's service proxy. It names gang pods and
    /// nodes of every namespace to whoever reaches that port.
    #[arg(long, env = "MUSTER_OPS_GANGS", requires = "ops_listen_addr")]
    pub ops_gangs: bool,

    /// How often the leader writes gangs' phase, counts and reason back to their PodGroups'
    /// status (each write only when it changed); 0s: never.
    #[arg(long, env = "MUSTER_PODGROUP_STATUS_INTERVAL", default_value = "2s", value_parser = parse_status_interval)]
    pub podgroup_status_interval: Duration,

    /// In those same rounds, move Volcano PodGroups without members from Pending to Inqueue
    /// when their spec.minResources (if any) fit the cluster's free allocatable in sum, so
    /// Volcano's job controller creates their pods. false where Volcano's scheduler still
    /// runs its enqueue action.
    #[arg(long, env = "MUSTER_ENQUEUE_VOLCANO_PODGROUPS", default_value_t = true, action = clap::ArgAction::Set)]
    pub enqueue_volcano_podgroups: bool,

    /// When kube-scheduler preempts a running gang member without muster's say (muster away,
    /// or its answer to the ignorable preempt-only entry late), the leader evicts the rest of
    /// that gang (disruption mode gang), so it is disrupted whole. false: muster only ever
    /// evicts for its own preempt decisions.
    #[arg(long, env = "MUSTER_EVICT_GANGS_PREEMPTED_WITHOUT_MUSTER", default_value_t = true, action = clap::ArgAction::Set)]
    pub evict_gangs_preempted_without_muster: bool,

    /// Path under which the verbs are served: the path part of the extender `urlPrefix`
    /// ("" serves /filter, /prioritize, /bind).
    #[arg(long, env = "MUSTER_URL_PREFIX", default_value = "", value_parser = parse_prefix)]
    pub url_prefix: String,

    /// kubeconfig file; without it, muster uses $KUBECONFIG, ~/.kube/config or the in-cluster
    /// service account, in that order.
    #[arg(long, env = "MUSTER_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// How long a gang may hold seats without reaching quorum before all are released
    /// (per gang: annotation muster.dev/gang-timeout).
    #[arg(long, env = "MUSTER_GANG_TIMEOUT", default_value = "60s", value_parser = parse_positive_duration)]
    pub gang_timeout: Duration,

    /// On an autoscaled cluster (Karpenter with its `CapacityBuffer` feature gate): for a gang
    /// gathered behind muster's gate that does not fit for room alone on the nodes that exist,
    /// ask the autoscaler for room for the whole gang, as one CapacityBuffer
    /// (autoscaling.x-k8s.io/v1beta1) and its PodTemplate in the gang's namespace, deleted once
    /// the gang fits, is deleted or gives up. Off by default: it creates objects in users'
    /// namespaces, and needs the CRD and deploy/capacity-buffers-rbac.yaml's rules for it (the
    /// Helm chart's capacityBuffers.enabled renders the flag and the RBAC).
    #[arg(long, env = "MUSTER_CAPACITY_BUFFERS", default_value_t = false, num_args = 0..=1,
          default_missing_value = "true", action = clap::ArgAction::Set)]
    pub capacity_buffers: bool,

    /// How long a gang's room stays asked of the autoscaler (--capacity-buffers): past it the
    /// buffer is deleted and the gang is told the nodes did not come.
    #[arg(long, env = "MUSTER_CAPACITY_BUFFER_TIMEOUT", default_value = "5m", value_parser = parse_positive_duration)]
    pub capacity_buffer_timeout: Duration,

    /// How long a gang that timed out is refused before it may take seats again.
    #[arg(long, env = "MUSTER_GANG_BACKOFF", default_value = "10s", value_parser = parse_duration)]
    pub gang_backoff: Duration,

    /// Room for members of a gang not created yet is held only this long after the newest
    /// member appeared; a gang without a declared size decides its quorum only after it.
    #[arg(long, env = "MUSTER_CREATION_WINDOW", default_value = "5s", value_parser = parse_creation_window)]
    pub creation_window: Duration,

    /// How long a bind call of a gang member below quorum is held open for the rest of the gang
    /// (0s: answer "waiting" at once). At most --extender-http-timeout minus 1s: an answer
    /// kube-scheduler no longer waits for is lost, and the call counts as a failed binding.
    #[arg(long, env = "MUSTER_BIND_WAIT", default_value = "8s", value_parser = parse_bind_wait)]
    pub bind_wait: Duration,

    /// How often API discovery is asked which PodGroup APIs (Volcano, scheduler-plugins,
    /// Kubernetes) the cluster serves: a CRD installed or removed while muster runs is noticed
    /// within this.
    #[arg(long, env = "MUSTER_POD_GROUP_DISCOVERY_INTERVAL", default_value = "30s", value_parser = parse_discovery_interval)]
    pub pod_group_discovery_interval: Duration,
    /// The `httpTimeout` kube-scheduler's configuration gives muster (10s in scheduler-config/):
    /// every bind call, held or waiting for a binding muster is making, is answered within it.
    #[arg(long, env = "MUSTER_EXTENDER_HTTP_TIMEOUT", default_value = "10s", value_parser = parse_extender_timeout)]
    pub extender_http_timeout: Duration,

    /// Largest request body accepted, in bytes.
    #[arg(long, env = "MUSTER_MAX_BODY_BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES,
          value_parser = parse_body_limit)]
    pub max_body_bytes: usize,

    /// Which pods kube-scheduler sends to muster: `gang-members`, the default and what
    /// `kubectl apply -k deploy/` installs (deploy/gang-admission-policy.yaml marks and gates
    /// gang members; the scheduler config names muster.dev/gang in managedResources; plain pods
    /// never wait for muster), or the alternative `every-pod`, for clusters without the policy
    /// (scheduler-config/muster-every-pod.yaml; every pod waits for muster). Either way muster
    /// removes its own scheduling gate, muster.dev/gather, from gangs it can place.
    #[arg(long, env = "MUSTER_SCOPE", value_enum, default_value = "gang-members")]
    pub scope: Scope,

    /// In the gang-members mode, publish the marker resource muster.dev/gang in every node's
    /// status.capacity and status.allocatable (one nodes/status patch per node, again only if
    /// something removes it), so that kube-scheduler retries a gang member it rejected for room
    /// when a node is added or grows: its NodeResourcesFit queueing hint checks node events
    /// without the scheduler config's ignoredByScheduler resources. false: no write to nodes;
    /// such a member then waits for a pod deletion or kube-scheduler's 5-minute flush.
    #[arg(long, env = "MUSTER_PUBLISH_NODE_MARKER", default_value_t = true, action = clap::ArgAction::Set)]
    pub publish_node_marker: bool,

    /// Which seats of a gang let through are published as the members' nominations
    /// (`status.nominatedNodeName`, one write each): `at-risk`, only seats kube-scheduler
    /// might not route the member to or pods outside muster might take (the other members
    /// float: muster's filter seats them on a node kube-scheduler offers), or `always`.
    #[arg(
        long,
        env = "MUSTER_NOMINATE_SEATS",
        value_enum,
        default_value = "at-risk"
    )]
    pub nominate_seats: NominateSeats,

    /// The `schedulerName`s of the kube-schedulers that call muster, comma-separated
    /// (deploy/second-scheduler passes its own, muster-scheduler). A gang-keyed pod of any
    /// other scheduler (Volcano's, coscheduling's, ...) is left alone as a plain pod, with a
    /// Warning Event GangKeysIgnored; the admission policy marks only these schedulers' pods.
    #[arg(long, env = "MUSTER_SCHEDULER_NAMES", value_delimiter = ',', default_value = "default-scheduler", value_parser = parse_scheduler_name)]
    pub scheduler_names: Vec<String>,

    /// Log filter, e.g. "info" or "muster=debug,kube=warn".
    #[arg(long, env = "MUSTER_LOG_LEVEL", default_value = "info", value_parser = parse_log_filter)]
    pub log_level: String,

    /// Serve HTTPS with this PEM certificate (chain); re-read when the file changes.
    #[arg(long, env = "MUSTER_TLS_CERT_FILE", requires = "tls_key_file")]
    pub tls_cert_file: Option<PathBuf>,

    /// PEM private key of --tls-cert-file.
    #[arg(long, env = "MUSTER_TLS_KEY_FILE", requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,

    /// Require clients (kube-scheduler) to present a certificate signed by this PEM CA.
    #[arg(long, env = "MUSTER_TLS_CLIENT_CA_FILE", requires = "tls_cert_file")]
    pub tls_client_ca_file: Option<PathBuf>,

    /// Create a CA, muster's serving certificate and kube-scheduler's client certificate in
    /// Secrets of --certs-namespace (or reuse them), serve HTTPS with them requiring the client
    /// certificate, and renew both leaf certificates before they expire.
    #[arg(long, env = "MUSTER_SELF_MANAGED_CERTS", conflicts_with_all = ["tls_cert_file", "tls_client_ca_file"])]
    pub self_managed_certs: bool,

    /// Namespace of the certificate Secrets (muster's own namespace).
    #[arg(long, env = "MUSTER_CERTS_NAMESPACE", default_value = "muster-system", value_parser = parse_dns_label)]
    pub certs_namespace: String,

    /// Secret holding the CA certificate and key (type kubernetes.io/tls).
    #[arg(long, env = "MUSTER_CA_SECRET", default_value = "muster-ca", value_parser = parse_dns_subdomain)]
    pub ca_secret: String,

    /// Secret holding muster's serving certificate (tls.crt, tls.key, ca.crt).
    #[arg(long, env = "MUSTER_SERVING_CERT_SECRET", default_value = "muster-serving-cert", value_parser = parse_dns_subdomain)]
    pub serving_cert_secret: String,

    /// Secret holding kube-scheduler's client certificate (tls.crt, tls.key, ca.crt); the second
    /// scheduler mounts it.
    #[arg(long, env = "MUSTER_CLIENT_CERT_SECRET", default_value = "muster-scheduler-client-cert", value_parser = parse_dns_subdomain)]
    pub client_cert_secret: String,

    /// Names (and IP addresses) the serving certificate is valid for, comma-separated. Default:
    /// the Service's names muster, muster.<ns>, muster.<ns>.svc, muster.<ns>.svc.cluster.local.
    #[arg(long, env = "MUSTER_SERVING_CERT_HOSTS", value_delimiter = ',', value_parser = parse_host)]
    pub serving_cert_hosts: Vec<String>,

    /// How long each leaf certificate is valid; it is renewed when two thirds of it have passed.
    #[arg(long, env = "MUSTER_CERT_LIFETIME", default_value = "2160h", value_parser = parse_cert_lifetime)]
    pub cert_lifetime: Duration,

    /// Directory where the serving certificate, its key and the CA certificate are written for
    /// the HTTPS listener (a writable emptyDir in the pod).
    #[arg(
        long,
        env = "MUSTER_CERTS_DIR",
        default_value = "/var/run/muster/certs"
    )]
    pub certs_dir: PathBuf,

    /// Log line format.
    #[arg(long, env = "MUSTER_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// Run as one of several replicas: only the holder of a coordination.k8s.io Lease answers
    /// the verbs; the others keep warm caches, are Ready too (the Service routes by the leader
    /// label, see --pod-name), refuse any verb call, and take over when it goes.
    #[arg(long, env = "MUSTER_LEADER_ELECT")]
    pub leader_elect: bool,

    /// Name of the leader Lease.
    #[arg(long, env = "MUSTER_LEADER_ELECT_LEASE_NAME", default_value = "muster")]
    pub leader_elect_lease_name: String,

    /// Namespace of the leader Lease (the shipped manifests set muster's own).
    #[arg(
        long,
        env = "MUSTER_LEADER_ELECT_LEASE_NAMESPACE",
        default_value = "kube-system"
    )]
    pub leader_elect_lease_namespace: String,

    /// How long a standby waits, after last seeing the Lease renewed, before taking it.
    #[arg(long, env = "MUSTER_LEADER_ELECT_LEASE_DURATION", default_value = "3s", value_parser = parse_positive_duration)]
    pub leader_elect_lease_duration: Duration,

    /// How long the leader keeps deciding without a successful renewal; shorter than the
    /// lease duration, so it stops before a standby may take over.
    #[arg(long, env = "MUSTER_LEADER_ELECT_RENEW_DEADLINE", default_value = "2s", value_parser = parse_positive_duration)]
    pub leader_elect_renew_deadline: Duration,

    /// How often the leader renews, and a standby tries for, the Lease.
    #[arg(long, env = "MUSTER_LEADER_ELECT_RETRY_PERIOD", default_value = "500ms", value_parser = parse_positive_duration)]
    pub leader_elect_retry_period: Duration,

    /// This replica's name in the Lease (default: the pod or host name and a random suffix).
    #[arg(long, env = "MUSTER_LEADER_ELECT_IDENTITY")]
    pub leader_elect_identity: Option<String>,

    /// The pod this replica runs in (the shipped manifests set it from the downward API): the
    /// replica that decides labels it muster.dev/leader=true, and the Service selects on that
    /// label. Only with --pod-namespace; alone it names this instance in Events and the Lease.
    #[arg(long, env = "POD_NAME")]
    pub pod_name: Option<String>,

    /// The namespace of --pod-name.
    #[arg(long, env = "POD_NAMESPACE")]
    pub pod_namespace: Option<String>,
}

impl Args {
    pub fn tls(&self) -> Option<crate::tls::TlsFiles> {
        match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(cert), Some(key)) => Some(crate::tls::TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: self.tls_client_ca_file.clone(),
            }),
            _ => None,
        }
    }

    /// The leader election to take part in, if `--leader-elect`; bad durations are named.
    pub fn election(&self) -> Result<Option<Election>, String> {
        if !self.leader_elect {
            return Ok(None);
        }
        let timings = Timings {
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
        };
        timings.validate()?;
        Ok(Some(Election {
            namespace: self.leader_elect_lease_namespace.clone(),
            name: self.leader_elect_lease_name.clone(),
            identity: self
                .leader_elect_identity
                .clone()
                .unwrap_or_else(crate::cluster::leader::default_identity),
            timings,
        }))
    }

    /// The pod to carry the leader label, if this replica runs in one and knows its namespace
    /// (POD_NAME alone, as manifests before the leader label set it, labels nothing).
    pub fn own_pod(&self) -> Option<crate::cluster::leader::label::OwnPod> {
        match (&self.pod_name, &self.pod_namespace) {
            (Some(name), Some(namespace)) if !name.is_empty() && !namespace.is_empty() => {
                Some(crate::cluster::leader::label::OwnPod {
                    namespace: namespace.clone(),
                    name: name.clone(),
                })
            }
            _ => None,
        }
    }

    /// Names the self-managed serving certificate is valid for.
    pub fn serving_hosts(&self) -> Vec<String> {
        if !self.serving_cert_hosts.is_empty() {
            return self.serving_cert_hosts.clone();
        }
        let ns = &self.certs_namespace;
        vec![
            "muster".into(),
            format!("muster.{ns}"),
            format!("muster.{ns}.svc"),
            format!("muster.{ns}.svc.cluster.local"),
        ]
    }

    /// A second listener must not take the verbs' port.
    pub fn check(&self) -> Result<(), String> {
        let latest = self.extender_http_timeout.saturating_sub(ANSWER_MARGIN);
        if self.bind_wait > latest {
            return Err(format!(
                "--bind-wait {} must be at most --extender-http-timeout {} minus {}: \
                 kube-scheduler stops waiting for the answer then",
                humantime::format_duration(self.bind_wait),
                humantime::format_duration(self.extender_http_timeout),
                humantime::format_duration(ANSWER_MARGIN)
            ));
        }
        match self.ops_listen_addr {
            Some(ops) if ops.port() == self.listen_addr.port() => Err(format!(
                "--ops-listen-addr {ops} uses the port of --listen-addr {}; pick another port",
                self.listen_addr
            )),
            _ => Ok(()),
        }
    }

    pub fn model_config(&self) -> ModelConfig {
        ModelConfig {
            default_timeout: self.gang_timeout,
            backoff: self.gang_backoff,
            creation_window: self.creation_window,
            evict_after_unseen_preemption: self.evict_gangs_preempted_without_muster,
            scheduler_names: self
                .scheduler_names
                .iter()
                .map(|n| std::sync::Arc::from(n.as_str()))
                .collect(),
            capacity_buffers: self
                .capacity_buffers
                .then_some(self.capacity_buffer_timeout),
            ..ModelConfig::default()
        }
    }
}

fn parse_prefix(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s.is_empty() || s == "/" {
        return Ok(String::new());
    }
    if !s.starts_with('/') {
        return Err(format!("must start with '/' (got {s:?}), e.g. /muster"));
    }
    if s.contains(['?', '#', ' ']) {
        return Err("must be a plain path without '?', '#' or spaces".into());
    }
    Ok(s.trim_end_matches('/').to_string())
}

/// A namespace name: an RFC 1123 label.
fn parse_dns_label(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?} is not a namespace name (lower-case letters, digits and '-', at most 63)"
        ))
    }
}

/// A Secret name: an RFC 1123 subdomain.
fn parse_dns_subdomain(s: &str) -> Result<String, String> {
    let ok = !s.is_empty() && s.len() <= 253 && s.split('.').all(|l| parse_dns_label(l).is_ok());
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?} is not a Secret name (lower-case letters, digits, '-' and '.')"
        ))
    }
}

/// A `schedulerName`: any non-empty string without spaces (the API server does not validate
/// it: "field corev1.PodSpec.SchedulerName has no validation",
/// pkg/apis/core/v1/zz_generated.validations.go:1310, v1.37.2).
fn parse_scheduler_name(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s.is_empty() || s.contains(char::is_whitespace) {
        return Err(format!(
            "{s:?} is not a schedulerName (a non-empty name without spaces)"
        ));
    }
    Ok(s.to_string())
}

/// A certificate host: an IP address or a DNS name (lower-cased).
fn parse_host(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s.parse::<std::net::IpAddr>().is_ok() {
        return Ok(s.to_string());
    }
    let lower = s.to_ascii_lowercase();
    parse_dns_subdomain(&lower)
        .map_err(|_| format!("{s:?} is neither an IP address nor a DNS name"))
}

fn parse_cert_lifetime(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d < Duration::from_secs(30) => {
            Err("must be at least 30s (renewal happens after two thirds of it)".into())
        }
        d => Ok(d),
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim()).map_err(|e| format!("{e} (use e.g. 30s, 2m, 1h)"))
}

fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d.is_zero() => Err("must be longer than zero".into()),
        d => Ok(d),
    }
}

fn parse_bind_wait(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d > Duration::from_secs(60) => {
            Err("must be at most 60s, and below the extender's httpTimeout".into())
        }
        d => Ok(d),
    }
}

fn parse_extender_timeout(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d < Duration::from_secs(2) => {
            Err("must be at least 2s (kube-scheduler's httpTimeout for muster)".into())
        }
        d => Ok(d),
    }
}

fn parse_creation_window(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d > Duration::from_secs(600) => Err(
            "must be at most 10m: room held for pods that may never come is taken from others"
                .into(),
        ),
        d => Ok(d),
    }
}

fn parse_status_interval(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d.is_zero() || d >= Duration::from_millis(200) => Ok(d),
        _ => Err("must be 0s (never) or at least 200ms".into()),
    }
}

fn parse_discovery_interval(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d < Duration::from_secs(1) => {
            Err("must be at least 1s: each round asks the API server three times".into())
        }
        d => Ok(d),
    }
}

fn parse_body_limit(s: &str) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("must be a number of bytes, got {s:?}"))?;
    if n < 1024 {
        return Err(
            "must be at least 1024 bytes: kube-scheduler's smallest request is larger".into(),
        );
    }
    Ok(n)
}

fn parse_log_filter(s: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::try_new(s)
        .map(|_| s.to_string())
        .map_err(|e| format!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn parse(args: &[&str]) -> Result<Args, String> {
        let mut argv = vec!["muster"];
        argv.extend_from_slice(args);
        Args::try_parse_from(argv).map_err(|e| e.to_string())
    }

    #[test]
    fn the_own_pod_is_named_by_both_flags() {
        assert_eq!(parse(&[]).unwrap().own_pod(), None);
        let a = parse(&["--pod-name", "muster-7", "--pod-namespace", "muster-system"]).unwrap();
        let pod = a.own_pod().unwrap();
        assert_eq!(
            (pod.namespace.as_str(), pod.name.as_str()),
            ("muster-system", "muster-7")
        );
        assert_eq!(parse(&["--pod-name", "muster-7"]).unwrap().own_pod(), None);
    }

    #[test]
    fn scheduler_names_default_to_the_default_scheduler_and_bad_ones_are_refused() {
        let names = |a: Args| a.model_config().scheduler_names;
        assert_eq!(names(parse(&[]).unwrap()), [Arc::from("default-scheduler")]);
        assert_eq!(
            names(parse(&["--scheduler-names=muster-scheduler,gpu.sched"]).unwrap()),
            [Arc::from("muster-scheduler"), Arc::from("gpu.sched")]
        );
        let e = parse(&["--scheduler-names=muster-scheduler,"]).unwrap_err();
        assert!(
            e.contains("--scheduler-names") && e.contains("is not a schedulerName"),
            "{e}"
        );
    }

    #[test]
    fn defaults_are_sane() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.listen_addr.port(), 8888);
        assert_eq!(a.url_prefix, "");
        assert_eq!(a.gang_timeout, Duration::from_secs(60));
        assert_eq!(a.creation_window, Duration::from_secs(5));
        assert_eq!(a.model_config().creation_window, Duration::from_secs(5));
        assert_eq!(a.max_body_bytes, 32 << 20);
        assert_eq!(a.log_format, LogFormat::Text);
        assert_eq!(a.pod_group_discovery_interval, Duration::from_secs(30));
        assert_eq!(a.podgroup_status_interval, Duration::from_secs(2));
        assert!(!a.ops_gangs);
        assert!(a.enqueue_volcano_podgroups);
    }

    #[test]
    fn evicting_gangs_preempted_without_muster_is_on_by_default_and_can_be_turned_off() {
        let a = parse(&[]).unwrap();
        assert!(a.model_config().evict_after_unseen_preemption);
        let a = parse(&["--evict-gangs-preempted-without-muster=false"]).unwrap();
        assert!(!a.model_config().evict_after_unseen_preemption);
        assert!(parse(&["--evict-gangs-preempted-without-muster=sometimes"]).is_err());
    }

    #[test]
    fn enqueue_volcano_podgroups_can_be_turned_off() {
        let a = parse(&["--enqueue-volcano-podgroups=false"]).unwrap();
        assert!(!a.enqueue_volcano_podgroups);
        assert!(parse(&["--enqueue-volcano-podgroups=maybe"]).is_err());
    }

    #[test]
    fn podgroup_status_interval_and_ops_gangs() {
        assert!(parse(&["--podgroup-status-interval=0s"]).is_ok());
        assert!(parse(&["--podgroup-status-interval=10ms"]).is_err());
        assert!(parse(&["--ops-gangs"]).is_err(), "needs --ops-listen-addr");
        assert!(parse(&["--ops-gangs", "--ops-listen-addr=0.0.0.0:8889"]).is_ok());
    }

    #[test]
    fn bad_flags_are_named() {
        let cases = [
            (vec!["--listen-addr", "nowhere"], "--listen-addr"),
            (vec!["--url-prefix", "muster"], "must start with '/'"),
            (vec!["--gang-timeout", "0s"], "--gang-timeout"),
            (vec!["--gang-timeout", "soon"], "--gang-timeout"),
            (vec!["--max-body-bytes", "10"], "--max-body-bytes"),
            (vec!["--log-level", "muster=loud"], "--log-level"),
            (vec!["--log-format", "xml"], "--log-format"),
            (vec!["--bind-wait", "5m"], "--bind-wait"),
            (vec!["--creation-window", "1h"], "--creation-window"),
            (vec!["--creation-window", "later"], "--creation-window"),
            (
                vec!["--pod-group-discovery-interval", "100ms"],
                "--pod-group-discovery-interval",
            ),
            (vec!["--tls-cert-file", "c.pem"], "--tls-key-file"),
            (vec!["--tls-client-ca-file", "ca.pem"], "--tls-cert-file"),
            (vec!["--ops-listen-addr", "nowhere"], "--ops-listen-addr"),
            (
                vec![
                    "--self-managed-certs",
                    "--tls-cert-file",
                    "c",
                    "--tls-key-file",
                    "k",
                ],
                "--tls-cert-file",
            ),
            (vec!["--certs-namespace", "Muster"], "--certs-namespace"),
            (vec!["--ca-secret", "a_b"], "--ca-secret"),
            (vec!["--serving-cert-hosts", "a b"], "--serving-cert-hosts"),
            (vec!["--cert-lifetime", "10s"], "--cert-lifetime"),
        ];
        for (args, want) in cases {
            let e = parse(&args).unwrap_err();
            assert!(e.contains(want), "{args:?}: {e}");
        }
    }

    #[test]
    fn leader_election_is_off_by_default_with_musters_timings() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.election(), Ok(None));
        let a = parse(&["--leader-elect", "--leader-elect-identity", "a"]).unwrap();
        let e = a.election().unwrap().unwrap();
        assert_eq!(
            (e.namespace.as_str(), e.name.as_str()),
            ("kube-system", "muster")
        );
        assert_eq!(e.identity, "a");
        assert_eq!(e.timings, Timings::default());
        let a = parse(&["--leader-elect", "--leader-elect-renew-deadline", "20s"]).unwrap();
        assert!(a
            .election()
            .unwrap_err()
            .contains("--leader-elect-lease-duration"));
        let e = parse(&["--leader-elect-retry-period", "0s"]).unwrap_err();
        assert!(e.contains("--leader-elect-retry-period"), "{e}");
    }

    #[test]
    fn bind_wait_stays_within_kube_schedulers_http_timeout() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.bind_wait, Duration::from_secs(8));
        assert_eq!(a.extender_http_timeout, Duration::from_secs(10));
        assert_eq!(a.check(), Ok(()));
        let a = parse(&["--bind-wait", "9s"]).unwrap();
        assert_eq!(a.check(), Ok(()), "the last second is left for the answer");
        let e = parse(&["--bind-wait", "9500ms"])
            .unwrap()
            .check()
            .unwrap_err();
        assert_eq!(
            e,
            "--bind-wait 9s 500ms must be at most --extender-http-timeout 10s minus 1s: \
             kube-scheduler stops waiting for the answer then"
        );
        let a = parse(&["--bind-wait", "25s", "--extender-http-timeout", "30s"]).unwrap();
        assert_eq!(a.check(), Ok(()));
        let e = parse(&["--extender-http-timeout", "1s"]).unwrap_err();
        assert!(e.contains("--extender-http-timeout"), "{e}");
    }

    #[test]
    fn ops_port_must_differ_from_the_verbs_port() {
        let a = parse(&[
            "--listen-addr=0.0.0.0:8888",
            "--ops-listen-addr=127.0.0.1:8888",
        ])
        .unwrap();
        let e = a.check().unwrap_err();
        assert!(e.contains("--ops-listen-addr 127.0.0.1:8888"), "{e}");
        let a = parse(&["--ops-listen-addr=0.0.0.0:8889"]).unwrap();
        assert_eq!(a.check(), Ok(()));
        assert_eq!(parse(&[]).unwrap().ops_listen_addr, None);
    }

    #[test]
    fn serving_hosts_default_to_the_service_names() {
        let a = parse(&["--certs-namespace=gangs"]).unwrap();
        assert_eq!(
            a.serving_hosts(),
            [
                "muster",
                "muster.gangs",
                "muster.gangs.svc",
                "muster.gangs.svc.cluster.local"
            ]
        );
        let a = parse(&["--serving-cert-hosts=127.0.0.1,Muster.Example"]).unwrap();
        assert_eq!(a.serving_hosts(), ["127.0.0.1", "muster.example"]);
    }

    #[test]
    fn prefix_is_normalised() {
        assert_eq!(
            parse(&["--url-prefix", "/muster/"]).unwrap().url_prefix,
            "/muster"
        );
        assert_eq!(parse(&["--url-prefix", "/"]).unwrap().url_prefix, "");
    }
}
