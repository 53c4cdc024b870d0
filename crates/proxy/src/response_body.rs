//! A response body on its way back to the client: a whole one made here, an HTTP/1 upstream's
//! or an HTTP/2 upstream's, carrying the request's guard so the request ends when it is dropped.
//! A plain enum rather than a boxed trait object: no allocation, no dynamic dispatch per frame.
//! A compressed body is one more variant around the body it compresses (`compress`), so a
//! response that is not compressed pays nothing per frame for the feature.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use crate::body::BoxError;
use crate::compress::Compressor;
use crate::limits::Throttle;
use crate::upstream::UpstreamBody;
use crate::upstream_h2::H2Body;
use crate::worker::RequestGuard;

/// A response body on its way to the client.
pub(crate) struct ResponseBody {
    kind: ResponseKind,
    /// Dropped with the body: the request is over then (metrics, idle tracking).
    guard: Option<RequestGuard>,
    /// `limit-rate`: the body's bytes paced (`limits::Throttle`); `None` on most routes.
    throttle: Option<Box<Throttle>>,
}

// Boxing the upstream body would cost an allocation per response; the size difference only
// costs a slightly longer copy when hyper takes the body.
#[allow(clippy::large_enum_variant)]
enum ResponseKind {
    Full(Option<Bytes>),
    Upstream(UpstreamBody),
    /// From an HTTP/2 upstream: data and trailers (`upstream_h2`).
    Http2(H2Body),
    /// `use-gzip` / `enable-brotli`: the body beneath, compressed as it streams.
    Compressed(Box<Compressed>),
}

struct Compressed {
    inner: ResponseKind,
    compressor: Compressor,
}

impl ResponseBody {
    pub(crate) fn full(bytes: Bytes) -> ResponseBody {
        ResponseBody {
            kind: ResponseKind::Full((!bytes.is_empty()).then_some(bytes)),
            guard: None,
            throttle: None,
        }
    }

    pub(crate) fn empty() -> ResponseBody {
        ResponseBody {
            kind: ResponseKind::Full(None),
            guard: None,
            throttle: None,
        }
    }

    pub(crate) fn upstream(body: UpstreamBody) -> ResponseBody {
        ResponseBody {
            kind: ResponseKind::Upstream(body),
            guard: None,
            throttle: None,
        }
    }

    pub(crate) fn http2(body: H2Body) -> ResponseBody {
        ResponseBody {
            kind: ResponseKind::Http2(body),
            guard: None,
            throttle: None,
        }
    }

    /// The body goes out compressed (the response phase set the headers).
    pub(crate) fn compress(&mut self, compressor: Compressor) {
        let inner = std::mem::replace(&mut self.kind, ResponseKind::Full(None));
        self.kind = ResponseKind::Compressed(Box::new(Compressed { inner, compressor }));
    }

    pub(crate) fn set_guard(&mut self, guard: RequestGuard) {
        self.guard = Some(guard);
    }

    /// Paces the body at `limit-rate` from `start` (the request's arrival, as nginx's).
    pub(crate) fn throttle(&mut self, rate: u64, after: u64, start: std::time::Instant) {
        self.throttle = Some(Box::new(Throttle::new(rate, after, start)));
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        crate::stall::body_polled();
        let this = self.get_mut();
        let kind = &mut this.kind;
        let polled = match this.throttle.as_deref_mut() {
            None => kind.poll_frame(cx),
            Some(throttle) => throttle.poll_frame(cx, |cx| kind.poll_frame(cx)),
        };
        if let (Poll::Ready(Some(Ok(frame))), Some(guard)) = (&polled, this.guard.as_mut()) {
            if let Some(data) = frame.data_ref() {
                guard.measure.response_body_bytes += data.len() as u64;
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        if self.throttle.as_ref().is_some_and(|t| t.pending() > 0) {
            return false;
        }
        match &self.kind {
            ResponseKind::Full(bytes) => bytes.is_none(),
            ResponseKind::Upstream(body) => body.is_end_stream(),
            ResponseKind::Http2(body) => body.is_end_stream(),
            ResponseKind::Compressed(body) => body.compressor.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        let hint = match &self.kind {
            ResponseKind::Full(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
            ResponseKind::Upstream(body) => body.size_hint(),
            ResponseKind::Http2(body) => body.size_hint(),
            // Unknown until it is made: framed chunked (HTTP/1.1) or by END_STREAM (HTTP/2).
            ResponseKind::Compressed(body) if body.compressor.is_end_stream() => {
                SizeHint::with_exact(0)
            }
            ResponseKind::Compressed(_) => SizeHint::new(),
        };
        match self.throttle.as_ref().map_or(0, |t| t.pending()) {
            0 => hint,
            held => {
                let mut sum = SizeHint::new();
                sum.set_lower(hint.lower() + held);
                if let Some(upper) = hint.upper() {
                    sum.set_upper(upper + held);
                }
                sum
            }
        }
    }
}

impl ResponseKind {
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self {
            ResponseKind::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            ResponseKind::Upstream(body) => Pin::new(body).poll_frame(cx),
            ResponseKind::Http2(body) => Pin::new(body).poll_frame(cx),
            ResponseKind::Compressed(body) => {
                let Compressed { inner, compressor } = &mut **body;
                compressor.poll_frame(cx, |cx| inner.poll_frame(cx))
            }
        }
    }
}
