//! `wire::fuzz::dns_reply`: its properties are in its doc; a failed one panics.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    wire::fuzz::dns_reply(data);
});
