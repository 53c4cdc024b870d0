//! The external-auth phase (`auth-url`, `global-auth-url`): before a request goes upstream, a
//! sub-request asks the auth server, as nginx's `auth_request` in ingress-nginx's template
//! does, with the auth cache (`auth-cache-key`, kept in auth_cache.rs) for every worker.
//!
//! ```text
//!  forward, after the redirects and the rewrite, before the body is read:
//!   route.policy.external_auth ─▶ cache key? ─hit─▶ the kept answer
//!      │ miss ─▶ one sub-request per key at a time (single-flight): the others wait for it
//!      ▼         and share its answer when it may be kept
//!   sub-request: the client's method (or auth-method) and headers, no body; Host the URL's;
//!      X-Original-URL, X-Original-Method, X-Sent-From, X-Real-IP, X-Forwarded-For,
//!      X-Auth-Request-Redirect, X-Request-ID (the one the upstream gets too), X-Forwarded-Proto
//!      removed; auth-proxy-set-headers; ssl-client-* (auth-tls-*) ─▶ upstream::own_request
//!      to the auth backend
//!   answer: 2xx ─▶ Granted: auth-response-headers onto the request (absent: removed), the
//!                  auth server's Set-Cookie onto the answer (SET_COOKIE_STATUSES, or always)
//!           401 ─▶ auth-signin: 302 to it │ 401 with the auth server's WWW-Authenticate
//!           403 ─▶ 403 │ anything else, no answer ─▶ 500
//! ```
//! The cache keeps an answer by nginx's `proxy_cache` rules: its status has a duration in
//! `auth-cache-duration`, it sets no cookie, its `Cache-Control` allows keeping it (`max-age`
//! overrides the duration). Its size is bounded by the ConfigMap's `auth-cache-max-entries`;
//! the least recently used key goes first.

use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode, Uri};
use http_body::Body;
use http_body_util::BodyExt;
use model::access_log::Segment;
use model::auth::{
    escape_uri_component, AuthDestination, AuthProtocol, AuthUri, ExternalAuth, GatewayAuth,
    SigninPart, SET_COOKIE_STATUSES,
};
use model::policy::{UpstreamPolicy, UserAuth};
use model::{normalize_path, Compiled, Route, Settings};

use crate::answer::text_response;
use crate::attempts::Attempts;
use crate::auth_cache::{Kept, Lookup};
use crate::body::BoxError;
use crate::buffer::{self, Buffered};
use crate::digest_auth::Outcome;
use crate::error::{Chain, ProxyError};
use crate::ext_authz;
use crate::hash_key::{self, KeyInputs};
use crate::headers::{self, X_FORWARDED_PROTO};
use crate::request_body::{ClientBody, RequestBody};
use crate::response_body::ResponseBody;
use crate::upstream;
use crate::upstream_h2::{self, H2Request, H2Target};
use crate::worker::ConnCtx;

/// The longest cache key kept (a longer one is not cached: an `Authorization` of megabytes
/// must not fill the cache).
const KEY_MAX: usize = 8 * 1024;

static X_ORIGINAL_URL: HeaderName = HeaderName::from_static("x-original-url");
static X_ORIGINAL_METHOD: HeaderName = HeaderName::from_static("x-original-method");
static X_ORIGINAL_URI: HeaderName = HeaderName::from_static("x-original-uri");
static X_SCHEME: HeaderName = HeaderName::from_static("x-scheme");
static X_SENT_FROM: HeaderName = HeaderName::from_static("x-sent-from");
static X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");
static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_AUTH_REQUEST_REDIRECT: HeaderName = HeaderName::from_static("x-auth-request-redirect");
static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
static AUTHENTICATION_INFO: HeaderName = HeaderName::from_static("authentication-info");

/// What the phase decided.
enum Checked {
    /// The request goes on; `AuthAdds` goes on its answer.
    Granted(AuthAdds),
    /// Answered here: a redirect to sign in (`Ok`) or a refusal (`Err`), with what goes on it.
    Denied(Box<Result<Response<ResponseBody>, ProxyError>>, AuthAdds),
}

/// What the auth server's answer adds to the client's.
#[derive(Default)]
pub(crate) struct AuthAdds {
    cookies: Vec<HeaderValue>,
    always: bool,
    www_authenticate: Option<HeaderValue>,
    /// Digest authentication's `Authentication-Info`, on whatever answer the client gets.
    authentication_info: Option<HeaderValue>,
    /// An ext_authz server's `response_headers_to_add` (Gateway API's GRPC `ExternalAuth`).
    pub(crate) headers: Vec<ext_authz::Mutation>,
}

impl AuthAdds {
    /// A 401's challenge alone (`WWW-Authenticate: Basic realm=…`, or digest's).
    pub(crate) fn challenge(value: HeaderValue) -> AuthAdds {
        AuthAdds {
            www_authenticate: Some(value),
            ..AuthAdds::default()
        }
    }

    /// Onto the answer the client gets: the auth server's cookies (nginx's `add_header
    /// Set-Cookie $auth_cookie`, on `SET_COOKIE_STATUSES` unless `auth-always-set-cookie`),
    /// and on a 401 its `WWW-Authenticate`.
    pub(crate) fn apply<B>(&self, response: &mut Response<B>) {
        let status = response.status();
        let headers = response.headers_mut();
        let challenge = self.www_authenticate.as_ref();
        if let Some(value) = challenge.filter(|_| status.as_u16() == 401) {
            headers.insert(header::WWW_AUTHENTICATE, value.clone());
        }
        if let Some(value) = &self.authentication_info {
            headers.insert(AUTHENTICATION_INFO.clone(), value.clone());
        }
        if self.always || SET_COOKIE_STATUSES.contains(&status.as_u16()) {
            for cookie in &self.cookies {
                headers.append(header::SET_COOKIE, cookie.clone());
            }
        }
        for mutation in &self.headers {
            if !model::auth::GatewayAuth::never_copied(&mutation.name) {
                mutation.apply(headers);
            }
        }
    }

    /// Whether there is nothing to add.
    pub(crate) fn is_empty(&self) -> bool {
        self.cookies.is_empty()
            && self.www_authenticate.is_none()
            && self.authentication_info.is_none()
            && self.headers.is_empty()
    }

    /// `later`'s additions after these (a listener's filter's, then its route's).
    pub(crate) fn extend(&mut self, later: AuthAdds) {
        self.cookies.extend(later.cookies);
        self.always |= later.always;
        if later.www_authenticate.is_some() {
            self.www_authenticate = later.www_authenticate;
        }
        if later.authentication_info.is_some() {
            self.authentication_info = later.authentication_info;
        }
        self.headers.extend(later.headers);
    }
}

/// The auth server's answer, as far as the phase needs it.
#[derive(Debug)]
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    /// Its body, when asked for and read whole (up to `upstream::OWN_ANSWER_DRAIN_MAX`).
    body: Option<Bytes>,
}

/// The auth phases of a route with user (basic or digest) or external auth, in nginx's order:
/// a declared body over the limit (413, before the access phase), user auth, then the auth
/// server. `Some`: the answer instead of the upstream's; the adds go on the client's answer
/// either way.
pub(crate) async fn phase(
    conn: &Rc<ConnCtx>,
    config: &Compiled,
    route: &Route,
    (head, body): (&mut Parts, &mut Option<ClientBody>),
    client: IpAddr,
) -> (Option<Result<Response<ResponseBody>, ProxyError>>, AuthAdds) {
    let declared = body.as_ref().and_then(|b| b.size_hint().exact());
    let limit = crate::buffer::BodyBuffering::of(&route.policy).max;
    if limit > 0 && declared.is_some_and(|len| len > limit) {
        let error = ProxyError::BodyTooLarge { limit };
        return (Some(Err(error)), AuthAdds::default());
    }
    let mut user_adds = AuthAdds::default();
    if let Some(user_auth) = &route.policy.user_auth {
        match &**user_auth {
            UserAuth::Basic(basic) => {
                if !crate::basic_auth::allows(basic, head) {
                    let adds = AuthAdds::challenge(basic.challenge.clone());
                    return (Some(Err(ProxyError::AuthRequired)), adds);
                }
            }
            UserAuth::Digest(digest) => {
                let sessions = &conn.worker.shared.digest_sessions;
                match sessions.check(digest, head, client, Instant::now()) {
                    Outcome::Granted(info) => user_adds.authentication_info = info,
                    Outcome::Challenge(challenge) => {
                        let adds = AuthAdds::challenge(challenge);
                        return (Some(Err(ProxyError::AuthRequired)), adds);
                    }
                    Outcome::Ignored => {
                        return (Some(Err(ProxyError::AuthRequired)), AuthAdds::default());
                    }
                }
            }
        }
        // ingress-nginx's template: `proxy_set_header Authorization ""` (the auth server,
        // a location of its own, still gets it).
        if route.policy.external_auth.is_none() {
            head.headers.remove(header::AUTHORIZATION);
        }
    }
    let Some(auth) = &route.policy.external_auth else {
        return (None, user_adds);
    };
    if auth.gateway.is_some() {
        // An HTTPRoute rule's ExternalAuth filter: GEP-1494's semantics, as a listener's.
        let upstream = &route.policy.upstream;
        let mut adds = AuthAdds::default();
        let request = (head, body, client);
        let denied = gateway_check(conn, config, (upstream, auth), request, &mut adds).await;
        return (denied, adds);
    }
    let checked = check(conn, config, route, auth, head, client).await;
    if route.policy.user_auth.is_some() {
        head.headers.remove(header::AUTHORIZATION);
    }
    match checked {
        Checked::Granted(adds) => {
            user_adds.extend(adds);
            (None, user_adds)
        }
        Checked::Denied(result, adds) => {
            user_adds.extend(adds);
            (Some(*result), user_adds)
        }
    }
}

/// The external-auth phase: asks (or finds in the cache) what the auth server says about
/// `head`.
async fn check(
    conn: &Rc<ConnCtx>,
    config: &Compiled,
    route: &Route,
    auth: &ExternalAuth,
    head: &mut Parts,
    client: IpAddr,
) -> Checked {
    let settings = &config.settings;
    let forwarded = conn.forwarded(client, settings);
    let https = forwarded.https;
    let trust_incoming = forwarded.trust_incoming;
    let full_forwarded_for = forwarded.full_forwarded_for;
    // nginx's `$req_id`: the client's X-Request-ID, else a new one, which the upstream then
    // gets too (ingress-nginx sends `$req_id` to both).
    let request_id = match head.headers.get(&X_REQUEST_ID) {
        Some(id) => id.clone(),
        None => {
            let id = HeaderValue::from_bytes(&headers::request_id()).expect("hex digits");
            if settings.generate_request_id {
                head.headers.insert(X_REQUEST_ID.clone(), id.clone());
            }
            id
        }
    };
    let forwarded_client = (client != conn.peer()).then_some(client);
    let pass_scheme = pass_access_scheme(head, https, trust_incoming);
    let sub = conn.with_key_inputs(head, forwarded_client, &route.site.host, |inputs| {
        let ctx = SubRequest {
            auth,
            inputs,
            client,
            pass_scheme,
            full_forwarded_for,
            request_id: &request_id,
            names: crate::headers::HeaderNames::of(settings),
        };
        let cache_key = auth
            .cache
            .as_ref()
            .and_then(|cache| cache_key(route, &cache.segments, head, inputs));
        (ctx.head(head), cache_key)
    });
    let (sub_head, cache_key) = sub;
    let Some(mut sub_head) = sub_head else {
        tracing::debug!(url = %auth.url, "auth-url expands to no valid request target");
        return Checked::Denied(Box::new(Err(ProxyError::AuthFailed)), AuthAdds::default());
    };
    // ingress-nginx's auth location sets the client certificate's headers too.
    if let Some(client_cert) = &route.policy.client_cert {
        crate::client_cert::set_headers(conn.presented(), client_cert, &mut sub_head.headers);
    }
    let answer = match cache_key {
        Some(key) => cached_ask(conn, config, route, auth, sub_head, key).await,
        None => {
            conn.worker.stats.borrow_mut().auth.misses += 1;
            let upstream = &route.policy.upstream;
            ask(
                conn,
                config,
                upstream,
                auth,
                sub_head,
                (RequestBody::Empty, false),
            )
            .await
            .map(Rc::new)
        }
    };
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => {
            tracing::warn!(url = %auth.url, error = %Chain(&error), "the auth server could not be asked; answering 500");
            return Checked::Denied(Box::new(Err(ProxyError::AuthFailed)), AuthAdds::default());
        }
    };
    let mut adds = AuthAdds {
        cookies: answer
            .headers
            .get_all(header::SET_COOKIE)
            .iter()
            .cloned()
            .collect(),
        always: auth.always_set_cookie,
        ..AuthAdds::default()
    };
    match answer.status.as_u16() {
        200..=299 => {
            for name in auth.response_headers.iter() {
                match answer.headers.get(name) {
                    Some(value) => head.headers.insert(name.clone(), value.clone()),
                    None => head.headers.remove(name),
                };
            }
            Checked::Granted(adds)
        }
        401 => match &auth.signin {
            Some(signin) => {
                let location =
                    conn.with_key_inputs(head, forwarded_client, &route.site.host, |inputs| {
                        signin_location(&signin.parts, head, inputs, pass_scheme)
                    });
                match location {
                    Some(location) => Checked::Denied(Box::new(Ok(redirect(location))), adds),
                    None => Checked::Denied(Box::new(Err(ProxyError::AuthFailed)), adds),
                }
            }
            None => {
                adds.www_authenticate = answer.headers.get(header::WWW_AUTHENTICATE).cloned();
                Checked::Denied(Box::new(Err(ProxyError::AuthRequired)), adds)
            }
        },
        403 => Checked::Denied(Box::new(Err(ProxyError::AuthForbidden)), adds),
        status => {
            tracing::warn!(url = %auth.url, status, "the auth server answered neither 2xx, 401 nor 403; answering 500");
            Checked::Denied(Box::new(Err(ProxyError::AuthFailed)), adds)
        }
    }
}

/// Gateway API's `ExternalAuth` (GEP-1494; `auth.gateway` says how): asks the auth server
/// about `head` (with the client's body first read whole into `body` for `forwardBody`);
/// `client` is the request's address as the pipeline worked it out.
/// `None`: allowed, the answer's changes made to `head` (never Host) and its response headers
/// in `adds`; `Some`: the client's answer (the auth server's own on a deny, 413 for a body
/// over `forwardBody.maxSize`, 500 when it could not be asked).
pub(crate) async fn gateway_check(
    conn: &Rc<ConnCtx>,
    config: &Compiled,
    (upstream, auth): (&UpstreamPolicy, &ExternalAuth),
    (head, body, client): (&mut Parts, &mut Option<ClientBody>, IpAddr),
    adds: &mut AuthAdds,
) -> Option<Result<Response<ResponseBody>, ProxyError>> {
    let rules = auth.gateway.as_deref()?;
    let forwarded = if rules.forward_body > 0 {
        let settings = &config.settings;
        match read_for_auth(settings, body, u64::from(rules.forward_body)).await {
            Ok(read) => Some(read),
            Err(error) => return Some(Err(error)),
        }
    } else {
        None
    };
    match rules.protocol {
        AuthProtocol::Http => {
            http_check(conn, config, (upstream, auth), rules, head, forwarded).await
        }
        AuthProtocol::Grpc => {
            let declared = body.as_ref().and_then(|b| b.size_hint().exact());
            let call = GrpcCall {
                rules,
                forwarded,
                declared,
                client,
            };
            grpc_check(conn, config, (upstream, auth), head, call, adds).await
        }
    }
}

/// Reads the client's body whole for `forwardBody` (`max` bytes at most: a longer one is
/// 413) and puts it back in `body` as read, to go upstream after the check; returns a second
/// reader of it for the auth server. A body a listener's filter read already is not read
/// again.
async fn read_for_auth(
    settings: &Settings,
    body: &mut Option<ClientBody>,
    max: u64,
) -> Result<Buffered, ProxyError> {
    let read = match body.take() {
        None => return Ok(Buffered::memory(Bytes::new())),
        Some(ClientBody::Read(read)) => *read,
        Some(client) => {
            let declared = client.size_hint().exact();
            if declared.is_some_and(|len| len > max) {
                return Err(ProxyError::BodyTooLarge { limit: max });
            }
            let timeout = settings.client_body_timeout;
            let streamed = RequestBody::client(client, declared, max, timeout);
            let in_memory = settings.client_body_buffer_size;
            let dir = std::env::temp_dir();
            let read = buffer::read_whole(streamed, declared, in_memory, &dir).await;
            read.map_err(|error| ProxyError::body_unread(error, max))?
        }
    };
    let copy = read.copy().map_err(ProxyError::BodyBuffer);
    let longer = read.len() > max;
    *body = Some(ClientBody::Read(Box::new(read)));
    if longer {
        return Err(ProxyError::BodyTooLarge { limit: max });
    }
    copy
}

/// `protocol: HTTP`: the sub-request, and its answer's status decides.
async fn http_check(
    conn: &Rc<ConnCtx>,
    config: &Compiled,
    (upstream, auth): (&UpstreamPolicy, &ExternalAuth),
    rules: &GatewayAuth,
    head: &mut Parts,
    forwarded: Option<Buffered>,
) -> Option<Result<Response<ResponseBody>, ProxyError>> {
    let Some(mut sub) = gateway_sub_request(rules, head) else {
        tracing::debug!(url = %auth.url, "the request's target cannot be sent to the auth server");
        return Some(Err(ProxyError::AuthFailed));
    };
    let body = match forwarded {
        Some(read) if read.len() > 0 => {
            let len = HeaderValue::from(read.len());
            sub.headers.insert(header::CONTENT_LENGTH, len);
            RequestBody::Buffered(read)
        }
        _ => RequestBody::Empty,
    };
    let answer = match ask(conn, config, upstream, auth, sub, (body, true)).await {
        Ok(answer) => answer,
        Err(error) => {
            tracing::warn!(url = %auth.url, error = %Chain(&error), "the auth server could not be asked; answering 500");
            return Some(Err(ProxyError::AuthFailed));
        }
    };
    if answer.status != StatusCode::OK {
        // GEP-1494: any other status is a deny; the client gets the auth server's answer.
        let mut headers = HeaderMap::with_capacity(answer.headers.len());
        for (name, value) in &answer.headers {
            if !GatewayAuth::never_copied(name) {
                headers.append(name.clone(), value.clone());
            }
        }
        let body = answer.body.unwrap_or_else(|| {
            tracing::warn!(url = %auth.url, "the auth server's answer is longer than Sluice keeps; sent without its body");
            Bytes::new()
        });
        let mut response = Response::new(ResponseBody::full(body));
        *response.status_mut() = answer.status;
        *response.headers_mut() = headers;
        return Some(Ok(response));
    }
    let allowed = &rules.allowed_response_headers;
    if allowed.is_empty() {
        let mut copied: Option<&HeaderName> = None;
        for (name, value) in &answer.headers {
            if GatewayAuth::never_copied(name) {
                continue;
            }
            // The answer's values replace the request's (all of them, once per name).
            if copied != Some(name) {
                head.headers.remove(name);
                copied = Some(name);
            }
            head.headers.append(name.clone(), value.clone());
        }
    } else {
        for name in allowed.iter() {
            // Named but absent: removed, so a client cannot forge what routes match on.
            head.headers.remove(name);
            for value in answer.headers.get_all(name) {
                head.headers.append(name.clone(), value.clone());
            }
        }
    }
    None
}

/// What a `Check` call is made of besides the request's head.
struct GrpcCall<'a> {
    rules: &'a GatewayAuth,
    /// The body read for `forwardBody`.
    forwarded: Option<Buffered>,
    /// The length the client declared.
    declared: Option<u64>,
    /// The request's address (`ConnCtx::client_ip`).
    client: IpAddr,
}

/// `protocol: GRPC`: Envoy's ext_authz `Check` call (`ext_authz`), and its answer's status
/// decides.
async fn grpc_check(
    conn: &Rc<ConnCtx>,
    config: &Compiled,
    (upstream, auth): (&UpstreamPolicy, &ExternalAuth),
    head: &mut Parts,
    call: GrpcCall<'_>,
    adds: &mut AuthAdds,
) -> Option<Result<Response<ResponseBody>, ProxyError>> {
    let body = match call.forwarded.as_ref().map(Buffered::to_bytes).transpose() {
        Ok(body) => body,
        Err(error) => return Some(Err(ProxyError::BodyBuffer(error))),
    };
    let client = call.client;
    let source_port = if client == conn.peer() {
        conn.peer_port()
    } else {
        0
    };
    let asked = ext_authz::Asked {
        head,
        allowed: &call.rules.allowed_request_headers,
        source: SocketAddr::new(client, source_port),
        destination: (conn.local, conn.declared_port),
        https: conn.https,
        body: body.as_deref(),
        size: call.declared.or(body.as_ref().map(|b| b.len() as u64)),
    };
    let message = ext_authz::check_request(&asked);
    let decision = match ask_grpc(conn, config, upstream, auth, message).await {
        Ok(decision) => decision,
        Err(error) => {
            tracing::warn!(url = %auth.url, error = %Chain(&error), "the ext_authz Check call failed; answering 500");
            return Some(Err(ProxyError::AuthFailed));
        }
    };
    match decision {
        ext_authz::Decision::Allow(allowed) => {
            allowed.apply(head);
            adds.headers.extend(allowed.response_headers);
            None
        }
        ext_authz::Decision::Deny {
            status,
            headers,
            body,
            error,
        } => {
            if error {
                tracing::warn!(url = %auth.url, %status, "the ext_authz server answered with an error");
            }
            let mut response = Response::new(ResponseBody::full(body));
            *response.status_mut() = status;
            for mutation in headers
                .iter()
                .filter(|m| !GatewayAuth::never_copied(&m.name))
            {
                mutation.apply(response.headers_mut());
            }
            Some(Ok(response))
        }
    }
}

/// Why a `Check` call gave no decision.
#[derive(Debug, thiserror::Error)]
enum CheckFailed {
    #[error("the auth server is not a Service port")]
    NoBackend,
    #[error(transparent)]
    Exchange(#[from] ProxyError),
    #[error("HTTP status {0} (a gRPC answer is 200)")]
    Status(StatusCode),
    #[error("its answer's body failed")]
    Body(#[source] BoxError),
    #[error("its answer is longer than {CHECK_RESPONSE_MAX} bytes")]
    TooLong,
    #[error("grpc-status {status}: {message}")]
    Grpc { status: String, message: String },
    #[error("the answer has {0}")]
    Framing(&'static str),
    #[error(transparent)]
    Malformed(#[from] crate::protobuf::Malformed),
}

/// The longest `CheckResponse` read (a denial's body travels in it): a larger one is the auth
/// server's fault, answered 500, never buffered without end.
const CHECK_RESPONSE_MAX: usize = 1024 * 1024;

/// Sends one `Check` call (`message`, framed) over HTTP/2 with the timeouts and retries of
/// `upstream`, and reads its decision.
async fn ask_grpc(
    conn: &Rc<ConnCtx>,
    config: &Compiled,
    upstream: &UpstreamPolicy,
    auth: &ExternalAuth,
    message: Vec<u8>,
) -> Result<ext_authz::Decision, CheckFailed> {
    let AuthDestination::Backend { backend, tls, .. } = &auth.destination else {
        return Err(CheckFailed::NoBackend);
    };
    let settings = &config.settings;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let authority = auth.host.to_str().ok().filter(|h| !h.is_empty());
    let uri = format!(
        "{scheme}://{}{}",
        authority.unwrap_or("localhost"),
        ext_authz::CHECK_PATH
    );
    let mut head = Request::post(uri)
        .body(())
        .expect("a valid target")
        .into_parts()
        .0;
    head.version = http::Version::HTTP_2;
    let h = &mut head.headers;
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    h.insert(header::TE, HeaderValue::from_static("trailers"));
    let arrived = Instant::now();
    let mut timing = None;
    let attempts = Attempts::new(
        backend,
        settings.load_balance,
        None,
        upstream,
        arrived,
        &mut timing,
        None,
    );
    let request = H2Request {
        head: &head,
        body: RequestBody::Buffered(Buffered::memory(Bytes::from(message))),
        arrived,
    };
    let target = H2Target {
        upstream,
        grpc: true,
        tls: tls.as_ref(),
    };
    let upstreams = &conn.worker.upstreams;
    let response = upstream_h2::exchange(upstreams, settings, target, request, attempts).await?;
    if response.status() != StatusCode::OK {
        return Err(CheckFailed::Status(response.status()));
    }
    let (parts, mut answer) = response.into_parts();
    let mut body = bytes::BytesMut::new();
    let mut trailers = None;
    while let Some(frame) = answer.frame().await {
        let frame = frame.map_err(CheckFailed::Body)?;
        match frame.into_data() {
            Ok(data) => {
                if body.len() + data.len() > CHECK_RESPONSE_MAX + 5 {
                    return Err(CheckFailed::TooLong);
                }
                body.extend_from_slice(&data);
            }
            Err(frame) => trailers = frame.into_trailers().ok(),
        }
    }
    // A trailers-only answer has its status in the head.
    let said = trailers.as_ref().unwrap_or(&parts.headers);
    let status = said.get("grpc-status").map(HeaderValue::as_bytes);
    if status != Some(b"0") {
        let text = |v: Option<&HeaderValue>| {
            String::from_utf8_lossy(v.map_or(b"", |v| v.as_bytes())).into_owned()
        };
        return Err(CheckFailed::Grpc {
            status: text(said.get("grpc-status")),
            message: text(said.get("grpc-message")),
        });
    }
    let message = ext_authz::unframed(&body).map_err(CheckFailed::Framing)?;
    Ok(ext_authz::check_response(message)?)
}

/// The sub-request of Gateway API's `ExternalAuth`: the client's method, `path_prefix` + its
/// path and query, and only the headers always sent (Host, Authorization, `Content-Length: 0`:
/// no body) and `allowed_request_headers`. `None`: the target is not a valid one.
fn gateway_sub_request(rules: &GatewayAuth, head: &Parts) -> Option<Parts> {
    let path = head.uri.path_and_query().map_or("/", |p| p.as_str());
    let target = if rules.path_prefix.is_empty() {
        Uri::try_from(path).ok()?
    } else {
        Uri::try_from(format!("{}{path}", rules.path_prefix)).ok()?
    };
    let mut sub = Request::new(()).into_parts().0;
    sub.method = head.method.clone();
    sub.uri = target;
    let h = &mut sub.headers;
    let host = head
        .headers
        .get(header::HOST)
        .cloned()
        .or_else(|| HeaderValue::from_str(head.uri.authority()?.as_str()).ok())?;
    h.insert(header::HOST, host);
    for name in rules
        .allowed_request_headers
        .iter()
        .chain([&header::AUTHORIZATION])
    {
        if GatewayAuth::never_copied(name) || h.contains_key(name) {
            continue;
        }
        for value in head.headers.get_all(name) {
            h.append(name.clone(), value.clone());
        }
    }
    h.insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
    Some(sub)
}

/// `$pass_access_scheme`: the trusted balancer's `X-Forwarded-Proto`, else how the client
/// (or the PROXY protocol's balancer) reached Sluice.
fn pass_access_scheme(head: &Parts, https: bool, trust_incoming: bool) -> &'static str {
    let forwarded = trust_incoming
        .then(|| head.headers.get(&X_FORWARDED_PROTO))
        .flatten()
        .map(|v| v.as_bytes().eq_ignore_ascii_case(b"https"));
    if forwarded.unwrap_or(https) {
        "https"
    } else {
        "http"
    }
}

fn redirect(location: HeaderValue) -> Response<ResponseBody> {
    let mut response = text_response(StatusCode::FOUND, Bytes::from_static(b"302 Found\n"));
    response.headers_mut().insert(header::LOCATION, location);
    response
}

/// The sign-in `Location` for this request.
fn signin_location(
    parts: &[SigninPart],
    head: &Parts,
    inputs: &KeyInputs<'_>,
    pass_scheme: &str,
) -> Option<HeaderValue> {
    let mut out = Vec::with_capacity(128);
    for part in parts {
        match part {
            SigninPart::Literal(text) => out.extend_from_slice(text.as_bytes()),
            SigninPart::PassAccessScheme => out.extend_from_slice(pass_scheme.as_bytes()),
            SigninPart::HttpHost => {
                if let Some(host) = head.headers.get(header::HOST) {
                    out.extend_from_slice(host.as_bytes());
                } else if let Some(authority) = head.uri.authority() {
                    out.extend_from_slice(authority.as_str().as_bytes());
                }
            }
            SigninPart::EscapedRequestUri => {
                let mut uri = Vec::new();
                hash_key::fill(
                    &mut uri,
                    &model::access_log::Variable::RequestUri,
                    head,
                    inputs,
                );
                let mut escaped = String::with_capacity(uri.len() * 2);
                escape_uri_component(&mut escaped, &uri);
                out.extend_from_slice(escaped.as_bytes());
            }
            SigninPart::Variable(variable) => hash_key::fill(&mut out, variable, head, inputs),
        }
    }
    HeaderValue::from_bytes(&out).ok()
}

/// What the sub-request is made from.
struct SubRequest<'a> {
    auth: &'a ExternalAuth,
    inputs: &'a KeyInputs<'a>,
    client: IpAddr,
    pass_scheme: &'static str,
    full_forwarded_for: bool,
    request_id: &'a HeaderValue,
    names: headers::HeaderNames,
}

impl SubRequest<'_> {
    /// The sub-request's head, from the client's `head`; `None`: the URL expands to no
    /// request target.
    fn head(&self, head: &Parts) -> Option<Parts> {
        let auth = self.auth;
        let target = match &auth.uri {
            AuthUri::Fixed(uri) => Uri::try_from(uri.as_str()).ok()?,
            AuthUri::Template(segments) => {
                let mut target = Vec::with_capacity(128);
                for segment in segments.iter() {
                    match segment {
                        Segment::Literal(text) => target.extend_from_slice(text.as_bytes()),
                        Segment::Variable(v) => hash_key::fill(&mut target, v, head, self.inputs),
                    }
                }
                Uri::try_from(target)
                    .ok()
                    .filter(|uri| uri.scheme().is_none() && uri.path().starts_with('/'))?
            }
        };
        let mut request_uri = Vec::with_capacity(64);
        let uri_variable = model::access_log::Variable::RequestUri;
        hash_key::fill(&mut request_uri, &uri_variable, head, self.inputs);
        let request_uri = HeaderValue::from_bytes(&request_uri).ok()?;
        let http_host = head.headers.get(header::HOST).cloned().or_else(|| {
            let authority = head.uri.authority()?;
            HeaderValue::from_str(authority.as_str()).ok()
        });
        let scheme = if self.inputs.https { "https" } else { "http" };
        let mut original_url = format!("{scheme}://").into_bytes();
        if let Some(host) = &http_host {
            original_url.extend_from_slice(host.as_bytes());
        }
        original_url.extend_from_slice(request_uri.as_bytes());

        let mut sub = Request::new(()).into_parts().0;
        sub.method = auth.method.clone().unwrap_or_else(|| head.method.clone());
        sub.version = head.version;
        sub.uri = target;
        sub.headers = head.headers.clone();
        // nginx's `proxy_pass_request_headers on`, without the body's framing
        // (`proxy_pass_request_body off`, `Content-Length: ""`).
        headers::client_headers_only(&mut sub, self.names);
        let h = &mut sub.headers;
        h.remove(header::CONTENT_LENGTH);
        h.remove(header::TRANSFER_ENCODING);
        h.remove(&X_FORWARDED_PROTO);
        let host = match &auth.destination {
            // nginx's `Host $host`: the request's host.
            AuthDestination::Routed { host: None } => {
                HeaderValue::from_str(self.inputs.host).ok()?
            }
            _ => auth.host.clone(),
        };
        h.insert(header::HOST, host);
        h.insert(
            X_ORIGINAL_URL.clone(),
            HeaderValue::from_bytes(&original_url).ok()?,
        );
        h.insert(
            X_ORIGINAL_METHOD.clone(),
            HeaderValue::from_str(head.method.as_str()).ok()?,
        );
        h.insert(
            X_SENT_FROM.clone(),
            HeaderValue::from_static("nginx-ingress-controller"),
        );
        let client = HeaderValue::from_str(&self.client.to_string()).ok()?;
        h.insert(X_REAL_IP.clone(), client.clone());
        let forwarded_for = match head.headers.get(&X_FORWARDED_FOR) {
            Some(chain) if self.full_forwarded_for => {
                let mut joined = chain.as_bytes().to_vec();
                joined.extend_from_slice(b", ");
                joined.extend_from_slice(client.as_bytes());
                HeaderValue::from_bytes(&joined).unwrap_or(client)
            }
            _ => client,
        };
        h.insert(X_FORWARDED_FOR.clone(), forwarded_for);
        let redirect = auth
            .request_redirect
            .clone()
            .unwrap_or_else(|| request_uri.clone());
        h.insert(X_AUTH_REQUEST_REDIRECT.clone(), redirect);
        h.insert(X_REQUEST_ID.clone(), self.request_id.clone());
        if auth.method.is_some() {
            h.insert(X_ORIGINAL_URI.clone(), request_uri);
            h.insert(X_SCHEME.clone(), HeaderValue::from_static(self.pass_scheme));
        }
        for (name, value) in auth.proxy_set_headers.iter() {
            h.insert(name.clone(), value.clone());
        }
        Some(sub)
    }
}

/// The cache key: the route's host and path (ingress-nginx keys per server and location),
/// then the expanded `auth-cache-key`. `None`: too long to keep.
fn cache_key(
    route: &Route,
    segments: &[Segment],
    head: &Parts,
    inputs: &KeyInputs<'_>,
) -> Option<Box<str>> {
    let mut key = Vec::with_capacity(128);
    key.extend_from_slice(route.site.host.as_bytes());
    key.push(0);
    key.extend_from_slice(route.site.path.as_bytes());
    key.push(0);
    key.extend_from_slice(route.ingress.to_string().as_bytes());
    key.push(0);
    for segment in segments {
        match segment {
            Segment::Literal(text) => key.extend_from_slice(text.as_bytes()),
            Segment::Variable(v) => hash_key::fill(&mut key, v, head, inputs),
        }
    }
    (key.len() <= KEY_MAX).then(|| String::from_utf8_lossy(&key).into())
}

/// Sends the sub-request with the timeouts and retries of `upstream` (a routed one: its
/// route's); the answer's body is read and dropped, or kept with `keep_body`.
async fn ask(
    conn: &Rc<ConnCtx>,
    config: &Compiled,
    upstream: &UpstreamPolicy,
    auth: &ExternalAuth,
    mut head: Parts,
    (body, keep_body): (RequestBody, bool),
) -> Result<Answer, ProxyError> {
    let upstreams = &conn.worker.upstreams;
    let settings = &config.settings;
    let (backend, tls, policy) = match &auth.destination {
        AuthDestination::Backend { backend, tls, .. } => (backend, tls.as_ref(), upstream),
        // A host Sluice serves: its rule's backend, as if the sub-request had come back in
        // through the listener (without that rule's own phases).
        AuthDestination::Routed { .. } => {
            let host = head
                .headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("");
            let path = normalize_path(head.uri.path()).map_err(ProxyError::BadTarget)?;
            let Some(matched) = config.routes.route(host, &path.routed, &head) else {
                return Err(ProxyError::NoRoute);
            };
            let target = &**matched.route;
            if target.policy.denied.is_some() || !target.policy.upstream_protocol.is_http1() {
                tracing::warn!(url = %auth.url, route = %target.site.path, "the auth URL's route is refused or not HTTP/1.1; the auth server cannot be asked");
                return Err(ProxyError::AuthFailed);
            }
            (
                &target.backend,
                target.policy.upstream_tls.as_ref(),
                &target.policy.upstream,
            )
        }
    };
    let body = (body, keep_body);
    // The answer is known once its head is: a body that fails only costs the connection.
    let (parts, read) =
        upstream::own_request(upstreams, settings, backend, policy, tls, &mut head, body).await?;
    Ok(Answer {
        status: parts.status,
        headers: parts.headers,
        body: read.ok().flatten(),
    })
}

/// `ask` through the cache: a kept answer, or the one sub-request of its key in flight, or a
/// new one.
async fn cached_ask(
    conn: &Rc<ConnCtx>,
    config: &Compiled,
    route: &Route,
    auth: &ExternalAuth,
    head: Parts,
    key: Box<str>,
) -> Result<Rc<Answer>, ProxyError> {
    let cache = &conn.worker.shared.auth_cache;
    let capacity = config.settings.auth_cache_max_entries;
    let flight = match cache.lookup(&key, capacity, Instant::now()) {
        Lookup::Hit(kept) => {
            conn.worker.stats.borrow_mut().auth.hits += 1;
            return Ok(Rc::new(from_kept(&kept)));
        }
        Lookup::Flight(flight) => flight,
    };
    // Only the first caller's future runs; the others wait for its outcome. A caller that
    // goes away while it asks hands the question to the next waiter.
    let mut own: Option<Result<Answer, ProxyError>> = None;
    let rules = auth.cache.as_ref().expect("cached_ask needs a cache");
    let spare = copy_head(&head);
    let own_slot = &mut own;
    let shared = flight
        .get_or_init(|| async move {
            conn.worker.stats.borrow_mut().auth.misses += 1;
            let answer = ask(
                conn,
                config,
                &route.policy.upstream,
                auth,
                head,
                (RequestBody::Empty, false),
            )
            .await;
            let kept = answer
                .as_ref()
                .ok()
                .and_then(|a| keep_for(rules, a).map(|d| (a, d)))
                .map(|(a, duration)| Arc::new(kept(a, auth, Instant::now() + duration)));
            *own_slot = Some(answer);
            kept
        })
        .await
        .clone();
    if let Some(answer) = own {
        return answer.map(Rc::new);
    }
    match shared {
        Some(kept) => {
            conn.worker.stats.borrow_mut().auth.shared += 1;
            Ok(Rc::new(from_kept(&kept)))
        }
        // The answer in flight could not be kept (a cookie, an error): ask alone.
        None => {
            conn.worker.stats.borrow_mut().auth.misses += 1;
            let upstream = &route.policy.upstream;
            ask(
                conn,
                config,
                upstream,
                auth,
                spare,
                (RequestBody::Empty, false),
            )
            .await
            .map(Rc::new)
        }
    }
}

/// What the cache keeps of an answer: its status and the headers the phase reads.
fn kept(answer: &Answer, auth: &ExternalAuth, expires: Instant) -> Kept {
    let mut headers = HeaderMap::new();
    for name in auth
        .response_headers
        .iter()
        .chain([&header::WWW_AUTHENTICATE])
    {
        for value in answer.headers.get_all(name) {
            headers.append(name.clone(), value.clone());
        }
    }
    Kept {
        status: answer.status,
        headers,
        expires,
    }
}

fn from_kept(kept: &Kept) -> Answer {
    Answer {
        status: kept.status,
        headers: kept.headers.clone(),
        body: None,
    }
}

/// A second sub-request head (`Parts` is not `Clone`: its extensions are not).
fn copy_head(head: &Parts) -> Parts {
    let mut copy = Request::new(()).into_parts().0;
    copy.method = head.method.clone();
    copy.uri = head.uri.clone();
    copy.version = head.version;
    copy.headers = head.headers.clone();
    copy
}

/// How long nginx's `proxy_cache` would keep `answer`: not with a cookie, not when
/// `Cache-Control` forbids it; its `max-age` (or `s-maxage`) before the table's duration.
fn keep_for(rules: &model::auth::AuthCache, answer: &Answer) -> Option<Duration> {
    if answer.headers.contains_key(header::SET_COOKIE) {
        return None;
    }
    let mut max_age = None;
    for value in answer.headers.get_all(header::CACHE_CONTROL) {
        let text = value.to_str().ok()?.to_ascii_lowercase();
        for directive in text.split(',').map(str::trim) {
            if matches!(directive, "no-store" | "no-cache" | "private") {
                return None;
            }
            if let Some(seconds) = directive
                .strip_prefix("s-maxage=")
                .or_else(|| directive.strip_prefix("max-age="))
            {
                max_age = seconds.parse::<u64>().ok().map(Duration::from_secs);
            }
        }
    }
    match max_age {
        Some(age) if age.is_zero() => None,
        Some(age) => Some(age),
        None => rules.keep(answer.status.as_u16()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gateway_sub_request_carries_only_what_gep_1494_sends() {
        let rules = GatewayAuth {
            protocol: AuthProtocol::Http,
            forward_body: 0,
            path_prefix: "/verify".to_owned(),
            allowed_request_headers: Box::new([HeaderName::from_static("x-trace")]),
            allowed_response_headers: Box::new([]),
        };
        let mut head = Request::post("/app/x?y=1")
            .header("host", "shop.test")
            .header("authorization", "Bearer t")
            .header("x-trace", "1")
            .header("x-trace", "2")
            .header("cookie", "secret=1")
            .header("content-length", "12")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        let sub = gateway_sub_request(&rules, &head).unwrap();
        assert_eq!(sub.method, http::Method::POST);
        assert_eq!(sub.uri, "/verify/app/x?y=1");
        let names: Vec<_> = sub.headers.keys().map(HeaderName::as_str).collect();
        assert_eq!(
            names,
            ["host", "x-trace", "authorization", "content-length"]
        );
        assert_eq!(sub.headers.get_all("x-trace").iter().count(), 2);
        assert_eq!(sub.headers["content-length"], "0");
        // No prefix: the client's target as it came; HTTP/2's authority for Host.
        let rules = GatewayAuth {
            path_prefix: String::new(),
            ..rules
        };
        head.headers.remove(header::HOST);
        head.uri = "https://shop.test/a".parse().unwrap();
        let sub = gateway_sub_request(&rules, &head).unwrap();
        assert_eq!(sub.uri, "/a");
        assert_eq!(sub.headers["host"], "shop.test");
    }

    #[test]
    fn proxy_cache_rules_decide_what_is_kept() {
        let rules = model::auth::AuthCache {
            key: String::new(),
            segments: Box::new([]),
            validity: model::auth::cache_durations("").unwrap(),
        };
        let answer = |status: u16, headers: &[(&str, &str)]| Answer {
            status: StatusCode::from_u16(status).unwrap(),
            headers: headers
                .iter()
                .map(|(n, v)| (n.parse::<HeaderName>().unwrap(), v.parse().unwrap()))
                .collect(),
            body: None,
        };
        assert_eq!(
            keep_for(&rules, &answer(200, &[])),
            Some(Duration::from_secs(300))
        );
        assert_eq!(keep_for(&rules, &answer(403, &[])), None);
        assert_eq!(
            keep_for(&rules, &answer(200, &[("set-cookie", "a=1")])),
            None
        );
        assert_eq!(
            keep_for(&rules, &answer(200, &[("cache-control", "no-cache")])),
            None
        );
        assert_eq!(
            keep_for(&rules, &answer(401, &[("cache-control", "max-age=7")])),
            Some(Duration::from_secs(7))
        );
    }
}
