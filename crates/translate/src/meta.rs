//! The metadata every stored object keeps, and the typed reading of a YAML value with the
//! path of the offending field: shared by the Kubernetes kinds (`objects`) and Gateway API's
//! (`gateway::objects`), below both.
//!
//! ```text
//!  ObjectMeta ─▶ Meta (name, namespace; annotations and age where they mean something)
//!  serde_yaml::Value ─typed─▶ T, or (field path, why)
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

/// The metadata Sluice reads: `ObjectMeta`'s name, namespace, and for the kinds whose
/// annotations mean something (Ingress, IngressClass) the annotations and creation time.
///
/// Name and namespace are shared strings: the Store points them at its key's, so an object's
/// key and metadata hold one copy, and one namespace's objects one namespace string.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Meta {
    pub name: Option<Arc<str>>,
    pub namespace: Option<Arc<str>>,
    pub annotations: Option<BTreeMap<String, String>>,
    /// Orders Ingresses: the oldest wins a conflict.
    pub creation_timestamp: Option<Time>,
}

impl Meta {
    /// Name and namespace only: for kinds whose annotations and age mean nothing to Sluice.
    pub(crate) fn named(meta: ObjectMeta) -> Meta {
        Meta {
            name: meta.name.map(Arc::from),
            namespace: meta.namespace.map(Arc::from),
            ..Meta::default()
        }
    }

    /// Name, namespace and creation time (Gateway API orders routes by age).
    pub(crate) fn gateway(meta: ObjectMeta) -> Meta {
        Meta {
            name: meta.name.map(Arc::from),
            namespace: meta.namespace.map(Arc::from),
            annotations: None,
            creation_timestamp: meta.creation_timestamp,
        }
    }

    /// Name, namespace, annotations and creation time.
    pub(crate) fn annotated(meta: ObjectMeta) -> Meta {
        Meta {
            name: meta.name.map(Arc::from),
            namespace: meta.namespace.map(Arc::from),
            annotations: meta.annotations,
            creation_timestamp: meta.creation_timestamp,
        }
    }
}

/// Deserializes with the path of the offending field kept, e.g.
/// `spec.rules[0].http.paths[1].pathType`.
pub(crate) fn typed<T: serde::de::DeserializeOwned>(
    value: serde_yaml::Value,
) -> Result<T, (Option<String>, String)> {
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        let field = (path != "." && !path.is_empty()).then_some(path);
        (field, error.into_inner().to_string())
    })
}
