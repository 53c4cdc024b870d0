//! What every body of the data path shares, below all of them: the error type their frames
//! carry, the two ways a client's body fails, and the progress note the request path reads.
//! The bodies themselves live above what produces them:
//!
//! ```text
//!   buffer, h2 server --> request_body  --> client, upstream, upstream_h2
//!   upstream, upstream_h2, request guard --> response_body --> forward, servers
//! ```

use std::cell::Cell;

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the request path needs to know about a body the upstream client is sending for it.
#[derive(Default)]
pub(crate) struct BodyProgress {
    /// The body passed `client-max-body-size`: answer 413.
    exceeded: Cell<bool>,
}

#[derive(Debug, thiserror::Error)]
#[error("request body larger than client-max-body-size")]
pub(crate) struct BodyTooLarge;

#[derive(Debug, thiserror::Error)]
#[error("the client sent no body bytes within client-body-timeout")]
pub(crate) struct BodyTimeout;

impl BodyProgress {
    pub(crate) fn exceeded(&self) -> bool {
        self.exceeded.get()
    }

    pub(crate) fn set_exceeded(&self) {
        self.exceeded.set(true);
    }
}
