//! The real client address: the peer, or whom a trusted proxy says it forwarded for, as
//! ingress-nginx computes it (nginx's realip module with `real_ip_recursive on`).
//!
//! ```text
//!  peer ─▶ use-forwarded-headers or enable-real-ip, and peer in proxy-real-ip-cidr?
//!    ├─ no (the common request: two flags read) ─▶ the peer
//!    └─ yes ─▶ forwarded-for-header, right to left (last field line first):
//!              each address in proxy-real-ip-cidr is one more trusted hop, skip it;
//!              the first one that is not ─▶ the client
//!              every one trusted ─▶ the leftmost │ not an address ─▶ stop, keep the last good one
//! ```
//!
//! Right to left, because each proxy appends whom it heard from: the entries a trusted hop
//! wrote are true, anything left of the first untrusted one may be forged by that client.

use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;

/// The client address `values` (the forwarded-for header's field lines, in order) give for
/// a request that came from `peer`, a proxy in `trusted`.
pub(crate) fn from_forwarded<'v>(
    peer: IpAddr,
    values: impl DoubleEndedIterator<Item = &'v [u8]>,
    trusted: &[IpNet],
) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    let mut client = peer;
    // Several field lines are one list (RFC 9110 §5.3): the last line holds the last hops.
    for value in values.rev() {
        for entry in value.rsplit(|b| *b == b',') {
            let entry = entry.trim_ascii();
            if entry.is_empty() {
                continue;
            }
            if !is_trusted(&client) {
                return client;
            }
            match parse_entry(entry) {
                Some(ip) => client = ip,
                // nginx stops at what it cannot read and keeps the last address it could.
                None => return client,
            }
        }
    }
    client
}

/// One forwarded-for entry: an address, optionally with a port (`192.0.2.1:4711`,
/// `[2001:db8::1]:4711`), as nginx reads them. IPv4-mapped IPv6 addresses are IPv4.
pub(crate) fn parse_entry(entry: &[u8]) -> Option<IpAddr> {
    let text = std::str::from_utf8(entry).ok()?;
    let ip = match text.parse::<IpAddr>() {
        Ok(ip) => ip,
        Err(_) => text.parse::<SocketAddr>().ok()?.ip(),
    };
    Some(ip.to_canonical())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|n| n.parse().unwrap()).collect()
    }

    fn client(peer: &str, lines: &[&str], trusted: &[&str]) -> IpAddr {
        from_forwarded(ip(peer), lines.iter().map(|l| l.as_bytes()), &nets(trusted))
    }

    #[test]
    fn the_first_untrusted_hop_from_the_right_is_the_client() {
        let lbs = ["10.0.0.0/8"];
        // client → 10.0.0.5 (a trusted LB) → us: the LB appended the client.
        assert_eq!(
            client("10.0.0.9", &["203.0.113.7"], &lbs),
            ip("203.0.113.7")
        );
        // The client forged an entry; the LB appended the real one after it.
        assert_eq!(
            client("10.0.0.9", &["6.6.6.6, 203.0.113.7, 10.0.0.5"], &lbs),
            ip("203.0.113.7")
        );
        // Several field lines are one list; the last line is the nearest hop.
        assert_eq!(
            client("10.0.0.9", &["6.6.6.6", "203.0.113.7,10.0.0.5"], &lbs),
            ip("203.0.113.7")
        );
        // Ports and brackets as nginx reads them.
        assert_eq!(
            client("10.0.0.9", &["203.0.113.7:4711, 10.0.0.5:80"], &lbs),
            ip("203.0.113.7")
        );
        assert_eq!(
            client("10.0.0.9", &["[2001:db8::7]:4711"], &lbs),
            ip("2001:db8::7")
        );
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_says() {
        assert_eq!(
            client("198.51.100.1", &["203.0.113.7"], &["10.0.0.0/8"]),
            ip("198.51.100.1")
        );
        assert_eq!(client("10.0.0.9", &["203.0.113.7"], &[]), ip("10.0.0.9"));
    }

    #[test]
    fn all_hops_trusted_gives_the_leftmost_and_garbage_stops_the_walk() {
        let lbs = ["10.0.0.0/8"];
        assert_eq!(
            client("10.0.0.9", &["10.1.1.1, 10.2.2.2"], &lbs),
            ip("10.1.1.1")
        );
        // Not an address: the last address read stands (here the trusted hop before it).
        assert_eq!(
            client("10.0.0.9", &["203.0.113.7, unknown, 10.0.0.5"], &lbs),
            ip("10.0.0.5")
        );
        assert_eq!(client("10.0.0.9", &["garbage"], &lbs), ip("10.0.0.9"));
        // No header, or an empty one: the peer.
        assert_eq!(client("10.0.0.9", &[], &lbs), ip("10.0.0.9"));
        assert_eq!(client("10.0.0.9", &[" , "], &lbs), ip("10.0.0.9"));
    }

    #[test]
    fn mapped_ipv4_is_ipv4() {
        assert_eq!(parse_entry(b"::ffff:192.0.2.1"), Some(ip("192.0.2.1")));
        assert_eq!(parse_entry(b"192.0.2.1:"), None);
        assert_eq!(parse_entry(b"\xff"), None);
    }
}
