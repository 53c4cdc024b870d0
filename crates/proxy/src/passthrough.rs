//! TLS passthrough (`ssl-passthrough` with `--enable-ssl-passthrough`): on the HTTPS listener,
//! the server name a client's ClientHello asks for is read without taking any byte off the
//! socket; a passthrough host's connection is spliced to an endpoint of its `/` path's
//! backend, still encrypted, and every other connection is terminated here as usual.
//!
//! ```text
//!  accepted ─▶ (PROXY header) ─▶ peek the first TLS record ─▶ SNI in Compiled.passthrough?
//!     yes ─▶ the route's allow/deny lists on the client address: refused ─▶ closed
//!            ─▶ pick an endpoint (the route's balancer; next one on a failed connect)
//!            ─▶ (sluice.dev/ssl-passthrough-proxy-protocol) PROXY v1/v2 header naming the
//!               client (as the load balancer's header said, with use-proxy-protocol)
//!            ─▶ splice(2) both ways (`zero_copy`) until both sides closed or
//!               proxy-stream-timeout of silence
//!     no  ─▶ TLS handshake here (ALPN, HTTP/2 or HTTP/1.1)
//! ```
//! Endpoints are the backend's current ones, as for HTTP: a new connection goes to an endpoint
//! of the current set; an established one stays on its endpoint whatever the set becomes
//! (ingress-nginx's passthrough proxy dials the Service's cluster IP instead).

use std::net::SocketAddr;

use model::{ProxyProtocolVersion, Route, Settings};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use wire::tls::{client_hello_name, Hello};

use crate::peek;
use crate::proxy_protocol;
use crate::tunnel::Traffic;
use crate::upstreams::Upstreams;

/// A ClientHello is one record of at most 16 KiB (and its 5-byte header); a larger or split
/// one is terminated here, as if its name were not a passthrough host.
const MAX_RECORD: usize = 5 + 16 * 1024;

/// What a look at the first bytes decided.
enum Looked {
    /// The lower-cased server name, if the ClientHello has one (and there is a ClientHello).
    Name(Option<String>),
    /// The record is longer than the buffer looked into.
    Larger,
}

/// The server name the client's first TLS record asks for, read without consuming it.
/// `None`: none (or not TLS); the caller bounds the wait.
pub(crate) async fn peek_server_name(stream: &TcpStream) -> Option<String> {
    // Most ClientHellos fit here (post-quantum key shares included): no allocation, little to
    // zero; a longer record is peeked again into a buffer of its size.
    let mut small = [0u8; 4096];
    let room = small.len();
    let looked = peek::until(stream, &mut small, |seen| look(seen, room))
        .await
        .ok()?;
    let looked = match looked {
        Looked::Larger => {
            let mut large = vec![0u8; MAX_RECORD];
            peek::until(stream, &mut large, |seen| look(seen, MAX_RECORD))
                .await
                .ok()?
        }
        decided => decided,
    };
    match looked {
        Looked::Name(name) => name,
        Looked::Larger => None,
    }
}

/// What the first bytes, peeked into a buffer of `room` bytes, say; `None` while more bytes
/// may complete the record.
fn look(seen: &[u8], room: usize) -> Option<Looked> {
    match client_hello_name(seen) {
        // The client closed without a byte.
        _ if seen.is_empty() => Some(Looked::Name(None)),
        Hello::Named(name) => Some(Looked::Name(Some(name.to_ascii_lowercase()))),
        Hello::Anonymous => Some(Looked::Name(None)),
        Hello::Incomplete if seen.len() < room => None,
        Hello::Incomplete if room < MAX_RECORD => Some(Looked::Larger),
        Hello::Incomplete => Some(Looked::Name(None)),
    }
}

/// Splices `client` to an endpoint of `route`'s backend until either side closes or
/// `proxy-stream-timeout` passes without a byte. A failed connect tries the next endpoint as
/// the TCP services do (`proxy-stream-next-upstream*`). `peer` is the client as far as Sluice believes it (the
/// PROXY header's source from a trusted load balancer): what a PROXY header upstream names.
pub(crate) async fn pass(
    upstreams: &Upstreams,
    client: TcpStream,
    route: &Route,
    settings: &Settings,
    peer: SocketAddr,
) {
    if let Some(why) = refusal(route, peer) {
        // TCP has no 403: the connection is closed before any endpoint is dialled.
        tracing::info!(%peer, ingress = %route.ingress, why, "passthrough: client refused; closed");
        upstreams.stats.borrow_mut().passthrough.refused += 1;
        return;
    }
    let mut tried: Vec<SocketAddr> = Vec::new();
    let connected = crate::stream::connect(
        upstreams,
        &route.backend,
        settings,
        route.policy.upstream.connect_timeout,
        &mut tried,
        "TLS passthrough",
    )
    .await;
    let upstream = connected.map(|(stream, _)| stream);
    let Some(mut upstream) = upstream else {
        // Nothing to answer with: the client speaks TLS to a server it will never reach.
        tracing::debug!(%peer, ingress = %route.ingress, "passthrough: no endpoint could be reached; closed");
        upstreams.stats.borrow_mut().passthrough.failed += 1;
        return;
    };
    let _ = upstream.set_nodelay(true);
    if let Some(version) = route.policy.passthrough_proxy_protocol {
        // Before any byte of the client's: the ClientHello is still in the client's socket.
        let destination = client.local_addr().unwrap_or(peer);
        let header = match version {
            ProxyProtocolVersion::V1 => proxy_protocol::v1_header(peer, destination).into_bytes(),
            ProxyProtocolVersion::V2 => proxy_protocol::v2_header(peer, destination),
        };
        if let Err(e) = upstream.write_all(&header).await {
            tracing::debug!(%peer, error = %e, "passthrough: writing the PROXY header failed; closed");
            upstreams.stats.borrow_mut().passthrough.failed += 1;
            return;
        }
    }
    upstreams.stats.borrow_mut().passthrough.passed += 1;
    let idle = settings.proxy_stream_timeout;
    if let Err(e) = crate::zero_copy::relay(&client, &upstream, idle, &Traffic::default()).await {
        tracing::debug!(%peer, error = %e, "passthrough connection ended");
    }
}

/// Why the route's access rules refuse this client, if they do: the allow- and deny-lists
/// hold for passed-through connections as for requests, on the same address (the peer, or
/// the PROXY header's source from a trusted load balancer), and a refused route (a list
/// that cannot be read, authentication not implemented) passes nothing through.
pub(crate) fn refusal(route: &Route, peer: SocketAddr) -> Option<&'static str> {
    let policy = &route.policy;
    if policy.denied.is_some() {
        Some("the route is refused (see its diagnostics)")
    } else if !policy.access.is_open() && !policy.access.allows(peer.ip()) {
        Some("not allowed by whitelist-source-range / denylist-source-range")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ClientHello record as rustls writes it for `name` (and one without SNI for `None`).
    fn hello(name: Option<&str>) -> Vec<u8> {
        use std::sync::Arc;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        config.enable_sni = name.is_some();
        let server =
            rustls::pki_types::ServerName::try_from(name.unwrap_or("x.example").to_owned())
                .unwrap();
        let mut client = rustls::ClientConnection::new(Arc::new(config), server).unwrap();
        let mut out = Vec::new();
        client.write_tls(&mut out).unwrap();
        out
    }

    #[test]
    fn the_server_name_is_read_from_a_real_client_hello() {
        let record = hello(Some("Pass.Example.com"));
        assert_eq!(client_hello_name(&record), Hello::Named("Pass.Example.com"));
        assert_eq!(client_hello_name(&hello(None)), Hello::Anonymous);
        // Every prefix is incomplete, never a wrong answer.
        for cut in 0..record.len() {
            assert_eq!(
                client_hello_name(&record[..cut]),
                Hello::Incomplete,
                "{cut}"
            );
        }
    }

    #[test]
    fn what_is_not_a_client_hello_is_terminated_here() {
        assert_eq!(client_hello_name(b"GET / HTTP/1.1\r\n"), Hello::Anonymous);
        assert_eq!(
            client_hello_name(b"\x16\x03\x01\x00\x04\x02\x00\x00\x00"),
            Hello::Anonymous
        );
        let mut bad_name = hello(Some("pass.example.com"));
        let at = bad_name
            .windows(16)
            .position(|w| w == b"pass.example.com")
            .unwrap();
        bad_name[at] = b'/';
        assert_eq!(client_hello_name(&bad_name), Hello::Anonymous);
        let mut short = hello(Some("pass.example.com"));
        short[8] = 0xff; // a handshake length beyond the record
        assert_eq!(client_hello_name(&short), Hello::Anonymous);
    }
}
