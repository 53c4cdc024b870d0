//! The access log's line format: ingress-nginx's `log-format-upstream` (nginx `log_format`
//! syntax, `$variable` and `${variable}`), parsed once per configuration into segments the proxy
//! fills per request.
//!
//! ```text
//!  ConfigMap log-format-upstream ─parse─▶ LogFormat { segments, escape, wants }
//!     unknown $variable ─▶ diagnostic naming it; ingress-nginx's upstreaminfo format is used
//!  proxy, per request: segments × the request's record ─▶ one line (escaped per `escape`)
//! ```
//! `wants` tells the proxy what to keep from a request beyond what every line costs anyway
//! (request headers by name, response headers, the request's length), so a format without them
//! costs nothing for them.
//!
//! TCP services log one line per connection in `log-format-stream` (nginx's stream module
//! variables: `StreamVariable`), parsed by the same rules into a `StreamLogFormat`.

use http::HeaderName;
use serde::Serialize;

pub use crate::settings::{LOG_STREAM, UPSTREAMINFO};

/// How values are escaped in a line (nginx's `log_format … escape=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Escape {
    /// `"`, `\` and bytes outside printable ASCII as `\xHH`.
    #[default]
    Default,
    /// JSON string escapes (`log-format-escape-json`).
    Json,
    /// Nothing escaped (`log-format-escape-none`).
    None,
}

/// A per-request value a line can hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Variable {
    /// The client's address (after `use-forwarded-headers` / `enable-real-ip`).
    RemoteAddr,
    RemotePort,
    /// The user name of a Basic `Authorization` header.
    RemoteUser,
    /// The address a PROXY protocol header gave (empty without one).
    ProxyProtocolAddr,
    TimeLocal,
    TimeIso8601,
    /// Seconds since the epoch with milliseconds, when the line is written.
    Msec,
    /// `METHOD URI PROTOCOL` as the client sent it.
    Request,
    RequestMethod,
    /// Path and query as the client sent them.
    RequestUri,
    /// The path after normalisation and rewrite, as sent upstream.
    Uri,
    /// The query string (`$args`, `$query_string`).
    Args,
    /// One query parameter (`$arg_NAME`).
    Arg(String),
    /// `?` when there is a query string.
    IsArgs,
    ServerProtocol,
    Scheme,
    /// The request's host, lowercased, without port.
    Host,
    /// The server (Ingress host) the request matched; `_` for none.
    ServerName,
    ServerPort,
    Status,
    BodyBytesSent,
    /// Body and (estimated) head bytes sent.
    BytesSent,
    /// Request line, headers and body bytes received.
    RequestLength,
    /// Seconds from the first byte of the request to the end of the response, ms resolution.
    RequestTime,
    /// The connection's serial number.
    Connection,
    /// Requests served on this connection so far, this one included.
    ConnectionRequests,
    Pid,
    Hostname,
    /// A request header (`$http_NAME`: `_` for `-`, lowercase).
    RequestHeader(HeaderName),
    /// A response header (`$sent_http_NAME`).
    ResponseHeader(HeaderName),
    /// A request cookie (`$cookie_NAME`).
    Cookie(String),
    /// Every endpoint tried, `, `-separated, as nginx's `$upstream_addr`.
    UpstreamAddr,
    UpstreamStatus,
    UpstreamResponseTime,
    UpstreamResponseLength,
    UpstreamConnectTime,
    UpstreamHeaderTime,
    /// ingress-nginx's upstream name, `NAMESPACE-SERVICE-PORT`.
    ProxyUpstreamName,
    /// The canary upstream's name (empty: no canary).
    ProxyAlternativeUpstreamName,
    Namespace,
    IngressName,
    ServiceName,
    ServicePort,
    /// The Ingress path the request matched.
    LocationPath,
    /// The request ID sent upstream (the client's `X-Request-ID`, else a generated one).
    ReqId,
    /// The client's `X-Forwarded-For` with the client address appended (`, `), or the
    /// address alone.
    ProxyAddXForwardedFor,
    /// `TLSv1.2`, `TLSv1.3` (empty on plain HTTP).
    SslProtocol,
    /// The cipher suite by its OpenSSL name, as nginx writes it (empty on plain HTTP).
    SslCipher,
    /// `r` when the TLS session was resumed, else `.` (empty on plain HTTP).
    SslSessionReused,
}

/// Literal text or a variable (a request's `Variable`, or a TCP connection's `StreamVariable`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment<V = Variable> {
    Literal(String),
    Variable(V),
}

/// A TCP service connection's value (nginx's stream module variables).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamVariable {
    /// The client (the PROXY protocol's source when a trusted load balancer sent one).
    RemoteAddr,
    RemotePort,
    /// The address a PROXY protocol header gave (empty without one).
    ProxyProtocolAddr,
    /// The listener's address and port.
    ServerAddr,
    ServerPort,
    TimeLocal,
    TimeIso8601,
    Msec,
    /// `TCP` or `UDP`.
    Protocol,
    /// 200 spliced, 400 no valid PROXY header, 502 no endpoint reached.
    Status,
    /// Bytes to the client.
    BytesSent,
    /// Bytes from the client.
    BytesReceived,
    /// Seconds the connection lasted, ms resolution.
    SessionTime,
    /// Every endpoint tried, `, `-separated.
    UpstreamAddr,
    /// Bytes to the upstream.
    UpstreamBytesSent,
    /// Bytes from the upstream.
    UpstreamBytesReceived,
    /// Seconds until the upstream connection was made, ms resolution.
    UpstreamConnectTime,
    Connection,
    Pid,
    Hostname,
}

/// A parsed `log-format-stream`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamLogFormat {
    pub text: String,
    pub segments: Vec<Segment<StreamVariable>>,
    pub escape: Escape,
}

impl Serialize for StreamLogFormat {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl StreamLogFormat {
    /// Parses nginx stream `log_format` text. `Err` names the first variable Sluice does not
    /// know for a TCP connection.
    pub fn parse(text: &str, escape: Escape) -> Result<StreamLogFormat, String> {
        let segments = parse_segments(text, stream_variable).map_err(|bad| match bad {
            BadFormat::Unknown(name) => format!(
                "${name}: not a variable of a TCP connection Sluice knows (README: TCP \
                 services lists them); ingress-nginx's default log-format-stream is used"
            ),
            BadFormat::Unclosed => format!("${{ without a closing }} in {text:?}"),
        })?;
        Ok(StreamLogFormat {
            text: text.to_owned(),
            segments,
            escape,
        })
    }

    /// The TCP services' log format of these settings: `None` when `disable-access-log` or
    /// `disable-stream-access-log`; a format that does not parse is `Err` with the reason, and
    /// the default is used.
    pub fn from_settings(
        settings: &crate::settings::Settings,
    ) -> (Option<StreamLogFormat>, Option<String>) {
        if settings.disable_access_log || settings.disable_stream_access_log {
            return (None, None);
        }
        let escape = escape_of(settings);
        match StreamLogFormat::parse(&settings.log_format_stream, escape) {
            Ok(format) => (Some(format), None),
            Err(why) => (
                Some(StreamLogFormat::parse(LOG_STREAM, escape).expect("log_stream parses")),
                Some(format!("data.log-format-stream: {why}")),
            ),
        }
    }
}

fn stream_variable(name: &str) -> Option<StreamVariable> {
    use StreamVariable::*;
    Some(match name {
        "remote_addr" | "realip_remote_addr" | "binary_remote_addr" => RemoteAddr,
        "remote_port" | "realip_remote_port" => RemotePort,
        "proxy_protocol_addr" => ProxyProtocolAddr,
        "server_addr" => ServerAddr,
        "server_port" => ServerPort,
        "time_local" => TimeLocal,
        "time_iso8601" => TimeIso8601,
        "msec" => Msec,
        "protocol" => Protocol,
        "status" => Status,
        "bytes_sent" => BytesSent,
        "bytes_received" => BytesReceived,
        "session_time" => SessionTime,
        "upstream_addr" => UpstreamAddr,
        "upstream_bytes_sent" => UpstreamBytesSent,
        "upstream_bytes_received" => UpstreamBytesReceived,
        "upstream_connect_time" => UpstreamConnectTime,
        "connection" => Connection,
        "pid" => Pid,
        "hostname" => Hostname,
        _ => return None,
    })
}

/// What a request must keep for its line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Wants {
    pub request_headers: Vec<HeaderName>,
    pub response_headers: Vec<HeaderName>,
    pub request_length: bool,
    /// `$uri`: the path as sent upstream.
    pub uri: bool,
    /// Any `$upstream_*`: each attempt's address, status and times.
    pub upstream: bool,
    pub cookies: bool,
}

/// A parsed `log-format-upstream`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogFormat {
    pub text: String,
    pub segments: Vec<Segment>,
    pub escape: Escape,
    pub wants: Wants,
}

impl Serialize for LogFormat {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl Default for LogFormat {
    fn default() -> LogFormat {
        LogFormat::parse(UPSTREAMINFO, Escape::Default).expect("upstreaminfo parses")
    }
}

impl LogFormat {
    /// Parses nginx `log_format` text. `Err` names the first variable Sluice does not know.
    pub fn parse(text: &str, escape: Escape) -> Result<LogFormat, String> {
        let segments = parse_segments(text, variable).map_err(|bad| match bad {
            BadFormat::Unknown(name) => format!(
                "${name}: not a variable Sluice knows (README: Access log lists them); \
                 ingress-nginx's upstreaminfo format is used"
            ),
            BadFormat::Unclosed => format!("${{ without a closing }} in {text:?}"),
        })?;
        let wants = wants_of(&segments);
        Ok(LogFormat {
            text: text.to_owned(),
            segments,
            escape,
            wants,
        })
    }
}

/// Why `log_format` text does not parse.
enum BadFormat {
    /// A `$name` the lookup does not know (the name without `$`).
    Unknown(String),
    /// `${` without `}`.
    Unclosed,
}

/// nginx `log_format` text as literals and the variables `lookup` knows.
fn parse_segments<V>(
    text: &str,
    lookup: fn(&str) -> Option<V>,
) -> Result<Vec<Segment<V>>, BadFormat> {
    let mut segments = Vec::new();
    let mut literal = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        literal.push_str(&rest[..at]);
        rest = &rest[at + 1..];
        let (name, after) = if let Some(braced) = rest.strip_prefix('{') {
            let end = braced.find('}').ok_or(BadFormat::Unclosed)?;
            (&braced[..end], &braced[end + 1..])
        } else {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            (&rest[..end], &rest[end..])
        };
        if name.is_empty() {
            // nginx keeps a `$` that starts no name as it is.
            literal.push('$');
            continue;
        }
        rest = after;
        let variable = lookup(name).ok_or_else(|| BadFormat::Unknown(name.to_owned()))?;
        if !literal.is_empty() {
            segments.push(Segment::Literal(std::mem::take(&mut literal)));
        }
        segments.push(Segment::Variable(variable));
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        segments.push(Segment::Literal(literal));
    }
    Ok(segments)
}

/// A key made from the request before it goes upstream (`upstream-hash-by`): literals and the
/// nginx variables a request has by then (client, method, target, host, headers, cookies, query
/// parameters). Anything else (response, timing, upstream variables) is refused with its name.
pub fn parse_request_key(text: &str) -> Result<Vec<Segment>, String> {
    parse_request_segments(text, false)
}

/// A header value made per request (a snippet's `proxy_set_header X-Host $host`): the
/// variables of [`parse_request_key`] and `$request_id` / `$req_id`, the request's ID.
pub fn parse_header_template(text: &str) -> Result<Vec<Segment>, String> {
    parse_request_segments(text, true)
}

fn parse_request_segments(text: &str, request_id: bool) -> Result<Vec<Segment>, String> {
    let segments = parse_segments(text, variable).map_err(|bad| match bad {
        BadFormat::Unknown(name) => format!("unknown variable `${name}`"),
        BadFormat::Unclosed => "`${` without `}`".to_owned(),
    })?;
    // The variables in the order written, with their names, to name a refused one as written.
    let named = segments.iter().filter_map(|s| match s {
        Segment::Variable(v) => Some(v),
        Segment::Literal(_) => None,
    });
    for (variable, name) in named.zip(variable_names(text)) {
        use Variable::*;
        let known_before_upstream = matches!(
            variable,
            RemoteAddr
                | RemotePort
                | RemoteUser
                | RequestMethod
                | RequestUri
                | Uri
                | Args
                | Arg(_)
                | Scheme
                | Host
                | ServerName
                | RequestHeader(_)
                | Cookie(_)
        ) || (request_id && matches!(variable, ReqId));
        if !known_before_upstream {
            return Err(format!(
                "`${name}` is not known before the request goes upstream; use the client, \
                 method, target, host, headers, cookies or query parameters"
            ));
        }
    }
    Ok(segments)
}

/// The names of the variables in nginx `log_format` text, in order (as `parse_segments` reads
/// them).
fn variable_names(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || loop {
        let at = rest.find('$')?;
        rest = &rest[at + 1..];
        let (name, after) = match rest.strip_prefix('{') {
            Some(braced) => {
                let end = braced.find('}')?;
                (&braced[..end], &braced[end + 1..])
            }
            None => {
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                (&rest[..end], &rest[end..])
            }
        };
        if name.is_empty() {
            continue;
        }
        rest = after;
        return Some(name);
    })
}

/// `log-format-escape-json` / `-none` (they apply to both formats, as in ingress-nginx).
fn escape_of(settings: &crate::settings::Settings) -> Escape {
    if settings.log_format_escape_json {
        Escape::Json
    } else if settings.log_format_escape_none {
        Escape::None
    } else {
        Escape::Default
    }
}

fn wants_of(segments: &[Segment]) -> Wants {
    let mut wants = Wants::default();
    for segment in segments {
        let Segment::Variable(variable) = segment else {
            continue;
        };
        match variable {
            Variable::RequestHeader(name) if !wants.request_headers.contains(name) => {
                wants.request_headers.push(name.clone())
            }
            Variable::ResponseHeader(name) if !wants.response_headers.contains(name) => {
                wants.response_headers.push(name.clone())
            }
            Variable::RequestLength => wants.request_length = true,
            Variable::Uri => wants.uri = true,
            Variable::RemoteUser
                if !wants.request_headers.contains(&http::header::AUTHORIZATION) =>
            {
                wants.request_headers.push(http::header::AUTHORIZATION)
            }
            Variable::UpstreamAddr
            | Variable::UpstreamStatus
            | Variable::UpstreamResponseTime
            | Variable::UpstreamResponseLength
            | Variable::UpstreamConnectTime
            | Variable::UpstreamHeaderTime => wants.upstream = true,
            Variable::Cookie(_) => wants.cookies = true,
            Variable::ProxyAddXForwardedFor
                if !wants.request_headers.contains(&X_FORWARDED_FOR) =>
            {
                wants.request_headers.push(X_FORWARDED_FOR)
            }
            _ => {}
        }
    }
    if wants.cookies && !wants.request_headers.contains(&http::header::COOKIE) {
        wants.request_headers.push(http::header::COOKIE);
    }
    wants
}

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// `$http_x_forwarded_for` names the header `x-forwarded-for`.
fn header_name(suffix: &str) -> Option<HeaderName> {
    HeaderName::from_bytes(suffix.replace('_', "-").to_ascii_lowercase().as_bytes()).ok()
}

fn variable(name: &str) -> Option<Variable> {
    use Variable::*;
    if let Some(header) = name.strip_prefix("http_") {
        return header_name(header).map(RequestHeader);
    }
    if let Some(header) = name.strip_prefix("sent_http_") {
        return header_name(header).map(ResponseHeader);
    }
    if let Some(cookie) = name.strip_prefix("cookie_") {
        return Some(Cookie(cookie.to_owned()));
    }
    if let Some(arg) = name.strip_prefix("arg_") {
        return Some(Arg(arg.to_owned()));
    }
    Some(match name {
        // `the_real_ip` is ingress-nginx's own (the PROXY protocol's address or the peer's):
        // Sluice's client address is already that.
        "remote_addr" | "realip_remote_addr" | "binary_remote_addr" | "the_real_ip" => RemoteAddr,
        "remote_port" | "realip_remote_port" => RemotePort,
        "remote_user" => RemoteUser,
        "proxy_add_x_forwarded_for" => ProxyAddXForwardedFor,
        "ssl_protocol" => SslProtocol,
        "ssl_cipher" => SslCipher,
        "ssl_session_reused" => SslSessionReused,
        "proxy_protocol_addr" => ProxyProtocolAddr,
        "time_local" => TimeLocal,
        "time_iso8601" => TimeIso8601,
        "msec" => Msec,
        "request" => Request,
        "request_method" => RequestMethod,
        "request_uri" => RequestUri,
        "uri" | "document_uri" => Uri,
        "args" | "query_string" => Args,
        "is_args" => IsArgs,
        "server_protocol" => ServerProtocol,
        "scheme" | "pass_access_scheme" => Scheme,
        "host" | "best_http_host" => Host,
        "server_name" => ServerName,
        "server_port" | "pass_server_port" => ServerPort,
        "status" => Status,
        "body_bytes_sent" => BodyBytesSent,
        "bytes_sent" => BytesSent,
        "request_length" => RequestLength,
        "request_time" => RequestTime,
        "connection" => Connection,
        "connection_requests" => ConnectionRequests,
        "pid" => Pid,
        "hostname" => Hostname,
        "upstream_addr" => UpstreamAddr,
        "upstream_status" => UpstreamStatus,
        "upstream_response_time" => UpstreamResponseTime,
        "upstream_response_length" | "upstream_bytes_received" => UpstreamResponseLength,
        "upstream_connect_time" => UpstreamConnectTime,
        "upstream_header_time" => UpstreamHeaderTime,
        "proxy_upstream_name" => ProxyUpstreamName,
        "proxy_alternative_upstream_name" => ProxyAlternativeUpstreamName,
        "namespace" => Namespace,
        "ingress_name" => IngressName,
        "service_name" => ServiceName,
        "service_port" => ServicePort,
        "location_path" => LocationPath,
        "req_id" | "request_id" => ReqId,
        "content_length" => RequestHeader(http::header::CONTENT_LENGTH),
        "content_type" => RequestHeader(http::header::CONTENT_TYPE),
        "http_host" => RequestHeader(http::header::HOST),
        _ => return None,
    })
}

/// The access log of one configuration: `None` in `Compiled` when `disable-access-log` or
/// `disable-http-access-log` is set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AccessLog {
    pub format: LogFormat,
    /// `skip-access-log-urls`: request targets (path and query as sent) not logged.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skip_urls: Vec<String>,
}

impl AccessLog {
    /// From the settings; a format that does not parse is `Err` with the reason, and the
    /// default format is used.
    pub fn from_settings(
        settings: &crate::settings::Settings,
    ) -> (Option<AccessLog>, Option<String>) {
        if settings.disable_access_log || settings.disable_http_access_log {
            return (None, None);
        }
        let escape = escape_of(settings);
        let (format, problem) = match LogFormat::parse(&settings.log_format_upstream, escape) {
            Ok(format) => (format, None),
            Err(why) => (
                LogFormat::parse(UPSTREAMINFO, escape).expect("upstreaminfo parses"),
                Some(format!("data.log-format-upstream: {why}")),
            ),
        };
        let log = AccessLog {
            format,
            skip_urls: settings.skip_access_log_urls.clone(),
        };
        (Some(log), problem)
    }

    /// Whether a request for `target` (path and query as sent) is logged.
    pub fn logs(&self, target: &str) -> bool {
        !self.skip_urls.iter().any(|url| url == target)
    }
}

/// Appends `value` to `out`, escaped for `escape` (nginx's rules for `default` and `json`).
pub fn escape_into(out: &mut Vec<u8>, value: &[u8], escape: Escape) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    match escape {
        Escape::None => out.extend_from_slice(value),
        Escape::Default => {
            for &byte in value {
                if byte == b'"' || byte == b'\\' || !(0x20..0x7f).contains(&byte) {
                    out.extend_from_slice(&[
                        b'\\',
                        b'x',
                        HEX[usize::from(byte >> 4)],
                        HEX[usize::from(byte & 15)],
                    ]);
                } else {
                    out.push(byte);
                }
            }
        }
        Escape::Json => {
            for &byte in value {
                match byte {
                    b'"' => out.extend_from_slice(b"\\\""),
                    b'\\' => out.extend_from_slice(b"\\\\"),
                    b'\n' => out.extend_from_slice(b"\\n"),
                    b'\r' => out.extend_from_slice(b"\\r"),
                    b'\t' => out.extend_from_slice(b"\\t"),
                    0x08 => out.extend_from_slice(b"\\b"),
                    0x0c => out.extend_from_slice(b"\\f"),
                    0..=0x1f => out.extend_from_slice(&[
                        b'\\',
                        b'u',
                        b'0',
                        b'0',
                        HEX[usize::from(byte >> 4)],
                        HEX[usize::from(byte & 15)],
                    ]),
                    _ => out.push(byte),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_keys_take_only_what_a_request_has_before_the_upstream() {
        let key = parse_request_key("$http_x_user:${arg_id}").unwrap();
        assert_eq!(
            key,
            [
                Segment::Variable(Variable::RequestHeader(HeaderName::from_static("x-user"))),
                Segment::Literal(":".to_owned()),
                Segment::Variable(Variable::Arg("id".to_owned())),
            ]
        );
        let refused = parse_request_key("$host${upstream_addr}").unwrap_err();
        assert!(
            refused.starts_with("`$upstream_addr` is not known"),
            "{refused}"
        );
        assert!(parse_request_key("$nope").unwrap_err().contains("$nope"));
    }

    #[test]
    fn upstreaminfo_parses_into_its_variables_and_literals() {
        let format = LogFormat::default();
        assert_eq!(
            format.segments[..4],
            [
                Segment::Variable(Variable::RemoteAddr),
                Segment::Literal(" - ".into()),
                Segment::Variable(Variable::RemoteUser),
                Segment::Literal(" [".into()),
            ]
        );
        assert_eq!(
            format.wants.request_headers,
            [
                http::header::AUTHORIZATION,
                http::header::REFERER,
                http::header::USER_AGENT
            ]
        );
        assert!(format.wants.request_length && format.wants.upstream);
        assert_eq!(
            format.segments.last(),
            Some(&Segment::Variable(Variable::ReqId))
        );
    }

    #[test]
    fn braces_headers_and_a_lone_dollar() {
        let format = LogFormat::parse(
            "${status}x $http_x_forwarded_for $ $sent_http_content_type",
            Escape::Json,
        )
        .unwrap();
        assert_eq!(
            format.segments,
            [
                Segment::Variable(Variable::Status),
                Segment::Literal("x ".into()),
                Segment::Variable(Variable::RequestHeader(HeaderName::from_static(
                    "x-forwarded-for"
                ))),
                Segment::Literal(" $ ".into()),
                Segment::Variable(Variable::ResponseHeader(http::header::CONTENT_TYPE)),
            ]
        );
        assert!(!format.wants.request_length && !format.wants.upstream);
    }

    #[test]
    fn the_stream_format_knows_the_stream_variables_only() {
        let format = StreamLogFormat::parse(LOG_STREAM, Escape::Default).unwrap();
        use StreamVariable::*;
        let variables: Vec<StreamVariable> = format
            .segments
            .iter()
            .filter_map(|s| match s {
                Segment::Variable(v) => Some(*v),
                Segment::Literal(_) => None,
            })
            .collect();
        assert_eq!(
            variables,
            [
                RemoteAddr,
                TimeLocal,
                Protocol,
                Status,
                BytesSent,
                BytesReceived,
                SessionTime
            ]
        );
        // A request's variable is not a connection's.
        let error = StreamLogFormat::parse("$remote_addr $request", Escape::Default).unwrap_err();
        assert!(
            error.starts_with("$request: not a variable of a TCP connection"),
            "{error}"
        );
        let mut settings = crate::settings::Settings {
            log_format_stream: "$status $http_host".into(),
            ..crate::settings::Settings::default()
        };
        let (format, problem) = StreamLogFormat::from_settings(&settings);
        assert_eq!(format.unwrap().text, LOG_STREAM);
        assert!(problem
            .unwrap()
            .starts_with("data.log-format-stream: $http_host"));
        settings.disable_access_log = true;
        assert_eq!(StreamLogFormat::from_settings(&settings), (None, None));
        settings.disable_access_log = false;
        settings.disable_stream_access_log = true;
        assert_eq!(StreamLogFormat::from_settings(&settings), (None, None));
        // The HTTP log has its own switch.
        settings.disable_stream_access_log = false;
        settings.disable_http_access_log = true;
        assert_eq!(AccessLog::from_settings(&settings), (None, None));
        assert!(StreamLogFormat::from_settings(&settings).0.is_some());
    }

    #[test]
    fn an_unknown_variable_is_named() {
        let error = LogFormat::parse("$remote_addr $geoip_country", Escape::Default).unwrap_err();
        assert!(
            error.starts_with("$geoip_country: not a variable"),
            "{error}"
        );
        assert!(LogFormat::parse("${status", Escape::Default).is_err());
    }

    #[test]
    fn escaping_follows_nginx() {
        let escaped = |value: &[u8], escape| {
            let mut out = Vec::new();
            escape_into(&mut out, value, escape);
            String::from_utf8(out).unwrap()
        };
        let hostile = b"a\"b\\c\nd\x1b\xc3\xa9";
        assert_eq!(
            escaped(hostile, Escape::Default),
            r#"a\x22b\x5Cc\x0Ad\x1B\xC3\xA9"#
        );
        assert_eq!(
            escaped(hostile, Escape::Json),
            "a\\\"b\\\\c\\nd\\u001B\u{e9}"
        );
        assert_eq!(escaped(b"a\"b", Escape::None), "a\"b");
    }
}
