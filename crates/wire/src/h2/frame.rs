//! HTTP/2 frames (RFC 9113 §4, §6) as Sluice's HTTP/2 server sees them: the parse of every
//! frame a *client* may send, with the error each malformed one is, and the writers of every
//! frame the server sends.
//!
//! ```text
//!  client bytes ─▶ 9 bytes ─▶ Head::parse ─▶ (conn: length ≤ its SETTINGS_MAX_FRAME_SIZE)
//!      ─▶ head.length bytes ─▶ parse(head, payload) ─▶ Frame, borrowing the payload ─▶ conn
//!                                                  └▶ FrameError::Connection ─▶ GOAWAY
//!                                                  └▶ FrameError::Stream     ─▶ RST_STREAM
//!  conn ─▶ write_* ─▶ appended to the connection's write buffer ─▶ client
//! ```
//! Only what one frame alone shows is checked here: whether a stream is idle, open or closed,
//! whether a CONTINUATION was expected, and flow-control windows are the connection's call.
//! Nothing here panics on client bytes: slices are taken with `get`/`split_*_chunk`, never
//! indexed, so a fuzzer's worst frame is an `Err`, not a crash.

/// What a client sends first (RFC 9113 §3.4), before its SETTINGS frame.
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The length of every frame's head: 24-bit length, type, flags, 31-bit stream.
pub const HEAD_LEN: usize = 9;
/// SETTINGS_MAX_FRAME_SIZE until a peer says otherwise, and the least it may say (§6.5.2).
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;
/// The largest flow-control window (§6.9.1) and SETTINGS_INITIAL_WINDOW_SIZE (§6.5.2).
pub const MAX_WINDOW: u32 = (1 << 31) - 1;

/// The largest SETTINGS_MAX_FRAME_SIZE a peer may announce: what a 24-bit length holds.
const LARGEST_MAX_FRAME_SIZE: u32 = (1 << 24) - 1;
/// Stream identifiers are 31 bits; the top bit is reserved and ignored on receipt (§4.1).
const STREAM_MASK: u32 = (1 << 31) - 1;
/// The highest stream id (2^31-1): a GOAWAY naming it refuses no stream.
pub const MAX_STREAM_ID: u32 = STREAM_MASK;

/// Frame types (RFC 9113 §6).
pub mod kind {
    pub const DATA: u8 = 0x0;
    pub const HEADERS: u8 = 0x1;
    pub const PRIORITY: u8 = 0x2;
    pub const RST_STREAM: u8 = 0x3;
    pub const SETTINGS: u8 = 0x4;
    pub const PUSH_PROMISE: u8 = 0x5;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const WINDOW_UPDATE: u8 = 0x8;
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flags; each means something only on the types named.
pub mod flag {
    /// DATA, HEADERS: the sender's last frame on this stream.
    pub const END_STREAM: u8 = 0x1;
    /// SETTINGS, PING: an acknowledgement.
    pub const ACK: u8 = 0x1;
    /// HEADERS, CONTINUATION: the header block ends with this frame.
    pub const END_HEADERS: u8 = 0x4;
    /// DATA, HEADERS: a pad length byte first, that many bytes of padding last.
    pub const PADDED: u8 = 0x8;
    /// HEADERS: a 5-byte priority (dependency, weight) before the header block.
    pub const PRIORITY: u8 = 0x20;
}

/// SETTINGS identifiers (RFC 9113 §6.5.2; RFC 8441 §3 for ENABLE_CONNECT_PROTOCOL).
pub mod setting {
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    pub const ENABLE_PUSH: u16 = 0x2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
    pub const ENABLE_CONNECT_PROTOCOL: u16 = 0x8;
    /// RFC 9218 §2.1: not kept (Sluice ignores priorities either way), but a value other than
    /// 0 or 1 is still the client's PROTOCOL_ERROR.
    pub(super) const NO_RFC7540_PRIORITIES: u16 = 0x9;
}

/// A frame's 9-byte head (RFC 9113 §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    /// The payload's length (24 bits).
    pub length: u32,
    /// The frame type (see [`kind`]).
    pub kind: u8,
    /// The flags (see [`flag`]); unknown ones are ignored.
    pub flags: u8,
    /// The stream identifier, reserved bit cleared.
    pub stream: u32,
}

/// An HTTP/2 error code (RFC 9113 §7); codes this file does not know are kept as they came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorCode(pub u32);

/// What is wrong with a frame, and how far it reaches (RFC 9113 §5.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The connection ends: GOAWAY with this code. The text says what the client did.
    Connection(ErrorCode, &'static str),
    /// Only this stream ends: RST_STREAM with this code.
    Stream(u32, ErrorCode, &'static str),
}

/// A stream's priority as RFC 7540 defined it (RFC 9113 §5.3.2 deprecates it; it is parsed
/// because a client may still send it, and its one hard rule, no self-dependency, is checked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Priority {
    /// The stream this one depends on (reserved bit excluded: it is `exclusive`).
    pub depends_on: u32,
    pub exclusive: bool,
    /// The weight as sent: the stream's weight minus one (0 ..= 255 for 1 ..= 256).
    pub weight: u8,
}

/// Settings a SETTINGS frame carried (RFC 9113 §6.5.2), each `None` when absent; repeated →
/// the last one; unknown identifiers ignored. Values already checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    pub header_table_size: Option<u32>,
    pub enable_push: Option<bool>,
    pub max_concurrent_streams: Option<u32>,
    /// At most [`MAX_WINDOW`].
    pub initial_window_size: Option<u32>,
    /// Within `DEFAULT_MAX_FRAME_SIZE ..= 2^24 - 1`.
    pub max_frame_size: Option<u32>,
    pub max_header_list_size: Option<u32>,
    /// RFC 8441 (id 0x8): the client may use extended CONNECT (WebSocket over HTTP/2).
    pub enable_connect_protocol: Option<bool>,
}

/// One parsed client frame, borrowing its payload.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// `data`: padding removed; `flow_len`: the whole payload length (padding counts against
    /// flow control, §6.1).
    Data {
        stream: u32,
        end_stream: bool,
        data: &'a [u8],
        flow_len: u32,
    },
    /// `block`: the header block fragment, padding and priority removed.
    Headers {
        stream: u32,
        end_stream: bool,
        end_headers: bool,
        priority: Option<Priority>,
        block: &'a [u8],
    },
    Priority {
        stream: u32,
        priority: Priority,
    },
    RstStream {
        stream: u32,
        code: ErrorCode,
    },
    Settings {
        ack: bool,
        settings: Settings,
    },
    Ping {
        ack: bool,
        data: [u8; 8],
    },
    GoAway {
        last_stream: u32,
        code: ErrorCode,
        debug: &'a [u8],
    },
    WindowUpdate {
        stream: u32,
        increment: u32,
    },
    Continuation {
        stream: u32,
        end_headers: bool,
        block: &'a [u8],
    },
    /// An unknown type: ignored (§5.5).
    Unknown {
        kind: u8,
    },
}

impl Head {
    /// Reads a head; every 9 bytes are one (an unknown type or flag is the parse's concern).
    pub fn parse(bytes: &[u8; HEAD_LEN]) -> Head {
        let [l0, l1, l2, kind, flags, s0, s1, s2, s3] = *bytes;
        Head {
            length: u32::from_be_bytes([0, l0, l1, l2]),
            kind,
            flags,
            stream: u32::from_be_bytes([s0, s1, s2, s3]) & STREAM_MASK,
        }
    }

    fn has(self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

impl ErrorCode {
    pub const NO_ERROR: ErrorCode = ErrorCode(0x0);
    pub const PROTOCOL_ERROR: ErrorCode = ErrorCode(0x1);
    pub const INTERNAL_ERROR: ErrorCode = ErrorCode(0x2);
    pub const FLOW_CONTROL_ERROR: ErrorCode = ErrorCode(0x3);
    pub const SETTINGS_TIMEOUT: ErrorCode = ErrorCode(0x4);
    pub const STREAM_CLOSED: ErrorCode = ErrorCode(0x5);
    pub const FRAME_SIZE_ERROR: ErrorCode = ErrorCode(0x6);
    pub const REFUSED_STREAM: ErrorCode = ErrorCode(0x7);
    pub const CANCEL: ErrorCode = ErrorCode(0x8);
    pub const COMPRESSION_ERROR: ErrorCode = ErrorCode(0x9);
    pub const CONNECT_ERROR: ErrorCode = ErrorCode(0xa);
    pub const ENHANCE_YOUR_CALM: ErrorCode = ErrorCode(0xb);
    pub const INADEQUATE_SECURITY: ErrorCode = ErrorCode(0xc);
    pub const HTTP_1_1_REQUIRED: ErrorCode = ErrorCode(0xd);

    /// The code's name in RFC 9113 §7 (for logs and metric labels), "UNKNOWN" for others
    /// (§7: an unknown code is not an error, it means no more than INTERNAL_ERROR might).
    pub fn name(self) -> &'static str {
        match self {
            Self::NO_ERROR => "NO_ERROR",
            Self::PROTOCOL_ERROR => "PROTOCOL_ERROR",
            Self::INTERNAL_ERROR => "INTERNAL_ERROR",
            Self::FLOW_CONTROL_ERROR => "FLOW_CONTROL_ERROR",
            Self::SETTINGS_TIMEOUT => "SETTINGS_TIMEOUT",
            Self::STREAM_CLOSED => "STREAM_CLOSED",
            Self::FRAME_SIZE_ERROR => "FRAME_SIZE_ERROR",
            Self::REFUSED_STREAM => "REFUSED_STREAM",
            Self::CANCEL => "CANCEL",
            Self::COMPRESSION_ERROR => "COMPRESSION_ERROR",
            Self::CONNECT_ERROR => "CONNECT_ERROR",
            Self::ENHANCE_YOUR_CALM => "ENHANCE_YOUR_CALM",
            Self::INADEQUATE_SECURITY => "INADEQUATE_SECURITY",
            Self::HTTP_1_1_REQUIRED => "HTTP_1_1_REQUIRED",
            _ => "UNKNOWN",
        }
    }
}

/// Parses one frame; `payload.len()` is `head.length` (the caller checked the length against
/// its SETTINGS_MAX_FRAME_SIZE: that is FRAME_SIZE_ERROR on the connection, the caller's job).
/// Lengths are taken from `payload`, so a mismatch cannot read out of bounds.
pub fn parse<'a>(head: Head, payload: &'a [u8]) -> Result<Frame<'a>, FrameError> {
    match head.kind {
        kind::DATA => parse_data(head, payload),
        kind::HEADERS => parse_headers(head, payload),
        kind::PRIORITY => parse_priority(head, payload),
        kind::RST_STREAM => parse_rst_stream(head, payload),
        kind::SETTINGS => parse_settings(head, payload),
        // §8.4: only a server pushes, and a client's PUSH_PROMISE is PROTOCOL_ERROR (§6.6).
        kind::PUSH_PROMISE => Err(connection(
            ErrorCode::PROTOCOL_ERROR,
            "sent PUSH_PROMISE (clients cannot push)",
        )),
        kind::PING => parse_ping(head, payload),
        kind::GOAWAY => parse_goaway(head, payload),
        kind::WINDOW_UPDATE => parse_window_update(head, payload),
        kind::CONTINUATION => {
            let stream = on_stream(head, "sent CONTINUATION on stream 0")?;
            Ok(Frame::Continuation {
                stream,
                end_headers: head.has(flag::END_HEADERS),
                block: payload,
            })
        }
        other => Ok(Frame::Unknown { kind: other }),
    }
}

fn connection(code: ErrorCode, what: &'static str) -> FrameError {
    FrameError::Connection(code, what)
}

/// The stream of a frame that belongs to one (§6: such a frame on stream 0 is PROTOCOL_ERROR).
fn on_stream(head: Head, what: &'static str) -> Result<u32, FrameError> {
    match head.stream {
        0 => Err(connection(ErrorCode::PROTOCOL_ERROR, what)),
        stream => Ok(stream),
    }
}

/// Checks that a connection-level frame came on stream 0.
fn on_connection(head: Head, what: &'static str) -> Result<(), FrameError> {
    match head.stream {
        0 => Ok(()),
        _ => Err(connection(ErrorCode::PROTOCOL_ERROR, what)),
    }
}

/// Splits a PADDED frame's pad length byte off: the padding's length and the rest. A frame
/// without the flag has no padding. A PADDED frame too short to hold the byte is "too small to
/// contain mandatory frame data", FRAME_SIZE_ERROR (§4.2).
fn pad_length(head: Head, payload: &[u8]) -> Result<(usize, &[u8]), FrameError> {
    if !head.has(flag::PADDED) {
        return Ok((0, payload));
    }
    match payload.split_first() {
        Some((&pad, rest)) => Ok((usize::from(pad), rest)),
        None => Err(connection(
            ErrorCode::FRAME_SIZE_ERROR,
            "sent a PADDED frame without its pad length",
        )),
    }
}

/// `content` without its last `pad` bytes. Padding longer than what is left is PROTOCOL_ERROR
/// (§6.1, §6.2); padding exactly as long leaves an empty body or block, which is allowed.
fn strip_padding<'a>(
    content: &'a [u8],
    pad: usize,
    what: &'static str,
) -> Result<&'a [u8], FrameError> {
    content
        .len()
        .checked_sub(pad)
        .and_then(|kept| content.get(..kept))
        .ok_or(connection(ErrorCode::PROTOCOL_ERROR, what))
}

fn read_u32(bytes: [u8; 4]) -> u32 {
    u32::from_be_bytes(bytes)
}

fn read_priority(bytes: &[u8; 5]) -> Priority {
    let [d0, d1, d2, d3, weight] = *bytes;
    let word = read_u32([d0, d1, d2, d3]);
    Priority {
        depends_on: word & STREAM_MASK,
        exclusive: word & !STREAM_MASK != 0,
        weight,
    }
}

fn parse_data(head: Head, payload: &[u8]) -> Result<Frame<'_>, FrameError> {
    let stream = on_stream(head, "sent DATA on stream 0")?;
    let (pad, rest) = pad_length(head, payload)?;
    let data = strip_padding(rest, pad, "sent DATA with more padding than payload")?;
    Ok(Frame::Data {
        stream,
        end_stream: head.has(flag::END_STREAM),
        data,
        // At most 2^24 - 1 when the caller keeps to its own limit; saturating keeps a caller's
        // mistake from being a panic.
        flow_len: u32::try_from(payload.len()).unwrap_or(u32::MAX),
    })
}

fn parse_headers(head: Head, payload: &[u8]) -> Result<Frame<'_>, FrameError> {
    let stream = on_stream(head, "sent HEADERS on stream 0")?;
    // §5.1.1: a client opens odd streams only; even ones are the server's (for pushes, which
    // Sluice never makes), so a client's HEADERS there is always an unexpected identifier.
    if stream % 2 == 0 {
        return Err(connection(
            ErrorCode::PROTOCOL_ERROR,
            "sent HEADERS on an even (server-initiated) stream",
        ));
    }
    let (pad, rest) = pad_length(head, payload)?;
    let (priority, rest) = if head.has(flag::PRIORITY) {
        let Some((fields, rest)) = rest.split_first_chunk::<5>() else {
            return Err(connection(
                ErrorCode::FRAME_SIZE_ERROR,
                "sent HEADERS with the PRIORITY flag but no room for the priority",
            ));
        };
        (Some(read_priority(fields)), rest)
    } else {
        (None, rest)
    };
    let block = strip_padding(
        rest,
        pad,
        "sent HEADERS with more padding than header block",
    )?;
    if priority.is_some_and(|priority| priority.depends_on == stream) {
        // §5.3.1 makes this a stream error, and §5.4.1 lets any stream error end the
        // connection. It does here because the header block must still go through HPACK (it
        // may change the dynamic table), and an error that drops the block would leave the
        // decoder out of step with the client; ending the connection cannot.
        return Err(connection(
            ErrorCode::PROTOCOL_ERROR,
            "sent HEADERS for a stream depending on itself",
        ));
    }
    Ok(Frame::Headers {
        stream,
        end_stream: head.has(flag::END_STREAM),
        end_headers: head.has(flag::END_HEADERS),
        priority,
        block,
    })
}

fn parse_priority(head: Head, payload: &[u8]) -> Result<Frame<'_>, FrameError> {
    let stream = on_stream(head, "sent PRIORITY on stream 0")?;
    let Ok(fields) = <&[u8; 5]>::try_from(payload) else {
        return Err(FrameError::Stream(
            stream,
            ErrorCode::FRAME_SIZE_ERROR,
            "sent PRIORITY whose length is not 5",
        ));
    };
    let priority = read_priority(fields);
    if priority.depends_on == stream {
        return Err(FrameError::Stream(
            stream,
            ErrorCode::PROTOCOL_ERROR,
            "sent PRIORITY for a stream depending on itself",
        ));
    }
    Ok(Frame::Priority { stream, priority })
}

fn parse_rst_stream(head: Head, payload: &[u8]) -> Result<Frame<'_>, FrameError> {
    let stream = on_stream(head, "sent RST_STREAM on stream 0")?;
    let Ok(code) = <[u8; 4]>::try_from(payload) else {
        return Err(connection(
            ErrorCode::FRAME_SIZE_ERROR,
            "sent RST_STREAM whose length is not 4",
        ));
    };
    Ok(Frame::RstStream {
        stream,
        code: ErrorCode(read_u32(code)),
    })
}

fn parse_settings(head: Head, payload: &[u8]) -> Result<Frame<'_>, FrameError> {
    on_connection(head, "sent SETTINGS on a stream")?;
    let ack = head.has(flag::ACK);
    if ack && !payload.is_empty() {
        return Err(connection(
            ErrorCode::FRAME_SIZE_ERROR,
            "sent a SETTINGS acknowledgement with a payload",
        ));
    }
    let (entries, []) = payload.as_chunks::<6>() else {
        return Err(connection(
            ErrorCode::FRAME_SIZE_ERROR,
            "sent SETTINGS whose length is not a multiple of 6",
        ));
    };
    let mut settings = Settings::default();
    for &[i0, i1, v0, v1, v2, v3] in entries {
        let value = read_u32([v0, v1, v2, v3]);
        match u16::from_be_bytes([i0, i1]) {
            setting::HEADER_TABLE_SIZE => settings.header_table_size = Some(value),
            setting::ENABLE_PUSH => {
                settings.enable_push = Some(flag_value(value, "sent SETTINGS_ENABLE_PUSH > 1")?);
            }
            setting::MAX_CONCURRENT_STREAMS => settings.max_concurrent_streams = Some(value),
            setting::INITIAL_WINDOW_SIZE => {
                if value > MAX_WINDOW {
                    return Err(connection(
                        ErrorCode::FLOW_CONTROL_ERROR,
                        "sent SETTINGS_INITIAL_WINDOW_SIZE above 2^31 - 1",
                    ));
                }
                settings.initial_window_size = Some(value);
            }
            setting::MAX_FRAME_SIZE => {
                if !(DEFAULT_MAX_FRAME_SIZE..=LARGEST_MAX_FRAME_SIZE).contains(&value) {
                    return Err(connection(
                        ErrorCode::PROTOCOL_ERROR,
                        "sent SETTINGS_MAX_FRAME_SIZE outside 16384 ..= 16777215",
                    ));
                }
                settings.max_frame_size = Some(value);
            }
            setting::MAX_HEADER_LIST_SIZE => settings.max_header_list_size = Some(value),
            setting::ENABLE_CONNECT_PROTOCOL => {
                settings.enable_connect_protocol = Some(flag_value(
                    value,
                    "sent SETTINGS_ENABLE_CONNECT_PROTOCOL > 1",
                )?);
            }
            setting::NO_RFC7540_PRIORITIES => {
                flag_value(value, "sent SETTINGS_NO_RFC7540_PRIORITIES > 1")?;
            }
            // §6.5.2: an unknown setting is ignored, so that new ones can be sent safely.
            _ => {}
        }
    }
    Ok(Frame::Settings { ack, settings })
}

/// A setting that is 0 or 1; anything else is PROTOCOL_ERROR.
fn flag_value(value: u32, what: &'static str) -> Result<bool, FrameError> {
    match value {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(connection(ErrorCode::PROTOCOL_ERROR, what)),
    }
}

fn parse_ping(head: Head, payload: &[u8]) -> Result<Frame<'_>, FrameError> {
    on_connection(head, "sent PING on a stream")?;
    let Ok(data) = <[u8; 8]>::try_from(payload) else {
        return Err(connection(
            ErrorCode::FRAME_SIZE_ERROR,
            "sent PING whose length is not 8",
        ));
    };
    Ok(Frame::Ping {
        ack: head.has(flag::ACK),
        data,
    })
}

fn parse_goaway(head: Head, payload: &[u8]) -> Result<Frame<'_>, FrameError> {
    on_connection(head, "sent GOAWAY on a stream")?;
    let Some((&[s0, s1, s2, s3, c0, c1, c2, c3], debug)) = payload.split_first_chunk::<8>() else {
        return Err(connection(
            ErrorCode::FRAME_SIZE_ERROR,
            "sent GOAWAY shorter than 8 bytes",
        ));
    };
    Ok(Frame::GoAway {
        last_stream: read_u32([s0, s1, s2, s3]) & STREAM_MASK,
        code: ErrorCode(read_u32([c0, c1, c2, c3])),
        debug,
    })
}

fn parse_window_update(head: Head, payload: &[u8]) -> Result<Frame<'_>, FrameError> {
    let Ok(bytes) = <[u8; 4]>::try_from(payload) else {
        return Err(connection(
            ErrorCode::FRAME_SIZE_ERROR,
            "sent WINDOW_UPDATE whose length is not 4",
        ));
    };
    let increment = read_u32(bytes) & STREAM_MASK;
    if increment == 0 {
        // §6.9: an error on the flow-control window the frame was for.
        let what = "sent WINDOW_UPDATE with an increment of 0";
        return Err(match head.stream {
            0 => connection(ErrorCode::PROTOCOL_ERROR, what),
            stream => FrameError::Stream(stream, ErrorCode::PROTOCOL_ERROR, what),
        });
    }
    Ok(Frame::WindowUpdate {
        stream: head.stream,
        increment,
    })
}

/// Appends a frame head. `length` is at most 2^24 - 1 (the writers below keep to the peer's
/// SETTINGS_MAX_FRAME_SIZE, which is less); the stream's reserved bit is written as 0.
pub fn write_head(dst: &mut Vec<u8>, length: usize, kind: u8, flags: u8, stream: u32) {
    debug_assert!(
        length <= LARGEST_MAX_FRAME_SIZE as usize,
        "frame of {length} bytes"
    );
    let [_, l0, l1, l2] = u32::try_from(length)
        .unwrap_or(LARGEST_MAX_FRAME_SIZE)
        .to_be_bytes();
    let [s0, s1, s2, s3] = (stream & STREAM_MASK).to_be_bytes();
    dst.extend_from_slice(&[l0, l1, l2, kind, flags, s0, s1, s2, s3]);
}

/// Appends a SETTINGS frame carrying `settings` (identifier, value), in that order.
pub fn write_settings(dst: &mut Vec<u8>, settings: &[(u16, u32)]) {
    dst.reserve(HEAD_LEN + 6 * settings.len());
    write_head(dst, 6 * settings.len(), kind::SETTINGS, 0, 0);
    for &(id, value) in settings {
        dst.extend_from_slice(&id.to_be_bytes());
        dst.extend_from_slice(&value.to_be_bytes());
    }
}

/// Appends the acknowledgement of the client's SETTINGS (§6.5.3).
pub fn write_settings_ack(dst: &mut Vec<u8>) {
    write_head(dst, 0, kind::SETTINGS, flag::ACK, 0);
}

/// Appends the answer to the client's PING: the same 8 bytes, ACK set (§6.7).
pub fn write_ping_ack(dst: &mut Vec<u8>, data: [u8; 8]) {
    dst.reserve(HEAD_LEN + data.len());
    write_head(dst, data.len(), kind::PING, flag::ACK, 0);
    dst.extend_from_slice(&data);
}

/// Appends a PING (not an acknowledgement) carrying `data`, which the peer echoes back.
pub fn write_ping(dst: &mut Vec<u8>, data: [u8; 8]) {
    dst.reserve(HEAD_LEN + data.len());
    write_head(dst, data.len(), kind::PING, 0, 0);
    dst.extend_from_slice(&data);
}

/// Appends a GOAWAY without debug data: the reason is logged here rather than sent, so a
/// client learns nothing about the server beyond the code.
pub fn write_goaway(dst: &mut Vec<u8>, last_stream: u32, code: ErrorCode) {
    dst.reserve(HEAD_LEN + 8);
    write_head(dst, 8, kind::GOAWAY, 0, 0);
    dst.extend_from_slice(&(last_stream & STREAM_MASK).to_be_bytes());
    dst.extend_from_slice(&code.0.to_be_bytes());
}

pub fn write_rst_stream(dst: &mut Vec<u8>, stream: u32, code: ErrorCode) {
    dst.reserve(HEAD_LEN + 4);
    write_head(dst, 4, kind::RST_STREAM, 0, stream);
    dst.extend_from_slice(&code.0.to_be_bytes());
}

/// Appends a WINDOW_UPDATE; `increment` is 1 ..= 2^31 - 1 (0 is the receiver's PROTOCOL_ERROR).
pub fn write_window_update(dst: &mut Vec<u8>, stream: u32, increment: u32) {
    debug_assert!(
        (1..=MAX_WINDOW).contains(&increment),
        "window increment {increment}"
    );
    dst.reserve(HEAD_LEN + 4);
    write_head(dst, 4, kind::WINDOW_UPDATE, 0, stream);
    dst.extend_from_slice(&(increment & STREAM_MASK).to_be_bytes());
}

/// A header block as HEADERS then CONTINUATIONs, each payload at most `max_frame_size`.
/// END_STREAM goes on the HEADERS frame (§8.1: it ends the stream once the block is done),
/// END_HEADERS on the last frame. `max_frame_size` is the client's setting, held to the
/// range a valid one has, so no frame is ever too large or empty-but-for-a-huge-block.
pub fn write_headers(
    dst: &mut Vec<u8>,
    stream: u32,
    block: &[u8],
    end_stream: bool,
    max_frame_size: u32,
) {
    let max = max_frame_size.clamp(DEFAULT_MAX_FRAME_SIZE, LARGEST_MAX_FRAME_SIZE) as usize;
    let frames = block.len().div_ceil(max).max(1);
    dst.reserve(block.len() + HEAD_LEN * frames);
    let mut chunks = block.chunks(max).peekable();
    let first = chunks.next().unwrap_or_default();
    let mut flags = if end_stream { flag::END_STREAM } else { 0 };
    if chunks.peek().is_none() {
        flags |= flag::END_HEADERS;
    }
    write_head(dst, first.len(), kind::HEADERS, flags, stream);
    dst.extend_from_slice(first);
    while let Some(chunk) = chunks.next() {
        let flags = if chunks.peek().is_none() {
            flag::END_HEADERS
        } else {
            0
        };
        write_head(dst, chunk.len(), kind::CONTINUATION, flags, stream);
        dst.extend_from_slice(chunk);
    }
}

/// The 9-byte head of a DATA frame of `length` bytes (the payload is written by the caller).
pub fn write_data_head(dst: &mut Vec<u8>, stream: u32, length: usize, end_stream: bool) {
    let flags = if end_stream { flag::END_STREAM } else { 0 };
    write_head(dst, length, kind::DATA, flags, stream);
}

#[cfg(test)]
mod tests;
