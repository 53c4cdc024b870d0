//! The connection driven step by step over an in-memory pipe, with a pipeline that answers each
//! request message: orders of events that real sockets produce only under rare timing.

use std::cell::RefCell;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::request::Parts;
use http::Response;
use http_body::{Body, Frame};
use tokio::io::{AsyncWriteExt, DuplexStream};
use wire::h2::frame::{self, setting};
use wire::h2::hpack;

use super::stream::OUT_HIGH_WATER;
use super::{Connection, Limits, TunnelCount};
use crate::body::BoxError;
use crate::error::{ErrorSource, ProxyError};
use crate::pipeline::{ClientUpgrade, Pipeline};
use crate::request_body::ClientBody;

/// Answers every DATA frame of the request with `answer` bytes (a bidirectional stream: the
/// client sends its next message once it has the answer to the last), and records what came.
struct AnswerEachMessage {
    answer: usize,
    received: RefCell<Vec<Bytes>>,
    started: Instant,
}

struct Answers {
    request: ClientBody,
    pipeline: Rc<AnswerEachMessage>,
}

impl Body for Answers {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match std::task::ready!(Pin::new(&mut this.request).poll_frame(cx)) {
            Some(Ok(frame)) => match frame.into_data() {
                Ok(message) => {
                    this.pipeline.received.borrow_mut().push(message);
                    let answer = Bytes::from(vec![b'a'; this.pipeline.answer]);
                    Poll::Ready(Some(Ok(Frame::data(answer))))
                }
                Err(_) => Poll::Ready(None),
            },
            Some(Err(error)) => Poll::Ready(Some(Err(error))),
            None => Poll::Ready(None),
        }
    }
}

impl TunnelCount for AnswerEachMessage {
    fn tunnel_opened(&self) {}
    fn tunnel_closed(&self) {}
}

impl Pipeline for AnswerEachMessage {
    type Body = Answers;

    fn respond(
        self: Rc<Self>,
        _head: Parts,
        body: Option<ClientBody>,
        _upgrade: Option<ClientUpgrade>,
    ) -> impl Future<Output = Response<Answers>> {
        let request = body.expect("the test's requests have bodies");
        async move {
            Response::new(Answers {
                request,
                pipeline: self,
            })
        }
    }

    fn count_error(&self, status: u16, source: ErrorSource) {
        panic!("the connection refused a request: {status} ({source:?})");
    }

    fn error_response(&self, error: &ProxyError) -> Response<Answers> {
        panic!("the connection refused a request: {error}");
    }

    fn log_refused(&self, _head: Option<&Parts>, status: u16, _sent: (u64, u64)) {
        panic!("the connection refused a request: {status}");
    }

    fn closing(&self) -> bool {
        false
    }

    fn stopping(&self) -> bool {
        false
    }

    fn last_active(&self) -> Instant {
        self.started
    }
}

/// A waker that remembers it was woken: whether the connection asked to be polled again.
#[derive(Default)]
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn limits() -> Limits {
    Limits {
        max_concurrent_streams: 100,
        max_header_list: 32 * 1024,
        header_timeout: Duration::from_secs(60),
        send_timeout: Duration::from_secs(60),
    }
}

/// The client's first flight: preface, SETTINGS with a 1 MiB stream window and a connection
/// window raised as much (so flow control never holds the answers back), and a POST without
/// END_STREAM on stream 1.
fn client_preface_and_request() -> Vec<u8> {
    let mut out = frame::PREFACE.to_vec();
    frame::write_settings(&mut out, &[(setting::INITIAL_WINDOW_SIZE, 1 << 20)]);
    frame::write_window_update(&mut out, 0, 1 << 20);
    let mut block = Vec::new();
    for (name, value) in [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/grpc.testing.TestService/FullDuplexCall"),
        (":authority", "app.example"),
    ] {
        hpack::encode_field_plain(name.as_bytes(), value.as_bytes(), false, &mut block);
    }
    frame::write_headers(&mut out, 1, &block, false, frame::DEFAULT_MAX_FRAME_SIZE);
    out
}

fn data(stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::write_data_head(&mut out, stream, payload.len(), false);
    out.extend_from_slice(payload);
    out
}

/// Polls the connection once with `waker`; it must not have ended.
async fn poll_once(
    connection: &mut Pin<Box<Connection<DuplexStream, AnswerEachMessage>>>,
    waker: &Waker,
) {
    let polled = poll_fn(|_| {
        let mut cx = Context::from_waker(waker);
        Poll::Ready(connection.as_mut().poll(&mut cx))
    })
    .await;
    assert!(polled.is_pending(), "the connection ended: {polled:?}");
}

/// Lets the stream tasks run.
async fn let_tasks_run() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

/// The stall fixed in 74490ea: the client's next message arrives (waking the connection)
/// while 64 KiB or more of answers wait to be written, so that poll does not read it; the
/// same poll writes the answers out, and the stream has nothing more to send until it gets
/// that message. The connection must poll itself again and read it; before the fix nothing
/// woke it and the call sat until the client's deadline.
#[tokio::test(flavor = "current_thread")]
async fn a_message_that_arrives_while_reading_is_held_is_read_once_the_answers_are_written() {
    tokio::task::LocalSet::new()
        .run_until(async {
            let pipeline = Rc::new(AnswerEachMessage {
                // Exactly four full DATA frames: queued whole, leaving the queue just over
                // the mark with nothing of this answer left to send.
                answer: 4 * frame::DEFAULT_MAX_FRAME_SIZE as usize,
                received: RefCell::new(Vec::new()),
                started: Instant::now(),
            });
            assert!(pipeline.answer >= OUT_HIGH_WATER);
            // Room for everything either side writes: writes complete at once.
            let (server_io, mut client) = tokio::io::duplex(1 << 20);
            let mut connection = Box::pin(Connection::new(pipeline.clone(), server_io, limits()));
            let flag = Arc::new(Flag::default());
            let waker = Waker::from(flag.clone());

            let mut first = client_preface_and_request();
            first.extend(data(1, b"one"));
            client.write_all(&first).await.unwrap();
            // Reads the request and its first message; the stream task starts.
            poll_once(&mut connection, &waker).await;
            // The stream task answers "one": the whole answer queued, over the mark.
            let_tasks_run().await;
            assert_eq!(*pipeline.received.borrow(), [Bytes::from_static(b"one")]);
            // Queuing the answer woke the connection: forget that, so that the check below
            // is of the client's bytes waking it.
            flag.0.store(false, Ordering::SeqCst);
            // The client's next message arrives and wakes the connection...
            client.write_all(&data(1, b"two")).await.unwrap();
            assert!(flag.0.swap(false, Ordering::SeqCst), "the message woke it");
            // ...which does not read it (the queue is over the mark) but writes the queue out.
            poll_once(&mut connection, &waker).await;
            let_tasks_run().await;
            assert_eq!(
                *pipeline.received.borrow(),
                [Bytes::from_static(b"one")],
                "the poll that wrote the answers out read the message too: reading was not held \
                 at the mark, so this test no longer covers the stall"
            );
            // From here on, the connection runs whenever it asks to.
            for _ in 0..50 {
                if flag.0.swap(false, Ordering::SeqCst) {
                    poll_once(&mut connection, &waker).await;
                }
                let_tasks_run().await;
            }
            assert_eq!(
                *pipeline.received.borrow(),
                [Bytes::from_static(b"one"), Bytes::from_static(b"two")],
                "the second message was never read"
            );
        })
        .await;
}
