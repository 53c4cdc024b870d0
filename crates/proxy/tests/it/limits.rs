//! `max-worker-connections` with each kind of idle connection (the inline HTTP/1 server is
//! covered end to end in crates/sluice/tests/it/lifecycle.rs), and HTTP/2's graceful closes,
//! which the worker's own flags drive now instead of a shared channel.

use crate::support::*;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};

/// `foo.example.com` over TLS → echo, with these ConfigMap settings.
fn tls_site(leaf: &Leaf, echo: std::net::SocketAddr, data: &[(&str, &str)]) -> Vec<Value> {
    let mut objects = vec![
        service("echo", &[("http", 80)]),
        tls_secret("foo-tls", leaf),
        ingress(
            "site",
            json!({
                "tls": [{"hosts": ["foo.example.com"], "secretName": "foo-tls"}],
                "rules": [rule("foo.example.com", vec![path("/", "Prefix", to("echo"))])],
            }),
        ),
        settings(data),
    ];
    objects.extend(slices("echo", &[echo]));
    objects
}

/// An HTTP/2 connection whose closing the test can watch.
async fn h2_connection(h: &Harness, ca: &TestCa) -> http2::SendRequest<Full<Bytes>> {
    let (tls, _) = ca
        .connect(h.https(), "foo.example.com", &[b"h2"])
        .await
        .unwrap();
    let (sender, connection) = bounded(http2::handshake(TokioExecutor::new(), TokioIo::new(tls)))
        .await
        .expect("h2 handshake");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    sender
}

async fn h2_get(sender: &mut http2::SendRequest<Full<Bytes>>) -> StatusCode {
    let request = Request::get("https://foo.example.com/healthz")
        .body(Full::default())
        .unwrap();
    bounded(async {
        sender.ready().await?;
        sender.send_request(request).await
    })
    .await
    .expect("h2 request succeeds")
    .status()
}

#[tokio::test]
async fn an_idle_http2_connection_gets_goaway_when_a_new_one_needs_its_place() {
    let echo = start_backend("echo").await;
    let ca = TestCa::new();
    let leaf = ca.leaf(&["foo.example.com"]);
    let mut h = Harness::with_workers(1);
    h.apply(&tls_site(
        &leaf,
        addr_of(&echo),
        &[("max-worker-connections", "1")],
    ));

    let mut idle = h2_connection(&h, &ca).await;
    assert_eq!(h2_get(&mut idle).await, StatusCode::OK);

    let (tls, _) = ca
        .connect(h.https(), "foo.example.com", &[b"http/1.1"])
        .await
        .unwrap();
    let mut newcomer = Client::over(tls).await;
    assert_eq!(
        newcomer.get("foo.example.com", "/healthz").await.status,
        StatusCode::OK
    );
    eventually_async(STEP, "the idle HTTP/2 connection to be closed", || {
        let closed = idle.is_closed();
        async move { closed }
    })
    .await;
}

#[tokio::test]
async fn a_connection_hyper_serves_is_closed_between_requests_when_a_new_one_needs_its_place() {
    let echo = start_backend("echo").await;
    let mut h = Harness::with_workers(1);
    let mut objects = catch_all("echo", &[addr_of(&echo)]);
    objects.push(settings(&[("max-worker-connections", "1")]));
    h.apply(&objects);

    // A request with a body: the inline server hands the connection to hyper.
    let mut idle = Client::connect(h.http()).await;
    let upload = Request::post("/echo")
        .header("host", "x")
        .body(Full::new(Bytes::from_static(b"payload")))
        .unwrap();
    assert_eq!(idle.send(upload).await.unwrap().status, StatusCode::OK);

    let mut newcomer = Client::connect(h.http()).await;
    assert_eq!(newcomer.get("x", "/healthz").await.status, StatusCode::OK);
    eventually_async(STEP, "the idle hyper connection to be closed", || {
        let closed = idle.is_closed();
        async move { closed }
    })
    .await;
}

#[tokio::test]
async fn http2_keep_alive_requests_ends_the_connection_with_goaway() {
    let echo = start_backend("echo").await;
    let ca = TestCa::new();
    let leaf = ca.leaf(&["foo.example.com"]);
    let mut h = Harness::with_workers(1);
    h.apply(&tls_site(
        &leaf,
        addr_of(&echo),
        &[("keep-alive-requests", "2")],
    ));

    let mut connection = h2_connection(&h, &ca).await;
    for _ in 0..2 {
        assert_eq!(h2_get(&mut connection).await, StatusCode::OK);
    }
    eventually_async(
        STEP,
        "the HTTP/2 connection to be closed after two requests",
        || {
            let closed = connection.is_closed();
            async move { closed }
        },
    )
    .await;
}

#[tokio::test]
async fn terminating_fails_ready_then_shutdown_sends_goaway_to_an_idle_http2_connection() {
    let echo = start_backend("echo").await;
    let ca = TestCa::new();
    let leaf = ca.leaf(&["foo.example.com"]);
    let mut h = Harness::with_workers(2);
    h.apply(&tls_site(&leaf, addr_of(&echo), &[]));
    let mut active = h2_connection(&h, &ca).await;
    assert_eq!(h2_get(&mut active).await, StatusCode::OK);
    let mut idle = h2_connection(&h, &ca).await;
    assert_eq!(h2_get(&mut idle).await, StatusCode::OK);
    let mut http1 = Client::connect(h.http()).await;
    let before = http1.get("foo.example.com", "/healthz").await;
    assert_eq!(before.headers.get(http::header::CONNECTION), None);

    // The grace period: /ready fails, traffic is still served, and each connection that
    // carries a request is ended after it (GOAWAY, `Connection: close`), so that clients
    // move to the replicas still ready while this one still accepts.
    h.control.proxy.terminating();
    let ready = get(h.admin(), "admin", "/ready").await;
    assert_eq!(ready.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(ready.text(), "not ready: shutting down\n");
    assert_eq!(h2_get(&mut active).await, StatusCode::OK);
    eventually_async(STEP, "the active HTTP/2 connection to get GOAWAY", || {
        let closed = active.is_closed();
        async move { closed }
    })
    .await;
    let during = http1.get("foo.example.com", "/healthz").await;
    assert_eq!(
        during
            .headers
            .get(http::header::CONNECTION)
            .map(|v| v.as_bytes()),
        Some(&b"close"[..]),
        "{:?}",
        during.headers
    );
    // New connections are still taken.
    let mut fresh = h2_connection(&h, &ca).await;
    assert_eq!(h2_get(&mut fresh).await, StatusCode::OK);
    assert!(
        !idle.is_closed(),
        "an idle connection is left alone until the stop"
    );

    // The stop: each worker's own flag reaches the idle connection, which gets GOAWAY.
    let proxy = h.control.proxy;
    let stopping = tokio::spawn(shutdown(proxy));
    eventually_async(STEP, "the idle HTTP/2 connection to be closed", || {
        let closed = idle.is_closed();
        async move { closed }
    })
    .await;
    bounded(stopping).await.unwrap();
}
