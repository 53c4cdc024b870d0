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

use std::rc::Rc;

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode, Uri};
use http_body::Body;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use model::{Compiled, Route};

use crate::body::{RequestBody, ResponseBody};
use crate::error::{text_response, Chain, ProxyError};
use crate::headers;
use crate::upstream::{self, Exchange, UpstreamBody};
use crate::worker::ConnCtx;

/// Answers one client request. Never fails: every problem is a status code.
pub(crate) async fn handle(
    conn: Rc<ConnCtx>,
    request: Request<Incoming>,
) -> Response<ResponseBody> {
    let (guard, nth) = conn.begin_request();
    let worker = &conn.worker;
    let config = worker.config();
    let config: Option<&Compiled> = config.as_deref().map(|c| &**c);
    let (result, route) = match config {
        None => (Err(ProxyError::NotReady), None),
        Some(config) => route_and_forward(&conn, config, request).await,
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

async fn route_and_forward<'c>(
    conn: &Rc<ConnCtx>,
    config: &'c Compiled,
    request: Request<Incoming>,
) -> (
    Result<Response<ResponseBody>, ProxyError>,
    Option<&'c std::sync::Arc<Route>>,
) {
    let host = request_host(&request);
    let Some(matched) = config.routes.route(host, request.uri().path()) else {
        return (Err(ProxyError::NoRoute), None);
    };
    let route = matched.route;
    if matched.tls && !conn.https && config.settings.ssl_redirect {
        return (Ok(redirect(host, request.uri())), Some(route));
    }
    (forward(conn, config, route, request).await, Some(route))
}

async fn forward(
    conn: &Rc<ConnCtx>,
    config: &Compiled,
    route: &Route,
    mut request: Request<Incoming>,
) -> Result<Response<ResponseBody>, ProxyError> {
    let settings = &config.settings;
    let limit = settings.client_max_body_size;
    // hyper reports a declared Content-Length (or an empty body) as the exact size.
    let declared = request.body().size_hint().exact();
    if limit > 0 && declared.is_some_and(|len| len > limit) {
        return Err(ProxyError::BodyTooLarge { limit });
    }
    let upgrade = !conn.h2 && headers::is_websocket_upgrade(request.headers());
    let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut request));

    let (mut head, body) = request.into_parts();
    let body = if body.is_end_stream() {
        RequestBody::Empty
    } else {
        RequestBody::client(body, declared, limit)
    };
    let progress = body.progress().cloned();
    headers::prepare_request(&mut head, &conn.forwarded(settings), upgrade);
    let retryable = matches!(body, RequestBody::Empty) && headers::is_idempotent(&head.method);

    let exchanged = upstream::exchange(
        &conn.worker,
        &route.backend,
        settings,
        head,
        body,
        retryable,
    )
    .await;
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

    if let Some(client_upgrade) = client_upgrade {
        if response.status() == StatusCode::SWITCHING_PROTOCOLS {
            let upstream_upgrade = hyper::upgrade::on(&mut response);
            let drain = conn.worker.drain_guard();
            tokio::task::spawn_local(async move {
                let _drain = drain;
                let (client, upstream) = tokio::join!(client_upgrade, upstream_upgrade);
                // The connection's driver has handed its socket over by now.
                drop(upstream_conn);
                match (client, upstream) {
                    (Ok(client), Ok(upstream)) => {
                        let mut client = TokioIo::new(client);
                        let mut upstream = TokioIo::new(upstream);
                        if let Err(e) =
                            tokio::io::copy_bidirectional(&mut client, &mut upstream).await
                        {
                            tracing::debug!(error = %e, "tunnel ended with an error");
                        }
                    }
                    (Err(e), _) | (_, Err(e)) => tracing::debug!(error = %e, "upgrade failed"),
                }
            });
            headers::prepare_response(response.headers_mut(), true);
            return Ok(response.map(|_| ResponseBody::empty()));
        }
    }

    let reusable = !headers::connection_has(response.headers(), "close");
    headers::prepare_response(response.headers_mut(), false);
    let worker = &conn.worker;
    let read_timeout = settings.proxy_read_timeout;
    Ok(response.map(|incoming| {
        ResponseBody::upstream(UpstreamBody::new(
            incoming,
            upstream_conn,
            worker,
            reusable,
            read_timeout,
        ))
    }))
}

/// The host a request is for: HTTP/2 `:authority` (or an absolute-form target), else `Host`.
fn request_host(request: &Request<Incoming>) -> &str {
    match request.uri().authority() {
        Some(authority) => authority.host(),
        None => request
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or(""),
    }
}

/// `308` to the same host and target over HTTPS (method and body are kept by the client).
fn redirect(host: &str, uri: &Uri) -> Response<ResponseBody> {
    let host = strip_port(host);
    let target = uri.path_and_query().map_or("/", |pq| pq.as_str());
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
        let uri: Uri = "/cart?item=1".parse().unwrap();
        let response = redirect("shop.example.com:8080", &uri);
        assert_eq!(response.status(), StatusCode::PERMANENT_REDIRECT);
        assert_eq!(
            response.headers()[header::LOCATION],
            "https://shop.example.com/cart?item=1"
        );
        assert_eq!(strip_port("[::1]:80"), "[::1]");
        assert_eq!(strip_port("example.com"), "example.com");
    }
}
