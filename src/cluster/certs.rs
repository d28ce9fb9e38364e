//! `--self-managed-certs`: keeps the CA, muster's serving certificate and kube-scheduler's client
//! certificate in Secrets of muster's namespace (the approach Kubernetes webhooks commonly take),
//! and writes the serving pair and the CA to `--certs-dir` for the HTTPS listener, which re-reads
//! them when they change. What to issue and when is decided in [`crate::pki`]; this module only
//! reads and writes.
//!
//! Secrets are `kubernetes.io/tls` with `tls.crt`, `tls.key` and (leaves) `ca.crt` — the shape
//! cert-manager writes, so the second scheduler mounts the client Secret the same way in both
//! setups. muster only touches Secrets labelled as its own, and updates with the resourceVersion
//! it read, so a concurrent writer makes it retry instead of overwriting.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kube::api::{Api, PostParams};
use kube::Client;
use tracing::{info, warn};

use crate::pki::{self, Leaf, Pem, Renewal, Stored};

const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "muster");
const SPEC: &str = "muster.dev/certificate-spec";
const ISSUED_AT: &str = "muster.dev/issued-at";
const NOT_AFTER: &str = "muster.dev/not-after";
const CA_CRT: &str = "ca.crt";
const TLS_CRT: &str = "tls.crt";
const TLS_KEY: &str = "tls.key";

/// Where the certificates live and what they are for.
#[derive(Clone, Debug)]
pub struct CertsConfig {
    pub namespace: String,
    pub ca_secret: String,
    pub serving_secret: String,
    pub client_secret: String,
    pub serving_hosts: Vec<String>,
    pub client_common_name: String,
    pub lifetime: Duration,
    pub dir: PathBuf,
}

impl CertsConfig {
    /// The files the HTTPS listener serves (`--tls-cert-file`, `--tls-key-file`,
    /// `--tls-client-ca-file` in effect).
    pub fn tls_files(&self) -> crate::tls::TlsFiles {
        crate::tls::TlsFiles {
            cert: self.dir.join(TLS_CRT),
            key: self.dir.join(TLS_KEY),
            client_ca: Some(self.dir.join(CA_CRT)),
        }
    }
}

fn text(s: &Secret, key: &str) -> Option<String> {
    let b = s.data.as_ref()?.get(key)?;
    String::from_utf8(b.0.clone()).ok()
}

fn annotation<'a>(s: &'a Secret, key: &str) -> Option<&'a str> {
    s.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn ours(s: &Secret) -> bool {
    s.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_BY.0))
        .is_some_and(|v| v == MANAGED_BY.1)
}

/// What a leaf Secret says about its certificate; `None` when anything is missing or unreadable
/// (then it is issued again).
fn stored(s: &Secret) -> Option<Stored> {
    text(s, TLS_CRT)?;
    text(s, TLS_KEY)?;
    let parse = |k| humantime::parse_rfc3339(annotation(s, k)?).ok();
    Some(Stored {
        spec: annotation(s, SPEC)?.to_string(),
        ca_cert: text(s, CA_CRT)?,
        issued_at: parse(ISSUED_AT)?,
        not_after: parse(NOT_AFTER)?,
    })
}

fn secret(
    name: &str,
    namespace: &str,
    pem: &Pem,
    ca_cert: Option<&str>,
    annotations: BTreeMap<String, String>,
) -> Secret {
    let mut data = BTreeMap::from([
        (
            TLS_CRT.to_string(),
            ByteString(pem.cert.clone().into_bytes()),
        ),
        (
            TLS_KEY.to_string(),
            ByteString(pem.key.clone().into_bytes()),
        ),
    ]);
    if let Some(ca) = ca_cert {
        data.insert(CA_CRT.to_string(), ByteString(ca.as_bytes().to_vec()));
    }
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([
                (MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string()),
                ("app.kubernetes.io/part-of".into(), "muster".into()),
            ])),
            annotations: Some(annotations),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(data),
        ..Default::default()
    }
}

/// Reads a Secret; refuses one muster did not make (e.g. cert-manager's, when both setups were
/// applied), so it never overwrites someone else's certificate.
async fn get(api: &Api<Secret>, ns: &str, name: &str) -> anyhow::Result<Option<Secret>> {
    let s = api
        .get_opt(name)
        .await
        .with_context(|| format!("reading Secret {ns}/{name}"))?;
    if let Some(s) = &s {
        if !ours(s) {
            bail!(
                "Secret {ns}/{name} exists but is not labelled {}={}: it belongs to someone else \
                 (cert-manager?). Remove it, or drop --self-managed-certs and mount it instead",
                MANAGED_BY.0,
                MANAGED_BY.1
            );
        }
    }
    Ok(s)
}

/// Creates `new`, or replaces `old` with it (optimistic concurrency on old's resourceVersion).
async fn put(api: &Api<Secret>, old: Option<Secret>, mut new: Secret) -> anyhow::Result<()> {
    let name = new.metadata.name.clone().unwrap_or_default();
    let ns = new.metadata.namespace.clone().unwrap_or_default();
    match old {
        None => {
            api.create(&PostParams::default(), &new)
                .await
                .with_context(|| format!("creating Secret {ns}/{name}"))?;
        }
        Some(old) => {
            new.metadata.resource_version = old.metadata.resource_version;
            api.replace(&name, &PostParams::default(), &new)
                .await
                .with_context(|| format!("updating Secret {ns}/{name}"))?;
        }
    }
    Ok(())
}

/// The CA, created when there is none.
async fn ensure_ca(api: &Api<Secret>, cfg: &CertsConfig) -> anyhow::Result<Pem> {
    let (ns, name) = (&cfg.namespace, &cfg.ca_secret);
    if let Some(s) = get(api, ns, name).await? {
        let (Some(cert), Some(key)) = (text(&s, TLS_CRT), text(&s, TLS_KEY)) else {
            bail!("Secret {ns}/{name} has no tls.crt/tls.key; delete it to make a new CA");
        };
        return Ok(Pem { cert, key });
    }
    let now = SystemTime::now();
    let ca = pki::new_ca(now)?;
    let annotations = BTreeMap::from([
        (
            ISSUED_AT.to_string(),
            humantime::format_rfc3339_seconds(now).to_string(),
        ),
        (
            NOT_AFTER.to_string(),
            humantime::format_rfc3339_seconds(now + pki::CA_LIFETIME).to_string(),
        ),
    ]);
    put(api, None, secret(name, ns, &ca, None, annotations)).await?;
    info!(secret = %format!("{ns}/{name}"), "created the CA");
    Ok(ca)
}

/// Issues the leaf in Secret `name` again when [`pki::renewal`] says so; returns its contents.
async fn ensure_leaf(
    api: &Api<Secret>,
    cfg: &CertsConfig,
    ca: &Pem,
    name: &str,
    leaf: &Leaf,
) -> anyhow::Result<Pem> {
    let ns = &cfg.namespace;
    let old = get(api, ns, name).await?;
    let now = SystemTime::now();
    let reason = match renewal_of(old.as_ref(), leaf, ca, now) {
        Renewal::Keep { .. } => {
            let s = old.as_ref().expect("kept implies stored");
            return Ok(Pem {
                cert: text(s, TLS_CRT).unwrap_or_default(),
                key: text(s, TLS_KEY).unwrap_or_default(),
            });
        }
        Renewal::Issue(reason) => reason,
    };
    let pem = pki::issue(ca, leaf, now, cfg.lifetime)?;
    let not_after = now + cfg.lifetime;
    let annotations = BTreeMap::from([
        (SPEC.to_string(), leaf.spec()),
        (
            ISSUED_AT.to_string(),
            humantime::format_rfc3339_seconds(now).to_string(),
        ),
        (
            NOT_AFTER.to_string(),
            humantime::format_rfc3339_seconds(not_after).to_string(),
        ),
    ]);
    put(
        api,
        old,
        secret(name, ns, &pem, Some(&ca.cert), annotations),
    )
    .await?;
    info!(
        secret = %format!("{ns}/{name}"),
        %reason,
        expires = %humantime::format_rfc3339_seconds(not_after),
        "issued a certificate"
    );
    Ok(pem)
}

fn renewal_of(old: Option<&Secret>, leaf: &Leaf, ca: &Pem, now: SystemTime) -> Renewal {
    let s = old.and_then(stored);
    pki::renewal(s.as_ref(), leaf, &ca.cert, now)
}

/// Writes `contents` to `path` unless it already holds them: a temporary file renamed over it,
/// so a reader never sees half a file. Returns whether it wrote.
fn write_if_changed(path: &Path, contents: &str, mode: u32) -> anyhow::Result<bool> {
    if std::fs::read_to_string(path).is_ok_and(|c| c == contents) {
        return Ok(false);
    }
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .with_context(|| format!("--certs-dir: cannot write {}", tmp.display()))?;
    f.write_all(contents.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("--certs-dir: cannot replace {}", path.display()))?;
    Ok(true)
}

/// One pass: the CA and both leaves exist and are current in their Secrets, and the serving pair
/// and CA are on disk. Returns whether the files changed.
pub async fn ensure(client: &Client, cfg: &CertsConfig) -> anyhow::Result<bool> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &cfg.namespace);
    let ca = ensure_ca(&api, cfg).await?;
    let serving = Leaf::Serving {
        hosts: cfg.serving_hosts.clone(),
    };
    let client_leaf = Leaf::Client {
        common_name: cfg.client_common_name.clone(),
    };
    let pem = ensure_leaf(&api, cfg, &ca, &cfg.serving_secret, &serving).await?;
    ensure_leaf(&api, cfg, &ca, &cfg.client_secret, &client_leaf).await?;

    std::fs::create_dir_all(&cfg.dir)
        .with_context(|| format!("--certs-dir {}: cannot create it", cfg.dir.display()))?;
    let files = cfg.tls_files();
    // Key before certificate: the listener reloads when either changes and keeps the old pair
    // while the two do not match.
    let mut changed = write_if_changed(&files.key, &pem.key, 0o600)?;
    changed |= write_if_changed(&files.cert, &pem.cert, 0o644)?;
    changed |= write_if_changed(&cfg.dir.join(CA_CRT), &ca.cert, 0o644)?;
    Ok(changed)
}

/// Runs [`ensure`] every [`pki::check_interval`] until the task is dropped; failures (API server
/// away, a conflicting writer) are logged and retried, the current files stay served.
pub async fn keep_current(client: Client, cfg: CertsConfig) {
    let mut tick = tokio::time::interval(pki::check_interval(cfg.lifetime));
    tick.tick().await;
    loop {
        tick.tick().await;
        match ensure(&client, &cfg).await {
            Ok(true) => info!(dir = %cfg.dir.display(), "wrote the renewed serving certificate"),
            Ok(false) => {}
            Err(e) => warn!(error = %format!("{e:#}"), "certificate check failed; will retry"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf() -> Leaf {
        Leaf::Client {
            common_name: "muster-scheduler".into(),
        }
    }

    fn stored_secret(ca: &Pem, not_after: SystemTime, issued: SystemTime) -> Secret {
        let pem = Pem {
            cert: "C".into(),
            key: "K".into(),
        };
        let annotations = BTreeMap::from([
            (SPEC.to_string(), leaf().spec()),
            (
                ISSUED_AT.to_string(),
                humantime::format_rfc3339_seconds(issued).to_string(),
            ),
            (
                NOT_AFTER.to_string(),
                humantime::format_rfc3339_seconds(not_after).to_string(),
            ),
        ]);
        secret("s", "ns", &pem, Some(&ca.cert), annotations)
    }

    #[test]
    fn a_secret_written_by_muster_reads_back_as_stored() {
        let ca = Pem {
            cert: "CA".into(),
            key: "CAK".into(),
        };
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let s = stored_secret(&ca, t0 + Duration::from_secs(90), t0);
        assert!(ours(&s));
        assert_eq!(s.type_.as_deref(), Some("kubernetes.io/tls"));
        assert_eq!(
            stored(&s),
            Some(Stored {
                spec: leaf().spec(),
                ca_cert: "CA".into(),
                issued_at: t0,
                not_after: t0 + Duration::from_secs(90),
            })
        );
        assert!(matches!(
            renewal_of(Some(&s), &leaf(), &ca, t0 + Duration::from_secs(59)),
            Renewal::Keep { .. }
        ));
        assert!(matches!(
            renewal_of(Some(&s), &leaf(), &ca, t0 + Duration::from_secs(60)),
            Renewal::Issue(_)
        ));
    }

    #[test]
    fn a_secret_missing_anything_is_issued_again() {
        let ca = Pem {
            cert: "CA".into(),
            key: "CAK".into(),
        };
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let full = stored_secret(&ca, t0 + Duration::from_secs(90), t0);
        for key in [TLS_CRT, TLS_KEY, CA_CRT] {
            let mut s = full.clone();
            s.data.as_mut().unwrap().remove(key);
            assert_eq!(stored(&s), None, "without {key}");
        }
        for key in [SPEC, ISSUED_AT, NOT_AFTER] {
            let mut s = full.clone();
            s.metadata.annotations.as_mut().unwrap().remove(key);
            assert_eq!(stored(&s), None, "without {key}");
        }
        let mut s = full.clone();
        s.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(NOT_AFTER.into(), "tomorrow".into());
        assert_eq!(stored(&s), None, "unparsable date");
        let mut s = full;
        s.metadata.labels = None;
        assert!(!ours(&s), "no managed-by label: not muster's");
    }

    #[test]
    fn files_are_replaced_only_when_they_change() {
        let dir = std::env::temp_dir().join(format!("muster-certs-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("tls.key");
        assert!(write_if_changed(&f, "a", 0o600).unwrap());
        assert!(!write_if_changed(&f, "a", 0o600).unwrap());
        assert!(write_if_changed(&f, "b", 0o600).unwrap());
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "b");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
