//! `use-h2c`: HTTP/2 with prior knowledge on the plain listener (RFC 9113 3.3), beside
//! HTTP/1.1 on the same port; off by default. Real sockets on 127.0.0.1.

use crate::support::*;
use http::Version;
use tokio::net::TcpStream;

#[tokio::test]
async fn the_plain_listener_speaks_http2_to_clients_that_start_with_its_preface() {
    let echo = start_backend("echo").await;
    let mut h = Harness::start();
    let mut objects = catch_all("echo", &[addr_of(&echo)]);
    objects.push(settings(&[("use-h2c", "true")]));
    h.apply(&objects);

    let mut h2 = H2Client::over(TcpStream::connect(h.http()).await.unwrap()).await;
    for _ in 0..3 {
        let reply = h2.get("http://api.example/echo/grpc-ish").await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.version, Version::HTTP_2);
        let echo = reply.json();
        assert_eq!(echo["path"], "/echo/grpc-ish", "{echo:#}");
        assert_eq!(echo["host"], "api.example", "{echo:#}");
        assert_eq!(echo["headers"]["x-forwarded-proto"], "http", "{echo:#}");
    }
    // HTTP/1.1 on the same port, as before.
    let reply = get(h.http(), "api.example", "/echo").await;
    assert_eq!(
        (reply.status.as_u16(), reply.version),
        (200, Version::HTTP_11)
    );

    // The open h2c connection is counted under its own protocol.
    let metrics = get(h.admin(), "admin", "/metrics").await.text();
    assert!(
        metrics.contains("sluice_client_connections{protocol=\"h2c\",state=\"idle\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn without_use_h2c_the_preface_is_not_served() {
    let echo = start_backend("echo").await;
    let mut h = Harness::start();
    h.apply(&catch_all("echo", &[addr_of(&echo)]));
    // An HTTP/1.1 server sees a request line with an unsupported version: refused, as
    // nginx's plain listener does, never routed.
    let head = raw_head(h.http(), b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await;
    assert!(
        head.is_empty() || head.starts_with("HTTP/1.1 4") || head.starts_with("HTTP/1.1 505"),
        "{head}"
    );
    let stream = TcpStream::connect(h.http()).await.unwrap();
    let handshake = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(stream),
        ),
    )
    .await;
    if let Ok(Ok((mut sender, connection))) = handshake {
        tokio::spawn(connection);
        let request = http::Request::get("http://api.example/echo")
            .body(http_body_util::Full::<bytes::Bytes>::default())
            .unwrap();
        let sent = tokio::time::timeout(std::time::Duration::from_secs(5), async {
            sender.ready().await?;
            sender.send_request(request).await
        })
        .await;
        assert!(!matches!(sent, Ok(Ok(_))), "served over h2c: {sent:?}");
    }
}

/// Opens a WebSocket over h2c (RFC 8441 extended CONNECT) through the proxy; the stream is
/// the tunnel.
async fn open_websocket(
    h: &Harness,
    heads: &std::sync::Mutex<Vec<String>>,
) -> hyper_util::rt::TokioIo<hyper::upgrade::Upgraded> {
    let stream = TcpStream::connect(h.http()).await.unwrap();
    let (mut sender, connection) = bounded(hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    ))
    .await
    .expect("h2c handshake");
    tokio::spawn(connection);
    let mut request = http::Request::connect("http://ws.example/chat")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-protocol", "chat")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    request
        .extensions_mut()
        .insert(hyper::ext::Protocol::from_static("websocket"));
    let response = bounded(async {
        sender.ready().await?;
        sender.send_request(request).await
    })
    .await
    .expect("the extended CONNECT is answered");
    assert_eq!(response.status(), 200, "{:?}", heads.lock().unwrap());
    assert_eq!(response.headers()["sec-websocket-protocol"], "chat");
    assert!(response.headers().get("sec-websocket-accept").is_none());
    assert!(response.headers().get("upgrade").is_none());
    let upgraded = bounded(hyper::upgrade::on(response))
        .await
        .expect("the stream is the tunnel");
    hyper_util::rt::TokioIo::new(upgraded)
}

#[tokio::test]
async fn a_websocket_over_http2_reaches_an_http1_websocket_backend() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (upstream, heads) = start_upgrade_upstream_recording().await;
    let mut h = Harness::start();
    let mut objects = catch_all("chat", &[upstream]);
    objects.push(settings(&[("use-h2c", "true")]));
    h.apply(&objects);
    let mut io = open_websocket(&h, &heads).await;
    for message in [&b"hello over h2"[..], b"and again"] {
        io.write_all(message).await.unwrap();
        let mut echoed = vec![0u8; message.len()];
        bounded(io.read_exact(&mut echoed)).await.unwrap();
        assert_eq!(echoed, message);
    }
    let head = heads.lock().unwrap()[0].clone();
    assert!(
        head.contains("\r\nsec-websocket-protocol: chat\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nhost: ws.example\r\n"), "{head}");
}

#[tokio::test]
async fn a_websocket_keeps_its_http2_connection_past_keep_alive() {
    // An open tunnel is the connection's activity: keep-alive (the idle close, then GOAWAY's
    // grace) must not cut a WebSocket that is talking.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (upstream, heads) = start_upgrade_upstream_recording().await;
    let mut h = Harness::start();
    let mut objects = catch_all("chat", &[upstream]);
    objects.push(settings(&[("use-h2c", "true"), ("keep-alive", "1s")]));
    h.apply(&objects);
    let mut io = open_websocket(&h, &heads).await;
    // Over three keep-alive periods, a message every half second.
    for n in 0..7 {
        let message = format!("message {n}");
        io.write_all(message.as_bytes()).await.unwrap();
        let mut echoed = vec![0u8; message.len()];
        bounded(io.read_exact(&mut echoed))
            .await
            .unwrap_or_else(|e| panic!("message {n}: the tunnel ended: {e}"));
        assert_eq!(echoed, message.as_bytes());
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// An upstream that answers every request, WebSocket upgrades included, with an ordinary
/// `200` and a body: it does not switch protocols.
async fn start_upstream_refusing_upgrades() -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = stream.read(&mut buf).await {
                    head.extend_from_slice(&buf[..n]);
                    if head.windows(4).any(|w| w == b"\r\n\r\n") {
                        head.clear();
                        let answer = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\
                                      content-length: 15\r\n\r\nnot a websocket";
                        if stream.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    addr
}

/// Extended CONNECT (RFC 8441) to an upstream that answers `200` rather than `101`: the
/// answer is passed through as an ordinary response, its body and END_STREAM included, as
/// nginx passes through an HTTP/1.1 upgrade answered without 101; never a bodiless `200`
/// that leaves the client a tunnel to nowhere.
#[tokio::test]
async fn a_websocket_upgrade_answered_without_101_is_an_ordinary_response() {
    use crate::support::raw_h2::{Outcome, RawH2};
    let upstream = start_upstream_refusing_upgrades().await;
    let mut h = Harness::start();
    let mut objects = catch_all("chat", &[upstream]);
    objects.push(settings(&[("use-h2c", "true")]));
    h.apply(&objects);
    let mut raw = RawH2::connect(h.http()).await;
    let websocket = [(":protocol", "websocket"), ("sec-websocket-version", "13")];
    raw.request(1, "CONNECT", "/chat", &websocket, false)
        .await
        .unwrap();
    assert_eq!(
        raw.read_until_response(1).await,
        Outcome::Response {
            status: Some(200),
            body: b"not a websocket".to_vec()
        }
    );
    // The connection goes on.
    raw.request(3, "GET", "/again", &[], true).await.unwrap();
    assert!(matches!(
        raw.read_until_response(3).await,
        Outcome::Response {
            status: Some(200),
            ..
        }
    ));
}
