//! One worker: a thread with its own current-thread runtime, its own listening sockets, its
//! own upstream pool, balancer state and counters. Nothing here is shared with other workers,
//! so none of it needs atomics or locks: `Rc` and `RefCell`, with borrows that never span an
//! `.await`.
//!
//! ```text
//!  accept (TCP service ports, opened and closed by `stream::listen`) ─▶ stream::serve (splice)
//!  receive (UDP service ports, the same way) ─▶ udp::serve_port (a session per client)
//!  accept (http) ─┐                            ┌─▶ inline HTTP/1.1 ─(handover)─▶ hyper http1
//!  accept (https)─┴─▶ serve(conn) ─TLS+ALPN────┴─▶ h2_server (use-h2c: a plain connection
//!     │                                               that opens with the preface) ─▶ forward
//!     │                    drive(): stopping │ keep-alive-requests
//!     │                             ─▶ graceful shutdown (HTTP/1 close after response, GOAWAY)
//!     │                             idle timer (keep-alive, and client-header-timeout for
//!     │                             HTTP/1) │ evicted ─▶ close (HTTP/1) │ GOAWAY (HTTP/2)
//!     └─ max-worker-connections open: a new one evicts the longest-idle connection; none
//!        idle ─▶ accepting pauses until a connection ends or goes idle. EMFILE: pause
//!        until a connection ends, at most EXHAUSTED_PAUSE. One rate-limited WARN with counts.
//!  shutdown: the shared stop signal is watched by one task per worker (`run`), which sets
//!            the worker's own `stopping` flag and wakes its connections: connections never
//!            touch anything another worker touches.
//!  housekeeping: woken by publish/endpoints_changed ─▶ drop idle connections to vanished
//!                endpoints; every second ─▶ drop idle connections past their age
//!  stats: admin asks ─▶ snapshot of this worker's counters
//! ```

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::convert::Infallible;
use std::future::{poll_fn, Future};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use http::request::Parts;
use http::HeaderValue;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use model::{Backend, Settings};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, mpsc, oneshot, watch, Notify};
use tokio::task::LocalSet;

use crate::access_log::{LineContext, LogBuffer, Record, TlsFacts, FLUSH_BYTES, FLUSH_PERIOD};
use crate::current::Current;
use crate::deadline::before;
use crate::headers::Forwarded;
use crate::linger::Linger;
use crate::listen::StartError;
use crate::metrics::{Measure, Snapshot, Stats};
use crate::otel::{SpanBuffer, SpanContext};
use crate::proxy_protocol;
use crate::server::{Ended, Http1, Prefixed};
use crate::shared::Shared;
use crate::stall::WriteTimeout;
use crate::upstreams::Upstreams;

/// hyper refuses a smaller HTTP/1 buffer limit; `large-client-header-buffers` below it is
/// raised to it.
const MIN_HEADER_BUFFER: usize = 8192;

/// Pause after an accept error that is neither about one connection nor about descriptors,
/// so the loop does not spin while the condition lasts.
pub(crate) const ACCEPT_BACKOFF: Duration = Duration::from_millis(20);

/// Out of file descriptors: accepting waits for a connection of this worker to end, or this
/// long (nginx disables accepting for 500 ms), since other workers may free descriptors too.
const EXHAUSTED_PAUSE: Duration = Duration::from_millis(500);

/// At most one WARN about connection limits per this period per worker; it carries the
/// counts since the previous one.
const LIMIT_LOG_PERIOD: Duration = Duration::from_secs(10);

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
    /// `max-worker-connections: 0` means this (derived from the open-files limit).
    pub(crate) derived_max_connections: usize,
    /// TCP service ports to accept on, and to stop accepting on.
    pub(crate) stream_listeners: mpsc::UnboundedReceiver<crate::stream::ListenerChange>,
}

pub(crate) struct Worker {
    pub(crate) shared: Arc<Shared>,
    config: RefCell<Option<Current>>,
    /// This worker's copy of the settings of the configuration it holds (`None`: before the
    /// first publish), made once per configuration: a connection takes it with a plain
    /// increment, whatever lists the settings hold.
    settings_copy: RefCell<Option<(Option<Current>, Rc<Settings>)>>,
    /// Address of the configuration whose routes `stats` counts under.
    stats_config: Cell<usize>,
    /// Connections at rest, TLS clients, balancer state, live endpoints: handed down to the
    /// transports.
    pub(crate) upstreams: Rc<Upstreams>,
    /// The same counters as `upstreams.stats`.
    pub(crate) stats: Rc<RefCell<Stats>>,
    /// The TLS server configuration and whether it issues session tickets.
    tls: RefCell<(bool, Arc<rustls::ServerConfig>)>,
    http_port: HeaderValue,
    https_port: HeaderValue,
    /// The signal every worker shares; only `run` reads it.
    stop: watch::Receiver<bool>,
    /// This worker's copy of the stop signal: connections read it with a plain load.
    stopping: Cell<bool>,
    /// Wakes the accept loops when `stopping` is set.
    stopped: Notify,
    drain: Drain,
    /// Client connections being served, so stopping can wake them and the connection cap
    /// can find an idle one.
    connections: RefCell<Connections>,
    derived_max_connections: usize,
    /// Connections told to close for the cap and not yet gone.
    evicting: Cell<usize>,
    /// An accept loop waits for room under the cap: ending connections and requests wake it.
    accept_waiting: Cell<bool>,
    room: Notify,
    limit_log: RefCell<LimitLog>,
    /// Access log lines not yet handed to the writer thread.
    log: RefCell<LogBuffer>,
    /// Spans not yet handed to the exporter thread.
    spans: RefCell<SpanBuffer>,
    /// Connections accepted so far (`$connection`).
    connections_seen: Cell<u64>,
    /// TCP services: accept loops and spliced connections by endpoint.
    pub(crate) streams: RefCell<crate::stream::Streams>,
}

/// Registered client connections: a slab (a `Vec` with a free list), one slot each.
#[derive(Default)]
struct Connections {
    slots: Vec<Option<Rc<ConnCtx>>>,
    free: Vec<usize>,
}

/// Removes a connection from the worker's registry when it ends.
struct Registered {
    conn: Rc<ConnCtx>,
    slot: usize,
}

/// Counts since the last limit WARN, and when it was written.
#[derive(Default)]
struct LimitLog {
    last: Option<Instant>,
    idle_closed: u64,
    paused: u64,
    exhausted: u64,
}

/// One client connection.
pub(crate) struct ConnCtx {
    pub(crate) worker: Rc<Worker>,
    pub(crate) https: bool,
    pub(crate) h2: bool,
    /// HTTPS: the session's version and cipher (the access log's `$ssl_*`).
    tls: Option<TlsFacts>,
    /// The address the connection came from (IPv4-mapped IPv6 as IPv4); behind a trusted
    /// load balancer speaking the PROXY protocol, the one its header names.
    peer: IpAddr,
    /// The load balancer's address, when `peer` came from its PROXY protocol header.
    load_balancer: Option<IpAddr>,
    /// The address a PROXY protocol header named, believed or not.
    proxy_protocol_addr: Option<IpAddr>,
    /// `peer`, formatted once.
    peer_text: HeaderValue,
    peer_port: u16,
    /// The worker's count of connections when this one came (nginx's `$connection`).
    serial: u64,
    requests: Cell<u64>,
    in_flight: Cell<u32>,
    /// When the connection last did something; for a new one, when it was accepted (its one
    /// client-header-timeout, over prefix, TLS handshake and first head, counts from there).
    last_active: Cell<Instant>,
    /// HTTP/2 only: `keep-alive-requests` reached; the driver sends GOAWAY.
    close_requested: Cell<bool>,
    /// Chosen to make room under `max-worker-connections`: the driver closes it if it is
    /// still idle.
    evict: Cell<bool>,
    /// The connection's task, woken when the worker stops or a flag above is set. Set once
    /// by `drive` (the task's waker does not change).
    waker: RefCell<Option<Waker>>,
    /// The worker is stopping: the inline HTTP/1 server answers the request in flight with
    /// `Connection: close` and serves no other.
    closing: Cell<bool>,
}

/// Where a connection comes from: the TCP peer, or the client a trusted load balancer's PROXY
/// protocol header names (then `load_balancer` is the peer).
#[derive(Clone, Copy, Debug)]
struct Origin {
    peer: SocketAddr,
    load_balancer: Option<IpAddr>,
    /// What the PROXY protocol header said, believed or not (`$proxy_protocol_addr`).
    announced: Option<IpAddr>,
    /// When the connection was accepted.
    accepted: Instant,
}

/// Lives as long as one request (until its response body is done or dropped).
pub(crate) struct RequestGuard {
    conn: Rc<ConnCtx>,
    start: Instant,
    /// The access log's record, when the configuration logs.
    pub(crate) record: Option<Box<Record>>,
    /// What the metrics count when the request is over.
    pub(crate) measure: Measure,
}

/// Keeps the worker's shutdown waiting while a connection or tunnel is open.
pub(crate) struct DrainGuard {
    worker: Rc<Worker>,
    tunnel: bool,
}

/// Open connections and tunnels, so shutdown knows when all have finished.
#[derive(Default)]
struct Drain {
    open: Cell<usize>,
    /// Of `open`, the upgraded connections (counted when shutdown cuts them).
    tunnels: Cell<usize>,
    idle: Notify,
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
    let derived_max_connections = setup.derived_max_connections;
    let stream_listeners = setup.stream_listeners;
    std::thread::Builder::new()
        .name(format!("sluice-worker-{id}"))
        .spawn(move || {
            let local = LocalSet::new();
            local.block_on(&runtime, async move {
                let upstreams = Rc::new(Upstreams::default());
                let worker = Rc::new(Worker {
                    shared,
                    config: RefCell::new(None),
                    settings_copy: RefCell::new(None),
                    stats_config: Cell::new(0),
                    stats: upstreams.stats.clone(),
                    upstreams,
                    tls: RefCell::new((true, tls)),
                    http_port,
                    https_port,
                    stop,
                    stopping: Cell::new(false),
                    stopped: Notify::new(),
                    drain: Drain::default(),
                    connections: RefCell::default(),
                    derived_max_connections,
                    evicting: Cell::new(0),
                    accept_waiting: Cell::new(false),
                    room: Notify::new(),
                    limit_log: RefCell::default(),
                    log: RefCell::default(),
                    spans: RefCell::default(),
                    connections_seen: Cell::new(0),
                    streams: RefCell::default(),
                });
                worker.run(http, https, stats, stream_listeners).await;
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
        stream_listeners: mpsc::UnboundedReceiver<crate::stream::ListenerChange>,
    ) {
        tokio::task::spawn_local(crate::stream::listen(self.clone(), stream_listeners));
        tokio::task::spawn_local(self.clone().accept_loop(http, Listener::Http));
        tokio::task::spawn_local(self.clone().accept_loop(https, Listener::Https));
        tokio::task::spawn_local(self.clone().housekeeping());
        tokio::task::spawn_local(self.clone().serve_stats(stats));

        // The one place this worker reads the signal all workers share.
        let mut stop = self.stop.clone();
        while !*stop.borrow_and_update() {
            if stop.changed().await.is_err() {
                break;
            }
        }
        self.begin_stop();
        // No new connections; idle ones closing, busy ones finishing their current request.
        let grace = self.settings().worker_shutdown_timeout;
        if tokio::time::timeout(grace, self.drain.wait())
            .await
            .is_err()
        {
            let tunnels = self.drain.tunnels.get();
            self.shared
                .tunnels_closed_at_shutdown
                .fetch_add(tunnels as u64, Ordering::Relaxed);
            tracing::info!(
                connections = self.drain.open.get() - tunnels,
                tunnels,
                ?grace,
                "worker-shutdown-timeout elapsed, closing what is still open"
            );
        }
        self.upstreams.pool.borrow_mut().clear();
        self.flush_log();
    }

    /// Sets this worker's stop flag and wakes whatever waits on it.
    fn begin_stop(&self) {
        self.stopping.set(true);
        self.stopped.notify_waiters();
        for conn in self.connections.borrow().iter() {
            conn.wake();
        }
    }

    /// Resolves once the worker is stopping.
    pub(crate) async fn until_stopping(&self) {
        let stopped = self.stopped.notified();
        let mut stopped = pin!(stopped);
        stopped.as_mut().enable();
        if !self.stopping.get() {
            stopped.await;
        }
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

    /// The current settings, or the defaults before the first publish. Copied once per
    /// configuration (`settings_copy`), not per connection or accept: they hold lists.
    pub(crate) fn settings(&self) -> Rc<Settings> {
        let config = self.config();
        let mut cached = self.settings_copy.borrow_mut();
        if let Some((of, settings)) = cached.as_ref() {
            let same = match (of, &config) {
                (Some(of), Some(config)) => Arc::ptr_eq(of, config),
                (None, None) => true,
                _ => false,
            };
            if same {
                return settings.clone();
            }
        }
        // Holding the configuration keeps its address from being reused by a later one.
        let settings = Rc::new(
            config
                .as_ref()
                .map(|c| c.settings.clone())
                .unwrap_or_default(),
        );
        *cached = Some((config, settings.clone()));
        settings
    }

    fn drain_guard(self: &Rc<Self>, tunnel: bool) -> DrainGuard {
        self.drain.open.set(self.drain.open.get() + 1);
        if tunnel {
            self.drain.tunnels.set(self.drain.tunnels.get() + 1);
        }
        DrainGuard {
            worker: self.clone(),
            tunnel,
        }
    }

    /// Keeps shutdown waiting (up to `worker-shutdown-timeout`) while an upgraded connection
    /// is open; one still open then is closed and counted. The client connection's own
    /// count ended with hyper's part of it, so the tunnel counts it again: it holds its
    /// descriptors (and a place under `max-worker-connections`) until it closes.
    pub(crate) fn tunnel_guard(self: &Rc<Self>) -> DrainGuard {
        self.stats.borrow_mut().open_connections += 1;
        self.drain_guard(true)
    }

    /// `max-worker-connections`, or the derived value for 0.
    pub(crate) fn max_connections(&self) -> usize {
        match self.settings().max_worker_connections {
            0 => self.derived_max_connections,
            n => n as usize,
        }
    }

    /// Open client connections not already told to close.
    pub(crate) fn counted_connections(&self) -> usize {
        let open = usize::try_from(self.stats.borrow().open_connections).unwrap_or(usize::MAX);
        open.saturating_sub(self.evicting.get())
    }

    /// The idle connection that has waited longest, if any. A scan: it runs only at the cap.
    fn longest_idle(&self) -> Option<Rc<ConnCtx>> {
        self.connections
            .borrow()
            .iter()
            .filter(|c| c.in_flight.get() == 0 && !c.evict.get() && !c.closing.get())
            .min_by_key(|c| c.last_active.get())
            .cloned()
    }

    /// Tells the longest-idle connection to close; `false` when every connection is busy.
    fn evict_idle(&self) -> bool {
        let Some(conn) = self.longest_idle() else {
            return false;
        };
        conn.evict.set(true);
        self.evicting.set(self.evicting.get() + 1);
        conn.wake();
        self.stats.borrow_mut().limits.idle_closed += 1;
        self.note_limit(|log| log.idle_closed += 1);
        true
    }

    /// Before an accept (`accepted: false`): returns once a connection may be accepted under
    /// the cap: there is room, or an idle connection to close for it (closed only once one
    /// arrives). After one (`true`, counted already): returns once it has room, closing an idle
    /// connection for it; with none idle (all got busy while we waited in accept) the
    /// connection waits, and accepting with it. Waiting, accepting pauses (the kernel's backlog
    /// holds new connections) until a connection ends or goes idle.
    pub(crate) async fn room_for_one(&self, accepted: bool) {
        let mut counted_pause = false;
        loop {
            let limit = self.max_connections().saturating_add(usize::from(accepted));
            if self.stopping.get() || self.counted_connections() < limit {
                return;
            }
            if accepted {
                if self.evict_idle() {
                    continue;
                }
            } else if self.longest_idle().is_some() {
                return;
            }
            let room = self.room.notified();
            let mut room = pin!(room);
            room.as_mut().enable();
            if !counted_pause {
                counted_pause = true;
                self.stats.borrow_mut().limits.accept_paused += 1;
                self.note_limit(|log| log.paused += 1);
            }
            self.accept_waiting.set(true);
            tokio::select! {
                () = room => {}
                () = self.until_stopping() => {}
            }
            self.accept_waiting.set(false);
        }
    }

    /// A connection ended or went idle: a paused accept loop may go on.
    fn room_changed(&self) {
        if self.accept_waiting.get() {
            self.room.notify_waiters();
        }
    }

    /// Counts a limit event and writes the WARN if the last one is old enough.
    fn note_limit(&self, count: impl FnOnce(&mut LimitLog)) {
        let mut log = self.limit_log.borrow_mut();
        count(&mut log);
        let now = Instant::now();
        if log
            .last
            .is_some_and(|last| now.saturating_duration_since(last) < LIMIT_LOG_PERIOD)
        {
            return;
        }
        tracing::warn!(
            max_worker_connections = self.max_connections(),
            open = self.stats.borrow().open_connections,
            idle_closed = log.idle_closed,
            accept_paused = log.paused,
            out_of_file_descriptors = log.exhausted,
            "connection limit reached (max-worker-connections or the open-files limit); \
             counts since the last such line"
        );
        *log = LimitLog {
            last: Some(now),
            ..LimitLog::default()
        };
    }

    /// The next accepted client connection's serial number (nginx's `$connection`), HTTP and
    /// TCP services alike.
    pub(crate) fn next_connection_serial(&self) -> u64 {
        let serial = self.connections_seen.get() + 1;
        self.connections_seen.set(serial);
        serial
    }

    /// An upstream connect found no free descriptor.
    pub(crate) fn note_connect_exhaustion(&self) {
        self.stats.borrow_mut().limits.fd_exhausted += 1;
        self.note_limit(|log| log.exhausted += 1);
    }

    fn tls_config(&self, session_tickets: bool) -> Option<Arc<rustls::ServerConfig>> {
        let mut tls = self.tls.borrow_mut();
        if tls.0 != session_tickets {
            match crate::tls::server_config(self.shared.clone(), session_tickets) {
                Ok(config) => *tls = (session_tickets, config),
                Err(e) => {
                    tracing::error!(error = %e, "cannot rebuild the TLS configuration");
                    return None;
                }
            }
        }
        Some(tls.1.clone())
    }

    pub(crate) async fn accept_loop(self: Rc<Self>, listener: TcpListener, role: Listener) {
        loop {
            self.room_for_one(false).await;
            let accepted = tokio::select! {
                // Stopping must win over a full backlog.
                biased;
                () = self.until_stopping() => return,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, peer)) => {
                    // Counted now, so the other listener's loop sees it at once.
                    let open = OpenConnection::new(&self);
                    self.room_for_one(true).await;
                    match role {
                        Listener::Http | Listener::Https => {
                            let https = role == Listener::Https;
                            tokio::task::spawn_local(self.clone().serve(stream, peer, https, open));
                        }
                        Listener::TcpService(port) => {
                            let serve =
                                crate::stream::serve(self.clone(), stream, peer, port, open);
                            tokio::task::spawn_local(serve);
                        }
                    }
                }
                // The peer gave up before we accepted: nothing wrong with the listener.
                Err(e) if is_per_connection(&e) => {}
                Err(e) if crate::fds::is_exhaustion(&e) => {
                    self.stats.borrow_mut().limits.fd_exhausted += 1;
                    self.note_limit(|log| log.exhausted += 1);
                    // No idle connection is closed here: Linux allocates the descriptor before
                    // it looks for a pending connection, so EMFILE does not mean that anyone
                    // is waiting. The cap is what keeps descriptors free; this only waits.
                    let room = self.room.notified();
                    self.accept_waiting.set(true);
                    tokio::select! {
                        () = room => {}
                        () = tokio::time::sleep(EXHAUSTED_PAUSE) => {}
                        () = self.until_stopping() => {}
                    }
                    self.accept_waiting.set(false);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed, backing off");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            }
        }
    }

    async fn serve(
        self: Rc<Self>,
        mut stream: TcpStream,
        peer: SocketAddr,
        https: bool,
        _open: OpenConnection,
    ) {
        // Responses are written in few large writes; Nagle would only delay their tails.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "set TCP_NODELAY");
        }
        let settings = self.settings();
        let mut origin = Origin {
            peer,
            load_balancer: None,
            announced: None,
            accepted: Instant::now(),
        };
        // One client-header-timeout for everything before the first request: the PROXY
        // header, the ClientHello peek or h2c preface, the TLS handshake and the request head
        // (or HTTP/2 preface). A client trickling each stage just inside a timeout of its own
        // would otherwise hold the connection several timeouts long.
        let deadline = origin.header_deadline(&settings);
        if settings.use_proxy_protocol {
            // Boxed: only connections behind a PROXY-protocol load balancer carry this future.
            let header = Box::pin(before(deadline, proxy_protocol::read_header(&mut stream)));
            match header.await {
                Some(Ok(proxy_protocol::Header::Proxied { source })) => {
                    origin.announced = Some(source.ip().to_canonical());
                    if settings.is_trusted_proxy(peer.ip().to_canonical()) {
                        origin.peer = source;
                        origin.load_balancer = Some(peer.ip().to_canonical());
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "connection refused");
                    self.stats.borrow_mut().proxy_protocol_refused += 1;
                    return;
                }
                None => {
                    tracing::debug!(%peer, "no PROXY protocol header within client-header-timeout");
                    self.stats.borrow_mut().proxy_protocol_refused += 1;
                    return;
                }
            }
        }
        if https {
            if let Some(route) = self.passthrough_route(&stream, deadline).await {
                let peer = origin.peer;
                // Boxed: only passthrough connections carry the splice.
                Box::pin(crate::passthrough::pass(
                    &self, stream, &route, &settings, peer,
                ))
                .await;
                return;
            }
        }
        let h2c = !https && settings.use_h2c && {
            // Boxed: only plain listeners with use-h2c carry this future.
            let preface = Box::pin(before(deadline, starts_with_h2_preface(&stream)));
            preface.await.unwrap_or(false)
        };
        let stream = Linger::new(WriteTimeout::new(
            stream,
            settings.client_send_timeout,
            "the client read nothing within client-send-timeout",
        ));
        if !https {
            let conn = ConnCtx::new(self, origin, None, h2c);
            let _registered = conn.register();
            if h2c {
                let http2 = Box::pin(serve_http2(conn, stream, &settings));
                http2.await;
            } else {
                serve_http1(conn, stream, &settings).await;
            }
            return;
        }
        // Boxed: the handshake's and the TLS connection's state would otherwise be part of
        // every plain connection's task too (a task is as large as its largest state).
        let tls = Box::pin(self.serve_tls(stream, origin, &settings));
        tls.await;
    }

    /// The passthrough route of the host a TLS client asks for, if the configuration passes
    /// it through (read without consuming the ClientHello, before the connection's
    /// client-header-timeout deadline).
    async fn passthrough_route(
        &self,
        stream: &TcpStream,
        deadline: Option<Instant>,
    ) -> Option<Arc<model::Route>> {
        if self.config().as_ref()?.passthrough.is_empty() {
            return None;
        }
        let peeked = Box::pin(before(
            deadline,
            crate::passthrough::peek_server_name(stream),
        ));
        let name = peeked.await.flatten()?;
        // Looked up again: the configuration may have been swapped while the hello came.
        self.config().as_ref()?.passthrough.get(&name).cloned()
    }

    async fn serve_tls(
        self: Rc<Self>,
        stream: Linger<WriteTimeout<TcpStream>>,
        origin: Origin,
        settings: &Settings,
    ) {
        let peer = origin.peer;
        let Some(config) = self.tls_config(settings.ssl_session_tickets) else {
            return;
        };
        // A client that stalls its handshake is as slow as one that stalls its header: both
        // share the connection's one client-header-timeout.
        let handshake = crate::tls_server::accept(config, stream);
        let tls = match before(origin.header_deadline(settings), handshake).await {
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
        let h2 = tls.alpn_protocol() == Some(b"h2");
        let facts = TlsFacts::of(tls.session());
        let conn = ConnCtx::new(self, origin, Some(facts), h2);
        let _registered = conn.register();
        if h2 {
            // Boxed for the same reason: the HTTP/2 connection's state is what
            // HTTP/1.1-over-TLS connections do not need.
            let http2 = Box::pin(serve_http2(conn, tls, settings));
            http2.await;
        } else {
            serve_http1(conn, tls, settings).await;
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
        let mut log_tick = tokio::time::interval(FLUSH_PERIOD);
        log_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = log_tick.tick() => self.flush_log(),
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
        let mut live = self.upstreams.live.borrow_mut();
        live.rebuild(&config);
        let grace = self.settings().worker_shutdown_timeout;
        let streams = self.streams.borrow();
        for endpoint in streams.endpoints() {
            streams.endpoint_changed(endpoint, live.counts.contains_key(&endpoint), grace);
        }
        drop(streams);
        let closed = self
            .upstreams
            .pool
            .borrow_mut()
            .keep_only(|endpoint| live.counts.contains_key(endpoint));
        if closed > 0 {
            tracing::debug!(closed, "closed idle connections to removed endpoints");
        }
        let backends: HashSet<usize> = live.seen.keys().copied().collect();
        self.upstreams.balancer.borrow_mut().keep_only(&backends);
        let address = Arc::as_ptr(&*config) as usize;
        if self.stats_config.replace(address) != address {
            let live = config
                .ingresses
                .iter()
                .map(|i| (&*i.namespace, &*i.name))
                .collect();
            self.stats.borrow_mut().retire_routes(&live);
        }
    }

    /// Endpoint sets swapped in place: only these backends are looked at, so one change costs
    /// the same with 50 endpoints or 50,000.
    fn on_endpoints_change(&self, backends: &[Arc<Backend>]) {
        let grace = self.settings().worker_shutdown_timeout;
        let mut pool = self.upstreams.pool.borrow_mut();
        let streams = self.streams.borrow();
        let mut closed = 0;
        self.upstreams
            .live
            .borrow_mut()
            .update(backends, |addr, live| {
                streams.endpoint_changed(addr, live, grace);
                // One that joins is checked against `live` when a connection to it is pooled.
                if !live {
                    closed += pool.forget(&addr);
                }
            });
        if closed > 0 {
            tracing::debug!(closed, "closed idle connections to removed endpoints");
        }
    }

    /// Whether some backend of the current configuration holds `endpoint`.
    pub(crate) fn is_live_endpoint(&self, endpoint: &SocketAddr) -> bool {
        self.upstreams.is_live_endpoint(endpoint)
    }

    /// Updates one TCP service's counters.
    pub(crate) fn count_stream(
        &self,
        key: &crate::metrics::StreamKey,
        update: impl FnOnce(&mut crate::metrics::StreamCounts),
    ) {
        let mut stats = self.stats.borrow_mut();
        match stats.streams.get_mut(key) {
            Some(counts) => update(counts),
            None => update(stats.streams.entry(key.clone()).or_default()),
        }
    }

    /// Writes a TCP service connection's access log line.
    pub(crate) fn log_stream(
        &self,
        format: &model::access_log::StreamLogFormat,
        line: &crate::access_log::StreamLine,
    ) {
        let mut buffer = self.log.borrow_mut();
        if buffer.write_stream(format, line) >= FLUSH_BYTES {
            buffer.flush(&self.shared.access_log);
        }
    }

    /// Hands the access log lines and spans gathered so far to their threads.
    pub(crate) fn flush_log(&self) {
        self.log.borrow_mut().flush(&self.shared.access_log);
        self.spans.borrow_mut().flush(&self.shared.spans);
    }

    fn expire(&self) {
        let max_age = self.settings().upstream_keepalive_timeout;
        let now = Instant::now();
        self.upstreams.pool.borrow_mut().expire(max_age, now);
        self.upstreams.balancer.borrow_mut().expire(now);
    }

    async fn serve_stats(self: Rc<Self>, mut requests: mpsc::Receiver<StatsRequest>) {
        while let Some(reply) = requests.recv().await {
            let mut snapshot = self.stats.borrow_mut().snapshot();
            snapshot.accepted = self.connections_seen.get();
            self.streams
                .borrow()
                .add_open_traffic(&mut snapshot.streams);
            for conn in self.connections.borrow().iter() {
                let protocol = match (conn.https, conn.h2) {
                    (false, false) => 0,
                    (true, false) => 1,
                    (true, true) => 2,
                    (false, true) => 3,
                };
                snapshot
                    .connections
                    .count(protocol, conn.in_flight.get() > 0);
            }
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

impl Origin {
    /// When the connection's client-header-timeout runs out (`None`: 0, no limit).
    fn header_deadline(&self, settings: &Settings) -> Option<Instant> {
        non_zero(settings.client_header_timeout).map(|limit| self.accepted + limit)
    }
}

impl ConnCtx {
    /// When the connection last did something (when it was accepted, until its first request).
    pub(crate) fn last_active(&self) -> Instant {
        self.last_active.get()
    }

    fn new(worker: Rc<Worker>, origin: Origin, tls: Option<TlsFacts>, h2: bool) -> Rc<ConnCtx> {
        let https = tls.is_some();
        let peer = origin.peer;
        let peer_port = peer.port();
        let peer = peer.ip().to_canonical();
        let peer_text =
            HeaderValue::try_from(peer.to_string()).expect("an IP address is a valid header value");
        let serial = worker.next_connection_serial();
        Rc::new(ConnCtx {
            worker,
            https,
            h2,
            tls,
            peer,
            peer_text,
            peer_port,
            load_balancer: origin.load_balancer,
            proxy_protocol_addr: origin.announced,
            serial,
            requests: Cell::new(0),
            in_flight: Cell::new(0),
            // Idle since it was accepted: the first request head's wait counts from there.
            last_active: Cell::new(origin.accepted),
            close_requested: Cell::new(false),
            evict: Cell::new(false),
            waker: RefCell::new(None),
            closing: Cell::new(false),
        })
    }

    /// Writes a finished request's access log line, and its span when it is sampled, into the
    /// worker's buffers.
    fn log(&self, record: &Record, start: Instant, end: Instant) {
        let now = std::time::SystemTime::now();
        if let Some(trace) = record.trace.as_deref().filter(|t| t.sampled) {
            let context = SpanContext {
                https: self.https,
                server_port: self.local_port(),
                start: now
                    .checked_sub(end.saturating_duration_since(start))
                    .unwrap_or(now),
                end: now,
            };
            let mut spans = self.worker.spans.borrow_mut();
            spans.write(record, trace, &context, &self.worker.shared.spans);
        }
        if record.log.access_log.is_none() {
            return;
        }
        let context = LineContext {
            start,
            now,
            https: self.https,
            peer_port: self.peer_port,
            serial: self.serial,
            server_port: self.worker.port(self.https).clone(),
            proxy_protocol_addr: self.proxy_protocol_addr,
            tls: self.tls,
        };
        let mut buffer = self.worker.log.borrow_mut();
        if buffer.write(record, &context, end) >= FLUSH_BYTES {
            buffer.flush(&self.worker.shared.access_log);
        }
    }

    /// The listener port this connection came to.
    fn local_port(&self) -> u16 {
        let port = self.worker.port(self.https);
        port.to_str().ok().and_then(|p| p.parse().ok()).unwrap_or(0)
    }

    /// Enters this connection in the worker's registry until the returned guard drops.
    fn register(self: &Rc<Self>) -> Registered {
        let slot = self.worker.connections.borrow_mut().insert(self.clone());
        Registered {
            conn: self.clone(),
            slot,
        }
    }

    /// Remembers the task to wake; a pointer comparison once it is known.
    fn watch(&self, waker: &Waker) {
        let mut mine = self.waker.borrow_mut();
        if !mine.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *mine = Some(waker.clone());
        }
    }

    fn wake(&self) {
        if let Some(waker) = self.waker.borrow().as_ref() {
            waker.wake_by_ref();
        }
    }

    /// Starts a request: returns its guard and its number on this connection (from 1).
    pub(crate) fn begin_request(self: &Rc<Self>) -> (RequestGuard, u64) {
        let n = self.requests.get() + 1;
        self.requests.set(n);
        self.in_flight.set(self.in_flight.get() + 1);
        let guard = RequestGuard {
            conn: self.clone(),
            start: Instant::now(),
            record: None,
            measure: Measure::default(),
        };
        (guard, n)
    }

    /// The worker is stopping and this connection is to end after its current response.
    pub(crate) fn closing(&self) -> bool {
        self.closing.get()
    }

    /// Asks the driver to close this connection gracefully (HTTP/2 GOAWAY).
    pub(crate) fn close_after_this(&self) {
        self.close_requested.set(true);
        self.wake();
    }

    /// The real client address of a request on this connection, as ingress-nginx computes
    /// it (`client_addr`): the peer, unless `use-forwarded-headers` or `enable-real-ip` is on
    /// and the peer is in `proxy-real-ip-cidr`; then whom `forwarded-for-header` names,
    /// right to left past the trusted hops. The access phase (allow/deny lists) asks this.
    ///
    /// The common case reads two flags: no allocation, no header lookup.
    pub(crate) fn client_ip(&self, head: &Parts, settings: &Settings) -> IpAddr {
        // The PROXY protocol's address replaces the forwarded-for header (nginx's
        // `real_ip_header proxy_protocol`, as ingress-nginx configures it).
        if self.load_balancer.is_some()
            || !(settings.use_forwarded_headers || settings.enable_real_ip)
            || !settings.is_trusted_proxy(self.peer)
        {
            return self.peer;
        }
        let values = head
            .headers
            .get_all(settings.forwarded_for_header.as_str())
            .iter()
            .map(HeaderValue::as_bytes);
        crate::client_addr::from_forwarded(self.peer, values, &settings.proxy_real_ip_cidr)
    }

    /// Logs a request the codec refused before the pipeline saw it (see `Record::refused`).
    pub(crate) fn log_refused(&self, head: Option<&Parts>, status: u16, sent: (u64, u64)) {
        let Some(current) = self.worker.config() else {
            return;
        };
        let client = match head {
            Some(head) => self.client_ip(head, &current.settings),
            None => self.peer,
        };
        let nth = self.requests.get() + 1;
        if let Some(record) = Record::refused(&current, head, client, status, sent, nth) {
            let now = Instant::now();
            self.log(&record, now, now);
        }
    }

    /// The port of this worker's listener for a scheme (for redirects that name it).
    pub(crate) fn listener_port(&self, https: bool) -> &HeaderValue {
        self.worker.port(https)
    }

    /// `use-forwarded-headers` is on and the hop that wrote the request's headers is in
    /// `proxy-real-ip-cidr`: its `X-Forwarded-Proto`, `-Host` and `-Port` are believed. Behind
    /// a PROXY-protocol load balancer that hop is the client its header names (`peer`), not
    /// the balancer: an L4 balancer passes the client's bytes on as they are.
    pub(crate) fn trusts_forwarded_headers(&self, settings: &Settings) -> bool {
        settings.use_forwarded_headers && settings.is_trusted_proxy(self.peer)
    }

    /// What the upstream request says about its client; `head` as it arrived.
    /// The address the connection came from (see the field).
    pub(crate) fn peer(&self) -> IpAddr {
        self.peer
    }

    pub(crate) fn peer_port(&self) -> u16 {
        self.peer_port
    }

    pub(crate) fn forwarded<'a>(&'a self, head: &Parts, settings: &'a Settings) -> Forwarded<'a> {
        let client = self.client_ip(head, settings);
        let trust_incoming = self.trusts_forwarded_headers(settings);
        let custom = settings.forwarded_for_header.as_str();
        Forwarded {
            peer: &self.peer_text,
            client: (client != self.peer).then_some(client),
            port: self.worker.port(self.https),
            https: self.https,
            trust_incoming,
            full_forwarded_for: trust_incoming && settings.compute_full_forwarded_for,
            custom_forwarded_for: (custom != model::settings::DEFAULT_FORWARDED_FOR_HEADER)
                .then_some(custom),
            original_uri: settings.proxy_add_original_uri_header,
            generate_request_id: settings.generate_request_id,
            underscores: settings.enable_underscores_in_headers,
        }
    }
}

/// An HTTP/2 stream became a tunnel (RFC 8441 WebSocket): the connection is busy while it
/// is open, as while a request is in flight, so keep-alive does not close it.
impl crate::h2_server::TunnelCount for ConnCtx {
    fn tunnel_opened(&self) {
        self.in_flight.set(self.in_flight.get() + 1);
    }

    fn tunnel_closed(&self) {
        self.in_flight.set(self.in_flight.get() - 1);
        self.last_active.set(Instant::now());
        self.worker.room_changed();
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
        let measure = &self.measure;
        let bounds = &self.conn.worker.shared.bounds;
        match &measure.route {
            Some(route) => route.finished(measure, now, self.start, bounds),
            // The client left before the request was routed.
            None => {
                let mut stats = self.conn.worker.stats.borrow_mut();
                stats.route(None).finished(measure, now, self.start, bounds);
            }
        }
        if let Some(mut record) = self.record.take() {
            record.body_bytes = measure.response_body_bytes;
            record.response_head_bytes = measure.response_head_bytes;
            self.conn.log(&record, self.start, now);
        }
        self.conn.in_flight.set(self.conn.in_flight.get() - 1);
        self.conn.last_active.set(now);
        self.conn.worker.room_changed();
    }
}

impl Drop for DrainGuard {
    fn drop(&mut self) {
        let drain = &self.worker.drain;
        drain.open.set(drain.open.get() - 1);
        if self.tunnel {
            drain.tunnels.set(drain.tunnels.get() - 1);
            self.worker.stats.borrow_mut().open_connections -= 1;
            self.worker.room_changed();
        }
        if drain.open.get() == 0 {
            drain.idle.notify_one();
        }
    }
}

impl Connections {
    fn insert(&mut self, conn: Rc<ConnCtx>) -> usize {
        match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(conn);
                slot
            }
            None => {
                self.slots.push(Some(conn));
                self.slots.len() - 1
            }
        }
    }

    fn remove(&mut self, slot: usize) {
        self.slots[slot] = None;
        self.free.push(slot);
    }

    fn iter(&self) -> impl Iterator<Item = &Rc<ConnCtx>> {
        self.slots.iter().flatten()
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let worker = &self.conn.worker;
        worker.connections.borrow_mut().remove(self.slot);
        if self.conn.evict.get() {
            worker.evicting.set(worker.evicting.get() - 1);
        }
        // Its task is over: nothing to wake any more, and no cycle through the waker.
        self.conn.waker.borrow_mut().take();
    }
}

impl Drain {
    async fn wait(&self) {
        while self.open.get() > 0 {
            self.idle.notified().await;
        }
    }
}

/// What a listening socket is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Listener {
    Http,
    Https,
    /// A TCP service's port (`stream`).
    TcpService(u16),
}

/// Counts an open client connection for metrics and for the shutdown drain.
pub(crate) struct OpenConnection {
    drain: DrainGuard,
}

impl OpenConnection {
    pub(crate) fn new(worker: &Rc<Worker>) -> OpenConnection {
        worker.stats.borrow_mut().open_connections += 1;
        OpenConnection {
            drain: worker.drain_guard(false),
        }
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        let worker = &self.drain.worker;
        worker.stats.borrow_mut().open_connections -= 1;
        worker.room_changed();
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
    let ended = drive(
        inline.run(&conn),
        &conn,
        idle,
        Server::Inline,
        |_| conn.closing.set(true),
        |_| {},
    )
    .await;
    let Some(Ended::Handover(read)) = ended else {
        return;
    };
    // Boxed: hyper's connection state is kilobytes, and only the connections handed over
    // (bodies, upgrades, HTTP/1.0) need it.
    // Built in its own statement: a temporary in the awaiting statement would keep its
    // (unboxed) size in this future.
    let hyper = Box::pin(serve_http1_hyper(
        conn,
        Prefixed::new(read, inline.into_io()),
        settings,
        idle,
        max_head,
    ));
    hyper.await;
}

/// The rest of a connection the inline server handed over, served by hyper.
async fn serve_http1_hyper<I>(
    conn: Rc<ConnCtx>,
    io: Prefixed<I>,
    settings: &Settings,
    idle: Duration,
    max_head: usize,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let io = TokioIo::new(io);

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
    let result = drive(
        connection,
        &conn,
        idle,
        Server::Graceful,
        |c| c.graceful_shutdown(),
        |_| {},
    )
    .await;
    if let Some(Err(e)) = result {
        if e.is_parse_too_large() {
            // hyper answered 431 itself; count it with the other generated errors.
            conn.worker
                .stats
                .borrow_mut()
                .error(431, crate::error::ErrorSource::Client);
            conn.log_refused(None, 431, (0, 0));
        } else if e.is_parse() {
            // hyper answered 400 to a head it could not read.
            conn.log_refused(None, 400, (0, 0));
        }
        tracing::debug!(error = %e, "client connection ended with an error");
    }
}

/// HTTP/2's connection preface (RFC 9113 3.4): a client with prior knowledge starts with it.
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Whether the client's first bytes are HTTP/2's preface; they stay in the socket.
async fn starts_with_h2_preface(stream: &TcpStream) -> bool {
    let mut first = [0u8; H2_PREFACE.len()];
    crate::peek::until(stream, &mut first, |seen| {
        if seen.is_empty() || *seen != H2_PREFACE[..seen.len()] {
            Some(false)
        } else {
            // The preface may arrive in parts (rare): wait for the rest.
            (seen.len() == H2_PREFACE.len()).then_some(true)
        }
    })
    .await
    .unwrap_or(false)
}

async fn serve_http2<I>(conn: Rc<ConnCtx>, io: I, settings: &Settings)
where
    I: AsyncRead + AsyncWrite + Unpin + 'static,
{
    let limits = crate::h2_server::Limits {
        // What one connection can hold: this many streams, each with at most one upstream
        // read (256 KiB) and the connection's write queue; a stream that cannot send is
        // reset after client-send-timeout.
        max_concurrent_streams: settings.http2_max_concurrent_streams,
        max_header_list: settings.max_request_header_size,
        header_timeout: settings.client_header_timeout,
        send_timeout: settings.client_send_timeout,
    };
    let connection = crate::h2_server::Connection::new(conn.clone(), io, limits);
    let ended = drive(
        connection,
        &conn,
        settings.keep_alive,
        Server::Graceful,
        |c| c.get_mut().go_away(),
        |_| {},
    );
    if let Some(Err(e)) = ended.await {
        tracing::debug!(error = %e, "client connection ended with an error");
    }
}

fn service(
    conn: Rc<ConnCtx>,
) -> impl hyper::service::Service<
    http::Request<hyper::body::Incoming>,
    Response = http::Response<crate::response_body::ResponseBody>,
    Error = Infallible,
> {
    service_fn(move |request| crate::forward::handle(conn.clone(), request))
}

/// Which server a connection is driving, for how it finishes gracefully.
#[derive(Clone, Copy, PartialEq)]
enum Server {
    /// hyper (HTTP/1 after a handover) or the HTTP/2 server: a graceful shutdown closes
    /// HTTP/1 after the response in flight and sends HTTP/2 GOAWAY.
    Graceful,
    /// The inline HTTP/1 server: the request in flight (if any) is answered with
    /// `Connection: close`; an idle connection is closed at once.
    Inline,
}

/// Runs a client connection to its end, turning the worker's stop flag, the idle timeout,
/// an eviction for `max-worker-connections` and `keep-alive-requests` into a graceful
/// shutdown of it. `None`: the driver closed it. An HTTP/1 connection idle too long (or
/// evicted) is closed outright: hyper would keep one that never completed its first head open
/// on a graceful shutdown, and with no request in flight nothing is cut short.
///
/// The flags are this worker's and this connection's `Cell`s, read with plain loads on each
/// poll; whoever sets one wakes the task through the waker `watch` keeps. Nothing here
/// touches memory another worker writes. `after_poll` runs after each poll of the connection
/// (unused by both servers today).
async fn drive<C: Future>(
    connection: C,
    conn: &ConnCtx,
    idle_timeout: Duration,
    server: Server,
    finish: impl Fn(Pin<&mut C>),
    after_poll: impl Fn(&mut Context<'_>),
) -> Option<C::Output> {
    let mut connection = pin!(connection);
    let inline = server == Server::Inline;
    let idle_enabled = !idle_timeout.is_zero();
    // From the connection's last activity, which for a new one is when it was accepted: the
    // first request head gets what the prefix and handshake left of client-header-timeout.
    let idle = tokio::time::sleep_until(
        (conn.last_active.get()
            + if idle_enabled {
                idle_timeout
            } else {
                Duration::from_secs(3600)
            })
        .into(),
    );
    let mut idle = pin!(idle);
    let mut closing = false;
    poll_fn(|cx| {
        conn.watch(cx.waker());
        loop {
            if !closing && conn.worker.stopping.get() {
                closing = true;
                // The inline server between requests waits on a read that nothing else
                // would end.
                if inline && conn.in_flight.get() == 0 {
                    return Poll::Ready(None);
                }
                finish(connection.as_mut());
            }
            let polled = connection.as_mut().poll(cx);
            after_poll(cx);
            if let Poll::Ready(output) = polled {
                return Poll::Ready(Some(output));
            }
            // Only HTTP/2 is ever asked to close this way (HTTP/1 says `Connection: close`).
            if !closing && conn.close_requested.get() {
                closing = true;
                finish(connection.as_mut());
                continue;
            }
            if conn.evict.get() && !(closing && conn.h2) {
                if conn.in_flight.get() == 0 {
                    if !conn.h2 {
                        return Poll::Ready(None);
                    }
                    closing = true;
                    finish(connection.as_mut());
                    continue;
                }
                // A request arrived since it was chosen: it stays, and counts again.
                conn.evict.set(false);
                conn.worker.evicting.set(conn.worker.evicting.get() - 1);
            }
            if idle_enabled && idle.as_mut().poll(cx).is_ready() {
                let now = Instant::now();
                if closing && conn.h2 {
                    // GOAWAY is out. A client that does not let the connection finish (a
                    // flow-control window kept shut on the last responses' data) is dropped
                    // once it has had no stream for another idle period.
                    if conn.in_flight.get() == 0 {
                        return Poll::Ready(None);
                    }
                    idle.as_mut().reset((now + idle_timeout).into());
                    continue;
                }
                let deadline = conn.last_active.get() + idle_timeout;
                if conn.in_flight.get() == 0 && deadline <= now {
                    if !conn.h2 {
                        return Poll::Ready(None);
                    }
                    closing = true;
                    finish(connection.as_mut());
                    idle.as_mut().reset((now + idle_timeout).into());
                } else {
                    let next = if conn.in_flight.get() == 0 {
                        deadline
                    } else {
                        now + idle_timeout
                    };
                    idle.as_mut().reset(next.into());
                }
                continue;
            }
            return Poll::Pending;
        }
    })
    .await
}

/// An accept error about the one connection (the peer gave up before it was accepted), not
/// about the listener.
pub(crate) fn is_per_connection(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    )
}

fn non_zero(duration: Duration) -> Option<Duration> {
    (!duration.is_zero()).then_some(duration)
}
