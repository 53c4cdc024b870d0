//! Chunked transfer coding (RFC 9112 §7.1): the decoder for bodies read, the pieces of the
//! encoding for bodies written.
//!
//! The decoder is stricter than the RFC's grammar allows receivers to be, never more lenient
//! than hyper's: a peer that frames a body oddly is more likely an attack on a parser that
//! reads it differently than a peer we must interoperate with.
//! - size: 1 to 16 hex digits (more cannot fit in 64 bits); none, or any other byte before
//!   the extensions, is refused;
//! - extensions: after `;`, visible ASCII, obs-text, SP and HTAB; ignored;
//! - lines end with CRLF: a bare CR or LF anywhere is refused;
//! - after each chunk's data, exactly CRLF;
//! - trailers: header lines (`token ":" value`, no obs-fold), checked and dropped;
//! - a size line longer than `MAX_CHUNK_LINE`, a trailer section larger than `MAX_TRAILERS`
//!   are refused.

use bytes::{Buf, BytesMut};

use super::{Decoded, MAX_CHUNK_LINE, MAX_HEADERS, MAX_TRAILERS};

/// Where a chunked body being read is.
#[derive(Debug, PartialEq)]
pub enum Chunk {
    /// A chunk-size line is next.
    Size,
    /// Bytes of the current chunk's data still to come.
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// After the last chunk: trailer lines until an empty one; bytes and lines seen so far.
    Trailers {
        bytes: usize,
        fields: usize,
    },
    Done,
}

/// Why a chunked body was refused.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum ChunkError {
    #[error("invalid chunk size")]
    Size,
    #[error("invalid chunk extension or line ending")]
    Extension,
    #[error("chunk size line longer than {MAX_CHUNK_LINE} bytes")]
    LineTooLong,
    #[error("chunk data not followed by CRLF")]
    DataEnd,
    #[error("invalid trailer line")]
    Trailer,
    #[error("trailers larger than {MAX_TRAILERS} bytes")]
    TrailersTooLarge,
    #[error("more than {MAX_HEADERS} trailer fields")]
    TooManyTrailers,
}

impl Chunk {
    /// The next piece of data at the front of `buf`, split off it.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Decoded, ChunkError> {
        if !self.advance(buf)? {
            return Ok(Decoded::NeedMore);
        }
        let Chunk::Data(left) = self else {
            return Ok(Decoded::End);
        };
        let take = (*left).min(buf.len() as u64);
        *left -= take;
        if *left == 0 {
            *self = Chunk::DataEnd;
        }
        Ok(Decoded::Data(buf.split_to(take as usize).freeze()))
    }

    /// Consumes framing bytes until data (or the end) is at the front of `buf`: `true` then,
    /// `false` when more bytes are needed first.
    pub fn advance(&mut self, buf: &mut BytesMut) -> Result<bool, ChunkError> {
        loop {
            match self {
                Chunk::Size => match parse_size_line(buf)? {
                    Some((used, size)) => {
                        buf.advance(used);
                        *self = if size == 0 {
                            Chunk::Trailers {
                                bytes: 0,
                                fields: 0,
                            }
                        } else {
                            Chunk::Data(size)
                        };
                    }
                    None => return Ok(false),
                },
                Chunk::Data(_) => return Ok(!buf.is_empty()),
                Chunk::DataEnd => {
                    if buf.len() < 2 {
                        if buf.first().is_some_and(|&b| b != b'\r') {
                            return Err(ChunkError::DataEnd);
                        }
                        return Ok(false);
                    }
                    if &buf[..2] != b"\r\n" {
                        return Err(ChunkError::DataEnd);
                    }
                    buf.advance(2);
                    *self = Chunk::Size;
                }
                Chunk::Trailers { bytes, fields } => {
                    let Some(lf) = buf.iter().position(|&b| b == b'\n') else {
                        if *bytes + buf.len() > MAX_TRAILERS {
                            return Err(ChunkError::TrailersTooLarge);
                        }
                        return Ok(false);
                    };
                    *bytes += lf + 1;
                    if *bytes > MAX_TRAILERS {
                        return Err(ChunkError::TrailersTooLarge);
                    }
                    // As many as a head may have (hyper refuses more: found by fuzzing).
                    *fields += 1;
                    if *fields > MAX_HEADERS + 1 {
                        return Err(ChunkError::TooManyTrailers);
                    }
                    if lf == 0 || buf[lf - 1] != b'\r' {
                        return Err(ChunkError::Trailer);
                    }
                    let line = &buf[..lf - 1];
                    if line.is_empty() {
                        *self = Chunk::Done;
                    } else if !is_field_line(line) {
                        return Err(ChunkError::Trailer);
                    }
                    buf.advance(lf + 1);
                }
                Chunk::Done => return Ok(true),
            }
        }
    }
}

/// A chunk-size line at the front of `buf`: its length and the size, or `None` while it is
/// incomplete.
fn parse_size_line(buf: &[u8]) -> Result<Option<(usize, u64)>, ChunkError> {
    let incomplete = || {
        if buf.len() >= MAX_CHUNK_LINE {
            Err(ChunkError::LineTooLong)
        } else {
            Ok(None)
        }
    };
    let mut size: u64 = 0;
    let mut at = 0;
    while let Some(&b) = buf.get(at) {
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => break,
        };
        if at == 16 {
            return Err(ChunkError::Size);
        }
        size = size << 4 | u64::from(digit);
        at += 1;
    }
    if at == buf.len() {
        return incomplete();
    }
    if at == 0 {
        return Err(ChunkError::Size);
    }
    let mut in_extension = false;
    loop {
        if at >= MAX_CHUNK_LINE {
            return Err(ChunkError::LineTooLong);
        }
        let Some(&b) = buf.get(at) else {
            return incomplete();
        };
        match b {
            b'\r' => {
                return match buf.get(at + 1) {
                    None => incomplete(),
                    Some(b'\n') if at + 2 <= MAX_CHUNK_LINE => Ok(Some((at + 2, size))),
                    Some(b'\n') => Err(ChunkError::LineTooLong),
                    Some(_) => Err(ChunkError::Extension),
                }
            }
            b';' => in_extension = true,
            b' ' | b'\t' => {}
            0x21..=0x7e | 0x80..=0xff if in_extension => {}
            _ if in_extension => return Err(ChunkError::Extension),
            _ => return Err(ChunkError::Size),
        }
        at += 1;
    }
}

/// `token ":" field-value` without its CRLF (a trailer line): no obs-fold, no control
/// characters but HTAB.
pub(super) fn is_field_line(line: &[u8]) -> bool {
    let Some(colon) = line.iter().position(|&b| b == b':') else {
        return false;
    };
    let (name, value) = (&line[..colon], &line[colon + 1..]);
    !name.is_empty()
        && name.iter().all(|&b| is_tchar(b))
        && value
            .iter()
            .all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

/// A `token` character (RFC 9110 §5.6.2).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `len` in hex followed by CRLF, in `line`: what goes before a chunk's data.
pub fn chunk_size_line(len: usize, line: &mut [u8; 18]) -> &[u8] {
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

/// What follows a chunk's data (`has_data`), or stands alone without it: the CRLF that ends
/// the data, and the last chunk with an empty trailer section when the body `ends`.
pub fn chunk_tail(has_data: bool, ends: bool) -> &'static [u8] {
    match (has_data, ends) {
        (true, true) => b"\r\n0\r\n\r\n",
        (true, false) => b"\r\n",
        (false, true) => b"0\r\n\r\n",
        (false, false) => b"",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every piece of data the bytes give, fed one byte at a time, and whether the body
    /// ended; the bytes after it stay in the buffer.
    fn decode_bytewise(wire: &[u8]) -> Result<(Vec<u8>, bool, BytesMut), ChunkError> {
        let mut chunk = Chunk::Size;
        let mut buf = BytesMut::new();
        let mut body = Vec::new();
        for &byte in wire {
            buf.extend_from_slice(&[byte]);
            loop {
                match chunk.decode(&mut buf)? {
                    Decoded::Data(data) => body.extend_from_slice(&data),
                    Decoded::End => return Ok((body, true, buf)),
                    Decoded::NeedMore => break,
                }
            }
        }
        Ok((body, false, buf))
    }

    #[test]
    fn chunks_extensions_and_trailers_split_anywhere() {
        let wire =
            b"5;ext=1\r\nhello\r\n1 ; a=\"b c\"\r\n \r\n6\r\nworld!\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT";
        let (body, ended, rest) = decode_bytewise(wire).unwrap();
        assert_eq!(body, b"hello world!");
        assert!(ended);
        assert_eq!(&rest[..], b"");
        // Whole: the bytes after the body are left alone.
        let mut buf = BytesMut::from(&wire[..]);
        let mut chunk = Chunk::Size;
        let mut body = Vec::new();
        while let Decoded::Data(data) = chunk.decode(&mut buf).unwrap() {
            body.extend_from_slice(&data);
        }
        assert_eq!((&body[..], &buf[..]), (&b"hello world!"[..], &b"NEXT"[..]));
        assert_eq!(
            decode_bytewise(b"FfFfFfFfFfFfFfFf\r\n").unwrap().0,
            b"".to_vec()
        );
    }

    #[test]
    fn odd_framing_is_refused() {
        let refused: [(&[u8], ChunkError); 14] = [
            (b"zz\r\n", ChunkError::Size),
            (b"\r\n", ChunkError::Size),
            (b";ext\r\n", ChunkError::Size),
            (b"0x5\r\n", ChunkError::Size),
            (b"-1\r\n", ChunkError::Size),
            (b"10000000000000000\r\n", ChunkError::Size),
            (b"5\nhello\r\n", ChunkError::Size),
            (b"5;a\nb\r\nhello\r\n", ChunkError::Extension),
            (b"5;a\rb\r\nhello\r\n", ChunkError::Extension),
            (b"5;a\x00\r\nhello\r\n", ChunkError::Extension),
            (b"5\r\nhelloXY", ChunkError::DataEnd),
            (b"5\r\nhello\n0\r\n\r\n", ChunkError::DataEnd),
            (b"0\r\nX: 1\nY: 2\r\n\r\n", ChunkError::Trailer),
            (b"0\r\nX: 1\r\n folded\r\n\r\n", ChunkError::Trailer),
        ];
        for (wire, error) in refused {
            assert_eq!(
                decode_bytewise(wire).err(),
                Some(error),
                "{}",
                String::from_utf8_lossy(wire)
            );
        }
        let mut long = b"1;".to_vec();
        long.resize(MAX_CHUNK_LINE + 10, b'a');
        assert_eq!(decode_bytewise(&long).err(), Some(ChunkError::LineTooLong));
        let long_value = format!("X-Trailer: {}\r\n", "v".repeat(1000));
        let mut trailers = b"0\r\n".to_vec();
        while trailers.len() <= MAX_TRAILERS + 10 {
            trailers.extend_from_slice(long_value.as_bytes());
        }
        assert_eq!(
            decode_bytewise(&trailers).err(),
            Some(ChunkError::TrailersTooLarge)
        );
        let mut many = b"0\r\n".to_vec();
        for _ in 0..MAX_HEADERS {
            many.extend_from_slice(b"X-T: v\r\n");
        }
        let mut at_limit = many.clone();
        at_limit.extend_from_slice(b"\r\n");
        assert!(decode_bytewise(&at_limit).is_ok());
        many.extend_from_slice(b"X-T: v\r\n\r\n");
        assert_eq!(
            decode_bytewise(&many).err(),
            Some(ChunkError::TooManyTrailers)
        );
    }

    #[test]
    fn encoding_pieces() {
        let mut line = [0u8; 18];
        assert_eq!(chunk_size_line(0x1a2b, &mut line), b"1a2b\r\n");
        assert_eq!(chunk_size_line(0, &mut line), b"0\r\n");
        assert_eq!(
            chunk_size_line(usize::MAX, &mut line),
            b"ffffffffffffffff\r\n"
        );
        assert_eq!(chunk_tail(true, true), b"\r\n0\r\n\r\n");
        assert_eq!(chunk_tail(false, true), b"0\r\n\r\n");
    }
}
