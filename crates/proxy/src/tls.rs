//! TLS termination: the certificate is chosen per handshake from the *current* configuration.
//!
//! A rotated Secret therefore applies to the next handshake with nothing rebuilt, and open
//! connections keep the keys they negotiated. The `ServerConfig` itself is rebuilt only when
//! `ssl-session-tickets` flips; the ticket keys are shared, so tickets survive that too. A host
//! whose handshake differs (`model::tls::HostTls`) gets a `ServerConfig` of its own, chosen
//! from the ClientHello's server name, read before the handshake only when some host has one;
//! so does a port with a Gateway's frontend validation (`model::frontend_tls`), whatever the
//! name.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, ServerConfig, ServerSessionMemoryCache};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

use crate::shared::Shared;

/// Sessions each worker remembers for clients that resume by session ID instead of ticket.
const SESSION_CACHE_SIZE: usize = 4096;

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

/// A server configuration for one worker. Each worker builds its own so the session cache
/// (a mutex inside rustls) is never contended across workers. `host`: how the handshake of
/// the host the ClientHello names differs (`None`: the listener's).
pub(crate) fn server_config(
    shared: Arc<Shared>,
    session_tickets: bool,
    host: Option<&model::tls::HostTls>,
    site: Option<std::net::IpAddr>,
) -> Result<Arc<ServerConfig>, rustls::Error> {
    let ticketer = shared.ticketer.clone();
    let builder = ServerConfig::builder_with_provider(model::tls::crypto_provider().clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?;
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
    let mut config = builder.with_cert_resolver(Arc::new(CurrentCertificates { shared, site }));
    config.alpn_protocols = match host {
        Some(host) => host.alpn.clone(),
        None => LISTENER_ALPN.iter().map(|p| p.to_vec()).collect(),
    };
    if required.is_some() {
        // rustls does not judge the client certificate again on resumption, and the ticket
        // keys are shared by every configuration: a ticket from a port without validation
        // would skip this one's. Every handshake here is a full one.
        config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        return Ok(Arc::new(config));
    }
    config.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE_SIZE);
    if session_tickets {
        config.ticketer = ticketer;
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
        assert!(server_config(shared.clone(), true, None, None)
            .unwrap()
            .ticketer
            .enabled());
        assert!(!server_config(shared, false, None, None)
            .unwrap()
            .ticketer
            .enabled());
    }
}
