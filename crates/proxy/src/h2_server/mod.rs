//! Sluice's own HTTP/2 server, for client connections (TLS with ALPN `h2`, and `use-h2c`).
//!
//! ```text
//!  socket ─▶ conn::Connection ─frames─▶ wire::h2::frame::parse
//!               │                       ─HEADERS─▶ wire::h2::hpack::Decoder ─▶ request
//!               │                                                  ─▶ stream task:
//!               │                       Pipeline::respond (the one request pipeline)
//!               ◀──── stream::Shared.out ◀── HEADERS (hpack encode) + DATA + trailers
//! ```
//!
//! Why not hyper's (h2's) server: h2 keeps a 16 KiB write buffer, an 8 KiB read buffer and
//! a 4 KiB HPACK buffer for a connection's whole life, so an idle HTTP/2 connection cost
//! twice nginx's (issue 15). Here a connection between requests holds its HPACK table (the
//! protocol's state) and a few hundred bytes: reads go through the worker's scratch buffer,
//! only an incomplete frame's bytes are kept, and the write queue is given back once
//! written. Upstreams get the same codecs from the other side (`h2_client`); hyper and the h2
//! crate remain only in the OTLP exporter (`otlp`).

mod conn;
mod request;
mod resets;
mod stream;
#[cfg(test)]
mod tests;

pub(crate) use conn::{Connection, Limits};
pub(crate) use stream::{RequestBody, TunnelCount, Upgrade};

/// RFC 9113 §8.2.2: fields that describe an HTTP/1.1 connection and do not exist in HTTP/2
/// (`te` apart: it may say "trailers"). A request carrying one is malformed; a response
/// leaves without them.
fn is_connection_field(name: &http::HeaderName) -> bool {
    use http::header;
    *name == header::CONNECTION
        || *name == header::TRANSFER_ENCODING
        || *name == header::UPGRADE
        || name.as_str() == "keep-alive"
        || name.as_str() == "proxy-connection"
}
