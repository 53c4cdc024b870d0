//! One client request, from head to response: the data path of DESIGN.md below the swap line.
//!
//! ```text
//!  request ─▶ current config? ─no─▶ 503
//!          ─▶ route(host, path) ─none─▶ 404
//!          ─▶ ssl-redirect (plain HTTP, host with TLS) ─▶ 308 https://host/path?query
//!          ─▶ declared body > client-max-body-size ─▶ 413
//!          ─▶ headers rewritten ─▶ upstream::exchange (balancing, pool, retries)
//!          ─▶ 101 ─▶ tunnel task   │ else ─▶ response streamed back
//!  every error ─▶ ProxyError::response (the one status mapping)
//! ```

use std::convert::Infallible;
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body::Body;
use hyper::body::Incoming;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use model::{Compiled, Route};
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
    let (result, route) = match config {
        None => (Err(ProxyError::NotReady), None),
        Some(config) => match route(&conn, config, &head) {
            Routed::NoRoute => (Err(ProxyError::NoRoute), None),
            Routed::Redirect(route) => (Ok(redirect(&head)), Some(route)),
            Routed::Forward(route) => (
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
            ),
        },
    };
    let mut response = match result {
        Ok(response) => response,
        Err(error) => {
            tracing::debug!(error = %Chain(&error), "answering with an error");
            worker.stats.borrow_mut().error(error.status().as_u16());
            error.response()
        }
    };
    worker
        .stats
        .borrow_mut()
        .request(route, response.status().as_u16());

    let max_requests = config.map_or(model::Settings::default().keep_alive_requests, |c| {
        c.settings.keep_alive_requests
    });
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
    NoRoute,
    /// Plain HTTP to a host with TLS: `308` to HTTPS.
    Redirect(&'c Arc<Route>),
    Forward(&'c Arc<Route>),
}

fn route<'c>(conn: &ConnCtx, config: &'c Compiled, head: &Parts) -> Routed<'c> {
    let host = request_host(head);
    let Some(matched) = config.routes.route(host, head.uri.path()) else {
        return Routed::NoRoute;
    };
    if matched.tls && !conn.https && config.settings.ssl_redirect {
        return Routed::Redirect(matched.route);
    }
    Routed::Forward(matched.route)
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
            RequestBody::client(body, declared, limit)
        }
    };
    let progress = body.progress().cloned();
    let forwarded = conn.forwarded(settings);
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
            tokio::task::spawn_local(async move {
                let _drain = drain;
                if let Err(e) = tunnel(client_upgrade, upstream, buffered).await {
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
/// sent right behind its 101 head goes to the client first.
async fn tunnel(
    client_upgrade: OnUpgrade,
    mut upstream: UpstreamIo,
    buffered: Bytes,
) -> Result<(), BoxError> {
    let mut client = TokioIo::new(client_upgrade.await?);
    client.write_all(&buffered).await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

/// The host a request is for: HTTP/2 `:authority` (or an absolute-form target), else `Host`.
fn request_host(head: &Parts) -> &str {
    match head.uri.authority() {
        Some(authority) => authority.host(),
        None => head
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or(""),
    }
}

/// `308` to the same host and target over HTTPS (method and body are kept by the client).
fn redirect(head: &Parts) -> Response<ResponseBody> {
    let host = strip_port(request_host(head));
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
