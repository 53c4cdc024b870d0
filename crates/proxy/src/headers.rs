//! Header rewriting between client and upstream: hop-by-hop headers out, and in the
//! headers ingress-nginx sets on every proxied request (its `nginx.tmpl`, `location` block):
//! `X-Request-ID`, `X-Real-IP`, `X-Forwarded-For`, `-Host`, `-Port`, `-Proto`, `-Scheme`,
//! `X-Scheme`, `X-Original-URI` (`proxy-add-original-uri-header`),
//! `X-Original-Forwarded-For`, `X-Original-Forwarded-Host`, and `Proxy` emptied (httpoxy).
//! The request is turned into an HTTP/1.1 origin-form one.
//!
//! ```text
//!  request headers ─▶ one pass over the names: hop-by-hop, Expect, Proxy, one the proxy sets?
//!     ├─ none (the common request) ─▶ the map is left alone
//!     └─ some ─▶ removed in place; the incoming X-Forwarded-For / -Host are kept aside for
//!                X-Original-Forwarded-*; a trusted peer's X-Forwarded-Proto / -Port stay,
//!                and its other forwarded claims (Forwarded, X-Forwarded-Prefix/-Ssl/-Server/
//!                -Uri, True-Client-IP, X-Client-IP, …); X-Original-URL / X-Rewrite-URL go
//!  Added: the headers the proxy sets, written after the request's own by the upstream client
//!     client address (client_addr): X-Real-IP, X-Forwarded-For (or, compute-full-forwarded-for,
//!     the trusted incoming chain + the peer); scheme and port: the connection's, or a trusted
//!     peer's; X-Original-URI: the target as the client sent it (borrowed from the head)
//! ```
//!
//! "Trusted": `use-forwarded-headers` is on and the peer is in `proxy-real-ip-cidr` (behind
//! PROXY protocol, the client its header names; see `worker::ConnCtx::forwarded`). ingress-nginx believes `X-Forwarded-Proto/-Host/-Port` from
//! any peer once `use-forwarded-headers` is on; Sluice asks the same ranges as for the address.
//!
//! The common request costs one pass over its header names and no change to the map: the
//! added headers are never inserted (a hash and a probe each, and an allocation for the
//! request ID), they are written straight into the serialized head.

use std::io::Write;
use std::net::IpAddr;

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::request::Parts;
use http::uri::PathAndQuery;
use http::{HeaderMap, Method, Uri, Version};

static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
pub(crate) static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
pub(crate) static X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
static X_FORWARDED_PORT: HeaderName = HeaderName::from_static("x-forwarded-port");
static X_FORWARDED_SCHEME: HeaderName = HeaderName::from_static("x-forwarded-scheme");
static X_SCHEME: HeaderName = HeaderName::from_static("x-scheme");
static X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");
static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// `X-Request-ID`, by name (for lookups).
pub(crate) const X_REQUEST_ID_NAME: &str = "x-request-id";
static X_ORIGINAL_URI: HeaderName = HeaderName::from_static("x-original-uri");
static X_ORIGINAL_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-original-forwarded-for");
static X_ORIGINAL_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-original-forwarded-host");
/// Headers that replace the request target in IIS, Symfony, Laravel and Zend routing: a
/// client's would route the backend by another path than the one Sluice routed (and checked
/// access) by. Nobody legitimate in front of an ingress sets them: always removed.
const TARGET_OVERRIDES: [&str; 2] = ["x-original-url", "x-rewrite-url"];
/// What frameworks read as the client's address, scheme, host or path prefix besides the
/// `X-Forwarded-*` the proxy sets itself: believed (passed on) only from a trusted peer, as
/// `X-Forwarded-Proto` is; removed from anyone else. A route's `x-forwarded-prefix` replaces
/// the incoming one either way.
const FORWARDED_CLAIMS: [&str; 9] = [
    "forwarded",
    "x-forwarded-prefix",
    "x-forwarded-ssl",
    "x-forwarded-server",
    "x-forwarded-uri",
    "true-client-ip",
    "x-client-ip",
    "client-ip",
    "x-cluster-client-ip",
];
/// httpoxy (CVE-2016-5385): CGI maps `Proxy` to `HTTP_PROXY`, which HTTP clients read as
/// their proxy; ingress-nginx sends it empty, which nginx means as not at all.
static PROXY: HeaderName = HeaderName::from_static("proxy");

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

/// What the proxy knows about the client of one request (see `worker::ConnCtx::forwarded`).
pub(crate) struct Forwarded<'a> {
    /// The connection's peer address, formatted once per connection.
    pub(crate) peer: &'a HeaderValue,
    /// The client address when it is not the peer: a trusted proxy named it.
    pub(crate) client: Option<IpAddr>,
    /// The port of the listener the client reached.
    pub(crate) port: &'a HeaderValue,
    pub(crate) https: bool,
    /// `use-forwarded-headers` and the peer is in `proxy-real-ip-cidr`: its
    /// `X-Forwarded-Proto`, `-Port` and `-Host` are believed.
    pub(crate) trust_incoming: bool,
    /// `compute-full-forwarded-for`, and `trust_incoming`: `X-Forwarded-For` is the incoming
    /// chain with the peer appended, rather than the client address alone.
    pub(crate) full_forwarded_for: bool,
    /// `forwarded-for-header` when it is not `X-Forwarded-For`: its value goes upstream as
    /// `X-Original-Forwarded-For`.
    pub(crate) custom_forwarded_for: Option<&'a str>,
    /// `proxy-add-original-uri-header`.
    pub(crate) original_uri: bool,
    /// `generate-request-id`.
    pub(crate) generate_request_id: bool,
    /// Which client header names are dropped.
    pub(crate) names: HeaderNames,
}

/// Which client header names are dropped rather than sent on, as nginx's
/// `ignore_invalid_headers` and `underscores_in_headers` decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HeaderNames {
    /// `enable-underscores-in-headers`: names with `_` are valid (nginx drops them by default:
    /// CGI, WSGI and PHP read `X_Forwarded_For` as `X-Forwarded-For`, so a client could forge
    /// what the proxy set).
    pub(crate) underscores: bool,
    /// `ignore-invalid-headers` (on by default): names with other characters than letters,
    /// digits and `-` (and `_` when valid) are dropped; off, every name goes on.
    pub(crate) ignore_invalid: bool,
}

impl HeaderNames {
    /// nginx's defaults.
    pub(crate) const NGINX: HeaderNames = HeaderNames {
        underscores: false,
        ignore_invalid: true,
    };

    pub(crate) fn of(settings: &model::Settings) -> HeaderNames {
        HeaderNames {
            underscores: settings.enable_underscores_in_headers,
            ignore_invalid: settings.ignore_invalid_headers,
        }
    }

    /// Whether the client's header `name` is dropped. Names are lower case (the `http` crate
    /// folds HTTP/1 names; HTTP/2 requires it).
    pub(crate) fn drops(self, name: &HeaderName) -> bool {
        self.ignore_invalid
            && !name.as_str().bytes().all(|b| {
                b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || b == b'-'
                    || (b == b'_' && self.underscores)
            })
    }
}

impl<'a> Forwarded<'a> {
    /// A client that reached us directly, with the default settings (tests and fuzzing).
    pub(crate) fn direct(peer: &'a HeaderValue, port: &'a HeaderValue, https: bool) -> Self {
        Forwarded {
            peer,
            client: None,
            port,
            https,
            trust_incoming: false,
            full_forwarded_for: false,
            custom_forwarded_for: None,
            original_uri: false,
            generate_request_id: true,
            names: HeaderNames::NGINX,
        }
    }
}

/// The most fields `Added` writes (one of each of its names).
const MOST_ADDED: usize = 11;

/// The headers the proxy adds to a request, written after the request's own (see the module
/// doc). What the request came with that they need is kept here, out of the map.
pub(crate) struct Added<'a> {
    peer: &'a HeaderValue,
    client: Option<IpAddr>,
    port: &'a HeaderValue,
    https: bool,
    full_forwarded_for: bool,
    /// The incoming `X-Forwarded-For`, its field lines joined.
    incoming_for: Option<HeaderValue>,
    /// `forwarded-for-header` is another header: its value, for `X-Original-Forwarded-For`.
    custom_for: Option<Option<HeaderValue>>,
    /// The incoming `X-Forwarded-Host`, its field lines joined.
    incoming_host: Option<HeaderValue>,
    /// Its first entry is `X-Forwarded-Host` (from a trusted peer).
    trusted_host: bool,
    /// A trusted peer's `X-Forwarded-Proto` stayed in the map: it is the scheme.
    proto_in_map: bool,
    /// A trusted peer's `X-Forwarded-Port` stayed in the map.
    port_in_map: bool,
    /// Write `X-Original-URI` from the target (false when it is in the map already).
    original_uri: bool,
    request_id: Option<[u8; 32]>,
    /// `upstream-vhost`: the `Host` sent instead of the client's (which `X-Forwarded-Host`
    /// keeps).
    upstream_host: Option<&'a HeaderValue>,
}

/// The target a request arrived with, when the proxy changed it (normalised, later
/// rewritten): `X-Original-URI` is this one. Set by whoever changes the target first.
#[derive(Clone)]
pub(crate) struct OriginalTarget(pub(crate) PathAndQuery);

/// Which headers of interest a request has, from one pass over its names.
#[derive(Clone, Copy)]
struct Present(u32);

impl Present {
    const HOP_BY_HOP: u32 = 1;
    const EXPECT: u32 = 1 << 1;
    const FORWARDED_FOR: u32 = 1 << 2;
    const FORWARDED_PROTO: u32 = 1 << 3;
    const FORWARDED_HOST: u32 = 1 << 4;
    const FORWARDED_PORT: u32 = 1 << 5;
    const REAL_IP: u32 = 1 << 6;
    const REQUEST_ID: u32 = 1 << 7;
    const DROPPED_NAME: u32 = 1 << 8;
    const FORWARDED_SCHEME: u32 = 1 << 9;
    const SCHEME: u32 = 1 << 10;
    const ORIGINAL_URI: u32 = 1 << 11;
    const ORIGINAL_FORWARDED_FOR: u32 = 1 << 12;
    const ORIGINAL_FORWARDED_HOST: u32 = 1 << 13;
    const PROXY: u32 = 1 << 14;
    /// `forwarded-for-header`, when it is not `X-Forwarded-For`.
    const CUSTOM_FORWARDED_FOR: u32 = 1 << 15;
    /// One of `TARGET_OVERRIDES`.
    const TARGET_OVERRIDE: u32 = 1 << 16;
    /// One of `FORWARDED_CLAIMS`.
    const FORWARDED_CLAIM: u32 = 1 << 17;

    /// `names`: which names are flagged as dropped. `custom`: the `forwarded-for-header` if
    /// it is another header than `X-Forwarded-For`.
    fn scan(headers: &HeaderMap, names: HeaderNames, custom: Option<&str>) -> Present {
        let mut present = 0;
        for name in headers.keys() {
            if names.drops(name) {
                present |= Present::DROPPED_NAME;
            }
            if custom.is_some_and(|custom| custom == name.as_str()) {
                present |= Present::CUSTOM_FORWARDED_FOR;
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
                    "x-forwarded-scheme" => Present::FORWARDED_SCHEME,
                    "x-scheme" => Present::SCHEME,
                    "x-original-uri" => Present::ORIGINAL_URI,
                    "x-original-forwarded-for" => Present::ORIGINAL_FORWARDED_FOR,
                    "x-original-forwarded-host" => Present::ORIGINAL_FORWARDED_HOST,
                    "proxy" => Present::PROXY,
                    other if TARGET_OVERRIDES.contains(&other) => Present::TARGET_OVERRIDE,
                    other if FORWARDED_CLAIMS.contains(&other) => Present::FORWARDED_CLAIM,
                    _ => 0,
                }
            };
        }
        Present(present)
    }

    fn has(self, flag: u32) -> bool {
        self.0 & flag != 0
    }
}

/// The client's headers as a copy of the request carries them (a mirror): what is about the
/// client's connection out (hop-by-hop, `Expect`), names `names` drops out (nginx never read
/// them), HTTP/2 cookies joined; nothing the proxy adds (no `X-Forwarded-*`).
pub(crate) fn client_headers_only(parts: &mut Parts, names: HeaderNames) {
    drop_names(&mut parts.headers, names);
    strip_hop_by_hop(&mut parts.headers, false);
    parts.headers.remove(header::EXPECT);
    if parts.version == Version::HTTP_2 {
        join_cookies(&mut parts.headers);
    }
    parts.version = Version::HTTP_11;
}

/// Rewrites a client request into the one sent upstream; returns the headers to add to it.
pub(crate) fn prepare_request<'a>(
    parts: &mut Parts,
    forwarded: &Forwarded<'a>,
    upgrade: bool,
) -> Added<'a> {
    let custom = forwarded.custom_forwarded_for;
    let mut present = Present::scan(&parts.headers, forwarded.names, custom);
    if present.has(Present::DROPPED_NAME) {
        drop_names(&mut parts.headers, forwarded.names);
    }
    if present.has(Present::HOP_BY_HOP) {
        strip_hop_by_hop(&mut parts.headers, upgrade);
        // `Connection` may have named any of the others.
        let keep_all = HeaderNames {
            ignore_invalid: false,
            ..forwarded.names
        };
        present = Present::scan(&parts.headers, keep_all, custom);
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
    let mut added = set_forwarded(&mut parts.headers, forwarded, present);
    if forwarded.original_uri {
        // Changed on the way (rare): the target the client sent goes in the map, copied.
        if let Some(OriginalTarget(target)) = parts.extensions.remove::<OriginalTarget>() {
            if let Ok(value) = HeaderValue::from_str(target.as_str()) {
                parts.headers.insert(X_ORIGINAL_URI.clone(), value);
                added.original_uri = false;
            }
        }
    }
    // Whatever hyper's server attached (upgrade handles, protocol) means nothing upstream.
    parts.extensions.clear();
    if upgrade {
        parts
            .headers
            .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    }
    added
}

impl<'a> Added<'a> {
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

    /// The request ID this request gets when it came without one.
    pub(crate) fn generated_request_id(&self) -> Option<&[u8; 32]> {
        self.request_id.as_ref()
    }

    /// Appends the header lines to a serialized head: `head` is the request as it goes
    /// upstream, `host` its `Host`.
    pub(crate) fn write(&self, out: &mut Vec<u8>, head: &Parts, host: Option<&HeaderValue>) {
        self.fields(&mut Lines(out), head, host);
    }

    /// The same header lines as `write`, into the head's map: an HTTP/2 upstream's head is
    /// encoded from the map. `host` is the client's `Host`.
    ///
    /// One allocation: the values are written once, each a slice of that buffer (`Bytes`,
    /// shared), each name one of the statics (no copy either).
    pub(crate) fn insert_into(&self, head: &mut Parts, host: Option<&HeaderValue>) {
        let mut fields = Fields {
            values: Vec::with_capacity(256),
            spans: Vec::with_capacity(MOST_ADDED),
            open: None,
        };
        self.fields(&mut fields, head, host);
        let values = Bytes::from(fields.values);
        for (name, start, end) in fields.spans {
            if let Ok(value) = HeaderValue::from_maybe_shared(values.slice(start..end)) {
                head.headers.append(name.clone(), value);
            }
        }
    }

    /// The fields, in order, to `out`.
    fn fields(&self, out: &mut impl FieldSink, head: &Parts, host: Option<&HeaderValue>) {
        if let Some(id) = &self.request_id {
            out.line(&X_REQUEST_ID, id);
        }
        out.start(&X_REAL_IP);
        self.write_client(out.value());
        out.end();

        out.start(&X_FORWARDED_FOR);
        match (self.full_forwarded_for, &self.incoming_for) {
            (true, Some(chain)) => {
                out.value().extend_from_slice(chain.as_bytes());
                out.value().extend_from_slice(b", ");
                out.value().extend_from_slice(self.peer.as_bytes());
            }
            (true, None) => out.value().extend_from_slice(self.peer.as_bytes()),
            (false, _) => self.write_client(out.value()),
        }
        out.end();

        let forwarded_host = match (&self.incoming_host, self.trusted_host) {
            // ingress-nginx (lua_ingress.lua): the first of a trusted list.
            (Some(hosts), true) => Some(first_entry(hosts.as_bytes())),
            _ => host.map(HeaderValue::as_bytes),
        };
        if let Some(forwarded_host) = forwarded_host.filter(|h| !h.is_empty()) {
            out.line(&X_FORWARDED_HOST, forwarded_host);
        }
        if !self.port_in_map {
            out.line(&X_FORWARDED_PORT, self.port.as_bytes());
        }
        let own_scheme: &[u8] = if self.https { b"https" } else { b"http" };
        let scheme = match self.proto_in_map {
            true => head
                .headers
                .get(&X_FORWARDED_PROTO)
                .map_or(own_scheme, HeaderValue::as_bytes),
            false => {
                out.line(&X_FORWARDED_PROTO, own_scheme);
                own_scheme
            }
        };
        out.line(&X_FORWARDED_SCHEME, scheme);
        out.line(&X_SCHEME, scheme);
        if self.original_uri {
            out.start(&X_ORIGINAL_URI);
            write_target(out.value(), &head.uri);
            out.end();
        }
        let original_for = match &self.custom_for {
            Some(custom) => custom.as_ref(),
            None => self.incoming_for.as_ref(),
        };
        if let Some(original_for) = original_for {
            out.line(&X_ORIGINAL_FORWARDED_FOR, original_for.as_bytes());
        }
        if let Some(hosts) = &self.incoming_host {
            out.line(&X_ORIGINAL_FORWARDED_HOST, hosts.as_bytes());
        }
    }

    fn write_client(&self, out: &mut Vec<u8>) {
        match self.client {
            // Into the head's own buffer: no allocation.
            Some(client) => {
                let _ = write!(out, "{client}");
            }
            None => out.extend_from_slice(self.peer.as_bytes()),
        }
    }
}

/// Where `Added::fields` puts each field: a name, then its value's bytes, then its end.
trait FieldSink {
    fn start(&mut self, name: &'static HeaderName);
    /// The value being written.
    fn value(&mut self) -> &mut Vec<u8>;
    fn end(&mut self);

    /// A whole field.
    fn line(&mut self, name: &'static HeaderName, value: &[u8]) {
        self.start(name);
        self.value().extend_from_slice(value);
        self.end();
    }
}

/// `name: value\r\n` lines of an HTTP/1.1 head.
struct Lines<'o>(&'o mut Vec<u8>);

impl FieldSink for Lines<'_> {
    fn start(&mut self, name: &'static HeaderName) {
        self.0.extend_from_slice(name.as_str().as_bytes());
        self.0.extend_from_slice(b": ");
    }

    fn value(&mut self) -> &mut Vec<u8> {
        self.0
    }

    fn end(&mut self) {
        self.0.extend_from_slice(b"\r\n");
    }
}

/// Values one after another in one buffer, and where each field's value lies.
struct Fields {
    values: Vec<u8>,
    spans: Vec<(&'static HeaderName, usize, usize)>,
    /// The field being written: its name and where its value starts.
    open: Option<(&'static HeaderName, usize)>,
}

impl FieldSink for Fields {
    fn start(&mut self, name: &'static HeaderName) {
        self.open = Some((name, self.values.len()));
    }

    fn value(&mut self) -> &mut Vec<u8> {
        &mut self.values
    }

    fn end(&mut self) {
        if let Some((name, start)) = self.open.take() {
            self.spans.push((name, start, self.values.len()));
        }
    }
}

/// The request target in origin form, as the request line has it.
pub(crate) fn write_target(out: &mut Vec<u8>, uri: &Uri) {
    let path = uri.path();
    out.extend_from_slice(if path.is_empty() {
        b"/"
    } else {
        path.as_bytes()
    });
    if let Some(query) = uri.query() {
        out.push(b'?');
        out.extend_from_slice(query.as_bytes());
    }
}

/// The first entry of a comma-separated list, trimmed.
pub(crate) fn first_entry(list: &[u8]) -> &[u8] {
    let end = list.iter().position(|b| *b == b',').unwrap_or(list.len());
    list[..end].trim_ascii()
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

/// A gRPC request: `content-type: application/grpc` (or `application/grpc+proto`, …).
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    headers.get(header::CONTENT_TYPE).is_some_and(|value| {
        let value = value.as_bytes();
        value.len() >= 16
            && value[..16].eq_ignore_ascii_case(b"application/grpc")
            && matches!(value.get(16), None | Some(b'+' | b';'))
    })
}

/// The client sent `TE: trailers` (gRPC clients must): an HTTP/2 upstream gets it too.
pub(crate) fn te_trailers(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::TE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("trailers"))
}

/// `Connection: upgrade` with `Upgrade: websocket`.
pub(crate) fn is_websocket_upgrade(headers: &HeaderMap) -> bool {
    connection_has(headers, "upgrade")
        && headers
            .get(header::UPGRADE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("websocket"))
}

/// Turns an RFC 8441 WebSocket request into the HTTP/1.1 upgrade a backend expects: `GET`
/// with `Upgrade: websocket`, `Connection: Upgrade` and a fresh `Sec-WebSocket-Key` (HTTP/2
/// clients send none; the backend's `Sec-WebSocket-Accept` is for this key and is not passed
/// back). `Sec-WebSocket-Version`, `-Protocol` and `-Extensions` go as the client sent them.
pub(crate) fn websocket_over_http1(head: &mut http::request::Parts) {
    use base64::Engine;
    head.method = Method::GET;
    head.headers
        .insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    head.headers
        .insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    let nonce: [u8; 16] = std::array::from_fn(|_| fastrand::u8(..));
    let key = base64::engine::general_purpose::STANDARD.encode(nonce);
    head.headers.insert(
        HeaderName::from_static("sec-websocket-key"),
        HeaderValue::try_from(key).expect("base64 is a valid header value"),
    );
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
fn drop_names(headers: &mut HeaderMap, names: HeaderNames) {
    let dropped: Vec<HeaderName> = headers
        .keys()
        .filter(|name| names.drops(name))
        .cloned()
        .collect();
    for name in dropped {
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

/// Takes the client's versions of the headers the proxy sets out of the map, keeping what
/// they are still needed for (`X-Original-Forwarded-*`, a trusted peer's scheme, port and
/// chain). A client's `X-Request-ID` is kept, as ingress-nginx does.
fn set_forwarded<'a>(headers: &mut HeaderMap, f: &Forwarded<'a>, present: Present) -> Added<'a> {
    let mut added = Added {
        peer: f.peer,
        client: f.client,
        port: f.port,
        https: f.https,
        full_forwarded_for: f.full_forwarded_for,
        incoming_for: None,
        custom_for: None,
        incoming_host: None,
        trusted_host: f.trust_incoming,
        proto_in_map: false,
        port_in_map: false,
        original_uri: f.original_uri,
        upstream_host: None,
        request_id: (f.generate_request_id && !present.has(Present::REQUEST_ID)).then(request_id),
    };
    if let Some(custom) = f.custom_forwarded_for {
        // Read before anything is removed: it may be one of the headers the proxy sets.
        added.custom_for = Some(
            present
                .has(Present::CUSTOM_FORWARDED_FOR)
                .then(|| joined(headers, custom))
                .flatten(),
        );
    }
    if present.has(Present::FORWARDED_FOR) {
        added.incoming_for = take_joined(headers, &X_FORWARDED_FOR);
    }
    if present.has(Present::FORWARDED_HOST) {
        added.incoming_host = take_joined(headers, &X_FORWARDED_HOST);
    }
    if present.has(Present::FORWARDED_PROTO) {
        added.proto_in_map = f.trust_incoming;
        if !f.trust_incoming {
            headers.remove(&X_FORWARDED_PROTO);
        }
    }
    if present.has(Present::FORWARDED_PORT) {
        added.port_in_map = f.trust_incoming;
        if !f.trust_incoming {
            headers.remove(&X_FORWARDED_PORT);
        }
    }
    // The client's own are replaced (nginx's proxy_set_header), or dropped (`Proxy`).
    let replaced = [
        (Present::REAL_IP, &X_REAL_IP),
        (Present::FORWARDED_SCHEME, &X_FORWARDED_SCHEME),
        (Present::SCHEME, &X_SCHEME),
        (Present::ORIGINAL_FORWARDED_FOR, &X_ORIGINAL_FORWARDED_FOR),
        (Present::ORIGINAL_FORWARDED_HOST, &X_ORIGINAL_FORWARDED_HOST),
        (Present::PROXY, &PROXY),
    ];
    for (flag, name) in replaced {
        if present.has(flag) {
            headers.remove(name);
        }
    }
    if present.has(Present::TARGET_OVERRIDE) {
        for name in TARGET_OVERRIDES {
            headers.remove(name);
        }
    }
    if present.has(Present::FORWARDED_CLAIM) && !f.trust_incoming {
        for name in FORWARDED_CLAIMS {
            headers.remove(name);
        }
    }
    // Without the key a client's X-Original-URI passes, as with ingress-nginx.
    if f.original_uri && present.has(Present::ORIGINAL_URI) {
        headers.remove(&X_ORIGINAL_URI);
    }
    added
}

/// A header's field lines as one value (RFC 9110 §5.3); copied only when there are several.
fn joined(headers: &HeaderMap, name: &str) -> Option<HeaderValue> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    let Some(second) = values.next() else {
        return Some(first.clone());
    };
    let mut list = first.as_bytes().to_vec();
    for value in std::iter::once(second).chain(values) {
        list.extend_from_slice(b", ");
        list.extend_from_slice(value.as_bytes());
    }
    HeaderValue::from_bytes(&list).ok()
}

/// Removes a header and returns its field lines as one value (moved when there is one).
fn take_joined(headers: &mut HeaderMap, name: &HeaderName) -> Option<HeaderValue> {
    if headers.get_all(name).iter().nth(1).is_none() {
        return headers.remove(name);
    }
    let list = joined(headers, name.as_str());
    headers.remove(name);
    list
}

/// The value of query parameter `name` as written (not decoded; the first when repeated), as
/// nginx's `$arg_NAME`.
/// nginx's `$remote_user`: the user name of a Basic `Authorization` value.
pub(crate) fn basic_user(value: &[u8]) -> Option<Vec<u8>> {
    use base64::Engine;
    let encoded = value
        .strip_prefix(b"Basic ")
        .or_else(|| value.strip_prefix(b"basic "))?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim_ascii())
        .ok()?;
    let user = decoded.split(|b| *b == b':').next()?;
    Some(user.to_vec())
}

pub(crate) fn query_arg<'q>(query: &'q str, name: &str) -> Option<&'q str> {
    query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (key == name).then_some(value)
    })
}

/// The value of cookie `name` in one `Cookie` header's value, as nginx's `$cookie_NAME`.
pub(crate) fn cookie<'c>(header: &'c str, name: &str) -> Option<&'c str> {
    header.split(';').find_map(|pair| {
        let (key, value) = pair.trim().split_once('=')?;
        (key == name).then_some(value)
    })
}

#[cfg(test)]
mod tests;
