//! Mirroring over real sockets (`mirror-target`, `mirror-host`, `mirror-request-body`): the
//! mirror gets the client's request (method, `$request_uri` expanded, `Host` from
//! `mirror-host`, the body unless it is off) while the client's answer comes from the route's
//! own backend, unchanged, whether the mirror answers, never answers or refuses connections;
//! over `mirror-max-in-flight` copies are dropped and counted.

use std::net::SocketAddr;

use crate::support::*;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;
use model::NamespacedName;
use serde_json::{json, Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

const NGINX: &str = "nginx.ingress.kubernetes.io/";

/// What a mirror received.
#[derive(Debug)]
struct Seen {
    /// Which of the mirror's connections it came on, counted from 0.
    connection: usize,
    method: String,
    target: String,
    /// Names lowercased.
    headers: Map<String, Value>,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(Value::as_str)
    }
}

/// A mirror backend that reports every request it reads; `answers`: it answers each with 200,
/// else it reads and never answers (nor closes).
async fn start_mirror(answers: bool) -> (SocketAddr, mpsc::UnboundedReceiver<Seen>) {
    let listener = TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (seen, received) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut connection = 0;
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve_mirror(stream, connection, seen.clone(), answers));
            connection += 1;
        }
    });
    (addr, received)
}

async fn serve_mirror(
    mut stream: TcpStream,
    connection: usize,
    seen: mpsc::UnboundedSender<Seen>,
    answers: bool,
) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let head_end = loop {
            if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                break end + 4;
            }
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        };
        let text = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
        let mut lines = text.split("\r\n");
        let mut request_line = lines.next().unwrap_or("").split(' ');
        let method = request_line.next().unwrap_or("").to_owned();
        let target = request_line.next().unwrap_or("").to_owned();
        let mut headers = Map::new();
        for line in lines.take_while(|l| !l.is_empty()) {
            if let Some((name, value)) = line.split_once(':') {
                headers.insert(name.trim().to_ascii_lowercase(), json!(value.trim()));
            }
        }
        let length: usize = headers
            .get("content-length")
            .and_then(|v| v.as_str()?.parse().ok())
            .unwrap_or(0);
        while buffer.len() < head_end + length {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        }
        let body = buffer[head_end..head_end + length].to_vec();
        buffer.drain(..head_end + length);
        let _ = seen.send(Seen {
            connection,
            method,
            target,
            headers,
            body,
        });
        if !answers {
            // Holds the connection open, answering nothing, until the proxy gives up on it.
            while matches!(stream.read(&mut chunk).await, Ok(n) if n > 0) {}
            return;
        }
        let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nmirror";
        if stream.write_all(answer).await.is_err() {
            return;
        }
    }
}

fn site(name: &str, host: &str, annotations: &[(&str, &str)]) -> Value {
    let map: Map<String, Value> = annotations
        .iter()
        .map(|(k, v)| (format!("{NGINX}{k}"), json!(v)))
        .collect();
    annotated_site(name, host, "web", Value::Object(map))
}

/// A harness of one worker (so `mirror-max-in-flight` is one count), the `web` backend, the
/// ConfigMap `config` and these sites.
async fn harness(config: &[(&str, &str)], sites: Vec<Value>) -> (Harness, backend::Backend) {
    let web = start_backend("web").await;
    let mut h = Harness::with_workers(1);
    h.control.options.config_map = NamespacedName::new("sluice", "sluice");
    let mut objects = vec![settings(config), service("web", &[("http", 80)])];
    objects.extend(slices("web", &[addr_of(&web)]));
    objects.extend(sites);
    h.apply(&objects);
    (h, web)
}

/// A mirror (answering or not) and the site `shop.example` mirroring to `target` (`MIRROR`
/// stands for the mirror's address) with these annotations besides, under ConfigMap `config`.
struct Mirrored {
    h: Harness,
    _web: backend::Backend,
    received: mpsc::UnboundedReceiver<Seen>,
}

async fn mirrored(
    answers: bool,
    target: &str,
    annotations: &[(&str, &str)],
    config: &[(&str, &str)],
) -> Mirrored {
    let (mirror, received) = start_mirror(answers).await;
    let target = target.replace("MIRROR", &mirror.to_string());
    let mut annotations = annotations.to_vec();
    annotations.push(("mirror-target", &target));
    let (h, _web) = harness(config, vec![site("shop", "shop.example", &annotations)]).await;
    Mirrored { h, _web, received }
}

fn post(host: &str, target: &str, body: &'static str) -> Request<Full<Bytes>> {
    Request::post(target)
        .header("host", host)
        .header("x-user", "ann")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap()
}

/// Waits for `/metrics` to have this exact line: copies are counted when they end, after the
/// client's answer.
async fn eventually_metric(h: &Harness, line: &str) {
    eventually_async(STEP, line, || async {
        let metrics = get(h.admin(), "admin", "/metrics").await.text();
        metrics.lines().any(|l| l == line)
    })
    .await;
}

async fn next(received: &mut mpsc::UnboundedReceiver<Seen>) -> Seen {
    bounded(received.recv())
        .await
        .expect("the mirror got a request")
}

#[tokio::test]
async fn the_mirror_gets_the_client_s_request_and_the_client_the_route_s_answer() {
    let hosted = [("mirror-host", "copy.example")];
    let Mirrored {
        h,
        mut received,
        _web,
    } = mirrored(true, "http://MIRROR$request_uri", &hosted, &[]).await;
    let mut client = Client::connect(h.http()).await;
    let reply = client
        .send(post("shop.example", "/echo/a?b=1", "hello"))
        .await
        .unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.backend(), "web");
    assert_eq!(reply.json()["body_bytes"], 5);

    let seen = next(&mut received).await;
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.target, "/echo/a?b=1");
    assert_eq!(seen.header("host"), Some("copy.example"));
    assert_eq!(seen.header("x-user"), Some("ann"));
    assert_eq!(seen.body, b"hello");
    // The client's headers only, as nginx's mirror location sends them.
    assert_eq!(seen.header("x-forwarded-for"), None);
    eventually_metric(&h, "sluice_mirror_requests_total{outcome=\"sent\"} 1").await;
}

#[tokio::test]
async fn copies_to_an_address_reuse_the_pooled_connection() {
    let Mirrored {
        h,
        mut received,
        _web,
    } = mirrored(true, "http://MIRROR$request_uri", &[], &[]).await;
    for n in 1..=3 {
        let reply = get(h.http(), "shop.example", "/echo/x").await;
        assert_eq!(reply.status, StatusCode::OK);
        // Counted once the mirror's answer is read and its connection back in the pool.
        let sent = format!("sluice_mirror_requests_total{{outcome=\"sent\"}} {n}");
        eventually_metric(&h, &sent).await;
        assert_eq!(next(&mut received).await.connection, 0);
    }
}

#[tokio::test]
async fn without_the_request_body_the_copy_has_none_and_the_host_is_the_target_s() {
    let off = [("mirror-request-body", "off")];
    let Mirrored {
        h,
        mut received,
        _web,
    } = mirrored(true, "http://MIRROR/shadow", &off, &[]).await;
    let reply = Client::connect(h.http())
        .await
        .send(post("shop.example", "/echo/a?b=1", "hello"))
        .await
        .unwrap();
    assert_eq!(reply.json()["body_bytes"], 5);
    let seen = next(&mut received).await;
    assert_eq!(seen.method, "POST");
    // No variables: the target's path with the client's query.
    assert_eq!(seen.target, "/shadow?b=1");
    assert_eq!(seen.header("host"), Some("127.0.0.1"));
    assert!(seen.body.is_empty());
}

#[tokio::test]
async fn a_streamed_body_reaches_both_the_backend_and_the_mirror() {
    let streamed = [("proxy-request-buffering", "off")];
    let Mirrored {
        h,
        mut received,
        _web,
    } = mirrored(true, "http://MIRROR$request_uri", &streamed, &[]).await;
    let body = "x".repeat(100_000).leak();
    let reply = Client::connect(h.http())
        .await
        .send(post("shop.example", "/echo/upload", body))
        .await
        .unwrap();
    assert_eq!(reply.json()["body_bytes"], 100_000);
    let seen = next(&mut received).await;
    assert_eq!(seen.target, "/echo/upload");
    assert_eq!(seen.body.len(), 100_000);
}

#[tokio::test]
async fn the_mirror_goes_to_a_service_s_endpoints() {
    let (mirror, mut received) = start_mirror(true).await;
    let sites = vec![
        service("shadow", &[("http", 80)]),
        slices("shadow", &[mirror]).remove(0),
        site(
            "shop",
            "shop.example",
            &[(
                "mirror-target",
                "http://shadow.default.svc.cluster.local$request_uri",
            )],
        ),
    ];
    let (h, _web) = harness(&[], sites).await;
    let reply = get(h.http(), "shop.example", "/echo/x").await;
    assert_eq!(reply.backend(), "web");
    let seen = next(&mut received).await;
    assert_eq!(
        (seen.method.as_str(), seen.target.as_str()),
        ("GET", "/echo/x")
    );
    assert_eq!(
        seen.header("host"),
        Some("shadow.default.svc.cluster.local")
    );
}

#[tokio::test]
async fn a_mirror_that_never_answers_delays_no_request() {
    let Mirrored {
        h,
        mut received,
        _web,
    } = mirrored(false, "http://MIRROR$request_uri", &[], &[]).await;
    // One keep-alive connection: nginx would hold the second request until the first's mirror
    // answered; the mirror here never does.
    let mut client = Client::connect(h.http()).await;
    for n in 0..3 {
        let reply = client
            .send(post("shop.example", &format!("/echo/{n}"), "hi"))
            .await
            .unwrap();
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.json()["path"], format!("/echo/{n}"));
        let seen = next(&mut received).await;
        assert_eq!(seen.body, b"hi");
    }
    assert_metric(&h, "sluice_mirror_requests_total{outcome=\"sent\"} 0").await;
}

#[tokio::test]
async fn a_mirror_that_refuses_connections_fails_no_request() {
    let target = format!("http://{}$request_uri", closed_port());
    let sites = vec![site("shop", "shop.example", &[("mirror-target", &target)])];
    let (h, _web) = harness(&[], sites).await;
    let mut client = Client::connect(h.http()).await;
    for _ in 0..2 {
        let reply = client
            .send(post("shop.example", "/echo/x", "hi"))
            .await
            .unwrap();
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.backend(), "web");
    }
    eventually_metric(&h, "sluice_mirror_requests_total{outcome=\"failed\"} 2").await;
}

#[tokio::test]
async fn over_the_in_flight_cap_copies_are_dropped_and_counted() {
    let cap = [("mirror-max-in-flight", "1")];
    let Mirrored {
        h,
        mut received,
        _web,
    } = mirrored(false, "http://MIRROR$request_uri", &[], &cap).await;
    let mut client = Client::connect(h.http()).await;
    for _ in 0..3 {
        let reply = client.get("shop.example", "/echo/x").await;
        assert_eq!(reply.status, StatusCode::OK);
    }
    // The first copy holds the one place (its mirror never answers): the others are dropped.
    next(&mut received).await;
    assert_metric(&h, "sluice_mirror_requests_total{outcome=\"dropped\"} 2").await;
    assert!(received.try_recv().is_err(), "only one copy went out");
}

/// An HTTP/2 client's request (its host in `:authority`, cookies in separate fields, a body
/// streamed in DATA frames) reaches the mirror as the HTTP/1.1 request it stands for.
#[tokio::test]
async fn an_http2_client_s_request_is_mirrored_as_http1() {
    let config = [("use-h2c", "true")];
    let streamed = [("proxy-request-buffering", "off")];
    let Mirrored {
        h,
        mut received,
        _web,
    } = mirrored(true, "http://MIRROR$request_uri", &streamed, &config).await;
    let stream = TcpStream::connect(h.http()).await.unwrap();
    let mut client = H2Client::over(stream).await;
    let request = Request::post("http://shop.example/echo/h2?q=1")
        .header("cookie", "a=1")
        .header("cookie", "b=2")
        .body(Full::new(Bytes::from_static(b"over h2")))
        .unwrap();
    let reply = client.send(request).await.unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["body_bytes"], 7);
    let seen = next(&mut received).await;
    assert_eq!(
        (seen.method.as_str(), seen.target.as_str()),
        ("POST", "/echo/h2?q=1")
    );
    assert_eq!(seen.header("host"), Some("127.0.0.1"));
    assert_eq!(seen.header("cookie"), Some("a=1; b=2"));
    assert_eq!(seen.body, b"over h2");
}
