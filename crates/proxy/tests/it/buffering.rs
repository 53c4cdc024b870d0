//! `proxy-request-buffering` (on by default, as in ingress-nginx) and `client-body-buffer-size`:
//! a request body is read whole before an upstream is chosen. Each test watches a recording
//! upstream that notes, at every accept and every request head, how much of its body the
//! client had started to send: "the backend saw nothing before the last byte" is an ordering
//! the upstream observes, not a timing.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use crate::support::*;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// How long a slow client waits between two pieces of its body: long enough for a proxy that
/// streams to have connected upstream and sent the head.
const PAUSE: Duration = Duration::from_millis(150);

/// Body bytes the client has started to send: raised *before* each write, so an upstream that
/// reads it after the proxy read the last piece sees the whole length.
type Progress = Arc<AtomicU64>;

/// What the recording upstream saw.
#[derive(Default)]
struct Log {
    /// The client's progress at each accepted connection.
    accepted: Vec<u64>,
    /// The client's progress when each request head arrived, and the head (lower case).
    heads: Vec<(u64, String)>,
    /// Complete requests: head (lower case) and body.
    requests: Vec<(String, Vec<u8>)>,
}

#[derive(Clone, Copy)]
enum Answer {
    /// `200 ok`, then close.
    Ok,
    /// Read the whole request, then close without a word (a pod dying mid-request).
    Close,
}

struct Recorder {
    addr: SocketAddr,
    log: Arc<Mutex<Log>>,
}

impl Recorder {
    async fn start(progress: &Progress, answer: Answer) -> Recorder {
        let listener = TcpListener::bind((LOCALHOST, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let log = Arc::new(Mutex::new(Log::default()));
        let (progress, shared) = (progress.clone(), log.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let at = progress.load(Ordering::SeqCst);
                shared.lock().unwrap().accepted.push(at);
                tokio::spawn(serve(stream, progress.clone(), shared.clone(), answer));
            }
        });
        Recorder { addr, log }
    }

    fn accepted(&self) -> Vec<u64> {
        self.log.lock().unwrap().accepted.clone()
    }

    fn heads(&self) -> Vec<(u64, String)> {
        self.log.lock().unwrap().heads.clone()
    }

    fn requests(&self) -> Vec<(String, Vec<u8>)> {
        self.log.lock().unwrap().requests.clone()
    }
}

async fn serve(mut stream: TcpStream, progress: Progress, log: Arc<Mutex<Log>>, answer: Answer) {
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        if !fill(&mut stream, &mut buf).await {
            return;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    buf.drain(..head_end);
    log.lock()
        .unwrap()
        .heads
        .push((progress.load(Ordering::SeqCst), head.clone()));
    let Some(body) = read_body(&mut stream, &mut buf, &head).await else {
        return;
    };
    log.lock().unwrap().requests.push((head, body));
    if let Answer::Ok = answer {
        let _ = stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            .await;
    }
}

/// Reads more into `buf`; `false` at end of stream.
async fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    let mut chunk = vec![0u8; 16 * 1024];
    match stream.read(&mut chunk).await {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            true
        }
    }
}

fn header<'h>(head: &'h str, name: &str) -> Option<&'h str> {
    head.lines().find_map(|line| {
        let (n, v) = line.split_once(':')?;
        (n.trim() == name).then(|| v.trim())
    })
}

/// The body as its head frames it: a length, or chunked.
async fn read_body(stream: &mut TcpStream, buf: &mut Vec<u8>, head: &str) -> Option<Vec<u8>> {
    if header(head, "transfer-encoding") == Some("chunked") {
        let mut body = Vec::new();
        loop {
            let line_end = loop {
                if let Some(at) = buf.windows(2).position(|w| w == b"\r\n") {
                    break at;
                }
                if !fill(stream, buf).await {
                    return None;
                }
            };
            let size_text = String::from_utf8_lossy(&buf[..line_end]).into_owned();
            let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
            while buf.len() < line_end + 2 + size + 2 {
                if !fill(stream, buf).await {
                    return None;
                }
            }
            body.extend_from_slice(&buf[line_end + 2..line_end + 2 + size]);
            buf.drain(..line_end + 2 + size + 2);
            if size == 0 {
                return Some(body);
            }
        }
    }
    let len: usize = header(head, "content-length").map_or(Some(0), |v| v.parse().ok())?;
    while buf.len() < len {
        if !fill(stream, buf).await {
            return None;
        }
    }
    Some(buf.drain(..len).collect())
}

/// Deterministic bytes that differ from position to position.
fn sample(len: usize) -> Vec<u8> {
    let mut x: u32 = 0x9E37_79B9;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// A proxy sending every request to `upstreams`, with these ConfigMap settings.
/// One worker: its round robin visits the endpoints in turn, one pick after another.
fn site(upstreams: &[SocketAddr], data: &[(&str, &str)]) -> Harness {
    let mut h = Harness::with_workers(1);
    let mut objects = catch_all("up", upstreams);
    objects.push(settings(data));
    h.apply(&objects);
    h
}

/// Sends `head`, then each body piece (raising `progress` first) with a pause between two,
/// and reads the response until the proxy closes (the head asks it to).
async fn upload(addr: SocketAddr, head: &str, pieces: &[&[u8]], progress: &Progress) -> String {
    let mut stream = bounded(TcpStream::connect(addr)).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    for (i, piece) in pieces.iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(PAUSE).await;
        }
        progress.fetch_add(piece.len() as u64, Ordering::SeqCst);
        if stream.write_all(piece).await.is_err() {
            break;
        }
    }
    read_to_close(&mut stream).await
}

async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = bounded(stream.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn chunked(pieces: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = pieces
        .iter()
        .map(|p| {
            let mut chunk = format!("{:x}\r\n", p.len()).into_bytes();
            chunk.extend_from_slice(p);
            chunk.extend_from_slice(b"\r\n");
            chunk
        })
        .collect();
    out.push(b"0\r\n\r\n".to_vec());
    out
}

async fn metrics(h: &Harness) -> String {
    get(h.admin(), "admin", "/metrics").await.text()
}

#[tokio::test]
async fn a_slow_upload_reaches_the_upstream_only_after_its_last_byte() {
    let progress = Progress::default();
    let upstream = Recorder::start(&progress, Answer::Ok).await;
    let h = site(&[upstream.addr], &[]);
    let body = sample(4000);
    let pieces: Vec<&[u8]> = body.chunks(1000).collect();
    let head = "POST /upload HTTP/1.1\r\nHost: buf.example\r\nContent-Length: 4000\r\n\
                Connection: close\r\n\r\n";
    let response = upload(h.http(), head, &pieces, &progress).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    // The proxy connected, and sent the head, only once the client had sent everything.
    assert_eq!(upstream.accepted(), [4000]);
    assert_eq!(upstream.heads()[0].0, 4000);
    let requests = upstream.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].1, body);
    assert!(metrics(&h)
        .await
        .contains("sluice_request_bodies_buffered_total{to=\"memory\"} 1"));
}

#[tokio::test]
async fn with_buffering_off_the_upstream_sees_the_head_before_the_body_ends() {
    let progress = Progress::default();
    let upstream = Recorder::start(&progress, Answer::Ok).await;
    let h = site(&[upstream.addr], &[("proxy-request-buffering", "off")]);
    streamed(&h, &upstream, &progress).await;
}

#[tokio::test]
async fn the_ingress_annotation_turns_buffering_off_for_its_routes_only() {
    let progress = Progress::default();
    let upstream = Recorder::start(&progress, Answer::Ok).await;
    let mut h = Harness::with_workers(1);
    let mut objects = catch_all("up", &[upstream.addr]);
    objects[1]["metadata"]["annotations"] = serde_json::json!({
        "nginx.ingress.kubernetes.io/proxy-request-buffering": "off",
        "nginx.ingress.kubernetes.io/client-body-buffer-size": "1k",
    });
    h.apply(&objects);
    let current = h.control.proxy.current().unwrap();
    let head = http::Request::new(()).into_parts().0;
    let policy = &current
        .routes
        .route("buf.example", "/", &head)
        .unwrap()
        .route
        .policy;
    assert!(!policy.body.request_buffering);
    assert_eq!(policy.body.buffer_size, 1024);
    streamed(&h, &upstream, &progress).await;
}

/// The upstream sees the request head while the client still holds back half its body.
async fn streamed(h: &Harness, upstream: &Recorder, progress: &Progress) {
    let mut stream = TcpStream::connect(h.http()).await.unwrap();
    stream
        .write_all(
            b"POST /upload HTTP/1.1\r\nHost: buf.example\r\nContent-Length: 10\r\n\
              Connection: close\r\n\r\nhello",
        )
        .await
        .unwrap();
    progress.fetch_add(5, Ordering::SeqCst);
    eventually_async(STEP, "the upstream to see the request head", || {
        let seen = !upstream.heads().is_empty();
        async move { seen }
    })
    .await;
    progress.fetch_add(5, Ordering::SeqCst);
    stream.write_all(b"world").await.unwrap();
    let response = read_to_close(&mut stream).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert_eq!(upstream.heads()[0].0, 5);
    assert_eq!(upstream.requests()[0].1, b"helloworld");
}

#[tokio::test]
async fn a_body_larger_than_the_memory_buffer_goes_through_a_file_intact() {
    let progress = Progress::default();
    let upstream = Recorder::start(&progress, Answer::Ok).await;
    let h = site(
        &[upstream.addr],
        &[
            ("client-body-buffer-size", "16k"),
            ("client-max-body-size", "10m"),
        ],
    );
    let body = sample(2 * 1024 * 1024 + 3);
    let mut client = Client::connect(h.http()).await;
    let request = Request::put("/big")
        .header("host", "buf.example")
        .body(http_body_util::Full::new(Bytes::from(body.clone())))
        .unwrap();
    let reply = client.send(request).await.unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    let requests = upstream.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        header(&requests[0].0, "content-length"),
        Some(body.len().to_string().as_str())
    );
    assert!(requests[0].1 == body, "the body arrived changed");
    let text = metrics(&h).await;
    assert!(
        text.contains("sluice_request_bodies_buffered_total{to=\"file\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn a_chunked_body_over_the_limit_gets_413_and_never_reaches_the_upstream() {
    let progress = Progress::default();
    let upstream = Recorder::start(&progress, Answer::Ok).await;
    let h = site(&[upstream.addr], &[("client-max-body-size", "1k")]);
    let body = sample(2048);
    let pieces = chunked(&body.chunks(512).collect::<Vec<_>>());
    let pieces: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
    let head = "POST /upload HTTP/1.1\r\nHost: buf.example\r\nTransfer-Encoding: chunked\r\n\r\n";
    let response = upload(h.http(), head, &pieces, &progress).await;
    assert!(response.starts_with("HTTP/1.1 413"), "{response}");
    assert_eq!(upstream.accepted(), Vec::<u64>::new());
    let text = metrics(&h).await;
    assert!(
        text.contains("sluice_error_responses_total{status=\"413\",source=\"client\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn a_client_that_stops_mid_body_gets_408_and_never_reaches_the_upstream() {
    let progress = Progress::default();
    let upstream = Recorder::start(&progress, Answer::Ok).await;
    let h = site(&[upstream.addr], &[("client-body-timeout", "1s")]);
    let mut stream = TcpStream::connect(h.http()).await.unwrap();
    stream
        .write_all(
            b"POST /upload HTTP/1.1\r\nHost: buf.example\r\nContent-Length: 100\r\n\r\n0123456789",
        )
        .await
        .unwrap();
    let response = read_to_close(&mut stream).await;
    assert!(response.starts_with("HTTP/1.1 408"), "{response}");
    assert_eq!(upstream.accepted(), Vec::<u64>::new());
    let text = metrics(&h).await;
    assert!(
        text.contains("sluice_error_responses_total{status=\"408\",source=\"client\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn a_chunked_upload_arrives_with_a_content_length() {
    let progress = Progress::default();
    let upstream = Recorder::start(&progress, Answer::Ok).await;
    let h = site(&[upstream.addr], &[]);
    let pieces = chunked(&[b"hello ", b"chunked ", b"world"]);
    let pieces: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
    let head = "POST /upload HTTP/1.1\r\nHost: buf.example\r\nTransfer-Encoding: chunked\r\n\
                Connection: close\r\n\r\n";
    let response = upload(h.http(), head, &pieces, &progress).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let requests = upstream.requests();
    let (head, body) = &requests[0];
    assert_eq!(header(head, "content-length"), Some("19"), "{head}");
    assert_eq!(header(head, "transfer-encoding"), None, "{head}");
    assert_eq!(body, b"hello chunked world");
}

#[tokio::test]
async fn a_put_with_a_buffered_body_is_retried_on_another_endpoint() {
    let progress = Progress::default();
    // One endpoint refuses connections, one takes the whole request and dies before
    // answering, one answers: every PUT must get through, whole, whichever comes first.
    let refused = closed_port();
    let dying = Recorder::start(&progress, Answer::Close).await;
    let good = Recorder::start(&progress, Answer::Ok).await;
    let h = site(
        &[refused, dying.addr, good.addr],
        &[("client-body-buffer-size", "16k")],
    );
    // Larger than the memory buffer: the replays come from the file.
    let body = sample(100 * 1024);
    for _ in 0..3 {
        let mut client = Client::connect(h.http()).await;
        let request = Request::put("/object")
            .header("host", "buf.example")
            .body(http_body_util::Full::new(Bytes::from(body.clone())))
            .unwrap();
        let reply = client.send(request).await.unwrap();
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    }
    let dead = dying.requests();
    assert!(!dead.is_empty(), "the dying endpoint was never tried");
    assert!(dead.iter().all(|(_, seen)| *seen == body));
    let served = good.requests();
    assert_eq!(served.len(), 3);
    assert!(served.iter().all(|(_, seen)| *seen == body));
}

#[tokio::test]
async fn a_slow_upload_does_not_use_up_proxy_next_upstream_timeout() {
    // The retry clock starts once the body is read (as nginx's): an upload slower than
    // proxy-next-upstream-timeout can still go to the next endpoint when the first dies.
    let progress = Progress::default();
    let dying = Recorder::start(&progress, Answer::Close).await;
    let good = Recorder::start(&progress, Answer::Ok).await;
    let h = site(
        &[dying.addr, good.addr],
        &[("proxy-next-upstream-timeout", "1s")],
    );
    let body = sample(4000);
    let pieces: Vec<&[u8]> = body.chunks(400).collect();
    let head = "PUT /object HTTP/1.1\r\nHost: buf.example\r\nContent-Length: 4000\r\n\
                Connection: close\r\n\r\n";
    // Two requests: the round robin starts at least one of them at the dying endpoint.
    for _ in 0..2 {
        let started = std::time::Instant::now();
        let response = upload(h.http(), head, &pieces, &progress).await;
        assert!(
            started.elapsed() > Duration::from_secs(1),
            "the upload was not slow"
        );
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    }
    assert!(
        !dying.requests().is_empty(),
        "the dying endpoint was never tried"
    );
    assert_eq!(good.requests().len(), 2);
}

/// A request body the test feeds piece by piece.
struct Pieces(mpsc::Receiver<Bytes>);

impl Body for Pieces {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.get_mut()
            .0
            .poll_recv(cx)
            .map(|piece| piece.map(|p| Ok(Frame::data(p))))
    }
}

#[tokio::test]
async fn an_http2_upload_is_buffered_and_sent_with_its_length() {
    let progress = Progress::default();
    let upstream = Recorder::start(&progress, Answer::Ok).await;
    let ca = TestCa::new();
    let leaf = ca.leaf(&["buf.example"]);
    let mut h = Harness::start();
    let mut objects = vec![
        service("up", &[("http", 80)]),
        tls_secret("buf-tls", &leaf),
        ingress(
            "site",
            json!({
                "tls": [{"hosts": ["buf.example"], "secretName": "buf-tls"}],
                "rules": [rule("buf.example", vec![path("/", "Prefix", to("up"))])],
            }),
        ),
    ];
    objects.extend(slices("up", &[upstream.addr]));
    h.apply(&objects);

    let (tls, _) = ca
        .connect(h.https(), "buf.example", &[b"h2"])
        .await
        .unwrap();
    let (mut sender, connection) =
        bounded(http2::handshake(TokioExecutor::new(), TokioIo::new(tls)))
            .await
            .expect("h2 handshake");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let (pieces, receiver) = mpsc::channel(4);
    let request = Request::post("https://buf.example/upload")
        .body(Pieces(receiver))
        .unwrap();
    bounded(sender.ready()).await.unwrap();
    let response = tokio::spawn(sender.send_request(request));
    let body = sample(3000);
    for (i, piece) in body.chunks(1000).enumerate() {
        if i > 0 {
            tokio::time::sleep(PAUSE).await;
        }
        progress.fetch_add(piece.len() as u64, Ordering::SeqCst);
        pieces.send(Bytes::copy_from_slice(piece)).await.unwrap();
    }
    drop(pieces);
    let response = bounded(response).await.unwrap().expect("h2 response");
    assert_eq!(response.status(), StatusCode::OK);
    let text = bounded(response.into_body().collect()).await.unwrap();
    assert_eq!(text.to_bytes(), "ok");
    assert_eq!(upstream.accepted(), [3000]);
    let requests = upstream.requests();
    assert_eq!(header(&requests[0].0, "content-length"), Some("3000"));
    assert_eq!(requests[0].1, body);
}
