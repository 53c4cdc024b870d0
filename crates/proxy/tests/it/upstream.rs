//! The upstream side: retries, keep-alive races, streaming, WebSocket tunnels, graceful
//! shutdown, and requests that keep succeeding while endpoints churn.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::*;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[tokio::test]
async fn a_closed_endpoint_is_retried_elsewhere_without_client_errors() {
    let live = start_backend("live").await;
    let mut h = Harness::start();
    h.apply(&catch_all("web", &[addr_of(&live), closed_port()]));

    for _ in 0..40 {
        // Fresh connections land on both workers, whose round robins both meet the dead one.
        let reply = get(h.http(), "x", "/echo").await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        assert_eq!(reply.backend(), "live");
    }
    let metrics = get(h.admin(), "a", "/metrics").await.text();
    assert!(
        !metrics.contains("sluice_upstream_connect_errors_total 0\n"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("sluice_error_responses_total{"),
        "{metrics}"
    );
}

#[tokio::test]
async fn least_request_balancing_serves_from_every_endpoint() {
    let (a, b) = (start_backend("a").await, start_backend("b").await);
    let mut h = Harness::start();
    let mut objects = catch_all("web", &[addr_of(&a), addr_of(&b)]);
    objects.push(settings(&[("load-balance", "least_request")]));
    h.apply(&objects);

    let mut client = Client::connect(h.http()).await;
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..40 {
        seen.insert(client.get("x", "/echo").await.backend());
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
}

/// An upstream that closes every keep-alive connection after a short idle time, without
/// announcing it: the classic race where a pooled connection dies as a request is sent.
async fn start_impatient_upstream(idle: Duration) -> SocketAddr {
    let listener = TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut pending = Vec::new();
                loop {
                    let read = tokio::time::timeout(idle, stream.read(&mut buf)).await;
                    let n = match read {
                        Ok(Ok(n)) if n > 0 => n,
                        _ => return, // idle too long, EOF or error: close
                    };
                    pending.extend_from_slice(&buf[..n]);
                    while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        pending.drain(..end + 4);
                        let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                        if stream.write_all(reply).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    addr
}

/// Connections an upstream has accepted in total, and how many are open now.
#[derive(Default)]
struct Counts {
    accepted: AtomicU64,
    open: AtomicU64,
}

/// A keep-alive upstream answering `ok` that counts its connections.
async fn start_counting_upstream() -> (SocketAddr, Arc<Counts>) {
    let listener = TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counts = Arc::new(Counts::default());
    let counting = counts.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            counting.accepted.fetch_add(1, Ordering::SeqCst);
            counting.open.fetch_add(1, Ordering::SeqCst);
            let counting = counting.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut pending = Vec::new();
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    pending.extend_from_slice(&buf[..n]);
                    while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        pending.drain(..end + 4);
                        let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                        if stream.write_all(reply).await.is_err() {
                            break;
                        }
                    }
                }
                counting.open.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    (addr, counts)
}

#[tokio::test]
async fn upstream_connections_are_reused_and_closed_when_their_endpoint_goes() {
    let (upstream, counts) = start_counting_upstream().await;
    let other = start_backend("other").await;
    let mut h = Harness::start();
    h.apply(&catch_all("counted", &[upstream]));

    let mut client = Client::connect(h.http()).await;
    for _ in 0..20 {
        assert_eq!(client.get("x", "/").await.status, StatusCode::OK);
    }
    // One client connection is served by one worker, which keeps one upstream connection.
    assert_eq!(counts.accepted.load(Ordering::SeqCst), 1);
    assert_eq!(counts.open.load(Ordering::SeqCst), 1);

    // The endpoint leaves the Service (fast path): its idle connection is closed.
    h.update(&catch_all("counted", &[addr_of(&other)]));
    eventually_async(
        STEP,
        "the idle connection to the removed endpoint to close",
        || {
            let open = counts.open.load(Ordering::SeqCst);
            async move { open == 0 }
        },
    )
    .await;
    assert_eq!(client.get("x", "/echo").await.backend(), "other");
}

#[tokio::test]
async fn an_upstream_connection_carries_upstream_keepalive_requests_then_closes() {
    let (upstream, counts) = start_counting_upstream().await;
    let mut h = Harness::start();
    let mut objects = catch_all("counted", &[upstream]);
    objects.push(settings(&[("upstream-keepalive-requests", "2")]));
    h.apply(&objects);

    // One client connection, one worker: 5 requests on connections of 2, 2 and 1.
    let mut client = Client::connect(h.http()).await;
    for _ in 0..5 {
        assert_eq!(client.get("x", "/").await.status, StatusCode::OK);
    }
    assert_eq!(counts.accepted.load(Ordering::SeqCst), 3);
    // The two used up are closed, the third is pooled.
    eventually_async(STEP, "the used-up connections to close", || {
        let open = counts.open.load(Ordering::SeqCst);
        async move { open == 1 }
    })
    .await;
}

#[tokio::test]
async fn idle_upstream_connections_age_out() {
    let (upstream, counts) = start_counting_upstream().await;
    let mut h = Harness::start();
    let mut objects = catch_all("counted", &[upstream]);
    objects.push(settings(&[("upstream-keepalive-timeout", "100ms")]));
    h.apply(&objects);
    assert_eq!(get(h.http(), "x", "/").await.status, StatusCode::OK);
    eventually_async(STEP, "the idle upstream connection to be closed", || {
        let open = counts.open.load(Ordering::SeqCst);
        async move { open == 0 }
    })
    .await;
}

#[tokio::test]
async fn an_upstream_closing_idle_connections_never_surfaces_as_an_error() {
    let upstream = start_impatient_upstream(Duration::from_millis(5)).await;
    let mut h = Harness::start();
    h.apply(&catch_all("impatient", &[upstream]));

    let mut client = Client::connect(h.http()).await;
    for i in 0..150u64 {
        let reply = client.get("x", "/").await;
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "request {i}: {}",
            reply.text()
        );
        assert_eq!(&reply.body[..], b"ok");
        // Gaps around the upstream's idle timeout hit every phase of the close.
        tokio::time::sleep(Duration::from_micros((i * 397) % 9000)).await;
    }
    let metrics = get(h.admin(), "a", "/metrics").await.text();
    let retries = metrics
        .lines()
        .find(|l| l.starts_with("sluice_upstream_retries_total"));
    println!("impatient upstream: {retries:?}");
}

#[tokio::test]
async fn a_one_megabyte_response_streams_through_intact() {
    let files = start_backend("files").await;
    let mut h = Harness::start();
    h.apply(&catch_all("files", &[addr_of(&files)]));
    let mut client = Client::connect(h.http()).await;
    for _ in 0..3 {
        let reply = client.get("x", "/1mb.bin").await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.body.len(), 1024 * 1024);
        assert!(reply.body.iter().all(|b| *b == 0));
    }
    let empty = client.get("x", "/0kb.bin").await;
    assert_eq!(empty.body.len(), 0);
}

/// A WebSocket-ish upstream: answers the upgrade with 101, then echoes bytes.
#[tokio::test]
async fn websocket_upgrades_are_tunnelled_both_ways() {
    let upstream = start_upgrade_upstream().await;
    let mut h = Harness::start();
    h.apply(&catch_all("ws", &[upstream]));

    let (mut stream, head) = websocket_upgrade(h.http()).await;
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(head.contains("upgrade: websocket"), "{head}");

    for message in [&b"ping"[..], b"second message", &[0u8, 1, 2, 255]] {
        stream.write_all(message).await.unwrap();
        let mut echoed = vec![0u8; message.len()];
        bounded(stream.read_exact(&mut echoed)).await.unwrap();
        assert_eq!(echoed, message);
    }
}

#[tokio::test]
async fn graceful_shutdown_lets_an_in_flight_request_finish() {
    let slow = start_backend("slow").await;
    let mut h = Harness::start();
    h.apply(&catch_all("slow", &[addr_of(&slow)]));
    let http = h.http();

    // An idle keep-alive connection, which shutdown should close at once.
    let idle = Client::connect(http).await;
    let mut busy = Client::connect(http).await;
    let request = tokio::spawn(async move { busy.get("x", "/slow?ms=500").await });
    eventually_async(STEP, "the request to reach the backend", || {
        let n = slow.in_flight();
        async move { n == 1 }
    })
    .await;

    let started = Instant::now();
    let proxy = h.control.proxy;
    let stopping = tokio::spawn(shutdown(proxy));
    eventually_async(STEP, "the idle connection to close", || {
        let closed = idle.is_closed();
        async move { closed }
    })
    .await;
    eventually_async(STEP, "every listener to close", || async {
        TcpStream::connect(http).await.is_err()
    })
    .await;
    let reply = bounded(request).await.unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.text(), "slept 500 ms\n");
    bounded(stopping).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// The seeds' scenario in miniature: keep-alive clients hammer a Service while its endpoints
/// are removed, drained or crashed, and replaced, every ~50 ms. Not one request may fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_churn_fails_no_request() {
    const CLIENTS: usize = 8;
    const CHURN_FOR: Duration = Duration::from_secs(4);

    let mut backends = Vec::new();
    for i in 0..4 {
        backends.push(start_backend(&format!("pod-{i}")).await);
    }
    let mut h = Harness::start();
    let addrs = |backends: &[backend::Backend]| backends.iter().map(addr_of).collect::<Vec<_>>();
    h.apply(&catch_all("churn", &addrs(&backends)));

    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicU64::new(0));
    let mut clients = Vec::new();
    for i in 0..CLIENTS {
        let (stop, served, http) = (stop.clone(), served.clone(), h.http());
        // Half the clients ask for slow responses, so crashes catch requests mid-flight.
        let target = if i % 2 == 0 { "/" } else { "/slow?ms=3" };
        clients.push(tokio::spawn(async move {
            let mut failures = Vec::new();
            let mut client = Client::connect(http).await;
            while !stop.load(Ordering::Relaxed) {
                let request = http::Request::get(target)
                    .header("host", "churn.example.com")
                    .body(Default::default())
                    .unwrap();
                match client.send(request).await {
                    Ok(reply) if reply.status == StatusCode::OK => {
                        served.fetch_add(1, Ordering::Relaxed);
                        // keep-alive-requests (1000) ends connections; clients reconnect.
                        if reply
                            .headers
                            .get("connection")
                            .is_some_and(|v| v == "close")
                        {
                            client = Client::connect(http).await;
                        }
                    }
                    Ok(reply) => failures.push(format!("{}: {}", reply.status, reply.text())),
                    Err(e) => {
                        failures.push(format!("client error: {e}"));
                        client = Client::connect(http).await;
                    }
                }
            }
            failures
        }));
    }

    let started = Instant::now();
    let mut generation = 4;
    let mut crash = false;
    let mut draining = Vec::new();
    while started.elapsed() < CHURN_FOR {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let victim = backends.remove(fastrand::usize(..backends.len()));
        h.update(&catch_all("churn", &addrs(&backends)));
        if crash {
            victim.abort();
        } else {
            draining.push(tokio::spawn(victim.shutdown(Duration::from_secs(2))));
        }
        crash = !crash;
        backends.push(start_backend(&format!("pod-{generation}")).await);
        generation += 1;
        h.update(&catch_all("churn", &addrs(&backends)));
    }
    stop.store(true, Ordering::Relaxed);

    let mut failures = Vec::new();
    for client in clients {
        failures.extend(bounded(client).await.unwrap());
    }
    for drain in draining {
        bounded(drain).await.unwrap();
    }
    let served = served.load(Ordering::Relaxed);
    let churned = generation - 4;
    let metrics = get(h.admin(), "a", "/metrics").await.text();
    let counters: Vec<&str> = metrics
        .lines()
        .filter(|l| {
            l.starts_with("sluice_upstream_") || l.starts_with("sluice_error_responses_total{")
        })
        .collect();
    println!(
        "churn: {served} requests served, {churned} endpoints replaced, {} failed; {counters:?}",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} failures, first: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(churned >= 30, "only {churned} endpoint changes");
    assert!(served >= 1000, "only {served} requests served");
}

// ---- the upstream client against hand-written upstreams ----

/// A hand-written HTTP/1.1 upstream on plain threads (`std::net`), so responses can be framed
/// in ways no server library would choose. Each request head (and Content-Length body) is
/// answered as the test's function says; requests are logged with their connection's number.
struct RawUpstream {
    addr: SocketAddr,
    log: Arc<Mutex<Vec<(usize, String)>>>,
    /// Connections it closed after an answer (`Answer::close`).
    closed: Arc<AtomicU64>,
}

/// How a raw upstream answers one request.
struct Answer {
    /// Written one after the other with a short pause, so the proxy reads them separately.
    pieces: Vec<Vec<u8>>,
    /// Close the connection right after, without saying so.
    close: bool,
}

impl Answer {
    fn keep(pieces: &[&[u8]]) -> Answer {
        Answer {
            pieces: pieces.iter().map(|p| p.to_vec()).collect(),
            close: false,
        }
    }

    fn close(pieces: &[&[u8]]) -> Answer {
        Answer {
            close: true,
            ..Answer::keep(pieces)
        }
    }
}

impl RawUpstream {
    fn start(answer: impl Fn(&str) -> Answer + Send + Sync + 'static) -> RawUpstream {
        let listener = std::net::TcpListener::bind((LOCALHOST, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let closed = Arc::new(AtomicU64::new(0));
        let answer = Arc::new(answer);
        let (connections_log, connections_closed) = (log.clone(), closed.clone());
        // Blocked in accept until the test process ends: nothing to clean up.
        std::thread::spawn(move || {
            for (n, stream) in listener.incoming().enumerate() {
                let Ok(stream) = stream else { return };
                let (log, answer) = (connections_log.clone(), answer.clone());
                let closed = connections_closed.clone();
                std::thread::spawn(move || {
                    if serve_raw(n, stream, &log, &*answer) {
                        closed.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        });
        RawUpstream { addr, log, closed }
    }

    /// The connection number of every request so far, in order.
    fn connections(&self) -> Vec<usize> {
        self.log.lock().unwrap().iter().map(|(n, _)| *n).collect()
    }

    fn request_lines(&self) -> Vec<String> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .map(|(_, l)| l.clone())
            .collect()
    }
}

/// Serves one connection; `true` when it closed the connection after an answer (the socket
/// is closed by the time this returns).
fn serve_raw(
    n: usize,
    mut stream: std::net::TcpStream,
    log: &Mutex<Vec<(usize, String)>>,
    answer: &dyn Fn(&str) -> Answer,
) -> bool {
    stream.set_nodelay(true).unwrap();
    stream.set_read_timeout(Some(STEP)).unwrap();
    let mut pending = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&pending[..end]).into_owned();
            let body = head
                .lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
                .map_or(0, |(_, v)| v.trim().parse::<usize>().unwrap());
            if pending.len() < end + 4 + body {
                break;
            }
            pending.drain(..end + 4 + body);
            let line = head.lines().next().unwrap_or_default().to_owned();
            log.lock().unwrap().push((n, line));
            let reply = answer(&head);
            for (i, piece) in reply.pieces.iter().enumerate() {
                if i > 0 {
                    std::thread::sleep(Duration::from_millis(2));
                }
                if stream.write_all(piece).is_err() {
                    return false;
                }
            }
            if reply.close {
                drop(stream);
                return true;
            }
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(read) => pending.extend_from_slice(&buf[..read]),
        }
    }
}

fn target(head: &str) -> &str {
    head.split(' ').nth(1).unwrap_or_default()
}

#[tokio::test]
async fn chunked_responses_are_decoded_and_their_connection_reused() {
    // Split inside a chunk-size line, a chunk's data and its CRLF, with trailers at the end.
    let upstream = RawUpstream::start(|_| {
        Answer::keep(&[
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
            b"lo\r\n7;ext=x\r\n, world\r",
            b"\n0\r\nX-Trailer: t\r\n",
            b"\r\n",
        ])
    });
    let mut h = Harness::start();
    h.apply(&catch_all("chunked", &[upstream.addr]));

    let mut client = Client::connect(h.http()).await;
    for _ in 0..3 {
        let reply = client.get("x", "/").await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.text(), "hello, world");
    }
    assert_eq!(upstream.connections(), [0, 0, 0]);
}

#[tokio::test]
async fn responses_without_a_length_end_when_the_upstream_closes() {
    let body: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let expected = body.clone();
    let upstream = RawUpstream::start(move |_| {
        let mut first =
            b"HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n".to_vec();
        first.extend_from_slice(&body[..1000]);
        Answer {
            pieces: vec![first, body[1000..].to_vec()],
            close: true,
        }
    });
    let mut h = Harness::start();
    h.apply(&catch_all("old", &[upstream.addr]));

    let mut client = Client::connect(h.http()).await;
    for _ in 0..2 {
        let reply = client.get("x", "/").await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.body.len(), expected.len());
        assert!(reply.body == expected, "the body differs");
    }
    // Such a connection cannot be reused: each request had its own.
    assert_eq!(upstream.connections(), [0, 1]);
}

#[tokio::test]
async fn head_204_and_304_responses_end_without_a_body() {
    let upstream = RawUpstream::start(|head| match target(head) {
        "/204" => Answer::keep(&[b"HTTP/1.1 204 No Content\r\n\r\n"]),
        "/304" => Answer::keep(&[b"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n"]),
        // HEAD: the length of the body a GET would get, and no body.
        "/head" => Answer::keep(&[b"HTTP/1.1 200 OK\r\nContent-Length: 1024\r\n\r\n"]),
        _ => Answer::keep(&[b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"]),
    });
    let mut h = Harness::start();
    h.apply(&catch_all("nobody", &[upstream.addr]));

    let mut client = Client::connect(h.http()).await;
    let request = Request::head("/head")
        .header("host", "x")
        .body(Full::default())
        .unwrap();
    let reply = client.send(request).await.unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.headers["content-length"], "1024");
    assert!(reply.body.is_empty());
    assert_eq!(client.get("x", "/204").await.status, StatusCode::NO_CONTENT);
    let reply = client.get("x", "/304").await;
    assert_eq!(reply.status, StatusCode::NOT_MODIFIED);
    assert_eq!(reply.headers["etag"], "\"v1\"");
    // Had the proxy waited for a body after any of them, this would hang or break.
    assert_eq!(client.get("x", "/ok").await.text(), "ok");
    assert_eq!(upstream.connections(), [0, 0, 0, 0]);
}

#[tokio::test]
async fn connection_close_from_the_upstream_is_honoured() {
    // It says close but keeps the connection open: only the proxy can keep the promise.
    let upstream = RawUpstream::start(|_| {
        Answer::keep(&[b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"])
    });
    let mut h = Harness::start();
    h.apply(&catch_all("closing", &[upstream.addr]));

    let mut client = Client::connect(h.http()).await;
    for _ in 0..3 {
        let reply = client.get("x", "/").await;
        assert_eq!(reply.text(), "ok");
        // About the upstream connection, not the client's: not passed on.
        assert!(reply.headers.get("connection").is_none(), "{reply:?}");
    }
    assert_eq!(upstream.connections(), [0, 1, 2]);
}

#[tokio::test]
async fn informational_responses_before_the_final_one_are_skipped() {
    let upstream = RawUpstream::start(|_| {
        Answer::keep(&[
            b"HTTP/1.1 100 Continue\r\n\r\n",
            b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        ])
    });
    let mut h = Harness::start();
    h.apply(&catch_all("hints", &[upstream.addr]));

    let mut client = Client::connect(h.http()).await;
    for _ in 0..2 {
        let reply = client.get("x", "/").await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.text(), "ok");
        assert!(reply.headers.get("link").is_none());
    }
    assert_eq!(upstream.connections(), [0, 0]);
}

#[tokio::test]
async fn a_pooled_connection_the_upstream_closed_is_never_used() {
    // After a GET it closes the (idle, pooled) connection without a word. A POST is not
    // retried once written, so it only succeeds if the proxy never wrote it to that one.
    let upstream = RawUpstream::start(|head| {
        let ok: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        if head.starts_with("GET") {
            Answer::close(&[ok])
        } else {
            Answer::keep(&[ok])
        }
    });
    let mut h = Harness::start();
    h.apply(&catch_all("impatient", &[upstream.addr]));

    let mut client = Client::connect(h.http()).await;
    for i in 0..3 {
        assert_eq!(client.get("x", "/").await.text(), "ok");
        // Until the upstream has closed, a request may legitimately reach it first.
        eventually_async(STEP, "the upstream to close the connection", || {
            let closed = upstream.closed.load(Ordering::SeqCst);
            async move { closed == i + 1 }
        })
        .await;
        let post = Request::post("/submit")
            .header("host", "x")
            .body(Full::new(Bytes::from_static(b"payload")))
            .unwrap();
        let reply = client.send(post).await.unwrap();
        assert_eq!(reply.status, StatusCode::OK, "POST {i}: {}", reply.text());
    }
    // Nothing came on a connection after the GET that the upstream closed it after.
    let lines = upstream.request_lines();
    let connections = upstream.connections();
    for i in 1..lines.len() {
        if lines[i - 1].starts_with("GET") {
            assert_ne!(
                connections[i],
                connections[i - 1],
                "{connections:?} {lines:?}"
            );
        }
    }
    assert_eq!(lines.len(), 6, "{lines:?}");
    let metrics = get(h.admin(), "a", "/metrics").await.text();
    assert!(
        !metrics.contains("sluice_error_responses_total{"),
        "{metrics}"
    );
}

#[tokio::test]
async fn ambiguous_response_framing_is_an_upstream_error() {
    // Which length the proxy believed would decide where the next response starts: it
    // believes neither, answers 502 and drops the connection.
    let upstream = RawUpstream::start(|head| {
        match target(head) {
        "/both" => Answer::keep(&[
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        ]),
        "/two" => Answer::keep(&[
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 30\r\n\r\nabc",
        ]),
        "/gzip" => Answer::keep(&[
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nabc",
        ]),
        "/size" => Answer::keep(&[
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n",
        ]),
        _ => Answer::keep(&[b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"]),
    }
    });
    let mut h = Harness::start();
    h.apply(&catch_all("ambiguous", &[upstream.addr]));

    let mut client = Client::connect(h.http()).await;
    for path in ["/both", "/two", "/gzip"] {
        let reply = client.get("x", path).await;
        assert_eq!(reply.status, StatusCode::BAD_GATEWAY, "{path}");
    }
    // A bad chunk size comes after the head went out: the client's response is cut short.
    let mut client = Client::connect(h.http()).await;
    let request = Request::get("/size")
        .header("host", "x")
        .body(Full::default())
        .unwrap();
    assert!(client.send(request).await.is_err(), "a truncated body");
    let mut client = Client::connect(h.http()).await;
    assert_eq!(client.get("x", "/ok").await.text(), "ok");
    // Not one of those connections was reused.
    let connections = upstream.connections();
    let mut distinct = connections.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), connections.len(), "{connections:?}");
}
