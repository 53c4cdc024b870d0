//! Sluice's codecs: every parser of bytes a peer sends, and the writers of what goes back.
//! Pure functions of bytes (and a little state a connection keeps, such as HPACK's dynamic
//! table): no sockets, no runtime, no proxy types, so each can be fuzzed on its own.
//!
//! ```text
//!                       proxy (sockets, tokio, TLS, the request pipeline)
//!   accepted socket ──peek──▶ proxy_protocol::parse ─▶ Header { source } ─┐
//!                   ──peek──▶ tls::client_hello_name ─▶ SNI ─▶ passthrough│or TLS here
//!   HTTP/1.1 bytes ─▶ h1::parse_request │ parse_response ─▶ head offsets, ─┤
//!                     FramingHeaders ─▶ Framing ─decode─▶ body bytes        │
//!                     (Length │ Chunked │ UntilClose)                        ├─▶ proxy
//!   HTTP/2 bytes   ─▶ h2::frame::Head::parse ─▶ frame::parse ─▶ Frame ──────┤
//!                     HEADERS block ─▶ h2::hpack::Decoder ─▶ (name, value) ─┘
//!   proxy ─▶ h1 encoders (chunk lines, decimal) │ h2 frame writers + hpack encode_*
//!         │ proxy_protocol::v1_header / v2_header ─▶ bytes to the peer or upstream
//!
//!   fuzz (doc-hidden): each parser as a target for cargo-fuzz (fuzz/) and, seeded, for
//!   tests/wire.rs: h2_frames, hpack_blocks + hpack_lists (against loona-hpack),
//!   proxy_header, client_hello
//! ```
//!
//! Everything here is hostile input's first stop: nothing panics on bytes a peer sends
//! (slices are taken with `get` and `split_*`, lengths bounded before anything is kept),
//! and every limit a parser needs is a constant here or an argument, never a setting read
//! from elsewhere. The HTTP/1.1 differential targets (request and response heads, chunked
//! bodies, compared with hyper) live with the server and client that use this codec, in
//! `proxy::fuzz`.

pub mod h1;
pub mod h2;
pub mod proxy_protocol;
pub mod tls;

#[doc(hidden)]
pub mod fuzz;
