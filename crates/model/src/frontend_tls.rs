//! Client certificates per listener port: Gateway API's frontend validation
//! (`spec.tls.frontend`, default and perPort). The setting belongs to a port of a site, not to
//! a host, so the handshake of every connection to that port follows it, whatever its SNI.
//!
//! ```text
//!  Gateway spec.tls.frontend ─(translate gateway/frontend_tls)─▶ Certificates.ports[port]
//!     (the Gateway's site's certificates, or the shared ones):
//!       Handshake(HostTls)  AllowValidOnly: client_cert_required (the CAs' verifier): no
//!                           certificate or a bad one fails the handshake
//!                           AllowInsecureFallback: client_cert_request only (asked, any
//!                           chain accepted), as an Ingress host's `auth-tls-*` handshake
//!       Refuse              no usable CA: the connection is closed before the handshake
//!  proxy: ClientHello peeked ─▶ the port's entry, merged with the host's own handshake
//! ```
//! One mechanism with the Ingresses' client certificates (`client_cert`): the same CA type,
//! the same per-handshake choice of a `ServerConfig` ([`HostTls`], defined here and keyed by
//! host in `tls::Certificates`, by port in its `ports`); only the key differs.

use std::sync::Arc;

use crate::client_cert::ClientCa;
use crate::server_tls::HostCiphers;

/// How the TLS handshake of one host differs from the listener's, chosen by the ClientHello's
/// server name before the handshake starts (one listener, many hosts): client certificates
/// per host (`auth-tls-*`, `client_cert.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostTls {
    /// The ALPN protocols offered, most preferred first (the listener's: `h2`, `http/1.1`).
    pub alpn: Vec<Vec<u8>>,
    /// A client certificate is asked for (never required: a missing or bad one is answered
    /// in HTTP, 400, as ingress-nginx does), naming these CAs (DER subjects).
    pub client_cert_request: Option<Vec<Vec<u8>>>,
    /// A client certificate of these CAs is required in the handshake itself (Gateway API's
    /// frontend validation, `frontend_tls`): none, or one that does not verify, fails it.
    pub client_cert_required: Option<Arc<ClientCa>>,
    /// The host's own cipher list and order (`ssl-ciphers`, `ssl-prefer-server-ciphers`);
    /// `None`: the ConfigMap's.
    pub ciphers: Option<HostCiphers>,
}

/// How the handshakes on one port of a site go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortTls {
    /// With this handshake (merged with a host's own, if it has one).
    Handshake(Arc<HostTls>),
    /// Closed before any handshake: the validation asked for has no usable CA (why).
    Refuse(Arc<str>),
}

impl PortTls {
    /// What `/config` and golden files show.
    pub fn describe(&self) -> String {
        match self {
            PortTls::Handshake(tls) => match &tls.client_cert_required {
                Some(ca) => format!("require a client certificate of {}", ca.secret),
                None => "ask for a client certificate, accept any (AllowInsecureFallback)".into(),
            },
            PortTls::Refuse(why) => format!("refuse every handshake: {why}"),
        }
    }

    /// The handshake of a connection to this port whose host has a handshake of its own
    /// (`host`): the host's ALPN and CA names, this port's requirement. `None`: refused.
    pub fn merged(&self, host: Option<&Arc<HostTls>>) -> Option<Arc<HostTls>> {
        let PortTls::Handshake(port) = self else {
            return None;
        };
        Some(match host {
            None => port.clone(),
            Some(host) if host.client_cert_required == port.client_cert_required => host.clone(),
            Some(host) => Arc::new(HostTls {
                alpn: host.alpn.clone(),
                client_cert_request: (host.client_cert_request.clone())
                    .or_else(|| port.client_cert_request.clone()),
                client_cert_required: port.client_cert_required.clone(),
                ciphers: host.ciphers.clone(),
            }),
        })
    }
}
