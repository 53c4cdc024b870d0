//! Limits on waits that make no progress: `client-send-timeout` on client connections and on
//! HTTP/2 streams, `proxy-send-timeout` on tunnels' upstream sockets, `proxy-read-timeout`
//! between upstream body reads, `client-body-timeout` between request body reads.
//!
//! ```text
//!  I/O ready ─▶ progress() ─▶ disarmed (no timer touched: the common case)
//!  I/O pending ─▶ poll_expired(): armed once, now + limit ─▶ still pending at the deadline
//!                 ─▶ Ready: the caller fails the wait (TimedOut) and its connection ends
//!
//!  HTTP/2 stream task (StreamWatch) ─poll─▶ h2_server: window open? ─yes─▶ ResponseBody polled
//!        │                                                              (body_polled mark)
//!        └─ pending with the body not polled while the response streams: flow control holds
//!           it ─▶ StallTimer ─▶ after client-send-timeout the task is dropped: RST_STREAM,
//!           the upstream connection and the buffered body are released
//! ```

use std::cell::Cell;
use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// How long one wait may last. The timer is made on the first wait and reset for later ones:
/// most connections never wait at all.
pub(crate) struct StallTimer {
    /// Zero: no limit.
    limit: Duration,
    timer: Option<Pin<Box<Sleep>>>,
    /// The timer runs for the current wait.
    armed: bool,
}

impl StallTimer {
    pub(crate) fn new(limit: Duration) -> StallTimer {
        StallTimer {
            limit,
            timer: None,
            armed: false,
        }
    }

    /// Progress was made: the next wait gets the whole limit again.
    pub(crate) fn progress(&mut self) {
        self.armed = false;
    }

    /// Called while waiting: `Ready` once this wait has lasted the limit (never without one).
    pub(crate) fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.limit.is_zero() {
            return Poll::Pending;
        }
        if !self.armed {
            self.armed = true;
            let deadline = Instant::now() + self.limit;
            match &mut self.timer {
                Some(timer) => timer.as_mut().reset(deadline),
                None => self.timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
        }
        match &mut self.timer {
            Some(timer) => timer.as_mut().poll(cx),
            None => Poll::Pending,
        }
    }
}

thread_local! {
    /// Set when a response body is polled: the stream being polled is sending (its flow
    /// control window is open), or at least trying to.
    static BODY_POLLED: Cell<bool> = const { Cell::new(false) };
}

/// Called by every response body poll (a thread-local store: no lock, no atomic).
pub(crate) fn body_polled() {
    BODY_POLLED.with(|polled| polled.set(true));
}

pin_project! {
    /// An HTTP/2 stream's task (`h2_server`), reset when its response cannot be sent for
    /// `client-send-timeout`: a stream stops polling its body while the client's flow-control
    /// window is shut, so nothing else would ever end a stream whose client keeps the window
    /// shut, and each such stream holds an upstream connection and its buffer.
    pub(crate) struct StreamWatch<F> {
        // Owned, not borrowed from a pinning `async` block: such a block holds its future
        // twice, and tokio copies a task's whole future when it spawns it.
        #[pin]
        task: F,
        stall: StallTimer,
        // The response body has been polled: the stream is sending.
        sending: bool,
    }
}

impl<F: Future> StreamWatch<F> {
    pub(crate) fn new(task: F, limit: Duration) -> StreamWatch<F> {
        StreamWatch {
            task,
            stall: StallTimer::new(limit),
            sending: false,
        }
    }
}

impl<F: Future> Future for StreamWatch<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        BODY_POLLED.with(|polled| polled.set(false));
        if this.task.poll(cx).is_ready() {
            return Poll::Ready(());
        }
        if BODY_POLLED.with(Cell::get) {
            // Sent something, or waits for the upstream (proxy-read-timeout's business). The
            // limit starts again, and runs even if nothing wakes this task again: a stream
            // whose window just closed is woken by nothing but the timer.
            *this.sending = true;
            this.stall.progress();
        } else if !*this.sending {
            // Still waiting for the response head: not a flow-control stall.
            return Poll::Pending;
        }
        match this.stall.poll_expired(cx) {
            Poll::Ready(()) => {
                tracing::debug!(
                    "HTTP/2 stream made no progress within client-send-timeout, resetting it"
                );
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// A stream whose writes fail with `TimedOut` after its limit without progress.
pub(crate) struct WriteTimeout<I> {
    io: I,
    stall: StallTimer,
    /// The error's message: which limit ran out.
    what: &'static str,
}

impl<I> WriteTimeout<I> {
    pub(crate) fn new(io: I, limit: Duration, what: &'static str) -> WriteTimeout<I> {
        WriteTimeout {
            io,
            stall: StallTimer::new(limit),
            what,
        }
    }

    /// Passes a write's outcome on, failing a wait that outlasts the limit.
    fn watch<T>(&mut self, poll: Poll<io::Result<T>>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        match poll {
            Poll::Ready(result) => {
                self.stall.progress();
                Poll::Ready(result)
            }
            Poll::Pending => match self.stall.poll_expired(cx) {
                Poll::Ready(()) => {
                    Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, self.what)))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for WriteTimeout<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for WriteTimeout<I> {
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
