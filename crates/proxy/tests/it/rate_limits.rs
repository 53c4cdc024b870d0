//! Rate and connection limits (`limit-rps`, `limit-rpm`, `limit-burst-multiplier`,
//! `limit-connections`, `limit-whitelist`, the ConfigMap's status codes and key) over real
//! sockets, with ingress-nginx's semantics: nginx's leaky bucket with burst and nodelay,
//! counted once for all workers, keyed by the client the proxy trusts (never the balancer).
//!
//! The request limits use `limit-rpm`: at a few requests per minute nothing leaks while a test
//! runs, so N back-to-back requests pass exactly 1 + burst however slow the machine is.

use std::net::SocketAddr;
use std::time::Duration;

use crate::support::*;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// `web` on `addr`; Ingress `name` routing `host` (`/a` and `/b`) to it with these
/// annotations; and the ConfigMap's `data`.
fn site(
    addr: SocketAddr,
    name: &str,
    host: &str,
    annotations: &[(&str, &str)],
    data: &[(&str, &str)],
) -> Vec<Value> {
    let mut objects = vec![service("web", &[("http", 80)]), settings(data)];
    objects.extend(slices("web", &[addr]));
    objects.push(limited(name, host, annotations));
    objects
}

fn limited(name: &str, host: &str, annotations: &[(&str, &str)]) -> Value {
    let paths = vec![
        path("/a", "Prefix", to("web")),
        path("/b", "Prefix", to("web")),
    ];
    annotated(name, annotations, json!({"rules": [rule(host, paths)]}))
}

/// A proxy with `api.example.com` (Ingress `api`) on an `ok` backend.
async fn api(annotations: &[(&str, &str)], data: &[(&str, &str)]) -> Harness {
    let mut h = Harness::start();
    let addr = ok_backend().await;
    h.apply(&site(addr, "api", "api.example.com", annotations, data));
    h
}

/// A backend answering every request `ok`.
async fn ok_backend() -> SocketAddr {
    start_fixed_backend(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        .await
        .0
}

/// The statuses of `n` requests for `path` sent one after another on one connection.
async fn statuses(client: &mut Client, host: &str, path: &str, n: usize) -> Vec<u16> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(client.get(host, path).await.status.as_u16());
    }
    out
}

fn passed(statuses: &[u16]) -> usize {
    statuses.iter().filter(|s| **s == 200).count()
}

#[tokio::test]
async fn rpm_passes_one_plus_the_burst_then_answers_nginx_503_on_a_kept_connection() {
    let mut h = Harness::start();
    let addr = ok_backend().await;
    // limit-rpm 2 with the default multiplier 5: burst 10.
    let mut objects = site(addr, "api", "api.example.com", &[("limit-rpm", "2")], &[]);
    objects.push(limited("other", "other.example.com", &[("limit-rpm", "2")]));
    h.apply(&objects);

    let mut client = Client::connect(h.http()).await;
    let seen = statuses(&mut client, "api.example.com", "/a", 15).await;
    assert_eq!(seen[..11], [200; 11], "{seen:?}");
    assert_eq!(seen[11..], [503; 4], "{seen:?}");
    // nginx's page text; the connection stays open (nginx keeps it after a limit's answer).
    let refused = client.get("api.example.com", "/a").await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.text(), "503 Service Temporarily Unavailable\n");
    assert!(!client.is_closed());
    // Another path of the same Ingress shares its zone; another Ingress has its own.
    assert_eq!(
        statuses(&mut client, "api.example.com", "/b", 1).await,
        [503]
    );
    assert_eq!(
        passed(&statuses(&mut client, "other.example.com", "/a", 3).await),
        3
    );
    assert_metric(&h, "sluice_limited_requests_total{kind=\"requests\"} 6").await;
}

#[tokio::test]
async fn all_workers_count_one_limit() {
    // Two workers: fresh connections land on either (SO_REUSEPORT), and together they pass
    // what one bucket passes (limit-rpm 1, burst 5: 6), not 6 per worker.
    let mut h = Harness::with_workers(2);
    let addr = ok_backend().await;
    h.apply(&site(
        addr,
        "api",
        "api.example.com",
        &[("limit-rpm", "1")],
        &[],
    ));
    let mut seen = Vec::new();
    for _ in 0..16 {
        seen.push(get(h.http(), "api.example.com", "/a").await.status.as_u16());
    }
    assert_eq!(passed(&seen), 6, "{seen:?}");
}

#[tokio::test]
async fn burst_multiplier_allowlist_and_the_configmap_status_code() {
    let mut h = Harness::start();
    let addr = ok_backend().await;
    // Multiplier 0: one request per minute, no burst. 127.0.0.1 is exempt on `free`.
    let mut objects = site(
        addr,
        "api",
        "api.example.com",
        &[("limit-rpm", "1"), ("limit-burst-multiplier", "0")],
        &[("limit-req-status-code", "429")],
    );
    objects.push(limited(
        "free",
        "free.example.com",
        &[
            ("limit-rpm", "1"),
            ("limit-whitelist", "10.0.0.0/8, 127.0.0.1"),
        ],
    ));
    h.apply(&objects);

    let mut client = Client::connect(h.http()).await;
    assert_eq!(
        statuses(&mut client, "api.example.com", "/a", 3).await,
        [200, 429, 429]
    );
    let refused = client.get("api.example.com", "/a").await;
    assert_eq!(refused.text(), "429 Too Many Requests\n");
    assert_eq!(
        passed(&statuses(&mut client, "free.example.com", "/a", 10).await),
        10
    );
}

#[tokio::test]
async fn a_configuration_swap_keeps_the_counters() {
    let mut h = Harness::start();
    let addr = ok_backend().await;
    let objects = site(
        addr,
        "api",
        "api.example.com",
        &[("limit-rpm", "1"), ("limit-burst-multiplier", "1")],
        &[],
    );
    h.apply(&objects);
    let mut client = Client::connect(h.http()).await;
    assert_eq!(
        statuses(&mut client, "api.example.com", "/a", 3).await,
        [200, 200, 503]
    );
    // Another Ingress added and the ConfigMap changed: the same zone, still spent.
    let mut changed = site(
        addr,
        "api",
        "api.example.com",
        &[("limit-rpm", "1"), ("limit-burst-multiplier", "1")],
        &[("limit-req-status-code", "429")],
    );
    changed.push(limited("new", "new.example.com", &[]));
    h.apply(&changed);
    assert_eq!(
        statuses(&mut client, "api.example.com", "/a", 1).await,
        [429]
    );
}

/// A backend that answers `/a/hold` only once `release` says so (counting those it holds),
/// and anything else at once.
async fn gate_backend() -> (SocketAddr, tokio::sync::watch::Sender<bool>, Counts) {
    use std::sync::atomic::Ordering;
    let listener = TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (release, released) = tokio::sync::watch::channel(false);
    let counts = Counts::default();
    let held = counts.requests.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut released = released.clone();
            let held = held.clone();
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                        let hold = buffer.starts_with(b"GET /a/hold");
                        buffer.drain(..end + 4);
                        if hold {
                            held.fetch_add(1, Ordering::SeqCst);
                            let _ = released.wait_for(|r| *r).await;
                        }
                        let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                        if stream.write_all(answer).await.is_err() {
                            return;
                        }
                    }
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    (addr, release, counts)
}

/// A proxy with `api.example.com` (`limit-connections: 2`) on a [`gate_backend`], and the
/// ConfigMap's `data`.
async fn gated(data: &[(&str, &str)]) -> (Harness, tokio::sync::watch::Sender<bool>, Counts) {
    let mut h = Harness::start();
    let (addr, release, counts) = gate_backend().await;
    let annotations = [("limit-connections", "2")];
    h.apply(&site(addr, "api", "api.example.com", &annotations, data));
    (h, release, counts)
}

/// Waits until the gate holds `n` requests.
async fn held_at_backend(counts: &Counts, n: usize) {
    let what = format!("{n} requests held at the backend");
    eventually_async(Duration::from_secs(10), &what, || async {
        (counts.requests() == n).then_some(())
    })
    .await;
}

#[tokio::test]
async fn limit_connections_counts_requests_in_progress_until_they_end() {
    let (h, release, counts) = gated(&[("limit-conn-status-code", "503")]).await;
    // Two requests held by the backend, on two connections (workers may differ).
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut client = Client::connect(h.http()).await;
        held.push(tokio::spawn(async move {
            client.get("api.example.com", "/a/hold").await.status
        }));
    }
    held_at_backend(&counts, 2).await;
    // The third, from the same address, is refused while they are in progress.
    let third = get(h.http(), "api.example.com", "/b").await;
    assert_eq!(third.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(third.text(), "503 Service Temporarily Unavailable\n");
    release.send(true).unwrap();
    for request in held {
        assert_eq!(request.await.unwrap(), StatusCode::OK);
    }
    // Given back when the responses ended.
    let mut client = Client::connect(h.http()).await;
    assert_eq!(
        statuses(&mut client, "api.example.com", "/b", 3).await,
        [200, 200, 200]
    );
    assert_metric(&h, "sluice_limited_requests_total{kind=\"connections\"} 1").await;
}

/// One request with `X-Forwarded-For: forwarded` on a fresh connection.
async fn from(h: &Harness, forwarded: &str) -> u16 {
    let request = Request::get("/a")
        .header("host", "api.example.com")
        .header("x-forwarded-for", forwarded)
        .body(Full::<Bytes>::default())
        .unwrap();
    let mut client = Client::connect(h.http()).await;
    client.send(request).await.unwrap().status.as_u16()
}

#[tokio::test]
async fn behind_a_trusted_proxy_the_limit_keys_on_the_forwarded_client() {
    let mut h = Harness::start();
    let addr = ok_backend().await;
    let annotations = [("limit-rpm", "1"), ("limit-burst-multiplier", "0")];
    let trusted = [
        ("use-forwarded-headers", "true"),
        ("proxy-real-ip-cidr", "127.0.0.1/32"),
    ];
    h.apply(&site(
        addr,
        "api",
        "api.example.com",
        &annotations,
        &trusted,
    ));
    // Each client its own bucket; the proxy in front (127.0.0.1) is never the key.
    assert_eq!(from(&h, "203.0.113.7").await, 200);
    assert_eq!(from(&h, "203.0.113.8").await, 200);
    assert_eq!(from(&h, "203.0.113.7").await, 503);
    // A forged entry left of the real client changes nothing.
    assert_eq!(from(&h, "198.51.100.1, 203.0.113.8").await, 503);

    // Not trusted: the header is the client's word, the peer is the key.
    let mut h = Harness::start();
    h.apply(&site(addr, "api", "api.example.com", &annotations, &[]));
    assert_eq!(from(&h, "203.0.113.7").await, 200);
    assert_eq!(from(&h, "203.0.113.8").await, 503);
}

#[tokio::test]
async fn behind_a_proxy_protocol_balancer_the_limit_keys_on_the_client_it_names() {
    let h = api(
        &[("limit-rpm", "1"), ("limit-burst-multiplier", "1")],
        &[("use-proxy-protocol", "true")],
    )
    .await;
    let behind = |source: &'static str| {
        let proxy = h.http();
        async move {
            let mut stream = TcpStream::connect(proxy).await.unwrap();
            let header = format!("PROXY TCP4 {source} 10.0.0.1 40000 80\r\n");
            stream.write_all(header.as_bytes()).await.unwrap();
            Client::over(stream).await
        }
    };
    let mut first = behind("203.0.113.7").await;
    assert_eq!(
        statuses(&mut first, "api.example.com", "/a", 3).await,
        [200, 200, 503]
    );
    // Another client through the same balancer connection address: its own bucket.
    let mut second = behind("203.0.113.8").await;
    assert_eq!(
        statuses(&mut second, "api.example.com", "/a", 3).await,
        [200, 200, 503]
    );
    // The first client on a new connection is still spent.
    let mut again = behind("203.0.113.7").await;
    assert_eq!(
        statuses(&mut again, "api.example.com", "/a", 1).await,
        [503]
    );
}

#[tokio::test]
async fn a_header_key_limits_by_its_value_and_leaves_requests_without_it_alone() {
    let h = api(
        &[("limit-rpm", "1"), ("limit-burst-multiplier", "0")],
        &[("limit-conn-zone-variable", "$http_x_api_key")],
    )
    .await;
    let key = |value: Option<&'static str>| {
        let proxy = h.http();
        async move {
            let mut request = Request::get("/a").header("host", "api.example.com");
            if let Some(value) = value {
                request = request.header("x-api-key", value);
            }
            let request = request.body(Full::<Bytes>::default()).unwrap();
            let mut client = Client::connect(proxy).await;
            client.send(request).await.unwrap().status.as_u16()
        }
    };
    assert_eq!(key(Some("alpha")).await, 200);
    assert_eq!(key(Some("alpha")).await, 503);
    assert_eq!(key(Some("beta")).await, 200);
    for _ in 0..3 {
        assert_eq!(key(None).await, 200);
    }
}

#[tokio::test]
async fn limit_rate_paces_the_body_from_the_configmap_or_the_annotation() {
    let mut h = Harness::start();
    // 3 KiB: at 1 KB/s, nginx's first second plus two more.
    let answer = format!(
        "HTTP/1.1 200 OK\r\ncontent-length: 3072\r\n\r\n{}",
        "x".repeat(3072)
    );
    let answer: &'static [u8] = Box::leak(answer.into_bytes().into_boxed_slice());
    let addr = start_fixed_backend(answer).await.0;
    let mut objects = site(
        addr,
        "slow",
        "slow.example.com",
        &[],
        &[("limit-rate", "1")],
    );
    objects.push(limited("off", "off.example.com", &[("limit-rate", "0")]));
    objects.push(limited(
        "after",
        "after.example.com",
        &[
            ("limit-rate", "1"),
            ("limit-rate-after", "2"),
            ("proxy-buffering", "on"),
        ],
    ));
    h.apply(&objects);

    let timed = |host: &'static str| {
        let proxy = h.http();
        async move {
            let started = std::time::Instant::now();
            let reply = get(proxy, host, "/a").await;
            assert_eq!(reply.body.len(), 3072, "{host}");
            assert!(reply.body.iter().all(|b| *b == b'x'), "{host}");
            started.elapsed()
        }
    };
    // The ConfigMap's 1 KB/s: 2 s at the least (loose above: a shared machine).
    let slow = timed("slow.example.com").await;
    assert!(slow >= Duration::from_millis(1500), "{slow:?}");
    assert!(slow < Duration::from_secs(20), "{slow:?}");
    // The annotation's 0 turns it off; limit-rate-after's 2 KB go at once, the rest is
    // within the first second's allowance.
    for host in ["off.example.com", "after.example.com"] {
        let took = timed(host).await;
        assert!(took < Duration::from_millis(1500), "{host}: {took:?}");
    }
}

#[tokio::test]
async fn each_http2_stream_counts_as_one_connection() {
    let (h, release, counts) = gated(&[("use-h2c", "true")]).await;
    // One HTTP/2 connection, two streams held: nginx's limit_conn counts each.
    let stream = TcpStream::connect(h.http()).await.unwrap();
    let client = H2Client::over(stream).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut handle = client.handle();
        held.push(tokio::spawn(async move {
            handle.get("http://api.example.com/a/hold").await.status
        }));
    }
    held_at_backend(&counts, 2).await;
    let third = client.handle().get("http://api.example.com/b").await;
    assert_eq!(third.status, StatusCode::SERVICE_UNAVAILABLE);
    release.send(true).unwrap();
    for request in held {
        assert_eq!(request.await.unwrap(), StatusCode::OK);
    }
    let again = client.handle().get("http://api.example.com/b").await;
    assert_eq!(again.status, StatusCode::OK);
}
