//! A decoded header block becomes a request head, or the reason it cannot (RFC 9113 §8.1-8.3).
//!
//! ```text
//!  HPACK fields ─▶ pseudo-headers first (:method :scheme :authority :path :protocol, once each)
//!               ─▶ then regular fields: lowercase names, no connection-specific ones,
//!                  `te` only "trailers" ─▶ values gathered in one buffer (one allocation
//!                  per request; each HeaderValue is a slice of it)
//!  list larger than the limit ─▶ TooLarge (431; the block is still decoded to the end, so
//!                                the connection's HPACK state stays in step)
//!  anything else wrong ─▶ Malformed (RST_STREAM PROTOCOL_ERROR, as §8.1.1 says)
//! ```

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::request::Parts;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Method, Request, Uri, Version};

use super::hpack::{Decoder, HpackError};

/// Why a request head was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HeadError {
    /// The stream is reset with PROTOCOL_ERROR: the text says what was wrong.
    Malformed(&'static str),
    /// The decoded list is larger than `large-client-header-buffers` allows: 431.
    TooLarge,
}

/// A request head and what the connection needs to know of it.
pub(super) struct Head {
    pub(super) parts: Parts,
    /// `:protocol` (RFC 8441), lowercased when it is "websocket".
    pub(super) websocket: bool,
    pub(super) content_length: Option<u64>,
}

/// Where one field's bytes went in the gathered buffer.
struct Field {
    name: Option<HeaderName>,
    pseudo: Pseudo,
    start: usize,
    end: usize,
}

#[derive(Clone, Copy, PartialEq)]
enum Pseudo {
    None,
    Method,
    Scheme,
    Authority,
    Path,
    Protocol,
}

/// Decodes `block` and builds the request it carries. The outer error ends the connection
/// (COMPRESSION_ERROR); the inner one only the stream.
pub(super) fn decode(
    decoder: &mut Decoder,
    block: &[u8],
    limit: usize,
) -> Result<Result<Head, HeadError>, HpackError> {
    let mut values = BytesMut::with_capacity(block.len() + block.len() / 2);
    let mut fields: Vec<Field> = Vec::with_capacity(16);
    let mut error: Option<HeadError> = None;
    let mut list_size = 0usize;
    let mut regular_seen = false;
    decoder.decode(block, &mut |name: &[u8], value: &[u8]| {
        list_size = list_size.saturating_add(name.len() + value.len() + 32);
        if list_size > limit {
            error.get_or_insert(HeadError::TooLarge);
        }
        if error.is_some() {
            return;
        }
        match field(name, value, &mut regular_seen) {
            Ok((name, pseudo)) => {
                let start = values.len();
                values.put_slice(value);
                fields.push(Field {
                    name,
                    pseudo,
                    start,
                    end: values.len(),
                });
            }
            Err(e) => error = Some(e),
        }
    })?;
    if let Some(error) = error {
        return Ok(Err(error));
    }
    Ok(build(values.freeze(), &fields))
}

/// Checks one field by itself: which pseudo-header it is, or its name as a header name.
fn field(
    name: &[u8],
    value: &[u8],
    regular_seen: &mut bool,
) -> Result<(Option<HeaderName>, Pseudo), HeadError> {
    if let Some(pseudo) = name.strip_prefix(b":") {
        if *regular_seen {
            return Err(HeadError::Malformed(
                "a pseudo-header after a regular field",
            ));
        }
        let pseudo = match pseudo {
            b"method" => Pseudo::Method,
            b"scheme" => Pseudo::Scheme,
            b"authority" => Pseudo::Authority,
            b"path" => Pseudo::Path,
            b"protocol" => Pseudo::Protocol,
            _ => return Err(HeadError::Malformed("an unknown or response pseudo-header")),
        };
        return Ok((None, pseudo));
    }
    *regular_seen = true;
    if name.iter().any(u8::is_ascii_uppercase) {
        return Err(HeadError::Malformed("an uppercase field name"));
    }
    let name = HeaderName::from_bytes(name)
        .map_err(|_| HeadError::Malformed("a field name with invalid characters"))?;
    // RFC 9113 §8.2.2: connection-specific fields do not exist in HTTP/2.
    if name == http::header::CONNECTION
        || name == http::header::TRANSFER_ENCODING
        || name == http::header::UPGRADE
        || name.as_str() == "keep-alive"
        || name.as_str() == "proxy-connection"
    {
        return Err(HeadError::Malformed("a connection-specific field"));
    }
    if name == http::header::TE && value != b"trailers" {
        return Err(HeadError::Malformed("te other than \"trailers\""));
    }
    Ok((Some(name), Pseudo::None))
}

fn build(values: Bytes, fields: &[Field]) -> Result<Head, HeadError> {
    let mut method = None;
    let mut scheme = None;
    let mut authority = None;
    let mut path = None;
    let mut protocol = None;
    let mut headers = HeaderMap::with_capacity(fields.len());
    let mut content_length: Option<u64> = None;
    for field in fields {
        let value = values.slice(field.start..field.end);
        let slot = match field.pseudo {
            Pseudo::Method => &mut method,
            Pseudo::Scheme => &mut scheme,
            Pseudo::Authority => &mut authority,
            Pseudo::Path => &mut path,
            Pseudo::Protocol => &mut protocol,
            Pseudo::None => {
                let name = field.name.clone().expect("regular fields carry their name");
                let value = HeaderValue::from_maybe_shared(value)
                    .map_err(|_| HeadError::Malformed("a field value with invalid characters"))?;
                if name == http::header::CONTENT_LENGTH {
                    let length = std::str::from_utf8(value.as_bytes())
                        .ok()
                        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                        .and_then(|v| v.parse::<u64>().ok())
                        .ok_or(HeadError::Malformed("an invalid content-length"))?;
                    if content_length.is_some_and(|l| l != length) {
                        return Err(HeadError::Malformed("content-length values that differ"));
                    }
                    content_length = Some(length);
                }
                headers.append(name, value);
                continue;
            }
        };
        if slot.is_some() {
            return Err(HeadError::Malformed("a repeated pseudo-header"));
        }
        *slot = Some(value);
    }
    let method = method.ok_or(HeadError::Malformed("no :method"))?;
    let method =
        Method::from_bytes(&method).map_err(|_| HeadError::Malformed("an invalid :method"))?;
    let connect = method == Method::CONNECT;
    let websocket = match &protocol {
        None => false,
        Some(_) if !connect => {
            return Err(HeadError::Malformed(
                ":protocol on a method other than CONNECT",
            ))
        }
        Some(p) => p.eq_ignore_ascii_case(b"websocket"),
    };
    let mut uri = http::uri::Parts::default();
    if connect && protocol.is_none() {
        // A plain CONNECT names only the authority (§8.5).
        if scheme.is_some() || path.is_some() {
            return Err(HeadError::Malformed("CONNECT with :scheme or :path"));
        }
        let authority = authority.ok_or(HeadError::Malformed("CONNECT without :authority"))?;
        uri.authority = Some(
            Authority::from_maybe_shared(authority)
                .map_err(|_| HeadError::Malformed("an invalid :authority"))?,
        );
    } else {
        let scheme = scheme.ok_or(HeadError::Malformed("no :scheme"))?;
        let path = path.ok_or(HeadError::Malformed("no :path"))?;
        if path.is_empty() {
            return Err(HeadError::Malformed("an empty :path"));
        }
        uri.scheme = Some(match &scheme[..] {
            b"https" => Scheme::HTTPS,
            b"http" => Scheme::HTTP,
            other => {
                Scheme::try_from(other).map_err(|_| HeadError::Malformed("an invalid :scheme"))?
            }
        });
        if let Some(authority) = authority {
            uri.authority = Some(
                Authority::from_maybe_shared(authority)
                    .map_err(|_| HeadError::Malformed("an invalid :authority"))?,
            );
        }
        if path[0] != b'/' && !(&path[..] == b"*" && method == Method::OPTIONS) {
            return Err(HeadError::Malformed("a :path that is not absolute"));
        }
        uri.path_and_query = Some(
            PathAndQuery::from_maybe_shared(path)
                .map_err(|_| HeadError::Malformed("an invalid :path"))?,
        );
        if uri.authority.is_none() {
            // `http::Uri` wants an authority with a scheme: the Host header names it instead
            // (forward::request_host), as an HTTP/1.1 origin-form request would.
            uri.scheme = None;
        }
    }
    let uri = Uri::from_parts(uri).map_err(|_| HeadError::Malformed("an invalid target"))?;
    let (mut parts, ()) = Request::new(()).into_parts();
    parts.method = method;
    parts.uri = uri;
    parts.version = Version::HTTP_2;
    parts.headers = headers;
    Ok(Head {
        parts,
        websocket,
        content_length,
    })
}
