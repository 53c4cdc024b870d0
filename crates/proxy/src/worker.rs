//! One worker's state: the configuration cache, the upstream side (`Upstreams`), counters,
//! log and span buffers, and the open client connections (`ConnCtx`) with the connection cap
//! and the shutdown drain. One thread owns it, so none of it needs atomics or locks: `Rc` and
//! `RefCell`, with borrows that never span an `.await`. The thread and its loops are
//! `runtime`, what a client connection goes through before its requests is `front_door`;
//! both sit above the request pipeline (`forward`), which reads this.
//!
//! ```text
//!  runtime (accept, housekeeping, stats) ──┐
//!  front_door (PROXY, TLS, servers, drive) ┴─▶ Worker, ConnCtx ◀── forward, servers, stream, udp
//!  ConnCtx::begin_request ─▶ RequestGuard, dropped with the response body (metrics, log line)
//!  max-worker-connections open: a new one evicts the longest-idle connection; none idle ─▶
//!     accepting pauses until a connection ends or goes idle (`room_for_one`). EMFILE: one
//!     rate-limited WARN with counts (`note_limit`).
//!  shutdown: `begin_stop` sets `stopping` and wakes every connection; `Drain` counts what is
//!     still open
//! ```

use std::cell::{Cell, RefCell};
use std::net::{IpAddr, SocketAddr};
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, Instant};

use http::request::Parts;
use http::HeaderValue;
use model::tls::HostTls;
use model::Settings;
use tokio::sync::{oneshot, watch, Notify};

use crate::access_log::{LineContext, LogBuffer, Record, TlsFacts, FLUSH_BYTES};
use crate::conn_cap::{ConnCap, LimitLog};
use crate::current::{Current, Held};
use crate::errors::OriginalHead;
use crate::headers::Forwarded;
use crate::metrics::{Measure, Snapshot, Stats};
use crate::otel::{SpanBuffer, SpanContext};
use crate::shared::Shared;
use crate::upstreams::Upstreams;

/// Host TLS configurations a worker keeps at most (distinct settings, not hosts: hosts with
/// equal settings share one).
const HOST_TLS_CONFIGS: usize = 32;

/// The admin server's request for this worker's counters.
pub(crate) type StatsRequest = oneshot::Sender<Snapshot>;

pub(crate) struct Worker {
    pub(crate) shared: Arc<Shared>,
    pub(crate) config: RefCell<Option<Current>>,
    /// This worker's copy of the settings of the configuration it holds (`None`: before the
    /// first publish), made once per configuration: a connection takes it with a plain
    /// increment, whatever lists the settings hold.
    pub(crate) settings_copy: RefCell<Option<(Option<Current>, Rc<Settings>)>>,
    /// Address of the configuration whose routes `stats` counts under.
    pub(crate) stats_config: Cell<usize>,
    /// Connections at rest, TLS clients, balancer state, live endpoints: handed down to the
    /// transports.
    pub(crate) upstreams: Rc<Upstreams>,
    /// The same counters as `upstreams.stats`.
    pub(crate) stats: Rc<RefCell<Stats>>,
    /// The TLS server configuration and the settings it was made with.
    pub(crate) tls: RefCell<(crate::tls::Handshakes, Arc<rustls::ServerConfig>)>,
    /// The configurations of hosts whose handshake differs (`model::tls::HostTls`), made on
    /// first use; emptied when the `ssl-*` settings change, and bounded by `HOST_TLS_CONFIGS`.
    pub(crate) host_tls: RefCell<Vec<(Arc<HostTls>, Arc<rustls::ServerConfig>)>>,
    /// The same for Gateways' own addresses (`sites`).
    pub(crate) site_tls: RefCell<crate::sites::SiteTlsConfigs>,
    pub(crate) http_port: HeaderValue,
    pub(crate) https_port: HeaderValue,
    /// The signal every worker shares; only `run` reads it.
    pub(crate) stop: watch::Receiver<bool>,
    /// This worker's copy of the stop signal: connections read it with a plain load.
    pub(crate) stopping: Cell<bool>,
    /// Wakes the accept loops when `stopping` is set.
    pub(crate) stopped: Notify,
    pub(crate) drain: Drain,
    /// Client connections being served, so stopping can wake them and the connection cap
    /// can find an idle one.
    pub(crate) connections: RefCell<Connections>,
    /// `max-worker-connections`: its numbers, the accept loops' wait, the limit WARN.
    pub(crate) cap: ConnCap,
    /// Access log lines not yet handed to the writer thread.
    pub(crate) log: RefCell<LogBuffer>,
    /// Spans not yet handed to the exporter thread.
    pub(crate) spans: RefCell<SpanBuffer>,
    /// Connections accepted so far (`$connection`).
    pub(crate) connections_seen: Cell<u64>,
    /// TCP services: accept loops and spliced connections by endpoint.
    pub(crate) streams: RefCell<crate::spliced::Streams>,
}

/// Registered client connections: a slab (a `Vec` with a free list), one slot each.
#[derive(Default)]
pub(crate) struct Connections {
    slots: Vec<Option<Rc<ConnCtx>>>,
    free: Vec<usize>,
}

/// Removes a connection from the worker's registry when it ends.
pub(crate) struct Registered {
    pub(crate) conn: Rc<ConnCtx>,
    slot: usize,
}

/// One client connection.
pub(crate) struct ConnCtx {
    pub(crate) worker: Rc<Worker>,
    pub(crate) https: bool,
    pub(crate) h2: bool,
    /// HTTPS: the session's version and cipher (the access log's `$ssl_*`).
    pub(crate) tls: Option<TlsFacts>,
    /// HTTPS: the certificate the client presented, when its host asked for one.
    pub(crate) client_cert: Option<Box<crate::client_cert::PeerCert>>,
    /// The address the connection came from (IPv4-mapped IPv6 as IPv4); behind a trusted
    /// load balancer speaking the PROXY protocol, the one its header names.
    pub(crate) peer: IpAddr,
    /// The load balancer's address, when `peer` came from its PROXY protocol header.
    pub(crate) load_balancer: Option<IpAddr>,
    /// The port the client reached the load balancer on (its PROXY header's destination),
    /// formatted: what `X-Forwarded-Port` says. Boxed: most connections have no balancer.
    balancer_port: Option<Box<HeaderValue>>,
    /// The address a PROXY protocol header named, believed or not.
    pub(crate) proxy_protocol_addr: Option<IpAddr>,
    /// The Gateway site's address the connection came in on (`sites`); `None`: the shared
    /// site's routes and certificates.
    pub(crate) local: Option<IpAddr>,
    /// The listener bit its requests' rules must answer on (`model::routes::Listeners`).
    pub(crate) on: model::routes::Listeners,
    /// The port its listener declares (Gateway API redirects derive theirs from it).
    pub(crate) declared_port: u16,
    /// HTTPS: the ClientHello's server name, read only when the site has Gateway listeners
    /// on the port (`listener_hosts`: a request for a host another listener owns is
    /// misdirected).
    pub(crate) sni: Option<Box<str>>,
    /// `peer`, formatted once.
    peer_text: HeaderValue,
    pub(crate) peer_port: u16,
    /// The worker's count of connections when this one came (nginx's `$connection`).
    pub(crate) serial: u64,
    pub(crate) requests: Cell<u64>,
    pub(crate) in_flight: Cell<u32>,
    /// When the connection last did something; for a new one, when it was accepted (its one
    /// client-header-timeout, over prefix, TLS handshake and first head, counts from there).
    pub(crate) last_active: Cell<Instant>,
    /// HTTP/2 only: `keep-alive-requests` reached; the driver sends GOAWAY.
    pub(crate) close_requested: Cell<bool>,
    /// Chosen to make room under `max-worker-connections`: the driver closes it if it is
    /// still idle.
    pub(crate) evict: Cell<bool>,
    /// The connection's task, woken when the worker stops or a flag above is set. Set once
    /// by `drive` (the task's waker does not change).
    pub(crate) waker: RefCell<Option<Waker>>,
    /// The worker is stopping: the inline HTTP/1 server answers the request in flight with
    /// `Connection: close` and serves no other.
    pub(crate) closing: Cell<bool>,
}

/// Where a connection comes from: the TCP peer, or the client a trusted load balancer's PROXY
/// protocol header names (then `load_balancer` is the peer).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Origin {
    pub(crate) peer: SocketAddr,
    pub(crate) load_balancer: Option<IpAddr>,
    /// With `load_balancer`: the port its PROXY header says the client connected to
    /// (nginx's `$proxy_protocol_server_port`).
    pub(crate) balancer_port: Option<u16>,
    /// What the PROXY protocol header said, believed or not (`$proxy_protocol_addr`).
    pub(crate) announced: Option<IpAddr>,
    /// When the connection was accepted.
    pub(crate) accepted: Instant,
    /// The Gateway site's address it came in on (`sites`); `None`: the shared site.
    pub(crate) local: Option<IpAddr>,
    /// The listener it came in on.
    pub(crate) door: crate::sites::FrontDoor,
}

/// Lives as long as one request (until its response body is done or dropped).
pub(crate) struct RequestGuard {
    pub(crate) conn: Rc<ConnCtx>,
    pub(crate) start: Instant,
    /// The access log's record, when the configuration logs.
    pub(crate) record: Option<Box<Record>>,
    /// What the metrics count when the request is over.
    pub(crate) measure: Measure,
    /// The request's client address ([`ConnCtx::client_ip`]), worked out once when the
    /// pipeline starts (the connection's peer until then).
    pub(crate) client: IpAddr,
    /// The request as the client sent it, kept only when the configuration has custom error
    /// pages (the errors phase sends it on); `forward` notes the request id it made.
    pub(crate) original: Option<Box<OriginalHead>>,
    /// `limit-connections`: this request's place in its zone, given back when it ends.
    pub(crate) limit_slot: Option<Box<crate::limits::ConnSlot>>,
}

/// Keeps the worker's shutdown waiting while a connection or tunnel is open.
pub(crate) struct DrainGuard {
    pub(crate) worker: Rc<Worker>,
    pub(crate) tunnel: bool,
}

/// Open connections and tunnels, so shutdown knows when all have finished.
#[derive(Default)]
pub(crate) struct Drain {
    pub(crate) open: Cell<usize>,
    /// Of `open`, the upgraded connections (counted when shutdown cuts them).
    pub(crate) tunnels: Cell<usize>,
    pub(crate) idle: Notify,
}

impl Worker {
    /// Sets this worker's stop flag and wakes whatever waits on it.
    pub(crate) fn begin_stop(&self) {
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
            if Arc::ptr_eq(mine.arc(), current) {
                return Some(mine.clone());
            }
        }
        let fresh = Rc::new(Held::new(
            Arc::clone(current),
            self.shared.reclaimer.clone(),
        ));
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
                (Some(of), Some(config)) => Arc::ptr_eq(of.arc(), config.arc()),
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
        self.cap.max(&self.settings())
    }

    /// Open client connections not already told to close.
    pub(crate) fn counted_connections(&self) -> usize {
        self.cap.counted(self.stats.borrow().open_connections)
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
        self.cap.evicting.set(self.cap.evicting.get() + 1);
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
            let room = self.cap.room.notified();
            let mut room = pin!(room);
            room.as_mut().enable();
            if !counted_pause {
                counted_pause = true;
                self.stats.borrow_mut().limits.accept_paused += 1;
                self.note_limit(|log| log.paused += 1);
            }
            self.cap.accept_waiting.set(true);
            tokio::select! {
                () = room => {}
                () = self.until_stopping() => {}
            }
            self.cap.accept_waiting.set(false);
        }
    }

    /// A connection ended or went idle: a paused accept loop may go on.
    fn room_changed(&self) {
        self.cap.room_changed();
    }

    /// Counts a limit event and writes the WARN if the last one is old enough.
    pub(crate) fn note_limit(&self, count: impl FnOnce(&mut LimitLog)) {
        self.cap.note(count, || {
            (self.max_connections(), self.stats.borrow().open_connections)
        });
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

    /// The TLS server configuration for a handshake: the listener's, or that of the host the
    /// ClientHello named when its handshake differs. Remade when `settings`' `ssl-*` keys
    /// changed: the handshakes after a ConfigMap edit follow it, open connections keep theirs.
    pub(crate) fn tls_config(
        &self,
        settings: &model::Settings,
        host: Option<&Arc<HostTls>>,
    ) -> Option<Arc<rustls::ServerConfig>> {
        let mut tls = self.tls.borrow_mut();
        if !tls.0.same(settings) {
            let handshakes = crate::tls::Handshakes::of(settings);
            match crate::tls::server_config(self.shared.clone(), &handshakes, None, None) {
                Ok(config) => *tls = (handshakes, config),
                Err(e) => {
                    tracing::error!(error = %e, "cannot rebuild the TLS configuration");
                    return None;
                }
            }
            self.host_tls.borrow_mut().clear();
            self.site_tls.borrow_mut().clear();
        }
        let Some(host) = host else {
            return Some(tls.1.clone());
        };
        let mut made = self.host_tls.borrow_mut();
        // Compared by value: each compile makes new `Arc`s of the same settings.
        if let Some((_, config)) = made.iter().find(|(h, _)| **h == **host) {
            return Some(config.clone());
        }
        match crate::tls::server_config(self.shared.clone(), &tls.0, Some(host), None) {
            Ok(config) => {
                if made.len() >= HOST_TLS_CONFIGS {
                    made.clear();
                }
                made.push((host.clone(), config.clone()));
                Some(config)
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot build a host's TLS configuration");
                None
            }
        }
    }

    /// The TLS configuration for a connection to the site at `site` (`sites`), with `host`'s
    /// handshake: its certificate resolver looks in that site's certificates.
    pub(crate) fn site_tls_config(
        &self,
        site: IpAddr,
        settings: &model::Settings,
        host: Option<&Arc<HostTls>>,
    ) -> Option<Arc<rustls::ServerConfig>> {
        // Remakes the shared configuration (and forgets the sites') when the settings changed.
        self.tls_config(settings, None)?;
        let shared = self.shared.clone();
        let host_tls = host.map(|h| &**h);
        self.site_tls.borrow_mut().get_or_make(site, host, || {
            crate::tls::server_config(shared, &self.tls.borrow().0, host_tls, Some(site))
        })
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

    pub(crate) fn port(&self, https: bool) -> &HeaderValue {
        if https {
            &self.https_port
        } else {
            &self.http_port
        }
    }
}

impl Origin {
    /// When the connection's client-header-timeout runs out (`None`: 0, no limit).
    pub(crate) fn header_deadline(&self, settings: &Settings) -> Option<Instant> {
        non_zero(settings.client_header_timeout).map(|limit| self.accepted + limit)
    }
}

impl ConnCtx {
    /// The client certificate this connection presented, for the `auth-tls-*` phase.
    pub(crate) fn presented(&self) -> crate::client_cert::Presented<'_> {
        crate::client_cert::Presented {
            peer: self.client_cert.as_deref(),
            https: self.https,
        }
    }

    /// When the connection last did something (when it was accepted, until its first request).
    pub(crate) fn last_active(&self) -> Instant {
        self.last_active.get()
    }

    pub(crate) fn new(
        worker: Rc<Worker>,
        origin: Origin,
        tls: Option<TlsFacts>,
        client_cert: Option<Box<crate::client_cert::PeerCert>>,
        sni: Option<Box<str>>,
        h2: bool,
    ) -> Rc<ConnCtx> {
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
            client_cert,
            peer,
            peer_text,
            peer_port,
            load_balancer: origin.load_balancer,
            balancer_port: origin
                .balancer_port
                .map(|port| Box::new(HeaderValue::from(port))),
            proxy_protocol_addr: origin.announced,
            local: origin.local,
            on: origin.door.on,
            declared_port: origin.door.port,
            sni,
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
    pub(crate) fn log(&self, record: &Record, start: Instant, end: Instant) {
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
    pub(crate) fn register(self: &Rc<Self>) -> Registered {
        let slot = self.worker.connections.borrow_mut().insert(self.clone());
        Registered {
            conn: self.clone(),
            slot,
        }
    }

    /// Remembers the task to wake; a pointer comparison once it is known.
    pub(crate) fn watch(&self, waker: &Waker) {
        let mut mine = self.waker.borrow_mut();
        if !mine.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *mine = Some(waker.clone());
        }
    }

    pub(crate) fn wake(&self) {
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
            client: self.peer,
            original: None,
            limit_slot: None,
        };
        (guard, n)
    }

    /// This connection is to end after its current response: the worker is stopping, or the
    /// process is terminating (SIGTERM, within `--shutdown-grace-period`: the listeners still
    /// accept, and each client is moved, one response at a time, to the replicas still ready).
    pub(crate) fn closing(&self) -> bool {
        self.closing.get() || self.worker.shared.is_terminating()
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
        // Behind such a balancer, the client it names may itself be a trusted proxy whose
        // forwarded-for header is believed (ingress-nginx >= 1.13 with use-forwarded-headers).
        let reads_forwarded = if self.load_balancer.is_some() {
            settings.use_forwarded_headers
        } else {
            settings.use_forwarded_headers || settings.enable_real_ip
        };
        if !reads_forwarded || !settings.is_trusted_proxy(self.peer) {
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

    /// A PROXY-protocol load balancer says the client reached it on 443: it terminated TLS,
    /// so the request counts as HTTPS for X-Forwarded-Proto and ssl-redirect (ingress-nginx's
    /// `$pass_access_scheme` with use-proxy-protocol).
    pub(crate) fn behind_tls_balancer(&self) -> bool {
        self.balancer_port
            .as_deref()
            .is_some_and(|port| port.as_bytes() == b"443")
    }

    /// The address the connection came from (see the field).
    pub(crate) fn peer(&self) -> IpAddr {
        self.peer
    }

    pub(crate) fn peer_port(&self) -> u16 {
        self.peer_port
    }

    /// What the upstream request says about its client (`client`: the request's
    /// [`ConnCtx::client_ip`]).
    /// What the request's nginx variables are filled from besides its head (`upstream-hash-by`,
    /// a mirror's target, the auth URL and sign-in).
    pub(crate) fn with_key_inputs<R>(
        &self,
        head: &Parts,
        forwarded_client: Option<IpAddr>,
        server_name: &str,
        f: impl FnOnce(&crate::hash_key::KeyInputs<'_>) -> R,
    ) -> R {
        let host = crate::normalise::request_host(head).unwrap_or("");
        let host = host[..model::target::strip_port(host.as_bytes()).len()].to_ascii_lowercase();
        let inputs = crate::hash_key::KeyInputs {
            client: forwarded_client.unwrap_or(self.peer()),
            client_port: self.peer_port(),
            https: self.https,
            host: &host,
            server_name,
        };
        f(&inputs)
    }

    pub(crate) fn forwarded<'a>(&'a self, client: IpAddr, settings: &'a Settings) -> Forwarded<'a> {
        let trust_incoming = self.trusts_forwarded_headers(settings);
        let custom = settings.forwarded_for_header.as_str();
        Forwarded {
            peer: &self.peer_text,
            client: (client != self.peer).then_some(client),
            // The balancer's port, as nginx's `$proxy_protocol_server_port`.
            port: (self.balancer_port.as_deref()).unwrap_or(self.worker.port(self.https)),
            https: self.https || self.behind_tls_balancer(),
            trust_incoming,
            full_forwarded_for: trust_incoming && settings.compute_full_forwarded_for,
            custom_forwarded_for: (custom != model::settings::DEFAULT_FORWARDED_FOR_HEADER)
                .then_some(custom),
            original_uri: settings.proxy_add_original_uri_header,
            generate_request_id: settings.generate_request_id,
            names: crate::headers::HeaderNames::of(settings),
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
    pub(crate) fn insert(&mut self, conn: Rc<ConnCtx>) -> usize {
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

    pub(crate) fn remove(&mut self, slot: usize) {
        self.slots[slot] = None;
        self.free.push(slot);
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Rc<ConnCtx>> {
        self.slots.iter().flatten()
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let worker = &self.conn.worker;
        worker.connections.borrow_mut().remove(self.slot);
        if self.conn.evict.get() {
            worker.cap.evicting.set(worker.cap.evicting.get() - 1);
        }
        // Its task is over: nothing to wake any more, and no cycle through the waker.
        self.conn.waker.borrow_mut().take();
    }
}

impl Drain {
    pub(crate) async fn wait(&self) {
        while self.open.get() > 0 {
            self.idle.notified().await;
        }
    }
}

/// Counts an open client connection for metrics and for the shutdown drain.
pub(crate) struct OpenConnection {
    pub(crate) drain: DrainGuard,
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

pub(crate) fn non_zero(duration: Duration) -> Option<Duration> {
    (!duration.is_zero()).then_some(duration)
}
