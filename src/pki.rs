//! The self-managed certificates (`--self-managed-certs`): a CA, muster's serving certificate and
//! kube-scheduler's client certificate, and when a certificate must be issued again. Pure: the
//! clock is passed in and nothing is read or written here; `cluster::certs` keeps the results in
//! Secrets and on disk.

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

/// The CA's subject. The CA certificate is made once; leaves are signed by rebuilding this
/// issuer from the stored key, so the subject must never change.
pub const CA_COMMON_NAME: &str = "muster-ca";
/// The CA outlives any sensible leaf lifetime; it is not rotated (see deploy/README.md).
pub const CA_LIFETIME: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// Certificates are valid from a little before they are made, so a peer whose clock is behind
/// accepts them at once.
const BACKDATE: Duration = Duration::from_secs(5 * 60);

/// A PEM certificate and its PEM (PKCS#8) private key.
#[derive(Clone, PartialEq, Eq)]
pub struct Pem {
    pub cert: String,
    pub key: String,
}

impl std::fmt::Debug for Pem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a private key.
        f.debug_struct("Pem").field("cert", &self.cert).finish()
    }
}

/// What a leaf certificate is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Leaf {
    /// muster's HTTPS listener: serverAuth, valid for these DNS names and IP addresses.
    Serving { hosts: Vec<String> },
    /// What kube-scheduler presents to muster: clientAuth.
    Client { common_name: String },
}

impl Leaf {
    /// A one-line description of everything the certificate is made from; stored beside it so a
    /// change of flags (e.g. new host names) makes muster issue it again.
    pub fn spec(&self) -> String {
        match self {
            Leaf::Serving { hosts } => format!("serving {}", hosts.join(",")),
            Leaf::Client { common_name } => format!("client {common_name}"),
        }
    }
}

fn ca_params(now: SystemTime) -> CertificateParams {
    let mut p = CertificateParams::default();
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name
        .push(DnType::CommonName, CA_COMMON_NAME);
    p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    p.not_before = (now - BACKDATE).into();
    p.not_after = (now + CA_LIFETIME).into();
    p
}

/// A new self-signed CA (ECDSA P-256).
pub fn new_ca(now: SystemTime) -> anyhow::Result<Pem> {
    let key = KeyPair::generate().context("generating the CA key")?;
    let cert = ca_params(now)
        .self_signed(&key)
        .context("signing the CA certificate")?;
    Ok(Pem {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// A new key and certificate for `leaf`, signed by `ca`, valid for `lifetime` from `now`.
pub fn issue(ca: &Pem, leaf: &Leaf, now: SystemTime, lifetime: Duration) -> anyhow::Result<Pem> {
    let ca_key = KeyPair::from_pem(&ca.key).context("the CA Secret's tls.key is not a PEM key")?;
    let issuer = Issuer::new(ca_params(now), ca_key);
    let mut p = CertificateParams::default();
    p.distinguished_name = DistinguishedName::new();
    match leaf {
        Leaf::Serving { hosts } => {
            let first = hosts
                .first()
                .context("a serving certificate needs a host")?;
            p.distinguished_name
                .push(DnType::CommonName, first.as_str());
            for h in hosts {
                p.subject_alt_names.push(match h.parse::<IpAddr>() {
                    Ok(ip) => SanType::IpAddress(ip),
                    Err(_) => SanType::DnsName(
                        h.clone()
                            .try_into()
                            .with_context(|| format!("{h:?} is not a DNS name"))?,
                    ),
                });
            }
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        }
        Leaf::Client { common_name } => {
            p.distinguished_name
                .push(DnType::CommonName, common_name.as_str());
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        }
    }
    p.is_ca = IsCa::ExplicitNoCa;
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.use_authority_key_identifier_extension = true;
    p.not_before = (now - BACKDATE).into();
    p.not_after = (now + lifetime).into();
    let key = KeyPair::generate().context("generating a key")?;
    let cert = p
        .signed_by(&key, &issuer)
        .with_context(|| format!("signing the {} certificate", leaf.spec()))?;
    Ok(Pem {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// What is known about a leaf certificate already stored (from its Secret).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    /// [`Leaf::spec`] it was made from.
    pub spec: String,
    /// The CA certificate stored with it (PEM).
    pub ca_cert: String,
    pub issued_at: SystemTime,
    pub not_after: SystemTime,
}

/// Whether a stored leaf certificate can stay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// Still good; look again at `renew_at`.
    Keep { renew_at: SystemTime },
    /// Issue a new one, for this reason.
    Issue(String),
}

/// When two thirds of a certificate's life have passed: early enough that the clients that read
/// it from a mounted Secret (kubelet refreshes those within about a minute) have it well before
/// the old one expires.
pub fn renew_at(issued_at: SystemTime, not_after: SystemTime) -> SystemTime {
    let life = not_after.duration_since(issued_at).unwrap_or_default();
    issued_at + life * 2 / 3
}

/// Decides whether the certificate `stored` (None: there is none) must be issued again for
/// `want` under the CA `ca_cert`.
pub fn renewal(stored: Option<&Stored>, want: &Leaf, ca_cert: &str, now: SystemTime) -> Renewal {
    let Some(s) = stored else {
        return Renewal::Issue("there is none yet".into());
    };
    if s.spec != want.spec() {
        return Renewal::Issue(format!(
            "it was made for \"{}\", wanted \"{}\"",
            s.spec,
            want.spec()
        ));
    }
    if s.ca_cert.trim() != ca_cert.trim() {
        return Renewal::Issue("it was signed by another CA".into());
    }
    let at = renew_at(s.issued_at, s.not_after);
    if now >= at {
        return Renewal::Issue(format!(
            "two thirds of its life have passed (expires {})",
            humantime::format_rfc3339_seconds(s.not_after)
        ));
    }
    Renewal::Keep { renew_at: at }
}

/// How often the stored certificates are looked at: often enough to renew well within the last
/// third of a lifetime, at most hourly.
pub fn check_interval(lifetime: Duration) -> Duration {
    (lifetime / 10).clamp(Duration::from_secs(1), Duration::from_secs(3600))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::danger::ServerCertVerifier;
    use rustls::client::WebPkiServerVerifier;
    use rustls::crypto::ring::default_provider;
    use rustls::server::WebPkiClientVerifier;
    use rustls::RootCertStore;
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
    use std::sync::Arc;

    const DAY: Duration = Duration::from_secs(24 * 3600);

    fn der(pem: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
    }

    fn roots(ca: &Pem) -> Arc<RootCertStore> {
        let mut r = RootCertStore::empty();
        r.add(der(&ca.cert)).unwrap();
        Arc::new(r)
    }

    fn serving() -> Leaf {
        Leaf::Serving {
            hosts: vec!["muster.muster-system.svc".into(), "127.0.0.1".into()],
        }
    }

    fn client() -> Leaf {
        Leaf::Client {
            common_name: "muster-scheduler".into(),
        }
    }

    fn at(t: SystemTime) -> UnixTime {
        UnixTime::since_unix_epoch(t.duration_since(SystemTime::UNIX_EPOCH).unwrap())
    }

    /// rustls (what muster serves with) and webpki accept the chain for the names asked for.
    #[test]
    fn serving_certificate_verifies_for_its_hosts_only() {
        let now = SystemTime::now();
        let ca = new_ca(now).unwrap();
        let leaf = issue(&ca, &serving(), now, 30 * DAY).unwrap();
        let v =
            WebPkiServerVerifier::builder_with_provider(roots(&ca), Arc::new(default_provider()))
                .build()
                .unwrap();
        let cert = der(&leaf.cert);
        for host in ["muster.muster-system.svc", "127.0.0.1"] {
            let name = ServerName::try_from(host).unwrap();
            v.verify_server_cert(&cert, &[], &name, &[], at(now))
                .unwrap_or_else(|e| panic!("{host}: {e}"));
        }
        let other = ServerName::try_from("evil.example").unwrap();
        assert!(v
            .verify_server_cert(&cert, &[], &other, &[], at(now))
            .is_err());
        // Expired a day after its lifetime.
        let later = at(now + 31 * DAY);
        let name = ServerName::try_from("127.0.0.1").unwrap();
        assert!(v.verify_server_cert(&cert, &[], &name, &[], later).is_err());
    }

    /// The client certificate is accepted by the verifier muster uses for
    /// --tls-client-ca-file; a serving certificate (no clientAuth) and a certificate from
    /// another CA are not.
    #[test]
    fn client_certificate_is_accepted_and_others_are_not() {
        let now = SystemTime::now();
        let ca = new_ca(now).unwrap();
        let v =
            WebPkiClientVerifier::builder_with_provider(roots(&ca), Arc::new(default_provider()))
                .build()
                .unwrap();
        let good = issue(&ca, &client(), now, 30 * DAY).unwrap();
        v.verify_client_cert(&der(&good.cert), &[], at(now))
            .unwrap();
        let serving = issue(&ca, &serving(), now, 30 * DAY).unwrap();
        assert!(v
            .verify_client_cert(&der(&serving.cert), &[], at(now))
            .is_err());
        let other_ca = new_ca(now).unwrap();
        let foreign = issue(&other_ca, &client(), now, 30 * DAY).unwrap();
        assert!(v
            .verify_client_cert(&der(&foreign.cert), &[], at(now))
            .is_err());
    }

    /// A leaf issued later from the stored CA key (a restarted muster) still chains to the
    /// stored CA certificate.
    #[test]
    fn leaves_issued_from_the_stored_ca_key_chain_to_the_stored_ca() {
        let made = SystemTime::now() - 100 * DAY;
        let ca = new_ca(made).unwrap();
        let now = SystemTime::now();
        let leaf = issue(&ca, &client(), now, 30 * DAY).unwrap();
        let v =
            WebPkiClientVerifier::builder_with_provider(roots(&ca), Arc::new(default_provider()))
                .build()
                .unwrap();
        v.verify_client_cert(&der(&leaf.cert), &[], at(now))
            .unwrap();
    }

    #[test]
    fn bad_input_is_refused() {
        let now = SystemTime::now();
        let ca = new_ca(now).unwrap();
        let broken = Pem {
            cert: ca.cert.clone(),
            key: "not a key".into(),
        };
        let e = issue(&broken, &client(), now, DAY).unwrap_err();
        assert!(format!("{e:#}").contains("tls.key"), "{e:#}");
        let e = issue(&ca, &Leaf::Serving { hosts: vec![] }, now, DAY).unwrap_err();
        assert!(format!("{e:#}").contains("needs a host"), "{e:#}");
    }

    #[test]
    fn renewal_decisions() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        let stored = Stored {
            spec: client().spec(),
            ca_cert: "CA".into(),
            issued_at: t0,
            not_after: t0 + 90 * DAY,
        };
        let keep = renewal(Some(&stored), &client(), "CA\n", t0 + 59 * DAY);
        assert_eq!(
            keep,
            Renewal::Keep {
                renew_at: t0 + 60 * DAY
            }
        );
        let cases = [
            (None, "CA", t0, "none yet"),
            (Some(&stored), "CA", t0 + 60 * DAY, "two thirds"),
            (Some(&stored), "OTHER", t0, "another CA"),
        ];
        for (s, ca, now, why) in cases {
            match renewal(s, &client(), ca, now) {
                Renewal::Issue(r) => assert!(r.contains(why), "{r}"),
                k => panic!("expected a new certificate ({why}), got {k:?}"),
            }
        }
        match renewal(Some(&stored), &serving(), "CA", t0) {
            Renewal::Issue(r) => assert!(r.contains("wanted \"serving"), "{r}"),
            k => panic!("{k:?}"),
        }
    }

    #[test]
    fn check_interval_is_a_tenth_of_the_lifetime_within_bounds() {
        assert_eq!(
            check_interval(Duration::from_secs(30)),
            Duration::from_secs(3)
        );
        assert_eq!(check_interval(90 * DAY), Duration::from_secs(3600));
        assert_eq!(
            check_interval(Duration::from_secs(5)),
            Duration::from_secs(1)
        );
    }
}
