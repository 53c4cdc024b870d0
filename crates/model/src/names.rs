//! Names of the objects a configuration comes from: plain data the proxy reports with
//! (routes name their Ingress, diagnostics their object), with no Kubernetes types.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

/// Namespace and name of a namespaced object.
///
/// Shared strings: one Ingress's name is held by the Store's key, its routes, the served list
/// and the status writer, and one namespace by thousands of objects. A clone is two reference
/// counts, not two allocations (at 10,000 Ingresses the copies were ≈3 MB).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NamespacedName {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

/// The kinds of object Sluice reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Kind {
    IngressClass,
    Ingress,
    Service,
    EndpointSlice,
    Secret,
    ConfigMap,
    /// Gateway API (`gateway.networking.k8s.io`).
    GatewayClass,
    Gateway,
    HTTPRoute,
    GRPCRoute,
    TLSRoute,
    TCPRoute,
    UDPRoute,
    ReferenceGrant,
    BackendTLSPolicy,
    /// Extra listeners for a Gateway that allows them (`allowedListeners`).
    ListenerSet,
    /// Read for its labels only (`allowedRoutes.namespaces.selector`).
    Namespace,
    /// `certificates.k8s.io`, cluster-scoped: CA certificates a BackendTLSPolicy or a
    /// Gateway's frontend validation may name.
    ClusterTrustBundle,
}

/// Identifies one object: kind, namespace (empty for cluster-scoped kinds) and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
}

impl NamespacedName {
    pub fn new(namespace: impl Into<Arc<str>>, name: impl Into<Arc<str>>) -> NamespacedName {
        NamespacedName {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// Parses `NAMESPACE/NAME`.
    pub fn parse(text: &str) -> Option<NamespacedName> {
        let (namespace, name) = text.split_once('/')?;
        let valid = |s: &str| !s.is_empty() && !s.contains('/');
        (valid(namespace) && valid(name)).then(|| NamespacedName::new(namespace, name))
    }
}

impl fmt::Display for NamespacedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::IngressClass => "IngressClass",
            Kind::Ingress => "Ingress",
            Kind::Service => "Service",
            Kind::EndpointSlice => "EndpointSlice",
            Kind::Secret => "Secret",
            Kind::ConfigMap => "ConfigMap",
            Kind::GatewayClass => "GatewayClass",
            Kind::Gateway => "Gateway",
            Kind::HTTPRoute => "HTTPRoute",
            Kind::GRPCRoute => "GRPCRoute",
            Kind::TLSRoute => "TLSRoute",
            Kind::TCPRoute => "TCPRoute",
            Kind::UDPRoute => "UDPRoute",
            Kind::ReferenceGrant => "ReferenceGrant",
            Kind::BackendTLSPolicy => "BackendTLSPolicy",
            Kind::ListenerSet => "ListenerSet",
            Kind::Namespace => "Namespace",
            Kind::ClusterTrustBundle => "ClusterTrustBundle",
        }
    }

    /// The kind named by a document's `apiVersion` and `kind`, if it is one we read.
    pub fn from_type(api_version: &str, kind: &str) -> Option<Kind> {
        match (api_version, kind) {
            ("networking.k8s.io/v1", "IngressClass") => Some(Kind::IngressClass),
            ("networking.k8s.io/v1", "Ingress") => Some(Kind::Ingress),
            ("v1", "Service") => Some(Kind::Service),
            ("discovery.k8s.io/v1", "EndpointSlice") => Some(Kind::EndpointSlice),
            ("v1", "Secret") => Some(Kind::Secret),
            ("v1", "ConfigMap") => Some(Kind::ConfigMap),
            ("gateway.networking.k8s.io/v1", "GatewayClass") => Some(Kind::GatewayClass),
            ("gateway.networking.k8s.io/v1", "Gateway") => Some(Kind::Gateway),
            ("gateway.networking.k8s.io/v1", "HTTPRoute") => Some(Kind::HTTPRoute),
            ("gateway.networking.k8s.io/v1", "GRPCRoute") => Some(Kind::GRPCRoute),
            // v1alpha2 and v1alpha3 (experimental) have v1's fields.
            (
                "gateway.networking.k8s.io/v1"
                | "gateway.networking.k8s.io/v1alpha3"
                | "gateway.networking.k8s.io/v1alpha2",
                "TLSRoute",
            ) => Some(Kind::TLSRoute),
            // v1 since v1.7 (standard channel); v1alpha2 (experimental) has the same fields.
            ("gateway.networking.k8s.io/v1" | "gateway.networking.k8s.io/v1alpha2", "TCPRoute") => {
                Some(Kind::TCPRoute)
            }
            ("gateway.networking.k8s.io/v1" | "gateway.networking.k8s.io/v1alpha2", "UDPRoute") => {
                Some(Kind::UDPRoute)
            }
            (
                "gateway.networking.k8s.io/v1" | "gateway.networking.k8s.io/v1beta1",
                "ReferenceGrant",
            ) => Some(Kind::ReferenceGrant),
            ("gateway.networking.k8s.io/v1", "BackendTLSPolicy") => Some(Kind::BackendTLSPolicy),
            ("gateway.networking.k8s.io/v1", "ListenerSet") => Some(Kind::ListenerSet),
            ("v1", "Namespace") => Some(Kind::Namespace),
            // v1beta1 since Kubernetes 1.33; v1alpha1 (1.27 to 1.32) has the same fields.
            (
                "certificates.k8s.io/v1beta1" | "certificates.k8s.io/v1alpha1",
                "ClusterTrustBundle",
            ) => Some(Kind::ClusterTrustBundle),
            _ => None,
        }
    }

    pub fn is_namespaced(self) -> bool {
        !matches!(
            self,
            Kind::IngressClass | Kind::GatewayClass | Kind::Namespace | Kind::ClusterTrustBundle
        )
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ObjectRef {
    pub fn new(kind: Kind, namespace: impl Into<String>, name: impl Into<String>) -> ObjectRef {
        ObjectRef {
            kind,
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.kind, self.name)
        } else {
            write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

impl Serialize for ObjectRef {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaced_names_parse_strictly() {
        assert_eq!(
            NamespacedName::parse("sluice/sluice"),
            Some(NamespacedName::new("sluice", "sluice"))
        );
        for bad in ["sluice", "/x", "x/", "a/b/c"] {
            assert_eq!(NamespacedName::parse(bad), None, "{bad}");
        }
    }
}
