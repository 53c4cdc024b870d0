//! Sluice's own HTTP/2 client, for upstream connections (gRPC, h2c and HTTP/2 backends), on
//! the frame and HPACK codecs of `wire::h2` as the server side (`h2_server`) is.
//!
//! ```text
//!  upstream_h2 ─▶ Sender::send_request ─HEADERS (encode_field_plain)─▶ Shared.out ─┐
//!                 SendStream::send_data ─DATA within both send windows─▶ Shared.out ─┤
//!                                                                 Connection (owns the
//!                                                                 socket, one task) ─▶ write
//!  socket ─read─▶ Connection ─▶ frame::parse ─HEADERS/CONTINUATION─▶ hpack::Decoder
//!                  ─▶ Shared.streams[id]: head, data queue, trailers ─wake─▶ ResponseFuture,
//!                     RecvStream (taking data returns it to both windows: WINDOW_UPDATE
//!                     once half a window is used, so a slow client slows the backend)
//!                  SETTINGS (ACK, windows, frame size, stream limit), PING (ACK),
//!                  WINDOW_UPDATE (wakes SendStreams), RST_STREAM, GOAWAY
//! ```
//!
//! Single-threaded as a worker is: the handles and the connection share `Rc<RefCell<Shared>>`;
//! there is no channel, no lock and no task per stream. Why not the `h2` crate's client: its
//! connection poll, stream store (mutex and slab), prioritizer and HPACK indexing were ~42 %
//! of a unary gRPC call's user instructions (issue 29 item 4). Our encoder keeps no dynamic
//! table (every field is a literal without indexing or a static index), so the peer's
//! SETTINGS_HEADER_TABLE_SIZE needs nothing from us.

mod conn;
mod state;
mod stream;
#[cfg(test)]
mod tests;

pub(crate) use conn::{handshake, Connection};
pub(crate) use stream::{RecvStream, SendStream, Sender};

use std::fmt;

pub(crate) use wire::h2::frame::ErrorCode;

/// Why a stream or the connection failed.
#[derive(Clone, Debug)]
pub(crate) struct Error {
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    /// RST_STREAM on this stream; `remote`: the peer sent it.
    Reset { code: ErrorCode, remote: bool },
    /// The connection ended with GOAWAY; `remote`: the peer sent it. `above`: this stream was
    /// above its last stream ID (never processed, RFC 9113 §8.7).
    GoAway {
        code: ErrorCode,
        remote: bool,
        above: bool,
    },
    /// The socket failed or closed.
    Io(String),
    /// No stream can open: the connection is closed or going away (nothing was sent).
    Closed,
}

impl Error {
    pub(crate) fn reset(code: ErrorCode, remote: bool) -> Error {
        Error {
            kind: Kind::Reset { code, remote },
        }
    }

    fn go_away(code: ErrorCode, remote: bool, above: bool) -> Error {
        Error {
            kind: Kind::GoAway {
                code,
                remote,
                above,
            },
        }
    }

    fn io(error: &std::io::Error) -> Error {
        Error {
            kind: Kind::Io(error.to_string()),
        }
    }

    fn closed() -> Error {
        Error { kind: Kind::Closed }
    }

    /// RFC 9113 §8.7: the peer did not process the stream (REFUSED_STREAM, a stream above
    /// a GOAWAY's last stream ID, or nothing sent at all): it may be sent again.
    pub(crate) fn not_processed(&self) -> bool {
        match self.kind {
            Kind::Reset { code, remote } => remote && code == ErrorCode::REFUSED_STREAM,
            Kind::GoAway { above, .. } => above,
            Kind::Closed => true,
            Kind::Io(_) => false,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let by = |remote: bool| if remote { "the upstream" } else { "the proxy" };
        match &self.kind {
            Kind::Reset { code, remote } => {
                write!(f, "stream reset by {} ({})", by(*remote), code.name())
            }
            Kind::GoAway { code, remote, .. } => {
                write!(
                    f,
                    "connection closed by {} with GOAWAY ({})",
                    by(*remote),
                    code.name()
                )
            }
            Kind::Io(message) => write!(f, "connection failed: {message}"),
            Kind::Closed => f.write_str("the connection takes no new streams"),
        }
    }
}

impl std::error::Error for Error {}
