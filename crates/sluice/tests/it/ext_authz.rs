//! Gateway API's `ExternalAuth` with `protocol: GRPC` (GEP-1494) end to end in `sluice serve
//! --config DIR`: Envoy's ext_authz `Check` call to a real grpc-go server built on Envoy's own
//! generated types (`scripts/grpc-backend/authz.go`, from go-control-plane), as a listener's
//! pre-routing filter (GEP-5224) with `forwardBody`, and as an HTTPRoute rule's filter with
//! `grpc.allowedHeaders`. The server decides from the request's `x-authz` header (see
//! authz.go) and echoes what it was asked in headers the backend shows.

use std::net::SocketAddr;
use std::process::Command;

use crate::support::*;

/// `$SLUICE_GRPC_TOOLS/grpc-backend` on a port of its choosing, or `None` (skipped) when the
/// tools are not built; under CI their absence fails.
fn authz_server() -> Option<(Process, SocketAddr)> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let Some(tools) = std::env::var_os("SLUICE_GRPC_TOOLS") else {
        assert!(
            !ci,
            "CI: SLUICE_GRPC_TOOLS is not set; scripts/test.sh builds them"
        );
        eprintln!("skipped: set SLUICE_GRPC_TOOLS=$(scripts/grpc-tools.sh) (needs Go)");
        return None;
    };
    let mut command = Command::new(std::path::Path::new(&tools).join("grpc-backend"));
    command.args(["--listen", "127.0.0.1:0", "--name", "authz"]);
    let process = Process::spawn(command, "grpc-backend");
    let addr = process
        .stdout_line
        .rsplit(' ')
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {:?}", process.stdout_line));
    Some((process, addr))
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
    filters:
      requests:
      - type: ExternalAuth
        externalAuth:
          protocol: GRPC
          backendRef: {name: authz, port: 80}
          grpc: {}
          forwardBody: {maxSize: 64}
  - name: open
    port: 80
    protocol: HTTP
    hostname: open.test
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app}
spec:
  parentRefs: [{name: edge}]
  hostnames: [guarded.test, open.test]
  rules:
  - matches: [{path: {type: PathPrefix, value: /echo/rule}}]
    filters:
    - type: ExternalAuth
      externalAuth:
        protocol: GRPC
        backendRef: {name: authz, port: 80}
        grpc: {allowedHeaders: [x-authz, x-user]}
    backendRefs: [{name: app, port: 80}]
  - backendRefs: [{name: app, port: 80}]
";

#[test]
fn a_grpc_ext_authz_server_decides_before_routing_and_on_a_rule() {
    let Some((_authz_process, authz)) = authz_server() else {
        return;
    };
    let dir = temp_dir("ext-authz");
    let app = Pod::start("app");
    let mut objects = GATEWAY.to_owned();
    objects.push_str(&service_at("authz", authz));
    objects.push_str(&service_at("app", app.addr));
    std::fs::write(dir.join("gateway.yaml"), objects).unwrap();
    let serve = Serve::start(&dir, &[]);
    let echoed = |reply: &Response| -> serde_json::Value {
        assert_eq!(reply.status, 200, "{}", reply.text());
        serde_json::from_slice(&reply.body).unwrap()
    };

    // Allowed: the server saw the request (method, path with query, host, the body, every
    // header), and its header mutations reach the backend: x-auth-tag appended to the
    // client's, x-remove-me removed; its response header reaches the client. The body goes
    // upstream whole after the check.
    let reply = send_body(
        serve.http,
        "guarded.test",
        "/echo/pay?x=1",
        &[
            ("x-authz", "allow"),
            ("x-user", "ann"),
            ("x-auth-tag", "client"),
            ("x-remove-me", "1"),
        ],
        b"amount=5",
    );
    assert_eq!(
        reply.header("x-auth-said"),
        Some("ok"),
        "{:?}",
        reply.headers
    );
    let seen = echoed(&reply);
    let headers = &seen["headers"];
    assert_eq!(seen["backend"], "app", "{seen}");
    assert_eq!(seen["host"], "guarded.test", "{seen}");
    assert_eq!(seen["body_bytes"], 8, "{seen}");
    assert_eq!(headers["x-auth-user"], "ann", "{seen}");
    assert_eq!(headers["x-auth-method"], "POST", "{seen}");
    assert_eq!(headers["x-auth-path"], "/echo/pay?x=1", "{seen}");
    assert_eq!(headers["x-auth-host"], "guarded.test", "{seen}");
    assert_eq!(headers["x-auth-body"], "8 \"amount=5\"", "{seen}");
    assert_eq!(headers["x-auth-tag"], "client, from-authz", "{seen}");
    assert!(headers.get("x-remove-me").is_none(), "{seen}");
    let sent = headers["x-auth-headers"].as_str().unwrap();
    for name in [":authority", ":method", ":path", "content-length", "x-user"] {
        assert!(sent.split(',').any(|n| n == name), "{name} not in {sent}");
    }

    // Denied with an answer of the server's own; denied without one (403); the call failing
    // (500); no decision header (the server's 403 with its body).
    let reply = send_body(
        serve.http,
        "guarded.test",
        "/echo/pay",
        &[("x-authz", "deny")],
        b"",
    );
    assert_eq!(reply.status, 401, "{}", reply.text());
    assert_eq!(reply.text(), "denied by ext-authz");
    assert_eq!(
        reply.header("www-authenticate"),
        Some("Bearer realm=\"authz\"")
    );
    let reply = send_body(
        serve.http,
        "guarded.test",
        "/echo/pay",
        &[("x-authz", "deny-plain")],
        b"",
    );
    assert_eq!((reply.status, reply.text().as_str()), (403, ""));
    let reply = send_body(
        serve.http,
        "guarded.test",
        "/echo/pay",
        &[("x-authz", "broken")],
        b"",
    );
    assert_eq!(reply.status, 500, "{}", reply.text());
    let reply = send_body(serve.http, "guarded.test", "/echo/pay", &[], b"");
    assert_eq!((reply.status, reply.text().as_str()), (403, "no x-authz"));

    // A body over forwardBody.maxSize is refused (413) before anyone is asked.
    let big = vec![b'a'; 65];
    let reply = send_body(
        serve.http,
        "guarded.test",
        "/echo/pay",
        &[("x-authz", "allow")],
        &big,
    );
    assert_eq!(reply.status, 413, "{}", reply.text());
    let fits = vec![b'a'; 64];
    let seen = echoed(&send_body(
        serve.http,
        "guarded.test",
        "/echo/pay",
        &[("x-authz", "allow")],
        &fits,
    ));
    assert_eq!(seen["body_bytes"], 64, "{seen}");

    // The rule's filter: only the allowed headers are sent, no body (no forwardBody); the
    // listener without filters and the rule without one ask nobody.
    let seen = echoed(&send_body(
        serve.http,
        "open.test",
        "/echo/rule",
        &[("x-authz", "allow"), ("x-user", "bo"), ("x-other", "1")],
        b"ignored",
    ));
    assert_eq!(
        seen["headers"]["x-auth-headers"], "x-authz,x-user",
        "{seen}"
    );
    assert_eq!(seen["headers"]["x-auth-body"], "7 \"\"", "{seen}");
    assert_eq!(seen["body_bytes"], 7, "{seen}");
    let reply = send_body(
        serve.http,
        "open.test",
        "/echo/rule",
        &[("x-authz", "deny")],
        b"",
    );
    assert_eq!(reply.status, 401, "{}", reply.text());
    let seen = echoed(&send_body(serve.http, "open.test", "/echo/other", &[], b""));
    assert!(seen["headers"].get("x-auth-user").is_none(), "{seen}");
}
