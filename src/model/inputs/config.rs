//! Tunables of the gang model; the binary fills these from flags.

use std::sync::Arc;
use std::time::Duration;

use super::objects::DEFAULT_SCHEDULER;

#[derive(Clone, Debug)]
pub struct ModelConfig {
    /// How long an admitted gang may hold seats without reaching quorum.
    pub default_timeout: Duration,
    /// After a timeout, how long the gang is refused before it may take seats again, so that
    /// other gangs get a chance at the capacity it released.
    pub backoff: Duration,
    /// A waiting gang counts as *competing* (and is served before younger, lower-priority gangs)
    /// only if kube-scheduler tried one of its members this recently: a gang whose pods stopped
    /// coming must not block the others.
    pub active_window: Duration,
    /// Upper bound on competing gangs simulated ahead of the one being decided.
    pub max_gangs_ahead: usize,
    /// Upper bound on candidate nodes tried one by one for the member being filtered.
    pub max_first_node_attempts: usize,
    /// Room for members not created yet is held only this long after the newest member
    /// appeared; a gang without a declared member count decides its quorum only after it.
    pub creation_window: Duration,
    /// How long the nodes a member's filter call passed are trusted as evidence.
    pub evidence_age: Duration,
    /// Evict the rest of a running gang whose member kube-scheduler preempted without muster's
    /// say (`verbs::unseen_preemption`).
    pub evict_after_unseen_preemption: bool,
    /// The `schedulerName`s whose scheduler calls muster (`--scheduler-names`): a gang-keyed
    /// pod of any other scheduler is not a member of any gang (see `GangTable::apply_pod`).
    pub scheduler_names: Vec<Arc<str>>,
    /// Ask the cluster autoscaler for room for a gathered gang short of room alone, for at
    /// most this long (`--capacity-buffers`; `verbs::gather::capacity`). None: never asked.
    pub capacity_buffers: Option<Duration>,
}

impl ModelConfig {
    /// Whether pods of this `schedulerName` reach muster.
    pub fn calls_muster(&self, scheduler: &str) -> bool {
        self.scheduler_names.iter().any(|n| &**n == scheduler)
    }
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            default_timeout: Duration::from_secs(60),
            backoff: Duration::from_secs(10),
            active_window: Duration::from_secs(30),
            max_gangs_ahead: 32,
            max_first_node_attempts: 16,
            creation_window: Duration::from_secs(5),
            evidence_age: Duration::from_secs(30),
            evict_after_unseen_preemption: true,
            scheduler_names: vec![Arc::from(DEFAULT_SCHEDULER)],
            capacity_buffers: None,
        }
    }
}
