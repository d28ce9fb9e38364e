//! Leader election through a `coordination.k8s.io/v1` Lease, so two replicas can run with one
//! deciding: both keep warm caches, only the leader answers the verbs.
//!
//! Our own code rather than a crate: `kube-runtime` 5 has no leader election;
//! `kube-leader-election` needs kube 4; `kube-lease-manager` builds with kube 5 but writes the
//! Lease with server-side apply (RBAC `patch`), counts expiry by comparing wall-clock
//! `renewTime`s across nodes, has no renew deadline, and does not say who the leader is — and
//! muster needs all three: a leader that stops deciding before its Lease can expire for others,
//! a standby that names the leader, and RBAC of exactly get/create/update.
//!
//! [`decide`] holds the decisions (pure, clocks passed in), the shared state's
//! [`Leadership`](crate::state::leadership::Leadership) what every call reads, and this file the
//! Lease I/O around them.

pub mod decide;
pub mod label;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::{Api, Client};
use tracing::{info, warn};

use self::decide::{released, Candidate, Next, Timings};
use crate::state::Shared;

/// Which Lease, who this replica is, and the durations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Election {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    pub timings: Timings,
}

/// Takes part in the election until the task is dropped (then [`release`]): once the caches are
/// synced, renews the Lease every retry period
/// while leading, tries for it every retry period (with jitter) while standing by, and tells
/// [`Shared`] when this replica takes over or steps down.
pub async fn run(client: Client, election: Election, shared: Arc<Shared>) {
    // A replica contends only once its caches are synced: a leader must be able to decide.
    while !shared.readiness.is_ready() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let api: Api<Lease> = Api::namespaced(client, &election.namespace);
    let timings = election.timings;
    let mut candidate = Candidate::new(election.identity.clone(), timings);
    let mut leader: Option<String> = None;
    let mut tries: u64 = 0;
    loop {
        tries += 1;
        let now = Instant::now();
        // A leader's attempt may not outlast its right to decide.
        let budget = candidate
            .leading_until(now)
            .map_or(timings.retry_period, |until| {
                (until - now).min(timings.retry_period)
            });
        match tokio::time::timeout(budget, attempt(&api, &election.name, &mut candidate)).await {
            Ok(Ok(Some(holder))) => leader = Some(holder),
            Ok(Ok(None)) => leader = Some(election.identity.clone()),
            Ok(Err(e)) => {
                warn!(lease = %election.name, error = %e, "cannot read or write the leader Lease")
            }
            Err(_) => {
                warn!(lease = %election.name, after = ?budget, "leader Lease call timed out")
            }
        }
        let now = Instant::now();
        let wait = match candidate.leading_until(now) {
            Some(until) => {
                if !shared.leadership.is_leading(now) {
                    shared.take_over();
                    shared.metrics.leader_takeovers.inc();
                    info!(identity = %election.identity, lease = %election.name, "took the leader Lease; this replica now decides");
                }
                shared.leadership.lead_until(until, now);
                timings.retry_period.min(until - now)
            }
            None => {
                let known = leader.clone().filter(|l| *l != election.identity);
                if shared.leadership.follow(known.clone()) {
                    warn!(identity = %election.identity, leader = ?known, "lost the leader Lease; this replica stopped deciding");
                    shared.step_down();
                }
                let wait = timings.standby_wait(tries.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 7);
                // Try the moment the leader's Lease may be taken, not up to a retry later.
                match candidate.others_lease_expires() {
                    Some(expires) if expires > now => wait.min(expires - now),
                    _ => wait,
                }
            }
        };
        tokio::time::sleep(wait.max(Duration::from_millis(10))).await;
    }
}

/// Reads the Lease and claims it if [`Candidate::next`] says so. `Ok(Some(leader))`: another
/// replica leads; `Ok(None)`: this replica wrote the Lease and leads.
async fn attempt(
    api: &Api<Lease>,
    name: &str,
    candidate: &mut Candidate,
) -> Result<Option<String>, kube::Error> {
    let started = Instant::now();
    let current = api.get_opt(name).await?;
    let spec = current.as_ref().map(|l| l.spec.clone().unwrap_or_default());
    let wall = MicroTime(k8s_openapi::jiff::Timestamp::now());
    match candidate.next(spec.as_ref(), Instant::now(), wall) {
        Next::Follow { leader } => Ok(Some(leader)),
        Next::Claim(claim) => {
            let written = match current {
                None => {
                    let lease = Lease {
                        metadata: ObjectMeta {
                            name: Some(name.to_string()),
                            ..ObjectMeta::default()
                        },
                        spec: Some(claim),
                    };
                    api.create(&PostParams::default(), &lease).await?
                }
                // An update of the version just read: if another replica wrote meanwhile, the
                // API server refuses it (409) and this replica stays a standby.
                Some(mut lease) => {
                    lease.spec = Some(claim);
                    api.replace(name, &PostParams::default(), &lease).await?
                }
            };
            candidate.claimed(written.spec.unwrap_or_default(), started, Instant::now());
            Ok(None)
        }
    }
}

/// On shutdown, after the election task has stopped: stops deciding, then gives the Lease up
/// if this replica holds it, so a standby takes over at its next try (about the retry period)
/// instead of after the lease duration. Best effort within one retry period: a leader that
/// cannot reach the API server leaves the Lease to expire.
pub async fn release(client: Client, election: &Election, shared: &Shared) {
    if shared.leadership.follow(None) {
        shared.step_down();
    } else {
        return;
    }
    let api: Api<Lease> = Api::namespaced(client, &election.namespace);
    let give_up = async {
        let Some(mut lease) = api.get_opt(&election.name).await? else {
            return Ok(false);
        };
        let Some(spec) = lease.spec.as_ref() else {
            return Ok(false);
        };
        if spec.holder_identity.as_deref() != Some(election.identity.as_str()) {
            return Ok(false);
        }
        lease.spec = Some(released(
            spec,
            MicroTime(k8s_openapi::jiff::Timestamp::now()),
        ));
        api.replace(&election.name, &PostParams::default(), &lease)
            .await
            .map(|_| true)
    };
    match tokio::time::timeout(election.timings.retry_period, give_up).await {
        Ok(Ok(true)) => info!(lease = %election.name, "released the leader Lease"),
        Ok(Ok(false)) => {}
        Ok(Err(e)) => {
            warn!(lease = %election.name, error = %e, "could not release the leader Lease; it expires")
        }
        Err(_) => warn!(lease = %election.name, "releasing the leader Lease timed out; it expires"),
    }
}

/// A default identity: the pod name (or host name) and a random suffix, so two processes on
/// one host never share one.
pub fn default_identity() -> String {
    use std::hash::{BuildHasher, Hasher};
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "muster".into());
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    format!("{host}_{:08x}", h.finish() as u32)
}
