//! ingress-nginx's annotations (`nginx.ingress.kubernetes.io/*`, also read under `sluice.dev/`)
//! turned into the route policy model, with ingress-nginx's value rules.
//!
//! ```text
//!  metadata.annotations ─▶ ours? (either prefix) ─▶ REGISTRY: implemented / accepted /
//!      unsupported / unknown ─▶ its entry's Parser, in Parser order ─▶ IngressAnnotations
//!                                 │ bad value ─▶ Error diagnostic, default kept
//!                                 │            (allow/deny lists, snippets: route refused, 503)
//!                                 ├ not implemented but restricts access (auth-type, auth-url,
//!                                 │  auth-tls-secret, …) ─▶ Error diagnostic, route refused, 503
//!                                 └ unsupported / unknown ─▶ Unsupported diagnostic
//! ```
//! An annotation with no effect in Sluice is never silent: it is a diagnostic on its Ingress.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use http::{HeaderName, HeaderValue};

use model::mirror::MirrorTarget;
use model::policy::{
    Access, HashBy, HeaderAction, HeaderEdit, ProxyProtocolVersion, Redirect, Rewrite, RoutePolicy,
    TlsVersions, UpstreamProtocol,
};
use model::routes::HostPattern;
use model::settings::{NextUpstream, Settings};
use model::{Diagnostic, ObjectRef, Severity};

use crate::configmap::{parse_cidrs, parse_duration, parse_size};

/// ingress-nginx's annotation prefix.
pub const NGINX_PREFIX: &str = "nginx.ingress.kubernetes.io/";
/// Sluice's own prefix for the same keys; it wins when both name one key.
pub const SLUICE_PREFIX: &str = "sluice.dev/";

/// What Sluice does with one ingress-nginx annotation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// Has ingress-nginx's effect.
    Yes,
    /// Has an effect, with the limits the text names.
    Partial(&'static str),
    /// Read and accepted: Sluice already behaves so, or the knob has no meaning here.
    Accepted(&'static str),
    /// Not implemented: a diagnostic on the Ingress. The text says why or where it is planned.
    No(&'static str),
    /// Not implemented, and it restricts who may reach a route: set, it refuses the Ingress's
    /// routes (503, an error diagnostic, the webhook's refusal), as an unreadable allow-list
    /// does, rather than serving them without it. The text says what it is and until when.
    FailsClosed(&'static str),
    /// Sluice's own, which ingress-nginx does not have: read only as `sluice.dev/<key>` (under
    /// ingress-nginx's prefix it is a diagnostic, as ingress-nginx would ignore it). The text
    /// says what it does.
    Sluice(&'static str),
}

/// A companion of `auth-type`: ingress-nginx reads it only with `auth-type`.
const WITH_AUTH_TYPE: &str = "planned (wave 2); read only with auth-type (alone ignored, as in ingress-nginx), which refuses the Ingress until then";
/// A companion of `auth-tls-secret`.
const WITH_AUTH_TLS_SECRET: &str = "planned (wave 2); read only with auth-tls-secret (alone ignored, as in ingress-nginx), which refuses the Ingress until then";
/// A companion of `auth-url`.
const WITH_AUTH_URL: &str = "planned (wave 2); read only with auth-url (alone ignored, as in ingress-nginx), which refuses the Ingress until then";
/// Why rate limits do not fail closed: they bound how much a client may ask, not who may ask.
/// Without them every client still gets exactly the answers it is entitled to; what is lost is
/// protection of the backends' capacity, which a diagnostic reports.
const RATE_LIMIT: &str = "planned (wave 2); a rate limit protects capacity, not access (it decides how much a client may ask, never who may), so the Ingress is served without it, with a diagnostic";
/// Why the ModSecurity switches do not fail closed while `modsecurity-snippet` does.
const NO_WAF: &str = "no web application firewall in Sluice; without modsecurity-snippet, ingress-nginx runs ModSecurity in DetectionOnly mode (it logs, blocks nothing), so the Ingress is served, with a diagnostic";

/// One annotation: its name (without prefix), what Sluice does with it (README's table) and
/// the parser that reads it. The reader knows no annotation that is not here.
#[derive(Clone, Copy, Debug)]
pub struct Annotation {
    pub name: &'static str,
    pub support: Support,
    /// `None`: nothing reads the value (not implemented, or accepted as a no-op); its
    /// presence alone is diagnosed from `support`.
    pub parser: Option<Parser>,
}

/// The parsers of the registry, each reading one annotation or a family that is read together
/// (`proxy-ssl-*`, the redirects). They run in this order, each once per Ingress whether or not
/// its annotations are set (defaults and "has no effect without" notices come from them). The
/// order matters where two write one field: `backend-protocol`, the access lists, the
/// fail-closed annotations and the snippets each may refuse the routes, the last one's reason
/// wins; and `ssl-passthrough` is read before `ssl-passthrough-proxy-protocol`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Parser {
    SslRedirect,
    AccessLog,
    OpenTelemetry,
    Redirect,
    UseRegex,
    AppRoot,
    FromToWww,
    ServerAlias,
    Rewrite,
    UpstreamVhost,
    ServiceUpstream,
    SslPassthrough,
    Body,
    Upstream,
    HashBy,
    Canary,
    CustomErrors,
    Mirror,
    ProxyBuffering,
    ProxyHttpVersion,
    BackendProtocol,
    ProxySsl,
    Access,
    FailClosed,
    GlobalAuth,
    Snippets,
}

const fn annotation(name: &'static str, support: Support, parser: Option<Parser>) -> Annotation {
    Annotation {
        name,
        support,
        parser,
    }
}

/// The registry entry of `name` (without prefix).
pub fn entry(name: &str) -> Option<&'static Annotation> {
    REGISTRY.iter().find(|a| a.name == name)
}

/// Every annotation ingress-nginx documents, what Sluice does with it and its parser, then
/// Sluice's own. README's table is made from this (a test keeps them equal), and the reader
/// runs the parsers named here: a supported annotation without a parser fails a test.
pub const REGISTRY: &[Annotation] = &[
    annotation("app-root", Support::Yes, Some(Parser::AppRoot)),
    annotation("affinity", Support::No("planned (wave 2)"), None),
    annotation("affinity-mode", Support::No("planned (wave 2)"), None),
    annotation("affinity-canary-behavior", Support::No("planned (wave 2)"), None),
    annotation("allowlist-source-range", Support::Yes, Some(Parser::Access)),
    annotation("auth-realm", Support::No(WITH_AUTH_TYPE), None),
    annotation("auth-secret", Support::No(WITH_AUTH_TYPE), None),
    annotation("auth-secret-type", Support::No(WITH_AUTH_TYPE), None),
    annotation("auth-type", Support::FailsClosed("until basic and digest authentication are implemented (wave 2): any value refuses the Ingress's routes (503) rather than serve them to anyone; ingress-nginx, too, refuses them when auth-type or auth-secret cannot be used"), Some(Parser::FailClosed)),
    annotation("auth-tls-secret", Support::FailsClosed("until client certificate authentication is implemented (wave 2): any value refuses every route of the Ingress's hosts, other Ingresses' included (503), rather than serve them without a client certificate (ingress-nginx verifies one by default, auth-tls-verify-client: on, for the whole server: its TLS handshake asks every client of the host; and refuses the routes when the Secret cannot be used)"), Some(Parser::FailClosed)),
    annotation("auth-tls-verify-depth", Support::No(WITH_AUTH_TLS_SECRET), None),
    annotation("auth-tls-verify-client", Support::No(WITH_AUTH_TLS_SECRET), None),
    annotation("auth-tls-error-page", Support::No(WITH_AUTH_TLS_SECRET), None),
    annotation("auth-tls-pass-certificate-to-upstream", Support::No(WITH_AUTH_TLS_SECRET), None),
    annotation("auth-tls-match-cn", Support::No(WITH_AUTH_TLS_SECRET), None),
    annotation("auth-signin", Support::No(WITH_AUTH_URL), None),
    annotation("auth-signin-redirect-param", Support::No(WITH_AUTH_URL), None),
    annotation("auth-method", Support::No(WITH_AUTH_URL), None),
    annotation("auth-response-headers", Support::No(WITH_AUTH_URL), None),
    annotation("auth-request-redirect", Support::No(WITH_AUTH_URL), None),
    annotation("auth-url", Support::FailsClosed("until external authentication is implemented (wave 2): any value refuses the Ingress's routes (503) rather than serve them unauthenticated; ingress-nginx, too, refuses them when the URL cannot be read"), Some(Parser::FailClosed)),
    annotation("auth-cache-key", Support::No(WITH_AUTH_URL), None),
    annotation("auth-cache-duration", Support::No(WITH_AUTH_URL), None),
    annotation("auth-keepalive", Support::No(WITH_AUTH_URL), None),
    annotation("auth-keepalive-share-vars", Support::No(WITH_AUTH_URL), None),
    annotation("auth-keepalive-requests", Support::No(WITH_AUTH_URL), None),
    annotation("auth-keepalive-timeout", Support::No(WITH_AUTH_URL), None),
    annotation("auth-proxy-set-headers", Support::No(WITH_AUTH_URL), None),
    annotation("auth-snippet", Support::No("snippets are never executed"), None),
    annotation("enable-global-auth", Support::Accepted("\"false\" leaves the Ingress out of the ConfigMap's global-auth-url, which refuses the routes it covers (503) until external authentication is implemented (wave 2)"), Some(Parser::GlobalAuth)),
    annotation("backend-protocol", Support::Partial("HTTP, HTTPS (HTTP/1.1 over TLS), GRPC (HTTP/2 prior knowledge) and GRPCS (HTTP/2 over TLS, with the proxy-ssl-* settings); AUTO_HTTP is served as HTTP; FCGI and AJP routes answer 503"), Some(Parser::BackendProtocol)),
    annotation("canary", Support::Partial("with ingress-nginx's rules and traps: the canary belongs to the main rule's backend (every rule routing to that Service port gets it), one canary per backend (the oldest), the canary Ingress's other annotations are ignored except upstream-hash-by and service-upstream (load-balance and affinity are not implemented); the main route's backend-protocol applies to the canary Service"), Some(Parser::Canary)),
    annotation("canary-by-header", Support::Yes, Some(Parser::Canary)),
    annotation("canary-by-header-value", Support::Yes, Some(Parser::Canary)),
    annotation("canary-by-header-pattern", Support::Partial("Rust regex syntax rather than PCRE: a pattern it cannot compile (look-around, back-references) is ignored with a diagnostic, as ingress-nginx ignores an invalid one"), Some(Parser::Canary)),
    annotation("canary-by-cookie", Support::Yes, Some(Parser::Canary)),
    annotation("canary-weight", Support::Yes, Some(Parser::Canary)),
    annotation("canary-weight-total", Support::Yes, Some(Parser::Canary)),
    annotation("client-body-buffer-size", Support::Yes, Some(Parser::Body)),
    annotation("configuration-snippet", Support::Partial("never executed; with allow-snippet-annotations, header directives with literal values are translated (see below), anything else refuses the Ingress"), Some(Parser::Snippets)),
    annotation("custom-http-errors", Support::Yes, Some(Parser::CustomErrors)),
    annotation("disable-proxy-intercept-errors", Support::Yes, Some(Parser::CustomErrors)),
    annotation("custom-headers", Support::No("planned (wave 2)"), None),
    annotation("default-backend", Support::Partial("a Service of the Ingress's namespace (its first port): requests go there while the route's Service has no ready endpoint, and it answers the Ingress's custom-http-errors; whether it has endpoints is checked per request, where ingress-nginx checks at its last reload"), Some(Parser::CustomErrors)),
    annotation("enable-cors", Support::No("planned (wave 2)"), None),
    annotation("cors-allow-origin", Support::No("planned (wave 2)"), None),
    annotation("cors-allow-methods", Support::No("planned (wave 2)"), None),
    annotation("cors-allow-headers", Support::No("planned (wave 2)"), None),
    annotation("cors-expose-headers", Support::No("planned (wave 2)"), None),
    annotation("cors-allow-credentials", Support::No("planned (wave 2)"), None),
    annotation("cors-max-age", Support::No("planned (wave 2)"), None),
    annotation("force-ssl-redirect", Support::Yes, Some(Parser::SslRedirect)),
    annotation("from-to-www-redirect", Support::Yes, Some(Parser::FromToWww)),
    annotation("http2-push-preload", Support::No("HTTP/2 server push is obsolete (browsers dropped it)"), None),
    annotation("limit-connections", Support::No(RATE_LIMIT), None),
    annotation("limit-rps", Support::No(RATE_LIMIT), None),
    annotation("limit-rpm", Support::No(RATE_LIMIT), None),
    annotation("limit-burst-multiplier", Support::No(RATE_LIMIT), None),
    annotation("limit-rate", Support::No(RATE_LIMIT), None),
    annotation("limit-rate-after", Support::No(RATE_LIMIT), None),
    annotation("limit-allowlist", Support::No("planned (wave 2); exempts addresses from the rate limits, so it only ever lets more through"), None),
    annotation("limit-whitelist", Support::No("planned (wave 2); the older name of limit-allowlist"), None),
    annotation("global-rate-limit", Support::No(RATE_LIMIT), None),
    annotation("global-rate-limit-window", Support::No(RATE_LIMIT), None),
    annotation("global-rate-limit-key", Support::No(RATE_LIMIT), None),
    annotation("global-rate-limit-ignored-cidrs", Support::No("planned (wave 2); exempts addresses from the global rate limit, so it only ever lets more through"), None),
    annotation("permanent-redirect", Support::Yes, Some(Parser::Redirect)),
    annotation("permanent-redirect-code", Support::Yes, Some(Parser::Redirect)),
    annotation("temporal-redirect", Support::Yes, Some(Parser::Redirect)),
    annotation("temporal-redirect-code", Support::Yes, Some(Parser::Redirect)),
    annotation("preserve-trailing-slash", Support::Yes, Some(Parser::SslRedirect)),
    annotation("proxy-body-size", Support::Yes, Some(Parser::Body)),
    annotation("proxy-cookie-domain", Support::No("planned (wave 2)"), None),
    annotation("proxy-cookie-path", Support::No("planned (wave 2)"), None),
    annotation("proxy-connect-timeout", Support::Yes, Some(Parser::Upstream)),
    annotation("proxy-send-timeout", Support::Yes, Some(Parser::Upstream)),
    annotation("proxy-read-timeout", Support::Yes, Some(Parser::Upstream)),
    annotation("proxy-next-upstream", Support::Yes, Some(Parser::Upstream)),
    annotation("proxy-next-upstream-timeout", Support::Yes, Some(Parser::Upstream)),
    annotation("proxy-next-upstream-tries", Support::Yes, Some(Parser::Upstream)),
    annotation("proxy-request-buffering", Support::Yes, Some(Parser::Body)),
    annotation("proxy-redirect-from", Support::No("planned (wave 2)"), None),
    annotation("proxy-redirect-to", Support::No("planned (wave 2)"), None),
    annotation("proxy-http-version", Support::Accepted("1.1 is what Sluice speaks; 1.0 is a diagnostic"), Some(Parser::ProxyHttpVersion)),
    annotation("proxy-ssl-secret", Support::Yes, Some(Parser::ProxySsl)),
    annotation("proxy-ssl-ciphers", Support::Partial("validated; rustls's cipher suites apply, so a list other than DEFAULT is a diagnostic"), Some(Parser::ProxySsl)),
    annotation("proxy-ssl-name", Support::Yes, Some(Parser::ProxySsl)),
    annotation("proxy-ssl-protocols", Support::Partial("TLSv1.2 and TLSv1.3; older versions are dropped with a diagnostic"), Some(Parser::ProxySsl)),
    annotation("proxy-ssl-verify", Support::Yes, Some(Parser::ProxySsl)),
    annotation("proxy-ssl-verify-depth", Support::Yes, Some(Parser::ProxySsl)),
    annotation("proxy-ssl-server-name", Support::Yes, Some(Parser::ProxySsl)),
    annotation("secure-backends", Support::No("removed from ingress-nginx (0.18); use backend-protocol: HTTPS"), None),
    annotation("enable-rewrite-log", Support::Accepted("no effect: Sluice logs rewrites at debug level"), None),
    annotation("rewrite-target", Support::Yes, Some(Parser::Rewrite)),
    annotation("satisfy", Support::No("planned with the auth annotations (wave 2); it restricts nothing itself, it only says whether authentication and the allow-list must both pass (all) or either (any), and the auth annotations refuse the Ingress until then"), None),
    annotation("server-alias", Support::Yes, Some(Parser::ServerAlias)),
    annotation("server-snippet", Support::Partial("never executed; with allow-snippet-annotations, header directives with literal values are translated for every route of the host, anything else refuses the Ingress"), Some(Parser::Snippets)),
    annotation("service-upstream", Support::Yes, Some(Parser::ServiceUpstream)),
    annotation("session-cookie-change-on-failure", Support::No("planned (wave 2)"), None),
    annotation("session-cookie-conditional-samesite-none", Support::No("planned (wave 2)"), None),
    annotation("session-cookie-domain", Support::No("planned (wave 2)"), None),
    annotation("session-cookie-expires", Support::No("planned (wave 2)"), None),
    annotation("session-cookie-max-age", Support::No("planned (wave 2)"), None),
    annotation("session-cookie-name", Support::No("planned (wave 2)"), None),
    annotation("session-cookie-path", Support::No("planned (wave 2)"), None),
    annotation("session-cookie-samesite", Support::No("planned (wave 2)"), None),
    annotation("session-cookie-secure", Support::No("planned (wave 2)"), None),
    annotation("ssl-redirect", Support::Yes, Some(Parser::SslRedirect)),
    annotation("ssl-passthrough", Support::Yes, Some(Parser::SslPassthrough)),
    annotation("stream-snippet", Support::No("snippets are never executed"), None),
    annotation("upstream-hash-by", Support::Partial("the key's consistent hash picks the endpoint (a ring of 160 points per endpoint: moving one endpoint moves about 1/N of the keys); the key may use the request's variables (client address and port, method, $request_uri, $uri, $args, $arg_*, $scheme, $host, $server_name, $http_*, $cookie_*); a retry goes to the next endpoint along the ring, where ingress-nginx asks the same endpoint again"), Some(Parser::HashBy)),
    annotation("upstream-hash-by-subset", Support::No("planned (wave 2); with upstream-hash-by the key's own endpoint is chosen, not a random one of its subset"), None),
    annotation("upstream-hash-by-subset-size", Support::No("planned (wave 2), with upstream-hash-by-subset"), None),
    annotation("x-forwarded-prefix", Support::Yes, Some(Parser::Rewrite)),
    annotation("load-balance", Support::No("planned (wave 2); the ConfigMap's load-balance applies"), None),
    annotation("upstream-vhost", Support::Yes, Some(Parser::UpstreamVhost)),
    annotation("denylist-source-range", Support::Yes, Some(Parser::Access)),
    annotation("whitelist-source-range", Support::Yes, Some(Parser::Access)),
    annotation("proxy-buffering", Support::Accepted("Sluice streams responses; on and off both accepted"), Some(Parser::ProxyBuffering)),
    annotation("proxy-buffers-number", Support::Accepted("no effect: Sluice does not buffer responses in nginx's buffers"), None),
    annotation("proxy-buffer-size", Support::Accepted("no effect: Sluice does not buffer responses in nginx's buffers"), None),
    annotation("proxy-busy-buffers-size", Support::Accepted("no effect: Sluice does not buffer responses in nginx's buffers"), None),
    annotation("proxy-max-temp-file-size", Support::Accepted("no effect: Sluice does not buffer responses to disk"), None),
    annotation("ssl-ciphers", Support::No("per-Ingress cipher lists are not supported; rustls's safe defaults apply"), None),
    annotation("ssl-prefer-server-ciphers", Support::No("per-Ingress cipher lists are not supported; rustls's safe defaults apply"), None),
    annotation("connection-proxy-header", Support::No("Sluice manages upstream connections itself"), None),
    annotation("enable-access-log", Support::Yes, Some(Parser::AccessLog)),
    annotation("enable-opentelemetry", Support::Yes, Some(Parser::OpenTelemetry)),
    annotation("opentelemetry-trust-incoming-span", Support::Yes, Some(Parser::OpenTelemetry)),
    annotation("use-regex", Support::Yes, Some(Parser::UseRegex)),
    annotation("enable-modsecurity", Support::No(NO_WAF), None),
    annotation("enable-owasp-core-rules", Support::No(NO_WAF), None),
    annotation("modsecurity-transaction-id", Support::No(NO_WAF), None),
    annotation("modsecurity-snippet", Support::FailsClosed("until Sluice has a web application firewall (not planned): the snippet is how ingress-nginx's ModSecurity is made to block (SecRuleEngine On), so it refuses the Ingress's routes (503) rather than serve them unfiltered; snippets are never executed"), Some(Parser::FailClosed)),
    annotation("mirror-target", Support::Partial("a copy of each request goes to the URL (its path may use $request_uri, $args, $arg_*, $host, $scheme, $remote_addr, $request_method, $http_*, $cookie_*, $server_name) without waiting for it: never delayed or failed by it, at most mirror-max-in-flight per worker; the host must be an IP address or a Service as <name>.<namespace>.svc[.cluster.local] (its port's endpoints; Sluice resolves no other DNS name); with proxy-request-buffering off the body is teed and the copy dropped if it falls 256 KiB behind; copies carry the client's headers as they came, not the X-Forwarded-* the main request gets"), Some(Parser::Mirror)),
    annotation("mirror-host", Support::Yes, Some(Parser::Mirror)),
    annotation("mirror-request-body", Support::Yes, Some(Parser::Mirror)),
    annotation("ssl-passthrough-proxy-protocol", Support::Sluice("v1 or v2: a PROXY protocol header naming the client (the load balancer's, with use-proxy-protocol) is written to the endpoint before the ClientHello of each ssl-passthrough connection; off by default (ingress-nginx has no such switch)"), Some(Parser::SslPassthrough)),
];

/// What one Ingress's annotations ask for.
#[derive(Debug)]
pub struct IngressAnnotations {
    /// The ConfigMap's defaults with this Ingress's overrides.
    pub policy: RoutePolicy,
    /// `use-regex`: this Ingress's paths are regular expressions.
    pub use_regex: bool,
    /// `server-alias`: more names for this Ingress's hosts.
    pub server_aliases: Vec<HostPattern>,
    /// `app-root`: a request for `/` on this Ingress's hosts is sent here (302).
    pub app_root: Option<HeaderValue>,
    /// `from-to-www-redirect`.
    pub from_to_www: bool,
    /// `service-upstream`: one endpoint, the Service's cluster IP.
    pub service_upstream: bool,
    /// `ssl-passthrough`: TLS connections for this Ingress's hosts go to the backend of its
    /// `/` path undecrypted (with `--enable-ssl-passthrough`).
    pub ssl_passthrough: bool,
    /// `server-snippet` header directives: for every route of this Ingress's hosts.
    pub server_request_headers: Vec<HeaderEdit>,
    pub server_response_headers: Vec<HeaderEdit>,
    /// `enable-global-auth` (default true): the ConfigMap's `global-auth-url` covers this
    /// Ingress's routes.
    pub global_auth: bool,
    /// Why every route of this Ingress's hosts, other Ingresses' included, is refused:
    /// `auth-tls-secret`, which ingress-nginx applies to the whole server (its TLS handshake
    /// asks every client of the host for a certificate).
    pub hosts_refused: Option<String>,
    /// `backend-protocol`, when it names one Sluice serves. `None`: not set (the Service
    /// port's `appProtocol` decides), or refused (the routes are denied).
    pub backend_protocol: Option<BackendProtocol>,
    /// The `proxy-ssl-*` annotations, for the routes that turn out TLS.
    pub proxy_ssl: ProxySsl,
    /// `canary: "true"`: this Ingress is the alternative backend of other Ingresses' rules.
    pub canary: Option<Canary>,
    /// `custom-http-errors`: the codes (300-599, sorted); `None` when not set (the
    /// ConfigMap's apply).
    pub custom_http_errors: Option<Vec<u16>>,
    /// `disable-proxy-intercept-errors`, when set.
    pub disable_intercept: Option<bool>,
    /// `default-backend`: a Service name in the Ingress's namespace.
    pub default_backend: Option<String>,
    /// `mirror-target` with `mirror-host` and `mirror-request-body`, checked; compile
    /// resolves where it goes.
    pub mirror: Option<MirrorAnnotations>,
}

/// The mirror family as read: the target checked, the host and body switch defaulted as
/// ingress-nginx defaults them.
#[derive(Clone, Debug)]
pub struct MirrorAnnotations {
    /// The annotation's full name, as written (either prefix), for diagnostics.
    pub key: String,
    pub written: String,
    pub target: MirrorTarget,
    pub host: HeaderValue,
    pub request_body: bool,
}

/// The `canary-*` annotations of a canary Ingress, checked as ingress-nginx checks them (a
/// value it would refuse is left out with a diagnostic, as it defaults it).
#[derive(Clone, Debug, Default)]
pub struct Canary {
    /// `canary-weight`: requests in `weight_total` sent to the canary; 0 (the default) none.
    pub weight: u32,
    /// `canary-weight-total`; ingress-nginx uses 100 when it is below 100.
    pub weight_total: u32,
    pub header: Option<HeaderName>,
    pub header_value: Option<String>,
    /// Unanchored, as ingress-nginx matches it.
    pub header_pattern: Option<regex::Regex>,
    pub cookie: Option<String>,
}

/// What `backend-protocol` (or a Service port's `appProtocol`) asks for: the HTTP spoken and
/// whether over TLS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BackendProtocol {
    pub protocol: UpstreamProtocol,
    pub tls: bool,
}

/// The `proxy-ssl-*` annotations as read; `compile` reads the Secret and makes the route's
/// `UpstreamTls`. As in ingress-nginx, nothing but the defaults applies without a Secret.
#[derive(Clone, Debug, PartialEq)]
pub struct ProxySsl {
    /// `proxy-ssl-secret` as written (`namespace/name`).
    pub secret: Option<String>,
    pub verify: bool,
    pub verify_depth: u32,
    pub name: Option<String>,
    pub server_name: bool,
    pub versions: TlsVersions,
}

impl Default for ProxySsl {
    /// ingress-nginx's defaults: no verification (depth 1), no SNI.
    fn default() -> ProxySsl {
        ProxySsl {
            secret: None,
            verify: false,
            verify_depth: 1,
            name: None,
            server_name: false,
            versions: TlsVersions::ALL,
        }
    }
}

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

/// The characters ingress-nginx's `ValidateServerName` allows (`parser.IsValidRegex`), which
/// it checks `mirror-target` and `mirror-host` with.
fn is_server_name_text(value: &str) -> bool {
    value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-._~/:^$[](){}*+?|&=\\".contains(c))
}

/// Whether ingress-nginx's mirror parser finds a host in a target (`parser.StringToURL` on
/// the text before its first `$`: a scheme, a host, no `..` in it).
fn go_url_has_host(target: &str) -> bool {
    let before_variables = target.split('$').next().unwrap_or("");
    let Some((scheme, rest)) = before_variables.split_once("://") else {
        return false;
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    !scheme.is_empty() && !host.is_empty() && !host.contains("..")
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
fn is_sluice_only(name: &str) -> bool {
    entry(name).is_some_and(|a| matches!(a.support, Support::Sluice(_)))
}

struct Reader<'a> {
    /// Annotation name without prefix → (value, came with the Sluice prefix).
    values: BTreeMap<&'a str, (&'a str, bool)>,
    object: &'a ObjectRef,
    settings: &'a Settings,
    diagnostics: &'a mut Vec<Diagnostic>,
}

impl<'a> Reader<'a> {
    fn diagnose(&mut self, severity: Severity, reason: String) {
        self.diagnostics.push(Diagnostic::with_severity(
            severity,
            self.object.clone(),
            reason,
        ));
    }

    fn key(&self, name: &str) -> String {
        match self.values.get(name) {
            Some((_, true)) => format!("{SLUICE_PREFIX}{name}"),
            _ => format!("{NGINX_PREFIX}{name}"),
        }
    }

    /// An invalid value: the default applies.
    fn invalid(&mut self, name: &str, value: &str, expected: &str) {
        let key = self.key(name);
        self.diagnose(
            Severity::Error,
            format!("annotation {key}: invalid value {value:?}: expected {expected}; ignored"),
        );
    }

    /// A notice for each of `names` that is set: ingress-nginx reads them only with `needed`,
    /// which is not set.
    fn no_effect_without(&mut self, names: &[&str], needed: &str) {
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

    fn unsupported(&mut self) {
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

    fn get(&self, name: &str) -> Option<&'a str> {
        // A parser reads only what the registry lists (tests run with debug assertions).
        debug_assert!(
            entry(name).is_some(),
            "{name} is read but not in the registry"
        );
        self.values.get(name).map(|(value, _)| *value)
    }

    fn bool(&mut self, name: &str) -> Option<bool> {
        let value = self.get(name)?;
        let parsed = go_bool(value);
        if parsed.is_none() {
            self.invalid(name, value, "true or false");
        }
        parsed
    }

    fn duration(&mut self, name: &str) -> Option<std::time::Duration> {
        let value = self.get(name)?;
        let parsed = parse_duration(value);
        if parsed.is_none() {
            self.invalid(name, value, "a number of seconds");
        }
        parsed
    }

    fn number(&mut self, name: &str) -> Option<u32> {
        let value = self.get(name)?;
        let parsed = value.parse().ok();
        if parsed.is_none() {
            self.invalid(name, value, "a whole number");
        }
        parsed
    }

    fn size(&mut self, name: &str) -> Option<u64> {
        let value = self.get(name)?;
        let parsed = parse_size(value.strip_suffix(['b', 'B']).unwrap_or(value));
        if parsed.is_none() {
            self.invalid(name, value, "a size like 8m, 512k or 1048576 (0: no limit)");
        }
        parsed
    }

    /// A literal header value: no nginx variables, no control characters.
    fn header_value(&mut self, name: &str) -> Option<HeaderValue> {
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
    fn read(mut self) -> IngressAnnotations {
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
        };
        let parsers: BTreeSet<Parser> = REGISTRY.iter().filter_map(|a| a.parser).collect();
        for parser in parsers {
            self.run(parser, &mut out);
        }
        out
    }

    /// The dispatch: one arm per parser, each reading its annotations into `out`.
    fn run(&mut self, parser: Parser, out: &mut IngressAnnotations) {
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
                out.service_upstream = self.bool("service-upstream").unwrap_or(false)
            }
            Parser::SslPassthrough => {
                out.ssl_passthrough = self.bool("ssl-passthrough").unwrap_or(false);
                policy.passthrough_proxy_protocol =
                    self.passthrough_proxy_protocol(out.ssl_passthrough);
            }
            Parser::Body => self.body(policy),
            Parser::Upstream => self.upstream(policy),
            Parser::HashBy => policy.hash_by = self.hash_by(),
            Parser::Canary => out.canary = self.canary(),
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
            Parser::FailClosed => out.hosts_refused = self.fail_closed(policy),
            Parser::GlobalAuth => out.global_auth = self.bool("enable-global-auth").unwrap_or(true),
            Parser::Snippets => self.snippets(
                policy,
                &mut out.server_request_headers,
                &mut out.server_response_headers,
            ),
        }
    }

    fn body(&mut self, policy: &mut RoutePolicy) {
        if let Some(size) = self.size("proxy-body-size") {
            policy.body.max_size = size;
        }
        if let Some(value) = self.get("proxy-request-buffering") {
            match value {
                "on" => policy.body.request_buffering = true,
                "off" => policy.body.request_buffering = false,
                _ => self.invalid("proxy-request-buffering", value, "on or off"),
            }
        }
        if let Some(size) = self.size("client-body-buffer-size") {
            match usize::try_from(size) {
                Ok(size) if size > 0 => policy.body.buffer_size = size,
                _ => {
                    let value = self.get("client-body-buffer-size").unwrap_or_default();
                    self.invalid(
                        "client-body-buffer-size",
                        value,
                        "a size of at least 1 byte",
                    );
                }
            }
        }
    }

    fn upstream(&mut self, policy: &mut RoutePolicy) {
        let upstream = &mut policy.upstream;
        if let Some(d) = self.duration("proxy-connect-timeout") {
            upstream.connect_timeout = d;
        }
        if let Some(d) = self.duration("proxy-send-timeout") {
            upstream.send_timeout = d;
        }
        if let Some(d) = self.duration("proxy-read-timeout") {
            upstream.read_timeout = d;
        }
        if let Some(tries) = self.number("proxy-next-upstream-tries") {
            upstream.tries = tries;
        }
        if let Some(d) = self.duration("proxy-next-upstream-timeout") {
            upstream.next_upstream_timeout = d;
        }
        if let Some(value) = self.get("proxy-next-upstream") {
            match NextUpstream::parse(value) {
                Ok(conditions) => upstream.next_upstream = conditions,
                Err(why) => self.invalid("proxy-next-upstream", value, &why),
            }
        }
    }

    /// `backend-protocol`, upper-cased as ingress-nginx reads it. A protocol Sluice cannot
    /// speak refuses the routes (503): HTTP sent to a FastCGI or AJP server fails anyway,
    /// only later, less clearly, and possibly after the request had effects.
    fn backend_protocol(&mut self, policy: &mut RoutePolicy) -> Option<BackendProtocol> {
        let value = self.get("backend-protocol")?;
        let key = self.key("backend-protocol");
        let protocol = value.to_ascii_uppercase();
        let (protocol, tls) = match protocol.as_str() {
            "HTTP" => (UpstreamProtocol::Http1, false),
            "HTTPS" => (UpstreamProtocol::Http1, true),
            "GRPC" => (UpstreamProtocol::Grpc, false),
            "GRPCS" => (UpstreamProtocol::Grpc, true),
            "AUTO_HTTP" => {
                self.diagnose(
                    Severity::Unsupported,
                    format!("annotation {key}: AUTO_HTTP (the client's scheme towards the upstream) is not supported; HTTP is used"),
                );
                (UpstreamProtocol::Http1, false)
            }
            "FCGI" | "AJP" => {
                self.diagnose(
                    Severity::Unsupported,
                    format!("annotation {key}: {protocol}: Sluice speaks HTTP to upstreams; the Ingress's routes answer 503 rather than send HTTP to such a server"),
                );
                policy.denied = Some(format!("{key} {protocol} is not supported"));
                return None;
            }
            _ => {
                self.diagnose(
                    Severity::Error,
                    format!("annotation {key}: invalid value {value:?}: expected HTTP, HTTPS, AUTO_HTTP, GRPC, GRPCS, FCGI or AJP; HTTP applies (as in ingress-nginx)"),
                );
                (UpstreamProtocol::Http1, false)
            }
        };
        Some(BackendProtocol { protocol, tls })
    }

    /// `sluice.dev/ssl-passthrough-proxy-protocol`: `v1`, `v2` or `off` (any case).
    fn passthrough_proxy_protocol(
        &mut self,
        ssl_passthrough: bool,
    ) -> Option<ProxyProtocolVersion> {
        const NAME: &str = "ssl-passthrough-proxy-protocol";
        let value = self.get(NAME)?;
        let version = match value.to_ascii_lowercase().as_str() {
            "v1" => ProxyProtocolVersion::V1,
            "v2" => ProxyProtocolVersion::V2,
            "off" => return None,
            _ => {
                self.invalid(NAME, value, "v1, v2 or off");
                return None;
            }
        };
        if !ssl_passthrough {
            let key = self.key(NAME);
            self.diagnose(
                Severity::Notice,
                format!("annotation {key}: has no effect without the ssl-passthrough annotation (it is for passed-through TLS connections only)"),
            );
            return None;
        }
        Some(version)
    }

    fn on_off(&mut self, name: &str) -> Option<bool> {
        match self.get(name)? {
            "on" => Some(true),
            "off" => Some(false),
            value => {
                self.invalid(name, value, "on or off");
                None
            }
        }
    }

    /// The `proxy-ssl-*` annotations, with ingress-nginx's defaults and validation.
    fn proxy_ssl(&mut self) -> ProxySsl {
        const OTHERS: [&str; 6] = [
            "proxy-ssl-verify",
            "proxy-ssl-verify-depth",
            "proxy-ssl-name",
            "proxy-ssl-server-name",
            "proxy-ssl-protocols",
            "proxy-ssl-ciphers",
        ];
        let mut ssl = ProxySsl::default();
        let Some(secret) = self.get("proxy-ssl-secret") else {
            self.no_effect_without(&OTHERS, "proxy-ssl-secret");
            return ssl;
        };
        ssl.secret = Some(secret.to_owned());
        if let Some(on) = self.on_off("proxy-ssl-verify") {
            ssl.verify = on;
        }
        if let Some(value) = self.get("proxy-ssl-verify-depth") {
            match value.parse::<u32>() {
                // ingress-nginx: 0 means the default.
                Ok(0) => {}
                Ok(depth) => ssl.verify_depth = depth,
                Err(_) => self.invalid("proxy-ssl-verify-depth", value, "a whole number"),
            }
        }
        if let Some(name) = self.get("proxy-ssl-name") {
            let valid = !name.contains('$')
                && rustls::pki_types::ServerName::try_from(name.to_ascii_lowercase()).is_ok();
            if valid {
                ssl.name = Some(name.to_ascii_lowercase());
            } else {
                self.invalid("proxy-ssl-name", name, "a DNS name or an IP address");
            }
        }
        if let Some(on) = self.on_off("proxy-ssl-server-name") {
            ssl.server_name = on;
        }
        if let Some(value) = self.get("proxy-ssl-protocols") {
            if let Some(versions) = self.tls_versions(value) {
                ssl.versions = versions;
            }
        }
        if let Some(value) = self.get("proxy-ssl-ciphers") {
            let valid = value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+:_-!".contains(&b));
            if !valid {
                self.invalid("proxy-ssl-ciphers", value, "an OpenSSL cipher list");
            } else if !value.is_empty() && value != "DEFAULT" {
                let key = self.key("proxy-ssl-ciphers");
                self.diagnose(
                    Severity::Difference,
                    format!("annotation {key}: cipher lists are not supported; rustls's cipher suites apply (AES-GCM and ChaCha20-Poly1305 with forward secrecy)"),
                );
            }
        }
        ssl
    }

    /// `proxy-ssl-protocols`: nginx's names, separated by spaces.
    fn tls_versions(&mut self, value: &str) -> Option<TlsVersions> {
        let mut versions = TlsVersions {
            tls12: false,
            tls13: false,
        };
        let mut dropped = Vec::new();
        for word in value.split_whitespace() {
            match word {
                "TLSv1.2" => versions.tls12 = true,
                "TLSv1.3" => versions.tls13 = true,
                "SSLv2" | "SSLv3" | "TLSv1" | "TLSv1.1" => dropped.push(word),
                _ => {
                    self.invalid(
                        "proxy-ssl-protocols",
                        value,
                        "protocols among SSLv2 SSLv3 TLSv1 TLSv1.1 TLSv1.2 TLSv1.3, separated by spaces",
                    );
                    return None;
                }
            }
        }
        let key = self.key("proxy-ssl-protocols");
        if !versions.tls12 && !versions.tls13 {
            self.diagnose(
                Severity::Error,
                format!("annotation {key}: {value:?}: Sluice speaks only TLSv1.2 and TLSv1.3 to upstreams; both apply"),
            );
            return None;
        }
        if !dropped.is_empty() {
            self.diagnose(
                Severity::Difference,
                format!("annotation {key}: {} dropped: Sluice speaks only TLSv1.2 and TLSv1.3 to upstreams", dropped.join(" ")),
            );
        }
        Some(versions)
    }

    /// `temporal-redirect` wins over `permanent-redirect`; a code outside 300–307 (temporal) or
    /// 300–308 (permanent) falls back to 302 or 301, as in ingress-nginx.
    fn redirect(&mut self) -> Option<Redirect> {
        for (name, code_name, default, highest) in [
            ("temporal-redirect", "temporal-redirect-code", 302, 307),
            ("permanent-redirect", "permanent-redirect-code", 301, 308),
        ] {
            let Some(url) = self.get(name) else { continue };
            let code = match self.get(code_name) {
                None => default,
                Some(text) => match text.parse::<u16>() {
                    Ok(code) if (300..=highest).contains(&code) => code,
                    _ => {
                        let key = self.key(code_name);
                        self.diagnose(
                            Severity::Error,
                            format!("annotation {key}: invalid value {text:?}: expected a status from 300 to {highest}; {default} applies (as in ingress-nginx)"),
                        );
                        default
                    }
                },
            };
            let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
            return match HeaderValue::from_str(url) {
                Ok(location) if scheme_ok => Some(Redirect { code, location }),
                _ => {
                    self.invalid(name, url, "an http:// or https:// URL");
                    None
                }
            };
        }
        None
    }

    fn app_root(&mut self) -> Option<HeaderValue> {
        let value = self.get("app-root")?;
        let valid = value.starts_with('/') && !value.contains("://") && !value.contains('$');
        match HeaderValue::from_str(value) {
            Ok(root) if valid => Some(root),
            _ => {
                self.invalid("app-root", value, "an absolute path like /app");
                None
            }
        }
    }

    fn server_aliases(&mut self) -> Vec<HostPattern> {
        let Some(value) = self.get("server-alias") else {
            return Vec::new();
        };
        let mut aliases = Vec::new();
        for alias in value.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            match HostPattern::parse(Some(&alias.to_ascii_lowercase())) {
                Ok(HostPattern::Any) | Err(_) => {
                    self.invalid("server-alias", alias, "host names separated by commas")
                }
                Ok(host) => aliases.push(host),
            }
        }
        aliases
    }

    fn rewrite(&mut self) -> Option<Rewrite> {
        let target = self.get("rewrite-target")?;
        if target.is_empty() {
            return None;
        }
        let forwarded_prefix = self.header_value("x-forwarded-prefix");
        if target.chars().any(|c| c.is_control() || c == ' ') {
            self.invalid(
                "rewrite-target",
                target,
                "a path with $1…$9 capture references",
            );
            return None;
        }
        match Rewrite::parse(target, forwarded_prefix) {
            Ok(rewrite) => Some(rewrite),
            Err(why) => {
                let key = self.key("rewrite-target");
                self.diagnose(
                    Severity::Unsupported,
                    format!("annotation {key}: {target:?}: {why}; ignored"),
                );
                None
            }
        }
    }

    /// `upstream-hash-by`: nginx variables and literals; a variable the proxy cannot know
    /// before the request goes upstream is refused by name, and the ConfigMap's load-balance
    /// applies.
    fn hash_by(&mut self) -> Option<Arc<HashBy>> {
        let value = self.get("upstream-hash-by")?;
        match HashBy::parse(value) {
            Ok(hash_by) => Some(Arc::new(hash_by)),
            Err(why) => {
                let key = self.key("upstream-hash-by");
                self.diagnose(
                    Severity::Error,
                    format!("annotation {key}: invalid value {value:?}: {why}; the ConfigMap's load-balance applies"),
                );
                None
            }
        }
    }

    /// The mirror family (ingress-nginx's `annotations/mirror`): `mirror-request-body` is on
    /// unless exactly `off`; `mirror-host` defaults to the target's host. A target
    /// ingress-nginx's validator refuses, or one that is no URL, mirrors nothing here; in
    /// ingress-nginx it still turns the `mirror` directive on, towards an internal location
    /// it then does not write, so the host's own locations get the copies: said in the
    /// diagnostic.
    fn mirror(&mut self) -> Option<MirrorAnnotations> {
        const TRAP: &str = "not mirrored (ingress-nginx ignores the value too, but still sends a copy of each request to its internal path /_mirror-<Ingress UID>, which this host's own locations then answer)";
        let request_body = match self.get("mirror-request-body") {
            None | Some("on") => true,
            Some("off") => false,
            Some(value) => {
                let key = self.key("mirror-request-body");
                self.diagnose(
                    Severity::Error,
                    format!(
                        "annotation {key}: invalid value {value:?}: expected on or off; on applies"
                    ),
                );
                true
            }
        };
        let Some(written) = self.get("mirror-target") else {
            self.no_effect_without(&["mirror-host", "mirror-request-body"], "mirror-target");
            return None;
        };
        let key = self.key("mirror-target");
        if written.is_empty() {
            // ingress-nginx reads an empty value as no mirror at all.
            self.invalid("mirror-target", written, "an http:// or https:// URL");
            return None;
        }
        if !is_server_name_text(written) {
            self.diagnose(
                Severity::Error,
                format!("annotation {key}: invalid value {written:?}: ingress-nginx allows only letters, digits and -._~/:^$[](){{}}*+?|&=\\ in it; {TRAP}"),
            );
            return None;
        }
        let target = match MirrorTarget::parse(written) {
            Ok(target) => target,
            Err(why) => {
                // ingress-nginx writes the mirror location only when its URL parser found a
                // host; past that, what Sluice refuses nginx fails on (an unknown variable) or
                // sends somewhere else (`$uri`: its own internal path).
                let outcome = if go_url_has_host(written) {
                    "not mirrored"
                } else {
                    TRAP
                };
                self.diagnose(
                    Severity::Error,
                    format!("annotation {key}: invalid value {written:?}: {why}; {outcome}"),
                );
                return None;
            }
        };
        let default_host = target.default_host();
        let host = match self.get("mirror-host") {
            None => default_host,
            Some(host) => {
                let hkey = self.key("mirror-host");
                if host.contains('$') {
                    self.diagnose(
                        Severity::Unsupported,
                        format!("annotation {hkey}: {host:?}: nginx variables are not supported, only a literal host; the target's host {default_host:?} applies"),
                    );
                    default_host
                } else if !is_server_name_text(host) || HeaderValue::from_str(host).is_err() {
                    self.diagnose(
                        Severity::Error,
                        format!("annotation {hkey}: invalid value {host:?}: expected a host name; the target's host {default_host:?} applies (as in ingress-nginx)"),
                    );
                    default_host
                } else {
                    host.to_owned()
                }
            }
        };
        Some(MirrorAnnotations {
            key,
            written: written.to_owned(),
            host: HeaderValue::from_str(&host).ok()?,
            target,
            request_body,
        })
    }

    /// The canary family. As ingress-nginx: a weight or header without `canary: "true"` is an
    /// error and the Ingress is an ordinary one; `canary-weight-total` below 100 counts as 100;
    /// a value with characters ingress-nginx refuses (it allows letters, digits and `-._~/:`)
    /// is left out; `canary-by-header-pattern` is read only without `canary-by-header-value`.
    fn canary(&mut self) -> Option<Canary> {
        const CANARY_KEYS: [&str; 6] = [
            "canary-weight",
            "canary-weight-total",
            "canary-by-header",
            "canary-by-header-value",
            "canary-by-header-pattern",
            "canary-by-cookie",
        ];
        let enabled = self.bool("canary").unwrap_or(false);
        if !enabled {
            let set: Vec<String> = CANARY_KEYS
                .iter()
                .filter(|name| self.get(name).is_some())
                .map(|name| self.key(name))
                .collect();
            if !set.is_empty() {
                let key = self.key("canary");
                // Served as ingress-nginx serves it (as an ordinary Ingress): a trap, noticed.
                self.diagnose(
                    Severity::Notice,
                    format!("{}: configured but not enabled ({key} is not \"true\"); ignored, the Ingress is served as an ordinary one (as in ingress-nginx)", set.join(", ")),
                );
            }
            return None;
        }
        let mut canary = Canary {
            weight: 0,
            weight_total: 100,
            ..Canary::default()
        };
        if let Some(weight) = self.canary_number("canary-weight") {
            canary.weight = weight;
        }
        if let Some(total) = self.canary_number("canary-weight-total") {
            if total < 100 {
                let key = self.key("canary-weight-total");
                self.diagnose(
                    Severity::Notice,
                    format!("annotation {key}: {total} is below 100, so 100 applies (as in ingress-nginx): canary-weight {} means {} %", canary.weight, canary.weight.min(100)),
                );
            } else {
                canary.weight_total = total;
            }
        }
        canary.header = self.canary_text("canary-by-header").and_then(|name| {
            match HeaderName::from_bytes(name.as_bytes()) {
                Ok(header) => Some(header),
                Err(_) => {
                    self.invalid("canary-by-header", &name, "a header name");
                    None
                }
            }
        });
        canary.header_value = self.canary_text("canary-by-header-value");
        canary.cookie = self.canary_text("canary-by-cookie");
        if let Some(pattern) = self
            .get("canary-by-header-pattern")
            .filter(|p| !p.is_empty())
        {
            let key = self.key("canary-by-header-pattern");
            if canary.header_value.is_some() {
                self.diagnose(
                    Severity::Notice,
                    format!("annotation {key}: ignored, canary-by-header-value is set and wins (as in ingress-nginx)"),
                );
            } else {
                match regex::Regex::new(pattern) {
                    Ok(compiled) => canary.header_pattern = Some(compiled),
                    Err(why) => self.diagnose(
                        Severity::Unsupported,
                        format!("annotation {key}: {pattern:?} is not a regular expression Sluice can compile ({}); ignored, the request goes on to the cookie and weight rules", why.to_string().lines().last().unwrap_or("invalid").trim().trim_start_matches("error:").trim()),
                    ),
                }
            }
        }
        if canary.header.is_none() {
            for companion in ["canary-by-header-value", "canary-by-header-pattern"] {
                if self.get(companion).is_some() {
                    let key = self.key(companion);
                    self.diagnose(
                        Severity::Notice,
                        format!("annotation {key}: has no effect without canary-by-header (as in ingress-nginx)"),
                    );
                }
            }
        }
        Some(canary)
    }

    /// A canary value ingress-nginx accepts: letters, digits and `-._~/:`, spaces removed.
    fn canary_text(&mut self, name: &str) -> Option<String> {
        let value: String = self.get(name)?.chars().filter(|c| *c != ' ').collect();
        let allowed = |c: char| c.is_ascii_alphanumeric() || "-._~/:".contains(c);
        if !value.chars().all(allowed) {
            self.invalid(
                name,
                &value,
                "letters, digits and -._~/: (what ingress-nginx accepts)",
            );
            return None;
        }
        (!value.is_empty()).then_some(value)
    }

    /// A canary weight: a whole number; a negative one sends nothing, as in ingress-nginx.
    fn canary_number(&mut self, name: &str) -> Option<u32> {
        let value = self.get(name)?;
        match value.parse::<i64>() {
            Ok(n) => Some(n.clamp(0, i64::from(u32::MAX)) as u32),
            Err(_) => {
                self.invalid(name, value, "a whole number");
                None
            }
        }
    }

    fn upstream_vhost(&mut self) -> Option<HeaderValue> {
        let value = self.header_value("upstream-vhost")?;
        let text = value.to_str().unwrap_or_default();
        let host = text.rsplit_once(':').map_or(text, |(host, _)| host);
        if model::target::validate_host(text.as_bytes()).is_err() || host.is_empty() {
            self.invalid(
                "upstream-vhost",
                text,
                "a host name, optionally with a port",
            );
            return None;
        }
        Some(value)
    }

    /// Allow- and deny-lists. A list that cannot be read refuses the routes (503, as
    /// ingress-nginx's "location denied"): serving them open would drop an access rule.
    fn access(&mut self, policy: &mut RoutePolicy) {
        let allow_name = if self.get("allowlist-source-range").is_some() {
            if self.get("whitelist-source-range").is_some() {
                let key = self.key("whitelist-source-range");
                self.diagnose(
                    Severity::Notice,
                    format!(
                        "annotation {key}: ignored, allowlist-source-range is set too and wins"
                    ),
                );
            }
            "allowlist-source-range"
        } else {
            "whitelist-source-range"
        };
        for (name, allow) in [(allow_name, true), ("denylist-source-range", false)] {
            let Some(value) = self.get(name) else {
                continue;
            };
            match parse_cidrs(value) {
                Ok(nets) if allow && nets.is_empty() => {}
                Ok(nets) => {
                    let access: &mut Access = &mut policy.access;
                    if allow {
                        access.allow = nets;
                    } else {
                        access.deny = nets;
                    }
                }
                Err(why) => {
                    let key = self.key(name);
                    self.diagnose(
                        Severity::Error,
                        format!("annotation {key}: {why}; the Ingress's routes answer 503 until it is fixed (an access list is never dropped)"),
                    );
                    policy.denied = Some(format!("{key} cannot be read"));
                }
            }
        }
    }

    /// Annotations that restrict access and are not implemented (`Support::FailsClosed`) refuse
    /// the routes (503) the way an unreadable allow-list does: a cluster moving from
    /// ingress-nginx must not lose its authentication silently. Any value counts: ingress-nginx
    /// refuses the location on a value it cannot use as well.
    /// Returns why the Ingress's hosts are refused as a whole (`auth-tls-secret`).
    fn fail_closed(&mut self, policy: &mut RoutePolicy) -> Option<String> {
        let mut hosts_refused = None;
        for annotation in REGISTRY {
            let (name, Support::FailsClosed(why)) = (annotation.name, annotation.support) else {
                continue;
            };
            if self.get(name).is_none() {
                continue;
            }
            let key = self.key(name);
            self.diagnose(
                Severity::Error,
                format!("annotation {key}: restricts access and is not implemented; {why}"),
            );
            let reason = format!("{key} is not implemented (it restricts access)");
            if name == "auth-tls-secret" {
                hosts_refused = Some(reason.clone());
            }
            policy.denied = Some(reason);
        }
        hosts_refused
    }

    fn snippets(
        &mut self,
        policy: &mut RoutePolicy,
        server_request: &mut Vec<HeaderEdit>,
        server_response: &mut Vec<HeaderEdit>,
    ) {
        let mut request = policy.request_headers.to_vec();
        let mut response = policy.response_headers.to_vec();
        for (name, server) in [("configuration-snippet", false), ("server-snippet", true)] {
            let Some(text) = self.get(name) else { continue };
            let key = self.key(name);
            if !self.settings.allow_snippet_annotations {
                self.diagnose(
                    Severity::Error,
                    format!("annotation {key}: snippet annotations are off (ConfigMap allow-snippet-annotations, as in ingress-nginx); the Ingress's routes answer 503 until it is removed"),
                );
                policy.denied = Some(format!("{key} is not allowed"));
                continue;
            }
            match translate_snippet(text) {
                Ok(edits) => {
                    for (edit, to_request) in edits {
                        match (server, to_request) {
                            (false, true) => request.push(edit),
                            (false, false) => response.push(edit),
                            (true, true) => server_request.push(edit),
                            (true, false) => server_response.push(edit),
                        }
                    }
                }
                Err(why) => {
                    self.diagnose(
                        Severity::Error,
                        format!("annotation {key}: {why}; snippets are never executed, so the Ingress's routes answer 503 until it is changed"),
                    );
                    policy.denied = Some(format!("{key} cannot be translated"));
                }
            }
        }
        policy.request_headers = request.into();
        policy.response_headers = response.into();
    }
}

/// Translates the safe subset of an nginx snippet into header edits (`true`: request side).
/// `Err` names the first directive that is refused, and the typed alternative if there is one.
pub fn translate_snippet(text: &str) -> Result<Vec<(HeaderEdit, bool)>, String> {
    let mut edits = Vec::new();
    for directive in split_directives(text)? {
        let (name, args) = directive.split_first().expect("directives are not empty");
        const TRANSLATED: [&str; 8] = [
            "more_set_headers",
            "more_set_input_headers",
            "add_header",
            "proxy_set_header",
            "more_clear_headers",
            "more_clear_input_headers",
            "proxy_hide_header",
            "",
        ];
        if TRANSLATED.contains(&name.as_str()) {
            if let Some(arg) = args.iter().find(|arg| arg.contains('$')) {
                return Err(format!(
                    "{name}: {arg:?}: nginx variables are not supported, only literal values"
                ));
            }
        }
        match name.as_str() {
            "more_set_headers" | "more_set_input_headers" => {
                let to_request = name == "more_set_input_headers";
                if args.is_empty() || args.iter().any(|a| a.starts_with('-')) {
                    return Err(format!("{name}: only \"Name: value\" arguments are supported (no -s or -t filters)"));
                }
                for arg in args {
                    let (header, value) = arg
                        .split_once(':')
                        .ok_or_else(|| format!("{name}: {arg:?} is not \"Name: value\""))?;
                    let header = header_name(name, header.trim())?;
                    let value = value.trim();
                    let action = if value.is_empty() {
                        HeaderAction::Remove
                    } else {
                        HeaderAction::Set(header_value(name, value)?)
                    };
                    push_edit(
                        &mut edits,
                        name,
                        HeaderEdit {
                            name: header,
                            action,
                        },
                        to_request,
                    )?;
                }
            }
            "add_header" => {
                let (header, value) = match args {
                    [header, value] => (header, value),
                    [header, value, always] if always == "always" => (header, value),
                    _ => {
                        return Err(
                            "add_header: expected a name, a value and optionally always".into()
                        )
                    }
                };
                let header = header_name(name, header)?;
                let action = HeaderAction::Append(header_value(name, value)?);
                push_edit(
                    &mut edits,
                    name,
                    HeaderEdit {
                        name: header,
                        action,
                    },
                    false,
                )?;
            }
            "proxy_set_header" => {
                let [header, value] = args else {
                    return Err("proxy_set_header: expected a name and a value".into());
                };
                let header = header_name(name, header)?;
                // nginx: an empty value means the header is not passed.
                let action = if value.is_empty() {
                    HeaderAction::Remove
                } else {
                    HeaderAction::Set(header_value(name, value)?)
                };
                push_edit(
                    &mut edits,
                    name,
                    HeaderEdit {
                        name: header,
                        action,
                    },
                    true,
                )?;
            }
            "more_clear_headers" | "more_clear_input_headers" | "proxy_hide_header" => {
                let to_request = name == "more_clear_input_headers";
                if args.is_empty() || args.iter().any(|a| a.starts_with('-') || a.contains('*')) {
                    return Err(format!(
                        "{name}: only literal header names are supported (no wildcards or filters)"
                    ));
                }
                for arg in args {
                    let header = header_name(name, arg)?;
                    push_edit(
                        &mut edits,
                        name,
                        HeaderEdit {
                            name: header,
                            action: HeaderAction::Remove,
                        },
                        to_request,
                    )?;
                }
            }
            other => {
                let alternative = typed_alternative(other)
                    .map(|a| format!(" (use {a} instead)"))
                    .unwrap_or_default();
                return Err(format!("the directive {other:?} is refused{alternative}"));
            }
        }
    }
    Ok(edits)
}

/// Headers that say how a message is framed or what its connection does, not what it means.
/// An edit of one desyncs the connection it is sent on: `Content-Length: 0` above a body that
/// is still sent made the body the next request on the pooled upstream connection, another
/// tenant's (request smuggling). Sluice frames every message itself.
const CONNECTION_HEADERS: [&str; 8] = [
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "proxy-connection",
];

/// Adds one translated edit, or refuses it: no snippet frames a message, manages a
/// connection, or chooses the `Host` the upstream routes on.
fn push_edit(
    edits: &mut Vec<(HeaderEdit, bool)>,
    directive: &str,
    edit: HeaderEdit,
    to_request: bool,
) -> Result<(), String> {
    let header = edit.name.as_str();
    if CONNECTION_HEADERS.contains(&header) {
        if edit.action == HeaderAction::Remove
            && !matches!(header, "content-length" | "transfer-encoding")
        {
            // `proxy_set_header Connection "";` (nginx's keep-alive recipe) and the like ask
            // for what Sluice does anyway: hop-by-hop headers are never passed on.
            return Ok(());
        }
        return Err(format!(
            "{directive}: {header} is refused: Sluice sets the framing and connection headers \
             from the message it sends (an edit of them would let one request smuggle another)"
        ));
    }
    if to_request && edit.name == http::header::HOST {
        return Err(format!(
            "{directive}: host is refused (use the upstream-vhost annotation instead)"
        ));
    }
    edits.push((edit, to_request));
    Ok(())
}

fn header_name(directive: &str, name: &str) -> Result<HeaderName, String> {
    HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| format!("{directive}: {name:?} is not a header name"))
}

fn header_value(directive: &str, value: &str) -> Result<HeaderValue, String> {
    HeaderValue::from_str(value)
        .map_err(|_| format!("{directive}: {value:?} is not a header value"))
}

/// The annotation (or ConfigMap key) that does what a refused directive did.
fn typed_alternative(directive: &str) -> Option<&'static str> {
    Some(match directive {
        "rewrite" => "the rewrite-target annotation",
        "return" => "the permanent-redirect or temporal-redirect annotation",
        "allow" | "deny" => "the whitelist-source-range / denylist-source-range annotations",
        "client_max_body_size" => "the proxy-body-size annotation",
        "proxy_connect_timeout" => "the proxy-connect-timeout annotation",
        "proxy_send_timeout" => "the proxy-send-timeout annotation",
        "proxy_read_timeout" => "the proxy-read-timeout annotation",
        "proxy_next_upstream" => "the proxy-next-upstream annotation",
        "proxy_next_upstream_tries" => "the proxy-next-upstream-tries annotation",
        "proxy_next_upstream_timeout" => "the proxy-next-upstream-timeout annotation",
        "proxy_request_buffering" => "the proxy-request-buffering annotation",
        "client_body_buffer_size" => "the client-body-buffer-size annotation",
        "proxy_buffering" => "the proxy-buffering annotation",
        "server_name" => "the server-alias annotation",
        _ => return None,
    })
}

/// Splits a snippet into directives of words (quotes removed). Blocks and `if` are refused:
/// nothing conditional is translated.
fn split_directives(text: &str) -> Result<Vec<Vec<String>>, String> {
    let mut directives = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '#' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            ';' => {
                if !words.is_empty() {
                    directives.push(std::mem::take(&mut words));
                }
            }
            '{' | '}' => {
                let name = words.first().map_or("a block", String::as_str);
                return Err(format!("{name:?} with a block is refused (nothing conditional or nested is translated)"));
            }
            '"' | '\'' => {
                let quote = c;
                let mut word = String::new();
                let mut closed = false;
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some(next) = chars.next() {
                                word.push(next);
                            }
                        }
                        c if c == quote => {
                            closed = true;
                            break;
                        }
                        c => word.push(c),
                    }
                }
                if !closed {
                    return Err("an unterminated quote".into());
                }
                words.push(word);
            }
            c if c.is_whitespace() => {}
            c => {
                let mut word = String::from(c);
                while let Some(&next) = chars.peek() {
                    if next.is_whitespace() || matches!(next, ';' | '{' | '}' | '"' | '\'') {
                        break;
                    }
                    word.push(next);
                    chars.next();
                }
                words.push(word);
            }
        }
    }
    if !words.is_empty() {
        return Err(format!("{:?}: a directive must end with ';'", words[0]));
    }
    Ok(directives)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_translate_header_directives_only() {
        let edits = translate_snippet(
            "more_set_headers \"X-Frame-Options: DENY\";\n# a comment\nproxy_set_header X-Team web;\nadd_header Cache-Control no-store always;\nmore_clear_headers Server;",
        )
        .unwrap();
        let shown: Vec<String> = edits
            .iter()
            .map(|(e, req)| format!("{} {e}", if *req { "request" } else { "response" }))
            .collect();
        assert_eq!(
            shown,
            [
                "response set x-frame-options: DENY",
                "request set x-team: web",
                "response add cache-control: no-store",
                "response remove server"
            ]
        );
        let refused = translate_snippet("rewrite ^/old /new break;").unwrap_err();
        assert!(refused.contains("rewrite-target"), "{refused}");
        let refused = translate_snippet("if ($host = x) { return 301 https://y; }").unwrap_err();
        assert!(refused.contains("block"), "{refused}");
        let refused = translate_snippet("more_set_headers \"X-Host: $host\";").unwrap_err();
        assert!(refused.contains("variables"), "{refused}");
        assert!(translate_snippet("add_header X-A b").is_err());
    }

    #[test]
    fn snippets_cannot_frame_messages_or_choose_the_host() {
        for snippet in [
            "proxy_set_header Content-Length \"0\";",
            "proxy_set_header Transfer-Encoding chunked;",
            "more_set_input_headers \"Connection: close\";",
            "more_set_input_headers \"Keep-Alive: timeout=5\";",
            "proxy_set_header Upgrade websocket;",
            "proxy_set_header TE trailers;",
            "proxy_set_header Trailer X-Checksum;",
            "proxy_set_header Proxy-Connection keep-alive;",
            "more_clear_input_headers Content-Length;",
            "more_set_headers \"Content-Length: 1\";",
            "add_header Transfer-Encoding chunked;",
            "more_clear_headers Transfer-Encoding;",
            "proxy_set_header Host internal.example.com;",
            "more_set_input_headers \"Host: internal.example.com\";",
        ] {
            let refused = translate_snippet(snippet).unwrap_err();
            assert!(refused.contains("is refused"), "{snippet}: {refused}");
        }
        let refused = translate_snippet("proxy_set_header Host a.example.com;").unwrap_err();
        assert!(refused.contains("upstream-vhost"), "{refused}");
        // Clearing a hop-by-hop header asks for what Sluice does anyway; a response's Host is
        // no routing input.
        let edits =
            translate_snippet("proxy_set_header Connection \"\";\nmore_set_headers \"Host: x\";")
                .unwrap();
        assert_eq!(edits.len(), 1, "{edits:?}");
        assert!(!edits[0].1);
    }

    #[test]
    fn every_annotation_with_an_effect_has_a_parser_and_only_those() {
        for annotation in REGISTRY {
            let needs_parser = match annotation.support {
                Support::Yes
                | Support::Partial(_)
                | Support::FailsClosed(_)
                | Support::Sluice(_) => Some(true),
                Support::No(_) => Some(false),
                // A no-op that Sluice accepts may still check its value.
                Support::Accepted(_) => None,
            };
            match (needs_parser, annotation.parser) {
                (Some(true), None) => panic!("{} is supported but has no parser", annotation.name),
                (Some(false), Some(parser)) => panic!(
                    "{} is not supported but names the parser {parser:?}",
                    annotation.name
                ),
                _ => {}
            }
        }
    }

    #[test]
    fn parsers_read_only_names_of_the_registry() {
        // `Reader::get` asserts that each name it is asked for has an entry; every parser runs
        // on every Ingress, so one parse with nothing set and one with everything set reach
        // every read.
        let settings = Settings {
            allow_snippet_annotations: true,
            ..Settings::default()
        };
        let object = ObjectRef::new(model::Kind::Ingress, "default", "web");
        let mut diagnostics = Vec::new();
        parse(&BTreeMap::new(), &settings, &object, &mut diagnostics);
        let every: BTreeMap<String, String> = REGISTRY
            .iter()
            .map(|a| (format!("{NGINX_PREFIX}{}", a.name), "1".to_owned()))
            .collect();
        parse(&every, &settings, &object, &mut diagnostics);
    }

    #[test]
    fn the_catalogue_has_each_annotation_once() {
        let mut names: Vec<&str> = REGISTRY.iter().map(|a| a.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
    }
}
