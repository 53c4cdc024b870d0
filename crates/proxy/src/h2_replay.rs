//! The request body as HTTP/2 attempts pull it: what was pulled is kept (up to
//! `REPLAY_LIMIT`) until a response head arrives, so that a stream the endpoint refused can be
//! sent again from the first byte on another stream.
//!
//! ```text
//!  RequestBody ─▶ Replay (kept frames) ─▶ AttemptBody of the current generation ─▶ hyper h2
//! ```

use std::cell::RefCell;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};

use crate::body::BoxError;
use crate::error::{client_body_error, ProxyError};
use crate::request_body::RequestBody;

/// How much request body a stream keeps until its response head arrives, so that a stream
/// the backend refused can be sent again. Larger bodies are not retried once sent.
const REPLAY_LIMIT: usize = 64 * 1024;

/// The request body as attempts pull it: what was pulled stays here (up to `REPLAY_LIMIT`)
/// until a response head arrives, so a refused stream's body can be sent again.
pub(crate) struct Replay {
    pub(crate) source: RequestBody,
    pub(crate) kept: Vec<Kept>,
    pub(crate) kept_len: usize,
    /// Every frame pulled so far is in `kept` (false once past the limit or answered).
    pub(crate) complete: bool,
    pub(crate) ended: bool,
    /// Attempts get a new generation; a stale attempt's body (its stream reset) gets nothing.
    pub(crate) generation: u32,
    /// The client's body failed: the error that answers the request.
    pub(crate) failed: Option<ProxyError>,
}

impl Replay {
    /// Nothing pulled yet: every frame is kept until the limit or the answer.
    pub(crate) fn new(source: RequestBody) -> Replay {
        Replay {
            source,
            kept: Vec::new(),
            kept_len: 0,
            complete: true,
            ended: false,
            generation: 0,
            failed: None,
        }
    }

    /// The answer is taken: the body will not be sent again, so nothing more is kept.
    pub(crate) fn forget(&mut self) {
        self.complete = false;
        self.kept = Vec::new();
        self.kept_len = 0;
    }
}

pub(crate) enum Kept {
    Data(Bytes),
    Trailers(HeaderMap),
}

/// One attempt's view of the request body.
pub(crate) struct AttemptBody {
    pub(crate) replay: Rc<RefCell<Replay>>,
    pub(crate) generation: u32,
    pub(crate) next: usize,
}

impl Body for AttemptBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let mut shared = this.replay.borrow_mut();
        if shared.generation != this.generation {
            return Poll::Ready(Some(Err("a later attempt sends this body".into())));
        }
        if let Some(kept) = shared.kept.get(this.next) {
            this.next += 1;
            let frame = match kept {
                Kept::Data(data) => Frame::data(data.clone()),
                Kept::Trailers(trailers) => Frame::trailers(trailers.clone()),
            };
            return Poll::Ready(Some(Ok(frame)));
        }
        if shared.ended {
            return Poll::Ready(None);
        }
        match Pin::new(&mut shared.source).poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                shared.ended = true;
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(error))) => {
                shared.failed = Some(client_body_error(error));
                Poll::Ready(Some(Err("the client's request body failed".into())))
            }
            Poll::Ready(Some(Ok(frame))) => {
                if shared.complete {
                    let kept = if let Some(data) = frame.data_ref() {
                        shared.kept_len += data.len();
                        Kept::Data(data.clone())
                    } else if let Some(trailers) = frame.trailers_ref() {
                        Kept::Trailers(trailers.clone())
                    } else {
                        return Poll::Ready(Some(Ok(frame)));
                    };
                    if shared.kept_len > REPLAY_LIMIT {
                        shared.complete = false;
                        shared.kept = Vec::new();
                    } else {
                        shared.kept.push(kept);
                        this.next = shared.kept.len();
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        let shared = self.replay.borrow();
        self.next >= shared.kept.len() && (shared.ended || shared.source.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        let shared = self.replay.borrow();
        if self.next >= shared.kept.len() && (shared.ended || shared.source.is_end_stream()) {
            SizeHint::with_exact(0)
        } else {
            SizeHint::default()
        }
    }
}
