//! Gateway API's `timeouts.request`: one deadline from the client's request to the upstream's
//! response head, over every attempt (`timeouts.backendRequest` is the per-attempt bound, the
//! upstream policy's connect/send/read timeouts; see translate's `gateway/timeouts.rs`).
//!
//! ```text
//!  request arrives ─(+ upstream.request_timeout)─▶ deadline ─▶ exchange (attempts, retries)
//!      head in time ─▶ response   │   deadline passed ─▶ RequestTimeout (504; gRPC 4)
//! ```

use std::future::Future;
use std::time::Instant;

use model::policy::UpstreamPolicy;

use crate::deadline;
use crate::error::ProxyError;

/// The route's deadline for a request that arrived at `started`; `None`: no such bound.
pub(crate) fn deadline(policy: &UpstreamPolicy, started: Instant) -> Option<Instant> {
    (!policy.request_timeout.is_zero()).then(|| started + policy.request_timeout)
}

/// Awaits `exchange`, until `deadline` when there is one. Bounded exchanges are boxed, so a
/// route without a deadline carries no timer in its request's future.
pub(crate) async fn within<T>(
    deadline: Option<Instant>,
    exchange: impl Future<Output = Result<T, ProxyError>>,
) -> Result<T, ProxyError> {
    match deadline {
        None => exchange.await,
        Some(at) => Box::pin(deadline::before(Some(at), exchange))
            .await
            .unwrap_or(Err(ProxyError::RequestTimeout)),
    }
}
