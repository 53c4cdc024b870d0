//! The span exporter: a thread that batches the workers' spans and sends them to the
//! OpenTelemetry Collector over OTLP: gRPC (ingress-nginx's, port 4317) or HTTP/protobuf
//! (`POST /v1/traces`, port 4318).
//!
//! ```text
//!  worker SpanBuffer ─try_send (bounded: QUEUED_HANDOVERS; full ─▶ dropped + counted)─┐
//!                                                                                    ▼
//!  thread "sluice-otel": queue ≤ otel-max-queuesize spans (more ─▶ dropped + counted)
//!     ─▶ when otel-max-export-batch-size spans wait, or the oldest waited
//!        otel-schedule-delay-millis: one ExportTraceServiceRequest of ≤ batch-size spans,
//!        wrapped in the resource (service.name = otel-service-name) and scope
//!     ─▶ otlp-collector-host:port, one kept connection: gRPC over HTTP/2 (hyper, on a
//!        current-thread runtime this thread drives only while an export waits) or HTTP/1.1
//!        (blocking); failed ─▶ the spans are counted as dropped, nothing is retried: the
//!        queue stays bounded
//! ```
//! Where and how spans are sent is read from the configuration the latest spans came with,
//! so a ConfigMap change applies without a restart. The messages are encoded by hand
//! (`protobuf`, a few dozen lines) on the hyper already in the binary, rather than with the
//! OpenTelemetry SDK and its exporter, which bring a second HTTP client stack (or tonic) and
//! ~70 crates the proxy does not otherwise build.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use model::settings::{OpenTelemetry, OtlpProtocol};
use model::Compiled;

use crate::protobuf;

/// Worker hand-overs waiting for the exporter thread (each ≤ 64 spans and about
/// `otel::BATCH_BYTES`: ~2 MiB in all); beyond, dropped.
const QUEUED_HANDOVERS: usize = 32;
/// Connecting, and each read or write of an export, give up after this (OTLP's default
/// export timeout).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// A failing Collector is reported at most this often.
const WARN_EVERY: Duration = Duration::from_secs(30);
/// A response head larger than this is not a Collector's.
const MAX_RESPONSE_HEAD: usize = 16 * 1024;

/// The exporter thread's end, shared by the workers.
pub(crate) struct SpanSink {
    sender: mpsc::SyncSender<Message>,
    /// Spans dropped: the queue was full, or the export failed.
    pub(crate) dropped: Arc<AtomicU64>,
    /// The thread answers a `Flush` here once everything before it is sent.
    flushed: Mutex<mpsc::Receiver<()>>,
}

enum Message {
    Spans(Handover),
    /// Export what waits now, then answer on `flushed` (shutdown).
    Flush,
}

/// One worker buffer's spans, encoded (`ScopeSpans.spans` fields).
struct Handover {
    config: Arc<Compiled>,
    encoded: Vec<u8>,
    spans: u32,
}

impl SpanSink {
    /// Starts the exporter thread. It ends when every sender is gone.
    pub(crate) fn start() -> std::io::Result<Arc<SpanSink>> {
        let (sender, receiver) = mpsc::sync_channel(QUEUED_HANDOVERS);
        let (flushed, flushed_receiver) = mpsc::channel();
        let dropped = Arc::new(AtomicU64::new(0));
        let mut exporter = Exporter {
            queue: VecDeque::new(),
            queued: 0,
            config: None,
            collector: Collector::default(),
            dropped: dropped.clone(),
            last_warning: None,
        };
        std::thread::Builder::new()
            .name("sluice-otel".into())
            .spawn(move || exporter.run(&receiver, &flushed))?;
        Ok(Arc::new(SpanSink {
            sender,
            dropped,
            flushed: Mutex::new(flushed_receiver),
        }))
    }

    /// Queues a worker's spans; never blocks (full: dropped and counted).
    pub(crate) fn hand_over(&self, config: Arc<Compiled>, encoded: Vec<u8>, spans: u32) {
        let handover = Handover {
            config,
            encoded,
            spans,
        };
        if self.sender.try_send(Message::Spans(handover)).is_err() {
            self.dropped.fetch_add(u64::from(spans), Ordering::Relaxed);
        }
    }

    /// Waits, at most `limit`, until what was handed over has been exported (at shutdown,
    /// after the workers' last flush). An unreachable Collector is not waited for past it.
    pub(crate) fn wait_exported(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            match self.sender.try_send(Message::Flush) {
                Ok(()) => break,
                Err(mpsc::TrySendError::Full(_)) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(_) => return,
            }
        }
        let flushed = self.flushed.lock().unwrap_or_else(|p| p.into_inner());
        let _ = flushed.recv_timeout(deadline.saturating_duration_since(Instant::now()));
    }
}

/// The thread's state.
struct Exporter {
    queue: VecDeque<Handover>,
    /// Spans in `queue`.
    queued: u64,
    /// The latest configuration spans came with.
    config: Option<Arc<Compiled>>,
    collector: Collector,
    dropped: Arc<AtomicU64>,
    last_warning: Option<Instant>,
}

impl Exporter {
    fn run(&mut self, receiver: &mpsc::Receiver<Message>, flushed: &mpsc::Sender<()>) {
        // When the oldest waiting span must go out.
        let mut due: Option<Instant> = None;
        loop {
            let message = match due {
                Some(due) => receiver.recv_timeout(due.saturating_duration_since(Instant::now())),
                None => receiver
                    .recv()
                    .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            };
            match message {
                Ok(Message::Spans(handover)) => {
                    let settings = &handover.config.settings.opentelemetry;
                    let spans = u64::from(handover.spans);
                    if self.queued + spans > u64::from(settings.max_queue_size) {
                        self.dropped.fetch_add(spans, Ordering::Relaxed);
                        continue;
                    }
                    due.get_or_insert_with(|| Instant::now() + settings.schedule_delay);
                    let batch = u64::from(settings.max_export_batch_size);
                    self.config = Some(handover.config.clone());
                    self.queued += spans;
                    self.queue.push_back(handover);
                    while self.queued >= batch {
                        self.export_one();
                    }
                }
                Ok(Message::Flush) => {
                    self.export_all();
                    due = None;
                    let _ = flushed.send(());
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.export_all();
                    due = None;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    self.export_all();
                    return;
                }
            }
            if self.queue.is_empty() {
                due = None;
            }
        }
    }

    fn export_all(&mut self) {
        while !self.queue.is_empty() {
            self.export_one();
        }
    }

    /// Sends the oldest hand-overs, up to `otel-max-export-batch-size` spans (at least one
    /// hand-over), in one request.
    fn export_one(&mut self) {
        let Some(config) = self.config.clone() else {
            // Unreachable: every hand-over sets it before it is queued.
            self.queue.clear();
            self.queued = 0;
            return;
        };
        let settings = &config.settings.opentelemetry;
        let limit = u64::from(settings.max_export_batch_size);
        let mut spans = 0u64;
        let mut parts = Vec::new();
        while let Some(next) = self.queue.front() {
            let n = u64::from(next.spans);
            if !parts.is_empty() && spans + n > limit {
                break;
            }
            spans += n;
            parts.push(self.queue.pop_front().expect("front exists"));
        }
        self.queued -= spans;
        if settings.collector_host.is_empty() {
            // Diagnosed at compile: tracing on without a Collector.
            self.dropped.fetch_add(spans, Ordering::Relaxed);
            return;
        }
        let body = request_body(settings, parts.iter().map(|p| p.encoded.as_slice()));
        if let Err(e) = self.collector.post(settings, body) {
            self.dropped.fetch_add(spans, Ordering::Relaxed);
            let now = Instant::now();
            if self
                .last_warning
                .is_none_or(|at| now.duration_since(at) >= WARN_EVERY)
            {
                self.last_warning = Some(now);
                tracing::warn!(
                    error = %e,
                    collector = %format_args!("{}:{}", settings.collector_host, settings.collector_port),
                    spans,
                    "exporting spans failed; they are dropped (sluice_otel_spans_dropped_total)"
                );
            }
        }
    }
}

/// An `ExportTraceServiceRequest`: one resource (`service.name` = `otel-service-name`), one
/// scope (`sluice`), these encoded spans.
fn request_body<'a>(settings: &OpenTelemetry, spans: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut body = Vec::with_capacity(64 * 1024);
    protobuf::message(&mut body, REQUEST_RESOURCE_SPANS, |resource_spans| {
        protobuf::message(resource_spans, RESOURCE_SPANS_RESOURCE, |resource| {
            protobuf::message(resource, RESOURCE_ATTRIBUTES, |kv| {
                protobuf::string(kv, KEY_VALUE_KEY, b"service.name");
                protobuf::message(kv, KEY_VALUE_VALUE, |value| {
                    protobuf::string(value, any_value::STRING, settings.service_name.as_bytes())
                });
            });
        });
        protobuf::message(resource_spans, RESOURCE_SPANS_SCOPE_SPANS, |scope_spans| {
            protobuf::message(scope_spans, SCOPE_SPANS_SCOPE, |scope| {
                protobuf::string(scope, SCOPE_NAME, b"sluice");
                protobuf::string(scope, SCOPE_VERSION, env!("CARGO_PKG_VERSION").as_bytes());
            });
            // Each is already a `ScopeSpans.spans` field.
            for spans in spans {
                scope_spans.extend_from_slice(spans);
            }
        });
    });
    body
}

/// `ExportTraceServiceRequest.resource_spans`, and the fields below it
/// (opentelemetry/proto/collector/trace/v1/trace_service.proto, trace/v1/trace.proto).
const REQUEST_RESOURCE_SPANS: u32 = 1;
const RESOURCE_SPANS_RESOURCE: u32 = 1;
const RESOURCE_SPANS_SCOPE_SPANS: u32 = 2;
const RESOURCE_ATTRIBUTES: u32 = 1;
const SCOPE_SPANS_SCOPE: u32 = 1;
const SCOPE_NAME: u32 = 1;
const SCOPE_VERSION: u32 = 2;
/// The gRPC method.
const GRPC_EXPORT: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
enum ExportError {
    #[error("resolving or connecting to the collector: {0}")]
    Connect(#[source] std::io::Error),
    #[error("talking to the collector: {0}")]
    Io(#[from] std::io::Error),
    #[error("HTTP/2 to the collector: {0}")]
    Http2(#[from] hyper::Error),
    #[error("the collector did not answer within {EXPORT_TIMEOUT:?}")]
    Timeout,
    #[error("the collector answered HTTP status {0}")]
    Status(u16),
    #[error("the collector answered gRPC status {status}: {message}")]
    Grpc { status: String, message: String },
    #[error("the collector's answer is not OTLP over HTTP")]
    BadResponse,
}

/// The connection to the Collector, kept between exports, made on first use and after a
/// failure: HTTP/1.1 (blocking) or HTTP/2 for gRPC (hyper, on a runtime of this thread's own
/// that runs only while an export waits).
#[derive(Default)]
struct Collector {
    /// Where the connection goes and how; another target drops it.
    to: Option<(String, OtlpProtocol)>,
    http1: Option<TcpStream>,
    grpc: Option<http2::SendRequest<Full<Bytes>>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Collector {
    fn post(&mut self, settings: &OpenTelemetry, body: Vec<u8>) -> Result<(), ExportError> {
        let host = settings.collector_host.as_str();
        let authority = if host.contains(':') {
            format!("[{host}]:{}", settings.collector_port)
        } else {
            format!("{host}:{}", settings.collector_port)
        };
        let target = (authority, settings.collector_protocol);
        if self.to.as_ref() != Some(&target) {
            self.http1 = None;
            self.grpc = None;
            self.to = Some(target.clone());
        }
        let authority = target.0;
        match settings.collector_protocol {
            OtlpProtocol::HttpProtobuf => self.post_http1(settings, &authority, &body),
            OtlpProtocol::Grpc => self.post_grpc(settings, &authority, body),
        }
    }

    fn post_http1(
        &mut self,
        settings: &OpenTelemetry,
        authority: &str,
        body: &[u8],
    ) -> Result<(), ExportError> {
        let mut head = Vec::with_capacity(256);
        let _ = write!(
            head,
            "POST /v1/traces HTTP/1.1\r\nHost: {authority}\r\n\
             Content-Type: application/x-protobuf\r\nUser-Agent: sluice/{}\r\n\
             Content-Length: {}\r\n\r\n",
            env!("CARGO_PKG_VERSION"),
            body.len()
        );
        // A kept connection the Collector closed meanwhile fails at once: one fresh try.
        let reused = self.http1.is_some();
        match self.exchange_http1(settings, &head, body) {
            Err(ExportError::Io(_)) if reused => self.exchange_http1(settings, &head, body),
            other => other,
        }
    }

    fn exchange_http1(
        &mut self,
        settings: &OpenTelemetry,
        head: &[u8],
        body: &[u8],
    ) -> Result<(), ExportError> {
        let stream = match self.http1.take() {
            Some(stream) => stream,
            None => connect(&settings.collector_host, settings.collector_port)
                .map_err(ExportError::Connect)?,
        };
        let mut stream = stream;
        if send(&mut stream, head, body)? {
            self.http1 = Some(stream);
        }
        Ok(())
    }

    fn post_grpc(
        &mut self,
        settings: &OpenTelemetry,
        authority: &str,
        body: Vec<u8>,
    ) -> Result<(), ExportError> {
        if self.runtime.is_none() {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            self.runtime = Some(runtime);
        }
        let runtime = self.runtime.as_ref().expect("made above");
        // gRPC's length-prefixed message: not compressed, 4 bytes of length.
        let mut framed = Vec::with_capacity(body.len() + 5);
        framed.push(0);
        framed.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_be_bytes());
        framed.extend_from_slice(&body);
        let framed = Bytes::from(framed);
        let uri = format!("http://{authority}{GRPC_EXPORT}");
        let grpc = &mut self.grpc;
        runtime
            .block_on(async {
                let reused = grpc.as_ref().is_some_and(|s| !s.is_closed());
                let result = tokio::time::timeout(
                    EXPORT_TIMEOUT,
                    export_grpc(grpc, settings, &uri, framed.clone()),
                )
                .await
                .unwrap_or(Err(ExportError::Timeout));
                match result {
                    // A connection the Collector closed meanwhile: one fresh try.
                    Err(ExportError::Http2(_)) if reused => {
                        *grpc = None;
                        tokio::time::timeout(
                            EXPORT_TIMEOUT,
                            export_grpc(grpc, settings, &uri, framed),
                        )
                        .await
                        .unwrap_or(Err(ExportError::Timeout))
                    }
                    other => other,
                }
            })
            .inspect_err(|_| self.grpc = None)
    }
}

/// One `TraceService/Export` call on the kept HTTP/2 connection (made here when there is none).
async fn export_grpc(
    sender: &mut Option<http2::SendRequest<Full<Bytes>>>,
    settings: &OpenTelemetry,
    uri: &str,
    framed: Bytes,
) -> Result<(), ExportError> {
    if sender.as_ref().is_none_or(|s| s.is_closed()) {
        let stream = tokio::net::TcpStream::connect((
            settings.collector_host.as_str(),
            settings.collector_port,
        ))
        .await
        .map_err(ExportError::Connect)?;
        stream.set_nodelay(true).map_err(ExportError::Connect)?;
        let (handle, connection) =
            http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "the connection to the collector ended");
            }
        });
        *sender = Some(handle);
    }
    let sender = sender.as_mut().expect("connected above");
    let request = http::Request::post(uri)
        .header(header::CONTENT_TYPE, "application/grpc")
        .header(header::TE, "trailers")
        .header(
            header::USER_AGENT,
            concat!("sluice/", env!("CARGO_PKG_VERSION")),
        )
        .body(Full::new(framed))
        .map_err(|_| ExportError::BadResponse)?;
    sender.ready().await?;
    let response = sender.send_request(request).await?;
    let (head, body) = response.into_parts();
    if head.status != http::StatusCode::OK {
        return Err(ExportError::Status(head.status.as_u16()));
    }
    let collected = body.collect().await?;
    // An error may come as headers alone ("trailers-only"), else in the trailers.
    let trailers = collected.trailers();
    let field = |name: &str| {
        head.headers
            .get(name)
            .or_else(|| trailers.and_then(|t| t.get(name)))
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    match field("grpc-status").as_deref() {
        Some("0") => Ok(()),
        Some(status) => Err(ExportError::Grpc {
            status: status.to_owned(),
            message: field("grpc-message").unwrap_or_default(),
        }),
        None => Err(ExportError::BadResponse),
    }
}

fn connect(host: &str, port: u16) -> std::io::Result<TcpStream> {
    let mut last = None;
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, EXPORT_TIMEOUT) {
            Ok(stream) => {
                stream.set_read_timeout(Some(EXPORT_TIMEOUT))?;
                stream.set_write_timeout(Some(EXPORT_TIMEOUT))?;
                stream.set_nodelay(true)?;
                return Ok(stream);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("the name has no address")))
}

/// Writes the request, reads the response; `Ok(true)` when the connection can be reused.
fn send(stream: &mut TcpStream, head: &[u8], body: &[u8]) -> Result<bool, ExportError> {
    stream.write_all(head)?;
    stream.write_all(body)?;
    let mut buffer = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let (status, length, close, head_length) = loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
        }
        buffer.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut response = httparse::Response::new(&mut headers);
        match response.parse(&buffer) {
            Ok(httparse::Status::Complete(head_length)) => {
                let header = |name: &str| {
                    response
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case(name))
                        .map(|h| h.value)
                };
                let length = header("content-length")
                    .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse::<usize>().ok());
                let close = header("connection").is_some_and(|v| v.eq_ignore_ascii_case(b"close"));
                let status = response.code.ok_or(ExportError::BadResponse)?;
                break (status, length, close, head_length);
            }
            Ok(httparse::Status::Partial) if buffer.len() < MAX_RESPONSE_HEAD => {}
            _ => return Err(ExportError::BadResponse),
        }
    };
    // The body says how much was accepted; a rejected part is what a status says too.
    let reusable = match length {
        Some(length) => {
            let mut have = buffer.len() - head_length;
            while have < length {
                let n = stream.read(&mut chunk)?;
                if n == 0 {
                    return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
                }
                have += n;
            }
            !close
        }
        // Chunked or until close: not worth reading; a new connection next time.
        None => false,
    };
    if !(200..300).contains(&status) {
        return Err(ExportError::Status(status));
    }
    Ok(reusable)
}

/// `KeyValue`'s fields.
pub(crate) const KEY_VALUE_KEY: u32 = 1;
pub(crate) const KEY_VALUE_VALUE: u32 = 2;

/// `AnyValue`'s cases (opentelemetry/proto/common/v1/common.proto).
pub(crate) mod any_value {
    pub(crate) const STRING: u32 = 1;
    pub(crate) const INT: u32 = 3;
    pub(crate) const ARRAY: u32 = 5;
}
