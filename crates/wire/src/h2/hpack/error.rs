//! Why a header block could not be decoded: the decoder's and the Huffman decoder's errors.

use std::fmt;

/// Why a header block could not be decoded. Every one is a connection error of type
/// COMPRESSION_ERROR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HpackError {
    /// An integer's prefix or continuation bytes run past the end of the block.
    IntegerTruncated,
    /// An integer above 2^32 - 1 or with more continuation bytes than such a value needs.
    IntegerOverflow,
    /// Index 0 names no entry (RFC 7541 §6.1).
    IndexZero,
    /// An index past the static table and the dynamic table's current entries.
    IndexPastTable { index: u32, entries: u32 },
    /// A string's length runs past the end of the block.
    StringTruncated { length: u32, left: u32 },
    /// Huffman padding longer than 7 bits (RFC 7541 §5.2).
    HuffmanPaddingTooLong,
    /// Huffman padding that is not the most significant bits of EOS (ones).
    HuffmanPaddingNotEos,
    /// The EOS symbol inside a Huffman string.
    HuffmanEos,
    /// A dynamic table size update after a header field (RFC 7541 §4.2: only at the start).
    TableSizeUpdateAfterField,
    /// A dynamic table size update above the SETTINGS_HEADER_TABLE_SIZE we advertise.
    TableSizeAboveLimit { size: u32, limit: u32 },
}

impl fmt::Display for HpackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HpackError::IntegerTruncated => f.write_str("integer runs past the end of the block"),
            HpackError::IntegerOverflow => f.write_str("integer is too large"),
            HpackError::IndexZero => f.write_str("index 0 is not a table entry"),
            HpackError::IndexPastTable { index, entries } => write!(
                f,
                "index {index} is past the dynamic table ({entries} entries, the last index {})",
                61 + entries
            ),
            HpackError::StringTruncated { length, left } => write!(
                f,
                "string of {length} bytes runs past the end of the block ({left} bytes left)"
            ),
            HpackError::HuffmanPaddingTooLong => {
                f.write_str("Huffman string padding is longer than 7 bits")
            }
            HpackError::HuffmanPaddingNotEos => {
                f.write_str("Huffman string padding is not the start of EOS")
            }
            HpackError::HuffmanEos => f.write_str("Huffman string holds the EOS symbol"),
            HpackError::TableSizeUpdateAfterField => {
                f.write_str("table size update after a header field")
            }
            HpackError::TableSizeAboveLimit { size, limit } => {
                write!(f, "table size update to {size} is above the limit {limit}")
            }
        }
    }
}

impl std::error::Error for HpackError {}
