//! The access log end to end: real requests through the proxy, lines read from its log file
//! (ingress-nginx's upstreaminfo format by default, `log-format-upstream` with its escapes,
//! retries listing every endpoint tried, and the switches that turn lines off).

use crate::support::*;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;
use serde_json::{json, Value};

/// The `web` Service with its endpoints and one Ingress for `log.test/`.
fn site(addrs: &[std::net::SocketAddr], annotations: Value) -> Vec<Value> {
    let mut ingress = ingress(
        "web",
        json!({"rules": [rule("log.test", vec![path("/", "Prefix", to("web"))])]}),
    );
    ingress["metadata"]["annotations"] = annotations;
    let mut objects = vec![service("web", &[("http", 80)]), ingress];
    objects.extend(slices("web", addrs));
    objects
}

/// Waits for the log to hold `n` lines and returns them.
async fn lines(h: &Harness, n: usize) -> Vec<String> {
    eventually_async(STEP, &format!("{n} access log line(s)"), || async {
        h.access_lines().len() >= n
    })
    .await;
    h.access_lines()
}

fn request(host: &str, target: &str, headers: &[(&str, &str)]) -> Request<Full<Bytes>> {
    let mut builder = Request::get(target).header("host", host);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(Full::new(Bytes::new())).unwrap()
}

#[tokio::test]
async fn a_proxied_request_gets_an_upstreaminfo_line() {
    let backend = start_backend("web").await;
    let mut h = Harness::start();
    h.apply(&site(&[addr_of(&backend)], json!({})));
    let mut client = Client::connect(h.http()).await;
    let reply = client
        .send(request(
            "log.test",
            "/echo?x=1",
            &[
                ("referer", "https://from.test/"),
                ("user-agent", "tester/1.0"),
                ("authorization", "Basic YWxpY2U6c2VjcmV0"),
            ],
        ))
        .await
        .unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    let line = lines(&h, 1).await.remove(0);
    // $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent
    // "$http_referer" "$http_user_agent" $request_length $request_time [$proxy_upstream_name]
    // [$proxy_alternative_upstream_name] $upstream_addr $upstream_response_length
    // $upstream_response_time $upstream_status $req_id
    let pattern = regex::Regex::new(concat!(
        r#"^127\.0\.0\.1 - alice \[\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d \+0000\] "#,
        r#""GET /echo\?x=1 HTTP/1\.1" 200 (\d+) "https://from\.test/" "tester/1\.0" (\d+) "#,
        r#"\d+\.\d{3} \[default-web-http\] \[\] (127\.0\.0\.1:\d+) (\d+) \d+\.\d{3} 200 "#,
        r#"([0-9a-f]{32})$"#
    ))
    .unwrap();
    let captures = pattern
        .captures(&line)
        .unwrap_or_else(|| panic!("not an upstreaminfo line: {line}"));
    assert_eq!(captures[1], reply.body.len().to_string(), "{line}");
    assert!(captures[2].parse::<u64>().unwrap() > 80, "{line}");
    assert_eq!(captures[3], addr_of(&backend).to_string(), "{line}");
    assert_eq!(captures[4], captures[1], "{line}");
    // The request ID in the line is the one the backend received.
    assert_eq!(
        reply.json()["headers"]["x-request-id"],
        json!(&captures[5]),
        "{line}"
    );
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn a_retried_request_lists_every_endpoint_tried() {
    let backend = start_backend("web").await;
    let refused = closed_port();
    let mut h = Harness::with_workers(1);
    // Round robin starts with the first endpoint; both orders are checked below.
    h.apply(&site(&[refused, addr_of(&backend)], json!({})));
    let mut seen_retry = false;
    for n in 1..=4 {
        let reply = get(h.http(), "log.test", "/").await;
        assert_eq!(reply.status, StatusCode::OK);
        let line = lines(&h, n).await.pop().unwrap();
        let fields: Vec<&str> = line.split(' ').collect();
        let upstream = line
            .split("[default-web-http] [] ")
            .nth(1)
            .unwrap_or_else(|| panic!("{line}"));
        if upstream.starts_with(&format!("{refused}, ")) {
            // nginx: "$upstream_addr" lists both, "$upstream_status" each one's status.
            assert!(
                upstream.starts_with(&format!("{refused}, {}", addr_of(&backend))),
                "{line}"
            );
            assert!(upstream.contains(" 502, 200 "), "{line}");
            seen_retry = true;
        } else {
            assert!(
                upstream.starts_with(&addr_of(&backend).to_string()),
                "{line}"
            );
        }
        assert_eq!(fields[8], "200", "{line}");
    }
    assert!(seen_retry, "no request went to the refusing endpoint first");
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn log_format_upstream_with_json_escaping_makes_json_lines() {
    let backend = start_backend("web").await;
    let mut h = Harness::start();
    let format = r#"{"time": "$time_iso8601", "method": "$request_method", "uri": "$uri", "args": "$args", "status": $status, "ua": "$http_user_agent", "ingress": "$namespace/$ingress_name", "service": "$service_name:$service_port", "path": "$location_path", "host": "$host", "server": "$server_name", "rid": "$req_id", "ct": "$sent_http_content_type"}"#;
    let mut objects = site(&[addr_of(&backend)], json!({}));
    objects.push(settings(&[
        ("log-format-upstream", format),
        ("log-format-escape-json", "true"),
    ]));
    h.apply(&objects);
    let mut client = Client::connect(h.http()).await;
    let hostile = r#"say "hi" \ bye"#;
    client
        .send(request(
            "LOG.test:80",
            "/echo?a=b",
            &[("user-agent", hostile), ("x-request-id", "client-id-1")],
        ))
        .await
        .unwrap();
    let line = lines(&h, 1).await.remove(0);
    let parsed: Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    assert_eq!(parsed["method"], "GET");
    assert_eq!(parsed["uri"], "/echo");
    assert_eq!(parsed["args"], "a=b");
    assert_eq!(parsed["status"], 200);
    assert_eq!(parsed["ua"], hostile);
    assert_eq!(parsed["ingress"], "default/web");
    assert_eq!(parsed["service"], "web:http");
    assert_eq!(parsed["path"], "/");
    assert_eq!(parsed["host"], "log.test");
    assert_eq!(parsed["server"], "log.test");
    assert_eq!(parsed["rid"], "client-id-1");
    assert_eq!(parsed["ct"], "application/json");
    assert!(
        parsed["time"].as_str().unwrap().ends_with("+00:00"),
        "{line}"
    );
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn an_unset_variable_is_empty_with_escape_json_or_none_and_a_dash_otherwise() {
    // nginx's JSON and unescaped variable writers skip the `-` its default writer puts for a
    // variable with no value: no such header, no upstream (a request no rule matched).
    let backend = start_backend("web").await;
    let format = r#"{"ref": "$http_referer", "up": "$upstream_addr", "user": "$remote_user", "st": "$upstream_status"}"#;
    for (key, expected) in [
        (Some("log-format-escape-json"), ""),
        (Some("log-format-escape-none"), ""),
        (None, "-"),
    ] {
        let mut h = Harness::start();
        let mut objects = site(&[addr_of(&backend)], json!({}));
        let mut keys = vec![
            ("log-format-upstream", format),
            ("enable-access-log-for-default-backend", "true"),
        ];
        if let Some(key) = key {
            keys.push((key, "true"));
        }
        objects.push(settings(&keys));
        h.apply(&objects);
        let mut client = Client::connect(h.http()).await;
        let reply = client
            .send(request("nowhere.test", "/", &[]))
            .await
            .unwrap();
        assert_eq!(reply.status, StatusCode::NOT_FOUND);
        let line = lines(&h, 1).await.remove(0);
        let parsed: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        for field in ["ref", "up", "user", "st"] {
            assert_eq!(parsed[field], expected, "{key:?}: {field} in {line}");
        }
        shutdown(h.control.proxy).await;
    }
}

#[tokio::test]
async fn an_unknown_variable_is_a_diagnostic_and_upstreaminfo_is_used() {
    let backend = start_backend("web").await;
    let mut h = Harness::start();
    let mut objects = site(&[addr_of(&backend)], json!({}));
    objects.push(settings(&[(
        "log-format-upstream",
        "$remote_addr $geoip_city",
    )]));
    let compiled = h.apply_allowing_diagnostics(&objects);
    let reasons: Vec<&str> = compiled
        .diagnostics
        .iter()
        .map(|d| d.reason.as_str())
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("data.log-format-upstream: $geoip_city: not a variable")),
        "{reasons:?}"
    );
    get(h.http(), "log.test", "/").await;
    let line = lines(&h, 1).await.remove(0);
    assert!(line.contains("\"GET / HTTP/1.1\" 200 "), "{line}");
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn lines_are_turned_off_globally_per_url_and_per_ingress() {
    let backend = start_backend("web").await;
    let mut h = Harness::start();
    let addrs = [addr_of(&backend)];
    let mut objects = site(&addrs, json!({}));
    objects.push(settings(&[("skip-access-log-urls", "/healthz,/skip?x=1")]));
    let mut quiet = ingress(
        "quiet",
        json!({"rules": [rule("quiet.test", vec![path("/", "Prefix", to("web"))])]}),
    );
    quiet["metadata"]["annotations"] =
        json!({"nginx.ingress.kubernetes.io/enable-access-log": "false"});
    objects.push(quiet);
    h.apply(&objects);
    for (host, target) in [
        ("log.test", "/healthz"),
        ("log.test", "/skip?x=1"),
        ("quiet.test", "/"),
        ("log.test", "/skip?x=2"),
    ] {
        // Whatever the backend answers (it has no /healthz): the line is the point.
        get(h.http(), host, target).await;
    }
    let logged = lines(&h, 1).await;
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert!(
        logged[0].contains("\"GET /skip?x=2 HTTP/1.1\""),
        "{logged:?}"
    );

    // disable-access-log: nothing more, whatever is requested.
    objects.pop();
    objects.pop();
    objects.push(settings(&[("disable-access-log", "true")]));
    h.apply(&objects);
    get(h.http(), "log.test", "/").await;
    // A request that is logged again shows the earlier one was not merely late.
    objects.pop();
    h.apply(&objects);
    get(h.http(), "log.test", "/after").await;
    let logged = lines(&h, 2).await;
    assert_eq!(logged.len(), 2, "{logged:?}");
    assert!(logged[1].contains("\"GET /after HTTP/1.1\""), "{logged:?}");
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn requests_without_a_route_are_logged_against_the_default_backend_when_asked() {
    let backend = start_backend("web").await;
    let mut h = Harness::start();
    let mut objects = site(&[addr_of(&backend)], json!({}));
    h.apply(&objects);
    // ingress-nginx's default server logs nothing unless enable-access-log-for-default-backend.
    let reply = get(h.http(), "nowhere.test", "/x").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    // A request that is logged shows the earlier one was not merely late.
    get(h.http(), "log.test", "/after").await;
    let logged = lines(&h, 1).await;
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert!(logged[0].contains("\"GET /after HTTP/1.1\""), "{logged:?}");

    objects.push(settings(&[(
        "enable-access-log-for-default-backend",
        "true",
    )]));
    h.apply(&objects);
    let reply = get(h.http(), "nowhere.test", "/x").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    let line = lines(&h, 2).await.remove(1);
    assert!(
        line.contains("\"GET /x HTTP/1.1\" 404 ")
            && line.contains(" [upstream-default-backend] [] - - - - "),
        "{line}"
    );
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn a_client_that_gives_up_before_the_response_is_logged_as_499() {
    let backend = start_backend("web").await;
    let ca = TestCa::new();
    let leaf = ca.leaf(&["log.test"]);
    let mut h = Harness::start();
    let mut objects = site(&[addr_of(&backend)], json!({}));
    objects.push(tls_secret("log-tls", &leaf));
    objects[1]["spec"]["tls"] = json!([{"hosts": ["log.test"], "secretName": "log-tls"}]);
    h.apply(&objects);
    let (tls, _) = ca.connect(h.https(), "log.test", &[b"h2"]).await.unwrap();
    let mut client = H2Client::over(tls).await;
    // Dropping the request resets the stream (RST_STREAM CANCEL) while the upstream is slow.
    let gave_up = tokio::time::timeout(
        std::time::Duration::from_millis(300),
        client.get("https://log.test/slow?ms=5000"),
    )
    .await;
    assert!(gave_up.is_err(), "the slow request answered within 300 ms");
    let line = lines(&h, 1).await.remove(0);
    assert!(
        line.contains("\"GET /slow?ms=5000 HTTP/2.0\" 499 0 "),
        "{line}"
    );
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn ingress_nginx_documented_variables_forwarded_for_and_tls_session() {
    let backend = start_backend("web").await;
    let ca = TestCa::new();
    let leaf = ca.leaf(&["log.test"]);
    let mut h = Harness::start();
    let format = "$the_real_ip|$proxy_add_x_forwarded_for|$ssl_protocol|$ssl_cipher|\
                  $ssl_session_reused|$scheme";
    let mut objects = site(&[addr_of(&backend)], json!({}));
    objects[1]["spec"]["tls"] = json!([{"hosts": ["log.test"], "secretName": "log-tls"}]);
    objects.push(tls_secret("log-tls", &leaf));
    objects.push(settings(&[
        ("log-format-upstream", format),
        ("ssl-redirect", "false"),
    ]));
    h.apply(&objects);

    // Plain HTTP, with a forwarded-for header the client sent (not trusted: it is kept and the
    // client's address appended, as nginx's $proxy_add_x_forwarded_for does).
    let mut client = Client::connect(h.http()).await;
    let reply = client
        .send(request(
            "log.test",
            "/",
            &[("x-forwarded-for", "203.0.113.9")],
        ))
        .await
        .unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        lines(&h, 1).await[0],
        "127.0.0.1|203.0.113.9, 127.0.0.1||||http"
    );

    // HTTPS: the session's protocol and cipher by their OpenSSL names, not resumed.
    let (tls, _) = ca
        .connect(h.https(), "log.test", &[b"http/1.1"])
        .await
        .unwrap();
    let mut client = Client::over(tls).await;
    assert_eq!(client.get("log.test", "/").await.status, StatusCode::OK);
    let line = lines(&h, 2).await.remove(1);
    let fields: Vec<&str> = line.split('|').collect();
    assert_eq!(fields[..3], ["127.0.0.1", "127.0.0.1", "TLSv1.3"], "{line}");
    assert!(
        [
            "TLS_AES_256_GCM_SHA384",
            "TLS_AES_128_GCM_SHA256",
            "TLS_CHACHA20_POLY1305_SHA256"
        ]
        .contains(&fields[3]),
        "{line}"
    );
    assert_eq!(fields[4..], [".", "https"], "{line}");
    shutdown(h.control.proxy).await;
}

/// Issue 24 item 10: heads refused by the codec (nginx logs them with the status it sent,
/// and `"-"` for a request line it could not read).
#[tokio::test]
async fn codec_refusals_are_logged_with_the_status_sent() {
    let backend = start_backend("web").await;
    let mut h = Harness::start();
    h.apply(&site(&[addr_of(&backend)], json!({})));
    let ambiguous =
        b"POST /a HTTP/1.1\r\nHost: log.test\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    assert!(raw_head(h.http(), ambiguous)
        .await
        .starts_with("HTTP/1.1 400"));
    let unknown = b"POST /b HTTP/1.1\r\nHost: log.test\r\nTransfer-Encoding: gzip\r\n\r\n";
    assert!(raw_head(h.http(), unknown)
        .await
        .starts_with("HTTP/1.1 501"));
    let large = format!(
        "GET /c HTTP/1.1\r\nHost: log.test\r\nX-Big: {}\r\n\r\n",
        "a".repeat(64 * 1024)
    );
    assert!(raw_head(h.http(), large.as_bytes())
        .await
        .starts_with("HTTP/1.1 431"));
    assert!(raw_head(h.http(), b"NOT HTTP AT ALL\r\n\r\n")
        .await
        .starts_with("HTTP/1.1 400"));
    let lines = lines(&h, 4).await;
    for expected in [
        "\"POST /a HTTP/1.1\" 400 ",
        "\"POST /b HTTP/1.1\" 501 ",
        "\"-\" 431 ",
        "\"-\" 400 ",
    ] {
        assert!(
            lines.iter().any(|l| l.contains(expected)),
            "no line with {expected:?}: {lines:#?}"
        );
    }
    shutdown(h.control.proxy).await;
}

/// Issue 24 item 10: a header list over the limit on HTTP/2 (431 on its stream, the
/// connection goes on) is logged as HTTP/1's is.
#[tokio::test]
async fn an_http2_header_list_over_the_limit_is_logged() {
    let backend = start_backend("web").await;
    let mut h = Harness::start();
    let mut objects = site(&[addr_of(&backend)], json!({}));
    objects.push(settings(&[("use-h2c", "true")]));
    h.apply(&objects);
    let stream = tokio::net::TcpStream::connect(h.http()).await.unwrap();
    let mut h2 = H2Client::over(stream).await;
    let big = "a".repeat(64 * 1024);
    let reply = h2
        .send(request(
            "log.test",
            "http://log.test/big",
            &[("x-big", &big)],
        ))
        .await
        .unwrap();
    assert_eq!(reply.status, 431);
    // The connection goes on, and its next request is logged as usual.
    assert_eq!(h2.get("http://log.test/").await.status, 200);
    let lines = lines(&h, 2).await;
    assert!(
        lines.iter().any(|l| l.contains("\"-\" 431 ")),
        "no 431 line: {lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("\"GET / HTTP/2.0\" 200 ")),
        "{lines:#?}"
    );
    shutdown(h.control.proxy).await;
}

/// Issue 24 item 10: a response whose write failed (the client reset the connection) is
/// logged with its status and the body bytes that went out, not left out.
#[tokio::test]
async fn a_response_whose_write_failed_is_logged_with_the_bytes_sent() {
    let backend = start_backend("web").await;
    let mut h = Harness::start();
    h.apply(&site(&[addr_of(&backend)], json!({})));
    for version in ["1.1", "1.0"] {
        // HTTP/1.1: the inline server; HTTP/1.0: hyper.
        // A small receive buffer keeps the kernel from taking the whole body before the
        // reset: the proxy's writes fail.
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let mut stream = socket.connect(h.http()).await.unwrap();
        let request = format!("GET /1mb.bin HTTP/{version}\r\nHost: log.test\r\n\r\n");
        tokio::io::AsyncWriteExt::write_all(&mut stream, request.as_bytes())
            .await
            .unwrap();
        let mut first = [0u8; 12];
        bounded(tokio::io::AsyncReadExt::read_exact(&mut stream, &mut first))
            .await
            .unwrap();
        assert_eq!(&first[..7], b"HTTP/1.");
        // Reset rather than FIN: the proxy's next writes fail.
        stream.set_zero_linger().unwrap();
        drop(stream);
    }
    let lines = lines(&h, 2).await;
    for version in ["1.1", "1.0"] {
        let line = lines
            .iter()
            .find(|l| l.contains(&format!("\"GET /1mb.bin HTTP/{version}\" 200 ")))
            .unwrap_or_else(|| panic!("no 200 line for HTTP/{version}: {lines:#?}"));
        let sent: u64 = line
            .split(&format!("HTTP/{version}\" 200 "))
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        // The count is what the proxy took from the body, so it may reach the whole body
        // when the kernel and the writer's buffers held the rest at the reset (nginx counts
        // what the kernel took): what must hold is the line, and no more than the body.
        assert!(
            sent <= 1024 * 1024,
            "{sent} bytes sent to a reset client: {line}"
        );
    }
    shutdown(h.control.proxy).await;
}
