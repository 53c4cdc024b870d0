//! Test support: a proxy on 127.0.0.1:0 fed from Kubernetes objects, real backends, HTTP/1,
//! HTTP/2 and TLS clients that verify certificates, and a bounded `eventually`.
#![allow(dead_code, unreachable_pub)]

pub mod raw_h2;

use std::future::Future;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode, Version};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use model::{Compiled, NamespacedName};
use proxy::{Proxy, ProxyConfig};
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use translate::{CompileOptions, Store};

/// Every network step of a test is bounded by this.
pub const STEP: Duration = Duration::from_secs(10);

pub const LOCALHOST: std::net::Ipv4Addr = std::net::Ipv4Addr::LOCALHOST;

/// A proxy plus the Store it is configured from, like the control plane holds them.
pub struct Harness {
    pub proxy: Proxy,
    pub store: Store,
    pub options: CompileOptions,
    /// The access log file (`AccessLogOutput::File`), removed with the harness.
    pub access_log: tempfile::TempPath,
}

/// A response with its body read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub version: Version,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// Trailers after the body, when it had some (gRPC's status).
    pub trailers: Option<HeaderMap>,
}

/// An HTTP/1.1 keep-alive client connection (plain or TLS).
pub struct Client {
    sender: http1::SendRequest<Full<Bytes>>,
}

/// An HTTP/2 client connection.
pub struct H2Client {
    sender: http2::SendRequest<Full<Bytes>>,
}

/// A test CA and the certificates it signs.
pub struct TestCa {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    root: CertificateDer<'static>,
}

/// A leaf certificate: PEM for Secrets, DER to compare with what a server presented.
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
    pub der: CertificateDer<'static>,
}

impl Harness {
    pub fn start() -> Harness {
        Harness::with_workers(2)
    }

    pub fn with_workers(workers: usize) -> Harness {
        let any = SocketAddr::from((LOCALHOST, 0));
        let access_log = tempfile::NamedTempFile::new()
            .expect("a temporary file")
            .into_temp_path();
        let proxy = Proxy::start(ProxyConfig {
            http_listen: any,
            https_listen: any,
            admin_listen: any,
            status_listen: any,
            workers: NonZeroUsize::new(workers).unwrap(),
            access_log: proxy::AccessLogOutput::File(access_log.to_path_buf()),
            metric_identity: proxy::MetricIdentity::default(),
            metric_options: proxy::MetricOptions::default(),
        })
        .expect("proxy starts");
        Harness {
            proxy,
            store: Store::default(),
            options: CompileOptions::default(),
            access_log,
        }
    }

    /// The access log's lines so far (workers hand them over within 100 ms).
    pub fn access_lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.access_log)
            .expect("the access log is readable")
            .lines()
            .map(str::to_owned)
            .collect()
    }

    pub fn http(&self) -> SocketAddr {
        self.proxy.http_addr()
    }

    pub fn https(&self) -> SocketAddr {
        self.proxy.https_addr()
    }

    pub fn admin(&self) -> SocketAddr {
        self.proxy.admin_addr()
    }

    /// The loopback status listener (`/config`).
    pub fn status(&self) -> SocketAddr {
        self.proxy.status_addr()
    }

    /// Replaces every object, compiles and publishes; panics on diagnostics so a typo in a
    /// test's objects cannot pass silently.
    pub fn apply(&mut self, objects: &[Value]) -> Arc<Compiled> {
        let compiled = self.apply_allowing_diagnostics(objects);
        assert!(
            compiled.diagnostics.is_empty(),
            "unexpected diagnostics: {:?}",
            compiled.diagnostics
        );
        compiled
    }

    pub fn apply_allowing_diagnostics(&mut self, objects: &[Value]) -> Arc<Compiled> {
        self.store.replace_all(parse(objects));
        let compiled = Arc::new(translate::compile(&self.store, &self.options));
        self.proxy.publish(compiled.clone());
        compiled
    }

    /// As `apply_allowing_diagnostics`, with `edit` changing the compiled configuration
    /// before it is published: for what no translator would make (the proxy's own defences).
    pub fn apply_edited(&mut self, objects: &[Value], edit: impl FnOnce(&mut Compiled)) {
        self.store.replace_all(parse(objects));
        let mut compiled = translate::compile(&self.store, &self.options);
        edit(&mut compiled);
        self.proxy.publish(Arc::new(compiled));
    }

    /// Replaces every object like a provider relist; endpoint-only changes take the fast
    /// path (refresh in place + `endpoints_changed`), anything else a full publish.
    pub fn update(&mut self, objects: &[Value]) {
        let changes = self.store.replace_all(parse(objects));
        if changes.config {
            let compiled = Arc::new(translate::compile(&self.store, &self.options));
            self.proxy.publish(compiled);
        } else if !changes.endpoints.is_empty() {
            let current = self.proxy.current().expect("published before");
            let changed =
                translate::refresh_endpoints(&current, &self.store, changes.endpoints.iter());
            self.proxy.endpoints_changed(changed);
        }
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

// ---- Kubernetes objects (JSON is YAML) ----

/// A Service with named ports: `(name, port)`.
pub fn service(name: &str, ports: &[(&str, u16)]) -> Value {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(n, p)| json!({"name": n, "port": p, "targetPort": p}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"ports": ports},
    })
}

/// An EndpointSlice of `service` with one ready endpoint on 127.0.0.1 per port set.
pub fn slice(service: &str, slice_name: &str, ports: &[(&str, u16)]) -> Value {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(n, p)| json!({"name": n, "port": p}))
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": slice_name, "namespace": "default",
                     "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "ports": ports,
        "endpoints": [{"addresses": ["127.0.0.1"]}],
    })
}

/// One slice per address, all for port name `http`.
pub fn slices(service: &str, addrs: &[SocketAddr]) -> Vec<Value> {
    addrs
        .iter()
        .map(|a| {
            slice(
                service,
                &format!("{service}-{}", a.port()),
                &[("http", a.port())],
            )
        })
        .collect()
}

/// An Ingress backend by Service port name.
pub fn to(service: &str) -> Value {
    json!({"service": {"name": service, "port": {"name": "http"}}})
}

/// A path rule.
pub fn path(path: &str, kind: &str, backend: Value) -> Value {
    json!({"path": path, "pathType": kind, "backend": backend})
}

pub fn rule(host: &str, paths: Vec<Value>) -> Value {
    json!({"host": host, "http": {"paths": paths}})
}

pub fn ingress(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["ingressClassName"] = json!("sluice");
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    })
}

/// An Ingress `name` routing `host` `/` (Prefix) to `service`, with these annotations (a JSON
/// object, names in full).
pub fn annotated_site(name: &str, host: &str, service: &str, annotations: Value) -> Value {
    let mut object = ingress(
        name,
        json!({"rules": [rule(host, vec![path("/", "Prefix", to(service))])]}),
    );
    object["metadata"]["annotations"] = annotations;
    object
}

/// The simplest site: every host and path to `service` (port `http`).
pub fn catch_all(service_name: &str, addrs: &[SocketAddr]) -> Vec<Value> {
    let mut objects = vec![
        service(service_name, &[("http", 80)]),
        ingress(
            service_name,
            json!({"rules": [{"http": {"paths": [path("/", "Prefix", to(service_name))]}}]}),
        ),
    ];
    objects.extend(slices(service_name, addrs));
    objects
}

pub fn tls_secret(name: &str, leaf: &Leaf) -> Value {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"tls.crt": b64(&leaf.cert_pem), "tls.key": b64(&leaf.key_pem)},
    })
}

/// The controller ConfigMap (`sluice/sluice`).
pub fn settings(data: &[(&str, &str)]) -> Value {
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "sluice", "namespace": "sluice"},
        "data": data,
    })
}

pub fn default_tls_secret(name: &str) -> Option<NamespacedName> {
    Some(NamespacedName::new("default", name))
}

// ---- backends ----

pub async fn start_backend(name: &str) -> backend::Backend {
    backend::Backend::start(backend::BackendConfig {
        listen: vec![SocketAddr::from((LOCALHOST, 0))],
        name: name.to_owned(),
    })
    .await
    .expect("backend starts")
}

pub fn addr_of(backend: &backend::Backend) -> SocketAddr {
    backend.local_addrs()[0]
}

/// A port on 127.0.0.1 where nothing listens.
pub fn closed_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind((LOCALHOST, 0)).unwrap();
    listener.local_addr().unwrap()
}

/// An upstream that accepts WebSocket upgrades (101) and then echoes every byte back.
pub async fn start_upgrade_upstream() -> SocketAddr {
    start_upgrade_upstream_recording().await.0
}

/// As [`start_upgrade_upstream`], also keeping every request head it received (lower case).
/// Its 101 carries `Sec-WebSocket-Accept` and `Sec-WebSocket-Protocol: chat`, as a real
/// WebSocket server's does.
pub async fn start_upgrade_upstream_recording() -> (SocketAddr, Arc<std::sync::Mutex<Vec<String>>>)
{
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
pub async fn serve_upgrade<S>(mut stream: S, seen: Arc<std::sync::Mutex<Vec<String>>>)
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

pub async fn websocket_upgrade(addr: SocketAddr) -> (TcpStream, String) {
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
    pub async fn connect(addr: SocketAddr) -> Client {
        let stream = bounded(TcpStream::connect(addr)).await.expect("connect");
        Client::over(stream).await
    }

    pub async fn over<I>(io: I) -> Client
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

    pub async fn get(&mut self, host: &str, path: &str) -> Reply {
        let request = Request::get(path)
            .header("host", host)
            .body(Full::default())
            .unwrap();
        self.send(request).await.expect("request succeeds")
    }

    pub async fn send(&mut self, request: Request<Full<Bytes>>) -> Result<Reply, hyper::Error> {
        bounded(async {
            self.sender.ready().await?;
            let response = self.sender.send_request(request).await?;
            read_reply(response).await
        })
        .await
    }

    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }
}

impl H2Client {
    pub async fn over<I>(io: I) -> H2Client
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
    pub fn handle(&self) -> H2Client {
        H2Client {
            sender: self.sender.clone(),
        }
    }

    pub async fn send(&mut self, request: Request<Full<Bytes>>) -> Result<Reply, hyper::Error> {
        bounded(async {
            self.sender.ready().await?;
            let response = self.sender.send_request(request).await?;
            read_reply(response).await
        })
        .await
    }

    pub async fn get(&mut self, url: &str) -> Reply {
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
pub async fn assert_metric(h: &Harness, line: &str) {
    let metrics = get(h.admin(), "admin", "/metrics").await.text();
    assert!(
        metrics.lines().any(|l| l == line),
        "no line {line:?} in /metrics:\n{metrics}"
    );
}

/// One request on a fresh connection.
pub async fn get(addr: SocketAddr, host: &str, path: &str) -> Reply {
    Client::connect(addr).await.get(host, path).await
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The backend that answered `/echo`.
    pub fn backend(&self) -> String {
        self.json()["backend"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

/// Writes raw bytes and returns the response head (status line and headers) as text.
pub async fn raw_head(addr: SocketAddr, request: &[u8]) -> String {
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

// ---- TLS ----

impl Leaf {
    /// A TLS server side presenting this certificate (a test backend that speaks TLS itself).
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        let key: rustls::pki_types::PrivateKeyDer<'static> =
            rustls::pki_types::pem::PemObject::from_pem_slice(self.key_pem.as_bytes()).unwrap();
        let config =
            rustls::ServerConfig::builder_with_provider(model::tls::crypto_provider().clone())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(vec![self.der.clone()], key)
                .unwrap();
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    }
}

impl TestCa {
    pub fn new() -> TestCa {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Sluice test CA");
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        TestCa {
            root: cert.der().clone(),
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// A certificate for `names` (DNS names, wildcards, or IP addresses).
    pub fn leaf(&self, names: &[&str]) -> Leaf {
        let key = rcgen::KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = rcgen::CertificateParams::new(names.clone()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, names[0].clone());
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
        }
    }

    /// A CA this one signs (an intermediate); its `root()` is its own certificate.
    pub fn intermediate(&self, name: &str) -> TestCa {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        TestCa {
            root: cert.der().clone(),
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// The CA's own certificate (DER).
    pub fn root(&self) -> &CertificateDer<'static> {
        &self.root
    }

    /// The CA's own certificate in PEM, as a Secret's `ca.crt` holds it.
    pub fn root_pem(&self) -> String {
        let text = base64::engine::general_purpose::STANDARD.encode(self.root.as_ref());
        let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
        for line in text.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(line).unwrap());
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
        pem
    }

    /// A client that trusts only this CA and verifies name and chain.
    pub fn connector(&self, alpn: &[&[u8]]) -> tokio_rustls::TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.root.clone()).unwrap();
        let mut config =
            rustls::ClientConfig::builder_with_provider(model::tls::crypto_provider().clone())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        tokio_rustls::TlsConnector::from(Arc::new(config))
    }

    /// Connects with SNI `name` (no SNI for an IP address) and returns the stream and the
    /// certificate the server presented.
    pub async fn connect(
        &self,
        addr: SocketAddr,
        name: &str,
        alpn: &[&[u8]],
    ) -> Result<
        (
            tokio_rustls::client::TlsStream<TcpStream>,
            CertificateDer<'static>,
        ),
        std::io::Error,
    > {
        let server_name = ServerName::try_from(name.to_owned()).unwrap();
        let stream = bounded(TcpStream::connect(addr)).await?;
        let tls = bounded(self.connector(alpn).connect(server_name, stream)).await?;
        let presented = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
        Ok((tls, presented))
    }
}

// ---- waiting ----

/// Runs `future` for at most [`STEP`], panicking after.
pub async fn bounded<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(STEP, future)
        .await
        .expect("test step timed out")
}

/// Polls `check` until it holds, for at most [`STEP`].
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + STEP;
    loop {
        if check().await {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Shuts the proxy down off the async runtime (it blocks until every thread has stopped).
pub async fn shutdown(proxy: Proxy) {
    bounded(tokio::task::spawn_blocking(move || proxy.shutdown()))
        .await
        .expect("shutdown does not panic");
}

/// A ClientHello record as rustls writes it, asking for `name`.
pub fn client_hello(name: &str) -> Vec<u8> {
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
pub async fn trickle_until_closed(addr: SocketAddr, pieces: &[&[u8]], every: Duration) -> Duration {
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
        let mut buf = [0u8; 4096];
        while let Ok(1..) = reader.read(&mut buf).await {}
    };
    bounded(async {
        tokio::select! {
            () = read => {}
            () = write => {}
        }
    })
    .await;
    started.elapsed()
}
