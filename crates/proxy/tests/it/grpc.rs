//! gRPC and HTTP/2 upstreams (`backend-protocol: GRPC`/`GRPCS`, `appProtocol:
//! kubernetes.io/h2c`) with a real gRPC implementation on both sides: grpcio (the gRPC
//! project's C-core, from PyPI) runs the servers and the clients (`grpc/echo.py`); the
//! clients reach Sluice's plain listener in cleartext HTTP/2 (`use-h2c`).
//!
//! The Python comes from `SLUICE_GRPC_PYTHON` (scripts/test.sh sets it from
//! scripts/grpc-python.sh). Without it the tests are skipped with a message, except under CI
//! (`CI=true`), where a missing one fails.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::{json, Value};

pub(crate) use testkit::grpc::{python, GrpcServer, ECHO_PY as SCRIPT};
const HOST: &str = "grpc.example";

/// Runs one client case of `echo.py` against Sluice's plain listener; its JSON answer.
pub(crate) async fn client(python: &Path, h: &Harness, case: &str, args: &[&str]) -> Value {
    client_for(python, h, case, HOST, args).await
}

/// [`client`] with another `:authority`.
pub(crate) async fn client_for(
    python: &Path,
    h: &Harness,
    case: &str,
    authority: &str,
    args: &[&str],
) -> Value {
    let mut command = Command::new(python);
    command
        .arg(SCRIPT)
        .arg(case)
        .arg(h.http().to_string())
        .arg(authority)
        .args(args);
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .expect("the gRPC client runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "{case}: {e}: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// Service `echo` (port `http`, with `app_protocol` when given), its endpoints, a gRPC
/// Ingress for `grpc.example` with these annotations, and `use-h2c`.
pub(crate) fn site(
    endpoints: &[SocketAddr],
    annotations: Value,
    app_protocol: Option<&str>,
) -> Vec<Value> {
    let mut service = service("echo", &[("http", 80)]);
    if let Some(app_protocol) = app_protocol {
        service["spec"]["ports"][0]["appProtocol"] = json!(app_protocol);
    }
    let mut objects = vec![
        service,
        annotated_site("grpc", HOST, "echo", annotations),
        settings(&[("use-h2c", "true")]),
    ];
    objects.extend(slices("echo", endpoints));
    objects
}

fn grpc_annotation(protocol: &str) -> Value {
    json!({"nginx.ingress.kubernetes.io/backend-protocol": protocol})
}

#[tokio::test]
async fn unary_streaming_bidirectional_and_trailers_through_a_grpc_route() {
    let Some(python) = python() else { return };
    let server = GrpcServer::start(&python, "a", None);
    let mut h = Harness::start();
    h.apply(&site(&[server.addr], grpc_annotation("GRPC"), None));

    let reply = client(&python, &h, "unary", &["hello"]).await;
    assert_eq!(reply["code"], "OK", "{reply:#}");
    assert_eq!(reply["reply"]["server"], "a", "{reply:#}");
    assert_eq!(reply["reply"]["echo"], "hello", "{reply:#}");
    // The proxy's request headers reach the gRPC server as metadata, as grpc_set_header
    // sends them in ingress-nginx.
    let metadata = &reply["reply"]["metadata"];
    assert_eq!(metadata["x-forwarded-for"], "127.0.0.1", "{reply:#}");
    assert_eq!(metadata["x-real-ip"], "127.0.0.1", "{reply:#}");
    assert_eq!(metadata["x-forwarded-proto"], "http", "{reply:#}");
    assert!(metadata["x-request-id"].is_string(), "{reply:#}");
    // Response trailers end to end.
    assert_eq!(reply["trailing"]["x-served-by"], "a", "{reply:#}");

    // The server's own error status, message and trailing metadata reach the client.
    let failed = client(&python, &h, "unary", &["fail:not today"]).await;
    assert_eq!(failed["code"], "FAILED_PRECONDITION", "{failed:#}");
    assert_eq!(failed["details"], "not today", "{failed:#}");
    assert_eq!(failed["trailing"]["x-detail"], "custom", "{failed:#}");

    let streamed = client(&python, &h, "stream", &["5"]).await;
    assert_eq!(streamed["code"], "OK", "{streamed:#}");
    assert_eq!(
        streamed["replies"],
        json!(["a:0", "a:1", "a:2", "a:3", "a:4"])
    );

    // Each message is sent only after the reply to the one before arrived: both directions
    // flow while neither has ended.
    let chat = client(&python, &h, "bidi", &["one", "two", "three"]).await;
    assert_eq!(chat["code"], "OK", "{chat:#}");
    assert_eq!(chat["replies"], json!(["a:one", "a:two", "a:three"]));

    // The access log line names the endpoint and its status, as for HTTP/1.1 upstreams.
    let endpoint = server.addr.to_string();
    eventually_async(STEP, "the access log lines", || {
        let lines = h.access_lines();
        let endpoint = endpoint.clone();
        async move {
            lines
                .iter()
                .filter(|l| l.contains("/echo.Echo/Say") && l.contains(&endpoint))
                .count()
                >= 2
        }
    })
    .await;
    // The upstream's response time is measured per request, as for HTTP/1.1.
    let metrics = get(h.admin(), "admin", "/metrics").await.text();
    assert!(
        metrics.lines().any(|l| {
            l.starts_with("nginx_ingress_controller_response_duration_seconds_count{")
                && l.contains("ingress=\"grpc\"")
                && l.ends_with(" 4")
        }),
        "{metrics}"
    );
}

#[tokio::test]
async fn errors_the_proxy_makes_on_a_grpc_route_are_grpc_statuses() {
    let Some(python) = python() else { return };
    let slow = GrpcServer::start(&python, "slow", None);
    let mut h = Harness::start();

    // No endpoints: UNAVAILABLE, in HTTP 200 with grpc-status (grpcio reads it as such).
    h.apply(&site(&[], grpc_annotation("GRPC"), None));
    let reply = client(&python, &h, "unary", &["x"]).await;
    assert_eq!(reply["code"], "UNAVAILABLE", "{reply:#}");
    assert_eq!(
        reply["details"], "no endpoints for this service",
        "{reply:#}"
    );

    // An endpoint that refuses connections: UNAVAILABLE.
    h.apply(&site(&[closed_port()], grpc_annotation("GRPC"), None));
    let reply = client(&python, &h, "unary", &["x"]).await;
    assert_eq!(reply["code"], "UNAVAILABLE", "{reply:#}");
    assert_eq!(reply["details"], "connecting upstream failed", "{reply:#}");

    // proxy-read-timeout (nginx's grpc_read_timeout) before the answer: DEADLINE_EXCEEDED.
    let annotations = json!({
        "nginx.ingress.kubernetes.io/backend-protocol": "GRPC",
        "nginx.ingress.kubernetes.io/proxy-read-timeout": "1",
    });
    h.apply(&site(&[slow.addr], annotations, None));
    let reply = client(&python, &h, "unary", &["sleep:3"]).await;
    assert_eq!(reply["code"], "DEADLINE_EXCEEDED", "{reply:#}");
    assert_eq!(
        reply["details"], "upstream sent no response within proxy-read-timeout",
        "{reply:#}"
    );

    // A message over proxy-body-size (streamed: gRPC sends no content-length):
    // RESOURCE_EXHAUSTED.
    let annotations = json!({
        "nginx.ingress.kubernetes.io/backend-protocol": "GRPC",
        "nginx.ingress.kubernetes.io/proxy-body-size": "1k",
    });
    h.apply(&site(&[slow.addr], annotations, None));
    let big = "x".repeat(4096);
    let reply = client(&python, &h, "unary", &[&big]).await;
    assert_eq!(reply["code"], "RESOURCE_EXHAUSTED", "{reply:#}");

    // No route for a gRPC request: UNIMPLEMENTED (gRPC's mapping of 404).
    let mut other = H2Client::over(tokio::net::TcpStream::connect(h.http()).await.unwrap()).await;
    let reply = other
        .send(
            http::Request::post("http://elsewhere.example/echo.Echo/Say")
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .body(http_body_util::Full::new(bytes::Bytes::new()))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["grpc-status"], "12", "{:?}", reply.headers);
}

#[tokio::test]
async fn grpc_timeout_bounds_the_call_at_the_proxy() {
    let Some(python) = python() else { return };
    let slow = GrpcServer::start(&python, "slow", None);
    let mut h = Harness::start();
    h.apply(&site(&[slow.addr], grpc_annotation("GRPC"), None));
    // A raw HTTP/2 client: grpcio's own clients enforce their deadline themselves.
    let mut client = H2Client::over(tokio::net::TcpStream::connect(h.http()).await.unwrap()).await;
    let message = b"sleep:3";
    let mut framed = vec![0u8];
    framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
    framed.extend_from_slice(message);
    let started = Instant::now();
    let reply = client
        .send(
            http::Request::post(format!("http://{HOST}/echo.Echo/Say"))
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .header("grpc-timeout", "300m")
                .body(http_body_util::Full::new(bytes::Bytes::from(framed)))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(reply.status, 200);
    // Trailers-only when nothing came back yet (the proxy's answer), else in the trailers.
    let status = reply
        .headers
        .get("grpc-status")
        .or_else(|| reply.trailers.as_ref().and_then(|t| t.get("grpc-status")));
    assert_eq!(status.unwrap(), "4", "{reply:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn grpcs_speaks_http2_over_tls_to_a_tls_grpc_server() {
    let Some(python) = python() else { return };
    let ca = TestCa::new();
    let leaf = ca.leaf(&["echo.default.svc"]);
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, &leaf.cert_pem).unwrap();
    std::fs::write(&key, &leaf.key_pem).unwrap();
    let server = GrpcServer::start(&python, "secure", Some((&cert, &key)));
    let mut h = Harness::start();
    // Verified against the Secret's CA, with SNI, as proxy-ssl-* says.
    let b64 = |s: &str| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(s)
    };
    let mut objects = site(
        &[server.addr],
        json!({
            "nginx.ingress.kubernetes.io/backend-protocol": "GRPCS",
            "nginx.ingress.kubernetes.io/proxy-ssl-secret": "default/upstream-ca",
            "nginx.ingress.kubernetes.io/proxy-ssl-verify": "on",
            "nginx.ingress.kubernetes.io/proxy-ssl-server-name": "on",
        }),
        None,
    );
    objects.push(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "upstream-ca", "namespace": "default"},
        "data": {"ca.crt": b64(&ca.root_pem())},
    }));
    h.apply(&objects);
    let reply = client(&python, &h, "unary", &["over tls"]).await;
    assert_eq!(reply["code"], "OK", "{reply:#}");
    assert_eq!(reply["reply"]["server"], "secure", "{reply:#}");
    let chat = client(&python, &h, "bidi", &["x", "y"]).await;
    assert_eq!(chat["replies"], json!(["secure:x", "secure:y"]), "{chat:#}");
}

#[tokio::test]
async fn app_protocol_h2c_is_spoken_as_http2_in_cleartext() {
    let Some(python) = python() else { return };
    let server = GrpcServer::start(&python, "h2c", None);
    let mut h = Harness::start();
    // No annotation: the Service port's appProtocol decides (a gRPC server speaks only
    // HTTP/2, so an answer proves it).
    h.apply(&site(&[server.addr], json!({}), Some("kubernetes.io/h2c")));
    let reply = client(&python, &h, "unary", &["prior knowledge"]).await;
    assert_eq!(reply["code"], "OK", "{reply:#}");
    assert_eq!(reply["reply"]["server"], "h2c", "{reply:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_endpoints_running_stream_finishes_while_new_calls_go_elsewhere() {
    let Some(python) = python() else { return };
    let old = GrpcServer::start(&python, "old", None);
    let new = GrpcServer::start(&python, "new", None);
    let mut h = Harness::start();
    let annotations = grpc_annotation("GRPC");
    h.apply(&site(&[old.addr], annotations.clone(), None));
    let stream = tokio::spawn({
        let (python, target) = (python.clone(), h.http().to_string());
        async move {
            let output = tokio::task::spawn_blocking(move || {
                Command::new(python)
                    .arg(SCRIPT)
                    .args(["bidi", &target, HOST, "before", "pause:4", "after"])
                    .output()
            })
            .await
            .unwrap()
            .unwrap();
            serde_json::from_slice::<Value>(&output.stdout).unwrap()
        }
    });
    // The stream is open on `old` (its first reply came back) when `old` leaves the set.
    tokio::time::sleep(Duration::from_secs(2)).await;
    h.update(&site(&[new.addr], annotations, None));
    let reply = client(&python, &h, "unary", &["elsewhere"]).await;
    assert_eq!(reply["reply"]["server"], "new", "{reply:#}");
    let chat = stream.await.unwrap();
    assert_eq!(chat["code"], "OK", "{chat:#}");
    assert_eq!(
        chat["replies"],
        json!(["old:before", "old:after"]),
        "{chat:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_churn_and_a_graceful_server_stop_fail_no_rpc() {
    let Some(python) = python() else { return };
    let stays = GrpcServer::start(&python, "stays", None);
    let second = GrpcServer::start(&python, "second", None);
    let mut leaving = GrpcServer::start(&python, "leaving", None);
    let mut h = Harness::start();
    let annotations = grpc_annotation("GRPC");
    h.apply(&site(
        &[stays.addr, second.addr, leaving.addr],
        annotations.clone(),
        None,
    ));

    // 8 threads of unary calls and 3 long bidirectional streams for 5 s.
    let run = tokio::spawn({
        let python = python.clone();
        let target = h.http().to_string();
        async move {
            let output = tokio::task::spawn_blocking(move || {
                Command::new(python)
                    .arg(SCRIPT)
                    .args(["churn", &target, HOST, "5", "3"])
                    .output()
            })
            .await
            .unwrap()
            .unwrap();
            serde_json::from_slice::<Value>(&output.stdout)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stderr)))
        }
    });
    // The endpoint set changes every 300 ms: `second` leaves and comes back. Halfway,
    // `leaving` is withdrawn (its pod terminating) with streams running on it, and 300 ms
    // later stops gracefully (GOAWAY; running calls finish). (Stopped while still listed,
    // grpcio answers CANCELLED to calls it accepted but had not started: the server's own
    // answer, which a proxy passes on.)
    let started = Instant::now();
    let mut round = 0;
    while !run.is_finished() {
        round += 1;
        let elapsed = started.elapsed();
        if elapsed > Duration::from_millis(2800) {
            leaving.begin_stop();
        }
        let mut set = vec![stays.addr];
        if round % 2 == 0 {
            set.push(second.addr);
        }
        if elapsed < Duration::from_millis(2500) {
            set.push(leaving.addr);
        }
        h.update(&site(&set, annotations.clone(), None));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let result = run.await.unwrap();
    assert_eq!(result["failures"], json!([]), "{result:#}");
    assert!(
        result["counts"]["unary"].as_u64().unwrap() > 100,
        "{result:#}"
    );
    assert!(
        result["counts"]["bidi_messages"].as_u64().unwrap() > 30,
        "{result:#}"
    );
    for name in ["stays", "second", "leaving"] {
        assert!(
            result["by_server"][name].as_u64().unwrap_or(0) > 0,
            "{name} served nothing: {result:#}"
        );
    }
}

/// How a misbehaving HTTP/2 server turns work away.
#[derive(Clone, Copy)]
enum Refusal {
    /// RST_STREAM REFUSED_STREAM on the first stream of every connection.
    FirstStream,
    /// GOAWAY (NO_ERROR, last stream ID 0) on its first connection before reading any
    /// stream: whatever was sent on it was not processed.
    FirstConnection,
    /// Nothing: every stream is answered; connections are counted.
    Never,
}

/// A server built on the h2 crate that refuses work as `refusal` says (RFC 9113 §8.7: a
/// refused stream, or one above a GOAWAY's last stream ID, was not processed) and answers
/// the rest with the length of the body it read; returns a count: of refused streams
/// (`FirstStream`), of connections (`FirstConnection`, `Never`). No gRPC
/// implementation refuses on demand, so this peer is made here.
async fn start_refusing_server(
    refusal: Refusal,
) -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = tokio::net::TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let refused = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = refused.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let refused = counter.clone();
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(tcp).await else {
                    return;
                };
                let mut first = !matches!(refusal, Refusal::Never);
                if let Refusal::Never = refusal {
                    refused.fetch_add(1, Ordering::SeqCst);
                }
                if let Refusal::FirstConnection = refusal {
                    if refused.fetch_add(1, Ordering::SeqCst) == 0 {
                        conn.abrupt_shutdown(h2::Reason::NO_ERROR);
                        while let Some(Ok(_)) = conn.accept().await {}
                        // Closing a socket with unread bytes resets it, and a reset can
                        // discard the GOAWAY before the peer reads it: linger instead.
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        return;
                    }
                    first = false;
                }
                while let Some(Ok((request, mut respond))) = conn.accept().await {
                    if std::mem::take(&mut first) {
                        refused.fetch_add(1, Ordering::SeqCst);
                        respond.send_reset(h2::Reason::REFUSED_STREAM);
                        continue;
                    }
                    tokio::spawn(async move {
                        let mut body = request.into_body();
                        let mut len = 0;
                        while let Some(Ok(chunk)) = body.data().await {
                            len += chunk.len();
                            let _ = body.flow_control().release_capacity(chunk.len());
                        }
                        let response = http::Response::new(());
                        let mut send = respond.send_response(response, false).unwrap();
                        let _ = send.send_data(bytes::Bytes::from(len.to_string()), true);
                    });
                }
            });
        }
    });
    (addr, refused)
}

/// POSTs `body` to `grpc.example/upload` (not idempotent: only a stream the server never
/// processed may be sent again).
async fn upload(client: &mut H2Client, body: &'static [u8]) -> Reply {
    let request = http::Request::post(format!("http://{HOST}/upload"))
        .body(http_body_util::Full::new(bytes::Bytes::from_static(body)))
        .unwrap();
    client.send(request).await.unwrap()
}

#[tokio::test]
async fn a_refused_stream_is_sent_again_with_its_body() {
    let (server, refused) = start_refusing_server(Refusal::FirstStream).await;
    let mut h = Harness::start();
    // appProtocol h2c: plain HTTP/2, no gRPC involved; the POST is not idempotent, and is
    // resent all the same because the server never processed it.
    h.apply(&site(&[server], json!({}), Some("kubernetes.io/h2c")));
    let mut client = H2Client::over(tokio::net::TcpStream::connect(h.http()).await.unwrap()).await;
    let reply = upload(&mut client, b"twelve bytes").await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.text(), "12");
    assert_eq!(refused.load(std::sync::atomic::Ordering::SeqCst), 1);

    // Streams that arrive together at a worker without a connection share the one it opens
    // (the server refuses the first stream of each connection, so it counts them).
    let (fresh, refused) = start_refusing_server(Refusal::FirstStream).await;
    h.apply(&site(&[fresh], json!({}), Some("kubernetes.io/h2c")));
    let calls: Vec<_> = (0..20)
        .map(|_| {
            let mut client = client.handle();
            tokio::spawn(async move { upload(&mut client, b"abc").await })
        })
        .collect();
    for call in calls {
        let reply = call.await.unwrap();
        assert_eq!((reply.status.as_u16(), reply.text()), (200, "3".to_owned()));
    }
    assert_eq!(refused.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_stream_sent_to_a_connection_going_away_is_sent_again_on_another() {
    let (server, connections) = start_refusing_server(Refusal::FirstConnection).await;
    let mut h = Harness::with_workers(1);
    h.apply(&site(&[server], json!({}), Some("kubernetes.io/h2c")));
    let mut client = H2Client::over(tokio::net::TcpStream::connect(h.http()).await.unwrap()).await;
    for _ in 0..3 {
        let reply = upload(&mut client, b"four").await;
        assert_eq!((reply.status.as_u16(), reply.text()), (200, "4".to_owned()));
    }
    // The connection that went away was not picked again: it and one more connection.
    assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[tokio::test]
async fn upstream_keepalive_requests_retires_an_http2_connection_after_that_many_streams() {
    let (server, connections) = start_refusing_server(Refusal::Never).await;
    let mut h = Harness::with_workers(1);
    let mut objects = site(&[server], json!({}), Some("kubernetes.io/h2c"));
    objects[2] = settings(&[("use-h2c", "true"), ("upstream-keepalive-requests", "3")]);
    h.apply(&objects);
    let mut client = H2Client::over(tokio::net::TcpStream::connect(h.http()).await.unwrap()).await;
    for _ in 0..7 {
        let reply = upload(&mut client, b"seven").await;
        assert_eq!((reply.status.as_u16(), reply.text()), (200, "5".to_owned()));
    }
    // 3 + 3 + 1 streams: nginx's keepalive_requests on upstream connections.
    assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 3);
}

/// An HTTP/2 server (the h2 crate) that answers every stream with `status` and counts them.
async fn start_status_server(
    status: u16,
) -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = tokio::net::TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let streams = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = streams.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let streams = counter.clone();
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(tcp).await else {
                    return;
                };
                while let Some(Ok((_, mut respond))) = conn.accept().await {
                    streams.fetch_add(1, Ordering::SeqCst);
                    let response = http::Response::builder().status(status).body(()).unwrap();
                    let mut send = respond.send_response(response, false).unwrap();
                    let _ = send.send_data(bytes::Bytes::from(status.to_string()), true);
                }
            });
        }
    });
    (addr, streams)
}

#[tokio::test]
async fn a_status_listed_in_proxy_next_upstream_goes_to_the_next_http2_endpoint() {
    use std::sync::atomic::Ordering;
    let (failing, failing_streams) = start_status_server(503).await;
    let (working, _) = start_status_server(200).await;
    let mut h = Harness::with_workers(1);
    let retry =
        json!({"nginx.ingress.kubernetes.io/proxy-next-upstream": "error timeout http_503"});
    h.apply(&site(&[failing, working], retry, Some("kubernetes.io/h2c")));
    let mut client = H2Client::over(tokio::net::TcpStream::connect(h.http()).await.unwrap()).await;
    // Round robin sends at least every other request to the failing endpoint first: each
    // is asked again elsewhere, as on HTTP/1.1 routes (nginx's grpc_next_upstream).
    for _ in 0..6 {
        let reply = client.get(&format!("http://{HOST}/")).await;
        assert_eq!(
            (reply.status.as_u16(), reply.text()),
            (200, "200".to_owned())
        );
    }
    let failed_first = failing_streams.load(Ordering::SeqCst);
    assert!((3..=6).contains(&failed_first), "{failed_first}");

    // A POST is not sent twice: the failing endpoint's answer is passed on (round robin
    // alternates the two endpoints).
    let mut statuses: Vec<u16> = Vec::new();
    for _ in 0..4 {
        statuses.push(upload(&mut client, b"once").await.status.as_u16());
    }
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 200, 503, 503]);

    // When every endpoint's answer counts as failed, the last one is passed on.
    let (other_failing, _) = start_status_server(503).await;
    let retry =
        json!({"nginx.ingress.kubernetes.io/proxy-next-upstream": "error timeout http_503"});
    h.apply(&site(
        &[failing, other_failing],
        retry,
        Some("kubernetes.io/h2c"),
    ));
    let reply = client.get(&format!("http://{HOST}/")).await;
    assert_eq!(
        (reply.status.as_u16(), reply.text()),
        (503, "503".to_owned())
    );

    // Without http_503 the answer is passed on at once.
    let before = failing_streams.load(Ordering::SeqCst);
    h.apply(&site(&[failing], json!({}), Some("kubernetes.io/h2c")));
    let reply = client.get(&format!("http://{HOST}/")).await;
    assert_eq!(reply.status.as_u16(), 503);
    assert_eq!(failing_streams.load(Ordering::SeqCst), before + 1);
}
