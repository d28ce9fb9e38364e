//! PodGroup APIs for end-to-end tests: the CRDs of Volcano and scheduler-plugins from
//! `tests/crds/`, the kube-apiserver flags that serve Kubernetes' own, and PodGroup objects as
//! each project's controller writes them.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};

use crate::paths::repo_root;
use crate::wait::{wait_for, Progress};

/// Volcano's PodGroup CRD, relative to the repository.
pub const VOLCANO_CRD: &str = "tests/crds/volcano-podgroups.yaml";
/// scheduler-plugins' PodGroup CRD, relative to the repository.
pub const SCHEDULER_PLUGINS_CRD: &str = "tests/crds/scheduler-plugins-podgroups.yaml";
/// kube-apiserver flags that serve `scheduling.k8s.io/v1beta1` PodGroups and keep pods'
/// `spec.schedulingGroup` (tests/cluster/README.md, "Native gang scheduling in 1.37"). The
/// kube-scheduler keeps the gate off, so its own GangScheduling plugin does not run: muster
/// alone gates those gangs.
pub const KUBERNETES_POD_GROUP_APISERVER_ARGS: [&str; 2] = [
    "--feature-gates=GenericWorkload=true",
    "--runtime-config=scheduling.k8s.io/v1beta1=true",
];

/// One of the three PodGroup APIs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodGroupApi {
    /// `scheduling.volcano.sh/v1beta1`
    Volcano,
    /// `scheduling.x-k8s.io/v1alpha1`
    SchedulerPlugins,
    /// `scheduling.k8s.io/v1beta1`
    Kubernetes,
}

impl PodGroupApi {
    pub fn group(self) -> &'static str {
        match self {
            PodGroupApi::Volcano => "scheduling.volcano.sh",
            PodGroupApi::SchedulerPlugins => "scheduling.x-k8s.io",
            PodGroupApi::Kubernetes => "scheduling.k8s.io",
        }
    }

    pub fn version(self) -> &'static str {
        match self {
            PodGroupApi::Volcano => "v1beta1",
            PodGroupApi::SchedulerPlugins => "v1alpha1",
            PodGroupApi::Kubernetes => "v1beta1",
        }
    }

    /// `group/version`, as in `apiVersion` and in muster's metrics' `api` label.
    pub fn api_version(self) -> String {
        format!("{}/{}", self.group(), self.version())
    }

    fn resource(self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(self.group(), self.version(), "PodGroup"),
            "podgroups",
        )
    }
}

/// Volcano's PodGroup as its job controller writes it: `minMember`, `minTaskMember` per task,
/// the default queue.
pub fn volcano(ns: &str, name: &str, min_member: u32, min_task_member: &[(&str, u32)]) -> Value {
    let tasks: serde_json::Map<String, Value> = min_task_member
        .iter()
        .map(|(t, n)| (t.to_string(), json!(n)))
        .collect();
    json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": min_member, "minTaskMember": tasks, "queue": "default"},
    })
}

/// scheduler-plugins' PodGroup as the Kubeflow training operator, JobSet or LWS write it.
pub fn scheduler_plugins(ns: &str, name: &str, min_member: u32, timeout_seconds: u32) -> Value {
    json!({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": min_member, "scheduleTimeoutSeconds": timeout_seconds},
    })
}

/// A Kubernetes PodGroup with the gang policy.
pub fn kubernetes(ns: &str, name: &str, min_count: u32) -> Value {
    json!({
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    })
}

/// Creates a PodGroup object of `api` (`object`: one of the builders above).
pub async fn create(client: &Client, api: PodGroupApi, object: Value) -> Result<()> {
    let obj: DynamicObject = serde_json::from_value(object)?;
    let ns = obj.metadata.namespace.clone().unwrap_or_default();
    let name = obj.metadata.name.clone().unwrap_or_default();
    Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &api.resource())
        .create(&PostParams::default(), &obj)
        .await
        .with_context(|| format!("creating {} PodGroup {ns}/{name}", api.api_version()))?;
    Ok(())
}

/// Deletes a PodGroup object. (A Kubernetes PodGroup keeps its
/// `scheduling.k8s.io/podgroup-protection` finalizer here, where no controller manager runs.)
pub async fn delete(client: &Client, api: PodGroupApi, ns: &str, name: &str) -> Result<()> {
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, &api.resource())
        .delete(name, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting {} PodGroup {ns}/{name}", api.api_version()))?;
    Ok(())
}

/// Creates the CRD in `file` (relative to the repository) and waits until it is established and
/// discovery lists its resource (what muster asks). Returns the CRD's name.
pub async fn install_crd(client: &Client, file: &str) -> Result<String> {
    let path = repo_root().join(file);
    let crd = read_crd(&path)?;
    let name = crd.metadata.name.clone().context("the CRD has no name")?;
    let group = crd.spec.group.clone();
    let version = crd
        .spec
        .versions
        .first()
        .map(|v| v.name.clone())
        .context("the CRD has no version")?;
    let plural = crd.spec.names.plural.clone();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    match api.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e).with_context(|| format!("creating CRD {name} from {file}")),
    }
    let gv = format!("{group}/{version}");
    wait_for(
        &format!("CRD {name} to be established and {gv} to list {plural}"),
        Duration::from_secs(30),
        || async {
            let established = api.get(&name).await?.status.is_some_and(|s| {
                s.conditions
                    .iter()
                    .flatten()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
            if !established {
                return Ok(Progress::NotYet("not established".into()));
            }
            Ok(match client.list_api_group_resources(&gv).await {
                Ok(list) if list.resources.iter().any(|r| r.name == plural) => Progress::Done(()),
                Ok(list) => Progress::NotYet(format!(
                    "discovery lists {:?}",
                    list.resources.iter().map(|r| &r.name).collect::<Vec<_>>()
                )),
                Err(e) => Progress::NotYet(format!("discovery: {e}")),
            })
        },
    )
    .await?;
    Ok(name)
}

/// Deletes a CRD (and with it every object of its kind).
pub async fn delete_crd(client: &Client, name: &str) -> Result<()> {
    Api::<CustomResourceDefinition>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting CRD {name}"))?;
    Ok(())
}

fn read_crd(path: &Path) -> Result<CustomResourceDefinition> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
        .with_context(|| format!("parsing {}", path.display()))?;
    match docs.as_slice() {
        [one] => serde_json::from_value(one.clone())
            .with_context(|| format!("{} is not a CustomResourceDefinition", path.display())),
        _ => bail!("{} should hold exactly one CRD", path.display()),
    }
}

/// The second scheduler's name in `scheduler-config/muster-second-scheduler.yaml`.
const SECOND_SCHEDULER: &str = "muster-scheduler";

/// A cluster for a Volcano job that waits: the second scheduler calling muster, Volcano's CRD,
/// and muster's enqueueing off, since the tests create the pods right after their PodGroup (not
/// Volcano's job controller): a status round between the two could enqueue the member-less
/// PodGroup, never back to Pending, while the tests read phase Pending.
pub fn waiting_volcano_job_cluster(muster: &str) -> crate::ClusterOptions {
    crate::ClusterOptions::new(muster)
        .scheduler_config("muster-second-scheduler.yaml")
        .crd(VOLCANO_CRD)
        .muster_args(["--enqueue-volcano-podgroups=false"])
}

/// The Volcano job `ns/job` (minMember 2) of two 100m workers on one node with room for one
/// (`gang ns/job: 1 of 2 members fit`); returns the members' names.
pub async fn create_waiting_volcano_job(c: &crate::Cluster, ns: &str) -> Result<Vec<String>> {
    c.namespace(ns).await?;
    c.add_node("node-1", crate::NodeShape::cpu("150m")).await?;
    create(
        &c.client(),
        PodGroupApi::Volcano,
        volcano(ns, "job", 2, &[]),
    )
    .await?;
    let members = crate::pod_names(&["job-worker-0", "job-worker-1"]);
    for m in &members {
        c.create(
            crate::PodBuilder::new(ns, m)
                .cpu("100m")
                .annotation("scheduling.k8s.io/group-name", "job")
                .annotation("volcano.sh/task-spec", "worker")
                .scheduler_name(SECOND_SCHEDULER),
        )
        .await?;
    }
    Ok(members)
}
