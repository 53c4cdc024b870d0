//! HTTPS upstreams (`backend-protocol: HTTPS`, `appProtocol: https`, `proxy-ssl-*`) against a
//! real TLS-only backend: a rustls server in front of hyper on 127.0.0.1, which counts its
//! connections and handshakes and answers with what it saw (SNI, client certificate, whether
//! the session was resumed).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::support::*;
use base64::Engine;
use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::PrivateKeyDer;
use rustls::server::WebPkiClientVerifier;
use rustls::HandshakeKind;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A backend that speaks only TLS.
pub(crate) struct TlsBackend {
    pub(crate) addr: std::net::SocketAddr,
    /// TCP connections accepted.
    connections: Arc<AtomicUsize>,
    /// Of their handshakes, how many resumed a session.
    resumed: Arc<AtomicUsize>,
    /// The SNI of each completed handshake (`None`: none sent).
    pub(crate) names: Arc<Mutex<Vec<Option<String>>>>,
}

/// Starts a TLS-only HTTP/1.1 server presenting `leaf` (and the `intermediates` after it);
/// with `client_ca`, it requires a client certificate signed by it (mTLS). It answers with
/// what it saw, and the length of the request body it read.
pub(crate) async fn start_tls_backend(
    leaf: &Leaf,
    intermediates: &[&TestCa],
    client_ca: Option<&TestCa>,
) -> TlsBackend {
    let provider = model::tls::crypto_provider().clone();
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = match client_ca {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(ca.root().clone()).unwrap();
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap();
    let mut chain = vec![leaf.der.clone()];
    chain.extend(intermediates.iter().map(|ca| ca.root().clone()));
    let config = builder.with_single_cert(chain, key).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let backend = TlsBackend {
        addr: listener.local_addr().unwrap(),
        connections: Arc::default(),
        resumed: Arc::default(),
        names: Arc::default(),
    };
    let (connections, resumed, names) = (
        backend.connections.clone(),
        backend.resumed.clone(),
        backend.names.clone(),
    );
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let number = connections.fetch_add(1, Ordering::SeqCst) + 1;
            let acceptor = acceptor.clone();
            let (resumed, names) = (resumed.clone(), names.clone());
            tokio::spawn(async move {
                // A client that fails the handshake (wrong CA, no client certificate) ends here.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let session = tls.get_ref().1;
                let sni = session.server_name().map(str::to_owned);
                let was_resumed = session.handshake_kind() == Some(HandshakeKind::Resumed);
                let client_cert = session.peer_certificates().is_some();
                if was_resumed {
                    resumed.fetch_add(1, Ordering::SeqCst);
                }
                names.lock().unwrap().push(sni.clone());
                let seen = json!({
                    "connection": number,
                    "sni": sni,
                    "client-cert": client_cert,
                    "resumed": was_resumed,
                });
                let service = service_fn(move |request: http::Request<Incoming>| {
                    let mut seen = seen.clone();
                    async move {
                        let body = request.into_body().collect().await?.to_bytes();
                        seen["body-length"] = json!(body.len());
                        Ok::<_, hyper::Error>(
                            Response::builder()
                                .header("content-type", "application/json")
                                .body(Full::new(Bytes::from(seen.to_string())))
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    backend
}

/// A Secret for `proxy-ssl-secret`: `ca.crt` and, for mTLS, `tls.crt` + `tls.key`.
fn proxy_ssl_secret(name: &str, ca: Option<&TestCa>, client: Option<&Leaf>) -> Value {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut data = serde_json::Map::new();
    if let Some(ca) = ca {
        data.insert("ca.crt".into(), json!(b64(&ca.root_pem())));
    }
    if let Some(leaf) = client {
        data.insert("tls.crt".into(), json!(b64(&leaf.cert_pem)));
        data.insert("tls.key".into(), json!(b64(&leaf.key_pem)));
    }
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": "default"},
        "data": data,
    })
}

/// An Ingress for `host` → Service `web` port `http`, with `nginx.ingress.kubernetes.io/`
/// annotations.
fn annotated(name: &str, host: &str, annotations: &[(&str, &str)]) -> Value {
    let mut object = ingress(
        name,
        json!({"rules": [rule(host, vec![path("/", "Prefix", to("web"))])]}),
    );
    let annotations: serde_json::Map<String, Value> = annotations
        .iter()
        .map(|(k, v)| (format!("nginx.ingress.kubernetes.io/{k}"), json!(v)))
        .collect();
    object["metadata"]["annotations"] = Value::Object(annotations);
    object
}

/// Service `web` (port `http`) with the backend as its one endpoint.
fn web(backend: &TlsBackend) -> Vec<Value> {
    let mut objects = vec![service("web", &[("http", 443)])];
    objects.extend(slices("web", &[backend.addr]));
    objects
}

async fn seen(h: &Harness, host: &str) -> (StatusCode, Value) {
    let reply = get(h.http(), host, "/").await;
    let json = if reply.status == StatusCode::OK {
        reply.json()
    } else {
        Value::Null
    };
    (reply.status, json)
}

#[tokio::test]
async fn https_routes_speak_tls_and_reuse_pooled_connections() {
    let ca = TestCa::new();
    let backend = start_tls_backend(&ca.leaf(&["web.default.svc"]), &[], None).await;
    let mut h = Harness::with_workers(1);
    let mut objects = web(&backend);
    objects.push(annotated(
        "https",
        "https.example.com",
        &[
            ("backend-protocol", "HTTPS"),
            ("proxy-request-buffering", "off"),
            ("proxy-body-size", "0"),
        ],
    ));
    objects.push(annotated("plain", "plain.example.com", &[]));
    h.apply(&objects);

    // One client connection, several requests: one upstream connection carries them all.
    let mut client = Client::connect(h.http()).await;
    for _ in 0..3 {
        let reply = client.get("https.example.com", "/").await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        let json = reply.json();
        assert_eq!(json["connection"], 1, "{json}");
        // nginx's default: proxy_ssl_server_name off.
        assert_eq!(json["sni"], Value::Null, "{json}");
        assert_eq!(json["client-cert"], false, "{json}");
    }
    // A streamed request body larger than the socket buffers and rustls's: writes that wait
    // for the TLS socket, while the response is watched for.
    let body = Bytes::from(vec![b'x'; 4 << 20]);
    let request = http::Request::post("/upload")
        .header("host", "https.example.com")
        .body(Full::new(body))
        .unwrap();
    let reply = client.send(request).await.unwrap();
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(reply.json()["body-length"], 4 << 20);
    assert_eq!(reply.json()["connection"], 1);
    assert_eq!(backend.connections.load(Ordering::SeqCst), 1);

    // The same endpoint without the annotation is spoken to in plain HTTP, which a TLS-only
    // server cannot answer: 502, and no TLS connection of the other route is borrowed for it.
    let (status, _) = seen(&h, "plain.example.com").await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    let (status, json) = seen(&h, "https.example.com").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json["connection"], 1, "{json}");
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn sessions_resume_across_connections() {
    let ca = TestCa::new();
    let backend = start_tls_backend(&ca.leaf(&["web.default.svc"]), &[], None).await;
    let mut h = Harness::with_workers(1);
    let mut objects = web(&backend);
    // Every connection carries one request: each request makes a handshake.
    objects.push(settings(&[("upstream-keepalive-requests", "1")]));
    objects.push(annotated(
        "https",
        "https.example.com",
        &[("backend-protocol", "HTTPS")],
    ));
    h.apply(&objects);
    for n in 1..=4 {
        let (status, json) = seen(&h, "https.example.com").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(json["connection"], n, "{json}");
        assert_eq!(json["resumed"], n > 1, "{json}");
    }
    assert_eq!(backend.resumed.load(Ordering::SeqCst), 3);
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn verification_uses_the_secret_ca_and_the_name() {
    let ca = TestCa::new();
    let other_ca = TestCa::new();
    let backend = start_tls_backend(&ca.leaf(&["backend.internal"]), &[], None).await;
    let mut h = Harness::with_workers(1);
    let mut objects = web(&backend);
    objects.push(proxy_ssl_secret("right-ca", Some(&ca), None));
    objects.push(proxy_ssl_secret("wrong-ca", Some(&other_ca), None));
    let verified = |name: &str, host: &str, secret: &str, ssl_name: &str| {
        annotated(
            name,
            host,
            &[
                ("backend-protocol", "HTTPS"),
                ("proxy-ssl-secret", secret),
                ("proxy-ssl-verify", "on"),
                ("proxy-ssl-name", ssl_name),
            ],
        )
    };
    objects.push(verified(
        "right",
        "right.example.com",
        "default/right-ca",
        "backend.internal",
    ));
    objects.push(verified(
        "wrong",
        "wrong.example.com",
        "default/wrong-ca",
        "backend.internal",
    ));
    objects.push(verified(
        "misnamed",
        "misnamed.example.com",
        "default/right-ca",
        "other.internal",
    ));
    // Verification off (the default) accepts the certificate whatever signed it.
    objects.push(annotated(
        "unverified",
        "unverified.example.com",
        &[
            ("backend-protocol", "HTTPS"),
            ("proxy-ssl-secret", "default/wrong-ca"),
        ],
    ));
    h.apply(&objects);
    for (host, expected) in [
        ("right.example.com", StatusCode::OK),
        ("wrong.example.com", StatusCode::BAD_GATEWAY),
        ("misnamed.example.com", StatusCode::BAD_GATEWAY),
        ("unverified.example.com", StatusCode::OK),
        // Served from the pool, still only for its own route.
        ("wrong.example.com", StatusCode::BAD_GATEWAY),
    ] {
        let (status, _) = seen(&h, host).await;
        assert_eq!(status, expected, "{host}");
    }
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn client_certificates_from_the_secret_satisfy_mtls_backends() {
    let ca = TestCa::new();
    let backend = start_tls_backend(&ca.leaf(&["web.default.svc"]), &[], Some(&ca)).await;
    let client_leaf = ca.leaf(&["sluice.client"]);
    let mut h = Harness::with_workers(1);
    let mut objects = web(&backend);
    objects.push(proxy_ssl_secret("mtls", Some(&ca), Some(&client_leaf)));
    objects.push(proxy_ssl_secret("ca-only", Some(&ca), None));
    objects.push(annotated(
        "mtls",
        "mtls.example.com",
        &[
            ("backend-protocol", "HTTPS"),
            ("proxy-ssl-secret", "default/mtls"),
            ("proxy-ssl-verify", "on"),
        ],
    ));
    objects.push(annotated(
        "no-cert",
        "no-cert.example.com",
        &[
            ("backend-protocol", "HTTPS"),
            ("proxy-ssl-secret", "default/ca-only"),
            ("proxy-ssl-verify", "on"),
        ],
    ));
    h.apply(&objects);
    let (status, json) = seen(&h, "mtls.example.com").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json["client-cert"], true, "{json}");
    let (status, _) = seen(&h, "no-cert.example.com").await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    // The mTLS connection in the pool is not lent to the route without a certificate.
    let (status, _) = seen(&h, "no-cert.example.com").await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    let (status, json) = seen(&h, "mtls.example.com").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json["connection"], 1, "{json}");
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn sni_is_sent_only_with_proxy_ssl_server_name() {
    let ca = TestCa::new();
    let backend = start_tls_backend(&ca.leaf(&["web.default.svc"]), &[], None).await;
    let mut h = Harness::with_workers(1);
    let mut objects = web(&backend);
    objects.push(proxy_ssl_secret("ca", Some(&ca), None));
    let with = |name: &str, host: &str, server_name: &str| {
        annotated(
            name,
            host,
            &[
                ("backend-protocol", "HTTPS"),
                ("proxy-ssl-secret", "default/ca"),
                ("proxy-ssl-server-name", server_name),
                ("proxy-ssl-name", "web.default.svc"),
            ],
        )
    };
    objects.push(with("sni", "sni.example.com", "on"));
    objects.push(with("no-sni", "no-sni.example.com", "off"));
    h.apply(&objects);
    // Alternating: each route keeps to its own pooled connection, so what the backend saw on
    // the connection is what that route's settings send.
    for _ in 0..2 {
        let (status, json) = seen(&h, "sni.example.com").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(json["sni"], "web.default.svc", "{json}");
        let (status, json) = seen(&h, "no-sni.example.com").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(json["sni"], Value::Null, "{json}");
    }
    assert_eq!(backend.connections.load(Ordering::SeqCst), 2);
    assert_eq!(
        *backend.names.lock().unwrap(),
        [Some("web.default.svc".to_owned()), None]
    );
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn app_protocol_https_without_annotation_is_tls() {
    let ca = TestCa::new();
    let backend = start_tls_backend(&ca.leaf(&["web.default.svc"]), &[], None).await;
    let mut h = Harness::with_workers(1);
    let mut objects = vec![json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"ports": [{"name": "http", "port": 443, "appProtocol": "https"}]},
    })];
    objects.extend(slices("web", &[backend.addr]));
    objects.push(annotated("app-protocol", "app.example.com", &[]));
    // The annotation wins over appProtocol.
    objects.push(annotated(
        "forced-http",
        "forced.example.com",
        &[("backend-protocol", "HTTP")],
    ));
    h.apply(&objects);
    let (status, json) = seen(&h, "app.example.com").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json["connection"], 1, "{json}");
    let (status, _) = seen(&h, "forced.example.com").await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn verify_depth_bounds_the_intermediates() {
    let root = TestCa::new();
    let first = root.intermediate("intermediate 1");
    let second = first.intermediate("intermediate 2");
    let leaf = second.leaf(&["web.default.svc"]);
    let backend = start_tls_backend(&leaf, &[&second, &first], None).await;
    let mut h = Harness::with_workers(1);
    let mut objects = web(&backend);
    objects.push(proxy_ssl_secret("root", Some(&root), None));
    for (name, depth) in [("one", "1"), ("two", "2")] {
        objects.push(annotated(
            name,
            &format!("{name}.example.com"),
            &[
                ("backend-protocol", "HTTPS"),
                ("proxy-ssl-secret", "default/root"),
                ("proxy-ssl-verify", "on"),
                ("proxy-ssl-verify-depth", depth),
            ],
        ));
    }
    h.apply(&objects);
    // OpenSSL's depth, as nginx uses it: the number of CA certificates allowed between the
    // endpoint's certificate and the trusted one. Two intermediates need depth 2.
    let (status, _) = seen(&h, "one.example.com").await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    let (status, _) = seen(&h, "two.example.com").await;
    assert_eq!(status, StatusCode::OK);
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn websockets_tunnel_through_tls_upstreams() {
    // appProtocol kubernetes.io/wss: a WebSocket server behind TLS.
    let ca = TestCa::new();
    let leaf = ca.leaf(&["ws.default.svc"]);
    let acceptor = leaf.acceptor();
    let listener = TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            if let Ok(tls) = acceptor.accept(tcp).await {
                tokio::spawn(serve_upgrade(tls, Arc::default()));
            }
        }
    });
    let mut h = Harness::with_workers(1);
    let mut objects = vec![json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "ws", "namespace": "default"},
        "spec": {"ports": [{"name": "http", "port": 443, "appProtocol": "kubernetes.io/wss"}]},
    })];
    objects.extend(slices("ws", &[addr]));
    objects.push(ingress(
        "ws",
        json!({"rules": [rule("ws.example.com", vec![path("/", "Prefix", to("ws"))])]}),
    ));
    h.apply(&objects);

    let (mut stream, head) = websocket_upgrade(h.http()).await;
    assert!(head.starts_with("http/1.1 101"), "{head}");
    stream.write_all(b"hello over tls").await.unwrap();
    let mut echoed = [0u8; 14];
    bounded(stream.read_exact(&mut echoed)).await.unwrap();
    assert_eq!(&echoed, b"hello over tls");
    // The client's close ends the tunnel both ways (TLS close_notify upstream), so shutdown
    // has nothing left to drain.
    drop(stream);
    shutdown(h.control.proxy).await;
}

/// `mirror-target: https://…`: the copy goes over TLS as nginx's `proxy_pass https://` makes
/// it, without verification (the mirror's certificate chains to nothing the proxy trusts) and
/// without SNI.
#[tokio::test]
async fn an_https_mirror_target_speaks_tls_without_verification_or_sni() {
    let untrusted = TestCa::new();
    let mirror = start_tls_backend(&untrusted.leaf(&["mirror.example"]), &[], None).await;
    let plain = start_backend("plain").await;
    let mut h = Harness::with_workers(1);
    let mut objects = vec![service("web", &[("http", 80)])];
    objects.extend(slices("web", &[addr_of(&plain)]));
    let target = format!("https://{}/copy", mirror.addr);
    objects.push(annotated(
        "mirrored",
        "mirrored.example.com",
        &[("mirror-target", &target)],
    ));
    h.apply(&objects);
    let reply = get(h.http(), "mirrored.example.com", "/echo").await;
    assert_eq!(reply.backend(), "plain");
    eventually_async(STEP, "the copy answered", || async {
        let metrics = get(h.admin(), "admin", "/metrics").await.text();
        metrics
            .lines()
            .any(|l| l == "sluice_mirror_requests_total{outcome=\"sent\"} 1")
    })
    .await;
    assert_eq!(mirror.connections.load(Ordering::SeqCst), 1);
    assert_eq!(*mirror.names.lock().unwrap(), [None]);
    shutdown(h.control.proxy).await;
}
