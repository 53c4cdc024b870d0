//! Metrics without sharing: each worker counts in its own plain (non-atomic) `Stats`, and the
//! admin server asks every worker for a snapshot at scrape time and sums them.
//!
//! ```text
//!  worker k: request ─▶ RefCell<Stats> (+1, no atomics) ◀─ snapshot request (mpsc + oneshot)
//!  admin:    GET /metrics ─▶ ask each worker ─▶ Σ snapshots + control-plane counters ─▶ text
//! ```
//!
//! The exposition text is written here directly instead of through `prometheus-client`: that
//! crate wants to own live metric objects (shared atomics, a lock around each label family)
//! that the hot path would update, which is exactly the cross-worker sharing we avoid; feeding
//! it a summed snapshot through a custom collector would only wrap the same dozen series in a
//! second data model. The Prometheus text format for counters, gauges and one histogram is
//! short and easy to audit.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use model::{Compiled, Route};

use crate::buffer::Place;
use crate::error::ErrorSource;
use crate::shared::Shared;

/// Upper bounds (seconds) of the request-duration histogram buckets.
pub(crate) const DURATION_BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// `(ingress "namespace/name", service, status)`; empty names for requests without a route.
pub(crate) type RequestLabels = (String, String, u16);

/// One worker's counters. Only that worker's thread touches it.
#[derive(Default)]
pub(crate) struct Stats {
    /// Keyed by the address of the route's `Arc`, which the entry keeps alive (so the address
    /// cannot be reused by another route while we count under it). Key 0: no route.
    by_route: HashMap<usize, RouteCounts, BuildHasherDefault<AddressHasher>>,
    /// Counts of routes from configurations that were replaced, by label.
    retired: BTreeMap<RequestLabels, u64>,
    duration: Histogram,
    errors: BTreeMap<(u16, ErrorSource), u64>,
    pub(crate) connect_errors: u64,
    pub(crate) retries: u64,
    pub(crate) open_connections: u64,
    pub(crate) limits: LimitCounts,
    pub(crate) bodies_buffered: BufferedCounts,
}

/// What the worker did about `max-worker-connections` and the open-files limit.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct LimitCounts {
    /// Idle keep-alive connections closed to make room for a new one.
    pub(crate) idle_closed: u64,
    /// Times accepting paused because every connection was busy.
    pub(crate) accept_paused: u64,
    /// Accepts and upstream connects that failed for want of a file descriptor.
    pub(crate) fd_exhausted: u64,
}

/// Request bodies read whole before an upstream was chosen, by where they were kept.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct BufferedCounts {
    pub(crate) memory: u64,
    pub(crate) file: u64,
}

/// What a worker hands to the admin server.
#[derive(Debug, Default, Clone)]
pub(crate) struct Snapshot {
    /// Client connections by protocol and state, counted when the snapshot is taken.
    pub(crate) connections: ConnectionCounts,
    pub(crate) requests: BTreeMap<RequestLabels, u64>,
    pub(crate) duration: Histogram,
    pub(crate) errors: BTreeMap<(u16, ErrorSource), u64>,
    pub(crate) connect_errors: u64,
    pub(crate) retries: u64,
    pub(crate) open_connections: u64,
    pub(crate) limits: LimitCounts,
    pub(crate) bodies_buffered: BufferedCounts,
}

/// Open client connections: `[protocol][state]`, protocol as [`PROTOCOLS`], state
/// `0` active (a request in flight), `1` idle.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnectionCounts(pub(crate) [[u64; 2]; 3]);

/// The `protocol` label values of `sluice_client_connections`.
pub(crate) const PROTOCOLS: [&str; 3] = ["http1", "https1", "h2"];

impl ConnectionCounts {
    /// Counts one connection; `protocol` indexes [`PROTOCOLS`].
    pub(crate) fn count(&mut self, protocol: usize, active: bool) {
        self.0[protocol][usize::from(!active)] += 1;
    }
}

#[derive(Debug, Default, Clone)]
pub(crate) struct Histogram {
    /// Per bucket, not cumulative; the last slot is `+Inf`.
    counts: [u64; DURATION_BUCKETS.len() + 1],
    sum: f64,
}

struct RouteCounts {
    route: Option<Arc<Route>>,
    /// Made once per route and worker; requests' log records share it.
    labels: Rc<RouteLabels>,
    /// Few distinct statuses per route: a short vector beats a map.
    statuses: Vec<(u16, u64)>,
}

/// Hashes a pointer-sized key with one multiplication; the keys are addresses, already unique.
#[derive(Default)]
pub(crate) struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

impl Stats {
    /// Counts one answered request under its route (or none) and status; returns the
    /// route's labels.
    pub(crate) fn request(&mut self, route: Option<&Arc<Route>>, status: u16) -> &Rc<RouteLabels> {
        let key = route.map_or(0, |r| Arc::as_ptr(r) as usize);
        let counts = self.by_route.entry(key).or_insert_with(|| RouteCounts {
            route: route.cloned(),
            labels: Rc::new(RouteLabels::of(route.map(|r| &**r))),
            statuses: Vec::new(),
        });
        match counts.statuses.iter_mut().find(|(s, _)| *s == status) {
            Some((_, n)) => *n += 1,
            None => counts.statuses.push((status, 1)),
        }
        &counts.labels
    }

    /// Counts a response the proxy produced itself (404, 502, 503, 504, 413, 431, ...), by
    /// whose fault it was.
    pub(crate) fn error(&mut self, status: u16, source: ErrorSource) {
        *self.errors.entry((status, source)).or_default() += 1;
    }

    pub(crate) fn body_buffered(&mut self, place: Place) {
        match place {
            Place::Memory => self.bodies_buffered.memory += 1,
            Place::File => self.bodies_buffered.file += 1,
        }
    }

    pub(crate) fn observe(&mut self, duration: Duration) {
        self.duration.observe(duration.as_secs_f64());
    }

    /// Folds the per-route counts into label-keyed ones, releasing the routes of old
    /// configurations. Called when the configuration may have changed.
    pub(crate) fn retire_routes(&mut self) {
        for (_, counts) in self.by_route.drain() {
            let labels = labels_of(counts.route.as_deref());
            for (status, n) in counts.statuses {
                *self
                    .retired
                    .entry((labels.0.clone(), labels.1.clone(), status))
                    .or_default() += n;
            }
        }
    }

    pub(crate) fn snapshot(&self) -> Snapshot {
        let mut requests = self.retired.clone();
        for counts in self.by_route.values() {
            let (ingress, service) = labels_of(counts.route.as_deref());
            for (status, n) in &counts.statuses {
                *requests
                    .entry((ingress.clone(), service.clone(), *status))
                    .or_default() += n;
            }
        }
        Snapshot {
            connections: ConnectionCounts::default(),
            requests,
            duration: self.duration.clone(),
            errors: self.errors.clone(),
            connect_errors: self.connect_errors,
            retries: self.retries,
            open_connections: self.open_connections,
            limits: self.limits,
            bodies_buffered: self.bodies_buffered,
        }
    }
}

/// What logs (and metric labels) say about a route, made once per route and worker.
#[derive(Debug, Default)]
pub(crate) struct RouteLabels {
    pub(crate) namespace: String,
    pub(crate) ingress: String,
    pub(crate) service: String,
    pub(crate) service_port: String,
    /// The rule's host and path as written.
    pub(crate) host: String,
    pub(crate) path: String,
    /// ingress-nginx's `$proxy_upstream_name`: `NAMESPACE-SERVICE-PORT`.
    pub(crate) upstream_name: String,
    /// `enable-access-log`.
    pub(crate) access_log: bool,
}

impl RouteLabels {
    fn of(route: Option<&Route>) -> RouteLabels {
        let Some(route) = route else {
            return RouteLabels {
                access_log: true,
                ..RouteLabels::default()
            };
        };
        let upstream_name = if route.service.is_empty() {
            String::new()
        } else {
            format!(
                "{}-{}-{}",
                route.ingress.namespace, route.service, route.site.service_port
            )
        };
        RouteLabels {
            namespace: route.ingress.namespace.clone(),
            ingress: route.ingress.name.clone(),
            service: route.service.clone(),
            service_port: route.site.service_port.clone(),
            host: route.site.host.clone(),
            path: route.site.path.clone(),
            upstream_name,
            access_log: route.policy.access_log,
        }
    }
}

fn labels_of(route: Option<&Route>) -> (String, String) {
    route.map_or_else(Default::default, |r| {
        (r.ingress.to_string(), r.service.clone())
    })
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        let bucket = DURATION_BUCKETS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(DURATION_BUCKETS.len());
        self.counts[bucket] += 1;
        self.sum += seconds;
    }

    fn add(&mut self, other: &Histogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts) {
            *mine += theirs;
        }
        self.sum += other.sum;
    }
}

impl Snapshot {
    pub(crate) fn add(&mut self, other: &Snapshot) {
        for (labels, n) in &other.requests {
            *self.requests.entry(labels.clone()).or_default() += n;
        }
        self.duration.add(&other.duration);
        for (key, n) in &other.errors {
            *self.errors.entry(*key).or_default() += n;
        }
        self.connect_errors += other.connect_errors;
        self.retries += other.retries;
        self.open_connections += other.open_connections;
        for (mine, theirs) in self.connections.0.iter_mut().zip(other.connections.0) {
            mine[0] += theirs[0];
            mine[1] += theirs[1];
        }
        self.limits.idle_closed += other.limits.idle_closed;
        self.limits.accept_paused += other.limits.accept_paused;
        self.limits.fd_exhausted += other.limits.fd_exhausted;
        self.bodies_buffered.memory += other.bodies_buffered.memory;
        self.bodies_buffered.file += other.bodies_buffered.file;
    }
}

/// The Prometheus text exposition (format 0.0.4) of everything we count.
pub(crate) fn render(total: &Snapshot, shared: &Shared, workers: usize) -> String {
    let mut out = String::with_capacity(4096);
    let config = shared.config.load_full();

    family(
        &mut out,
        "sluice_requests_total",
        "counter",
        "Requests answered, by Ingress (namespace/name), Service and status code.",
    );
    for ((ingress, service, status), n) in &total.requests {
        let _ = writeln!(
            out,
            "sluice_requests_total{{ingress=\"{}\",service=\"{}\",status=\"{status}\"}} {n}",
            Escaped(ingress),
            Escaped(service)
        );
    }

    family(
        &mut out,
        "sluice_request_duration_seconds",
        "histogram",
        "Time from receiving a request head to the end of its response body.",
    );
    let mut cumulative = 0;
    for (bound, n) in DURATION_BUCKETS.iter().zip(total.duration.counts) {
        cumulative += n;
        let _ = writeln!(
            out,
            "sluice_request_duration_seconds_bucket{{le=\"{bound}\"}} {cumulative}"
        );
    }
    cumulative += total.duration.counts[DURATION_BUCKETS.len()];
    let _ = writeln!(
        out,
        "sluice_request_duration_seconds_bucket{{le=\"+Inf\"}} {cumulative}"
    );
    let _ = writeln!(
        out,
        "sluice_request_duration_seconds_sum {}",
        total.duration.sum
    );
    let _ = writeln!(out, "sluice_request_duration_seconds_count {cumulative}");

    family(&mut out, "sluice_error_responses_total", "counter", "Responses the proxy generated itself, by status (400, 404 no route, 408, 413, 431, 502, 503, 504, ...) and whose fault they were (source: client, upstream, proxy).");
    for ((status, source), n) in &total.errors {
        let source = source.as_str();
        let _ = writeln!(
            out,
            "sluice_error_responses_total{{status=\"{status}\",source=\"{source}\"}} {n}"
        );
    }

    single(
        &mut out,
        "sluice_upstream_connect_errors_total",
        "counter",
        "Failed or timed-out connection attempts to endpoints.",
        total.connect_errors as f64,
    );
    single(
        &mut out,
        "sluice_upstream_retries_total",
        "counter",
        "Requests sent again, to another endpoint or on a fresh connection.",
        total.retries as f64,
    );
    family(
        &mut out,
        "sluice_request_bodies_buffered_total",
        "counter",
        "Request bodies read whole before an upstream was chosen (proxy-request-buffering), by where they were kept (to: memory, or file when larger than client-body-buffer-size).",
    );
    let buffered = total.bodies_buffered;
    let _ = writeln!(
        out,
        "sluice_request_bodies_buffered_total{{to=\"memory\"}} {}",
        buffered.memory
    );
    let _ = writeln!(
        out,
        "sluice_request_bodies_buffered_total{{to=\"file\"}} {}",
        buffered.file
    );
    single(
        &mut out,
        "sluice_client_connections_open",
        "gauge",
        "Client connections currently open.",
        total.open_connections as f64,
    );
    family(
        &mut out,
        "sluice_client_connections",
        "gauge",
        "Client connections open now, by protocol (http1, https1, h2) and state (active: a request in flight; idle: kept alive between requests).",
    );
    for (protocol, states) in PROTOCOLS.iter().zip(total.connections.0) {
        for (state, n) in ["active", "idle"].iter().zip(states) {
            let _ = writeln!(
                out,
                "sluice_client_connections{{protocol=\"{protocol}\",state=\"{state}\"}} {n}"
            );
        }
    }
    process_metrics(&mut out);
    single(
        &mut out,
        "sluice_client_connections_closed_idle_at_limit_total",
        "counter",
        "Idle keep-alive client connections closed to make room at max-worker-connections.",
        total.limits.idle_closed as f64,
    );
    single(
        &mut out,
        "sluice_accept_paused_total",
        "counter",
        "Times a worker stopped accepting because all of its max-worker-connections were busy.",
        total.limits.accept_paused as f64,
    );
    single(
        &mut out,
        "sluice_open_files_exhausted_total",
        "counter",
        "Accepts and upstream connects that failed because the process was out of file descriptors (EMFILE/ENFILE).",
        total.limits.fd_exhausted as f64,
    );
    single(
        &mut out,
        "sluice_tunnels_closed_at_shutdown_total",
        "counter",
        "Upgraded connections (WebSocket) still open when worker-shutdown-timeout ended, closed.",
        shared.tunnels_closed_at_shutdown.load(Ordering::Relaxed) as f64,
    );
    single(
        &mut out,
        "sluice_access_log_lines_dropped_total",
        "counter",
        "Access log lines dropped because the output (stdout or --access-log-path) was slower than traffic; workers never wait for it.",
        shared.access_log.dropped.load(Ordering::Relaxed) as f64,
    );
    single(
        &mut out,
        "sluice_otel_spans_dropped_total",
        "counter",
        "Spans dropped because the export queue was full (otel-max-queuesize) or the export to otlp-collector-host failed; workers never wait for it.",
        shared.spans.dropped.load(Ordering::Relaxed) as f64,
    );
    single(
        &mut out,
        "sluice_config_swaps_total",
        "counter",
        "Configurations published.",
        shared.config_swaps.load(Ordering::Relaxed) as f64,
    );
    single(
        &mut out,
        "sluice_config_last_swap_timestamp_seconds",
        "gauge",
        "Unix time of the last configuration publish.",
        shared.last_swap_unix_millis.load(Ordering::Relaxed) as f64 / 1000.0,
    );
    single(
        &mut out,
        "sluice_endpoint_swaps_total",
        "counter",
        "Endpoint changes applied in place (the fast path).",
        shared.endpoint_swaps.load(Ordering::Relaxed) as f64,
    );
    single(
        &mut out,
        "sluice_ready",
        "gauge",
        "1 once a configuration has been published, 0 again once shutting down.",
        f64::from(u8::from(shared.is_ready())),
    );
    family(
        &mut out,
        "sluice_config_diagnostics",
        "gauge",
        "Diagnostics of the current configuration, by kind of object and severity (error: left out or refused; unsupported: ignored input; difference: served unlike ingress-nginx; notice: an ingress-nginx trap). Details in /config and the log.",
    );
    if let Some(config) = &config {
        let mut by_kind = std::collections::BTreeMap::<(&str, &str), usize>::new();
        for diagnostic in &config.diagnostics {
            let key = (
                diagnostic.object.kind.as_str(),
                diagnostic.severity.as_str(),
            );
            *by_kind.entry(key).or_default() += 1;
        }
        for ((kind, severity), n) in by_kind {
            let _ = writeln!(
                out,
                "sluice_config_diagnostics{{kind=\"{kind}\",severity=\"{severity}\"}} {n}"
            );
        }
    }
    single(
        &mut out,
        "sluice_config_source_errors",
        "gauge",
        "Source documents that could not be used (their last good version is kept).",
        shared.source_errors().len() as f64,
    );
    single(
        &mut out,
        "sluice_workers",
        "gauge",
        "Worker threads serving traffic.",
        workers as f64,
    );

    family(
        &mut out,
        "sluice_backend_endpoints",
        "gauge",
        "Endpoints per backend in the current configuration, by state (ready, terminating; refused: addresses of the node itself left out in Kubernetes mode).",
    );
    if let Some(config) = &config {
        backend_endpoints(&mut out, config);
    }
    out
}

fn backend_endpoints(out: &mut String, config: &Compiled) {
    for (key, backend) in &config.backends {
        let key = key.to_string();
        backend.with_endpoints(|set| {
            for (state, n) in [
                ("ready", set.ready.len()),
                ("terminating", set.terminating.len()),
                ("refused", set.refused.len()),
            ] {
                // Refused addresses (Kubernetes mode, see model::NodeLocalEndpoints) are rare:
                // their series exists only while there are some.
                if state == "refused" && n == 0 {
                    continue;
                }
                let _ = writeln!(
                    out,
                    "sluice_backend_endpoints{{backend=\"{}\",state=\"{state}\"}} {n}",
                    Escaped(&key)
                );
            }
        });
    }
}

/// The standard `process_*` families (Prometheus client libraries' process collector, which
/// ingress-nginx's Go exporter has too), from /proc/self.
fn process_metrics(out: &mut String) {
    let page = page_size();
    if let Ok(statm) = std::fs::read_to_string("/proc/self/statm") {
        let mut fields = statm
            .split_whitespace()
            .map(|f| f.parse::<u64>().unwrap_or(0));
        let (virtual_pages, resident_pages) = (fields.next(), fields.next());
        if let (Some(virtual_pages), Some(resident_pages)) = (virtual_pages, resident_pages) {
            single(
                out,
                "process_resident_memory_bytes",
                "gauge",
                "Resident memory size in bytes.",
                (resident_pages * page) as f64,
            );
            single(
                out,
                "process_virtual_memory_bytes",
                "gauge",
                "Virtual memory size in bytes.",
                (virtual_pages * page) as f64,
            );
        }
    }
    if let Ok(entries) = std::fs::read_dir("/proc/self/fd") {
        single(
            out,
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            entries.count() as f64,
        );
    }
    single(
        out,
        "process_max_fds",
        "gauge",
        "Maximum number of open file descriptors (the soft limit).",
        crate::fds::open_files_limit() as f64,
    );
}

fn page_size() -> u64 {
    rustix::param::page_size() as u64
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn single(out: &mut String, name: &str, kind: &str, help: &str, value: f64) {
    family(out, name, kind, help);
    let _ = writeln!(out, "{name} {value}");
}

/// A label value with `\`, `"` and newlines escaped, as the text format requires.
struct Escaped<'a>(&'a str);

impl std::fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for c in self.0.chars() {
            match c {
                '\\' => f.write_str("\\\\")?,
                '"' => f.write_str("\\\"")?,
                '\n' => f.write_str("\\n")?,
                c => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{Backend, NamespacedName};

    fn route(name: &str) -> Arc<Route> {
        Arc::new(Route {
            ingress: NamespacedName::new("default", name),
            service: format!("{name}-svc"),
            backend: Arc::new(Backend::unresolved()),
            policy: Default::default(),
            site: Default::default(),
        })
    }

    #[test]
    fn counts_survive_retiring_routes_and_sum_across_workers() {
        let web = route("web");
        let mut a = Stats::default();
        a.request(Some(&web), 200);
        a.request(Some(&web), 200);
        a.request(None, 404);
        a.retire_routes();
        a.request(Some(&web), 200);
        let mut b = Stats::default();
        b.request(Some(&route("web")), 200);
        b.observe(Duration::from_millis(3));
        b.error(404, ErrorSource::Client);

        let mut total = Snapshot::default();
        total.add(&a.snapshot());
        total.add(&b.snapshot());
        let key = ("default/web".to_owned(), "web-svc".to_owned(), 200);
        assert_eq!(total.requests[&key], 4);
        assert_eq!(total.requests[&(String::new(), String::new(), 404)], 1);
        assert_eq!(total.errors[&(404, ErrorSource::Client)], 1);
        assert_eq!(total.duration.counts[3], 1);
    }

    #[test]
    fn the_text_format_is_cumulative_and_escaped() {
        let shared = Shared::new(&crate::access_log::AccessLogOutput::Stdout).unwrap();
        let mut stats = Stats::default();
        let odd = Arc::new(Route {
            ingress: NamespacedName::new("ns", "a\"b"),
            service: "s".into(),
            backend: Arc::new(Backend::unresolved()),
            policy: Default::default(),
            site: Default::default(),
        });
        stats.request(Some(&odd), 502);
        stats.observe(Duration::from_millis(1));
        stats.observe(Duration::from_secs(100));
        let text = render(&stats.snapshot(), &shared, 2);
        assert!(
            text.contains(r#"sluice_requests_total{ingress="ns/a\"b",service="s",status="502"} 1"#),
            "{text}"
        );
        assert!(
            text.contains("sluice_request_duration_seconds_bucket{le=\"0.001\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("sluice_request_duration_seconds_bucket{le=\"60\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("sluice_request_duration_seconds_bucket{le=\"+Inf\"} 2"),
            "{text}"
        );
        assert!(text.contains("sluice_ready 0"), "{text}");
        assert!(text.contains("sluice_workers 2"), "{text}");
    }
}
