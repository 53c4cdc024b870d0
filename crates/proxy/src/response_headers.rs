//! The response headers phase: after the route's header edits, the framing headers say what
//! the body is; HSTS's value.

use http::{header, HeaderValue, Method, Response, StatusCode};
use http_body::Body;

use crate::response_body::ResponseBody;

/// After header edits: the response's framing headers say what its body is, whatever an
/// edit set. Every server (the inline one, hyper's, HTTP/2) frames from `Content-Length`
/// when there is one, and a wrong one would desync the client's connection. A HEAD, 204 or
/// 304 response's `Content-Length` describes no body here and stays as it is.
pub(crate) fn reframe(response: &mut Response<ResponseBody>, method: &Method) {
    let status = response.status();
    let bodiless = *method == Method::HEAD
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let length = response.body().size_hint().exact();
    let headers = response.headers_mut();
    headers.remove(header::TRANSFER_ENCODING);
    if bodiless {
        return;
    }
    match length {
        Some(length) => {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        }
        None => {
            headers.remove(header::CONTENT_LENGTH);
        }
    }
}

/// The `Strict-Transport-Security` value: the default one without an allocation.
pub(crate) fn hsts_value(value: &str) -> HeaderValue {
    const DEFAULT: &str = "max-age=31536000; includeSubDomains";
    if value == DEFAULT {
        HeaderValue::from_static(DEFAULT)
    } else {
        HeaderValue::from_str(value).unwrap_or_else(|_| HeaderValue::from_static(DEFAULT))
    }
}
