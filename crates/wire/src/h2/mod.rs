//! HTTP/2's bytes (RFC 9113, RFC 7541): frames and HPACK, as Sluice's HTTP/2 server reads
//! them from clients and writes them back. What a connection does with them (streams, flow
//! control, SETTINGS acknowledgements, GOAWAY) is `proxy`'s `h2_server`.
//!
//! ```text
//!  client bytes ─▶ frame::Head::parse ─▶ frame::parse ─▶ Frame (borrowing the payload)
//!                                           HEADERS/CONTINUATION block ─▶ hpack::Decoder
//!  response ─▶ hpack::encode_status / encode_field ─▶ frame::write_* ─▶ client
//! ```

pub mod frame;
pub mod hpack;
