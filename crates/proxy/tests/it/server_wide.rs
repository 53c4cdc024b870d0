//! The ConfigMap keys that hold for every host and path, over real sockets: the block lists
//! (`block-cidrs`, `block-user-agents`, `block-referers`), the answers' headers
//! (`server-tokens`, `allow-backend-server-header`, `hide-headers`), the routes kept on plain
//! HTTP (`no-tls-redirect-locations`) and `retry-non-idempotent`.

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::Full;
use serde_json::json;

use crate::support::*;

const UPSTREAM_ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\nServer: Apache/2.4.1 (Unix)\r\n\
X-Powered-By: PHP/5.6\r\nX-Kept: yes\r\nContent-Length: 2\r\n\r\nok";

async fn send(
    addr: std::net::SocketAddr,
    method: Method,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Reply {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", host);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut client = Client::connect(addr).await;
    client
        .send(request.body(Full::<Bytes>::default()).unwrap())
        .await
        .expect("an answer")
}

fn site(host: &str, service: &str) -> serde_json::Value {
    ingress(
        host,
        json!({"rules": [rule(host, vec![path("/", "Prefix", to(service))])]}),
    )
}

#[tokio::test]
async fn block_lists_answer_403_everywhere_before_routing() {
    let echo = start_backend("echo").await;
    let mut h = Harness::start();
    let mut objects = vec![
        service("echo", &[("http", 80)]),
        site("shop.example.com", "echo"),
        settings(&[
            (
                "block-user-agents",
                "~*badbot, EvilScanner/1.0, ~(?=look-around)",
            ),
            ("block-referers", "~*spam\\.example"),
        ]),
    ];
    objects.extend(slices("echo", &[addr_of(&echo)]));
    let compiled = h.apply_allowing_diagnostics(&objects);
    let diagnostics: Vec<String> = compiled
        .diagnostics
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        diagnostics
            .iter()
            .any(|d| d.contains("data.block-user-agents: entry left out")
                && d.contains("look-around")),
        "{diagnostics:?}"
    );
    let http = h.http();
    let shop = "shop.example.com";
    let ok = send(
        http,
        Method::GET,
        shop,
        "/echo",
        &[("user-agent", "Mozilla/5.0")],
    )
    .await;
    assert_eq!(ok.status, StatusCode::OK);
    for agent in ["Mozilla/5.0 (compatible; BadBot/2.1)", "evilscanner/1.0"] {
        let reply = send(http, Method::GET, shop, "/echo", &[("user-agent", agent)]).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{agent}");
    }
    // A whole-value entry does not match a longer value.
    let longer = send(
        http,
        Method::GET,
        shop,
        "/",
        &[("user-agent", "EvilScanner/1.0 x")],
    )
    .await;
    assert_eq!(longer.status, StatusCode::OK);
    // Unrouted hosts too: the lists come before routing (ingress-nginx's server blocks).
    let unrouted = send(
        http,
        Method::GET,
        "nobody.example.com",
        "/",
        &[("user-agent", "badbot")],
    );
    assert_eq!(unrouted.await.status, StatusCode::FORBIDDEN);
    let spam = [("referer", "https://SPAM.example/offer")];
    assert_eq!(
        send(http, Method::GET, shop, "/", &spam).await.status,
        StatusCode::FORBIDDEN
    );

    // block-cidrs: 127.0.0.1 is the test client.
    objects.push(settings(&[("block-cidrs", "192.0.2.0/24, 127.0.0.0/8")]));
    h.apply(&objects);
    assert_eq!(get(http, shop, "/echo").await.status, StatusCode::FORBIDDEN);
    // A bad entry refuses every route rather than dropping the list.
    objects.push(settings(&[("block-cidrs", "127.0.0.300")]));
    let compiled = h.apply_allowing_diagnostics(&objects);
    assert!(compiled
        .diagnostics
        .iter()
        .any(|d| d.to_string().contains("data.block-cidrs: invalid value")));
    assert_eq!(
        get(http, shop, "/echo").await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    objects.push(settings(&[("block-cidrs", "192.0.2.0/24")]));
    h.apply(&objects);
    assert_eq!(get(http, shop, "/echo").await.status, StatusCode::OK);
}

#[tokio::test]
async fn answers_carry_no_server_header_unless_server_tokens_say_so() {
    let (upstream, _) = start_fixed_backend(UPSTREAM_ANSWER).await;
    let mut h = Harness::start();
    let mut objects = vec![
        service("legacy", &[("http", 80)]),
        site("legacy.example.com", "legacy"),
    ];
    objects.extend(slices("legacy", &[upstream]));
    h.apply(&objects);
    let http = h.http();
    let host = "legacy.example.com";

    // ingress-nginx's default: no Server at all, the upstream's cleared.
    let reply = get(http, host, "/").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(!reply.headers.contains_key("server"), "{:?}", reply.headers);
    assert_eq!(reply.headers["x-powered-by"], "PHP/5.6");
    assert!(!get(http, "nobody.example.com", "/")
        .await
        .headers
        .contains_key("server"));

    objects.push(settings(&[
        ("server-tokens", "true"),
        ("hide-headers", "X-Powered-By"),
    ]));
    h.apply(&objects);
    let reply = get(http, host, "/").await;
    let product = reply.headers["server"].to_str().unwrap().to_owned();
    assert!(product.starts_with("sluice/"), "{product}");
    assert!(
        !reply.headers.contains_key("x-powered-by"),
        "{:?}",
        reply.headers
    );
    assert_eq!(reply.headers["x-kept"], "yes");
    // Sluice's own answers name it too.
    let own = get(http, "nobody.example.com", "/").await;
    assert_eq!(own.status, StatusCode::NOT_FOUND);
    assert_eq!(own.headers["server"], product.as_str());

    objects.push(settings(&[
        ("server-tokens", "true"),
        ("allow-backend-server-header", "true"),
    ]));
    h.apply(&objects);
    let reply = get(http, host, "/").await;
    assert_eq!(reply.headers["server"], "Apache/2.4.1 (Unix)");
    assert_eq!(reply.headers["x-powered-by"], "PHP/5.6");

    // Without server-tokens ingress-nginx clears it whatever allow-backend-server-header says.
    objects.push(settings(&[("allow-backend-server-header", "true")]));
    h.apply(&objects);
    assert!(!get(http, host, "/").await.headers.contains_key("server"));

    objects.push(settings(&[("hide-headers", "X-Powered-By, not a name")]));
    let compiled = h.apply_allowing_diagnostics(&objects);
    assert!(compiled
        .diagnostics
        .iter()
        .any(|d| d.to_string().contains("data.hide-headers: invalid value")));
    assert_eq!(
        get(http, host, "/").await.headers["x-powered-by"],
        "PHP/5.6"
    );
}

#[tokio::test]
async fn acme_challenges_stay_on_plain_http_while_the_host_redirects() {
    let echo = start_backend("echo").await;
    let ca = TestCa::new();
    let leaf = ca.leaf(&["secure.example.com"]);
    let mut h = Harness::start();
    let host = "secure.example.com";
    let mut objects = vec![
        service("echo", &[("http", 80)]),
        service("solver", &[("http", 80)]),
        tls_secret("secure-tls", &leaf),
        ingress(
            "secure",
            json!({
                "tls": [{"hosts": [host], "secretName": "secure-tls"}],
                "rules": [rule(host, vec![path("/", "Prefix", to("echo"))])],
            }),
        ),
        // cert-manager's HTTP-01 solver Ingress: its own, without TLS (sent to the echo
        // backend's /echo, so the answer says who made it).
        annotated(
            "solver",
            &[("rewrite-target", "/echo/acme")],
            json!({"rules": [rule(host, vec![path(
                "/.well-known/acme-challenge/token123", "Exact", to("solver"))])]}),
        ),
    ];
    objects.extend(slices("echo", &[addr_of(&echo)]));
    objects.extend(slices("solver", &[addr_of(&echo)]));
    h.apply_allowing_diagnostics(&objects);
    let http = h.http();
    let challenge = "/.well-known/acme-challenge/token123";
    let answered = get(http, host, challenge).await;
    assert_eq!(answered.status, StatusCode::OK);
    assert_eq!(answered.backend(), "echo");
    assert_eq!(
        get(http, host, "/cart").await.status,
        StatusCode::PERMANENT_REDIRECT
    );

    // force-ssl-redirect does not move it either; another list does.
    objects.push(settings(&[("force-ssl-redirect", "true")]));
    h.apply_allowing_diagnostics(&objects);
    assert_eq!(get(http, host, challenge).await.status, StatusCode::OK);
    objects.push(settings(&[("no-tls-redirect-locations", "/status, /cart")]));
    h.apply_allowing_diagnostics(&objects);
    assert_eq!(
        get(http, host, challenge).await.status,
        StatusCode::PERMANENT_REDIRECT
    );
    // `/cart` is no route's path as written (the `/` route serves it): still redirected.
    assert_eq!(
        get(http, host, "/cart").await.status,
        StatusCode::PERMANENT_REDIRECT
    );
}

#[tokio::test]
async fn retry_non_idempotent_sends_a_failed_post_to_the_next_endpoint() {
    // The first endpoint takes the request and closes without an answer: the POST may have
    // had its effect there, so nginx retries it only with non_idempotent.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in dead.incoming().flatten() {
            let mut stream = stream;
            let mut buffer = [0u8; 4096];
            let _ = std::io::Read::read(&mut stream, &mut buffer);
        }
    });
    let echo = start_backend("echo").await;
    let mut h = Harness::start();
    let mut objects = vec![
        service("pair", &[("http", 80)]),
        ingress(
            "pair",
            json!({"rules": [rule("pair.example.com", vec![path("/", "Prefix", to("pair"))])]}),
        ),
        settings(&[("load-balance", "round_robin")]),
    ];
    objects.extend(slices("pair", &[dead_addr, addr_of(&echo)]));
    h.apply(&objects);
    let post = |h: &Harness| send(h.http(), Method::POST, "pair.example.com", "/echo", &[]);
    // Round robin: each worker alternates, so of six POSTs some go to the dead endpoint
    // first, and are not retried.
    let mut failed = 0;
    for _ in 0..6 {
        let status = post(&h).await.status;
        assert!(
            [StatusCode::OK, StatusCode::BAD_GATEWAY].contains(&status),
            "{status}"
        );
        failed += usize::from(status == StatusCode::BAD_GATEWAY);
    }
    assert!(failed >= 2, "{failed} of 6 POSTs failed");

    objects.push(settings(&[("retry-non-idempotent", "true")]));
    h.apply(&objects);
    for _ in 0..6 {
        assert_eq!(post(&h).await.status, StatusCode::OK);
    }
}

#[tokio::test]
async fn header_names_nginx_calls_invalid_are_dropped_unless_allowed() {
    let echo = start_backend("echo").await;
    let mut h = Harness::start();
    let mut objects = vec![
        service("echo", &[("http", 80)]),
        site("names.example.com", "echo"),
    ];
    objects.extend(slices("echo", &[addr_of(&echo)]));
    h.apply(&objects);
    let names = [("x-plain", "1"), ("x.dotted", "2"), ("x_under", "3")];
    let seen = |reply: Reply| {
        let echo = reply.json();
        ["x-plain", "x.dotted", "x_under"].map(|n| echo["headers"].get(n).is_some())
    };
    let host = "names.example.com";
    let reply = send(h.http(), Method::GET, host, "/echo", &names).await;
    assert_eq!(seen(reply), [true, false, false], "nginx's defaults");

    objects.push(settings(&[("enable-underscores-in-headers", "true")]));
    h.apply(&objects);
    let reply = send(h.http(), Method::GET, host, "/echo", &names).await;
    assert_eq!(seen(reply), [true, false, true]);

    objects.push(settings(&[("ignore-invalid-headers", "false")]));
    h.apply(&objects);
    let reply = send(h.http(), Method::GET, host, "/echo", &names).await;
    assert_eq!(seen(reply), [true, true, true], "every name goes on");
}

#[tokio::test]
async fn upstream_keepalive_time_retires_a_busy_connection() {
    const ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let (upstream, counts) = start_fixed_backend(ANSWER).await;
    let mut h = Harness::with_workers(1);
    let mut objects = vec![
        service("kept", &[("http", 80)]),
        site("kept.example.com", "kept"),
        settings(&[("upstream-keepalive-time", "1s")]),
    ];
    objects.extend(slices("kept", &[upstream]));
    h.apply(&objects);
    let host = "kept.example.com";
    for _ in 0..2 {
        assert_eq!(get(h.http(), host, "/").await.status, StatusCode::OK);
    }
    assert_eq!(counts.connections(), 1, "pooled between requests");
    // Older than a second: the request it carries is its last.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(get(h.http(), host, "/").await.status, StatusCode::OK);
    assert_eq!(
        counts.connections(),
        1,
        "the old connection carries one more request"
    );
    assert_eq!(get(h.http(), host, "/").await.status, StatusCode::OK);
    assert_eq!(counts.connections(), 2, "then a new one is opened");
    assert_eq!(counts.requests(), 4);
}
