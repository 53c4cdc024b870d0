//! The Kubernetes objects Sluice reads, and turning YAML/JSON text into them.
//!
//! ```text
//!  YAML/JSON ──k8s-openapi type (every field checked)──▶ From ──▶ slim Object ──▶ Store
//!  kube watcher ──k8s-openapi type──────────────────────▶ From ──┘
//! ```
//! Parsing is pure: text in, objects and precise errors out. A document that is not one of
//! the kinds we read is ignored; one that is ours but invalid becomes a [`ParseError`]
//! naming the source, the object and the field, so a person can fix it without guessing.
//!
//! **Slim objects.** What the Store keeps is not the whole k8s-openapi object but the fields
//! Sluice reads, under the same names and paths (`ingress.spec`, `service.spec.ports`,
//! `secret.data`), so code reads them as it would the API type. A k8s-openapi `Service` is
//! 824 bytes before its first string (every optional field of the API is there, empty), an
//! EndpointSlice endpoint 352; with 10,000 Ingresses and 50,000 endpoints the whole objects
//! were most of the process's memory (docs/results/2026-11-25-config-memory.md). A field
//! that Sluice starts to read is added here, with its `From`.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::certificates::{v1alpha1 as certificates_alpha, v1beta1 as certificates};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::core::v1::ServicePort;
use k8s_openapi::api::discovery::v1 as discovery;
use k8s_openapi::api::discovery::v1::{EndpointConditions, EndpointPort};
use k8s_openapi::api::networking::v1 as networking;
use k8s_openapi::api::networking::v1::{IngressClassSpec, IngressSpec};
use k8s_openapi::ByteString;

use model::{Kind, NamespacedName, ObjectRef};

use crate::gateway::objects as gateway;
pub(crate) use crate::meta::typed;
pub use crate::meta::Meta;

/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// The namespace kubectl assumes when a namespaced object names none.
pub const DEFAULT_NAMESPACE: &str = "default";

/// An Ingress: its class, annotations, rules, TLS and default backend (`spec`). Status is
/// the status writer's business and never reaches the Store.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ingress {
    pub metadata: Meta,
    pub spec: Option<IngressSpec>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct IngressClass {
    pub metadata: Meta,
    pub spec: Option<IngressClassSpec>,
}

/// A Service: its ports (name, port, targetPort, appProtocol), cluster IP, type and external
/// name. Selector, IP families, session affinity and status are read by nothing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Service {
    pub metadata: Meta,
    pub spec: Option<ServiceSpec>,
}

impl Service {
    /// The `externalName` of a Service of type ExternalName (ingress-nginx reads the type, not
    /// the field: a name left on a Service of another type is nothing).
    pub fn external_name(&self) -> Option<&str> {
        let spec = self.spec.as_ref()?;
        if spec.type_.as_deref() != Some("ExternalName") {
            return None;
        }
        Some(spec.external_name.as_deref().unwrap_or(""))
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServiceSpec {
    pub ports: Option<Vec<ServicePort>>,
    pub cluster_ip: Option<String>,
    pub type_: Option<String>,
    pub external_name: Option<String>,
    /// The Service asks for its clients' zone (`--enable-topology-aware-routing`): annotated
    /// `service.kubernetes.io/topology-mode: Auto` (any case), or `trafficDistribution:
    /// PreferClose` (or its newer name `PreferSameZone`), as ingress-nginx reads them; or
    /// `PreferSameNode` (its zone when no endpoint is on the node, as kube-proxy).
    pub prefers_same_zone: bool,
    /// `trafficDistribution: PreferSameNode` (Kubernetes 1.33+; ingress-nginx does not read
    /// it): the endpoints hinted for this replica's node first.
    pub prefers_same_node: bool,
}

/// An EndpointSlice: the Service it belongs to (its `kubernetes.io/service-name` label), its
/// ports and its endpoints' addresses, conditions and zone and node hints. Each endpoint's
/// `targetRef` (the Pod), `nodeName` and `zone` are read by nothing; a change to only those (a Pod
/// replaced at the same address) is then no change, which is right: the address serves.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EndpointSlice {
    pub metadata: Meta,
    /// The `kubernetes.io/service-name` label.
    pub service_name: Option<String>,
    /// `IPv4`, `IPv6` or `FQDN`.
    pub address_type: String,
    pub ports: Option<Vec<EndpointPort>>,
    pub endpoints: Vec<Endpoint>,
}

/// One endpoint of a slice. Addresses that are not IP addresses (an `FQDN` slice's host
/// names, or garbage) are left out here: Sluice never resolves names on the data path.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Endpoint {
    pub addresses: Addresses,
    pub conditions: Option<EndpointConditions>,
    /// `hints`: the zones and nodes whose clients this endpoint is for (topology-aware
    /// routing). `None` without hints (almost every endpoint: one pointer, no allocation).
    pub hints: Option<Box<Hints>>,
}

/// An endpoint's hints: `forZones` and `forNodes` (set for `PreferSameNode` Services), by
/// name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hints {
    pub zones: Vec<String>,
    pub nodes: Vec<String>,
}

/// An endpoint's addresses. The EndpointSlice controller always writes exactly one: that one
/// is kept inline (a list of one was a 32-byte allocation per endpoint, 1.6 MB at 50,000).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Addresses {
    One(IpAddr),
    /// None, or more than one.
    Other(Box<[IpAddr]>),
}

/// A Secret: its type and data (certificates and keys).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Secret {
    pub metadata: Meta,
    pub type_: Option<String>,
    pub data: Option<BTreeMap<String, ByteString>>,
}

/// A ConfigMap: its data (`binaryData` is read by nothing).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConfigMap {
    pub metadata: Meta,
    pub data: Option<BTreeMap<String, String>>,
}

/// The label the API server puts on every Namespace: its own name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// A Namespace: its labels, what a Gateway listener's `allowedRoutes.namespaces.selector`
/// selects on. Always with `kubernetes.io/metadata.name: <name>`, which the API server sets on
/// every Namespace (a file's Namespace gets it here).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Namespace {
    pub metadata: Meta,
    pub labels: BTreeMap<String, String>,
}

/// A ClusterTrustBundle (`certificates.k8s.io`, cluster-scoped): its `spec.trustBundle`, the
/// PEM CA certificates a BackendTLSPolicy or a Gateway's frontend validation may trust. Its
/// `signerName` is read by nothing (a reference names the bundle itself).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterTrustBundle {
    pub metadata: Meta,
    pub trust_bundle: String,
}

/// One object of a kind Sluice reads.
#[derive(Clone, Debug, PartialEq)]
///
/// Boxed: a list of 10,000 Ingresses in flight to the Store is then 16 bytes an object, not
/// 288 (its buffer, grown by doubling, left megabytes of holes in the heap), and the Store
/// keeps the box it is handed.
pub enum Object {
    IngressClass(Box<IngressClass>),
    Ingress(Box<Ingress>),
    Service(Box<Service>),
    EndpointSlice(Box<EndpointSlice>),
    Secret(Box<Secret>),
    ConfigMap(Box<ConfigMap>),
    GatewayClass(Box<gateway::GatewayClass>),
    Gateway(Box<gateway::Gateway>),
    HttpRoute(Box<gateway::HttpRoute>),
    GrpcRoute(Box<crate::gateway::grpc_objects::GrpcRoute>),
    TlsRoute(Box<crate::gateway::tls_objects::TlsRoute>),
    TcpRoute(Box<crate::gateway::stream_objects::TcpRoute>),
    UdpRoute(Box<crate::gateway::stream_objects::UdpRoute>),
    ReferenceGrant(Box<gateway::ReferenceGrant>),
    BackendTlsPolicy(Box<crate::gateway::backend_tls_objects::BackendTlsPolicy>),
    ListenerSet(Box<crate::gateway::listener_set_objects::ListenerSet>),
    Namespace(Box<Namespace>),
    ClusterTrustBundle(Box<ClusterTrustBundle>),
}

/// Why a document could not be used. `object` is known when the document got as far as
/// naming itself; then a provider can keep that object's last good version.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ParseError {
    pub source_name: String,
    pub document: usize,
    pub object: Option<ObjectRef>,
    pub field: Option<String>,
    pub message: String,
}

/// What one file (or any text) held.
#[derive(Debug, Default)]
pub struct Documents {
    pub objects: Vec<Object>,
    /// Documents of our kinds that could not be used; the rest of the text still counts.
    pub errors: Vec<ParseError>,
    /// Documents of kinds we do not read (Deployments, Pods, ...), skipped on purpose.
    pub ignored: usize,
}

impl Object {
    pub fn kind(&self) -> Kind {
        match self {
            Object::IngressClass(_) => Kind::IngressClass,
            Object::Ingress(_) => Kind::Ingress,
            Object::Service(_) => Kind::Service,
            Object::EndpointSlice(_) => Kind::EndpointSlice,
            Object::Secret(_) => Kind::Secret,
            Object::ConfigMap(_) => Kind::ConfigMap,
            Object::GatewayClass(_) => Kind::GatewayClass,
            Object::Gateway(_) => Kind::Gateway,
            Object::HttpRoute(_) => Kind::HTTPRoute,
            Object::GrpcRoute(_) => Kind::GRPCRoute,
            Object::TlsRoute(_) => Kind::TLSRoute,
            Object::TcpRoute(_) => Kind::TCPRoute,
            Object::UdpRoute(_) => Kind::UDPRoute,
            Object::ReferenceGrant(_) => Kind::ReferenceGrant,
            Object::BackendTlsPolicy(_) => Kind::BackendTLSPolicy,
            Object::ListenerSet(_) => Kind::ListenerSet,
            Object::Namespace(_) => Kind::Namespace,
            Object::ClusterTrustBundle(_) => Kind::ClusterTrustBundle,
        }
    }

    pub fn metadata(&self) -> &Meta {
        match self {
            Object::IngressClass(o) => &o.metadata,
            Object::Ingress(o) => &o.metadata,
            Object::Service(o) => &o.metadata,
            Object::EndpointSlice(o) => &o.metadata,
            Object::Secret(o) => &o.metadata,
            Object::ConfigMap(o) => &o.metadata,
            Object::GatewayClass(o) => &o.metadata,
            Object::Gateway(o) => &o.metadata,
            Object::HttpRoute(o) => &o.metadata,
            Object::GrpcRoute(o) => &o.metadata,
            Object::TlsRoute(o) => &o.metadata,
            Object::TcpRoute(o) | Object::UdpRoute(o) => &o.metadata,
            Object::ReferenceGrant(o) => &o.metadata,
            Object::BackendTlsPolicy(o) => &o.metadata,
            Object::ListenerSet(o) => &o.metadata,
            Object::Namespace(o) => &o.metadata,
            Object::ClusterTrustBundle(o) => &o.metadata,
        }
    }

    pub fn metadata_mut(&mut self) -> &mut Meta {
        match self {
            Object::IngressClass(o) => &mut o.metadata,
            Object::Ingress(o) => &mut o.metadata,
            Object::Service(o) => &mut o.metadata,
            Object::EndpointSlice(o) => &mut o.metadata,
            Object::Secret(o) => &mut o.metadata,
            Object::ConfigMap(o) => &mut o.metadata,
            Object::GatewayClass(o) => &mut o.metadata,
            Object::Gateway(o) => &mut o.metadata,
            Object::HttpRoute(o) => &mut o.metadata,
            Object::GrpcRoute(o) => &mut o.metadata,
            Object::TlsRoute(o) => &mut o.metadata,
            Object::TcpRoute(o) | Object::UdpRoute(o) => &mut o.metadata,
            Object::ReferenceGrant(o) => &mut o.metadata,
            Object::BackendTlsPolicy(o) => &mut o.metadata,
            Object::ListenerSet(o) => &mut o.metadata,
            Object::Namespace(o) => &mut o.metadata,
            Object::ClusterTrustBundle(o) => &mut o.metadata,
        }
    }

    /// Namespace and name (empty when missing, as in [`Object::object_ref`]), sharing the
    /// metadata's strings.
    pub fn key(&self) -> NamespacedName {
        let meta = self.metadata();
        let text = |s: &Option<Arc<str>>| s.clone().unwrap_or_else(|| Arc::from(""));
        NamespacedName {
            namespace: text(&meta.namespace),
            name: text(&meta.name),
        }
    }

    /// Points the metadata's name and namespace (where present) at `key`'s strings.
    pub fn share_key(&mut self, key: &NamespacedName) {
        let meta = self.metadata_mut();
        if meta.namespace.is_some() {
            meta.namespace = Some(key.namespace.clone());
        }
        if meta.name.is_some() {
            meta.name = Some(key.name.clone());
        }
    }

    pub fn object_ref(&self) -> ObjectRef {
        let meta = self.metadata();
        ObjectRef::new(
            self.kind(),
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
        )
    }
}

impl From<networking::Ingress> for Ingress {
    fn from(ingress: networking::Ingress) -> Ingress {
        Ingress {
            metadata: Meta::annotated(ingress.metadata),
            spec: ingress.spec.map(compact_ingress_spec),
        }
    }
}

/// A list deserialized from JSON or YAML grows by doubling (a rule of one path holds room
/// for four, 704 bytes instead of 176); what the Store keeps until the next change is cut to
/// size.
fn fit<T>(mut list: Vec<T>) -> Vec<T> {
    list.shrink_to_fit();
    list
}

fn compact_ingress_spec(mut spec: IngressSpec) -> IngressSpec {
    spec.rules = spec.rules.take().map(fit).map(|mut rules| {
        for rule in &mut rules {
            if let Some(http) = &mut rule.http {
                http.paths.shrink_to_fit();
            }
        }
        rules
    });
    spec.tls = spec.tls.take().map(fit).map(|mut tls| {
        for entry in &mut tls {
            entry.hosts = entry.hosts.take().map(fit);
        }
        tls
    });
    spec
}

impl From<networking::IngressClass> for IngressClass {
    fn from(class: networking::IngressClass) -> IngressClass {
        IngressClass {
            metadata: Meta::annotated(class.metadata),
            spec: class.spec,
        }
    }
}

impl From<core::Service> for Service {
    fn from(service: core::Service) -> Service {
        let topology_mode = (service.metadata.annotations.as_ref())
            .and_then(|a| a.get(TOPOLOGY_MODE_ANNOTATION))
            .is_some_and(|mode| mode.eq_ignore_ascii_case("auto"));
        Service {
            metadata: Meta::named(service.metadata),
            spec: service.spec.map(|spec| ServiceSpec {
                // PreferSameZone: Kubernetes 1.33's name for PreferClose (ingress-nginx reads
                // only the old one).
                prefers_same_zone: topology_mode
                    || matches!(
                        spec.traffic_distribution.as_deref(),
                        Some("PreferClose" | "PreferSameZone" | "PreferSameNode")
                    ),
                prefers_same_node: spec.traffic_distribution.as_deref() == Some("PreferSameNode"),
                ports: spec.ports.map(fit),
                cluster_ip: spec.cluster_ip,
                type_: spec.type_,
                external_name: spec.external_name,
            }),
        }
    }
}

/// Kubernetes' annotation for topology-aware routing (`Auto` asks for it).
const TOPOLOGY_MODE_ANNOTATION: &str = "service.kubernetes.io/topology-mode";

impl From<discovery::EndpointSlice> for EndpointSlice {
    fn from(slice: discovery::EndpointSlice) -> EndpointSlice {
        let mut metadata = slice.metadata;
        let service_name = metadata
            .labels
            .as_mut()
            .and_then(|labels| labels.remove(SERVICE_NAME_LABEL));
        EndpointSlice {
            metadata: Meta::named(metadata),
            service_name,
            address_type: slice.address_type,
            ports: slice.ports.map(fit),
            // Borrowed, not `into_iter`: collecting in place would keep the API list's buffer
            // (352 bytes an endpoint) for 32-byte slim endpoints.
            endpoints: slice
                .endpoints
                .iter()
                .map(|endpoint| Endpoint {
                    addresses: endpoint
                        .addresses
                        .iter()
                        .filter_map(|a| a.parse().ok())
                        .collect::<Vec<IpAddr>>()
                        .into(),
                    conditions: endpoint.conditions.clone(),
                    hints: endpoint.hints.as_ref().and_then(|hints| {
                        let zones = (hints.for_zones.iter().flatten()).map(|z| z.name.clone());
                        let nodes = (hints.for_nodes.iter().flatten()).map(|n| n.name.clone());
                        let hints = Hints {
                            zones: zones.collect(),
                            nodes: nodes.collect(),
                        };
                        (!hints.zones.is_empty() || !hints.nodes.is_empty())
                            .then(|| Box::new(hints))
                    }),
                })
                .collect(),
        }
    }
}

impl Default for Addresses {
    fn default() -> Addresses {
        Addresses::Other(Box::default())
    }
}

impl From<Vec<IpAddr>> for Addresses {
    fn from(addresses: Vec<IpAddr>) -> Addresses {
        match addresses[..] {
            [one] => Addresses::One(one),
            _ => Addresses::Other(addresses.into_boxed_slice()),
        }
    }
}

impl std::ops::Deref for Addresses {
    type Target = [IpAddr];

    fn deref(&self) -> &[IpAddr] {
        match self {
            Addresses::One(one) => std::slice::from_ref(one),
            Addresses::Other(addresses) => addresses,
        }
    }
}

impl<'a> IntoIterator for &'a Addresses {
    type Item = &'a IpAddr;
    type IntoIter = std::slice::Iter<'a, IpAddr>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl From<core::Namespace> for Namespace {
    fn from(namespace: core::Namespace) -> Namespace {
        let mut labels = namespace.metadata.labels.clone().unwrap_or_default();
        if let Some(name) = &namespace.metadata.name {
            labels
                .entry(NAMESPACE_NAME_LABEL.to_owned())
                .or_insert_with(|| name.clone());
        }
        Namespace {
            metadata: Meta::named(namespace.metadata),
            labels,
        }
    }
}

impl From<core::Secret> for Secret {
    fn from(secret: core::Secret) -> Secret {
        Secret {
            metadata: Meta::named(secret.metadata),
            type_: secret.type_,
            data: secret.data,
        }
    }
}

impl From<core::ConfigMap> for ConfigMap {
    fn from(config_map: core::ConfigMap) -> ConfigMap {
        ConfigMap {
            metadata: Meta::named(config_map.metadata),
            data: config_map.data,
        }
    }
}

impl From<certificates::ClusterTrustBundle> for ClusterTrustBundle {
    fn from(bundle: certificates::ClusterTrustBundle) -> ClusterTrustBundle {
        ClusterTrustBundle {
            metadata: Meta::named(bundle.metadata),
            trust_bundle: bundle.spec.trust_bundle,
        }
    }
}

impl From<certificates_alpha::ClusterTrustBundle> for ClusterTrustBundle {
    fn from(bundle: certificates_alpha::ClusterTrustBundle) -> ClusterTrustBundle {
        ClusterTrustBundle {
            metadata: Meta::named(bundle.metadata),
            trust_bundle: bundle.spec.trust_bundle,
        }
    }
}

macro_rules! object_from {
    ($($api:ty => $kind:ident),* $(,)?) => {$(
        impl From<$api> for Object {
            fn from(object: $api) -> Object {
                Object::$kind(Box::new(object.into()))
            }
        }
        impl From<$kind> for Object {
            fn from(object: $kind) -> Object {
                Object::$kind(Box::new(object))
            }
        }
    )*};
}

object_from! {
    networking::IngressClass => IngressClass,
    networking::Ingress => Ingress,
    core::Service => Service,
    discovery::EndpointSlice => EndpointSlice,
    core::Secret => Secret,
    core::ConfigMap => ConfigMap,
    core::Namespace => Namespace,
    certificates::ClusterTrustBundle => ClusterTrustBundle,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.source_name)?;
        match &self.object {
            Some(object) => write!(f, "{object}: ")?,
            None => write!(f, "document {}: ", self.document)?,
        }
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Parses every document in `text` (YAML, several per file separated by `---`, or JSON;
/// `kind: List` is unwrapped). `source_name` (a file path) goes into every error.
///
/// `Err` means the text as a whole is unreadable (a YAML syntax error): nothing in it can be
/// trusted, and a provider should keep what it had from this source before.
// A parse error is rare and carries what a person needs to fix the file; size does not matter.
#[allow(clippy::result_large_err)]
pub fn parse_documents(source_name: &str, text: &str) -> Result<Documents, ParseError> {
    use serde::Deserialize;

    let mut values = Vec::new();
    for (index, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = serde_yaml::Value::deserialize(document).map_err(|error| ParseError {
            source_name: source_name.to_owned(),
            document: index + 1,
            object: None,
            field: None,
            message: format!("not valid YAML: {error}"),
        })?;
        values.push((index + 1, value));
    }
    let mut documents = Documents::default();
    for (index, value) in values {
        parse_value(source_name, index, value, &mut documents);
    }
    Ok(documents)
}

fn parse_value(source_name: &str, document: usize, value: serde_yaml::Value, out: &mut Documents) {
    use serde_yaml::Value;

    let error = |object: Option<ObjectRef>, field: Option<&str>, message: String| ParseError {
        source_name: source_name.to_owned(),
        document,
        object,
        field: field.map(str::to_owned),
        message,
    };
    let mapping = match value {
        // Empty documents (a leading `---`, a trailing separator, comments only) are harmless.
        Value::Null => return,
        Value::Mapping(mapping) => mapping,
        _ => {
            out.errors.push(error(
                None,
                None,
                "expected a Kubernetes object (a YAML mapping)".into(),
            ));
            return;
        }
    };
    let text_field = |name: &str| mapping.get(name).and_then(Value::as_str).map(str::to_owned);
    let (Some(api_version), Some(kind_name)) = (text_field("apiVersion"), text_field("kind"))
    else {
        out.errors.push(error(
            None,
            None,
            "an object needs `apiVersion` and `kind` strings".into(),
        ));
        return;
    };
    if kind_name == "List" && api_version == "v1" {
        if let Some(Value::Sequence(items)) = mapping.get("items") {
            for item in items.clone() {
                parse_value(source_name, document, item, out);
            }
        }
        return;
    }
    let Some(kind) = Kind::from_type(&api_version, &kind_name) else {
        out.ignored += 1;
        return;
    };

    let metadata = mapping.get("metadata");
    let meta_text = |name: &str| {
        metadata
            .and_then(|m| m.get(name))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let name = meta_text("name").unwrap_or_default();
    let namespace = if kind.is_namespaced() {
        meta_text("namespace").unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned())
    } else {
        String::new()
    };
    let object_ref = ObjectRef::new(kind, namespace.clone(), name.clone());
    if name.is_empty() {
        out.errors.push(error(
            Some(object_ref),
            Some("metadata.name"),
            "required and must be a non-empty string".into(),
        ));
        return;
    }

    // Every field is checked against the API type (so a mistake anywhere is named), then only
    // what Sluice reads is kept.
    let value = Value::Mapping(mapping);
    let parsed = match kind {
        Kind::IngressClass => typed::<networking::IngressClass>(value).map(Object::from),
        Kind::Ingress => typed::<networking::Ingress>(value).map(Object::from),
        Kind::Service => typed::<core::Service>(value).map(Object::from),
        Kind::EndpointSlice => typed::<discovery::EndpointSlice>(value).map(Object::from),
        Kind::Secret => typed::<core::Secret>(value).map(|mut secret| {
            merge_string_data(&mut secret);
            Object::from(secret)
        }),
        Kind::ConfigMap => typed::<core::ConfigMap>(value).map(Object::from),
        Kind::GatewayClass => {
            gateway::typed_gateway(value).map(|o| Object::GatewayClass(Box::new(o)))
        }
        Kind::Gateway => gateway::typed_gateway(value).map(|o| Object::Gateway(Box::new(o))),
        Kind::HTTPRoute => gateway::typed_gateway(value).map(|o| Object::HttpRoute(Box::new(o))),
        Kind::GRPCRoute => gateway::typed_gateway(value).map(|o| Object::GrpcRoute(Box::new(o))),
        Kind::TLSRoute => gateway::typed_gateway(value).map(|o| Object::TlsRoute(Box::new(o))),
        Kind::TCPRoute => gateway::typed_gateway(value).map(|o| Object::TcpRoute(Box::new(o))),
        Kind::UDPRoute => gateway::typed_gateway(value).map(|o| Object::UdpRoute(Box::new(o))),
        Kind::ListenerSet => {
            gateway::typed_gateway(value).map(|o| Object::ListenerSet(Box::new(o)))
        }
        Kind::ReferenceGrant => {
            gateway::typed_gateway(value).map(|o| Object::ReferenceGrant(Box::new(o)))
        }
        Kind::BackendTLSPolicy => {
            gateway::typed_gateway(value).map(|o| Object::BackendTlsPolicy(Box::new(o)))
        }
        Kind::Namespace => typed::<core::Namespace>(value).map(Object::from),
        Kind::ClusterTrustBundle if api_version.ends_with("/v1alpha1") => {
            typed::<certificates_alpha::ClusterTrustBundle>(value)
                .map(|o| Object::from(ClusterTrustBundle::from(o)))
        }
        Kind::ClusterTrustBundle => {
            typed::<certificates::ClusterTrustBundle>(value).map(Object::from)
        }
    };
    match parsed {
        Ok(mut object) => {
            // A cluster-scoped object has no namespace, whatever the file says (as the API
            // server drops it): its key is its name alone.
            object.metadata_mut().namespace = kind.is_namespaced().then(|| namespace.into());
            out.objects.push(object);
        }
        Err((field, message)) => {
            out.errors
                .push(error(Some(object_ref), field.as_deref(), message))
        }
    }
}

/// The API server folds `stringData` into `data` on write; a file has no API server, so we do
/// it here and the rest of Sluice only ever looks at `data`.
fn merge_string_data(secret: &mut core::Secret) {
    if let Some(string_data) = secret.string_data.take() {
        let data = secret.data.get_or_insert_with(Default::default);
        for (key, value) in string_data {
            data.insert(key, ByteString(value.into_bytes()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_several_documents_and_ignores_other_kinds() {
        let text = r#"
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {ports: [{port: 80}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
---
{"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "sluice"},
 "spec": {"controller": "sluice.dev/ingress-controller"}}
"#;
        let documents = parse_documents("a.yaml", text).unwrap();
        assert_eq!(documents.ignored, 1);
        assert!(documents.errors.is_empty(), "{:?}", documents.errors);
        let refs: Vec<String> = documents
            .objects
            .iter()
            .map(|o| o.object_ref().to_string())
            .collect();
        assert_eq!(refs, ["Service default/web", "IngressClass sluice"]);
    }

    #[test]
    fn an_invalid_field_is_named_with_its_path() {
        let text = r#"
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: shop}
spec:
  rules:
  - http:
      paths:
      - path: /
        pathType: Prefix
        backend: {service: {name: web, port: {number: eighty}}}
"#;
        let documents = parse_documents("shop.yaml", text).unwrap();
        assert!(documents.objects.is_empty());
        let error = &documents.errors[0];
        assert_eq!(
            error.object,
            Some(ObjectRef::new(Kind::Ingress, "shop", "web"))
        );
        assert_eq!(
            error.to_string(),
            "shop.yaml: Ingress shop/web: spec.rules[0].http.paths[0].backend.service.port.number: invalid type: string \"eighty\", expected i32"
        );
    }

    #[test]
    fn a_yaml_syntax_error_rejects_the_whole_text() {
        let error = parse_documents("bad.yaml", "kind: [unclosed\n").unwrap_err();
        assert!(error
            .to_string()
            .starts_with("bad.yaml: document 1: not valid YAML"));
    }

    #[test]
    fn string_data_is_folded_into_data() {
        let text = r#"
apiVersion: v1
kind: Secret
metadata: {name: tls}
type: kubernetes.io/tls
stringData: {tls.crt: "CERT"}
data: {tls.key: S0VZ}
"#;
        let documents = parse_documents("s.yaml", text).unwrap();
        let Object::Secret(secret) = &documents.objects[0] else {
            panic!("not a secret")
        };
        let data = secret.data.as_ref().unwrap();
        assert_eq!(data["tls.crt"].0, b"CERT");
        assert_eq!(data["tls.key"].0, b"KEY");
    }

    #[test]
    fn the_store_keeps_what_sluice_reads_and_nothing_else() {
        let text = r#"
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-abc
  namespace: app
  uid: 4b1e5c3a-0000-4000-8000-000000000000
  labels: {kubernetes.io/service-name: web, endpointslice.kubernetes.io/managed-by: x}
  annotations: {a: b}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- addresses: ["10.1.2.3", "not-an-ip"]
  conditions: {ready: false, serving: true, terminating: true}
  targetRef: {kind: Pod, name: web-7d9f, namespace: app}
  nodeName: node-1
  zone: a
  hints: {forZones: [{name: a}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: app, annotations: {cloud/lb: internal}, labels: {app: web}}
spec:
  type: ClusterIP
  clusterIP: 10.96.0.10
  selector: {app: web}
  sessionAffinity: ClientIP
  ports: [{name: http, port: 80, targetPort: 8080, appProtocol: https}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: app, annotations: {nginx.ingress.kubernetes.io/use-regex: "true"}}
spec: {ingressClassName: sluice, rules: [{host: web.test}]}
status: {loadBalancer: {ingress: [{ip: 192.0.2.1}]}}
"#;
        let objects = parse_documents("t.yaml", text).unwrap().objects;
        let [Object::EndpointSlice(slice), Object::Service(service), Object::Ingress(ingress)] =
            &objects[..]
        else {
            panic!("{objects:?}")
        };
        assert_eq!(slice.service_name.as_deref(), Some("web"));
        assert_eq!(
            slice.metadata,
            Meta {
                name: Some("web-abc".into()),
                namespace: Some("app".into()),
                ..Meta::default()
            }
        );
        assert_eq!(
            slice.endpoints,
            [Endpoint {
                addresses: Addresses::One("10.1.2.3".parse().unwrap()),
                conditions: Some(EndpointConditions {
                    ready: Some(false),
                    serving: Some(true),
                    terminating: Some(true),
                }),
                hints: Some(Box::new(Hints {
                    zones: vec!["a".into()],
                    nodes: Vec::new(),
                })),
            }]
        );
        assert_eq!(slice.ports.as_ref().unwrap()[0].port, Some(8080));
        assert_eq!(service.metadata.annotations, None);
        let spec = service.spec.as_ref().unwrap();
        assert_eq!(spec.cluster_ip.as_deref(), Some("10.96.0.10"));
        assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
        let port = &spec.ports.as_ref().unwrap()[0];
        assert_eq!(port.app_protocol.as_deref(), Some("https"));
        assert_eq!(
            port.target_port,
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(8080))
        );
        assert_eq!(ingress.metadata.annotations.as_ref().unwrap().len(), 1);
        assert_eq!(
            ingress.spec.as_ref().unwrap().ingress_class_name.as_deref(),
            Some("sluice")
        );
    }

    #[test]
    fn a_document_without_a_name_is_an_error() {
        let documents = parse_documents("n.yaml", "apiVersion: v1\nkind: Service\n").unwrap();
        assert_eq!(
            documents.errors[0].to_string(),
            "n.yaml: Service default/: metadata.name: required and must be a non-empty string"
        );
    }
}
