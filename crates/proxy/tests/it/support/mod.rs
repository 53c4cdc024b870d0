//! Test support: a proxy on 127.0.0.1:0 fed from Kubernetes objects, real backends, HTTP/1 and
//! HTTP/2 clients. Waiting, certificates and object builders come from `testkit`, re-exported
//! here so a test module needs one `use crate::support::*`.

pub(crate) mod h2_backend;
pub(crate) mod raw_h2;

pub(crate) use testkit::objects::*;
pub(crate) use testkit::tls::{Leaf, TestCa};
pub(crate) use testkit::{
    bounded, closed_port, eventually_async, free_tcp_port, free_udp_port, STEP,
};

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use controller::ControlPlane;
use http::{HeaderMap, Request, StatusCode, Version};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use model::{Compiled, NamespacedName, Settings};
use proxy::{Proxy, ProxyConfig};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use translate::CompileOptions;

pub(crate) const LOCALHOST: std::net::Ipv4Addr = std::net::Ipv4Addr::LOCALHOST;

/// A proxy driven by the controller's own control plane (`controller::ControlPlane`: the
/// Store, compile, the endpoint fast path), as `sluice serve` drives it.
pub(crate) struct Harness {
    pub(crate) control: ControlPlane,
    /// The access log file (`AccessLogOutput::File`), removed with the harness.
    pub(crate) access_log: tempfile::TempPath,
}

/// A response with its body read whole.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) version: Version,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    /// Trailers after the body, when it had some (gRPC's status).
    pub(crate) trailers: Option<HeaderMap>,
}

/// An HTTP/1.1 client that, like a browser, opens a new connection when the server ended the
/// last one with `Connection: close` (as keep-alive-requests does after 1,000 requests): for
/// loops that send requests for as long as something else happens.
pub(crate) struct KeepAliveClient {
    addr: SocketAddr,
    client: Client,
    closed: bool,
    /// Connections opened, the first included.
    pub(crate) connections: usize,
}

impl KeepAliveClient {
    pub(crate) async fn connect(addr: SocketAddr) -> KeepAliveClient {
        KeepAliveClient {
            addr,
            client: Client::connect(addr).await,
            closed: false,
            connections: 1,
        }
    }

    pub(crate) async fn get(&mut self, host: &str, path: &str) -> Reply {
        if self.closed {
            self.client = Client::connect(self.addr).await;
            self.connections += 1;
        }
        let reply = self.client.get(host, path).await;
        self.closed = (reply.headers.get(http::header::CONNECTION))
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
        reply
    }
}

/// An HTTP/1.1 keep-alive client connection (plain or TLS).
pub(crate) struct Client {
    sender: http1::SendRequest<Full<Bytes>>,
}

/// An HTTP/2 client connection.
pub(crate) struct H2Client {
    sender: http2::SendRequest<Full<Bytes>>,
}

impl Harness {
    pub(crate) fn start() -> Harness {
        Harness::with_workers(2)
    }

    pub(crate) fn with_workers(workers: usize) -> Harness {
        Harness::listening(LOCALHOST.into(), workers, CompileOptions::default())
    }

    /// HTTP and HTTPS on `ip` (port 0; admin and status on loopback) with these compile
    /// options.
    pub(crate) fn listening(
        ip: std::net::IpAddr,
        workers: usize,
        options: CompileOptions,
    ) -> Harness {
        let any = SocketAddr::from((ip, 0));
        let loopback = SocketAddr::from((LOCALHOST, 0));
        let access_log = tempfile::NamedTempFile::new()
            .expect("a temporary file")
            .into_temp_path();
        let proxy = Proxy::start(ProxyConfig {
            http_listen: any,
            https_listen: any,
            admin_listen: loopback,
            health: proxy::HealthCheck::default(),
            status_listen: loopback,
            workers: NonZeroUsize::new(workers).unwrap(),
            access_log: proxy::AccessLogOutput::File(access_log.to_path_buf()),
            metric_identity: proxy::MetricIdentity::default(),
            metric_options: proxy::MetricOptions::default(),
            // Short, so a test sees a freed port bound without waiting long.
            port_retry_interval: std::time::Duration::from_millis(200),
        })
        .expect("proxy starts");
        Harness {
            control: ControlPlane::new(proxy, options, &Settings::default(), Default::default()),
            access_log,
        }
    }

    /// The access log's lines so far (workers hand them over within 100 ms).
    pub(crate) fn access_lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.access_log)
            .expect("the access log is readable")
            .lines()
            .map(str::to_owned)
            .collect()
    }

    pub(crate) fn http(&self) -> SocketAddr {
        self.control.proxy.http_addr()
    }

    pub(crate) fn https(&self) -> SocketAddr {
        self.control.proxy.https_addr()
    }

    pub(crate) fn admin(&self) -> SocketAddr {
        self.control.proxy.admin_addr()
    }

    /// The loopback status listener (`/config`).
    pub(crate) fn status(&self) -> SocketAddr {
        self.control.proxy.status_addr()
    }

    /// Replaces every object, compiles and publishes; panics on diagnostics so a typo in a
    /// test's objects cannot pass silently.
    pub(crate) fn apply(&mut self, objects: &[Value]) -> Arc<Compiled> {
        let compiled = self.apply_allowing_diagnostics(objects);
        assert!(
            compiled.diagnostics.is_empty(),
            "unexpected diagnostics: {:?}",
            compiled.diagnostics
        );
        compiled
    }

    pub(crate) fn apply_allowing_diagnostics(&mut self, objects: &[Value]) -> Arc<Compiled> {
        let mut changes = self.control.store.replace_all(parse(objects));
        // Published whole even when only endpoints changed: the caller wants this compile's
        // diagnostics.
        changes.config = true;
        self.control
            .act(changes)
            .expect("a compile returns its configuration")
    }

    /// As `apply_allowing_diagnostics`, with `edit` changing the compiled configuration
    /// before it is published: for what no translator would make (the proxy's own defences).
    pub(crate) fn apply_edited(&mut self, objects: &[Value], edit: impl FnOnce(&mut Compiled)) {
        self.control.store.replace_all(parse(objects));
        let mut compiled = translate::compile(&self.control.store, &self.control.options);
        edit(&mut compiled);
        self.control.publish(Arc::new(compiled));
    }

    /// Replaces every object like a provider relist; the control plane decides: endpoint-only
    /// changes take the fast path, anything else a full publish.
    pub(crate) fn update(&mut self, objects: &[Value]) {
        let changes = self.control.store.replace_all(parse(objects));
        self.control.act(changes);
    }
}

fn parse(objects: &[Value]) -> Vec<translate::Object> {
    let text = objects
        .iter()
        .map(|o| serde_json::to_string(o).unwrap())
        .collect::<Vec<_>>()
        .join("\n---\n");
    let documents = translate::parse_documents("test.yaml", &text).expect("objects parse");
    assert!(documents.errors.is_empty(), "{:?}", documents.errors);
    documents.objects
}

pub(crate) fn default_tls_secret(name: &str) -> Option<NamespacedName> {
    Some(NamespacedName::new("default", name))
}

// ---- backends ----

pub(crate) async fn start_backend(name: &str) -> backend::Backend {
    backend::Backend::start(backend::BackendConfig {
        listen: vec![SocketAddr::from((LOCALHOST, 0))],
        name: name.to_owned(),
    })
    .await
    .expect("backend starts")
}

/// An Ingress with `nginx.ingress.kubernetes.io/` annotations.
pub(crate) fn annotated(name: &str, annotations: &[(&str, &str)], spec: Value) -> Value {
    let mut object = ingress(name, spec);
    let map: serde_json::Map<String, Value> = annotations
        .iter()
        .map(|(k, v)| {
            let key = format!("nginx.ingress.kubernetes.io/{k}");
            (key, Value::String((*v).to_owned()))
        })
        .collect();
    object["metadata"]["annotations"] = Value::Object(map);
    object
}

/// What a [`start_fixed_backend`] counted.
#[derive(Clone, Default)]
pub(crate) struct Counts {
    pub(crate) connections: Arc<std::sync::atomic::AtomicUsize>,
    pub(crate) requests: Arc<std::sync::atomic::AtomicUsize>,
}

impl Counts {
    pub(crate) fn connections(&self) -> usize {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(crate) fn requests(&self) -> usize {
        self.requests.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A keep-alive backend that answers every request head with `answer` (bodiless requests
/// only) and counts the connections it took and the requests it got.
pub(crate) async fn start_fixed_backend(answer: &'static [u8]) -> (SocketAddr, Counts) {
    start_delayed_backend(answer, std::time::Duration::ZERO).await
}

/// As [`start_fixed_backend`], answering each request after `delay` (a slow endpoint).
pub(crate) async fn start_delayed_backend(
    answer: &'static [u8],
    delay: std::time::Duration,
) -> (SocketAddr, Counts) {
    use std::sync::atomic::Ordering;
    let listener = TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counts = Counts::default();
    let counted = counts.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counted.connections.fetch_add(1, Ordering::SeqCst);
            let requests = counted.requests.clone();
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                        buffer.drain(..end + 4);
                        requests.fetch_add(1, Ordering::SeqCst);
                        if !delay.is_zero() {
                            tokio::time::sleep(delay).await;
                        }
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
    (addr, counts)
}

/// A cleartext HTTP/2 upstream (prior knowledge) that answers every request with its name.
pub(crate) async fn start_h2c_upstream(name: &'static str) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = hyper::service::service_fn(move |_request| async move {
                Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(Bytes::from(name))))
            });
            tokio::spawn(
                hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
            );
        }
    });
    addr
}

pub(crate) fn addr_of(backend: &backend::Backend) -> SocketAddr {
    backend.local_addrs()[0]
}

/// The Services `web` and `web-v2` (a main backend and its canary), one backend each.
pub(crate) fn web_and_v2(web: &backend::Backend, v2: &backend::Backend) -> Vec<Value> {
    let mut objects = vec![
        service("web", &[("http", 80)]),
        service("web-v2", &[("http", 80)]),
    ];
    objects.extend(slices("web", &[addr_of(web)]));
    objects.extend(slices("web-v2", &[addr_of(v2)]));
    objects
}

/// An upstream that accepts WebSocket upgrades (101) and then echoes every byte back.
pub(crate) async fn start_upgrade_upstream() -> SocketAddr {
    start_upgrade_upstream_recording().await.0
}

/// As [`start_upgrade_upstream`], also keeping every request head it received (lower case).
/// Its 101 carries `Sec-WebSocket-Accept` and `Sec-WebSocket-Protocol: chat`, as a real
/// WebSocket server's does.
pub(crate) async fn start_upgrade_upstream_recording(
) -> (SocketAddr, Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let heads = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(serve_upgrade(stream, seen.clone()));
        }
    });
    (addr, heads)
}

/// One connection of an upgrade upstream: a WebSocket request gets a 101 (with
/// `Sec-WebSocket-Accept` and `Sec-WebSocket-Protocol: chat`, as a real WebSocket server's),
/// then its bytes echoed back; anything else a 400. Every request head goes to `seen`.
pub(crate) async fn serve_upgrade<S>(mut stream: S, seen: Arc<std::sync::Mutex<Vec<String>>>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    seen.lock().unwrap().push(head.clone());
    if !(head.contains("upgrade: websocket") && head.contains("connection: upgrade")) {
        let _ = stream
            .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            .await;
        return;
    }
    let _ = stream
        .write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: computed-for-the-key\r\nSec-WebSocket-Protocol: chat\r\n\r\n")
        .await;
    let _ = stream.flush().await;
    let (mut reader, mut writer) = tokio::io::split(stream);
    let _ = tokio::io::copy(&mut reader, &mut writer).await;
}

pub(crate) async fn websocket_upgrade(addr: SocketAddr) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(
            b"GET /chat HTTP/1.1\r\nHost: ws.example.com\r\nConnection: Upgrade\r\n\
              Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
              Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        )
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        bounded(stream.read_exact(&mut byte)).await.unwrap();
        head.push(byte[0]);
    }
    (stream, String::from_utf8_lossy(&head).to_ascii_lowercase())
}

// ---- clients ----

impl Client {
    pub(crate) async fn connect(addr: SocketAddr) -> Client {
        let stream = bounded(TcpStream::connect(addr)).await.expect("connect");
        Client::over(stream).await
    }

    pub(crate) async fn over<I>(io: I) -> Client
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (sender, connection) = bounded(http1::handshake(TokioIo::new(io)))
            .await
            .expect("handshake");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Client { sender }
    }

    pub(crate) async fn get(&mut self, host: &str, path: &str) -> Reply {
        let request = Request::get(path)
            .header("host", host)
            .body(Full::default())
            .unwrap();
        self.send(request).await.expect("request succeeds")
    }

    pub(crate) async fn send(
        &mut self,
        request: Request<Full<Bytes>>,
    ) -> Result<Reply, hyper::Error> {
        bounded(async {
            self.sender.ready().await?;
            let response = self.sender.send_request(request).await?;
            read_reply(response).await
        })
        .await
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }
}

impl H2Client {
    pub(crate) async fn over<I>(io: I) -> H2Client
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (sender, connection) =
            bounded(http2::handshake(TokioExecutor::new(), TokioIo::new(io)))
                .await
                .expect("h2 handshake");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        H2Client { sender }
    }

    /// Another handle on the same connection, for concurrent streams.
    pub(crate) fn handle(&self) -> H2Client {
        H2Client {
            sender: self.sender.clone(),
        }
    }

    pub(crate) async fn send(
        &mut self,
        request: Request<Full<Bytes>>,
    ) -> Result<Reply, hyper::Error> {
        bounded(async {
            self.sender.ready().await?;
            let response = self.sender.send_request(request).await?;
            read_reply(response).await
        })
        .await
    }

    pub(crate) async fn get(&mut self, url: &str) -> Reply {
        let request = Request::get(url).body(Full::default()).unwrap();
        bounded(async {
            self.sender.ready().await?;
            let response = self.sender.send_request(request).await?;
            read_reply(response).await
        })
        .await
        .expect("h2 request succeeds")
    }
}

async fn read_reply(
    response: http::Response<hyper::body::Incoming>,
) -> Result<Reply, hyper::Error> {
    let (parts, body) = response.into_parts();
    let collected = body.collect().await?;
    let trailers = collected.trailers().cloned();
    Ok(Reply {
        status: parts.status,
        version: parts.version,
        headers: parts.headers,
        body: collected.to_bytes(),
        trailers,
    })
}

/// Asserts that `/metrics` has this exact line (name, labels and value).
/// A line server's session: `greeting` first, then each line answered as `{name}: {line}` until
/// the peer closes (TLS passthrough's and TLSRoutes' backends).
pub(crate) async fn echo_lines(
    io: impl tokio::io::AsyncRead + tokio::io::AsyncWrite,
    greeting: &str,
    name: &str,
) {
    use tokio::io::AsyncBufReadExt;
    let (reader, mut writer) = tokio::io::split(io);
    let _ = writer.write_all(format!("{greeting}\n").as_bytes()).await;
    let mut lines = tokio::io::BufReader::new(reader).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let answer = format!("{name}: {line}\n");
        if writer.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

pub(crate) async fn assert_metric(h: &Harness, line: &str) {
    let metrics = get(h.admin(), "admin", "/metrics").await.text();
    assert!(
        metrics.lines().any(|l| l == line),
        "no line {line:?} in /metrics:\n{metrics}"
    );
}

/// One request on a fresh connection.
pub(crate) async fn get(addr: SocketAddr, host: &str, path: &str) -> Reply {
    Client::connect(addr).await.get(host, path).await
}

impl Reply {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The backend that answered `/echo`.
    pub(crate) fn backend(&self) -> String {
        self.json()["backend"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

/// Writes raw bytes and returns the response head (status line and headers) as text.
pub(crate) async fn raw_head(addr: SocketAddr, request: &[u8]) -> String {
    bounded(async {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        // The proxy may answer (and close) before reading all of a large request.
        let _ = stream.write_all(request).await;
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        String::from_utf8_lossy(&head).into_owned()
    })
    .await
}

/// Writes `request` (one or more requests) in one go and reads everything the proxy answers
/// until it closes the connection (or 2 s pass without a byte).
pub(crate) async fn raw_exchange(addr: SocketAddr, request: &[u8]) -> String {
    bounded(async {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let _ = stream.write_all(request).await;
        let mut answers = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match tokio::time::timeout(Duration::from_secs(2), stream.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
                Ok(Ok(n)) => answers.extend_from_slice(&buf[..n]),
            }
        }
        String::from_utf8_lossy(&answers).into_owned()
    })
    .await
}

/// Shuts the proxy down off the async runtime (it blocks until every thread has stopped).
pub(crate) async fn shutdown(proxy: Proxy) {
    bounded(tokio::task::spawn_blocking(move || proxy.shutdown()))
        .await
        .expect("shutdown does not panic");
}

/// A ClientHello record as rustls writes it, asking for `name`.
pub(crate) fn client_hello(name: &str) -> Vec<u8> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let server = rustls::pki_types::ServerName::try_from(name.to_owned()).unwrap();
    let mut client = rustls::ClientConnection::new(Arc::new(config), server).unwrap();
    let mut out = Vec::new();
    client.write_tls(&mut out).unwrap();
    out
}

/// Connects to `addr` and writes `pieces` one after the other, `every` apart, reading (and
/// dropping) whatever comes back, until the proxy closes the connection: how long it lived.
/// Bounded by [`STEP`].
pub(crate) async fn trickle_until_closed(
    addr: SocketAddr,
    pieces: &[&[u8]],
    every: Duration,
) -> Duration {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let started = Instant::now();
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let write = async {
        for piece in pieces {
            let _ = writer.write_all(piece).await;
            tokio::time::sleep(every).await;
        }
        std::future::pending::<()>().await;
    };
    let read = async {
        let mut buf = vec![0u8; 4096];
        while let Ok(1..) = reader.read(&mut buf).await {}
    };
    // Boxed: the select holds both halves' futures (clippy's large_futures).
    Box::pin(bounded(async {
        tokio::select! {
            () = read => {}
            () = write => {}
        }
    }))
    .await;
    started.elapsed()
}
