//! Fuzz targets for the HTTP/1.1 codec (`wire::h1`) as the proxy uses it: the inline
//! server's and the upstream client's parsers, compared with hyper, which is why they live
//! here and not in `wire::fuzz` (HTTP/2, HPACK, PROXY protocol, ClientHello); and for the
//! ext_authz `CheckResponse` reader (`ext_authz`), whose bytes an auth server sends. Public only so
//! that `fuzz/` (cargo-fuzz, on nightly) and `tests/it/codec.rs` (the same targets as seeded
//! property tests, on stable) can call them. Not an API.
//!
//! ```text
//!  bytes ─▶ request_head  ─▶ server::parse, pipelined ─┬─▶ split anywhere: same result
//!        ─▶ response_head ─▶ client::parse_head + body ─┤   consumed = what the framing says
//!        ─▶ chunked_body  ─▶ Chunk::decode ─────────────┘   (the rest left untouched)
//!                 accepted ─▶ the codec's encoder ─▶ hyper (server or client, over an
//!                 in-memory duplex) ─▶ same method, target, status, headers, body bytes
//!                 and the raw bytes ─▶ hyper: where both accept, the same meaning
//!        ─▶ check_response ─▶ ext_authz::check_response ─▶ a decision applied to a request:
//!                 Host and framing untouched, the target still one
//! ```
//!
//! Each target panics when a property fails, which is what a fuzzer looks for.

use std::cell::RefCell;
use std::io::Cursor;
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wire::h1::{self, chunk_size_line, chunk_tail, Chunk, Decoded, Framing};

use crate::client::{self, Parsed};
use crate::headers;
use crate::response_body::ResponseBody;
use crate::server::{self, Http1, Parse};

/// The request head limit the targets run with: the default `large-client-header-buffers`.
const MAX_HEAD: usize = 32 * 1024;
/// Requests of one input checked against hyper, at most (the rest only for desync).
const CHECKED: usize = 4;
/// hyper's header-count limit in these checks: the codec's own (`h1::MAX_HEADERS`) plus room
/// for what the proxy adds when it re-serialises a head at that limit (`X-Forwarded-*`,
/// `X-Scheme`, `X-Real-IP`, `X-Request-ID`, `X-Original-*`, `Host`; `Content-Length`,
/// `Connection`, `Date`). Found by fuzzing: with hyper's default of 100, a head at the
/// limit re-serialised was refused.
const HYPER_MAX_HEADERS: usize = h1::MAX_HEADERS + 24;

thread_local! {
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime");
}

/// What a request means, as far as forwarding goes.
#[derive(Debug, PartialEq)]
struct Meaning {
    method: Method,
    target: String,
    headers: HeaderMap,
    body: Vec<u8>,
}

/// Request heads, pipelined: the inline server's parser on `data`.
///
/// Properties: no panic; each accepted request is split off exactly its head and leaves the
/// rest untouched; a refused or handed-over head leaves the buffer whole; any prefix shorter
/// than an accepted head is `Partial`; hyper reads the raw bytes as the same requests; the
/// request as forwarded (`headers::prepare_request`, `client::encode_head`) means the same
/// to hyper.
///
/// Returns whether any request was accepted (and so checked against hyper).
pub fn request_head(data: &[u8]) -> bool {
    let mut buf = BytesMut::from(data);
    let mut accepted = Vec::new();
    let mut offset = 0;
    loop {
        let before = buf.len();
        match server::parse(&mut buf, MAX_HEAD) {
            Parse::Request(parsed) => {
                let len = before - buf.len();
                assert!(len > 0, "an accepted head consumed nothing");
                assert_eq!(
                    &buf[..],
                    &data[offset + len..],
                    "bytes after the head changed"
                );
                check_prefixes(&data[offset..], len);
                offset += len;
                let last = !parsed.keep_alive;
                accepted.push(parsed);
                if last {
                    // The server closes after this one: what follows is never read.
                    break;
                }
            }
            Parse::Partial | Parse::Other | Parse::Refused(..) => {
                assert_eq!(&buf[..], &data[offset..], "a head not served was consumed");
                break;
            }
        }
    }
    if accepted.is_empty() {
        return false;
    }
    // The raw bytes: hyper, serving the same connection after a handover, must read the
    // requests the inline server accepted the same way.
    let raw = hyper_serves(data);
    for (n, parsed) in accepted.iter().take(CHECKED).enumerate() {
        let ours = Meaning {
            method: parsed.head.method.clone(),
            target: parsed.head.uri.to_string(),
            headers: parsed.head.headers.clone(),
            body: Vec::new(),
        };
        assert_eq!(
            raw.get(n),
            Some(&ours),
            "hyper reads request {n} differently"
        );
    }
    // What goes upstream.
    for parsed in accepted.into_iter().take(CHECKED) {
        let mut head = parsed.head;
        let ip = HeaderValue::from_static("192.0.2.1");
        let port = HeaderValue::from_static("80");
        let forwarded = headers::Forwarded {
            trust_incoming: true,
            full_forwarded_for: true,
            original_uri: true,
            underscores: true,
            ..headers::Forwarded::direct(&ip, &port, false)
        };
        let added = headers::prepare_request(&mut head, &forwarded, false);
        let mut out = Vec::new();
        // The framing is the writer's own, from the (empty) body: hyper must read no body.
        let framing = client::request_framing(&head, &crate::request_body::RequestBody::Empty);
        client::encode_head(&mut out, &head, Some(&added), framing);
        let (seen, ended) = hyper_serves_why(&out);
        let mut expected = Meaning {
            method: head.method.clone(),
            target: head.uri.to_string(),
            headers: head.headers.clone(),
            body: Vec::new(),
        };
        let [mut seen]: [Meaning; 1] = seen.try_into().unwrap_or_else(|seen: Vec<_>| {
            panic!(
                "hyper read {} requests ({ended:?}) in {:?}",
                seen.len(),
                String::from_utf8_lossy(&out)
            )
        });
        for name in ADDED {
            seen.headers.remove(name);
            expected.headers.remove(name);
        }
        if let Some(length) = seen.headers.remove(http::header::CONTENT_LENGTH) {
            assert_eq!(length, "0", "a request without a body framed with a length");
        }
        expected.headers.remove(http::header::CONTENT_LENGTH);
        assert_eq!(
            seen,
            expected,
            "forwarded as {:?}",
            String::from_utf8_lossy(&out)
        );
    }
    true
}

/// The headers `prepare_request` may add or replace.
const ADDED: [&str; 12] = [
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-host",
    "x-forwarded-port",
    "x-forwarded-scheme",
    "x-scheme",
    "x-real-ip",
    "x-request-id",
    "x-original-uri",
    "x-original-forwarded-for",
    "x-original-forwarded-host",
    "proxy",
];

/// Every prefix of `data` shorter than the head accepted from it is incomplete.
fn check_prefixes(data: &[u8], len: usize) {
    for cut in [1, len / 2, len - 1] {
        if cut == 0 || cut >= len {
            continue;
        }
        let mut prefix = BytesMut::from(&data[..cut]);
        assert!(
            matches!(server::parse(&mut prefix, MAX_HEAD), Parse::Partial),
            "a prefix of {cut} bytes of an accepted {len}-byte head was not partial"
        );
        assert_eq!(&prefix[..], &data[..cut]);
    }
}

/// The requests hyper's HTTP/1.1 server (configured as the worker configures it) reads from
/// `data`, in order, with their bodies.
fn hyper_serves(data: &[u8]) -> Vec<Meaning> {
    hyper_serves_why(data).0
}

/// The same, and how hyper's connection ended.
fn hyper_serves_why(data: &[u8]) -> (Vec<Meaning>, Result<(), hyper::Error>) {
    let seen = Rc::new(RefCell::new(Vec::new()));
    let record = seen.clone();
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let record = record.clone();
        async move {
            let (head, body) = request.into_parts();
            let body = body.collect().await.map(|b| b.to_bytes().to_vec());
            if let Ok(body) = body {
                record.borrow_mut().push(Meaning {
                    method: head.method,
                    target: head.uri.to_string(),
                    headers: head.headers,
                    body,
                });
            }
            Ok::<_, std::convert::Infallible>(Response::new(Empty::<Bytes>::new()))
        }
    });
    let (mut near, far) = tokio::io::duplex(64 * 1024);
    let ended = RUNTIME.with(|runtime| {
        runtime.block_on(async {
            let connection = hyper::server::conn::http1::Builder::new()
                .max_buf_size(MAX_HEAD)
                // Room for the headers the proxy adds to a head at the codec's limit.
                .max_headers(HYPER_MAX_HEADERS)
                // The input ends with the client's write side closed: the requests before
                // that still count.
                .half_close(true)
                .serve_connection(TokioIo::new(far), service);
            let client = async {
                let _ = near.write_all(data).await;
                let _ = near.shutdown().await;
                let mut answers = Vec::new();
                let _ = near.read_to_end(&mut answers).await;
            };
            let (ended, ()) = tokio::join!(connection, client);
            ended
        })
    });
    let seen = Rc::try_unwrap(seen)
        .map_err(|_| "the service outlived its connection")
        .unwrap()
        .into_inner();
    (seen, ended)
}

/// A response as the proxy passes it on.
#[derive(Debug)]
struct Answered {
    status: StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
    framing_empty: bool,
}

/// Response heads and their bodies: the upstream client's parser on `data[1..]`; `data[0]`
/// says whether the request was HEAD (bit 0) and asked for an upgrade (bit 1).
///
/// Properties: no panic; the same answer and the same bytes left whether the input arrives
/// whole or in pieces; the answer, encoded by the inline server's writer, means the same to
/// hyper's client; where hyper's client accepts the raw bytes too, it reads the same status
/// and body.
///
/// Returns whether a response was accepted and checked against hyper.
pub fn response_head(data: &[u8]) -> bool {
    let Some((&flags, wire)) = data.split_first() else {
        return false;
    };
    let to_head = flags & 1 != 0;
    let upgrade = flags & 2 != 0;
    let whole = read_response(&[wire], to_head, upgrade);
    let cut = usize::from(flags >> 2) % (wire.len() + 1);
    let pieces = [&wire[..cut], &wire[cut..]];
    let split = read_response(&pieces, to_head, upgrade);
    assert_eq!(
        format!("{whole:?}"),
        format!("{split:?}"),
        "the answer depends on how the bytes arrived"
    );
    let Some((Ok(answered), _)) = whole else {
        return false;
    };
    if answered.status == StatusCode::SWITCHING_PROTOCOLS {
        return false;
    }
    let method = if to_head { Method::HEAD } else { Method::GET };
    let encoded = encode_response(&answered, &method);
    let seen = hyper_fetches(&encoded, &method)
        .unwrap_or_else(|e| panic!("hyper refused {:?}: {e}", String::from_utf8_lossy(&encoded)));
    assert_eq!(seen.status, answered.status);
    let strip = |headers: &HeaderMap| {
        let mut headers = headers.clone();
        for name in ["date", "content-length", "transfer-encoding", "connection"] {
            headers.remove(name);
        }
        headers
    };
    assert_eq!(strip(&seen.headers), strip(&answered.headers));
    assert_eq!(seen.body, answered.body, "body changed");
    // The raw bytes, where hyper takes them (it is more lenient in places).
    if let Ok(raw) = hyper_fetches(wire, &method) {
        assert_eq!(raw.status, answered.status, "hyper reads another status");
        if !answered.framing_empty {
            assert_eq!(raw.body, answered.body, "hyper reads another body");
        }
    }
    true
}

/// What the upstream client makes of `pieces` arriving one after the other: the answer (or
/// the error) and the bytes left after its body; `None` while incomplete.
fn read_response(
    pieces: &[&[u8]],
    to_head: bool,
    upgrade: bool,
) -> Option<(Result<Answered, String>, Vec<u8>)> {
    let mut buf = BytesMut::new();
    let mut spare = HeaderMap::new();
    let mut pieces = pieces.iter();
    let mut answer = loop {
        match client::parse_head(&mut buf, &mut spare, to_head, upgrade) {
            Ok(Parsed::Final(answer)) => break answer,
            Ok(Parsed::Informational) => continue,
            Ok(Parsed::Partial) => buf.extend_from_slice(pieces.next()?),
            Err(e) => return Some((Err(e.to_string()), Vec::new())),
        }
    };
    let framing_empty = answer.framing == Framing::Empty;
    let mut body = Vec::new();
    loop {
        match answer.framing.decode(&mut buf) {
            Ok(Decoded::Data(data)) => body.extend_from_slice(&data),
            Ok(Decoded::End) => {
                for piece in pieces.by_ref() {
                    buf.extend_from_slice(piece);
                }
                break;
            }
            Ok(Decoded::NeedMore) => match pieces.next() {
                Some(piece) => buf.extend_from_slice(piece),
                None if answer.framing == Framing::UntilClose => break,
                None => return None,
            },
            Err(e) => return Some((Err(e.to_string()), Vec::new())),
        }
    }
    let rest = buf.to_vec();
    let (parts, ()) = answer.response.into_parts();
    let answered = Answered {
        status: parts.status,
        headers: parts.headers,
        body,
        framing_empty,
    };
    Some((Ok(answered), rest))
}

/// The answer as the inline server writes it to a client.
fn encode_response(answered: &Answered, method: &Method) -> Vec<u8> {
    let mut response = Response::new(ResponseBody::full(Bytes::from(answered.body.clone())));
    *response.status_mut() = answered.status;
    *response.headers_mut() = answered.headers.clone();
    let mut writer = Http1::new(Cursor::new(Vec::new()), MAX_HEAD, true);
    RUNTIME.with(|runtime| {
        runtime
            .block_on(writer.write_response(response, method, true))
            .expect("writing to memory")
    });
    writer.into_io().into_inner()
}

/// What hyper's HTTP/1.1 client reads as the response to `method /` from `wire`.
fn hyper_fetches(wire: &[u8], method: &Method) -> Result<Answered, hyper::Error> {
    let (near, mut far) = tokio::io::duplex(64 * 1024);
    RUNTIME.with(|runtime| {
        runtime.block_on(async {
            let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
                .max_headers(HYPER_MAX_HEADERS)
                .handshake(TokioIo::new(near))
                .await?;
            let server = async {
                // The request first: bytes arriving before it would be an error of their own.
                let mut request = Vec::new();
                let mut byte = [0u8; 1];
                while !request.ends_with(b"\r\n\r\n") {
                    match far.read(&mut byte).await {
                        Ok(1) => request.push(byte[0]),
                        _ => return,
                    }
                }
                let _ = far.write_all(wire).await;
                let _ = far.shutdown().await;
                // Keep reading so the client never waits on a full pipe.
                let _ = far.read_to_end(&mut request).await;
            };
            let exchange = async {
                let request = Request::builder()
                    .method(method.clone())
                    .uri("/")
                    .header("host", "fuzz")
                    .body(Empty::<Bytes>::new())
                    .expect("a valid request");
                let response = sender.send_request(request).await;
                drop(sender);
                let (parts, body) = response?.into_parts();
                let body = body.collect().await?.to_bytes().to_vec();
                Ok(Answered {
                    status: parts.status,
                    headers: parts.headers,
                    body,
                    framing_empty: false,
                })
            };
            let (_, (), answered) = tokio::join!(connection, server, exchange);
            answered
        })
    })
}

/// A chunked body followed by other bytes: the codec's decoder on `data`.
///
/// Properties: no panic; the same body, outcome and bytes left whether `data` arrives whole
/// or a byte at a time; the decoded body, encoded again by the codec, decodes to itself;
/// where the decoder accepts, hyper's server reads the same body from the raw bytes and
/// finds the next request right after it.
///
/// Returns whether the body was accepted and checked against hyper.
pub fn chunked_body(data: &[u8]) -> bool {
    let whole = decode_chunked(&[data]);
    let bytewise: Vec<&[u8]> = data.chunks(1).collect();
    assert_eq!(
        whole,
        decode_chunked(&bytewise),
        "the outcome depends on how the bytes arrived"
    );
    let Some(Ok((body, rest))) = whole else {
        return false;
    };
    assert_eq!(&data[data.len() - rest.len()..], &rest[..]);

    // Encoded again, in pieces of varied sizes, followed by the same rest.
    let mut encoded = Vec::new();
    let mut line = [0u8; 18];
    let mut pieces = body.chunks(1 + data.len() % 7).peekable();
    while let Some(piece) = pieces.next() {
        encoded.extend_from_slice(chunk_size_line(piece.len(), &mut line));
        encoded.extend_from_slice(piece);
        encoded.extend_from_slice(chunk_tail(true, pieces.peek().is_none()));
    }
    if body.is_empty() {
        encoded.extend_from_slice(chunk_tail(false, true));
    }
    let framed = encoded.len();
    encoded.extend_from_slice(&rest);
    assert_eq!(
        decode_chunked(&[&encoded]),
        Some(Ok((body.clone(), rest.clone())))
    );

    // hyper, on the raw bytes and on ours: the same body, and the next request found.
    let next = b"GET /next HTTP/1.1\r\nhost: fuzz\r\n\r\n";
    for (framing, label) in [
        (&data[..data.len() - rest.len()], "raw"),
        (&encoded[..framed], "encoded"),
    ] {
        let mut wire =
            b"POST / HTTP/1.1\r\nhost: fuzz\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
        wire.extend_from_slice(framing);
        wire.extend_from_slice(next);
        let (seen, ended) = hyper_serves_why(&wire);
        assert_eq!(
            seen.len(),
            2,
            "{label}: hyper read {} requests ({ended:?})",
            seen.len()
        );
        assert_eq!(seen[0].body, body, "{label}: hyper read another body");
        assert_eq!(seen[1].target, "/next", "{label}: the next request moved");
    }
    true
}

/// Decoded body and bytes left, the error, or `None` while incomplete.
type ChunkOutcome = Option<Result<(Vec<u8>, Vec<u8>), h1::ChunkError>>;

fn decode_chunked(pieces: &[&[u8]]) -> ChunkOutcome {
    let mut chunk = Chunk::Size;
    let mut buf = BytesMut::new();
    let mut body = Vec::new();
    let mut pieces = pieces.iter();
    loop {
        match chunk.decode(&mut buf) {
            Ok(Decoded::Data(data)) => body.extend_from_slice(&data),
            Ok(Decoded::End) => {
                for piece in pieces {
                    buf.extend_from_slice(piece);
                }
                return Some(Ok((body, buf.to_vec())));
            }
            Ok(Decoded::NeedMore) => buf.extend_from_slice(pieces.next()?),
            Err(e) => return Some(Err(e)),
        }
    }
}

/// An ext_authz `CheckResponse` (`ext_authz::check_response`) on `data`, as an auth server
/// could send it.
///
/// Properties: no panic; an allowed answer's changes, applied to a request, leave its Host
/// and Content-Length as they were and its target a valid origin-form one; a denied answer's
/// status is a final HTTP status.
///
/// Returns whether `data` was read as a message.
pub fn check_response(data: &[u8]) -> bool {
    use crate::ext_authz::{self, Decision};
    match ext_authz::check_response(data) {
        Err(_) => false,
        Ok(Decision::Allow(allowed)) => {
            let mut head = Request::get("/path?a=1&b=2")
                .header("host", "fuzz.test")
                .header("content-length", "3")
                .header("x-client", "1")
                .body(())
                .expect("a valid request")
                .into_parts()
                .0;
            allowed.apply(&mut head);
            assert_eq!(head.headers.get_all("host").iter().count(), 1);
            assert_eq!(head.headers["host"], "fuzz.test", "Host changed");
            assert_eq!(head.headers.get_all("content-length").iter().count(), 1);
            assert_eq!(head.headers["content-length"], "3", "framing changed");
            assert!(head.uri.path().starts_with('/'), "{}", head.uri);
            assert!(head.uri.scheme().is_none(), "{}", head.uri);
            let mut response = Response::new(());
            for mutation in &allowed.response_headers {
                mutation.apply(response.headers_mut());
            }
            true
        }
        Ok(Decision::Deny { status, .. }) => {
            assert!((200..=599).contains(&status.as_u16()), "{status}");
            true
        }
    }
}
