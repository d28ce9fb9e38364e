//! The admission policy that marks gang members (`deploy/gang-admission-policy.yaml`), applied
//! to a local cluster from the very file users apply.

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use serde_json::{json, Value};

use crate::paths::repo_root;
use crate::wait::{wait_for, Progress};

/// The policy file, relative to the repository.
pub const POLICY_FILE: &str = "deploy/gang-admission-policy.yaml";
/// The second-scheduler install's policy (same names; marks only `muster-scheduler` pods).
pub const SECOND_SCHEDULER_POLICY_FILE: &str = "deploy/second-scheduler/gang-admission-policy.yaml";
/// The second scheduler's `schedulerName` (scheduler-config/muster-second-scheduler.yaml).
pub const SECOND_SCHEDULER_NAME: &str = "muster-scheduler";
/// The gate the policy adds and muster removes.
pub const GATHER_GATE: &str = "muster.dev/gather";
/// The marker resource the policy adds.
pub const GANG_MARKER: &str = "muster.dev/gang";
/// The second-scheduler install's policy that keeps `muster-scheduler` pods on the gang nodes.
pub const GANG_NODES_POLICY_FILE: &str = "deploy/second-scheduler/gang-nodes-policy.yaml";
/// The taint (effect NoSchedule) and label key of the gang nodes in that file.
pub const GANG_NODES_KEY: &str = "muster.dev/gang-nodes";

/// Creates the objects of [`GANG_NODES_POLICY_FILE`] and waits until the API server applies the
/// policy: a dry-run pod of `muster-scheduler` in namespace `ns` (which must exist) comes back
/// with the toleration of [`GANG_NODES_KEY`] and its node selector.
pub async fn apply_gang_nodes_policy(client: &Client, ns: &str) -> Result<()> {
    create_objects_of(client, GANG_NODES_POLICY_FILE).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let probe: Pod = serde_json::from_value(json!({
        "metadata": {"name": "gang-nodes-probe"},
        "spec": {"schedulerName": "muster-scheduler",
                 "containers": [{"name": "c", "image": "example.invalid/none"}]},
    }))?;
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    wait_for(
        "the gang-nodes policy to give a dry-run muster-scheduler pod its toleration",
        Duration::from_secs(30),
        || async {
            Ok(match pods.create(&dry_run, &probe).await {
                Ok(p) if keeps_to_gang_nodes(&p) => Progress::Done(()),
                Ok(_) => Progress::NotYet("the dry-run pod came back without them".into()),
                Err(e) => Progress::NotYet(format!("dry run: {e}")),
            })
        },
    )
    .await
}

/// The pod tolerates the gang nodes' taint and selects their label.
pub fn keeps_to_gang_nodes(pod: &Pod) -> bool {
    let Some(spec) = &pod.spec else { return false };
    let tolerates = spec.tolerations.iter().flatten().any(|t| {
        t.key.as_deref() == Some(GANG_NODES_KEY)
            && t.operator.as_deref() == Some("Exists")
            && t.effect.as_deref() == Some("NoSchedule")
    });
    let selects = spec
        .node_selector
        .as_ref()
        .and_then(|m| m.get(GANG_NODES_KEY))
        .is_some_and(|v| v == "true");
    tolerates && selects
}

/// The objects of a multi-document YAML file, as JSON.
pub fn read_objects(yaml: &str) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for doc in yaml.split("\n---") {
        let has_content = doc
            .lines()
            .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
        if !has_content {
            continue;
        }
        let v: Value = serde_saphyr::from_str(doc).context("parsing a YAML document")?;
        out.push(v);
    }
    Ok(out)
}

/// Creates every object of `deploy/gang-admission-policy.yaml` and waits until the API server
/// applies the policy (a dry-run gang pod comes back gated and marked).
pub async fn apply_gang_admission_policy(client: &Client) -> Result<()> {
    apply_policy_file(client, POLICY_FILE, None).await
}

/// The second-scheduler install's policy ([`SECOND_SCHEDULER_POLICY_FILE`]), probed with a
/// `muster-scheduler` pod.
pub async fn apply_second_scheduler_policy(client: &Client) -> Result<()> {
    apply_policy_file(
        client,
        SECOND_SCHEDULER_POLICY_FILE,
        Some(SECOND_SCHEDULER_NAME),
    )
    .await
}

async fn apply_policy_file(client: &Client, file: &str, scheduler: Option<&str>) -> Result<()> {
    create_objects_of(client, file).await?;
    // The API server applies a policy once its informer has it: probe with a dry run.
    let ns = "muster-policy-probe";
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}}))?;
    match namespaces.create(&PostParams::default(), &namespace).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e).context("creating the policy probe namespace"),
    }
    wait_policy_marks_for(client, ns, true, scheduler).await
}

/// Creates every object of a YAML file of the repository (an object that exists is kept).
pub async fn create_objects_of(client: &Client, file: &str) -> Result<()> {
    let path = repo_root().join(file);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    for obj in read_objects(&text)? {
        let api_version = obj["apiVersion"]
            .as_str()
            .ok_or_else(|| anyhow!("{file}: an object without apiVersion"))?;
        let kind = obj["kind"]
            .as_str()
            .ok_or_else(|| anyhow!("{file}: an object without kind"))?;
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let lower = kind.to_lowercase();
        let plural = match lower.strip_suffix('y') {
            Some(stem) => format!("{stem}ies"),
            None => format!("{lower}s"),
        };
        let ar = ApiResource::from_gvk_with_plural(&gvk, &plural);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let dynamic: DynamicObject =
            serde_json::from_value(obj.clone()).with_context(|| format!("{kind} of {file}"))?;
        match api.create(&PostParams::default(), &dynamic).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => bail!("creating {kind} from {file}: {e:?}"),
        }
    }
    Ok(())
}

/// Waits until the API server applies the gang admission policy (`marked`: a dry-run gang pod
/// in namespace `ns` comes back gated and marked) or no longer does (after it was deleted:
/// it comes back as sent). The API server applies policies from an informer, so a policy just
/// created or deleted takes effect a moment later.
pub async fn wait_policy_marks(client: &Client, ns: &str, marked: bool) -> Result<()> {
    wait_policy_marks_for(client, ns, marked, None).await
}

/// [`wait_policy_marks`] with a probe pod of `scheduler` (`None`: the default scheduler).
async fn wait_policy_marks_for(
    client: &Client,
    ns: &str,
    marked: bool,
    scheduler: Option<&str>,
) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut probe: Pod = serde_json::from_value(json!({
        "metadata": {"name": "probe", "annotations": {"muster.dev/group": "probe"}},
        "spec": {"containers": [{"name": "c", "image": "example.invalid/none"}]},
    }))?;
    if let (Some(spec), Some(s)) = (probe.spec.as_mut(), scheduler) {
        spec.scheduler_name = Some(s.to_string());
    }
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let what = if marked {
        "the gang admission policy to mark a dry-run gang pod"
    } else {
        "the deleted gang admission policy to stop marking a dry-run gang pod"
    };
    wait_for(what, Duration::from_secs(30), || async {
        let pod = match pods.create(&dry_run, &probe).await {
            Ok(p) => p,
            // Namespace not visible to admission yet, and the like.
            Err(e) => return Ok(Progress::NotYet(format!("dry run: {e}"))),
        };
        Ok(if is_marked(&pod) == marked {
            Progress::Done(())
        } else if marked {
            Progress::NotYet("the dry-run pod came back unmarked".into())
        } else {
            Progress::NotYet("the dry-run pod still comes back marked".into())
        })
    })
    .await
}

/// The pod carries muster's gate and the marker resource (request and limit).
pub fn is_marked(pod: &Pod) -> bool {
    let Some(spec) = &pod.spec else { return false };
    let gated = spec
        .scheduling_gates
        .iter()
        .flatten()
        .any(|g| g.name == GATHER_GATE);
    let marked = spec
        .containers
        .first()
        .and_then(|c| c.resources.as_ref())
        .is_some_and(|r| {
            r.limits
                .as_ref()
                .is_some_and(|l| l.contains_key(GANG_MARKER))
                && r.requests
                    .as_ref()
                    .is_some_and(|l| l.contains_key(GANG_MARKER))
        });
    gated && marked
}

/// Whether the pod still has muster's gate.
pub fn is_gated(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.name == GATHER_GATE))
}

/// The admission half of the shipped install, for a test that starts muster and kube-scheduler
/// itself instead of through [`crate::Cluster`] (which does this on its own): applies
/// [`POLICY_FILE`] unless this is a control run, where the gang-members mode without muster is
/// kube-scheduler alone, members created unmarked and ungated (see [`crate::Cluster::gathers`]).
/// Returns whether members will be gathered (the policy was applied).
pub async fn install_unless_control_run(client: &Client) -> Result<bool> {
    if crate::cluster::control_run_requested() {
        eprintln!(
            "muster-harness: control run ({}): {POLICY_FILE} not applied; gang members are \
             created unmarked and ungated",
            crate::cluster::CONTROL_RUN_ENV
        );
        return Ok(false);
    }
    apply_gang_admission_policy(client).await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_file_holds_the_policy_and_its_binding() {
        let text = std::fs::read_to_string(repo_root().join(POLICY_FILE)).unwrap();
        let objects = read_objects(&text).unwrap();
        let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
        assert_eq!(
            kinds,
            ["MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"]
        );
    }
}
