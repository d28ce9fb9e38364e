//! The leader label: the replica that decides marks its own pod `muster.dev/leader: "true"`,
//! and the Service selects on it, so kube-scheduler's calls reach the leader while both
//! replicas are Ready (a drain and a rolling update need the standby Ready too).
//!
//! The label is routing, never authority: every verb call still asks [`Leadership`] whether
//! this replica decides at that instant, and a replica that does not answers with a refusal
//! kube-scheduler retries (and closes the connection, so the retry is routed afresh). A
//! label that lags the Lease — the leader lost it, or died with the label on — costs retries,
//! never a wrong decision (fail-safe).
//!
//! What it writes, and when:
//! - on taking over: the label on its own pod, then the label removed from every other pod in
//!   its namespace that still carries it (a leader that died, or lapsed cut off from the API
//!   server, could not remove its own);
//! - on stepping down, on a lapse of its renew deadline, and at start (a container restarted in
//!   a pod that still carries the label of its previous life): the label removed from its own
//!   pod.
//!
//! RBAC: `patch` and `list` of pods, which muster holds already.
//!
//! [`Leadership`]: crate::state::leadership::Leadership

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{json, Value};
use tracing::{info, warn};

use crate::state::Shared;

/// The label the leader carries and the Service selects on.
pub const LABEL: &str = "muster.dev/leader";

/// How often the label is compared with the role when nothing was announced: catches a leader
/// whose renew deadline passed unrenewed (no announcement: the deadline is checked per call).
const RECHECK: Duration = Duration::from_millis(500);
/// How soon a write that failed is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// This replica's own pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnPod {
    pub namespace: String,
    pub name: String,
}

/// The merge patch that sets (`true`) or removes (`false`) the label; `resource_version`, when
/// given, makes the API server refuse it (409) if the pod changed since it was read.
pub fn patch(leading: bool, resource_version: Option<&str>) -> Value {
    let mut metadata =
        json!({ "labels": { LABEL: if leading { json!("true") } else { Value::Null } } });
    if let Some(rv) = resource_version {
        metadata["resourceVersion"] = json!(rv);
    }
    json!({ "metadata": metadata })
}

/// What the label should be now, given what was last written and whether this replica leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Set (`true`) or remove (`false`) the label on the own pod.
    Own(bool),
    /// Remove the label from other pods (once per term).
    ClearOthers,
    /// Nothing to write.
    Idle,
}

/// The label's state as this replica last wrote it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// `None` until the first write (at start the pod may carry a label of a previous life).
    pub own: Option<bool>,
    /// Whether the other pods' labels were cleared in this term.
    pub others_cleared: bool,
}

impl Written {
    /// The next write while this replica does (`leading`) or does not lead. Its own label comes
    /// first: a new leader is routed to before the stale label goes, so there is no moment
    /// without a labelled pod.
    pub fn next(&self, leading: bool) -> Step {
        if self.own != Some(leading) {
            Step::Own(leading)
        } else if leading && !self.others_cleared {
            Step::ClearOthers
        } else {
            Step::Idle
        }
    }

    /// The own label now reads `leading`; a new term (or its end) clears others again.
    pub fn own_written(&mut self, leading: bool) {
        if self.own != Some(leading) {
            self.others_cleared = false;
        }
        self.own = Some(leading);
    }
}

/// Keeps the own pod's label equal to this replica's role until the task is dropped.
pub async fn run(client: Client, pod: OwnPod, shared: Arc<Shared>) {
    let api: Api<Pod> = Api::namespaced(client, &pod.namespace);
    let mut changes = shared.leadership.subscribe();
    let mut written = Written::default();
    loop {
        let leading = shared.leadership.is_leading(Instant::now());
        let wait = match written.next(leading) {
            Step::Own(to) => match set_own(&api, &pod.name, to).await {
                Ok(()) => {
                    written.own_written(to);
                    if to {
                        info!(pod = %pod.name, label = LABEL, "labelled this replica's pod as the leader's: the Service routes to it");
                    } else {
                        info!(pod = %pod.name, label = LABEL, "removed the leader label from this replica's pod");
                    }
                    Duration::ZERO
                }
                Err(e) => {
                    warn!(pod = %pod.name, label = LABEL, error = %e, "cannot write the leader label on this replica's pod; trying again");
                    RETRY
                }
            },
            Step::ClearOthers => match clear_others(&api, &pod.name, &shared).await {
                Ok(()) => {
                    written.others_cleared = true;
                    Duration::ZERO
                }
                Err(e) => {
                    warn!(namespace = %pod.namespace, label = LABEL, error = %e, "cannot remove a stale leader label; trying again");
                    RETRY
                }
            },
            Step::Idle => RECHECK,
        };
        if !wait.is_zero() {
            let _ = tokio::time::timeout(wait, changes.changed()).await;
        }
    }
}

/// Removes the label from the own pod: at shutdown, once this replica stopped deciding. Best
/// effort within `within`: the next leader removes a label left behind.
pub async fn unlabel(client: Client, pod: &OwnPod, within: Duration) {
    let api: Api<Pod> = Api::namespaced(client, &pod.namespace);
    match tokio::time::timeout(within, set_own(&api, &pod.name, false)).await {
        Ok(Ok(())) => {
            info!(pod = %pod.name, label = LABEL, "removed the leader label from this replica's pod")
        }
        Ok(Err(e)) => {
            warn!(pod = %pod.name, label = LABEL, error = %e, "could not remove the leader label; the next leader does")
        }
        Err(_) => {
            warn!(pod = %pod.name, label = LABEL, "removing the leader label timed out; the next leader does")
        }
    }
}

async fn set_own(api: &Api<Pod>, name: &str, leading: bool) -> Result<(), kube::Error> {
    match api
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&patch(leading, None)),
        )
        .await
    {
        Ok(_) => Ok(()),
        // Without a pod there is no label to route by, nor one to remove.
        Err(kube::Error::Api(s)) if s.code == 404 && !leading => Ok(()),
        Err(e) => Err(e),
    }
}

/// Removes the label from every other pod of the namespace that carries it, each patch
/// conditional on the version read and made only while this replica still leads.
async fn clear_others(api: &Api<Pod>, own: &str, shared: &Shared) -> Result<(), kube::Error> {
    let labelled = api
        .list_metadata(&ListParams::default().labels(&format!("{LABEL}=true")))
        .await?;
    for other in labelled.items {
        let Some(name) = other.metadata.name.as_deref().filter(|n| *n != own) else {
            continue;
        };
        if !shared.leadership.is_leading(Instant::now()) {
            return Ok(());
        }
        let rv = other.metadata.resource_version.as_deref();
        match api
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(&patch(false, rv)),
            )
            .await
        {
            Ok(_) => {
                info!(pod = %name, label = LABEL, "removed a stale leader label from another replica's pod")
            }
            // Gone: nothing routes to it. Changed since the list (409): tried again.
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patch_sets_or_removes_only_the_label() {
        assert_eq!(
            patch(true, None),
            json!({"metadata": {"labels": {"muster.dev/leader": "true"}}})
        );
        assert_eq!(
            patch(false, Some("42")),
            json!({"metadata": {"labels": {"muster.dev/leader": null}, "resourceVersion": "42"}})
        );
    }

    #[test]
    fn a_start_removes_a_label_of_a_previous_life() {
        let w = Written::default();
        assert_eq!(w.next(false), Step::Own(false));
    }

    #[test]
    fn a_new_leader_labels_itself_before_clearing_others_once_per_term() {
        let mut w = Written::default();
        w.own_written(false);
        assert_eq!(w.next(false), Step::Idle);
        assert_eq!(w.next(true), Step::Own(true));
        w.own_written(true);
        assert_eq!(w.next(true), Step::ClearOthers);
        w.others_cleared = true;
        assert_eq!(w.next(true), Step::Idle);
        // Stepping down removes its own label; the next term clears others again.
        assert_eq!(w.next(false), Step::Own(false));
        w.own_written(false);
        w.own_written(true);
        assert_eq!(w.next(true), Step::ClearOthers);
    }
}
