//! How Sluice's own TLS handshakes go (the client-facing side): ingress-nginx's `ssl-*`
//! ConfigMap keys, and the per-host cipher list of the `ssl-ciphers` /
//! `ssl-prefer-server-ciphers` annotations.
//!
//! ```text
//!  ConfigMap ssl-protocols, ssl-ciphers, ssl-ecdh-curve, ssl-session-*, ssl-reject-handshake,
//!            ssl-buffer-size ─(translate configmap)─▶ Settings.server_tls: ServerTls
//!  annotations ssl-ciphers / ssl-prefer-server-ciphers ─(translate, the host's oldest Ingress
//!            that sets each)─▶ HostTls.ciphers: HostCiphers for that host's handshake
//!  proxy: ServerTls (compared by value) ─▶ the listener's rustls ServerConfig, rebuilt when it
//!         changes; HostCiphers ─▶ the host's own ServerConfig
//! ```
//! Plain data: suites and groups are IANA code points, so this compares and hashes without
//! rustls' types doing so; the proxy turns them into rustls' suites and groups.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::upstream_tls::TlsVersions;

/// The TLS 1.2 suites rustls (with aws-lc-rs) speaks, in ingress-nginx's default order (its
/// `ssl-ciphers` default, less the DHE suites rustls does not have).
pub const TLS12_DEFAULT: [rustls::CipherSuite; 6] = [
    rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    rustls::CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
];

/// nginx: "one megabyte of the cache contains about 4000 sessions".
pub const SESSIONS_PER_MEGABYTE: u64 = 4000;

/// The client-facing handshake, as the ConfigMap sets it (defaults: ingress-nginx's).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ServerTls {
    /// `ssl-protocols`, as far as rustls speaks them (TLS 1.2 and 1.3).
    pub protocols: TlsVersions,
    /// `ssl-ciphers`: the TLS 1.2 suites, most preferred first. TLS 1.3's are not set by it
    /// (as OpenSSL's `ssl_ciphers`, which leaves them to `ciphersuites`): all of them apply.
    pub ciphers: CipherSuites,
    /// The server's order of `ciphers` decides, not the client's (nginx's
    /// `ssl_prefer_server_ciphers`, which ingress-nginx turns on with a cipher list).
    pub prefer_server_ciphers: bool,
    /// `ssl-ecdh-curve`: the key exchange groups, most preferred first; `None`: `auto` (the
    /// crypto provider's own list).
    pub ecdh_curves: Option<KxGroups>,
    /// `ssl-session-cache`: clients may resume by session ID.
    pub session_cache: bool,
    /// `ssl-session-cache-size`, in sessions (one cache for every worker).
    pub session_cache_sessions: usize,
    /// `ssl-session-timeout`: how long after its handshake a session may be resumed, by ID
    /// or by ticket; also the lifetime a ticket announces.
    #[serde(serialize_with = "crate::settings::as_text")]
    pub session_timeout: Duration,
    /// `ssl-session-ticket-key`: tickets are sealed with keys made from it, so every replica
    /// holding it resumes the others' tickets. `None`: keys of this process (rotated).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_ticket_key: Option<TicketKey>,
    /// `ssl-reject-handshake`: a handshake naming no host Sluice serves, or none, is refused
    /// with an alert (nginx's `ssl_reject_handshake` in its default server).
    pub reject_handshake: bool,
    /// `use-http2`: HTTP/2 is offered (ALPN `h2`) to TLS clients; off, HTTP/1.1 only.
    pub http2: bool,
    /// `ssl-buffer-size`: the most plaintext one TLS record carries; `None`: TLS's 16 KiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buffer_size: Option<usize>,
}

impl Default for ServerTls {
    fn default() -> ServerTls {
        ServerTls {
            protocols: TlsVersions::ALL,
            ciphers: CipherSuites::tls12_default(),
            prefer_server_ciphers: true,
            ecdh_curves: None,
            session_cache: true,
            // ingress-nginx's `10m`.
            session_cache_sessions: (10 * SESSIONS_PER_MEGABYTE) as usize,
            session_timeout: Duration::from_secs(600),
            session_ticket_key: None,
            reject_handshake: false,
            http2: true,
            buffer_size: None,
        }
    }
}

impl ServerTls {
    /// Every value is the default (settings views leave the block out then).
    pub fn is_default(&self) -> bool {
        *self == ServerTls::default()
    }
}

/// TLS 1.2 cipher suites, most preferred first, by IANA code point.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct CipherSuites(pub Vec<u16>);

impl CipherSuites {
    pub fn tls12_default() -> CipherSuites {
        CipherSuites::of(&TLS12_DEFAULT)
    }

    pub fn of(suites: &[rustls::CipherSuite]) -> CipherSuites {
        CipherSuites(suites.iter().map(|s| u16::from(*s)).collect())
    }

    /// rustls' names for them.
    pub fn suites(&self) -> impl Iterator<Item = rustls::CipherSuite> + '_ {
        self.0.iter().map(|code| rustls::CipherSuite::from(*code))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for CipherSuites {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.suites()).finish()
    }
}

impl Serialize for CipherSuites {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.suites().map(|s| format!("{s:?}")))
    }
}

/// Key exchange groups, most preferred first, by IANA code point.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct KxGroups(pub Vec<u16>);

impl KxGroups {
    /// rustls' names for them.
    pub fn groups(&self) -> impl Iterator<Item = rustls::NamedGroup> + '_ {
        self.0.iter().map(|code| rustls::NamedGroup::from(*code))
    }
}

impl fmt::Debug for KxGroups {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.groups()).finish()
    }
}

impl Serialize for KxGroups {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.groups().map(|g| format!("{g:?}")))
    }
}

/// The bytes of `ssl-session-ticket-key` (48 or 80, as nginx's `ssl_session_ticket_key`
/// file). Never shown: views say only that one is set.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TicketKey(pub Arc<[u8]>);

impl fmt::Debug for TicketKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TicketKey({} bytes)", self.0.len())
    }
}

impl Serialize for TicketKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str("(set)")
    }
}

/// One host's own cipher settings (the `ssl-ciphers` / `ssl-prefer-server-ciphers`
/// annotations, ingress-nginx's `server` level): each `None` keeps the ConfigMap's.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct HostCiphers {
    pub suites: Option<CipherSuites>,
    pub prefer_server: Option<bool>,
}

impl HostCiphers {
    /// What `/config` and golden files show.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(suites) = &self.suites {
            parts.push(format!("ciphers {suites:?}"));
        }
        if let Some(prefer) = self.prefer_server {
            parts.push(format!("prefer-server-ciphers {prefer}"));
        }
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_ingress_nginx_s() {
        let tls = ServerTls::default();
        assert!(tls.is_default());
        assert_eq!(tls.protocols, TlsVersions::ALL);
        assert_eq!(tls.session_cache_sessions, 40_000);
        assert_eq!(tls.session_timeout, Duration::from_secs(600));
        assert!(tls.prefer_server_ciphers);
        assert_eq!(
            format!("{:?}", tls.ciphers),
            "[TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, \
             TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, \
             TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, \
             TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256]"
        );
        let key = TicketKey(Arc::from(vec![7u8; 48]));
        assert_eq!(format!("{key:?}"), "TicketKey(48 bytes)");
    }
}
