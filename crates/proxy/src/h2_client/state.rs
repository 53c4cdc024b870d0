//! What the connection and its handles share: the streams' state, the windows, the peer's
//! settings and the frames waiting to be written.

use std::collections::VecDeque;
use std::task::Waker;

use bytes::Bytes;
use http::{HeaderMap, Response};
use wire::h2::frame::{self, ErrorCode};

use super::Error;

/// Our SETTINGS_INITIAL_WINDOW_SIZE: 2 MiB a stream, so a fast backend is not held up.
pub(super) const STREAM_WINDOW: u32 = 2 * 1024 * 1024;
/// The connection's receive window, raised from 65,535 by a WINDOW_UPDATE on stream 0.
pub(super) const CONNECTION_WINDOW: u32 = 5 * 1024 * 1024;
/// Our SETTINGS_MAX_FRAME_SIZE: a longer frame is the peer's FRAME_SIZE_ERROR.
pub(super) const MAX_FRAME: u32 = frame::DEFAULT_MAX_FRAME_SIZE;
/// Our SETTINGS_MAX_HEADER_LIST_SIZE: a longer response head (decoded, RFC 9113 §6.5.2
/// counting) is a stream error.
pub(super) const MAX_HEADER_LIST: usize = 16 * 1024;
/// A header block being reassembled from CONTINUATIONs, encoded, at most.
pub(super) const MAX_BLOCK: usize = 64 * 1024;
/// Streams until the peer's SETTINGS say (h2's and hyper's default).
pub(super) const INITIAL_MAX_STREAMS: u32 = 100;
/// Bytes written per write call.
pub(super) const WRITE_CHUNK: usize = 64 * 1024;
/// The outgoing buffer's capacity kept once written out; more (a large request body went
/// through) is freed.
pub(super) const OUT_RETAINED: usize = 64 * 1024;
/// Reads handled per poll before yielding to the worker's other tasks.
pub(super) const READS_PER_POLL: usize = 16;
/// Streams we reset recently, remembered so that frames the peer sent before it saw the
/// reset are ignored rather than taken for protocol errors.
pub(super) const RECENT_RESETS: usize = 128;

/// What the connection and its handles share.
pub(super) struct Shared {
    pub(super) streams: foldhash::HashMap<u32, StreamState>,
    /// Frames to write, in order.
    pub(super) out: Vec<u8>,
    pub(super) conn_waker: Option<Waker>,
    pub(super) next_id: u32,
    /// Streams not yet closed (open or half-closed): what the peer's limit counts.
    pub(super) active: u32,
    /// Live `Sender` handles; none and no stream: the connection ends.
    pub(super) senders: usize,
    /// Waiting in `Sender::poll_ready` for a stream to close.
    pub(super) ready_waiters: Vec<Waker>,
    pub(super) peer_max_frame: u32,
    pub(super) peer_initial_window: i64,
    pub(super) peer_max_streams: u32,
    /// What we may still send on the connection.
    pub(super) send_window: i64,
    /// What the peer may still send on the connection, and what was taken but not yet
    /// given back with WINDOW_UPDATE.
    pub(super) recv_window: i64,
    pub(super) recv_unacked: u32,
    /// GOAWAY from the peer, or the connection failed: no new streams.
    pub(super) closed: Option<Error>,
    pub(super) recent_resets: VecDeque<u32>,
}

/// One stream's state, kept until its handles are gone.
#[derive(Default)]
pub(super) struct StreamState {
    pub(super) head: Option<Response<()>>,
    pub(super) data: VecDeque<Bytes>,
    pub(super) trailers: Option<HeaderMap>,
    /// END_STREAM received (the head or the data or the trailers carried it).
    pub(super) recv_end: bool,
    /// The response head came (1xx aside).
    pub(super) head_seen: bool,
    pub(super) recv_window: i64,
    pub(super) recv_unacked: u32,
    pub(super) recv_waker: Option<Waker>,
    pub(super) send_window: i64,
    /// Data sent beyond the windows, waiting for WINDOW_UPDATE; then, maybe, trailers.
    pub(super) pending: VecDeque<Bytes>,
    pub(super) pending_end: bool,
    pub(super) pending_trailers: Option<Vec<u8>>,
    /// END_STREAM sent (or queued behind `pending`).
    pub(super) send_end: bool,
    pub(super) send_waker: Option<Waker>,
    /// Reset (either side) or failed with the connection.
    pub(super) error: Option<Error>,
    /// Counted in `Shared::active`.
    pub(super) counted: bool,
    pub(super) recv_handle: bool,
    pub(super) send_handle: bool,
}

impl StreamState {
    /// Done both ways: reset or failed, or the response ended and our END_STREAM is written
    /// (not merely queued behind data waiting for the windows: until it is out the peer
    /// counts the stream open, so we do too).
    pub(super) fn closed(&self) -> bool {
        self.error.is_some() || (self.recv_end && self.send_end && self.send_flushed())
    }

    /// Nothing of the request waits for the windows.
    pub(super) fn send_flushed(&self) -> bool {
        self.pending.is_empty() && self.pending_trailers.is_none()
    }
}

impl Shared {
    /// The state of a stream whose handle is alive (a handle keeps its stream).
    pub(super) fn stream(&mut self, id: u32) -> &mut StreamState {
        self.streams
            .get_mut(&id)
            .expect("a handle keeps its stream")
    }

    pub(super) fn wake_conn(&mut self) {
        if let Some(waker) = &self.conn_waker {
            waker.wake_by_ref();
        }
    }

    /// Marks `id` closed when it is: the peer's stream limit counts one less.
    pub(super) fn settle(&mut self, id: u32) {
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        let closed_now = stream.counted && stream.closed();
        if closed_now {
            stream.counted = false;
        }
        if !stream.recv_handle && !stream.send_handle && !stream.counted {
            self.streams.remove(&id);
        }
        if closed_now {
            self.active -= 1;
            for waker in self.ready_waiters.drain(..) {
                waker.wake();
            }
            if self.active == 0 {
                self.wake_conn();
            }
        }
    }

    /// A new stream's state, counted against the peer's limit.
    pub(super) fn open(&mut self, id: u32, end_of_stream: bool) {
        self.active += 1;
        self.streams.insert(
            id,
            StreamState {
                recv_window: i64::from(STREAM_WINDOW),
                send_window: self.peer_initial_window,
                send_end: end_of_stream,
                counted: true,
                recv_handle: true,
                send_handle: true,
                ..StreamState::default()
            },
        );
    }

    /// Resets `id` from our side with `code` (the error the handles see is a local one).
    /// A stream already closed both ways gets no RST_STREAM (RFC 9113 §5.1: the peer could
    /// take it for a protocol error).
    pub(super) fn reset(&mut self, id: u32, code: ErrorCode) {
        if let Some(stream) = self.streams.get_mut(&id) {
            if !stream.closed() {
                stream.error = Some(Error::reset(code, false));
                frame::write_rst_stream(&mut self.out, id, code);
                remember(&mut self.recent_resets, id);
                wake(stream);
                let queued: usize = stream.data.drain(..).map(|data| data.len()).sum();
                stream.pending.clear();
                stream.pending_trailers = None;
                self.give_back(queued);
                self.wake_conn();
            }
        }
        self.settle(id);
    }

    /// `taken` bytes of `id`'s data were consumed: both windows open again once half used.
    pub(super) fn release(&mut self, id: u32, taken: usize) {
        if taken == 0 {
            return;
        }
        if let Some(stream) = self.streams.get_mut(&id) {
            if !stream.recv_end && stream.error.is_none() {
                stream.recv_unacked += taken as u32;
                if stream.recv_unacked >= STREAM_WINDOW / 2 {
                    frame::write_window_update(&mut self.out, id, stream.recv_unacked);
                    stream.recv_window += i64::from(stream.recv_unacked);
                    stream.recv_unacked = 0;
                    self.wake_conn();
                }
            }
        }
        self.give_back(taken);
    }

    /// Connection window only (data of a stream nobody reads any more, padding).
    pub(super) fn give_back(&mut self, taken: usize) {
        if taken == 0 {
            return;
        }
        self.recv_unacked += taken as u32;
        if self.recv_unacked >= CONNECTION_WINDOW / 2 {
            frame::write_window_update(&mut self.out, 0, self.recv_unacked);
            self.recv_window += i64::from(self.recv_unacked);
            self.recv_unacked = 0;
            self.wake_conn();
        }
    }

    /// Writes as much of `id`'s pending data as both windows and the frame size allow, then
    /// the END_STREAM or trailers behind it; wakes its sender once all is out.
    pub(super) fn flush(&mut self, id: u32) {
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        let mut wrote = false;
        while let Some(front) = stream.pending.front_mut() {
            let allowed = stream
                .send_window
                .min(self.send_window)
                .min(i64::from(self.peer_max_frame));
            if allowed <= 0 && !front.is_empty() {
                break;
            }
            let n = front.len().min(allowed.max(0) as usize);
            let chunk = front.split_to(n);
            let last = front.is_empty();
            if last {
                stream.pending.pop_front();
            }
            let end = last
                && stream.pending.is_empty()
                && stream.pending_end
                && stream.pending_trailers.is_none();
            frame::write_data_head(&mut self.out, id, n, end);
            self.out.extend_from_slice(&chunk);
            stream.send_window -= n as i64;
            self.send_window -= n as i64;
            wrote = true;
        }
        if stream.pending.is_empty() {
            if let Some(block) = stream.pending_trailers.take() {
                frame::write_headers(&mut self.out, id, &block, true, self.peer_max_frame);
                wrote = true;
            }
            if let Some(waker) = stream.send_waker.take() {
                waker.wake();
            }
        }
        if wrote {
            self.wake_conn();
        }
        self.settle(id);
    }

    /// The connection failed or ended: every stream fails with `error` (those above a
    /// GOAWAY's `last_stream` as not processed).
    pub(super) fn fail_all(&mut self, error: &Error) {
        self.closed.get_or_insert_with(|| error.clone());
        let ids: Vec<u32> = self.streams.keys().copied().collect();
        for id in ids {
            let stream = self.streams.get_mut(&id).expect("listed");
            if !stream.closed() {
                stream.error = Some(error.clone());
                wake(stream);
            }
            self.settle(id);
        }
        for waker in self.ready_waiters.drain(..) {
            waker.wake();
        }
    }
}

/// Wakes whoever waits on `stream`, either side.
pub(super) fn wake(stream: &mut StreamState) {
    if let Some(waker) = stream.recv_waker.take() {
        waker.wake();
    }
    if let Some(waker) = stream.send_waker.take() {
        waker.wake();
    }
}

pub(super) fn remember(recent: &mut VecDeque<u32>, id: u32) {
    if recent.len() == RECENT_RESETS {
        recent.pop_front();
    }
    recent.push_back(id);
}
