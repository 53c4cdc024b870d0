//! Awaiting with a bound: every timeout of the data path (client header, upstream connect and
//! head, keep-alive) is one of these two around the future it bounds.

use std::future::Future;
use std::time::{Duration, Instant};

/// Awaits `future` until `deadline` (`None`: as long as it takes). `None` on timeout.
pub(crate) async fn before<F: Future>(deadline: Option<Instant>, future: F) -> Option<F::Output> {
    match deadline {
        None => Some(future.await),
        Some(deadline) => tokio::time::timeout_at(deadline.into(), future).await.ok(),
    }
}

/// Awaits `future` for at most `limit`; a zero limit means no limit. `None` on timeout.
pub(crate) async fn within<F: Future>(limit: Duration, future: F) -> Option<F::Output> {
    if limit.is_zero() {
        Some(future.await)
    } else {
        tokio::time::timeout(limit, future).await.ok()
    }
}
