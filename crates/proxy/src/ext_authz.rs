//! Envoy's ext_authz gRPC protocol (`envoy.service.auth.v3.Authorization/Check`): the
//! `protocol: GRPC` of Gateway API's `ExternalAuth` (GEP-1494). The messages only: the call is
//! `auth::grpc_check`'s, on the HTTP/2 upstream machinery.
//!
//! ```text
//!  the client's request ─▶ check_request(): CheckRequest { attributes: source and
//!      destination addresses; request.time; request.http: id, method, headers (lower-case,
//!      repeated ones joined; pseudo-headers :authority :method :path :scheme; only the
//!      allowed ones when a list is given), path (with query), host, scheme, size, protocol,
//!      body (UTF-8) or raw_body (other bytes) } ─▶ one gRPC message (5-byte prefix)
//!  the answer's message ─▶ check_response(): CheckResponse
//!      status.code 0 (or no status) ─▶ Allow: ok_response's header mutations (by
//!          append / append_action, as Envoy applies them), headers_to_remove, query
//!          parameters to set and remove, response_headers_to_add
//!      error_response ─▶ Deny (error): its status (else 500), headers, body
//!      anything else ─▶ Deny: denied_response's status (else 403), headers, body
//!      bytes that are not such a message ─▶ Err: the proxy answers 500
//! ```
//! Mutations never touch Host, pseudo-headers or the request's framing (`GatewayAuth::
//! never_copied`); a name or value HTTP cannot carry is left out and logged: the auth server
//! is at fault, the rest of its answer still counts.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode, Uri, Version};
use model::auth::GatewayAuth;

use crate::protobuf::{self, Fields, Malformed, Value};

/// The method's path.
pub(crate) const CHECK_PATH: &str = "/envoy.service.auth.v3.Authorization/Check";

/// What the `Check` call says about a request.
pub(crate) struct Asked<'a> {
    pub(crate) head: &'a Parts,
    /// `grpc.allowedHeaders`: empty sends every header.
    pub(crate) allowed: &'a [HeaderName],
    /// The client (its address as the proxy believes it) and the port it came from.
    pub(crate) source: SocketAddr,
    /// The listener's address, when the site has one of its own, and its declared port.
    pub(crate) destination: (Option<IpAddr>, u16),
    pub(crate) https: bool,
    /// The body read for `forwardBody`.
    pub(crate) body: Option<&'a [u8]>,
    /// The body's length when known (declared, or read whole).
    pub(crate) size: Option<u64>,
}

/// The `CheckRequest` message for `asked`, framed as one gRPC message.
pub(crate) fn check_request(asked: &Asked<'_>) -> Vec<u8> {
    let mut out = vec![0; 5];
    protobuf::message(&mut out, 1, |attributes| {
        peer(attributes, 1, Some(asked.source.ip()), asked.source.port());
        let (local, port) = asked.destination;
        peer(attributes, 2, local, port);
        protobuf::message(attributes, 4, |request| {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            protobuf::message(request, 1, |time| {
                protobuf::uint(time, 1, now.as_secs());
                protobuf::uint(time, 2, u64::from(now.subsec_nanos()));
            });
            protobuf::message(request, 2, |http| http_request(http, asked));
        });
    });
    let len = u32::try_from(out.len() - 5).unwrap_or(u32::MAX);
    out[1..5].copy_from_slice(&len.to_be_bytes());
    out
}

/// `AttributeContext.Peer` with only its `address` (a `SocketAddress`).
fn peer(out: &mut Vec<u8>, field: u32, ip: Option<IpAddr>, port: u16) {
    protobuf::message(out, field, |peer| {
        protobuf::message(peer, 1, |address| {
            protobuf::message(address, 1, |socket| {
                if let Some(ip) = ip {
                    protobuf::string(socket, 2, ip.to_string().as_bytes());
                }
                protobuf::uint(socket, 3, u64::from(port));
            });
        });
    });
}

/// `AttributeContext.HttpRequest`.
fn http_request(out: &mut Vec<u8>, asked: &Asked<'_>) {
    let head = asked.head;
    if let Some(id) = head.headers.get("x-request-id") {
        protobuf::string(out, 1, id.as_bytes());
    }
    protobuf::string(out, 2, head.method.as_str().as_bytes());
    let path = head.uri.path_and_query().map_or("/", |p| p.as_str());
    let host = head
        .headers
        .get(header::HOST)
        .map(HeaderValue::as_bytes)
        .or_else(|| head.uri.authority().map(|a| a.as_str().as_bytes()))
        .unwrap_or_default();
    let scheme: &[u8] = if asked.https { b"https" } else { b"http" };
    let every = asked.allowed.is_empty();
    let sent = |name: &str| every || asked.allowed.iter().any(|a| a == name);
    // Envoy's map, as its HTTP/2-shaped header map has it: pseudo-headers, no `host`.
    if every {
        for (name, value) in [
            (":authority", host),
            (":method", head.method.as_str().as_bytes()),
            (":path", path.as_bytes()),
            (":scheme", scheme),
        ] {
            map_entry(out, 3, name.as_bytes(), value);
        }
    }
    let mut joined = Vec::new();
    for name in head.headers.keys() {
        if *name == header::HOST || !sent(name.as_str()) {
            continue;
        }
        // Repeated headers joined as HTTP allows (cookies with `; `, RFC 9113 §8.2.3).
        let separator: &[u8] = if *name == header::COOKIE { b"; " } else { b"," };
        joined.clear();
        for (i, value) in head.headers.get_all(name).iter().enumerate() {
            if i > 0 {
                joined.extend_from_slice(separator);
            }
            joined.extend_from_slice(value.as_bytes());
        }
        map_entry(out, 3, name.as_str().as_bytes(), &joined);
    }
    protobuf::string(out, 4, path.as_bytes());
    protobuf::string(out, 5, host);
    protobuf::string(out, 6, scheme);
    // int64: -1 when unknown, as the field says (ten bytes, two's complement).
    let size = asked
        .size
        .map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
    protobuf::uint(out, 9, size as u64);
    let protocol: &[u8] = match head.version {
        Version::HTTP_10 => b"HTTP/1.0",
        Version::HTTP_2 => b"HTTP/2",
        _ => b"HTTP/1.1",
    };
    protobuf::string(out, 10, protocol);
    match asked.body {
        Some(body) if std::str::from_utf8(body).is_ok() => protobuf::bytes(out, 11, body),
        // A `string` must be UTF-8 (receivers refuse the message otherwise): other bytes go in
        // `raw_body`, as Envoy's `pack_as_bytes` sends them.
        Some(body) => protobuf::bytes(out, 12, body),
        None => {}
    }
}

/// One entry of a `map<string, string>`.
fn map_entry(out: &mut Vec<u8>, field: u32, key: &[u8], value: &[u8]) {
    protobuf::message(out, field, |entry| {
        protobuf::string(entry, 1, key);
        protobuf::string(entry, 2, value);
    });
}

/// How a header the auth server sends is put in (`HeaderValueOption`: the deprecated
/// `append`, when set, decides; else `append_action`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// `APPEND_IF_EXISTS_OR_ADD`, and `append: true`.
    Append,
    /// `ADD_IF_ABSENT`.
    AddIfAbsent,
    /// `OVERWRITE_IF_EXISTS_OR_ADD`, `append: false`, and an action Envoy does not know.
    Overwrite,
    /// `OVERWRITE_IF_EXISTS`.
    OverwriteIfExists,
}

/// A header the auth server asks for.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Mutation {
    pub(crate) name: HeaderName,
    pub(crate) value: HeaderValue,
    pub(crate) action: Action,
}

impl Mutation {
    pub(crate) fn apply(&self, headers: &mut HeaderMap) {
        let present = headers.contains_key(&self.name);
        match self.action {
            Action::Append => {
                headers.append(self.name.clone(), self.value.clone());
            }
            Action::AddIfAbsent if !present => {
                headers.insert(self.name.clone(), self.value.clone());
            }
            Action::Overwrite => {
                headers.insert(self.name.clone(), self.value.clone());
            }
            Action::OverwriteIfExists if present => {
                headers.insert(self.name.clone(), self.value.clone());
            }
            Action::AddIfAbsent | Action::OverwriteIfExists => {}
        }
    }
}

/// What the auth server decided.
#[derive(Debug, PartialEq)]
pub(crate) enum Decision {
    Allow(Box<Allowed>),
    /// The client gets this answer. `error`: the auth server said it failed
    /// (`error_response`) rather than that the request may not pass.
    Deny {
        status: StatusCode,
        headers: Vec<Mutation>,
        body: Bytes,
        error: bool,
    },
}

/// An `OkHttpResponse`: what changes before the request goes on.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Allowed {
    pub(crate) request_headers: Vec<Mutation>,
    pub(crate) remove: Vec<HeaderName>,
    pub(crate) query_set: Vec<(String, String)>,
    pub(crate) query_remove: Vec<String>,
    /// Onto the answer the client gets.
    pub(crate) response_headers: Vec<Mutation>,
}

impl Allowed {
    /// The changes to the request: headers (never Host, pseudo-headers or framing), then the
    /// query.
    pub(crate) fn apply(&self, head: &mut Parts) {
        for name in &self.remove {
            if !GatewayAuth::never_copied(name) {
                head.headers.remove(name);
            }
        }
        for mutation in &self.request_headers {
            if !GatewayAuth::never_copied(&mutation.name) {
                mutation.apply(&mut head.headers);
            }
        }
        if self.query_set.is_empty() && self.query_remove.is_empty() {
            return;
        }
        match with_query(&head.uri, &self.query_set, &self.query_remove) {
            Some(uri) => head.uri = uri,
            None => tracing::warn!("the auth server's query parameters make no valid target; the query is left as it was"),
        }
    }
}

/// `uri` with the parameters named in `remove` taken out and those of `set` given their value
/// (the first of a name replaced and the others dropped, or added at the end).
fn with_query(uri: &Uri, set: &[(String, String)], remove: &[String]) -> Option<Uri> {
    let mut pairs: Vec<(String, Option<String>)> = Vec::new();
    for pair in uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (key, value) = match pair.split_once('=') {
            Some((key, value)) => (key, Some(value.to_owned())),
            None => (pair, None),
        };
        pairs.push((key.to_owned(), value));
    }
    let decoded = |key: &str| percent_decoded(key);
    pairs.retain(|(key, _)| !remove.iter().any(|r| *r == decoded(key)));
    for (key, value) in set {
        let value = Some(query_escaped(value));
        match pairs.iter().position(|(k, _)| decoded(k) == *key) {
            Some(first) => {
                pairs[first].1 = value;
                let mut i = 0;
                pairs.retain(|(k, _)| {
                    i += 1;
                    i - 1 == first || decoded(k) != *key
                });
            }
            None => pairs.push((query_escaped(key), value)),
        }
    }
    let mut target = uri.path().to_owned();
    for (i, (key, value)) in pairs.iter().enumerate() {
        target.push(if i == 0 { '?' } else { '&' });
        target.push_str(key);
        if let Some(value) = value {
            target.push('=');
            target.push_str(value);
        }
    }
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(target.parse().ok()?);
    Uri::from_parts(parts).ok()
}

/// A query component as written: every byte but unreserved ones and `!$'()*+,;:@/?`
/// percent-encoded (so `&`, `=`, `#` and spaces cannot change the query's shape).
fn query_escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~!$'()*+,;:@/?".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads a `CheckResponse`.
pub(crate) fn check_response(message: &[u8]) -> Result<Decision, Malformed> {
    let mut code: i32 = 0;
    // The `http_response` oneof: the last one written counts.
    let mut answer: Option<(u32, &[u8])> = None;
    for field in Fields::of(message) {
        match field? {
            (1, Value::Bytes(status)) => {
                for field in Fields::of(status) {
                    if let (1, Value::Varint(n)) = field? {
                        code = n as i64 as i32;
                    }
                }
            }
            (number @ (2 | 3 | 5), Value::Bytes(bytes)) => answer = Some((number, bytes)),
            _ => {}
        }
    }
    if code == 0 {
        return Ok(Decision::Allow(Box::new(match answer {
            Some((3, ok)) => allowed(ok)?,
            _ => Allowed::default(),
        })));
    }
    let (error, fields) = match answer {
        Some((5, bytes)) => (true, bytes),
        Some((2, bytes)) => (false, bytes),
        _ => (false, &[][..]),
    };
    let mut status = None;
    let mut headers = Vec::new();
    let mut body = Bytes::new();
    for field in Fields::of(fields) {
        match field? {
            (1, Value::Bytes(http_status)) => {
                for field in Fields::of(http_status) {
                    if let (1, Value::Varint(n)) = field? {
                        status = Some(n);
                    }
                }
            }
            (2, Value::Bytes(option)) => headers.extend(header_option(option)?),
            (3, Value::Bytes(text)) => body = Bytes::copy_from_slice(text),
            _ => {}
        }
    }
    let status = match status.filter(|n| *n != 0) {
        None if error => StatusCode::INTERNAL_SERVER_ERROR,
        None => StatusCode::FORBIDDEN,
        Some(n) => u16::try_from(n)
            .ok()
            .filter(|n| (200..=599).contains(n))
            .and_then(|n| StatusCode::from_u16(n).ok())
            .ok_or(Malformed("a denied status that is no HTTP status"))?,
    };
    Ok(Decision::Deny {
        status,
        headers,
        body,
        error,
    })
}

/// An `OkHttpResponse`.
fn allowed(message: &[u8]) -> Result<Allowed, Malformed> {
    let mut allowed = Allowed::default();
    for field in Fields::of(message) {
        match field? {
            (2, Value::Bytes(option)) => allowed.request_headers.extend(header_option(option)?),
            (5, Value::Bytes(name)) => match HeaderName::from_bytes(name) {
                Ok(name) => allowed.remove.push(name),
                Err(_) => {
                    tracing::debug!(name = %String::from_utf8_lossy(name), "the auth server removes a header that cannot exist; ignored")
                }
            },
            (6, Value::Bytes(option)) => allowed.response_headers.extend(header_option(option)?),
            (7, Value::Bytes(parameter)) => {
                let (mut key, mut value) = (String::new(), String::new());
                for field in Fields::of(parameter) {
                    match field? {
                        (1, Value::Bytes(k)) => key = String::from_utf8_lossy(k).into_owned(),
                        (2, Value::Bytes(v)) => value = String::from_utf8_lossy(v).into_owned(),
                        _ => {}
                    }
                }
                if !key.is_empty() {
                    allowed.query_set.push((key, value));
                }
            }
            (8, Value::Bytes(key)) => allowed
                .query_remove
                .push(String::from_utf8_lossy(key).into_owned()),
            _ => {}
        }
    }
    Ok(allowed)
}

/// A `HeaderValueOption`; `None`: a name or value HTTP cannot carry (left out, logged).
fn header_option(message: &[u8]) -> Result<Option<Mutation>, Malformed> {
    let (mut key, mut value, mut raw): (&[u8], &[u8], &[u8]) = (b"", b"", b"");
    let mut append: Option<bool> = None;
    let mut action = 0;
    for field in Fields::of(message) {
        match field? {
            (1, Value::Bytes(header)) => {
                for field in Fields::of(header) {
                    match field? {
                        (1, Value::Bytes(k)) => key = k,
                        (2, Value::Bytes(v)) => value = v,
                        (3, Value::Bytes(r)) => raw = r,
                        _ => {}
                    }
                }
            }
            (2, Value::Bytes(bool_value)) => {
                append = Some(false);
                for field in Fields::of(bool_value) {
                    if let (1, Value::Varint(n)) = field? {
                        append = Some(n != 0);
                    }
                }
            }
            (3, Value::Varint(n)) => action = n,
            _ => {}
        }
    }
    let action = match (append, action) {
        (Some(true), _) | (None, 0) => Action::Append,
        (None, 1) => Action::AddIfAbsent,
        (None, 3) => Action::OverwriteIfExists,
        _ => Action::Overwrite,
    };
    let value = if raw.is_empty() { value } else { raw };
    match (HeaderName::from_bytes(key), HeaderValue::from_bytes(value)) {
        (Ok(name), Ok(value)) => Ok(Some(Mutation {
            name,
            value,
            action,
        })),
        _ => {
            tracing::warn!(name = %String::from_utf8_lossy(key), "the auth server sent a header HTTP cannot carry; left out");
            Ok(None)
        }
    }
}

/// The one message of a unary gRPC answer's body (RFC-less gRPC framing: a flag byte, a
/// 32-bit length, the message), or why not.
pub(crate) fn unframed(body: &[u8]) -> Result<&[u8], &'static str> {
    let Some((prefix, message)) = body.split_first_chunk::<5>() else {
        return Err("no message");
    };
    if prefix[0] != 0 {
        // Nothing was offered in grpc-accept-encoding, so nothing may be compressed.
        return Err("a compressed message, though none was accepted");
    }
    let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
    if message.len() != len {
        return Err("a message whose length is not the body's");
    }
    Ok(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;

    fn asked_head() -> Parts {
        Request::post("/pay?x=1")
            .header("host", "shop.test")
            .header("x-user", "ann")
            .header("cookie", "a=1")
            .header("cookie", "b=2")
            .header("accept", "*/*")
            .body(())
            .unwrap()
            .into_parts()
            .0
    }

    /// The `HttpRequest` fields of a framed `CheckRequest`, by number (a map's entries as
    /// key=value text).
    fn http_fields(framed: &[u8]) -> Vec<(u32, String)> {
        let message = unframed(framed).unwrap();
        let dig = |bytes: &[u8], number: u32| -> Vec<u8> {
            Fields::of(bytes)
                .filter_map(|f| match f.unwrap() {
                    (n, Value::Bytes(b)) if n == number => Some(b.to_vec()),
                    _ => None,
                })
                .next()
                .unwrap()
        };
        let http = dig(&dig(&dig(message, 1), 4), 2);
        Fields::of(&http)
            .map(|f| match f.unwrap() {
                (3, Value::Bytes(entry)) => {
                    let parts: Vec<String> = Fields::of(entry)
                        .map(|f| match f.unwrap() {
                            (_, Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
                            other => panic!("{other:?}"),
                        })
                        .collect();
                    (3, parts.join("="))
                }
                (n, Value::Bytes(b)) => (n, String::from_utf8_lossy(b).into_owned()),
                (n, Value::Varint(v)) => (n, (v as i64).to_string()),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_check_request_carries_the_request_as_envoy_describes_it() {
        let head = asked_head();
        let asked = Asked {
            head: &head,
            allowed: &[],
            source: "192.0.2.7:4242".parse().unwrap(),
            destination: (None, 80),
            https: false,
            body: Some(b"amount=5"),
            size: Some(8),
        };
        let fields = http_fields(&check_request(&asked));
        let text = |n: u32| -> Vec<&str> {
            let found = fields.iter().filter(|(f, _)| *f == n);
            found.map(|(_, v)| v.as_str()).collect()
        };
        assert_eq!(text(2), ["POST"]);
        assert_eq!(text(4), ["/pay?x=1"]);
        assert_eq!(text(5), ["shop.test"]);
        assert_eq!(text(6), ["http"]);
        assert_eq!(text(9), ["8"]);
        assert_eq!(text(10), ["HTTP/1.1"]);
        assert_eq!(text(11), ["amount=5"]);
        assert_eq!(
            text(3),
            [
                ":authority=shop.test",
                ":method=POST",
                ":path=/pay?x=1",
                ":scheme=http",
                "x-user=ann",
                "cookie=a=1; b=2",
                "accept=*/*",
            ]
        );
        // With a list: only those; a body that is not UTF-8 goes as raw_body; size unknown.
        let allowed = [HeaderName::from_static("x-user")];
        let asked = Asked {
            allowed: &allowed,
            body: Some(b"\xff\x00"),
            size: None,
            ..asked
        };
        let fields = http_fields(&check_request(&asked));
        let headers: Vec<_> = fields.iter().filter(|(f, _)| *f == 3).collect();
        assert_eq!(headers, [&(3, "x-user=ann".to_owned())]);
        assert!(fields.iter().any(|(f, v)| *f == 12 && v == "\u{fffd}\0"));
        assert!(fields.iter().any(|(f, v)| *f == 9 && v == "-1"));
    }

    fn option(key: &str, value: &str, append: Option<bool>, action: Option<u64>) -> Vec<u8> {
        let mut out = Vec::new();
        protobuf::message(&mut out, 1, |h| {
            protobuf::string(h, 1, key.as_bytes());
            protobuf::string(h, 2, value.as_bytes());
        });
        if let Some(append) = append {
            protobuf::message(&mut out, 2, |b| protobuf::uint(b, 1, u64::from(append)));
        }
        if let Some(action) = action {
            protobuf::uint(&mut out, 3, action);
        }
        out
    }

    #[test]
    fn an_ok_answer_changes_the_request_as_envoy_does() {
        let mut message = Vec::new();
        protobuf::message(&mut message, 1, |s| protobuf::uint(s, 1, 0));
        protobuf::message(&mut message, 3, |ok| {
            for (key, value, append, action) in [
                ("x-user", "bob", Some(false), None),
                ("x-tag", "two", Some(true), None),
                ("x-new", "1", None, None),
                ("x-tag", "never", None, Some(1)),
                ("x-absent", "never", None, Some(3)),
                ("host", "evil.test", Some(false), None),
                ("content-length", "0", Some(false), None),
                ("bad header", "x", None, None),
            ] {
                protobuf::bytes(ok, 2, &option(key, value, append, action));
            }
            protobuf::string(ok, 5, b"x-secret");
            protobuf::string(ok, 5, b"host");
            protobuf::bytes(ok, 6, &option("x-said", "ok", None, None));
            protobuf::message(ok, 7, |q| {
                protobuf::string(q, 1, b"tenant");
                protobuf::string(q, 2, b"a b&c");
            });
            protobuf::string(ok, 8, b"drop");
        });
        let Decision::Allow(allowed) = check_response(&message).unwrap() else {
            panic!("not allowed");
        };
        assert_eq!(allowed.response_headers.len(), 1);
        let mut head = Request::get("/p?drop=1&keep=2&tenant=x&tenant=y")
            .header("host", "shop.test")
            .header("x-user", "forged")
            .header("x-tag", "one")
            .header("x-secret", "s")
            .header("content-length", "5")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        allowed.apply(&mut head);
        let all = |name: &str| -> Vec<&str> {
            let values = head.headers.get_all(name).iter();
            values.map(|v| v.to_str().unwrap()).collect()
        };
        assert_eq!(all("x-user"), ["bob"]);
        assert_eq!(all("x-tag"), ["one", "two"]);
        assert_eq!(all("x-new"), ["1"]);
        assert!(all("x-absent").is_empty());
        assert!(all("x-secret").is_empty());
        assert_eq!(all("host"), ["shop.test"]);
        assert_eq!(all("content-length"), ["5"]);
        assert_eq!(head.uri, "/p?keep=2&tenant=a%20b%26c");
    }

    #[test]
    fn a_denial_carries_its_status_headers_and_body_and_defaults_to_403() {
        let mut message = Vec::new();
        protobuf::message(&mut message, 1, |s| protobuf::uint(s, 1, 7));
        protobuf::message(&mut message, 2, |denied| {
            protobuf::message(denied, 1, |s| protobuf::uint(s, 1, 401));
            protobuf::bytes(denied, 2, &option("www-authenticate", "Bearer", None, None));
            protobuf::string(denied, 3, b"who are you?");
        });
        let Decision::Deny {
            status,
            headers,
            body,
            error,
        } = check_response(&message).unwrap()
        else {
            panic!("allowed");
        };
        assert_eq!(
            (status.as_u16(), &body[..], error),
            (401, &b"who are you?"[..], false)
        );
        assert_eq!(headers[0].name, "www-authenticate");
        // A bare non-OK status: 403; an error_response without a status: 500.
        let mut bare = Vec::new();
        protobuf::message(&mut bare, 1, |s| protobuf::uint(s, 1, 16));
        let decision = check_response(&bare).unwrap();
        assert!(matches!(decision, Decision::Deny { status, .. } if status == 403));
        protobuf::message(&mut bare, 5, |e| protobuf::string(e, 3, b"down"));
        let decision = check_response(&bare).unwrap();
        assert!(matches!(decision, Decision::Deny { status, error: true, .. } if status == 500));
        // No status at all is OK (proto3's default), as Envoy reads it.
        assert!(matches!(check_response(b"").unwrap(), Decision::Allow(_)));
        // A status that is no HTTP status is the auth server's error.
        let mut odd = Vec::new();
        protobuf::message(&mut odd, 1, |s| protobuf::uint(s, 1, 7));
        protobuf::message(&mut odd, 2, |d| {
            protobuf::message(d, 1, |s| protobuf::uint(s, 1, 99))
        });
        assert!(check_response(&odd).is_err());
    }

    #[test]
    fn framing_is_checked() {
        assert_eq!(unframed(b"\0\0\0\0\x02hi"), Ok(&b"hi"[..]));
        assert!(unframed(b"\x01\0\0\0\x02hi").is_err());
        assert!(unframed(b"\0\0\0\0\x03hi").is_err());
        assert!(unframed(b"\0\0\0").is_err());
    }
}
