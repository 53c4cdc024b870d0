use super::*;

type Fields = Vec<(Vec<u8>, Vec<u8>)>;
/// Response fields to encode: (name, value, sensitive).
type Head<'a> = Vec<(&'a [u8], &'a [u8], bool)>;

fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

fn decode(decoder: &mut Decoder, block: &[u8]) -> Result<Fields, HpackError> {
    let mut fields = Vec::new();
    decoder.decode(block, &mut |name, value| {
        fields.push((name.to_vec(), value.to_vec()))
    })?;
    Ok(fields)
}

fn pairs(list: &[(&str, &str)]) -> Fields {
    list.iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

/// The dynamic table, newest first, as (name, value).
fn table(decoder: &Decoder) -> Vec<(String, String)> {
    decoder
        .entries
        .iter()
        .map(|e| {
            let (n, v) = e.name_and_value.split_at(e.name_len);
            (
                String::from_utf8_lossy(n).into(),
                String::from_utf8_lossy(v).into(),
            )
        })
        .collect()
}

fn strings(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

#[test]
fn c2_single_representations() {
    // C.2.1 literal with indexing: inserted.
    let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
    let block = hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572");
    assert_eq!(
        decode(&mut d, &block).unwrap(),
        pairs(&[("custom-key", "custom-header")])
    );
    assert_eq!(table(&d), strings(&[("custom-key", "custom-header")]));
    assert_eq!(d.table_size(), 55);
    // C.2.2 literal without indexing: not inserted.
    let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
    let block = hex("040c 2f73 616d 706c 652f 7061 7468");
    assert_eq!(
        decode(&mut d, &block).unwrap(),
        pairs(&[(":path", "/sample/path")])
    );
    assert_eq!((d.table_size(), d.entries.len()), (0, 0));
    // C.2.3 never indexed: not inserted.
    let block = hex("1008 7061 7373 776f 7264 0673 6563 7265 74");
    assert_eq!(
        decode(&mut d, &block).unwrap(),
        pairs(&[("password", "secret")])
    );
    assert_eq!((d.table_size(), d.entries.len()), (0, 0));
    // C.2.4 indexed.
    assert_eq!(
        decode(&mut d, &[0x82]).unwrap(),
        pairs(&[(":method", "GET")])
    );
    assert_eq!(d.table_size(), 0);
}

const REQUEST_1: [(&str, &str); 4] = [
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
];
const REQUEST_2: [(&str, &str); 5] = [
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
    ("cache-control", "no-cache"),
];
const REQUEST_3: [(&str, &str); 5] = [
    (":method", "GET"),
    (":scheme", "https"),
    (":path", "/index.html"),
    (":authority", "www.example.com"),
    ("custom-key", "custom-value"),
];

/// Decodes `block` and checks its fields, then the dynamic table (newest first) and size.
fn step(
    d: &mut Decoder,
    block: &str,
    fields: &[(&str, &str)],
    entries: &[(&str, &str)],
    size: usize,
) {
    assert_eq!(decode(d, &hex(block)).unwrap(), pairs(fields), "{block}");
    assert_eq!(table(d), strings(entries), "{block}");
    assert_eq!(d.table_size(), size, "{block}");
}

fn requests(blocks: [&str; 3]) {
    let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
    let authority = (":authority", "www.example.com");
    let cache_control = ("cache-control", "no-cache");
    step(&mut d, blocks[0], &REQUEST_1, &[authority], 57);
    step(
        &mut d,
        blocks[1],
        &REQUEST_2,
        &[cache_control, authority],
        110,
    );
    let custom = ("custom-key", "custom-value");
    step(
        &mut d,
        blocks[2],
        &REQUEST_3,
        &[custom, cache_control, authority],
        164,
    );
}

#[test]
fn c3_requests_without_huffman() {
    requests([
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    ]);
}

#[test]
fn c4_requests_with_huffman() {
    requests([
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
    ]);
}

const DATE_1: &str = "Mon, 21 Oct 2013 20:13:21 GMT";
const DATE_2: &str = "Mon, 21 Oct 2013 20:13:22 GMT";
const COOKIE: &str = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
const LOCATION: &str = "https://www.example.com";

fn responses(blocks: [&str; 3]) {
    let mut d = Decoder::new(256);
    let (private, date_1) = (("cache-control", "private"), ("date", DATE_1));
    let location = ("location", LOCATION);
    let (s302, s307) = ((":status", "302"), (":status", "307"));
    let fields = [s302, private, date_1, location];
    step(
        &mut d,
        blocks[0],
        &fields,
        &[location, date_1, private, s302],
        222,
    );
    // ":status: 307" evicts ":status: 302".
    let fields = [s307, private, date_1, location];
    step(
        &mut d,
        blocks[1],
        &fields,
        &[s307, location, date_1, private],
        222,
    );
    let (gzip, cookie) = (("content-encoding", "gzip"), ("set-cookie", COOKIE));
    let date_2 = ("date", DATE_2);
    let fields = [(":status", "200"), private, date_2, location, gzip, cookie];
    step(&mut d, blocks[2], &fields, &[cookie, gzip, date_2], 215);
}

#[test]
fn c5_responses_without_huffman_evict() {
    responses([
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
             2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
             6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
             54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
             5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
             3d31",
    ]);
}

#[test]
fn c6_responses_with_huffman_evict() {
    responses([
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
             2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
             77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
             9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ]);
}

// ---- encoder ----

fn encoded(status: u16, fields: &[(&[u8], &[u8], bool)]) -> Vec<u8> {
    let mut block = Vec::new();
    encode_status(status, &mut block);
    for &(name, value, sensitive) in fields {
        encode_field(name, value, sensitive, &mut block);
    }
    block
}

#[test]
fn encoder_exact_bytes() {
    let mut out = Vec::new();
    encode_status(200, &mut out);
    assert_eq!(out, [0x88]);
    out.clear();
    encode_status(500, &mut out);
    assert_eq!(out, [0x8e]);
    // 302: literal without indexing, name index 8 (0x08); "302" Huffman is 6+5+5 = 16 bits
    // = 0x6402 (C.6.1), shorter than 3 bytes: 0x82 (Huffman, length 2).
    out.clear();
    encode_status(302, &mut out);
    assert_eq!(out, [0x08, 0x82, 0x64, 0x02]);
    // 503: 6+5+6 = 17 bits = 3 bytes, not shorter: raw.
    out.clear();
    encode_status(503, &mut out);
    assert_eq!(out, [0x08, 0x03, b'5', b'0', b'3']);
    // content-length is static index 28 (0x0f 0x0d with a 4-bit prefix: 15 + 13); "5" is
    // 6 bits, one byte either way: raw, 0x01 '5'.
    out.clear();
    encode_field(b"content-length", b"5", false, &mut out);
    assert_eq!(out, [0x0f, 0x0d, 0x01, b'5']);
    // Exact static match: accept-encoding: gzip, deflate is index 16.
    out.clear();
    encode_field(b"accept-encoding", b"gzip, deflate", false, &mut out);
    assert_eq!(out, [0x90]);
    // Sensitive: never indexed (0x10 | index) even for an exact match.
    out.clear();
    encode_field(b"accept-encoding", b"gzip, deflate", true, &mut out);
    assert_eq!(out[0], 0x1f);
    assert_eq!(out[1], 16 - 15);
    // A name the static table lacks: literal, new name: 0x00, then the name Huffman-coded
    // as C.4.3 shows ("custom-key" → 0x88 25a8 49e9 5ba9 7d7f).
    out.clear();
    encode_field(b"custom-key", b"", false, &mut out);
    assert_eq!(out, hex("00 8825 a849 e95b a97d 7f 00"));
    // Sensitive new name: 0x10.
    out.clear();
    encode_field(b"custom-key", b"", true, &mut out);
    assert_eq!(out[0], 0x10);
    // Index 0x3c (60, via) fits the 4-bit prefix only with a continuation byte.
    out.clear();
    encode_field(b"via", b"1.1 sluice", false, &mut out);
    assert_eq!(&out[..2], [0x0f, 60 - 15]);
}

#[test]
fn encoder_round_trips_through_a_fresh_decoder() {
    let long = vec![b'x'; 70_000];
    let high: Vec<u8> = (0x80..=0xffu8).collect();
    let mixed: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    let heads: Vec<Head> = vec![
        vec![],
        vec![(b"content-type", b"text/html; charset=utf-8", false)],
        vec![
            (b"content-type", b"application/json", false),
            (b"content-length", b"1234", false),
            (b"date", b"Wed, 25 Nov 2026 21:09:46 GMT", false),
            (
                b"set-cookie",
                b"session=abc123; Path=/; HttpOnly; Secure",
                true,
            ),
            (b"set-cookie", b"theme=dark", true),
            (b"cache-control", b"", false),
            (b"x-empty", b"", false),
            (b"vary", b"accept-encoding", false),
            (b"accept-ranges", b"bytes", false),
            (b"www-authenticate", b"Basic realm=\"x\"", true),
        ],
        vec![(b"x-long", &long, false), (b"x-high", &high, false)],
        vec![
            (b"x-mixed", &mixed, false),
            (b"location", b"/a?b=c&d=%20", false),
        ],
        vec![
            (b"accept-encoding", b"gzip, deflate", false),
            (b":status", b"200", false),
        ],
    ];
    let statuses = (100..=599).chain([0, 7, 99, 1000, 9999, 65535]);
    for (i, status) in statuses.enumerate() {
        let head = &heads[i % heads.len()];
        let block = encoded(status, head);
        let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
        let fields = decode(&mut d, &block).unwrap();
        let mut want: Fields = vec![(b":status".to_vec(), status.to_string().into_bytes())];
        want.extend(head.iter().map(|&(n, v, _)| (n.to_vec(), v.to_vec())));
        assert_eq!(fields, want, "status {status}");
        // Nothing the encoder writes inserts into the peer's table.
        assert_eq!(d.table_size(), 0);
    }
}

#[test]
fn huffman_is_chosen_only_when_strictly_shorter() {
    let mut out = Vec::new();
    encode_field(b"x-a", b"aaaaaaaa", false, &mut out);
    // "aaaaaaaa" is 40 bits = 5 bytes, Huffman flag set.
    assert_eq!(&out[out.len() - 6..out.len() - 5], [0x85]);
    out.clear();
    encode_field(b"x-a", &[0xff; 4], false, &mut out);
    assert_eq!(&out[out.len() - 5..], [0x04, 0xff, 0xff, 0xff, 0xff]);
}

#[test]
fn static_name_lookup_agrees_with_the_table() {
    for (i, &(name, _)) in STATIC_TABLE.iter().enumerate() {
        let first = STATIC_TABLE.iter().position(|&(n, _)| n == name).unwrap() + 1;
        assert_eq!(static_name_index(name), Some(first), "{i}");
    }
    assert_eq!(static_name_index(b"x-custom"), None);
    assert_eq!(static_name_index(b""), None);
    assert_eq!(static_name_index(&[b'a'; 100]), None);
}

// ---- decoder rules and errors ----

#[test]
fn integers_at_the_limits() {
    let mut pos = 0;
    // RFC 7541 C.1.2: 1337 with a 5-bit prefix.
    assert_eq!(read_int(&[0x1f, 0x9a, 0x0a], &mut pos, 5), Ok(1337));
    assert_eq!(pos, 3);
    // C.1.3: 42 with an 8-bit prefix.
    pos = 0;
    assert_eq!(read_int(&[0x2a], &mut pos, 8), Ok(42));
    // u32::MAX with a 7-bit prefix: 127 + 4294967168 in five 7-bit groups.
    let mut max = Vec::new();
    write_int(u32::MAX as usize, 7, 0, &mut max);
    pos = 0;
    assert_eq!(read_int(&max, &mut pos, 7), Ok(u32::MAX as usize));
    let mut above = Vec::new();
    write_int(u32::MAX as usize + 1, 7, 0, &mut above);
    pos = 0;
    assert_eq!(
        read_int(&above, &mut pos, 7),
        Err(HpackError::IntegerOverflow)
    );
    for prefix in 1..=8 {
        for value in [
            0,
            1,
            30,
            31,
            126,
            127,
            128,
            254,
            255,
            256,
            1 << 20,
            u32::MAX as usize,
        ] {
            let mut out = Vec::new();
            write_int(value, prefix, 0, &mut out);
            let mut pos = 0;
            assert_eq!(
                read_int(&out, &mut pos, prefix),
                Ok(value),
                "{prefix} {value}"
            );
            assert_eq!(pos, out.len());
        }
    }
}

#[test]
fn integer_with_too_many_continuation_bytes_is_an_error() {
    let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
    // Index 127 + 0 + 0 + ...: six continuation bytes, each value zero.
    let block = [0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00];
    assert_eq!(decode(&mut d, &block), Err(HpackError::IntegerOverflow));
}

#[test]
fn integer_above_u32_is_an_error() {
    let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
    let block = [0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
    assert_eq!(decode(&mut d, &block), Err(HpackError::IntegerOverflow));
}

#[test]
fn truncated_integer_is_an_error() {
    let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
    assert_eq!(
        decode(&mut d, &[0xff, 0x80]),
        Err(HpackError::IntegerTruncated)
    );
    assert_eq!(decode(&mut d, &[0xff]), Err(HpackError::IntegerTruncated));
    // A literal whose value's length byte is missing.
    let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
    assert_eq!(decode(&mut d, &[0x41]), Err(HpackError::IntegerTruncated));
}

#[test]
fn index_zero_is_an_error() {
    let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
    assert_eq!(decode(&mut d, &[0x80]), Err(HpackError::IndexZero));
}

#[test]
fn index_past_the_tables_is_an_error() {
    let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
    assert_eq!(
        decode(&mut d, &[0x80 | 61]).unwrap(),
        pairs(&[("www-authenticate", "")])
    );
    let err = decode(&mut d, &[0x80 | 62]).unwrap_err();
    assert_eq!(
        err,
        HpackError::IndexPastTable {
            index: 62,
            entries: 0
        }
    );
    assert_eq!(
        err.to_string(),
        "index 62 is past the dynamic table (0 entries, the last index 61)"
    );
    // One entry: 62 is valid, 63 is not; also as a literal's name index.
    decode(&mut d, &hex("400a 6375 7374 6f6d 2d6b 6579 0178")).unwrap();
    assert_eq!(
        decode(&mut d, &[0x80 | 62]).unwrap(),
        pairs(&[("custom-key", "x")])
    );
    let err = decode(&mut d, &[0x80 | 63]).unwrap_err();
    assert_eq!(
        err,
        HpackError::IndexPastTable {
            index: 63,
            entries: 1
        }
    );
    let err = decode(&mut d, &[0x0f, 63 - 15, 0x00]).unwrap_err();
    assert_eq!(
        err,
        HpackError::IndexPastTable {
            index: 63,
            entries: 1
        }
    );
}

#[test]
fn incremental_indexing_evicts_oldest_to_fit() {
    // Room for exactly two 40-byte entries ("a" = "1234567" is 1 + 7 + 32).
    let mut d = Decoder::new(80);
    for (i, value) in ["1111111", "2222222", "3333333"].iter().enumerate() {
        let mut block = vec![0x40, 0x01, b'a', 0x07];
        block.extend_from_slice(value.as_bytes());
        decode(&mut d, &block).unwrap();
        assert_eq!(d.table_size(), 40 * (i + 1).min(2));
    }
    assert_eq!(table(&d), strings(&[("a", "3333333"), ("a", "2222222")]));
    // A literal naming the oldest entry (63) evicts that entry to insert itself: the name
    // must survive its own entry's eviction. (63 fills the 6-bit prefix: 0x7f, then 0.)
    decode(
        &mut d,
        &[0x7f, 0x00, 0x07, b'4', b'4', b'4', b'4', b'4', b'4', b'4'],
    )
    .unwrap();
    assert_eq!(table(&d), strings(&[("a", "4444444"), ("a", "3333333")]));
}

#[test]
fn entry_larger_than_the_table_empties_it_and_is_not_inserted() {
    let mut d = Decoder::new(60);
    decode(&mut d, &[0x40, 0x01, b'a', 0x01, b'b']).unwrap();
    assert_eq!(d.table_size(), 34);
    let mut block = vec![0x40, 0x01, b'a', 0x1c];
    block.extend_from_slice(&[b'v'; 28]); // 1 + 28 + 32 = 61 > 60
    let fields = decode(&mut d, &block).unwrap();
    assert_eq!(fields, vec![(b"a".to_vec(), vec![b'v'; 28])]);
    assert_eq!(
        (d.table_size(), d.entries.len(), d.entries.capacity()),
        (0, 0, 0)
    );
}

#[test]
fn size_update_shrinks_and_evicts_and_gives_memory_back() {
    let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
    requests_then(&mut d);
    assert_eq!(d.table_size(), 164);
    // Shrink to 120: the oldest (":authority", 57) goes.
    decode(&mut d, &[0x3f, 120 - 31]).unwrap();
    assert_eq!(d.table_size(), 107);
    assert_eq!(d.entries.len(), 2);
    // Two updates in a row, 0 then back to 4096, then a field: table emptied.
    let mut block = vec![0x20];
    write_int(4096, 5, 0x20, &mut block);
    block.push(0x82);
    assert_eq!(
        decode(&mut d, &block).unwrap(),
        pairs(&[(":method", "GET")])
    );
    assert_eq!((d.table_size(), d.entries.capacity()), (0, 0));
    assert_eq!(d.max_size, 4096);
}

fn requests_then(d: &mut Decoder) {
    for block in [
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    ] {
        decode(d, &hex(block)).unwrap();
    }
}

#[test]
fn size_update_after_a_field_is_an_error() {
    let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
    assert_eq!(
        decode(&mut d, &[0x82, 0x20]),
        Err(HpackError::TableSizeUpdateAfterField)
    );
    // At the start of the next block it is fine.
    let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
    decode(&mut d, &[0x82]).unwrap();
    assert_eq!(
        decode(&mut d, &[0x20, 0x82]).unwrap(),
        pairs(&[(":method", "GET")])
    );
}

#[test]
fn size_update_above_the_limit_is_an_error() {
    let mut d = Decoder::new(100);
    let mut block = Vec::new();
    write_int(101, 5, 0x20, &mut block);
    let err = decode(&mut d, &block).unwrap_err();
    assert_eq!(
        err,
        HpackError::TableSizeAboveLimit {
            size: 101,
            limit: 100
        }
    );
    assert_eq!(
        err.to_string(),
        "table size update to 101 is above the limit 100"
    );
    let mut d = Decoder::new(100);
    block.clear();
    write_int(100, 5, 0x20, &mut block);
    decode(&mut d, &block).unwrap();
}

#[test]
fn string_past_the_end_of_the_block_is_an_error() {
    let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
    let err = decode(&mut d, &hex("400a 6375")).unwrap_err();
    assert_eq!(
        err,
        HpackError::StringTruncated {
            length: 10,
            left: 2
        }
    );
    // The value's length, Huffman flagged.
    let err = decode(&mut d, &[0x04, 0x85, b'a']).unwrap_err();
    assert_eq!(err, HpackError::StringTruncated { length: 5, left: 1 });
}

#[test]
fn huffman_errors_in_a_block() {
    let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
    // :path (index 4, without indexing) whose value is a Huffman string.
    let with = |coded: &[u8]| {
        let mut block = vec![0x04, 0x80 | coded.len() as u8];
        block.extend_from_slice(coded);
        block
    };
    assert_eq!(
        decode(&mut d, &with(&[0x07])).unwrap(),
        pairs(&[(":path", "0")])
    );
    let err = decode(&mut d, &with(&[0x07, 0xff])).unwrap_err();
    assert_eq!(err, HpackError::HuffmanPaddingTooLong);
    let err = decode(&mut d, &with(&[0x00])).unwrap_err();
    assert_eq!(err, HpackError::HuffmanPaddingNotEos);
    let err = decode(&mut d, &with(&[0xff, 0xff, 0xff, 0xff])).unwrap_err();
    assert_eq!(err, HpackError::HuffmanEos);
}

#[test]
fn without_indexing_and_never_indexed_do_not_insert() {
    let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
    let fields = decode(
        &mut d,
        &hex("0001 6101 62 1001 6101 62 0f0d 0135 1f0d 0135"),
    )
    .unwrap();
    let want = [
        ("a", "b"),
        ("a", "b"),
        ("content-length", "5"),
        ("content-length", "5"),
    ];
    assert_eq!(fields, pairs(&want));
    assert_eq!((d.table_size(), d.entries.capacity()), (0, 0));
}

#[test]
fn a_new_decoder_allocates_nothing_and_debug_hides_contents() {
    let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
    assert_eq!(d.entries.capacity(), 0);
    decode(
        &mut d,
        &hex("400a 6375 7374 6f6d 2d6b 6579 0673 6563 7265 74"),
    )
    .unwrap();
    let debug = format!("{d:?}");
    assert_eq!(
        debug,
        "Decoder { entries: 1, size: 48, max_size: 4096, limit: 4096 }"
    );
    assert!(!debug.contains("secret"));
}

#[test]
fn every_error_has_words() {
    let all = [
        HpackError::IntegerTruncated,
        HpackError::IntegerOverflow,
        HpackError::IndexZero,
        HpackError::IndexPastTable {
            index: 70,
            entries: 2,
        },
        HpackError::StringTruncated { length: 9, left: 1 },
        HpackError::HuffmanPaddingTooLong,
        HpackError::HuffmanPaddingNotEos,
        HpackError::HuffmanEos,
        HpackError::TableSizeUpdateAfterField,
        HpackError::TableSizeAboveLimit {
            size: 5000,
            limit: 4096,
        },
    ];
    let texts: std::collections::HashSet<String> = all.iter().map(|e| e.to_string()).collect();
    assert_eq!(texts.len(), all.len());
    assert_eq!(
        all[3].to_string(),
        "index 70 is past the dynamic table (2 entries, the last index 63)"
    );
}

// ---- hostile input ----

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn random_and_mutated_blocks_never_panic_and_stay_bounded() {
    let mut seeds: Vec<Vec<u8>> = [
        "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
        "040c 2f73 616d 706c 652f 7061 7468",
        "1008 7061 7373 776f 7264 0673 6563 7265 74",
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
             2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
             77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
             9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        "3fe1 1f82",
    ]
    .iter()
    .map(|s| hex(s))
    .collect();
    seeds.push(encoded(
        418,
        &[
            (b"content-type", b"text/plain", false),
            (b"set-cookie", b"a=b", true),
            (b"x-custom-header", b"some value with spaces", false),
        ],
    ));
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
    let (mut ok, mut failed) = (0, 0);
    for round in 0..100_000 {
        let mut block = if round % 4 == 0 {
            (0..rng.below(64)).map(|_| rng.next() as u8).collect()
        } else {
            seeds[rng.below(seeds.len())].clone()
        };
        for _ in 0..=rng.below(4) {
            if block.is_empty() {
                break;
            }
            let at = rng.below(block.len());
            match rng.below(5) {
                0 => block[at] ^= 1 << rng.below(8),
                1 => block[at] = rng.next() as u8,
                2 => block.truncate(at),
                3 => block.insert(at, rng.next() as u8),
                _ => {
                    let copy = block[at..].to_vec();
                    block.extend_from_slice(&copy);
                }
            }
        }
        let mut out_bytes = 0;
        let mut scratch = Vec::new();
        let result = if round % 2 == 0 {
            d.decode(&block, &mut |n, v| out_bytes += n.len() + v.len())
        } else {
            d.decode_with(
                &block,
                &mut |n, v| out_bytes += n.len() + v.len(),
                &mut scratch,
            )
        };
        match result {
            Ok(()) => ok += 1,
            Err(_) => {
                failed += 1;
                // A connection would end here; the next block gets a fresh decoder.
                d = Decoder::new(DEFAULT_TABLE_SIZE);
            }
        }
        // What one block allocates: Huffman output is at most 8/5 of the block (the
        // scratch may double once when a value follows a Huffman name).
        assert!(scratch.capacity() <= 2 * (block.len() / 5 * 8 + 16));
        // The table never exceeds its limit and its bookkeeping agrees with its entries.
        let counted: usize = d.entries.iter().map(|e| e.name_and_value.len() + 32).sum();
        assert_eq!(counted, d.table_size());
        assert!(d.table_size() <= DEFAULT_TABLE_SIZE);
        assert!(d.entries.capacity() <= DEFAULT_TABLE_SIZE / 32 * 2);
        assert!(SCRATCH.with(|s| s.borrow().capacity()) <= SCRATCH_KEEP);
    }
    // Both outcomes were exercised.
    assert!(ok > 1000 && failed > 1000, "ok {ok} failed {failed}");
}

#[test]
fn a_huffman_string_decodes_into_at_most_eight_fifths_of_its_length() {
    // A hostile block: one long Huffman string of '0's (5 bits each).
    let coded = {
        let mut v = Vec::new();
        huffman::encode(&[b'0'; 8000], &mut v);
        v
    };
    let mut block = vec![0x00, 0x01, b'a', 0xff];
    write_int(coded.len(), 7, 0x80, &mut block);
    // write_int wrote a full integer with flags 0x80; replace the 0xff placeholder.
    block.remove(3);
    block.extend_from_slice(&coded);
    let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
    let mut len = 0;
    d.decode(&block, &mut |_, v| len = v.len()).unwrap();
    assert_eq!(len, 8000);
    let mut scratch = Vec::new();
    d.decode_with(&block, &mut |_, _| {}, &mut scratch).unwrap();
    assert!(
        scratch.capacity() <= block.len() / 5 * 8 + 8,
        "{}",
        scratch.capacity()
    );
}

#[test]
fn plain_fields_decode_as_huffman_coded_ones_do() {
    let fields: [(&[u8], &[u8]); 4] = [
        (b":method", b"POST"),
        (b":path", b"/grpc.testing.TestService/UnaryCall"),
        (b"content-type", b"application/grpc"),
        (b"x-custom", b"some value"),
    ];
    let mut plain = Vec::new();
    let mut coded = Vec::new();
    for (name, value) in fields {
        super::encode_field_plain(name, value, false, &mut plain);
        super::encode_field(name, value, false, &mut coded);
    }
    assert!(plain.len() > coded.len(), "Huffman coding saves bytes here");
    for block in [plain, coded] {
        let mut decoded = Vec::new();
        super::Decoder::new(4096)
            .decode(&block, &mut |n, v| decoded.push((n.to_vec(), v.to_vec())))
            .unwrap();
        let want: Vec<_> = fields
            .iter()
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .collect();
        assert_eq!(decoded, want);
    }
}
