//! HTTP/2 to clients: the frames one pass of a connection's task writes leave together, in one
//! TLS record and one socket write, where h2 alone made one of each per response.
//!
//! ```text
//!  hyper's HTTP/2 server ─frames─▶ Coalesced::poll_write: copied into the batch (≤ BATCH
//!     (h2 flushes after            bytes; a larger write goes straight through)
//!      every DATA frame)  ─flush─▶ noted, not done
//!  the connection task's poll returns ─▶ Flush::flush: batch ─▶ TLS ─▶ socket, then flushed
//!                                         no stream open ─▶ the buffer is freed (idle: 0 bytes)
//! ```
//!
//! Why: h2 chains a DATA payload of 256 bytes or more behind its frame buffer instead of
//! copying it, holds one such frame at a time, and flushes its I/O before taking the next. Ten
//! multiplexed 1 KiB responses that are ready in the same pass became ten TLS records and ten
//! `writev` calls; nginx sends them as one. Nothing waits on a timer: the batch is written as
//! soon as the connection's task has done what it can in this pass.
//!
//! The connection task is the only writer (hyper's stream tasks hand their frames to the
//! connection, not to the socket), and `Flush` runs on that task after each poll of the
//! connection, so the batch is never left behind a task that sleeps.

use std::cell::RefCell;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The most bytes gathered before they are handed on: one TLS record's plaintext (RFC 8446
/// 5.1), so a batch is one record. A write larger than this (a 16 KiB DATA frame of a large
/// body) is not copied: the batch before it goes first, then it goes straight through.
const BATCH: usize = 16 * 1024;

/// The I/O half hyper's HTTP/2 server writes to (and reads from).
pub(crate) struct Coalesced<I> {
    batch: Rc<RefCell<Batch<I>>>,
}

/// The connection task's half: writes out what a poll of the connection gathered.
pub(crate) struct Flush<I> {
    batch: Rc<RefCell<Batch<I>>>,
}

struct Batch<I> {
    io: I,
    /// Bytes written by h2 and not yet handed to `io`: `buf[sent..]`.
    buf: Vec<u8>,
    sent: usize,
    /// Something went to `io` since its last flush.
    unflushed: bool,
    /// A deferred write or flush failed: the next operation h2 makes reports it.
    error: Option<io::Error>,
}

/// Wraps `io` for an HTTP/2 server connection: writes are batched until `Flush::flush`.
pub(crate) fn coalesce<I>(io: I) -> (Coalesced<I>, Flush<I>) {
    let batch = Rc::new(RefCell::new(Batch {
        io,
        buf: Vec::new(),
        sent: 0,
        unflushed: false,
        error: None,
    }));
    (
        Coalesced {
            batch: batch.clone(),
        },
        Flush { batch },
    )
}

impl<I: AsyncWrite + Unpin> Flush<I> {
    /// Writes out and flushes the batch. Called when the connection's poll returns: a write
    /// that cannot finish now registers this task for when the socket can take more; an
    /// error is kept for the connection's next read or write, and the task woken to meet it.
    /// `idle`: no stream is open, so the buffer is given back once empty (an idle HTTP/2
    /// connection holds no batch).
    pub(crate) fn flush(&self, cx: &mut Context<'_>, idle: bool) {
        let mut batch = self.batch.borrow_mut();
        if batch.error.is_none() && (batch.pending() > 0 || batch.unflushed) {
            if let Poll::Ready(Err(e)) = batch.poll_flush(cx) {
                batch.error = Some(e);
                cx.waker().wake_by_ref();
            }
        }
        if idle && batch.pending() == 0 && batch.buf.capacity() > 0 {
            batch.buf = Vec::new();
        }
    }
}

impl<I> Batch<I> {
    fn pending(&self) -> usize {
        self.buf.len() - self.sent
    }

    fn failed(&mut self) -> io::Result<()> {
        self.error.take().map_or(Ok(()), Err)
    }
}

impl<I: AsyncWrite + Unpin> Batch<I> {
    /// Hands the whole batch to `io`.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.buf.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.buf[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
            self.unflushed = true;
        }
        self.buf.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }

    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_send(cx))?;
        ready!(Pin::new(&mut self.io).poll_flush(cx))?;
        self.unflushed = false;
        Poll::Ready(Ok(()))
    }

    fn poll_write_vectored(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.failed()?;
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if self.pending() + total > BATCH {
            ready!(self.poll_send(cx))?;
            if total > BATCH {
                let written = ready!(Pin::new(&mut self.io).poll_write_vectored(cx, bufs))?;
                self.unflushed = true;
                return Poll::Ready(Ok(written));
            }
        }
        if self.buf.capacity() == 0 {
            self.buf.reserve_exact(BATCH);
        }
        for buf in bufs {
            self.buf.extend_from_slice(buf);
        }
        Poll::Ready(Ok(total))
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Coalesced<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut batch = self.batch.borrow_mut();
        batch.failed()?;
        Pin::new(&mut batch.io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Coalesced<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.batch
            .borrow_mut()
            .poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.batch.borrow_mut().poll_write_vectored(cx, bufs)
    }

    /// h2 hands over its frame and chained payload in one call; both are copied.
    fn is_write_vectored(&self) -> bool {
        true
    }

    /// Deferred to `Flush::flush`, which runs before the connection's task waits.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.batch.borrow_mut().failed())
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut batch = self.batch.borrow_mut();
        batch.failed()?;
        ready!(batch.poll_flush(cx))?;
        Pin::new(&mut batch.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    async fn socket_pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let connect = TcpStream::connect(listener.local_addr().unwrap());
        let (ours, accepted) = tokio::join!(connect, listener.accept());
        (ours.unwrap(), accepted.unwrap().0)
    }

    /// What the connection's task does when its poll of the connection returns.
    async fn end_of_poll<I: AsyncWrite + Unpin>(flush: &Flush<I>) {
        poll_fn(|cx| {
            flush.flush(cx, false);
            Poll::Ready(())
        })
        .await;
    }

    fn pending<I>(flush: &Flush<I>) -> usize {
        flush.batch.borrow().pending()
    }

    #[tokio::test]
    async fn frames_and_their_flushes_wait_for_the_end_of_the_poll() {
        let (ours, mut peer) = socket_pair().await;
        let (mut io, flush) = coalesce(ours);
        for frame in [
            &b"HEADERS one "[..],
            b"DATA one ",
            b"HEADERS two ",
            b"DATA two",
        ] {
            io.write_all(frame).await.unwrap();
            // h2 flushes after each DATA frame: nothing leaves yet.
            io.flush().await.unwrap();
        }
        assert_eq!(pending(&flush), 41);

        end_of_poll(&flush).await;
        assert_eq!(pending(&flush), 0);
        let mut received = [0u8; 41];
        peer.read_exact(&mut received).await.unwrap();
        assert_eq!(&received, b"HEADERS one DATA one HEADERS two DATA two");
    }

    #[tokio::test]
    async fn an_idle_connection_gives_its_buffer_back() {
        let (ours, mut peer) = socket_pair().await;
        let (mut io, flush) = coalesce(ours);
        io.write_all(b"last response").await.unwrap();
        end_of_poll(&flush).await;
        assert_eq!(
            flush.batch.borrow().buf.capacity(),
            BATCH,
            "kept while streams are open"
        );
        io.write_all(b", then idle").await.unwrap();
        poll_fn(|cx| {
            flush.flush(cx, true);
            Poll::Ready(())
        })
        .await;
        assert_eq!(flush.batch.borrow().buf.capacity(), 0);
        let mut received = [0u8; 24];
        peer.read_exact(&mut received).await.unwrap();
        assert_eq!(&received, b"last response, then idle");
    }

    #[tokio::test]
    async fn a_write_larger_than_a_batch_follows_the_batch_uncopied() {
        let (ours, mut peer) = socket_pair().await;
        let (mut io, flush) = coalesce(ours);
        io.write_all(b"small frame").await.unwrap();
        let large = vec![b'x'; BATCH + 9];
        io.write_all(&large).await.unwrap();
        assert_eq!(
            pending(&flush),
            0,
            "the batch went ahead of the large write"
        );
        io.write_all(b"tail").await.unwrap();
        end_of_poll(&flush).await;

        let mut received = vec![0u8; 11 + large.len() + 4];
        peer.read_exact(&mut received).await.unwrap();
        assert_eq!(&received[..11], b"small frame");
        assert_eq!(&received[11..11 + large.len()], &large[..]);
        assert_eq!(&received[11 + large.len()..], b"tail");
    }

    #[tokio::test]
    async fn a_full_batch_is_handed_on_before_it_grows_past_a_record() {
        let (ours, mut peer) = socket_pair().await;
        let (mut io, flush) = coalesce(ours);
        let frame = vec![b'f'; 1033];
        for _ in 0..20 {
            io.write_all(&frame).await.unwrap();
            assert!(pending(&flush) <= BATCH);
        }
        end_of_poll(&flush).await;
        let mut received = vec![0u8; 20 * frame.len()];
        peer.read_exact(&mut received).await.unwrap();
        assert!(received.iter().all(|&b| b == b'f'));
    }

    #[tokio::test]
    async fn shutdown_sends_the_batch_first() {
        let (ours, mut peer) = socket_pair().await;
        let (mut io, _flush) = coalesce(ours);
        io.write_all(b"GOAWAY").await.unwrap();
        io.shutdown().await.unwrap();
        let mut received = Vec::new();
        peer.read_to_end(&mut received).await.unwrap();
        assert_eq!(received, b"GOAWAY");
    }

    #[tokio::test]
    async fn a_failed_deferred_write_is_reported_to_the_next_operation() {
        let (ours, peer) = socket_pair().await;
        let (mut io, flush) = coalesce(ours);
        // Closed with nothing read: the first write that reaches it is answered with a reset.
        drop(peer);
        let mut failed = None;
        for _ in 0..100 {
            if let Err(e) = io.write_all(&[0u8; 1024]).await {
                failed = Some(e);
                break;
            }
            end_of_poll(&flush).await;
            tokio::task::yield_now().await;
        }
        let error = failed.expect("a write to a reset connection fails");
        assert!(
            matches!(
                error.kind(),
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
            ),
            "{error}"
        );
    }
}
