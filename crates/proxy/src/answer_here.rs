//! The "answer here" phase: requests the proxy answers without an upstream, in ingress-nginx's
//! order: `from-to-www-redirect` (before routing), then `app-root` (a request for `/`),
//! `permanent-redirect`/`temporal-redirect`, and the redirect to HTTPS (`ssl-redirect`,
//! `force-ssl-redirect`). CORS preflights are answered earlier, before the allow-lists, as
//! ingress-nginx answers them in its rewrite phase (`cors.rs`, called from `forward::route`).
//!
//! ```text
//!  Matched route ─▶ app-root? ─▶ 302 │ redirect? ─▶ its code │ plain HTTP to a TLS host (or
//!  forced), not forwarded as https by a trusted balancer, the route's path not under
//!  no-tls-redirect-locations ─▶ ssl-redirect's code ─▶ response
//! ```

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderValue, Response, StatusCode};
use model::Matched;

use crate::answer::text_response;
use crate::headers;
use crate::normalise::request_host;
use crate::response_body::ResponseBody;
use crate::worker::ConnCtx;

/// The redirect phase, in ingress-nginx's order: `app-root` (a request for `/`), then
/// `temporal-redirect`/`permanent-redirect`, then the redirect to HTTPS.
pub(crate) fn redirect_phase(
    conn: &ConnCtx,
    head: &Parts,
    settings: &model::Settings,
    matched: &Matched<'_>,
    routed_path: &str,
) -> Option<Response<ResponseBody>> {
    let policy = &matched.route.policy;
    if let (Some(root), "/") = (matched.app_root, routed_path) {
        let host = request_host(head).unwrap_or_default();
        let scheme = if conn.https { "https" } else { "http" };
        let location = format!("{scheme}://{host}{}", root.to_str().unwrap_or("/"));
        return Some(redirect_response(StatusCode::FOUND, &location));
    }
    if let Some(redirect) = &policy.redirect {
        let status = StatusCode::from_u16(redirect.code).unwrap_or(StatusCode::MOVED_PERMANENTLY);
        let mut response = redirect_body(status);
        response
            .headers_mut()
            .insert(header::LOCATION, redirect.location.clone());
        return Some(response);
    }
    if let Some(redirect) = &policy.gateway_redirect {
        // Gateway API: the Location from the listener (not the socket's port), host and path.
        let host = request_host(head).unwrap_or_default();
        let host = &host[..model::target::strip_port(host.as_bytes()).len()];
        let (path, query) = (head.uri.path(), head.uri.query());
        let location = redirect.location_from(conn.https, conn.declared_port, host, path, query);
        let status = StatusCode::from_u16(redirect.code).unwrap_or(StatusCode::FOUND);
        return Some(redirect_response(status, &location));
    }
    let ssl = &policy.ssl_redirect;
    if !conn.https
        && (ssl.force || (ssl.enabled && matched.tls))
        && !conn.behind_tls_balancer()
        && !forwarded_https(conn, head, settings)
        && !exempt_from_tls_redirect(&matched.route.site.path, settings)
    {
        // ingress-nginx's `$best_http_host`: a trusted load balancer's X-Forwarded-Host (its
        // first name) is the host the client asked for.
        let forwarded_host = conn
            .trusts_forwarded_headers(settings)
            .then(|| head.headers.get(&headers::X_FORWARDED_HOST)?.to_str().ok())
            .flatten()
            .and_then(|hosts| std::str::from_utf8(headers::first_entry(hosts.as_bytes())).ok())
            .filter(|host| !host.is_empty());
        let host = forwarded_host.unwrap_or_else(|| request_host(head).unwrap_or_default());
        // A prefix ending before an ASCII `:` or after `]`: a char boundary.
        let host = &host[..model::target::strip_port(host.as_bytes()).len()];
        let mut target = head.uri.path_and_query().map_or("/", |pq| pq.as_str());
        if !ssl.preserve_trailing_slash {
            // ingress-nginx drops a trailing `/` of the target (`/` itself becomes nothing).
            target = target.strip_suffix('/').unwrap_or(target);
        }
        let status = StatusCode::from_u16(ssl.code).unwrap_or(StatusCode::PERMANENT_REDIRECT);
        return Some(redirect_response(
            status,
            &format!("https://{host}{target}"),
        ));
    }
    None
}

/// `no-tls-redirect-locations`: a route whose path as written starts with one of them stays
/// on plain HTTP (ingress-nginx's `force_no_ssl_redirect`; by default the ACME HTTP-01
/// challenges, which a CA fetches over plain HTTP before the host has its certificate).
fn exempt_from_tls_redirect(written: &str, settings: &model::Settings) -> bool {
    settings
        .no_tls_redirect_locations
        .iter()
        .any(|location| written.starts_with(location.as_str()))
}

/// `from-to-www-redirect`, as ingress-nginx's redirect server answers: the other name, the
/// scheme the client used (a trusted load balancer's `X-Forwarded-Proto` included), the port
/// of Sluice's listener for that scheme (none when it is the scheme's default) and the target
/// without a trailing `/`. ingress-nginx names its HTTPS port whatever the scheme; Sluice the
/// port of the scheme it names, so a plain redirect does not point at the TLS listener.
pub(crate) fn www_redirect(
    conn: &ConnCtx,
    head: &Parts,
    settings: &model::Settings,
    to: &str,
) -> Response<ResponseBody> {
    let https = conn.https || conn.behind_tls_balancer() || forwarded_https(conn, head, settings);
    let port = conn.listener_port(https).to_str().unwrap_or_default();
    let target = head.uri.path_and_query().map_or("", |pq| pq.as_str());
    let target = target.strip_suffix('/').unwrap_or(target);
    let status =
        StatusCode::from_u16(settings.http_redirect_code).unwrap_or(StatusCode::PERMANENT_REDIRECT);
    redirect_response(status, &format!("{}{target}", origin(https, to, port)))
}

/// `scheme://host[:port]`, without the port when it is the scheme's default.
fn origin(https: bool, host: &str, port: &str) -> String {
    match (https, port) {
        (true, "443" | "") => format!("https://{host}"),
        (false, "80" | "") => format!("http://{host}"),
        (true, port) => format!("https://{host}:{port}"),
        (false, port) => format!("http://{host}:{port}"),
    }
}

/// `use-forwarded-headers`: a load balancer in front (a peer in `proxy-real-ip-cidr`)
/// terminated TLS and says so; redirecting such a request to https would loop.
fn forwarded_https(conn: &ConnCtx, head: &Parts, settings: &model::Settings) -> bool {
    conn.trusts_forwarded_headers(settings)
        && head
            .headers
            .get(&headers::X_FORWARDED_PROTO)
            .is_some_and(|proto| proto.as_bytes().eq_ignore_ascii_case(b"https"))
}

/// A redirect the proxy answers itself, with a short body naming the status.
/// A 302 to `location` (`auth-tls-error-page`: nginx's `error_page 495 496 = <url>`).
pub(crate) fn found(location: HeaderValue) -> Response<ResponseBody> {
    let mut response = redirect_body(StatusCode::FOUND);
    response.headers_mut().insert(header::LOCATION, location);
    response
}

fn redirect_response(status: StatusCode, location: &str) -> Response<ResponseBody> {
    let mut response = redirect_body(status);
    if let Ok(location) = HeaderValue::try_from(location) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

fn redirect_body(status: StatusCode) -> Response<ResponseBody> {
    let text: &'static [u8] = match status.as_u16() {
        301 => b"301 Moved Permanently\n",
        302 => b"302 Found\n",
        303 => b"303 See Other\n",
        307 => b"307 Temporary Redirect\n",
        308 => b"308 Permanent Redirect\n",
        _ => b"Redirect\n",
    };
    text_response(status, Bytes::from_static(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_origins_name_only_ports_other_than_the_default() {
        assert_eq!(origin(true, "example.com", "443"), "https://example.com");
        assert_eq!(
            origin(true, "example.com", "8443"),
            "https://example.com:8443"
        );
        assert_eq!(origin(false, "example.com", "80"), "http://example.com");
        assert_eq!(
            origin(false, "example.com", "8080"),
            "http://example.com:8080"
        );
    }
}
