//! Sluice's own HTTP/1.1 client for upstream connections. It runs inside the request's own
//! future: no task per connection, no channels, and it borrows the request head instead of
//! owning it, so a resend costs nothing.
//!
//! ```text
//!  round_trip(head, body)
//!    ─▶ request line + headers written into the connection's reused buffer
//!    ─▶ one writev: head [+ the body, when all of it is already here]
//!    ─▶ rest of the body: Content-Length as is, else chunked; an early response stops it
//!    ─▶ read ─▶ httparse ─▶ 1xx: skipped │ 101: Upgrade (socket goes to the tunnel)
//!    ─▶ Answer: status, end-to-end headers (values are slices of the read buffer), Framing
//!  poll_body(framing) ─▶ Bytes split off the read buffer: length │ chunked │ until close
//! ```
//!
//! The client consumes what describes the connection rather than the message: `Connection`,
//! `Keep-Alive`, `Transfer-Encoding` and the other hop-by-hop headers are read for framing and
//! reuse, and left out of the response (except on a 101, which the tunnel code answers).

use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::request::Parts;
use http::{Method, Response, StatusCode, Version};
use http_body::Body;
use http_body_util::BodyExt;
use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::body::{BoxError, RequestBody};
use crate::headers::{self, Added};
use crate::worker::within;

/// The largest response head accepted: hyper's default buffer limit, which applied before.
const MAX_HEAD: usize = 8192 + 4096 * 100;
/// Header lines parsed on the stack at first; more are parsed again with room for
/// `MAX_HEADERS` (hyper's limit).
const FEW_HEADERS: usize = 32;
const MAX_HEADERS: usize = 100;
/// A read wants at least this much free space; with less, a buffer of `READ_BUFFER` is taken.
const MIN_READ: usize = 4096;
const READ_BUFFER: usize = 16 * 1024;
/// The largest read, for bodies known to be long. Fewer, larger reads mean fewer wake-ups of
/// both ends: 64 KiB gave 0.82× nginx's 1 MB throughput, 256 KiB 1.04×, 1 MiB 1.15× (`sluice lab
/// throughput`, one worker). Bigger is not free: a response to a slow client holds up to this
/// much while it waits, so 256 KiB keeps 10,000 such downloads around 2.5 GiB.
const MAX_READ: usize = 256 * 1024;
/// Chunk-size lines (with extensions) and trailer sections longer than this are refused.
const MAX_CHUNK_LINE: usize = 4096;
const MAX_TRAILERS: usize = 16 * 1024;

/// One connection to an endpoint: the socket, the bytes read and not yet handed out, and the
/// buffer request heads are written into. Idle ones wait in the worker's pool.
pub(crate) struct Conn {
    stream: TcpStream,
    buf: BytesMut,
    out: Vec<u8>,
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

/// How a response body ends.
#[derive(Debug, PartialEq)]
pub(crate) enum Framing {
    /// No (more) body: HEAD, 204, 304, or read to its end.
    Empty,
    /// `Content-Length`: bytes still to come.
    Length(u64),
    Chunked(Chunk),
    /// No length given: the body ends when the upstream closes (never reusable).
    UntilClose,
    /// 101: the connection belongs to a tunnel now.
    Upgrade,
}

/// Where a chunked body is.
#[derive(Debug, PartialEq)]
pub(crate) enum Chunk {
    Size,
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    Trailers,
    Done,
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
    Parse(#[source] httparse::Error),
    #[error("response head larger than {MAX_HEAD} bytes")]
    HeadTooLarge,
    #[error("invalid status code {0}")]
    Status(u16),
    #[error("invalid Content-Length")]
    ContentLength,
    #[error("invalid chunked encoding")]
    Chunked,
    #[error("101 Switching Protocols to a request that asked for no upgrade")]
    UnexpectedUpgrade,
    #[error("the request body failed")]
    Body(#[source] BoxError),
}

/// What the buffered bytes of a body give.
enum Decoded {
    Data(Bytes),
    End,
    NeedMore,
}

/// A parsed response head.
enum Parsed {
    Partial,
    /// A 1xx other than 101, already removed from the buffer.
    Informational,
    Final(Answer),
    /// More header lines than the array held: parse again with a larger one.
    TooManyHeaders,
}

/// What the framing headers of a response say.
#[derive(Default)]
struct Connection {
    content_length: Option<u64>,
    /// `Transfer-Encoding` present; whether `chunked` is its last coding.
    transfer_encoding: Option<bool>,
    close: bool,
    keep_alive: bool,
    /// `Connection` names other headers, which are hop-by-hop too.
    names_others: bool,
}

impl Conn {
    pub(crate) fn new(stream: TcpStream) -> Conn {
        Conn {
            stream,
            buf: BytesMut::new(),
            out: Vec::new(),
        }
    }

    /// Whether an idle connection can carry a request. Nothing may arrive on one while it is
    /// idle, so anything readable (end of stream, a reset, stray bytes) disqualifies it. Free
    /// unless the reactor saw the socket readable since it was last read dry.
    pub(crate) fn is_idle_open(&self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        let mut byte = [0u8; 1];
        matches!(self.stream.try_read(&mut byte), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
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
        added: &Added<'_>,
        body: &mut Outgoing,
        timeouts: Timeouts,
        upgrade: bool,
    ) -> Result<Answer, ClientError> {
        body.written = 0;
        let has_body = !matches!(body.body, RequestBody::Empty);
        // A declared length passes through; without one the body goes chunked.
        let chunked = has_body && !head.headers.contains_key(header::CONTENT_LENGTH);
        if has_body && !body.ended && body.held.is_none() {
            body.poll_ahead().await?;
        }
        encode_head(&mut self.out, head, added, chunked);
        self.send_head(body, chunked, timeouts.send).await?;

        let mut keep_alive = true;
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
                Parsed::Partial | Parsed::TooManyHeaders => {}
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
            if chunked {
                slices[1] = IoSlice::new(chunk_size_line(data.len(), &mut size_line));
            }
            slices[2] = IoSlice::new(data);
        }
        if chunked && body.ended {
            slices[3] = IoSlice::new(if held.is_some() {
                b"\r\n0\r\n\r\n"
            } else {
                b"0\r\n\r\n"
            });
        } else if chunked && held.is_some() {
            slices[3] = IoSlice::new(b"\r\n");
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
        let read = poll_fn(|cx| poll_fill(&self.stream, &mut self.buf, cx, want));
        let result = if limit.is_zero() {
            read.await
        } else {
            let at = *deadline.get_or_insert_with(|| Instant::now() + limit);
            match tokio::time::timeout_at(at, read).await {
                Ok(result) => result,
                Err(_) => return Err(ClientError::ReadTimeout),
            }
        };
        result.map_err(ClientError::Read)
    }

    /// The next piece of a response body, split off the read buffer; reads the socket when
    /// the buffer holds none. `None` at the end of the body.
    pub(crate) fn poll_body(
        &mut self,
        framing: &mut Framing,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, ClientError>> {
        loop {
            match framing.decode(&mut self.buf)? {
                Decoded::Data(data) => return Poll::Ready(Ok(Some(data))),
                Decoded::End => return Poll::Ready(Ok(None)),
                Decoded::NeedMore => {}
            }
            let want = framing.read_hint();
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
    pub(crate) fn into_parts(self) -> (TcpStream, Bytes) {
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

impl Framing {
    fn decode(&mut self, buf: &mut BytesMut) -> Result<Decoded, ClientError> {
        match self {
            Framing::Empty | Framing::Upgrade => Ok(Decoded::End),
            Framing::Length(0) => Ok(Decoded::End),
            Framing::Length(left) => {
                if buf.is_empty() {
                    return Ok(Decoded::NeedMore);
                }
                let take = (*left).min(buf.len() as u64);
                *left -= take;
                Ok(Decoded::Data(buf.split_to(take as usize).freeze()))
            }
            Framing::UntilClose => Ok(if buf.is_empty() {
                Decoded::NeedMore
            } else {
                Decoded::Data(buf.split().freeze())
            }),
            Framing::Chunked(chunk) => {
                if !chunk.advance(buf)? {
                    return Ok(Decoded::NeedMore);
                }
                let Chunk::Data(left) = chunk else {
                    return Ok(Decoded::End);
                };
                let take = (*left).min(buf.len() as u64);
                *left -= take;
                if *left == 0 {
                    *chunk = Chunk::DataEnd;
                }
                Ok(Decoded::Data(buf.split_to(take as usize).freeze()))
            }
        }
    }

    /// How much to read next: long bodies get larger reads.
    fn read_hint(&self) -> usize {
        match self {
            Framing::Length(left) | Framing::Chunked(Chunk::Data(left)) => {
                usize::try_from(*left).map_or(MAX_READ, |n| n.clamp(MIN_READ, MAX_READ))
            }
            _ => READ_BUFFER,
        }
    }

    /// Bytes of body still to come, when known.
    pub(crate) fn remaining(&self) -> Option<u64> {
        match self {
            Framing::Empty | Framing::Upgrade => Some(0),
            Framing::Length(left) => Some(*left),
            Framing::Chunked(_) | Framing::UntilClose => None,
        }
    }
}

impl Chunk {
    /// Consumes framing bytes until data (or the end) is at the front of `buf`: `true` then,
    /// `false` when more bytes are needed first.
    fn advance(&mut self, buf: &mut BytesMut) -> Result<bool, ClientError> {
        loop {
            match self {
                Chunk::Size => match httparse::parse_chunk_size(buf) {
                    Ok(httparse::Status::Complete((used, size))) => {
                        buf.advance(used);
                        *self = if size == 0 {
                            Chunk::Trailers
                        } else {
                            Chunk::Data(size)
                        };
                    }
                    Ok(httparse::Status::Partial) if buf.len() <= MAX_CHUNK_LINE => {
                        return Ok(false)
                    }
                    _ => return Err(ClientError::Chunked),
                },
                Chunk::Data(_) => return Ok(!buf.is_empty()),
                Chunk::DataEnd => {
                    if buf.len() < 2 {
                        return Ok(false);
                    }
                    if &buf[..2] != b"\r\n" {
                        return Err(ClientError::Chunked);
                    }
                    buf.advance(2);
                    *self = Chunk::Size;
                }
                Chunk::Trailers => {
                    // Trailers are dropped: the client's response may be framed otherwise.
                    let end = if buf.starts_with(b"\r\n") {
                        Some(2)
                    } else {
                        find(buf, b"\r\n\r\n").map(|at| at + 4)
                    };
                    match end {
                        Some(end) => {
                            buf.advance(end);
                            *self = Chunk::Done;
                        }
                        None if buf.len() <= MAX_TRAILERS => return Ok(false),
                        None => return Err(ClientError::Chunked),
                    }
                }
                Chunk::Done => return Ok(true),
            }
        }
    }
}

/// Reads what the socket has into `buf`; `Ok(0)` at end of stream.
fn poll_fill(
    stream: &TcpStream,
    buf: &mut BytesMut,
    cx: &mut Context<'_>,
    want: usize,
) -> Poll<io::Result<usize>> {
    let spare = buf.capacity() - buf.len();
    if spare < MIN_READ || (spare < want && want > READ_BUFFER) {
        buf.reserve(want.max(READ_BUFFER));
    }
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
    stream: &TcpStream,
    mut slices: &mut [IoSlice<'_>],
    limit: Duration,
    written: &mut usize,
) -> Result<(), ClientError> {
    IoSlice::advance_slices(&mut slices, 0);
    while !slices.is_empty() {
        match stream.try_write_vectored(slices) {
            Ok(0) => return Err(ClientError::Write(io::ErrorKind::WriteZero.into())),
            Ok(n) => {
                *written += n;
                IoSlice::advance_slices(&mut slices, n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // Boxed: only a full socket waits, and the timer makes the future large.
                match Box::pin(within(limit, stream.writable())).await {
                    Some(Ok(())) => {}
                    Some(Err(e)) => return Err(ClientError::Write(e)),
                    None => return Err(ClientError::SendTimeout),
                }
            }
            Err(e) => return Err(ClientError::Write(e)),
        }
    }
    Ok(())
}

/// Streams the body's remaining frames; trailers are dropped.
async fn send_rest(
    stream: &TcpStream,
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
                if chunked {
                    write_all(
                        stream,
                        &mut [IoSlice::new(b"0\r\n\r\n")],
                        limit,
                        &mut written,
                    )
                    .await?;
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
        if chunked {
            let tail: &[u8] = if end { b"\r\n0\r\n\r\n" } else { b"\r\n" };
            let mut slices = [
                IoSlice::new(chunk_size_line(data.len(), &mut size_line)),
                IoSlice::new(&data),
                IoSlice::new(tail),
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

/// The request line in origin form, the request's headers, the ones the proxy adds, and the
/// blank line, into `out` (cleared first; its allocation lives as long as the connection).
fn encode_head(out: &mut Vec<u8>, head: &Parts, added: &Added<'_>, chunked: bool) {
    out.clear();
    out.extend_from_slice(head.method.as_str().as_bytes());
    out.push(b' ');
    let path = head.uri.path();
    out.extend_from_slice(if path.is_empty() {
        b"/"
    } else {
        path.as_bytes()
    });
    if let Some(query) = head.uri.query() {
        out.push(b'?');
        out.extend_from_slice(query.as_bytes());
    }
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let mut host = None;
    for (name, value) in &head.headers {
        if name == header::HOST {
            host = Some(value);
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    added.write(out, host);
    if chunked {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// `len` in hex followed by CRLF, in `line`.
pub(crate) fn chunk_size_line(len: usize, line: &mut [u8; 18]) -> &[u8] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut start = 16;
    let mut n = len;
    loop {
        start -= 1;
        line[start] = HEX[n & 0xf];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    line[16] = b'\r';
    line[17] = b'\n';
    &line[start..]
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Whether `buf` starts with a complete final response head; complete 1xx heads before it
/// are dropped.
fn has_final_head(buf: &mut BytesMut) -> Result<bool, ClientError> {
    loop {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        match response.parse(buf) {
            Ok(httparse::Status::Complete(len)) => {
                let code = response.code.unwrap_or_default();
                if (100..200).contains(&code) && code != 101 {
                    buf.advance(len);
                    continue;
                }
                return Ok(true);
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => return Ok(false),
            Ok(httparse::Status::Partial) => return Err(ClientError::HeadTooLarge),
            Err(e) => return Err(ClientError::Parse(e)),
        }
    }
}

/// Parses a response head at the front of `buf`. A final one is split off `buf` and its
/// headers go into `spare` (cleared, its allocation reused).
fn parse_head(
    buf: &mut BytesMut,
    spare: &mut HeaderMap,
    is_head: bool,
    upgrade: bool,
) -> Result<Parsed, ClientError> {
    match parse_head_with::<FEW_HEADERS>(buf, spare, is_head, upgrade)? {
        Parsed::TooManyHeaders => parse_head_with::<MAX_HEADERS>(buf, spare, is_head, upgrade),
        parsed => Ok(parsed),
    }
}

fn parse_head_with<const N: usize>(
    buf: &mut BytesMut,
    spare: &mut HeaderMap,
    is_head: bool,
    upgrade: bool,
) -> Result<Parsed, ClientError> {
    if buf.is_empty() {
        return Ok(Parsed::Partial);
    }
    let mut raw = [httparse::EMPTY_HEADER; N];
    let mut response = httparse::Response::new(&mut raw);
    let len = match response.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => return Ok(Parsed::Partial),
        Ok(httparse::Status::Partial) => return Err(ClientError::HeadTooLarge),
        Err(httparse::Error::TooManyHeaders) if N < MAX_HEADERS => {
            return Ok(Parsed::TooManyHeaders)
        }
        Err(e) => return Err(ClientError::Parse(e)),
    };
    let code = response.code.unwrap_or_default();
    let status = StatusCode::from_u16(code).map_err(|_| ClientError::Status(code))?;
    if status.is_informational() && status != StatusCode::SWITCHING_PROTOCOLS {
        buf.advance(len);
        return Ok(Parsed::Informational);
    }
    let version = if response.version == Some(0) {
        Version::HTTP_10
    } else {
        Version::HTTP_11
    };
    // Where each name and value is, so they can become slices of the head once it is split
    // off the buffer.
    let base = buf.as_ptr() as usize;
    let count = response.headers.len();
    let mut spans = [(0usize, 0usize, 0usize, 0usize); N];
    for (span, h) in spans.iter_mut().zip(response.headers.iter()) {
        let name = h.name.as_ptr() as usize - base;
        let value = h.value.as_ptr() as usize - base;
        *span = (name, name + h.name.len(), value, value + h.value.len());
    }
    let spans = &spans[..count];
    let head = buf.split_to(len).freeze();

    let connection = Connection::read(&head, spans)?;
    let switching = status == StatusCode::SWITCHING_PROTOCOLS;
    let mut keep_alive = if version == Version::HTTP_11 {
        !connection.close
    } else {
        connection.keep_alive && !connection.close
    };
    let framing = if switching {
        if !upgrade {
            return Err(ClientError::UnexpectedUpgrade);
        }
        keep_alive = false;
        Framing::Upgrade
    } else if is_head || status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED {
        Framing::Empty
    } else if let Some(chunked) = connection.transfer_encoding {
        // Both lengths given is a smuggling pattern: the encoding wins, the connection ends.
        keep_alive &= connection.content_length.is_none();
        if chunked {
            Framing::Chunked(Chunk::Size)
        } else {
            keep_alive = false;
            Framing::UntilClose
        }
    } else if let Some(len) = connection.content_length {
        Framing::Length(len)
    } else {
        keep_alive = false;
        Framing::UntilClose
    };

    let mut headers = std::mem::take(spare);
    headers.clear();
    headers.reserve(count);
    let mut connection_values = Vec::new();
    for &(name_start, name_end, value_start, value_end) in spans {
        // httparse checked names and values with the same rules `http` applies.
        let Ok(name) = HeaderName::from_bytes(&head[name_start..name_end]) else {
            continue;
        };
        if !switching && headers::is_hop_by_hop(&name) {
            if connection.names_others && name == header::CONNECTION {
                connection_values.push(head.slice(value_start..value_end));
            }
            continue;
        }
        if name == header::CONTENT_LENGTH && connection.transfer_encoding.is_some() {
            continue;
        }
        if let Ok(value) = HeaderValue::from_maybe_shared(head.slice(value_start..value_end)) {
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

impl Connection {
    /// Reads the headers that decide framing and reuse, by their raw names.
    fn read(
        head: &[u8],
        spans: &[(usize, usize, usize, usize)],
    ) -> Result<Connection, ClientError> {
        let mut c = Connection::default();
        for &(name_start, name_end, value_start, value_end) in spans {
            let name = &head[name_start..name_end];
            let value = &head[value_start..value_end];
            if name.eq_ignore_ascii_case(b"content-length") {
                for part in value.split(|b| *b == b',') {
                    let len = parse_length(part.trim_ascii()).ok_or(ClientError::ContentLength)?;
                    if c.content_length.is_some_and(|known| known != len) {
                        return Err(ClientError::ContentLength);
                    }
                    c.content_length = Some(len);
                }
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                let last = value
                    .rsplit(|b| *b == b',')
                    .map(<[u8]>::trim_ascii)
                    .find(|t| !t.is_empty());
                c.transfer_encoding =
                    Some(last.is_some_and(|t| t.eq_ignore_ascii_case(b"chunked")));
            } else if name.eq_ignore_ascii_case(b"connection") {
                for token in value.split(|b| *b == b',').map(<[u8]>::trim_ascii) {
                    if token.eq_ignore_ascii_case(b"close") {
                        c.close = true;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        c.keep_alive = true;
                    } else if !token.is_empty() && !token.eq_ignore_ascii_case(b"upgrade") {
                        c.names_others = true;
                    }
                }
            }
        }
        Ok(c)
    }
}

fn parse_length(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    digits.iter().try_fold(0u64, |n, d| {
        d.is_ascii_digit().then(|| n * 10 + u64::from(d - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8], is_head: bool) -> (Answer, BytesMut) {
        let mut buf = BytesMut::from(bytes);
        let mut spare = HeaderMap::new();
        loop {
            match parse_head(&mut buf, &mut spare, is_head, false).unwrap() {
                Parsed::Final(answer) => return (answer, buf),
                Parsed::Informational => continue,
                Parsed::Partial | Parsed::TooManyHeaders => panic!("incomplete head"),
            }
        }
    }

    /// Every body frame the buffered bytes give, and whether the body ended.
    fn drain(framing: &mut Framing, buf: &mut BytesMut) -> (Vec<u8>, bool) {
        let mut body = Vec::new();
        loop {
            match framing.decode(buf).unwrap() {
                Decoded::Data(data) => body.extend_from_slice(&data),
                Decoded::End => return (body, true),
                Decoded::NeedMore => return (body, false),
            }
        }
    }

    #[test]
    fn content_length_bodies_are_split_off_the_head() {
        let (mut answer, mut buf) = parse(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Id: 7\r\n\r\nhello",
            false,
        );
        assert_eq!(answer.response.status(), StatusCode::OK);
        assert_eq!(answer.response.headers()["x-id"], "7");
        assert_eq!(answer.response.headers()["content-length"], "5");
        assert!(answer.keep_alive);
        assert_eq!(answer.framing, Framing::Length(5));
        assert_eq!(
            drain(&mut answer.framing, &mut buf),
            (b"hello".to_vec(), true)
        );
    }

    #[test]
    fn chunked_bodies_are_decoded_and_trailers_dropped() {
        let (mut answer, _) = parse(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            false,
        );
        assert_eq!(answer.framing, Framing::Chunked(Chunk::Size));
        assert!(!answer.response.headers().contains_key("transfer-encoding"));
        let wire = b"5;ext=1\r\nhello\r\n1\r\n \r\n6\r\nworld!\r\n0\r\nX-Trailer: 1\r\n\r\n";
        // Byte by byte: every state must cope with a split anywhere.
        let mut buf = BytesMut::new();
        let mut body = Vec::new();
        let mut ended = false;
        for byte in wire {
            buf.extend_from_slice(&[*byte]);
            let (data, end) = drain(&mut answer.framing, &mut buf);
            body.extend_from_slice(&data);
            ended = end;
        }
        assert_eq!(body, b"hello world!");
        assert!(ended);
        assert!(buf.is_empty());

        let mut framing = Framing::Chunked(Chunk::Size);
        let mut buf = BytesMut::from(&b"zz\r\n"[..]);
        assert!(framing.decode(&mut buf).is_err());
    }

    #[test]
    fn without_a_length_the_body_runs_until_close() {
        let (answer, buf) = parse(b"HTTP/1.0 200 OK\r\nServer: old\r\n\r\nsome", false);
        assert_eq!(answer.framing, Framing::UntilClose);
        assert!(!answer.keep_alive);
        assert_eq!(answer.response.version(), Version::HTTP_11);
        assert_eq!(&buf[..], b"some");
    }

    #[test]
    fn head_204_and_304_have_no_body() {
        let (answer, _) = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 1024\r\n\r\n", true);
        assert_eq!(answer.framing, Framing::Empty);
        assert_eq!(answer.response.headers()["content-length"], "1024");
        for status in [204, 304] {
            let head = format!("HTTP/1.1 {status} X\r\n\r\n");
            let (answer, _) = parse(head.as_bytes(), false);
            assert_eq!(answer.framing, Framing::Empty);
            assert!(answer.keep_alive);
        }
    }

    #[test]
    fn connection_headers_decide_reuse_and_are_consumed() {
        let (answer, _) = parse(
            b"HTTP/1.1 200 OK\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nContent-Length: 0\r\n\r\n",
            false,
        );
        assert!(!answer.keep_alive);
        for gone in ["connection", "x-hop", "keep-alive"] {
            assert!(!answer.response.headers().contains_key(gone), "{gone}");
        }
        let (answer, _) = parse(
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
            false,
        );
        assert!(answer.keep_alive);
        let (answer, _) = parse(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false);
        assert!(!answer.keep_alive);
    }

    #[test]
    fn informational_responses_are_skipped() {
        let (answer, buf) = parse(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
            false,
        );
        assert_eq!(answer.response.status(), StatusCode::CREATED);
        assert!(!answer.response.headers().contains_key("link"));
        assert_eq!(&buf[..], b"ok");
    }

    #[test]
    fn conflicting_lengths_and_many_headers() {
        let mut buf = BytesMut::from(
            &b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"[..],
        );
        let parsed = parse_head(&mut buf, &mut HeaderMap::new(), false, false);
        assert!(matches!(parsed, Err(ClientError::ContentLength)));

        let mut head = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n".to_vec();
        for i in 0..60 {
            head.extend_from_slice(format!("X-{i}: {i}\r\n").as_bytes());
        }
        head.extend_from_slice(b"\r\n");
        let (answer, _) = parse(&head, false);
        assert_eq!(answer.response.headers().len(), 61);
    }

    #[test]
    fn request_heads_are_origin_form_with_the_prepared_headers() {
        let (mut head, ()) = http::Request::post("/a?b=c")
            .header("host", "example.com")
            .header("x-one", "1")
            .body(())
            .unwrap()
            .into_parts();
        let ip = HeaderValue::from_static("192.0.2.1");
        let port = HeaderValue::from_static("80");
        let forwarded = headers::Forwarded {
            client_ip: &ip,
            port: &port,
            https: false,
            trust_incoming: false,
            underscores: false,
        };
        let added = headers::prepare_request(&mut head, &forwarded, false);
        let mut out = Vec::new();
        encode_head(&mut out, &head, &added, true);
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(
            text.starts_with("POST /a?b=c HTTP/1.1\r\nhost: example.com\r\nx-one: 1\r\nx-forwarded-for: 192.0.2.1\r\n"),
            "{text}"
        );
        assert!(
            text.contains("\r\nx-forwarded-host: example.com\r\n"),
            "{text}"
        );
        assert!(
            text.ends_with("\r\ntransfer-encoding: chunked\r\n\r\n"),
            "{text}"
        );
        head.uri = http::Uri::from_static("*");
        head.method = Method::OPTIONS;
        head.headers.clear();
        let added = headers::prepare_request(&mut head, &forwarded, false);
        encode_head(&mut out, &head, &added, false);
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("OPTIONS * HTTP/1.1\r\nx-forwarded-for: "),
            "{text}"
        );
        let mut line = [0u8; 18];
        assert_eq!(chunk_size_line(0x1a2b, &mut line), b"1a2b\r\n");
        assert_eq!(chunk_size_line(0, &mut line), b"0\r\n");
    }
}
