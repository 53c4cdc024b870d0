//! Sluice's own HTTP/2 client (`h2_client`) at its edges, against h2-crate servers and a
//! raw-socket one: flow control both ways, the peer's stream limit, trailers, resets, and
//! a peer breaking the protocol (the request fails with 502, the next ones are served).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::grpc::site;
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

/// A raw-socket server: the first connection gets `bad` after the request's HEADERS; later
/// ones get a 200 with END_STREAM.
async fn start_raw_server(bad: Vec<u8>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut first = true;
        while let Ok((mut tcp, _)) = listener.accept().await {
            let bad = std::mem::take(&mut first).then(|| bad.clone());
            tokio::spawn(async move {
                let mut preface = [0u8; 24];
                if tcp.read_exact(&mut preface).await.is_err() {
                    return;
                }
                // SETTINGS (empty).
                tcp.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap();
                loop {
                    let mut head = [0u8; 9];
                    if tcp.read_exact(&mut head).await.is_err() {
                        return;
                    }
                    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
                    let mut payload = vec![0; len];
                    if tcp.read_exact(&mut payload).await.is_err() {
                        return;
                    }
                    if head[3] != 1 {
                        continue;
                    }
                    let stream = [head[5], head[6], head[7], head[8]];
                    match &bad {
                        Some(bad) => tcp.write_all(bad).await.unwrap(),
                        None => {
                            // HEADERS :status 200 (static index 8), END_STREAM | END_HEADERS.
                            let mut frame = vec![0, 0, 1, 1, 5];
                            frame.extend_from_slice(&stream);
                            frame.push(0x88);
                            tcp.write_all(&frame).await.unwrap();
                        }
                    }
                }
            });
        }
    });
    addr
}

async fn a_broken_peer_fails_one_request(bad: Vec<u8>) {
    let server = start_raw_server(bad).await;
    let mut h = Harness::with_workers(1);
    h.apply(&site(&[server], json!({}), Some("kubernetes.io/h2c")));
    let mut client = client_to(&h).await;
    // A POST: not idempotent, so not sent to another attempt (a GET would be, and pass).
    let reply = post(&mut client, "/", Bytes::from_static(b"x")).await;
    assert_eq!(reply.status, 502);
    for _ in 0..2 {
        let reply = post(&mut client, "/", Bytes::from_static(b"x")).await;
        assert_eq!(reply.status, 200);
    }
}

#[tokio::test]
async fn h2c_a_push_promise_is_a_protocol_error() {
    // PUSH_PROMISE on stream 1 promising stream 2, an empty block.
    a_broken_peer_fails_one_request(vec![0, 0, 4, 5, 4, 0, 0, 0, 1, 0, 0, 0, 2]).await;
}

#[tokio::test]
async fn h2c_a_frame_over_our_max_frame_size_is_a_frame_size_error() {
    // DATA of 20,000 bytes on stream 1: over the 16 KiB we allow.
    let mut frame = vec![0, 0x4e, 0x20, 0, 0, 0, 0, 0, 1];
    frame.extend_from_slice(&[b'x'; 20_000]);
    a_broken_peer_fails_one_request(frame).await;
}
