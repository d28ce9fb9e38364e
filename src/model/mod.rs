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
//! - `hold`: the room a preempting gang's victims free, held as its seats while they go.
//!
//! The verbs live one per file: `apply` (watch events), `filter`, `prioritize`, `bind`,
//! `preempt`, `expiry` and `views`; every user-facing sentence is in `messages`. Everything here is
//! synchronous and takes `now` as an argument, so the tests can drive time.

mod apply;
mod bind;
mod config;
mod evidence;
mod expiry;
mod filter;
mod gang;
mod hold;
mod ledger;
pub mod membership;
mod messages;
mod notice;
pub mod objects;
mod planner;
pub mod podgroup;
mod pods;
mod preempt;
mod prioritize;
pub mod quantity;
mod quorum;
mod quorum_bound;
mod rebuild;
pub mod resources;
pub mod rules;
mod selection;
mod simulation;
mod spec;
mod table;
pub mod tasks;
mod views;

#[cfg(test)]
mod tests;

pub use bind::{BindDecision, BindRejection, BindRequest};
pub use config::ModelConfig;
pub use filter::NodeVerdict;
pub use gang::{Phase, SeatHolder};
pub use membership::{DisruptionMode, GangKey, Membership, MembershipError};
pub use notice::{Notice, NoticeKind, PodRef};
pub use objects::{NodeInfo, NodeName, PodInfo, PodUid};
pub use podgroup::{PodGroupApi, PodGroupDef};
pub use preempt::{DropReason, GangDisruption, PreemptCandidate, PreemptDecision, PreemptOutcome};
pub use quorum_bound::BeyondCluster;
pub use resources::Resources;
pub use spec::{GangSpec, SpecSource};
pub use table::GangTable;
pub use tasks::TaskMinimums;
pub use views::{
    GangGauges, GangState, GangView, MemberState, MemberView, SpecSourceView, TaskView,
};
