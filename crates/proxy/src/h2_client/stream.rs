//! The handles: `Sender` opens streams; a stream's `ResponseFuture` (then `RecvStream`) reads
//! its response and `SendStream` sends its request body. Each works on `Shared` directly.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response};
use wire::h2::frame::{self, ErrorCode};
use wire::h2::hpack;

use super::state::{Shared, StreamState};
use super::Error;

/// Opens streams on one connection; clones share it. The connection ends once every handle
/// is gone and its streams are done.
pub(crate) struct Sender {
    shared: Rc<RefCell<Shared>>,
}

/// A stream's response head, on its way.
pub(crate) struct ResponseFuture {
    stream: Option<StreamRef>,
}

/// A response body: data in order, then trailers.
pub(crate) struct RecvStream {
    stream: StreamRef,
}

/// A request body's way out.
pub(crate) struct SendStream {
    stream: StreamRef,
}

struct StreamRef {
    shared: Rc<RefCell<Shared>>,
    id: u32,
}

impl Sender {
    pub(super) fn new(shared: Rc<RefCell<Shared>>) -> Sender {
        Sender { shared }
    }

    /// Ready when a stream may open: below the peer's SETTINGS_MAX_CONCURRENT_STREAMS. An
    /// error when the connection takes no new streams.
    pub(crate) fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        let mut shared = self.shared.borrow_mut();
        if shared.closed.is_some() {
            return Poll::Ready(Err(Error::closed()));
        }
        if shared.active < shared.peer_max_streams {
            return Poll::Ready(Ok(()));
        }
        shared.ready_waiters.push(cx.waker().clone());
        Poll::Pending
    }

    /// Opens a stream with `request`'s head (END_STREAM when `end_of_stream`). Fails without
    /// sending anything when the connection is closed or going away.
    pub(crate) fn send_request(
        &mut self,
        request: Request<()>,
        end_of_stream: bool,
    ) -> Result<(ResponseFuture, SendStream), Error> {
        let mut shared = self.shared.borrow_mut();
        if shared.closed.is_some() || shared.next_id > frame::MAX_STREAM_ID {
            return Err(Error::closed());
        }
        let id = shared.next_id;
        shared.next_id += 2;
        let block = encode_head(&request);
        let max_frame = shared.peer_max_frame;
        frame::write_headers(&mut shared.out, id, &block, end_of_stream, max_frame);
        shared.open(id, end_of_stream);
        shared.wake_conn();
        drop(shared);
        let stream = |shared: &Rc<RefCell<Shared>>| StreamRef {
            shared: shared.clone(),
            id,
        };
        Ok((
            ResponseFuture {
                stream: Some(stream(&self.shared)),
            },
            SendStream {
                stream: stream(&self.shared),
            },
        ))
    }

    /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS (100 until its SETTINGS say).
    pub(crate) fn current_max_send_streams(&self) -> usize {
        self.shared.borrow().peer_max_streams as usize
    }
}

/// The request head as an HPACK block: the pseudo-headers, then the fields (which the
/// caller already rid of connection-specific ones).
fn encode_head(request: &Request<()>) -> Vec<u8> {
    let mut block = Vec::with_capacity(256);
    let uri = request.uri();
    hpack::encode_field_plain(
        b":method",
        request.method().as_str().as_bytes(),
        false,
        &mut block,
    );
    if request.method() != Method::CONNECT {
        let scheme = uri.scheme_str().unwrap_or("http");
        hpack::encode_field_plain(b":scheme", scheme.as_bytes(), false, &mut block);
        let path = uri.path_and_query().map_or("/", |path| path.as_str());
        hpack::encode_field_plain(b":path", path.as_bytes(), false, &mut block);
    }
    if let Some(authority) = uri.authority() {
        hpack::encode_field_plain(
            b":authority",
            authority.as_str().as_bytes(),
            false,
            &mut block,
        );
    }
    encode_fields(request.headers(), &mut block);
    block
}

fn encode_fields(headers: &HeaderMap, block: &mut Vec<u8>) {
    for (name, value) in headers {
        hpack::encode_field_plain(
            name.as_str().as_bytes(),
            value.as_bytes(),
            value.is_sensitive(),
            block,
        );
    }
}

impl Clone for Sender {
    fn clone(&self) -> Sender {
        self.shared.borrow_mut().senders += 1;
        Sender {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        let mut shared = self.shared.borrow_mut();
        shared.senders -= 1;
        if shared.senders == 0 {
            shared.wake_conn();
        }
    }
}

impl Future for ResponseFuture {
    type Output = Result<Response<RecvStream>, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(stream) = self.stream.as_ref() else {
            return Poll::Ready(Err(Error::closed()));
        };
        let id = stream.id;
        let mut shared = stream.shared.borrow_mut();
        let state = shared.stream(id);
        if let Some(head) = state.head.take() {
            drop(shared);
            let stream = self.stream.take().expect("checked");
            return Poll::Ready(Ok(head.map(|()| RecvStream { stream })));
        }
        if let Some(error) = &state.error {
            return Poll::Ready(Err(error.clone()));
        }
        state.recv_waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for ResponseFuture {
    fn drop(&mut self) {
        if let Some(stream) = &self.stream {
            drop_recv(stream);
        }
    }
}

/// The receiving half is gone: a response not read to its end is cancelled (RST_STREAM
/// CANCEL), so the backend stops sending it; so is a request still sending once the
/// response is complete and nobody reads it (the rest of the body would go nowhere, and
/// the stream would stay open on both sides while the peer's window is shut).
fn drop_recv(stream: &StreamRef) {
    let Ok(mut shared) = stream.shared.try_borrow_mut() else {
        return;
    };
    let Some(state) = shared.streams.get_mut(&stream.id) else {
        return;
    };
    state.recv_handle = false;
    if !state.closed() {
        shared.reset(stream.id, ErrorCode::CANCEL);
    } else {
        let queued: usize = state.data.drain(..).map(|data| data.len()).sum();
        shared.release(stream.id, queued);
        shared.settle(stream.id);
    }
}

impl RecvStream {
    /// The next data, in order; `None` once the data is all read (trailers may follow).
    /// What is taken opens the windows again.
    pub(crate) fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Error>>> {
        let id = self.stream.id;
        let mut shared = self.stream.shared.borrow_mut();
        let state = shared.stream(id);
        if let Some(data) = state.data.pop_front() {
            shared.release(id, data.len());
            return Poll::Ready(Some(Ok(data)));
        }
        if let Some(error) = &state.error {
            return Poll::Ready(Some(Err(error.clone())));
        }
        if state.recv_end {
            return Poll::Ready(None);
        }
        state.recv_waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// The trailers, once the data is read; `None` when the response had none.
    pub(crate) fn poll_trailers(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<HeaderMap>, Error>> {
        let id = self.stream.id;
        let mut shared = self.stream.shared.borrow_mut();
        let state = shared.stream(id);
        if let Some(trailers) = state.trailers.take() {
            return Poll::Ready(Ok(Some(trailers)));
        }
        if let Some(error) = &state.error {
            return Poll::Ready(Err(error.clone()));
        }
        if state.recv_end {
            return Poll::Ready(Ok(None));
        }
        state.recv_waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Everything was received and read.
    pub(crate) fn is_end_stream(&self) -> bool {
        let shared = self.stream.shared.borrow();
        shared
            .streams
            .get(&self.stream.id)
            .is_none_or(|state| state.recv_end && state.data.is_empty() && state.trailers.is_none())
    }
}

impl Drop for RecvStream {
    fn drop(&mut self) {
        drop_recv(&self.stream);
    }
}

impl SendStream {
    /// Ready with `Ok` when a DATA frame may go (what was sent before is out and both send
    /// windows are open); an error when the stream was reset or the connection failed.
    pub(crate) fn poll_capacity(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        let id = self.stream.id;
        let mut shared = self.stream.shared.borrow_mut();
        let window = shared.send_window;
        let state = shared.stream(id);
        if let Some(error) = &state.error {
            return Poll::Ready(Err(error.clone()));
        }
        if state.send_end {
            return Poll::Ready(Err(Error::reset(ErrorCode::STREAM_CLOSED, false)));
        }
        if state.pending.is_empty() && state.send_window > 0 && window > 0 {
            return Poll::Ready(Ok(()));
        }
        state.send_waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Sends `data` (END_STREAM with it when `end`): what the windows allow now, the rest
    /// as they open.
    pub(crate) fn send_data(&mut self, data: Bytes, end: bool) -> Result<(), Error> {
        self.queue(|state| {
            state.pending.push_back(data);
            state.pending_end = end;
            state.send_end = end;
        })
    }

    /// Ends the request with trailers (after the data still waiting for the windows).
    pub(crate) fn send_trailers(&mut self, trailers: HeaderMap) -> Result<(), Error> {
        let mut block = Vec::new();
        encode_fields(&trailers, &mut block);
        self.queue(|state| {
            state.pending_trailers = Some(block);
            state.pending_end = true;
            state.send_end = true;
        })
    }

    /// Queues what `add` puts on a stream still sending, and writes what the windows allow.
    fn queue(&mut self, add: impl FnOnce(&mut StreamState)) -> Result<(), Error> {
        let id = self.stream.id;
        let mut shared = self.stream.shared.borrow_mut();
        let state = shared.stream(id);
        if let Some(error) = &state.error {
            return Err(error.clone());
        }
        if state.send_end {
            return Err(Error::reset(ErrorCode::STREAM_CLOSED, false));
        }
        add(state);
        shared.flush(id);
        Ok(())
    }

    /// Resets the stream with `code`.
    pub(crate) fn send_reset(&mut self, code: ErrorCode) {
        self.stream.shared.borrow_mut().reset(self.stream.id, code);
    }
}

impl Drop for SendStream {
    fn drop(&mut self) {
        let Ok(mut shared) = self.stream.shared.try_borrow_mut() else {
            return;
        };
        let id = self.stream.id;
        let Some(state) = shared.streams.get_mut(&id) else {
            return;
        };
        state.send_handle = false;
        if !state.recv_handle && !state.closed() {
            shared.reset(id, ErrorCode::CANCEL);
        } else {
            shared.settle(id);
        }
    }
}
