//! The I/O half: threads, connections and the clock, executing the [`Schedule`] and feeding a
//! [`Recorder`] per thread.
//!
//! ```text
//!  run(config) ─ resolve, TLS config, encode request ─┐
//!     ├─ thread 0: current-thread runtime ── conn 0, T, 2T, … each: loop {
//!     ├─ thread 1: current-thread runtime ── conn 1, T+1, …      slot = schedule.next(now)
//!     └─ …                                                       sleep until slot.send_at
//!          all threads pre-connect and start their connection    connect if needed, write, read
//!          tasks, which wait for one shared t0 a little ahead
//!     join ─ merge recorders ─▶ Results                           recorder.record(sample) }
//! ```

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use rustls::HandshakeKind;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch};
use tokio::task::LocalSet;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::args::Config;
use crate::clock::SendTimer;
use crate::http1;
use crate::recorder::{ErrorClass, Outcome, Recorder, Sample};
use crate::report::{Results, RunTiming};
use crate::schedule::{ConnSchedule, Schedule};
use crate::tls;

/// Why a run could not start (failures during the run are counted, not returned).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot resolve {host}:{port}")]
    Resolve {
        host: String,
        port: u16,
        #[source]
        source: io::Error,
    },
    #[error("{host}:{port} resolves to no address")]
    NoAddress { host: String, port: u16 },
    #[error("building the TLS client configuration")]
    Tls(#[from] rustls::Error),
    #[error("starting a load thread")]
    Thread(#[source] io::Error),
    #[error("a load thread panicked")]
    Panicked,
}

/// Runs the load described by `config` and returns everything it measured.
pub fn run(config: &Config) -> Result<Results, RunError> {
    let shared = Arc::new(Shared::new(config)?);
    let end = config.warmup + config.duration;
    let schedule = match config.rate {
        Some(rate) => Schedule::open(rate, config.connections, end),
        None => Schedule::closed(config.connections, end),
    };
    let threads = config.threads.get();

    let (ready_tx, ready_rx) = mpsc::channel::<Duration>();
    let mut starts = Vec::new();
    let mut handles = Vec::new();
    for thread in 0..threads {
        let (start_tx, start_rx) = oneshot::channel::<Instant>();
        starts.push(start_tx);
        let owned: Vec<u32> = schedule.thread_connections(thread, threads).collect();
        let shared = shared.clone();
        let ready = ready_tx.clone();
        let handle = std::thread::Builder::new()
            .name(format!("load-{thread}"))
            .spawn(move || thread_main(shared, schedule, owned, ready, start_rx))
            .map_err(RunError::Thread)?;
        handles.push(handle);
    }
    drop(ready_tx);
    // Every thread has connected what it could and started its connection tasks, which wait for
    // the clock; it starts for all on the same t0, far enough ahead that every task is asleep
    // until its first send when the schedule begins.
    let mut slowest_setup = Duration::ZERO;
    for _ in 0..threads {
        match ready_rx.recv() {
            Ok(setup) => slowest_setup = slowest_setup.max(setup),
            Err(_) => break,
        }
    }
    let lead = start_lead(slowest_setup);
    let t0 = Instant::now() + lead;
    let measurement_started = SystemTime::now() + lead + config.warmup;
    for start in starts {
        // A thread that already failed has hung up; its join below reports it.
        let _ = start.send(t0);
    }

    let mut merged =
        Recorder::new(config.warmup, config.duration).with_early_series(config.early_series);
    let mut thread_rates = Vec::new();
    let mut examples = BTreeMap::new();
    for handle in handles {
        let output = handle
            .join()
            .map_err(|_| RunError::Panicked)?
            .map_err(RunError::Thread)?;
        // wrk's "Req/Sec": one sample per thread and whole second, idle seconds included.
        let seconds = output.recorder.seconds();
        thread_rates.extend(
            (0..config.duration.as_secs() as usize)
                .map(|i| seconds.get(i).map_or(0, |second| second.completed)),
        );
        merged.merge(&output.recorder);
        for (class, message) in output.examples {
            examples.entry(class).or_insert(message);
        }
    }
    Ok(Results::new(
        config,
        &merged,
        &thread_rates,
        examples,
        RunTiming {
            elapsed: t0.elapsed(),
            start_lead: lead,
            measurement_started_unix_secs: measurement_started
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0.0, |since| since.as_secs_f64()),
        },
    ))
}

/// The least time from the moment every thread is ready to the first intended send.
const MIN_START_LEAD: Duration = Duration::from_millis(10);

/// How far ahead of "every thread is ready" the clock starts (t0), given how long the slowest
/// thread took to start its connection tasks (spawn each, make its timer, poll it once).
///
/// When a thread learns t0, each of its tasks still has to wake once and arm its timer for its
/// first send. Were t0 "now", the requests due first would wait for that pass, and when the tasks
/// were only spawned after t0 (each a large future moved to the heap, then a timer made: ~10 ms
/// for 1,000 connections here) the first 100 ms's requests left up to 25 ms late: the generator's
/// start-up charged to the server. Waking a task and arming its timer costs less than spawning
/// it and making the timer, so twice the setup covers the pass and the threads' own wake-up;
/// [`MIN_START_LEAD`] covers small runs.
fn start_lead(slowest_setup: Duration) -> Duration {
    MIN_START_LEAD.max(slowest_setup * 2)
}

/// `--hold-idle`: requests in flight at once, per thread.
const HOLD_IDLE_CONCURRENCY: usize = 32;

/// What `--hold-idle` achieved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Held {
    /// Connections whose one request got a complete response and that were then kept open.
    pub open: u64,
    pub failed: u64,
}

/// `--hold-idle`: every thread opens its share of the connections and sends one request on each;
/// when all are answered (or failed), `idle(open, failed)` is called, the connections are kept
/// open and idle for `duration`, then closed.
pub fn hold_idle(config: &Config, idle: impl FnOnce(u64, u64)) -> Result<Held, RunError> {
    let shared = Arc::new(Shared::new(config)?);
    let threads = config.threads.get();
    let connections = config.connections.get();
    let (done_tx, done_rx) = mpsc::channel::<Held>();
    let mut releases = Vec::new();
    let mut handles = Vec::new();
    for thread in 0..threads {
        let count = connections / threads + u32::from(thread < connections % threads);
        let (release_tx, release_rx) = mpsc::channel::<()>();
        releases.push(release_tx);
        let shared = shared.clone();
        let done = done_tx.clone();
        let handle = std::thread::Builder::new()
            .name(format!("load-idle-{thread}"))
            .spawn(move || hold_thread(shared, count as usize, done, release_rx))
            .map_err(RunError::Thread)?;
        handles.push(handle);
    }
    drop(done_tx);
    let mut held = Held::default();
    for part in done_rx.iter().take(threads as usize) {
        held.open += part.open;
        held.failed += part.failed;
    }
    idle(held.open, held.failed);
    std::thread::sleep(config.duration);
    drop(releases);
    for handle in handles {
        handle
            .join()
            .map_err(|_| RunError::Panicked)?
            .map_err(RunError::Thread)?;
    }
    Ok(held)
}

fn hold_thread(
    shared: Arc<Shared>,
    count: usize,
    done: mpsc::Sender<Held>,
    release: mpsc::Receiver<()>,
) -> io::Result<()> {
    let (runtime, local, ctx) = ThreadCtx::start(shared)?;
    // A few requests at a time: the proxy then reuses a few upstream connections instead of
    // opening one per client, so what stays in its memory is the idle clients' cost.
    let wave = Rc::new(tokio::sync::Semaphore::new(HOLD_IDLE_CONCURRENCY));
    let kept = local.block_on(&runtime, async {
        let tasks: Vec<_> = (0..count)
            .map(|_| {
                let ctx = ctx.clone();
                let wave = wave.clone();
                tokio::task::spawn_local(async move {
                    let _turn = wave.acquire().await.expect("the semaphore is never closed");
                    let mut conn = None;
                    let mut phase = Phase::Connect;
                    let answered = tokio::time::timeout(
                        ctx.shared.timeout,
                        exchange(&ctx, &mut conn, &mut phase),
                    )
                    .await;
                    match answered {
                        Ok(Ok(exchange)) if !exchange.close && exchange.status < 400 => conn,
                        Ok(Ok(_)) => None,
                        Ok(Err((class, message))) => {
                            ctx.note(class, message);
                            None
                        }
                        Err(_) => None,
                    }
                })
            })
            .collect();
        let mut kept = Vec::with_capacity(count);
        for task in tasks {
            kept.push(task.await.ok().flatten());
        }
        kept
    });
    let open = kept.iter().filter(|c| c.is_some()).count() as u64;
    if let Some((_, example)) = ctx.examples.borrow().iter().next() {
        eprintln!("sluice load --hold-idle: a connection failed: {example}");
    }
    let _ = done.send(Held {
        open,
        failed: count as u64 - open,
    });
    // Idle until released; HTTP/2 connections need their connection tasks polled (PING, GOAWAY).
    local.block_on(&runtime, async {
        let _ = tokio::task::spawn_blocking(move || release.recv()).await;
    });
    drop(kept);
    Ok(())
}

/// What every thread needs, built once.
struct Shared {
    addrs: Vec<SocketAddr>,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    http2: bool,
    /// The HTTP/1.1 request, byte for byte.
    request: Bytes,
    head_request: bool,
    new_connection_per_request: bool,
    timeout: Duration,
    warmup: Duration,
    duration: Duration,
    early_series: Duration,
    open_loop: bool,
    /// For HTTP/2, where hyper builds the frames.
    h2: H2Template,
}

struct H2Template {
    method: http::Method,
    uri: http::Uri,
    headers: Vec<(http::HeaderName, http::HeaderValue)>,
    body: Bytes,
    /// The response is a gRPC call's: judged by its grpc-status.
    grpc: bool,
}

struct ThreadOutput {
    recorder: Recorder,
    examples: BTreeMap<ErrorClass, String>,
}

/// One thread's state, shared by its connection tasks (single-threaded: `Rc`, `RefCell`).
struct ThreadCtx {
    shared: Arc<Shared>,
    recorder: RefCell<Recorder>,
    /// The first error message seen per class, so the summary can say what went wrong.
    examples: RefCell<BTreeMap<ErrorClass, String>>,
}

enum Conn {
    H1 {
        stream: Stream,
        buf: BytesMut,
    },
    H2 {
        sender: http2::SendRequest<Full<Bytes>>,
    },
}

/// A plain or TLS connection, so HTTP/1.1 code is written once.
enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Connect,
    Write,
    Read,
}

struct Exchange {
    status: u16,
    bytes_read: u64,
    bytes_written: u64,
    close: bool,
}

type Failure = (ErrorClass, String);

impl Shared {
    /// An empty recorder for one thread of this run.
    fn recorder(&self) -> Recorder {
        Recorder::new(self.warmup, self.duration).with_early_series(self.early_series)
    }

    fn new(config: &Config) -> Result<Shared, RunError> {
        let target = &config.target;
        let (host, port) = target
            .connect_to
            .clone()
            .unwrap_or_else(|| (target.host.clone(), target.port));
        let addrs: Vec<SocketAddr> = (host.as_str(), port)
            .to_socket_addrs()
            .map_err(|source| RunError::Resolve {
                host: host.clone(),
                port,
                source,
            })?
            .collect();
        if addrs.is_empty() {
            return Err(RunError::NoAddress { host, port });
        }
        let tls = if target.https {
            let sessions = config.connections.get() as usize * 2;
            let client = tls::client_config(&config.tls, config.http2, sessions)?;
            let name = ServerName::try_from(target.server_name.clone())
                .map_err(|_| rustls::Error::General("invalid server name".into()))?;
            Some((TlsConnector::from(client), name))
        } else {
            None
        };
        let request = http1::encode_request(
            &config.method,
            &target.path,
            &target.host_header,
            &config.headers,
            &config.body,
            config.new_connection_per_request,
        );
        let scheme = if target.https { "https" } else { "http" };
        let uri = format!("{scheme}://{}{}", target.host_header, target.path)
            .parse()
            .map_err(|_| rustls::Error::General("invalid request URI".into()))?;
        let mut h2_headers: Vec<_> = config
            .headers
            .iter()
            .filter(|(name, _)| *name != http::header::CONNECTION)
            .cloned()
            .collect();
        let mut h2_body = config.body.clone();
        if config.grpc {
            h2_headers.extend([
                (
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static("application/grpc"),
                ),
                (http::header::TE, http::HeaderValue::from_static("trailers")),
            ]);
            h2_body = grpc_message(&config.body);
        }
        Ok(Shared {
            addrs,
            tls,
            http2: config.http2,
            request,
            head_request: config.method == http::Method::HEAD,
            new_connection_per_request: config.new_connection_per_request,
            timeout: config.timeout,
            warmup: config.warmup,
            duration: config.duration,
            early_series: config.early_series,
            open_loop: config.rate.is_some(),
            h2: H2Template {
                method: config.method.clone(),
                uri,
                headers: h2_headers,
                body: h2_body,
                grpc: config.grpc,
            },
        })
    }
}

fn thread_main(
    shared: Arc<Shared>,
    schedule: Schedule,
    owned: Vec<u32>,
    ready: mpsc::Sender<Duration>,
    start: oneshot::Receiver<Instant>,
) -> io::Result<ThreadOutput> {
    let (runtime, local, ctx) = ThreadCtx::start(shared)?;

    let conns: Vec<Option<Conn>> = if ctx.shared.new_connection_per_request {
        owned.iter().map(|_| None).collect()
    } else {
        local.block_on(&runtime, preconnect(ctx.clone(), owned.len()))
    };

    local.block_on(&runtime, async {
        let setup = Instant::now();
        let (clock_tx, clock) = watch::channel(None);
        let waiting = Rc::new(Cell::new(0));
        let tasks: Vec<_> = owned
            .iter()
            .zip(conns)
            .map(|(&c, conn)| {
                let start = Start {
                    clock: clock.clone(),
                    waiting: waiting.clone(),
                };
                tokio::task::spawn_local(drive(ctx.clone(), schedule.connection(c), conn, start))
            })
            .collect();
        while waiting.get() < tasks.len() {
            tokio::task::yield_now().await;
        }
        let _ = ready.send(setup.elapsed());
        drop(ready);
        // If the run is called off (another thread failed), the tasks see the clock dropped and
        // end without a request.
        if let Ok(t0) = start.await {
            let _ = clock_tx.send(Some(t0));
        }
        drop(clock_tx);
        for task in tasks {
            // A connection task only ends by returning; a panic in one is a bug worth surfacing.
            if let Err(e) = task.await {
                std::panic::resume_unwind(e.into_panic());
            }
        }
    });
    drop(local);
    let ctx = Rc::try_unwrap(ctx).unwrap_or_else(|_| unreachable!("all tasks have finished"));
    Ok(ThreadOutput {
        recorder: ctx.recorder.into_inner(),
        examples: ctx.examples.into_inner(),
    })
}

/// Opens each connection before the clock starts, so keep-alive runs measure requests, not setup.
/// Failures are not counted here: the first request on that connection will try (and count) again.
async fn preconnect(ctx: Rc<ThreadCtx>, count: usize) -> Vec<Option<Conn>> {
    let tasks: Vec<_> = (0..count)
        .map(|_| {
            let ctx = ctx.clone();
            tokio::task::spawn_local(async move {
                tokio::time::timeout(ctx.shared.timeout, connect(&ctx))
                    .await
                    .ok()
                    .and_then(Result::ok)
            })
        })
        .collect();
    let mut conns = Vec::with_capacity(count);
    for task in tasks {
        conns.push(task.await.ok().flatten());
    }
    conns
}

/// What a connection task waits for before its schedule begins.
struct Start {
    /// t0, once the clock starts; dropped without a value if the run is called off.
    clock: watch::Receiver<Option<Instant>>,
    /// Tasks of this thread that are ready and waiting for the clock.
    waiting: Rc<Cell<usize>>,
}

/// One connection's life: make its timer, wait for the clock, follow its schedule until the end,
/// replacing the connection after errors. The clock starts a little ahead ([`start_lead`]), so
/// the first thing after the wait is sleeping until the first send.
async fn drive(
    ctx: Rc<ThreadCtx>,
    mut schedule: ConnSchedule,
    mut conn: Option<Conn>,
    mut start: Start,
) {
    let shared = ctx.shared.clone();
    let timer = SendTimer::new();
    start.waiting.set(start.waiting.get() + 1);
    let t0 = match start.clock.wait_for(Option::is_some).await {
        Ok(t0) => t0.expect("waited for a value"),
        Err(_) => return,
    };
    loop {
        // Zero until t0.
        let now = t0.elapsed();
        let Some(slot) = schedule.next(now) else {
            break;
        };
        timer.sleep_until(t0, t0 + slot.send_at).await;
        let sent = t0.elapsed();
        let intended = if shared.open_loop {
            slot.intended
        } else {
            sent
        };
        if shared.new_connection_per_request {
            conn = None;
        }
        let mut phase = Phase::Connect;
        let result =
            tokio::time::timeout(shared.timeout, exchange(&ctx, &mut conn, &mut phase)).await;
        let done = t0.elapsed();
        let (outcome, bytes_read, bytes_written) = match result {
            Ok(Ok(exchange)) => {
                if exchange.close {
                    conn = None;
                }
                (
                    Outcome::Response {
                        status: exchange.status,
                    },
                    exchange.bytes_read,
                    exchange.bytes_written,
                )
            }
            Ok(Err((class, message))) => {
                conn = None;
                ctx.note(class, message);
                (Outcome::Error(class), 0, 0)
            }
            Err(_) => {
                conn = None;
                let (class, what) = if phase == Phase::Connect {
                    (ErrorClass::Connect, "connecting took longer than")
                } else {
                    (ErrorClass::Timeout, "no complete response within")
                };
                ctx.note(class, format!("{what} {:?}", shared.timeout));
                (Outcome::Error(class), 0, 0)
            }
        };
        ctx.recorder.borrow_mut().record(&Sample {
            intended,
            sent,
            done,
            outcome,
            bytes_read,
            bytes_written,
        });
    }
    ctx.recorder.borrow_mut().record_unsent(schedule.unsent());
}

/// One request on `conn`, connecting first if there is none. `phase` says how far it got, so a
/// timeout can be told apart from a connect that never finished.
async fn exchange(
    ctx: &ThreadCtx,
    conn: &mut Option<Conn>,
    phase: &mut Phase,
) -> Result<Exchange, Failure> {
    let shared = &ctx.shared;
    *phase = Phase::Connect;
    // An HTTP/2 connection the server ended gracefully (GOAWAY: after its keep-alive-requests,
    // or at shutdown) takes no new stream. Clients (browsers, gRPC) open a new one for the next
    // request, which was never sent on the old: not an error.
    if matches!(conn, Some(Conn::H2 { sender }) if sender.is_closed()) {
        *conn = None;
    }
    if conn.is_none() {
        *conn = Some(connect(ctx).await.map_err(|e| (ErrorClass::Connect, e))?);
    }
    match conn.as_mut().expect("connected above") {
        Conn::H1 { stream, buf } => {
            *phase = Phase::Write;
            let write = |e: io::Error| (ErrorClass::Write, format!("writing the request: {e}"));
            stream.write_all(&shared.request).await.map_err(write)?;
            stream.flush().await.map_err(write)?;
            *phase = Phase::Read;
            let response = http1::read_response(stream, buf, shared.head_request)
                .await
                .map_err(|e| (ErrorClass::Read, e.to_string()))?;
            Ok(Exchange {
                status: response.status,
                bytes_read: response.bytes,
                bytes_written: shared.request.len() as u64,
                close: response.close,
            })
        }
        Conn::H2 { sender } => {
            *phase = Phase::Write;
            let read = |e: hyper::Error| (ErrorClass::Read, format!("http/2: {e}"));
            if sender.ready().await.is_err() {
                // Closed between the check above and now (its GOAWAY was on the way): nothing
                // was sent on it; the request goes on a new connection, as above.
                *phase = Phase::Connect;
                let fresh = connect(ctx).await.map_err(|e| (ErrorClass::Connect, e))?;
                *conn = Some(fresh);
                let Some(Conn::H2 { sender: fresh }) = conn.as_mut() else {
                    unreachable!("connect makes HTTP/2 connections when asked for http2");
                };
                *phase = Phase::Write;
                fresh.ready().await.map_err(read)?;
                return send_h2(shared, fresh, phase).await;
            }
            send_h2(shared, sender, phase).await
        }
    }
}

/// One request on a ready HTTP/2 connection, its response read to the end.
async fn send_h2(
    shared: &Shared,
    sender: &mut http2::SendRequest<Full<Bytes>>,
    phase: &mut Phase,
) -> Result<Exchange, Failure> {
    let read = |e: hyper::Error| (ErrorClass::Read, format!("http/2: {e}"));
    let template = &shared.h2;
    let mut request = http::Request::new(Full::new(template.body.clone()));
    *request.method_mut() = template.method.clone();
    *request.uri_mut() = template.uri.clone();
    request
        .headers_mut()
        .extend(template.headers.iter().cloned());
    *phase = Phase::Read;
    let response = sender.send_request(request).await.map_err(read)?;
    let status = response.status().as_u16();
    // A trailers-only gRPC answer carries grpc-status in the head.
    let mut grpc_status = template
        .grpc
        .then(|| GrpcStatus::from_headers(response.headers()))
        .flatten();
    let mut body = response.into_body();
    let mut bytes_read = 0;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(read)?;
        if let Some(data) = frame.data_ref() {
            bytes_read += data.len() as u64;
        } else if let Some(trailers) = frame.trailers_ref() {
            grpc_status = grpc_status.or_else(|| GrpcStatus::from_headers(trailers));
        }
    }
    if template.grpc && status == 200 {
        match grpc_status {
            Some(GrpcStatus { code: 0, .. }) => {}
            Some(GrpcStatus { code, message }) => {
                return Err((ErrorClass::Status, format!("grpc-status {code}: {message}")));
            }
            None => {
                return Err((
                    ErrorClass::Read,
                    "gRPC answer without grpc-status".to_owned(),
                ));
            }
        }
    }
    Ok(Exchange {
        status,
        bytes_read,
        bytes_written: template.body.len() as u64,
        close: shared.new_connection_per_request,
    })
}

/// A gRPC call's outcome, from the response's trailers (or head, when trailers-only).
struct GrpcStatus {
    code: u32,
    message: String,
}

impl GrpcStatus {
    fn from_headers(headers: &http::HeaderMap) -> Option<GrpcStatus> {
        let code = headers.get("grpc-status")?.to_str().ok()?.parse().ok()?;
        let message = headers
            .get("grpc-message")
            .and_then(|m| m.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        Some(GrpcStatus { code, message })
    }
}

/// One length-prefixed gRPC message: uncompressed flag, 4-byte big-endian length, the message.
fn grpc_message(message: &[u8]) -> Bytes {
    let length = u32::try_from(message.len()).expect("a --body larger than 4 GiB");
    let mut framed = Vec::with_capacity(5 + message.len());
    framed.push(0);
    framed.extend_from_slice(&length.to_be_bytes());
    framed.extend_from_slice(message);
    Bytes::from(framed)
}

/// TCP connect (first address that answers), TLS handshake if https, HTTP/2 handshake if asked.
async fn connect(ctx: &ThreadCtx) -> Result<Conn, String> {
    let shared = &ctx.shared;
    let mut last_error = None;
    let mut tcp = None;
    for addr in &shared.addrs {
        match TcpStream::connect(addr).await {
            Ok(stream) => {
                tcp = Some(stream);
                break;
            }
            Err(e) => last_error = Some(format!("tcp connect to {addr}: {e}")),
        }
    }
    let tcp = tcp.ok_or_else(|| last_error.unwrap_or_else(|| "no address".into()))?;
    tcp.set_nodelay(true)
        .map_err(|e| format!("setting TCP_NODELAY: {e}"))?;
    let stream = match &shared.tls {
        None => Stream::Plain(tcp),
        Some((connector, name)) => {
            let tls = connector
                .connect(name.clone(), tcp)
                .await
                .map_err(|e| format!("tls handshake: {e}"))?;
            let session = tls.get_ref().1;
            let resumed = session.handshake_kind() == Some(HandshakeKind::Resumed);
            ctx.recorder.borrow_mut().record_handshake(resumed);
            if shared.http2 && session.alpn_protocol() != Some(b"h2") {
                return Err("the server did not agree to http/2 (alpn h2)".into());
            }
            Stream::Tls(Box::new(tls))
        }
    };
    if shared.http2 {
        let (sender, connection) = http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .map_err(|e| format!("http/2 handshake: {e}"))?;
        tokio::task::spawn_local(connection);
        Ok(Conn::H2 { sender })
    } else {
        Ok(Conn::H1 {
            stream,
            buf: BytesMut::with_capacity(16 * 1024),
        })
    }
}

impl ThreadCtx {
    /// A load thread's runtime, task set and context.
    fn start(
        shared: Arc<Shared>,
    ) -> io::Result<(tokio::runtime::Runtime, LocalSet, Rc<ThreadCtx>)> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let ctx = Rc::new(ThreadCtx {
            recorder: RefCell::new(shared.recorder()),
            shared,
            examples: RefCell::new(BTreeMap::new()),
        });
        Ok((runtime, LocalSet::new(), ctx))
    }

    fn note(&self, class: ErrorClass, message: String) {
        self.examples.borrow_mut().entry(class).or_insert(message);
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_starts_twice_the_timer_setup_ahead_and_never_less_than_the_minimum() {
        assert_eq!(start_lead(Duration::ZERO), MIN_START_LEAD);
        assert_eq!(start_lead(Duration::from_millis(4)), MIN_START_LEAD);
        assert_eq!(
            start_lead(Duration::from_millis(30)),
            Duration::from_millis(60)
        );
    }
}
