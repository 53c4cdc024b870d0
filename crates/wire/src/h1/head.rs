//! Request and response heads: one parser pattern for both, and what their headers say about
//! framing and the connection.
//!
//! The parsers are httparse with its default configuration, which is hyper's: what the
//! inline server accepts, hyper (serving the same connection after a handover) accepts too,
//! and a head is split at the same byte by both. httparse refuses obs-fold, bare CR, spaces
//! before the colon and invalid bytes in names and values; it accepts bare LF line ends, as
//! nginx and hyper do.

use bytes::BytesMut;

use super::{Chunk, Framing, FEW_HEADERS, MAX_HEADERS, MAX_RESPONSE_HEAD};

/// A head parsed whole, or more bytes needed.
#[derive(Debug)]
pub enum Status<T> {
    Complete(T),
    Partial,
}

/// Why a head was refused.
#[derive(Debug, thiserror::Error)]
pub enum HeadError {
    #[error("invalid head")]
    Parse(#[source] httparse::Error),
    #[error("head larger than {0} bytes")]
    TooLarge(usize),
}

/// Where a header's name and value lie in the head, as offsets from its first byte: they
/// stay true when the head is split off the read buffer, so values become slices of it.
#[derive(Clone, Copy, Default, Debug)]
pub struct HeaderAt {
    name: (usize, usize),
    value: (usize, usize),
}

/// A request head at the front of the buffer; spans are offsets into it.
pub struct RequestHead<'a> {
    /// Bytes of the head, its blank line included.
    pub len: usize,
    pub method: (usize, usize),
    pub target: (usize, usize),
    /// The minor version: `1` for HTTP/1.1, `0` for HTTP/1.0.
    pub version: u8,
    pub headers: &'a [HeaderAt],
}

/// A response head at the front of the buffer.
pub struct ResponseHead<'a> {
    pub len: usize,
    pub code: u16,
    pub version: u8,
    pub headers: &'a [HeaderAt],
}

/// What a head's headers say about its body and its connection, from one pass over them.
#[derive(Default, Debug)]
pub struct FramingHeaders {
    /// The first `Content-Length` value.
    content_length: Option<u64>,
    /// `Content-Length` values seen (a comma list counts each), up to 255.
    lengths: u8,
    /// A value that is not a decimal number of at most 19 digits.
    invalid_length: bool,
    /// Two values that differ.
    conflicting_lengths: bool,
    /// `Transfer-Encoding` present.
    transfer_encoding: bool,
    /// Transfer codings listed, over every `Transfer-Encoding` line, up to 255.
    codings: u8,
    /// The last coding listed is `chunked`.
    chunked_last: bool,
    /// `Connection: close`.
    pub close: bool,
    /// `Connection: keep-alive`.
    pub keep_alive: bool,
    /// `Connection` names other headers, which are hop-by-hop too.
    pub names_others: bool,
    /// `Expect` present.
    pub expect: bool,
    /// `Upgrade` present.
    pub upgrade: bool,
}

/// A head whose framing is ambiguous or unsupported. From a client: refused (400, or 501 for
/// an unknown coding), as nginx does; from an upstream: an upstream error, and the connection
/// is not reused. Either way, nothing framed two ways is ever passed on.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum FramingError {
    /// Not a decimal number (RFC 9110 §8.6); a comma list only on responses.
    #[error("invalid Content-Length")]
    InvalidContentLength,
    /// Two different lengths: which one the next hop believes decides where the next
    /// message starts.
    #[error("conflicting Content-Length values")]
    ConflictingContentLength,
    /// More than one `Content-Length` on a request, even equal ones (nginx: "client sent
    /// duplicate header line").
    #[error("repeated Content-Length")]
    RepeatedContentLength,
    /// Both: the classic smuggling pattern (RFC 9112 §6.3 allows a recipient to refuse it;
    /// nginx does, for requests and for upstream responses).
    #[error("both Content-Length and Transfer-Encoding")]
    LengthAndTransferEncoding,
    /// Anything but exactly one `chunked` coding: other codings would reach the next hop
    /// without their header (it is hop-by-hop), and nginx answers 501 to them.
    #[error("Transfer-Encoding other than chunked")]
    UnknownTransferEncoding,
    /// HTTP/1.0 has no transfer codings (RFC 9112 §6.1).
    #[error("Transfer-Encoding in an HTTP/1.0 message")]
    TransferEncodingHttp10,
}

/// One pass result: done, or parse again with more header slots (the closure comes back).
enum Pass<R, F> {
    Done(Result<Status<R>, HeadError>),
    Again(F),
}

impl HeaderAt {
    pub fn name<'h>(&self, head: &'h [u8]) -> &'h [u8] {
        &head[self.name.0..self.name.1]
    }

    pub fn value<'h>(&self, head: &'h [u8]) -> &'h [u8] {
        &head[self.value.0..self.value.1]
    }

    pub fn value_range(&self) -> std::ops::Range<usize> {
        self.value.0..self.value.1
    }
}

/// Parses the request head at the front of `buf` (at most `max_head` bytes); a complete one
/// is handed to `f` with the buffer, still whole, so that `f` can split the head off it.
#[inline]
pub fn parse_request<R, F>(
    buf: &mut BytesMut,
    max_head: usize,
    f: F,
) -> Result<Status<R>, HeadError>
where
    F: FnOnce(&mut BytesMut, &RequestHead<'_>) -> R,
{
    match parse_request_with::<FEW_HEADERS, R, F>(buf, max_head, f) {
        Pass::Done(result) => result,
        Pass::Again(f) => match parse_request_with::<MAX_HEADERS, R, F>(buf, max_head, f) {
            Pass::Done(result) => result,
            Pass::Again(_) => Err(HeadError::Parse(httparse::Error::TooManyHeaders)),
        },
    }
}

#[inline]
fn parse_request_with<const N: usize, R, F>(buf: &mut BytesMut, max_head: usize, f: F) -> Pass<R, F>
where
    F: FnOnce(&mut BytesMut, &RequestHead<'_>) -> R,
{
    let mut raw = [httparse::EMPTY_HEADER; N];
    let mut at = [HeaderAt::default(); N];
    let mut request = httparse::Request::new(&mut raw);
    let base = buf.as_ptr() as usize;
    let span = |part: &[u8]| {
        let start = part.as_ptr() as usize - base;
        (start, start + part.len())
    };
    let head = match request.parse(buf) {
        Ok(httparse::Status::Complete(len)) if len <= max_head => {
            let count = record(&mut at, request.headers, base);
            RequestHead {
                len,
                // httparse sets all three when it completes.
                method: span(request.method.unwrap_or_default().as_bytes()),
                target: span(request.path.unwrap_or_default().as_bytes()),
                version: request.version.unwrap_or_default(),
                headers: &at[..count],
            }
        }
        Ok(httparse::Status::Partial) if buf.len() < max_head => {
            return Pass::Done(Ok(Status::Partial))
        }
        Ok(_) => return Pass::Done(Err(HeadError::TooLarge(max_head))),
        Err(httparse::Error::TooManyHeaders) if N < MAX_HEADERS => return Pass::Again(f),
        Err(e) => return Pass::Done(Err(HeadError::Parse(e))),
    };
    Pass::Done(Ok(Status::Complete(f(buf, &head))))
}

/// Parses the response head at the front of `buf`, like [`parse_request`], limited to
/// `MAX_RESPONSE_HEAD`.
#[inline]
pub fn parse_response<R, F>(buf: &mut BytesMut, f: F) -> Result<Status<R>, HeadError>
where
    F: FnOnce(&mut BytesMut, &ResponseHead<'_>) -> R,
{
    match parse_response_with::<FEW_HEADERS, R, F>(buf, f) {
        Pass::Done(result) => result,
        Pass::Again(f) => match parse_response_with::<MAX_HEADERS, R, F>(buf, f) {
            Pass::Done(result) => result,
            Pass::Again(_) => Err(HeadError::Parse(httparse::Error::TooManyHeaders)),
        },
    }
}

#[inline]
fn parse_response_with<const N: usize, R, F>(buf: &mut BytesMut, f: F) -> Pass<R, F>
where
    F: FnOnce(&mut BytesMut, &ResponseHead<'_>) -> R,
{
    let mut raw = [httparse::EMPTY_HEADER; N];
    let mut at = [HeaderAt::default(); N];
    let mut response = httparse::Response::new(&mut raw);
    let base = buf.as_ptr() as usize;
    let head = match response.parse(buf) {
        Ok(httparse::Status::Complete(len)) if len <= MAX_RESPONSE_HEAD => {
            let count = record(&mut at, response.headers, base);
            ResponseHead {
                len,
                code: response.code.unwrap_or_default(),
                version: response.version.unwrap_or_default(),
                headers: &at[..count],
            }
        }
        Ok(httparse::Status::Partial) if buf.len() < MAX_RESPONSE_HEAD => {
            return Pass::Done(Ok(Status::Partial))
        }
        Ok(_) => return Pass::Done(Err(HeadError::TooLarge(MAX_RESPONSE_HEAD))),
        Err(httparse::Error::TooManyHeaders) if N < MAX_HEADERS => return Pass::Again(f),
        Err(e) => return Pass::Done(Err(HeadError::Parse(e))),
    };
    Pass::Done(Ok(Status::Complete(f(buf, &head))))
}

/// Where each parsed header lies, relative to `base`; returns how many there are.
#[inline]
fn record(at: &mut [HeaderAt], headers: &[httparse::Header<'_>], base: usize) -> usize {
    for (slot, header) in at.iter_mut().zip(headers) {
        let name = header.name.as_ptr() as usize - base;
        let value = header.value.as_ptr() as usize - base;
        *slot = HeaderAt {
            name: (name, name + header.name.len()),
            value: (value, value + header.value.len()),
        };
    }
    headers.len()
}

impl FramingHeaders {
    /// Reads the headers that decide framing and the connection's fate, by their raw names.
    pub fn read(head: &[u8], headers: &[HeaderAt]) -> FramingHeaders {
        let mut f = FramingHeaders::default();
        for header in headers {
            let name = header.name(head);
            let value = header.value(head);
            // The length first: most names are ruled out without comparing bytes.
            match name.len() {
                14 if name.eq_ignore_ascii_case(b"content-length") => f.read_length(value),
                17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                    f.transfer_encoding = true;
                    for coding in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                        if !coding.is_empty() {
                            f.codings = f.codings.saturating_add(1);
                            f.chunked_last = coding.eq_ignore_ascii_case(b"chunked");
                        }
                    }
                }
                10 if name.eq_ignore_ascii_case(b"connection") => {
                    for token in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                        if token.eq_ignore_ascii_case(b"close") {
                            f.close = true;
                        } else if token.eq_ignore_ascii_case(b"keep-alive") {
                            f.keep_alive = true;
                        } else if !token.is_empty() && !token.eq_ignore_ascii_case(b"upgrade") {
                            f.names_others = true;
                        }
                    }
                }
                6 if name.eq_ignore_ascii_case(b"expect") => f.expect = true,
                7 if name.eq_ignore_ascii_case(b"upgrade") => f.upgrade = true,
                _ => {}
            }
        }
        f
    }

    fn read_length(&mut self, value: &[u8]) {
        for part in value.split(|&b| b == b',') {
            self.lengths = self.lengths.saturating_add(1);
            match parse_length(part.trim_ascii()) {
                None => self.invalid_length = true,
                Some(len) => match self.content_length {
                    Some(known) if known != len => self.conflicting_lengths = true,
                    Some(_) => {}
                    None => self.content_length = Some(len),
                },
            }
        }
    }

    /// Checks shared by both sides: a `Transfer-Encoding` must be exactly `chunked`, alone,
    /// on HTTP/1.1; lengths must be numbers that agree.
    fn check(&self, version: u8) -> Result<(), FramingError> {
        if self.transfer_encoding {
            if version == 0 {
                return Err(FramingError::TransferEncodingHttp10);
            }
            if self.codings != 1 || !self.chunked_last {
                return Err(FramingError::UnknownTransferEncoding);
            }
            if self.lengths > 0 {
                return Err(FramingError::LengthAndTransferEncoding);
            }
        }
        if self.invalid_length {
            return Err(FramingError::InvalidContentLength);
        }
        if self.conflicting_lengths {
            return Err(FramingError::ConflictingContentLength);
        }
        Ok(())
    }

    /// How a request's body is framed (RFC 9112 §6.3, 3 to 6), refusing what nginx refuses:
    /// a request may carry one `Content-Length` with one number, or `Transfer-Encoding:
    /// chunked`, never both.
    pub fn request_framing(&self, version: u8) -> Result<Framing, FramingError> {
        self.check(version)?;
        if self.lengths > 1 {
            return Err(FramingError::RepeatedContentLength);
        }
        Ok(if self.transfer_encoding {
            Framing::Chunked(Chunk::Size)
        } else {
            self.content_length.map_or(Framing::Empty, Framing::Length)
        })
    }

    /// How a response's body is framed (RFC 9112 §6.3, 1 to 7). `code` is final (not 1xx);
    /// `to_head`: the request was HEAD. Repeated equal lengths are accepted (the RFC allows
    /// it, and hyper does); everything ambiguous is an error.
    pub fn response_framing(
        &self,
        code: u16,
        version: u8,
        to_head: bool,
    ) -> Result<Framing, FramingError> {
        self.check(version)?;
        Ok(if code == 101 {
            Framing::Upgrade
        } else if to_head || code == 204 || code == 304 {
            Framing::Empty
        } else if self.transfer_encoding {
            Framing::Chunked(Chunk::Size)
        } else {
            self.content_length
                .map_or(Framing::UntilClose, Framing::Length)
        })
    }
}

/// A `Content-Length` value: 1 to 19 decimal digits (so it fits in a `u64`), nothing else.
pub(super) fn parse_length(digits: &[u8]) -> Option<u64> {
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

    fn request_framing(head: &[u8]) -> Result<Framing, FramingError> {
        let mut buf = BytesMut::from(head);
        let parsed = parse_request(&mut buf, 8192, |buf, head| {
            FramingHeaders::read(&buf[..head.len], head.headers).request_framing(head.version)
        });
        match parsed {
            Ok(Status::Complete(framing)) => framing,
            other => panic!("{other:?}"),
        }
    }

    fn response_framing(head: &[u8], to_head: bool) -> Result<Framing, FramingError> {
        let mut buf = BytesMut::from(head);
        let parsed = parse_response(&mut buf, |buf, head| {
            FramingHeaders::read(&buf[..head.len], head.headers).response_framing(
                head.code,
                head.version,
                to_head,
            )
        });
        match parsed {
            Ok(Status::Complete(framing)) => framing,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn requests_are_framed_as_nginx_frames_them() {
        use FramingError::*;
        let cases: [(&[u8], Result<Framing, FramingError>); 12] = [
            (b"GET / HTTP/1.1\r\n\r\n", Ok(Framing::Empty)),
            (
                b"POST / HTTP/1.1\r\nContent-Length: 12\r\n\r\n",
                Ok(Framing::Length(12)),
            ),
            (
                b"POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n",
                Ok(Framing::Chunked(Chunk::Size)),
            ),
            (
                b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
                Err(RepeatedContentLength),
            ),
            (
                b"POST / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\n",
                Err(RepeatedContentLength),
            ),
            (
                b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                Err(ConflictingContentLength),
            ),
            (
                b"POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\n",
                Err(InvalidContentLength),
            ),
            (
                b"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
                Err(LengthAndTransferEncoding),
            ),
            (
                b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                Err(UnknownTransferEncoding),
            ),
            (
                b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
                Err(UnknownTransferEncoding),
            ),
            (
                b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
                Err(UnknownTransferEncoding),
            ),
            (
                b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
                Err(TransferEncodingHttp10),
            ),
        ];
        for (head, framing) in cases {
            assert_eq!(
                request_framing(head),
                framing,
                "{}",
                String::from_utf8_lossy(head)
            );
        }
    }

    #[test]
    fn ambiguous_responses_are_upstream_errors() {
        use FramingError::*;
        let cases: [(&[u8], bool, Result<Framing, FramingError>); 9] = [
            (b"HTTP/1.1 200 OK\r\n\r\n", false, Ok(Framing::UntilClose)),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\nContent-Length: 3\r\n\r\n",
                false,
                Ok(Framing::Length(3)),
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n",
                true,
                Ok(Framing::Empty),
            ),
            (
                b"HTTP/1.1 304 Not Modified\r\nContent-Length: 3\r\n\r\n",
                false,
                Ok(Framing::Empty),
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
                false,
                Err(ConflictingContentLength),
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n",
                false,
                Err(LengthAndTransferEncoding),
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
                false,
                Err(UnknownTransferEncoding),
            ),
            (
                b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                false,
                Err(TransferEncodingHttp10),
            ),
            (
                b"HTTP/1.1 204 No Content\r\nContent-Length: x\r\n\r\n",
                false,
                Err(InvalidContentLength),
            ),
        ];
        for (head, to_head, framing) in cases {
            assert_eq!(
                response_framing(head, to_head),
                framing,
                "{}",
                String::from_utf8_lossy(head)
            );
        }
    }

    #[test]
    fn heads_with_many_headers_take_a_second_pass_and_too_many_are_refused() {
        for (count, ok) in [
            (FEW_HEADERS + 1, true),
            (MAX_HEADERS, true),
            (MAX_HEADERS + 1, false),
        ] {
            let mut head = b"GET / HTTP/1.1\r\n".to_vec();
            for i in 0..count {
                head.extend_from_slice(format!("x-h{i}: {i}\r\n").as_bytes());
            }
            head.extend_from_slice(b"\r\n");
            let mut buf = BytesMut::from(&head[..]);
            let parsed = parse_request(&mut buf, 64 * 1024, |_, head| head.headers.len());
            match parsed {
                Ok(Status::Complete(n)) => assert!(ok && n == count, "{count}"),
                Err(HeadError::Parse(httparse::Error::TooManyHeaders)) => assert!(!ok, "{count}"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn heads_over_the_limit_are_refused_partial_ones_wait() {
        let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\nHost: x\r\n"[..]);
        assert!(matches!(
            parse_request(&mut buf, 8192, |_, _| ()),
            Ok(Status::Partial)
        ));
        let mut big = b"GET / HTTP/1.1\r\nX: ".to_vec();
        big.resize(9000, b'a');
        let mut buf = BytesMut::from(&big[..]);
        assert!(matches!(
            parse_request(&mut buf, 8192, |_, _| ()),
            Err(HeadError::TooLarge(8192))
        ));
        big.extend_from_slice(b"\r\n\r\n");
        let mut buf = BytesMut::from(&big[..]);
        assert!(matches!(
            parse_request(&mut buf, 8192, |_, _| ()),
            Err(HeadError::TooLarge(8192))
        ));
    }
}
