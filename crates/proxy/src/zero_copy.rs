//! Zero-copy relaying between two TCP sockets with splice(2): TLS passthrough and TCP service
//! connections move their bytes socket → pipe → socket inside the kernel, never through a
//! user-space buffer (rustix's safe `splice`, with tokio's readiness on both sockets).
//!
//! ```text
//!  per direction:  src ─splice(≤ 64 KiB)─▶ pipe ─splice(all of it)─▶ dst
//!                  src would block ─▶ wait until readable;  dst would block ─▶ until writable
//!                  src at its end (splice 0) ─▶ pipe drained ─▶ shutdown(dst, write)
//!  both directions together; ends when both ended, at the first error, or after `idle`
//!  without a byte from either side; bytes and the last byte's time go to `Traffic`
//! ```
//! A direction holds a pipe only while a chunk is in it; each worker keeps up to 64 empty
//! pipes for the next chunks (a pipe is two descriptors, a syscall to make and two to close).
//! A pipe that still holds bytes when its connection fails is closed, never reused.

use std::cell::RefCell;
use std::io;
use std::net::Shutdown;
use std::os::fd::OwnedFd;
use std::pin::pin;
use std::time::Duration;

use rustix::pipe::{pipe_with, splice, PipeFlags, SpliceFlags};
use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::tunnel::{Traffic, TunnelError};

/// The most one splice moves into a pipe: Linux's default pipe capacity (16 pages).
const CHUNK: usize = 64 * 1024;
/// Empty pipes a worker keeps for later connections; more are closed.
const SPARE_PIPES: usize = 64;

thread_local! {
    /// This worker thread's empty pipes (read end, write end).
    static SPARE: RefCell<Vec<Pipe>> = const { RefCell::new(Vec::new()) };
}

/// A pipe's two ends.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

/// A pipe borrowed from the worker's spares (or made), returned when dropped empty.
struct Lent {
    pipe: Option<Pipe>,
    /// Bytes spliced into the pipe and not yet out of it.
    pending: usize,
}

impl Lent {
    fn take() -> io::Result<Lent> {
        let spare = SPARE.with(|spare| spare.borrow_mut().pop());
        let pipe = match spare {
            Some(pipe) => pipe,
            None => {
                let (read, write) = pipe_with(PipeFlags::NONBLOCK | PipeFlags::CLOEXEC)?;
                Pipe { read, write }
            }
        };
        Ok(Lent {
            pipe: Some(pipe),
            pending: 0,
        })
    }

    fn pipe(&self) -> &Pipe {
        self.pipe.as_ref().expect("held until dropped")
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        // A pipe with bytes left in it would hand them to the next connection: closed.
        if self.pending != 0 {
            return;
        }
        if let Some(pipe) = self.pipe.take() {
            SPARE.with(|spare| {
                let mut spare = spare.borrow_mut();
                if spare.len() < SPARE_PIPES {
                    spare.push(pipe);
                }
            });
        }
    }
}

/// Relays between `client` and `upstream` until both directions are done, or `idle` (zero:
/// no limit) passes without a byte read from either side; counts into `traffic`. The caller
/// closes both sockets when this returns: that is what tells the side that ended last.
pub(crate) async fn relay(
    client: &TcpStream,
    upstream: &TcpStream,
    idle: Duration,
    traffic: &Traffic,
) -> Result<(), TunnelError> {
    let last = std::cell::Cell::new(Instant::now());
    let both = async {
        let one_ended = std::cell::Cell::new(false);
        let to_upstream = one_way(client, upstream, &traffic.from_client, &last, &one_ended);
        let to_client = one_way(upstream, client, &traffic.from_upstream, &last, &one_ended);
        tokio::try_join!(to_upstream, to_client).map(|_| ())
    };
    let mut both = pin!(both);
    if idle.is_zero() {
        return Ok(both.await?);
    }
    let mut timer = pin!(tokio::time::sleep(idle));
    loop {
        tokio::select! {
            relayed = both.as_mut() => return Ok(relayed?),
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

/// Moves `from`'s bytes to `to` until `from` ends, then half-closes `to`. A pipe is held only
/// while a chunk is on its way (an idle connection holds none), so a worker's pipes number
/// about its connections that are moving bytes at this moment, not all of its connections.
async fn one_way(
    from: &TcpStream,
    to: &TcpStream,
    read: &std::cell::Cell<u64>,
    last: &std::cell::Cell<Instant>,
    one_ended: &std::cell::Cell<bool>,
) -> io::Result<()> {
    loop {
        from.readable().await?;
        let mut lent = Lent::take()?;
        let pipe = lent.pipe();
        let moved = std::cell::Cell::new(0);
        let attempt = from.try_io(Interest::READABLE, || {
            let n = splice(from, None, &pipe.write, None, CHUNK, flags())?;
            moved.set(n);
            // Less than asked: the socket is drained. Reported as WouldBlock so that tokio
            // clears the readiness (race-free: a newer event keeps it), as its own reads do,
            // rather than a splice that would only say EAGAIN.
            if n > 0 && n < CHUNK {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            Ok(n)
        });
        let moved = match attempt {
            Ok(0) => break,
            Ok(moved) => moved,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && moved.get() > 0 => moved.get(),
            // Readiness was stale: cleared, the (empty) pipe goes back.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        };
        lent.pending = moved;
        read.set(read.get() + moved as u64);
        last.set(Instant::now());
        while lent.pending > 0 {
            let pipe = lent.pipe();
            let pending = lent.pending;
            let out = std::cell::Cell::new(0);
            let attempt = to.try_io(Interest::WRITABLE, || {
                let n = splice(&pipe.read, None, to, None, pending, flags())?;
                out.set(n);
                // A short write: the socket's buffer is full; the same readiness trick.
                if n > 0 && n < pending {
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                Ok(n)
            });
            match attempt {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => lent.pending -= n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    lent.pending -= out.get();
                    if lent.pending > 0 {
                        to.writable().await?;
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
    // The other side learns that this one is done sending, as with copy_bidirectional; but
    // when the other direction has ended too, both sockets are closed next, which says the
    // same (a system call per connection saved).
    if one_ended.replace(true) {
        return Ok(());
    }
    match socket2::SockRef::from(to).shutdown(Shutdown::Write) {
        Err(e) if e.kind() != io::ErrorKind::NotConnected => Err(e),
        _ => Ok(()),
    }
}

/// Never block in the kernel (the sockets are non-blocking already; this covers the pipe),
/// and move pages rather than copy them where the kernel can.
fn flags() -> SpliceFlags {
    SpliceFlags::NONBLOCK | SpliceFlags::MOVE
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A connected pair of sockets on 127.0.0.1: (ours, the far end).
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let far = TcpStream::connect(listener.local_addr().unwrap());
        let (far, accepted) = tokio::join!(far, listener.accept());
        (accepted.unwrap().0, far.unwrap())
    }

    #[tokio::test]
    async fn bytes_go_both_ways_whole_and_half_closes_go_through() {
        let (client, mut client_far) = pair().await;
        let (upstream, mut upstream_far) = pair().await;
        let traffic = Traffic::default();
        let relay = async {
            let ended = relay(&client, &upstream, Duration::from_secs(60), &traffic).await;
            // As the callers do: closing both sends the last direction's end.
            drop((client, upstream));
            ended
        };
        // More than a pipe holds, with a pattern so that a lost or reordered chunk shows.
        let sent: Vec<u8> = (0..3 * CHUNK + 123).map(|i| (i % 251) as u8).collect();
        let ends = async {
            client_far.write_all(&sent).await.unwrap();
            client_far.shutdown().await.unwrap();
            let mut got = Vec::new();
            upstream_far.read_to_end(&mut got).await.unwrap();
            assert!(got == sent, "{} bytes of {}", got.len(), sent.len());
            // The other way, after the client's half-close.
            upstream_far.write_all(b"answer").await.unwrap();
            upstream_far.shutdown().await.unwrap();
            let mut answer = Vec::new();
            client_far.read_to_end(&mut answer).await.unwrap();
            assert_eq!(answer, b"answer");
        };
        let (relayed, ()) = tokio::join!(relay, ends);
        relayed.unwrap();
        assert_eq!(traffic.from_client.get(), sent.len() as u64);
        assert_eq!(traffic.from_upstream.get(), 6);
        // The pipes were lent per chunk and came back empty: kept for the next ones.
        let spare = SPARE.with(|spare| spare.borrow().len());
        assert!((1..=2).contains(&spare), "{spare}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_relay_ends_after_the_idle_time() {
        let (client, _client_far) = pair().await;
        let (upstream, _upstream_far) = pair().await;
        let ended = relay(
            &client,
            &upstream,
            Duration::from_secs(5),
            &Traffic::default(),
        )
        .await;
        assert!(
            matches!(ended, Err(TunnelError::IdleTimeout(_))),
            "{ended:?}"
        );
    }
}
