//! Server certificates: TLS Secrets turned into ready-to-serve keys, chosen by SNI.
//!
//! Parsing happens at compile time, once per Secret, so a handshake only does a hash lookup;
//! and a bad Secret is a diagnostic at compile time instead of a failed handshake later.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use k8s_openapi::api::core::v1::Secret;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

use crate::routes::HostPattern;

pub const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";

/// Certificates by host name, plus the default for clients without (matching) SNI.
#[derive(Clone, Default)]
pub struct Certificates {
    exact: HashMap<String, Arc<CertifiedKey>>,
    /// Keyed by the suffix after `*.`; matches exactly one more label.
    wildcard: HashMap<String, Arc<CertifiedKey>>,
    default: Option<Arc<CertifiedKey>>,
    /// Which Secret serves which host pattern, for `/config` and golden files.
    sources: BTreeMap<String, String>,
}

/// The crypto provider Sluice uses everywhere: aws-lc-rs.
pub fn crypto_provider() -> &'static Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER.get_or_init(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
}

/// Reads `tls.crt` and `tls.key` from a Secret and checks that they belong together.
pub fn certified_key_from_secret(secret: &Secret) -> Result<Arc<CertifiedKey>, String> {
    let secret_type = secret.type_.as_deref().unwrap_or("Opaque");
    if secret_type != TLS_SECRET_TYPE {
        return Err(format!(
            "type is {secret_type:?}, expected {TLS_SECRET_TYPE:?}"
        ));
    }
    let data = secret.data.as_ref();
    let field = |name: &str| {
        data.and_then(|d| d.get(name))
            .map(|b| b.0.as_slice())
            .filter(|b| !b.is_empty())
            .ok_or_else(|| format!("data.{name}: missing or empty"))
    };
    certified_key_from_pem(field("tls.crt")?, field("tls.key")?)
}

/// A certificate chain and private key in PEM, checked to match.
pub fn certified_key_from_pem(
    cert_pem: &[u8],
    key_pem: &[u8],
) -> Result<Arc<CertifiedKey>, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("data.tls.crt: not PEM certificates: {e}"))?;
    if chain.is_empty() {
        return Err("data.tls.crt: no CERTIFICATE block found".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| format!("data.tls.key: not a PEM private key: {e}"))?;
    let signing_key = crypto_provider()
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("data.tls.key: unusable private key: {e}"))?;
    let certified = CertifiedKey::new(chain, signing_key);
    certified
        .keys_match()
        .map_err(|e| format!("data.tls.key does not belong to data.tls.crt: {e}"))?;
    Ok(Arc::new(certified))
}

impl Certificates {
    /// The certificate for a client's SNI: exact host, then wildcard, then the default.
    /// `None` when there is no default either; the proxy then uses its own.
    pub fn resolve(&self, server_name: Option<&str>) -> Option<Arc<CertifiedKey>> {
        if let Some(name) = server_name {
            let lower;
            let name = if name.bytes().any(|b| b.is_ascii_uppercase()) {
                lower = name.to_ascii_lowercase();
                lower.as_str()
            } else {
                name
            };
            if let Some(key) = self.exact.get(name) {
                return Some(key.clone());
            }
            if let Some((_, parent)) = name.split_once('.') {
                if let Some(key) = self.wildcard.get(parent) {
                    return Some(key.clone());
                }
            }
        }
        self.default.clone()
    }

    /// Host pattern → `namespace/name` of the Secret serving it.
    pub fn sources(&self) -> &BTreeMap<String, String> {
        &self.sources
    }

    pub(crate) fn insert(&mut self, host: &HostPattern, key: Arc<CertifiedKey>, source: String) {
        match host {
            HostPattern::Exact(h) => {
                self.exact.insert(h.clone(), key);
            }
            HostPattern::Wildcard(suffix) => {
                self.wildcard.insert(suffix.clone(), key);
            }
            HostPattern::Any => self.default = Some(key),
        }
        self.sources.insert(host.to_string(), source);
    }
}

impl std::fmt::Debug for Certificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificates")
            .field("sources", &self.sources)
            .finish()
    }
}
