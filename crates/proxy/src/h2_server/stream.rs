//! What the connection task and a stream's task share: the streams' windows and queues, and
//! the frames waiting for the socket.
//!
//! ```text
//!  connection task ──DATA──▶ Stream.recv ──▶ RequestBody::poll_frame (the upstream reads it)
//!        ▲                                      └─ bytes taken ─▶ credit ─▶ WINDOW_UPDATE
//!        │ writes `out`                                               (half a window at a time)
//!  Shared.out ◀── HEADERS / DATA / trailers ── stream task: Pipeline::respond, then send()
//!                  (DATA only within both send windows; waits when `out` is full)
//! ```
//!
//! One worker thread runs both sides, so the state is an `Rc<RefCell<…>>` borrowed for a few
//! lines at a time and never across an `.await`.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{ready, Context, Poll, Waker};

use bytes::{Buf, Bytes};
use http::{HeaderMap, Response};
use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use wire::h2::frame::{self, ErrorCode};
use wire::h2::hpack;

use super::resets;
use crate::body::BoxError;

/// Frames queued for the socket past which a stream's task waits before adding DATA, and the
/// connection stops reading (a client that sends PINGs or SETTINGS and reads nothing cannot
/// make the queue grow without bound).
pub(super) const OUT_HIGH_WATER: usize = 64 * 1024;

/// The room the outgoing queue gets when a stream opens on a connection whose queue was
/// freed: one write's worth (`conn::WRITE_CHUNK`), so the frames of the streams answered in
/// one pass go in without regrowing it (gRPC, 50 calls on 10 connections: a 4 KiB start still
/// regrew it on most passes). Freed again once no stream is open.
pub(super) const OUT_INITIAL: usize = 16 * 1024;

/// The receive window each stream and the connection give the client (hyper's defaults):
/// request bytes the upstream has not taken yet, at most, per stream and per connection.
pub(super) const RECV_WINDOW: u32 = 1024 * 1024;

/// Every window's size before SETTINGS or WINDOW_UPDATE change it (RFC 9113 §6.9.2).
pub(super) const DEFAULT_WINDOW: u32 = 65_535;

pub(super) type SharedRef = Rc<RefCell<Shared>>;

/// What an RFC 8441 tunnel tells the client connection it runs on: the connection is busy
/// while a tunnel is open (as while a request is in flight), so keep-alive does not close it.
/// The connection context implements it; a trait object, so that this layer names no type of
/// the layers above (a tunnel is rare: the dynamic call costs nothing that matters).
pub(crate) trait TunnelCount {
    fn tunnel_opened(&self);
    fn tunnel_closed(&self);
}

/// The connection's state both tasks touch.
pub(super) struct Shared {
    /// Frames waiting for the socket. Given back (capacity 0) when written out and no stream
    /// is open: an idle connection holds no buffer.
    pub(super) out: Vec<u8>,
    pub(super) streams: Vec<Stream>,
    /// What the client lets the server send on the connection.
    pub(super) send_window: i64,
    /// The client's SETTINGS_INITIAL_WINDOW_SIZE: new streams' send window.
    pub(super) peer_initial_window: i64,
    pub(super) peer_max_frame_size: usize,
    /// What the client may still send on the connection.
    pub(super) recv_window: i64,
    /// Request bytes taken (or dropped) since the last connection WINDOW_UPDATE.
    pub(super) recv_credit: u32,
    /// The connection's task, woken when frames are queued.
    pub(super) conn_waker: Option<Waker>,
    /// Streams' tasks waiting for the connection window or for room in `out`.
    pub(super) send_waiters: Vec<Waker>,
    /// The resets the client caused (rapid reset, MadeYouReset).
    pub(super) resets: resets::Budget,
    /// Streams the server reset lately: frames the client sent before it saw the reset are
    /// dropped.
    pub(super) recent_resets: resets::Recent,
}

/// One open stream (open or half-closed: a closed stream is removed).
pub(super) struct Stream {
    pub(super) id: u32,
    /// Request data not yet taken by the body's reader.
    pub(super) recv: VecDeque<Bytes>,
    pub(super) recv_trailers: Option<HeaderMap>,
    /// END_STREAM arrived (or the stream was reset): no more request data.
    pub(super) recv_closed: bool,
    /// What the client may still send on this stream.
    pub(super) recv_window: i64,
    pub(super) recv_credit: u32,
    pub(super) body_waker: Option<Waker>,
    /// Nobody reads the request body any more: its data is credited back as it arrives.
    pub(super) body_dropped: bool,
    pub(super) content_length: Option<u64>,
    pub(super) received: u64,
    /// What the client lets the server send on this stream.
    pub(super) send_window: i64,
    pub(super) send_waker: Option<Waker>,
    /// The response's HEADERS went out.
    pub(super) answered: bool,
    /// END_STREAM (or RST_STREAM) went out: nothing more is sent.
    pub(super) send_closed: bool,
    /// The stream is a tunnel (extended CONNECT): its response does not end it. Cleared when
    /// the upstream did not switch protocols (`Upgrade` dropped unused).
    pub(super) tunnel: bool,
    /// Woken when the response to a tunnel's CONNECT has gone out.
    pub(super) upgrade_waker: Option<Waker>,
    pub(super) task: Option<tokio::task::AbortHandle>,
}

impl Stream {
    pub(super) fn new(id: u32, send_window: i64, content_length: Option<u64>) -> Stream {
        Stream {
            id,
            recv: VecDeque::new(),
            recv_trailers: None,
            recv_closed: false,
            recv_window: i64::from(RECV_WINDOW),
            recv_credit: 0,
            body_waker: None,
            body_dropped: false,
            content_length,
            received: 0,
            send_window,
            send_waker: None,
            answered: false,
            send_closed: false,
            tunnel: false,
            upgrade_waker: None,
            task: None,
        }
    }

    /// Wakes whoever waits on this stream: its body reader, its sender, its tunnel.
    pub(super) fn wake_all(&mut self) {
        for waker in [
            self.body_waker.take(),
            self.send_waker.take(),
            self.upgrade_waker.take(),
        ]
        .into_iter()
        .flatten()
        {
            waker.wake();
        }
    }
}

impl Shared {
    pub(super) fn new() -> Shared {
        Shared {
            out: Vec::new(),
            streams: Vec::new(),
            send_window: i64::from(DEFAULT_WINDOW),
            peer_initial_window: i64::from(DEFAULT_WINDOW),
            peer_max_frame_size: frame::DEFAULT_MAX_FRAME_SIZE as usize,
            recv_window: i64::from(DEFAULT_WINDOW),
            recv_credit: 0,
            conn_waker: None,
            send_waiters: Vec::new(),
            resets: resets::Budget::default(),
            recent_resets: resets::Recent::default(),
        }
    }

    pub(super) fn stream(&mut self, id: u32) -> Option<&mut Stream> {
        self.streams.iter_mut().find(|s| s.id == id)
    }

    /// Frames were queued: the connection's task writes them.
    pub(super) fn wake_conn(&mut self) {
        if let Some(waker) = &self.conn_waker {
            waker.wake_by_ref();
        }
    }

    pub(super) fn wake_senders(&mut self) {
        for waker in std::mem::take(&mut self.send_waiters) {
            waker.wake();
        }
    }

    /// Request bytes left the stream's queue (taken, or dropped unread): once half a window
    /// is owed, the client is told it may send that much more.
    fn credit(&mut self, id: u32, len: u32, stream_too: bool) {
        if len == 0 {
            return;
        }
        self.recv_credit += len;
        if self.recv_credit >= RECV_WINDOW / 2 {
            frame::write_window_update(&mut self.out, 0, self.recv_credit);
            self.recv_window += i64::from(self.recv_credit);
            self.recv_credit = 0;
            self.wake_conn();
        }
        if !stream_too {
            return;
        }
        let Some(stream) = self.streams.iter_mut().find(|s| s.id == id) else {
            return;
        };
        stream.recv_credit += len;
        if stream.recv_credit >= RECV_WINDOW / 2 && !stream.recv_closed {
            let credit = std::mem::take(&mut stream.recv_credit);
            stream.recv_window += i64::from(credit);
            frame::write_window_update(&mut self.out, id, credit);
            self.wake_conn();
        }
    }

    /// Data that arrived for a stream nobody reads, or for a stream already gone: the
    /// connection's window gets it back at once.
    pub(super) fn discard(&mut self, len: u32) {
        self.credit(0, len, false);
    }

    /// Credits request bytes that went nowhere (padding, or data for a stream nobody reads)
    /// to the connection and to the stream.
    pub(super) fn credit_unread(&mut self, id: u32, len: u32) {
        self.credit(id, len, true);
    }

    /// The next thing stream `id` received for its reader (request body or tunnel): data
    /// (credited back to the client's windows as it is taken), the end with any trailers,
    /// or nothing because the stream is gone. `Pending`: `cx` is woken when DATA arrives.
    pub(super) fn poll_recv(&mut self, cx: &mut Context<'_>, id: u32) -> Poll<Received> {
        let Some(stream) = self.stream(id) else {
            return Poll::Ready(Received::Gone);
        };
        if let Some(data) = stream.recv.pop_front() {
            let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
            self.credit(id, len, true);
            return Poll::Ready(Received::Data(data));
        }
        if stream.recv_closed {
            return Poll::Ready(Received::End(stream.recv_trailers.take()));
        }
        stream.body_waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Nobody reads what stream `id` receives any more: what is queued and what arrives from
    /// now on is credited back to the client's windows.
    fn stop_reading(&mut self, id: u32) {
        let Some(stream) = self.stream(id) else {
            return;
        };
        stream.body_dropped = true;
        stream.body_waker = None;
        let unread = stream.recv.drain(..).map(|b| b.len()).sum::<usize>();
        if unread > 0 {
            self.credit(id, u32::try_from(unread).unwrap_or(u32::MAX), true);
        }
    }

    /// Ends stream `id` where it stands (reset by either side): its task is stopped, and
    /// whoever waits on it is woken to find it gone.
    pub(super) fn drop_stream(&mut self, id: u32) {
        if let Some(task) = self.stream(id).and_then(|s| s.task.take()) {
            task.abort();
        }
        self.remove(id);
    }

    /// Ends every stream, as the connection ends.
    pub(super) fn drop_all_streams(&mut self) {
        for mut stream in std::mem::take(&mut self.streams) {
            if let Some(task) = stream.task.take() {
                task.abort();
            }
            stream.wake_all();
        }
        self.wake_senders();
    }

    /// Removes a stream both sides are done with. Request data still queued is credited
    /// back to the connection's window.
    pub(super) fn remove(&mut self, id: u32) {
        if let Some(at) = self.streams.iter().position(|s| s.id == id) {
            let mut stream = self.streams.swap_remove(at);
            let unread: usize = stream.recv.iter().map(Bytes::len).sum();
            stream.wake_all();
            self.discard(u32::try_from(unread).unwrap_or(u32::MAX));
        }
        if self.streams.is_empty() {
            // A stream is a few hundred bytes: an idle connection keeps no room for them.
            self.streams = Vec::new();
        }
    }

    /// The server is done sending on `id`: the stream closes if the client is done too, else
    /// the client is told to stop sending (RST_STREAM NO_ERROR, RFC 9113 §8.1).
    pub(super) fn finish_sending(&mut self, id: u32) {
        let Some(stream) = self.stream(id) else {
            return;
        };
        stream.send_closed = true;
        if !stream.recv_closed {
            self.write_reset(id, ErrorCode::NO_ERROR);
        }
        self.resets.answered();
        self.remove(id);
        self.wake_conn();
    }

    /// Queues one DATA frame on stream `id`: as much of `data` as both send windows, the
    /// client's frame size and the queue allow, with END_STREAM when `end` and it is the last
    /// of `data` (an empty `data` with `end` is an empty frame that ends the stream).
    /// `Ready(Ok(n))`: `n` bytes went; `Pending`: `cx` is woken when a window opens or the
    /// queue has room.
    pub(super) fn poll_queue_data(
        &mut self,
        cx: &mut Context<'_>,
        id: u32,
        data: &[u8],
        end: bool,
    ) -> Poll<Result<usize, Gone>> {
        let Some(at) = self.streams.iter().position(|s| s.id == id) else {
            return Poll::Ready(Err(Gone));
        };
        let stream = &mut self.streams[at];
        if stream.send_closed {
            return Poll::Ready(Err(Gone));
        }
        if data.is_empty() {
            if end {
                frame::write_data_head(&mut self.out, id, 0, true);
                self.finish_sending(id);
            }
            return Poll::Ready(Ok(0));
        }
        if self.out.len() >= OUT_HIGH_WATER {
            self.send_waiters.push(cx.waker().clone());
            self.wake_conn();
            return Poll::Pending;
        }
        let window = stream.send_window.min(self.send_window);
        if window <= 0 {
            if stream.send_window <= 0 {
                stream.send_waker = Some(cx.waker().clone());
            } else {
                self.send_waiters.push(cx.waker().clone());
            }
            self.wake_conn();
            return Poll::Pending;
        }
        let n = data
            .len()
            .min(self.peer_max_frame_size)
            .min(usize::try_from(window).unwrap_or(usize::MAX));
        let last = n == data.len() && end;
        frame::write_data_head(&mut self.out, id, n, last);
        self.out.extend_from_slice(&data[..n]);
        stream.send_window -= n as i64;
        self.send_window -= n as i64;
        if last {
            self.finish_sending(id);
        } else {
            self.wake_conn();
        }
        Poll::Ready(Ok(n))
    }

    /// Ends a stream from the server's side with RST_STREAM `code` (a stream task that
    /// failed, was reset after a stall, or a tunnel that ended early).
    pub(super) fn reset(&mut self, id: u32, code: ErrorCode) {
        if self.stream(id).is_some() {
            self.write_reset(id, code);
            self.remove(id);
            self.wake_conn();
        }
    }

    /// Queues RST_STREAM `code` for `id`, and remembers the id: what the client sent on the
    /// stream before it saw the reset is dropped when it arrives, not answered (RFC 9113 §5.1).
    pub(super) fn write_reset(&mut self, id: u32, code: ErrorCode) {
        frame::write_rst_stream(&mut self.out, id, code);
        self.recent_resets.note(id);
    }
}

/// The request body of an HTTP/2 stream, read from the stream's queue.
pub(crate) struct RequestBody {
    shared: SharedRef,
    id: u32,
    /// The declared `content-length`: hyper's bodies report it as the exact size, and the
    /// pipeline checks it against `client-max-body-size` before reading.
    declared: Option<u64>,
    ended: bool,
}

impl RequestBody {
    pub(super) fn new(shared: SharedRef, id: u32, declared: Option<u64>) -> RequestBody {
        RequestBody {
            shared,
            id,
            declared,
            ended: false,
        }
    }
}

/// What a stream's reader gets next (`Shared::poll_recv`).
pub(super) enum Received {
    Data(Bytes),
    /// END_STREAM, with the trailers if the client sent any.
    End(Option<HeaderMap>),
    /// The stream was reset, or the connection ended.
    Gone,
}

/// Why a request body ended before its END_STREAM.
#[derive(Debug, thiserror::Error)]
#[error("the HTTP/2 client {0}")]
pub(crate) struct StreamBroken(&'static str);

impl Body for RequestBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        let polled = ready!(this.shared.borrow_mut().poll_recv(cx, this.id));
        match polled {
            Received::Data(data) => Poll::Ready(Some(Ok(Frame::data(data)))),
            Received::End(trailers) => {
                this.ended = true;
                Poll::Ready(trailers.map(|t| Ok(Frame::trailers(t))))
            }
            Received::Gone => {
                this.ended = true;
                Poll::Ready(Some(Err(StreamBroken(
                    "reset the stream or closed the connection",
                )
                .into())))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        if self.ended {
            return true;
        }
        let mut shared = self.shared.borrow_mut();
        shared
            .stream(self.id)
            .is_none_or(|s| s.recv_closed && s.recv.is_empty() && s.recv_trailers.is_none())
    }

    fn size_hint(&self) -> SizeHint {
        match self.declared {
            Some(length) => SizeHint::with_exact(length),
            None => SizeHint::default(),
        }
    }
}

impl Drop for RequestBody {
    fn drop(&mut self) {
        if let Ok(mut shared) = self.shared.try_borrow_mut() {
            shared.stop_reading(self.id);
        }
    }
}

/// Ends the stream when a stream's task ends without having finished its response (the
/// client reset it, the connection closed, or `client-send-timeout` dropped it).
pub(super) struct StreamEnd {
    pub(super) shared: SharedRef,
    pub(super) id: u32,
    pub(super) done: bool,
}

impl Drop for StreamEnd {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Ok(mut shared) = self.shared.try_borrow_mut() {
            shared.reset(self.id, ErrorCode::CANCEL);
        }
    }
}

/// Sends `response` on stream `id`: HEADERS, then the body as DATA within the client's
/// windows, then trailers. A tunnel's 2xx (the upstream's 101) leaves the stream open for
/// `Tunnel`.
///
/// One async fn (~110 lines): the DATA loop waits on the client's windows and the body in
/// one `select`, and split into helpers each would add its state to every stream's future.
pub(super) async fn send_response<B>(shared: &SharedRef, id: u32, response: Response<B>)
where
    B: Body<Data = Bytes, Error = BoxError> + Unpin,
{
    let (parts, mut body) = response.into_parts();
    let end = body.is_end_stream();
    {
        let mut state = shared.borrow_mut();
        let max_frame = state.peer_max_frame_size;
        let Some(stream) = state.stream(id) else {
            return;
        };
        if stream.send_closed {
            return;
        }
        let tunnel = stream.tunnel && parts.status.is_success();
        stream.tunnel = tunnel;
        stream.answered = true;
        let end = end && !tunnel;
        let mut block = Vec::with_capacity(128);
        hpack::encode_status(parts.status.as_u16(), &mut block);
        for (name, value) in &parts.headers {
            if is_connection_specific(name, value)
                || (tunnel && *name == http::header::CONTENT_LENGTH)
            {
                continue;
            }
            hpack::encode_field(
                name.as_str().as_bytes(),
                value.as_bytes(),
                value.is_sensitive(),
                &mut block,
            );
        }
        if !end && !tunnel && !parts.headers.contains_key(http::header::CONTENT_LENGTH) {
            // A body whose size is known says so (as hyper's server did): the client then
            // knows when it has all of it without waiting for END_STREAM.
            if let Some(length) = body.size_hint().exact() {
                let mut digits = itoa::Buffer::new();
                let digits = digits.format(length).as_bytes();
                hpack::encode_field(b"content-length", digits, false, &mut block);
            }
        }
        if !parts.headers.contains_key(http::header::DATE) {
            crate::date::with_current(|date| hpack::encode_field(b"date", date, false, &mut block));
        }
        frame::write_headers(&mut state.out, id, &block, end, max_frame as u32);
        if tunnel {
            if let Some(waker) = state.stream(id).and_then(|s| s.upgrade_waker.take()) {
                waker.wake();
            }
            state.wake_conn();
            return;
        }
        if end {
            state.finish_sending(id);
            return;
        }
        state.wake_conn();
    }
    loop {
        let polled = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await;
        match polled {
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => {
                    let end = body.is_end_stream();
                    if send_data(shared, id, data, end).await.is_err() {
                        return;
                    }
                    if end {
                        return;
                    }
                }
                Err(frame) => {
                    let Ok(trailers) = frame.into_trailers() else {
                        continue;
                    };
                    let mut state = shared.borrow_mut();
                    let max_frame = state.peer_max_frame_size as u32;
                    if state.stream(id).is_none() {
                        return;
                    }
                    let mut block = Vec::with_capacity(64);
                    for (name, value) in &trailers {
                        hpack::encode_field(
                            name.as_str().as_bytes(),
                            value.as_bytes(),
                            value.is_sensitive(),
                            &mut block,
                        );
                    }
                    frame::write_headers(&mut state.out, id, &block, true, max_frame);
                    state.finish_sending(id);
                    return;
                }
            },
            None => {
                // The body ended without saying so beforehand: an empty DATA ends the stream.
                let _ = send_data(shared, id, Bytes::new(), true).await;
                return;
            }
            Some(Err(error)) => {
                tracing::debug!(error = %error, stream = id, "response body failed; stream reset");
                shared.borrow_mut().reset(id, ErrorCode::INTERNAL_ERROR);
                return;
            }
        }
    }
}

/// A response field an intermediary removes for HTTP/2 (RFC 9113 §8.2.2): a client would
/// take the response as malformed.
fn is_connection_specific(name: &http::HeaderName, value: &http::HeaderValue) -> bool {
    super::is_connection_field(name)
        || (*name == http::header::TE && value.as_bytes() != b"trailers")
}

/// The stream is gone (reset by the client, or the connection ended).
pub(super) struct Gone;

/// Queues `data` as DATA frames on stream `id` as the windows and the queue allow.
pub(super) async fn send_data(
    shared: &SharedRef,
    id: u32,
    mut data: Bytes,
    end: bool,
) -> Result<(), Gone> {
    poll_fn(|cx| {
        let mut state = shared.borrow_mut();
        loop {
            let n = ready!(state.poll_queue_data(cx, id, &data, end))?;
            data.advance(n);
            if data.is_empty() {
                return Poll::Ready(Ok(()));
            }
        }
    })
    .await
}

/// A WebSocket over HTTP/2 (RFC 8441): the client's side of the tunnel is the stream's DATA.
pub(crate) struct Tunnel {
    shared: SharedRef,
    id: u32,
    /// Counted busy while the tunnel is open (`TunnelCount`).
    conn: Rc<dyn TunnelCount>,
    /// Bytes taken from the stream's queue and not yet read.
    pending: Bytes,
    shut: bool,
}

/// Resolves once the response to the CONNECT has gone out: the tunnel then carries bytes.
pub(crate) struct Upgrade {
    pub(super) shared: SharedRef,
    pub(super) id: u32,
    pub(super) conn: Rc<dyn TunnelCount>,
}

impl Upgrade {
    pub(crate) async fn ready(self) -> io::Result<Tunnel> {
        poll_fn(|cx| {
            let mut shared = self.shared.borrow_mut();
            match shared.stream(self.id) {
                None => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::ConnectionReset,
                    "the HTTP/2 stream closed before the tunnel opened",
                ))),
                Some(stream) if stream.answered => Poll::Ready(Ok(())),
                Some(stream) => {
                    stream.upgrade_waker = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await?;
        self.conn.tunnel_opened();
        Ok(Tunnel {
            shared: self.shared.clone(),
            id: self.id,
            conn: self.conn.clone(),
            pending: Bytes::new(),
            shut: false,
        })
    }
}

impl Drop for Upgrade {
    fn drop(&mut self) {
        // Dropped before the answer went out: the upstream did not switch protocols (it
        // answered other than 101, or the request was answered here), so the CONNECT is an
        // ordinary request whose response, body and all, ends the stream; nginx likewise
        // passes an HTTP/1.1 upgrade answered without 101 through and does not switch.
        let Ok(mut shared) = self.shared.try_borrow_mut() else {
            return;
        };
        let Some(stream) = shared.stream(self.id).filter(|s| !s.answered) else {
            return;
        };
        stream.tunnel = false;
        shared.stop_reading(self.id);
    }
}

impl AsyncRead for Tunnel {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.pending.is_empty() {
            match ready!(this.shared.borrow_mut().poll_recv(cx, this.id)) {
                Received::Data(data) => this.pending = data,
                Received::End(_) | Received::Gone => return Poll::Ready(Ok(())),
            }
        }
        let n = this.pending.len().min(buf.remaining());
        buf.put_slice(&this.pending[..n]);
        this.pending.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Tunnel {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let mut shared = this.shared.borrow_mut();
        shared
            .poll_queue_data(cx, this.id, buf, false)
            .map_err(|Gone| io::ErrorKind::BrokenPipe.into())
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // The connection's task writes what was queued as soon as it runs.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.shut {
            this.shut = true;
            let mut shared = this.shared.borrow_mut();
            if shared.stream(this.id).is_some_and(|s| !s.send_closed) {
                frame::write_data_head(&mut shared.out, this.id, 0, true);
                shared.finish_sending(this.id);
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        self.conn.tunnel_closed();
        if let Ok(mut shared) = self.shared.try_borrow_mut() {
            if shared.stream(self.id).is_some() {
                if self.shut {
                    // Sent END_STREAM; the client's side is not read any more.
                    shared.reset(self.id, ErrorCode::NO_ERROR);
                } else {
                    shared.reset(self.id, ErrorCode::CANCEL);
                }
            }
        }
    }
}
