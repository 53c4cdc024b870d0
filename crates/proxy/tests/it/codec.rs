//! The proxy's fuzz targets (`proxy::fuzz`, also run by cargo-fuzz from `fuzz/`: HTTP/1.1
//! heads and bodies, ext_authz answers, the HTTP/2 client's frame handling) as property tests
//! on stable: a seeded generator makes valid, mutated and hostile inputs, thousands per
//! target, the same ones on every run (`wire::fuzz::seeded::run`). A failure prints the seed
//! and the input. The codec crate's own targets (HTTP/2, HPACK, PROXY protocol, ClientHello)
//! run in wire's tests.
//!
//! ```text
//!  seed ─▶ Rng ─▶ valid message(s) ─┬─ as is            (1 in 3)
//!                                    ├─ 1..4 mutations   (1 in 3): hostile bytes in, bytes
//!                                    │                    out, ranges doubled, cut short
//!                                    └─ hostile bytes    (1 in 3): CR, LF, NUL, SP, `:`, `;`…
//!        ─▶ proxy::fuzz::{request_head, response_head, chunked_body, check_response,
//!                         h2_client_frames}
//! ```

use wire::fuzz::seeded::{pick, run, Rng};
use wire::h2::frame::{self, flag, kind, setting};
use wire::h2::hpack;

/// Inputs per target: enough to reach every branch of the codec many times over, few enough
/// to finish in seconds (each accepted input also goes through hyper).
const CASES: u64 = 4000;

/// What cargo-fuzz found (2026-11-23), kept as plain cases: heads at the header-count limit
/// re-serialised with the proxy's additions, and a trailer section of more fields than a head
/// may have.
#[test]
fn what_fuzzing_found_stays_fixed() {
    // With Host or Content-Length: exactly the codec's 100.
    let fields: String = (0..99).map(|i| format!("x-f{i}: v\r\n")).collect();
    let request = format!("GET / HTTP/1.1\r\nhost: fuzz\r\n{fields}\r\n");
    assert!(proxy::fuzz::request_head(request.as_bytes()));
    let response = format!("\0HTTP/1.1 200 OK\r\ncontent-length: 0\r\n{fields}\r\n");
    assert!(proxy::fuzz::response_head(response.as_bytes()));
    let trailers: String = (0..101).map(|i| format!("t{i}: v\r\n")).collect();
    let chunked = format!("0\r\n{trailers}\r\n");
    assert!(!proxy::fuzz::chunked_body(chunked.as_bytes()), "refused");
}

#[test]
fn request_heads_hold_their_properties() {
    run(CASES, proxy::fuzz::request_head, |rng| {
        let mut data = Vec::new();
        for _ in 0..rng.usize(1..=3) {
            request(rng, &mut data);
        }
        data
    });
}

#[test]
fn response_heads_hold_their_properties() {
    run(CASES, proxy::fuzz::response_head, |rng| {
        let mut data = vec![rng.u8(..)];
        response(rng, &mut data);
        if rng.bool() {
            response(rng, &mut data);
        }
        data
    });
}

#[test]
fn chunked_bodies_hold_their_properties() {
    run(CASES, proxy::fuzz::chunked_body, |rng| {
        let mut data = Vec::new();
        chunked(rng, &mut data);
        data.extend_from_slice(pick(rng, &[&b"GET /next HTTP/1.1\r\n\r\n"[..], b"", b"X"]));
        data
    });
}

#[test]
fn ext_authz_answers_hold_their_properties() {
    run(CASES, proxy::fuzz::check_response, |rng| {
        let mut data = Vec::new();
        check_response(rng, &mut data);
        data
    });
}

#[test]
fn h2_client_frame_handling_holds_its_properties() {
    run(H2_CASES, proxy::fuzz::h2_client_frames, |rng| {
        let mut data = vec![rng.u8(..)];
        h2_server_frames(rng, &mut data);
        data
    });
}

/// Inputs for the HTTP/2 client: each runs a whole exchange (three streams, a 70 kB upload).
const H2_CASES: u64 = 3000;

/// What a server sends the client's streams 1, 3 and 5, mostly well formed: sometimes its
/// SETTINGS first (the target puts an empty one before half the inputs), then each stream's
/// response (a 1xx head sometimes, the head, DATA with and without padding, trailers; heads
/// split over CONTINUATIONs, padded, with priority, sometimes), the streams interleaved, and
/// other frames between: WINDOW_UPDATE, SETTINGS, PING mostly, RST_STREAM, GOAWAY and frames
/// on streams the client never opened now and then.
fn h2_server_frames(rng: &mut Rng, out: &mut Vec<u8>) {
    if rng.u8(..3) == 0 {
        h2_settings(rng, out);
    }
    // Each unit: the bytes of a frame, or of a header block's frames (never interleaved).
    let mut responses: Vec<Vec<Vec<u8>>> = Vec::new();
    for stream in [1u32, 3, 5] {
        if rng.u8(..5) != 0 {
            responses.push(h2_response(rng, stream));
        }
    }
    let mut units = Vec::new();
    while responses.iter().any(|r| !r.is_empty()) {
        let open: Vec<usize> = (0..responses.len())
            .filter(|&n| !responses[n].is_empty())
            .collect();
        let from = open[rng.usize(..open.len())];
        units.push(responses[from].remove(0));
        if rng.u8(..4) == 0 {
            units.push(h2_other_frame(rng));
        }
    }
    for unit in units {
        out.extend_from_slice(&unit);
    }
}

/// One stream's response, frame by frame.
fn h2_response(rng: &mut Rng, stream: u32) -> Vec<Vec<u8>> {
    let mut units = Vec::new();
    let head = |rng: &mut Rng, status: u16, end_stream: bool| {
        let mut block = Vec::new();
        hpack::encode_status(status, &mut block);
        for _ in 0..rng.usize(0..3) {
            let name = pick(
                rng,
                &[&b"content-type"[..], b"x-a", b"grpc-status", b"X-Up"],
            );
            let value = pick(rng, &[&b"1"[..], b"text/plain", b"", b"a\nb"]);
            hpack::encode_field_plain(name, value, rng.bool(), &mut block);
        }
        let mut unit = Vec::new();
        h2_headers(rng, &mut unit, stream, &block, end_stream);
        unit
    };
    if rng.u8(..5) == 0 {
        let status = *pick(rng, &[&100u16, &103]);
        let end_stream = rng.u8(..8) == 0;
        units.push(head(rng, status, end_stream));
    }
    let status = *pick(rng, &[&200u16, &200, &204, &404, &500, &99]);
    let chunks = rng.usize(0..4);
    let trailers = chunks > 0 && rng.u8(..4) == 0;
    units.push(head(rng, status, chunks == 0));
    for n in 0..chunks {
        let len = if rng.u8(..8) == 0 {
            rng.usize(1000..16_384)
        } else {
            rng.usize(0..64)
        };
        let data: Vec<u8> = (0..len).map(|i| b'a' + ((i + n) % 26) as u8).collect();
        let end_stream = n + 1 == chunks && !trailers;
        let mut flags = if end_stream { flag::END_STREAM } else { 0 };
        let payload = h2_padded(rng, &mut flags, &data);
        let mut unit = Vec::new();
        h2_frame(&mut unit, kind::DATA, flags, stream, &payload);
        units.push(unit);
    }
    if trailers {
        let mut block = Vec::new();
        hpack::encode_field_plain(b"grpc-status", b"0", false, &mut block);
        let mut unit = Vec::new();
        let end_stream = rng.u8(..6) != 0;
        h2_headers(rng, &mut unit, stream, &block, end_stream);
        units.push(unit);
    }
    units
}

/// A frame between the responses: flow control and PING mostly, a reset, a GOAWAY or a
/// frame on a stream the client never opened now and then.
fn h2_other_frame(rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    match rng.u8(..16) {
        0..=5 => {
            let stream = *pick(rng, &[&0u32, &0, &1, &3, &3, &5]);
            let increment = *pick(
                rng,
                &[
                    &1u32,
                    &1000,
                    &65_535,
                    &65_535,
                    &(1 << 20),
                    &frame::MAX_WINDOW,
                    &0,
                ],
            );
            h2_frame(
                &mut out,
                kind::WINDOW_UPDATE,
                0,
                stream,
                &increment.to_be_bytes(),
            );
        }
        6 | 7 => h2_settings(rng, &mut out),
        8 => h2_frame(&mut out, kind::SETTINGS, flag::ACK, 0, &[]),
        9 | 10 => {
            let flags = if rng.u8(..4) == 0 { flag::ACK } else { 0 };
            h2_frame(&mut out, kind::PING, flags, 0, &rng.u64(..).to_be_bytes());
        }
        11 | 12 => {
            let stream = *pick(rng, &[&1u32, &3, &5]);
            let code = *pick(rng, &[&0u32, &1, &2, &7, &8]);
            h2_frame(&mut out, kind::RST_STREAM, 0, stream, &code.to_be_bytes());
        }
        13 | 14 => {
            let mut payload = pick(rng, &[&0u32, &1, &3, &5]).to_be_bytes().to_vec();
            payload.extend_from_slice(&pick(rng, &[&0u32, &0, &1, &11]).to_be_bytes());
            h2_frame(&mut out, kind::GOAWAY, 0, 0, &payload);
        }
        _ => {
            // A stream the client never opened (the server's own, or above the client's).
            let stream = *pick(rng, &[&2u32, &7, &0]);
            let mut block = Vec::new();
            hpack::encode_status(200, &mut block);
            h2_frame(&mut out, kind::HEADERS, flag::END_HEADERS, stream, &block);
        }
    }
    out
}

fn h2_frame(out: &mut Vec<u8>, frame_kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    frame::write_head(out, payload.len(), frame_kind, flags, stream);
    out.extend_from_slice(payload);
}

/// SETTINGS with a few of the values a server sets, valid or not.
fn h2_settings(rng: &mut Rng, out: &mut Vec<u8>) {
    let mut settings = Vec::new();
    for _ in 0..rng.usize(0..4) {
        let setting = match rng.u8(..5) {
            0 => (
                setting::INITIAL_WINDOW_SIZE,
                *pick(
                    rng,
                    &[&0u32, &1, &1000, &65_535, &100_000, &frame::MAX_WINDOW],
                ),
            ),
            1 => (
                setting::MAX_FRAME_SIZE,
                *pick(rng, &[&16_384u32, &20_000, &0xff_ffff, &100]),
            ),
            2 => (
                setting::MAX_CONCURRENT_STREAMS,
                *pick(rng, &[&0u32, &1, &100]),
            ),
            3 => (
                setting::HEADER_TABLE_SIZE,
                *pick(rng, &[&0u32, &4096, &65_536]),
            ),
            _ => (setting::MAX_HEADER_LIST_SIZE, 8192),
        };
        settings.push(setting);
    }
    frame::write_settings(out, &settings);
}

/// A header block as HEADERS (padded and with priority sometimes), split over CONTINUATIONs
/// sometimes.
fn h2_headers(rng: &mut Rng, out: &mut Vec<u8>, stream: u32, block: &[u8], end_stream: bool) {
    let split = if block.len() > 1 && rng.u8(..4) == 0 {
        rng.usize(1..block.len())
    } else {
        block.len()
    };
    let (first, rest) = block.split_at(split);
    let mut flags = if end_stream { flag::END_STREAM } else { 0 };
    if rest.is_empty() {
        flags |= flag::END_HEADERS;
    }
    let mut fields = Vec::new();
    if rng.u8(..6) == 0 {
        flags |= flag::PRIORITY;
        fields.extend_from_slice(&[0, 0, 0, 0, 15]);
    }
    fields.extend_from_slice(first);
    let payload = h2_padded(rng, &mut flags, &fields);
    h2_frame(out, kind::HEADERS, flags, stream, &payload);
    if !rest.is_empty() {
        h2_frame(out, kind::CONTINUATION, flag::END_HEADERS, stream, rest);
    }
}

/// `content`, padded (PADDED set in `flags`) half the time.
fn h2_padded(rng: &mut Rng, flags: &mut u8, content: &[u8]) -> Vec<u8> {
    if !rng.bool() {
        return content.to_vec();
    }
    *flags |= flag::PADDED;
    let pad = rng.u8(..);
    let mut payload = vec![pad];
    payload.extend_from_slice(content);
    payload.extend(std::iter::repeat_n(0, usize::from(pad)));
    payload
}

/// A protobuf field: its key, then (wire type 2) the length and `value`, or (0) a varint.
fn field(out: &mut Vec<u8>, number: u64, value: Field<'_>) {
    let varint = |out: &mut Vec<u8>, mut n: u64| {
        while n >= 0x80 {
            out.push(n as u8 | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    };
    match value {
        Field::Varint(n) => {
            varint(out, number << 3);
            varint(out, n);
        }
        Field::Bytes(bytes) => {
            varint(out, number << 3 | 2);
            varint(out, bytes.len() as u64);
            out.extend_from_slice(bytes);
        }
    }
}

enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

/// A `CheckResponse`: a status, and an OK, denied or error answer with header options (names
/// the request must keep among them), query changes and a body.
fn check_response(rng: &mut Rng, out: &mut Vec<u8>) {
    let code = *pick(rng, &[&0u64, &0, &7, &16, &u64::MAX]);
    let mut status = Vec::new();
    field(&mut status, 1, Field::Varint(code));
    field(out, 1, Field::Bytes(&status));
    let names: [&[u8]; 7] = [
        b"x-user",
        b"host",
        b"content-length",
        b":authority",
        b"transfer-encoding",
        b"bad name",
        b"",
    ];
    let mut answer = Vec::new();
    for _ in 0..rng.usize(0..4) {
        let mut header = Vec::new();
        field(&mut header, 1, Field::Bytes(pick(rng, &names)));
        field(
            &mut header,
            2,
            Field::Bytes(pick(rng, &[&b"v"[..], b"", b"a\r\nb", b"\xff"])),
        );
        let mut option = Vec::new();
        field(&mut option, 1, Field::Bytes(&header));
        match rng.u8(..3) {
            0 => field(&mut option, 3, Field::Varint(rng.u64(0..6))),
            1 => {
                let mut bool_value = Vec::new();
                field(&mut bool_value, 1, Field::Varint(rng.u64(0..2)));
                field(&mut option, 2, Field::Bytes(&bool_value));
            }
            _ => {}
        }
        let number = *pick(rng, &[&2u64, &6]);
        field(&mut answer, number, Field::Bytes(&option));
    }
    for _ in 0..rng.usize(0..3) {
        let name = pick(rng, &names);
        field(&mut answer, 5, Field::Bytes(name));
        let mut parameter = Vec::new();
        let key = pick(rng, &[&b"a"[..], b"b", b"c d", b"&=#", b""]);
        field(&mut parameter, 1, Field::Bytes(key));
        field(
            &mut parameter,
            2,
            Field::Bytes(pick(rng, &[&b"1"[..], b"x y", b"%zz"])),
        );
        field(&mut answer, 7, Field::Bytes(&parameter));
        field(&mut answer, 8, Field::Bytes(key));
    }
    let mut http_status = Vec::new();
    field(
        &mut http_status,
        1,
        Field::Varint(*pick(rng, &[&401u64, &0, &503, &99])),
    );
    field(&mut answer, 1, Field::Bytes(&http_status));
    field(&mut answer, 3, Field::Bytes(b"denied"));
    let oneof = *pick(rng, &[&2u64, &3, &5]);
    field(out, oneof, Field::Bytes(&answer));
}

fn token(rng: &mut Rng) -> String {
    const TCHAR: &[u8] =
        b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~";
    (0..rng.usize(1..12))
        .map(|_| TCHAR[rng.usize(..TCHAR.len())] as char)
        .collect()
}

fn header(rng: &mut Rng, out: &mut Vec<u8>, eol: &[u8]) {
    let line: Vec<u8> = match rng.u8(..32) {
        0 => b"Content-Length: 0".to_vec(),
        1 => format!("content-length: {}", rng.u8(..20)).into_bytes(),
        2 => pick(
            rng,
            &[
                &b"Content-Length: 0, 0"[..],
                b"Content-Length:  00 ",
                b"Content-Length: +0",
            ],
        )
        .to_vec(),
        3 => pick(
            rng,
            &[
                &b"Transfer-Encoding: chunked"[..],
                b"transfer-encoding: gzip, chunked",
                b"Transfer-Encoding: chunked, identity",
                b"Transfer-Encoding:\tCHUNKED ",
            ],
        )
        .to_vec(),
        4 => pick(
            rng,
            &[
                &b"Connection: close"[..],
                b"connection: keep-alive",
                b"Connection: upgrade",
                b"Connection: x-hop, close",
                b"X-Hop: 1",
                b"Keep-Alive: timeout=5",
            ],
        )
        .to_vec(),
        5 => pick(
            rng,
            &[
                &b"Expect: 100-continue"[..],
                b"Upgrade: websocket",
                b"TE: trailers",
                b"Proxy-Connection: keep-alive",
            ],
        )
        .to_vec(),
        6 => b"Host: example.com".to_vec(),
        7 => b"X-Forwarded-For: 6.6.6.6".to_vec(),
        8 => {
            let mut value = Vec::new();
            for _ in 0..rng.usize(0..20) {
                value.push(*pick(
                    rng,
                    &[&b'a', &b' ', &b'\t', &0x80u8, &0xffu8, &b'"', &b','],
                ));
            }
            let mut line = format!("{}: ", token(rng)).into_bytes();
            line.extend_from_slice(&value);
            line
        }
        _ => format!("{}: {}", token(rng), token(rng)).into_bytes(),
    };
    out.extend_from_slice(&line);
    out.extend_from_slice(eol);
}

fn headers(rng: &mut Rng, out: &mut Vec<u8>, eol: &[u8]) {
    let count = match rng.u8(..10) {
        0 => rng.usize(30..40),
        1 => rng.usize(95..105),
        _ => rng.usize(0..8),
    };
    for _ in 0..count {
        header(rng, out, eol);
    }
    out.extend_from_slice(eol);
}

fn request(rng: &mut Rng, out: &mut Vec<u8>) {
    let eol: &[u8] = if rng.u8(..10) == 0 { b"\n" } else { b"\r\n" };
    let method = pick(
        rng,
        &[
            "GET", "GET", "HEAD", "DELETE", "OPTIONS", "POST", "PUT", "CONNECT", "get", "PATCH",
        ],
    );
    let target = pick(
        rng,
        &[
            "/",
            "/a?b=c",
            "*",
            "http://h.example/x?y",
            "/%2e%2e/private",
            "//x",
            "/caf\u{e9}",
            "/a b",
            "h:443",
            "/?q=\"x\"",
        ],
    );
    let version = pick(
        rng,
        &[
            "HTTP/1.1", "HTTP/1.1", "HTTP/1.1", "HTTP/1.1", "HTTP/1.1", "HTTP/1.0", "HTTP/2.0",
            "http/1.1",
        ],
    );
    out.extend_from_slice(format!("{method} {target} {version}").as_bytes());
    out.extend_from_slice(eol);
    let start = out.len();
    headers(rng, out, eol);
    // A body as one of its length headers says, so pipelining goes on after it.
    let head = String::from_utf8_lossy(&out[start..]).to_ascii_lowercase();
    if head.contains("transfer-encoding: chunked") {
        chunked(rng, out);
    } else if let Some(at) = head.find("content-length: ") {
        let digits: String = head[at + 16..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let len = digits.parse::<usize>().unwrap_or(0);
        out.extend((0..len).map(|i| b'a' + (i % 26) as u8));
    }
}

fn response(rng: &mut Rng, out: &mut Vec<u8>) {
    if rng.u8(..6) == 0 {
        out.extend_from_slice(pick(
            rng,
            &[
                &b"HTTP/1.1 100 Continue\r\n\r\n"[..],
                b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n",
            ],
        ));
    }
    let eol: &[u8] = if rng.u8(..10) == 0 { b"\n" } else { b"\r\n" };
    let status = pick(
        rng,
        &[
            "200 OK",
            "200 OK",
            "201 Created",
            "204 No Content",
            "304 Not Modified",
            "404 Not Found",
            "101 Switching Protocols",
            "500 ",
            "999 Odd",
            "200",
        ],
    );
    let version = pick(rng, &["HTTP/1.1", "HTTP/1.1", "HTTP/1.0"]);
    out.extend_from_slice(format!("{version} {status}").as_bytes());
    out.extend_from_slice(eol);
    let start = out.len();
    headers(rng, out, eol);
    let head = String::from_utf8_lossy(&out[start..]).to_ascii_lowercase();
    if head.contains("transfer-encoding: chunked") {
        chunked(rng, out);
    } else if let Some(at) = head.find("content-length: ") {
        let digits: String = head[at + 16..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let len = digits.parse::<usize>().unwrap_or(0);
        out.extend((0..len).map(|i| b'A' + (i % 26) as u8));
    } else {
        out.extend_from_slice(b"until close");
    }
}

fn chunked(rng: &mut Rng, out: &mut Vec<u8>) {
    for _ in 0..rng.usize(0..5) {
        let size = rng.usize(1..300);
        let mut line = format!("{size:x}");
        if rng.bool() {
            line = line.to_uppercase();
        }
        if rng.u8(..4) == 0 {
            line.insert_str(0, "000");
        }
        out.extend_from_slice(line.as_bytes());
        match rng.u8(..6) {
            0 => out.extend_from_slice(b";name=value"),
            1 => out.extend_from_slice(b" ; q=\"quoted ; string\""),
            2 => out.extend_from_slice(b";a;b=1"),
            3 => out.extend_from_slice(b"\t"),
            _ => {}
        }
        out.extend_from_slice(b"\r\n");
        out.extend((0..size).map(|i| b"0123456789\r\n"[i % 12]));
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(pick(rng, &[&b"0\r\n"[..], b"000\r\n", b"0;last\r\n"]));
    for _ in 0..rng.usize(0..3) {
        out.extend_from_slice(format!("{}: {}\r\n", token(rng), token(rng)).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
}
