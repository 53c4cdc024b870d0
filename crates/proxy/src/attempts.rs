//! The attempt loop's rules, one copy for every transport: which endpoint is asked next, how
//! many tries a request gets, when retrying stops, and what each attempt is recorded as.
//! `upstream::exchange` (HTTP/1.1) and `upstream_h2::exchange` (HTTP/2, gRPC) run the loop;
//! each only says how its own attempt went.
//!
//! ```text
//!  back_off() ── Gateway API's retry backoff: a pause before each retry
//!     ▼
//!  next() ── stop: tries used, proxy-next-upstream-timeout passed, no endpoint left, or
//!     │      an endpoint offered again after it answered (unless retry asks it again)
//!     │      (or under tries 0)
//!     ▼
//!  (addr, start) ─▶ transport's try ─▶ connected() ─▶ answered(status)
//!     ├─ failed(addr, error, resendable) ── proxy-next-upstream error/timeout ─▶ next()
//!     ├─ status_failed(addr, status, resendable) ── http_502 … ─▶ next()
//!     └─ not_processed() ── the endpoint never saw it ─▶ next(), not counted as a try
//! ```
//!
//! What differs per protocol, and only this:
//! - *resendable*: HTTP/1.1 resends once nothing was written, or an idempotent request with a
//!   bodiless or buffered body; HTTP/2 resends an idempotent request whose body it kept whole
//!   (≤ 64 KiB) until the response head.
//! - *not processed*: HTTP/2 knows (REFUSED_STREAM, GOAWAY above the stream): such attempts are
//!   sent again without counting, at most `NOT_PROCESSED_AGAIN` times. HTTP/1.1's equivalent, a
//!   pooled connection found dead, is resent on a fresh connection to the same endpoint inside
//!   its try.
//! - gRPC's `grpc-timeout` deadline ends the loop early (the HTTP/2 transport checks it).

use std::net::SocketAddr;
use std::time::Instant;

use model::{Backend, LoadBalance, UpstreamPolicy};

use crate::access_log::Attempt;
use crate::affinity::Sticky;
use crate::error::ProxyError;
use crate::metrics::UpstreamTimes;
use crate::upstreams::Upstreams;

/// Attempts the endpoint never processed (HTTP/2 refused streams) sent again beyond the tries.
const NOT_PROCESSED_AGAIN: u32 = 4;

/// The endpoint an attempt goes to, and when the attempt started.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Picked {
    pub(crate) addr: SocketAddr,
    pub(crate) start: Instant,
}

/// One request's attempts: the rules above and the record of what happened.
pub(crate) struct Attempts<'r> {
    backend: &'r Backend,
    load_balance: LoadBalance,
    /// `upstream-hash-by`: the request key's hash, which chooses the endpoint instead.
    hash: Option<u64>,
    /// `upstream-hash-by-subset`'s size; 0 without one. A plain number, not an `Option`: it
    /// fits in the struct's padding, so requests without a hash carry nothing more.
    subset: u32,
    /// `affinity`: the session cookie chooses the endpoint (before `hash`, as ingress-nginx's
    /// sticky balancer replaces the hash one).
    sticky: Option<&'r mut Sticky>,
    policy: &'r UpstreamPolicy,
    /// `proxy-next-upstream-tries`; 0 (every endpoint once) is `u32::MAX` here.
    tries: u32,
    /// `proxy-next-upstream-timeout` after the request arrived.
    retry_deadline: Option<Instant>,
    arrived: Instant,
    /// Attempts counted as tries.
    counted: u32,
    /// Attempts started, counted or not.
    started: u32,
    not_processed: u32,
    /// Endpoints that failed or answered with a status counted as failed. Allocates only once
    /// an attempt has failed.
    tried: Vec<SocketAddr>,
    /// The last attempt was answered, with a status that counted as failed.
    after_status: bool,
    /// The last attempt's times, for the metrics.
    timing: &'r mut Option<UpstreamTimes>,
    /// Every attempt, when the access log asks for `$upstream_*`.
    log: Option<&'r mut Vec<Attempt>>,
}

impl<'r> Attempts<'r> {
    pub(crate) fn new(
        backend: &'r Backend,
        load_balance: LoadBalance,
        hash: Option<(u64, Option<u32>)>,
        policy: &'r UpstreamPolicy,
        arrived: Instant,
        timing: &'r mut Option<UpstreamTimes>,
        log: Option<&'r mut Vec<Attempt>>,
    ) -> Attempts<'r> {
        Attempts {
            backend,
            // The route's `load-balance` annotation before the ConfigMap's.
            load_balance: policy.balance(load_balance),
            hash: hash.map(|(hash, _)| hash),
            subset: hash.and_then(|(_, subset)| subset).unwrap_or(0),
            sticky: None,
            policy,
            tries: match policy.tries {
                0 => u32::MAX,
                n => n,
            },
            retry_deadline: (!policy.next_upstream_timeout.is_zero())
                .then(|| arrived + policy.next_upstream_timeout),
            arrived,
            counted: 0,
            started: 0,
            not_processed: 0,
            tried: Vec::new(),
            after_status: false,
            timing,
            log,
        }
    }

    /// The session cookie chooses the endpoints (`affinity`).
    pub(crate) fn stick(&mut self, sticky: &'r mut Sticky) {
        self.sticky = Some(sticky);
    }

    /// Whether the route allows more than one try at all (what a resend needs is kept only
    /// then).
    pub(crate) fn allows_retries(&self) -> bool {
        self.tries > 1
    }

    /// Whether another counted try is allowed after this one.
    pub(crate) fn tries_left(&self) -> bool {
        self.counted < self.tries
    }

    /// Gateway API's `retry.backoff`: waits before a retry (not before the first try, nor
    /// when no try is left).
    pub(crate) async fn back_off(&self) {
        let pause = self.policy.retry.pause_before(self.counted);
        if !pause.is_zero() && self.tries_left() {
            tokio::time::sleep(pause).await;
        }
    }

    /// The endpoint for the next attempt and when it starts, recorded as started; `None`:
    /// stop, and answer with what the last attempt came to.
    pub(crate) fn next(&mut self, upstreams: &Upstreams) -> Option<Picked> {
        if !self.tries_left() {
            return None;
        }
        // The first attempt starts when the request arrived: no clock read of its own.
        let now = if self.started == 0 {
            self.arrived
        } else {
            let now = Instant::now();
            if self.retry_deadline.is_some_and(|deadline| now >= deadline) {
                return None;
            }
            now
        };
        let picked = {
            let mut balancer = upstreams.balancer.borrow_mut();
            match (self.sticky.as_deref_mut(), self.hash) {
                (Some(sticky), _) => balancer.pick_sticky(self.backend, sticky, &self.tried, now),
                (None, None) => balancer.pick(self.backend, self.load_balance, &self.tried, now),
                (None, Some(hash)) => {
                    let subset = Some(self.subset).filter(|n| *n > 0);
                    balancer.pick_hashed(self.backend, (hash, subset), &self.tried, now)
                }
            }
        };
        let addr = picked?;
        // The balancer offers a tried endpoint again when no other is left. That is a second
        // chance after a connect error, but not after a status (the endpoint answered; unless
        // a Gateway API retry asks it again) nor under `tries: 0`, which means every endpoint
        // once.
        let answered = self.after_status && !self.policy.retry.ask_again;
        if (answered || self.policy.tries == 0) && self.tried.contains(&addr) {
            return None;
        }
        if self.started > 0 {
            upstreams.stats.borrow_mut().retries += 1;
        }
        self.started += 1;
        self.counted += 1;
        *self.timing = Some(UpstreamTimes {
            start: now,
            connected: None,
            answered: None,
        });
        if let Some(log) = self.log.as_deref_mut() {
            log.push(Attempt {
                addr,
                start: now,
                connected: None,
                answered: None,
                status: 0,
            });
        }
        Some(Picked { addr, start: now })
    }

    /// The attempt's connection is ready (reused or connected).
    pub(crate) fn connected(&mut self) {
        let now = Instant::now();
        if let Some(timing) = self.timing.as_mut() {
            timing.connected = Some(now);
        }
        if let Some(attempt) = self.log.as_deref_mut().and_then(|log| log.last_mut()) {
            attempt.connected = Some(now);
        }
    }

    /// The attempt ended: a response head with `status`, or a failure mapped to one.
    pub(crate) fn answered(&mut self, status: u16) {
        let now = Instant::now();
        if let Some(timing) = self.timing.as_mut() {
            timing.answered = Some(now);
        }
        if let Some(attempt) = self.log.as_deref_mut().and_then(|log| log.last_mut()) {
            attempt.answered = Some(now);
            attempt.status = status;
        }
    }

    /// The attempt at `addr` failed; `resendable`: nothing reached the endpoint, or the
    /// request may be sent again. True: ask the next endpoint (`proxy-next-upstream`).
    pub(crate) fn failed(
        &mut self,
        addr: SocketAddr,
        error: &ProxyError,
        resendable: bool,
    ) -> bool {
        self.tried.push(addr);
        self.after_status = false;
        resendable && retries_on(self.policy, error) && self.tries_left()
    }

    /// The attempt at `addr` was answered with `status`. True: it counts as failed
    /// (`proxy-next-upstream http_*`) and the request can be sent to the next endpoint; the
    /// caller drops the answer unless no endpoint is left (nginx then passes the last one on).
    pub(crate) fn status_failed(
        &mut self,
        addr: SocketAddr,
        status: u16,
        resendable: bool,
    ) -> bool {
        let failed =
            resendable && self.tries_left() && self.policy.next_upstream.statuses.contains(status);
        if failed {
            self.tried.push(addr);
            self.after_status = true;
        }
        failed
    }

    /// The endpoint did not process the attempt: it is sent again without counting as a try.
    /// False once that has happened `NOT_PROCESSED_AGAIN` times.
    pub(crate) fn not_processed(&mut self) -> bool {
        self.counted -= 1;
        self.not_processed += 1;
        self.not_processed <= NOT_PROCESSED_AGAIN
    }
}

/// Whether the route's `proxy-next-upstream` sends this failure to another endpoint.
fn retries_on(policy: &UpstreamPolicy, error: &ProxyError) -> bool {
    let conditions = &policy.next_upstream;
    match error {
        ProxyError::ConnectTimeout { .. } | ProxyError::ReadTimeout { .. } => conditions.timeout,
        _ => conditions.error,
    }
}
