//! One client request, from head to response: the data path of DESIGN.md below the swap line.
//!
//! ```text
//!  request ─▶ current config? ─no─▶ 503
//!          ─▶ CONNECT, TRACE ─▶ 405 │ Host missing, repeated, invalid, ≠ :authority ─▶ 400
//!          ─▶ path decoded and normalised (model::target) ─ NUL, `%zz`, above `/` ─▶ 400
//!          ─▶ route(host, normalised path) ─none─▶ 404
//!          ─▶ ssl-redirect (plain HTTP, host with TLS, not an X-Forwarded-Proto: https from a
//!             peer in proxy-real-ip-cidr with use-forwarded-headers) ─▶ 308 https://host/path?query
//!          ─▶ declared body > client-max-body-size ─▶ 413
//!          ─▶ headers rewritten (headers; the client address: ConnCtx::client_ip)
//!          ─▶ upstream::exchange (balancing, pool, retries)
//!          ─▶ 101 ─▶ tunnel task   │ else ─▶ response streamed back
//!          ─▶ HTTPS to a host with its own certificate ─▶ Strict-Transport-Security
//!  every error ─▶ ProxyError::response (the one status mapping)
//! ```

use std::convert::Infallible;
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::request::Parts;
use http::uri::PathAndQuery;
use http::{header, HeaderValue, Method, Request, Response, StatusCode, Uri, Version};
use http_body::Body;
use hyper::body::Incoming;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use model::{normalize_path, validate_host, Compiled, Route};
use tokio::io::AsyncWriteExt;

use crate::body::{BoxError, RequestBody, ResponseBody};
use crate::client::Outgoing;
use crate::error::{text_response, Chain, ProxyError};
use crate::headers;
use crate::upstream::{self, Exchange, Pending, UpstreamBody, UpstreamIo};
use crate::worker::ConnCtx;

/// Answers one client request that came through hyper (HTTP/2, and HTTP/1 requests the
/// inline server hands over). Never fails: every problem is a status code (the `Result` is
/// hyper's service signature, so hyper can take this future as it is).
pub(crate) fn handle(
    conn: Rc<ConnCtx>,
    mut request: Request<Incoming>,
) -> impl Future<Output = Result<Response<ResponseBody>, Infallible>> {
    let client_upgrade = (!conn.h2 && headers::is_websocket_upgrade(request.headers()))
        .then(|| hyper::upgrade::on(&mut request));
    let (head, body) = request.into_parts();
    let body = (!body.is_end_stream()).then_some(body);
    let response = respond(conn, head, body, client_upgrade);
    async move { Ok(response.await) }
}

/// Answers one client request: `body` is `None` when the request has none.
///
/// One async fn holding the whole path rather than layers of them: each layer taking the
/// request by value keeps its own copy in the future, and the future is moved (all of it)
/// as it starts.
pub(crate) async fn respond(
    conn: Rc<ConnCtx>,
    mut head: Parts,
    body: Option<Incoming>,
    client_upgrade: Option<OnUpgrade>,
) -> Response<ResponseBody> {
    let (guard, nth) = conn.begin_request();
    let worker = &conn.worker;
    let config = worker.config();
    let config: Option<&Compiled> = config.as_deref().map(|c| &**c);
    let (result, route, hsts) = match config {
        None => (Err(ProxyError::NotReady), None, false),
        Some(config) => match route(&conn, config, &mut head) {
            Err(error) => (Err(error), None, false),
            Ok(Routed::Redirect(route)) => (Ok(redirect(&head)), Some(route), false),
            Ok(Routed::Forward { route, tls }) => (
                forward(
                    &conn,
                    config,
                    route,
                    &mut head,
                    body,
                    client_upgrade,
                    guard.started(),
                )
                .await,
                Some(route),
                tls && conn.https,
            ),
        },
    };
    let mut response = match result {
        Ok(response) => response,
        Err(error) => {
            tracing::debug!(error = %Chain(&error), "answering with an error");
            let (status, source) = error.classify();
            worker.stats.borrow_mut().error(status.as_u16(), source);
            let mut response = error.response();
            if error.closes_connection() && !conn.h2 {
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            response
        }
    };
    if hsts {
        if let Some(value) = config.and_then(|c| c.hsts_header.as_deref()) {
            response
                .headers_mut()
                .insert(header::STRICT_TRANSPORT_SECURITY, hsts_value(value));
        }
    }
    worker
        .stats
        .borrow_mut()
        .request(route, response.status().as_u16());

    // Lazily: the default settings hold lists, and building them allocates.
    let max_requests = config.map_or_else(
        || model::Settings::default().keep_alive_requests,
        |c| c.settings.keep_alive_requests,
    );
    if nth >= max_requests && response.status() != StatusCode::SWITCHING_PROTOCOLS {
        if conn.h2 {
            conn.close_after_this();
        } else {
            // hyper closes the connection after a response that says so.
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
    }
    response.body_mut().set_guard(guard);
    response
}

/// Where routing sends a request.
enum Routed<'c> {
    /// Plain HTTP to a host with TLS: `308` to HTTPS.
    Redirect(&'c Arc<Route>),
    /// `tls`: the host has its own certificate (HSTS applies).
    Forward { route: &'c Arc<Route>, tls: bool },
}

/// The first phase of the pipeline: the request head is checked (method, `Host`), its path
/// normalised (`model::target`), and the route chosen on the normalised path. When the path
/// had to be normalised, the request goes upstream with the normalised one.
fn route<'c>(
    conn: &ConnCtx,
    config: &'c Compiled,
    head: &mut Parts,
) -> Result<Routed<'c>, ProxyError> {
    if head.method == Method::CONNECT || head.method == Method::TRACE {
        // An ingress is not a forward proxy, and TRACE echoes credentials back (nginx: 405).
        return Err(ProxyError::MethodNotAllowed);
    }
    let host = request_host(head)?;
    let path = normalize_path(head.uri.path()).map_err(ProxyError::BadTarget)?;
    let Some(matched) = config.routes.route(host, &path.routed) else {
        return Err(ProxyError::NoRoute);
    };
    let settings = &config.settings;
    if matched.tls && !conn.https && settings.ssl_redirect && !forwarded_https(conn, head, settings)
    {
        return Ok(Routed::Redirect(matched.route));
    }
    if let Some(normal) = path.forward {
        set_path(head, normal);
    }
    Ok(Routed::Forward {
        route: matched.route,
        tls: matched.tls,
    })
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

/// Replaces the path of the target, keeping its query (and, for HTTP/2 and absolute-form
/// targets, its scheme and authority). The first change keeps the target the client sent
/// for `X-Original-URI` (moved, not copied: this path allocates anyway).
fn set_path(head: &mut Parts, path: String) {
    let target = match head.uri.query() {
        Some(query) => format!("{path}?{query}"),
        None => path,
    };
    let mut parts = std::mem::take(&mut head.uri).into_parts();
    let original = std::mem::replace(
        &mut parts.path_and_query,
        PathAndQuery::from_maybe_shared(Bytes::from(target)).ok(),
    );
    if let Some(original) = original {
        if head.extensions.get::<headers::OriginalTarget>().is_none() {
            head.extensions.insert(headers::OriginalTarget(original));
        }
    }
    // Every byte of a normalised path is a valid URI byte: this cannot fail.
    head.uri = Uri::from_parts(parts).unwrap_or_default();
}

/// The `Strict-Transport-Security` value: the default one without an allocation.
fn hsts_value(value: &str) -> HeaderValue {
    const DEFAULT: &str = "max-age=31536000; includeSubDomains";
    if value == DEFAULT {
        HeaderValue::from_static(DEFAULT)
    } else {
        HeaderValue::from_str(value).unwrap_or_else(|_| HeaderValue::from_static(DEFAULT))
    }
}

async fn forward(
    conn: &Rc<ConnCtx>,
    config: &Compiled,
    route: &Route,
    head: &mut Parts,
    body: Option<Incoming>,
    client_upgrade: Option<OnUpgrade>,
    arrived: Instant,
) -> Result<Response<ResponseBody>, ProxyError> {
    let settings = &config.settings;
    let limit = settings.client_max_body_size;
    let body = match body {
        None => RequestBody::Empty,
        Some(body) => {
            // hyper reports a declared Content-Length as the exact size.
            let declared = body.size_hint().exact();
            if limit > 0 && declared.is_some_and(|len| len > limit) {
                return Err(ProxyError::BodyTooLarge { limit });
            }
            RequestBody::client(body, declared, limit, settings.client_body_timeout)
        }
    };
    let progress = body.progress().cloned();
    let forwarded = conn.forwarded(head, settings);
    let added = headers::prepare_request(head, &forwarded, client_upgrade.is_some());
    let retryable = matches!(body, RequestBody::Empty) && headers::is_idempotent(&head.method);

    let mut body = Outgoing::new(body);
    let pending = Pending {
        head,
        added,
        body: &mut body,
        retryable,
        upgrade: client_upgrade.is_some(),
        arrived,
    };
    let exchanged = upstream::exchange(&conn.worker, &route.backend, settings, pending).await;
    let Exchange {
        mut response,
        conn: upstream_conn,
    } = match exchanged {
        Ok(exchange) => exchange,
        Err(_) if progress.is_some_and(|p| p.exceeded()) => {
            return Err(ProxyError::BodyTooLarge { limit });
        }
        Err(error) => return Err(error),
    };

    if response.status() == StatusCode::SWITCHING_PROTOCOLS {
        // The client asked for it (the upstream client refuses a 101 otherwise).
        if let Some(client_upgrade) = client_upgrade {
            let (upstream, buffered) = upstream_conn.into_tunnel(settings.proxy_send_timeout);
            let drain = conn.worker.tunnel_guard();
            let idle = settings.proxy_read_timeout;
            tokio::task::spawn_local(async move {
                let _drain = drain;
                if let Err(e) = tunnel(client_upgrade, upstream, buffered, idle).await {
                    tracing::debug!(error = %e, "tunnel ended with an error");
                }
            });
            headers::prepare_response(response.headers_mut(), true);
            return Ok(response.map(|()| ResponseBody::empty()));
        }
    }

    // The upstream client consumed the connection-specific headers already.
    let worker = &conn.worker;
    Ok(response
        .map(|()| ResponseBody::upstream(UpstreamBody::new(upstream_conn, worker, settings))))
}

/// Splices the client's upgraded connection and the upstream socket; whatever the upstream
/// sent right behind its 101 head goes to the client first. Both close after `idle` without
/// a byte either way.
async fn tunnel(
    client_upgrade: OnUpgrade,
    mut upstream: UpstreamIo,
    buffered: Bytes,
    idle: std::time::Duration,
) -> Result<(), BoxError> {
    let mut client = TokioIo::new(client_upgrade.await?);
    client.write_all(&buffered).await?;
    crate::tunnel::splice(&mut client, &mut upstream, idle).await?;
    Ok(())
}

/// The host a request is for, checked: HTTP/2 `:authority` (or an HTTP/1.1 absolute-form
/// target), else `Host`. RFC 9112 §3.2 and nginx: an HTTP/1.1 request without `Host`, with
/// more than one, or with an invalid one is refused; so is an HTTP/2 request whose `host`
/// disagrees with its `:authority`.
fn request_host(head: &Parts) -> Result<&str, ProxyError> {
    let mut hosts = head.headers.get_all(header::HOST).iter();
    let host = hosts.next();
    if hosts.next().is_some() {
        return Err(ProxyError::BadRequest("more than one Host header"));
    }
    let authority = head.uri.authority().map(|a| a.as_str());
    let host = match (authority, host) {
        (Some(authority), Some(host)) => {
            if head.version == Version::HTTP_2
                && !host.as_bytes().eq_ignore_ascii_case(authority.as_bytes())
            {
                return Err(ProxyError::BadRequest(
                    "the host header disagrees with :authority",
                ));
            }
            authority
        }
        (Some(authority), None) if head.version != Version::HTTP_11 => authority,
        (None, Some(host)) => host
            .to_str()
            .map_err(|_| ProxyError::BadRequest("the Host header is not ASCII"))?,
        (None, None) if head.version != Version::HTTP_11 => return Ok(""),
        (_, None) => return Err(ProxyError::BadRequest("an HTTP/1.1 request without Host")),
    };
    validate_host(host.as_bytes()).map_err(ProxyError::BadTarget)?;
    Ok(host)
}

/// `308` to the same host and target over HTTPS (method and body are kept by the client).
fn redirect(head: &Parts) -> Response<ResponseBody> {
    let host = strip_port(request_host(head).unwrap_or_default());
    let target = head.uri.path_and_query().map_or("/", |pq| pq.as_str());
    let mut response = text_response(
        StatusCode::PERMANENT_REDIRECT,
        Bytes::from_static(b"308 Permanent Redirect\n"),
    );
    if let Ok(location) = HeaderValue::try_from(format!("https://{host}{target}")) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

/// `example.com:8080` → `example.com`; `[::1]:8080` → `[::1]`.
fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        host.find(']').map_or(host, |end| &host[..=end])
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_keep_the_target_and_drop_the_port() {
        let (head, ()) = Request::get("/cart?item=1")
            .header("host", "shop.example.com:8080")
            .body(())
            .unwrap()
            .into_parts();
        let response = redirect(&head);
        assert_eq!(response.status(), StatusCode::PERMANENT_REDIRECT);
        assert_eq!(
            response.headers()[header::LOCATION],
            "https://shop.example.com/cart?item=1"
        );
        assert_eq!(strip_port("[::1]:80"), "[::1]");
        assert_eq!(strip_port("example.com"), "example.com");
    }
}
