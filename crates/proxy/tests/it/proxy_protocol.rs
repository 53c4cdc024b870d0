//! `use-proxy-protocol`: connections from a load balancer start with a PROXY protocol header
//! (v1 text or v2 binary) naming the client; Sluice takes the client address from it for
//! `X-Forwarded-For`, `X-Real-IP`, allow-lists and the access log, on plain and TLS listeners
//! alike, and closes connections without a valid header. Real sockets on 127.0.0.1.

use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// A v2 `PROXY` header for TCP over IPv4 from `source:port`.
fn v2_header(source: [u8; 4], port: u16) -> Vec<u8> {
    let mut bytes = V2_SIGNATURE.to_vec();
    bytes.extend_from_slice(&[0x21, 0x11, 0, 12]);
    bytes.extend_from_slice(&source);
    bytes.extend_from_slice(&[10, 0, 0, 1]);
    bytes.extend_from_slice(&port.to_be_bytes());
    bytes.extend_from_slice(&443u16.to_be_bytes());
    bytes
}

fn v1_header(source: &str, port: u16) -> Vec<u8> {
    format!("PROXY TCP4 {source} 10.0.0.1 {port} 80\r\n").into_bytes()
}

/// Connects to `addr`, writes `header`, then speaks HTTP/1.1.
async fn behind(addr: std::net::SocketAddr, header: &[u8]) -> Client {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(header).await.unwrap();
    Client::over(stream).await
}

/// Writes `bytes` and reads until the proxy closes; what it sent back.
async fn refused(addr: std::net::SocketAddr, bytes: &[u8]) -> Vec<u8> {
    bounded(async {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let _ = stream.write_all(bytes).await;
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        answer
    })
    .await
}

struct Site {
    h: Harness,
    ca: TestCa,
    _echo: backend::Backend,
    /// What `h` was given, the ConfigMap last.
    objects: Vec<Value>,
}

/// `web.example` over HTTP and HTTPS to an echo backend, and `office.example` allowed only
/// from 203.0.113.0/24; `settings` added to the ConfigMap.
async fn site(settings_data: &[(&str, &str)]) -> Site {
    // Plain HTTP is served on the TLS host too, so one Ingress covers both listeners.
    let mut with_defaults = vec![("ssl-redirect", "false")];
    with_defaults.extend_from_slice(settings_data);
    let echo = start_backend("echo").await;
    let ca = TestCa::new();
    let leaf = ca.leaf(&["web.example"]);
    let mut h = Harness::start();
    let office = annotated_site(
        "office",
        "office.example",
        "echo",
        json!({"nginx.ingress.kubernetes.io/whitelist-source-range": "203.0.113.0/24"}),
    );
    let mut objects = vec![
        service("echo", &[("http", 80)]),
        ingress(
            "web",
            json!({
                "tls": [{"hosts": ["web.example"], "secretName": "web-tls"}],
                "rules": [rule("web.example", vec![path("/", "Prefix", to("echo"))])],
            }),
        ),
        office,
        tls_secret("web-tls", &leaf),
        settings(&with_defaults),
    ];
    objects.extend(slices("echo", &[addr_of(&echo)]));
    h.apply(&objects);
    let settings_at = objects
        .iter()
        .position(|o| o["kind"] == "ConfigMap")
        .unwrap();
    let config_map = objects.remove(settings_at);
    objects.push(config_map);
    Site {
        h,
        ca,
        _echo: echo,
        objects,
    }
}

fn header(echo: &Value, name: &str) -> String {
    echo["headers"][name]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn the_client_address_comes_from_the_header_on_plain_and_tls_listeners() {
    let Site { h, ca, _echo, .. } = site(&[("use-proxy-protocol", "true")]).await;

    // v1 on the plain listener, two requests on the one connection.
    let mut client = behind(h.http(), &v1_header("203.0.113.7", 51234)).await;
    for _ in 0..2 {
        let echo = client.get("web.example", "/echo").await.json();
        assert_eq!(header(&echo, "x-real-ip"), "203.0.113.7", "{echo:#}");
        assert_eq!(header(&echo, "x-forwarded-for"), "203.0.113.7", "{echo:#}");
    }

    // v2 on the TLS listener: the header, then the handshake on the same connection.
    let mut stream = TcpStream::connect(h.https()).await.unwrap();
    stream
        .write_all(&v2_header([198, 51, 100, 9], 40000))
        .await
        .unwrap();
    let name = rustls::pki_types::ServerName::try_from("web.example").unwrap();
    let tls = bounded(ca.connector(&[b"http/1.1"]).connect(name, stream))
        .await
        .expect("TLS after the PROXY header");
    let echo = Client::over(tls)
        .await
        .get("web.example", "/echo")
        .await
        .json();
    assert_eq!(header(&echo, "x-real-ip"), "198.51.100.9", "{echo:#}");
    assert_eq!(header(&echo, "x-forwarded-proto"), "https", "{echo:#}");

    // A client's own X-Forwarded-For does not replace the header's address.
    let mut client = behind(h.http(), &v1_header("203.0.113.8", 1)).await;
    let request = http::Request::get("/echo")
        .header("host", "web.example")
        .header("x-forwarded-for", "192.0.2.66")
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let echo = client.send(request).await.unwrap().json();
    assert_eq!(header(&echo, "x-real-ip"), "203.0.113.8", "{echo:#}");

    // Allow-lists see the client, not the load balancer (127.0.0.1).
    let mut allowed = behind(h.http(), &v1_header("203.0.113.200", 2)).await;
    assert_eq!(allowed.get("office.example", "/").await.status, 200);
    let mut denied = behind(h.http(), &v1_header("192.0.2.1", 3)).await;
    assert_eq!(denied.get("office.example", "/").await.status, 403);

    // So does the access log.
    eventually_async(STEP, "the access log names the clients", || async {
        let lines = h.access_lines();
        lines.iter().any(|l| l.starts_with("203.0.113.7 "))
            && lines.iter().any(|l| l.starts_with("198.51.100.9 "))
            && lines.iter().any(|l| l.starts_with("192.0.2.1 "))
    })
    .await;
}

#[tokio::test]
async fn connections_without_a_valid_header_are_closed_unanswered() {
    let Site { h, _echo, .. } = site(&[
        ("use-proxy-protocol", "true"),
        ("client-header-timeout", "1"),
    ])
    .await;
    let request = b"GET /echo HTTP/1.1\r\nHost: web.example\r\n\r\n";
    assert_eq!(refused(h.http(), request).await, b"");
    let mut broken = b"PROXY TCP4 203.0.113.7 10.0.0.1 99999 80\r\n".to_vec();
    broken.extend_from_slice(request);
    assert_eq!(refused(h.http(), &broken).await, b"");
    assert_eq!(refused(h.https(), b"\x16\x03\x01\x00\x05hello").await, b"");

    // Silence is bounded by client-header-timeout.
    let started = Instant::now();
    let mut silent = TcpStream::connect(h.http()).await.unwrap();
    let mut buf = [0u8; 16];
    let read = bounded(silent.read(&mut buf)).await;
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(started.elapsed() >= Duration::from_millis(900));

    // A header sent in pieces is waited for.
    let mut stream = TcpStream::connect(h.http()).await.unwrap();
    stream.write_all(b"PROXY TCP4 203.0").await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    stream.write_all(b".113.9 10.0.0.1 5 80\r\n").await.unwrap();
    let echo = Client::over(stream)
        .await
        .get("web.example", "/echo")
        .await
        .json();
    assert_eq!(header(&echo, "x-real-ip"), "203.0.113.9");

    assert_metric(&h, "sluice_proxy_protocol_refused_total 4").await;
}

/// `proxy-protocol-header-timeout` bounds the wait for the header on its own, well inside a
/// long client-header-timeout (ingress-nginx's 5 s default against 60 s).
#[tokio::test]
async fn the_proxy_protocol_header_has_its_own_timeout() {
    let Site { h, _echo, .. } = site(&[
        ("use-proxy-protocol", "true"),
        ("client-header-timeout", "60"),
        ("proxy-protocol-header-timeout", "1s"),
    ])
    .await;
    let started = Instant::now();
    let mut silent = TcpStream::connect(h.http()).await.unwrap();
    silent.write_all(b"PROXY TCP4 203.0").await.unwrap();
    let mut buf = [0u8; 16];
    // `bounded` gives up long before the 60 s client-header-timeout would close it.
    let read = bounded(silent.read(&mut buf)).await;
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(started.elapsed() >= Duration::from_millis(900));
    // A prompt header is not affected.
    let stream = behind(h.http(), &v1_header("203.0.113.9", 5)).await;
    drop(stream);
}

/// Issue 24: one client-header-timeout covers the PROXY header and everything after it up to
/// the first request (the TLS handshake, the request head), not one timeout each. The client
/// sends its header a byte every 0.9 s (under half the 2 s timeout), completing it at 1.8 s,
/// then goes on the same way with a request head or a ClientHello (or, after a prompt TLS
/// handshake, an HTTP/2 preface). Closed at 2 s; with a timeout per stage it lived until 3.8 s. The bound, 3 s, is a full second past the
/// deadline and 0.8 s short of the old lifetime: a loaded machine's timer lateness is
/// milliseconds.
#[tokio::test]
async fn one_client_header_timeout_covers_the_header_and_what_follows_it() {
    let Site { h, ca, _echo, .. } = site(&[
        ("use-proxy-protocol", "true"),
        ("client-header-timeout", "2"),
    ])
    .await;
    let hello = client_hello("web.example");
    let every = Duration::from_millis(900);
    let header: &[&[u8]] = &[b"PROXY TCP4 203.0.113.7 10.0.0.1 1 443", b"\r", b"\n"];
    let head: &[&[u8]] = &[b"GET /echo HTTP/1.1\r\n", b"H", b"o", b"s", b"t"];
    let handshake: &[&[u8]] = &[&hello[..hello.len() - 3], &hello[hello.len() - 3..][..1]];
    for (addr, then, stage) in [
        (h.http(), head, "request head"),
        (h.https(), handshake, "TLS handshake"),
    ] {
        let pieces: Vec<&[u8]> = header.iter().chain(then).copied().collect();
        let lived = trickle_until_closed(addr, &pieces, every).await;
        assert!(
            lived >= Duration::from_millis(1900),
            "{stage}: closed after {lived:?}, before the timeout"
        );
        assert!(
            lived < Duration::from_secs(3),
            "{stage}: a header, then a {stage}, lived {lived:?} with a 2 s client-header-timeout"
        );
    }

    // HTTP/2 over TLS: the header complete at 1.5 s, the handshake at once, then a connection
    // preface that never ends. Closed at 2 s; the preface's own timeout made it 3.5 s.
    let started = Instant::now();
    let mut stream = TcpStream::connect(h.https()).await.unwrap();
    stream.write_all(header[0]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stream.write_all(b"\r\n").await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("web.example").unwrap();
    let mut tls = bounded(ca.connector(&[b"h2"]).connect(name, stream))
        .await
        .expect("TLS after the PROXY header");
    tls.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
    let mut rest = Vec::new();
    let _ = bounded(tls.read_to_end(&mut rest)).await;
    let lived = started.elapsed();
    assert!(
        lived >= Duration::from_millis(1900),
        "h2: closed after {lived:?}"
    );
    assert!(
        lived < Duration::from_secs(3),
        "h2: a header, then a preface, lived {lived:?} with a 2 s client-header-timeout"
    );
}

#[tokio::test]
async fn an_untrusted_load_balancer_is_the_client_and_the_setting_applies_without_restart() {
    // 127.0.0.1 is outside proxy-real-ip-cidr: its header is read (and required) but not
    // believed.
    let Site {
        mut h,
        _echo,
        mut objects,
        ..
    } = site(&[
        ("use-proxy-protocol", "true"),
        ("proxy-real-ip-cidr", "10.0.0.0/8"),
        (
            "log-format-upstream",
            "$remote_addr pp=$proxy_protocol_addr $request",
        ),
    ])
    .await;
    let echo = behind(h.http(), &v1_header("203.0.113.7", 1))
        .await
        .get("web.example", "/echo")
        .await
        .json();
    assert_eq!(header(&echo, "x-real-ip"), "127.0.0.1", "{echo:#}");
    eventually_async(
        STEP,
        "the log has the header's address as $proxy_protocol_addr",
        || async {
            h.access_lines()
                .iter()
                .any(|l| l == "127.0.0.1 pp=203.0.113.7 GET /echo HTTP/1.1")
        },
    )
    .await;

    // Off again: plain connections are served without a header.
    *objects.last_mut().unwrap() =
        settings(&[("use-proxy-protocol", "false"), ("ssl-redirect", "false")]);
    h.update(&objects);
    let echo = get(h.http(), "web.example", "/echo").await.json();
    assert_eq!(header(&echo, "x-real-ip"), "127.0.0.1", "{echo:#}");
}

/// Issue 24 item 9: behind an L4 balancer the HTTP headers are the client's own, so its
/// `X-Forwarded-Proto/-Host` are believed only when the client the PROXY header names is in
/// `proxy-real-ip-cidr` (an L7 proxy there), never because the balancer is.
#[tokio::test]
async fn forwarded_headers_are_believed_from_the_proxied_client_not_the_balancer() {
    let Site { h, _echo, .. } = site(&[
        ("use-proxy-protocol", "true"),
        ("use-forwarded-headers", "true"),
        ("ssl-redirect", "true"),
        ("proxy-real-ip-cidr", "127.0.0.1/32, 10.0.0.0/8"),
    ])
    .await;
    let with_headers = |extra: &[(&str, &str)]| {
        let mut request = http::Request::get("/echo").header("host", "web.example");
        for (name, value) in extra {
            request = request.header(*name, *value);
        }
        request
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap()
    };
    let forged = [
        ("x-forwarded-proto", "https"),
        ("x-forwarded-host", "evil.example"),
    ];

    // The balancer (127.0.0.1) is trusted; the client it names (203.0.113.7) is not.
    let mut client = behind(h.http(), &v1_header("203.0.113.7", 1)).await;
    let reply = client.send(with_headers(&forged)).await.unwrap();
    assert_eq!(reply.status, 308, "{}", reply.text());
    assert_eq!(reply.headers["location"], "https://web.example/echo");

    // An L7 proxy inside proxy-real-ip-cidr behind the balancer: believed.
    let mut client = behind(h.http(), &v1_header("10.1.2.3", 2)).await;
    let reply = client
        .send(with_headers(&[("x-forwarded-host", "shop.example")]))
        .await
        .unwrap();
    assert_eq!(reply.status, 308);
    assert_eq!(reply.headers["location"], "https://shop.example/echo");
    let echo = client
        .send(with_headers(&[("x-forwarded-proto", "https")]))
        .await
        .unwrap()
        .json();
    assert_eq!(header(&echo, "x-forwarded-proto"), "https", "{echo:#}");
}

/// A v1 header from `source` to the balancer's port `port`.
fn v1_header_to(source: &str, port: u16) -> Vec<u8> {
    format!("PROXY TCP4 {source} 10.0.0.1 40000 {port}\r\n").into_bytes()
}

/// Issue 26 item 8: ingress-nginx's `$pass_port` and `$pass_access_scheme` with
/// use-proxy-protocol: the port the client reached the balancer on, and https when that port is
/// 443 (a balancer that terminated TLS), so ssl-redirect does not loop behind it.
#[tokio::test]
async fn the_balancer_s_port_is_x_forwarded_port_and_443_makes_the_request_https() {
    let Site { h, _echo, .. } =
        site(&[("use-proxy-protocol", "true"), ("ssl-redirect", "true")]).await;
    let mut client = behind(h.http(), &v1_header_to("203.0.113.7", 443)).await;
    let reply = client.get("web.example", "/echo").await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let echo = reply.json();
    assert_eq!(header(&echo, "x-forwarded-proto"), "https", "{echo:#}");
    assert_eq!(header(&echo, "x-forwarded-port"), "443", "{echo:#}");
    assert_eq!(header(&echo, "x-forwarded-scheme"), "https", "{echo:#}");

    // Plain HTTP at the balancer: redirected, and a request that is not redirected (a host
    // without TLS) names the balancer's port.
    let mut client = behind(h.http(), &v1_header_to("203.0.113.7", 8080)).await;
    let reply = client.get("web.example", "/echo").await;
    assert_eq!(reply.status, 308, "{}", reply.text());
    let echo = client.get("office.example", "/echo").await.json();
    assert_eq!(header(&echo, "x-forwarded-port"), "8080", "{echo:#}");
    assert_eq!(header(&echo, "x-forwarded-proto"), "http", "{echo:#}");
}

/// ingress-nginx >= 1.13 (use-forwarded-headers with use-proxy-protocol): when the client the
/// PROXY header names is a trusted proxy, the real client is the one its X-Forwarded-For
/// names; an untrusted one cannot forge it.
#[tokio::test]
async fn a_trusted_proxy_behind_the_balancer_names_the_client_in_x_forwarded_for() {
    let Site { h, _echo, .. } = site(&[
        ("use-proxy-protocol", "true"),
        ("use-forwarded-headers", "true"),
        ("proxy-real-ip-cidr", "127.0.0.1/32, 10.0.0.0/8"),
    ])
    .await;
    let forwarded_for = |client: &'static str| {
        http::Request::get("/echo")
            .header("host", "web.example")
            .header("x-forwarded-for", client)
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap()
    };
    let mut client = behind(h.http(), &v1_header("10.1.2.3", 1)).await;
    let echo = client
        .send(forwarded_for("198.51.100.4"))
        .await
        .unwrap()
        .json();
    assert_eq!(header(&echo, "x-real-ip"), "198.51.100.4", "{echo:#}");
    let mut client = behind(h.http(), &v1_header("203.0.113.7", 2)).await;
    let echo = client
        .send(forwarded_for("198.51.100.4"))
        .await
        .unwrap()
        .json();
    assert_eq!(header(&echo, "x-real-ip"), "203.0.113.7", "{echo:#}");
}
