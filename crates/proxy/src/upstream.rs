//! Talking to endpoints: this worker's keep-alive pool, connecting, and the retry loop that
//! makes "never fail a request that could have succeeded" true. The HTTP/1.1 itself is in
//! `client`, running inside the request's future.
//!
//! ```text
//!  exchange(request) ── for attempt in 1..=tries ──▶ pick endpoint (skip tried / set aside)
//!     └─ try_endpoint ─▶ idle pooled connection, quiet since it went idle? ─▶ round trip ─▶ head
//!                │ none (closed ones are dropped)            │ failed before a response:
//!                ▼                                           │  nothing written, or idempotent
//!             connect ─ refused/timeout ─▶ set aside,        │  and bodiless or buffered:
//!                │      next endpoint                        │  pooled ─▶ same endpoint, fresh
//!                └─ EMFILE/ENFILE (ours, not the endpoint's) │  conn; fresh ─▶ next one
//!                   ─▶ 503 at once, nothing set aside
//!  response body read to its end (inside the client's poll) ─▶ connection back to the pool
//!  (LIFO, ≤ keepalive per endpoint and TLS setting), unless the upstream or the framing said
//!  close or it has carried upstream-keepalive-requests requests
//! ```
//! An HTTPS route's connections are TLS (`upstream_tls`): the handshake is part of connecting
//! (bounded by proxy-connect-timeout, as nginx's), and the pool keys idle connections by
//! endpoint *and* TLS client, so a route never gets a connection made for another's settings.
//!
//! When is resending safe? When not one byte of the request was written, any request is
//! resent. Once it may have been written, only an idempotent request whose body can be
//! replayed (none, or one buffered whole: `buffer`) is resent; a streamed body cannot be
//! replayed, and a non-idempotent request must not be (unless the route's
//! `proxy-next-upstream` says `non_idempotent`).
//!
//! Which failures go to the next endpoint is the route's `proxy-next-upstream` (nginx's
//! conditions): `error` (connect failures, connections that fail before a response head),
//! `timeout` (connect and response-head timeouts), `http_502`… (a response with that status
//! is set aside and the next endpoint asked; when none is left, the last such response is
//! passed on, as nginx does). `proxy-next-upstream-tries` bounds the attempts (0: every
//! endpoint once) and `proxy-next-upstream-timeout` the time spent retrying. A pooled
//! connection that turns out dead is always resent on a fresh one: that is not a retry.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::request::Parts;
use http::Response;
use http_body::{Body, Frame, SizeHint};
use model::{Settings, UpstreamPolicy, UpstreamTls};
use socket2::SockRef;
use tokio::net::TcpStream;

use crate::attempts::{Attempts, Picked};
use crate::balance::{in_flight, InFlight};
use crate::body::BoxError;
use crate::client::{ClientError, Conn, Framing, Outgoing, Stream, Timeouts};
use crate::deadline::within;
use crate::error::{client_body_error, Chain, ProxyError};
use crate::headers::Added;
use crate::stall::{StallTimer, WriteTimeout};
use crate::upstream_tls::TlsClient;
use crate::upstreams::Upstreams;

/// A response head from an endpoint, and the connection its body (or tunnel) is on.
pub(crate) struct Exchange {
    pub(crate) response: Response<()>,
    pub(crate) conn: UpstreamConn,
}

/// The connection an exchange used: the body returns it to the pool, a tunnel keeps it.
pub(crate) struct UpstreamConn {
    addr: SocketAddr,
    conn: Conn,
    framing: Framing,
    keep_alive: bool,
    in_flight: Option<InFlight>,
}

/// An upstream response body streaming to the client, read from the upstream socket as the
/// client side polls it. Once read to its end, its connection goes back to the pool; dropped
/// early (client gone), the connection is closed.
pub(crate) struct UpstreamBody {
    /// `None` once the body ended (the connection pooled or closed).
    conn: Option<Conn>,
    framing: Framing,
    keep_alive: bool,
    upstreams: Rc<Upstreams>,
    addr: SocketAddr,
    keep: Keep,
    /// `proxy-read-timeout` between body reads.
    read_stall: StallTimer,
    in_flight: Option<InFlight>,
}

/// How many idle connections per endpoint the pool keeps, for how long, and how many
/// requests one connection may carry (`upstream-keepalive-requests`).
#[derive(Clone, Copy)]
struct Keep {
    max_idle: usize,
    max_age: Duration,
    retire: crate::pool::Retire,
}

/// The upstream socket of a tunnel, with `proxy-send-timeout` applied to writes that make no
/// progress.
pub(crate) type UpstreamIo = WriteTimeout<Stream>;

/// How much of the answer to a request of the proxy's own (`own_request`) is read and dropped
/// so its connection can be pooled; a longer answer closes the connection instead.
const OWN_ANSWER_DRAIN_MAX: usize = 64 * 1024;

/// A request of the proxy's own (a mirror's copy, an auth sub-request) to `backend`: sent
/// with the route's timeouts and retries, its answer's head returned, its body read (up to
/// `OWN_ANSWER_DRAIN_MAX`) and dropped, or with `keep` returned (`None` when longer than that).
/// The second result says whether the body read well.
pub(crate) async fn own_request(
    upstreams: &Rc<Upstreams>,
    settings: &Settings,
    backend: &model::Backend,
    policy: &UpstreamPolicy,
    tls: Option<&Arc<UpstreamTls>>,
    head: &mut Parts,
    (body, keep): (crate::request_body::RequestBody, bool),
) -> Result<(http::response::Parts, Result<Option<Bytes>, BoxError>), ProxyError> {
    let retryable = body.is_replayable()
        && (crate::headers::is_idempotent(&head.method) || policy.next_upstream.non_idempotent);
    let mut body = Outgoing::new(body);
    let mut timing = None;
    let attempts = Attempts::new(
        backend,
        settings.load_balance,
        None,
        policy,
        Instant::now(),
        &mut timing,
        None,
    );
    let pending = Pending {
        head,
        added: None,
        body: &mut body,
        retryable,
        upgrade: false,
    };
    let Exchange { response, conn } =
        exchange(upstreams, settings, policy, tls, pending, attempts).await?;
    let (parts, ()) = response.into_parts();
    use http_body_util::BodyExt;
    let mut answer = UpstreamBody::new(conn, upstreams, settings);
    let mut read = 0;
    let mut kept = keep.then(bytes::BytesMut::new);
    while read <= OWN_ANSWER_DRAIN_MAX {
        match answer.frame().await {
            None => return Ok((parts, Ok(kept.map(bytes::BytesMut::freeze)))),
            Some(Ok(frame)) => {
                let data = frame.data_ref().map_or(&[][..], |d| &d[..]);
                read += data.len();
                if let Some(kept) = &mut kept {
                    kept.extend_from_slice(data);
                }
            }
            Some(Err(error)) => return Ok((parts, Err(error))),
        }
    }
    Ok((parts, Ok(None)))
}

/// The request to send: each attempt only borrows it.
pub(crate) struct Pending<'r> {
    pub(crate) head: &'r mut Parts,
    /// The headers the proxy adds, written after the head's own (none for a mirrored copy,
    /// which carries the client's headers only).
    pub(crate) added: Option<Added<'r>>,
    pub(crate) body: &'r mut Outgoing,
    /// Idempotent (or `non_idempotent` allowed) with a replayable body: may be resent after
    /// it was written.
    pub(crate) retryable: bool,
    /// The client asked for a WebSocket: a 101 is expected.
    pub(crate) upgrade: bool,
}

/// One endpoint attempt failed; `next` says whether another endpoint may be tried.
struct Failure {
    error: ProxyError,
    next: bool,
}

/// Sends a request to one of `backend`'s endpoints, retrying as the module doc describes
/// (the rules themselves are `Attempts`'), and returns the first response head. On success
/// the request head's header map has become the response's.
pub(crate) async fn exchange(
    upstreams: &Rc<Upstreams>,
    settings: &Settings,
    policy: &UpstreamPolicy,
    tls: Option<&Arc<UpstreamTls>>,
    mut pending: Pending<'_>,
    mut attempts: Attempts<'_>,
) -> Result<Exchange, ProxyError> {
    let tls = upstreams.tls_client(tls)?;
    let retry_statuses = !policy.next_upstream.statuses.is_empty() && pending.retryable;
    // A response head takes the request's header map over (no copy on the common path); to
    // ask another endpoint after a status, the request's headers are kept aside first.
    let saved_headers =
        (retry_statuses && attempts.allows_retries()).then(|| pending.head.headers.clone());
    // The last attempt's outcome: an error, or a response whose status counted as failed.
    let mut last: Option<Result<Exchange, ProxyError>> = None;
    loop {
        attempts.back_off().await;
        let Some(picked) = attempts.next(upstreams) else {
            break;
        };
        let addr = picked.addr;
        let result = try_endpoint(
            upstreams,
            picked,
            settings,
            policy,
            tls.as_deref(),
            &mut pending,
            &mut attempts,
        )
        .await;
        attempts.answered(match &result {
            Ok(exchange) => exchange.response.status().as_u16(),
            Err(failure) => failure.error.classify().0.as_u16(),
        });
        match result {
            Ok(exchange) => {
                let status = exchange.response.status().as_u16();
                let Some(headers) = &saved_headers else {
                    return Ok(exchange);
                };
                if !attempts.status_failed(addr, status, true) {
                    return Ok(exchange);
                }
                tracing::debug!(%addr, status, "status counts as failed (proxy-next-upstream)");
                pending.head.headers = headers.clone();
                // Replaced (dropped unread: its connection is closed, not pooled) by the next.
                last = Some(Ok(exchange));
            }
            Err(Failure { error, next }) => {
                tracing::debug!(%addr, error = %Chain(&error), "upstream attempt failed");
                let next = attempts.failed(addr, &error, next);
                last = Some(Err(error));
                if !next {
                    break;
                }
            }
        }
    }
    // nginx: when no endpoint is left, the last answer is passed on, even one whose status
    // counted as failed.
    last.unwrap_or(Err(ProxyError::NoEndpoints))
}

async fn try_endpoint(
    upstreams: &Rc<Upstreams>,
    Picked { addr, start: now }: Picked,
    settings: &Settings,
    policy: &UpstreamPolicy,
    tls: Option<&TlsClient>,
    pending: &mut Pending<'_>,
    attempts: &mut Attempts<'_>,
) -> Result<Exchange, Failure> {
    let timeouts = Timeouts {
        send: policy.send_timeout,
        read: policy.read_timeout,
    };
    // After a pooled connection failed mid-request, the resend goes on a fresh connection:
    // if the endpoint died, its other pooled connections are as dead.
    let mut fresh_only = false;
    loop {
        let (mut conn, reused) =
            acquire(upstreams, addr, settings, policy, tls, fresh_only, now).await?;
        attempts.connected();
        let balance = policy.balance(settings.load_balance);
        let in_flight = in_flight(&upstreams.balancer, addr, balance);
        let sent = conn
            .round_trip(
                pending.head,
                pending.added.as_ref(),
                pending.body,
                timeouts,
                pending.upgrade,
            )
            .await;
        let error = match sent {
            Ok(answer) => {
                return Ok(Exchange {
                    response: answer.response,
                    conn: UpstreamConn {
                        addr,
                        conn,
                        framing: answer.framing,
                        keep_alive: answer.keep_alive,
                        in_flight,
                    },
                })
            }
            Err(error) => error,
        };
        let unsent = pending.body.unsent(&error);
        drop(in_flight);
        // Whose fault: a timeout waiting for the head is the upstream's (another endpoint
        // is tried only under `timeout`, for a request that may be resent); a failed request
        // body is the client's and nothing to retry.
        let error = match error {
            ClientError::ReadTimeout => {
                let error = ProxyError::ReadTimeout { addr };
                return Err(Failure {
                    error,
                    next: pending.retryable,
                });
            }
            ClientError::SendTimeout => ProxyError::SendTimeout { addr },
            ClientError::Body(source) => client_body_error(source),
            other => ProxyError::Upstream {
                addr,
                source: other,
            },
        };
        if !matches!(error, ProxyError::Upstream { .. }) {
            return Err(Failure { error, next: false });
        }
        if !(unsent || pending.retryable) {
            return Err(Failure { error, next: false });
        }
        if reused {
            tracing::debug!(%addr, error = %Chain(&error), "pooled connection failed, resending on a fresh one");
            upstreams.stats.borrow_mut().retries += 1;
            fresh_only = true;
            continue;
        }
        return Err(Failure { error, next: true });
    }
}

/// A connection to `addr`: the newest usable pooled one, else a fresh one (`true`: pooled).
/// Its own future, so that the connect path's state does not sit in every attempt's.
async fn acquire(
    upstreams: &Upstreams,
    addr: SocketAddr,
    settings: &Settings,
    policy: &UpstreamPolicy,
    tls: Option<&TlsClient>,
    fresh_only: bool,
    now: Instant,
) -> Result<(Conn, bool), Failure> {
    if !fresh_only {
        let tls_id = tls.map_or(0, |tls| tls.id);
        let pooled = upstreams.pool.borrow_mut().checkout(
            addr,
            tls_id,
            settings.upstream_keepalive_timeout,
            now,
        );
        if let Some(conn) = pooled {
            return Ok((conn, true));
        }
    }
    // Boxed: a large future the reused-connection path should not carry.
    match Box::pin(connect(addr, policy.connect_timeout, tls)).await {
        Ok(conn) => Ok((conn, false)),
        // The endpoint is up (it accepted the connection); its certificate or TLS settings
        // do not fit the route's. Another endpoint may, so it is tried; this one is not set
        // aside for other routes.
        Err(error @ ProxyError::UpstreamTls { .. }) => {
            upstreams.stats.borrow_mut().connect_errors += 1;
            Err(Failure { error, next: true })
        }
        // This process is out of descriptors: the endpoint is fine, and every other endpoint
        // would fail the same way. The attempt loop ends with this error, and the worker
        // counts it (`forward`): nothing between here and there awaits.
        Err(error @ ProxyError::OutOfFileDescriptors { .. }) => Err(Failure { error, next: false }),
        Err(error) => {
            upstreams
                .balancer
                .borrow_mut()
                .set_aside(addr, Instant::now());
            upstreams.stats.borrow_mut().connect_errors += 1;
            // Nothing was sent: any request may go elsewhere.
            Err(Failure { error, next: true })
        }
    }
}

/// A fresh connection to `addr`, TLS when the route says so; `timeout` bounds the TCP
/// connect and the handshake together.
async fn connect(
    addr: SocketAddr,
    timeout: Duration,
    tls: Option<&TlsClient>,
) -> Result<Conn, ProxyError> {
    let started = Instant::now();
    let stream = connect_tcp(addr, timeout).await?;
    let Some(tls) = tls else {
        return Ok(Conn::new(Stream::Plain(stream), 0));
    };
    let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
    let left = timeout.saturating_sub(started.elapsed());
    if left.is_zero() && !timeout.is_zero() {
        return Err(ProxyError::ConnectTimeout { addr });
    }
    match within(left, connector.connect(tls.name.clone(), stream)).await {
        Some(Ok(stream)) => Ok(Conn::new(
            Stream::Tls(Box::new(std::cell::RefCell::new(stream))),
            tls.id,
        )),
        Some(Err(source)) => Err(ProxyError::UpstreamTls { addr, source }),
        None => Err(ProxyError::ConnectTimeout { addr }),
    }
}

/// A TCP connection to `addr` within `timeout`, with TCP_NODELAY and keepalive; its errors
/// classified (the endpoint's, or this process out of descriptors). HTTP/1.1 and HTTP/2
/// upstreams connect the same way.
pub(crate) async fn connect_tcp(
    addr: SocketAddr,
    timeout: Duration,
) -> Result<TcpStream, ProxyError> {
    let stream = match within(timeout, TcpStream::connect(addr)).await {
        Some(Ok(stream)) => stream,
        Some(Err(source)) if crate::fds::is_exhaustion(&source) => {
            return Err(ProxyError::OutOfFileDescriptors { addr, source })
        }
        Some(Err(source)) => return Err(ProxyError::Connect { addr, source }),
        None => return Err(ProxyError::ConnectTimeout { addr }),
    };
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "set TCP_NODELAY");
    }
    if let Err(e) = SockRef::from(&stream).set_tcp_keepalive(&crate::listen::tcp_keepalive()) {
        tracing::debug!(error = %e, "set SO_KEEPALIVE");
    }
    Ok(stream)
}

impl UpstreamConn {
    /// After a 101: the socket for the tunnel, and what the upstream already sent through it.
    pub(crate) fn into_tunnel(self, send_timeout: Duration) -> (UpstreamIo, Bytes) {
        let (stream, buffered) = self.conn.into_parts();
        let io = WriteTimeout::new(
            stream,
            send_timeout,
            "upstream accepted nothing within proxy-send-timeout",
        );
        (io, buffered)
    }
}

impl UpstreamBody {
    pub(crate) fn new(
        upstream: UpstreamConn,
        upstreams: &Rc<Upstreams>,
        settings: &Settings,
    ) -> UpstreamBody {
        let UpstreamConn {
            addr,
            conn,
            framing,
            keep_alive,
            in_flight,
        } = upstream;
        let mut body = UpstreamBody {
            conn: Some(conn),
            framing,
            keep_alive,
            upstreams: upstreams.clone(),
            addr,
            keep: Keep {
                max_idle: usize::try_from(settings.keepalive).unwrap_or(usize::MAX),
                max_age: settings.upstream_keepalive_timeout,
                retire: crate::pool::Retire::of(settings),
            },
            read_stall: StallTimer::new(settings.proxy_read_timeout),
            in_flight,
        };
        if body.framing.remaining() == Some(0) {
            // HEAD, 204, 304, an empty body: the connection is free right away.
            body.finish();
        }
        body
    }

    /// The body ended as its framing said: the connection goes back to the pool if the
    /// upstream allows it and nothing stray is buffered.
    fn finish(&mut self) {
        self.framing = Framing::Empty;
        self.in_flight = None;
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        // nginx's keepalive_requests and keepalive_time: the connection that carried the
        // last allowed request is closed rather than pooled.
        let now = Instant::now();
        let carried = u64::from(conn.count_finished());
        if self.keep_alive
            && !self.keep.max_age.is_zero()
            && !self.keep.retire.reached(carried, conn.opened(), now)
            && conn.make_idle()
            && self.upstreams.is_live_endpoint(&self.addr)
        {
            self.upstreams
                .pool
                .borrow_mut()
                .checkin(self.addr, conn, self.keep.max_idle, now);
        }
    }

    fn poll_deadline(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.read_stall.poll_expired(cx) {
            Poll::Ready(()) => {
                self.conn = None;
                Poll::Ready(Some(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "upstream sent nothing within proxy-read-timeout",
                )
                .into())))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let Some(conn) = this.conn.as_mut() else {
            return Poll::Ready(None);
        };
        match conn.poll_body(&mut this.framing, cx) {
            Poll::Ready(Ok(Some(data))) => {
                this.read_stall.progress();
                // hyper's server stops polling once `is_end_stream` says so: free the
                // connection with the last frame rather than on a final `None`.
                if conn.body_ended(&mut this.framing) {
                    this.finish();
                }
                Poll::Ready(Some(Ok(Frame::data(data))))
            }
            Poll::Ready(Ok(None)) => {
                this.finish();
                Poll::Ready(None)
            }
            Poll::Ready(Err(e)) => {
                this.conn = None;
                this.framing = Framing::Empty;
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Pending => this.poll_deadline(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.conn.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match self.framing.remaining() {
            Some(left) => SizeHint::with_exact(left),
            None => SizeHint::default(),
        }
    }
}
