//! `proxy::fuzz::check_response`: its properties are in its doc; a failed one panics.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    proxy::fuzz::check_response(data);
});
