//! The client's stream bookkeeping against a scripted peer on a loopback socket: when a
//! stream stops counting against the peer's limit, what the peer is told, and that the
//! connection's receive window survives streams the peer broke.

use std::future::poll_fn;
use std::task::Poll;

use bytes::Bytes;
use http::Request;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use wire::h2::frame::{self, flag, kind, setting, ErrorCode};
use wire::h2::hpack;

use super::{handshake, Sender};

/// The backend's side of the connection, written and read frame by frame.
struct Peer {
    tcp: TcpStream,
}

impl Peer {
    /// Reads the client's preface and answers with `settings`.
    async fn accept(listener: &TcpListener, settings: &[(u16, u32)]) -> Peer {
        let (mut tcp, _) = listener.accept().await.unwrap();
        tcp.set_nodelay(true).unwrap();
        let mut preface = [0; 24];
        tcp.read_exact(&mut preface).await.unwrap();
        assert_eq!(&preface, frame::PREFACE);
        let mut out = Vec::new();
        frame::write_settings(&mut out, settings);
        tcp.write_all(&out).await.unwrap();
        Peer { tcp }
    }

    async fn frame(&mut self) -> (frame::Head, Vec<u8>) {
        let mut head = [0; frame::HEAD_LEN];
        self.tcp.read_exact(&mut head).await.unwrap();
        let head = frame::Head::parse(&head);
        let mut payload = vec![0; head.length as usize];
        self.tcp.read_exact(&mut payload).await.unwrap();
        (head, payload)
    }

    /// The next frame of `wanted` kind, the ones before it skipped.
    async fn next(&mut self, wanted: u8) -> (frame::Head, Vec<u8>) {
        loop {
            let (head, payload) = self.frame().await;
            if head.kind == wanted {
                return (head, payload);
            }
        }
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.tcp.write_all(bytes).await.unwrap();
    }

    /// HEADERS `:status 200` on `stream`, ending it.
    async fn answer_200(&mut self, stream: u32) {
        let mut block = Vec::new();
        hpack::encode_status(200, &mut block);
        let mut out = Vec::new();
        frame::write_headers(
            &mut out,
            stream,
            &block,
            true,
            frame::DEFAULT_MAX_FRAME_SIZE,
        );
        self.send(&out).await;
    }
}

fn post() -> Request<()> {
    Request::post("http://backend.example/upload")
        .body(())
        .unwrap()
}

/// A client connection to a peer that announced `settings`; the connection's task runs on
/// the test's `LocalSet`.
async fn connect(settings: &[(u16, u32)]) -> (Sender, Peer) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let tcp = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    tcp.set_nodelay(true).unwrap();
    let (sender, conn) = handshake(tcp);
    tokio::task::spawn_local(conn);
    let mut peer = Peer::accept(&listener, settings).await;
    // The client's SETTINGS, its window raise, then the ACK: from here on the client sends
    // within the peer's settings.
    loop {
        let (head, _) = peer.next(kind::SETTINGS).await;
        if head.flags & flag::ACK != 0 {
            break;
        }
    }
    (sender, peer)
}

/// Whether a stream may open now (the peer's stream limit has room).
async fn has_room(sender: &mut Sender) -> bool {
    poll_fn(|cx| Poll::Ready(sender.poll_ready(cx).is_ready())).await
}

fn rst_code(payload: &[u8]) -> ErrorCode {
    ErrorCode(u32::from_be_bytes(payload[..4].try_into().unwrap()))
}

/// The peer answers a POST in full while the body still waits for the peer's window, and
/// the response is dropped: the stream is reset (the peer would otherwise keep it open,
/// waiting for our END_STREAM) and no longer counts against the peer's limit of one.
async fn complete_response_with_the_body_unsent(end_with_last_data: bool) {
    let settings = [
        (setting::MAX_CONCURRENT_STREAMS, 1),
        (setting::INITIAL_WINDOW_SIZE, 10),
    ];
    let (mut sender, mut peer) = connect(&settings).await;
    let (response, mut body) = sender.send_request(post(), false).unwrap();
    // 10 bytes fit the window; 90 wait for a WINDOW_UPDATE that never comes.
    body.send_data(Bytes::from(vec![b'x'; 100]), end_with_last_data)
        .unwrap();
    let (head, _) = peer.next(kind::DATA).await;
    assert_eq!((head.stream, head.length), (1, 10));
    peer.answer_200(1).await;
    let response = response.await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(!has_room(&mut sender).await, "the stream is still open");
    if !end_with_last_data {
        // The body's sender goes first (its request future was dropped), then the response.
        drop(body);
        drop(response);
    } else {
        drop(response);
        drop(body);
    }
    let (head, payload) = peer.next(kind::RST_STREAM).await;
    assert_eq!((head.stream, rst_code(&payload)), (1, ErrorCode::CANCEL));
    assert!(has_room(&mut sender).await, "the reset stream still counts");
    // The connection takes the next stream.
    let (response, _body) = sender.send_request(post(), true).unwrap();
    let (head, _) = peer.next(kind::HEADERS).await;
    assert_eq!(head.stream, 3);
    peer.answer_200(3).await;
    assert_eq!(response.await.unwrap().status(), 200);
}

#[tokio::test(flavor = "current_thread")]
async fn a_complete_response_cancels_an_ended_body_still_waiting_for_the_window() {
    tokio::task::LocalSet::new()
        .run_until(complete_response_with_the_body_unsent(true))
        .await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_complete_response_cancels_a_body_whose_sender_went_first() {
    tokio::task::LocalSet::new()
        .run_until(complete_response_with_the_body_unsent(false))
        .await;
}

/// A stream whose request and response both ended is closed: dropping its handles sends no
/// RST_STREAM (the peer might take one on a closed stream for a protocol error).
#[tokio::test(flavor = "current_thread")]
async fn a_stream_done_both_ways_is_not_reset() {
    tokio::task::LocalSet::new()
        .run_until(async {
            let (mut sender, mut peer) = connect(&[]).await;
            let (response, mut body) = sender.send_request(post(), false).unwrap();
            body.send_data(Bytes::from_static(b"hello"), true).unwrap();
            let (head, _) = peer.next(kind::DATA).await;
            assert_ne!(head.flags & flag::END_STREAM, 0);
            peer.answer_200(1).await;
            let response = response.await.unwrap();
            drop(response);
            drop(body);
            // The next frame after the stream's end is the next stream's HEADERS.
            let (_next, _body) = sender.send_request(post(), true).unwrap();
            let (head, _) = peer.frame().await;
            assert_eq!((head.kind, head.stream), (kind::HEADERS, 3));
        })
        .await;
}

/// DATA before a response head is the stream's error; the frame's bytes still go back to
/// the connection's window, so a peer doing it on many streams does not shrink the window
/// to nothing (5 MiB would be gone after 320 of these 16 KiB frames).
#[tokio::test(flavor = "current_thread")]
async fn data_refused_with_a_stream_error_returns_to_the_connection_window() {
    tokio::task::LocalSet::new()
        .run_until(async {
            let (mut sender, mut peer) = connect(&[]).await;
            let mut early = Vec::new();
            let mut window_updates = 0;
            for n in 0..400u32 {
                let id = 2 * n + 1;
                let (response, _body) = sender.send_request(post(), true).unwrap();
                peer.next(kind::HEADERS).await;
                early.clear();
                frame::write_data_head(&mut early, id, 16_384, false);
                early.resize(early.len() + 16_384, b'x');
                peer.send(&early).await;
                assert!(response.await.is_err(), "stream {id} was not reset");
                loop {
                    let (head, payload) = peer.frame().await;
                    if head.kind == kind::WINDOW_UPDATE && head.stream == 0 {
                        window_updates += 1;
                    }
                    if head.kind == kind::RST_STREAM {
                        assert_eq!(
                            (head.stream, rst_code(&payload)),
                            (id, ErrorCode::PROTOCOL_ERROR)
                        );
                        break;
                    }
                    assert_ne!(head.kind, kind::GOAWAY, "the connection failed at {id}");
                }
            }
            // 6.4 MiB refused: given back in two WINDOW_UPDATEs of 2.5 MiB.
            assert!(
                window_updates >= 2,
                "{window_updates} WINDOW_UPDATEs on stream 0"
            );
            let (response, _body) = sender.send_request(post(), true).unwrap();
            let (head, _) = peer.next(kind::HEADERS).await;
            peer.answer_200(head.stream).await;
            assert_eq!(response.await.unwrap().status(), 200);
        })
        .await;
}

/// Frames cut anywhere across reads (inside a head, inside a payload, several frames and a
/// part in one read) arrive whole and in order: the kept part of a frame is completed from
/// the next read and the rest of that read handled where it lies.
#[tokio::test(flavor = "current_thread")]
async fn frames_split_across_reads_arrive_whole() {
    tokio::task::LocalSet::new()
        .run_until(async {
            let (mut sender, mut peer) = connect(&[]).await;
            let (response, _body) = sender.send_request(post(), true).unwrap();
            peer.next(kind::HEADERS).await;
            let mut wire = Vec::new();
            let mut block = Vec::new();
            hpack::encode_status(200, &mut block);
            frame::write_headers(&mut wire, 1, &block, false, frame::DEFAULT_MAX_FRAME_SIZE);
            let mut expected = Vec::new();
            for n in 0..40u8 {
                let data: Vec<u8> = (0..1000u32).map(|i| n.wrapping_add(i as u8)).collect();
                frame::write_data_head(&mut wire, 1, data.len(), n == 39);
                wire.extend_from_slice(&data);
                expected.extend_from_slice(&data);
            }
            let reading = tokio::task::spawn_local(async move {
                let mut body = response.await.unwrap().into_body();
                let mut got = Vec::new();
                while let Some(data) = poll_fn(|cx| body.poll_data(cx)).await {
                    got.extend_from_slice(&data.unwrap());
                }
                got
            });
            let cuts = [1, 7, 9, 10, 1_500, 4_000, 3, 20_000];
            let mut at = 0;
            for cut in cuts.iter().cycle() {
                let end = (at + cut).min(wire.len());
                peer.send(&wire[at..end]).await;
                at = end;
                if at == wire.len() {
                    break;
                }
                // A pause, so that the client reads this piece on its own.
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
            assert_eq!(reading.await.unwrap(), expected);
        })
        .await;
}
