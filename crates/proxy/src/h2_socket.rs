//! The socket side both HTTP/2 connections share: the client-facing server (`h2_server`) and
//! the upstream client (`h2_client`).
//!
//! ```text
//!  socket ─read─▶ the worker's scratch buffer ─▶ FrameConn::process ─▶ bytes used; the rest
//!                 (an incomplete frame) kept in `SocketState::partial`, completed from the
//!                 next read's first bytes and handled on its own before the rest
//!  `out` (frames the connection queued) ─write, `chunk` bytes at a time─▶ socket ─▶ flush
//! ```
//!
//! Reads go through the scratch buffer so that a connection waiting for its peer holds no
//! read buffer of its own; only a frame split across reads is kept. DATA payloads leave the
//! scratch buffer through a `DataArena`: copied into a block that many frames share.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use wire::h2::frame;

/// The room a kept incomplete frame gets at once, at most: a frame of the default
/// SETTINGS_MAX_FRAME_SIZE with its head (a longer one is refused when its head is read).
const MAX_KEPT: usize = frame::HEAD_LEN + frame::DEFAULT_MAX_FRAME_SIZE as usize;

/// A frame longer than the largest the connection allows: the peer's FRAME_SIZE_ERROR.
pub(crate) struct FrameTooLarge;

/// Hands each complete frame of `data`, from `at`, to `each` (its head and payload) until one
/// is incomplete or `each` returns false: the bytes used, or `FrameTooLarge` at a frame whose
/// head says more than `max_frame` (known before its payload arrives).
pub(crate) fn for_each_frame<'a>(
    data: &'a [u8],
    mut at: usize,
    max_frame: u32,
    mut each: impl FnMut(frame::Head, &'a [u8]) -> bool,
) -> Result<usize, FrameTooLarge> {
    while let Some(head) = data
        .get(at..)
        .and_then(|rest| rest.first_chunk::<{ frame::HEAD_LEN }>())
    {
        let head = frame::Head::parse(head);
        if head.length > max_frame {
            return Err(FrameTooLarge);
        }
        let start = at + frame::HEAD_LEN;
        let Some(payload) = data.get(start..start + head.length as usize) else {
            break;
        };
        at = start + payload.len();
        if !each(head, payload) {
            break;
        }
    }
    Ok(at)
}

/// DATA payloads copied out of the scratch buffer into one block per batch of frames
/// handled together: one allocation a read, not one a frame (a 1 KiB gRPC message's copy
/// went through glibc's slow path, over its per-thread cache's 1,032 bytes, twice a
/// message: alloc and free). The block is sized to the bytes being handled, so it holds
/// little more than their DATA, and the arena lets go of it when the batch is done: the
/// block lives exactly as long as the frames taken from it (a connection holds none
/// between reads).
#[derive(Default)]
pub(crate) struct DataArena {
    block: BytesMut,
    /// The bytes of the batch being handled: the most its DATA can be.
    batch: usize,
}

impl DataArena {
    /// A batch of `bytes` is about to be handled.
    pub(crate) fn begin(&mut self, bytes: usize) {
        self.batch = bytes;
    }

    /// `data`, copied.
    pub(crate) fn copy(&mut self, data: &[u8]) -> Bytes {
        if self.block.capacity() < data.len() {
            self.block = BytesMut::with_capacity(self.batch.max(data.len()));
        }
        self.block.extend_from_slice(data);
        self.block.split().freeze()
    }

    /// The batch is handled: what is left of the block is not kept.
    pub(crate) fn end(&mut self) {
        if self.block.capacity() > 0 {
            self.block = BytesMut::new();
        }
    }
}

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

    /// The length of the unit (a frame; the server's connection preface) that the
    /// incomplete bytes `kept` begin with, as far as they tell.
    fn unit_len(&self, kept: &[u8]) -> usize {
        frame_len(kept)
    }
}

/// One read from `conn`'s socket, its frames handled: `Ready(Ok(n))` with the bytes read,
/// `Ready(Ok(0))` when the peer closed.
///
/// A frame split across reads is completed from the new bytes (only its own bytes are
/// copied), handled, and the rest is handled where it lies: joining the kept bytes to the
/// whole read copied up to 16 KiB a read (a quarter of a streamed gRPC message's
/// instructions went to it).
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
        let mut kept = std::mem::take(&mut conn.socket().1.partial);
        let mut rest = filled;
        while !kept.is_empty() {
            let take = conn
                .unit_len(&kept)
                .saturating_sub(kept.len())
                .min(rest.len());
            kept.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            let Some(used) = conn.process(&kept) else {
                return Poll::Ready(Ok(read));
            };
            kept.drain(..used);
            if rest.is_empty() || (take == 0 && used == 0) {
                break;
            }
        }
        if !kept.is_empty() {
            // Still incomplete, and the read is all in it.
            conn.socket().1.partial = kept;
        } else if let Some(used) = conn.process(rest) {
            if used < rest.len() {
                let tail = &rest[used..];
                // Room for the whole frame now: completing it next read copies no more.
                let room = conn.unit_len(tail).min(MAX_KEPT).max(tail.len());
                let mut kept = Vec::with_capacity(room);
                kept.extend_from_slice(tail);
                conn.socket().1.partial = kept;
            }
        }
        Poll::Ready(Ok(read))
    })
}

/// How long the frame that `kept` begins with is, head included, as far as its bytes tell:
/// the head's length until the head is complete.
pub(crate) fn frame_len(kept: &[u8]) -> usize {
    match kept.first_chunk::<{ frame::HEAD_LEN }>() {
        Some(head) => frame::HEAD_LEN + frame::Head::parse(head).length as usize,
        None => frame::HEAD_LEN,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_shares_one_block_that_lives_as_long_as_its_frames() {
        let mut arena = DataArena::default();
        arena.begin(100);
        let first = arena.copy(b"hello");
        let second = arena.copy(b"world");
        assert_eq!((&first[..], &second[..]), (&b"hello"[..], &b"world"[..]));
        // One block: the second copy sits right after the first.
        assert_eq!(second.as_ptr(), first.as_ptr().wrapping_add(5));
        // More than the batch said (a frame completed from a kept part): a block of its own.
        let big = vec![7u8; 200];
        let third = arena.copy(&big);
        assert_ne!(
            third.as_ptr(),
            second.as_ptr().wrapping_add(5),
            "a new block"
        );
        assert_eq!(&third[..], &big[..]);
        arena.end();
        assert_eq!(arena.block.capacity(), 0, "nothing kept between batches");
        // The blocks live on in the frames taken from them.
        assert_eq!((&first[..], &second[..]), (&b"hello"[..], &b"world"[..]));
        arena.begin(5);
        assert_eq!(&arena.copy(b"again")[..], b"again");
    }
}
