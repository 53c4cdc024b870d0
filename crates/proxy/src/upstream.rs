//! Talking to endpoints: this worker's keep-alive pool, connecting, and the retry loop that
//! makes "never fail a request that could have succeeded" true.
//!
//! ```text
//!  exchange(request) ── for attempt in 1..=tries ──▶ pick endpoint (skip tried / set aside)
//!     └─ try_endpoint ─▶ idle pooled connection? ─ready─▶ send ─▶ response head ─▶ done
//!                │ none                         │ closed     │ failed before any response:
//!                ▼                              ▼            │  request given back (never
//!             connect ─ refused/timeout ─▶ set aside,        │  sent), or idempotent with a
//!                       next endpoint     next pooled one    │  copy: pooled ─▶ same endpoint,
//!                                                            │  fresh conn; fresh ─▶ next one
//!  response body read to its end ─▶ connection back to the pool (LIFO, ≤ keepalive per endpoint)
//! ```
//!
//! When is resending safe? When hyper hands the request back (it was never written), any
//! request is resent. Once it may have been written, only an idempotent request without a
//! body, for which a copy of the head was kept, is resent; a request with a streamed body
//! cannot be replayed, and a non-idempotent one must not be.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use model::{Backend, LoadBalance, Settings};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

use crate::body::{BodyProgress, BoxError, RequestBody};
use crate::error::{Chain, ProxyError};
use crate::worker::{within, Worker};

type Sender = SendRequest<RequestBody>;

/// While a request body is still being sent, how often to look whether it is done so the
/// head timeout can start.
const BODY_RECHECK: Duration = Duration::from_secs(1);

/// Idle upstream connections of one worker, by endpoint.
#[derive(Default)]
pub(crate) struct Pool {
    idle: HashMap<SocketAddr, VecDeque<Idle>>,
    /// Endpoints of the current configuration; connections to others are not kept.
    live: HashSet<SocketAddr>,
}

struct Idle {
    sender: Sender,
    since: Instant,
}

/// A response head from an endpoint, and the connection it came on.
pub(crate) struct Exchange {
    pub(crate) response: Response<Incoming>,
    pub(crate) conn: UpstreamConn,
}

/// The connection an exchange used: the body returns it to the pool, a tunnel keeps it.
pub(crate) struct UpstreamConn {
    pub(crate) addr: SocketAddr,
    pub(crate) sender: Sender,
    in_flight: Option<InFlight>,
}

/// An upstream response body streaming to the client. Once read to its end, its connection
/// goes back to the pool; dropped early (client gone), the connection is closed.
pub(crate) struct UpstreamBody {
    inner: Incoming,
    read_timeout: Duration,
    deadline: Option<Pin<Box<Sleep>>>,
    /// Waiting for the upstream, with `deadline` running.
    waiting: bool,
    ended: bool,
    reuse: Option<Reuse>,
    _in_flight: Option<InFlight>,
}

struct Reuse {
    worker: Rc<Worker>,
    addr: SocketAddr,
    sender: Sender,
}

/// One request outstanding at an endpoint, for least-request balancing.
pub(crate) struct InFlight {
    worker: Rc<Worker>,
    addr: SocketAddr,
}

/// The upstream socket, with `proxy-send-timeout` applied to writes that make no progress.
struct UpstreamIo {
    stream: TcpStream,
    send_timeout: Duration,
    deadline: Option<Pin<Box<Sleep>>>,
    waiting: bool,
}

/// The request being sent, kept whole or as a reusable copy of its head.
struct Pending {
    head: Option<Parts>,
    body: Option<RequestBody>,
    /// Idempotent and bodiless: a copy may be resent after the original was written.
    retryable: bool,
}

/// One endpoint attempt failed; `next` says whether another endpoint may be tried.
struct Failure {
    error: ProxyError,
    next: bool,
}

impl Pool {
    /// The most recently used idle connection to `addr` that is still open and young enough.
    fn checkout(&mut self, addr: SocketAddr, max_age: Duration, now: Instant) -> Option<Sender> {
        let queue = self.idle.get_mut(&addr)?;
        while let Some(idle) = queue.pop_back() {
            if now.saturating_duration_since(idle.since) >= max_age {
                // The newest is too old, so are all the others.
                queue.clear();
                return None;
            }
            if !idle.sender.is_closed() {
                return Some(idle.sender);
            }
        }
        None
    }

    fn checkin(&mut self, addr: SocketAddr, sender: Sender, max_idle: usize, now: Instant) {
        if max_idle == 0 || sender.is_closed() || !self.live.contains(&addr) {
            return;
        }
        let queue = self.idle.entry(addr).or_default();
        while queue.len() >= max_idle {
            queue.pop_front();
        }
        queue.push_back(Idle { sender, since: now });
    }

    /// Closes idle connections to endpoints not in `live`; returns how many.
    pub(crate) fn keep_only(&mut self, live: HashSet<SocketAddr>) -> usize {
        let mut closed = 0;
        self.idle.retain(|addr, queue| {
            let keep = live.contains(addr);
            if !keep {
                closed += queue.len();
            }
            keep
        });
        self.live = live;
        closed
    }

    pub(crate) fn expire(&mut self, max_age: Duration, now: Instant) {
        for queue in self.idle.values_mut() {
            while queue.front().is_some_and(|idle| {
                now.saturating_duration_since(idle.since) >= max_age || idle.sender.is_closed()
            }) {
                queue.pop_front();
            }
        }
        self.idle.retain(|_, queue| !queue.is_empty());
    }

    pub(crate) fn clear(&mut self) {
        self.idle.clear();
    }
}

impl Worker {
    /// Returns a connection whose response was read to its end.
    fn checkin(&self, addr: SocketAddr, sender: Sender) {
        let (max_idle, max_age) = match self.config() {
            Some(c) => (c.settings.keepalive, c.settings.upstream_keepalive_timeout),
            None => return,
        };
        if max_age.is_zero() {
            return;
        }
        let max_idle = usize::try_from(max_idle).unwrap_or(usize::MAX);
        self.pool
            .borrow_mut()
            .checkin(addr, sender, max_idle, Instant::now());
    }

    fn in_flight(self: &Rc<Self>, addr: SocketAddr, policy: LoadBalance) -> Option<InFlight> {
        (policy == LoadBalance::LeastRequest).then(|| {
            self.balancer.borrow_mut().started(addr);
            InFlight {
                worker: self.clone(),
                addr,
            }
        })
    }
}

/// Sends a request to one of `backend`'s endpoints, retrying as the module doc describes,
/// and returns the first response head.
pub(crate) async fn exchange(
    worker: &Rc<Worker>,
    backend: &Backend,
    settings: &Settings,
    head: Parts,
    body: RequestBody,
    retryable: bool,
) -> Result<Exchange, ProxyError> {
    let tries = settings.proxy_next_upstream_tries.max(1);
    let mut pending = Pending {
        head: Some(head),
        body: Some(body),
        retryable,
    };
    // Allocates only once an attempt has failed.
    let mut tried: Vec<SocketAddr> = Vec::new();
    let mut last_error = None;
    for attempt in 1..=tries {
        let picked = worker.balancer.borrow_mut().pick(
            backend,
            settings.load_balance,
            &tried,
            Instant::now(),
        );
        let Some(addr) = picked else { break };
        if attempt > 1 {
            worker.stats.borrow_mut().retries += 1;
        }
        match try_endpoint(worker, addr, settings, &mut pending, attempt == tries).await {
            Ok(exchange) => return Ok(exchange),
            Err(Failure { error, next }) => {
                tracing::debug!(%addr, attempt, error = %Chain(&error), "upstream attempt failed");
                tried.push(addr);
                last_error = Some(error);
                if !next {
                    break;
                }
            }
        }
    }
    Err(last_error.unwrap_or(ProxyError::NoEndpoints))
}

async fn try_endpoint(
    worker: &Rc<Worker>,
    addr: SocketAddr,
    settings: &Settings,
    pending: &mut Pending,
    last_attempt: bool,
) -> Result<Exchange, Failure> {
    // After a pooled connection failed mid-request, the resend goes on a fresh connection:
    // if the endpoint died, its other pooled connections are as dead.
    let mut fresh_only = false;
    loop {
        let pooled = if fresh_only {
            None
        } else {
            worker.pool.borrow_mut().checkout(
                addr,
                settings.upstream_keepalive_timeout,
                Instant::now(),
            )
        };
        let reused = pooled.is_some();
        let mut sender = match pooled {
            Some(mut sender) => {
                // Closed while idle (the endpoint's keep-alive timeout, a restart): not a
                // failure of anything, just take the next one.
                if sender.ready().await.is_err() {
                    continue;
                }
                sender
            }
            None => match connect(addr, settings).await {
                Ok(sender) => sender,
                Err(error) => {
                    worker.balancer.borrow_mut().set_aside(addr, Instant::now());
                    worker.stats.borrow_mut().connect_errors += 1;
                    // Nothing was sent: any request may go elsewhere.
                    return Err(Failure { error, next: true });
                }
            },
        };

        // On a reused connection a failure may just be the endpoint closing it as we sent,
        // and is retried here, so keep a copy then too.
        let request = pending.take(pending.retryable && (reused || !last_attempt));
        let body = request.body().progress().cloned();
        let in_flight = worker.in_flight(addr, settings.load_balance);
        let sent = await_head(
            sender.try_send_request(request),
            settings.proxy_read_timeout,
            body,
        )
        .await;
        let mut error = match sent {
            Some(Ok(response)) => {
                return Ok(Exchange {
                    response,
                    conn: UpstreamConn {
                        addr,
                        sender,
                        in_flight,
                    },
                })
            }
            None => {
                return Err(Failure {
                    error: ProxyError::ReadTimeout { addr },
                    next: false,
                })
            }
            Some(Err(error)) => error,
        };
        drop(in_flight);
        let resendable = match error.take_message() {
            Some(request) => {
                pending.put_back(request);
                true
            }
            None => pending.head.is_some(),
        };
        let error = ProxyError::Upstream {
            addr,
            source: error.into_error(),
        };
        if !resendable {
            return Err(Failure { error, next: false });
        }
        if reused {
            tracing::debug!(%addr, error = %Chain(&error), "pooled connection failed, resending on a fresh one");
            worker.stats.borrow_mut().retries += 1;
            fresh_only = true;
            continue;
        }
        return Err(Failure { error, next: true });
    }
}

/// Awaits a response head for at most `limit` (zero: no limit), counted from when the
/// request body, if any, was fully handed to the connection: an upload taking longer than
/// `proxy-read-timeout` is not a silent upstream. `None` on timeout.
async fn await_head<F: Future>(
    response: F,
    limit: Duration,
    body: Option<Rc<BodyProgress>>,
) -> Option<F::Output> {
    let Some(body) = body else {
        return within(limit, response).await;
    };
    if limit.is_zero() {
        return Some(response.await);
    }
    let mut response = pin!(response);
    loop {
        let wake_at = match body.sent_at() {
            Some(sent) => sent + limit,
            None => Instant::now() + limit.min(BODY_RECHECK),
        };
        tokio::select! {
            output = response.as_mut() => return Some(output),
            () = tokio::time::sleep_until(wake_at.into()) => {
                if body.sent_at().is_some_and(|sent| sent + limit <= Instant::now()) {
                    return None;
                }
            }
        }
    }
}

/// A fresh HTTP/1.1 connection to `addr`, its driver spawned on this worker.
async fn connect(addr: SocketAddr, settings: &Settings) -> Result<Sender, ProxyError> {
    let stream = match within(settings.proxy_connect_timeout, TcpStream::connect(addr)).await {
        Some(Ok(stream)) => stream,
        Some(Err(source)) => return Err(ProxyError::Connect { addr, source }),
        None => return Err(ProxyError::ConnectTimeout { addr }),
    };
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "set TCP_NODELAY");
    }
    let io = TokioIo::new(UpstreamIo {
        stream,
        send_timeout: settings.proxy_send_timeout,
        deadline: None,
        waiting: false,
    });
    let (sender, connection) = hyper::client::conn::http1::Builder::new()
        .handshake(io)
        .await
        .map_err(|source| ProxyError::Handshake { addr, source })?;
    tokio::task::spawn_local(async move {
        // Ends when the last sender is dropped (pool eviction, body not read to its end) or
        // the endpoint closes; after a 101 it hands the socket to the tunnel.
        if let Err(e) = connection.with_upgrades().await {
            tracing::debug!(%addr, error = %e, "upstream connection ended with an error");
        }
    });
    Ok(sender)
}

impl Pending {
    fn take(&mut self, keep_copy: bool) -> Request<RequestBody> {
        if keep_copy {
            if let Some(head) = &self.head {
                let mut request = Request::new(RequestBody::Empty);
                *request.method_mut() = head.method.clone();
                *request.uri_mut() = head.uri.clone();
                *request.version_mut() = head.version;
                *request.headers_mut() = head.headers.clone();
                return request;
            }
        }
        let head = self
            .head
            .take()
            .expect("a request is only resent while it is held");
        let body = self
            .body
            .take()
            .expect("a request is only resent while it is held");
        Request::from_parts(head, body)
    }

    fn put_back(&mut self, request: Request<RequestBody>) {
        let (head, body) = request.into_parts();
        self.head = Some(head);
        self.body = Some(body);
    }
}

impl UpstreamBody {
    /// `reusable`: the upstream did not ask to close; the connection may be pooled.
    pub(crate) fn new(
        inner: Incoming,
        conn: UpstreamConn,
        worker: &Rc<Worker>,
        reusable: bool,
        read_timeout: Duration,
    ) -> UpstreamBody {
        UpstreamBody {
            inner,
            read_timeout,
            deadline: None,
            waiting: false,
            ended: false,
            _in_flight: conn.in_flight,
            reuse: reusable.then(|| Reuse {
                worker: worker.clone(),
                addr: conn.addr,
                sender: conn.sender,
            }),
        }
    }

    fn poll_deadline(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.read_timeout.is_zero() {
            return Poll::Pending;
        }
        if !self.waiting {
            self.waiting = true;
            let deadline = tokio::time::Instant::now() + self.read_timeout;
            match &mut self.deadline {
                Some(sleep) => sleep.as_mut().reset(deadline),
                None => self.deadline = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
        }
        let sleep = self.deadline.as_mut().expect("armed above");
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.reuse = None;
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
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(None) => {
                this.ended = true;
                Poll::Ready(None)
            }
            Poll::Ready(Some(Ok(frame))) => {
                this.waiting = false;
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.reuse = None;
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Pending => this.poll_deadline(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for UpstreamBody {
    fn drop(&mut self) {
        if let Some(reuse) = self.reuse.take() {
            // hyper's server stops polling once `is_end_stream` says so, so the end may be
            // known here without a final `None` having been seen.
            if self.ended || self.inner.is_end_stream() {
                reuse.worker.checkin(reuse.addr, reuse.sender);
            }
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.worker.balancer.borrow_mut().finished(self.addr);
    }
}

impl UpstreamIo {
    fn poll_send_deadline(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.send_timeout.is_zero() {
            return Poll::Pending;
        }
        if !self.waiting {
            self.waiting = true;
            let deadline = tokio::time::Instant::now() + self.send_timeout;
            match &mut self.deadline {
                Some(sleep) => sleep.as_mut().reset(deadline),
                None => self.deadline = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
        }
        let sleep = self.deadline.as_mut().expect("armed above");
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "upstream accepted nothing within proxy-send-timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for UpstreamIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for UpstreamIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.stream).poll_write(cx, buf) {
            Poll::Pending => this.poll_send_deadline(cx),
            ready => {
                this.waiting = false;
                ready
            }
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.stream).poll_write_vectored(cx, bufs) {
            Poll::Pending => this.poll_send_deadline(cx),
            ready => {
                this.waiting = false;
                ready
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
