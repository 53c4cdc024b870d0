//! The controller ConfigMap's `proxy-set-headers` and `add-headers` over real sockets: the
//! named ConfigMaps' headers on every request sent upstream and every answer, with nginx
//! variables, a route's own `custom-headers` winning, and edits followed.

use http::StatusCode;
use serde_json::{json, Value};

use crate::support::*;

fn config_map(name: &str, data: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": data,
    })
}

fn site(name: &str, host: &str, service: &str, annotations: &[(&str, &str)]) -> Value {
    annotated(
        name,
        annotations,
        json!({"rules": [rule(host, vec![path("/", "Prefix", to(service))])]}),
    )
}

#[tokio::test]
async fn proxy_set_headers_and_add_headers_reach_every_route_and_follow_their_config_maps() {
    let web = start_backend("web").await;
    let mut h = Harness::start();
    let upstream = |team: &str| {
        config_map(
            "upstream",
            json!({"X-Team": team, "X-Original": "$host$request_uri", "X-Bad": "$nope"}),
        )
    };
    let mut objects = vec![
        service("web", &[("http", 80)]),
        service("empty", &[("http", 80)]),
        settings(&[
            ("proxy-set-headers", "default/upstream"),
            ("add-headers", "default/answers"),
            ("global-allowed-response-headers", "X-Frame-Options"),
        ]),
        upstream("edge"),
        config_map(
            "answers",
            json!({"X-Frame-Options": "DENY", "X-Request": "$request_id"}),
        ),
        config_map("own", json!({"X-Frame-Options": "SAMEORIGIN"})),
        site("plain", "plain.example.com", "web", &[]),
        site(
            "own",
            "own.example.com",
            "web",
            &[("custom-headers", "default/own")],
        ),
        site("down", "down.example.com", "empty", &[]),
    ];
    objects.extend(slices("web", &[addr_of(&web)]));
    let compiled = h.apply_allowing_diagnostics(&objects);
    let diagnostics: Vec<String> = compiled
        .diagnostics
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        diagnostics
            .iter()
            .any(|d| d.contains("data.proxy-set-headers")
                && d.contains("ConfigMap default/upstream")
                && d.contains("\"X-Bad\"")
                && d.contains("$nope")),
        "{diagnostics:?}"
    );
    let http = h.http();

    // Upstream: the ConfigMap's headers, variables filled per request; the bad one left out.
    let reply = get(http, "plain.example.com", "/echo?a=1").await;
    assert_eq!(reply.status, StatusCode::OK);
    let seen = &reply.json()["headers"];
    assert_eq!(seen["x-team"], "edge");
    assert_eq!(seen["x-original"], "plain.example.com/echo?a=1");
    assert!(seen.get("x-bad").is_none(), "{seen}");
    // Answer: add-headers, its variable filled.
    assert_eq!(reply.headers["x-frame-options"], "DENY");
    assert!(!reply.headers["x-request"].is_empty());

    // A route's custom-headers win over add-headers for the same name; the rest still applies.
    let reply = get(http, "own.example.com", "/echo").await;
    assert_eq!(reply.headers["x-frame-options"], "SAMEORIGIN");
    assert_eq!(reply.headers.get_all("x-frame-options").iter().count(), 1);
    assert_eq!(reply.json()["headers"]["x-team"], "edge");

    // Sluice's own answer on a route (no endpoint: 503) carries add-headers too.
    let reply = get(http, "down.example.com", "/").await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.headers["x-frame-options"], "DENY");

    // The referenced ConfigMap is edited: the next request follows; removed: nothing is set.
    objects[3] = upstream("core");
    h.apply_allowing_diagnostics(&objects);
    let reply = get(h.http(), "plain.example.com", "/echo").await;
    assert_eq!(reply.json()["headers"]["x-team"], "core");
    objects.remove(4);
    h.apply_allowing_diagnostics(&objects);
    let reply = get(h.http(), "plain.example.com", "/echo").await;
    assert!(reply.headers.get("x-frame-options").is_none());
    assert_eq!(reply.json()["headers"]["x-team"], "core");
}
