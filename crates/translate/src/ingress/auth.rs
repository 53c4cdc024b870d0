//! External authentication of an Ingress's routes (`auth-url` and its family), and the
//! ConfigMap's `global-auth-url` for every Ingress that does not opt out: the sub-request's
//! destination resolved here (as `mirror-target`'s), the `auth-proxy-set-headers` ConfigMap
//! read from the Store.
//!
//! ```text
//!  AuthSpec (annotations, or the ConfigMap's global-auth-*) ─▶ url_backend: an address │
//!      <svc>.<ns>.svc[.cluster.local] (that Service port's endpoints) │ $host, or a name an
//!      Ingress has a rule for ─▶ routed by Sluice's own rules per request │ another name ─▶
//!      the addresses the control plane's resolver finds for it (no DNS on the data path)
//!  auth-proxy-set-headers "[ns/]name" ─▶ that ConfigMap's data as headers (same namespace)
//!  ─▶ model::auth::ExternalAuth in the route policy │ anything unusable ─▶ the routes are
//!     refused (503): authentication is never dropped
//! ```

use std::sync::Arc;

use http::{HeaderName, HeaderValue};
use model::auth::{AuthDestination, ExternalAuth};
use model::basic_auth::{challenge, BasicAuth, Users};
use model::digest_auth::{DigestAuth, DigestUsers};
use model::mirror::MirrorHost;
use model::policy::UserAuth;
use model::policy::{TlsVersions, UpstreamTls};
use model::routes::HostPattern;
use model::{Kind, NamespacedName, ObjectRef, Severity};

use super::annotations::{read_spec, AuthSource, AuthSpec, IngressAnnotations};
use super::cross_namespace;
use super::mirror::UrlUse;
use crate::compiler::{CompileOptions, Compiler};

impl Compiler<'_> {
    /// Fills `parsed.policy.external_auth` from the `auth-url` family, or refuses the routes.
    pub(crate) fn external_auth_phase(
        &mut self,
        name: &NamespacedName,
        object: &ObjectRef,
        parsed: &mut IngressAnnotations,
    ) {
        let Some(spec) = parsed.external_auth.take() else {
            return;
        };
        match self.external_auth(object, &spec, &name.namespace, false) {
            Ok(auth) => parsed.policy.external_auth = Some(Arc::new(auth)),
            Err(reason) => parsed.policy.denied = Some(reason),
        }
    }

    /// Fills `parsed.policy.user_auth` from `auth-type`'s Secret, or refuses the routes.
    pub(crate) fn user_auth_phase(&mut self, object: &ObjectRef, parsed: &mut IngressAnnotations) {
        let Some(spec) = parsed.user_auth.take() else {
            return;
        };
        let (ns, name) = &spec.secret;
        let key = &spec.key;
        let refuse = |compiler: &mut Self, severity, why: String| {
            compiler.diagnose_with(
                severity,
                object.clone(),
                format!("{key}: {why}; the routes answer 503 (as in ingress-nginx)"),
            );
            Some(format!("{key} cannot be used"))
        };
        let Some(secret) = self
            .store
            .secret(&NamespacedName::new(ns.as_str(), name.as_str()))
        else {
            parsed.policy.denied = refuse(
                self,
                Severity::Missing,
                format!("Secret {ns}/{name} not found"),
            );
            return;
        };
        let data = secret.data.clone().unwrap_or_default();
        if spec.digest {
            let text = if spec.map {
                // auth-map: each key a user, its value `realm:HA1` (ingress-nginx writes the
                // lines `key:value` into the module's file).
                let lines: Vec<String> = data
                    .iter()
                    .map(|(user, value)| {
                        format!("{user}:{}", String::from_utf8_lossy(&value.0).trim_end())
                    })
                    .collect();
                lines.join("\n")
            } else {
                let Some(file) = data.get("auth") else {
                    parsed.policy.denied = refuse(self, Severity::Error, format!("Secret {ns}/{name} has no key auth (the htdigest file of auth-secret-type auth-file)"));
                    return;
                };
                String::from_utf8_lossy(&file.0).into_owned()
            };
            let file = DigestUsers::from_htdigest(&text);
            if !file.unusable_lines.is_empty() {
                let lines = file
                    .unusable_lines
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>();
                self.diagnose_with(
                    Severity::Notice,
                    object.clone(),
                    format!("{key}: Secret {ns}/{name}: {} not user:realm:HA1 with a 32-digit MD5 (htdigest's format), left out: line(s) {}", if spec.map { "values" } else { "lines" }, lines.join(", ")),
                );
            }
            let realm = &spec.realm;
            if realm.is_empty() {
                self.diagnose_with(
                    Severity::Difference,
                    object.clone(),
                    format!("{key}: auth-type digest without auth-realm: the challenge names the empty realm, so only users of the empty realm get in (nginx's digest module authenticates nothing for an empty realm; Sluice never serves such a route unauthenticated). Set auth-realm to the realm of the Secret's users"),
                );
            } else if file.users.in_realm(realm) == 0 {
                self.diagnose_with(
                    Severity::Notice,
                    object.clone(),
                    format!("{key}: Secret {ns}/{name} names no user of realm {realm:?} (auth-realm): every request gets 401"),
                );
            }
            if challenge(realm).is_none() {
                parsed.policy.denied = refuse(
                    self,
                    Severity::Error,
                    format!("auth-realm {realm:?} cannot be sent in a header"),
                );
                return;
            }
            parsed.policy.user_auth = Some(Arc::new(UserAuth::Digest(DigestAuth {
                realm: spec.realm,
                secret: format!("{ns}/{name}"),
                users: Arc::new(file.users),
            })));
            return;
        }
        let users = if spec.map {
            let entries: Vec<(String, String)> = data
                .iter()
                .map(|(user, hash)| (user.clone(), String::from_utf8_lossy(&hash.0).into_owned()))
                .collect();
            Users::from_map(entries.iter().map(|(u, h)| (u.as_str(), h.as_str())))
        } else {
            let Some(file) = data.get("auth") else {
                parsed.policy.denied = refuse(self, Severity::Error, format!("Secret {ns}/{name} has no key auth (the htpasswd file of auth-secret-type auth-file)"));
                return;
            };
            Users::from_htpasswd(&String::from_utf8_lossy(&file.0))
        };
        if users.is_empty() {
            self.diagnose_with(
                Severity::Notice,
                object.clone(),
                format!("{key}: Secret {ns}/{name} names no user: every request gets 401"),
            );
        }
        let Some(challenge) = challenge(&spec.realm) else {
            parsed.policy.denied = refuse(
                self,
                Severity::Error,
                format!("auth-realm {:?} cannot be sent in a header", spec.realm),
            );
            return;
        };
        parsed.policy.user_auth = Some(Arc::new(UserAuth::Basic(BasicAuth {
            realm: spec.realm,
            challenge,
            secret: format!("{ns}/{name}"),
            users: Arc::new(users),
        })));
    }

    /// The ConfigMap's `global-auth-*` keys, read with the annotations' rules. `None`: no
    /// `global-auth-url`.
    pub(crate) fn global_external_auth(
        &mut self,
        options: &CompileOptions,
    ) -> Option<Result<Arc<ExternalAuth>, String>> {
        let keys = self.out.settings.global_auth.clone();
        keys.get("auth-url")?;
        let object = ObjectRef::new(
            Kind::ConfigMap,
            &*options.config_map.namespace,
            &*options.config_map.name,
        );
        let get = |name: &str| keys.get(name).map(String::as_str);
        let key = |name: &str| format!("data.global-{name}");
        let mut found = Vec::new();
        let mut diagnose = |severity, reason| found.push((severity, reason));
        let read = read_spec(&mut AuthSource {
            get: &get,
            key: &key,
            diagnose: &mut diagnose,
        });
        for (severity, reason) in found {
            self.diagnose_with(severity, object.clone(), reason);
        }
        let spec = match read {
            Ok(spec) => spec?,
            Err(reason) => return Some(Err(reason)),
        };
        // The global auth's ConfigMap references live in the controller's namespace.
        let namespace = options.config_map.namespace.clone();
        Some(
            self.external_auth(&object, &spec, &namespace, true)
                .map(Arc::new),
        )
    }

    /// The model's external auth from a checked spec; `Err`: why the routes are refused (the
    /// diagnostic made). `namespace`: where `auth-proxy-set-headers` may name a ConfigMap.
    pub(crate) fn external_auth(
        &mut self,
        object: &ObjectRef,
        spec: &AuthSpec,
        namespace: &str,
        global: bool,
    ) -> Result<ExternalAuth, String> {
        const REFUSED: &str = "the routes answer 503 (authentication is never dropped)";
        let refused = || format!("{} cannot be used", spec.key);
        let served_name = matches!(spec.target.host_kind(), MirrorHost::Name)
            && self.serves_host(&spec.target.host);
        let destination = if spec.request_host {
            AuthDestination::Routed { host: None }
        } else if served_name {
            AuthDestination::Routed {
                host: Some(spec.target.host.clone()),
            }
        } else {
            let (backend, upstream_name) = self
                .url_backend(
                    object,
                    &spec.key,
                    &spec.url,
                    &spec.target,
                    UrlUse {
                        kind: "auth-url",
                        outcome: REFUSED,
                        // The routes are refused: the webhook says so before they are.
                        name_severity: Severity::Error,
                    },
                )
                .ok_or_else(refused)?;
            // nginx's `proxy_pass https://` in ingress-nginx's auth location: SNI
            // (`proxy_ssl_server_name on`), no verification.
            let tls = spec.target.https.then(|| {
                Arc::new(UpstreamTls {
                    verify: false,
                    verify_depth: 1,
                    name: spec.target.host.clone(),
                    server_name: true,
                    versions: TlsVersions::ALL,
                    secret: None,
                    trusted: Vec::new(),
                    client_cert: None,
                    subject_alt_names: Vec::new(),
                    system_roots: false,
                })
            });
            AuthDestination::Backend {
                upstream_name,
                backend,
                tls,
            }
        };
        let proxy_set_headers = match &spec.proxy_set_headers {
            None => Box::default(),
            Some(reference) => {
                let key = spec.key.replace("auth-url", "auth-proxy-set-headers");
                match self.auth_headers(reference, namespace) {
                    Ok(headers) => headers,
                    Err(why) => {
                        self.diagnose(
                            object.clone(),
                            format!("{key}: {reference:?}: {why}; {REFUSED} (as in ingress-nginx)"),
                        );
                        return Err(format!("{key} cannot be used"));
                    }
                }
            }
        };
        // A `$host` URL's Host is the request's, filled per request.
        let host = if spec.request_host {
            HeaderValue::from_static("$host")
        } else {
            HeaderValue::from_str(&spec.target.default_host()).map_err(|_| refused())?
        };
        Ok(ExternalAuth {
            url: spec.url.clone(),
            global,
            host,
            uri: spec.uri.clone(),
            method: spec.method.clone(),
            destination,
            signin: spec.signin.clone(),
            request_redirect: spec.request_redirect.clone(),
            response_headers: spec.response_headers.clone(),
            proxy_set_headers,
            always_set_cookie: spec.always_set_cookie,
            cache: spec.cache.clone(),
            gateway: None,
        })
    }

    /// Whether an Ingress Sluice serves has a rule for `host` (exactly, or by a wildcard).
    fn serves_host(&self, host: &str) -> bool {
        self.store.ingresses_by_name().any(|(_, ingress)| {
            let rules = ingress.spec.iter().flat_map(|s| s.rules.iter().flatten());
            rules
                .filter_map(|rule| HostPattern::parse(rule.host.as_deref()).ok())
                .any(|pattern| match pattern {
                    HostPattern::Exact(exact) => *exact == *host,
                    HostPattern::Wildcard(parent) => {
                        host.split_once('.').is_some_and(|(_, p)| p == &*parent)
                    }
                    // A rule without a host: not a name anyone resolves to Sluice.
                    HostPattern::Any => false,
                })
        })
    }

    /// `auth-proxy-set-headers`: the ConfigMap's entries, each a header name of letters,
    /// digits, `-` and `_` (ingress-nginx's check) with a value a header can carry.
    fn auth_headers(
        &mut self,
        reference: &str,
        namespace: &str,
    ) -> Result<Box<[(HeaderName, HeaderValue)]>, String> {
        let (ns, name) = reference.split_once('/').unwrap_or((namespace, reference));
        cross_namespace::check(&self.out.settings, "ConfigMap", ns, namespace)?;
        let config_map = self
            .read_config_map(&NamespacedName::new(ns, name))
            .ok_or_else(|| format!("ConfigMap {ns}/{name} not found"))?;
        let mut headers = Vec::new();
        for (key, value) in config_map.data.iter().flatten() {
            let valid = !key.is_empty()
                && key
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            let header = HeaderName::from_bytes(key.as_bytes())
                .ok()
                .filter(|_| valid)
                .zip(HeaderValue::from_str(value).ok())
                .ok_or_else(|| format!("ConfigMap {ns}/{name}: invalid header {key:?}"))?;
            headers.push(header);
        }
        Ok(headers.into_boxed_slice())
    }
}
