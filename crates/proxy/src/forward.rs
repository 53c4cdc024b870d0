//! One client request, from head to response: the data path of DESIGN.md below the swap line.
//!
//! One pipeline with fixed phases; each phase reads its block of the route's policy
//! (`model::policy`), from the same snapshot as the route:
//!
//! ```text
//!  request ─▶ current config? ─no─▶ 503
//!   normalise  CONNECT, TRACE ─▶ 405 │ Host missing, repeated, invalid, ≠ :authority ─▶ 400
//!              path decoded and normalised (model::target) ─ NUL, `%zz`, above `/` ─▶ 400
//!   route      from-to-www twin ─▶ http-redirect-code │ route(host, path) ─none─▶ 404
//!   access     route refused by its config ─▶ 503 │ client address not allowed ─▶ 403
//!   redirect   app-root (`/`) ─▶ 302 │ permanent/temporal-redirect │ ssl-redirect (plain
//!              HTTP, host with TLS or forced, no X-Forwarded-Proto: https
//!              from a peer in proxy-real-ip-cidr with use-forwarded-headers)
//!   rewrite    rewrite-target with the path regex's captures (else the normalised path);
//!              a capture leaving the target's fixed prefix or the root ─▶ 400
//!   request headers   the proxy's own (client address: ConnCtx::client_ip), then
//!              upstream-vhost, X-Forwarded-Prefix, the route's header edits
//!   body       declared body > proxy-body-size ─▶ 413 │ proxy-request-buffering on (no
//!              upgrade): read whole (`buffer`: memory, else a temporary file; too large ─▶ 413,
//!              client-body-timeout ─▶ 408) before any upstream is chosen, then replayable
//!   trace      the route traces: traceparent (+ tracestate) for the upstream (`otel`)
//!   pick       upstream-hash-by: the key's hash (`hash_key`) chooses along a ring (`ring`);
//!              else the ConfigMap's load-balance; the rules of retrying in `attempts`
//!   upstream   upstream::exchange (balancing, pool, the route's timeouts and retries)
//!              ─▶ 101 ─▶ tunnel task   │ else ─▶ response streamed back
//!              HTTP/2 and gRPC routes: upstream_h2::exchange (streams on shared HTTP/2
//!              connections, trailers both ways, grpc-timeout)
//!   response headers   the route's header edits; HSTS on HTTPS for hosts with a certificate
//!  every error ─▶ ProxyError::classify (the one status mapping) ─▶ answer::error_response
//!                 (a gRPC error on gRPC routes and for requests with content-type
//!                 application/grpc)
//! ```
//! A route without annotations shares the default policy: every phase is an `is_none()` or
//! `is_empty()` check.

use std::convert::Infallible;
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures_util::FutureExt;
use http::request::Parts;
use http::uri::PathAndQuery;
use http::{header, HeaderName, HeaderValue, Method, Request, Response, StatusCode, Uri, Version};
use http_body::Body;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use model::policy::Tracing;
use model::{normalize_path, validate_host, Compiled, Matched, Route, UpstreamProtocol};
use tokio::io::AsyncWriteExt;

use crate::access_log::{Record, RequestId};
use crate::answer::{error_response, text_response};
use crate::attempts::Attempts;
use crate::body::{BodyTimeout, BodyTooLarge, BoxError};
use crate::buffer::{self, BodyBuffering, BufferError, Place};
use crate::client::Outgoing;
use crate::error::{Chain, ProxyError};
use crate::errors::{self, OriginalHead};
use crate::hash_key;
use crate::headers;
use crate::metrics;
use crate::pipeline::ClientUpgrade;
use crate::request_body::{ClientBody, RequestBody};
use crate::response_body::ResponseBody;
use crate::trace_context::Trace;
use crate::upstream::{self, Exchange, Pending, UpstreamBody, UpstreamIo};
use crate::upstream_h2::{self, H2Request};
use crate::worker::{ConnCtx, RequestGuard};

/// Answers one client request that came through hyper (HTTP/1 requests the inline server
/// hands over). Never fails: every problem is a status code (the `Result` is hyper's service
/// signature, so hyper can take this future as it is).
pub(crate) fn handle(
    conn: Rc<ConnCtx>,
    mut request: Request<Incoming>,
) -> impl Future<Output = Result<Response<ResponseBody>, Infallible>> {
    let client_upgrade = headers::is_websocket_upgrade(request.headers())
        .then(|| ClientUpgrade::Http1(hyper::upgrade::on(&mut request)));
    let (head, body) = request.into_parts();
    let body = (!body.is_end_stream()).then_some(ClientBody::Http1(body));
    // Mapped rather than awaited in an `async` block: the block would hold the pipeline's
    // future twice (captured, then moved to be awaited).
    respond(conn, head, body, client_upgrade).map(Ok)
}

/// Answers one client request: `body` is `None` when the request has none.
///
/// One async fn holding the whole path rather than layers of them: each layer taking the
/// request by value keeps its own copy in the future, and the future is moved (all of it)
/// as it starts.
pub(crate) async fn respond(
    conn: Rc<ConnCtx>,
    mut head: Parts,
    body: Option<ClientBody>,
    client_upgrade: Option<ClientUpgrade>,
) -> Response<ResponseBody> {
    let (mut guard, nth) = conn.begin_request();
    let worker = &conn.worker;
    let current = worker.config();
    let body_length = body.as_ref().map_or(0, |b| b.size_hint().lower());
    guard.measure.method = metrics::method_label(&head.method);
    guard.measure.request_bytes = metrics::request_head_length(&head) + body_length;
    if let Some(current) = current
        .as_ref()
        .filter(|c| c.access_log.is_some() || c.tracing)
    {
        let client = conn.client_ip(&head, &current.settings);
        guard.record = Record::begin(current, &head, client, guard.measure.request_bytes, nth);
    }
    let config: Option<&Compiled> = current.as_deref().map(|c| &**c);
    // The errors phase sends the client's request as it came: kept only where it may be used.
    let original = config
        .filter(|c| c.any_custom_errors)
        .map(|_| Box::new(OriginalHead::of(&head)));
    let (result, route, hsts, upstream_answered) = match config {
        None => (Err(ProxyError::NotReady), None, false, false),
        Some(config) => match route(&conn, config, &mut head) {
            Err(error) => (Err(error), None, false, false),
            Ok(Routed::Answer { route, response }) => (Ok(*response), route, false, false),
            Ok(Routed::Refused { route, error }) => (Err(error), Some(route), false, false),
            Ok(Routed::Forward { route, tls }) => {
                // Counted under its route even if the client leaves before the answer.
                let counted = worker.stats.borrow_mut().route(Some(route)).clone();
                guard.measure.route = Some(counted);
                let fallback = errors::unavailable_fallback(route, &mut head);
                let result = forward(
                    &conn,
                    config,
                    fallback.as_ref().unwrap_or(route),
                    &mut head,
                    body,
                    client_upgrade,
                    &mut guard,
                )
                .await;
                let answered = result.is_ok();
                (result, Some(route), tls && conn.https, answered)
            }
        },
    };
    let mut response = match result {
        Ok(response) => response,
        Err(error) => {
            tracing::debug!(error = %Chain(&error), "answering with an error");
            let (status, source) = error.classify();
            worker.stats.borrow_mut().error(status.as_u16(), source);
            let grpc = route.is_some_and(|r| r.policy.upstream_protocol == UpstreamProtocol::Grpc)
                || headers::is_grpc(&head.headers);
            let mut response = error_response(&error, grpc);
            if error.closes_connection() && !conn.h2 {
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            response
        }
    };
    if let (Some(original), Some(config)) = (&original, config) {
        let errors = match route {
            Some(route) => route.policy.custom_errors.as_deref(),
            None => config.custom_errors.as_deref(),
        };
        let status = response.status().as_u16();
        if let Some(errors) = errors.filter(|e| e.replaces(status, !upstream_answered)) {
            let request = errors::ErrorRequest {
                errors,
                status,
                route: route.map(|r| &**r),
                original,
            };
            // Boxed: only answers that are replaced carry this future.
            response = Box::pin(error_page(&conn, config, request, &mut guard)).await;
        }
    }
    if let Some(route) = route.filter(|r| !r.policy.response_headers.is_empty()) {
        for edit in route.policy.response_headers.iter() {
            edit.apply(response.headers_mut());
        }
        reframe(&mut response, &head.method);
    }
    if hsts {
        if let Some(value) = config.and_then(|c| c.hsts_header.as_deref()) {
            response
                .headers_mut()
                .insert(header::STRICT_TRANSPORT_SECURITY, hsts_value(value));
        }
    }
    let status = response.status().as_u16();
    if guard.measure.route.is_none() {
        let counted = worker.stats.borrow_mut().route(route).clone();
        guard.measure.route = Some(counted);
    }
    guard.measure.responded(status, response.headers());
    if let Some(record) = guard.record.as_deref_mut() {
        record.route = guard.measure.route.clone();
        record.responded(status, response.headers());
        if let (None, Some(config)) = (&record.trace, config.filter(|c| c.tracing)) {
            // Answered here, without an upstream (a 404, a redirect, a refusal, a body too
            // large): traced by its route's policy, or the ConfigMap's without a route.
            let otel = &config.settings.opentelemetry;
            let tracing = route.map_or(
                Tracing {
                    enabled: otel.enabled,
                    trust_incoming_span: otel.trust_incoming_span,
                },
                |r| r.policy.opentelemetry,
            );
            if tracing.enabled {
                let trace = Trace::begin(&mut head.headers, tracing, otel, false);
                record.trace = Some(Box::new(trace));
            }
        }
    }

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

/// Where the phases before the upstream send a request.
enum Routed<'c> {
    /// Answered here (a redirect); `route` is `None` for a host-level one.
    Answer {
        route: Option<&'c Arc<Route>>,
        response: Box<Response<ResponseBody>>,
    },
    /// The access phase said no.
    Refused {
        route: &'c Arc<Route>,
        error: ProxyError,
    },
    /// `tls`: the host has its own certificate (HSTS applies).
    Forward { route: &'c Arc<Route>, tls: bool },
}

/// The phases before the upstream: normalise, route, access, redirect, rewrite (see the
/// module doc). The request head leaves with the target it is sent upstream with.
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
    let settings = &config.settings;
    if let Some(to) = config.routes.www_redirect(host) {
        let response = Box::new(www_redirect(conn, head, settings, to));
        return Ok(Routed::Answer {
            route: None,
            response,
        });
    }
    let Some(mut matched) = config.routes.route(host, &path.routed, head) else {
        return Err(ProxyError::NoRoute);
    };
    // A weighted split (canary-weight) draws here, once: every later phase sees one route.
    matched.route = matched.route.pick(|total| fastrand::u32(1..=total));
    let route = matched.route;
    let policy = &*route.policy;

    // Access. A refusal allocates its reason; only refused requests pay for it.
    if let Some(why) = &policy.denied {
        let error = ProxyError::RouteRefused(why.clone());
        return Ok(Routed::Refused { route, error });
    }
    if !policy.access.is_open() && !policy.access.allows(conn.client_ip(head, settings)) {
        let error = ProxyError::Forbidden;
        return Ok(Routed::Refused { route, error });
    }

    // Redirects.
    if let Some(response) = redirect_phase(conn, head, settings, &matched, &path.routed) {
        return Ok(Routed::Answer {
            route: Some(route),
            response: Box::new(response),
        });
    }

    // Rewrite.
    if let Some(rewrite) = &policy.rewrite {
        let rewritten = rewrite
            .apply(matched.pattern, &path.routed)
            .map_err(ProxyError::RewriteRefused)?;
        tracing::debug!(from = %path.routed, to = %rewritten, "rewrite-target");
        set_rewritten(head, rewritten)?;
    } else if let Some(normal) = path.forward {
        set_path(head, normal);
    }
    Ok(Routed::Forward {
        route,
        tls: matched.tls,
    })
}

/// The redirect phase, in ingress-nginx's order: `app-root` (a request for `/`), then
/// `temporal-redirect`/`permanent-redirect`, then the redirect to HTTPS.
fn redirect_phase(
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
    let ssl = &policy.ssl_redirect;
    if !conn.https
        && (ssl.force || (ssl.enabled && matched.tls))
        && !forwarded_https(conn, head, settings)
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

/// `from-to-www-redirect`, as ingress-nginx's redirect server answers: the other name, the
/// scheme the client used (a trusted load balancer's `X-Forwarded-Proto` included), the port
/// of Sluice's listener for that scheme (none when it is the scheme's default) and the target
/// without a trailing `/`. ingress-nginx names its HTTPS port whatever the scheme; Sluice the
/// port of the scheme it names, so a plain redirect does not point at the TLS listener.
fn www_redirect(
    conn: &ConnCtx,
    head: &Parts,
    settings: &model::Settings,
    to: &str,
) -> Response<ResponseBody> {
    let https = conn.https || forwarded_https(conn, head, settings);
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

/// The target after `rewrite-target`: the rewritten path, and nginx's rule for the query:
/// the client's query is kept unless the template has its own (then it follows it after `&`)
/// or ends with `?` (then there is none). Both parts come encoded from the model; a target
/// the request line cannot carry is the proxy's fault (500), never a silent `/`.
fn set_rewritten(head: &mut Parts, rewritten: model::Rewritten) -> Result<(), ProxyError> {
    let model::Rewritten {
        path: mut target,
        query: target_query,
    } = rewritten;
    let client_query = head.uri.query().filter(|q| !q.is_empty());
    match (target_query.as_deref(), client_query) {
        (None, Some(query)) => {
            target.push('?');
            target.push_str(query);
        }
        (Some(""), _) | (None, None) => {}
        (Some(own), None) => {
            target.push('?');
            target.push_str(own);
        }
        (Some(own), Some(query)) => {
            target.push('?');
            target.push_str(own);
            target.push('&');
            target.push_str(query);
        }
    }
    let path_and_query = PathAndQuery::from_maybe_shared(Bytes::from(target))
        .map_err(|_| ProxyError::RewriteInvalid)?;
    let mut parts = std::mem::take(&mut head.uri).into_parts();
    let original = parts.path_and_query.replace(path_and_query);
    // X-Original-URI is the target as the client sent it.
    if let Some(original) = original {
        if head.extensions.get::<headers::OriginalTarget>().is_none() {
            head.extensions.insert(headers::OriginalTarget(original));
        }
    }
    head.uri = Uri::from_parts(parts).map_err(|_| ProxyError::RewriteInvalid)?;
    Ok(())
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

/// After header edits: the response's framing headers say what its body is, whatever an
/// edit set. Every server (the inline one, hyper's, HTTP/2) frames from `Content-Length`
/// when there is one, and a wrong one would desync the client's connection. A HEAD, 204 or
/// 304 response's `Content-Length` describes no body here and stays as it is.
fn reframe(response: &mut Response<ResponseBody>, method: &Method) {
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
    body: Option<ClientBody>,
    client_upgrade: Option<ClientUpgrade>,
    guard: &mut RequestGuard,
) -> Result<Response<ResponseBody>, ProxyError> {
    let mut arrived = guard.started();
    let mut record = guard.record.as_deref_mut();
    let settings = &config.settings;
    let buffering = BodyBuffering::of(&route.policy);
    let limit = buffering.max;
    let body = match body {
        None => RequestBody::Empty,
        Some(body) => {
            // hyper reports a declared Content-Length as the exact size.
            let declared = body.size_hint().exact();
            if limit > 0 && declared.is_some_and(|len| len > limit) {
                return Err(ProxyError::BodyTooLarge { limit });
            }
            let body = RequestBody::client(body, declared, limit, settings.client_body_timeout);
            if buffering.enabled && client_upgrade.is_none() {
                // Boxed: only requests with a body carry this future.
                let body = Box::pin(buffer_body(conn, head, body, declared, &buffering)).await?;
                // The upstream part starts now, as nginx's does once the body is read: the
                // first attempt's clock (pool ages, set-aside endpoints) and the start of
                // proxy-next-upstream-timeout, which a slow upload must not use up.
                arrived = Instant::now();
                body
            } else {
                body
            }
        }
    };
    let progress = body.progress().cloned();
    let policy = &*route.policy;
    // One branch on the plain path: HTTP/2 and gRPC routes go their own way below.
    let http2 = policy.upstream_protocol.is_http2() && client_upgrade.is_none();
    let te_trailers = http2 && headers::te_trailers(&head.headers);
    let forwarded = conn.forwarded(head, settings);
    let forwarded_client = forwarded.client;
    let mut added = headers::prepare_request(head, &forwarded, client_upgrade.is_some());
    if let Some(vhost) = &policy.upstream_vhost {
        added.set_upstream_host(vhost);
    }
    if let Some(prefix) = policy
        .rewrite
        .as_ref()
        .and_then(|r| r.forwarded_prefix.as_ref())
    {
        head.headers.insert(
            HeaderName::from_static("x-forwarded-prefix"),
            prefix.clone(),
        );
    }
    for edit in policy.request_headers.iter() {
        edit.apply(&mut head.headers);
    }
    if let Some(record) = record.as_deref_mut() {
        record.request_id = match added.generated_request_id() {
            Some(id) => RequestId::Generated(*id),
            None => head
                .headers
                .get(headers::X_REQUEST_ID_NAME)
                .map_or(RequestId::None, |id| RequestId::Client(id.clone())),
        };
        if record.wants().uri {
            record.uri_sent = Some(head.uri.clone());
        }
        if policy.opentelemetry.enabled {
            let otel = &settings.opentelemetry;
            let trace = Trace::begin(&mut head.headers, policy.opentelemetry, otel, true);
            record.trace = Some(Box::new(trace));
        }
    }
    // `upstream-hash-by`: the key is read before the proxy's own headers are written.
    let hash = policy
        .hash_by
        .as_ref()
        .map(|hash_by| key_hash(conn, hash_by, head, forwarded_client, &route.site.host));
    let attempts = Attempts::new(
        &route.backend,
        settings.load_balance,
        hash,
        &policy.upstream,
        arrived,
        &mut guard.measure.upstream,
        record
            .filter(|r| r.wants().upstream || r.trace.is_some())
            .map(|r| &mut r.attempts),
    );
    if http2 {
        let tls = policy.upstream_tls.is_some();
        upstream_h2::http2_head(head, &added, tls, te_trailers);
        let request = H2Request {
            head,
            body,
            arrived,
        };
        // Boxed: the HTTP/1.1 path's future does not carry this one.
        let exchanged = Box::pin(upstream_h2::exchange(
            &conn.worker.upstreams,
            settings,
            policy,
            request,
            attempts,
        ))
        .await;
        return match exchanged {
            Ok(response) => Ok(response.map(ResponseBody::http2)),
            Err(_) if progress.is_some_and(|p| p.exceeded()) => {
                Err(ProxyError::BodyTooLarge { limit })
            }
            Err(error) => Err(error),
        };
    }
    let upstream_policy = &policy.upstream;
    let retryable = body.is_replayable()
        && (headers::is_idempotent(&head.method) || upstream_policy.next_upstream.non_idempotent);

    let mut body = Outgoing::new(body);
    let pending = Pending {
        head,
        added,
        body: &mut body,
        retryable,
        upgrade: client_upgrade.is_some(),
    };
    let exchanged = upstream::exchange(
        &conn.worker.upstreams,
        settings,
        upstream_policy,
        policy.upstream_tls.as_ref(),
        pending,
        attempts,
    )
    .await;
    if let Err(ProxyError::OutOfFileDescriptors { .. }) = &exchanged {
        // A connect found no free descriptor: the worker's limit, not the endpoint's.
        conn.worker.note_connect_exhaustion();
    }
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
            if conn.h2 {
                // RFC 8441: the HTTP/2 client is told with a 200 on its CONNECT stream.
                *response.status_mut() = StatusCode::OK;
                headers::prepare_response(response.headers_mut(), false);
                response
                    .headers_mut()
                    .remove(HeaderName::from_static("sec-websocket-accept"));
            } else {
                headers::prepare_response(response.headers_mut(), true);
            }
            return Ok(response.map(|()| ResponseBody::empty()));
        }
    }

    // The upstream client consumed the connection-specific headers already.
    let upstreams = &conn.worker.upstreams;
    Ok(response
        .map(|()| ResponseBody::upstream(UpstreamBody::new(upstream_conn, upstreams, settings))))
}

/// The errors phase: the answer `request.status` is replaced by what the error backend
/// answers to the client's request (see `errors`), or by Sluice's 404 when no error backend
/// has a ready endpoint (ingress-nginx's built-in default backend). The error backend's
/// answer goes to the client as it is: it is never replaced in turn.
async fn error_page(
    conn: &Rc<ConnCtx>,
    config: &Compiled,
    request: errors::ErrorRequest<'_>,
    guard: &mut RequestGuard,
) -> Response<ResponseBody> {
    let Some(backend) = request.errors.ready_backend() else {
        return error_response(&ProxyError::NoRoute, false);
    };
    let (target, mut head) = request.to(backend);
    match forward(conn, config, &target, &mut head, None, None, guard).await {
        Ok(response) => response,
        Err(error) => {
            let (status, source) = error.classify();
            conn.worker
                .stats
                .borrow_mut()
                .error(status.as_u16(), source);
            error_response(&error, false)
        }
    }
}

/// The hash of the request's `upstream-hash-by` key.
fn key_hash(
    conn: &ConnCtx,
    hash_by: &model::HashBy,
    head: &Parts,
    forwarded_client: Option<std::net::IpAddr>,
    server_name: &str,
) -> u64 {
    let host = request_host(head).unwrap_or("");
    let host = host[..model::target::strip_port(host.as_bytes()).len()].to_ascii_lowercase();
    let inputs = hash_key::KeyInputs {
        client: forwarded_client.unwrap_or(conn.peer()),
        client_port: conn.peer_port(),
        https: conn.https,
        host: &host,
        server_name,
    };
    hash_key::request_hash(hash_by, head, &inputs)
}

/// The body phase under `proxy-request-buffering: on`: the body read whole before an upstream
/// is chosen (`buffer`), then sent with its length, also when it came chunked (as nginx does).
async fn buffer_body(
    conn: &ConnCtx,
    head: &mut Parts,
    body: RequestBody,
    declared: Option<u64>,
    buffering: &BodyBuffering,
) -> Result<RequestBody, ProxyError> {
    let dir = std::env::temp_dir();
    let buffered = buffer::read_whole(body, declared, buffering.in_memory, &dir)
        .await
        .map_err(|error| match error {
            BufferError::File(error) => ProxyError::BodyBuffer(error),
            BufferError::Body(error) if error.is::<BodyTooLarge>() => ProxyError::BodyTooLarge {
                limit: buffering.max,
            },
            BufferError::Body(error) if error.is::<BodyTimeout>() => ProxyError::ClientBodyTimeout,
            BufferError::Body(error) => ProxyError::ClientBody(error),
        })?;
    let place = buffered.place();
    if place == Place::File {
        // nginx warns "a client request body is buffered to a temporary file" for each.
        tracing::debug!(
            len = buffered.len(),
            "request body buffered to a temporary file"
        );
    }
    conn.worker.stats.borrow_mut().body_buffered(place);
    head.headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(buffered.len()));
    Ok(if buffered.len() == 0 {
        RequestBody::Empty
    } else {
        RequestBody::Buffered(buffered)
    })
}

/// Splices the client's upgraded connection and the upstream socket; whatever the upstream
/// sent right behind its 101 head goes to the client first. Both close after `idle` without
/// a byte either way.
async fn tunnel(
    client_upgrade: ClientUpgrade,
    mut upstream: UpstreamIo,
    buffered: Bytes,
    idle: std::time::Duration,
) -> Result<(), BoxError> {
    match client_upgrade {
        ClientUpgrade::Http1(upgrade) => {
            let mut client = TokioIo::new(upgrade.await?);
            client.write_all(&buffered).await?;
            crate::tunnel::splice(&mut client, &mut upstream, idle).await?;
        }
        ClientUpgrade::Http2(upgrade) => {
            let mut client = upgrade.ready().await?;
            client.write_all(&buffered).await?;
            crate::tunnel::splice(&mut client, &mut upstream, idle).await?;
        }
    }
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

/// A redirect the proxy answers itself, with a short body naming the status.
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

    /// HTTP/2 copies `handle`'s future into the box of each stream's task: it must not hold
    /// the pipeline's future twice, as an `async` block awaiting a captured future does.
    #[test]
    fn the_request_future_holds_the_pipeline_once() {
        fn output_size<A, B, F>(_: impl Fn(A, B) -> F) -> usize {
            std::mem::size_of::<F>()
        }
        fn pipeline_size<A, B, C, D, F>(_: impl Fn(A, B, C, D) -> F) -> usize {
            std::mem::size_of::<F>()
        }
        let (handle, pipeline) = (output_size(handle), pipeline_size(respond));
        assert!(
            handle <= pipeline + 64,
            "{handle} bytes for a {pipeline}-byte pipeline"
        );
    }

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

    #[test]
    fn rewritten_targets_follow_nginx_query_rules() {
        let rewrite = |target: &str, template: &str| {
            let (mut head, ()) = Request::get(target).body(()).unwrap().into_parts();
            let pattern = regex::Regex::new("^/a(.*)").unwrap();
            let rewritten = model::Rewrite::parse(template, None)
                .unwrap()
                .apply(Some(&pattern), head.uri.path())
                .unwrap();
            set_rewritten(&mut head, rewritten).unwrap();
            head.uri.to_string()
        };
        assert_eq!(rewrite("/a?x=1", "/b"), "/b?x=1");
        assert_eq!(rewrite("/a?x=1", "/b?y=2"), "/b?y=2&x=1");
        assert_eq!(rewrite("/a?x=1", "/b?"), "/b");
        assert_eq!(rewrite("/a", "/b?y=2"), "/b?y=2");
        assert_eq!(rewrite("/a", "b c"), "/b%20c");
        assert_eq!(rewrite("/a/c?x=1", "/b$1?y=$1"), "/b/c?y=/c&x=1");
    }
}
