//! The annotation registry: every annotation ingress-nginx documents, what Sluice does with
//! it (README's table) and the parser that reads it.

/// ingress-nginx's annotation prefix.
pub const NGINX_PREFIX: &str = "nginx.ingress.kubernetes.io/";
/// Sluice's own prefix for the same keys; it wins when both name one key.
pub const SLUICE_PREFIX: &str = "sluice.dev/";

/// What Sluice does with one ingress-nginx annotation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// Has ingress-nginx's effect.
    Yes,
    /// Has an effect, with the limits the text names.
    Partial(&'static str),
    /// Read and accepted: Sluice already behaves so, or the knob has no meaning here.
    Accepted(&'static str),
    /// Not implemented: a diagnostic on the Ingress. The text says why or where it is planned.
    No(&'static str),
    /// Not implemented, and it restricts who may reach a route: set, it refuses the Ingress's
    /// routes (503, an error diagnostic, the webhook's refusal), as an unreadable allow-list
    /// does, rather than serving them without it. The text says what it is and until when.
    FailsClosed(&'static str),
    /// Sluice's own, which ingress-nginx does not have: read only as `sluice.dev/<key>` (under
    /// ingress-nginx's prefix it is a diagnostic, as ingress-nginx would ignore it). The text
    /// says what it does.
    Sluice(&'static str),
}

/// A companion of `auth-type`: ingress-nginx reads it only with `auth-type`.
pub(super) const WITH_AUTH_TYPE: &str = "planned (wave 2); read only with auth-type (alone ignored, as in ingress-nginx), which refuses the Ingress until then";
/// A companion of `auth-tls-secret`.
pub(super) const WITH_AUTH_TLS_SECRET: &str = "planned (wave 2); read only with auth-tls-secret (alone ignored, as in ingress-nginx), which refuses the Ingress until then";
/// A companion of `auth-url`.
pub(super) const WITH_AUTH_URL: &str = "planned (wave 2); read only with auth-url (alone ignored, as in ingress-nginx), which refuses the Ingress until then";
/// Why the global rate limit does not fail closed: it bounds how much a client may ask, not
/// who may ask. Without it every client still gets exactly the answers it is entitled to; what
/// is lost is protection of the backends' capacity, which a diagnostic reports.
pub(super) const GLOBAL_RATE_LIMIT: &str = "ingress-nginx counts it in a memcached server (global-rate-limit-memcached-host) shared by all replicas; Sluice has no memcached client, and a limit counted per replica would let N times the requests through without saying so. A rate limit protects capacity, not access, so the Ingress is served without it, with a diagnostic; limit-rps / limit-rpm limit per replica";
/// `limit-connections`: nginx's limit_conn, with what Sluice counts differently.
pub(super) const LIMIT_CONN: &str = "requests in progress per client address (nginx's limit_conn: an HTTP/2 stream counts as one, a keep-alive connection between requests as none), for all paths of the Ingress together, answered limit-conn-status-code (503); held until the response is sent. Difference: a WebSocket (upgraded) connection is counted until its 101 is sent, not for its whole life";
/// `limit-rate` / `limit-rate-after`: nginx's limit_rate.
pub(super) const LIMIT_RATE: &str = "KB/s (KB) per response body, with nginx's first-second allowance (a response may be ahead by one second of rate); the ConfigMap's keys are the default. Difference: applied with proxy-buffering off too (ingress-nginx documents that it needs proxy-buffering on, nginx's unbuffered path does not keep to it); the response headers are not counted";
/// Why the ModSecurity switches do not fail closed while `modsecurity-snippet` does.
pub(super) const NO_WAF: &str = "no web application firewall in Sluice; without modsecurity-snippet, ingress-nginx runs ModSecurity in DetectionOnly mode (it logs, blocks nothing), so the Ingress is served, with a diagnostic";

/// CORS: ingress-nginx's semantics and traps, and the differences Sluice keeps.
/// `proxy-redirect-*`, `proxy-cookie-*`.
pub(super) const RESPONSE_REWRITE: &str = "as nginx's proxy_redirect / proxy_cookie_path / proxy_cookie_domain on the upstream's answers (not Sluice's own): literal text only (a ~ regex is refused), the redirect and cookie path by a case-sensitive prefix, the cookie domain whole and case-insensitively; proxy-redirect-from off (the default), default, or without proxy-redirect-to rewrites nothing, as ingress-nginx's template renders them; no ConfigMap keys (their default off)";

pub(super) const CORS: &str = "as ingress-nginx's template: an OPTIONS request that gets CORS headers is answered 204 by Sluice (never the backend), before the allow-lists (a refused client still gets its preflight answered) and redirects, after app-root; the Access-Control-* headers replace the backend's on every answer of the route, Sluice's own errors included (403, 413 for a body found too large while read, 502, 503, 504), not on a route refused by its config (503), a 413 for a declared Content-Length or a custom-http-errors page; cors-allow-origin * (the default, also when the value is refused as a whole) sends * to every request, with Allow-Credentials: true by default; a list echoes the Origin only when an entry matches its end, case-insensitively (*. is one label), and otherwise sends nothing, with no Vary: Origin. Difference: the 204 has no Content-Length (RFC 9110), its Content-Type is text/plain charset=UTF-8 as ingress-nginx writes it";

/// One annotation: its name (without prefix), what Sluice does with it (README's table) and
/// the parser that reads it. The reader knows no annotation that is not here.
#[derive(Clone, Copy, Debug)]
pub struct Annotation {
    pub name: &'static str,
    pub support: Support,
    /// `None`: nothing reads the value (not implemented, or accepted as a no-op); its
    /// presence alone is diagnosed from `support`.
    pub parser: Option<Parser>,
}

/// The parsers of the registry, each reading one annotation or a family that is read together
/// (`proxy-ssl-*`, the redirects). They run in this order, each once per Ingress whether or not
/// its annotations are set (defaults and "has no effect without" notices come from them). The
/// order matters where two write one field: `backend-protocol`, the access lists, the
/// fail-closed annotations and the snippets each may refuse the routes, the last one's reason
/// wins; and `ssl-passthrough` is read before `ssl-passthrough-proxy-protocol`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Parser {
    SslRedirect,
    AccessLog,
    OpenTelemetry,
    Redirect,
    UseRegex,
    AppRoot,
    FromToWww,
    ServerAlias,
    Rewrite,
    UpstreamVhost,
    ServiceUpstream,
    SslPassthrough,
    Body,
    Upstream,
    HashBy,
    Canary,
    CustomErrors,
    Mirror,
    Cors,
    ResponseRewrite,
    ConnectionHeader,
    CustomHeaders,
    ProxyBuffering,
    ProxyHttpVersion,
    BackendProtocol,
    ProxySsl,
    Access,
    Limits,
    FailClosed,
    GlobalAuth,
    Snippets,
}

pub(super) const fn annotation(
    name: &'static str,
    support: Support,
    parser: Option<Parser>,
) -> Annotation {
    Annotation {
        name,
        support,
        parser,
    }
}

/// The registry entry of `name` (without prefix).
pub fn entry(name: &str) -> Option<&'static Annotation> {
    REGISTRY.iter().find(|a| a.name == name)
}

/// Every annotation ingress-nginx documents, what Sluice does with it and its parser, then
/// Sluice's own. README's table is made from this (a test keeps them equal), and the reader
/// runs the parsers named here: a supported annotation without a parser fails a test.
pub const REGISTRY: &[Annotation] = &[
    annotation("app-root", Support::Yes, Some(Parser::AppRoot)),
    annotation("affinity", Support::No("planned (wave 2)"), None),
    annotation("affinity-mode", Support::No("planned (wave 2)"), None),
    annotation("affinity-canary-behavior", Support::No("planned (wave 2)"), None),
    annotation("allowlist-source-range", Support::Yes, Some(Parser::Access)),
    annotation("auth-realm", Support::No(WITH_AUTH_TYPE), None),
    annotation("auth-secret", Support::No(WITH_AUTH_TYPE), None),
    annotation("auth-secret-type", Support::No(WITH_AUTH_TYPE), None),
    annotation("auth-type", Support::FailsClosed("until basic and digest authentication are implemented (wave 2): any value refuses the Ingress's routes (503) rather than serve them to anyone; ingress-nginx, too, refuses them when auth-type or auth-secret cannot be used"), Some(Parser::FailClosed)),
    annotation("auth-tls-secret", Support::FailsClosed("until client certificate authentication is implemented (wave 2): any value refuses every route of the Ingress's hosts, other Ingresses' included (503), rather than serve them without a client certificate (ingress-nginx verifies one by default, auth-tls-verify-client: on, for the whole server: its TLS handshake asks every client of the host; and refuses the routes when the Secret cannot be used)"), Some(Parser::FailClosed)),
    annotation("auth-tls-verify-depth", Support::No(WITH_AUTH_TLS_SECRET), None),
    annotation("auth-tls-verify-client", Support::No(WITH_AUTH_TLS_SECRET), None),
    annotation("auth-tls-error-page", Support::No(WITH_AUTH_TLS_SECRET), None),
    annotation("auth-tls-pass-certificate-to-upstream", Support::No(WITH_AUTH_TLS_SECRET), None),
    annotation("auth-tls-match-cn", Support::No(WITH_AUTH_TLS_SECRET), None),
    annotation("auth-signin", Support::No(WITH_AUTH_URL), None),
    annotation("auth-signin-redirect-param", Support::No(WITH_AUTH_URL), None),
    annotation("auth-method", Support::No(WITH_AUTH_URL), None),
    annotation("auth-response-headers", Support::No(WITH_AUTH_URL), None),
    annotation("auth-request-redirect", Support::No(WITH_AUTH_URL), None),
    annotation("auth-url", Support::FailsClosed("until external authentication is implemented (wave 2): any value refuses the Ingress's routes (503) rather than serve them unauthenticated; ingress-nginx, too, refuses them when the URL cannot be read"), Some(Parser::FailClosed)),
    annotation("auth-cache-key", Support::No(WITH_AUTH_URL), None),
    annotation("auth-cache-duration", Support::No(WITH_AUTH_URL), None),
    annotation("auth-keepalive", Support::No(WITH_AUTH_URL), None),
    annotation("auth-keepalive-share-vars", Support::No(WITH_AUTH_URL), None),
    annotation("auth-keepalive-requests", Support::No(WITH_AUTH_URL), None),
    annotation("auth-keepalive-timeout", Support::No(WITH_AUTH_URL), None),
    annotation("auth-proxy-set-headers", Support::No(WITH_AUTH_URL), None),
    annotation("auth-snippet", Support::No("snippets are never executed"), None),
    annotation("enable-global-auth", Support::Accepted("\"false\" leaves the Ingress out of the ConfigMap's global-auth-url, which refuses the routes it covers (503) until external authentication is implemented (wave 2)"), Some(Parser::GlobalAuth)),
    annotation("backend-protocol", Support::Partial("HTTP, HTTPS (HTTP/1.1 over TLS), GRPC (HTTP/2 prior knowledge) and GRPCS (HTTP/2 over TLS, with the proxy-ssl-* settings); AUTO_HTTP is served as HTTP; FCGI and AJP routes answer 503"), Some(Parser::BackendProtocol)),
    annotation("canary", Support::Partial("with ingress-nginx's rules and traps: the canary belongs to the main rule's backend (every rule routing to that Service port gets it), one canary per backend (the oldest), the canary Ingress's other annotations are ignored except upstream-hash-by and service-upstream (load-balance and affinity are not implemented); the main route's backend-protocol applies to the canary Service"), Some(Parser::Canary)),
    annotation("canary-by-header", Support::Yes, Some(Parser::Canary)),
    annotation("canary-by-header-value", Support::Yes, Some(Parser::Canary)),
    annotation("canary-by-header-pattern", Support::Partial("Rust regex syntax rather than PCRE: a pattern it cannot compile (look-around, back-references) is ignored with a diagnostic, as ingress-nginx ignores an invalid one"), Some(Parser::Canary)),
    annotation("canary-by-cookie", Support::Yes, Some(Parser::Canary)),
    annotation("canary-weight", Support::Yes, Some(Parser::Canary)),
    annotation("canary-weight-total", Support::Yes, Some(Parser::Canary)),
    annotation("client-body-buffer-size", Support::Yes, Some(Parser::Body)),
    annotation("configuration-snippet", Support::Partial("never executed; with allow-snippet-annotations, header directives with literal values are translated (see below), anything else refuses the Ingress"), Some(Parser::Snippets)),
    annotation("custom-http-errors", Support::Yes, Some(Parser::CustomErrors)),
    annotation("disable-proxy-intercept-errors", Support::Yes, Some(Parser::CustomErrors)),
    annotation("custom-headers", Support::Partial("a ConfigMap namespace/name whose data are response headers set (replacing the upstream's) on every answer of the route, as ingress-nginx's more_set_headers; each name must be listed in the ConfigMap key global-allowed-response-headers (exactly as written) and names and values pass ingress-nginx's checks, otherwise the routes answer 503 as in ingress-nginx. Differences: a ConfigMap not in the Store is a diagnostic and the routes are served without the headers (ingress-nginx answers 503); in Kubernetes, Sluice watches only the ConfigMaps it is told to (--configmap, --tcp/udp-services-configmap), so the referenced ConfigMap is not read there yet"), Some(Parser::CustomHeaders)),
    annotation("default-backend", Support::Partial("a Service of the Ingress's namespace (its first port): requests go there while the route's Service has no ready endpoint, and it answers the Ingress's custom-http-errors; whether it has endpoints is checked per request, where ingress-nginx checks at its last reload"), Some(Parser::CustomErrors)),
    annotation("enable-cors", Support::Partial(CORS), Some(Parser::Cors)),
    annotation("cors-allow-origin", Support::Yes, Some(Parser::Cors)),
    annotation("cors-allow-methods", Support::Yes, Some(Parser::Cors)),
    annotation("cors-allow-headers", Support::Yes, Some(Parser::Cors)),
    annotation("cors-expose-headers", Support::Yes, Some(Parser::Cors)),
    annotation("cors-allow-credentials", Support::Yes, Some(Parser::Cors)),
    annotation("cors-max-age", Support::Yes, Some(Parser::Cors)),
    annotation("force-ssl-redirect", Support::Yes, Some(Parser::SslRedirect)),
    annotation("from-to-www-redirect", Support::Yes, Some(Parser::FromToWww)),
    annotation("http2-push-preload", Support::No("HTTP/2 server push is obsolete (browsers dropped it)"), None),
    annotation("limit-connections", Support::Partial(LIMIT_CONN), Some(Parser::Limits)),
    annotation("limit-rps", Support::Yes, Some(Parser::Limits)),
    annotation("limit-rpm", Support::Yes, Some(Parser::Limits)),
    annotation("limit-burst-multiplier", Support::Yes, Some(Parser::Limits)),
    annotation("limit-rate", Support::Partial(LIMIT_RATE), Some(Parser::Limits)),
    annotation("limit-rate-after", Support::Partial(LIMIT_RATE), Some(Parser::Limits)),
    annotation("limit-allowlist", Support::Yes, Some(Parser::Limits)),
    annotation("limit-whitelist", Support::Yes, Some(Parser::Limits)),
    annotation("global-rate-limit", Support::No(GLOBAL_RATE_LIMIT), None),
    annotation("global-rate-limit-window", Support::No(GLOBAL_RATE_LIMIT), None),
    annotation("global-rate-limit-key", Support::No(GLOBAL_RATE_LIMIT), None),
    annotation("global-rate-limit-ignored-cidrs", Support::No(GLOBAL_RATE_LIMIT), None),
    annotation("permanent-redirect", Support::Yes, Some(Parser::Redirect)),
    annotation("permanent-redirect-code", Support::Yes, Some(Parser::Redirect)),
    annotation("temporal-redirect", Support::Yes, Some(Parser::Redirect)),
    annotation("temporal-redirect-code", Support::Yes, Some(Parser::Redirect)),
    annotation("preserve-trailing-slash", Support::Yes, Some(Parser::SslRedirect)),
    annotation("proxy-body-size", Support::Yes, Some(Parser::Body)),
    annotation("proxy-cookie-domain", Support::Partial(RESPONSE_REWRITE), Some(Parser::ResponseRewrite)),
    annotation("proxy-cookie-path", Support::Partial(RESPONSE_REWRITE), Some(Parser::ResponseRewrite)),
    annotation("proxy-connect-timeout", Support::Yes, Some(Parser::Upstream)),
    annotation("proxy-send-timeout", Support::Yes, Some(Parser::Upstream)),
    annotation("proxy-read-timeout", Support::Yes, Some(Parser::Upstream)),
    annotation("proxy-next-upstream", Support::Yes, Some(Parser::Upstream)),
    annotation("proxy-next-upstream-timeout", Support::Yes, Some(Parser::Upstream)),
    annotation("proxy-next-upstream-tries", Support::Yes, Some(Parser::Upstream)),
    annotation("proxy-request-buffering", Support::Yes, Some(Parser::Body)),
    annotation("proxy-redirect-from", Support::Partial(RESPONSE_REWRITE), Some(Parser::ResponseRewrite)),
    annotation("proxy-redirect-to", Support::Partial(RESPONSE_REWRITE), Some(Parser::ResponseRewrite)),
    annotation("proxy-http-version", Support::Accepted("1.1 is what Sluice speaks; 1.0 is a diagnostic"), Some(Parser::ProxyHttpVersion)),
    annotation("proxy-ssl-secret", Support::Yes, Some(Parser::ProxySsl)),
    annotation("proxy-ssl-ciphers", Support::Partial("validated; rustls's cipher suites apply, so a list other than DEFAULT is a diagnostic"), Some(Parser::ProxySsl)),
    annotation("proxy-ssl-name", Support::Yes, Some(Parser::ProxySsl)),
    annotation("proxy-ssl-protocols", Support::Partial("TLSv1.2 and TLSv1.3; older versions are dropped with a diagnostic"), Some(Parser::ProxySsl)),
    annotation("proxy-ssl-verify", Support::Yes, Some(Parser::ProxySsl)),
    annotation("proxy-ssl-verify-depth", Support::Yes, Some(Parser::ProxySsl)),
    annotation("proxy-ssl-server-name", Support::Yes, Some(Parser::ProxySsl)),
    annotation("secure-backends", Support::No("removed from ingress-nginx (0.18); use backend-protocol: HTTPS"), None),
    annotation("enable-rewrite-log", Support::Accepted("no effect: Sluice logs rewrites at debug level"), None),
    annotation("rewrite-target", Support::Yes, Some(Parser::Rewrite)),
    annotation("satisfy", Support::No("planned with the auth annotations (wave 2); it restricts nothing itself, it only says whether authentication and the allow-list must both pass (all) or either (any), and the auth annotations refuse the Ingress until then"), None),
    annotation("server-alias", Support::Yes, Some(Parser::ServerAlias)),
    annotation("server-snippet", Support::Partial("never executed; with allow-snippet-annotations, header directives with literal values are translated for every route of the host, anything else refuses the Ingress"), Some(Parser::Snippets)),
    annotation("service-upstream", Support::Yes, Some(Parser::ServiceUpstream)),
    annotation("session-cookie-change-on-failure", Support::No("planned (wave 2)"), None),
    annotation("session-cookie-conditional-samesite-none", Support::No("planned (wave 2)"), None),
    annotation("session-cookie-domain", Support::No("planned (wave 2)"), None),
    annotation("session-cookie-expires", Support::No("planned (wave 2)"), None),
    annotation("session-cookie-max-age", Support::No("planned (wave 2)"), None),
    annotation("session-cookie-name", Support::No("planned (wave 2)"), None),
    annotation("session-cookie-path", Support::No("planned (wave 2)"), None),
    annotation("session-cookie-samesite", Support::No("planned (wave 2)"), None),
    annotation("session-cookie-secure", Support::No("planned (wave 2)"), None),
    annotation("ssl-redirect", Support::Yes, Some(Parser::SslRedirect)),
    annotation("ssl-passthrough", Support::Yes, Some(Parser::SslPassthrough)),
    annotation("stream-snippet", Support::No("snippets are never executed"), None),
    annotation("upstream-hash-by", Support::Partial("the key's consistent hash picks the endpoint (a ring of 160 points per endpoint: moving one endpoint moves about 1/N of the keys); the key may use the request's variables (client address and port, method, $request_uri, $uri, $args, $arg_*, $scheme, $host, $server_name, $http_*, $cookie_*); a retry goes to the next endpoint along the ring, where ingress-nginx asks the same endpoint again"), Some(Parser::HashBy)),
    annotation("upstream-hash-by-subset", Support::No("planned (wave 2); with upstream-hash-by the key's own endpoint is chosen, not a random one of its subset"), None),
    annotation("upstream-hash-by-subset-size", Support::No("planned (wave 2), with upstream-hash-by-subset"), None),
    annotation("x-forwarded-prefix", Support::Yes, Some(Parser::Rewrite)),
    annotation("load-balance", Support::No("planned (wave 2); the ConfigMap's load-balance applies"), None),
    annotation("upstream-vhost", Support::Yes, Some(Parser::UpstreamVhost)),
    annotation("denylist-source-range", Support::Yes, Some(Parser::Access)),
    annotation("whitelist-source-range", Support::Yes, Some(Parser::Access)),
    annotation("proxy-buffering", Support::Accepted("Sluice streams responses; on and off both accepted"), Some(Parser::ProxyBuffering)),
    annotation("proxy-buffers-number", Support::Accepted("no effect: Sluice does not buffer responses in nginx's buffers"), None),
    annotation("proxy-buffer-size", Support::Accepted("no effect: Sluice does not buffer responses in nginx's buffers"), None),
    annotation("proxy-busy-buffers-size", Support::Accepted("no effect: Sluice does not buffer responses in nginx's buffers"), None),
    annotation("proxy-max-temp-file-size", Support::Accepted("no effect: Sluice does not buffer responses to disk"), None),
    annotation("ssl-ciphers", Support::No("per-Ingress cipher lists are not supported; rustls's safe defaults apply"), None),
    annotation("ssl-prefer-server-ciphers", Support::No("per-Ingress cipher lists are not supported; rustls's safe defaults apply"), None),
    annotation("connection-proxy-header", Support::Partial("close or keep-alive (ingress-nginx's validator) as the Connection header sent to HTTP/1.1 endpoints; close also keeps the connection out of the pool. Differences: an upgrade (WebSocket) request still sends Connection: upgrade (ingress-nginx sends the annotation's value, which endpoints that check Connection refuse); HTTP/2 and gRPC endpoints get none (HTTP/2 has no Connection header)"), Some(Parser::ConnectionHeader)),
    annotation("enable-access-log", Support::Yes, Some(Parser::AccessLog)),
    annotation("enable-opentelemetry", Support::Yes, Some(Parser::OpenTelemetry)),
    annotation("opentelemetry-trust-incoming-span", Support::Yes, Some(Parser::OpenTelemetry)),
    annotation("use-regex", Support::Yes, Some(Parser::UseRegex)),
    annotation("enable-modsecurity", Support::No(NO_WAF), None),
    annotation("enable-owasp-core-rules", Support::No(NO_WAF), None),
    annotation("modsecurity-transaction-id", Support::No(NO_WAF), None),
    annotation("modsecurity-snippet", Support::FailsClosed("until Sluice has a web application firewall (not planned): the snippet is how ingress-nginx's ModSecurity is made to block (SecRuleEngine On), so it refuses the Ingress's routes (503) rather than serve them unfiltered; snippets are never executed"), Some(Parser::FailClosed)),
    annotation("mirror-target", Support::Partial("a copy of each request goes to the URL (its path may use $request_uri, $args, $arg_*, $host, $scheme, $remote_addr, $request_method, $http_*, $cookie_*, $server_name) without waiting for it: never delayed or failed by it, at most mirror-max-in-flight per worker; the host must be an IP address or a Service as <name>.<namespace>.svc[.cluster.local] (its port's endpoints; Sluice resolves no other DNS name); with proxy-request-buffering off the body is teed and the copy dropped if it falls 256 KiB behind; copies carry the client's headers as they came, not the X-Forwarded-* the main request gets"), Some(Parser::Mirror)),
    annotation("mirror-host", Support::Yes, Some(Parser::Mirror)),
    annotation("mirror-request-body", Support::Yes, Some(Parser::Mirror)),
    annotation("ssl-passthrough-proxy-protocol", Support::Sluice("v1 or v2: a PROXY protocol header naming the client (the load balancer's, with use-proxy-protocol) is written to the endpoint before the ClientHello of each ssl-passthrough connection; off by default (ingress-nginx has no such switch)"), Some(Parser::SslPassthrough)),
];
