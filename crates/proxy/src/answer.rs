//! The answers the proxy makes itself, at the edge: an error's `(status, source, text)` from
//! `error` becomes a plain-text response, or on a gRPC route a gRPC error.
//!
//! ```text
//!  ProxyError ─classify / text / grpc_status─▶ error_response(grpc?) ─▶ Response<ResponseBody>
//! ```

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};

use crate::error::ProxyError;
use crate::response_body::ResponseBody;

/// gRPC's status and message: in the head of a trailers-only response.
static GRPC_STATUS: http::HeaderName = http::HeaderName::from_static("grpc-status");
static GRPC_MESSAGE: http::HeaderName = http::HeaderName::from_static("grpc-message");

/// A short plain-text answer, or on a gRPC route (`grpc`: the route's protocol, or a request
/// with `content-type: application/grpc`) a gRPC error, which gRPC clients read where they
/// would not read an HTTP status: a trailers-only response (HTTP 200, `content-type:
/// application/grpc`, `grpc-status`, `grpc-message`), as gRPC servers answer errors.
pub(crate) fn error_response(error: &ProxyError, grpc: bool) -> Response<ResponseBody> {
    if grpc {
        let (code, message) = error.grpc_status();
        let mut response = Response::new(ResponseBody::empty());
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc"),
        );
        headers.insert(&GRPC_STATUS, HeaderValue::from(u16::from(code)));
        headers.insert(&GRPC_MESSAGE, HeaderValue::from_static(message));
        return response;
    }
    text_response(error.status(), Bytes::from_static(error.text().as_bytes()))
}

/// A `text/plain` response the proxy writes itself.
pub(crate) fn text_response(status: StatusCode, text: Bytes) -> Response<ResponseBody> {
    let mut response = Response::new(ResponseBody::full(text));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;

    #[test]
    fn errors_answer_with_their_status_or_as_grpc_errors() {
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let cases = [
            (ProxyError::NoRoute, 404, 12),
            (ProxyError::Forbidden, 403, 7),
            (ProxyError::BodyTooLarge { limit: 1 }, 413, 8),
            (ProxyError::NoEndpoints, 503, 14),
            (ProxyError::ReadTimeout { addr }, 504, 4),
            (ProxyError::Http2Refused { addr }, 502, 14),
        ];
        for (error, status, code) in cases {
            let plain = error_response(&error, false);
            assert_eq!(plain.status().as_u16(), status, "{error}");
            assert_eq!(plain.headers()["content-type"], "text/plain; charset=utf-8");
            let grpc = error_response(&error, true);
            assert_eq!(grpc.status(), StatusCode::OK, "{error}");
            assert_eq!(grpc.headers()["content-type"], "application/grpc");
            assert_eq!(grpc.headers()["grpc-status"], code.to_string(), "{error}");
            assert!(grpc.headers().contains_key("grpc-message"));
        }
    }
}
