//! `allow-cross-namespace-resources` (ConfigMap, false by default, as in ingress-nginx): whether
//! an annotation may name a Secret or ConfigMap of another namespace than its Ingress's. The
//! references it governs are ingress-nginx's: auth-secret, auth-tls-secret, proxy-ssl-secret
//! and auth-proxy-set-headers (fastcgi-params-configmap too, which Sluice does not serve).
//!
//! ```text
//!  annotation's namespace/name ─▶ same namespace ─────────────────▶ read
//!                               └▶ another: key "true" ─▶ read │ else refused (the caller's
//!                                  diagnostic names the annotation and the key; routes 503)
//! ```

use model::settings::Settings;

/// The ConfigMap key.
pub(crate) const KEY: &str = "allow-cross-namespace-resources";

/// `Err(why)` when a `kind` (Secret, ConfigMap) of namespace `referenced` may not be used by an
/// Ingress of `own` namespace under `settings`.
pub(crate) fn check(
    settings: &Settings,
    kind: &str,
    referenced: &str,
    own: &str,
) -> Result<(), String> {
    if referenced == own || settings.allow_cross_namespace_resources {
        return Ok(());
    }
    Err(format!(
        "a {kind} of another namespace than {own}: refused unless the ConfigMap sets {KEY}: \"true\" (ingress-nginx's default is false too)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_namespace_only_with_the_key() {
        let mut settings = Settings::default();
        assert!(check(&settings, "Secret", "web", "web").is_ok());
        let why = check(&settings, "Secret", "other", "web").unwrap_err();
        assert!(why.contains("allow-cross-namespace-resources"), "{why}");
        settings.allow_cross_namespace_resources = true;
        assert!(check(&settings, "Secret", "other", "web").is_ok());
    }
}
