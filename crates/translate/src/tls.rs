//! TLS Secrets read into serving keys: the Kubernetes half of `model::tls`.

use std::sync::Arc;

use model::tls::certified_key_from_pem;
use rustls::sign::CertifiedKey;

use crate::objects::Secret;

/// The `type` of a Secret that holds a certificate and its key.
pub const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";

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
