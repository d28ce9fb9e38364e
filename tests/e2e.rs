//! The end-to-end tests against a real control plane (etcd, kube-apiserver, the stock
//! kube-scheduler) and the muster binary: one test binary, one module per file. Compiled and
//! linked once instead of once per file (docs/testing.md). Run one test with
//! `cargo test --test e2e -- e2e_claims::NAME --exact`, a file's with `tests/e2e-run e2e_claims`.
//!
//! Each file says what it covers in its own header; `tests/run` fails when a `tests/e2e_*.rs`
//! is missing here.

mod e2e_bindings;
mod e2e_claims;
mod e2e_controllers;
mod e2e_deploy;
mod e2e_dra;
mod e2e_evidence;
mod e2e_faults;
mod e2e_flowcontrol;
mod e2e_gang_members;
mod e2e_gang_scheduling;
mod e2e_ha;
mod e2e_helm;
mod e2e_holds_nothing;
mod e2e_image;
mod e2e_kubectl_muster;
mod e2e_podgroup_status;
mod e2e_podgroups;
mod e2e_preemption;
mod e2e_second_scheduler;
mod e2e_secure;
mod e2e_tls;
mod e2e_topology;
