//! This worker's upstream connections at rest: idle HTTP/1.1 connections and shared HTTP/2
//! ones, keyed by endpoint and TLS client. Below both transports (`upstream`, `upstream_h2`),
//! which check connections out and back in; the worker's housekeeping sweeps it.
//!
//! ```text
//!  upstream ──checkout/checkin──▶ Pool.idle  (LIFO per endpoint and TLS client)
//!  upstream_h2 ─checkout/insert─▶ Pool.h2    (streams counted per connection: StreamSlot)
//!  housekeeping ─keep_only / forget / expire─▶ both
//! ```

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::client::Conn;

/// Streams one connection carries before another is opened, unless the peer's
/// SETTINGS_MAX_CONCURRENT_STREAMS is lower. Above the peer's limit the client would queue a stream
/// until one ends; this bound spreads load instead and never fails a request. 100 is the
/// least RFC 9113 §6.5.2 recommends a server allow.
const MAX_STREAMS: usize = 100;

/// A shared HTTP/2 connection as streams reach it: its request handle (`h2_client`), and whether the
/// connection is done for new streams (its task ended, or a stream could not be opened on
/// it: a GOAWAY came, or it failed).
#[derive(Clone)]
pub(crate) struct H2Sender {
    pub(crate) send: crate::h2_client::Sender,
    closed: Rc<Cell<bool>>,
}

impl H2Sender {
    pub(crate) fn new(send: crate::h2_client::Sender, closed: Rc<Cell<bool>>) -> H2Sender {
        H2Sender { send, closed }
    }

    /// No new stream goes on it.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.get()
    }

    /// Takes no new streams from now on (those running finish).
    pub(crate) fn close(&self) {
        self.closed.set(true);
    }

    /// Room for one more stream: below our bound and the peer's.
    fn has_room(&self, open: usize) -> bool {
        open < MAX_STREAMS.min(self.send.current_max_send_streams())
    }
}

/// Idle upstream connections of one worker, by endpoint, then by TLS client (0: plain TCP;
/// nearly always the only one), so that an endpoint's removal stays one map removal.
/// Only connections to endpoints of the current configuration are kept: callers ask the
/// worker's one endpoint index (`Upstreams::is_live_endpoint`) before they check one in (a set
/// of its own here cost ≈40 bytes per endpoint per worker).
#[derive(Default)]
pub(crate) struct Pool {
    /// foldhash: checked out and in once a request, by endpoint addresses the configuration
    /// chose (SipHash was ~230 instructions a lookup).
    idle: foldhash::HashMap<SocketAddr, Vec<(u64, VecDeque<Idle>)>>,
    /// HTTP/2 connections (gRPC, h2c routes): shared by streams, not idle or busy.
    pub(crate) h2: H2Pool,
}

struct Idle {
    conn: Conn,
    since: Instant,
}

/// When an upstream connection takes no more requests: after `upstream-keepalive-requests`
/// of them (nginx's `keepalive_requests`) or `upstream-keepalive-time` after it was opened
/// (`keepalive_time`), whichever comes first. The request that reaches either finishes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Retire {
    pub(crate) after_requests: u64,
    /// `upstream-keepalive-time` in [`crate::client::uptime_ticks`] (rounded up).
    pub(crate) after_ticks: u32,
}

impl Retire {
    pub(crate) fn of(settings: &model::Settings) -> Retire {
        let time = settings.upstream_keepalive_time;
        let ticks = time.as_secs() * crate::client::TICKS_PER_SECOND
            + u64::from(time.subsec_millis()).div_ceil(100);
        Retire {
            after_requests: u64::from(settings.upstream_keepalive_requests),
            after_ticks: u32::try_from(ticks).unwrap_or(u32::MAX),
        }
    }

    /// Whether a connection opened at `opened` (see [`crate::client::uptime_ticks`]) that has carried
    /// `requests` is done.
    pub(crate) fn reached(self, requests: u64, opened: u32, now: Instant) -> bool {
        requests >= self.after_requests
            || crate::client::uptime_ticks(now).saturating_sub(opened) >= self.after_ticks
    }
}

/// A worker's HTTP/2 connections, by endpoint (beside the HTTP/1.1 idle pool in `Pool`).
#[derive(Default)]
pub(crate) struct H2Pool {
    conns: HashMap<SocketAddr, Vec<H2Conn>>,
    /// Connects under way, by endpoint and TLS client: others wait for them.
    pub(crate) connecting: HashMap<(SocketAddr, u64), Rc<tokio::sync::Notify>>,
}

/// One multiplexed connection.
struct H2Conn {
    /// The TLS client it was made with (0: cleartext).
    tls_id: u64,
    send: H2Sender,
    streams: Rc<StreamCount>,
}

/// The streams open on a connection, and since when it has had none (an idle connection is
/// closed after upstream-keepalive-timeout, as HTTP/1.1 ones are).
pub(crate) struct StreamCount {
    open: Cell<usize>,
    /// Streams the connection has carried (`upstream-keepalive-requests` retires it).
    started: Cell<u64>,
    /// When it was made ([`crate::client::uptime_ticks`]; `upstream-keepalive-time` retires it).
    opened: u32,
    idle_since: Cell<Instant>,
}

/// One open stream, counted on its connection until the response body ends.
pub(crate) struct StreamSlot(Rc<StreamCount>);

impl Pool {
    /// The most recently used idle connection to `addr` that is still open and young enough.
    pub(crate) fn checkout(
        &mut self,
        addr: SocketAddr,
        tls_id: u64,
        max_age: Duration,
        now: Instant,
    ) -> Option<Conn> {
        let queue = self
            .idle
            .get_mut(&addr)?
            .iter_mut()
            .find_map(|(id, queue)| (*id == tls_id).then_some(queue))?;
        while let Some(idle) = queue.pop_back() {
            if now.saturating_duration_since(idle.since) >= max_age {
                // The newest is too old, so are all the others.
                queue.clear();
                return None;
            }
            // Closed while idle (the endpoint's keep-alive timeout, a restart): not a failure
            // of anything, just take the next one.
            if idle.conn.is_idle_open() {
                return Some(idle.conn);
            }
        }
        None
    }

    pub(crate) fn checkin(&mut self, addr: SocketAddr, conn: Conn, max_idle: usize, now: Instant) {
        if max_idle == 0 {
            return;
        }
        let tls_id = conn.tls_id();
        let queues = self.idle.entry(addr).or_default();
        let at = match queues.iter().position(|(id, _)| *id == tls_id) {
            Some(at) => at,
            None => {
                queues.push((tls_id, VecDeque::new()));
                queues.len() - 1
            }
        };
        let queue = &mut queues[at].1;
        while queue.len() >= max_idle {
            queue.pop_front();
        }
        queue.push_back(Idle { conn, since: now });
    }

    /// An HTTP/2 connection to a live `addr` joins the pool (the caller checks: a connection
    /// to another carries its one stream and closes).
    pub(crate) fn insert_h2(
        &mut self,
        addr: SocketAddr,
        tls_id: u64,
        send: H2Sender,
        streams: Rc<StreamCount>,
    ) {
        self.h2.insert(addr, tls_id, send, streams);
    }

    /// Closes idle connections to endpoints not in `live`, and lets HTTP/2 connections to
    /// them take no new streams (running ones finish); returns how many.
    pub(crate) fn keep_only(&mut self, live: impl Fn(&SocketAddr) -> bool) -> usize {
        let mut closed = self.h2.keep_only(&live);
        self.idle.retain(|addr, queues| {
            let keep = live(addr);
            if !keep {
                closed += count(queues);
            }
            keep
        });
        closed
    }

    /// `addr` left every backend: close its idle connections and pool no more; returns how many
    /// were closed.
    pub(crate) fn forget(&mut self, addr: &SocketAddr) -> usize {
        let h2 = self.h2.forget(addr);
        h2 + self.idle.remove(addr).map_or(0, |queues| count(&queues))
    }

    /// Closes idle connections past their age, and ones their endpoint closed (no task
    /// watches idle connections, so this is where a closed one stops holding a socket).
    pub(crate) fn expire(&mut self, max_age: Duration, now: Instant) {
        for queues in self.idle.values_mut() {
            for (_, queue) in queues.iter_mut() {
                queue.retain(|idle| {
                    now.saturating_duration_since(idle.since) < max_age && idle.conn.is_idle_open()
                });
            }
            queues.retain(|(_, queue)| !queue.is_empty());
        }
        self.idle.retain(|_, queues| !queues.is_empty());
        self.h2.expire(max_age, now);
    }

    pub(crate) fn clear(&mut self) {
        self.idle.clear();
        self.h2.clear();
    }
}

/// Connections in an endpoint's queues.
fn count(queues: &[(u64, VecDeque<Idle>)]) -> usize {
    queues.iter().map(|(_, queue)| queue.len()).sum()
}

impl H2Pool {
    /// A connection to `addr` made with `tls_id` that takes another stream; one `retire`
    /// says is done takes no more.
    pub(crate) fn checkout(
        &mut self,
        addr: SocketAddr,
        tls_id: u64,
        retire: Retire,
    ) -> Option<(H2Sender, StreamSlot)> {
        let conns = self.conns.get_mut(&addr)?;
        // A connection that got GOAWAY or failed is closed, and a used-up one is done:
        // neither takes a new stream, and dropping the handle lets the client close it once its
        // running streams end.
        let now = Instant::now();
        conns.retain(|conn| {
            let streams = &conn.streams;
            !conn.send.is_closed() && !retire.reached(streams.started.get(), streams.opened, now)
        });
        let conn = conns
            .iter()
            .find(|conn| conn.tls_id == tls_id && conn.send.has_room(conn.streams.open.get()))?;
        Some((conn.send.clone(), StreamSlot::new(&conn.streams)))
    }

    pub(crate) fn insert(
        &mut self,
        addr: SocketAddr,
        tls_id: u64,
        send: H2Sender,
        streams: Rc<StreamCount>,
    ) {
        self.conns.entry(addr).or_default().push(H2Conn {
            tls_id,
            send,
            streams,
        });
    }

    /// Connections to endpoints not in `live` take no new streams; returns how many.
    pub(crate) fn keep_only(&mut self, live: &impl Fn(&SocketAddr) -> bool) -> usize {
        let mut dropped = 0;
        self.conns.retain(|addr, conns| {
            let keep = live(addr);
            if !keep {
                dropped += conns.len();
            }
            keep
        });
        dropped
    }

    /// `addr` left every backend: its connections take no new streams.
    pub(crate) fn forget(&mut self, addr: &SocketAddr) -> usize {
        self.conns.remove(addr).map_or(0, |conns| conns.len())
    }

    /// Drops connections that closed (GOAWAY, errors) and ones without a stream for
    /// `max_age` (zero: none are kept idle).
    pub(crate) fn expire(&mut self, max_age: Duration, now: Instant) {
        for conns in self.conns.values_mut() {
            conns.retain(|conn| {
                let idle_for = now.saturating_duration_since(conn.streams.idle_since.get());
                !conn.send.is_closed() && (conn.streams.open.get() > 0 || idle_for < max_age)
            });
        }
        self.conns.retain(|_, conns| !conns.is_empty());
    }

    pub(crate) fn clear(&mut self) {
        self.conns.clear();
    }
}

impl StreamCount {
    pub(crate) fn new() -> Rc<StreamCount> {
        Rc::new(StreamCount {
            open: Cell::new(0),
            started: Cell::new(0),
            opened: crate::client::uptime_ticks(Instant::now()),
            idle_since: Cell::new(Instant::now()),
        })
    }
}

impl StreamSlot {
    pub(crate) fn new(streams: &Rc<StreamCount>) -> StreamSlot {
        streams.open.set(streams.open.get() + 1);
        streams.started.set(streams.started.get() + 1);
        StreamSlot(streams.clone())
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let open = self.0.open.get().saturating_sub(1);
        self.0.open.set(open);
        if open == 0 {
            self.0.idle_since.set(Instant::now());
        }
    }
}
