use super::*;

mod writing;

fn head(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Head {
    Head {
        length: payload.len() as u32,
        kind,
        flags,
        stream,
    }
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Result<Frame<'_>, FrameError> {
    parse(head(kind, flags, stream, payload), payload)
}

/// The error's code and whether it ends the connection (`None`) or which stream.
fn error_of(result: Result<Frame<'_>, FrameError>) -> (Option<u32>, ErrorCode) {
    match result {
        Err(FrameError::Connection(code, what)) => {
            assert!(what.starts_with("sent "), "{what}");
            (None, code)
        }
        Err(FrameError::Stream(stream, code, what)) => {
            assert!(what.starts_with("sent "), "{what}");
            (Some(stream), code)
        }
        Ok(frame) => panic!("parsed {frame:?}"),
    }
}

const CONN_PROTOCOL: (Option<u32>, ErrorCode) = (None, ErrorCode::PROTOCOL_ERROR);
const CONN_FRAME_SIZE: (Option<u32>, ErrorCode) = (None, ErrorCode::FRAME_SIZE_ERROR);

/// Every frame the writers produced in `bytes`, parsed back, with its head.
fn read_all(mut bytes: &[u8]) -> Vec<(Head, Frame<'_>)> {
    let mut frames = Vec::new();
    while let Some((head_bytes, rest)) = bytes.split_first_chunk::<HEAD_LEN>() {
        let head = Head::parse(head_bytes);
        let (payload, rest) = rest.split_at(head.length as usize);
        frames.push((head, parse(head, payload).expect("a written frame parses")));
        bytes = rest;
    }
    assert!(bytes.is_empty(), "{} trailing bytes", bytes.len());
    frames
}

fn settings_payload(entries: &[(u16, u32)]) -> Vec<u8> {
    let mut dst = Vec::new();
    write_settings(&mut dst, entries);
    dst.split_off(HEAD_LEN)
}

#[test]
fn preface_is_the_rfcs() {
    assert_eq!(PREFACE.len(), 24);
    assert!(PREFACE.starts_with(b"PRI * HTTP/2.0"));
}

#[test]
fn head_parse_reads_fields_and_clears_the_reserved_bit() {
    let head = Head::parse(&[0x01, 0x02, 0x03, 0x07, 0xff, 0x80, 0, 0, 0x05]);
    assert_eq!(
        head,
        Head {
            length: 0x01_0203,
            kind: kind::GOAWAY,
            flags: 0xff,
            stream: 5
        }
    );
    assert_eq!(Head::parse(&[0xff; 9]).stream, MAX_WINDOW);
    assert_eq!(Head::parse(&[0xff; 9]).length, LARGEST_MAX_FRAME_SIZE);
}

#[test]
fn error_code_names() {
    let all = [
        (ErrorCode::NO_ERROR, "NO_ERROR"),
        (ErrorCode::PROTOCOL_ERROR, "PROTOCOL_ERROR"),
        (ErrorCode::INTERNAL_ERROR, "INTERNAL_ERROR"),
        (ErrorCode::FLOW_CONTROL_ERROR, "FLOW_CONTROL_ERROR"),
        (ErrorCode::SETTINGS_TIMEOUT, "SETTINGS_TIMEOUT"),
        (ErrorCode::STREAM_CLOSED, "STREAM_CLOSED"),
        (ErrorCode::FRAME_SIZE_ERROR, "FRAME_SIZE_ERROR"),
        (ErrorCode::REFUSED_STREAM, "REFUSED_STREAM"),
        (ErrorCode::CANCEL, "CANCEL"),
        (ErrorCode::COMPRESSION_ERROR, "COMPRESSION_ERROR"),
        (ErrorCode::CONNECT_ERROR, "CONNECT_ERROR"),
        (ErrorCode::ENHANCE_YOUR_CALM, "ENHANCE_YOUR_CALM"),
        (ErrorCode::INADEQUATE_SECURITY, "INADEQUATE_SECURITY"),
        (ErrorCode::HTTP_1_1_REQUIRED, "HTTP_1_1_REQUIRED"),
    ];
    for (number, (code, name)) in all.into_iter().enumerate() {
        assert_eq!(code.0 as usize, number, "{name}: codes are 0..=13 in order");
        assert_eq!(code.name(), name);
    }
    assert_eq!(ErrorCode(0xe).name(), "UNKNOWN");
    assert_eq!(ErrorCode(u32::MAX).name(), "UNKNOWN");
}

#[test]
fn stream_frames_on_stream_0_are_protocol_errors() {
    for kind in [
        kind::DATA,
        kind::HEADERS,
        kind::PRIORITY,
        kind::RST_STREAM,
        kind::CONTINUATION,
    ] {
        // A payload that would be valid on a stream, so only the stream is wrong.
        let payload = [0, 0, 0, 1, 16];
        let payload = if kind == kind::RST_STREAM {
            &payload[..4]
        } else {
            &payload[..]
        };
        assert_eq!(
            error_of(frame(kind, 0, 0, payload)),
            CONN_PROTOCOL,
            "type {kind}"
        );
    }
}

#[test]
fn connection_frames_on_a_stream_are_protocol_errors() {
    assert_eq!(error_of(frame(kind::SETTINGS, 0, 1, &[])), CONN_PROTOCOL);
    assert_eq!(
        error_of(frame(kind::SETTINGS, flag::ACK, 1, &[])),
        CONN_PROTOCOL
    );
    assert_eq!(error_of(frame(kind::PING, 0, 1, &[0; 8])), CONN_PROTOCOL);
    assert_eq!(error_of(frame(kind::GOAWAY, 0, 3, &[0; 8])), CONN_PROTOCOL);
}

#[test]
fn data_without_padding() {
    assert_eq!(
        frame(kind::DATA, flag::END_STREAM, 1, b"hello"),
        Ok(Frame::Data {
            stream: 1,
            end_stream: true,
            data: b"hello",
            flow_len: 5
        })
    );
    assert_eq!(
        frame(kind::DATA, 0, 3, b""),
        Ok(Frame::Data {
            stream: 3,
            end_stream: false,
            data: b"",
            flow_len: 0
        })
    );
}

#[test]
fn data_padding_is_removed_but_counts_against_flow_control() {
    assert_eq!(
        frame(kind::DATA, flag::PADDED, 1, b"\x03abc\0\0\0"),
        Ok(Frame::Data {
            stream: 1,
            end_stream: false,
            data: b"abc",
            flow_len: 7
        })
    );
    // Padding that fills all but the pad length byte leaves empty data: allowed (§6.1
    // forbids padding as long as the *whole* payload, which includes that byte).
    assert_eq!(
        frame(kind::DATA, flag::PADDED, 1, b"\x03\0\0\0"),
        Ok(Frame::Data {
            stream: 1,
            end_stream: false,
            data: b"",
            flow_len: 4
        })
    );
    assert_eq!(
        frame(kind::DATA, flag::PADDED, 1, b"\x00"),
        Ok(Frame::Data {
            stream: 1,
            end_stream: false,
            data: b"",
            flow_len: 1
        })
    );
}

#[test]
fn data_with_too_much_padding_is_a_protocol_error() {
    assert_eq!(
        error_of(frame(kind::DATA, flag::PADDED, 1, b"\x04\0\0\0")),
        CONN_PROTOCOL
    );
    assert_eq!(
        error_of(frame(kind::DATA, flag::PADDED, 1, b"\xffabc")),
        CONN_PROTOCOL
    );
}

#[test]
fn padded_frames_without_a_pad_length_are_frame_size_errors() {
    assert_eq!(
        error_of(frame(kind::DATA, flag::PADDED, 1, b"")),
        CONN_FRAME_SIZE
    );
    assert_eq!(
        error_of(frame(kind::HEADERS, flag::PADDED, 1, b"")),
        CONN_FRAME_SIZE
    );
}

#[test]
fn headers_plain() {
    assert_eq!(
        frame(
            kind::HEADERS,
            flag::END_STREAM | flag::END_HEADERS,
            1,
            b"\x82\x84"
        ),
        Ok(Frame::Headers {
            stream: 1,
            end_stream: true,
            end_headers: true,
            priority: None,
            block: b"\x82\x84"
        })
    );
    // Without END_HEADERS: CONTINUATION follows (the connection's business).
    assert_eq!(
        frame(kind::HEADERS, 0, 5, b""),
        Ok(Frame::Headers {
            stream: 5,
            end_stream: false,
            end_headers: false,
            priority: None,
            block: b""
        })
    );
}

#[test]
fn headers_with_padding_and_priority() {
    // pad 2 | exclusive, depends on 3 | weight 15 | block | padding
    let payload = b"\x02\x80\0\0\x03\x0f\x82\x86\0\0";
    assert_eq!(
        frame(
            kind::HEADERS,
            flag::PADDED | flag::PRIORITY | flag::END_HEADERS,
            1,
            payload
        ),
        Ok(Frame::Headers {
            stream: 1,
            end_stream: false,
            end_headers: true,
            priority: Some(Priority {
                depends_on: 3,
                exclusive: true,
                weight: 15
            }),
            block: b"\x82\x86"
        })
    );
    // The priority alone, no block: allowed.
    assert_eq!(
        frame(kind::HEADERS, flag::PRIORITY, 1, b"\0\0\0\0\xff"),
        Ok(Frame::Headers {
            stream: 1,
            end_stream: false,
            end_headers: false,
            priority: Some(Priority {
                depends_on: 0,
                exclusive: false,
                weight: 255
            }),
            block: b""
        })
    );
}

#[test]
fn headers_without_room_for_the_priority_are_frame_size_errors() {
    assert_eq!(
        error_of(frame(kind::HEADERS, flag::PRIORITY, 1, b"\0\0\0\x03")),
        CONN_FRAME_SIZE
    );
    assert_eq!(
        error_of(frame(kind::HEADERS, flag::PRIORITY, 1, b"")),
        CONN_FRAME_SIZE
    );
    // Padded: the pad length byte is there, the 5 priority bytes are not.
    assert_eq!(
        error_of(frame(
            kind::HEADERS,
            flag::PADDED | flag::PRIORITY,
            1,
            b"\0\0\0\0\x03"
        )),
        CONN_FRAME_SIZE
    );
}

#[test]
fn headers_with_too_much_padding_are_protocol_errors() {
    assert_eq!(
        error_of(frame(kind::HEADERS, flag::PADDED, 1, b"\x03ab")),
        CONN_PROTOCOL
    );
    // Padding may fill what the priority leaves, not eat into the priority.
    assert_eq!(
        frame(
            kind::HEADERS,
            flag::PADDED | flag::PRIORITY,
            1,
            b"\x01\0\0\0\x03\x0f\0"
        )
        .map(|frame| matches!(frame, Frame::Headers { block: b"", .. })),
        Ok(true)
    );
    assert_eq!(
        error_of(frame(
            kind::HEADERS,
            flag::PADDED | flag::PRIORITY,
            1,
            b"\x02\0\0\0\x03\x0f\0"
        )),
        CONN_PROTOCOL
    );
}

#[test]
fn headers_depending_on_their_own_stream_end_the_connection() {
    // §5.3.1 calls it a stream error; see parse_headers for why it is the connection's.
    assert_eq!(
        error_of(frame(kind::HEADERS, flag::PRIORITY, 3, b"\0\0\0\x03\x10")),
        CONN_PROTOCOL
    );
    // Exclusive bit set: still the same stream.
    assert_eq!(
        error_of(frame(kind::HEADERS, flag::PRIORITY, 3, b"\x80\0\0\x03\x10")),
        CONN_PROTOCOL
    );
}

#[test]
fn headers_on_an_even_stream_are_protocol_errors() {
    assert_eq!(
        error_of(frame(kind::HEADERS, flag::END_HEADERS, 2, b"\x82")),
        CONN_PROTOCOL
    );
}

#[test]
fn priority_frames() {
    assert_eq!(
        frame(kind::PRIORITY, 0, 5, b"\x80\0\0\x03\x07"),
        Ok(Frame::Priority {
            stream: 5,
            priority: Priority {
                depends_on: 3,
                exclusive: true,
                weight: 7
            }
        })
    );
    // Allowed on any stream, even an idle or even-numbered one (§6.3).
    assert!(frame(kind::PRIORITY, 0, 2, b"\0\0\0\0\0").is_ok());
}

#[test]
fn priority_of_the_wrong_length_is_a_stream_frame_size_error() {
    for length in [0, 4, 6] {
        let payload = vec![0; length];
        assert_eq!(
            error_of(frame(kind::PRIORITY, 0, 7, &payload)),
            (Some(7), ErrorCode::FRAME_SIZE_ERROR),
            "length {length}"
        );
    }
}

#[test]
fn priority_depending_on_its_own_stream_is_a_stream_protocol_error() {
    assert_eq!(
        error_of(frame(kind::PRIORITY, 0, 9, b"\0\0\0\x09\0")),
        (Some(9), ErrorCode::PROTOCOL_ERROR)
    );
}

#[test]
fn rst_stream_frames() {
    assert_eq!(
        frame(kind::RST_STREAM, 0, 1, b"\0\0\0\x08"),
        Ok(Frame::RstStream {
            stream: 1,
            code: ErrorCode::CANCEL
        })
    );
    for length in [0, 3, 5] {
        let payload = vec![0; length];
        assert_eq!(
            error_of(frame(kind::RST_STREAM, 0, 1, &payload)),
            CONN_FRAME_SIZE,
            "length {length}"
        );
    }
}

#[test]
fn settings_read_every_known_identifier() {
    let payload = settings_payload(&[
        (setting::HEADER_TABLE_SIZE, 0),
        (setting::ENABLE_PUSH, 0),
        (setting::MAX_CONCURRENT_STREAMS, 100),
        (setting::INITIAL_WINDOW_SIZE, MAX_WINDOW),
        (setting::MAX_FRAME_SIZE, LARGEST_MAX_FRAME_SIZE),
        (setting::MAX_HEADER_LIST_SIZE, 8192),
        (setting::ENABLE_CONNECT_PROTOCOL, 1),
        (setting::NO_RFC7540_PRIORITIES, 1),
    ]);
    assert_eq!(
        frame(kind::SETTINGS, 0, 0, &payload),
        Ok(Frame::Settings {
            ack: false,
            settings: Settings {
                header_table_size: Some(0),
                enable_push: Some(false),
                max_concurrent_streams: Some(100),
                initial_window_size: Some(MAX_WINDOW),
                max_frame_size: Some(LARGEST_MAX_FRAME_SIZE),
                max_header_list_size: Some(8192),
                enable_connect_protocol: Some(true),
            }
        })
    );
}

#[test]
fn settings_keep_the_last_of_a_repeat_and_ignore_unknown_identifiers() {
    let payload = settings_payload(&[
        (setting::INITIAL_WINDOW_SIZE, 1),
        (0x0, 7),
        (0xa, u32::MAX),
        (0xffff, 0),
        (setting::INITIAL_WINDOW_SIZE, 2),
        (setting::ENABLE_PUSH, 1),
    ]);
    assert_eq!(
        frame(kind::SETTINGS, 0, 0, &payload),
        Ok(Frame::Settings {
            ack: false,
            settings: Settings {
                initial_window_size: Some(2),
                enable_push: Some(true),
                ..Settings::default()
            }
        })
    );
    assert_eq!(
        frame(kind::SETTINGS, 0, 0, &[]),
        Ok(Frame::Settings {
            ack: false,
            settings: Settings::default()
        })
    );
}

#[test]
fn settings_ack() {
    assert_eq!(
        frame(kind::SETTINGS, flag::ACK, 0, &[]),
        Ok(Frame::Settings {
            ack: true,
            settings: Settings::default()
        })
    );
    let payload = settings_payload(&[(setting::ENABLE_PUSH, 0)]);
    assert_eq!(
        error_of(frame(kind::SETTINGS, flag::ACK, 0, &payload)),
        CONN_FRAME_SIZE
    );
}

#[test]
fn settings_of_a_length_not_a_multiple_of_6_are_frame_size_errors() {
    for length in [1, 5, 7, 11, 13] {
        let payload = vec![0; length];
        assert_eq!(
            error_of(frame(kind::SETTINGS, 0, 0, &payload)),
            CONN_FRAME_SIZE,
            "length {length}"
        );
    }
}

#[test]
fn settings_values_out_of_range() {
    let cases = [
        (setting::ENABLE_PUSH, 2, ErrorCode::PROTOCOL_ERROR),
        (setting::ENABLE_PUSH, u32::MAX, ErrorCode::PROTOCOL_ERROR),
        (
            setting::INITIAL_WINDOW_SIZE,
            MAX_WINDOW + 1,
            ErrorCode::FLOW_CONTROL_ERROR,
        ),
        (
            setting::INITIAL_WINDOW_SIZE,
            u32::MAX,
            ErrorCode::FLOW_CONTROL_ERROR,
        ),
        (setting::MAX_FRAME_SIZE, 0, ErrorCode::PROTOCOL_ERROR),
        (
            setting::MAX_FRAME_SIZE,
            DEFAULT_MAX_FRAME_SIZE - 1,
            ErrorCode::PROTOCOL_ERROR,
        ),
        (
            setting::MAX_FRAME_SIZE,
            LARGEST_MAX_FRAME_SIZE + 1,
            ErrorCode::PROTOCOL_ERROR,
        ),
        (
            setting::ENABLE_CONNECT_PROTOCOL,
            2,
            ErrorCode::PROTOCOL_ERROR,
        ),
        (setting::NO_RFC7540_PRIORITIES, 2, ErrorCode::PROTOCOL_ERROR),
    ];
    for (id, value, code) in cases {
        // A valid setting first: a bad one anywhere fails the frame.
        let payload = settings_payload(&[(setting::HEADER_TABLE_SIZE, 4096), (id, value)]);
        assert_eq!(
            error_of(frame(kind::SETTINGS, 0, 0, &payload)),
            (None, code),
            "setting {id} = {value}"
        );
    }
    // The bounds themselves are valid.
    let payload = settings_payload(&[
        (setting::MAX_FRAME_SIZE, DEFAULT_MAX_FRAME_SIZE),
        (setting::INITIAL_WINDOW_SIZE, 0),
    ]);
    assert!(frame(kind::SETTINGS, 0, 0, &payload).is_ok());
}

#[test]
fn push_promise_from_a_client_is_a_protocol_error() {
    assert_eq!(
        error_of(frame(
            kind::PUSH_PROMISE,
            flag::END_HEADERS,
            1,
            b"\0\0\0\x02\x82"
        )),
        CONN_PROTOCOL
    );
    assert_eq!(
        error_of(frame(kind::PUSH_PROMISE, 0, 0, b"")),
        CONN_PROTOCOL
    );
}

#[test]
fn ping_frames() {
    assert_eq!(
        frame(kind::PING, 0, 0, b"12345678"),
        Ok(Frame::Ping {
            ack: false,
            data: *b"12345678"
        })
    );
    assert_eq!(
        frame(kind::PING, flag::ACK, 0, b"abcdefgh"),
        Ok(Frame::Ping {
            ack: true,
            data: *b"abcdefgh"
        })
    );
    for length in [0, 7, 9] {
        let payload = vec![0; length];
        assert_eq!(
            error_of(frame(kind::PING, 0, 0, &payload)),
            CONN_FRAME_SIZE,
            "length {length}"
        );
    }
}

#[test]
fn goaway_frames() {
    assert_eq!(
        frame(kind::GOAWAY, 0, 0, b"\x80\0\0\x05\0\0\0\x0bcalm down"),
        Ok(Frame::GoAway {
            last_stream: 5,
            code: ErrorCode::ENHANCE_YOUR_CALM,
            debug: b"calm down"
        })
    );
    assert_eq!(
        frame(kind::GOAWAY, 0, 0, &[0; 8]),
        Ok(Frame::GoAway {
            last_stream: 0,
            code: ErrorCode::NO_ERROR,
            debug: b""
        })
    );
    for length in [0, 4, 7] {
        let payload = vec![0; length];
        assert_eq!(
            error_of(frame(kind::GOAWAY, 0, 0, &payload)),
            CONN_FRAME_SIZE,
            "length {length}"
        );
    }
}

#[test]
fn window_update_frames() {
    assert_eq!(
        frame(kind::WINDOW_UPDATE, 0, 0, b"\x80\0\x01\0"),
        Ok(Frame::WindowUpdate {
            stream: 0,
            increment: 256
        })
    );
    // Allowed on any stream here; whether it is open is the connection's question.
    assert_eq!(
        frame(kind::WINDOW_UPDATE, 0, 4, b"\x7f\xff\xff\xff"),
        Ok(Frame::WindowUpdate {
            stream: 4,
            increment: MAX_WINDOW
        })
    );
    for length in [0, 3, 5, 8] {
        let payload = vec![1; length];
        for stream in [0, 1] {
            assert_eq!(
                error_of(frame(kind::WINDOW_UPDATE, 0, stream, &payload)),
                CONN_FRAME_SIZE,
                "length {length} on stream {stream}"
            );
        }
    }
}

#[test]
fn window_update_of_0_is_a_protocol_error_where_it_applies() {
    assert_eq!(
        error_of(frame(kind::WINDOW_UPDATE, 0, 0, &[0; 4])),
        CONN_PROTOCOL
    );
    assert_eq!(
        error_of(frame(kind::WINDOW_UPDATE, 0, 3, &[0; 4])),
        (Some(3), ErrorCode::PROTOCOL_ERROR)
    );
    // Only the reserved bit set is still an increment of 0.
    assert_eq!(
        error_of(frame(kind::WINDOW_UPDATE, 0, 3, b"\x80\0\0\0")),
        (Some(3), ErrorCode::PROTOCOL_ERROR)
    );
}

#[test]
fn continuation_frames() {
    assert_eq!(
        frame(
            kind::CONTINUATION,
            flag::END_HEADERS | flag::PADDED,
            1,
            b"\x82"
        ),
        Ok(Frame::Continuation {
            stream: 1,
            end_headers: true,
            block: b"\x82"
        }),
        "CONTINUATION has no padding: the PADDED bit means nothing on it"
    );
}

#[test]
fn unknown_types_and_flags_are_ignored() {
    for kind in [0xa, 0x10, 0xff] {
        assert_eq!(
            frame(kind, 0xff, 0, b"whatever"),
            Ok(Frame::Unknown { kind })
        );
    }
    assert_eq!(
        frame(kind::PING, 0xfe, 0, &[0; 8]),
        Ok(Frame::Ping {
            ack: false,
            data: [0; 8]
        })
    );
}

/// xorshift64: a seeded, reproducible stream of numbers for the fuzz test below.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn random_frames_never_panic_and_results_stay_inside_the_payload() {
    let mut rng = XorShift(0x5eed_f4a3_e5c0_ffee);
    let mut payload = Vec::new();
    let (mut parsed, mut refused) = (0u32, 0u32);
    for _ in 0..100_000 {
        let mut head_bytes = [0u8; HEAD_LEN];
        head_bytes
            .iter_mut()
            .for_each(|byte| *byte = rng.next() as u8);
        let mut head = Head::parse(&head_bytes);
        // Mostly known types, small streams and short payloads, so every check is reached;
        // now and then anything at all.
        if rng.below(8) != 0 {
            head.kind = rng.below(11) as u8;
        }
        if rng.below(2) == 0 {
            head.stream = rng.below(4) as u32;
        }
        let length = match rng.below(4) {
            0 => rng.below(10),
            1 => [0, 4, 5, 6, 8, 12][rng.below(6) as usize],
            2 => rng.below(64),
            _ => rng.below(2048),
        };
        head.length = length as u32;
        payload.clear();
        payload.extend((0..length).map(|_| match rng.below(4) {
            0 => 0,
            1 => 1,
            _ => rng.next() as u8,
        }));
        match parse(head, &payload) {
            Ok(frame) => {
                parsed += 1;
                let inside = |part: &[u8]| {
                    let range = payload.as_ptr_range();
                    part.is_empty()
                        || (range.start <= part.as_ptr() && part.as_ptr_range().end <= range.end)
                };
                match frame {
                    Frame::Data { data, flow_len, .. } => {
                        assert!(inside(data));
                        assert_eq!(flow_len, head.length);
                    }
                    Frame::Headers { block, .. }
                    | Frame::Continuation { block, .. }
                    | Frame::GoAway { debug: block, .. } => assert!(inside(block)),
                    Frame::WindowUpdate { increment, .. } => {
                        assert!((1..=MAX_WINDOW).contains(&increment));
                    }
                    _ => {}
                }
            }
            Err(FrameError::Connection(_, what)) | Err(FrameError::Stream(_, _, what)) => {
                refused += 1;
                assert!(what.starts_with("sent "));
            }
        }
    }
    // Both ways out were taken often, so the run exercised the checks, not one path.
    assert!(parsed > 10_000 && refused > 10_000, "{parsed} / {refused}");
}
