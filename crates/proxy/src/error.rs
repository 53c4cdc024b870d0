//! Everything that can go wrong with one proxied request, and the one place that turns it
//! into a status, whose fault it is and the words of the answer (STYLE.md #7). Audit the
//! status codes here. Plain data: the response is made at the edge (`answer`).

use std::io;
use std::net::SocketAddr;

use http::StatusCode;
use wire::h1::FramingError;

use crate::body::{BodyTimeout, BodyTooLarge, BoxError};
use crate::buffer::{BufferError, BufferFileError};
use crate::client::ClientError;

/// Whose fault an error is (STYLE.md #13): the client's request, the upstream's answer (or
/// silence), the proxy's own state, or the configuration (an Ingress whose route is refused).
/// Decided where the error is made, never guessed later; a label on the error metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum ErrorSource {
    Client,
    Upstream,
    Proxy,
    Config,
}

/// Why a request was answered by the proxy instead of an upstream.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProxyError {
    #[error("no configuration has been published yet")]
    NotReady,
    #[error("no Ingress rule matches this host and path")]
    NoRoute,
    #[error("the request is malformed: {0}")]
    BadRequest(&'static str),
    #[error("the request target is refused")]
    BadTarget(#[source] model::TargetError),
    /// The client's path made a rewrite target that leaves the template's prefix or root.
    #[error("rewrite-target refused the path")]
    RewriteRefused(#[source] model::RewriteError),
    /// A rewritten target the request line cannot carry: the model encodes every part, so
    /// this is the proxy's own bug, answered rather than sent somewhere else.
    #[error("rewrite-target made a target that is not a valid request target")]
    RewriteInvalid,
    #[error("CONNECT and TRACE are not served")]
    MethodNotAllowed,
    #[error("the client address is not allowed on this route")]
    Forbidden,
    /// The ConfigMap's `block-cidrs`, `block-user-agents` or `block-referers` name the
    /// request (before any route is matched).
    #[error("the ConfigMap's block lists name this client")]
    Blocked,
    /// The auth server (`auth-url`) answered 401.
    #[error("the auth server refused the request (401)")]
    AuthRequired,
    /// The auth server could not be asked, or answered neither 2xx, 401 nor 403 (nginx's
    /// `auth_request`: 500).
    #[error("the auth server could not decide")]
    AuthFailed,
    /// The auth server answered 403.
    #[error("the auth server refused the request (403)")]
    AuthForbidden,
    /// `limit-rps` / `limit-rpm` / `limit-connections` (`limit`) refused the request; the
    /// status is the ConfigMap's `limit-req-status-code` / `limit-conn-status-code`.
    #[error("over the route's {limit}")]
    Limited {
        status: StatusCode,
        limit: &'static str,
    },
    /// `auth-tls-verify-client: on` and the client sent no certificate (nginx's 496).
    #[error("no client certificate was sent")]
    ClientCertMissing,
    /// The client's certificate did not verify (nginx's 495).
    #[error("the client certificate did not verify")]
    ClientCertInvalid,
    /// The handshake asked for no client certificate for this request's host, which wants
    /// one (nginx's 421: the server name negotiated differs from the host).
    #[error("the TLS handshake was for another host than this request's")]
    Misdirected,
    /// `auth-tls-match-cn` did not match the certificate's subject.
    #[error("the client certificate's subject is not allowed (auth-tls-match-cn)")]
    ClientCertUnauthorized,
    #[error("the route is refused by its configuration: {0}")]
    RouteRefused(String),
    #[error("the backend has no ready endpoints")]
    NoEndpoints,
    /// Gateway API: the share of a backendRef that cannot be used (missing Service, wrong
    /// kind, no ReferenceGrant): the spec's 500.
    #[error("the route's backend reference is invalid")]
    InvalidBackend,
    /// Gateway API: the listener's pre-routing filters cannot all run (a missing auth
    /// Service, a filter Sluice does not implement): its requests are refused, never served
    /// without them.
    #[error("the listener's pre-routing filters cannot run")]
    ListenerFiltersUnusable,
    #[error("request body larger than client-max-body-size ({limit} bytes)")]
    BodyTooLarge { limit: u64 },
    #[error("the client sent no request body bytes within client-body-timeout")]
    ClientBodyTimeout,
    #[error("reading the request body from the client failed")]
    ClientBody(#[source] BoxError),
    /// The temporary file of a buffered body: the proxy's disk, not the client's request.
    #[error("buffering the request body failed")]
    BodyBuffer(#[source] BufferFileError),
    #[error("connecting to {addr} took longer than proxy-connect-timeout")]
    ConnectTimeout { addr: SocketAddr },
    #[error("connecting to {addr} failed")]
    Connect {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    /// EMFILE/ENFILE on the socket for an upstream connection: the proxy's own shortage.
    #[error("no file descriptor left for a connection to {addr}")]
    OutOfFileDescriptors {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    /// The TLS handshake with an HTTPS route's endpoint failed (its certificate did not
    /// verify, it asked for a client certificate the route has not, no common version…).
    #[error("TLS with {addr} failed")]
    UpstreamTls {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    /// The route's TLS settings could not be made into a client configuration.
    #[error("the route's upstream TLS settings cannot be used")]
    UpstreamTlsSetup(#[source] crate::upstream_tls::TlsSetupError),
    #[error("{addr} sent no response head within proxy-read-timeout")]
    ReadTimeout { addr: SocketAddr },
    #[error("{addr} accepted no request bytes within proxy-send-timeout")]
    SendTimeout { addr: SocketAddr },
    #[error("the request head frames its body ambiguously")]
    RequestFraming(#[source] FramingError),
    /// A request head over `large-client-header-buffers`.
    #[error("the request head is larger than large-client-header-buffers allows")]
    RequestHeadTooLarge,
    /// An HTTP/2 upstream connection or stream failed (reset, GOAWAY, protocol error).
    #[error("HTTP/2 request to {addr} failed")]
    Http2 {
        addr: SocketAddr,
        #[source]
        source: crate::h2_client::Error,
    },
    /// The endpoint refused the stream (or went away before it) every time it was sent.
    #[error("{addr} did not take the HTTP/2 stream (refused or going away)")]
    Http2Refused { addr: SocketAddr },
    /// gRPC's `grpc-timeout` passed before the upstream answered.
    #[error("the gRPC deadline (grpc-timeout) passed before the upstream answered")]
    GrpcDeadline,
    /// Gateway API's `timeouts.request` passed before the upstream's response head.
    #[error("the route's request timeout passed before the upstream answered")]
    RequestTimeout,
    #[error("request to {addr} failed")]
    Upstream {
        addr: SocketAddr,
        #[source]
        source: ClientError,
    },
}

impl ProxyError {
    /// A body that could not be read whole (`limit`: the largest allowed), as the client's
    /// answer says it.
    pub(crate) fn body_unread(error: BufferError, limit: u64) -> ProxyError {
        match error {
            BufferError::File(error) => ProxyError::BodyBuffer(error),
            BufferError::Body(error) if error.is::<BodyTooLarge>() => {
                ProxyError::BodyTooLarge { limit }
            }
            BufferError::Body(error) if error.is::<BodyTimeout>() => ProxyError::ClientBodyTimeout,
            BufferError::Body(error) => ProxyError::ClientBody(error),
        }
    }

    /// The status the client gets, and whose fault it is. The only mapping from errors to
    /// statuses in the proxy.
    pub(crate) fn classify(&self) -> (StatusCode, ErrorSource) {
        use ErrorSource::{Client, Config, Proxy, Upstream};
        match self {
            ProxyError::NotReady => (StatusCode::SERVICE_UNAVAILABLE, Proxy),
            // A local, passing shortage: the proxy's fault, not the endpoint's.
            ProxyError::OutOfFileDescriptors { .. } => (StatusCode::SERVICE_UNAVAILABLE, Proxy),
            ProxyError::NoRoute => (StatusCode::NOT_FOUND, Client),
            // nginx answers 500 when it cannot write a client body to its temporary file.
            ProxyError::BodyBuffer(_) => (StatusCode::INTERNAL_SERVER_ERROR, Proxy),
            ProxyError::BadRequest(_)
            | ProxyError::BadTarget(_)
            | ProxyError::RewriteRefused(_)
            | ProxyError::ClientBody(_) => (StatusCode::BAD_REQUEST, Client),
            ProxyError::RewriteInvalid => (StatusCode::INTERNAL_SERVER_ERROR, Proxy),
            ProxyError::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, Client),
            ProxyError::Forbidden | ProxyError::Blocked => (StatusCode::FORBIDDEN, Client),
            ProxyError::AuthRequired => (StatusCode::UNAUTHORIZED, Client),
            ProxyError::AuthForbidden => (StatusCode::FORBIDDEN, Client),
            ProxyError::AuthFailed => (StatusCode::INTERNAL_SERVER_ERROR, Upstream),
            ProxyError::Limited { status, .. } => (*status, Client),
            // nginx's 496 and 495 are answered as 400.
            ProxyError::ClientCertMissing | ProxyError::ClientCertInvalid => {
                (StatusCode::BAD_REQUEST, Client)
            }
            ProxyError::ClientCertUnauthorized => (StatusCode::FORBIDDEN, Client),
            ProxyError::Misdirected => (StatusCode::MISDIRECTED_REQUEST, Client),
            // ingress-nginx's "location denied": an annotation that cannot be read safely.
            ProxyError::RouteRefused(_) => (StatusCode::SERVICE_UNAVAILABLE, Config),
            // nginx: 501 to a transfer coding it does not know, 400 to the rest.
            ProxyError::RequestFraming(FramingError::UnknownTransferEncoding) => {
                (StatusCode::NOT_IMPLEMENTED, Client)
            }
            ProxyError::RequestFraming(_) => (StatusCode::BAD_REQUEST, Client),
            ProxyError::RequestHeadTooLarge => {
                (StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, Client)
            }
            ProxyError::BodyTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, Client),
            ProxyError::ClientBodyTimeout => (StatusCode::REQUEST_TIMEOUT, Client),
            // The Service has no ready pod: the backend's state, not ours.
            ProxyError::NoEndpoints => (StatusCode::SERVICE_UNAVAILABLE, Upstream),
            // Gateway API: a backendRef that cannot be used is the route's fault.
            ProxyError::InvalidBackend => (StatusCode::INTERNAL_SERVER_ERROR, Config),
            ProxyError::ListenerFiltersUnusable => (StatusCode::INTERNAL_SERVER_ERROR, Config),
            ProxyError::ConnectTimeout { .. }
            | ProxyError::ReadTimeout { .. }
            | ProxyError::SendTimeout { .. }
            | ProxyError::GrpcDeadline
            | ProxyError::RequestTimeout => (StatusCode::GATEWAY_TIMEOUT, Upstream),
            ProxyError::Connect { .. }
            | ProxyError::Upstream { .. }
            | ProxyError::Http2 { .. }
            | ProxyError::Http2Refused { .. }
            | ProxyError::UpstreamTls { .. } => (StatusCode::BAD_GATEWAY, Upstream),
            // nginx answers 502 when it cannot set up SSL towards the upstream.
            ProxyError::UpstreamTlsSetup(_) => (StatusCode::BAD_GATEWAY, Config),
        }
    }

    pub(crate) fn status(&self) -> StatusCode {
        self.classify().0
    }

    /// The short plain-text answer (`answer::error_response` makes it a response). Static
    /// text: an error storm should not cost allocations.
    pub(crate) fn text(&self) -> &'static str {
        match self {
            ProxyError::NotReady => "503 Service Unavailable: not configured yet\n",
            ProxyError::NoRoute => "404 Not Found: no route for this host and path\n",
            ProxyError::BadRequest(_) | ProxyError::BadTarget(_) => "400 Bad Request\n",
            ProxyError::RewriteRefused(_) => "400 Bad Request: the rewritten path is refused\n",
            ProxyError::RewriteInvalid => {
                "500 Internal Server Error: the rewritten target is invalid\n"
            }
            ProxyError::ClientBody(_) => "400 Bad Request: the request body failed\n",
            ProxyError::BodyBuffer(_) => {
                "500 Internal Server Error: the request body could not be buffered\n"
            }
            ProxyError::MethodNotAllowed => "405 Method Not Allowed\n",
            ProxyError::Forbidden | ProxyError::Blocked => "403 Forbidden\n",
            // nginx's text for 401, which ingress-nginx's users see.
            ProxyError::AuthRequired => "401 Authorization Required\n",
            ProxyError::AuthForbidden => "403 Forbidden\n",
            ProxyError::AuthFailed => {
                "500 Internal Server Error: the auth server could not decide\n"
            }
            ProxyError::Limited { status, .. } => nginx_text(*status),
            // nginx's own texts (its 496 and 495 pages), and ingress-nginx's `return 403`'s.
            ProxyError::ClientCertMissing => "400 No required SSL certificate was sent\n",
            ProxyError::ClientCertInvalid => "400 The SSL certificate error\n",
            ProxyError::ClientCertUnauthorized => {
                "403 Forbidden: client certificate unauthorized\n"
            }
            ProxyError::Misdirected => "421 Misdirected Request\n",
            ProxyError::RouteRefused(_) => {
                "503 Service Unavailable: this route is refused by its configuration\n"
            }
            ProxyError::NoEndpoints => "503 Service Unavailable: no endpoints for this service\n",
            ProxyError::InvalidBackend => {
                "500 Internal Server Error: the route's backend reference is invalid\n"
            }
            ProxyError::ListenerFiltersUnusable => {
                "500 Internal Server Error: the listener's filters cannot run\n"
            }
            ProxyError::OutOfFileDescriptors { .. } => {
                "503 Service Unavailable: the proxy is out of file descriptors\n"
            }
            ProxyError::BodyTooLarge { .. } => "413 Payload Too Large\n",
            ProxyError::RequestFraming(FramingError::UnknownTransferEncoding) => {
                "501 Not Implemented: unknown Transfer-Encoding\n"
            }
            ProxyError::RequestFraming(_) => "400 Bad Request: ambiguous message framing\n",
            ProxyError::RequestHeadTooLarge => "431 Request Header Fields Too Large\n",
            ProxyError::ClientBodyTimeout => "408 Request Timeout\n",
            ProxyError::ConnectTimeout { .. }
            | ProxyError::ReadTimeout { .. }
            | ProxyError::SendTimeout { .. }
            | ProxyError::GrpcDeadline
            | ProxyError::RequestTimeout => {
                "504 Gateway Timeout: upstream did not answer in time\n"
            }
            ProxyError::Connect { .. }
            | ProxyError::Upstream { .. }
            | ProxyError::Http2 { .. }
            | ProxyError::Http2Refused { .. }
            | ProxyError::UpstreamTls { .. }
            | ProxyError::UpstreamTlsSetup(_) => "502 Bad Gateway: upstream failed\n",
        }
    }

    /// The gRPC status code and message for this error: a trailers-only response (HTTP 200,
    /// `content-type: application/grpc`, `grpc-status`, `grpc-message`), as gRPC servers
    /// answer errors. Codes follow gRPC's HTTP-to-gRPC mapping (doc/http-grpc-status-mapping.md:
    /// 400 INTERNAL, 403 PERMISSION_DENIED, 404 UNIMPLEMENTED, 502/503/504 UNAVAILABLE), made
    /// finer where the proxy knows more: its timeouts are DEADLINE_EXCEEDED (4), its size
    /// limits RESOURCE_EXHAUSTED (8).
    pub(crate) fn grpc_status(&self) -> (u8, &'static str) {
        const INTERNAL: u8 = 13;
        const UNAVAILABLE: u8 = 14;
        match self {
            ProxyError::NotReady => (UNAVAILABLE, "the proxy is not configured yet"),
            ProxyError::NoRoute => (12, "no route for this host and path"),
            ProxyError::MethodNotAllowed => (12, "method not served"),
            ProxyError::BadRequest(_) | ProxyError::BadTarget(_) => (INTERNAL, "bad request"),
            ProxyError::RewriteRefused(_) => (INTERNAL, "the rewritten path is refused"),
            ProxyError::RewriteInvalid => (INTERNAL, "the rewritten target is invalid"),
            ProxyError::RequestFraming(_) => (INTERNAL, "ambiguous message framing"),
            ProxyError::RequestHeadTooLarge => (8, "the request head is too large"),
            ProxyError::ClientBody(_) => (INTERNAL, "the request body failed"),
            ProxyError::BodyBuffer(_) => (INTERNAL, "the request body could not be buffered"),
            ProxyError::Forbidden => (7, "the client address is not allowed"),
            ProxyError::Blocked => (7, "the client is blocked"),
            ProxyError::AuthRequired => (16, "authentication required"),
            ProxyError::AuthForbidden => (7, "the auth server refused the request"),
            ProxyError::AuthFailed => (13, "the auth server could not decide"),
            ProxyError::Limited { .. } => (8, "over the route's rate or connection limit"),
            ProxyError::ClientCertMissing => (16, "no required SSL certificate was sent"),
            ProxyError::ClientCertInvalid => (16, "the SSL certificate error"),
            ProxyError::ClientCertUnauthorized => (7, "client certificate unauthorized"),
            ProxyError::Misdirected => (14, "misdirected request"),
            ProxyError::RouteRefused(_) => {
                (UNAVAILABLE, "this route is refused by its configuration")
            }
            ProxyError::NoEndpoints => (UNAVAILABLE, "no endpoints for this service"),
            ProxyError::InvalidBackend => (INTERNAL, "the route's backend reference is invalid"),
            ProxyError::ListenerFiltersUnusable => {
                (INTERNAL, "the listener's pre-routing filters cannot run")
            }
            ProxyError::OutOfFileDescriptors { .. } => {
                (UNAVAILABLE, "the proxy is out of file descriptors")
            }
            ProxyError::BodyTooLarge { .. } => (8, "request body larger than proxy-body-size"),
            ProxyError::ClientBodyTimeout => {
                (4, "the client sent no body within client-body-timeout")
            }
            ProxyError::GrpcDeadline => (4, "deadline exceeded (grpc-timeout) at the proxy"),
            ProxyError::RequestTimeout => (4, "the route's request timeout passed"),
            ProxyError::ConnectTimeout { .. } => (
                4,
                "connecting upstream took longer than proxy-connect-timeout",
            ),
            ProxyError::ReadTimeout { .. } => {
                (4, "upstream sent no response within proxy-read-timeout")
            }
            ProxyError::SendTimeout { .. } => (
                4,
                "upstream took no request bytes within proxy-send-timeout",
            ),
            ProxyError::Connect { .. } => (UNAVAILABLE, "connecting upstream failed"),
            ProxyError::UpstreamTls { .. } => (UNAVAILABLE, "TLS with the upstream failed"),
            ProxyError::UpstreamTlsSetup(_) => (
                UNAVAILABLE,
                "the route's upstream TLS settings cannot be used",
            ),
            ProxyError::Upstream { .. } | ProxyError::Http2 { .. } => {
                (UNAVAILABLE, "upstream failed")
            }
            ProxyError::Http2Refused { .. } => (UNAVAILABLE, "upstream refused the stream"),
        }
    }

    /// Whether an HTTP/1 connection should close after this answer: after a malformed or
    /// refused request its state is suspect, and an unread body may follow (nginx closes too).
    pub(crate) fn closes_connection(&self) -> bool {
        let (status, source) = self.classify();
        // A browser asked for credentials answers on the same connection; nginx keeps the
        // connection after a limit's answer too (limit_req, limit_conn).
        let kept = matches!(
            self,
            ProxyError::AuthRequired | ProxyError::AuthForbidden | ProxyError::Limited { .. }
        );
        source == ErrorSource::Client && status != StatusCode::NOT_FOUND && !kept
    }
}

impl ErrorSource {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ErrorSource::Client => "client",
            ErrorSource::Upstream => "upstream",
            ErrorSource::Proxy => "proxy",
            ErrorSource::Config => "config",
        }
    }
}

/// nginx's text for a status it answers itself (its error pages' titles), for the limits'
/// configurable codes; a code nginx has no page for gets an empty body, as nginx sends.
fn nginx_text(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "400 Bad Request\n",
        401 => "401 Authorization Required\n",
        402 => "402 Payment Required\n",
        403 => "403 Forbidden\n",
        404 => "404 Not Found\n",
        405 => "405 Not Allowed\n",
        406 => "406 Not Acceptable\n",
        408 => "408 Request Time-out\n",
        409 => "409 Conflict\n",
        410 => "410 Gone\n",
        411 => "411 Length Required\n",
        412 => "412 Precondition Failed\n",
        413 => "413 Request Entity Too Large\n",
        414 => "414 Request-URI Too Large\n",
        415 => "415 Unsupported Media Type\n",
        416 => "416 Requested Range Not Satisfiable\n",
        421 => "421 Misdirected Request\n",
        429 => "429 Too Many Requests\n",
        500 => "500 Internal Server Error\n",
        501 => "501 Not Implemented\n",
        502 => "502 Bad Gateway\n",
        503 => "503 Service Temporarily Unavailable\n",
        504 => "504 Gateway Time-out\n",
        505 => "505 HTTP Version Not Supported\n",
        507 => "507 Insufficient Storage\n",
        _ => "",
    }
}

/// Formats an error with its sources, `a: b: c`, for logs.
pub(crate) struct Chain<'a>(pub(crate) &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(error) = source {
            write!(f, ": {error}")?;
            source = error.source();
        }
        Ok(())
    }
}

/// A request body that failed while being sent: too large, too slow, or broken by the client;
/// or, for a buffered one, its temporary file (the proxy's own failure).
pub(crate) fn client_body_error(source: BoxError) -> ProxyError {
    if source.is::<crate::body::BodyTimeout>() {
        return ProxyError::ClientBodyTimeout;
    }
    match source.downcast::<BufferFileError>() {
        Ok(file) => ProxyError::BodyBuffer(*file),
        Err(source) => ProxyError::ClientBody(source),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_the_design() {
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        use ErrorSource::{Client, Config, Proxy, Upstream};
        let cases = [
            (ProxyError::NotReady, 503, Proxy),
            (ProxyError::NoRoute, 404, Client),
            (ProxyError::BadRequest("two Host headers"), 400, Client),
            (
                ProxyError::BadTarget(model::TargetError::AboveRoot),
                400,
                Client,
            ),
            (ProxyError::MethodNotAllowed, 405, Client),
            (ProxyError::Forbidden, 403, Client),
            (ProxyError::Blocked, 403, Client),
            (ProxyError::ClientCertMissing, 400, Client),
            (ProxyError::ClientCertInvalid, 400, Client),
            (ProxyError::ClientCertUnauthorized, 403, Client),
            (ProxyError::Misdirected, 421, Client),
            (
                ProxyError::Limited {
                    status: StatusCode::TOO_MANY_REQUESTS,
                    limit: "limit-rps/limit-rpm",
                },
                429,
                Client,
            ),
            (
                ProxyError::RouteRefused("bad allow-list".into()),
                503,
                Config,
            ),
            (ProxyError::ClientBody("reset".into()), 400, Client),
            (ProxyError::ClientBodyTimeout, 408, Client),
            (
                ProxyError::BodyBuffer(BufferFileError(io::ErrorKind::StorageFull.into())),
                500,
                Proxy,
            ),
            (ProxyError::BodyTooLarge { limit: 1 }, 413, Client),
            (ProxyError::NoEndpoints, 503, Upstream),
            (ProxyError::InvalidBackend, 500, Config),
            (ProxyError::ListenerFiltersUnusable, 500, Config),
            (ProxyError::ConnectTimeout { addr }, 504, Upstream),
            (ProxyError::ReadTimeout { addr }, 504, Upstream),
            (ProxyError::SendTimeout { addr }, 504, Upstream),
            (
                ProxyError::RequestFraming(FramingError::LengthAndTransferEncoding),
                400,
                Client,
            ),
            (
                ProxyError::RequestFraming(FramingError::UnknownTransferEncoding),
                501,
                Client,
            ),
            (
                ProxyError::OutOfFileDescriptors {
                    addr,
                    source: io::Error::from_raw_os_error(24),
                },
                503,
                Proxy,
            ),
            (
                ProxyError::Connect {
                    addr,
                    source: io::ErrorKind::ConnectionRefused.into(),
                },
                502,
                Upstream,
            ),
        ];
        for (error, status, source) in cases {
            assert_eq!(error.status().as_u16(), status, "{error}");
            assert_eq!(error.classify().1, source, "{error}");
            assert!(error.text().starts_with(&status.to_string()), "{error}");
        }
    }

    #[test]
    fn grpc_codes_follow_the_grpc_mapping_made_finer() {
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let cases = [
            (ProxyError::NoRoute, 12),
            (ProxyError::Forbidden, 7),
            (ProxyError::BadRequest("x"), 13),
            (ProxyError::NoEndpoints, 14),
            (
                ProxyError::Connect {
                    addr,
                    source: io::ErrorKind::ConnectionRefused.into(),
                },
                14,
            ),
            (ProxyError::Http2Refused { addr }, 14),
            (ProxyError::ReadTimeout { addr }, 4),
            (ProxyError::GrpcDeadline, 4),
            (ProxyError::BodyTooLarge { limit: 1 }, 8),
        ];
        for (error, code) in cases {
            assert_eq!(error.grpc_status().0, code, "{error}");
        }
    }

    #[test]
    fn chains_show_the_cause() {
        let error = ProxyError::Connect {
            addr: "127.0.0.1:1".parse().unwrap(),
            source: io::Error::new(io::ErrorKind::ConnectionRefused, "refused"),
        };
        assert_eq!(
            Chain(&error).to_string(),
            "connecting to 127.0.0.1:1 failed: refused"
        );
    }

    #[test]
    fn nginx_texts() {
        assert_eq!(
            nginx_text(StatusCode::SERVICE_UNAVAILABLE),
            "503 Service Temporarily Unavailable\n"
        );
        assert_eq!(
            nginx_text(StatusCode::TOO_MANY_REQUESTS),
            "429 Too Many Requests\n"
        );
        assert_eq!(nginx_text(StatusCode::from_u16(499).unwrap()), "");
    }
}
