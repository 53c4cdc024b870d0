//! Response compression (`use-gzip`, `enable-brotli` and their keys): which responses are
//! compressed, as nginx's gzip filter and ngx_brotli decide, and the streaming compressor a
//! compressed body goes through.
//!
//! ```text
//!  request head (as it came) ─▶ allowed(): Accept-Encoding q > 0 for br / gzip; gzip also
//!                               HTTP/1.1+ and User-Agent not gzip-disable
//!  response headers ─▶ respond(): brotli, then gzip (ngx_brotli's filter runs before gzip's):
//!     200/403/404, not HEAD, no Content-Encoding, no Cache-Control: no-transform, length
//!     unknown or ≥ min-length, Content-Type in the types ─▶ Vary: Accept-Encoding
//!     ─▶ the client allows it ─▶ Content-Encoding; Content-Length and Accept-Ranges gone;
//!        a strong ETag made weak ─▶ Compressor
//!  body frames ─▶ Compressor::poll_frame ─▶ 16 KiB compressed frames; a sync flush whenever
//!     the body beneath has nothing more for now (server-sent events go out at once);
//!     finish and free the encoder at the end, then the trailers
//! ```
//! nginx holds compressed data in its buffers until they fill (or the upstream sends a flush);
//! here a frame goes out whenever the upstream's read would block. Memory per compressing
//! response is the encoder's state and one 16 KiB output buffer (README: Proxy behaviour).

use std::task::{ready, Context, Poll};

use brotli::enc::encode::{
    BrotliEncoderOperation, BrotliEncoderParameter, BrotliEncoderStateStruct,
};
use brotli::enc::StandardAlloc;
use bytes::{Buf, Bytes};
use http::header::{self, HeaderMap, HeaderValue};
use http::request::Parts;
use http::{Method, StatusCode, Version};
use http_body::Frame;
use model::compression::{Coding as CodingSettings, Compression};
use zlib_rs::{DeflateConfig, DeflateFlush, Method as DeflateMethod, Strategy};

use crate::body::BoxError;

/// What polling a body for its next frame gives.
type Polled = Poll<Option<Result<Frame<Bytes>, BoxError>>>;

/// Compressed bytes gathered before a frame goes out (unless a flush or the end comes first).
const OUT_BUFFER: usize = 16 * 1024;

/// gzip's window and memory level for a body of unknown or large length: zlib's full 32 KiB
/// window; memory level 6 rather than zlib's 8 (deflate state 287 KiB rather than 371 KiB with
/// zlib-rs; measured the same ratio to 0.2%). Smaller known lengths get less, as nginx does.
const GZIP_WINDOW_BITS: i32 = 15;
const GZIP_MEM_LEVEL: i32 = 6;

/// brotli's window: 64 KiB, not ngx_brotli's 512 KiB. The brotli crate's state grows with the
/// window (level 4: 1.8 MiB at 64 KiB, 7.6 MiB at 512 KiB, measured; the ratio 3% worse),
/// so 64 KiB keeps a compressing response's memory near gzip's order. Levels 5 and above
/// take 128 KiB: with 64 KiB or less the crate picks a hasher of ~33 MiB for them.
const BROTLI_WINDOW_BITS: u32 = 16;
const BROTLI_WINDOW_BITS_LEVEL_5: u32 = 17;
/// A short known length gets the smallest window that holds it (ngx_brotli's rule), down to
/// brotli's least; only at levels up to 4, for the reason above.
const BROTLI_MIN_WINDOW_BITS: u32 = 10;

/// A content coding Sluice applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Coding {
    Gzip,
    Brotli,
}

/// What the client's request allows, read from its head as it came (before any edit for the
/// upstream, as nginx reads `headers_in`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Allowed {
    gzip: bool,
    brotli: bool,
}

/// A body on its way to being compressed: `poll_frame` over the body beneath.
pub(crate) struct Compressor {
    coding: Coding,
    level: u32,
    /// The body's length when it was known: a short one gets a smaller window.
    length: Option<u64>,
    /// Made at the first byte, dropped (its memory freed) once the stream is finished.
    encoder: Option<Encoder>,
    /// The rest of the frame being fed.
    input: Bytes,
    /// Bytes fed since the last flush.
    unflushed: bool,
    step: Step,
    trailers: Option<HeaderMap>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Open,
    /// The body beneath has nothing for now: what was fed goes out.
    Flushing,
    /// The body beneath ended: the stream is finished.
    Finishing,
    Done,
}

#[derive(Debug, thiserror::Error)]
#[error("compressing the response body failed ({0})")]
pub(crate) struct CompressError(&'static str);

struct Encoder {
    engine: Engine,
    out: Box<[u8]>,
    len: usize,
}

enum Engine {
    Gzip(zlib_rs::Deflate),
    /// Boxed: 5.5 KiB inline.
    Brotli(Box<BrotliEncoderStateStruct<StandardAlloc>>),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Process,
    Flush,
    Finish,
}

/// What the request allows, for `settings` (one of the codings on).
pub(crate) fn allowed(head: &Parts, settings: &Compression) -> Allowed {
    let brotli = settings.enable_brotli && accepts(&head.headers, b"br");
    // gzip_http_version 1.1 as ingress-nginx renders it; ngx_brotli checks no version and no
    // gzip_disable.
    let gzip = settings.use_gzip
        && head.version >= Version::HTTP_11
        && accepts(&head.headers, b"gzip")
        && !head
            .headers
            .get(header::USER_AGENT)
            .is_some_and(|agent| settings.gzip_disable.refuses(agent.as_bytes()));
    Allowed { gzip, brotli }
}

/// The response phase: `Vary: Accept-Encoding` on a response that could be compressed, and
/// the headers of a compressed one; the compressor its body goes through then.
pub(crate) fn respond(
    headers: &mut HeaderMap,
    status: StatusCode,
    method: &Method,
    length: Option<u64>,
    allowed: Allowed,
    settings: &Compression,
) -> Option<Compressor> {
    if !(status == StatusCode::OK
        || status == StatusCode::FORBIDDEN
        || status == StatusCode::NOT_FOUND)
        || *method == Method::HEAD
        || headers
            .get(header::CONTENT_ENCODING)
            .is_some_and(|v| !v.is_empty())
        || no_transform(headers)
    {
        return None;
    }
    let content_type = headers.get(header::CONTENT_TYPE)?.as_bytes();
    let eligible = |coding: &CodingSettings| {
        // nginx: a known length below the minimum is sent as it is; Sluice also leaves an
        // empty body alone (nginx would gzip it into 20 bytes with a minimum of 0).
        length.is_none_or(|l| l > 0 && l >= coding.min_length) && coding.types.matches(content_type)
    };
    let brotli = settings.enable_brotli && eligible(&settings.brotli);
    let gzip = settings.use_gzip && eligible(&settings.gzip);
    if !brotli && !gzip {
        return None;
    }
    // ingress-nginx renders gzip_vary only with use-gzip, so its brotli-only answers carry no
    // Vary; Sluice sends it whenever a coding could apply, so caches keep the variants apart.
    add_vary(headers);
    let (coding, level) = if brotli && allowed.brotli {
        (Coding::Brotli, settings.brotli.level)
    } else if gzip && allowed.gzip {
        (Coding::Gzip, settings.gzip.level)
    } else {
        return None;
    };
    headers.insert(
        header::CONTENT_ENCODING,
        HeaderValue::from_static(match coding {
            Coding::Gzip => "gzip",
            Coding::Brotli => "br",
        }),
    );
    headers.remove(header::CONTENT_LENGTH);
    headers.remove(header::ACCEPT_RANGES);
    weaken_etag(headers);
    Some(Compressor::new(coding, level, length))
}

/// Whether `Accept-Encoding` names `coding` with a q-value above 0. nginx's reading: `*`
/// does not stand for gzip or br, and an unreadable q-value refuses.
fn accepts(headers: &HeaderMap, coding: &[u8]) -> bool {
    for value in headers.get_all(header::ACCEPT_ENCODING) {
        for element in value.as_bytes().split(|b| *b == b',') {
            let mut parts = element.split(|b| *b == b';');
            let name = parts.next().unwrap_or_default().trim_ascii();
            if !name.eq_ignore_ascii_case(coding) {
                continue;
            }
            let mut q = Some(1.0);
            for param in parts {
                let param = param.trim_ascii();
                let Some((key, value)) = param.split_at_checked(1) else {
                    continue;
                };
                if key.eq_ignore_ascii_case(b"q") {
                    let value = value.trim_ascii_start().strip_prefix(b"=");
                    q = value.and_then(qvalue);
                }
            }
            return q.is_some_and(|q| q > 0.0);
        }
    }
    false
}

/// RFC 9110's `qvalue`: 0 to 1 with at most three decimals.
fn qvalue(text: &[u8]) -> Option<f32> {
    let text = std::str::from_utf8(text.trim_ascii()).ok()?;
    let valid = text.len() <= 5
        && text.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && matches!(text.as_bytes().first(), Some(b'0' | b'1'));
    let q: f32 = text.parse().ok().filter(|_| valid)?;
    (q <= 1.0).then_some(q)
}

/// `Cache-Control: no-transform` (RFC 9111 §5.2.2.6): an intermediary must not change the
/// content's coding. nginx's gzip filter ignores it; Sluice honours it.
fn no_transform(headers: &HeaderMap) -> bool {
    headers.get_all(header::CACHE_CONTROL).iter().any(|value| {
        value
            .as_bytes()
            .split(|b| *b == b',')
            .any(|d| d.trim_ascii().eq_ignore_ascii_case(b"no-transform"))
    })
}

/// `Vary: Accept-Encoding`, unless the response already varies by it (or by everything).
fn add_vary(headers: &mut HeaderMap) {
    let covered = headers.get_all(header::VARY).iter().any(|value| {
        value.as_bytes().split(|b| *b == b',').any(|name| {
            let name = name.trim_ascii();
            name == b"*" || name.eq_ignore_ascii_case(b"accept-encoding")
        })
    });
    if !covered {
        headers.append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    }
}

/// nginx's `ngx_http_weak_etag`: a strong validator no longer names these bytes.
fn weaken_etag(headers: &mut HeaderMap) {
    let Some(etag) = headers.get(header::ETAG) else {
        return;
    };
    let bytes = etag.as_bytes();
    if bytes.starts_with(b"W/") {
        return;
    }
    let weak = bytes
        .starts_with(b"\"")
        .then(|| HeaderValue::from_bytes(&[b"W/", bytes].concat()).ok())
        .flatten();
    match weak {
        Some(weak) => {
            headers.insert(header::ETAG, weak);
        }
        None => {
            headers.remove(header::ETAG);
        }
    }
}

impl Compressor {
    fn new(coding: Coding, level: u32, length: Option<u64>) -> Compressor {
        Compressor {
            coding,
            level,
            length,
            encoder: None,
            input: Bytes::new(),
            unflushed: false,
            step: Step::Open,
            trailers: None,
        }
    }

    pub(crate) fn is_end_stream(&self) -> bool {
        self.step == Step::Done && self.trailers.is_none()
    }

    /// The next compressed frame of the body `poll_inner` polls.
    pub(crate) fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
        mut poll_inner: impl FnMut(&mut Context<'_>) -> Polled,
    ) -> Polled {
        match ready!(self.poll_compressed(cx, &mut poll_inner)) {
            Some(Err(error)) => {
                // Nothing more goes out: the encoder's memory goes now, not when the body
                // is dropped.
                self.encoder = None;
                self.step = Step::Done;
                self.trailers = None;
                Poll::Ready(Some(Err(error)))
            }
            other => Poll::Ready(other),
        }
    }

    fn poll_compressed(
        &mut self,
        cx: &mut Context<'_>,
        poll_inner: &mut impl FnMut(&mut Context<'_>) -> Polled,
    ) -> Polled {
        loop {
            match self.step {
                Step::Done => {
                    return Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))))
                }
                Step::Flushing | Step::Finishing => {
                    let op = if self.step == Step::Finishing {
                        Op::Finish
                    } else {
                        Op::Flush
                    };
                    let encoder = self.encoder();
                    let (_, complete) = encoder.run(&[], op)?;
                    let data = encoder.take();
                    if complete {
                        if op == Op::Finish {
                            self.encoder = None;
                            self.step = Step::Done;
                        } else {
                            self.step = Step::Open;
                        }
                    }
                    if !data.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(data))));
                    }
                    // Nothing came out: on with the step (a completed flush asks the body
                    // beneath again, which registers this call's waker).
                    continue;
                }
                Step::Open => {}
            }
            if !self.input.is_empty() {
                let input = std::mem::take(&mut self.input);
                let encoder = self.encoder();
                let (consumed, _) = encoder.run(&input, Op::Process)?;
                let full = encoder.is_full();
                self.input = input;
                self.input.advance(consumed);
                self.unflushed = true;
                if full {
                    let data = self.encoder().take();
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                continue;
            }
            match poll_inner(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => self.input = data,
                    Err(frame) => {
                        self.trailers = frame.into_trailers().ok();
                        self.step = Step::Finishing;
                    }
                },
                Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error))),
                Poll::Ready(None) => self.step = Step::Finishing,
                Poll::Pending if self.unflushed => {
                    self.unflushed = false;
                    self.step = Step::Flushing;
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn encoder(&mut self) -> &mut Encoder {
        let (coding, level, length) = (self.coding, self.level, self.length);
        self.encoder
            .get_or_insert_with(|| Encoder::new(coding, level, length))
    }
}

impl Encoder {
    fn new(coding: Coding, level: u32, length: Option<u64>) -> Encoder {
        let length = length.unwrap_or(u64::MAX);
        let engine = match coding {
            Coding::Gzip => {
                // nginx's ngx_http_gzip_filter_memory: window and memory level shrink together
                // while the known length fits in half the window.
                let (mut bits, mut mem_level) = (GZIP_WINDOW_BITS, GZIP_MEM_LEVEL);
                while bits > 9 && length < (1u64 << (bits - 1)) - 262 {
                    bits -= 1;
                    mem_level -= 1;
                }
                Engine::Gzip(zlib_rs::Deflate::new_with_config(DeflateConfig {
                    level: level as i32,
                    method: DeflateMethod::Deflated,
                    // + 16: a gzip header and trailer around the deflate stream.
                    window_bits: bits + 16,
                    mem_level: mem_level.max(1),
                    strategy: Strategy::Default,
                }))
            }
            Coding::Brotli => {
                let bits = if level >= 5 {
                    BROTLI_WINDOW_BITS_LEVEL_5
                } else {
                    // ngx_brotli: the smallest window that holds a known length.
                    let mut bits = BROTLI_MIN_WINDOW_BITS;
                    while bits < BROTLI_WINDOW_BITS && length > 1u64 << bits {
                        bits += 1;
                    }
                    bits
                };
                let mut state = BrotliEncoderStateStruct::new(StandardAlloc::default());
                state.set_parameter(BrotliEncoderParameter::BROTLI_PARAM_QUALITY, level);
                state.set_parameter(BrotliEncoderParameter::BROTLI_PARAM_LGWIN, bits);
                if length != u64::MAX {
                    let hint = u32::try_from(length).unwrap_or(u32::MAX);
                    state.set_parameter(BrotliEncoderParameter::BROTLI_PARAM_SIZE_HINT, hint);
                }
                Engine::Brotli(Box::new(state))
            }
        };
        Encoder {
            engine,
            out: vec![0; OUT_BUFFER].into_boxed_slice(),
            len: 0,
        }
    }

    fn is_full(&self) -> bool {
        self.len == self.out.len()
    }

    /// The compressed bytes gathered so far.
    fn take(&mut self) -> Bytes {
        let data = Bytes::copy_from_slice(&self.out[..self.len]);
        self.len = 0;
        data
    }

    /// Feeds `input` (empty for a flush or the finish) into the output buffer: the bytes taken
    /// and whether `op` is complete (else the buffer is full: take it and call again).
    fn run(&mut self, input: &[u8], op: Op) -> Result<(usize, bool), CompressError> {
        let space = &mut self.out[self.len..];
        match &mut self.engine {
            Engine::Gzip(deflate) => {
                let flush = match op {
                    Op::Process => DeflateFlush::NoFlush,
                    Op::Flush => DeflateFlush::SyncFlush,
                    Op::Finish => DeflateFlush::Finish,
                };
                let (taken, written) = (deflate.total_in(), deflate.total_out());
                let status = deflate
                    .compress(input, space, flush)
                    .map_err(|e| CompressError(e.as_str()))?;
                let consumed = (deflate.total_in() - taken) as usize;
                let produced = (deflate.total_out() - written) as usize;
                let room_left = produced < space.len();
                self.len += produced;
                let complete = match op {
                    Op::Process => consumed == input.len(),
                    // zlib: a flush is complete when it left output space unused.
                    Op::Flush => room_left,
                    Op::Finish => status == zlib_rs::Status::StreamEnd,
                };
                Ok((consumed, complete))
            }
            Engine::Brotli(state) => {
                let operation = match op {
                    Op::Process => BrotliEncoderOperation::BROTLI_OPERATION_PROCESS,
                    Op::Flush => BrotliEncoderOperation::BROTLI_OPERATION_FLUSH,
                    Op::Finish => BrotliEncoderOperation::BROTLI_OPERATION_FINISH,
                };
                let (mut available_in, mut in_offset) = (input.len(), 0);
                let (mut available_out, mut out_offset) = (space.len(), 0);
                let ok = state.compress_stream(
                    operation,
                    &mut available_in,
                    input,
                    &mut in_offset,
                    &mut available_out,
                    space,
                    &mut out_offset,
                    &mut None,
                    &mut |_, _, _, _| (),
                );
                if !ok {
                    return Err(CompressError("brotli encoder error"));
                }
                self.len += out_offset;
                let complete = match op {
                    Op::Process => available_in == 0,
                    Op::Flush => available_in == 0 && !state.has_more_output(),
                    Op::Finish => state.is_finished(),
                };
                Ok((in_offset, complete))
            }
        }
    }
}

#[cfg(test)]
mod tests;
