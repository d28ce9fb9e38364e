//! Publishes the model's notices as Kubernetes Events on the member pods.
//!
//! Publishing happens on its own task, fed by a bounded channel: the extender verbs never wait
//! for the API server. If the channel is full (an API server too slow to take Events), notices
//! are dropped and counted rather than slowing scheduling down.

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::model::{Notice, NoticeKind, PodRef};

/// Annotation muster sets on a pod it refused for held room once that room is released, or
/// for a node not in its cache yet once that node arrives: an update of an unscheduled pod
/// makes kube-scheduler re-queue it (neither is a cluster event). Its value is the time of the
/// annotation.
pub const RETRY_ANNOTATION: &str = "muster.dev/retry";

/// Runs until the channel closes.
pub async fn publish_events(client: Client, instance: String, mut rx: mpsc::Receiver<Notice>) {
    while let Some(n) = rx.recv().await {
        let now = k8s_openapi::jiff::Timestamp::now();
        if n.kind == NoticeKind::Retry {
            ask_to_retry(&client, &n.pod, now).await;
            continue;
        }
        let api: Api<Event> = Api::namespaced(client.clone(), &n.pod.namespace);
        let event = Event {
            metadata: ObjectMeta {
                // "<pod>.<hex nanoseconds>", as kube-scheduler names its Events.
                name: Some(format!(
                    "{}.{:x}",
                    truncate(&n.pod.name, 200),
                    now.as_nanosecond()
                )),
                namespace: Some(n.pod.namespace.to_string()),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            action: Some("Scheduling".into()),
            reason: Some(n.kind.reason().into()),
            note: Some(truncate(&n.message, 1024)),
            type_: Some(
                if n.kind.is_warning() {
                    "Warning"
                } else {
                    "Normal"
                }
                .into(),
            ),
            reporting_controller: Some("muster.dev/gang-scheduler".into()),
            reporting_instance: Some(instance.clone()),
            regarding: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                namespace: Some(n.pod.namespace.to_string()),
                name: Some(n.pod.name.to_string()),
                uid: Some(n.pod.uid.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        };
        match api.create(&PostParams::default(), &event).await {
            Ok(_) => debug!(pod = %n.pod, reason = n.kind.reason(), "event published"),
            Err(e) => warn!(pod = %n.pod, error = %e, "could not publish event"),
        }
    }
}

/// Annotates the pod so kube-scheduler tries it again. A pod gone or already bound meanwhile is
/// no error worth more than a debug line.
async fn ask_to_retry(client: &Client, pod: &PodRef, now: k8s_openapi::jiff::Timestamp) {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let patch = serde_json::json!({
        "metadata": {
            "uid": pod.uid.to_string(),
            "annotations": { RETRY_ANNOTATION: now.to_string() },
        }
    });
    match api
        .patch(&pod.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => debug!(pod = %pod, "asked kube-scheduler to retry the pod"),
        Err(e) => debug!(pod = %pod, error = %e, "could not annotate the pod for a retry"),
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}
