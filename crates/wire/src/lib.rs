//! Sluice's codecs: every parser of bytes a peer sends, and the writers of what goes back.
//! Pure functions of bytes (and a little state a connection keeps, such as HPACK's dynamic
//! table): no sockets, no runtime, no proxy types, so each can be fuzzed on its own.
//!
//! ```text
//!          proxy: sockets, tokio, TLS, the request pipeline (none of it here)
//!             │ peeked or read bytes                                 ▲ what they mean
//!             ▼                                                      │
//!   first bytes  ─▶ proxy_protocol::parse ─▶ Header { source } ──────┤
//!                ─▶ tls::client_hello_name ─▶ the SNI host name ─────┤
//!   HTTP/1.1     ─▶ h1::parse_request │ parse_response ─▶ head ──────┤
//!                   (offsets) ─▶ FramingHeaders ─▶ Framing           │
//!                   ─decode─▶ body bytes (Length │ Chunked │ ...) ───┤
//!   HTTP/2       ─▶ h2::frame::Head::parse ─▶ frame::parse ─▶ Frame ─┤
//!                   header block ─▶ h2::hpack::Decoder ─▶ fields ────┤
//!   DNS replies  ─▶ dns::parse_reply ─▶ Reply (addresses, TTL) ──────┘
//!
//!   proxy ─▶ h1 chunk lines, decimal │ h2 frame writers, hpack encode_* │
//!            proxy_protocol::v1_header, v2_header ─▶ bytes for a client or an upstream
//!            dns::query ─▶ bytes for a DNS server (resolving ExternalName Services)
//!
//!   fuzz (doc-hidden): each parser as a cargo-fuzz target (fuzz/) and, seeded, a property
//!   test (tests/wire/): h2_frames, hpack_blocks + hpack_lists (against loona-hpack),
//!   proxy_header, client_hello, dns_reply
//! ```
//!
//! Everything here is hostile input's first stop: nothing panics on bytes a peer sends
//! (slices are taken with `get` and `split_*`, lengths bounded before anything is kept),
//! and every limit a parser needs is a constant here or an argument, never a setting read
//! from elsewhere. The HTTP/1.1 differential targets (request and response heads, chunked
//! bodies, compared with hyper) live with the server and client that use this codec, in
//! `proxy::fuzz`.

pub mod dns;
pub mod h1;
pub mod h2;
pub mod proxy_protocol;
pub mod tls;

#[doc(hidden)]
pub mod fuzz;
