//! External authentication (ingress-nginx's `auth-url` family and the ConfigMap's
//! `global-auth-*`), as nginx's `auth_request` runs it: before a request goes upstream, a
//! sub-request asks an auth server whether it may. Pure data and parsing: the proxy sends the
//! sub-request and keeps the cache (`proxy/src/auth.rs`).
//!
//! ```text
//!  auth-url "http://oauth2-proxy.auth.svc:4180/oauth2/auth" ─auth_url()─▶ MirrorTarget (host,
//!      port) + AuthUri (the path and query sent, fixed or expanded per request)
//!  translate: host ─▶ an IP address │ <svc>.<ns>.svc ─▶ backend (as mirror-target's) │
//!      $host or a host Sluice serves ─▶ routed by Sluice's own rules
//!  auth-signin "https://$host/oauth2/start" ─Signin::parse─▶ parts expanded per request,
//!      `?rd=<scheme>://<host><escaped request URI>` appended unless the URL names it
//!  auth-cache-key + auth-cache-duration ─▶ AuthCache { key, validity }
//!  proxy: 2xx ─▶ upstream (auth-response-headers copied) │ 401 ─▶ 401 or 302 to sign-in │
//!         403 ─▶ 403 │ anything else, unreachable ─▶ 500
//! ```

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, HeaderValue, Method};
use serde::{Serialize, Serializer};

use crate::access_log::{parse_request_key, Segment, Variable};
use crate::endpoints::Backend;
use crate::header_text::value_text;
use crate::mirror::{MirrorTarget, MirrorUri};
use crate::upstream_tls::UpstreamTls;

/// ingress-nginx's `auth-cache-duration` when none is given.
pub const DEFAULT_CACHE_DURATION: &str = "200 202 401 5m";

/// The statuses nginx's `add_header Set-Cookie $auth_cookie` (without `always`) adds to.
pub const SET_COOKIE_STATUSES: [u16; 10] = [200, 201, 204, 206, 301, 302, 303, 304, 307, 308];

/// One route's external authentication.
#[derive(Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ExternalAuth {
    /// `auth-url` (or `global-auth-url`) as written.
    pub url: String,
    /// From the ConfigMap's `global-auth-url` rather than the Ingress's `auth-url`.
    pub global: bool,
    /// The `Host` the sub-request carries: the URL's host without its port.
    #[serde(serialize_with = "value_text")]
    pub host: HeaderValue,
    /// The sub-request's target.
    pub uri: AuthUri,
    /// `auth-method`: `None` sends the client's method.
    #[serde(serialize_with = "optional_method")]
    pub method: Option<Method>,
    /// Where the sub-request goes.
    pub destination: AuthDestination,
    /// `auth-signin`: a 401 from the auth server becomes a 302 there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signin: Option<Signin>,
    /// `auth-request-redirect`: the `X-Auth-Request-Redirect` sent; `None` sends the client's
    /// request URI.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::header_text::optional_value_text"
    )]
    pub request_redirect: Option<HeaderValue>,
    /// `auth-response-headers`: copied from the auth server's answer into the request sent
    /// upstream (removed when the answer lacks one, so a client cannot forge them).
    #[serde(serialize_with = "header_names")]
    pub response_headers: Box<[HeaderName]>,
    /// `auth-proxy-set-headers`: the ConfigMap's entries, sent to the auth server.
    #[serde(serialize_with = "header_pairs")]
    pub proxy_set_headers: Box<[(HeaderName, HeaderValue)]>,
    /// `auth-always-set-cookie`: the auth server's `Set-Cookie` goes on every answer, not only
    /// on `SET_COOKIE_STATUSES`.
    pub always_set_cookie: bool,
    /// `auth-cache-key` (+ `auth-cache-duration`): answers are kept per key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<AuthCache>,
    /// Gateway API's `ExternalAuth` (GEP-1494) rather than ingress-nginx's `auth-url`: what is
    /// sent and what an answer does differ (see [`GatewayAuth`]); the fields above that are
    /// ingress-nginx's own are empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<Box<GatewayAuth>>,
}

/// Gateway API's `ExternalAuth` (GEP-1494), as Envoy's ext_authz runs it, over HTTP
/// (`HTTPAuthConfig`) or over gRPC (`envoy.service.auth.v3.Authorization/Check`):
///
/// ```text
///  forwardBody.maxSize > 0 ─▶ the client's body read whole first (larger ─▶ 413, the
///      filter fails); sent to the auth server, then upstream as read
///  HTTP: the client's method; path = `path_prefix` + the client's path and query; Host,
///      Authorization, Content-Length (0, or the body's) + `allowed_request_headers`
///      answer 200 ─▶ `allowed_response_headers` (empty: every header but Host and the
///      hop-by-hop and framing ones) copied into the client's request; a named one the
///      answer lacks is removed (a client cannot forge it)
///      any other answer ─▶ to the client as it came (status, headers, body)
///  GRPC: CheckRequest (source, destination, method, path, host, scheme, protocol, size,
///      headers: all, or only `allowed_request_headers`; the body) ─▶ CheckResponse
///      status OK ─▶ its header mutations on the request (never Host or pseudo-headers),
///      its query mutations, its response headers on the client's answer
///      denied ─▶ its status (403 when none), headers and body to the client
///  no answer, a failed call, an unreadable answer ─▶ 500
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct GatewayAuth {
    pub protocol: AuthProtocol,
    /// `http.path`: prepended to the client's path (checked: `/` then URL path characters).
    pub path_prefix: String,
    /// HTTP: `http.allowedHeaders`, the client's headers sent besides the ones always sent.
    /// GRPC: `grpc.allowedHeaders`, the only headers sent (empty: all of them).
    #[serde(serialize_with = "header_names")]
    pub allowed_request_headers: Box<[HeaderName]>,
    /// `http.allowedResponseHeaders`: empty copies all but Host and hop-by-hop ones.
    #[serde(serialize_with = "header_names")]
    pub allowed_response_headers: Box<[HeaderName]>,
    /// `forwardBody.maxSize`: the largest client body read and sent to the auth server; 0
    /// sends none (and reads none).
    #[serde(skip_serializing_if = "is_zero")]
    pub forward_body: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// How the auth server is asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuthProtocol {
    /// A sub-request over HTTP/1.1; its status decides.
    Http,
    /// Envoy's ext_authz `Check` call over gRPC (HTTP/2); its `status` decides.
    Grpc,
}

impl GatewayAuth {
    /// `http.path`: a prefix of `/` and the characters the API's pattern allows (its `%`
    /// escapes complete), or why not. Empty: no prefix.
    pub fn path_prefix(text: &str) -> Result<String, String> {
        if text.is_empty() {
            return Ok(String::new());
        }
        if !text.starts_with('/') {
            return Err(format!("path {text:?}: must start with /"));
        }
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if b == b'%' {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .filter(|h| h.iter().all(u8::is_ascii_hexdigit));
                if hex.is_none() {
                    return Err(format!(
                        "path {text:?}: a % must start an escape such as %2F"
                    ));
                }
                i += 3;
                continue;
            }
            if !(b.is_ascii_alphanumeric() || b"-/._~!$&'()*+,;=:@".contains(&b)) {
                return Err(format!(
                    "path {text:?}: {:?} is not allowed in a path",
                    char::from(b)
                ));
            }
            i += 1;
        }
        Ok(text.to_owned())
    }

    /// The answer's headers never copied into the request: Host (GEP-5224: filters never change
    /// the listener's input), and those of the answer's own connection and framing.
    pub fn never_copied(name: &HeaderName) -> bool {
        matches!(
            name.as_str(),
            "host"
                | "connection"
                | "keep-alive"
                | "proxy-connection"
                | "transfer-encoding"
                | "te"
                | "trailer"
                | "upgrade"
                | "content-length"
        )
    }
}

impl PartialEq for ExternalAuth {
    fn eq(&self, other: &ExternalAuth) -> bool {
        self.url == other.url
            && self.global == other.global
            && self.host == other.host
            && self.uri == other.uri
            && self.method == other.method
            && self.signin == other.signin
            && self.request_redirect == other.request_redirect
            && self.response_headers == other.response_headers
            && self.proxy_set_headers == other.proxy_set_headers
            && self.always_set_cookie == other.always_set_cookie
            && self.cache == other.cache
            && self.destination == other.destination
            && self.gateway == other.gateway
    }
}

/// Where a sub-request goes.
#[derive(Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuthDestination {
    /// A Service port (`namespace/name:port`) or an address.
    Backend {
        #[serde(serialize_with = "arc_text")]
        upstream_name: Arc<str>,
        #[serde(skip)]
        backend: Arc<Backend>,
        /// An `https` URL: TLS as nginx's `proxy_pass https://` with `proxy_ssl_server_name
        /// on` makes it (SNI, no verification).
        #[serde(skip)]
        tls: Option<Arc<UpstreamTls>>,
    },
    /// A host Sluice serves (`$host`, `$http_host`, `$best_http_host`: the request's own): the
    /// sub-request is routed by Sluice's own rules to the route's backend, without leaving the
    /// process. ingress-nginx sends it out through DNS and the load balancer, back to itself.
    Routed {
        /// `None`: the request's host.
        host: Option<String>,
    },
}

impl PartialEq for AuthDestination {
    fn eq(&self, other: &AuthDestination) -> bool {
        match (self, other) {
            (
                AuthDestination::Backend {
                    backend: a,
                    upstream_name: na,
                    ..
                },
                AuthDestination::Backend {
                    backend: b,
                    upstream_name: nb,
                    ..
                },
            ) => na == nb && Arc::ptr_eq(a, b),
            (AuthDestination::Routed { host: a }, AuthDestination::Routed { host: b }) => a == b,
            _ => false,
        }
    }
}

/// The variables an `auth-url` host may be: the request's host.
pub const REQUEST_HOST_VARIABLES: [&str; 3] = ["$host", "$http_host", "$best_http_host"];

/// The sub-request's path and query.
#[derive(Clone, Debug, PartialEq)]
pub enum AuthUri {
    /// Sent as written (nginx's `proxy_pass $target` appends nothing).
    Fixed(String),
    /// With request variables (`$request_uri`, `$host`, `$http_*`…), expanded per request.
    Template(Box<[Segment]>),
}

impl Serialize for AuthUri {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            AuthUri::Fixed(uri) => serializer.serialize_str(uri),
            AuthUri::Template(_) => serializer.serialize_str("expanded per request"),
        }
    }
}

/// Reads an `auth-url`: where it goes (host, port, scheme) and the target sent. A URL without
/// a path sends `/`.
pub fn auth_url(text: &str) -> Result<(MirrorTarget, AuthUri, bool), String> {
    if text.contains('#') {
        return Err("a fragment has no meaning in an auth URL".to_owned());
    }
    let (base, query) = match text.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (text, None),
    };
    // `http(s)://$host/…`: the request's host, routed by Sluice's rules. Parsed with a
    // stand-in host, then marked.
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let request_host = REQUEST_HOST_VARIABLES.iter().find(|v| {
        base[scheme_end..].starts_with(**v)
            && !base[scheme_end + v.len()..]
                .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
    });
    let stand_in;
    let base = match request_host {
        Some(variable) => {
            stand_in = format!(
                "{}request-host{}",
                &base[..scheme_end],
                &base[scheme_end + variable.len()..]
            );
            stand_in.as_str()
        }
        None => base,
    };
    let mut target = MirrorTarget::parse(base)?;
    let mut segments = match target.uri.take() {
        None => vec![Segment::Literal("/".to_owned())],
        Some(MirrorUri::Fixed(path)) => vec![Segment::Literal(path)],
        Some(MirrorUri::Template(segments)) => segments.into_vec(),
    };
    if let Some(query) = query {
        segments.push(Segment::Literal("?".to_owned()));
        segments.extend(parse_request_key(query)?);
    }
    let uri = match segments.as_slice() {
        [] => AuthUri::Fixed("/".to_owned()),
        parts if parts.iter().all(|s| matches!(s, Segment::Literal(_))) => {
            let fixed: String = parts
                .iter()
                .map(|s| match s {
                    Segment::Literal(text) => text.as_str(),
                    Segment::Variable(_) => "",
                })
                .collect();
            fixed
                .parse::<http::uri::PathAndQuery>()
                .map_err(|_| format!("invalid path {fixed:?}"))?;
            AuthUri::Fixed(fixed)
        }
        _ => AuthUri::Template(segments.into_boxed_slice()),
    };
    Ok((target, uri, request_host.is_some()))
}

/// `auth-method`: ingress-nginx's list.
pub fn auth_method(text: &str) -> Option<Method> {
    const METHODS: [&str; 9] = [
        "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE",
    ];
    METHODS
        .contains(&text)
        .then(|| Method::from_bytes(text.as_bytes()).ok())
        .flatten()
}

/// `auth-response-headers`, `global-auth-response-headers`: a comma-separated list of names
/// (ingress-nginx: letters, digits, `-`, `_`). An invalid name refuses the list.
pub fn response_header_names(text: &str) -> Result<Box<[HeaderName]>, String> {
    let mut names = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let valid = name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        let header = HeaderName::from_bytes(name.as_bytes())
            .ok()
            .filter(|_| valid);
        names.push(header.ok_or_else(|| format!("invalid header name {name:?}"))?);
    }
    Ok(names.into_boxed_slice())
}

/// `auth-signin`: the URL a 401 sends the client to, with the request's variables.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Signin {
    /// As written.
    pub url: String,
    /// What the `Location` is made of: the URL, then (unless it names the parameter) the
    /// redirect parameter ingress-nginx appends.
    #[serde(skip)]
    pub parts: Box<[SigninPart]>,
}

/// A piece of a sign-in `Location`.
#[derive(Clone, Debug, PartialEq)]
pub enum SigninPart {
    Literal(String),
    /// `$escaped_request_uri`: the request URI as the client sent it, every character but
    /// `A-Za-z0-9-._~` percent-encoded (nginx's `set_escape_uri`).
    EscapedRequestUri,
    /// `$pass_access_scheme`: `https` when the client reached Sluice (or a trusted balancer)
    /// over TLS.
    PassAccessScheme,
    /// `$http_host`: the client's `Host` as sent.
    HttpHost,
    Variable(Variable),
}

impl Signin {
    /// Reads `auth-signin` with `auth-signin-redirect-param` (empty: `rd`). As ingress-nginx's
    /// `buildAuthSignURL`: a URL without a query gets `?<param>=<scheme>://<host><escaped
    /// request URI>`, one with a query but not that parameter gets it after `&`, one naming it
    /// is sent as it is.
    pub fn parse(url: &str, redirect_param: &str) -> Result<Signin, String> {
        let lower = url.to_ascii_lowercase();
        if !(lower.starts_with("http://") || lower.starts_with("https://") || url.starts_with('$'))
        {
            return Err("not an http:// or https:// URL".to_owned());
        }
        if url.bytes().any(|b| b <= b' ' || b == 0x7f || b == b'"') {
            return Err("spaces, quotes and control characters are not allowed".to_owned());
        }
        let param = if redirect_param.is_empty() {
            "rd"
        } else {
            redirect_param
        };
        let mut parts = signin_parts(url)?;
        let query = url.split_once('?').map(|(_, q)| q);
        let named = query.is_some_and(|q| {
            q.split('&')
                .any(|pair| pair.split('=').next() == Some(param) && pair.len() > param.len() + 1)
        });
        if !named {
            let joiner = if query.is_some_and(|q| !q.is_empty()) {
                "&"
            } else if query.is_some() {
                ""
            } else {
                "?"
            };
            parts.push(SigninPart::Literal(format!("{joiner}{param}=")));
            parts.push(SigninPart::PassAccessScheme);
            parts.push(SigninPart::Literal("://".to_owned()));
            parts.push(SigninPart::HttpHost);
            parts.push(SigninPart::EscapedRequestUri);
        }
        Ok(Signin {
            url: url.to_owned(),
            parts: parts.into_boxed_slice(),
        })
    }
}

fn signin_parts(url: &str) -> Result<Vec<SigninPart>, String> {
    let mut parts = Vec::new();
    let mut rest = url;
    while let Some(at) = rest.find('$') {
        if at > 0 {
            parts.push(SigninPart::Literal(rest[..at].to_owned()));
        }
        let after = &rest[at + 1..];
        let (name, next) = if let Some(braced) = after.strip_prefix('{') {
            let end = braced.find('}').ok_or("`${` without `}`")?;
            (&braced[..end], &braced[end + 1..])
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        let part = match name {
            "" => return Err("a `$` without a variable name".to_owned()),
            "escaped_request_uri" => SigninPart::EscapedRequestUri,
            "pass_access_scheme" => SigninPart::PassAccessScheme,
            "http_host" | "best_http_host" => SigninPart::HttpHost,
            _ => match parse_request_key(&format!("${{{name}}}"))?.pop() {
                Some(Segment::Variable(variable)) => SigninPart::Variable(variable),
                _ => return Err(format!("unknown variable `${name}`")),
            },
        };
        parts.push(part);
        rest = next;
    }
    if !rest.is_empty() {
        parts.push(SigninPart::Literal(rest.to_owned()));
    }
    Ok(parts)
}

/// nginx's `set_escape_uri`: every byte but `A-Za-z0-9-._~` as `%XX`.
pub fn escape_uri_component(out: &mut String, text: &[u8]) {
    for &b in text {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
}

/// `auth-cache-key` with `auth-cache-duration`: answers kept per key and route.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct AuthCache {
    /// As written.
    pub key: String,
    #[serde(skip)]
    pub segments: Box<[Segment]>,
    /// The first entry naming a status decides how long an answer with it is kept.
    pub validity: Box<[CacheValidity]>,
}

/// One `proxy_cache_valid` entry: statuses (none: `any`) and how long.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct CacheValidity {
    /// Empty: every status (`any`).
    pub statuses: Box<[u16]>,
    #[serde(serialize_with = "seconds")]
    pub duration: Duration,
}

impl AuthCache {
    /// How long an answer with `status` is kept; `None`: not at all.
    pub fn keep(&self, status: u16) -> Option<Duration> {
        self.validity
            .iter()
            .find(|v| v.statuses.is_empty() || v.statuses.contains(&status))
            .map(|v| v.duration)
    }
}

/// `auth-cache-duration`: comma-separated `proxy_cache_valid` values, each statuses then one
/// duration (`200 202 401 5m`, `any 1m`, `10m`: nginx's 200, 301 and 302). ingress-nginx's
/// validator: codes of three digits, then a duration in ms, s, m, h, d, w, M or y.
pub fn cache_durations(text: &str) -> Result<Box<[CacheValidity]>, String> {
    let mut out = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let mut statuses = Vec::new();
        let mut any = false;
        let mut duration = None;
        for word in entry.split(' ').filter(|w| !w.is_empty()) {
            if duration.is_some() {
                return Err(format!("{entry:?}: nothing may follow the duration"));
            }
            if word == "any" {
                any = true;
            } else if word.len() == 3 && word.bytes().all(|b| b.is_ascii_digit()) {
                statuses.push(word.parse::<u16>().expect("three digits"));
            } else {
                duration = Some(nginx_duration(word).ok_or_else(|| {
                    format!("{entry:?}: {word:?} is neither a status nor a duration such as 5m")
                })?);
            }
        }
        let duration = duration.ok_or_else(|| format!("{entry:?}: no duration"))?;
        if any {
            statuses.clear();
        } else if statuses.is_empty() {
            statuses = vec![200, 301, 302];
        }
        out.push(CacheValidity {
            statuses: statuses.into_boxed_slice(),
            duration,
        });
    }
    if out.is_empty() {
        return cache_durations(DEFAULT_CACHE_DURATION);
    }
    Ok(out.into_boxed_slice())
}

/// One nginx time value with a unit (ms, s, m, h, d, w, M, y).
fn nginx_duration(word: &str) -> Option<Duration> {
    let digits = word.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = word.split_at(digits);
    let number: u64 = number.parse().ok()?;
    let seconds = match unit {
        "ms" => return Some(Duration::from_millis(number)),
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        "M" => 30 * 86_400,
        "y" => 365 * 86_400,
        _ => return None,
    };
    Some(Duration::from_secs(number.checked_mul(seconds)?))
}

fn seconds<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&format!("{}s", value.as_secs_f64()))
}

fn arc_text<S: Serializer>(value: &Arc<str>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(value)
}

fn optional_method<S: Serializer>(
    value: &Option<Method>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(method) => serializer.serialize_str(method.as_str()),
        None => serializer.serialize_str("the client's"),
    }
}

fn header_names<S: Serializer>(value: &[HeaderName], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(value.iter().map(HeaderName::as_str))
}

fn header_pairs<S: Serializer>(
    value: &[(HeaderName, HeaderValue)],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_map(
        value
            .iter()
            .map(|(n, v)| (n.as_str(), String::from_utf8_lossy(v.as_bytes()))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_urls_keep_their_query_and_expand_variables() {
        let (target, uri, routed) =
            auth_url("http://oauth2-proxy.auth.svc:4180/oauth2/auth").unwrap();
        assert!(!routed);
        assert_eq!(
            (target.host.as_str(), target.port),
            ("oauth2-proxy.auth.svc", 4180)
        );
        assert_eq!(uri, AuthUri::Fixed("/oauth2/auth".into()));
        let (_, uri, _) = auth_url("https://10.0.0.9/auth?allowed_groups=a,b").unwrap();
        assert_eq!(uri, AuthUri::Fixed("/auth?allowed_groups=a,b".into()));
        let (_, uri, _) = auth_url("http://10.0.0.9").unwrap();
        assert_eq!(uri, AuthUri::Fixed("/".into()));
        let (_, uri, _) = auth_url("http://10.0.0.9/check?uri=$request_uri").unwrap();
        assert!(matches!(uri, AuthUri::Template(_)));
        let (_, uri, routed) = auth_url("https://$host/oauth2/auth").unwrap();
        assert!(routed);
        assert_eq!(uri, AuthUri::Fixed("/oauth2/auth".into()));
        assert!(auth_url("https://$hostname/oauth2/auth").is_err());
        assert!(auth_url("ftp://10.0.0.9/").is_err());
        assert!(auth_url("http://10.0.0.9/a?x=$nope_nope_var").is_err());
    }

    #[test]
    fn signin_gets_the_redirect_parameter_as_ingress_nginx_appends_it() {
        let last = |s: &Signin| s.parts.last().cloned();
        let s = Signin::parse("https://auth.example/oauth2/start", "").unwrap();
        assert_eq!(s.parts[1], SigninPart::Literal("?rd=".into()));
        assert_eq!(last(&s), Some(SigninPart::EscapedRequestUri));
        let s = Signin::parse("https://auth.example/start?x=1", "next").unwrap();
        assert_eq!(s.parts[1], SigninPart::Literal("&next=".into()));
        let s = Signin::parse("https://$host/oauth2/start?rd=$escaped_request_uri", "").unwrap();
        assert_eq!(
            s.parts.as_ref(),
            [
                SigninPart::Literal("https://".into()),
                SigninPart::Variable(Variable::Host),
                SigninPart::Literal("/oauth2/start?rd=".into()),
                SigninPart::EscapedRequestUri,
            ]
        );
        assert!(Signin::parse("auth.example/start", "").is_err());
        assert!(Signin::parse("https://a.example/$no_such_variable_here", "").is_err());
    }

    #[test]
    fn cache_durations_as_proxy_cache_valid_reads_them() {
        let v = cache_durations("").unwrap();
        assert_eq!(v[0].statuses.as_ref(), [200, 202, 401]);
        assert_eq!(v[0].duration, Duration::from_secs(300));
        let v = cache_durations("200 10m, 401 30s, any 1s").unwrap();
        let cache = AuthCache {
            key: String::new(),
            segments: Box::new([]),
            validity: v,
        };
        assert_eq!(cache.keep(200), Some(Duration::from_secs(600)));
        assert_eq!(cache.keep(401), Some(Duration::from_secs(30)));
        assert_eq!(cache.keep(500), Some(Duration::from_secs(1)));
        let v = cache_durations("5m").unwrap();
        assert_eq!(v[0].statuses.as_ref(), [200, 301, 302]);
        assert!(cache_durations("5m 200").is_err());
        assert!(cache_durations("200 five").is_err());
        assert!(cache_durations("200").is_err());
    }

    #[test]
    fn a_gateway_path_prefix_is_a_path_or_refused() {
        assert_eq!(GatewayAuth::path_prefix("").unwrap(), "");
        assert_eq!(GatewayAuth::path_prefix("/auth/v1").unwrap(), "/auth/v1");
        assert_eq!(GatewayAuth::path_prefix("/a%2Fb").unwrap(), "/a%2Fb");
        assert!(GatewayAuth::path_prefix("auth").is_err());
        assert!(GatewayAuth::path_prefix("/a b").is_err());
        assert!(GatewayAuth::path_prefix("/a?x=1").is_err());
        assert!(GatewayAuth::path_prefix("/a%2").is_err());
        assert!(GatewayAuth::never_copied(&http::header::HOST));
        assert!(!GatewayAuth::never_copied(&HeaderName::from_static(
            "x-user"
        )));
    }

    #[test]
    fn escaping_keeps_only_unreserved_characters() {
        let mut out = String::new();
        escape_uri_component(&mut out, b"/a b?x=1&y=~");
        assert_eq!(out, "%2Fa%20b%3Fx%3D1%26y%3D~");
    }
}
