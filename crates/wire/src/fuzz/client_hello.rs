//! The ClientHello target: the parser the HTTPS listener runs on every connection's first
//! TLS record with TLS passthrough on. No independent implementation reads a server name out
//! of raw bytes offline, so the target checks invariants, and builds ClientHellos whose name
//! it knows.
//!
//! ```text
//!  bytes ─▶ client_hello_name ─┬─ Named(name) ─▶ a host name (letters, digits, `-`, `.`),
//!                              │                 lying inside the record, lower-cased a
//!                              │                 valid lower-case host
//!                              ├─ Incomplete ─▶ a record not all here (5 + its length)
//!                              └─ decided ─▶ the same from exactly the record's bytes,
//!                                            whatever follows; every prefix Incomplete
//!  bytes as a name and the ClientHello's other parts ─▶ a record ─▶ exactly that name (none
//!                              when the name is not a host name), every prefix Incomplete
//! ```

use super::Choices;
use crate::tls::{client_hello_name, Hello};

/// A ClientHello record: `tls::client_hello_name` on `data`; and `data` read as a server
/// name and the other parts of a ClientHello, built into a record and read back.
///
/// Properties: no panic; a name returned is a non-empty host name (letters, digits, hyphens,
/// dots) taken from inside the record, and lower-cased it is a valid lower-case host;
/// `Incomplete` only while the record is not all there; a decided answer is the same from the
/// record's bytes alone and every shorter prefix of the record is `Incomplete` (the caller
/// peeks again as bytes arrive, so the answer does not depend on how they arrive); a
/// ClientHello built with a known name gives exactly that name, or `Anonymous` when the name
/// is not a host name or there is none.
///
/// Returns whether `data` itself named a server.
pub fn client_hello(data: &[u8]) -> bool {
    round_trip(&mut Choices(data));
    let answer = client_hello_name(data);
    let record = record_length(data);
    match (&answer, record) {
        (Hello::Incomplete, Some(length)) => {
            assert!(data.len() < length, "a whole record was incomplete")
        }
        (Hello::Incomplete, None) => {
            assert!(data.len() < 5 && data.first().is_none_or(|b| *b == 22))
        }
        (_, Some(length)) => {
            assert!(data.len() >= length, "decided before the record was whole");
            assert_eq!(
                client_hello_name(&data[..length]),
                answer,
                "the bytes after the record changed the answer"
            );
            for cut in cuts(length) {
                assert_eq!(
                    client_hello_name(&data[..cut]),
                    Hello::Incomplete,
                    "a prefix of {cut} bytes of a {length}-byte record was decided"
                );
            }
        }
        (Hello::Named(_), None) => panic!("a name out of something not a TLS handshake"),
        (Hello::Anonymous, None) => {}
    }
    let Hello::Named(name) = answer else {
        return false;
    };
    assert!(is_host(name.as_bytes()), "{name:?} is not a host name");
    let lower = name.to_ascii_lowercase();
    assert!(
        is_host(lower.as_bytes()) && !lower.bytes().any(|b| b.is_ascii_uppercase()),
        "{lower:?}"
    );
    // Borrowed from the record itself, not made up.
    let inside = data[5..record.expect("a named record")].as_ptr_range();
    let name_range = name.as_bytes().as_ptr_range();
    assert!(inside.start <= name_range.start && name_range.end <= inside.end);
    true
}

/// The whole record's length (5-byte header included) when `data` starts a handshake record.
fn record_length(data: &[u8]) -> Option<usize> {
    match data {
        [22, _, _, high, low, ..] => Some(5 + usize::from(u16::from_be_bytes([*high, *low]))),
        _ => None,
    }
}

/// Prefix lengths to try below `length`: the record's header, its edges and a few between.
fn cuts(length: usize) -> impl Iterator<Item = usize> {
    [
        0,
        1,
        4,
        5,
        6,
        length / 3,
        length / 2,
        length.saturating_sub(1),
    ]
    .into_iter()
    .filter(move |&cut| cut < length)
}

/// A server name as RFC 6066 and the parser take it: non-empty, letters, digits, `-`, `.`.
fn is_host(name: &[u8]) -> bool {
    !name.is_empty()
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'.')
}

/// A ClientHello record made from `data` read as choices (as `client_hello` builds them):
/// what the seeded runs start from.
pub fn client_hello_record(data: &[u8]) -> Vec<u8> {
    let mut choices = Choices(data);
    let name = server_name(&mut choices);
    build(&mut choices, (!name.is_empty()).then_some(&name[..]))
}

/// Builds a ClientHello from `choices` (its name, the parts before and after it) and checks
/// that exactly its name comes back, from the whole record and from no prefix of it.
fn round_trip(choices: &mut Choices<'_>) {
    let name = server_name(choices);
    let record = build(choices, (!name.is_empty()).then_some(&name[..]));
    let expected = match std::str::from_utf8(&name) {
        Ok(text) if is_host(&name) => Hello::Named(text),
        _ => Hello::Anonymous,
    };
    assert_eq!(client_hello_name(&record), expected, "{record:?}");
    for cut in 0..record.len() {
        assert_eq!(
            client_hello_name(&record[..cut]),
            Hello::Incomplete,
            "{cut} bytes of {record:?}"
        );
    }
    // Whatever follows the record (the rest of the handshake, another record) changes nothing.
    let mut followed = record.clone();
    followed.extend((0..choices.below(8)).map(|_| choices.byte()));
    assert_eq!(client_hello_name(&followed), expected);
}

/// A server name: mostly a host name in mixed case, sometimes with a byte no host name has,
/// sometimes none (empty: no server_name extension).
fn server_name(choices: &mut Choices<'_>) -> Vec<u8> {
    const NAME_BYTES: &[u8] = b"abcxyzABCXYZ0189-.";
    match choices.below(8) {
        // No server_name extension at all.
        0 => Vec::new(),
        // A byte no host name has (`_`, `/`, NUL, a space, UTF-8).
        1 => {
            let mut name = b"bad.example".to_vec();
            let at = choices.below(name.len());
            name[at] = [b'_', b'/', 0, b' ', 0xc3][choices.below(5)];
            name
        }
        _ => (0..1 + choices.below(70))
            .map(|_| NAME_BYTES[choices.below(NAME_BYTES.len())])
            .collect(),
    }
}

/// A TLS record holding a ClientHello (RFC 8446 §4.1.2) with `name` in its server_name
/// extension (RFC 6066 §3), other extensions around it, and sizes chosen by `choices`.
fn build(choices: &mut Choices<'_>, name: Option<&[u8]>) -> Vec<u8> {
    let mut body = vec![3, 3]; // legacy_version: TLS 1.2
    body.extend(choices.array::<32>()); // random
    let session = choices.below(33);
    body.push(session as u8);
    body.extend((0..session).map(|_| choices.byte()));
    let suites = 1 + choices.below(8);
    body.extend_from_slice(&(2 * suites as u16).to_be_bytes());
    for _ in 0..suites {
        body.extend_from_slice(&[0x13, choices.byte()]);
    }
    body.extend_from_slice(&[1, 0]); // compression: null
    let mut extensions = Vec::new();
    for _ in 0..choices.below(3) {
        other_extension(choices, &mut extensions);
    }
    if let Some(name) = name {
        let mut list = Vec::new();
        if choices.below(4) == 0 {
            // A name of another type first: not a host name, skipped.
            list.extend_from_slice(&[7, 0, 2, b'x', b'y']);
        }
        list.push(0); // host_name
        list.extend_from_slice(&(name.len() as u16).to_be_bytes());
        list.extend_from_slice(name);
        extensions.extend_from_slice(&[0, 0]); // server_name
        extensions.extend_from_slice(&(list.len() as u16 + 2).to_be_bytes());
        extensions.extend_from_slice(&(list.len() as u16).to_be_bytes());
        extensions.extend_from_slice(&list);
    }
    for _ in 0..choices.below(3) {
        other_extension(choices, &mut extensions);
    }
    body.extend_from_slice(&(extensions.len() as u16).to_be_bytes());
    body.extend_from_slice(&extensions);
    let mut handshake = vec![1]; // ClientHello
    handshake.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    handshake.extend_from_slice(&body);
    let mut record = vec![22, 3, 1];
    record.extend_from_slice(&(handshake.len() as u16).to_be_bytes());
    record.extend_from_slice(&handshake);
    record
}

/// An extension other than server_name (supported_groups, ALPN, key_share, unknown ones),
/// with bytes of no meaning to the parser.
fn other_extension(choices: &mut Choices<'_>, out: &mut Vec<u8>) {
    let kind: u16 = [10, 16, 43, 51, 0xfe0d, 0x1a1a][choices.below(6)];
    let length = choices.below(40);
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&(length as u16).to_be_bytes());
    out.extend((0..length).map(|_| choices.byte()));
}
