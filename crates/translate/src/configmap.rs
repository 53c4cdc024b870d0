//! The controller ConfigMap read into [`Settings`], with ingress-nginx's key names where one
//! exists.
//!
//! ```text
//!  data { key: value } ─▶ KEYS (one table: key ─▶ Read(parser) | Alias | Accepted |
//!                         Unsupported(why) | Snippet) ─▶ Settings field, or a diagnostic
//!  README's ConfigMap keys table ◀── a test keeps it equal to KEYS
//! ```
//! Every value is validated here; a bad one becomes a diagnostic naming the key and the value
//! and its default (`Settings::default()`, in model) applies, so a typo never takes the proxy
//! down. A new key: a `Settings` field and its default (model), an entry here, a README row.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use ipnet::IpNet;
use model::compression::{GzipDisable, MimeTypes};
use model::settings::{LoadBalance, NextUpstream, OtlpProtocol, Sampler, Settings};
use model::{Diagnostic, ObjectRef, Severity};

/// A comma-separated CIDR list (a bare address is a /32 or /128). `Err` names the bad entry.
pub fn parse_cidrs(text: &str) -> Result<Vec<IpNet>, String> {
    let mut out = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let net = entry
            .parse::<IpNet>()
            .or_else(|_| entry.parse::<std::net::IpAddr>().map(IpNet::from))
            .map_err(|_| format!("{entry:?} is not an IP address or CIDR range"))?;
        out.push(net.trunc());
    }
    Ok(out)
}
/// Why ingress-nginx's access log path keys are not read.
const ACCESS_LOG_GOES: &str = "Sluice writes access log lines (HTTP, TCP and UDP) to standard \
     output, or to the file the --access-log-path flag names";

/// Why the `jaeger-*` keys are not read.
const NO_JAEGER: &str = "ingress-nginx removed OpenTracing and Jaeger in 1.10; Sluice traces \
     with OpenTelemetry (enable-opentelemetry, otlp-collector-host), which Jaeger receives";
/// Why the syslog keys are not read.
const NO_SYSLOG: &str = "Sluice writes access log lines to standard output or the file \
     --access-log-path names, where a log shipper takes them";
/// Why the GeoIP keys are not read.
const NO_GEOIP: &str = "Sluice reads no GeoIP database, so the $geoip_* and $geoip2_* \
     variables do not exist";

/// The ConfigMap's access lists: one that cannot be read refuses every route.
const ACCESS_LIST_KEYS: &[&str] = &[
    "whitelist-source-range",
    "allowlist-source-range",
    "denylist-source-range",
    "block-cidrs",
];

/// `block-user-agents` and `block-referers`: their entries are checked one by one.
const HEADER_BLOCK_KEYS: &[&str] = &["block-user-agents", "block-referers"];

/// The global rate limit's keys (its annotations are refused the same way).
const GLOBAL_RATE_LIMIT: &str =
    "ingress-nginx's global rate limit counts in memcached, which Sluice has no client for; \
     the global-rate-limit annotations are diagnosed and not applied (limit-rps and limit-rpm \
     limit per replica)";

/// `limit-req-status-code` / `limit-conn-status-code`: nginx's limit_req_status accepts
/// 400 to 599.
fn parse_limit_status(value: &str) -> Result<u16, &'static str> {
    value
        .parse()
        .ok()
        .filter(|code| (400..=599).contains(code))
        .ok_or("a status code from 400 to 599")
}

/// `limit-rate` / `limit-rate-after`: whole kilobytes, as ingress-nginx renders them (`Nk`).
fn parse_kilobytes(value: &str) -> Result<u64, &'static str> {
    let kilobytes: u64 = value.parse().map_err(|_| "a whole number of kilobytes")?;
    kilobytes
        .checked_mul(1024)
        .ok_or("a whole number of kilobytes")
}

/// What Sluice does with one ConfigMap key.
#[derive(Clone, Copy, Debug)]
pub enum KeyKind {
    /// Read into [`Settings`] by this parser; `Err` says what was expected.
    Read(fn(&mut Settings, &str) -> Result<(), &'static str>),
    /// NGINX Inc.'s controller's name (the seeds' ConfigMaps use both dialects) for this
    /// ingress-nginx key: read as that key, unless both are set, then the ingress-nginx name
    /// wins and the other is reported.
    Alias(&'static str),
    /// ingress-nginx's key that other controllers' ConfigMaps carry and that needs nothing
    /// from Sluice.
    Accepted,
    /// ingress-nginx's meaning, not implemented (why): an `Unsupported` diagnostic rather than
    /// "unknown key".
    Unsupported(&'static str),
    /// nginx configuration text (ingress-nginx's snippets, NGINX Inc.'s snippets and
    /// templates): Sluice generates no nginx configuration and never executes them.
    Snippet,
}

/// One ConfigMap key: its name and what reads it. README's ConfigMap keys table documents
/// each (a test keeps the two lists equal); defaults are `Settings::default()`'s.
#[derive(Clone, Copy, Debug)]
pub struct Key {
    pub name: &'static str,
    pub kind: KeyKind,
}

const DURATION: &str = "a duration like 60, 60s, 500ms or 5m";
const COUNT: &str = "a whole number";
const POSITIVE: &str = "a whole number of at least 1";
const BYTES: &str = "a whole number of bytes";
const MEDIA_TYPES: &str =
    "media types separated by spaces, like \"text/css application/json\", or *";

/// `gzip-level` / `brotli-level`: nginx's `*_comp_level` bounds.
fn parse_level(value: &str, min: u32, max: u32) -> Option<u32> {
    value
        .parse()
        .ok()
        .filter(|level| (min..=max).contains(level))
}

const fn read(
    name: &'static str,
    parse: fn(&mut Settings, &str) -> Result<(), &'static str>,
) -> Key {
    Key {
        name,
        kind: KeyKind::Read(parse),
    }
}

/// `proxy-redirect-from` / `-to`: `off`, (for `from`) `default`, or literal URL text, as the
/// annotations take them (nginx regular expressions, `~`, are not supported).
fn rewrite_word(value: &str, from: bool) -> Result<String, &'static str> {
    const EXPECTED: &str = "off, default (proxy-redirect-from) or literal URL text (no ~ regex)";
    let value = value.trim();
    match value {
        "" | "off" => Ok("off".to_owned()),
        "default" if from => Ok("default".to_owned()),
        _ if literal_url_text(value) => Ok(value.to_owned()),
        _ => Err(EXPECTED),
    }
}

/// `proxy-cookie-path` / `-domain`: `off`, or the text to find and its replacement (literal).
fn rewrite_pair(value: &str) -> Result<String, &'static str> {
    const EXPECTED: &str = "off, or the text to find and its replacement (no ~ regex)";
    let words: Vec<&str> = value.split_whitespace().collect();
    match words[..] {
        [] | ["off"] => Ok("off".to_owned()),
        [from, to] if literal_url_text(from) && literal_url_text(to) => Ok(format!("{from} {to}")),
        _ => Err(EXPECTED),
    }
}

/// One word the annotations' validator takes (ingress-nginx's `URLIsValidRegex`), and no
/// nginx regular expression (`~`), which Sluice does not support.
fn literal_url_text(word: &str) -> bool {
    !word.is_empty() && !word.starts_with('~') && !word.contains(' ') && url_chars(word)
}

/// ingress-nginx's `URLIsValidRegex` (spaces removed first): what `proxy-redirect-*` and
/// `proxy-cookie-*` may contain, as annotations and as these keys. Here, below the
/// annotations' reader, which reads this module's parsers too.
pub(crate) fn url_chars(value: &str) -> bool {
    value
        .chars()
        .filter(|c| *c != ' ')
        .all(|c| c.is_ascii_alphanumeric() || "-._~/:,?&=".contains(c))
}

/// One `global-auth-*` key, kept as written under its annotation's name; compile checks it
/// with the annotation's rules (`ingress::auth`).
fn global_auth(settings: &mut Settings, name: &str, value: &str) -> Result<(), &'static str> {
    if !value.is_empty() {
        settings
            .global_auth
            .insert(name.to_owned(), value.to_owned());
    }
    Ok(())
}

/// `proxy-set-headers` / `add-headers`: a ConfigMap as `namespace/name` (ingress-nginx's store
/// key); empty: none.
fn config_map_ref(value: &str) -> Result<Option<String>, &'static str> {
    if value.is_empty() {
        return Ok(None);
    }
    let valid = value.split_once('/').is_some_and(|(namespace, name)| {
        let part = |p: &str| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.".contains(&b))
        };
        part(namespace) && part(name)
    });
    valid
        .then(|| Some(value.to_owned()))
        .ok_or("a ConfigMap as namespace/name")
}

const fn alias(name: &'static str, of: &'static str) -> Key {
    Key {
        name,
        kind: KeyKind::Alias(of),
    }
}

const fn unsupported(name: &'static str, why: &'static str) -> Key {
    Key {
        name,
        kind: KeyKind::Unsupported(why),
    }
}

const fn accepted(name: &'static str) -> Key {
    Key {
        name,
        kind: KeyKind::Accepted,
    }
}

const fn snippet(name: &'static str) -> Key {
    Key {
        name,
        kind: KeyKind::Snippet,
    }
}

/// Every ConfigMap key Sluice knows: the one list that parsing, the diagnostics for
/// unsupported and unknown keys, and the README check read.
pub const KEYS: &[Key] = &[
    read("upstream-keepalive-connections", |settings, value| {
        settings.keepalive = value.parse().map_err(|_| COUNT)?;
        Ok(())
    }),
    read("upstream-keepalive-requests", |settings, value| {
        settings.upstream_keepalive_requests =
            value.parse().ok().filter(|n| *n > 0).ok_or(POSITIVE)?;
        Ok(())
    }),
    read("upstream-keepalive-time", |settings, value| {
        settings.upstream_keepalive_time = parse_duration(value)
            .filter(|d| !d.is_zero())
            .ok_or(DURATION)?;
        Ok(())
    }),
    read("upstream-keepalive-timeout", |settings, value| {
        settings.upstream_keepalive_timeout = parse_duration(value).ok_or(DURATION)?;
        Ok(())
    }),
    read("keep-alive", |settings, value| {
        settings.keep_alive = parse_duration(value).ok_or(DURATION)?;
        Ok(())
    }),
    read("keep-alive-requests", |settings, value| {
        settings.keep_alive_requests = value.parse().ok().filter(|n| *n > 0).ok_or(POSITIVE)?;
        Ok(())
    }),
    read("max-worker-open-files", |settings, value| {
        settings.max_worker_open_files = value.parse().map_err(|_| COUNT)?;
        Ok(())
    }),
    read("proxy-stream-timeout", |settings, value| {
        settings.proxy_stream_timeout = parse_duration(value).ok_or(DURATION)?;
        Ok(())
    }),
    read("proxy-connect-timeout", |settings, value| {
        settings.proxy_connect_timeout = parse_duration(value).ok_or(DURATION)?;
        Ok(())
    }),
    read("proxy-read-timeout", |settings, value| {
        settings.proxy_read_timeout = parse_duration(value).ok_or(DURATION)?;
        Ok(())
    }),
    read("proxy-send-timeout", |settings, value| {
        settings.proxy_send_timeout = parse_duration(value).ok_or(DURATION)?;
        Ok(())
    }),
    read("client-header-timeout", |settings, value| {
        settings.client_header_timeout = parse_duration(value).ok_or(DURATION)?;
        Ok(())
    }),
    read("client-body-timeout", |settings, value| {
        settings.client_body_timeout = parse_duration(value).ok_or(DURATION)?;
        Ok(())
    }),
    read("client-send-timeout", |settings, value| {
        settings.client_send_timeout = parse_duration(value).ok_or(DURATION)?;
        Ok(())
    }),
    read("client-max-body-size", |settings, value| {
        settings.client_max_body_size =
            parse_size(value).ok_or("a size like 1m, 512k or 1048576 (0 for no limit)")?;
        Ok(())
    }),
    read("proxy-body-size", |settings, value| {
        settings.client_max_body_size =
            parse_size(value).ok_or("a size like 1m, 512k or 1048576 (0 for no limit)")?;
        Ok(())
    }),
    read("proxy-request-buffering", |settings, value| {
        settings.proxy_request_buffering = parse_on_off(value)?;
        Ok(())
    }),
    read("client-body-buffer-size", |settings, value| {
        settings.client_body_buffer_size = parse_size(value)
            .and_then(|size| usize::try_from(size).ok())
            .filter(|size| *size > 0)
            .ok_or("a size of at least 1 byte, like 8k, 16k or 1m")?;
        Ok(())
    }),
    read("large-client-header-buffers", |settings, value| {
        settings.max_request_header_size =
            parse_header_buffers(value).ok_or("a count and a size, like \"4 8k\"")?;
        Ok(())
    }),
    read("load-balance", |settings, value| {
        settings.load_balance = match value {
            "round_robin" => LoadBalance::RoundRobin,
            "least_request" => LoadBalance::LeastRequest,
            "ewma" => LoadBalance::Ewma,
            _ => return Err("round_robin, ewma or least_request"),
        };
        Ok(())
    }),
    read("proxy-stream-next-upstream", |settings, value| {
        settings.proxy_stream_next_upstream = parse_bool(value)?;
        Ok(())
    }),
    read("proxy-stream-responses", |settings, value| {
        settings.proxy_stream_responses = value.parse().map_err(|_| COUNT)?;
        Ok(())
    }),
    read("proxy-stream-next-upstream-tries", |settings, value| {
        settings.proxy_stream_next_upstream_tries = value.parse().map_err(|_| COUNT)?;
        Ok(())
    }),
    read("proxy-stream-next-upstream-timeout", |settings, value| {
        settings.proxy_stream_next_upstream_timeout = parse_duration(value).ok_or(DURATION)?;
        Ok(())
    }),
    // 0 is nginx's "no limit": every endpoint once (as the annotation reads it).
    read("proxy-next-upstream-tries", |settings, value| {
        settings.proxy_next_upstream_tries = value.parse().map_err(|_| COUNT)?;
        Ok(())
    }),
    read("worker-shutdown-timeout", |settings, value| {
        settings.worker_shutdown_timeout = parse_duration(value).ok_or(DURATION)?;
        Ok(())
    }),
    read("worker-processes", |settings, value| {
        settings.worker_processes = match value {
            "auto" => None,
            n => Some(
                n.parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or("auto or a whole number")?,
            ),
        };
        Ok(())
    }),
    read("max-worker-connections", |settings, value| {
        settings.max_worker_connections = value.parse().map_err(|_| COUNT)?;
        Ok(())
    }),
    read("proxy-redirect-from", |settings, value| {
        settings.response_rewrite.proxy_redirect_from = rewrite_word(value, true)?;
        Ok(())
    }),
    read("proxy-redirect-to", |settings, value| {
        settings.response_rewrite.proxy_redirect_to = rewrite_word(value, false)?;
        Ok(())
    }),
    read("proxy-cookie-path", |settings, value| {
        settings.response_rewrite.proxy_cookie_path = rewrite_pair(value)?;
        Ok(())
    }),
    read("proxy-cookie-domain", |settings, value| {
        settings.response_rewrite.proxy_cookie_domain = rewrite_pair(value)?;
        Ok(())
    }),
    read("auth-cache-max-entries", |settings, value| {
        settings.auth_cache_max_entries = value.parse().map_err(|_| COUNT)?;
        Ok(())
    }),
    read("mirror-max-in-flight", |settings, value| {
        settings.mirror_max_in_flight = value.parse().map_err(|_| COUNT)?;
        Ok(())
    }),
    read("ssl-session-tickets", |settings, value| {
        settings.ssl_session_tickets = parse_bool(value)?;
        Ok(())
    }),
    read("ssl-protocols", server_tls::protocols),
    read("ssl-ciphers", server_tls::ciphers),
    read("ssl-ecdh-curve", server_tls::ecdh_curves),
    read("ssl-session-cache", |settings, value| {
        settings.server_tls.session_cache = parse_bool(value)?;
        Ok(())
    }),
    read("ssl-session-cache-size", |settings, value| {
        server_tls::session_cache_size(settings, parse_size(value))
    }),
    read("ssl-session-timeout", |settings, value| {
        settings.server_tls.session_timeout = parse_duration(value)
            .filter(|d| !d.is_zero())
            .ok_or("a duration like 10m, 1h or 300s, more than 0")?;
        Ok(())
    }),
    read("ssl-session-ticket-key", server_tls::session_ticket_key),
    read("use-http2", |settings, value| {
        settings.server_tls.http2 = parse_bool(value)?;
        Ok(())
    }),
    read("ssl-reject-handshake", |settings, value| {
        settings.server_tls.reject_handshake = parse_bool(value)?;
        Ok(())
    }),
    read("ssl-buffer-size", |settings, value| {
        server_tls::buffer_size(settings, parse_size(value))
    }),
    // rustls has no DHE suites: the parameters would have nothing to apply to, and the
    // clients they served get ECDHE.
    accepted("ssl-dh-param"),
    unsupported(
        "enable-ocsp",
        "OCSP stapling needs the controller to fetch and refresh each certificate's response \
         from its CA's responder over the network; Sluice fetches nothing for certificates \
         (rustls would staple a response it was given). Clients check revocation themselves",
    ),
    read("ssl-redirect", |settings, value| {
        settings.ssl_redirect = parse_bool(value)?;
        Ok(())
    }),
    read("use-forwarded-headers", |settings, value| {
        settings.use_forwarded_headers = parse_bool(value)?;
        Ok(())
    }),
    read("use-proxy-protocol", |settings, value| {
        settings.use_proxy_protocol = parse_bool(value)?;
        Ok(())
    }),
    read("use-h2c", |settings, value| {
        settings.use_h2c = parse_bool(value)?;
        Ok(())
    }),
    read("enable-real-ip", |settings, value| {
        settings.enable_real_ip = parse_bool(value)?;
        Ok(())
    }),
    read("forwarded-for-header", |settings, value| {
        settings.forwarded_for_header =
            parse_header_name(value).ok_or("a header name like X-Forwarded-For")?;
        Ok(())
    }),
    read("compute-full-forwarded-for", |settings, value| {
        settings.compute_full_forwarded_for = parse_bool(value)?;
        Ok(())
    }),
    read("proxy-real-ip-cidr", |settings, value| {
        // Bad entries are reported by `from_config_map` and left out.
        settings.proxy_real_ip_cidr = value.split(',').filter_map(parse_cidr).collect();
        Ok(())
    }),
    read("proxy-add-original-uri-header", |settings, value| {
        settings.proxy_add_original_uri_header = parse_bool(value)?;
        Ok(())
    }),
    read("generate-request-id", |settings, value| {
        settings.generate_request_id = parse_bool(value)?;
        Ok(())
    }),
    read("disable-access-log", |settings, value| {
        settings.disable_access_log = parse_bool(value)?;
        Ok(())
    }),
    read("disable-http-access-log", |settings, value| {
        settings.disable_http_access_log = parse_bool(value)?;
        Ok(())
    }),
    read("disable-stream-access-log", |settings, value| {
        settings.disable_stream_access_log = parse_bool(value)?;
        Ok(())
    }),
    read("log-format-stream", |settings, value| {
        settings.log_format_stream = value.to_owned();
        Ok(())
    }),
    read("log-format-upstream", |settings, value| {
        settings.log_format_upstream = value.to_owned();
        Ok(())
    }),
    read("log-format-escape-json", |settings, value| {
        settings.log_format_escape_json = parse_bool(value)?;
        Ok(())
    }),
    read("log-format-escape-none", |settings, value| {
        settings.log_format_escape_none = parse_bool(value)?;
        Ok(())
    }),
    read("skip-access-log-urls", |settings, value| {
        settings.skip_access_log_urls = comma_list(value);
        Ok(())
    }),
    read("enable-opentelemetry", |settings, value| {
        settings.opentelemetry.enabled = parse_bool(value)?;
        Ok(())
    }),
    read("opentelemetry-trust-incoming-span", |settings, value| {
        settings.opentelemetry.trust_incoming_span = parse_bool(value)?;
        Ok(())
    }),
    read("otlp-collector-host", |settings, value| {
        settings.opentelemetry.collector_host =
            parse_host(value).ok_or("a host name or an IP address")?;
        Ok(())
    }),
    read("otlp-collector-port", |settings, value| {
        settings.opentelemetry.collector_port = value
            .parse()
            .ok()
            .filter(|p| *p > 0)
            .ok_or("a port, 1 to 65535")?;
        Ok(())
    }),
    read("otlp-collector-protocol", |settings, value| {
        settings.opentelemetry.collector_protocol = match value {
            "grpc" => OtlpProtocol::Grpc,
            "http/protobuf" => OtlpProtocol::HttpProtobuf,
            _ => return Err("grpc or http/protobuf"),
        };
        Ok(())
    }),
    read("otel-service-name", |settings, value| {
        settings.opentelemetry.service_name = Some(value)
            .filter(|v| !v.is_empty() && !v.chars().any(char::is_control))
            .ok_or("a name without control characters")?
            .to_owned();
        Ok(())
    }),
    read("otel-sampler", |settings, value| {
        settings.opentelemetry.sampler = match value {
            "AlwaysOn" => Sampler::AlwaysOn,
            "AlwaysOff" => Sampler::AlwaysOff,
            "TraceIdRatioBased" => Sampler::TraceIdRatioBased,
            _ => return Err("AlwaysOn, AlwaysOff or TraceIdRatioBased"),
        };
        Ok(())
    }),
    read("otel-sampler-ratio", |settings, value| {
        settings.opentelemetry.sampler_ratio = value
            .parse::<f64>()
            .ok()
            .filter(|r| (0.0..=1.0).contains(r))
            .ok_or("a number from 0 to 1, like 0.01")?;
        Ok(())
    }),
    read("otel-sampler-parent-based", |settings, value| {
        settings.opentelemetry.sampler_parent_based = parse_bool(value)?;
        Ok(())
    }),
    read("otel-max-queuesize", |settings, value| {
        settings.opentelemetry.max_queue_size =
            value.parse().ok().filter(|n| *n > 0).ok_or(POSITIVE)?;
        Ok(())
    }),
    read("otel-schedule-delay-millis", |settings, value| {
        settings.opentelemetry.schedule_delay = value
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .map(Duration::from_millis)
            .ok_or("a whole number of milliseconds, at least 1")?;
        Ok(())
    }),
    read("otel-max-export-batch-size", |settings, value| {
        settings.opentelemetry.max_export_batch_size =
            value.parse().ok().filter(|n| *n > 0).ok_or(POSITIVE)?;
        Ok(())
    }),
    read("http2-max-concurrent-streams", |settings, value| {
        settings.http2_max_concurrent_streams =
            value.parse().ok().filter(|n| *n > 0).ok_or(POSITIVE)?;
        Ok(())
    }),
    read("enable-underscores-in-headers", |settings, value| {
        settings.enable_underscores_in_headers = parse_bool(value)?;
        Ok(())
    }),
    read("custom-http-errors", |settings, value| {
        settings.custom_http_errors = parse_error_codes(value)?;
        Ok(())
    }),
    read("disable-proxy-intercept-errors", |settings, value| {
        settings.disable_proxy_intercept_errors = parse_bool(value)?;
        Ok(())
    }),
    read("hsts", |settings, value| {
        settings.hsts = parse_bool(value)?;
        Ok(())
    }),
    read("hsts-max-age", |settings, value| {
        settings.hsts_max_age = value.parse().map_err(|_| COUNT)?;
        Ok(())
    }),
    read("hsts-include-subdomains", |settings, value| {
        settings.hsts_include_subdomains = parse_bool(value)?;
        Ok(())
    }),
    read("hsts-preload", |settings, value| {
        settings.hsts_preload = parse_bool(value)?;
        Ok(())
    }),
    read("use-gzip", |settings, value| {
        settings.compression.use_gzip = parse_bool(value)?;
        Ok(())
    }),
    read("gzip-level", |settings, value| {
        settings.compression.gzip.level = parse_level(value, 1, 9).ok_or("a level from 1 to 9")?;
        Ok(())
    }),
    read("gzip-min-length", |settings, value| {
        settings.compression.gzip.min_length = value.parse().map_err(|_| BYTES)?;
        Ok(())
    }),
    read("gzip-types", |settings, value| {
        settings.compression.gzip.types = MimeTypes::parse(value).map_err(|_| MEDIA_TYPES)?;
        Ok(())
    }),
    read("gzip-disable", |settings, value| {
        settings.compression.gzip_disable = GzipDisable::parse(value).map_err(|_| {
            "msie6, or a regular expression for User-Agent (Rust regex syntax: no \
             look-around or back-references)"
        })?;
        Ok(())
    }),
    read("enable-brotli", |settings, value| {
        settings.compression.enable_brotli = parse_bool(value)?;
        Ok(())
    }),
    read("brotli-level", |settings, value| {
        settings.compression.brotli.level =
            parse_level(value, 0, 11).ok_or("a level from 0 to 11")?;
        Ok(())
    }),
    read("brotli-min-length", |settings, value| {
        settings.compression.brotli.min_length = value.parse().map_err(|_| BYTES)?;
        Ok(())
    }),
    read("brotli-types", |settings, value| {
        settings.compression.brotli.types = MimeTypes::parse(value).map_err(|_| MEDIA_TYPES)?;
        Ok(())
    }),
    read("http-redirect-code", |settings, value| {
        settings.http_redirect_code = value
            .parse()
            .ok()
            .filter(|code| [301, 302, 307, 308].contains(code))
            .ok_or("301, 302, 307 or 308")?;
        Ok(())
    }),
    read("force-ssl-redirect", |settings, value| {
        settings.force_ssl_redirect = parse_bool(value)?;
        Ok(())
    }),
    read("preserve-trailing-slash", |settings, value| {
        settings.preserve_trailing_slash = parse_bool(value)?;
        Ok(())
    }),
    read("proxy-next-upstream", |settings, value| {
        settings.proxy_next_upstream = NextUpstream::parse(value)
            .map_err(|_| "conditions like \"error timeout http_502\", or off")?;
        Ok(())
    }),
    read("proxy-next-upstream-timeout", |settings, value| {
        settings.proxy_next_upstream_timeout = parse_duration(value).ok_or(DURATION)?;
        Ok(())
    }),
    read("whitelist-source-range", |settings, value| {
        settings.whitelist_source_range =
            parse_cidrs(value).map_err(|_| "comma-separated IP addresses or CIDR ranges")?;
        Ok(())
    }),
    read("allowlist-source-range", |settings, value| {
        settings.whitelist_source_range =
            parse_cidrs(value).map_err(|_| "comma-separated IP addresses or CIDR ranges")?;
        Ok(())
    }),
    read("denylist-source-range", |settings, value| {
        settings.denylist_source_range =
            parse_cidrs(value).map_err(|_| "comma-separated IP addresses or CIDR ranges")?;
        Ok(())
    }),
    read("limit-req-status-code", |settings, value| {
        settings.limit_req_status_code = parse_limit_status(value)?;
        Ok(())
    }),
    read("limit-conn-status-code", |settings, value| {
        settings.limit_conn_status_code = parse_limit_status(value)?;
        Ok(())
    }),
    read("limit-conn-zone-variable", |settings, value| {
        settings.limit_conn_zone_variable = model::limits::LimitKey::parse(value).ok_or(
            "$binary_remote_addr, $remote_addr (the client address Sluice trusts) or \
             $http_<name> (a request header); Sluice keys limits by no other variable",
        )?;
        Ok(())
    }),
    read("limit-rate", |settings, value| {
        settings.limit_rate = parse_kilobytes(value)?;
        Ok(())
    }),
    read("limit-rate-after", |settings, value| {
        settings.limit_rate_after = parse_kilobytes(value)?;
        Ok(())
    }),
    read("allow-snippet-annotations", |settings, value| {
        settings.allow_snippet_annotations = parse_bool(value)?;
        Ok(())
    }),
    read("allow-cross-namespace-resources", |settings, value| {
        settings.allow_cross_namespace_resources = parse_bool(value)?;
        Ok(())
    }),
    read("global-allowed-response-headers", |settings, value| {
        // ingress-nginx drops a name its header check refuses (with a warning) and keeps the
        // others; here the whole key is refused with a diagnostic instead of a log line.
        let names = comma_list(value);
        if !names.iter().all(|n| model::custom_headers::valid_name(n)) {
            return Err("comma-separated header names (letters, digits, - and _)");
        }
        settings.global_allowed_response_headers = names;
        Ok(())
    }),
    read("proxy-set-headers", |settings, value| {
        settings.proxy_set_headers = config_map_ref(value)?;
        Ok(())
    }),
    read("add-headers", |settings, value| {
        settings.add_headers = config_map_ref(value)?;
        Ok(())
    }),
    read("global-auth-url", |s, v| global_auth(s, "auth-url", v)),
    read("global-auth-method", |s, v| {
        global_auth(s, "auth-method", v)
    }),
    read("global-auth-signin", |s, v| {
        global_auth(s, "auth-signin", v)
    }),
    read("global-auth-signin-redirect-param", |s, v| {
        global_auth(s, "auth-signin-redirect-param", v)
    }),
    read("global-auth-response-headers", |s, v| {
        global_auth(s, "auth-response-headers", v)
    }),
    read("global-auth-request-redirect", |s, v| {
        global_auth(s, "auth-request-redirect", v)
    }),
    read("global-auth-cache-key", |s, v| {
        global_auth(s, "auth-cache-key", v)
    }),
    read("global-auth-cache-duration", |s, v| {
        global_auth(s, "auth-cache-duration", v)
    }),
    read("global-auth-always-set-cookie", |s, v| {
        global_auth(s, "auth-always-set-cookie", v)
    }),
    read("no-auth-locations", |settings, value| {
        settings.no_auth_locations = comma_list(value);
        Ok(())
    }),
    read("server-tokens", |settings, value| {
        settings.server_tokens = parse_bool(value)?;
        Ok(())
    }),
    read("allow-backend-server-header", |settings, value| {
        settings.allow_backend_server_header = parse_bool(value)?;
        Ok(())
    }),
    read("hide-headers", |settings, value| {
        settings.hide_headers = comma_list(value)
            .iter()
            .map(|name| parse_header_name(name).ok_or("comma-separated header names"))
            .collect::<Result<_, _>>()?;
        Ok(())
    }),
    read("block-cidrs", |settings, value| {
        settings.block_cidrs =
            parse_cidrs(value).map_err(|_| "comma-separated IP addresses or CIDR ranges")?;
        Ok(())
    }),
    read("block-user-agents", |settings, value| {
        settings.block_user_agents = header_patterns(value);
        Ok(())
    }),
    read("block-referers", |settings, value| {
        settings.block_referers = header_patterns(value);
        Ok(())
    }),
    read("no-tls-redirect-locations", |settings, value| {
        settings.no_tls_redirect_locations = comma_list(value);
        Ok(())
    }),
    read("retry-non-idempotent", |settings, value| {
        settings.retry_non_idempotent = parse_bool(value)?;
        Ok(())
    }),
    read("annotations-risk-level", |settings, value| {
        settings.annotations_risk_level = model::settings::AnnotationRisk::parse(value);
        Ok(())
    }),
    read("annotation-value-word-blocklist", |settings, value| {
        settings.annotation_value_word_blocklist = comma_list(value);
        Ok(())
    }),
    read("strict-validate-path-type", |settings, value| {
        settings.strict_validate_path_type = parse_bool(value)?;
        Ok(())
    }),
    read("service-upstream", |settings, value| {
        settings.service_upstream = parse_bool(value)?;
        Ok(())
    }),
    read(
        "enable-access-log-for-default-backend",
        |settings, value| {
            settings.enable_access_log_for_default_backend = parse_bool(value)?;
            Ok(())
        },
    ),
    read("disable-ipv6-dns", |settings, value| {
        settings.disable_ipv6_dns = parse_bool(value)?;
        Ok(())
    }),
    read("ignore-invalid-headers", |settings, value| {
        settings.ignore_invalid_headers = parse_bool(value)?;
        Ok(())
    }),
    read("proxy-protocol-header-timeout", |settings, value| {
        settings.proxy_protocol_header_timeout = parse_duration(value)
            .filter(|d| !d.is_zero())
            .ok_or(DURATION)?;
        Ok(())
    }),
    alias("worker-connections", "max-worker-connections"),
    alias("keepalive", "upstream-keepalive-connections"),
    alias("keepalive-requests", "keep-alive-requests"),
    alias("worker-rlimit-nofile", "max-worker-open-files"),
    // `opentelemetry-config` is the path of the nginx module's own configuration file, which
    // ingress-nginx writes from the keys Sluice reads directly.
    accepted("reuse-port"),
    accepted("enable-multi-accept"),
    accepted("enable-aio-write"),
    accepted("enable-serial-reloads"),
    accepted("lua-shared-dicts"),
    accepted("map-hash-bucket-size"),
    accepted("proxy-headers-hash-bucket-size"),
    accepted("proxy-headers-hash-max-size"),
    accepted("server-name-hash-bucket-size"),
    accepted("server-name-hash-max-size"),
    accepted("variables-hash-bucket-size"),
    accepted("variables-hash-max-size"),
    accepted("proxy-buffering"),
    accepted("proxy-buffer-size"),
    accepted("proxy-buffers-number"),
    accepted("proxy-busy-buffers-size"),
    accepted("client-header-buffer-size"),
    accepted("grpc-buffer-size-kb"),
    accepted("http2-max-field-size"),
    accepted("http2-max-header-size"),
    accepted("http2-max-requests"),
    accepted("forwarded-for-proxy-protocol-header"),
    accepted("proxy-ssl-location-only"),
    accepted("nginx-status-ipv4-whitelist"),
    accepted("nginx-status-ipv6-whitelist"),
    accepted("default-type"),
    accepted("relative-redirects"),
    accepted("worker-cpu-affinity"),
    accepted("http2"),
    accepted("opentelemetry-config"),
    unsupported("global-rate-limit-memcached-host", GLOBAL_RATE_LIMIT),
    unsupported("global-rate-limit-memcached-port", GLOBAL_RATE_LIMIT),
    unsupported(
        "global-rate-limit-memcached-connect-timeout",
        GLOBAL_RATE_LIMIT,
    ),
    unsupported(
        "global-rate-limit-memcached-max-idle-timeout",
        GLOBAL_RATE_LIMIT,
    ),
    unsupported("global-rate-limit-memcached-pool-size", GLOBAL_RATE_LIMIT),
    unsupported("global-rate-limit-status-code", GLOBAL_RATE_LIMIT),
    unsupported(
        "opentelemetry-operation-name",
        "nginx variables are not evaluated; spans are named \"METHOD PATH\" with the Ingress \
         path (OpenTelemetry's HTTP span name)",
    ),
    unsupported("access-log-path", ACCESS_LOG_GOES),
    unsupported("http-access-log-path", ACCESS_LOG_GOES),
    unsupported("stream-access-log-path", ACCESS_LOG_GOES),
    unsupported("error-log-path", "Sluice's own log goes to standard error"),
    unsupported(
        "error-log-level",
        "Sluice's log level is the --v flag's (or SLUICE_LOG)",
    ),
    unsupported(
        "access-log-params",
        "nginx's access_log buffering parameters; Sluice's log writer batches lines itself",
    ),
    unsupported("jaeger-collector-host", NO_JAEGER),
    unsupported("jaeger-collector-port", NO_JAEGER),
    unsupported("jaeger-endpoint", NO_JAEGER),
    unsupported("jaeger-service-name", NO_JAEGER),
    unsupported("jaeger-propagation-format", NO_JAEGER),
    unsupported("jaeger-sampler-type", NO_JAEGER),
    unsupported("jaeger-sampler-param", NO_JAEGER),
    unsupported("jaeger-sampler-host", NO_JAEGER),
    unsupported("jaeger-sampler-port", NO_JAEGER),
    unsupported("jaeger-trace-context-header-name", NO_JAEGER),
    unsupported("jaeger-debug-header", NO_JAEGER),
    unsupported("jaeger-baggage-header", NO_JAEGER),
    unsupported("jaeger-trace-baggage-header-prefix", NO_JAEGER),
    unsupported("enable-syslog", NO_SYSLOG),
    unsupported("syslog-host", NO_SYSLOG),
    unsupported("syslog-port", NO_SYSLOG),
    unsupported("use-geoip", NO_GEOIP),
    unsupported("use-geoip2", NO_GEOIP),
    unsupported("geoip2-autoreload-in-minutes", NO_GEOIP),
    unsupported(
        "enable-modsecurity",
        "Sluice has no web application firewall; without modsecurity-snippet, \
         ingress-nginx runs ModSecurity in DetectionOnly mode (it logs, blocks nothing)",
    ),
    unsupported(
        "enable-owasp-modsecurity-crs",
        "Sluice has no web application firewall to load the OWASP Core Rule Set into",
    ),
    unsupported(
        "bind-address",
        "Sluice binds the addresses its flags name (--http-listen, --https-listen), at \
         start; bind those to the addresses instead",
    ),
    unsupported(
        "disable-ipv6",
        "Sluice listens where its flags say (--http-listen, --https-listen); give them an \
         IPv4 address to listen on IPv4 only",
    ),
    unsupported(
        "debug-connections",
        "Sluice's debug log (--v=5 or SLUICE_LOG=debug) covers every connection",
    ),
    snippet("main-snippet"),
    snippet("http-snippet"),
    snippet("server-snippet"),
    snippet("location-snippet"),
    snippet("stream-snippet"),
    snippet("modsecurity-snippet"),
    snippet("global-auth-snippet"),
    snippet("main-snippets"),
    snippet("http-snippets"),
    snippet("server-snippets"),
    snippet("location-snippets"),
    snippet("stream-snippets"),
    snippet("main-template"),
    snippet("ingress-template"),
    snippet("virtualserver-template"),
    snippet("transportserver-template"),
];

/// The entry of `key`.
pub fn key(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

/// Settings from a ConfigMap's `data`; `source` names it in diagnostics.
pub fn from_config_map(
    source: &ObjectRef,
    data: &BTreeMap<String, String>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Settings {
    let mut settings = Settings::default();
    for (key, value) in data {
        let value = value.trim();
        let kind = self::key(key).map(|k| k.kind);
        if let Some(KeyKind::Alias(wins)) = kind.filter(|k| match k {
            KeyKind::Alias(wins) => data.contains_key(*wins),
            _ => false,
        }) {
            diagnostics.push(Diagnostic::new(
                source.clone(),
                format!("data.{key}: ignored: {wins} is set too and wins"),
            ));
            continue;
        }
        if let Some(KeyKind::Snippet) = kind {
            diagnostics.push(Diagnostic::new(
                source.clone(),
                format!(
                    "data.{key}: refused: Sluice generates no nginx configuration and never \
                     executes snippets or templates; use the ConfigMap keys and annotations \
                     for what it should do (README: From ingress-nginx)"
                ),
            ));
            continue;
        }
        if let Some(KeyKind::Unsupported(why)) = kind {
            diagnostics.push(Diagnostic::with_severity(
                Severity::Unsupported,
                source.clone(),
                format!("data.{key}: not supported: {why}; ignored"),
            ));
            continue;
        }
        if key == PROXY_REAL_IP_CIDR {
            for entry in value.split(',').map(str::trim) {
                if !entry.is_empty() && parse_cidr(entry).is_none() {
                    diagnostics.push(Diagnostic::new(
                        source.clone(),
                        format!(
                            "data.{key}: invalid entry {entry:?}: expected an IP address or \
                             a CIDR range like 10.0.0.0/8; left out (the other entries apply, \
                             so a typo never widens the trust)"
                        ),
                    ));
                }
            }
        }
        if HEADER_BLOCK_KEYS.contains(&key.as_str()) {
            for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                if let Err(why) = model::edge::HeaderPattern::parse(entry) {
                    diagnostics.push(Diagnostic::new(
                        source.clone(),
                        format!(
                            "data.{key}: entry left out: {why} (the other entries apply; \
                             Rust's regex has no look-around or back-references)"
                        ),
                    ));
                }
            }
        }
        let kept_codes;
        let value = if key == CUSTOM_HTTP_ERRORS {
            // As ingress-nginx: a code it cannot read is left out with a warning, the others
            // apply (it parses them one by one and filters 300-599).
            let (kept, refused): (Vec<&str>, Vec<&str>) = value
                .split(',')
                .map(str::trim)
                .filter(|code| !code.is_empty())
                .partition(|code| parse_error_codes(code).is_ok());
            for code in refused {
                diagnostics.push(Diagnostic::new(
                    source.clone(),
                    format!(
                        "data.{key}: invalid entry {code:?}: expected a status code from 300 \
                         to 599; left out (the other codes apply, as in ingress-nginx)"
                    ),
                ));
            }
            kept_codes = kept.join(",");
            kept_codes.as_str()
        } else {
            value
        };
        let result = set(&mut settings, key, value);
        if let Err(expected) = result {
            if ACCESS_LIST_KEYS.contains(&key.as_str()) {
                // The default is no list: falling back to it would open every route.
                diagnostics.push(Diagnostic::new(
                    source.clone(),
                    format!("data.{key}: invalid value {value:?}: expected {expected}; every route answers 503 until it is fixed (an access list is never dropped)"),
                ));
                settings.access_refused = Some(format!("the ConfigMap's {key} cannot be read"));
                continue;
            }
            diagnostics.push(Diagnostic::new(
                source.clone(),
                format!(
                    "data.{key}: invalid value {value:?}: expected {expected}; using the default"
                ),
            ));
        }
    }
    let brotli = &settings.compression;
    if brotli.enable_brotli && brotli.brotli.level > 4 {
        // Measured (README: Response compression): 3.7-4.7 MiB at 5-6, ~35 MiB from 7.
        diagnostics.push(Diagnostic::with_severity(
            Severity::Notice,
            source.clone(),
            format!(
                "data.brotli-level: {} holds several MiB (from 7: ~35 MiB) per response being \
                 compressed, and compresses at a few MB/s; many slow clients at once can \
                 exhaust memory. Levels up to 4 hold at most ~2 MiB",
                brotli.brotli.level
            ),
        ));
    }
    // ingress-nginx appends `non_idempotent` to every location's `proxy_next_upstream`.
    if settings.retry_non_idempotent {
        settings.proxy_next_upstream.non_idempotent = true;
    }
    let otel = &mut settings.opentelemetry;
    if !data.contains_key("otlp-collector-port") {
        otel.collector_port = otel.collector_protocol.default_port();
    }
    check_opentelemetry(&settings, source, diagnostics);
    server_tls::notes(&settings, data, source, diagnostics);
    settings
}

/// Tracing on without a Collector to send spans to.
fn check_opentelemetry(settings: &Settings, source: &ObjectRef, diagnostics: &mut Vec<Diagnostic>) {
    let otel = &settings.opentelemetry;
    if otel.enabled && otel.collector_host.is_empty() {
        diagnostics.push(Diagnostic::new(
            source.clone(),
            "data.enable-opentelemetry: \"true\" without otlp-collector-host: spans are made \
             (and traceparent sent upstream) but not exported; they count as dropped",
        ));
    }
}

/// Reads `value` into the field `key` names, by its entry in [`KEYS`].
fn set(settings: &mut Settings, key: &str, value: &str) -> Result<(), &'static str> {
    match self::key(key).map(|k| k.kind) {
        Some(KeyKind::Read(parse)) => parse(settings, value),
        Some(KeyKind::Alias(of)) => set(settings, of, value),
        Some(KeyKind::Accepted) => Ok(()),
        _ => Err("a key Sluice knows (see the README); this one is ignored"),
    }
}

/// `block-user-agents` / `block-referers`: nginx `map` entries, comma-separated; one that
/// cannot be used is left out (with a diagnostic, made where the key is read).
fn header_patterns(value: &str) -> Vec<String> {
    let mut entries = comma_list(value);
    entries.retain(|entry| model::edge::HeaderPattern::parse(entry).is_ok());
    entries
}

/// A comma-separated list: its entries trimmed, empty ones left out.
fn comma_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `proxy-real-ip-cidr`: its entries are checked one by one.
const PROXY_REAL_IP_CIDR: &str = "proxy-real-ip-cidr";
/// `custom-http-errors`: its codes are read one by one.
const CUSTOM_HTTP_ERRORS: &str = "custom-http-errors";

/// A CIDR range (host bits cleared, as nginx's `set_real_ip_from` does) or one address;
/// `None` for an empty or bad entry.
fn parse_cidr(entry: &str) -> Option<IpNet> {
    let entry = entry.trim();
    match entry.parse::<IpNet>() {
        Ok(net) => Some(net.trunc()),
        Err(_) => entry.parse::<IpAddr>().ok().map(IpNet::from),
    }
}

/// A host name (letters, digits, `-`, `.`, `_`) or an IP address (IPv6 with or without
/// brackets), kept as written without brackets.
fn parse_host(value: &str) -> Option<String> {
    let bare = value
        .strip_prefix('[')
        .and_then(|v| v.strip_suffix(']'))
        .unwrap_or(value);
    if bare.parse::<IpAddr>().is_ok() {
        return Some(bare.to_owned());
    }
    let name = |b: u8| b.is_ascii_alphanumeric() || b"-._".contains(&b);
    (!value.is_empty() && value.len() <= 253 && value.bytes().all(name)).then(|| value.to_owned())
}

/// An HTTP field name (RFC 9110 §5.1: a token), lower case.
fn parse_header_name(value: &str) -> Option<String> {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    (!value.is_empty() && value.bytes().all(token)).then(|| value.to_ascii_lowercase())
}

/// A comma-separated list of status codes for error pages: 300-599 (what nginx's
/// `error_page` takes), sorted, each once.
pub(crate) fn parse_error_codes(value: &str) -> Result<Vec<u16>, &'static str> {
    let mut codes = Vec::new();
    for code in value.split(',').map(str::trim).filter(|c| !c.is_empty()) {
        match code.parse::<u16>() {
            Ok(code) if (300..600).contains(&code) => codes.push(code),
            _ => return Err("a comma-separated list of status codes from 300 to 599"),
        }
    }
    codes.sort_unstable();
    codes.dedup();
    Ok(codes)
}

fn parse_bool(value: &str) -> Result<bool, &'static str> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("true or false"),
    }
}

/// nginx's `on`/`off` switches, as ingress-nginx passes them through.
fn parse_on_off(value: &str) -> Result<bool, &'static str> {
    match value {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err("on or off"),
    }
}

/// nginx-style durations: a bare number is seconds; units ms, s, m, h.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let millis = match unit {
        "ms" => number,
        "" | "s" => number.checked_mul(1000)?,
        "m" => number.checked_mul(60_000)?,
        "h" => number.checked_mul(3_600_000)?,
        _ => return None,
    };
    Some(Duration::from_millis(millis))
}

/// nginx-style sizes: bytes, or k/m/g (either case).
pub fn parse_size(text: &str) -> Option<u64> {
    let (number, multiplier) = match text.chars().last()?.to_ascii_lowercase() {
        'k' => (&text[..text.len() - 1], 1024),
        'm' => (&text[..text.len() - 1], 1024 * 1024),
        'g' => (&text[..text.len() - 1], 1024 * 1024 * 1024),
        _ => (text, 1),
    };
    number.parse::<u64>().ok()?.checked_mul(multiplier)
}

fn parse_header_buffers(text: &str) -> Option<usize> {
    let mut parts = text.split_whitespace();
    let count: usize = parts.next()?.parse().ok()?;
    let size = usize::try_from(parse_size(parts.next()?)?).ok()?;
    let total = count.checked_mul(size)?;
    (parts.next().is_none() && total >= 1024).then_some(total)
}

mod server_tls;

#[cfg(test)]
mod tests;
