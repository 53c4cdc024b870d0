//! The one response body type: a `Bytes` handed to hyper in slices, never copied.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

/// A response body that yields `rest` in frames of at most `frame` bytes.
///
/// Splitting a `Bytes` only moves a pointer (and, for the static files, touches no reference
/// count), so the 1 MB file goes out as 16 frames of one static buffer. The size is always exact,
/// which lets hyper send `Content-Length` instead of chunked encoding, as nginx does for a file.
#[derive(Debug)]
pub(crate) struct ResponseBody {
    rest: Bytes,
    frame: usize,
}

impl ResponseBody {
    /// The whole payload in one frame.
    pub(crate) fn full(bytes: impl Into<Bytes>) -> Self {
        Self {
            rest: bytes.into(),
            frame: usize::MAX,
        }
    }

    /// The payload in frames of `frame` bytes (the last may be shorter).
    pub(crate) fn framed(bytes: Bytes, frame: usize) -> Self {
        // A zero frame size would yield empty frames forever.
        Self {
            rest: bytes,
            frame: frame.max(1),
        }
    }

    pub(crate) fn empty() -> Self {
        Self::full(Bytes::new())
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.rest.is_empty() {
            return Poll::Ready(None);
        }
        let n = self.frame.min(self.rest.len());
        let data = self.rest.split_to(n);
        Poll::Ready(Some(Ok(Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.rest.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;

    use super::*;

    async fn frames(mut body: ResponseBody) -> Vec<usize> {
        let mut sizes = Vec::new();
        while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            let frame = frame.unwrap_or_else(|never| match never {});
            sizes.push(frame.into_data().map_or(0, |d| d.len()));
        }
        assert!(body.is_end_stream());
        sizes
    }

    #[tokio::test]
    async fn framed_body_splits_without_losing_bytes() {
        static DATA: [u8; 10] = [7; 10];
        let body = ResponseBody::framed(Bytes::from_static(&DATA), 4);
        assert_eq!(body.size_hint().exact(), Some(10));
        assert_eq!(frames(body).await, vec![4, 4, 2]);
    }

    #[tokio::test]
    async fn empty_body_has_no_frames() {
        let body = ResponseBody::empty();
        assert!(body.is_end_stream());
        assert_eq!(body.size_hint().exact(), Some(0));
        assert!(frames(body).await.is_empty());
    }

    #[tokio::test]
    async fn zero_frame_size_still_makes_progress() {
        let body = ResponseBody::framed(Bytes::from_static(b"abc"), 0);
        assert_eq!(frames(body).await, vec![1, 1, 1]);
    }
}
