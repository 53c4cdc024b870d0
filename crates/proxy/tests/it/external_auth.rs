//! External auth (`auth-url` and its family) over real sockets: what the sub-request carries,
//! how each answer of the auth server is turned into the client's, the sign-in redirect, and
//! the auth cache's single flight. `oauth2_proxy.rs` runs the real oauth2-proxy.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderMap, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;

use crate::support::*;

/// A sub-request as the auth server saw it.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub(crate) method: String,
    pub(crate) target: String,
    pub(crate) headers: HeaderMap,
}

/// An auth server on loopback: `Authorization: Bearer <word>` decides. `good` 200 with
/// `X-Auth-Request-User`/`-Email` and a cookie; `cached` 200 without a cookie after 300 ms
/// (cacheable); `nope` 403; `broken` 502; none 401 with `WWW-Authenticate`.
pub(crate) async fn start_auth_server() -> (SocketAddr, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let record = record.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<Incoming>| {
                    let record = record.clone();
                    async move { Ok::<_, Infallible>(answer(&record, request).await) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, seen)
}

async fn answer(record: &Mutex<Vec<Seen>>, request: Request<Incoming>) -> Response<Full<Bytes>> {
    record.lock().unwrap().push(Seen {
        method: request.method().to_string(),
        target: request.uri().to_string(),
        headers: request.headers().clone(),
    });
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("")
        .to_owned();
    let mut response = Response::builder();
    let status = match token.as_str() {
        "good" => {
            response = response
                .header("x-auth-request-user", "ann")
                .header("x-auth-request-email", "ann@example.com")
                .header(header::SET_COOKIE, "session=s1; Path=/")
                .header(header::SET_COOKIE, "csrf=c1; Path=/");
            200
        }
        "cached" => {
            tokio::time::sleep(Duration::from_millis(300)).await;
            response = response.header("x-auth-request-user", "carl");
            200
        }
        "nope" => 403,
        "broken" => 502,
        _ => {
            response = response.header(header::WWW_AUTHENTICATE, "Bearer realm=\"test\"");
            401
        }
    };
    response
        .status(status)
        .body(Full::new(Bytes::from_static(b"auth says so")))
        .unwrap()
}

/// What every test here starts with: the echo backend, the auth server and a proxy.
struct Setup {
    web: backend::Backend,
    auth: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    h: Harness,
}

async fn setup() -> Setup {
    let web = start_backend("web").await;
    let (auth, seen) = start_auth_server().await;
    Setup {
        web,
        auth,
        seen,
        h: Harness::start(),
    }
}

/// `auth.example` on the echo backend, with `auth-url` to `auth` and more annotations.
fn objects(web: SocketAddr, auth: SocketAddr, annotations: &[(&str, &str)]) -> Vec<Value> {
    let mut objects = vec![service("web", &[("http", 80)])];
    objects.extend(slices("web", &[web]));
    let url = format!("http://{auth}/oauth2/auth?allowed=a");
    let mut all = vec![("auth-url", url.as_str())];
    all.extend_from_slice(annotations);
    let rules = json!({"rules": [rule("auth.example", vec![path("/", "Prefix", to("web"))])]});
    objects.push(annotated("guarded", &all, rules));
    objects
}

async fn send(addr: SocketAddr, path: &str, token: Option<&str>, extra: &[(&str, &str)]) -> Reply {
    let mut request = Request::get(path).header("host", "auth.example");
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    Client::connect(addr)
        .await
        .send(request.body(Full::default()).unwrap())
        .await
        .expect("an answer")
}

#[tokio::test]
async fn the_auth_server_decides_and_its_headers_reach_the_upstream() {
    let Setup {
        web,
        auth,
        seen,
        mut h,
    } = setup().await;
    h.apply(&objects(
        addr_of(&web),
        auth,
        &[(
            "auth-response-headers",
            "X-Auth-Request-User, X-Auth-Request-Email",
        )],
    ));

    // Granted: the upstream gets the auth server's headers, never the client's forgery, and
    // the client gets the auth server's cookies.
    let reply = send(
        h.http(),
        "/echo/a?b=1",
        Some("good"),
        &[
            ("x-auth-request-user", "mallory"),
            ("x-request-id", "rid-1"),
        ],
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
    let echo = reply.json();
    assert_eq!(echo["headers"]["x-auth-request-user"], "ann");
    assert_eq!(echo["headers"]["x-auth-request-email"], "ann@example.com");
    let cookies: Vec<_> = reply.headers.get_all(header::SET_COOKIE).iter().collect();
    assert_eq!(cookies, ["session=s1; Path=/", "csrf=c1; Path=/"]);

    // What the sub-request carried (ingress-nginx's auth location).
    let sub = seen.lock().unwrap().last().cloned().expect("a sub-request");
    assert_eq!(sub.method, "GET");
    assert_eq!(sub.target, "/oauth2/auth?allowed=a");
    let h_ = |name: &str| {
        sub.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    assert_eq!(h_("host").as_deref(), Some("127.0.0.1"));
    assert_eq!(
        h_("x-original-url").as_deref(),
        Some("http://auth.example/echo/a?b=1")
    );
    assert_eq!(h_("x-original-method").as_deref(), Some("GET"));
    assert_eq!(
        h_("x-sent-from").as_deref(),
        Some("nginx-ingress-controller")
    );
    assert_eq!(h_("x-real-ip").as_deref(), Some("127.0.0.1"));
    assert_eq!(h_("x-forwarded-for").as_deref(), Some("127.0.0.1"));
    assert_eq!(
        h_("x-auth-request-redirect").as_deref(),
        Some("/echo/a?b=1")
    );
    assert_eq!(h_("x-request-id").as_deref(), Some("rid-1"));
    assert_eq!(h_("authorization").as_deref(), Some("Bearer good"));
    assert_eq!(h_("x-forwarded-proto"), None);
    assert_eq!(h_("content-length"), None);
    // auth-method not set: no X-Original-URI / X-Scheme (ingress-nginx's template).
    assert_eq!(h_("x-original-uri"), None);

    // A generated request ID is the one the upstream gets too.
    let reply = send(h.http(), "/echo/", Some("good"), &[]).await;
    let sub = seen.lock().unwrap().last().cloned().unwrap();
    let sent = sub.headers["x-request-id"].to_str().unwrap().to_owned();
    assert_eq!(reply.json()["headers"]["x-request-id"], sent.as_str());

    // 401 with the auth server's challenge and nginx's text; 403; anything else 500.
    let reply = send(h.http(), "/echo/", None, &[]).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        reply.headers[header::WWW_AUTHENTICATE],
        "Bearer realm=\"test\""
    );
    assert!(reply.text().starts_with("401 Authorization Required"));
    assert!(reply.headers.get(header::SET_COOKIE).is_none());
    assert_eq!(send(h.http(), "/", Some("nope"), &[]).await.status, 403);
    assert_eq!(send(h.http(), "/", Some("broken"), &[]).await.status, 500);
    assert_metric(&h, "sluice_auth_requests_total{result=\"miss\"} 5").await;
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn signin_redirects_with_the_escaped_request_and_an_unreachable_server_is_500() {
    let Setup {
        web, auth, mut h, ..
    } = setup().await;
    h.apply(&objects(
        addr_of(&web),
        auth,
        &[
            ("auth-signin", "https://login.example/oauth2/start"),
            ("auth-method", "POST"),
        ],
    ));
    let reply = send(h.http(), "/a%20b/?x=1&y=2", None, &[]).await;
    assert_eq!(reply.status, StatusCode::FOUND, "{reply:?}");
    assert_eq!(
        reply.headers[header::LOCATION],
        "https://login.example/oauth2/start?rd=http://auth.example%2Fa%2520b%2F%3Fx%3D1%26y%3D2"
    );

    // Nothing listens there: 500, never the upstream.
    let closed = TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let gone = closed.local_addr().unwrap();
    drop(closed);
    h.apply(&objects(addr_of(&web), gone, &[]));
    let reply = send(h.http(), "/echo/", Some("good"), &[]).await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn an_unusable_auth_url_refuses_the_routes() {
    let web = start_backend("web").await;
    let mut h = Harness::start();
    let mut all = objects(addr_of(&web), "127.0.0.1:1".parse().unwrap(), &[]);
    all.last_mut().unwrap()["metadata"]["annotations"]["nginx.ingress.kubernetes.io/auth-url"] =
        json!("http://auth_server.example.com/check");
    let compiled = h.apply_allowing_diagnostics(&all);
    assert!(
        compiled
            .diagnostics
            .iter()
            .any(|d| d.reason.contains("auth-url") && d.reason.contains("invalid host")),
        "{:?}",
        compiled.diagnostics
    );
    assert_eq!(
        send(h.http(), "/echo/", Some("good"), &[]).await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn simultaneous_requests_with_one_cache_key_make_one_sub_request() {
    let Setup {
        web,
        auth,
        seen,
        mut h,
    } = setup().await;
    h.apply(&objects(
        addr_of(&web),
        auth,
        &[
            ("auth-cache-key", "$http_authorization"),
            ("auth-response-headers", "X-Auth-Request-User"),
        ],
    ));
    // 20 clients at once on both workers, one key: one sub-request, the others wait for it.
    let proxy = h.http();
    let clients: Vec<_> = (0..20)
        .map(|_| tokio::spawn(async move { send(proxy, "/echo/", Some("cached"), &[]).await }))
        .collect();
    for client in clients {
        let reply = client.await.unwrap();
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.json()["headers"]["x-auth-request-user"], "carl");
    }
    assert_eq!(seen.lock().unwrap().len(), 1);
    // Later requests: from the cache.
    assert_eq!(send(proxy, "/echo/", Some("cached"), &[]).await.status, 200);
    assert_eq!(seen.lock().unwrap().len(), 1);
    // Another key asks again; an answer with a cookie is never kept.
    assert_eq!(send(proxy, "/echo/", Some("good"), &[]).await.status, 200);
    assert_eq!(send(proxy, "/echo/", Some("good"), &[]).await.status, 200);
    assert_eq!(seen.lock().unwrap().len(), 3);
    let metrics = get(h.admin(), "admin", "/metrics").await.text();
    let count = |result: &str| -> u64 {
        let prefix = format!("sluice_auth_requests_total{{result=\"{result}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no {result} count:\n{metrics}"))
            .parse()
            .unwrap()
    };
    assert_eq!(count("miss"), 3);
    assert_eq!(count("hit") + count("shared"), 20);
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn an_auth_refusal_carries_the_routes_cors_headers() {
    let Setup {
        web,
        auth,
        seen,
        mut h,
    } = setup().await;
    h.apply_allowing_diagnostics(&objects(addr_of(&web), auth, &[("enable-cors", "true")]));
    let reply = send(h.http(), "/echo/", None, &[("origin", "https://a.example")]).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert_eq!(reply.headers[header::ACCESS_CONTROL_ALLOW_ORIGIN], "*");
    // A preflight is answered before authentication, as ingress-nginx's rewrite phase does.
    let mut request = Request::builder()
        .method("OPTIONS")
        .uri("/echo/")
        .header("host", "auth.example")
        .header("origin", "https://a.example")
        .body(Full::default())
        .unwrap();
    request
        .headers_mut()
        .insert("access-control-request-method", "PUT".parse().unwrap());
    let before = seen.lock().unwrap().len();
    let reply = Client::connect(h.http()).await.send(request).await.unwrap();
    assert_eq!(reply.status, StatusCode::NO_CONTENT);
    assert_eq!(
        seen.lock().unwrap().len(),
        before,
        "no sub-request for a preflight"
    );
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn an_auth_url_naming_a_host_sluice_serves_is_routed_by_sluice_s_rules() {
    let Setup {
        web,
        auth,
        seen,
        mut h,
    } = setup().await;
    let mut all = objects(addr_of(&web), auth, &[]);
    all.last_mut().unwrap()["metadata"]["annotations"]["nginx.ingress.kubernetes.io/auth-url"] =
        json!("http://login.example/check");
    all.push(service("login", &[("http", 80)]));
    all.extend(slices("login", &[auth]));
    all.push(ingress(
        "login",
        json!({"rules": [rule("login.example", vec![path("/check", "Exact", to("login"))])]}),
    ));
    h.apply(&all);
    let reply = send(h.http(), "/echo/", Some("good"), &[]).await;
    assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
    let sub = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(sub.target, "/check");
    assert_eq!(sub.headers["host"], "login.example");
    assert_eq!(send(h.http(), "/echo/", None, &[]).await.status, 401);
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn global_auth_covers_ingresses_without_their_own_and_no_auth_locations_stay_open() {
    let Setup {
        web,
        auth,
        seen,
        mut h,
    } = setup().await;
    let global = format!("http://{auth}/global");
    let mut all = vec![
        settings(&[
            ("global-auth-url", global.as_str()),
            ("global-auth-response-headers", "X-Auth-Request-User"),
        ]),
        service("web", &[("http", 80)]),
    ];
    all.extend(slices("web", &[addr_of(&web)]));
    let paths = || {
        vec![
            path("/", "Prefix", to("web")),
            path("/.well-known/acme-challenge", "Prefix", to("web")),
        ]
    };
    all.push(ingress(
        "covered",
        json!({"rules": [rule("covered.example", paths())]}),
    ));
    all.push(annotated(
        "opted-out",
        &[("enable-global-auth", "false")],
        json!({"rules": [rule("open.example", paths())]}),
    ));
    let own = format!("http://{auth}/own");
    all.push(annotated(
        "own",
        &[("auth-url", own.as_str())],
        json!({"rules": [rule("own.example", paths())]}),
    ));
    h.apply(&all);
    let ask = |host: &'static str, path: &'static str, token: Option<&'static str>| {
        let proxy = h.http();
        async move {
            let mut request = Request::get(path).header("host", host);
            if let Some(token) = token {
                request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
            }
            let request = request.body(Full::default()).unwrap();
            Client::connect(proxy).await.send(request).await.unwrap()
        }
    };
    assert_eq!(ask("covered.example", "/echo/", None).await.status, 401);
    let reply = ask("covered.example", "/echo/", Some("good")).await;
    assert_eq!(reply.json()["headers"]["x-auth-request-user"], "ann");
    assert_eq!(seen.lock().unwrap().last().unwrap().target, "/global");
    // ACME challenges renew certificates without a login (no-auth-locations' default).
    let before = seen.lock().unwrap().len();
    let path = "/.well-known/acme-challenge/token";
    assert_eq!(ask("covered.example", path, None).await.status, 404);
    assert_eq!(ask("own.example", path, None).await.status, 404);
    assert_eq!(seen.lock().unwrap().len(), before, "no sub-request there");
    // Opted out: open; its own auth-url: its own URL, not the global one.
    assert_eq!(ask("open.example", "/echo/", None).await.status, 200);
    assert_eq!(ask("own.example", "/echo/", None).await.status, 401);
    assert_eq!(seen.lock().unwrap().last().unwrap().target, "/own");
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn a_declared_body_over_the_limit_is_refused_before_the_auth_server_is_asked() {
    let Setup {
        web,
        auth,
        seen,
        mut h,
    } = setup().await;
    h.apply(&objects(addr_of(&web), auth, &[("proxy-body-size", "1k")]));
    let request = Request::post("/echo/")
        .header("host", "auth.example")
        .body(Full::new(Bytes::from(vec![b'x'; 4096])))
        .unwrap();
    let reply = Client::connect(h.http()).await.send(request).await.unwrap();
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        seen.lock().unwrap().is_empty(),
        "nginx checks the length first"
    );
    shutdown(h.control.proxy).await;
}
