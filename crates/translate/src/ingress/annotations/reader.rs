//! The reader: an Ingress's annotations (either prefix) → each registry parser in order →
//! [`IngressAnnotations`], with a diagnostic for every value it refuses or ignores.

use std::collections::{BTreeMap, BTreeSet};

use http::HeaderValue;

use model::policy::RoutePolicy;
use model::settings::Settings;
use model::{Diagnostic, ObjectRef, Severity};

use super::parsed::{IngressAnnotations, ProxySsl};
use super::registry::{entry, Parser, Support, NGINX_PREFIX, REGISTRY, SLUICE_PREFIX};
use crate::configmap::{parse_duration, parse_size};

/// Reads the annotations of one Ingress. Problems go to `diagnostics`, on `object`.
pub fn parse(
    annotations: &BTreeMap<String, String>,
    settings: &Settings,
    object: &ObjectRef,
    diagnostics: &mut Vec<Diagnostic>,
) -> IngressAnnotations {
    let mut reader = Reader {
        values: BTreeMap::new(),
        object,
        settings,
        diagnostics,
    };
    for (key, value) in annotations {
        let (name, sluice) = if let Some(name) = key.strip_prefix(SLUICE_PREFIX) {
            (name, true)
        } else if let Some(name) = key.strip_prefix(NGINX_PREFIX) {
            (name, false)
        } else {
            continue;
        };
        let value = value.trim();
        if !sluice && is_sluice_only(name) {
            reader.diagnose(
                Severity::Unsupported,
                format!(
                    "annotation {key}: Sluice's own, read only as {SLUICE_PREFIX}{name}; ignored"
                ),
            );
            continue;
        }
        match reader.values.get(name) {
            Some((_, true)) if !sluice => {
                reader.diagnose(
                    Severity::Notice,
                    format!("{key}: ignored, {SLUICE_PREFIX}{name} is set too and wins"),
                );
                continue;
            }
            Some(_) if sluice => {
                reader.diagnose(
                    Severity::Notice,
                    format!("{NGINX_PREFIX}{name}: ignored, {key} is set too and wins"),
                );
            }
            _ => {}
        }
        reader.values.insert(name, (value, sluice));
    }
    reader.unsupported();
    reader.read()
}

/// The ConfigMap's screens of a whole Ingress, as ingress-nginx runs them before it reads any
/// annotation: `annotation-value-word-blocklist` (a value holding a listed word) and
/// `annotations-risk-level` (an annotation rated above it). `annotations`: (prefix, name
/// without it, value). `Some((why, what to do))`: the Ingress is refused.
pub(crate) fn screen<'v>(
    annotations: impl IntoIterator<Item = (&'static str, &'v str, &'v str)>,
    settings: &Settings,
) -> Option<(String, &'static str)> {
    let words = &settings.annotation_value_word_blocklist;
    let level = settings.annotations_risk_level;
    for (prefix, name, value) in annotations {
        if let Some(word) = words.iter().find(|w| value.contains(w.as_str())) {
            return Some((
                format!(
                    "annotation {prefix}{name}: its value holds {word:?}, a word the \
                     ConfigMap's annotation-value-word-blocklist lists"
                ),
                "remove it from the value or from the list",
            ));
        }
        let risk = super::registry::risk(name);
        if risk > level {
            return Some((
                format!(
                    "annotation {prefix}{name}: ingress-nginx rates it {risk:?}, above the \
                     ConfigMap's annotations-risk-level ({level:?})"
                ),
                "remove it, or raise annotations-risk-level",
            ));
        }
    }
    None
}

/// Go's `strconv.ParseBool`, which ingress-nginx reads its boolean annotations with.
pub(crate) fn go_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// A key of Sluice's own (not ingress-nginx's).
pub(super) fn is_sluice_only(name: &str) -> bool {
    entry(name).is_some_and(|a| matches!(a.support, Support::Sluice(_)))
}

pub(super) struct Reader<'a> {
    /// Annotation name without prefix → (value, came with the Sluice prefix).
    pub(super) values: BTreeMap<&'a str, (&'a str, bool)>,
    pub(super) object: &'a ObjectRef,
    pub(super) settings: &'a Settings,
    pub(super) diagnostics: &'a mut Vec<Diagnostic>,
}

impl<'a> Reader<'a> {
    pub(super) fn diagnose(&mut self, severity: Severity, reason: String) {
        self.diagnostics.push(Diagnostic::with_severity(
            severity,
            self.object.clone(),
            reason,
        ));
    }

    pub(super) fn key(&self, name: &str) -> String {
        match self.values.get(name) {
            Some((_, true)) => format!("{SLUICE_PREFIX}{name}"),
            _ => format!("{NGINX_PREFIX}{name}"),
        }
    }

    /// An invalid value: the default applies.
    pub(super) fn invalid(&mut self, name: &str, value: &str, expected: &str) {
        let key = self.key(name);
        self.diagnose(
            Severity::Error,
            format!("annotation {key}: invalid value {value:?}: expected {expected}; ignored"),
        );
    }

    /// A notice for each of `names` that is set: ingress-nginx reads them only with `needed`,
    /// which is not set.
    pub(super) fn no_effect_without(&mut self, names: &[&str], needed: &str) {
        for name in names {
            if self.get(name).is_some() {
                let key = self.key(name);
                self.diagnose(
                    Severity::Notice,
                    format!(
                        "annotation {key}: has no effect without {needed} (as in ingress-nginx)"
                    ),
                );
            }
        }
    }

    pub(super) fn unsupported(&mut self) {
        let mut found = Vec::new();
        for name in self.values.keys() {
            match entry(name).map(|a| a.support) {
                Some(Support::No(why)) => found.push(format!(
                    "annotation {}: not supported by Sluice: {why}; ignored",
                    self.key(name)
                )),
                Some(_) => {}
                None => found.push(format!(
                    "annotation {}: unknown (not an ingress-nginx annotation Sluice knows); ignored",
                    self.key(name)
                )),
            }
        }
        for reason in found {
            self.diagnose(Severity::Unsupported, reason);
        }
    }

    pub(super) fn get(&self, name: &str) -> Option<&'a str> {
        // A parser reads only what the registry lists (tests run with debug assertions).
        debug_assert!(
            entry(name).is_some(),
            "{name} is read but not in the registry"
        );
        self.values.get(name).map(|(value, _)| *value)
    }

    pub(super) fn bool(&mut self, name: &str) -> Option<bool> {
        let value = self.get(name)?;
        let parsed = go_bool(value);
        if parsed.is_none() {
            self.invalid(name, value, "true or false");
        }
        parsed
    }

    pub(super) fn duration(&mut self, name: &str) -> Option<std::time::Duration> {
        let value = self.get(name)?;
        let parsed = parse_duration(value);
        if parsed.is_none() {
            self.invalid(name, value, "a number of seconds");
        }
        parsed
    }

    pub(super) fn number(&mut self, name: &str) -> Option<u32> {
        let value = self.get(name)?;
        let parsed = value.parse().ok();
        if parsed.is_none() {
            self.invalid(name, value, "a whole number");
        }
        parsed
    }

    pub(super) fn size(&mut self, name: &str) -> Option<u64> {
        let value = self.get(name)?;
        let parsed = parse_size(value.strip_suffix(['b', 'B']).unwrap_or(value));
        if parsed.is_none() {
            self.invalid(name, value, "a size like 8m, 512k or 1048576 (0: no limit)");
        }
        parsed
    }

    /// A literal header value: no nginx variables, no control characters.
    pub(super) fn header_value(&mut self, name: &str) -> Option<HeaderValue> {
        let value = self.get(name)?;
        if value.contains('$') {
            let key = self.key(name);
            self.diagnose(
                Severity::Unsupported,
                format!("annotation {key}: {value:?}: nginx variables are not supported, only literal values; ignored"),
            );
            return None;
        }
        match HeaderValue::from_str(value) {
            Ok(value) if !value.is_empty() => Some(value),
            _ => {
                self.invalid(name, value, "a literal header value");
                None
            }
        }
    }

    /// Runs the registry's parsers, in [`Parser`] order.
    pub(super) fn read(mut self) -> IngressAnnotations {
        let refused = self.screen();
        let mut out = IngressAnnotations {
            policy: RoutePolicy::from_settings(self.settings),
            use_regex: false,
            server_aliases: Vec::new(),
            app_root: None,
            from_to_www: false,
            service_upstream: false,
            ssl_passthrough: false,
            server_request_headers: Vec::new(),
            server_response_headers: Vec::new(),
            global_auth: true,
            hosts_refused: None,
            backend_protocol: None,
            proxy_ssl: ProxySsl::default(),
            canary: None,
            custom_http_errors: None,
            disable_intercept: None,
            default_backend: None,
            mirror: None,
            custom_headers: None,
            external_auth: None,
            user_auth: None,
            client_cert: None,
            canary_behavior: Default::default(),
            host_ciphers: Default::default(),
        };
        if let Some(why) = refused {
            // ingress-nginx does not serve the Ingress at all; here its routes answer 503
            // and nothing else of it is read (no alias, redirect or passthrough).
            out.policy.denied = Some(why);
            return out;
        }
        let parsers: BTreeSet<Parser> = REGISTRY.iter().filter_map(|a| a.parser).collect();
        for parser in parsers {
            self.run(parser, &mut out);
        }
        out
    }

    /// The ConfigMap's screens of this Ingress ([`screen`]), diagnosed.
    fn screen(&mut self) -> Option<String> {
        let annotations = self.values.iter().map(|(name, (value, sluice))| {
            let prefix = if *sluice { SLUICE_PREFIX } else { NGINX_PREFIX };
            (prefix, *name, *value)
        });
        let (why, fix) = screen(annotations, self.settings)?;
        self.diagnose(
            Severity::Error,
            format!(
                "{why}: the Ingress is refused, its routes answer 503 (ingress-nginx does not \
                 serve it); {fix}"
            ),
        );
        Some(why)
    }

    /// The dispatch: one arm per parser, each reading its annotations into `out`.
    pub(super) fn run(&mut self, parser: Parser, out: &mut IngressAnnotations) {
        let policy = &mut out.policy;
        match parser {
            Parser::SslRedirect => {
                if let Some(on) = self.bool("ssl-redirect") {
                    policy.ssl_redirect.enabled = on;
                }
                if let Some(on) = self.bool("force-ssl-redirect") {
                    policy.ssl_redirect.force = on;
                }
                if let Some(on) = self.bool("preserve-trailing-slash") {
                    policy.ssl_redirect.preserve_trailing_slash = on;
                }
            }
            Parser::AccessLog => {
                if let Some(on) = self.bool("enable-access-log") {
                    policy.access_log = on;
                }
            }
            Parser::OpenTelemetry => {
                // As ingress-nginx: "true" traces this Ingress even with the ConfigMap's key off.
                if let Some(on) = self.bool("enable-opentelemetry") {
                    policy.opentelemetry.enabled = on;
                }
                if let Some(on) = self.bool("opentelemetry-trust-incoming-span") {
                    policy.opentelemetry.trust_incoming_span = on;
                }
            }
            Parser::Redirect => policy.redirect = self.redirect(),
            Parser::UseRegex => out.use_regex = self.bool("use-regex").unwrap_or(false),
            Parser::AppRoot => out.app_root = self.app_root(),
            Parser::FromToWww => {
                out.from_to_www = self.bool("from-to-www-redirect").unwrap_or(false)
            }
            Parser::ServerAlias => out.server_aliases = self.server_aliases(),
            Parser::Rewrite => {
                policy.rewrite = self.rewrite();
                if policy.rewrite.is_none() && self.get("x-forwarded-prefix").is_some() {
                    let key = self.key("x-forwarded-prefix");
                    self.diagnose(
                        Severity::Notice,
                        format!(
                            "annotation {key}: has no effect without rewrite-target (as in ingress-nginx)"
                        ),
                    );
                }
            }
            Parser::UpstreamVhost => policy.upstream_vhost = self.upstream_vhost(),
            Parser::ServiceUpstream => {
                out.service_upstream = self
                    .bool("service-upstream")
                    .unwrap_or(self.settings.service_upstream)
            }
            Parser::SslPassthrough => {
                out.ssl_passthrough = self.bool("ssl-passthrough").unwrap_or(false);
                policy.passthrough_proxy_protocol =
                    self.passthrough_proxy_protocol(out.ssl_passthrough);
            }
            Parser::Body => self.body(policy),
            Parser::Upstream => self.upstream(policy),
            Parser::HashBy => policy.hash_by = self.hash_by(),
            Parser::LoadBalance => policy.upstream.load_balance = self.load_balance(),
            Parser::Canary => out.canary = self.canary(),
            Parser::Affinity => {
                out.canary_behavior = self.canary_behavior();
                let regex_paths = out.use_regex || policy.rewrite.is_some();
                policy.affinity = self.affinity(regex_paths, out.canary_behavior);
            }
            Parser::CustomErrors => {
                if let Some(value) = self.get("custom-http-errors") {
                    match crate::configmap::parse_error_codes(value) {
                        Ok(codes) => out.custom_http_errors = Some(codes),
                        Err(expected) => self.invalid("custom-http-errors", value, expected),
                    }
                }
                out.disable_intercept = self.bool("disable-proxy-intercept-errors");
                out.default_backend = self.get("default-backend").map(str::to_owned);
                if let Some(name) = &out.default_backend {
                    if !model::target::is_dns_label(name) {
                        let name = name.clone();
                        self.invalid(
                            "default-backend",
                            &name,
                            "the name of a Service in the Ingress's namespace",
                        );
                        out.default_backend = None;
                    }
                }
            }
            Parser::Mirror => out.mirror = self.mirror(),
            Parser::Cors => policy.cors = self.cors(),
            Parser::ResponseRewrite => policy.response_rewrite = self.response_rewrite(),
            Parser::ConnectionHeader => policy.connection_header = self.connection_header(),
            Parser::CustomHeaders => out.custom_headers = self.custom_headers(),
            Parser::ProxyBuffering => {
                if let Some(value) = self.get("proxy-buffering") {
                    if value != "on" && value != "off" {
                        self.invalid("proxy-buffering", value, "on or off");
                    }
                }
            }
            Parser::ProxyHttpVersion => {
                if let Some(value) = self.get("proxy-http-version").filter(|v| *v != "1.1") {
                    let key = self.key("proxy-http-version");
                    self.diagnose(
                        Severity::Unsupported,
                        format!(
                            "annotation {key}: {value:?}: Sluice speaks HTTP/1.1 to upstreams; ignored"
                        ),
                    );
                }
            }
            Parser::BackendProtocol => out.backend_protocol = self.backend_protocol(policy),
            Parser::ProxySsl => out.proxy_ssl = self.proxy_ssl(),
            Parser::Access => self.access(policy),
            Parser::Limits => self.limits(policy),
            Parser::SslCiphers => out.host_ciphers = self.ssl_ciphers(),
            Parser::ClientCert => match self.client_cert() {
                None => {}
                Some(Ok(spec)) => out.client_cert = Some(spec),
                Some(Err(why)) => {
                    // Scope host (ingress-nginx's): the whole host is refused.
                    if self.get("auth-tls-scope") != Some("path") {
                        out.hosts_refused = Some(why.clone());
                    }
                    policy.denied = Some(why);
                }
            },
            Parser::FailClosed => self.fail_closed(policy),
            Parser::UserAuth => {
                let namespace = self.object.namespace.clone();
                out.user_auth =
                    self.user_auth(&namespace, &mut policy.satisfy_any, &mut policy.denied);
            }
            Parser::ExternalAuth => out.external_auth = self.external_auth(&mut policy.denied),
            Parser::GlobalAuth => out.global_auth = self.bool("enable-global-auth").unwrap_or(true),
            Parser::Snippets => self.snippets(
                policy,
                &mut out.server_request_headers,
                &mut out.server_response_headers,
            ),
        }
    }
}
