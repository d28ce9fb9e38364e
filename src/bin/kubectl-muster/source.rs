//! Where `kubectl muster` reads from: muster's `/gangs` through the API server's service proxy
//! (the user's kubeconfig, no port-forward; RBAC `services/proxy` get on muster's Service,
//! deploy/kubectl-muster-rbac.yaml), or `--muster-url` directly; and the cluster itself (pods,
//! Events, PodGroups) for what kube-scheduler says and for the fallback when muster is
//! unreachable.

use anyhow::{bail, Context, Result};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DynamicObject, ListParams};
use kube::Client;
use muster::cluster::status::api_resource;
use muster::model::PodGroupApi;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::render::{Gang, Gangs, PodFacts, PodGroupFacts};

/// How to reach muster's read-only `/gangs`.
pub struct Muster {
    pub namespace: String,
    pub service: String,
    /// The Service's port name or number of the ops listener (`--ops-gangs`).
    pub port: String,
    /// `http://host:port` to ask instead of the service proxy.
    pub url: Option<String>,
}

impl Muster {
    /// The service-proxy path of `/gangs`.
    pub fn proxy_path(&self) -> String {
        format!(
            "/api/v1/namespaces/{}/services/http:{}:{}/proxy/gangs",
            self.namespace, self.service, self.port
        )
    }

    /// Every gang muster knows, or why muster could not be asked.
    pub async fn gangs(&self, client: &Client) -> std::result::Result<Vec<Gang>, String> {
        let body = match &self.url {
            Some(url) => http_get(url, "/gangs").await?,
            None => {
                let req = axum::http::Request::get(self.proxy_path())
                    .body(Vec::new())
                    .map_err(|e| e.to_string())?;
                client.request_text(req).await.map_err(|e| match e {
                    kube::Error::Api(s) => format!(
                        "the API server's proxy to service {}/{} port {} answered {} {}",
                        self.namespace, self.service, self.port, s.code, s.message
                    ),
                    e => format!("the API server's proxy: {e}"),
                })?
            }
        };
        serde_json::from_str::<Gangs>(&body)
            .map(|g| g.gangs)
            .map_err(|e| format!("muster's /gangs could not be read: {e}"))
    }
}

/// A plain-HTTP GET of `path` from `base` (`http://host:port`): `--muster-url` for a muster
/// reached directly (a local process, a port-forward). HTTPS is not spoken here: the verbs
/// listener, which requires a client certificate, is not for users.
async fn http_get(base: &str, path: &str) -> std::result::Result<String, String> {
    let hostport = base
        .strip_prefix("http://")
        .ok_or_else(|| format!("--muster-url {base}: only http:// URLs (muster's ops listener)"))?
        .trim_end_matches('/');
    let fut = async {
        let mut s = tokio::net::TcpStream::connect(hostport)
            .await
            .map_err(|e| format!("{base}: {e}"))?;
        let req =
            format!("GET {path} HTTP/1.0\r\nHost: {hostport}\r\nAccept: application/json\r\n\r\n");
        s.write_all(req.as_bytes())
            .await
            .map_err(|e| format!("{base}: {e}"))?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf)
            .await
            .map_err(|e| format!("{base}: {e}"))?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let (head, body) = text
            .split_once("\r\n\r\n")
            .ok_or_else(|| format!("{base}{path}: not an HTTP answer"))?;
        let status = head.split_whitespace().nth(1).unwrap_or("");
        if status != "200" {
            return Err(format!("{base}{path} answered {status}: {}", body.trim()));
        }
        Ok(body.to_string())
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), fut)
        .await
        .map_err(|_| format!("{base}{path}: no answer within 10s"))?
}

/// The pod, its `PodScheduled` condition, gates, and latest Events; a precise error if it does
/// not exist.
pub async fn pod_facts(client: &Client, ns: &str, name: &str) -> Result<(Pod, PodFacts)> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = match pods.get_opt(name).await {
        Ok(Some(p)) => p,
        Ok(None) => bail!("no such pod: {ns}/{name}"),
        Err(e) => return Err(e).with_context(|| format!("cannot read pod {ns}/{name}")),
    };
    let status = pod.status.clone().unwrap_or_default();
    let scheduled = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled")
        .map(|c| {
            (
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        });
    let spec = pod.spec.clone().unwrap_or_default();
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let mut evs = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    evs.sort_by_key(|e| {
        e.last_timestamp
            .clone()
            .map(|t| t.0)
            .or(e.event_time.clone().map(|t| t.0))
    });
    let start = evs.len().saturating_sub(5);
    let facts = PodFacts {
        namespace: ns.to_string(),
        name: name.to_string(),
        node: spec.node_name.clone().filter(|n| !n.is_empty()),
        phase: status.phase.clone().unwrap_or_else(|| "Pending".into()),
        scheduled,
        gates: spec
            .scheduling_gates
            .iter()
            .flatten()
            .map(|g| g.name.clone())
            .collect(),
        events: evs[start..]
            .iter()
            .map(|e| {
                (
                    e.type_.clone().unwrap_or_default(),
                    e.reason.clone().unwrap_or_default(),
                    e.message.clone().unwrap_or_default(),
                )
            })
            .collect(),
    };
    Ok((pod, facts))
}

/// The PodGroup a pod names, by each project's key: Volcano's annotation
/// (`scheduling.k8s.io/group-name`, or `scheduling.volcano.sh/group-name`), scheduler-plugins'
/// label, Kubernetes' `spec.schedulingGroup.podGroupName`.
pub fn named_podgroup(pod: &Pod) -> Vec<(PodGroupApi, String)> {
    let meta = &pod.metadata;
    let mut out = Vec::new();
    for key in [
        "scheduling.k8s.io/group-name",
        "scheduling.volcano.sh/group-name",
    ] {
        if let Some(v) = meta.annotations.as_ref().and_then(|a| a.get(key)) {
            out.push((PodGroupApi::Volcano, v.clone()));
        }
    }
    if let Some(v) = meta
        .labels
        .as_ref()
        .and_then(|l| l.get("scheduling.x-k8s.io/pod-group"))
    {
        out.push((PodGroupApi::SchedulerPlugins, v.clone()));
    }
    let spec = serde_json::to_value(&pod.spec).unwrap_or(Value::Null);
    if let Some(v) = spec["schedulingGroup"]["podGroupName"].as_str() {
        out.push((PodGroupApi::Kubernetes, v.to_string()));
    }
    out
}

/// Whether a pod carries any gang key muster reads (docs/design.md, "Gangs").
pub fn has_gang_key(pod: &Pod) -> bool {
    let meta = &pod.metadata;
    let ann = |k: &str| meta.annotations.as_ref().is_some_and(|a| a.contains_key(k));
    let lab = |k: &str| meta.labels.as_ref().is_some_and(|l| l.contains_key(k));
    ann("muster.dev/group")
        || lab("muster.dev/group")
        || lab("kueue.x-k8s.io/pod-group-name")
        || !named_podgroup(pod).is_empty()
}

fn podgroup_facts(api: PodGroupApi, o: &DynamicObject) -> PodGroupFacts {
    let status = o.data.get("status").cloned().unwrap_or(Value::Null);
    let spec = o.data.get("spec").cloned().unwrap_or(Value::Null);
    let min_member = spec["minMember"]
        .as_i64()
        .or_else(|| spec["schedulingPolicy"]["gang"]["minCount"].as_i64());
    PodGroupFacts {
        api_version: api.api_version().to_string(),
        namespace: o.metadata.namespace.clone().unwrap_or_default(),
        name: o.metadata.name.clone().unwrap_or_default(),
        min_member,
        phase: status["phase"].as_str().map(str::to_string),
        conditions: status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let s = |f: &str| c[f].as_str().unwrap_or_default().to_string();
                (s("type"), s("status"), s("reason"), s("message"))
            })
            .collect(),
    }
}

/// One PodGroup, if its API is served and it exists.
pub async fn podgroup(
    client: &Client,
    api: PodGroupApi,
    ns: &str,
    name: &str,
) -> Option<PodGroupFacts> {
    let pgs: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &api_resource(api));
    let o = pgs.get_opt(name).await.ok().flatten()?;
    Some(podgroup_facts(api, &o))
}

/// The PodGroups of every API the cluster serves, in `ns` (all namespaces: `None`).
pub async fn podgroups(client: &Client, ns: Option<&str>) -> Vec<PodGroupFacts> {
    let mut out = Vec::new();
    for api in PodGroupApi::ALL {
        let ar = api_resource(api);
        let pgs: Api<DynamicObject> = match ns {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        // An API the cluster does not serve answers 404: it has no PodGroups.
        if let Ok(list) = pgs.list(&ListParams::default()).await {
            out.extend(list.items.iter().map(|o| podgroup_facts(api, o)));
        }
    }
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    out
}
