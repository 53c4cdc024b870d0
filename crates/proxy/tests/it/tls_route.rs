//! Gateway TLS listeners and TLSRoutes over real TLS on 127.0.0.1: a Passthrough listener
//! routes by SNI to a TLS backend (the client sees the backend's certificate), a Terminate
//! listener on a port of its own decrypts with its certificateRefs and relays the bytes to a
//! plain TCP backend (or over TLS again, verified, under a BackendTLSPolicy); a name no route
//! has is refused on a TLS-only port and terminated for the Ingresses on 443; a route whose
//! reference cannot be used refuses its connections.

use std::net::SocketAddr;

use crate::support::*;
use rustls::pki_types::CertificateDer;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// A backend that greets with its name and whether the bytes it got were TLS, then echoes
/// lines; with `leaf` it terminates TLS itself.
async fn line_backend(name: &'static str, leaf: Option<&Leaf>) -> SocketAddr {
    let acceptor = leaf.map(Leaf::acceptor);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                match acceptor {
                    Some(acceptor) => {
                        if let Ok(tls) = acceptor.accept(stream).await {
                            echo_lines(tls, &format!("{name} over tls"), name).await;
                        }
                    }
                    None => echo_lines(stream, &format!("{name} over plain"), name).await,
                }
            });
        }
    });
    addr
}

/// Connects with SNI `name`: the certificate presented, the greeting and the echo of a line.
async fn exchange(
    ca: &TestCa,
    addr: SocketAddr,
    name: &str,
) -> std::io::Result<(CertificateDer<'static>, String, String)> {
    let (tls, presented) = ca.connect(addr, name, &[]).await?;
    let (reader, mut writer) = tokio::io::split(tls);
    let mut lines = BufReader::new(reader).lines();
    let greeting = bounded(lines.next_line()).await?.unwrap_or_default();
    writer.write_all(b"ping\n").await?;
    let echo = bounded(lines.next_line()).await?.unwrap_or_default();
    Ok((presented, greeting, echo))
}

fn gateway(terminate_port: u16) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "edge", "namespace": "default"},
        "spec": {
            "gatewayClassName": "sluice",
            "listeners": [
                {"name": "pass", "port": 443, "protocol": "TLS", "hostname": "*.pass.example",
                 "tls": {"mode": "Passthrough"}},
                {"name": "term", "port": terminate_port, "protocol": "TLS",
                 "hostname": "term.example",
                 "tls": {"mode": "Terminate", "certificateRefs": [{"name": "term-tls"}]}},
            ],
        },
    })
}

fn tls_route(name: &str, section: &str, host: &str, service: &str, port: u16) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "TLSRoute",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "parentRefs": [{"name": "edge", "sectionName": section}],
            "hostnames": [host],
            "rules": [{"backendRefs": [{"name": service, "port": port}]}],
        },
    })
}

#[tokio::test]
async fn tls_routes_pass_through_or_terminate_by_server_name() {
    let ca = TestCa::new();
    let backend_leaf = ca.leaf(&["a.pass.example"]);
    let term_leaf = ca.leaf(&["term.example"]);
    let web_leaf = ca.leaf(&["web.example"]);
    let secure = line_backend("secure", Some(&backend_leaf)).await;
    let plain = line_backend("plain", None).await;
    let echo = start_backend("echo").await;
    let port = free_tcp_port();
    let mut objects = vec![
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": "sluice"},
            "spec": {"controllerName": "sluice.dev/gateway-controller"},
        }),
        gateway(port),
        tls_route("pass", "pass", "a.pass.example", "secure", 8443),
        tls_route("term", "term", "term.example", "plain", 3000),
        tls_secret("term-tls", &term_leaf),
        service("secure", &[("http", 8443)]),
        service("plain", &[("http", 3000)]),
        service("echo", &[("http", 80)]),
        ingress(
            "web",
            json!({
                "tls": [{"hosts": ["web.example"], "secretName": "web-tls"}],
                "rules": [rule("web.example", vec![path("/", "Prefix", to("echo"))])],
            }),
        ),
        tls_secret("web-tls", &web_leaf),
    ];
    objects.extend(slices("secure", &[secure]));
    objects.extend(slices("plain", &[plain]));
    objects.extend(slices("echo", &[addr_of(&echo)]));
    let mut h = Harness::start();
    h.apply(&objects);
    let terminated = SocketAddr::from((LOCALHOST, port));

    // Passthrough: the backend's own certificate and greeting, still TLS there.
    let (presented, greeting, echoed) = exchange(&ca, h.https(), "a.pass.example").await.unwrap();
    assert_eq!(presented, backend_leaf.der);
    assert_eq!(
        (greeting.as_str(), echoed.as_str()),
        ("secure over tls", "secure: ping")
    );
    // Terminate: the listener's certificate; the backend got the bytes in the clear.
    let (presented, greeting, echoed) = exchange(&ca, terminated, "term.example").await.unwrap();
    assert_eq!(presented, term_leaf.der);
    assert_eq!(
        (greeting.as_str(), echoed.as_str()),
        ("plain over plain", "plain: ping")
    );

    // No route for the name: refused on the TLS-only port; on 443 the Ingresses' HTTPS
    // listener terminates it as before.
    assert!(exchange(&ca, terminated, "other.example").await.is_err());
    assert!(exchange(&ca, h.https(), "b.pass.example").await.is_err());
    let (_, presented) = ca
        .connect(h.https(), "web.example", &[b"http/1.1"])
        .await
        .expect("web.example is terminated by Sluice");
    assert_eq!(presented, web_leaf.der);

    let config = get(h.status(), "localhost", "/config").await.json();
    let tables = &config["config"]["tls_routes"];
    assert_eq!(
        tables["443"]["a.pass.example"],
        "default/secure:http (passthrough)"
    );
    assert_eq!(
        tables[port.to_string()]["term.example"],
        "default/plain:http (terminate)"
    );

    // A reference that cannot be used: a diagnostic, and the name's connections are closed.
    objects[3] = tls_route("term", "term", "term.example", "missing", 3000);
    let compiled = h.apply_allowing_diagnostics(&objects);
    let said: Vec<String> = compiled
        .diagnostics
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        said.iter()
            .any(|d| d.starts_with("TLSRoute default/term: missing: spec.rules[0].backendRefs[0]: Service default/missing not found")),
        "{said:?}"
    );
    eventually_async(STEP, "the route's connections to be closed", || async {
        exchange(&ca, terminated, "term.example").await.is_err()
    })
    .await;
    // The other route is untouched.
    let (_, greeting, _) = exchange(&ca, h.https(), "a.pass.example").await.unwrap();
    assert_eq!(greeting, "secure over tls");
}

/// A terminated TLSRoute whose backend a BackendTLSPolicy covers: the bytes go to the endpoint
/// over TLS again, verified against the policy's CA and hostname; a backend certificate the
/// policy does not trust closes the connection instead of relaying in the clear.
#[tokio::test]
async fn a_terminated_tls_route_re_encrypts_to_a_backend_tls_policy_s_backend() {
    use crate::backend_tls::{ca_config_map, policy, with_ca};
    let ca = TestCa::new();
    let backend_ca = TestCa::new();
    let term_leaf = ca.leaf(&["term.example"]);
    let backend_leaf = backend_ca.leaf(&["backend.internal"]);
    let secure = line_backend("secure", Some(&backend_leaf)).await;
    let port = free_tcp_port();
    let mut objects = testkit::objects::gateway_edge("default");
    objects[1] = gateway(port);
    objects.extend([
        tls_route("term", "term", "term.example", "secure", 8443),
        tls_secret("term-tls", &term_leaf),
        service("secure", &[("http", 8443)]),
        ca_config_map("backend-ca", &backend_ca),
        policy(
            "secure",
            with_ca("backend-ca", json!({"hostname": "backend.internal"})),
        ),
    ]);
    objects.extend(slices("secure", &[secure]));
    let mut h = Harness::start();
    h.apply(&objects);
    let terminated = SocketAddr::from((LOCALHOST, port));

    let (presented, greeting, echoed) = exchange(&ca, terminated, "term.example").await.unwrap();
    assert_eq!(presented, term_leaf.der);
    assert_eq!(
        (greeting.as_str(), echoed.as_str()),
        ("secure over tls", "secure: ping")
    );

    // The policy names a hostname the backend's certificate does not carry: closed.
    let at = (objects.iter())
        .position(|o| o["kind"] == "BackendTLSPolicy")
        .unwrap();
    objects[at] = policy(
        "secure",
        with_ca("backend-ca", json!({"hostname": "other.internal"})),
    );
    h.apply(&objects);
    assert!(exchange(&ca, terminated, "term.example").await.is_err());
}
