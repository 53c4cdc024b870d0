//! Gateways with addresses of their own (`--gateway-address-pool`) over real sockets. The
//! proxy listens on 0.0.0.0 (port 0): a socket bound on 127.0.0.1 gets no connection to
//! 127.0.0.2, but a wildcard one gets them all, and the pool's addresses 127.0.0.2 and
//! 127.0.0.3 are loopback addresses on Linux, so only this machine's clients reach it. Each
//! Gateway's address answers with its own routes and certificate; the Ingress's host stays on
//! every other address.

use std::net::{IpAddr, SocketAddr};

use crate::support::*;
use serde_json::{json, Value};
use translate::CompileOptions;

const A: [u8; 4] = [127, 0, 0, 2];
const B: [u8; 4] = [127, 0, 0, 3];

fn gateway(name: &str) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "gatewayClassName": "sluice",
            "listeners": [
                {"name": "http", "port": 80, "protocol": "HTTP"},
                {"name": "https", "port": 443, "protocol": "HTTPS",
                 "tls": {"certificateRefs": [{"name": format!("{name}-tls")}]}},
            ],
        },
    })
}

/// A route for every host and `/` of Gateway `name`, to Service `name`.
fn route(name: &str) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "parentRefs": [{"name": name}],
            "rules": [{"backendRefs": [{"name": name, "port": 80}]}],
        },
    })
}

fn at(ip: [u8; 4], port: u16) -> SocketAddr {
    SocketAddr::from((ip, port))
}

#[tokio::test]
async fn each_gateway_address_serves_its_own_routes_and_certificate() {
    let backends = [
        start_backend("a").await,
        start_backend("b").await,
        start_backend("legacy").await,
    ];
    let ca = TestCa::new();
    // Both certificates are for every name under example.com: only their keys tell them apart.
    let (leaf_a, leaf_b) = (ca.leaf(&["*.example.com"]), ca.leaf(&["*.example.com"]));
    let mut objects = vec![
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": "sluice"},
            "spec": {"controllerName": "sluice.dev/gateway-controller"},
        }),
        gateway("a"),
        gateway("b"),
        route("a"),
        route("b"),
        tls_secret("a-tls", &leaf_a),
        tls_secret("b-tls", &leaf_b),
        ingress(
            "legacy",
            json!({"rules": [rule("legacy.example.com", vec![path("/", "Prefix", to("legacy"))])]}),
        ),
    ];
    for (name, backend) in ["a", "b", "legacy"].into_iter().zip(&backends) {
        objects.push(service(name, &[("http", 80)]));
        objects.extend(slices(name, &[addr_of(backend)]));
    }
    let options = CompileOptions {
        gateway_address_pool: Some("127.0.0.2-127.0.0.3".parse().unwrap()),
        ..CompileOptions::default()
    };
    let mut h = Harness::listening(IpAddr::from([0, 0, 0, 0]), 2, options);
    let compiled = h.apply(&objects);
    let addresses: Vec<String> = ["a", "b"]
        .iter()
        .map(|g| {
            let status =
                &compiled.gateway_status.gateways[&model::NamespacedName::new("default", *g)];
            status
                .addresses
                .own
                .expect("an address of its own")
                .to_string()
        })
        .collect();
    assert_eq!(addresses, ["127.0.0.2", "127.0.0.3"]);
    let (http, https) = (h.http().port(), h.https().port());

    // Plain HTTP: each address its Gateway's route, the Ingress's host nowhere but the shared
    // site, and the Gateways' routes not there.
    let answers = [
        (at(A, http), "x.example.com", Some("a")),
        (at(B, http), "x.example.com", Some("b")),
        (at(A, http), "legacy.example.com", Some("a")),
        (
            at(LOCALHOST.octets(), http),
            "legacy.example.com",
            Some("legacy"),
        ),
        (at(LOCALHOST.octets(), http), "x.example.com", None),
    ];
    for (addr, host, expected) in answers {
        let reply = get(addr, host, "/echo").await;
        match expected {
            Some(backend) => assert_eq!(reply.backend(), backend, "{addr} {host}"),
            None => assert_eq!(reply.status.as_u16(), 404, "{addr} {host}"),
        }
    }

    // HTTPS: each address's handshake presents its Gateway's certificate for `*`.
    for (ip, leaf, backend) in [(A, &leaf_a, "a"), (B, &leaf_b, "b")] {
        let (tls, presented) = ca
            .connect(at(ip, https), "x.example.com", &[b"http/1.1"])
            .await
            .expect("handshake");
        assert_eq!(presented, leaf.der, "{backend}'s certificate");
        let reply = Client::over(tls).await.get("x.example.com", "/echo").await;
        assert_eq!(reply.backend(), backend);
    }

    // /config shows each site.
    let config = get(h.status(), "localhost", "/config").await.json();
    let config = &config["config"];
    let site = &config["sites"]["127.0.0.3"];
    assert_eq!(site["certificates"]["*"], "default/b-tls", "{site:#}");
    assert!(config["hosts"].get("*").is_none(), "{:#}", config["hosts"]);

    // Without the Gateway, its address falls back to the shared site.
    objects.retain(|o| o["metadata"]["name"] != "b" || o["kind"] == "Service");
    h.apply(&objects);
    let reply = get(at(B, http), "legacy.example.com", "/echo").await;
    assert_eq!(reply.backend(), "legacy");
}

#[tokio::test]
async fn a_listener_on_another_port_serves_only_its_routes_once_its_port_is_free_until_it_goes() {
    let (web, alt) = (start_backend("web").await, start_backend("alt").await);
    let port = free_tcp_port();
    let gateway = |listeners: Value| {
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "edge", "namespace": "default"},
            "spec": {"gatewayClassName": "sluice", "listeners": listeners},
        })
    };
    let attached = |name: &str, section: &str, rules: Value| {
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"parentRefs": [{"name": "edge", "sectionName": section}], "rules": rules},
        })
    };
    let both = json!([
        {"name": "http", "port": 80, "protocol": "HTTP"},
        {"name": "alt", "port": port, "protocol": "HTTP"},
    ]);
    let mut objects = vec![
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": "sluice"},
            "spec": {"controllerName": "sluice.dev/gateway-controller"},
        }),
        gateway(both),
        attached(
            "web",
            "http",
            json!([{"backendRefs": [{"name": "web", "port": 80}]}]),
        ),
        attached(
            "alt",
            "alt",
            json!([
                {"backendRefs": [{"name": "alt", "port": 80}]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/moved"}}],
                 "filters": [{"type": "RequestRedirect",
                              "requestRedirect": {"hostname": "elsewhere.example.com"}}]},
            ]),
        ),
    ];
    for (name, backend) in [("web", &web), ("alt", &alt)] {
        objects.push(service(name, &[("http", 80)]));
        objects.extend(slices(name, &[addr_of(backend)]));
    }
    let mut h = Harness::start();
    // Another program holds the declared port at first (without SO_REUSEPORT): the port is
    // reported on /config while the other listeners serve, and bound once it is let go, with
    // no configuration change (the harness retries every 200 ms).
    let holder = std::net::TcpListener::bind((LOCALHOST, port)).unwrap();
    h.apply(&objects);
    let extra = SocketAddr::from((LOCALHOST, port));
    assert_eq!(
        get(h.http(), "x.example.com", "/echo").await.backend(),
        "web"
    );
    let config = get(h.status(), "localhost", "/config").await.json();
    let errors = config["tcp_service_errors"].as_array().unwrap();
    assert!(
        errors.len() == 1
            && (errors[0].as_str().unwrap())
                .starts_with(&format!("Gateway listener port {port}: cannot listen")),
        "{errors:?}"
    );
    drop(holder);
    eventually_async(STEP, "the freed declared port to be bound", || async {
        let config = get(h.status(), "localhost", "/config").await.json();
        config["tcp_service_errors"].as_array().unwrap().is_empty()
    })
    .await;
    assert_eq!(get(extra, "x.example.com", "/echo").await.backend(), "alt");
    // A redirect without a port names the listener's declared one.
    let reply = get(extra, "x.example.com", "/moved/here").await;
    assert_eq!(reply.status.as_u16(), 302);
    let expected = format!("http://elsewhere.example.com:{port}/moved/here");
    assert_eq!(reply.headers["location"], expected.as_str());
    let config = get(h.status(), "localhost", "/config").await.json();
    assert_eq!(config["config"]["declared_ports"][port.to_string()], "http");

    // The listener gone, its port closes.
    objects[1] = gateway(json!([{"name": "http", "port": 80, "protocol": "HTTP"}]));
    h.apply_allowing_diagnostics(&objects);
    eventually_async(STEP, "the declared port to close", || async {
        tokio::net::TcpStream::connect(extra).await.is_err()
    })
    .await;
    assert_eq!(
        get(h.http(), "x.example.com", "/echo").await.backend(),
        "web"
    );
}
