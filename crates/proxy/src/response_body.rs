//! A response body on its way back to the client: a whole one made here, an HTTP/1 upstream's
//! or an HTTP/2 upstream's, carrying the request's guard so the request ends when it is dropped.
//! A plain enum rather than a boxed trait object: no allocation, no dynamic dispatch per frame.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use crate::body::BoxError;
use crate::upstream::UpstreamBody;
use crate::upstream_h2::H2Body;
use crate::worker::RequestGuard;

/// A response body on its way to the client.
pub(crate) struct ResponseBody {
    kind: ResponseKind,
    /// Dropped with the body: the request is over then (metrics, idle tracking).
    guard: Option<RequestGuard>,
}

// Boxing the upstream body would cost an allocation per response; the size difference only
// costs a slightly longer copy when hyper takes the body.
#[allow(clippy::large_enum_variant)]
enum ResponseKind {
    Full(Option<Bytes>),
    Upstream(UpstreamBody),
    /// From an HTTP/2 upstream: data and trailers (`upstream_h2`).
    Http2(H2Body),
}

impl ResponseBody {
    pub(crate) fn full(bytes: Bytes) -> ResponseBody {
        ResponseBody {
            kind: ResponseKind::Full((!bytes.is_empty()).then_some(bytes)),
            guard: None,
        }
    }

    pub(crate) fn empty() -> ResponseBody {
        ResponseBody {
            kind: ResponseKind::Full(None),
            guard: None,
        }
    }

    pub(crate) fn upstream(body: UpstreamBody) -> ResponseBody {
        ResponseBody {
            kind: ResponseKind::Upstream(body),
            guard: None,
        }
    }

    pub(crate) fn http2(body: H2Body) -> ResponseBody {
        ResponseBody {
            kind: ResponseKind::Http2(body),
            guard: None,
        }
    }

    pub(crate) fn set_guard(&mut self, guard: RequestGuard) {
        self.guard = Some(guard);
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
        let polled = match &mut this.kind {
            ResponseKind::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            ResponseKind::Upstream(body) => Pin::new(body).poll_frame(cx),
            ResponseKind::Http2(body) => Pin::new(body).poll_frame(cx),
        };
        if let (Poll::Ready(Some(Ok(frame))), Some(guard)) = (&polled, this.guard.as_mut()) {
            if let Some(data) = frame.data_ref() {
                guard.measure.response_body_bytes += data.len() as u64;
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            ResponseKind::Full(bytes) => bytes.is_none(),
            ResponseKind::Upstream(body) => body.is_end_stream(),
            ResponseKind::Http2(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            ResponseKind::Full(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
            ResponseKind::Upstream(body) => body.size_hint(),
            ResponseKind::Http2(body) => body.size_hint(),
        }
    }
}
