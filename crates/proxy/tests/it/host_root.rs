//! A host's unmatched paths over real sockets, as ingress-nginx serves them: the first
//! Ingress of a host lends its policy to the host's root location (auth, CORS), in front of
//! the default backend or a 404; a host with rules never falls through to other hosts' rules.

use http::{header, Method, Request, StatusCode};
use http_body_util::Full;
use model::NamespacedName;
use serde_json::{json, Value};

use crate::external_auth::start_auth_server;
use crate::support::*;

/// `auth.example`: `/echo/app` to `web`, behind `auth-url` (Bearer `good` passes) and CORS.
fn guarded_host(web: &backend::Backend, auth: std::net::SocketAddr) -> Vec<Value> {
    let mut objects = vec![service("web", &[("http", 80)])];
    objects.extend(slices("web", &[addr_of(web)]));
    let url = format!("http://{auth}/verify");
    let rules =
        json!({"rules": [rule("auth.example", vec![path("/echo/app", "Prefix", to("web"))])]});
    objects.push(annotated(
        "guarded",
        &[
            ("auth-url", url.as_str()),
            ("enable-cors", "true"),
            ("cors-allow-origin", "https://a.test"),
        ],
        rules,
    ));
    objects
}

async fn send(h: &Harness, method: Method, path: &str, headers: &[(&str, &str)]) -> Reply {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "auth.example");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    Client::connect(h.http())
        .await
        .send(request.body(Full::default()).unwrap())
        .await
        .expect("an answer")
}

#[tokio::test]
async fn an_unrouted_path_of_an_auth_host_asks_the_auth_server_before_its_404() {
    let web = start_backend("web").await;
    let (auth, seen) = start_auth_server().await;
    let mut h = Harness::start();
    h.apply(&guarded_host(&web, auth));
    let good = ("authorization", "Bearer good");

    // Unauthenticated: the auth server's 401 (with CORS headers), not a 404 that would tell a
    // stranger which paths exist.
    let reply = send(
        &h,
        Method::GET,
        "/echo/other",
        &[("origin", "https://a.test")],
    )
    .await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{reply:?}");
    assert_eq!(
        reply.headers[header::ACCESS_CONTROL_ALLOW_ORIGIN],
        "https://a.test"
    );
    let sub = seen.lock().unwrap().last().cloned().expect("a sub-request");
    assert_eq!(
        sub.headers["x-original-url"],
        "http://auth.example/echo/other"
    );

    // Signed in: the root's 404 (with the CORS headers of the route's answers).
    let reply = send(
        &h,
        Method::GET,
        "/echo/other",
        &[good, ("origin", "https://a.test")],
    )
    .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{reply:?}");
    assert_eq!(
        reply.headers[header::ACCESS_CONTROL_ALLOW_ORIGIN],
        "https://a.test"
    );

    // A preflight is answered by the root's CORS, before auth.
    let asked = seen.lock().unwrap().len();
    let preflight = [
        ("origin", "https://a.test"),
        ("access-control-request-method", "PUT"),
    ];
    let reply = send(&h, Method::OPTIONS, "/echo/other", &preflight).await;
    assert_eq!(reply.status, StatusCode::NO_CONTENT, "{reply:?}");
    assert_eq!(seen.lock().unwrap().len(), asked);

    // The routed path is unchanged.
    let reply = send(&h, Method::GET, "/echo/app/x", &[good]).await;
    assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
    assert_eq!(reply.backend(), "web");

    // The status page shows where the host's unmatched paths go.
    let page = get(h.status(), "s", "/").await.text();
    let row = "<tr><td>auth.example</td><td><i>unmatched paths</i> <span class=\"note\">root</span></td><td>default/guarded</td>";
    assert!(page.contains(row), "{page}");
    assert!(page.contains("none: answers 404 once the Ingress's policy lets the request through"));
}

#[tokio::test]
async fn with_a_default_backend_the_root_forwards_to_it_behind_the_first_ingress_s_policy() {
    let web = start_backend("web").await;
    let fallback = start_backend("fallback").await;
    let (auth, _seen) = start_auth_server().await;
    let mut h = Harness::start();
    h.control.options.default_backend_service = Some(NamespacedName::new("default", "fallback"));
    let mut objects = guarded_host(&web, auth);
    objects.push(service("fallback", &[("http", 80)]));
    objects.extend(slices("fallback", &[addr_of(&fallback)]));
    h.apply(&objects);

    let reply = send(&h, Method::GET, "/echo/other", &[]).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{reply:?}");
    let reply = send(
        &h,
        Method::GET,
        "/echo/other",
        &[("authorization", "Bearer good")],
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
    assert_eq!(reply.backend(), "fallback");
    // An unknown host goes to the default backend with the ConfigMap's policy: no auth.
    let reply = get(h.http(), "unknown.example", "/echo/other").await;
    assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
    assert_eq!(reply.backend(), "fallback");
}

#[tokio::test]
async fn a_host_with_rules_keeps_its_unmatched_paths_from_other_hosts_rules() {
    let web = start_backend("web").await;
    let other = start_backend("other").await;
    let mut h = Harness::start();
    let mut objects = vec![
        service("web", &[("http", 80)]),
        service("other", &[("http", 80)]),
    ];
    objects.extend(slices("web", &[addr_of(&web)]));
    objects.extend(slices("other", &[addr_of(&other)]));
    let rules = json!({"rules": [
        rule("a.wild.example", vec![path("/echo/app", "Prefix", to("web"))]),
        rule("*.wild.example", vec![path("/", "Prefix", to("other"))]),
        {"http": {"paths": [path("/", "Prefix", to("other"))]}},
    ]});
    objects.push(ingress("hosts", rules));
    h.apply(&objects);

    for (host, path, answer) in [
        ("a.wild.example", "/echo/app/x", Some("web")),
        // ingress-nginx's server for a.wild.example answers, not the wildcard's nor `_`.
        ("a.wild.example", "/echo/other", None),
        ("b.wild.example", "/echo/x", Some("other")),
        ("unknown.example", "/echo/x", Some("other")),
    ] {
        let reply = get(h.http(), host, path).await;
        match answer {
            Some(backend) => {
                assert_eq!(reply.status, StatusCode::OK, "{host}{path}: {reply:?}");
                assert_eq!(reply.backend(), backend, "{host}{path}");
            }
            None => assert_eq!(
                reply.status,
                StatusCode::NOT_FOUND,
                "{host}{path}: {reply:?}"
            ),
        }
    }
}

#[tokio::test]
async fn an_unmatched_path_of_a_host_gets_the_configmap_s_policy_before_its_404() {
    let web = start_backend("web").await;
    let mut h = Harness::start();
    let mut objects = vec![
        service("web", &[("http", 80)]),
        settings(&[("add-headers", "default/answers")]),
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "answers", "namespace": "default"},
            "data": {"X-Frame-Options": "DENY"},
        }),
    ];
    objects.extend(slices("web", &[addr_of(&web)]));
    // A TLS host (its Secret missing: the default certificate) and a plain one, no annotations.
    objects.push(ingress(
        "sites",
        json!({
            "tls": [{"hosts": ["secure.example"], "secretName": "missing"}],
            "rules": [
                rule("secure.example", vec![path("/echo/app", "Prefix", to("web"))]),
                rule("plain.example", vec![path("/echo/app", "Prefix", to("web"))]),
            ],
        }),
    ));
    h.apply_allowing_diagnostics(&objects);

    // As ingress-nginx's root location of the host: ssl-redirect first (plain HTTP to a TLS
    // host), then the 404 with the http-level add-headers.
    let reply = get(h.http(), "secure.example", "/echo/other").await;
    assert_eq!(reply.status, StatusCode::PERMANENT_REDIRECT, "{reply:?}");
    assert_eq!(
        reply.headers[header::LOCATION],
        "https://secure.example/echo/other"
    );
    let reply = get(h.http(), "plain.example", "/echo/other").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{reply:?}");
    assert_eq!(reply.headers["x-frame-options"], "DENY");
    // The routed path is unchanged.
    let reply = get(h.http(), "plain.example", "/echo/app").await;
    assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
    assert_eq!(reply.headers["x-frame-options"], "DENY");
}

#[tokio::test]
async fn the_configmap_s_allow_list_covers_a_host_s_unmatched_paths() {
    let web = start_backend("web").await;
    let mut h = Harness::start();
    let mut objects = vec![
        service("web", &[("http", 80)]),
        settings(&[("whitelist-source-range", "10.0.0.0/8")]),
    ];
    objects.extend(slices("web", &[addr_of(&web)]));
    let rules =
        json!({"rules": [rule("plain.example", vec![path("/echo/app", "Prefix", to("web"))])]});
    objects.push(ingress("site", rules));
    h.apply(&objects);
    // 127.0.0.1 is not in the list: 403 on the rule and on the host's unmatched path alike, as
    // ingress-nginx's root location carries the ConfigMap's list; an unknown host stays a 404.
    assert_eq!(
        get(h.http(), "plain.example", "/echo/app").await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        get(h.http(), "plain.example", "/echo/x").await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        get(h.http(), "unknown.example", "/echo/x").await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn an_unknown_host_s_404_carries_the_configmap_s_add_headers_and_nothing_of_a_location_s() {
    let web = start_backend("web").await;
    let mut h = Harness::start();
    let mut objects = vec![
        service("web", &[("http", 80)]),
        settings(&[
            ("add-headers", "default/answers"),
            ("whitelist-source-range", "10.0.0.0/8"),
            ("force-ssl-redirect", "true"),
        ]),
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "answers", "namespace": "default"},
            "data": {"X-Frame-Options": "DENY"},
        }),
    ];
    objects.extend(slices("web", &[addr_of(&web)]));
    let rules =
        json!({"rules": [rule("plain.example", vec![path("/echo/app", "Prefix", to("web"))])]});
    objects.push(ingress("site", rules));
    h.apply(&objects);

    // ingress-nginx's `_` server: the http level's more_set_headers reach its 404; the
    // ConfigMap's allow-list and force-ssl-redirect are a location's defaults, which it has not.
    let reply = get(h.http(), "unknown.example", "/anything").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{reply:?}");
    assert_eq!(reply.headers["x-frame-options"], "DENY");
    assert_eq!(
        reply.text(),
        "404 Not Found: no route for this host and path\n"
    );
    // A known host's paths keep the location's defaults (the allow-list refuses 127.0.0.1).
    let reply = get(h.http(), "plain.example", "/echo/x").await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{reply:?}");

    // Counted as before: a 404 of no route, no Ingress named.
    let metrics = get(h.admin(), "admin", "/metrics").await.text();
    assert!(
        metrics.contains("sluice_error_responses_total{status=\"404\",source=\"client\"} 1"),
        "{metrics}"
    );
    // /config says where such requests go.
    let config = get(h.status(), "status", "/config").await.json();
    assert!(
        config["config"]["default_server"].is_object(),
        "{:#}",
        config["config"]["default_server"]
    );
    let page = get(h.status(), "s", "/").await.text();
    let row = "<tr><td><i>other hosts</i></td><td><i>any path</i></td><td><i>none</i></td><td><i>none</i></td>\
               <td>none: answers 404 once the ConfigMap's policy lets the request through";
    assert!(page.contains(row), "{page}");
}
