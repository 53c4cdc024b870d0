//! The Protocol Buffers wire format, as far as OTLP and ext_authz need it: varints, fixed
//! 32/64-bit numbers, length-delimited bytes, strings and nested messages, written straight
//! into a `Vec<u8>`, and read back field by field (`Fields`) from bytes a peer sent (no schema
//! compiler, no reflection; `otel`, `otlp` and `ext_authz` name the fields).
//!
//! ```text
//!  write: uint / fixed64 / fixed32 / bytes / string / message(fill) ─▶ Vec<u8>
//!  read:  &[u8] ─▶ Fields ─▶ (field number, Value::{Varint, Fixed64, Bytes, Fixed32}) in
//!         order; a truncated field, a varint over 10 bytes, field number 0, a group or an
//!         unknown wire type ─▶ Err(Malformed), and nothing after it
//! ```

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

/// A field's value as read: what it means is up to the message that has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    /// Length-delimited: bytes, a string, a nested message or packed numbers.
    Bytes(&'a [u8]),
    Fixed32(u32),
}

/// Bytes that are not a protobuf message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a protobuf message: {0}")]
pub(crate) struct Malformed(pub(crate) &'static str);

/// A message's fields in the order they come. Stops after the first malformed one.
pub(crate) struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    pub(crate) fn of(message: &'a [u8]) -> Fields<'a> {
        Fields { rest: message }
    }

    fn read_varint(&mut self) -> Result<u64, Malformed> {
        let mut n: u64 = 0;
        for (i, byte) in self.rest.iter().enumerate().take(10) {
            // The tenth byte may carry only the top bit of a 64-bit number.
            if i == 9 && *byte > 1 {
                return Err(Malformed("a varint longer than 64 bits"));
            }
            n |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                self.rest = &self.rest[i + 1..];
                return Ok(n);
            }
        }
        Err(Malformed(if self.rest.len() < 10 {
            "a truncated varint"
        } else {
            "a varint longer than 10 bytes"
        }))
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], Malformed> {
        if self.rest.len() < len {
            return Err(Malformed("a field longer than the message"));
        }
        let (taken, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(taken)
    }

    fn field(&mut self) -> Result<(u32, Value<'a>), Malformed> {
        let key = self.read_varint()?;
        let number = u32::try_from(key >> 3)
            .ok()
            .filter(|n| (1..=0x1fff_ffff).contains(n))
            .ok_or(Malformed("a field number out of range"))?;
        let value = match (key & 7) as u8 {
            VARINT => Value::Varint(self.read_varint()?),
            I64 => Value::Fixed64(u64::from_le_bytes(self.take(8)?.try_into().expect("8"))),
            LEN => {
                let len = usize::try_from(self.read_varint()?)
                    .map_err(|_| Malformed("a field longer than the message"))?;
                Value::Bytes(self.take(len)?)
            }
            I32 => Value::Fixed32(u32::from_le_bytes(self.take(4)?.try_into().expect("4"))),
            _ => return Err(Malformed("a group or an unknown wire type")),
        };
        Ok((number, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let field = self.field();
        if field.is_err() {
            self.rest = &[];
        }
        Some(field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_back_what_was_written_and_refuse_what_is_broken() {
        let mut out = Vec::new();
        uint(&mut out, 1, u64::MAX);
        fixed64(&mut out, 2, 7);
        message(&mut out, 3, |m| string(m, 1, b"inner"));
        fixed32(&mut out, 536_870_911, 9);
        let read: Vec<_> = Fields::of(&out).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            read,
            [
                (1, Value::Varint(u64::MAX)),
                (2, Value::Fixed64(7)),
                (3, Value::Bytes(b"\x0a\x05inner")),
                (536_870_911, Value::Fixed32(9)),
            ]
        );
        // Every cut of the message ends in an error, never a panic or a wrong value.
        for cut in 1..out.len() {
            let fields: Vec<_> = Fields::of(&out[..cut]).collect();
            let last = fields.last().unwrap();
            let at_boundary = [11, 20, 29].contains(&cut);
            assert_eq!(last.is_ok(), at_boundary, "cut at {cut}: {fields:?}");
        }
        for broken in [
            &b"\x00\x01"[..],                                    // field number 0
            b"\x0b",                                             // a group
            b"\x0e\x00",                                         // wire type 6
            b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02",     // 65 bits
            b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", // 11 bytes
            b"\x0a\xff\xff\xff\xff\x0f",                         // longer than the message
        ] {
            let fields: Vec<_> = Fields::of(broken).collect();
            assert_eq!(fields.len(), 1, "{broken:?}");
            assert!(fields[0].is_err(), "{broken:?}");
        }
    }

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
