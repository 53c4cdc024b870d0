//! `wire::fuzz::proxy_header`: its properties are in its doc; a failed one panics.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    wire::fuzz::proxy_header(data);
});
