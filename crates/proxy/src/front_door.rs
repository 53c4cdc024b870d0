//! What a client connection goes through before its requests: the PROXY protocol header, the
//! ClientHello peek (only when the configuration has passthrough hosts or hosts with their own
//! TLS settings), the h2c preface, the TLS handshake with ALPN; then the server that speaks its
//! protocol, driven until it ends.
//!
//! ```text
//!  accepted ─▶ serve(conn) ─ PROXY header? ─ SNI: passthrough? ─▶ passthrough::pass (splice)
//!                                               a TLS listener's route? ─▶ tls_route (pass
//!                                               or terminate and relay; no route: closed)
//!                                               own TLS settings? ─▶ that host's ServerConfig
//!                                               (merged with its port's frontend validation)
//!                 ├─ plain ──────────────┐            ┌─▶ inline HTTP/1.1 ─(handover)─▶ hyper http1
//!                 └─ TLS+ALPN (serve_tls)┴─▶ ConnCtx ─┴─▶ h2_server (use-h2c: a plain connection
//!                                                        that opens with the preface) ─▶ forward
//!  drive(): stopping │ keep-alive-requests ─▶ graceful shutdown (HTTP/1 close after response,
//!           GOAWAY); idle timer (keep-alive, and client-header-timeout for HTTP/1) │ evicted
//!           ─▶ close (HTTP/1) │ GOAWAY (HTTP/2)
//! ```

use std::convert::Infallible;
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::request::Parts;
use http::Response;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use model::tls::HostTls;
use model::Settings;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::access_log::TlsFacts;
use crate::deadline::before;
use crate::error::{ErrorSource, ProxyError};
use crate::linger::Linger;
use crate::pipeline::{ClientUpgrade, Pipeline};
use crate::proxy_protocol;
use crate::request_body::ClientBody;
use crate::response_body::ResponseBody;
use crate::server::{Ended, Http1, Prefixed};
use crate::stall::WriteTimeout;
use crate::worker::{non_zero, ConnCtx, OpenConnection, Origin, Worker};

/// The servers' way into the pipeline (`pipeline`): a client connection's requests go
/// through `forward::respond`.
impl Pipeline for ConnCtx {
    type Body = ResponseBody;

    fn respond(
        self: Rc<Self>,
        head: Parts,
        body: Option<ClientBody>,
        upgrade: Option<ClientUpgrade>,
    ) -> impl Future<Output = Response<ResponseBody>> {
        crate::forward::respond(self, head, body, upgrade)
    }

    fn count_error(&self, status: u16, source: ErrorSource) {
        self.worker.stats.borrow_mut().error(status, source);
    }

    fn error_response(&self, error: &ProxyError) -> Response<ResponseBody> {
        crate::answer::error_response(error, false)
    }

    fn log_refused(&self, head: Option<&Parts>, status: u16, sent: (u64, u64)) {
        ConnCtx::log_refused(self, head, status, sent);
    }

    fn closing(&self) -> bool {
        ConnCtx::closing(self)
    }

    fn stopping(&self) -> bool {
        self.closing.get()
    }

    fn last_active(&self) -> Instant {
        ConnCtx::last_active(self)
    }
}

/// hyper refuses a smaller HTTP/1 buffer limit; `large-client-header-buffers` below it is
/// raised to it.
const MIN_HEADER_BUFFER: usize = 8192;

/// Serves one accepted client connection until it ends (`_open` counts it meanwhile).
pub(crate) async fn serve(
    worker: Rc<Worker>,
    mut stream: TcpStream,
    peer: SocketAddr,
    door: crate::sites::FrontDoor,
    _open: OpenConnection,
) {
    let https = door.https;
    // TCP_NODELAY (responses go out in few large writes; Nagle would only delay their tails)
    // and TCP keepalive come from the listening socket, which accepted sockets inherit
    // (`listen::socket`): no system call per connection.
    let settings = worker.settings();
    let mut origin = Origin {
        peer,
        load_balancer: None,
        balancer_port: None,
        announced: None,
        accepted: Instant::now(),
        // Read only when some Gateway has an address of its own: one syscall then, none else.
        door,
        local: crate::sites::local_site(worker.config().as_deref().map(|c| &**c), &stream),
    };
    // One client-header-timeout for everything before the first request: the PROXY
    // header, the ClientHello peek or h2c preface, the TLS handshake and the request head
    // (or HTTP/2 preface). A client trickling each stage just inside a timeout of its own
    // would otherwise hold the connection several timeouts long.
    let deadline = origin.header_deadline(&settings);
    if settings.use_proxy_protocol {
        // Boxed: only connections behind a PROXY-protocol load balancer carry this future.
        let header = Box::pin(proxy_header(&mut stream, &mut origin, deadline, &settings));
        if !header.await {
            worker.stats.borrow_mut().proxy_protocol_refused += 1;
            return;
        }
    }
    let mut host_tls = None;
    let mut asked_name = None;
    let mut sni = None;
    if https {
        let reject = settings.server_tls.reject_handshake;
        let hello = hello(
            &worker,
            &stream,
            deadline,
            origin.local,
            origin.door,
            reject,
        )
        .await;
        host_tls = hello.host_tls;
        asked_name = hello.asked_name;
        sni = hello.sni;
        if hello.unrecognized {
            tracing::debug!(peer = %origin.peer, "ssl-reject-handshake: the ClientHello names no host served here; refused with unrecognized_name");
            refuse_unrecognized(&stream);
            return;
        }
        if hello.refused {
            tracing::debug!(peer = %origin.peer, "TLS listener: no TLSRoute has the server name, or the port's client-certificate validation has no usable CA; closed");
            return;
        }
        if let Some(route) = hello.terminate {
            // Boxed: only TLSRoute connections carry the relay.
            let relay =
                crate::tls_route::terminate(worker, stream, origin, &settings, host_tls, route);
            Box::pin(relay).await;
            return;
        }
        if let Some(route) = hello.passthrough {
            let peer = origin.peer;
            // Boxed: only passthrough connections carry the splice.
            Box::pin(crate::passthrough::pass(
                &worker.upstreams,
                stream,
                &route,
                &settings,
                peer,
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
        let conn = ConnCtx::new(worker, origin, None, None, None, h2c);
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
    let names = (asked_name, sni);
    let tls = Box::pin(serve_tls(
        worker, stream, origin, &settings, host_tls, names,
    ));
    tls.await;
}

/// Reads the PROXY protocol header a load balancer sends first (before `deadline`): the
/// client it names becomes the connection's origin when the peer is a trusted proxy. `false`:
/// no valid header, the connection is refused.
async fn proxy_header(
    stream: &mut TcpStream,
    origin: &mut Origin,
    deadline: Option<Instant>,
    settings: &Settings,
) -> bool {
    let peer = origin.peer;
    // proxy-protocol-header-timeout, within the connection's client-header-timeout.
    let own = origin.accepted + settings.proxy_protocol_header_timeout;
    let deadline = Some(deadline.map_or(own, |d| d.min(own)));
    match before(deadline, proxy_protocol::read_header(stream)).await {
        Some(Ok(proxy_protocol::Header::Proxied {
            source,
            destination_port,
        })) => {
            origin.announced = Some(source.ip().to_canonical());
            if settings.is_trusted_proxy(peer.ip().to_canonical()) {
                origin.peer = source;
                origin.load_balancer = Some(peer.ip().to_canonical());
                origin.balancer_port = Some(destination_port);
            }
            true
        }
        Some(Ok(_)) => true,
        Some(Err(e)) => {
            tracing::debug!(%peer, error = %e, "connection refused");
            false
        }
        None => {
            tracing::debug!(%peer, "no PROXY protocol header within client-header-timeout");
            false
        }
    }
}

/// What the ClientHello's server name decides before the handshake.
#[derive(Default)]
struct Hello {
    /// The configuration passes this host's TLS through.
    passthrough: Option<Arc<model::Route>>,
    /// A TLS listener's route terminates it here and relays the bytes.
    terminate: Option<Arc<model::Route>>,
    /// A TLS listener port where no route has the name, or a port whose frontend
    /// validation has no usable CA: closed.
    refused: bool,
    /// `ssl-reject-handshake`: the name is no host served here, or there is none: refused
    /// with an alert.
    unrecognized: bool,
    /// This host's handshake differs from the listener's.
    host_tls: Option<Arc<HostTls>>,
    /// The server name, when its handshake asks for a client certificate (`auth-tls-*`).
    asked_name: Option<Box<str>>,
    /// The server name, when the site has Gateway listeners (`Origin::sni`).
    sni: Option<Box<str>>,
}

/// Reads the server name a TLS client asks for, without consuming the ClientHello and
/// before the connection's client-header-timeout deadline, when the configuration has a use
/// for it (passthrough hosts, hosts with their own TLS settings, Gateway listeners on the
/// port: misdirected requests; `reject`: ssl-reject-handshake); otherwise reads nothing.
async fn hello(
    worker: &Worker,
    stream: &TcpStream,
    deadline: Option<Instant>,
    local: Option<std::net::IpAddr>,
    door: crate::sites::FrontDoor,
    reject: bool,
) -> Hello {
    let port = door.port;
    let wanted = worker.config().as_ref().is_some_and(|c| {
        let site = c.site(local);
        reject
            || !site.passthrough.is_empty()
            || site.certificates.has_host_tls()
            || site.certificates.has_port_tls()
            || crate::tls_route::wanted(&site, port)
            || site.routes.listener_hosts().on(door.on)
    });
    if !wanted {
        return Hello::default();
    }
    let peeked = Box::pin(before(
        deadline,
        crate::passthrough::peek_server_name(stream),
    ));
    // No name (or no ClientHello): the catch-all's handshake, if it has one of its own.
    let name = peeked.await.flatten();
    // Looked up again: the configuration may have been swapped while the hello came.
    let Some(config) = worker.config() else {
        return Hello::default();
    };
    let site = config.site(local);
    if let Some(route) = name.as_deref().and_then(|n| site.passthrough.get(n)) {
        return Hello {
            passthrough: Some(route.clone()),
            ..Hello::default()
        };
    }
    let terminate = match crate::tls_route::decide(&site, port, name.as_deref()) {
        crate::tls_route::Sni::Pass(route) => {
            return Hello {
                passthrough: Some(route),
                ..Hello::default()
            }
        }
        crate::tls_route::Sni::Refuse => {
            return Hello {
                refused: true,
                ..Hello::default()
            }
        }
        crate::tls_route::Sni::Terminate(route) => Some(route),
        crate::tls_route::Sni::Https => None,
    };
    // nginx's ssl_reject_handshake in ingress-nginx's default server: the handshakes that
    // server would take (no name, or a name no server has) are refused.
    let served = name.as_deref().is_some_and(|n| site.routes.serves_host(n));
    if reject && terminate.is_none() && !served {
        return Hello {
            unrecognized: true,
            ..Hello::default()
        };
    }
    let server = site.certificates.server(site.routes, name.as_deref());
    let asks = server.tls.is_some_and(|h| h.client_cert_request.is_some());
    // An HTTPS port with a Gateway's frontend validation: its handshake for every name.
    let port_tls = (terminate.is_none())
        .then(|| site.certificates.port_tls(port))
        .flatten();
    let host_tls = match port_tls {
        None => server.tls.cloned(),
        Some(port_tls) => match port_tls.merged(server.tls) {
            Some(tls) => Some(tls),
            None => {
                return Hello {
                    refused: true,
                    ..Hello::default()
                }
            }
        },
    };
    let gateway = site.routes.listener_hosts().on(door.on);
    Hello {
        passthrough: None,
        terminate,
        refused: false,
        unrecognized: false,
        host_tls,
        asked_name: asks.then(|| server.name.into()),
        sni: name.filter(|_| gateway).map(String::into_boxed_str),
    }
}

/// A TLS fatal alert `unrecognized_name` (RFC 6066 §3), as a record of its own.
const UNRECOGNIZED_NAME: [u8; 7] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x70];

/// Answers a ClientHello with the `unrecognized_name` alert, as nginx's ssl_reject_handshake
/// does, before the connection is dropped. The ClientHello (only peeked so far) is read
/// first: closing a socket with unread bytes resets it, and the reset may overtake the alert.
fn refuse_unrecognized(stream: &TcpStream) {
    let mut sink = [0u8; 2048];
    // Bounded: a client that keeps sending gets its alert all the same.
    for _ in 0..32 {
        match stream.try_read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    let _ = stream.try_write(&UNRECOGNIZED_NAME);
}

async fn serve_tls(
    worker: Rc<Worker>,
    stream: Linger<WriteTimeout<TcpStream>>,
    origin: Origin,
    settings: &Settings,
    host_tls: Option<Arc<HostTls>>,
    // The server name for a client certificate (`Hello::asked_name`), and the one kept for
    // misdirected requests (`Hello::sni`).
    (asked_name, sni): (Option<Box<str>>, Option<Box<str>>),
) {
    let Some(tls) =
        crate::handshake::handshake(&worker, stream, &origin, settings, host_tls.as_ref()).await
    else {
        return;
    };
    let h2 = tls.alpn_protocol() == Some(b"h2");
    let facts = TlsFacts::of(tls.session());
    let client_cert = asked_name.map(|name| crate::client_cert::PeerCert::of(tls.session(), name));
    let conn = ConnCtx::new(worker, origin, Some(facts), client_cert, sni, h2);
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
        pin!(inline.run(&conn)),
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
    let service = service(conn.clone(), max_head);
    let connection = pin!(builder.serve_connection(io, service).with_upgrades());
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
            // hyper answered 431 itself (a later request's head on a connection it serves);
            // count it with the other generated errors.
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
    let connection = pin!(crate::h2_server::Connection::new(conn.clone(), io, limits));
    let ended = drive(
        connection,
        &conn,
        settings.keep_alive,
        Server::Graceful,
        |c| c.get_mut().go_away(),
        |_| {},
    )
    .await;
    if let Some(Err(e)) = ended {
        tracing::debug!(error = %e, "client connection ended with an error");
    }
}

fn service(
    conn: Rc<ConnCtx>,
    max_head: usize,
) -> impl hyper::service::Service<
    http::Request<hyper::body::Incoming>,
    Response = http::Response<crate::response_body::ResponseBody>,
    Error = Infallible,
> {
    service_fn(move |request| crate::forward::handle(conn.clone(), request, max_head))
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
///
/// One function of ~95 lines on purpose: the stop flag, `close_requested`, eviction and the
/// idle timer are checked in this order on every wake-up, against one `closing` state; spread
/// over helpers, the order that makes shutdown graceful would be spread with it.
///
/// `connection` is pinned by the caller, and the timer is pinned where it is made: a future
/// moved into a `pin!` here would be held twice in this future's state (the argument's slot
/// and the pinned copy; an async fn does not reuse a moved-from slot), and this state is
/// part of every connection's task, idle or not.
async fn drive<C: Future>(
    mut connection: Pin<&mut C>,
    conn: &ConnCtx,
    idle_timeout: Duration,
    server: Server,
    finish: impl Fn(Pin<&mut C>),
    after_poll: impl Fn(&mut Context<'_>),
) -> Option<C::Output> {
    let inline = server == Server::Inline;
    let idle_enabled = !idle_timeout.is_zero();
    // From the connection's last activity, which for a new one is when it was accepted: the
    // first request head gets what the prefix and handshake left of client-header-timeout.
    let mut idle = pin!(tokio::time::sleep_until(
        (conn.last_active.get()
            + if idle_enabled {
                idle_timeout
            } else {
                Duration::from_secs(3600)
            })
        .into(),
    ));
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
                conn.worker
                    .cap
                    .evicting
                    .set(conn.worker.cap.evicting.get() - 1);
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
