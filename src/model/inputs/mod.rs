//! What the model is told: objects as muster reads them (nodes, pods, PodGroups), their
//! resources and quantities, the gang keys and per-task minimums, a gang's spec, and the
//! model's configuration. Depends on nothing else in the model but `rules`' pod terms.

pub(crate) mod config;
pub mod devices;
pub mod membership;
pub mod objects;
pub mod podgroup;
pub mod quantity;
pub mod resources;
pub(crate) mod spec;
pub mod tasks;
pub mod topology;
