//! Header rewriting between client and upstream: hop-by-hop headers out, `X-Forwarded-*`,
//! `X-Real-IP` and `X-Request-ID` in, and the request turned into an HTTP/1.1 origin-form one.
//!
//! ```text
//!  request headers ─▶ one pass over the names: anything hop-by-hop, Expect, X-Forwarded-*?
//!     ├─ none (the common request) ─▶ the map is left alone
//!     └─ some ─▶ removed (or kept: use-forwarded-headers) in place
//!  Added: the headers the proxy sets, written after the request's own by the upstream client
//! ```
//!
//! The common request costs one pass over its header names and no change to the map: the
//! added headers are never inserted (a hash and a probe each, and an allocation for the
//! request ID), they are written straight into the serialized head.

use http::header::{self, HeaderName, HeaderValue};
use http::request::Parts;
use http::{HeaderMap, Method, Uri, Version};

static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
pub(crate) static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
static X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
static X_FORWARDED_PORT: HeaderName = HeaderName::from_static("x-forwarded-port");
static X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");
static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Connection-specific headers (RFC 9110 §7.6.1), never forwarded as they are. `Connection`
/// and `Upgrade` are handled separately because a WebSocket upgrade keeps them.
const HOP_BY_HOP: [&str; 7] = [
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "proxy-authenticate",
    "proxy-authorization",
];

/// What the proxy knows about the client connection, precomputed once per connection.
pub(crate) struct Forwarded<'a> {
    pub(crate) client_ip: &'a HeaderValue,
    /// The port of the listener the client reached.
    pub(crate) port: &'a HeaderValue,
    pub(crate) https: bool,
    /// `use-forwarded-headers`: keep the client's `X-Forwarded-*` (we are behind another proxy).
    pub(crate) trust_incoming: bool,
    /// `enable-underscores-in-headers`: forward header names with `_` (nginx drops them by
    /// default: CGI, WSGI and PHP read `X_Forwarded_For` as `X-Forwarded-For`, so a client
    /// could forge what the proxy set).
    pub(crate) underscores: bool,
}

/// The headers the proxy adds to a request, written after the request's own (see the module
/// doc). `None` or `false`: the request keeps its own.
pub(crate) struct Added<'a> {
    client_ip: &'a HeaderValue,
    /// `X-Forwarded-For: <client ip>`.
    forwarded_for: bool,
    proto: Option<&'static str>,
    /// `X-Forwarded-Host`: the request's `Host`.
    host: bool,
    port: Option<&'a HeaderValue>,
    /// `X-Real-IP: <client ip>`.
    real_ip: bool,
    request_id: Option<[u8; 32]>,
    /// `upstream-vhost`: the `Host` sent instead of the client's (which `X-Forwarded-Host`
    /// keeps).
    upstream_host: Option<&'a HeaderValue>,
}

/// Which headers of interest a request has, from one pass over its names.
#[derive(Clone, Copy)]
struct Present(u16);

impl Present {
    const HOP_BY_HOP: u16 = 1;
    const EXPECT: u16 = 1 << 1;
    const FORWARDED_FOR: u16 = 1 << 2;
    const FORWARDED_PROTO: u16 = 1 << 3;
    const FORWARDED_HOST: u16 = 1 << 4;
    const FORWARDED_PORT: u16 = 1 << 5;
    const REAL_IP: u16 = 1 << 6;
    const REQUEST_ID: u16 = 1 << 7;
    const UNDERSCORE: u16 = 1 << 8;

    /// `underscores`: names with `_` are allowed (not flagged).
    fn scan(headers: &HeaderMap, underscores: bool) -> Present {
        let mut present = 0;
        for name in headers.keys() {
            if !underscores && name.as_str().as_bytes().contains(&b'_') {
                present |= Present::UNDERSCORE;
            }
            present |= if is_hop_by_hop(name) {
                Present::HOP_BY_HOP
            } else {
                match name.as_str() {
                    "expect" => Present::EXPECT,
                    "x-forwarded-for" => Present::FORWARDED_FOR,
                    "x-forwarded-proto" => Present::FORWARDED_PROTO,
                    "x-forwarded-host" => Present::FORWARDED_HOST,
                    "x-forwarded-port" => Present::FORWARDED_PORT,
                    "x-real-ip" => Present::REAL_IP,
                    "x-request-id" => Present::REQUEST_ID,
                    _ => 0,
                }
            };
        }
        Present(present)
    }

    fn has(self, flag: u16) -> bool {
        self.0 & flag != 0
    }
}

/// Rewrites a client request into the one sent upstream; returns the headers to add to it.
pub(crate) fn prepare_request<'a>(
    parts: &mut Parts,
    forwarded: &Forwarded<'a>,
    upgrade: bool,
) -> Added<'a> {
    let mut present = Present::scan(&parts.headers, forwarded.underscores);
    if present.has(Present::UNDERSCORE) {
        drop_underscored(&mut parts.headers);
    }
    if present.has(Present::HOP_BY_HOP) {
        strip_hop_by_hop(&mut parts.headers, upgrade);
        // `Connection` may have named any of the others.
        present = Present::scan(&parts.headers, true);
    }
    if present.has(Present::EXPECT) {
        // Expectations are between the client and us; hyper answers `100-continue` itself.
        parts.headers.remove(header::EXPECT);
    }
    if parts.uri.authority().is_some() {
        // HTTP/2 `:authority` or an HTTP/1.1 absolute-form target: it is the host (RFC 9112
        // §3.2.2), and an HTTP/1.1 upstream learns it from `Host`.
        let authority = parts.uri.authority().expect("checked above");
        let host = match authority.port() {
            Some(port) if authority.as_str().contains('@') => {
                HeaderValue::from_str(&format!("{}:{port}", authority.host()))
            }
            None if authority.as_str().contains('@') => HeaderValue::from_str(authority.host()),
            _ => HeaderValue::from_str(authority.as_str()),
        };
        if let Ok(host) = host {
            parts.headers.insert(header::HOST, host);
        }
        let origin = parts
            .uri
            .path_and_query()
            .cloned()
            .map_or_else(|| Uri::from_static("/"), Uri::from);
        parts.uri = origin;
    }
    if parts.version == Version::HTTP_2 {
        join_cookies(&mut parts.headers);
    }
    parts.version = Version::HTTP_11;
    // Whatever hyper's server attached (upgrade handles, protocol) means nothing upstream.
    parts.extensions.clear();
    if upgrade {
        parts
            .headers
            .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    }
    set_forwarded(&mut parts.headers, forwarded, present)
}

impl<'a> Added<'a> {
    /// Appends the header lines to a serialized head; `host` is the request's `Host`.
    /// `upstream-vhost`.
    pub(crate) fn set_upstream_host(&mut self, host: &'a HeaderValue) {
        self.upstream_host = Some(host);
    }

    /// The `Host` value to send in place of `client_host`.
    pub(crate) fn upstream_host<'v>(&self, client_host: &'v HeaderValue) -> &'v HeaderValue
    where
        'a: 'v,
    {
        self.upstream_host.unwrap_or(client_host)
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>, host: Option<&HeaderValue>) {
        let mut line = |name: &HeaderName, value: &[u8]| {
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        };
        if self.forwarded_for {
            line(&X_FORWARDED_FOR, self.client_ip.as_bytes());
        }
        if let Some(proto) = self.proto {
            line(&X_FORWARDED_PROTO, proto.as_bytes());
        }
        if let (true, Some(host)) = (self.host, host) {
            line(&X_FORWARDED_HOST, host.as_bytes());
        }
        if let Some(port) = self.port {
            line(&X_FORWARDED_PORT, port.as_bytes());
        }
        if self.real_ip {
            line(&X_REAL_IP, self.client_ip.as_bytes());
        }
        if let Some(id) = &self.request_id {
            line(&X_REQUEST_ID, id);
        }
    }
}

/// Removes connection-specific headers from a response, unless it is a `101` whose
/// `Upgrade`/`Connection` the client needs.
pub(crate) fn prepare_response(headers: &mut HeaderMap, switching_protocols: bool) {
    strip_hop_by_hop(headers, switching_protocols);
}

/// Whether `Connection` lists `token` (case-insensitive), e.g. `close` or `upgrade`.
pub(crate) fn connection_has(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// `Connection: upgrade` with `Upgrade: websocket`.
pub(crate) fn is_websocket_upgrade(headers: &HeaderMap) -> bool {
    connection_has(headers, "upgrade")
        && headers
            .get(header::UPGRADE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("websocket"))
}

/// Methods whose repetition has the same effect as one request (RFC 9110 §9.2.2); only
/// these are retried after their bytes may have reached an upstream.
pub(crate) fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::PUT | Method::DELETE | Method::TRACE
    )
}

/// 32 random hex digits.
pub(crate) fn request_id() -> [u8; 32] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut n = fastrand::u128(..);
    let mut digits = [0u8; 32];
    for digit in digits.iter_mut().rev() {
        *digit = HEX[(n & 0xf) as usize];
        n >>= 4;
    }
    digits
}

/// Whether a header is about the connection it came on (RFC 9110 §7.6.1): the fixed list,
/// `Connection` and `Upgrade`. Headers that `Connection` names are hop-by-hop too.
pub(crate) fn is_hop_by_hop(name: &HeaderName) -> bool {
    match name.as_str().len() {
        2 => name == header::TE,
        7 => name == header::TRAILER || name == header::UPGRADE,
        10 => name == header::CONNECTION || name.as_str() == "keep-alive",
        16 => name.as_str() == "proxy-connection",
        17 => name == header::TRANSFER_ENCODING,
        18 => name == header::PROXY_AUTHENTICATE,
        19 => name == header::PROXY_AUTHORIZATION,
        _ => false,
    }
}

/// Removes the headers a `Connection` value names, other than the usual tokens.
pub(crate) fn remove_named_by_connection(headers: &mut HeaderMap, connection: &[u8]) {
    let Ok(connection) = std::str::from_utf8(connection) else {
        return;
    };
    for token in connection.split(',').map(str::trim) {
        if token.is_empty() || is_standard_token(token) {
            continue;
        }
        if let Ok(name) = HeaderName::from_bytes(token.as_bytes()) {
            headers.remove(name);
        }
    }
}

/// Removes every header whose name has an underscore (rare: the allocation is fine).
fn drop_underscored(headers: &mut HeaderMap) {
    let names: Vec<HeaderName> = headers
        .keys()
        .filter(|name| name.as_str().contains('_'))
        .cloned()
        .collect();
    for name in names {
        headers.remove(name);
    }
}

fn strip_hop_by_hop(headers: &mut HeaderMap, keep_upgrade: bool) {
    // Headers named by `Connection` are hop-by-hop too. Collecting their names allocates, so
    // only do it when a token other than the usual ones is present.
    let named_others = connection_tokens(headers).any(|t| !is_standard_token(t));
    if named_others {
        let names: Vec<HeaderName> = connection_tokens(headers)
            .filter(|t| !is_standard_token(t))
            .filter_map(|t| HeaderName::from_bytes(t.as_bytes()).ok())
            .collect();
        for name in names {
            if !(keep_upgrade && name == header::UPGRADE) {
                headers.remove(name);
            }
        }
    }
    // Only what is there is removed: each removal costs a hash and a probe.
    let mut present = 0u16;
    for name in headers.keys().filter(|name| is_hop_by_hop(name)) {
        if let Some(i) = HOP_BY_HOP.iter().position(|h| name.as_str() == *h) {
            present |= 1 << i;
        } else if !keep_upgrade {
            present |= if name == header::CONNECTION {
                1 << HOP_BY_HOP.len()
            } else {
                1 << (HOP_BY_HOP.len() + 1)
            };
        }
    }
    for (i, name) in HOP_BY_HOP.iter().enumerate() {
        if present & (1 << i) != 0 {
            headers.remove(*name);
        }
    }
    if present & (1 << HOP_BY_HOP.len()) != 0 {
        headers.remove(header::CONNECTION);
    }
    if present & (1 << (HOP_BY_HOP.len() + 1)) != 0 {
        headers.remove(header::UPGRADE);
    }
}

fn connection_tokens(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

fn is_standard_token(token: &str) -> bool {
    ["close", "keep-alive", "upgrade"]
        .iter()
        .any(|s| token.eq_ignore_ascii_case(s))
}

/// HTTP/2 lets clients split `Cookie` into one field per pair; HTTP/1.1 wants one field
/// (RFC 9113 §8.2.3).
fn join_cookies(headers: &mut HeaderMap) {
    let mut cookies = headers.get_all(header::COOKIE).iter();
    if cookies.next().is_none() || cookies.next().is_none() {
        return;
    }
    let mut joined = Vec::new();
    for value in headers.get_all(header::COOKIE) {
        if !joined.is_empty() {
            joined.extend_from_slice(b"; ");
        }
        joined.extend_from_slice(value.as_bytes());
    }
    if let Ok(value) = HeaderValue::from_bytes(&joined) {
        headers.insert(header::COOKIE, value);
    }
}

/// Decides the `X-Forwarded-*`, `X-Real-IP` and `X-Request-ID` a request goes out with:
/// the client's own are dropped, unless trusted (`use-forwarded-headers`), where they are
/// kept and `X-Forwarded-For` is extended. A client's `X-Request-ID` is always kept.
fn set_forwarded<'a>(headers: &mut HeaderMap, f: &Forwarded<'a>, present: Present) -> Added<'a> {
    let mut added = Added {
        client_ip: f.client_ip,
        forwarded_for: true,
        proto: Some(if f.https { "https" } else { "http" }),
        host: true,
        port: Some(f.port),
        real_ip: true,
        request_id: (!present.has(Present::REQUEST_ID)).then(request_id),
        upstream_host: None,
    };
    if present.has(Present::FORWARDED_FOR) {
        if f.trust_incoming {
            let mut chain = Vec::new();
            for value in headers.get_all(&X_FORWARDED_FOR) {
                chain.extend_from_slice(value.as_bytes());
                chain.extend_from_slice(b", ");
            }
            chain.extend_from_slice(f.client_ip.as_bytes());
            if let Ok(value) = HeaderValue::from_bytes(&chain) {
                headers.insert(X_FORWARDED_FOR.clone(), value);
                added.forwarded_for = false;
            } else {
                headers.remove(&X_FORWARDED_FOR);
            }
        } else {
            headers.remove(&X_FORWARDED_FOR);
        }
    }
    // Whether the proxy sets this one: not when the client's is present and trusted.
    let mut ours = |flag: u16, name: &HeaderName| {
        if !present.has(flag) {
            return true;
        }
        if !f.trust_incoming {
            headers.remove(name);
        }
        !f.trust_incoming
    };
    if !ours(Present::FORWARDED_PROTO, &X_FORWARDED_PROTO) {
        added.proto = None;
    }
    added.host = ours(Present::FORWARDED_HOST, &X_FORWARDED_HOST);
    if !ours(Present::FORWARDED_PORT, &X_FORWARDED_PORT) {
        added.port = None;
    }
    added.real_ip = ours(Present::REAL_IP, &X_REAL_IP);
    added
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;

    fn parts(build: http::request::Builder) -> Parts {
        build.body(()).unwrap().into_parts().0
    }

    /// The headers as the upstream sees them: the map, then the added ones.
    fn sent(p: &Parts, added: &Added<'_>) -> HeaderMap {
        let mut out = Vec::new();
        added.write(&mut out, p.headers.get(header::HOST));
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
            client_ip: ip,
            port,
            https: true,
            trust_incoming: trust,
            underscores: false,
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

        let mut p = parts(build());
        let added = prepare_request(&mut p, &forwarded(&ip, &port, true), false);
        let headers = sent(&p, &added);
        assert_eq!(headers["x-forwarded-for"], "203.0.113.9, 192.0.2.1");
        assert_eq!(headers["x-forwarded-proto"], "http");
        assert_eq!(headers["x-forwarded-host"], "shop.example.com");
        for name in ["x-forwarded-for", "x-forwarded-proto"] {
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
        assert_eq!(headers.len(), 7, "{headers:?}");
        assert_eq!(headers["x-request-id"].len(), 32);
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
}
