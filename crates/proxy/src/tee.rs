//! A streamed request body read by two: the main request, which drives it and never waits,
//! and a copy (a mirror's) that gets each data frame through a bounded queue and is dropped
//! when it falls behind.
//!
//! ```text
//!  client body ─▶ Tee::poll_frame ─▶ the main upstream (as if untouched)
//!                    └ data frame ─▶ queue (≤ TEE_QUEUE_MAX bytes) ─▶ TeeCopy::poll_frame ─▶ copy
//!                      over the bound, an error, or the Tee dropped before the end
//!                      ─▶ the queue is emptied and the copy fails (its request is abandoned)
//! ```

use std::cell::RefCell;
use std::collections::VecDeque;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use crate::body::BoxError;

/// How far a streamed body's copy may fall behind the main request before it is dropped:
/// the memory one copy may hold, so a worker holds at most this × mirror-max-in-flight.
pub(crate) const TEE_QUEUE_MAX: usize = 256 * 1024;

/// `body` teed: what the main request reads, and the copy, framed with `declared`.
pub(crate) fn tee<B>(body: B, declared: Option<u64>) -> (Tee<B>, TeeCopy) {
    let shared = Rc::new(RefCell::new(Queue::default()));
    let tee = Tee {
        body,
        copy: shared.clone(),
    };
    (tee, TeeCopy { shared, declared })
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
pub(crate) struct Tee<B> {
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
    use super::*;

    use crate::buffer::tests::Frames;

    /// A body of these data frames, then its end, teed.
    fn teed(frames: &[&'static [u8]]) -> (Tee<Frames>, TeeCopy) {
        let frames = frames
            .iter()
            .map(|f| Ok(Frame::data(Bytes::from_static(f))));
        tee(Frames(frames.collect()), None)
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
        let (mut main, mut copy) = teed(&[b"ab", b"cd"]);
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
        let (mut main, mut copy) = teed(&[b"ab", &BIG, b"cd"]);
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
        let (mut main, mut copy) = teed(&[b"ab", b"cd"]);
        assert!(data(poll(|cx| main.poll_frame(cx))).is_some());
        drop(main);
        assert!(matches!(
            poll(|cx| copy.poll_frame(cx)),
            Poll::Ready(Some(Err(_)))
        ));
    }
}
