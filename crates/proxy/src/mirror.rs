//! Mirroring (`mirror-target`): a copy of a route's request goes to another backend, and
//! nothing the copy does reaches the client. Here: the copy's head, made from the client's,
//! and its body, shared with the main request without ever holding it up. `forward` starts
//! the copy (one spawn); no socket is touched here.
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
//!        TEE_QUEUE_MAX (the copy falls behind) or a main body that fails drops the copy
//!   ─▶ spawn_local: upstream::exchange to the mirror's endpoints, with the route's connect,
//!      send and read timeouts ─▶ response head ─▶ body read (up to DRAIN_MAX, for the pool)
//!      and dropped ─▶ counted: sent │ failed (logged at debug)
//! ```
//! Unlike nginx, which reads the whole body before its mirror starts and holds the client's
//! next keep-alive request until the mirror has answered, nothing here waits for the copy.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::Bytes;
use http::request::Parts;
use http::{header, Request, Uri};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use model::access_log::Segment;
use model::mirror::{Mirror, MirrorUri};
use model::{Settings, UpstreamPolicy};

use crate::attempts::Attempts;
use crate::body::BoxError;
use crate::client::Outgoing;
use crate::error::{Chain, ProxyError};
use crate::hash_key::{self, KeyInputs};
use crate::headers;
use crate::metrics::Stats;
use crate::request_body::RequestBody;
use crate::upstream::{self, Exchange, Pending, UpstreamBody};
use crate::upstreams::Upstreams;

/// How far a streamed body's copy may fall behind the main request before it is dropped:
/// the memory one copy may hold, so a worker holds at most this × mirror-max-in-flight.
pub(crate) const TEE_QUEUE_MAX: usize = 256 * 1024;
/// How much of the mirror's answer is read (and thrown away) so its connection can be
/// pooled; a longer answer closes the connection instead.
const DRAIN_MAX: usize = 64 * 1024;

/// One worker's mirrored requests in flight, against `mirror-max-in-flight`.
#[derive(Default)]
pub(crate) struct InFlight(Rc<Cell<u32>>);

/// A place in flight, given back when the copy ends.
pub(crate) struct Slot(Rc<Cell<u32>>);

impl InFlight {
    /// A place for one more copy, unless `max` are in flight.
    pub(crate) fn take(&self, max: u32) -> Option<Slot> {
        let n = self.0.get();
        (n < max).then(|| {
            self.0.set(n + 1);
            Slot(self.0.clone())
        })
    }

    #[cfg(test)]
    fn count(&self) -> u32 {
        self.0.get()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

/// The copy's request head: the client's `head` (its target already rewritten, its
/// `OriginalTarget` still attached), sent to `mirror`. `None`: the target does not expand to
/// a valid origin-form target (a variable holding a space, say); that copy is dropped.
pub(crate) fn head(
    mirror: &Mirror,
    head: &Parts,
    inputs: &KeyInputs<'_>,
    underscores: bool,
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
    headers::client_headers_only(&mut copy, underscores);
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
            let shared = Rc::new(RefCell::new(Queue::default()));
            let tee = Tee {
                body,
                copy: shared.clone(),
            };
            let copy = TeeCopy { shared, declared };
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
    policy: UpstreamPolicy,
    mut head: Parts,
    body: RequestBody,
    slot: Slot,
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
    policy: &UpstreamPolicy,
    head: &mut Parts,
    body: RequestBody,
) -> Result<(), MirrorError> {
    let retryable = body.is_replayable()
        && (headers::is_idempotent(&head.method) || policy.next_upstream.non_idempotent);
    let mut body = Outgoing::new(body);
    let mut timing = None;
    let attempts = Attempts::new(
        &mirror.backend,
        settings.load_balance,
        None,
        policy,
        Instant::now(),
        &mut timing,
        None,
    );
    let pending = Pending {
        head,
        added: None,
        body: &mut body,
        retryable,
        upgrade: false,
    };
    let Exchange { conn, .. } = upstream::exchange(
        upstreams,
        settings,
        policy,
        mirror.tls.as_ref(),
        pending,
        attempts,
    )
    .await
    .map_err(MirrorError::Exchange)?;
    let mut answer = UpstreamBody::new(conn, upstreams, settings);
    let mut read = 0;
    while read <= DRAIN_MAX {
        match answer.frame().await {
            None => break,
            Some(Ok(frame)) => read += frame.data_ref().map_or(0, Bytes::len),
            Some(Err(error)) => return Err(MirrorError::Answer(error)),
        }
    }
    Ok(())
}

/// Counts a copy left out before it started.
pub(crate) fn dropped(stats: &RefCell<Stats>) {
    stats.borrow_mut().mirrors.dropped += 1;
}

/// The frames of a streamed body on their way to the copy.
#[derive(Default)]
struct Queue {
    frames: VecDeque<Bytes>,
    queued: usize,
    end: End,
    /// The copy's task, waiting for a frame.
    reader: Option<Waker>,
}

#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum End {
    #[default]
    Open,
    /// The main body ended: the copy has all of it.
    Complete,
    /// The copy fell behind, or the main body failed or was dropped early.
    Dropped,
}

impl Queue {
    fn finish(&mut self, end: End) {
        if self.end == End::Open {
            self.end = end;
        }
        if self.end == End::Dropped {
            self.frames.clear();
            self.queued = 0;
        }
        if let Some(reader) = self.reader.take() {
            reader.wake();
        }
    }
}

/// The main request's streamed body, teeing each data frame to the copy: never waits for it.
pub(crate) struct Tee<B = RequestBody> {
    body: B,
    copy: Rc<RefCell<Queue>>,
}

impl<B> Tee<B>
where
    B: Body<Data = Bytes, Error = BoxError> + Unpin,
{
    pub(crate) fn body(&self) -> &B {
        &self.body
    }

    pub(crate) fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        let mut copy = self.copy.borrow_mut();
        match &polled {
            Poll::Ready(Some(Ok(frame))) if copy.end == End::Open => {
                if let Some(data) = frame.data_ref() {
                    if copy.queued + data.len() > TEE_QUEUE_MAX {
                        tracing::debug!("mirror: the copy fell behind the body; dropped");
                        copy.finish(End::Dropped);
                    } else {
                        copy.queued += data.len();
                        copy.frames.push_back(data.clone());
                        if let Some(reader) = copy.reader.take() {
                            reader.wake();
                        }
                    }
                }
            }
            Poll::Ready(None) => copy.finish(End::Complete),
            Poll::Ready(Some(Err(_))) => copy.finish(End::Dropped),
            _ => {}
        }
        polled
    }
}

impl<B> Drop for Tee<B> {
    fn drop(&mut self) {
        // Ended early (the client left, the upstream failed): the copy cannot be whole.
        self.copy.borrow_mut().finish(End::Dropped);
    }
}

/// The copy's body: what the tee queued, ending when the main body ended.
pub(crate) struct TeeCopy {
    shared: Rc<RefCell<Queue>>,
    /// The client's declared length: the copy is framed as the main request is.
    declared: Option<u64>,
}

/// The copy was dropped (fell behind, or the main body did not end well).
#[derive(Debug, thiserror::Error)]
#[error("the mirrored body was dropped")]
struct CopyDropped;

impl TeeCopy {
    pub(crate) fn length(&self) -> Option<u64> {
        self.declared
    }

    pub(crate) fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let mut queue = self.shared.borrow_mut();
        if queue.end == End::Dropped {
            return Poll::Ready(Some(Err(CopyDropped.into())));
        }
        if let Some(data) = queue.frames.pop_front() {
            queue.queued -= data.len();
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        if queue.end == End::Complete {
            return Poll::Ready(None);
        }
        queue.reader = Some(cx.waker().clone());
        Poll::Pending
    }

    pub(crate) fn is_end_stream(&self) -> bool {
        let queue = self.shared.borrow();
        queue.end == End::Complete && queue.frames.is_empty()
    }

    pub(crate) fn size_hint(&self) -> SizeHint {
        match self.declared {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
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
        let copy = head(&m, &client, &inputs(), false).unwrap();
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
            head(&m, &client, &inputs(), false).unwrap().uri,
            "/shadow?x=1"
        );

        // Other variables, as upstream-hash-by reads them.
        let m = mirror("http://10.0.0.9/$host/$remote_addr?$args", "copy.example");
        let copy = head(&m, &client, &inputs(), false).unwrap();
        assert_eq!(copy.uri, "/shop.example/192.0.2.7?x=1");

        // An expansion that is no target drops the copy.
        let m = mirror("http://10.0.0.9$http_x_user", "copy.example");
        assert!(head(&m, &client, &inputs(), false).is_none());
    }

    #[test]
    fn the_in_flight_cap_gives_places_back() {
        let in_flight = InFlight::default();
        let a = in_flight.take(2).unwrap();
        let _b = in_flight.take(2).unwrap();
        assert!(in_flight.take(2).is_none());
        drop(a);
        assert_eq!(in_flight.count(), 1);
        assert!(in_flight.take(2).is_some());
        assert!(in_flight.take(0).is_none());
    }

    /// A body of these frames, then its end.
    struct Frames(VecDeque<Bytes>);

    impl Body for Frames {
        type Data = Bytes;
        type Error = BoxError;
        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            Poll::Ready(self.get_mut().0.pop_front().map(|b| Ok(Frame::data(b))))
        }
    }

    fn tee(frames: &[&'static [u8]]) -> (Tee<Frames>, TeeCopy) {
        let shared = Rc::new(RefCell::new(Queue::default()));
        let body = Frames(frames.iter().map(|f| Bytes::from_static(f)).collect());
        let tee = Tee {
            body,
            copy: shared.clone(),
        };
        (
            tee,
            TeeCopy {
                shared,
                declared: None,
            },
        )
    }

    fn poll<F>(mut f: F) -> Poll<Option<Result<Frame<Bytes>, BoxError>>>
    where
        F: FnMut(&mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>>,
    {
        f(&mut Context::from_waker(Waker::noop()))
    }

    fn data(polled: Poll<Option<Result<Frame<Bytes>, BoxError>>>) -> Option<Bytes> {
        match polled {
            Poll::Ready(Some(Ok(frame))) => frame.into_data().ok(),
            _ => None,
        }
    }

    #[test]
    fn the_tee_copies_every_frame_and_the_end() {
        let (mut main, mut copy) = tee(&[b"ab", b"cd"]);
        assert!(poll(|cx| copy.poll_frame(cx)).is_pending());
        assert_eq!(data(poll(|cx| main.poll_frame(cx))).unwrap(), "ab");
        assert_eq!(data(poll(|cx| main.poll_frame(cx))).unwrap(), "cd");
        assert!(matches!(poll(|cx| main.poll_frame(cx)), Poll::Ready(None)));
        // The main request is done with its body before the copy has read it.
        drop(main);
        assert_eq!(data(poll(|cx| copy.poll_frame(cx))).unwrap(), "ab");
        assert_eq!(data(poll(|cx| copy.poll_frame(cx))).unwrap(), "cd");
        assert!(matches!(poll(|cx| copy.poll_frame(cx)), Poll::Ready(None)));
    }

    #[test]
    fn a_copy_that_falls_behind_is_dropped_and_the_main_body_goes_on() {
        static BIG: [u8; TEE_QUEUE_MAX] = [b'x'; TEE_QUEUE_MAX];
        let (mut main, mut copy) = tee(&[b"ab", &BIG, b"cd"]);
        assert_eq!(data(poll(|cx| main.poll_frame(cx))).unwrap(), "ab");
        assert_eq!(
            data(poll(|cx| main.poll_frame(cx))).unwrap().len(),
            BIG.len()
        );
        assert_eq!(data(poll(|cx| main.poll_frame(cx))).unwrap(), "cd");
        assert!(matches!(poll(|cx| main.poll_frame(cx)), Poll::Ready(None)));
        assert!(matches!(
            poll(|cx| copy.poll_frame(cx)),
            Poll::Ready(Some(Err(_)))
        ));

        // A main body dropped before its end drops the copy too.
        let (mut main, mut copy) = tee(&[b"ab", b"cd"]);
        assert!(data(poll(|cx| main.poll_frame(cx))).is_some());
        drop(main);
        assert!(matches!(
            poll(|cx| copy.poll_frame(cx)),
            Poll::Ready(Some(Err(_)))
        ));
    }
}
