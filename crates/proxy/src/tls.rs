//! TLS termination: the certificate is chosen per handshake from the *current* configuration.
//!
//! A rotated Secret therefore applies to the next handshake with nothing rebuilt, and open
//! connections keep the keys they negotiated. The `ServerConfig` itself is rebuilt only when
//! `ssl-session-tickets` flips; the ticket keys are shared, so tickets survive that too.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rustls::server::{ClientHello, ResolvesServerCert, ServerConfig, ServerSessionMemoryCache};
use rustls::sign::CertifiedKey;

use crate::listen::StartError;
use crate::shared::Shared;

/// Sessions each worker remembers for clients that resume by session ID instead of ticket.
const SESSION_CACHE_SIZE: usize = 4096;

/// Looks the certificate up in whatever configuration is current at handshake time.
#[derive(Debug)]
struct CurrentCertificates {
    shared: Arc<Shared>,
}

impl ResolvesServerCert for CurrentCertificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let config = self.shared.config.load();
        let found = config
            .as_ref()
            .and_then(|c| c.certificates.resolve(hello.server_name()));
        Some(found.unwrap_or_else(|| self.shared.fallback_cert.clone()))
    }
}

/// A server configuration for one worker. Each worker builds its own so the session cache
/// (a mutex inside rustls) is never contended across workers.
pub(crate) fn server_config(
    shared: Arc<Shared>,
    session_tickets: bool,
) -> Result<Arc<ServerConfig>, rustls::Error> {
    let ticketer = shared.ticketer.clone();
    let mut config = ServerConfig::builder_with_provider(model::tls::crypto_provider().clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(CurrentCertificates { shared }));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE_SIZE);
    if session_tickets {
        config.ticketer = ticketer;
    }
    Ok(Arc::new(config))
}

/// How long the generated default certificate is valid: a year, as ingress-nginx's.
const SELF_SIGNED_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);

/// The certificate served when nothing in the configuration matches: generated at start,
/// like ingress-nginx's "fake certificate" (same subject, so checks that look for it keep
/// working), so TLS works before any Secret exists. Valid from a minute ago (clock skew)
/// for a year; a process running longer than that serves it expired, as ingress-nginx does.
pub(crate) fn self_signed() -> Result<Arc<CertifiedKey>, StartError> {
    let failed = |e: rcgen::Error| StartError::SelfSigned(e.to_string());
    let mut params =
        rcgen::CertificateParams::new(vec!["sluice.invalid".to_owned()]).map_err(failed)?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(
        rcgen::DnType::CommonName,
        "Kubernetes Ingress Controller Fake Certificate",
    );
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "Sluice");
    let now = SystemTime::now();
    params.not_before = (now - Duration::from_secs(60)).into();
    params.not_after = (now + SELF_SIGNED_VALIDITY).into();
    let key = rcgen::KeyPair::generate().map_err(failed)?;
    let cert = params.self_signed(&key).map_err(failed)?;
    model::tls::certified_key_from_pem(cert.pem().as_bytes(), key.serialize_pem().as_bytes())
        .map_err(StartError::SelfSigned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fallback_certificate_is_usable() {
        let key = self_signed().unwrap();
        assert_eq!(key.cert.len(), 1);
        assert!(key.keys_match().is_ok());
        let info = model::tls::certificate_info(&key.cert[0]).unwrap();
        let now = SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let year = SELF_SIGNED_VALIDITY.as_secs() as i64;
        assert!((info.not_after - now - year).abs() < 60, "{info:?}");
        assert!(info.not_before <= now);
        assert_eq!(
            info.subject_common_name,
            "Kubernetes Ingress Controller Fake Certificate"
        );
    }

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
        assert!(server_config(shared.clone(), true)
            .unwrap()
            .ticketer
            .enabled());
        assert!(!server_config(shared, false).unwrap().ticketer.enabled());
    }
}
