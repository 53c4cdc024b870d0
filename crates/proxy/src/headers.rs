//! Header rewriting between client and upstream: hop-by-hop headers out, `X-Forwarded-*`,
//! `X-Real-IP` and `X-Request-ID` in, and the request turned into an HTTP/1.1 origin-form one.
//!
//! Everything is done in place on the request's own `HeaderMap`: the common request costs
//! a few hash lookups and three small header values, never a copy of the map.

use http::header::{self, HeaderName, HeaderValue};
use http::request::Parts;
use http::{HeaderMap, Method, Uri, Version};

static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
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
}

/// Rewrites a client request into the one sent upstream.
pub(crate) fn prepare_request(parts: &mut Parts, forwarded: &Forwarded<'_>, upgrade: bool) {
    strip_hop_by_hop(&mut parts.headers, upgrade);
    // Expectations are between the client and us; hyper answers `100-continue` itself.
    parts.headers.remove(header::EXPECT);
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
    set_forwarded(&mut parts.headers, forwarded);
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
pub(crate) fn request_id() -> HeaderValue {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut n = fastrand::u128(..);
    let mut digits = [0u8; 32];
    for digit in digits.iter_mut().rev() {
        *digit = HEX[(n & 0xf) as usize];
        n >>= 4;
    }
    HeaderValue::from_bytes(&digits).expect("hex digits are a valid header value")
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
    if !keep_upgrade {
        headers.remove(header::CONNECTION);
        headers.remove(header::UPGRADE);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
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

fn set_forwarded(headers: &mut HeaderMap, f: &Forwarded<'_>) {
    let keep =
        |headers: &HeaderMap, name: &HeaderName| f.trust_incoming && headers.contains_key(name);

    if keep(headers, &X_FORWARDED_FOR) {
        let mut chain = Vec::new();
        for value in headers.get_all(&X_FORWARDED_FOR) {
            chain.extend_from_slice(value.as_bytes());
            chain.extend_from_slice(b", ");
        }
        chain.extend_from_slice(f.client_ip.as_bytes());
        match HeaderValue::from_bytes(&chain) {
            Ok(value) => headers.insert(X_FORWARDED_FOR.clone(), value),
            Err(_) => headers.insert(X_FORWARDED_FOR.clone(), f.client_ip.clone()),
        };
    } else {
        headers.insert(X_FORWARDED_FOR.clone(), f.client_ip.clone());
    }
    if !keep(headers, &X_FORWARDED_PROTO) {
        let proto = if f.https { "https" } else { "http" };
        headers.insert(X_FORWARDED_PROTO.clone(), HeaderValue::from_static(proto));
    }
    if !keep(headers, &X_FORWARDED_HOST) {
        if let Some(host) = headers.get(header::HOST).cloned() {
            headers.insert(X_FORWARDED_HOST.clone(), host);
        }
    }
    if !keep(headers, &X_FORWARDED_PORT) {
        headers.insert(X_FORWARDED_PORT.clone(), f.port.clone());
    }
    if !keep(headers, &X_REAL_IP) {
        headers.insert(X_REAL_IP.clone(), f.client_ip.clone());
    }
    if !headers.contains_key(&X_REQUEST_ID) {
        headers.insert(X_REQUEST_ID.clone(), request_id());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;

    fn parts(build: http::request::Builder) -> Parts {
        build.body(()).unwrap().into_parts().0
    }

    fn forwarded<'a>(ip: &'a HeaderValue, port: &'a HeaderValue, trust: bool) -> Forwarded<'a> {
        Forwarded {
            client_ip: ip,
            port,
            https: true,
            trust_incoming: trust,
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
        prepare_request(&mut p, &forwarded(&ip, &port, false), false);
        assert_eq!(p.headers["x-forwarded-for"], "192.0.2.1");
        assert_eq!(p.headers["x-forwarded-proto"], "https");
        assert_eq!(p.headers["x-forwarded-host"], "shop.example.com");
        assert_eq!(p.headers["x-forwarded-port"], "443");
        assert_eq!(p.headers["x-real-ip"], "192.0.2.1");
        assert_eq!(p.headers["x-request-id"], "abc");

        let mut p = parts(build());
        prepare_request(&mut p, &forwarded(&ip, &port, true), false);
        assert_eq!(p.headers["x-forwarded-for"], "203.0.113.9, 192.0.2.1");
        assert_eq!(p.headers["x-forwarded-proto"], "http");
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
        assert_eq!(id.len(), 32);
        assert!(id.as_bytes().iter().all(u8::is_ascii_hexdigit));
        assert_ne!(id, request_id());
    }
}
