//! What Gateway API's `retry` adds to the retry rules ingress-nginx's `proxy-next-upstream*`
//! keys already set (`UpstreamPolicy`): the rest is the same policy.
//!
//! ```text
//!  HTTPRoute rule retry ─┬─ attempts N ─▶ UpstreamPolicy.tries = N + 1
//!                        ├─ codes      ─▶ next_upstream.statuses (any of 400-599)
//!                        ├─ (present)  ─▶ next_upstream error + timeout
//!                        └─ backoff B  ─▶ RetryExtras.backoff: B, 2B, 4B, … at most 10 B
//!                                         before each retry (none before the first try)
//!  RetryExtras.ask_again: an endpoint that answered with a retried code is asked again when
//!  no other is left (nginx never asks it twice; a Gateway retry on a one-pod backend must)
//! ```

use std::time::Duration;

use serde::{Serialize, Serializer};

/// The longest pause, as a multiple of the base (the spec asks for a cap not below the base).
const MAX_BACKOFF_FACTOR: u32 = 10;

/// What a Gateway API `retry` sets beyond nginx's conditions and tries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct RetryExtras {
    /// The pause before the first retry, doubled for each further one; zero: retry at once.
    #[serde(
        serialize_with = "duration_text",
        skip_serializing_if = "Duration::is_zero"
    )]
    pub backoff: Duration,
    /// An endpoint that answered with a status counted as failed may be asked again.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ask_again: bool,
}

impl RetryExtras {
    /// Ingress routes' (nginx's) behaviour.
    pub const NONE: RetryExtras = RetryExtras {
        backoff: Duration::ZERO,
        ask_again: false,
    };

    pub fn is_none(&self) -> bool {
        *self == RetryExtras::NONE
    }

    /// The pause before retry number `retry` (1 for the first retry; 0, the first try, waits
    /// for nothing): the base doubled per retry, at most `MAX_BACKOFF_FACTOR` times the base.
    pub fn pause_before(&self, retry: u32) -> Duration {
        if retry == 0 || self.backoff.is_zero() {
            return Duration::ZERO;
        }
        let factor = 1u32
            .checked_shl(retry - 1)
            .unwrap_or(u32::MAX)
            .min(MAX_BACKOFF_FACTOR);
        self.backoff.saturating_mul(factor)
    }
}

fn duration_text<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&format_args!("{value:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_per_retry_up_to_ten_times_the_base() {
        let extras = RetryExtras {
            backoff: Duration::from_millis(100),
            ask_again: true,
        };
        let pauses: Vec<u128> = (0..7).map(|n| extras.pause_before(n).as_millis()).collect();
        assert_eq!(pauses, [0, 100, 200, 400, 800, 1000, 1000]);
        assert_eq!(extras.pause_before(u32::MAX), Duration::from_millis(1000));
        assert_eq!(RetryExtras::NONE.pause_before(3), Duration::ZERO);
    }
}
