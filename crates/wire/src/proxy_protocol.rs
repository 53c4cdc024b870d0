//! The PROXY protocol (HAProxy's spec, versions 1 and 2): the header a load balancer writes
//! before a connection's own bytes to say whose connection it is. This is its byte side: the
//! parse of what arrives, and the writers of what goes to upstreams. Reading the socket is
//! proxy's (`proxy::proxy_protocol::read_header`, which peeks so that nothing after the
//! header is consumed).
//!
//! ```text
//!  peeked bytes ─▶ parse ─▶ v1 "PROXY TCP4 …\r\n" │ v2 binary (signature, 16-byte head, TLVs)
//!     Complete { length, header } ─▶ the caller reads exactly `length` bytes
//!     Incomplete ─▶ the caller waits for more (never past V1_MAX / V2_MAX bytes)
//!     Malformed  ─▶ the caller closes the connection
//!  source, destination ─▶ v1_header │ v2_header ─▶ bytes for an upstream
//! ```
//!
//! Version 1 is written for TCP services with `:PROXY:PROXY` (as nginx's `proxy_protocol on`),
//! version 1 or 2 for TLS passthrough hosts with `sluice.dev/ssl-passthrough-proxy-protocol`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Version 2's signature, the first 12 bytes of its header.
const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
/// Version 1's longest header (`PROXY TCP6 <39> <39> 65535 65535\r\n`), as the spec bounds it.
pub const V1_MAX: usize = 107;
/// Version 2's longest accepted header: the fixed part and addresses, and TLVs (cloud load
/// balancers add a few, tens of bytes) up to this.
pub const V2_MAX: usize = 16 + 1024;

/// What a valid header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Header {
    /// A proxied connection from `source`, made to the load balancer's `destination_port`
    /// (nginx's `$proxy_protocol_server_port`: 443 when it terminated TLS for the client).
    Proxied {
        source: SocketAddr,
        destination_port: u16,
    },
    /// The load balancer's own connection (v2 `LOCAL`, v1 `UNKNOWN`, or an address family
    /// other than TCP over IPv4/IPv6): the peer is the client.
    Local,
}

/// Why bytes are not a PROXY protocol header: what about them is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a PROXY protocol header: {0}")]
pub struct Malformed(pub &'static str);

#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    Complete {
        length: usize,
        header: Header,
    },
    /// Needs more bytes than are here.
    Incomplete,
}

/// The version 1 header saying a connection comes from `source` to `destination`, which a
/// TCP service with `:PROXY:PROXY` writes to its upstream first (nginx's `proxy_protocol on`
/// writes version 1 too). Addresses of different families (an IPv6 client announced on an
/// IPv4 listener) make `PROXY UNKNOWN`, as the spec provides.
pub fn v1_header(source: SocketAddr, destination: SocketAddr) -> String {
    let canonical = |addr: SocketAddr| SocketAddr::new(addr.ip().to_canonical(), addr.port());
    let (source, destination) = (canonical(source), canonical(destination));
    let family = match (source.ip(), destination.ip()) {
        (IpAddr::V4(_), IpAddr::V4(_)) => "TCP4",
        (IpAddr::V6(_), IpAddr::V6(_)) => "TCP6",
        _ => return "PROXY UNKNOWN\r\n".to_owned(),
    };
    format!(
        "PROXY {family} {} {} {} {}\r\n",
        source.ip(),
        destination.ip(),
        source.port(),
        destination.port()
    )
}

/// The version 2 (binary) header saying a connection comes from `source` to `destination`.
/// Addresses of different families are both written as IPv6 (an IPv4 one mapped), so the
/// client's address still gets through, as HAProxy's `send-proxy-v2` does.
pub fn v2_header(source: SocketAddr, destination: SocketAddr) -> Vec<u8> {
    let canonical = |addr: SocketAddr| SocketAddr::new(addr.ip().to_canonical(), addr.port());
    let (source, destination) = (canonical(source), canonical(destination));
    let mut header = Vec::with_capacity(16 + 36);
    header.extend_from_slice(V2_SIGNATURE);
    header.push(0x21); // version 2, PROXY
    match (source.ip(), destination.ip()) {
        (IpAddr::V4(from), IpAddr::V4(to)) => {
            header.extend_from_slice(&[0x11, 0, 12]); // TCP over IPv4, 12 bytes
            header.extend_from_slice(&from.octets());
            header.extend_from_slice(&to.octets());
        }
        (from, to) => {
            let six = |ip: IpAddr| match ip {
                IpAddr::V4(v4) => v4.to_ipv6_mapped(),
                IpAddr::V6(v6) => v6,
            };
            header.extend_from_slice(&[0x21, 0, 36]); // TCP over IPv6, 36 bytes
            header.extend_from_slice(&six(from).octets());
            header.extend_from_slice(&six(to).octets());
        }
    }
    header.extend_from_slice(&source.port().to_be_bytes());
    header.extend_from_slice(&destination.port().to_be_bytes());
    header
}

pub fn parse(bytes: &[u8]) -> Result<Parsed, Malformed> {
    let prefix = bytes.len().min(V2_SIGNATURE.len());
    if bytes[..prefix] == V2_SIGNATURE[..prefix] {
        return parse_v2(bytes);
    }
    let prefix = bytes.len().min(6);
    if bytes[..prefix] == b"PROXY "[..prefix] {
        return parse_v1(bytes);
    }
    Err(Malformed("no PROXY signature"))
}

fn parse_v1(bytes: &[u8]) -> Result<Parsed, Malformed> {
    let window = &bytes[..bytes.len().min(V1_MAX)];
    let Some(end) = window.windows(2).position(|w| w == b"\r\n") else {
        return if bytes.len() >= V1_MAX {
            Err(Malformed("version 1 header longer than 107 bytes"))
        } else {
            Ok(Parsed::Incomplete)
        };
    };
    let line = std::str::from_utf8(&window[6..end])
        .map_err(|_| Malformed("version 1 header not ASCII"))?;
    let fields: Vec<&str> = line.split(' ').collect();
    let header = match fields.as_slice() {
        ["UNKNOWN", ..] => Header::Local,
        [family @ ("TCP4" | "TCP6"), source, destination, source_port, destination_port] => {
            let source: IpAddr = source
                .parse()
                .map_err(|_| Malformed("version 1 source address"))?;
            let destination: IpAddr = destination
                .parse()
                .map_err(|_| Malformed("version 1 destination address"))?;
            if source.is_ipv4() != (*family == "TCP4") || destination.is_ipv4() != source.is_ipv4()
            {
                return Err(Malformed("version 1 address of the wrong family"));
            }
            let port = |text: &str| {
                // Decimal without a leading zero or sign, as the spec writes ports.
                if text.is_empty() || (text.len() > 1 && text.starts_with('0')) {
                    return None;
                }
                text.parse::<u16>().ok()
            };
            let source_port = port(source_port).ok_or(Malformed("version 1 source port"))?;
            let destination_port =
                port(destination_port).ok_or(Malformed("version 1 destination port"))?;
            Header::Proxied {
                source: SocketAddr::new(source, source_port),
                destination_port,
            }
        }
        _ => return Err(Malformed("version 1 fields")),
    };
    Ok(Parsed::Complete {
        length: end + 2,
        header,
    })
}

fn parse_v2(bytes: &[u8]) -> Result<Parsed, Malformed> {
    if bytes.len() < 16 {
        return Ok(Parsed::Incomplete);
    }
    let version_command = bytes[12];
    if version_command >> 4 != 2 {
        return Err(Malformed("version 2 header of another version"));
    }
    let command = version_command & 0x0f;
    let family = bytes[13];
    let length = 16 + usize::from(u16::from_be_bytes([bytes[14], bytes[15]]));
    if length > V2_MAX {
        return Err(Malformed("version 2 header longer than 1040 bytes"));
    }
    if bytes.len() < length {
        return Ok(Parsed::Incomplete);
    }
    let body = &bytes[16..length];
    let header = match (command, family) {
        (0x0, _) => Header::Local,
        (0x1, 0x11) => {
            // TCP over IPv4: source, destination (4 bytes each), source port, destination port.
            if body.len() < 12 {
                return Err(Malformed("version 2 IPv4 addresses cut short"));
            }
            let ip = Ipv4Addr::new(body[0], body[1], body[2], body[3]);
            let port = u16::from_be_bytes([body[8], body[9]]);
            Header::Proxied {
                source: SocketAddr::new(IpAddr::V4(ip), port),
                destination_port: u16::from_be_bytes([body[10], body[11]]),
            }
        }
        (0x1, 0x21) => {
            if body.len() < 36 {
                return Err(Malformed("version 2 IPv6 addresses cut short"));
            }
            let octets: [u8; 16] = body[..16].try_into().expect("16 bytes");
            let port = u16::from_be_bytes([body[32], body[33]]);
            Header::Proxied {
                source: SocketAddr::new(IpAddr::V6(Ipv6Addr::from(octets)), port),
                destination_port: u16::from_be_bytes([body[34], body[35]]),
            }
        }
        // UDP, Unix sockets, unspecified: nothing an HTTP client address can be made of.
        (0x1, _) => Header::Local,
        _ => return Err(Malformed("version 2 command")),
    };
    Ok(Parsed::Complete { length, header })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_written_upstream_reads_back_as_what_it_says() {
        let client: SocketAddr = "203.0.113.7:51234".parse().unwrap();
        let listener: SocketAddr = "10.0.0.1:9000".parse().unwrap();
        let header = v1_header(client, listener);
        assert_eq!(header, "PROXY TCP4 203.0.113.7 10.0.0.1 51234 9000\r\n");
        let Ok(Parsed::Complete {
            length,
            header: read,
        }) = parse(header.as_bytes())
        else {
            panic!("{header:?} does not parse");
        };
        assert_eq!(length, header.len());
        assert_eq!(
            read,
            Header::Proxied {
                source: client,
                destination_port: 9000
            }
        );
        let six: SocketAddr = "[2001:db8::7]:1".parse().unwrap();
        assert!(v1_header(six, "[::1]:2".parse().unwrap())
            .starts_with("PROXY TCP6 2001:db8::7 ::1 1 2"));
        assert_eq!(v1_header(six, listener), "PROXY UNKNOWN\r\n");
        // An IPv4-mapped IPv6 peer (a dual-stack listener) is written as IPv4.
        let mapped: SocketAddr = "[::ffff:203.0.113.7]:51234".parse().unwrap();
        assert!(v1_header(mapped, listener).starts_with("PROXY TCP4 203.0.113.7"));
    }

    fn complete(bytes: &[u8]) -> (usize, Header) {
        match parse(bytes) {
            Ok(Parsed::Complete { length, header }) => (length, header),
            Ok(Parsed::Incomplete) => panic!("incomplete: {bytes:?}"),
            Err(e) => panic!("{e}: {bytes:?}"),
        }
    }

    fn v2(command: u8, family: u8, body: &[u8]) -> Vec<u8> {
        let mut bytes = V2_SIGNATURE.to_vec();
        bytes.push(0x20 | command);
        bytes.push(family);
        bytes.extend_from_slice(&(body.len() as u16).to_be_bytes());
        bytes.extend_from_slice(body);
        bytes
    }

    #[test]
    fn the_version_2_header_written_upstream_reads_back_as_what_it_says() {
        let client: SocketAddr = "203.0.113.7:51234".parse().unwrap();
        let listener: SocketAddr = "10.0.0.1:443".parse().unwrap();
        let header = v2_header(client, listener);
        assert_eq!(header.len(), 16 + 12);
        assert_eq!(header[12..16], [0x21, 0x11, 0, 12]);
        assert_eq!(
            complete(&header),
            (
                header.len(),
                Header::Proxied {
                    source: client,
                    destination_port: 443
                }
            )
        );
        let six: SocketAddr = "[2001:db8::7]:1".parse().unwrap();
        let header = v2_header(six, "[::1]:443".parse().unwrap());
        assert_eq!(
            complete(&header),
            (
                16 + 36,
                Header::Proxied {
                    source: six,
                    destination_port: 443
                }
            )
        );
        // Mixed families: both as IPv6, the IPv4 one mapped; the client's address survives.
        let header = v2_header(client, "[::1]:443".parse().unwrap());
        let (_, Header::Proxied { source, .. }) = complete(&header) else {
            panic!("not proxied");
        };
        assert_eq!(
            SocketAddr::new(source.ip().to_canonical(), source.port()),
            client
        );
        // A mapped peer (a dual-stack listener) is written as IPv4.
        let mapped: SocketAddr = "[::ffff:203.0.113.7]:51234".parse().unwrap();
        assert_eq!(v2_header(mapped, listener)[13], 0x11);
    }

    #[test]
    fn version_1_headers_name_the_source_and_leave_what_follows() {
        let text = b"PROXY TCP4 203.0.113.7 10.0.0.1 51234 443\r\nGET / HTTP/1.1\r\n";
        let (length, header) = complete(text);
        assert_eq!(&text[length..], b"GET / HTTP/1.1\r\n");
        assert_eq!(
            header,
            Header::Proxied {
                source: "203.0.113.7:51234".parse().unwrap(),
                destination_port: 443
            }
        );
        let (_, header) = complete(b"PROXY TCP6 2001:db8::1 2001:db8::2 1 80\r\n");
        assert_eq!(
            header,
            Header::Proxied {
                source: "[2001:db8::1]:1".parse().unwrap(),
                destination_port: 80
            }
        );
        assert_eq!(complete(b"PROXY UNKNOWN\r\n"), (15, Header::Local));
        assert_eq!(
            complete(b"PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n").1,
            Header::Local
        );
    }

    #[test]
    fn version_2_headers_name_the_source_and_skip_tlvs() {
        let mut body = vec![198, 51, 100, 9, 10, 0, 0, 1];
        body.extend_from_slice(&40000u16.to_be_bytes());
        body.extend_from_slice(&443u16.to_be_bytes());
        body.extend_from_slice(&[0x04, 0x00, 0x02, 0xab, 0xcd]); // a TLV
        let mut bytes = v2(1, 0x11, &body);
        let header_length = bytes.len();
        bytes.extend_from_slice(b"\x16\x03\x01"); // a TLS ClientHello follows
        assert_eq!(
            complete(&bytes),
            (
                header_length,
                Header::Proxied {
                    source: "198.51.100.9:40000".parse().unwrap(),
                    destination_port: 443
                }
            )
        );
        let mut body = [0u8; 36];
        body[15] = 1; // ::1
        body[32..34].copy_from_slice(&8080u16.to_be_bytes());
        assert_eq!(
            complete(&v2(1, 0x21, &body)).1,
            Header::Proxied {
                source: "[::1]:8080".parse().unwrap(),
                destination_port: 0
            }
        );
        assert_eq!(complete(&v2(0, 0x00, &[])).1, Header::Local);
        assert_eq!(complete(&v2(1, 0x31, &[0; 216])).1, Header::Local);
    }

    #[test]
    fn partial_headers_wait_and_bad_ones_are_refused() {
        assert!(matches!(parse(b"PRO"), Ok(Parsed::Incomplete)));
        assert!(matches!(
            parse(b"PROXY TCP4 1.2.3.4 5.6.7.8 1"),
            Ok(Parsed::Incomplete)
        ));
        assert!(matches!(parse(&V2_SIGNATURE[..5]), Ok(Parsed::Incomplete)));
        let whole = v2(1, 0x11, &[0; 12]);
        assert!(matches!(parse(&whole[..20]), Ok(Parsed::Incomplete)));
        for bad in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"\x16\x03\x01\x02\x00",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1 99999\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n",
            b"PROXY TCP4 2001:db8::1 5.6.7.8 1 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",
            b"PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n",
            b"PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n",
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        assert!(parse(&[b'P', b'R', b'O', b'X', b'Y', b' ', b'A'].repeat(20)).is_err());
        let mut wrong_version = v2(1, 0x11, &[0; 12]);
        wrong_version[12] = 0x11;
        assert!(parse(&wrong_version).is_err());
        let mut too_long = v2(1, 0x11, &[0; 12]);
        too_long[14..16].copy_from_slice(&5000u16.to_be_bytes());
        assert!(parse(&too_long).is_err());
        assert!(parse(&v2(1, 0x11, &[0; 8])).is_err());
    }
}
