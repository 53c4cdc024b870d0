//! Looking at a connection's first bytes without taking them: the PROXY protocol header, a
//! passthrough listener's ClientHello, the h2c preface. What is peeked stays in the socket
//! for the code that reads the connection next (TLS, HTTP), as if nobody had looked.
//!
//! ```text
//!  wait until readable ─▶ peek (MSG_PEEK) ─▶ decide(all bytes so far) ─┬─▶ decided: done
//!        ▲                                                              │
//!        └── readiness cleared, unless an event came since the wait ◀───┘ more needed
//!            (the peer closed its side instead: UnexpectedEof, never a wait)
//! ```
//!
//! Why not `TcpStream::peek` in a loop: a peek that sees bytes leaves the socket's readiness
//! set, so the next peek returns at once with the same bytes and a loop waiting for the rest
//! spins (with a pause between looks it polls: 1,000 half-sent prefixes kept a worker core
//! ~90 % busy). Here a look that needs more bytes clears the readiness through tokio's
//! `try_io`, which clears it only if no readiness event arrived after the look began (tokio
//! compares the event's tick): bytes arriving in between are never missed, and the next wait
//! ends only when new bytes, or the peer's FIN, arrive. A FIN is a readiness tokio never
//! clears (it is final), so an incomplete prefix followed by one ends the look at once.

use std::io;

use rustix::net::RecvFlags;
use tokio::io::Interest;
use tokio::net::TcpStream;

/// Peeks at `stream`'s first bytes (as many as `buffer` holds) until `decide` makes
/// something of them, waiting for more between looks without spinning. `decide` sees all
/// bytes so far each time (an empty slice when the peer closed without sending any) and
/// returns `None` while it needs more; it must decide once `buffer` is full. The caller
/// bounds the time.
///
/// Errors: `UnexpectedEof` when the peer closed its side before `decide` could decide; the
/// socket's own errors.
pub(crate) async fn until<T>(
    stream: &TcpStream,
    buffer: &mut [u8],
    mut decide: impl FnMut(&[u8]) -> Option<T>,
) -> io::Result<T> {
    loop {
        let ready = stream.ready(Interest::READABLE).await?;
        let looked = stream.try_io(Interest::READABLE, || {
            let (seen, _) = rustix::net::recv(stream, &mut *buffer, RecvFlags::PEEK)?;
            // `WouldBlock` here is what makes `try_io` clear the readiness it saw.
            decide(&buffer[..seen]).ok_or_else(|| io::ErrorKind::WouldBlock.into())
        });
        match looked {
            Ok(decided) => return Ok(decided),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // The FIN was there before the look: those bytes are all there will be.
                if ready.is_read_closed() {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// The prefix needs 4 bytes; they come one at a time, each after the look before it has
    /// waited: each wait ends with the new byte, not before (counted looks).
    #[tokio::test]
    async fn a_prefix_in_pieces_is_looked_at_once_per_piece() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let looks = std::cell::Cell::new(0);
        let look = async {
            let mut buffer = [0u8; 4];
            until(&server, &mut buffer, |seen| {
                looks.set(looks.get() + 1);
                (seen.len() == 4).then(|| seen.to_vec())
            })
            .await
        };
        let send = async {
            for byte in b"abcd" {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                client.write_all(&[*byte]).await.unwrap();
            }
        };
        let (seen, ()) = tokio::join!(look, send);
        assert_eq!(seen.unwrap(), b"abcd");
        // One look per byte, and at most one more each where an event raced a look:
        // a loop that spun would look thousands of times in 200 ms.
        assert!(looks.get() <= 8, "{} looks", looks.get());
        // Nothing was taken: the bytes are still there to read.
        let mut read = [0u8; 4];
        server.try_read(&mut read).unwrap();
        assert_eq!(&read, b"abcd");
    }

    #[tokio::test]
    async fn a_prefix_cut_short_by_the_peer_ends_the_look() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        client.write_all(b"ab").await.unwrap();
        client.shutdown().await.unwrap();
        let mut buffer = [0u8; 4];
        let looks = std::cell::Cell::new(0);
        let result = until(&server, &mut buffer, |seen| {
            looks.set(looks.get() + 1);
            (seen.len() == 4).then_some(())
        })
        .await;
        assert_eq!(result.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        assert!(looks.get() <= 3, "{} looks", looks.get());
        // And a peer that sent nothing: `decide` sees the empty slice.
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        client.shutdown().await.unwrap();
        let seen = until(&server, &mut buffer, |seen| Some(seen.len())).await;
        assert_eq!(seen.unwrap(), 0);
    }
}
