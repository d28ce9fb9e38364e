//! Kubernetes I/O: the watches that keep the gang table current (pods, nodes, PodGroups), the
//! binder, the Event publisher, and the self-managed certificate Secrets. Nothing in here
//! decides anything; decisions live in [`crate::model`] (and [`crate::pki`] for certificates).

pub mod binder;
pub mod capacity;
pub mod certs;
pub mod convert;
pub mod devices;
pub mod events;
pub mod evictor;
pub mod gather;
pub mod leader;
pub mod node_marker;
pub mod pod_groups;
pub mod status;
pub mod watch;
