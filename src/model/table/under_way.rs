//! Preemptions muster kept, per preemptor, while they are under way.
//!
//! kube-scheduler does not let a pod preempt again while a lower-priority pod on its nominated
//! node is terminating (`PodEligibleToPreemptOthers`, pkg/scheduler/framework/plugins/
//! defaultpreemption/default_preemption.go in v1.37.2), but it judges that from its informer
//! cache: with asynchronous preemption the preemptor is re-queued as soon as the victims'
//! deletions are sent, and its next cycle can run before the cache shows them terminating or the
//! nomination. It then preempts a second time, on another node: a member of a running gang
//! there would be evicted (and its gang with it) for a pod whose room is already being freed.
//! muster remembers what it kept and refuses the second round elsewhere
//! (kube-scheduler-semantics, evict-for-whole).

use std::time::{Duration, Instant};

use rustc_hash::FxHashMap as HashMap;

use crate::model::inputs::objects::PodUid;

/// How long a kept preemption counts as under way at most, while its victims still exist:
/// kube-scheduler deletes them in the cycle after the preempt call, well within this.
pub const UNDER_WAY_FOR: Duration = Duration::from_secs(30);

/// Entries kept at most (a bound on memory; the oldest go first).
const MAX_REMEMBERED: usize = 10_000;

/// One candidate muster kept: the node and the victims kube-scheduler was told it may evict
/// there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptNode {
    pub node: String,
    pub victims: Vec<String>,
}

/// One preemption muster kept: every candidate kept (kube-scheduler acts on one of them, by
/// its own order), and when.
#[derive(Clone, Debug)]
pub struct UnderWay {
    pub kept: Vec<KeptNode>,
    pub at: Instant,
}

/// The kept preemptions, per preemptor.
#[derive(Debug, Default)]
pub struct PreemptionsUnderWay {
    by_preemptor: HashMap<PodUid, UnderWay>,
}

impl PreemptionsUnderWay {
    /// Remembers that `preemptor` may evict the victims of each of `kept` on its node,
    /// replacing an older entry.
    pub fn record(&mut self, preemptor: &PodUid, kept: Vec<KeptNode>, now: Instant) {
        self.by_preemptor
            .retain(|_, u| now.saturating_duration_since(u.at) < UNDER_WAY_FOR);
        if self.by_preemptor.len() >= MAX_REMEMBERED {
            if let Some(oldest) = self
                .by_preemptor
                .iter()
                .min_by_key(|(_, u)| u.at)
                .map(|(k, _)| k.clone())
            {
                self.by_preemptor.remove(&oldest);
            }
        }
        self.by_preemptor
            .insert(preemptor.clone(), UnderWay { kept, at: now });
    }

    /// `preemptor`'s kept preemption if it is recent enough; whether its victims still exist is
    /// for the caller, which knows the pods.
    pub fn recent(&self, preemptor: &str, now: Instant) -> Option<&UnderWay> {
        self.by_preemptor
            .get(preemptor)
            .filter(|u| now.saturating_duration_since(u.at) < UNDER_WAY_FOR)
    }

    /// The preemptor is gone: nothing to remember.
    pub fn forget(&mut self, preemptor: &str) {
        self.by_preemptor.remove(preemptor);
    }
}

#[cfg(test)]
mod tests;
