//! What the model is told: objects as muster reads them (nodes, pods, PodGroups), their
//! resources and quantities, the terms of their placement rules, the gang keys and per-task
//! minimums, a gang's spec, and the model's configuration. Depends on nothing else in the
//! model.

pub(crate) mod config;
pub mod devices;
pub mod membership;
pub mod objects;
pub mod pod_group;
pub mod quantity;
pub mod resources;
pub(crate) mod spec;
pub mod tasks;
pub mod terms;
pub mod topology;
