//! The Prometheus text exposition (format 0.0.4) of a summed [`Snapshot`] and the shared
//! state: ingress-nginx's families (so its Grafana dashboards and alerts work unchanged), then
//! Sluice's own, which say what ingress-nginx has no words for (swaps, diagnostics, limits).
//!
//! ```text
//!  Snapshot.series ─▶ nginx_ingress_controller_{requests, request_duration_seconds, ...}  nginx.rs
//!  Shared (config, swaps, leader, identity) ─▶ nginx_ingress_controller_{config_*, ssl_*, ...}
//!  /proc/self ─▶ nginx_ingress_controller_nginx_process_* and process_*              process.rs
//!  everything ─▶ sluice_*                                                              own.rs
//! ```
//! ingress-nginx's constant labels `controller_namespace`, `controller_class` and
//! `controller_pod` come from [`crate::MetricIdentity`].

use super::Snapshot;
use crate::shared::Shared;

mod nginx;
mod own;
mod process;
mod text;

use nginx::{controller_families, request_families};
use own::sluice_families;
use process::{nginx_process_families, process_families, ProcessStats};
use text::Escaped;

/// Renders everything; `workers` is how many worker threads serve.
pub(crate) fn render(total: &Snapshot, shared: &Shared, workers: usize) -> String {
    let mut out = String::with_capacity(8192 + total.series.len() * 4096);
    let config = shared.config.load_full();
    let controller = controller_labels(shared);
    let process = ProcessStats::read();

    request_families(
        &mut out,
        total,
        &controller,
        &shared.metric_options,
        &shared.bounds,
    );
    controller_families(&mut out, shared, config.as_deref(), &controller);
    nginx_process_families(&mut out, total, &process, &controller);
    process_families(&mut out, &process);
    sluice_families(&mut out, total, shared, config.as_deref(), workers);
    out
}

/// `controller_class="…",controller_namespace="…",controller_pod="…"`.
fn controller_labels(shared: &Shared) -> String {
    let identity = &shared.identity;
    format!(
        "controller_class=\"{}\",controller_namespace=\"{}\",controller_pod=\"{}\"",
        Escaped(&identity.class),
        Escaped(&identity.namespace),
        Escaped(&identity.pod)
    )
}
