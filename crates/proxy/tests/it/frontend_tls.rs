//! A Gateway's frontend validation (`spec.tls.frontend`) over real sockets: the port's handshake
//! requires a certificate of the ConfigMap's CA (AllowValidOnly: none, or another CA's, and
//! the connection fails; whatever the SNI), or asks for one and serves every client
//! (AllowInsecureFallback); a Gateway whose CA reference resolves to nothing closes its port's
//! connections before the handshake while its other listeners serve. Each Gateway has an
//! address of its own (`--gateway-address-pool`, as `gateway_sites` sets it up).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http::{Request, StatusCode};
use http_body_util::Full;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::ServerName;
use serde_json::{json, Value};
use tokio::net::TcpStream;
use translate::CompileOptions;

use crate::support::*;

// The pool hands its addresses out by namespace/name: `broken` first.
const BROKEN: [u8; 4] = [127, 0, 0, 2];
const STRICT: [u8; 4] = [127, 0, 0, 3];
const HOST: &str = "secure.example.com";

/// Gateway `name`: HTTP on 80, HTTPS on 443 (certificate `server-tls`), `frontend` as given.
fn gateway(name: &str, frontend: Value) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "gatewayClassName": "sluice",
            "tls": {"frontend": frontend},
            "listeners": [
                {"name": "http", "port": 80, "protocol": "HTTP"},
                {"name": "https", "port": 443, "protocol": "HTTPS",
                 "tls": {"certificateRefs": [{"name": "server-tls"}]}},
            ],
        },
    })
}

/// A default validation with the CA of ConfigMap `ca` and `mode`.
fn validation(ca: &str, mode: &str) -> Value {
    json!({"default": {"validation": {
        "mode": mode,
        "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": ca}],
    }}})
}

fn route(gateway: &str) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": gateway, "namespace": "default"},
        "spec": {
            "parentRefs": [{"name": gateway}],
            "rules": [{"backendRefs": [{"name": "web", "port": 80}]}],
        },
    })
}

/// The objects of the test: both Gateways (`strict` with `mode`), their routes, the CA
/// ConfigMap, the server certificate and the backend.
fn objects(mode: &str, client_ca: &TestCa, server: &Leaf, web: &backend::Backend) -> Vec<Value> {
    let mut objects = vec![
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": "sluice"},
            "spec": {"controllerName": "sluice.dev/gateway-controller"},
        }),
        gateway("strict", validation("client-ca", mode)),
        gateway("broken", validation("no-such-configmap", "AllowValidOnly")),
        route("strict"),
        route("broken"),
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "client-ca", "namespace": "default"},
            "data": {"ca.crt": client_ca.root_pem()},
        }),
        tls_secret("server-tls", server),
        service("web", &[("http", 80)]),
    ];
    objects.extend(slices("web", &[addr_of(web)]));
    objects
}

/// One HTTPS request to `addr` for `name` (SNI and Host), presenting `client` if any: its
/// status, or why the connection failed (handshake refused, closed).
async fn attempt(
    server_ca: &TestCa,
    addr: SocketAddr,
    name: &str,
    client: Option<&Leaf>,
) -> Result<StatusCode, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(server_ca.root().clone()).unwrap();
    let builder =
        rustls::ClientConfig::builder_with_provider(model::tls::crypto_provider().clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
    let mut config = match client {
        Some(leaf) => {
            let key = model::tls::certified_key_from_pem(
                leaf.cert_pem.as_bytes(),
                leaf.key_pem.as_bytes(),
            )
            .unwrap();
            let chain = key.cert.clone();
            let der =
                rustls::pki_types::PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap();
            builder.with_client_auth_cert(chain, der).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let stream = (bounded(TcpStream::connect(addr)).await).map_err(|e| e.to_string())?;
    let server_name = ServerName::try_from(name.to_owned()).unwrap();
    let tls = (bounded(connector.connect(server_name, stream)).await)
        .map_err(|e| format!("handshake: {e}"))?;
    // TLS 1.3: the client's handshake ends before the server has judged its certificate; a
    // refusal arrives as an alert on the first read.
    let mut client = Client::over(tls).await;
    let request = Request::get("/")
        .header("host", name)
        .body(Full::default())
        .unwrap();
    let reply = client.send(request).await.map_err(|e| e.to_string())?;
    Ok(reply.status)
}

fn at(ip: [u8; 4], port: u16) -> SocketAddr {
    SocketAddr::from((ip, port))
}

#[tokio::test]
async fn the_port_s_handshake_requires_a_certificate_of_the_gateway_s_ca() {
    let web = start_backend("web").await;
    let (server_ca, client_ca) = (TestCa::new(), TestCa::new());
    let server = server_ca.leaf(&[HOST, "other.example.com"]);
    let alice = client_ca.client("alice", 1);
    let mallory = TestCa::new()
        .intermediate("Another CA")
        .client("mallory", 2);
    let options = CompileOptions {
        gateway_address_pool: Some("127.0.0.2-127.0.0.3".parse().unwrap()),
        ..CompileOptions::default()
    };
    let mut h = Harness::listening(IpAddr::from([0, 0, 0, 0]), 2, options);
    let compiled =
        h.apply_allowing_diagnostics(&objects("AllowValidOnly", &client_ca, &server, &web));
    let missing = "spec.tls.frontend.default.validation.caCertificateRefs[0]: ConfigMap default/no-such-configmap not found";
    assert!(
        (compiled.diagnostics.iter()).any(|d| d.reason.contains(missing)),
        "{:?}",
        compiled.diagnostics
    );
    let address = |name: &str| {
        let status =
            &compiled.gateway_status.gateways[&model::NamespacedName::new("default", name)];
        status
            .addresses
            .own
            .expect("an address of its own")
            .to_string()
    };
    assert_eq!(
        (address("broken"), address("strict")),
        ("127.0.0.2".into(), "127.0.0.3".into())
    );
    let (http, https) = (h.http().port(), h.https().port());
    let strict = at(STRICT, https);

    // AllowValidOnly: the CA's certificate is served, for any name the certificate has.
    for name in [HOST, "other.example.com"] {
        let served = attempt(&server_ca, strict, name, Some(&alice)).await;
        assert_eq!(served, Ok(StatusCode::OK), "{name}");
    }
    // No certificate, or another CA's: the connection fails, no HTTP answer.
    let refused = attempt(&server_ca, strict, HOST, None).await;
    assert!(refused.is_err(), "no certificate: {refused:?}");
    let refused = attempt(&server_ca, strict, HOST, Some(&mallory)).await;
    assert!(refused.is_err(), "another CA's: {refused:?}");

    // The Gateway whose CA is missing: its HTTPS port closes before the handshake, its HTTP
    // listener serves.
    let broken = attempt(&server_ca, at(BROKEN, https), HOST, Some(&alice)).await;
    assert!(broken.is_err(), "missing CA: {broken:?}");
    let reply = get(at(BROKEN, http), HOST, "/").await;
    assert_eq!(reply.status, StatusCode::OK);

    // AllowInsecureFallback: every client is served, and the Gateway says so.
    let compiled =
        h.apply_allowing_diagnostics(&objects("AllowInsecureFallback", &client_ca, &server, &web));
    let status =
        &compiled.gateway_status.gateways[&model::NamespacedName::new("default", "strict")];
    assert!(status
        .conditions
        .iter()
        .any(|c| c.type_ == "InsecureFrontendValidationMode" && c.status));
    for client in [Some(&alice), Some(&mallory), None] {
        let served = attempt(&server_ca, strict, HOST, client).await;
        assert_eq!(
            served,
            Ok(StatusCode::OK),
            "{:?}",
            client.map(|c| &c.cert_pem)
        );
    }
}

/// A ClusterTrustBundle `name` (cluster-scoped) holding `ca`'s certificate.
fn trust_bundle(name: &str, ca: &TestCa) -> Value {
    json!({
        "apiVersion": "certificates.k8s.io/v1beta1", "kind": "ClusterTrustBundle",
        "metadata": {"name": name},
        "spec": {"trustBundle": ca.root_pem()},
    })
}

#[tokio::test]
async fn a_cluster_trust_bundle_holds_the_ca_and_its_replacement_applies_without_a_restart() {
    let web = start_backend("web").await;
    let (server_ca, client_ca, other_ca) = (TestCa::new(), TestCa::new(), TestCa::new());
    let server = server_ca.leaf(&[HOST]);
    let alice = client_ca.client("alice", 1);
    let mallory = other_ca.client("mallory", 2);
    let options = CompileOptions {
        gateway_address_pool: Some("127.0.0.2-127.0.0.3".parse().unwrap()),
        ..CompileOptions::default()
    };
    let mut h = Harness::listening(IpAddr::from([0, 0, 0, 0]), 2, options);
    // Gateway `strict` trusts ClusterTrustBundle `clients` (no namespace, no ReferenceGrant).
    let with_bundle = |ca: &TestCa| {
        let mut objects = objects("AllowValidOnly", &client_ca, &server, &web);
        let reference = json!({"group": "certificates.k8s.io", "kind": "ClusterTrustBundle",
                               "name": "clients"});
        let frontend = json!({"default": {"validation": {"caCertificateRefs": [reference]}}});
        objects[1] = gateway("strict", frontend);
        objects.push(trust_bundle("clients", ca));
        objects
    };
    let compiled = h.apply_allowing_diagnostics(&with_bundle(&client_ca));
    assert!(
        !(compiled.diagnostics.iter()).any(|d| d.object.name == "strict"),
        "{:?}",
        compiled.diagnostics
    );
    assert_eq!(
        compiled.cluster_trust_bundles_read,
        ["clients".to_owned()].into()
    );
    let strict = at(STRICT, h.https().port());
    let served = attempt(&server_ca, strict, HOST, Some(&alice)).await;
    assert_eq!(served, Ok(StatusCode::OK), "signed by the bundle's CA");
    let refused = attempt(&server_ca, strict, HOST, Some(&mallory)).await;
    assert!(refused.is_err(), "another CA's: {refused:?}");
    let refused = attempt(&server_ca, strict, HOST, None).await;
    assert!(refused.is_err(), "no certificate: {refused:?}");

    // The bundle now holds the other CA: the control plane compiles (the last compile read the
    // bundle) and the same listeners take the other client.
    h.update(&with_bundle(&other_ca));
    let served = attempt(&server_ca, strict, HOST, Some(&mallory)).await;
    assert_eq!(served, Ok(StatusCode::OK), "signed by the new bundle's CA");
    let refused = attempt(&server_ca, strict, HOST, Some(&alice)).await;
    assert!(refused.is_err(), "the old CA's: {refused:?}");
}
