//! HPACK's Huffman code (RFC 7541 §5.2, Appendix B): string literals in a header block may be
//! coded with it, and browsers code nearly every one.
//!
//! ```text
//!   client string literal ──decode──▶ bytes (appended to the caller's Vec)
//!   response header bytes ──encode──▶ Huffman string (when encoded_len says it is shorter)
//! ```
//!
//! Decoding runs on every request, so it is table driven: a 1024-entry table resolves every
//! code of 10 bits or fewer (all letters, digits and the common punctuation) with one lookup;
//! longer codes fall back to the canonical-code limits, one comparison per code length. The
//! tables are built at compile time from the RFC's table below.

use super::error::HpackError;

/// RFC 7541 Appendix B: (code, bit length) for symbols 0..=255 and EOS (256), the code
/// right-aligned. The code is canonical (codes of one length are consecutive in symbol order,
/// and each length's first code follows the previous length's last), which the decoder's
/// tables rely on and `the_table_is_canonical_and_complete` checks.
const CODES: [(u32, u32); 257] = [
    (0x1ff8, 13),     //   0
    (0x7fffd8, 23),   //   1
    (0xfffffe2, 28),  //   2
    (0xfffffe3, 28),  //   3
    (0xfffffe4, 28),  //   4
    (0xfffffe5, 28),  //   5
    (0xfffffe6, 28),  //   6
    (0xfffffe7, 28),  //   7
    (0xfffffe8, 28),  //   8
    (0xffffea, 24),   //   9
    (0x3ffffffc, 30), //  10
    (0xfffffe9, 28),  //  11
    (0xfffffea, 28),  //  12
    (0x3ffffffd, 30), //  13
    (0xfffffeb, 28),  //  14
    (0xfffffec, 28),  //  15
    (0xfffffed, 28),  //  16
    (0xfffffee, 28),  //  17
    (0xfffffef, 28),  //  18
    (0xffffff0, 28),  //  19
    (0xffffff1, 28),  //  20
    (0xffffff2, 28),  //  21
    (0x3ffffffe, 30), //  22
    (0xffffff3, 28),  //  23
    (0xffffff4, 28),  //  24
    (0xffffff5, 28),  //  25
    (0xffffff6, 28),  //  26
    (0xffffff7, 28),  //  27
    (0xffffff8, 28),  //  28
    (0xffffff9, 28),  //  29
    (0xffffffa, 28),  //  30
    (0xffffffb, 28),  //  31
    (0x14, 6),        //  32 ' '
    (0x3f8, 10),      //  33 '!'
    (0x3f9, 10),      //  34 '"'
    (0xffa, 12),      //  35 '#'
    (0x1ff9, 13),     //  36 '$'
    (0x15, 6),        //  37 '%'
    (0xf8, 8),        //  38 '&'
    (0x7fa, 11),      //  39 "'"
    (0x3fa, 10),      //  40 '('
    (0x3fb, 10),      //  41 ')'
    (0xf9, 8),        //  42 '*'
    (0x7fb, 11),      //  43 '+'
    (0xfa, 8),        //  44 ','
    (0x16, 6),        //  45 '-'
    (0x17, 6),        //  46 '.'
    (0x18, 6),        //  47 '/'
    (0x0, 5),         //  48 '0'
    (0x1, 5),         //  49 '1'
    (0x2, 5),         //  50 '2'
    (0x19, 6),        //  51 '3'
    (0x1a, 6),        //  52 '4'
    (0x1b, 6),        //  53 '5'
    (0x1c, 6),        //  54 '6'
    (0x1d, 6),        //  55 '7'
    (0x1e, 6),        //  56 '8'
    (0x1f, 6),        //  57 '9'
    (0x5c, 7),        //  58 ':'
    (0xfb, 8),        //  59 ';'
    (0x7ffc, 15),     //  60 '<'
    (0x20, 6),        //  61 '='
    (0xffb, 12),      //  62 '>'
    (0x3fc, 10),      //  63 '?'
    (0x1ffa, 13),     //  64 '@'
    (0x21, 6),        //  65 'A'
    (0x5d, 7),        //  66 'B'
    (0x5e, 7),        //  67 'C'
    (0x5f, 7),        //  68 'D'
    (0x60, 7),        //  69 'E'
    (0x61, 7),        //  70 'F'
    (0x62, 7),        //  71 'G'
    (0x63, 7),        //  72 'H'
    (0x64, 7),        //  73 'I'
    (0x65, 7),        //  74 'J'
    (0x66, 7),        //  75 'K'
    (0x67, 7),        //  76 'L'
    (0x68, 7),        //  77 'M'
    (0x69, 7),        //  78 'N'
    (0x6a, 7),        //  79 'O'
    (0x6b, 7),        //  80 'P'
    (0x6c, 7),        //  81 'Q'
    (0x6d, 7),        //  82 'R'
    (0x6e, 7),        //  83 'S'
    (0x6f, 7),        //  84 'T'
    (0x70, 7),        //  85 'U'
    (0x71, 7),        //  86 'V'
    (0x72, 7),        //  87 'W'
    (0xfc, 8),        //  88 'X'
    (0x73, 7),        //  89 'Y'
    (0xfd, 8),        //  90 'Z'
    (0x1ffb, 13),     //  91 '['
    (0x7fff0, 19),    //  92 '\\'
    (0x1ffc, 13),     //  93 ']'
    (0x3ffc, 14),     //  94 '^'
    (0x22, 6),        //  95 '_'
    (0x7ffd, 15),     //  96 '`'
    (0x3, 5),         //  97 'a'
    (0x23, 6),        //  98 'b'
    (0x4, 5),         //  99 'c'
    (0x24, 6),        // 100 'd'
    (0x5, 5),         // 101 'e'
    (0x25, 6),        // 102 'f'
    (0x26, 6),        // 103 'g'
    (0x27, 6),        // 104 'h'
    (0x6, 5),         // 105 'i'
    (0x74, 7),        // 106 'j'
    (0x75, 7),        // 107 'k'
    (0x28, 6),        // 108 'l'
    (0x29, 6),        // 109 'm'
    (0x2a, 6),        // 110 'n'
    (0x7, 5),         // 111 'o'
    (0x2b, 6),        // 112 'p'
    (0x76, 7),        // 113 'q'
    (0x2c, 6),        // 114 'r'
    (0x8, 5),         // 115 's'
    (0x9, 5),         // 116 't'
    (0x2d, 6),        // 117 'u'
    (0x77, 7),        // 118 'v'
    (0x78, 7),        // 119 'w'
    (0x79, 7),        // 120 'x'
    (0x7a, 7),        // 121 'y'
    (0x7b, 7),        // 122 'z'
    (0x7ffe, 15),     // 123 '{'
    (0x7fc, 11),      // 124 '|'
    (0x3ffd, 14),     // 125 '}'
    (0x1ffd, 13),     // 126 '~'
    (0xffffffc, 28),  // 127
    (0xfffe6, 20),    // 128
    (0x3fffd2, 22),   // 129
    (0xfffe7, 20),    // 130
    (0xfffe8, 20),    // 131
    (0x3fffd3, 22),   // 132
    (0x3fffd4, 22),   // 133
    (0x3fffd5, 22),   // 134
    (0x7fffd9, 23),   // 135
    (0x3fffd6, 22),   // 136
    (0x7fffda, 23),   // 137
    (0x7fffdb, 23),   // 138
    (0x7fffdc, 23),   // 139
    (0x7fffdd, 23),   // 140
    (0x7fffde, 23),   // 141
    (0xffffeb, 24),   // 142
    (0x7fffdf, 23),   // 143
    (0xffffec, 24),   // 144
    (0xffffed, 24),   // 145
    (0x3fffd7, 22),   // 146
    (0x7fffe0, 23),   // 147
    (0xffffee, 24),   // 148
    (0x7fffe1, 23),   // 149
    (0x7fffe2, 23),   // 150
    (0x7fffe3, 23),   // 151
    (0x7fffe4, 23),   // 152
    (0x1fffdc, 21),   // 153
    (0x3fffd8, 22),   // 154
    (0x7fffe5, 23),   // 155
    (0x3fffd9, 22),   // 156
    (0x7fffe6, 23),   // 157
    (0x7fffe7, 23),   // 158
    (0xffffef, 24),   // 159
    (0x3fffda, 22),   // 160
    (0x1fffdd, 21),   // 161
    (0xfffe9, 20),    // 162
    (0x3fffdb, 22),   // 163
    (0x3fffdc, 22),   // 164
    (0x7fffe8, 23),   // 165
    (0x7fffe9, 23),   // 166
    (0x1fffde, 21),   // 167
    (0x7fffea, 23),   // 168
    (0x3fffdd, 22),   // 169
    (0x3fffde, 22),   // 170
    (0xfffff0, 24),   // 171
    (0x1fffdf, 21),   // 172
    (0x3fffdf, 22),   // 173
    (0x7fffeb, 23),   // 174
    (0x7fffec, 23),   // 175
    (0x1fffe0, 21),   // 176
    (0x1fffe1, 21),   // 177
    (0x3fffe0, 22),   // 178
    (0x1fffe2, 21),   // 179
    (0x7fffed, 23),   // 180
    (0x3fffe1, 22),   // 181
    (0x7fffee, 23),   // 182
    (0x7fffef, 23),   // 183
    (0xfffea, 20),    // 184
    (0x3fffe2, 22),   // 185
    (0x3fffe3, 22),   // 186
    (0x3fffe4, 22),   // 187
    (0x7ffff0, 23),   // 188
    (0x3fffe5, 22),   // 189
    (0x3fffe6, 22),   // 190
    (0x7ffff1, 23),   // 191
    (0x3ffffe0, 26),  // 192
    (0x3ffffe1, 26),  // 193
    (0xfffeb, 20),    // 194
    (0x7fff1, 19),    // 195
    (0x3fffe7, 22),   // 196
    (0x7ffff2, 23),   // 197
    (0x3fffe8, 22),   // 198
    (0x1ffffec, 25),  // 199
    (0x3ffffe2, 26),  // 200
    (0x3ffffe3, 26),  // 201
    (0x3ffffe4, 26),  // 202
    (0x7ffffde, 27),  // 203
    (0x7ffffdf, 27),  // 204
    (0x3ffffe5, 26),  // 205
    (0xfffff1, 24),   // 206
    (0x1ffffed, 25),  // 207
    (0x7fff2, 19),    // 208
    (0x1fffe3, 21),   // 209
    (0x3ffffe6, 26),  // 210
    (0x7ffffe0, 27),  // 211
    (0x7ffffe1, 27),  // 212
    (0x3ffffe7, 26),  // 213
    (0x7ffffe2, 27),  // 214
    (0xfffff2, 24),   // 215
    (0x1fffe4, 21),   // 216
    (0x1fffe5, 21),   // 217
    (0x3ffffe8, 26),  // 218
    (0x3ffffe9, 26),  // 219
    (0xffffffd, 28),  // 220
    (0x7ffffe3, 27),  // 221
    (0x7ffffe4, 27),  // 222
    (0x7ffffe5, 27),  // 223
    (0xfffec, 20),    // 224
    (0xfffff3, 24),   // 225
    (0xfffed, 20),    // 226
    (0x1fffe6, 21),   // 227
    (0x3fffe9, 22),   // 228
    (0x1fffe7, 21),   // 229
    (0x1fffe8, 21),   // 230
    (0x7ffff3, 23),   // 231
    (0x3fffea, 22),   // 232
    (0x3fffeb, 22),   // 233
    (0x1ffffee, 25),  // 234
    (0x1ffffef, 25),  // 235
    (0xfffff4, 24),   // 236
    (0xfffff5, 24),   // 237
    (0x3ffffea, 26),  // 238
    (0x7ffff4, 23),   // 239
    (0x3ffffeb, 26),  // 240
    (0x7ffffe6, 27),  // 241
    (0x3ffffec, 26),  // 242
    (0x3ffffed, 26),  // 243
    (0x7ffffe7, 27),  // 244
    (0x7ffffe8, 27),  // 245
    (0x7ffffe9, 27),  // 246
    (0x7ffffea, 27),  // 247
    (0x7ffffeb, 27),  // 248
    (0xffffffe, 28),  // 249
    (0x7ffffec, 27),  // 250
    (0x7ffffed, 27),  // 251
    (0x7ffffee, 27),  // 252
    (0x7ffffef, 27),  // 253
    (0x7fffff0, 27),  // 254
    (0x3ffffee, 26),  // 255
    (0x3fffffff, 30), // 256 EOS
];

/// The EOS symbol: 30 one bits. Never encoded; seen in a string it is an error (§5.2).
const EOS: u16 = 256;

/// Codes up to this many bits are resolved by one lookup in `SHORT`.
const SHORT_BITS: u32 = 10;

/// Longest code (EOS and three control characters).
const MAX_BITS: u32 = 30;

/// Indexed by the next `SHORT_BITS` bits of input: `bit length << 8 | symbol` for the code
/// those bits start with, or 0 when it is longer than `SHORT_BITS`.
static SHORT: [u16; 1 << SHORT_BITS] = build_short();

/// The canonical code's shape, for the codes `SHORT` does not resolve.
static CANONICAL: Canonical = build_canonical();

struct Canonical {
    /// Symbols in code order (by length, then symbol).
    symbols: [u16; 257],
    /// Per bit length: the first code of that length, right-aligned.
    first: [u32; MAX_BITS as usize + 1],
    /// Per bit length: index in `symbols` of that length's first code.
    offset: [u16; MAX_BITS as usize + 1],
    /// Per bit length: one past its last code, left-aligned in 32 bits. Input whose next 32
    /// bits are below `limit[n]` (and not below `limit[n - 1]`) starts with an n-bit code.
    limit: [u64; MAX_BITS as usize + 1],
}

const fn build_short() -> [u16; 1 << SHORT_BITS] {
    let mut table = [0u16; 1 << SHORT_BITS];
    let mut symbol = 0;
    while symbol < 256 {
        let (code, len) = CODES[symbol];
        if len <= SHORT_BITS {
            // Every SHORT_BITS-bit pattern that starts with this code resolves to it.
            let spread = SHORT_BITS - len;
            let start = (code << spread) as usize;
            let mut i = 0;
            while i < 1 << spread {
                table[start + i] = ((len as u16) << 8) | symbol as u16;
                i += 1;
            }
        }
        symbol += 1;
    }
    table
}

const fn build_canonical() -> Canonical {
    let mut c = Canonical {
        symbols: [0; 257],
        first: [0; MAX_BITS as usize + 1],
        offset: [0; MAX_BITS as usize + 1],
        limit: [0; MAX_BITS as usize + 1],
    };
    let mut next = 0usize;
    let mut code = 0u32;
    let mut len = 1;
    while len <= MAX_BITS as usize {
        c.first[len] = code;
        c.offset[len] = next as u16;
        let mut symbol = 0;
        while symbol < 257 {
            if CODES[symbol].1 as usize == len {
                c.symbols[next] = symbol as u16;
                next += 1;
                code += 1;
            }
            symbol += 1;
        }
        c.limit[len] = (code as u64) << (32 - len);
        code <<= 1;
        len += 1;
    }
    c
}

/// Bytes `src` takes Huffman-coded (padding included).
pub(super) fn encoded_len(src: &[u8]) -> usize {
    let bits: u64 = src
        .iter()
        .map(|&b| u64::from(CODES[usize::from(b)].1))
        .sum();
    usize::try_from(bits.div_ceil(8)).unwrap_or(usize::MAX)
}

/// Appends `src` Huffman-coded to `dst`, padded to a byte with the most significant bits of
/// EOS (ones), as §5.2 requires.
pub(super) fn encode(src: &[u8], dst: &mut Vec<u8>) {
    // Pending bits, right-aligned: fewer than 8 between symbols, at most 37 after adding one.
    let mut pending: u64 = 0;
    let mut count: u32 = 0;
    for &byte in src {
        let (code, len) = CODES[usize::from(byte)];
        pending = (pending << len) | u64::from(code);
        count += len;
        while count >= 8 {
            count -= 8;
            dst.push((pending >> count) as u8);
        }
    }
    if count > 0 {
        dst.push(((pending << (8 - count)) as u8) | (0xff >> count));
    }
}

/// Appends the decoding of the Huffman string `src` to `dst`. Errors (§5.2): padding longer
/// than 7 bits, padding that is not ones (the start of EOS), an EOS symbol.
pub(super) fn decode(src: &[u8], dst: &mut Vec<u8>) -> Result<(), HpackError> {
    // The shortest code is 5 bits, so the output is at most 8/5 of the input.
    dst.reserve(src.len() / 5 * 8 + 8);
    // Input bits not yet decoded, left-aligned; the first `count` are whole bytes taken from
    // `rest`'s front; below them are either zeros or the bits of `rest`'s next bytes.
    let mut bits: u64 = 0;
    let mut count: u32 = 0;
    let mut rest = src;
    loop {
        if let Some((word, _)) = rest.split_first_chunk::<8>() {
            // Take as many whole bytes as fit, in one load. Bits of a byte not taken land
            // below `count` and are ORed again, unchanged, by the next load.
            bits |= u64::from_be_bytes(*word) >> count;
            let taken = (63 - count) / 8;
            rest = rest.get(taken as usize..).unwrap_or_default();
            count += taken * 8;
        } else {
            while count <= 56 {
                let Some((&byte, tail)) = rest.split_first() else {
                    break;
                };
                bits |= u64::from(byte) << (56 - count);
                count += 8;
                rest = tail;
            }
        }
        let last = rest.is_empty();
        // With input left, at least MAX_BITS are buffered: every code is whole.
        while count >= MAX_BITS || (last && count > 0) {
            let short = SHORT[(bits >> (64 - SHORT_BITS)) as usize];
            let (symbol, len) = if short != 0 {
                (short & 0xff, u32::from(short >> 8))
            } else {
                long_code(bits)
            };
            if len > count {
                // The input ended inside a code: what is left is padding, valid only as at
                // most 7 bits of EOS's leading ones.
                if count > 7 {
                    return Err(HpackError::HuffmanPaddingTooLong);
                }
                let ones = u64::MAX << (64 - count);
                return if bits & ones == ones {
                    Ok(())
                } else {
                    Err(HpackError::HuffmanPaddingNotEos)
                };
            }
            if symbol == EOS {
                return Err(HpackError::HuffmanEos);
            }
            dst.push(symbol as u8);
            bits <<= len;
            count -= len;
        }
        if last {
            return Ok(());
        }
    }
}

/// The symbol and bit length of a code longer than `SHORT_BITS` at the top of `bits`.
#[cold]
fn long_code(bits: u64) -> (u16, u32) {
    let top = bits >> 32;
    let c = &CANONICAL;
    let mut len = SHORT_BITS as usize + 1;
    while len <= MAX_BITS as usize {
        if top < c.limit[len] {
            let code = (top >> (32 - len)) as u32;
            // code >= first[len] since the input is not below limit[len - 1]; were that ever
            // false, the wrapped index misses `symbols` and the string is refused as EOS.
            let index =
                usize::from(c.offset[len]).wrapping_add(code.wrapping_sub(c.first[len]) as usize);
            return (c.symbols.get(index).copied().unwrap_or(EOS), len as u32);
        }
        len += 1;
    }
    // Unreachable: the last limit (EOS's) is 2^32, above any 32-bit value.
    (EOS, MAX_BITS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(src: &[u8]) -> Result<Vec<u8>, HpackError> {
        let mut out = Vec::new();
        decode(src, &mut out).map(|()| out)
    }

    fn encoded(src: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode(src, &mut out);
        assert_eq!(out.len(), encoded_len(src));
        out
    }

    #[test]
    fn the_table_is_canonical_and_complete() {
        // Kraft's sum of 2^-len is exactly 1: no code is missing and none is a prefix of another.
        let kraft: u64 = CODES.iter().map(|&(_, len)| 1u64 << (MAX_BITS - len)).sum();
        assert_eq!(kraft, 1 << MAX_BITS);
        let mut order: Vec<usize> = (0..257).collect();
        order.sort_by_key(|&s| (CODES[s].1, s));
        let mut code = 0u32;
        let mut prev_len = CODES[order[0]].1;
        for (i, &s) in order.iter().enumerate() {
            let (want, len) = CODES[s];
            if i > 0 {
                code = (code + 1) << (len - prev_len);
            }
            prev_len = len;
            assert_eq!(code, want, "symbol {s}");
            assert!(want < 1 << len);
        }
        assert_eq!(CODES[256], ((1 << 30) - 1, 30));
    }

    #[test]
    fn every_symbol_round_trips_alone_and_together() {
        for b in 0..=255u8 {
            assert_eq!(decoded(&encoded(&[b])).unwrap(), [b], "byte {b}");
        }
        let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        assert_eq!(decoded(&encoded(&all)).unwrap(), all);
    }

    #[test]
    fn rfc_strings() {
        // C.4.1, C.4.2, C.4.3 and C.6.1.
        let cases: [(&[u8], &[u8]); 5] = [
            (
                b"www.example.com",
                &[
                    0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
                ],
            ),
            (b"no-cache", &[0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf]),
            (
                b"custom-key",
                &[0x25, 0xa8, 0x49, 0xe9, 0x5b, 0xa9, 0x7d, 0x7f],
            ),
            (
                b"custom-value",
                &[0x25, 0xa8, 0x49, 0xe9, 0x5b, 0xb8, 0xe8, 0xb4, 0xbf],
            ),
            (b"302", &[0x64, 0x02]),
        ];
        for (plain, coded) in cases {
            assert_eq!(encoded(plain), coded);
            assert_eq!(decoded(coded).unwrap(), plain);
        }
        assert_eq!(decoded(b"").unwrap(), b"");
        assert_eq!(encoded(b""), b"");
    }

    #[test]
    fn padding_longer_than_seven_bits_is_an_error() {
        // '0' is 00000, then 3 one bits pad the byte; a whole extra 0xff is 11 bits of padding.
        assert_eq!(decoded(&[0x07]).unwrap(), b"0");
        assert_eq!(
            decoded(&[0x07, 0xff]),
            Err(HpackError::HuffmanPaddingTooLong)
        );
        assert_eq!(decoded(&[0xff]), Err(HpackError::HuffmanPaddingTooLong));
    }

    #[test]
    fn padding_that_is_not_ones_is_an_error() {
        // '0' then 000: the padding is the start of another '0', not of EOS.
        assert_eq!(decoded(&[0x00]), Err(HpackError::HuffmanPaddingNotEos));
        assert_eq!(decoded(&[0x06]), Err(HpackError::HuffmanPaddingNotEos));
    }

    #[test]
    fn eos_in_a_string_is_an_error() {
        // 30 ones then 2 ones of padding.
        assert_eq!(
            decoded(&[0xff, 0xff, 0xff, 0xff]),
            Err(HpackError::HuffmanEos)
        );
        // 'a' (00011) then EOS then padding 1.
        let mut bits: u64 = 0b00011;
        bits = (bits << 30) | ((1 << 30) - 1);
        bits = (bits << 5) | 0b11111;
        let bytes = (bits << 24).to_be_bytes();
        assert_eq!(decoded(&bytes[..5]), Err(HpackError::HuffmanEos));
    }

    #[test]
    fn output_never_exceeds_eight_fifths_of_the_input() {
        let zeros = encoded(&[b'0'; 1000]);
        let mut out = Vec::new();
        decode(&zeros, &mut out).unwrap();
        assert_eq!(out.len(), 1000);
        assert!(out.capacity() <= zeros.len() / 5 * 8 + 8);
    }
}
