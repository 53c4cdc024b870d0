//! Gateway API in standalone mode over real sockets: a Gateway of Sluice's class with an HTTP
//! listener (port 80, served on the HTTP socket) and an HTTPS one (port 443, its certificate
//! from `certificateRefs`), HTTPRoutes compiled into the same rules as Ingresses. Redirects
//! derive their port from the listener's declared port, never the socket's.

use crate::support::*;
use http::{Request, StatusCode};
use serde_json::{json, Value};

fn gateway_class() -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
        "metadata": {"name": "sluice"},
        "spec": {"controllerName": "sluice.dev/gateway-controller"},
    })
}

/// The Gateway `edge`: an HTTP listener, and an HTTPS one for `secure.example.com` with the
/// Secret `secure-tls`.
fn gateway() -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "edge", "namespace": "default"},
        "spec": {
            "gatewayClassName": "sluice",
            "listeners": [
                {"name": "http", "port": 80, "protocol": "HTTP"},
                {"name": "https", "port": 443, "protocol": "HTTPS",
                 "hostname": "secure.example.com",
                 "tls": {"certificateRefs": [{"name": "secure-tls"}]}},
            ],
        },
    })
}

fn http_route(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    })
}

/// What a test runs against: the proxy, the backends behind `web` and `v2`, and the CA of the
/// HTTPS listener's certificate (`leaf`).
struct Served {
    h: Harness,
    ca: TestCa,
    leaf: Leaf,
    _backends: [backend::Backend; 2],
}

/// The class, the Gateway and its certificate, Services `web` and `v2` with a backend each,
/// and `route`, applied (no diagnostics).
async fn serve(route: Value) -> Served {
    let (served, diagnostics) = serve_allowing_diagnostics(vec![route]).await;
    assert!(
        diagnostics.is_empty(),
        "unexpected diagnostics: {diagnostics:?}"
    );
    served
}

/// As [`serve`], with other objects than one route, and the compile's diagnostics.
async fn serve_allowing_diagnostics(extra: Vec<Value>) -> (Served, Vec<String>) {
    let (web, v2) = (start_backend("web").await, start_backend("v2").await);
    let ca = TestCa::new();
    let leaf = ca.leaf(&["secure.example.com"]);
    let mut objects = vec![
        gateway_class(),
        gateway(),
        tls_secret("secure-tls", &leaf),
        service("web", &[("http", 80)]),
        service("v2", &[("http", 80)]),
    ];
    objects.extend(extra);
    objects.extend(slices("web", &[addr_of(&web)]));
    objects.extend(slices("v2", &[addr_of(&v2)]));
    let mut h = Harness::start();
    let compiled = h.apply_allowing_diagnostics(&objects);
    let diagnostics = compiled.diagnostics.iter().map(|d| d.to_string()).collect();
    let served = Served {
        h,
        ca,
        leaf,
        _backends: [web, v2],
    };
    (served, diagnostics)
}

#[tokio::test]
async fn redirects_name_no_port_on_the_port_80_listener_and_keep_the_query() {
    let served = serve(http_route(
        "moves",
        json!({
            "parentRefs": [{"name": "edge"}],
            "hostnames": ["app.example.com"],
            "rules": [
                {"matches": [{"path": {"type": "PathPrefix", "value": "/old"}}],
                 "filters": [{"type": "RequestRedirect", "requestRedirect": {
                     "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"},
                     "statusCode": 301}}]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/secure"}}],
                 "filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https"}}]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/alt"}}],
                 "filters": [{"type": "RequestRedirect", "requestRedirect": {"port": 8080}}]},
            ],
        }),
    ))
    .await;
    let h = &served.h;
    // The socket's port is not 80; the listener's declared port is, so no port is written.
    assert_ne!(h.http().port(), 80);
    let mut client = Client::connect(h.http()).await;
    let cases = [
        ("/old/page?x=1", 301, "http://app.example.com/new/page?x=1"),
        ("/secure/login", 302, "https://app.example.com/secure/login"),
        ("/alt", 302, "http://app.example.com:8080/alt"),
    ];
    for (path, status, location) in cases {
        let reply = client.get("app.example.com", path).await;
        assert_eq!(reply.status.as_u16(), status, "{path}");
        assert_eq!(reply.headers["location"], location, "{path}");
    }
    // A host no route names: nothing answers.
    let reply = client.get("other.example.com", "/old").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn header_modifiers_edit_the_request_and_the_response() {
    let served = serve(http_route(
        "headers",
        json!({
            "parentRefs": [{"name": "edge", "sectionName": "http"}],
            "rules": [{
                "filters": [
                    {"type": "RequestHeaderModifier", "requestHeaderModifier": {
                        "set": [{"name": "x-set", "value": "new"}],
                        "add": [{"name": "x-add", "value": "two"}],
                        "remove": ["x-remove"]}},
                    {"type": "ResponseHeaderModifier", "responseHeaderModifier": {
                        "set": [{"name": "x-served-by", "value": "gateway"}]}},
                ],
                "backendRefs": [{"name": "web", "port": 80}],
            }],
        }),
    ))
    .await;
    let h = &served.h;
    let mut client = Client::connect(h.http()).await;
    let request = Request::get("/echo")
        .header("host", "any.example.com")
        .header("x-set", "old")
        .header("x-add", "one")
        .header("x-remove", "gone")
        .body(Default::default())
        .unwrap();
    let reply = client.send(request).await.unwrap();
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(reply.headers["x-served-by"], "gateway");
    let headers = &reply.json()["headers"];
    assert_eq!(headers["x-set"], "new", "{headers}");
    assert!(
        headers["x-add"] == "one, two" || headers["x-add"] == json!(["one", "two"]),
        "{headers}"
    );
    assert!(headers.get("x-remove").is_none(), "{headers}");
}

#[tokio::test]
async fn weighted_backend_refs_split_the_requests() {
    let served = serve(http_route(
        "split",
        json!({
            "parentRefs": [{"name": "edge", "port": 80}],
            "hostnames": ["split.example.com"],
            "rules": [
                {"backendRefs": [{"name": "web", "port": 80, "weight": 1},
                                 {"name": "v2", "port": 80, "weight": 1}]},
                {"matches": [{"path": {"type": "Exact", "value": "/echo"},
                              "headers": [{"name": "x-only", "value": "web"}]}],
                 "backendRefs": [{"name": "web", "port": 80, "weight": 5},
                                 {"name": "v2", "port": 80, "weight": 0}]},
            ],
        }),
    ))
    .await;
    let h = &served.h;
    let mut client = Client::connect(h.http()).await;
    let mut seen = std::collections::BTreeMap::new();
    for _ in 0..200 {
        let reply = client.get("split.example.com", "/echo").await;
        assert_eq!(reply.status, StatusCode::OK);
        *seen.entry(reply.backend()).or_insert(0) += 1;
    }
    // 1:1 over 200 draws: each side far from zero (a wrong split would send all to one).
    assert!(seen.get("web").copied().unwrap_or(0) > 40, "{seen:?}");
    assert!(seen.get("v2").copied().unwrap_or(0) > 40, "{seen:?}");
    // Weight 0 takes no request.
    for _ in 0..50 {
        let request = Request::get("/echo")
            .header("host", "split.example.com")
            .header("x-only", "web")
            .body(Default::default())
            .unwrap();
        let reply = client.send(request).await.unwrap();
        assert_eq!(reply.backend(), "web");
    }
}

#[tokio::test]
async fn an_https_listener_serves_its_certificate_and_its_routes_only_over_https() {
    let served = serve(http_route(
        "secure",
        json!({
            "parentRefs": [{"name": "edge", "sectionName": "https"}],
            "rules": [{"backendRefs": [{"name": "web", "port": 80}]}],
        }),
    ))
    .await;
    let h = &served.h;
    let (tls, presented) = (served.ca)
        .connect(h.https(), "secure.example.com", &[b"http/1.1"])
        .await
        .expect("the listener's certificate verifies");
    assert_eq!(presented, served.leaf.der);
    let mut client = Client::over(tls).await;
    let reply = client.get("secure.example.com", "/echo").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.backend(), "web");
    // The route is attached to the HTTPS listener only: plain HTTP does not reach it.
    let reply = get(h.http(), "secure.example.com", "/echo").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn url_rewrite_replaces_the_matched_prefix_and_the_upstream_host() {
    let served = serve(http_route(
        "rewrite",
        json!({
            "parentRefs": [{"name": "edge"}],
            "hostnames": ["app.example.com"],
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": "/api/v1"}}],
                "filters": [{"type": "URLRewrite", "urlRewrite": {
                    "hostname": "internal.example.com",
                    "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/echo"}}}],
                "backendRefs": [{"name": "web", "port": 80}],
            }],
        }),
    ))
    .await;
    let mut client = Client::connect(served.h.http()).await;
    let reply = client.get("app.example.com", "/api/v1/users?id=7").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let echo = reply.json();
    assert_eq!(echo["path"], "/echo/users", "{echo}");
    assert_eq!(echo["query"], "id=7", "{echo}");
    assert_eq!(echo["host"], "internal.example.com", "{echo}");
    // The prefix matches element by element: /api/v1x is not under it.
    let reply = client.get("app.example.com", "/api/v1x").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
}

/// A backendRef's own URLRewrite (full path, or the match's prefix replaced) applies to the
/// requests of its share.
#[tokio::test]
async fn a_backend_ref_s_url_rewrite_rewrites_its_share_s_path() {
    let rewrite = |path: Value| json!([{"type": "URLRewrite", "urlRewrite": {"path": path}}]);
    let rule = |prefix: &str, path: Value| {
        json!({
            "matches": [{"path": {"type": "PathPrefix", "value": prefix}}],
            "backendRefs": [{"name": "web", "port": 80, "filters": rewrite(path)}],
        })
    };
    let served = serve(http_route(
        "backend-rewrite",
        json!({
            "parentRefs": [{"name": "edge"}],
            "hostnames": ["app.example.com"],
            "rules": [
                rule("/full", json!({"type": "ReplaceFullPath", "replaceFullPath": "/echo/full"})),
                rule("/prefix", json!({"type": "ReplacePrefixMatch", "replacePrefixMatch": "/echo"})),
            ],
        }),
    ))
    .await;
    let mut client = Client::connect(served.h.http()).await;
    for (path, upstream) in [
        ("/full/one?x=1", "/echo/full"),
        ("/prefix/two", "/echo/two"),
        ("/prefix", "/echo"),
    ] {
        let reply = client.get("app.example.com", path).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}: {}", reply.text());
        assert_eq!(reply.json()["path"], upstream, "{path}");
    }
}

#[tokio::test]
async fn an_unusable_backend_share_answers_500_and_the_others_serve() {
    let route = http_route(
        "broken",
        json!({
            "parentRefs": [{"name": "edge"}],
            "hostnames": ["broken.example.com"],
            "rules": [
                {"matches": [{"path": {"type": "PathPrefix", "value": "/gone"}}],
                 "backendRefs": [{"name": "no-such-service", "port": 80}]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/nothing"}}]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/half"}}],
                 "backendRefs": [{"name": "web", "port": 80},
                                 {"name": "web", "port": 81}]},
                {"backendRefs": [{"name": "web", "port": 80}]},
            ],
        }),
    );
    let (served, diagnostics) = serve_allowing_diagnostics(vec![route]).await;
    assert_eq!(diagnostics.len(), 2, "{diagnostics:?}");
    assert!(
        diagnostics.iter().any(|d| d.contains("no-such-service")),
        "{diagnostics:?}"
    );
    let mut client = Client::connect(served.h.http()).await;
    for path in ["/gone", "/nothing"] {
        let reply = client.get("broken.example.com", path).await;
        assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR, "{path}");
    }
    let reply = client.get("broken.example.com", "/echo").await;
    assert_eq!(reply.status, StatusCode::OK);
    // Half the requests to a split with an unusable share answer 500, the rest are served.
    let mut statuses = std::collections::BTreeMap::new();
    for _ in 0..100 {
        let reply = client.get("broken.example.com", "/half").await;
        *statuses.entry(reply.status.as_u16()).or_insert(0) += 1;
    }
    assert!(
        statuses.get(&500).copied().unwrap_or(0) > 20,
        "{statuses:?}"
    );
    assert!(
        statuses.get(&200).copied().unwrap_or(0) + statuses.get(&404).copied().unwrap_or(0) > 20,
        "{statuses:?}"
    );
}

/// Serves `extra` (no diagnostic allowed) and sends three requests, each answered by `web`.
async fn three_requests_to_web(extra: Vec<Value>) -> Served {
    let (served, diagnostics) = serve_allowing_diagnostics(extra).await;
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let mut client = Client::connect(served.h.http()).await;
    for _ in 0..3 {
        let reply = client.get("any.example.com", "/echo").await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.backend(), "web");
    }
    served
}

#[tokio::test]
async fn request_mirror_sends_a_copy_while_the_client_gets_the_route_s_answer() {
    let (mirror, counts) =
        start_fixed_backend(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n").await;
    let mut extra = vec![
        service("mirror", &[("http", 80)]),
        http_route(
            "mirrored",
            json!({
                "parentRefs": [{"name": "edge"}],
                "rules": [{
                    "filters": [{"type": "RequestMirror",
                                 "requestMirror": {"backendRef": {"name": "mirror", "port": 80}}}],
                    "backendRefs": [{"name": "web", "port": 80}],
                }],
            }),
        ),
    ];
    extra.extend(slices("mirror", &[mirror]));
    let _served = three_requests_to_web(extra).await;
    eventually_async(STEP, "the mirror got the three copies", || async {
        (counts.requests() == 3).then_some(())
    })
    .await;
}

/// Several RequestMirror filters on a rule: each mirror gets a copy of every request.
#[tokio::test]
async fn each_of_several_request_mirrors_gets_a_copy() {
    let answer = b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n";
    let (first, first_counts) = start_fixed_backend(answer).await;
    let (second, second_counts) = start_fixed_backend(answer).await;
    let mirror = |name: &str| {
        json!({"type": "RequestMirror",
               "requestMirror": {"backendRef": {"name": name, "port": 80}}})
    };
    let mut extra = vec![
        service("first", &[("http", 80)]),
        service("second", &[("http", 80)]),
        http_route(
            "mirrored",
            json!({
                "parentRefs": [{"name": "edge"}],
                "rules": [{
                    "filters": [mirror("first"), mirror("second")],
                    "backendRefs": [{"name": "web", "port": 80}],
                }],
            }),
        ),
    ];
    extra.extend(slices("first", &[first]));
    extra.extend(slices("second", &[second]));
    let _served = three_requests_to_web(extra).await;
    eventually_async(STEP, "each mirror got the three copies", || async {
        (first_counts.requests() == 3 && second_counts.requests() == 3).then_some(())
    })
    .await;
}

/// A host moved from an Ingress to an HTTPRoute under traffic: add the HTTPRoute (the
/// Ingress's rule wins the tie at `/`, the route's longer path is served at once), then delete
/// the Ingress (the host is no longer an Ingress server; only the Gateway rules remain). Not
/// one request fails on the way.
#[tokio::test]
async fn moving_a_host_from_an_ingress_to_an_http_route_fails_no_request() {
    let (old, new) = (start_backend("web").await, start_backend("v2").await);
    let leaf = TestCa::new().leaf(&["secure.example.com"]);
    let mut common = vec![
        gateway_class(),
        gateway(),
        tls_secret("secure-tls", &leaf),
        service("web", &[("http", 80)]),
        service("v2", &[("http", 80)]),
    ];
    common.extend(slices("web", &[addr_of(&old)]));
    common.extend(slices("v2", &[addr_of(&new)]));
    let legacy = annotated_site("legacy", "shop.example.com", "web", json!({}));
    let moving = http_route(
        "moving",
        json!({
            "parentRefs": [{"name": "edge", "sectionName": "http"}],
            "hostnames": ["shop.example.com"],
            "rules": [
                {"backendRefs": [{"name": "v2", "port": 80}]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/echo/new"}}],
                 "backendRefs": [{"name": "v2", "port": 80}]},
            ],
        }),
    );
    let with = |extra: &[&Value]| {
        let mut objects = common.clone();
        objects.extend(extra.iter().map(|o| (*o).clone()));
        objects
    };
    let mut h = Harness::start();
    h.apply(&with(&[&legacy]));
    let addr = h.http();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = tokio::spawn({
        let stop = stop.clone();
        async move {
            let mut client = KeepAliveClient::connect(addr).await;
            let mut seen = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let reply = client.get("shop.example.com", "/echo").await;
                assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
                seen.push(reply.backend());
            }
            seen
        }
    });
    let pause = || tokio::time::sleep(std::time::Duration::from_millis(100));
    pause().await;
    h.apply(&with(&[&legacy, &moving]));
    pause().await;
    // Both: `/` ties and stays the Ingress's; the route's longer path is already served.
    assert_eq!(
        get(addr, "shop.example.com", "/echo/new").await.backend(),
        "v2"
    );
    assert_eq!(
        get(addr, "shop.example.com", "/echo").await.backend(),
        "web"
    );
    h.apply(&with(&[&moving]));
    pause().await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let seen = load.await.expect("no request failed");
    assert!(seen.first().is_some_and(|b| b == "web"), "{seen:?}");
    assert!(seen.last().is_some_and(|b| b == "v2"), "{seen:?}");
    // Once moved, never back.
    let first_new = seen.iter().position(|b| b == "v2").unwrap();
    assert!(seen[first_new..].iter().all(|b| b == "v2"), "{seen:?}");
}

#[tokio::test]
async fn a_service_port_with_app_protocol_h2c_is_spoken_to_in_http2() {
    let upstream = start_h2c_upstream("h2").await;
    let mut h2 = service("h2", &[("http", 80)]);
    h2["spec"]["ports"][0]["appProtocol"] = json!("kubernetes.io/h2c");
    let mut extra = vec![
        h2,
        http_route(
            "h2",
            json!({
                "parentRefs": [{"name": "edge"}],
                "rules": [{"backendRefs": [{"name": "h2", "port": 80}]}],
            }),
        ),
    ];
    extra.extend(slices("h2", &[upstream]));
    let (served, diagnostics) = serve_allowing_diagnostics(extra).await;
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let reply = get(served.h.http(), "any.example.com", "/").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.text(), "h2");
    // A client with HTTP/2 prior knowledge (h2c) on the plain socket, as the conformance
    // suite's HTTPRouteBackendProtocolH2C sends: a Gateway's HTTP listener speaks it without
    // `use-h2c`.
    let stream = tokio::net::TcpStream::connect(served.h.http())
        .await
        .unwrap();
    let mut client = H2Client::over(stream).await;
    let reply = client.get("http://any.example.com/").await;
    assert_eq!(
        (reply.status, reply.version),
        (StatusCode::OK, http::Version::HTTP_2)
    );
    assert_eq!(reply.text(), "h2");
}

#[tokio::test]
async fn the_cors_filter_answers_preflights_by_gateway_api_rules() {
    let cors = |path: &str, cors: Value| {
        json!({"matches": [{"path": {"type": "PathPrefix", "value": path}}],
               "filters": [{"type": "CORS", "cors": cors}],
               "backendRefs": [{"name": "web", "port": 80}]})
    };
    let served = serve(http_route(
        "cors",
        json!({
            "parentRefs": [{"name": "edge", "sectionName": "http"}],
            "rules": [
                cors("/echo/listed", json!({
                    "allowOrigins": ["https://www.foo.com", "https://*.bar.com"],
                    "allowMethods": ["GET", "OPTIONS"], "allowHeaders": ["x-a", "x-b"],
                    "exposeHeaders": ["x-c"], "allowCredentials": true, "maxAge": 3600})),
                cors("/echo/any", json!({"allowOrigins": ["*"], "allowMethods": ["*"],
                                    "allowHeaders": ["*"], "allowCredentials": true})),
            ],
        }),
    ))
    .await;
    let h = &served.h;
    let mut client = Client::connect(h.http()).await;
    let send = |method: &str, path: &str, headers: &[(&str, &str)]| {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header("host", "cors.example.com");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(Default::default()).unwrap()
    };
    let header = |reply: &Reply, name: &str| {
        reply
            .headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };

    // A preflight from a listed origin, and from one matched by `*.` two labels deep.
    for origin in ["https://www.foo.com", "https://xpto.www.bar.com"] {
        let preflight = send(
            "OPTIONS",
            "/echo/listed",
            &[("origin", origin), ("access-control-request-method", "GET")],
        );
        let reply = client.send(preflight).await.unwrap();
        assert_eq!(reply.status, StatusCode::NO_CONTENT, "{origin}");
        assert_eq!(
            header(&reply, "access-control-allow-origin").as_deref(),
            Some(origin)
        );
        assert_eq!(
            header(&reply, "access-control-allow-methods").as_deref(),
            Some("GET, OPTIONS")
        );
        assert_eq!(
            header(&reply, "access-control-allow-headers").as_deref(),
            Some("x-a, x-b")
        );
        assert_eq!(
            header(&reply, "access-control-expose-headers").as_deref(),
            Some("x-c")
        );
        assert_eq!(
            header(&reply, "access-control-max-age").as_deref(),
            Some("3600")
        );
        assert_eq!(
            header(&reply, "access-control-allow-credentials").as_deref(),
            Some("true")
        );
    }
    // A preflight from an origin not listed is answered here too, with no CORS header.
    let reply = client
        .send(send(
            "OPTIONS",
            "/echo/listed",
            &[
                ("origin", "https://foobar.com"),
                ("access-control-request-method", "GET"),
            ],
        ))
        .await
        .unwrap();
    assert_eq!(header(&reply, "access-control-allow-origin"), None);
    assert_eq!(reply.status, StatusCode::NO_CONTENT, "{}", reply.text());
    // An OPTIONS that is no preflight (no method asked for) goes to the backend.
    let reply = client
        .send(send(
            "OPTIONS",
            "/echo/listed",
            &[("origin", "https://www.foo.com")],
        ))
        .await
        .unwrap();
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert!(reply.text().contains("\"OPTIONS\""), "{}", reply.text());
    // An actual request: the origin, credentials and exposed headers, on the backend's answer.
    let reply = client
        .send(send(
            "GET",
            "/echo/listed",
            &[("origin", "https://www.foo.com")],
        ))
        .await
        .unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    assert!(reply.text().contains("\"web\""), "{}", reply.text());
    assert_eq!(
        header(&reply, "access-control-allow-origin").as_deref(),
        Some("https://www.foo.com")
    );
    assert_eq!(
        header(&reply, "access-control-expose-headers").as_deref(),
        Some("x-c")
    );
    assert_eq!(header(&reply, "access-control-allow-methods"), None);
    // `*` with credentials: the origin, the method and the headers asked for, echoed.
    let preflight = send(
        "OPTIONS",
        "/echo/any",
        &[
            ("origin", "https://other.foo.com"),
            ("access-control-request-method", "PUT"),
            ("access-control-request-headers", "x-header-1, x-header-2"),
        ],
    );
    let reply = client.send(preflight).await.unwrap();
    assert_eq!(reply.status, StatusCode::NO_CONTENT);
    assert_eq!(
        header(&reply, "access-control-allow-origin").as_deref(),
        Some("https://other.foo.com")
    );
    assert_eq!(
        header(&reply, "access-control-allow-methods").as_deref(),
        Some("PUT")
    );
    assert_eq!(
        header(&reply, "access-control-allow-headers").as_deref(),
        Some("x-header-1, x-header-2")
    );
    assert_eq!(
        header(&reply, "access-control-max-age").as_deref(),
        Some("5")
    );
}

#[tokio::test]
async fn a_cors_filter_with_a_bad_origin_refuses_its_rule_and_names_the_field() {
    let (served, diagnostics) = serve_allowing_diagnostics(vec![http_route(
        "bad-cors",
        json!({
            "parentRefs": [{"name": "edge", "sectionName": "http"}],
            "rules": [{"filters": [{"type": "CORS", "cors": {"allowOrigins": ["www.foo.com"]}}],
                       "backendRefs": [{"name": "web", "port": 80}]}],
        }),
    )])
    .await;
    assert!(
        diagnostics
            .iter()
            .any(|d| d.contains("spec.rules[0].filters[0].cors.allowOrigins[0]")),
        "{diagnostics:?}"
    );
    let mut client = Client::connect(served.h.http()).await;
    let reply = client.get("cors.example.com", "/").await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
}

/// `percent` and `fraction`: a share of the requests is copied, drawn per request (none at 0,
/// all at 100; about half at 25/50, bounds far outside what chance gives in 200 draws).
#[tokio::test]
async fn a_mirror_percent_or_fraction_copies_that_share_of_the_requests() {
    let mut mirrors = Vec::new();
    let mut extra = Vec::new();
    let shares = [
        ("none", json!({"percent": 0})),
        (
            "half",
            json!({"fraction": {"numerator": 25, "denominator": 50}}),
        ),
        ("all", json!({"percent": 100})),
    ];
    for (name, share) in &shares {
        let (mirror, counts) =
            start_fixed_backend(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n").await;
        let service_name = format!("mirror-{name}");
        let mut request_mirror = json!({"backendRef": {"name": service_name, "port": 80}});
        request_mirror
            .as_object_mut()
            .unwrap()
            .extend(share.as_object().unwrap().clone());
        extra.push(service(&service_name, &[("http", 80)]));
        extra.extend(slices(&service_name, &[mirror]));
        extra.push(http_route(
            &format!("mirrored-{name}"),
            json!({
                "parentRefs": [{"name": "edge"}],
                "hostnames": [format!("{name}.example.com")],
                "rules": [{
                    "filters": [{"type": "RequestMirror", "requestMirror": request_mirror}],
                    "backendRefs": [{"name": "web", "port": 80}],
                }],
            }),
        ));
        mirrors.push(counts);
    }
    let (served, diagnostics) = serve_allowing_diagnostics(extra).await;
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let mut client = Client::connect(served.h.http()).await;
    const REQUESTS: usize = 200;
    for (name, _) in &shares {
        for _ in 0..REQUESTS {
            let reply = client.get(&format!("{name}.example.com"), "/echo").await;
            assert_eq!(reply.status, StatusCode::OK);
        }
    }
    // The routes were asked in order: when the last one's copies have all arrived, the
    // others' have too.
    eventually_async(STEP, "every copy of the 100% mirror arrived", || async {
        (mirrors[2].requests() == REQUESTS).then_some(())
    })
    .await;
    assert_eq!(mirrors[0].requests(), 0);
    let half = mirrors[1].requests();
    assert!(
        (50..=150).contains(&half),
        "{half} of {REQUESTS} copied at 25/50"
    );
}

/// A backendRef's own RequestHeaderModifier applies to its share only, on top of the rule's.
#[tokio::test]
async fn a_backend_ref_s_header_filters_apply_to_its_share_only() {
    let set = |value: &str| {
        json!([{"type": "RequestHeaderModifier",
                "requestHeaderModifier": {"set": [{"name": "x-backend", "value": value}]}}])
    };
    let served = serve(http_route(
        "split",
        json!({
            "parentRefs": [{"name": "edge", "sectionName": "http"}],
            "rules": [{
                "filters": [{"type": "RequestHeaderModifier",
                             "requestHeaderModifier": {"set": [{"name": "x-rule", "value": "both"}]}}],
                "backendRefs": [
                    {"name": "web", "port": 80, "weight": 1, "filters": set("web")},
                    {"name": "v2", "port": 80, "weight": 1, "filters": set("v2")},
                ],
            }],
        }),
    ))
    .await;
    let mut client = Client::connect(served.h.http()).await;
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..40 {
        let reply = client.get("split.example.com", "/echo").await;
        assert_eq!(reply.status, StatusCode::OK);
        let echo: Value = serde_json::from_str(&reply.text()).unwrap();
        let backend = reply.backend();
        assert_eq!(echo["headers"]["x-backend"], backend, "{echo}");
        assert_eq!(echo["headers"]["x-rule"], "both", "{echo}");
        seen.insert(backend.to_owned());
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
}

/// `sessionPersistence` (Cookie, Permanent): the first answer sets the cookie (its name,
/// Max-Age from absoluteTimeout, Path `/`); a client sending it back stays on its share of
/// the weighted backendRefs and its endpoint; a client without it is drawn by the weights.
#[tokio::test]
async fn session_persistence_keeps_a_client_on_its_share() {
    let served = serve(http_route(
        "shop",
        json!({
            "parentRefs": [{"name": "edge", "port": 80}],
            "hostnames": ["shop.example.com"],
            "rules": [{
                "backendRefs": [{"name": "web", "port": 80, "weight": 1},
                                {"name": "v2", "port": 80, "weight": 1}],
                "sessionPersistence": {
                    "absoluteTimeout": "1h",
                    "cookie": {"name": "shop-session", "lifetimeType": "Permanent"},
                },
            }],
        }),
    ))
    .await;
    let mut client = Client::connect(served.h.http()).await;
    let mut pinned = std::collections::BTreeMap::new();
    for _ in 0..40 {
        let reply = client.get("shop.example.com", "/echo").await;
        assert_eq!(reply.status, StatusCode::OK);
        let set_cookie = reply.headers["set-cookie"].to_str().unwrap().to_owned();
        assert!(set_cookie.starts_with("shop-session="), "{set_cookie}");
        assert!(set_cookie.contains("; Max-Age=3600"), "{set_cookie}");
        assert!(set_cookie.contains("; Path=/"), "{set_cookie}");
        let cookie = set_cookie.split(';').next().unwrap().to_owned();
        pinned.entry(reply.backend()).or_insert(cookie);
    }
    // Without a cookie the weights decide: both shares were drawn.
    assert_eq!(pinned.len(), 2, "{pinned:?}");
    for (backend, cookie) in &pinned {
        for _ in 0..20 {
            let request = Request::get("/echo")
                .header("host", "shop.example.com")
                .header("cookie", cookie)
                .body(Default::default())
                .unwrap();
            let reply = client.send(request).await.unwrap();
            assert_eq!(reply.status, StatusCode::OK);
            assert_eq!(&reply.backend(), backend, "{cookie}");
            assert!(
                !reply.headers.contains_key("set-cookie"),
                "kept: no new cookie"
            );
        }
    }
}
