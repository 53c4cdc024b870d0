//! The connection: owns the socket, parses the peer's frames into the streams' state, and
//! writes what the streams queued in `Shared.out`.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{ready, Context, Poll};

use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode, Version};
use tokio::io::{AsyncRead, AsyncWrite};
use wire::h2::frame::{self, kind, setting, ErrorCode, FrameError};
use wire::h2::hpack;

use super::state::{
    wake, Shared, CONNECTION_WINDOW, INITIAL_MAX_STREAMS, MAX_BLOCK, MAX_FRAME, MAX_HEADER_LIST,
    OUT_RETAINED, READS_PER_POLL, STREAM_WINDOW, WRITE_CHUNK,
};
use super::stream::Sender;
use super::Error;
use crate::h2_socket::{self, DataArena, FrameConn, SocketState};

/// Starts an HTTP/2 connection on `io` (TCP or TLS, connected): queues the preface, our
/// SETTINGS and the connection window's raise. Returns the handle that opens streams and
/// the future that runs the connection (to spawn); nothing waits for the peer here.
pub(crate) fn handshake<I>(io: I) -> (Sender, Connection<I>)
where
    I: AsyncRead + AsyncWrite + Unpin,
{
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(frame::PREFACE);
    frame::write_settings(
        &mut out,
        &[
            (setting::ENABLE_PUSH, 0),
            (setting::INITIAL_WINDOW_SIZE, STREAM_WINDOW),
            (setting::MAX_FRAME_SIZE, MAX_FRAME),
            (setting::MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST as u32),
        ],
    );
    let default_window = 65_535;
    frame::write_window_update(&mut out, 0, CONNECTION_WINDOW - default_window);
    let shared = Rc::new(RefCell::new(Shared {
        streams: foldhash::HashMap::default(),
        out,
        conn_waker: None,
        next_id: 1,
        active: 0,
        senders: 1,
        ready_waiters: Vec::new(),
        peer_max_frame: frame::DEFAULT_MAX_FRAME_SIZE,
        peer_initial_window: i64::from(default_window),
        peer_max_streams: INITIAL_MAX_STREAMS,
        send_window: i64::from(default_window),
        recv_window: i64::from(CONNECTION_WINDOW),
        recv_unacked: 0,
        closed: None,
        recent_resets: VecDeque::new(),
    }));
    let conn = Connection {
        io,
        shared: shared.clone(),
        decoder: hpack::Decoder::new(hpack::DEFAULT_TABLE_SIZE),
        socket: SocketState::default(),
        arena: DataArena::default(),
        settings_seen: false,
        block: None,
        failed: false,
        going_away: false,
    };
    (Sender::new(shared), conn)
}

/// A header block under way: its stream, END_STREAM from its HEADERS, the fragments so far.
struct Block {
    stream: u32,
    end_stream: bool,
    bytes: Vec<u8>,
}

/// Runs one connection until it ends: `Ok` when it closed cleanly (every handle gone and no
/// stream open, or the peer's GOAWAY once its streams are done), else the failure.
pub(crate) struct Connection<I> {
    io: I,
    shared: Rc<RefCell<Shared>>,
    decoder: hpack::Decoder,
    /// An incomplete frame from the last read; how much of `Shared.out` is written.
    socket: SocketState,
    /// Where response DATA is copied to.
    arena: DataArena,
    settings_seen: bool,
    block: Option<Block>,
    /// A connection error: GOAWAY queued, the streams failed; ends once written.
    failed: bool,
    /// Our GOAWAY NO_ERROR is queued: ends once written.
    going_away: bool,
}

impl<I> Connection<I> {
    /// A connection error (RFC 9113 §5.4.1): GOAWAY with `code`, every stream fails.
    fn fail(&mut self, code: ErrorCode, why: &'static str) {
        tracing::debug!(
            code = code.name(),
            why,
            "HTTP/2 upstream broke the protocol"
        );
        self.failed = true;
        let mut shared = self.shared.borrow_mut();
        // A client's last stream ID counts server-initiated streams: none (push is off).
        frame::write_goaway(&mut shared.out, 0, code);
        shared.fail_all(&Error::go_away(code, false, false));
    }

    /// A stream error: RST_STREAM with `code`.
    fn stream_error(&mut self, id: u32, code: ErrorCode, why: &'static str) {
        tracing::debug!(
            stream = id,
            code = code.name(),
            why,
            "HTTP/2 upstream stream error"
        );
        self.shared.borrow_mut().reset(id, code);
    }

    /// Parses and handles the frames in `data`; returns how many bytes were used (the rest
    /// is an incomplete frame).
    fn handle_frames(&mut self, data: &[u8]) -> usize {
        let handled = h2_socket::for_each_frame(data, 0, MAX_FRAME, |head, payload| {
            self.on_frame(head, payload);
            !self.failed
        });
        if handled.is_err() {
            self.fail(
                ErrorCode::FRAME_SIZE_ERROR,
                "a frame larger than our MAX_FRAME_SIZE",
            );
        }
        match handled {
            Ok(used) if !self.failed => used,
            _ => data.len(),
        }
    }

    fn on_frame(&mut self, head: frame::Head, payload: &[u8]) {
        if !self.settings_seen && head.kind != kind::SETTINGS {
            return self.fail(ErrorCode::PROTOCOL_ERROR, "the first frame is not SETTINGS");
        }
        if let Some(block) = &self.block {
            if head.kind != kind::CONTINUATION || head.stream != block.stream {
                return self.fail(
                    ErrorCode::PROTOCOL_ERROR,
                    "a frame other than CONTINUATION inside a header block",
                );
            }
        }
        let parsed = match frame::parse(head, payload) {
            Ok(parsed) => parsed,
            Err(FrameError::Connection(code, why)) => return self.fail(code, why),
            Err(FrameError::Stream(id, code, why)) => return self.stream_error(id, code, why),
        };
        match parsed {
            frame::Frame::Data {
                stream,
                end_stream,
                data,
                flow_len,
            } => self.on_data(stream, end_stream, data, flow_len),
            frame::Frame::Headers {
                stream,
                end_stream,
                end_headers,
                block,
                ..
            } => {
                if end_headers {
                    self.on_block(stream, end_stream, block);
                } else {
                    self.block = Some(Block {
                        stream,
                        end_stream,
                        bytes: block.to_vec(),
                    });
                }
            }
            frame::Frame::Continuation {
                end_headers, block, ..
            } => {
                let Some(mut open) = self.block.take() else {
                    return self.fail(
                        ErrorCode::PROTOCOL_ERROR,
                        "CONTINUATION without a header block under way",
                    );
                };
                open.bytes.extend_from_slice(block);
                if open.bytes.len() > MAX_BLOCK {
                    return self.fail(
                        ErrorCode::ENHANCE_YOUR_CALM,
                        "a header block longer than 64 KiB",
                    );
                }
                if end_headers {
                    self.on_block(open.stream, open.end_stream, &open.bytes);
                } else {
                    self.block = Some(open);
                }
            }
            frame::Frame::RstStream { stream, code } => self.on_reset(stream, code),
            frame::Frame::Settings { ack, settings } => {
                self.settings_seen = true;
                if !ack {
                    self.on_settings(settings);
                }
            }
            frame::Frame::Ping { ack, data } => {
                if !ack {
                    let mut shared = self.shared.borrow_mut();
                    frame::write_ping_ack(&mut shared.out, data);
                }
            }
            frame::Frame::GoAway {
                last_stream, code, ..
            } => self.on_go_away(last_stream, code),
            frame::Frame::WindowUpdate { stream, increment } => {
                self.on_window_update(stream, increment);
            }
            frame::Frame::Priority { .. } | frame::Frame::Unknown { .. } => {}
        }
    }

    fn on_settings(&mut self, settings: frame::Settings) {
        let mut shared = self.shared.borrow_mut();
        frame::write_settings_ack(&mut shared.out);
        if let Some(size) = settings.max_frame_size {
            shared.peer_max_frame = size;
        }
        if let Some(max) = settings.max_concurrent_streams {
            shared.peer_max_streams = max;
            for waker in shared.ready_waiters.drain(..) {
                waker.wake();
            }
        }
        let Some(window) = settings.initial_window_size else {
            return;
        };
        // §6.9.2: the change applies to every open stream's send window.
        let delta = i64::from(window) - shared.peer_initial_window;
        shared.peer_initial_window = i64::from(window);
        let mut overflow = false;
        let ids: Vec<u32> = shared.streams.keys().copied().collect();
        for &id in &ids {
            let stream = shared.streams.get_mut(&id).expect("listed");
            stream.send_window += delta;
            overflow |= stream.send_window > i64::from(frame::MAX_WINDOW);
        }
        if overflow {
            drop(shared);
            return self.fail(
                ErrorCode::FLOW_CONTROL_ERROR,
                "SETTINGS_INITIAL_WINDOW_SIZE overflowed a stream's window",
            );
        }
        if delta > 0 {
            for id in ids {
                shared.flush(id);
            }
        }
    }

    fn on_window_update(&mut self, id: u32, increment: u32) {
        let mut shared = self.shared.borrow_mut();
        if id == 0 {
            shared.send_window += i64::from(increment);
            if shared.send_window > i64::from(frame::MAX_WINDOW) {
                drop(shared);
                return self.fail(
                    ErrorCode::FLOW_CONTROL_ERROR,
                    "WINDOW_UPDATE overflowed the connection's window",
                );
            }
            let ids: Vec<u32> = shared
                .streams
                .iter()
                .filter(|(_, stream)| !stream.pending.is_empty() || stream.send_waker.is_some())
                .map(|(&id, _)| id)
                .collect();
            for id in ids {
                shared.flush(id);
            }
            return;
        }
        let Some(stream) = shared.streams.get_mut(&id) else {
            return;
        };
        stream.send_window += i64::from(increment);
        if stream.send_window > i64::from(frame::MAX_WINDOW) {
            drop(shared);
            return self.stream_error(
                id,
                ErrorCode::FLOW_CONTROL_ERROR,
                "WINDOW_UPDATE overflowed the stream's window",
            );
        }
        shared.flush(id);
    }

    fn on_reset(&mut self, id: u32, code: ErrorCode) {
        let mut shared = self.shared.borrow_mut();
        if id >= shared.next_id {
            drop(shared);
            return self.fail(ErrorCode::PROTOCOL_ERROR, "RST_STREAM on an idle stream");
        }
        let Some(stream) = shared.streams.get_mut(&id) else {
            return;
        };
        if !stream.closed() {
            // A response that is complete stays readable (a server may reset with NO_ERROR
            // once it answered, to stop the request body).
            if stream.recv_end {
                stream.send_end = true;
                stream.pending.clear();
                stream.pending_trailers = None;
            } else {
                stream.error = Some(Error::reset(code, true));
            }
            wake(stream);
        }
        shared.settle(id);
    }

    fn on_go_away(&mut self, last_stream: u32, code: ErrorCode) {
        tracing::debug!(
            last_stream,
            code = code.name(),
            "HTTP/2 upstream sent GOAWAY"
        );
        let mut shared = self.shared.borrow_mut();
        shared
            .closed
            .get_or_insert_with(|| Error::go_away(code, true, true));
        let ids: Vec<u32> = shared.streams.keys().copied().collect();
        for id in ids {
            let stream = shared.streams.get_mut(&id).expect("listed");
            let above = id > last_stream;
            if (above || code != ErrorCode::NO_ERROR) && !stream.closed() {
                stream.error = Some(Error::go_away(code, true, above));
                wake(stream);
            }
            shared.settle(id);
        }
        for waker in shared.ready_waiters.drain(..) {
            waker.wake();
        }
    }

    fn on_data(&mut self, id: u32, end_stream: bool, data: &[u8], flow_len: u32) {
        let mut shared = self.shared.borrow_mut();
        shared.recv_window -= i64::from(flow_len);
        if shared.recv_window < 0 {
            drop(shared);
            return self.fail(
                ErrorCode::FLOW_CONTROL_ERROR,
                "DATA beyond the connection's window",
            );
        }
        if id >= shared.next_id {
            drop(shared);
            return self.fail(ErrorCode::PROTOCOL_ERROR, "DATA on an idle stream");
        }
        let padding = flow_len as usize - data.len();
        let Some(stream) = shared.streams.get_mut(&id) else {
            // A stream we are done with: only the connection's window counts it.
            shared.give_back(flow_len as usize);
            return;
        };
        if stream.error.is_some() || !stream.recv_handle {
            shared.give_back(flow_len as usize);
            return;
        }
        stream.recv_window -= i64::from(flow_len);
        if stream.recv_window < 0 {
            drop(shared);
            return self.fail(
                ErrorCode::FLOW_CONTROL_ERROR,
                "DATA beyond the stream's window",
            );
        }
        if !stream.head_seen || stream.recv_end {
            // The reset gives back what the stream had queued; this frame is not queued.
            shared.give_back(flow_len as usize);
            drop(shared);
            return self.stream_error(
                id,
                ErrorCode::PROTOCOL_ERROR,
                "DATA before the response head or after END_STREAM",
            );
        }
        if !data.is_empty() {
            stream.data.push_back(self.arena.copy(data));
        }
        stream.recv_end = end_stream;
        if let Some(waker) = stream.recv_waker.take() {
            waker.wake();
        }
        if end_stream {
            shared.settle(id);
        }
        if padding > 0 {
            shared.release(id, padding);
        }
    }

    /// A complete header block on `id`: the response head (1xx skipped) or its trailers.
    fn on_block(&mut self, id: u32, end_stream: bool, block: &[u8]) {
        let mut status: Option<StatusCode> = None;
        let mut headers = HeaderMap::new();
        let mut size = 0usize;
        let mut bad = false;
        let decoded = self.decoder.decode(block, &mut |name, value| {
            size += name.len() + value.len() + 32;
            if bad || size > MAX_HEADER_LIST {
                return;
            }
            if name.first() == Some(&b':') {
                if name == b":status" && status.is_none() && headers.is_empty() {
                    status = StatusCode::from_bytes(value).ok();
                    bad |= status.is_none();
                } else {
                    bad = true;
                }
                return;
            }
            match (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) {
                (Ok(name), Ok(value)) => {
                    headers.append(name, value);
                }
                _ => bad = true,
            }
        });
        if decoded.is_err() {
            return self.fail(ErrorCode::COMPRESSION_ERROR, "a header block HPACK rejects");
        }
        let mut shared = self.shared.borrow_mut();
        let Some(stream) = shared.streams.get_mut(&id) else {
            let known = id < shared.next_id && shared.recent_resets.contains(&id);
            drop(shared);
            if !known {
                self.fail(
                    ErrorCode::PROTOCOL_ERROR,
                    "HEADERS on a stream that is not open",
                );
            }
            return;
        };
        if stream.error.is_some() {
            return;
        }
        if stream.recv_end {
            drop(shared);
            return self.fail(ErrorCode::STREAM_CLOSED, "HEADERS after END_STREAM");
        }
        if size > MAX_HEADER_LIST {
            drop(shared);
            return self.stream_error(
                id,
                ErrorCode::PROTOCOL_ERROR,
                "a response header list over 16 KiB",
            );
        }
        let trailers = stream.head_seen;
        if bad || trailers != status.is_none() || (trailers && !end_stream) {
            drop(shared);
            return self.stream_error(id, ErrorCode::PROTOCOL_ERROR, "a malformed response head");
        }
        if trailers {
            stream.trailers = Some(headers);
        } else {
            let status = status.expect("checked");
            if status.is_informational() {
                if end_stream {
                    drop(shared);
                    return self.stream_error(
                        id,
                        ErrorCode::PROTOCOL_ERROR,
                        "an informational response ending the stream",
                    );
                }
                return;
            }
            let mut head = Response::new(());
            *head.status_mut() = status;
            *head.version_mut() = Version::HTTP_2;
            *head.headers_mut() = headers;
            stream.head = Some(head);
            stream.head_seen = true;
        }
        stream.recv_end = end_stream;
        if let Some(waker) = stream.recv_waker.take() {
            waker.wake();
        }
        shared.settle(id);
    }
}

impl<I: AsyncRead + Unpin> FrameConn for Connection<I> {
    type Io = I;

    fn socket(&mut self) -> (&mut I, &mut SocketState) {
        (&mut self.io, &mut self.socket)
    }

    fn process(&mut self, data: &[u8]) -> Option<usize> {
        self.arena.begin(data.len());
        let used = self.handle_frames(data);
        self.arena.end();
        (!self.failed).then_some(used)
    }
}

impl<I: AsyncRead + AsyncWrite + Unpin> Connection<I> {
    /// Reads and handles what the peer sent; `Ready` when it closed or the read failed.
    fn poll_read_frames(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        for _ in 0..READS_PER_POLL {
            if self.failed {
                return Poll::Ready(Ok(()));
            }
            if ready!(h2_socket::poll_read_once(self, cx))? == 0 {
                return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()));
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Writes the queued frames out. `Ready(Ok)` once everything is written and flushed.
    fn poll_write_frames(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut shared = self.shared.borrow_mut();
        let wrote = ready!(h2_socket::poll_write_out(
            &mut self.io,
            &mut self.socket,
            cx,
            &mut shared.out,
            WRITE_CHUNK
        ))?;
        if wrote && shared.out.capacity() > OUT_RETAINED {
            // A large body went out: an idle pooled connection keeps a small buffer.
            shared.out = Vec::new();
        }
        drop(shared);
        ready!(h2_socket::poll_flush(&mut self.io, &mut self.socket, cx))?;
        Poll::Ready(Ok(()))
    }
}

impl<I: AsyncRead + AsyncWrite + Unpin> Future for Connection<I> {
    type Output = Result<(), Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        let this = self.get_mut();
        {
            let mut shared = this.shared.borrow_mut();
            if !shared
                .conn_waker
                .as_ref()
                .is_some_and(|w| w.will_wake(cx.waker()))
            {
                shared.conn_waker = Some(cx.waker().clone());
            }
        }
        if let Poll::Ready(Err(e)) = this.poll_read_frames(cx) {
            let error = Error::io(&e);
            this.shared.borrow_mut().fail_all(&error);
            return Poll::Ready(Err(error));
        }
        if !this.failed && !this.going_away {
            let mut shared = this.shared.borrow_mut();
            let idle = shared.active == 0;
            if idle && (shared.senders == 0 || shared.closed.is_some()) {
                // Every handle is gone (or the peer is going away) and no stream is open.
                frame::write_goaway(&mut shared.out, 0, ErrorCode::NO_ERROR);
                shared.closed.get_or_insert_with(Error::closed);
                this.going_away = true;
            }
        }
        let written = match this.poll_write_frames(cx) {
            Poll::Ready(Err(e)) => {
                let error = Error::io(&e);
                this.shared.borrow_mut().fail_all(&error);
                return Poll::Ready(Err(error));
            }
            written => written,
        };
        if (this.failed || this.going_away) && written.is_ready() {
            let _ = Pin::new(&mut this.io).poll_shutdown(cx);
            let shared = this.shared.borrow();
            return Poll::Ready(match (&shared.closed, this.failed) {
                (Some(error), true) => Err(error.clone()),
                _ => Ok(()),
            });
        }
        Poll::Pending
    }
}

impl<I> Drop for Connection<I> {
    fn drop(&mut self) {
        if let Ok(mut shared) = self.shared.try_borrow_mut() {
            shared.fail_all(&Error::io(&io::Error::other("the connection was dropped")));
        }
    }
}
