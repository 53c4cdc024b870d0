//! CORS at the proxy (`model::cors` decides): a granted preflight is answered here, and a
//! granted request's answer gets the `Access-Control-*` headers, whoever made it.
//!
//! ```text
//!  route matched, not refused ─▶ policy.cors? ─▶ Cors::grant(Origin, OPTIONS?)
//!     preflight ─▶ 204 here (answer here phase) ──┐
//!     other     ─▶ access, redirects, upstream ───┴─▶ response headers phase: set the
//!                                                      Access-Control-* headers (replacing
//!                                                      the backend's), errors included
//! ```

use http::request::Parts;
use http::{header, HeaderMap, HeaderValue, Method, Response, StatusCode};
use model::cors::{AllowOrigin, Cors, CorsRules};

use crate::response_body::ResponseBody;

/// What a granted request's answer carries; borrowed from the route's policy.
pub(crate) struct CorsHeaders<'c> {
    cors: &'c Cors,
    /// `*`, or the request's `Origin` (a cheap clone: the head is edited later).
    origin: HeaderValue,
    pub(crate) preflight: bool,
    /// Gateway API's `*` methods and headers: what the preflight asked for, echoed.
    asked: Option<Box<Asked>>,
}

/// A preflight's `Access-Control-Request-Method` and `-Headers`.
struct Asked {
    method: Option<HeaderValue>,
    headers: Option<HeaderValue>,
}

impl<'c> CorsHeaders<'c> {
    /// `None`: the request gets no CORS headers (its Origin matched no entry).
    pub(crate) fn grant(cors: &'c Cors, head: &Parts) -> Option<CorsHeaders<'c>> {
        let asked_method = head.headers.get(header::ACCESS_CONTROL_REQUEST_METHOD);
        let grant = cors.grant(
            head.headers.get(header::ORIGIN),
            head.method == Method::OPTIONS,
            asked_method.is_some(),
        )?;
        let origin = match grant.origin {
            AllowOrigin::Any => HeaderValue::from_static("*"),
            AllowOrigin::Echo(origin) => origin.clone(),
        };
        let asked = (cors.rules == CorsRules::GatewayApi && grant.preflight).then(|| {
            Box::new(Asked {
                method: asked_method.cloned(),
                headers: head
                    .headers
                    .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
                    .cloned(),
            })
        });
        Some(CorsHeaders {
            cors,
            origin,
            preflight: grant.preflight,
            asked,
        })
    }

    /// ingress-nginx's `more_set_headers`: each replaces what the answer had under its name.
    pub(crate) fn apply(self, headers: &mut HeaderMap) {
        if self.cors.rules == CorsRules::GatewayApi {
            return self.apply_gateway(headers);
        }
        let cors = self.cors;
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, self.origin);
        if cors.allow_credentials {
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
        }
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            cors.allow_methods.clone(),
        );
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            cors.allow_headers.clone(),
        );
        if let Some(expose) = &cors.expose_headers {
            headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, expose.clone());
        }
        headers.insert(header::ACCESS_CONTROL_MAX_AGE, cors.max_age.clone());
    }
}

impl CorsHeaders<'_> {
    /// Gateway API's headers: the origin, credentials and exposed headers on every granted
    /// answer; methods, headers and max age on a preflight's, `*` echoing what it asked for,
    /// an empty list not sent.
    fn apply_gateway(self, headers: &mut HeaderMap) {
        let cors = self.cors;
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, self.origin);
        if cors.allow_credentials {
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
        }
        if let Some(expose) = &cors.expose_headers {
            headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, expose.clone());
        }
        let Some(asked) = self.asked else {
            return;
        };
        let list = |allowed: &HeaderValue, asked: Option<HeaderValue>| match asked {
            Some(asked) if allowed == "*" => Some(asked),
            _ => (!allowed.is_empty()).then(|| allowed.clone()),
        };
        if let Some(methods) = list(&cors.allow_methods, asked.method) {
            headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, methods);
        }
        if let Some(allowed) = list(&cors.allow_headers, asked.headers) {
            headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, allowed);
        }
        headers.insert(header::ACCESS_CONTROL_MAX_AGE, cors.max_age.clone());
    }
}

/// Under Gateway API's rules, an `OPTIONS` with an `Origin` and an
/// `Access-Control-Request-Method` is a preflight whether or not its origin is allowed: one not
/// granted is answered here too, with no CORS header.
pub(crate) fn refused_preflight(cors: &Cors, head: &Parts) -> bool {
    cors.rules == CorsRules::GatewayApi
        && head.method == Method::OPTIONS
        && head.headers.contains_key(header::ORIGIN)
        && head
            .headers
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
}

/// The preflight's answer: 204 with the `Content-Type` ingress-nginx's template writes (sic,
/// without `;`). No `Content-Length`: a 204 has none (RFC 9110).
pub(crate) fn preflight_response() -> Response<ResponseBody> {
    let mut response = Response::new(ResponseBody::empty());
    *response.status_mut() = StatusCode::NO_CONTENT;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain charset=UTF-8"),
    );
    response
}
