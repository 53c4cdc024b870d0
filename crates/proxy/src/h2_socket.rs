//! The socket side both HTTP/2 connections share: the client-facing server (`h2_server`) and
//! the upstream client (`h2_client`).
//!
//! ```text
//!  socket ─read─▶ the worker's scratch buffer ─(after the incomplete frame kept from the last
//!                 read)─▶ FrameConn::process ─▶ bytes used; the rest (an incomplete frame,
//!                 at most one frame's length) kept in `SocketState::partial`
//!  `out` (frames the connection queued) ─write, `chunk` bytes at a time─▶ socket ─▶ flush
//! ```
//!
//! Reads go through the scratch buffer so that a connection waiting for its peer holds no
//! read buffer of its own; only a frame split across reads is kept.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What a connection keeps about its socket between polls.
#[derive(Default)]
pub(crate) struct SocketState {
    /// An incomplete frame's bytes from the last read.
    partial: Vec<u8>,
    /// Bytes of the connection's `out` already written.
    sent: usize,
    /// Written since the last flush.
    unflushed: bool,
}

impl SocketState {
    /// Lets go of a kept incomplete frame (the connection will read no more).
    pub(crate) fn forget_partial(&mut self) {
        self.partial = Vec::new();
    }
}

/// A connection that reads frames: its socket and the frames' handler.
pub(crate) trait FrameConn {
    type Io: AsyncRead + Unpin;

    fn socket(&mut self) -> (&mut Self::Io, &mut SocketState);

    /// Handles the complete frames at the start of `data`: the bytes used (the rest is an
    /// incomplete frame), or `None` when the connection failed (nothing is kept).
    fn process(&mut self, data: &[u8]) -> Option<usize>;
}

/// One read from `conn`'s socket, its frames handled: `Ready(Ok(n))` with the bytes read,
/// `Ready(Ok(0))` when the peer closed.
pub(crate) fn poll_read_once<C: FrameConn>(
    conn: &mut C,
    cx: &mut Context<'_>,
) -> Poll<io::Result<usize>> {
    crate::server::with_scratch(|scratch| {
        let mut buf = ReadBuf::new(scratch);
        let (io, _) = conn.socket();
        ready!(Pin::new(io).poll_read(cx, &mut buf))?;
        let filled = buf.filled();
        let read = filled.len();
        if read == 0 {
            return Poll::Ready(Ok(0));
        }
        let kept = std::mem::take(&mut conn.socket().1.partial);
        if kept.is_empty() {
            if let Some(used) = conn.process(filled) {
                if used < read {
                    conn.socket().1.partial = filled[used..].to_vec();
                }
            }
        } else {
            let mut data = kept;
            data.extend_from_slice(filled);
            if let Some(used) = conn.process(&data) {
                if used < data.len() {
                    data.drain(..used);
                    conn.socket().1.partial = data;
                }
            }
        }
        Poll::Ready(Ok(read))
    })
}

/// Writes what `out` holds beyond what was written before, at most `chunk` bytes a write
/// call. `Ready(Ok(true))` once all of it is written (`out` is then cleared),
/// `Ready(Ok(false))` when there was nothing to write.
pub(crate) fn poll_write_out<I: AsyncWrite + Unpin>(
    io: &mut I,
    state: &mut SocketState,
    cx: &mut Context<'_>,
    out: &mut Vec<u8>,
    chunk: usize,
) -> Poll<io::Result<bool>> {
    while state.sent < out.len() {
        let end = (state.sent + chunk).min(out.len());
        match ready!(Pin::new(&mut *io).poll_write(cx, &out[state.sent..end])) {
            Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
            Ok(n) => {
                state.sent += n;
                state.unflushed = true;
            }
            Err(e) => return Poll::Ready(Err(e)),
        }
    }
    if out.is_empty() {
        return Poll::Ready(Ok(false));
    }
    state.sent = 0;
    out.clear();
    Poll::Ready(Ok(true))
}

/// Flushes what was written since the last flush.
pub(crate) fn poll_flush<I: AsyncWrite + Unpin>(
    io: &mut I,
    state: &mut SocketState,
    cx: &mut Context<'_>,
) -> Poll<io::Result<()>> {
    if state.unflushed {
        ready!(Pin::new(io).poll_flush(cx))?;
        state.unflushed = false;
    }
    Poll::Ready(Ok(()))
}
