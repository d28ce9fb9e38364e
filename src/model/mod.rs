//! The gang model: pure state and decisions, no HTTP and no Kubernetes I/O.
//!
//! Four groups, imports running one way (`inputs` <- `table` <- `planning` <- `verbs`):
//! - `inputs/`: what the model is told: `objects` (nodes and pods as muster reads them),
//!   `resources` and `quantity`, `membership` (gang keys), `tasks` (per-task minimums),
//!   `podgroup` (PodGroup objects), `spec` (a gang's quorum, per-task minimums and timeout:
//!   the one place its quorum is decided) and `config`;
//! - `table/`: [`GangTable`], the one value every decision reads and changes, and its narrow
//!   parts, each keeping its own numbers right: `ledger` (per node, allocatable, used and
//!   reserved), `pods` (the pods muster knows, and the nodes it assumed), `gang` (members,
//!   seats by [`SeatHolder`], [`Phase`]), `evidence` (filter calls' verdicts),
//!   `preemption_plan` and `disruptions` (gangs to evict whole once kube-scheduler
//!   commits). A seat and its reservation change together, only in `table/mod.rs`;
//! - `planning/`: the simulation of a gang's placement: `selection` (which members, each
//!   task below its minimum first), `simulation` (the one first-fit loop under
//!   kube-scheduler's required rules), `planner` (the plan, or why not) and `quorum_bound`
//!   (a quorum the cluster could never hold, refused before any simulation);
//! - `verbs/`: one per file: `apply` (watch events), `pod_groups` (PodGroup events),
//!   `filter`, `prioritize`, `bind`, `quorum` (the last look before binding), `preempt`
//!   (with `preempt/commit`: a disruption evicted only once kube-scheduler acts),
//!   `preemption_hold` (the room a preempting gang's victims free, held as its seats while
//!   they go), `expiry`, `rebuild` and `views`.
//!
//! Beside them: `rules/` (kube-scheduler's rules, one file per plugin), `messages` (every
//! user-facing sentence, from plain values) and `notice` (what the model asks the cluster
//! side to tell). Everything here is synchronous and takes `now` as an argument, so the
//! tests can drive time.

mod inputs;
mod messages;
mod notice;
mod planning;
pub mod rules;
mod table;
mod verbs;

pub use inputs::{devices, membership, objects, podgroup, quantity, resources, tasks, topology};
pub use verbs::enqueue;
pub use verbs::gather;
pub use verbs::podgroup_status;

#[cfg(test)]
mod tests;

pub use inputs::config::ModelConfig;
pub use inputs::membership::{DisruptionMode, GangKey, Membership, MembershipError};
pub use inputs::objects::{NodeInfo, NodeName, PodInfo, PodUid};
pub use inputs::podgroup::{PodGroupApi, PodGroupDef};
pub use inputs::resources::Resources;
pub use inputs::spec::{GangSpec, SpecSource};
pub use inputs::tasks::TaskMinimums;
pub use notice::{Notice, NoticeKind, PodRef};
pub use planning::quorum_bound::BeyondCluster;
pub use table::gang::{Phase, SeatHolder};
pub use table::partly_bound::{PartlyBound, PartlyBoundOutcome};
pub use table::GangTable;
pub use verbs::bind::{BindDecision, BindRejection, BindRequest};
pub use verbs::filter::NodeVerdict;
pub use verbs::preempt::{
    DropReason, GangDisruption, PreemptCandidate, PreemptDecision, PreemptOutcome,
};
pub use verbs::views::{
    GangGauges, GangState, GangView, MemberState, MemberView, SpecSourceView, TaskView,
    TopologyView,
};
