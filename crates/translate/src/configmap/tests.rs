use super::*;
use model::settings::OpenTelemetry;
use model::Kind;

fn settings(pairs: &[(&str, &str)]) -> (Settings, Vec<String>) {
    let data = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut diagnostics = Vec::new();
    let source = ObjectRef::new(Kind::ConfigMap, "sluice", "sluice");
    let settings = from_config_map(&source, &data, &mut diagnostics);
    (
        settings,
        diagnostics.iter().map(|d| d.to_string()).collect(),
    )
}

#[test]
fn keys_are_read_with_nginx_units() {
    let (s, diagnostics) = settings(&[
        ("keepalive", "32"),
        ("proxy-connect-timeout", "2"),
        ("proxy-read-timeout", "1500ms"),
        ("worker-shutdown-timeout", "5m"),
        ("client-max-body-size", "8m"),
        ("large-client-header-buffers", "4 16k"),
        ("load-balance", "least_request"),
        ("ssl-session-tickets", "false"),
        ("worker-processes", "2"),
        ("worker-connections", "10000"),
    ]);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    assert_eq!(s.keepalive, 32);
    assert_eq!(s.proxy_connect_timeout, Duration::from_secs(2));
    assert_eq!(s.proxy_read_timeout, Duration::from_millis(1500));
    assert_eq!(s.worker_shutdown_timeout, Duration::from_secs(300));
    assert_eq!(s.client_max_body_size, 8 * 1024 * 1024);
    assert_eq!(s.max_request_header_size, 64 * 1024);
    assert_eq!(s.load_balance, LoadBalance::LeastRequest);
    assert!(!s.ssl_session_tickets);
    assert_eq!(s.worker_processes, Some(2));
    assert_eq!(s.max_worker_connections, 10000);
}

#[test]
fn max_worker_connections_wins_over_its_nginx_inc_name() {
    let (s, diagnostics) = settings(&[("max-worker-connections", "0")]);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    assert_eq!(s.max_worker_connections, 0);
    let (s, diagnostics) = settings(&[
        ("max-worker-connections", "512"),
        ("worker-connections", "1024"),
    ]);
    assert_eq!(s.max_worker_connections, 512);
    assert_eq!(diagnostics.len(), 1);
    assert!(diagnostics[0].contains("data.worker-connections: ignored"));
    let (_, diagnostics) = settings(&[("max-worker-connections", "many")]);
    assert!(diagnostics[0].contains("invalid value \"many\""));
}

#[test]
fn ingress_nginx_and_nginx_inc_names_mean_the_same_and_the_ingress_nginx_one_wins() {
    let (s, diagnostics) = settings(&[
        ("upstream-keepalive-connections", "64"),
        ("upstream-keepalive-requests", "500"),
        ("keepalive-requests", "42"),
        ("worker-rlimit-nofile", "10240"),
    ]);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    assert_eq!(s.keepalive, 64);
    assert_eq!(s.upstream_keepalive_requests, 500);
    assert_eq!(s.keep_alive_requests, 42);
    assert_eq!(s.max_worker_open_files, 10240);
    let (s, _) = settings(&[]);
    assert_eq!(s.upstream_keepalive_requests, 10_000);
    assert_eq!(s.max_worker_open_files, 0);

    let (s, diagnostics) = settings(&[
        ("keepalive", "1"),
        ("upstream-keepalive-connections", "2"),
        ("keepalive-requests", "3"),
        ("keep-alive-requests", "4"),
        ("worker-rlimit-nofile", "5"),
        ("max-worker-open-files", "6"),
    ]);
    assert_eq!(
        (s.keepalive, s.keep_alive_requests, s.max_worker_open_files),
        (2, 4, 6)
    );
    assert_eq!(diagnostics.len(), 3, "{diagnostics:?}");
    assert!(diagnostics[0]
        .contains("data.keepalive: ignored: upstream-keepalive-connections is set too"));
    assert!(
        diagnostics[1].contains("data.keepalive-requests: ignored: keep-alive-requests is set too")
    );
    assert!(diagnostics[2]
        .contains("data.worker-rlimit-nofile: ignored: max-worker-open-files is set too"));
    let (_, diagnostics) = settings(&[("upstream-keepalive-requests", "0")]);
    assert!(diagnostics[0].contains("data.upstream-keepalive-requests: invalid value \"0\""));
}

#[test]
fn snippet_and_template_keys_are_refused_never_executed() {
    let snippets = KEYS.iter().filter(|k| matches!(k.kind, KeyKind::Snippet));
    assert_eq!(snippets.clone().count(), 16);
    for key in snippets.map(|k| k.name) {
        let (s, diagnostics) = settings(&[(key, "worker_processes 1;")]);
        assert_eq!(s, Settings::default());
        assert_eq!(diagnostics.len(), 1, "{key}: {diagnostics:?}");
        assert!(
            diagnostics[0].contains(&format!("data.{key}: refused:"))
                && diagnostics[0].contains("never executes snippets or templates"),
            "{diagnostics:?}"
        );
    }
}

#[test]
fn a_bad_value_names_key_and_value_and_keeps_the_default() {
    let (s, diagnostics) = settings(&[("proxy-read-timeout", "soon"), ("keepalive", "-1")]);
    assert_eq!(s.proxy_read_timeout, Settings::default().proxy_read_timeout);
    assert_eq!(s.keepalive, 100);
    assert_eq!(diagnostics.len(), 2);
    assert!(diagnostics[1].contains("data.proxy-read-timeout: invalid value \"soon\""));
}

#[test]
fn stream_keys_are_read_with_ingress_nginx_defaults() {
    let defaults = Settings::default();
    assert!(defaults.proxy_stream_next_upstream);
    assert_eq!(defaults.proxy_stream_next_upstream_tries, 3);
    assert_eq!(
        defaults.proxy_stream_next_upstream_timeout,
        Duration::from_secs(600)
    );
    assert_eq!(defaults.log_format_stream, model::access_log::LOG_STREAM);
    let (s, diagnostics) = settings(&[
        ("proxy-stream-next-upstream", "false"),
        ("proxy-stream-next-upstream-tries", "0"),
        ("proxy-stream-next-upstream-timeout", "30s"),
        ("proxy-stream-responses", "0"),
        ("disable-stream-access-log", "true"),
        ("disable-http-access-log", "true"),
        ("log-format-stream", "$remote_addr $status"),
    ]);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    assert!(!s.proxy_stream_next_upstream);
    assert_eq!(s.proxy_stream_next_upstream_tries, 0);
    assert_eq!(
        s.proxy_stream_next_upstream_timeout,
        Duration::from_secs(30)
    );
    assert!(s.disable_stream_access_log && s.disable_http_access_log);
    assert_eq!(s.log_format_stream, "$remote_addr $status");
    let (s, diagnostics) = settings(&[("proxy-stream-next-upstream-tries", "some")]);
    assert_eq!(s.proxy_stream_next_upstream_tries, 3);
    assert!(diagnostics[0].contains("data.proxy-stream-next-upstream-tries: invalid value"));
}

#[test]
fn log_paths_are_unsupported_with_where_the_lines_go() {
    for key in [
        "access-log-path",
        "stream-access-log-path",
        "http-access-log-path",
    ] {
        let (s, diagnostics) = settings(&[(key, "/var/log/nginx/access.log")]);
        assert_eq!(s, Settings::default());
        assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
        assert!(
            diagnostics[0].contains(&format!("data.{key}: not supported:"))
                && diagnostics[0].contains("--access-log-path"),
            "{diagnostics:?}"
        );
    }
}

#[test]
fn proxy_next_upstream_tries_zero_means_every_endpoint_once() {
    let (s, diagnostics) = settings(&[("proxy-next-upstream-tries", "0")]);
    assert_eq!(s.proxy_next_upstream_tries, 0);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let (s, diagnostics) = settings(&[("proxy-next-upstream-tries", "-1")]);
    assert_eq!(s.proxy_next_upstream_tries, 3);
    assert_eq!(diagnostics.len(), 1);
}

#[test]
fn unknown_keys_are_reported() {
    let (_, diagnostics) = settings(&[("proxy-raed-timeout", "5")]);
    assert_eq!(diagnostics.len(), 1);
    assert!(diagnostics[0].contains("this one is ignored"));
}

#[test]
fn hsts_is_one_value_made_once() {
    let (s, _) = settings(&[]);
    assert_eq!(
        s.hsts_header().as_deref(),
        Some("max-age=31536000; includeSubDomains")
    );
    let (s, diagnostics) = settings(&[
        ("hsts-max-age", "600"),
        ("hsts-include-subdomains", "false"),
        ("hsts-preload", "true"),
    ]);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    assert_eq!(s.hsts_header().as_deref(), Some("max-age=600; preload"));
    let (s, _) = settings(&[("hsts", "false")]);
    assert_eq!(s.hsts_header(), None);
}

#[test]
fn forwarded_header_keys_follow_ingress_nginx() {
    let (s, _) = settings(&[]);
    assert!(!s.use_forwarded_headers && !s.enable_real_ip);
    assert_eq!(s.forwarded_for_header, "x-forwarded-for");
    assert!(s.generate_request_id && !s.proxy_add_original_uri_header);
    // ingress-nginx's default trusts every IPv4 peer, and no IPv6 one.
    assert!(s.is_trusted_proxy("203.0.113.9".parse().unwrap()));
    assert!(!s.is_trusted_proxy("2001:db8::1".parse().unwrap()));

    let (s, diagnostics) = settings(&[
        ("use-forwarded-headers", "true"),
        ("enable-real-ip", "true"),
        ("forwarded-for-header", "CF-Connecting-IP"),
        ("compute-full-forwarded-for", "true"),
        ("proxy-real-ip-cidr", "10.0.0.1/8, 192.0.2.7,2001:db8::/32"),
        ("proxy-add-original-uri-header", "true"),
        ("generate-request-id", "false"),
    ]);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    assert!(s.use_forwarded_headers && s.enable_real_ip && s.compute_full_forwarded_for);
    assert!(s.proxy_add_original_uri_header && !s.generate_request_id);
    assert_eq!(s.forwarded_for_header, "cf-connecting-ip");
    let ranges: Vec<String> = s.proxy_real_ip_cidr.iter().map(|n| n.to_string()).collect();
    assert_eq!(ranges, ["10.0.0.0/8", "192.0.2.7/32", "2001:db8::/32"]);
    assert!(s.is_trusted_proxy("10.200.0.1".parse().unwrap()));
    assert!(s.is_trusted_proxy("2001:db8:1::5".parse().unwrap()));
    assert!(!s.is_trusted_proxy("192.0.2.8".parse().unwrap()));

    // Nothing trusted at all: an empty list (as ingress-nginx).
    let (s, diagnostics) = settings(&[("proxy-real-ip-cidr", "")]);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    assert!(!s.is_trusted_proxy("127.0.0.1".parse().unwrap()));

    let (s, diagnostics) = settings(&[("forwarded-for-header", "X Forwarded")]);
    assert_eq!(s.forwarded_for_header, "x-forwarded-for");
    assert!(diagnostics[0].contains("data.forwarded-for-header: invalid value"));
}

#[test]
fn a_bad_cidr_is_named_and_left_out_without_widening_the_trust() {
    let (s, diagnostics) = settings(&[(
        "proxy-real-ip-cidr",
        "10.0.0.0/8, 10.1.2.3/33, lb.example.com",
    )]);
    assert_eq!(diagnostics.len(), 2, "{diagnostics:?}");
    assert!(
        diagnostics[0].contains("data.proxy-real-ip-cidr: invalid entry \"10.1.2.3/33\""),
        "{diagnostics:?}"
    );
    assert!(
        diagnostics[1].contains("\"lb.example.com\""),
        "{diagnostics:?}"
    );
    // The valid entry stands; the default (every IPv4 peer) does not come back.
    assert_eq!(
        s.proxy_real_ip_cidr,
        ["10.0.0.0/8".parse::<IpNet>().unwrap()]
    );
    assert!(!s.is_trusted_proxy("203.0.113.9".parse().unwrap()));
    // Nothing valid: nobody is trusted.
    let (s, diagnostics) = settings(&[("proxy-real-ip-cidr", "everyone")]);
    assert_eq!(diagnostics.len(), 1);
    assert!(s.proxy_real_ip_cidr.is_empty());
}

#[test]
fn a_bad_error_code_is_named_and_left_out_and_the_others_apply() {
    // ingress-nginx reads the codes one by one: one it cannot read is a warning, not the end
    // of the custom error pages.
    let (s, diagnostics) = settings(&[("custom-http-errors", "404, abc,700 ,503,404")]);
    assert_eq!(diagnostics.len(), 2, "{diagnostics:?}");
    assert!(
        diagnostics[0].contains("data.custom-http-errors: invalid entry \"abc\""),
        "{diagnostics:?}"
    );
    assert!(diagnostics[1].contains("\"700\""), "{diagnostics:?}");
    assert_eq!(s.custom_http_errors, [404, 503]);
    // Nothing readable: no codes, as the default.
    let (s, diagnostics) = settings(&[("custom-http-errors", "x")]);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert!(s.custom_http_errors.is_empty());
}

#[test]
fn request_buffering_is_on_with_an_8k_memory_buffer_unless_set() {
    let (s, _) = settings(&[]);
    assert!(s.proxy_request_buffering);
    assert_eq!(s.client_body_buffer_size, 8 * 1024);
    let (s, diagnostics) = settings(&[
        ("proxy-request-buffering", "off"),
        ("client-body-buffer-size", "64k"),
    ]);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    assert!(!s.proxy_request_buffering);
    assert_eq!(s.client_body_buffer_size, 64 * 1024);
    let (s, diagnostics) = settings(&[
        ("proxy-request-buffering", "true"),
        ("client-body-buffer-size", "0"),
    ]);
    assert!(s.proxy_request_buffering);
    assert_eq!(s.client_body_buffer_size, 8 * 1024);
    assert_eq!(diagnostics.len(), 2, "{diagnostics:?}");
    assert!(diagnostics[0].contains("data.client-body-buffer-size: invalid value \"0\""));
    assert!(diagnostics[1]
        .contains("data.proxy-request-buffering: invalid value \"true\": expected on or off"));
}

#[test]
fn opentelemetry_keys_follow_ingress_nginx_code_defaults() {
    let (s, diagnostics) = settings(&[]);
    assert!(diagnostics.is_empty());
    let otel = &s.opentelemetry;
    assert!(!otel.enabled && otel.trust_incoming_span && otel.sampler_parent_based);
    assert_eq!(otel.sampler, Sampler::AlwaysOn);
    assert_eq!(
        (otel.collector_port, otel.service_name.as_str()),
        (4317, "nginx")
    );
    assert_eq!(
        (otel.max_queue_size, otel.max_export_batch_size),
        (2048, 512)
    );
    assert_eq!(otel.schedule_delay, Duration::from_secs(5));

    let (s, diagnostics) = settings(&[
        ("enable-opentelemetry", "true"),
        ("opentelemetry-trust-incoming-span", "false"),
        ("otlp-collector-host", "otel-collector.otel.svc"),
        ("otlp-collector-port", "14318"),
        ("otlp-collector-protocol", "http/protobuf"),
        ("otel-service-name", "edge"),
        ("otel-sampler", "TraceIdRatioBased"),
        ("otel-sampler-ratio", "0.25"),
        ("otel-sampler-parent-based", "false"),
        ("otel-max-queuesize", "100"),
        ("otel-schedule-delay-millis", "250"),
        ("otel-max-export-batch-size", "10"),
        ("opentelemetry-config", "/etc/nginx/opentelemetry.toml"),
    ]);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let otel = &s.opentelemetry;
    assert!(otel.enabled && !otel.trust_incoming_span && !otel.sampler_parent_based);
    assert_eq!(otel.collector_host, "otel-collector.otel.svc");
    assert_eq!(
        (otel.collector_port, otel.service_name.as_str()),
        (14318, "edge")
    );
    assert_eq!(
        (otel.sampler, otel.sampler_ratio),
        (Sampler::TraceIdRatioBased, 0.25)
    );
    assert_eq!((otel.max_queue_size, otel.max_export_batch_size), (100, 10));
    assert_eq!(otel.schedule_delay, Duration::from_millis(250));
    assert_eq!(otel.collector_protocol, OtlpProtocol::HttpProtobuf);
    let (s, _) = settings(&[("otlp-collector-host", "[::1]")]);
    assert_eq!(s.opentelemetry.collector_host, "::1");
    // The port follows the protocol unless it is set.
    let (s, _) = settings(&[("otlp-collector-protocol", "http/protobuf")]);
    assert_eq!(s.opentelemetry.collector_port, 4318);
}

#[test]
fn bad_opentelemetry_values_are_diagnostics_and_keep_defaults() {
    let (s, diagnostics) = settings(&[
        ("enable-opentelemetry", "yes"),
        ("otlp-collector-host", "http://collector:4318"),
        ("otlp-collector-port", "0"),
        ("otel-sampler", "always"),
        ("otlp-collector-protocol", "http/json"),
        ("otel-sampler-ratio", "1.5"),
        ("otel-schedule-delay-millis", "-1"),
        ("otel-service-name", "a\nb"),
        ("opentelemetry-operation-name", "HTTP $request_method $uri"),
    ]);
    assert_eq!(s.opentelemetry, OpenTelemetry::default());
    assert_eq!(diagnostics.len(), 9, "{diagnostics:?}");
    for key in [
        "otlp-collector-protocol",
        "enable-opentelemetry",
        "otlp-collector-host",
        "otlp-collector-port",
        "otel-sampler",
        "otel-sampler-ratio",
        "otel-schedule-delay-millis",
        "otel-service-name",
    ] {
        assert!(
            diagnostics
                .iter()
                .any(|d| d.contains(&format!("data.{key}: invalid value"))),
            "{key}: {diagnostics:?}"
        );
    }
    assert!(diagnostics
        .iter()
        .any(|d| d.contains("unsupported: data.opentelemetry-operation-name: not supported")));

    let (_, diagnostics) = settings(&[("enable-opentelemetry", "true")]);
    assert!(
        diagnostics[0].contains("without otlp-collector-host"),
        "{diagnostics:?}"
    );
    let (_, diagnostics) = settings(&[
        ("enable-opentelemetry", "true"),
        ("otlp-collector-host", "10.0.0.5"),
    ]);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
}

#[test]
fn units() {
    assert_eq!(parse_duration("0"), Some(Duration::ZERO));
    assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
    assert_eq!(parse_duration("1d"), None);
    assert_eq!(parse_duration("s"), None);
    assert_eq!(parse_size("1K"), Some(1024));
    assert_eq!(parse_size("2g"), Some(2 << 30));
    assert_eq!(parse_size(""), None);
    assert_eq!(parse_size("x"), None);
}

#[test]
fn compression_keys_take_ingress_nginx_defaults_and_refuse_bad_values() {
    let (s, diagnostics) = settings(&[]);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let c = &s.compression;
    assert!(!c.use_gzip && !c.enable_brotli && !c.enabled());
    assert_eq!((c.gzip.level, c.gzip.min_length), (1, 256));
    assert_eq!((c.brotli.level, c.brotli.min_length), (4, 20));
    assert!(c.gzip.types.matches(b"text/html") && c.gzip.types.matches(b"application/json"));

    let (s, diagnostics) = settings(&[
        ("use-gzip", "true"),
        ("gzip-level", "6"),
        ("gzip-min-length", "1000"),
        ("gzip-types", "application/json"),
        ("gzip-disable", "msie6"),
        ("enable-brotli", "true"),
        ("brotli-level", "0"),
        ("brotli-min-length", "0"),
        ("brotli-types", "*"),
    ]);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let c = &s.compression;
    assert!(c.use_gzip && c.enable_brotli);
    assert_eq!((c.gzip.level, c.gzip.min_length), (6, 1000));
    assert!(!c.gzip.types.matches(b"text/plain") && c.gzip.types.matches(b"text/html"));
    assert_eq!(c.gzip_disable, model::compression::GzipDisable::Msie6);
    assert_eq!((c.brotli.level, c.brotli.min_length), (0, 0));
    assert!(c.brotli.types.matches(b"image/png"));

    let (s, diagnostics) = settings(&[
        ("use-gzip", "yes"),
        ("gzip-level", "10"),
        ("gzip-min-length", "1k"),
        ("gzip-types", "text/css, text/plain"),
        ("gzip-disable", "(?<!x)bot"),
        ("brotli-level", "12"),
    ]);
    assert_eq!(s.compression, model::compression::Compression::default());
    let all = diagnostics.join("\n");
    for expected in [
        "data.use-gzip: invalid value \"yes\": expected true or false",
        "data.gzip-level: invalid value \"10\": expected a level from 1 to 9",
        "data.gzip-min-length: invalid value \"1k\": expected a whole number of bytes",
        "data.gzip-types: invalid value \"text/css, text/plain\": expected media types",
        "data.gzip-disable: invalid value \"(?<!x)bot\": expected msie6, or a regular expression",
        "data.brotli-level: invalid value \"12\": expected a level from 0 to 11",
    ] {
        assert!(all.contains(expected), "{expected} not in {all}");
    }

    // A high brotli level is served, with a word on what it costs.
    let (s, diagnostics) = settings(&[("enable-brotli", "true"), ("brotli-level", "7")]);
    assert_eq!(s.compression.brotli.level, 7);
    assert!(
        diagnostics
            .iter()
            .any(|d| d.contains("data.brotli-level: 7 holds several MiB")),
        "{diagnostics:?}"
    );
    let (_, diagnostics) = settings(&[("enable-brotli", "true"), ("brotli-level", "4")]);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
}
