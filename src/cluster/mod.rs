//! Kubernetes I/O: the watches that keep the gang table current, the binder, and the Event
//! publisher. Nothing in here decides anything; decisions live in [`crate::model`].

pub mod binder;
pub mod convert;
pub mod events;
pub mod evictor;
pub mod watch;
