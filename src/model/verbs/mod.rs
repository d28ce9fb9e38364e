//! The verbs, one per file: what each call or watch event does to the table. `apply` (watch
//! events), `pod_groups` (PodGroup events), `filter`, `prioritize`, `bind`, `quorum` (the last look before binding),
//! `preempt`, `hold`, `expiry`, `rebuild` and `views`.

pub(crate) mod apply;
pub(crate) mod bind;
pub(crate) mod expiry;
pub(crate) mod filter;
pub(crate) mod hold;
pub(crate) mod pod_groups;
pub(crate) mod preempt;
pub(crate) mod prioritize;
pub(crate) mod quorum;
pub(crate) mod rebuild;
pub(crate) mod views;
