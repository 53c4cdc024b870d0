//! Frames written by the encoder parse back to what was written.

use super::*;

#[test]
fn written_connection_frames_parse_back() {
    let mut dst = Vec::new();
    write_settings(
        &mut dst,
        &[
            (setting::MAX_CONCURRENT_STREAMS, 128),
            (setting::INITIAL_WINDOW_SIZE, 1 << 20),
            (setting::ENABLE_CONNECT_PROTOCOL, 1),
        ],
    );
    write_settings_ack(&mut dst);
    write_ping_ack(&mut dst, *b"pingpong");
    write_goaway(&mut dst, 7, ErrorCode::PROTOCOL_ERROR);
    write_rst_stream(&mut dst, 3, ErrorCode::REFUSED_STREAM);
    write_window_update(&mut dst, 0, MAX_WINDOW);
    write_window_update(&mut dst, 5, 1);
    let frames: Vec<Frame<'_>> = read_all(&dst).into_iter().map(|(_, f)| f).collect();
    assert_eq!(
        frames,
        [
            Frame::Settings {
                ack: false,
                settings: Settings {
                    max_concurrent_streams: Some(128),
                    initial_window_size: Some(1 << 20),
                    enable_connect_protocol: Some(true),
                    ..Settings::default()
                }
            },
            Frame::Settings {
                ack: true,
                settings: Settings::default()
            },
            Frame::Ping {
                ack: true,
                data: *b"pingpong"
            },
            Frame::GoAway {
                last_stream: 7,
                code: ErrorCode::PROTOCOL_ERROR,
                debug: b""
            },
            Frame::RstStream {
                stream: 3,
                code: ErrorCode::REFUSED_STREAM
            },
            Frame::WindowUpdate {
                stream: 0,
                increment: MAX_WINDOW
            },
            Frame::WindowUpdate {
                stream: 5,
                increment: 1
            },
        ]
    );
}

#[test]
fn written_data_heads_parse_back() {
    let mut dst = Vec::new();
    write_data_head(&mut dst, 1, 5, false);
    dst.extend_from_slice(b"hello");
    write_data_head(&mut dst, 1, 0, true);
    let frames: Vec<Frame<'_>> = read_all(&dst).into_iter().map(|(_, f)| f).collect();
    assert_eq!(
        frames,
        [
            Frame::Data {
                stream: 1,
                end_stream: false,
                data: b"hello",
                flow_len: 5
            },
            Frame::Data {
                stream: 1,
                end_stream: true,
                data: b"",
                flow_len: 0
            },
        ]
    );
    let mut dst = Vec::new();
    write_data_head(&mut dst, 3, LARGEST_MAX_FRAME_SIZE as usize, false);
    assert_eq!(
        Head::parse(&dst[..].try_into().unwrap()),
        Head {
            length: LARGEST_MAX_FRAME_SIZE,
            kind: kind::DATA,
            flags: 0,
            stream: 3
        }
    );
}

/// A header block cut at `max` into HEADERS + CONTINUATIONs: the pieces and their flags.
fn written_headers(block: &[u8], end_stream: bool, max: u32) -> (Vec<u8>, Vec<(u8, u8, usize)>) {
    let mut dst = Vec::new();
    write_headers(&mut dst, 9, block, end_stream, max);
    let mut joined = Vec::new();
    let mut frames = Vec::new();
    for (head, frame) in read_all(&dst) {
        assert_eq!(head.stream, 9);
        match frame {
            Frame::Headers {
                stream: 9,
                priority: None,
                block,
                ..
            }
            | Frame::Continuation {
                stream: 9, block, ..
            } => joined.extend_from_slice(block),
            other => panic!("wrote {other:?}"),
        }
        frames.push((head.kind, head.flags, head.length as usize));
    }
    (joined, frames)
}

#[test]
fn a_large_header_block_is_written_as_headers_and_continuations() {
    let block: Vec<u8> = (0..40 * 1024).map(|i| (i % 251) as u8).collect();
    let (joined, frames) = written_headers(&block, true, DEFAULT_MAX_FRAME_SIZE);
    assert_eq!(joined, block);
    assert_eq!(
        frames,
        [
            (kind::HEADERS, flag::END_STREAM, 16_384),
            (kind::CONTINUATION, 0, 16_384),
            (
                kind::CONTINUATION,
                flag::END_HEADERS,
                40 * 1024 - 2 * 16_384
            ),
        ]
    );
}

#[test]
fn header_blocks_fitting_one_frame_and_exact_multiples() {
    let (joined, frames) = written_headers(b"\x88", false, DEFAULT_MAX_FRAME_SIZE);
    assert_eq!(joined, b"\x88");
    assert_eq!(frames, [(kind::HEADERS, flag::END_HEADERS, 1)]);

    let (joined, frames) = written_headers(b"", true, DEFAULT_MAX_FRAME_SIZE);
    assert!(joined.is_empty());
    assert_eq!(
        frames,
        [(kind::HEADERS, flag::END_STREAM | flag::END_HEADERS, 0)]
    );

    // Exactly two frames' worth: no empty CONTINUATION after them.
    let block = vec![0x41; 2 * 20_000];
    let (joined, frames) = written_headers(&block, false, 20_000);
    assert_eq!(joined, block);
    assert_eq!(
        frames,
        [
            (kind::HEADERS, 0, 20_000),
            (kind::CONTINUATION, flag::END_HEADERS, 20_000)
        ]
    );
}

#[test]
fn header_frames_keep_to_the_range_a_max_frame_size_can_have() {
    // 0 (never valid) is held to the least valid value rather than looping or panicking.
    let block = vec![0x41; 20_000];
    let (joined, frames) = written_headers(&block, false, 0);
    assert_eq!(joined, block);
    assert_eq!(
        frames,
        [
            (kind::HEADERS, 0, 16_384),
            (kind::CONTINUATION, flag::END_HEADERS, 20_000 - 16_384)
        ]
    );
}
