//! Sluice's own HTTP/2 client (`h2_client`) at its edges, against h2-crate servers and a
//! scriptable raw backend (`support::h2_backend`): flow control both ways (windows lowered
//! to 0, raised past 2^31 - 1, padding), the peer's stream limit, trailers, resets, 1xx
//! heads, CONTINUATION, PING, GOAWAY with streams in flight, and a peer breaking the
//! protocol (the request fails with 502, the proxy's RST_STREAM or GOAWAY says why, the
//! next ones are served).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::json;
use wire::h2::frame::{self, flag, kind, setting, ErrorCode};

use crate::grpc::site;
use crate::support::h2_backend::{status_block, H2Backend, Peer};
use crate::support::raw_h2::{self, frame_bytes};
use crate::support::*;

const HOST: &str = "grpc.example";

/// How the h2-crate server behaves.
#[derive(Clone, Copy)]
struct Server {
    /// Its SETTINGS_INITIAL_WINDOW_SIZE (our send window per stream).
    window: u32,
    max_streams: u32,
}

/// An h2-crate server: `/upload` answers the body's length; `/big/N` answers N bytes;
/// `/trailers` answers "ok" with trailers; `/reset` resets the stream; `/slow` answers
/// after 300 ms. Counts connections.
async fn start_server(server: Server) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let counter = connections.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::Builder::new()
                    .initial_window_size(server.window)
                    .max_concurrent_streams(server.max_streams)
                    .handshake::<_, Bytes>(tcp)
                    .await
                else {
                    return;
                };
                while let Some(Ok((request, mut respond))) = conn.accept().await {
                    tokio::spawn(async move {
                        let path = request.uri().path().to_owned();
                        let mut body = request.into_body();
                        let mut len = 0;
                        while let Some(Ok(chunk)) = body.data().await {
                            len += chunk.len();
                            let _ = body.flow_control().release_capacity(chunk.len());
                        }
                        if path == "/reset" {
                            respond.send_reset(h2::Reason::INTERNAL_ERROR);
                            return;
                        }
                        if path == "/slow" {
                            tokio::time::sleep(Duration::from_millis(300)).await;
                        }
                        let mut send = respond
                            .send_response(http::Response::new(()), false)
                            .unwrap();
                        if let Some(n) = path.strip_prefix("/big/") {
                            let n: usize = n.parse().unwrap();
                            let mut left = Bytes::from(vec![b'x'; n]);
                            while !left.is_empty() {
                                send.reserve_capacity(left.len());
                                let Some(Ok(room)) =
                                    std::future::poll_fn(|cx| send.poll_capacity(cx)).await
                                else {
                                    return;
                                };
                                let chunk = left.split_to(room.min(left.len()));
                                send.send_data(chunk, left.is_empty()).unwrap();
                            }
                            return;
                        }
                        if path == "/trailers" {
                            send.send_data(Bytes::from_static(b"ok"), false).unwrap();
                            let mut trailers = http::HeaderMap::new();
                            trailers.insert("x-outcome", "done".parse().unwrap());
                            send.send_trailers(trailers).unwrap();
                            return;
                        }
                        let _ = send.send_data(Bytes::from(len.to_string()), true);
                    });
                }
            });
        }
    });
    (addr, connections)
}

async fn client_to(h: &Harness) -> H2Client {
    H2Client::over(tokio::net::TcpStream::connect(h.http()).await.unwrap()).await
}

async fn post(client: &mut H2Client, path: &str, body: Bytes) -> Reply {
    let request = http::Request::post(format!("http://{HOST}{path}"))
        .body(http_body_util::Full::new(body))
        .unwrap();
    client.send(request).await.unwrap()
}

#[tokio::test]
async fn h2c_bodies_larger_than_the_windows_arrive_whole_both_ways() {
    // The server allows 1,000 bytes a stream: a 300 kB request body goes in ~300 frames as
    // its WINDOW_UPDATEs come.
    let (server, _) = start_server(Server {
        window: 1000,
        max_streams: 100,
    })
    .await;
    let mut h = Harness::with_workers(1);
    h.apply(&site(&[server], json!({}), Some("kubernetes.io/h2c")));
    let mut client = client_to(&h).await;
    let reply = post(&mut client, "/upload", Bytes::from(vec![b'a'; 300_000])).await;
    assert_eq!(
        (reply.status.as_u16(), reply.text()),
        (200, "300000".to_owned())
    );
    // 5 MiB: more than our 2 MiB stream window and 5 MiB connection window, so the proxy
    // must send WINDOW_UPDATEs as the client reads.
    let n = 5 * 1024 * 1024 + 123;
    let reply = client.get(&format!("http://{HOST}/big/{n}")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body.len(), n);
    // And again on the same upstream connection (its windows were given back).
    let reply = client.get(&format!("http://{HOST}/big/{n}")).await;
    assert_eq!(reply.body.len(), n);
}

#[tokio::test]
async fn h2c_trailers_and_a_server_reset_pass_through() {
    let (server, _) = start_server(Server {
        window: 65_535,
        max_streams: 100,
    })
    .await;
    let mut h = Harness::with_workers(1);
    h.apply(&site(&[server], json!({}), Some("kubernetes.io/h2c")));
    let mut client = client_to(&h).await;
    let reply = client.get(&format!("http://{HOST}/trailers")).await;
    assert_eq!(
        (reply.status.as_u16(), reply.text()),
        (200, "ok".to_owned())
    );
    let trailers = reply.trailers.expect("trailers");
    assert_eq!(trailers["x-outcome"], "done");
    let reply = client.get(&format!("http://{HOST}/reset")).await;
    assert_eq!(reply.status, 502);
    let reply = post(&mut client, "/upload", Bytes::from_static(b"four")).await;
    assert_eq!((reply.status.as_u16(), reply.text()), (200, "4".to_owned()));
}

#[tokio::test]
async fn h2c_the_peers_max_concurrent_streams_opens_more_connections() {
    let (server, connections) = start_server(Server {
        window: 65_535,
        max_streams: 2,
    })
    .await;
    let mut h = Harness::with_workers(1);
    h.apply(&site(&[server], json!({}), Some("kubernetes.io/h2c")));
    let client = client_to(&h).await;
    // One call first, so that the server's SETTINGS are known.
    let reply = post(&mut client.handle(), "/upload", Bytes::from_static(b"1")).await;
    assert_eq!(reply.status, 200);
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let mut client = client.handle();
            tokio::spawn(async move { post(&mut client, "/slow", Bytes::from_static(b"ab")).await })
        })
        .collect();
    for call in calls {
        let reply = call.await.unwrap();
        assert_eq!((reply.status.as_u16(), reply.text()), (200, "2".to_owned()));
    }
    // Two streams a connection: at least three for six at once.
    assert!(connections.load(Ordering::SeqCst) >= 3);
}

// The edges below run against a raw backend (`support::h2_backend`): what it sends is
// scripted byte for byte, what the proxy sent back is recorded, checked as HTTP/2 and
// asserted on. nginx answers an upstream that breaks HTTP/2 with 502 ("upstream sent
// invalid header" / "upstream prematurely closed"); so does the proxy.

/// The proxy routing `grpc.example` to `backend` over h2c (one worker: one pool, so later
/// requests find the connection earlier ones made), and an HTTP/2 client to it.
async fn proxy_to(backend: &H2Backend) -> (Harness, H2Client) {
    let mut h = Harness::with_workers(1);
    h.apply(&site(&[backend.addr], json!({}), Some("kubernetes.io/h2c")));
    let client = client_to(&h).await;
    (h, client)
}

/// A POST of `x` to `/`: not idempotent, so a failed one is answered, not sent again (only a
/// stream the backend did not process would be).
async fn post_x(client: &mut H2Client) -> Reply {
    post(client, "/", Bytes::from_static(b"x")).await
}

/// What [`Peer::serve`] answers a `post_x` with on connection `conn`.
fn served_on(conn: usize) -> (u16, String) {
    (200, format!("conn={conn} path=/ len=1"))
}

fn status_and_text(reply: &Reply) -> (u16, String) {
    (reply.status.as_u16(), reply.text())
}

/// Where in `frames` the first one `wanted` picks is.
fn position(frames: &[raw_h2::Frame], wanted: impl Fn(&raw_h2::Frame) -> bool) -> Option<usize> {
    frames.iter().position(wanted)
}

fn is_ping_ack(frame: &raw_h2::Frame, data: &[u8; 8]) -> bool {
    frame.kind == kind::PING && frame.flags & flag::ACK != 0 && frame.payload == data
}

/// After a stream error (or none): the next request is served on the same connection, which
/// the proxy never ended, and all it sent was well formed.
async fn the_connection_goes_on(backend: &H2Backend, client: &mut H2Client) {
    assert_eq!(status_and_text(&post_x(client).await), served_on(0));
    assert_eq!(backend.connections(), 1);
    assert_eq!(backend.count(0, kind::GOAWAY), 0, "{:?}", backend.sent(0));
    backend.assert_well_formed();
}

/// `broken(stream)` is what the backend writes after the first request on its first
/// connection: the request fails with 502, the proxy ends that connection with GOAWAY
/// `code` (last stream 0: it accepts no pushed streams), and the next two requests are
/// served on one new connection.
async fn a_connection_error(broken: fn(u32) -> Vec<u8>, code: ErrorCode) {
    let backend = H2Backend::first_then_serve(move |mut peer| async move {
        peer.settings(&[]).await;
        let request = peer.request().await.expect("the first request");
        peer.write(&broken(request.stream)).await;
        // On until the proxy closes, so that all it sent is recorded.
        while peer.next().await.is_some() {}
    })
    .await;
    let (_h, mut client) = proxy_to(&backend).await;
    assert_eq!(post_x(&mut client).await.status, 502);
    assert_eq!(backend.wait_goaway(0).await, (0, code));
    for _ in 0..2 {
        assert_eq!(status_and_text(&post_x(&mut client).await), served_on(1));
    }
    assert_eq!(backend.connections(), 2);
    assert_eq!(
        backend.count(0, kind::RST_STREAM),
        0,
        "{:?}",
        backend.sent(0)
    );
    backend.assert_well_formed();
}

#[tokio::test]
async fn h2c_a_push_promise_is_a_protocol_error() {
    // PUSH_PROMISE promising stream 2, an empty block: we said SETTINGS_ENABLE_PUSH 0.
    a_connection_error(
        |stream| frame_bytes(kind::PUSH_PROMISE, flag::END_HEADERS, stream, &[0, 0, 0, 2]),
        ErrorCode::PROTOCOL_ERROR,
    )
    .await;
}

#[tokio::test]
async fn h2c_a_frame_over_our_max_frame_size_is_a_frame_size_error() {
    // 20,000 bytes of DATA: over the 16 KiB we allow.
    a_connection_error(
        |stream| frame_bytes(kind::DATA, 0, stream, &[b'x'; 20_000]),
        ErrorCode::FRAME_SIZE_ERROR,
    )
    .await;
}

#[tokio::test]
async fn h2c_a_header_block_hpack_refuses_is_a_compression_error() {
    // Index 70: past the static table's 61 with an empty dynamic table.
    a_connection_error(
        |stream| {
            let mut block = Vec::new();
            raw_h2::indexed(70, &mut block);
            frame_bytes(kind::HEADERS, flag::END_HEADERS, stream, &block)
        },
        ErrorCode::COMPRESSION_ERROR,
    )
    .await;
}

#[tokio::test]
async fn h2c_headers_on_a_stream_the_proxy_never_opened_are_a_protocol_error() {
    // An even stream (the server's own, for pushes we refuse).
    a_connection_error(
        |_| frame_bytes(kind::HEADERS, flag::END_HEADERS, 2, &status_block(200, &[])),
        ErrorCode::PROTOCOL_ERROR,
    )
    .await;
    // The next odd stream, which the proxy has not opened yet.
    a_connection_error(
        |stream| {
            let block = status_block(200, &[]);
            frame_bytes(kind::HEADERS, flag::END_HEADERS, stream + 2, &block)
        },
        ErrorCode::PROTOCOL_ERROR,
    )
    .await;
}

#[tokio::test]
async fn h2c_a_frame_inside_a_header_block_is_a_protocol_error() {
    // HEADERS without END_HEADERS, then a PING before the block's CONTINUATION.
    a_connection_error(
        |stream| {
            let mut bytes = frame_bytes(kind::HEADERS, 0, stream, &status_block(200, &[]));
            bytes.extend(frame_bytes(kind::PING, 0, 0, b"12345678"));
            bytes
        },
        ErrorCode::PROTOCOL_ERROR,
    )
    .await;
    // ... or a CONTINUATION of another stream.
    a_connection_error(
        |stream| {
            let mut bytes = frame_bytes(kind::HEADERS, 0, stream, &status_block(200, &[]));
            bytes.extend(frame_bytes(
                kind::CONTINUATION,
                flag::END_HEADERS,
                stream + 2,
                &[],
            ));
            bytes
        },
        ErrorCode::PROTOCOL_ERROR,
    )
    .await;
}

#[tokio::test]
async fn h2c_a_response_head_split_over_continuations_arrives_whole() {
    let a = "a".repeat(6000);
    let b = "b".repeat(3000);
    let block = status_block(200, &[("x-a", &a), ("x-b", &b), ("x-c", "c")]);
    let backend = H2Backend::start(move |mut peer| {
        let block = block.clone();
        async move {
            peer.settings(&[]).await;
            if peer.index == 0 {
                let request = peer.request().await.expect("request");
                let id = request.stream;
                // Split anywhere, inside fields too: HEADERS, CONTINUATION, CONTINUATION.
                let (one, rest) = block.split_at(block.len() / 3);
                let (two, three) = rest.split_at(rest.len() / 2);
                let mut bytes = frame_bytes(kind::HEADERS, 0, id, one);
                bytes.extend(frame_bytes(kind::CONTINUATION, 0, id, two));
                bytes.extend(frame_bytes(
                    kind::CONTINUATION,
                    flag::END_HEADERS,
                    id,
                    three,
                ));
                bytes.extend(frame_bytes(kind::DATA, flag::END_STREAM, id, b"whole"));
                peer.write(&bytes).await;
            }
            peer.serve().await;
        }
    })
    .await;
    let (_h, mut client) = proxy_to(&backend).await;
    let reply = post_x(&mut client).await;
    assert_eq!(status_and_text(&reply), (200, "whole".to_owned()));
    assert_eq!(reply.headers["x-a"], a.as_str());
    assert_eq!(reply.headers["x-b"], b.as_str());
    assert_eq!(reply.headers["x-c"], "c");
    // The decoder's state after the block is right: the connection goes on.
    the_connection_goes_on(&backend, &mut client).await;
}

#[tokio::test]
async fn h2c_a_response_head_over_16_kib_decoded_resets_only_its_stream() {
    let backend = H2Backend::start(|mut peer| async move {
        peer.settings(&[]).await;
        if peer.index == 0 {
            let request = peer.request().await.expect("request");
            // 300 one-byte references to `accept-encoding: gzip, deflate` (static index 16):
            // a 301-byte block that decodes to 300 × 60 = 18,000 bytes as RFC 9113 §6.5.2
            // counts them, over our SETTINGS_MAX_HEADER_LIST_SIZE of 16,384.
            let mut block = status_block(200, &[]);
            for _ in 0..300 {
                raw_h2::indexed(16, &mut block);
            }
            peer.headers(request.stream, &block, false).await;
        }
        peer.serve().await;
    })
    .await;
    let (_h, mut client) = proxy_to(&backend).await;
    assert_eq!(post_x(&mut client).await.status, 502);
    assert_eq!(backend.wait_reset(0, 1).await, ErrorCode::PROTOCOL_ERROR);
    // A stream error: the same connection serves the next request.
    the_connection_goes_on(&backend, &mut client).await;
}

#[tokio::test]
async fn h2c_informational_heads_are_skipped_and_one_ending_the_stream_is_an_error() {
    let backend = H2Backend::start(|mut peer| async move {
        peer.settings(&[]).await;
        if peer.index == 0 {
            let request = peer.request().await.expect("first request");
            let early = [("link", "</style.css>; rel=preload")];
            peer.headers(request.stream, &status_block(100, &[]), false)
                .await;
            peer.headers(request.stream, &status_block(103, &early), false)
                .await;
            let mut bytes = frame_bytes(
                kind::HEADERS,
                flag::END_HEADERS,
                request.stream,
                &status_block(200, &[("x-final", "yes")]),
            );
            bytes.extend(frame_bytes(
                kind::DATA,
                flag::END_STREAM,
                request.stream,
                b"final",
            ));
            peer.write(&bytes).await;
            // A 103 that ends the stream: there is no final response.
            let request = peer.request().await.expect("second request");
            peer.headers(request.stream, &status_block(103, &early), true)
                .await;
        }
        peer.serve().await;
    })
    .await;
    let (_h, mut client) = proxy_to(&backend).await;
    let reply = post_x(&mut client).await;
    assert_eq!(status_and_text(&reply), (200, "final".to_owned()));
    assert_eq!(reply.headers["x-final"], "yes");
    assert_eq!(post_x(&mut client).await.status, 502);
    assert_eq!(backend.wait_reset(0, 3).await, ErrorCode::PROTOCOL_ERROR);
    the_connection_goes_on(&backend, &mut client).await;
}

#[tokio::test]
async fn h2c_a_window_update_past_2_31_on_a_stream_resets_that_stream() {
    let backend = H2Backend::start(|mut peer| async move {
        peer.settings(&[]).await;
        if peer.index == 0 {
            let request = peer.request().await.expect("request");
            // The stream's window: 65,535 less the byte sent, raised to exactly 2^31 - 1
            // (allowed); a PING to know the proxy took it; then one more.
            peer.window_update(request.stream, frame::MAX_WINDOW - 65_534)
                .await;
            peer.ping(*b"at 2^31-").await;
            peer.until(|f| is_ping_ack(f, b"at 2^31-")).await;
            peer.window_update(request.stream, 1).await;
        }
        peer.serve().await;
    })
    .await;
    let (_h, mut client) = proxy_to(&backend).await;
    assert_eq!(post_x(&mut client).await.status, 502);
    assert_eq!(
        backend.wait_reset(0, 1).await,
        ErrorCode::FLOW_CONTROL_ERROR
    );
    let sent = backend.sent(0);
    let at_max = position(&sent, |f| is_ping_ack(f, b"at 2^31-"));
    let reset = position(&sent, |f| f.kind == kind::RST_STREAM);
    assert!(
        at_max < reset,
        "a window of exactly 2^31 - 1 is allowed: {sent:?}"
    );
    // A stream error: the connection goes on.
    the_connection_goes_on(&backend, &mut client).await;
}

#[tokio::test]
async fn h2c_a_window_update_past_2_31_on_the_connection_ends_it() {
    let backend = H2Backend::first_then_serve(|mut peer| async move {
        peer.settings(&[]).await;
        peer.request().await.expect("request");
        // The connection's window, as on a stream above.
        peer.window_update(0, frame::MAX_WINDOW - 65_534).await;
        peer.ping(*b"at 2^31-").await;
        peer.until(|f| is_ping_ack(f, b"at 2^31-")).await;
        peer.window_update(0, 1).await;
        while peer.next().await.is_some() {}
    })
    .await;
    let (_h, mut client) = proxy_to(&backend).await;
    assert_eq!(post_x(&mut client).await.status, 502);
    assert_eq!(
        backend.wait_goaway(0).await,
        (0, ErrorCode::FLOW_CONTROL_ERROR)
    );
    let sent = backend.sent(0);
    let at_max = position(&sent, |f| is_ping_ack(f, b"at 2^31-"));
    let goaway = position(&sent, |f| f.kind == kind::GOAWAY);
    assert!(
        at_max < goaway,
        "a window of exactly 2^31 - 1 is allowed: {sent:?}"
    );
    assert_eq!(status_and_text(&post_x(&mut client).await), served_on(1));
    backend.assert_well_formed();
}

/// The upload of [`h2c_a_window_lowered_to_zero_mid_upload_holds_the_body_until_reopened`].
const UPLOAD: usize = 100_000;

fn upload_byte(at: usize) -> u8 {
    (at % 251) as u8
}

/// An upload as the backend checks it: in order, and never past the window it granted.
struct Upload {
    stream: u32,
    received: usize,
    in_order: bool,
    ended: bool,
    /// SETTINGS_INITIAL_WINDOW_SIZE in each SETTINGS sent: the proxy must keep to one once
    /// it acknowledged it (before, to the one before: RFC 9113 §6.9.2).
    initial_windows: Vec<u32>,
    /// WINDOW_UPDATE increments sent, on the stream and on the connection.
    stream_granted: i64,
    connection_granted: i64,
    /// How far the proxy's DATA went past a window, at worst.
    overdraft: i64,
}

impl Upload {
    async fn settings(&mut self, peer: &mut Peer, initial_window: u32) {
        peer.settings(&[(setting::INITIAL_WINDOW_SIZE, initial_window)])
            .await;
        self.initial_windows.push(initial_window);
    }

    async fn window_update(&mut self, peer: &mut Peer, stream: u32, increment: u32) {
        peer.window_update(stream, increment).await;
        if stream == 0 {
            self.connection_granted += i64::from(increment);
        } else {
            self.stream_granted += i64::from(increment);
        }
    }

    /// Reads the proxy's frames, checking its DATA, until `done` holds after one, the upload
    /// ended or the connection did.
    async fn read_until(
        &mut self,
        peer: &mut Peer,
        done: impl Fn(&Upload, &Peer, &raw_h2::Frame) -> bool,
    ) {
        while !self.ended {
            let Some(frame) = peer.next().await else {
                return;
            };
            if frame.kind == kind::DATA && frame.stream == self.stream {
                self.on_data(&frame, peer);
            }
            if done(self, peer, &frame) {
                return;
            }
        }
    }

    /// The proxy pads nothing: the payload is the data.
    fn on_data(&mut self, frame: &raw_h2::Frame, peer: &Peer) {
        let data = &frame.payload;
        self.in_order &= data
            .iter()
            .enumerate()
            .all(|(i, &byte)| byte == upload_byte(self.received + i));
        self.received += data.len();
        self.ended = frame.flags & flag::END_STREAM != 0;
        // The window the proxy knew of: the last SETTINGS it acknowledged (65,535 before).
        let initial = match peer.settings_acks {
            0 => 65_535,
            n => i64::from(self.initial_windows[n - 1]),
        };
        let received = self.received as i64;
        let over_stream = received - (initial + self.stream_granted);
        let over_connection = received - (65_535 + self.connection_granted);
        self.overdraft = self.overdraft.max(over_stream).max(over_connection);
    }
}

#[tokio::test]
async fn h2c_a_window_lowered_to_zero_mid_upload_holds_the_body_until_reopened() {
    let backend = H2Backend::start(|mut peer| async move {
        let mut upload = Upload {
            stream: 0,
            received: 0,
            in_order: true,
            ended: false,
            initial_windows: Vec::new(),
            stream_granted: 0,
            connection_granted: 0,
            overdraft: 0,
        };
        // Streams may send 40,000 bytes, the connection all of the body.
        upload.settings(&mut peer, 40_000).await;
        upload.window_update(&mut peer, 0, 1 << 20).await;
        let head = peer.request_head().await.expect("the upload's head");
        upload.stream = head.stream;
        // Some of the body, then the window to 0: the stream's goes negative (§6.9.2).
        upload
            .read_until(&mut peer, |u, _, _| u.received >= 16_384)
            .await;
        upload.settings(&mut peer, 0).await;
        upload
            .read_until(&mut peer, |_, peer, _| peer.settings_acks == 2)
            .await;
        let at_zero = upload.received;
        // 10,000 more is still below 0 (at least 16,384 went): nothing may come. The PING
        // says when the proxy has taken the WINDOW_UPDATE.
        upload.window_update(&mut peer, head.stream, 10_000).await;
        peer.ping(*b"held?   ").await;
        upload
            .read_until(&mut peer, |_, _, f| is_ping_ack(f, b"held?   "))
            .await;
        let held = upload.received - at_zero;
        // Back to 65,535: the window is 65,535 + 10,000 - what was sent; the proxy fills it.
        upload.settings(&mut peer, 65_535).await;
        let filled = 75_535;
        upload
            .read_until(&mut peer, |u, _, _| u.received >= filled)
            .await;
        let reached = upload.received;
        upload
            .window_update(&mut peer, head.stream, UPLOAD as u32)
            .await;
        upload.read_until(&mut peer, |_, _, _| false).await;
        let answer = format!(
            "received={} in_order={} overdraft={} held={held} filled={reached}",
            upload.received, upload.in_order, upload.overdraft
        );
        peer.respond(head.stream, 200, answer.as_bytes()).await;
        while peer.next().await.is_some() {}
    })
    .await;
    let (_h, mut client) = proxy_to(&backend).await;
    let body: Vec<u8> = (0..UPLOAD).map(upload_byte).collect();
    let reply = post(&mut client, "/upload", Bytes::from(body)).await;
    assert_eq!(
        status_and_text(&reply),
        (
            200,
            "received=100000 in_order=true overdraft=0 held=0 filled=75535".to_owned()
        )
    );
    backend.assert_well_formed();
}

/// Flow the padded response takes: past both of the proxy's receive windows (2 MiB a
/// stream, 5 MiB the connection), so it completes only if padding is given back too.
const PADDED_FLOW: usize = 6 * 1024 * 1024 + 1;

/// The padded response's DATA frames: (data length, pad length) each; the frame takes
/// 1 + data + pad of flow control. Mostly padding: ~260 bytes of flow carry 3 of data.
fn padded_frames() -> Vec<(usize, u8)> {
    let mut frames = Vec::new();
    let mut flow = 0;
    while flow < PADDED_FLOW {
        let i = frames.len();
        let (data, pad) = (i % 7, 255 - (i % 3) as u8);
        flow += 1 + data + usize::from(pad);
        frames.push((data, pad));
    }
    frames
}

fn padded_byte(at: usize) -> u8 {
    b'a' + (at % 26) as u8
}

#[tokio::test]
async fn h2c_padding_is_stripped_and_counted_against_flow_control() {
    let backend = H2Backend::start(|mut peer| async move {
        peer.settings(&[]).await;
        let request = peer.request().await.expect("request");
        let id = request.stream;
        peer.headers(id, &status_block(200, &[]), false).await;
        let initial = peer.client_initial_window.expect("the proxy's SETTINGS");
        // The proxy's windows as this backend sees them, less what it sent.
        let (mut stream_sent, mut connection_sent) = (0i64, 0i64);
        let frames = padded_frames();
        let mut body_at = 0;
        let mut batch = Vec::new();
        for (n, &(data, pad)) in frames.iter().enumerate() {
            let flow = (1 + data + usize::from(pad)) as i64;
            loop {
                while peer.try_next().is_some() {}
                let stream_window = i64::from(initial) + peer.granted(id) - stream_sent;
                let connection_window = 65_535 + peer.granted(0) - connection_sent;
                if flow <= stream_window.min(connection_window) {
                    break;
                }
                // Out of window: what is batched goes, then wait for a WINDOW_UPDATE.
                peer.write(&std::mem::take(&mut batch)).await;
                peer.until(|f| f.kind == kind::WINDOW_UPDATE).await;
            }
            let mut payload = vec![pad];
            payload.extend((body_at..body_at + data).map(padded_byte));
            payload.extend(std::iter::repeat_n(0, usize::from(pad)));
            body_at += data;
            let last = n + 1 == frames.len();
            let flags = flag::PADDED | if last { flag::END_STREAM } else { 0 };
            batch.extend(frame_bytes(kind::DATA, flags, id, &payload));
            stream_sent += flow;
            connection_sent += flow;
            if batch.len() >= 64 * 1024 {
                peer.write(&std::mem::take(&mut batch)).await;
            }
        }
        peer.write(&batch).await;
        peer.serve().await;
    })
    .await;
    let (_h, mut client) = proxy_to(&backend).await;
    let reply = client.get(&format!("http://{HOST}/padded")).await;
    assert_eq!(reply.status, 200);
    let data: usize = padded_frames().iter().map(|(data, _)| data).sum();
    let expected: Vec<u8> = (0..data).map(padded_byte).collect();
    assert!(reply.body[..] == expected[..], "the body differs");
    // The proxy gave the stream's and the connection's windows back as the padding came
    // (its first WINDOW_UPDATE on stream 0 is its own raise to 5 MiB).
    let updates = |stream: u32| {
        backend
            .sent(0)
            .iter()
            .filter(|f| f.kind == kind::WINDOW_UPDATE && f.stream == stream)
            .count()
    };
    assert!(updates(1) >= 2, "{} on the stream", updates(1));
    assert!(updates(0) >= 2, "{} on the connection", updates(0));
    backend.assert_well_formed();
}

#[tokio::test]
async fn h2c_a_ping_is_answered_with_its_own_bytes() {
    let backend = H2Backend::start(|mut peer| async move {
        peer.settings(&[]).await;
        let request = peer.request().await.expect("request");
        // An unsolicited acknowledgement first: not to be answered.
        peer.frame(kind::PING, flag::ACK, 0, b"unasked!").await;
        peer.ping(*b"sluice\x00\x01").await;
        peer.until(|f| is_ping_ack(f, b"sluice\x00\x01")).await;
        let answer = peer.answer(&request);
        peer.respond(request.stream, 200, answer.as_bytes()).await;
        peer.serve().await;
    })
    .await;
    let (_h, mut client) = proxy_to(&backend).await;
    assert_eq!(status_and_text(&post_x(&mut client).await), served_on(0));
    let pings: Vec<_> = backend
        .sent(0)
        .into_iter()
        .filter(|f| f.kind == kind::PING)
        .collect();
    assert_eq!(pings.len(), 1, "{pings:?}");
    assert!(is_ping_ack(&pings[0], b"sluice\x00\x01"), "{pings:?}");
    backend.assert_well_formed();
}

#[tokio::test]
async fn h2c_a_goaway_finishes_streams_up_to_its_last_and_resends_the_others() {
    let backend = H2Backend::start(|mut peer| async move {
        peer.settings(&[]).await;
        if peer.index > 0 {
            return peer.serve().await;
        }
        // Two requests on this connection, then GOAWAY naming the lower one the last.
        let first = peer.request().await.expect("first request");
        let second = peer.request().await.expect("second request");
        let (low, _) = if first.stream < second.stream {
            (first, second)
        } else {
            (second, first)
        };
        peer.goaway(low.stream, ErrorCode::NO_ERROR).await;
        let answer = peer.answer(&low);
        peer.respond(low.stream, 200, answer.as_bytes()).await;
        while peer.next().await.is_some() {}
    })
    .await;
    let (_h, client) = proxy_to(&backend).await;
    // POSTs (empty: END_STREAM on the HEADERS): only a stream the backend did not process
    // may be sent again.
    let calls = ["/one", "/two"].map(|path| {
        let mut client = client.handle();
        tokio::spawn(async move { post(&mut client, path, Bytes::new()).await })
    });
    let mut answers = Vec::new();
    for call in calls {
        let reply = call.await.unwrap();
        assert_eq!(reply.status, 200, "{}", reply.text());
        answers.push(reply.text());
    }
    answers.sort();
    // One from the first connection, the other (above the last stream) from a new one.
    let paths = ["/one", "/two"];
    let [kept, resent] = &answers[..] else {
        unreachable!()
    };
    let kept_path = paths
        .iter()
        .find(|p| *kept == format!("conn=0 path={p} len=0"));
    let resent_path = paths
        .iter()
        .find(|p| *resent == format!("conn=1 path={p} len=0"));
    assert!(
        kept_path.is_some() && resent_path.is_some() && kept_path != resent_path,
        "{answers:?}"
    );
    // The proxy left the first connection once its stream was done, and reset nothing.
    assert_eq!(backend.wait_goaway(0).await, (0, ErrorCode::NO_ERROR));
    assert_eq!(backend.count(0, kind::HEADERS), 2);
    assert_eq!(
        backend.count(0, kind::RST_STREAM),
        0,
        "{:?}",
        backend.sent(0)
    );
    assert_eq!(backend.count(1, kind::HEADERS), 1);
    assert_eq!(backend.connections(), 2);
    backend.assert_well_formed();
}
