//! The little state every thread sees: the current configuration and the control plane's
//! counters. Written by the control plane, read by workers without locks.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;
use model::Backend;
use model::Compiled;
use rustls::server::ProducesTickets;
use rustls::sign::CertifiedKey;
use tokio::sync::{broadcast, watch};

use crate::access_log::{AccessLogOutput, Sink};
use crate::listen::StartError;
use crate::otlp::SpanSink;

/// Endpoint changes a worker may be behind by before it rebuilds its whole view instead.
const ENDPOINT_CHANGES_QUEUED: usize = 256;

pub(crate) struct Shared {
    /// `None` until the first publish: requests answer 503 and /ready says not ready.
    pub(crate) config: ArcSwapOption<Compiled>,
    pub(crate) source_errors: Mutex<Vec<String>>,
    pub(crate) config_swaps: AtomicU64,
    pub(crate) last_swap_unix_millis: AtomicU64,
    pub(crate) endpoint_swaps: AtomicU64,
    /// SIGTERM arrived: /ready answers 503 so load balancers stop sending, while the
    /// listeners keep serving through `--shutdown-grace-period`.
    pub(crate) terminating: AtomicBool,
    /// Upgraded connections still open at the end of `worker-shutdown-timeout` (closed then).
    pub(crate) tunnels_closed_at_shutdown: AtomicU64,
    /// Bumped on every publish; each worker then rebuilds its view of live endpoints.
    pub(crate) wake: watch::Sender<u64>,
    /// The backends whose endpoint sets were swapped in place: each worker updates just those
    /// (a worker that falls behind rebuilds everything instead).
    pub(crate) endpoint_changes: broadcast::Sender<Arc<[Arc<Backend>]>>,
    /// One ticket key set for every worker: a client resuming lands on any worker
    /// (SO_REUSEPORT hashes the new connection), so all must decrypt its ticket.
    pub(crate) ticketer: Arc<dyn ProducesTickets>,
    /// Served when the configuration has no certificate for the client (no default).
    pub(crate) fallback_cert: Arc<CertifiedKey>,
    /// The access log's writer thread.
    pub(crate) access_log: Arc<Sink>,
    /// The span exporter thread.
    pub(crate) spans: Arc<SpanSink>,
}

impl Shared {
    pub(crate) fn new(access_log: &AccessLogOutput) -> Result<Shared, StartError> {
        Ok(Shared {
            config: ArcSwapOption::empty(),
            source_errors: Mutex::new(Vec::new()),
            config_swaps: AtomicU64::new(0),
            last_swap_unix_millis: AtomicU64::new(0),
            endpoint_swaps: AtomicU64::new(0),
            terminating: AtomicBool::new(false),
            tunnels_closed_at_shutdown: AtomicU64::new(0),
            wake: watch::Sender::new(0),
            endpoint_changes: broadcast::Sender::new(ENDPOINT_CHANGES_QUEUED),
            ticketer: rustls::crypto::aws_lc_rs::Ticketer::new().map_err(StartError::Tls)?,
            fallback_cert: crate::tls::self_signed()?,
            access_log: Sink::start(access_log).map_err(StartError::AccessLog)?,
            spans: SpanSink::start().map_err(|source| StartError::Thread {
                what: "the span exporter".into(),
                source,
            })?,
        })
    }

    pub(crate) fn publish(&self, compiled: Arc<Compiled>) {
        self.config.store(Some(compiled));
        self.config_swaps.fetch_add(1, Ordering::Relaxed);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self.last_swap_unix_millis.store(now, Ordering::Relaxed);
        self.wake_workers();
    }

    pub(crate) fn endpoints_changed(&self, backends: Vec<Arc<Backend>>) {
        self.endpoint_swaps.fetch_add(1, Ordering::Relaxed);
        // No receiver yet (workers starting) is fine: a worker reads everything when it starts.
        let _ = self.endpoint_changes.send(backends.into());
    }

    pub(crate) fn is_ready(&self) -> bool {
        !self.is_terminating() && self.config.load().is_some()
    }

    pub(crate) fn is_terminating(&self) -> bool {
        self.terminating.load(Ordering::Relaxed)
    }

    pub(crate) fn source_errors(&self) -> Vec<String> {
        self.source_errors
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn wake_workers(&self) {
        self.wake
            .send_modify(|generation| *generation = generation.wrapping_add(1));
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("ready", &self.is_ready())
            .field("config_swaps", &self.config_swaps.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}
