//! The HTTP/1.1 codec: head parsing, message framing, chunked coding and their limits, one
//! module for proxy's inline server (`proxy::server`, the client side) and its upstream
//! client (`proxy::client`). No I/O here except `write_all`, which is handed the write to
//! make; everything else is a function of bytes.
//!
//! ```text
//!  read buffer ─▶ parse_request │ parse_response: httparse with FEW_HEADERS slots on the
//!                 stack; a second pass with MAX_HEADERS only when a head has more. The caller's
//!                 closure gets the head's length and where each name and value lies (HeaderAt),
//!                 and may split the head off the buffer and slice it: no copy of a value.
//!             ─▶ FramingHeaders::read: Content-Length, Transfer-Encoding, Connection, Expect,
//!                 Upgrade, one pass over the names
//!             ─▶ request_framing (edge rules: refuse what nginx refuses)
//!                │ response_framing (upstream rules: ambiguity is the upstream's error)
//!             ─▶ Framing ─decode─▶ body bytes split off the read buffer:
//!                 Length │ Chunked (size lines, extensions, trailers checked and dropped)
//!                 │ UntilClose │ Empty
//!  encoders: chunk_size_line, chunk_tail; decimal; write_all (one writev when the socket
//!  takes it all)
//! ```
//!
//! What is refused, and why, is listed at [`FramingError`] and [`ChunkError`]. Anything this
//! codec accepts is accepted by hyper with the same meaning: `proxy::fuzz` checks that for
//! request heads, response heads and chunked bodies (through the server and client that use
//! this codec), as fuzz targets and as property tests.

mod chunked;
mod head;

use std::io::{self, IoSlice};

pub use chunked::{chunk_size_line, chunk_tail, Chunk, ChunkError};
pub use head::{
    parse_request, parse_response, FramingError, FramingHeaders, HeadError, RequestHead,
    ResponseHead, Status,
};

use bytes::{Bytes, BytesMut};

/// Header lines parsed on the stack at first. Almost every head has fewer; a head with more
/// is parsed a second time with room for `MAX_HEADERS`, so the common head pays for 32 slots.
pub const FEW_HEADERS: usize = 32;
/// The most header lines a head may have: hyper's limit, so that the inline server and hyper
/// (which serves the same connections after a handover) refuse the same heads.
pub const MAX_HEADERS: usize = 100;
/// The largest response head accepted from an upstream: hyper's default read buffer limit,
/// which applied when hyper was the upstream client. Request heads are limited by the
/// `large-client-header-buffers` setting instead.
pub const MAX_RESPONSE_HEAD: usize = 8192 + 4096 * 100;
/// The longest chunk-size line, extensions included (hyper allows 16 KiB of extensions per
/// body; nobody needs more than a few bytes): a peer cannot make the codec buffer an endless
/// line.
pub const MAX_CHUNK_LINE: usize = 4096;
/// The largest trailer section. Trailers are dropped, but have to be read to find the end of
/// the body: this bounds what that costs.
pub const MAX_TRAILERS: usize = 16 * 1024;

/// How a message body is delimited on the wire (RFC 9112 §6.3), and for one being read, how
/// much of it is left.
#[derive(Debug, PartialEq)]
pub enum Framing {
    /// No (more) body: HEAD, 204, 304, a request without length, or read to its end.
    Empty,
    /// `Content-Length`: bytes still to come.
    Length(u64),
    Chunked(Chunk),
    /// No length given on a response: the body ends when the connection does (so the
    /// connection is never reused).
    UntilClose,
    /// 101: the connection belongs to a tunnel now.
    Upgrade,
}

/// What the buffered bytes of a body give.
#[derive(Debug)]
pub enum Decoded {
    Data(Bytes),
    End,
    NeedMore,
}

impl Framing {
    /// The next piece of body at the front of `buf`, split off it (framing bytes consumed).
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Decoded, ChunkError> {
        match self {
            Framing::Empty | Framing::Upgrade | Framing::Length(0) => Ok(Decoded::End),
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
            Framing::Chunked(chunk) => chunk.decode(buf),
        }
    }

    /// Bytes of body still to come, when known.
    pub fn remaining(&self) -> Option<u64> {
        match self {
            Framing::Empty | Framing::Upgrade => Some(0),
            Framing::Length(left) => Some(*left),
            Framing::Chunked(_) | Framing::UntilClose => None,
        }
    }
}

/// Writes every slice through `write`, which makes one (vectored) write and says how many
/// bytes went out: one `writev` when the socket takes it all. `written` counts the bytes that
/// went out, also when it fails.
pub async fn write_all<E: From<io::Error>>(
    mut slices: &mut [IoSlice<'_>],
    written: &mut usize,
    mut write: impl AsyncFnMut(&[IoSlice<'_>]) -> Result<usize, E>,
) -> Result<(), E> {
    IoSlice::advance_slices(&mut slices, 0);
    while !slices.is_empty() {
        match write(slices).await? {
            0 => return Err(io::Error::from(io::ErrorKind::WriteZero).into()),
            n => {
                *written += n;
                IoSlice::advance_slices(&mut slices, n);
            }
        }
    }
    Ok(())
}

/// `n` in decimal, in `digits`.
pub fn decimal(mut n: u64, digits: &mut [u8; 20]) -> &[u8] {
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &digits[start..];
        }
    }
}

/// Whether a comma-separated header value lists `token` (case-insensitive).
pub fn has_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|item| item.trim_ascii().eq_ignore_ascii_case(token))
}

/// One header line, `name: value`, appended to a head being encoded.
pub fn encode_header(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_and_tokens() {
        assert_eq!(decimal(0, &mut [0; 20]), b"0");
        assert_eq!(decimal(1234567, &mut [0; 20]), b"1234567");
        assert_eq!(decimal(u64::MAX, &mut [0; 20]), b"18446744073709551615");
        assert!(has_token(b"keep-alive, Close", b"close"));
        assert!(!has_token(b"closed", b"close"));
    }

    #[test]
    fn lengths_and_until_close_are_split_off_the_buffer() {
        let mut buf = BytesMut::from(&b"helloworld"[..]);
        let mut framing = Framing::Length(5);
        assert!(matches!(framing.decode(&mut buf), Ok(Decoded::Data(d)) if d == "hello"));
        assert!(matches!(framing.decode(&mut buf), Ok(Decoded::End)));
        assert_eq!(&buf[..], b"world");
        let mut framing = Framing::UntilClose;
        assert!(matches!(framing.decode(&mut buf), Ok(Decoded::Data(d)) if d == "world"));
        assert!(matches!(framing.decode(&mut buf), Ok(Decoded::NeedMore)));
    }
}
