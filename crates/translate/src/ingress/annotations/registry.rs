//! The annotation registry: every annotation ingress-nginx documents, what Sluice does with
//! it (README's table) and the parser that reads it.

use model::settings::AnnotationRisk;

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

/// Client certificates: ingress-nginx's semantics and traps, and the differences Sluice keeps.
pub(super) const AUTH_TLS: &str = "as ingress-nginx: the CAs of the Secret's ca.crt (ca.crl: every certificate of the chain checked against it, as nginx's CRL_CHECK_ALL) for the whole host, from the first (oldest) Ingress of the host that sets it, other Ingresses' paths included (a diagnostic names them); the handshake of that host alone asks for a certificate (other hosts' handshakes are unchanged; on rules without host, the handshakes that name no host, or none, as ingress-nginx's default server) and never fails over it: none with auth-tls-verify-client on gets 400 \"No required SSL certificate was sent\", one that does not verify 400 \"The SSL certificate error\" (optional_no_ca lets an unknown CA pass), a subject auth-tls-match-cn does not match 403 (\"client certificate unauthorized\", after Sluice's \"403 Forbidden: \"); upstream get ssl-client-verify (SUCCESS, NONE, FAILED:<OpenSSL's reason>), ssl-client-subject-dn and ssl-client-issuer-dn (RFC 2253, as nginx since 1.11.6), ssl-client-cert with auth-tls-pass-certificate-to-upstream (the URL-escaped PEM), the client's own values removed (the auth-url sub-request gets them too); a request on a connection whose handshake was for another name gets nginx's 421; plain HTTP is not checked (as nginx; match-cn answers 403). sluice.dev/auth-tls-scope: path applies the rules to the Ingress's own paths only. A Secret of another namespace is read only with the ConfigMap key allow-cross-namespace-resources (otherwise the routes answer 503, as in ingress-nginx). Differences: a Secret that is missing, has no ca.crt or an unusable one refuses the host's routes with 503 (ingress-nginx: its own paths 503, the rest of the host 403; without ca.crt it serves without client certificates)";
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
pub(super) const RESPONSE_REWRITE: &str = "as nginx's proxy_redirect / proxy_cookie_path / proxy_cookie_domain on the upstream's answers (not Sluice's own): literal text only (a ~ regex is refused), the redirect and cookie path by a case-sensitive prefix, the cookie domain whole and case-insensitively; proxy-redirect-from off (the default), default, or without proxy-redirect-to rewrites nothing, as ingress-nginx's template renders them; the ConfigMap keys of the same names are every route's default (off unless set)";

pub(super) const CORS: &str = "as ingress-nginx's template: an OPTIONS request that gets CORS headers is answered 204 by Sluice (never the backend), before the allow-lists (a refused client still gets its preflight answered) and redirects, after app-root; the Access-Control-* headers replace the backend's on every answer of the route, Sluice's own errors included (403, 413 for a body found too large while read, 502, 503, 504), not on a route refused by its config (503), a 413 for a declared Content-Length or a custom-http-errors page; cors-allow-origin * (the default, also when the value is refused as a whole) sends * to every request, with Allow-Credentials: true by default; a list echoes the Origin only when an entry matches its end, case-insensitively (*. is one label), and otherwise sends nothing, with no Vary: Origin. Difference: the 204 has no Content-Length (RFC 9110), its Content-Type is text/plain charset=UTF-8 as ingress-nginx writes it";

/// Session affinity: ingress-nginx's sticky balancers, and the differences Sluice keeps.
pub(super) const AFFINITY: &str = "cookie, as ingress-nginx's sticky balancers: balanced (the default) puts a random key on the backend's consistent-hash ring (endpoints added take about 1/N of the clients), persistent names the endpoint by a digest salted with the backend (a client moves only when its endpoint leaves); a cookie naming no ready endpoint gets another endpoint and a new cookie, never an error; the cookie is issued only on the Ingress's own paths, HttpOnly, Secure over HTTPS or with session-cookie-secure; a Service port's affinity is the oldest Ingress's, honoured (not issued) on other Ingresses' paths to it; it overrides upstream-hash-by. Differences: the values are Sluice's own (an ingress-nginx cookie counts as none, once); on a shared Service port the oldest Ingress's settings apply whole, where ingress-nginx takes the mode from the oldest that sets one and the cookie's attributes from the newest; a session-cookie-name with / or : is refused (ingress-nginx sends it, and browsers drop the cookie); balanced: a client whose endpoint left gets a new key, so it stays on its new endpoint when the old one comes back (ingress-nginx moves it back without a new cookie)";
/// `session-cookie-change-on-failure`.
pub(super) const CHANGE_ON_FAILURE: &str = "true: after a failed attempt (proxy-next-upstream) the client gets a cookie naming the endpoint that answered; false (the default): the cookie keeps naming its endpoint. Difference: with false the retry still goes to another endpoint, where ingress-nginx asks the cookie's endpoint again";
/// `affinity-canary-behavior`.
pub(super) const AFFINITY_CANARY: &str = "read on the canary Ingress: sticky (the default) gives the canary the main Ingress's affinity, so a client the weight sent to either side stays there (its cookie names the backend); legacy keeps the canary's own. The affinity cookie is asked first, as in ingress-nginx's balancer: a client whose cookie names the main backend stays there even with canary-by-header or canary-by-cookie asking for the canary (always), one whose cookie names the canary goes there even when they say never; only without such a cookie do the header, the cookie and the weight decide";

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
    LoadBalance,
    Canary,
    Affinity,
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
    ClientCert,
    SslCiphers,
    FailClosed,
    UserAuth,
    ExternalAuth,
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

/// ingress-nginx's rating of annotation `name` (without prefix; its `annotations-risk.md`),
/// which the ConfigMap's `annotations-risk-level` compares with. Not listed: `Low`.
pub(super) fn risk(name: &str) -> AnnotationRisk {
    const CRITICAL: &[&str] = &[
        "configuration-snippet",
        "auth-snippet",
        "modsecurity-snippet",
        "server-snippet",
        "stream-snippet",
    ];
    const HIGH: &[&str] = &[
        "server-alias",
        "auth-tls-error-page",
        "auth-tls-match-cn",
        "auth-signin",
        "auth-url",
        "mirror-host",
        "mirror-target",
        "modsecurity-transaction-id",
        "proxy-ssl-name",
        "upstream-hash-by",
    ];
    const MEDIUM: &[&str] = &[
        "allowlist-source-range",
        "whitelist-source-range",
        "denylist-source-range",
        "auth-realm",
        "auth-secret",
        "canary-by-cookie",
        "canary-by-header",
        "canary-by-header-pattern",
        "canary-by-header-value",
        "auth-tls-secret",
        "auth-tls-verify-client",
        "cors-allow-headers",
        "cors-allow-methods",
        "cors-allow-origin",
        "cors-expose-headers",
        "custom-headers",
        "auth-cache-duration",
        "auth-cache-key",
        "auth-proxy-set-headers",
        "auth-request-redirect",
        "auth-response-headers",
        "auth-signin-redirect-param",
        "fastcgi-index",
        "fastcgi-params-configmap",
        "opentelemetry-operation-name",
        "proxy-body-size",
        "proxy-cookie-domain",
        "proxy-cookie-path",
        "proxy-next-upstream",
        "proxy-redirect-from",
        "proxy-redirect-to",
        "proxy-ssl-ciphers",
        "proxy-ssl-secret",
        "permanent-redirect",
        "temporal-redirect",
        "app-root",
        "force-ssl-redirect",
        "preserve-trailing-slash",
        "rewrite-target",
        "affinity-mode",
        "session-cookie-domain",
        "session-cookie-expires",
        "session-cookie-max-age",
        "session-cookie-name",
        "session-cookie-path",
        "x-forwarded-prefix",
    ];
    if CRITICAL.contains(&name) {
        AnnotationRisk::Critical
    } else if HIGH.contains(&name) {
        AnnotationRisk::High
    } else if MEDIUM.contains(&name) {
        AnnotationRisk::Medium
    } else {
        AnnotationRisk::Low
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
    annotation("affinity", Support::Partial(AFFINITY), Some(Parser::Affinity)),
    annotation("affinity-mode", Support::Yes, Some(Parser::Affinity)),
    annotation("affinity-canary-behavior", Support::Partial(AFFINITY_CANARY), Some(Parser::Affinity)),
    annotation("allowlist-source-range", Support::Yes, Some(Parser::Access)),
    annotation("auth-realm", Support::Yes, Some(Parser::UserAuth)),
    annotation("auth-secret", Support::Yes, Some(Parser::UserAuth)),
    annotation("auth-secret-type", Support::Yes, Some(Parser::UserAuth)),
    annotation("auth-type", Support::Partial("basic: the Secret's users (auth-file: an htpasswd file in data.auth; auth-map: a user per key) with nginx's hashes (bcrypt $2y$/$2b$/$2a$, $apr1$, MD5 $1$, SHA-256 $5$ and SHA-512 $6$ crypt, {SHA}, {SSHA}, {PLAIN}, DES crypt); a missing or wrong Authorization gets 401 with WWW-Authenticate: Basic realm=\"<auth-realm>\" and nginx's text; the Authorization header is not sent upstream (as ingress-nginx's template); verified passwords are remembered for 60 s (a bcrypt check per request is what makes nginx slow), a user removed from the Secret is refused from the next request on. digest: as the nginx-http-auth-digest module ingress-nginx loads (RFC 2617, MD5, qop=auth): the Secret's users by realm (auth-file: an htdigest file of user:realm:HA1 lines in data.auth; auth-map: a user per key, its value realm:HA1); a missing or wrong answer gets 401 with WWW-Authenticate: Digest algorithm=\"MD5\", qop=\"auth\", realm=\"<auth-realm>\", nonce=\"…\"; the answer must name the request's target as sent (before rewrite-target); a nonce is good for 60 s until its first use, then for 10 s and 19 nc values, each once (an older one gets stale=\"true\", which clients answer without asking the user); a good answer gets Authentication-Info with rspauth; five failures from one client address make its answers ignored (401 without a challenge) for 300 s; the nonces and failures are shared by every worker. No auth-realm: the challenge names the empty realm (the module then authenticates nothing; Sluice never serves such a route open), with a diagnostic. A Secret that cannot be read refuses the routes, as in ingress-nginx; Differences: only exactly basic or digest are accepted (ingress-nginx's unanchored check takes any value containing either, and serves anything but basic as digest); in Kubernetes Sluice watches Secrets of type Opaque (as kubectl create secret generic makes them) and kubernetes.io/tls, so the users in a Secret of another type are not found (the routes refused, with a diagnostic)"), Some(Parser::UserAuth)),
    annotation("auth-tls-secret", Support::Partial(AUTH_TLS), Some(Parser::ClientCert)),
    annotation("auth-tls-verify-depth", Support::Partial("OpenSSL's verify depth: at most this many intermediates between the certificate and a CA of ca.crt (default 1; 0 or a bad value: 1, as in ingress-nginx); deeper: ssl-client-verify FAILED:certificate chain too long, 400"), Some(Parser::ClientCert)),
    annotation("auth-tls-verify-client", Support::Yes, Some(Parser::ClientCert)),
    annotation("auth-tls-error-page", Support::Partial("a missing or bad certificate (nginx's 495/496) gets a 302 to this value instead of the 400 when it is a URL; a path (/cert-error.html) is served by the same host's route for it, as nginx's error_page internal redirect: that route's answer and status, the request made a GET (a HEAD stays one) without its body or query, its certificate not checked again (ssl-client-verify tells the backend what failed). Difference: @name (a named location, which only a snippet makes in ingress-nginx) gets the 302"), Some(Parser::ClientCert)),
    annotation("auth-tls-pass-certificate-to-upstream", Support::Yes, Some(Parser::ClientCert)),
    annotation("auth-tls-match-cn", Support::Yes, Some(Parser::ClientCert)),
    annotation("auth-signin", Support::Yes, Some(Parser::ExternalAuth)),
    annotation("auth-signin-redirect-param", Support::Yes, Some(Parser::ExternalAuth)),
    annotation("auth-method", Support::Yes, Some(Parser::ExternalAuth)),
    annotation("auth-response-headers", Support::Partial("copied from the auth server's 2xx answer into the request sent upstream, replacing what the client sent; a header the answer lacks is removed (nginx sends an empty proxy_set_header not at all)"), Some(Parser::ExternalAuth)),
    annotation("auth-request-redirect", Support::Yes, Some(Parser::ExternalAuth)),
    annotation("auth-url", Support::Partial("as nginx's auth_request in ingress-nginx's template: before the request goes upstream, a sub-request (the client's method, or auth-method; its headers, no body; Host the URL's host; X-Original-URL, X-Original-Method, X-Sent-From, X-Real-IP, X-Forwarded-For, X-Auth-Request-Redirect, X-Request-ID; X-Forwarded-Proto removed) goes to the URL: 2xx proxies the request, 401 and 403 answer that (401 with the auth server's WWW-Authenticate, or a 302 to auth-signin), anything else or an unreachable server 500; the URL's host is an IP address, a Service as <name>.<namespace>.svc[.cluster.local] (its port's endpoints), $host / $http_host / $best_http_host or a host an Ingress has a rule for (routed by Sluice's own rules to that rule's backend, without leaving the process, where ingress-nginx goes out through DNS and the load balancer back to itself; that rule's own annotations do not apply to the sub-request); another DNS name's addresses as the control plane's resolver finds them (as for ExternalName Services: resolv.conf, at each answer's TTL; none yet or none at all answers 500, as an unreachable auth server does; never resolved per request); a URL that cannot be read refuses the routes (503); the ConfigMap's no-auth-locations apply"), Some(Parser::ExternalAuth)),
    annotation("auth-cache-key", Support::Partial("answers cached per host, Ingress path and key, for every worker of the process at once (one cache, not one per worker); simultaneous requests with one key wait for one sub-request (single-flight, which nginx's proxy_cache_lock is off for); bounded by the ConfigMap key auth-cache-max-entries (least recently used out); an answer with Set-Cookie or Cache-Control no-store, no-cache or private is not kept (nginx's proxy_cache rules); counted in sluice_auth_requests_total"), Some(Parser::ExternalAuth)),
    annotation("auth-cache-duration", Support::Yes, Some(Parser::ExternalAuth)),
    annotation("auth-keepalive", Support::Accepted("Sluice keeps connections to the auth server in its pool whatever the value"), None),
    annotation("auth-keepalive-share-vars", Support::Accepted("Sluice keeps connections to the auth server in its pool whatever the value"), None),
    annotation("auth-keepalive-requests", Support::Accepted("Sluice keeps connections to the auth server in its pool whatever the value"), None),
    annotation("auth-keepalive-timeout", Support::Accepted("Sluice keeps connections to the auth server in its pool whatever the value"), None),
    annotation("auth-proxy-set-headers", Support::Partial("a ConfigMap (of the Ingress's namespace, or another with the ConfigMap key allow-cross-namespace-resources) whose data are headers sent to the auth server; a ConfigMap not found or with an invalid name refuses the routes (503), as in ingress-nginx; in Kubernetes, Sluice watches the ConfigMaps of its scope (all namespaces, or --watch-namespace) as ingress-nginx does, so an edit applies without a restart"), Some(Parser::ExternalAuth)),
    annotation("auth-always-set-cookie", Support::Yes, Some(Parser::ExternalAuth)),
    annotation("auth-snippet", Support::Partial("never executed. Rated Critical by ingress-nginx: below annotations-risk-level Critical (the default is High) the Ingress is refused (503), as ingress-nginx >= 1.12 does not serve it; with Critical and allow-snippet-annotations off dropped with an error diagnostic and the Ingress served, as ingress-nginx does; with it on, it refuses the Ingress's routes (503), as an untranslatable configuration-snippet does"), Some(Parser::Snippets)),
    annotation("enable-global-auth", Support::Yes, Some(Parser::GlobalAuth)),
    annotation("backend-protocol", Support::Partial("HTTP, HTTPS (HTTP/1.1 over TLS), GRPC (HTTP/2 prior knowledge) and GRPCS (HTTP/2 over TLS, with the proxy-ssl-* settings); AUTO_HTTP is served as HTTP; FCGI and AJP routes answer 503"), Some(Parser::BackendProtocol)),
    annotation("canary", Support::Partial("with ingress-nginx's rules and traps: the canary belongs to the main rule's backend (every rule routing to that Service port gets it), one canary per backend (the oldest), the canary Ingress's other annotations are ignored except upstream-hash-by, service-upstream and the affinity annotations (load-balance is not implemented); the main route's backend-protocol applies to the canary Service"), Some(Parser::Canary)),
    annotation("canary-by-header", Support::Yes, Some(Parser::Canary)),
    annotation("canary-by-header-value", Support::Yes, Some(Parser::Canary)),
    annotation("canary-by-header-pattern", Support::Partial("Rust regex syntax rather than PCRE: a pattern it cannot compile (look-around, back-references) is ignored with a diagnostic, as ingress-nginx ignores an invalid one"), Some(Parser::Canary)),
    annotation("canary-by-cookie", Support::Yes, Some(Parser::Canary)),
    annotation("canary-weight", Support::Yes, Some(Parser::Canary)),
    annotation("canary-weight-total", Support::Yes, Some(Parser::Canary)),
    annotation("client-body-buffer-size", Support::Yes, Some(Parser::Body)),
    annotation("configuration-snippet", Support::Partial("never executed. Rated Critical by ingress-nginx: below annotations-risk-level Critical (the default is High) the Ingress is refused (503), as ingress-nginx >= 1.12 does not serve it; with Critical and allow-snippet-annotations, header directives are translated, their values with the request's nginx variables (see below), anything else refuses the Ingress"), Some(Parser::Snippets)),
    annotation("custom-http-errors", Support::Yes, Some(Parser::CustomErrors)),
    annotation("disable-proxy-intercept-errors", Support::Yes, Some(Parser::CustomErrors)),
    annotation("custom-headers", Support::Partial("a ConfigMap namespace/name whose data are response headers set (replacing the upstream's) on every answer of the route, as ingress-nginx's more_set_headers; each name must be listed in the ConfigMap key global-allowed-response-headers (exactly as written) and names and values pass ingress-nginx's checks, otherwise the routes answer 503 as in ingress-nginx; a ConfigMap not found also answers 503, as in ingress-nginx (in Kubernetes, Sluice watches every ConfigMap of its scope, all namespaces or --watch-namespace, as ingress-nginx does: one outside it is not found); an edit applies without a restart"), Some(Parser::CustomHeaders)),
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
    annotation("satisfy", Support::Yes, Some(Parser::UserAuth)),
    annotation("server-alias", Support::Yes, Some(Parser::ServerAlias)),
    annotation("server-snippet", Support::Partial("never executed. Rated Critical by ingress-nginx: below annotations-risk-level Critical (the default is High) the Ingress is refused (503), as ingress-nginx >= 1.12 does not serve it; with Critical and allow-snippet-annotations, header directives are translated (values with the request's nginx variables) for every route of the host, anything else refuses the Ingress"), Some(Parser::Snippets)),
    annotation("service-upstream", Support::Yes, Some(Parser::ServiceUpstream)),
    annotation("session-cookie-change-on-failure", Support::Partial(CHANGE_ON_FAILURE), Some(Parser::Affinity)),
    annotation("session-cookie-conditional-samesite-none", Support::Yes, Some(Parser::Affinity)),
    annotation("session-cookie-domain", Support::Yes, Some(Parser::Affinity)),
    annotation("session-cookie-expires", Support::Yes, Some(Parser::Affinity)),
    annotation("session-cookie-max-age", Support::Yes, Some(Parser::Affinity)),
    annotation("session-cookie-name", Support::Yes, Some(Parser::Affinity)),
    annotation("session-cookie-path", Support::Yes, Some(Parser::Affinity)),
    annotation("session-cookie-samesite", Support::Yes, Some(Parser::Affinity)),
    annotation("session-cookie-secure", Support::Yes, Some(Parser::Affinity)),
    annotation("ssl-redirect", Support::Yes, Some(Parser::SslRedirect)),
    annotation("ssl-passthrough", Support::Yes, Some(Parser::SslPassthrough)),
    annotation("stream-snippet", Support::No("snippets are never executed"), None),
    annotation("upstream-hash-by", Support::Partial("the key's consistent hash picks the endpoint (a ring of 160 points per endpoint: moving one endpoint moves about 1/N of the keys); the key may use the request's variables (client address and port, method, $request_uri, $uri, $args, $arg_*, $scheme, $host, $server_name, $http_*, $cookie_*); a retry goes to the next endpoint along the ring, where ingress-nginx asks the same endpoint again"), Some(Parser::HashBy)),
    annotation("upstream-hash-by-subset", Support::Partial("with upstream-hash-by: a request goes to a random one of its key's subset of upstream-hash-by-subset-size endpoints, so one hot key is spread over them; the subset is the key's first endpoints along the ring (subsets of nearby keys overlap, and an endpoint that comes or goes moves only the keys next to it), where ingress-nginx cuts the endpoint list into consecutive subsets of that size (the last filled from the front) and hashes the key onto one, so one endpoint more or less can move every key's subset; a retry goes to another of the subset, then along the ring"), Some(Parser::HashBy)),
    annotation("upstream-hash-by-subset-size", Support::Yes, Some(Parser::HashBy)),
    annotation("x-forwarded-prefix", Support::Yes, Some(Parser::Rewrite)),
    annotation("load-balance", Support::Partial("round_robin or ewma (ingress-nginx's: two endpoints drawn at random, the one with the lower response-time average, decaying over 10 s, wins; a new endpoint starts at the average of the others), and Sluice's least_request; the averages are each worker's own (ingress-nginx shares them between its workers); chash, chashsubset, sticky_balanced and sticky_persistent are what upstream-hash-by and affinity set, not values to write: a diagnostic, the ConfigMap's load-balance applies"), Some(Parser::LoadBalance)),
    annotation("upstream-vhost", Support::Yes, Some(Parser::UpstreamVhost)),
    annotation("denylist-source-range", Support::Yes, Some(Parser::Access)),
    annotation("whitelist-source-range", Support::Yes, Some(Parser::Access)),
    annotation("proxy-buffering", Support::Accepted("Sluice streams responses; on and off both accepted"), Some(Parser::ProxyBuffering)),
    annotation("proxy-buffers-number", Support::Accepted("no effect: Sluice does not buffer responses in nginx's buffers"), None),
    annotation("proxy-buffer-size", Support::Accepted("no effect: Sluice does not buffer responses in nginx's buffers"), None),
    annotation("proxy-busy-buffers-size", Support::Accepted("no effect: Sluice does not buffer responses in nginx's buffers"), None),
    annotation("proxy-max-temp-file-size", Support::Accepted("no effect: Sluice does not buffer responses to disk"), None),
    annotation("ssl-ciphers", Support::Partial("an OpenSSL cipher list (names, aliases such as HIGH, ECDHE or AESGCM, the ! - + prefixes, A+B, @STRENGTH) for the host's TLS 1.2 handshakes, as the ConfigMap's ssl-ciphers: the suites rustls speaks (ECDHE with AES-GCM or ChaCha20-Poly1305) in the list's order; a named cipher rustls lacks is dropped with a diagnostic unless a suite of the same authentication and cipher serves its clients (DHE-RSA-AES128-GCM-SHA256 next to ECDHE-RSA-AES128-GCM-SHA256); TLS 1.3's suites are not set by it, as in nginx. The host's oldest Ingress that sets it decides for the whole host (ingress-nginx's server block; a newer one's is ignored with a diagnostic); rules without host: the handshakes that name no host, or none. A list leaving no suite rustls speaks is ignored with a diagnostic (the ConfigMap's apply)"), Some(Parser::SslCiphers)),
    annotation("ssl-prefer-server-ciphers", Support::Partial("true: the host's cipher order decides (rustls's ignore_client_order), false: the client's, for TLS 1.2 and 1.3 alike; the host's oldest Ingress that sets it decides; unset: the ConfigMap's (on with a cipher list, as ingress-nginx's template)"), Some(Parser::SslCiphers)),
    annotation("connection-proxy-header", Support::Partial("close or keep-alive (ingress-nginx's validator) as the Connection header sent to HTTP/1.1 endpoints; close also keeps the connection out of the pool. Differences: an upgrade (WebSocket) request still sends Connection: upgrade (ingress-nginx sends the annotation's value, which endpoints that check Connection refuse); HTTP/2 and gRPC endpoints get none (HTTP/2 has no Connection header)"), Some(Parser::ConnectionHeader)),
    annotation("enable-access-log", Support::Yes, Some(Parser::AccessLog)),
    annotation("enable-opentelemetry", Support::Yes, Some(Parser::OpenTelemetry)),
    annotation("opentelemetry-trust-incoming-span", Support::Yes, Some(Parser::OpenTelemetry)),
    annotation("use-regex", Support::Yes, Some(Parser::UseRegex)),
    annotation("enable-modsecurity", Support::No(NO_WAF), None),
    annotation("enable-owasp-core-rules", Support::No(NO_WAF), None),
    annotation("modsecurity-transaction-id", Support::No(NO_WAF), None),
    annotation("modsecurity-snippet", Support::FailsClosed("until Sluice has a web application firewall (not planned): the snippet is how ingress-nginx's ModSecurity is made to block (SecRuleEngine On), so it refuses the Ingress's routes (503) rather than serve them unfiltered; snippets are never executed"), Some(Parser::FailClosed)),
    annotation("mirror-target", Support::Partial("a copy of each request goes to the URL (its path may use $request_uri, $args, $arg_*, $host, $scheme, $remote_addr, $request_method, $http_*, $cookie_*, $server_name) without waiting for it: never delayed or failed by it, at most mirror-max-in-flight per worker; the host is an IP address, a Service as <name>.<namespace>.svc[.cluster.local] (its port's endpoints), or another DNS name (its addresses as the control plane's resolver finds them, as for ExternalName Services; never resolved per request); with proxy-request-buffering off the body is teed and the copy dropped if it falls 256 KiB behind; copies carry the client's headers as they came, not the X-Forwarded-* the main request gets"), Some(Parser::Mirror)),
    annotation("mirror-host", Support::Yes, Some(Parser::Mirror)),
    annotation("mirror-request-body", Support::Yes, Some(Parser::Mirror)),
    annotation("auth-tls-scope", Support::Sluice("host (the default) or path: with path, the Ingress's auth-tls-* rules apply to its own paths only (ingress-nginx issues 3964, 6013, 7133): the host's handshake asks for a certificate (optional), only this Ingress's paths require and check it, the host's other paths stay public; over plain HTTP such a path with auth-tls-verify-client on answers 400 (no way around it)"), Some(Parser::ClientCert)),
    annotation("ssl-passthrough-proxy-protocol", Support::Sluice("v1 or v2: a PROXY protocol header naming the client (the load balancer's, with use-proxy-protocol) is written to the endpoint before the ClientHello of each ssl-passthrough connection; off by default (ingress-nginx has no such switch)"), Some(Parser::SslPassthrough)),
];
