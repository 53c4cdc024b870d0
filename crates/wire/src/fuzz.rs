//! Fuzz targets for the codecs: HTTP/2 frames and HPACK (`http2`), the PROXY protocol
//! (`proxy_header`), the ClientHello's server name (`client_hello`), DNS replies (`dns`,
//! with the reply writer its checks and seeded runs use). Public only so that
//! `fuzz/` (cargo-fuzz, on nightly) and `tests/wire/` (the same targets as seeded property
//! tests, on stable) can call them. Not an API. The HPACK targets compare with loona-hpack's
//! decoder and the seeded runs draw from fastrand, which only the `fuzz-reference` feature
//! (tests and `fuzz/`) brings in.
//!
//! ```text
//!  bytes ─▶ h2_frames    ─▶ frame::parse, frame after frame ─▶ written again ─▶ same frame
//!        ─▶ hpack_blocks ─▶ hpack::Decoder ═ loona-hpack's decoder: same fields, same table
//!        ─▶ hpack_lists  ─▶ either side's encoder ─▶ both decoders: the same list
//!        ─▶ proxy_header ─▶ proxy_protocol::parse: prefixes Incomplete, refusals final;
//!                           v1_header / v2_header ─▶ parse ─▶ the same client
//!        ─▶ client_hello ─▶ tls::client_hello_name: a name is a host name in the record;
//!                           a ClientHello built with a known name ─▶ exactly that name,
//!                           every prefix Incomplete
//!        ─▶ dns_reply    ─▶ dns::parse_reply: answers well formed, prefixes cut short or the
//!                           same answer; DnsReply::to_bytes (records, compressed or not)
//!                           ─▶ parse_reply ─▶ exactly the chain's addresses and min TTL
//!  seeded (tests and proxy's tests): seed ─▶ generator ─▶ as made │ mutated │ hostile ─▶ target
//! ```
//!
//! Each target panics when a property fails, which is what a fuzzer looks for. The HTTP/1.1
//! targets compare with hyper and exercise proxy's server and client, so they are
//! `proxy::fuzz`'s.

mod client_hello;
mod dns;
#[cfg(feature = "fuzz-reference")]
mod http2;
mod proxy_header;
#[cfg(feature = "fuzz-reference")]
pub mod seeded;

pub use client_hello::{client_hello, client_hello_record};
pub use dns::{dns_reply, dns_reply_message, DnsData, DnsRecord, DnsReply};
#[cfg(feature = "fuzz-reference")]
pub use http2::{h2_frames, hpack_blocks, hpack_lists};
pub use proxy_header::proxy_header;

/// A fuzzer's bytes read as a generator's choices: one byte each, zeros once used up.
struct Choices<'a>(&'a [u8]);

impl Choices<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&byte, rest)) => {
                self.0 = rest;
                byte
            }
            None => 0,
        }
    }

    fn below(&mut self, n: usize) -> usize {
        usize::from(self.byte()) % n
    }

    fn array<const N: usize>(&mut self) -> [u8; N] {
        std::array::from_fn(|_| self.byte())
    }
}
