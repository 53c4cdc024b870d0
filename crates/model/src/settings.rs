//! Controller settings from the ConfigMap, with ingress-nginx's key names where one exists.
//!
//! Every value is validated here; a bad one becomes a diagnostic naming the key and the value
//! and its default applies, so a typo never takes the proxy down.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use ipnet::IpNet;
use serde::{Serialize, Serializer};

use crate::compile::{Diagnostic, Severity};
use crate::objects::ObjectRef;

/// How a worker picks an endpoint among a backend's active ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadBalance {
    RoundRobin,
    /// Power of two random choices on in-flight requests.
    LeastRequest,
}

/// Proxy behaviour that is not routing. Defaults follow ingress-nginx unless noted.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Settings {
    /// `upstream-keepalive-connections` (NGINX Inc.'s `keepalive`): idle upstream connections
    /// kept per endpoint, per worker.
    pub keepalive: u32,
    /// `upstream-keepalive-requests` (nginx's `keepalive_requests` in an upstream): requests
    /// one upstream connection carries before it is closed rather than pooled again.
    pub upstream_keepalive_requests: u32,
    /// `upstream-keepalive-timeout`: an idle upstream connection older than this is closed.
    #[serde(serialize_with = "as_text")]
    pub upstream_keepalive_timeout: Duration,
    /// `keep-alive`: how long an idle client connection is kept open.
    #[serde(serialize_with = "as_text")]
    pub keep_alive: Duration,
    /// `keep-alive-requests` (NGINX Inc.'s `keepalive-requests`): requests served on one
    /// client connection before it is closed.
    pub keep_alive_requests: u64,
    /// `max-worker-open-files` (NGINX Inc.'s `worker-rlimit-nofile`; nginx's
    /// `worker_rlimit_nofile`): open files per worker. The process asks for this times the
    /// worker count as its soft `RLIMIT_NOFILE` at start; 0 (the default) raises the soft
    /// limit to the hard one. Read at start-up only.
    pub max_worker_open_files: u64,
    #[serde(serialize_with = "as_text")]
    pub proxy_connect_timeout: Duration,
    /// Waiting for the upstream's response head, and between body reads.
    #[serde(serialize_with = "as_text")]
    pub proxy_read_timeout: Duration,
    /// `proxy-stream-timeout`: a TLS passthrough or TCP service connection with no byte either
    /// way for this long is closed (ingress-nginx's key for its stream proxies; default 600s).
    #[serde(serialize_with = "as_text")]
    pub proxy_stream_timeout: Duration,
    /// `proxy-stream-next-upstream`: a TCP service connection whose connect fails is passed to
    /// the next endpoint (nginx's stream `proxy_next_upstream`; default on).
    pub proxy_stream_next_upstream: bool,
    /// `proxy-stream-next-upstream-tries`: endpoints tried per TCP service connection, the
    /// first included; 0: every endpoint once (nginx: no limit).
    pub proxy_stream_next_upstream_tries: u32,
    /// `proxy-stream-next-upstream-timeout`: how long a TCP service connection may go on being
    /// passed to next endpoints, from its first connect; 0: no limit.
    #[serde(serialize_with = "as_text")]
    pub proxy_stream_next_upstream_timeout: Duration,
    /// `proxy-stream-responses`: datagrams a UDP service session expects back per datagram
    /// it forwards; when they have all come the session ends. 0: none expected, the session
    /// ends once the datagram is sent (nginx's `proxy_responses`).
    pub proxy_stream_responses: u32,
    /// Sending the request body upstream.
    #[serde(serialize_with = "as_text")]
    pub proxy_send_timeout: Duration,
    /// A client must send a complete request head within this, or is cut off.
    #[serde(serialize_with = "as_text")]
    pub client_header_timeout: Duration,
    /// `client-body-timeout` (nginx's `client_body_timeout`): a client that sends no byte of
    /// its request body for this long gets 408 (both connections are released). 0: no limit.
    #[serde(serialize_with = "as_text")]
    pub client_body_timeout: Duration,
    /// `client-send-timeout` (nginx's `send_timeout`): a write to a client that makes no
    /// progress for this long closes the connection, so a client that stops reading cannot
    /// hold its connection and response forever. 0 means no limit.
    #[serde(serialize_with = "as_text")]
    pub client_send_timeout: Duration,
    /// `client-max-body-size`: larger request bodies get 413. 0 means no limit.
    pub client_max_body_size: u64,
    /// `proxy-request-buffering` (`on`/`off`, nginx's `proxy_request_buffering`): read the
    /// whole request body before an upstream is chosen, so a slow upload never holds a backend
    /// connection and a request with a body can be sent again to another endpoint. Off: the
    /// body is streamed upstream as it arrives.
    pub proxy_request_buffering: bool,
    /// `client-body-buffer-size` (nginx's `client_body_buffer_size`): a buffered body up to
    /// this size is kept in memory; a larger one goes to an unnamed temporary file.
    pub client_body_buffer_size: usize,
    /// `large-client-header-buffers` (`"4 8k"`): the request head may be at most count × size
    /// bytes; larger gets 431.
    pub max_request_header_size: usize,
    pub load_balance: LoadBalance,
    /// `proxy-next-upstream-tries`: attempts per request, the first included.
    pub proxy_next_upstream_tries: u32,
    #[serde(serialize_with = "as_text")]
    pub worker_shutdown_timeout: Duration,
    /// `worker-processes`: `None` for `auto` (one per CPU). Read at start-up only.
    pub worker_processes: Option<u32>,
    /// `max-worker-connections`: client connections one worker keeps open at most; at the cap
    /// it closes idle keep-alive connections first, then stops accepting until one ends.
    /// 0 (the default): derived from the open-files limit (see the README). ingress-nginx
    /// defaults it to 16384 and derives it when 0; NGINX Inc.'s controller calls it
    /// `worker-connections`, read here as the same key.
    pub max_worker_connections: u32,
    /// Sluice default: on (ingress-nginx defaults it off).
    pub ssl_session_tickets: bool,
    /// Plain-HTTP requests for a host with TLS get a 308 to https.
    pub ssl_redirect: bool,
    /// Trust `X-Forwarded-*` from peers in `proxy-real-ip-cidr` (behind another proxy): the
    /// client address comes from `forwarded-for-header`, and `X-Forwarded-Proto`, `-Host`
    /// and `-Port` are passed on as the peer said; a trusted `X-Forwarded-Proto: https`
    /// also suppresses `ssl-redirect`.
    pub use_forwarded_headers: bool,
    /// `use-proxy-protocol`: every connection on the HTTP and HTTPS listeners starts with a
    /// PROXY protocol header (v1 or v2) from a load balancer, read within
    /// `client-header-timeout`; the client address is the header's when the load balancer is
    /// in `proxy-real-ip-cidr`. A connection without a valid header is closed.
    pub use_proxy_protocol: bool,
    /// `use-h2c` (Sluice's key; ingress-nginx serves no cleartext HTTP/2): the plain listener
    /// also speaks HTTP/2 to clients that start with its preface (prior knowledge, RFC 9113
    /// 3.3), as gRPC clients without TLS do. Off by default.
    pub use_h2c: bool,
    /// `enable-real-ip`: take the client address from `forwarded-for-header` (peers in
    /// `proxy-real-ip-cidr` only) without trusting the other `X-Forwarded-*` headers.
    pub enable_real_ip: bool,
    /// `forwarded-for-header`: the header a trusted peer names the client in, lower case.
    pub forwarded_for_header: String,
    /// `compute-full-forwarded-for` (with `use-forwarded-headers`): `X-Forwarded-For`
    /// upstream is a trusted peer's one with the peer appended, instead of the client alone.
    pub compute_full_forwarded_for: bool,
    /// `proxy-real-ip-cidr`: the peers whose forwarded headers are believed. ingress-nginx's
    /// default, `0.0.0.0/0`, trusts every IPv4 peer once a key above turns trust on.
    pub proxy_real_ip_cidr: Vec<IpNet>,
    /// `proxy-add-original-uri-header`: send `X-Original-URI`, the target the client sent.
    pub proxy_add_original_uri_header: bool,
    /// `generate-request-id`: a request without `X-Request-ID` gets a random one.
    pub generate_request_id: bool,
    /// `disable-access-log`: no access log lines at all.
    pub disable_access_log: bool,
    /// `disable-http-access-log`: no lines for HTTP requests (TCP services still log).
    pub disable_http_access_log: bool,
    /// `disable-stream-access-log`: no lines for TCP service connections.
    pub disable_stream_access_log: bool,
    /// `log-format-stream`: a TCP service connection's line (nginx stream `log_format`
    /// syntax; parsed by `compile` into `Compiled::stream_access_log`).
    pub log_format_stream: String,
    /// `log-format-upstream`: the access log line (nginx `log_format` syntax; parsed by
    /// `compile` into `Compiled::access_log`).
    pub log_format_upstream: String,
    /// `log-format-escape-json`: values escaped for JSON (a JSON `log-format-upstream`).
    pub log_format_escape_json: bool,
    /// `log-format-escape-none`: values written as they are.
    pub log_format_escape_none: bool,
    /// `skip-access-log-urls`: requests whose target (path and query, as sent) is one of
    /// these are not logged.
    pub skip_access_log_urls: Vec<String>,
    /// OpenTelemetry tracing (`enable-opentelemetry`, `otlp-collector-*`, `otel-*`). Shown
    /// (in `/config` and golden files) only when a key differs from its default.
    #[serde(skip_serializing_if = "OpenTelemetry::is_default")]
    pub opentelemetry: OpenTelemetry,
    /// `http2-max-concurrent-streams`: streams one HTTP/2 client may have open at once
    /// (nginx's `http2_max_concurrent_streams`).
    pub http2_max_concurrent_streams: u32,
    /// `enable-underscores-in-headers`: forward request headers whose names hold `_`
    /// (dropped by default, as nginx's `underscores_in_headers off`).
    pub enable_underscores_in_headers: bool,
    /// `hsts`: send `Strict-Transport-Security` on HTTPS responses for hosts with their own
    /// certificate.
    pub hsts: bool,
    /// `hsts-max-age`, in seconds.
    pub hsts_max_age: u64,
    /// `hsts-include-subdomains`.
    pub hsts_include_subdomains: bool,
    /// `hsts-preload`.
    pub hsts_preload: bool,
    /// `http-redirect-code`: the status of ssl and www redirects (301, 302, 307 or 308).
    pub http_redirect_code: u16,
    /// `force-ssl-redirect`: plain-HTTP requests go to https even for hosts without TLS.
    pub force_ssl_redirect: bool,
    /// `preserve-trailing-slash`: keep a target's trailing `/` in ssl redirects (ingress-nginx
    /// drops it by default).
    pub preserve_trailing_slash: bool,
    /// `proxy-next-upstream`: when another endpoint is tried (`error timeout` by default).
    pub proxy_next_upstream: NextUpstream,
    /// `proxy-next-upstream-timeout`: how long retries may go on; 0 is no limit.
    #[serde(serialize_with = "as_text")]
    pub proxy_next_upstream_timeout: Duration,
    /// `whitelist-source-range`: client addresses every route admits by default (empty: all).
    pub whitelist_source_range: Vec<IpNet>,
    /// `denylist-source-range`: client addresses every route refuses by default.
    pub denylist_source_range: Vec<IpNet>,
    /// `allow-snippet-annotations`: read `configuration-snippet` and `server-snippet` (never
    /// executed: only a safe subset is translated). Off by default, as in ingress-nginx.
    pub allow_snippet_annotations: bool,
    /// `global-auth-url`: external authentication for every route, which Sluice does not
    /// implement yet (wave 2): set, the routes it would cover answer 503, as an unimplemented
    /// `auth-url` annotation does.
    #[serde(skip_serializing_if = "is_false")]
    pub global_auth_url: bool,
    /// `no-auth-locations`: path prefixes `global-auth-url` leaves out (ingress-nginx's default
    /// keeps ACME HTTP-01 challenges answerable, so certificates still renew).
    #[serde(skip_serializing_if = "is_default_no_auth_locations")]
    pub no_auth_locations: Vec<String>,
    /// Why every route answers 503 whatever its annotations: an allow- or deny-list of the
    /// ConfigMap that cannot be read (an access list is never dropped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_refused: Option<String>,
}

/// The ConfigMap's OpenTelemetry keys, with ingress-nginx's names and the defaults of its code
/// (`internal/ingress/controller/config/config.go`, which differ from its docs: sampler
/// `AlwaysOn`, parent-based on). Spans go out as OTLP/gRPC to port 4317 as ingress-nginx's do,
/// or, with Sluice's `otlp-collector-protocol: http/protobuf`, as OTLP/HTTP to 4318.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct OpenTelemetry {
    /// `enable-opentelemetry`: a SERVER span per request (the annotation overrides per Ingress).
    pub enabled: bool,
    /// `opentelemetry-trust-incoming-span`: continue the trace a client's `traceparent` names;
    /// off, every request starts a trace of its own (the annotation overrides per Ingress).
    pub trust_incoming_span: bool,
    /// `otlp-collector-host`: where spans are sent; empty, none are (they are counted as
    /// dropped).
    pub collector_host: String,
    /// `otlp-collector-port`: the Collector's OTLP port; by default the protocol's (4317 for
    /// gRPC, 4318 for HTTP).
    pub collector_port: u16,
    /// `otlp-collector-protocol` (Sluice's key): how spans are sent.
    pub collector_protocol: OtlpProtocol,
    /// `otel-service-name`: the resource's `service.name`.
    pub service_name: String,
    /// `otel-sampler`.
    pub sampler: Sampler,
    /// `otel-sampler-ratio`: the share of traces `TraceIdRatioBased` keeps, 0 to 1.
    pub sampler_ratio: f64,
    /// `otel-sampler-parent-based`: a request whose (trusted) `traceparent` says sampled or
    /// not is decided so; only new traces ask the sampler.
    pub sampler_parent_based: bool,
    /// `otel-max-queuesize`: spans waiting for export at most; more are dropped (counted).
    pub max_queue_size: u32,
    /// `otel-schedule-delay-millis`: how long a span waits for others to share its export.
    #[serde(serialize_with = "as_text")]
    pub schedule_delay: Duration,
    /// `otel-max-export-batch-size`: spans per export request at most.
    pub max_export_batch_size: u32,
}

/// `otel-sampler`: which new traces are recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Sampler {
    AlwaysOn,
    AlwaysOff,
    /// Keeps `otel-sampler-ratio` of the traces, decided by the trace ID (every service that
    /// uses the same rule keeps the same traces).
    TraceIdRatioBased,
}

/// How spans are sent to the Collector (the values of OpenTelemetry's
/// `OTEL_EXPORTER_OTLP_PROTOCOL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum OtlpProtocol {
    /// `grpc`: `TraceService/Export` over HTTP/2 without TLS (ingress-nginx's).
    #[serde(rename = "grpc")]
    Grpc,
    /// `http/protobuf`: `POST /v1/traces` over HTTP/1.1.
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
}

impl OtlpProtocol {
    /// OTLP's well-known port for the protocol.
    pub fn default_port(self) -> u16 {
        match self {
            OtlpProtocol::Grpc => 4317,
            OtlpProtocol::HttpProtobuf => 4318,
        }
    }
}

impl Default for OpenTelemetry {
    fn default() -> OpenTelemetry {
        OpenTelemetry {
            enabled: false,
            trust_incoming_span: true,
            collector_host: String::new(),
            collector_port: OtlpProtocol::Grpc.default_port(),
            collector_protocol: OtlpProtocol::Grpc,
            service_name: "nginx".to_owned(),
            sampler: Sampler::AlwaysOn,
            sampler_ratio: 0.01,
            sampler_parent_based: true,
            max_queue_size: 2048,
            schedule_delay: Duration::from_millis(5000),
            max_export_batch_size: 512,
        }
    }
}

impl OpenTelemetry {
    fn is_default(&self) -> bool {
        *self == OpenTelemetry::default()
    }
}

/// nginx's `proxy_next_upstream` conditions: when a failed attempt is tried again on another
/// endpoint. Retrying needs a request that can be sent again (no body, or a buffered one) and,
/// once it may have reached the upstream, an idempotent method unless `non_idempotent`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NextUpstream {
    /// Connect errors and connections that fail before a response head.
    pub error: bool,
    /// Connect and response-head timeouts.
    pub timeout: bool,
    /// Response statuses that count as failures: 500, 502, 503, 504, 403, 404, 429.
    pub statuses: StatusSet,
    pub non_idempotent: bool,
}

/// A small set of the statuses `proxy_next_upstream` can name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatusSet(u8);

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            keepalive: 100,
            upstream_keepalive_requests: 10_000,
            upstream_keepalive_timeout: Duration::from_secs(60),
            keep_alive: Duration::from_secs(75),
            keep_alive_requests: 1000,
            max_worker_open_files: 0,
            proxy_connect_timeout: Duration::from_secs(5),
            proxy_read_timeout: Duration::from_secs(60),
            proxy_stream_timeout: Duration::from_secs(600),
            proxy_stream_next_upstream: true,
            proxy_stream_next_upstream_tries: 3,
            proxy_stream_next_upstream_timeout: Duration::from_secs(600),
            proxy_stream_responses: 1,
            proxy_send_timeout: Duration::from_secs(60),
            client_header_timeout: Duration::from_secs(60),
            client_body_timeout: Duration::from_secs(60),
            client_send_timeout: Duration::from_secs(60),
            client_max_body_size: 1024 * 1024,
            proxy_request_buffering: true,
            client_body_buffer_size: 8 * 1024,
            max_request_header_size: 4 * 8 * 1024,
            load_balance: LoadBalance::RoundRobin,
            proxy_next_upstream_tries: 3,
            worker_shutdown_timeout: Duration::from_secs(10),
            worker_processes: None,
            max_worker_connections: 0,
            ssl_session_tickets: true,
            ssl_redirect: true,
            use_forwarded_headers: false,
            use_proxy_protocol: false,
            use_h2c: false,
            enable_real_ip: false,
            forwarded_for_header: DEFAULT_FORWARDED_FOR_HEADER.to_owned(),
            compute_full_forwarded_for: false,
            proxy_real_ip_cidr: vec![EVERY_IPV4_PEER],
            proxy_add_original_uri_header: false,
            generate_request_id: true,
            disable_access_log: false,
            disable_http_access_log: false,
            disable_stream_access_log: false,
            log_format_stream: crate::access_log::LOG_STREAM.to_owned(),
            log_format_upstream: crate::access_log::UPSTREAMINFO.to_owned(),
            log_format_escape_json: false,
            log_format_escape_none: false,
            skip_access_log_urls: Vec::new(),
            opentelemetry: OpenTelemetry::default(),
            http2_max_concurrent_streams: 128,
            enable_underscores_in_headers: false,
            hsts: true,
            hsts_max_age: 31_536_000,
            hsts_include_subdomains: true,
            hsts_preload: false,
            http_redirect_code: 308,
            force_ssl_redirect: false,
            preserve_trailing_slash: false,
            proxy_next_upstream: NextUpstream {
                error: true,
                timeout: true,
                ..NextUpstream::default()
            },
            proxy_next_upstream_timeout: Duration::ZERO,
            whitelist_source_range: Vec::new(),
            denylist_source_range: Vec::new(),
            allow_snippet_annotations: false,
            global_auth_url: false,
            no_auth_locations: vec![DEFAULT_NO_AUTH_LOCATION.to_owned()],
            access_refused: None,
        }
    }
}

impl StatusSet {
    const STATUSES: [u16; 7] = [500, 502, 503, 504, 403, 404, 429];

    pub fn contains(self, status: u16) -> bool {
        Self::STATUSES
            .iter()
            .position(|s| *s == status)
            .is_some_and(|i| self.0 & (1 << i) != 0)
    }

    fn insert(&mut self, status: u16) -> bool {
        match Self::STATUSES.iter().position(|s| *s == status) {
            Some(i) => {
                self.0 |= 1 << i;
                true
            }
            None => false,
        }
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl NextUpstream {
    /// `off`, or conditions separated by spaces: `error`, `timeout`, `invalid_header` (read as
    /// `error`: a malformed head is a failed attempt), `http_500`, `http_502`, `http_503`,
    /// `http_504`, `http_403`, `http_404`, `http_429`, `non_idempotent`.
    pub fn parse(text: &str) -> Result<NextUpstream, String> {
        let mut out = NextUpstream::default();
        let mut off = false;
        for word in text.split_whitespace() {
            match word {
                "off" => off = true,
                "error" | "invalid_header" => out.error = true,
                "timeout" => out.timeout = true,
                "non_idempotent" => out.non_idempotent = true,
                other => {
                    let status = other
                        .strip_prefix("http_")
                        .and_then(|code| code.parse().ok())
                        .filter(|code| out.statuses.insert(*code));
                    if status.is_none() {
                        return Err(format!("{other:?} is not a condition (error, timeout, invalid_header, http_500, http_502, http_503, http_504, http_403, http_404, http_429, non_idempotent, off)"));
                    }
                }
            }
        }
        if off {
            return Ok(NextUpstream::default());
        }
        Ok(out)
    }

    /// Whether no condition retries.
    pub fn is_off(&self) -> bool {
        !self.error && !self.timeout && self.statuses.is_empty()
    }
}

impl fmt::Display for NextUpstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_off() {
            return f.write_str("off");
        }
        let mut words = Vec::new();
        if self.error {
            words.push("error".to_owned());
        }
        if self.timeout {
            words.push("timeout".to_owned());
        }
        for status in StatusSet::STATUSES {
            if self.statuses.contains(status) {
                words.push(format!("http_{status}"));
            }
        }
        if self.non_idempotent {
            words.push("non_idempotent".to_owned());
        }
        f.write_str(&words.join(" "))
    }
}

impl Serialize for NextUpstream {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

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
/// `forwarded-for-header`'s default.
pub const DEFAULT_FORWARDED_FOR_HEADER: &str = "x-forwarded-for";

/// `proxy-real-ip-cidr`'s default, ingress-nginx's (`0.0.0.0/0`): IPv4 only.
const EVERY_IPV4_PEER: IpNet = IpNet::new_assert(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);

/// ingress-nginx keys that other controllers' ConfigMaps carry and that need nothing from us.
/// `opentelemetry-config` is the path of the nginx module's own configuration file, which
/// ingress-nginx writes from the keys Sluice reads directly.
const ACCEPTED_UNUSED_KEYS: &[&str] = &["worker-cpu-affinity", "http2", "opentelemetry-config"];

/// Why ingress-nginx's access log path keys are not read.
const ACCESS_LOG_GOES: &str = "Sluice writes access log lines (HTTP, TCP and UDP) to standard \
     output, or to the file the --access-log-path flag names";

/// ingress-nginx's `no-auth-locations` default: ACME HTTP-01 challenges.
const DEFAULT_NO_AUTH_LOCATION: &str = "/.well-known/acme-challenge";

fn is_false(value: &bool) -> bool {
    !value
}

fn is_default_no_auth_locations(locations: &[String]) -> bool {
    locations == [DEFAULT_NO_AUTH_LOCATION]
}

/// The ConfigMap's access lists: one that cannot be read refuses every route.
const ACCESS_LIST_KEYS: &[&str] = &[
    "whitelist-source-range",
    "allowlist-source-range",
    "denylist-source-range",
];

/// `global-auth-url`'s companions: read with it once external authentication is implemented;
/// until then `global-auth-url` alone decides (it refuses the routes it would cover).
const WITH_GLOBAL_AUTH: &str =
    "planned (wave 2) with global-auth-url, which refuses the routes it \
     would cover until then";

/// Keys with ingress-nginx's meaning that Sluice does not implement, and why: an
/// `Unsupported` diagnostic rather than "unknown key".
const UNSUPPORTED_KEYS: &[(&str, &str)] = &[
    ("global-auth-method", WITH_GLOBAL_AUTH),
    ("global-auth-signin", WITH_GLOBAL_AUTH),
    ("global-auth-signin-redirect-param", WITH_GLOBAL_AUTH),
    ("global-auth-response-headers", WITH_GLOBAL_AUTH),
    ("global-auth-request-redirect", WITH_GLOBAL_AUTH),
    ("global-auth-cache-key", WITH_GLOBAL_AUTH),
    ("global-auth-cache-duration", WITH_GLOBAL_AUTH),
    ("global-auth-always-set-cookie", WITH_GLOBAL_AUTH),
    (
        "opentelemetry-operation-name",
        "nginx variables are not evaluated; spans are named \"METHOD PATH\" with the Ingress \
         path (OpenTelemetry's HTTP span name)",
    ),
    ("access-log-path", ACCESS_LOG_GOES),
    ("http-access-log-path", ACCESS_LOG_GOES),
    ("stream-access-log-path", ACCESS_LOG_GOES),
    ("error-log-path", "Sluice's own log goes to standard error"),
    (
        "error-log-level",
        "Sluice's log level is the --v flag's (or SLUICE_LOG)",
    ),
    (
        "access-log-params",
        "nginx's access_log buffering parameters; Sluice's log writer batches lines itself",
    ),
];

/// NGINX Inc.'s controller's name for `max-worker-connections` (nginx's `worker_connections`):
/// a limit the operator set is honoured rather than dropped; when both are set the
/// ingress-nginx name wins and the other is reported.
const WORKER_CONNECTIONS_ALIAS: &str = "worker-connections";

/// NGINX Inc.'s controller's names (the seeds' ConfigMaps use both dialects) and the
/// ingress-nginx key each means: the same rule as `worker-connections`.
const ALIASES: &[(&str, &str)] = &[
    (WORKER_CONNECTIONS_ALIAS, "max-worker-connections"),
    ("keepalive", "upstream-keepalive-connections"),
    ("keepalive-requests", "keep-alive-requests"),
    ("worker-rlimit-nofile", "max-worker-open-files"),
];

/// Keys that carry nginx configuration text (ingress-nginx's snippets, NGINX Inc.'s snippets
/// and templates): Sluice generates no nginx configuration and never executes them.
const SNIPPET_KEYS: &[&str] = &[
    "main-snippet",
    "http-snippet",
    "server-snippet",
    "location-snippet",
    "stream-snippet",
    "modsecurity-snippet",
    "global-auth-snippet",
    "main-snippets",
    "http-snippets",
    "server-snippets",
    "location-snippets",
    "stream-snippets",
    "main-template",
    "ingress-template",
    "virtualserver-template",
    "transportserver-template",
];

impl Settings {
    /// Settings from a ConfigMap's `data`; `source` names it in diagnostics.
    pub fn from_config_map(
        source: &ObjectRef,
        data: &BTreeMap<String, String>,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Settings {
        let mut settings = Settings::default();
        for (key, value) in data {
            let value = value.trim();
            if let Some((_, wins)) = ALIASES
                .iter()
                .find(|(alias, wins)| alias == key && data.contains_key(*wins))
            {
                diagnostics.push(Diagnostic::new(
                    source.clone(),
                    format!("data.{key}: ignored: {wins} is set too and wins"),
                ));
                continue;
            }
            if SNIPPET_KEYS.contains(&key.as_str()) {
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
            if let Some((_, why)) = UNSUPPORTED_KEYS.iter().find(|(k, _)| k == key) {
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
            let result = settings.set(key, value);
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
                    format!("data.{key}: invalid value {value:?}: expected {expected}; using the default"),
                ));
            }
            if key == "global-auth-url" && settings.global_auth_url {
                diagnostics.push(Diagnostic::new(
                    source.clone(),
                    "data.global-auth-url: restricts access and is not implemented yet (external \
                     authentication is planned for wave 2): every route it would cover answers 503 \
                     rather than serve unauthenticated; paths under no-auth-locations and \
                     Ingresses with enable-global-auth: \"false\" are served as before",
                ));
            }
        }
        let otel = &mut settings.opentelemetry;
        if !data.contains_key("otlp-collector-port") {
            otel.collector_port = otel.collector_protocol.default_port();
        }
        settings.check_opentelemetry(source, diagnostics);
        settings
    }

    /// Tracing on without a Collector to send spans to.
    fn check_opentelemetry(&self, source: &ObjectRef, diagnostics: &mut Vec<Diagnostic>) {
        let otel = &self.opentelemetry;
        if otel.enabled && otel.collector_host.is_empty() {
            diagnostics.push(Diagnostic::new(
                source.clone(),
                "data.enable-opentelemetry: \"true\" without otlp-collector-host: spans are made \
                 (and traceparent sent upstream) but not exported; they count as dropped",
            ));
        }
    }

    /// The `Strict-Transport-Security` value the `hsts*` keys make; `None` when `hsts` is off.
    /// Made once per compile (`Compiled::hsts_header`), so no request formats it and cloning
    /// the settings stays free of allocations.
    pub fn hsts_header(&self) -> Option<String> {
        self.hsts.then(|| {
            let mut value = format!("max-age={}", self.hsts_max_age);
            if self.hsts_include_subdomains {
                value.push_str("; includeSubDomains");
            }
            if self.hsts_preload {
                value.push_str("; preload");
            }
            value
        })
    }

    /// Whether `peer` is in `proxy-real-ip-cidr`: its forwarded headers may be believed
    /// (when `use-forwarded-headers` or `enable-real-ip` asks for them).
    pub fn is_trusted_proxy(&self, peer: IpAddr) -> bool {
        self.proxy_real_ip_cidr
            .iter()
            .any(|net| net.contains(&peer))
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), &'static str> {
        const DURATION: &str = "a duration like 60, 60s, 500ms or 5m";
        const COUNT: &str = "a whole number";
        const POSITIVE: &str = "a whole number of at least 1";
        match key {
            "upstream-keepalive-connections" | "keepalive" => {
                self.keepalive = value.parse().map_err(|_| COUNT)?
            }
            "upstream-keepalive-requests" => {
                self.upstream_keepalive_requests =
                    value.parse().ok().filter(|n| *n > 0).ok_or(POSITIVE)?
            }
            "upstream-keepalive-timeout" => {
                self.upstream_keepalive_timeout = parse_duration(value).ok_or(DURATION)?
            }
            "keep-alive" => self.keep_alive = parse_duration(value).ok_or(DURATION)?,
            "keep-alive-requests" | "keepalive-requests" => {
                self.keep_alive_requests = value.parse().ok().filter(|n| *n > 0).ok_or(POSITIVE)?
            }
            "max-worker-open-files" | "worker-rlimit-nofile" => {
                self.max_worker_open_files = value.parse().map_err(|_| COUNT)?
            }
            "proxy-stream-timeout" => {
                self.proxy_stream_timeout = parse_duration(value).ok_or(DURATION)?
            }
            "proxy-connect-timeout" => {
                self.proxy_connect_timeout = parse_duration(value).ok_or(DURATION)?
            }
            "proxy-read-timeout" => {
                self.proxy_read_timeout = parse_duration(value).ok_or(DURATION)?
            }
            "proxy-send-timeout" => {
                self.proxy_send_timeout = parse_duration(value).ok_or(DURATION)?
            }
            "client-header-timeout" => {
                self.client_header_timeout = parse_duration(value).ok_or(DURATION)?
            }
            "client-body-timeout" => {
                self.client_body_timeout = parse_duration(value).ok_or(DURATION)?
            }
            "client-send-timeout" => {
                self.client_send_timeout = parse_duration(value).ok_or(DURATION)?
            }
            "client-max-body-size" | "proxy-body-size" => {
                self.client_max_body_size =
                    parse_size(value).ok_or("a size like 1m, 512k or 1048576 (0 for no limit)")?
            }
            "proxy-request-buffering" => self.proxy_request_buffering = parse_on_off(value)?,
            "client-body-buffer-size" => {
                self.client_body_buffer_size = parse_size(value)
                    .and_then(|size| usize::try_from(size).ok())
                    .filter(|size| *size > 0)
                    .ok_or("a size of at least 1 byte, like 8k, 16k or 1m")?
            }
            "large-client-header-buffers" => {
                self.max_request_header_size =
                    parse_header_buffers(value).ok_or("a count and a size, like \"4 8k\"")?
            }
            "load-balance" => {
                self.load_balance = match value {
                    "round_robin" => LoadBalance::RoundRobin,
                    "least_request" => LoadBalance::LeastRequest,
                    _ => return Err("round_robin or least_request"),
                }
            }
            "proxy-stream-next-upstream" => self.proxy_stream_next_upstream = parse_bool(value)?,
            "proxy-stream-responses" => {
                self.proxy_stream_responses = value.parse().map_err(|_| COUNT)?
            }
            "proxy-stream-next-upstream-tries" => {
                self.proxy_stream_next_upstream_tries = value.parse().map_err(|_| COUNT)?
            }
            "proxy-stream-next-upstream-timeout" => {
                self.proxy_stream_next_upstream_timeout = parse_duration(value).ok_or(DURATION)?
            }
            // 0 is nginx's "no limit": every endpoint once (as the annotation reads it).
            "proxy-next-upstream-tries" => {
                self.proxy_next_upstream_tries = value.parse().map_err(|_| COUNT)?
            }
            "worker-shutdown-timeout" => {
                self.worker_shutdown_timeout = parse_duration(value).ok_or(DURATION)?
            }
            "worker-processes" => {
                self.worker_processes = match value {
                    "auto" => None,
                    n => Some(
                        n.parse()
                            .ok()
                            .filter(|n| *n > 0)
                            .ok_or("auto or a whole number")?,
                    ),
                }
            }
            "max-worker-connections" | WORKER_CONNECTIONS_ALIAS => {
                self.max_worker_connections = value.parse().map_err(|_| COUNT)?
            }
            "ssl-session-tickets" => self.ssl_session_tickets = parse_bool(value)?,
            "ssl-redirect" => self.ssl_redirect = parse_bool(value)?,
            "use-forwarded-headers" => self.use_forwarded_headers = parse_bool(value)?,
            "use-proxy-protocol" => self.use_proxy_protocol = parse_bool(value)?,
            "use-h2c" => self.use_h2c = parse_bool(value)?,
            "enable-real-ip" => self.enable_real_ip = parse_bool(value)?,
            "forwarded-for-header" => {
                self.forwarded_for_header =
                    parse_header_name(value).ok_or("a header name like X-Forwarded-For")?
            }
            "compute-full-forwarded-for" => self.compute_full_forwarded_for = parse_bool(value)?,
            PROXY_REAL_IP_CIDR => {
                // Bad entries are reported by `from_config_map` and left out.
                self.proxy_real_ip_cidr = value.split(',').filter_map(parse_cidr).collect()
            }
            "proxy-add-original-uri-header" => {
                self.proxy_add_original_uri_header = parse_bool(value)?
            }
            "generate-request-id" => self.generate_request_id = parse_bool(value)?,
            "disable-access-log" => self.disable_access_log = parse_bool(value)?,
            "disable-http-access-log" => self.disable_http_access_log = parse_bool(value)?,
            "disable-stream-access-log" => self.disable_stream_access_log = parse_bool(value)?,
            "log-format-stream" => self.log_format_stream = value.to_owned(),
            "log-format-upstream" => self.log_format_upstream = value.to_owned(),
            "log-format-escape-json" => self.log_format_escape_json = parse_bool(value)?,
            "log-format-escape-none" => self.log_format_escape_none = parse_bool(value)?,
            "skip-access-log-urls" => {
                self.skip_access_log_urls = value
                    .split(',')
                    .map(str::trim)
                    .filter(|url| !url.is_empty())
                    .map(str::to_owned)
                    .collect()
            }
            "enable-opentelemetry" => self.opentelemetry.enabled = parse_bool(value)?,
            "opentelemetry-trust-incoming-span" => {
                self.opentelemetry.trust_incoming_span = parse_bool(value)?
            }
            "otlp-collector-host" => {
                self.opentelemetry.collector_host =
                    parse_host(value).ok_or("a host name or an IP address")?
            }
            "otlp-collector-port" => {
                self.opentelemetry.collector_port = value
                    .parse()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or("a port, 1 to 65535")?
            }
            "otlp-collector-protocol" => {
                self.opentelemetry.collector_protocol = match value {
                    "grpc" => OtlpProtocol::Grpc,
                    "http/protobuf" => OtlpProtocol::HttpProtobuf,
                    _ => return Err("grpc or http/protobuf"),
                }
            }
            "otel-service-name" => {
                self.opentelemetry.service_name = Some(value)
                    .filter(|v| !v.is_empty() && !v.chars().any(char::is_control))
                    .ok_or("a name without control characters")?
                    .to_owned()
            }
            "otel-sampler" => {
                self.opentelemetry.sampler = match value {
                    "AlwaysOn" => Sampler::AlwaysOn,
                    "AlwaysOff" => Sampler::AlwaysOff,
                    "TraceIdRatioBased" => Sampler::TraceIdRatioBased,
                    _ => return Err("AlwaysOn, AlwaysOff or TraceIdRatioBased"),
                }
            }
            "otel-sampler-ratio" => {
                self.opentelemetry.sampler_ratio = value
                    .parse::<f64>()
                    .ok()
                    .filter(|r| (0.0..=1.0).contains(r))
                    .ok_or("a number from 0 to 1, like 0.01")?
            }
            "otel-sampler-parent-based" => {
                self.opentelemetry.sampler_parent_based = parse_bool(value)?
            }
            "otel-max-queuesize" => {
                self.opentelemetry.max_queue_size =
                    value.parse().ok().filter(|n| *n > 0).ok_or(POSITIVE)?
            }
            "otel-schedule-delay-millis" => {
                self.opentelemetry.schedule_delay = value
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .map(Duration::from_millis)
                    .ok_or("a whole number of milliseconds, at least 1")?
            }
            "otel-max-export-batch-size" => {
                self.opentelemetry.max_export_batch_size =
                    value.parse().ok().filter(|n| *n > 0).ok_or(POSITIVE)?
            }
            "http2-max-concurrent-streams" => {
                self.http2_max_concurrent_streams =
                    value.parse().ok().filter(|n| *n > 0).ok_or(POSITIVE)?
            }
            "enable-underscores-in-headers" => {
                self.enable_underscores_in_headers = parse_bool(value)?
            }
            "hsts" => self.hsts = parse_bool(value)?,
            "hsts-max-age" => self.hsts_max_age = value.parse().map_err(|_| COUNT)?,
            "hsts-include-subdomains" => self.hsts_include_subdomains = parse_bool(value)?,
            "hsts-preload" => self.hsts_preload = parse_bool(value)?,
            "http-redirect-code" => {
                self.http_redirect_code = value
                    .parse()
                    .ok()
                    .filter(|code| [301, 302, 307, 308].contains(code))
                    .ok_or("301, 302, 307 or 308")?
            }
            "force-ssl-redirect" => self.force_ssl_redirect = parse_bool(value)?,
            "preserve-trailing-slash" => self.preserve_trailing_slash = parse_bool(value)?,
            "proxy-next-upstream" => {
                self.proxy_next_upstream = NextUpstream::parse(value)
                    .map_err(|_| "conditions like \"error timeout http_502\", or off")?
            }
            "proxy-next-upstream-timeout" => {
                self.proxy_next_upstream_timeout = parse_duration(value).ok_or(DURATION)?
            }
            "whitelist-source-range" | "allowlist-source-range" => {
                self.whitelist_source_range =
                    parse_cidrs(value).map_err(|_| "comma-separated IP addresses or CIDR ranges")?
            }
            "denylist-source-range" => {
                self.denylist_source_range =
                    parse_cidrs(value).map_err(|_| "comma-separated IP addresses or CIDR ranges")?
            }
            "allow-snippet-annotations" => self.allow_snippet_annotations = parse_bool(value)?,
            "global-auth-url" => self.global_auth_url = !value.is_empty(),
            "no-auth-locations" => {
                self.no_auth_locations = value
                    .split(',')
                    .map(str::trim)
                    .filter(|location| !location.is_empty())
                    .map(str::to_owned)
                    .collect()
            }
            key if ACCEPTED_UNUSED_KEYS.contains(&key) => {}
            _ => return Err("a key Sluice knows (see the README); this one is ignored"),
        }
        Ok(())
    }
}

/// `proxy-real-ip-cidr`: its entries are checked one by one.
const PROXY_REAL_IP_CIDR: &str = "proxy-real-ip-cidr";

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

fn as_text<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&format_args!("{duration:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::Kind;

    fn settings(pairs: &[(&str, &str)]) -> (Settings, Vec<String>) {
        let data = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut diagnostics = Vec::new();
        let source = ObjectRef::new(Kind::ConfigMap, "sluice", "sluice");
        let settings = Settings::from_config_map(&source, &data, &mut diagnostics);
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
        assert!(diagnostics[1]
            .contains("data.keepalive-requests: ignored: keep-alive-requests is set too"));
        assert!(diagnostics[2]
            .contains("data.worker-rlimit-nofile: ignored: max-worker-open-files is set too"));
        let (_, diagnostics) = settings(&[("upstream-keepalive-requests", "0")]);
        assert!(diagnostics[0].contains("data.upstream-keepalive-requests: invalid value \"0\""));
    }

    #[test]
    fn snippet_and_template_keys_are_refused_never_executed() {
        for key in SNIPPET_KEYS {
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
        assert_eq!(defaults.log_format_stream, crate::access_log::LOG_STREAM);
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
}
