//! The fuzz targets (`proxy::fuzz`, also run by cargo-fuzz from `fuzz/`) as property tests on
//! stable: a seeded generator makes valid, mutated and hostile inputs, thousands per target,
//! the same ones on every run. A failure prints the seed and the input.
//!
//! ```text
//!  seed ─▶ Rng ─▶ valid message(s) ─┬─ as is            (1 in 3)
//!                                    ├─ 1..4 mutations   (1 in 3): hostile bytes in, bytes
//!                                    │                    out, ranges doubled, cut short
//!                                    └─ hostile bytes    (1 in 3): CR, LF, NUL, SP, `:`, `;`…
//!        ─▶ proxy::fuzz::{request_head, response_head, chunked_body,
//!                         h2_frames, hpack_blocks, hpack_lists, proxy_header}
//! ```

use std::panic::{self, AssertUnwindSafe};

use crate::support::raw_h2::hpack_int;

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
fn h2_frames_hold_their_properties() {
    run(CASES, proxy::fuzz::h2_frames, |rng| {
        let mut data = Vec::new();
        for _ in 0..rng.usize(1..=6) {
            h2_frame(rng, &mut data);
        }
        data
    });
}

#[test]
fn hpack_blocks_decode_as_an_independent_decoder_decodes_them() {
    run(CASES, proxy::fuzz::hpack_blocks, |rng| {
        let mut data = vec![rng.u8(..)];
        for _ in 0..rng.usize(1..=5) {
            let block = hpack_block(rng);
            data.push(block.len() as u8);
            data.extend_from_slice(&block);
        }
        data
    });
}

#[test]
fn hpack_lists_encoded_by_either_side_decode_alike() {
    run(CASES, proxy::fuzz::hpack_lists, |rng| {
        (0..rng.usize(1..600)).map(|_| rng.u8(..)).collect()
    });
}

#[test]
fn proxy_headers_hold_their_properties() {
    run(CASES, proxy::fuzz::proxy_header, |rng| {
        let mut data = Vec::new();
        proxy_header(rng, &mut data);
        data.extend_from_slice(pick(
            rng,
            &[&b"GET / HTTP/1.1\r\n"[..], b"\x16\x03\x01", b""],
        ));
        data
    });
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

/// Runs `target` on `cases` inputs from `generate`: a third as made, a third mutated, a
/// third hostile. At least a tenth must be accepted, or the properties about accepted input
/// would hold vacuously.
fn run(cases: u64, target: fn(&[u8]) -> bool, generate: impl Fn(&mut fastrand::Rng) -> Vec<u8>) {
    let mut accepted = 0;
    for seed in 0..cases {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut data = generate(&mut rng);
        match seed % 3 {
            0 => {}
            1 => {
                for _ in 0..rng.usize(1..=4) {
                    mutate(&mut rng, &mut data);
                }
            }
            _ => hostile(&mut rng, &mut data),
        }
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| target(&data)));
        if let Ok(checked) = outcome {
            accepted += u64::from(checked);
        } else if let Err(panic) = outcome {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!(
                "seed {seed}: {message}\ninput: {:?}",
                String::from_utf8_lossy(&data)
            );
        }
    }
    println!("{accepted} of {cases} inputs accepted and checked");
    assert!(
        accepted * 10 >= cases,
        "only {accepted} of {cases} inputs accepted"
    );
}

fn pick<'a, T: ?Sized>(rng: &mut fastrand::Rng, items: &[&'a T]) -> &'a T {
    items[rng.usize(..items.len())]
}

/// Bytes that make parsers disagree.
const HOSTILE: &[u8] = b"\r\n\0 \t:;,\x7f\x80\xff0aF\"=";

fn mutate(rng: &mut fastrand::Rng, data: &mut Vec<u8>) {
    if data.is_empty() {
        data.push(HOSTILE[rng.usize(..HOSTILE.len())]);
        return;
    }
    let at = rng.usize(..data.len());
    match rng.u8(..5) {
        0 => data[at] = HOSTILE[rng.usize(..HOSTILE.len())],
        1 => data.insert(at, HOSTILE[rng.usize(..HOSTILE.len())]),
        2 => {
            let end = (at + rng.usize(1..8)).min(data.len());
            data.drain(at..end);
        }
        3 => {
            let end = (at + rng.usize(1..16)).min(data.len());
            let copy = data[at..end].to_vec();
            data.splice(at..at, copy);
        }
        _ => data.truncate(at),
    }
}

fn hostile(rng: &mut fastrand::Rng, data: &mut Vec<u8>) {
    if rng.bool() {
        // Every line ending bare LF or bare CR.
        let with: &[u8] = if rng.bool() { b"\n" } else { b"\r" };
        let mut out = Vec::with_capacity(data.len());
        let mut i = 0;
        while i < data.len() {
            if data[i..].starts_with(b"\r\n") && rng.u8(..3) != 0 {
                out.extend_from_slice(with);
                i += 2;
            } else {
                out.push(data[i]);
                i += 1;
            }
        }
        *data = out;
    } else {
        for _ in 0..rng.usize(4..32) {
            mutate(rng, data);
        }
    }
}

fn token(rng: &mut fastrand::Rng) -> String {
    const TCHAR: &[u8] =
        b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~";
    (0..rng.usize(1..12))
        .map(|_| TCHAR[rng.usize(..TCHAR.len())] as char)
        .collect()
}

fn header(rng: &mut fastrand::Rng, out: &mut Vec<u8>, eol: &[u8]) {
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

fn headers(rng: &mut fastrand::Rng, out: &mut Vec<u8>, eol: &[u8]) {
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

fn request(rng: &mut fastrand::Rng, out: &mut Vec<u8>) {
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

fn response(rng: &mut fastrand::Rng, out: &mut Vec<u8>) {
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

fn chunked(rng: &mut fastrand::Rng, out: &mut Vec<u8>) {
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

/// One HTTP/2 frame of any type a client sends (and some it may not), mostly well formed.
fn h2_frame(rng: &mut fastrand::Rng, out: &mut Vec<u8>) {
    let kind = rng.u8(..12);
    let mut flags = *pick(rng, &[&0u8, &0x1, &0x4, &0x5, &0x8, &0x20, &0x2d, &0xff]);
    let stream: u32 = *pick(rng, &[&1u32, &1, &3, &0, &2, &0x7fff_ffff, &0x8000_0001]);
    let mut payload = Vec::new();
    let padded = |rng: &mut fastrand::Rng, payload: &mut Vec<u8>, flags: &mut u8, body: &[u8]| {
        if rng.bool() {
            *flags |= 0x8;
            let pad = rng.u8(..8);
            payload.push(pad);
            payload.extend_from_slice(body);
            payload.extend(std::iter::repeat_n(0, usize::from(pad)));
        } else {
            *flags &= !0x8;
            payload.extend_from_slice(body);
        }
    };
    match kind {
        0 => {
            let body: Vec<u8> = (0..rng.usize(0..40)).map(|_| rng.u8(..)).collect();
            padded(rng, &mut payload, &mut flags, &body);
        }
        1 => {
            let mut body = Vec::new();
            if flags & 0x20 != 0 {
                body.extend_from_slice(&rng.u32(..).to_be_bytes());
                body.push(rng.u8(..));
            }
            body.extend_from_slice(&hpack_block(rng));
            padded(rng, &mut payload, &mut flags, &body);
        }
        2 => {
            payload.extend_from_slice(&rng.u32(..4).to_be_bytes());
            payload.push(rng.u8(..));
        }
        3 => payload.extend_from_slice(&rng.u32(..14).to_be_bytes()),
        4 => {
            for _ in 0..rng.usize(0..5) {
                payload.extend_from_slice(&rng.u16(0..10).to_be_bytes());
                let value = *pick(
                    rng,
                    &[
                        &0u32,
                        &1,
                        &2,
                        &16_384,
                        &65_535,
                        &0x7fff_ffff,
                        &0x8000_0000,
                        &0xffff_ffff,
                    ],
                );
                payload.extend_from_slice(&value.to_be_bytes());
            }
        }
        5 | 9 => payload.extend_from_slice(&hpack_block(rng)),
        6 => payload.extend_from_slice(&rng.u64(..).to_be_bytes()),
        7 => {
            payload.extend_from_slice(&rng.u32(..).to_be_bytes());
            payload.extend_from_slice(&rng.u32(..14).to_be_bytes());
            payload.extend(std::iter::repeat_n(b'd', rng.usize(0..8)));
        }
        8 => payload.extend_from_slice(&rng.u32(..3).to_be_bytes()),
        _ => payload.extend(std::iter::repeat_n(0, rng.usize(0..6))),
    }
    let length = payload.len() as u32;
    out.extend_from_slice(&length.to_be_bytes()[1..]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(&payload);
}

/// A header block of every representation (RFC 7541 §6), up to 255 bytes: indexed fields
/// of both tables, literals with and without indexing, never indexed, new and indexed names,
/// raw and Huffman strings (the RFC's own examples), table size updates first.
fn hpack_block(rng: &mut fastrand::Rng) -> Vec<u8> {
    let mut block = Vec::new();
    for _ in 0..rng.usize(0..3).saturating_sub(1) {
        let size = *pick(rng, &[&0usize, &100, &256, &4096, &5000]);
        hpack_int(0x20, 5, size, &mut block);
    }
    for _ in 0..rng.usize(0..8) {
        match rng.u8(..6) {
            0 => hpack_int(0x80, 7, rng.usize(1..75), &mut block),
            kind => {
                let (prefix, flags) = match kind {
                    1 | 2 => (6, 0x40),
                    3 => (4, 0x00),
                    _ => (4, 0x10),
                };
                if rng.bool() {
                    hpack_int(flags, prefix, 0, &mut block);
                    hpack_string(rng, &mut block, true);
                } else {
                    hpack_int(flags, prefix, rng.usize(1..70), &mut block);
                }
                hpack_string(rng, &mut block, false);
            }
        }
    }
    block.truncate(255);
    block
}

fn hpack_string(rng: &mut fastrand::Rng, out: &mut Vec<u8>, name: bool) {
    /// RFC 7541 C.4: "www.example.com", "no-cache", "custom-key", "custom-value" Huffman-coded.
    const HUFFMAN: [&[u8]; 4] = [
        b"\xf1\xe3\xc2\xe5\xf2\x3a\x6b\xa0\xab\x90\xf4\xff",
        b"\xa8\xeb\x10\x64\x9c\xbf",
        b"\x25\xa8\x49\xe9\x5b\xa9\x7d\x7f",
        b"\x25\xa8\x49\xe9\x5b\xb8\xe8\xb4\xbf",
    ];
    if rng.u8(..4) == 0 {
        let coded = HUFFMAN[rng.usize(..HUFFMAN.len())];
        hpack_int(0x80, 7, coded.len(), out);
        out.extend_from_slice(coded);
        return;
    }
    let text: Vec<u8> = if name {
        pick(
            rng,
            &[
                &b"x-a"[..],
                b"custom-key",
                b":path",
                b":method",
                b"Upper",
                b"",
                b"a b",
            ],
        )
        .to_vec()
    } else {
        (0..rng.usize(0..24))
            .map(|_| *pick(rng, &[&b'a', &b'/', &b' ', &b'\t', &0x80, &b'\r', &0]))
            .collect()
    };
    hpack_int(0, 7, text.len(), out);
    out.extend_from_slice(&text);
}

/// A PROXY header, version 1 text or version 2 binary, of every address family, with TLVs.
fn proxy_header(rng: &mut fastrand::Rng, out: &mut Vec<u8>) {
    if rng.bool() {
        let line = pick(
            rng,
            &[
                "PROXY TCP4 203.0.113.7 10.0.0.1 51234 443",
                "PROXY TCP6 2001:db8::1 ::1 1 65535",
                "PROXY UNKNOWN",
                "PROXY UNKNOWN ffff::1 ffff::2 1 2",
                "PROXY TCP4 1.2.3.4 5.6.7.8 01 2",
                "PROXY TCP4 ::1 5.6.7.8 1 2",
                "PROXY TCP6 ::ffff:1.2.3.4 ::1 0 0",
            ],
        );
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(pick(rng, &[&b"\r\n"[..], b"\r\n", b"\n", b""]));
        return;
    }
    out.extend_from_slice(b"\r\n\r\n\0\r\nQUIT\n");
    out.push(*pick(rng, &[&0x21u8, &0x21, &0x20, &0x22, &0x11]));
    let family = *pick(rng, &[&0x11u8, &0x11, &0x21, &0x12, &0x31, &0x00]);
    out.push(family);
    let mut body: Vec<u8> = match family {
        0x11 | 0x12 => (0..12).map(|_| rng.u8(..)).collect(),
        0x21 => (0..36).map(|_| rng.u8(..)).collect(),
        _ => (0..rng.usize(0..216)).map(|_| rng.u8(..)).collect(),
    };
    for _ in 0..rng.usize(0..4) {
        let length = rng.usize(0..40);
        body.push(*pick(rng, &[&0x01u8, &0x02, &0x04, &0x20, &0xea]));
        body.extend_from_slice(&(length as u16).to_be_bytes());
        body.extend((0..length).map(|_| rng.u8(..)));
    }
    if rng.u8(..8) == 0 {
        body.resize(rng.usize(1000..1100), 0);
    }
    out.extend_from_slice(&(body.len() as u16).to_be_bytes());
    out.extend_from_slice(&body);
}
