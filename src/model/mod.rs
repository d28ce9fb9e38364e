//! The gang model: pure state and decisions, no HTTP and no Kubernetes I/O.
//!
//! # The module map
//!
//! Four layers, each importing only from the ones before it (`inputs` <- `table` <- `planning`
//! <- `verbs`), and three beside them; `tests::module_map` fails when a module is missing here
//! or an import runs against this order.
//!
//! - `inputs/`: what the model is told. `objects` (nodes and pods as muster reads them),
//!   `terms` (the terms a pod carries for kube-scheduler's rules, parsed: `labels` and label
//!   selectors, `node_selector` for required node affinity, `host_port`, `affinity` for pod
//!   (anti-)affinity terms, `spread` for topology spread constraints), `resources` and
//!   `quantity` (requests), `membership` (gang keys), `tasks` (per-task minimums), `pod_group`
//!   (PodGroup objects), `spec` (a gang's quorum, per-task minimums and timeout: the one place
//!   its quorum is decided), `topology` (a gang's topology constraint), `devices` (DRA slices,
//!   classes, claims and their compiled CEL selectors) and `config`.
//! - `notice` and `messages` (beside `inputs`, importing only it): what the model asks the
//!   cluster side to tell, and every user-facing sentence, from plain values.
//! - `rules/` (beside `inputs`, importing it and the sentences): kube-scheduler's rules, one
//!   file per plugin — `node_unschedulable`, `taint_toleration`, `node_affinity`, `node_ports`,
//!   `inter_pod_affinity`, `pod_topology_spread`, `scheduling_gates`, `dynamic_resources` — with
//!   `labels` (selectors evaluated on labels), `placement` (the rules together, per node) and
//!   `diagnosis` (why a node fails); `fixtures` for tests. Checks only: what they evaluate is
//!   parsed in `inputs` (`terms`, `devices`), and the rules add the evaluation as `impl` blocks
//!   on those types.
//! - `table/`: [`GangTable`], the one value every decision reads and changes, and its parts,
//!   each keeping its own numbers right: `ledger` (per node, allocatable, used and reserved),
//!   `pods` (the pods muster knows, and the nodes it assumed), `gang` (members, seats by
//!   [`SeatHolder`], [`Phase`]), `generations` (a gang's newest generation when its job
//!   restarts by recreating its pods, and the older pods, which are not members), `evidence` (filter calls' node lists and kube-scheduler's
//!   verdicts), `retry_asks` (pods refused for a reason kube-scheduler does not see end, asked
//!   to retry when it does), `preemption_plan`, `under_way` (preemptions kept while they happen),
//!   `room_waits` (gangs waiting for room to be freed), `disruptions` (gangs to evict whole once
//!   kube-scheduler commits, and members it preempted without muster), `partly_bound` (what
//!   was done about a gang found partly bound) and `outbox` (what the verbs hand on: notices,
//!   gangs whose held bind calls look again, gangs found partly bound; added to only, taken
//!   whole). A seat and its reservation change together, only in `table/mod.rs`.
//! - `planning/`: the simulation of a gang's placement: `selection` (which members, each task
//!   below its minimum first), `simulation` (the one first-fit loop under kube-scheduler's
//!   required rules), `domains` (topology domains), `planner` (the plan, or why not) and
//!   `quorum_bound` (a quorum the cluster could never hold, refused before any simulation).
//! - `verbs/`: one per file. The watch: `apply` (pods and nodes), `devices` (DRA objects),
//!   `pod_groups` (PodGroup objects), `verdict` (kube-scheduler's verdict as evidence) and
//!   `unseen_preemption` (members kube-scheduler preempted without muster). kube-scheduler's
//!   calls: `filter`, `prioritize`, `bind`, `quorum` (the last look before binding), `preempt`
//!   (with `preempt/commit`: a disruption evicted only once kube-scheduler acts) and
//!   `preemption_hold` (the room a preempting gang's victims free, held as its seats). Time and
//!   restarts: `expiry`, `rebuild`, `repair` (a gang found partly bound) and `move_domain` (a
//!   gang moving whole to another domain). The gang-members mode: `gather` (placing gated gangs
//!   from the watch). Outputs: `views` (`/gangs`, gauges), `pod_group_status` and `enqueue`.
//!
//! Everything here is synchronous and takes `now` as an argument, so the tests can drive time.

mod inputs;
mod messages;
mod notice;
mod planning;
pub mod rules;
mod table;
mod verbs;

pub use inputs::{
    devices, membership, objects, pod_group, quantity, resources, tasks, terms, topology,
};
pub use verbs::enqueue;
pub use verbs::gather;
pub use verbs::pod_group_status;

#[cfg(test)]
mod tests;

pub use inputs::config::ModelConfig;
pub use inputs::membership::{DisruptionMode, GangKey, Membership, MembershipError};
pub use inputs::objects::{NodeInfo, NodeName, PodInfo, PodUid};
pub use inputs::pod_group::{PodGroupApi, PodGroupDef};
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
