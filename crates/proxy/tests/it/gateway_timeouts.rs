//! HTTPRoute `timeouts` over real sockets: `request` bounds the whole exchange, `backendRequest`
//! each attempt; either passing answers 504, "0s" disables it. The backend's `/slow?ms=N`
//! answers after N ms.

use crate::support::*;
use http::StatusCode;
use serde_json::{json, Value};

/// A route for `host` with `timeouts` on its one rule.
fn route(host: &str, timeouts: Value) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": host.replace('.', "-"), "namespace": "default"},
        "spec": {
            "parentRefs": [{"name": "edge"}],
            "hostnames": [host],
            "rules": [{"backendRefs": [{"name": "web", "port": 80}], "timeouts": timeouts}],
        },
    })
}

#[tokio::test]
async fn request_and_backend_request_timeouts_answer_504_when_they_pass() {
    let web = start_backend("web").await;
    let mut objects = gateway_edge("default");
    objects.extend([
        service("web", &[("http", 80)]),
        route("request.test", json!({"request": "300ms"})),
        route("backend.test", json!({"backendRequest": "300ms"})),
        route(
            "both.test",
            json!({"request": "2s", "backendRequest": "300ms"}),
        ),
        route(
            "disabled.test",
            json!({"request": "0s", "backendRequest": "0s"}),
        ),
    ]);
    objects.extend(slices("web", &[addr_of(&web)]));
    let mut h = Harness::start();
    h.apply(&objects);
    let mut client = Client::connect(h.http()).await;
    let cases = [
        ("request.test", "/slow?ms=0", StatusCode::OK),
        ("request.test", "/slow?ms=1500", StatusCode::GATEWAY_TIMEOUT),
        ("backend.test", "/slow?ms=0", StatusCode::OK),
        ("backend.test", "/slow?ms=1500", StatusCode::GATEWAY_TIMEOUT),
        ("both.test", "/slow?ms=1500", StatusCode::GATEWAY_TIMEOUT),
        ("disabled.test", "/slow?ms=1500", StatusCode::OK),
    ];
    for (host, path, status) in cases {
        // A 504 may close the connection: each request on a connection of its own.
        let reply = Client::connect(h.http()).await.get(host, path).await;
        assert_eq!(reply.status, status, "{host}{path}");
    }
    // The connection used before still works for routes without a timeout's expiry.
    assert_eq!(
        client.get("request.test", "/slow?ms=0").await.status,
        StatusCode::OK
    );
}
