//! Kubernetes objects as JSON values (JSON is YAML), in namespace `default` unless named
//! otherwise: what tests feed a Store, a webhook or an API server.

use std::net::SocketAddr;

use base64::Engine;
use serde_json::{json, Value};

use crate::tls::Leaf;

/// A Service with named ports: `(name, port)`.
pub fn service(name: &str, ports: &[(&str, u16)]) -> Value {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(n, p)| json!({"name": n, "port": p, "targetPort": p}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"ports": ports},
    })
}

/// An EndpointSlice of `service` with one ready endpoint on 127.0.0.1 per port set.
pub fn slice(service: &str, slice_name: &str, ports: &[(&str, u16)]) -> Value {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(n, p)| json!({"name": n, "port": p}))
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": slice_name, "namespace": "default",
                     "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "ports": ports,
        "endpoints": [{"addresses": ["127.0.0.1"]}],
    })
}

/// One slice per address, all for port name `http`.
pub fn slices(service: &str, addrs: &[SocketAddr]) -> Vec<Value> {
    addrs
        .iter()
        .map(|a| {
            slice(
                service,
                &format!("{service}-{}", a.port()),
                &[("http", a.port())],
            )
        })
        .collect()
}

/// An Ingress backend by Service port name.
pub fn to(service: &str) -> Value {
    json!({"service": {"name": service, "port": {"name": "http"}}})
}

/// A path rule.
pub fn path(path: &str, kind: &str, backend: Value) -> Value {
    json!({"path": path, "pathType": kind, "backend": backend})
}

/// An Ingress rule for `host` with these paths.
pub fn rule(host: &str, paths: Vec<Value>) -> Value {
    json!({"host": host, "http": {"paths": paths}})
}

/// An Ingress of class `sluice` with this spec.
pub fn ingress(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["ingressClassName"] = json!("sluice");
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    })
}

/// An Ingress `name` routing `host` `/` (Prefix) to `service`, with these annotations (a JSON
/// object, names in full).
pub fn annotated_site(name: &str, host: &str, service: &str, annotations: Value) -> Value {
    let mut object = ingress(
        name,
        json!({"rules": [rule(host, vec![path("/", "Prefix", to(service))])]}),
    );
    object["metadata"]["annotations"] = annotations;
    object
}

/// The simplest site: every host and path to `service` (port `http`).
pub fn catch_all(service_name: &str, addrs: &[SocketAddr]) -> Vec<Value> {
    let mut objects = vec![
        service(service_name, &[("http", 80)]),
        ingress(
            service_name,
            json!({"rules": [{"http": {"paths": [path("/", "Prefix", to(service_name))]}}]}),
        ),
    ];
    objects.extend(slices(service_name, addrs));
    objects
}

/// A `kubernetes.io/tls` Secret holding `leaf`.
pub fn tls_secret(name: &str, leaf: &Leaf) -> Value {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"tls.crt": b64(&leaf.cert_pem), "tls.key": b64(&leaf.key_pem)},
    })
}

/// The controller ConfigMap (`sluice/sluice`).
pub fn settings(data: &[(&str, &str)]) -> Value {
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "sluice", "namespace": "sluice"},
        "data": data,
    })
}

/// GatewayClass `sluice` (Sluice's controller) and Gateway `edge` in `namespace` with one
/// HTTP listener on port 80: what Gateway API tests attach their routes to.
pub fn gateway_edge(namespace: &str) -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": "sluice"},
            "spec": {"controllerName": "sluice.dev/gateway-controller"},
        }),
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "edge", "namespace": namespace},
            "spec": {
                "gatewayClassName": "sluice",
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
            },
        }),
    ]
}
