//! Lingering close (nginx's `lingering_close`): closing a client connection sends FIN, then
//! reads and discards what the client still sends for a bounded time, before the socket is
//! released.
//!
//! ```text
//!  poll_shutdown ─▶ inner shutdown (TLS close_notify above us, then FIN)
//!    ─▶ read and discard ─▶ EOF │ error │ LINGER_IDLE without a byte │ LINGER_TIME in all
//!                                │ LINGER_BYTES discarded ─▶ done, the socket is dropped
//! ```
//!
//! Why: a socket closed with unread bytes in its receive queue (a 413 or an early 401 answered
//! while the upload is still arriving, bytes pipelined behind a refused request) makes the
//! kernel send RST, and a client that receives RST before it read the response loses the
//! response: it reports "connection reset" instead of the status it was sent.

use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// Lingering ends after this long without a byte from the client (nginx's
/// `lingering_timeout`).
const LINGER_IDLE: Duration = Duration::from_secs(5);
/// ...and after this long in all (nginx's `lingering_time`).
const LINGER_TIME: Duration = Duration::from_secs(30);
/// ...and after this many bytes discarded: a client still sending that much is not reading.
const LINGER_BYTES: u64 = 16 * 1024 * 1024;

/// A client socket that lingers on shutdown.
pub(crate) struct Linger<I> {
    io: I,
    state: State,
}

enum State {
    Open,
    /// The write side is shut; discarding until one of the limits.
    Draining {
        timer: Pin<Box<Sleep>>,
        started: Instant,
        discarded: u64,
    },
    Done,
}

impl<I> Linger<I> {
    pub(crate) fn new(io: I) -> Linger<I> {
        Linger {
            io,
            state: State::Open,
        }
    }
}

impl<I: AsyncRead + AsyncWrite + Unpin> Linger<I> {
    /// Reads and discards until EOF or a limit; `Ready` when lingering is over.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let State::Draining {
            timer,
            started,
            discarded,
        } = &mut self.state
        else {
            return Poll::Ready(());
        };
        let mut scratch = [0u8; 8192];
        loop {
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut self.io).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if !buf.filled().is_empty() => {
                    *discarded += buf.filled().len() as u64;
                    if *discarded > LINGER_BYTES {
                        return Poll::Ready(());
                    }
                    let deadline = (Instant::now() + LINGER_IDLE).min(*started + LINGER_TIME);
                    timer.as_mut().reset(deadline);
                }
                // EOF or an error: the client is done.
                Poll::Ready(_) => return Poll::Ready(()),
                Poll::Pending => return timer.as_mut().poll(cx),
            }
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Linger<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<I: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Linger<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match this.state {
                State::Open => {
                    std::task::ready!(Pin::new(&mut this.io).poll_shutdown(cx))?;
                    let started = Instant::now();
                    this.state = State::Draining {
                        timer: Box::pin(tokio::time::sleep_until(started + LINGER_IDLE)),
                        started,
                        discarded: 0,
                    };
                }
                State::Draining { .. } => {
                    std::task::ready!(this.poll_drain(cx));
                    this.state = State::Done;
                }
                State::Done => return Poll::Ready(Ok(())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn shutdown_waits_for_the_client_within_bounds() {
        // The client closes: lingering ends with it.
        let (near, mut far) = tokio::io::duplex(1024);
        let mut socket = Linger::new(near);
        far.write_all(b"rest of an upload").await.unwrap();
        let closing = tokio::spawn(async move { socket.shutdown().await });
        let mut got = Vec::new();
        far.read_to_end(&mut got).await.unwrap();
        assert!(got.is_empty(), "FIN first");
        drop(far);
        closing.await.unwrap().unwrap();

        // A silent client: released after LINGER_IDLE.
        let (near, far) = tokio::io::duplex(1024);
        let mut socket = Linger::new(near);
        let started = Instant::now();
        socket.shutdown().await.unwrap();
        assert_eq!(started.elapsed(), LINGER_IDLE);
        drop(far);

        // A client that keeps sending: released after LINGER_TIME.
        let (near, mut far) = tokio::io::duplex(1024);
        let mut socket = Linger::new(near);
        let started = Instant::now();
        let closing = tokio::spawn(async move { socket.shutdown().await });
        while !closing.is_finished() {
            let _ = far.write_all(b"x").await;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        closing.await.unwrap().unwrap();
        assert!(started.elapsed() >= LINGER_TIME && started.elapsed() <= LINGER_TIME + LINGER_IDLE);
    }
}
