//! The real client address and the headers the proxy sets upstream, as ingress-nginx's
//! template sets them (`rootfs/etc/nginx/template/nginx.tmpl`, the `location` block, and
//! `lua_ingress.lua` for use-forwarded-headers): plain clients over HTTP/1.1 and HTTP/2,
//! behind a trusted proxy (the peer in `proxy-real-ip-cidr`), behind an untrusted one.
//!
//! Every address on 127.0.0.0/8 is loopback on Linux: a "proxy in front" is a client whose
//! socket is bound to 127.0.0.2, so trusted and untrusted peers are real connections.

use std::net::{Ipv4Addr, SocketAddr};

use crate::support::*;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;
use serde_json::{json, Value};

/// The address a trusted load balancer in front connects from.
const LOAD_BALANCER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

/// A client chain as a cloud load balancer would pass it: the client forged `6.6.6.6`, the
/// real client is 203.0.113.7, and 10.0.0.5 is an internal proxy hop.
const CHAIN: &str = "6.6.6.6, 203.0.113.7, 10.0.0.5";

/// An HTTP/1.1 connection to `addr` from `source`.
async fn connect_from(source: Ipv4Addr, addr: SocketAddr) -> Client {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from((source, 0))).unwrap();
    let stream = bounded(socket.connect(addr)).await.expect("connect");
    Client::over(stream).await
}

/// The headers the echo backend saw for a request through the proxy from `source`.
async fn seen_from(h: &Harness, source: Ipv4Addr, extra: &[(&str, &str)]) -> Value {
    let mut request = Request::get("/echo/x?q=1").header("host", "shop.example.com");
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let request = request.body(Full::<Bytes>::default()).unwrap();
    let reply = connect_from(source, h.http())
        .await
        .send(request)
        .await
        .expect("request succeeds");
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    reply.json()["headers"].clone()
}

async fn site(data: &[(&str, &str)]) -> (Harness, backend::Backend) {
    let echo = start_backend("echo").await;
    let mut h = Harness::start();
    let mut objects = catch_all("echo", &[addr_of(&echo)]);
    objects.push(settings(data));
    h.apply(&objects);
    (h, echo)
}

/// What a request from a load balancer carries, beside `X-Forwarded-For`.
fn from_load_balancer(chain: &str) -> Vec<(&str, &str)> {
    vec![
        ("x-forwarded-for", chain),
        ("x-forwarded-proto", "https"),
        ("x-forwarded-port", "443"),
        ("x-forwarded-host", "www.example.com, lb.internal"),
        ("x-real-ip", "6.6.6.6"),
    ]
}

#[tokio::test]
async fn a_plain_client_gets_every_header_ingress_nginx_sets() {
    let (h, _echo) = site(&[]).await;
    let headers = seen_from(
        &h,
        Ipv4Addr::LOCALHOST,
        &[
            ("proxy", "http://evil.example.com:3128"),
            ("x-scheme", "https"),
            ("x-forwarded-scheme", "https"),
            ("x-original-forwarded-host", "forged.example.com"),
        ],
    )
    .await;
    assert_eq!(headers["x-real-ip"], "127.0.0.1");
    assert_eq!(headers["x-forwarded-for"], "127.0.0.1");
    assert_eq!(headers["x-forwarded-host"], "shop.example.com");
    assert_eq!(headers["x-forwarded-port"], h.http().port().to_string());
    assert_eq!(headers["x-forwarded-proto"], "http");
    assert_eq!(headers["x-forwarded-scheme"], "http");
    assert_eq!(headers["x-scheme"], "http");
    let id = headers["x-request-id"].as_str().unwrap();
    assert!(
        id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{id}"
    );
    // httpoxy: never passed on; the client's versions of the proxy's headers are replaced.
    for absent in [
        "proxy",
        "x-original-uri",
        "x-original-forwarded-for",
        "x-original-forwarded-host",
    ] {
        assert!(headers.get(absent).is_none(), "{absent}: {headers}");
    }
}

#[tokio::test]
async fn http2_clients_get_the_same_headers() {
    let echo = start_backend("echo").await;
    let ca = TestCa::new();
    let leaf = ca.leaf(&["shop.example.com"]);
    let mut h = Harness::start();
    let mut objects = catch_all("echo", &[addr_of(&echo)]);
    objects.push(tls_secret("shop-tls", &leaf));
    objects.push(ingress(
        "shop",
        json!({
            "tls": [{"hosts": ["shop.example.com"], "secretName": "shop-tls"}],
            "rules": [rule("shop.example.com", vec![path("/", "Prefix", to("echo"))])],
        }),
    ));
    objects.push(settings(&[("proxy-add-original-uri-header", "true")]));
    h.apply(&objects);

    let (tls, _) = ca
        .connect(h.https(), "shop.example.com", &[b"h2"])
        .await
        .unwrap();
    let mut client = H2Client::over(tls).await;
    let reply = client
        .get("https://shop.example.com/echo/a/../b?q=%41")
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    let seen = reply.json();
    assert_eq!(seen["path"], "/echo/b");
    let headers = &seen["headers"];
    assert_eq!(headers["x-real-ip"], "127.0.0.1");
    assert_eq!(headers["x-forwarded-for"], "127.0.0.1");
    assert_eq!(headers["x-forwarded-host"], "shop.example.com");
    assert_eq!(headers["x-forwarded-port"], h.https().port().to_string());
    assert_eq!(headers["x-forwarded-proto"], "https");
    assert_eq!(headers["x-forwarded-scheme"], "https");
    assert_eq!(headers["x-scheme"], "https");
    assert_eq!(headers["x-request-id"].as_str().unwrap().len(), 32);
    // The target as the client sent it, before normalising.
    assert_eq!(headers["x-original-uri"], "/echo/a/../b?q=%41");
}

#[tokio::test]
async fn the_original_uri_is_sent_only_when_asked_for() {
    let (h, _echo) = site(&[("proxy-add-original-uri-header", "true")]).await;
    let headers = seen_from(&h, Ipv4Addr::LOCALHOST, &[("x-original-uri", "/forged")]).await;
    assert_eq!(headers["x-original-uri"], "/echo/x?q=1");

    let mut client = Client::connect(h.http()).await;
    let reply = client.get("shop.example.com", "/echo/./y/..//z").await;
    assert_eq!(reply.json()["path"], "/echo/z");
    assert_eq!(reply.json()["headers"]["x-original-uri"], "/echo/./y/..//z");

    let (h, _echo) = site(&[]).await;
    let headers = seen_from(&h, Ipv4Addr::LOCALHOST, &[]).await;
    assert!(headers.get("x-original-uri").is_none(), "{headers}");
}

#[tokio::test]
async fn behind_a_trusted_proxy_the_client_is_the_first_untrusted_hop() {
    let trusted = [
        ("use-forwarded-headers", "true"),
        ("proxy-real-ip-cidr", "127.0.0.2/32, 10.0.0.0/8"),
    ];
    let (h, _echo) = site(&trusted).await;
    let headers = seen_from(&h, LOAD_BALANCER, &from_load_balancer(CHAIN)).await;
    // Right to left: 10.0.0.5 is a trusted hop, 203.0.113.7 is not: the client.
    assert_eq!(headers["x-real-ip"], "203.0.113.7");
    assert_eq!(headers["x-forwarded-for"], "203.0.113.7");
    assert_eq!(headers["x-original-forwarded-for"], CHAIN);
    // The load balancer's view of scheme, port and host is believed.
    assert_eq!(headers["x-forwarded-proto"], "https");
    assert_eq!(headers["x-forwarded-scheme"], "https");
    assert_eq!(headers["x-scheme"], "https");
    assert_eq!(headers["x-forwarded-port"], "443");
    assert_eq!(headers["x-forwarded-host"], "www.example.com");
    assert_eq!(
        headers["x-original-forwarded-host"],
        "www.example.com, lb.internal"
    );

    // compute-full-forwarded-for: the chain, and the peer that handed it over.
    let (h, _echo) = site(&[
        trusted[0],
        trusted[1],
        ("compute-full-forwarded-for", "true"),
    ])
    .await;
    let headers = seen_from(&h, LOAD_BALANCER, &from_load_balancer(CHAIN)).await;
    assert_eq!(headers["x-forwarded-for"], format!("{CHAIN}, 127.0.0.2"));
    assert_eq!(headers["x-real-ip"], "203.0.113.7");

    // enable-real-ip alone: the address is believed, the rest is not.
    let (h, _echo) = site(&[
        ("enable-real-ip", "true"),
        ("proxy-real-ip-cidr", "127.0.0.2"),
    ])
    .await;
    let headers = seen_from(&h, LOAD_BALANCER, &from_load_balancer("203.0.113.7")).await;
    assert_eq!(headers["x-real-ip"], "203.0.113.7");
    assert_eq!(headers["x-forwarded-for"], "203.0.113.7");
    assert_eq!(headers["x-forwarded-proto"], "http");
    assert_eq!(headers["x-forwarded-host"], "shop.example.com");
    assert_eq!(headers["x-forwarded-port"], h.http().port().to_string());

    // forwarded-for-header: the address comes from another header, which travels on as
    // X-Original-Forwarded-For.
    let (h, _echo) = site(&[
        ("enable-real-ip", "true"),
        ("forwarded-for-header", "CF-Connecting-IP"),
    ])
    .await;
    let headers = seen_from(
        &h,
        LOAD_BALANCER,
        &[
            ("cf-connecting-ip", "198.51.100.4"),
            ("x-forwarded-for", "6.6.6.6"),
        ],
    )
    .await;
    assert_eq!(headers["x-real-ip"], "198.51.100.4");
    assert_eq!(headers["x-forwarded-for"], "198.51.100.4");
    assert_eq!(headers["x-original-forwarded-for"], "198.51.100.4");
}

#[tokio::test]
async fn behind_an_untrusted_proxy_nothing_it_says_is_believed() {
    let (h, _echo) = site(&[
        ("use-forwarded-headers", "true"),
        ("compute-full-forwarded-for", "true"),
        ("proxy-real-ip-cidr", "127.0.0.2/32"),
    ])
    .await;
    // From 127.0.0.1, outside the trusted ranges.
    let headers = seen_from(&h, Ipv4Addr::LOCALHOST, &from_load_balancer(CHAIN)).await;
    assert_eq!(headers["x-real-ip"], "127.0.0.1");
    assert_eq!(headers["x-forwarded-for"], "127.0.0.1");
    assert_eq!(headers["x-forwarded-proto"], "http");
    assert_eq!(headers["x-scheme"], "http");
    assert_eq!(headers["x-forwarded-port"], h.http().port().to_string());
    assert_eq!(headers["x-forwarded-host"], "shop.example.com");
    // The originals still travel under their own names, as ingress-nginx sends them.
    assert_eq!(headers["x-original-forwarded-for"], CHAIN);

    // Trust switched off (the default): the trusted peer is a plain client too.
    let (h, _echo) = site(&[("proxy-real-ip-cidr", "127.0.0.2/32")]).await;
    let headers = seen_from(&h, LOAD_BALANCER, &from_load_balancer(CHAIN)).await;
    assert_eq!(headers["x-real-ip"], "127.0.0.2");
    assert_eq!(headers["x-forwarded-for"], "127.0.0.2");
    assert_eq!(headers["x-forwarded-proto"], "http");
}

/// Issue 24: the other headers frameworks read as the client's address, scheme, host, prefix
/// or request path. The path overrides never pass; the rest only from a trusted peer.
#[tokio::test]
async fn other_forwarded_claims_pass_only_from_a_trusted_peer_and_path_overrides_never() {
    let claims = [
        ("forwarded", "for=6.6.6.6;proto=https;host=evil.example"),
        ("x-forwarded-prefix", "/evil"),
        ("x-forwarded-ssl", "on"),
        ("x-forwarded-server", "evil.example"),
        ("x-forwarded-uri", "/admin"),
        ("true-client-ip", "6.6.6.6"),
        ("x-client-ip", "6.6.6.6"),
        ("client-ip", "6.6.6.6"),
        ("x-cluster-client-ip", "6.6.6.6"),
    ];
    let overrides = [("x-original-url", "/admin"), ("x-rewrite-url", "/admin")];
    let all: Vec<_> = claims.iter().chain(&overrides).copied().collect();
    let (h, _echo) = site(&[
        ("use-forwarded-headers", "true"),
        ("proxy-real-ip-cidr", "127.0.0.2/32"),
    ])
    .await;

    // A plain client (127.0.0.1, outside proxy-real-ip-cidr): none of them reaches the backend.
    let headers = seen_from(&h, Ipv4Addr::LOCALHOST, &all).await;
    for (name, _) in &all {
        assert!(headers.get(*name).is_none(), "{name} passed: {headers:#}");
    }

    // A trusted load balancer: its claims pass as it wrote them; the path overrides do not.
    let headers = seen_from(&h, LOAD_BALANCER, &all).await;
    for (name, value) in &claims {
        assert_eq!(headers[*name], *value, "{name}: {headers:#}");
    }
    for (name, _) in &overrides {
        assert!(headers.get(*name).is_none(), "{name} passed: {headers:#}");
    }

    // Trust off (the default): a plain client's are removed as well.
    let (h, _echo) = site(&[]).await;
    let headers = seen_from(&h, Ipv4Addr::LOCALHOST, &all).await;
    for (name, _) in &all {
        assert!(headers.get(*name).is_none(), "{name} passed: {headers:#}");
    }
}

#[tokio::test]
async fn a_bad_cidr_is_a_diagnostic_and_never_widens_the_trust() {
    let echo = start_backend("echo").await;
    let mut h = Harness::start();
    let mut objects = catch_all("echo", &[addr_of(&echo)]);
    objects.push(settings(&[
        ("use-forwarded-headers", "true"),
        ("proxy-real-ip-cidr", "127.0.0.2/32, 127.0.0.1/33"),
    ]));
    let compiled = h.apply_allowing_diagnostics(&objects);
    let reasons: Vec<String> = compiled.diagnostics.iter().map(|d| d.to_string()).collect();
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0].contains("proxy-real-ip-cidr: invalid entry \"127.0.0.1/33\""),
        "{reasons:?}"
    );
    // 127.0.0.1 stays untrusted (the default, every IPv4 peer, would trust it) ...
    let headers = seen_from(&h, Ipv4Addr::LOCALHOST, &from_load_balancer(CHAIN)).await;
    assert_eq!(headers["x-real-ip"], "127.0.0.1");
    // ... and the valid entry applies (10.0.0.5, a hop outside it, is the client now).
    let headers = seen_from(&h, LOAD_BALANCER, &from_load_balancer(CHAIN)).await;
    assert_eq!(headers["x-real-ip"], "10.0.0.5");
}

#[tokio::test]
async fn request_ids_are_kept_or_made_as_generate_request_id_says() {
    let (h, _echo) = site(&[("generate-request-id", "false")]).await;
    let headers = seen_from(&h, Ipv4Addr::LOCALHOST, &[]).await;
    assert!(headers.get("x-request-id").is_none(), "{headers}");
    let headers = seen_from(&h, Ipv4Addr::LOCALHOST, &[("x-request-id", "abc")]).await;
    assert_eq!(headers["x-request-id"], "abc");
}

#[tokio::test]
async fn the_https_redirect_names_the_host_a_trusted_load_balancer_forwarded() {
    let (h, _echo) = site(&[
        ("use-forwarded-headers", "true"),
        ("proxy-real-ip-cidr", "127.0.0.2/32"),
        ("force-ssl-redirect", "true"),
    ])
    .await;
    let redirect = |source: Ipv4Addr| {
        let addr = h.http();
        async move {
            let request = Request::get("/echo/x?q=1")
                .header("host", "shop.internal:8080")
                .header("x-forwarded-host", "shop.example.com, lb.internal")
                .header("x-forwarded-proto", "http")
                .body(Full::<Bytes>::default())
                .unwrap();
            let reply = connect_from(source, addr)
                .await
                .send(request)
                .await
                .expect("answered");
            assert_eq!(reply.status, StatusCode::PERMANENT_REDIRECT);
            reply.headers["location"].to_str().unwrap().to_owned()
        }
    };
    // ingress-nginx's $best_http_host: the first X-Forwarded-Host of a trusted peer.
    assert_eq!(
        redirect(LOAD_BALANCER).await,
        "https://shop.example.com/echo/x?q=1"
    );
    // Anyone else's is not believed: the Host header, without its port.
    assert_eq!(
        redirect(Ipv4Addr::LOCALHOST).await,
        "https://shop.internal/echo/x?q=1"
    );
    shutdown(h.control.proxy).await;
}
