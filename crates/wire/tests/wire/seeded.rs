//! The fuzz targets (`wire::fuzz`, also run by cargo-fuzz from `fuzz/`) as property tests on
//! stable: a seeded generator makes valid, mutated and hostile inputs, thousands per target,
//! the same ones on every run (`wire::fuzz::seeded::run`). A failure prints the seed and the
//! input.
//!
//! ```text
//!  seed ─▶ Rng ─▶ frames │ HPACK blocks │ PROXY headers │ ClientHello records │ DNS replies
//!        ─▶ as made │ mutated │ hostile ─▶ wire::fuzz::{h2_frames, hpack_blocks, hpack_lists,
//!                                                     proxy_header, client_hello, dns_reply}
//! ```

use wire::fuzz::seeded::{pick, run, Rng};
use wire::h2::hpack::write_int;

/// Inputs per target: enough to reach every branch of the codec many times over, few enough
/// to finish in seconds in a debug build.
const CASES: u64 = 4000;

#[test]
fn client_hellos_hold_their_properties() {
    run(CASES, wire::fuzz::client_hello, |rng| {
        let choices: Vec<u8> = (0..rng.usize(40..200)).map(|_| rng.u8(..)).collect();
        let mut data = wire::fuzz::client_hello_record(&choices);
        data.extend_from_slice(pick(rng, &[&b""[..], b"\x16\x03\x03\x00\x01", b"GET"]));
        data
    });
}

#[test]
fn dns_replies_hold_their_properties() {
    run(CASES, wire::fuzz::dns_reply, |rng| {
        let choices: Vec<u8> = (0..rng.usize(16..400)).map(|_| rng.u8(..)).collect();
        let mut data = wire::fuzz::dns_reply_message(&choices);
        if rng.u8(..3) == 0 {
            dns_hostility(rng, &mut data);
        }
        data
    });
}

#[test]
fn h2_frames_hold_their_properties() {
    run(CASES, wire::fuzz::h2_frames, |rng| {
        let mut data = Vec::new();
        for _ in 0..rng.usize(1..=6) {
            h2_frame(rng, &mut data);
        }
        data
    });
}

#[test]
fn hpack_blocks_decode_as_an_independent_decoder_decodes_them() {
    run(CASES, wire::fuzz::hpack_blocks, |rng| {
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
    run(CASES, wire::fuzz::hpack_lists, |rng| {
        (0..rng.usize(1..600)).map(|_| rng.u8(..)).collect()
    });
}

#[test]
fn proxy_headers_hold_their_properties() {
    run(CASES, wire::fuzz::proxy_header, |rng| {
        let mut data = Vec::new();
        proxy_header(rng, &mut data);
        data.extend_from_slice(pick(
            rng,
            &[&b"GET / HTTP/1.1\r\n"[..], b"\x16\x03\x01", b""],
        ));
        data
    });
}

/// One HTTP/2 frame of any type a client sends (and some it may not), mostly well formed.
pub(crate) fn h2_frame(rng: &mut Rng, out: &mut Vec<u8>) {
    let kind = rng.u8(..12);
    let mut flags = *pick(rng, &[&0u8, &0x1, &0x4, &0x5, &0x8, &0x20, &0x2d, &0xff]);
    let stream: u32 = *pick(rng, &[&1u32, &1, &3, &0, &2, &0x7fff_ffff, &0x8000_0001]);
    let mut payload = Vec::new();
    let padded = |rng: &mut Rng, payload: &mut Vec<u8>, flags: &mut u8, body: &[u8]| {
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
fn hpack_block(rng: &mut Rng) -> Vec<u8> {
    let mut block = Vec::new();
    for _ in 0..rng.usize(0..3).saturating_sub(1) {
        let size = *pick(rng, &[&0usize, &100, &256, &4096, &5000]);
        write_int(size, 5, 0x20, &mut block);
    }
    for _ in 0..rng.usize(0..8) {
        match rng.u8(..6) {
            0 => write_int(rng.usize(1..75), 7, 0x80, &mut block),
            kind => {
                let (prefix, flags) = match kind {
                    1 | 2 => (6, 0x40),
                    3 => (4, 0x00),
                    _ => (4, 0x10),
                };
                if rng.bool() {
                    write_int(0, prefix, flags, &mut block);
                    hpack_string(rng, &mut block, true);
                } else {
                    write_int(rng.usize(1..70), prefix, flags, &mut block);
                }
                hpack_string(rng, &mut block, false);
            }
        }
    }
    block.truncate(255);
    block
}

fn hpack_string(rng: &mut Rng, out: &mut Vec<u8>, name: bool) {
    /// RFC 7541 C.4: "www.example.com", "no-cache", "custom-key", "custom-value" Huffman-coded.
    const HUFFMAN: [&[u8]; 4] = [
        b"\xf1\xe3\xc2\xe5\xf2\x3a\x6b\xa0\xab\x90\xf4\xff",
        b"\xa8\xeb\x10\x64\x9c\xbf",
        b"\x25\xa8\x49\xe9\x5b\xa9\x7d\x7f",
        b"\x25\xa8\x49\xe9\x5b\xb8\xe8\xb4\xbf",
    ];
    if rng.u8(..4) == 0 {
        let coded = HUFFMAN[rng.usize(..HUFFMAN.len())];
        write_int(coded.len(), 7, 0x80, out);
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
    write_int(text.len(), 7, 0, out);
    out.extend_from_slice(&text);
}

/// A PROXY header, version 1 text or version 2 binary, of every address family, with TLVs.
fn proxy_header(rng: &mut Rng, out: &mut Vec<u8>) {
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

/// What a hostile server (or a spoofer that guessed the id) does to a DNS reply: counts that
/// claim records which are not there, or a record appended to the additional section whose
/// owner is a pointer loop, a forward pointer, a chain of pointers, a long name (up to 255
/// bytes or over) or a label of no defined type, and whose A data is 4 or 5 bytes.
fn dns_hostility(rng: &mut Rng, data: &mut Vec<u8>) {
    if data.len() < 12 {
        return;
    }
    let end = data.len() as u16;
    let pointer = |to: u16| (0xc000 | to).to_be_bytes();
    let owner: Vec<u8> = match rng.u8(..7) {
        0 => {
            let at = *pick(rng, &[&6usize, &8, &10]);
            let count = u16::from_be_bytes([data[at], data[at + 1]]);
            let more = count.saturating_add(*pick(rng, &[&1u16, &2, &0x100, &u16::MAX]));
            data[at..at + 2].copy_from_slice(&more.to_be_bytes());
            return;
        }
        1 => pointer(end).to_vec(),
        2 => pointer(end + 2).to_vec(),
        3 => [&[1, b'a'][..], &pointer(end)].concat(),
        4 => {
            // A record of another type whose data is pointers, each to the one before, and
            // an owner through all of them.
            let mut chain = b"\xc0\x0c\x00\x10\x00\x01\x00\x00\x00\x05".to_vec();
            let links = rng.usize(100..140) as u16;
            chain.extend_from_slice(&(2 * links).to_be_bytes());
            let first = end + chain.len() as u16;
            chain.extend_from_slice(&pointer(12));
            for link in 1..links {
                chain.extend_from_slice(&pointer(first + 2 * (link - 1)));
            }
            data.extend_from_slice(&chain);
            bump(data, 10);
            pointer(first + 2 * (links - 1)).to_vec()
        }
        5 => [&[63][..], &[b'x'; 63]].concat().repeat(rng.usize(3..6)),
        _ => vec![*pick(rng, &[&0x40u8, &0x80, &0x41, &0xbf])],
    };
    data.extend_from_slice(&owner);
    if owner.len() >= 64 && owner.len() < 256 {
        data.push(0);
    }
    let length: &[u8] = if rng.bool() { b"\x00\x05" } else { b"\x00\x04" };
    data.extend_from_slice(b"\x00\x01\x00\x01\x00\x00\x00\x3c");
    data.extend_from_slice(length);
    data.extend_from_slice(&[10, 0, 0, 1, 2][..usize::from(length[1])]);
    bump(data, 10);
}

/// Adds one to the 16-bit count at `at`.
fn bump(data: &mut [u8], at: usize) {
    let count = u16::from_be_bytes([data[at], data[at + 1]]).wrapping_add(1);
    data[at..at + 2].copy_from_slice(&count.to_be_bytes());
}
