//! Mirroring (`mirror-target`): a copy of a route's request goes to another backend, and
//! nothing the copy does reaches the client. Here: the copy's head, made from the client's
//! (pure), its body, shared with the main request without ever holding it up (`tee`), and the
//! task body that sends it through `upstream::own_request` (sockets are that module's). `forward`
//! starts the copy: one spawn.
//!
//! ```text
//!  forward, after the body phase, before the request headers are prepared:
//!   route.policy.mirror ─▶ mirror-max-in-flight reached ─▶ dropped (counted)
//!     └▶ head(): the client's method and headers as they came (hop-by-hop and Expect out,
//!        HTTP/2 cookies joined, nothing the proxy adds), Host: mirror-host, target: the
//!        template expanded ($request_uri as sent, $args after the rewrite) or the fixed path
//!        with the client's query
//!     └▶ body: none (mirror-request-body off, or no body) │ read whole first (buffered):
//!        a copy (memory: the same bytes; file: the same file, read by offset) │ streamed:
//!        the main body tees its frames into a queue the copy reads; a queue over
//!        tee::TEE_QUEUE_MAX (the copy falls behind) or a main body that fails drops the copy
//!   ─▶ spawn_local: upstream::own_request to the mirror's endpoints, with the route's connect,
//!      send and read timeouts ─▶ response head ─▶ body read (up to DRAIN_MAX, for the pool)
//!      and dropped ─▶ counted: sent │ failed (logged at debug)
//!      (a GRPCRoute's mirror, `http2`: upstream_h2::exchange with the route's policy instead,
//!      the head in HTTP/2 form with `te: trailers`, the answer read to its end)
//! ```
//! Unlike nginx, which reads the whole body before its mirror starts and holds the client's
//! next keep-alive request until the mirror has answered, nothing here waits for the copy.
//! The copy is made from the head `forward` gets: while `default-backend` takes a route's
//! requests (`errors::unavailable_fallback`), that head has its `X-Code` and names already.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use http::request::Parts;
use http::uri::{Authority, Scheme};
use http::{header, HeaderValue, Request, Uri, Version};
use http_body_util::BodyExt;
use model::access_log::Segment;
use model::mirror::{Mirror, MirrorUri};
use model::policy::RoutePolicy;
use model::Settings;

use crate::attempts::Attempts;
use crate::body::BoxError;
use crate::error::{Chain, ProxyError};
use crate::hash_key::{self, KeyInputs};
use crate::headers;
use crate::metrics::Stats;
use crate::request_body::RequestBody;
use crate::tee::{self, Tee, TeeCopy};
use crate::upstream;
use crate::upstream_h2::{self, H2Request, H2Target};
use crate::upstreams::{MirrorSlot, Upstreams};

/// The copy's request head: the client's `head` (its target already rewritten, its
/// `OriginalTarget` still attached), sent to `mirror`. `None`: the target does not expand to
/// a valid origin-form target (a variable holding a space, say); that copy is dropped.
pub(crate) fn head(
    mirror: &Mirror,
    head: &Parts,
    inputs: &KeyInputs<'_>,
    names: headers::HeaderNames,
) -> Option<Parts> {
    let target = match &mirror.uri {
        MirrorUri::Fixed(path) => match head.uri.query() {
            Some(query) => format!("{path}?{query}").into_bytes(),
            None => path.clone().into_bytes(),
        },
        MirrorUri::Template(segments) => {
            let mut target = Vec::with_capacity(128);
            for segment in segments.iter() {
                match segment {
                    Segment::Literal(text) => target.extend_from_slice(text.as_bytes()),
                    Segment::Variable(v) => hash_key::fill(&mut target, v, head, inputs),
                }
            }
            target
        }
    };
    let uri = Uri::try_from(target)
        .ok()
        .filter(|uri| uri.scheme().is_none() && uri.path().starts_with('/'))?;
    let mut copy = Request::new(()).into_parts().0;
    copy.method = head.method.clone();
    copy.version = head.version;
    copy.uri = uri;
    copy.headers = head.headers.clone();
    headers::client_headers_only(&mut copy, names);
    copy.headers.insert(header::HOST, mirror.host.clone());
    Some(copy)
}

/// The copy's body, and what the main request goes on with. Without a copy of the body
/// (`mirror-request-body: off`, no body) the main body is untouched.
pub(crate) fn split_body(body: RequestBody, with_body: bool) -> (RequestBody, RequestBody) {
    if !with_body {
        return (body, RequestBody::Empty);
    }
    match body {
        RequestBody::Empty => (RequestBody::Empty, RequestBody::Empty),
        RequestBody::Buffered(buffered) => match buffered.copy() {
            Ok(copy) => (RequestBody::Buffered(buffered), RequestBody::Buffered(copy)),
            Err(error) => {
                tracing::debug!(%error, "mirror: the buffered body cannot be shared");
                (RequestBody::Buffered(buffered), RequestBody::Empty)
            }
        },
        body => {
            let declared = body.length();
            let (tee, copy): (Tee<RequestBody>, TeeCopy) = tee::tee(body, declared);
            (RequestBody::Teed(Box::new(tee)), RequestBody::Mirror(copy))
        }
    }
}

/// Sends the copy and counts how it went. Never fails, never panics the worker: the main
/// request has gone on without it.
pub(crate) async fn send(
    upstreams: Rc<Upstreams>,
    settings: Rc<Settings>,
    mirror: std::sync::Arc<Mirror>,
    policy: std::sync::Arc<RoutePolicy>,
    mut head: Parts,
    body: RequestBody,
    slot: MirrorSlot,
) {
    let _slot = slot;
    let result = exchange(&upstreams, &settings, &mirror, &policy, &mut head, body).await;
    let mut stats = upstreams.stats.borrow_mut();
    match result {
        Ok(()) => stats.mirrors.sent += 1,
        Err(error) => {
            tracing::debug!(target = %mirror.target, error = %Chain(&error), "mirror failed");
            stats.mirrors.failed += 1;
        }
    }
}

/// Why a copy failed (logged at debug, counted).
#[derive(Debug, thiserror::Error)]
enum MirrorError {
    #[error(transparent)]
    Exchange(ProxyError),
    #[error("reading the mirror's answer failed")]
    Answer(#[source] BoxError),
}

async fn exchange(
    upstreams: &Rc<Upstreams>,
    settings: &Settings,
    mirror: &Mirror,
    policy: &RoutePolicy,
    head: &mut Parts,
    body: RequestBody,
) -> Result<(), MirrorError> {
    if mirror.http2 {
        return Box::pin(exchange_h2(upstreams, settings, mirror, policy, head, body)).await;
    }
    let (_, drained) = upstream::own_request(
        upstreams,
        settings,
        &mirror.backend,
        &policy.upstream,
        mirror.tls.as_ref(),
        head,
        (body, false),
    )
    .await
    .map_err(MirrorError::Exchange)?;
    drained.map(|_| ()).map_err(MirrorError::Answer)
}

/// A GRPCRoute's copy: HTTP/2 in cleartext to the mirror's endpoints (the route's HTTP/2
/// exchange, its timeouts and `grpc-timeout`), `:authority` the mirror's host, `te: trailers`
/// as gRPC servers want it; the answer read to its end and dropped.
async fn exchange_h2(
    upstreams: &Rc<Upstreams>,
    settings: &Settings,
    mirror: &Mirror,
    policy: &RoutePolicy,
    head: &mut Parts,
    body: RequestBody,
) -> Result<(), MirrorError> {
    let mut parts = std::mem::take(&mut head.uri).into_parts();
    parts.scheme = Some(Scheme::HTTP);
    parts.authority = Authority::try_from(mirror.host.as_bytes()).ok();
    head.uri =
        Uri::from_parts(parts).map_err(|_| MirrorError::Exchange(ProxyError::RewriteInvalid))?;
    head.headers.remove(header::HOST);
    head.headers
        .insert(header::TE, HeaderValue::from_static("trailers"));
    head.version = Version::HTTP_2;
    let arrived = Instant::now();
    let mut timing = None;
    let attempts = Attempts::new(
        &mirror.backend,
        settings.load_balance,
        None,
        &policy.upstream,
        arrived,
        &mut timing,
        None,
    );
    let request = H2Request {
        head,
        body,
        arrived,
    };
    let response =
        upstream_h2::exchange(upstreams, settings, H2Target::of(policy), request, attempts)
            .await
            .map_err(MirrorError::Exchange)?;
    let mut answer = response.into_body();
    while let Some(frame) = answer.frame().await {
        frame.map_err(MirrorError::Answer)?;
    }
    Ok(())
}

/// Counts a copy left out before it started.
pub(crate) fn dropped(stats: &RefCell<Stats>) {
    stats.borrow_mut().mirrors.dropped += 1;
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::headers::OriginalTarget;

    fn mirror(target: &str, host: &str) -> Mirror {
        let parsed = model::mirror::MirrorTarget::parse(target).unwrap();
        Mirror {
            target: target.to_owned(),
            host: host.parse().unwrap(),
            uri: parsed.uri.unwrap_or(MirrorUri::Fixed("/".into())),
            request_body: true,
            upstream_name: "10.0.0.9:80".into(),
            backend: Arc::new(model::Backend::unresolved()),
            tls: None,
            http2: false,
            share: None,
            also: None,
        }
    }

    fn inputs() -> KeyInputs<'static> {
        KeyInputs {
            client: [192, 0, 2, 7].into(),
            client_port: 5555,
            https: true,
            host: "shop.example",
            server_name: "shop.example",
        }
    }

    #[test]
    fn the_copy_is_the_client_s_request_to_the_target() {
        let request = Request::post("/a/b?x=1")
            .header("host", "shop.example")
            .header("connection", "keep-alive, x-secret")
            .header("x-secret", "hop")
            .header("expect", "100-continue")
            .header("x-user", "ann")
            .header("content-length", "5")
            .body(())
            .unwrap();
        let (mut client, ()) = request.into_parts();
        // The target as the client sent it, before a rewrite made it /b?x=1.
        client
            .extensions
            .insert(OriginalTarget("/a/b?x=1".parse().unwrap()));
        client.uri = "/b?x=1".parse().unwrap();
        let m = mirror("http://10.0.0.9$request_uri", "copy.example");
        let copy = head(&m, &client, &inputs(), headers::HeaderNames::NGINX).unwrap();
        assert_eq!(copy.method, http::Method::POST);
        assert_eq!(copy.uri, "/a/b?x=1");
        let h = &copy.headers;
        assert_eq!(h["host"], "copy.example");
        assert_eq!(h["x-user"], "ann");
        assert!(h.get("connection").is_none() && h.get("x-secret").is_none());
        assert!(h.get("expect").is_none());
        assert!(h.get("x-forwarded-for").is_none() && h.get("x-real-ip").is_none());

        // Without variables: the fixed path with the query after the rewrite.
        let m = mirror("http://10.0.0.9/shadow", "copy.example");
        assert_eq!(
            head(&m, &client, &inputs(), headers::HeaderNames::NGINX)
                .unwrap()
                .uri,
            "/shadow?x=1"
        );

        // Other variables, as upstream-hash-by reads them.
        let m = mirror("http://10.0.0.9/$host/$remote_addr?$args", "copy.example");
        let copy = head(&m, &client, &inputs(), headers::HeaderNames::NGINX).unwrap();
        assert_eq!(copy.uri, "/shop.example/192.0.2.7?x=1");

        // An expansion that is no target drops the copy.
        let m = mirror("http://10.0.0.9$http_x_user", "copy.example");
        assert!(head(&m, &client, &inputs(), headers::HeaderNames::NGINX).is_none());
    }
}
