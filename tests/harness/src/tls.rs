//! HTTPS for the muster under test: certificates made with the `openssl` command (a CA, a serving
//! certificate for 127.0.0.1, a client certificate), the flags that make muster serve them, the
//! `tlsConfig` kube-scheduler needs, and a small HTTPS client (rustls) that reports which
//! certificate the server presented.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use rustls::crypto::ring::default_provider;
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsConnector;

use crate::process::{parse_http_response, random_string};

/// Runs `openssl <args>`; the error carries its stderr.
pub fn openssl(args: &[&str]) -> Result<()> {
    openssl_output(args).map(|_| ())
}

/// Runs `openssl <args>` and returns its stdout.
pub fn openssl_output(args: &[&str]) -> Result<String> {
    let out = Command::new("openssl")
        .args(args)
        .output()
        .context("running openssl (is the openssl command installed?)")?;
    if !out.status.success() {
        bail!(
            "openssl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// What `curl` made of one request.
#[derive(Debug)]
pub struct CurlResult {
    pub ok: bool,
    /// `%{http_code}`: `000` when no HTTP response came back.
    pub http_code: String,
    pub stderr: String,
}

/// `curl -sS --max-time 5 -o /dev/null -w %{http_code} <args> <url>`, a TLS client apart from
/// the harness's own. CURL_CA_BUNDLE, SSL_CERT_FILE and SSL_CERT_DIR are removed from its
/// environment, so only the flags given count.
pub fn curl(args: &[&str], url: &str) -> Result<CurlResult> {
    let out = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "5",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
        ])
        .args(args)
        .arg(url)
        .env_remove("CURL_CA_BUNDLE")
        .env_remove("SSL_CERT_FILE")
        .env_remove("SSL_CERT_DIR")
        .stdin(std::process::Stdio::null())
        .output()
        .context("running curl (is the curl command installed?)")?;
    Ok(CurlResult {
        ok: out.status.success(),
        http_code: String::from_utf8_lossy(&out.stdout).trim().to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
    })
}

/// A certificate file and its private key file (PEM).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertPair {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl CertPair {
    /// The certificate's serial number as `openssl x509 -serial` prints it (upper-case hex).
    pub fn serial(&self) -> Result<String> {
        cert_serial(&self.cert)
    }

    /// DER bytes of the (first) certificate in the file.
    pub fn der(&self) -> Result<Vec<u8>> {
        cert_der(&self.cert)
    }
}

/// What a certificate is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// serverAuth, SAN `IP:127.0.0.1` and `DNS:localhost`.
    Server,
    /// clientAuth.
    Client,
}

/// A throw-away certificate authority in a directory.
#[derive(Debug, Clone)]
pub struct Ca {
    pub dir: PathBuf,
    /// The CA certificate (what clients trust / what muster's `--tls-client-ca-file` names).
    pub cert: PathBuf,
    key: PathBuf,
}

/// A random positive serial number as `0x` + 16 hex digits (what `-set_serial` takes).
fn random_serial() -> String {
    let hex: String = random_string(16)
        .bytes()
        .enumerate()
        // Leading nibble 1..=7: positive and exactly 8 bytes long.
        .map(|(i, b)| if i == 0 { 1 + b % 7 } else { b % 16 })
        .map(|d| char::from_digit(u32::from(d), 16).expect("below 16"))
        .collect();
    format!("0x{hex}")
}

impl Ca {
    /// Creates `dir` and a self-signed EC P-256 CA named `name` in it (`<name>.crt/.key`).
    pub fn generate(dir: &Path, name: &str) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let cert = dir.join(format!("{name}.crt"));
        let key = dir.join(format!("{name}.key"));
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &key.display().to_string(),
            "-out",
            &cert.display().to_string(),
            "-days",
            "3650",
            "-subj",
            &format!("/CN={name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ])?;
        Ok(Self {
            dir: dir.to_path_buf(),
            cert,
            key,
        })
    }

    /// Issues a fresh key and certificate `<name>.crt/.key` in the CA's directory.
    pub fn issue(&self, name: &str, usage: Usage) -> Result<CertPair> {
        let pair = CertPair {
            cert: self.dir.join(format!("{name}.crt")),
            key: self.dir.join(format!("{name}.key")),
        };
        self.issue_to(name, usage, &pair)?;
        Ok(pair)
    }

    /// Issues a fresh key and certificate (CN `cn`, a new random serial) and writes them over
    /// `to.cert` / `to.key` in place (key first; each file with one `write`). Returns the serial.
    pub fn issue_to(&self, cn: &str, usage: Usage, to: &CertPair) -> Result<String> {
        let work = self.dir.join(format!(".issue-{}", random_string(8)));
        std::fs::create_dir_all(&work)?;
        let r = self.issue_in(&work, cn, usage, to);
        let _ = std::fs::remove_dir_all(&work);
        r
    }

    fn issue_in(&self, work: &Path, cn: &str, usage: Usage, to: &CertPair) -> Result<String> {
        let s = |n: &str| work.join(n).display().to_string();
        openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &s("tls.key"),
            "-out",
            &s("tls.csr"),
            "-subj",
            &format!("/CN={cn}"),
        ])?;
        let ext = match usage {
            Usage::Server => {
                "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=critical,CA:FALSE\n\
                 keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
            }
            Usage::Client => {
                "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n\
                 extendedKeyUsage=clientAuth\n"
            }
        };
        std::fs::write(work.join("tls.ext"), ext)?;
        let serial = random_serial();
        openssl(&[
            "x509",
            "-req",
            "-in",
            &s("tls.csr"),
            "-CA",
            &self.cert.display().to_string(),
            "-CAkey",
            &self.key.display().to_string(),
            "-set_serial",
            &serial,
            "-out",
            &s("tls.crt"),
            "-days",
            "365",
            "-extfile",
            &s("tls.ext"),
        ])?;
        let key = std::fs::read(work.join("tls.key"))?;
        let cert = std::fs::read(work.join("tls.crt"))?;
        std::fs::write(&to.key, key).with_context(|| format!("writing {}", to.key.display()))?;
        std::fs::write(&to.cert, cert).with_context(|| format!("writing {}", to.cert.display()))?;
        cert_serial(&to.cert)
    }
}

/// The serial of the first certificate in a PEM file, upper-case hex without `0x`.
pub fn cert_serial(cert: &Path) -> Result<String> {
    let out = openssl_output(&[
        "x509",
        "-noout",
        "-serial",
        "-in",
        &cert.display().to_string(),
    ])?;
    serial_from_openssl(&out).ok_or_else(|| anyhow!("no serial in openssl output {out:?}"))
}

/// `serial=0A1B` → `0A1B`.
pub fn serial_from_openssl(out: &str) -> Option<String> {
    out.lines()
        .find_map(|l| l.trim().strip_prefix("serial="))
        .map(|s| s.trim().to_ascii_uppercase())
}

/// DER of the first certificate in a PEM file.
pub fn cert_der(cert: &Path) -> Result<Vec<u8>> {
    let c = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("reading {}", cert.display()))?
        .next()
        .ok_or_else(|| anyhow!("no certificate in {}", cert.display()))?
        .with_context(|| format!("parsing {}", cert.display()))?;
    Ok(c.to_vec())
}

/// Everything muster's HTTPS needs in a test: a CA, muster's serving certificate (for
/// 127.0.0.1), and a client certificate from the same CA (what kube-scheduler presents).
#[derive(Debug, Clone)]
pub struct MusterTls {
    pub ca: Ca,
    /// `--tls-cert-file` / `--tls-key-file`.
    pub server: CertPair,
    /// Signed by `ca` for clientAuth.
    pub client: CertPair,
    /// Pass `--tls-client-ca-file <ca>`: clients must present a certificate signed by it.
    pub require_client_cert: bool,
}

impl MusterTls {
    /// Generates the CA (`muster-test-ca`), `server.crt/key` and `client.crt/key` in `dir`.
    pub fn generate(dir: &Path, require_client_cert: bool) -> Result<Self> {
        let ca = Ca::generate(dir, "muster-test-ca")?;
        let server = ca.issue("server", Usage::Server)?;
        let client = ca.issue("client", Usage::Client)?;
        Ok(Self {
            ca,
            server,
            client,
            require_client_cert,
        })
    }

    /// The flags that make muster serve HTTPS with these files.
    pub fn muster_args(&self) -> Vec<String> {
        let mut a = vec![
            "--tls-cert-file".to_string(),
            self.server.cert.display().to_string(),
            "--tls-key-file".to_string(),
            self.server.key.display().to_string(),
        ];
        if self.require_client_cert {
            a.push("--tls-client-ca-file".into());
            a.push(self.ca.cert.display().to_string());
        }
        a
    }

    /// kube-scheduler's extender `tlsConfig`: trust the CA, present the client certificate.
    pub fn extender_tls(&self) -> ExtenderTls {
        ExtenderTls {
            ca_file: Some(self.ca.cert.clone()),
            cert_file: Some(self.client.cert.clone()),
            key_file: Some(self.client.key.clone()),
        }
    }

    /// A client that trusts the CA and presents the client certificate.
    pub fn client(&self) -> Result<HttpsClient> {
        HttpsClient::new(&self.ca.cert, Some(&self.client))
    }

    /// Writes a new serving key and certificate (same CA, new serial) over the files muster
    /// serves, in place. Returns the new serial.
    pub fn rotate_server_cert(&self) -> Result<String> {
        self.ca.issue_to("muster", Usage::Server, &self.server)
    }
}

/// The `tlsConfig` of a kube-scheduler extender (`enableHTTPS: true` is set with it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtenderTls {
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
}

/// One HTTPS response.
#[derive(Debug, Clone)]
pub struct HttpsResponse {
    pub status: u16,
    pub body: String,
    /// DER of the certificate the server presented (the leaf).
    pub peer_cert: Vec<u8>,
}

/// A tiny HTTPS/1.1 client for 127.0.0.1 (one connection per request, `Connection: close`).
#[derive(Clone)]
pub struct HttpsClient {
    config: Arc<ClientConfig>,
}

impl std::fmt::Debug for HttpsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpsClient").finish_non_exhaustive()
    }
}

impl HttpsClient {
    /// Trusts the CA certificates in `ca`; presents `identity` when given.
    pub fn new(ca: &Path, identity: Option<&CertPair>) -> Result<Self> {
        let mut roots = RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(ca)
            .with_context(|| format!("reading {}", ca.display()))?
        {
            roots
                .add(c.with_context(|| format!("parsing {}", ca.display()))?)
                .with_context(|| format!("{} is not a usable CA", ca.display()))?;
        }
        let builder = ClientConfig::builder_with_provider(Arc::new(default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots);
        let mut config = match identity {
            None => builder.with_no_client_auth(),
            Some(p) => {
                let certs = CertificateDer::pem_file_iter(&p.cert)
                    .with_context(|| format!("reading {}", p.cert.display()))?
                    .collect::<Result<Vec<_>, _>>()
                    .with_context(|| format!("parsing {}", p.cert.display()))?;
                let key = PrivateKeyDer::from_pem_file(&p.key)
                    .with_context(|| format!("reading key {}", p.key.display()))?;
                builder.with_client_auth_cert(certs, key)?
            }
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            config: Arc::new(config),
        })
    }

    /// GET `path` on `https://127.0.0.1:<port>`. A refused handshake (or a server that closes
    /// the connection with an alert after it) is an error.
    pub async fn get(&self, port: u16, path: &str, timeout: Duration) -> Result<HttpsResponse> {
        tokio::time::timeout(timeout, self.get_inner(port, path))
            .await
            .map_err(|_| {
                anyhow!("GET https://127.0.0.1:{port}{path} timed out after {timeout:?}")
            })?
    }

    async fn get_inner(&self, port: u16, path: &str) -> Result<HttpsResponse> {
        let tcp = tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port))
            .await
            .with_context(|| format!("connecting to 127.0.0.1:{port}"))?;
        let name = ServerName::from(IpAddr::V4(Ipv4Addr::LOCALHOST));
        let mut tls = TlsConnector::from(self.config.clone())
            .connect(name, tcp)
            .await
            .context("TLS handshake")?;
        let peer_cert = tls
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| c.to_vec())
            .ok_or_else(|| anyhow!("the server presented no certificate"))?;
        let req =
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
        tls.write_all(req.as_bytes())
            .await
            .context("sending the request")?;
        let mut buf = Vec::new();
        if let Err(e) = tls.read_to_end(&mut buf).await {
            // A server closing without close_notify after a complete response is fine; an
            // alert (e.g. "certificate required" in TLS 1.3) before any byte is not.
            if buf.is_empty() || e.kind() != std::io::ErrorKind::UnexpectedEof {
                return Err(anyhow::Error::new(e).context("reading the response"));
            }
        }
        let (status, body) = parse_http_response(&buf, port, path)?;
        Ok(HttpsResponse {
            status,
            body,
            peer_cert,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serials_are_positive_64_bit_hex() {
        for _ in 0..50 {
            let s = random_serial();
            assert_eq!(s.len(), 18, "{s}");
            assert!(s.as_bytes()[2] >= b'1' && s.as_bytes()[2] <= b'7', "{s}");
        }
        assert_eq!(
            serial_from_openssl("serial=0a1B\n").as_deref(),
            Some("0A1B")
        );
    }

    #[test]
    fn generates_a_ca_server_and_client_that_verify() {
        let dir = std::env::temp_dir().join(format!("muster-tls-unit-{}", random_string(6)));
        let t = MusterTls::generate(&dir, true).unwrap();
        for pair in [&t.server, &t.client] {
            let out = openssl_output(&[
                "verify",
                "-CAfile",
                &t.ca.cert.display().to_string(),
                &pair.cert.display().to_string(),
            ])
            .unwrap();
            assert!(out.contains("OK"), "{out}");
        }
        let before = t.server.serial().unwrap();
        let after = t.rotate_server_cert().unwrap();
        assert_ne!(before, after);
        assert_eq!(t.server.serial().unwrap(), after);
        t.client().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
