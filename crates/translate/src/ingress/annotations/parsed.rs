//! What one Ingress's annotations ask for, as the reader leaves it.

use http::{HeaderName, HeaderValue};
use model::auth::{AuthCache, AuthUri, Signin};
use model::mirror::MirrorTarget;

use model::policy::{HeaderEdit, RoutePolicy, TlsVersions, UpstreamProtocol};
use model::routes::HostPattern;

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
    /// an `auth-tls-secret` that cannot be used, which ingress-nginx applies to the whole
    /// server (its TLS handshake asks every client of the host for a certificate).
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
    /// `custom-headers`: the ConfigMap (`namespace/name`) and the annotation's key; compile
    /// reads it from the Store.
    pub custom_headers: Option<(model::NamespacedName, String)>,
    /// `auth-url` and its companions, checked; compile resolves where the sub-request goes.
    pub external_auth: Option<AuthSpec>,
    /// `auth-type` (basic or digest) with its Secret's reference; compile reads the Secret.
    pub user_auth: Option<UserAuthSpec>,
    /// `auth-tls-secret` and its family; compile reads the Secret.
    pub client_cert: Option<ClientCertSpec>,
    /// `affinity-canary-behavior` (what it says on a canary Ingress decides).
    pub canary_behavior: model::affinity::CanaryBehavior,
    /// `ssl-ciphers` / `ssl-prefer-server-ciphers`: for the handshakes of this Ingress's
    /// hosts, where it is the oldest to set them.
    pub host_ciphers: model::server_tls::HostCiphers,
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

/// The family as read, before compile resolves where the sub-request goes.
#[derive(Clone, Debug)]
pub struct AuthSpec {
    /// The key `auth-url` was read from, for diagnostics (an annotation or `data.<key>`).
    pub key: String,
    pub url: String,
    pub target: MirrorTarget,
    /// The URL's host is the request's (`$host`…): routed by Sluice's own rules.
    pub request_host: bool,
    pub uri: AuthUri,
    pub method: Option<http::Method>,
    pub signin: Option<Signin>,
    pub request_redirect: Option<HeaderValue>,
    pub response_headers: Box<[HeaderName]>,
    /// `auth-proxy-set-headers`: a ConfigMap `[namespace/]name`, read by compile.
    pub proxy_set_headers: Option<String>,
    pub always_set_cookie: bool,
    pub cache: Option<AuthCache>,
}

/// `auth-type` as read: which kind, and where the users are; compile reads the Secret.
#[derive(Clone, Debug)]
pub struct UserAuthSpec {
    /// `digest` (else `basic`).
    pub digest: bool,
    /// The `auth-secret` key, for diagnostics.
    pub key: String,
    /// `namespace/name` (the Ingress's namespace when none is written).
    pub secret: (String, String),
    /// `auth-secret-type: auth-map` (else `auth-file`).
    pub map: bool,
    pub realm: String,
}

/// The `auth-tls-*` family as read; compile reads the Secret.
#[derive(Clone, Debug)]
pub struct ClientCertSpec {
    /// `annotation <full name of auth-tls-secret>`, for diagnostics.
    pub key: String,
    pub secret: (String, String),
    pub verify: model::client_cert::VerifyClient,
    pub depth: u32,
    pub error_page: Option<HeaderValue>,
    pub pass_certificate: bool,
    pub match_cn: Option<regex::Regex>,
    pub scope: model::client_cert::Scope,
}
