//! BackendTLSPolicy end to end: HTTPRoutes of a standalone Gateway to a real TLS-only backend
//! on 127.0.0.1 (the one of `upstream_tls.rs`), verified against the policy's CA ConfigMap,
//! its hostname (sent as SNI) or its subjectAltNames.

use crate::support::*;
use crate::upstream_tls::start_tls_backend;
use http::StatusCode;
use serde_json::{json, Value};

const SPIFFE: &str = "spiffe://cluster.local/ns/default/sa/web";

/// Service `name` (port `http` 443, `appProtocol: https`) on `addr`, and a route for
/// `<name>.example.com` to it.
fn backend_for(name: &str, addr: std::net::SocketAddr) -> Vec<Value> {
    let mut svc = service(name, &[("http", 443)]);
    svc["spec"]["ports"][0]["appProtocol"] = json!("https");
    let route = json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"parentRefs": [{"name": "edge"}],
                 "hostnames": [format!("{name}.example.com")],
                 "rules": [{"backendRefs": [{"name": name, "port": 443}]}]},
    });
    let mut objects = vec![svc, route];
    objects.extend(slices(name, &[addr]));
    objects
}

pub(crate) fn ca_config_map(name: &str, ca: &TestCa) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"ca.crt": ca.root_pem()},
    })
}

pub(crate) fn policy(service: &str, validation: Value) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "BackendTLSPolicy",
        "metadata": {"name": service, "namespace": "default"},
        "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": service,
                                 "sectionName": "http"}],
                 "validation": validation},
    })
}

pub(crate) fn with_ca(ca: &str, extra: Value) -> Value {
    let mut validation =
        json!({"caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": ca}]});
    for (key, value) in extra.as_object().unwrap() {
        validation[key] = value.clone();
    }
    validation
}

#[tokio::test]
async fn routes_speak_tls_to_a_policy_s_backend_and_verify_its_hostname_sans_and_ca() {
    let ca = TestCa::new();
    let other_ca = TestCa::new();
    let leaf = ca.leaf_with_uri(&["backend.internal"], SPIFFE);
    let backend = start_tls_backend(&leaf, &[], None).await;
    let mut objects = testkit::objects::gateway_edge("default");
    objects.push(ca_config_map("ca", &ca));
    objects.push(ca_config_map("other-ca", &other_ca));
    let cases: [(&str, Value, StatusCode); 8] = [
        (
            "good",
            with_ca("ca", json!({"hostname": "backend.internal"})),
            StatusCode::OK,
        ),
        (
            "misnamed",
            with_ca("ca", json!({"hostname": "other.internal"})),
            StatusCode::BAD_GATEWAY,
        ),
        (
            "wrong-ca",
            with_ca("other-ca", json!({"hostname": "backend.internal"})),
            StatusCode::BAD_GATEWAY,
        ),
        // subjectAltNames authenticate instead of the hostname, which is then only SNI.
        (
            "uri",
            with_ca(
                "ca",
                json!({"hostname": "sni.internal",
            "subjectAltNames": [{"type": "URI", "uri": SPIFFE}]}),
            ),
            StatusCode::OK,
        ),
        (
            "dns-san",
            with_ca(
                "ca",
                json!({"hostname": "sni.internal",
            "subjectAltNames": [{"type": "Hostname", "hostname": "backend.internal"}]}),
            ),
            StatusCode::OK,
        ),
        (
            "no-san",
            with_ca(
                "ca",
                json!({"hostname": "backend.internal",
            "subjectAltNames": [{"type": "URI", "uri": "spiffe://cluster.local/ns/default/sa/other"},
                                {"type": "Hostname", "hostname": "nope.internal"}]}),
            ),
            StatusCode::BAD_GATEWAY,
        ),
        // The URI's chain is still verified.
        (
            "uri-wrong-ca",
            with_ca(
                "other-ca",
                json!({"hostname": "sni.internal",
            "subjectAltNames": [{"type": "URI", "uri": SPIFFE}]}),
            ),
            StatusCode::BAD_GATEWAY,
        ),
        // A policy whose CA cannot be read: the spec's 5xx, before any connection.
        (
            "missing-ca",
            with_ca("nowhere", json!({"hostname": "backend.internal"})),
            StatusCode::INTERNAL_SERVER_ERROR,
        ),
    ];
    for (name, validation, _) in &cases {
        objects.extend(backend_for(name, backend.addr));
        objects.push(policy(name, validation.clone()));
    }
    // No policy: `appProtocol: https` alone is cleartext (a diagnostic), which a TLS-only
    // backend refuses.
    objects.extend(backend_for("plain", backend.addr));
    let mut h = Harness::with_workers(1);
    let compiled = h.apply_allowing_diagnostics(&objects);
    let said: Vec<&str> = compiled
        .diagnostics
        .iter()
        .map(|d| d.reason.as_str())
        .collect();
    assert!(
        said.iter()
            .any(|d| d.contains("appProtocol https") && d.contains("there is none")),
        "{said:?}"
    );
    assert!(
        said.iter()
            .any(|d| d.contains("BackendTLSPolicy default/missing-ca")),
        "{said:?}"
    );
    for (name, _, expected) in &cases {
        let reply = get(h.http(), &format!("{name}.example.com"), "/").await;
        assert_eq!(reply.status, *expected, "{name}");
        if reply.status == StatusCode::OK {
            let sni = if name == &"good" {
                "backend.internal"
            } else {
                "sni.internal"
            };
            assert_eq!(reply.json()["sni"], sni, "{name}: the hostname is the SNI");
        }
    }
    let reply = get(h.http(), "plain.example.com", "/").await;
    assert_eq!(reply.status, StatusCode::BAD_GATEWAY);
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn a_gateway_s_backend_client_certificate_is_presented_to_a_policy_s_backend() {
    let ca = TestCa::new();
    let backend = start_tls_backend(&ca.leaf(&["backend.internal"]), &[], Some(&ca)).await;
    let client = ca.leaf(&["sluice.client"]);
    let mut objects = testkit::objects::gateway_edge("default");
    objects[1]["spec"]["tls"] = json!({"backend": {"clientCertificateRef": {"name": "client"}}});
    objects.push(tls_secret("client", &client));
    objects.push(ca_config_map("ca", &ca));
    objects.extend(backend_for("mtls", backend.addr));
    objects.push(policy(
        "mtls",
        with_ca("ca", json!({"hostname": "backend.internal"})),
    ));
    let mut h = Harness::with_workers(1);
    h.apply(&objects);
    let reply = get(h.http(), "mtls.example.com", "/").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["client-cert"], true);
    // Without it, the backend (which requires one) refuses the handshake.
    objects[1]["spec"]["tls"] = Value::Null;
    h.apply(&objects);
    let reply = get(h.http(), "mtls.example.com", "/").await;
    assert_eq!(reply.status, StatusCode::BAD_GATEWAY);
    shutdown(h.control.proxy).await;
}
