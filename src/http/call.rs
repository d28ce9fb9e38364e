//! What every extender verb does first: time the call, read the body within the size limit,
//! decode it (a bad request is answered 400/413 and counted), check that this replica is the
//! leader and its caches are synced, and turn the pod and the candidate nodes into the model's
//! form.

use std::convert::Infallible;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tracing::warn;

use super::error::{decode, ApiError, WireName};
use super::AppState;
use crate::cluster::convert::pod_info;
use crate::metrics::{VerbLabel, VerbOutcomeLabel};
use crate::model::PodInfo;
use crate::state::Shared;
use crate::wire::{ExtenderArgs, NodeList};

/// Left of kube-scheduler's `httpTimeout` when a held call answers at the latest.
pub const ANSWER_MARGIN: Duration = Duration::from_secs(1);

pub const NOT_READY: &str =
    "muster is starting: its pod and node caches are not synced yet; retry shortly";

/// Why muster does not decide while a watch lists again after an error.
pub fn relisting_message(kind: &str) -> String {
    format!(
        "muster is listing {kind} again after its watch failed (its view may lack what changed \
         meanwhile); retry shortly"
    )
}

/// The name of a verb, for metrics and logs.
pub trait Verb {
    const NAME: &'static str;
}

pub struct Filter;
impl Verb for Filter {
    const NAME: &'static str = "filter";
}

pub struct Prioritize;
impl Verb for Prioritize {
    const NAME: &'static str = "prioritize";
}

pub struct Bind;
impl Verb for Bind {
    const NAME: &'static str = "bind";
}

pub struct Preempt;
impl Verb for Preempt {
    const NAME: &'static str = "preempt";
}

/// One call of verb `V`. Extracting it never fails: a body that cannot be read is answered
/// when the handler decodes it, so that it is counted like any other bad request.
pub struct Call<V> {
    pub shared: Arc<Shared>,
    pub bind_wait: Duration,
    started: Instant,
    body: Result<Bytes, ApiError>,
    verb: PhantomData<fn() -> V>,
}

impl<V: Verb> FromRequest<AppState> for Call<V> {
    type Rejection = Infallible;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Infallible> {
        let limit = state.max_body_bytes;
        let body = axum::body::to_bytes(req.into_body(), limit)
            .await
            .map_err(|e| {
                let is_limit = std::error::Error::source(&e)
                    .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
                if is_limit {
                    ApiError::TooLarge { limit }
                } else {
                    ApiError::Body(e.to_string())
                }
            });
        Ok(Call {
            shared: state.shared.clone(),
            bind_wait: state.bind_wait,
            // Handler time: from the moment the body is in.
            started: Instant::now(),
            body,
            verb: PhantomData,
        })
    }
}

/// Why a verb answers without asking the model.
#[derive(Debug)]
pub enum Refusal {
    /// Leader election is on and this replica is not the leader; the message names the leader.
    NotLeader(String),
    NotReady,
    /// The pod or node watch is listing again after an error (`Readiness::relisting`).
    Relisting(&'static str),
    /// The pod cannot be read (a bad quantity, say); the message names what.
    BadPod(String),
}

impl Refusal {
    pub fn message(self) -> String {
        match self {
            Refusal::NotLeader(message) => message,
            Refusal::NotReady => NOT_READY.to_string(),
            Refusal::Relisting(kind) => relisting_message(kind),
            Refusal::BadPod(message) => message,
        }
    }
}

/// The candidate nodes of a filter or prioritize call, in whichever form was sent.
pub enum Nodes<'a> {
    /// `nodeCacheCapable: true`: names only.
    Names(Vec<&'a str>),
    /// `nodeCacheCapable: false`: whole nodes, kept as sent, and their names.
    List {
        list: NodeList<'a>,
        names: Vec<String>,
    },
    /// Neither was sent.
    Missing,
}

impl Nodes<'_> {
    pub fn names(&self) -> Vec<&str> {
        match self {
            Nodes::Names(names) => names.clone(),
            Nodes::List { names, .. } => names.iter().map(String::as_str).collect(),
            Nodes::Missing => Vec::new(),
        }
    }
}

impl<V: Verb> Call<V> {
    /// Counts the call under `outcome` and observes its latency.
    pub fn record(&self, outcome: &'static str) {
        let metrics = &self.shared.metrics;
        metrics
            .requests
            .get_or_create(&VerbOutcomeLabel {
                verb: V::NAME,
                outcome,
            })
            .inc();
        metrics
            .latency
            .get_or_create(&VerbLabel { verb: V::NAME })
            .observe(self.started.elapsed().as_secs_f64());
    }

    /// When the call's body was in: what a verb's answer budget counts from.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The latest moment to answer so that kube-scheduler still hears it: its client gives up
    /// `httpTimeout` after sending, and [`ANSWER_MARGIN`] of that is left for the answer's
    /// way back and for a loaded machine.
    pub fn answer_by(&self) -> tokio::time::Instant {
        let budget = self.shared.extender_timeout.saturating_sub(ANSWER_MARGIN);
        tokio::time::Instant::from_std(self.started + budget)
    }

    /// The body, decoded; a bad one is answered here (and counted as `bad_request`).
    pub fn decode<'a, T: Deserialize<'a> + WireName>(&'a self) -> Result<T, Box<Response>> {
        let decoded = match &self.body {
            Ok(bytes) => decode(bytes),
            Err(e) => Err(e.clone()),
        };
        decoded.map_err(|e| {
            warn!(verb = V::NAME, error = %e, "bad extender request");
            self.record("bad_request");
            Box::new(e.into_response())
        })
    }

    /// Whether this replica may decide now: it leads (or runs alone) and its caches are
    /// synced. A standby never decides, whatever its caches hold.
    pub fn admit(&self) -> Result<(), Refusal> {
        if let Some(message) = self.shared.leadership.refusal(Instant::now()) {
            return Err(Refusal::NotLeader(message));
        }
        if !self.shared.readiness.is_ready() {
            return Err(Refusal::NotReady);
        }
        if let Some(kind) = self.shared.readiness.relisting() {
            return Err(Refusal::Relisting(kind));
        }
        // A gang left partly bound before this replica started deciding comes first.
        self.shared.start_deciding(Instant::now());
        Ok(())
    }

    /// The pod and the candidate nodes of a filter or prioritize call, once the caches are
    /// synced.
    pub fn pod_and_nodes<'a>(
        &self,
        args: ExtenderArgs<'a>,
    ) -> Result<(PodInfo, Nodes<'a>), Refusal> {
        self.admit()?;
        let pod = pod_info(&args.pod).map_err(|e| Refusal::BadPod(e.to_string()))?;
        let nodes = match (args.node_names, args.nodes) {
            (Some(names), _) => Nodes::Names(names),
            (None, Some(list)) => {
                let names = list.names();
                Nodes::List { list, names }
            }
            (None, None) => Nodes::Missing,
        };
        Ok((pod, nodes))
    }
}
