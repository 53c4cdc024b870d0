//! UDP services (`--udp-services-configmap`): a ConfigMap entry opens a UDP port whose
//! datagrams reach the Service's endpoints as sessions (one per client), answers come back
//! from the port, `proxy-stream-responses` ends a session, a removed endpoint's client moves
//! to a current one, and max-worker-connections bounds the sessions. Real UDP sockets on
//! 127.0.0.1.

use std::net::SocketAddr;
use std::time::Duration;

use crate::support::*;
use model::NamespacedName;
use serde_json::{json, Value};
use tokio::net::UdpSocket;

/// A UDP backend that answers each datagram with `NAME:payload`, `answers` times.
pub(crate) async fn echo(name: &'static str, answers: usize) -> SocketAddr {
    let socket = UdpSocket::bind((LOCALHOST, 0)).await.unwrap();
    let addr = socket.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buffer = vec![0; 65_536];
        while let Ok((len, from)) = socket.recv_from(&mut buffer).await {
            let mut answer = format!("{name}:").into_bytes();
            answer.extend_from_slice(&buffer[..len]);
            for _ in 0..answers {
                let _ = socket.send_to(&answer, from).await;
            }
        }
    });
    addr
}

/// Service `dns` (UDP port `dns` 53), its endpoints, the UDP ConfigMap and settings.
fn objects(endpoints: &[SocketAddr], port: u16, data: &[(&str, &str)]) -> Vec<Value> {
    let mut service = service("dns", &[("dns", 53)]);
    service["spec"]["ports"][0]["protocol"] = json!("UDP");
    let mut objects = vec![
        service,
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "udp", "namespace": "sluice"},
            "data": {port.to_string(): "default/dns:53"},
        }),
        settings(data),
    ];
    for endpoint in endpoints {
        objects.push(json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": format!("dns-{}", endpoint.port()), "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "dns"}},
            "addressType": "IPv4",
            "ports": [{"name": "dns", "port": endpoint.port(), "protocol": "UDP"}],
            "endpoints": [{"addresses": ["127.0.0.1"]}],
        }));
    }
    objects
}

fn harness() -> Harness {
    let mut h = Harness::with_workers(1);
    h.control.options.udp_services_config_map = Some(NamespacedName::new("sluice", "udp"));
    h
}

/// A UDP port on 127.0.0.1 that nothing uses now.
/// A client socket; `ask` sends a datagram to `port` and returns the answer (none within 2 s:
/// `None`).
struct Client(UdpSocket);

impl Client {
    async fn new() -> Client {
        Client(UdpSocket::bind((LOCALHOST, 0)).await.unwrap())
    }

    async fn ask(&self, port: u16, text: &str) -> Option<String> {
        self.0
            .send_to(text.as_bytes(), (LOCALHOST, port))
            .await
            .unwrap();
        self.answer().await
    }

    async fn answer(&self) -> Option<String> {
        let mut buffer = vec![0; 65_536];
        let (len, _) = tokio::time::timeout(Duration::from_secs(2), self.0.recv_from(&mut buffer))
            .await
            .ok()?
            .ok()?;
        Some(String::from_utf8_lossy(&buffer[..len]).into_owned())
    }
}

#[tokio::test]
async fn datagrams_are_answered_through_the_port_and_each_answer_ends_its_session() {
    let dns = echo("dns-1", 1).await;
    let mut h = harness();
    let port = free_udp_port();
    h.apply(&objects(&[dns], port, &[]));

    let (a, b) = (Client::new().await, Client::new().await);
    // The port opens at the publish: the first datagram may come before it is bound.
    eventually_async(STEP, "the UDP port to answer", || async {
        a.ask(port, "ping").await.as_deref() == Some("dns-1:ping")
    })
    .await;
    assert_eq!(b.ask(port, "hello").await.as_deref(), Some("dns-1:hello"));
    // proxy-stream-responses 1 (ingress-nginx's default): each answer ended its session, so
    // the same client's next datagram is a session of its own.
    assert_eq!(a.ask(port, "again").await.as_deref(), Some("dns-1:again"));
    let labels = format!("port=\"{port}\",upstream=\"udp-default-dns-53\"");
    eventually_async(STEP, "three sessions counted, none open", || async {
        let metrics = get(h.admin(), "admin", "/metrics").await.text();
        metrics.lines().any(|l| {
            l.starts_with(&format!("sluice_udp_sessions_total{{{labels}}} "))
                && l.split(' ').nth(1).and_then(|n| n.parse::<u64>().ok()) >= Some(3)
        }) && metrics.contains(&format!("sluice_udp_sessions_active{{{labels}}} 0\n"))
    })
    .await;
    eventually_async(STEP, "a UDP log line", || async {
        h.access_lines()
            .iter()
            .any(|l| l.starts_with("[127.0.0.1] [") && l.contains("] UDP 200 11 5 "))
    })
    .await;
    let config = get(h.status(), "status", "/config").await.json();
    assert_eq!(
        config["config"]["udp_services"][port.to_string()]["service"],
        "default/dns:53"
    );
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn a_session_whose_endpoint_left_moves_its_client_to_a_current_one() {
    // Two answers expected per datagram, one given: the session stays open.
    let (old, new) = (echo("old", 1).await, echo("new", 1).await);
    let mut h = harness();
    let port = free_udp_port();
    let data = [("proxy-stream-responses", "2")];
    h.apply(&objects(&[old], port, &data));
    let client = Client::new().await;
    eventually_async(STEP, "the UDP port to answer", || async {
        client.ask(port, "one").await.as_deref() == Some("old:one")
    })
    .await;
    let labels = format!("port=\"{port}\",upstream=\"udp-default-dns-53\"");
    assert_metric(&h, &format!("sluice_udp_sessions_active{{{labels}}} 1")).await;

    // The endpoint is replaced (the fast path): the client's next datagram goes to the new one.
    h.update(&objects(&[new], port, &data));
    eventually_async(STEP, "the new endpoint to answer", || async {
        client.ask(port, "two").await.as_deref() == Some("new:two")
    })
    .await;
    assert_metric(
        &h,
        &format!("sluice_udp_sessions_failed_total{{{labels},reason=\"endpoint_removed\"}} 1"),
    )
    .await;
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn max_worker_connections_bounds_the_sessions_and_a_refusing_endpoint_fails_one() {
    let dns = echo("dns-1", 1).await;
    let mut h = harness();
    let port = free_udp_port();
    // One connection per worker, and sessions kept open (two answers expected, one given).
    let data = [
        ("max-worker-connections", "1"),
        ("proxy-stream-responses", "2"),
    ];
    h.apply(&objects(&[dns], port, &data));
    let (a, b) = (Client::new().await, Client::new().await);
    eventually_async(STEP, "the UDP port to answer", || async {
        a.ask(port, "first").await.as_deref() == Some("dns-1:first")
    })
    .await;
    // The worker holds its one connection: another client's datagram is dropped.
    assert_eq!(b.ask(port, "second").await, None);
    let labels = format!("port=\"{port}\",upstream=\"udp-default-dns-53\"");
    assert_metric(
        &h,
        &format!("sluice_udp_sessions_failed_total{{{labels},reason=\"limit\"}} 1"),
    )
    .await;

    // An endpoint whose port is closed: ICMP unreachable ends the session as failed (502).
    let closed = SocketAddr::from((LOCALHOST, free_udp_port()));
    h.update(&objects(&[closed], port, &[]));
    let c = Client::new().await;
    eventually_async(STEP, "a refused session", || async {
        let _ = c.ask(port, "nobody").await;
        h.access_lines()
            .iter()
            .any(|l| l.contains("] UDP 502 0 6 "))
    })
    .await;
    shutdown(h.control.proxy).await;
}
