//! The span exporter: a thread that batches the workers' spans and sends them to the
//! OpenTelemetry Collector as OTLP/HTTP with JSON bodies (`POST /v1/traces`).
//!
//! ```text
//!  worker SpanBuffer ─try_send (bounded: QUEUED_HANDOVERS; full ─▶ dropped + counted)─┐
//!                                                                                    ▼
//!  thread "sluice-otel": queue ≤ otel-max-queuesize spans (more ─▶ dropped + counted)
//!     ─▶ when otel-max-export-batch-size spans wait, or the oldest waited
//!        otel-schedule-delay-millis: one request of ≤ batch-size spans, wrapped in the
//!        resource (service.name = otel-service-name) and scope ─▶ blocking HTTP/1.1 POST to
//!        otlp-collector-host:port (one keep-alive connection; failed ─▶ the spans are counted
//!        as dropped, nothing is retried: the queue stays bounded)
//! ```
//! Where and how spans are sent is read from the configuration the latest spans came with,
//! so a ConfigMap change applies without a restart. JSON rather than protobuf, and our own few
//! lines of HTTP/1.1 rather than the OpenTelemetry SDK: no dependency is added (the SDK with
//! its HTTP exporter brings a second HTTP client stack and an async runtime of its own to a
//! binary that already has both); the Collector takes OTLP/JSON on the same port.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use model::settings::OpenTelemetry;
use model::Compiled;

use crate::otel::json_string;

/// Worker hand-overs waiting for the exporter thread (each ≤ 64 spans); beyond, dropped.
const QUEUED_HANDOVERS: usize = 256;
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

/// One worker buffer's spans: JSON span objects, comma-separated.
struct Handover {
    config: Arc<Compiled>,
    json: Vec<u8>,
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
    pub(crate) fn hand_over(&self, config: Arc<Compiled>, json: Vec<u8>, spans: u32) {
        let handover = Handover {
            config,
            json,
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
        let body = request_body(settings, parts.iter().map(|p| p.json.as_slice()));
        if let Err(e) = self.collector.post(settings, &body) {
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

/// An `ExportTraceServiceRequest` in OTLP JSON: one resource, one scope, these spans.
fn request_body<'a>(settings: &OpenTelemetry, spans: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut body = Vec::with_capacity(64 * 1024);
    body.extend_from_slice(
        b"{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":",
    );
    json_string(&mut body, settings.service_name.as_bytes());
    body.extend_from_slice(b"}}]},\"scopeSpans\":[{\"scope\":{\"name\":\"sluice\",\"version\":\"");
    body.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
    body.extend_from_slice(b"\"},\"spans\":[");
    for (i, json) in spans.enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(json);
    }
    body.extend_from_slice(b"]}]}]}");
    body
}

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
enum ExportError {
    #[error("resolving or connecting to the collector: {0}")]
    Connect(#[source] std::io::Error),
    #[error("talking to the collector: {0}")]
    Io(#[from] std::io::Error),
    #[error("the collector answered {0}")]
    Status(u16),
    #[error("the collector's answer is not HTTP/1.1")]
    BadResponse,
}

/// One keep-alive connection to the Collector, made on first use and after a failure.
#[derive(Default)]
struct Collector {
    connection: Option<(String, TcpStream)>,
}

impl Collector {
    fn post(&mut self, settings: &OpenTelemetry, body: &[u8]) -> Result<(), ExportError> {
        let host = settings.collector_host.as_str();
        let authority = if host.contains(':') {
            format!("[{host}]:{}", settings.collector_port)
        } else {
            format!("{host}:{}", settings.collector_port)
        };
        let mut head = Vec::with_capacity(256);
        let _ = write!(
            head,
            "POST /v1/traces HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
             User-Agent: sluice/{}\r\nContent-Length: {}\r\n\r\n",
            env!("CARGO_PKG_VERSION"),
            body.len()
        );
        // A kept connection the Collector closed meanwhile fails at once: one fresh try.
        let reused = self
            .connection
            .as_ref()
            .is_some_and(|(to, _)| *to == authority);
        if !reused {
            self.connection = None;
        }
        match self.exchange(settings, &authority, &head, body) {
            Err(ExportError::Io(_)) if reused => {
                self.connection = None;
                self.exchange(settings, &authority, &head, body)
            }
            other => other,
        }
    }

    fn exchange(
        &mut self,
        settings: &OpenTelemetry,
        authority: &str,
        head: &[u8],
        body: &[u8],
    ) -> Result<(), ExportError> {
        if self.connection.is_none() {
            let stream = connect(&settings.collector_host, settings.collector_port)
                .map_err(ExportError::Connect)?;
            self.connection = Some((authority.to_owned(), stream));
        }
        let (_, stream) = self.connection.as_mut().expect("connected above");
        let result = send(stream, head, body);
        if !matches!(result, Ok(true)) {
            self.connection = None;
        }
        result.map(|_| ())
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
