//! Sluice's own HTTP/1.1 server for the common request; hyper serves everything else.
//!
//! ```text
//!  read ─▶ h1::parse_request ─▶ framing ambiguous (CL + TE, repeated CL, a coding other
//!    │                           than chunked)? ─▶ 400 / 501 written here, connection closed
//!    │                         ─▶ head over large-client-header-buffers (complete or not)?
//!    │                           ─▶ 431 written here, connection closed
//!    ▼
//!  a plain request? HTTP/1.1, no body, no Expect, no Upgrade, a valid head
//!    ├─ yes ─▶ Pipeline::respond ─▶ status line, headers, framing (and Date) encoded into the
//!    │         connection's head buffer ─▶ one writev: head + the body bytes already here
//!    │         ─▶ the rest of the body (as it is, or chunked) ─▶ the next request (pipelined
//!    │         ones straight from the buffer, without a read)
//!    └─ no ──▶ Ended::Handover: the socket and every byte read so far go to hyper, which
//!              serves the rest of the connection (bodies, 100-continue, upgrades, HTTP/1.0,
//!              the 400 answers to malformed heads, and the later requests' heads)
//! ```
//!
//! Why not hyper for everything: on keep-alive proxying hyper's server machinery (dispatcher,
//! service future, body channel, buffered I/O layers) cost more user time than the rest of the
//! request path. This server runs the request inside its own future, with no task, no
//! channel and no boxing; the request head's values are slices of the read buffer.

use std::cell::RefCell;
use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::request::Parts;
use http::{Method, Request, Response, StatusCode, Uri};
use http_body::Body;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use wire::h1::{self, chunk_size_line, chunk_tail, FramingError, FramingHeaders, RequestHead};
use wire::h1::{Framing, HeadError, Status};

use crate::body::BoxError;
use crate::error::{Chain, ProxyError};
use crate::pipeline::Pipeline;

/// Headers a request's map has room for from the start: the request's, then, reused, its
/// response's (nginx's static files answer with 8, the bench backend with 3).
const TYPICAL_HEADERS: usize = 12;

/// The most one read takes from a client connection (the scratch buffer's size).
const READ_BUFFER: usize = 16 * 1024;

thread_local! {
    /// Each worker thread reads client bytes here first: a connection waiting for its next
    /// request then holds no buffer of its own.
    static SCRATCH: RefCell<Box<[u8]>> = RefCell::new(vec![0; READ_BUFFER].into_boxed_slice());
}

/// Runs `f` on the worker thread's scratch buffer (HTTP/2 reads go through it too, so that
/// a connection between requests holds no read buffer).
pub(crate) fn with_scratch<R>(f: impl FnOnce(&mut [u8]) -> R) -> R {
    SCRATCH.with(|scratch| f(&mut scratch.borrow_mut()[..]))
}

/// Reads what the client sent into the thread's scratch buffer and appends it to `buf`
/// (which grows only by what arrived). `Ok(0)`: end of stream.
async fn read_through_scratch<I: AsyncRead + Unpin>(
    io: &mut I,
    buf: &mut BytesMut,
) -> io::Result<usize> {
    poll_fn(|cx| {
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let mut read = ReadBuf::new(&mut scratch[..]);
            match Pin::new(&mut *io).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) => {
                    buf.extend_from_slice(read.filled());
                    Poll::Ready(Ok(read.filled().len()))
                }
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            }
        })
    })
    .await
}

/// How the inline server left a connection.
pub(crate) enum Ended {
    /// Closed: by the client, after a response that said so, or on an I/O error.
    Closed,
    /// A request this server does not serve: hyper takes over, starting with these bytes.
    Handover(Bytes),
}

/// One client connection served inline.
pub(crate) struct Http1<I> {
    io: I,
    /// Bytes read and not yet parsed; a request's head is split off it. Empty between
    /// requests, it is let go (reads go through the thread's scratch buffer), so an idle
    /// keep-alive connection holds no read buffer.
    buf: BytesMut,
    /// The response head is encoded here; the allocation lives as long as the connection.
    out: Vec<u8>,
    /// `large-client-header-buffers`: a head that does not fit goes to hyper, which
    /// answers 431.
    max_head: usize,
    /// `keep-alive` is not zero.
    keep_alive: bool,
}

/// A request head this server serves, with what the connection needs to know about it.
pub(crate) struct Parsed {
    pub(crate) head: Parts,
    /// The client did not ask to close.
    pub(crate) keep_alive: bool,
}

// Returned by value once per request: boxing the request would cost an allocation.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Parse {
    Request(Parsed),
    Partial,
    /// Not for this server: a body, an expectation, an upgrade, HTTP/1.0, or a head that is
    /// malformed (hyper answers those).
    Other,
    /// A head over the limit, complete or not: answered here (431) and the connection closed.
    /// Not hyper's to answer: its `max_buf_size` bounds its buffer only while a head is still
    /// incomplete, so a complete oversized head among the bytes handed over would be served.
    TooLarge,
    /// A head whose framing is ambiguous: answered here (400, or 501 for an unknown
    /// transfer coding, as nginx does) and the connection closed, rather than handed to
    /// hyper, which would let some of them through (`Content-Length` with
    /// `Transfer-Encoding`, repeated lengths). With the request line and `Host`, for the
    /// access log.
    Refused(FramingError, Box<Parts>),
}

impl<I: AsyncRead + AsyncWrite + Unpin> Http1<I> {
    pub(crate) fn new(io: I, max_head: usize, keep_alive: bool) -> Http1<I> {
        Http1 {
            io,
            buf: BytesMut::new(),
            out: Vec::new(),
            max_head,
            keep_alive,
        }
    }

    /// The socket, for hyper after a handover.
    pub(crate) fn into_io(self) -> I {
        self.io
    }

    /// Serves requests until the connection ends or hyper has to take over.
    pub(crate) async fn run<C: Pipeline>(&mut self, conn: &Rc<C>) -> Ended {
        loop {
            let request = loop {
                match parse(&mut self.buf, self.max_head) {
                    Parse::Request(request) => break request,
                    Parse::Partial => {}
                    Parse::Other => return Ended::Handover(self.buf.split().freeze()),
                    // Boxed, as `answer`: rare, and it writes a response.
                    Parse::TooLarge => {
                        let error = ProxyError::RequestHeadTooLarge;
                        let refused = Box::pin(self.refuse(&**conn, error, None));
                        return refused.await;
                    }
                    Parse::Refused(error, head) => {
                        let error = ProxyError::RequestFraming(error);
                        let refused = Box::pin(self.refuse(&**conn, error, Some(&head)));
                        return refused.await;
                    }
                }
                if self.buf.is_empty() && self.buf.capacity() > 0 {
                    // Between requests: nothing held (nginx frees an idle keep-alive
                    // connection's buffers too). The next bytes arrive through the thread's
                    // scratch buffer, and only they are kept.
                    self.buf = BytesMut::new();
                }
                match read_through_scratch(&mut self.io, &mut self.buf).await {
                    Ok(0) => return Ended::Closed,
                    Ok(_) => {}
                    Err(e) => {
                        tracing::debug!(error = %e, "reading from the client failed");
                        return Ended::Closed;
                    }
                }
            };
            // Boxed: a request's state (the pipeline, the upstream exchange, the response
            // being written) is several KiB; inline, every idle keep-alive connection would
            // carry that much in its task. One allocation per request instead.
            let answer = Box::pin(self.answer(conn, request));
            match answer.await {
                // Keep-alive was promised in the response (`closing` was read when it was
                // written): only a stop breaks that promise.
                Ok(true) if !conn.stopping() => {}
                Ok(_) => {
                    // A clean end: FIN, and over TLS a close_notify first, so the client
                    // can tell it from a truncation.
                    let _ = self.io.shutdown().await;
                    return Ended::Closed;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "writing to the client failed");
                    return Ended::Closed;
                }
            }
        }
    }

    /// One plain request: through the pipeline, then the response written.
    async fn answer<C: Pipeline>(&mut self, conn: &Rc<C>, request: Parsed) -> io::Result<bool> {
        let method = request.head.method.clone();
        let response = conn.clone().respond(request.head, None, None).await;
        let close = !request.keep_alive || !self.keep_alive || conn.closing();
        self.write_response(response, &method, close).await
    }

    /// Answers a head refused before routing (ambiguous framing: 400 or 501; over
    /// `large-client-header-buffers`: 431), and ends the connection: where the next request
    /// would start is exactly what cannot be known. `head`, when it could be read, is logged.
    async fn refuse<C: Pipeline>(
        &mut self,
        conn: &C,
        error: ProxyError,
        head: Option<&Parts>,
    ) -> Ended {
        tracing::debug!(error = %Chain(&error), "refusing a request head");
        let (status, source) = error.classify();
        conn.count_error(status.as_u16(), source);
        let response = conn.error_response(&error);
        let body_bytes = response.body().size_hint().exact().unwrap_or(0);
        let written = self.write_response(response, &Method::GET, true).await;
        // nginx logs what it refused, with the bytes that went out.
        let sent = match written {
            Ok(_) => (self.out.len() as u64, body_bytes),
            Err(_) => (0, 0),
        };
        conn.log_refused(head, status.as_u16(), sent);
        if written.is_ok() {
            let _ = self.io.shutdown().await;
        }
        Ended::Closed
    }

    /// Writes a response; `Ok(true)` when the connection can carry another request.
    ///
    /// One function of ~100 lines on purpose: the head waits for the first body frame only if
    /// it is already here, and the rest is framed as it comes; split into async helpers, each
    /// would add its own state to every request's future on the hot path.
    pub(crate) async fn write_response<B>(
        &mut self,
        response: Response<B>,
        method: &Method,
        close: bool,
    ) -> io::Result<bool>
    where
        B: Body<Data = Bytes, Error = BoxError> + Unpin,
    {
        let (head, mut body) = response.into_parts();
        let (framing, close) = encode_head(&mut self.out, &head, &body, method, close);
        if matches!(framing, Framing::Empty) {
            // A body it may not have (HEAD, 204, 304) is not sent; reading it to its end
            // lets its upstream connection go back to the pool.
            while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
                if frame.is_err() {
                    break;
                }
            }
            write_all(&mut self.io, &mut [IoSlice::new(&self.out)]).await?;
            self.io.flush().await?;
            return Ok(!close);
        }
        let mut head_sent = false;
        let mut size_line = [0u8; 18];
        let mut sent: u64 = 0;
        loop {
            // The first frame is waited for only if it is already here: a slow body must not
            // hold back the head.
            let frame = if head_sent {
                poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
            } else {
                match poll_fn(|cx| Poll::Ready(Pin::new(&mut body).poll_frame(cx))).await {
                    Poll::Ready(frame) => frame,
                    Poll::Pending => {
                        write_all(&mut self.io, &mut [IoSlice::new(&self.out)]).await?;
                        self.io.flush().await?;
                        head_sent = true;
                        continue;
                    }
                }
            };
            let ended = frame.is_none();
            let data = match frame {
                None => Bytes::new(),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => data,
                    // Trailers: HTTP/1.1 clients did not ask for them (hyper drops them too).
                    Err(_) => continue,
                },
                Some(Err(e)) => {
                    // The head (perhaps part of the body) is out: the only way left to tell
                    // the client is to close the connection.
                    tracing::debug!(error = %e, "response body failed, closing the connection");
                    return Ok(false);
                }
            };
            let end = ended || body.is_end_stream();
            sent += data.len() as u64;
            let head: &[u8] = if head_sent { &[] } else { &self.out };
            head_sent = true;
            match framing {
                Framing::Chunked(_) => {
                    let size = if data.is_empty() {
                        &[][..]
                    } else {
                        chunk_size_line(data.len(), &mut size_line)
                    };
                    let tail = chunk_tail(!data.is_empty(), end);
                    let mut slices = [
                        IoSlice::new(head),
                        IoSlice::new(size),
                        IoSlice::new(&data),
                        IoSlice::new(tail),
                    ];
                    write_all(&mut self.io, &mut slices).await?;
                }
                Framing::Length(declared) if sent > declared => {
                    // More than the head announced: the client would read the excess as the
                    // next response.
                    tracing::debug!(declared, sent, "response body longer than its length");
                    return Ok(false);
                }
                _ => {
                    let mut slices = [IoSlice::new(head), IoSlice::new(&data)];
                    write_all(&mut self.io, &mut slices).await?;
                }
            }
            if end {
                self.io.flush().await?;
                // The request is over only now: its guard (in `body`) stays until here.
                drop(body);
                let complete = match framing {
                    Framing::Length(declared) => sent == declared,
                    _ => true,
                };
                return Ok(complete && !close);
            }
        }
    }
}

/// Parses the request head at the front of `buf`; a request this server serves is split
/// off it. Anything else leaves the buffer whole, for hyper or for the refusal.
pub(crate) fn parse(buf: &mut BytesMut, max_head: usize) -> Parse {
    if buf.is_empty() {
        return Parse::Partial;
    }
    match h1::parse_request(buf, max_head, split_off) {
        Ok(Status::Complete(parse)) => parse,
        Ok(Status::Partial) => Parse::Partial,
        Err(HeadError::TooLarge(_)) => Parse::TooLarge,
        // hyper answers these: 400.
        Err(_) => Parse::Other,
    }
}

/// Decides about a complete head and, for one this server serves, splits it off `buf` and
/// builds the request from slices of it.
#[inline]
fn split_off(buf: &mut BytesMut, request: &RequestHead<'_>) -> Parse {
    // Check everything before taking the head off the buffer: hyper must see it whole.
    let bytes = &buf[..request.len];
    let framing = FramingHeaders::read(bytes, request.headers);
    match framing.request_framing(request.version) {
        Err(error) => return Parse::Refused(error, Box::new(refused_head(bytes, request))),
        Ok(Framing::Empty | Framing::Length(0)) => {}
        Ok(_) => return Parse::Other,
    }
    if request.version != 1 || framing.expect || framing.upgrade {
        return Parse::Other;
    }
    let method = &bytes[request.method.0..request.method.1];
    let Ok(method) = Method::from_bytes(method) else {
        return Parse::Other;
    };
    if method == Method::CONNECT {
        return Parse::Other;
    }
    let keep_alive = !framing.close;

    let frozen = buf.split_to(request.len).freeze();
    let Ok(uri) = Uri::from_maybe_shared(frozen.slice(request.target.0..request.target.1)) else {
        // hyper answers 400 (`http` refuses some characters httparse lets through).
        put_back(buf, &frozen);
        return Parse::Other;
    };
    // The upstream client parses the response's headers into this map too (`client::parse_head`
    // takes it over): room for a typical response's saves a rehash per request.
    let mut headers = HeaderMap::with_capacity(request.headers.len().max(TYPICAL_HEADERS));
    for header in request.headers {
        let name = HeaderName::from_bytes(header.name(&frozen));
        let value = HeaderValue::from_maybe_shared(frozen.slice(header.value_range()));
        match (name, value) {
            (Ok(name), Ok(value)) => {
                headers.append(name, value);
            }
            _ => {
                put_back(buf, &frozen);
                return Parse::Other;
            }
        }
    }
    let mut request = Request::new(());
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.headers_mut() = headers;
    let (head, ()) = request.into_parts();
    Parse::Request(Parsed { head, keep_alive })
}

/// What the access log shows of a refused head: its method, target, version and `Host`, where
/// they can be read.
fn refused_head(bytes: &[u8], request: &RequestHead<'_>) -> Parts {
    let mut head = Request::new(()).into_parts().0;
    if let Ok(method) = Method::from_bytes(&bytes[request.method.0..request.method.1]) {
        head.method = method;
    }
    if let Ok(uri) = Uri::try_from(&bytes[request.target.0..request.target.1]) {
        head.uri = uri;
    }
    if request.version == 0 {
        head.version = http::Version::HTTP_10;
    }
    for header in request.headers {
        if header.name(bytes).eq_ignore_ascii_case(b"host") {
            if let Ok(host) = HeaderValue::from_bytes(header.value(bytes)) {
                head.headers.insert(header::HOST, host);
            }
        }
    }
    head
}

/// Puts a head split off `buf` back in front of it, for hyper to read whole.
fn put_back(buf: &mut BytesMut, head: &Bytes) {
    let rest = buf.split();
    buf.extend_from_slice(head);
    buf.extend_from_slice(&rest);
}

/// The status line, the response's headers, framing, `Connection: close` when this is the
/// last response, and `Date` when the response has none. Returns the framing and whether
/// the connection closes after this response.
fn encode_head(
    out: &mut Vec<u8>,
    head: &http::response::Parts,
    body: &impl Body,
    method: &Method,
    mut close: bool,
) -> (Framing, bool) {
    let status = head.status;
    out.clear();
    if status == StatusCode::OK {
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
    } else {
        out.extend_from_slice(b"HTTP/1.1 ");
        out.extend_from_slice(status.as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(status.canonical_reason().unwrap_or("<none>").as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    let bodiless_status = status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let mut length = None;
    let mut has_date = false;
    let mut says_close = false;
    // A body of known length is framed by that length, whatever `Content-Length` a header
    // edit left in the head: a wrong one would desync the client's connection. (A HEAD
    // response's says what a GET would get, and passes as it is.)
    let known = body
        .size_hint()
        .exact()
        .filter(|_| !bodiless_status && *method != Method::HEAD);
    for (name, value) in &head.headers {
        if *name == header::CONTENT_LENGTH {
            if bodiless_status || known.is_some() {
                continue;
            }
            length = std::str::from_utf8(value.as_bytes())
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok());
        } else if *name == header::TRANSFER_ENCODING {
            // The framing is this server's to choose (the upstream client consumed the
            // upstream's).
            continue;
        } else if *name == header::CONNECTION {
            says_close |= h1::has_token(value.as_bytes(), b"close");
        } else if *name == header::DATE {
            has_date = true;
        }
        h1::encode_header(out, name.as_str().as_bytes(), value.as_bytes());
    }
    let framing = if bodiless_status || *method == Method::HEAD {
        Framing::Empty
    } else if let Some(len) = known {
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(h1::decimal(len, &mut [0; 20]));
        out.extend_from_slice(b"\r\n");
        Framing::Length(len)
    } else if let Some(len) = length {
        Framing::Length(len)
    } else {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n");
        Framing::Chunked(h1::Chunk::Size)
    };
    if says_close {
        close = true;
    } else if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    if !has_date {
        out.extend_from_slice(b"date: ");
        crate::date::extend(out);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    (framing, close)
}

/// Writes every slice (one `writev` when the socket takes it all).
async fn write_all<W: AsyncWrite + Unpin>(
    io: &mut W,
    slices: &mut [IoSlice<'_>],
) -> io::Result<()> {
    h1::write_all(slices, &mut 0, async |slices: &[IoSlice<'_>]| {
        io.write_vectored(slices).await
    })
    .await
}

/// A connection with bytes already read from it in front: what hyper reads after a handover.
pub(crate) struct Prefixed<I> {
    prefix: Bytes,
    io: I,
}

impl<I> Prefixed<I> {
    pub(crate) fn new(prefix: Bytes, io: I) -> Prefixed<I> {
        Prefixed { prefix, io }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Prefixed<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.prefix.is_empty() {
            return Pin::new(&mut this.io).poll_read(cx, buf);
        }
        let n = this.prefix.len().min(buf.remaining());
        buf.put_slice(&this.prefix.split_to(n));
        Poll::Ready(Ok(()))
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Prefixed<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::response_body::ResponseBody;

    fn parsed(bytes: &[u8]) -> (Parse, BytesMut) {
        let mut buf = BytesMut::from(bytes);
        let parse = parse(&mut buf, 8192);
        (parse, buf)
    }

    #[test]
    fn plain_requests_are_split_off_and_pipelined_ones_stay() {
        let (parse, rest) = parsed(
            b"GET /a?b=1 HTTP/1.1\r\nHost: x\r\nX-Custom: v\r\nContent-Length: 0\r\n\r\nGET /next",
        );
        let Parse::Request(request) = parse else {
            panic!("not parsed")
        };
        assert_eq!(request.head.method, Method::GET);
        assert_eq!(request.head.uri, "/a?b=1");
        assert_eq!(request.head.headers["host"], "x");
        assert_eq!(request.head.headers["x-custom"], "v");
        assert!(request.keep_alive);
        assert_eq!(&rest[..], b"GET /next");
        assert!(matches!(
            parsed(b"GET / HTTP/1.1\r\nHost: x\r\n").0,
            Parse::Partial
        ));
    }

    #[test]
    fn connection_close_is_heard() {
        let (Parse::Request(request), _) =
            parsed(b"GET / HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n")
        else {
            panic!("not parsed")
        };
        assert!(!request.keep_alive);
    }

    #[test]
    fn what_hyper_serves_is_left_whole_in_the_buffer() {
        let others: [&[u8]; 8] = [
            b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            b"PUT / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n",
            b"GET /ws HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
            b"GET / HTTP/1.0\r\n\r\n",
            b"CONNECT x:443 HTTP/1.1\r\n\r\n",
            b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n",
            b"GET /\x7f HTTP/1.1\r\n\r\n",
        ];
        for bytes in others {
            let (parse, buf) = parsed(bytes);
            assert!(
                matches!(parse, Parse::Other),
                "{}",
                String::from_utf8_lossy(bytes)
            );
            assert_eq!(&buf[..], bytes, "the buffer must be untouched");
        }
    }

    #[test]
    fn a_head_over_the_limit_is_refused_here_complete_or_not() {
        // Incomplete and past the limit.
        let mut big = b"GET / HTTP/1.1\r\nX: ".to_vec();
        big.resize(9000, b'a');
        assert!(matches!(parsed(&big).0, Parse::TooLarge));
        // Complete but over it: handed to hyper, whose buffer bound is only checked while a head
        // is incomplete, this was served (the 55-minute soak, 1 in 400 such requests).
        big.extend_from_slice(b"\r\n\r\n");
        let (parse, buf) = parsed(&big);
        assert!(matches!(parse, Parse::TooLarge));
        assert_eq!(&buf[..], &big[..], "nothing is split off a refused head");
        // Exactly at the limit is still served.
        let mut fits = b"GET / HTTP/1.1\r\nX: ".to_vec();
        fits.resize(8192 - 4, b'a');
        fits.extend_from_slice(b"\r\n\r\n");
        assert!(matches!(parsed(&fits).0, Parse::Request(_)));
    }

    /// A connection whose process starts terminating (or whose worker starts stopping) just
    /// after a response went out, before the server looks at the connection again.
    struct StateChangesAfterFirstResponse {
        closing_reads: std::cell::Cell<u32>,
        stops: bool,
    }

    impl crate::h2_server::TunnelCount for StateChangesAfterFirstResponse {
        fn tunnel_opened(&self) {}
        fn tunnel_closed(&self) {}
    }

    impl Pipeline for StateChangesAfterFirstResponse {
        type Body = ResponseBody;

        async fn respond(
            self: Rc<Self>,
            _head: Parts,
            _body: Option<crate::request_body::ClientBody>,
            _upgrade: Option<crate::pipeline::ClientUpgrade>,
        ) -> Response<ResponseBody> {
            Response::new(ResponseBody::full(Bytes::from_static(b"ok")))
        }

        fn count_error(&self, status: u16, _source: crate::error::ErrorSource) {
            panic!("refused a request: {status}");
        }

        fn error_response(&self, error: &ProxyError) -> Response<ResponseBody> {
            panic!("refused a request: {error}");
        }

        fn log_refused(&self, _head: Option<&Parts>, status: u16, _sent: (u64, u64)) {
            panic!("refused a request: {status}");
        }

        fn closing(&self) -> bool {
            let reads = self.closing_reads.get();
            self.closing_reads.set(reads + 1);
            reads > 0
        }

        fn stopping(&self) -> bool {
            self.stops && self.closing_reads.get() > 0
        }

        fn last_active(&self) -> std::time::Instant {
            std::time::Instant::now()
        }
    }

    /// Sends a request and reads its response; `None` when the server closed instead.
    async fn exchange(client: &mut tokio::io::DuplexStream) -> Option<String> {
        use tokio::io::AsyncReadExt;
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .ok()?;
        let mut response = Vec::new();
        let mut chunk = [0u8; 512];
        while !response.ends_with(b"\r\n\r\nok") {
            match client.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => response.extend_from_slice(&chunk[..n]),
            }
        }
        Some(String::from_utf8(response).unwrap())
    }

    /// Two requests on one connection whose state changes (`stops`: a stop, else termination)
    /// right after the first response: the two answers, `None` where the server had closed.
    async fn two_requests_around_a_state_change(stops: bool) -> (String, Option<String>) {
        let conn = Rc::new(StateChangesAfterFirstResponse {
            closing_reads: std::cell::Cell::new(0),
            stops,
        });
        let (mut client, server_io) = tokio::io::duplex(4096);
        let mut server = Http1::new(server_io, 8192, true);
        let client_side = async {
            let first = exchange(&mut client).await.expect("the first response");
            (first, exchange(&mut client).await)
        };
        let (ended, answers) = tokio::join!(server.run(&conn), client_side);
        assert!(matches!(ended, Ended::Closed));
        answers
    }

    #[tokio::test]
    async fn a_keep_alive_response_is_honoured_when_termination_begins_after_it() {
        // The race behind a flaky integration test: the response said keep-alive, then
        // termination began before the server looked at the connection again. Closing there
        // races a next request the client may already have sent; it is served instead, and
        // that one says `Connection: close`.
        let (first, second) = two_requests_around_a_state_change(false).await;
        assert!(!first.contains("connection: close"), "{first}");
        let second = second.expect("served after keep-alive");
        assert!(second.contains("connection: close"), "{second}");
    }

    #[tokio::test]
    async fn a_stop_after_a_keep_alive_response_ends_the_connection() {
        let (first, second) = two_requests_around_a_state_change(true).await;
        assert!(!first.contains("connection: close"), "{first}");
        assert_eq!(second, None, "closed by the stop");
    }

    #[test]
    fn many_headers_are_parsed_in_a_second_pass() {
        let mut head = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..40 {
            head.extend_from_slice(format!("x-h{i}: {i}\r\n").as_bytes());
        }
        head.extend_from_slice(b"\r\n");
        let (Parse::Request(request), _) = parsed(&head) else {
            panic!("not parsed")
        };
        assert_eq!(request.head.headers.len(), 40);
        assert_eq!(request.head.headers["x-h39"], "39");
    }

    #[test]
    fn heads_get_framing_close_and_date() {
        let encode = |status: StatusCode, headers: &[(&str, &str)], body: ResponseBody, method| {
            let mut response = Response::new(());
            *response.status_mut() = status;
            for (name, value) in headers {
                response.headers_mut().append(
                    HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    HeaderValue::from_str(value).unwrap(),
                );
            }
            let (head, ()) = response.into_parts();
            let mut out = Vec::new();
            let (framing, close) = encode_head(&mut out, &head, &body, &method, false);
            (String::from_utf8(out).unwrap(), framing, close)
        };

        let (text, framing, close) = encode(
            StatusCode::OK,
            &[("date", "Fri, 20 Nov 2026 00:00:00 GMT")],
            ResponseBody::full(Bytes::from_static(b"hello")),
            Method::GET,
        );
        assert_eq!(
            text,
            "HTTP/1.1 200 OK\r\ndate: Fri, 20 Nov 2026 00:00:00 GMT\r\ncontent-length: 5\r\n\r\n"
        );
        assert!(matches!(framing, Framing::Length(5)) && !close);

        // A known body's length wins over a header that says otherwise (an edit's).
        let (text, framing, close) = encode(
            StatusCode::NOT_FOUND,
            &[("connection", "close"), ("content-length", "0")],
            ResponseBody::full(Bytes::from_static(b"abc")),
            Method::GET,
        );
        assert!(text.starts_with(
            "HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 3\r\ndate: "
        ));
        assert!(matches!(framing, Framing::Length(3)) && close);

        let (text, framing, _) = encode(
            StatusCode::NO_CONTENT,
            &[("content-length", "0")],
            ResponseBody::empty(),
            Method::GET,
        );
        assert!(!text.contains("content-length") && matches!(framing, Framing::Empty));

        let (text, framing, _) = encode(
            StatusCode::OK,
            &[("content-length", "10")],
            ResponseBody::empty(),
            Method::HEAD,
        );
        assert!(text.contains("content-length: 10\r\n") && matches!(framing, Framing::Empty));
    }
}
