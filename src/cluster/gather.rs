//! The I/O of gathering behind the gate (the decisions are `model::gather`): on every watch
//! change, every tick and every settled write, one round under the table lock; its writes run
//! as tasks of their own, so a round never waits on any gang's writes.
//!
//! Per released gang, one task: every member's `status.nominatedNodeName` is written first
//! (pods/status patches, concurrently), and only when all of them succeeded are the members'
//! gates removed (pods patches, concurrently): kube-scheduler never sees a member of the gang
//! without its seat published (never-half). A gang whose nominations failed keeps its gates,
//! and the nominations that were written for members still gated are withdrawn by the same task
//! (a gated member's nomination keeps plain pods off its room, and must not outlive the release,
//! nor a muster outage after it: holds-nothing); a later round tries again. While a gang's task
//! runs, rounds plan nothing for that gang or its members (`Gatherer::writing`): other gangs are
//! placed meanwhile, and this one is judged again from what its writes did once they settle.
//! Renominations, clears and the gates of pods in no gang are tasks of one write each, alike.
//!
//! Each write is one PATCH at a time on a client without kube-client's retry layer (which would
//! repeat a 429 up to 15 times, waiting out each `Retry-After`: API Priority and Fairness raises
//! it up to 32 s on a level that keeps refusing, so one gate removal took 20 s and more). A
//! write throttled (429) is tried again within [`WRITE_RETRY`] (`binder::retrying`, as a
//! binding is), a 429's `Retry-After` waited for up to 2 s. A write that failed waits out a
//! per-pod back-off ([`backoff`]) before a round sends it again, and a release waits whole
//! while any of its
//! writes does. Every patch names the pod's UID, so a pod deleted and created again under the
//! same name is never touched by mistake.
//!
//! Every write belongs to the leadership term of the round that planned it: it is sent only
//! while this replica still leads in that term, and one in flight is cancelled once the lease
//! lapses, as bindings are (`binding::call`). A deposed leader (frozen past its lease, cut off)
//! neither ungates nor nominates what the new leader decides. Each term starts with a fresh
//! [`Gatherer`]: its memory of what was written is the last term's, and the table it would
//! pair with was rebuilt at the take-over (`Shared::take_over`); the new term derives what it
//! needs from what the watch shows (derived), and leaves alone only the pods whose writes of
//! the last term are still being cancelled.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use kube::api::{Patch, PatchParams};
use kube::Client;
use rustc_hash::FxHashMap as HashMap;
use serde_json::json;
use tokio::sync::Semaphore;
use tokio::task::{Id, JoinSet};
use tracing::{debug, error, info, warn};

use crate::cluster::binder::{self, RetryPolicy};
use crate::metrics::{KindLabel, NominationLabel};
use crate::model::gather::{GatherPlan, Gatherer, Nominations, Release, GATHER_GATE};
use crate::model::{GangKey, NodeName, PodRef, PodUid};
use crate::state::binder::BindError;
use crate::state::leadership::Leadership;
use crate::state::Shared;

use self::backoff::{Write, WriteBackoff};

#[path = "gather/backoff.rs"]
mod backoff;

/// Rounds happen on watch changes, and at least this often (time alone changes decisions:
/// creation windows close, back-offs end).
pub const TICK: Duration = Duration::from_secs(1);
/// Requests in flight at once, over every gang's writes (a permit is held per attempt, not
/// while waiting to try again).
const CONCURRENCY: usize = 64;
/// How one nomination or gate write is tried while the API server answers 429: up to 10 requests, 0.1 s apart doubling to 2 s,
/// within 20 s; a 429's `Retry-After` is waited for up to 2 s. API Priority and Fairness sets
/// `Retry-After` for the whole priority level, from how many of *its* requests it refused of
/// late: on a level that keeps refusing (anyone's requests) it rises to 32 s
/// (`droppedRequestsTracker`, staging/src/k8s.io/apiserver/pkg/util/flowcontrol/
/// dropped_requests_tracker.go:140, v1.37.2), while one seat frees within milliseconds. A
/// release holds its gang's nominations while its gates wait, and a write that fails for good
/// makes the release start over (its nominations withdrawn, the whole gang planned and
/// written again), so each write is tried again in its task, a few times a second at first,
/// rather than after the level's `Retry-After`, or given up at once as a binding does when
/// that ends past its budget (`RetryPolicy::default()`): with the level refusing about half
/// its requests that way, no gang was placed in 60 s (`tests/e2e/flowcontrol.rs`). The 20 s
/// also cover one request held in an APF queue (up to a quarter of the request timeout, 15 s
/// by default). A write still failing after it waits out the pod's back-off ([`backoff`]) and
/// is sent again by a later round; one that lands late is seen by the watch (derived).
pub const WRITE_RETRY: RetryPolicy = RetryPolicy {
    attempts: 10,
    first_delay: Duration::from_millis(100),
    max_delay: Duration::from_secs(2),
    budget: Duration::from_secs(20),
    longest_retry_after: Some(Duration::from_secs(2)),
};
/// Rounds start at most every [`ROUND_GAP_FACTOR`] times the last round's duration, within
/// these bounds ([`round_gap`]): a burst of watch events makes one round, not one each (a round
/// walks every gang under the table lock, which filter and bind calls also take).
const MIN_ROUND_GAP: Duration = Duration::from_millis(5);
const MAX_ROUND_GAP: Duration = Duration::from_millis(50);
/// Rounds hold the table lock at most 1 / (1 + this) of the time.
const ROUND_GAP_FACTOR: u32 = 4;

/// How long the loop rests after a round that took `round`. A fixed 50 ms rest added 25 ms on
/// average to every gang's wait between its last member's creation and its release, although a
/// round of the benchmark's 500 nodes and 145 gangs takes 0.3–0.6 ms on average
/// (`muster_gather_round_duration_seconds`); a round of a large cluster (15 ms at 10,000 nodes)
/// rests long enough to leave the lock to the verbs. The shorter rest was tried once before and
/// undone when the contended smoke run stalled: a gang released on a view that did not yet show a
/// plain pod's binding lost its floating seat, and kube-scheduler, which had rejected its members
/// for room, did not retry them when the run's late nodes came. That was NodeResourcesFit's node
/// hint looking for the marker on nodes; nodes publish it now (`cluster::node_marker`), so such
/// members are retried when room comes, whatever the rest.
fn round_gap(round: Duration) -> Duration {
    (round * ROUND_GAP_FACTOR).clamp(MIN_ROUND_GAP, MAX_ROUND_GAP)
}

/// Runs rounds until the task is dropped (its writes in flight with it). `client` must have
/// no retry layer (see the module's notes). `expect_marker`: gang members are marked by the
/// admission policy (the scheduler config names `muster.dev/gang` in `managedResources`), so
/// one without the marker is warned about. `nominations`: which seats are published as
/// nominations (`--nominate-seats`).
pub async fn run(
    client: Client,
    shared: Arc<Shared>,
    expect_marker: bool,
    nominations: Nominations,
) {
    let writer = Arc::new(Writer {
        client,
        shared: shared.clone(),
        requests: Semaphore::new(CONCURRENCY),
    });
    let mut gatherer = Gatherer::new(expect_marker).nominating(nominations);
    let mut writes = InFlight::default();
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
            Some(done) = writes.tasks.join_next_with_id() => {
                writes.settle(done, &mut gatherer, &mut backoff, term, &writer);
            }
        }
        while let Some(done) = writes.tasks.try_join_next_with_id() {
            writes.settle(done, &mut gatherer, &mut backoff, term, &writer);
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
            // A new term: nothing remembered from an earlier one holds (derived), but what
            // is still in flight (being cancelled) is not planned again until it settled.
            if term.is_some() {
                debug!(
                    term = now_term,
                    "new leadership term: the gatherer starts afresh"
                );
            }
            gatherer = Gatherer::new(expect_marker).nominating(nominations);
            writes.announce_all(&mut gatherer);
            term = Some(now_term);
        }
        // A gang left partly bound before this replica started deciding comes first.
        shared.start_deciding(Instant::now());
        let round_started = Instant::now();
        let plan = {
            let mut table = shared.table.lock();
            gatherer.gather(&mut table, round_started)
        };
        let round = round_started.elapsed();
        shared.metrics.gather_round.observe(round.as_secs_f64());
        shared.flush_notices();
        if plan.markers_missing > 0 {
            shared
                .metrics
                .gang_markers_missing
                .inc_by(plan.markers_missing);
        }
        if !plan.is_empty() {
            writes.start(plan, now_term, &writer, &mut gatherer, &mut backoff);
        }
        tokio::time::sleep(round_gap(round)).await;
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

/// Runs `write` only while this replica leads in `term` ([`Leadership::while_leading`]): a
/// write planned while leading never lands once a standby may have taken over (never-half: the
/// new leader may keep the gang gated, or seat its members elsewhere).
async fn while_leading(
    leadership: &Leadership,
    term: u64,
    write: impl Future<Output = bool>,
) -> Outcome {
    match leadership.while_leading(term, write).await {
        Some(written) => Outcome::of(written),
        None => Outcome::Abandoned,
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

/// What one write task did, and in which term.
#[derive(Debug)]
struct Done {
    term: u64,
    work: Work,
}

#[derive(Debug)]
enum Work {
    /// A gang's release: its nominations, its gates (none sent unless every nomination was
    /// written), and the nominations then withdrawn.
    Release {
        release: Release,
        nominated: Vec<Outcome>,
        ungated: Vec<Outcome>,
        withdrawn: Vec<(PodRef, Outcome)>,
    },
    /// One nomination written again (`Some`) or cleared; `why` labels the metric.
    Nominate {
        why: &'static str,
        pod: PodRef,
        node: Option<NodeName>,
        outcome: Outcome,
    },
    /// The gate of a pod in no gang.
    Ungate { pod: PodRef, outcome: Outcome },
}

/// What a task announced to the gatherer as being written: a gang's release, or pods alone.
type Announced = (Option<GangKey>, Vec<PodUid>);

/// The write tasks under way, and what each announced (`Gatherer::writing`): settled when the
/// task ends, however it ends.
#[derive(Default)]
struct InFlight {
    tasks: JoinSet<Done>,
    announced: HashMap<Id, Announced>,
}

impl InFlight {
    /// Starts the writes of one round's plan, each as a task of its own, except those that
    /// wait out a back-off (counted) or concern a pod already being written.
    fn start(
        &mut self,
        plan: GatherPlan,
        term: u64,
        writer: &Arc<Writer>,
        gatherer: &mut Gatherer,
        backoff: &mut WriteBackoff,
    ) {
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
        for u in outside_gangs {
            if gatherer.is_writing(&u.pod.uid) || !writer.ready(backoff, &u.pod, Write::Ungate, now)
            {
                continue;
            }
            let w = writer.clone();
            self.spawn(gatherer, None, vec![u.pod.uid.clone()], async move {
                let outcome = w.ungate(term, &u.pod).await;
                Done {
                    term,
                    work: Work::Ungate {
                        pod: u.pod,
                        outcome,
                    },
                }
            });
        }
        // A release waits whole while any of its writes backs off: its gates go only after
        // every nomination, and a nomination sent alone would be withdrawn again at once.
        for r in releases {
            let pods: Vec<PodUid> = r
                .nominate
                .iter()
                .map(|(p, _)| p.uid.clone())
                .chain(r.ungate.iter().map(|u| u.pod.uid.clone()))
                .collect();
            if pods.iter().any(|p| gatherer.is_writing(p)) {
                continue;
            }
            let ready = r
                .nominate
                .iter()
                .all(|(p, n)| backoff.ready(&p.uid, &Write::Nominate(Some(n.clone())), now))
                && r.ungate
                    .iter()
                    .all(|u| backoff.ready(&u.pod.uid, &Write::Ungate, now));
            if !ready {
                writer.backed_off("release");
                continue;
            }
            let w = writer.clone();
            let gang = r.gang.clone();
            self.spawn(gatherer, Some(gang), pods, async move {
                Done {
                    term,
                    work: w.release(term, r).await,
                }
            });
        }
        let nominations = renominate
            .into_iter()
            .map(|(p, n)| ("renominate", p, Some(n)))
            .chain(clear.into_iter().map(|p| ("clear", p, None)));
        for (why, pod, node) in nominations {
            if gatherer.is_writing(&pod.uid)
                || !writer.ready(backoff, &pod, Write::Nominate(node.clone()), now)
            {
                continue;
            }
            let w = writer.clone();
            self.spawn(gatherer, None, vec![pod.uid.clone()], async move {
                let outcome = w.nominate(term, &pod, node.as_ref()).await;
                Done {
                    term,
                    work: Work::Nominate {
                        why,
                        pod,
                        node,
                        outcome,
                    },
                }
            });
        }
    }

    fn spawn(
        &mut self,
        gatherer: &mut Gatherer,
        gang: Option<GangKey>,
        pods: Vec<PodUid>,
        task: impl Future<Output = Done> + Send + 'static,
    ) {
        gatherer.writing(gang.as_ref(), pods.iter().cloned());
        let id = self.tasks.spawn(task).id();
        self.announced.insert(id, (gang, pods));
    }

    /// A new term's gatherer: told what is still in flight.
    fn announce_all(&self, gatherer: &mut Gatherer) {
        for (gang, pods) in self.announced.values() {
            gatherer.writing(gang.as_ref(), pods.iter().cloned());
        }
    }

    /// One task ended: its outcomes told to the back-off always, and to the gatherer when it
    /// is the one of the term that planned them (a later term's derives from the watch).
    fn settle(
        &mut self,
        done: Result<(Id, Done), tokio::task::JoinError>,
        gatherer: &mut Gatherer,
        backoff: &mut WriteBackoff,
        term: Option<u64>,
        writer: &Writer,
    ) {
        let id = match &done {
            Ok((id, _)) => *id,
            Err(e) => e.id(),
        };
        if let Some((gang, pods)) = self.announced.remove(&id) {
            gatherer.settled(gang.as_ref(), pods.iter());
        }
        match done {
            Ok((_, done)) => writer.apply(done, gatherer, backoff, term),
            Err(e) => error!(error = %e, "a gather write task ended without an outcome"),
        }
    }
}

/// Sends the gatherer's writes, in the leadership term that planned each.
struct Writer {
    client: Client,
    shared: Arc<Shared>,
    requests: Semaphore,
}

impl Writer {
    /// Tells the gatherer and the back-off what one task did.
    fn apply(
        &self,
        done: Done,
        gatherer: &mut Gatherer,
        backoff: &mut WriteBackoff,
        term: Option<u64>,
    ) {
        let now = Instant::now();
        let current = term == Some(done.term);
        match done.work {
            Work::Ungate { pod, outcome } => {
                self.settle(backoff, &pod, Write::Ungate, outcome, now);
                match outcome {
                    Outcome::Written => {
                        if current {
                            gatherer.ungated(&pod.uid, now);
                        }
                        self.shared.metrics.gates_removed.inc();
                        info!(pod = %pod, "pod behind muster's gate in no gang: gate removed");
                    }
                    Outcome::Abandoned => self.abandoned("gate"),
                    Outcome::Failed => {}
                }
            }
            Work::Nominate {
                why,
                pod,
                node,
                outcome,
            } => {
                self.count(why, outcome);
                self.settle(backoff, &pod, Write::Nominate(node.clone()), outcome, now);
                if outcome.ok() && current {
                    gatherer.nominated(&pod.uid, node, now, false);
                }
            }
            Work::Release {
                release: r,
                nominated,
                ungated,
                withdrawn,
            } => {
                for ((pod, node), outcome) in r.nominate.iter().zip(&nominated) {
                    self.count("release", *outcome);
                    self.settle(
                        backoff,
                        pod,
                        Write::Nominate(Some(node.clone())),
                        *outcome,
                        now,
                    );
                    if outcome.ok() && current {
                        let gated = r.ungate.iter().any(|u| u.pod.uid == pod.uid);
                        gatherer.nominated(&pod.uid, Some(node.clone()), now, gated);
                    }
                }
                let mut removed = 0;
                for (u, outcome) in r.ungate.iter().zip(&ungated) {
                    self.settle(backoff, &u.pod, Write::Ungate, *outcome, now);
                    match outcome {
                        Outcome::Written => {
                            if current {
                                gatherer.ungated(&u.pod.uid, now);
                            }
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
                for (pod, outcome) in withdrawn {
                    self.count("withdraw", outcome);
                    self.settle(backoff, &pod, Write::Nominate(None), outcome, now);
                    if outcome.ok() && current {
                        gatherer.nominated(&pod.uid, None, now, false);
                    }
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
    /// still leads in the term that planned it) every gate; then the nominations of members
    /// left gated are withdrawn.
    async fn release(&self, term: u64, r: Release) -> Work {
        let started = Instant::now();
        let nominated = join_all(
            r.nominate
                .iter()
                .map(|(p, n)| self.nominate(term, p, Some(n))),
        )
        .await;
        let ungated = if nominated.iter().all(|o| o.ok()) {
            join_all(r.ungate.iter().map(|u| self.ungate(term, &u.pod))).await
        } else if nominated.contains(&Outcome::Abandoned) {
            warn!(gang = %r.gang, "this replica stopped leading while publishing the gang's seats; the gates stay for the new leader");
            vec![Outcome::Abandoned; r.ungate.len()]
        } else {
            warn!(gang = %r.gang, "not every seat could be published as a nomination; the gates stay, tried again by a later round");
            Vec::new()
        };
        if !ungated.is_empty() && ungated.iter().all(|o| o.ok()) {
            let took = started.elapsed().as_secs_f64();
            self.shared.metrics.gang_release.observe(took);
        }
        let withdraw = to_withdraw(&r, &nominated, &ungated);
        let cleared = join_all(withdraw.iter().map(|p| self.nominate(term, p, None))).await;
        Work::Release {
            withdrawn: withdraw.into_iter().zip(cleared).collect(),
            release: r,
            nominated,
            ungated,
        }
    }

    /// Writes (or clears) `status.nominatedNodeName` of the pod with this UID, while leading
    /// in `term`.
    async fn nominate(&self, term: u64, pod: &PodRef, node: Option<&NodeName>) -> Outcome {
        // The UID in the patch is a precondition: a pod of the same name but another UID is
        // refused.
        let patch = json!({
            "metadata": {"uid": &*pod.uid},
            "status": {"nominatedNodeName": node.map(|n| &**n)},
        });
        let write = self.patch(pod, |r, name| {
            r.patch_subresource(
                "status",
                name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
        });
        let written = async {
            match write.await {
                Ok(()) => true,
                Err(e) => {
                    warn!(pod = %pod, node = ?node, error = %e, "could not write the pod's nominatedNodeName");
                    false
                }
            }
        };
        while_leading(&self.shared.leadership, term, written).await
    }

    /// Removes muster's gate from the pod's `spec.schedulingGates` (the API server allows
    /// gates only to be removed after creation, `validateOnlyDeletedSchedulingGates`,
    /// pkg/apis/core/validation/validation.go:4438 in v1.37.2), while leading in `term`. A
    /// strategic merge patch deletes the gate by name (`schedulingGates` merges on `name`),
    /// leaving other gates as they are; sent again after a lost answer it changes nothing.
    async fn ungate(&self, term: u64, pod: &PodRef) -> Outcome {
        let patch = json!({
            "metadata": {"uid": &*pod.uid},
            "spec": {"schedulingGates": [{"name": GATHER_GATE, "$patch": "delete"}]},
        });
        let write = self.patch(pod, |r, name| {
            r.patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        });
        let written = async {
            match write.await {
                Ok(()) => true,
                Err(e) => {
                    warn!(pod = %pod, error = %e, "could not remove the pod's scheduling gate");
                    false
                }
            }
        };
        while_leading(&self.shared.leadership, term, written).await
    }

    /// One patch of `pod`, tried within [`WRITE_RETRY`] while throttled (429); the request
    /// built by `build`. Any other refusal ends the write (404: the pod is gone; 409: it was
    /// replaced, its UID differs; 422: invalid; 5xx or no answer: tried again by a later round
    /// after the pod's back-off), and the watch tells what changed.
    async fn patch(
        &self,
        pod: &PodRef,
        build: impl Fn(
            &kube::core::Request,
            &str,
        ) -> Result<axum::http::Request<Vec<u8>>, kube::core::request::Error>,
    ) -> Result<(), String> {
        let url = kube::core::Request::new(format!("/api/v1/namespaces/{}/pods", pod.namespace));
        let request = build(&url, &pod.name).map_err(|e| format!("cannot build the patch: {e}"))?;
        let retried = || debug!(pod = %pod, "gather write refused for a moment; trying again");
        binder::retrying(WRITE_RETRY, "write", retried, || async {
            let _permit = self.requests.acquire().await;
            // Only a 429 is tried again here: any other failure (a server error, no answer)
            // is final for this attempt and left to the per-pod back-off, so a PATCH that
            // keeps failing costs a few requests a minute (`backoff`), not ten every 11 s.
            match binder::send_once(&self.client, request.clone(), |_, message| {
                Err(BindError::Permanent(message.to_string()))
            })
            .await
            {
                Err(BindError::Transient(m)) => Err(BindError::Permanent(m)),
                other => other,
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[test]
    fn rounds_rest_four_times_their_duration_between_5_and_50_ms() {
        let ms = Duration::from_millis;
        assert_eq!(round_gap(Duration::from_micros(200)), ms(5));
        assert_eq!(round_gap(ms(3)), ms(12));
        assert_eq!(round_gap(ms(40)), ms(50));
    }

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

    /// A stand-in API server: records each PATCH (`<pod> status|gate`), answers as `answer`
    /// says, and holds the answers to patches of the pods in `held` until `release` is
    /// notified.
    struct FakeApi {
        seen: parking_lot::Mutex<Vec<String>>,
        held: Vec<&'static str>,
        release: tokio::sync::Notify,
        answer: Box<Answer>,
    }

    /// The stand-in's answer to the `n`-th request `<pod> status|gate`: status code and
    /// `Retry-After` seconds.
    type Answer = dyn Fn(&str, usize) -> (u16, Option<u64>) + Send + Sync;

    impl FakeApi {
        fn new(
            held: Vec<&'static str>,
            answer: impl Fn(&str, usize) -> (u16, Option<u64>) + Send + Sync + 'static,
        ) -> Arc<Self> {
            Arc::new(FakeApi {
                seen: parking_lot::Mutex::new(Vec::new()),
                held,
                release: tokio::sync::Notify::new(),
                answer: Box::new(answer),
            })
        }

        fn seen(&self) -> Vec<String> {
            self.seen.lock().clone()
        }

        /// A client whose every request this stand-in answers.
        fn client(self: &Arc<Self>) -> Client {
            let api = self.clone();
            let service = tower::service_fn(move |req: axum::http::Request<kube::client::Body>| {
                let api = api.clone();
                async move {
                    // /api/v1/namespaces/ml/pods/<name>[/status]?...
                    let path = req.uri().path().to_string();
                    let mut parts = path.rsplit('/');
                    let (name, what) = match parts.next() {
                        Some("status") => (parts.next().unwrap_or_default(), "status"),
                        Some(n) => (n, "gate"),
                        None => ("", "gate"),
                    };
                    let seen = format!("{name} {what}");
                    let n = {
                        let mut s = api.seen.lock();
                        s.push(seen.clone());
                        s.iter().filter(|x| **x == seen).count()
                    };
                    if api.held.contains(&name) {
                        api.release.notified().await;
                    }
                    let (code, retry_after) = (api.answer)(&seen, n);
                    let mut resp = axum::http::Response::builder().status(code);
                    if let Some(r) = retry_after {
                        resp = resp.header("Retry-After", r.to_string());
                    }
                    Ok::<_, std::convert::Infallible>(
                        resp.body(kube::client::Body::from(b"{}".to_vec()))
                            .expect("a response"),
                    )
                }
            });
            Client::new(service, "default")
        }
    }

    fn writer(api: &Arc<FakeApi>) -> Arc<Writer> {
        struct NoBinder;
        impl crate::state::binder::Binder for NoBinder {
            fn bind(
                &self,
                _: PodRef,
                _: NodeName,
            ) -> futures::future::BoxFuture<'static, Result<(), BindError>> {
                unreachable!("no binding here")
            }
        }
        Arc::new(Writer {
            client: api.client(),
            shared: Arc::new(Shared::new(
                crate::model::ModelConfig::default(),
                Arc::new(NoBinder),
                crate::state::event_sink::EventSink::disabled(),
            )),
            requests: Semaphore::new(CONCURRENCY),
        })
    }

    fn release_of(gang: &str, members: &[&str]) -> Release {
        let pod = |n: &str| PodRef {
            namespace: Arc::from("ml"),
            name: Arc::from(n),
            uid: Arc::from(format!("u-{n}")),
        };
        Release {
            gang: crate::model::GangKey::new("ml", gang),
            nominate: members
                .iter()
                .map(|m| (pod(m), NodeName::from("n1")))
                .collect(),
            ungate: members
                .iter()
                .map(|m| crate::model::gather::Ungate {
                    pod: pod(m),
                    gate_index: 0,
                })
                .collect(),
        }
    }

    fn plan_of(releases: Vec<Release>) -> GatherPlan {
        GatherPlan {
            releases,
            ..GatherPlan::default()
        }
    }

    fn gang_of(done: &Done) -> String {
        match &done.work {
            Work::Release { release, .. } => release.gang.name.to_string(),
            other => format!("{other:?}"),
        }
    }

    /// A round never waits on one gang's writes: while the first gang's gate removals hang in
    /// the API server (a throttled level's queue), a second gang is released and its writes
    /// settle; the first gang is not released a second time meanwhile, and its gates go only
    /// after all its nominations (never-half).
    #[tokio::test]
    async fn a_second_gang_is_released_while_the_first_gangs_writes_are_still_in_flight() {
        let api = FakeApi::new(vec!["a1", "a2"], |_, _| (200, None));
        let w = writer(&api);
        let (mut gatherer, mut backoff, mut writes) = (
            Gatherer::new(true),
            WriteBackoff::default(),
            InFlight::default(),
        );
        let term = w
            .shared
            .leadership
            .leading_term(Instant::now())
            .expect("sole");
        writes.start(
            plan_of(vec![release_of("first", &["a1", "a2"])]),
            term,
            &w,
            &mut gatherer,
            &mut backoff,
        );
        // The next round planned the first gang again (as a stale watch would let it) and a
        // second gang.
        writes.start(
            plan_of(vec![
                release_of("first", &["a1", "a2"]),
                release_of("second", &["b1", "b2"]),
            ]),
            term,
            &w,
            &mut gatherer,
            &mut backoff,
        );
        assert_eq!(writes.tasks.len(), 2, "the first gang was started twice");
        let done = tokio::time::timeout(Duration::from_secs(10), writes.tasks.join_next_with_id())
            .await
            .expect("the second gang settled while the first one's writes hang")
            .expect("a task");
        assert_eq!(gang_of(&done.as_ref().expect("no panic").1), "second");
        writes.settle(done, &mut gatherer, &mut backoff, Some(term), &w);
        assert!(!gatherer.is_writing(&Arc::from("u-b1")));
        assert!(
            gatherer.is_writing(&Arc::from("u-a1")),
            "the first gang is still in flight"
        );
        api.release.notify_waiters();
        // Answers to requests that arrive after the notification: keep releasing them.
        let done = loop {
            tokio::select! {
                d = writes.tasks.join_next_with_id() => break d.expect("a task"),
                () = tokio::time::sleep(Duration::from_millis(10)) => api.release.notify_waiters(),
            }
        };
        let Ok((
            _,
            Done {
                work:
                    Work::Release {
                        nominated,
                        ungated,
                        withdrawn,
                        ..
                    },
                ..
            },
        )) = &done
        else {
            panic!("{done:?}");
        };
        assert_eq!(
            (nominated.as_slice(), ungated.as_slice()),
            (
                [Outcome::Written; 2].as_slice(),
                [Outcome::Written; 2].as_slice()
            )
        );
        assert!(withdrawn.is_empty());
        writes.settle(done, &mut gatherer, &mut backoff, Some(term), &w);
        assert!(!gatherer.is_writing(&Arc::from("u-a1")));
        assert!(writes.announced.is_empty());
        let first: Vec<String> = api
            .seen()
            .into_iter()
            .filter(|s| s.starts_with('a'))
            .collect();
        let last_status = first.iter().rposition(|s| s.ends_with("status")).unwrap();
        let first_gate = first.iter().position(|s| s.ends_with("gate")).unwrap();
        assert!(
            last_status < first_gate,
            "a gate before a nomination: {first:?}"
        );
        assert_eq!(first.len(), 4, "each write once: {first:?}");
    }

    /// A 429 is tried again after its `Retry-After`, waited for up to 2 s: a level that keeps
    /// refusing others' requests says 32 s, and the write is tried again within its budget.
    #[tokio::test]
    async fn a_throttled_write_is_tried_again_after_its_retry_after_up_to_two_seconds() {
        let api = FakeApi::new(Vec::new(), |seen, n| match (seen, n) {
            ("p gate", 1) => (429, Some(1)),
            ("q gate", 1 | 2) => (429, Some(32)),
            _ => (200, None),
        });
        let w = writer(&api);
        let term = w
            .shared
            .leadership
            .leading_term(Instant::now())
            .expect("sole");
        let pod = |n: &str| PodRef {
            namespace: Arc::from("ml"),
            name: Arc::from(n),
            uid: Arc::from(format!("u-{n}")),
        };
        assert_eq!(w.ungate(term, &pod("p")).await, Outcome::Written);
        // Each Retry-After of 32 s is waited for 2 s: done long before the first would end.
        let q = pod("q");
        let q = tokio::time::timeout(Duration::from_secs(30), w.ungate(term, &q));
        assert_eq!(
            q.await,
            Ok(Outcome::Written),
            "waited out a Retry-After of 32 s"
        );
        let seen = api.seen();
        assert_eq!(seen, ["p gate", "p gate", "q gate", "q gate", "q gate"]);
    }

    /// A release whose gate removal was refused for good: the other gates went, and the
    /// refused member's nomination is withdrawn by the release's own task (holds-nothing).
    #[tokio::test]
    async fn a_release_task_withdraws_the_nomination_of_a_member_left_gated() {
        let api = FakeApi::new(Vec::new(), |seen, _| {
            if seen == "b gate" {
                (422, None)
            } else {
                (200, None)
            }
        });
        let w = writer(&api);
        let term = w
            .shared
            .leadership
            .leading_term(Instant::now())
            .expect("sole");
        let Work::Release {
            ungated, withdrawn, ..
        } = w.release(term, release_of("g", &["a", "b", "c"])).await
        else {
            unreachable!()
        };
        use Outcome::{Failed as F, Written as W};
        assert_eq!(ungated, [W, F, W]);
        let withdrawn: Vec<(String, Outcome)> = withdrawn
            .into_iter()
            .map(|(p, o)| (p.name.to_string(), o))
            .collect();
        assert_eq!(withdrawn, [("b".to_string(), W)]);
        assert_eq!(api.seen().last().map(String::as_str), Some("b status"));
    }
}
