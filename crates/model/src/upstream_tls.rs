//! How connections to a route's endpoints are made TLS (`backend-protocol: HTTPS`/`GRPCS`,
//! `proxy-ssl-*`; a mirror's `https://` target): plain data the proxy turns into one TLS client
//! configuration per distinct value.
//!
//! ```text
//!  proxy-ssl-* + Secret ─▶ UpstreamTls ─▶ RoutePolicy::upstream_tls, Mirror::tls
//!  BackendTLSPolicy (+ the Gateway's client certificate) ─▶ UpstreamTls ─▶ RoutePolicy::upstream_tls
//!  proxy: UpstreamTls (compared by content) ─▶ one rustls client config and session cache
//! ```

use std::fmt;
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::sign::CertifiedKey;
use serde::{Serialize, Serializer};

/// How connections to a route's endpoints are made TLS (`proxy-ssl-*`, ingress-nginx's
/// defaults: no verification, no SNI). Compared by content: the proxy keeps one TLS client
/// configuration, and so one session cache, per distinct value, and never pools a connection
/// made with one value for a route with another.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct UpstreamTls {
    /// `proxy-ssl-verify`: the endpoint's certificate must chain to `trusted` and name `name`.
    pub verify: bool,
    /// `proxy-ssl-verify-depth`: at most this many intermediate certificates between the
    /// endpoint's certificate and a trusted one.
    pub verify_depth: u32,
    /// `proxy-ssl-name`, else `<service>.<namespace>.svc`: checked in the certificate, and sent
    /// as SNI when `server_name` is on.
    pub name: String,
    /// `proxy-ssl-server-name`: send `name` as SNI (nginx's default: off).
    pub server_name: bool,
    /// `proxy-ssl-protocols`, as far as rustls speaks them.
    pub versions: TlsVersions,
    /// `proxy-ssl-secret` (namespace/name), or `BackendTLSPolicy <namespace/name>`: where the
    /// settings come from, for display.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// The Secret's `ca.crt` (shown as a count).
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "count")]
    pub trusted: Vec<CertificateDer<'static>>,
    /// The Secret's `tls.crt` and `tls.key`: presented when the endpoint asks (mTLS).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "present")]
    pub client_cert: Option<Arc<CertifiedKey>>,
    /// BackendTLSPolicy's `subjectAltNames`: when any, the certificate must carry one of
    /// them and `name` is only sent as SNI (the spec: the hostname then authenticates nothing).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subject_alt_names: Vec<SubjectAltName>,
    /// BackendTLSPolicy's `wellKnownCACertificates: System`: the proxy's built-in roots
    /// (Mozilla's, compiled in) are trusted too.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub system_roots: bool,
}

/// One name a backend's certificate may carry (BackendTLSPolicy's `subjectAltNames`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SubjectAltName {
    /// A DNS name (a `*.` wildcard in the certificate covers one label).
    Hostname(String),
    /// A URI SAN, compared whole (SPIFFE IDs: `spiffe://trust-domain/path`).
    Uri(String),
}

/// The TLS versions an upstream connection may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TlsVersions {
    pub tls12: bool,
    pub tls13: bool,
}

impl PartialEq for UpstreamTls {
    /// A client certificate is compared by its chain: a certificate names one public key, and
    /// its key was checked to match it.
    fn eq(&self, other: &UpstreamTls) -> bool {
        self.verify == other.verify
            && self.verify_depth == other.verify_depth
            && self.name == other.name
            && self.server_name == other.server_name
            && self.versions == other.versions
            && self.secret == other.secret
            && self.trusted == other.trusted
            && self.subject_alt_names == other.subject_alt_names
            && self.system_roots == other.system_roots
            && match (&self.client_cert, &other.client_cert) {
                (None, None) => true,
                (Some(a), Some(b)) => a.cert == b.cert,
                _ => false,
            }
    }
}

impl Eq for UpstreamTls {}

/// What a list of nginx's protocol names (`ssl_protocols`, `proxy_ssl_protocols`) asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtocolWords<'a> {
    /// The versions rustls speaks among them, and the older names it cannot (`SSLv3`, ...).
    Read {
        versions: TlsVersions,
        dropped: Vec<&'a str>,
    },
    /// A word that is no protocol nginx knows.
    Unknown(&'a str),
}

impl TlsVersions {
    pub const ALL: TlsVersions = TlsVersions {
        tls12: true,
        tls13: true,
    };

    /// What the protocols nginx accepts in `ssl_protocols` mean, so the ConfigMap key and the
    /// `proxy-ssl-protocols` annotation read them alike.
    pub const EXPECTED: &'static str =
        "protocols among SSLv2 SSLv3 TLSv1 TLSv1.1 TLSv1.2 TLSv1.3, separated by spaces";

    /// Reads nginx's protocol names separated by spaces. The versions may come out empty
    /// (only older protocols named); the caller says what applies then.
    pub fn parse_nginx(value: &str) -> ProtocolWords<'_> {
        let mut versions = TlsVersions {
            tls12: false,
            tls13: false,
        };
        let mut dropped = Vec::new();
        for word in value.split_whitespace() {
            match word {
                "TLSv1.2" => versions.tls12 = true,
                "TLSv1.3" => versions.tls13 = true,
                "SSLv2" | "SSLv3" | "TLSv1" | "TLSv1.1" => dropped.push(word),
                _ => return ProtocolWords::Unknown(word),
            }
        }
        ProtocolWords::Read { versions, dropped }
    }

    /// Neither version: nothing to speak.
    pub fn is_empty(&self) -> bool {
        !self.tls12 && !self.tls13
    }
}

impl fmt::Display for TlsVersions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.tls12, self.tls13) {
            (true, true) => f.write_str("TLSv1.2 TLSv1.3"),
            (true, false) => f.write_str("TLSv1.2"),
            (false, true) => f.write_str("TLSv1.3"),
            (false, false) => f.write_str("none"),
        }
    }
}

impl Serialize for TlsVersions {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

fn count<S: Serializer, T>(items: &[T], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_u64(items.len() as u64)
}

fn present<S: Serializer, T>(item: &Option<T>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_bool(item.is_some())
}

/// The URI names of a certificate's subjectAltName extension (none when it cannot be read):
/// what a [`SubjectAltName::Uri`] is compared with.
pub fn uri_names(der: &[u8]) -> Vec<String> {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return Vec::new();
    };
    match cert.subject_alternative_name() {
        Ok(Some(san)) => (san.value.general_names.iter())
            .filter_map(|name| match name {
                x509_parser::extensions::GeneralName::URI(uri) => Some((*uri).to_owned()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}
