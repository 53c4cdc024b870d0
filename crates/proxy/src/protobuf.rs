//! The Protocol Buffers wire format, as far as OTLP needs it: varints, fixed 32/64-bit
//! numbers, length-delimited bytes, strings and nested messages, written straight into a
//! `Vec<u8>` (no schema compiler, no reflection; `otel` and `otlp` name the fields).

/// Wire types (protobuf encoding §"Message Structure").
const VARINT: u8 = 0;
const I64: u8 = 1;
const LEN: u8 = 2;
const I32: u8 = 5;

pub(crate) fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, u64::from(field) << 3 | u64::from(wire));
}

/// A `uint32`/`uint64`/`int64`/enum field (negative `int64`s take ten bytes, as protobuf says).
pub(crate) fn uint(out: &mut Vec<u8>, field: u32, n: u64) {
    tag(out, field, VARINT);
    varint(out, n);
}

pub(crate) fn fixed64(out: &mut Vec<u8>, field: u32, n: u64) {
    tag(out, field, I64);
    out.extend_from_slice(&n.to_le_bytes());
}

pub(crate) fn fixed32(out: &mut Vec<u8>, field: u32, n: u32) {
    tag(out, field, I32);
    out.extend_from_slice(&n.to_le_bytes());
}

pub(crate) fn bytes(out: &mut Vec<u8>, field: u32, value: &[u8]) {
    tag(out, field, LEN);
    varint(out, value.len() as u64);
    out.extend_from_slice(value);
}

/// A `string` field: protobuf strings are UTF-8 (receivers refuse a message otherwise), so
/// bytes that are not become U+FFFD. Header values may hold any byte.
pub(crate) fn string(out: &mut Vec<u8>, field: u32, value: &[u8]) {
    match std::str::from_utf8(value) {
        Ok(_) => bytes(out, field, value),
        Err(_) => bytes(out, field, String::from_utf8_lossy(value).as_bytes()),
    }
}

/// A nested message: `fill` writes its fields; the length is put in front once known.
pub(crate) fn message(out: &mut Vec<u8>, field: u32, fill: impl FnOnce(&mut Vec<u8>)) {
    tag(out, field, LEN);
    let start = out.len();
    fill(out);
    let mut length = Vec::with_capacity(5);
    varint(&mut length, (out.len() - start) as u64);
    out.splice(start..start, length);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_encoded_as_protobuf_defines() {
        let mut out = Vec::new();
        uint(&mut out, 1, 150);
        assert_eq!(out, [0x08, 0x96, 0x01]);
        out.clear();
        string(&mut out, 2, b"testing");
        assert_eq!(out, b"\x12\x07testing");
        out.clear();
        message(&mut out, 3, |m| uint(m, 1, 150));
        assert_eq!(out, [0x1a, 0x03, 0x08, 0x96, 0x01]);
        out.clear();
        fixed64(&mut out, 7, 1);
        fixed32(&mut out, 16, 0x301);
        assert_eq!(
            out,
            [0x39, 1, 0, 0, 0, 0, 0, 0, 0, 0x85, 0x01, 0x01, 0x03, 0, 0]
        );
        out.clear();
        string(&mut out, 1, b"a\xffb");
        assert_eq!(out, "\x0a\x05a\u{fffd}b".as_bytes());
        // A length of 128 takes two bytes.
        out.clear();
        message(&mut out, 1, |m| m.extend_from_slice(&[0; 128]));
        assert_eq!(&out[..3], [0x0a, 0x80, 0x01]);
        assert_eq!(out.len(), 131);
    }
}
