//! The verbs, one per file: what each call or watch event does to the table. `apply` (watch
//! events), `pod_groups` (PodGroup events), `filter`, `gather` (gangs placed from the watch and let through their gate), `prioritize`, `bind`, `quorum` (the last look before binding),
//! `preempt`, `preemption_hold` (room held for a preempting gang), `expiry`, `rebuild`, `move_domain` (a gang moved whole to another domain before it binds), `repair`
//! (a gang found partly bound when muster starts deciding), `views`, `pod_group_status` (the
//! status written back to PodGroups), `enqueue` (Volcano PodGroups without members moved to
//! `Inqueue`), `verdict` (kube-scheduler's own verdict on a member, as
//! evidence), `unseen_preemption` (a member preempted without muster's say) and `devices` (Dynamic Resource Allocation objects).

pub(crate) mod apply;
pub(crate) mod bind;
pub(crate) mod devices;
pub mod enqueue;
pub(crate) mod expiry;
pub(crate) mod filter;
pub mod gather;
pub(crate) mod move_domain;
pub mod pod_group_status;
pub(crate) mod pod_groups;
pub(crate) mod preempt;
pub(crate) mod preemption_hold;
pub(crate) mod prioritize;
pub(crate) mod quorum;
pub(crate) mod rebuild;
pub(crate) mod repair;
pub(crate) mod unseen_preemption;
pub(crate) mod verdict;
pub(crate) mod views;
