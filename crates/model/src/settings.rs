//! Controller settings as the proxy reads them, with their defaults (ingress-nginx's unless
//! noted). The ConfigMap keys that set them, and their checks, are `translate::configmap`.

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use ipnet::IpNet;
use serde::{Serialize, Serializer};

use crate::compression::Compression;
use crate::server_tls::ServerTls;

/// ingress-nginx's default `log-format-stream`.
pub const LOG_STREAM: &str =
    "[$remote_addr] [$time_local] $protocol $status $bytes_sent $bytes_received $session_time";

/// ingress-nginx's default `log-format-upstream` (its `upstreaminfo` format).
pub const UPSTREAMINFO: &str = "$remote_addr - $remote_user [$time_local] \"$request\" \
$status $body_bytes_sent \"$http_referer\" \"$http_user_agent\" $request_length $request_time \
[$proxy_upstream_name] [$proxy_alternative_upstream_name] $upstream_addr \
$upstream_response_length $upstream_response_time $upstream_status $req_id";

/// How a worker picks an endpoint among a backend's active ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadBalance {
    RoundRobin,
    /// Power of two random choices on in-flight requests.
    LeastRequest,
    /// ingress-nginx's `ewma`: power of two random choices on each endpoint's response time,
    /// an exponentially weighted moving average that decays over 10 s.
    Ewma,
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
    /// `upstream-keepalive-time` (nginx's `keepalive_time`): an upstream connection is not
    /// pooled again once it is this old, however busy (so a backend's connections are renewed,
    /// and a backend scaled out gets its share).
    #[serde(serialize_with = "as_text")]
    pub upstream_keepalive_time: Duration,
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
    /// The other `ssl-*` keys of the client-facing handshake (`server_tls`).
    #[serde(skip_serializing_if = "ServerTls::is_default")]
    pub server_tls: ServerTls,
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
    /// 3.3), as gRPC clients without TLS do. Off by default; on whenever a Gateway's HTTP
    /// listener is served (GRPCRoute requires h2c there).
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
    /// `custom-http-errors`: answers with these codes (300-599, sorted) are made by
    /// `--default-backend-service` instead, for every route without the annotation.
    pub custom_http_errors: Vec<u16>,
    /// `disable-proxy-intercept-errors`: only Sluice's own answers are replaced, never the
    /// upstream's.
    pub disable_proxy_intercept_errors: bool,
    /// `hsts`: send `Strict-Transport-Security` on HTTPS responses for hosts with their own
    /// certificate.
    pub hsts: bool,
    /// `hsts-max-age`, in seconds.
    pub hsts_max_age: u64,
    /// `hsts-include-subdomains`.
    pub hsts_include_subdomains: bool,
    /// `hsts-preload`.
    pub hsts_preload: bool,
    /// `use-gzip`, `gzip-*`, `enable-brotli`, `brotli-*`: response compression. Shown (in
    /// `/config` and golden files) only when a key differs from its default.
    #[serde(skip_serializing_if = "Compression::is_default")]
    pub compression: Compression,
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
    /// `limit-req-status-code`: the answer to a request over `limit-rps` / `limit-rpm`.
    pub limit_req_status_code: u16,
    /// `limit-conn-status-code`: the answer to a request over `limit-connections`.
    pub limit_conn_status_code: u16,
    /// `limit-conn-zone-variable`: what the request and connection limits are keyed by.
    pub limit_conn_zone_variable: crate::limits::LimitKey,
    /// `limit-rate` (KB/s in the ConfigMap, bytes per second here): every response's rate
    /// unless its Ingress sets its own; 0: no limit.
    pub limit_rate: u64,
    /// `limit-rate-after` (KB in the ConfigMap, bytes here).
    pub limit_rate_after: u64,
    /// `allow-snippet-annotations`: read `configuration-snippet` and `server-snippet` (never
    /// executed: only a safe subset is translated). Off by default, as in ingress-nginx.
    pub allow_snippet_annotations: bool,
    /// `allow-cross-namespace-resources`: annotations may name a Secret or ConfigMap of
    /// another namespace (auth-secret, auth-tls-secret, proxy-ssl-secret,
    /// auth-proxy-set-headers). Off by default, as in ingress-nginx.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub allow_cross_namespace_resources: bool,
    /// `global-allowed-response-headers`: the header names the `custom-headers` annotation's
    /// ConfigMaps may set (exactly as written; empty: none, as in ingress-nginx).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub global_allowed_response_headers: Vec<String>,
    /// `proxy-set-headers`: the ConfigMap (`namespace/name`) whose data are headers set on
    /// every request sent upstream; compile turns them into every route's request header edits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy_set_headers: Option<String>,
    /// `add-headers`: the ConfigMap (`namespace/name`) whose data are headers set on every
    /// response; compile turns them into every route's response header edits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub add_headers: Option<String>,
    /// `global-auth-url` and its companions, as written, by the name of the annotation each
    /// stands for (`auth-url`, `auth-method`…): external authentication for every route of
    /// an Ingress without its own `auth-url` (and not `enable-global-auth: "false"`),
    /// compiled with the annotations' rules.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub global_auth: std::collections::BTreeMap<String, String>,
    /// `no-auth-locations`: path prefixes `global-auth-url` leaves out (ingress-nginx's default
    /// keeps ACME HTTP-01 challenges answerable, so certificates still renew).
    #[serde(skip_serializing_if = "is_default_no_auth_locations")]
    pub no_auth_locations: Vec<String>,
    /// Why every route answers 503 whatever its annotations: an allow- or deny-list of the
    /// ConfigMap that cannot be read (an access list is never dropped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_refused: Option<String>,
    /// `mirror-max-in-flight` (Sluice's own): mirrored requests one worker keeps in flight at
    /// most; a request that would go over it is not mirrored (counted). Shown only when set.
    #[serde(skip_serializing_if = "is_default_mirror_max_in_flight")]
    pub mirror_max_in_flight: u32,
    /// `auth-cache-max-entries` (Sluice's own): answers the auth cache (`auth-cache-key`)
    /// keeps at most, for the whole process; the least recently used goes first.
    #[serde(skip_serializing_if = "is_default_auth_cache_max_entries")]
    pub auth_cache_max_entries: usize,
    /// `proxy-redirect-from`, `proxy-redirect-to`, `proxy-cookie-path`, `proxy-cookie-domain`:
    /// every route's default for the annotations of the same names (ingress-nginx: `off`),
    /// checked as the annotations are.
    #[serde(skip_serializing_if = "ResponseRewriteDefaults::is_off")]
    pub response_rewrite: ResponseRewriteDefaults,
    /// `server-tokens`: answers say `Server: sluice/<version>`; off (the default), they carry
    /// no `Server` at all, the upstream's removed too (ingress-nginx's `more_clear_headers`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub server_tokens: bool,
    /// `allow-backend-server-header`: with `server-tokens`, the upstream's `Server` is passed
    /// on instead of replaced (nginx's `proxy_pass_header Server`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub allow_backend_server_header: bool,
    /// `hide-headers`: header names (lower case) removed from every upstream answer.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hide_headers: Vec<String>,
    /// `block-cidrs`: client addresses answered 403 on every host and path.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub block_cidrs: Vec<IpNet>,
    /// `block-user-agents`: nginx `map` entries (`~regex`, `~*regex`, or the whole value
    /// ignoring case) whose `User-Agent` is answered 403 everywhere.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub block_user_agents: Vec<String>,
    /// `block-referers`: the same, for `Referer`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub block_referers: Vec<String>,
    /// `no-tls-redirect-locations`: routes whose path as written starts with one of these
    /// are never redirected to https (ingress-nginx's default keeps ACME HTTP-01 challenges
    /// answerable over plain HTTP while a certificate is issued).
    #[serde(skip_serializing_if = "is_default_no_auth_locations")]
    pub no_tls_redirect_locations: Vec<String>,
    /// `retry-non-idempotent`: every route's `proxy-next-upstream` also retries POST, LOCK
    /// and PATCH after their bytes may have reached an endpoint (nginx's `non_idempotent`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub retry_non_idempotent: bool,
    /// `annotations-risk-level`: an Ingress with an annotation ingress-nginx rates riskier than
    /// this is refused (its routes answer 503, the webhook denies it). Default `High`, as
    /// ingress-nginx ≥ 1.12: the snippets (`Critical`) are refused.
    #[serde(skip_serializing_if = "AnnotationRisk::is_default")]
    pub annotations_risk_level: AnnotationRisk,
    /// `annotation-value-word-blocklist`: an Ingress with an annotation whose value holds one
    /// of these is refused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub annotation_value_word_blocklist: Vec<String>,
    /// `strict-validate-path-type`: the admission webhook denies `Exact` and `Prefix` paths
    /// with other characters than letters, digits, `.`, `_`, `-` and `/` (ingress-nginx's
    /// webhook check; the paths already stored are served).
    #[serde(skip_serializing_if = "is_true")]
    pub strict_validate_path_type: bool,
    /// `service-upstream`: every Ingress's default for the annotation of the same name.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub service_upstream: bool,
    /// `proxy-protocol-header-timeout`: the PROXY protocol header must arrive within this (and
    /// within `client-header-timeout`).
    #[serde(
        serialize_with = "as_text",
        skip_serializing_if = "is_default_proxy_protocol_header_timeout"
    )]
    pub proxy_protocol_header_timeout: Duration,
    /// `ignore-invalid-headers` (on by default, as nginx): request headers whose names hold
    /// other characters than letters, digits and `-` (and `_` with
    /// `enable-underscores-in-headers`) are dropped; off, every name is sent on.
    #[serde(skip_serializing_if = "is_true")]
    pub ignore_invalid_headers: bool,
    /// `enable-access-log-for-default-backend`: log the requests ingress-nginx's default
    /// server answers (no host or rule matched: the built-in 404 or
    /// `--default-backend-service`); off by default, as ingress-nginx (scanners knocking on
    /// the address fill no log).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub enable_access_log_for_default_backend: bool,
    /// `disable-ipv6-dns`: the resolver (ExternalName Services, URL annotations at a host
    /// name) asks for no AAAA record and uses no IPv6 name server.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub disable_ipv6_dns: bool,
}

/// ingress-nginx's rating of what an annotation can do to the controller and other tenants
/// (its `annotations-risk.md`), in increasing order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum AnnotationRisk {
    Low,
    Medium,
    #[default]
    High,
    Critical,
}

impl AnnotationRisk {
    /// As ingress-nginx reads the key: case-insensitive, and anything else is `Low`.
    pub fn parse(value: &str) -> AnnotationRisk {
        match value.to_ascii_lowercase().as_str() {
            "critical" => AnnotationRisk::Critical,
            "high" => AnnotationRisk::High,
            "medium" => AnnotationRisk::Medium,
            _ => AnnotationRisk::Low,
        }
    }

    fn is_default(&self) -> bool {
        *self == AnnotationRisk::default()
    }
}

/// The ConfigMap's defaults of the upstream answers' rewrites, as written (`off`: none).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ResponseRewriteDefaults {
    pub proxy_redirect_from: String,
    pub proxy_redirect_to: String,
    pub proxy_cookie_path: String,
    pub proxy_cookie_domain: String,
}

impl Default for ResponseRewriteDefaults {
    fn default() -> Self {
        ResponseRewriteDefaults {
            proxy_redirect_from: "off".to_owned(),
            proxy_redirect_to: "off".to_owned(),
            proxy_cookie_path: "off".to_owned(),
            proxy_cookie_domain: "off".to_owned(),
        }
    }
}

impl ResponseRewriteDefaults {
    pub fn is_off(&self) -> bool {
        *self == ResponseRewriteDefaults::default()
    }

    /// The ConfigMap's value for the annotation `name`, unless `off`.
    pub fn get(&self, name: &str) -> Option<&str> {
        let value = match name {
            "proxy-redirect-from" => &self.proxy_redirect_from,
            "proxy-redirect-to" => &self.proxy_redirect_to,
            "proxy-cookie-path" => &self.proxy_cookie_path,
            "proxy-cookie-domain" => &self.proxy_cookie_domain,
            _ => return None,
        };
        (value != "off").then_some(value.as_str())
    }
}

/// The default `auth-cache-max-entries`: ~10,000 sessions, a few MB at most (a kept answer
/// holds its status and the auth-response-headers).
pub const DEFAULT_AUTH_CACHE_MAX_ENTRIES: usize = 10_000;

fn is_default_auth_cache_max_entries(value: &usize) -> bool {
    *value == DEFAULT_AUTH_CACHE_MAX_ENTRIES
}

/// The default `mirror-max-in-flight`: per worker, so a mirror that stops answering holds at
/// most this many connections (and tee buffers) of each worker.
pub const DEFAULT_MIRROR_MAX_IN_FLIGHT: u32 = 100;

fn is_default_mirror_max_in_flight(value: &u32) -> bool {
    *value == DEFAULT_MIRROR_MAX_IN_FLIGHT
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
    /// Response statuses that count as failures: 500, 502, 503, 504, 403, 404, 429 from
    /// nginx's words; any of 400-599 from Gateway API's `retry.codes`.
    pub statuses: StatusSet,
    pub non_idempotent: bool,
}

/// A set of error statuses (400-599): the ones `proxy_next_upstream` can name, or Gateway API's
/// `retry.codes`. One bit per status, so a lookup is a shift.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatusSet([u64; 4]);

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            keepalive: 100,
            upstream_keepalive_requests: 10_000,
            upstream_keepalive_time: Duration::from_secs(3600),
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
            ssl_session_tickets: false,
            server_tls: ServerTls::default(),
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
            log_format_stream: LOG_STREAM.to_owned(),
            log_format_upstream: UPSTREAMINFO.to_owned(),
            log_format_escape_json: false,
            log_format_escape_none: false,
            skip_access_log_urls: Vec::new(),
            opentelemetry: OpenTelemetry::default(),
            http2_max_concurrent_streams: 128,
            enable_underscores_in_headers: false,
            custom_http_errors: Vec::new(),
            disable_proxy_intercept_errors: false,
            hsts: true,
            hsts_max_age: 31_536_000,
            hsts_include_subdomains: true,
            hsts_preload: false,
            compression: Compression::default(),
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
            limit_req_status_code: 503,
            limit_conn_status_code: 503,
            limit_conn_zone_variable: crate::limits::LimitKey::RemoteAddr,
            limit_rate: 0,
            limit_rate_after: 0,
            allow_snippet_annotations: false,
            allow_cross_namespace_resources: false,
            global_allowed_response_headers: Vec::new(),
            proxy_set_headers: None,
            add_headers: None,
            global_auth: std::collections::BTreeMap::new(),
            no_auth_locations: vec![DEFAULT_NO_AUTH_LOCATION.to_owned()],
            access_refused: None,
            mirror_max_in_flight: DEFAULT_MIRROR_MAX_IN_FLIGHT,
            auth_cache_max_entries: DEFAULT_AUTH_CACHE_MAX_ENTRIES,
            response_rewrite: ResponseRewriteDefaults::default(),
            server_tokens: false,
            allow_backend_server_header: false,
            hide_headers: Vec::new(),
            block_cidrs: Vec::new(),
            block_user_agents: Vec::new(),
            block_referers: Vec::new(),
            no_tls_redirect_locations: vec![DEFAULT_NO_AUTH_LOCATION.to_owned()],
            retry_non_idempotent: false,
            annotations_risk_level: AnnotationRisk::High,
            annotation_value_word_blocklist: Vec::new(),
            strict_validate_path_type: true,
            service_upstream: false,
            proxy_protocol_header_timeout: PROXY_PROTOCOL_HEADER_TIMEOUT,
            ignore_invalid_headers: true,
            enable_access_log_for_default_backend: false,
            disable_ipv6_dns: false,
        }
    }
}

impl StatusSet {
    /// The statuses nginx's `proxy_next_upstream` names, in the order it lists them.
    const NGINX: [u16; 7] = [500, 502, 503, 504, 403, 404, 429];
    const FIRST: u16 = 400;
    const LAST: u16 = 599;

    pub fn contains(self, status: u16) -> bool {
        (Self::FIRST..=Self::LAST).contains(&status) && {
            let i = usize::from(status - Self::FIRST);
            self.0[i / 64] & (1 << (i % 64)) != 0
        }
    }

    /// Adds an error status (400-599); false for any other.
    pub fn insert(&mut self, status: u16) -> bool {
        if !(Self::FIRST..=Self::LAST).contains(&status) {
            return false;
        }
        let i = usize::from(status - Self::FIRST);
        self.0[i / 64] |= 1 << (i % 64);
        true
    }

    /// Adds one of the statuses nginx's `http_*` words name; false for any other.
    fn insert_nginx(&mut self, status: u16) -> bool {
        Self::NGINX.contains(&status) && self.insert(status)
    }

    pub fn is_empty(self) -> bool {
        self.0 == [0; 4]
    }

    /// The statuses held: nginx's in its order, then the others ascending.
    pub fn iter(self) -> impl Iterator<Item = u16> {
        let others = (Self::FIRST..=Self::LAST).filter(|s| !Self::NGINX.contains(s));
        Self::NGINX
            .into_iter()
            .chain(others)
            .filter(move |s| self.contains(*s))
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
                        .filter(|code| out.statuses.insert_nginx(*code));
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
        for status in self.statuses.iter() {
            words.push(format!("http_{status}"));
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

/// `forwarded-for-header`'s default.
pub const DEFAULT_FORWARDED_FOR_HEADER: &str = "x-forwarded-for";

/// `proxy-real-ip-cidr`'s default, ingress-nginx's (`0.0.0.0/0`): IPv4 only.
const EVERY_IPV4_PEER: IpNet = IpNet::new_assert(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);

/// ingress-nginx's `no-auth-locations` default: ACME HTTP-01 challenges.
const DEFAULT_NO_AUTH_LOCATION: &str = "/.well-known/acme-challenge";

fn is_true(value: &bool) -> bool {
    *value
}

/// ingress-nginx's `proxy-protocol-header-timeout` default.
const PROXY_PROTOCOL_HEADER_TIMEOUT: Duration = Duration::from_secs(5);

fn is_default_proxy_protocol_header_timeout(timeout: &Duration) -> bool {
    *timeout == PROXY_PROTOCOL_HEADER_TIMEOUT
}

fn is_default_no_auth_locations(locations: &[String]) -> bool {
    locations == [DEFAULT_NO_AUTH_LOCATION]
}

impl Settings {
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
}

pub(crate) fn as_text<S: Serializer>(
    duration: &Duration,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&format_args!("{duration:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_sets_hold_any_error_status_and_nginx_words_only_its_own() {
        let mut set = StatusSet::default();
        assert!(set.insert(599) && set.insert(400) && set.insert(502));
        assert!(!set.insert(399) && !set.insert(600));
        assert_eq!(set.iter().collect::<Vec<_>>(), [502, 400, 599]);
        assert!(!set.contains(500) && !set.contains(200));
        assert!(NextUpstream::parse("http_418").is_err());
        let parsed = NextUpstream::parse("error http_429 http_500").unwrap();
        assert_eq!(parsed.to_string(), "error http_500 http_429");
    }
}
