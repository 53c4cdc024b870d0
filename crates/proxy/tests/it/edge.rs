//! The edge against a hostile client: each test sends what an attacker (or a broken client)
//! would, and checks what a production edge must do: route only on the plain form of a
//! request, refuse what is malformed with the status nginx gives, hold nothing forever, and
//! let a refused client read its status. Real sockets on 127.0.0.1, every wait bounded.

use std::net::SocketAddr;
use std::time::Duration;

use crate::support::*;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// `files.example`: `/` → public, `/echo/private` → private (the table, with the
/// backends' `/echo/...` telling who saw what). `extra` adds objects (settings, TLS).
async fn files_site(extra: Vec<Value>) -> (Harness, backend::Backend, backend::Backend) {
    let public = start_backend("public").await;
    let private = start_backend("private").await;
    let mut h = Harness::start();
    let mut objects = vec![
        service("public", &[("http", 80)]),
        service("private", &[("http", 80)]),
        ingress(
            "files",
            json!({"rules": [rule("files.example", vec![
                path("/", "Prefix", to("public")),
                path("/echo/private", "Prefix", to("private")),
            ])]}),
        ),
    ];
    objects.extend(slices("public", &[addr_of(&public)]));
    objects.extend(slices("private", &[addr_of(&private)]));
    objects.extend(extra);
    h.apply(&objects);
    (h, public, private)
}

/// Sends raw bytes, reads until the proxy closes; returns the head and the body.
async fn raw(addr: SocketAddr, request: &[u8]) -> (String, String) {
    bounded(async {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let _ = stream.write_all(request).await;
        let mut out = Vec::new();
        let _ = stream.read_to_end(&mut out).await;
        let text = String::from_utf8_lossy(&out).into_owned();
        match text.split_once("\r\n\r\n") {
            Some((head, body)) => (head.to_owned(), body.to_owned()),
            None => (text, String::new()),
        }
    })
    .await
}

fn get_request(target: &str, host: &str, extra: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n")
        .into_bytes()
}

/// The body of a chunked or plain response, as JSON.
fn echo_json(head: &str, body: &str) -> Value {
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let (_, rest) = body.split_once("\r\n").unwrap_or_default();
        rest.rsplit_once("\r\n0\r\n").map_or(rest, |(json, _)| json)
    } else {
        body
    };
    serde_json::from_str(body.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {head}\n{body}"))
}

async fn metrics(h: &Harness) -> String {
    get(h.admin(), "admin", "/metrics").await.text()
}

#[tokio::test]
async fn a_path_is_routed_and_forwarded_in_its_plain_form() {
    let (h, _public, _private) = files_site(vec![]).await;
    // (target as sent, path the private backend must see)
    let cases = [
        ("/echo/public/../private/secret", "/echo/private/secret"),
        ("/echo/public/%2e%2e/private/secret", "/echo/private/secret"),
        ("/echo/public/%2E%2E/private/secret", "/echo/private/secret"),
        ("/echo/public/..%2Fprivate/secret", "/echo/private/secret"),
        ("/echo//private/secret", "/echo/private/secret"),
        ("/echo/./private/secret", "/echo/private/secret"),
        // Decoding alone gives the plain form: it goes upstream as sent.
        ("/echo/%70rivate/secret", "/echo/%70rivate/secret"),
    ];
    for (target, seen) in cases {
        let (head, body) = raw(h.http(), &get_request(target, "files.example", "")).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{target}: {head}");
        let echo = echo_json(&head, &body);
        assert_eq!(
            echo["backend"], "private",
            "{target} reached the wrong backend"
        );
        assert_eq!(echo["path"], seen, "{target}");
    }
    // An encoded slash is a slash for routing and stays encoded upstream (GitLab's project
    // paths); the query is never touched.
    let (head, body) = raw(
        h.http(),
        &get_request("/echo/api/group%2Fname?q=%2e%2e", "files.example", ""),
    )
    .await;
    let echo = echo_json(&head, &body);
    assert_eq!(echo["backend"], "public");
    assert_eq!(echo["path"], "/echo/api/group%2Fname");
    assert_eq!(echo["query"], "q=%2e%2e");
}

#[tokio::test]
async fn hostile_targets_and_methods_are_refused() {
    let (h, _public, _private) = files_site(vec![]).await;
    for target in [
        "/echo/../../etc/passwd",
        "/%2e%2e/etc/passwd",
        "/echo/%00/x",
        "/echo/a%0d%0aSet-Cookie:%20x",
        "/echo/a%zz",
        "/echo/public/..;/private/secret",
        "/echo/public/%2e%2e;jsessionid=1/private/secret",
    ] {
        let (head, _) = raw(h.http(), &get_request(target, "files.example", "")).await;
        assert!(head.starts_with("HTTP/1.1 400"), "{target}: {head}");
    }
    for method in ["TRACE", "CONNECT"] {
        let request = format!("{method} /echo/x HTTP/1.1\r\nHost: files.example\r\n\r\n");
        let (head, _) = raw(h.http(), request.as_bytes()).await;
        assert!(head.starts_with("HTTP/1.1 405"), "{method}: {head}");
    }
    let text = metrics(&h).await;
    assert!(
        text.contains("sluice_error_responses_total{status=\"400\",source=\"client\"} 7"),
        "{text}"
    );
}

#[tokio::test]
async fn host_must_be_present_single_and_valid() {
    let (h, _public, _private) = files_site(vec![]).await;
    let refused: [&[u8]; 6] = [
        b"GET /echo/x HTTP/1.1\r\nHost: files.example\r\nHost: evil.example\r\n\r\n",
        b"GET /echo/x HTTP/1.1\r\nConnection: close\r\n\r\n",
        b"GET /echo/x HTTP/1.1\r\nHost: files.example/../x\r\n\r\n",
        b"GET /echo/x HTTP/1.1\r\nHost: files..example\r\n\r\n",
        b"GET /echo/x HTTP/1.1\r\nHost: files.example:80x\r\n\r\n",
        b"GET /echo/x HTTP/1.1\r\nHost: \r\n\r\n",
    ];
    for request in refused {
        let (head, _) = raw(h.http(), request).await;
        assert!(
            head.starts_with("HTTP/1.1 400"),
            "{}: {head}",
            String::from_utf8_lossy(request)
        );
    }
    // Case, a port and a trailing dot are fine; HTTP/1.0 may omit Host (no rule here: 404).
    let (head, _) = raw(h.http(), &get_request("/echo/x", "FILES.Example.:8080", "")).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (head, _) = raw(h.http(), b"GET /echo/x HTTP/1.0\r\n\r\n").await;
    assert!(head.starts_with("HTTP/1.0 404"), "{head}");
}

#[tokio::test]
async fn headers_with_underscores_are_dropped_unless_enabled() {
    let forged = "X_Forwarded_For: 6.6.6.6\r\nX_Api_Key: k\r\nX-Plain: p\r\n";
    let (h, _public, _private) = files_site(vec![]).await;
    let (head, body) = raw(h.http(), &get_request("/echo/x", "files.example", forged)).await;
    let headers = &echo_json(&head, &body)["headers"];
    assert_eq!(headers["x-forwarded-for"], "127.0.0.1");
    assert_eq!(headers["x-plain"], "p");
    assert!(headers.get("x_forwarded_for").is_none(), "{headers}");
    assert!(headers.get("x_api_key").is_none(), "{headers}");

    let enabled = vec![settings(&[("enable-underscores-in-headers", "true")])];
    let (h, _public, _private) = files_site(enabled).await;
    let (head, body) = raw(h.http(), &get_request("/echo/x", "files.example", forged)).await;
    let headers = &echo_json(&head, &body)["headers"];
    assert_eq!(headers["x_api_key"], "k", "{headers}");
}

#[tokio::test]
async fn a_streamed_request_body_that_stops_gets_408_and_frees_the_upstream() {
    // Streamed: the upstream holds the request while its body is awaited (buffered bodies
    // never reach it: tests/it/buffering.rs).
    let (h, public, _private) = files_site(vec![settings(&[
        ("client-body-timeout", "1s"),
        ("proxy-request-buffering", "off"),
    ])])
    .await;
    let mut stream = TcpStream::connect(h.http()).await.unwrap();
    stream
        .write_all(b"POST /echo/x HTTP/1.1\r\nHost: files.example\r\nContent-Length: 100\r\n\r\n0123456789")
        .await
        .unwrap();
    // The request is upstream now, its body unfinished.
    eventually_async(STEP, "the backend to hold the request", || async {
        public.in_flight() == 1
    })
    .await;
    let mut response = Vec::new();
    bounded(stream.read_to_end(&mut response)).await.unwrap();
    let response = String::from_utf8_lossy(&response);
    assert!(response.starts_with("HTTP/1.1 408"), "{response}");
    eventually_async(STEP, "the backend to be released", || async {
        public.in_flight() == 0
    })
    .await;
    let text = metrics(&h).await;
    assert!(
        text.contains("sluice_error_responses_total{status=\"408\",source=\"client\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn a_broken_request_body_is_the_clients_fault() {
    let (h, _public, _private) = files_site(vec![]).await;
    let (head, _) = raw(
        h.http(),
        b"POST /echo/x HTTP/1.1\r\nHost: files.example\r\nTransfer-Encoding: chunked\r\n\r\n\
          5\r\nhello\r\nzz\r\n",
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    let text = metrics(&h).await;
    assert!(
        text.contains("sluice_error_responses_total{status=\"400\",source=\"client\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn an_upstream_that_reads_nothing_is_a_504() {
    // Accepts and never reads: the request body backs up until proxy-send-timeout.
    let listener = TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let deaf = listener.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let mut h = Harness::start();
    let mut objects = catch_all("deaf", &[deaf]);
    objects.push(settings(&[
        ("proxy-send-timeout", "1s"),
        ("client-max-body-size", "0"),
        // Streamed, so that the upload meets the upstream that does not read it.
        ("proxy-request-buffering", "off"),
    ]));
    h.apply(&objects);

    let len = 256 * 1024 * 1024;
    let mut stream = TcpStream::connect(h.http()).await.unwrap();
    let head =
        format!("POST /upload HTTP/1.1\r\nHost: deaf.example\r\nContent-Length: {len}\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let writing = tokio::spawn(async move {
        let chunk = vec![b'x'; 64 * 1024];
        while writer.write_all(&chunk).await.is_ok() {}
    });
    let mut response = Vec::new();
    bounded(reader.read_to_end(&mut response)).await.unwrap();
    let response = String::from_utf8_lossy(&response);
    assert!(response.starts_with("HTTP/1.1 504"), "{response}");
    writing.abort();
    held.abort();
}

#[tokio::test]
async fn a_silent_tunnel_is_closed_after_proxy_read_timeout() {
    let upstream = start_upgrade_upstream().await;
    let mut h = Harness::start();
    let mut objects = catch_all("ws", &[upstream]);
    objects.push(settings(&[("proxy-read-timeout", "1s")]));
    h.apply(&objects);

    let (mut stream, head) = websocket_upgrade(h.http()).await;
    assert!(head.starts_with("http/1.1 101"), "{head}");
    // Traffic keeps it open past the limit...
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(600)).await;
        stream.write_all(b"ping").await.unwrap();
        let mut echoed = [0u8; 4];
        bounded(stream.read_exact(&mut echoed)).await.unwrap();
        assert_eq!(&echoed, b"ping");
    }
    // ...silence closes it.
    let mut rest = Vec::new();
    let read = bounded(stream.read_to_end(&mut rest)).await;
    assert!(read.is_ok() && rest.is_empty(), "{read:?} {rest:?}");
}

#[tokio::test]
async fn a_client_refused_mid_upload_can_finish_sending_and_read_its_status() {
    // A client like curl: it sends the whole body it declared, then reads. Without lingering,
    // the proxy's close with unread bytes resets the connection and the client's writes fail
    // ("connection reset") before it ever reads the 413.
    let (h, _public, _private) =
        files_site(vec![settings(&[("client-max-body-size", "1k")])]).await;
    let len = 8 * 1024 * 1024;
    let mut stream = TcpStream::connect(h.http()).await.unwrap();
    let head =
        format!("POST /echo/x HTTP/1.1\r\nHost: files.example\r\nContent-Length: {len}\r\n\r\n");
    let sent = bounded(async {
        stream.write_all(head.as_bytes()).await?;
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..len / chunk.len() {
            stream.write_all(&chunk).await?;
        }
        std::io::Result::Ok(())
    })
    .await;
    assert!(sent.is_ok(), "the upload was cut off: {sent:?}");
    let mut response = Vec::new();
    let read = bounded(stream.read_to_end(&mut response)).await;
    let text = String::from_utf8_lossy(&response);
    assert!(text.starts_with("HTTP/1.1 413"), "{read:?}: {text:?}");
}

/// `files.example` with its own certificate, `plain.example` without one.
async fn tls_site(settings_data: &[(&str, &str)]) -> (Harness, TestCa, backend::Backend) {
    let ca = TestCa::new();
    let leaf = ca.leaf(&["files.example"]);
    let backend = start_backend("public").await;
    let mut h = Harness::start();
    let mut objects = vec![
        service("public", &[("http", 80)]),
        tls_secret("files-tls", &leaf),
        ingress(
            "files",
            json!({
                "tls": [{"hosts": ["files.example"], "secretName": "files-tls"}],
                "rules": [
                    rule("files.example", vec![path("/", "Prefix", to("public"))]),
                    rule("plain.example", vec![path("/", "Prefix", to("public"))]),
                ],
            }),
        ),
        settings(settings_data),
    ];
    objects.extend(slices("public", &[addr_of(&backend)]));
    h.apply(&objects);
    (h, ca, backend)
}

/// An HTTP/2 connection whose stream flow-control window is `window` and never grows (the
/// client does not read its response bodies).
async fn h2_with_window(
    h: &Harness,
    ca: &TestCa,
    window: u32,
) -> (
    http2::SendRequest<Full<Bytes>>,
    tokio::task::JoinHandle<Result<(), hyper::Error>>,
) {
    let (tls, _) = ca
        .connect(h.https(), "files.example", &[b"h2"])
        .await
        .unwrap();
    let (sender, connection) = bounded(
        http2::Builder::new(TokioExecutor::new())
            .initial_stream_window_size(window)
            .adaptive_window(false)
            .handshake(TokioIo::new(tls)),
    )
    .await
    .unwrap();
    (sender, tokio::spawn(connection))
}

async fn https_get(h: &Harness, ca: &TestCa, host: &str, alpn: &[u8]) -> Reply {
    let (tls, _) = ca
        .connect(h.https(), "files.example", &[alpn])
        .await
        .unwrap();
    if alpn == b"h2" {
        H2Client::over(tls)
            .await
            .get(&format!("https://{host}/echo/x"))
            .await
    } else {
        Client::over(tls).await.get(host, "/echo/x").await
    }
}

#[tokio::test]
async fn hsts_goes_with_https_for_hosts_with_their_own_certificate() {
    let (h, ca, _backend) = tls_site(&[]).await;
    for alpn in [&b"http/1.1"[..], b"h2"] {
        let reply = https_get(&h, &ca, "files.example", alpn).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(
            reply.headers["strict-transport-security"],
            "max-age=31536000; includeSubDomains"
        );
        let reply = https_get(&h, &ca, "plain.example", alpn).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert!(reply.headers.get("strict-transport-security").is_none());
    }
    // Not over plain HTTP (that one is redirected anyway).
    let reply = get(h.http(), "plain.example", "/echo/x").await;
    assert!(reply.headers.get("strict-transport-security").is_none());

    let (h, ca, _backend) = tls_site(&[("hsts-max-age", "60"), ("hsts-preload", "true")]).await;
    let reply = https_get(&h, &ca, "files.example", b"http/1.1").await;
    assert_eq!(
        reply.headers["strict-transport-security"],
        "max-age=60; includeSubDomains; preload"
    );
    let (h, ca, _backend) = tls_site(&[("hsts", "false")]).await;
    let reply = https_get(&h, &ca, "files.example", b"http/1.1").await;
    assert!(reply.headers.get("strict-transport-security").is_none());
}

#[tokio::test]
async fn a_trusted_forwarded_proto_stops_the_https_redirect() {
    let proto = "X-Forwarded-Proto: https\r\n";
    let (h, _ca, _backend) = tls_site(&[("use-forwarded-headers", "true")]).await;
    let (head, _) = raw(h.http(), &get_request("/echo/x", "files.example", proto)).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (head, _) = raw(h.http(), &get_request("/echo/x", "files.example", "")).await;
    assert!(head.starts_with("HTTP/1.1 308"), "{head}");
    // Not trusted: a client cannot talk its way out of the redirect.
    let (h, _ca, _backend) = tls_site(&[]).await;
    let (head, _) = raw(h.http(), &get_request("/echo/x", "files.example", proto)).await;
    assert!(head.starts_with("HTTP/1.1 308"), "{head}");
    // Nor with use-forwarded-headers when it is not a peer in proxy-real-ip-cidr.
    let (h, _ca, _backend) = tls_site(&[
        ("use-forwarded-headers", "true"),
        ("proxy-real-ip-cidr", "10.0.0.0/8"),
    ])
    .await;
    let (head, _) = raw(h.http(), &get_request("/echo/x", "files.example", proto)).await;
    assert!(head.starts_with("HTTP/1.1 308"), "{head}");
}

#[tokio::test]
async fn http2_requests_are_normalised_and_their_host_checked() {
    let (h, ca, _backend) = tls_site(&[]).await;
    let (tls, _) = ca
        .connect(h.https(), "files.example", &[b"h2"])
        .await
        .unwrap();
    let mut client = H2Client::over(tls).await;
    let reply = client
        .get("https://files.example/echo/a/../b/%2e%2e/c")
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["path"], "/echo/c");
    let reply = client.get("https://files.example/echo/../../x").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);

    let (tls, _) = ca
        .connect(h.https(), "files.example", &[b"h2"])
        .await
        .unwrap();
    let (mut sender, connection) =
        bounded(http2::handshake(TokioExecutor::new(), TokioIo::new(tls)))
            .await
            .unwrap();
    tokio::spawn(connection);
    let request = Request::get("https://files.example/echo/x")
        .header("host", "plain.example")
        .body(Full::<Bytes>::default())
        .unwrap();
    let response = bounded(sender.send_request(request)).await.unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn an_http2_stream_the_client_never_lets_send_is_reset() {
    let (h, ca, _backend) = tls_site(&[("client-send-timeout", "1s")]).await;
    // A client that never opens its stream window: no DATA frame can be sent to it.
    let (mut sender, _connection) = h2_with_window(&h, &ca, 0).await;
    let request = Request::get("https://files.example/1mb.bin")
        .body(Full::<Bytes>::default())
        .unwrap();
    let response = bounded(sender.send_request(request)).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = bounded(response.into_body().collect()).await;
    assert!(body.is_err(), "the stream must be reset, not finish");
    // The connection itself is still good.
    let request = Request::get("https://files.example/healthz")
        .body(Full::<Bytes>::default())
        .unwrap();
    let response = bounded(sender.send_request(request)).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

/// The kernel's keepalive timer (`tr` 2 in /proc/net/tcp) on the socket from `local` to
/// `remote` port.
fn keepalive_armed(local: u16, remote: u16) -> Option<bool> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let port = |field: &str| u16::from_str_radix(field.rsplit(':').next()?, 16).ok();
        (port(fields[1])? == local && port(fields[2])? == remote && fields[3] == "01")
            .then(|| fields[5].starts_with("02:"))
    })
}

#[tokio::test]
async fn client_and_upstream_sockets_have_tcp_keepalive() {
    let (h, public, _private) = files_site(vec![]).await;
    let stream = TcpStream::connect(h.http()).await.unwrap();
    let mine = stream.local_addr().unwrap().port();
    let mut client = Client::over(stream).await;
    assert_eq!(
        client.get("files.example", "/echo/x").await.status,
        StatusCode::OK
    );
    // The proxy's side of the client connection, and its pooled connection to the backend.
    assert_eq!(keepalive_armed(h.http().port(), mine), Some(true));
    let backend_port = addr_of(&public).port();
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let upstream_local = table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let remote = u16::from_str_radix(fields[2].rsplit(':').next()?, 16).ok()?;
        (remote == backend_port && fields[3] == "01")
            .then(|| u16::from_str_radix(fields[1].rsplit(':').next()?, 16).ok())
            .flatten()
    });
    let upstream_local = upstream_local.expect("a pooled upstream connection");
    assert_eq!(keepalive_armed(upstream_local, backend_port), Some(true));
}

#[tokio::test]
async fn an_http2_connection_that_never_takes_its_last_data_is_dropped_after_goaway() {
    // A one-byte window: all but a byte of the response waits for a window the client never
    // opens. client-send-timeout resets that stream, the idle close then sends GOAWAY, and the
    // connection must not wait forever for the data to leave.
    let (h, ca, _backend) = tls_site(&[("keep-alive", "1s"), ("client-send-timeout", "1s")]).await;
    let (mut sender, connection) = h2_with_window(&h, &ca, 1).await;
    let request = Request::get("https://files.example/1kb.bin")
        .body(Full::<Bytes>::default())
        .unwrap();
    let response = bounded(sender.send_request(request)).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    // The body is never read: the window stays at one byte.
    let ended = bounded(connection).await;
    assert!(ended.is_ok(), "the connection task panicked: {ended:?}");
    drop(response);
}
