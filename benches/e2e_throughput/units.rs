//! The pure parts of the `e2e_throughput` bench compiled again under libtest, so that their
//! `#[test]`s run with `cargo test --benches`: the bench itself has `harness = false`, which
//! runs its `main` (the smoke) instead of tests. Under `cargo bench` the tests are skipped.
#![allow(dead_code)]

mod dra;
mod gangs;
mod main_result;
mod outage;
mod params;
mod per_member;
mod prometheus;
mod race;
mod result;
mod rounds;
mod stats;
mod topology;
mod workload;
