//! Session affinity over real sockets (`affinity: cookie`), the behaviours of ingress-nginx's
//! e2e tests `annotations/affinity.go` and `affinitymode.go`: the cookie and its attributes,
//! issued only on the Ingress's own paths; a client kept on its endpoint under churn, moved
//! with a new cookie (never an error) when its endpoint leaves; persistent against balanced
//! when endpoints are added; change-on-failure; sticky and legacy canaries.

use std::collections::HashMap;

use crate::support::*;
use bytes::Bytes;
use http::{header, Request, StatusCode};
use http_body_util::Full;
use model::Severity;
use serde_json::{json, Value};

/// The Service `web` with these backends, and an Ingress `name` routing `host` `path` to it.
fn sticky_site(
    backends: &[&backend::Backend],
    name: &str,
    host: &str,
    path: &str,
    annotations: &[(&str, &str)],
) -> Vec<Value> {
    let addrs: Vec<_> = backends.iter().map(|b| addr_of(b)).collect();
    let mut objects = vec![service("web", &[("http", 80)])];
    objects.extend(slices("web", &addrs));
    objects.push(site(name, host, path, "web", annotations));
    objects
}

fn site(name: &str, host: &str, path: &str, service: &str, annotations: &[(&str, &str)]) -> Value {
    annotated(
        name,
        annotations,
        json!({"rules": [rule(host, vec![super::support::path(path, "Prefix", to(service))])]}),
    )
}

/// Backends that answer `/echo` with these names.
async fn backends<const N: usize>(names: [&str; N]) -> [backend::Backend; N] {
    let mut started = Vec::with_capacity(N);
    for name in names {
        started.push(start_backend(name).await);
    }
    started
        .try_into()
        .unwrap_or_else(|_| unreachable!("{N} started"))
}

/// Applies `objects`; the only diagnostics are notices and differences (each affinity
/// Ingress has one: its cookie values are Sluice's own).
fn serve(h: &mut Harness, objects: &[Value]) {
    let compiled = h.apply_allowing_diagnostics(objects);
    for diagnostic in &compiled.diagnostics {
        assert!(
            matches!(diagnostic.severity, Severity::Notice | Severity::Difference),
            "{diagnostic}"
        );
    }
}

/// One request with an optional `Cookie`: (status, backend, the Set-Cookie it got).
async fn visit(
    client: &mut Client,
    host: &str,
    path: &str,
    cookie: Option<&str>,
    agent: Option<&str>,
) -> (StatusCode, String, Option<String>) {
    let mut request = Request::get(path).header("host", host);
    if let Some(cookie) = cookie {
        request = request.header(header::COOKIE, cookie);
    }
    if let Some(agent) = agent {
        request = request.header(header::USER_AGENT, agent);
    }
    let reply = client
        .send(request.body(Full::<Bytes>::default()).unwrap())
        .await
        .expect("answered");
    let set_cookie = reply
        .headers
        .get(header::SET_COOKIE)
        .map(|v| v.to_str().unwrap().to_owned());
    let backend = if reply.status == StatusCode::OK {
        reply.backend()
    } else {
        String::new()
    };
    (reply.status, backend, set_cookie)
}

/// `NAME=value` of a Set-Cookie, as a client sends it back.
fn pair(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap().to_owned()
}

/// A client pinned by its first answer: (backend, cookie to send back).
async fn pinned(client: &mut Client, host: &str, path: &str) -> (String, String) {
    let (status, backend, set_cookie) = visit(client, host, path, None, None).await;
    assert_eq!(status, StatusCode::OK);
    (
        backend,
        pair(&set_cookie.expect("a new client gets a cookie")),
    )
}

#[tokio::test]
async fn the_cookie_pins_the_client_with_ingress_nginx_s_attributes() {
    let [a, b, c] = backends(["a", "b", "c"]).await;
    let mut h = Harness::start();
    serve(
        &mut h,
        &sticky_site(
            &[&a, &b, &c],
            "sticky",
            "sticky.example",
            "/echo/app",
            &[
                ("affinity", "cookie"),
                ("session-cookie-name", "SERVERID"),
                ("session-cookie-expires", "172800"),
                ("session-cookie-max-age", "259200"),
                ("session-cookie-domain", "foo.bar"),
                ("session-cookie-samesite", "None"),
                ("session-cookie-conditional-samesite-none", "true"),
            ],
        ),
    );
    let mut client = Client::connect(h.http()).await;
    let (status, backend, set_cookie) =
        visit(&mut client, "sticky.example", "/echo/app/x", None, None).await;
    assert_eq!(status, StatusCode::OK);
    let set_cookie = set_cookie.expect("a cookie");
    assert!(set_cookie.starts_with("SERVERID="), "{set_cookie}");
    for attribute in [
        "; Expires=",
        "; Max-Age=259200",
        "; Domain=foo.bar",
        "; Path=/echo/app;",
        "; HttpOnly",
        "; SameSite=None",
    ] {
        assert!(
            set_cookie.contains(attribute),
            "{attribute} in {set_cookie}"
        );
    }
    // Plain HTTP without session-cookie-secure: no Secure.
    assert!(!set_cookie.contains("Secure"), "{set_cookie}");
    // Expires is nginx's cookie_time two days from now (`Mon, 02-Jan-06 15:04:05 GMT`).
    let expires = set_cookie.split("Expires=").nth(1).unwrap();
    assert_eq!(&expires[7..8], "-", "{expires}");
    assert!(expires[..27].ends_with(" GMT"), "{expires}");

    let cookie = pair(&set_cookie);
    for _ in 0..12 {
        let (status, again, set_cookie) = visit(
            &mut client,
            "sticky.example",
            "/echo/app",
            Some(&cookie),
            None,
        )
        .await;
        assert_eq!(
            (status, again.as_str(), set_cookie),
            (StatusCode::OK, backend.as_str(), None)
        );
    }
    // SameSite=None is left out for browsers that reject it (ingress-nginx's same_site.lua).
    let old =
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/59.0.3071.115 Safari/537.36";
    let (_, _, set_cookie) =
        visit(&mut client, "sticky.example", "/echo/app", None, Some(old)).await;
    let set_cookie = set_cookie.unwrap();
    assert!(!set_cookie.contains("SameSite"), "{set_cookie}");
}

#[tokio::test]
async fn secure_over_https_and_when_asked_on_plain_http() {
    let web = start_backend("web").await;
    let ca = TestCa::new();
    let leaf = ca.leaf(&["secure.example"]);
    let mut h = Harness::start();
    let mut objects = vec![
        service("web", &[("http", 80)]),
        tls_secret("secure-tls", &leaf),
    ];
    objects.extend(slices("web", &[addr_of(&web)]));
    // ingress-nginx's e2e: "false" still gets Secure over HTTPS (its Lua falls back to $https).
    objects.push(annotated(
        "tls",
        &[("affinity", "cookie"), ("session-cookie-secure", "false")],
        json!({
            "tls": [{"hosts": ["secure.example"], "secretName": "secure-tls"}],
            "rules": [rule("secure.example", vec![path("/", "Prefix", to("web"))])],
        }),
    ));
    objects.push(site(
        "forced",
        "forced.example",
        "/",
        "web",
        &[("affinity", "cookie"), ("session-cookie-secure", "true")],
    ));
    serve(&mut h, &objects);
    let (tls, _) = ca
        .connect(h.https(), "secure.example", &[b"http/1.1"])
        .await
        .unwrap();
    let mut client = Client::over(tls).await;
    let (_, _, set_cookie) = visit(&mut client, "secure.example", "/echo", None, None).await;
    assert!(set_cookie.unwrap().contains("; Secure"));
    let mut plain = Client::connect(h.http()).await;
    let (status, _, set_cookie) = visit(&mut plain, "secure.example", "/echo", None, None).await;
    // The TLS host redirects plain HTTP (ssl-redirect): no upstream, no cookie.
    assert_eq!(status, StatusCode::PERMANENT_REDIRECT);
    assert_eq!(set_cookie, None);
    let (_, _, set_cookie) = visit(&mut plain, "forced.example", "/echo", None, None).await;
    assert!(set_cookie.unwrap().contains("; Secure; HttpOnly"));
}

/// e2e "should not set affinity across all server locations when using separate ingresses":
/// the cookie is issued on the affinity Ingress's paths only; the other Ingress's path to the
/// same Service honours it (the affinity belongs to the backend).
#[tokio::test]
async fn the_cookie_is_issued_only_on_the_ingress_s_own_paths() {
    let [a, b, c] = backends(["a", "b", "c"]).await;
    let mut h = Harness::start();
    let mut objects = sticky_site(
        &[&a, &b, &c],
        "ingress1",
        "separate.example",
        "/echo/foo/bar",
        &[("affinity", "cookie"), ("affinity-mode", "persistent")],
    );
    objects.push(site(
        "ingress2",
        "separate.example",
        "/echo/foo",
        "web",
        &[],
    ));
    serve(&mut h, &objects);
    let mut client = Client::connect(h.http()).await;
    let (status, _, set_cookie) =
        visit(&mut client, "separate.example", "/echo/foo", None, None).await;
    assert_eq!((status, set_cookie), (StatusCode::OK, None));
    let (status, backend, set_cookie) =
        visit(&mut client, "separate.example", "/echo/foo/bar", None, None).await;
    assert_eq!(status, StatusCode::OK);
    let set_cookie = set_cookie.unwrap();
    assert!(set_cookie.contains("; Path=/echo/foo/bar;"), "{set_cookie}");
    let cookie = pair(&set_cookie);
    for _ in 0..8 {
        let (_, on_foo, issued) = visit(
            &mut client,
            "separate.example",
            "/echo/foo",
            Some(&cookie),
            None,
        )
        .await;
        assert_eq!((on_foo.as_str(), issued), (backend.as_str(), None));
    }
}

/// e2e "should work with use-regex annotation and session-cookie-path", and the trap without
/// the path: the cookie's Path is the location as written, a regex.
#[tokio::test]
async fn use_regex_takes_session_cookie_path_and_without_it_the_regex_as_written() {
    let web = start_backend("web").await;
    let mut h = Harness::start();
    let mut objects = sticky_site(
        &[&web],
        "with-path",
        "useregex.example",
        "/echo/foo/.*",
        &[
            ("affinity", "cookie"),
            ("use-regex", "true"),
            ("session-cookie-path", "/echo/foo/bar"),
        ],
    );
    // Its own Service: affinity belongs to the Service port, and the older Ingress's (with its
    // path) would apply to every path to `web`.
    objects.push(service("other", &[("http", 80)]));
    objects.extend(slices("other", &[addr_of(&web)]));
    objects.push(site(
        "without-path",
        "warn.example",
        "/echo/foo/.*",
        "other",
        &[("affinity", "cookie"), ("use-regex", "true")],
    ));
    let compiled = h.apply_allowing_diagnostics(&objects);
    assert!(compiled.diagnostics.iter().any(|d| d
        .to_string()
        .contains("session-cookie-path should be set when use-regex is true")));
    let mut client = Client::connect(h.http()).await;
    let (_, _, set_cookie) =
        visit(&mut client, "useregex.example", "/echo/foo/bar", None, None).await;
    assert!(set_cookie.unwrap().contains("; Path=/echo/foo/bar;"));
    let (_, _, set_cookie) = visit(&mut client, "warn.example", "/echo/foo/bar", None, None).await;
    let set_cookie = set_cookie.unwrap();
    assert!(set_cookie.contains("; Path=/echo/foo/.*;"), "{set_cookie}");
}

/// The churn rule: while its endpoint is ready a client stays, whatever else leaves;
/// when its own leaves it gets another endpoint and a new cookie, never an error, and stays
/// there (persistent: also once the old endpoint is back).
#[tokio::test]
async fn a_client_stays_while_its_endpoint_is_ready_and_moves_with_a_new_cookie_when_it_leaves() {
    for mode in ["persistent", "balanced"] {
        let backends = backends(["a", "b", "c", "d"]).await;
        let all: Vec<&backend::Backend> = backends.iter().collect();
        let annotations = [("affinity", "cookie"), ("affinity-mode", mode)];
        let mut h = Harness::start();
        serve(
            &mut h,
            &sticky_site(&all, "sticky", "churn.example", "/echo", &annotations),
        );
        let mut client = Client::connect(h.http()).await;
        let (home, cookie) = pinned(&mut client, "churn.example", "/echo").await;

        // Two other endpoints leave (the fast path: only the EndpointSlices change).
        let others: Vec<&backend::Backend> = all
            .iter()
            .copied()
            .filter(|b| addr_of(b) != addr_of(by_name(&all, &home)))
            .collect();
        let fewer = [by_name(&all, &home), others[0]];
        h.update(&sticky_site(
            &fewer,
            "sticky",
            "churn.example",
            "/echo",
            &annotations,
        ));
        for _ in 0..8 {
            let (status, backend, issued) =
                visit(&mut client, "churn.example", "/echo", Some(&cookie), None).await;
            assert_eq!(
                (status, backend.as_str(), issued),
                (StatusCode::OK, home.as_str(), None),
                "{mode}"
            );
        }

        // Its own leaves: another endpoint, a new cookie, no error.
        h.update(&sticky_site(
            &others,
            "sticky",
            "churn.example",
            "/echo",
            &annotations,
        ));
        let (status, moved, issued) =
            visit(&mut client, "churn.example", "/echo", Some(&cookie), None).await;
        assert_eq!(status, StatusCode::OK, "{mode}");
        assert_ne!(moved, home, "{mode}");
        let new = pair(&issued.expect("a new cookie"));
        assert_ne!(new, cookie);
        for _ in 0..8 {
            let (_, backend, issued) =
                visit(&mut client, "churn.example", "/echo", Some(&new), None).await;
            assert_eq!((backend.as_str(), issued), (moved.as_str(), None), "{mode}");
        }
        if mode == "persistent" {
            // The old endpoint back: the client stays where its new cookie says.
            h.update(&sticky_site(
                &all,
                "sticky",
                "churn.example",
                "/echo",
                &annotations,
            ));
            let (_, backend, issued) =
                visit(&mut client, "churn.example", "/echo", Some(&new), None).await;
            assert_eq!((backend.as_str(), issued), (moved.as_str(), None));
        }
    }
}

fn by_name<'b>(backends: &[&'b backend::Backend], name: &str) -> &'b backend::Backend {
    let index = ["a", "b", "c", "d"]
        .iter()
        .position(|n| *n == name)
        .unwrap();
    backends[index]
}

/// e2e `affinitymode.go`: scaled up, balanced moves some sessions to the new endpoints,
/// persistent none.
#[tokio::test]
async fn endpoints_added_move_balanced_clients_but_never_persistent_ones() {
    let backends = backends(["a", "b", "c", "d"]).await;
    let all: Vec<&backend::Backend> = backends.iter().collect();
    for (mode, moves) in [("persistent", false), ("balanced", true)] {
        let annotations = [("affinity", "cookie"), ("affinity-mode", mode)];
        let mut h = Harness::start();
        serve(
            &mut h,
            &sticky_site(&all[..2], "sticky", "mode.example", "/echo", &annotations),
        );
        let mut client = Client::connect(h.http()).await;
        let mut clients = Vec::new();
        for _ in 0..40 {
            clients.push(pinned(&mut client, "mode.example", "/echo").await);
        }
        h.update(&sticky_site(
            &all,
            "sticky",
            "mode.example",
            "/echo",
            &annotations,
        ));
        let mut moved = 0;
        for (home, cookie) in &clients {
            let (status, backend, _) =
                visit(&mut client, "mode.example", "/echo", Some(cookie), None).await;
            assert_eq!(status, StatusCode::OK);
            if backend != *home {
                moved += 1;
            }
        }
        assert_eq!(moved > 0, moves, "{mode}: {moved} of 40 clients moved");
    }
}

/// `session-cookie-change-on-failure`: the client's endpoint refuses connections (its pod is
/// gone, the EndpointSlice not updated yet): the request is answered by another endpoint either
/// way; only with the annotation does the cookie follow it.
#[tokio::test]
async fn change_on_failure_moves_the_cookie_to_the_endpoint_that_answered() {
    for change in [false, true] {
        let (a, b) = (start_backend("a").await, start_backend("b").await);
        let annotations = [
            ("affinity", "cookie"),
            ("affinity-mode", "persistent"),
            (
                "session-cookie-change-on-failure",
                if change { "true" } else { "false" },
            ),
        ];
        let mut h = Harness::start();
        serve(
            &mut h,
            &sticky_site(&[&a, &b], "sticky", "fail.example", "/echo", &annotations),
        );
        let mut client = Client::connect(h.http()).await;
        let (home, cookie) = pinned(&mut client, "fail.example", "/echo").await;
        let (dead, _live, live_name) = if home == "a" {
            (a, b, "b")
        } else {
            (b, a, "a")
        };
        dead.abort();
        let (status, backend, issued) =
            visit(&mut client, "fail.example", "/echo", Some(&cookie), None).await;
        assert_eq!(status, StatusCode::OK, "change-on-failure {change}");
        assert_eq!(backend, live_name);
        assert_eq!(issued.is_some(), change, "change-on-failure {change}");
        if let Some(issued) = issued {
            let (_, again, reissued) = visit(
                &mut client,
                "fail.example",
                "/echo",
                Some(&pair(&issued)),
                None,
            )
            .await;
            assert_eq!((again, reissued), (backend, None));
        }
    }
}

/// `shop.example/echo`: the Ingress `main` with affinity to `web`, and the canary Ingress
/// `canary` to `web-v2` with these canary annotations.
fn sticky_with_canary(
    web: &backend::Backend,
    v2: &backend::Backend,
    canary: &[(&str, &str)],
) -> Vec<Value> {
    let mut objects = web_and_v2(web, v2);
    let main = [("affinity", "cookie")];
    objects.push(site("main", "shop.example", "/echo", "web", &main));
    let mut annotations = vec![("canary", "true")];
    annotations.extend_from_slice(canary);
    objects.push(site(
        "canary",
        "shop.example",
        "/echo",
        "web-v2",
        &annotations,
    ));
    objects
}

/// Sticky canaries (the default): a client the weight sent to either side stays there; legacy:
/// the canary issues no cookie, its clients are drawn again.
#[tokio::test]
async fn a_sticky_canary_keeps_its_clients_and_a_legacy_one_draws_again() {
    let (web, v2) = (start_backend("web").await, start_backend("web-v2").await);
    for behavior in ["sticky", "legacy"] {
        let objects = sticky_with_canary(
            &web,
            &v2,
            &[
                ("canary-weight", "50"),
                ("affinity-canary-behavior", behavior),
            ],
        );
        let mut h = Harness::start();
        serve(&mut h, &objects);
        let mut client = Client::connect(h.http()).await;
        let mut seen: HashMap<String, usize> = HashMap::new();
        for _ in 0..30 {
            let (status, first, issued) =
                visit(&mut client, "shop.example", "/echo", None, None).await;
            assert_eq!(status, StatusCode::OK);
            *seen.entry(first.clone()).or_default() += 1;
            match (behavior, first.as_str(), issued) {
                ("legacy", "web-v2", issued) => assert_eq!(issued, None),
                (_, _, issued) => {
                    let cookie = pair(&issued.expect("a cookie"));
                    for _ in 0..5 {
                        let (_, again, _) =
                            visit(&mut client, "shop.example", "/echo", Some(&cookie), None).await;
                        assert_eq!(again, first, "{behavior}");
                    }
                }
            }
        }
        assert_eq!(seen.len(), 2, "{behavior}: both sides drawn: {seen:?}");
    }
}

/// The affinity cookie is Sluice's, not the upstream's: proxy-cookie-path rewrites the
/// upstream's cookies only (nginx's proxy module never sees the one ingress-nginx's balancer
/// sets), and both reach the client.
#[tokio::test]
async fn proxy_cookie_path_rewrites_the_upstream_s_cookie_not_the_affinity_one() {
    let (addr, _) = start_fixed_backend(
        b"HTTP/1.1 200 OK\r\nSet-Cookie: app=1; Path=/echo\r\nContent-Length: 0\r\n\r\n",
    )
    .await;
    let mut objects = vec![service("web", &[("http", 80)])];
    objects.extend(slices("web", &[addr]));
    objects.push(site(
        "both",
        "cookies.example",
        "/echo",
        "web",
        &[
            ("affinity", "cookie"),
            ("proxy-cookie-path", "/echo /moved"),
        ],
    ));
    let mut h = Harness::start();
    serve(&mut h, &objects);
    let reply = get(h.http(), "cookies.example", "/echo").await;
    assert_eq!(reply.status, StatusCode::OK);
    let cookies: Vec<&str> = reply
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(cookies.len(), 2, "{cookies:?}");
    assert!(cookies.contains(&"app=1; Path=/moved"), "{cookies:?}");
    let ours = cookies
        .iter()
        .find(|c| c.starts_with("INGRESSCOOKIE="))
        .unwrap();
    assert!(ours.contains("; Path=/echo;"), "{ours}");
}

/// HTTP/2 clients may split their cookies over several `cookie` fields (RFC 9113 8.2.3): the
/// affinity cookie is found in any of them.
#[tokio::test]
async fn an_http2_client_s_split_cookie_is_read() {
    let [a, b, c] = backends(["a", "b", "c"]).await;
    let mut objects = sticky_site(
        &[&a, &b, &c],
        "sticky",
        "h2.example",
        "/echo",
        &[("affinity", "cookie"), ("affinity-mode", "persistent")],
    );
    objects.push(settings(&[("use-h2c", "true")]));
    let mut h = Harness::start();
    serve(&mut h, &objects);
    let mut first = Client::connect(h.http()).await;
    let (home, cookie) = pinned(&mut first, "h2.example", "/echo").await;
    let stream = tokio::net::TcpStream::connect(h.http()).await.unwrap();
    let mut client = H2Client::over(stream).await;
    for _ in 0..6 {
        let request = Request::get("http://h2.example/echo")
            .header(header::COOKIE, "a=1")
            .header(header::COOKIE, cookie.as_str())
            .header(header::COOKIE, "z=2")
            .body(Full::<Bytes>::default())
            .unwrap();
        let reply = client.send(request).await.unwrap();
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.backend(), home);
        assert_eq!(reply.headers.get(header::SET_COOKIE), None);
    }
}

/// The HTTP/2 upstream path (a Service port with `appProtocol: kubernetes.io/h2c`) pins and
/// issues as the HTTP/1.1 one does.
#[tokio::test]
async fn http2_upstreams_are_sticky_too() {
    let upstreams = [
        start_h2c_upstream("a").await,
        start_h2c_upstream("b").await,
        start_h2c_upstream("c").await,
    ];
    let mut web = service("web", &[("http", 80)]);
    web["spec"]["ports"][0]["appProtocol"] = json!("kubernetes.io/h2c");
    let mut objects = vec![web];
    objects.extend(slices("web", &upstreams));
    objects.push(site(
        "sticky",
        "h2c.example",
        "/",
        "web",
        &[("affinity", "cookie"), ("affinity-mode", "persistent")],
    ));
    let mut h = Harness::start();
    serve(&mut h, &objects);
    let mut client = Client::connect(h.http()).await;
    let first = client.get("h2c.example", "/").await;
    assert_eq!(first.status, StatusCode::OK);
    let home = first.text();
    let set_cookie = first.headers.get(header::SET_COOKIE).expect("a cookie");
    let cookie = pair(set_cookie.to_str().unwrap());
    for _ in 0..8 {
        let request = Request::get("/")
            .header("host", "h2c.example")
            .header(header::COOKIE, cookie.as_str())
            .body(Full::<Bytes>::default())
            .unwrap();
        let reply = client.send(request).await.unwrap();
        assert_eq!(
            (reply.text(), reply.headers.get(header::SET_COOKIE)),
            (home.clone(), None)
        );
    }
}

/// ingress-nginx's balancer asks the affinity cookie before the canary's rules
/// (`route_to_alternative_balancer`): a client whose cookie names the main backend stays there
/// even with `canary-by-header: always` (or the canary cookie), one without goes to the canary
/// and gets the canary's cookie, which keeps it there even with `never`.
#[tokio::test]
async fn a_main_backend_cookie_wins_over_the_canary_header_and_a_canary_one_over_never() {
    let (web, v2) = (start_backend("web").await, start_backend("web-v2").await);
    let objects = sticky_with_canary(
        &web,
        &v2,
        &[
            ("canary-by-header", "x-canary"),
            ("canary-by-cookie", "canary"),
        ],
    );
    let mut h = Harness::start();
    serve(&mut h, &objects);
    let mut client = Client::connect(h.http()).await;
    let visit_with = |by_header: Option<&'static str>, cookie: Option<String>| {
        let mut request = Request::get("/echo").header("host", "shop.example");
        if let Some(value) = by_header {
            request = request.header("x-canary", value);
        }
        if let Some(cookie) = cookie {
            request = request.header(header::COOKIE, cookie);
        }
        request.body(Full::<Bytes>::default()).unwrap()
    };
    let mut ask = async |by_header: Option<&'static str>, cookie: Option<String>| {
        let reply = client
            .send(visit_with(by_header, cookie))
            .await
            .expect("answered");
        assert_eq!(reply.status, StatusCode::OK);
        let issued = reply
            .headers
            .get(header::SET_COOKIE)
            .map(|v| pair(v.to_str().unwrap()));
        (reply.backend(), issued)
    };
    // A new client: the main backend, and its cookie.
    let (first, main_cookie) = ask(None, None).await;
    assert_eq!(first, "web");
    let main_cookie = main_cookie.expect("a cookie naming the main backend");
    // Its cookie keeps it on main whatever the canary's header or cookie say.
    for _ in 0..5 {
        assert_eq!(
            ask(Some("always"), Some(main_cookie.clone())).await.0,
            "web"
        );
        let both = format!("{main_cookie}; canary=always");
        assert_eq!(ask(None, Some(both)).await.0, "web");
    }
    // Without it the header sends the client to the canary, which pins it there.
    let (side, canary_cookie) = ask(Some("always"), None).await;
    assert_eq!(side, "web-v2");
    let canary_cookie = canary_cookie.expect("a cookie naming the canary");
    assert_eq!(ask(None, Some("canary=always".into())).await.0, "web-v2");
    // The canary's cookie keeps the client there, even with the header or cookie at never.
    for _ in 0..5 {
        assert_eq!(ask(None, Some(canary_cookie.clone())).await.0, "web-v2");
        assert_eq!(
            ask(Some("never"), Some(canary_cookie.clone())).await.0,
            "web-v2"
        );
        let both = format!("{canary_cookie}; canary=never");
        assert_eq!(ask(None, Some(both)).await.0, "web-v2");
    }
    // No affinity cookie: the rules decide as before.
    assert_eq!(ask(Some("never"), None).await.0, "web");
    assert_eq!(ask(None, Some("canary=never".into())).await.0, "web");
}
