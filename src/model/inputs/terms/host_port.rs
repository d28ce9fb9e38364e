//! The host ports a pod binds on its node (those of its containers and sidecars, read by the
//! cluster adapter as `util.GetHostPorts` does), sanitized as kube-scheduler's
//! `HostPortInfo.sanitize` does: an empty hostIP is `0.0.0.0`, an empty protocol `TCP`. Whether
//! two conflict is `rules::node_ports`.

use std::fmt;

/// kube-scheduler's `DefaultBindAllHostIP`.
pub const ALL_HOST_IPS: &str = "0.0.0.0";

/// One host port a pod binds on its node.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    /// `0.0.0.0` when the pod named none.
    pub ip: String,
    /// `TCP` when the pod named none.
    pub protocol: String,
    pub port: i32,
}

impl HostPort {
    /// A port as the API gives it, sanitized as kube-scheduler does. `None` for `hostPort`
    /// absent or not positive (no host port).
    pub fn new(ip: Option<&str>, protocol: Option<&str>, port: Option<i32>) -> Option<Self> {
        let port = port.filter(|p| *p > 0)?;
        Some(HostPort {
            ip: ip
                .filter(|s| !s.is_empty())
                .unwrap_or(ALL_HOST_IPS)
                .to_string(),
            protocol: protocol
                .filter(|s| !s.is_empty())
                .unwrap_or("TCP")
                .to_string(),
            port,
        })
    }
}

impl fmt::Display for HostPort {
    /// `8080/TCP`, or `10.0.0.1:8080/TCP` for a port bound on one IP.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ip != ALL_HOST_IPS {
            write!(f, "{}:", self.ip)?;
        }
        write!(f, "{}/{}", self.port, self.protocol)
    }
}
