//! Prometheus metrics, served as text on `/metrics`. Names and meanings are listed in
//! docs/operating.md ("Metrics").

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::model::GangGauges;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerbLabel {
    pub verb: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerbOutcomeLabel {
    pub verb: &'static str,
    /// `ok`, `refused` (a verdict or domain error sent as HTTP 200 with `Error`), `bad_request`.
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: &'static str,
}

/// The application protocol a TLS connection agreed on (ALPN).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProtocolLabel {
    pub protocol: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabel {
    pub state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: &'static str,
}

/// Why a gathered member's nomination was written, and whether it was.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NominationLabel {
    pub why: &'static str,
    pub outcome: &'static str,
}

/// A PodGroup API, by its `group/version`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiLabel {
    pub api: &'static str,
}

/// A PodGroup API and what became of one status write.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiOutcomeLabel {
    pub api: &'static str,
    /// `written`, `unchanged` (the object already showed it), `conflict`, `gone`, `failed`.
    pub outcome: &'static str,
}

/// What the table knows of one PodGroup API, for [`Metrics::render`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PodGroupGauge {
    pub api: &'static str,
    /// The cluster serves it and its first list completed.
    pub served: bool,
    /// PodGroups of it in the table.
    pub known: usize,
}

pub struct Metrics {
    registry: Registry,
    pub requests: Family<VerbOutcomeLabel, Counter>,
    pub latency: Family<VerbLabel, Histogram>,
    gangs: Family<StateLabel, Gauge>,
    seats: Gauge,
    pub gangs_placed: Counter,
    pub gang_timeouts: Counter,
    pub quorum_waits: Counter,
    /// Confirmed seats of gathered gangs planned again at a bind decision: their members'
    /// calls had ended unbound, so kube-scheduler no longer held their room.
    pub gathered_seats_let_go: Counter,
    pub bind_failures: Counter,
    pub bind_retries: Counter,
    /// Preemption decisions: `kept` (as proposed), `trimmed`, `refused` (nothing evicted).
    pub preemptions: Family<OutcomeLabel, Counter>,
    /// Gangs found partly bound when muster started deciding: `finishing` (room held for the
    /// rest), `evicted` (no room: bound members evicted), `reported` (no room, mode `pod`).
    pub partly_bound_gangs: Family<OutcomeLabel, Counter>,
    pub events_dropped: Counter,
    pub watch_errors: Family<KindLabel, Counter>,
    /// Objects the watches could not read in full (skipped, or kept with what was read).
    pub unreadable_objects: Family<KindLabel, Counter>,
    cache_nodes: Gauge,
    cache_pods: Gauge,
    pod_groups: Family<ApiLabel, Gauge>,
    pod_group_apis_served: Family<ApiLabel, Gauge>,
    cache_age: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// 1 while this replica decides (the leader, or the only replica), else 0.
    pub leader: Gauge,
    /// Times this replica took the leader Lease.
    pub leader_takeovers: Counter,
    /// Gathered gang members muster let through to kube-scheduler (gate removed).
    pub gates_removed: Counter,
    /// `status.nominatedNodeName` writes of gathered members by why (`release`: a gang let
    /// through; `renominate`: written again after kube-scheduler cleared it; `clear`: a seat
    /// gone) and outcome (`ok`, `failed`).
    pub nomination_writes: Family<NominationLabel, Counter>,
    /// Nomination and gate-removal writes of gathered members by kind (`nomination`, `gate`)
    /// not sent, or cancelled in flight, because this replica stopped leading in the term that
    /// planned them (`cluster::gather`).
    pub gather_writes_abandoned: Family<KindLabel, Counter>,
    /// Gather writes not sent in a round because an earlier failure of the same write waits out
    /// its back-off (100 ms doubling to 10 s, per pod), by kind (`release`: a gang's whole
    /// release; `nomination`, `gate`).
    pub gather_writes_backed_off: Family<KindLabel, Counter>,
    /// Time one gather round held the table lock (`cluster::gather`): the rounds' pace follows
    /// it.
    pub gather_round: Histogram,
    /// A gang's release, from its task's start to its last gate removed (its nominations,
    /// then its gates): the part of a gang's wait that is muster's writes.
    pub gang_release: Histogram,
    /// Gang members seen without the marker resource (see deploy/gang-admission-policy.yaml).
    pub gang_markers_missing: Counter,
    /// Writes publishing the marker on nodes (`cluster::node_marker`) by outcome: `published`,
    /// `gone` (the node was deleted), `forbidden` (RBAC), `failed`.
    pub node_marker_writes: Family<OutcomeLabel, Counter>,
    /// Nodes the watch shows without the marker published (0 when publishing is off).
    pub nodes_without_marker: Gauge,
    /// TLS connections accepted on the verbs' listener (handshakes completed), by protocol.
    pub tls_connections: Family<ProtocolLabel, Counter>,
    /// PodGroup status writes by API and outcome (`cluster::status`).
    pub podgroup_status_writes: Family<ApiOutcomeLabel, Counter>,
    started: Instant,
    /// Milliseconds after `started` of the last watch event (0 = none yet).
    last_cache_event_ms: AtomicU64,
}

fn latency_histogram() -> Histogram {
    // 50µs .. ~6.5s: filter is expected in the sub-millisecond buckets, a gang bind in the
    // tens of milliseconds.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 18))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new(Counter::default())
    }
}

impl Metrics {
    /// `events_dropped` is the Event sink's own counter, registered here.
    pub fn new(events_dropped: Counter) -> Self {
        let mut registry = Registry::with_prefix("muster");
        let requests = Family::<VerbOutcomeLabel, Counter>::default();
        let latency = Family::<VerbLabel, Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        let m = Metrics {
            requests,
            latency,
            gangs: Family::default(),
            seats: Gauge::default(),
            gangs_placed: Counter::default(),
            gang_timeouts: Counter::default(),
            quorum_waits: Counter::default(),
            gathered_seats_let_go: Counter::default(),
            bind_failures: Counter::default(),
            bind_retries: Counter::default(),
            preemptions: Family::default(),
            partly_bound_gangs: Family::default(),
            events_dropped,
            watch_errors: Family::default(),
            unreadable_objects: Family::default(),
            cache_nodes: Gauge::default(),
            cache_pods: Gauge::default(),
            pod_groups: Family::default(),
            pod_group_apis_served: Family::default(),
            cache_age: Gauge::default(),
            leader: Gauge::default(),
            leader_takeovers: Counter::default(),
            gates_removed: Counter::default(),
            nomination_writes: Family::default(),
            gather_writes_abandoned: Family::default(),
            gather_writes_backed_off: Family::default(),
            gather_round: latency_histogram(),
            gang_release: latency_histogram(),
            gang_markers_missing: Counter::default(),
            node_marker_writes: Family::default(),
            tls_connections: Family::default(),
            nodes_without_marker: Gauge::default(),
            podgroup_status_writes: Family::default(),
            started: Instant::now(),
            last_cache_event_ms: AtomicU64::new(0),
            registry: Registry::default(),
        };
        registry.register(
            "requests",
            "Extender requests by verb and outcome",
            m.requests.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Time to answer an extender request, by verb",
            m.latency.clone(),
        );
        registry.register("gangs", "Gangs by state", m.gangs.clone());
        registry.register(
            "seats_reserved",
            "Seats currently reserved for gang members below quorum",
            m.seats.clone(),
        );
        registry.register(
            "gangs_placed",
            "Gangs that reached quorum and were bound together",
            m.gangs_placed.clone(),
        );
        registry.register(
            "gang_timeouts",
            "Gangs whose seats were released after the quorum timeout",
            m.gang_timeouts.clone(),
        );
        registry.register(
            "quorum_waits",
            "Bind calls answered 'waiting for quorum'",
            m.quorum_waits.clone(),
        );
        registry.register(
            "gathered_seats_let_go",
            "Seats of gathered gangs planned again because their members' bind calls had ended \
             unbound (kube-scheduler no longer held their room); bound when it sends them again",
            m.gathered_seats_let_go.clone(),
        );
        registry.register(
            "bind_failures",
            "Bindings muster could not create: refused for good, or still failing after retries",
            m.bind_failures.clone(),
        );
        registry.register(
            "bind_retries",
            "Bindings tried again after a transient error (429, 5xx, timeout, conflict)",
            m.bind_retries.clone(),
        );
        registry.register(
            "preemptions",
            "Preemption requests by decision: kept as proposed, trimmed, refused (nothing evicted)",
            m.preemptions.clone(),
        );
        registry.register(
            "partly_bound_gangs",
            "Gangs found partly bound when muster started deciding: finishing (room held for the rest), evicted, reported (disruption mode pod)",
            m.partly_bound_gangs.clone(),
        );
        registry.register(
            "events_dropped",
            "Kubernetes Events dropped because the publisher fell behind",
            m.events_dropped.clone(),
        );
        registry.register(
            "unreadable_objects",
            "Pods, nodes and PodGroups with a field muster cannot read: a pending pod or a PodGroup is skipped, a bound pod fills its node for that resource, a node is kept without it",
            m.unreadable_objects.clone(),
        );
        registry.register(
            "watch_errors",
            "Errors of the pod, node and PodGroup watches, and of PodGroup API discovery",
            m.watch_errors.clone(),
        );
        registry.register("cache_nodes", "Nodes in the cache", m.cache_nodes.clone());
        registry.register("cache_pods", "Pods in the cache", m.cache_pods.clone());
        registry.register(
            "pod_groups",
            "PodGroups in the cache, by API (group/version)",
            m.pod_groups.clone(),
        );
        registry.register(
            "pod_group_api_served",
            "1 for a PodGroup API the cluster serves and muster has listed, else 0",
            m.pod_group_apis_served.clone(),
        );
        registry.register(
            "cache_last_event_age_seconds",
            "Seconds since the last pod or node watch event (-1 before the first)",
            m.cache_age.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica decides (the Lease holder, or the only replica), else 0",
            m.leader.clone(),
        );
        registry.register(
            "leader_takeovers",
            "Times this replica took the leader Lease",
            m.leader_takeovers.clone(),
        );
        registry.register(
            "gates_removed",
            "Gang members whose muster.dev/gather scheduling gate muster removed once their gang could be placed",
            m.gates_removed.clone(),
        );
        registry.register(
            "nomination_writes",
            "status.nominatedNodeName writes of gathered gang members, by why (release, renominate, clear) and outcome",
            m.nomination_writes.clone(),
        );
        registry.register(
            "gather_writes_abandoned",
            "Nomination and gate-removal writes of gathered members (kind nomination, gate) not sent or cancelled in flight because this replica stopped leading",
            m.gather_writes_abandoned.clone(),
        );
        registry.register(
            "gather_writes_backed_off",
            "Gather writes not sent in a round because an earlier failure of the same write waits out its per-pod back-off (kind release, nomination, gate)",
            m.gather_writes_backed_off.clone(),
        );
        registry.register(
            "gather_round_duration_seconds",
            "Time one gather round held the table lock; rounds start at most every 4 times the last one's duration, between 5 and 50 ms apart",
            m.gather_round.clone(),
        );
        registry.register(
            "gang_release_duration_seconds",
            "A gang's release, from its writes' start to its last gate removed (nominations first, then gates)",
            m.gang_release.clone(),
        );
        registry.register(
            "gang_markers_missing",
            "Gang members seen without the muster.dev/gang resource: kube-scheduler schedules them without muster; apply deploy/gang-admission-policy.yaml",
            m.gang_markers_missing.clone(),
        );
        registry.register(
            "node_marker_writes",
            "Writes publishing muster.dev/gang in nodes' capacity and allocatable, so kube-scheduler retries gang members when nodes are added, by outcome: published, gone, forbidden (RBAC), failed",
            m.node_marker_writes.clone(),
        );
        registry.register(
            "tls_connections",
            "TLS connections accepted on the verbs' listener, by the protocol agreed (h2, http/1.1): each is a handshake; over HTTP/2 kube-scheduler needs about one, over HTTP/1.1 one per call beyond its two idle connections",
            m.tls_connections.clone(),
        );
        registry.register(
            "nodes_without_marker",
            "Nodes the watch shows without muster.dev/gang published (0 when --publish-node-marker is off)",
            m.nodes_without_marker.clone(),
        );
        registry.register(
            "podgroup_status_writes",
            "PodGroup status writes by API and outcome: written, unchanged (the object already showed it), conflict (written by someone else meanwhile; tried again), gone, failed",
            m.podgroup_status_writes.clone(),
        );
        // Outcomes of a closed set start at 0, so a dashboard's rate() and an alert on an
        // increase see the series before its first event (and a scrape that comes before it
        // reads 0, not a missing series).
        for outcome in ["kept", "trimmed", "refused"] {
            let _series = m.preemptions.get_or_create(&OutcomeLabel { outcome });
        }
        for outcome in ["published", "gone", "forbidden", "failed"] {
            let _series = m
                .node_marker_writes
                .get_or_create(&OutcomeLabel { outcome });
        }
        for outcome in ["finishing", "evicted", "reported"] {
            let _series = m
                .partly_bound_gangs
                .get_or_create(&OutcomeLabel { outcome });
        }
        Metrics { registry, ..m }
    }

    pub fn count_unreadable(&self, kind: &'static str) {
        self.unreadable_objects
            .get_or_create(&KindLabel { kind })
            .inc();
    }

    pub fn touch_cache(&self) {
        let ms = self.started.elapsed().as_millis() as u64;
        self.last_cache_event_ms.store(ms.max(1), Ordering::Relaxed);
    }

    /// Sets the PodGroup gauges, read off the table before [`render`](Self::render).
    pub fn set_pod_groups(&self, pod_groups: &[PodGroupGauge]) {
        for g in pod_groups {
            let label = ApiLabel { api: g.api };
            self.pod_groups.get_or_create(&label).set(g.known as i64);
            self.pod_group_apis_served
                .get_or_create(&label)
                .set(i64::from(g.served));
        }
    }

    /// Sets the gauges that are read off the table, then renders everything.
    pub fn render(&self, gauges: GangGauges, nodes: usize, pods: usize) -> String {
        for (state, v) in [
            ("waiting", gauges.waiting),
            ("admitted", gauges.admitted),
            ("placed", gauges.placed),
            ("backoff", gauges.backing_off),
        ] {
            self.gangs
                .get_or_create(&StateLabel { state })
                .set(v as i64);
        }
        self.seats.set(gauges.seats as i64);
        self.cache_nodes.set(nodes as i64);
        self.cache_pods.set(pods as i64);
        let last = self.last_cache_event_ms.load(Ordering::Relaxed);
        let age = if last == 0 {
            -1.0
        } else {
            (self.started.elapsed().as_millis() as u64).saturating_sub(last) as f64 / 1000.0
        };
        self.cache_age.set(age);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}
