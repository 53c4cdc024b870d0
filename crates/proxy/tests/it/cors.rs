//! CORS (`enable-cors`, `cors-*`) over real sockets, as ingress-nginx answers: preflights here
//! (the backend never sees them), the `Access-Control-*` headers replacing the backend's, the
//! origin list's echo and silence, and Sluice's own errors carrying them.

use std::net::SocketAddr;

use crate::support::*;
use bytes::Bytes;
use http::{header, Request, StatusCode};
use http_body_util::Full;
use serde_json::{json, Value};

const DEFAULT_METHODS: &str = "GET, PUT, POST, DELETE, PATCH, OPTIONS";
const DEFAULT_HEADERS: &str = "DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,Range,Authorization";

/// One host, `/` to `service`, with these `nginx.ingress.kubernetes.io/` annotations.
fn site(name: &str, host: &str, service: &str, annotations: &[(&str, &str)]) -> Value {
    let rules = json!({"rules": [rule(host, vec![path("/", "Prefix", to(service))])]});
    annotated(name, annotations, rules)
}

/// The `web` Service on the recording backend.
fn web(addr: SocketAddr) -> Vec<Value> {
    let mut objects = vec![service("web", &[("http", 80)])];
    objects.extend(slices("web", &[addr]));
    objects
}

/// A backend that answers every request 200 with its own CORS headers (which Sluice's must
/// replace), counting the requests it received.
async fn start_recording_backend() -> (SocketAddr, Counts) {
    start_fixed_backend(
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\
          access-control-allow-origin: https://backend.example\r\n\
          access-control-expose-headers: X-Backend\r\n\r\nok",
    )
    .await
}

/// One request for `/` on a fresh connection, with an `Origin` when given.
async fn send(addr: SocketAddr, method: &str, host: &str, origin: Option<&str>) -> Reply {
    send_to(addr, method, host, "/", origin).await
}

/// One request on a fresh connection, with an `Origin` (and a preflight's
/// Access-Control-Request-Method) when given.
async fn send_to(
    addr: SocketAddr,
    method: &str,
    host: &str,
    path: &str,
    origin: Option<&str>,
) -> Reply {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", host);
    if let Some(origin) = origin {
        request = request
            .header(header::ORIGIN, origin)
            .header(header::ACCESS_CONTROL_REQUEST_METHOD, "PUT");
    }
    let request = request.body(Full::default()).unwrap();
    Client::connect(addr)
        .await
        .send(request)
        .await
        .expect("request succeeds")
}

fn value(reply: &Reply, name: header::HeaderName) -> Option<&str> {
    reply.headers.get(name).map(|v| v.to_str().unwrap())
}

/// ingress-nginx's headers with the defaults, `origin` as Allow-Origin.
fn assert_defaults(reply: &Reply, origin: &str) {
    assert_eq!(
        value(reply, header::ACCESS_CONTROL_ALLOW_ORIGIN),
        Some(origin),
        "{reply:?}"
    );
    assert_eq!(
        value(reply, header::ACCESS_CONTROL_ALLOW_CREDENTIALS),
        Some("true")
    );
    assert_eq!(
        value(reply, header::ACCESS_CONTROL_ALLOW_METHODS),
        Some(DEFAULT_METHODS)
    );
    assert_eq!(
        value(reply, header::ACCESS_CONTROL_ALLOW_HEADERS),
        Some(DEFAULT_HEADERS)
    );
    assert_eq!(
        value(reply, header::ACCESS_CONTROL_MAX_AGE),
        Some("1728000")
    );
    assert_eq!(
        reply
            .headers
            .get_all(header::ACCESS_CONTROL_ALLOW_ORIGIN)
            .iter()
            .count(),
        1
    );
}

#[tokio::test]
async fn preflight_is_answered_here_and_actual_requests_get_the_defaults() {
    let (addr, requests) = start_recording_backend().await;
    let mut h = Harness::start();
    let mut objects = web(addr);
    objects.push(site(
        "cors",
        "cors.example.com",
        "web",
        &[("enable-cors", "true")],
    ));
    objects.push(site("plain", "plain.example.com", "web", &[]));
    h.apply_allowing_diagnostics(&objects);

    let preflight = send(
        h.http(),
        "OPTIONS",
        "cors.example.com",
        Some("https://a.example"),
    )
    .await;
    assert_eq!(preflight.status, StatusCode::NO_CONTENT);
    assert_defaults(&preflight, "*");
    assert_eq!(
        value(&preflight, header::CONTENT_TYPE),
        Some("text/plain charset=UTF-8")
    );
    assert_eq!(value(&preflight, header::CONTENT_LENGTH), None);
    assert_eq!(
        value(&preflight, header::ACCESS_CONTROL_EXPOSE_HEADERS),
        None
    );
    assert!(preflight.body.is_empty());
    // With `*`, ingress-nginx answers every OPTIONS itself, Origin or not.
    let bare = send(h.http(), "OPTIONS", "cors.example.com", None).await;
    assert_eq!(bare.status, StatusCode::NO_CONTENT);
    assert_defaults(&bare, "*");
    assert_eq!(requests.requests(), 0, "no preflight reaches the backend");

    // An actual request: the backend answers, Sluice's headers replace its Allow-Origin; its
    // Expose-Headers (not configured here) passes. No Vary: Origin (ingress-nginx adds none).
    let get = send(
        h.http(),
        "GET",
        "cors.example.com",
        Some("https://a.example"),
    )
    .await;
    assert_eq!(get.status, StatusCode::OK);
    assert_eq!(&get.body[..], b"ok");
    assert_defaults(&get, "*");
    assert_eq!(
        value(&get, header::ACCESS_CONTROL_EXPOSE_HEADERS),
        Some("X-Backend")
    );
    assert_eq!(value(&get, header::VARY), None);
    let without_origin = send(h.http(), "GET", "cors.example.com", None).await;
    assert_defaults(&without_origin, "*");
    assert_eq!(requests.requests(), 2);

    // A route without CORS: OPTIONS goes to the backend, its headers pass untouched.
    let plain = send(
        h.http(),
        "OPTIONS",
        "plain.example.com",
        Some("https://a.example"),
    )
    .await;
    assert_eq!(plain.status, StatusCode::OK);
    assert_eq!(
        value(&plain, header::ACCESS_CONTROL_ALLOW_ORIGIN),
        Some("https://backend.example")
    );
    assert_eq!(value(&plain, header::ACCESS_CONTROL_MAX_AGE), None);
    assert_eq!(requests.requests(), 3);
}

#[tokio::test]
async fn an_origin_list_echoes_matching_origins_and_says_nothing_to_others() {
    let (addr, requests) = start_recording_backend().await;
    let mut h = Harness::start();
    let mut objects = web(addr);
    objects.push(site(
        "listed",
        "listed.example.com",
        "web",
        &[
            ("enable-cors", "true"),
            (
                "cors-allow-origin",
                "https://app.example.com:8443, http://*.example.org",
            ),
            ("cors-allow-credentials", "false"),
            ("cors-allow-methods", "POST, GET"),
            ("cors-allow-headers", "X-Custom"),
            ("cors-expose-headers", "X-Total"),
            ("cors-max-age", "600"),
        ],
    ));
    h.apply_allowing_diagnostics(&objects);
    let host = "listed.example.com";

    for origin in ["https://app.example.com:8443", "HTTP://Sub-1.EXAMPLE.org"] {
        let preflight = send(h.http(), "OPTIONS", host, Some(origin)).await;
        assert_eq!(preflight.status, StatusCode::NO_CONTENT, "{origin}");
        assert_eq!(
            value(&preflight, header::ACCESS_CONTROL_ALLOW_ORIGIN),
            Some(origin)
        );
        assert_eq!(
            value(&preflight, header::ACCESS_CONTROL_ALLOW_CREDENTIALS),
            None
        );
        assert_eq!(
            value(&preflight, header::ACCESS_CONTROL_ALLOW_METHODS),
            Some("POST, GET")
        );
        assert_eq!(
            value(&preflight, header::ACCESS_CONTROL_ALLOW_HEADERS),
            Some("X-Custom")
        );
        assert_eq!(
            value(&preflight, header::ACCESS_CONTROL_EXPOSE_HEADERS),
            Some("X-Total")
        );
        assert_eq!(
            value(&preflight, header::ACCESS_CONTROL_MAX_AGE),
            Some("600")
        );
        let get = send(h.http(), "GET", host, Some(origin)).await;
        assert_eq!(get.status, StatusCode::OK);
        assert_eq!(
            value(&get, header::ACCESS_CONTROL_ALLOW_ORIGIN),
            Some(origin)
        );
        assert_eq!(
            value(&get, header::ACCESS_CONTROL_EXPOSE_HEADERS),
            Some("X-Total")
        );
        assert_eq!(value(&get, header::VARY), None);
    }
    assert_eq!(requests.requests(), 2, "only the GETs reached the backend");

    // No match (another port, two labels for `*`, another scheme, none): no CORS headers from
    // Sluice, the backend's own pass, and an OPTIONS is the backend's to answer.
    let mut sent = 2;
    for origin in [
        Some("https://app.example.com"),
        Some("http://a.b.example.org"),
        Some("https://sub.example.org"),
        None,
    ] {
        for method in ["GET", "OPTIONS"] {
            let reply = send(h.http(), method, host, origin).await;
            sent += 1;
            assert_eq!(reply.status, StatusCode::OK, "{method} {origin:?}");
            assert_eq!(
                value(&reply, header::ACCESS_CONTROL_ALLOW_ORIGIN),
                Some("https://backend.example"),
                "{method} {origin:?}"
            );
            assert_eq!(
                value(&reply, header::ACCESS_CONTROL_EXPOSE_HEADERS),
                Some("X-Backend")
            );
            assert_eq!(value(&reply, header::ACCESS_CONTROL_MAX_AGE), None);
            assert_eq!(requests.requests(), sent);
        }
    }
}

#[tokio::test]
async fn sluice_own_errors_carry_the_headers_and_a_refused_route_does_not() {
    let (addr, requests) = start_recording_backend().await;
    let mut h = Harness::start();
    let mut objects = web(addr);
    objects.push(service("empty", &[("http", 80)]));
    let origin = "https://app.example.com";
    let cors = [("enable-cors", "true"), ("cors-allow-origin", origin)];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut all = cors.to_vec();
        all.extend_from_slice(extra);
        all
    };
    // The test client is on loopback: outside this allow-list.
    objects.push(site(
        "allow",
        "allow.example.com",
        "web",
        &with(&[("whitelist-source-range", "10.0.0.0/8")]),
    ));
    objects.push(site("empty", "empty.example.com", "empty", &cors));
    objects.push(site(
        "small",
        "small.example.com",
        "web",
        &with(&[("proxy-body-size", "1")]),
    ));
    objects.push(site(
        "refused",
        "refused.example.com",
        "web",
        &with(&[("auth-url", "http://auth_server.example.com/check")]),
    ));
    h.apply_allowing_diagnostics(&objects);

    // As ingress-nginx's rewrite phase: the preflight is answered before the allow-list.
    let preflight = send(h.http(), "OPTIONS", "allow.example.com", Some(origin)).await;
    assert_eq!(preflight.status, StatusCode::NO_CONTENT);
    assert_eq!(
        value(&preflight, header::ACCESS_CONTROL_ALLOW_ORIGIN),
        Some(origin)
    );
    let forbidden = send(h.http(), "GET", "allow.example.com", Some(origin)).await;
    assert_eq!(forbidden.status, StatusCode::FORBIDDEN);
    assert_eq!(
        value(&forbidden, header::ACCESS_CONTROL_ALLOW_ORIGIN),
        Some(origin)
    );
    assert_eq!(
        value(&forbidden, header::ACCESS_CONTROL_ALLOW_CREDENTIALS),
        Some("true")
    );
    // Not matched: the refusal has none.
    let other = send(
        h.http(),
        "GET",
        "allow.example.com",
        Some("https://evil.example"),
    )
    .await;
    assert_eq!(other.status, StatusCode::FORBIDDEN);
    assert_eq!(value(&other, header::ACCESS_CONTROL_ALLOW_ORIGIN), None);

    let unavailable = send(h.http(), "GET", "empty.example.com", Some(origin)).await;
    assert_eq!(unavailable.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        value(&unavailable, header::ACCESS_CONTROL_ALLOW_ORIGIN),
        Some(origin)
    );
    assert_eq!(
        value(&unavailable, header::ACCESS_CONTROL_MAX_AGE),
        Some("1728000")
    );

    let request = Request::post("/")
        .header("host", "small.example.com")
        .header(header::ORIGIN, origin)
        .body(Full::new(Bytes::from_static(b"too large")))
        .unwrap();
    let declared = Client::connect(h.http()).await.send(request).await.unwrap();
    assert_eq!(declared.status, StatusCode::PAYLOAD_TOO_LARGE);
    // nginx refuses a declared Content-Length before the location's CORS is decided.
    assert_eq!(value(&declared, header::ACCESS_CONTROL_ALLOW_ORIGIN), None);
    let chunked = raw_head(
        h.http(),
        format!(
            "POST / HTTP/1.1\r\nHost: small.example.com\r\nOrigin: {origin}\r\n\
             Transfer-Encoding: chunked\r\n\r\n9\r\ntoo large\r\n0\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .to_ascii_lowercase();
    assert!(chunked.starts_with("http/1.1 413"), "{chunked}");
    assert!(
        chunked.contains(&format!("access-control-allow-origin: {origin}\r\n")),
        "{chunked}"
    );

    // A route refused by its config (an auth-url it cannot use: fails closed) answers 503
    // without CORS, its preflight too: ingress-nginx's denied location writes no CORS.
    for method in ["GET", "OPTIONS"] {
        let refused = send(h.http(), method, "refused.example.com", Some(origin)).await;
        assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE, "{method}");
        assert_eq!(value(&refused, header::ACCESS_CONTROL_ALLOW_ORIGIN), None);
    }
    assert_eq!(requests.requests(), 0);
}

#[tokio::test]
async fn preflight_over_http2() {
    let (addr, requests) = start_recording_backend().await;
    let mut h = Harness::start();
    let mut objects = web(addr);
    objects.push(site(
        "cors",
        "h2.example.com",
        "web",
        &[("enable-cors", "true")],
    ));
    objects.push(settings(&[("use-h2c", "true")]));
    h.apply_allowing_diagnostics(&objects);
    let stream = tokio::net::TcpStream::connect(h.http()).await.unwrap();
    let mut client = H2Client::over(stream).await;
    let request = Request::builder()
        .method("OPTIONS")
        .uri("http://h2.example.com/")
        .header(header::ORIGIN, "https://a.example")
        .body(Full::default())
        .unwrap();
    let reply = client.send(request).await.unwrap();
    assert_eq!(reply.status, StatusCode::NO_CONTENT);
    assert_defaults(&reply, "*");
    assert_eq!(requests.requests(), 0);
}

#[tokio::test]
async fn app_root_redirects_before_cors_as_the_server_level_rule_it_is() {
    let (addr, requests) = start_recording_backend().await;
    let mut h = Harness::start();
    let mut objects = web(addr);
    objects.push(site(
        "root",
        "root.example.com",
        "web",
        &[("enable-cors", "true"), ("app-root", "/app")],
    ));
    h.apply_allowing_diagnostics(&objects);
    let root = send(
        h.http(),
        "OPTIONS",
        "root.example.com",
        Some("https://a.example"),
    )
    .await;
    assert_eq!(root.status, StatusCode::FOUND);
    assert_eq!(value(&root, header::ACCESS_CONTROL_ALLOW_ORIGIN), None);
    let preflight = send_to(
        h.http(),
        "OPTIONS",
        "root.example.com",
        "/app",
        Some("https://a.example"),
    )
    .await;
    assert_eq!(preflight.status, StatusCode::NO_CONTENT);
    assert_defaults(&preflight, "*");
    let get = send_to(h.http(), "GET", "root.example.com", "/app", None).await;
    assert_eq!(get.status, StatusCode::OK);
    assert_defaults(&get, "*");
    assert_eq!(requests.requests(), 1);
}
