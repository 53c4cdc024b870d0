//! The access log: one line per request, in ingress-nginx's `log-format-upstream`
//! (`model::access_log`), written without ever making a worker wait.
//!
//! ```text
//!  respond(): Record::begin (what the format wants from the request head)
//!     ─▶ route labels, the request ID, each upstream attempt (upstream::exchange), the status
//!     ─▶ body bytes (ResponseBody) ─▶ RequestGuard dropped: the request is over
//!  (the same record makes the request's span when its route traces: `otel`)
//!  worker: line formatted into its own buffer ─▶ ≥ 32 KiB, or every 100 ms (housekeeping)
//!     ─▶ try_send to the writer thread (a bounded channel; full: the lines are dropped and
//!        counted in sluice_access_log_lines_dropped_total)
//!  writer thread ("sluice-access-log"): write(2) to stdout or the file
//! ```
//! Bounded memory: at most `QUEUED_BUFFERS` buffers wait for the writer, plus one being filled
//! per worker. Times are UTC (`+0000`), as in a container without a time zone.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderValue, Method, Uri, Version};
use model::access_log::{
    escape_into, Escape, Segment, StreamLogFormat, StreamVariable, Variable, Wants,
};
use rustls::{CipherSuite, ProtocolVersion};

use crate::current::Current;
use crate::headers;
use crate::metrics::RouteMetrics;

/// A worker hands its buffer over once it holds this much.
pub(crate) const FLUSH_BYTES: usize = 32 * 1024;
/// And at least this often while it holds anything.
pub(crate) const FLUSH_PERIOD: Duration = Duration::from_millis(100);
/// Buffers waiting for the writer; beyond that, lines are dropped (and counted).
const QUEUED_BUFFERS: usize = 64;
/// Request headers kept inline per request; a format wanting more keeps the rest in a `Vec`.
const INLINE_HEADERS: usize = 4;

/// Where the lines go.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum AccessLogOutput {
    /// The process's standard output (ingress-nginx's `/var/log/nginx/access.log` is a link
    /// to it).
    #[default]
    Stdout,
    /// Appended to this file.
    File(PathBuf),
}

/// The writer thread's end, shared by the workers.
pub(crate) struct Sink {
    sender: mpsc::SyncSender<Vec<u8>>,
    /// Lines dropped because the writer was behind.
    pub(crate) dropped: AtomicU64,
    /// The writer answers an empty buffer here once everything before it is written.
    written: std::sync::Mutex<mpsc::Receiver<()>>,
}

impl Sink {
    /// Opens `output` and starts the writer thread. The thread ends when every sender is gone
    /// (the process ending does not wait for it).
    pub(crate) fn start(output: &AccessLogOutput) -> std::io::Result<Arc<Sink>> {
        let mut out: Box<dyn Write + Send> = match output {
            AccessLogOutput::Stdout => Box::new(std::io::stdout()),
            AccessLogOutput::File(path) => Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?,
            ),
        };
        let (sender, receiver) = mpsc::sync_channel::<Vec<u8>>(QUEUED_BUFFERS);
        let (written, written_receiver) = mpsc::channel();
        std::thread::Builder::new()
            .name("sluice-access-log".into())
            .spawn(move || {
                for buffer in receiver {
                    if buffer.is_empty() {
                        let _ = written.send(());
                        continue;
                    }
                    if let Err(e) = out.write_all(&buffer).and_then(|()| out.flush()) {
                        // Nothing else can be done with a log that cannot be written; the
                        // proxy keeps serving.
                        tracing::error!(error = %e, "writing the access log failed");
                    }
                }
            })?;
        Ok(Arc::new(Sink {
            sender,
            dropped: AtomicU64::new(0),
            written: std::sync::Mutex::new(written_receiver),
        }))
    }

    /// Waits, at most `limit`, until the writer has written what was handed to it (at
    /// shutdown, after the workers' last flush). A writer stuck on a full pipe is not waited for.
    pub(crate) fn wait_written(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            match self.sender.try_send(Vec::new()) {
                Ok(()) => break,
                Err(mpsc::TrySendError::Full(_)) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(_) => return,
            }
        }
        let written = self.written.lock().unwrap_or_else(|p| p.into_inner());
        let _ = written.recv_timeout(deadline.saturating_duration_since(Instant::now()));
    }
}

/// One worker's lines not yet handed to the writer.
#[derive(Default)]
pub(crate) struct LogBuffer {
    bytes: Vec<u8>,
    lines: u64,
}

impl LogBuffer {
    /// Adds the record's line (if it is logged); returns the bytes held.
    pub(crate) fn write(&mut self, record: &Record, context: &LineContext, end: Instant) -> usize {
        if record.write_line(&mut self.bytes, context, end) {
            self.lines += 1;
        }
        self.bytes.len()
    }

    /// Adds one TCP service connection's line in `log-format-stream`. Returns the bytes held.
    pub(crate) fn write_stream(&mut self, format: &StreamLogFormat, line: &StreamLine) -> usize {
        line.write(&mut self.bytes, format);
        self.lines += 1;
        self.bytes.len()
    }

    /// Hands the lines to the writer; never blocks.
    pub(crate) fn flush(&mut self, sink: &Sink) {
        if self.bytes.is_empty() {
            return;
        }
        let bytes = std::mem::replace(&mut self.bytes, Vec::with_capacity(FLUSH_BYTES + 1024));
        let lines = std::mem::take(&mut self.lines);
        if sink.sender.try_send(bytes).is_err() {
            sink.dropped.fetch_add(lines, Ordering::Relaxed);
        }
    }
}

/// What a TCP service connection's log line says (nginx's stream variables).
pub(crate) struct StreamLine<'a> {
    /// The client (the PROXY protocol's source when a trusted load balancer sent one).
    pub(crate) remote: SocketAddr,
    /// The source a PROXY protocol header named, trusted or not.
    pub(crate) proxy_protocol_addr: Option<IpAddr>,
    /// The listener's address.
    pub(crate) server: SocketAddr,
    /// `TCP` or `UDP`.
    pub(crate) protocol: &'static str,
    /// nginx's stream `$status`: 200 spliced, 400 bad PROXY header, 502 no endpoint reached.
    pub(crate) status: u16,
    /// To the client.
    pub(crate) bytes_sent: u64,
    /// From the client.
    pub(crate) bytes_received: u64,
    pub(crate) session: Duration,
    /// Every endpoint tried, in order.
    pub(crate) upstreams: &'a [SocketAddr],
    /// From the accept to the upstream connection (none: no endpoint reached).
    pub(crate) upstream_connect: Option<Duration>,
    pub(crate) serial: u64,
}

impl StreamLine<'_> {
    fn write(&self, out: &mut Vec<u8>, format: &StreamLogFormat) {
        let mut numbers = itoa::Buffer::new();
        let escape = format.escape;
        for segment in &format.segments {
            let variable = match segment {
                Segment::Literal(text) => {
                    out.extend_from_slice(text.as_bytes());
                    continue;
                }
                Segment::Variable(variable) => variable,
            };
            match variable {
                StreamVariable::RemoteAddr => {
                    let _ = write!(out, "{}", self.remote.ip().to_canonical());
                }
                StreamVariable::RemotePort => {
                    out.extend_from_slice(numbers.format(self.remote.port()).as_bytes())
                }
                StreamVariable::ProxyProtocolAddr => {
                    if let Some(addr) = self.proxy_protocol_addr {
                        let _ = write!(out, "{addr}");
                    }
                }
                StreamVariable::ServerAddr => {
                    let _ = write!(out, "{}", self.server.ip().to_canonical());
                }
                StreamVariable::ServerPort => {
                    out.extend_from_slice(numbers.format(self.server.port()).as_bytes())
                }
                StreamVariable::TimeLocal => time_local(out),
                StreamVariable::TimeIso8601 => time_iso8601(out),
                StreamVariable::Msec => {
                    let since = SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .unwrap_or_default();
                    let _ = write!(out, "{}.{:03}", since.as_secs(), since.subsec_millis());
                }
                StreamVariable::Protocol => out.extend_from_slice(self.protocol.as_bytes()),
                StreamVariable::Status => {
                    out.extend_from_slice(numbers.format(self.status).as_bytes())
                }
                // A splice passes on every byte: what one side sent the other received.
                StreamVariable::BytesSent | StreamVariable::UpstreamBytesReceived => {
                    out.extend_from_slice(numbers.format(self.bytes_sent).as_bytes())
                }
                StreamVariable::BytesReceived | StreamVariable::UpstreamBytesSent => {
                    out.extend_from_slice(numbers.format(self.bytes_received).as_bytes())
                }
                StreamVariable::SessionTime => seconds(out, self.session),
                StreamVariable::UpstreamAddr => {
                    if self.upstreams.is_empty() {
                        out.push(b'-');
                    }
                    for (i, addr) in self.upstreams.iter().enumerate() {
                        if i > 0 {
                            out.extend_from_slice(b", ");
                        }
                        let _ = write!(out, "{addr}");
                    }
                }
                StreamVariable::UpstreamConnectTime => match self.upstream_connect {
                    Some(took) => seconds(out, took),
                    None => out.push(b'-'),
                },
                StreamVariable::Connection => {
                    out.extend_from_slice(numbers.format(self.serial).as_bytes())
                }
                StreamVariable::Pid => {
                    out.extend_from_slice(numbers.format(std::process::id()).as_bytes())
                }
                StreamVariable::Hostname => escape_into(out, hostname().as_bytes(), escape),
            }
        }
        out.push(b'\n');
    }
}

/// One upstream attempt.
#[derive(Clone, Debug)]
pub(crate) struct Attempt {
    pub(crate) addr: std::net::SocketAddr,
    pub(crate) start: Instant,
    /// The connection was ready (reused or connected).
    pub(crate) connected: Option<Instant>,
    /// The response head arrived, or the attempt failed.
    pub(crate) answered: Option<Instant>,
    /// The upstream's status, or the one its failure maps to (502, 504).
    pub(crate) status: u16,
}

/// What one request's line is made of, gathered as the request goes through the pipeline.
pub(crate) struct Record {
    pub(crate) log: Current,
    /// Refused before a request line could be read (a head hyper could not parse): the
    /// request's fields are logged as `-`, as nginx logs them.
    unread: bool,
    pub(crate) method: Method,
    pub(crate) target: Uri,
    pub(crate) version: Version,
    pub(crate) host: Option<HeaderValue>,
    pub(crate) client: IpAddr,
    headers: [Option<HeaderValue>; INLINE_HEADERS],
    more_headers: Vec<Option<HeaderValue>>,
    pub(crate) request_length: u64,
    /// The path sent upstream (after rewrite), when the format wants `$uri`.
    pub(crate) uri_sent: Option<Uri>,
    pub(crate) request_id: RequestId,
    pub(crate) route: Option<Rc<RouteMetrics>>,
    pub(crate) attempts: Vec<Attempt>,
    pub(crate) status: u16,
    response_headers: Vec<Option<HeaderValue>>,
    pub(crate) response_head_bytes: u64,
    pub(crate) body_bytes: u64,
    pub(crate) connection_requests: u64,
    /// The request's trace, when its route traces (`otel`): a span is made from this record.
    pub(crate) trace: Option<Box<crate::trace_context::Trace>>,
    /// Answered by ingress-nginx's default server, whose line is off unless
    /// `enable-access-log-for-default-backend` (the span, if any, is still made).
    pub(crate) unlogged: bool,
}

/// What a configuration without an access log (a record kept for a span) wants.
static NO_LINE: Wants = Wants {
    request_headers: Vec::new(),
    response_headers: Vec::new(),
    request_length: false,
    uri: false,
    upstream: false,
    cookies: false,
};

/// `$req_id`: the one sent upstream.
#[derive(Default)]
pub(crate) enum RequestId {
    #[default]
    None,
    Generated([u8; 32]),
    Client(HeaderValue),
}

impl Record {
    /// A record for a request with this head, when the configuration logs or traces; `None`
    /// otherwise.
    pub(crate) fn begin(
        config: &Current,
        head: &http::request::Parts,
        client: IpAddr,
        request_length: u64,
        connection_requests: u64,
    ) -> Option<Box<Record>> {
        let wants = match &config.access_log {
            Some(log) => &log.format.wants,
            None if config.tracing => &NO_LINE,
            None => return None,
        };
        let mut headers: [Option<HeaderValue>; INLINE_HEADERS] = Default::default();
        let mut more_headers = Vec::new();
        for (i, name) in wants.request_headers.iter().enumerate() {
            let value = head.headers.get(name).cloned();
            match headers.get_mut(i) {
                Some(slot) => *slot = value,
                None => more_headers.push(value),
            }
        }
        Some(Box::new(Record {
            log: config.clone(),
            unread: false,
            method: head.method.clone(),
            target: head.uri.clone(),
            version: head.version,
            host: head.headers.get(http::header::HOST).cloned(),
            client,
            headers,
            more_headers,
            request_length,
            uri_sent: None,
            request_id: RequestId::None,
            route: None,
            attempts: Vec::new(),
            // nginx's 499: the client went away before the response head (the request's
            // future was dropped); `responded` sets the real status.
            status: 499,
            response_headers: Vec::new(),
            response_head_bytes: 0,
            body_bytes: 0,
            connection_requests,
            trace: None,
            unlogged: false,
        }))
    }

    /// A request the codec refused (400, 431, 501) before the pipeline saw it: `head` is what
    /// could be read of it (`None`: not even the request line), `sent` the response's head
    /// and body bytes that went out.
    pub(crate) fn refused(
        config: &Current,
        head: Option<&http::request::Parts>,
        client: IpAddr,
        status: u16,
        sent: (u64, u64),
        connection_requests: u64,
    ) -> Option<Box<Record>> {
        config.access_log.as_ref()?;
        let unread = http::Request::new(()).into_parts().0;
        let mut record = Record::begin(
            config,
            head.unwrap_or(&unread),
            client,
            0,
            connection_requests,
        )?;
        record.unread = head.is_none();
        record.status = status;
        (record.response_head_bytes, record.body_bytes) = sent;
        Some(record)
    }

    pub(crate) fn wants(&self) -> &Wants {
        self.log
            .access_log
            .as_ref()
            .map_or(&NO_LINE, |log| &log.format.wants)
    }

    /// The response as it goes to the client.
    pub(crate) fn responded(&mut self, status: u16, headers: &HeaderMap) {
        self.status = status;
        // The field, not `wants()`: the record is written below.
        let wants = self
            .log
            .access_log
            .as_ref()
            .map_or(&NO_LINE, |log| &log.format.wants);
        if !wants.response_headers.is_empty() {
            self.response_headers = wants
                .response_headers
                .iter()
                .map(|name| headers.get(name).cloned())
                .collect();
        }
    }

    fn request_header(&self, index: usize) -> Option<&HeaderValue> {
        match index.checked_sub(INLINE_HEADERS) {
            None => self.headers[index].as_ref(),
            Some(more) => self.more_headers.get(more)?.as_ref(),
        }
    }

    /// Writes this request's line to `out`, if the configuration logs and its route and target
    /// are logged.
    pub(crate) fn write_line(&self, out: &mut Vec<u8>, conn: &LineContext, end: Instant) -> bool {
        let Some(log) = self.log.access_log.as_ref() else {
            return false;
        };
        if self.unlogged || self.route.as_ref().is_some_and(|r| !r.labels.access_log) {
            return false;
        }
        if !log.skip_urls.is_empty() && !log.logs(target_text(&self.target)) {
            return false;
        }
        let escape = log.format.escape;
        let wants = &log.format.wants;
        let mut scratch = itoa::Buffer::new();
        for segment in &log.format.segments {
            match segment {
                Segment::Literal(text) => out.extend_from_slice(text.as_bytes()),
                Segment::Variable(variable) => {
                    self.variable(out, variable, wants, conn, end, escape, &mut scratch)
                }
            }
        }
        out.push(b'\n');
        true
    }

    /// One arm per nginx variable (~220 lines, one `match`): a variable's rendering is read
    /// where its name is, and a new one is one arm.
    #[allow(clippy::too_many_arguments)]
    fn variable(
        &self,
        out: &mut Vec<u8>,
        variable: &Variable,
        wants: &Wants,
        conn: &LineContext,
        end: Instant,
        escape: Escape,
        numbers: &mut itoa::Buffer,
    ) {
        let text = |out: &mut Vec<u8>, value: &[u8]| escape_into(out, value, escape);
        let or_dash = |out: &mut Vec<u8>, value: Option<&[u8]>| match value {
            Some(value) if !value.is_empty() => escape_into(out, value, escape),
            _ => unset(out, escape),
        };
        let route = self.route.as_deref().map(|r| &r.labels);
        match variable {
            Variable::RemoteAddr => {
                let _ = write!(out, "{}", self.client);
            }
            Variable::RemotePort => {
                out.extend_from_slice(numbers.format(conn.peer_port).as_bytes())
            }
            Variable::RemoteUser => or_dash(out, self.remote_user(wants).as_deref()),
            Variable::ProxyProtocolAddr => {
                if let Some(addr) = conn.proxy_protocol_addr {
                    let _ = write!(out, "{addr}");
                }
            }
            Variable::TimeLocal => time_local(out),
            Variable::TimeIso8601 => time_iso8601(out),
            Variable::Msec => {
                let since = conn.now.duration_since(UNIX_EPOCH).unwrap_or_default();
                let _ = write!(out, "{}.{:03}", since.as_secs(), since.subsec_millis());
            }
            Variable::Request
            | Variable::RequestMethod
            | Variable::RequestUri
            | Variable::Uri
            | Variable::ServerProtocol
                if self.unread =>
            {
                unset(out, escape)
            }
            Variable::Request => {
                text(out, self.method.as_str().as_bytes());
                out.push(b' ');
                text(out, target_text(&self.target).as_bytes());
                out.push(b' ');
                out.extend_from_slice(protocol(self.version).as_bytes());
            }
            Variable::RequestMethod => text(out, self.method.as_str().as_bytes()),
            Variable::RequestUri => text(out, target_text(&self.target).as_bytes()),
            Variable::Uri => {
                let uri = self.uri_sent.as_ref().unwrap_or(&self.target);
                text(out, uri.path().as_bytes())
            }
            Variable::Args => text(out, self.target.query().unwrap_or("").as_bytes()),
            Variable::Arg(name) => {
                let value = self
                    .target
                    .query()
                    .and_then(|query| headers::query_arg(query, name));
                text(out, value.unwrap_or("").as_bytes())
            }
            Variable::IsArgs => {
                if self.target.query().is_some() {
                    out.push(b'?')
                }
            }
            Variable::ServerProtocol => out.extend_from_slice(protocol(self.version).as_bytes()),
            Variable::Scheme => out.extend_from_slice(if conn.https { b"https" } else { b"http" }),
            Variable::Host => {
                let host = self
                    .host
                    .as_ref()
                    .map(HeaderValue::as_bytes)
                    .or(self.target.host().map(str::as_bytes))
                    .unwrap_or(b"");
                let host = model::target::strip_port(host).to_ascii_lowercase();
                text(out, &host)
            }
            Variable::ServerName => match route.map(|r| r.host.as_str()) {
                Some(host) if !host.is_empty() => text(out, host.as_bytes()),
                _ => out.push(b'_'),
            },
            Variable::ServerPort => out.extend_from_slice(conn.server_port.as_bytes()),
            Variable::Status => out.extend_from_slice(numbers.format(self.status).as_bytes()),
            Variable::BodyBytesSent => {
                out.extend_from_slice(numbers.format(self.body_bytes).as_bytes())
            }
            Variable::BytesSent => out.extend_from_slice(
                numbers
                    .format(self.body_bytes + self.response_head_bytes)
                    .as_bytes(),
            ),
            Variable::RequestLength => {
                out.extend_from_slice(numbers.format(self.request_length).as_bytes())
            }
            Variable::RequestTime => seconds(out, end.saturating_duration_since(conn.start)),
            Variable::Connection => out.extend_from_slice(numbers.format(conn.serial).as_bytes()),
            Variable::ConnectionRequests => {
                out.extend_from_slice(numbers.format(self.connection_requests).as_bytes())
            }
            Variable::ProxyAddXForwardedFor => {
                let forwarded = wants
                    .request_headers
                    .iter()
                    .position(|n| n == "x-forwarded-for")
                    .and_then(|i| self.request_header(i))
                    .map(HeaderValue::as_bytes)
                    .filter(|v| !v.is_empty());
                if let Some(forwarded) = forwarded {
                    text(out, forwarded);
                    out.extend_from_slice(b", ");
                }
                let _ = write!(out, "{}", self.client);
            }
            Variable::SslProtocol => {
                out.extend_from_slice(conn.tls.map_or("", |t| t.protocol()).as_bytes())
            }
            Variable::SslCipher => {
                out.extend_from_slice(conn.tls.map_or("", |t| t.cipher()).as_bytes())
            }
            Variable::SslSessionReused => {
                if let Some(tls) = conn.tls {
                    out.push(if tls.resumed { b'r' } else { b'.' })
                }
            }
            Variable::Pid => out.extend_from_slice(numbers.format(std::process::id()).as_bytes()),
            Variable::Hostname => text(out, hostname().as_bytes()),
            Variable::RequestHeader(name) => {
                let index = wants.request_headers.iter().position(|n| n == name);
                or_dash(
                    out,
                    index
                        .and_then(|i| self.request_header(i))
                        .map(HeaderValue::as_bytes),
                )
            }
            Variable::ResponseHeader(name) => {
                let index = wants.response_headers.iter().position(|n| n == name);
                or_dash(
                    out,
                    index
                        .and_then(|i| self.response_headers.get(i)?.as_ref())
                        .map(HeaderValue::as_bytes),
                )
            }
            Variable::Cookie(name) => {
                let index = wants
                    .request_headers
                    .iter()
                    .position(|n| n == http::header::COOKIE);
                let cookies = index.and_then(|i| self.request_header(i));
                let value = cookies
                    .and_then(|c| c.to_str().ok())
                    .and_then(|c| headers::cookie(c, name));
                or_dash(out, value.map(str::as_bytes))
            }
            Variable::UpstreamAddr => self.attempts_list(out, escape, |out, a| {
                let _ = write!(out, "{}", a.addr);
            }),
            Variable::UpstreamStatus => self.attempts_list(out, escape, |out, a| {
                out.extend_from_slice(itoa::Buffer::new().format(a.status).as_bytes())
            }),
            Variable::UpstreamResponseTime => {
                let last = self.attempts.len().saturating_sub(1);
                let mut index = 0;
                self.attempts_list(out, escape, |out, a| {
                    // The last attempt's response ends with the request; a failed one
                    // when it failed.
                    let until = if index == last {
                        end
                    } else {
                        a.answered.unwrap_or(end)
                    };
                    index += 1;
                    seconds(out, until.saturating_duration_since(a.start))
                })
            }
            Variable::UpstreamResponseLength => {
                let last = self.attempts.len().saturating_sub(1);
                let mut index = 0;
                self.attempts_list(out, escape, |out, _| {
                    let length = if index == last { self.body_bytes } else { 0 };
                    index += 1;
                    out.extend_from_slice(itoa::Buffer::new().format(length).as_bytes())
                })
            }
            Variable::UpstreamConnectTime => {
                self.attempts_list(out, escape, |out, a| match a.connected {
                    Some(at) => seconds(out, at.saturating_duration_since(a.start)),
                    None => out.push(b'-'),
                })
            }
            Variable::UpstreamHeaderTime => {
                self.attempts_list(out, escape, |out, a| match a.answered {
                    Some(at) => seconds(out, at.saturating_duration_since(a.start)),
                    None => out.push(b'-'),
                })
            }
            Variable::ProxyUpstreamName => match route {
                Some(route) if !route.upstream_name.is_empty() => {
                    text(out, route.upstream_name.as_bytes())
                }
                _ => out.extend_from_slice(b"upstream-default-backend"),
            },
            Variable::ProxyAlternativeUpstreamName => {
                text(out, route.map_or("", |r| &r.canary).as_bytes())
            }
            Variable::Namespace => text(out, route.map_or("", |r| &r.namespace).as_bytes()),
            Variable::IngressName => text(out, route.map_or("", |r| &r.ingress).as_bytes()),
            Variable::ServiceName => text(out, route.map_or("", |r| &r.service).as_bytes()),
            Variable::ServicePort => text(out, route.map_or("", |r| &r.service_port).as_bytes()),
            Variable::LocationPath => text(out, route.map_or("", |r| &r.path).as_bytes()),
            Variable::ReqId => match &self.request_id {
                RequestId::Generated(id) => out.extend_from_slice(id),
                RequestId::Client(value) => text(out, value.as_bytes()),
                // Answered before an ID was made (a 404, a redirect): one for the line.
                RequestId::None => out.extend_from_slice(&crate::headers::request_id()),
            },
        }
    }

    /// Each attempt, `, `-separated (nginx's `$upstream_*` lists); unset without one.
    fn attempts_list(
        &self,
        out: &mut Vec<u8>,
        escape: Escape,
        mut each: impl FnMut(&mut Vec<u8>, &Attempt),
    ) {
        if self.attempts.is_empty() {
            unset(out, escape);
            return;
        }
        for (i, attempt) in self.attempts.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(b", ");
            }
            each(out, attempt);
        }
    }

    /// The user of a Basic `Authorization` header (nginx's `$remote_user`).
    fn remote_user(&self, wants: &Wants) -> Option<Vec<u8>> {
        let index = wants
            .request_headers
            .iter()
            .position(|n| n == http::header::AUTHORIZATION)?;
        crate::headers::basic_user(self.request_header(index)?.as_bytes())
    }
}

/// What a line needs from the connection and the moment.
pub(crate) struct LineContext {
    pub(crate) start: Instant,
    pub(crate) now: SystemTime,
    pub(crate) https: bool,
    pub(crate) peer_port: u16,
    pub(crate) serial: u64,
    pub(crate) server_port: HeaderValue,
    /// The address the connection's PROXY protocol header named, if it had one.
    pub(crate) proxy_protocol_addr: Option<IpAddr>,
    pub(crate) tls: Option<TlsFacts>,
}

/// What the access log can say about an HTTPS connection's TLS session (a few bytes per
/// connection; names are made when a line is written).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TlsFacts {
    version: Option<ProtocolVersion>,
    suite: Option<CipherSuite>,
    resumed: bool,
}

impl TlsFacts {
    /// From a completed handshake.
    pub(crate) fn of(conn: &rustls::CommonState) -> TlsFacts {
        TlsFacts {
            version: conn.protocol_version(),
            suite: conn.negotiated_cipher_suite().map(|s| s.suite()),
            resumed: conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
        }
    }

    /// `$ssl_protocol` as nginx (OpenSSL) writes it.
    fn protocol(&self) -> &'static str {
        match self.version {
            Some(ProtocolVersion::TLSv1_3) => "TLSv1.3",
            Some(ProtocolVersion::TLSv1_2) => "TLSv1.2",
            Some(other) => other.as_str().unwrap_or("unknown"),
            None => "",
        }
    }

    /// `$ssl_cipher`: OpenSSL's name for the suites rustls offers.
    fn cipher(&self) -> &'static str {
        use CipherSuite::*;
        match self.suite {
            Some(TLS13_AES_128_GCM_SHA256) => "TLS_AES_128_GCM_SHA256",
            Some(TLS13_AES_256_GCM_SHA384) => "TLS_AES_256_GCM_SHA384",
            Some(TLS13_CHACHA20_POLY1305_SHA256) => "TLS_CHACHA20_POLY1305_SHA256",
            Some(TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256) => "ECDHE-ECDSA-AES128-GCM-SHA256",
            Some(TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384) => "ECDHE-ECDSA-AES256-GCM-SHA384",
            Some(TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256) => "ECDHE-ECDSA-CHACHA20-POLY1305",
            Some(TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) => "ECDHE-RSA-AES128-GCM-SHA256",
            Some(TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384) => "ECDHE-RSA-AES256-GCM-SHA384",
            Some(TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256) => "ECDHE-RSA-CHACHA20-POLY1305",
            Some(other) => other.as_str().unwrap_or("unknown"),
            None => "",
        }
    }
}

/// The request target as the client sent it.
fn target_text(target: &Uri) -> &str {
    target.path_and_query().map_or("/", |p| p.as_str())
}

fn protocol(version: Version) -> &'static str {
    match version {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    }
}

/// Request line, header lines and the blank line, as HTTP/1.1 would carry them.
/// Seconds with millisecond resolution, as nginx's `$request_time`.
/// A variable with no value (nginx's "not found": no such header, no upstream, a request line
/// never read): `-`, except under `log-format-escape-json` and `-escape-none`, where nginx
/// writes nothing (its JSON and unescaped variable writers skip the dash).
fn unset(out: &mut Vec<u8>, escape: Escape) {
    if escape == Escape::Default {
        out.push(b'-');
    }
}

fn seconds(out: &mut Vec<u8>, duration: Duration) {
    let millis = duration.as_millis();
    let _ = write!(out, "{}.{:03}", millis / 1000, millis % 1000);
}

fn hostname() -> &'static str {
    static HOSTNAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOSTNAME.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_default()
    })
}

/// nginx's `$time_local` and `$time_iso8601` from the per-second `Date` value
/// (`Sun, 06 Nov 1994 08:49:37 GMT`): one formatting per second and thread, shared with the
/// `Date` header.
fn time_local(out: &mut Vec<u8>) {
    crate::date::with_current(|date| time_local_from(out, date));
}

fn time_iso8601(out: &mut Vec<u8>) {
    crate::date::with_current(|date| time_iso8601_from(out, date));
}

/// `06/Nov/1994:08:49:37 +0000`.
fn time_local_from(out: &mut Vec<u8>, http_date: &[u8]) {
    let (day, month, year, time) = date_parts(http_date);
    out.extend_from_slice(day);
    out.push(b'/');
    out.extend_from_slice(month);
    out.push(b'/');
    out.extend_from_slice(year);
    out.push(b':');
    out.extend_from_slice(time);
    out.extend_from_slice(b" +0000");
}

/// `1994-11-06T08:49:37+00:00`.
fn time_iso8601_from(out: &mut Vec<u8>, http_date: &[u8]) {
    const MONTHS: [&[u8]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let (day, month, year, time) = date_parts(http_date);
    let number = MONTHS.iter().position(|m| *m == month).unwrap_or(0) + 1;
    out.extend_from_slice(year);
    out.push(b'-');
    out.extend_from_slice(&[b'0' + (number / 10) as u8, b'0' + (number % 10) as u8]);
    out.push(b'-');
    out.extend_from_slice(day);
    out.push(b'T');
    out.extend_from_slice(time);
    out.extend_from_slice(b"+00:00");
}

/// Day, month name, year and `hh:mm:ss` of an IMF-fixdate.
fn date_parts(http_date: &[u8]) -> (&[u8], &[u8], &[u8], &[u8]) {
    (
        &http_date[5..7],
        &http_date[8..11],
        &http_date[12..16],
        &http_date[17..25],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_nginx_formatted_in_utc() {
        let date = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(1_795_482_123));
        let mut out = Vec::new();
        time_local_from(&mut out, date.as_bytes());
        out.push(b' ');
        time_iso8601_from(&mut out, date.as_bytes());
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "24/Nov/2026:01:02:03 +0000 2026-11-24T01:02:03+00:00"
        );
        let date = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(951_782_400));
        let mut out = Vec::new();
        time_iso8601_from(&mut out, date.as_bytes());
        assert_eq!(out, b"2000-02-29T00:00:00+00:00");
    }

    #[test]
    fn seconds_have_millisecond_resolution() {
        let mut out = Vec::new();
        seconds(&mut out, Duration::from_micros(1_234_567));
        out.push(b' ');
        seconds(&mut out, Duration::from_micros(999));
        assert_eq!(out, b"1.234 0.000");
    }
}
