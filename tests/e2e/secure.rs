//! End-to-end: muster as shipped in `deploy/` — two listeners (`--ops-listen-addr`) and
//! `--self-managed-certs` — against a real etcd + kube-apiserver + stock kube-scheduler.
//!
//! muster creates its CA, serving certificate and kube-scheduler's client certificate in Secrets
//! of `muster-system`; the test hands kube-scheduler the client Secret's files (what the second
//! scheduler's Secret volume does in a pod) and shows: callers without the client certificate are
//! refused on the verbs and on `/gangs`; probes and metrics answer on the plain port (and only
//! there); kube-scheduler places gangs; the short-lived certificates are renewed in their
//! Secrets, muster serves the new one, and kube-scheduler keeps connecting with the renewed
//! client certificate once the first one has expired (muster is restarted so every connection
//! is a new handshake, and it reuses its CA from the Secret).
//!
//! Waiting is polling with deadlines.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use k8s_openapi::api::core::v1::Secret;
use muster_harness::k8s::{self, KeyScheme};
use muster_harness::process::{free_port, http_get, tail};
use muster_harness::tls::{curl, CertPair, CurlResult, ExtenderTls, HttpsClient};
use muster_harness::{
    wait_for, ControlPlane, ControlPlaneOptions, NodeShape, PodBuilder, Progress, SchedulerOptions,
    Timer,
};

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");
const NS: &str = "muster-system";
const CA_SECRET: &str = "muster-ca";
const SERVING_SECRET: &str = "muster-serving-cert";
const CLIENT_SECRET: &str = "muster-scheduler-client-cert";
/// Short enough to see a renewal (after two thirds, 20 s) and an expiry within the test: the
/// shortest `--cert-lifetime` muster takes.
const LIFETIME: Duration = Duration::from_secs(30);
const READY: Duration = Duration::from_secs(60);
const PLACE: Duration = Duration::from_secs(60);

/// A muster child process; killed on drop.
struct Running {
    child: Child,
    log: PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Ports {
    verbs: u16,
    ops: u16,
}

/// Starts muster as deploy/deployment.yaml does (self-managed certificates, two listeners), for
/// 127.0.0.1, and waits for /readyz on the plain port.
async fn start_muster(cp: &ControlPlane, ports: &Ports, certs_dir: &Path) -> Result<Running> {
    let log = cp.dir().join("muster.log");
    let out = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)?;
    let child = Command::new(MUSTER)
        .arg(format!("--listen-addr=127.0.0.1:{}", ports.verbs))
        .arg(format!("--ops-listen-addr=127.0.0.1:{}", ports.ops))
        .arg(format!("--kubeconfig={}", cp.kubeconfig_path().display()))
        .arg("--self-managed-certs")
        .arg(format!("--certs-namespace={NS}"))
        .arg(format!("--certs-dir={}", certs_dir.display()))
        .arg("--serving-cert-hosts=127.0.0.1,localhost")
        .arg(format!("--cert-lifetime={}s", LIFETIME.as_secs()))
        .env_remove("KUBECONFIG")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .context("starting muster")?;
    let mut m = Running { child, log };
    let ops = ports.ops;
    wait_for("muster's /readyz on the plain port", READY, || {
        let exited = m.child.try_wait();
        let log = m.log.clone();
        async move {
            if let Ok(Some(s)) = exited {
                bail!("muster exited ({s}):\n{}", tail(&log, 30));
            }
            Ok(
                match http_get(ops, "/readyz", Duration::from_secs(2)).await {
                    Ok((200, _)) => Progress::Done(()),
                    Ok((code, body)) => Progress::NotYet(format!("HTTP {code} {}", body.trim())),
                    Err(e) => Progress::NotYet(e.to_string()),
                },
            )
        }
    })
    .await?;
    Ok(m)
}

async fn secret(client: &kube::Client, name: &str) -> Result<Secret> {
    let api: kube::Api<Secret> = kube::Api::namespaced(client.clone(), NS);
    api.get(name)
        .await
        .with_context(|| format!("Secret {NS}/{name}"))
}

fn field(s: &Secret, key: &str) -> Result<String> {
    let b = s
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .with_context(|| format!("Secret {:?} has no {key}", s.metadata.name))?;
    Ok(String::from_utf8(b.0.clone())?)
}

/// Writes a leaf Secret's ca.crt, tls.crt and tls.key into `dir` (what kubelet's Secret volume
/// does), replacing each file in one rename.
fn write_secret_files(s: &Secret, dir: &Path) -> Result<()> {
    fs::create_dir_all(dir)?;
    for key in ["ca.crt", "tls.key", "tls.crt"] {
        let tmp = dir.join(format!(".{key}.tmp"));
        fs::write(&tmp, field(s, key)?)?;
        fs::rename(&tmp, dir.join(key))?;
    }
    Ok(())
}

fn der_of(pem: &str) -> Result<Vec<u8>> {
    use rustls_pki_types::pem::PemObject;
    Ok(rustls_pki_types::CertificateDer::from_pem_slice(pem.as_bytes())?.to_vec())
}

/// Creates a gang of two (min 2) in `ns` and waits until both members are bound.
async fn place_gang(client: &kube::Client, ns: &str, group: &str) -> Result<()> {
    let names: Vec<String> = (0..2).map(|i| format!("{group}-{i}")).collect();
    for n in &names {
        PodBuilder::new(ns, n)
            .cpu("100m")
            .gang(KeyScheme::Muster, group, 2)
            .create(client)
            .await?;
    }
    wait_for(&format!("gang {ns}/{group} to be bound"), PLACE, || async {
        let bound = k8s::bound_pods(client, ns).await?;
        Ok(if names.iter().all(|n| bound.contains_key(n)) {
            Progress::Done(())
        } else {
            Progress::NotYet(format!("bound: {bound:?}"))
        })
    })
    .await
}

#[tokio::test]
async fn self_managed_certificates_two_listeners_and_rotation() -> Result<()> {
    let _t = Timer(
        "self_managed_certificates_two_listeners_and_rotation",
        Instant::now(),
    );
    let mut cp = ControlPlane::start(ControlPlaneOptions::default()).await?;
    let client = cp.client();
    k8s::create_namespace(&client, NS).await?;
    // The shipped install: gang members marked and gated by the policy of deploy/.
    muster_harness::policy::install_unless_control_run(&client).await?;
    let ports = Ports {
        verbs: free_port()?,
        ops: free_port()?,
    };
    let certs_dir = cp.dir().join("muster-certs");
    let started = Instant::now();
    let mut muster = Some(start_muster(&cp, &ports, &certs_dir).await?);
    let log = cp.dir().join("muster.log");
    let r = async {
        // 1. The three Secrets, made by muster, the leaves carrying the CA.
        let ca = secret(&client, CA_SECRET).await?;
        let serving = secret(&client, SERVING_SECRET).await?;
        let first_client = secret(&client, CLIENT_SECRET).await?;
        for s in [&ca, &serving, &first_client] {
            ensure!(
                s.type_.as_deref() == Some("kubernetes.io/tls"),
                "{:?}: type {:?}",
                s.metadata.name,
                s.type_
            );
            let labels = s.metadata.labels.clone().unwrap_or_default();
            ensure!(
                labels
                    .get("app.kubernetes.io/managed-by")
                    .map(String::as_str)
                    == Some("muster"),
                "{:?} not labelled as muster's: {labels:?}",
                s.metadata.name
            );
        }
        let ca_pem = field(&ca, "tls.crt")?;
        ensure!(
            field(&serving, "ca.crt")? == ca_pem,
            "serving Secret's ca.crt is the CA"
        );
        ensure!(
            field(&first_client, "ca.crt")? == ca_pem,
            "client Secret's ca.crt is the CA"
        );

        // kube-scheduler gets the client Secret's files, as the second scheduler's volume does.
        let sched_dir = cp.dir().join("scheduler-client");
        write_secret_files(&first_client, &sched_dir)?;
        let first_client_files = cp.dir().join("first-client");
        write_secret_files(&first_client, &first_client_files)?;
        let identity = CertPair {
            cert: sched_dir.join("tls.crt"),
            key: sched_dir.join("tls.key"),
        };
        let ca_file = sched_dir.join("ca.crt");
        cp.start_scheduler(SchedulerOptions {
            extender_base_url: Some(format!("https://127.0.0.1:{}", ports.verbs)),
            extender_tls: Some(ExtenderTls {
                ca_file: Some(ca_file.clone()),
                cert_file: Some(identity.cert.clone()),
                key_file: Some(identity.key.clone()),
            }),
            ..SchedulerOptions::default()
        })
        .await?;

        // 2. Without the client certificate: refused in the TLS handshake, on the verbs and on
        //    /gangs. With it: served.
        let base = format!("https://127.0.0.1:{}", ports.verbs);
        let ca_arg = ca_file.display().to_string();
        for (method, path) in [("POST", "/filter"), ("POST", "/bind"), ("GET", "/gangs")] {
            let CurlResult {
                ok,
                http_code: code,
                stderr: err,
            } = curl(
                // HTTP/1.1: curl over HTTP/2 reports TLS 1.3's late alert as a closed socket
                // (see tls::clients_without_a_valid_certificate_are_refused).
                &["--http1.1", "-X", method, "--cacert", &ca_arg],
                &format!("{base}{path}"),
            )?;
            eprintln!("no client certificate, {method} {path}: ok={ok} code={code} {err}");
            ensure!(
                !ok && code == "000" && err.to_ascii_lowercase().contains("alert"),
                "{method} {path} without a client certificate was not refused in the handshake: \
                 ok={ok} code={code} {err}"
            );
        }
        let anonymous = HttpsClient::new(&ca_file, None)?;
        if let Ok(r) = anonymous
            .get(ports.verbs, "/gangs", Duration::from_secs(5))
            .await
        {
            bail!(
                "rustls client without a certificate got HTTP {} for /gangs",
                r.status
            );
        }
        let with_cert = HttpsClient::new(&ca_file, Some(&identity))?;
        let gangs = with_cert
            .get(ports.verbs, "/gangs", Duration::from_secs(5))
            .await?;
        ensure!(
            gangs.status == 200,
            "/gangs with the client certificate: HTTP {}",
            gangs.status
        );
        ensure!(
            gangs.peer_cert == der_of(&field(&serving, "tls.crt")?)?,
            "muster does not serve the certificate in its Secret"
        );

        // 3. Probes and metrics on the plain port, and only there; the verbs only on HTTPS.
        for path in ["/healthz", "/readyz", "/metrics"] {
            let (code, _) = http_get(ports.ops, path, Duration::from_secs(5)).await?;
            ensure!(code == 200, "plain {path}: HTTP {code}");
            let r = with_cert
                .get(ports.verbs, path, Duration::from_secs(5))
                .await?;
            ensure!(
                r.status == 404,
                "{path} on the verbs port: HTTP {}",
                r.status
            );
        }
        for path in ["/gangs", "/filter"] {
            let (code, _) = http_get(ports.ops, path, Duration::from_secs(5)).await?;
            ensure!(code == 404, "{path} on the plain port: HTTP {code}");
        }

        // 4. kube-scheduler, with the Secret's client certificate, places the seed gang.
        k8s::add_node(&client, "node-1", &NodeShape::cpu("2")).await?;
        k8s::add_node(&client, "node-2", &NodeShape::cpu("2")).await?;
        k8s::create_namespace(&client, "ml").await?;
        place_gang(&client, "ml", "ai-gang-job").await?;
        let (_, metrics) = http_get(ports.ops, "/metrics", Duration::from_secs(5)).await?;
        ensure!(
            metrics
                .lines()
                .any(|l| l.starts_with("muster_requests_total{") && l.contains("verb=\"bind\"")),
            "muster counted no bind calls"
        );

        // 5. Renewal: both leaves are issued again in their Secrets (two thirds of 30 s), muster
        //    serves the new serving certificate (it re-reads its files every 10 s);
        //    kube-scheduler's files get the new client pair.
        let first_client_pem = field(&first_client, "tls.crt")?;
        let renewed = wait_for("the client certificate to be renewed", LIFETIME, || async {
            let s = secret(&client, CLIENT_SECRET).await?;
            Ok(if field(&s, "tls.crt")? != first_client_pem {
                Progress::Done(s)
            } else {
                Progress::NotYet("same certificate".into())
            })
        })
        .await?;
        eprintln!(
            "client certificate renewed {:.1}s after start",
            started.elapsed().as_secs_f64()
        );
        write_secret_files(&renewed, &sched_dir)?;
        let first_serving_pem = field(&serving, "tls.crt")?;
        wait_for(
            "muster to serve its renewed certificate",
            Duration::from_secs(30),
            || async {
                let s = secret(&client, SERVING_SECRET).await?;
                let now = field(&s, "tls.crt")?;
                if now == first_serving_pem {
                    return Ok(Progress::NotYet("serving Secret not renewed yet".into()));
                }
                // The renewed client pair: the first one expires while this waits.
                let renewed_client = HttpsClient::new(&ca_file, Some(&identity))?;
                let r = renewed_client
                    .get(ports.verbs, "/gangs", Duration::from_secs(5))
                    .await?;
                Ok(if r.peer_cert == der_of(&now)? {
                    Progress::Done(())
                } else {
                    Progress::NotYet("muster still serves the old certificate".into())
                })
            },
        )
        .await?;

        // 6. Once the first client certificate has expired (30 s after it was made), it is
        //    refused; muster restarted (every connection new, its CA read back from the Secret)
        //    still gets kube-scheduler's calls: the scheduler presents the renewed certificate.
        let expired_at = started + LIFETIME + Duration::from_secs(2);
        while Instant::now() < expired_at {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let old = CertPair {
            cert: first_client_files.join("tls.crt"),
            key: first_client_files.join("tls.key"),
        };
        let CurlResult {
            ok,
            http_code: code,
            stderr: err,
        } = curl(
            &[
                "--cacert",
                &ca_arg,
                "--cert",
                &old.cert.display().to_string(),
                "--key",
                &old.key.display().to_string(),
            ],
            &format!("{base}/gangs"),
        )?;
        eprintln!("expired client certificate: ok={ok} code={code} {err}");
        ensure!(
            !ok && code == "000",
            "the expired client certificate was accepted: {code}"
        );
        drop(muster.take());
        muster = Some(start_muster(&cp, &ports, &certs_dir).await?);
        ensure!(
            field(&secret(&client, CA_SECRET).await?, "tls.crt")? == ca_pem,
            "the restarted muster replaced its CA"
        );
        place_gang(&client, "ml", "after-renewal").await?;
        Ok(())
    }
    .await;
    match r {
        Ok(()) => Ok(()),
        Err(e) => Err(e.context(format!(
            "muster log:\n{}\n{}",
            tail(&log, 40),
            cp.log_tails(10)
        ))),
    }
}
