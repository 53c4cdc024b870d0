//! The PROXY protocol target: the parser the HTTP and HTTPS listeners run on every
//! connection's first bytes with `use-proxy-protocol`.
//!
//! ```text
//!  bytes ─▶ proxy_protocol::parse ─┬─ Complete ─▶ consumed = the header, every prefix Incomplete
//!                                   ├─ Incomplete ─▶ shorter than the longest header (a bounded wait)
//!                                   └─ refused ─▶ still refused with more bytes (final)
//!  bytes as addresses and TLVs ─▶ v1_header / v2_header ─▶ parse ─▶ the same client, the
//!                                   header's exact length, what follows untouched
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::Choices;
use crate::proxy_protocol::{self, parse, Header, Parsed, V1_MAX, V2_MAX};

/// A PROXY header (v1 text or v2 binary) and what follows it: `proxy_protocol::parse` on
/// `data`; and `data` read as two addresses and v2 TLVs, written by the upstream side's
/// writers and parsed back.
///
/// Properties: no panic; an accepted header is at most 1040 bytes and no longer than the
/// input, parses the same from exactly its bytes, and every shorter prefix of it is
/// `Incomplete` (so a header arriving in pieces is never refused); `Incomplete` only below
/// the longest header's length (the wait for more is bounded); a refusal stays a refusal
/// whatever follows; a header written for any two addresses (v2 with any TLVs up to the
/// limit) parses back to the same client and its own length.
///
/// Returns whether `data` itself was accepted.
pub fn proxy_header(data: &[u8]) -> bool {
    round_trip(&mut Choices(data));
    match parse(data) {
        Ok(Parsed::Complete { length, header }) => {
            assert!(length > 0 && length <= data.len() && length <= V2_MAX);
            assert_eq!(
                parse(&data[..length]),
                Ok(Parsed::Complete { length, header })
            );
            for cut in 0..length {
                assert_eq!(
                    parse(&data[..cut]),
                    Ok(Parsed::Incomplete),
                    "{cut} bytes of a {length}-byte header"
                );
            }
            true
        }
        Ok(Parsed::Incomplete) => {
            assert!(data.len() < V2_MAX.max(V1_MAX), "waits past the limit");
            false
        }
        Err(e) => {
            for more in [&b"\r\n"[..], &[0u8; 32], b" 1 2\r\n"] {
                let mut longer = data.to_vec();
                longer.extend_from_slice(more);
                assert!(parse(&longer).is_err(), "refused ({e}), then not");
            }
            false
        }
    }
}

/// Two addresses (and v2 TLVs) from `choices`, written and parsed back.
fn round_trip(choices: &mut Choices<'_>) {
    let source = address(choices);
    let destination = address(choices);
    let canonical = |addr: SocketAddr| SocketAddr::new(addr.ip().to_canonical(), addr.port());
    let follows = b"\x16\x03\x01 or GET / HTTP/1.1\r\n";

    let v1 = proxy_protocol::v1_header(source, destination);
    let same_family = canonical(source).is_ipv4() == canonical(destination).is_ipv4();
    let expected = if same_family {
        Header::Proxied {
            source: canonical(source),
            destination_port: destination.port(),
        }
    } else {
        Header::Local
    };
    let mut bytes = v1.clone().into_bytes();
    bytes.extend_from_slice(follows);
    assert_eq!(
        parse(&bytes),
        Ok(Parsed::Complete {
            length: v1.len(),
            header: expected
        }),
        "{v1:?}"
    );

    let mut v2 = proxy_protocol::v2_header(source, destination);
    for _ in 0..choices.below(4) {
        let length = choices.below(4) * usize::from(choices.byte());
        if v2.len() + 3 + length > V2_MAX {
            break;
        }
        v2.push(choices.byte());
        v2.extend_from_slice(&(length as u16).to_be_bytes());
        v2.extend((0..length).map(|i| i as u8));
    }
    let body = u16::try_from(v2.len() - 16).expect("at most 1024");
    v2[14..16].copy_from_slice(&body.to_be_bytes());
    let length = v2.len();
    v2.extend_from_slice(follows);
    let Ok(Parsed::Complete {
        length: read,
        header:
            Header::Proxied {
                source: read_source,
                destination_port: read_port,
            },
    }) = parse(&v2)
    else {
        panic!("a written v2 header does not parse: {v2:?}");
    };
    assert_eq!(read, length);
    assert_eq!(canonical(read_source), canonical(source));
    assert_eq!(read_port, destination.port());
}

fn address(choices: &mut Choices<'_>) -> SocketAddr {
    let ip = match choices.below(3) {
        0 => IpAddr::V4(Ipv4Addr::from(choices.array::<4>())),
        1 => IpAddr::V6(Ipv6Addr::from(choices.array::<16>())),
        _ => IpAddr::V6(Ipv4Addr::from(choices.array::<4>()).to_ipv6_mapped()),
    };
    SocketAddr::new(ip, u16::from_be_bytes(choices.array::<2>()))
}
