//! The Store, what was last published, and the one decision every source shares: recompile,
//! or take the endpoint fast path.
//!
//! ```text
//!  ChangeSet { config: true }  ──▶ compile_reusing(&Store, fragments) ──▶ log new diagnostics
//!                                  ──▶ Proxy::publish   (fragments: the unchanged Gateway
//!                                  routes' rules, kept from the last compile)
//!  ChangeSet { config_maps }   ──▶ the same, only for a ConfigMap the last compile read
//!  ChangeSet { endpoints }     ──▶ translate::refresh_endpoints ──▶ Proxy::endpoints_changed
//!                                  (refused node-local addresses logged once)
//!  a served certificate crosses its expiry warning ──▶ compile (the diagnostic says so)
//!  publish ──▶ names_to_resolve ──▶ NameWatch::want; NameWatch::next ──Resolution──▶
//!    Store::set_resolved ──▶ ChangeSet { endpoints } (the fast path above)
//! ```

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use model::{Compiled, Diagnostic, EndpointSet, Settings};
use providers::dns::{NameWatch, Resolution, ResolverConfig};
use proxy::Proxy;
use translate::{
    compile_reusing, names_to_resolve, refresh_endpoints, ChangeSet, CompileOptions, Fragments,
    Store,
};

/// The control plane of one process: the Store it compiles, what it last published, and the
/// proxy it publishes to. It owns the current configuration: the endpoint fast path patches
/// the configuration it published, never one read back out of the proxy.
pub struct ControlPlane {
    pub proxy: Proxy,
    pub options: CompileOptions,
    pub store: Store,
    /// The configuration last published; `None` until the first publish.
    current: Option<Arc<Compiled>>,
    source_errors: Vec<String>,
    /// `source_errors` changed and has not reached the proxy: it goes with the next publish
    /// (one call per change), or at the end of an `act` that publishes nothing.
    source_errors_pending: bool,
    /// Diagnostics already logged, so a reload only logs what is new.
    diagnostics: BTreeSet<String>,
    /// Endpoint addresses refused by the node-local policy and host names that do not resolve,
    /// as last reported (see `Compiled::endpoint_diagnostics`).
    endpoint_notes: Vec<Diagnostic>,
    /// What the running workers were sized from; a change applies at the next start.
    worker_processes: Option<u32>,
    /// What the open-files limit was set from; likewise.
    max_worker_open_files: u64,
    /// Unix seconds when a served certificate next crosses its expiry warning or expires.
    next_certificate_event: Option<i64>,
    /// What the last compile made of each Gateway route, for the next compile to reuse.
    fragments: Fragments,
    /// The ExternalNames the published backends need, kept resolved: the loops wait on
    /// [`ControlPlane::next_resolution`] beside their other sources.
    names: NameWatch,
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl ControlPlane {
    /// `startup`: the settings the process was started with (workers, open-files limit).
    /// `resolver`: where ExternalNames are asked.
    pub fn new(
        proxy: Proxy,
        options: CompileOptions,
        startup: &Settings,
        resolver: ResolverConfig,
    ) -> ControlPlane {
        ControlPlane {
            proxy,
            options,
            store: Store::default(),
            current: None,
            source_errors: Vec::new(),
            source_errors_pending: false,
            diagnostics: BTreeSet::new(),
            endpoint_notes: Vec::new(),
            worker_processes: startup.worker_processes,
            max_worker_open_files: startup.max_worker_open_files,
            next_certificate_event: None,
            fragments: Fragments::default(),
            names: NameWatch::new(resolver),
        }
    }

    /// The next change of an ExternalName's addresses (cancel-safe: for a `select!`).
    pub async fn next_resolution(&mut self) -> Resolution {
        self.names.next().await
    }

    /// Takes a changed ExternalName into the Store and acts on the Services it is the name
    /// of: the endpoint fast path, as for a changed EndpointSlice.
    pub fn resolved(&mut self, resolution: Resolution) -> Option<Arc<Compiled>> {
        let changes =
            (self.store).set_resolved(&resolution.name, resolution.addresses, resolution.problem);
        self.act(changes)
    }

    /// Acts on what changed in the Store: recompile on configuration changes, otherwise take
    /// the endpoint fast path. Returns the configuration when what the status writer reports
    /// may have changed: it recompiled, or the fast path changed which endpoints are refused.
    pub fn act(&mut self, changes: ChangeSet) -> Option<Arc<Compiled>> {
        let reported = self.act_on(changes);
        if std::mem::take(&mut self.source_errors_pending) {
            // Nothing was published (a publish takes them along): they go on their own.
            self.proxy.set_source_errors(self.source_errors.clone());
        }
        reported
    }

    /// Whether `changes` need a compile: a configuration change, or a change to a ConfigMap
    /// the last compile read (Sluice watches every ConfigMap of its scope; most are no one's).
    pub fn needs_compile(&self, changes: &ChangeSet) -> bool {
        changes.needs_compile(self.current.as_deref())
    }

    fn act_on(&mut self, changes: ChangeSet) -> Option<Arc<Compiled>> {
        if self.needs_compile(&changes) {
            let started = Instant::now();
            let compiled = compile_reusing(&self.store, &self.options, &mut self.fragments);
            let compiled = Arc::new(compiled);
            let elapsed = started.elapsed();
            let routes = self.fragments.counts();
            // Logged after the swap: the resident memory is that of the configuration now served.
            let publishing = Instant::now();
            self.publish(compiled.clone());
            tracing::info!(
                elapsed_us = elapsed.as_micros() as u64,
                publish_us = publishing.elapsed().as_micros() as u64,
                ingresses = compiled.ingresses.len(),
                routes_reused = routes.reused,
                routes_compiled = routes.compiled,
                resident_kib = resident_kib(),
                "configuration compiled"
            );
            return Some(compiled);
        } else if !changes.endpoints.is_empty() {
            let current = self.current.clone()?;
            let started = Instant::now();
            let changed = refresh_endpoints(&current, &self.store, &changes.endpoints);
            let backends = changed.len();
            // Walking the routes for what to say of endpoints (refused addresses, names that do
            // not resolve) is O(routes): only when some are involved.
            let refusals_involved = !self.endpoint_notes.is_empty()
                || changed
                    .iter()
                    .any(|b| b.with_endpoints(EndpointSet::has_notes));
            if backends > 0 {
                self.proxy.endpoints_changed(changed);
            }
            tracing::info!(
                backends,
                elapsed_us = started.elapsed().as_micros() as u64,
                "endpoints updated"
            );
            if refusals_involved && self.report_endpoint_notes(&current) {
                return Some(current);
            }
        }
        None
    }

    /// Logs each newly refused endpoint address once; true when the set changed.
    fn report_endpoint_notes(&mut self, compiled: &Compiled) -> bool {
        let current = compiled.endpoint_diagnostics();
        if current == self.endpoint_notes {
            return false;
        }
        for new in current.iter().filter(|d| !self.endpoint_notes.contains(d)) {
            tracing::warn!("{new}");
        }
        self.endpoint_notes = current;
        true
    }

    /// Everything the status writer turns into Events: the compile's diagnostics and the
    /// refused endpoint addresses.
    pub fn diagnostics_to_report(&self, compiled: &Compiled) -> Vec<Diagnostic> {
        let mut all = compiled.diagnostics.clone();
        all.extend(self.endpoint_notes.iter().cloned());
        all
    }

    /// Logs what is new in `compiled` and swaps it in.
    pub fn publish(&mut self, compiled: Arc<Compiled>) {
        let current: BTreeSet<String> = compiled
            .diagnostics
            .iter()
            .map(ToString::to_string)
            .collect();
        for new in current.difference(&self.diagnostics) {
            tracing::warn!("{new}");
        }
        if compiled.settings.worker_processes != self.worker_processes {
            tracing::warn!(
                "worker-processes changed in the ConfigMap; it applies at the next start"
            );
            self.worker_processes = compiled.settings.worker_processes;
        }
        if compiled.settings.max_worker_open_files != self.max_worker_open_files {
            tracing::warn!(
                "max-worker-open-files changed in the ConfigMap; it applies at the next start"
            );
            self.max_worker_open_files = compiled.settings.max_worker_open_files;
        }
        self.diagnostics = current;
        self.report_endpoint_notes(&compiled);
        self.next_certificate_event = compiled.certificates.next_expiry_event(unix_now());
        let names = names_to_resolve(&self.store, &compiled);
        self.store.retain_resolved(&names);
        self.names.set_ipv6(!compiled.settings.disable_ipv6_dns);
        self.names.want(&names);
        self.current = Some(compiled.clone());
        let source_errors =
            std::mem::take(&mut self.source_errors_pending).then(|| self.source_errors.clone());
        self.proxy.publish_with(compiled, source_errors);
    }

    /// The configuration last published.
    pub fn current(&self) -> Option<&Arc<Compiled>> {
        self.current.as_ref()
    }

    /// Time until a served certificate crosses `model::tls::EXPIRY_WARNING` or expires: the
    /// loops recompile then, so the warning (diagnostic, log, Event) comes without waiting
    /// for another change. `None`: nothing to wait for.
    pub fn certificate_check_in(&self) -> Option<Duration> {
        let at = self.next_certificate_event?;
        let now = unix_now();
        // One second past the moment, so the compile sees it as crossed.
        Some(Duration::from_secs(
            at.saturating_sub(now).unsigned_abs() + 1,
        ))
    }

    /// Files that could not be read or parsed: logged when new, shown on `/config` from the
    /// next `publish` or `act`, in the same call into the proxy as the change they came with.
    pub fn report_source_errors(&mut self, errors: Vec<String>) {
        for error in &errors {
            if !self.source_errors.contains(error) {
                tracing::warn!("{error}");
            }
        }
        if errors != self.source_errors {
            self.source_errors = errors;
            self.source_errors_pending = true;
        }
    }
}

/// This process's resident memory (VmRSS), in KiB; 0 where /proc does not say. The log lines
/// of the initial sync and of each compile carry it, so where configuration memory goes
/// (the Store, the compiled configuration) can be read from a running process's log.
pub(crate) fn resident_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Sleeps for `duration`, or forever when there is none (a `select!` branch that never fires).
pub(crate) async fn sleep_for(duration: Option<Duration>) {
    match duration {
        Some(duration) => tokio::time::sleep(duration).await,
        None => std::future::pending().await,
    }
}
