//! HTTP/2 targets: the server's frame parser, and its HPACK decoder checked against an
//! independent one (loona-hpack, the `hpack` crate's maintained successor; h2 keeps its
//! decoder private even with its `unstable` feature).
//!
//! ```text
//!  bytes ─▶ h2_frames    ─▶ Head::parse + frame::parse, frame after frame ─▶ borrowed parts
//!                            where the payload says; written again by the server's writers
//!                            ─▶ parsed again: the same frame
//!        ─▶ hpack_blocks ─▶ raw header blocks, in sequence ─┬─▶ Sluice's hpack::Decoder
//!        ─▶ hpack_lists  ─▶ header lists ─▶ loona's Encoder ┴─▶ loona's Decoder
//!                            (indexing, table size updates)    same refusals, same fields,
//!                                                              same dynamic table after each
//!                            and Sluice's encoder (Huffman) ─▶ both decoders: the same list
//! ```
//!
//! Where the two decoders legitimately differ, the comparison normalises (and stops the
//! sequence, since one of them has refused):
//! - loona takes a dynamic table size update anywhere in a block; RFC 7541 §4.2 puts it at the
//!   start, and Sluice refuses one after a field (`TableSizeUpdateAfterField`).
//! - loona refuses a block that ends with a size update; nothing in RFC 7541 forbids one, and
//!   Sluice (and h2) take it.
//! - loona reads an integer in at most 4 continuation bytes, Sluice in at most 5 (both refuse
//!   values above 2^32 - 1; §5.1 lets a decoder bound them): a block loona refuses with
//!   `TooManyOctets` may be accepted here when it holds such a 5-byte integer.

use loona_hpack::decoder::{DecoderError, IntegerDecodingError};

use super::Choices;
use crate::h2::frame::{self, flag, kind, Frame, FrameError, Head, Settings, HEAD_LEN};
use crate::h2::hpack;

/// A decoded field, as bytes.
type Field = (Vec<u8>, Vec<u8>);

/// The SETTINGS_HEADER_TABLE_SIZE values the raw target advertises (the limit a size update
/// may set).
const TABLE_LIMITS: [usize; 4] = [hpack::DEFAULT_TABLE_SIZE, 0, 100, 256];
/// Dynamic table entries, at most: every entry counts 32 bytes besides its name and value.
const MAX_ENTRIES: usize = hpack::DEFAULT_TABLE_SIZE / 32;
/// A SETTINGS_MAX_FRAME_SIZE for re-writing header blocks: small, so CONTINUATIONs happen.
const REWRITE_FRAME_SIZE: u32 = frame::DEFAULT_MAX_FRAME_SIZE;

/// Sluice's decoder and loona's, fed the same blocks.
struct Decoders {
    ours: hpack::Decoder,
    reference: loona_hpack::Decoder<'static>,
}

/// Frames, one after the other: a 9-byte head, then as many payload bytes as it says.
///
/// Properties: no panic; a stream error names the frame's own stream (never 0); what a frame
/// borrows (DATA's data, a header block) is the part of the payload padding and priority
/// leave; a parsed frame written again by the server's writer (where it has one for that
/// frame) parses to the same frame.
///
/// Returns whether any frame parsed.
pub fn h2_frames(data: &[u8]) -> bool {
    let mut rest = data;
    let mut parsed = false;
    while let Some((head, tail)) = rest.split_first_chunk::<HEAD_LEN>() {
        let head = Head::parse(head);
        assert!(head.length < 1 << 24 && head.stream < 1 << 31);
        let Some(payload) = tail.get(..head.length as usize) else {
            break;
        };
        rest = &tail[payload.len()..];
        match frame::parse(head, payload) {
            Ok(parsed_frame) => {
                check_frame(head, payload, &parsed_frame);
                rewrite(&parsed_frame);
                parsed = true;
            }
            Err(FrameError::Stream(stream, _, what)) => {
                assert!(stream != 0 && stream == head.stream, "{what} on {stream}");
                assert!(what.starts_with("sent "), "{what}");
            }
            Err(FrameError::Connection(_, what)) => assert!(what.starts_with("sent "), "{what}"),
        }
    }
    parsed
}

/// What a frame borrows is where its payload says.
fn check_frame(head: Head, payload: &[u8], parsed: &Frame<'_>) {
    let padded = head.flags & flag::PADDED != 0;
    match *parsed {
        Frame::Data {
            stream,
            data,
            flow_len,
            ..
        } => {
            assert_eq!(stream, head.stream);
            assert_eq!(flow_len as usize, payload.len(), "padding counts for flow");
            let start = usize::from(padded);
            assert_eq!(data, &payload[start..start + data.len()]);
            if padded {
                assert_eq!(1 + data.len() + usize::from(payload[0]), payload.len());
            }
        }
        Frame::Headers {
            stream,
            priority,
            block,
            ..
        } => {
            assert_eq!(stream, head.stream);
            assert_eq!(stream % 2, 1, "a client's stream is odd");
            assert_eq!(priority.is_some(), head.flags & flag::PRIORITY != 0);
            let start = usize::from(padded) + if priority.is_some() { 5 } else { 0 };
            assert_eq!(block, &payload[start..start + block.len()]);
            let pad = if padded { usize::from(payload[0]) } else { 0 };
            assert_eq!(start + block.len() + pad, payload.len());
        }
        Frame::Continuation { stream, block, .. } => {
            assert_eq!(stream, head.stream);
            assert_eq!(block, payload);
        }
        Frame::Priority { stream, priority } => {
            assert_eq!(stream, head.stream);
            assert_ne!(priority.depends_on, stream);
        }
        Frame::Settings { ack, settings } => {
            assert_eq!(head.stream, 0);
            if ack {
                assert!(payload.is_empty() && settings == Settings::default());
            }
        }
        Frame::Ping { .. } | Frame::GoAway { .. } => assert_eq!(head.stream, 0),
        Frame::RstStream { stream, .. } => assert_eq!(stream, head.stream),
        Frame::WindowUpdate { stream, increment } => {
            assert_eq!(stream, head.stream);
            assert!((1..=frame::MAX_WINDOW).contains(&increment));
        }
        Frame::Unknown { kind } => assert!(kind > kind::CONTINUATION),
    }
}

/// The frame written again by the server's writer for its type, parsed again: the same.
fn rewrite(parsed: &Frame<'_>) {
    let mut out = Vec::new();
    let expected = match *parsed {
        Frame::Data {
            stream,
            end_stream,
            data,
            ..
        } => {
            frame::write_data_head(&mut out, stream, data.len(), end_stream);
            out.extend_from_slice(data);
            Frame::Data {
                stream,
                end_stream,
                data,
                flow_len: data.len() as u32,
            }
        }
        Frame::Headers {
            stream,
            end_stream,
            block,
            ..
        } => {
            // Written as a response's: no priority, the block split at the frame size.
            frame::write_headers(&mut out, stream, block, end_stream, REWRITE_FRAME_SIZE);
            let frames = parse_all(&out);
            let mut joined = Vec::new();
            for (i, (head, written)) in frames.iter().enumerate() {
                let last = i + 1 == frames.len();
                assert_eq!(head.flags & flag::END_HEADERS != 0, last);
                match written {
                    Frame::Headers {
                        block,
                        end_stream: written_end,
                        priority: None,
                        ..
                    } if i == 0 => {
                        assert_eq!(*written_end, end_stream);
                        joined.extend_from_slice(block);
                    }
                    Frame::Continuation { block, .. } if i > 0 => joined.extend_from_slice(block),
                    other => panic!("frame {i} of a written header block: {other:?}"),
                }
            }
            assert_eq!(joined, block, "the header block changed");
            return;
        }
        Frame::Settings { ack: true, .. } => {
            frame::write_settings_ack(&mut out);
            Frame::Settings {
                ack: true,
                settings: Settings::default(),
            }
        }
        Frame::Settings {
            ack: false,
            settings,
        } => {
            use frame::setting;
            let entries: Vec<(u16, u32)> = [
                (setting::HEADER_TABLE_SIZE, settings.header_table_size),
                (setting::ENABLE_PUSH, settings.enable_push.map(u32::from)),
                (
                    setting::MAX_CONCURRENT_STREAMS,
                    settings.max_concurrent_streams,
                ),
                (setting::INITIAL_WINDOW_SIZE, settings.initial_window_size),
                (setting::MAX_FRAME_SIZE, settings.max_frame_size),
                (setting::MAX_HEADER_LIST_SIZE, settings.max_header_list_size),
                (
                    setting::ENABLE_CONNECT_PROTOCOL,
                    settings.enable_connect_protocol.map(u32::from),
                ),
            ]
            .into_iter()
            .filter_map(|(id, value)| Some((id, value?)))
            .collect();
            frame::write_settings(&mut out, &entries);
            Frame::Settings {
                ack: false,
                settings,
            }
        }
        Frame::Ping { data, .. } => {
            frame::write_ping_ack(&mut out, data);
            Frame::Ping { ack: true, data }
        }
        Frame::GoAway {
            last_stream, code, ..
        } => {
            frame::write_goaway(&mut out, last_stream, code);
            Frame::GoAway {
                last_stream,
                code,
                debug: &[],
            }
        }
        Frame::RstStream { stream, code } => {
            frame::write_rst_stream(&mut out, stream, code);
            Frame::RstStream { stream, code }
        }
        Frame::WindowUpdate { stream, increment } => {
            frame::write_window_update(&mut out, stream, increment);
            Frame::WindowUpdate { stream, increment }
        }
        // The server writes none of these.
        Frame::Priority { .. } | Frame::Continuation { .. } | Frame::Unknown { .. } => return,
    };
    let frames = parse_all(&out);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].1, expected, "written again as {out:?}");
}

/// Every frame in bytes the server's writers made; each must parse.
fn parse_all(mut bytes: &[u8]) -> Vec<(Head, Frame<'_>)> {
    let mut frames = Vec::new();
    while let Some((head, rest)) = bytes.split_first_chunk::<HEAD_LEN>() {
        let head = Head::parse(head);
        let (payload, rest) = rest.split_at(head.length as usize);
        let parsed = frame::parse(head, payload)
            .unwrap_or_else(|e| panic!("a frame the server wrote does not parse: {e:?}"));
        frames.push((head, parsed));
        bytes = rest;
    }
    assert!(bytes.is_empty());
    frames
}

/// Raw header blocks decoded in sequence by both decoders: `data[0]` picks the table size
/// limit advertised, then each block is a length byte and that many bytes.
///
/// Properties: no panic; both refuse the same blocks (see the module doc for what is
/// normalised); where both decode, the same fields in the same order and the same dynamic
/// table afterwards, entry by entry.
///
/// Returns whether any block was decoded by both.
pub fn hpack_blocks(data: &[u8]) -> bool {
    let Some((&first, mut rest)) = data.split_first() else {
        return false;
    };
    let limit = TABLE_LIMITS[usize::from(first) % TABLE_LIMITS.len()];
    let mut decoders = Decoders::new(limit);
    let mut decoded = false;
    while let Some((&length, tail)) = rest.split_first() {
        let (block, tail) = tail.split_at(usize::from(length).min(tail.len()));
        rest = tail;
        if decoders.decode(block).is_none() {
            break;
        }
        decoded = true;
    }
    decoded
}

/// Header lists made from `data`, each encoded by loona's encoder (which indexes every new
/// field) after the table size updates `data` asks for, decoded by both decoders in
/// sequence; and each list with a status encoded by Sluice's encoder (Huffman where
/// shorter, never indexing), decoded by a fresh pair.
///
/// Properties: every block decodes, by both, to exactly the list encoded, and the dynamic
/// tables stay the same.
///
/// Returns whether any list was checked.
pub fn hpack_lists(data: &[u8]) -> bool {
    let mut choices = Choices(data);
    let mut encoder = loona_hpack::Encoder::new();
    let mut decoders = Decoders::new(hpack::DEFAULT_TABLE_SIZE);
    let mut checked = false;
    while !choices.0.is_empty() {
        let mut block = Vec::new();
        for _ in 0..choices.below(3) {
            // At most 4080: within the 4096 the decoders allow.
            let size = usize::from(choices.byte()) * 16;
            hpack::write_int(size, 5, 0x20, &mut block);
            encoder.set_max_table_size(size);
        }
        let list = header_list(&mut choices);
        encoder
            .encode_into(
                list.iter().map(|(name, value)| (&name[..], &value[..])),
                &mut block,
            )
            .expect("writing to memory");
        let fields = decoders.decode(&block).unwrap_or_else(|| {
            panic!(
                "loona's encoder wrote a block both refuse: {}",
                shown(&block)
            )
        });
        assert_eq!(fields, list, "decoded from {}", shown(&block));

        let status = 100 + u16::from(choices.byte()) % 900;
        let mut ours = Vec::new();
        hpack::encode_status(status, &mut ours);
        for (name, value) in &list {
            hpack::encode_field(name, value, choices.below(4) == 0, &mut ours);
        }
        let read = Decoders::new(0).decode(&ours).unwrap_or_else(|| {
            panic!(
                "Sluice's encoder wrote a block both refuse: {}",
                shown(&ours)
            )
        });
        let mut sent = vec![(b":status".to_vec(), status.to_string().into_bytes())];
        sent.extend(list);
        assert_eq!(read, sent, "decoded from Sluice's {}", shown(&ours));
        checked = true;
    }
    checked
}

/// A header list of 1 to 12 fields (never empty: loona refuses a block of size updates
/// alone, see the module doc): names from the static table, custom and random ones;
/// values of every byte, some long enough to evict or not to fit the table at all.
fn header_list(choices: &mut Choices<'_>) -> Vec<Field> {
    const NAMES: [&str; 14] = [
        ":method",
        ":path",
        ":authority",
        ":status",
        "accept-encoding",
        "cookie",
        "authorization",
        "set-cookie",
        "content-length",
        "user-agent",
        "x-a",
        "x-forwarded-for",
        "te",
        "www-authenticate",
    ];
    let mut list = Vec::new();
    for _ in 0..1 + choices.below(12) {
        let name: Vec<u8> = match choices.below(4) {
            0 => (0..choices.below(24)).map(|_| choices.byte()).collect(),
            _ => NAMES[choices.below(NAMES.len())].as_bytes().to_vec(),
        };
        let length = match choices.below(16) {
            0 => 1000 + 200 * choices.below(20),
            1..=3 => 0,
            _ => choices.below(40),
        };
        let value: Vec<u8> = match choices.below(3) {
            0 => (0..length).map(|_| choices.byte()).collect(),
            _ => (0..length).map(|i| b"GET /index.html"[i % 15]).collect(),
        };
        list.push((name, value));
    }
    list
}

impl Decoders {
    fn new(limit: usize) -> Decoders {
        let mut reference = loona_hpack::Decoder::new();
        reference.set_max_allowed_table_size(limit);
        reference.set_max_table_size(limit);
        Decoders {
            ours: hpack::Decoder::new(limit),
            reference,
        }
    }

    /// Decodes `block` with both and panics where they disagree: `Some(fields)` when both
    /// decoded it (and their tables still hold the same entries), `None` when either refused
    /// it, as both did or as the module doc allows (neither is used again).
    fn decode(&mut self, block: &[u8]) -> Option<Vec<Field>> {
        let ours = decode_ours(&mut self.ours, block);
        let reference = self.reference.decode(block);
        let fields = match (ours, reference) {
            (Ok(ours), Ok(theirs)) => {
                assert_eq!(ours, theirs, "the decoders differ on {}", shown(block));
                ours
            }
            (Err(_), Err(_)) => return None,
            (Err(hpack::HpackError::TableSizeUpdateAfterField), Ok(_)) => return None,
            (Ok(_), Err(DecoderError::SizeUpdateAtEnd)) => return None,
            (
                Ok(_),
                Err(DecoderError::IntegerDecodingError(IntegerDecodingError::TooManyOctets)),
            ) if has_long_integer(block) => return None,
            (Err(e), Ok(_)) => {
                panic!(
                    "Sluice refused ({e}) a block loona decodes to: {}",
                    shown(block)
                )
            }
            (Ok(ours), Err(e)) => {
                panic!(
                    "loona refused ({e}) a block Sluice decodes to {} fields: {}",
                    ours.len(),
                    shown(block)
                )
            }
        };
        self.same_tables();
        Some(fields)
    }

    /// Reads every dynamic table entry of both, one indexed field at a time, until both run
    /// out. (An index past the table leaves either decoder as it was.)
    fn same_tables(&mut self) {
        for index in 62..=62 + MAX_ENTRIES {
            let mut probe = Vec::new();
            hpack::write_int(index, 7, 0x80, &mut probe);
            let ours = decode_ours(&mut self.ours, &probe);
            let theirs = self.reference.decode(&probe);
            match (ours, theirs) {
                (Ok(ours), Ok(theirs)) => assert_eq!(ours, theirs, "table entry {index}"),
                (Err(_), Err(_)) => return,
                (ours, theirs) => {
                    panic!("table entry {index}: Sluice's {ours:?}, loona's {theirs:?}")
                }
            }
        }
        panic!("more than {MAX_ENTRIES} dynamic table entries");
    }
}

fn decode_ours(
    decoder: &mut hpack::Decoder,
    block: &[u8],
) -> Result<Vec<Field>, hpack::HpackError> {
    let mut fields = Vec::new();
    decoder.decode(block, &mut |name, value| {
        fields.push((name.to_vec(), value.to_vec()))
    })?;
    Ok(fields)
}

/// A block for a failure message: its first bytes in hex, and its length.
fn shown(block: &[u8]) -> String {
    let start: String = block.iter().take(48).map(|b| format!("{b:02x}")).collect();
    format!("{} bytes: {start}…", block.len())
}

/// Whether `block` may hold an integer of 5 continuation bytes (4 with the high bit set, then
/// one more): what Sluice reads and loona refuses.
fn has_long_integer(block: &[u8]) -> bool {
    block
        .windows(5)
        .any(|w| w[..4].iter().all(|b| b & 0x80 != 0))
}
