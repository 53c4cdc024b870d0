//! The route policy model: everything a matched request goes through besides "pick an
//! endpoint", as plain validated data made by `compile()`.
//!
//! ```text
//!  ConfigMap (Settings) ──RoutePolicy::from_settings──▶ the default policy (shared by every
//!                                                       route without annotations)
//!  Ingress annotations ──annotations::parse──▶ overrides ──▶ one policy per Ingress
//!  (Gateway API filters, later: another input, the same model)
//!
//!  proxy pipeline, fixed phases, each reading one part of the policy:
//!   denied ─▶ CORS preflight (`cors.rs`) ─▶ access ─▶ redirect (app-root, permanent/temporal,
//!   ssl) ─▶ rewrite ─▶ request headers (+ traceparent) ─▶ body (limit, buffering) ─▶ mirror (a
//!   copy, not waited for: `mirror.rs`) ─▶ upstream (timeouts, retries, TLS: `backend-protocol` /
//!   `appProtocol` + `proxy-ssl-*`, `upstream_tls.rs`) ─▶ response headers (CORS's too) ─▶ errors
//!   (`custom-http-errors`) ─▶ log line, span
//! ```
//!
//! The phases are fixed, so a policy is a block per phase rather than a list the proxy would
//! walk: a route without annotations costs one pointer to the shared default and a few
//! `is_none()` checks. Header values are checked and turned into `http` types here, once per
//! compile, so the proxy never parses one per request.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use ipnet::IpNet;
use serde::{Serialize, Serializer};

use crate::access_log::Segment;
use crate::header_text::{optional_value_text, value_text};
use crate::settings::{NextUpstream, Settings};
use crate::target::{
    encode_path, encode_query_literal, encode_query_value, remove_dot_segments, TargetError,
};
pub use crate::upstream_tls::{TlsVersions, UpstreamTls};

/// `auth-type`: how the client names a user of `auth-secret`.
#[derive(Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UserAuth {
    /// `basic`: user and password in every request.
    Basic(crate::basic_auth::BasicAuth),
    /// `digest`: a response to a challenge, the password never sent.
    Digest(crate::digest_auth::DigestAuth),
}

/// What a request matched to a route must go through. Immutable; shared with `Arc`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct RoutePolicy {
    /// The route is refused (an allow-list or snippet that could not be read): it answers 503
    /// rather than serving without a rule that may have been an access restriction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub denied: Option<String>,
    #[serde(skip_serializing_if = "Access::is_open")]
    pub access: Access,
    /// `limit-rps`, `limit-rpm`, `limit-connections`, `limit-rate` (and the ConfigMap's
    /// `limit-rate`): the limits phase. Behind a pointer: routes without it pay 8 B.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "optional_arc"
    )]
    pub limits: Option<Arc<crate::limits::Limits>>,
    /// `enable-cors` and `cors-*`: preflights answered here, `Access-Control-*` headers on the
    /// route's answers (Sluice's own errors too). Behind a pointer: routes without it pay 8 B.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "optional_arc"
    )]
    pub cors: Option<Arc<crate::cors::Cors>>,
    /// `auth-type` with `auth-secret`: the client names a user of the Secret, with a
    /// password (basic) or a response to a challenge (digest).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "optional_arc"
    )]
    pub user_auth: Option<Arc<UserAuth>>,
    /// `auth-tls-*`: the client certificate this route requires, checks and passes on (the
    /// host's, or with `sluice.dev/auth-tls-scope: path` the Ingress's own).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "optional_arc"
    )]
    pub client_cert: Option<Arc<crate::client_cert::ClientCertPolicy>>,
    /// `satisfy: any`: the allow-list or the authentication (basic or external) suffices;
    /// `false` (nginx's `all`): both must pass.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub satisfy_any: bool,
    /// `auth-url` and its family (or the ConfigMap's `global-auth-*`): a sub-request to an
    /// auth server decides before the request goes upstream.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "optional_arc"
    )]
    pub external_auth: Option<Arc<crate::auth::ExternalAuth>>,
    /// `permanent-redirect` / `temporal-redirect`: answered instead of proxying.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect: Option<Redirect>,
    /// Gateway API's `RequestRedirect`: answered instead of proxying, its Location made from
    /// the request (see `gateway_redirect`). Behind a pointer: routes without it pay 8 B.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "optional_arc"
    )]
    pub gateway_redirect: Option<Arc<crate::gateway_redirect::GatewayRedirect>>,
    /// Gateway API: the route is the share of a backendRef that cannot be used (its backend
    /// never has endpoints); it answers 500 where an Ingress's unresolved backend answers 503.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub invalid_backend: bool,
    pub ssl_redirect: SslRedirect,
    /// `rewrite-target`: the path sent upstream, from the path's regex captures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<Rewrite>,
    /// Applied in order after the proxy's own request headers are prepared.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub request_headers: Box<[HeaderEdit]>,
    /// Applied in order to the upstream's response (and to the proxy's own answers).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub response_headers: Box<[HeaderEdit]>,
    /// `upstream-vhost`: the `Host` sent upstream (`X-Forwarded-Host` keeps the client's).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "optional_value_text"
    )]
    pub upstream_vhost: Option<HeaderValue>,
    pub body: BodyPolicy,
    pub upstream: UpstreamPolicy,
    /// `upstream-hash-by`: the endpoint is chosen by a consistent hash of this key instead of
    /// the ConfigMap's `load-balance`.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "optional_hash_key"
    )]
    pub hash_by: Option<Arc<HashBy>>,
    /// `backend-protocol` `HTTP`/`HTTPS` (HTTP/1.1), `GRPC`/`GRPCS` (gRPC over HTTP/2), or the
    /// Service port's `appProtocol: kubernetes.io/h2c` (HTTP/2): what is spoken to the
    /// endpoints. Whether that is over TLS is `upstream_tls`: the two are independent.
    #[serde(skip_serializing_if = "UpstreamProtocol::is_http1")]
    pub upstream_protocol: UpstreamProtocol,
    /// `backend-protocol: HTTPS`/`GRPCS` (or an `https` / `kubernetes.io/wss` Service port):
    /// connections to the endpoints are TLS, made so. `None`: plain TCP.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "optional_tls"
    )]
    pub upstream_tls: Option<Arc<UpstreamTls>>,
    /// `enable-access-log`: this route's requests get access log lines (when the log is on).
    pub access_log: bool,
    /// `enable-opentelemetry`, `opentelemetry-trust-incoming-span`.
    pub opentelemetry: Tracing,
    /// `sluice.dev/ssl-passthrough-proxy-protocol`: a passthrough connection's endpoint is
    /// told who the client is by a PROXY protocol header written before the client's first
    /// byte. `None` (the default): the endpoint gets the client's bytes only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passthrough_proxy_protocol: Option<ProxyProtocolVersion>,
    /// `custom-http-errors` (the annotation, or the ConfigMap's key for every route): answers
    /// with these codes are replaced by what an error backend answers (the errors phase).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "optional_arc"
    )]
    pub custom_errors: Option<Arc<CustomErrors>>,
    /// `default-backend`: where requests go while the route's own backend has no ready
    /// endpoint (with the `X-Code: 503` headers ingress-nginx adds).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "optional_arc"
    )]
    pub default_backend: Option<Arc<ErrorBackend>>,
    /// `mirror-target` (with `mirror-host`, `mirror-request-body`): a copy of each request
    /// goes there too, without waiting; its answer is dropped.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "optional_arc"
    )]
    pub mirror: Option<Arc<crate::mirror::Mirror>>,
    /// `proxy-redirect-from`/`-to`, `proxy-cookie-path`, `proxy-cookie-domain`: the
    /// upstream's `Location`, `Refresh` and `Set-Cookie` rewritten (the response headers phase).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "optional_arc"
    )]
    pub response_rewrite: Option<Arc<crate::response_rewrite::ResponseRewrite>>,
    /// `connection-proxy-header`: the `Connection` sent to HTTP/1.1 endpoints instead of
    /// none (upgrades keep theirs). `None`: the proxy's own (nothing, or `upgrade`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection_header: Option<ConnectionHeader>,
    /// `affinity: cookie` and `session-cookie-*`: the endpoint a client's cookie names (the
    /// upstream phase), and the `Set-Cookie` that names it. Behind a pointer: 8 B otherwise.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "optional_arc"
    )]
    pub affinity: Option<Arc<crate::affinity::Affinity>>,
}

/// `connection-proxy-header`'s two values (ingress-nginx's validator allows no others).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConnectionHeader {
    /// The endpoint closes the connection after its answer; it is not pooled.
    Close,
    /// What HTTP/1.1 means anyway; for endpoints that want to hear it.
    KeepAlive,
}

impl ConnectionHeader {
    pub fn value(self) -> HeaderValue {
        HeaderValue::from_static(match self {
            ConnectionHeader::Close => "close",
            ConnectionHeader::KeepAlive => "keep-alive",
        })
    }
}

/// The errors phase: which answers an error backend makes instead, and which backend.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct CustomErrors {
    /// 300-599, sorted.
    pub codes: Box<[u16]>,
    /// The upstream's own answers with these codes are replaced too, not only Sluice's
    /// (`disable-proxy-intercept-errors: "false"`, the default).
    pub intercept_upstream: bool,
    #[serde(serialize_with = "upstream_names")]
    /// Tried in order, the first with a ready endpoint answers: the Ingress's `default-backend`,
    /// then `--default-backend-service`. None ready (or none): Sluice answers 404 itself, as
    /// ingress-nginx's built-in default backend does.
    pub backends: Box<[Arc<ErrorBackend>]>,
    /// The policy the error request goes with: the ConfigMap's, without custom errors (nginx's
    /// error location does not intercept again).
    #[serde(skip)]
    pub policy: Arc<RoutePolicy>,
}

pub(crate) fn optional_arc<T: Serialize, S: Serializer>(
    value: &Option<Arc<T>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    value.as_deref().serialize(serializer)
}

fn upstream_names<S: Serializer>(
    backends: &[Arc<ErrorBackend>],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(backends.iter().map(|b| &*b.upstream_name))
}

impl CustomErrors {
    /// Does an answer with `status` go to the error backend? `own`: Sluice made it (no route,
    /// a refusal, an upstream that failed), rather than the upstream.
    pub fn replaces(&self, status: u16, own: bool) -> bool {
        (own || self.intercept_upstream) && self.codes.binary_search(&status).is_ok()
    }

    /// The first backend with a ready endpoint.
    pub fn ready_backend(&self) -> Option<&Arc<ErrorBackend>> {
        self.backends.iter().find(|b| b.has_ready_endpoint())
    }
}

/// A Service that answers for others (`default-backend`, `--default-backend-service`); shown
/// as its upstream name.
#[derive(Debug)]
pub struct ErrorBackend {
    /// ingress-nginx's upstream name: `custom-default-backend-NAMESPACE-NAME` or
    /// `upstream-default-backend` (logs).
    pub upstream_name: Arc<str>,
    pub backend: Arc<crate::endpoints::Backend>,
}

impl Serialize for ErrorBackend {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.upstream_name)
    }
}

impl PartialEq for ErrorBackend {
    fn eq(&self, other: &ErrorBackend) -> bool {
        self.upstream_name == other.upstream_name && Arc::ptr_eq(&self.backend, &other.backend)
    }
}

impl ErrorBackend {
    pub fn has_ready_endpoint(&self) -> bool {
        self.backend.with_endpoints(|set| !set.ready.is_empty())
    }
}

/// A version of the PROXY protocol (HAProxy's spec) that Sluice writes to an upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProxyProtocolVersion {
    /// The text header (`PROXY TCP4 …\r\n`), which every PROXY protocol reader accepts.
    V1,
    /// The binary header, which some readers (cloud load balancer targets) ask for.
    V2,
}

/// The HTTP spoken to a route's endpoints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UpstreamProtocol {
    /// HTTP/1.1 with a keep-alive pool (`backend-protocol: HTTP`/`HTTPS`, the default).
    #[default]
    Http1,
    /// HTTP/2 (prior knowledge in cleartext, ALPN `h2` over TLS) on multiplexed connections:
    /// a Service port's `appProtocol: kubernetes.io/h2c`.
    Http2,
    /// gRPC: HTTP/2 as `Http2`, and what the proxy answers itself is a gRPC error (HTTP 200,
    /// `grpc-status`), as gRPC clients expect. `backend-protocol: GRPC`/`GRPCS`.
    Grpc,
}

/// Whether a route's requests are traced, and whether a client's trace is continued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Tracing {
    /// A SERVER span per request (when the sampler says so) and a `traceparent` upstream.
    pub enabled: bool,
    /// The client's `traceparent`/`tracestate` are continued; off, they are replaced.
    pub trust_incoming_span: bool,
}

/// Source-address rules (`whitelist-source-range`, `denylist-source-range`), checked on the
/// client address (the forwarded one when `use-forwarded-headers` trusts the peer).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Access {
    /// Empty: everyone who is not denied.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<IpNet>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<IpNet>,
}

/// A redirect answered without asking an upstream.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Redirect {
    pub code: u16,
    #[serde(serialize_with = "value_text")]
    pub location: HeaderValue,
}

/// When a plain-HTTP request is sent to https instead.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct SslRedirect {
    /// `ssl-redirect`: for hosts with TLS.
    pub enabled: bool,
    /// `force-ssl-redirect`: even for hosts without TLS.
    pub force: bool,
    /// `preserve-trailing-slash`: ingress-nginx drops a trailing `/` of the target otherwise.
    pub preserve_trailing_slash: bool,
    /// ConfigMap `http-redirect-code`.
    pub code: u16,
}

/// `rewrite-target`: nginx's `rewrite "(?i)<path>" <target> break;`, with the template split
/// once, at compile time, into a path part and a query part (at its first `?`, as nginx
/// compiles it): what a capture holds can never move that boundary.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Rewrite {
    pub target: String,
    /// The path part: `$1`…`$9` and literal text (decoded text, encoded when sent).
    #[serde(skip)]
    pub path: Vec<RewritePart>,
    /// The query part after the template's `?` (`Some(empty)`: the template ends with `?`,
    /// so the client's query is dropped); literal text is sent as written.
    #[serde(skip)]
    pub query: Option<Vec<RewritePart>>,
    /// The normalised literal text of the path before its first capture: a rewritten path
    /// must still start with it (a capture holding `..` may not climb out of it).
    #[serde(skip)]
    pub fixed_prefix: String,
    /// `x-forwarded-prefix` (ingress-nginx sets it only together with a rewrite).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "optional_value_text"
    )]
    pub forwarded_prefix: Option<HeaderValue>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum RewritePart {
    Literal(String),
    /// `$n`: the n-th capture group of the path's regex (empty when it did not take part).
    Capture(usize),
}

/// A rewritten request target, encoded for the request line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rewritten {
    /// The path, normalised and percent-encoded (a `/` from a capture stays a separator).
    pub path: String,
    /// The template's query with its captures encoded; `Some("")`: the template ends with `?`.
    pub query: Option<String>,
}

/// Why a rewritten target is refused: the client's path made it (400).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RewriteError {
    #[error("the rewritten path is invalid: {0}")]
    Path(#[source] TargetError),
    #[error("the rewritten path {path:?} leaves the rewrite target's fixed prefix {prefix:?}")]
    OutsidePrefix { path: String, prefix: String },
}

/// One header change.
#[derive(Clone, Debug, PartialEq)]
pub struct HeaderEdit {
    pub name: HeaderName,
    pub action: HeaderAction,
}

#[derive(Clone, Debug, PartialEq)]
pub enum HeaderAction {
    /// Replace every value with this one.
    Set(HeaderValue),
    /// Add this value beside any others.
    Append(HeaderValue),
    Remove,
    /// As `Set`, the value made per request from nginx variables (a snippet's
    /// `proxy_set_header X-Host $host`).
    SetTemplate(HeaderTemplate),
    /// As `Append`, the value made per request.
    AppendTemplate(HeaderTemplate),
}

/// A header value with request variables: literals and `$host`, `$request_uri`, `$http_x`…
#[derive(Clone, Debug, PartialEq)]
pub struct HeaderTemplate {
    /// As written.
    pub written: Box<str>,
    pub segments: Box<[crate::access_log::Segment]>,
}

/// The request body: its limit and whether it is read whole before an upstream is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct BodyPolicy {
    /// `proxy-body-size`: larger bodies get 413. 0: no limit.
    pub max_size: u64,
    /// `proxy-request-buffering`: the body is read whole before an upstream is chosen.
    pub request_buffering: bool,
    /// `client-body-buffer-size`: how much of a buffered body stays in memory (the rest goes
    /// to a temporary file).
    pub buffer_size: usize,
}

/// How the upstream is talked to and when another endpoint is tried.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct UpstreamPolicy {
    #[serde(serialize_with = "duration_text")]
    pub connect_timeout: Duration,
    #[serde(serialize_with = "duration_text")]
    pub send_timeout: Duration,
    #[serde(serialize_with = "duration_text")]
    pub read_timeout: Duration,
    pub next_upstream: NextUpstream,
    /// Attempts per request, the first included; 0: as many as there are endpoints.
    pub tries: u32,
    /// How long retrying may go on, from the first attempt; 0: no limit.
    #[serde(serialize_with = "duration_text")]
    pub next_upstream_timeout: Duration,
    /// `load-balance` (the annotation): this route's endpoint choice; `None`: the
    /// ConfigMap's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_balance: Option<crate::LoadBalance>,
    /// Gateway API's `timeouts.request`: from the client's request to the upstream's response
    /// head, every attempt included (504 after); 0: no such bound (Ingress routes).
    #[serde(
        serialize_with = "duration_text",
        skip_serializing_if = "Duration::is_zero"
    )]
    pub request_timeout: Duration,
    /// Gateway API's `retry` (`retry.rs`): the pause before each retry, and whether an
    /// endpoint that answered with a retried status may be asked again.
    #[serde(skip_serializing_if = "crate::retry::RetryExtras::is_none")]
    pub retry: crate::retry::RetryExtras,
}

impl RoutePolicy {
    /// Whether a request header edit needs values made per request (a snippet's variables).
    pub fn request_headers_have_templates(&self) -> bool {
        self.request_headers.iter().any(|e| e.template().is_some())
    }

    /// Whether a response header edit needs values made per request.
    pub fn response_headers_have_templates(&self) -> bool {
        self.response_headers.iter().any(|e| e.template().is_some())
    }
}

impl UpstreamPolicy {
    /// The route's `load-balance`, else `default` (the ConfigMap's).
    pub fn balance(&self, default: crate::LoadBalance) -> crate::LoadBalance {
        self.load_balance.unwrap_or(default)
    }
}

/// `upstream-hash-by`: a key made of nginx variables (`$request_uri`, `$remote_addr`,
/// `$http_x_user`, `$cookie_session`, `$arg_id`, …) whose consistent hash picks the endpoint,
/// so requests with the same key go to the same endpoint while it exists, and when endpoints
/// come or go only the keys of the moved share (about 1/N) go elsewhere.
#[derive(Clone, Debug, PartialEq)]
pub struct HashBy {
    /// As written in the annotation.
    pub key: String,
    /// The key's literals and variables, filled per request by the proxy.
    pub segments: Box<[Segment]>,
    /// `upstream-hash-by-subset` (with `-size`): a request goes to a random one of the key's
    /// `n` endpoints (its first `n` along the ring) rather than always its first, so one hot
    /// key's load is spread over `n` endpoints. `None`: the key's own endpoint.
    pub subset: Option<u32>,
}

impl HashBy {
    /// The key `text`; an error names what cannot be used in it.
    pub fn parse(text: &str) -> Result<HashBy, String> {
        let segments = crate::access_log::parse_request_key(text)?;
        if segments.is_empty() {
            return Err("the key is empty".to_owned());
        }
        Ok(HashBy {
            key: text.to_owned(),
            segments: segments.into_boxed_slice(),
            subset: None,
        })
    }
}

impl RoutePolicy {
    /// The policy of a route without annotations: the ConfigMap's values.
    pub fn from_settings(settings: &Settings) -> RoutePolicy {
        RoutePolicy {
            denied: settings.access_refused.clone(),
            access: Access {
                allow: settings.whitelist_source_range.clone(),
                deny: settings.denylist_source_range.clone(),
            },
            limits: crate::limits::Limits::rate_only(
                settings.limit_rate,
                settings.limit_rate_after,
            ),
            cors: None,
            user_auth: None,
            client_cert: None,
            satisfy_any: false,
            external_auth: None,
            redirect: None,
            gateway_redirect: None,
            invalid_backend: false,
            ssl_redirect: SslRedirect {
                enabled: settings.ssl_redirect,
                force: settings.force_ssl_redirect,
                preserve_trailing_slash: settings.preserve_trailing_slash,
                code: settings.http_redirect_code,
            },
            rewrite: None,
            request_headers: Box::default(),
            response_headers: Box::default(),
            upstream_vhost: None,
            body: BodyPolicy {
                max_size: settings.client_max_body_size,
                request_buffering: settings.proxy_request_buffering,
                buffer_size: settings.client_body_buffer_size,
            },
            upstream: UpstreamPolicy {
                connect_timeout: settings.proxy_connect_timeout,
                send_timeout: settings.proxy_send_timeout,
                read_timeout: settings.proxy_read_timeout,
                next_upstream: settings.proxy_next_upstream,
                tries: settings.proxy_next_upstream_tries,
                next_upstream_timeout: settings.proxy_next_upstream_timeout,
                load_balance: None,
                request_timeout: Duration::ZERO,
                retry: crate::retry::RetryExtras::NONE,
            },
            hash_by: None,
            upstream_protocol: UpstreamProtocol::Http1,
            upstream_tls: None,
            access_log: true,
            opentelemetry: Tracing {
                enabled: settings.opentelemetry.enabled,
                trust_incoming_span: settings.opentelemetry.trust_incoming_span,
            },
            passthrough_proxy_protocol: None,
            custom_errors: None,
            default_backend: None,
            mirror: None,
            response_rewrite: None,
            connection_header: None,
            affinity: None,
        }
    }
}

impl RoutePolicy {
    /// What differs from `base`, field by field (nested blocks too), for `/config` and golden
    /// files: a route shows only what its annotations changed. `None` when nothing does.
    pub fn difference(&self, base: &RoutePolicy) -> Option<serde_json::Value> {
        fn diff(value: serde_json::Value, base: &serde_json::Value) -> Option<serde_json::Value> {
            match (value, base) {
                (serde_json::Value::Object(fields), serde_json::Value::Object(base_fields)) => {
                    let changed: serde_json::Map<String, serde_json::Value> = fields
                        .into_iter()
                        .filter_map(|(key, value)| match base_fields.get(&key) {
                            Some(base) => diff(value, base).map(|v| (key, v)),
                            None => Some((key, value)),
                        })
                        .collect();
                    (!changed.is_empty()).then_some(serde_json::Value::Object(changed))
                }
                (value, base) => (value != *base).then_some(value),
            }
        }
        let value = serde_json::to_value(self).ok()?;
        let base = serde_json::to_value(base).ok()?;
        diff(value, &base)
    }
}

impl Default for RoutePolicy {
    fn default() -> RoutePolicy {
        RoutePolicy::from_settings(&Settings::default())
    }
}

impl UpstreamProtocol {
    pub fn is_http1(&self) -> bool {
        *self == UpstreamProtocol::Http1
    }

    /// HTTP/2 to the endpoints (gRPC included).
    pub fn is_http2(self) -> bool {
        self != UpstreamProtocol::Http1
    }
}

impl Access {
    pub fn is_open(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }

    /// nginx's `deny …; allow …; deny all;` in that order: a denied address is refused even
    /// when an allow-list also holds it.
    pub fn allows(&self, client: IpAddr) -> bool {
        let client = canonical(client);
        if self.deny.iter().any(|net| net.contains(&client)) {
            return false;
        }
        self.allow.is_empty() || self.allow.iter().any(|net| net.contains(&client))
    }
}

/// An IPv4 client on a dual-stack socket arrives as `::ffff:a.b.c.d`; the lists hold it as
/// `a.b.c.d`.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

impl Rewrite {
    /// Parses a `rewrite-target`. `Err` names what nginx would read as a variable Sluice does
    /// not have (`$host`, `$request_uri`, …).
    pub fn parse(target: &str, forwarded_prefix: Option<HeaderValue>) -> Result<Rewrite, String> {
        let (path_template, query_template) = match target.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (target, None),
        };
        let path = parse_template(path_template)?;
        let query = query_template.map(parse_template).transpose()?;
        let prefix = match path.first() {
            Some(RewritePart::Literal(text)) => text.as_str(),
            _ => "",
        };
        let fixed_prefix = match prefix.strip_prefix('/') {
            Some(_) => remove_dot_segments(prefix.as_bytes()),
            None => remove_dot_segments(format!("/{prefix}").as_bytes()),
        }
        .map_err(|e| format!("its fixed path {prefix:?} is invalid: {e}"))?;
        Ok(Rewrite {
            target: target.to_owned(),
            path,
            query,
            fixed_prefix: String::from_utf8(fixed_prefix).unwrap_or_default(),
            forwarded_prefix,
        })
    }

    /// The highest capture group the target uses (a path regex with fewer is a diagnostic).
    pub fn highest_capture(&self) -> usize {
        self.path
            .iter()
            .chain(self.query.iter().flatten())
            .map(|p| match p {
                RewritePart::Capture(n) => *n,
                RewritePart::Literal(_) => 0,
            })
            .max()
            .unwrap_or(0)
    }

    /// The rewritten target for a request path (decoded and normalised, as routed) matched
    /// by `pattern`. Captures are text: in the path they are percent-encoded where a path
    /// may not hold them as they are (`?`, `#`, `%`, `"`, space…; a `/` stays a separator),
    /// the result is normalised and must still start with the template's fixed prefix; in
    /// the query `&`, `=`, `+`, `;`, `#`, `%` are encoded too, so a capture is one value.
    /// A pattern that does not match (it always does for the route it matched) gives no
    /// captures.
    pub fn apply(
        &self,
        pattern: Option<&regex::Regex>,
        path: &str,
    ) -> Result<Rewritten, RewriteError> {
        let captures = pattern.and_then(|p| p.captures(path));
        let capture = |n: usize| {
            captures
                .as_ref()
                .and_then(|c| c.get(n))
                .map_or("", |m| m.as_str())
        };
        let mut decoded = Vec::with_capacity(self.target.len() + path.len() + 1);
        for part in &self.path {
            match part {
                RewritePart::Literal(text) => decoded.extend_from_slice(text.as_bytes()),
                RewritePart::Capture(n) => decoded.extend_from_slice(capture(*n).as_bytes()),
            }
        }
        if decoded.first() != Some(&b'/') {
            decoded.insert(0, b'/');
        }
        let normal = remove_dot_segments(&decoded).map_err(RewriteError::Path)?;
        if !normal.starts_with(self.fixed_prefix.as_bytes()) {
            return Err(RewriteError::OutsidePrefix {
                path: String::from_utf8_lossy(&normal).into_owned(),
                prefix: self.fixed_prefix.clone(),
            });
        }
        let query = self.query.as_ref().map(|parts| {
            let mut query = String::new();
            for part in parts {
                match part {
                    RewritePart::Literal(text) => query.push_str(&encode_query_literal(text)),
                    RewritePart::Capture(n) => query.push_str(&encode_query_value(capture(*n))),
                }
            }
            query
        });
        Ok(Rewritten {
            path: encode_path(&String::from_utf8_lossy(&normal)),
            query,
        })
    }
}

impl fmt::Display for Rewritten {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.path)?;
        if let Some(query) = &self.query {
            write!(f, "?{query}")?;
        }
        Ok(())
    }
}

impl HeaderEdit {
    pub fn set(name: HeaderName, value: HeaderValue) -> HeaderEdit {
        HeaderEdit {
            name,
            action: HeaderAction::Set(value),
        }
    }

    /// Applies the edit to a header map. `expanded`: a template's value for this request
    /// (`None` for a template: the value was no valid header value, and nothing is set).
    pub fn apply(&self, headers: &mut http::HeaderMap, expanded: Option<HeaderValue>) {
        match &self.action {
            HeaderAction::Set(value) => {
                headers.insert(self.name.clone(), value.clone());
            }
            HeaderAction::Append(value) => {
                headers.append(self.name.clone(), value.clone());
            }
            HeaderAction::Remove => {
                headers.remove(&self.name);
            }
            // nginx: a value that comes out empty is not sent (proxy_set_header), not added.
            HeaderAction::SetTemplate(_) => match expanded.filter(|v| !v.is_empty()) {
                Some(value) => {
                    headers.insert(self.name.clone(), value);
                }
                None => {
                    headers.remove(&self.name);
                }
            },
            HeaderAction::AppendTemplate(_) => {
                if let Some(value) = expanded.filter(|v| !v.is_empty()) {
                    headers.append(self.name.clone(), value);
                }
            }
        }
    }

    /// The template whose value this edit needs per request.
    pub fn template(&self) -> Option<&HeaderTemplate> {
        match &self.action {
            HeaderAction::SetTemplate(t) | HeaderAction::AppendTemplate(t) => Some(t),
            _ => None,
        }
    }
}

impl fmt::Display for HeaderEdit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = |v: &HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned();
        match &self.action {
            HeaderAction::Set(v) => write!(f, "set {}: {}", self.name, text(v)),
            HeaderAction::Append(v) => write!(f, "add {}: {}", self.name, text(v)),
            HeaderAction::Remove => write!(f, "remove {}", self.name),
            HeaderAction::SetTemplate(t) => {
                write!(f, "set {}: {} (per request)", self.name, t.written)
            }
            HeaderAction::AppendTemplate(t) => {
                write!(f, "add {}: {} (per request)", self.name, t.written)
            }
        }
    }
}

impl Serialize for HeaderEdit {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// `upstream-hash-by` shown as its key.
fn optional_hash_key<S: Serializer>(hash: &Option<Arc<HashBy>>, s: S) -> Result<S::Ok, S::Error> {
    match hash.as_deref() {
        Some(HashBy {
            key,
            subset: Some(n),
            ..
        }) => s.serialize_str(&format!("{key} (a random one of its {n} endpoints)")),
        Some(hash) => s.serialize_str(&hash.key),
        None => s.serialize_none(),
    }
}

fn optional_tls<S: Serializer>(
    tls: &Option<Arc<UpstreamTls>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    tls.as_deref().serialize(serializer)
}

/// `$1`…`$9` (or `${1}`) and the literal text between them.
fn parse_template(template: &str) -> Result<Vec<RewritePart>, String> {
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        literal.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (number, len) = match after.as_bytes() {
            [b'{', digit @ b'0'..=b'9', b'}', ..] => (digit - b'0', 3),
            [digit @ b'0'..=b'9', ..] => (digit - b'0', 1),
            _ => {
                let name: String = after
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                return Err(format!(
                    "${name}: only the capture groups $1 to $9 of the path are supported in a rewrite target"
                ));
            }
        };
        if !literal.is_empty() {
            parts.push(RewritePart::Literal(std::mem::take(&mut literal)));
        }
        parts.push(RewritePart::Capture(usize::from(number)));
        rest = &after[len..];
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        parts.push(RewritePart::Literal(literal));
    }
    Ok(parts)
}

fn duration_text<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&format_args!("{duration:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(target: &str, pattern: &str, path: &str) -> Result<String, RewriteError> {
        let pattern = regex::Regex::new(pattern).unwrap();
        let rewrite = Rewrite::parse(target, None).unwrap();
        rewrite.apply(Some(&pattern), path).map(|to| to.to_string())
    }

    #[test]
    fn rewrite_targets_substitute_captures() {
        let pattern = regex::Regex::new("(?i)^/something(/|$)(.*)").unwrap();
        let rewrite = Rewrite::parse("/$2", None).unwrap();
        assert_eq!(rewrite.highest_capture(), 2);
        let apply = |path| rewrite.apply(Some(&pattern), path).unwrap().to_string();
        assert_eq!(apply("/something/new"), "/new");
        assert_eq!(apply("/SOMETHING"), "/");
        let braces = Rewrite::parse("/api${1}v2", None).unwrap();
        assert_eq!(
            braces.apply(Some(&pattern), "/something/x").unwrap().path,
            "/api/v2"
        );
        assert!(Rewrite::parse("/$host/x", None)
            .unwrap_err()
            .contains("$host"));
        assert_eq!(
            Rewrite::parse("/a?q=$3", None).unwrap().highest_capture(),
            3
        );
    }

    /// ingress-nginx's documented pattern: what a capture holds stays inside the path.
    #[test]
    fn captures_cannot_end_the_path_or_leave_the_query() {
        let docs = |path| rewritten("/public/$2", "(?i)^/something(/|$)(.*)", path);
        // `%3F` and `%22` decoded by routing: encoded again, never a query delimiter.
        assert_eq!(docs("/something/?\"").unwrap(), "/public/%3F%22");
        assert_eq!(docs("/something/a?b#c").unwrap(), "/public/a%3Fb%23c");
        assert_eq!(
            docs("/something/100% sure").unwrap(),
            "/public/100%25%20sure"
        );
        assert_eq!(docs("/something/a/b").unwrap(), "/public/a/b");
        // The template's fixed query stays; `?`…`#` in the path part cannot replace it.
        let fixed = |path| rewritten("/public/$1?lang=en", "(?i)^/x(.*)", path);
        assert_eq!(fixed("/x/a").unwrap(), "/public/a?lang=en");
        assert_eq!(
            fixed("/x/?admin=1#").unwrap(),
            "/public/%3Fadmin=1%23?lang=en"
        );
        // A template ending in `?` still drops the client's query (nginx), nothing else.
        assert_eq!(
            rewritten("/b/$1?", "(?i)^/a/(.*)", "/a/x?y").unwrap(),
            "/b/x%3Fy?"
        );
    }

    #[test]
    fn captures_in_the_query_are_one_value() {
        let search = |path| rewritten("/search?q=$1&lang=en", "(?i)^/find/(.*)", path);
        assert_eq!(search("/find/rust").unwrap(), "/search?q=rust&lang=en");
        assert_eq!(
            search("/find/a&admin=1").unwrap(),
            "/search?q=a%26admin%3D1&lang=en"
        );
        assert_eq!(
            search("/find/a+b;c#d%e \"f").unwrap(),
            "/search?q=a%2Bb%3Bc%23d%25e%20%22f&lang=en"
        );
        assert_eq!(search("/find/a/b?c").unwrap(), "/search?q=a/b?c&lang=en");
    }

    #[test]
    fn captures_cannot_climb_out_of_the_fixed_prefix() {
        let public = |path| rewritten("/public/$1", "(?i)^/x(.*)", path);
        // `/x../private/secret.txt`: routing sees no dot segment, the rewrite would make one.
        assert_eq!(
            public("/x../private/secret.txt"),
            Err(RewriteError::OutsidePrefix {
                path: "/private/secret.txt".into(),
                prefix: "/public/".into()
            })
        );
        // `%2e%2e` is decoded by routing before the capture: the same `..`.
        let routed = crate::normalize_path("/x%2e%2e/private/secret.txt").unwrap();
        assert_eq!(routed.routed, "/x../private/secret.txt");
        assert!(matches!(
            public(&routed.routed),
            Err(RewriteError::OutsidePrefix { .. })
        ));
        assert_eq!(
            public("/x../../../etc/passwd"),
            Err(RewriteError::Path(TargetError::AboveRoot))
        );
        assert_eq!(
            public("/x..;/private"),
            Err(RewriteError::Path(TargetError::DotSegmentParameter))
        );
        // Dot segments that stay inside are resolved, not refused.
        assert_eq!(public("/xa/../b").unwrap(), "/public/b");
        assert_eq!(public("/x/a/./b").unwrap(), "/public/a/b");
        // A prefix ending inside a segment: its text is what must stay.
        let api = |path| rewritten("/api$1", "(?i)^/v(.*)", path);
        assert_eq!(api("/v2/users").unwrap(), "/api2/users");
        assert!(matches!(
            api("/v/../admin"),
            Err(RewriteError::OutsidePrefix { .. })
        ));
        // No fixed prefix: anything below the root.
        assert_eq!(rewritten("$1", "(?i)^/x/(.*)", "/x/a/../b").unwrap(), "/b");
    }

    #[test]
    fn deny_wins_over_allow_and_mapped_v4_is_v4() {
        let access = Access {
            allow: vec!["10.0.0.0/8".parse().unwrap()],
            deny: vec!["10.1.0.0/16".parse().unwrap()],
        };
        assert!(access.allows("10.2.3.4".parse().unwrap()));
        assert!(!access.allows("10.1.3.4".parse().unwrap()));
        assert!(!access.allows("192.168.0.1".parse().unwrap()));
        assert!(access.allows("::ffff:10.2.3.4".parse().unwrap()));
        assert!(Access::default().allows("192.168.0.1".parse().unwrap()));
    }
}
