//! SIGTERM and SIGINT, for both sources' loops.
//!
//! ```text
//!  first signal ─▶ Step::Grace (/ready 503, still serving) ─ grace ends or second signal ─▶ Step::Stop
//!  grace period 0 ─▶ the first signal is Step::Stop
//! ```

use std::time::Duration;

use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::error::Error;

/// The first signal starts the grace period; its end (or a second signal) ends the loop.
pub struct Termination {
    grace: Duration,
    ends: Option<tokio::time::Instant>,
    terminate: Signal,
}

/// What the serving loop does next.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Mark the proxy as terminating (/ready 503) and keep serving.
    Grace,
    /// Leave the loop and drain.
    Stop,
}

impl Termination {
    /// Installs the SIGTERM handler; call it inside a runtime.
    pub fn new(grace: Duration) -> Result<Termination, Error> {
        Ok(Termination {
            grace,
            ends: None,
            terminate: signal(SignalKind::terminate()).map_err(|source| Error::Io {
                what: "installing the SIGTERM handler",
                source,
            })?,
        })
    }

    /// Waits for the next step; cancel-safe, so it can be one branch of a `select!`.
    pub async fn next(&mut self) -> Step {
        let ends = self.ends;
        tokio::select! {
            _ = self.terminate.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
            () = tokio::time::sleep_until(ends.unwrap_or_else(tokio::time::Instant::now)),
                if ends.is_some() => return Step::Stop,
        }
        if self.ends.is_some() || self.grace.is_zero() {
            return Step::Stop;
        }
        self.ends = Some(tokio::time::Instant::now() + self.grace);
        tracing::info!(
            grace = ?self.grace,
            "shutting down: /ready answers 503; still serving for --shutdown-grace-period"
        );
        Step::Grace
    }
}
