//! TLS termination: the certificate is chosen per handshake from the *current* configuration.
//!
//! A rotated Secret therefore applies to the next handshake with nothing rebuilt, and open
//! connections keep the keys they negotiated. The `ServerConfig` itself is rebuilt only when
//! `ssl-session-tickets` or another `ssl-*` key (`model::server_tls`) changes, for the
//! handshakes after it; the ticket keys and the session cache are shared (`resumption`), so
//! sessions survive that too. A host
//! whose handshake differs (`model::tls::HostTls`) gets a `ServerConfig` of its own, chosen
//! from the ClientHello's server name, read before the handshake only when some host has one;
//! so does a port with a Gateway's frontend validation (`model::frontend_tls`), whatever the
//! name.

use std::sync::Arc;

use model::server_tls::{HostCiphers, ServerTls};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ProducesTickets, ResolvesServerCert, ServerConfig};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

use crate::resumption::{KeyedTickets, TimedTickets};
use crate::shared::Shared;

/// Looks the certificate up in whatever configuration is current at handshake time, in the
/// certificates of `site` (a Gateway's own address, `model::sites`) or the shared ones.
#[derive(Debug)]
struct CurrentCertificates {
    shared: Arc<Shared>,
    site: Option<std::net::IpAddr>,
}

impl ResolvesServerCert for CurrentCertificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let config = self.shared.config.load();
        let found = config
            .as_ref()
            .and_then(|c| c.site(self.site).certificates.resolve(hello.server_name()));
        Some(found.unwrap_or_else(|| self.shared.fallback_cert.clone()))
    }
}

/// The handshake's side of client certificates: asks for one naming the host's CAs, never
/// requires one, and takes any chain (its key's signature over the handshake is still
/// checked, as `AcceptAnyCertificate` checks a server's), so that the request, not the
/// handshake, is refused (`client_cert`).
#[derive(Debug)]
struct RequestAny {
    hints: Vec<DistinguishedName>,
    signatures: model::tls::AcceptAnyCertificate,
}

impl RequestAny {
    fn new(names: &[Vec<u8>]) -> RequestAny {
        RequestAny {
            hints: names
                .iter()
                .map(|n| DistinguishedName::from(n.clone()))
                .collect(),
            signatures: model::tls::AcceptAnyCertificate(model::tls::crypto_provider().clone()),
        }
    }
}

impl ClientCertVerifier for RequestAny {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.signatures.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.signatures.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.signatures.supported_verify_schemes()
    }
}

/// The ALPN protocols a listener offers: HTTP/2 first.
pub(crate) const LISTENER_ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// What the listener's handshakes are made with: the worker rebuilds its configurations
/// when this changes (compared by value: every compile makes new settings).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Handshakes {
    /// `ssl-session-tickets`.
    pub(crate) tickets: bool,
    pub(crate) tls: ServerTls,
}

impl Handshakes {
    pub(crate) fn of(settings: &model::Settings) -> Handshakes {
        Handshakes {
            tickets: settings.ssl_session_tickets,
            tls: settings.server_tls.clone(),
        }
    }

    /// Whether `settings` ask for these handshakes (no allocation: per handshake).
    pub(crate) fn same(&self, settings: &model::Settings) -> bool {
        self.tickets == settings.ssl_session_tickets && self.tls == settings.server_tls
    }
}

/// TLS 1.3's suites in OpenSSL's default order (nginx's `ssl_ciphers` does not set them).
const TLS13_ORDER: [rustls::CipherSuite; 3] = [
    rustls::CipherSuite::TLS13_AES_256_GCM_SHA384,
    rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
    rustls::CipherSuite::TLS13_AES_128_GCM_SHA256,
];

/// The crypto provider with the suites and groups `tls` (and the host's own ciphers) name.
fn provider(tls: &ServerTls, host: Option<&HostCiphers>) -> CryptoProvider {
    let base = model::tls::crypto_provider();
    let suite = |code: rustls::CipherSuite| {
        (base.cipher_suites.iter())
            .find(|s| s.suite() == code)
            .copied()
    };
    let tls12 = host.and_then(|h| h.suites.as_ref()).unwrap_or(&tls.ciphers);
    let cipher_suites = (TLS13_ORDER.into_iter())
        .chain(tls12.suites())
        .filter_map(suite)
        .collect();
    let kx_groups = match &tls.ecdh_curves {
        None => base.kx_groups.clone(),
        Some(groups) => (groups.groups())
            .filter_map(|name| {
                (rustls::crypto::aws_lc_rs::ALL_KX_GROUPS.iter())
                    .find(|g| g.name() == name)
                    .copied()
            })
            .collect(),
    };
    CryptoProvider {
        cipher_suites,
        kx_groups,
        ..(**base).clone()
    }
}

/// A server configuration for one worker (the session cache and ticket keys are shared by
/// all). `host`: how the handshake of the host the ClientHello names differs (`None`: the
/// listener's).
pub(crate) fn server_config(
    shared: Arc<Shared>,
    handshakes: &Handshakes,
    host: Option<&model::tls::HostTls>,
    site: Option<std::net::IpAddr>,
) -> Result<Arc<ServerConfig>, rustls::Error> {
    let tls = &handshakes.tls;
    let ciphers = host.and_then(|h| h.ciphers.as_ref());
    let provider = provider(tls, ciphers);
    let has_tls12 = (provider.cipher_suites.iter()).any(|s| s.version() == &rustls::version::TLS12);
    let mut versions: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
    if tls.protocols.tls13 {
        versions.push(&rustls::version::TLS13);
    }
    if tls.protocols.tls12 && has_tls12 {
        versions.push(&rustls::version::TLS12);
    }
    let builder = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&versions)?;
    // Client certificates: required by a port's frontend validation (`model::frontend_tls`:
    // the handshake fails without a good one); else asked for, never required
    // (`client_cert` decides per request).
    let required = host.and_then(|h| h.client_cert_required.as_ref());
    let builder = match (
        required,
        host.and_then(|h| h.client_cert_request.as_deref()),
    ) {
        (Some(ca), _) => builder.with_client_cert_verifier(ca.handshake_verifier()),
        (None, Some(names)) => builder.with_client_cert_verifier(Arc::new(RequestAny::new(names))),
        (None, None) => builder.with_no_client_auth(),
    };
    let ticketer = shared.ticketer.clone();
    let sessions = (tls.session_cache)
        .then(|| shared.session_cache(tls.session_cache_sessions, tls.session_timeout));
    let mut config = builder.with_cert_resolver(Arc::new(CurrentCertificates { shared, site }));
    config.alpn_protocols = match host {
        Some(host) => host.alpn.clone(),
        None => LISTENER_ALPN.iter().map(|p| p.to_vec()).collect(),
    };
    if !tls.http2 {
        // use-http2 off (nginx's server without `http2 on`): HTTP/1.1 for every client.
        config.alpn_protocols.retain(|protocol| protocol != b"h2");
    }
    config.ignore_client_order =
        (ciphers.and_then(|c| c.prefer_server)).unwrap_or(tls.prefer_server_ciphers);
    config.max_fragment_size = tls.buffer_size;
    config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    if required.is_some() {
        // rustls does not judge the client certificate again on resumption, and the ticket
        // keys are shared by every configuration: a ticket from a port without validation
        // would skip this one's. Every handshake here is a full one.
        return Ok(Arc::new(config));
    }
    if let Some(sessions) = sessions {
        config.session_storage = sessions;
    }
    if handshakes.tickets {
        let inner = match &tls.session_ticket_key {
            Some(key) => match KeyedTickets::new(&key.0) {
                Some(keyed) => Arc::new(keyed) as Arc<dyn ProducesTickets>,
                None => ticketer,
            },
            None => ticketer,
        };
        config.ticketer = Arc::new(TimedTickets {
            inner,
            lifetime: tls.session_timeout,
        });
    }
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_follow_the_setting() {
        let shared = Arc::new(
            Shared::new(
                &crate::access_log::AccessLogOutput::Stdout,
                Default::default(),
                Default::default(),
            )
            .unwrap(),
        );
        let mut handshakes = Handshakes {
            tickets: true,
            tls: ServerTls::default(),
        };
        let on = server_config(shared.clone(), &handshakes, None, None).unwrap();
        assert!(on.ticketer.enabled());
        assert!(
            on.ignore_client_order,
            "ingress-nginx's ssl_prefer_server_ciphers on"
        );
        assert!(on.session_storage.can_cache());
        handshakes.tickets = false;
        handshakes.tls.session_cache = false;
        let off = server_config(shared, &handshakes, None, None).unwrap();
        assert!(!off.ticketer.enabled());
        assert!(!off.session_storage.can_cache());
    }
}
