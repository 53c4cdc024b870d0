//! The errors phase's requests, as ingress-nginx makes them: what goes to an error backend
//! (`custom-http-errors`) and to a `default-backend` while a route's Service has no ready
//! endpoint. Only the request heads are made here; `forward` sends them.
//!
//! ```text
//!  answer with a listed code ─▶ ErrorRequest::to(backend) ─▶ the client's method, headers and
//!        query, path `/`, no body, plus X-Code, X-Format, X-Original-URI, X-Namespace,
//!        X-Ingress-Name, X-Service-Name, X-Service-Port, X-Request-ID (the one the request
//!        went upstream with: the client's, or the one Sluice made for it)
//!  route without a ready endpoint + default-backend ─▶ unavailable_fallback: the same request
//!        to the default backend, plus X-Code: 503 and the names (no X-Original-URI)
//! ```

use std::sync::Arc;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::request::Parts;
use http::{Method, Request, Uri};
use model::policy::{CustomErrors, ErrorBackend};
use model::{NamespacedName, Route, RouteSite};

/// The client's request head as it arrived, before the pipeline changed it.
pub(crate) struct OriginalHead {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    /// The `X-Request-ID` Sluice made for the request when it went upstream (the client sent
    /// none): the error request repeats it, as ingress-nginx sends `$req_id`, so the error
    /// backend's log and the access log name the same request.
    pub(crate) request_id: Option<HeaderValue>,
}

impl OriginalHead {
    pub(crate) fn of(head: &Parts) -> OriginalHead {
        OriginalHead {
            method: head.method.clone(),
            uri: head.uri.clone(),
            headers: head.headers.clone(),
            request_id: None,
        }
    }
}

/// One answer to replace.
pub(crate) struct ErrorRequest<'a> {
    pub(crate) errors: &'a CustomErrors,
    pub(crate) status: u16,
    /// The route that made or forwarded the answer (none: no rule matched).
    pub(crate) route: Option<&'a Route>,
    pub(crate) original: &'a OriginalHead,
}

impl ErrorRequest<'_> {
    /// The route and request head for `backend`: nginx's error location rewrites the path to
    /// `/` (the query stays), keeps the method and the client's headers, sends no body, and
    /// goes with the ConfigMap's settings rather than the route's.
    pub(crate) fn to(&self, backend: &ErrorBackend) -> (Route, Parts) {
        let original = self.original;
        let mut head = Request::new(()).into_parts().0;
        head.method = original.method.clone();
        head.headers = original.headers.clone();
        if !head.headers.contains_key(header::HOST) {
            // An HTTP/2 request names its host in `:authority`.
            if let Some(authority) = original.uri.authority() {
                if let Ok(host) = HeaderValue::from_str(authority.as_str()) {
                    head.headers.insert(header::HOST, host);
                }
            }
        }
        head.uri = match original.uri.query() {
            Some(query) => format!("/?{query}")
                .parse()
                .unwrap_or_else(|_| Uri::from_static("/")),
            None => Uri::from_static("/"),
        };
        for framing in [
            header::CONTENT_LENGTH,
            header::TRANSFER_ENCODING,
            header::EXPECT,
        ] {
            head.headers.remove(framing);
        }
        let headers = &mut head.headers;
        if let Some(id) = &original.request_id {
            headers.entry("x-request-id").or_insert_with(|| id.clone());
        }
        set(headers, "x-code", HeaderValue::from(self.status));
        copy_accept(headers);
        let request_uri = original.uri.path_and_query().map_or("/", |pq| pq.as_str());
        if let Ok(value) = HeaderValue::from_str(request_uri) {
            set(headers, "x-original-uri", value);
        }
        set_names(headers, self.route);
        let target = Route {
            ingress: self.route.map_or_else(
                || NamespacedName::new("", ""),
                |route| route.ingress.clone(),
            ),
            service: self
                .route
                .map_or_else(|| Arc::from(""), |route| route.service.clone()),
            backend: backend.backend.clone(),
            policy: self.errors.policy.clone(),
            site: self
                .route
                .map_or_else(RouteSite::default, |route| route.site.clone()),
            traffic: None,
            not_found: false,
        };
        (target, head)
    }
}

/// `default-backend`: while `route`'s Service has no ready endpoint and the default backend
/// has one, the route to send the request to instead, with ingress-nginx's headers added to
/// `head`. `None` (the common case, one check) otherwise.
pub(crate) fn unavailable_fallback(route: &Route, head: &mut Parts) -> Option<Route> {
    let fallback = route.policy.default_backend.as_ref()?;
    if route.backend.with_endpoints(|set| !set.ready.is_empty()) || !fallback.has_ready_endpoint() {
        return None;
    }
    let headers = &mut head.headers;
    set(headers, "x-code", HeaderValue::from_static("503"));
    copy_accept(headers);
    set_names(headers, Some(route));
    Some(Route {
        ingress: route.ingress.clone(),
        service: route.service.clone(),
        backend: fallback.backend.clone(),
        policy: route.policy.clone(),
        site: route.site.clone(),
        traffic: None,
        not_found: false,
    })
}

/// `X-Format`: the client's `Accept` (nginx sends no header for an empty value).
fn copy_accept(headers: &mut HeaderMap) {
    if let Some(accept) = headers.get(header::ACCEPT).cloned() {
        set(headers, "x-format", accept);
    } else {
        headers.remove("x-format");
    }
}

/// `X-Namespace`, `X-Ingress-Name`, `X-Service-Name`, `X-Service-Port`: the route's names,
/// none without a route (nginx's empty variables send no header). A client's own values are
/// replaced, never passed on.
fn set_names(headers: &mut HeaderMap, route: Option<&Route>) {
    let names = [
        ("x-namespace", route.map(|r| &*r.ingress.namespace)),
        ("x-ingress-name", route.map(|r| &*r.ingress.name)),
        ("x-service-name", route.map(|r| &*r.service)),
        ("x-service-port", route.map(|r| &*r.site.service_port)),
    ];
    for (name, value) in names {
        match value
            .filter(|v| !v.is_empty())
            .and_then(|v| HeaderValue::from_str(v).ok())
        {
            Some(value) => set(headers, name, value),
            None => {
                headers.remove(name);
            }
        }
    }
}

fn set(headers: &mut HeaderMap, name: &'static str, value: HeaderValue) {
    headers.insert(HeaderName::from_static(name), value);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn original(uri: &str, headers: &[(&str, &str)]) -> OriginalHead {
        let mut request = Request::post(uri);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        OriginalHead::of(&request.body(()).unwrap().into_parts().0)
    }

    #[test]
    fn the_error_request_is_the_client_s_to_slash_with_ingress_nginx_s_headers() {
        let errors = CustomErrors {
            codes: Box::new([503]),
            intercept_upstream: true,
            backends: Box::default(),
            policy: Arc::default(),
        };
        let route = Route {
            ingress: NamespacedName::new("shop", "web"),
            service: "web-svc".into(),
            backend: Arc::new(model::Backend::unresolved()),
            policy: Arc::default(),
            site: RouteSite {
                service_port: "http".into(),
                ..RouteSite::default()
            },
            traffic: None,
            not_found: false,
        };
        let original = original(
            "http://shop.example/a/b?x=1",
            &[
                ("accept", "text/html"),
                ("content-length", "5"),
                ("x-namespace", "forged"),
                ("x-request-id", "abc"),
            ],
        );
        let request = ErrorRequest {
            errors: &errors,
            status: 503,
            route: Some(&route),
            original: &original,
        };
        let backend = ErrorBackend {
            upstream_name: "upstream-default-backend".into(),
            backend: Arc::new(model::Backend::unresolved()),
        };
        let (target, head) = request.to(&backend);
        assert!(Arc::ptr_eq(&target.backend, &backend.backend));
        assert_eq!(head.method, Method::POST);
        assert_eq!(head.uri, "/?x=1");
        let h = &head.headers;
        let header = |name: &str| h.get(name).map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(header("host").as_deref(), Some("shop.example"));
        assert_eq!(header("x-code").as_deref(), Some("503"));
        assert_eq!(header("x-format").as_deref(), Some("text/html"));
        assert_eq!(header("x-original-uri").as_deref(), Some("/a/b?x=1"));
        assert_eq!(header("x-namespace").as_deref(), Some("shop"));
        assert_eq!(header("x-ingress-name").as_deref(), Some("web"));
        assert_eq!(header("x-service-name").as_deref(), Some("web-svc"));
        assert_eq!(header("x-service-port").as_deref(), Some("http"));
        assert_eq!(header("x-request-id").as_deref(), Some("abc"));
        assert_eq!(header("content-length"), None);

        // No route (no rule matched): no names, not even forged ones.
        let request = ErrorRequest {
            route: None,
            ..request
        };
        let (_, head) = request.to(&backend);
        assert!(head.headers.get("x-namespace").is_none());
        assert!(head.headers.get("x-ingress-name").is_none());
    }
}
