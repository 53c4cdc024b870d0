//! The backend over real sockets on 127.0.0.1, driven by a plain hyper client.

use std::net::SocketAddr;
use std::time::Duration;

use backend::{Backend, BackendConfig};
use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use testkit::eventually_async;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// Generous bound for things that happen in microseconds, so a loaded CI box never flakes.
const PATIENCE: Duration = Duration::from_secs(5);

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

/// One client connection, kept alive across requests.
struct Client {
    send: SendRequest<Full<Bytes>>,
    connection: JoinHandle<()>,
}

impl Client {
    async fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let (send, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        let connection = tokio::spawn(async move {
            let _ = connection.await;
        });
        Client { send, connection }
    }

    async fn send(&mut self, req: Request<Full<Bytes>>) -> hyper::Result<Reply> {
        self.send.ready().await?;
        let response = self.send.send_request(req).await?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await?.to_bytes();
        Ok(Reply {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }

    async fn get(&mut self, path: &str) -> Reply {
        self.send(get(path)).await.expect("request")
    }
}

fn get(path: &str) -> Request<Full<Bytes>> {
    Request::get(path)
        .header("host", "app.example.com")
        .body(Full::new(Bytes::new()))
        .unwrap()
}

async fn start(name: &str, listeners: usize) -> Backend {
    let config = BackendConfig {
        listen: vec!["127.0.0.1:0".parse().unwrap(); listeners],
        name: name.to_owned(),
    };
    Backend::start(config).await.expect("start backend")
}

async fn get_once(addr: SocketAddr, path: &str) -> Reply {
    Client::connect(addr).await.get(path).await
}

async fn refuses_connections(addr: SocketAddr) -> bool {
    TcpStream::connect(addr).await.is_err()
}

fn text(reply: &Reply) -> &str {
    std::str::from_utf8(&reply.body).expect("utf-8 body")
}

#[tokio::test]
async fn root_reports_server_metadata_in_about_a_kilobyte() {
    let backend = start("pod-a", 1).await;
    let addr = backend.local_addrs()[0];
    let mut client = Client::connect(addr).await;

    let reply = client.get("/?x=1").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(reply.body.len(), 1024);
    let body = text(&reply);
    assert!(body.starts_with(&format!(
        "Server address: {addr}\nServer name: pod-a\nDate: "
    )));
    assert!(body.contains(" GMT\nURI: /?x=1\nRequest ID: -\n"), "{body}");

    let req = Request::get("/")
        .header("x-request-id", "req-42")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let reply = client.send(req).await.unwrap();
    assert!(text(&reply).contains("\nRequest ID: req-42\n"));
    backend.abort();
}

#[tokio::test]
async fn healthz_is_ok() {
    let backend = start("pod-a", 1).await;
    let reply = get_once(backend.local_addrs()[0], "/healthz").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body, "ok");
}

#[tokio::test]
async fn fixed_size_files_are_exact() {
    let backend = start("pod-a", 1).await;
    let mut client = Client::connect(backend.local_addrs()[0]).await;
    // One connection for all of them: keep-alive must survive a 1 MB body.
    for (path, len) in [
        ("/0kb.bin", 0),
        ("/1kb.bin", 1024),
        ("/1mb.bin", 1 << 20),
        ("/1kb.bin", 1024),
    ] {
        let reply = client.get(path).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
        assert_eq!(reply.headers["content-type"], "application/octet-stream");
        assert_eq!(
            reply.headers["content-length"],
            len.to_string().as_str(),
            "{path}"
        );
        assert_eq!(reply.body.len(), len, "{path}");
    }
}

#[tokio::test]
async fn echo_reflects_the_request() {
    let backend = start("pod-echo", 1).await;
    let req = Request::post("/echo?a=1&b=two")
        .header("host", "app.example.com")
        .header("x-custom", "hello")
        .header("x-request-id", "rid-7")
        .body(Full::new(Bytes::from(vec![b'x'; 12_345])))
        .unwrap();
    let reply = Client::connect(backend.local_addrs()[0])
        .await
        .send(req)
        .await
        .unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.headers["content-type"], "application/json");

    let doc: Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(doc["method"], "POST");
    assert_eq!(doc["path"], "/echo");
    assert_eq!(doc["query"], "a=1&b=two");
    assert_eq!(doc["host"], "app.example.com");
    assert_eq!(doc["backend"], "pod-echo");
    assert_eq!(doc["body_bytes"], 12_345);
    assert_eq!(doc["headers"]["x-custom"], "hello");
    assert_eq!(doc["headers"]["x-request-id"], "rid-7");
    assert_eq!(doc["headers"]["content-length"], "12345");
}

#[tokio::test]
async fn echo_without_query_or_body() {
    let backend = start("pod-echo", 1).await;
    let reply = get_once(backend.local_addrs()[0], "/echo").await;
    let doc: Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(doc["method"], "GET");
    assert_eq!(doc["query"], Value::Null);
    assert_eq!(doc["body_bytes"], 0);
}

#[tokio::test]
async fn status_route_answers_with_that_status() {
    let backend = start("pod-a", 1).await;
    let mut client = Client::connect(backend.local_addrs()[0]).await;

    let reply = client.get("/status/503").await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.body, "status 503\n");

    let reply = client.get("/status/418").await;
    assert_eq!(reply.status.as_u16(), 418);

    let reply = client.get("/status/204").await;
    assert_eq!(reply.status, StatusCode::NO_CONTENT);
    assert!(reply.body.is_empty());

    assert_eq!(
        client.get("/status/101").await.status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        client.get("/status/abc").await.status,
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn slow_answers_after_the_delay() {
    let backend = start("pod-a", 1).await;
    let mut client = Client::connect(backend.local_addrs()[0]).await;

    let reply = client.get("/slow?ms=20").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body, "slept 20 ms\n");
    assert_eq!(client.get("/slow").await.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        client.get("/slow?ms=x").await.status,
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn unknown_paths_are_404() {
    let backend = start("pod-a", 1).await;
    let mut client = Client::connect(backend.local_addrs()[0]).await;
    for path in ["/nope", "/healthz/", "/1kb.bin.gz", "/status"] {
        assert_eq!(
            client.get(path).await.status,
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
}

#[tokio::test]
async fn every_listen_address_serves_and_reports_itself() {
    let backend = start("pod-multi", 3).await;
    let addrs = backend.local_addrs().to_vec();
    assert_eq!(addrs.len(), 3);
    for addr in addrs {
        let reply = get_once(addr, "/").await;
        assert!(text(&reply).starts_with(&format!("Server address: {addr}\n")));
    }
}

#[tokio::test]
async fn bind_failure_names_the_address() {
    let taken = start("first", 1).await;
    let addr = taken.local_addrs()[0];
    let config = BackendConfig {
        listen: vec!["127.0.0.1:0".parse().unwrap(), addr],
        name: "second".to_owned(),
    };
    let err = Backend::start(config).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
    assert!(err.to_string().contains(&addr.to_string()), "{err}");
}

#[tokio::test]
async fn no_listen_address_is_an_error() {
    let config = BackendConfig {
        listen: Vec::new(),
        name: "none".to_owned(),
    };
    let err = Backend::start(config).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

#[tokio::test]
async fn graceful_shutdown_finishes_in_flight_and_refuses_new_connections() {
    let backend = start("pod-a", 1).await;
    let addr = backend.local_addrs()[0];

    let mut busy = Client::connect(addr).await;
    let in_flight = tokio::spawn(async move { busy.get("/slow?ms=300").await });
    eventually_async(PATIENCE, "the slow request reaches the handler", || {
        let n = backend.in_flight();
        async move { n == 1 }
    })
    .await;

    let drain = tokio::spawn(backend.shutdown(Duration::from_secs(30)));
    eventually_async(PATIENCE, "new connections are refused", || {
        refuses_connections(addr)
    })
    .await;

    let reply = in_flight.await.unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body, "slept 300 ms\n");
    tokio::time::timeout(PATIENCE, drain)
        .await
        .expect("drain finishes once the request is done")
        .unwrap();
}

#[tokio::test]
async fn graceful_shutdown_closes_idle_keep_alive_connections() {
    let backend = start("pod-a", 1).await;
    let addr = backend.local_addrs()[0];
    let mut idle = Client::connect(addr).await;
    assert_eq!(idle.get("/healthz").await.status, StatusCode::OK);

    // With a long grace, only closing the idle connection lets the drain finish in time.
    tokio::time::timeout(PATIENCE, backend.shutdown(Duration::from_secs(600)))
        .await
        .expect("drain does not wait for idle connections");
    tokio::time::timeout(PATIENCE, idle.connection)
        .await
        .expect("the idle connection is closed")
        .unwrap();
    assert!(refuses_connections(addr).await);
}

#[tokio::test]
async fn drain_drops_what_is_left_when_grace_elapses() {
    let backend = start("pod-a", 1).await;
    let addr = backend.local_addrs()[0];
    let mut busy = Client::connect(addr).await;
    let in_flight = tokio::spawn(async move { busy.send(get("/slow?ms=60000")).await.map(|_| ()) });
    eventually_async(PATIENCE, "the slow request reaches the handler", || {
        let n = backend.in_flight();
        async move { n == 1 }
    })
    .await;

    tokio::time::timeout(PATIENCE, backend.shutdown(Duration::from_millis(50)))
        .await
        .expect("drain ends at the grace deadline");
    let result = tokio::time::timeout(PATIENCE, in_flight)
        .await
        .unwrap()
        .unwrap();
    assert!(
        result.is_err(),
        "the request should have lost its connection"
    );
}

#[tokio::test]
async fn abort_drops_connections_and_the_listener() {
    let backend = start("pod-a", 2).await;
    let addrs = backend.local_addrs().to_vec();
    let mut busy = Client::connect(addrs[0]).await;
    let mut idle = Client::connect(addrs[1]).await;
    assert_eq!(idle.get("/healthz").await.status, StatusCode::OK);
    let in_flight = tokio::spawn(async move { busy.send(get("/slow?ms=60000")).await.map(|_| ()) });
    eventually_async(PATIENCE, "the slow request reaches the handler", || {
        let n = backend.in_flight();
        async move { n == 1 }
    })
    .await;

    backend.abort();
    let result = tokio::time::timeout(PATIENCE, in_flight)
        .await
        .unwrap()
        .unwrap();
    assert!(result.is_err(), "the in-flight request should fail");
    tokio::time::timeout(PATIENCE, idle.connection)
        .await
        .expect("the idle connection is closed")
        .unwrap();
    for addr in addrs {
        eventually_async(PATIENCE, "the listener is closed", || {
            refuses_connections(addr)
        })
        .await;
    }
}

#[tokio::test]
async fn dropping_the_backend_stops_it() {
    let backend = start("pod-a", 1).await;
    let addr = backend.local_addrs()[0];
    let mut client = Client::connect(addr).await;
    assert_eq!(client.get("/healthz").await.status, StatusCode::OK);
    drop(backend);
    tokio::time::timeout(PATIENCE, client.connection)
        .await
        .expect("the connection is closed")
        .unwrap();
    eventually_async(PATIENCE, "the listener is closed", || {
        refuses_connections(addr)
    })
    .await;
}
