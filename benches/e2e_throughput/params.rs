//! What one run measures: the configurations to compare and every knob of the workload, read
//! from `E2E_*` environment variables (defaults differ between the smoke and the full bench).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use muster_harness::paths::repo_root;

/// The profile of scheduler-config/muster-second-scheduler.yaml, which gang members of
/// configuration (d) ask for.
pub const SECOND_SCHEDULER_NAME: &str = "muster-scheduler";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Vanilla,
    /// kube-scheduler + muster as `kubectl apply -k deploy/` installs it: the admission policy
    /// marks and gates gang members, kube-scheduler runs
    /// scheduler-config/muster-as-default-scheduler.yaml (only gang members reach muster),
    /// muster `--scope=gang-members`.
    Muster,
    Native,
    /// Vanilla with kube-scheduler's `OpportunisticBatching` feature gate off: what vanilla
    /// would do with batching disabled, as any extender in a profile disables it
    /// (`computeBatchablePlugins`, pkg/scheduler/framework/runtime/framework.go:836 in
    /// v1.37.2). Its ratio to vanilla is the ceiling an extender sets for plain pods.
    VanillaUnbatched,
    /// muster behind a second kube-scheduler (`muster-scheduler`), installed as deploy/ and
    /// deploy/second-scheduler/ install it: the admission policy marks and gates gang members,
    /// muster runs `--scope=gang-members`, gang members ask for `schedulerName:
    /// muster-scheduler`, and the stock default scheduler (no extender) places the plain pods
    /// beside it. The two schedulers share the nodes without seeing each other's plans: this
    /// mode measures what that race costs (overcommitted nodes, refused bindings).
    MusterSecond,
    /// The alternative to the shipped install: every pod through muster
    /// (scheduler-config/muster-every-pod.yaml, `--scope=every-pod`, no policy).
    MusterEveryPod,
    /// (b) with every seat published as a nomination (`--nominate-seats=always`), where (b)
    /// publishes only the seats at risk: what the members that float save, and cost.
    MusterNominateAll,
    /// (b) with kube-scheduler calling muster over plain HTTP/1.1 (every other configuration
    /// with muster is called over HTTPS with a client certificate, HTTP/2 offered, as deploy/
    /// installs it): what the transport costs.
    MusterHttp,
}

impl Mode {
    /// Whether muster runs in this configuration.
    pub fn has_muster(self) -> bool {
        matches!(
            self,
            Mode::Muster
                | Mode::MusterSecond
                | Mode::MusterEveryPod
                | Mode::MusterNominateAll
                | Mode::MusterHttp
        )
    }

    pub fn slug(self) -> &'static str {
        match self {
            Mode::Vanilla => "vanilla",
            Mode::Muster => "muster",
            Mode::Native => "native",
            Mode::VanillaUnbatched => "vanilla-unbatched",
            Mode::MusterSecond => "muster-second",
            Mode::MusterEveryPod => "muster-every-pod",
            Mode::MusterNominateAll => "muster-nominate-all",
            Mode::MusterHttp => "muster-http",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Mode::Vanilla => "(a) vanilla kube-scheduler",
            Mode::Muster => "(b) kube-scheduler + muster",
            Mode::Native => "(c) native gang scheduling",
            Mode::VanillaUnbatched => "(a') vanilla, OpportunisticBatching off",
            Mode::MusterSecond => "(d) muster behind a second scheduler",
            Mode::MusterEveryPod => "(e) kube-scheduler + muster, every pod through it",
            Mode::MusterNominateAll => "(b') kube-scheduler + muster, every seat nominated",
            Mode::MusterHttp => "(b'') kube-scheduler + muster over plain HTTP/1.1",
        }
    }

    /// `var` names the environment variable the value came from, for the error.
    pub fn parse(var: &str, s: &str) -> Result<Self> {
        match s.trim() {
            "vanilla" | "a" => Ok(Mode::Vanilla),
            "muster" | "b" => Ok(Mode::Muster),
            "native" | "c" => Ok(Mode::Native),
            "vanilla-unbatched" => Ok(Mode::VanillaUnbatched),
            "muster-second" | "d" => Ok(Mode::MusterSecond),
            "muster-every-pod" | "e" => Ok(Mode::MusterEveryPod),
            "muster-nominate-all" | "b'" => Ok(Mode::MusterNominateAll),
            "muster-http" | "b''" => Ok(Mode::MusterHttp),
            other => {
                bail!("{var}: unknown configuration {other:?} (vanilla, muster, native, vanilla-unbatched, muster-second, muster-every-pod, muster-nominate-all, muster-http)")
            }
        }
    }
}

/// A comma-separated list of configurations from `var`.
fn modes_from_env(var: &str, default: &str) -> Result<Vec<Mode>> {
    env_or(var, default.to_string())?
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| Mode::parse(var, s))
        .collect()
}

#[derive(Debug, Clone)]
pub struct Params {
    pub smoke: bool,
    /// All nodes, including the late ones.
    pub nodes: usize,
    /// How many of `nodes` are added only `late_nodes_after` after the first pod is created,
    /// so that until then the pods compete for too little room and gangs must wait.
    pub late_nodes: usize,
    pub late_nodes_after: Duration,
    pub node_cpu: String,
    pub node_memory: String,
    pub node_pods: u32,
    pub pods: usize,
    pub plain_percent: usize,
    pub gang_min: usize,
    pub gang_max: usize,
    pub cpu_min: u32,
    pub cpu_max: u32,
    pub seed: u64,
    pub concurrency: usize,
    pub open_units: usize,
    pub timeout: Duration,
    pub grace: Duration,
    /// Creates per second (None: as fast as the creators go).
    pub create_qps: Option<f64>,
    /// Each round also runs every configuration with creates paced at this rate (pods/s), for
    /// the main result's latencies (None: no paced runs; only when `create_qps` is unset).
    pub paced_qps: Option<f64>,
    /// How long to wait for other processes to leave the CPUs alone before each configuration.
    pub quiet_wait: Duration,
    /// `E2E_APISERVER_PROFILE_SECS`: kube-apiserver runs with `--profiling` and a CPU profile of
    /// this many seconds from the first create is written beside each run's metrics
    /// (`*-apiserver.pprof`, read with `go tool pprof`); None: no profile.
    pub apiserver_profile: Option<Duration>,
    pub modes: Vec<Mode>,
    /// Configurations whose runs fail the bench when a gang stays partially bound beyond the
    /// grace or a node is overcommitted (muster; add vanilla to see the checks catch a
    /// scheduler that does not keep gangs whole).
    pub gang_checks: Vec<Mode>,
    /// Every configuration runs this many times (a, b, c, a, b, c, ...); the report shows the
    /// median run of each.
    pub rounds: usize,
    pub out_dir: PathBuf,
    /// Configuration (b)'s scheduler config (`E2E_MUSTER_SCHEDULER_CONFIG`, default
    /// scheduler-config/muster-as-default-scheduler.yaml, the shipped install's).
    pub muster_scheduler_config: PathBuf,
    /// `E2E_MUSTER_OUTAGE_SECS` / `E2E_MUSTER_OUTAGE_AT_SECS`: muster killed this long after
    /// the first create, for this long (see `outage`).
    pub muster_outage: Option<(Duration, Duration)>,
    /// `E2E_WORKLOAD=topology`: nodes in racks and blocks, gangs asking for one rack (see
    /// [`crate::topology`]).
    pub topology: Option<crate::topology::Layout>,
    /// `E2E_WORKLOAD=dra`: gang members claim devices through DRA (see [`crate::dra`]).
    pub dra: Option<crate::dra::Devices>,
}

pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> Result<T> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .map_err(|_| anyhow!("{name}={v:?} is not a valid value")),
        _ => Ok(default),
    }
}

/// The main result's paced rate at 500 nodes: below what every configuration sustains unpaced
/// on this shared 2-core machine (muster 107–210, native 145–300, vanilla 205–400 pods/s across
/// runs on 2026-12-03/04; at 120 pods/s muster's queue grew on a slow day), so latencies are
/// the schedulers' own, not the creation queue's.
pub const PACED_QPS: f64 = 80.0;

/// Defaults of one documented size of the bench, chosen with `E2E_SCALE`; every `E2E_*`
/// variable still overrides its own knob.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    pub nodes: usize,
    pub pods: usize,
    pub gang_max: usize,
    pub rounds: usize,
    pub timeout_secs: u64,
    pub create_qps: f64,
    pub paced_qps: f64,
}

impl Scale {
    /// `500` (the default), `5000` (5,000 nodes, 20,000 pods in gangs of 4–64, one round),
    /// `10000` (10,000 nodes, 40,000 pods, the same gangs, one round, 3600 s per configuration),
    /// `5000-paced` (the same created at 100 pods/s, below every configuration's throughput,
    /// so gang placement times are the scheduler's own, not the queue's).
    pub fn parse(s: &str) -> Result<Self> {
        let base = Scale {
            nodes: 500,
            pods: 2000,
            gang_max: 16,
            rounds: 3,
            timeout_secs: 600,
            create_qps: 0.0,
            paced_qps: PACED_QPS,
        };
        let large = Scale {
            nodes: 5000,
            pods: 20_000,
            gang_max: 64,
            rounds: 1,
            timeout_secs: 1800,
            // E2E_SCALE=5000-paced is the paced run at this size.
            paced_qps: 0.0,
            ..base
        };
        match s.trim() {
            "" | "500" => Ok(base),
            "5000" => Ok(large),
            "5000-paced" => Ok(Scale {
                create_qps: 100.0,
                ..large
            }),
            "10000" => Ok(Scale {
                nodes: 10_000,
                pods: 40_000,
                timeout_secs: 3600,
                ..large
            }),
            other => bail!("E2E_SCALE: unknown size {other:?} (500, 5000, 5000-paced, 10000)"),
        }
    }
}

impl Params {
    pub fn from_env(smoke: bool) -> Result<Self> {
        let scale = Scale::parse(&std::env::var("E2E_SCALE").unwrap_or_default())?;
        let modes = modes_from_env(
            "E2E_CONFIGS",
            if smoke {
                "vanilla,muster"
            } else {
                "vanilla,muster,native"
            },
        )?;
        // The smoke contends: 8 one-cpu nodes of which 4 come 8 s late, 32 pods of 250m (every
        // slot of the 8 nodes, so any packing completes), gangs of 3-6 (most cannot fill a
        // node's 4 slots exactly, so gangs share nodes). Until the late nodes come, half the pods
        // cannot have a node: gangs must wait whole; in the end every slot is taken, so a seat
        // given twice overcommits a node.
        let p = Params {
            smoke,
            nodes: env_or("E2E_NODES", if smoke { 8 } else { scale.nodes })?,
            late_nodes: env_or("E2E_LATE_NODES", if smoke { 4 } else { 0 })?,
            late_nodes_after: Duration::from_secs(env_or("E2E_LATE_NODES_AFTER_SECS", 8)?),
            node_cpu: env_or("E2E_NODE_CPU", if smoke { "1" } else { "4" }.to_string())?,
            node_memory: env_or("E2E_NODE_MEMORY", "16Gi".to_string())?,
            node_pods: env_or("E2E_NODE_PODS", 110)?,
            pods: env_or("E2E_PODS", if smoke { 32 } else { scale.pods })?,
            plain_percent: env_or("E2E_PLAIN_PERCENT", 25)?,
            gang_min: env_or("E2E_GANG_MIN", if smoke { 3 } else { 4 })?,
            gang_max: env_or("E2E_GANG_MAX", if smoke { 6 } else { scale.gang_max })?,
            cpu_min: env_or("E2E_CPU_MIN", if smoke { 250 } else { 100 })?,
            cpu_max: env_or("E2E_CPU_MAX", if smoke { 250 } else { 500 })?,
            seed: env_or("E2E_SEED", 42)?,
            concurrency: env_or("E2E_CONCURRENCY", 16)?,
            open_units: env_or("E2E_OPEN_UNITS", 8)?,
            timeout: Duration::from_secs(env_or(
                "E2E_TIMEOUT_SECS",
                if smoke { 45 } else { scale.timeout_secs },
            )?),
            grace: Duration::from_millis(env_or("E2E_PARTIAL_GRACE_MS", 2000)?),
            create_qps: Some(env_or(
                "E2E_CREATE_QPS",
                if smoke { 0.0 } else { scale.create_qps },
            )?)
            .filter(|q| *q > 0.0),
            paced_qps: Some(env_or(
                "E2E_PACED_QPS",
                if smoke { 0.0 } else { scale.paced_qps },
            )?)
            .filter(|q| *q > 0.0),
            apiserver_profile: Some(Duration::from_secs(env_or(
                "E2E_APISERVER_PROFILE_SECS",
                0,
            )?))
            .filter(|d| !d.is_zero()),
            quiet_wait: Duration::from_secs(env_or(
                "E2E_QUIET_WAIT_SECS",
                if smoke { 0 } else { 300 },
            )?),
            muster_scheduler_config: std::env::var_os("E2E_MUSTER_SCHEDULER_CONFIG")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    repo_root().join("scheduler-config/muster-as-default-scheduler.yaml")
                }),
            muster_outage: crate::outage::from_env()?,
            topology: crate::topology::Layout::from_env()?,
            dra: crate::dra::Devices::from_env()?,
            modes,
            gang_checks: modes_from_env("E2E_GANG_CHECKS", "muster,muster-every-pod,muster-http")?,
            rounds: env_or("E2E_ROUNDS", if smoke { 1 } else { scale.rounds })?,
            out_dir: std::env::var_os("E2E_OUT_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| muster_harness::paths::repo_root().join("target/muster-bench")),
        };
        if p.gang_min < 2 || p.gang_max < p.gang_min {
            bail!("need 2 <= E2E_GANG_MIN <= E2E_GANG_MAX");
        }
        if p.cpu_max < p.cpu_min || p.cpu_min == 0 {
            bail!("need 0 < E2E_CPU_MIN <= E2E_CPU_MAX");
        }
        if p.modes.is_empty() || p.nodes == 0 || p.pods == 0 || p.concurrency == 0 || p.rounds == 0
        {
            bail!("E2E_CONFIGS, E2E_NODES, E2E_PODS, E2E_CONCURRENCY and E2E_ROUNDS must not be empty/zero");
        }
        if p.late_nodes >= p.nodes {
            bail!("need E2E_LATE_NODES < E2E_NODES: some nodes must be there from the start");
        }
        Ok(p)
    }
}

#[cfg(test)]
#[allow(dead_code, unused_imports)]
mod tests {
    use super::*;

    #[test]
    fn each_scale_names_its_defaults_and_an_unknown_one_is_refused() {
        let base = Scale::parse("").unwrap();
        assert_eq!(
            (base.nodes, base.pods, base.gang_max, base.rounds),
            (500, 2000, 16, 3)
        );
        assert_eq!(Scale::parse("500").unwrap(), base);
        let large = Scale::parse("5000").unwrap();
        assert_eq!(
            (
                large.nodes,
                large.pods,
                large.gang_max,
                large.rounds,
                large.create_qps
            ),
            (5000, 20_000, 64, 1, 0.0)
        );
        let paced = Scale::parse(" 5000-paced ").unwrap();
        assert_eq!(paced.create_qps, 100.0);
        assert_eq!(paced.nodes, 5000);
        let huge = Scale::parse("10000").unwrap();
        assert_eq!(
            (huge.nodes, huge.pods, huge.gang_max, huge.rounds),
            (10_000, 40_000, 64, 1)
        );
        let e = Scale::parse("50000").unwrap_err().to_string();
        assert!(e.contains("E2E_SCALE") && e.contains("5000-paced"), "{e}");
    }
}
