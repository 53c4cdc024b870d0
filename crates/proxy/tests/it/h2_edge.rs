//! What a hostile HTTP/2 client gets from the edge: each test is one clause of the contract
//! Sluice's HTTP/2 server keeps (rapid reset and the resets a client provokes, CONTINUATION
//! and empty-frame floods, header and body limits for heads and trailers, the stream cap,
//! PING/SETTINGS floods that never read, stalled header blocks, frames in flight after a
//! reset, and the connection errors of RFC 9113). h2c (prior knowledge on the plain listener), so a
//! raw frame client (`crate::support::raw_h2`) talks to the proxy over real sockets on 127.0.0.1.
//! Timings are generous upper bounds for a shared machine, never speed.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::raw_h2::*;
use crate::support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A proxy serving h2c with these ConfigMap keys, every host and path to one test backend.
async fn edge(keys: &[(&str, &str)]) -> (Harness, backend::Backend) {
    let echo = start_backend("echo").await;
    let mut h = Harness::start();
    let mut objects = catch_all("echo", &[addr_of(&echo)]);
    let mut data = vec![("use-h2c", "true")];
    data.extend_from_slice(keys);
    objects.push(settings(&data));
    h.apply(&objects);
    (h, echo)
}

/// A well-behaved client on a connection of its own is served (hyper's client).
async fn another_connection_is_served(h: &Harness) {
    let mut h2 = H2Client::over(TcpStream::connect(h.http()).await.unwrap()).await;
    let reply = h2.get("http://h2.example/echo").await;
    assert_eq!(reply.status, 200);
}

/// A GET with END_STREAM on a raw connection, expected to be answered 200.
async fn expect_served(raw: &mut RawH2, stream: u32) {
    raw.request(stream, "GET", "/echo", &[], true)
        .await
        .expect("the request is written");
    expect_status(raw, stream, 200).await;
}

/// Reads until `stream` ends and asserts it ended with a response of status `want`.
async fn expect_status(raw: &mut RawH2, stream: u32, want: u16) {
    match raw.read_until_response(stream).await {
        Outcome::Response { status, .. } => assert_eq!(status, Some(want), "stream {stream}"),
        other => panic!("stream {stream}: {other:?}"),
    }
}

/// After a GOAWAY the server closes the connection.
async fn expect_closed(raw: &mut RawH2) {
    assert!(
        raw.closed_within(STEP).await,
        "the connection stayed open after GOAWAY"
    );
}

#[test]
fn the_raw_client_encodes_and_decodes_what_the_tests_rely_on() {
    // A literal without indexing, new name, lengths past the 7-bit prefix (RFC 7541 5.1).
    let block = header_block(&[("x", &"a".repeat(40 * 1024))]);
    assert_eq!(block[..7], [0x00, 1, b'x', 0x7f, 0x81, 0xbf, 0x02]);
    assert_eq!(block.len(), 7 + 40 * 1024);
    assert_eq!(status_of(&[0x88]), Some(200));
    assert_eq!(status_of(&[0x8d]), Some(404));
    assert_eq!(status_of(&[0x08, 3, b'4', b'1', b'3']), Some(413));
    // "431" Huffman-coded: 011010 011001 00001 and 7 bits of EOS padding.
    assert_eq!(status_of(&[0x48, 0x83, 0x69, 0x90, 0xff]), Some(431));
    assert_eq!(status_of(&[0xbe]), None);
    assert_eq!(
        frame_bytes(RST_STREAM, 0, 3, &CANCEL.to_be_bytes()),
        [0, 0, 4, 3, 0, 0, 0, 0, 3, 0, 0, 0, 8]
    );
}

/// An upstream that counts the HTTP/1 request heads it receives and never answers them.
async fn start_counting_upstream() -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let counted = count.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let counted = counted.clone();
            tokio::spawn(async move {
                // The last 3 bytes of the previous read, for a head end split across reads.
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = stream.read(&mut buf).await {
                    seen.extend_from_slice(&buf[..n]);
                    let heads = seen.windows(4).filter(|w| w == b"\r\n\r\n").count();
                    counted.fetch_add(heads, Ordering::Relaxed);
                    seen.drain(..seen.len().saturating_sub(3));
                }
            });
        }
    });
    (addr, count)
}

/// A proxy serving h2c where `/never-answered` goes to an upstream that counts requests and
/// never answers them, and every other path to the echo backend.
async fn edge_with_sink() -> (Harness, backend::Backend, Arc<AtomicUsize>) {
    let echo = start_backend("echo").await;
    let (sink, reached) = start_counting_upstream().await;
    let mut h = Harness::start();
    let mut objects = vec![
        service("echo", &[("http", 80)]),
        service("sink", &[("http", 80)]),
        ingress(
            "edge",
            serde_json::json!({"rules": [{"http": {"paths": [
                path("/never-answered", "Prefix", to("sink")),
                path("/", "Prefix", to("echo")),
            ]}}]}),
        ),
        settings(&[("use-h2c", "true")]),
    ];
    objects.extend(slices("echo", &[addr_of(&echo)]));
    objects.extend(slices("sink", &[sink]));
    h.apply(&objects);
    (h, echo, reached)
}

/// What reached the upstream behind `/never-answered` once the attack is over (the count
/// settles), printed for `what`.
async fn requests_reached(reached: &AtomicUsize, what: &str) -> usize {
    tokio::time::sleep(Duration::from_millis(500)).await;
    let count = reached.load(Ordering::Relaxed);
    eprintln!("{what}: {count} requests reached the upstream");
    count
}

/// 1. Rapid reset (CVE-2023-44487): streams opened and cancelled before their answer end the
///    connection with ENHANCE_YOUR_CALM within 2,000 of them; other connections are served
///    meanwhile, and few of the cancelled requests ever reach the upstream.
#[tokio::test]
async fn rapid_reset_ends_the_connection_with_enhance_your_calm() {
    const STREAMS: u32 = 2000;
    let (h, _echo, reached) = edge_with_sink().await;
    let mut raw = RawH2::connect(h.http()).await;
    let attack = async {
        // In batches of 50 streams, each HEADERS followed at once by its RST_STREAM, to an
        // upstream that never answers: no answer is ever due before the reset.
        let block = request_block("GET", "/never-answered", &[]);
        for batch in 0..STREAMS / 50 {
            let mut bytes = Vec::new();
            for i in 0..50 {
                let stream = (batch * 50 + i) * 2 + 1;
                let flags = END_HEADERS | END_STREAM;
                bytes.extend(frame_bytes(HEADERS, flags, stream, &block));
                bytes.extend(frame_bytes(RST_STREAM, 0, stream, &CANCEL.to_be_bytes()));
            }
            if raw.write_raw(&bytes).await.is_err() {
                break;
            }
            tokio::task::yield_now().await;
        }
        let (last_stream, code) = raw.expect_goaway().await;
        eprintln!("rapid reset: GOAWAY {code:#x} after stream {last_stream}");
        assert_eq!(code, ENHANCE_YOUR_CALM, "after stream {last_stream}");
        assert!(last_stream < STREAMS * 2, "{last_stream}");
        expect_closed(&mut raw).await;
    };
    tokio::join!(attack, another_connection_is_served(&h));
    another_connection_is_served(&h).await;
    // Far fewer cancelled requests reached the upstream than were opened; a request that is
    // not cancelled does reach it (the count is real).
    let by_attack = requests_reached(&reached, "rapid reset").await;
    assert!(by_attack <= STREAMS as usize / 10, "{by_attack}");
    let mut control = RawH2::connect(h.http()).await;
    control
        .request(1, "GET", "/never-answered", &[], true)
        .await
        .unwrap();
    eventually_async(STEP, "the upstream counts a request", || {
        let reached = reached.clone();
        async move { reached.load(Ordering::Relaxed) > by_attack }
    })
    .await;
}

/// 2. CONTINUATION flood: a header block that never ends is cut off (GOAWAY with an error,
///    then close) before the client has sent 1 MiB of it.
#[tokio::test]
async fn a_continuation_flood_ends_the_connection_before_a_mebibyte() {
    let (h, _echo) = edge(&[]).await;
    let mut raw = RawH2::connect(h.http()).await;
    let block = request_block("GET", "/echo", &[]);
    raw.write_frame(HEADERS, END_STREAM, 1, &block)
        .await
        .unwrap();
    // Each CONTINUATION one whole literal field, 16 KiB with its framing.
    let mut fragment = Vec::new();
    literal(
        b"x-flood",
        &vec![b'a'; DEFAULT_MAX_FRAME - 12],
        &mut fragment,
    );
    assert!(fragment.len() <= DEFAULT_MAX_FRAME);
    let mut sent = block.len();
    while sent + fragment.len() <= 1 << 20 {
        if raw
            .write_frame(CONTINUATION, 0, 1, &fragment)
            .await
            .is_err()
        {
            break;
        }
        sent += fragment.len();
    }
    let (_, code) = raw.expect_goaway().await;
    eprintln!("CONTINUATION flood: GOAWAY {code:#x}, {sent} bytes of block written");
    assert_ne!(code, NO_ERROR, "after {sent} bytes of header block");
    expect_closed(&mut raw).await;
    another_connection_is_served(&h).await;
}

/// 3. A header list over `large-client-header-buffers` (4 × 8k = 32 KiB) gets 431 on its
///    stream; the connection goes on serving.
#[tokio::test]
async fn a_header_list_over_the_limit_gets_431_and_the_connection_goes_on() {
    let (h, _echo) = edge(&[("large-client-header-buffers", "4 8k")]).await;
    let mut raw = RawH2::connect(h.http()).await;
    let big = "b".repeat(40 * 1024);
    let block = request_block("GET", "/echo", &[("x-big", &big)]);
    assert!(block.len() < 64 * 1024);
    raw.headers_split(1, &block, true).await.unwrap();
    expect_status(&mut raw, 1, 431).await;
    expect_served(&mut raw, 3).await;
}

/// 4. `http2-max-concurrent-streams`: the stream past the cap is refused (REFUSED_STREAM);
///    the ones within it are answered when their bodies end.
#[tokio::test]
async fn a_stream_past_max_concurrent_streams_is_refused() {
    let (h, _echo) = edge(&[("http2-max-concurrent-streams", "4")]).await;
    let mut raw = RawH2::connect(h.http()).await;
    for stream in [1, 3, 5, 7, 9] {
        raw.request(stream, "POST", "/echo", &[], false)
            .await
            .unwrap();
    }
    assert_eq!(
        raw.read_until_response(9).await,
        Outcome::Reset(REFUSED_STREAM)
    );
    for stream in [1, 3, 5, 7] {
        raw.data(stream, &[], true).await.unwrap();
    }
    for stream in [1, 3, 5, 7] {
        expect_status(&mut raw, stream, 200).await;
    }
}

/// Writes `frame` over and over (up to 64 MiB) to a connection that never reads, and tells
/// whether the proxy stopped taking them (no progress for 2 s) or closed the connection
/// within 10 s; panics if it took all 64 MiB.
async fn flood_without_reading(h: &Harness, frame: Vec<u8>) -> &'static str {
    const TOTAL: u64 = 64 << 20;
    let mut stream = connect_silent(h.http()).await;
    let written = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicBool::new(false));
    let mut chunk = Vec::new();
    while chunk.len() < 64 * 1024 {
        chunk.extend_from_slice(&frame);
    }
    let writer = {
        let (written, failed) = (written.clone(), failed.clone());
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
            while written.load(Ordering::Relaxed) < TOTAL {
                match tokio::time::timeout_at(deadline, stream.write_all(&chunk)).await {
                    Ok(Ok(())) => written.fetch_add(chunk.len() as u64, Ordering::Relaxed),
                    Ok(Err(_)) => {
                        failed.store(true, Ordering::Relaxed);
                        return;
                    }
                    Err(_) => return,
                };
            }
        })
    };
    let start = tokio::time::Instant::now();
    let mut last = (0, start);
    let verdict = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = tokio::time::Instant::now();
        let bytes = written.load(Ordering::Relaxed);
        if failed.load(Ordering::Relaxed) {
            break "closed";
        }
        assert!(bytes < TOTAL, "the proxy took all {TOTAL} bytes");
        if bytes != last.0 {
            last = (bytes, now);
        } else if now - last.1 >= Duration::from_secs(2) {
            break "stalled";
        }
        assert!(
            now - start < Duration::from_secs(10),
            "still taking frames after 10 s ({bytes} bytes)"
        );
    };
    writer.abort();
    verdict
}

/// 5. A PING flood from a client that never reads its PING ACKs: the proxy stops reading
///    (the client's writes stall) or closes the connection; it never takes 64 MiB.
#[tokio::test]
async fn a_ping_flood_that_never_reads_is_not_taken_whole() {
    let (h, _echo) = edge(&[]).await;
    let verdict = flood_without_reading(&h, frame_bytes(PING, 0, 0, &[7; 8])).await;
    eprintln!("PING flood: {verdict}");
    another_connection_is_served(&h).await;
}

/// 5. The same with SETTINGS frames, each of which asks for an ACK.
#[tokio::test]
async fn a_settings_flood_that_never_reads_is_not_taken_whole() {
    let (h, _echo) = edge(&[]).await;
    // SETTINGS_ENABLE_PUSH = 0, a value a client may send any number of times.
    let setting = [0, 2, 0, 0, 0, 0];
    let verdict = flood_without_reading(&h, frame_bytes(SETTINGS, 0, 0, &setting)).await;
    eprintln!("SETTINGS flood: {verdict}");
    another_connection_is_served(&h).await;
}

/// 6. A header block begun and never finished is closed after `client-header-timeout`.
#[tokio::test]

async fn a_half_sent_header_block_is_closed_after_client_header_timeout() {
    let (h, _echo) = edge(&[("client-header-timeout", "1s")]).await;
    let mut raw = RawH2::connect(h.http()).await;
    let block = request_block("GET", "/echo", &[]);
    raw.write_frame(HEADERS, END_STREAM, 1, &block)
        .await
        .unwrap();
    assert!(
        raw.closed_within(Duration::from_secs(10)).await,
        "still open 10 s after a header block stopped half-way"
    );
}

/// 6. A connection that sent only the preface and SETTINGS is closed after `keep-alive`.
#[tokio::test]
async fn a_connection_that_never_sends_a_request_is_closed_after_keep_alive() {
    let (h, _echo) = edge(&[("keep-alive", "1")]).await;
    let mut raw = RawH2::connect(h.http()).await;
    assert!(
        raw.closed_within(Duration::from_secs(10)).await,
        "an idle connection is still open after 10 s"
    );
}

/// 7. DATA on a stream the client never opened is a connection error (RFC 9113 5.1).
#[tokio::test]
async fn data_on_an_idle_stream_is_a_protocol_error() {
    let (h, _echo) = edge(&[]).await;
    let mut raw = RawH2::connect(h.http()).await;
    raw.data(7, b"hello", false).await.unwrap();
    assert_eq!(raw.expect_goaway().await.1, PROTOCOL_ERROR);
    expect_closed(&mut raw).await;
}

/// 7. A stream id lower than one already used is a connection error (RFC 9113 5.1.1).
#[tokio::test]
async fn a_stream_id_lower_than_a_used_one_is_a_protocol_error() {
    let (h, _echo) = edge(&[]).await;
    let mut raw = RawH2::connect(h.http()).await;
    expect_served(&mut raw, 5).await;
    raw.request(3, "GET", "/echo", &[], true).await.unwrap();
    let (last_stream, code) = raw.expect_goaway().await;
    assert_eq!((last_stream, code), (5, PROTOCOL_ERROR));
    expect_closed(&mut raw).await;
}

/// 7. A WINDOW_UPDATE that takes the connection's window past 2^31-1 is a connection error
///    (RFC 9113 6.9.1).
#[tokio::test]
async fn a_connection_window_past_the_maximum_is_a_flow_control_error() {
    let (h, _echo) = edge(&[]).await;
    let mut raw = RawH2::connect(h.http()).await;
    let increment: u32 = 0x7fff_ffff;
    raw.write_frame(WINDOW_UPDATE, 0, 0, &increment.to_be_bytes())
        .await
        .unwrap();
    assert_eq!(raw.expect_goaway().await.1, FLOW_CONTROL_ERROR);
    expect_closed(&mut raw).await;
}

/// POSTs 2000 bytes (with these headers) to a proxy whose `proxy-body-size` is 1k, and
/// asserts the answer is 413.
async fn expect_2000_bytes_refused(headers: &[(&str, &str)]) {
    let (h, _echo) = edge(&[("proxy-body-size", "1k")]).await;
    let mut raw = RawH2::connect(h.http()).await;
    raw.request(1, "POST", "/echo", headers, false)
        .await
        .unwrap();
    // The proxy may answer (and reset the stream) before it reads the body.
    let _ = raw.data(1, &[b'x'; 2000], true).await;
    expect_status(&mut raw, 1, 413).await;
}

/// 8. `proxy-body-size` on HTTP/2: a declared length over it gets 413.
#[tokio::test]
async fn a_declared_body_over_proxy_body_size_gets_413() {
    expect_2000_bytes_refused(&[("content-length", "2000")]).await;
}

/// 8. The same for a body without a declared length: 413 once it passes the limit.
#[tokio::test]
async fn an_undeclared_body_over_proxy_body_size_gets_413() {
    expect_2000_bytes_refused(&[]).await;
}

/// 8. DATA that disagrees with `content-length` makes the request malformed: the stream is
///    reset with PROTOCOL_ERROR (RFC 9113 8.1.1), whether the body is shorter or longer.
#[tokio::test]
async fn a_body_that_disagrees_with_content_length_resets_the_stream() {
    let (h, _echo) = edge(&[("proxy-body-size", "1k")]).await;
    let mut raw = RawH2::connect(h.http()).await;
    raw.request(1, "POST", "/echo", &[("content-length", "100")], false)
        .await
        .unwrap();
    raw.data(1, &[b'x'; 50], true).await.unwrap();
    assert_eq!(
        raw.read_until_response(1).await,
        Outcome::Reset(PROTOCOL_ERROR)
    );
    raw.request(3, "POST", "/echo", &[("content-length", "10")], false)
        .await
        .unwrap();
    raw.data(3, &[b'x'; 50], true).await.unwrap();
    assert_eq!(
        raw.read_until_response(3).await,
        Outcome::Reset(PROTOCOL_ERROR)
    );
    // Stream errors only: the connection serves on.
    expect_served(&mut raw, 5).await;
}

/// 9. Empty-frame flood (CVE-2019-9518): 100,000 zero-length DATA frames on an open stream.
///    The proxy either ends the connection with ENHANCE_YOUR_CALM or keeps serving; either
///    way it answers within 10 s (it is not stuck).
#[tokio::test]
async fn an_empty_data_flood_is_cut_off_or_served_through() {
    let (h, _echo) = edge(&[]).await;
    let mut raw = RawH2::connect(h.http()).await;
    raw.request(1, "POST", "/echo", &[], false).await.unwrap();
    let empty = frame_bytes(DATA, 0, 1, &[]);
    let batch: Vec<u8> = empty
        .iter()
        .copied()
        .cycle()
        .take(empty.len() * 10_000)
        .collect();
    for _ in 0..10 {
        if raw.write_raw(&batch).await.is_err() {
            break;
        }
    }
    let _ = raw.request(3, "GET", "/echo", &[], true).await;
    let outcome = raw.read_until_response(3).await;
    match outcome {
        Outcome::Response { status, .. } => {
            assert_eq!(status, Some(200));
            eprintln!("empty DATA flood: served through");
        }
        Outcome::GoAway { code, .. } => {
            assert_eq!(code, ENHANCE_YOUR_CALM);
            expect_closed(&mut raw).await;
            eprintln!("empty DATA flood: GOAWAY ENHANCE_YOUR_CALM");
        }
        other => panic!("{other:?}"),
    }
    another_connection_is_served(&h).await;
}

/// A header block that enters one 4,000-byte field into the decoder's dynamic table and then
/// refers to it `references` times (one byte each): a block of `4,010 + references` bytes
/// that decodes to `references` × 4 KB.
fn hpack_bomb(references: usize) -> Vec<u8> {
    let mut block = Vec::new();
    literal_indexed(b"x-bomb", &[b'v'; 4000], &mut block);
    for _ in 0..references {
        indexed(62, &mut block);
    }
    block
}

/// 10. A trailer block of HPACK references to one large dynamic-table entry (60 KB that
///     would decode to 60 MB) is held to `large-client-header-buffers` like a head: the
///     stream is reset, and the connection goes on, its HPACK table in step (the next
///     request refers to the entry the bomb added).
#[tokio::test]
async fn a_trailer_bomb_resets_its_stream_and_the_connection_goes_on() {
    let (h, _echo) = edge(&[("proxy-request-buffering", "off")]).await;
    let mut raw = RawH2::connect(h.http()).await;
    raw.request(1, "POST", "/echo", &[], false).await.unwrap();
    raw.data(1, b"some body", false).await.unwrap();
    let bomb = hpack_bomb(15_000);
    assert!(bomb.len() > DEFAULT_MAX_FRAME && bomb.len() < 64 * 1024);
    raw.headers_split(1, &bomb, true).await.unwrap();
    assert_eq!(
        raw.read_until_response(1).await,
        Outcome::Reset(ENHANCE_YOUR_CALM)
    );
    // Index 62 is the bomb's `x-bomb` field: 4 KB, within the limit for one request.
    let mut block = request_block("GET", "/echo", &[]);
    indexed(62, &mut block);
    raw.write_frame(HEADERS, END_HEADERS | END_STREAM, 3, &block)
        .await
        .unwrap();
    match raw.read_until_response(3).await {
        Outcome::Response { status, body } => {
            assert_eq!(status, Some(200));
            let echo: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(echo["headers"]["x-bomb"], "v".repeat(4000), "{echo:#}");
        }
        other => panic!("{other:?}"),
    }
}

/// 11. Frames the client sent before it saw the server's RST_STREAM are dropped (RFC 9113
///     5.1): DATA is not answered frame by frame, and still counts against the connection's
///     window, which is given back (else the next upload would overrun it); trailers are
///     decoded for the HPACK table and dropped, not a connection error.
#[tokio::test]
async fn data_and_trailers_in_flight_after_a_server_reset_are_dropped() {
    let (h, _echo) = edge(&[]).await;
    let mut raw = RawH2::connect(h.http()).await;
    raw.request(1, "POST", "/echo", &[("content-length", "10")], false)
        .await
        .unwrap();
    raw.data(1, &[b'x'; 50], false).await.unwrap();
    assert_eq!(
        raw.read_until_response(1).await,
        Outcome::Reset(PROTOCOL_ERROR)
    );
    // 640 KB more on the reset stream (within its window as the client saw it), then
    // trailers that add an entry to the HPACK table.
    let mut in_flight = Vec::new();
    for _ in 0..40 {
        in_flight.extend(frame_bytes(DATA, 0, 1, &[b'y'; DEFAULT_MAX_FRAME]));
    }
    let mut trailers = Vec::new();
    literal_indexed(b"x-checksum", b"late", &mut trailers);
    in_flight.extend(frame_bytes(HEADERS, END_HEADERS | END_STREAM, 1, &trailers));
    raw.write_raw(&in_flight).await.unwrap();
    // Another 640 KB on a new stream: more than the connection's 1 MiB window holds unless
    // the dropped bytes were given back. It refers to the trailers' HPACK entry.
    let mut block = request_block("POST", "/echo", &[]);
    indexed(62, &mut block);
    raw.write_frame(HEADERS, END_HEADERS, 3, &block)
        .await
        .unwrap();
    let mut upload = Vec::new();
    for n in 0..40 {
        let flags = if n == 39 { END_STREAM } else { 0 };
        upload.extend(frame_bytes(DATA, flags, 3, &[b'z'; DEFAULT_MAX_FRAME]));
    }
    let answer = async {
        raw.write_raw(&upload).await.unwrap();
        raw.read_until_response(3).await
    };
    match bounded(answer).await {
        Outcome::Response { status, body } => {
            assert_eq!(status, Some(200));
            let echo: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(echo["headers"]["x-checksum"], "late", "{echo:#}");
        }
        other => panic!("{other:?}"),
    }
    let late = raw.take_stashed(1);
    assert!(late.is_empty(), "frames on the reset stream: {late:?}");
}

/// Opens `streams` streams to the never-answering upstream in batches of 50: each batch's
/// HEADERS, a moment for their requests to go upstream, then the frame `provoke` makes for
/// each. Returns the GOAWAY the proxy ends the connection with; panics if it has none.
async fn provoke_resets(
    raw: &mut RawH2,
    streams: u32,
    provoke: impl Fn(u32) -> Vec<u8>,
) -> (u32, u32) {
    let block = request_block("GET", "/never-answered", &[]);
    for batch in 0..streams / 50 {
        let ids: Vec<u32> = (0..50).map(|i| (batch * 50 + i) * 2 + 1).collect();
        let mut opened = Vec::new();
        for &stream in &ids {
            opened.extend(frame_bytes(
                HEADERS,
                END_HEADERS | END_STREAM,
                stream,
                &block,
            ));
        }
        if raw.write_raw(&opened).await.is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let provoked: Vec<u8> = ids.iter().flat_map(|&stream| provoke(stream)).collect();
        if raw.write_raw(&provoked).await.is_err() {
            break;
        }
    }
    raw.expect_goaway().await
}

/// 12. MadeYouReset (CVE-2025-8671): stream errors the client makes the server raise on
///     streams it started (WINDOW_UPDATE of 0, PRIORITY on itself, DATA after END_STREAM)
///     count against the reset budget: GOAWAY ENHANCE_YOUR_CALM long before 4,000 of them,
///     and a few hundred upstream requests at most.
#[tokio::test]
async fn stream_errors_the_client_provokes_end_the_connection() {
    const STREAMS: u32 = 4000;
    let (h, _echo, reached) = edge_with_sink().await;
    let mut raw = RawH2::connect(h.http()).await;
    let (last_stream, code) = provoke_resets(&mut raw, STREAMS, |stream| match stream % 3 {
        0 => frame_bytes(WINDOW_UPDATE, 0, stream, &0u32.to_be_bytes()),
        1 => {
            let mut priority = stream.to_be_bytes().to_vec();
            priority.push(15);
            frame_bytes(0x2, 0, stream, &priority)
        }
        _ => frame_bytes(DATA, 0, stream, b"after END_STREAM"),
    })
    .await;
    eprintln!("provoked resets: GOAWAY {code:#x} after stream {last_stream}");
    assert_eq!(code, ENHANCE_YOUR_CALM, "after stream {last_stream}");
    assert!(last_stream < 2 * 300, "{last_stream}");
    expect_closed(&mut raw).await;
    let by_attack = requests_reached(&reached, "provoked resets").await;
    assert!(by_attack <= 300, "{by_attack}");
    another_connection_is_served(&h).await;
}

/// 13. One answered request per reset does not cancel it: alternating a rapid reset with a
///     cheap request ends the connection too (each answer forgives an eighth of a reset).
#[tokio::test]
async fn alternating_resets_and_cheap_requests_do_not_evade_the_budget() {
    const PAIRS: u32 = 1000;
    let (h, _echo, reached) = edge_with_sink().await;
    let mut raw = RawH2::connect(h.http()).await;
    // Room for all the answers on the connection (it starts with 64 KiB).
    let increment: u32 = 0x7fff_ffff - 65_535;
    raw.write_frame(WINDOW_UPDATE, 0, 0, &increment.to_be_bytes())
        .await
        .unwrap();
    let hang = request_block("GET", "/never-answered", &[]);
    let cheap = request_block("GET", "/echo", &[]);
    let mut outcome = None;
    for pair in 0..PAIRS {
        // The request to reset goes upstream while the cheap one is answered; then the reset.
        let (reset, answered) = (pair * 4 + 1, pair * 4 + 3);
        let mut bytes = frame_bytes(HEADERS, END_HEADERS | END_STREAM, reset, &hang);
        bytes.extend(frame_bytes(
            HEADERS,
            END_HEADERS | END_STREAM,
            answered,
            &cheap,
        ));
        if raw.write_raw(&bytes).await.is_err() {
            break;
        }
        match raw.read_until_response(answered).await {
            Outcome::Response { status, .. } => assert_eq!(status, Some(200)),
            other => {
                outcome = Some((pair, other));
                break;
            }
        }
        if raw.rst(reset, CANCEL).await.is_err() {
            break;
        }
    }
    let Some((pair, Outcome::GoAway { code, .. })) = outcome else {
        panic!("no GOAWAY after {PAIRS} resets, each followed by an answered request: {outcome:?}");
    };
    eprintln!("alternating resets: GOAWAY {code:#x} at pair {pair}");
    assert_eq!(code, ENHANCE_YOUR_CALM);
    assert!(pair < 300, "{pair}");
    let by_attack = requests_reached(&reached, "alternating resets").await;
    assert!(by_attack <= 300, "{by_attack}");
}

/// A small deterministic generator (xorshift): the same frames on every run.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// One frame a careless or hostile client might send: well-formed requests, and frames of
/// every type with odd flags, odd stream ids, odd lengths and odd values.
fn hostile_frame(dice: &mut Dice, next_stream: &mut u32) -> Vec<u8> {
    let stream = match dice.below(4) {
        0 => 0,
        1 => *next_stream,
        2 => dice.below(12) as u32,
        _ => next_stream.saturating_sub(2),
    };
    let flags = if dice.below(3) == 0 {
        dice.next() as u8
    } else {
        [0, END_STREAM, END_HEADERS, END_STREAM | END_HEADERS][dice.below(4) as usize]
    };
    match dice.below(12) {
        0 | 1 => {
            *next_stream += 2;
            let method = ["GET", "POST", "CONNECT", "HEAD"][dice.below(4) as usize];
            let path = ["/echo", "/", "", "*", "relative", "/%00"][dice.below(6) as usize];
            let extra: &[(&str, &str)] = match dice.below(4) {
                0 => &[("content-length", "5")],
                1 => &[("te", "gzip")],
                2 => &[(":protocol", "websocket")],
                _ => &[],
            };
            let block = request_block(method, path, extra);
            frame_bytes(HEADERS, flags | END_HEADERS, *next_stream - 2, &block)
        }
        2 => {
            let len = dice.below(300) as usize;
            frame_bytes(DATA, flags, stream, &dice.bytes(len))
        }
        3 => frame_bytes(RST_STREAM, 0, stream, &dice.bytes(4)),
        4 => {
            let increment: u32 = [0, 1, 0x7fff_ffff, dice.next() as u32][dice.below(4) as usize];
            frame_bytes(WINDOW_UPDATE, 0, stream, &increment.to_be_bytes())
        }
        5 => {
            let mut payload = Vec::new();
            for _ in 0..dice.below(4) {
                payload.extend_from_slice(&(dice.below(10) as u16).to_be_bytes());
                payload.extend_from_slice(&(dice.next() as u32).to_be_bytes());
            }
            frame_bytes(SETTINGS, flags & ACK, 0, &payload)
        }
        6 => frame_bytes(PING, flags & ACK, 0, &dice.bytes(8)),
        7 => frame_bytes(0x2, 0, stream, &dice.bytes(5)),
        8 => {
            let len = dice.below(64) as usize;
            frame_bytes(CONTINUATION, flags, stream, &dice.bytes(len))
        }
        9 => {
            let len = dice.below(40) as usize;
            let block = dice.bytes(len);
            frame_bytes(HEADERS, flags, stream | 1, &block)
        }
        10 => {
            let kind = dice.below(16) as u8;
            let len = dice.below(64) as usize;
            frame_bytes(kind, flags, stream, &dice.bytes(len))
        }
        _ => {
            let len = dice.below(64) as usize;
            dice.bytes(len)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_frames_never_panic_a_worker_and_the_edge_keeps_serving() {
    let worker_panics = Arc::new(AtomicUsize::new(0));
    let counted = worker_panics.clone();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        if thread
            .name()
            .is_some_and(|n| n.starts_with("sluice-worker"))
        {
            counted.fetch_add(1, Ordering::SeqCst);
        }
        previous(info);
    }));
    let (h, _echo) = edge(&[]).await;
    let mut dice = Dice(0x9e37_79b9_7f4a_7c15);
    let mut frames_sent = 0;
    for _ in 0..300 {
        let mut raw = RawH2::connect(h.http()).await;
        let mut next_stream = 1;
        for _ in 0..1 + dice.below(40) {
            let frame = hostile_frame(&mut dice, &mut next_stream);
            if raw.write_raw(&frame).await.is_err() {
                break;
            }
            frames_sent += 1;
        }
        // Take what the proxy answers, briefly, then leave (some connections mid-stream).
        for _ in 0..64 {
            if raw.next_frame(Duration::from_millis(5)).await.is_none() {
                break;
            }
        }
    }
    assert!(
        frames_sent > 2_000,
        "only {frames_sent} frames were written"
    );
    another_connection_is_served(&h).await;
    assert_eq!(
        worker_panics.load(Ordering::SeqCst),
        0,
        "a worker thread panicked"
    );
}

/// keep-alive-requests ends an HTTP/2 connection gracefully in two steps (RFC 9113 §6.8): a
/// GOAWAY naming no stream as the last (2^31-1) with a PING; a stream the client opens before
/// it answers the PING is still served; the PING's answer brings the final GOAWAY naming the
/// last stream opened, and the connection closes. (With one GOAWAY naming the last stream at
/// once, gRPC clients under load failed calls they had written meanwhile.)
#[tokio::test]
async fn keep_alive_requests_closes_in_two_steps_and_serves_what_the_client_opened_meanwhile() {
    let (h, _echo) = edge(&[("keep-alive-requests", "2")]).await;
    let mut raw = RawH2::connect(h.http()).await;
    expect_served(&mut raw, 1).await;
    raw.request(3, "GET", "/echo", &[], true)
        .await
        .expect("the request is written");
    // Stream 3's answer, the first GOAWAY and its PING, in whatever order they come.
    let (mut answered, mut first_goaway, mut ping) = (false, None, None);
    while !(answered && first_goaway.is_some() && ping.is_some()) {
        let frame = raw.next_frame(STEP).await.unwrap_or_else(|| {
            panic!("answered {answered}, GOAWAY {first_goaway:?}, PING {ping:?}")
        });
        match frame.kind {
            HEADERS if frame.stream == 3 => answered |= status_of(frame.block()) == Some(200),
            GOAWAY => first_goaway = Some((frame.u32_at(0) & 0x7fff_ffff, frame.u32_at(4))),
            PING if frame.flags & ACK == 0 => ping = Some(frame.payload.clone()),
            _ => {}
        }
    }
    assert_eq!(first_goaway, Some((0x7fff_ffff, NO_ERROR)));
    // Opened before the client has read the GOAWAY (it has not answered the PING): served.
    expect_served(&mut raw, 5).await;
    raw.write_frame(PING, ACK, 0, &ping.unwrap())
        .await
        .expect("the PING answered");
    assert_eq!(raw.expect_goaway().await, (5, NO_ERROR));
    expect_closed(&mut raw).await;
    another_connection_is_served(&h).await;
}
