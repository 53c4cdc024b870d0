//! The little state every thread sees: the current configuration and the control plane's
//! counters. Written by the control plane, read by workers without locks. The swap history
//! behind a lock is read only by the status page, never by a worker.

use std::hash::Hasher;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;
use model::Backend;
use model::Compiled;
use rustls::server::ProducesTickets;
use rustls::sign::CertifiedKey;
use tokio::sync::{broadcast, watch};

use crate::access_log::{AccessLogOutput, Sink};
use crate::history::{self, Swap, SwapHistory};
use crate::listen::StartError;
use crate::metrics::{MetricIdentity, MetricOptions};
use crate::otlp::SpanSink;

/// Endpoint changes a worker may be behind by before it rebuilds its whole view instead.
const ENDPOINT_CHANGES_QUEUED: usize = 256;

pub(crate) struct Shared {
    /// `None` until the first publish: requests answer 503 and /ready says not ready.
    pub(crate) config: ArcSwapOption<Compiled>,
    pub(crate) source_errors: Mutex<Vec<String>>,
    /// TCP service ports that could not be bound, and why (shown on /config).
    pub(crate) stream_errors: Mutex<Vec<String>>,
    pub(crate) config_swaps: AtomicU64,
    pub(crate) last_swap_unix_millis: AtomicU64,
    pub(crate) endpoint_swaps: AtomicU64,
    /// The last configuration and endpoint swaps with what each changed (the status page).
    pub(crate) history: Mutex<SwapHistory>,
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
    /// The session cache every worker's configurations share (nginx's `shared:SSL`), made
    /// anew when its size or timeout changes.
    sessions: Mutex<Option<Arc<crate::resumption::SessionCache>>>,
    /// `auth-cache-key`'s answers, for every worker at once.
    pub(crate) auth_cache: crate::auth_cache::AuthCache,
    /// Served when the configuration has no certificate for the client (no default).
    pub(crate) fallback_cert: Arc<CertifiedKey>,
    /// The access log's writer thread.
    pub(crate) access_log: Arc<Sink>,
    /// ingress-nginx's constant metric labels.
    pub(crate) identity: MetricIdentity,
    pub(crate) metric_options: MetricOptions,
    /// `metric_options`' histogram bounds, ready for the hot path.
    pub(crate) bounds: crate::metrics::Bounds,
    /// The leader election the control plane takes part in: its name and whether we lead.
    leader: Mutex<Option<(String, bool)>>,
    /// `config_hash()` of the configuration it was computed for.
    hash_of: Mutex<Option<(Weak<Compiled>, u64)>>,
    /// The span exporter thread.
    pub(crate) spans: Arc<SpanSink>,
    /// The rate and connection limits' counters: one set for all workers (`limits.rs`).
    pub(crate) limits: crate::limits::Zones,
    /// Digest authentication's nonces and failed clients: one set for all workers.
    pub(crate) digest_sessions: crate::digest_auth::Sessions,
    /// Where replaced configurations are freed, off the workers and the control plane.
    pub(crate) reclaimer: crate::current::Reclaimer,
}

impl Shared {
    /// The shared session cache for `sessions` sessions resumable for `timeout`.
    pub(crate) fn session_cache(
        &self,
        sessions: usize,
        timeout: std::time::Duration,
    ) -> Arc<crate::resumption::SessionCache> {
        let mut cache = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        match &*cache {
            Some(made) if made.is_for(sessions, timeout) => made.clone(),
            _ => {
                let made = Arc::new(crate::resumption::SessionCache::new(sessions, timeout));
                *cache = Some(made.clone());
                made
            }
        }
    }

    pub(crate) fn new(
        access_log: &AccessLogOutput,
        identity: MetricIdentity,
        metric_options: MetricOptions,
    ) -> Result<Shared, StartError> {
        Ok(Shared {
            config: ArcSwapOption::empty(),
            source_errors: Mutex::new(Vec::new()),
            stream_errors: Mutex::new(Vec::new()),
            config_swaps: AtomicU64::new(0),
            last_swap_unix_millis: AtomicU64::new(0),
            endpoint_swaps: AtomicU64::new(0),
            history: Mutex::new(SwapHistory::default()),
            terminating: AtomicBool::new(false),
            tunnels_closed_at_shutdown: AtomicU64::new(0),
            wake: watch::Sender::new(0),
            endpoint_changes: broadcast::Sender::new(ENDPOINT_CHANGES_QUEUED),
            ticketer: rustls::crypto::aws_lc_rs::Ticketer::new().map_err(StartError::Tls)?,
            sessions: Mutex::new(None),
            auth_cache: crate::auth_cache::AuthCache::default(),
            fallback_cert: crate::fallback_cert::self_signed()?,
            access_log: Sink::start(access_log).map_err(StartError::AccessLog)?,
            identity,
            bounds: crate::metrics::Bounds::new(&metric_options),
            metric_options,
            leader: Mutex::new(None),
            hash_of: Mutex::new(None),
            spans: SpanSink::start().map_err(|source| StartError::Thread {
                what: "the span exporter".into(),
                source,
            })?,
            limits: crate::limits::Zones::new(),
            digest_sessions: crate::digest_auth::Sessions::new(),
            reclaimer: crate::current::Reclaimer::start().map_err(|source| StartError::Thread {
                what: "the configuration reclaimer".into(),
                source,
            })?,
        })
    }

    pub(crate) fn set_leader(&self, name: &str, leading: bool) {
        *lock(&self.leader) = Some((name.to_owned(), leading));
    }

    pub(crate) fn leader(&self) -> Option<(String, bool)> {
        lock(&self.leader).clone()
    }

    /// A hash of what the current configuration serves (routes, policies, certificates'
    /// sources, settings, diagnostics; not endpoints, which change in place), computed once
    /// per configuration, when first asked for (a scrape, off the data plane).
    pub(crate) fn config_hash(&self) -> u64 {
        let Some(config) = self.config.load_full() else {
            return 0;
        };
        let mut cached = lock(&self.hash_of);
        if let Some((of, hash)) = &*cached {
            if std::ptr::eq(of.as_ptr(), Arc::as_ptr(&config)) && of.strong_count() > 0 {
                return *hash;
            }
        }
        let mut view = config.view();
        view.backends.clear();
        let mut hasher = std::hash::DefaultHasher::new();
        hasher.write(&serde_json::to_vec(&view).unwrap_or_default());
        let hash = hasher.finish();
        *cached = Some((Arc::downgrade(&config), hash));
        hash
    }

    pub(crate) fn publish(&self, compiled: Arc<Compiled>) {
        // The swap first: what the change is worth a summary is worked out after the workers
        // serve it.
        let replaced = self.config.swap(Some(compiled.clone()));
        self.config_swaps.fetch_add(1, Ordering::Relaxed);
        let at = SystemTime::now();
        let now = at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self.last_swap_unix_millis.store(now, Ordering::Relaxed);
        self.wake_workers();
        let summary = history::describe_config(replaced.as_deref(), &compiled);
        if let Some(replaced) = replaced {
            self.reclaimer.retire(replaced);
        }
        self.history().record_config(Swap { at, summary });
    }

    pub(crate) fn endpoints_changed(&self, backends: Vec<Arc<Backend>>) {
        self.endpoint_swaps.fetch_add(1, Ordering::Relaxed);
        let summary = history::describe_endpoints(&backends);
        self.history().record_endpoints(Swap {
            at: SystemTime::now(),
            summary,
        });
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
        lock(&self.source_errors).clone()
    }

    pub(crate) fn stream_errors(&self) -> Vec<String> {
        lock(&self.stream_errors).clone()
    }

    /// The swap history; a panic while it was held leaves nothing half-written worth refusing.
    pub(crate) fn history(&self) -> std::sync::MutexGuard<'_, SwapHistory> {
        self.history
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn wake_workers(&self) {
        self.wake
            .send_modify(|generation| *generation = generation.wrapping_add(1));
    }
}

/// Locks `mutex`, taking the value from a panicked holder (every value here stays valid).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("ready", &self.is_ready())
            .field("config_swaps", &self.config_swaps.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}
