//! The gang model: pure state and decisions, no HTTP and no Kubernetes I/O.
//!
//! [`GangTable`] holds the capacity ledger (per node: allocatable, requests of pods bound there,
//! seats reserved there), the gangs and their seats, and answers the three extender verbs.
//! Everything here is synchronous and takes `now` as an argument, so the tests can drive time.

pub mod membership;
pub mod objects;
pub mod quantity;
pub mod resources;
pub mod rules;
mod table;

pub use membership::{GangKey, Membership, MembershipError};
pub use objects::{NodeInfo, NodeName, PodInfo, PodUid};
pub use resources::Resources;
pub use table::*;
