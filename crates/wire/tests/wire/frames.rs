//! wire's HTTP/2 frame parser against an independent one: hyperframe (python-hyper's frame
//! codec, PyPI), in the virtual environment scripts/grpc-python.sh makes. A deterministic
//! corpus of single frames (valid ones from the seeded generator, and mutated ones) goes
//! through both; each frame must parse to the same type, flags, stream and payload parts, or
//! be refused by both, except where the two legitimately differ (listed at `difference`).
//!
//! ```text
//!  seed ─▶ seeded::h2_frame ─▶ as made │ mutated (length field made to fit)
//!       ─▶ frame ─┬─▶ wire::h2::frame::parse ──────────────────▶ line ─┐ the same line, or
//!                 └─▶ hex, one a line ─▶ frames.py (hyperframe) ─▶ line ─┘ a listed difference
//! ```
//!
//! The Python comes from `SLUICE_GRPC_PYTHON` (scripts/test.sh sets it). Without it the test
//! is skipped with a message, except under CI (`CI=true`), where a missing one fails.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use wire::fuzz::seeded::{mutate, Rng};
use wire::h2::frame::{self, ErrorCode, Frame, FrameError, Head, HEAD_LEN};

use crate::seeded::h2_frame;

/// ALTSVC's type (RFC 7838 §4), which hyperframe parses.
const ALTSVC: u8 = 0xa;
/// Frames in the corpus: half as made, half mutated.
const FRAMES: u64 = 3000;

#[test]
fn frames_parse_as_hyperframe_parses_them() {
    let Some(python) = python() else {
        return;
    };
    let corpus: Vec<Vec<u8>> = (0..FRAMES).filter_map(corpus_frame).collect();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/wire/frames.py");
    let mut child = Command::new(&python)
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("running {}: {e}", python.display()));
    let mut input = String::new();
    for frame in &corpus {
        input.push_str(&hex(frame));
        input.push('\n');
    }
    // The script reads all of its input before writing: no deadlock on full pipes. A script
    // that failed early closes its input: its exit status says why, below.
    let _ = child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(input.as_bytes());
    let output = child.wait_with_output().expect("frames.py ran");
    assert!(
        output.status.success(),
        "frames.py failed (is hyperframe installed? rerun scripts/grpc-python.sh)"
    );
    let theirs = String::from_utf8(output.stdout).expect("UTF-8");
    let theirs: Vec<&str> = theirs.lines().collect();
    assert_eq!(theirs.len(), corpus.len(), "one answer per frame");

    let (mut same, mut accepted) = (0, 0);
    // Listed differences are counted, so a rule that swallows too much shows.
    let mut differences: BTreeMap<&str, usize> = BTreeMap::new();
    let mut unexplained = Vec::new();
    for (bytes, theirs) in corpus.iter().zip(theirs) {
        let ours = describe(bytes);
        if ours == theirs {
            same += 1;
            accepted += usize::from(!ours.starts_with("refused"));
        } else if let Some(why) = difference(bytes, &ours, theirs) {
            *differences.entry(why).or_default() += 1;
        } else {
            unexplained.push(format!(
                "{}\n  wire:       {ours}\n  hyperframe: {theirs}",
                hex(bytes)
            ));
        }
    }
    assert!(
        unexplained.is_empty(),
        "{} frames parse differently:\n{}",
        unexplained.len(),
        unexplained[..unexplained.len().min(12)].join("\n")
    );
    println!(
        "{same} of {} frames alike ({accepted} accepted by both); listed differences: {differences:?}",
        corpus.len()
    );
    assert!(
        accepted * 4 >= corpus.len(),
        "too few valid frames compared"
    );
    let listed: usize = differences.values().sum();
    assert!(
        listed * 8 <= corpus.len(),
        "the listed differences cover too much"
    );
}

/// Corpus frame `seed`: one frame from the seeded generator, mutated for odd seeds, its
/// length field then rewritten to what follows the head (so each is exactly one frame).
/// `None` when mutation left no whole head.
fn corpus_frame(seed: u64) -> Option<Vec<u8>> {
    let mut rng = Rng::with_seed(seed);
    let mut data = Vec::new();
    h2_frame(&mut rng, &mut data);
    if seed % 2 == 1 {
        for _ in 0..rng.usize(1..=3) {
            mutate(&mut rng, &mut data);
        }
    }
    if data.len() < HEAD_LEN {
        return None;
    }
    let length = (data.len() - HEAD_LEN) as u32;
    data[..3].copy_from_slice(&length.to_be_bytes()[1..]);
    Some(data)
}

/// wire's parse of one frame, in frames.py's words.
fn describe(bytes: &[u8]) -> String {
    let (head, payload) = bytes.split_first_chunk::<HEAD_LEN>().expect("a head");
    let head = Head::parse(head);
    let frame = match frame::parse(head, payload) {
        Ok(frame) => frame,
        Err(FrameError::Connection(code, _) | FrameError::Stream(_, code, _)) => {
            // The error class frames.py maps hyperframe's exceptions to.
            let class = if code == ErrorCode::FRAME_SIZE_ERROR {
                "size"
            } else {
                "protocol"
            };
            return format!("refused {class}");
        }
    };
    let bit = |on: bool| u8::from(on);
    match frame {
        Frame::Data {
            stream,
            end_stream,
            data,
            ..
        } => format!("DATA {stream} es={} {}", bit(end_stream), hex(data)),
        Frame::Headers {
            stream,
            end_stream,
            end_headers,
            priority,
            block,
        } => {
            let priority = priority.map_or("-".to_owned(), |p| {
                format!("{}/{}/{}", p.depends_on, bit(p.exclusive), p.weight)
            });
            format!(
                "HEADERS {stream} es={} eh={} p={priority} {}",
                bit(end_stream),
                bit(end_headers),
                hex(block)
            )
        }
        Frame::Priority { stream, priority } => format!(
            "PRIORITY {stream} {}/{}/{}",
            priority.depends_on,
            bit(priority.exclusive),
            priority.weight
        ),
        Frame::RstStream { stream, code } => format!("RST_STREAM {stream} {}", code.0),
        Frame::Settings { ack, settings } => {
            let value = |v: Option<u32>| v.map_or("-".to_owned(), |v| v.to_string());
            let flag = |v: Option<bool>| v.map_or("-".to_owned(), |v| u8::from(v).to_string());
            format!(
                "SETTINGS ack={} {},{},{},{},{},{},{}",
                bit(ack),
                value(settings.header_table_size),
                flag(settings.enable_push),
                value(settings.max_concurrent_streams),
                value(settings.initial_window_size),
                value(settings.max_frame_size),
                value(settings.max_header_list_size),
                flag(settings.enable_connect_protocol),
            )
        }
        Frame::Ping { ack, data } => format!("PING ack={} {}", bit(ack), hex(&data)),
        Frame::GoAway {
            last_stream,
            code,
            debug,
        } => format!("GOAWAY {last_stream} {} {}", code.0, hex(debug)),
        Frame::WindowUpdate { stream, increment } => {
            format!("WINDOW_UPDATE {stream} {increment}")
        }
        Frame::Continuation {
            stream,
            end_headers,
            block,
        } => format!(
            "CONTINUATION {stream} eh={} {}",
            bit(end_headers),
            hex(block)
        ),
        Frame::Unknown { kind } => format!("UNKNOWN {kind}"),
    }
}

/// Where wire and hyperframe may answer differently, and why (the RFC section that decides);
/// `None` for any other disagreement, which fails the test.
fn difference(bytes: &[u8], ours: &str, theirs: &str) -> Option<&'static str> {
    let head = Head::parse(bytes[..HEAD_LEN].try_into().expect("a head"));
    let payload = &bytes[HEAD_LEN..];
    let refused_here = ours.starts_with("refused");
    let accepted_there = !theirs.starts_with("refused");
    let both_refused = refused_here && !accepted_there;
    match head.kind {
        // hyperframe knows ALTSVC (RFC 7838) and checks its length; wire ignores it as any
        // type it does not know (RFC 9113 §5.5: a server has no use for a client's ALTSVC).
        ALTSVC if ours == "UNKNOWN 10" => Some("ALTSVC, an extension wire ignores"),
        // A client opens odd streams (§5.1.1): HEADERS on an even one is PROTOCOL_ERROR.
        frame::kind::HEADERS if refused_here && accepted_there && head.stream.is_multiple_of(2) => {
            Some("a client's HEADERS on an even stream")
        }
        // A SETTINGS acknowledgement with a payload is FRAME_SIZE_ERROR (§6.5); hyperframe
        // refuses it as bad data.
        frame::kind::SETTINGS
            if both_refused && head.flags & frame::flag::ACK != 0 && !payload.is_empty() =>
        {
            Some("the error class of a SETTINGS ACK with a payload")
        }
        // hyperframe parses both roles' frames; a client's PUSH_PROMISE is PROTOCOL_ERROR
        // (RFC 9113 §6.6, §8.4).
        frame::kind::PUSH_PROMISE if refused_here => Some("clients cannot push"),
        // hyperframe keeps any SETTINGS value; §6.5.2 bounds ENABLE_PUSH,
        // INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE (and RFC 8441's, RFC 9218's flags).
        frame::kind::SETTINGS if refused_here && accepted_there && bad_setting(payload) => {
            Some("a SETTINGS value out of its range")
        }
        // hyperframe does not check that a stream depends on itself (§5.3.1).
        frame::kind::PRIORITY | frame::kind::HEADERS
            if refused_here && accepted_there && depends_on_itself(head, payload) =>
        {
            Some("a stream depending on itself")
        }
        // hyperframe counts HEADERS' padding against what follows the pad length, priority
        // included: it refuses padding that fills the rest exactly (which §6.2 allows: it
        // does not exceed it) and takes padding that eats into the priority fields.
        frame::kind::HEADERS if head.flags & frame::flag::PADDED != 0 => {
            let (pad, rest) = payload.split_first()?;
            let (pad, rest) = (usize::from(*pad), rest.len());
            let priority = if head.flags & frame::flag::PRIORITY != 0 {
                5
            } else {
                0
            };
            let fills_exactly = priority == 0 && pad > 0 && pad == rest;
            let eats_priority = priority > 0 && pad + priority > rest && pad < rest;
            ((fills_exactly && !refused_here && !accepted_there)
                || (eats_priority && refused_here && accepted_there))
                .then_some("HEADERS padding bounds")
        }
        // hyperframe refuses an increment with the reserved bit set; §6.9 says to ignore it.
        frame::kind::WINDOW_UPDATE
            if !refused_here
                && !accepted_there
                && payload.first().is_some_and(|b| b & 0x80 != 0) =>
        {
            Some("the reserved bit of an increment")
        }
        _ => None,
    }
}

/// Whether a SETTINGS payload carries a value §6.5.2 (or RFC 8441 §3, RFC 9218 §2.1) refuses.
fn bad_setting(payload: &[u8]) -> bool {
    payload.chunks_exact(6).any(|setting| {
        let id = u16::from_be_bytes([setting[0], setting[1]]);
        let value = u32::from_be_bytes([setting[2], setting[3], setting[4], setting[5]]);
        match id {
            0x2 | 0x8 | 0x9 => value > 1,
            0x4 => value > frame::MAX_WINDOW,
            0x5 => !(frame::DEFAULT_MAX_FRAME_SIZE..1 << 24).contains(&value),
            _ => false,
        }
    })
}

/// Whether a PRIORITY frame, or a HEADERS frame's priority, names the frame's own stream.
fn depends_on_itself(head: Head, payload: &[u8]) -> bool {
    let fields = if head.kind == frame::kind::PRIORITY {
        payload
    } else if head.flags & frame::flag::PRIORITY != 0 {
        let padded = usize::from(head.flags & frame::flag::PADDED != 0);
        payload.get(padded..).unwrap_or_default()
    } else {
        return false;
    };
    fields
        .first_chunk::<4>()
        .is_some_and(|dependency| u32::from_be_bytes(*dependency) & 0x7fff_ffff == head.stream)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The Python with hyperframe, or `None` (skip) outside CI.
fn python() -> Option<PathBuf> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    match std::env::var_os("SLUICE_GRPC_PYTHON").map(PathBuf::from) {
        Some(path) if path.is_file() => Some(path),
        Some(path) => panic!(
            "SLUICE_GRPC_PYTHON={} is not a file (make it with scripts/grpc-python.sh)",
            path.display()
        ),
        None if ci => panic!("CI: SLUICE_GRPC_PYTHON is not set; scripts/test.sh installs it"),
        None => {
            eprintln!(
                "skipped: set SLUICE_GRPC_PYTHON=$(scripts/grpc-python.sh) to compare frames with hyperframe"
            );
            None
        }
    }
}
