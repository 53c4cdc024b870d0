//! `client-send-timeout`: a client connection whose writes make no progress for too long
//! fails them, and so ends, whatever protocol runs over it (HTTP/1, TLS, HTTP/2, tunnels).
//!
//! ```text
//!  write ─▶ socket takes bytes ─▶ deadline disarmed (no timer touched: the common case)
//!        └▶ socket full (Pending) ─▶ deadline armed once, now + limit ─▶ still full at the
//!           deadline ─▶ TimedOut: the server above closes the connection
//! ```

use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// A client stream whose writes time out after `limit` without progress (zero: never).
pub(crate) struct SendTimeout<I> {
    io: I,
    limit: Duration,
    /// Created on the first write that has to wait, then reset: most connections never need it.
    timer: Option<Pin<Box<Sleep>>>,
    /// The timer runs for the current wait.
    armed: bool,
}

impl<I> SendTimeout<I> {
    pub(crate) fn new(io: I, limit: Duration) -> SendTimeout<I> {
        SendTimeout {
            io,
            limit,
            timer: None,
            armed: false,
        }
    }

    /// Passes a write's outcome on, keeping the deadline of a write that waits.
    fn watch<T>(&mut self, poll: Poll<io::Result<T>>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        match poll {
            Poll::Ready(result) => {
                self.armed = false;
                Poll::Ready(result)
            }
            Poll::Pending if self.limit.is_zero() => Poll::Pending,
            Poll::Pending => {
                if !self.armed {
                    self.armed = true;
                    let deadline = Instant::now() + self.limit;
                    match &mut self.timer {
                        Some(timer) => timer.as_mut().reset(deadline),
                        None => self.timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
                    }
                }
                let timer = self.timer.as_mut().expect("armed above");
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client read nothing within client-send-timeout",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for SendTimeout<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for SendTimeout<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.io).poll_write(cx, buf);
        this.watch(poll, cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.watch(poll, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.io).poll_flush(cx);
        this.watch(poll, cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.io).poll_shutdown(cx);
        this.watch(poll, cx)
    }
}
