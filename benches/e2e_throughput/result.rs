//! What one run of one configuration produced.

use crate::params::Mode;
use crate::stats::{Dist, Sample};

#[derive(Debug, Clone)]
pub enum Status {
    Completed,
    /// Ran, but not every pod was bound by the deadline.
    Incomplete(String),
    /// Native gang scheduling could not be enabled (why).
    NotEnabled(String),
    /// The run itself broke (control plane, muster, API errors).
    Failed(String),
}

#[derive(Debug, Clone)]
pub struct RunResult {
    pub mode: Mode,
    /// 1-based.
    pub round: usize,
    pub status: Status,
    pub notes: Vec<String>,
    pub total: usize,
    pub bound: usize,
    pub startup_secs: f64,
    pub create_secs: Option<f64>,
    pub all_bound_secs: Option<f64>,
    pub samples: Vec<Sample>,
    pub tput: Option<Dist>,
    pub overall_pps: Option<f64>,
    pub gang_latency: Option<Dist>,
    pub gangs_complete: usize,
    pub pod_latency: Option<Dist>,
    /// Plain pods only (not gang members): created → bound.
    pub plain_latency: Option<Dist>,
    /// kube-scheduler's serial time per scheduling attempt (its algorithm histogram), in ms.
    pub serial_ms_per_attempt: Option<f64>,
    /// The pace of this run's creates (pods/s), if paced.
    pub paced_at: Option<f64>,
    pub partial_observations: usize,
    pub max_gang_spread: Option<f64>,
    pub overcommit: Option<std::result::Result<(), String>>,
    /// Pods a kubelet admitting them in binding order would refuse for CPU (see `race`).
    pub kubelet_refusals: Option<crate::race::Refusals>,
    pub cpu: Vec<(String, f64)>,
    /// CPU seconds used by processes not part of this run during the measured phase, and the
    /// machine's capacity in that time.
    pub other_cpu: Option<(f64, f64)>,
    /// Share of the machine other processes used just before the measured phase.
    pub others_before: Option<f64>,
    pub muster_summary: Vec<String>,
    pub scheduler_summary: Vec<String>,
    pub native_groups_scheduled: Option<(usize, usize)>,
    /// API requests during the measured phase: "VERB resource", count, summed latency.
    pub api_requests: Vec<(String, f64, f64)>,
    /// Events in the namespace at the end: "component reason" → count (series included).
    pub events: Vec<(String, usize)>,
    /// Per process at the end of the measured phase: name, resident MiB, peak resident MiB.
    pub memory: Vec<(String, f64, f64)>,
    pub wall_secs: f64,
    /// Counts per gang member (see `per_member`).
    pub per_member: crate::per_member::PerMember,
    /// The outage mode's numbers (muster runs with `E2E_MUSTER_OUTAGE_SECS`).
    pub outage: Option<crate::outage::OutageResult>,
    /// The topology workload: gangs bound whole within one domain.
    pub topology: Option<crate::topology::Share>,
}

impl RunResult {
    pub fn new(mode: Mode, round: usize, total: usize) -> Self {
        Self {
            mode,
            round,
            status: Status::Failed("did not run".into()),
            notes: Vec::new(),
            total,
            bound: 0,
            startup_secs: 0.0,
            create_secs: None,
            all_bound_secs: None,
            samples: Vec::new(),
            tput: None,
            overall_pps: None,
            gang_latency: None,
            gangs_complete: 0,
            pod_latency: None,
            plain_latency: None,
            serial_ms_per_attempt: None,
            paced_at: None,
            partial_observations: 0,
            max_gang_spread: None,
            overcommit: None,
            kubelet_refusals: None,
            cpu: Vec::new(),
            other_cpu: None,
            others_before: None,
            muster_summary: Vec::new(),
            scheduler_summary: Vec::new(),
            native_groups_scheduled: None,
            api_requests: Vec::new(),
            events: Vec::new(),
            memory: Vec::new(),
            wall_secs: 0.0,
            per_member: Default::default(),
            outage: None,
            topology: None,
        }
    }

    pub fn completed(&self) -> bool {
        matches!(self.status, Status::Completed)
    }

    /// Share of the machine's CPU that processes outside this run used while it was measured.
    pub fn others_share(&self) -> Option<f64> {
        self.other_cpu
            .filter(|(_, cap)| *cap > 0.0)
            .map(|(o, cap)| o / cap)
    }

    /// API requests per pod in the measured phase (not WATCH).
    pub fn requests_per_pod(&self) -> Option<f64> {
        let n: f64 = self.api_requests.iter().map(|x| x.1).sum();
        (self.total > 0 && n > 0.0).then(|| n / self.total as f64)
    }

    /// CPU milliseconds per bound pod of the process named `name` in the measured phase.
    pub fn cpu_ms_per_pod(&self, name: &str) -> Option<f64> {
        let secs = self.cpu.iter().find(|(n, _)| n == name)?.1;
        (self.bound > 0 && secs.is_finite()).then(|| 1000.0 * secs / self.bound as f64)
    }

    /// scheduler_perf's average when there are enough per-second samples, else pods/s overall.
    pub fn avg_pps(&self) -> Option<f64> {
        self.tput
            .filter(|d| d.n >= 3)
            .map(|d| d.mean)
            .or(self.overall_pps)
    }
}
