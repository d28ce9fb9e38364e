//! Command-line flags (each also settable by environment variable), validated at start-up so a
//! bad value fails at once with the flag named.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::http::DEFAULT_MAX_BODY_BYTES;
use crate::model::ModelConfig;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Gang scheduling for the stock kube-scheduler, as an HTTP extender.
#[derive(Clone, Debug, Parser)]
#[command(name = "muster", version, about)]
pub struct Args {
    /// Address to serve the extender verbs, /healthz, /readyz, /metrics and /gangs on.
    #[arg(long, env = "MUSTER_LISTEN_ADDR", default_value = "0.0.0.0:8888")]
    pub listen_addr: SocketAddr,

    /// Path under which the verbs are served: the path part of the extender `urlPrefix`
    /// ("" serves /filter, /prioritize, /bind).
    #[arg(long, env = "MUSTER_URL_PREFIX", default_value = "", value_parser = parse_prefix)]
    pub url_prefix: String,

    /// kubeconfig file; without it, muster uses $KUBECONFIG, ~/.kube/config or the in-cluster
    /// service account, in that order.
    #[arg(long, env = "MUSTER_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// How long a gang may hold seats without reaching quorum before all are released
    /// (per gang: annotation muster.dev/gang-timeout).
    #[arg(long, env = "MUSTER_GANG_TIMEOUT", default_value = "60s", value_parser = parse_positive_duration)]
    pub gang_timeout: Duration,

    /// How long a gang that timed out is refused before it may take seats again.
    #[arg(long, env = "MUSTER_GANG_BACKOFF", default_value = "10s", value_parser = parse_duration)]
    pub gang_backoff: Duration,

    /// Room for members of a gang not created yet is held only this long after the newest
    /// member appeared; a gang without a declared size decides its quorum only after it.
    #[arg(long, env = "MUSTER_CREATION_WINDOW", default_value = "5s", value_parser = parse_creation_window)]
    pub creation_window: Duration,

    /// How long a bind call of a gang member below quorum is held open for the rest of the gang
    /// (0s: answer "waiting" at once). Keep it below the extender's httpTimeout.
    #[arg(long, env = "MUSTER_BIND_WAIT", default_value = "5s", value_parser = parse_bind_wait)]
    pub bind_wait: Duration,

    /// Largest request body accepted, in bytes.
    #[arg(long, env = "MUSTER_MAX_BODY_BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES,
          value_parser = parse_body_limit)]
    pub max_body_bytes: usize,

    /// Log filter, e.g. "info" or "muster=debug,kube=warn".
    #[arg(long, env = "MUSTER_LOG_LEVEL", default_value = "info", value_parser = parse_log_filter)]
    pub log_level: String,

    /// Serve HTTPS with this PEM certificate (chain); re-read when the file changes.
    #[arg(long, env = "MUSTER_TLS_CERT_FILE", requires = "tls_key_file")]
    pub tls_cert_file: Option<PathBuf>,

    /// PEM private key of --tls-cert-file.
    #[arg(long, env = "MUSTER_TLS_KEY_FILE", requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,

    /// Require clients (kube-scheduler) to present a certificate signed by this PEM CA.
    #[arg(long, env = "MUSTER_TLS_CLIENT_CA_FILE", requires = "tls_cert_file")]
    pub tls_client_ca_file: Option<PathBuf>,

    /// Log line format.
    #[arg(long, env = "MUSTER_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

impl Args {
    pub fn tls(&self) -> Option<crate::tls::TlsFiles> {
        match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(cert), Some(key)) => Some(crate::tls::TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: self.tls_client_ca_file.clone(),
            }),
            _ => None,
        }
    }

    pub fn model_config(&self) -> ModelConfig {
        ModelConfig {
            default_timeout: self.gang_timeout,
            backoff: self.gang_backoff,
            creation_window: self.creation_window,
            ..ModelConfig::default()
        }
    }
}

fn parse_prefix(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s.is_empty() || s == "/" {
        return Ok(String::new());
    }
    if !s.starts_with('/') {
        return Err(format!("must start with '/' (got {s:?}), e.g. /muster"));
    }
    if s.contains(['?', '#', ' ']) {
        return Err("must be a plain path without '?', '#' or spaces".into());
    }
    Ok(s.trim_end_matches('/').to_string())
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim()).map_err(|e| format!("{e} (use e.g. 30s, 2m, 1h)"))
}

fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d.is_zero() => Err("must be longer than zero".into()),
        d => Ok(d),
    }
}

fn parse_bind_wait(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d > Duration::from_secs(60) => {
            Err("must be at most 60s, and below the extender's httpTimeout".into())
        }
        d => Ok(d),
    }
}

fn parse_creation_window(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d > Duration::from_secs(600) => Err(
            "must be at most 10m: room held for pods that may never come is taken from others"
                .into(),
        ),
        d => Ok(d),
    }
}

fn parse_body_limit(s: &str) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("must be a number of bytes, got {s:?}"))?;
    if n < 1024 {
        return Err(
            "must be at least 1024 bytes: kube-scheduler's smallest request is larger".into(),
        );
    }
    Ok(n)
}

fn parse_log_filter(s: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::try_new(s)
        .map(|_| s.to_string())
        .map_err(|e| format!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, String> {
        let mut argv = vec!["muster"];
        argv.extend_from_slice(args);
        Args::try_parse_from(argv).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_sane() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.listen_addr.port(), 8888);
        assert_eq!(a.url_prefix, "");
        assert_eq!(a.gang_timeout, Duration::from_secs(60));
        assert_eq!(a.creation_window, Duration::from_secs(5));
        assert_eq!(a.model_config().creation_window, Duration::from_secs(5));
        assert_eq!(a.max_body_bytes, 32 << 20);
        assert_eq!(a.log_format, LogFormat::Text);
    }

    #[test]
    fn bad_flags_are_named() {
        let cases = [
            (vec!["--listen-addr", "nowhere"], "--listen-addr"),
            (vec!["--url-prefix", "muster"], "must start with '/'"),
            (vec!["--gang-timeout", "0s"], "--gang-timeout"),
            (vec!["--gang-timeout", "soon"], "--gang-timeout"),
            (vec!["--max-body-bytes", "10"], "--max-body-bytes"),
            (vec!["--log-level", "muster=loud"], "--log-level"),
            (vec!["--log-format", "xml"], "--log-format"),
            (vec!["--bind-wait", "5m"], "--bind-wait"),
            (vec!["--creation-window", "1h"], "--creation-window"),
            (vec!["--creation-window", "later"], "--creation-window"),
            (vec!["--tls-cert-file", "c.pem"], "--tls-key-file"),
            (vec!["--tls-client-ca-file", "ca.pem"], "--tls-cert-file"),
        ];
        for (args, want) in cases {
            let e = parse(&args).unwrap_err();
            assert!(e.contains(want), "{args:?}: {e}");
        }
    }

    #[test]
    fn prefix_is_normalised() {
        assert_eq!(
            parse(&["--url-prefix", "/muster/"]).unwrap().url_prefix,
            "/muster"
        );
        assert_eq!(parse(&["--url-prefix", "/"]).unwrap().url_prefix, "");
    }
}
