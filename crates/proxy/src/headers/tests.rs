use super::*;
use http::Request;

fn parts(build: http::request::Builder) -> Parts {
    build.body(()).unwrap().into_parts().0
}

/// The headers as the upstream sees them: the map, then the added ones.
fn sent(p: &Parts, added: &Added<'_>) -> HeaderMap {
    let mut out = Vec::new();
    added.write(&mut out, p, p.headers.get(header::HOST));
    let mut headers = p.headers.clone();
    for line in String::from_utf8(out).unwrap().split_terminator("\r\n") {
        let (name, value) = line.split_once(": ").unwrap();
        headers.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    headers
}

fn forwarded<'a>(ip: &'a HeaderValue, port: &'a HeaderValue, trust: bool) -> Forwarded<'a> {
    Forwarded {
        trust_incoming: trust,
        ..Forwarded::direct(ip, port, true)
    }
}

#[test]
fn hop_by_hop_headers_and_the_ones_connection_names_are_removed() {
    let mut p = parts(
        Request::get("/a?b=c")
            .header("host", "example.com")
            .header("connection", "keep-alive, X-Secret")
            .header("x-secret", "1")
            .header("keep-alive", "timeout=5")
            .header("te", "trailers")
            .header("transfer-encoding", "chunked")
            .header("upgrade", "h2c")
            .header("proxy-authorization", "Basic x")
            .header("x-kept", "yes"),
    );
    let ip = HeaderValue::from_static("192.0.2.1");
    let port = HeaderValue::from_static("443");
    prepare_request(&mut p, &forwarded(&ip, &port, false), false);
    for gone in [
        "connection",
        "x-secret",
        "keep-alive",
        "te",
        "transfer-encoding",
        "upgrade",
        "proxy-authorization",
    ] {
        assert!(!p.headers.contains_key(gone), "{gone} should be removed");
    }
    assert_eq!(p.headers["x-kept"], "yes");
    assert_eq!(p.uri, "/a?b=c");
    assert_eq!(p.version, Version::HTTP_11);
}

#[test]
fn websocket_upgrades_keep_upgrade_and_connection() {
    let mut p = parts(
        Request::get("/ws")
            .header("connection", "Upgrade")
            .header("upgrade", "websocket"),
    );
    assert!(is_websocket_upgrade(&p.headers));
    let ip = HeaderValue::from_static("192.0.2.1");
    let port = HeaderValue::from_static("80");
    prepare_request(&mut p, &forwarded(&ip, &port, false), true);
    assert_eq!(p.headers["connection"], "upgrade");
    assert_eq!(p.headers["upgrade"], "websocket");
}

#[test]
fn forwarded_headers_are_replaced_unless_trusted() {
    let build = || {
        Request::get("/")
            .header("host", "shop.example.com")
            .header("x-forwarded-for", "203.0.113.9")
            .header("x-forwarded-proto", "http")
            .header("x-request-id", "abc")
    };
    let ip = HeaderValue::from_static("192.0.2.1");
    let port = HeaderValue::from_static("443");

    let mut p = parts(build());
    let added = prepare_request(&mut p, &forwarded(&ip, &port, false), false);
    let headers = sent(&p, &added);
    assert_eq!(headers["x-forwarded-for"], "192.0.2.1");
    assert_eq!(headers["x-forwarded-proto"], "https");
    assert_eq!(headers["x-forwarded-host"], "shop.example.com");
    assert_eq!(headers["x-forwarded-port"], "443");
    assert_eq!(headers["x-real-ip"], "192.0.2.1");
    assert_eq!(headers["x-request-id"], "abc");
    for name in ["x-forwarded-for", "x-forwarded-proto", "x-request-id"] {
        assert_eq!(headers.get_all(name).iter().count(), 1, "{name}");
    }

    // Trusted (the client address is the caller's business: here the peer's), the
    // scheme is the peer's, the chain is not kept without compute-full-forwarded-for.
    let mut p = parts(build());
    let added = prepare_request(&mut p, &forwarded(&ip, &port, true), false);
    let headers = sent(&p, &added);
    assert_eq!(headers["x-forwarded-for"], "192.0.2.1");
    assert_eq!(headers["x-original-forwarded-for"], "203.0.113.9");
    assert_eq!(headers["x-forwarded-proto"], "http");
    assert_eq!(headers["x-forwarded-scheme"], "http");
    assert_eq!(headers["x-scheme"], "http");
    assert_eq!(headers["x-forwarded-host"], "shop.example.com");
    for name in ["x-forwarded-for", "x-forwarded-proto", "x-scheme"] {
        assert_eq!(headers.get_all(name).iter().count(), 1, "{name}");
    }

    // Without any of them, every one is added, with a fresh request ID.
    let mut p = parts(Request::get("/").header("host", "shop.example.com"));
    let added = prepare_request(&mut p, &forwarded(&ip, &port, false), false);
    assert!(
        p.headers.len() == 1,
        "the map is left alone: {:?}",
        p.headers
    );
    let headers = sent(&p, &added);
    assert_eq!(headers.len(), 9, "{headers:?}");
    assert_eq!(headers["x-request-id"].len(), 32);
    assert_eq!(headers["x-forwarded-scheme"], "https");
    assert_eq!(headers["x-scheme"], "https");
}

#[test]
fn a_trusted_chain_is_extended_and_the_originals_are_passed_on() {
    let ip = HeaderValue::from_static("10.0.0.9");
    let port = HeaderValue::from_static("443");
    let client: IpAddr = "203.0.113.7".parse().unwrap();
    let build = || {
        Request::get("/")
            .header("host", "shop.example.com")
            .header("x-forwarded-for", "6.6.6.6")
            .header("x-forwarded-for", "203.0.113.7")
            .header("x-forwarded-host", "www.example.com, lb.internal")
            .header("x-forwarded-proto", "https")
            .header("x-forwarded-port", "8443")
            .header("x-real-ip", "6.6.6.6")
            .header("x-scheme", "ftp")
            .header("x-original-forwarded-for", "6.6.6.6")
            .header("proxy", "http://evil.example.com")
    };
    let trusted = |full| Forwarded {
        client: Some(client),
        trust_incoming: true,
        full_forwarded_for: full,
        ..Forwarded::direct(&ip, &port, false)
    };

    let mut p = parts(build());
    let added = prepare_request(&mut p, &trusted(true), false);
    let headers = sent(&p, &added);
    assert_eq!(headers["x-real-ip"], "203.0.113.7");
    assert_eq!(headers["x-forwarded-for"], "6.6.6.6, 203.0.113.7, 10.0.0.9");
    assert_eq!(headers["x-original-forwarded-for"], "6.6.6.6, 203.0.113.7");
    assert_eq!(headers["x-forwarded-host"], "www.example.com");
    assert_eq!(
        headers["x-original-forwarded-host"],
        "www.example.com, lb.internal"
    );
    assert_eq!(headers["x-forwarded-proto"], "https");
    assert_eq!(headers["x-forwarded-scheme"], "https");
    assert_eq!(headers["x-scheme"], "https");
    assert_eq!(headers["x-forwarded-port"], "8443");
    assert!(!headers.contains_key("proxy"), "{headers:?}");
    for name in [
        "x-forwarded-for",
        "x-real-ip",
        "x-scheme",
        "x-original-forwarded-for",
    ] {
        assert_eq!(headers.get_all(name).iter().count(), 1, "{name}");
    }

    // Without compute-full-forwarded-for: the client address alone.
    let mut p = parts(build());
    let added = prepare_request(&mut p, &trusted(false), false);
    assert_eq!(sent(&p, &added)["x-forwarded-for"], "203.0.113.7");

    // Untrusted: nothing of it is believed; the originals still travel, renamed.
    let mut p = parts(build());
    let added = prepare_request(&mut p, &Forwarded::direct(&ip, &port, false), false);
    let headers = sent(&p, &added);
    assert_eq!(headers["x-real-ip"], "10.0.0.9");
    assert_eq!(headers["x-forwarded-for"], "10.0.0.9");
    assert_eq!(headers["x-forwarded-host"], "shop.example.com");
    assert_eq!(headers["x-forwarded-proto"], "http");
    assert_eq!(headers["x-scheme"], "http");
    assert_eq!(headers["x-forwarded-port"], "443");
    assert_eq!(headers["x-original-forwarded-for"], "6.6.6.6, 203.0.113.7");
}

#[test]
fn the_original_uri_is_the_target_as_sent_and_a_custom_header_is_the_original_for() {
    let ip = HeaderValue::from_static("10.0.0.9");
    let port = HeaderValue::from_static("80");
    let f = Forwarded {
        original_uri: true,
        custom_forwarded_for: Some("cf-connecting-ip"),
        generate_request_id: false,
        ..Forwarded::direct(&ip, &port, false)
    };
    let mut p = parts(
        Request::get("/a/b?x=1")
            .header("x-original-uri", "/forged")
            .header("x-forwarded-for", "6.6.6.6")
            .header("cf-connecting-ip", "203.0.113.7"),
    );
    let added = prepare_request(&mut p, &f, false);
    let headers = sent(&p, &added);
    assert_eq!(headers["x-original-uri"], "/a/b?x=1");
    assert_eq!(headers["x-original-forwarded-for"], "203.0.113.7");
    assert_eq!(headers["cf-connecting-ip"], "203.0.113.7");
    assert!(!headers.contains_key("x-request-id"), "{headers:?}");

    // forwarded-for-header may name one of the proxy's own headers (X-Real-IP, set by
    // an nginx in front): it is read before the proxy replaces it.
    let real_ip = Forwarded {
        custom_forwarded_for: Some("x-real-ip"),
        client: Some("203.0.113.7".parse().unwrap()),
        ..Forwarded::direct(&ip, &port, false)
    };
    let mut p = parts(Request::get("/").header("x-real-ip", "203.0.113.7"));
    let added = prepare_request(&mut p, &real_ip, false);
    let headers = sent(&p, &added);
    assert_eq!(headers["x-original-forwarded-for"], "203.0.113.7");
    assert_eq!(headers["x-real-ip"], "203.0.113.7");
    assert_eq!(headers.get_all("x-real-ip").iter().count(), 1);

    // Changed on the way (normalised, rewritten): the target the client sent.
    let mut p = parts(Request::get("/b"));
    p.extensions
        .insert(OriginalTarget(PathAndQuery::from_static("/a/../b?%7e")));
    let added = prepare_request(&mut p, &f, false);
    let headers = sent(&p, &added);
    assert_eq!(headers["x-original-uri"], "/a/../b?%7e");
    assert_eq!(headers.get_all("x-original-uri").iter().count(), 1);
    // Off (the default): nothing is added, and the client's passes as ingress-nginx's.
    let mut p = parts(Request::get("/a").header("x-original-uri", "/mine"));
    let added = prepare_request(&mut p, &Forwarded::direct(&ip, &port, false), false);
    assert_eq!(sent(&p, &added)["x-original-uri"], "/mine");
}

#[test]
fn http2_requests_get_host_from_authority_and_one_cookie() {
    let mut p = parts(
        Request::get("https://shop.example.com:8443/cart?x=1")
            .version(Version::HTTP_2)
            .header("cookie", "a=1")
            .header("cookie", "b=2"),
    );
    let ip = HeaderValue::from_static("192.0.2.1");
    let port = HeaderValue::from_static("443");
    prepare_request(&mut p, &forwarded(&ip, &port, false), false);
    assert_eq!(p.headers["host"], "shop.example.com:8443");
    assert_eq!(p.uri, "/cart?x=1");
    assert_eq!(p.headers["cookie"], "a=1; b=2");
    assert_eq!(p.version, Version::HTTP_11);
}

#[test]
fn request_ids_are_32_hex_digits() {
    let id = request_id();
    assert!(id.iter().all(u8::is_ascii_hexdigit));
    assert_ne!(id, request_id());
}

#[test]
fn the_http2_map_gets_the_same_added_headers_as_the_http1_lines() {
    // Every header `write` can add: a trusted chain and host, a rewritten target.
    let mut p = parts(
        Request::get("/a?b=c")
            .header("host", "shop.example.com")
            .header("x-forwarded-for", "203.0.113.9")
            .header("x-forwarded-host", "edge.example.com, other")
            .header("x-request-id", "abc"),
    );
    let ip = HeaderValue::from_static("192.0.2.1");
    let port = HeaderValue::from_static("443");
    let added = prepare_request(&mut p, &forwarded(&ip, &port, true), false);
    let lines = sent(&p, &added);
    let host = p.headers.get(header::HOST).cloned();
    let mut mapped = parts(Request::get(p.uri.clone()));
    mapped.headers = p.headers.clone();
    added.insert_into(&mut mapped, host.as_ref());
    assert_eq!(mapped.headers, lines);
    assert!(lines.contains_key("x-original-forwarded-host"), "{lines:?}");
}
