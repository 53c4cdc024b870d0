//! `auth-tls-*` (client certificates) and Sluice's `auth-tls-scope`, with ingress-nginx's value
//! rules (`internal/ingress/annotations/authtls/main.go`): a bad verify-client or depth falls
//! back to its default; a Secret reference or match-cn that cannot be used refuses the routes.

use http::HeaderValue;
use model::client_cert::{Scope, VerifyClient};
use model::Severity;

use super::parsed::ClientCertSpec;
use super::reader::Reader;
use crate::ingress::cross_namespace;

/// ingress-nginx's `redirectRegex` for `auth-tls-error-page`.
const ERROR_PAGE: &str =
    r"^(@[A-Za-z0-9_-]+|((https?://)?[A-Za-z0-9\-.]+(:\d+)?)?(/[A-Za-z0-9\-_.]+)*/?)$";

impl Reader<'_> {
    /// `auth-tls-secret` with its companions (read only with it, as ingress-nginx does).
    /// `Err`: why the routes are refused.
    pub(super) fn client_cert(&mut self) -> Option<Result<ClientCertSpec, String>> {
        let companions = [
            "auth-tls-verify-client",
            "auth-tls-verify-depth",
            "auth-tls-error-page",
            "auth-tls-pass-certificate-to-upstream",
            "auth-tls-match-cn",
            "auth-tls-scope",
        ];
        let Some(reference) = self.get("auth-tls-secret") else {
            self.no_effect_without(&companions, "auth-tls-secret");
            return None;
        };
        let key = format!("annotation {}", self.key("auth-tls-secret"));
        let namespace = self.object.namespace.clone();
        let refuse = |reader: &mut Self, why: String| {
            reader.diagnose(
                Severity::Error,
                format!("{why}; the routes answer 503 (client certificates are never dropped)"),
            );
            Some(Err(format!("{key} cannot be used")))
        };
        let (ns, name) = reference.split_once('/').unwrap_or((&namespace, reference));
        if name.is_empty() || ns.is_empty() || name.contains('/') {
            let why = format!("{key}: {reference:?} is not a Secret name (namespace/name)");
            return refuse(self, why);
        }
        if let Err(why) = cross_namespace::check(self.settings, "Secret", ns, &namespace) {
            let why = format!("{key}: {reference:?}: {why}");
            return refuse(self, why);
        }
        let verify = match self.get("auth-tls-verify-client") {
            None => VerifyClient::On,
            Some(value) => VerifyClient::parse(value).unwrap_or_else(|| {
                self.invalid(
                    "auth-tls-verify-client",
                    value,
                    "on, off, optional or optional_no_ca (on applies, as in ingress-nginx)",
                );
                VerifyClient::On
            }),
        };
        let depth = match self.get("auth-tls-verify-depth") {
            None => 1,
            Some(value) => match value.parse::<u32>() {
                // ingress-nginx takes 0 as not set.
                Ok(0) => 1,
                Ok(depth) => depth,
                Err(_) => {
                    self.invalid(
                        "auth-tls-verify-depth",
                        value,
                        "a whole number (1 applies, as in ingress-nginx)",
                    );
                    1
                }
            },
        };
        let error_page = match self.get("auth-tls-error-page") {
            None => None,
            Some(value) => {
                let valid = regex::Regex::new(ERROR_PAGE)
                    .expect("a valid pattern")
                    .is_match(value);
                match HeaderValue::from_str(value).ok().filter(|_| valid) {
                    Some(value) => Some(value),
                    None => {
                        self.invalid(
                            "auth-tls-error-page",
                            value,
                            "a URL or path (ingress-nginx's pattern); a missing or bad certificate is answered 400",
                        );
                        None
                    }
                }
            }
        };
        let pass_certificate = self
            .bool("auth-tls-pass-certificate-to-upstream")
            .unwrap_or(false);
        let match_cn = match self.get("auth-tls-match-cn") {
            None => None,
            Some(value) => {
                let compiled = value
                    .strip_prefix("CN=")
                    .and_then(|_| regex::Regex::new(value).ok());
                if compiled.is_none() {
                    let mkey = self.key("auth-tls-match-cn");
                    let why = format!("annotation {mkey}: {value:?}: expected CN= and a regular expression (ingress-nginx refuses the Ingress too)");
                    return refuse(self, why);
                }
                compiled
            }
        };
        let scope = match self.get("auth-tls-scope") {
            None | Some("host") => Scope::Host,
            Some("path") => Scope::Path,
            Some(value) => {
                self.invalid(
                    "auth-tls-scope",
                    value,
                    "host or path (host applies: the whole host, as ingress-nginx)",
                );
                Scope::Host
            }
        };
        Some(Ok(ClientCertSpec {
            key,
            secret: (ns.to_owned(), name.to_owned()),
            verify,
            depth,
            error_page,
            pass_certificate,
            match_cn,
            scope,
        }))
    }
}
