//! HTTP/1.1 on the wire: one request encoded once per run, and a response reader that only frames.
//!
//! A load generator sends the same bytes millions of times and needs nothing from a response but its
//! status, its length and whether the connection may be reused, so this is a few hundred lines
//! around `httparse` instead of a general client: no per-request allocation, and every failure is
//! attributable to either the write or the read side, which is what the error classes need.

use std::io;

use bytes::{Buf, Bytes, BytesMut};
use http::header::{HeaderName, HeaderValue};
use http::Method;
use tokio::io::{AsyncRead, AsyncReadExt};

/// A response head larger than this is treated as garbage rather than buffered forever.
const MAX_HEAD_BYTES: usize = 64 * 1024;
const MAX_HEADERS: usize = 100;
const READ_CHUNK: usize = 16 * 1024;

/// How the body of a response is delimited (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BodyLength {
    Empty,
    Length(u64),
    Chunked,
    UntilClose,
}

/// The parts of a response head the generator acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) status: u16,
    pub(crate) body: BodyLength,
    /// The connection must not be reused after this response.
    pub(crate) close: bool,
    /// Bytes the head took, including the blank line.
    pub(crate) len: usize,
}

/// A complete response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) close: bool,
    /// Bytes read from the connection for this response (head and body as sent).
    pub(crate) bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ResponseError {
    #[error("connection closed before the response was complete")]
    Eof,
    #[error("invalid response: {0}")]
    Invalid(&'static str),
    // The inner errors are part of the message: these end up as one-line error examples.
    #[error("invalid response head: {0}")]
    Parse(httparse::Error),
    #[error("reading the response: {0}")]
    Io(io::Error),
}

/// Decodes `Transfer-Encoding: chunked` framing, discarding the data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ChunkedDecoder {
    state: ChunkState,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum ChunkState {
    #[default]
    Size,
    Data(u64),
    DataEnd,
    Trailer,
    Done,
}

/// The bytes of one request, written as-is for every request of the run.
pub(crate) fn encode_request(
    method: &Method,
    path: &str,
    host: &str,
    headers: &[(HeaderName, HeaderValue)],
    body: &[u8],
    close: bool,
) -> Bytes {
    let mut out = Vec::with_capacity(128 + body.len());
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(host.as_bytes());
    out.extend_from_slice(b"\r\n");
    let mut has_close = false;
    for (name, value) in headers {
        if name == http::header::CONNECTION && has_token(value.as_bytes(), b"close") {
            has_close = true;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !body.is_empty() || matches!(*method, Method::POST | Method::PUT | Method::PATCH) {
        out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    if close && !has_close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    Bytes::from(out)
}

/// Parses a response head from the start of `buf`; `Ok(None)` if more bytes are needed.
pub(crate) fn parse_head(buf: &[u8], head_request: bool) -> Result<Option<Head>, ResponseError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(buf).map_err(ResponseError::Parse)? {
        httparse::Status::Complete(len) => len,
        httparse::Status::Partial => return Ok(None),
    };
    let status = response
        .code
        .ok_or(ResponseError::Invalid("no status code"))?;
    let http10 = response.version == Some(0);

    let mut close = http10;
    let mut content_length: Option<u64> = None;
    let mut transfer_encoding: Option<&[u8]> = None;
    for header in response.headers.iter() {
        if header.name.eq_ignore_ascii_case("content-length") {
            let value = std::str::from_utf8(header.value)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or(ResponseError::Invalid("bad content-length"))?;
            if content_length.is_some_and(|existing| existing != value) {
                return Err(ResponseError::Invalid("conflicting content-length"));
            }
            content_length = Some(value);
        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
            transfer_encoding = Some(header.value);
        } else if header.name.eq_ignore_ascii_case("connection") {
            if has_token(header.value, b"close") {
                close = true;
            } else if http10 && has_token(header.value, b"keep-alive") {
                close = false;
            }
        }
    }

    let body = if head_request || (100..200).contains(&status) || status == 204 || status == 304 {
        BodyLength::Empty
    } else if let Some(codings) = transfer_encoding {
        if last_token_is(codings, b"chunked") {
            BodyLength::Chunked
        } else {
            BodyLength::UntilClose
        }
    } else if let Some(length) = content_length {
        BodyLength::Length(length)
    } else {
        BodyLength::UntilClose
    };
    if body == BodyLength::UntilClose {
        close = true;
    }
    if status == 101 {
        return Err(ResponseError::Invalid("unexpected protocol switch"));
    }
    Ok(Some(Head {
        status,
        body,
        close,
        len,
    }))
}

/// Reads one complete response from `io`, using and leaving `buf` as the connection's buffer.
pub(crate) async fn read_response<S: AsyncRead + Unpin>(
    io: &mut S,
    buf: &mut BytesMut,
    head_request: bool,
) -> Result<Response, ResponseError> {
    let mut bytes = buf.len() as u64;
    let head = loop {
        if !buf.is_empty() {
            if let Some(head) = parse_head(buf, head_request)? {
                if (100..200).contains(&head.status) {
                    // Interim response (100 Continue, 103 Early Hints): the real one follows.
                    buf.advance(head.len);
                    continue;
                }
                break head;
            }
            if buf.len() > MAX_HEAD_BYTES {
                return Err(ResponseError::Invalid("response head too large"));
            }
        }
        if read_more(io, buf, &mut bytes).await? == 0 {
            return Err(ResponseError::Eof);
        }
    };
    buf.advance(head.len);

    let mut close = head.close;
    match head.body {
        BodyLength::Empty => {}
        BodyLength::Length(mut remaining) => loop {
            let take = remaining.min(buf.len() as u64);
            buf.advance(take as usize);
            remaining -= take;
            if remaining == 0 {
                break;
            }
            if read_more(io, buf, &mut bytes).await? == 0 {
                return Err(ResponseError::Eof);
            }
        },
        BodyLength::Chunked => {
            let mut decoder = ChunkedDecoder::default();
            loop {
                let used = decoder.decode(buf)?;
                buf.advance(used);
                if decoder.is_done() {
                    break;
                }
                if used == 0 && read_more(io, buf, &mut bytes).await? == 0 {
                    return Err(ResponseError::Eof);
                }
            }
        }
        BodyLength::UntilClose => loop {
            buf.clear();
            if read_more(io, buf, &mut bytes).await? == 0 {
                break;
            }
        },
    }
    if !buf.is_empty() {
        // Bytes nobody asked for (we never pipeline): the connection is out of step; drop it.
        buf.clear();
        close = true;
    }
    Ok(Response {
        status: head.status,
        close,
        bytes,
    })
}

async fn read_more<S: AsyncRead + Unpin>(
    io: &mut S,
    buf: &mut BytesMut,
    bytes: &mut u64,
) -> Result<usize, ResponseError> {
    if buf.capacity() - buf.len() < READ_CHUNK / 4 {
        buf.reserve(READ_CHUNK);
    }
    let n = io.read_buf(buf).await.map_err(ResponseError::Io)?;
    *bytes += n as u64;
    Ok(n)
}

impl ChunkedDecoder {
    /// Consumes as much of `buf` as it can and returns how many bytes that was; 0 means it needs
    /// more bytes (or is done).
    pub(crate) fn decode(&mut self, buf: &[u8]) -> Result<usize, ResponseError> {
        let mut used = 0;
        loop {
            let rest = &buf[used..];
            match self.state {
                ChunkState::Done => return Ok(used),
                ChunkState::Size => match httparse::parse_chunk_size(rest) {
                    Ok(httparse::Status::Complete((len, 0))) => {
                        used += len;
                        self.state = ChunkState::Trailer;
                    }
                    Ok(httparse::Status::Complete((len, size))) => {
                        used += len;
                        self.state = ChunkState::Data(size);
                    }
                    Ok(httparse::Status::Partial) => {
                        if rest.len() > MAX_HEAD_BYTES {
                            return Err(ResponseError::Invalid("chunk size line too long"));
                        }
                        return Ok(used);
                    }
                    Err(_) => return Err(ResponseError::Invalid("bad chunk size")),
                },
                ChunkState::Data(remaining) => {
                    if rest.is_empty() {
                        return Ok(used);
                    }
                    let take = remaining.min(rest.len() as u64);
                    used += take as usize;
                    self.state = if take == remaining {
                        ChunkState::DataEnd
                    } else {
                        ChunkState::Data(remaining - take)
                    };
                }
                ChunkState::DataEnd => {
                    if rest.len() < 2 {
                        return Ok(used);
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err(ResponseError::Invalid("chunk not followed by CRLF"));
                    }
                    used += 2;
                    self.state = ChunkState::Size;
                }
                ChunkState::Trailer => match rest.windows(2).position(|w| w == b"\r\n") {
                    Some(0) => {
                        used += 2;
                        self.state = ChunkState::Done;
                    }
                    Some(line) => used += line + 2,
                    None if rest.len() > MAX_HEAD_BYTES => {
                        return Err(ResponseError::Invalid("trailer line too long"))
                    }
                    None => return Ok(used),
                },
            }
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        self.state == ChunkState::Done
    }
}

/// Whether a comma-separated header value contains `token` (case-insensitive).
fn has_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|part| part.trim_ascii().eq_ignore_ascii_case(token))
}

fn last_token_is(value: &[u8], token: &[u8]) -> bool {
    value
        .rsplit(|&b| b == b',')
        .next()
        .is_some_and(|part| part.trim_ascii().eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(raw: &str) -> Head {
        parse_head(raw.as_bytes(), false).unwrap().unwrap()
    }

    /// Feeds `raw` to `read_response` in pieces of `step` bytes.
    async fn read_in_pieces(raw: &[u8], step: usize) -> Result<Response, ResponseError> {
        let (mut client, mut server) = tokio::io::duplex(64);
        let owned = raw.to_vec();
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for piece in owned.chunks(step) {
                server.write_all(piece).await.unwrap();
                tokio::task::yield_now().await;
            }
        });
        let mut buf = BytesMut::new();
        let result = read_response(&mut client, &mut buf, false).await;
        writer.await.unwrap();
        result
    }

    #[test]
    fn requests_are_encoded_once_with_host_headers_and_length() {
        let headers = vec![(
            HeaderName::from_static("x-test"),
            HeaderValue::from_static("1"),
        )];
        let get = encode_request(
            &Method::GET,
            "/a?b=c",
            "example.com:8080",
            &headers,
            b"",
            false,
        );
        assert_eq!(
            &get[..],
            b"GET /a?b=c HTTP/1.1\r\nHost: example.com:8080\r\nx-test: 1\r\n\r\n"
        );
        let post = encode_request(&Method::POST, "/", "h", &[], b"hello", true);
        assert_eq!(
            &post[..],
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
        );
        let close = vec![(http::header::CONNECTION, HeaderValue::from_static("close"))];
        let user_close = encode_request(&Method::GET, "/", "h", &close, b"", true);
        assert_eq!(
            &user_close[..],
            b"GET / HTTP/1.1\r\nHost: h\r\nconnection: close\r\n\r\n"
        );
    }

    #[test]
    fn heads_are_framed_by_length_chunking_or_close() {
        let h = head("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nbody");
        assert_eq!(h.status, 200);
        assert_eq!(h.body, BodyLength::Length(12));
        assert!(!h.close);
        assert_eq!(h.len, 39);

        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
        assert_eq!(h.body, BodyLength::Chunked);
        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n");
        assert_eq!((h.body, h.close), (BodyLength::UntilClose, true));
        let h = head("HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!((h.body, h.close), (BodyLength::UntilClose, true));
        let h = head("HTTP/1.1 204 No Content\r\n\r\n");
        assert_eq!((h.body, h.close), (BodyLength::Empty, false));
        let h =
            head("HTTP/1.1 500 Oops\r\nContent-Length: 0\r\nConnection: Keep-Alive, Close\r\n\r\n");
        assert_eq!((h.status, h.close), (500, true));
        let h = head("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n");
        assert!(h.close);
        let h = head("HTTP/1.0 200 OK\r\nContent-Length: 1\r\nConnection: keep-alive\r\n\r\n");
        assert!(!h.close);

        let h = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true).unwrap();
        assert_eq!(h.unwrap().body, BodyLength::Empty);
        assert_eq!(
            parse_head(b"HTTP/1.1 200 OK\r\nContent-Le", false).unwrap(),
            None
        );
    }

    #[test]
    fn broken_heads_are_errors() {
        assert!(parse_head(b"HTTX/1.1 200 OK\r\n\r\n", false).is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", false).is_err());
        assert!(parse_head(
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            false
        )
        .is_err());
    }

    #[test]
    fn chunked_bodies_decode_in_any_split() {
        let body = b"4\r\nRust\r\n6;ext=1\r\n is ok\r\n0\r\nTrailer: x\r\n\r\n";
        for split in 1..body.len() {
            let mut decoder = ChunkedDecoder::default();
            let mut pending = Vec::new();
            for piece in body.chunks(split) {
                pending.extend_from_slice(piece);
                let used = decoder.decode(&pending).unwrap();
                pending.drain(..used);
            }
            assert!(decoder.is_done(), "split {split}");
            assert!(pending.is_empty(), "split {split}");
        }
        let mut decoder = ChunkedDecoder::default();
        assert!(decoder.decode(b"4\r\nRustXX").is_err());
        assert!(ChunkedDecoder::default().decode(b"zz\r\n").is_err());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn responses_are_read_whole_whatever_the_packet_boundaries() {
        let raw =
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789";
        for step in [1, 7, 64] {
            let r = read_in_pieces(raw, step).await.unwrap();
            assert_eq!(r.status, 200);
            assert!(!r.close);
            assert_eq!(r.bytes, raw.len() as u64);
        }
        let chunked =
            b"HTTP/1.1 503 Busy\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
        let r = read_in_pieces(chunked, 5).await.unwrap();
        assert_eq!((r.status, r.close), (503, false));
        let until_close = b"HTTP/1.1 200 OK\r\n\r\nall of it";
        let r = read_in_pieces(until_close, 4).await.unwrap();
        assert_eq!(
            (r.status, r.close, r.bytes),
            (200, true, until_close.len() as u64)
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_response_cut_short_is_an_eof_error() {
        let short = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n01234";
        assert!(matches!(
            read_in_pieces(short, 8).await,
            Err(ResponseError::Eof)
        ));
        assert!(matches!(
            read_in_pieces(b"", 8).await,
            Err(ResponseError::Eof)
        ));
        assert!(matches!(
            read_in_pieces(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nab",
                8
            )
            .await,
            Err(ResponseError::Eof)
        ));
    }
}
