//! The response headers phase: after the route's header edits, the framing headers say what
//! the body is; HSTS's value.

use http::{header, HeaderValue, Method, Response, StatusCode};
use http_body::Body;

use model::response_rewrite::ResponseRewrite;

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

/// `proxy-redirect-*`, `proxy-cookie-*`: the upstream's `Location`, `Refresh` and
/// `Set-Cookie` values rewritten in place (each `Set-Cookie` on its own). A value that is not
/// text, or that the rewrite would make invalid, stays as it is.
pub(crate) fn rewrite(headers: &mut http::HeaderMap, rewrite: &ResponseRewrite) {
    if rewrite.redirect.is_some() {
        replace_each(headers, header::LOCATION, |v| rewrite.location(v));
        replace_each(headers, header::REFRESH, |v| rewrite.refresh(v));
    }
    if rewrite.cookie_path.is_some() || rewrite.cookie_domain.is_some() {
        replace_each(headers, header::SET_COOKIE, |v| rewrite.set_cookie(v));
    }
}

fn replace_each(
    headers: &mut http::HeaderMap,
    name: header::HeaderName,
    change: impl Fn(&str) -> Option<String>,
) {
    if let http::header::Entry::Occupied(mut entry) = headers.entry(name) {
        for value in entry.iter_mut() {
            let changed = value.to_str().ok().and_then(&change);
            if let Some(new) = changed.and_then(|t| HeaderValue::try_from(t).ok()) {
                *value = new;
            }
        }
    }
}
