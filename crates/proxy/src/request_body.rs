//! A request body on its way upstream: none, the client's (streamed, limited, timed), a
//! buffered one, or (mirroring) a streamed one teed to a copy of the request and that copy's. A plain enum rather than a boxed trait object: no allocation, no dynamic
//! dispatch per frame.

use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

use crate::body::{BodyProgress, BodyTimeout, BodyTooLarge, BoxError};
use crate::buffer::Buffered;
use crate::stall::StallTimer;
use crate::tee::{Tee, TeeCopy};

/// A request body on its way upstream.
pub(crate) enum RequestBody {
    /// No body: such a request can be rebuilt for a retry.
    Empty,
    /// The client's body, streamed through as it arrives.
    Client {
        inner: ClientBody,
        /// The length the client declared (and its codec holds it to): what the upstream
        /// request's `Content-Length` is made from.
        declared: Option<u64>,
        /// Bytes still allowed when the length was not declared up front (chunked, or
        /// HTTP/2 without content-length); a declared length was checked before.
        remaining: Option<u64>,
        progress: Rc<BodyProgress>,
        /// `client-body-timeout`: how long the client may send nothing while its body is
        /// awaited (nginx's `client_body_timeout`: between two reads, not for the whole body).
        stall: StallTimer,
    },
    /// The client's body, read whole before the upstream was chosen (`buffer`): it can be
    /// sent again from its first byte.
    Buffered(Buffered),
    /// A streamed body whose frames a mirrored copy of the request gets too (`mirror`).
    /// Boxed: only mirrored routes' requests have one, the enum stays its size.
    Teed(Box<Tee<RequestBody>>),
    /// That copy's body: the frames the tee passed on.
    Mirror(TeeCopy),
}

/// A client's request body: hyper's (HTTP/1 after a handover) or an HTTP/2 stream's, or
/// either read whole already (an auth filter's `forwardBody`), to go upstream as read.
pub(crate) enum ClientBody {
    Http1(Incoming),
    Http2(crate::h2_server::RequestBody),
    Read(Box<Buffered>),
}

impl Body for ClientBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            ClientBody::Http1(body) => Pin::new(body).poll_frame(cx).map_err(Into::into),
            ClientBody::Http2(body) => Pin::new(body).poll_frame(cx),
            ClientBody::Read(body) => Pin::new(&mut **body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ClientBody::Http1(body) => body.is_end_stream(),
            ClientBody::Http2(body) => body.is_end_stream(),
            ClientBody::Read(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ClientBody::Http1(body) => body.size_hint(),
            ClientBody::Http2(body) => body.size_hint(),
            ClientBody::Read(body) => body.size_hint(),
        }
    }
}

impl RequestBody {
    /// The client's body, limited to `limit` bytes when its length is unknown (0: no limit),
    /// failing when the client sends nothing for `timeout` (zero: no limit).
    pub(crate) fn client(
        inner: ClientBody,
        declared: Option<u64>,
        limit: u64,
        timeout: Duration,
    ) -> RequestBody {
        RequestBody::Client {
            inner,
            declared,
            remaining: (limit > 0 && declared.is_none()).then_some(limit),
            progress: Rc::default(),
            stall: StallTimer::new(timeout),
        }
    }

    /// How many bytes this body yields from its start, when that is known before it is sent:
    /// the upstream request is framed from this, never from a header someone set.
    pub(crate) fn length(&self) -> Option<u64> {
        match self {
            RequestBody::Empty => Some(0),
            RequestBody::Client { declared, .. } => *declared,
            RequestBody::Buffered(body) => Some(body.len()),
            RequestBody::Teed(tee) => tee.body().length(),
            RequestBody::Mirror(copy) => copy.length(),
        }
    }

    pub(crate) fn progress(&self) -> Option<&Rc<BodyProgress>> {
        match self {
            RequestBody::Empty | RequestBody::Buffered(_) | RequestBody::Mirror(_) => None,
            RequestBody::Client { progress, .. } => Some(progress),
            RequestBody::Teed(tee) => tee.body().progress(),
        }
    }

    /// Whether the body can be sent again after an attempt wrote some of it: none, or a
    /// buffered one. (`proxy-next-upstream` decides whether it is, by method.)
    pub(crate) fn is_replayable(&self) -> bool {
        !matches!(
            self,
            RequestBody::Client { .. } | RequestBody::Teed(_) | RequestBody::Mirror(_)
        )
    }

    /// A buffered body starts again from its first byte: `true` when this one did (no body
    /// has nothing to rewind, a streamed one cannot).
    pub(crate) fn rewind(&mut self) -> bool {
        match self {
            RequestBody::Buffered(body) => {
                body.rewind();
                true
            }
            RequestBody::Empty
            | RequestBody::Client { .. }
            | RequestBody::Teed(_)
            | RequestBody::Mirror(_) => false,
        }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let (inner, remaining, progress, stall) = match self.get_mut() {
            RequestBody::Empty => return Poll::Ready(None),
            RequestBody::Buffered(body) => return Pin::new(body).poll_frame(cx),
            RequestBody::Teed(tee) => return tee.poll_frame(cx),
            RequestBody::Mirror(copy) => return copy.poll_frame(cx),
            RequestBody::Client {
                inner,
                remaining,
                progress,
                stall,
                ..
            } => (inner, remaining, progress, stall),
        };
        let frame = match Pin::new(&mut *inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            Poll::Pending => {
                return match stall.poll_expired(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(BodyTimeout.into()))),
                    Poll::Pending => Poll::Pending,
                };
            }
            other => return other.map_err(Into::into),
        };
        stall.progress();
        if let (Some(data), Some(remaining)) = (frame.data_ref(), remaining.as_mut()) {
            let len = data.len() as u64;
            if len > *remaining {
                progress.set_exceeded();
                return Poll::Ready(Some(Err(BodyTooLarge.into())));
            }
            *remaining -= len;
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        match self {
            RequestBody::Empty => true,
            RequestBody::Client { inner, .. } => inner.is_end_stream(),
            RequestBody::Buffered(body) => body.is_end_stream(),
            RequestBody::Teed(tee) => tee.body().is_end_stream(),
            RequestBody::Mirror(copy) => copy.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            RequestBody::Empty => SizeHint::with_exact(0),
            RequestBody::Client { inner, .. } => inner.size_hint(),
            RequestBody::Buffered(body) => body.size_hint(),
            RequestBody::Teed(tee) => tee.body().size_hint(),
            RequestBody::Mirror(copy) => copy.size_hint(),
        }
    }
}
