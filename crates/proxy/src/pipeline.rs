//! What the servers are handed: the request pipeline as a callback. The HTTP/1.1 and HTTP/2
//! servers parse and frame; what a request becomes (routing, the upstream, the log line) is
//! the connection context's business (`front_door` implements this for `ConnCtx` with
//! `forward::respond`), so the servers sit below the pipeline and name none of its types.
//!
//! ```text
//!  server.rs, h2_server ── Pipeline::respond(head, body, upgrade) ──▶ Response<Pipeline::Body>
//!                       ── refusal / log_refused (heads refused before the pipeline)
//!                       ── closing, last_active, tunnel counts (the connection's state)
//! ```

use std::future::Future;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use http::request::Parts;
use http::Response;
use http_body::Body;
use hyper::upgrade::OnUpgrade;

use crate::body::BoxError;
use crate::error::{ErrorSource, ProxyError};
use crate::h2_server::TunnelCount;
use crate::request_body::ClientBody;

/// The client's side of an upgraded connection, once the response has gone out.
pub(crate) enum ClientUpgrade {
    /// HTTP/1.1 `Upgrade`: hyper hands over the connection after the 101.
    Http1(OnUpgrade),
    /// HTTP/2 extended CONNECT (RFC 8441): the stream carries the bytes after the 200.
    Http2(crate::h2_server::Upgrade),
}

/// One client connection's way into the request pipeline. Generic, not a trait object: the
/// servers are compiled for the one implementation, so a request pays no dynamic call and no
/// boxed future for it.
pub(crate) trait Pipeline: TunnelCount + 'static {
    /// The response body the pipeline answers with.
    type Body: Body<Data = Bytes, Error = BoxError> + Unpin;

    /// Answers one request: `body` is `None` when the request has none.
    fn respond(
        self: Rc<Self>,
        head: Parts,
        body: Option<ClientBody>,
        upgrade: Option<ClientUpgrade>,
    ) -> impl Future<Output = Response<Self::Body>>;

    /// Counts a request refused before it reached the pipeline (a framing the server cannot
    /// trust, a header list over the limit) with the other errors.
    fn count_error(&self, status: u16, source: ErrorSource);

    /// The answer to a request refused before it reached the pipeline.
    fn error_response(&self, error: &ProxyError) -> Response<Self::Body>;

    /// Logs a refused request as nginx does, with the bytes that went out (`head` is `None`
    /// when it was not kept).
    fn log_refused(&self, head: Option<&Parts>, status: u16, sent: (u64, u64));

    /// The worker is stopping: answer the request in flight with `Connection: close` and
    /// serve no other.
    fn closing(&self) -> bool;

    /// The worker is stopping, not merely terminating: a connection whose response already
    /// promised keep-alive is ended after it all the same, as the stop ends idle ones. While
    /// only terminating, that promise is kept: closing right after a keep-alive response
    /// would race the client's next request, which it may already have sent.
    fn stopping(&self) -> bool;

    /// When the connection last did something (when it was accepted, until its first request).
    fn last_active(&self) -> Instant;
}
