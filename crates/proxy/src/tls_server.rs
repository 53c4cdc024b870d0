//! The client-facing TLS stream, on rustls' unbuffered API: the connection owns no read or
//! write buffer while it is idle. (The buffered `ServerConnection` keeps a 4 KiB deframer
//! buffer, zero-filled and so resident, for every connection's whole life.)
//!
//! ```text
//!  socket ─read─▶ READ_SCRATCH (per thread: kept bytes + one read) ─▶ rustls decrypts in place
//!                   │ an incomplete record (or records behind a full reader) ─▶ `incoming`
//!                   └ plaintext ─▶ the reader's ReadBuf │ what did not fit ─▶ `plaintext`
//!  writer ─plaintext (≤ 4 records; vectored writes gathered in GATHER)─▶ rustls encrypts
//!          ─▶ WRITE_SCRATCH (per thread) ─write─▶ socket │ what the socket did not take ─▶ `outgoing`
//!  handshake, tickets, KeyUpdate answers, alerts ─▶ `outgoing` ─▶ socket (before anything else)
//!  close_notify from the client = EOF; poll_shutdown sends ours, then shuts the socket down
//! ```
//!
//! The three per-connection Vecs are given back (capacity 0) as soon as they are empty, so
//! between requests a connection holds only rustls' own state (keys, the session's facts).

use std::cell::RefCell;
use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::mem;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::thread::LocalKey;

use rustls::server::{ServerConfig, UnbufferedServerConnection};
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, InsufficientSizeError};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The most plaintext one TLS record carries (RFC 8446 §5.1).
const MAX_RECORD_PLAINTEXT: usize = 16 * 1024;
/// The largest record on the wire: header, plaintext and the expansion TLS 1.2 allows
/// (RFC 5246 §6.2.3; TLS 1.3 allows less). One socket read takes this much.
const MAX_RECORD_WIRE: usize = 5 + MAX_RECORD_PLAINTEXT + 2048;
/// Plaintext encrypted per write: a few records go out in one socket write, as tokio-rustls
/// did, so a large body costs no more syscalls than before.
const MAX_WRITE_PLAINTEXT: usize = 4 * MAX_RECORD_PLAINTEXT;
/// What rustls' own framing bounds the kept incoming bytes to (a handshake message of at most
/// 64 KiB spread over records, plus the record behind it); more means the peer is hostile.
const MAX_KEPT_INCOMING: usize = 0x1_0000 + 2 * MAX_RECORD_WIRE;
/// A first guess at a handshake message's encoding (rustls says when it needs more).
const ENCODE_GUESS: usize = 4096;
/// Per record, what encryption adds at most to the plaintext (header, nonce, tag, type).
const RECORD_OVERHEAD: usize = 64;

thread_local! {
    /// TLS bytes read from the socket, behind the bytes a connection kept from before.
    static READ_SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// TLS records a write encrypted, before the socket takes them.
    static WRITE_SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// A vectored write's slices, joined so they go out in as few records as one slice would.
    static GATHER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A server-side TLS connection over `I` (a TCP stream) after its handshake.
pub(crate) struct TlsStream<I> {
    io: I,
    conn: UnbufferedServerConnection,
    /// TLS bytes received and not yet processed: an incomplete record, or records behind
    /// plaintext the reader had no room for.
    incoming: Vec<u8>,
    /// `incoming` may hold complete records (the reader's buffer filled up): process them
    /// before waiting for the socket.
    incoming_ready: bool,
    /// Decrypted bytes the reader has not taken yet, from `plaintext_at`.
    plaintext: Vec<u8>,
    plaintext_at: usize,
    /// TLS bytes the socket has not taken yet, from `outgoing_at`.
    outgoing: Vec<u8>,
    outgoing_at: usize,
    /// The client sent close_notify: reads end.
    read_closed: bool,
    close_sent: bool,
    /// A TLS error ended the connection (its alert has been sent if the socket took it).
    failed: bool,
}

/// What a run of rustls over the received bytes is for.
enum Goal<'a, 'b> {
    /// Finish the handshake (plaintext arriving behind it is kept), each step in its turn.
    Handshake(&'a mut crate::heavy::Turn),
    /// Plaintext for the reader.
    Read(&'a mut ReadBuf<'b>),
    /// Encrypt this plaintext.
    Write(&'a [u8]),
    /// Encrypt a close_notify alert.
    Close,
}

/// How a run of rustls ended.
struct Step {
    /// Bytes at the front of the input rustls is done with.
    consumed: usize,
    /// The goal's plaintext or alert was encrypted.
    encrypted: bool,
    /// Stopped with complete records possibly left: the reader's buffer is full.
    stopped_early: bool,
}

/// Where encoded and encrypted TLS bytes go: the first `filled` bytes of `buf`. The buffer
/// keeps its length (a scratch is zeroed once, when it grows, not per write).
struct Out<'a> {
    buf: &'a mut Vec<u8>,
    filled: usize,
}

impl Out<'_> {
    /// Room for `need` more bytes.
    fn room(&mut self, need: usize) -> &mut [u8] {
        let end = self.filled + need;
        if self.buf.len() < end {
            self.buf.resize(end, 0);
        }
        &mut self.buf[self.filled..end]
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.filled]
    }

    /// Runs `write` on `need` bytes of room, again on more room when it says how much it
    /// requires; true once it wrote.
    fn write_with(
        &mut self,
        mut need: usize,
        mut write: impl FnMut(&mut [u8]) -> Result<usize, Option<InsufficientSizeError>>,
    ) -> bool {
        loop {
            match write(self.room(need)) {
                Ok(n) => {
                    self.filled += n;
                    return true;
                }
                Err(Some(InsufficientSizeError { required_size })) if required_size > need => {
                    need = required_size;
                }
                Err(_) => return false,
            }
        }
    }
}

/// The room rustls asked for, if too little was the trouble.
fn too_small(e: EncryptError) -> Option<InsufficientSizeError> {
    match e {
        EncryptError::InsufficientSize(size) => Some(size),
        _ => None,
    }
}

/// Runs `f` on a thread's scratch buffer (a fresh one if it is somehow in use already).
fn with_scratch<R>(
    key: &'static LocalKey<RefCell<Vec<u8>>>,
    f: impl FnOnce(&mut Vec<u8>) -> R,
) -> R {
    key.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => f(&mut scratch),
        Err(_) => f(&mut Vec::new()),
    })
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// Completes the server side of a TLS handshake over `io`.
pub(crate) async fn accept<I>(config: Arc<ServerConfig>, io: I) -> io::Result<TlsStream<I>>
where
    I: AsyncRead + AsyncWrite + Unpin,
{
    let conn = UnbufferedServerConnection::new(config).map_err(tls_error)?;
    let mut tls = TlsStream {
        io,
        conn,
        incoming: Vec::new(),
        incoming_ready: false,
        plaintext: Vec::new(),
        plaintext_at: 0,
        outgoing: Vec::new(),
        outgoing_at: 0,
        read_closed: false,
        close_sent: false,
        failed: false,
    };
    // Its place among the worker's handshakes (`heavy`): each step waits its turn.
    let mut turn = crate::heavy::Turn::default();
    poll_fn(|cx| tls.poll_handshake(cx, &mut turn)).await?;
    Ok(tls)
}

impl<I> TlsStream<I> {
    /// The protocol ALPN chose, if any.
    pub(crate) fn alpn_protocol(&self) -> Option<&[u8]> {
        self.conn.alpn_protocol()
    }

    /// The negotiated session's facts (version, cipher suite, resumption).
    pub(crate) fn session(&self) -> &rustls::CommonState {
        &self.conn
    }

    /// Gives the reader what it has not taken of `plaintext`; true if there was some.
    fn take_plaintext(&mut self, buf: &mut ReadBuf<'_>) -> bool {
        let pending = &self.plaintext[self.plaintext_at..];
        if pending.is_empty() {
            return false;
        }
        let n = pending.len().min(buf.remaining());
        buf.put_slice(&pending[..n]);
        self.plaintext_at += n;
        if self.plaintext_at == self.plaintext.len() {
            self.plaintext = Vec::new();
            self.plaintext_at = 0;
        }
        true
    }

    fn check_failed(&self) -> io::Result<()> {
        if self.failed {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the TLS connection has failed",
            ));
        }
        Ok(())
    }
}

impl<I: AsyncRead + AsyncWrite + Unpin> TlsStream<I> {
    fn poll_handshake(
        &mut self,
        cx: &mut Context<'_>,
        turn: &mut crate::heavy::Turn,
    ) -> Poll<io::Result<()>> {
        loop {
            ready!(self.poll_send_outgoing(cx))?;
            if !self.conn.is_handshaking() {
                return Poll::Ready(Ok(()));
            }
            if self.read_closed {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the client closed during the TLS handshake",
                )));
            }
            ready!(self.poll_receive(cx, &mut Goal::Handshake(turn)))?;
        }
    }

    /// Writes `outgoing` to the socket until it is all gone, then gives it back.
    fn poll_send_outgoing(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.outgoing_at < self.outgoing.len() {
            let n =
                ready!(Pin::new(&mut self.io).poll_write(cx, &self.outgoing[self.outgoing_at..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.outgoing_at += n;
        }
        if self.outgoing.capacity() > 0 {
            self.outgoing = Vec::new();
            self.outgoing_at = 0;
        }
        Poll::Ready(Ok(()))
    }

    /// Reads from the socket (unless kept records are ready) and runs rustls over what was
    /// kept and what came. Ready(Ok) when rustls has seen new bytes (or the client closed).
    fn poll_receive(
        &mut self,
        cx: &mut Context<'_>,
        goal: &mut Goal<'_, '_>,
    ) -> Poll<io::Result<()>> {
        let kept = self.incoming.len();
        if kept > MAX_KEPT_INCOMING {
            return Poll::Ready(Err(
                self.fail(cx, rustls::Error::General("TLS input too large".into()))
            ));
        }
        let result = with_scratch(&READ_SCRATCH, |scratch| {
            if scratch.len() < kept + MAX_RECORD_WIRE {
                scratch.resize(kept + MAX_RECORD_WIRE, 0);
            }
            let input = &mut scratch[..kept + MAX_RECORD_WIRE];
            input[..kept].copy_from_slice(&self.incoming);
            let mut received = 0;
            if !self.incoming_ready {
                let mut read = ReadBuf::new(&mut input[kept..]);
                ready!(Pin::new(&mut self.io).poll_read(cx, &mut read))?;
                received = read.filled().len();
                if received == 0 {
                    if self.read_closed {
                        return Poll::Ready(Ok(None));
                    }
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "peer closed connection without sending TLS close_notify",
                    )));
                }
            }
            let input = &mut input[..kept + received];
            // A handshake's step (its key operations) takes its turn; what was read waits in
            // `incoming`, ready, meanwhile.
            let waits = match goal {
                Goal::Handshake(turn) => self.conn.is_handshaking() && turn.poll(cx).is_pending(),
                _ => false,
            };
            if waits {
                self.incoming.clear();
                self.incoming.extend_from_slice(input);
                self.incoming_ready = true;
                return Poll::Pending;
            }
            let mut out = Out {
                filled: self.outgoing.len(),
                buf: &mut self.outgoing,
            };
            let result = advance(
                &mut self.conn,
                input,
                &mut out,
                goal,
                &mut self.plaintext,
                &mut self.read_closed,
            );
            let filled = out.filled;
            self.outgoing.truncate(filled);
            match result {
                Ok(step) => {
                    self.incoming_ready = step.stopped_early;
                    let rest = &input[step.consumed..];
                    if rest.is_empty() {
                        self.incoming = Vec::new();
                    } else {
                        self.incoming.clear();
                        self.incoming.extend_from_slice(rest);
                    }
                    Poll::Ready(Ok(None))
                }
                Err(e) => Poll::Ready(Ok(Some(e))),
            }
        });
        match ready!(result)? {
            Some(e) => Poll::Ready(Err(self.fail(cx, e))),
            None => {
                // Post-handshake messages (tickets, a KeyUpdate answer) go out as soon as the
                // socket takes them; what it does not take waits for the next write.
                if self.outgoing_at < self.outgoing.len() {
                    if let Poll::Ready(Err(e)) = self.poll_send_outgoing(cx) {
                        return Poll::Ready(Err(e));
                    }
                }
                Poll::Ready(Ok(()))
            }
        }
    }

    /// Marks the connection failed and tries once to send the alert rustls queued.
    fn fail(&mut self, cx: &mut Context<'_>, e: rustls::Error) -> io::Error {
        self.failed = true;
        self.incoming = Vec::new();
        self.plaintext = Vec::new();
        self.plaintext_at = 0;
        let _ = self.poll_send_outgoing(cx);
        tls_error(e)
    }

    /// Encrypts up to MAX_WRITE_PLAINTEXT of `data` and writes it; what the socket does not
    /// take now is kept and sent before anything else.
    fn poll_write_plain(&mut self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let data = &data[..data.len().min(MAX_WRITE_PLAINTEXT)];
        let mut incoming = mem::take(&mut self.incoming);
        let result = with_scratch(&WRITE_SCRATCH, |scratch| {
            let mut out = Out {
                buf: scratch,
                filled: 0,
            };
            let step = advance(
                &mut self.conn,
                &mut incoming,
                &mut out,
                &mut Goal::Write(data),
                &mut self.plaintext,
                &mut self.read_closed,
            );
            let sent = match step {
                Ok(_) => self.write_now(cx, out.bytes()),
                // The alert rustls queued goes out with the error.
                Err(_) => Ok(0),
            };
            if let Ok(sent) = sent {
                self.outgoing.extend_from_slice(&out.bytes()[sent..]);
            }
            step.map(|step| sent.map(|_| step))
        });
        let step = match result {
            Ok(Ok(step)) => step,
            Ok(Err(e)) => return Poll::Ready(Err(e)),
            Err(e) => return Poll::Ready(Err(self.fail(cx, e))),
        };
        incoming.drain(..step.consumed);
        if !incoming.is_empty() {
            self.incoming = incoming;
        }
        if !step.encrypted {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the TLS connection is closed for writing",
            )));
        }
        Poll::Ready(Ok(data.len()))
    }

    /// Writes as much of `bytes` as the socket takes without waiting.
    fn write_now(&mut self, cx: &mut Context<'_>, bytes: &[u8]) -> io::Result<usize> {
        let mut sent = 0;
        while sent < bytes.len() {
            match Pin::new(&mut self.io).poll_write(cx, &bytes[sent..]) {
                Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => sent += n,
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => break,
            }
        }
        Ok(sent)
    }
}

/// Runs rustls over `input` until it needs more bytes from the peer or has done `goal`.
/// TLS bytes to send are appended to `out`, plaintext the goal does not take to `plaintext`.
///
/// One loop over rustls's states (~95 lines, one arm each): the unbuffered API hands back
/// borrows of `input` and `out` that cannot outlive one state, so the states are not helpers.
fn advance(
    conn: &mut UnbufferedServerConnection,
    input: &mut [u8],
    out: &mut Out<'_>,
    goal: &mut Goal<'_, '_>,
    plaintext: &mut Vec<u8>,
    read_closed: &mut bool,
) -> Result<Step, rustls::Error> {
    let mut step = Step {
        consumed: 0,
        encrypted: false,
        stopped_early: false,
    };
    loop {
        let status = conn.process_tls_records(&mut input[step.consumed..]);
        let mut discard = status.discard;
        let state = match status.state {
            Ok(state) => state,
            Err(e) => {
                step.consumed += discard;
                queue_alert(conn, &mut input[step.consumed..], out);
                return Err(e);
            }
        };
        let mut done = false;
        match state {
            ConnectionState::ReadTraffic(mut traffic) => {
                while let Some(record) = traffic.next_record() {
                    let record = record?;
                    discard += record.discard;
                    let payload = record.payload;
                    match goal {
                        Goal::Read(buf) if buf.remaining() > 0 => {
                            let n = payload.len().min(buf.remaining());
                            buf.put_slice(&payload[..n]);
                            plaintext.extend_from_slice(&payload[n..]);
                            if buf.remaining() == 0 {
                                step.stopped_early = true;
                                done = true;
                            }
                        }
                        _ => plaintext.extend_from_slice(payload),
                    }
                }
            }
            ConnectionState::EncodeTlsData(mut encode) => {
                out.write_with(ENCODE_GUESS, |room| {
                    encode.encode(room).map_err(|e| match e {
                        EncodeError::InsufficientSize(size) => Some(size),
                        _ => None,
                    })
                });
            }
            // Everything encoded goes out in order, before anything encrypted later.
            ConnectionState::TransmitTlsData(transmit) => transmit.done(),
            ConnectionState::PeerClosed => *read_closed = true,
            ConnectionState::Closed => {
                *read_closed = true;
                done = true;
            }
            ConnectionState::WriteTraffic(mut traffic) => {
                done = true;
                match goal {
                    Goal::Write(data) => {
                        let records = data.len().div_ceil(MAX_RECORD_PLAINTEXT).max(1);
                        let need = data.len() + records * RECORD_OVERHEAD;
                        step.encrypted = out.write_with(need, |room| {
                            traffic.encrypt(data, room).map_err(too_small)
                        });
                    }
                    Goal::Close => {
                        step.encrypted = out.write_with(2 * RECORD_OVERHEAD, |room| {
                            traffic.queue_close_notify(room).map_err(too_small)
                        });
                    }
                    Goal::Handshake(_) | Goal::Read(_) => {}
                }
            }
            ConnectionState::BlockedHandshake => done = true,
            // The configuration accepts no early data; anything else is a rustls addition
            // this code does not know.
            _ => {
                return Err(rustls::Error::General(
                    "unexpected TLS connection state".into(),
                ));
            }
        }
        step.consumed += discard;
        if done {
            return Ok(step);
        }
    }
}

/// After an error rustls may have queued an alert for the peer: encode it into `out`.
fn queue_alert(conn: &mut UnbufferedServerConnection, input: &mut [u8], out: &mut Out<'_>) {
    let mut consumed = 0;
    // Bounded: an alert is one message; the loop cannot spin on a confused state.
    for _ in 0..8 {
        let status = conn.process_tls_records(&mut input[consumed..]);
        let discard = status.discard;
        match status.state {
            Ok(ConnectionState::EncodeTlsData(mut encode)) => {
                out.write_with(ENCODE_GUESS, |room| encode.encode(room).map_err(|_| None));
            }
            Ok(ConnectionState::TransmitTlsData(transmit)) => transmit.done(),
            _ => return,
        }
        consumed += discard;
    }
}

impl<I: AsyncRead + AsyncWrite + Unpin> AsyncRead for TlsStream<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check_failed()?;
        if this.take_plaintext(buf) || buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        loop {
            if this.read_closed {
                return Poll::Ready(Ok(()));
            }
            ready!(this.poll_receive(cx, &mut Goal::Read(buf)))?;
            if buf.filled().len() > before {
                return Poll::Ready(Ok(()));
            }
            // Records that came while nobody read (a write ran rustls) are the reader's too.
            if this.take_plaintext(buf) {
                return Poll::Ready(Ok(()));
            }
        }
    }
}

impl<I: AsyncRead + AsyncWrite + Unpin> AsyncWrite for TlsStream<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check_failed()?;
        ready!(this.poll_send_outgoing(cx))?;
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        this.poll_write_plain(cx, data)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check_failed()?;
        ready!(this.poll_send_outgoing(cx))?;
        let mut slices = bufs.iter().filter(|b| !b.is_empty());
        let Some(first) = slices.next() else {
            return Poll::Ready(Ok(0));
        };
        if first.len() >= MAX_WRITE_PLAINTEXT || slices.next().is_none() {
            return this.poll_write_plain(cx, first);
        }
        with_scratch(&GATHER, |gather| {
            gather.clear();
            for slice in bufs {
                let take = slice.len().min(MAX_WRITE_PLAINTEXT - gather.len());
                gather.extend_from_slice(&slice[..take]);
                if gather.len() == MAX_WRITE_PLAINTEXT {
                    break;
                }
            }
            this.poll_write_plain(cx, gather)
        })
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_send_outgoing(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.close_sent && !this.failed {
            this.close_sent = true;
            let mut incoming = mem::take(&mut this.incoming);
            let mut out = Out {
                filled: this.outgoing.len(),
                buf: &mut this.outgoing,
            };
            let step = advance(
                &mut this.conn,
                &mut incoming,
                &mut out,
                &mut Goal::Close,
                &mut this.plaintext,
                &mut this.read_closed,
            );
            let filled = out.filled;
            this.outgoing.truncate(filled);
            if let Ok(step) = step {
                incoming.drain(..step.consumed);
                this.incoming = incoming;
            }
        }
        ready!(this.poll_send_outgoing(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}
