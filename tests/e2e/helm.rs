//! The Helm chart in `deploy/chart/` against the Kustomize base it mirrors.
//!
//! `helm` is built from the Go module proxy and cached beside the control plane
//! (`tests/cluster/build-helm.sh`; `MUSTER_HELM` names another binary). Without a cluster:
//! `helm lint --strict` in every mode, `helm template` of each mode compared object by object with
//! `kubectl kustomize` of the matching Kustomize directories (Helm's own labels dropped; the
//! differences that are meant are listed in [`INTENDED_DIFFERENCES`] and must each be seen), the
//! chart's options beyond Kustomize, and bad values refused by the values schema. With a real
//! kube-apiserver (no scheduler, no muster): every render through a server-side dry-run, with
//! stand-in CRDs from `tests/crds/` for cert-manager's and the Prometheus Operator's kinds, then
//! `helm install` and `helm uninstall` for real.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use muster_harness::paths::{control_plane_bin_dir, repo_root, K8S_VERSION};
use muster_harness::{ControlPlane, ControlPlaneOptions, Timer};
use serde::Deserialize;
use serde_json::{json, Value};

const CHART: &str = "deploy/chart";
const NS: &str = "muster-system";

/// Labels Helm's conventions add and Kustomize's base does not carry; dropped before comparing.
const HELM_LABELS: [&str; 3] = [
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
];

/// Where the chart differs from Kustomize on purpose. Each is applied by [`reconcile_intended`]
/// to the pair of renders before they are compared, and must be found there (a stale entry fails).
const INTENDED_DIFFERENCES: [(&str, &str); 4] = [
    (
        "ConfigMap muster-scheduler-config",
        "Kustomize's configMapGenerator names it muster-scheduler-config-<content hash> (and the \
         second scheduler's Deployment mounts that name); the chart keeps the name fixed",
    ),
    (
        "Deployment muster-scheduler: spec.template.metadata.annotations[checksum/config]",
        "the chart rolls the second scheduler on a config change with a checksum annotation \
         (Helm's convention), as Kustomize does with the hashed name",
    ),
    (
        "Deployment muster: env MUSTER_SCHEDULER_NAMES=muster-scheduler, with the second scheduler",
        "Kustomize cannot patch the base from deploy/second-scheduler/, so deploy/README.md has \
         users add it with `kubectl set env` (appended last, as the chart renders it)",
    ),
    (
        "Deployment muster: args --capacity-buffers --capacity-buffer-timeout=5m, with \
         capacityBuffers.enabled",
        "deploy/capacity-buffers-rbac.yaml is applied beside the base, which leaves the feature \
         off; docs/operating.md has users append both flags to muster's arguments with a patch \
         (last, as the chart renders them when extraArgs is empty)",
    ),
];

/// One mode of the chart and the Kustomize directories that render the same objects.
struct Mode {
    name: &'static str,
    sets: &'static [&'static str],
    /// Directories for `kubectl kustomize`; "cert-manager" means deploy/ with the component; a
    /// `.yaml` file is taken as it is (applied beside the base with `kubectl apply -f`).
    kustomize: &'static [&'static str],
}

const MODES: [Mode; 5] = [
    Mode {
        name: "default scheduler, self-managed certificates (the defaults)",
        sets: &[],
        kustomize: &["deploy"],
    },
    Mode {
        name: "second scheduler",
        sets: &["schedulerMode=second-scheduler"],
        kustomize: &["deploy", "deploy/second-scheduler"],
    },
    Mode {
        name: "cert-manager",
        sets: &["certificates=cert-manager"],
        kustomize: &["cert-manager"],
    },
    Mode {
        name: "second scheduler with cert-manager",
        sets: &[
            "schedulerMode=second-scheduler",
            "certificates=cert-manager",
        ],
        kustomize: &["cert-manager", "deploy/second-scheduler"],
    },
    Mode {
        name: "capacity buffers (an autoscaled cluster)",
        sets: &["capacityBuffers.enabled=true"],
        kustomize: &["deploy", CAPACITY_BUFFERS_RBAC],
    },
];

/// What `--capacity-buffers` needs, applied beside the Kustomize base (docs/operating.md).
const CAPACITY_BUFFERS_RBAC: &str = "deploy/capacity-buffers-rbac.yaml";
/// The flags docs/operating.md has Kustomize users append for it (the chart's defaults).
const CAPACITY_BUFFERS_ARGS: [&str; 2] = ["--capacity-buffers", "--capacity-buffer-timeout=5m"];

struct Output {
    ok: bool,
    stdout: String,
    stderr: String,
}

fn run(bin: &Path, args: &[&str], stdin: Option<&str>, envs: &[(&str, &Path)]) -> Result<Output> {
    let mut cmd = Command::new(bin);
    cmd.current_dir(repo_root())
        .env_remove("KUBECONFIG")
        .env("KUBECACHEDIR", muster_harness::paths::kube_cache_dir())
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("running {}", bin.display()))?;
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

/// `MUSTER_HELM`, else the helm `tests/cluster/build-helm.sh` caches (it builds it on first use
/// and returns at once when cached); asked once per test binary.
fn helm_bin() -> Result<PathBuf> {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    if let Some(p) = BIN.get() {
        return Ok(p.clone());
    }
    let p = find_helm()?;
    Ok(BIN.get_or_init(|| p).clone())
}

fn find_helm() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("MUSTER_HELM") {
        return Ok(PathBuf::from(p));
    }
    let script = repo_root().join("tests/cluster/build-helm.sh");
    let out = Command::new(&script)
        .current_dir(repo_root())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    ensure!(
        out.status.success(),
        "{} failed (it needs Go; or set MUSTER_HELM)",
        script.display()
    );
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok(PathBuf::from(dir).join("helm"))
}

/// Runs helm with its config, cache and data homes under target/ (nothing of the user's).
fn helm(args: &[&str]) -> Result<Output> {
    let home = repo_root().join("target/helm-home");
    run(
        &helm_bin()?,
        args,
        None,
        &[
            ("HELM_CONFIG_HOME", &home.join("config")),
            ("HELM_CACHE_HOME", &home.join("cache")),
            ("HELM_DATA_HOME", &home.join("data")),
        ],
    )
}

fn set_args<'a>(sets: &'a [&'a str]) -> Vec<&'a str> {
    sets.iter().flat_map(|s| ["--set", *s]).collect()
}

/// `helm template muster deploy/chart` with `sets`, for the control plane's Kubernetes version.
fn helm_template(sets: &[&str]) -> Result<String> {
    let mut args = vec!["template", "muster", CHART, "--kube-version", K8S_VERSION];
    args.extend(set_args(sets));
    let out = helm(&args)?;
    ensure!(
        out.ok,
        "helm template {sets:?} failed:\n{}",
        out.stderr.trim()
    );
    Ok(out.stdout)
}

fn kubectl_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("MUSTER_KUBECTL") {
        return PathBuf::from(p);
    }
    let cached = control_plane_bin_dir().join("kubectl");
    if cached.is_file() {
        return cached;
    }
    PathBuf::from("kubectl")
}

fn kubectl(kubeconfig: Option<&Path>, args: &[&str], stdin: Option<&str>) -> Result<Output> {
    let kc;
    let mut all = Vec::with_capacity(args.len() + 1);
    if let Some(k) = kubeconfig {
        kc = format!("--kubeconfig={}", k.display());
        all.push(kc.as_str());
    }
    all.extend_from_slice(args);
    run(&kubectl_bin(), &all, stdin, &[])
}

/// `kubectl kustomize` of one directory; "cert-manager" is deploy/ with the deploy/cert-manager
/// component, through a throwaway kustomization as deploy/README.md tells users to write.
fn kustomize(dir: &str) -> Result<String> {
    if dir.ends_with(".yaml") {
        return fs::read_to_string(repo_root().join(dir)).with_context(|| format!("reading {dir}"));
    }
    let overlay;
    let target = if dir == "cert-manager" {
        overlay = repo_root().join("target").join(format!(
            "helm-cert-manager-overlay-{}-{}",
            std::process::id(),
            {
                static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
                N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            }
        ));
        fs::create_dir_all(&overlay)?;
        fs::write(
            overlay.join("kustomization.yaml"),
            "resources: [../../deploy]\ncomponents: [../../deploy/cert-manager]\n",
        )?;
        overlay.display().to_string()
    } else {
        dir.to_string()
    };
    let out = kubectl(None, &["kustomize", &target], None)?;
    if dir == "cert-manager" {
        let _ = fs::remove_dir_all(&target);
    }
    ensure!(
        out.ok,
        "kubectl kustomize {dir} failed:\n{}",
        out.stderr.trim()
    );
    Ok(out.stdout)
}

/// The objects of a multi-document YAML stream (empty documents skipped).
fn parse(yaml: &str) -> Result<Vec<Value>> {
    let mut objs = Vec::new();
    for doc in serde_norway::Deserializer::from_str(yaml) {
        let v = Value::deserialize(doc).context("a rendered document is not YAML")?;
        if !v.is_null() {
            objs.push(v);
        }
    }
    Ok(objs)
}

fn key(o: &Value) -> String {
    format!(
        "{}/{}/{}",
        o["kind"].as_str().unwrap_or("?"),
        o["metadata"]["namespace"].as_str().unwrap_or(""),
        o["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// Objects by kind/namespace/name, Helm's own labels dropped (and `labels` when that empties it).
fn by_key(objs: Vec<Value>) -> Result<BTreeMap<String, Value>> {
    let mut out = BTreeMap::new();
    for mut o in objs {
        if let Some(labels) = o["metadata"]["labels"].as_object_mut() {
            for l in HELM_LABELS {
                labels.remove(l);
            }
            if labels.is_empty() {
                o["metadata"]
                    .as_object_mut()
                    .expect("metadata")
                    .remove("labels");
            }
        }
        let k = key(&o);
        ensure!(out.insert(k.clone(), o).is_none(), "{k} rendered twice");
    }
    Ok(out)
}

/// The intended differences of [`INTENDED_DIFFERENCES`], applied: the Kustomize ConfigMap's hash
/// suffix (and the Deployment's reference to it) dropped, the chart's checksum annotation removed
/// once checked (only in renders with the second scheduler; there, each must be found); with
/// deploy/capacity-buffers-rbac.yaml, the flags users append to the base's muster.
fn reconcile_intended(
    helm: &mut BTreeMap<String, Value>,
    kust: &mut BTreeMap<String, Value>,
) -> Result<()> {
    if kust.contains_key("ClusterRole//muster-capacity-buffers") {
        let args = kust
            .get_mut(&format!("Deployment/{NS}/muster"))
            .and_then(|d| d["spec"]["template"]["spec"]["containers"][0]["args"].as_array_mut())
            .context("Kustomize renders no muster container with args")?;
        ensure!(
            !args.iter().any(|a| a
                .as_str()
                .is_some_and(|a| a.starts_with("--capacity-buffer"))),
            "Kustomize passes a --capacity-buffer flag itself: drop the intended difference"
        );
        args.extend(CAPACITY_BUFFERS_ARGS.map(|a| json!(a)));
    }
    let prefix = format!("ConfigMap/{NS}/muster-scheduler-config-");
    let Some(hashed) = kust.keys().find(|k| k.starts_with(&prefix)).cloned() else {
        ensure!(
            !helm.keys().any(|k| k.contains("muster-scheduler-config")),
            "the chart renders the second scheduler's ConfigMap where Kustomize does not"
        );
        return Ok(());
    };
    let hash = &hashed[prefix.len()..];
    ensure!(
        hash.len() == 10 && hash.chars().all(|c| c.is_ascii_alphanumeric()),
        "{hashed}: not a Kustomize content hash"
    );
    // The `kubectl set env deployment/muster MUSTER_SCHEDULER_NAMES=muster-scheduler` step.
    let env = kust
        .get_mut(&format!("Deployment/{NS}/muster"))
        .and_then(|d| d["spec"]["template"]["spec"]["containers"][0]["env"].as_array_mut())
        .context("Kustomize renders no muster container with env")?;
    ensure!(
        !env.iter().any(|e| e["name"] == "MUSTER_SCHEDULER_NAMES"),
        "Kustomize sets MUSTER_SCHEDULER_NAMES itself: drop the intended difference"
    );
    env.push(json!({"name": "MUSTER_SCHEDULER_NAMES", "value": "muster-scheduler"}));
    let mut cm = kust.remove(&hashed).expect("found above");
    cm["metadata"]["name"] = json!("muster-scheduler-config");
    kust.insert(format!("ConfigMap/{NS}/muster-scheduler-config"), cm);
    let dk = format!("Deployment/{NS}/muster-scheduler");
    let d = kust
        .get_mut(&dk)
        .context("Kustomize renders no second scheduler")?;
    let volumes = d["spec"]["template"]["spec"]["volumes"]
        .as_array_mut()
        .context("second scheduler volumes")?;
    let mut renamed = 0;
    for v in volumes {
        if v["configMap"]["name"] == hashed.rsplit('/').next().unwrap_or("") {
            v["configMap"]["name"] = json!("muster-scheduler-config");
            renamed += 1;
        }
    }
    ensure!(
        renamed == 1,
        "the second scheduler mounts the hashed ConfigMap {renamed} times"
    );

    let hd = helm
        .get_mut(&dk)
        .context("the chart renders no second scheduler")?;
    let annotations = hd["spec"]["template"]["metadata"]["annotations"]
        .as_object_mut()
        .context("the second scheduler's pod template has no annotations")?;
    let sum = annotations
        .remove("checksum/config")
        .context("no checksum/config annotation on the second scheduler's pod template")?;
    ensure!(
        sum.as_str()
            .is_some_and(|s| s.len() == 64 && s.chars().all(|c| c.is_ascii_hexdigit())),
        "checksum/config is not a sha256: {sum}"
    );
    if annotations.is_empty() {
        hd["spec"]["template"]["metadata"]
            .as_object_mut()
            .expect("template metadata")
            .remove("annotations");
    }
    Ok(())
}

/// Paths (JSON pointers) where `a` and `b` differ, each with both values. CEL expressions (the
/// admission policy's `expression` fields) are compared with runs of whitespace made one space:
/// Kustomize's YAML re-encoding turns each more-indented line of a folded scalar (`>-`) into a
/// blank line, which CEL ignores (no string literal there holds whitespace).
fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    let one_space = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    match (a, b) {
        (Value::String(x), Value::String(y))
            if path.ends_with("/expression") && one_space(x) == one_space(y) => {}
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let p = format!("{path}/{}", k.replace('~', "~0").replace('/', "~1"));
                diff(
                    &p,
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                diff(&format!("{path}/{i}"), u, v, out);
            }
        }
        _ if a == b => {}
        _ => {
            let short = |v: &Value| {
                let s = v.to_string();
                if s.len() > 200 {
                    format!("{}...", &s[..200])
                } else {
                    s
                }
            };
            out.push(format!(
                "  {path}: chart {} / kustomize {}",
                short(a),
                short(b)
            ));
        }
    }
}

/// The chart's render of `mode` against Kustomize's, object by object; every difference named.
fn compare(mode: &Mode) -> Result<()> {
    let mut helm = by_key(parse(&helm_template(mode.sets)?)?)?;
    // Applied in order: an object of a later directory replaces the earlier one of the same
    // name (deploy/second-scheduler/'s admission policy replaces the base's).
    let mut kust = BTreeMap::new();
    for dir in mode.kustomize {
        kust.extend(by_key(parse(&kustomize(dir)?)?)?);
    }
    reconcile_intended(&mut helm, &mut kust)?;

    let mut problems = Vec::new();
    for k in kust.keys().filter(|k| !helm.contains_key(*k)) {
        problems.push(format!("{k}: rendered by Kustomize, not by the chart"));
    }
    for k in helm.keys().filter(|k| !kust.contains_key(*k)) {
        problems.push(format!("{k}: rendered by the chart, not by Kustomize"));
    }
    for (k, h) in &helm {
        if let Some(kv) = kust.get(k) {
            let mut d = Vec::new();
            diff("", h, kv, &mut d);
            if !d.is_empty() {
                problems.push(format!("{k} differs:\n{}", d.join("\n")));
            }
        }
    }
    ensure!(
        problems.is_empty(),
        "mode {:?} (helm {:?} vs kustomize {:?}): the chart and Kustomize drifted apart:\n{}",
        mode.name,
        mode.sets,
        mode.kustomize,
        problems.join("\n")
    );
    Ok(())
}

#[test]
fn chart_lints_clean_in_every_mode() -> Result<()> {
    let _t = Timer("helm lint", Instant::now());
    let extra: [&[&str]; 4] = [
        &["scope=every-pod"],
        &[
            "capacityBuffers.enabled=true",
            "capacityBuffers.timeout=90s",
        ],
        &[
            "serviceMonitor.enabled=true",
            "grafanaDashboard.enabled=true",
        ],
        &["namespace.name=gangs", "namespace.create=false"],
    ];
    for sets in MODES.iter().map(|m| m.sets).chain(extra) {
        let mut args = vec!["lint", "--strict", CHART, "--kube-version", K8S_VERSION];
        args.extend(set_args(sets));
        let out = helm(&args)?;
        ensure!(
            out.ok && out.stdout.contains("1 chart(s) linted, 0 chart(s) failed"),
            "helm lint --strict {sets:?}:\n{}\n{}",
            out.stdout.trim(),
            out.stderr.trim()
        );
        ensure!(
            !out.stdout.contains("[WARNING]") && !out.stdout.contains("[ERROR]"),
            "helm lint {sets:?} warns:\n{}",
            out.stdout
        );
    }
    Ok(())
}

#[test]
fn chart_renders_what_kustomize_renders_in_every_mode() -> Result<()> {
    let _t = Timer("helm vs kustomize", Instant::now());
    for (what, why) in INTENDED_DIFFERENCES {
        eprintln!("intended difference: {what}: {why}");
    }
    let failures: Vec<String> = MODES
        .iter()
        .filter_map(|m| compare(m).err().map(|e| format!("{e:#}")))
        .collect();
    ensure!(failures.is_empty(), "{}", failures.join("\n\n"));
    Ok(())
}

fn find<'a>(objs: &'a BTreeMap<String, Value>, key: &str) -> Result<&'a Value> {
    objs.get(key)
        .with_context(|| format!("no {key} in {:?}", objs.keys().collect::<Vec<_>>()))
}

fn muster_container(objs: &BTreeMap<String, Value>) -> Result<Value> {
    Ok(
        find(objs, &format!("Deployment/{NS}/muster"))?["spec"]["template"]["spec"]["containers"]
            [0]
        .clone(),
    )
}

/// What the chart offers beyond the Kustomize base, rendered as values.yaml says.
#[test]
fn chart_options_beyond_kustomize_render_as_documented() -> Result<()> {
    let _t = Timer("helm options", Instant::now());
    let default = by_key(parse(&helm_template(&[])?)?)?;

    // scope every-pod: muster --scope=every-pod, and no admission policy (nothing to mark);
    // everything else as the defaults.
    let every = by_key(parse(&helm_template(&["scope=every-pod"])?)?)?;
    let args = muster_container(&every)?["args"].clone();
    ensure!(
        args.as_array()
            .is_some_and(|a| a.iter().any(|x| x == "--scope=every-pod")),
        "scope every-pod: muster's args {args}"
    );
    // schedulerNames: the policy's condition and muster's MUSTER_SCHEDULER_NAMES name them.
    let named = by_key(parse(&helm_template(&[
        "schedulerNames={default-scheduler,gpu-batch}",
    ])?)?)?;
    let cond = find(&named, "MutatingAdmissionPolicy//muster-gang-members")?["spec"]
        ["matchConditions"][0]
        .clone();
    ensure!(
        cond["name"] == "scheduler-calls-muster"
            && cond["expression"]
                == "object.spec.schedulerName in ['default-scheduler', 'gpu-batch']",
        "schedulerNames: the policy's condition {cond}"
    );
    let env = muster_container(&named)?["env"].clone();
    ensure!(
        env.as_array().is_some_and(|e| e.iter().any(|v| v
            == &json!({"name": "MUSTER_SCHEDULER_NAMES", "value": "default-scheduler,gpu-batch"}))),
        "schedulerNames: muster's env {env}"
    );
    ensure!(
        !muster_container(&default)?["env"]
            .as_array()
            .is_some_and(|e| e.iter().any(|v| v["name"] == "MUSTER_SCHEDULER_NAMES")),
        "the defaults set MUSTER_SCHEDULER_NAMES (Kustomize's base does not)"
    );

    let gone: BTreeSet<&String> = default.keys().filter(|k| !every.contains_key(*k)).collect();
    ensure!(
        gone == BTreeSet::from([
            &"MutatingAdmissionPolicy//muster-gang-members".to_string(),
            &"MutatingAdmissionPolicyBinding//muster-gang-members".to_string()
        ]) && every.len() + 2 == default.len(),
        "scope every-pod drops exactly the admission policy and its binding: dropped {gone:?}"
    );
    ensure!(
        !muster_container(&default)?["args"]
            .as_array()
            .is_some_and(|a| a
                .iter()
                .any(|x| x.as_str().is_some_and(|s| s.starts_with("--scope")))),
        "scope gang-members is muster's default: no --scope flag"
    );

    // Image, replicas, resources, timeouts, extra flags.
    let tuned = by_key(parse(&helm_template(&[
        "image.repository=registry.example/muster",
        "image.tag=0.2.0",
        "replicas=3",
        "resources.limits.memory=1Gi",
        "gangTimeout=5m",
        "gangBackoff=30s",
        "logLevel=muster=debug",
        "extraArgs={--cert-lifetime=2160h}",
    ])?)?)?;
    let d = find(&tuned, &format!("Deployment/{NS}/muster"))?;
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    ensure!(
        d["spec"]["replicas"] == 3 && c["image"] == "registry.example/muster:0.2.0",
        "replicas and image: {} {}",
        d["spec"]["replicas"],
        c["image"]
    );
    ensure!(
        c["resources"]["limits"]["memory"] == "1Gi" && c["resources"]["requests"]["cpu"] == "100m",
        "resources merge with the defaults: {}",
        c["resources"]
    );
    for want in [
        "--gang-timeout=5m",
        "--gang-backoff=30s",
        "--log-level=muster=debug",
        "--cert-lifetime=2160h",
    ] {
        ensure!(
            c["args"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x == want)),
            "{want} missing: {}",
            c["args"]
        );
    }
    // The node marker: published by default (no flag; the ClusterRole patches nodes/status);
    // publishNodeMarker=false renders the flag off and drops the rule, and so does scope
    // every-pod (nothing requests the marker there).
    let node_status_rule = |objs: &BTreeMap<String, Value>| -> Result<bool> {
        Ok(find(objs, "ClusterRole//muster")?["rules"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|r| r["resources"] == json!(["nodes/status"]) && r["verbs"] == json!(["patch"])))
    };
    let unpublished = by_key(parse(&helm_template(&["publishNodeMarker=false"])?)?)?;
    let marker_flag = |objs: &BTreeMap<String, Value>| -> Result<bool> {
        Ok(muster_container(objs)?["args"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x == "--publish-node-marker=false")))
    };
    ensure!(
        node_status_rule(&default)? && !marker_flag(&default)?,
        "the marker is published by default"
    );
    ensure!(
        !node_status_rule(&unpublished)? && marker_flag(&unpublished)?,
        "publishNodeMarker=false: the flag off and no nodes/status rule"
    );
    ensure!(
        !node_status_rule(&every)?,
        "scope every-pod: no nodes/status rule"
    );
    // Capacity buffers: off by default (no flag, no RBAC, whatever the timeout); on, both flags
    // and deploy/capacity-buffers-rbac.yaml's rules, bound to muster's ServiceAccount.
    let capacity_flag = |c: &Value| {
        c["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str())
            .filter(|a| a.starts_with("--capacity-buffer"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let off = by_key(parse(&helm_template(&["capacityBuffers.timeout=10m"])?)?)?;
    for objs in [&default, &off] {
        let flags = capacity_flag(&muster_container(objs)?);
        ensure!(
            flags.is_empty() && !objs.keys().any(|k| k.ends_with("/muster-capacity-buffers")),
            "capacity buffers are off by default: flags {flags:?}, objects {:?}",
            objs.keys().collect::<Vec<_>>()
        );
    }
    let on = by_key(parse(&helm_template(&[
        "capacityBuffers.enabled=true",
        "capacityBuffers.timeout=10m",
    ])?)?)?;
    let on_container = muster_container(&on)?;
    let flags = capacity_flag(&on_container);
    ensure!(
        flags == ["--capacity-buffers", "--capacity-buffer-timeout=10m"],
        "capacityBuffers.enabled with timeout 10m: muster's capacity flags {flags:?}"
    );
    let shipped = by_key(parse(&kustomize(CAPACITY_BUFFERS_RBAC)?)?)?;
    let role = find(&on, "ClusterRole//muster-capacity-buffers")?;
    let shipped_role = find(&shipped, "ClusterRole//muster-capacity-buffers")?;
    ensure!(
        role["rules"] == shipped_role["rules"],
        "the chart's capacity-buffers rules {} are not {CAPACITY_BUFFERS_RBAC}'s {}",
        role["rules"],
        shipped_role["rules"]
    );
    let in_gangs = by_key(parse(&helm_template(&[
        "capacityBuffers.enabled=true",
        "namespace.name=gangs",
    ])?)?)?;
    let binding = find(&in_gangs, "ClusterRoleBinding//muster-capacity-buffers")?;
    ensure!(
        binding["roleRef"]["name"] == "muster-capacity-buffers"
            && binding["subjects"]
                == json!([{"kind": "ServiceAccount", "name": "muster", "namespace": "gangs"}]),
        "the capacity-buffers binding in namespace gangs: {binding}"
    );
    let added: BTreeSet<&String> = on.keys().filter(|k| !default.contains_key(*k)).collect();
    ensure!(
        added
            == BTreeSet::from([
                &"ClusterRole//muster-capacity-buffers".to_string(),
                &"ClusterRoleBinding//muster-capacity-buffers".to_string()
            ]),
        "capacityBuffers.enabled adds exactly the ClusterRole and its binding: added {added:?}"
    );

    // Every flag the chart can pass is one this muster accepts.
    let help = Command::new(env!("CARGO_BIN_EXE_muster"))
        .arg("--help")
        .output()?;
    let help = String::from_utf8_lossy(&help.stdout);
    for a in c["args"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(
            muster_container(&every)?["args"]
                .as_array()
                .into_iter()
                .flatten(),
        )
        .chain(on_container["args"].as_array().into_iter().flatten())
    {
        let flag = a.as_str().unwrap_or("").split('=').next().unwrap_or("");
        ensure!(
            help.contains(flag),
            "the chart passes {flag}, unknown to muster --help"
        );
    }

    // Another namespace: nothing names muster-system, and the second scheduler calls muster there.
    let other = helm_template(&[
        "namespace.name=gangs",
        "schedulerMode=second-scheduler",
        "certificates=cert-manager",
    ])?;
    ensure!(
        !other.contains("muster-system"),
        "namespace.name=gangs still renders muster-system:\n{}",
        other
            .lines()
            .filter(|l| l.contains("muster-system"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let other = by_key(parse(&other)?)?;
    let config = find(&other, "ConfigMap/gangs/muster-scheduler-config")?["data"]["config.yaml"]
        .as_str()
        .context("config.yaml")?
        .to_string();
    ensure!(
        config.contains("urlPrefix: https://muster.gangs.svc:8888")
            && config.contains("resourceNamespace: gangs"),
        "the second scheduler's config in namespace gangs:\n{config}"
    );
    let serving = find(&other, "Certificate/gangs/muster-serving-cert")?;
    ensure!(
        serving["spec"]["dnsNames"]
            .as_array()
            .is_some_and(|n| n.iter().any(|x| x == "muster.gangs.svc")),
        "serving certificate for muster.gangs.svc: {}",
        serving["spec"]
    );
    let no_ns = by_key(parse(&helm_template(&["namespace.create=false"])?)?)?;
    ensure!(
        !no_ns.contains_key(&format!("Namespace//{NS}")) && no_ns.len() + 1 == default.len(),
        "namespace.create=false renders everything but the Namespace"
    );

    // Optional monitoring: off by default; on, a ServiceMonitor over both replicas and the
    // dashboard, the very file deploy/grafana-dashboard.json.
    ensure!(
        !default
            .keys()
            .any(|k| k.starts_with("ServiceMonitor/") || k.contains("grafana")),
        "ServiceMonitor and dashboard are off by default"
    );
    let mon = by_key(parse(&helm_template(&[
        "serviceMonitor.enabled=true",
        "serviceMonitor.labels.release=prom",
        "grafanaDashboard.enabled=true",
    ])?)?)?;
    let sm = find(&mon, &format!("ServiceMonitor/{NS}/muster"))?;
    let metrics = find(&mon, &format!("Service/{NS}/muster-metrics"))?;
    let deploy = find(&mon, &format!("Deployment/{NS}/muster"))?;
    ensure!(
        sm["metadata"]["labels"]["release"] == "prom",
        "ServiceMonitor labels: {}",
        sm["metadata"]["labels"]
    );
    let selected = sm["spec"]["selector"]["matchLabels"]
        .as_object()
        .context("ServiceMonitor selector")?;
    ensure!(
        selected
            .iter()
            .all(|(k, v)| metrics["metadata"]["labels"][k] == *v)
            && !selected
                .iter()
                .all(|(k, v)| find(&mon, &format!("Service/{NS}/muster"))
                    .is_ok_and(|s| s["metadata"]["labels"][k] == *v)),
        "the ServiceMonitor selects the metrics Service and not the leader's Service: {selected:?}"
    );
    ensure!(
        metrics["spec"]["selector"] == deploy["spec"]["selector"]["matchLabels"]
            && metrics["spec"]["clusterIP"] == "None"
            && sm["spec"]["endpoints"][0]["port"] == "ops"
            && metrics["spec"]["ports"][0]["targetPort"] == "ops",
        "the metrics Service lists every muster pod's ops port: {}",
        metrics["spec"]
    );
    let dash = find(&mon, &format!("ConfigMap/{NS}/muster-grafana-dashboard"))?;
    let shipped = fs::read_to_string(repo_root().join("deploy/grafana-dashboard.json"))?;
    ensure!(
        dash["data"]["muster.json"].as_str() == Some(shipped.as_str())
            && dash["metadata"]["labels"]["grafana_dashboard"] == "1",
        "the dashboard ConfigMap is not deploy/grafana-dashboard.json with the sidecar's label; \
         run: cp deploy/grafana-dashboard.json deploy/chart/files/"
    );
    Ok(())
}

/// The chart's copies of files outside it (Helm reads no file outside the chart).
#[test]
fn chart_file_copies_are_byte_identical() -> Result<()> {
    let root = repo_root();
    for (original, copy) in [
        (
            "scheduler-config/muster-second-scheduler.yaml",
            "deploy/chart/files/muster-second-scheduler.yaml",
        ),
        (
            "deploy/grafana-dashboard.json",
            "deploy/chart/files/grafana-dashboard.json",
        ),
        (
            "deploy/second-scheduler/gang-nodes-policy.yaml",
            "deploy/chart/files/gang-nodes-policy.yaml",
        ),
    ] {
        ensure!(
            fs::read(root.join(original))? == fs::read(root.join(copy))?,
            "{copy} differs from {original}; run: cp {original} {copy}"
        );
    }
    Ok(())
}

/// Bad values: helm refuses them (the values schema) naming the field, and renders nothing.
#[test]
fn bad_values_are_refused_with_the_field_named() -> Result<()> {
    let _t = Timer("helm bad values", Instant::now());
    for (set, field) in [
        ("scope=some-pods", "at '/scope': value must be one of"),
        ("schedulerMode=third-scheduler", "at '/schedulerMode'"),
        ("certificates=vault", "at '/certificates'"),
        (
            "gangTimeout=soon",
            "at '/gangTimeout': 'soon' does not match",
        ),
        ("replicas=0", "at '/replicas'"),
        ("namespace.name=Muster_System", "at '/namespace/name'"),
        ("replica=3", "additional properties 'replica' not allowed"),
        ("extraArgs={gang-timeout=5s}", "at '/extraArgs/0'"),
        (
            "capacityBuffers.timeout=soon",
            "at '/capacityBuffers/timeout': 'soon' does not match",
        ),
        (
            "capacityBuffers.timeout=0s",
            "at '/capacityBuffers/timeout': '0s' does not match",
        ),
        (
            "capacityBuffers.enabled=yes",
            "at '/capacityBuffers/enabled': got string, want boolean",
        ),
        ("schedulerNames={volcano sched}", "at '/schedulerNames/0'"),
    ] {
        let mut args = vec!["template", "muster", CHART, "--kube-version", K8S_VERSION];
        args.extend(["--set", set]);
        let out = helm(&args)?;
        ensure!(
            !out.ok && out.stdout.trim().is_empty(),
            "--set {set} was accepted:\n{}",
            out.stdout
        );
        ensure!(
            out.stderr
                .contains("values don't meet the specifications of the schema")
                && out.stderr.contains(field),
            "--set {set}: the error does not say {field:?}:\n{}",
            out.stderr
        );
    }
    // The admission policy's API (admissionregistration.k8s.io/v1 MutatingAdmissionPolicy) is
    // served from 1.36: an older cluster is refused by the chart's kubeVersion.
    let out = helm(&["template", "muster", CHART, "--kube-version", "v1.35.4"])?;
    ensure!(
        !out.ok && out.stderr.contains("incompatible with Kubernetes v1.35.4"),
        "Kubernetes 1.35 was not refused:\n{}",
        out.stderr
    );
    Ok(())
}

/// Server-side apply (dry-run or for real); fails on any error and on any warning (Pod Security,
/// deprecated APIs, unknown fields).
fn apply(kc: &Path, what: &str, manifests: &str, dry_run: bool) -> Result<Vec<Value>> {
    let mut args = vec![
        "apply",
        "--server-side",
        "--field-manager=muster-e2e-helm",
        "-o",
        "json",
        "-f",
        "-",
    ];
    if dry_run {
        args.push("--dry-run=server");
    }
    let out = kubectl(Some(kc), &args, Some(manifests))?;
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
        .with_context(|| format!("{mode} of {what}: output is not JSON"))?;
    Ok(match v["kind"].as_str() {
        Some("List") => v["items"].as_array().cloned().unwrap_or_default(),
        _ => vec![v],
    })
}

/// Polls until the API server serves every group/version in `gvs` with its resource.
async fn wait_served(kc: &Path, gvs: &[(&str, &str)]) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    for (gv, resource) in gvs {
        loop {
            let out = kubectl(Some(kc), &["get", "--raw", &format!("/apis/{gv}")], None)?;
            if out.ok && out.stdout.contains(&format!("\"{resource}\"")) {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "{gv} {resource} not served after 30s: {}",
                    out.stderr.trim()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(())
}

#[tokio::test]
async fn every_chart_render_passes_server_side_dry_run_and_helm_installs_it() -> Result<()> {
    let _t = Timer("helm dry-run", Instant::now());
    // Rendered first: a chart that does not render fails before a control plane is started.
    let renders: Vec<(String, String)> = [
        &[][..],
        &["schedulerMode=second-scheduler"],
        &[
            "schedulerMode=second-scheduler",
            "certificates=cert-manager",
        ],
        &[
            "scope=every-pod",
            "capacityBuffers.enabled=true",
            "serviceMonitor.enabled=true",
            "grafanaDashboard.enabled=true",
            "networkPolicy.extraIngress[0].from[0].ipBlock.cidr=10.0.0.0/24",
            "networkPolicy.extraIngress[0].ports[0].port=8888",
            "networkPolicy.extraIngress[0].ports[0].protocol=TCP",
        ],
        &[
            "namespace.name=gangs",
            "schedulerMode=second-scheduler",
            "certificates=cert-manager",
        ],
    ]
    .iter()
    .map(|sets| Ok((format!("helm template {sets:?}"), helm_template(sets)?)))
    .collect::<Result<_>>()?;

    let cp = ControlPlane::start(ControlPlaneOptions::default()).await?;
    let kc = cp.kubeconfig_path().to_path_buf();
    let crds = [
        "cert-manager-stand-in.yaml",
        "prometheus-servicemonitors-stand-in.yaml",
    ]
    .iter()
    .map(|f| fs::read_to_string(repo_root().join("tests/crds").join(f)))
    .collect::<std::io::Result<Vec<_>>>()?
    .join("\n---\n");
    apply(&kc, "stand-in CRDs from tests/crds/", &crds, false)?;
    wait_served(
        &kc,
        &[
            ("cert-manager.io/v1", "certificates"),
            ("cert-manager.io/v1", "issuers"),
            ("monitoring.coreos.com/v1", "servicemonitors"),
        ],
    )
    .await?;

    for (what, yaml) in &renders {
        let objs = by_key(parse(yaml)?)?;
        // The namespace for real first (namespaced objects cannot be dry-run into a missing one).
        let ns: Vec<&Value> = objs.values().filter(|o| o["kind"] == "Namespace").collect();
        ensure!(ns.len() == 1, "{what}: renders {} Namespaces", ns.len());
        apply(
            &kc,
            &format!("{what}: Namespace"),
            &ns[0].to_string(),
            false,
        )?;
        let judged = apply(&kc, what, yaml, true)?;
        let judged: BTreeSet<String> = judged.iter().map(key).collect();
        let rendered: BTreeSet<String> = objs.keys().cloned().collect();
        ensure!(
            judged == rendered,
            "{what}: the API server judged {judged:?}, the chart rendered {rendered:?}"
        );
        eprintln!("{what}: {} objects pass server-side dry-run", judged.len());
    }

    // `helm install` as deploy/README.md says (the chart creates its namespace; the release is
    // recorded in the kubeconfig's namespace), into a namespace nothing above created, then
    // `helm uninstall` takes the cluster-scoped objects with it.
    let install_ns = "muster-helm";
    let kc_flag = format!("--kubeconfig={}", kc.display());
    let out = helm(&[
        "install",
        "muster",
        CHART,
        &kc_flag,
        "--set",
        &format!("namespace.name={install_ns}"),
        "--set",
        "schedulerMode=second-scheduler",
    ])?;
    ensure!(
        out.ok && out.stdout.contains("STATUS: deployed"),
        "helm install failed:\n{}\n{}",
        out.stdout,
        out.stderr
    );
    ensure!(
        out.stdout.contains(&format!(
            "kubectl -n {install_ns} rollout status deploy/muster"
        )),
        "helm install prints no NOTES with the namespace:\n{}",
        out.stdout
    );
    for (kind, ns, name) in [
        ("namespace", "", install_ns),
        ("deployment", install_ns, "muster"),
        ("deployment", install_ns, "muster-scheduler"),
        ("configmap", install_ns, "muster-scheduler-config"),
        ("clusterrole", "", "muster"),
        ("mutatingadmissionpolicy", "", "muster-gang-members"),
    ] {
        let mut args = vec!["get", kind, name, "-o", "name"];
        if !ns.is_empty() {
            args.extend(["-n", ns]);
        }
        let got = kubectl(Some(&kc), &args, None)?;
        ensure!(
            got.ok,
            "after helm install: no {kind} {ns}/{name}: {}",
            got.stderr.trim()
        );
    }
    let out = helm(&["uninstall", "muster", &kc_flag])?;
    ensure!(out.ok, "helm uninstall failed:\n{}", out.stderr);
    let got = kubectl(
        Some(&kc),
        &[
            "get",
            "clusterrole",
            "muster",
            "--ignore-not-found",
            "-o",
            "name",
        ],
        None,
    )?;
    ensure!(
        got.ok && got.stdout.trim().is_empty(),
        "after helm uninstall the ClusterRole muster is still there: {}{}",
        got.stdout,
        got.stderr
    );
    Ok(())
}
