//! One HTTP/2 client connection: frames in, streams started and fed, frames out.
//!
//! ```text
//!  socket ─read─▶ worker's scratch buffer ─▶ whole frames parsed in place; an incomplete
//!     ▲           one's bytes kept (`h2_socket`; empty, capacity 0, between requests)
//!     │             ├─ HEADERS (+CONTINUATION) ─▶ HPACK ─▶ request::decode ─▶ stream task:
//!     │             │      Pipeline::respond ─▶ stream::send_response
//!     │             ├─ DATA ─▶ the stream's queue (its request body reads it)
//!     │             └─ SETTINGS / PING / WINDOW_UPDATE / RST_STREAM / GOAWAY ─▶ state
//!     └─write── Shared.out (frames from both tasks), written after each poll; given back
//!               when written out and no stream is open
//! ```
//!
//! A graceful close (keep-alive-requests, the idle close, a stopping worker) is two GOAWAYs, a
//! PING's round trip apart, so no stream the client opened meanwhile is lost (`go_away`).
//! A connection error writes GOAWAY and closes; a stream error writes RST_STREAM and the
//! connection goes on (RFC 9113 §5.4); frames the client sent before it saw a reset are
//! dropped (`resets::Recent`). Hostile patterns end the connection with GOAWAY
//! ENHANCE_YOUR_CALM: more resets than `resets::Budget` allows, counting the streams the
//! client reset before their answer (rapid reset) and the stream errors it made the server
//! raise (MadeYouReset); a header block larger than twice the header limit (CONTINUATION
//! flood); long runs of empty DATA frames. A client that sends and never reads stalls itself:
//! past `OUT_HIGH_WATER` queued bytes the connection stops reading.

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use http::{Response, StatusCode};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Sleep;
use wire::h2::frame::{self, ErrorCode, Frame, FrameError};
use wire::h2::hpack::{self, Decoder};

use super::request::{self, HeadError};
use super::stream::{self, SharedRef, Stream, StreamEnd, OUT_HIGH_WATER, RECV_WINDOW};
use crate::error::ErrorSource;
use crate::h2_socket::{self, DataArena, FrameConn, SocketState};

/// The PING sent with a graceful close's first GOAWAY.
const GOAWAY_PING: [u8; 8] = *b"goaway\0\0";
/// How long a graceful close waits for that PING to come back before the final GOAWAY (a
/// client that never answers PINGs must not hold the connection open).
const GOAWAY_PING_WAIT: Duration = Duration::from_secs(2);
use crate::pipeline::{ClientUpgrade, Pipeline};
use crate::request_body::ClientBody;
use crate::stall::StreamWatch;

/// Empty DATA frames without END_STREAM in a row that end the connection (CVE-2019-9518).
const EMPTY_FRAME_LIMIT: u32 = 1_000;
/// Reads one poll of the connection makes before it lets other tasks run.
const READS_PER_POLL: usize = 16;
/// One write to the socket at most: one TLS record's plaintext.
const WRITE_CHUNK: usize = 16 * 1024;
/// The largest frame accepted (SETTINGS_MAX_FRAME_SIZE is left at its default).
const MAX_FRAME: usize = frame::DEFAULT_MAX_FRAME_SIZE as usize;

/// The limits a connection runs with, from the ConfigMap.
pub(crate) struct Limits {
    pub(crate) max_concurrent_streams: u32,
    /// `large-client-header-buffers`: the decoded header list's size (RFC 9113 counting), for
    /// a request's head and for its trailers.
    pub(crate) max_header_list: usize,
    /// `client-header-timeout`: how long a header block (or the preface) may take.
    pub(crate) header_timeout: Duration,
    /// `client-send-timeout`: how long a stream may wait for the client's window.
    pub(crate) send_timeout: Duration,
}

/// A header block still arriving in CONTINUATION frames.
struct PartialBlock {
    stream: u32,
    end_stream: bool,
    trailers: bool,
    block: Vec<u8>,
}

/// A client connection speaking HTTP/2: a future that ends when the connection does.
pub(crate) struct Connection<I, C> {
    io: I,
    conn: Rc<C>,
    shared: SharedRef,
    decoder: Decoder,
    limits: Limits,
    /// A frame (or the preface) not complete at the end of a read; what is written.
    socket: SocketState,
    /// Where request DATA is copied to.
    arena: DataArena,
    preface_read: bool,
    settings_seen: bool,
    block: Option<PartialBlock>,
    /// The highest stream id the client has used.
    last_stream: u32,
    /// Ids the client skipped (implicitly closed, never opened) most recently: HEADERS on one
    /// is PROTOCOL_ERROR, where a stream that was open and closed is STREAM_CLOSED.
    skipped: (u32, u32),
    /// The final GOAWAY is out: streams above this id are not served.
    going_away: Option<u32>,
    /// A graceful close announced (GOAWAY with the highest id, and a PING): the final GOAWAY
    /// goes when the PING comes back, or when this fires.
    announced: Option<Pin<Box<Sleep>>>,
    /// A connection error: GOAWAY is queued; the connection closes once it is written.
    failed: bool,
    read_closed: bool,
    /// The last poll stopped reading at `OUT_HIGH_WATER` (no read pending on the socket).
    read_held: bool,
    empty_frames: u32,
    /// `client-header-timeout` for the preface and for a header block in parts.
    header_timer: Option<Pin<Box<Sleep>>>,
}

impl<I, C: Pipeline> Connection<I, C> {
    pub(crate) fn new(conn: Rc<C>, io: I, limits: Limits) -> Connection<I, C> {
        let mut state = stream::Shared::new();
        let settings = [
            (
                frame::setting::MAX_CONCURRENT_STREAMS,
                limits.max_concurrent_streams,
            ),
            (frame::setting::INITIAL_WINDOW_SIZE, RECV_WINDOW),
            (
                frame::setting::MAX_HEADER_LIST_SIZE,
                u32::try_from(limits.max_header_list).unwrap_or(u32::MAX),
            ),
            (frame::setting::ENABLE_CONNECT_PROTOCOL, 1),
        ];
        frame::write_settings(&mut state.out, &settings);
        frame::write_window_update(&mut state.out, 0, RECV_WINDOW - stream::DEFAULT_WINDOW);
        state.recv_window = i64::from(RECV_WINDOW);
        // The preface shares the connection's one client-header-timeout with what came before
        // it (PROXY header, TLS handshake): it counts from when the connection was accepted,
        // which a new connection's last activity still is.
        let header_timer = (!limits.header_timeout.is_zero()).then(|| {
            Box::pin(tokio::time::sleep_until(
                (conn.last_active() + limits.header_timeout).into(),
            ))
        });
        Connection {
            io,
            conn,
            shared: Rc::new(RefCell::new(state)),
            decoder: Decoder::new(hpack::DEFAULT_TABLE_SIZE),
            limits,
            socket: SocketState::default(),
            arena: DataArena::default(),
            preface_read: false,
            settings_seen: false,
            block: None,
            last_stream: 0,
            skipped: (0, 0),
            going_away: None,
            announced: None,
            failed: false,
            read_closed: false,
            read_held: false,
            empty_frames: 0,
            header_timer,
        }
    }

    /// A graceful end, in two steps (RFC 9113 §6.8): a GOAWAY naming the highest possible
    /// stream, with a PING; when the PING comes back (the client has read the GOAWAY, so it
    /// opens no more streams) the final GOAWAY names the last stream it opened; those finish,
    /// then the connection closes. With one GOAWAY naming the last stream at once, the streams
    /// a client opened meanwhile were dropped, and a client that had written them (gRPC's
    /// core under load) failed them with "Stream removed" instead of retrying them.
    pub(crate) fn go_away(&mut self) {
        if self.going_away.is_some() || self.announced.is_some() || self.failed {
            return;
        }
        let mut shared = self.shared.borrow_mut();
        frame::write_goaway(&mut shared.out, frame::MAX_STREAM_ID, ErrorCode::NO_ERROR);
        frame::write_ping(&mut shared.out, GOAWAY_PING);
        shared.wake_conn();
        self.announced = Some(Box::pin(tokio::time::sleep(GOAWAY_PING_WAIT)));
    }

    /// The graceful end's second step: no stream above the last one opened is served.
    fn final_go_away(&mut self) {
        if self.going_away.is_some() || self.failed {
            return;
        }
        self.announced = None;
        self.going_away = Some(self.last_stream);
        let mut shared = self.shared.borrow_mut();
        frame::write_goaway(&mut shared.out, self.last_stream, ErrorCode::NO_ERROR);
        shared.wake_conn();
    }

    /// A connection error: GOAWAY with `code`, every stream ended, nothing more read.
    fn fail(&mut self, code: ErrorCode, why: &'static str) {
        if self.failed {
            return;
        }
        tracing::debug!(code = code.name(), why, "HTTP/2 client connection error");
        self.failed = true;
        self.block = None;
        self.socket.forget_partial();
        let mut shared = self.shared.borrow_mut();
        frame::write_goaway(&mut shared.out, self.last_stream, code);
        shared.drop_all_streams();
    }

    /// Ends one stream with RST_STREAM `code` for the client's error: its task stops (and
    /// with it the upstream request), its body reader gets an error. Each counts against the
    /// reset budget (MadeYouReset), but for REFUSED_STREAM: a stream over the cap started no
    /// work, and a client may open one before it has read the server's SETTINGS.
    fn reset_stream(&mut self, id: u32, code: ErrorCode, why: &'static str) {
        tracing::debug!(stream = id, code = code.name(), why, "HTTP/2 stream reset");
        let mut shared = self.shared.borrow_mut();
        shared.write_reset(id, code);
        shared.drop_stream(id);
        shared.wake_conn();
        let spent = code != ErrorCode::REFUSED_STREAM && shared.resets.server_reset();
        drop(shared);
        if spent {
            self.fail(
                ErrorCode::ENHANCE_YOUR_CALM,
                "too many streams reset, by the client or for its errors",
            );
        }
    }

    /// A frame on a stream that closed without a reset from the server: STREAM_CLOSED (RFC
    /// 9113 §5.1). Not counted: nothing was started, and frames that follow on the id are
    /// dropped as for any stream the server reset.
    fn closed_stream_error(&mut self, id: u32, why: &'static str) {
        tracing::debug!(stream = id, why, "HTTP/2 frame on a closed stream");
        let mut shared = self.shared.borrow_mut();
        shared.write_reset(id, ErrorCode::STREAM_CLOSED);
        shared.wake_conn();
    }

    /// Parses and handles the frames in `data`; returns how many bytes were used (the rest
    /// is an incomplete frame).
    fn handle_frames(&mut self, data: &[u8]) -> usize {
        let mut at = 0;
        if !self.preface_read {
            if data.len() < frame::PREFACE.len() {
                if !frame::PREFACE.starts_with(data) {
                    self.fail(ErrorCode::PROTOCOL_ERROR, "no HTTP/2 connection preface");
                    return data.len();
                }
                return 0;
            }
            if !data.starts_with(frame::PREFACE) {
                self.fail(ErrorCode::PROTOCOL_ERROR, "no HTTP/2 connection preface");
                return data.len();
            }
            self.preface_read = true;
            at = frame::PREFACE.len();
        }
        let handled = h2_socket::for_each_frame(data, at, MAX_FRAME as u32, |head, payload| {
            self.on_frame(head, payload);
            !self.failed
        });
        if handled.is_err() {
            self.fail(
                ErrorCode::FRAME_SIZE_ERROR,
                "a frame larger than MAX_FRAME_SIZE",
            );
        }
        match handled {
            Ok(used) if !self.failed => used,
            _ => data.len(),
        }
    }

    fn on_frame(&mut self, head: frame::Head, payload: &[u8]) {
        if !self.settings_seen && head.kind != frame::kind::SETTINGS {
            return self.fail(ErrorCode::PROTOCOL_ERROR, "the first frame is not SETTINGS");
        }
        if let Some(block) = &self.block {
            if head.kind != frame::kind::CONTINUATION || head.stream != block.stream {
                return self.fail(
                    ErrorCode::PROTOCOL_ERROR,
                    "a frame other than CONTINUATION inside a header block",
                );
            }
        }
        let frame = match frame::parse(head, payload) {
            Ok(frame) => frame,
            Err(FrameError::Connection(code, why)) => return self.fail(code, why),
            Err(FrameError::Stream(id, code, why)) => {
                if head.kind == frame::kind::HEADERS && id > self.last_stream {
                    self.last_stream = id;
                } else if self.shared.borrow().recent_resets.contains(id) {
                    // Sent before the client saw the server's RST_STREAM (RFC 9113 §5.1).
                    return;
                }
                return self.reset_stream(id, code, why);
            }
        };
        match frame {
            Frame::Data {
                stream,
                end_stream,
                data,
                flow_len,
            } => self.on_data(stream, end_stream, data, flow_len),
            Frame::Headers {
                stream,
                end_stream,
                end_headers,
                block,
                ..
            } => self.on_headers(stream, end_stream, end_headers, block),
            Frame::Continuation {
                stream: _,
                end_headers,
                block,
            } => self.on_continuation(end_headers, block),
            Frame::Priority { .. } | Frame::Unknown { .. } => {}
            Frame::RstStream { stream, .. } => self.on_reset(stream),
            Frame::Settings { ack, settings } => {
                if !ack {
                    self.settings_seen = true;
                    if self.block.is_none() && self.preface_read {
                        self.header_timer = None;
                    }
                    self.on_settings(settings);
                }
            }
            Frame::Ping { ack, data } => {
                if !ack {
                    frame::write_ping_ack(&mut self.shared.borrow_mut().out, data);
                } else if data == GOAWAY_PING && self.announced.is_some() {
                    self.final_go_away();
                }
            }
            Frame::GoAway { .. } => {
                // The client opens no more streams; those in flight finish.
                if self.going_away.is_none() {
                    self.announced = None;
                    self.going_away = Some(self.last_stream);
                }
            }
            Frame::WindowUpdate { stream, increment } => self.on_window_update(stream, increment),
        }
    }

    fn on_settings(&mut self, settings: frame::Settings) {
        let mut shared = self.shared.borrow_mut();
        if let Some(size) = settings.max_frame_size {
            shared.peer_max_frame_size = size as usize;
        }
        if let Some(window) = settings.initial_window_size {
            let delta = i64::from(window) - shared.peer_initial_window;
            shared.peer_initial_window = i64::from(window);
            let mut overflow = false;
            for stream in &mut shared.streams {
                stream.send_window += delta;
                overflow |= stream.send_window > i64::from(frame::MAX_WINDOW);
                if delta > 0 {
                    if let Some(waker) = stream.send_waker.take() {
                        waker.wake();
                    }
                }
            }
            if overflow {
                drop(shared);
                return self.fail(
                    ErrorCode::FLOW_CONTROL_ERROR,
                    "SETTINGS_INITIAL_WINDOW_SIZE took a window past 2^31-1",
                );
            }
        }
        frame::write_settings_ack(&mut shared.out);
    }

    fn on_window_update(&mut self, id: u32, increment: u32) {
        let mut shared = self.shared.borrow_mut();
        if id == 0 {
            shared.send_window += i64::from(increment);
            if shared.send_window > i64::from(frame::MAX_WINDOW) {
                drop(shared);
                return self.fail(
                    ErrorCode::FLOW_CONTROL_ERROR,
                    "WINDOW_UPDATE took the connection window past 2^31-1",
                );
            }
            shared.wake_senders();
            return;
        }
        match shared.stream(id) {
            Some(stream) => {
                stream.send_window += i64::from(increment);
                if stream.send_window > i64::from(frame::MAX_WINDOW) {
                    drop(shared);
                    return self.reset_stream(
                        id,
                        ErrorCode::FLOW_CONTROL_ERROR,
                        "WINDOW_UPDATE took a stream window past 2^31-1",
                    );
                }
                if let Some(waker) = stream.send_waker.take() {
                    waker.wake();
                }
            }
            None if id > self.last_stream => {
                drop(shared);
                self.fail(ErrorCode::PROTOCOL_ERROR, "WINDOW_UPDATE on an idle stream");
            }
            None => {}
        }
    }

    fn on_reset(&mut self, id: u32) {
        if id > self.last_stream {
            return self.fail(ErrorCode::PROTOCOL_ERROR, "RST_STREAM on an idle stream");
        }
        let mut shared = self.shared.borrow_mut();
        let Some(stream) = shared.stream(id) else {
            return;
        };
        let unanswered = !stream.answered;
        shared.drop_stream(id);
        if unanswered && shared.resets.client_reset() {
            drop(shared);
            self.fail(
                ErrorCode::ENHANCE_YOUR_CALM,
                "too many streams reset, by the client or for its errors",
            );
        }
    }

    fn on_data(&mut self, id: u32, end_stream: bool, data: &[u8], flow_len: u32) {
        {
            let mut shared = self.shared.borrow_mut();
            if i64::from(flow_len) > shared.recv_window {
                drop(shared);
                return self.fail(
                    ErrorCode::FLOW_CONTROL_ERROR,
                    "DATA beyond the connection's window",
                );
            }
            shared.recv_window -= i64::from(flow_len);
        }
        if data.is_empty() && !end_stream {
            self.empty_frames += 1;
            if self.empty_frames > EMPTY_FRAME_LIMIT {
                return self.fail(ErrorCode::ENHANCE_YOUR_CALM, "a flood of empty DATA frames");
            }
        } else {
            self.empty_frames = 0;
        }
        let mut shared = self.shared.borrow_mut();
        let padding = flow_len - data.len() as u32;
        let Some(stream) = shared.stream(id) else {
            // Counted against the connection's window above, and given back at once.
            shared.discard(flow_len);
            if shared.recent_resets.contains(id) {
                // Sent before the client saw the server's RST_STREAM (RFC 9113 §5.1).
                return;
            }
            drop(shared);
            if id > self.last_stream {
                return self.fail(ErrorCode::PROTOCOL_ERROR, "DATA on an idle stream");
            }
            return self.closed_stream_error(id, "DATA on a closed stream");
        };
        if stream.recv_closed || stream.tunnel && stream.send_closed {
            shared.discard(flow_len);
            drop(shared);
            return self.reset_stream(id, ErrorCode::STREAM_CLOSED, "DATA after END_STREAM");
        }
        if i64::from(flow_len) > stream.recv_window {
            shared.discard(flow_len);
            drop(shared);
            return self.reset_stream(
                id,
                ErrorCode::FLOW_CONTROL_ERROR,
                "DATA beyond the stream's window",
            );
        }
        stream.recv_window -= i64::from(flow_len);
        stream.received += data.len() as u64;
        let length_wrong = stream.content_length.is_some_and(|declared| {
            stream.received > declared || (end_stream && stream.received != declared)
        });
        if length_wrong {
            shared.discard(flow_len);
            drop(shared);
            return self.reset_stream(
                id,
                ErrorCode::PROTOCOL_ERROR,
                "DATA that disagrees with content-length",
            );
        }
        let unread = if stream.body_dropped {
            data.len() as u32
        } else {
            if !data.is_empty() {
                stream.recv.push_back(self.arena.copy(data));
            }
            0
        };
        if end_stream {
            stream.recv_closed = true;
        }
        if let Some(waker) = stream.body_waker.take() {
            waker.wake();
        }
        shared.credit_unread(id, padding + unread);
    }

    fn on_headers(&mut self, id: u32, end_stream: bool, end_headers: bool, block: &[u8]) {
        // A block on an open stream is its trailers; one on a stream the server reset lately
        // is decoded as trailers are (the HPACK table must stay in step) and dropped.
        let trailers = {
            let mut shared = self.shared.borrow_mut();
            shared.stream(id).is_some() || shared.recent_resets.contains(id)
        };
        if !trailers && id <= self.last_stream {
            if (self.skipped.0..self.skipped.1).contains(&id) {
                return self.fail(
                    ErrorCode::PROTOCOL_ERROR,
                    "HEADERS on a stream id lower than one already used",
                );
            }
            return self.fail(ErrorCode::STREAM_CLOSED, "HEADERS on a closed stream");
        }
        if !trailers {
            if id > self.last_stream + 2 {
                self.skipped = (self.last_stream + 1, id);
            }
            self.last_stream = id;
        }
        if end_headers {
            return self.on_block(id, end_stream, trailers, block);
        }
        if self.header_timer.is_none() && !self.limits.header_timeout.is_zero() {
            self.header_timer = Some(Box::pin(tokio::time::sleep(self.limits.header_timeout)));
        }
        self.block = Some(PartialBlock {
            stream: id,
            end_stream,
            trailers,
            block: block.to_vec(),
        });
        self.check_block_size();
    }

    fn on_continuation(&mut self, end_headers: bool, block: &[u8]) {
        let Some(partial) = self.block.as_mut() else {
            return self.fail(
                ErrorCode::PROTOCOL_ERROR,
                "CONTINUATION without a header block",
            );
        };
        partial.block.extend_from_slice(block);
        if !self.check_block_size() {
            return;
        }
        if end_headers {
            let partial = self.block.take().expect("checked above");
            self.header_timer = None;
            self.on_block(
                partial.stream,
                partial.end_stream,
                partial.trailers,
                &partial.block,
            );
        }
    }

    /// A header block larger than twice the header list limit is an attack, not a request
    /// (a list within the limit never encodes that large): the connection ends.
    fn check_block_size(&mut self) -> bool {
        let limit = self.limits.max_header_list.saturating_mul(2).max(64 * 1024);
        if self.block.as_ref().is_some_and(|b| b.block.len() > limit) {
            self.fail(
                ErrorCode::ENHANCE_YOUR_CALM,
                "a header block larger than twice large-client-header-buffers",
            );
            return false;
        }
        true
    }

    /// A complete header block: a new request, or a stream's trailers.
    fn on_block(&mut self, id: u32, end_stream: bool, trailers: bool, block: &[u8]) {
        if trailers {
            return self.on_trailers(id, end_stream, block);
        }
        let decoded = match request::decode(&mut self.decoder, block, self.limits.max_header_list) {
            Ok(decoded) => decoded,
            Err(_) => {
                return self.fail(ErrorCode::COMPRESSION_ERROR, "a header block HPACK refuses")
            }
        };
        if self.going_away.is_some_and(|last| id > last) || self.failed {
            return;
        }
        let head = match decoded {
            Ok(head) => head,
            Err(HeadError::Malformed(why)) => {
                return self.reset_stream(id, ErrorCode::PROTOCOL_ERROR, why)
            }
            Err(HeadError::TooLarge) => return self.refuse_too_large(id, end_stream),
        };
        let mut shared = self.shared.borrow_mut();
        if shared.streams.len() >= self.limits.max_concurrent_streams as usize {
            drop(shared);
            return self.reset_stream(
                id,
                ErrorCode::REFUSED_STREAM,
                "more streams than http2-max-concurrent-streams",
            );
        }
        if end_stream && head.content_length.is_some_and(|l| l > 0) {
            drop(shared);
            return self.reset_stream(
                id,
                ErrorCode::PROTOCOL_ERROR,
                "content-length on a request without DATA",
            );
        }
        let mut stream = Stream::new(id, shared.peer_initial_window, head.content_length);
        stream.recv_closed = end_stream;
        let mut parts = head.parts;
        let upgrade = if head.websocket {
            stream.tunnel = true;
            crate::headers::websocket_over_http1(&mut parts);
            Some(ClientUpgrade::Http2(stream::Upgrade {
                shared: self.shared.clone(),
                id,
                conn: self.conn.clone(),
            }))
        } else {
            None
        };
        let body = (!end_stream && !head.websocket).then(|| {
            ClientBody::Http2(stream::RequestBody::new(
                self.shared.clone(),
                id,
                head.content_length,
            ))
        });
        shared.streams.push(stream);
        if shared.out.capacity() == 0 {
            // The queue is freed while no stream is open (idle connections hold nothing); a
            // stream's HEADERS, DATA and trailers then go in without regrowing it frame by
            // frame.
            shared.out.reserve(stream::OUT_INITIAL);
        }
        drop(shared);
        let task = serve_stream(
            self.conn.clone(),
            self.shared.clone(),
            id,
            parts,
            body,
            upgrade,
        );
        let handle = if self.limits.send_timeout.is_zero() {
            tokio::task::spawn_local(task)
        } else {
            tokio::task::spawn_local(StreamWatch::new(task, self.limits.send_timeout))
        };
        if let Some(stream) = self.shared.borrow_mut().stream(id) {
            stream.task = Some(handle.abort_handle());
        }
    }

    /// The request's header list is over the limit: 431, as for HTTP/1.
    fn refuse_too_large(&mut self, id: u32, end_stream: bool) {
        let mut shared = self.shared.borrow_mut();
        let max_frame = shared.peer_max_frame_size as u32;
        let mut block = Vec::with_capacity(32);
        hpack::encode_status(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE.as_u16(),
            &mut block,
        );
        hpack::encode_field(b"content-length", b"0", false, &mut block);
        frame::write_headers(&mut shared.out, id, &block, true, max_frame);
        if !end_stream {
            shared.write_reset(id, ErrorCode::NO_ERROR);
        }
        shared.wake_conn();
        drop(shared);
        self.conn.count_error(431, ErrorSource::Client);
        // Logged as HTTP/1's refusals are: the head was not kept, so the request is "-".
        self.conn.log_refused(None, 431, (0, 0));
    }

    /// A second header block on stream `id`: its trailers, held to the head's limit. Decoded
    /// whatever becomes of it, so the connection's HPACK table stays in step.
    fn on_trailers(&mut self, id: u32, end_stream: bool, block: &[u8]) {
        let limit = self.limits.max_header_list;
        let Ok(decoded) = request::decode_trailers(&mut self.decoder, block, limit) else {
            return self.fail(
                ErrorCode::COMPRESSION_ERROR,
                "a trailer block HPACK refuses",
            );
        };
        let mut shared = self.shared.borrow_mut();
        let Some(stream) = shared.stream(id) else {
            // The server reset the stream (or it ended) while the block was on its way.
            return;
        };
        let refused = if stream.recv_closed {
            Some((ErrorCode::STREAM_CLOSED, "HEADERS after END_STREAM"))
        } else if !end_stream {
            Some((
                ErrorCode::PROTOCOL_ERROR,
                "a second HEADERS without END_STREAM",
            ))
        } else if stream.content_length.is_some_and(|l| l != stream.received) {
            Some((
                ErrorCode::PROTOCOL_ERROR,
                "DATA that disagrees with content-length",
            ))
        } else {
            match &decoded {
                Ok(_) => None,
                Err(HeadError::TooLarge) => Some((
                    ErrorCode::ENHANCE_YOUR_CALM,
                    "trailers larger than large-client-header-buffers",
                )),
                Err(HeadError::Malformed(why)) => Some((ErrorCode::PROTOCOL_ERROR, *why)),
            }
        };
        if let Some((code, why)) = refused {
            drop(shared);
            return self.reset_stream(id, code, why);
        }
        stream.recv_trailers = decoded.ok();
        stream.recv_closed = true;
        if let Some(waker) = stream.body_waker.take() {
            waker.wake();
        }
    }
}

/// One stream's task: the request through the pipeline, then its response out.
async fn serve_stream<C: Pipeline>(
    conn: Rc<C>,
    shared: SharedRef,
    id: u32,
    parts: http::request::Parts,
    body: Option<ClientBody>,
    upgrade: Option<ClientUpgrade>,
) {
    let mut end = StreamEnd {
        shared: shared.clone(),
        id,
        done: false,
    };
    // Boxed: the pipeline's future is kilobytes, and tokio moves a task's future as it
    // spawns it; a pointer is cheaper to move.
    let response: Response<C::Body> = Box::pin(conn.respond(parts, body, upgrade)).await;
    stream::send_response(&shared, id, response).await;
    end.done = true;
}

impl<I: AsyncRead + Unpin, C: Pipeline> FrameConn for Connection<I, C> {
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

    fn unit_len(&self, kept: &[u8]) -> usize {
        if self.preface_read {
            h2_socket::frame_len(kept)
        } else {
            frame::PREFACE.len()
        }
    }
}

impl<I: AsyncRead + AsyncWrite + Unpin, C: Pipeline> Connection<I, C> {
    /// Reads and handles what the client sent; `Ready` when the client closed or the read
    /// failed.
    fn poll_read_frames(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        for _ in 0..READS_PER_POLL {
            if self.failed || self.read_closed {
                return Poll::Ready(Ok(()));
            }
            if self.shared.borrow().out.len() >= OUT_HIGH_WATER {
                // The client is not reading what it asked for: neither is the server. No
                // read is pending, so nothing wakes us for the client's next bytes: `poll`
                // comes back here once the queue is written out.
                self.read_held = true;
                return Poll::Pending;
            }
            self.read_held = false;
            if ready!(h2_socket::poll_read_once(self, cx))? == 0 {
                self.read_closed = true;
                return Poll::Ready(Ok(()));
            }
        }
        // More may be waiting: come back after the other tasks had their turn.
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
        if wrote {
            if shared.streams.is_empty() {
                shared.out = Vec::new();
            }
            shared.wake_senders();
        }
        drop(shared);
        ready!(h2_socket::poll_flush(&mut self.io, &mut self.socket, cx))?;
        Poll::Ready(Ok(()))
    }
}

impl<I: AsyncRead + AsyncWrite + Unpin, C: Pipeline> Future for Connection<I, C> {
    type Output = io::Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
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
            return Poll::Ready(Err(e));
        }
        if let Some(timer) = this.header_timer.as_mut() {
            if timer.as_mut().poll(cx).is_ready() {
                if this.preface_read && this.settings_seen && this.block.is_none() {
                    this.header_timer = None;
                } else {
                    tracing::debug!("HTTP/2 client sent no complete header block in time");
                    return Poll::Ready(Ok(()));
                }
            }
        }
        if let Some(timer) = this.announced.as_mut() {
            if timer.as_mut().poll(cx).is_ready() {
                tracing::debug!("HTTP/2 client did not answer the GOAWAY's PING in time");
                this.final_go_away();
            }
        }
        let written = this.poll_write_frames(cx)?;
        if this.read_held && this.shared.borrow().out.len() < OUT_HIGH_WATER {
            // Reading stopped at the high-water mark and the queue has drained since: read
            // again now. Returning Pending instead left a bidirectional stream waiting for
            // client bytes no one would read (the client's messages sat in the socket until
            // its deadline).
            cx.waker().wake_by_ref();
        }
        let done = this.failed
            || this.read_closed
            || (this.going_away.is_some() && this.shared.borrow().streams.is_empty());
        if done && written.is_ready() {
            return Pin::new(&mut this.io).poll_shutdown(cx).map(|_| Ok(()));
        }
        if this.read_closed && !this.failed {
            // The client is gone: nothing more can be written.
            return Poll::Ready(Ok(()));
        }
        Poll::Pending
    }
}

impl<I, C> Drop for Connection<I, C> {
    fn drop(&mut self) {
        // Streams' tasks hold the shared state, not the connection: stop them with it.
        if let Ok(mut shared) = self.shared.try_borrow_mut() {
            shared.drop_all_streams();
        }
    }
}
