//! The certificate served when nothing in the configuration matches (ingress-nginx's "fake
//! certificate"), generated once at start.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rustls::sign::CertifiedKey;

use crate::listen::StartError;

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
}
