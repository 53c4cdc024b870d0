//! HTTP/2 and gRPC upstreams (`backend-protocol: GRPC`/`GRPCS`, `appProtocol:
//! kubernetes.io/h2c`): multiplexed connections per worker and endpoint, streams in both
//! directions, trailers end to end, `grpc-timeout`, and the retry of streams a backend
//! refused.
//!
//! ```text
//!  forward (route says HTTP/2) ─▶ head for HTTP/2 (:authority = Host, the proxy's headers
//!    in the map, te: trailers kept) ─▶ for attempt: pick endpoint (skip tried)
//!      ─▶ the worker's H2Pool: an open connection to it (same TLS client) with fewer than
//!         MAX_STREAMS streams ─ none ─▶ the connect another request has under way, else
//!         connect (TCP, TLS with ALPN h2), h2_client::handshake, its connection task spawned on
//!         this worker
//!      ─▶ stream: request body pulled through `Replay` (keeps what it sent, ≤ 64 KiB, until
//!         the head arrives) by `Pump`, in the request's own task until the head arrives,
//!         then (a body still streaming) in a task of its own
//!         ─ REFUSED_STREAM / GOAWAY above last-stream-id / not sent ─▶
//!         the body is replayed on a fresh stream (RFC 9113 §8.7: never processed);
//!         another failure before the head ─▶ next endpoint only for an idempotent request
//!         with its body at hand (as HTTP/1.1 routes)
//!      ─▶ response head (bounded by proxy-read-timeout and grpc-timeout) ─▶ H2Body streams
//!         data and trailers to the client; on the deadline a gRPC route ends with
//!         grpc-status 4 and the upstream stream is reset (dropped)
//!  endpoint leaves (Pool::keep_only / forget) ─▶ its connections leave the pool: no new
//!    streams; running ones finish, then h2_client closes the connection (its last handle gone)
//!  GOAWAY or error ─▶ the connection is marked closed and dropped at the next checkout
//!  no stream for upstream-keepalive-timeout ─▶ dropped by the worker's sweep (Pool::expire)
//!  upstream-keepalive-requests streams carried ─▶ no new streams; closed once they end
//! ```
//! The pool holds a connection as `h2_client`'s `Sender` handle (`H2Sender`; the connection
//! task owns the socket); a stream takes a clone of it. `h2_client` is Sluice's own HTTP/2
//! client, single-threaded on the worker: hyper's client added a dispatch task and channel
//! per connection and a task per request body and response (~20 % of a gRPC call's user
//! time), and the h2 crate's client under it ~42 % of the rest (issue 29 item 4).

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::request::Parts;
use http::uri::{Authority, Scheme};
use http::{header, HeaderMap, HeaderName, HeaderValue, Method, Request, Response, Uri, Version};
use http_body::{Body, Frame, SizeHint};
use model::policy::UpstreamPolicy;
use model::upstream_tls::UpstreamTls;
use model::{RoutePolicy, Settings, UpstreamProtocol};

use crate::attempts::{Attempts, Picked};
use crate::balance::InFlight;
use crate::body::BoxError;
use crate::deadline::within;
use crate::error::{Chain, ProxyError};
use crate::h2_client::{ErrorCode, RecvStream, SendStream};
use crate::h2_replay::{AttemptBody, Replay};
use crate::pool::{H2Sender, StreamSlot};
use crate::request_body::RequestBody;
use crate::stall::StallTimer;
use crate::upstream_tls::TlsClient;
use crate::upstreams::Upstreams;

/// `grpc-timeout`.
static GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");

/// A response body from an HTTP/2 upstream on its way to the client: data and trailers as
/// they come; `proxy-read-timeout` between frames; a gRPC route's deadline.
pub(crate) struct H2Body {
    inner: Option<RecvStream>,
    /// The data is all read: trailers (or the end) come next.
    data_done: bool,
    /// The response's Content-Length, for the size hint.
    length: Option<u64>,
    read_stall: StallTimer,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    grpc: bool,
    _slot: StreamSlot,
    _in_flight: Option<InFlight>,
}

/// What an attempt came to.
enum Outcome {
    Answered(Response<RecvStream>, StreamSlot),
    /// Not processed by the endpoint (refused, not sent, connection gone before the
    /// stream): sent again, to this endpoint on a fresh connection or another.
    Refused,
    /// Failed; `next`: another endpoint may be tried (nothing reached this one).
    Failed {
        error: ProxyError,
        next: bool,
    },
}

/// An endpoint's response head, the stream slot it holds and the endpoint.
type Answer = (Response<RecvStream>, StreamSlot, SocketAddr);

/// Where and how a request goes: the timeouts and retries, gRPC's rules or plain HTTP/2's,
/// and the TLS client (`None`: cleartext, prior knowledge).
#[derive(Clone, Copy)]
pub(crate) struct H2Target<'p> {
    pub(crate) upstream: &'p UpstreamPolicy,
    pub(crate) grpc: bool,
    pub(crate) tls: Option<&'p Arc<UpstreamTls>>,
}

impl<'p> H2Target<'p> {
    /// A route's upstream.
    pub(crate) fn of(policy: &'p RoutePolicy) -> H2Target<'p> {
        H2Target {
            upstream: &policy.upstream,
            grpc: policy.upstream_protocol == UpstreamProtocol::Grpc,
            tls: policy.upstream_tls.as_ref(),
        }
    }
}

/// What `forward` hands over: the request as it goes upstream, and where to note attempts.
pub(crate) struct H2Request<'r> {
    pub(crate) head: &'r Parts,
    pub(crate) body: RequestBody,
    pub(crate) arrived: Instant,
}

/// Turns a prepared HTTP/1.1-shaped head (`headers::prepare_request`) into the HTTP/2 one:
/// the proxy's headers go into the map, `Host` becomes `:authority` (the upstream-vhost one
/// when set), `te: trailers` is put back when the client sent it (gRPC needs it; nginx's
/// `grpc_pass` passes it the same way).
pub(crate) fn http2_head(
    head: &mut Parts,
    added: &crate::headers::Added<'_>,
    tls: bool,
    te_trailers: bool,
) {
    let client_host = head.headers.remove(header::HOST);
    added.insert_into(head, client_host.as_ref());
    let authority = client_host
        .as_ref()
        .map(|host| added.upstream_host(host))
        .and_then(|host| Authority::try_from(host.as_bytes()).ok());
    let mut parts = std::mem::take(&mut head.uri).into_parts();
    parts.scheme = Some(if tls { Scheme::HTTPS } else { Scheme::HTTP });
    parts.authority = Some(authority.unwrap_or_else(|| Authority::from_static("localhost")));
    if parts.path_and_query.is_none() {
        parts.path_and_query = Some(http::uri::PathAndQuery::from_static("/"));
    }
    head.uri = Uri::from_parts(parts).unwrap_or_default();
    head.version = Version::HTTP_2;
    if te_trailers {
        head.headers
            .insert(header::TE, HeaderValue::from_static("trailers"));
    }
}

/// `grpc-timeout` (gRPC over HTTP/2: up to 8 digits and a unit, H M S m u n).
pub(crate) fn grpc_timeout(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(&GRPC_TIMEOUT)?.as_bytes();
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b"H" => Duration::from_secs(n * 3600),
        b"M" => Duration::from_secs(n * 60),
        b"S" => Duration::from_secs(n),
        b"m" => Duration::from_millis(n),
        b"u" => Duration::from_micros(n),
        b"n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// Sends a request to one of `backend`'s endpoints over HTTP/2 and returns the response with
/// its body streaming (`H2Body`). Retries by the rules HTTP/1.1 routes follow (`Attempts`):
/// a connect failure goes to the next endpoint (`proxy-next-upstream` `error`, or `timeout`
/// for a connect timeout), as does an answer whose status the route lists (`http_502` …:
/// nginx's `grpc_next_upstream` takes the same conditions) when the body was kept whole; a
/// stream the endpoint did not process is sent again; anything else is answered.
///
/// The attempt loop is one function (~100 lines) so that its retry rules read in one place,
/// as `upstream::exchange`'s do (issue 25 item 4 wants one loop for both transports).
pub(crate) async fn exchange(
    upstreams: &Rc<Upstreams>,
    settings: &Settings,
    target: H2Target<'_>,
    request: H2Request<'_>,
    mut attempts: Attempts<'_>,
) -> Result<Response<H2Body>, ProxyError> {
    let H2Request {
        head,
        body,
        arrived,
    } = request;
    let H2Target {
        upstream,
        grpc,
        tls,
    } = target;
    let tls = upstreams.tls_client(tls)?;
    // `upstream-keepalive-requests` and `-time` retire an HTTP/2 connection.
    let retire = crate::pool::Retire::of(settings);
    // gRPC's deadline covers the whole call, the response body included.
    let deadline = grpc
        .then(|| grpc_timeout(&head.headers))
        .flatten()
        .map(|timeout| arrived + timeout);
    let idempotent =
        crate::headers::is_idempotent(&head.method) || upstream.next_upstream.non_idempotent;
    let replay = Rc::new(RefCell::new(Replay::new(body)));
    // The last attempt's outcome: an error, or an answer whose status counted as failed.
    let mut last: Option<Result<Answer, ProxyError>> = None;
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            last = Some(Err(ProxyError::GrpcDeadline));
            break;
        }
        attempts.back_off().await;
        let Some(Picked { addr, .. }) = attempts.next(upstreams) else {
            break;
        };
        let outcome = try_endpoint(
            upstreams,
            addr,
            upstream,
            tls.as_deref(),
            retire,
            head,
            &replay,
            deadline,
            idempotent,
            &mut attempts,
        )
        .await;
        attempts.answered(match &outcome {
            Outcome::Answered(response, _) => response.status().as_u16(),
            Outcome::Refused => 502,
            Outcome::Failed { error, .. } => error.classify().0.as_u16(),
        });
        match outcome {
            Outcome::Answered(response, slot) => {
                let status = response.status().as_u16();
                let resendable = idempotent && replay.borrow().complete;
                if !attempts.status_failed(addr, status, resendable) {
                    last = Some(Ok((response, slot, addr)));
                    break;
                }
                tracing::debug!(%addr, status, "status counts as failed (proxy-next-upstream)");
                // Replaced (its stream reset when dropped) by the next answer or error.
                last = Some(Ok((response, slot, addr)));
            }
            Outcome::Refused => {
                tracing::debug!(%addr, "stream not processed by the endpoint, sending it again");
                last = Some(Err(ProxyError::Http2Refused { addr }));
                if !attempts.not_processed() {
                    break;
                }
            }
            Outcome::Failed { error, next } => {
                tracing::debug!(%addr, error = %Chain(&error), "upstream attempt failed");
                let next = attempts.failed(addr, &error, next);
                last = Some(Err(error));
                if !next {
                    break;
                }
            }
        }
    }
    if let Some(failed) = replay.borrow_mut().failed.take() {
        return Err(failed);
    }
    // nginx: when no endpoint is left, the last answer is passed on, even one whose status
    // counted as failed.
    let (response, slot, addr) = last.unwrap_or(Err(ProxyError::NoEndpoints))?;
    replay.borrow_mut().forget();
    let balance = upstream.balance(settings.load_balance);
    let in_flight = crate::balance::in_flight(&upstreams.balancer, addr, balance);
    let length = response
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse().ok());
    Ok(response.map(|inner| H2Body {
        inner: Some(inner),
        data_done: false,
        length,
        read_stall: StallTimer::new(upstream.read_timeout),
        deadline: deadline.map(|d| Box::pin(tokio::time::sleep_until(d.into()))),
        grpc,
        _slot: slot,
        _in_flight: in_flight,
    }))
}

/// One attempt on one endpoint: a stream on a pooled or new connection, the body pulled
/// through `Replay`, the head awaited within proxy-read-timeout and the gRPC deadline. One
/// function (~100 lines): what decides whether the attempt may be retried (refused, body
/// complete, idempotent) is read from the same few values along the way.
#[allow(clippy::too_many_arguments)]
async fn try_endpoint(
    upstreams: &Rc<Upstreams>,
    addr: SocketAddr,
    upstream: &UpstreamPolicy,
    tls: Option<&TlsClient>,
    retire: crate::pool::Retire,
    head: &Parts,
    replay: &Rc<RefCell<Replay>>,
    deadline: Option<Instant>,
    idempotent: bool,
    attempts: &mut Attempts<'_>,
) -> Outcome {
    let (sender, slot) = match acquire(upstreams, addr, upstream.connect_timeout, tls, retire).await
    {
        Ok(found) => found,
        Err(error) => {
            if !matches!(error, ProxyError::UpstreamTls { .. }) {
                upstreams
                    .balancer
                    .borrow_mut()
                    .set_aside(addr, Instant::now());
            }
            upstreams.stats.borrow_mut().connect_errors += 1;
            return Outcome::Failed { error, next: true };
        }
    };
    attempts.connected();
    let body = {
        let mut shared = replay.borrow_mut();
        if shared.generation > 0 && !shared.complete {
            // Part of the body went to a stream that was refused, and it was not all kept.
            let error = ProxyError::Http2Refused { addr };
            return Outcome::Failed { error, next: false };
        }
        shared.generation += 1;
        AttemptBody {
            replay: replay.clone(),
            generation: shared.generation,
            next: 0,
        }
    };
    let request = request_head(head, &body);
    // The head waits at most proxy-read-timeout, and never past the gRPC deadline.
    let mut wait = upstream.read_timeout;
    let mut by_deadline = false;
    if let Some(deadline) = deadline {
        let left = deadline.saturating_duration_since(Instant::now());
        if wait.is_zero() || left < wait {
            wait = left.max(Duration::from_millis(1));
            by_deadline = true;
        }
    }
    let sent = within(wait, send_request(&sender, request, body)).await;
    let result = match sent {
        Some(result) => result,
        // Dropping the response future and the stream's sending half resets the stream
        // (RST_STREAM CANCEL).
        None if by_deadline => {
            let error = ProxyError::GrpcDeadline;
            return Outcome::Failed { error, next: false };
        }
        None => {
            let error = ProxyError::ReadTimeout { addr };
            return Outcome::Failed { error, next: false };
        }
    };
    match result {
        // What was kept of the body stays until the loop knows the answer is taken: a status
        // `proxy-next-upstream` counts as failed sends it to the next endpoint.
        Ok((response, pump)) => {
            if let Some(pump) = pump {
                // The body is still streaming (a client-streaming or bidirectional call):
                // it goes on beside the response.
                tokio::task::spawn_local(pump.run());
            }
            Outcome::Answered(response, slot)
        }
        Err(Sent::NotSent) => Outcome::Refused,
        Err(Sent::Failed(error)) => {
            if replay.borrow().failed.is_some() {
                // The client's body failed: nothing to retry, the caller answers for it.
                let error = ProxyError::Http2 {
                    addr,
                    source: error,
                };
                return Outcome::Failed { error, next: false };
            }
            // RFC 9113 §8.7: refused, or above a GOAWAY's last stream ID: sent again whatever
            // the method.
            if error.not_processed() {
                return Outcome::Refused;
            }
            // It may have been processed: as on HTTP/1.1, only an idempotent request (or any
            // under `non_idempotent`) whose body is all at hand goes to another endpoint.
            let next = idempotent && replay.borrow().complete;
            let error = ProxyError::Http2 {
                addr,
                source: error,
            };
            Outcome::Failed { error, next }
        }
    }
}

/// How a stream's start went wrong.
enum Sent {
    /// Nothing went out: the connection was closed or going away. Another stream (on a new
    /// connection) is safe whatever the request.
    NotSent,
    /// The stream failed after its head went out.
    Failed(crate::h2_client::Error),
}

/// The request's head as h2_client sends it: the prepared head's method, URI (scheme and authority
/// become the pseudo-headers) and headers, less what HTTP/2 forbids (RFC 9113 §8.2.2: a peer
/// refuses a request carrying them); `content-length: 0` for a payload method whose body is
/// known to be empty, as hyper's client set it.
fn request_head(head: &Parts, body: &AttemptBody) -> Request<()> {
    let mut request = Request::new(());
    *request.method_mut() = head.method.clone();
    *request.uri_mut() = head.uri.clone();
    *request.version_mut() = Version::HTTP_2;
    let headers = request.headers_mut();
    *headers = head.headers.clone();
    for name in [
        header::CONNECTION,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
        HeaderName::from_static("keep-alive"),
        HeaderName::from_static("proxy-connection"),
    ] {
        headers.remove(name);
    }
    if headers
        .get(header::TE)
        .is_some_and(|te| !te.as_bytes().eq_ignore_ascii_case(b"trailers"))
    {
        headers.remove(header::TE);
    }
    let no_payload = matches!(
        head.method,
        Method::GET | Method::HEAD | Method::DELETE | Method::OPTIONS | Method::CONNECT
    );
    if body.is_end_stream() && !no_payload && !headers.contains_key(header::CONTENT_LENGTH) {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
    }
    request
}

/// Opens a stream on `sender`'s connection and waits for the response head, sending the
/// body meanwhile (a server may answer before it has all of it). Returns the head and, when
/// the body is not all sent yet, what still has to send it.
async fn send_request(
    sender: &H2Sender,
    request: Request<()>,
    body: AttemptBody,
) -> Result<(Response<RecvStream>, Option<Pump>), Sent> {
    let mut send = sender.send.clone();
    // Ready when the peer's stream limit allows one more; an error when the
    // connection is gone or going away.
    if poll_fn(|cx| send.poll_ready(cx)).await.is_err() {
        sender.close();
        return Err(Sent::NotSent);
    }
    let end_of_stream = body.is_end_stream();
    let (response, stream) = match send.send_request(request, end_of_stream) {
        Ok(opened) => opened,
        Err(error) => {
            sender.close();
            tracing::debug!(error = %Chain(&error), "no stream opened on an HTTP/2 upstream");
            return Err(Sent::NotSent);
        }
    };
    let mut pump = (!end_of_stream).then(|| Pump { body, stream });
    let mut response = pin!(response);
    let response = poll_fn(|cx| {
        if pump.as_mut().is_some_and(|pump| pump.poll(cx).is_ready()) {
            pump = None;
        }
        response.as_mut().poll(cx)
    })
    .await
    .map_err(Sent::Failed)?;
    Ok((response, pump))
}

/// Sends a request body on its stream as the body yields it, within the stream's send
/// window: the next frame is pulled once the last is out and the windows are open, so at most
/// one frame waits in the client beyond what the peer allows.
struct Pump {
    body: AttemptBody,
    stream: SendStream,
}

impl Pump {
    /// Ready once the body is all sent, or cannot be: the peer reset the stream, the
    /// connection failed, or the body failed (then the stream is reset with CANCEL; the
    /// failure is `Replay::failed`).
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            // Ready once what was sent before is out and the windows are open; an error
            // once the peer reset the stream or the connection failed.
            if ready!(self.stream.poll_capacity(cx)).is_err() {
                return Poll::Ready(());
            }
            let frame = match ready!(Pin::new(&mut self.body).poll_frame(cx)) {
                None => {
                    let _ = self.stream.send_data(Bytes::new(), true);
                    return Poll::Ready(());
                }
                Some(Err(_)) => {
                    self.stream.send_reset(ErrorCode::CANCEL);
                    return Poll::Ready(());
                }
                Some(Ok(frame)) => frame,
            };
            match frame.into_data() {
                Ok(data) => {
                    let end = self.body.is_end_stream();
                    if data.is_empty() && !end {
                        continue;
                    }
                    if self.stream.send_data(data, end).is_err() || end {
                        return Poll::Ready(());
                    }
                }
                Err(frame) => {
                    if let Ok(trailers) = frame.into_trailers() {
                        let _ = self.stream.send_trailers(trailers);
                        return Poll::Ready(());
                    }
                }
            }
        }
    }

    /// The rest of the body, in a task of its own once the response head has come.
    async fn run(mut self) {
        poll_fn(|cx| self.poll(cx)).await;
    }
}

/// A connection to `addr` (made with `tls`) with room for a stream: a pooled one, else the
/// one another request is making (waited for, within `timeout`), else a new one. Requests
/// that arrive together share one new connection rather than each opening their own.
async fn acquire(
    upstreams: &Upstreams,
    addr: SocketAddr,
    timeout: Duration,
    tls: Option<&TlsClient>,
    retire: crate::pool::Retire,
) -> Result<(H2Sender, StreamSlot), ProxyError> {
    let key = (addr, tls.map_or(0, |tls| tls.id));
    let pending = {
        let mut pool = upstreams.pool.borrow_mut();
        if let Some(found) = pool.h2.checkout(key.0, key.1, retire) {
            return Ok(found);
        }
        pool.h2.connecting.get(&key).cloned()
    };
    if let Some(made) = pending {
        // Created while the connect is under way, so its end wakes this (tokio's
        // `notify_waiters` reaches every `Notified` created before it, polled or not).
        let _ = within(timeout, made.notified()).await;
        if let Some(found) = upstreams
            .pool
            .borrow_mut()
            .h2
            .checkout(key.0, key.1, retire)
        {
            return Ok(found);
        }
    }
    let connecting = Connecting::start(upstreams, key);
    let made = Box::pin(connect(addr, timeout, tls)).await;
    drop(connecting);
    let send = made?;
    let streams = crate::pool::StreamCount::new();
    let slot = StreamSlot::new(&streams);
    // To an endpoint that left meanwhile: this stream only, then it closes.
    if upstreams.is_live_endpoint(&addr) {
        upstreams
            .pool
            .borrow_mut()
            .insert_h2(addr, key.1, send.clone(), streams);
    }
    Ok((send, slot))
}

/// A connect under way, listed so that other requests wait for it; unlisted (and its
/// waiters woken) when it ends, also when the request making it goes away.
struct Connecting<'w> {
    upstreams: &'w Upstreams,
    key: (SocketAddr, u64),
    made: Rc<tokio::sync::Notify>,
}

impl<'w> Connecting<'w> {
    fn start(upstreams: &'w Upstreams, key: (SocketAddr, u64)) -> Connecting<'w> {
        let made = Rc::new(tokio::sync::Notify::new());
        let listed = upstreams
            .pool
            .borrow_mut()
            .h2
            .connecting
            .insert(key, made.clone());
        // Another request's connect that ended without a usable connection: its waiters
        // were woken already.
        drop(listed);
        Connecting {
            upstreams,
            key,
            made,
        }
    }
}

impl Drop for Connecting<'_> {
    fn drop(&mut self) {
        let mut pool = self.upstreams.pool.borrow_mut();
        if pool
            .h2
            .connecting
            .get(&self.key)
            .is_some_and(|listed| Rc::ptr_eq(listed, &self.made))
        {
            pool.h2.connecting.remove(&self.key);
        }
        self.made.notify_waiters();
    }
}

/// A new connection to `addr`, TLS with ALPN `h2` when the route says so, the HTTP/2
/// handshake done and its task running on this worker. `timeout` bounds all of it.
async fn connect(
    addr: SocketAddr,
    timeout: Duration,
    tls: Option<&TlsClient>,
) -> Result<H2Sender, ProxyError> {
    let started = Instant::now();
    let stream = crate::upstream::connect_tcp(addr, timeout).await?;
    // What is left of `timeout` (zero: no limit); `None` once it is spent.
    let time_left = || {
        let left = timeout.saturating_sub(started.elapsed());
        match (timeout.is_zero(), left.is_zero()) {
            (true, _) => Some(Duration::ZERO),
            (false, true) => None,
            (false, false) => Some(left),
        }
    };
    let Some(tls) = tls else {
        return Ok(handshake(addr, stream));
    };
    let connector = tokio_rustls::TlsConnector::from(tls.config_h2.clone());
    let left = time_left().ok_or(ProxyError::ConnectTimeout { addr })?;
    let stream = match within(left, connector.connect(tls.name.clone(), stream)).await {
        Some(Ok(stream)) => stream,
        Some(Err(source)) => return Err(ProxyError::UpstreamTls { addr, source }),
        None => return Err(ProxyError::ConnectTimeout { addr }),
    };
    Ok(handshake(addr, stream))
}

/// Starts HTTP/2 on a connected socket (plain or TLS), its connection task on this worker.
/// Nothing is awaited: the preface and SETTINGS go out with the first stream's HEADERS.
fn handshake<I>(addr: SocketAddr, io: I) -> H2Sender
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + 'static,
{
    let (send, conn) = crate::h2_client::handshake(io);
    let closed = Rc::new(Cell::new(false));
    spawn_connection(addr, conn, closed.clone());
    H2Sender::new(send, closed)
}

/// Runs one connection until h2 ends it: an error, the peer's GOAWAY once its streams are
/// done, or every handle dropped (the endpoint left) once its streams are done. Its end
/// marks the pooled handle closed.
fn spawn_connection<I>(
    addr: SocketAddr,
    conn: crate::h2_client::Connection<I>,
    closed: Rc<Cell<bool>>,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + 'static,
{
    tokio::task::spawn_local(async move {
        if let Err(error) = conn.await {
            tracing::debug!(%addr, error = %Chain(&error), "HTTP/2 upstream connection ended");
        }
        closed.set(true);
    });
}

impl H2Body {
    /// gRPC's deadline passed with the response under way: the client gets DEADLINE_EXCEEDED
    /// in trailers, the upstream stream is reset (its body dropped).
    fn expire(&mut self, why: &'static str) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.inner = None;
        if self.grpc {
            let mut trailers = HeaderMap::new();
            trailers.insert(
                HeaderName::from_static("grpc-status"),
                HeaderValue::from_static("4"),
            );
            trailers.insert(
                HeaderName::from_static("grpc-message"),
                HeaderValue::from_static(why),
            );
            Poll::Ready(Some(Ok(Frame::trailers(trailers))))
        } else {
            Poll::Ready(Some(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                why,
            )
            .into())))
        }
    }
}

impl Body for H2Body {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        loop {
            let Some(recv) = this.inner.as_mut() else {
                return Poll::Ready(None);
            };
            let polled = if this.data_done {
                recv.poll_trailers(cx)
                    .map(|trailers| trailers.transpose().map(|t| t.map(Frame::trailers)))
            } else {
                match recv.poll_data(cx) {
                    Poll::Ready(None) => {
                        this.data_done = true;
                        continue;
                    }
                    Poll::Ready(Some(Ok(data))) => {
                        // (Taking it opened the windows again: the client's pace is the
                        // backend's.)
                        if data.is_empty() {
                            continue;
                        }
                        Poll::Ready(Some(Ok(Frame::data(data))))
                    }
                    other => other.map(|data| data.map(|data| data.map(Frame::data))),
                }
            };
            return match polled {
                Poll::Ready(Some(Ok(frame))) => {
                    this.read_stall.progress();
                    Poll::Ready(Some(Ok(frame)))
                }
                Poll::Ready(Some(Err(error))) => {
                    this.inner = None;
                    Poll::Ready(Some(Err(error.into())))
                }
                Poll::Ready(None) => {
                    this.inner = None;
                    Poll::Ready(None)
                }
                Poll::Pending => {
                    if let Some(deadline) = this.deadline.as_mut() {
                        if deadline.as_mut().poll(cx).is_ready() {
                            return this.expire("deadline exceeded (grpc-timeout) at the proxy");
                        }
                    }
                    match this.read_stall.poll_expired(cx) {
                        Poll::Ready(()) => {
                            this.expire("upstream sent nothing within proxy-read-timeout")
                        }
                        Poll::Pending => Poll::Pending,
                    }
                }
            };
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(RecvStream::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        match (&self.inner, self.length) {
            (None, _) => SizeHint::with_exact(0),
            (Some(_), Some(length)) if !self.data_done => SizeHint::with_exact(length),
            _ => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_parse_as_the_spec_writes_them() {
        let timeout = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(&GRPC_TIMEOUT, HeaderValue::from_str(value).unwrap());
            grpc_timeout(&headers)
        };
        assert_eq!(timeout("1S"), Some(Duration::from_secs(1)));
        assert_eq!(timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(timeout("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(timeout("3M"), Some(Duration::from_secs(180)));
        assert_eq!(
            timeout("99999999u"),
            Some(Duration::from_micros(99_999_999))
        );
        assert_eq!(timeout("5n"), Some(Duration::from_nanos(5)));
        // More than 8 digits, no unit, an unknown unit, no digits: ignored.
        assert_eq!(timeout("123456789S"), None);
        assert_eq!(timeout("10"), None);
        assert_eq!(timeout("10x"), None);
        assert_eq!(timeout("S"), None);
        assert_eq!(grpc_timeout(&HeaderMap::new()), None);
    }
}
