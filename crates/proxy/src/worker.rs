//! One worker: a thread with its own current-thread runtime, its own listening sockets, its
//! own upstream pool, balancer state and counters. Nothing here is shared with other workers,
//! so none of it needs atomics or locks: `Rc` and `RefCell`, with borrows that never span an
//! `.await`.
//!
//! ```text
//!  accept (http) ─┐                            ┌─▶ inline HTTP/1.1 ─(handover)─▶ hyper http1
//!  accept (https)─┴─▶ serve(conn) ─TLS+ALPN────┴─▶ hyper http2 ─▶ forward::respond
//!                          drive(): stop signal │ keep-alive-requests
//!                                   ─▶ graceful shutdown (HTTP/1 close after response, GOAWAY)
//!                                   idle timer (keep-alive, and client-header-timeout for
//!                                   HTTP/1) ─▶ close (HTTP/1) │ GOAWAY (HTTP/2)
//!  housekeeping: woken by publish/endpoints_changed ─▶ drop idle connections to vanished
//!                endpoints; every second ─▶ drop idle connections past their age
//!  stats: admin asks ─▶ snapshot of this worker's counters
//! ```

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use http::HeaderValue;
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use model::{Backend, Compiled, EndpointSet, Settings};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, mpsc, oneshot, watch, Notify};
use tokio::task::LocalSet;
use tokio_rustls::TlsAcceptor;

use crate::balance::Balancer;
use crate::headers::Forwarded;
use crate::linger::Linger;
use crate::listen::StartError;
use crate::metrics::{Snapshot, Stats};
use crate::server::{Ended, Http1, Prefixed};
use crate::shared::Shared;
use crate::stall::{StreamWatch, WriteTimeout};
use crate::upstream::Pool;

/// hyper refuses a smaller HTTP/1 buffer limit; `large-client-header-buffers` below it is
/// raised to it.
const MIN_HEADER_BUFFER: usize = 8192;

/// Pause after an accept error that is not about one connection (out of file descriptors),
/// so the loop does not spin while the condition lasts.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(20);

/// How often idle upstream connections are checked against `upstream-keepalive-timeout`.
const HOUSEKEEPING_PERIOD: Duration = Duration::from_secs(1);

/// The admin server's request for this worker's counters.
pub(crate) type StatsRequest = oneshot::Sender<Snapshot>;

/// Everything a worker thread starts from.
pub(crate) struct WorkerSetup {
    pub(crate) id: usize,
    pub(crate) shared: Arc<Shared>,
    pub(crate) http: std::net::TcpListener,
    pub(crate) https: std::net::TcpListener,
    pub(crate) http_port: u16,
    pub(crate) https_port: u16,
    pub(crate) stop: watch::Receiver<bool>,
    pub(crate) stats: mpsc::Receiver<StatsRequest>,
}

/// The current configuration as one worker holds it: cloning the `Rc` is a plain increment,
/// where cloning the `Arc` would bump a counter every worker shares.
pub(crate) type Current = Rc<Arc<Compiled>>;

pub(crate) struct Worker {
    pub(crate) shared: Arc<Shared>,
    config: RefCell<Option<Current>>,
    /// Address of the configuration whose routes `stats` counts under.
    stats_config: Cell<usize>,
    pub(crate) pool: RefCell<Pool>,
    pub(crate) balancer: RefCell<Balancer>,
    /// Which endpoints the current configuration's backends hold, as this worker last saw them.
    live: RefCell<LiveEndpoints>,
    pub(crate) stats: RefCell<Stats>,
    /// The TLS acceptor and whether it issues session tickets.
    tls: RefCell<(bool, TlsAcceptor)>,
    http_port: HeaderValue,
    https_port: HeaderValue,
    stop: watch::Receiver<bool>,
    drain: Drain,
}

/// One client connection.
pub(crate) struct ConnCtx {
    pub(crate) worker: Rc<Worker>,
    pub(crate) https: bool,
    pub(crate) h2: bool,
    client_ip: HeaderValue,
    requests: Cell<u64>,
    in_flight: Cell<u32>,
    last_active: Cell<Instant>,
    /// HTTP/2 only: `keep-alive-requests` reached; the driver sends GOAWAY.
    close: Notify,
    /// The worker is stopping: the inline HTTP/1 server answers the request in flight with
    /// `Connection: close` and serves no other.
    closing: Cell<bool>,
}

/// Lives as long as one request (until its response body is done or dropped).
pub(crate) struct RequestGuard {
    conn: Rc<ConnCtx>,
    start: Instant,
}

/// Keeps the worker's shutdown waiting while a connection or tunnel is open.
pub(crate) struct DrainGuard {
    worker: Rc<Worker>,
}

/// Open connections and tunnels, so shutdown knows when all have finished.
#[derive(Default)]
struct Drain {
    open: Cell<usize>,
    idle: Notify,
}

/// Runs spawned futures on the worker's `LocalSet`: hyper's HTTP/2 server spawns a task per
/// stream, and ours are `!Send`. Each stream is watched for flow-control stalls
/// (`client-send-timeout`, see `stall::StreamWatch`).
#[derive(Clone, Copy)]
struct LocalExec {
    stall_limit: Duration,
}

impl<F: Future + 'static> hyper::rt::Executor<F> for LocalExec {
    fn execute(&self, future: F) {
        let limit = self.stall_limit;
        if limit.is_zero() {
            tokio::task::spawn_local(future);
            return;
        }
        tokio::task::spawn_local(async move {
            let task = std::pin::pin!(future);
            StreamWatch::new(task, limit).await
        });
    }
}

/// Starts a worker thread. Sockets are registered with the worker's runtime here, so any
/// failure is reported by `Proxy::start`.
pub(crate) fn spawn(setup: WorkerSetup) -> Result<JoinHandle<()>, StartError> {
    let what = |part: &str| format!("worker {}: {part}", setup.id);
    let thread_error = |part: &str, source: io::Error| StartError::Thread {
        what: what(part),
        source,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| thread_error("runtime", e))?;
    let (http, https) = {
        let _entered = runtime.enter();
        (
            TcpListener::from_std(setup.http).map_err(|e| thread_error("HTTP listener", e))?,
            TcpListener::from_std(setup.https).map_err(|e| thread_error("HTTPS listener", e))?,
        )
    };
    let tls = crate::tls::server_config(setup.shared.clone(), true).map_err(StartError::Tls)?;
    let id = setup.id;
    let shared = setup.shared;
    let http_port = HeaderValue::from(setup.http_port);
    let https_port = HeaderValue::from(setup.https_port);
    let stop = setup.stop;
    let stats = setup.stats;
    std::thread::Builder::new()
        .name(format!("sluice-worker-{id}"))
        .spawn(move || {
            let local = LocalSet::new();
            local.block_on(&runtime, async move {
                let worker = Rc::new(Worker {
                    shared,
                    config: RefCell::new(None),
                    stats_config: Cell::new(0),
                    pool: RefCell::default(),
                    balancer: RefCell::default(),
                    live: RefCell::default(),
                    stats: RefCell::default(),
                    tls: RefCell::new((true, TlsAcceptor::from(tls))),
                    http_port,
                    https_port,
                    stop,
                    drain: Drain::default(),
                });
                worker.run(http, https, stats).await;
            });
            // Dropping the LocalSet here cancels whatever outlived the grace period.
            tracing::debug!(worker = id, "worker stopped");
        })
        .map_err(|e| thread_error("thread", e))
}

impl Worker {
    async fn run(
        self: &Rc<Self>,
        http: TcpListener,
        https: TcpListener,
        stats: mpsc::Receiver<StatsRequest>,
    ) {
        tokio::task::spawn_local(self.clone().accept_loop(http, false));
        tokio::task::spawn_local(self.clone().accept_loop(https, true));
        tokio::task::spawn_local(self.clone().housekeeping());
        tokio::task::spawn_local(self.clone().serve_stats(stats));

        let mut stop = self.stop.clone();
        while !*stop.borrow_and_update() {
            if stop.changed().await.is_err() {
                break;
            }
        }
        // Accept loops and connections saw the same signal: no new connections, idle ones
        // closing, busy ones finishing their current request.
        let grace = self.settings().worker_shutdown_timeout;
        if tokio::time::timeout(grace, self.drain.wait())
            .await
            .is_err()
        {
            tracing::info!(
                open = self.drain.open.get(),
                ?grace,
                "worker-shutdown-timeout elapsed, dropping remaining connections"
            );
        }
        self.pool.borrow_mut().clear();
    }

    /// The configuration to serve this request with, or `None` before the first publish.
    pub(crate) fn config(&self) -> Option<Current> {
        let current = self.shared.config.load();
        let current = current.as_ref()?;
        let mut cached = self.config.borrow_mut();
        if let Some(mine) = cached.as_ref() {
            if Arc::ptr_eq(mine, current) {
                return Some(mine.clone());
            }
        }
        let fresh = Rc::new(Arc::clone(current));
        *cached = Some(fresh.clone());
        Some(fresh)
    }

    /// The current settings, or the defaults before the first publish.
    pub(crate) fn settings(&self) -> Settings {
        self.config()
            .map(|c| c.settings.clone())
            .unwrap_or_default()
    }

    pub(crate) fn drain_guard(self: &Rc<Self>) -> DrainGuard {
        self.drain.open.set(self.drain.open.get() + 1);
        DrainGuard {
            worker: self.clone(),
        }
    }

    fn tls_acceptor(&self, session_tickets: bool) -> Option<TlsAcceptor> {
        let mut tls = self.tls.borrow_mut();
        if tls.0 != session_tickets {
            match crate::tls::server_config(self.shared.clone(), session_tickets) {
                Ok(config) => *tls = (session_tickets, TlsAcceptor::from(config)),
                Err(e) => {
                    tracing::error!(error = %e, "cannot rebuild the TLS configuration");
                    return None;
                }
            }
        }
        Some(tls.1.clone())
    }

    async fn accept_loop(self: Rc<Self>, listener: TcpListener, https: bool) {
        let mut stop = self.stop.clone();
        if *stop.borrow_and_update() {
            return;
        }
        loop {
            let accepted = tokio::select! {
                // Stopping must win over a full backlog.
                biased;
                _ = stop.changed() => return,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, peer)) => {
                    tokio::task::spawn_local(self.clone().serve(stream, peer, https));
                }
                // The peer gave up before we accepted: nothing wrong with the listener.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionAborted
                            | io::ErrorKind::ConnectionReset
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed, backing off");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            }
        }
    }

    async fn serve(self: Rc<Self>, stream: TcpStream, peer: SocketAddr, https: bool) {
        let _open = OpenConnection::new(&self);
        // Responses are written in few large writes; Nagle would only delay their tails.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "set TCP_NODELAY");
        }
        let settings = self.settings();
        let stream = Linger::new(WriteTimeout::new(
            stream,
            settings.client_send_timeout,
            "the client read nothing within client-send-timeout",
        ));
        if !https {
            let conn = ConnCtx::new(self, peer, false, false);
            serve_http1(conn, stream, &settings).await;
            return;
        }
        let Some(acceptor) = self.tls_acceptor(settings.ssl_session_tickets) else {
            return;
        };
        // A client that stalls its handshake is as slow as one that stalls its header.
        let tls = match within(settings.client_header_timeout, acceptor.accept(stream)).await {
            Some(Ok(tls)) => tls,
            Some(Err(e)) => {
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                return;
            }
            None => {
                tracing::debug!(%peer, "TLS handshake timed out");
                return;
            }
        };
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        let conn = ConnCtx::new(self, peer, true, h2);
        if h2 {
            serve_http2(conn, TokioIo::new(tls), &settings).await;
        } else {
            serve_http1(conn, tls, &settings).await;
        }
    }

    /// Woken by publish/endpoints_changed: forget what no longer exists. Also ages out idle
    /// upstream connections periodically.
    async fn housekeeping(self: Rc<Self>) {
        let mut wake = self.shared.wake.subscribe();
        let mut endpoint_changes = self.shared.endpoint_changes.subscribe();
        // A publish before we subscribed woke nobody: catch up with it now.
        self.on_config_change();
        let mut tick = tokio::time::interval(HOUSEKEEPING_PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                changed = wake.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    self.on_config_change();
                }
                change = endpoint_changes.recv() => match change {
                    Ok(backends) => self.on_endpoints_change(&backends),
                    // Missed some: the whole view is cheaper than guessing.
                    Err(broadcast::error::RecvError::Lagged(_)) => self.on_config_change(),
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = tick.tick() => self.expire(),
            }
        }
    }

    /// A new configuration: rebuild the view of live endpoints and backends from scratch
    /// (O(all endpoints), like the compile that produced it).
    fn on_config_change(&self) {
        let Some(config) = self.config() else { return };
        let mut live = self.live.borrow_mut();
        live.rebuild(&config);
        let closed = self
            .pool
            .borrow_mut()
            .keep_only(live.counts.keys().copied().collect());
        if closed > 0 {
            tracing::debug!(closed, "closed idle connections to removed endpoints");
        }
        let backends: HashSet<usize> = live.seen.keys().copied().collect();
        self.balancer.borrow_mut().keep_only(&backends);
        let address = Arc::as_ptr(&*config) as usize;
        if self.stats_config.replace(address) != address {
            self.stats.borrow_mut().retire_routes();
        }
    }

    /// Endpoint sets swapped in place: only these backends are looked at, so one change costs
    /// the same with 50 endpoints or 50,000.
    fn on_endpoints_change(&self, backends: &[Arc<Backend>]) {
        let mut pool = self.pool.borrow_mut();
        let mut closed = 0;
        self.live
            .borrow_mut()
            .update(backends, |addr, live| match live {
                true => pool.allow(addr),
                false => closed += pool.forget(&addr),
            });
        if closed > 0 {
            tracing::debug!(closed, "closed idle connections to removed endpoints");
        }
    }

    fn expire(&self) {
        let max_age = self.settings().upstream_keepalive_timeout;
        let now = Instant::now();
        self.pool.borrow_mut().expire(max_age, now);
        self.balancer.borrow_mut().expire(now);
    }

    async fn serve_stats(self: Rc<Self>, mut requests: mpsc::Receiver<StatsRequest>) {
        while let Some(reply) = requests.recv().await {
            let snapshot = self.stats.borrow().snapshot();
            let _ = reply.send(snapshot);
        }
    }

    fn port(&self, https: bool) -> &HeaderValue {
        if https {
            &self.https_port
        } else {
            &self.http_port
        }
    }
}

impl ConnCtx {
    fn new(worker: Rc<Worker>, peer: SocketAddr, https: bool, h2: bool) -> Rc<ConnCtx> {
        let client_ip = HeaderValue::try_from(peer.ip().to_string())
            .expect("an IP address is a valid header value");
        Rc::new(ConnCtx {
            worker,
            https,
            h2,
            client_ip,
            requests: Cell::new(0),
            in_flight: Cell::new(0),
            last_active: Cell::new(Instant::now()),
            close: Notify::new(),
            closing: Cell::new(false),
        })
    }

    /// Starts a request: returns its guard and its number on this connection (from 1).
    pub(crate) fn begin_request(self: &Rc<Self>) -> (RequestGuard, u64) {
        let n = self.requests.get() + 1;
        self.requests.set(n);
        self.in_flight.set(self.in_flight.get() + 1);
        let guard = RequestGuard {
            conn: self.clone(),
            start: Instant::now(),
        };
        (guard, n)
    }

    /// The worker is stopping and this connection is to end after its current response.
    pub(crate) fn closing(&self) -> bool {
        self.closing.get()
    }

    /// Asks the driver to close this connection gracefully (HTTP/2 GOAWAY).
    pub(crate) fn close_after_this(&self) {
        self.close.notify_one();
    }

    pub(crate) fn forwarded<'a>(&'a self, settings: &Settings) -> Forwarded<'a> {
        Forwarded {
            client_ip: &self.client_ip,
            port: self.worker.port(self.https),
            https: self.https,
            trust_incoming: settings.use_forwarded_headers,
            underscores: settings.enable_underscores_in_headers,
        }
    }
}

impl RequestGuard {
    pub(crate) fn started(&self) -> Instant {
        self.start
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        let now = Instant::now();
        self.conn
            .worker
            .stats
            .borrow_mut()
            .observe(now.saturating_duration_since(self.start));
        self.conn.in_flight.set(self.conn.in_flight.get() - 1);
        self.conn.last_active.set(now);
    }
}

impl Drop for DrainGuard {
    fn drop(&mut self) {
        let drain = &self.worker.drain;
        drain.open.set(drain.open.get() - 1);
        if drain.open.get() == 0 {
            drain.idle.notify_one();
        }
    }
}

impl Drain {
    async fn wait(&self) {
        while self.open.get() > 0 {
            self.idle.notified().await;
        }
    }
}

/// Counts an open client connection for metrics and for the shutdown drain.
struct OpenConnection {
    drain: DrainGuard,
}

impl OpenConnection {
    fn new(worker: &Rc<Worker>) -> OpenConnection {
        worker.stats.borrow_mut().open_connections += 1;
        OpenConnection {
            drain: worker.drain_guard(),
        }
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.drain.worker.stats.borrow_mut().open_connections -= 1;
    }
}

/// HTTP/1.1: Sluice's inline server first; hyper takes the connection over at the first
/// request the inline server leaves to it (see `server`).
async fn serve_http1<I>(conn: Rc<ConnCtx>, io: I, settings: &Settings)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // Between requests a connection waits for the next head: it closes after the shorter of
    // `keep-alive` and `client-header-timeout` without one (a head that started arriving
    // does not extend it), as hyper's header timer did.
    let idle = match (
        non_zero(settings.keep_alive),
        non_zero(settings.client_header_timeout),
    ) {
        (Some(keep_alive), Some(header)) => keep_alive.min(header),
        (Some(limit), None) | (None, Some(limit)) => limit,
        (None, None) => Duration::ZERO,
    };
    let max_head = settings.max_request_header_size.max(MIN_HEADER_BUFFER);
    let mut inline = Http1::new(io, max_head, !settings.keep_alive.is_zero());
    let ended = drive(inline.run(&conn), &conn, idle, Server::Inline, |_| {
        conn.closing.set(true)
    })
    .await;
    let Some(Ended::Handover(read)) = ended else {
        return;
    };
    let io = TokioIo::new(Prefixed::new(read, inline.into_io()));

    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .max_buf_size(max_head)
        .keep_alive(!settings.keep_alive.is_zero())
        // `client-header-timeout` is enforced by `drive` instead: hyper's own timer would be
        // allocated and registered anew for every request head.
        .header_read_timeout(None);
    let service = service(conn.clone());
    let connection = builder.serve_connection(io, service).with_upgrades();
    let result = drive(connection, &conn, idle, Server::Hyper, |c| {
        c.graceful_shutdown()
    })
    .await;
    if let Some(Err(e)) = result {
        if e.is_parse_too_large() {
            // hyper answered 431 itself; count it with the other generated errors.
            conn.worker
                .stats
                .borrow_mut()
                .error(431, crate::error::ErrorSource::Client);
        }
        tracing::debug!(error = %e, "client connection ended with an error");
    }
}

async fn serve_http2<I>(conn: Rc<ConnCtx>, io: I, settings: &Settings)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + 'static,
{
    let mut builder = http2::Builder::new(LocalExec {
        stall_limit: settings.client_send_timeout,
    });
    builder
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(settings.max_request_header_size).unwrap_or(u32::MAX))
        // What one connection can hold: this many streams, each with at most one upstream
        // read (256 KiB) and hyper's send buffer (400 KB) queued; a stream that cannot send is
        // reset after client-send-timeout (`LocalExec`).
        .max_concurrent_streams(settings.http2_max_concurrent_streams);
    let service = service(conn.clone());
    let connection = builder.serve_connection(io, service);
    let keep_alive = settings.keep_alive;
    let ended = drive(connection, &conn, keep_alive, Server::Hyper, |c| {
        c.graceful_shutdown()
    });
    if let Some(Err(e)) = ended.await {
        tracing::debug!(error = %e, "client connection ended with an error");
    }
}

fn service(
    conn: Rc<ConnCtx>,
) -> impl hyper::service::Service<
    http::Request<hyper::body::Incoming>,
    Response = http::Response<crate::body::ResponseBody>,
    Error = Infallible,
> {
    service_fn(move |request| crate::forward::handle(conn.clone(), request))
}

/// Which server a connection is driving, for how it finishes gracefully.
#[derive(Clone, Copy, PartialEq)]
enum Server {
    /// hyper: its graceful shutdown closes HTTP/1 after the response in flight and sends
    /// HTTP/2 GOAWAY.
    Hyper,
    /// The inline HTTP/1 server: the request in flight (if any) is answered with
    /// `Connection: close`; an idle connection is closed at once.
    Inline,
}

/// Runs a client connection to its end, turning the worker's stop signal, the idle
/// timeout and `keep-alive-requests` into a graceful shutdown of it. `None`: the driver
/// closed it. An HTTP/1 connection idle too long is closed outright: hyper would keep one
/// that never completed its first head open on a graceful shutdown, and with no request in
/// flight nothing is cut short.
async fn drive<C: Future>(
    connection: C,
    conn: &ConnCtx,
    idle_timeout: Duration,
    server: Server,
    finish: impl Fn(Pin<&mut C>),
) -> Option<C::Output> {
    let mut connection = pin!(connection);
    let inline = server == Server::Inline;
    let mut stop = conn.worker.stop.clone();
    let mut closing = *stop.borrow_and_update();
    if closing {
        if inline && conn.in_flight.get() == 0 {
            return None;
        }
        finish(connection.as_mut());
    }
    let idle_enabled = !idle_timeout.is_zero();
    let idle = tokio::time::sleep(if idle_enabled {
        idle_timeout
    } else {
        Duration::from_secs(3600)
    });
    let mut idle = pin!(idle);
    loop {
        tokio::select! {
            biased;
            output = connection.as_mut() => return Some(output),
            changed = stop.changed(), if !closing => {
                if changed.is_err() || *stop.borrow_and_update() {
                    closing = true;
                    // The inline server between requests waits on a read that nothing
                    // else would end.
                    if inline && conn.in_flight.get() == 0 {
                        return None;
                    }
                    finish(connection.as_mut());
                }
            }
            // Only HTTP/2 is ever asked to close (HTTP/1 says `Connection: close`), and
            // polling a `Notify` takes a lock: HTTP/1 connections do not wait on it.
            () = conn.close.notified(), if !closing && conn.h2 => {
                closing = true;
                finish(connection.as_mut());
            }
            () = idle.as_mut(), if idle_enabled && !(closing && conn.h2) => {
                let now = Instant::now();
                let deadline = conn.last_active.get() + idle_timeout;
                if conn.in_flight.get() == 0 && deadline <= now {
                    if !conn.h2 {
                        return None;
                    }
                    closing = true;
                    finish(connection.as_mut());
                } else {
                    let next = if conn.in_flight.get() == 0 { deadline } else { now + idle_timeout };
                    idle.as_mut().reset(next.into());
                }
            }
        }
    }
}

/// Awaits `future` for at most `limit`; a zero limit means no limit. `None` on timeout.
pub(crate) async fn within<F: Future>(limit: Duration, future: F) -> Option<F::Output> {
    if limit.is_zero() {
        Some(future.await)
    } else {
        tokio::time::timeout(limit, future).await.ok()
    }
}

fn non_zero(duration: Duration) -> Option<Duration> {
    (!duration.is_zero()).then_some(duration)
}

/// Every endpoint the current configuration's backends hold, counted per backend that holds
/// it (one pod can serve several Services), and each backend's set as last seen.
#[derive(Default)]
struct LiveEndpoints {
    /// Backend (by address) → its endpoint set when this worker last looked.
    seen: HashMap<usize, Arc<EndpointSet>>,
    counts: HashMap<SocketAddr, u32>,
}

impl LiveEndpoints {
    fn rebuild(&mut self, config: &Compiled) {
        self.seen.clear();
        self.counts.clear();
        for backend in config.backends.values() {
            let endpoints = backend.endpoints();
            for addr in endpoints.all() {
                *self.counts.entry(*addr).or_default() += 1;
            }
            self.seen.insert(Arc::as_ptr(backend) as usize, endpoints);
        }
    }

    /// Takes in these backends' current sets; `changed(addr, true)` hears of endpoints no
    /// backend held before, `changed(addr, false)` of ones no backend holds any more.
    fn update(&mut self, backends: &[Arc<Backend>], mut changed: impl FnMut(SocketAddr, bool)) {
        for backend in backends {
            // A backend of a configuration this worker has not seen (or has replaced): the
            // rebuild for that configuration covers it.
            let Some(seen) = self.seen.get_mut(&(Arc::as_ptr(backend) as usize)) else {
                continue;
            };
            let now = backend.endpoints();
            if Arc::ptr_eq(seen, &now) {
                continue;
            }
            // Count the new set in before the old one out, so an endpoint in both never
            // touches zero.
            for addr in now.all() {
                let count = self.counts.entry(*addr).or_default();
                *count += 1;
                if *count == 1 {
                    changed(*addr, true);
                }
            }
            for addr in seen.all() {
                if let Some(count) = self.counts.get_mut(addr) {
                    *count -= 1;
                    if *count == 0 {
                        self.counts.remove(addr);
                        changed(*addr, false);
                    }
                }
            }
            *seen = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::BackendKey;

    fn addr(last: u8) -> SocketAddr {
        SocketAddr::from(([198, 18, 0, last], 8080))
    }

    fn backend(service: &str, ready: &[SocketAddr]) -> Arc<Backend> {
        Arc::new(Backend::new(
            BackendKey {
                service: model::NamespacedName::new("default", service),
                port_name: String::new(),
            },
            EndpointSet {
                ready: ready.to_vec(),
                terminating: Vec::new(),
                refused: Vec::new(),
            },
        ))
    }

    #[test]
    fn an_endpoint_leaves_only_when_no_backend_holds_it() {
        let (web, api) = (
            backend("web", &[addr(1), addr(2)]),
            backend("api", &[addr(2)]),
        );
        let config = Compiled {
            backends: [
                (web.key().unwrap().clone(), web.clone()),
                (api.key().unwrap().clone(), api.clone()),
            ]
            .into_iter()
            .collect(),
            ..Compiled::default()
        };
        let mut live = LiveEndpoints::default();
        live.rebuild(&config);
        assert_eq!(live.counts.len(), 2);

        // web drops the shared endpoint and gains a new one: only the new one is news.
        web.set_endpoints(EndpointSet {
            ready: vec![addr(1), addr(3)],
            terminating: Vec::new(),
            refused: Vec::new(),
        });
        let mut changes = Vec::new();
        live.update(std::slice::from_ref(&web), |a, joined| {
            changes.push((a, joined))
        });
        assert_eq!(changes, [(addr(3), true)]);

        // api drops it too: now it is gone. An unchanged backend is no work at all.
        api.set_endpoints(EndpointSet::default());
        changes.clear();
        live.update(&[api.clone(), web.clone()], |a, joined| {
            changes.push((a, joined))
        });
        assert_eq!(changes, [(addr(2), false)]);
        assert_eq!(live.counts.len(), 2);

        // A backend of a configuration this worker never saw is left to that rebuild.
        let stranger = backend("other", &[addr(9)]);
        live.update(&[stranger], |a, joined| changes.push((a, joined)));
        assert_eq!(changes.len(), 1);
    }
}
