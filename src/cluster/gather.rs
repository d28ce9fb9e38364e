//! The I/O of gathering behind the gate (the decisions are `model::gather`): on every watch
//! change and every tick, one round under the table lock, then its writes.
//!
//! Per released gang, every member's `status.nominatedNodeName` is written first (pods/status
//! patches, concurrently), and only when all of them succeeded are the members' gates removed
//! (pods patches, concurrently): kube-scheduler never sees a member of the gang without its
//! seat published. A gang whose nominations failed keeps its gates, and the nominations that
//! were written for members still gated are withdrawn at once (a gated member's nomination keeps
//! plain pods off its room, and must not outlive the release, nor a muster outage after it); a
//! later round tries again. A write the API server refused waits out a per-pod back-off
//! ([`backoff`]) before it is sent again, and a release waits whole while any of its writes does.
//! Every patch names the pod's UID, so a pod deleted and created again under the same name is
//! never touched by mistake.
//!
//! Every write belongs to the leadership term of the round that planned it: it is sent only
//! while this replica still leads in that term, and one in flight is cancelled once the lease
//! lapses, as bindings are (`binding::call`). A deposed leader (frozen past its lease, cut off)
//! neither ungates nor nominates what the new leader decides. Each term starts with a fresh
//! [`Gatherer`]: its memory of what was written is the last term's, and the table it would
//! pair with was rebuilt at the take-over (`Shared::take_over`); the new term derives what it
//! needs from what the watch shows (derived).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use tracing::{debug, info, warn};

use crate::cluster::leader::role::Leadership;
use crate::metrics::{KindLabel, NominationLabel};
use crate::model::gather::{GatherPlan, Gatherer, Release, Ungate, GATHER_GATE};
use crate::model::{NodeName, PodRef};
use crate::state::Shared;

use self::backoff::{Write, WriteBackoff};

#[path = "gather/backoff.rs"]
mod backoff;

/// Rounds happen on watch changes, and at least this often (time alone changes decisions:
/// creation windows close, back-offs end).
pub const TICK: Duration = Duration::from_secs(1);
/// Patches in flight at once.
const CONCURRENCY: usize = 16;
/// How long one nomination or gate write may take before it counts as failed (tried again by a
/// later round). The API server may queue a request for long (API Priority and Fairness holds a
/// request of a busy priority level in its queue up to its timeout, 60 s by default): without a
/// bound one slow write would stall every gang's gathering behind it, the members of a release
/// whose other writes landed waiting at bind meanwhile. A write that lands after its timeout is
/// seen by the watch like any other (derived).
const WRITE_TIMEOUT: Duration = Duration::from_secs(20);
/// Rounds start at most this often: a burst of watch events makes one round, not one each
/// (a round walks every gang under the table lock).
const MIN_ROUND_GAP: Duration = Duration::from_millis(50);

/// Runs rounds until the task is dropped. `expect_marker`: gang members are marked by the
/// admission policy (the scheduler config names `muster.dev/gang` in `managedResources`), so
/// one without the marker is warned about.
pub async fn run(client: Client, shared: Arc<Shared>, expect_marker: bool) {
    let mut gatherer = Gatherer::new(expect_marker);
    let mut backoff = WriteBackoff::default();
    let mut term = None;
    let mut changes = shared.cache_changes();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            _ = tick.tick() => {}
        }
        // Mark the generation seen before reading the table: a change applied meanwhile
        // wakes the next round.
        changes.borrow_and_update();
        if !shared.readiness.is_ready() {
            continue;
        }
        let Some(now_term) = shared.leadership.leading_term(Instant::now()) else {
            continue;
        };
        if term != Some(now_term) {
            // A new term: nothing remembered from an earlier one holds (derived).
            if term.is_some() {
                debug!(
                    term = now_term,
                    "new leadership term: the gatherer starts afresh"
                );
            }
            gatherer = Gatherer::new(expect_marker);
            term = Some(now_term);
        }
        // A gang left partly bound before this replica started deciding comes first.
        shared.start_deciding(Instant::now());
        let plan = {
            let mut table = shared.table.lock();
            gatherer.gather(&mut table, Instant::now())
        };
        shared.flush_notices();
        if plan.markers_missing > 0 {
            shared
                .metrics
                .gang_markers_missing
                .inc_by(plan.markers_missing);
        }
        if !plan.is_empty() {
            let writes = Writes {
                client: &client,
                shared: &shared,
                term: now_term,
            };
            writes.write(&mut gatherer, &mut backoff, plan).await;
        }
        tokio::time::sleep(MIN_ROUND_GAP).await;
    }
}

/// What became of one write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Written,
    Failed,
    /// Not sent, or cancelled in flight: this replica no longer leads in the term that planned
    /// it.
    Abandoned,
}

impl Outcome {
    fn ok(self) -> bool {
        self == Outcome::Written
    }

    fn of(written: bool) -> Self {
        if written {
            Outcome::Written
        } else {
            Outcome::Failed
        }
    }
}

/// Runs `write` only if this replica leads in `term` when it would start, and cancels it if
/// the lease lapses meanwhile (`Leadership::lapsed`): a write planned while leading never lands
/// once a standby may have taken over (never-half: the new leader may keep the gang gated, or
/// seat its members elsewhere). Cancelling drops the request; one already on the wire may
/// still land, within the margin between the renew deadline and the lease duration, as a
/// binding in flight may.
async fn while_leading(
    leadership: &Leadership,
    term: u64,
    write: impl Future<Output = bool>,
) -> Outcome {
    if leadership.leading_term(Instant::now()) != Some(term) {
        return Outcome::Abandoned;
    }
    tokio::select! {
        written = write => Outcome::of(written),
        () = leadership.lapsed() => Outcome::Abandoned,
    }
}

/// The members of release `r` whose nomination was written but who kept their gate (its
/// removal failed, or was not sent because another nomination failed): their nominations are
/// withdrawn, so a gated member holds room against plain pods only while its release is under
/// way. None when the release was abandoned: this replica no longer leads, and the next leader
/// clears them in its first round (`Gatherer::gather`, nominations of gated members without a
/// seat).
fn to_withdraw(r: &Release, nominated: &[Outcome], ungated: &[Outcome]) -> Vec<PodRef> {
    if nominated.contains(&Outcome::Abandoned) || ungated.contains(&Outcome::Abandoned) {
        return Vec::new();
    }
    r.nominate
        .iter()
        .zip(nominated)
        .filter(|(_, o)| o.ok())
        .filter_map(|((pod, _), _)| {
            let i = r.ungate.iter().position(|u| u.pod.uid == pod.uid)?;
            (ungated.get(i) != Some(&Outcome::Written)).then(|| pod.clone())
        })
        .collect()
}

/// One round's writes, made in the leadership term that planned them.
struct Writes<'a> {
    client: &'a Client,
    shared: &'a Shared,
    term: u64,
}

impl Writes<'_> {
    async fn write(&self, gatherer: &mut Gatherer, backoff: &mut WriteBackoff, plan: GatherPlan) {
        let GatherPlan {
            releases,
            renominate,
            clear,
            outside_gangs,
            ..
        } = plan;
        let now = Instant::now();
        backoff.forget_stale(now);
        // Pods behind muster's gate in no gang: their gates go, with no nomination (see
        // `model::gather::orphans`).
        let outside_gangs: Vec<Ungate> = outside_gangs
            .into_iter()
            .filter(|u| self.ready(backoff, &u.pod, Write::Ungate, now))
            .collect();
        let freed = self.ungate_all(outside_gangs.clone()).await;
        let now = Instant::now();
        for (u, outcome) in outside_gangs.iter().zip(freed) {
            self.settle(backoff, &u.pod, Write::Ungate, outcome, now);
            match outcome {
                Outcome::Written => {
                    gatherer.ungated(&u.pod.uid, now);
                    self.shared.metrics.gates_removed.inc();
                    info!(pod = %u.pod, "pod behind muster's gate in no gang: gate removed");
                }
                Outcome::Abandoned => self.abandoned("gate"),
                Outcome::Failed => {}
            }
        }
        // A release waits whole while any of its writes backs off: its gates go only after
        // every nomination, and a nomination sent alone would be withdrawn again at once.
        let releases: Vec<Release> = releases
            .into_iter()
            .filter(|r| {
                let ready = r
                    .nominate
                    .iter()
                    .all(|(p, n)| backoff.ready(&p.uid, &Write::Nominate(Some(n.clone())), now))
                    && r.ungate
                        .iter()
                        .all(|u| backoff.ready(&u.pod.uid, &Write::Ungate, now));
                if !ready {
                    self.backed_off("release");
                }
                ready
            })
            .collect();
        let renominate: Vec<(PodRef, NodeName)> = renominate
            .into_iter()
            .filter(|(p, n)| self.ready(backoff, p, Write::Nominate(Some(n.clone())), now))
            .collect();
        let clear: Vec<PodRef> = clear
            .into_iter()
            .filter(|p| self.ready(backoff, p, Write::Nominate(None), now))
            .collect();
        let outcomes: Vec<(Release, Vec<Outcome>, Vec<Outcome>)> = stream::iter(releases)
            .map(|r| self.release(r))
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        let now = Instant::now();
        // Nominations of members still gated after their release failed: withdrawn below, so
        // a gated member carries muster's nomination only between the two writes of a release.
        let mut withdraw = Vec::new();
        for (r, nominated, ungated) in outcomes {
            for ((pod, node), outcome) in r.nominate.iter().zip(&nominated) {
                self.count("release", *outcome);
                self.settle(
                    backoff,
                    pod,
                    Write::Nominate(Some(node.clone())),
                    *outcome,
                    now,
                );
                if outcome.ok() {
                    let gated = r.ungate.iter().any(|u| u.pod.uid == pod.uid);
                    gatherer.nominated(&pod.uid, Some(node.clone()), now, gated);
                }
            }
            withdraw.extend(to_withdraw(&r, &nominated, &ungated));
            let mut removed = 0;
            for (u, outcome) in r.ungate.iter().zip(&ungated) {
                self.settle(backoff, &u.pod, Write::Ungate, *outcome, now);
                match outcome {
                    Outcome::Written => {
                        gatherer.ungated(&u.pod.uid, now);
                        removed += 1;
                    }
                    Outcome::Abandoned => self.abandoned("gate"),
                    Outcome::Failed => {}
                }
            }
            if removed > 0 {
                self.shared.metrics.gates_removed.inc_by(removed);
                info!(gang = %r.gang, members = removed, "gang placed by muster: seats published, gates removed");
            }
        }
        let renominated = self.nominate_all(renominate.clone()).await;
        let now = Instant::now();
        for ((pod, node), outcome) in renominate.into_iter().zip(renominated) {
            self.count("renominate", outcome);
            self.settle(
                backoff,
                &pod,
                Write::Nominate(Some(node.clone())),
                outcome,
                now,
            );
            if outcome.ok() {
                gatherer.nominated(&pod.uid, Some(node), now, false);
            }
        }
        for (why, pods) in [("withdraw", withdraw), ("clear", clear)] {
            let cleared: Vec<Outcome> = stream::iter(pods.clone())
                .map(|p| async move {
                    while_leading(
                        &self.shared.leadership,
                        self.term,
                        set_nomination(self.client, &p, None),
                    )
                    .await
                })
                .buffered(CONCURRENCY)
                .collect()
                .await;
            let now = Instant::now();
            for (p, outcome) in pods.iter().zip(cleared) {
                self.count(why, outcome);
                self.settle(backoff, p, Write::Nominate(None), outcome, now);
                if outcome.ok() {
                    gatherer.nominated(&p.uid, None, now, false);
                }
            }
        }
    }

    /// Whether `write` of `pod` may be sent now (else it waits out its back-off, counted).
    fn ready(&self, backoff: &WriteBackoff, pod: &PodRef, write: Write, now: Instant) -> bool {
        let ready = backoff.ready(&pod.uid, &write, now);
        if !ready {
            self.backed_off(match write {
                Write::Nominate(_) => "nomination",
                Write::Ungate => "gate",
            });
        }
        ready
    }

    /// Tells the back-off how `write` of `pod` ended.
    fn settle(
        &self,
        backoff: &mut WriteBackoff,
        pod: &PodRef,
        write: Write,
        outcome: Outcome,
        now: Instant,
    ) {
        match outcome {
            Outcome::Written => backoff.succeeded(&pod.uid, &write),
            Outcome::Failed => {
                let wait = backoff.failed(&pod.uid, write.clone(), now);
                warn!(pod = %pod, write = ?write, retry_in = ?wait, "gather write failed; not sent again before its back-off ends");
            }
            Outcome::Abandoned => {}
        }
    }

    fn backed_off(&self, kind: &'static str) {
        self.shared
            .metrics
            .gather_writes_backed_off
            .get_or_create(&KindLabel { kind })
            .inc();
    }

    fn count(&self, why: &'static str, outcome: Outcome) {
        let outcome = match outcome {
            Outcome::Written => "ok",
            Outcome::Failed => "failed",
            Outcome::Abandoned => {
                self.abandoned("nomination");
                return;
            }
        };
        self.shared
            .metrics
            .nomination_writes
            .get_or_create(&NominationLabel { why, outcome })
            .inc();
    }

    fn abandoned(&self, kind: &'static str) {
        self.shared
            .metrics
            .gather_writes_abandoned
            .get_or_create(&KindLabel { kind })
            .inc();
    }

    /// One gang's release: every nomination, then (only if all were written, and this replica
    /// still leads in the term that planned it) every gate.
    async fn release(&self, r: Release) -> (Release, Vec<Outcome>, Vec<Outcome>) {
        let nominated = self.nominate_all(r.nominate.clone()).await;
        let ungated = if nominated.iter().all(|o| o.ok()) {
            self.ungate_all(r.ungate.clone()).await
        } else if nominated.contains(&Outcome::Abandoned) {
            warn!(gang = %r.gang, "this replica stopped leading while publishing the gang's seats; the gates stay for the new leader");
            vec![Outcome::Abandoned; r.ungate.len()]
        } else {
            warn!(gang = %r.gang, "not every seat could be published as a nomination; the gates stay, tried again next round");
            Vec::new()
        };
        (r, nominated, ungated)
    }

    async fn nominate_all(&self, nominate: Vec<(PodRef, NodeName)>) -> Vec<Outcome> {
        stream::iter(nominate)
            .map(|(p, n)| async move {
                while_leading(
                    &self.shared.leadership,
                    self.term,
                    set_nomination(self.client, &p, Some(&n)),
                )
                .await
            })
            .buffered(CONCURRENCY)
            .collect()
            .await
    }

    /// Removes muster's gate from each pod, while leading in this term (outcomes in order).
    async fn ungate_all(&self, pods: Vec<Ungate>) -> Vec<Outcome> {
        stream::iter(pods)
            .map(|u| async move {
                while_leading(
                    &self.shared.leadership,
                    self.term,
                    ungate(self.client, &u.pod),
                )
                .await
            })
            .buffered(CONCURRENCY)
            .collect()
            .await
    }
}

/// Writes (or clears) `status.nominatedNodeName` of the pod with this UID.
async fn set_nomination(client: &Client, pod: &PodRef, node: Option<&NodeName>) -> bool {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    // The UID in the patch is a precondition: a pod of the same name but another UID is refused.
    let patch = json!({
        "metadata": {"uid": &*pod.uid},
        "status": {"nominatedNodeName": node.map(|n| &**n)},
    });
    let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
    let write = api.patch_status(&pod.name, &params, &patch);
    match tokio::time::timeout(WRITE_TIMEOUT, write).await {
        Ok(Ok(_)) => true,
        Err(_) => {
            warn!(pod = %pod, node = ?node, timeout = ?WRITE_TIMEOUT, "writing the pod's nominatedNodeName timed out");
            false
        }
        Ok(Err(e)) => {
            warn!(pod = %pod, node = ?node, error = %e, "could not write the pod's nominatedNodeName");
            false
        }
    }
}

/// Removes muster's gate from the pod's `spec.schedulingGates` (the API server allows gates
/// only to be removed after creation, `validateOnlyDeletedSchedulingGates`,
/// pkg/apis/core/validation/validation.go:4438 in v1.37.2). A strategic merge patch deletes the
/// gate by name (`schedulingGates` merges on `name`), leaving other gates as they are.
async fn ungate(client: &Client, pod: &PodRef) -> bool {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let patch = json!({
        "metadata": {"uid": &*pod.uid},
        "spec": {"schedulingGates": [{"name": GATHER_GATE, "$patch": "delete"}]},
    });
    let (params, patch) = (PatchParams::default(), Patch::Strategic(&patch));
    let write = api.patch(&pod.name, &params, &patch);
    match tokio::time::timeout(WRITE_TIMEOUT, write).await {
        Ok(Ok(_)) => true,
        Err(_) => {
            warn!(pod = %pod, timeout = ?WRITE_TIMEOUT, "removing the pod's scheduling gate timed out");
            false
        }
        Ok(Err(kube::Error::Api(e))) if e.code == 404 || e.code == 409 => {
            // Gone or replaced meanwhile: the watch will tell.
            debug!(pod = %pod, error = %e.message, "gate not removed: the pod changed");
            false
        }
        Ok(Err(e)) => {
            warn!(pod = %pod, error = %e, "could not remove the pod's scheduling gate");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    fn leading_for(d: Duration) -> (Leadership, u64) {
        let l = Leadership::candidate("a", "ns", "muster");
        let now = Instant::now();
        l.lead_until(now + d, now);
        let term = l.leading_term(now).expect("leads");
        (l, term)
    }

    #[tokio::test]
    async fn a_write_is_sent_while_leading_in_the_term_that_planned_it() {
        let (l, term) = leading_for(Duration::from_secs(60));
        assert_eq!(
            while_leading(&l, term, async { true }).await,
            Outcome::Written
        );
        assert_eq!(
            while_leading(&l, term, async { false }).await,
            Outcome::Failed
        );
        let sole = Leadership::sole();
        let t = sole
            .leading_term(Instant::now())
            .expect("a sole replica decides");
        assert_eq!(
            while_leading(&sole, t, async { true }).await,
            Outcome::Written
        );
    }

    /// A write planned in one term is not sent after a step-down, nor in a later term (a
    /// leader that lost the Lease and took it again starts from the watch, not from its plan).
    #[tokio::test]
    async fn a_write_is_not_sent_once_the_term_that_planned_it_ended() {
        let (l, term) = leading_for(Duration::from_secs(60));
        let sent = AtomicBool::new(false);
        let write = || async {
            sent.store(true, Ordering::SeqCst);
            true
        };
        l.follow(Some("b".into()));
        assert_eq!(while_leading(&l, term, write()).await, Outcome::Abandoned);
        let now = Instant::now();
        l.lead_until(now + Duration::from_secs(60), now);
        assert_eq!(while_leading(&l, term, write()).await, Outcome::Abandoned);
        assert!(
            !sent.load(Ordering::SeqCst),
            "a write of an ended term was sent"
        );
    }

    fn three_member_release() -> Release {
        let pod = |n: &str| PodRef {
            namespace: Arc::from("ml"),
            name: Arc::from(n),
            uid: Arc::from(format!("u-{n}")),
        };
        let members = [pod("a"), pod("b"), pod("c")];
        Release {
            gang: crate::model::GangKey::new("ml", "g"),
            nominate: members
                .iter()
                .map(|p| (p.clone(), NodeName::from("n1")))
                .collect(),
            ungate: members
                .iter()
                .enumerate()
                .map(|(i, p)| crate::model::gather::Ungate {
                    pod: p.clone(),
                    gate_index: i,
                })
                .collect(),
        }
    }

    fn names(pods: Vec<PodRef>) -> Vec<String> {
        pods.iter().map(|p| p.name.to_string()).collect()
    }

    /// A gated member carries muster's nomination only while its release is under way.
    #[test]
    fn the_nominations_of_members_left_gated_by_a_failed_release_are_withdrawn() {
        use Outcome::{Abandoned as A, Failed as F, Written as W};
        let r = three_member_release();
        assert!(
            to_withdraw(&r, &[W, W, W], &[W, W, W]).is_empty(),
            "released"
        );
        // One gate removal failed: that member keeps its gate, its nomination goes.
        assert_eq!(names(to_withdraw(&r, &[W, W, W], &[W, F, W])), ["b"]);
        // One nomination failed: no gate was removed, the two written go.
        assert_eq!(names(to_withdraw(&r, &[W, F, W], &[])), ["a", "c"]);
        // Abandoned: this replica no longer leads and writes nothing more.
        assert!(to_withdraw(&r, &[W, A, A], &[A, A, A]).is_empty());
        assert!(to_withdraw(&r, &[W, W, W], &[W, A, A]).is_empty());
    }

    #[tokio::test]
    async fn a_write_in_flight_is_cancelled_when_the_lease_lapses() {
        let (l, term) = leading_for(Duration::from_millis(200));
        let hung = std::future::pending::<bool>();
        let outcome = tokio::time::timeout(Duration::from_secs(10), while_leading(&l, term, hung))
            .await
            .expect("cancelled at the renew deadline, not left in flight");
        assert_eq!(outcome, Outcome::Abandoned);
    }
}
