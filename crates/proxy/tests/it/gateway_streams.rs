//! Gateway TCP and UDP listeners with TCPRoutes and UDPRoutes over real sockets on 127.0.0.1:
//! a TCPRoute's connections reach its backend (weights roughly honoured, a weight-0 backend
//! none), a UDPRoute's datagrams are answered through the listener's port, the newer of two
//! routes on one listener gets nothing, and a route removed closes its port without touching
//! another port's open connection. The same stream proxy as `--tcp-services-configmap`.

use std::net::SocketAddr;
use std::time::Duration;

use crate::support::*;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

/// A TCP backend that greets with its name, then echoes lines.
async fn tcp_backend(name: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(echo_lines(stream, name, name));
        }
    });
    addr
}

/// The greeting of a new connection to `port` (`None`: refused or closed at once).
async fn greeting(port: u16) -> Option<(String, TcpStream)> {
    let stream = TcpStream::connect((LOCALHOST, port)).await.ok()?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    let read = tokio::time::timeout(Duration::from_secs(2), reader.read_line(&mut line));
    match read.await {
        Ok(Ok(n)) if n > 0 => Some((line.trim_end().to_owned(), reader.into_inner())),
        _ => None,
    }
}

/// One datagram to `port` from a new socket (a session of its own), and its answer.
async fn ask(port: u16, text: &str) -> Option<String> {
    let socket = UdpSocket::bind((LOCALHOST, 0)).await.unwrap();
    socket
        .send_to(text.as_bytes(), (LOCALHOST, port))
        .await
        .unwrap();
    let mut buffer = vec![0; 65_536];
    let (len, _) = tokio::time::timeout(Duration::from_secs(2), socket.recv_from(&mut buffer))
        .await
        .ok()?
        .ok()?;
    Some(String::from_utf8_lossy(&buffer[..len]).into_owned())
}

fn gateway(tcp: [u16; 2], udp: u16) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "edge", "namespace": "default"},
        "spec": {
            "gatewayClassName": "sluice",
            "listeners": [
                {"name": "tcp-1", "port": tcp[0], "protocol": "TCP"},
                {"name": "tcp-2", "port": tcp[1], "protocol": "TCP"},
                {"name": "udp", "port": udp, "protocol": "UDP"},
            ],
        },
    })
}

fn route(kind: &str, name: &str, section: &str, refs: Value) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "parentRefs": [{"name": "edge", "sectionName": section}],
            "rules": [{"backendRefs": refs}],
        },
    })
}

/// Each Service with TCP port `tcp` 3000 and its one endpoint.
fn tcp_services(backends: &[(&str, SocketAddr)]) -> Vec<Value> {
    let mut objects = Vec::new();
    for (name, addr) in backends {
        let mut slice = slices(name, &[*addr]).remove(0);
        slice["ports"][0]["name"] = json!("tcp");
        objects.extend([service(name, &[("tcp", 3000)]), slice]);
    }
    objects
}

fn udp_slice(service: &str, addr: SocketAddr) -> Value {
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{service}-{}", addr.port()), "namespace": "default",
                     "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "ports": [{"name": "dns", "port": addr.port(), "protocol": "UDP"}],
        "endpoints": [{"addresses": ["127.0.0.1"]}],
    })
}

#[tokio::test]
async fn tcp_and_udp_routes_forward_by_weight_and_a_removed_route_leaves_other_ports_alone() {
    let (a, b, zero) = (
        tcp_backend("a").await,
        tcp_backend("b").await,
        tcp_backend("zero").await,
    );
    let dns = crate::udp_services::echo("dns", 1).await;
    let tcp = [free_tcp_port(), free_tcp_port()];
    let udp = free_udp_port();
    let mut dns_service = service("dns", &[("dns", 53)]);
    dns_service["spec"]["ports"][0]["protocol"] = json!("UDP");
    let weighted = json!([
        {"name": "a", "port": 3000, "weight": 3},
        {"name": "b", "port": 3000, "weight": 1},
        {"name": "zero", "port": 3000, "weight": 0},
    ]);
    let mut objects = testkit::objects::gateway_edge("default");
    objects[1] = gateway(tcp, udp);
    objects.extend([
        route("TCPRoute", "split", "tcp-1", weighted),
        route(
            "TCPRoute",
            "only-b",
            "tcp-2",
            json!([{"name": "b", "port": 3000}]),
        ),
        route(
            "UDPRoute",
            "dns",
            "udp",
            json!([{"name": "dns", "port": 53}]),
        ),
        dns_service,
        udp_slice("dns", dns),
    ]);
    objects.extend(tcp_services(&[("a", a), ("b", b), ("zero", zero)]));
    let mut h = Harness::with_workers(1);
    h.apply(&objects);

    // TCP: the listener port opens at the publish; then 3:1:0 over 200 connections.
    eventually_async(STEP, "the TCP listener to answer", || async {
        greeting(tcp[0]).await.is_some()
    })
    .await;
    let mut counts = std::collections::BTreeMap::<String, u32>::new();
    for _ in 0..200 {
        let (name, _) = greeting(tcp[0])
            .await
            .expect("a connection through the TCPRoute");
        *counts.entry(name).or_default() += 1;
    }
    let (to_a, to_b) = (counts.get("a").copied(), counts.get("b").copied());
    assert!(
        to_a.is_some_and(|n| (120..=180).contains(&n)) && to_b.is_some_and(|n| n >= 20),
        "3:1 expected: {counts:?}"
    );
    assert!(
        !counts.contains_key("zero"),
        "weight 0 got traffic: {counts:?}"
    );

    // UDP: each datagram a session of its own, answered through the listener's port.
    eventually_async(STEP, "the UDP listener to answer", || async {
        ask(udp, "ping").await.as_deref() == Some("dns:ping")
    })
    .await;

    // A connection held open on the second port; then the first route goes away.
    eventually_async(STEP, "the second TCP listener to answer", || async {
        greeting(tcp[1]).await.is_some()
    })
    .await;
    let (hello, held) = greeting(tcp[1]).await.expect("the second TCP listener");
    assert_eq!(hello, "b");
    let config = get(h.status(), "localhost", "/config").await.json();
    let streams = &config["config"]["gateway_streams"];
    assert_eq!(
        streams["tcp"][tcp[1].to_string()]["service"],
        "default/b:3000"
    );
    assert_eq!(streams["udp"][udp.to_string()]["service"], "default/dns:53");
    objects.retain(|o| o["metadata"]["name"] != "split");
    h.apply(&objects);
    eventually_async(STEP, "the first port to serve nothing", || async {
        greeting(tcp[0]).await.is_none()
    })
    .await;
    let (reader, mut writer) = held.into_split();
    writer.write_all(b"still\n").await.unwrap();
    let mut lines = BufReader::new(reader).lines();
    let echoed = bounded(lines.next_line()).await.unwrap();
    assert_eq!(echoed.as_deref(), Some("b: still"));
    assert_eq!(ask(udp, "pong").await.as_deref(), Some("dns:pong"));
}

#[tokio::test]
async fn the_older_of_two_tcp_routes_keeps_the_listener_and_a_route_without_backends_closes() {
    let (old, new) = (tcp_backend("old").await, tcp_backend("new").await);
    let tcp = [free_tcp_port(), free_tcp_port()];
    let mut objects = testkit::objects::gateway_edge("default");
    objects[1] = gateway(tcp, free_udp_port());
    // Files carry no creation time: namespace/name decides, `a-older` first.
    objects.extend([
        route(
            "TCPRoute",
            "a-older",
            "tcp-1",
            json!([{"name": "old", "port": 3000}]),
        ),
        route(
            "TCPRoute",
            "b-newer",
            "tcp-1",
            json!([{"name": "new", "port": 3000}]),
        ),
        route(
            "TCPRoute",
            "broken",
            "tcp-2",
            json!([{"name": "missing", "port": 3000}]),
        ),
    ]);
    objects.extend(tcp_services(&[("old", old), ("new", new)]));
    let mut h = Harness::with_workers(1);
    let compiled = h.apply_allowing_diagnostics(&objects);
    let said: Vec<String> = (compiled.diagnostics.iter())
        .map(ToString::to_string)
        .collect();
    assert!(
        said.iter()
            .any(|d| d.starts_with("TCPRoute default/b-newer: notice: listener tcp-1")),
        "{said:?}"
    );
    assert!(
        said.iter().any(|d| d.starts_with(
            "TCPRoute default/broken: missing: spec.rules[0].backendRefs[0]: Service default/missing not found; its connections are closed"
        )),
        "{said:?}"
    );
    let status = &compiled.gateway_status;
    let listener = &status.gateways[&model::NamespacedName::new("default", "edge")].listeners[0];
    assert_eq!(listener.attached_routes, 2);
    eventually_async(STEP, "the TCP listener to answer", || async {
        greeting(tcp[0]).await.is_some()
    })
    .await;
    for _ in 0..20 {
        let (name, _) = greeting(tcp[0]).await.unwrap();
        assert_eq!(name, "old");
    }
    // The route without a usable backend: its port is open and its connections closed.
    assert!(greeting(tcp[1]).await.is_none());
}
