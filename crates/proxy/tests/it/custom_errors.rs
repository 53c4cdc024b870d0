//! The errors phase over real sockets: `custom-http-errors` (ConfigMap and annotation) sends the
//! client's request to an error backend with ingress-nginx's headers, `default-backend` takes a
//! route's requests while its Service has no ready endpoint, and with no error backend ready
//! Sluice answers 404 as ingress-nginx's built-in default backend does.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use crate::support::*;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;
use model::NamespacedName;
use serde_json::{json, Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const NGINX: &str = "nginx.ingress.kubernetes.io/";

/// An error backend: answers every request with the status its `X-Code` names (200 without
/// one) and a JSON body of what it received (`name`, `method`, `target`, `headers`).
async fn start_error_backend(name: &'static str) -> SocketAddr {
    start_recording_backend(name, Seen::default()).await
}

/// What a recording backend received: each request's headers, in order.
type Seen = Arc<Mutex<Vec<Map<String, Value>>>>;

/// [`start_error_backend`] that also keeps the headers of every request in `seen` (for a
/// route's own backend, whose answer the errors phase replaces).
async fn start_recording_backend(name: &'static str, seen: Seen) -> SocketAddr {
    let listener = TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buffer.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&buffer).into_owned();
                let mut lines = text.split("\r\n");
                let mut request_line = lines.next().unwrap_or("").split(' ');
                let (method, target) = (request_line.next(), request_line.next());
                let mut headers = Map::new();
                for line in lines.take_while(|l| !l.is_empty()) {
                    if let Some((name, value)) = line.split_once(':') {
                        headers.insert(name.trim().to_ascii_lowercase(), json!(value.trim()));
                    }
                }
                seen.lock().unwrap().push(headers.clone());
                let status = headers
                    .get("x-code")
                    .and_then(|c| c.as_str()?.parse::<u16>().ok())
                    .unwrap_or(200);
                let body =
                    json!({"name": name, "method": method, "target": target, "headers": headers})
                        .to_string();
                let response = format!(
                    "HTTP/1.1 {status} Error Page\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    addr
}

fn service_at(name: &str, addr: Option<SocketAddr>) -> Vec<Value> {
    let mut objects = vec![service(name, &[("http", 80)])];
    objects.extend(slices(name, &addr.into_iter().collect::<Vec<_>>()));
    objects
}

fn annotated(name: &str, host: &str, service: &str, annotations: &[(&str, &str)]) -> Value {
    let map: Map<String, Value> = annotations
        .iter()
        .map(|(k, v)| (format!("{NGINX}{k}"), json!(v)))
        .collect();
    annotated_site(name, host, service, Value::Object(map))
}

async fn request(h: &Harness, host: &str, target: &str) -> Reply {
    let request = Request::get(target)
        .header("host", host)
        .header("accept", "text/html")
        .header("x-request-id", "req-1")
        .header("x-namespace", "forged")
        .body(Full::<Bytes>::default())
        .unwrap();
    Client::connect(h.http()).await.send(request).await.unwrap()
}

#[tokio::test]
async fn listed_answers_go_to_the_error_backend_with_ingress_nginx_s_headers() {
    let web = start_backend("web").await;
    let global = start_error_backend("global").await;
    let own = start_error_backend("own").await;
    let mut h = Harness::start();
    h.control.options.config_map = NamespacedName::new("sluice", "sluice");
    h.control.options.default_backend_service = Some(NamespacedName::new("default", "errors"));
    let mut objects = vec![settings(&[
        ("custom-http-errors", "404, 503"),
        ("allow-snippet-annotations", "true"),
        ("annotations-risk-level", "Critical"),
    ])];
    objects.extend(service_at("web", Some(addr_of(&web))));
    objects.extend(service_at("errors", Some(global)));
    objects.extend(service_at("own-errors", Some(own)));
    objects.extend(service_at("empty", None));
    objects.push(annotated("plain", "plain.example", "web", &[]));
    objects.push(annotated(
        "custom",
        "custom.example",
        "web",
        &[
            ("custom-http-errors", "500"),
            ("default-backend", "own-errors"),
            (
                "configuration-snippet",
                "more_set_headers \"X-Route: custom\";",
            ),
        ],
    ));
    objects.push(annotated(
        "passing",
        "passing.example",
        "web",
        &[
            ("custom-http-errors", "502"),
            ("disable-proxy-intercept-errors", "true"),
        ],
    ));
    objects.push(annotated(
        "fallback",
        "fallback.example",
        "empty",
        &[("default-backend", "own-errors")],
    ));
    h.apply_allowing_diagnostics(&objects);

    // No rule matches: the request goes to --default-backend-service as it is (a route, not
    // an error request), as to ingress-nginx's default server.
    let reply = request(&h, "nowhere.example", "/a/b?x=1").await;
    assert_eq!(reply.status, StatusCode::OK);
    let seen = reply.json();
    assert_eq!(seen["name"], "global", "{seen}");
    assert_eq!(seen["target"], "/a/b?x=1");
    assert!(seen["headers"].get("x-code").is_none(), "{seen}");

    // The upstream's own 503 is replaced too; the names are the route's, never the client's.
    let reply = request(&h, "plain.example", "/status/503").await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    let seen = reply.json();
    assert_eq!(seen["name"], "global", "{seen}");
    assert_eq!(seen["method"], "GET");
    assert_eq!(seen["target"], "/");
    let headers = &seen["headers"];
    assert_eq!(headers["x-code"], "503");
    assert_eq!(headers["x-format"], "text/html");
    assert_eq!(headers["x-request-id"], "req-1");
    assert_eq!(headers["host"], "plain.example");
    assert_eq!(headers["x-namespace"], "default", "{seen}");
    assert_eq!(headers["x-ingress-name"], "plain");
    assert_eq!(headers["x-service-name"], "web");
    assert_eq!(headers["x-service-port"], "http");
    assert_eq!(headers["x-original-uri"], "/status/503");
    // Not listed: the upstream's answer as it is.
    let reply = request(&h, "plain.example", "/status/500").await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(reply.text().is_empty() || !reply.text().contains("\"name\""));

    // The annotation's list replaces the ConfigMap's, answered by its default-backend.
    let reply = request(&h, "custom.example", "/status/500").await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(reply.json()["name"], "own");
    // The error backend's answer goes out as it came: the route's header edits are the
    // route's (nginx's error location has none of them); its own answers carry them.
    assert!(
        reply.headers.get("x-route").is_none(),
        "{:?}",
        reply.headers
    );
    let reply = request(&h, "custom.example", "/echo").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.headers["x-route"], "custom");
    let reply = request(&h, "custom.example", "/status/503").await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(!reply.text().contains("\"name\""), "{}", reply.text());

    // disable-proxy-intercept-errors: the upstream's 502 passes.
    let reply = request(&h, "passing.example", "/status/502").await;
    assert_eq!(reply.status, StatusCode::BAD_GATEWAY);
    assert!(!reply.text().contains("\"name\""), "{}", reply.text());

    // default-backend while the Service has no endpoint: it answers 503 (this error backend
    // answers X-Code), which the ConfigMap lists, so the flag's Service answers in turn: what
    // nginx does with a server-level error_page and proxy_intercept_errors on.
    let reply = request(&h, "fallback.example", "/shop?id=7").await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    let seen = reply.json();
    assert_eq!(seen["name"], "global", "{seen}");
    assert_eq!(seen["headers"]["x-service-name"], "empty");
}

#[tokio::test]
async fn default_backend_takes_a_route_s_requests_while_its_service_has_no_endpoint() {
    let web = start_backend("web").await;
    let own = start_error_backend("own").await;
    let mut h = Harness::start();
    let mut objects = service_at("own-errors", Some(own));
    objects.extend(service_at("web", None));
    objects.push(annotated(
        "fallback",
        "fallback.example",
        "web",
        &[("default-backend", "own-errors")],
    ));
    h.apply_allowing_diagnostics(&objects);
    let reply = request(&h, "fallback.example", "/shop?id=7").await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    let seen = reply.json();
    assert_eq!(seen["name"], "own", "{seen}");
    assert_eq!(seen["target"], "/shop?id=7");
    let headers = &seen["headers"];
    assert_eq!(headers["x-code"], "503");
    assert_eq!(headers["x-format"], "text/html");
    assert_eq!(headers["x-namespace"], "default");
    assert_eq!(headers["x-ingress-name"], "fallback");
    assert_eq!(headers["x-service-name"], "web");
    assert_eq!(headers["x-service-port"], "http");
    assert!(headers.get("x-original-uri").is_none(), "{seen}");

    // Once the Service has an endpoint (the endpoint fast path), it takes its requests again.
    let mut objects = service_at("own-errors", Some(own));
    objects.extend(service_at("web", Some(addr_of(&web))));
    objects.push(annotated(
        "fallback",
        "fallback.example",
        "web",
        &[("default-backend", "own-errors")],
    ));
    h.update(&objects);
    let reply = request(&h, "fallback.example", "/echo").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.backend(), "web");
}

#[tokio::test]
async fn without_an_error_backend_ready_sluice_answers_404_as_the_built_in_default_backend() {
    let web = start_backend("web").await;
    let mut h = Harness::start();
    h.control.options.config_map = NamespacedName::new("sluice", "sluice");
    let mut objects = vec![settings(&[("custom-http-errors", "503")])];
    objects.extend(service_at("web", Some(addr_of(&web))));
    objects.push(annotated("plain", "plain.example", "web", &[]));
    h.apply_allowing_diagnostics(&objects);
    let reply = request(&h, "plain.example", "/status/503").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.text());
    let reply = request(&h, "plain.example", "/status/502").await;
    assert_eq!(reply.status, StatusCode::BAD_GATEWAY);
}

#[tokio::test]
async fn the_error_request_carries_the_request_id_the_upstream_got() {
    // The route's own backend answers what X-Code asks (503 here) and records what it got.
    let seen = Seen::default();
    let web = start_recording_backend("web", seen.clone()).await;
    let errors = start_error_backend("errors").await;
    let mut h = Harness::start();
    h.control.options.config_map = NamespacedName::new("sluice", "sluice");
    h.control.options.default_backend_service = Some(NamespacedName::new("default", "errors"));
    let mut objects = vec![settings(&[("custom-http-errors", "503")])];
    objects.extend(service_at("web", Some(web)));
    objects.extend(service_at("errors", Some(errors)));
    objects.push(annotated("plain", "plain.example", "web", &[]));
    h.apply_allowing_diagnostics(&objects);
    // No X-Request-ID from the client: Sluice makes one for the upstream, and the error
    // backend gets the same one (ingress-nginx sends `$req_id` to both).
    let send = |id: Option<&'static str>| {
        let mut request = Request::get("/page")
            .header("host", "plain.example")
            .header("x-code", "503");
        if let Some(id) = id {
            request = request.header("x-request-id", id);
        }
        let request = request.body(Full::<Bytes>::default()).unwrap();
        let http = h.http();
        async move { Client::connect(http).await.send(request).await.unwrap() }
    };
    let reply = send(None).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    let error_request = reply.json();
    assert_eq!(error_request["name"], "errors", "{error_request}");
    let upstream_got = seen.lock().unwrap()[0]["x-request-id"].clone();
    let id = upstream_got
        .as_str()
        .expect("the upstream got an X-Request-ID");
    assert_eq!(id.len(), 32, "{id}");
    assert_eq!(error_request["headers"]["x-request-id"], upstream_got);
    // The client's own id goes to both as it is.
    let reply = send(Some("req-2")).await;
    assert_eq!(reply.json()["headers"]["x-request-id"], "req-2");
    assert_eq!(seen.lock().unwrap()[1]["x-request-id"], "req-2");
}
