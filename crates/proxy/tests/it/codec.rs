//! The HTTP/1.1 fuzz targets (`proxy::fuzz`, also run by cargo-fuzz from `fuzz/`) as property
//! tests on stable: a seeded generator makes valid, mutated and hostile inputs, thousands per
//! target, the same ones on every run (`wire::fuzz::seeded::run`). A failure prints the seed
//! and the input. The codec crate's own targets (HTTP/2, HPACK, PROXY protocol, ClientHello)
//! run in wire's tests.
//!
//! ```text
//!  seed ─▶ Rng ─▶ valid message(s) ─┬─ as is            (1 in 3)
//!                                    ├─ 1..4 mutations   (1 in 3): hostile bytes in, bytes
//!                                    │                    out, ranges doubled, cut short
//!                                    └─ hostile bytes    (1 in 3): CR, LF, NUL, SP, `:`, `;`…
//!        ─▶ proxy::fuzz::{request_head, response_head, chunked_body, check_response}
//! ```

use wire::fuzz::seeded::{pick, run, Rng};

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
