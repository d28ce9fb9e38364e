//! The webhooks of a controller run as a local process beside a test's control plane (JobSet,
//! Kueue, Kubeflow Trainer: [`crate::jobset`], [`crate::kueue`], [`crate::trainer`]), served on
//! loopback: in a cluster each controller's install points its webhook configurations at a
//! Service and has its certificate made for `<service>.<namespace>.svc`, neither of which a
//! kube-apiserver without nodes can reach. Here instead:
//! - [`LoopbackServing::prepare`]: a CA of the harness's own ([`crate::tls::Ca`]) and a serving
//!   certificate for 127.0.0.1 in the directory the controller's webhook server reads
//!   (`tls.crt`, `tls.key`: controller-runtime's names), and a free port for it;
//! - [`configurations`]: the mutating and validating webhook configurations of its install for
//!   the webhooks it serves, each `clientConfig` the URL `https://127.0.0.1:<port><path>` with
//!   that CA as `caBundle`, `failurePolicy: Fail`, each webhook's selector as its install's
//!   patches set it;
//! - [`LoopbackServing::register`]: creates them (a configuration with no webhook is not made);
//! - [`ensure_paths`]: each path served is one the controller's own webhook manifest names, so a
//!   version whose paths moved fails at start instead of silently admitting everything.
//!
//! Each controller's module keeps what is its own: its list of webhooks, its configuration
//! names, how it is started, and how the harness knows the API server calls it (a dry-run
//! object its webhook changes or refuses).

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{ensure, Context, Result};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::ByteString;
use kube::api::{Api, PostParams};
use kube::Client;
use serde_json::{json, Value};

use crate::process::free_port;
use crate::tls::{Ca, Usage};

/// Which objects a webhook is called for, beyond its rule (as each install's patches set it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selector {
    /// Every object its rule matches.
    All,
    /// Only objects with this label (`objectSelector`, `Exists`).
    ObjectLabelExists(&'static str),
    /// Only objects in namespaces with this label and value (`namespaceSelector`).
    NamespaceLabel(&'static str, &'static str),
}

/// One webhook a controller serves.
#[derive(Debug, Clone, Copy)]
pub struct Webhook {
    pub name: &'static str,
    pub mutating: bool,
    pub path: &'static str,
    /// `(apiGroup, version, resources, operations)` of its rule.
    pub rule: (
        &'static str,
        &'static str,
        &'static [&'static str],
        &'static [&'static str],
    ),
    pub selector: Selector,
}

/// The names of a controller's two webhook configurations, as its install names them.
#[derive(Debug, Clone, Copy)]
pub struct ConfigurationNames {
    pub mutating: &'static str,
    pub validating: &'static str,
}

/// The mutating and validating webhook configurations for `webhooks`, each webhook's
/// `clientConfig` the URL `https://127.0.0.1:<port><path>` with `ca_pem` as its CA bundle.
pub fn configurations(
    names: ConfigurationNames,
    webhooks: &[Webhook],
    port: u16,
    ca_pem: &[u8],
) -> Result<(MutatingWebhookConfiguration, ValidatingWebhookConfiguration)> {
    let entry = |w: &Webhook| {
        let (group, version, resources, operations) = w.rule;
        let mut e = json!({
            "name": w.name,
            "admissionReviewVersions": ["v1"],
            "clientConfig": {
                "url": format!("https://127.0.0.1:{port}{}", w.path),
                "caBundle": ByteString(ca_pem.to_vec()),
            },
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "rules": [{
                "apiGroups": [group],
                "apiVersions": [version],
                "resources": resources,
                "operations": operations,
            }],
        });
        match w.selector {
            Selector::All => {}
            Selector::ObjectLabelExists(key) => {
                e["objectSelector"] =
                    json!({"matchExpressions": [{"key": key, "operator": "Exists"}]});
            }
            Selector::NamespaceLabel(k, v) => {
                e["namespaceSelector"] = json!({"matchLabels": {k: v}});
            }
        }
        e
    };
    let of = |mutating: bool| -> Vec<Value> {
        webhooks
            .iter()
            .filter(|w| w.mutating == mutating)
            .map(entry)
            .collect()
    };
    let m: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": names.mutating},
        "webhooks": of(true),
    }))?;
    let v: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": names.validating},
        "webhooks": of(false),
    }))?;
    Ok((m, v))
}

/// Fails unless the controller's webhook manifest (`manifests`) names every path of `webhooks`.
pub fn ensure_paths(manifests: &Path, webhooks: &[Webhook]) -> Result<()> {
    let text = fs::read_to_string(manifests)
        .with_context(|| format!("reading {}", manifests.display()))?;
    for w in webhooks {
        ensure!(
            text.contains(&format!("path: {}", w.path)),
            "{} does not name the webhook path {}",
            manifests.display(),
            w.path
        );
    }
    Ok(())
}

/// A controller's webhook server on loopback: where its certificate is and which port it
/// listens on.
#[derive(Debug, Clone)]
pub struct LoopbackServing {
    pub ca: Ca,
    /// The directory holding `tls.crt` and `tls.key` (and the CA's own files).
    pub cert_dir: PathBuf,
    pub port: u16,
}

impl LoopbackServing {
    /// Makes CA `ca_name` in `cert_dir` and a serving certificate for 127.0.0.1 there as
    /// `tls.crt`/`tls.key` (what controller-runtime's webhook server reads), and picks a free
    /// port for the server.
    pub fn prepare(cert_dir: &Path, ca_name: &str) -> Result<Self> {
        let ca = Ca::generate(cert_dir, ca_name)?;
        ca.issue("tls", Usage::Server)?;
        Ok(Self {
            ca,
            cert_dir: cert_dir.to_path_buf(),
            port: free_port()?,
        })
    }

    /// The CA certificate (PEM): the configurations' `caBundle`.
    pub fn ca_pem(&self) -> Result<Vec<u8>> {
        fs::read(&self.ca.cert).with_context(|| format!("reading {}", self.ca.cert.display()))
    }

    /// Creates the webhook configurations of `webhooks` ([`configurations`]) pointing at this
    /// server; `who` names the controller in errors. A configuration with no webhook is left out.
    pub async fn register(
        &self,
        client: &Client,
        who: &str,
        names: ConfigurationNames,
        webhooks: &[Webhook],
    ) -> Result<()> {
        let (m, v) = configurations(names, webhooks, self.port, &self.ca_pem()?)?;
        if m.webhooks.as_ref().is_some_and(|w| !w.is_empty()) {
            Api::<MutatingWebhookConfiguration>::all(client.clone())
                .create(&PostParams::default(), &m)
                .await
                .with_context(|| format!("creating {who}'s MutatingWebhookConfiguration"))?;
        }
        if v.webhooks.as_ref().is_some_and(|w| !w.is_empty()) {
            Api::<ValidatingWebhookConfiguration>::all(client.clone())
                .create(&PostParams::default(), &v)
                .await
                .with_context(|| format!("creating {who}'s ValidatingWebhookConfiguration"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOOKS: [Webhook; 3] = [
        Webhook {
            name: "m.example",
            mutating: true,
            path: "/mutate",
            rule: ("example.com", "v1", &["things"], &["CREATE"]),
            selector: Selector::All,
        },
        Webhook {
            name: "v.example",
            mutating: false,
            path: "/validate",
            rule: ("", "v1", &["pods"], &["CREATE", "UPDATE"]),
            selector: Selector::ObjectLabelExists("example.com/made-by"),
        },
        Webhook {
            name: "v2.example",
            mutating: false,
            path: "/validate-2",
            rule: ("", "v1", &["pods"], &["CREATE"]),
            selector: Selector::NamespaceLabel("managed", "true"),
        },
    ];
    const NAMES: ConfigurationNames = ConfigurationNames {
        mutating: "m-config",
        validating: "v-config",
    };

    #[test]
    fn each_webhook_points_at_loopback_with_the_ca_and_its_selector() {
        let (m, v) = configurations(NAMES, &HOOKS, 9443, b"PEM").unwrap();
        let m = serde_json::to_value(&m).unwrap();
        let v = serde_json::to_value(&v).unwrap();
        assert_eq!(m["metadata"]["name"], "m-config");
        assert_eq!(v["metadata"]["name"], "v-config");
        assert_eq!(m["webhooks"].as_array().unwrap().len(), 1);
        assert_eq!(v["webhooks"].as_array().unwrap().len(), 2);
        assert_eq!(
            m["webhooks"][0]["clientConfig"]["url"],
            "https://127.0.0.1:9443/mutate"
        );
        // base64 of "PEM"
        assert_eq!(m["webhooks"][0]["clientConfig"]["caBundle"], "UEVN");
        assert_eq!(v["webhooks"][1]["clientConfig"]["caBundle"], "UEVN");
        assert_eq!(m["webhooks"][0]["failurePolicy"], "Fail");
        assert!(m["webhooks"][0].get("objectSelector").is_none());
        assert!(m["webhooks"][0].get("namespaceSelector").is_none());
        assert_eq!(
            v["webhooks"][0]["objectSelector"]["matchExpressions"][0],
            json!({"key": "example.com/made-by", "operator": "Exists"})
        );
        assert_eq!(
            v["webhooks"][1]["namespaceSelector"]["matchLabels"]["managed"],
            "true"
        );
        assert_eq!(
            v["webhooks"][0]["rules"][0]["operations"],
            json!(["CREATE", "UPDATE"])
        );
    }

    #[test]
    fn a_manifest_missing_a_path_is_refused() {
        let dir = std::env::temp_dir().join(format!("webhooks-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let f = dir.join("manifests.yaml");
        fs::write(&f, "path: /mutate\npath: /validate\npath: /validate-2\n").unwrap();
        ensure_paths(&f, &HOOKS).unwrap();
        fs::write(&f, "path: /mutate\n").unwrap();
        let e = ensure_paths(&f, &HOOKS).unwrap_err().to_string();
        assert!(e.contains("/validate"), "{e}");
        let _ = fs::remove_dir_all(&dir);
    }
}
