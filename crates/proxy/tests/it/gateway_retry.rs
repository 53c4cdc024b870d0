//! HTTPRoute `retry` over real sockets: `codes` and `attempts` decide whether an answer is
//! sent again, a one-endpoint backend is asked again, `backoff` pauses before each retry,
//! `timeouts.request` bounds the retries too, and a refused connection goes to another
//! endpoint. The upstream here fails the first `fail` attempts of each request `id` with
//! `code` (after `delay` ms), then answers 200: what the conformance suite's echo-basic does.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::*;
use http::StatusCode;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Attempts seen per request id.
type Seen = Arc<Mutex<HashMap<String, u32>>>;

async fn start_flaky_upstream() -> (SocketAddr, Seen) {
    let listener = TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Seen::default();
    let counted = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let seen = counted.clone();
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
                        buffer.drain(..end + 4);
                        let (delay, answer) = flaky_answer(&head, &seen);
                        tokio::time::sleep(delay).await;
                        if stream.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    (addr, seen)
}

/// `GET /?id=I&fail=N&code=C&delay=D`: the first N attempts of id I answer C after D ms.
fn flaky_answer(head: &str, seen: &Seen) -> (Duration, String) {
    let target = head.split(' ').nth(1).unwrap_or_default();
    let query = target.split_once('?').map_or("", |(_, q)| q);
    let arg = |name: &str| {
        query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_owned())
            .unwrap_or_default()
    };
    let number = |name: &str| arg(name).parse::<u64>().unwrap_or(0);
    let attempt = {
        let mut seen = seen.lock().unwrap();
        let count = seen.entry(arg("id")).or_default();
        *count += 1;
        *count
    };
    if u64::from(attempt) <= number("fail") {
        let code = number("code");
        return (
            Duration::from_millis(number("delay")),
            format!("HTTP/1.1 {code} Failed\r\ncontent-length: 0\r\n\r\n"),
        );
    }
    let body = format!("attempt {attempt}");
    let answer = format!(
        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    (Duration::ZERO, answer)
}

/// A route for `host` whose one rule goes to `service` with `extra` (retry, timeouts).
fn route(host: &str, service: &str, extra: Value) -> Value {
    let mut rule = json!({"backendRefs": [{"name": service, "port": 80}]});
    for (key, value) in extra.as_object().unwrap() {
        rule[key] = value.clone();
    }
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": host.replace('.', "-"), "namespace": "default"},
        "spec": {"parentRefs": [{"name": "edge"}], "hostnames": [host], "rules": [rule]},
    })
}

#[tokio::test]
async fn codes_and_attempts_decide_what_is_sent_again_to_the_one_endpoint() {
    let (flaky, seen) = start_flaky_upstream().await;
    let mut objects = gateway_edge("default");
    objects.push(service("flaky", &[("http", 80)]));
    objects.extend(slices("flaky", &[flaky]));
    let codes = json!([500, 502, 503, 504]);
    objects.extend([
        route(
            "three.test",
            "flaky",
            json!({"retry": {"codes": [500], "attempts": 3}}),
        ),
        route(
            "two.test",
            "flaky",
            json!({"retry": {"codes": codes, "attempts": 2}}),
        ),
        route(
            "zero.test",
            "flaky",
            json!({"retry": {"codes": codes, "attempts": 0}}),
        ),
        route("none.test", "flaky", json!({})),
        route(
            "teapot.test",
            "flaky",
            json!({"retry": {"codes": [418], "attempts": 1}}),
        ),
    ]);
    let mut h = Harness::start();
    h.apply(&objects);
    let cases = [
        ("three.test", 2, 500, StatusCode::OK, 3),
        ("three.test", 3, 500, StatusCode::OK, 4),
        ("three.test", 4, 500, StatusCode::INTERNAL_SERVER_ERROR, 4),
        ("three.test", 2, 503, StatusCode::SERVICE_UNAVAILABLE, 1),
        ("two.test", 1, 502, StatusCode::OK, 2),
        ("two.test", 2, 504, StatusCode::OK, 3),
        ("two.test", 3, 503, StatusCode::SERVICE_UNAVAILABLE, 3),
        ("zero.test", 1, 500, StatusCode::INTERNAL_SERVER_ERROR, 1),
        ("none.test", 1, 500, StatusCode::INTERNAL_SERVER_ERROR, 1),
        ("teapot.test", 1, 418, StatusCode::OK, 2),
    ];
    for (i, (host, fail, code, status, attempts)) in cases.into_iter().enumerate() {
        let path = format!("/?id={i}&fail={fail}&code={code}");
        let reply = Client::connect(h.http()).await.get(host, &path).await;
        assert_eq!(reply.status, status, "{host}{path}");
        let tried = seen.lock().unwrap()[&i.to_string()];
        assert_eq!(tried, attempts, "{host}{path}: attempts");
    }
}

#[tokio::test]
async fn backoff_pauses_before_each_retry_and_the_request_timeout_bounds_them_all() {
    let (flaky, _) = start_flaky_upstream().await;
    let mut objects = gateway_edge("default");
    objects.push(service("flaky", &[("http", 80)]));
    objects.extend(slices("flaky", &[flaky]));
    objects.extend([
        route(
            "backoff.test",
            "flaky",
            json!({"retry": {"codes": [500], "attempts": 2, "backoff": "200ms"}}),
        ),
        route(
            "timed.test",
            "flaky",
            json!({"retry": {"codes": [500], "attempts": 5}, "timeouts": {"request": "500ms"}}),
        ),
        route(
            "bounded.test",
            "flaky",
            json!({"retry": {"codes": [500], "attempts": 3},
                   "timeouts": {"backendRequest": "500ms", "request": "15s"}}),
        ),
    ]);
    let mut h = Harness::start();
    h.apply(&objects);
    // Two retries: 200 ms, then 400 ms before them (a lower bound only: never flaky).
    let started = Instant::now();
    let reply = Client::connect(h.http())
        .await
        .get("backoff.test", "/?id=b&fail=2&code=500")
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.text(), "attempt 3");
    assert!(started.elapsed() >= Duration::from_millis(600));
    let cases = [
        ("timed.test", "/?id=t1&fail=1&code=500", StatusCode::OK),
        (
            "timed.test",
            "/?id=t2&fail=2&code=500&delay=300",
            StatusCode::GATEWAY_TIMEOUT,
        ),
        (
            "bounded.test",
            "/?id=b1&fail=2&code=500&delay=100",
            StatusCode::OK,
        ),
        // An attempt cut by backendRequest is retried: the fourth try answers.
        (
            "bounded.test",
            "/?id=b2&fail=3&code=500&delay=1000",
            StatusCode::OK,
        ),
        (
            "bounded.test",
            "/?id=b3&fail=4&code=500&delay=1000",
            StatusCode::GATEWAY_TIMEOUT,
        ),
    ];
    for (host, path, status) in cases {
        let reply = Client::connect(h.http()).await.get(host, path).await;
        assert_eq!(reply.status, status, "{host}{path}");
    }
}

#[tokio::test]
async fn a_refused_connection_is_retried_on_another_endpoint() {
    let web = start_backend("web").await;
    let mut objects = gateway_edge("default");
    objects.push(service("web", &[("http", 80)]));
    objects.extend(slices("web", &[addr_of(&web), closed_port()]));
    objects.push(route(
        "conn.test",
        "web",
        json!({"retry": {"attempts": 100}}),
    ));
    objects.push(route("once.test", "web", json!({"retry": {"attempts": 0}})));
    let mut h = Harness::start();
    h.apply(&objects);
    // With no retry, a request the balancer sends to the closed port fails (first: a
    // failed connection sets the endpoint aside for a while).
    let mut failed = 0;
    for _ in 0..4 {
        let reply = Client::connect(h.http()).await.get("once.test", "/").await;
        failed += usize::from(reply.status == StatusCode::BAD_GATEWAY);
    }
    for _ in 0..10 {
        let reply = Client::connect(h.http()).await.get("conn.test", "/").await;
        assert_eq!(reply.status, StatusCode::OK);
    }
    assert!(failed > 0, "no request went to the closed port");
}
