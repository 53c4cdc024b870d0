//! The Gateway API kinds as the watchers read them (`gateway.networking.k8s.io`): each arrives
//! as JSON and goes through translate's own serde types, the ones a file's YAML goes through, so
//! both modes slim and report a field alike.
//!
//! ```text
//!  API server ──JSON──▶ ApiObject<K> ──translate::gateway::api::from_api──▶ Object ──▶ Store
//! ```
//! The CRDs are the user's to install: a cluster without them answers 404 for these resources,
//! which the watchers treat as "not installed" (see `watch.rs`), never as a failure.

use std::borrow::Cow;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use model::Kind;
use serde::Deserialize;
use translate::Object;

pub(super) const GROUP: &str = "gateway.networking.k8s.io";

/// One object of kind `K`, as the API server sent it: its metadata typed, the rest kept as JSON
/// until translate reads it.
#[derive(Clone, Debug, Deserialize)]
#[serde(bound = "")]
pub(super) struct ApiObject<K> {
    metadata: ObjectMeta,
    #[serde(flatten)]
    rest: serde_json::Map<String, serde_json::Value>,
    #[serde(skip)]
    kind: PhantomData<K>,
}

/// What tells the Gateway API kinds apart: their names, version and scope.
pub(super) trait GatewayKind: Clone + std::fmt::Debug + Send + Sync + 'static {
    const KIND: Kind;
    const VERSION: &'static str;
    const PLURAL: &'static str;
    type Scope;
}

macro_rules! gateway_kinds {
    ($($name:ident => $kind:ident, $version:literal, $plural:literal, $scope:ty;)*) => {$(
        #[derive(Clone, Debug)]
        pub(super) struct $name;
        impl GatewayKind for $name {
            const KIND: Kind = Kind::$kind;
            const VERSION: &'static str = $version;
            const PLURAL: &'static str = $plural;
            type Scope = $scope;
        }
    )*};
}

// ReferenceGrant: v1beta1, the version every release since v0.6 serves (v1.7 serves v1 too, as
// the storage version; the API server converts, the objects are the same).
gateway_kinds! {
    GatewayClasses => GatewayClass, "v1", "gatewayclasses", ClusterResourceScope;
    Gateways => Gateway, "v1", "gateways", NamespaceResourceScope;
    HttpRoutes => HTTPRoute, "v1", "httproutes", NamespaceResourceScope;
    GrpcRoutes => GRPCRoute, "v1", "grpcroutes", NamespaceResourceScope;
    TlsRoutes => TLSRoute, "v1", "tlsroutes", NamespaceResourceScope;
    TcpRoutes => TCPRoute, "v1", "tcproutes", NamespaceResourceScope;
    UdpRoutes => UDPRoute, "v1", "udproutes", NamespaceResourceScope;
    ReferenceGrants => ReferenceGrant, "v1beta1", "referencegrants", NamespaceResourceScope;
    BackendTlsPolicies => BackendTLSPolicy, "v1", "backendtlspolicies", NamespaceResourceScope;
    ListenerSets => ListenerSet, "v1", "listenersets", NamespaceResourceScope;
}

impl<K: GatewayKind> kube::Resource for ApiObject<K> {
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(_: &()) -> Cow<'_, str> {
        K::KIND.as_str().into()
    }

    fn group(_: &()) -> Cow<'_, str> {
        GROUP.into()
    }

    fn version(_: &()) -> Cow<'_, str> {
        K::VERSION.into()
    }

    fn plural(_: &()) -> Cow<'_, str> {
        K::PLURAL.into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl<K: GatewayKind> ApiObject<K> {
    /// The Store's object (the watch's `Watched::into_object`); `None` leaves it out, logged.
    pub(super) fn into_store_object(self) -> Option<Object> {
        let mut json = self.rest;
        // A list's items may come without their type; translate's envelope wants it.
        json.insert(
            "apiVersion".into(),
            format!("{GROUP}/{}", K::VERSION).into(),
        );
        json.insert("kind".into(), K::KIND.as_str().into());
        match serde_json::to_value(&self.metadata) {
            Ok(metadata) => json.insert("metadata".into(), metadata),
            Err(_) => return None,
        };
        let name = self.metadata.name.unwrap_or_default();
        match translate::gateway::api::from_api(K::KIND, &json.into())? {
            Ok(object) => Some(object),
            Err(error) => {
                // The CRD's schema normally refuses such an object before it is stored.
                tracing::warn!(kind = %K::KIND, %name, "left out, not readable: {error}");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_route_from_the_api_reads_as_from_a_file_and_names_what_sluice_ignores() {
        // As a list item: no apiVersion or kind, a status the compile never reads.
        let route: ApiObject<HttpRoutes> = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "app", "generation": 3},
            "spec": {
                "parentRefs": [{"name": "gw"}],
                "rules": [{"backendRefs": [{"name": "web", "port": 80}],
                           "sessionPersistence": {"idleTimeout": "1m"}}],
            },
            "status": {"parents": []},
        }))
        .unwrap();
        let Some(Object::HttpRoute(route)) = route.into_store_object() else {
            panic!("an HTTPRoute")
        };
        assert_eq!(route.metadata.name.as_deref(), Some("web"));
        assert_eq!(route.metadata.namespace.as_deref(), Some("app"));
        assert_eq!(route.spec.rules[0].backend_refs[0].name, "web");
        assert_eq!(
            &*route.unsupported,
            ["spec.rules[0].sessionPersistence.idleTimeout"]
        );

        let broken: ApiObject<Gateways> = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "gw", "namespace": "app"},
            "spec": {"listeners": []},
        }))
        .unwrap();
        assert!(
            broken.into_store_object().is_none(),
            "gatewayClassName is required"
        );
    }
}
