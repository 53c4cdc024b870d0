//! A decoded header block becomes a request head or a request's trailers, or the reason it
//! cannot (RFC 9113 §8.1-8.3).
//!
//! ```text
//!  HPACK fields ─▶ pseudo-headers first (:method :scheme :authority :path :protocol, once each)
//!               ─▶ then regular fields: lowercase names, no connection-specific ones,
//!                  `te` only "trailers" ─▶ values gathered in one buffer (one allocation
//!                  per request; each HeaderValue is a slice of it)
//!  list larger than the limit ─▶ TooLarge (431; the block is still decoded to the end, so
//!                                the connection's HPACK state stays in step)
//!  anything else wrong ─▶ Malformed (RST_STREAM PROTOCOL_ERROR, as §8.1.1 says)
//!  trailers: regular fields only, the same limit counted the same way (`ListSize`)
//! ```

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::request::Parts;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Method, Request, Uri, Version};
use wire::h2::hpack::{Decoder, HpackError};

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

/// A header list's size as RFC 9113 §6.5.2 counts it (name + value + 32 per field, RFC 7541
/// §4.1), against `large-client-header-buffers`: the one count heads and trailers are held to.
struct ListSize {
    size: usize,
    limit: usize,
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

impl ListSize {
    fn new(limit: usize) -> ListSize {
        ListSize { size: 0, limit }
    }

    /// Counts one field; `false` once the list is over the limit.
    fn add(&mut self, name: &[u8], value: &[u8]) -> bool {
        self.size = self.size.saturating_add(name.len() + value.len() + 32);
        self.size <= self.limit
    }
}

/// The least room `decode` makes for a block's decoded names and values.
const VALUES_INITIAL: usize = 256;

/// Decodes `block` and builds the request it carries. The outer error ends the connection
/// (COMPRESSION_ERROR); the inner one only the stream.
pub(super) fn decode(
    decoder: &mut Decoder,
    block: &[u8],
    limit: usize,
) -> Result<Result<Head, HeadError>, HpackError> {
    // Indexed fields decode to many times their size (a repeat request's block is a few
    // bytes per field): one allocation of room for them rather than a string of regrowths.
    let mut values = BytesMut::with_capacity((block.len() * 3).max(VALUES_INITIAL));
    let mut fields: Vec<Field> = Vec::with_capacity(16);
    let mut error: Option<HeadError> = None;
    let mut list_size = ListSize::new(limit);
    let mut regular_seen = false;
    decoder.decode(block, &mut |name: &[u8], value: &[u8]| {
        if !list_size.add(name, value) {
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

/// Decodes a trailer block (a request's second HEADERS) into its fields. Over `limit` the
/// rest of the block is still decoded, so the connection's HPACK state stays in step, but no
/// more is kept: references to one large dynamic-table entry cannot make a small block a large
/// map. The outer error ends the connection (COMPRESSION_ERROR); the inner one the stream.
pub(super) fn decode_trailers(
    decoder: &mut Decoder,
    block: &[u8],
    limit: usize,
) -> Result<Result<HeaderMap, HeadError>, HpackError> {
    let mut trailers = HeaderMap::new();
    let mut error: Option<HeadError> = None;
    let mut list_size = ListSize::new(limit);
    decoder.decode(block, &mut |name: &[u8], value: &[u8]| {
        if !list_size.add(name, value) {
            error.get_or_insert(HeadError::TooLarge);
        }
        if error.is_some() {
            return;
        }
        if name.starts_with(b":") {
            error = Some(HeadError::Malformed("a pseudo-header in trailers"));
            return;
        }
        let checked = field(name, value, &mut true).and_then(|(name, _)| {
            let value = HeaderValue::from_bytes(value)
                .map_err(|_| HeadError::Malformed("a field value with invalid characters"))?;
            Ok((name.expect("a regular field carries its name"), value))
        });
        match checked {
            Ok((name, value)) => {
                trailers.append(name, value);
            }
            Err(e) => error = Some(e),
        }
    })?;
    Ok(match error {
        Some(error) => Err(error),
        None => Ok(trailers),
    })
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
    if super::is_connection_field(&name) {
        return Err(HeadError::Malformed("a connection-specific field"));
    }
    if name == http::header::TE && value != b"trailers" {
        return Err(HeadError::Malformed("te other than \"trailers\""));
    }
    Ok((Some(name), Pseudo::None))
}

/// The request head from its decoded fields: pseudo-headers checked as RFC 9113 §8.3 lists
/// them, in one pass (one function of ~110 lines: each check is a line or two, and their
/// order is the RFC's).
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

#[cfg(test)]
mod tests {
    use super::*;
    use wire::h2::hpack;

    const LIMIT: usize = 32 * 1024;

    /// A header block of literal fields, decoded by a fresh decoder.
    fn head(fields: &[(&str, &str)]) -> Result<Head, HeadError> {
        let mut block = Vec::new();
        for (name, value) in fields {
            hpack::encode_field(name.as_bytes(), value.as_bytes(), false, &mut block);
        }
        decode(&mut Decoder::new(hpack::DEFAULT_TABLE_SIZE), &block, LIMIT).expect("valid HPACK")
    }

    fn get(path: &str) -> Vec<(&'static str, String)> {
        vec![
            (":method", "GET".into()),
            (":scheme", "https".into()),
            (":authority", "shop.example".into()),
            (":path", path.into()),
        ]
    }

    fn with(
        mut base: Vec<(&'static str, String)>,
        extra: &[(&'static str, &str)],
    ) -> Vec<(&'static str, String)> {
        base.extend(extra.iter().map(|(n, v)| (*n, v.to_string())));
        base
    }

    fn decode_owned(fields: &[(&'static str, String)]) -> Result<Head, HeadError> {
        let borrowed: Vec<(&str, &str)> = fields.iter().map(|(n, v)| (*n, v.as_str())).collect();
        head(&borrowed)
    }

    #[test]
    fn a_request_head_becomes_parts_with_values_sliced_from_one_buffer() {
        let head = decode_owned(&with(
            get("/cart?id=7"),
            &[
                ("accept", "text/html"),
                ("cookie", "a=1"),
                ("cookie", "b=2"),
                ("content-length", "12"),
            ],
        ))
        .unwrap();
        assert_eq!(head.parts.method, Method::GET);
        assert_eq!(head.parts.uri, "https://shop.example/cart?id=7");
        assert_eq!(head.parts.version, Version::HTTP_2);
        assert_eq!(head.parts.headers["accept"], "text/html");
        assert_eq!(head.parts.headers.get_all("cookie").iter().count(), 2);
        assert_eq!(head.content_length, Some(12));
        assert!(!head.websocket);
    }

    #[test]
    fn without_authority_the_target_is_origin_form() {
        let head = head(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/a"),
            ("host", "x.example"),
        ])
        .unwrap();
        assert_eq!(head.parts.uri, "/a");
        assert_eq!(head.parts.headers["host"], "x.example");
    }

    #[test]
    fn malformed_heads_are_refused_with_the_reason() {
        let malformed = |fields: Vec<(&'static str, String)>, why: &str| match decode_owned(&fields)
        {
            Err(HeadError::Malformed(said)) => assert_eq!(said, why, "{fields:?}"),
            other => panic!("{fields:?}: {:?}", other.map(|h| h.parts)),
        };
        malformed(
            with(get("/"), &[("Accept", "x")]),
            "an uppercase field name",
        );
        malformed(
            with(get("/"), &[("connection", "keep-alive")]),
            "a connection-specific field",
        );
        malformed(
            with(get("/"), &[("transfer-encoding", "chunked")]),
            "a connection-specific field",
        );
        malformed(
            with(get("/"), &[("te", "gzip")]),
            "te other than \"trailers\"",
        );
        malformed(
            with(get("/"), &[("content-length", "1x")]),
            "an invalid content-length",
        );
        malformed(
            with(
                get("/"),
                &[("content-length", "1"), ("content-length", "2")],
            ),
            "content-length values that differ",
        );
        malformed(
            with(get("/"), &[(":status", "200")]),
            "an unknown or response pseudo-header",
        );
        let mut late = with(
            vec![],
            &[(":method", "GET"), (":scheme", "https"), ("accept", "x")],
        );
        late.push((":path", "/".into()));
        malformed(late, "a pseudo-header after a regular field");
        malformed(
            with(get("/"), &[(":path", "/again")]),
            "a repeated pseudo-header",
        );
        malformed(get(""), "an empty :path");
        malformed(get("relative"), "a :path that is not absolute");
        malformed(
            with(vec![], &[(":scheme", "https"), (":path", "/")]),
            "no :method",
        );
        malformed(
            with(vec![], &[(":method", "GET"), (":scheme", "https")]),
            "no :path",
        );
        malformed(
            with(
                vec![],
                &[
                    (":method", "CONNECT"),
                    (":authority", "a:443"),
                    (":path", "/"),
                ],
            ),
            "CONNECT with :scheme or :path",
        );
        malformed(
            with(get("/"), &[(":protocol", "websocket")]),
            ":protocol on a method other than CONNECT",
        );
    }

    #[test]
    fn connect_forms_are_told_apart() {
        let plain = head(&[(":method", "CONNECT"), (":authority", "db.example:5432")]).unwrap();
        assert_eq!(plain.parts.uri, "db.example:5432");
        assert!(!plain.websocket);
        let websocket = head(&[
            (":method", "CONNECT"),
            (":protocol", "websocket"),
            (":scheme", "https"),
            (":authority", "chat.example"),
            (":path", "/socket"),
        ])
        .unwrap();
        assert!(websocket.websocket);
        assert_eq!(websocket.parts.uri, "https://chat.example/socket");
    }

    #[test]
    fn trailers_are_held_to_the_head_limit_and_decoded_whole_past_it() {
        let mut decoder = Decoder::new(hpack::DEFAULT_TABLE_SIZE);
        // A 4,000-byte value entered into the dynamic table (index 62; its length 127 + 33 +
        // 30 × 128, RFC 7541 §5.1), then referenced 1,000 times: a 5 KB block that would
        // decode to 4 MB.
        let mut bomb = vec![0x40, 1, b'x', 0x7f, 0x80 | 33, 30];
        bomb.extend(std::iter::repeat_n(b'v', 4000));
        bomb.extend(std::iter::repeat_n(0x80 | 62, 1_000));
        let decoded = decode_trailers(&mut decoder, &bomb, LIMIT).expect("valid HPACK");
        assert_eq!(decoded.err(), Some(HeadError::TooLarge));
        // The table kept its entry: a later block's reference to it still decodes.
        let again = decode_trailers(&mut decoder, &[0x80 | 62], LIMIT).expect("in step");
        assert_eq!(again.unwrap()["x"].len(), 4000);

        let mut block = Vec::new();
        hpack::encode_field(b"grpc-status", b"0", false, &mut block);
        let fresh = || Decoder::new(hpack::DEFAULT_TABLE_SIZE);
        let trailers = decode_trailers(&mut fresh(), &block, LIMIT)
            .unwrap()
            .unwrap();
        assert_eq!(trailers["grpc-status"], "0");
        for (name, why) in [
            (&b":path"[..], "a pseudo-header in trailers"),
            (b"Upper", "an uppercase field name"),
            (b"connection", "a connection-specific field"),
        ] {
            let mut block = Vec::new();
            hpack::encode_field(name, b"v", false, &mut block);
            let decoded = decode_trailers(&mut fresh(), &block, LIMIT).unwrap();
            assert_eq!(decoded.err(), Some(HeadError::Malformed(why)));
        }
    }

    #[test]
    fn a_list_over_the_limit_is_too_large_and_still_decoded_whole() {
        let big = "v".repeat(LIMIT);
        let fields = with(get("/"), &[("x-big", &big)]);
        assert_eq!(decode_owned(&fields).err(), Some(HeadError::TooLarge));
        // The limit counts name + value + 32 per field (RFC 9113 §6.5.2): the four
        // pseudo-headers take 42 + 44 + 54 + 38, and `x-big` 5 + 32 and its value.
        let room = LIMIT - 178 - 37;
        let fits = "v".repeat(room);
        assert!(decode_owned(&with(get("/"), &[("x-big", &fits)])).is_ok());
        let over = "v".repeat(room + 1);
        assert_eq!(
            decode_owned(&with(get("/"), &[("x-big", &over)])).err(),
            Some(HeadError::TooLarge)
        );
    }
}
