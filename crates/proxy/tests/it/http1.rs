//! The HTTP/1.1 server on the wire, with raw sockets: pipelining, the requests the inline
//! server hands to hyper in the middle of a connection, closing, HEAD, and bad requests.

use std::time::Duration;

use crate::support::*;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// One response as read off the socket.
struct Raw {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Raw {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// A client connection that reads responses byte-exactly, so that what follows a response
/// (the next one, or the end of the connection) is seen as the proxy sent it.
struct Conn<S> {
    stream: S,
    buf: Vec<u8>,
}

impl Conn<TcpStream> {
    async fn open(addr: std::net::SocketAddr) -> Conn<TcpStream> {
        Conn::over(TcpStream::connect(addr).await.unwrap())
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    fn over(stream: S) -> Conn<S> {
        Conn {
            stream,
            buf: Vec::new(),
        }
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    /// Reads until `buf` holds `n` bytes; false at a clean end of stream (FIN, and over
    /// TLS a close_notify first). A reset or a truncated TLS stream fails the test.
    async fn fill(&mut self, n: usize) -> bool {
        let mut chunk = vec![0u8; 16 * 1024];
        while self.buf.len() < n {
            match bounded(self.stream.read(&mut chunk)).await {
                Ok(0) => return false,
                Ok(read) => self.buf.extend_from_slice(&chunk[..read]),
                Err(e) => panic!("the connection did not end cleanly: {e}"),
            }
        }
        true
    }

    async fn line(&mut self) -> String {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..end]).into_owned();
                self.buf.drain(..end + 2);
                return line;
            }
            let want = self.buf.len() + 1;
            assert!(self.fill(want).await, "connection closed mid-line");
        }
    }

    /// Reads one response; `bodiless` for HEAD (the head's length is not followed).
    async fn response(&mut self, bodiless: bool) -> Raw {
        let mut head = String::new();
        loop {
            let line = self.line().await;
            if line.is_empty() {
                break;
            }
            head.push_str(&line);
            head.push_str("\r\n");
        }
        let status = head[9..12].parse().unwrap();
        let mut raw = Raw {
            status,
            head,
            body: Vec::new(),
        };
        if bodiless || status == 100 || status == 204 || status == 304 {
            return raw;
        }
        if raw.header("transfer-encoding") == Some("chunked") {
            loop {
                let size = usize::from_str_radix(&self.line().await, 16).unwrap();
                if size == 0 {
                    assert_eq!(self.line().await, "", "no trailers expected");
                    return raw;
                }
                assert!(self.fill(size + 2).await, "connection closed mid-chunk");
                raw.body.extend_from_slice(&self.buf[..size]);
                self.buf.drain(..size + 2);
            }
        }
        let len: usize = raw
            .header("content-length")
            .unwrap_or_else(|| panic!("no framing in {}", raw.head))
            .parse()
            .unwrap();
        assert!(self.fill(len).await, "connection closed mid-body");
        raw.body = self.buf.drain(..len).collect();
        raw
    }

    /// Whether the proxy closed the connection cleanly (nothing more arrives, then the end).
    async fn closed(&mut self) -> bool {
        let pending = self.buf.len();
        !self.fill(pending + 1).await && self.buf.len() == pending
    }
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: app\r\n\r\n")
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order_on_one_connection() {
    let backend = start_backend("pipe").await;
    let mut h = Harness::start();
    h.apply(&catch_all("pipe", &[addr_of(&backend)]));

    let mut conn = Conn::open(h.http()).await;
    // Three requests in one write, the third one split across two.
    let all = format!(
        "{}{}{}",
        get("/echo?n=1"),
        get("/echo?n=2"),
        get("/echo?n=3")
    );
    let (first, rest) = all.as_bytes().split_at(all.len() - 7);
    conn.send(first).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    conn.send(rest).await;
    for n in 1..=3 {
        let reply = conn.response(false).await;
        assert_eq!(reply.status, 200, "{}", reply.head);
        assert_eq!(reply.json()["query"], format!("n={n}"));
        assert!(reply.header("date").is_some(), "{}", reply.head);
    }
    // And the connection is still good for more.
    conn.send(get("/echo?n=4").as_bytes()).await;
    assert_eq!(conn.response(false).await.json()["query"], "n=4");
}

#[tokio::test]
async fn bodies_expectations_and_http10_are_served_after_plain_requests() {
    let backend = start_backend("mixed").await;
    let mut h = Harness::start();
    h.apply(&catch_all("mixed", &[addr_of(&backend)]));

    let mut conn = Conn::open(h.http()).await;
    conn.send(get("/echo?step=1").as_bytes()).await;
    assert_eq!(conn.response(false).await.json()["query"], "step=1");

    // A body: hyper takes the connection over from here, with the bytes already read.
    conn.send(b"POST /echo?step=2 HTTP/1.1\r\nHost: app\r\nContent-Length: 11\r\n\r\nhello world")
        .await;
    let reply = conn.response(false).await;
    assert_eq!(reply.json()["method"], "POST");
    assert_eq!(reply.json()["body_bytes"], 11);

    // 100-continue, then a chunked body, then a plain request: all on the same connection.
    conn.send(
        b"PUT /echo?step=3 HTTP/1.1\r\nHost: app\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n",
    )
    .await;
    assert_eq!(conn.response(false).await.status, 100);
    conn.send(b"data").await;
    assert_eq!(conn.response(false).await.json()["body_bytes"], 4);
    conn.send(
        b"POST /echo?step=4 HTTP/1.1\r\nHost: app\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    )
    .await;
    assert_eq!(conn.response(false).await.json()["body_bytes"], 3);
    conn.send(get("/echo?step=5").as_bytes()).await;
    assert_eq!(conn.response(false).await.json()["query"], "step=5");

    // HTTP/1.0 on a fresh connection: answered as HTTP/1.0 and closed.
    let mut old = Conn::open(h.http()).await;
    old.send(b"GET /echo HTTP/1.0\r\nHost: app\r\n\r\n").await;
    let reply = old.response(false).await;
    assert!(reply.head.starts_with("HTTP/1.0 200"), "{}", reply.head);
    assert!(old.closed().await);
}

#[tokio::test]
async fn connection_close_head_and_bad_requests() {
    let backend = start_backend("edges").await;
    let mut h = Harness::start();
    h.apply(&catch_all("edges", &[addr_of(&backend)]));

    // HEAD: the length a GET would get, no body; the connection carries on.
    let mut conn = Conn::open(h.http()).await;
    conn.send(b"HEAD /1kb.bin HTTP/1.1\r\nHost: app\r\n\r\n")
        .await;
    let reply = conn.response(true).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-length"), Some("1024"));
    conn.send(get("/1kb.bin").as_bytes()).await;
    assert_eq!(conn.response(false).await.body.len(), 1024);

    // The client asks to close: the response says so and the proxy closes.
    conn.send(b"GET /echo HTTP/1.1\r\nHost: app\r\nConnection: close\r\n\r\n")
        .await;
    let reply = conn.response(false).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("connection"), Some("close"));
    assert!(conn.closed().await);

    // Answers the proxy makes itself go through the same path: 404 for an unknown path
    // has a length and keeps the connection.
    let mut h2 = Harness::start();
    h2.apply(&[
        service("svc", &[("http", 80)]),
        ingress(
            "one",
            serde_json::json!({"rules": [rule("known", vec![path("/", "Prefix", to("svc"))])]}),
        ),
    ]);
    let mut conn = Conn::open(h2.http()).await;
    for _ in 0..2 {
        conn.send(b"GET / HTTP/1.1\r\nHost: unknown\r\n\r\n").await;
        let reply = conn.response(false).await;
        assert_eq!(reply.status, 404, "{}", reply.head);
        assert!(reply.header("content-length").is_some(), "{}", reply.head);
    }

    // A malformed request after a good one: hyper answers 400.
    let mut conn = Conn::open(h.http()).await;
    conn.send(get("/echo").as_bytes()).await;
    assert_eq!(conn.response(false).await.status, 200);
    conn.send(b"GET /echo HTTP/1.1\r\nHost app\r\n\r\n").await;
    assert_eq!(conn.response(false).await.status, 400);
    // A target the `http` crate refuses although httparse took it.
    let mut conn = Conn::open(h.http()).await;
    conn.send(b"GET /a<b> HTTP/1.1\r\nHost: app\r\n\r\n").await;
    assert_eq!(conn.response(false).await.status, 400);
}

#[tokio::test]
async fn over_tls_pipelining_works_and_a_close_is_announced() {
    let backend = start_backend("tls").await;
    let ca = TestCa::new();
    let leaf = ca.leaf(&["app.example.com"]);
    let mut h = Harness::start();
    let mut objects = vec![
        tls_secret("app-tls", &leaf),
        service("svc", &[("http", 80)]),
        ingress(
            "app",
            serde_json::json!({
                "tls": [{"hosts": ["app.example.com"], "secretName": "app-tls"}],
                "rules": [rule("app.example.com", vec![path("/", "Prefix", to("svc"))])],
            }),
        ),
    ];
    objects.extend(slices("svc", &[addr_of(&backend)]));
    h.apply(&objects);

    let (tls, _) = ca
        .connect(h.https(), "app.example.com", &[b"http/1.1"])
        .await
        .unwrap();
    let mut conn = Conn::over(tls);
    let request = |query: &str, close: bool| {
        format!(
            "GET /echo?{query} HTTP/1.1\r\nHost: app.example.com\r\n{}\r\n",
            if close { "Connection: close\r\n" } else { "" }
        )
    };
    conn.send(format!("{}{}", request("a", false), request("b", true)).as_bytes())
        .await;
    let first = conn.response(false).await;
    assert_eq!(first.json()["query"], "a");
    assert_eq!(first.json()["headers"]["x-forwarded-proto"], "https");
    let last = conn.response(false).await;
    assert_eq!(last.json()["query"], "b");
    assert_eq!(last.header("connection"), Some("close"));
    // close_notify before the FIN: the client can tell the end from a truncation.
    assert!(conn.closed().await);
}

/// An upstream that answers every request on its first connection with a body far larger than
/// any socket buffer, as fast as it is taken.
async fn start_endless_upstream(len: usize) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut head = [0u8; 4096];
        let _ = stream.read(&mut head).await;
        let _ = stream
            .write_all(format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n\r\n").as_bytes())
            .await;
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..len / chunk.len() {
            if stream.write_all(&chunk).await.is_err() {
                return;
            }
        }
    });
    addr
}

#[tokio::test]
async fn a_client_that_stops_reading_is_cut_off_after_client_send_timeout() {
    const LEN: usize = 256 * 1024 * 1024;
    let upstream = start_endless_upstream(LEN).await;
    let mut h = Harness::start();
    let mut objects = catch_all("big", &[upstream]);
    objects.push(settings(&[("client-send-timeout", "500ms")]));
    h.apply(&objects);

    // A small receive buffer, so the proxy's writes block soon after the client stops reading.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(h.http()).await.unwrap();
    stream.write_all(get("/big").as_bytes()).await.unwrap();
    let mut first = [0u8; 1024];
    let n = bounded(stream.read(&mut first)).await.unwrap();
    assert!(first[..n].starts_with(b"HTTP/1.1 200 OK"));

    // Stop reading for well past the limit; then what is left in the buffers drains and the
    // connection ends long before the body is complete.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut received = n;
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match bounded(stream.read(&mut chunk)).await {
            Ok(0) | Err(_) => break,
            Ok(read) => received += read,
        }
    }
    assert!(
        received < LEN / 2,
        "the proxy kept sending: {received} of {LEN} bytes arrived"
    );
}

#[tokio::test]
async fn ambiguous_request_framing_is_refused_and_the_connection_closed() {
    let backend = start_backend("framing").await;
    let mut h = Harness::start();
    h.apply(&catch_all("framing", &[addr_of(&backend)]));

    // As nginx: both lengths, or two lengths, is 400; a coding other than chunked is 501.
    // Each as the first request of a connection (the inline server's) and after a good one.
    let refused: [(&[u8], u16); 4] = [
        (
            b"POST /echo HTTP/1.1\r\nHost: app\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            400,
        ),
        (
            b"POST /echo HTTP/1.1\r\nHost: app\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
            400,
        ),
        (
            b"POST /echo HTTP/1.1\r\nHost: app\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            501,
        ),
        (
            b"GET /echo HTTP/1.1\r\nHost: app\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            400,
        ),
    ];
    for (request, status) in refused {
        for after_a_good_one in [false, true] {
            let mut conn = Conn::open(h.http()).await;
            if after_a_good_one {
                conn.send(get("/echo").as_bytes()).await;
                assert_eq!(conn.response(false).await.status, 200);
            }
            conn.send(request).await;
            let reply = conn.response(false).await;
            assert_eq!(reply.status, status, "{}", String::from_utf8_lossy(request));
            assert_eq!(reply.header("connection"), Some("close"));
            assert!(conn.closed().await);
        }
    }
}
