//! What the integration tests of every crate share, so each helper exists once.
//!
//! ```text
//!   a crate's tests/it/main.rs ──uses──▶ testkit
//!     eventually / eventually_async / bounded   wait for a condition or a step, never sleep blindly
//!     tls::{TestCa, Leaf, self_signed}          certificates made on the fly (rcgen)
//!     objects::{service, slice, ingress, ...}   Kubernetes objects as JSON values
//!     process::Process                          a child process: first stdout line, killed on drop
//!     closed_port / free_udp_port               addresses nothing listens on
//!     grpc::{GrpcServer, python}                grpcio servers (echo.py), skipped without grpcio
//! ```
//!
//! A dev-dependency only: nothing here may reach a shipped binary.

pub mod grpc;
pub mod objects;
pub mod process;
pub mod tls;

use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

/// Every network step of a test is bounded by this.
pub const STEP: Duration = Duration::from_secs(10);

/// How often `eventually` looks again: often enough that a test waits little past the moment its
/// condition holds, rarely enough that polling a process or an API server costs nothing.
const POLL: Duration = Duration::from_millis(20);

/// What a check passed to [`eventually`] returns: `bool` (whether it holds yet) or `Option<T>`
/// (the value, once there is one).
pub trait Outcome {
    /// What `eventually` returns once the check succeeds.
    type Value;
    /// `Some` when the check succeeded.
    fn settled(self) -> Option<Self::Value>;
}

impl Outcome for bool {
    type Value = ();

    fn settled(self) -> Option<()> {
        self.then_some(())
    }
}

impl<T> Outcome for Option<T> {
    type Value = T;

    fn settled(self) -> Option<T> {
        self
    }
}

/// Runs `check` until it succeeds, for at most `limit` (a blocking wait, for tests without a
/// runtime); panics naming `what` after.
pub fn eventually<O: Outcome>(
    limit: Duration,
    what: &str,
    mut check: impl FnMut() -> O,
) -> O::Value {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check().settled() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(POLL);
    }
}

/// As [`eventually`], for a check that is a future (sleeps on the tokio timer between tries).
pub async fn eventually_async<O, F, Fut>(limit: Duration, what: &str, mut check: F) -> O::Value
where
    O: Outcome,
    F: FnMut() -> Fut,
    Fut: Future<Output = O>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check().await.settled() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Runs `future` for at most [`STEP`], panicking after.
pub async fn bounded<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(STEP, future)
        .await
        .expect("test step timed out")
}

/// A TCP port on 127.0.0.1 that refuses connections for as long as the test process runs: a
/// socket bound there that never listens. (A port bound and released could be taken by a test
/// running beside it, whose server would then answer.)
pub fn closed_port() -> SocketAddr {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a TCP socket");
    socket
        .bind(&SocketAddr::from((Ipv4Addr::LOCALHOST, 0)).into())
        .expect("bind 127.0.0.1:0");
    let addr = socket
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .expect("a bound address");
    // Kept bound (not listening) until the process exits: a few descriptors per test run.
    std::mem::forget(socket);
    addr
}

/// A TCP port on 127.0.0.1 nothing uses now (bound, then released): for a server the test
/// starts there. For a port that must refuse connections, [`closed_port`].
pub fn free_tcp_port() -> u16 {
    unused_port(|port| std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok())
}

/// A UDP port on 127.0.0.1 nothing uses now.
pub fn free_udp_port() -> u16 {
    unused_port(|port| std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, port)).is_ok())
}

/// The first port below the kernel's ephemeral range that `free` finds free, never the same
/// twice in a process. Below the range because a port the kernel handed out (bind to port 0)
/// may be handed out again, as the local port of any test's outgoing connection, before the
/// test's server binds it: with hundreds of tests connecting in parallel, that happened.
fn unused_port(free: impl Fn(u16) -> bool) -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    let span = ephemeral.saturating_sub(FIRST).max(1_000);
    // Test binaries of one run spread over the span by their process id.
    let start = std::process::id().wrapping_mul(7_919) % span;
    for _ in 0..span {
        let offset = (start + NEXT.fetch_add(1, Ordering::Relaxed)) % span;
        let port = u16::try_from(FIRST + offset).expect("a port number");
        if free(port) {
            return port;
        }
    }
    panic!("no free port on 127.0.0.1 in {FIRST}..{}", FIRST + span);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eventually_returns_the_first_value_a_check_settles_on() {
        let mut tries = 0;
        let value = eventually(STEP, "the third try", || {
            tries += 1;
            (tries == 3).then_some(tries * 10)
        });
        assert_eq!(value, 30);
    }

    #[test]
    #[should_panic(expected = "waiting for what never holds")]
    fn eventually_gives_up_after_its_limit() {
        eventually(Duration::from_millis(50), "what never holds", || false);
    }

    #[tokio::test]
    async fn eventually_async_accepts_a_bool_check() {
        let mut tries = 0;
        eventually_async(STEP, "the second try", || {
            tries += 1;
            let done = tries == 2;
            async move { done }
        })
        .await;
        assert_eq!(tries, 2);
    }
}
