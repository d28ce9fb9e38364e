//! The gang model: pure state and decisions, no HTTP and no Kubernetes I/O.
//!
//! [`GangTable`] is the one value every decision reads and changes, made of narrow parts that
//! each keep their own numbers right:
//! - `ledger`: per node, allocatable, used and reserved capacity;
//! - `pods`: the pods muster knows, and the nodes it assumed for those it is binding;
//! - `gang`: a gang's members, its seats (by [`SeatHolder`]) and its [`Phase`];
//! - `spec`: a gang's quorum, per-task minimums and timeout, from its PodGroup (`podgroup`) or
//!   its members' keys: the one place its quorum is decided; `tasks`: per-task minimums;
//! - `selection`: which members a simulation places, each task below its minimum first;
//! - `planner`: the simulation of a gang's placement, run by `simulation`'s one first-fit
//!   loop under kube-scheduler's required rules (`rules`), with `evidence` from filter calls;
//! - `preemption_hold`: the room a preempting gang's victims free, held as its seats while they go.
//!
//! The verbs live one per file: `apply` (watch events), `filter`, `prioritize`, `bind`,
//! `preempt`, `expiry` and `views`; every user-facing sentence is in `messages`. Everything here is
//! synchronous and takes `now` as an argument, so the tests can drive time.

mod inputs;
mod messages;
mod notice;
mod planning;
pub mod rules;
mod table;
mod verbs;

pub use inputs::{membership, objects, podgroup, quantity, resources, tasks};

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
pub use table::gang::{Phase, SeatHolder};
pub use table::GangTable;
pub use verbs::bind::{BindDecision, BindRejection, BindRequest};
pub use verbs::filter::NodeVerdict;
pub use verbs::preempt::{
    DropReason, GangDisruption, PreemptCandidate, PreemptDecision, PreemptOutcome,
};
pub use verbs::views::{
    GangGauges, GangState, GangView, MemberState, MemberView, SpecSourceView, TaskView,
};
