//! muster's own identity, as deployed: the Namespace, ServiceAccount, ClusterRole and
//! ClusterRoleBinding of `deploy/namespace.yaml` and `deploy/rbac.yaml`, created for real, and a
//! kubeconfig holding a token of that ServiceAccount (TokenRequest API). A muster started with it
//! can do exactly what the shipped RBAC allows, so every test that places a gang this way proves
//! the RBAC suffices.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{ListParams, PostParams};
use kube::config::Kubeconfig;
use kube::{Api, Client};
use serde_json::Value;

use crate::paths::repo_root;
use crate::wait::{wait_for, Progress};

/// Where the shipped manifests put muster.
pub const NAMESPACE: &str = "muster-system";
pub const SERVICE_ACCOUNT: &str = "muster";
/// The user name the API server gives that ServiceAccount's tokens.
pub const USER: &str = "system:serviceaccount:muster-system:muster";

/// Creates the objects of `deploy/namespace.yaml` and `deploy/rbac.yaml` as they are (an
/// object that exists already is left alone).
pub async fn apply_shipped_rbac(client: &Client) -> Result<()> {
    for file in [
        "deploy/namespace.yaml",
        "deploy/rbac.yaml",
        "deploy/certs-rbac.yaml",
    ] {
        let path = repo_root().join(file);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
            .with_context(|| format!("parsing {}", path.display()))?;
        for doc in docs {
            create(client, doc)
                .await
                .with_context(|| format!("applying {}", path.display()))?;
        }
    }
    Ok(())
}

/// Creates the objects of `deploy/capacity-buffers-rbac.yaml` (what `--capacity-buffers` needs,
/// applied beside the install only with it).
pub async fn apply_capacity_buffers_rbac(client: &Client) -> Result<()> {
    for doc in shipped_docs("deploy/capacity-buffers-rbac.yaml")? {
        create(client, doc)
            .await
            .context("applying deploy/capacity-buffers-rbac.yaml")?;
    }
    Ok(())
}

/// The objects of a shipped manifest (`deploy/...`, relative to the repository root), as JSON.
pub fn shipped_docs(file: &str) -> Result<Vec<Value>> {
    let path = repo_root().join(file);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_saphyr::from_multiple(&text).with_context(|| format!("parsing {}", path.display()))
}

async fn create(client: &Client, doc: Value) -> Result<()> {
    let kind = doc["kind"].as_str().unwrap_or_default().to_string();
    let pp = PostParams::default();
    let result = match kind.as_str() {
        "Namespace" => Api::<Namespace>::all(client.clone())
            .create(&pp, &serde_json::from_value(doc)?)
            .await
            .map(drop),
        "ServiceAccount" => {
            let sa: ServiceAccount = serde_json::from_value(doc)?;
            let ns = sa.metadata.namespace.clone().unwrap_or_default();
            Api::<ServiceAccount>::namespaced(client.clone(), &ns)
                .create(&pp, &sa)
                .await
                .map(drop)
        }
        "ClusterRole" => Api::<ClusterRole>::all(client.clone())
            .create(&pp, &serde_json::from_value(doc)?)
            .await
            .map(drop),
        "ClusterRoleBinding" => Api::<ClusterRoleBinding>::all(client.clone())
            .create(&pp, &serde_json::from_value(doc)?)
            .await
            .map(drop),
        "Role" => {
            let role: Role = serde_json::from_value(doc)?;
            let ns = role.metadata.namespace.clone().unwrap_or_default();
            Api::<Role>::namespaced(client.clone(), &ns)
                .create(&pp, &role)
                .await
                .map(drop)
        }
        "RoleBinding" => {
            let binding: RoleBinding = serde_json::from_value(doc)?;
            let ns = binding.metadata.namespace.clone().unwrap_or_default();
            Api::<RoleBinding>::namespaced(client.clone(), &ns)
                .create(&pp, &binding)
                .await
                .map(drop)
        }
        other => bail!("unexpected kind {other:?} (add it to muster_harness::rbac)"),
    };
    match result {
        Ok(()) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("creating a {kind}")),
    }
}

/// Applies the shipped RBAC, asks the TokenRequest API for a token of muster's ServiceAccount
/// (valid `hours`), and writes `<dir>/muster-kubeconfig`: the admin kubeconfig's cluster and CA
/// with that token as the only credential. Returns its path.
pub async fn service_account_kubeconfig(
    client: &Client,
    admin_kubeconfig: &Path,
    dir: &Path,
    hours: i64,
) -> Result<PathBuf> {
    apply_shipped_rbac(client).await?;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(hours * 3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let token = Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE)
        .create_token_request(SERVICE_ACCOUNT, &PostParams::default(), &request)
        .await
        .context("requesting a token for muster's ServiceAccount")?
        .status
        .and_then(|s| s.token)
        .filter(|t| !t.is_empty())
        .context("the TokenRequest came back without a token")?;
    let admin = Kubeconfig::read_from(admin_kubeconfig)
        .with_context(|| format!("reading {}", admin_kubeconfig.display()))?;
    let cluster = admin
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .context("admin kubeconfig has no cluster")?;
    let server = cluster.server.clone().unwrap_or_default();
    let ca = cluster
        .certificate_authority
        .clone()
        .context("admin kubeconfig has no certificate-authority file")?;
    let path = dir.join("muster-kubeconfig");
    let text = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: muster-local
  cluster:
    server: {server}
    certificate-authority: {ca}
users:
- name: {USER}
  user:
    token: {token}
contexts:
- name: muster
  context:
    cluster: muster-local
    user: {USER}
current-context: muster
"
    );
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    wait_until_authorized(&path).await?;
    Ok(path)
}

/// The API server's RBAC authorizer learns of a new ClusterRoleBinding through its informer, a
/// moment after the create returns: until then muster's first list would be refused (and
/// counted as a watch error). Polls what muster does first, as muster.
async fn wait_until_authorized(kubeconfig: &Path) -> Result<()> {
    let client = crate::control_plane::client_from_kubeconfig(kubeconfig).await?;
    let one = ListParams::default().limit(1);
    wait_for(
        "muster's ServiceAccount to be allowed to list pods and nodes",
        Duration::from_secs(30),
        || async {
            let pods = Api::<Pod>::all(client.clone()).list_metadata(&one).await;
            let nodes = Api::<Node>::all(client.clone()).list_metadata(&one).await;
            Ok(match (pods, nodes) {
                (Ok(_), Ok(_)) => Progress::Done(()),
                (p, n) => Progress::NotYet(format!(
                    "pods: {:?}, nodes: {:?}",
                    p.err().map(|e| e.to_string()),
                    n.err().map(|e| e.to_string())
                )),
            })
        },
    )
    .await
}

/// Asks the API server's authorizer (a SubjectAccessReview) whether service account `sa` of
/// [`NAMESPACE`] may do what `attributes` say, with the groups its tokens carry.
pub async fn service_account_may(
    client: &Client,
    sa: &str,
    attributes: k8s_openapi::api::authorization::v1::ResourceAttributes,
) -> Result<bool> {
    use k8s_openapi::api::authorization::v1::{SubjectAccessReview, SubjectAccessReviewSpec};
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{NAMESPACE}:{sa}")),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{NAMESPACE}"),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(attributes),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .context("SubjectAccessReview")?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}
