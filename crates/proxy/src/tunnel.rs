//! Upgraded connections (WebSocket): bytes are copied both ways until either side closes, or
//! until neither side has sent a byte for `proxy-read-timeout`, as nginx closes an upgraded
//! connection whose reads wait longer than `proxy_read_timeout`.
//!
//! ```text
//!  client ◀──copy_bidirectional──▶ upstream     every read that brings bytes ─▶ last = now
//!  idle timer: last + limit passed ─▶ both sockets closed (IdleTimeout)
//! ```

use std::cell::Cell;
use std::io;
use std::pin::{pin, Pin};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// How a tunnel ended other than by a close.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TunnelError {
    #[error("no byte in either direction within proxy-read-timeout ({0:?})")]
    IdleTimeout(Duration),
    #[error("copying failed")]
    Io(#[from] io::Error),
}

/// Copies between `client` and `upstream` until both directions are done, or `idle` (zero:
/// no limit) passes without a byte read from either side.
pub(crate) async fn splice<A, B>(
    client: &mut A,
    upstream: &mut B,
    idle: Duration,
) -> Result<(), TunnelError>
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    splice_counted(client, upstream, idle, &Traffic::default()).await
}

/// Bytes a tunnel has read from each side so far; readable while it runs and after it ended,
/// however it ended.
#[derive(Debug, Default)]
pub(crate) struct Traffic {
    pub(crate) from_client: Cell<u64>,
    pub(crate) from_upstream: Cell<u64>,
}

/// [`splice`], counting into `traffic`.
pub(crate) async fn splice_counted<A, B>(
    client: &mut A,
    upstream: &mut B,
    idle: Duration,
    traffic: &Traffic,
) -> Result<(), TunnelError>
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let last = Cell::new(Instant::now());
    let mut client = Watched {
        io: client,
        last: &last,
        read: &traffic.from_client,
    };
    let mut upstream = Watched {
        io: upstream,
        last: &last,
        read: &traffic.from_upstream,
    };
    let mut copy = pin!(tokio::io::copy_bidirectional(&mut client, &mut upstream));
    if idle.is_zero() {
        copy.await?;
        return Ok(());
    }
    let mut timer = pin!(tokio::time::sleep(idle));
    loop {
        tokio::select! {
            copied = copy.as_mut() => {
                copied?;
                return Ok(());
            }
            () = timer.as_mut() => {
                let deadline = last.get() + idle;
                if deadline <= Instant::now() {
                    return Err(TunnelError::IdleTimeout(idle));
                }
                timer.as_mut().reset(deadline);
            }
        }
    }
}

/// One side of a tunnel: notes when it last brought bytes, and how many.
struct Watched<'a, I> {
    io: &'a mut I,
    last: &'a Cell<Instant>,
    read: &'a Cell<u64>,
}

impl<I: AsyncRead + Unpin> AsyncRead for Watched<'_, I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut *this.io).poll_read(cx, buf);
        let read = buf.filled().len() - before;
        if read > 0 {
            this.last.set(Instant::now());
            this.read.set(this.read.get() + read as u64);
        }
        polled
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Watched<'_, I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn a_silent_tunnel_is_closed_and_a_busy_one_is_not() {
        let (mut client, mut client_far) = tokio::io::duplex(64);
        let (mut upstream, mut upstream_far) = tokio::io::duplex(64);
        let idle = Duration::from_secs(60);
        let mut tunnel = pin!(splice(&mut client_far, &mut upstream_far, idle));
        // Traffic every 40 s keeps it open past the limit...
        let busy = async {
            for _ in 0..3 {
                tokio::time::sleep(Duration::from_secs(40)).await;
                client.write_all(b"ping").await.unwrap();
                let mut got = [0u8; 4];
                upstream.read_exact(&mut got).await.unwrap();
                assert_eq!(&got, b"ping");
            }
        };
        tokio::select! {
            ended = tunnel.as_mut() => panic!("closed while busy: {ended:?}"),
            () = busy => {}
        }
        // ...and silence ends it.
        let ended = tunnel.await;
        assert!(
            matches!(ended, Err(TunnelError::IdleTimeout(_))),
            "{ended:?}"
        );
    }
}
