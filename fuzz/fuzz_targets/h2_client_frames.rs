//! `proxy::fuzz::h2_client_frames`: its properties are in its doc; a failed one panics.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    proxy::fuzz::h2_client_frames(data);
});
