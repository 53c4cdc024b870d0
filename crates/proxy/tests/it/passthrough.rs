//! TLS passthrough (`ssl-passthrough` with `--enable-ssl-passthrough`): a passthrough host's
//! TLS connections reach its backend undecrypted (the client sees the backend's certificate),
//! other hosts are terminated by Sluice on the same port, and endpoint changes move new
//! connections while established ones stay; with `sluice.dev/ssl-passthrough-proxy-protocol`
//! the backend is first told the client's address in a PROXY protocol header. Real TLS on
//! 127.0.0.1.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// A backend that terminates TLS itself with `leaf`, greets with its name, then echoes lines.
async fn tls_backend(name: &'static str, leaf: &Leaf) -> SocketAddr {
    counted_tls_backend(name, leaf).await.0
}

/// `tls_backend`, and how many connections it has accepted.
async fn counted_tls_backend(name: &'static str, leaf: &Leaf) -> (SocketAddr, Arc<AtomicUsize>) {
    let acceptor = leaf.acceptor();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                echo_lines(tls, &format!("hello from {name}"), name).await;
            });
        }
    });
    (addr, accepted)
}

/// A TLS connection to the proxy with SNI `name`: the certificate presented, and a line
/// reader/writer over it.
struct Session {
    presented: rustls::pki_types::CertificateDer<'static>,
    lines: tokio::io::Lines<
        BufReader<tokio::io::ReadHalf<tokio_rustls::client::TlsStream<TcpStream>>>,
    >,
    writer: tokio::io::WriteHalf<tokio_rustls::client::TlsStream<TcpStream>>,
}

impl Session {
    async fn open(ca: &TestCa, addr: SocketAddr, name: &str) -> Session {
        let (tls, presented) = ca.connect(addr, name, &[]).await.expect("TLS connects");
        let (reader, writer) = tokio::io::split(tls);
        Session {
            presented,
            lines: BufReader::new(reader).lines(),
            writer,
        }
    }

    async fn line(&mut self) -> String {
        bounded(self.lines.next_line())
            .await
            .expect("a line")
            .expect("not closed")
    }

    async fn ask(&mut self, text: &str) -> String {
        self.writer
            .write_all(format!("{text}\n").as_bytes())
            .await
            .unwrap();
        self.line().await
    }
}

fn passthrough_objects(endpoints: &[SocketAddr], web: &Leaf, echo: SocketAddr) -> Vec<Value> {
    let pass = annotated_site(
        "pass",
        "pass.example",
        "pass",
        json!({"nginx.ingress.kubernetes.io/ssl-passthrough": "true"}),
    );
    let mut objects = vec![
        service("pass", &[("http", 443)]),
        pass,
        service("echo", &[("http", 80)]),
        ingress(
            "web",
            json!({
                "tls": [{"hosts": ["web.example"], "secretName": "web-tls"}],
                "rules": [rule("web.example", vec![path("/", "Prefix", to("echo"))])],
            }),
        ),
        tls_secret("web-tls", web),
    ];
    objects.extend(slices("pass", endpoints));
    objects.extend(slices("echo", &[echo]));
    objects
}

#[tokio::test]
async fn passthrough_hosts_reach_their_backend_undecrypted_and_others_are_terminated() {
    let ca = TestCa::new();
    let backend_leaf = ca.leaf(&["pass.example"]);
    let web_leaf = ca.leaf(&["web.example"]);
    let a = tls_backend("a", &backend_leaf).await;
    let b = tls_backend("b", &backend_leaf).await;
    let echo = start_backend("echo").await;
    let mut h = Harness::start();
    h.control.options.enable_ssl_passthrough = true;
    h.apply(&passthrough_objects(&[a], &web_leaf, addr_of(&echo)));

    // The backend's certificate, its own greeting: nothing was terminated on the way.
    let mut first = Session::open(&ca, h.https(), "pass.example").await;
    assert_eq!(first.presented, backend_leaf.der);
    assert_eq!(first.line().await, "hello from a");
    assert_eq!(first.ask("ping").await, "a: ping");

    // Another host on the same port is terminated by Sluice, with its Secret.
    let (tls, presented) = ca
        .connect(h.https(), "web.example", &[b"http/1.1"])
        .await
        .unwrap();
    assert_eq!(presented, web_leaf.der);
    let reply = Client::over(tls).await.get("web.example", "/echo").await;
    assert_eq!(reply.status, 200);

    // A second endpoint joins: the open connection stays on a, new ones reach both.
    h.update(&passthrough_objects(&[a, b], &web_leaf, addr_of(&echo)));
    assert_eq!(first.ask("still there?").await, "a: still there?");
    let mut greeted = std::collections::BTreeSet::new();
    for _ in 0..8 {
        let mut session = Session::open(&ca, h.https(), "pass.example").await;
        greeted.insert(session.line().await);
    }
    assert_eq!(
        greeted.into_iter().collect::<Vec<_>>(),
        ["hello from a", "hello from b"]
    );

    // a leaves the set: new connections go to b only; the one on a is left alone.
    h.update(&passthrough_objects(&[b], &web_leaf, addr_of(&echo)));
    for _ in 0..3 {
        let mut session = Session::open(&ca, h.https(), "pass.example").await;
        assert_eq!(session.line().await, "hello from b");
    }
    assert_eq!(first.ask("and now?").await, "a: and now?");

    assert_metric(
        &h,
        "sluice_ssl_passthrough_connections_total{result=\"passed\"} 12",
    )
    .await;
}

#[tokio::test]
async fn a_refused_endpoint_is_passed_over_as_the_stream_keys_allow() {
    let ca = TestCa::new();
    let backend_leaf = ca.leaf(&["pass.example"]);
    let web_leaf = ca.leaf(&["web.example"]);
    let live = tls_backend("live", &backend_leaf).await;
    let echo = start_backend("echo").await;
    // Three endpoints refuse connections (nothing listens on their ports), one answers.
    let dead: Vec<SocketAddr> = (0..3).map(|_| closed_port()).collect();
    let mut endpoints = dead.clone();
    endpoints.push(live);
    let mut h = Harness::with_workers(1);
    h.control.options.enable_ssl_passthrough = true;
    // `0` tries: every endpoint once, so each connection reaches the live one whatever the
    // balancer offers first.
    let mut objects = passthrough_objects(&endpoints, &web_leaf, addr_of(&echo));
    objects.push(settings(&[("proxy-stream-next-upstream-tries", "0")]));
    h.apply(&objects);
    for _ in 0..4 {
        let mut session = Session::open(&ca, h.https(), "pass.example").await;
        assert_eq!(session.line().await, "hello from live");
    }
    assert_metric(
        &h,
        "sluice_ssl_passthrough_connections_total{result=\"passed\"} 4",
    )
    .await;
}

#[tokio::test]
async fn without_the_flag_or_an_endpoint_nothing_is_passed_through() {
    let ca = TestCa::new();
    let backend_leaf = ca.leaf(&["pass.example"]);
    let web_leaf = ca.leaf(&["web.example"]);
    let a = tls_backend("a", &backend_leaf).await;
    let echo = start_backend("echo").await;

    // The annotation without --enable-ssl-passthrough: Sluice terminates (its fallback
    // certificate, which the client does not trust).
    let mut h = Harness::start();
    h.apply_allowing_diagnostics(&passthrough_objects(&[a], &web_leaf, addr_of(&echo)));
    assert!(ca.connect(h.https(), "pass.example", &[]).await.is_err());

    // With the flag but no endpoint: closed during the handshake, counted.
    let mut h = Harness::start();
    h.control.options.enable_ssl_passthrough = true;
    h.apply(&passthrough_objects(&[], &web_leaf, addr_of(&echo)));
    assert!(ca.connect(h.https(), "pass.example", &[]).await.is_err());
    assert_metric(
        &h,
        "sluice_ssl_passthrough_connections_total{result=\"failed\"} 1",
    )
    .await;
}

#[tokio::test]
async fn allow_and_deny_lists_hold_for_passed_through_connections() {
    let ca = TestCa::new();
    let leaf = ca.leaf(&["open.example", "office.example", "blocked.example"]);
    let (backend, accepted) = counted_tls_backend("a", &leaf).await;
    let mut h = Harness::start();
    h.control.options.enable_ssl_passthrough = true;
    let site = |name: &str, list: &str, value: &str| {
        annotated_site(
            name,
            &format!("{name}.example"),
            "pass",
            json!({
                "nginx.ingress.kubernetes.io/ssl-passthrough": "true",
                format!("nginx.ingress.kubernetes.io/{list}"): value,
            }),
        )
    };
    let mut objects = vec![
        service("pass", &[("http", 443)]),
        site("open", "whitelist-source-range", "127.0.0.1/32"),
        site("office", "whitelist-source-range", "10.0.0.0/8"),
        site("blocked", "denylist-source-range", "127.0.0.0/8"),
    ];
    objects.extend(slices("pass", &[backend]));
    h.apply(&objects);

    // The client (127.0.0.1) is on the open host's list: spliced.
    let mut open = Session::open(&ca, h.https(), "open.example").await;
    assert_eq!(open.presented, leaf.der);
    assert_eq!(open.line().await, "hello from a");
    // Not on the office's list, on the blocked host's deny-list: closed before any endpoint
    // is dialled (TCP has no 403).
    for name in ["office.example", "blocked.example"] {
        assert!(ca.connect(h.https(), name, &[]).await.is_err(), "{name}");
    }
    assert_metric(
        &h,
        "sluice_ssl_passthrough_connections_total{result=\"refused\"} 2",
    )
    .await;
    assert_metric(
        &h,
        "sluice_ssl_passthrough_connections_total{result=\"passed\"} 1",
    )
    .await;
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "the backend saw only the allowed client"
    );
}

/// Issue 24: a ClientHello trickled a byte every 0.9 s on a passthrough listener is closed one
/// client-header-timeout (2 s) after it connected. It used to wait out the timeout in the
/// peek, then get a second one for the handshake (4 s). See `proxy_protocol.rs` for the
/// margins.
#[tokio::test]
async fn a_trickled_client_hello_is_closed_after_one_client_header_timeout() {
    let ca = TestCa::new();
    let web_leaf = ca.leaf(&["web.example"]);
    let a = tls_backend("a", &ca.leaf(&["pass.example"])).await;
    let echo = start_backend("echo").await;
    let mut h = Harness::start();
    h.control.options.enable_ssl_passthrough = true;
    let mut objects = passthrough_objects(&[a], &web_leaf, addr_of(&echo));
    objects.push(settings(&[("client-header-timeout", "2")]));
    h.apply(&objects);
    let hello = client_hello("pass.example");
    let pieces: Vec<&[u8]> = hello.chunks(1).take(8).collect();
    let lived = trickle_until_closed(h.https(), &pieces, Duration::from_millis(900)).await;
    assert!(
        lived >= Duration::from_millis(1900),
        "closed after {lived:?}"
    );
    assert!(
        lived < Duration::from_secs(3),
        "a trickled ClientHello lived {lived:?} with a 2 s client-header-timeout"
    );
}

/// What a backend found before the ClientHello: `none`, `v1 <the line>` or
/// `v2 <source> <destination>` (read here, independently of Sluice's parser).
async fn read_proxy_header(stream: &mut TcpStream) -> String {
    let mut first = [0u8; 1];
    stream.peek(&mut first).await.unwrap();
    match first[0] {
        b'P' => {
            let mut line = Vec::new();
            while !line.ends_with(b"\r\n") {
                line.push(stream.read_u8().await.unwrap());
            }
            format!("v1 {}", String::from_utf8(line).unwrap().trim_end())
        }
        b'\r' => {
            let mut fixed = [0u8; 16];
            stream.read_exact(&mut fixed).await.unwrap();
            assert_eq!(&fixed[..12], b"\r\n\r\n\0\r\nQUIT\n", "v2 signature");
            assert_eq!(fixed[12], 0x21, "version 2, PROXY");
            let mut body = vec![0u8; usize::from(u16::from_be_bytes([fixed[14], fixed[15]]))];
            stream.read_exact(&mut body).await.unwrap();
            let port = |at: usize| u16::from_be_bytes([body[at], body[at + 1]]);
            let (source, destination): (std::net::IpAddr, std::net::IpAddr) = match fixed[13] {
                0x11 => (
                    <[u8; 4]>::try_from(&body[..4]).unwrap().into(),
                    <[u8; 4]>::try_from(&body[4..8]).unwrap().into(),
                ),
                0x21 => (
                    <[u8; 16]>::try_from(&body[..16]).unwrap().into(),
                    <[u8; 16]>::try_from(&body[16..32]).unwrap().into(),
                ),
                other => panic!("v2 family {other:#x}"),
            };
            let ports = if fixed[13] == 0x11 { 8 } else { 32 };
            format!(
                "v2 {} {}",
                SocketAddr::new(source, port(ports)),
                SocketAddr::new(destination, port(ports + 2))
            )
        }
        _ => "none".to_owned(),
    }
}

/// A TLS backend with `leaf` that first reads a PROXY protocol header if one comes, and
/// greets with what it found.
async fn proxy_protocol_backend(leaf: &Leaf) -> SocketAddr {
    let acceptor = leaf.acceptor();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let saw = read_proxy_header(&mut stream).await;
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return;
                };
                let _ = tls.write_all(format!("saw {saw}\n").as_bytes()).await;
                let _ = tls.flush().await;
            });
        }
    });
    addr
}

/// Connects with SNI `name` over `stream`, which may have carried a PROXY header already,
/// and returns the backend's greeting.
async fn greeting(ca: &TestCa, stream: TcpStream, name: &str) -> String {
    let server_name = rustls::pki_types::ServerName::try_from(name.to_owned()).unwrap();
    let tls = bounded(ca.connector(&[]).connect(server_name, stream))
        .await
        .expect("TLS through to the backend");
    let mut lines = BufReader::new(tls).lines();
    bounded(lines.next_line())
        .await
        .unwrap()
        .expect("a greeting")
}

fn proxy_protocol_objects(backend: SocketAddr, settings_data: &[(&str, &str)]) -> Vec<Value> {
    let passthrough = |name: &str, host: &str, version: Option<&str>| {
        let mut annotations = json!({"nginx.ingress.kubernetes.io/ssl-passthrough": "true"});
        if let Some(version) = version {
            annotations["sluice.dev/ssl-passthrough-proxy-protocol"] = json!(version);
        }
        annotated_site(name, host, "pass", annotations)
    };
    let mut objects = vec![
        service("pass", &[("http", 443)]),
        passthrough("one", "one.example", Some("v1")),
        passthrough("two", "two.example", Some("v2")),
        passthrough("plain", "plain.example", None),
        settings(settings_data),
    ];
    objects.extend(slices("pass", &[backend]));
    objects
}

#[tokio::test]
async fn the_proxy_protocol_annotation_tells_the_backend_who_the_client_is() {
    let ca = TestCa::new();
    let leaf = ca.leaf(&["one.example", "two.example", "plain.example"]);
    let backend = proxy_protocol_backend(&leaf).await;
    let mut h = Harness::start();
    h.control.options.enable_ssl_passthrough = true;
    h.apply(&proxy_protocol_objects(backend, &[]));
    let https = h.https();

    // v1 and v2 name the client's own address and port, and the listener's.
    let stream = TcpStream::connect(https).await.unwrap();
    let client = stream.local_addr().unwrap();
    assert_eq!(
        greeting(&ca, stream, "one.example").await,
        format!(
            "saw v1 PROXY TCP4 127.0.0.1 127.0.0.1 {} {}",
            client.port(),
            https.port()
        )
    );
    let stream = TcpStream::connect(https).await.unwrap();
    let client = stream.local_addr().unwrap();
    assert_eq!(
        greeting(&ca, stream, "two.example").await,
        format!("saw v2 {client} {https}")
    );
    // Off by default: the backend's first byte is the ClientHello's.
    let stream = TcpStream::connect(https).await.unwrap();
    assert_eq!(greeting(&ca, stream, "plain.example").await, "saw none");

    // Behind a load balancer (use-proxy-protocol): the client its header named, not the
    // load balancer, is who the backend hears of, with either version on either side.
    h.update(&proxy_protocol_objects(
        backend,
        &[("use-proxy-protocol", "true")],
    ));
    let mut stream = TcpStream::connect(https).await.unwrap();
    stream
        .write_all(b"PROXY TCP4 203.0.113.7 10.0.0.1 40000 443\r\n")
        .await
        .unwrap();
    assert_eq!(
        greeting(&ca, stream, "two.example").await,
        format!("saw v2 203.0.113.7:40000 {https}")
    );
    let mut stream = TcpStream::connect(https).await.unwrap();
    let mut v2 = b"\r\n\r\n\0\r\nQUIT\n\x21\x21\0\x24".to_vec();
    v2.extend_from_slice(
        &"2001:db8::7"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    v2.extend_from_slice(&[0; 16]);
    v2.extend_from_slice(&[0x9c, 0x40, 0x01, 0xbb]); // ports 40000, 443
    stream.write_all(&v2).await.unwrap();
    // A v6 client through a v4 listener: v1 cannot say both, so UNKNOWN (as the spec has it).
    assert_eq!(
        greeting(&ca, stream, "one.example").await,
        "saw v1 PROXY UNKNOWN"
    );
    let mut stream = TcpStream::connect(https).await.unwrap();
    stream.write_all(&v2).await.unwrap();
    assert_eq!(
        greeting(&ca, stream, "two.example").await,
        format!(
            "saw v2 [2001:db8::7]:40000 [::ffff:127.0.0.1]:{}",
            https.port()
        )
    );

    assert_metric(
        &h,
        "sluice_ssl_passthrough_connections_total{result=\"passed\"} 6",
    )
    .await;
}
