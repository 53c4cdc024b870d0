//! GRPCRoute in standalone mode over real sockets: a Gateway of Sluice's class with an HTTP
//! listener, GRPCRoutes compiled from the same documents a `--config` folder holds, grpcio
//! servers behind them and grpcio clients speaking h2c with prior knowledge to Sluice's plain
//! socket (no `use-h2c`: a Gateway HTTP listener speaks it). The servers' Services declare no
//! `appProtocol`: a GRPCRoute speaks HTTP/2 to them anyway.
//!
//! Skipped without `SLUICE_GRPC_PYTHON`, as the other gRPC tests (see `grpc.rs`).

use std::collections::BTreeMap;

use crate::grpc::{client_for, python, GrpcServer};
use crate::support::*;
use serde_json::{json, Value};

const HOST: &str = "rpc.example.com";

fn grpc_route(rules: Value) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GRPCRoute",
        "metadata": {"name": "rpc", "namespace": "default"},
        "spec": {"parentRefs": [{"name": "edge"}], "hostnames": [HOST], "rules": rules},
    })
}

/// The Gateway, a Service per server (named as the server, port `http` 8080, no
/// appProtocol) with its endpoint, and `route`.
fn objects(servers: &[(&str, &GrpcServer)], route: Value) -> Vec<Value> {
    let mut objects = gateway_edge("default");
    for (name, server) in servers {
        objects.push(service(name, &[("http", 8080)]));
        objects.extend(slices(name, &[server.addr]));
    }
    objects.push(route);
    objects
}

fn backend_ref(name: &str) -> Value {
    json!([{"name": name, "port": 8080}])
}

/// One unary call of `path` through Sluice, with request metadata `key=value`.
async fn call(python: &std::path::Path, h: &Harness, path: &str, metadata: &[&str]) -> Value {
    let mut args = vec![path, "hello"];
    args.extend(metadata);
    client_for(python, h, "call", HOST, &args).await
}

fn served_by(reply: &Value) -> &str {
    assert_eq!(reply["code"], "OK", "{reply:#}");
    reply["reply"]["server"].as_str().unwrap()
}

#[tokio::test]
async fn methods_services_regexes_and_headers_pick_the_rule_the_spec_ranks_first() {
    let Some(python) = python() else { return };
    let [a, b, c] = ["a", "b", "c"].map(|name| GrpcServer::start(&python, name, None));
    let route = grpc_route(json!([
        {"matches": [{"method": {"service": "echo.Echo", "method": "Say"}}],
         "backendRefs": backend_ref("a")},
        {"matches": [{"method": {"service": "echo.Other"}}], "backendRefs": backend_ref("b")},
        {"matches": [{"method": {"type": "RegularExpression", "service": "echo\\.Oth.r",
                                 "method": "A.k"}}],
         "backendRefs": backend_ref("c")},
        {"matches": [{"method": {"service": "echo.Echo", "method": "Say"},
                      "headers": [{"name": "x-version", "value": "two"}]}],
         "backendRefs": backend_ref("b")},
    ]));
    let mut h = Harness::start();
    h.apply(&objects(&[("a", &a), ("b", &b), ("c", &c)], route));

    let cases: [(&str, &[&str], &str); 5] = [
        ("/echo.Echo/Say", &[], "a"),
        // At equal method, the rule with a header match ranks first.
        ("/echo.Echo/Say", &["x-version=two"], "b"),
        ("/echo.Echo/Say", &["x-version=three"], "a"),
        ("/echo.Other/Say", &[], "b"),
        // The regex stands for a longer path than the service alone.
        ("/echo.Other/Ask", &[], "c"),
    ];
    for (path, metadata, server) in cases {
        let reply = call(&python, &h, path, metadata).await;
        assert_eq!(served_by(&reply), server, "{path} {metadata:?}: {reply:#}");
    }
    // No rule matches: Sluice's own 404, as a gRPC client reads it (UNIMPLEMENTED), which is
    // what the conformance tests expect.
    let reply = call(&python, &h, "/nothing.Here/Call", &[]).await;
    assert_eq!(reply["code"], "UNIMPLEMENTED", "{reply:#}");
    // Another host: no route either.
    let reply = client_for(
        &python,
        &h,
        "call",
        "other.example.com",
        &["/echo.Echo/Say", "x"],
    )
    .await;
    assert_eq!(reply["code"], "UNIMPLEMENTED", "{reply:#}");
}

#[tokio::test]
async fn weighted_backend_refs_share_the_calls_and_a_zero_weight_gets_none() {
    let Some(python) = python() else { return };
    let [a, b, c] = ["a", "b", "c"].map(|name| GrpcServer::start(&python, name, None));
    let route = grpc_route(json!([{"backendRefs": [
        {"name": "a", "port": 8080, "weight": 3},
        {"name": "b", "port": 8080, "weight": 1},
        {"name": "c", "port": 8080, "weight": 0},
    ]}]));
    let mut h = Harness::start();
    h.apply(&objects(&[("a", &a), ("b", &b), ("c", &c)], route));

    // Unary calls from 8 threads for 2 s on one channel (echo.py's churn, no streams).
    let report = client_for(&python, &h, "churn", HOST, &["2", "0"]).await;
    assert_eq!(report["failures"], json!([]), "{report:#}");
    let by_server: BTreeMap<String, u64> =
        serde_json::from_value(report["by_server"].clone()).unwrap();
    let (to_a, to_b) = (by_server["a"], by_server.get("b").copied().unwrap_or(0));
    assert!(!by_server.contains_key("c"), "{by_server:?}");
    let total = to_a + to_b;
    assert!(total >= 40, "too few calls to judge: {by_server:?}");
    // 3:1 expected; a wide band, as the draw is random.
    let share = to_a as f64 / total as f64;
    assert!((0.6..0.9).contains(&share), "{by_server:?}");
}

#[tokio::test]
async fn header_modifiers_edit_the_call_s_metadata_both_ways() {
    let Some(python) = python() else { return };
    let a = GrpcServer::start(&python, "a", None);
    let route = grpc_route(json!([{
        "filters": [
            {"type": "RequestHeaderModifier", "requestHeaderModifier": {
                "set": [{"name": "x-set", "value": "new"}],
                "add": [{"name": "x-added", "value": "yes"}],
                "remove": ["x-remove"]}},
            {"type": "ResponseHeaderModifier", "responseHeaderModifier": {
                "add": [{"name": "x-served-through", "value": "sluice"}]}},
        ],
        "backendRefs": backend_ref("a"),
    }]));
    let mut h = Harness::start();
    h.apply(&objects(&[("a", &a)], route));

    let reply = call(
        &python,
        &h,
        "/echo.Echo/Say",
        &["x-set=old", "x-remove=gone"],
    )
    .await;
    assert_eq!(served_by(&reply), "a");
    let seen = &reply["reply"]["metadata"];
    assert_eq!(seen["x-set"], "new", "{reply:#}");
    assert_eq!(seen["x-added"], "yes", "{reply:#}");
    assert!(seen.get("x-remove").is_none(), "{reply:#}");
    assert_eq!(reply["initial"]["x-served-through"], "sluice", "{reply:#}");
}

#[tokio::test]
async fn a_missing_backend_answers_a_grpc_error_and_other_rules_keep_serving() {
    let Some(python) = python() else { return };
    let a = GrpcServer::start(&python, "a", None);
    let route = grpc_route(json!([
        {"matches": [{"method": {"service": "echo.Other"}}], "backendRefs": backend_ref("gone")},
        {"matches": [{"method": {"service": "echo.Echo"}}], "backendRefs": backend_ref("a")},
        // A filter GRPCRoute does not have: that rule refuses (503, UNAVAILABLE).
        {"matches": [{"method": {"service": "echo.Third"}}],
         "filters": [{"type": "URLRewrite", "urlRewrite": {"hostname": "x.example.com"}}],
         "backendRefs": backend_ref("a")},
    ]));
    let mut h = Harness::start();
    let compiled = h.apply_allowing_diagnostics(&objects(&[("a", &a)], route));
    let said: Vec<String> = compiled.diagnostics.iter().map(|d| d.to_string()).collect();
    assert_eq!(said.len(), 2, "{said:#?}");
    for expected in [
        "spec.rules[0].backendRefs[0]: Service default/gone not found",
        "spec.rules[2].filters[0].type URLRewrite: not supported on a GRPCRoute",
    ] {
        assert!(said.iter().any(|d| d.contains(expected)), "{said:#?}");
    }

    // The unusable reference's share is the spec's 500, as gRPC sees it: INTERNAL.
    let reply = call(&python, &h, "/echo.Other/Say", &[]).await;
    assert_eq!(reply["code"], "INTERNAL", "{reply:#}");
    let reply = call(&python, &h, "/echo.Third/Say", &[]).await;
    assert_eq!(reply["code"], "UNAVAILABLE", "{reply:#}");
    let reply = call(&python, &h, "/echo.Echo/Say", &[]).await;
    assert_eq!(served_by(&reply), "a");
}

#[tokio::test]
async fn request_mirror_sends_a_copy_of_each_call_over_h2c() {
    let Some(python) = python() else { return };
    let [a, b] = ["a", "b"].map(|name| GrpcServer::start(&python, name, None));
    let route = grpc_route(json!([{
        "filters": [{"type": "RequestMirror",
                     "requestMirror": {"backendRef": {"name": "b", "port": 8080}}}],
        "backendRefs": backend_ref("a"),
    }]));
    let mut h = Harness::start();
    h.apply(&objects(&[("a", &a), ("b", &b)], route));

    // The copy is counted once its answer is read to the end: a gRPC server answered it, which
    // it would not have over HTTP/1.1. A copy is never retried, so on a busy machine (the
    // mirror's server still starting) the call is made again until one copy is answered.
    let sent = "sluice_mirror_requests_total{outcome=\"sent\"} ";
    eventually_async(STEP, sent, || async {
        let reply = call(&python, &h, "/echo.Echo/Say", &[]).await;
        assert_eq!(served_by(&reply), "a");
        let metrics = get(h.admin(), "admin", "/metrics").await.text();
        metrics
            .lines()
            .filter_map(|l| l.strip_prefix(sent))
            .any(|n| n.parse::<u64>().is_ok_and(|n| n >= 1))
    })
    .await;
}
