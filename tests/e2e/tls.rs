//! End-to-end: muster serving HTTPS (`--tls-cert-file`, `--tls-key-file`,
//! `--tls-client-ca-file`) to the real, stock kube-scheduler (v1.37), whose extender stanza has
//! `enableHTTPS: true` and a `tlsConfig` (CA + client certificate). Certificates are made with the
//! `openssl` command by `muster-harness`; the refusal and rotation checks use the `curl` and
//! `openssl s_client` commands, so they do not depend on the harness's own TLS client.
//!
//! Every test gets its own control plane. Waiting is polling with deadlines.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use muster_harness::k8s::KeyScheme;
use muster_harness::timing;
use muster_harness::tls::{
    curl, openssl_output, serial_from_openssl, Ca, CertPair, HttpsClient, Usage,
};
use muster_harness::{
    ensure_truth, muster_view_is_checked, spread, wait_for, Cluster, ClusterOptions, Muster,
    MusterOptions, MusterTls, NodeShape, PodBuilder, Progress, PLACE, TOGETHER, WINDOW,
};

use muster_harness::Timer;

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");
/// muster checks the certificate files every [`timing::CERT_CHECK`]; a rotation must be served
/// within three checks.
const ROTATION: Duration = timing::CERT_CHECK.saturating_mul(3);

async fn tls_cluster() -> Result<Cluster> {
    Cluster::start_with(ClusterOptions::new(MUSTER).tls(true)).await
}

fn tls_of(c: &Cluster) -> Result<&MusterTls> {
    c.tls()
        .ok_or_else(|| anyhow!("cluster started without TLS"))
}

fn p(path: &Path) -> String {
    path.display().to_string()
}

/// Serial and verification result of the certificate a fresh `openssl s_client` connection sees
/// (trusting `ca`, presenting `client`).
fn s_client_serial(port: u16, ca: &Path, client: &CertPair) -> Result<(String, String)> {
    let out = Command::new("openssl")
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
        .args([
            "-CAfile",
            &p(ca),
            "-cert",
            &p(&client.cert),
            "-key",
            &p(&client.key),
        ])
        .args(["-verify_return_error", "-showcerts"])
        .stdin(Stdio::null())
        .output()
        .context("running openssl s_client")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let begin = "-----BEGIN CERTIFICATE-----";
    let end = "-----END CERTIFICATE-----";
    let (Some(b), Some(e)) = (stdout.find(begin), stdout.find(end)) else {
        bail!(
            "openssl s_client showed no certificate ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    };
    let pem = &stdout[b..e + end.len()];
    let verify = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("Verify return code:"))
        .unwrap_or("(no Verify return code line)")
        .trim()
        .to_string();
    let mut x509 = Command::new("openssl")
        .args(["x509", "-noout", "-serial"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    {
        use std::io::Write;
        x509.stdin
            .take()
            .expect("piped")
            .write_all(format!("{pem}\n").as_bytes())?;
    }
    let out = x509.wait_with_output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let serial = serial_from_openssl(&text).ok_or_else(|| anyhow!("no serial in {:?}", text))?;
    Ok((serial, verify))
}

/// The kube-scheduler config file the harness rendered (JSON).
fn rendered_scheduler_config(c: &Cluster) -> Result<serde_json::Value> {
    let path = c.cp.dir().join("kube-scheduler-config.yaml");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(serde_json::from_str(&text)?)
}

/// `muster_requests_total{verb="<verb>"}` (every outcome) from /metrics (over HTTPS).
async fn requests(c: &Cluster, verb: &str) -> Result<f64> {
    let needle = format!("verb=\"{verb}\"");
    Ok(c.muster
        .metrics()
        .await?
        .iter()
        .filter(|(k, _)| k.starts_with("muster_requests_total{") && k.contains(&needle))
        .map(|(_, v)| v)
        .sum())
}

/// Places a gang of `n` members (min `n`, `cpu` each) in `ns` and checks they are bound
/// together, each through a bind call muster answered (over HTTPS; muster's view, not read in a
/// control run).
async fn place_gang(c: &Cluster, ns: &str, group: &str, n: u32, cpu: &str) -> Result<()> {
    let binds_before = requests(c, "bind").await?;
    let names = c
        .create_gang(ns, group, n, n, KeyScheme::Muster, |p| p.cpu(cpu))
        .await?;
    let bound = c.wait_bound(ns, &names, PLACE).await?;
    let s = spread(&bound);
    eprintln!(
        "gang {ns}/{group} bound {:.3}s apart: {bound:?}",
        s.as_secs_f64()
    );
    ensure_truth!(s <= TOGETHER, "members bound {s:?} apart: {bound:?}");
    if !muster_view_is_checked() {
        return Ok(());
    }
    // A bind call is counted when it is answered, a moment after the binding it made.
    wait_for(
        &format!("muster to have answered the {n} bind calls of gang {ns}/{group}"),
        Duration::from_secs(10),
        || async {
            let binds = requests(c, "bind").await? - binds_before;
            Ok(if binds >= f64::from(n) {
                Progress::Done(())
            } else {
                Progress::NotYet(format!(
                    "{binds} bind calls answered since the gang was created"
                ))
            })
        },
    )
    .await?;
    Ok(())
}

// -------------------------------------------------------------------------------------------

/// kube-scheduler with `enableHTTPS: true`, the CA and a client certificate runs the README's
/// seed gang (master + worker, min-available 2) through muster's HTTPS endpoint: with room for
/// one member, neither is bound and muster (read over HTTPS) says why; with a second node both
/// are bound together.
#[tokio::test]
async fn scheduler_over_https_with_client_cert_places_seed_gang() -> Result<()> {
    let _t = Timer(
        "scheduler_over_https_with_client_cert_places_seed_gang",
        Instant::now(),
    );
    let c = tls_cluster().await?;
    let r = async {
        let tls = tls_of(&c)?;
        c.namespace("ml").await?;
        c.add_node("node-1", NodeShape::cpu("150m")).await?; // room for one member
        let names = vec![
            "ai-gang-job-master-0".to_string(),
            "ai-gang-job-worker-0".to_string(),
        ];
        for n in &names {
            c.create(PodBuilder::new("ml", n).cpu("100m").gang(
                KeyScheme::Muster,
                "ai-gang-job",
                2,
            ))
            .await?;
        }
        let reason = "gang ml/ai-gang-job: 1 of 2 members fit";
        c.wait_gang_waiting_whole("ml", "ai-gang-job", &names, reason, PLACE)
            .await?;
        c.assert_gang_waits_whole_for("ml", "ai-gang-job", &names, reason, WINDOW)
            .await?;
        c.add_node("node-2", NodeShape::cpu("150m")).await?;
        let bound = c.wait_bound("ml", &names, PLACE).await?;
        let s = spread(&bound);
        eprintln!(
            "seed gang bound {:.3}s apart over HTTPS: {bound:?}",
            s.as_secs_f64()
        );
        ensure_truth!(s <= TOGETHER, "members bound {s:?} apart: {bound:?}");
        // muster answered the scheduler's filter and bind calls (a bind per member). It serves
        // nothing but TLS, and the scheduler was configured for it: HTTPS, the CA and the client
        // certificate.
        wait_for(
            "muster to have answered filter and bind calls for both members",
            Duration::from_secs(10),
            || async {
                let (filter, bind) = (requests(&c, "filter").await?, requests(&c, "bind").await?);
                Ok(if filter >= 2.0 && bind >= 2.0 {
                    Progress::Done(())
                } else {
                    Progress::NotYet(format!("filter={filter} bind={bind} requests"))
                })
            },
        )
        .await?;
        let cfg = rendered_scheduler_config(&c)?;
        let ext = &cfg["extenders"][0];
        ensure!(
            ext["urlPrefix"] == format!("https://127.0.0.1:{}", c.muster.port())
                && ext["enableHTTPS"] == true
                && ext["tlsConfig"]["caFile"] == p(&tls.ca.cert)
                && ext["tlsConfig"]["certFile"] == p(&tls.client.cert)
                && ext["tlsConfig"]["keyFile"] == p(&tls.client.key),
            "extender stanza not set up for HTTPS: {ext}"
        );
        c.assert_no_overcommit().await
    }
    .await;
    c.report(&["ml"], r).await
}

/// With `--tls-client-ca-file`, muster refuses clients without a certificate, and with one
/// signed by another CA; plain HTTP gets nothing; the right client certificate gets 200.
#[tokio::test]
async fn clients_without_a_valid_certificate_are_refused() -> Result<()> {
    let _t = Timer(
        "clients_without_a_valid_certificate_are_refused",
        Instant::now(),
    );
    let c = tls_cluster().await?;
    let r = async {
        let tls = tls_of(&c)?;
        let port = c.muster.port();
        let url = format!("https://127.0.0.1:{port}/healthz");
        let ca = p(&tls.ca.cert);
        // A second CA with a client certificate that is valid in every other respect.
        let other = Ca::generate(&c.cp.dir().join("other-ca"), "other-ca")?;
        let foreign = other.issue("foreign-client", Usage::Client)?;

        // 1. The right client certificate: 200 (control: the refusals below are not an outage).
        let good = curl(
            &[
                "--cacert",
                &ca,
                "--cert",
                &p(&tls.client.cert),
                "--key",
                &p(&tls.client.key),
            ],
            &url,
        )?;
        eprintln!("curl with the right client cert: {good:?}");
        ensure!(
            good.ok && good.http_code == "200",
            "right client certificate: {good:?}"
        );

        // 2. No client certificate (the server itself is trusted): refused in the handshake.
        // Refusals are asked over HTTP/1.1: with TLS 1.3 the server's alert comes after the
        // client's Finished, and curl over HTTP/2 (which muster offers) has by then written its
        // preface and reports the closed socket ("getpeername() failed") instead of the alert
        // this test reads.
        let none = curl(&["--http1.1", "--cacert", &ca], &url)?;
        eprintln!("curl without a client cert: {none:?}");
        ensure!(
            !none.ok && none.http_code == "000",
            "no client certificate was not refused: {none:?}"
        );
        // 3. A client certificate signed by another CA: refused too.
        let bad = curl(
            &[
                "--http1.1",
                "--cacert",
                &ca,
                "--cert",
                &p(&foreign.cert),
                "--key",
                &p(&foreign.key),
            ],
            &url,
        )?;
        eprintln!("curl with a client cert from another CA: {bad:?}");
        ensure!(
            !bad.ok && bad.http_code == "000",
            "client certificate from another CA was not refused: {bad:?}"
        );
        // Both refusals are TLS alerts from the server, not e.g. a failed server verification.
        for (what, r) in [("no client cert", &none), ("other CA", &bad)] {
            ensure!(
                r.stderr.to_ascii_lowercase().contains("alert"),
                "{what}: expected a TLS alert from the server, curl said: {}",
                r.stderr
            );
        }

        // The same with the harness's rustls client.
        let fresh = |id: Option<&CertPair>| HttpsClient::new(&tls.ca.cert, id);
        let t = Duration::from_secs(5);
        let ok = fresh(Some(&tls.client))?.get(port, "/healthz", t).await?;
        ensure!(
            ok.status == 200,
            "rustls client with the right cert: HTTP {}",
            ok.status
        );
        for (what, id) in [("no client cert", None), ("other CA", Some(&foreign))] {
            match fresh(id)?.get(port, "/healthz", t).await {
                Ok(r) => bail!(
                    "rustls client with {what} got HTTP {}: {}",
                    r.status,
                    r.body
                ),
                Err(e) => eprintln!("rustls client with {what}: refused: {e:#}"),
            }
        }
        // Plain HTTP on the TLS port: no HTTP answer at all.
        if let Ok((code, body)) =
            muster_harness::process::http_get(port, "/healthz", Duration::from_secs(5)).await
        {
            bail!("plain HTTP on the TLS port got HTTP {code}: {body}");
        }

        // Control: without --tls-client-ca-file (server-only TLS) the same certificate-less
        // client is served, so the refusals above come from the client-CA requirement.
        let mut mo = MusterOptions::new(MUSTER, c.cp.kubeconfig_path(), &c.cp.dir().join("open"));
        std::fs::create_dir_all(&mo.log_dir)?;
        mo.tls = Some(MusterTls {
            require_client_cert: false,
            ..tls.clone()
        });
        let open = Muster::start(mo).await?;
        let anon = curl(
            &["--cacert", &ca],
            &format!("https://127.0.0.1:{}/healthz", open.port()),
        )?;
        eprintln!("curl without a client cert, muster without a client CA: {anon:?}");
        ensure!(
            anon.ok && anon.http_code == "200",
            "server-only TLS refused a client without certificate: {anon:?}\n{}",
            open.log_tail(20)
        );
        drop(open);

        // muster logged the refusals.
        wait_for(
            "muster to log refused handshakes",
            Duration::from_secs(10),
            || async {
                let log = std::fs::read_to_string(c.muster.log_path())?;
                let n = log.matches("TLS handshake refused").count();
                Ok(if n >= 4 {
                    Progress::Done(())
                } else {
                    Progress::NotYet(format!("{n} refusals logged"))
                })
            },
        )
        .await?;
        Ok(())
    }
    .await;
    c.report(&[], r).await
}

/// A new serving certificate (same CA, new serial) written over the files is served to fresh
/// connections within the reload period, and the scheduler keeps binding gangs through muster.
#[tokio::test]
async fn rotated_serving_certificate_is_picked_up() -> Result<()> {
    let _t = Timer("rotated_serving_certificate_is_picked_up", Instant::now());
    let c = tls_cluster().await?;
    let r = async {
        let tls = tls_of(&c)?;
        let port = c.muster.port();
        c.namespace("rot").await?;
        c.add_node("node-1", NodeShape::cpu("2")).await?;
        place_gang(&c, "rot", "before", 2, "100m").await?;

        let old = tls.server.serial()?;
        let (seen, verify) = s_client_serial(port, &tls.ca.cert, &tls.client)?;
        eprintln!("serving serial {seen} ({verify}); file serial {old}");
        ensure!(seen == old, "served serial {seen}, the file has {old}");

        let rotated_at = Instant::now();
        let new = tls.rotate_server_cert()?;
        ensure!(new != old, "rotation kept serial {old}");
        let new_der = tls.server.der()?;
        let (seen, verify) = wait_for(
            &format!("a fresh TLS connection to see serial {new} (was {old})"),
            ROTATION,
            || async {
                let (s, v) = s_client_serial(port, &tls.ca.cert, &tls.client)?;
                Ok(if s == new {
                    Progress::Done((s, v))
                } else {
                    Progress::NotYet(format!("serial {s} ({v})"))
                })
            },
        )
        .await?;
        eprintln!(
            "new serial {seen} served {:.1}s after the files were rewritten ({verify})",
            rotated_at.elapsed().as_secs_f64()
        );
        ensure!(
            verify.contains("0 (ok)"),
            "the rotated certificate does not verify against the CA: {verify}"
        );
        // The harness's own client sees exactly the new certificate too.
        let r = c.muster.get_https("/healthz").await?;
        ensure!(r.status == 200, "HTTP {} after rotation", r.status);
        ensure!(
            r.peer_cert == new_der,
            "rustls client was served another certificate"
        );
        ensure!(
            c.muster
                .log_tail(200)
                .contains("reloaded the serving certificate"),
            "muster did not log the reload"
        );

        // kube-scheduler (same CA) still consults muster: a gang of 2 × 1 CPU with room for
        // one member (node-1 has 1.8 CPU left) waits whole — kube-scheduler alone binds the one
        // that fits — and is placed whole once a second node is added.
        let after = c
            .create_gang("rot", "after", 2, 2, KeyScheme::Muster, |p| p.cpu("1"))
            .await?;
        c.assert_none_bound_for("rot", &after, WINDOW).await?;
        c.add_node("node-2", NodeShape::cpu("1")).await?;
        let bound = c.wait_bound("rot", &after, PLACE).await?;
        ensure_truth!(
            spread(&bound) <= TOGETHER,
            "members bound apart after rotation: {bound:?}"
        );
        c.assert_no_overcommit().await
    }
    .await;
    c.report(&["rot"], r).await
}

/// `openssl` itself agrees the harness's certificates chain (a cheap guard against a harness
/// change that would make the TLS tests fail for the wrong reason).
#[test]
fn generated_certificates_verify_against_their_ca() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("muster-e2e-tls-pki-{}", std::process::id()));
    let tls = MusterTls::generate(&dir, true)?;
    for pair in [&tls.server, &tls.client] {
        let out = openssl_output(&["verify", "-CAfile", &p(&tls.ca.cert), &p(&pair.cert)])?;
        ensure!(out.contains(": OK"), "{out}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// kube-scheduler's extender client speaks HTTP/2 to muster's HTTPS listener (muster offers `h2`
/// in the TLS handshake; Go's transport takes it: `utilnet.SetTransportDefaults`,
/// pkg/scheduler/extender.go:57-85), so a gang's calls — its held binds all at once — are streams
/// of one connection. Over HTTP/1.1 each concurrent held call needed a connection of its own and
/// Go keeps two idle per host: a gang of 8 cost about six new connections, each a TLS handshake
/// (about 0.75 per member in the 500-node benchmark).
#[tokio::test]
async fn kube_scheduler_speaks_http2_to_muster_so_a_gang_costs_one_connection() -> Result<()> {
    let _t = Timer(
        "kube_scheduler_speaks_http2_to_muster_so_a_gang_costs_one_connection",
        Instant::now(),
    );
    let c = tls_cluster().await?;
    let r = async {
        c.namespace("ml").await?;
        c.add_node("node-1", NodeShape::cpu("8")).await?;
        place_gang(&c, "ml", "first", 8, "500m").await?;
        place_gang(&c, "ml", "second", 8, "500m").await?;
        let m = c.muster.metrics().await?;
        let h2 = m
            .get("muster_tls_connections_total{protocol=\"h2\"}")
            .copied()
            .unwrap_or(0.0);
        // kube-scheduler's calls for both gangs (16 filter and 16 bind calls, 8 binds held at
        // once each time); the harness's own reads of /metrics come over HTTP/1.1, one
        // connection each, and are not counted here.
        ensure!(
            (1.0..=2.0).contains(&h2),
            "{h2} HTTP/2 connections from kube-scheduler for two gangs of 8 (want 1, at most 2): \
             {:?}",
            m.iter()
                .filter(|(k, _)| k.starts_with("muster_tls_connections_total"))
                .collect::<Vec<_>>()
        );
        c.assert_no_overcommit().await
    }
    .await;
    c.report(&["ml"], r).await
}
