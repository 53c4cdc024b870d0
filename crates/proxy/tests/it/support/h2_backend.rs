//! A scriptable raw HTTP/2 backend for the proxy's own HTTP/2 client (`h2_client`): each
//! connection runs a script that reads the proxy's frames and writes any frame byte for byte
//! (including ones a well-behaved server never sends). Every frame the proxy sent is kept and
//! checked with `wire::h2::frame`, for the test to assert on afterwards.
//!
//! ```text
//!  proxy ─TCP─▶ reader task: preface, frames ─┬─▶ ConnLog (every frame; what was malformed)
//!                                             └─▶ channel ─▶ script(Peer) ─writes─▶ proxy
//!  test ◀── H2Backend::{sent, wait_for, wait_goaway, wait_reset, assert_well_formed}
//! ```
//!
//! Response header blocks come from `wire::h2::hpack`'s encoder (static indexes and literals
//! without indexing); the proxy's request blocks are read with its decoder.

use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use wire::h2::frame::{self, flag, kind, ErrorCode};
use wire::h2::hpack;

use super::raw_h2::{frame_bytes, Frame};
use super::{eventually_async, LOCALHOST, STEP};

/// A backend on 127.0.0.1 running a script per connection.
pub(crate) struct H2Backend {
    pub(crate) addr: SocketAddr,
    conns: Arc<Mutex<Vec<Arc<ConnLog>>>>,
}

/// What the proxy sent on one connection.
#[derive(Default)]
struct ConnLog {
    frames: Mutex<Vec<Frame>>,
    /// What was wrong with the proxy's bytes: a bad preface, a frame `wire::h2::frame`
    /// refuses, a frame over the default SETTINGS_MAX_FRAME_SIZE, a stream ID a client may
    /// not use.
    faults: Mutex<Vec<String>>,
}

/// One connection's end, handed to the script.
pub(crate) struct Peer {
    /// The connection's number on this backend, from 0.
    pub(crate) index: usize,
    writer: OwnedWriteHalf,
    frames: mpsc::UnboundedReceiver<Frame>,
    decoder: hpack::Decoder,
    /// Frames read while reading another stream's request, given out again first.
    stash: VecDeque<Frame>,
    /// The proxy's SETTINGS_INITIAL_WINDOW_SIZE, once its SETTINGS were read.
    pub(crate) client_initial_window: Option<u32>,
    /// The proxy's WINDOW_UPDATEs read so far: (stream, increment).
    pub(crate) window_updates: Vec<(u32, u32)>,
    /// The proxy's acknowledgements of this backend's SETTINGS read so far.
    pub(crate) settings_acks: usize,
}

/// A request as the backend read it.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) stream: u32,
    /// The fields in order, pseudo-headers included.
    pub(crate) fields: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
    /// END_STREAM came (on the HEADERS, or on the DATA read with it).
    pub(crate) ended: bool,
}

impl H2Backend {
    /// Listens and runs `script` on each connection, its frames recorded from the preface on.
    pub(crate) async fn start<S, F>(script: S) -> H2Backend
    where
        S: Fn(Peer) -> F + Send + Sync + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        let listener = TcpListener::bind((LOCALHOST, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let conns: Arc<Mutex<Vec<Arc<ConnLog>>>> = Arc::default();
        let listed = conns.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let log = Arc::new(ConnLog::default());
                let index = {
                    let mut conns = listed.lock().unwrap();
                    conns.push(log.clone());
                    conns.len() - 1
                };
                let (reader, writer) = tcp.into_split();
                let (tx, frames) = mpsc::unbounded_channel();
                tokio::spawn(read_frames(reader, log, tx));
                tokio::spawn(script(Peer {
                    index,
                    writer,
                    frames,
                    decoder: hpack::Decoder::new(hpack::DEFAULT_TABLE_SIZE),
                    stash: VecDeque::new(),
                    client_initial_window: None,
                    window_updates: Vec::new(),
                    settings_acks: 0,
                }));
            }
        });
        H2Backend { addr, conns }
    }

    /// A backend whose first connection runs `first` and whose later ones serve every
    /// request ([`Peer::serve`]).
    pub(crate) async fn first_then_serve<S, F>(first: S) -> H2Backend
    where
        S: Fn(Peer) -> F + Send + Sync + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        let first = Arc::new(first);
        H2Backend::start(move |mut peer| {
            let first = first.clone();
            async move {
                if peer.index == 0 {
                    first(peer).await;
                } else {
                    peer.settings(&[]).await;
                    peer.serve().await;
                }
            }
        })
        .await
    }

    /// Connections accepted so far.
    pub(crate) fn connections(&self) -> usize {
        self.conns.lock().unwrap().len()
    }

    /// The frames the proxy sent on connection `conn` so far.
    pub(crate) fn sent(&self, conn: usize) -> Vec<Frame> {
        let log = self.conns.lock().unwrap()[conn].clone();
        let frames = log.frames.lock().unwrap().clone();
        frames
    }

    /// The first frame on `conn` that `wanted` picks, waiting for it within [`STEP`].
    pub(crate) async fn wait_for(
        &self,
        conn: usize,
        what: &str,
        wanted: impl Fn(&Frame) -> bool,
    ) -> Frame {
        let wanted = &wanted;
        eventually_async(STEP, what, || async move {
            let log = self.conns.lock().unwrap().get(conn).cloned()?;
            let found = log
                .frames
                .lock()
                .unwrap()
                .iter()
                .find(|f| wanted(f))
                .cloned();
            found
        })
        .await
    }

    /// The proxy's GOAWAY on `conn`: its last stream ID and error code.
    pub(crate) async fn wait_goaway(&self, conn: usize) -> (u32, ErrorCode) {
        let what = format!("the proxy's GOAWAY on connection {conn}");
        let goaway = self.wait_for(conn, &what, |f| f.kind == kind::GOAWAY).await;
        (goaway.u32_at(0) & 0x7fff_ffff, ErrorCode(goaway.u32_at(4)))
    }

    /// The proxy's RST_STREAM of `stream` on `conn`: its error code.
    pub(crate) async fn wait_reset(&self, conn: usize, stream: u32) -> ErrorCode {
        let what = format!("the proxy's RST_STREAM of stream {stream} on connection {conn}");
        let reset = self
            .wait_for(conn, &what, |f| {
                f.kind == kind::RST_STREAM && f.stream == stream
            })
            .await;
        ErrorCode(reset.u32_at(0))
    }

    /// How many frames of `frame_kind` the proxy sent on `conn` so far.
    pub(crate) fn count(&self, conn: usize, frame_kind: u8) -> usize {
        self.sent(conn)
            .iter()
            .filter(|f| f.kind == frame_kind)
            .count()
    }

    /// Everything the proxy sent on every connection was a valid client's HTTP/2.
    pub(crate) fn assert_well_formed(&self) {
        for (n, log) in self.conns.lock().unwrap().iter().enumerate() {
            let faults = log.faults.lock().unwrap();
            assert!(faults.is_empty(), "connection {n}: {faults:?}");
        }
    }
}

/// Reads the preface and then frame after frame until the connection ends, recording each
/// and handing it to the script.
async fn read_frames(
    mut reader: OwnedReadHalf,
    log: Arc<ConnLog>,
    tx: mpsc::UnboundedSender<Frame>,
) {
    let fault = |what: String| log.faults.lock().unwrap().push(what);
    let mut preface = [0u8; 24];
    if reader.read_exact(&mut preface).await.is_err() {
        return;
    }
    if &preface != frame::PREFACE {
        return fault(format!("a bad preface: {preface:?}"));
    }
    let mut head = [0u8; frame::HEAD_LEN];
    loop {
        if reader.read_exact(&mut head).await.is_err() {
            return;
        }
        let parsed = frame::Head::parse(&head);
        let mut payload = vec![0u8; parsed.length as usize];
        if reader.read_exact(&mut payload).await.is_err() {
            return fault(format!("a frame cut short: {parsed:?}"));
        }
        // The backends here never raise SETTINGS_MAX_FRAME_SIZE.
        if parsed.length > frame::DEFAULT_MAX_FRAME_SIZE {
            fault(format!("a frame over 16,384 bytes: {parsed:?}"));
        }
        if let Err(error) = frame::parse(parsed, &payload) {
            fault(format!("{error:?} in {parsed:?}"));
        }
        if parsed.stream.is_multiple_of(2) && parsed.stream != 0 {
            fault(format!("a frame on an even stream: {parsed:?}"));
        }
        let frame = Frame {
            kind: parsed.kind,
            flags: parsed.flags,
            stream: parsed.stream,
            payload,
        };
        log.frames.lock().unwrap().push(frame.clone());
        // The script may be done; the log goes on.
        let _ = tx.send(frame);
    }
}

impl Peer {
    /// Writes `bytes` as they are. Errors are ignored: the proxy may have closed the
    /// connection already, which the test sees from the proxy's side.
    pub(crate) async fn write(&mut self, bytes: &[u8]) {
        let _ = self.writer.write_all(bytes).await;
    }

    pub(crate) async fn frame(&mut self, frame_kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        self.write(&frame_bytes(frame_kind, flags, stream, payload))
            .await;
    }

    /// A SETTINGS frame (not an acknowledgement) with `settings`.
    pub(crate) async fn settings(&mut self, settings: &[(u16, u32)]) {
        let mut bytes = Vec::new();
        frame::write_settings(&mut bytes, settings);
        self.write(&bytes).await;
    }

    pub(crate) async fn window_update(&mut self, stream: u32, increment: u32) {
        self.frame(kind::WINDOW_UPDATE, 0, stream, &increment.to_be_bytes())
            .await;
    }

    pub(crate) async fn ping(&mut self, data: [u8; 8]) {
        self.frame(kind::PING, 0, 0, &data).await;
    }

    pub(crate) async fn goaway(&mut self, last_stream: u32, code: ErrorCode) {
        let mut bytes = Vec::new();
        frame::write_goaway(&mut bytes, last_stream, code);
        self.write(&bytes).await;
    }

    /// One HEADERS frame with END_HEADERS.
    pub(crate) async fn headers(&mut self, stream: u32, block: &[u8], end_stream: bool) {
        let flags = flag::END_HEADERS | if end_stream { flag::END_STREAM } else { 0 };
        self.frame(kind::HEADERS, flags, stream, block).await;
    }

    /// A response: `status`, then `body` in one DATA frame with END_STREAM (on the HEADERS
    /// when the body is empty).
    pub(crate) async fn respond(&mut self, stream: u32, status: u16, body: &[u8]) {
        let mut bytes = frame_bytes(
            kind::HEADERS,
            flag::END_HEADERS | if body.is_empty() { flag::END_STREAM } else { 0 },
            stream,
            &status_block(status, &[]),
        );
        if !body.is_empty() {
            bytes.extend(frame_bytes(kind::DATA, flag::END_STREAM, stream, body));
        }
        self.write(&bytes).await;
    }

    /// The proxy's next frame; `None` once it closed the connection. The proxy's SETTINGS are
    /// acknowledged as they are read. Panics when nothing comes within [`STEP`].
    pub(crate) async fn next(&mut self) -> Option<Frame> {
        if let Some(frame) = self.stash.pop_front() {
            return Some(frame);
        }
        let frame = match tokio::time::timeout(STEP, self.frames.recv()).await {
            Ok(frame) => frame?,
            Err(_) => panic!(
                "connection {}: the proxy sent nothing within {STEP:?}",
                self.index
            ),
        };
        self.note(&frame);
        if frame.kind == kind::SETTINGS && frame.flags & flag::ACK == 0 {
            self.frame(kind::SETTINGS, flag::ACK, 0, &[]).await;
        }
        Some(frame)
    }

    /// The next frame the proxy already sent, without waiting (SETTINGS are not
    /// acknowledged here: the proxy sends them first, before anything a script waits for).
    pub(crate) fn try_next(&mut self) -> Option<Frame> {
        if let Some(frame) = self.stash.pop_front() {
            return Some(frame);
        }
        let frame = self.frames.try_recv().ok()?;
        self.note(&frame);
        Some(frame)
    }

    /// Keeps what flow control needs from `frame`: the proxy's initial window, its
    /// WINDOW_UPDATEs, its acknowledgements of our SETTINGS.
    fn note(&mut self, frame: &Frame) {
        match frame.kind {
            kind::SETTINGS if frame.flags & flag::ACK != 0 => self.settings_acks += 1,
            kind::SETTINGS => {
                for setting in frame.payload.chunks_exact(6) {
                    let id = u16::from_be_bytes([setting[0], setting[1]]);
                    if id == frame::setting::INITIAL_WINDOW_SIZE {
                        let value = u32::from_be_bytes(setting[2..6].try_into().unwrap());
                        self.client_initial_window = Some(value);
                    }
                }
            }
            kind::WINDOW_UPDATE => self
                .window_updates
                .push((frame.stream, frame.u32_at(0) & 0x7fff_ffff)),
            _ => {}
        }
    }

    /// What the proxy granted `stream` (0: the connection) with WINDOW_UPDATEs so far.
    pub(crate) fn granted(&self, stream: u32) -> i64 {
        self.window_updates
            .iter()
            .filter(|(s, _)| *s == stream)
            .map(|(_, n)| i64::from(*n))
            .sum()
    }

    /// Reads until a frame `wanted` picks (the ones before it are dropped); `None` when the
    /// connection ends first.
    pub(crate) async fn until(&mut self, wanted: impl Fn(&Frame) -> bool) -> Option<Frame> {
        loop {
            let frame = self.next().await?;
            if wanted(&frame) {
                return Some(frame);
            }
        }
    }

    /// The next request's head (HEADERS and any CONTINUATIONs), other frames before it
    /// dropped; `None` when the connection ends first.
    pub(crate) async fn request_head(&mut self) -> Option<Request> {
        let first = self.until(|f| f.kind == kind::HEADERS).await?;
        let mut block = first.block().to_vec();
        let mut end_headers = first.flags & flag::END_HEADERS != 0;
        while !end_headers {
            let next = self.next().await?;
            assert_eq!(
                next.kind,
                kind::CONTINUATION,
                "the proxy broke a header block"
            );
            block.extend_from_slice(&next.payload);
            end_headers = next.flags & flag::END_HEADERS != 0;
        }
        let mut fields = Vec::new();
        self.decoder
            .decode(&block, &mut |name, value| {
                fields.push((
                    String::from_utf8_lossy(name).into_owned(),
                    String::from_utf8_lossy(value).into_owned(),
                ));
            })
            .expect("the proxy's header block decodes");
        Some(Request {
            stream: first.stream,
            fields,
            body: Vec::new(),
            ended: first.flags & flag::END_STREAM != 0,
        })
    }

    /// The next request, its body read to END_STREAM (other streams' frames are kept for
    /// later calls; no WINDOW_UPDATE is sent, so a body must fit the default 65,535-byte
    /// windows).
    pub(crate) async fn request(&mut self) -> Option<Request> {
        let mut request = self.request_head().await?;
        let mut others = Vec::new();
        while !request.ended {
            let Some(frame) = self.next().await else {
                break;
            };
            if frame.stream != request.stream {
                if frame.stream != 0 {
                    others.push(frame);
                }
                continue;
            }
            match frame.kind {
                kind::DATA => {
                    let parsed = frame::parse(head_of(&frame), &frame.payload).expect("valid");
                    if let frame::Frame::Data { data, .. } = parsed {
                        request.body.extend_from_slice(data);
                    }
                    request.ended = frame.flags & flag::END_STREAM != 0;
                }
                // Trailers.
                kind::HEADERS => request.ended = frame.flags & flag::END_STREAM != 0,
                kind::RST_STREAM => break,
                _ => {}
            }
        }
        for frame in others.into_iter().rev() {
            self.stash.push_front(frame);
        }
        Some(request)
    }

    /// Answers every request once it has all come: 200, body `conn=N path=P len=L` (this
    /// connection's number, the request's path and body length); until the proxy closes.
    pub(crate) async fn serve(mut self) {
        while let Some(request) = self.request().await {
            let body = self.answer(&request);
            self.respond(request.stream, 200, body.as_bytes()).await;
        }
    }

    /// What [`Peer::serve`] answers `request` with.
    pub(crate) fn answer(&self, request: &Request) -> String {
        format!(
            "conn={} path={} len={}",
            self.index,
            request.field(":path").unwrap_or_default(),
            request.body.len()
        )
    }
}

impl Request {
    /// The first field named `name`.
    pub(crate) fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The parsed head of a recorded frame.
pub(crate) fn head_of(frame: &Frame) -> frame::Head {
    frame::Head {
        length: frame.payload.len() as u32,
        kind: frame.kind,
        flags: frame.flags,
        stream: frame.stream,
    }
}

/// A response header block: `:status`, then `fields` as literals without indexing.
pub(crate) fn status_block(status: u16, fields: &[(&str, &str)]) -> Vec<u8> {
    let mut block = Vec::new();
    hpack::encode_status(status, &mut block);
    for (name, value) in fields {
        hpack::encode_field_plain(name.as_bytes(), value.as_bytes(), false, &mut block);
    }
    block
}
