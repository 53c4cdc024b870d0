//! A raw HTTP/2 client for hostile-client tests: it writes any frame byte for byte (including
//! the ones a well-behaved client never sends) and reads the server's frames back.
//!
//! ```text
//!  test ─write_frame / request / data / rst─▶ TCP ─▶ proxy
//!  test ◀─next_frame / expect_goaway / read_until_response── channel ◀─ reader task ◀─ TCP
//! ```
//!
//! The reader runs in its own task from the start, so frames the server sent before it reset
//! the connection are kept even when the test was still writing (a close with unread bytes
//! makes the kernel send RST, after which a late read could lose them). Header blocks are
//! HPACK literals without indexing and without Huffman coding; no HPACK decoder: only a
//! response's `:status` is read (static-table index or a literal with static name 8).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::{bounded, STEP};

pub(crate) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// Frame types (RFC 9113 6).
pub(crate) const DATA: u8 = 0x0;
pub(crate) const HEADERS: u8 = 0x1;
pub(crate) const RST_STREAM: u8 = 0x3;
pub(crate) const SETTINGS: u8 = 0x4;
pub(crate) const PING: u8 = 0x6;
pub(crate) const GOAWAY: u8 = 0x7;
pub(crate) const WINDOW_UPDATE: u8 = 0x8;
pub(crate) const CONTINUATION: u8 = 0x9;

// Flags.
pub(crate) const END_STREAM: u8 = 0x1;
pub(crate) const ACK: u8 = 0x1;
pub(crate) const END_HEADERS: u8 = 0x4;
pub(crate) const PADDED: u8 = 0x8;
pub(crate) const PRIORITY: u8 = 0x20;

// Error codes (RFC 9113 7).
pub(crate) const NO_ERROR: u32 = 0x0;
pub(crate) const PROTOCOL_ERROR: u32 = 0x1;
pub(crate) const FLOW_CONTROL_ERROR: u32 = 0x3;
pub(crate) const REFUSED_STREAM: u32 = 0x7;
pub(crate) const CANCEL: u32 = 0x8;
pub(crate) const ENHANCE_YOUR_CALM: u32 = 0xb;

/// The largest frame payload a peer accepts before SETTINGS say otherwise.
pub(crate) const DEFAULT_MAX_FRAME: usize = 16 * 1024;

/// One frame as it came off the wire.
#[derive(Debug, Clone)]
pub(crate) struct Frame {
    pub(crate) kind: u8,
    pub(crate) flags: u8,
    pub(crate) stream: u32,
    pub(crate) payload: Vec<u8>,
}

/// What the reader task saw.
#[derive(Debug)]
pub(crate) enum Event {
    Frame(Frame),
    /// The server closed the connection (EOF) or it was reset.
    Closed,
}

/// How a stream ended, as [`RawH2::read_until_response`] saw it.
#[derive(Debug, PartialEq)]
pub(crate) enum Outcome {
    /// A final response: its status (`None` when the block names it in a form not decoded
    /// here) and its body (DATA payloads up to END_STREAM).
    Response {
        status: Option<u16>,
        body: Vec<u8>,
    },
    Reset(u32),
    GoAway {
        last_stream: u32,
        code: u32,
    },
    Closed,
}

/// A client connection that has sent the preface and SETTINGS and acknowledged the server's.
pub(crate) struct RawH2 {
    writer: OwnedWriteHalf,
    events: mpsc::UnboundedReceiver<Event>,
    /// Frames of other streams read while waiting for one stream's response, kept for theirs.
    stash: VecDeque<Frame>,
    /// The connection has ended (an `Event::Closed` was taken).
    pub(crate) closed: bool,
}

impl Frame {
    /// A HEADERS frame's header block fragment: padding and priority fields removed.
    pub(crate) fn block(&self) -> &[u8] {
        let mut payload = &self.payload[..];
        let mut pad = 0;
        if self.flags & PADDED != 0 {
            pad = usize::from(payload[0]);
            payload = &payload[1..];
        }
        if self.kind == HEADERS && self.flags & PRIORITY != 0 {
            payload = &payload[5..];
        }
        &payload[..payload.len() - pad]
    }

    /// A 32-bit big-endian field at `at` of the payload (error codes, stream ids).
    pub(crate) fn u32_at(&self, at: usize) -> u32 {
        u32::from_be_bytes(self.payload[at..at + 4].try_into().unwrap())
    }
}

/// The bytes of one frame: 9-byte head (RFC 9113 4.1) and payload.
pub(crate) fn frame_bytes(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap();
    assert!(len < 1 << 24, "a frame payload is at most 2^24-1 bytes");
    let mut out = Vec::with_capacity(9 + payload.len());
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// An HPACK integer with an `prefix`-bit prefix (RFC 7541 5.1); `first` holds the bits above
/// the prefix.
pub(crate) fn hpack_int(first: u8, prefix: u32, value: usize, out: &mut Vec<u8>) {
    let max = (1usize << prefix) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    let mut rest = value - max;
    while rest >= 128 {
        out.push((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    out.push(rest as u8);
}

/// A header block of literals without indexing, new names, no Huffman (RFC 7541 6.2.2):
/// 0x00, name length, name, value length, value.
pub(crate) fn header_block(headers: &[(&str, &str)]) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in headers {
        literal(name.as_bytes(), value.as_bytes(), &mut block);
    }
    block
}

/// One literal header field without indexing, appended to `block`.
pub(crate) fn literal(name: &[u8], value: &[u8], block: &mut Vec<u8>) {
    literal_field(0x00, name, value, block);
}

/// One literal header field with incremental indexing, new name (RFC 7541 6.2.1): the
/// decoder enters it into its dynamic table, where later blocks may refer to it by index.
pub(crate) fn literal_indexed(name: &[u8], value: &[u8], block: &mut Vec<u8>) {
    literal_field(0x40, name, value, block);
}

/// A literal field with a new name: `first` says how it is indexed.
fn literal_field(first: u8, name: &[u8], value: &[u8], block: &mut Vec<u8>) {
    block.push(first);
    hpack_int(0, 7, name.len(), block);
    block.extend_from_slice(name);
    hpack_int(0, 7, value.len(), block);
    block.extend_from_slice(value);
}

/// An indexed header field (RFC 7541 6.1): one byte for indices below 127. The newest entry
/// of the dynamic table is index 62 (after the static table's 61).
pub(crate) fn indexed(index: u8, block: &mut Vec<u8>) {
    assert!(index < 127);
    block.push(0x80 | index);
}

/// A request's header block: the pseudo-headers for `method` `path` on `h2.example` over
/// http, then `extra`.
pub(crate) fn request_block(method: &str, path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut headers = vec![
        (":method", method),
        (":scheme", "http"),
        (":authority", "h2.example"),
        (":path", path),
    ];
    headers.extend_from_slice(extra);
    header_block(&headers)
}

/// The `:status` a response header block starts with, where it is an indexed static entry
/// (8..=14) or a literal with the static name `:status` (index 8), plain or Huffman-coded
/// digits. `None` for any other form (a dynamic-table reference).
pub(crate) fn status_of(block: &[u8]) -> Option<u16> {
    const STATIC: [u16; 7] = [200, 204, 206, 304, 400, 404, 500];
    let first = *block.first()?;
    if first & 0x80 != 0 {
        let index = usize::from(first & 0x7f);
        return STATIC.get(index.checked_sub(8)?).copied();
    }
    // Literal with incremental indexing (01xxxxxx), without indexing (0000xxxx) or never
    // indexed (0001xxxx), name index 8.
    let literal = first == 0x48 || first == 0x08 || first == 0x18;
    if !literal {
        return None;
    }
    let head = *block.get(1)?;
    let len = usize::from(head & 0x7f);
    let value = block.get(2..2 + len)?;
    let text = if head & 0x80 != 0 {
        huffman_digits(value)?
    } else {
        String::from_utf8(value.to_vec()).ok()?
    };
    text.parse().ok()
}

/// Decodes a Huffman-coded string of decimal digits (RFC 7541 Appendix B: '0'-'2' are 5-bit
/// codes 0-2, '3'-'9' are 6-bit codes 0x19-0x1f); `None` for any other symbol.
fn huffman_digits(bytes: &[u8]) -> Option<String> {
    let bits: Vec<bool> = bytes
        .iter()
        .flat_map(|b| (0..8).rev().map(move |i| b >> i & 1 == 1))
        .collect();
    let mut out = String::new();
    let mut at = 0;
    while at < bits.len() {
        let rest = &bits[at..];
        // What is left is padding: the high bits of EOS, all ones, shorter than a byte.
        if rest.len() < 8 && rest.iter().all(|b| *b) {
            break;
        }
        let code = |n: usize| {
            rest.get(..n)
                .map(|bits| bits.iter().fold(0u8, |acc, b| acc << 1 | u8::from(*b)))
        };
        match code(5)? {
            five @ 0..=2 => {
                out.push(char::from(b'0' + five));
                at += 5;
            }
            _ => match code(6)? {
                six @ 0x19..=0x1f => {
                    out.push(char::from(b'3' + six - 0x19));
                    at += 6;
                }
                _ => return None,
            },
        }
    }
    Some(out)
}

/// Connects and writes only the preface and an empty SETTINGS frame; nothing is ever read
/// from the returned stream (the flood tests' client).
pub(crate) async fn connect_silent(addr: SocketAddr) -> TcpStream {
    let mut stream = bounded(TcpStream::connect(addr)).await.expect("connect");
    let mut hello = PREFACE.to_vec();
    hello.extend(frame_bytes(SETTINGS, 0, 0, &[]));
    stream.write_all(&hello).await.expect("preface written");
    stream
}

impl RawH2 {
    /// Connects, writes the preface and an empty SETTINGS frame, and acknowledges the
    /// server's SETTINGS once they arrive.
    pub(crate) async fn connect(addr: SocketAddr) -> RawH2 {
        let mut raw = RawH2::connect_unacknowledged(addr).await;
        loop {
            match raw.next_frame(STEP).await {
                // `next_frame` acknowledged it.
                Some(frame) if frame.kind == SETTINGS && frame.flags & ACK == 0 => break,
                Some(_) => {}
                None => panic!("the server sent no SETTINGS"),
            }
        }
        raw
    }

    /// Connects and writes the preface and an empty SETTINGS frame, and returns at once with
    /// the reader task running.
    async fn connect_unacknowledged(addr: SocketAddr) -> RawH2 {
        let stream = connect_silent(addr).await;
        let (mut reader, writer) = stream.into_split();
        let (tx, events) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut head = [0u8; 9];
            loop {
                let read = async {
                    reader.read_exact(&mut head).await?;
                    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
                    let mut payload = vec![0u8; len];
                    reader.read_exact(&mut payload).await?;
                    Ok::<_, std::io::Error>(Frame {
                        kind: head[3],
                        flags: head[4],
                        stream: u32::from_be_bytes(head[5..9].try_into().unwrap()) & 0x7fff_ffff,
                        payload,
                    })
                };
                let event = match read.await {
                    Ok(frame) => Event::Frame(frame),
                    Err(_) => Event::Closed,
                };
                let end = matches!(event, Event::Closed);
                if tx.send(event).is_err() || end {
                    return;
                }
            }
        });
        RawH2 {
            writer,
            events,
            stash: VecDeque::new(),
            closed: false,
        }
    }

    /// Writes bytes as they are. An error means the server has closed the connection.
    pub(crate) async fn write_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        bounded(self.writer.write_all(bytes)).await
    }

    pub(crate) async fn write_frame(
        &mut self,
        kind: u8,
        flags: u8,
        stream: u32,
        payload: &[u8],
    ) -> std::io::Result<()> {
        self.write_raw(&frame_bytes(kind, flags, stream, payload))
            .await
    }

    /// A request's HEADERS (one frame, END_HEADERS), with END_STREAM when `end_stream`.
    pub(crate) async fn request(
        &mut self,
        stream: u32,
        method: &str,
        path: &str,
        extra: &[(&str, &str)],
        end_stream: bool,
    ) -> std::io::Result<()> {
        let flags = END_HEADERS | if end_stream { END_STREAM } else { 0 };
        let block = request_block(method, path, extra);
        self.write_frame(HEADERS, flags, stream, &block).await
    }

    /// A header block too large for one frame: HEADERS, then CONTINUATIONs, the last with
    /// END_HEADERS; all in one write.
    pub(crate) async fn headers_split(
        &mut self,
        stream: u32,
        block: &[u8],
        end_stream: bool,
    ) -> std::io::Result<()> {
        let mut bytes = Vec::new();
        let chunks: Vec<&[u8]> = block.chunks(DEFAULT_MAX_FRAME).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            let kind = if i == 0 { HEADERS } else { CONTINUATION };
            let mut flags = if i + 1 == chunks.len() {
                END_HEADERS
            } else {
                0
            };
            if i == 0 && end_stream {
                flags |= END_STREAM;
            }
            bytes.extend(frame_bytes(kind, flags, stream, chunk));
        }
        self.write_raw(&bytes).await
    }

    pub(crate) async fn data(
        &mut self,
        stream: u32,
        bytes: &[u8],
        end_stream: bool,
    ) -> std::io::Result<()> {
        let flags = if end_stream { END_STREAM } else { 0 };
        self.write_frame(DATA, flags, stream, bytes).await
    }

    pub(crate) async fn rst(&mut self, stream: u32, code: u32) -> std::io::Result<()> {
        self.write_frame(RST_STREAM, 0, stream, &code.to_be_bytes())
            .await
    }

    /// Frames of `stream` read while waiting for other streams, taken.
    pub(crate) fn take_stashed(&mut self, stream: u32) -> Vec<Frame> {
        let (taken, kept): (VecDeque<Frame>, VecDeque<Frame>) = std::mem::take(&mut self.stash)
            .into_iter()
            .partition(|f| f.stream == stream);
        self.stash = kept;
        taken.into()
    }

    /// The next frame within `wait`; `None` when the connection ended or nothing came.
    /// The server's SETTINGS are acknowledged as they are read.
    pub(crate) async fn next_frame(&mut self, wait: Duration) -> Option<Frame> {
        if self.closed {
            return None;
        }
        match tokio::time::timeout(wait, self.events.recv()).await {
            Ok(Some(Event::Frame(frame))) => {
                if frame.kind == SETTINGS && frame.flags & ACK == 0 {
                    let _ = self.write_frame(SETTINGS, ACK, 0, &[]).await;
                }
                Some(frame)
            }
            Ok(Some(Event::Closed) | None) => {
                self.closed = true;
                None
            }
            Err(_) => None,
        }
    }

    /// Reads until a GOAWAY (within [`STEP`]) and returns its last stream id and error code;
    /// panics when the connection ends or stays silent without one.
    pub(crate) async fn expect_goaway(&mut self) -> (u32, u32) {
        let deadline = tokio::time::Instant::now() + STEP;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next_frame(left).await {
                Some(frame) if frame.kind == GOAWAY => {
                    return (frame.u32_at(0) & 0x7fff_ffff, frame.u32_at(4));
                }
                Some(_) => {}
                None if self.closed => panic!("the connection closed without a GOAWAY"),
                None => panic!("no GOAWAY within {STEP:?}"),
            }
        }
    }

    /// Reads (discarding frames) until the connection ends, for at most `wait`: whether it
    /// ended.
    pub(crate) async fn closed_within(&mut self, wait: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + wait;
        while !self.closed {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            let _ = self.next_frame(left).await;
        }
        true
    }

    /// Reads until `stream` ends (a final response with its body, a reset, a GOAWAY or the
    /// connection's end), for at most [`STEP`]; panics when none of these comes. Frames of
    /// other streams are kept for their own call; interim (1xx) responses are skipped.
    pub(crate) async fn read_until_response(&mut self, stream: u32) -> Outcome {
        let deadline = tokio::time::Instant::now() + STEP;
        let mut status = None;
        let mut answered = false;
        let mut body = Vec::new();
        let mut stashed: VecDeque<Frame> = self
            .stash
            .iter()
            .filter(|f| f.stream == stream)
            .cloned()
            .collect();
        self.stash.retain(|f| f.stream != stream);
        loop {
            let frame = match stashed.pop_front() {
                Some(frame) => frame,
                None => {
                    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                    let Some(frame) = self.next_frame(left).await else {
                        assert!(self.closed, "stream {stream} saw no end within {STEP:?}");
                        return Outcome::Closed;
                    };
                    frame
                }
            };
            if frame.kind == GOAWAY {
                return Outcome::GoAway {
                    last_stream: frame.u32_at(0) & 0x7fff_ffff,
                    code: frame.u32_at(4),
                };
            }
            if frame.stream != stream {
                if frame.stream != 0 {
                    self.stash.push_back(frame);
                }
                continue;
            }
            match frame.kind {
                RST_STREAM => return Outcome::Reset(frame.u32_at(0)),
                HEADERS if !answered => {
                    status = status_of(frame.block());
                    if status.is_some_and(|s| (100..200).contains(&s)) {
                        continue;
                    }
                    answered = true;
                }
                DATA => {
                    let mut payload = &frame.payload[..];
                    if frame.flags & PADDED != 0 {
                        let pad = usize::from(payload[0]);
                        payload = &payload[1..payload.len() - pad];
                    }
                    body.extend_from_slice(payload);
                }
                _ => {}
            }
            if answered && frame.flags & END_STREAM != 0 && matches!(frame.kind, HEADERS | DATA) {
                return Outcome::Response { status, body };
            }
        }
    }
}
