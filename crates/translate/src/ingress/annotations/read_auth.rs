//! The external-auth family (`auth-url` and its companions, ingress-nginx's `authreq`
//! parser), checked with ingress-nginx's validators. The same reading serves the ConfigMap's
//! `global-auth-*` keys (`configmap`'s names are the annotations' with `global-` in front).
//!
//! Where ingress-nginx's parser fails *open* (a value its validator refuses makes the whole
//! `authreq` result empty, so the location is served without authentication:
//! `auth-cache-duration`, `auth-request-redirect`), Sluice refuses the routes instead and says
//! so: a typo must not take authentication away.

use http::HeaderValue;
use model::auth::{self, AuthCache, Signin};
use model::Severity;

use super::parsed::{AuthSpec, UserAuthSpec};
use super::reader::{go_bool, Reader};
use crate::ingress::cross_namespace;

/// What the family's reading found wrong, for one source.
pub(crate) struct AuthSource<'s> {
    /// The value of a member by its annotation name (`auth-url`…).
    pub get: &'s dyn Fn(&str) -> Option<&'s str>,
    /// How a member is named in diagnostics.
    pub key: &'s dyn Fn(&str) -> String,
    pub diagnose: &'s mut dyn FnMut(Severity, String),
}

/// Reads the family. `Ok(None)`: no `auth-url`. `Err(reason)`: the routes are refused (503),
/// the diagnostic made already.
pub(crate) fn read_spec(source: &mut AuthSource<'_>) -> Result<Option<AuthSpec>, String> {
    let get = source.get;
    let Some(url) = get("auth-url") else {
        return Ok(None);
    };
    let url_key = (source.key)("auth-url");
    let refuse = |source: &mut AuthSource<'_>, name: &str, value: &str, why: String| {
        let key = (source.key)(name);
        (source.diagnose)(
            Severity::Error,
            format!("{key}: invalid value {value:?}: {why}; the routes answer 503 (authentication is never dropped)"),
        );
        Err(format!("{key} cannot be read"))
    };
    let (target, uri, request_host) = match auth::auth_url(url) {
        Ok(parsed) => parsed,
        Err(why) => return refuse(source, "auth-url", url, why),
    };
    let method = match get("auth-method") {
        None | Some("") => None,
        Some(value) => match auth::auth_method(value) {
            Some(method) => Some(method),
            None => {
                let why = "expected GET, HEAD, POST, PUT, PATCH, DELETE, CONNECT, OPTIONS or TRACE (as ingress-nginx)".to_owned();
                return refuse(source, "auth-method", value, why);
            }
        },
    };
    let redirect_param = match get("auth-signin-redirect-param") {
        None => "",
        Some(value) if is_url_text(value) && !value.is_empty() => value,
        Some(value) => {
            let key = (source.key)("auth-signin-redirect-param");
            (source.diagnose)(
                Severity::Error,
                format!("{key}: invalid value {value:?}: ingress-nginx ignores it, rd applies"),
            );
            ""
        }
    };
    let signin = match get("auth-signin").filter(|v| !v.is_empty()) {
        None => None,
        Some(value) => match Signin::parse(value, redirect_param) {
            Ok(signin) => Some(signin),
            Err(why) => {
                // ingress-nginx logs a warning and serves without the sign-in redirect: a 401
                // stays a 401, which refuses as well.
                let key = (source.key)("auth-signin");
                (source.diagnose)(
                    Severity::Error,
                    format!("{key}: invalid value {value:?}: {why}; ignored (unauthenticated requests get 401 instead of the redirect, as in ingress-nginx)"),
                );
                None
            }
        },
    };
    let request_redirect = match get("auth-request-redirect").filter(|v| !v.is_empty()) {
        None => None,
        Some(value) => match HeaderValue::from_str(value)
            .ok()
            .filter(|_| is_url_text(value))
        {
            Some(header) => Some(header),
            None => {
                let why = "expected a URL (ingress-nginx then drops authentication altogether; Sluice refuses)".to_owned();
                return refuse(source, "auth-request-redirect", value, why);
            }
        },
    };
    let response_headers = match get("auth-response-headers") {
        None => Box::default(),
        Some(value) => match auth::response_header_names(value) {
            Ok(names) => names,
            Err(why) => return refuse(source, "auth-response-headers", value, why),
        },
    };
    let always_set_cookie = match get("auth-always-set-cookie") {
        None => false,
        Some(value) => go_bool(value).unwrap_or_else(|| {
            let key = (source.key)("auth-always-set-cookie");
            (source.diagnose)(
                Severity::Error,
                format!("{key}: invalid value {value:?}: expected true or false; false applies"),
            );
            false
        }),
    };
    let cache = match get("auth-cache-key").filter(|v| !v.is_empty()) {
        None => {
            if get("auth-cache-duration").is_some() {
                let key = (source.key)("auth-cache-duration");
                (source.diagnose)(
                    Severity::Notice,
                    format!("{key}: has no effect without auth-cache-key (as in ingress-nginx)"),
                );
            }
            None
        }
        Some(written) => {
            let segments = match model::access_log::parse_request_key(written) {
                Ok(segments) => segments,
                Err(why) => {
                    let key = (source.key)("auth-cache-key");
                    (source.diagnose)(
                        Severity::Error,
                        format!("{key}: invalid value {written:?}: {why}; answers are not cached (as ingress-nginx ignores an invalid key)"),
                    );
                    Vec::new()
                }
            };
            let duration = get("auth-cache-duration").unwrap_or("");
            let validity = match auth::cache_durations(duration) {
                Ok(validity) => validity,
                Err(why) => return refuse(source, "auth-cache-duration", duration, why),
            };
            (!segments.is_empty()).then(|| AuthCache {
                key: written.to_owned(),
                segments: segments.into_boxed_slice(),
                validity,
            })
        }
    };
    let proxy_set_headers = get("auth-proxy-set-headers")
        .filter(|v| !v.is_empty())
        .map(str::to_owned);
    Ok(Some(AuthSpec {
        key: url_key,
        url: url.to_owned(),
        target,
        request_host,
        uri,
        method,
        signin,
        request_redirect,
        response_headers,
        proxy_set_headers,
        always_set_cookie,
        cache,
    }))
}

/// ingress-nginx's `URLIsValidRegex` characters.
fn is_url_text(value: &str) -> bool {
    value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-._~:/?#[]@!$&'()*+,;=%".contains(c))
}

/// The family's members besides `auth-url`, for the "no effect without" notice.
const COMPANIONS: [&str; 14] = [
    "auth-method",
    "auth-signin",
    "auth-signin-redirect-param",
    "auth-request-redirect",
    "auth-response-headers",
    "auth-proxy-set-headers",
    "auth-always-set-cookie",
    "auth-cache-key",
    "auth-cache-duration",
    "auth-keepalive",
    "auth-keepalive-share-vars",
    "auth-keepalive-requests",
    "auth-keepalive-timeout",
    "auth-snippet",
];

impl Reader<'_> {
    /// The Ingress's `auth-url` family. A value that cannot be used refuses the routes.
    pub(super) fn external_auth(&mut self, denied: &mut Option<String>) -> Option<AuthSpec> {
        if self.get("auth-url").is_none() {
            self.no_effect_without(&COMPANIONS, "auth-url");
            return None;
        }
        let values: Vec<(&str, Option<&str>)> = COMPANIONS
            .iter()
            .chain(&["auth-url"])
            .map(|name| (*name, self.get(name)))
            .collect();
        let keys: Vec<(&str, String)> = values
            .iter()
            .map(|(name, _)| (*name, format!("annotation {}", self.key(name))))
            .collect();
        let get = |name: &str| {
            values
                .iter()
                .find(|(n, _)| *n == name)
                .and_then(|(_, v)| *v)
        };
        let key = |name: &str| {
            keys.iter()
                .find(|(n, _)| *n == name)
                .map_or_else(|| name.to_owned(), |(_, k)| k.clone())
        };
        let mut found = Vec::new();
        let mut diagnose = |severity, reason| found.push((severity, reason));
        let mut source = AuthSource {
            get: &get,
            key: &key,
            diagnose: &mut diagnose,
        };
        let read = read_spec(&mut source);
        for (severity, reason) in found {
            self.diagnose(severity, reason);
        }
        match read {
            Ok(spec) => spec,
            Err(reason) => {
                *denied = Some(reason);
                None
            }
        }
    }
}

impl Reader<'_> {
    /// `auth-type` with `auth-secret`, `auth-secret-type`, `auth-realm`, and `satisfy`. What
    /// cannot be used refuses the routes, as ingress-nginx denies the location.
    pub(super) fn user_auth(
        &mut self,
        namespace: &str,
        satisfy_any: &mut bool,
        denied: &mut Option<String>,
    ) -> Option<UserAuthSpec> {
        match self.get("satisfy") {
            None | Some("all") => {}
            Some("any") => *satisfy_any = true,
            Some(value) => self.invalid("satisfy", value, "all or any (all applies)"),
        }
        let Some(kind) = self.get("auth-type") else {
            self.no_effect_without(
                &["auth-secret", "auth-secret-type", "auth-realm"],
                "auth-type",
            );
            return None;
        };
        let key = self.key("auth-type");
        let mut refuse = |reader: &mut Self, why: String| {
            reader.diagnose(
                Severity::Error,
                format!("{why}; the routes answer 503 (authentication is never dropped)"),
            );
            *denied = Some(format!("{key} cannot be used"));
            None
        };
        let digest = match kind {
            "basic" => false,
            "digest" => true,
            // ingress-nginx's check is an unanchored `basic|digest`: `basic-auth` passes
            // and its template then serves digest authentication.
            other if other.contains("basic") || other.contains("digest") => {
                let why = format!("annotation {key}: {other:?}: expected basic or digest (ingress-nginx accepts any value containing either and serves it as digest)");
                return refuse(self, why);
            }
            other => {
                let why = format!("annotation {key}: invalid value {other:?}: expected basic or digest (ingress-nginx refuses it too)");
                return refuse(self, why);
            }
        };
        let map = match self.get("auth-secret-type") {
            None | Some("auth-file") => false,
            Some("auth-map") => true,
            Some(other) => {
                let skey = self.key("auth-secret-type");
                let why = format!("annotation {skey}: invalid value {other:?}: expected auth-file or auth-map (ingress-nginx refuses it too)");
                return refuse(self, why);
            }
        };
        let secret_key = self.key("auth-secret");
        let Some(reference) = self.get("auth-secret").filter(|v| !v.is_empty()) else {
            let why = format!("annotation {key}: {kind} needs {secret_key}");
            return refuse(self, why);
        };
        let (ns, name) = reference.split_once('/').unwrap_or((namespace, reference));
        if let Err(why) = cross_namespace::check(self.settings, "Secret", ns, namespace) {
            let why = format!("annotation {secret_key}: {reference:?}: {why}");
            return refuse(self, why);
        }
        let realm = self.get("auth-realm").unwrap_or("").to_owned();
        Some(UserAuthSpec {
            digest,
            key: format!("annotation {secret_key}"),
            secret: (ns.to_owned(), name.to_owned()),
            map,
            realm,
        })
    }
}
