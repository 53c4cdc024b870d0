//! Sluice's own HTTP/1.1 client for upstream connections. It runs inside the request's own
//! future: no task per connection, no channels, and it borrows the request head instead of
//! owning it, so a resend costs nothing.
//!
//! ```text
//!  round_trip(head, body)
//!    ─▶ request line + headers written into the connection's reused buffer
//!    ─▶ one writev: head [+ the body, when all of it is already here]
//!    ─▶ rest of the body: Content-Length as is, else chunked; an early response stops it
//!    ─▶ read ─▶ h1::parse_response ─▶ 1xx: skipped │ 101: Upgrade (socket goes to the tunnel)
//!    ─▶ Answer: status, end-to-end headers (values are slices of the read buffer), Framing
//!       (ambiguous framing: an upstream error, the connection not reused)
//!  poll_body(framing) ─▶ Bytes split off the read buffer: length │ chunked │ until close
//! ```
//!
//! Parsing, framing, chunked coding and their limits are the codec's (`h1`), shared with the
//! inline server; this module does the I/O, over plain TCP or TLS (`Stream`: an enum, so the
//! plain path keeps its readiness-based reads and writes and pays one branch for TLS).
//!
//! The client consumes what describes the connection rather than the message: `Connection`,
//! `Keep-Alive`, `Transfer-Encoding` and the other hop-by-hop headers are read for framing and
//! reuse, and left out of the response (except on a 101, which the tunnel code answers).

use std::cell::RefCell;
use std::future::{poll_fn, Future};
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{ready, Context, Poll, Waker};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::request::Parts;
use http::{Method, Response, StatusCode, Version};
use http_body::Body;
use http_body_util::BodyExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};
use tokio_rustls::client::TlsStream;
use wire::h1::{self, chunk_size_line, chunk_tail, Chunk, ChunkError, Decoded};
use wire::h1::{FramingError, FramingHeaders, HeadError, ResponseHead, Status};

use crate::body::BoxError;
use crate::deadline::within;
use crate::headers::{self, Added};
use crate::request_body::RequestBody;

pub(crate) use wire::h1::Framing;

/// A read wants at least this much free space; with less, a buffer of `READ_BUFFER` is taken.
const MIN_READ: usize = 4096;
const READ_BUFFER: usize = 16 * 1024;
/// The largest read, for bodies known to be long. Fewer, larger reads mean fewer wake-ups of
/// both ends: 64 KiB gave 0.82× nginx's 1 MB throughput, 256 KiB 1.04×, 1 MiB 1.15× (`sluice lab
/// throughput`, one worker). Bigger is not free: a response to a slow client holds up to this
/// much while it waits, so 256 KiB keeps 10,000 such downloads around 2.5 GiB.
const MAX_READ: usize = 256 * 1024;

/// One connection to an endpoint: the socket, the bytes read and not yet handed out, and the
/// buffer request heads are written into. Idle ones wait in the worker's pool.
pub(crate) struct Conn {
    stream: Stream,
    buf: BytesMut,
    out: Vec<u8>,
    /// Exchanges finished on this connection (`upstream-keepalive-requests` bounds them).
    finished: u32,
    /// When it was connected, in tenths of a second of the process clock ([`uptime_ticks`];
    /// `upstream-keepalive-time` retires it): four bytes in what was padding, so a
    /// connection moved between pool and request copies no more than before.
    opened: u32,
    /// The TLS client it was made with (`upstream_tls::TlsClient::id`), 0 for plain TCP: part
    /// of its pool key.
    tls_id: u64,
    /// `proxy-read-timeout` for the response head, made on the connection's first wait and
    /// kept: moving a registered timer's deadline later is one atomic store, while a timer
    /// made and dropped per request took the time driver's lock twice (~970 instructions a
    /// request, callgrind). Between requests it may fire for nobody (waking the last request's
    /// connection task, if it still runs, for nothing); the next wait re-arms it. A pooled
    /// connection keeps that task's allocation until then: at most one per idle connection,
    /// for at most proxy-read-timeout.
    read_timer: Option<Pin<Box<Sleep>>>,
}

/// An upstream socket. TLS needs `&mut` for reads and writes, which the client does at once
/// while a body streams (watching for an early response): the `RefCell` is borrowed only
/// inside one poll, never across an await, so the two never overlap.
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<RefCell<TlsStream<TcpStream>>>),
}

/// A request body on its way upstream, kept so that an attempt which wrote nothing can be
/// made again on another connection.
pub(crate) struct Outgoing {
    body: RequestBody,
    /// Data taken from `body` that no connection has accepted yet.
    held: Option<Bytes>,
    /// `body` has nothing more to give.
    ended: bool,
    /// Bytes of the request the current attempt has written.
    written: usize,
    /// Body bytes the current attempt's `Content-Length` still allows (`None`: chunked).
    left: Option<u64>,
}

/// How a request's body is delimited on the upstream connection. Made from the body that is
/// sent, never from a header: a `Content-Length` someone set above a body still sent would
/// make its rest the next request on this pooled connection, another client's (smuggling).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RequestFraming {
    /// No body and no `Content-Length` (a GET).
    None,
    /// `Content-Length`: the body's length is known before it is sent.
    Length(u64),
    /// `Transfer-Encoding: chunked`: it is not.
    Chunked,
}

/// A request body that did not yield the length its framing announced.
#[derive(Debug, thiserror::Error)]
#[error("the request body's length differs from the {declared} bytes announced upstream")]
pub(crate) struct LengthMismatch {
    declared: u64,
}

/// The limits one round trip runs under; zero means none.
#[derive(Clone, Copy)]
pub(crate) struct Timeouts {
    /// `proxy-send-timeout`: a write that makes no progress for this long fails.
    pub(crate) send: Duration,
    /// `proxy-read-timeout`: for the response head, counted from when the request is sent.
    pub(crate) read: Duration,
}

/// A response head and how its body is delimited.
pub(crate) struct Answer {
    pub(crate) response: Response<()>,
    pub(crate) framing: Framing,
    /// The connection may carry another request once the body is read to its end.
    pub(crate) keep_alive: bool,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    #[error("writing the request failed")]
    Write(#[source] io::Error),
    #[error("upstream accepted nothing within proxy-send-timeout")]
    SendTimeout,
    #[error("reading the response failed")]
    Read(#[source] io::Error),
    #[error("no response head within proxy-read-timeout")]
    ReadTimeout,
    #[error("connection closed before a complete response head")]
    ClosedBeforeHead,
    #[error("connection closed before the end of the response body")]
    ClosedInBody,
    #[error("invalid response head")]
    Head(#[source] HeadError),
    #[error("invalid status code {0}")]
    Status(u16),
    #[error("ambiguous response framing")]
    Framing(#[source] FramingError),
    #[error("invalid chunked encoding")]
    Chunked(#[source] ChunkError),
    #[error("101 Switching Protocols to a request that asked for no upgrade")]
    UnexpectedUpgrade,
    #[error("the request body failed")]
    Body(#[source] BoxError),
}

/// A failed write (what `h1::write_all` needs to report one that wrote nothing).
impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> ClientError {
        ClientError::Write(e)
    }
}

/// A parsed response head.
pub(crate) enum Parsed {
    Partial,
    /// A 1xx other than 101, already removed from the buffer.
    Informational,
    Final(Answer),
}

impl Conn {
    pub(crate) fn new(stream: Stream, tls_id: u64) -> Conn {
        Conn {
            stream,
            buf: BytesMut::new(),
            out: Vec::new(),
            finished: 0,
            tls_id,
            read_timer: None,
            opened: uptime_ticks(std::time::Instant::now()),
        }
    }

    /// When it was connected (see [`uptime_ticks`]).
    pub(crate) fn opened(&self) -> u32 {
        self.opened
    }

    pub(crate) fn tls_id(&self) -> u64 {
        self.tls_id
    }

    /// Counts one finished exchange; returns how many this connection has carried.
    pub(crate) fn count_finished(&mut self) -> u32 {
        self.finished = self.finished.saturating_add(1);
        self.finished
    }

    /// Whether an idle connection can carry a request. Nothing may arrive on one while it is
    /// idle, so anything readable (end of stream, a reset, stray bytes) disqualifies it. Free
    /// unless the reactor saw the socket readable since it was last read dry.
    pub(crate) fn is_idle_open(&self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        let mut byte = [0u8; 1];
        match &self.stream {
            Stream::Plain(tcp) => {
                matches!(tcp.try_read(&mut byte), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
            }
            // TLS records may arrive while idle (TLS 1.3 session tickets): rustls takes them
            // in; only application data, a close or an error disqualifies the connection.
            // Nothing waits for this poll, so no task needs waking.
            Stream::Tls(tls) => {
                let mut cx = Context::from_waker(Waker::noop());
                let mut read = ReadBuf::new(&mut byte);
                let polled = Pin::new(&mut *tls.borrow_mut()).poll_read(&mut cx, &mut read);
                polled.is_pending()
            }
        }
    }

    /// Readies a connection whose response ended for the pool: `false` if bytes beyond the
    /// response are buffered (it cannot be reused). A read buffer grown for a long body is
    /// let go, so an idle connection holds at most `READ_BUFFER`.
    pub(crate) fn make_idle(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        if self.buf.capacity() > READ_BUFFER {
            self.buf = BytesMut::new();
        }
        true
    }

    /// Sends the request and reads the response head. On success the request's header map
    /// holds the response's headers (its allocation reused); the request itself is not
    /// needed any more then. On failure, `body.unsent(..)` says whether it can be resent
    /// whatever its method.
    pub(crate) async fn round_trip(
        &mut self,
        head: &mut Parts,
        added: Option<&Added<'_>>,
        body: &mut Outgoing,
        timeouts: Timeouts,
        upgrade: bool,
    ) -> Result<Answer, ClientError> {
        body.rewind();
        let has_body = !matches!(body.body, RequestBody::Empty);
        let framing = request_framing(head, &body.body);
        let chunked = framing == RequestFraming::Chunked;
        body.left = match framing {
            RequestFraming::Length(length) => Some(length),
            RequestFraming::None | RequestFraming::Chunked => None,
        };
        if has_body && !body.ended && body.held.is_none() {
            body.poll_ahead().await?;
        }
        // A request that asked the endpoint to close (`connection-proxy-header: close`) leaves
        // a connection that must not go back to the pool, whatever the answer says.
        let mut keep_alive = !headers::connection_has(&head.headers, "close");
        encode_head(&mut self.out, head, added, framing);
        self.send_head(body, chunked, timeouts.send).await?;

        // Boxed: a large future, needed only by bodies still arriving; the common request's
        // future (moved around by hyper) stays small.
        if has_body
            && !body.ended
            && Box::pin(self.stream_body(body, chunked, timeouts.send)).await?
        {
            // The upstream answered before taking the whole body: this connection is done.
            keep_alive = false;
        }

        let is_head = head.method == Method::HEAD;
        let mut deadline = None;
        loop {
            match parse_head(&mut self.buf, &mut head.headers, is_head, upgrade)? {
                Parsed::Final(mut answer) => {
                    answer.keep_alive &= keep_alive;
                    return Ok(answer);
                }
                Parsed::Informational => continue,
                Parsed::Partial => {}
            }
            let n = self.fill(READ_BUFFER, timeouts.read, &mut deadline).await?;
            if n == 0 {
                return Err(ClientError::ClosedBeforeHead);
            }
        }
    }

    /// Writes the encoded head, with the body if all of it is already here (or the part
    /// that is, so a small body needs no second write).
    async fn send_head(
        &mut self,
        body: &mut Outgoing,
        chunked: bool,
        limit: Duration,
    ) -> Result<(), ClientError> {
        let held = body.held.take();
        let mut size_line = [0u8; 18];
        let mut slices = [
            IoSlice::new(&self.out),
            IoSlice::new(&[]),
            IoSlice::new(&[]),
            IoSlice::new(&[]),
        ];
        if let Some(data) = &held {
            body.take_length(data.len(), body.ended)?;
            if chunked {
                slices[1] = IoSlice::new(chunk_size_line(data.len(), &mut size_line));
            }
            slices[2] = IoSlice::new(data);
        }
        if chunked {
            slices[3] = IoSlice::new(chunk_tail(held.is_some(), body.ended));
        }
        let result = write_all(&self.stream, &mut slices, limit, &mut body.written).await;
        if body.written == 0 {
            // Nothing left: the data is still ours to send elsewhere.
            body.held = held;
        }
        result
    }

    /// Sends what is left of the body while watching for the response. `true` when a final
    /// response head arrived before the body was sent whole.
    async fn stream_body(
        &mut self,
        body: &mut Outgoing,
        chunked: bool,
        send_timeout: Duration,
    ) -> Result<bool, ClientError> {
        let stream = &self.stream;
        let buf = &mut self.buf;
        let mut send = std::pin::pin!(send_rest(stream, body, chunked, send_timeout));
        loop {
            tokio::select! {
                biased;
                sent = &mut send => return sent.map(|()| false),
                read = poll_fn(|cx| poll_fill(stream, buf, cx, READ_BUFFER)) => {
                    match read {
                        Ok(0) => return Err(ClientError::ClosedBeforeHead),
                        Ok(_) => {
                            if has_final_head(buf)? {
                                return Ok(true);
                            }
                        }
                        Err(e) => return Err(ClientError::Read(e)),
                    }
                }
            }
        }
    }

    /// Reads into the buffer; `Ok(0)` at end of stream. A wait is bounded by `limit`,
    /// counted from the first wait (`deadline` remembers it).
    async fn fill(
        &mut self,
        want: usize,
        limit: Duration,
        deadline: &mut Option<Instant>,
    ) -> Result<usize, ClientError> {
        if limit.is_zero() {
            let read = poll_fn(|cx| poll_fill(&self.stream, &mut self.buf, cx, want));
            return read.await.map_err(ClientError::Read);
        }
        let at = *deadline.get_or_insert_with(|| Instant::now() + limit);
        let (stream, buf, timer) = (&self.stream, &mut self.buf, &mut self.read_timer);
        let mut armed = false;
        poll_fn(|cx| {
            if let Poll::Ready(result) = poll_fill(stream, buf, cx, want) {
                return Poll::Ready(result.map_err(ClientError::Read));
            }
            // Armed only once the read waits: a response already here costs no timer.
            let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
            if !armed {
                armed = true;
                if timer.deadline() != at {
                    timer.as_mut().reset(at);
                }
            }
            match timer.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(ClientError::ReadTimeout)),
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    }

    /// The next piece of a response body, split off the read buffer; reads the socket when
    /// the buffer holds none. `None` at the end of the body.
    pub(crate) fn poll_body(
        &mut self,
        framing: &mut Framing,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, ClientError>> {
        loop {
            match framing
                .decode(&mut self.buf)
                .map_err(ClientError::Chunked)?
            {
                Decoded::Data(data) => return Poll::Ready(Ok(Some(data))),
                Decoded::End => return Poll::Ready(Ok(None)),
                Decoded::NeedMore => {}
            }
            let want = read_hint(framing);
            let n = ready!(poll_fill(&self.stream, &mut self.buf, cx, want))
                .map_err(ClientError::Read)?;
            if n == 0 {
                if *framing == Framing::UntilClose {
                    *framing = Framing::Empty;
                    return Poll::Ready(Ok(None));
                }
                return Poll::Ready(Err(ClientError::ClosedInBody));
            }
        }
    }

    /// Whether the body ends with what is already buffered (no data left before its end),
    /// consuming the framing bytes up to there.
    pub(crate) fn body_ended(&mut self, framing: &mut Framing) -> bool {
        match framing {
            Framing::Empty => true,
            Framing::Length(left) => *left == 0,
            Framing::Chunked(chunk) => {
                matches!(chunk.advance(&mut self.buf), Ok(true)) && *chunk == Chunk::Done
            }
            Framing::UntilClose | Framing::Upgrade => false,
        }
    }

    /// The socket and whatever the upstream sent after the 101's head.
    pub(crate) fn into_parts(self) -> (Stream, Bytes) {
        (self.stream, self.buf.freeze())
    }
}

impl Outgoing {
    pub(crate) fn new(body: RequestBody) -> Outgoing {
        let ended = matches!(body, RequestBody::Empty);
        Outgoing {
            body,
            held: None,
            ended,
            written: 0,
            left: None,
        }
    }

    /// Counts `n` body bytes about to be written against the announced `Content-Length`: more,
    /// or fewer by the body's end, would desync the connection, so the attempt fails instead
    /// (and its connection is not reused).
    fn take_length(&mut self, n: usize, end: bool) -> Result<(), ClientError> {
        let Some(left) = self.left.as_mut() else {
            return Ok(());
        };
        let n = n as u64;
        if n > *left || (end && n != *left) {
            let declared = self.body.length().unwrap_or_default();
            return Err(ClientError::Body(LengthMismatch { declared }.into()));
        }
        *left -= n;
        Ok(())
    }

    /// Readies the body for an attempt: a replayable one starts again from its first byte
    /// (whatever an attempt before took of it); a streamed one goes on from where it is.
    fn rewind(&mut self) {
        self.written = 0;
        if self.body.rewind() {
            self.held = None;
            self.ended = self.body.is_end_stream();
        }
    }

    /// After a failed attempt: whether not one byte of the request reached the connection
    /// and the body is intact, so that it can be sent anywhere, whatever its method.
    pub(crate) fn unsent(&self, error: &ClientError) -> bool {
        self.written == 0 && !matches!(error, ClientError::Body(_))
    }

    /// Takes a frame if one is ready now, so that a small body can go out with the head.
    async fn poll_ahead(&mut self) -> Result<(), ClientError> {
        let polled = poll_fn(|cx| Poll::Ready(std::pin::Pin::new(&mut self.body).poll_frame(cx)));
        match polled.await {
            Poll::Ready(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    if !data.is_empty() {
                        self.held = Some(data);
                    }
                }
                self.ended = self.body.is_end_stream();
            }
            Poll::Ready(None) => self.ended = true,
            Poll::Ready(Some(Err(e))) => return Err(ClientError::Body(e)),
            Poll::Pending => {}
        }
        Ok(())
    }
}

/// How much to read next: long bodies get larger reads.
fn read_hint(framing: &Framing) -> usize {
    match framing {
        Framing::Length(left) | Framing::Chunked(Chunk::Data(left)) => {
            usize::try_from(*left).map_or(MAX_READ, |n| n.clamp(MIN_READ, MAX_READ))
        }
        _ => READ_BUFFER,
    }
}

/// Reads what the socket has into `buf`; `Ok(0)` at end of stream.
fn poll_fill(
    stream: &Stream,
    buf: &mut BytesMut,
    cx: &mut Context<'_>,
    want: usize,
) -> Poll<io::Result<usize>> {
    let spare = buf.capacity() - buf.len();
    if spare < MIN_READ || (spare < want && want > READ_BUFFER) {
        buf.reserve(want.max(READ_BUFFER));
    }
    let stream = match stream {
        Stream::Plain(tcp) => tcp,
        Stream::Tls(tls) => {
            let mut tls = tls.borrow_mut();
            let read = std::pin::pin!(tls.read_buf(buf));
            return read.poll(cx);
        }
    };
    loop {
        ready!(stream.poll_read_ready(cx))?;
        let spare = buf.capacity() - buf.len();
        let mut read = 0;
        // A short read drained the socket, and edge-triggered epoll reports new data again:
        // a WouldBlock makes tokio forget the readiness it saw before this read, as its own
        // `AsyncRead` does. Otherwise the next read (or the idle check before reuse) would be
        // a syscall failing with EAGAIN.
        let result = stream.try_io(Interest::READABLE, || {
            read = stream.try_read_buf(buf)?;
            if cfg!(target_os = "linux") && read > 0 && read < spare {
                Err(io::ErrorKind::WouldBlock.into())
            } else {
                Ok(read)
            }
        });
        match result {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && read == 0 => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Ready(Ok(read)),
            result => return Poll::Ready(result),
        }
    }
}

/// Writes every slice, waiting (at most `limit` per wait) while the socket is full.
/// `written` counts the bytes that went out, also when it fails.
async fn write_all(
    stream: &Stream,
    slices: &mut [IoSlice<'_>],
    limit: Duration,
    written: &mut usize,
) -> Result<(), ClientError> {
    let stream = match stream {
        Stream::Plain(tcp) => tcp,
        // Boxed: TLS's own future, kept out of the plain path's.
        Stream::Tls(tls) => return Box::pin(write_all_tls(tls, slices, limit, written)).await,
    };
    h1::write_all(slices, written, async |slices: &[IoSlice<'_>]| loop {
        match stream.try_write_vectored(slices) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // Boxed: only a full socket waits, and the timer makes the future large.
                match Box::pin(within(limit, stream.writable())).await {
                    Some(Ok(())) => {}
                    Some(Err(e)) => return Err(ClientError::Write(e)),
                    None => return Err(ClientError::SendTimeout),
                }
            }
            result => return result.map_err(ClientError::Write),
        }
    })
    .await
}

/// `write_all` over TLS: rustls takes the data in and writes records as the socket allows;
/// a flush at the end sends what it still holds. Each wait is bounded by `limit`.
async fn write_all_tls(
    tls: &RefCell<TlsStream<TcpStream>>,
    slices: &mut [IoSlice<'_>],
    limit: Duration,
    written: &mut usize,
) -> Result<(), ClientError> {
    h1::write_all(slices, written, async |slices: &[IoSlice<'_>]| {
        let write = poll_fn(|cx| Pin::new(&mut *tls.borrow_mut()).poll_write_vectored(cx, slices));
        match within(limit, write).await {
            Some(result) => result.map_err(ClientError::Write),
            None => Err(ClientError::SendTimeout),
        }
    })
    .await?;
    let flush = poll_fn(|cx| Pin::new(&mut *tls.borrow_mut()).poll_flush(cx));
    match within(limit, flush).await {
        Some(result) => result.map_err(ClientError::Write),
        None => Err(ClientError::SendTimeout),
    }
}

/// Streams the body's remaining frames; trailers are dropped.
async fn send_rest(
    stream: &Stream,
    body: &mut Outgoing,
    chunked: bool,
    limit: Duration,
) -> Result<(), ClientError> {
    let mut written = 0;
    let mut size_line = [0u8; 18];
    loop {
        let data = match body.body.frame().await {
            None => {
                body.ended = true;
                body.take_length(0, true)?;
                if chunked {
                    let last = chunk_tail(false, true);
                    write_all(stream, &mut [IoSlice::new(last)], limit, &mut written).await?;
                }
                return Ok(());
            }
            Some(Err(e)) => return Err(ClientError::Body(e)),
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) if !data.is_empty() => data,
                _ => continue,
            },
        };
        let end = body.body.is_end_stream();
        body.take_length(data.len(), end)?;
        if chunked {
            let mut slices = [
                IoSlice::new(chunk_size_line(data.len(), &mut size_line)),
                IoSlice::new(&data),
                IoSlice::new(chunk_tail(true, end)),
            ];
            write_all(stream, &mut slices, limit, &mut written).await?;
        } else {
            write_all(stream, &mut [IoSlice::new(&data)], limit, &mut written).await?;
        }
        if end {
            body.ended = true;
            return Ok(());
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Stream::Tls(tls) => Pin::new(tls.get_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_write(cx, data),
            Stream::Tls(tls) => Pin::new(tls.get_mut()).poll_write(cx, data),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        slices: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_write_vectored(cx, slices),
            Stream::Tls(tls) => Pin::new(tls.get_mut()).poll_write_vectored(cx, slices),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_flush(cx),
            Stream::Tls(tls) => Pin::new(tls.get_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Stream::Tls(tls) => Pin::new(tls.get_mut()).poll_shutdown(cx),
        }
    }
}

/// The request's framing: from its body's length, known up front or not. A request without
/// a body states `Content-Length: 0` when its method gives a body meaning (RFC 9110 §8.6) or
/// its client stated one.
pub(crate) fn request_framing(head: &Parts, body: &RequestBody) -> RequestFraming {
    match body {
        RequestBody::Empty
            if matches!(head.method, Method::POST | Method::PUT | Method::PATCH)
                || head.headers.contains_key(header::CONTENT_LENGTH) =>
        {
            RequestFraming::Length(0)
        }
        RequestBody::Empty => RequestFraming::None,
        body => body
            .length()
            .map_or(RequestFraming::Chunked, RequestFraming::Length),
    }
}

/// The request line in origin form, the request's headers, the ones the proxy adds, the
/// framing, and the blank line, into `out` (cleared first; its allocation lives as long as
/// the connection). `Content-Length` and `Transfer-Encoding` in the head are left out
/// whoever set them: `framing` says how the body that follows is delimited.
pub(crate) fn encode_head(
    out: &mut Vec<u8>,
    head: &Parts,
    added: Option<&Added<'_>>,
    framing: RequestFraming,
) {
    out.clear();
    out.extend_from_slice(head.method.as_str().as_bytes());
    out.push(b' ');
    headers::write_target(out, &head.uri);
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let mut host = None;
    for (name, value) in &head.headers {
        if name == header::HOST {
            host = Some(value);
            let sent = added.map_or(value, |added| added.upstream_host(value));
            h1::encode_header(out, name.as_str().as_bytes(), sent.as_bytes());
            continue;
        }
        if name == header::CONTENT_LENGTH || name == header::TRANSFER_ENCODING {
            continue;
        }
        h1::encode_header(out, name.as_str().as_bytes(), value.as_bytes());
    }
    if let Some(added) = added {
        added.write(out, head, host);
    }
    match framing {
        RequestFraming::None => {}
        RequestFraming::Length(length) => {
            out.extend_from_slice(b"content-length: ");
            out.extend_from_slice(h1::decimal(length, &mut [0; 20]));
            out.extend_from_slice(b"\r\n");
        }
        RequestFraming::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
    }
    out.extend_from_slice(b"\r\n");
}

/// Whether `buf` starts with a complete final response head; complete 1xx heads before it
/// are dropped.
fn has_final_head(buf: &mut BytesMut) -> Result<bool, ClientError> {
    loop {
        let informational = h1::parse_response(buf, |buf, head| {
            let informational = (100..200).contains(&head.code) && head.code != 101;
            if informational {
                buf.advance(head.len);
            }
            informational
        });
        match informational.map_err(ClientError::Head)? {
            Status::Complete(true) => continue,
            Status::Complete(false) => return Ok(true),
            Status::Partial => return Ok(false),
        }
    }
}

/// Parses a response head at the front of `buf`. A final one is split off `buf` and its
/// headers go into `spare` (cleared, its allocation reused).
pub(crate) fn parse_head(
    buf: &mut BytesMut,
    spare: &mut HeaderMap,
    is_head: bool,
    upgrade: bool,
) -> Result<Parsed, ClientError> {
    if buf.is_empty() {
        return Ok(Parsed::Partial);
    }
    let parsed = h1::parse_response(buf, |buf, head| {
        split_off(buf, head, spare, is_head, upgrade)
    });
    match parsed.map_err(ClientError::Head)? {
        Status::Complete(parsed) => parsed,
        Status::Partial => Ok(Parsed::Partial),
    }
}

/// Decides about a complete response head and splits it off `buf`.
fn split_off(
    buf: &mut BytesMut,
    response: &ResponseHead<'_>,
    spare: &mut HeaderMap,
    is_head: bool,
    upgrade: bool,
) -> Result<Parsed, ClientError> {
    let code = response.code;
    let status = StatusCode::from_u16(code).map_err(|_| ClientError::Status(code))?;
    if status.is_informational() && status != StatusCode::SWITCHING_PROTOCOLS {
        buf.advance(response.len);
        return Ok(Parsed::Informational);
    }
    let version = if response.version == 0 {
        Version::HTTP_10
    } else {
        Version::HTTP_11
    };
    let head = buf.split_to(response.len).freeze();
    let connection = FramingHeaders::read(&head, response.headers);
    let framing = connection
        .response_framing(code, response.version, is_head)
        .map_err(ClientError::Framing)?;
    let switching = framing == Framing::Upgrade;
    if switching && !upgrade {
        return Err(ClientError::UnexpectedUpgrade);
    }
    let keep_alive = match framing {
        Framing::Upgrade | Framing::UntilClose => false,
        _ if version == Version::HTTP_11 => !connection.close,
        _ => connection.keep_alive && !connection.close,
    };

    let mut headers = std::mem::take(spare);
    headers.clear();
    headers.reserve(response.headers.len());
    let mut connection_values = Vec::new();
    for at in response.headers {
        // httparse checked names and values with the same rules `http` applies.
        let Ok(name) = HeaderName::from_bytes(at.name(&head)) else {
            continue;
        };
        if !switching && headers::is_hop_by_hop(&name) {
            if connection.names_others && name == header::CONNECTION {
                connection_values.push(head.slice(at.value_range()));
            }
            continue;
        }
        if let Ok(value) = HeaderValue::from_maybe_shared(head.slice(at.value_range())) {
            headers.append(name, value);
        }
    }
    for value in &connection_values {
        headers::remove_named_by_connection(&mut headers, value);
    }

    // The version describes the upstream connection, which `keep_alive` and `framing`
    // already account for; the client gets its own (an HTTP/1.0 one would make hyper's
    // server close the client's connection).
    let mut response = Response::new(());
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    Ok(Parsed::Final(Answer {
        response,
        framing,
        keep_alive,
    }))
}

#[cfg(test)]
mod tests;

/// [`uptime_ticks`] are tenths of a second: a connection may retire up to 100 ms before its
/// `upstream-keepalive-time`.
pub(crate) const TICKS_PER_SECOND: u64 = 10;

/// `at` in tenths of a second since the process first asked: a connection's age in 4 bytes
/// (13 years of them).
pub(crate) fn uptime_ticks(at: std::time::Instant) -> u32 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let start = *START.get_or_init(|| at);
    let since = at.saturating_duration_since(start);
    let ticks = since.as_secs() * TICKS_PER_SECOND + u64::from(since.subsec_millis() / 100);
    u32::try_from(ticks).unwrap_or(u32::MAX)
}
