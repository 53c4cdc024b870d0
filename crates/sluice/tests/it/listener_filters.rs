//! Gateway API listener pre-routing filters (GEP-5224) end to end in `sluice serve --config
//! DIR`: two ExternalAuth filters on a listener, real auth servers on 127.0.0.1 (GEP-1494's
//! HTTP protocol), HTTPRoutes matching on what the auth server answered.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::*;

/// What an auth server saw of one sub-request: its target, headers (names lower case) and
/// body.
#[derive(Clone, Debug)]
struct Seen {
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        (self.headers.iter())
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// An auth server on 127.0.0.1 answering with `decide(seen)`: (status line, headers, body).
struct AuthServer {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

type Decide = fn(&Seen) -> (&'static str, Vec<(&'static str, String)>, &'static str);

impl AuthServer {
    fn start(decide: Decide) -> AuthServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let log = log.clone();
                std::thread::spawn(move || answer(stream, &log, decide));
            }
        });
        AuthServer { addr, seen }
    }

    fn asked(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn answer(mut stream: TcpStream, log: &Mutex<Vec<Seen>>, decide: Decide) {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut raw = Vec::new();
    let mut buf = [0; 4096];
    while !raw.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let mut lines = text.split("\r\n");
    let target = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .unwrap_or("")
        .to_owned();
    let headers = lines
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut seen = Seen {
        target,
        headers,
        body: Vec::new(),
    };
    let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let length: usize = seen
        .header("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    seen.body = raw[head_end..].to_vec();
    while seen.body.len() < length {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.body.extend_from_slice(&buf[..n]),
        }
    }
    let (status, headers, body) = decide(&seen);
    log.lock().unwrap().push(seen);
    let mut out = format!(
        "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(body);
    let _ = stream.write_all(out.as_bytes());
}

/// The first filter: a bearer token names the user and their tier; `deny` is refused with a
/// body of its own; no token asks to log in. It also tries to move the request to another
/// Host.
fn first_auth(seen: &Seen) -> (&'static str, Vec<(&'static str, String)>, &'static str) {
    let host = ("host", "evil.test".to_owned());
    match seen.header("authorization") {
        Some("Bearer admin") => (
            "200 OK",
            vec![
                ("x-user", "admin".into()),
                ("x-tenant", "gold".into()),
                host,
            ],
            "",
        ),
        Some("Bearer user") => (
            "200 OK",
            vec![
                ("x-user", "user".into()),
                ("x-tenant", "basic".into()),
                host,
            ],
            "",
        ),
        Some("Bearer deny") => (
            "403 Forbidden",
            vec![
                ("content-type", "text/plain".into()),
                ("x-auth-reason", "denied".into()),
            ],
            "denied by the auth server\n",
        ),
        _ => (
            "401 Unauthorized",
            vec![("www-authenticate", "Bearer realm=\"test\"".into())],
            "log in first\n",
        ),
    }
}

/// The second filter: allows all, says so in a header.
fn second_auth(_: &Seen) -> (&'static str, Vec<(&'static str, String)>, &'static str) {
    (
        "200 OK",
        vec![("x-second", "yes".into()), ("x-dropped", "no".into())],
        "",
    )
}

const GATEWAY: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge}
spec:
  gatewayClassName: sluice
  listeners:
  - name: guarded
    port: 80
    protocol: HTTP
    hostname: guarded.test
    allowedRoutes: {namespaces: {from: All}}
    filters:
      requests:
      - type: ExternalAuth
        externalAuth: {protocol: HTTP, backendRef: {name: first-auth, port: 80}}
      - type: ExternalAuth
        externalAuth:
          protocol: HTTP
          backendRef: {name: second-auth, port: 80}
          http: {path: /second, allowedHeaders: [x-user], allowedResponseHeaders: [x-second, x-forged]}
  - name: open
    port: 80
    protocol: HTTP
    hostname: open.test
  - name: broken
    port: 80
    protocol: HTTP
    hostname: broken.test
    filters:
      requests:
      - type: ExternalAuth
        externalAuth: {protocol: HTTP, backendRef: {name: nowhere, port: 80}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: tiers}
spec:
  parentRefs: [{name: edge}]
  hostnames: [guarded.test, open.test, broken.test]
  rules:
  - matches: [{path: {type: PathPrefix, value: /echo}, headers: [{name: x-tenant, value: gold}]}]
    backendRefs: [{name: gold, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /echo}}]
    backendRefs: [{name: basic, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: rule-auth}
spec:
  parentRefs: [{name: edge, sectionName: open}]
  hostnames: [open.test]
  rules:
  - matches: [{path: {type: PathPrefix, value: /echo/rule}}]
    filters:
    - type: ExternalAuth
      externalAuth:
        protocol: HTTP
        backendRef: {name: first-auth, port: 80}
        http: {allowedResponseHeaders: [x-user]}
    backendRefs: [{name: basic, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /echo/body}}]
    filters:
    - type: ExternalAuth
      externalAuth:
        protocol: HTTP
        backendRef: {name: first-auth, port: 80}
        forwardBody: {maxSize: 16}
    backendRefs: [{name: basic, port: 80}]
";

#[test]
fn listener_filters_run_in_order_before_routing_and_fail_closed() {
    let dir = temp_dir("listener-filters");
    let first = AuthServer::start(first_auth);
    let second = AuthServer::start(second_auth);
    let gold = Pod::start("gold");
    let basic = Pod::start("basic");
    let mut objects = GATEWAY.to_owned();
    objects.push_str(&service_at("first-auth", first.addr));
    objects.push_str(&service_at("second-auth", second.addr));
    objects.push_str(&service_at("gold", gold.addr));
    objects.push_str(&service_at("basic", basic.addr));
    std::fs::write(dir.join("gateway.yaml"), objects).unwrap();
    let serve = Serve::start(&dir, &[]);
    let ask = |host: &str, path: &str, headers: &[(&str, &str)]| {
        let mut stream = TcpStream::connect(serve.http).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        request(&mut stream, "GET", host, path, headers).unwrap()
    };
    let echoed = |reply: &Response| -> serde_json::Value {
        assert_eq!(reply.status, 200, "{}", reply.text());
        serde_json::from_slice(&reply.body).unwrap()
    };

    // Allowed: the first answer's headers reach the backend, and route matching sees them
    // (the client's own x-tenant is replaced, so it cannot pick the gold tier); Host stays.
    let reply = ask(
        "guarded.test",
        "/echo?q=1",
        &[
            ("authorization", "Bearer user"),
            ("x-tenant", "gold"),
            ("x-forged", "1"),
        ],
    );
    let seen = echoed(&reply);
    assert_eq!(seen["backend"], "basic", "{seen}");
    assert_eq!(seen["host"], "guarded.test", "{seen}");
    assert_eq!(seen["headers"]["x-user"], "user", "{seen}");
    assert_eq!(seen["headers"]["x-tenant"], "basic", "{seen}");
    // The second filter's allowed headers only; a named one it did not send is removed.
    assert_eq!(seen["headers"]["x-second"], "yes", "{seen}");
    assert!(seen["headers"].get("x-dropped").is_none(), "{seen}");
    assert!(seen["headers"].get("x-forged").is_none(), "{seen}");
    let asked = first.asked();
    assert_eq!(asked.len(), 1);
    let sub = &asked[0];
    assert_eq!(sub.target, "/echo?q=1");
    assert_eq!(sub.header("host"), Some("guarded.test"));
    assert_eq!(sub.header("authorization"), Some("Bearer user"));
    assert_eq!(sub.header("content-length"), Some("0"));
    // Not in its allowedHeaders: not sent.
    assert_eq!(sub.header("x-tenant"), None, "{sub:?}");
    // The second filter ran after the first: it got the first one's x-user, under its prefix.
    let asked = second.asked();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].target, "/second/echo?q=1");
    assert_eq!(asked[0].header("x-user"), Some("user"), "{:?}", asked[0]);

    // What the auth server answered picks the rule: one pass, after the filters.
    let seen = echoed(&ask(
        "guarded.test",
        "/echo",
        &[("authorization", "Bearer admin")],
    ));
    assert_eq!(seen["backend"], "gold", "{seen}");
    assert_eq!(seen["host"], "guarded.test", "{seen}");

    // A deny short-circuits: the auth server's answer as it came, the second filter and the
    // backend never asked.
    let before = second.asked().len();
    let reply = ask("guarded.test", "/echo", &[("authorization", "Bearer deny")]);
    assert_eq!(reply.status, 403);
    assert_eq!(reply.text(), "denied by the auth server\n");
    assert_eq!(reply.header("x-auth-reason"), Some("denied"));
    let reply = ask("guarded.test", "/echo", &[]);
    assert_eq!(reply.status, 401);
    assert_eq!(reply.text(), "log in first\n");
    assert_eq!(
        reply.header("www-authenticate"),
        Some("Bearer realm=\"test\"")
    );
    assert_eq!(second.asked().len(), before);

    // A request that matches no route still goes through the filters before its 404.
    let asked = first.asked().len();
    let reply = ask(
        "guarded.test",
        "/nothing-here",
        &[("authorization", "Bearer deny")],
    );
    assert_eq!(reply.status, 403, "{}", reply.text());
    let reply = ask(
        "guarded.test",
        "/nothing-here",
        &[("authorization", "Bearer user")],
    );
    assert_eq!(reply.status, 404, "{}", reply.text());
    assert_eq!(first.asked().len(), asked + 2);

    // A listener without filters is unaffected: no auth server asked.
    let (firsts, seconds) = (first.asked().len(), second.asked().len());
    let seen = echoed(&ask("open.test", "/echo", &[("x-tenant", "gold")]));
    assert_eq!(seen["backend"], "gold", "{seen}");
    assert_eq!(
        (first.asked().len(), second.asked().len()),
        (firsts, seconds)
    );

    // An HTTPRoute rule's ExternalAuth (post-routing) runs on the same machinery.
    let reply = ask(
        "open.test",
        "/echo/rule",
        &[("authorization", "Bearer deny")],
    );
    assert_eq!(reply.status, 403, "{}", reply.text());
    assert_eq!(reply.text(), "denied by the auth server\n");
    let seen = echoed(&ask(
        "open.test",
        "/echo/rule",
        &[("authorization", "Bearer user")],
    ));
    assert_eq!(seen["backend"], "basic", "{seen}");
    assert_eq!(seen["headers"]["x-user"], "user", "{seen}");
    assert!(seen["headers"].get("x-tenant").is_none(), "{seen}");
    assert_eq!(first.asked().last().unwrap().target, "/echo/rule");

    // forwardBody: the auth server gets the body with its length, and so does the backend
    // after it; a body over maxSize is refused (413) and nobody is asked.
    let auth = [("authorization", "Bearer user")];
    let reply = send_body(
        serve.http,
        "open.test",
        "/echo/body",
        &auth,
        b"sixteen bytes!!!",
    );
    let seen = echoed(&reply);
    assert_eq!(seen["body_bytes"], 16, "{seen}");
    let sub = first.asked().last().unwrap().clone();
    assert_eq!(sub.target, "/echo/body");
    assert_eq!(sub.header("content-length"), Some("16"), "{sub:?}");
    assert_eq!(sub.body, b"sixteen bytes!!!");
    let asked = first.asked().len();
    let reply = send_body(serve.http, "open.test", "/echo/body", &auth, &[b'x'; 17]);
    assert_eq!(reply.status, 413, "{}", reply.text());
    assert_eq!(first.asked().len(), asked);
    // Without forwardBody the auth server gets none, whatever the client sent.
    let reply = send_body(serve.http, "open.test", "/echo/rule", &auth, b"body");
    assert_eq!(echoed(&reply)["body_bytes"], 4);
    let sub = first.asked().last().unwrap().clone();
    assert_eq!(
        (sub.header("content-length"), sub.body.len()),
        (Some("0"), 0)
    );

    // A listener whose filter cannot run fails closed, with a diagnostic; the others serve.
    let reply = ask("broken.test", "/echo", &[("authorization", "Bearer admin")]);
    assert_eq!(reply.status, 500, "{}", reply.text());
    let config = serve.config_json().to_string();
    assert!(config.contains("filters.requests[0]"), "{config}");
    assert_eq!(ask("open.test", "/echo", &[]).status, 200);
}
