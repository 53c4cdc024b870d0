//! Sleeping until a request's send time, to within a tenth of a millisecond rather than a whole one.
//!
//! tokio's timers (like wrk2's event loop) round every deadline up to the next whole millisecond,
//! so a request due at 10.2 ms would leave at 11 ms and its corrected latency would carry up to a
//! millisecond of the generator's own lateness: on a loopback target, several times the server's
//! latency. On Linux each connection therefore sleeps on its own `timerfd` (nanosecond deadlines,
//! woken through the same epoll as its socket).
//!
//! Deadlines are rounded up to a shared [`SEND_GRID`] of 100 µs, so connections due close together
//! wake in one epoll round instead of one each: going idle and waking again costs tens of
//! microseconds on a virtual machine, and at tens of thousands of requests per second that, not the
//! HTTP work, would bound the rate one thread can hold. Elsewhere than Linux, or if the fd cannot be
//! created, sleeps fall back to tokio's timers.

use std::time::{Duration, Instant};

/// The granularity of send times: each request leaves at the first multiple of this (counted from
/// the run's start) at or after its intended start.
pub(crate) const SEND_GRID: Duration = Duration::from_micros(100);

/// One connection's timer.
pub(crate) struct SendTimer {
    #[cfg(target_os = "linux")]
    fd: Option<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>>,
}

impl SendTimer {
    /// A new timer. Must be called inside a tokio runtime (the fd registers with its reactor):
    /// three system calls, so the driver makes every connection's timer before its clock starts.
    pub(crate) fn new() -> SendTimer {
        SendTimer {
            #[cfg(target_os = "linux")]
            fd: linux::timerfd(),
        }
    }

    /// Returns at `at` or shortly after (at most about one grid step from `epoch`), never before.
    pub(crate) async fn sleep_until(&self, epoch: Instant, at: Instant) {
        if Instant::now() >= at {
            return;
        }
        let wake = on_grid(epoch, at);
        #[cfg(target_os = "linux")]
        if let Some(fd) = &self.fd {
            if linux::sleep_until(fd, wake).await.is_ok() {
                return;
            }
        }
        tokio::time::sleep_until(wake.into()).await;
    }
}

/// The first grid point at or after `at`.
fn on_grid(epoch: Instant, at: Instant) -> Instant {
    let grid = SEND_GRID.as_nanos();
    let since = at.saturating_duration_since(epoch).as_nanos();
    let rounded = since.div_ceil(grid) * grid;
    epoch + Duration::from_nanos(u64::try_from(rounded).unwrap_or(u64::MAX))
}

#[cfg(target_os = "linux")]
mod linux {
    use std::io;
    use std::os::fd::OwnedFd;
    use std::time::Instant;

    use rustix::time::{
        timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags,
        TimerfdTimerFlags, Timespec,
    };
    use tokio::io::unix::AsyncFd;
    use tokio::io::Interest;

    pub(super) fn timerfd() -> Option<AsyncFd<OwnedFd>> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )
        .ok()?;
        // tokio deprecated the safe constructor because a generic `T: AsRawFd` may change its fd;
        // an `OwnedFd` cannot, which is the contract `register_with_interest` asks for, and this
        // workspace forbids `unsafe`.
        #[allow(deprecated)]
        let fd = AsyncFd::with_interest(fd, Interest::READABLE);
        fd.ok()
    }

    pub(super) async fn sleep_until(fd: &AsyncFd<OwnedFd>, at: Instant) -> io::Result<()> {
        loop {
            let now = Instant::now();
            if now >= at {
                return Ok(());
            }
            // Relative, because std's Instant does not expose its clock reading.
            let wait = at - now;
            let spec = Itimerspec {
                it_interval: Timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: Timespec {
                    tv_sec: wait.as_secs() as _,
                    tv_nsec: wait.subsec_nanos() as _,
                },
            };
            timerfd_settime(fd.get_ref(), TimerfdTimerFlags::empty(), &spec)?;
            let mut ready = fd.readable().await?;
            // Consume the expiration so the next arming starts from "not readable".
            let mut expirations = [0u8; 8];
            match rustix::io::read(fd.get_ref(), &mut expirations) {
                Ok(_) | Err(rustix::io::Errno::AGAIN) => ready.clear_ready(),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_round_up_to_the_grid() {
        let epoch = Instant::now();
        let us = |n| epoch + Duration::from_micros(n);
        assert_eq!(on_grid(epoch, us(0)), us(0));
        assert_eq!(on_grid(epoch, us(1)), us(100));
        assert_eq!(on_grid(epoch, us(100)), us(100));
        assert_eq!(on_grid(epoch, us(1_234)), us(1_300));
        assert_eq!(
            on_grid(us(50), epoch),
            us(50),
            "before the epoch: the epoch"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn sleeps_end_at_their_deadline_not_before() {
        let timer = SendTimer::new();
        let epoch = Instant::now();
        for micros in [0u64, 150, 1_500, 300, 2_000] {
            let at = Instant::now() + Duration::from_micros(micros);
            timer.sleep_until(epoch, at).await;
            assert!(Instant::now() >= at);
        }
        // A deadline in the past returns at once.
        timer
            .sleep_until(epoch, Instant::now() - Duration::from_millis(1))
            .await;
    }
}
