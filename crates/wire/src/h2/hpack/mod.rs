//! HPACK (RFC 7541): header blocks from clients decoded against the connection's dynamic
//! table, and response header blocks encoded with no dynamic table at all.
//!
//! ```text
//!   HEADERS (+ CONTINUATION) payload ──▶ Decoder::decode ──▶ field(name, value) per field
//!                                            │    ▲
//!                                            ▼    │ indexed names and fields
//!                                        dynamic table (the one thing kept between blocks)
//!
//!   response head ──▶ encode_status / encode_field ──▶ header block bytes (stateless)
//! ```
//!
//! Idle memory is the reason this exists (issue 15): between requests a connection's HPACK
//! state is only its dynamic table's entries, each one allocation. Huffman strings decode
//! into a worker-thread scratch buffer, not a per-connection one. The encoder never inserts
//! into the peer's table (as nginx does), so it keeps nothing and never sends a table size
//! update.
//!
//! Every decoding error is a connection error of type COMPRESSION_ERROR (RFC 9113 §4.3): the
//! decoder is not used again after one, so a failed block's partial table changes need no
//! rollback.

mod error;
mod huffman;

pub use error::HpackError;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;

/// The dynamic table size both sides start with (RFC 9113 §6.5.2 SETTINGS_HEADER_TABLE_SIZE).
pub const DEFAULT_TABLE_SIZE: usize = 4096;

/// RFC 7541 §4.1: each entry counts its name and value lengths plus this.
const ENTRY_OVERHEAD: usize = 32;

/// A decoded integer may take at most this many continuation bytes (7 bits each): enough for
/// any value below 2^32 with any prefix, and a block cannot make us loop on zero bytes.
const MAX_CONTINUATION_BYTES: u32 = 5;

/// The Huffman scratch buffer keeps its capacity between blocks up to this much; a larger one
/// (a block with a huge string) is given back.
const SCRATCH_KEEP: usize = 16 * 1024;

/// RFC 7541 Appendix A, index 1 to 61.
const STATIC_TABLE: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// Longest static table name ("access-control-allow-origin").
const STATIC_NAME_MAX: usize = 27;

/// Distinct static names of one length, at most (7: ":method", ":scheme", ":status", ...).
const STATIC_SAME_LENGTH: usize = 8;

/// For each name length, the static index of each distinct name of that length (its first
/// entry), 0-terminated: the encoder compares a name with a handful of candidates, not 61.
static STATIC_BY_LENGTH: [[u8; STATIC_SAME_LENGTH]; STATIC_NAME_MAX + 1] = build_by_length();

/// The decoding half of a connection's HPACK context: the dynamic table (RFC 7541 §2.3.2).
pub struct Decoder {
    /// Newest first, as the table's indexes count (62 is the front).
    entries: VecDeque<Entry>,
    /// RFC 7541 §4.1 size of `entries`.
    size: usize,
    /// The table's maximum size, as the peer's last size update set it.
    max_size: usize,
    /// The SETTINGS_HEADER_TABLE_SIZE we advertise: the most a size update may set.
    limit: usize,
}

/// One dynamic table entry: name and value in one allocation.
struct Entry {
    name_and_value: Box<[u8]>,
    name_len: usize,
}

/// Where a decoded string lies: in the block itself, or in the Huffman scratch buffer.
#[derive(Clone, Copy)]
enum Str {
    Block(usize, usize),
    Scratch(usize, usize),
}

/// A literal's name: a table index or a string of its own.
#[derive(Clone, Copy)]
enum Name {
    Indexed(usize),
    Literal(Str),
}

thread_local! {
    /// Huffman strings of the block being decoded, per worker thread (see the module doc).
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl fmt::Debug for Decoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Entries are client data (cookies, tokens): counted, never printed.
        f.debug_struct("Decoder")
            .field("entries", &self.entries.len())
            .field("size", &self.size)
            .field("max_size", &self.max_size)
            .field("limit", &self.limit)
            .finish()
    }
}

impl Decoder {
    /// `max_table_size`: the SETTINGS_HEADER_TABLE_SIZE we advertise (the limit the peer's
    /// table size updates may not exceed). Allocates nothing until an entry is inserted.
    pub fn new(max_table_size: usize) -> Decoder {
        Decoder {
            entries: VecDeque::new(),
            size: 0,
            max_size: max_table_size,
            limit: max_table_size,
        }
    }

    /// Decodes one complete header block (a HEADERS payload and its CONTINUATIONs joined),
    /// calling `field(name, value)` once per field in order. On error the decoder is not to be
    /// used again (the connection ends).
    pub fn decode(
        &mut self,
        block: &[u8],
        field: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        let shared = SCRATCH.try_with(|scratch| {
            // `field` could, in principle, decode another block on this thread: that one gets
            // a buffer of its own rather than a panic.
            let Ok(mut scratch) = scratch.try_borrow_mut() else {
                return None;
            };
            let result = self.decode_with(block, field, &mut scratch);
            scratch.clear();
            if scratch.capacity() > SCRATCH_KEEP {
                *scratch = Vec::new();
            }
            Some(result)
        });
        match shared {
            Ok(Some(result)) => result,
            // Thread-local already destroyed, or in use.
            _ => self.decode_with(block, field, &mut Vec::new()),
        }
    }

    /// Bytes the dynamic table holds, as RFC 7541 §4.1 counts them (name + value + 32 each).
    #[cfg(test)]
    pub fn table_size(&self) -> usize {
        self.size
    }

    fn decode_with(
        &mut self,
        block: &[u8],
        field: &mut dyn FnMut(&[u8], &[u8]),
        scratch: &mut Vec<u8>,
    ) -> Result<(), HpackError> {
        let mut pos = 0;
        let mut after_field = false;
        while let Some(&first) = block.get(pos) {
            if first & 0x80 != 0 {
                // §6.1 indexed header field.
                let index = read_int(block, &mut pos, 7)?;
                let (name, value) = self.entry(index)?;
                field(name, value);
            } else if first & 0x40 != 0 {
                // §6.2.1 literal with incremental indexing.
                self.literal(block, &mut pos, 6, true, scratch, field)?;
            } else if first & 0x20 != 0 {
                // §6.3 dynamic table size update.
                if after_field {
                    return Err(HpackError::TableSizeUpdateAfterField);
                }
                let size = read_int(block, &mut pos, 5)?;
                if size > self.limit {
                    return Err(HpackError::TableSizeAboveLimit {
                        size: clamp_u32(size),
                        limit: clamp_u32(self.limit),
                    });
                }
                self.max_size = size;
                self.evict_to(size);
                continue;
            } else {
                // §6.2.2 without indexing (0000) and §6.2.3 never indexed (0001): to us they
                // decode alike; the difference binds intermediaries that re-encode, and our
                // encoder never indexes anything.
                self.literal(block, &mut pos, 4, false, scratch, field)?;
            }
            after_field = true;
        }
        Ok(())
    }

    /// Decodes a literal field representation whose first byte is at `pos`.
    fn literal(
        &mut self,
        block: &[u8],
        pos: &mut usize,
        prefix_bits: u32,
        index: bool,
        scratch: &mut Vec<u8>,
        field: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        scratch.clear();
        let name = match read_int(block, pos, prefix_bits)? {
            0 => Name::Literal(read_string(block, pos, scratch)?),
            index => {
                // Checked now, so the block's later bytes cannot make it valid.
                self.entry(index)?;
                Name::Indexed(index)
            }
        };
        let value = read_string(block, pos, scratch)?;
        let value = value.resolve(block, scratch);
        let name = match name {
            Name::Indexed(index) => self.entry(index)?.0,
            Name::Literal(name) => name.resolve(block, scratch),
        };
        field(name, value);
        if !index {
            return Ok(());
        }
        let entry_size = name.len() + value.len() + ENTRY_OVERHEAD;
        if entry_size > self.max_size {
            // §4.4: an entry larger than the table empties it and is not inserted.
            self.evict_to(0);
            return Ok(());
        }
        // Built before evicting: the name may be an entry eviction is about to drop.
        let mut name_and_value = Vec::with_capacity(name.len() + value.len());
        name_and_value.extend_from_slice(name);
        name_and_value.extend_from_slice(value);
        let entry = Entry {
            name_len: name.len(),
            name_and_value: name_and_value.into_boxed_slice(),
        };
        self.evict_to(self.max_size - entry_size);
        self.entries.push_front(entry);
        self.size += entry_size;
        Ok(())
    }

    /// The (name, value) at table index `index` (1-based; static first, then dynamic).
    fn entry(&self, index: usize) -> Result<(&[u8], &[u8]), HpackError> {
        if index == 0 {
            return Err(HpackError::IndexZero);
        }
        if let Some(&(name, value)) = STATIC_TABLE.get(index - 1) {
            return Ok((name, value));
        }
        match self.entries.get(index - 1 - STATIC_TABLE.len()) {
            Some(entry) => Ok(entry.name_and_value.split_at(entry.name_len)),
            None => Err(HpackError::IndexPastTable {
                index: clamp_u32(index),
                entries: clamp_u32(self.entries.len()),
            }),
        }
    }

    /// Drops the oldest entries until the table holds at most `size` bytes.
    fn evict_to(&mut self, size: usize) {
        while self.size > size {
            let Some(oldest) = self.entries.pop_back() else {
                break;
            };
            self.size -= oldest.name_and_value.len() + ENTRY_OVERHEAD;
        }
        if self.entries.is_empty() {
            // An idle connection whose table emptied holds nothing for it.
            self.entries = VecDeque::new();
            self.size = 0;
        }
    }
}

impl Str {
    fn resolve<'a>(self, block: &'a [u8], scratch: &'a [u8]) -> &'a [u8] {
        let (bytes, start, end) = match self {
            Str::Block(start, end) => (block, start, end),
            Str::Scratch(start, end) => (scratch, start, end),
        };
        bytes.get(start..end).unwrap_or_default()
    }
}

/// Reads an integer with an N-bit prefix (RFC 7541 §5.1) whose first byte is at `pos`.
fn read_int(block: &[u8], pos: &mut usize, prefix_bits: u32) -> Result<usize, HpackError> {
    let max_prefix = (1u32 << prefix_bits) - 1;
    let first = *block.get(*pos).ok_or(HpackError::IntegerTruncated)?;
    *pos += 1;
    let mut value = u64::from(u32::from(first) & max_prefix);
    if value < u64::from(max_prefix) {
        return Ok(value as usize);
    }
    let mut shift = 0;
    loop {
        let byte = *block.get(*pos).ok_or(HpackError::IntegerTruncated)?;
        *pos += 1;
        value += u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift >= 7 * MAX_CONTINUATION_BYTES {
            return Err(HpackError::IntegerOverflow);
        }
    }
    // At most 255 + 2^35: a u64 holds it; anything past u32 is refused.
    u32::try_from(value)
        .map(|v| v as usize)
        .map_err(|_| HpackError::IntegerOverflow)
}

/// Reads a string literal (RFC 7541 §5.2) whose first byte is at `pos`; a Huffman one is
/// decoded onto the end of `scratch`.
fn read_string(block: &[u8], pos: &mut usize, scratch: &mut Vec<u8>) -> Result<Str, HpackError> {
    let huffman = block.get(*pos).is_some_and(|b| b & 0x80 != 0);
    let length = read_int(block, pos, 7)?;
    let start = *pos;
    let left = block.len() - start;
    if length > left {
        return Err(HpackError::StringTruncated {
            length: clamp_u32(length),
            left: clamp_u32(left),
        });
    }
    *pos = start + length;
    if !huffman {
        return Ok(Str::Block(start, start + length));
    }
    let from = scratch.len();
    huffman::decode(&block[start..start + length], scratch)?;
    Ok(Str::Scratch(from, scratch.len()))
}

fn clamp_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Appends `:status` for `status`: the indexed field when the static table has it (200, 204,
/// 206, 304, 400, 404, 500), else a literal without indexing whose name is index 8.
pub fn encode_status(status: u16, dst: &mut Vec<u8>) {
    let index = match status {
        200 => 8,
        204 => 9,
        206 => 10,
        304 => 11,
        400 => 12,
        404 => 13,
        500 => 14,
        _ => 0,
    };
    if index != 0 {
        dst.push(0x80 | index);
        return;
    }
    let mut digits = [0u8; 5];
    let mut start = digits.len();
    let mut n = status;
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    dst.push(0x08);
    encode_string(&digits[start..], dst);
}

/// Appends one response field. `name` is lowercase (an `http::HeaderName`). A (name, value)
/// the static table holds becomes its index; a static name becomes a literal without indexing
/// that names it by index; any other name is a literal without indexing with the name spelled
/// out. `sensitive` (RFC 7541 §6.2.3) uses the never-indexed literal instead, so that no
/// intermediary re-encoding the block may index it either.
pub fn encode_field(name: &[u8], value: &[u8], sensitive: bool, dst: &mut Vec<u8>) {
    encode_field_with(name, value, sensitive, encode_string, dst);
}

/// [`encode_field`] with the strings as plain literals, never Huffman-coded: for a near peer
/// (an upstream), where the bytes Huffman saves cost more instructions than they are worth
/// (Huffman coding was ~11k instructions a gRPC request head).
pub fn encode_field_plain(name: &[u8], value: &[u8], sensitive: bool, dst: &mut Vec<u8>) {
    encode_field_with(name, value, sensitive, encode_plain, dst);
}

fn encode_field_with(
    name: &[u8],
    value: &[u8],
    sensitive: bool,
    encode_string: fn(&[u8], &mut Vec<u8>),
    dst: &mut Vec<u8>,
) {
    let never_indexed = if sensitive { 0x10 } else { 0x00 };
    let Some(name_index) = static_name_index(name) else {
        dst.push(never_indexed);
        encode_string(name, dst);
        encode_string(value, dst);
        return;
    };
    if !sensitive {
        // The entries sharing this name follow its first one.
        let same_name = STATIC_TABLE
            .iter()
            .enumerate()
            .skip(name_index - 1)
            .take_while(|(_, &(n, _))| n == name);
        for (i, &(_, v)) in same_name {
            if v == value {
                write_int(i + 1, 7, 0x80, dst);
                return;
            }
        }
    }
    write_int(name_index, 4, never_indexed, dst);
    encode_string(value, dst);
}

/// The first static table index whose name is `name`.
fn static_name_index(name: &[u8]) -> Option<usize> {
    let candidates = STATIC_BY_LENGTH.get(name.len())?;
    candidates
        .iter()
        .take_while(|&&index| index != 0)
        .map(|&index| usize::from(index))
        .find(|&index| STATIC_TABLE[index - 1].0 == name)
}

const fn build_by_length() -> [[u8; STATIC_SAME_LENGTH]; STATIC_NAME_MAX + 1] {
    let mut by_length = [[0u8; STATIC_SAME_LENGTH]; STATIC_NAME_MAX + 1];
    let mut i = 0;
    while i < STATIC_TABLE.len() {
        let name = STATIC_TABLE[i].0;
        // Only a name's first entry: the entries sharing a name are consecutive.
        let first = i == 0 || !const_eq(STATIC_TABLE[i - 1].0, name);
        if first {
            let slots = &mut by_length[name.len()];
            let mut slot = 0;
            while slots[slot] != 0 {
                slot += 1;
            }
            slots[slot] = (i + 1) as u8;
        }
        i += 1;
    }
    by_length
}

const fn const_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Appends `value` as an integer with an N-bit prefix (RFC 7541 §5.1); `flags` fills the
/// first byte's bits above the prefix.
pub fn write_int(value: usize, prefix_bits: u32, flags: u8, dst: &mut Vec<u8>) {
    let max_prefix = (1usize << prefix_bits) - 1;
    if value < max_prefix {
        dst.push(flags | value as u8);
        return;
    }
    dst.push(flags | max_prefix as u8);
    let mut rest = value - max_prefix;
    while rest >= 0x80 {
        dst.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    dst.push(rest as u8);
}

/// Appends a string literal, Huffman-coded when that is strictly shorter.
/// A string literal without Huffman coding (RFC 7541 §5.2, H = 0).
fn encode_plain(s: &[u8], dst: &mut Vec<u8>) {
    write_int(s.len(), 7, 0x00, dst);
    dst.extend_from_slice(s);
}

fn encode_string(s: &[u8], dst: &mut Vec<u8>) {
    let coded_len = huffman::encoded_len(s);
    if coded_len < s.len() {
        write_int(coded_len, 7, 0x80, dst);
        dst.reserve(coded_len);
        huffman::encode(s, dst);
    } else {
        write_int(s.len(), 7, 0x00, dst);
        dst.extend_from_slice(s);
    }
}

#[cfg(test)]
mod tests;
