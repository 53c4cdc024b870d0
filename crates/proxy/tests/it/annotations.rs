//! ingress-nginx annotations end to end: each behaviour class of the route policy model,
//! through real sockets (redirects, rewrite and regex order, limits and retries, allow/deny,
//! snippets, the upstream request, and diagnostics for what Sluice does not implement).

use std::sync::Arc;

use crate::support::*;
use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, StatusCode};
use http_body_util::Full;
use model::policy::{HeaderAction, HeaderEdit};
use model::routes::Route;
use model::Compiled;
use serde_json::{json, Value};

/// One host, one path to `web`.
fn site(name: &str, host: &str, p: &str, kind: &str, annotations: &[(&str, &str)]) -> Value {
    annotated(
        name,
        annotations,
        json!({"rules": [rule(host, vec![path(p, kind, to("web"))])]}),
    )
}

/// The `web` Service and its backends.
fn web(backends: &[&backend::Backend]) -> Vec<Value> {
    let addrs: Vec<_> = backends.iter().map(|b| addr_of(b)).collect();
    let mut objects = vec![service("web", &[("http", 80)])];
    objects.extend(slices("web", &addrs));
    objects
}

/// Puts header edits into every route of `host`, past the translator (which refuses edits of
/// framing headers): the proxy must frame messages itself whatever the model says.
fn with_edits(
    compiled: &mut Compiled,
    host: &str,
    request: &[HeaderEdit],
    response: &[HeaderEdit],
) {
    for (pattern, routes) in compiled.routes.hosts_mut() {
        if pattern.to_string() != host {
            continue;
        }
        for path in &mut routes.paths {
            let route = &path.route;
            let mut policy = (*route.policy).clone();
            policy.request_headers = request.into();
            policy.response_headers = response.into();
            path.route = Arc::new(Route {
                ingress: route.ingress.clone(),
                service: route.service.clone(),
                backend: route.backend.clone(),
                policy: Arc::new(policy),
                site: route.site.clone(),
                traffic: None,
                not_found: false,
            });
        }
    }
}

fn set(name: &'static str, value: &'static str) -> HeaderEdit {
    HeaderEdit {
        name: HeaderName::from_static(name),
        action: HeaderAction::Set(HeaderValue::from_static(value)),
    }
}

fn location(reply: &Reply) -> &str {
    reply.headers["location"].to_str().unwrap()
}

#[tokio::test]
async fn redirects_answer_without_an_upstream() {
    let ca = TestCa::new();
    let leaf = ca.leaf(&["secure.example.com"]);
    let backend = start_backend("web").await;
    let mut h = Harness::start();
    let mut objects = web(&[&backend]);
    objects.extend([
        settings(&[("http-redirect-code", "301")]),
        tls_secret("secure-tls", &leaf),
        annotated(
            "secure",
            &[],
            json!({
                "tls": [{"hosts": ["secure.example.com"], "secretName": "secure-tls"}],
                "rules": [rule("secure.example.com", vec![path("/", "Prefix", to("web"))])],
            }),
        ),
        annotated(
            "secure-no-redirect",
            &[("ssl-redirect", "false")],
            json!({
                "tls": [{"hosts": ["open.example.com"], "secretName": "secure-tls"}],
                "rules": [rule("open.example.com", vec![path("/", "Prefix", to("web"))])],
            }),
        ),
        site(
            "forced",
            "forced.example.com",
            "/",
            "Prefix",
            &[
                ("force-ssl-redirect", "true"),
                ("preserve-trailing-slash", "true"),
            ],
        ),
        site(
            "moved",
            "moved.example.com",
            "/",
            "Prefix",
            &[
                ("permanent-redirect", "https://new.example.com/landing"),
                ("permanent-redirect-code", "308"),
            ],
        ),
        site(
            "maintenance",
            "temp.example.com",
            "/",
            "Prefix",
            &[("temporal-redirect", "https://status.example.com/")],
        ),
        site(
            "shop",
            "shop.example.com",
            "/",
            "Prefix",
            &[("app-root", "/store")],
        ),
        site(
            "www",
            "example.com",
            "/",
            "Prefix",
            &[("from-to-www-redirect", "true")],
        ),
    ]);
    h.apply_allowing_diagnostics(&objects);
    let http = h.http();

    // ssl-redirect (on by default, code from http-redirect-code); the trailing slash of the
    // target is dropped, as ingress-nginx does unless preserve-trailing-slash.
    let reply = get(http, "secure.example.com", "/cart/").await;
    assert_eq!(reply.status, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(location(&reply), "https://secure.example.com/cart");
    let reply = get(http, "open.example.com", "/echo").await;
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "ssl-redirect: false serves plain HTTP"
    );
    let reply = get(http, "forced.example.com", "/a/").await;
    assert_eq!(reply.status, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(location(&reply), "https://forced.example.com/a/");

    let reply = get(http, "moved.example.com", "/anything?x=1").await;
    assert_eq!(reply.status, StatusCode::PERMANENT_REDIRECT);
    assert_eq!(location(&reply), "https://new.example.com/landing");
    let reply = get(http, "temp.example.com", "/x").await;
    assert_eq!(reply.status, StatusCode::FOUND);
    assert_eq!(location(&reply), "https://status.example.com/");

    let reply = get(http, "shop.example.com", "/").await;
    assert_eq!(reply.status, StatusCode::FOUND);
    assert_eq!(location(&reply), "http://shop.example.com/store");
    let reply = get(http, "shop.example.com", "/store/echo").await;
    assert_eq!(
        reply.status,
        StatusCode::NOT_FOUND,
        "only / is sent to app-root"
    );

    let reply = get(http, "www.example.com", "/a/b/").await;
    assert_eq!(reply.status, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(
        location(&reply),
        format!("http://example.com:{}/a/b", http.port())
    );
    assert_eq!(get(http, "example.com", "/echo").await.backend(), "web");
}

/// Issue 24 item 10: behind a trusted load balancer that terminated TLS, the www redirect
/// names https and the HTTPS listener's port, not the plain listener's.
#[tokio::test]
async fn the_www_redirect_behind_a_trusted_tls_terminator_names_the_https_port() {
    let backend = start_backend("web").await;
    let mut h = Harness::start();
    let mut objects = web(&[&backend]);
    objects.extend([
        settings(&[
            ("use-forwarded-headers", "true"),
            ("proxy-real-ip-cidr", "127.0.0.1/32"),
        ]),
        site(
            "www",
            "example.com",
            "/",
            "Prefix",
            &[("from-to-www-redirect", "true")],
        ),
    ]);
    h.apply_allowing_diagnostics(&objects);
    let request = Request::get("/a/b/?q=1")
        .header("host", "www.example.com")
        .header("x-forwarded-proto", "https")
        .body(Full::<Bytes>::default())
        .unwrap();
    let reply = Client::connect(h.http()).await.send(request).await.unwrap();
    assert_eq!(reply.status, StatusCode::PERMANENT_REDIRECT);
    assert_eq!(
        location(&reply),
        format!("https://example.com:{}/a/b/?q=1", h.https().port())
    );
    let reply = get(h.http(), "www.example.com", "/a").await;
    assert_eq!(
        location(&reply),
        format!("http://example.com:{}/a", h.http().port())
    );
}

#[tokio::test]
async fn rewrite_target_uses_the_path_captures_and_regex_paths_follow_ingress_nginx_order() {
    let (a, b, c) = (
        start_backend("a").await,
        start_backend("b").await,
        start_backend("c").await,
    );
    let mut h = Harness::start();
    let mut objects = vec![
        service("svc-a", &[("http", 80)]),
        service("svc-b", &[("http", 80)]),
        service("svc-c", &[("http", 80)]),
        // The example of ingress-nginx's path-matching docs: regex paths, longest first.
        annotated(
            "plain",
            &[],
            json!({"rules": [rule("test.com", vec![path("/echo/bar", "Prefix", to("svc-a"))])]}),
        ),
        annotated(
            "regex",
            &[("use-regex", "true")],
            json!({"rules": [rule("test.com", vec![path("/echo/bar/.+", "ImplementationSpecific", to("svc-b"))])]}),
        ),
        annotated(
            "rewrite",
            &[
                ("rewrite-target", "/echo/$2"),
                ("x-forwarded-prefix", "/something"),
            ],
            json!({"rules": [rule("rewrite.example.com", vec![
                path("/something(/|$)(.*)", "ImplementationSpecific", to("svc-c")),
            ])]}),
        ),
    ];
    objects.extend(slices("svc-a", &[addr_of(&a)]));
    objects.extend(slices("svc-b", &[addr_of(&b)]));
    objects.extend(slices("svc-c", &[addr_of(&c)]));
    h.apply_allowing_diagnostics(&objects);
    let http = h.http();

    let reply = get(http, "test.com", "/echo/bar/1").await;
    assert_eq!(reply.backend(), "b", "the longer regex first");
    assert_eq!(get(http, "test.com", "/echo/bar").await.backend(), "a");
    // The traps: anchored at the start only, and the other Ingress's Prefix path became a
    // regex too (case-insensitivity: the rewrite below).
    let reply = get(http, "test.com", "/echo/barbaz").await;
    assert_eq!(
        reply.backend(),
        "a",
        "^/echo/bar matches /echo/barbaz on a regex host"
    );

    let reply = get(http, "rewrite.example.com", "/something/new/path?q=1").await;
    let echo = reply.json();
    assert_eq!(echo["backend"], "c");
    assert_eq!(echo["path"], "/echo/new/path");
    assert_eq!(echo["query"], "q=1", "the client's query is kept");
    assert_eq!(echo["headers"]["x-forwarded-prefix"], "/something");
    let echo = get(http, "rewrite.example.com", "/SOMETHING").await.json();
    assert_eq!(echo["path"], "/echo/");
    let reply = get(http, "rewrite.example.com", "/somethingelse").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
}

/// Issue 24 item 6: what a capture holds (decoded by routing) cannot end the rewritten path,
/// replace the template's query, or climb out of the template's fixed prefix.
#[tokio::test]
async fn rewrite_target_captures_cannot_escape_the_template() {
    let backend = start_backend("web").await;
    let mut h = Harness::start();
    let mut objects = web(&[&backend]);
    objects.extend([
        // ingress-nginx's rewrite docs pattern (under /echo, so the backend reports it).
        site(
            "docs",
            "docs.example.com",
            "/something(/|$)(.*)",
            "ImplementationSpecific",
            &[("rewrite-target", "/echo/public/$2?lang=en")],
        ),
        site(
            "files",
            "files.example.com",
            "/x(.*)",
            "ImplementationSpecific",
            &[("rewrite-target", "/echo/public/$1")],
        ),
    ]);
    h.apply_allowing_diagnostics(&objects);
    let http = h.http();

    // `%3F%22`: was split into path `/echo/public/` and query `"`, refused by the request
    // line and replaced by `/` (the backend's root).
    let reply = get(http, "docs.example.com", "/something/%3F%22").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let echo = reply.json();
    assert_eq!(echo["path"], "/echo/public/%3F%22");
    assert_eq!(echo["query"], "lang=en");
    // `%3F…%23`: was the query, in place of the template's own.
    let echo = get(http, "docs.example.com", "/something/%3Fadmin=1%23?q=1")
        .await
        .json();
    assert_eq!(echo["path"], "/echo/public/%3Fadmin=1%23");
    assert_eq!(echo["query"], "lang=en&q=1");

    // `x..` is no dot segment for routing; `/echo/public/` + `../private/…` would be one.
    for attack in ["/x../private/secret.txt", "/x%2e%2e/private/secret.txt"] {
        let reply = get(http, "files.example.com", attack).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{attack}: {}",
            reply.text()
        );
    }
    assert_metric(
        &h,
        "sluice_error_responses_total{status=\"400\",source=\"client\"} 2",
    )
    .await;
    let echo = get(http, "files.example.com", "/x/a/../b").await.json();
    assert_eq!(echo["path"], "/echo/public/b");
}

#[tokio::test]
async fn body_limits_timeouts_and_retries_are_per_route() {
    let good = start_backend("good").await;
    let mut h = Harness::start();
    let dead = closed_port();
    let mut objects = vec![
        service("web", &[("http", 80)]),
        service("flaky", &[("http", 80)]),
        site(
            "small",
            "small.example.com",
            "/",
            "Prefix",
            &[("proxy-body-size", "1k")],
        ),
        site(
            "unlimited",
            "big.example.com",
            "/",
            "Prefix",
            &[("proxy-body-size", "0")],
        ),
        site(
            "impatient",
            "slow.example.com",
            "/",
            "Prefix",
            &[("proxy-read-timeout", "1")],
        ),
        annotated(
            "no-retry",
            &[("proxy-next-upstream", "off")],
            json!({"rules": [rule("once.example.com", vec![path("/", "Prefix", to("flaky"))])]}),
        ),
        annotated(
            "retry",
            &[("proxy-next-upstream-tries", "0")],
            json!({"rules": [rule("retry.example.com", vec![path("/", "Prefix", to("flaky"))])]}),
        ),
    ];
    objects.extend(slices("web", &[addr_of(&good)]));
    objects.extend(slices("flaky", &[dead, addr_of(&good)]));
    h.apply(&objects);
    let http = h.http();

    let post = |host: &str, size: usize| {
        Request::post("/echo")
            .header("host", host)
            .body(Full::new(Bytes::from(vec![b'x'; size])))
            .unwrap()
    };
    let mut client = Client::connect(http).await;
    let reply = client.send(post("small.example.com", 2048)).await.unwrap();
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    let mut client = Client::connect(http).await;
    let reply = client
        .send(post("big.example.com", 3 * 1024 * 1024))
        .await
        .unwrap();
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "proxy-body-size: 0 is no limit"
    );
    assert_eq!(reply.json()["body_bytes"], 3 * 1024 * 1024);

    let reply = get(http, "slow.example.com", "/slow?ms=3000").await;
    assert_eq!(reply.status, StatusCode::GATEWAY_TIMEOUT);
    let reply = get(http, "small.example.com", "/slow?ms=1200").await;
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "the default read timeout is 60 s"
    );

    // Round robin starts somewhere in [dead, good]: of a few requests, one meets the dead
    // endpoint first. With retries off it fails; with retries on none do.
    let mut failed = 0;
    for _ in 0..4 {
        if get(http, "once.example.com", "/echo").await.status == StatusCode::BAD_GATEWAY {
            failed += 1;
        }
    }
    assert!(
        failed >= 1,
        "proxy-next-upstream: off never retried, so some failed"
    );
    for _ in 0..4 {
        assert_eq!(
            get(http, "retry.example.com", "/echo").await.backend(),
            "good"
        );
    }
}

#[tokio::test]
async fn a_status_listed_in_proxy_next_upstream_goes_to_the_next_endpoint() {
    let (a, b) = (start_backend("a").await, start_backend("b").await);
    let mut h = Harness::start();
    let mut objects = vec![
        service("web", &[("http", 80)]),
        // Both endpoints answer /status/503 with 503: the retry asks the other, and the last
        // answer is passed on.
        site(
            "retry-503",
            "retry.example.com",
            "/",
            "Prefix",
            &[("proxy-next-upstream", "error timeout http_503")],
        ),
        site("no-status-retry", "plain.example.com", "/", "Prefix", &[]),
    ];
    objects.extend(slices("web", &[addr_of(&a), addr_of(&b)]));
    h.apply(&objects);
    let http = h.http();
    let metrics = || async { get(h.admin(), "admin", "/metrics").await.text() };
    let retries = |text: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with("sluice_upstream_retries_total"))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|n| n.parse().ok())
            .expect("sluice_upstream_retries_total")
    };
    let before = retries(&metrics().await);
    let reply = get(http, "plain.example.com", "/status/503").await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    let reply = get(http, "retry.example.com", "/status/503").await;
    assert_eq!(
        reply.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "the last answer"
    );
    eventually_async(STEP, "one retry for http_503", || async {
        retries(&metrics().await) == before + 1.0
    })
    .await;
    // A 200 is not retried, and the route without http_503 did not retry either: the total
    // stays at one.
    assert_eq!(
        get(http, "retry.example.com", "/echo").await.status,
        StatusCode::OK
    );
    assert_eq!(retries(&metrics().await), before + 1.0);
}

#[tokio::test]
async fn allow_and_deny_lists_are_checked_on_the_client_address() {
    let backend = start_backend("web").await;
    let mut h = Harness::start();
    let mut objects = web(&[&backend]);
    objects.extend([
        site(
            "office",
            "office.example.com",
            "/",
            "Prefix",
            &[("whitelist-source-range", "10.0.0.0/8, 192.168.0.0/16")],
        ),
        site(
            "local",
            "local.example.com",
            "/",
            "Prefix",
            &[("allowlist-source-range", "127.0.0.1/32")],
        ),
        site(
            "blocked",
            "blocked.example.com",
            "/",
            "Prefix",
            &[("denylist-source-range", "127.0.0.0/8")],
        ),
        site(
            "broken",
            "broken.example.com",
            "/",
            "Prefix",
            &[("whitelist-source-range", "10.0.0.0/33")],
        ),
    ]);
    let compiled = h.apply_allowing_diagnostics(&objects);
    assert_eq!(compiled.diagnostics.len(), 1, "{:?}", compiled.diagnostics);
    let http = h.http();
    assert_eq!(
        get(http, "office.example.com", "/echo").await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        get(http, "local.example.com", "/echo").await.backend(),
        "web"
    );
    assert_eq!(
        get(http, "blocked.example.com", "/echo").await.status,
        StatusCode::FORBIDDEN
    );
    let reply = get(http, "broken.example.com", "/echo").await;
    assert_eq!(
        reply.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "an unreadable allow-list refuses, never opens"
    );
    let metrics = get(h.admin(), "admin", "/metrics").await.text();
    assert!(
        metrics.contains("sluice_error_responses_total{status=\"503\",source=\"config\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn authentication_that_cannot_be_used_refuses_its_ingress_and_no_other() {
    let backend = start_backend("web").await;
    let mut h = Harness::start();
    let mut objects = web(&[&backend]);
    objects.extend([
        site(
            "basic",
            "basic.example.com",
            "/",
            "Prefix",
            &[("auth-type", "basic"), ("auth-secret", "htpasswd")],
        ),
        site(
            "external",
            "external.example.com",
            "/",
            "Prefix",
            &[("auth-url", "http://auth_server.example.com/check")],
        ),
        site(
            "mtls",
            "mtls.example.com",
            "/",
            "Prefix",
            &[("auth-tls-secret", "default/client-ca")],
        ),
        site("open", "open.example.com", "/", "Prefix", &[]),
    ]);
    // A Secret that does not exist, an auth server whose host is no DNS name, client certificates:
    // each refuses its own Ingress's routes, never opens them.
    let compiled = h.apply_allowing_diagnostics(&objects);
    let said = |text: &str| {
        compiled
            .diagnostics
            .iter()
            .any(|d| d.to_string().contains(text))
    };
    assert!(
        said("Secret default/htpasswd not found"),
        "{:?}",
        compiled.diagnostics
    );
    assert!(said("invalid host"), "{:?}", compiled.diagnostics);
    assert!(said("auth-tls-secret"), "{:?}", compiled.diagnostics);
    let http = h.http();
    for host in ["basic", "external", "mtls"] {
        let reply = get(http, &format!("{host}.example.com"), "/echo").await;
        assert_eq!(
            reply.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{host}: authentication that cannot be used refuses, never opens"
        );
    }
    assert_eq!(
        get(http, "open.example.com", "/echo").await.backend(),
        "web"
    );
    let metrics = get(h.admin(), "admin", "/metrics").await.text();
    assert!(
        metrics.contains("sluice_error_responses_total{status=\"503\",source=\"config\"} 3"),
        "{metrics}"
    );
}

/// Snippet header values with nginx variables are made per request (ingress-nginx's users
/// write `proxy_set_header X-Original-Host $host` and the like); a variable Sluice does not
/// know before the request goes upstream refuses the Ingress, naming it.
#[tokio::test]
async fn snippet_header_values_with_nginx_variables_are_made_per_request() {
    let backend = start_backend("web").await;
    let mut h = Harness::start();
    let mut objects = web(&[&backend]);
    objects.extend([
        settings(&[
            ("allow-snippet-annotations", "true"),
            ("annotations-risk-level", "Critical"),
        ]),
        site(
            "vars",
            "vars.example.com",
            "/app",
            "Prefix",
            &[
                (
                    "configuration-snippet",
                    "proxy_set_header X-Original-Host $host;\nproxy_set_header X-Empty $http_x_none;\nmore_set_headers \"X-Seen: $request_method $request_uri from $remote_addr\";\nadd_header X-Req $request_id;",
                ),
                ("rewrite-target", "/echo"),
            ],
        ),
        site(
            "unknown",
            "unknown.example.com",
            "/",
            "Prefix",
            &[("configuration-snippet", "proxy_set_header X-Time $upstream_response_time;")],
        ),
    ]);
    let compiled = h.apply_allowing_diagnostics(&objects);
    assert_eq!(compiled.diagnostics.len(), 1, "{:?}", compiled.diagnostics);
    assert!(
        compiled.diagnostics[0]
            .reason
            .contains("$upstream_response_time"),
        "{:?}",
        compiled.diagnostics
    );
    let http = h.http();
    let request = http::Request::get("/app?q=1")
        .header("host", "Vars.Example.com:8080")
        .header("x-request-id", "rid-7")
        .body(http_body_util::Full::<bytes::Bytes>::default())
        .unwrap();
    let reply = Client::connect(http).await.send(request).await.unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    // The rewrite changed the path; $request_uri is still the client's.
    assert_eq!(reply.headers["x-seen"], "GET /app?q=1 from 127.0.0.1");
    assert_eq!(reply.headers["x-req"], "rid-7");
    let echo = reply.json();
    assert_eq!(echo["headers"]["x-original-host"], "vars.example.com");
    assert!(
        echo["headers"].get("x-empty").is_none(),
        "an empty value is not sent"
    );
    // Without an X-Request-ID the generated one is the upstream's too.
    let reply = get(http, "vars.example.com", "/app").await;
    let id = reply.headers["x-req"].to_str().unwrap().to_owned();
    assert_eq!(id.len(), 32);
    assert_eq!(reply.json()["headers"]["x-request-id"], id.as_str());
    assert_eq!(
        get(http, "unknown.example.com", "/echo").await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
}

#[tokio::test]
async fn snippets_translate_headers_and_refuse_the_rest() {
    let backend = start_backend("web").await;
    let mut h = Harness::start();
    let mut objects = web(&[&backend]);
    objects.extend([
        settings(&[
            ("allow-snippet-annotations", "true"),
            ("annotations-risk-level", "Critical"),
        ]),
        site(
            "headers",
            "headers.example.com",
            "/",
            "Prefix",
            &[
                (
                    "configuration-snippet",
                    "more_set_headers \"X-Frame-Options: DENY\";\nproxy_set_header X-Team checkout;\nmore_clear_headers Content-Type;",
                ),
                ("server-snippet", "add_header X-Served-By sluice;"),
                ("upstream-vhost", "internal.svc.local"),
            ],
        ),
        site(
            "refused",
            "refused.example.com",
            "/",
            "Prefix",
            &[("configuration-snippet", "rewrite ^ /x break;")],
        ),
    ]);
    let compiled = h.apply_allowing_diagnostics(&objects);
    assert!(compiled.diagnostics[0]
        .reason
        .contains("use the rewrite-target annotation instead"));
    let http = h.http();
    let reply = get(http, "headers.example.com", "/echo").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.headers["x-frame-options"], "DENY");
    assert_eq!(reply.headers["x-served-by"], "sluice");
    assert!(reply.headers.get("content-type").is_none());
    let echo = reply.json();
    assert_eq!(echo["headers"]["x-team"], "checkout");
    assert_eq!(echo["host"], "internal.svc.local", "upstream-vhost");
    assert_eq!(
        echo["headers"]["x-forwarded-host"], "headers.example.com",
        "X-Forwarded-Host keeps the client's host"
    );
    assert_eq!(
        get(http, "refused.example.com", "/echo").await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );

    // Snippets off with the risk level that allows them: the snippets are dropped and the
    // Ingresses served without them, as ingress-nginx's controller does (its webhook, like
    // Sluice's, refuses them).
    objects[2] = settings(&[("annotations-risk-level", "Critical")]);
    h.apply_allowing_diagnostics(&objects);
    let reply = get(http, "headers.example.com", "/echo").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(reply.headers.get("x-frame-options").is_none());
    assert!(reply.headers.get("x-served-by").is_none());
    assert!(reply.json()["headers"].get("x-team").is_none());
    assert_eq!(
        get(http, "refused.example.com", "/echo").await.status,
        StatusCode::OK
    );

    // The default risk level (High): ingress-nginx >= 1.12 serves no Ingress with a snippet
    // (rated Critical); here their routes answer 503.
    objects[2] = settings(&[("allow-snippet-annotations", "true")]);
    let compiled = h.apply_allowing_diagnostics(&objects);
    assert!(compiled.diagnostics.iter().any(|d| d.reason.contains(
        "ingress-nginx rates it Critical, above the ConfigMap's annotations-risk-level (High)"
    )));
    for host in ["headers.example.com", "refused.example.com"] {
        let status = get(http, host, "/echo").await.status;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{host}");
    }
}

#[tokio::test]
async fn header_edits_cannot_smuggle_a_request_onto_a_pooled_upstream_connection() {
    let backend = start_backend("web").await;
    // One worker: one upstream pool, which the attacker's and the victim's requests share.
    let mut h = Harness::with_workers(1);
    let mut objects = web(&[&backend]);
    objects.extend([
        site("attacker", "attacker.example.com", "/", "Prefix", &[]),
        site("chunked", "chunked.example.com", "/", "Prefix", &[]),
        site("victim", "victim.example.com", "/", "Prefix", &[]),
    ]);
    h.apply_edited(&objects, |compiled| {
        let length = [set("content-length", "0")];
        with_edits(compiled, "attacker.example.com", &length, &[]);
        let chunked = [set("transfer-encoding", "chunked")];
        let wrong_length = [set("content-length", "1")];
        with_edits(compiled, "chunked.example.com", &chunked, &wrong_length);
    });
    let http = h.http();

    // The body is a slow request: were it read as one, its answer would still be on the way
    // when the victim's request takes the pooled connection, and the victim would get it.
    let smuggled = "GET /slow?ms=2000 HTTP/1.1\r\nHost: attacker.example.com\r\n\r\n";
    let request = Request::post("/echo")
        .header("host", "attacker.example.com")
        .body(Full::new(Bytes::from_static(smuggled.as_bytes())))
        .unwrap();
    let reply = Client::connect(http).await.send(request).await.unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    let seen = reply.json();
    assert_eq!(seen["method"], "POST");
    assert_eq!(seen["body_bytes"], smuggled.len(), "{seen}");
    assert_eq!(
        seen["headers"]["content-length"],
        smuggled.len().to_string()
    );

    let victim = get(http, "victim.example.com", "/echo/victim").await;
    assert_eq!(victim.status, StatusCode::OK, "{}", victim.text());
    assert_eq!(victim.json()["path"], "/echo/victim", "{}", victim.text());

    // A Transfer-Encoding edit makes no CL+TE request; a response's Content-Length edit does
    // not desync the client's connection: the next request on it is answered whole.
    let mut client = Client::connect(http).await;
    for _ in 0..2 {
        let request = Request::post("/echo")
            .header("host", "chunked.example.com")
            .body(Full::new(Bytes::from_static(b"hello")))
            .unwrap();
        let reply = client.send(request).await.unwrap();
        let seen = reply.json();
        assert_eq!(seen["body_bytes"], 5, "{seen}");
        assert_eq!(seen["headers"]["content-length"], "5", "{seen}");
        assert!(seen["headers"].get("transfer-encoding").is_none(), "{seen}");
        assert_eq!(
            reply.headers["content-length"],
            reply.body.len().to_string()
        );
        let reply = client.get("chunked.example.com", "/echo/next").await;
        assert_eq!(reply.json()["path"], "/echo/next");
    }
}

#[tokio::test]
async fn unsupported_annotations_are_diagnostics_and_the_route_still_serves() {
    let backend = start_backend("web").await;
    let mut h = Harness::start();
    let mut objects = web(&[&backend]);
    objects.push(site(
        "canary",
        "canary.example.com",
        "/",
        "Prefix",
        &[
            ("http2-push-preload", "true"),
            ("global-rate-limit", "5"),
            ("rewrite-targte", "/"),
        ],
    ));
    let compiled = h.apply_allowing_diagnostics(&objects);
    let reasons: Vec<String> = compiled.diagnostics.iter().map(|d| d.to_string()).collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(
        reasons.iter().all(|r| r.contains("unsupported")),
        "{reasons:?}"
    );
    assert!(reasons
        .iter()
        .any(|r| r.contains("http2-push-preload: not supported")));
    assert!(reasons
        .iter()
        .any(|r| r.contains("rewrite-targte: unknown")));
    assert_eq!(
        get(h.http(), "canary.example.com", "/echo").await.backend(),
        "web"
    );
    let config = get(h.status(), "status", "/config").await.text();
    assert!(
        config.contains("global-rate-limit: not supported"),
        "{config}"
    );
    let metrics = get(h.admin(), "admin", "/metrics").await.text();
    assert!(
        metrics.contains("sluice_config_diagnostics{kind=\"Ingress\",severity=\"unsupported\"} 3"),
        "{metrics}"
    );
}

/// Service `web` with cluster IP 127.0.0.1 on `port` (no EndpointSlice), and an Ingress for
/// `vip.example.com` to it with `service-upstream`.
fn cluster_ip_site(port: u16) -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"clusterIP": "127.0.0.1", "ports": [{"name": "http", "port": port}]},
        }),
        site(
            "vip",
            "vip.example.com",
            "/",
            "Prefix",
            &[("service-upstream", "true")],
        ),
    ]
}

#[tokio::test]
async fn service_upstream_sends_to_the_cluster_ip() {
    let backend = start_backend("web").await;
    let addr = addr_of(&backend);
    let mut h = Harness::start();
    // No EndpointSlice at all: only the cluster IP (here the backend's loopback address).
    let mut objects = cluster_ip_site(addr.port());
    objects.push(site("pods", "pods.example.com", "/", "Prefix", &[]));
    h.apply(&objects);
    assert_eq!(
        get(h.http(), "vip.example.com", "/echo").await.backend(),
        "web"
    );
    assert_eq!(
        get(h.http(), "pods.example.com", "/echo").await.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "without service-upstream the (missing) endpoints are used"
    );
}

#[tokio::test]
async fn service_upstream_connections_are_pooled() {
    let (addr, counts) =
        start_fixed_backend(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await;
    // One worker: each worker has its own pool.
    let mut h = Harness::with_workers(1);
    h.apply(&cluster_ip_site(addr.port()));
    for _ in 0..3 {
        let reply = get(h.http(), "vip.example.com", "/").await;
        assert_eq!(reply.status, StatusCode::OK);
    }
    assert_eq!(
        counts.connections(),
        1,
        "every request opened its own connection to the cluster IP"
    );
}

#[tokio::test]
async fn behind_a_trusted_load_balancer_the_allow_list_sees_the_forwarded_client() {
    let backend = start_backend("web").await;
    let mut h = Harness::start();
    let mut objects = web(&[&backend]);
    objects.extend([
        settings(&[
            ("use-forwarded-headers", "true"),
            ("proxy-real-ip-cidr", "127.0.0.2/32"),
        ]),
        site(
            "office",
            "office.example.com",
            "/",
            "Prefix",
            &[("whitelist-source-range", "10.0.0.0/8")],
        ),
    ]);
    h.apply(&objects);
    let from = |source: [u8; 4], forwarded_for: &'static str| {
        let addr = h.http();
        async move {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket
                .bind(std::net::SocketAddr::from((source, 0)))
                .unwrap();
            let stream = bounded(socket.connect(addr)).await.unwrap();
            let mut client = Client::over(stream).await;
            let request = Request::get("/echo")
                .header("host", "office.example.com")
                .header("x-forwarded-for", forwarded_for)
                .body(Full::new(Bytes::new()))
                .unwrap();
            client.send(request).await.unwrap().status
        }
    };
    // The load balancer (127.0.0.2, trusted) says the client is 10.1.2.3: allowed.
    assert_eq!(from([127, 0, 0, 2], "10.1.2.3").await, StatusCode::OK);
    assert_eq!(
        from([127, 0, 0, 2], "192.0.2.7").await,
        StatusCode::FORBIDDEN
    );
    // An untrusted peer claiming the same is not believed.
    assert_eq!(
        from([127, 0, 0, 1], "10.1.2.3").await,
        StatusCode::FORBIDDEN
    );
}

/// The test application's name for itself in its `/` answer.
fn server_name(reply: &Reply) -> String {
    let text = reply.text();
    text.lines()
        .find_map(|l| l.strip_prefix("Server name: "))
        .unwrap_or_else(|| panic!("the backend names itself: {text}"))
        .to_owned()
}

#[tokio::test]
async fn upstream_hash_by_keeps_a_key_on_its_endpoint_and_moves_only_the_keys_of_one_that_leaves() {
    let (a, b, c) = (
        start_backend("a").await,
        start_backend("b").await,
        start_backend("c").await,
    );
    let mut h = Harness::with_workers(2);
    let keyed = site(
        "keyed",
        "hash.example.com",
        "/",
        "Prefix",
        &[("upstream-hash-by", "$arg_user")],
    );
    let mut objects = web(&[&a, &b, &c]);
    objects.push(keyed.clone());
    h.apply(&objects);
    let http = h.http();
    let owner = |user: u32| async move {
        let reply = get(http, "hash.example.com", &format!("/?user={user}")).await;
        assert_eq!(reply.status, StatusCode::OK);
        server_name(&reply)
    };
    let mut owners = Vec::new();
    for user in 0..60 {
        owners.push(owner(user).await);
    }
    // Every key stays on its endpoint, whichever worker or connection asks.
    for (user, first) in owners.iter().enumerate() {
        for _ in 0..2 {
            assert_eq!(&owner(user as u32).await, first, "user {user}");
        }
    }
    // The keys spread over all three.
    for name in ["a", "b", "c"] {
        let count = owners.iter().filter(|o| *o == name).count();
        assert!(count >= 5, "{name} owns {count} of 60 keys: {owners:?}");
    }

    // `c` leaves (the endpoint fast path): only its keys move, to the other two.
    let mut objects = web(&[&a, &b]);
    objects.push(keyed);
    h.update(&objects);
    for (user, before) in owners.iter().enumerate() {
        let after = owner(user as u32).await;
        if before == "c" {
            assert_ne!(after, "c", "user {user}");
        } else {
            assert_eq!(&after, before, "user {user} moved from {before} to {after}");
        }
    }
}

#[tokio::test]
async fn upstream_hash_by_subset_spreads_one_key_over_its_subset_and_no_further() {
    let backends = [
        start_backend("a").await,
        start_backend("b").await,
        start_backend("c").await,
        start_backend("d").await,
        start_backend("e").await,
    ];
    let mut h = Harness::with_workers(2);
    let mut objects = web(&backends.iter().collect::<Vec<_>>());
    objects.push(site(
        "subset",
        "subset.example.com",
        "/",
        "Prefix",
        &[
            ("upstream-hash-by", "$arg_user"),
            ("upstream-hash-by-subset", "true"),
            ("upstream-hash-by-subset-size", "3"),
        ],
    ));
    h.apply(&objects);
    let http = h.http();
    let mut servers = std::collections::BTreeMap::new();
    for _ in 0..60 {
        let reply = get(http, "subset.example.com", "/?user=7").await;
        assert_eq!(reply.status, StatusCode::OK);
        *servers.entry(server_name(&reply)).or_insert(0) += 1;
    }
    // One key: exactly its 3 endpoints (each missed 60 times running has odds of 1 in 10^10).
    assert_eq!(servers.len(), 3, "{servers:?}");
    // Another key has a subset of its own: over 20 keys, more than 3 endpoints take traffic.
    let mut all = std::collections::BTreeSet::new();
    for user in 0..20 {
        let reply = get(http, "subset.example.com", &format!("/?user={user}")).await;
        all.insert(server_name(&reply));
    }
    assert!(all.len() > 3, "{all:?}");
}

#[tokio::test]
async fn upstream_hash_by_with_a_variable_known_only_after_the_upstream_is_refused() {
    let backend = start_backend("web").await;
    let mut h = Harness::start();
    let mut objects = web(&[&backend]);
    objects.push(site(
        "late",
        "late.example.com",
        "/",
        "Prefix",
        &[("upstream-hash-by", "$upstream_status")],
    ));
    let compiled = h.apply_allowing_diagnostics(&objects);
    assert!(
        compiled
            .diagnostics
            .iter()
            .any(|d| d.reason.contains("upstream-hash-by")
                && d.reason
                    .contains("not known before the request goes upstream")),
        "{:?}",
        compiled.diagnostics
    );
    // The route is served with the ConfigMap's load-balance.
    assert_eq!(
        get(h.http(), "late.example.com", "/").await.status,
        StatusCode::OK
    );
}

/// The upstream's redirects and cookies rewritten as nginx's `proxy_redirect` /
/// `proxy_cookie_*`: prefix (case-sensitive) for the URL and path, whole and case-insensitive
/// for the domain; another route of the same backend is left as the upstream sent it.
#[tokio::test]
async fn proxy_redirect_and_cookie_rewrites_change_the_upstreams_headers() {
    const ANSWER: &[u8] = b"HTTP/1.1 302 Found\r\n\
        Location: http://backend.internal:8080/app/next?x=1\r\n\
        Refresh: 3; URL=http://backend.internal:8080/app/later\r\n\
        Set-Cookie: s=1; PATH=/app/inner; Domain=.Backend.Internal; HttpOnly\r\n\
        Set-Cookie: t=2; path=/other/; domain=elsewhere.example\r\n\
        Content-Length: 0\r\n\r\n";
    let (addr, _) = start_fixed_backend(ANSWER).await;
    let mut h = Harness::start();
    let mut objects = vec![
        service("web", &[("http", 80)]),
        site(
            "rewritten",
            "rewritten.example.com",
            "/",
            "Prefix",
            &[
                ("proxy-redirect-from", "http://backend.internal:8080/app/"),
                ("proxy-redirect-to", "https://rewritten.example.com/"),
                ("proxy-cookie-path", "/app/ /"),
                (
                    "proxy-cookie-domain",
                    "backend.internal rewritten.example.com",
                ),
            ],
        ),
        // ingress-nginx's template writes `proxy_redirect default` here: nothing an upstream
        // sends is rewritten.
        site(
            "default",
            "default.example.com",
            "/",
            "Prefix",
            &[
                ("proxy-redirect-from", "default"),
                ("proxy-redirect-to", "https://default.example.com/"),
            ],
        ),
    ];
    objects.extend(slices("web", &[addr]));
    let compiled = h.apply_allowing_diagnostics(&objects);
    let reasons: Vec<String> = compiled.diagnostics.iter().map(|d| d.to_string()).collect();
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0].contains("proxy-redirect-from: default"),
        "{reasons:?}"
    );
    let http = h.http();
    let reply = get(http, "rewritten.example.com", "/").await;
    assert_eq!(reply.status, StatusCode::FOUND);
    assert_eq!(location(&reply), "https://rewritten.example.com/next?x=1");
    assert_eq!(
        reply.headers["refresh"],
        "3; URL=https://rewritten.example.com/later"
    );
    let cookies: Vec<&str> = reply
        .headers
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(
        cookies,
        [
            "s=1; PATH=/inner; Domain=.rewritten.example.com; HttpOnly",
            "t=2; path=/other/; domain=elsewhere.example",
        ]
    );
    let reply = get(http, "default.example.com", "/").await;
    assert_eq!(
        location(&reply),
        "http://backend.internal:8080/app/next?x=1"
    );
    assert_eq!(
        reply.headers["set-cookie"],
        "s=1; PATH=/app/inner; Domain=.Backend.Internal; HttpOnly"
    );
}

/// `connection-proxy-header`: the endpoint hears the value; `close` keeps the connection out of
/// the pool even when the endpoint leaves it open, `keep-alive` pools as usual.
#[tokio::test]
async fn connection_proxy_header_is_sent_and_close_is_not_pooled() {
    let echo = start_backend("web").await;
    let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
    let (closing, closing_counts) = start_fixed_backend(answer).await;
    let (kept, kept_counts) = start_fixed_backend(answer).await;
    // One worker: each worker has its own pool.
    let mut h = Harness::with_workers(1);
    let mut objects = web(&[&echo]);
    for (name, value, addr) in [("closing", "close", closing), ("kept", "keep-alive", kept)] {
        objects.push(service(name, &[("http", 80)]));
        objects.extend(slices(name, &[addr]));
        objects.push(annotated(
            name,
            &[("connection-proxy-header", value)],
            json!({"rules": [
                rule(&format!("{name}.example.com"), vec![path("/", "Prefix", to(name))]),
                rule(&format!("echo-{name}.example.com"), vec![path("/", "Prefix", to("web"))]),
            ]}),
        ));
    }
    h.apply(&objects);
    let http = h.http();
    let echo = get(http, "echo-closing.example.com", "/echo").await.json();
    assert_eq!(echo["headers"]["connection"], "close");
    let echo = get(http, "echo-kept.example.com", "/echo").await.json();
    assert_eq!(echo["headers"]["connection"], "keep-alive");
    for _ in 0..3 {
        assert_eq!(
            get(http, "closing.example.com", "/").await.status,
            StatusCode::OK
        );
        assert_eq!(
            get(http, "kept.example.com", "/").await.status,
            StatusCode::OK
        );
    }
    assert_eq!(
        closing_counts.connections(),
        3,
        "a closing request's connection is not reused"
    );
    assert_eq!(
        kept_counts.connections(),
        1,
        "keep-alive connections are pooled"
    );
}

/// `custom-headers`: the ConfigMap's headers replace the upstream's on the route's answers;
/// a ConfigMap with a header not allowed by `global-allowed-response-headers` refuses its
/// routes (503); a change of the ConfigMap is served after the recompile.
#[tokio::test]
async fn custom_headers_from_a_configmap_are_set_when_allowed() {
    const ANSWER: &[u8] =
        b"HTTP/1.1 200 OK\r\nX-Frame-Options: SAMEORIGIN\r\nContent-Length: 2\r\n\r\nok";
    let (addr, _) = start_fixed_backend(ANSWER).await;
    let mut h = Harness::start();
    let config_map = |name: &str, data: Value| {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"},
            "data": data,
        })
    };
    let mut objects = vec![
        service("web", &[("http", 80)]),
        settings(&[("global-allowed-response-headers", "X-Frame-Options,X-Team")]),
        config_map(
            "headers",
            json!({"X-Frame-Options": "DENY", "X-Team": "checkout"}),
        ),
        config_map("unlisted", json!({"X-Powered-By": "me"})),
        site(
            "headers",
            "headers.example.com",
            "/",
            "Prefix",
            &[("custom-headers", "default/headers")],
        ),
        site(
            "unlisted",
            "unlisted.example.com",
            "/",
            "Prefix",
            &[("custom-headers", "default/unlisted")],
        ),
        site("plain", "plain.example.com", "/", "Prefix", &[]),
    ];
    objects.extend(slices("web", &[addr]));
    h.apply_allowing_diagnostics(&objects);
    let http = h.http();
    let reply = get(http, "headers.example.com", "/").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.headers["x-frame-options"], "DENY");
    assert_eq!(reply.headers.get_all("x-frame-options").iter().count(), 1);
    assert_eq!(reply.headers["x-team"], "checkout");
    let reply = get(http, "plain.example.com", "/").await;
    assert_eq!(reply.headers["x-frame-options"], "SAMEORIGIN");
    assert!(reply.headers.get("x-team").is_none());
    let reply = get(http, "unlisted.example.com", "/").await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    // The ConfigMap changes: the route follows.
    objects[2] = config_map("headers", json!({"X-Team": "payments"}));
    h.apply_allowing_diagnostics(&objects);
    let reply = get(h.http(), "headers.example.com", "/").await;
    assert_eq!(reply.headers["x-team"], "payments");
    assert_eq!(reply.headers["x-frame-options"], "SAMEORIGIN");
}
