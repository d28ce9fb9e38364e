//! Creates `pods/binding` objects: muster is kube-scheduler's bind extender, so every binding
//! of every pod it is asked about is made here.

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::Client;

use crate::model::{NodeName, PodRef};

/// Something that can bind a pod to a node. The real one talks to the API server; tests use
/// one that records calls.
pub trait Binder: Send + Sync + 'static {
    fn bind(&self, pod: PodRef, node: NodeName) -> BoxFuture<'static, Result<(), String>>;
}

pub struct KubeBinder {
    client: Client,
}

impl KubeBinder {
    pub fn new(client: Client) -> Self {
        KubeBinder { client }
    }
}

impl Binder for KubeBinder {
    fn bind(&self, pod: PodRef, node: NodeName) -> BoxFuture<'static, Result<(), String>> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        Box::pin(async move {
            let binding = Binding {
                metadata: ObjectMeta {
                    name: Some(pod.name.to_string()),
                    namespace: Some(pod.namespace.to_string()),
                    // The API server refuses the binding if the pod was replaced by another
                    // with the same name since muster decided.
                    uid: Some(pod.uid.to_string()),
                    ..Default::default()
                },
                target: ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Node".into()),
                    name: Some(node.to_string()),
                    ..Default::default()
                },
            };
            let result: Result<serde_json::Value, kube::Error> = api
                .create_subresource("binding", &pod.name, &PostParams::default(), &binding)
                .await;
            match result {
                Ok(_) => Ok(()),
                // Bound to the same node by an earlier attempt (e.g. before a restart): done.
                Err(kube::Error::Api(s))
                    if s.code == 409
                        && s.message
                            .contains(&format!("already assigned to node \"{node}\"")) =>
                {
                    Ok(())
                }
                Err(e) => Err(e.to_string()),
            }
        })
    }
}
