//! A worker's housekeeping: what a publish or an endpoint change makes obsolete is forgotten
//! (idle upstream connections to endpoints that left, balancer state of backends that left,
//! route counters of Ingresses that left; TCP service connections to removed endpoints get
//! their grace), idle upstream connections age out, and log lines and spans are handed on.
//!
//! ```text
//!  publish (wake) ─▶ on_config_change: live endpoints rebuilt ─▶ pool.keep_only,
//!                    balancer.keep_only, streams.endpoint_changed, stats.retire_routes
//!  endpoints_changed ─▶ on_endpoints_change: only those backends ─▶ pool.forget, streams
//!  every HOUSEKEEPING_PERIOD ─▶ expire (pool, balancer) │ every FLUSH_PERIOD ─▶ flush_log
//!  every LOOP_LAG_PERIOD ─▶ how late that timer ran ─▶ sluice_worker_loop_lag_seconds
//! ```

use std::collections::HashSet;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use model::Backend;
use tokio::sync::broadcast;

use crate::access_log::FLUSH_PERIOD;
use crate::metrics::LOOP_LAG_PERIOD;
use crate::worker::Worker;

/// How often idle upstream connections are checked against `upstream-keepalive-timeout`.
const HOUSEKEEPING_PERIOD: Duration = Duration::from_secs(1);

/// Woken by publish/endpoints_changed: forget what no longer exists. Also ages out idle
/// upstream connections periodically.
pub(crate) async fn run(worker: Rc<Worker>) {
    let mut wake = worker.shared.wake.subscribe();
    let mut endpoint_changes = worker.shared.endpoint_changes.subscribe();
    // A publish before we subscribed woke nobody: catch up with it now.
    on_config_change(&worker);
    let mut tick = tokio::time::interval(HOUSEKEEPING_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut log_tick = tokio::time::interval(FLUSH_PERIOD);
    log_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // A timer due every 100 ms: how late it runs is how long this worker's other tasks kept
    // the thread (one long poll, a burst of handshakes) or the machine stalled it.
    let mut lag_probe = tokio::time::interval(LOOP_LAG_PERIOD);
    lag_probe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = log_tick.tick() => worker.flush_log(),
            changed = wake.changed() => {
                if changed.is_err() {
                    return;
                }
                on_config_change(&worker);
            }
            change = endpoint_changes.recv() => match change {
                Ok(backends) => on_endpoints_change(&worker, &backends),
                // Missed some: the whole view is cheaper than guessing.
                Err(broadcast::error::RecvError::Lagged(_)) => on_config_change(&worker),
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = tick.tick() => expire(&worker),
            due = lag_probe.tick() => worker.stats.borrow_mut().loop_lag(due.elapsed()),
        }
    }
}

/// A new configuration: rebuild the view of live endpoints and backends from scratch
/// (O(all endpoints), like the compile that produced it).
fn on_config_change(worker: &Worker) {
    let Some(config) = worker.config() else {
        return;
    };
    let mut live = worker.upstreams.live.borrow_mut();
    live.rebuild(&config);
    let grace = worker.settings().worker_shutdown_timeout;
    let streams = worker.streams.borrow();
    for endpoint in streams.endpoints() {
        streams.endpoint_changed(endpoint, live.counts.contains_key(&endpoint), grace);
    }
    drop(streams);
    let closed = worker
        .upstreams
        .pool
        .borrow_mut()
        .keep_only(|endpoint| live.counts.contains_key(endpoint));
    if closed > 0 {
        tracing::debug!(closed, "closed idle connections to removed endpoints");
    }
    let backends: HashSet<usize> = live.seen.keys().copied().collect();
    worker.upstreams.balancer.borrow_mut().keep_only(&backends);
    let address = Arc::as_ptr(config.arc()) as usize;
    if worker.stats_config.replace(address) != address {
        let live = config
            .ingresses
            .iter()
            .map(|i| (&*i.namespace, &*i.name))
            .collect();
        worker.stats.borrow_mut().retire_routes(&live);
    }
}

/// Endpoint sets swapped in place: only these backends are looked at, so one change costs
/// the same with 50 endpoints or 50,000.
fn on_endpoints_change(worker: &Worker, backends: &[Arc<Backend>]) {
    let grace = worker.settings().worker_shutdown_timeout;
    let mut pool = worker.upstreams.pool.borrow_mut();
    let streams = worker.streams.borrow();
    let mut closed = 0;
    worker
        .upstreams
        .live
        .borrow_mut()
        .update(backends, |addr, live| {
            streams.endpoint_changed(addr, live, grace);
            // One that joins is checked against `live` when a connection to it is pooled.
            if !live {
                closed += pool.forget(&addr);
            }
        });
    if closed > 0 {
        tracing::debug!(closed, "closed idle connections to removed endpoints");
    }
}

fn expire(worker: &Worker) {
    let max_age = worker.settings().upstream_keepalive_timeout;
    let now = Instant::now();
    worker.upstreams.pool.borrow_mut().expire(max_age, now);
    worker.upstreams.balancer.borrow_mut().expire(now);
}
