//! Gateway API objects as Sluice reads them: GatewayClass, Gateway, HTTPRoute and
//! ReferenceGrant (`gateway.networking.k8s.io`), Sluice's own serde types.
//!
//! ```text
//!  YAML ──serde (required fields and types checked, path kept)──▶ *Doc ──slim──▶ Object ──▶ Store
//!             └─ every field not declared here lands in a `rest` map ──▶ `unsupported` paths
//! ```
//! Own types rather than a generated crate: a field Sluice does not implement must never be
//! dropped without a word. Each level keeps what it does not know in a flattened `rest` map;
//! slimming takes those maps out (the values are not kept) and records their field paths
//! (`spec.rules[0].timeouts`), which the compile reports as diagnostics on the object. So an
//! unsupported feature and a typo read the same: "not supported by Sluice; ignored".

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::Deserialize;

use crate::meta::Meta;

/// The API group of Gateway API's kinds (the default group of references to them).
pub const GROUP: &str = "gateway.networking.k8s.io";

/// A `caCertificateRefs` entry naming a ClusterTrustBundle (cluster-scoped; Gateway API v1.7,
/// Extended `ClusterTrustBundle`): its `group` and `kind`.
pub const TRUST_BUNDLE_GROUP: &str = "certificates.k8s.io";
pub const TRUST_BUNDLE_KIND: &str = "ClusterTrustBundle";

/// What a level of an object holds beyond the fields Sluice reads. Emptied by slimming.
pub type Rest = BTreeMap<String, serde_yaml::Value>;

/// The fields of a level Sluice does not read, taken out and named by their path.
pub trait Unsupported {
    fn take_unsupported(&mut self, at: &str, out: &mut Vec<String>);
}

pub(super) fn take_rest(rest: &mut Rest, at: &str, out: &mut Vec<String>) {
    for key in std::mem::take(rest).into_keys() {
        out.push(format!("{at}.{key}"));
    }
}

impl<T: Unsupported> Unsupported for Vec<T> {
    fn take_unsupported(&mut self, at: &str, out: &mut Vec<String>) {
        for (i, item) in self.iter_mut().enumerate() {
            item.take_unsupported(&format!("{at}[{i}]"), out);
        }
    }
}

impl<T: Unsupported> Unsupported for Option<T> {
    fn take_unsupported(&mut self, at: &str, out: &mut Vec<String>) {
        if let Some(inner) = self {
            inner.take_unsupported(at, out);
        }
    }
}

/// Implements [`Unsupported`] for a struct: its `rest`, then each named field (the field's
/// name in the API, for the path).
macro_rules! unsupported {
    ($ty:ty { $($field:ident => $api:literal),* $(,)? }) => {
        impl Unsupported for $ty {
            fn take_unsupported(&mut self, at: &str, out: &mut Vec<String>) {
                take_rest(&mut self.rest, at, out);
                $( self.$field.take_unsupported(&format!("{at}.{}", $api), out); )*
            }
        }
    };
}
pub(super) use unsupported;

/// A whole document: the envelope every kind shares.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Doc<S> {
    #[allow(dead_code)]
    api_version: String,
    #[allow(dead_code)]
    kind: String,
    #[serde(default)]
    metadata: ObjectMeta,
    spec: S,
    /// Written by controllers: only a Gateway's `addresses` are read (the address it was
    /// given, kept across restarts); no diagnostic for the rest.
    #[serde(default)]
    status: Option<DocStatus>,
    #[serde(flatten)]
    rest: Rest,
}

/// The part of an object's status the compile reads.
#[derive(Deserialize, Default)]
pub(crate) struct DocStatus {
    #[serde(default)]
    addresses: Vec<StatusAddress>,
}

#[derive(Deserialize)]
struct StatusAddress {
    #[serde(default)]
    value: String,
}

/// One object, slim: its metadata, its spec without the unknown fields, and their paths.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GatewayObject<S> {
    pub metadata: Meta,
    pub spec: S,
    /// Fields present in the object that Sluice does not read (`spec.addresses`, …).
    pub unsupported: Box<[String]>,
    /// `metadata.generation` (0 in a file): the `observedGeneration` of its status.
    pub generation: i64,
    /// `status.addresses[].value` (a Gateway's; empty for the other kinds).
    pub status_addresses: Box<[String]>,
    /// `metadata.uid` (none in a file): an object deleted and created again under its name is
    /// another object, whose status the writer must write even when it reads the same.
    pub uid: Option<Arc<str>>,
}

impl<S: Unsupported> From<Doc<S>> for GatewayObject<S> {
    fn from(mut doc: Doc<S>) -> GatewayObject<S> {
        let mut unsupported = Vec::new();
        take_rest(&mut doc.rest, "", &mut unsupported);
        for field in &mut unsupported {
            field.remove(0);
        }
        doc.spec.take_unsupported("spec", &mut unsupported);
        let generation = doc.metadata.generation.unwrap_or_default();
        let status = doc.status.unwrap_or_default();
        let uid = doc.metadata.uid.as_deref().map(Arc::from);
        GatewayObject {
            uid,
            generation,
            status_addresses: status.addresses.into_iter().map(|a| a.value).collect(),
            metadata: Meta::gateway(doc.metadata),
            spec: doc.spec,
            unsupported: unsupported.into(),
        }
    }
}

pub type GatewayClass = GatewayObject<GatewayClassSpec>;
pub type Gateway = GatewayObject<GatewaySpec>;
pub type HttpRoute = GatewayObject<HttpRouteSpec>;
pub type ReferenceGrant = GatewayObject<ReferenceGrantSpec>;

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayClassSpec {
    pub controller_name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// Read to refuse the class (`infrastructure`): Sluice takes no parameters.
    #[serde(default)]
    pub parameters_ref: Option<ObjectReference>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(GatewayClassSpec { parameters_ref => "parametersRef" });

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewaySpec {
    pub gateway_class_name: String,
    #[serde(default)]
    pub listeners: Vec<Listener>,
    /// The addresses asked for (`--gateway-address-pool` assigns one; see `addresses`).
    #[serde(default)]
    pub addresses: Vec<GatewaySpecAddress>,
    /// `backend.clientCertificateRef` (see `backend_tls`), `frontend` (`frontend_tls`).
    #[serde(default)]
    pub tls: Option<GatewayTls>,
    /// Which namespaces' ListenerSets may add listeners (`namespaces.from`: None by default,
    /// Same, All, Selector): the shape of a listener's `allowedRoutes.namespaces`.
    #[serde(default)]
    pub allowed_listeners: Option<AllowedListeners>,
    /// Labels and annotations for the Service generated for the Gateway; a `parametersRef`
    /// refuses the Gateway (see `infrastructure`).
    #[serde(default)]
    pub infrastructure: Option<GatewayInfrastructure>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(GatewaySpec {
    listeners => "listeners",
    addresses => "addresses",
    tls => "tls",
    allowed_listeners => "allowedListeners",
    infrastructure => "infrastructure",
});

/// A Gateway's `spec.infrastructure` (GEP-1867).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GatewayInfrastructure {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub parameters_ref: Option<ObjectReference>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(GatewayInfrastructure { parameters_ref => "parametersRef" });

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AllowedListeners {
    pub namespaces: Option<RouteNamespaces>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(AllowedListeners { namespaces => "namespaces" });

/// A Gateway's `spec.tls`: `backend` (see `backend_tls`) and `frontend` (`frontend_tls`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct GatewayTls {
    #[serde(default)]
    pub backend: Option<GatewayBackendTls>,
    #[serde(default)]
    pub frontend: Option<FrontendTls>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(GatewayTls { backend => "backend", frontend => "frontend" });

/// `spec.tls.frontend`: client certificate validation for the HTTPS listeners, by port.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FrontendTls {
    pub default: FrontendTlsConfig,
    pub per_port: Vec<FrontendTlsPort>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(FrontendTls { default => "default", per_port => "perPort" });

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FrontendTlsConfig {
    pub validation: Option<FrontendValidation>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(FrontendTlsConfig { validation => "validation" });

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FrontendTlsPort {
    pub port: i32,
    pub tls: FrontendTlsConfig,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(FrontendTlsPort { tls => "tls" });

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FrontendValidation {
    pub ca_certificate_refs: Vec<ObjectReference>,
    /// `AllowValidOnly` (the default) or `AllowInsecureFallback`.
    pub mode: Option<String>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(FrontendValidation { ca_certificate_refs => "caCertificateRefs" });

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayBackendTls {
    #[serde(default)]
    pub client_certificate_ref: Option<ObjectReference>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(GatewayBackendTls { client_certificate_ref => "clientCertificateRef" });

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewaySpecAddress {
    /// `IPAddress` when absent (the API's default).
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    #[serde(default)]
    pub value: String,
    /// GEP-5093 (experimental channel): `""`, `Cluster` or a prefixed scope (see `pool`).
    #[serde(default)]
    pub routability: Option<String>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(GatewaySpecAddress {});

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Listener {
    pub name: String,
    #[serde(default)]
    pub hostname: Option<String>,
    pub port: i32,
    pub protocol: String,
    #[serde(default)]
    pub tls: Option<ListenerTls>,
    #[serde(default)]
    pub allowed_routes: Option<AllowedRoutes>,
    /// Pre-routing filters (GEP-5224, experimental channel): read in `listener_filters`.
    #[serde(default)]
    pub filters: Option<ListenerFilters>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(Listener {
    tls => "tls",
    allowed_routes => "allowedRoutes",
    filters => "filters",
});

/// A listener's `filters`: the request phase's ordered list.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListenerFilters {
    pub requests: Vec<ListenerFilter>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(ListenerFilters { requests => "requests" });

/// One pre-routing filter: `ExternalAuth` or `ExtensionRef`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerFilter {
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub external_auth: Option<ExternalAuthFilter>,
    /// A `LocalObjectReference` (group, kind, name): Sluice implements no extension kinds.
    #[serde(default)]
    pub extension_ref: Option<serde_yaml::Value>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(ListenerFilter { external_auth => "externalAuth" });

/// `HTTPExternalAuthFilter` (GEP-1494): the auth server and what is sent to it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExternalAuthFilter {
    /// `HTTP` or `GRPC`.
    #[serde(default)]
    pub protocol: String,
    pub backend_ref: BackendObjectReference,
    #[serde(default)]
    pub grpc: Option<GrpcAuthConfig>,
    #[serde(default)]
    pub http: Option<HttpAuthConfig>,
    #[serde(default)]
    pub forward_body: Option<ForwardBodyConfig>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(ExternalAuthFilter {
    backend_ref => "backendRef",
    grpc => "grpc",
    http => "http",
    forward_body => "forwardBody",
});

/// `BackendObjectReference`: a Service port.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendObjectReference {
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub port: Option<i32>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(BackendObjectReference {});

/// `HTTPAuthConfig`: the path prefix and the headers let through each way.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpAuthConfig {
    pub path: Option<String>,
    pub allowed_headers: Vec<String>,
    pub allowed_response_headers: Vec<String>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(HttpAuthConfig {});

/// `GRPCAuthConfig`: the client's headers sent in the `Check` call (empty: all).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GrpcAuthConfig {
    pub allowed_headers: Vec<String>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(GrpcAuthConfig {});

/// `forwardBody`: how much of the client's body the auth server gets (0: none).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ForwardBodyConfig {
    pub max_size: Option<i64>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(ForwardBodyConfig {});

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListenerTls {
    pub mode: Option<String>,
    pub certificate_refs: Vec<ObjectReference>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(ListenerTls { certificate_refs => "certificateRefs" });

/// A reference to an object by group, kind, namespace and name (`SecretObjectReference`,
/// `BackendObjectReference` without port, `ParentReference` without section and port).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(ObjectReference {});

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AllowedRoutes {
    pub namespaces: Option<RouteNamespaces>,
    pub kinds: Option<Vec<RouteGroupKind>>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(AllowedRoutes { namespaces => "namespaces", kinds => "kinds" });

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RouteNamespaces {
    pub from: Option<String>,
    /// With `from: Selector`: over the labels of the route's Namespace.
    pub selector: Option<LabelSelector>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(RouteNamespaces {});

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteGroupKind {
    #[serde(default)]
    pub group: Option<String>,
    pub kind: String,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(RouteGroupKind {});

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRouteSpec {
    pub parent_refs: Vec<ParentReference>,
    pub hostnames: Vec<String>,
    pub rules: Vec<HttpRouteRule>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(HttpRouteSpec { parent_refs => "parentRefs", rules => "rules" });

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentReference {
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    pub name: String,
    #[serde(default)]
    pub section_name: Option<String>,
    #[serde(default)]
    pub port: Option<i32>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(ParentReference {});

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRouteRule {
    /// Named rules: read (nothing depends on the name yet).
    pub name: Option<String>,
    pub matches: Vec<HttpRouteMatch>,
    pub filters: Vec<HttpRouteFilter>,
    pub backend_refs: Vec<HttpBackendRef>,
    pub timeouts: Option<HttpRouteTimeouts>,
    pub retry: Option<HttpRouteRetry>,
    /// Experimental channel (deprecated in v1.7 for GEP-4894's Backend, still served): read in
    /// `session.rs`.
    pub session_persistence: Option<SessionPersistence>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(HttpRouteRule {
    matches => "matches",
    filters => "filters",
    backend_refs => "backendRefs",
    timeouts => "timeouts",
    retry => "retry",
    session_persistence => "sessionPersistence",
});

/// `sessionPersistence`: read in `session.rs`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionPersistence {
    pub absolute_timeout: Option<String>,
    /// `Cookie` (the default) or `Header`.
    #[serde(rename = "type")]
    pub type_: Option<String>,
    pub cookie: Option<SessionCookieConfig>,
    /// Header persistence is not implemented: its settings are not read.
    pub header: Option<serde_yaml::Value>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(SessionPersistence {
    cookie => "cookie",
});

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionCookieConfig {
    pub name: Option<String>,
    pub path: Option<String>,
    /// `Session` (the default) or `Permanent`.
    pub lifetime_type: Option<String>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(SessionCookieConfig {});

/// `retry`: read in `retry.rs`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRouteRetry {
    pub codes: Vec<i64>,
    /// Retries after the first try; the CRD's default is 1.
    pub attempts: Option<i64>,
    pub backoff: Option<String>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(HttpRouteRetry {});

/// `timeouts`: durations as Gateway API writes them (`500ms`, `1m30s`), read in `timeouts.rs`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRouteTimeouts {
    pub request: Option<String>,
    pub backend_request: Option<String>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(HttpRouteTimeouts {});

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRouteMatch {
    pub path: Option<PathMatch>,
    pub headers: Vec<ValueMatchSpec>,
    pub query_params: Vec<ValueMatchSpec>,
    pub method: Option<String>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(HttpRouteMatch {
    path => "path",
    headers => "headers",
    query_params => "queryParams",
});

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PathMatch {
    #[serde(rename = "type")]
    pub type_: Option<String>,
    pub value: Option<String>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(PathMatch {});

/// A header or query parameter match.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ValueMatchSpec {
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    pub name: String,
    pub value: String,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(ValueMatchSpec {});

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteFilter {
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub request_header_modifier: Option<HeaderModifier>,
    #[serde(default)]
    pub response_header_modifier: Option<HeaderModifier>,
    #[serde(default)]
    pub request_redirect: Option<RequestRedirect>,
    #[serde(default)]
    pub url_rewrite: Option<UrlRewrite>,
    #[serde(default)]
    pub request_mirror: Option<RequestMirror>,
    #[serde(default)]
    pub cors: Option<CorsFilter>,
    /// `ExternalAuth` (GEP-1494): built as a listener's (`listener_filters`).
    #[serde(default)]
    pub external_auth: Option<ExternalAuthFilter>,
    /// A filter Sluice does not implement yet: read so that its diagnostic is the filter's
    /// (the rule answers 503), not an "ignored" field.
    #[serde(default)]
    pub extension_ref: Option<serde_yaml::Value>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(HttpRouteFilter {
    request_header_modifier => "requestHeaderModifier",
    response_header_modifier => "responseHeaderModifier",
    request_redirect => "requestRedirect",
    url_rewrite => "urlRewrite",
    request_mirror => "requestMirror",
    cors => "cors",
    external_auth => "externalAuth",
});

/// The `CORS` filter.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CorsFilter {
    pub allow_origins: Vec<String>,
    pub allow_credentials: Option<bool>,
    pub allow_methods: Vec<String>,
    pub allow_headers: Vec<String>,
    pub expose_headers: Vec<String>,
    pub max_age: Option<i32>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(CorsFilter {});

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestMirror {
    pub backend_ref: HttpBackendRef,
    /// The share of requests copied (all without either).
    #[serde(default)]
    pub percent: Option<i32>,
    #[serde(default)]
    pub fraction: Option<Fraction>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(RequestMirror { backend_ref => "backendRef", fraction => "fraction" });

/// `numerator` in `denominator` (default 100).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fraction {
    pub numerator: i32,
    #[serde(default)]
    pub denominator: Option<i32>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(Fraction {});

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HeaderModifier {
    pub set: Vec<HeaderPair>,
    pub add: Vec<HeaderPair>,
    pub remove: Vec<String>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(HeaderModifier { set => "set", add => "add" });

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeaderPair {
    pub name: String,
    pub value: String,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(HeaderPair {});

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RequestRedirect {
    pub scheme: Option<String>,
    pub hostname: Option<String>,
    pub path: Option<PathModifier>,
    pub port: Option<i32>,
    pub status_code: Option<u16>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(RequestRedirect { path => "path" });

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathModifier {
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub replace_full_path: Option<String>,
    #[serde(default)]
    pub replace_prefix_match: Option<String>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(PathModifier {});

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UrlRewrite {
    pub hostname: Option<String>,
    pub path: Option<PathModifier>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(UrlRewrite { path => "path" });

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpBackendRef {
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub port: Option<i32>,
    #[serde(default)]
    pub weight: Option<i32>,
    /// Filters for this backend's share only (header modifiers).
    #[serde(default)]
    pub filters: Vec<HttpRouteFilter>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(HttpBackendRef { filters => "filters" });

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReferenceGrantSpec {
    pub from: Vec<GrantFrom>,
    pub to: Vec<GrantTo>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(ReferenceGrantSpec { from => "from", to => "to" });

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantFrom {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    pub namespace: String,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(GrantFrom {});

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantTo {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(GrantTo {});

/// Parses a document of one of the Gateway API kinds into its slim object.
pub(crate) fn typed_gateway<S>(
    value: serde_yaml::Value,
) -> Result<GatewayObject<S>, (Option<String>, String)>
where
    S: Unsupported + serde::de::DeserializeOwned,
{
    crate::meta::typed::<Doc<S>>(value).map(GatewayObject::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_and_unsupported_fields_are_named_by_path_and_dropped() {
        let text = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: app}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}, bogus: 1}]
    timeouts: {request: 10s, idle: 1s}
    backendRefs: [{name: web, port: 80, filters: []}]
  sessionPersistence: {}
status: {parents: []}
extra: true
"#;
        let value: serde_yaml::Value = serde_yaml::from_str(text).unwrap();
        let route: HttpRoute = typed_gateway(value).unwrap();
        assert_eq!(
            &*route.unsupported,
            [
                "extra",
                "spec.sessionPersistence",
                "spec.rules[0].matches[0].bogus",
                "spec.rules[0].timeouts.idle",
            ]
        );
        assert!(route.spec.rules[0].rest.is_empty());
        assert_eq!(route.metadata.name.as_deref(), Some("web"));
    }
}
