//! Fuzz targets for the HTTP/1.1 codec (`wire::h1`) as the proxy uses it: the inline
//! server's and the upstream client's parsers, compared with hyper, which is why they live
//! here and not in `wire::fuzz` (HTTP/2, HPACK, PROXY protocol, ClientHello); for the
//! ext_authz `CheckResponse` reader (`ext_authz`), whose bytes an auth server sends; and for
//! the HTTP/2 client (`h2_client`), whose frames an upstream sends. Public only so that `fuzz/`
//! (cargo-fuzz, on nightly) and `tests/it/codec.rs` (the same targets as seeded property
//! tests, on stable) can call them. Not an API.
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
//!        ─▶ h2_client_frames ─▶ the server's side of an in-memory duplex, then EOF
//!                 h2_client::handshake + streams 1, 3, 5 (uploads through SendStream)
//!                 ─▶ everything ends within bounded polls; what the client wrote parses
//!                 (wire::h2::frame), stays within the windows the bytes granted; a
//!                 response read whole is the data the bytes sent
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
            Parse::Partial | Parse::Other | Parse::Refused(..) | Parse::TooLarge => {
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
            names: headers::HeaderNames {
                underscores: true,
                ignore_invalid: true,
            },
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

/// The request body stream 3 sends: more than the default windows (65,535), so the input's
/// SETTINGS and WINDOW_UPDATEs decide how much of it may go.
const UPLOAD: usize = 70_000;
/// The upload goes in chunks of this many bytes (each more than a frame).
const UPLOAD_CHUNK: usize = 20_000;
/// Rounds of polling the whole exchange after which it counts as hung. Each round moves up
/// to a duplex buffer (64 KiB) of bytes each way, so a finished exchange needs a few dozen.
const MAX_ROUNDS: usize = 10_000;

/// How one stream of [`h2_client_frames`] ended.
#[derive(Debug)]
enum StreamEnd {
    /// The response head, then its data to the end (trailers or not): the body.
    Whole(Vec<u8>),
    /// An error, at the head or in the body.
    Failed,
}

/// The HTTP/2 client (`h2_client`) on the server's bytes: `data[0]`'s bit 0 clear puts an
/// empty SETTINGS before the rest (so that the first-frame check is passed), bit 1 set ends
/// the upload with trailers; `data[1..]` is what the server sends, then it closes its side.
/// The client opens stream 1 (a GET ending with its head), stream 3 (a 70,000-byte upload
/// through `SendStream`) and stream 5 (a 5-byte upload), and reads every response.
///
/// Properties: no panic; the exchange finishes within a bounded number of polls (the
/// connection future completes, every response ends with its head and end or an error);
/// what the client wrote is the preface and valid HTTP/2 frames (`wire::h2::frame`), none
/// over the largest SETTINGS_MAX_FRAME_SIZE the server sent, only on its streams 1, 3, 5,
/// nothing on a stream after its END_STREAM or RST_STREAM; its DATA is the upload's bytes
/// in order and never more than the server's SETTINGS_INITIAL_WINDOW_SIZE (the largest it
/// sent) and WINDOW_UPDATEs allowed, on each stream and on the connection; a response read
/// whole has exactly the data (padding stripped) the server sent on that stream.
///
/// Returns whether any response was read whole.
pub fn h2_client_frames(data: &[u8]) -> bool {
    use wire::h2::frame;

    let Some((&control, input)) = data.split_first() else {
        return false;
    };
    let mut server = Vec::with_capacity(frame::HEAD_LEN + input.len());
    if control & 1 == 0 {
        frame::write_settings(&mut server, &[]);
    }
    server.extend_from_slice(input);
    let upload: Vec<u8> = (0..UPLOAD).map(|i| (i % 251) as u8).collect();
    let small = b"hello";
    let trailers = control & 2 != 0;
    let (ends, written) = RUNTIME
        .with(|runtime| runtime.block_on(h2_client_exchange(&server, &upload, small, trailers)));
    let allowed = Allowed::from_server(&server);
    check_client_frames(&written, &allowed, &[&[], &upload, small]);
    for (end, id) in ends.iter().zip([1u32, 3, 5]) {
        if let StreamEnd::Whole(body) = end {
            assert_eq!(
                body,
                &allowed.response_data(id),
                "stream {id}'s body is not the data the server sent"
            );
        }
    }
    ends.iter().any(|end| matches!(end, StreamEnd::Whole(_)))
}

/// Runs the client's side of [`h2_client_frames`] against `server` over an in-memory duplex:
/// how each stream ended, and every byte the client wrote.
async fn h2_client_exchange(
    server: &[u8],
    upload: &[u8],
    small: &[u8],
    trailers: bool,
) -> ([StreamEnd; 3], Vec<u8>) {
    use std::future::{poll_fn, Future};
    use std::pin::Pin;
    use std::task::Poll;

    use crate::h2_client::{self, SendStream};

    let (near, far) = tokio::io::duplex(64 * 1024);
    let (mut sender, connection) = h2_client::handshake(near);
    let request = |method: Method, path: &str| {
        let mut request = Request::new(());
        *request.method_mut() = method;
        *request.uri_mut() = format!("http://fuzz.test{path}").parse().expect("a URI");
        request
    };
    let mut open = |method, path, end| {
        sender
            .send_request(request(method, path), end)
            .expect("a new connection takes streams")
    };
    let (get, _) = open(Method::GET, "/", true);
    let (upload_response, upload_stream) = open(Method::POST, "/upload", false);
    let (small_response, small_stream) = open(Method::POST, "/small", false);
    drop(sender);

    async fn send_body(mut stream: SendStream, chunks: Vec<Bytes>, trailers: bool) {
        let last = chunks.len();
        for (n, chunk) in chunks.into_iter().enumerate() {
            if poll_fn(|cx| stream.poll_capacity(cx)).await.is_err() {
                return;
            }
            let end = n + 1 == last && !trailers;
            if stream.send_data(chunk, end).is_err() {
                return;
            }
        }
        if trailers && poll_fn(|cx| stream.poll_capacity(cx)).await.is_ok() {
            let mut fields = HeaderMap::new();
            fields.insert("x-trailer", HeaderValue::from_static("end"));
            let _ = stream.send_trailers(fields);
        }
    }
    async fn read_response(
        response: impl Future<Output = Result<Response<h2_client::RecvStream>, h2_client::Error>>,
        end: &RefCell<Option<StreamEnd>>,
    ) {
        let read = async {
            let mut body = response.await.ok()?.into_body();
            let mut data = Vec::new();
            while let Some(chunk) = poll_fn(|cx| body.poll_data(cx)).await {
                data.extend_from_slice(&chunk.ok()?);
            }
            poll_fn(|cx| body.poll_trailers(cx)).await.ok()?;
            Some(data)
        };
        *end.borrow_mut() = Some(read.await.map_or(StreamEnd::Failed, StreamEnd::Whole));
    }

    let ends: [RefCell<Option<StreamEnd>>; 3] = Default::default();
    let written = RefCell::new(Vec::new());
    let (mut server_read, mut server_write) = tokio::io::split(far);
    let upload_chunks = upload
        .chunks(UPLOAD_CHUNK)
        .map(Bytes::copy_from_slice)
        .collect();
    let mut tasks: Vec<Option<Pin<Box<dyn Future<Output = ()> + '_>>>> = vec![
        Some(Box::pin(async move {
            let _ = connection.await;
        })),
        Some(Box::pin(read_response(get, &ends[0]))),
        Some(Box::pin(read_response(upload_response, &ends[1]))),
        Some(Box::pin(read_response(small_response, &ends[2]))),
        Some(Box::pin(send_body(upload_stream, upload_chunks, trailers))),
        Some(Box::pin(send_body(
            small_stream,
            vec![Bytes::copy_from_slice(small)],
            false,
        ))),
        Some(Box::pin(async move {
            let _ = server_write.write_all(server).await;
            let _ = server_write.shutdown().await;
        })),
        Some(Box::pin(async {
            // Until the client's side is gone: its connection future dropped.
            let mut seen = Vec::new();
            let _ = server_read.read_to_end(&mut seen).await;
            *written.borrow_mut() = seen;
        })),
    ];
    // Polled round after round (each wakes the next), finished ones dropped: a task that
    // waits for something that never comes shows as rounds running out.
    let mut rounds = 0;
    poll_fn(|cx| {
        rounds += 1;
        for task in &mut tasks {
            if task
                .as_mut()
                .is_some_and(|t| t.as_mut().poll(cx).is_ready())
            {
                *task = None;
            }
        }
        let waiting: Vec<usize> = (0..tasks.len()).filter(|&n| tasks[n].is_some()).collect();
        if waiting.is_empty() {
            return Poll::Ready(());
        }
        assert!(
            rounds < MAX_ROUNDS,
            "hung: tasks {waiting:?} (0: the connection, 1-3: responses 1, 3, 5, 4-5: \
             bodies 3, 5, 6-7: the server) still waiting after {MAX_ROUNDS} rounds"
        );
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await;
    drop(tasks);
    let ends = ends.map(|end| end.into_inner().expect("every stream ended"));
    (ends, written.into_inner())
}

/// What the server's bytes allowed the client, read as the client would read them (every
/// whole frame, valid ones only), with a margin where the timing is the client's: a window
/// is the largest SETTINGS_INITIAL_WINDOW_SIZE sent plus every WINDOW_UPDATE, as if each
/// came before the client sent anything.
struct Allowed {
    initial_window: i64,
    /// WINDOW_UPDATE increments by stream (0: the connection).
    updates: foldhash::HashMap<u32, i64>,
    max_frame: u32,
    /// The server's frames, whole and valid: (stream, kind, END_STREAM, data without padding).
    frames: Vec<(u32, u8, bool, Vec<u8>)>,
}

impl Allowed {
    fn from_server(server: &[u8]) -> Allowed {
        use wire::h2::frame::{self, kind, Frame};

        let mut allowed = Allowed {
            initial_window: 65_535,
            updates: foldhash::HashMap::default(),
            max_frame: frame::DEFAULT_MAX_FRAME_SIZE,
            frames: Vec::new(),
        };
        let mut rest = server;
        while let Some((head, after)) = rest.split_first_chunk::<{ frame::HEAD_LEN }>() {
            let head = frame::Head::parse(head);
            let Some((payload, after)) = after.split_at_checked(head.length as usize) else {
                break;
            };
            rest = after;
            match frame::parse(head, payload) {
                Ok(Frame::Settings { settings, .. }) => {
                    if let Some(window) = settings.initial_window_size {
                        allowed.initial_window = allowed.initial_window.max(i64::from(window));
                    }
                    if let Some(size) = settings.max_frame_size {
                        allowed.max_frame = allowed.max_frame.max(size);
                    }
                }
                Ok(Frame::WindowUpdate { stream, increment }) => {
                    *allowed.updates.entry(stream).or_default() += i64::from(increment);
                }
                Ok(Frame::Data {
                    stream,
                    end_stream,
                    data,
                    ..
                }) => allowed
                    .frames
                    .push((stream, kind::DATA, end_stream, data.to_vec())),
                Ok(Frame::Headers {
                    stream, end_stream, ..
                }) => allowed
                    .frames
                    .push((stream, kind::HEADERS, end_stream, Vec::new())),
                _ => {}
            }
        }
        allowed
    }

    /// The window the client may have had for `stream` (0: the connection), at most.
    fn window(&self, stream: u32) -> i64 {
        let initial = if stream == 0 {
            65_535
        } else {
            self.initial_window
        };
        initial + self.updates.get(&stream).copied().unwrap_or(0)
    }

    /// The data the server sent on `stream` up to the frame that ended it.
    fn response_data(&self, stream: u32) -> Vec<u8> {
        let mut data = Vec::new();
        for (id, _, end_stream, bytes) in &self.frames {
            if *id != stream {
                continue;
            }
            data.extend_from_slice(bytes);
            if *end_stream {
                break;
            }
        }
        data
    }
}

/// Checks what the client wrote: the preface, then valid frames (the last may be cut short
/// where the connection failed mid-write) on its own streams 1, 3 and 5, within `allowed`;
/// each stream's DATA a prefix of its body in `bodies` (1, 3, 5), nothing after the
/// stream's end.
fn check_client_frames(written: &[u8], allowed: &Allowed, bodies: &[&[u8]; 3]) {
    use wire::h2::frame::{self, Frame};

    let preface = written.len().min(frame::PREFACE.len());
    assert_eq!(
        &written[..preface],
        &frame::PREFACE[..preface],
        "the preface"
    );
    let mut rest = &written[preface..];
    let mut sent: [Vec<u8>; 3] = Default::default();
    // By stream: END_STREAM sent (no more DATA or HEADERS), RST_STREAM sent (nothing more).
    let mut ended = [false; 3];
    let mut reset = [false; 3];
    let mut heads = Vec::new();
    while let Some((head_bytes, after)) = rest.split_first_chunk::<{ frame::HEAD_LEN }>() {
        let head = frame::Head::parse(head_bytes);
        let Some((payload, after)) = after.split_at_checked(head.length as usize) else {
            break;
        };
        rest = after;
        assert!(
            head.length <= allowed.max_frame,
            "a frame over the server's SETTINGS_MAX_FRAME_SIZE: {head:?}"
        );
        let parsed = frame::parse(head, payload)
            .unwrap_or_else(|e| panic!("the client wrote an invalid frame {head:?}: {e:?}"));
        if head.stream == 0 {
            continue;
        }
        let index = match head.stream {
            1 => 0,
            3 => 1,
            5 => 2,
            other => panic!("the client wrote on stream {other}: {head:?}"),
        };
        assert!(
            !reset[index],
            "the client wrote {head:?} after its RST_STREAM"
        );
        match parsed {
            Frame::Data {
                data, end_stream, ..
            } => {
                assert!(!ended[index], "the client wrote {head:?} after END_STREAM");
                sent[index].extend_from_slice(data);
                ended[index] = end_stream;
            }
            Frame::Headers { end_stream, .. } => {
                assert!(!ended[index], "the client wrote {head:?} after END_STREAM");
                heads.push(head.stream);
                ended[index] = end_stream;
            }
            Frame::RstStream { .. } => reset[index] = true,
            _ => {}
        }
    }
    // The three heads went first, in order (the upload's trailers may follow).
    let opened = heads.len().min(3);
    assert_eq!(heads[..opened], [1, 3, 5][..opened], "the heads: {heads:?}");
    let mut total = 0;
    for ((sent, body), id) in sent.iter().zip(bodies).zip([1u32, 3, 5]) {
        assert!(body.starts_with(sent), "stream {id}'s DATA is not its body");
        let len = sent.len() as i64;
        assert!(
            len <= allowed.window(id),
            "stream {id}: {len} bytes of DATA, the window allowed {}",
            allowed.window(id)
        );
        total += len;
    }
    assert!(
        total <= allowed.window(0),
        "{total} bytes of DATA, the connection's window allowed {}",
        allowed.window(0)
    );
}
