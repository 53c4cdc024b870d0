//! The PROXY protocol on a listener's sockets (HAProxy's spec, versions 1 and 2). With
//! `use-proxy-protocol`, every connection on the HTTP and HTTPS listeners must start with a
//! header, as nginx's `listen … proxy_protocol` requires; one without a valid header is
//! closed. The bytes are parsed by `wire::proxy_protocol`; here they are peeked and read.
//!
//! ```text
//!  accepted socket ─▶ peek (nothing consumed) ─▶ wire::proxy_protocol::parse
//!     complete ─▶ read exactly the header's bytes ─▶ TLS / HTTP as usual, client = source
//!     incomplete ─▶ wait for more bytes, peek again (`peek::until`: no polling; bounded
//!                   by the connection's client-header-timeout deadline)
//!     malformed ─▶ closed (counted: sluice_proxy_protocol_refused_total)
//! ```
//! Peeking keeps the bytes after the header in the socket, so what follows is read by the
//! TLS or HTTP code exactly as on a connection without a header.

use std::io;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use wire::proxy_protocol::{parse, Malformed, Parsed, V2_MAX};
pub(crate) use wire::proxy_protocol::{v1_header, v2_header, Header};

use crate::peek;

/// Why a connection was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    #[error(transparent)]
    Malformed(#[from] Malformed),
    #[error("the connection ended before its PROXY protocol header")]
    Closed,
    #[error("reading the PROXY protocol header: {0}")]
    Io(std::io::ErrorKind),
}

/// Reads the header off `stream`, consuming exactly its bytes. The caller bounds the time.
pub(crate) async fn read_header(stream: &mut TcpStream) -> Result<Header, Refused> {
    // Every header fits: `parse` decides (complete or malformed) once this many bytes are in.
    let mut buffer = [0u8; V2_MAX];
    let (length, header) = peek::until(stream, &mut buffer, |seen| match seen {
        [] => Some(Err(Refused::Closed)),
        seen => match parse(seen) {
            Ok(Parsed::Incomplete) => None,
            Ok(Parsed::Complete { length, header }) => Some(Ok((length, header))),
            Err(malformed) => Some(Err(malformed.into())),
        },
    })
    .await
    .map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => Refused::Closed,
        kind => Refused::Io(kind),
    })??;
    stream
        .read_exact(&mut buffer[..length])
        .await
        .map_err(|e| Refused::Io(e.kind()))?;
    Ok(header)
}
