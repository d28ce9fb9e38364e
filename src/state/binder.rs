//! The binder as the shared state holds it: something that binds a pod to a node, and why a
//! binding was not created. The one that talks to the API server, with its retries, is
//! `cluster::binder`; tests and benches bind with their own.

use std::fmt;
use std::time::Duration;

use futures::future::BoxFuture;

use crate::model::{NodeName, PodRef};

/// Why a binding was not created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BindError {
    /// Worth another try: a server error (5xx), a timeout or a lost connection, a conflict
    /// other than "already bound", forbidden (403: an API server just restarted may refuse
    /// for a moment what RBAC allows).
    Transient(String),
    /// Throttled (429): worth another try, not before `retry_after` (the API server's
    /// `Retry-After`) when it said.
    Throttled {
        message: String,
        retry_after: Option<Duration>,
    },
    /// Another try cannot help: the pod is gone or bound elsewhere, or the request is refused.
    Permanent(String),
}

impl fmt::Display for BindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BindError::Transient(m) | BindError::Permanent(m) => f.write_str(m),
            BindError::Throttled { message, .. } => f.write_str(message),
        }
    }
}

/// Something that can bind a pod to a node. The real one talks to the API server; tests use
/// one that records calls.
pub trait Binder: Send + Sync + 'static {
    fn bind(&self, pod: PodRef, node: NodeName) -> BoxFuture<'static, Result<(), BindError>>;
}
