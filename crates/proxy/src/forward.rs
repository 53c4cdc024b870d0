//! One client request, from head to response: the data path of DESIGN.md below the swap line.
//!
//! One pipeline with fixed phases; each phase reads its block of the route's policy
//! (`model::policy`), from the same snapshot as the route. The phases are in this order, in
//! the file named on the right (this one when none):
//!
//! ```text
//!  request ─▶ current config? ─no─▶ 503
//!   blocked    block-cidrs, block-user-agents, block-referers (model::edge) ─▶ 403
//!   normalise  CONNECT, TRACE ─▶ 405 │ Host missing, repeated, invalid,      normalise.rs
//!              ≠ :authority ─▶ 400 │ path decoded and normalised           (model::target)
//!              (NUL, `%zz`, above `/` ─▶ 400); the client address, once    (ConnCtx::client_ip)
//!   pre-routing  a Gateway listener's filters (GEP-5224): its ExternalAuth  pre_routing.rs
//!              sub-requests in order; a deny ─▶ the auth server's answer │ a filter that
//!              cannot run ─▶ 500; header changes seen by routing (never Host)
//!   route      from-to-www twin ─▶ http-redirect-code │ the first rule whose path and
//!              conditions hold (model::routes; a host's unmatched path: its root, the
//!              first Ingress's policy, then 404 after auth) ─none─▶ 404; an affinity
//!              cookie naming a side of a canary keeps it there, before the canary's
//!              header, cookie and weight (sticky canary); else a weighted split draws affinity.rs
//!   client cert  auth-tls-* (HTTPS here; plain HTTP after the redirects):  client_cert.rs
//!              handshake for another name ─▶ 421 │ none with on ─▶ 400 │   (model::client_cert)
//!              did not verify ─▶ 400 (or 302 to auth-tls-error-page; a path:
//!              routed again to it, a GET without body: nginx's internal redirect) │
//!              subject not auth-tls-match-cn ─▶ 403
//!   access     route refused by its config ─▶ 503 │ CORS: an OPTIONS       cors.rs
//!              granted ─▶ 204 (before the allow-lists, as ingress-nginx's   (model::cors)
//!              rewrite phase) │ client address not allowed ─▶ 403 (satisfy: any
//!              with auth: the auth phase decides)
//!   limits     limit-rps/-rpm over the burst ─▶ limit-req-status-code │     limits.rs
//!              limit-connections in progress ─▶ limit-conn-status-code     (model::limits)
//!              (the trusted client address, limit-allowlist exempt; zones shared by workers);
//!              limit-rate: the response body paced (set with the guard, below)
//!   answer here  app-root (`/`) ─▶ 302 │ permanent/temporal-redirect │     answer_here.rs
//!              Gateway API RequestRedirect (port from the listener) │
//!              ssl-redirect (plain HTTP, host with TLS or forced, no X-Forwarded-Proto:
//!              https from a trusted balancer)
//!   rewrite    rewrite-target with the path regex's captures (else the     rewrite.rs
//!              normalised path); a capture leaving the fixed prefix or the root ─▶ 400
//!   auth       (skipped with satisfy: any when the allow-list let the client in)  auth.rs
//!              declared body > proxy-body-size ─▶ 413 │ auth-type:          basic_auth.rs
//!              basic or digest                                           digest_auth.rs
//!              Authorization not a user's ─▶ 401 (Authorization then not sent upstream) │
//!              auth-url (global-auth-url): a sub-request to the auth server (or the
//!              auth cache): 2xx ─▶ auth-response-headers copied on │     (model::auth)
//!              401 ─▶ 401 or 302 to auth-signin │ 403 ─▶ 403 │ else ─▶ 500
//!   body       declared body > proxy-body-size ─▶ 413 │ proxy-request-     buffer.rs
//!              buffering on (no upgrade): read whole (memory, else a temporary file; too
//!              large ─▶ 413, client-body-timeout ─▶ 408) before any upstream is chosen
//!   mirror     mirror-target: a copy of the request as it came (the client's  mirror.rs
//!              headers, before the proxy writes its own), to the
//!              mirror's endpoints on its own task (max mirror-max-in-flight
//!              per worker); a streamed body teed; never waited for
//!   request headers   the proxy's own, then upstream-vhost,                headers.rs
//!              X-Forwarded-Prefix, ssl-client-* (client_cert.rs), the route's header edits,
//!              connection-proxy-header (HTTP/1.1, not upgrades; close: not pooled, client.rs)
//!   trace      the route traces: traceparent (+ tracestate) upstream       trace_context.rs
//!   upstream   default-backend while the Service has no ready endpoint     errors.rs
//!              (X-Code: 503); the affinity cookie's endpoint (else a new    affinity.rs
//!              one, and a cookie); upstream-hash-by's ring or load-balance; hash_key.rs, ring.rs
//!              the attempts (tries, timeouts, proxy-next-upstream)         attempts.rs
//!              HTTP/1.1 (pool, 101 ─▶ tunnel task) │ HTTP/2 and gRPC       upstream.rs,
//!              (streams on shared connections, trailers, grpc-timeout)     upstream_h2.rs
//!   errors     custom-http-errors: a listed answer ─▶ the same pipeline     errors.rs
//!              to the error backend (path /, X-Code, X-Original-URI, names)
//!   response headers   hide-headers (the upstream's answers), Server as       (model::edge)
//!              server-tokens says; proxy-redirect-*, proxy-cookie-* (the upstream's answers);  response_headers.rs
//!              the affinity Set-Cookie (a client pinned anew, never        affinity.rs
//!              rewritten); the route's header edits, reframed; CORS headers
//!              (granted requests, Sluice's own errors too, not error pages);  cors.rs
//!              HSTS on HTTPS for hosts with a certificate
//!   log        access log line, metrics, span (when the response body ends) worker.rs
//!  every error ─▶ ProxyError::classify (the one status mapping) ─▶ answer::error_response
//!                 (a gRPC error on gRPC routes and for requests with content-type
//!                 application/grpc)
//! ```
//! A route without annotations shares the default policy: every phase is an `is_none()` or
//! `is_empty()` check.
//!
//! The request headers are written after the body and mirror phases (issue 25 lists them
//! before the body): the mirror copies the request as the client sent it, and the body phase
//! reads only the client's framing, which no header edit may change, so nothing a client or
//! a backend sees depends on the difference.

use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures_util::future::Either;
use futures_util::FutureExt;
use http::request::Parts;
use http::{header, HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body::Body;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use model::access_log::{Segment, Variable};
use model::policy::Tracing;
use model::{normalize_path, Compiled, Route, UpstreamProtocol};
use tokio::io::AsyncWriteExt;

use crate::access_log::{Record, RequestId};
use crate::affinity::{self, Sticky};
use crate::answer::error_response;
use crate::answer_here::{redirect_phase, www_redirect};
use crate::attempts::Attempts;
use crate::auth::{self, AuthAdds};
use crate::body::BoxError;
use crate::buffer::{self, BodyBuffering, Place};
use crate::client::Outgoing;
use crate::cors::{preflight_response, CorsHeaders};
use crate::error::{Chain, ProxyError};
use crate::errors::{self, OriginalHead};
use crate::hash_key;
use crate::headers;
use crate::metrics;
use crate::mirror;
use crate::normalise::request_host;
use crate::pipeline::ClientUpgrade;
use crate::request_body::{ClientBody, RequestBody};
use crate::request_timeout;
use crate::response_body::ResponseBody;
use crate::response_headers::{self, hsts_value, reframe};
use crate::rewrite::{set_path, set_rewritten};
use crate::trace_context::Trace;
use crate::upstream::{self, Exchange, Pending, UpstreamBody, UpstreamIo};
use crate::upstream_h2::{self, H2Request, H2Target};
use crate::worker::{ConnCtx, RequestGuard};

/// Answers one client request that came through hyper (HTTP/1 requests the inline server
/// hands over). Never fails: every problem is a status code (the `Result` is hyper's service
/// signature, so hyper can take this future as it is).
///
/// A head over `max_head` (`large-client-header-buffers`) is refused 431 here, as the inline
/// server refuses it: hyper's own bound is only checked while a head is incomplete, so a head
/// that completed within one read of its (larger) buffer would otherwise be served.
pub(crate) fn handle(
    conn: Rc<ConnCtx>,
    mut request: Request<Incoming>,
    max_head: usize,
) -> impl Future<Output = Result<Response<ResponseBody>, Infallible>> {
    let client_upgrade = headers::is_websocket_upgrade(request.headers())
        .then(|| ClientUpgrade::Http1(hyper::upgrade::on(&mut request)));
    let (head, body) = request.into_parts();
    if metrics::request_head_length(&head) > max_head as u64 {
        return Either::Left(std::future::ready(Ok(refuse_oversized_head(&conn, &head))));
    }
    let body = (!body.is_end_stream()).then_some(ClientBody::Http1(body));
    // Mapped rather than awaited in an `async` block: the block would hold the pipeline's
    // future twice (captured, then moved to be awaited).
    Either::Right(respond(conn, head, body, client_upgrade).map(Ok))
}

/// 431 for a head hyper parsed whole though it is over the limit; the connection ends after
/// it, as after the inline server's 431 (its body, if any, is never read).
#[cold]
fn refuse_oversized_head(conn: &ConnCtx, head: &Parts) -> Response<ResponseBody> {
    let error = ProxyError::RequestHeadTooLarge;
    tracing::debug!(error = %Chain(&error), "refusing a request head");
    let (status, source) = error.classify();
    conn.worker
        .stats
        .borrow_mut()
        .error(status.as_u16(), source);
    let mut response = error_response(&error, false);
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    let body_bytes = response.body().size_hint().exact().unwrap_or(0);
    conn.log_refused(Some(head), status.as_u16(), (0, body_bytes));
    response
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
    let config: Option<&Compiled> = current.as_deref().map(|c| &**c);
    // Once per request, from the head as it came: the access phase, the log and the
    // forwarded headers all name this one.
    let client = config.map_or_else(|| conn.peer(), |c| conn.client_ip(&head, &c.settings));
    guard.client = client;
    // Response compression: what the client allows, read from its head as it came (nginx
    // reads headers_in, which no edit for the upstream changes); never for an upgrade.
    let compression = config
        .map(|c| &c.settings.compression)
        .filter(|c| c.enabled() && client_upgrade.is_none())
        .map(|c| (c, crate::compress::allowed(&head, c)));
    if let Some(current) = current
        .as_ref()
        .filter(|c| c.access_log.is_some() || c.tracing)
    {
        guard.record = Record::begin(current, &head, client, guard.measure.request_bytes, nth);
    }
    // The errors phase sends the client's request as it came: kept only where it may be used.
    guard.original = config
        .filter(|c| c.any_custom_errors)
        .map(|_| Box::new(OriginalHead::of(&head)));
    let mut cors = None;
    let mut auth_adds = None;
    // The route's response header values with nginx variables, made from the request once
    // routed (before the proxy changes it for the upstream).
    let mut response_values: Box<[Option<HeaderValue>]> = Box::default();
    // The ConfigMap's block lists, before anything else looks at the request (ingress-nginx
    // checks them first in every server block).
    let blocked = config
        .and_then(|c| c.blocklist.as_deref())
        .is_some_and(|list| list.blocks(client, &head.headers));
    // Gateway API's pre-routing filters of the request's listener (GEP-5224), before any
    // route is matched; boxed, so requests of listeners without them do not carry the future.
    let stage = config
        .filter(|_| !blocked)
        .and_then(|c| Some((c, crate::pre_routing::stage(&conn, c, &head)?)));
    let mut body = body;
    // The answer boxed: only a pointer is held across the awaits below.
    let filtered = match stage {
        Some((config, stage)) => {
            let mut adds = AuthAdds::default();
            let run = crate::pre_routing::run(
                &conn,
                config,
                stage,
                (&mut head, &mut body, client),
                &mut adds,
            );
            let answer = Box::pin(run).await.map(Box::new);
            if !adds.is_empty() {
                auth_adds = Some(Box::new(adds));
            }
            answer
        }
        None => None,
    };
    let (result, route, hsts, upstream_answered) = match config {
        None => (Err(ProxyError::NotReady), None, false, false),
        Some(_) if blocked => (Err(ProxyError::Blocked), None, false, false),
        Some(_) if filtered.is_some() => {
            let answer = filtered.expect("checked");
            (*answer, None, false, false)
        }
        Some(config) => match route(&conn, config, &mut head, client, &mut cors) {
            Err(error) => (Err(error), None, false, false),
            Ok(routed) => {
                // Sent to auth-tls-error-page's path: nginx's internal redirect drops the body.
                let redirected = head.extensions.get::<crate::client_cert::ToErrorPath>();
                let mut body = body.filter(|_| redirected.is_none());
                let routed_to = match &routed {
                    Routed::Answer { route, .. } => *route,
                    Routed::Refused { route, .. } | Routed::Forward { route, .. } => Some(*route),
                };
                let templates = routed_to.filter(|r| r.policy.response_headers_have_templates());
                if let Some(route) = templates {
                    let forwarded = (client != conn.peer()).then_some(client);
                    let edits = &route.policy.response_headers;
                    response_values = header_values(&conn, route, &mut head, forwarded, edits);
                }
                match routed {
                    Routed::Answer { route, response } => (Ok(*response), route, false, false),
                    Routed::Refused { route, error } => (Err(error), Some(route), false, false),
                    Routed::Forward {
                        route,
                        tls,
                        authenticate,
                        slot,
                    } => {
                        guard.limit_slot = slot;
                        // Counted under its route even if the client leaves before the answer.
                        let counted = worker.stats.borrow_mut().route(Some(route)).clone();
                        guard.measure.route = Some(counted);
                        // User and external auth: boxed, so requests of routes without them do not
                        // carry their future.
                        let policy = &route.policy;
                        let guarded = policy.user_auth.is_some() || policy.external_auth.is_some();
                        let denied = if guarded && authenticate {
                            let phase =
                                auth::phase(&conn, config, route, (&mut head, &mut body), client);
                            let (denied, adds) = Box::pin(phase).await;
                            match &mut auth_adds {
                                Some(earlier) => earlier.extend(adds),
                                None => auth_adds = Some(Box::new(adds)),
                            }
                            denied
                        } else {
                            None
                        };
                        if let Some(result) = denied {
                            (result, Some(route), tls && conn.https, false)
                        } else if route.not_found {
                            // A host's root location without a default backend: its policy
                            // let the request through to ingress-nginx's built-in 404.
                            let result = Err(ProxyError::NoRoute);
                            (result, Some(route), tls && conn.https, false)
                        } else {
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
                            // Gateway API: the share of an unusable backendRef answers 500
                            // (decided here, off the path of a request that has endpoints).
                            let result = match result {
                                Err(ProxyError::NoEndpoints) if route.policy.invalid_backend => {
                                    Err(ProxyError::InvalidBackend)
                                }
                                other => other,
                            };
                            let answered = result.is_ok();
                            (result, Some(route), tls && conn.https, answered)
                        }
                    }
                }
            }
        },
    };
    if let (Some(record), Some(config)) = (guard.record.as_deref_mut(), config) {
        record.unlogged = !config.settings.enable_access_log_for_default_backend
            && answered_by_default_server(config, route, &result);
    }
    let mut response = match result {
        Ok(response) => response,
        Err(error) => {
            tracing::debug!(error = %Chain(&error), "answering with an error");
            if matches!(error, ProxyError::BodyTooLarge { .. })
                && head.headers.contains_key(header::CONTENT_LENGTH)
            {
                // nginx refuses a declared length before the location's rewrite phase, where
                // CORS is decided; a body found too large while read gets the headers.
                cors = None;
            }
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
    // The error backend's answer goes out as it came: the route's header edits belong to the
    // route's answers (nginx's named error location has none of the location's directives).
    let mut error_page_made = false;
    let original = guard.original.take();
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
            error_page_made = true;
        }
    }
    // hide-headers and Server (server-tokens): before the route's edits, which may set them
    // again (nginx's proxy_hide_header drops only what the upstream sent).
    if let Some(config) = config {
        let from_upstream = upstream_answered || error_page_made;
        config
            .response_filter
            .apply(response.headers_mut(), from_upstream);
    }
    // nginx's proxy_redirect / proxy_cookie_*: on what the upstream answered, before the
    // route's own edits (which nginx's add_header makes after the proxy module).
    if let Some(rewrite) = route
        .filter(|_| upstream_answered && !error_page_made)
        .and_then(|r| r.policy.response_rewrite.as_deref())
    {
        response_headers::rewrite(response.headers_mut(), rewrite);
    }
    // The affinity cookie: not rewritten by proxy-cookie-* (nginx's proxy module rewrites
    // only the upstream's), before the route's edits (nginx's header filters run after
    // ingress-nginx's balancer set it); an error page is not the route's answer.
    if route.is_some_and(|r| r.policy.affinity.is_some()) && !error_page_made {
        affinity::set_cookie(&mut response);
    }
    let edits = route.filter(|r| !error_page_made && !r.policy.response_headers.is_empty());
    if let Some(route) = edits {
        for (i, edit) in route.policy.response_headers.iter().enumerate() {
            edit.apply(
                response.headers_mut(),
                response_values.get(i).cloned().flatten(),
            );
        }
        reframe(&mut response, &head.method);
    }
    // After the route's edits (CORS's replace theirs); an error page is not the route's.
    if let Some(cors) = cors.filter(|_| !error_page_made) {
        cors.apply(response.headers_mut());
    }
    // The auth server's cookies (and a 401's WWW-Authenticate), as nginx's add_header: on
    // every answer of the location, an error page's too.
    if let Some(adds) = auth_adds {
        adds.apply(&mut response);
    }
    if hsts {
        if let Some(value) = config.and_then(|c| c.hsts_header.as_deref()) {
            response
                .headers_mut()
                .insert(header::STRICT_TRANSPORT_SECURITY, hsts_value(value));
        }
    }
    // Compression last, after every header edit (nginx's gzip and brotli header filters run
    // after add_header's), on Sluice's own answers too, as nginx's filters see its pages.
    if let Some((settings, allowed)) = compression {
        let (status, length) = (response.status(), response.body().size_hint().exact());
        let headers = response.headers_mut();
        let method = &head.method;
        if let Some(compressor) =
            crate::compress::respond(headers, status, method, length, allowed, settings)
        {
            response.body_mut().compress(compressor);
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
    // Terminating too (SIGTERM, within `--shutdown-grace-period`): the listeners still accept,
    // but each connection ends after its response, so that clients move to the replicas still
    // ready before they close. (The inline HTTP/1 server asks `ConnCtx::closing`.)
    if (nth >= max_requests || conn.worker.shared.is_terminating())
        && response.status() != StatusCode::SWITCHING_PROTOCOLS
    {
        if conn.h2 {
            conn.close_after_this();
        } else {
            // hyper closes the connection after a response that says so.
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
    }
    // limit-rate: the body paced from the request's arrival, as nginx's limit_rate.
    if let Some(limits) = route
        .and_then(|r| r.policy.limits.as_deref())
        .filter(|l| l.rate > 0 && response.status() != StatusCode::SWITCHING_PROTOCOLS)
    {
        response
            .body_mut()
            .throttle(limits.rate, limits.rate_after, guard.start);
    }
    response.body_mut().set_guard(guard);
    response
}

/// Whether ingress-nginx's default server (`_`) would have answered: no host or rule matched,
/// and Sluice answered 404 itself (bare, or behind the table's default server) or through
/// `--default-backend-service` (its catch-all, which is the table's host default too).
fn answered_by_default_server<T>(
    config: &Compiled,
    route: Option<&Arc<Route>>,
    result: &Result<T, ProxyError>,
) -> bool {
    match route {
        None => matches!(result, Err(ProxyError::NoRoute)),
        Some(route) => {
            let routes = &config.routes;
            (routes.host_default())
                .is_some_and(|default| Arc::ptr_eq(default, route) && !route.not_found)
                || (routes.default_server()).is_some_and(|server| Arc::ptr_eq(server, route))
        }
    }
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
    /// `tls`: the host has its own certificate (HSTS applies); `authenticate`: the auth
    /// phases run (not when `satisfy: any` and the allow-list let the client in); `slot`: the
    /// request's place under `limit-connections`, held until it ends.
    Forward {
        route: &'c Arc<Route>,
        tls: bool,
        authenticate: bool,
        slot: Option<Box<crate::limits::ConnSlot>>,
    },
}

/// The values of `edits`' templates (header values with nginx variables) for this request, by
/// the edits' order (called only for edits with templates). `$request_id` makes sure the
/// request has an `X-Request-ID` (the one the upstream then gets too).
fn header_values(
    conn: &ConnCtx,
    route: &Route,
    head: &mut Parts,
    forwarded_client: Option<IpAddr>,
    edits: &[model::policy::HeaderEdit],
) -> Box<[Option<HeaderValue>]> {
    let wants_id = edits.iter().filter_map(|e| e.template()).any(|t| {
        t.segments
            .iter()
            .any(|s| matches!(s, Segment::Variable(Variable::ReqId)))
    });
    if wants_id && !head.headers.contains_key(headers::X_REQUEST_ID_NAME) {
        let id = HeaderValue::from_bytes(&headers::request_id()).expect("hex digits");
        head.headers.insert(headers::X_REQUEST_ID_NAME, id);
    }
    let head = &*head;
    conn.with_key_inputs(head, forwarded_client, &route.site.host, |inputs| {
        edits
            .iter()
            .map(|edit| {
                let template = edit.template()?;
                let mut value = Vec::with_capacity(64);
                for segment in template.segments.iter() {
                    match segment {
                        Segment::Literal(text) => value.extend_from_slice(text.as_bytes()),
                        Segment::Variable(v) => hash_key::fill(&mut value, v, head, inputs),
                    }
                }
                HeaderValue::from_bytes(&value).ok()
            })
            .collect()
    })
}

/// The phases before the upstream: normalise, route, access, redirect, rewrite (see the
/// module doc). The request head leaves with the target it is sent upstream with; `cors`
/// with the CORS headers its answer gets, whatever answers.
fn route<'c>(
    conn: &ConnCtx,
    config: &'c Compiled,
    head: &mut Parts,
    client: IpAddr,
    cors: &mut Option<CorsHeaders<'c>>,
) -> Result<Routed<'c>, ProxyError> {
    if head.method == Method::CONNECT || head.method == Method::TRACE {
        // An ingress is not a forward proxy, and TRACE echoes credentials back (nginx: 405).
        return Err(ProxyError::MethodNotAllowed);
    }
    let host = request_host(head)?;
    let path = normalize_path(head.uri.path()).map_err(ProxyError::BadTarget)?;
    let settings = &config.settings;
    // A Gateway's own address (`sites`) has its own routes; else the shared ones.
    let routes = config.site(conn.local).routes;
    if let Some(to) = routes.www_redirect(host) {
        let response = Box::new(www_redirect(conn, head, settings, to));
        return Ok(Routed::Answer {
            route: None,
            response,
        });
    }
    // The listener the request came in on: Gateway API rules may answer on one only.
    let on = conn.on;
    // Gateway API: a Host that another HTTPS listener than the handshake's owns is 421.
    if conn.https && routes.misdirected(on, conn.sni.as_deref(), host) {
        return Err(ProxyError::Misdirected);
    }
    let Some(mut matched) = routes.route_on(on, host, &path.routed, head) else {
        return Err(ProxyError::NoRoute);
    };
    // A weighted split (canary-weight) draws here, once: every later phase sees one route;
    // a client whose affinity cookie names one side stays there, whatever rule matched
    // (sticky canaries, ingress-nginx's balancer order).
    matched.route = match affinity::sticky_side(matched.route, head) {
        Some(side) => side,
        None => matched.route.pick(|total| fastrand::u32(1..=total)),
    };
    let route = matched.route;
    let policy = &*route.policy;

    // Client certificates over HTTPS: nginx answers 495/496 as soon as the head is read,
    // before anything of the server or location runs (plain HTTP: after the redirects).
    if conn.https {
        if let Some(answer) = client_cert_phase(conn, config, host, route, head) {
            return cert_answer(conn, config, head, client, cors, answer);
        }
    }
    // Access. A refusal allocates its reason; only refused requests pay for it.
    if let Some(why) = &policy.denied {
        let error = ProxyError::RouteRefused(why.clone());
        return Ok(Routed::Refused { route, error });
    }
    // CORS, as ingress-nginx's location runs it: in the rewrite phase, so a preflight is
    // answered before the allow-lists (and auth) are asked, and their refusals carry the
    // headers. A refused route (above) has none: ingress-nginx's denied location writes none.
    if let Some(policy_cors) = &policy.cors {
        // ingress-nginx redirects to app-root in the server, before the location's CORS.
        if matched.app_root.is_none() || path.routed != "/" {
            *cors = CorsHeaders::grant(policy_cors, head);
            // Gateway API: a preflight from an origin not allowed is answered too, without
            // CORS headers (the browser then refuses), never passed to the backend.
            let refused = cors.is_none() && crate::cors::refused_preflight(policy_cors, head);
            if refused || cors.as_ref().is_some_and(|c| c.preflight) {
                return Ok(Routed::Answer {
                    route: Some(route),
                    response: Box::new(preflight_response()),
                });
            }
        }
    }
    // `satisfy: any`: the allow-list or the authentication suffices (nginx's access phase).
    let mut authenticate = true;
    if !policy.access.is_open() {
        let allowed = policy.access.allows(client);
        let has_auth = policy.user_auth.is_some() || policy.external_auth.is_some();
        if policy.satisfy_any && has_auth {
            authenticate = !allowed;
        } else if !allowed {
            let error = ProxyError::Forbidden;
            return Ok(Routed::Refused { route, error });
        }
    }
    // Limits: keyed by the client address worked out above (never a balancer's).
    let mut slot = None;
    if let Some(limits) = &policy.limits {
        match crate::limits::check(&conn.worker.shared.limits, limits, settings, head, client) {
            Ok(held) => slot = held,
            Err(error) => return Ok(Routed::Refused { route, error }),
        }
    }

    // Redirects.
    if let Some(response) = redirect_phase(conn, head, settings, &matched, &path.routed) {
        return Ok(Routed::Answer {
            route: Some(route),
            response: Box::new(response),
        });
    }
    if !conn.https {
        if let Some(answer) = client_cert_phase(conn, config, host, route, head) {
            return cert_answer(conn, config, head, client, cors, answer);
        }
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
        authenticate,
        slot,
    })
}

/// `auth-tls-*`: a missing or bad certificate is answered 400 (or sent to the error page),
/// a subject `auth-tls-match-cn` does not match 403. `None`: the request goes on.
fn client_cert_phase<'c>(
    conn: &ConnCtx,
    config: &Compiled,
    host: &str,
    route: &'c Arc<Route>,
    head: &Parts,
) -> Option<CertAnswer<'c>> {
    let policy = route.policy.client_cert.as_ref()?;
    if head
        .extensions
        .get::<crate::client_cert::ToErrorPath>()
        .is_some()
    {
        return None;
    }
    let presented = conn.presented();
    // nginx's 421: the handshake was for another name (HTTP/2 connection reuse, or a client
    // naming one host in SNI and another in Host) while this host's handshake asks for a
    // certificate; a browser retries on a connection of its own.
    // The rules without host have the catch-all's handshake (nginx's default server), which
    // every name without a host of its own shares.
    let asks = |h: &Arc<model::tls::HostTls>| h.client_cert_request.is_some();
    // A prefix of an ASCII `str`: the slice is whole characters.
    let name = &host[..model::target::strip_port(host.as_bytes()).len()];
    if conn.https && policy.verify != model::client_cert::VerifyClient::Off {
        let site = config.site(conn.local);
        let server = site.certificates.server(site.routes, Some(name));
        if !presented.asked_for(server.name) && server.tls.is_some_and(asks) {
            let error = ProxyError::Misdirected;
            return Some(CertAnswer::Routed(Routed::Refused { route, error }));
        }
    }
    let routed = match crate::client_cert::decide(presented, policy) {
        crate::client_cert::Decision::Pass => return None,
        crate::client_cert::Decision::Refuse(error) => Routed::Refused { route, error },
        crate::client_cert::Decision::ErrorPage(page) if page.as_bytes().starts_with(b"/") => {
            return Some(CertAnswer::ErrorPath(page));
        }
        crate::client_cert::Decision::ErrorPage(location) => Routed::Answer {
            route: Some(route),
            response: Box::new(crate::answer_here::found(location)),
        },
    };
    Some(CertAnswer::Routed(routed))
}

/// What the client certificate phase decided, when it decided.
enum CertAnswer<'c> {
    Routed(Routed<'c>),
    /// `auth-tls-error-page` is a path: the same server serves it (nginx's internal redirect).
    ErrorPath(HeaderValue),
}

/// The request as the client certificate phase decided: answered or refused here, or routed
/// again to the error page's path (its certificate not checked again; every other phase of
/// that path's route runs, as nginx's internal redirect runs the location's).
fn cert_answer<'c>(
    conn: &ConnCtx,
    config: &'c Compiled,
    head: &mut Parts,
    client: IpAddr,
    cors: &mut Option<CorsHeaders<'c>>,
    answer: CertAnswer<'c>,
) -> Result<Routed<'c>, ProxyError> {
    match answer {
        CertAnswer::Routed(routed) => Ok(routed),
        CertAnswer::ErrorPath(page) => {
            if !crate::client_cert::to_error_path(head, &page) {
                return Err(ProxyError::ClientCertInvalid);
            }
            *cors = None;
            route(conn, config, head, client, cors)
        }
    }
}

/// The phases from the request headers to the upstream's answer (see the module's map).
///
/// One async fn (~185 lines) for the reason `respond` is one: each layer would keep its own
/// copy of the request in the future on the hot path. The HTTP/2 and upgrade branches are
/// boxed, so the plain HTTP/1.1 request's future does not carry them.
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
    let deadline = request_timeout::deadline(&route.policy.upstream, arrived);
    let mut record = guard.record.as_deref_mut();
    let settings = &config.settings;
    let buffering = BodyBuffering::of(&route.policy);
    let limit = buffering.max;
    let body = match body {
        None => RequestBody::Empty,
        // Read whole for an auth filter's forwardBody: sent as read, with its length.
        Some(ClientBody::Read(read)) if limit > 0 && read.len() > limit => {
            return Err(ProxyError::BodyTooLarge { limit });
        }
        Some(ClientBody::Read(read)) => {
            head.headers
                .insert(header::CONTENT_LENGTH, HeaderValue::from(read.len()));
            if read.len() == 0 {
                RequestBody::Empty
            } else {
                RequestBody::Buffered(*read)
            }
        }
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
    let forwarded = conn.forwarded(guard.client, settings);
    let forwarded_client = forwarded.client;
    // Mirror: a copy of the request as it came (after access, redirects and the rewrite;
    // before the proxy's own headers), sent without waiting for it.
    // Gateway API's several RequestMirror filters: a copy for each.
    let body = match &policy.mirror {
        Some(mirror) => mirror.chain().fold(body, |body, mirror| {
            start_mirror(conn, mirror, route, head, body, forwarded_client)
        }),
        None => body,
    };
    // Header values with nginx variables: made from the request as it is now, before the
    // proxy's own headers are written (no allocation for routes without).
    let request_values = if policy.request_headers_have_templates() {
        header_values(conn, route, head, forwarded_client, &policy.request_headers)
    } else {
        Box::default()
    };
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
    if let Some(client_cert) = &policy.client_cert {
        crate::client_cert::set_headers(conn.presented(), client_cert, &mut head.headers);
    }
    for (i, edit) in policy.request_headers.iter().enumerate() {
        edit.apply(&mut head.headers, request_values.get(i).cloned().flatten());
    }
    // Not kept across the upstream's await (the future would carry it).
    drop(request_values);
    // connection-proxy-header: HTTP/2 has no Connection header, and an upgrade needs its own.
    if let Some(connection) = policy
        .connection_header
        .filter(|_| !http2 && client_upgrade.is_none())
    {
        head.headers.insert(header::CONNECTION, connection.value());
    }
    if let (Some(original), Some(id)) =
        (guard.original.as_deref_mut(), added.generated_request_id())
    {
        original.request_id = HeaderValue::from_bytes(id).ok();
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
    let hash = policy.hash_by.as_ref().map(|hash_by| {
        let hash = key_hash(conn, hash_by, head, forwarded_client, &route.site.host);
        (hash, hash_by.subset)
    });
    // `affinity`: the session cookie's endpoint. Boxed: routes without it carry 8 bytes.
    let mut sticky = policy
        .affinity
        .as_deref()
        .map(|affinity| Box::new(Sticky::new(affinity, &head.headers)));
    let mut attempts = Attempts::new(
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
    if let Some(sticky) = sticky.as_deref_mut() {
        attempts.stick(sticky);
    }
    if http2 {
        let tls = policy.upstream_tls.is_some();
        upstream_h2::http2_head(head, &added, tls, te_trailers);
        let request = H2Request {
            head,
            body,
            arrived,
        };
        // Boxed: the HTTP/1.1 path's future does not carry this one.
        let exchanged = Box::pin(request_timeout::within(
            deadline,
            upstream_h2::exchange(
                &conn.worker.upstreams,
                settings,
                H2Target::of(policy),
                request,
                attempts,
            ),
        ))
        .await;
        return match exchanged {
            Ok(mut response) => {
                if let (Some(sticky), Some(affinity)) = (&sticky, &policy.affinity) {
                    affinity::keep_cookie(&mut response, sticky, affinity, route, conn.https);
                }
                Ok(response.map(ResponseBody::http2))
            }
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
        added: Some(added),
        body: &mut body,
        retryable,
        upgrade: client_upgrade.is_some(),
    };
    let exchange = upstream::exchange(
        &conn.worker.upstreams,
        settings,
        upstream_policy,
        policy.upstream_tls.as_ref(),
        pending,
        attempts,
    );
    let exchanged = request_timeout::within(deadline, exchange).await;
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
    if let (Some(sticky), Some(affinity)) = (&sticky, &policy.affinity) {
        affinity::keep_cookie(&mut response, sticky, affinity, route, conn.https);
    }

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
    forwarded_client: Option<IpAddr>,
    server_name: &str,
) -> u64 {
    conn.with_key_inputs(head, forwarded_client, server_name, |inputs| {
        hash_key::request_hash(hash_by, head, inputs)
    })
}

/// The mirror phase (`mirror-target`): starts a copy of the request (made by `mirror`) on its
/// own task, unless this worker has `mirror-max-in-flight` copies out already; returns the
/// body the main request goes on with (teed when it streams). Nothing here waits.
fn start_mirror(
    conn: &Rc<ConnCtx>,
    mirror: &Arc<model::mirror::Mirror>,
    route: &Route,
    head: &Parts,
    body: RequestBody,
    forwarded_client: Option<IpAddr>,
) -> RequestBody {
    // Gateway API's percent / fraction: most requests of such a route are not copied.
    if let Some(share) = mirror.share {
        if !share.takes(fastrand::u32(..share.denominator)) {
            return body;
        }
    }
    let upstreams = &conn.worker.upstreams;
    let settings = conn.worker.settings();
    let Some(slot) = upstreams.mirrors.take(settings.mirror_max_in_flight) else {
        mirror::dropped(&upstreams.stats);
        return body;
    };
    let names = headers::HeaderNames::of(&settings);
    let copy = conn.with_key_inputs(head, forwarded_client, &route.site.host, |inputs| {
        mirror::head(mirror, head, inputs, names)
    });
    let Some(copy) = copy else {
        mirror::dropped(&upstreams.stats);
        return body;
    };
    let (body, copy_body) = mirror::split_body(body, mirror.request_body);
    let send = mirror::send(
        upstreams.clone(),
        settings,
        mirror.clone(),
        route.policy.clone(),
        copy,
        copy_body,
        slot,
    );
    tokio::task::spawn_local(send);
    body
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
        .map_err(|error| ProxyError::body_unread(error, buffering.max))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// hyper copies `handle`'s future into its connection's state: it must not hold
    /// the pipeline's future twice, as an `async` block awaiting a captured future does.
    #[test]
    fn the_request_future_holds_the_pipeline_once() {
        fn output_size<A, B, C, F>(_: impl Fn(A, B, C) -> F) -> usize {
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
}
