//! End-to-end: the manifests in `deploy/` and `deploy/second-scheduler/`, rendered by the real
//! `kubectl kustomize` and validated by a real kube-apiserver (etcd + kube-apiserver from
//! `muster-harness`, no scheduler, no muster process).
//!
//! One control plane for the whole file: the namespace is created for real, every rendered object
//! is applied with server-side dry-run (so admission, schema validation and Pod Security judge
//! them), then applied for real so SubjectAccessReviews can prove the RBAC grants what muster and
//! the second kube-scheduler call — and that muster's ClusterRole is exactly that, nothing more.
//! Tests that need no cluster (the copied scheduler config, the Dockerfile's input) are plain.

use muster_harness::Timer;
use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use muster_harness::paths::{control_plane_bin_dir, repo_root, K8S_VERSION};
use muster_harness::{ControlPlane, ControlPlaneOptions};
use serde_json::Value;

const NS: &str = "muster-system";
const SECOND_SCHEDULER_CONFIG: &str = "scheduler-config/muster-second-scheduler.yaml";
const SECOND_SCHEDULER_COPY: &str = "deploy/second-scheduler/muster-second-scheduler.yaml";

/// `MUSTER_KUBECTL`, else the kubectl cached beside the control plane
/// (`tests/cluster/build-control-plane.sh` builds it), else `kubectl` on PATH.
fn kubectl_path() -> PathBuf {
    if let Some(p) = std::env::var_os("MUSTER_KUBECTL") {
        return PathBuf::from(p);
    }
    let cached = control_plane_bin_dir().join("kubectl");
    if cached.is_file() {
        return cached;
    }
    PathBuf::from("kubectl")
}

struct Output {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// Runs kubectl (against `kubeconfig` when given) with optional stdin.
fn kubectl(kubeconfig: Option<&Path>, args: &[&str], stdin: Option<&str>) -> Result<Output> {
    let bin = kubectl_path();
    let mut cmd = Command::new(&bin);
    cmd.current_dir(repo_root())
        .env_remove("KUBECONFIG")
        .env("KUBECACHEDIR", muster_harness::paths::kube_cache_dir())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(kc) = kubeconfig {
        cmd.arg(format!("--kubeconfig={}", kc.display()));
    }
    cmd.args(args);
    let mut child = cmd.spawn().with_context(|| {
        format!(
            "running {} (build it with tests/cluster/build-control-plane.sh, or set MUSTER_KUBECTL)",
            bin.display()
        )
    })?;
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("piped stdin")
            .write_all(input.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    Ok(Output {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// `kubectl kustomize <dir>` (no cluster needed).
fn render(dir: &str) -> Result<String> {
    let out = kubectl(None, &["kustomize", dir], None)?;
    ensure!(
        out.ok,
        "kubectl kustomize {dir} failed:\n{}",
        out.stderr.trim()
    );
    ensure!(!out.stdout.trim().is_empty(), "{dir} renders nothing");
    Ok(out.stdout)
}

/// Server-side apply of `manifests` (dry-run or for real); returns the objects as the API server
/// answered them. Fails on any error and on any warning (Pod Security, deprecated APIs, ...).
fn apply(kubeconfig: &Path, what: &str, manifests: &str, dry_run: bool) -> Result<Vec<Value>> {
    let mut args = vec![
        "apply",
        "--server-side",
        "--field-manager=muster-e2e-deploy",
        "-o",
        "json",
        "-f",
        "-",
    ];
    if dry_run {
        args.push("--dry-run=server");
    }
    let out = kubectl(Some(kubeconfig), &args, Some(manifests))?;
    let mode = if dry_run {
        "server-side dry-run"
    } else {
        "apply"
    };
    ensure!(
        out.ok,
        "{mode} of {what} refused by the API server:\n{}",
        out.stderr.trim()
    );
    let warnings: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.to_ascii_lowercase().contains("warning"))
        .collect();
    ensure!(
        warnings.is_empty(),
        "{mode} of {what}: the API server warned:\n{}",
        warnings.join("\n")
    );
    let v: Value = serde_json::from_str(&out.stdout)
        .with_context(|| format!("{mode} of {what}: output is not JSON:\n{}", out.stdout))?;
    Ok(match v["kind"].as_str() {
        Some("List") => v["items"].as_array().cloned().unwrap_or_default(),
        _ => vec![v],
    })
}

fn kind_names(objs: &[Value]) -> BTreeSet<String> {
    objs.iter()
        .map(|o| {
            let ns = o["metadata"]["namespace"].as_str().unwrap_or("");
            format!(
                "{}/{}/{}",
                o["kind"].as_str().unwrap_or("?"),
                ns,
                o["metadata"]["name"].as_str().unwrap_or("?")
            )
        })
        .collect()
}

fn find<'a>(objs: &'a [Value], kind: &str, name_prefix: &str) -> Result<&'a Value> {
    objs.iter()
        .find(|o| {
            o["kind"] == kind
                && o["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(name_prefix))
        })
        .with_context(|| format!("no {kind} {name_prefix}* in {:?}", kind_names(objs)))
}

/// A ClusterRole's rules flattened to `group resource verb [names]` lines.
fn flat_rules(role: &Value) -> BTreeSet<String> {
    let strs = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = BTreeSet::new();
    for rule in role["rules"].as_array().into_iter().flatten() {
        let names = strs(&rule["resourceNames"]).join(",");
        let urls = strs(&rule["nonResourceURLs"]);
        for verb in strs(&rule["verbs"]) {
            for url in &urls {
                out.insert(format!("url {url} {verb}"));
            }
            for group in strs(&rule["apiGroups"]) {
                for res in strs(&rule["resources"]) {
                    let group = if group.is_empty() { "core" } else { &group };
                    out.insert(format!("{group} {res} {verb} [{names}]").replace(" []", ""));
                }
            }
        }
    }
    out
}

fn pod_spec(deploy: &Value) -> &Value {
    &deploy["spec"]["template"]["spec"]
}

/// The hardening every container here must have (Pod Security "restricted" and then some).
fn assert_hardened(deploy: &Value) -> Result<()> {
    let name = deploy["metadata"]["name"].as_str().unwrap_or("?");
    let spec = pod_spec(deploy);
    ensure!(
        spec["securityContext"]["runAsNonRoot"] == true,
        "{name}: pod runAsNonRoot"
    );
    for c in spec["containers"].as_array().into_iter().flatten() {
        let sc = &c["securityContext"];
        let cname = c["name"].as_str().unwrap_or("?");
        ensure!(sc["runAsNonRoot"] == true, "{name}/{cname}: runAsNonRoot");
        ensure!(sc["runAsUser"] == 65532, "{name}/{cname}: runAsUser 65532");
        ensure!(
            sc["readOnlyRootFilesystem"] == true,
            "{name}/{cname}: readOnlyRootFilesystem"
        );
        ensure!(
            sc["allowPrivilegeEscalation"] == false,
            "{name}/{cname}: allowPrivilegeEscalation false"
        );
        ensure!(
            sc["capabilities"]["drop"] == serde_json::json!(["ALL"]),
            "{name}/{cname}: capabilities drop ALL"
        );
        ensure!(
            sc["seccompProfile"]["type"] == "RuntimeDefault",
            "{name}/{cname}: seccompProfile RuntimeDefault"
        );
        ensure!(
            c["resources"]["requests"]["cpu"].is_string()
                && c["resources"]["requests"]["memory"].is_string()
                && c["resources"]["limits"]["memory"].is_string(),
            "{name}/{cname}: cpu/memory requests and a memory limit"
        );
        ensure!(
            c["livenessProbe"].is_object() && c["readinessProbe"].is_object(),
            "{name}/{cname}: liveness and readiness probes"
        );
    }
    Ok(())
}

/// The muster Deployment, PDB and Service: singleton, probes, flags, image, Service address.
fn check_muster_objects(base: &[Value]) -> Result<()> {
    let d = find(base, "Deployment", "muster")?;
    ensure!(
        d["metadata"]["namespace"] == NS,
        "muster Deployment namespace"
    );
    ensure!(
        d["spec"]["replicas"] == 2,
        "two muster replicas: a leader and a warm standby"
    );
    ensure!(
        d["spec"]["strategy"]
            == serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}),
        "a rolling update that never lowers the Ready count (both replicas are Ready): {}",
        d["spec"]["strategy"]
    );
    let spec = pod_spec(d);
    let spread = &spec["topologySpreadConstraints"][0];
    ensure!(
        spread["topologyKey"] == "kubernetes.io/hostname"
            && spread["maxSkew"] == 1
            && spread["whenUnsatisfiable"] == "DoNotSchedule"
            && spread["labelSelector"]["matchLabels"] == d["spec"]["selector"]["matchLabels"],
        "replicas spread across nodes: {spread}"
    );
    ensure!(spec["serviceAccountName"] == "muster", "muster's SA");
    let c = &spec["containers"][0];
    ensure!(c["image"] == "muster:0.1.0", "image {}", c["image"]);
    ensure!(
        c["livenessProbe"]["httpGet"]["path"] == "/healthz"
            && c["livenessProbe"]["httpGet"]["port"] == "ops",
        "liveness /healthz on the plain ops port: {}",
        c["livenessProbe"]
    );
    ensure!(
        c["readinessProbe"]["httpGet"]["path"] == "/readyz"
            && c["readinessProbe"]["httpGet"]["port"] == "ops",
        "readiness /readyz on the plain ops port: {}",
        c["readinessProbe"]
    );
    let port_of = |name: &str| {
        c["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == name)
            .map(|p| p["containerPort"].clone())
    };
    ensure!(
        port_of("https") == Some(8888.into()) && port_of("ops") == Some(8889.into()),
        "container ports https 8888 and ops 8889: {}",
        c["ports"]
    );
    ensure!(
        c["resources"]["limits"]["memory"] == "256Mi"
            && c["resources"]["requests"]["cpu"] == "100m",
        "muster resources: {}",
        c["resources"]
    );
    let env = c["env"].as_array().context("muster env")?;
    ensure!(
        env.iter().any(|e| e["name"] == "POD_NAME"
            && e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"),
        "POD_NAME from the downward API"
    );
    ensure!(
        env.iter().any(|e| e["name"] == "POD_NAMESPACE"
            && e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"),
        "POD_NAMESPACE from the downward API: with POD_NAME, the pod the leader labels"
    );
    ensure!(
        env.iter()
            .any(|e| e["name"] == "MUSTER_LEADER_ELECT_LEASE_NAMESPACE"
                && e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"),
        "the Lease in muster's own namespace, from the downward API"
    );
    // Secure by default: muster makes its own certificates in its own namespace.
    ensure!(
        env.iter()
            .any(|e| e["name"] == "MUSTER_SELF_MANAGED_CERTS" && e["value"] == "true"),
        "MUSTER_SELF_MANAGED_CERTS=true: {env:?}"
    );
    ensure!(
        env.iter().any(|e| e["name"] == "MUSTER_CERTS_NAMESPACE"
            && e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"),
        "MUSTER_CERTS_NAMESPACE from the downward API"
    );
    let args: Vec<&str> = c["args"]
        .as_array()
        .context("muster args")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    ensure!(
        args.contains(&"--listen-addr=0.0.0.0:8888")
            && args.contains(&"--ops-listen-addr=0.0.0.0:8889"),
        "verbs on the Service port, probes and metrics on their own: {args:?}"
    );
    ensure!(
        args.contains(&"--leader-elect") && args.contains(&"--leader-elect-lease-name=muster"),
        "leader election on, Lease muster: {args:?}"
    );
    ensure!(
        !args.iter().any(|a| a.starts_with("--kubeconfig")),
        "in-cluster config, no --kubeconfig: {args:?}"
    );
    assert_hardened(d)?;

    // The flags in the manifest must be ones this muster accepts (parsed, not run).
    let help = Command::new(env!("CARGO_BIN_EXE_muster"))
        .arg("--help")
        .output()?;
    let help = String::from_utf8_lossy(&help.stdout);
    for a in &args {
        let flag = a.split('=').next().unwrap_or(a);
        ensure!(
            help.contains(flag),
            "deploy/deployment.yaml passes {flag}, unknown to muster --help"
        );
    }
    for e in env.iter().filter_map(|e| e["name"].as_str()) {
        ensure!(
            e == "POD_NAME" || help.contains(&format!("[env: {e}=")),
            "deploy/deployment.yaml sets {e}, unknown to muster --help"
        );
    }

    let svc = find(base, "Service", "muster")?;
    ensure!(svc["metadata"]["namespace"] == NS, "Service namespace");
    ensure!(
        svc["spec"]["ports"][0]["port"] == 8888 && svc["spec"]["ports"][0]["targetPort"] == "https",
        "Service port 8888 (scheduler configs use https://muster.muster-system.svc:8888)"
    );

    // Only the second scheduler's pods reach the verbs port; probes and metrics stay open.
    let np = find(base, "NetworkPolicy", "muster")?;
    ensure!(
        np["spec"]["podSelector"] == d["spec"]["selector"],
        "NetworkPolicy selects the muster pods: {}",
        np["spec"]["podSelector"]
    );
    ensure!(
        np["spec"]["ingress"]
            == serde_json::json!([
                {"from": [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "muster-scheduler"}}}],
                 "ports": [{"protocol": "TCP", "port": 8888}]},
                {"ports": [{"protocol": "TCP", "port": 8889}]}
            ]),
        "NetworkPolicy ingress: {}",
        np["spec"]["ingress"]
    );
    let mut leader_pods = d["spec"]["selector"]["matchLabels"].clone();
    leader_pods["muster.dev/leader"] = "true".into();
    ensure!(
        svc["spec"]["selector"] == leader_pods,
        "the Service selects the muster pod labelled leader: {}",
        svc["spec"]["selector"]
    );
    ensure!(
        d["spec"]["template"]["metadata"]["labels"]["muster.dev/leader"].is_null(),
        "the template carries no leader label: only the leader sets it on its own pod"
    );

    let pdb = find(base, "PodDisruptionBudget", "muster")?;
    ensure!(
        pdb["spec"]["maxUnavailable"] == 1
            && pdb["spec"]["minAvailable"].is_null()
            && pdb["spec"]["selector"] == d["spec"]["selector"],
        "PDB maxUnavailable 1 over the muster pods: a drain takes one replica at a time: {}",
        pdb["spec"]
    );

    let ns = find(base, "Namespace", NS)?;
    ensure!(
        ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted",
        "namespace enforces Pod Security restricted"
    );
    Ok(())
}

/// The second scheduler: stock kube-scheduler at the harness's version, config from the copy.
fn check_second_scheduler_objects(second: &[Value]) -> Result<()> {
    let d = find(second, "Deployment", "muster-scheduler")?;
    let spec = pod_spec(d);
    ensure!(spec["serviceAccountName"] == "muster-scheduler", "SA");
    let c = &spec["containers"][0];
    ensure!(
        c["image"]
            .as_str()
            .is_some_and(|i| i.ends_with(&format!("/kube-scheduler:{K8S_VERSION}"))),
        "stock kube-scheduler {K8S_VERSION}, got {}",
        c["image"]
    );
    let cmd: Vec<&str> = c["command"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(c["args"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    let config_flag = cmd
        .iter()
        .find_map(|a| a.strip_prefix("--config="))
        .with_context(|| format!("kube-scheduler without --config: {cmd:?}"))?;
    assert_hardened(d)?;

    // --config names a file in a volume from the generated ConfigMap, which holds the config.
    let cm = find(second, "ConfigMap", "muster-scheduler-config")?;
    let cm_name = cm["metadata"]["name"].as_str().unwrap_or_default();
    let mount = c["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| config_flag.starts_with(m["mountPath"].as_str().unwrap_or("\0")))
        .with_context(|| format!("no volume mounted at the dir of {config_flag}"))?;
    let key = config_flag
        .strip_prefix(mount["mountPath"].as_str().unwrap_or_default())
        .unwrap_or_default()
        .trim_start_matches('/');
    let volume = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == mount["name"])
        .context("volume of the config mount")?;
    ensure!(
        volume["configMap"]["name"] == cm_name,
        "config volume uses ConfigMap {cm_name}, got {}",
        volume["configMap"]
    );
    let want = fs::read_to_string(repo_root().join(SECOND_SCHEDULER_CONFIG))?;

    // The extender's tlsConfig files come from the Secret muster (or cert-manager) writes.
    // (Parsed with the harness's renderer, which leaves extenders alone without a new URL.)
    let config = muster_harness::control_plane::render_scheduler_config(
        &want,
        Path::new("/unused"),
        None,
        1.0,
        1,
    )?;
    let ext = &config["extenders"][0];
    ensure!(
        ext["enableHTTPS"] == true
            && ext["urlPrefix"]
                .as_str()
                .is_some_and(|u| u.starts_with("https://muster.muster-system.svc:8888")),
        "second scheduler calls muster over HTTPS: {ext}"
    );
    let client_mount = c["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["mountPath"] == "/etc/muster/client")
        .context("nothing mounted at /etc/muster/client")?;
    let client_volume = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == client_mount["name"])
        .context("volume of /etc/muster/client")?;
    ensure!(
        client_volume["secret"]["secretName"] == "muster-scheduler-client-cert",
        "/etc/muster/client is not the Secret muster-scheduler-client-cert: {client_volume}"
    );
    for (k, file) in [
        ("caFile", "ca.crt"),
        ("certFile", "tls.crt"),
        ("keyFile", "tls.key"),
    ] {
        ensure!(
            ext["tlsConfig"][k] == format!("/etc/muster/client/{file}"),
            "tlsConfig.{k} should be /etc/muster/client/{file}: {}",
            ext["tlsConfig"]
        );
    }

    ensure!(
        cm["data"][key].as_str() == Some(want.as_str()),
        "ConfigMap {cm_name} key {key:?} differs from {SECOND_SCHEDULER_CONFIG}; \
         run: cp {SECOND_SCHEDULER_CONFIG} deploy/second-scheduler/"
    );
    Ok(())
}

/// One access question: `verb` on `group/resource[/subresource]` (named `name`) in `ns`.
#[derive(Clone, Copy, Debug)]
struct Access {
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
    subresource: &'static str,
    name: &'static str,
    ns: &'static str,
}

const fn access(verb: &'static str, group: &'static str, resource: &'static str) -> Access {
    Access {
        verb,
        group,
        resource,
        subresource: "",
        name: "",
        ns: "",
    }
}

impl Access {
    const fn ns(self, ns: &'static str) -> Self {
        Access { ns, ..self }
    }
    const fn sub(self, subresource: &'static str) -> Self {
        Access {
            subresource,
            ..self
        }
    }
    const fn named(self, name: &'static str) -> Self {
        Access { name, ..self }
    }
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            String::new()
        } else {
            format!(".{}", self.group)
        };
        write!(f, "{} {}{group}", self.verb, self.resource)?;
        if !self.subresource.is_empty() {
            write!(f, "/{}", self.subresource)?;
        }
        if !self.name.is_empty() {
            write!(f, " named {}", self.name)?;
        }
        match self.ns {
            "" => Ok(()),
            ns => write!(f, " in {ns}"),
        }
    }
}

/// Asks the API server's authorizer (a SubjectAccessReview) whether service account `sa` of
/// muster-system may do `a`.
async fn allowed(client: &kube::Client, sa: &str, a: Access) -> Result<bool> {
    use k8s_openapi::api::authorization::v1::ResourceAttributes;
    let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
    let attributes = ResourceAttributes {
        verb: opt(a.verb),
        group: Some(a.group.to_string()),
        resource: opt(a.resource),
        subresource: opt(a.subresource),
        name: opt(a.name),
        namespace: opt(a.ns),
        ..Default::default()
    };
    muster_harness::rbac::service_account_may(client, sa, attributes)
        .await
        .with_context(|| format!("{sa}: {a}"))
}

/// What muster and the second scheduler may do, asked of the API server with the real bindings.
async fn check_permissions(client: &kube::Client) -> Result<()> {
    const CORE: &str = "";
    const EVENTS: &str = "events.k8s.io";
    const COORD: &str = "coordination.k8s.io";
    const VOLCANO: &str = "scheduling.volcano.sh";
    const COSCHEDULING: &str = "scheduling.x-k8s.io";
    const SCHEDULING: &str = "scheduling.k8s.io";
    const RESOURCE: &str = "resource.k8s.io";
    let team = "team-a";
    let muster_may = [
        access("get", CORE, "pods").ns(team),
        access("list", CORE, "pods"),
        access("watch", CORE, "pods"),
        access("patch", CORE, "pods").ns(team),
        access("get", CORE, "nodes"),
        access("list", CORE, "nodes"),
        access("watch", CORE, "nodes"),
        // The gang marker published in nodes' capacity and allocatable.
        access("patch", CORE, "nodes").sub("status"),
        access("create", CORE, "pods").sub("binding").ns(team),
        access("create", CORE, "pods").sub("eviction").ns(team),
        // A gathered gang's seats, published as its members' nominatedNodeName.
        access("patch", CORE, "pods").sub("status").ns(team),
        access("create", EVENTS, "events").ns(team),
        // Gang specs from PodGroups, read only.
        access("list", VOLCANO, "podgroups"),
        access("watch", VOLCANO, "podgroups"),
        access("list", COSCHEDULING, "podgroups"),
        access("watch", COSCHEDULING, "podgroups"),
        access("list", SCHEDULING, "podgroups"),
        access("watch", SCHEDULING, "podgroups"),
        access("get", SCHEDULING, "podgroups").named("pg").ns(team),
        // Each gang's status written back to its PodGroup.
        access("patch", VOLCANO, "podgroups").sub("status").ns(team),
        // Volcano's CRD has no status subresource: the object itself, status only.
        access("patch", VOLCANO, "podgroups").ns(team),
        access("patch", COSCHEDULING, "podgroups")
            .sub("status")
            .ns(team),
        access("patch", SCHEDULING, "podgroups")
            .sub("status")
            .ns(team),
        // Dynamic Resource Allocation objects, read only.
        access("list", RESOURCE, "resourceslices"),
        access("watch", RESOURCE, "resourceslices"),
        access("list", RESOURCE, "deviceclasses"),
        access("watch", RESOURCE, "deviceclasses"),
        access("list", RESOURCE, "resourceclaims"),
        access("watch", RESOURCE, "resourceclaims"),
        access("list", RESOURCE, "resourceclaimtemplates"),
        access("watch", RESOURCE, "resourceclaimtemplates"),
        // The leader label on its own pod, and a stale one on another replica's pod.
        access("list", CORE, "pods").ns(NS),
        access("patch", CORE, "pods")
            .named("muster-7d9f-abcde")
            .ns(NS),
        // Leader election: the one Lease in its own namespace.
        access("create", COORD, "leases").ns(NS),
        access("get", COORD, "leases").named("muster").ns(NS),
        access("update", COORD, "leases").named("muster").ns(NS),
        access("create", CORE, "secrets").ns(NS),
        access("get", CORE, "secrets").named("muster-ca").ns(NS),
        access("update", CORE, "secrets")
            .named("muster-scheduler-client-cert")
            .ns(NS),
    ];
    let muster_may_not = [
        access("create", CORE, "pods").ns(team),
        access("delete", CORE, "pods").ns(team),
        access("update", CORE, "pods").ns(team),
        access("update", CORE, "pods").sub("status").ns(team),
        access("update", CORE, "nodes"),
        access("patch", CORE, "nodes"),
        access("update", CORE, "nodes").sub("status"),
        access("list", CORE, "secrets").ns(NS),
        access("get", CORE, "secrets").named("other").ns(NS),
        access("update", CORE, "secrets").named("other").ns(NS),
        access("delete", CORE, "secrets").named("muster-ca").ns(NS),
        access("create", CORE, "secrets").ns(team),
        access("get", CORE, "secrets").named("muster-ca").ns(team),
        access("list", CORE, "configmaps"),
        access("patch", EVENTS, "events").ns(team),
        access("create", CORE, "events").ns(team),
        access("create", COORD, "leases").ns("kube-system"),
        access("get", COORD, "leases")
            .named("kube-scheduler")
            .ns("kube-system"),
        access("update", COORD, "leases")
            .named("muster-scheduler")
            .ns(NS),
        access("delete", COORD, "leases").named("muster").ns(NS),
        access("patch", COORD, "leases").named("muster").ns(NS),
        access("list", COORD, "leases").ns(NS),
        // PodGroups' specs are never written (their status only patched), and nothing else of
        // their groups is read.
        access("create", VOLCANO, "podgroups").ns(team),
        access("update", COSCHEDULING, "podgroups")
            .sub("status")
            .ns(team),
        access("patch", SCHEDULING, "podgroups").ns(team),
        access("delete", VOLCANO, "podgroups").ns(team),
        access("list", SCHEDULING, "workloads"),
        access("update", RESOURCE, "resourceclaims")
            .sub("status")
            .ns(team),
        access("create", RESOURCE, "resourceclaims").ns(team),
        access("list", VOLCANO, "queues"),
        access("list", SCHEDULING, "priorityclasses"),
    ];
    let scheduler_may = [
        access("create", COORD, "leases").ns(NS),
        access("get", COORD, "leases")
            .named("muster-scheduler")
            .ns(NS),
        access("update", COORD, "leases")
            .named("muster-scheduler")
            .ns(NS),
        access("get", CORE, "configmaps")
            .named("extension-apiserver-authentication")
            .ns("kube-system"),
        access("watch", CORE, "pods"),
        access("watch", CORE, "nodes"),
        access("create", CORE, "pods").sub("binding").ns(team),
        access("list", CORE, "persistentvolumeclaims"),
        access("create", EVENTS, "events").ns(team),
        // Delegated authn/authz of callers of its /metrics.
        access("create", "authentication.k8s.io", "tokenreviews"),
        access("create", "authorization.k8s.io", "subjectaccessreviews"),
    ];
    let scheduler_may_not = [
        access("update", COORD, "leases")
            .named("kube-controller-manager")
            .ns(NS),
        access("get", CORE, "secrets").ns(NS),
        access("delete", CORE, "nodes"),
    ];
    let cases = muster_may
        .iter()
        .map(|a| ("muster", *a, true))
        .chain(muster_may_not.iter().map(|a| ("muster", *a, false)))
        .chain(scheduler_may.iter().map(|a| ("muster-scheduler", *a, true)))
        .chain(
            scheduler_may_not
                .iter()
                .map(|a| ("muster-scheduler", *a, false)),
        )
        .collect::<Vec<_>>();
    let answers =
        futures::future::try_join_all(cases.iter().map(|(sa, a, _)| allowed(client, sa, *a)))
            .await?;
    let wrong: Vec<String> = cases
        .iter()
        .zip(answers)
        .filter(|((_, _, want), got)| want != got)
        .map(|((sa, a, want), _)| format!("{sa} {} {a}", if *want { "cannot" } else { "can" }))
        .collect();
    ensure!(wrong.is_empty(), "RBAC is off:\n{}", wrong.join("\n"));
    Ok(())
}

#[tokio::test]
async fn deploy_manifests_pass_the_api_server_and_rbac_is_least_privilege() -> Result<()> {
    let _t = Timer("deploy manifests", Instant::now());
    let base_yaml = render("deploy")?;
    let second_yaml = render("deploy/second-scheduler")?;

    let cp = ControlPlane::start(ControlPlaneOptions::default()).await?;
    let kc = cp.kubeconfig_path().to_path_buf();
    eprintln!(
        "control plane up in {:.1}s",
        cp.startup_time().as_secs_f64()
    );

    // The namespace for real (namespaced objects cannot be dry-run into a missing namespace).
    let ns = fs::read_to_string(repo_root().join("deploy/namespace.yaml"))?;
    apply(&kc, "deploy/namespace.yaml", &ns, false)?;

    // Every rendered object, judged by the API server without being stored.
    let base = apply(&kc, "kubectl kustomize deploy/", &base_yaml, true)?;
    let second = apply(
        &kc,
        "kubectl kustomize deploy/second-scheduler/",
        &second_yaml,
        true,
    )?;

    let base_kinds = kind_names(&base);
    let want_base: BTreeSet<String> = [
        "Namespace//muster-system",
        "ServiceAccount/muster-system/muster",
        "ClusterRole//muster",
        "ClusterRoleBinding//muster",
        "ClusterRole//muster-gang-viewer",
        "Role/muster-system/muster-leader-election",
        "RoleBinding/muster-system/muster-leader-election",
        "Role/muster-system/muster-certs",
        "RoleBinding/muster-system/muster-certs",
        "Deployment/muster-system/muster",
        "Service/muster-system/muster",
        "NetworkPolicy/muster-system/muster",
        "PodDisruptionBudget/muster-system/muster",
        "PriorityLevelConfiguration//muster-leader-election",
        "FlowSchema//muster-leader-election",
        "MutatingAdmissionPolicy//muster-gang-members",
        "MutatingAdmissionPolicyBinding//muster-gang-members",
    ]
    .map(String::from)
    .into();
    ensure!(
        base_kinds == want_base,
        "deploy/ renders {base_kinds:#?}, expected {want_base:#?}"
    );
    let second_kinds: BTreeSet<String> = kind_names(&second)
        .into_iter()
        .map(|k| match k.rsplit_once("muster-scheduler-config-") {
            Some((head, _hash)) => format!("{head}muster-scheduler-config-<hash>"),
            None => k,
        })
        .collect();
    let want_second: BTreeSet<String> = [
        "ServiceAccount/muster-system/muster-scheduler",
        "ClusterRoleBinding//muster-scheduler-as-kube-scheduler",
        "ClusterRoleBinding//muster-scheduler-as-volume-scheduler",
        "RoleBinding/kube-system/muster-scheduler-extension-apiserver-authentication-reader",
        "Role/muster-system/muster-scheduler-leader-election",
        "RoleBinding/muster-system/muster-scheduler-leader-election",
        "ConfigMap/muster-system/muster-scheduler-config-<hash>",
        "Deployment/muster-system/muster-scheduler",
        // Replace the base's (applied after it): only muster-scheduler pods are marked.
        "MutatingAdmissionPolicy//muster-gang-members",
        "MutatingAdmissionPolicyBinding//muster-gang-members",
        "MutatingAdmissionPolicy//muster-gang-nodes",
        "MutatingAdmissionPolicyBinding//muster-gang-nodes",
    ]
    .map(String::from)
    .into();
    ensure!(
        second_kinds == want_second,
        "deploy/second-scheduler/ renders {second_kinds:#?}, expected {want_second:#?}"
    );

    // Least privilege: muster's ClusterRole is exactly what it calls.
    let role = find(&base, "ClusterRole", "muster")?;
    let rules = flat_rules(role);
    let want_rules: BTreeSet<String> = [
        "core pods get",
        "core pods list",
        "core pods watch",
        "core pods patch",
        "core nodes get",
        "core nodes list",
        "core nodes watch",
        "core nodes/status patch",
        "core pods/binding create",
        "core pods/eviction create",
        "core pods/status patch",
        "events.k8s.io events create",
        "scheduling.volcano.sh podgroups get",
        "scheduling.volcano.sh podgroups list",
        "scheduling.volcano.sh podgroups watch",
        "scheduling.x-k8s.io podgroups get",
        "scheduling.x-k8s.io podgroups list",
        "scheduling.x-k8s.io podgroups watch",
        "scheduling.k8s.io podgroups get",
        "scheduling.k8s.io podgroups list",
        "scheduling.k8s.io podgroups watch",
        "scheduling.volcano.sh podgroups/status patch",
        "scheduling.volcano.sh podgroups patch",
        "scheduling.x-k8s.io podgroups/status patch",
        "scheduling.k8s.io podgroups/status patch",
        "resource.k8s.io resourceslices get",
        "resource.k8s.io resourceslices list",
        "resource.k8s.io resourceslices watch",
        "resource.k8s.io deviceclasses get",
        "resource.k8s.io deviceclasses list",
        "resource.k8s.io deviceclasses watch",
        "resource.k8s.io resourceclaims get",
        "resource.k8s.io resourceclaims list",
        "resource.k8s.io resourceclaims watch",
        "resource.k8s.io resourceclaimtemplates get",
        "resource.k8s.io resourceclaimtemplates list",
        "resource.k8s.io resourceclaimtemplates watch",
    ]
    .map(String::from)
    .into();
    ensure!(
        rules == want_rules,
        "muster's ClusterRole grants {rules:#?}, expected exactly {want_rules:#?}"
    );
    ensure!(
        role.get("aggregationRule").is_none(),
        "no aggregation into muster's role"
    );
    let lease_role = find(&base, "Role", "muster-leader-election")?;
    let lease_rules = flat_rules(lease_role);
    let want_lease_rules: BTreeSet<String> = [
        "coordination.k8s.io leases create",
        "coordination.k8s.io leases get [muster]",
        "coordination.k8s.io leases update [muster]",
    ]
    .map(String::from)
    .into();
    ensure!(
        lease_role["metadata"]["namespace"] == NS && lease_rules == want_lease_rules,
        "muster's leader-election Role grants {lease_rules:#?}, expected exactly {want_lease_rules:#?}"
    );
    let lease_binding = find(&base, "RoleBinding", "muster-leader-election")?;
    ensure!(
        lease_binding["roleRef"]["name"] == "muster-leader-election"
            && lease_binding["subjects"]
                == serde_json::json!([{"kind": "ServiceAccount", "name": "muster", "namespace": NS}]),
        "RoleBinding muster-leader-election: {lease_binding}"
    );
    // ... and its Role in its namespace is exactly what the self-managed certificates need.
    let certs_role = find(&base, "Role", "muster-certs")?;
    let rules = flat_rules(certs_role);
    let want_rules: BTreeSet<String> = [
        "core secrets create",
        "core secrets get [muster-ca,muster-serving-cert,muster-scheduler-client-cert]",
        "core secrets update [muster-ca,muster-serving-cert,muster-scheduler-client-cert]",
    ]
    .map(String::from)
    .into();
    ensure!(
        rules == want_rules,
        "muster's Role grants {rules:#?}, expected exactly {want_rules:#?}"
    );
    let rb = find(&base, "RoleBinding", "muster-certs")?;
    ensure!(
        rb["roleRef"]["kind"] == "Role"
            && rb["roleRef"]["name"] == "muster-certs"
            && rb["subjects"]
                == serde_json::json!([{"kind": "ServiceAccount", "name": "muster", "namespace": NS}]),
        "RoleBinding muster-certs: {rb}"
    );
    let crb = find(&base, "ClusterRoleBinding", "muster")?;
    ensure!(
        crb["roleRef"]["name"] == "muster"
            && crb["subjects"]
                == serde_json::json!([{"kind": "ServiceAccount", "name": "muster", "namespace": NS}]),
        "ClusterRoleBinding muster: {crb}"
    );

    check_muster_objects(&base)?;
    check_second_scheduler_objects(&second)?;

    // For real this time, so the bindings exist and the API server's authorizer can be asked.
    apply(&kc, "deploy/", &base_yaml, false)?;
    apply(&kc, "deploy/second-scheduler/", &second_yaml, false)?;
    check_permissions(&cp.client()).await?;

    // The cert-manager component: rendered on top of deploy/ and judged by the API server (with
    // stand-in CRDs: cert-manager itself is not installed here, so its own schema is not checked).
    apply(&kc, "stand-in cert-manager CRDs", CERT_MANAGER_CRDS, false)?;
    wait_for_crds(&kc).await?;
    let cm_yaml = render_with_cert_manager()?;
    let cm = apply(&kc, "deploy/ + deploy/cert-manager", &cm_yaml, true)?;
    check_cert_manager_objects(&cm)?;
    Ok(())
}

/// Just enough of cert-manager's CRDs (cert-manager.io/v1 Issuer and Certificate, namespaced)
/// for the API server to accept the objects; the fields are not validated.
const CERT_MANAGER_CRDS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: issuers.cert-manager.io
spec:
  group: cert-manager.io
  scope: Namespaced
  names: {kind: Issuer, listKind: IssuerList, plural: issuers, singular: issuer}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: certificates.cert-manager.io
spec:
  group: cert-manager.io
  scope: Namespaced
  names: {kind: Certificate, listKind: CertificateList, plural: certificates, singular: certificate}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

/// Polls until the API server serves cert-manager.io/v1 (CRDs take a moment to be established).
async fn wait_for_crds(kc: &Path) -> Result<()> {
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let out = kubectl(
            Some(kc),
            &["get", "--raw", "/apis/cert-manager.io/v1"],
            None,
        )?;
        if out.ok && out.stdout.contains("certificates") && out.stdout.contains("issuers") {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "cert-manager.io/v1 not served after 30s: {}",
            out.stderr.trim()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// `kubectl kustomize` of a throwaway kustomization that takes deploy/ and adds the
/// deploy/cert-manager component, as deploy/README.md tells users to (kustomize wants relative
/// paths, so it lives under target/).
fn render_with_cert_manager() -> Result<String> {
    let dir = repo_root()
        .join("target")
        .join(format!("cert-manager-overlay-{}", std::process::id()));
    fs::create_dir_all(&dir)?;
    fs::write(
        dir.join("kustomization.yaml"),
        "resources: [../../deploy]\ncomponents: [../../deploy/cert-manager]\n",
    )?;
    let out = kubectl(None, &["kustomize", &dir.display().to_string()], None);
    let _ = fs::remove_dir_all(&dir);
    let out = out?;
    ensure!(
        out.ok,
        "kustomize with deploy/cert-manager: {}",
        out.stderr.trim()
    );
    Ok(out.stdout)
}

/// With cert-manager, muster serves the mounted Secret and has no Secret permissions; the
/// Issuers chain self-signed → CA → leaves into the Secrets the second scheduler mounts.
fn check_cert_manager_objects(objs: &[Value]) -> Result<()> {
    let kinds = kind_names(objs);
    for gone in [
        "Role/muster-system/muster-certs",
        "RoleBinding/muster-system/muster-certs",
    ] {
        ensure!(
            !kinds.contains(gone),
            "{gone} is still rendered with cert-manager"
        );
    }
    let d = find(objs, "Deployment", "muster")?;
    let c = &pod_spec(d)["containers"][0];
    let env: BTreeSet<String> = c["env"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            format!(
                "{}={}",
                e["name"].as_str().unwrap_or("?"),
                e["value"].as_str().unwrap_or("<from>")
            )
        })
        .collect();
    ensure!(
        !env.iter()
            .any(|e| e.starts_with("MUSTER_SELF_MANAGED_CERTS=")),
        "muster still makes its own certificates: {env:?}"
    );
    for want in [
        "MUSTER_TLS_CERT_FILE=/etc/muster/tls/tls.crt",
        "MUSTER_TLS_KEY_FILE=/etc/muster/tls/tls.key",
        "MUSTER_TLS_CLIENT_CA_FILE=/etc/muster/tls/ca.crt",
    ] {
        ensure!(env.contains(want), "{want} missing: {env:?}");
    }
    let mount = c["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["mountPath"] == "/etc/muster/tls")
        .context("nothing mounted at /etc/muster/tls")?;
    let volume = pod_spec(d)["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == mount["name"])
        .context("volume of /etc/muster/tls")?;
    ensure!(
        volume["secret"]["secretName"] == "muster-serving-cert",
        "/etc/muster/tls is not the Secret muster-serving-cert: {volume}"
    );
    assert_hardened(d)?;

    let cert = |name: &str| find(objs, "Certificate", name);
    let ca = cert("muster-ca")?;
    ensure!(
        ca["spec"]["isCA"] == true && ca["spec"]["issuerRef"]["name"] == "muster-selfsigned",
        "CA Certificate: {}",
        ca["spec"]
    );
    ensure!(
        find(objs, "Issuer", "muster-selfsigned")?["spec"]["selfSigned"].is_object(),
        "self-signed Issuer"
    );
    ensure!(
        find(objs, "Issuer", "muster-ca")?["spec"]["ca"]["secretName"] == ca["spec"]["secretName"],
        "the CA Issuer signs with the CA Certificate's Secret"
    );
    let serving = cert("muster-serving-cert")?;
    let client = cert("muster-scheduler-client-cert")?;
    for (c, secret, usage) in [
        (serving, "muster-serving-cert", "server auth"),
        (client, "muster-scheduler-client-cert", "client auth"),
    ] {
        ensure!(
            c["spec"]["secretName"] == secret
                && c["spec"]["issuerRef"]["name"] == "muster-ca"
                && c["spec"]["usages"]
                    .as_array()
                    .is_some_and(|u| u.iter().any(|x| x == usage)),
            "Certificate {secret}: {}",
            c["spec"]
        );
    }
    ensure!(
        serving["spec"]["dnsNames"]
            .as_array()
            .is_some_and(|n| n.iter().any(|x| x == "muster.muster-system.svc")),
        "serving certificate for muster.muster-system.svc: {}",
        serving["spec"]
    );
    Ok(())
}

/// kustomize cannot read files outside its directory, so the second scheduler's config is a copy.
#[test]
fn second_scheduler_config_copy_is_byte_identical() -> Result<()> {
    let root = repo_root();
    let original = fs::read(root.join(SECOND_SCHEDULER_CONFIG))?;
    let copy = fs::read(root.join(SECOND_SCHEDULER_COPY))?;
    ensure!(
        original == copy,
        "{SECOND_SCHEDULER_COPY} differs from {SECOND_SCHEDULER_CONFIG}; \
         run: cp {SECOND_SCHEDULER_CONFIG} deploy/second-scheduler/"
    );
    Ok(())
}

/// The second-scheduler install's admission policy is the base's with only the schedulers it
/// marks changed (kustomize cannot patch the base's from another directory): default-scheduler
/// there, muster-scheduler here.
#[test]
fn second_scheduler_policy_differs_from_the_base_only_in_its_scheduler_names() -> Result<()> {
    let root = repo_root();
    let base = fs::read_to_string(root.join("deploy/gang-admission-policy.yaml"))?;
    let second =
        fs::read_to_string(root.join("deploy/second-scheduler/gang-admission-policy.yaml"))?;
    let line =
        |names: &str| format!("      expression: \"object.spec.schedulerName in [{names}]\"\n");
    let (base_line, second_line) = (line("'default-scheduler'"), line("'muster-scheduler'"));
    ensure!(
        base.matches(&base_line).count() == 1,
        "deploy/gang-admission-policy.yaml has no single line {base_line:?}"
    );
    ensure!(
        base.replace(&base_line, &second_line) == second,
        "deploy/second-scheduler/gang-admission-policy.yaml is not deploy/gang-admission-policy.yaml \
         with {base_line:?} made {second_line:?}"
    );
    Ok(())
}

/// deploy/Dockerfile only copies the static binary (tests/e2e/image.rs builds and runs it): its
/// default BINARY is where deploy/build-static-binary puts a release build, and .dockerignore
/// lets exactly that file into a `docker build` context of the repository root.
#[test]
fn dockerfile_copies_the_static_binary_that_dockerignore_lets_through() -> Result<()> {
    let root = repo_root();
    let text = fs::read_to_string(root.join("deploy/Dockerfile"))?;
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    ensure!(
        lines.first() == Some(&"FROM scratch"),
        "one stage, FROM scratch: {lines:?}"
    );
    let default = lines
        .iter()
        .find_map(|l| l.strip_prefix("ARG BINARY="))
        .context("no ARG BINARY=<default path>")?;
    let want = format!(
        "target/{}-unknown-linux-gnu/release/muster",
        std::env::consts::ARCH
    );
    ensure!(
        default == want,
        "ARG BINARY={default}, deploy/build-static-binary builds {want}"
    );
    ensure!(
        lines.contains(&"COPY ${BINARY} /muster"),
        "the binary is copied to /muster: {lines:?}"
    );
    ensure!(lines.contains(&"USER 65532:65532"), "image runs as 65532");
    ensure!(
        lines.contains(&r#"ENTRYPOINT ["/muster"]"#),
        "entrypoint /muster: {lines:?}"
    );
    let ignore = fs::read_to_string(root.join(".dockerignore"))?;
    let rules: Vec<&str> = ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    ensure!(
        rules == ["*", &format!("!{want}")],
        ".dockerignore should exclude everything but {want}: {rules:?}"
    );
    Ok(())
}
