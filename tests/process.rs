//! The real `muster` binary as a process, with no cluster: bad flag values and `MUSTER_*`
//! variables stopping start-up with the flag named, variables honoured like flags, JSON logs,
//! SIGTERM finishing the request in flight, the URL prefix, a bad rotated certificate pair,
//! and life without a reachable API server. Loopback only; every wait has a deadline.
//!
//! The kubeconfig given to muster points at a loopback port where nothing listens: muster
//! starts (building a client does not connect), its watches fail and retry, and it never
//! becomes ready. That is enough for every claim here, and it is itself one of them.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use muster_harness::process::{free_port, http_get, random_string, signal};
use muster_harness::tls::{cert_der, MusterTls, Usage};
use muster_harness::{wait_for, Progress};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const MUSTER: &str = env!("CARGO_BIN_EXE_muster");
/// Linux's signal number.
const SIGTERM: i32 = 15;
/// Start-up, an answer, an exit: generous for a loaded 2-core machine, still bounded.
const SOON: Duration = Duration::from_secs(20);
/// muster looks at its certificate files every 10 s.
const CERT_CHECK: Duration = Duration::from_secs(30);
/// How filter and bind answer before the caches are synced (a verdict: HTTP 200).
const FILTER_NOT_READY: &str = r#"{"Nodes":null,"NodeNames":null,"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":"muster is starting: its pod and node caches are not synced yet; retry shortly"}"#;
const BIND_NOT_READY: &str =
    r#"{"Error":"muster is starting: its pod and node caches are not synced yet; retry shortly"}"#;
const FILTER_ARGS: &str = r#"{"Pod":{"metadata":{"name":"p","namespace":"ml","uid":"u-p"},"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"100m"}}}]}},"Nodes":null,"NodeNames":["node1"]}"#;
const BIND_ARGS: &str = r#"{"PodName":"p","PodNamespace":"ml","PodUID":"u-p","Node":"node1"}"#;

/// A scratch directory with a kubeconfig whose API server is a closed loopback port.
struct Scratch {
    dir: PathBuf,
    kubeconfig: PathBuf,
}

impl Scratch {
    fn new(test: &str) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!("muster-process-{test}-{}", random_string(6)));
        std::fs::create_dir_all(&dir)?;
        let kubeconfig = dir.join("kubeconfig");
        let nobody = free_port()?;
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
                 clusters: [{{name: nobody, cluster: {{server: \"http://127.0.0.1:{nobody}\"}}}}]\n\
                 users: [{{name: u, user: {{token: t}}}}]\n\
                 contexts: [{{name: c, context: {{cluster: nobody, user: u}}}}]\n"
            ),
        )?;
        Ok(Self { dir, kubeconfig })
    }

    fn kubeconfig(&self) -> String {
        self.kubeconfig.display().to_string()
    }

    /// `muster` with only the given flags and variables (no inherited `MUSTER_*`, `KUBECONFIG`
    /// or `RUST_LOG`), stdout and stderr in files of the scratch directory.
    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Result<Command> {
        let mut cmd = Command::new(MUSTER);
        cmd.env_clear()
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(self.dir.join("stdout.log"))?)
            .stderr(std::fs::File::create(self.dir.join("stderr.log"))?);
        Ok(cmd)
    }

    fn stdout(&self) -> String {
        std::fs::read_to_string(self.dir.join("stdout.log")).unwrap_or_default()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default()
    }

    /// Runs muster expecting it to refuse to start: its exit status and stderr.
    fn refused(&self, args: &[&str], env: &[(&str, &str)]) -> Result<(ExitStatus, String)> {
        let mut child = self
            .command(args, env)?
            .spawn()
            .context("starting muster")?;
        let status = wait_exit(&mut child, SOON)
            .with_context(|| format!("muster {args:?} {env:?} kept running: {}", self.stdout()))?;
        Ok((status, self.stderr()))
    }

    /// Starts muster serving on `port` and waits until `/healthz` answers.
    async fn serve(&self, port: u16, args: &[&str], env: &[(&str, &str)]) -> Result<Running> {
        let child = self
            .command(args, env)?
            .spawn()
            .context("starting muster")?;
        let mut m = Running { child, port };
        wait_for("muster to answer /healthz", SOON, || {
            let exited = m.child.try_wait();
            async move {
                if let Some(status) = exited? {
                    bail!("muster exited ({status}): {}", self.stderr());
                }
                Ok(
                    match http_get(port, "/healthz", Duration::from_secs(2)).await {
                        Ok((200, body)) => Progress::Done(body),
                        other => Progress::NotYet(format!("{other:?}")),
                    },
                )
            }
        })
        .await?;
        Ok(m)
    }

    /// Starts muster on a free port with this directory's kubeconfig and the `extra` flags, and
    /// waits until `/healthz` answers.
    async fn serve_with_flags(&self, extra: &[&str]) -> Result<Running> {
        let port = free_port()?;
        let (kc, addr) = (self.kubeconfig(), listen_on(port));
        let mut args = vec!["--kubeconfig", &kc, "--listen-addr", &addr];
        args.extend_from_slice(extra);
        self.serve(port, &args, &[]).await
    }

    /// Waits until `seen` finds what it looks for in muster's stdout so far.
    async fn wait_stdout<T>(
        &self,
        what: &str,
        timeout: Duration,
        seen: impl Fn(&str) -> Option<T>,
    ) -> Result<T> {
        wait_for(what, timeout, || async {
            let out = self.stdout();
            Ok(match seen(&out) {
                Some(found) => Progress::Done(found),
                None => Progress::NotYet(out),
            })
        })
        .await
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A muster process; killed when dropped.
struct Running {
    child: Child,
    port: u16,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_exit(child: &mut Child, timeout: Duration) -> Result<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn listen_on(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

/// One HTTP/1.1 request on a fresh connection (`Connection: close`): status and body.
async fn request(port: u16, method: &str, path: &str, body: &str) -> Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await?;
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await?;
    read_response(&mut s).await
}

/// Reads a whole response (the server closes the connection); a `100 Continue` before it is
/// skipped.
async fn read_response(s: &mut TcpStream) -> Result<(u16, String)> {
    let mut buf = Vec::new();
    tokio::time::timeout(SOON, s.read_to_end(&mut buf))
        .await
        .map_err(|_| anyhow!("no response within {SOON:?}"))??;
    let text = String::from_utf8_lossy(&buf);
    let text = match text.strip_prefix("HTTP/1.1 100 Continue\r\n\r\n") {
        Some(rest) => rest,
        None => &text,
    };
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("not an HTTP response: {text:?}"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("no status in {head:?}"))?;
    Ok((status, body.to_string()))
}

async fn metric(port: u16, line_start: &str) -> Result<Option<f64>> {
    let (_, text) = http_get(port, "/metrics", SOON).await?;
    Ok(text
        .lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit_once(' '))
        .and_then(|(_, v)| v.parse().ok()))
}

// ---------------------------------------------------------------- start-up

/// clap refuses a value it cannot parse before anything starts: usage error, exit status 2.
#[test]
fn bad_flag_values_stop_start_up_naming_the_flag() -> Result<()> {
    let s = Scratch::new("bad-flags")?;
    let kc = s.kubeconfig();
    let cases: [(&[&str], &str); 6] = [
        (&["--gang-timeout", "soon"], "--gang-timeout"),
        (&["--gang-backoff", "10 parsecs"], "--gang-backoff"),
        (&["--bind-wait", "5m"], "--bind-wait"),
        (&["--listen-addr", "nowhere"], "--listen-addr"),
        (&["--log-format", "xml"], "--log-format"),
        (&["--url-prefix", "muster"], "--url-prefix"),
    ];
    for (bad, flag) in cases {
        let mut args = vec!["--kubeconfig", &kc];
        args.extend_from_slice(bad);
        let (status, stderr) = s.refused(&args, &[])?;
        assert_eq!(status.code(), Some(2), "{bad:?}: {status}; {stderr}");
        assert!(
            stderr.contains(flag),
            "{bad:?} does not name {flag}: {stderr}"
        );
        assert!(
            stderr.contains(bad[1]),
            "{bad:?} does not quote the value: {stderr}"
        );
    }
    Ok(())
}

/// Values that parse but cannot be used (a missing file, a port in use) stop muster before it
/// serves anything: exit status 1, the flag named.
#[test]
fn unusable_files_and_addresses_stop_start_up_naming_the_flag() -> Result<()> {
    let s = Scratch::new("unusable")?;
    let kc = s.kubeconfig();
    let missing = s.dir.join("missing.pem").display().to_string();
    let taken = TcpListener::bind("127.0.0.1:0")?;
    let taken = taken.local_addr()?.to_string();
    let cases: [(Vec<&str>, &str); 4] = [
        // Timings that parse but let a leader decide after its Lease could expire for others.
        (
            vec![
                "--kubeconfig",
                &kc,
                "--leader-elect",
                "--leader-elect-renew-deadline",
                "20s",
            ],
            "--leader-elect-lease-duration",
        ),
        (
            vec![
                "--kubeconfig",
                &kc,
                "--tls-cert-file",
                &missing,
                "--tls-key-file",
                &missing,
            ],
            "--tls-cert-file",
        ),
        (vec!["--kubeconfig", &missing], "--kubeconfig"),
        (
            vec!["--kubeconfig", &kc, "--listen-addr", &taken],
            "--listen-addr",
        ),
    ];
    for (args, flag) in cases {
        let (status, stderr) = s.refused(&args, &[])?;
        assert_eq!(status.code(), Some(1), "{args:?}: {status}; {stderr}");
        assert!(
            stderr.contains(flag),
            "{args:?} does not name {flag}: {stderr}"
        );
    }
    Ok(())
}

// ---------------------------------------------------------------- MUSTER_* variables

#[test]
fn bad_muster_variables_stop_start_up_naming_the_setting() -> Result<()> {
    let s = Scratch::new("bad-env")?;
    let kc = s.kubeconfig();
    for (var, value, flag) in [
        ("MUSTER_GANG_TIMEOUT", "soon", "--gang-timeout"),
        ("MUSTER_GANG_TIMEOUT", "0s", "--gang-timeout"),
        ("MUSTER_BIND_WAIT", "5m", "--bind-wait"),
        ("MUSTER_LOG_FORMAT", "xml", "--log-format"),
        ("MUSTER_LISTEN_ADDR", "nowhere", "--listen-addr"),
        (
            "MUSTER_LEADER_ELECT_RETRY_PERIOD",
            "often",
            "--leader-elect-retry-period",
        ),
    ] {
        let (status, stderr) = s.refused(&[], &[("MUSTER_KUBECONFIG", &kc), (var, value)])?;
        assert_eq!(status.code(), Some(2), "{var}={value}: {status}; {stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains(value),
            "{var}={value}: {stderr}"
        );
    }
    Ok(())
}

/// Every setting here comes from a variable: the kubeconfig, the address, the log format and
/// the URL prefix (the last two are checked by the tests of those settings).
#[tokio::test]
async fn muster_variables_are_honoured_like_flags() -> Result<()> {
    let s = Scratch::new("env")?;
    let port = free_port()?;
    let addr = listen_on(port);
    let m = s
        .serve(
            port,
            &[],
            &[
                ("MUSTER_KUBECONFIG", &s.kubeconfig()),
                ("MUSTER_LISTEN_ADDR", &addr),
                ("MUSTER_URL_PREFIX", "/extender"),
                ("MUSTER_LOG_FORMAT", "json"),
            ],
        )
        .await?;
    let (status, body) = request(m.port, "POST", "/extender/filter", FILTER_ARGS).await?;
    assert_eq!((status, body.as_str()), (200, FILTER_NOT_READY));
    let (status, _) = request(m.port, "POST", "/filter", FILTER_ARGS).await?;
    assert_eq!(status, 404, "MUSTER_URL_PREFIX ignored");
    let first = s.stdout();
    let first = first.lines().next().unwrap_or_default();
    serde_json::from_str::<serde_json::Value>(first)
        .with_context(|| format!("MUSTER_LOG_FORMAT=json ignored: {first:?}"))?;
    Ok(())
}

// ---------------------------------------------------------------- logs, URL prefix

#[tokio::test]
async fn log_format_json_writes_one_object_per_line() -> Result<()> {
    let s = Scratch::new("json-logs")?;
    let m = s.serve_with_flags(&["--log-format", "json"]).await?;
    let addr = listen_on(m.port);
    // The start-up line and the watches' retry warnings (no API server) are enough lines.
    let lines = s
        .wait_stdout("three log lines", SOON, |out| {
            let lines: Vec<String> = out.lines().map(str::to_string).collect();
            (lines.len() >= 3).then_some(lines)
        })
        .await?;
    for line in &lines {
        let v: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("not JSON: {line:?}"))?;
        ensure!(v.is_object(), "not an object: {line}");
        ensure!(v["level"].is_string() && v["fields"].is_object(), "{line}");
    }
    let serving = lines
        .iter()
        .find(|l| l.contains("muster serving"))
        .ok_or_else(|| anyhow!("no start-up line in {lines:?}"))?;
    let v: serde_json::Value = serde_json::from_str(serving)?;
    assert_eq!(
        v["fields"]["addr"],
        addr.as_str(),
        "fields are JSON fields: {serving}"
    );
    Ok(())
}

/// The text format, for contrast: the JSON test above fails if the flag is ignored.
#[tokio::test]
async fn log_format_text_is_not_json() -> Result<()> {
    let s = Scratch::new("text-logs")?;
    let _m = s.serve_with_flags(&[]).await?;
    let out = s.stdout();
    let line = out
        .lines()
        .find(|l| l.contains("muster serving"))
        .ok_or_else(|| anyhow!("no start-up line in {out:?}"))?;
    assert!(
        serde_json::from_str::<serde_json::Value>(line).is_err(),
        "{line}"
    );
    Ok(())
}

#[tokio::test]
async fn url_prefix_serves_the_verbs_under_it_and_only_there() -> Result<()> {
    let s = Scratch::new("prefix")?;
    let m = s.serve_with_flags(&["--url-prefix", "/muster/"]).await?;
    for (path, body, want) in [
        ("/muster/filter", FILTER_ARGS, FILTER_NOT_READY),
        ("/muster/bind", BIND_ARGS, BIND_NOT_READY),
    ] {
        let (status, answer) = request(m.port, "POST", path, body).await?;
        assert_eq!((status, answer.as_str()), (200, want), "{path}");
    }
    let (status, _) = request(m.port, "POST", "/muster/prioritize", FILTER_ARGS).await?;
    assert_eq!(status, 503, "prioritize answers, not ready yet");
    for path in ["/filter", "/bind", "/prioritize", "/other/filter"] {
        let (status, answer) = request(m.port, "POST", path, FILTER_ARGS).await?;
        assert_eq!(status, 404, "{path}: {answer}");
        assert!(answer.contains("no such endpoint"), "{path}: {answer}");
    }
    // The operational endpoints stay at the root.
    assert_eq!(http_get(m.port, "/healthz", SOON).await?.0, 200);
    assert_eq!(request(m.port, "GET", "/muster/healthz", "").await?.0, 404);
    Ok(())
}

// ---------------------------------------------------------------- no API server

/// README: `/healthz` is 200 while the process lives; `/readyz` is 503 until the pod and node
/// caches are synced; the verbs answer "muster is starting"; watch errors are counted and
/// retried; the cache stays empty.
#[tokio::test]
async fn without_a_reachable_api_server_it_lives_but_is_never_ready() -> Result<()> {
    let s = Scratch::new("no-apiserver")?;
    let mut m = s.serve_with_flags(&[]).await?;
    let port = m.port;
    // Both watches fail, again and again (retried with backoff).
    for kind in ["pods", "nodes"] {
        let series = format!("muster_watch_errors_total{{kind=\"{kind}\"}}");
        wait_for("two watch errors", SOON, || async {
            Ok(match metric(port, &series).await? {
                Some(n) if n >= 2.0 => Progress::Done(()),
                other => Progress::NotYet(format!("{series} = {other:?}")),
            })
        })
        .await?;
    }
    let (status, body) = http_get(port, "/readyz", SOON).await?;
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("pods synced=false") && body.contains("nodes synced=false"),
        "{body}"
    );
    assert_eq!(
        http_get(port, "/healthz", SOON).await?,
        (200, "ok".to_string())
    );
    let filter = request(port, "POST", "/filter", FILTER_ARGS).await?;
    assert_eq!(filter, (200, FILTER_NOT_READY.to_string()));
    let bind = request(port, "POST", "/bind", BIND_ARGS).await?;
    assert_eq!(bind, (200, BIND_NOT_READY.to_string()));
    assert_eq!(metric(port, "muster_cache_nodes ").await?, Some(0.0));
    assert!(
        m.child.try_wait()?.is_none(),
        "muster exited: {}",
        s.stderr()
    );
    assert!(
        s.stdout()
            .contains("watch error; listing again after a back-off"),
        "{}",
        s.stdout()
    );
    Ok(())
}

// ---------------------------------------------------------------- SIGTERM

/// SIGTERM stops accepting connections, lets the request in flight finish, and exits 0. The
/// request is shown in flight with `Expect: 100-continue`: the server sends `100 Continue`
/// only once the handler reads the body, and the body is sent only after the signal.
#[tokio::test]
async fn sigterm_finishes_the_request_in_flight_and_exits_zero() -> Result<()> {
    let s = Scratch::new("sigterm")?;
    let mut m = s.serve_with_flags(&[]).await?;
    let port = m.port;
    let mut held = TcpStream::connect(("127.0.0.1", port)).await?;
    let head = format!(
        "POST /filter HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Expect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        FILTER_ARGS.len()
    );
    held.write_all(head.as_bytes()).await?;
    let mut cont = [0u8; 25];
    tokio::time::timeout(SOON, held.read_exact(&mut cont))
        .await
        .map_err(|_| anyhow!("no 100 Continue"))??;
    assert_eq!(&cont, b"HTTP/1.1 100 Continue\r\n\r\n");

    assert!(signal(m.child.id(), SIGTERM), "SIGTERM not delivered");
    wait_for("muster to stop accepting connections", SOON, || async {
        Ok(match TcpStream::connect(("127.0.0.1", port)).await {
            Err(_) => Progress::Done(()),
            Ok(_) => Progress::NotYet("a new connection was accepted".into()),
        })
    })
    .await?;
    assert!(
        m.child.try_wait()?.is_none(),
        "exited with a request in flight"
    );

    held.write_all(FILTER_ARGS.as_bytes()).await?;
    let (status, body) = read_response(&mut held).await?;
    assert_eq!(
        (status, body),
        (200, FILTER_NOT_READY.to_string()),
        "the request in flight got its answer"
    );
    let status = wait_exit(&mut m.child, SOON)?;
    assert!(
        status.success(),
        "exit after SIGTERM: {status}; {}",
        s.stderr()
    );
    assert!(s.stdout().contains("shutting down"), "{}", s.stdout());
    Ok(())
}

// ---------------------------------------------------------------- TLS rotation

/// README: the certificate files are re-read within 10 s of a change, "a bad new pair is
/// logged and the old one kept". A certificate from a new key written over the old one, with
/// the old key left in place (a half-done rotation), is such a pair; writing the new key
/// completes the rotation, and only then is the new certificate served.
#[tokio::test]
async fn a_bad_rotated_certificate_pair_keeps_the_old_one() -> Result<()> {
    let s = Scratch::new("tls-rotation")?;
    let tls = MusterTls::generate(&s.dir.join("tls"), false)?;
    let port = free_port()?;
    let (kc, addr) = (s.kubeconfig(), listen_on(port));
    let mut args = vec![
        "--kubeconfig".to_string(),
        kc,
        "--listen-addr".to_string(),
        addr,
    ];
    args.extend(tls.muster_args());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let _m = Running {
        child: s.command(&args, &[])?.spawn()?,
        port,
    };
    let old = tls.server.der()?;
    // A new client (no TLS session to resume) per request: a resumed session presents no
    // certificate, and the client would report the one of the first handshake.
    let served = |tls: MusterTls| async move {
        tls.client()?
            .get(port, "/healthz", Duration::from_secs(5))
            .await
            .map(|r| (r.status, r.peer_cert))
    };
    let first = wait_for("muster to serve HTTPS", SOON, || {
        let tls = tls.clone();
        async move {
            Ok(match served(tls).await {
                Ok(r) => Progress::Done(r),
                Err(e) => Progress::NotYet(format!("{e:#}")),
            })
        }
    })
    .await
    .with_context(|| s.stdout())?;
    assert_eq!(first, (200, old.clone()));

    let next = tls.ca.issue("next", Usage::Server)?;
    std::fs::copy(&next.cert, &tls.server.cert)?;
    s.wait_stdout(
        "muster to refuse the half-rotated pair",
        CERT_CHECK,
        |out| {
            out.lines()
                .any(|l| {
                    l.contains("keeping the old certificate")
                        && l.contains("do not belong together")
                })
                .then_some(())
        },
    )
    .await?;
    assert_eq!(
        served(tls.clone()).await?,
        (200, old.clone()),
        "the old one is served"
    );

    std::fs::copy(&next.key, &tls.server.key)?;
    let new = cert_der(&next.cert)?;
    wait_for("the completed rotation to be served", CERT_CHECK, || {
        let (tls, new, old) = (tls.clone(), new.clone(), old.clone());
        async move {
            Ok(match served(tls).await {
                Ok((200, cert)) if cert == new => Progress::Done(()),
                Ok((status, cert)) => Progress::NotYet(format!(
                    "HTTP {status}, {} certificate",
                    if cert == old { "the old" } else { "another" }
                )),
                Err(e) => Progress::NotYet(format!("{e:#}")),
            })
        }
    })
    .await?;
    Ok(())
}
