//! The end-to-end tests against a real control plane (etcd, kube-apiserver, the stock
//! kube-scheduler) and the muster binary: one test binary, one module per file. Compiled and
//! linked once instead of once per file (docs/testing.md). Run one test with
//! `cargo test --test e2e -- claims::NAME --exact`, a file's with `tests/e2e-run claims`.
//!
//! Each file says what it covers in its own header; `tests/run` fails when a `tests/e2e/*.rs`
//! is missing here.

mod autoscaled;
mod bindings;
mod claims;
mod controllers;
mod deploy;
mod dra;
mod evidence;
mod faults;
mod flowcontrol;
mod gang_members;
mod gang_scheduling;
mod ha;
mod helm;
mod holds_nothing;
mod image;
mod jobset;
mod kubectl_muster;
mod kueue;
mod pod_group_status;
mod pod_groups;
mod preemption;
mod second_scheduler;
mod secure;
mod tls;
mod topology;
mod trainer;
