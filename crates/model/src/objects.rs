//! The Kubernetes objects Sluice reads, and turning YAML/JSON text into them.
//!
//! Parsing is pure: text in, objects and precise errors out. A document that is not one of
//! the kinds we read is ignored; one that is ours but invalid becomes a [`ParseError`]
//! naming the source, the object and the field, so a person can fix it without guessing.

use std::fmt;

use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

/// The namespace kubectl assumes when a namespaced object names none.
pub const DEFAULT_NAMESPACE: &str = "default";

/// The kinds of object Sluice reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Kind {
    IngressClass,
    Ingress,
    Service,
    EndpointSlice,
    Secret,
    ConfigMap,
}

/// Identifies one object: kind, namespace (empty for cluster-scoped kinds) and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
}

/// One object of a kind Sluice reads.
// Boxing would only save memory while objects sit in a parse result; the Store holds them unwrapped.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Object {
    IngressClass(IngressClass),
    Ingress(Ingress),
    Service(Service),
    EndpointSlice(EndpointSlice),
    Secret(Secret),
    ConfigMap(ConfigMap),
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

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::IngressClass => "IngressClass",
            Kind::Ingress => "Ingress",
            Kind::Service => "Service",
            Kind::EndpointSlice => "EndpointSlice",
            Kind::Secret => "Secret",
            Kind::ConfigMap => "ConfigMap",
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
            _ => None,
        }
    }

    pub fn is_namespaced(self) -> bool {
        self != Kind::IngressClass
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

impl Object {
    pub fn kind(&self) -> Kind {
        match self {
            Object::IngressClass(_) => Kind::IngressClass,
            Object::Ingress(_) => Kind::Ingress,
            Object::Service(_) => Kind::Service,
            Object::EndpointSlice(_) => Kind::EndpointSlice,
            Object::Secret(_) => Kind::Secret,
            Object::ConfigMap(_) => Kind::ConfigMap,
        }
    }

    pub fn metadata(&self) -> &ObjectMeta {
        match self {
            Object::IngressClass(o) => &o.metadata,
            Object::Ingress(o) => &o.metadata,
            Object::Service(o) => &o.metadata,
            Object::EndpointSlice(o) => &o.metadata,
            Object::Secret(o) => &o.metadata,
            Object::ConfigMap(o) => &o.metadata,
        }
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Object::IngressClass(o) => &mut o.metadata,
            Object::Ingress(o) => &mut o.metadata,
            Object::Service(o) => &mut o.metadata,
            Object::EndpointSlice(o) => &mut o.metadata,
            Object::Secret(o) => &mut o.metadata,
            Object::ConfigMap(o) => &mut o.metadata,
        }
    }

    pub fn object_ref(&self) -> ObjectRef {
        let meta = self.metadata();
        ObjectRef::new(
            self.kind(),
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        )
    }
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

    let parsed = match kind {
        Kind::IngressClass => typed(Value::Mapping(mapping)).map(Object::IngressClass),
        Kind::Ingress => typed(Value::Mapping(mapping)).map(Object::Ingress),
        Kind::Service => typed(Value::Mapping(mapping)).map(Object::Service),
        Kind::EndpointSlice => typed(Value::Mapping(mapping)).map(Object::EndpointSlice),
        Kind::Secret => typed(Value::Mapping(mapping)).map(Object::Secret),
        Kind::ConfigMap => typed(Value::Mapping(mapping)).map(Object::ConfigMap),
    };
    match parsed {
        Ok(mut object) => {
            if kind.is_namespaced() {
                object.metadata_mut().namespace = Some(namespace);
            }
            if let Object::Secret(secret) = &mut object {
                merge_string_data(secret);
            }
            out.objects.push(object);
        }
        Err((field, message)) => {
            out.errors
                .push(error(Some(object_ref), field.as_deref(), message))
        }
    }
}

/// Deserializes with the path of the offending field kept, e.g.
/// `spec.rules[0].http.paths[1].pathType`.
fn typed<T: serde::de::DeserializeOwned>(
    value: serde_yaml::Value,
) -> Result<T, (Option<String>, String)> {
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        let field = (path != "." && !path.is_empty()).then_some(path);
        (field, error.into_inner().to_string())
    })
}

/// The API server folds `stringData` into `data` on write; a file has no API server, so we do
/// it here and the rest of Sluice only ever looks at `data`.
fn merge_string_data(secret: &mut Secret) {
    if let Some(string_data) = secret.string_data.take() {
        let data = secret.data.get_or_insert_with(Default::default);
        for (key, value) in string_data {
            data.insert(key, k8s_openapi::ByteString(value.into_bytes()));
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
    fn a_document_without_a_name_is_an_error() {
        let documents = parse_documents("n.yaml", "apiVersion: v1\nkind: Service\n").unwrap();
        assert_eq!(
            documents.errors[0].to_string(),
            "n.yaml: Service default/: metadata.name: required and must be a non-empty string"
        );
    }
}
