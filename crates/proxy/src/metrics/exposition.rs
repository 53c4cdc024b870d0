//! The Prometheus text exposition (format 0.0.4) of a summed [`Snapshot`] and the shared
//! state: ingress-nginx's families (so its Grafana dashboards and alerts work unchanged), then
//! Sluice's own, which say what ingress-nginx has no words for (swaps, diagnostics, limits).
//!
//! ```text
//!  Snapshot.series ─▶ nginx_ingress_controller_{requests, request_duration_seconds, ...}
//!  Shared (config, swaps, leader, identity) ─▶ nginx_ingress_controller_{config_*, ssl_*, ...}
//!  /proc/self ─▶ nginx_ingress_controller_nginx_process_* and process_*
//!  everything ─▶ sluice_*
//! ```
//! ingress-nginx's constant labels `controller_namespace`, `controller_class` and
//! `controller_pod` come from [`crate::MetricIdentity`].

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::Ordering;

use model::{Compiled, Route};

use super::{Bounds, Buckets, Series, Snapshot, METHODS, PROTOCOLS};
use crate::shared::Shared;
use crate::MetricOptions;

const NGINX: &str = "nginx_ingress_controller";

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

/// ingress-nginx's per-request families. Requests no Ingress rule matched are left out, as
/// ingress-nginx leaves out hosts no Ingress defines (its `--metrics-per-undefined-host`
/// default); `sluice_requests_total` counts them. One function (~100 lines): the families
/// share one pass that groups the routes' series by label set.
fn request_families(
    out: &mut String,
    total: &Snapshot,
    controller: &str,
    options: &MetricOptions,
    bounds: &Bounds,
) {
    // With --report-status-classes or without --metrics-per-host, several series share one
    // label set: they are summed under it.
    let mut by_labels = BTreeMap::<String, Series>::new();
    for ((route, method, status), series) in &total.series {
        if route.ingress.is_empty() {
            continue;
        }
        let host = if options.per_host {
            format!("host=\"{}\",", Escaped(&route.host))
        } else {
            String::new()
        };
        let status = if options.status_classes {
            format!("{}xx", status / 100)
        } else {
            status.to_string()
        };
        let labels = format!(
            "canary=\"{}\",{controller},{host}ingress=\"{}\",method=\"{}\",namespace=\"{}\",path=\"{}\",service=\"{}\",status=\"{status}\"",
            Escaped(&route.canary),
            Escaped(&route.ingress),
            METHODS[usize::from(*method)],
            Escaped(&route.namespace),
            Escaped(&route.path),
            Escaped(&route.service),
        );
        by_labels.entry(labels).or_default().add(series);
    }
    let routed: Vec<(String, &Series)> = by_labels.iter().map(|(l, s)| (l.clone(), s)).collect();

    // `--exclude-socket-metrics`: ingress-nginx neither exports nor computes them.
    let exported = |name: &str| !options.excluded.iter().any(|e| e == name);
    if exported("requests") {
        family(
            out,
            &format!("{NGINX}_requests"),
            "counter",
            "The total number of client requests",
        );
        for (labels, series) in &routed {
            let _ = writeln!(out, "{NGINX}_requests{{{labels}}} {}", series.requests);
        }
    }
    let histogram_families: [HistogramFamily; 7] = [
        (
            "request_duration_seconds",
            "The request processing time in seconds (from the request head's first byte to the response's last byte)",
            &bounds.time,
            |s| &s.request_time,
        ),
        (
            "response_duration_seconds",
            "The time spent on receiving the response from the upstream server (the last attempt, from its start)",
            &bounds.time,
            |s| &s.upstream_response_time,
        ),
        (
            "connect_duration_seconds",
            "The time spent on establishing a connection with the upstream server (0 for a pooled connection)",
            &bounds.time,
            |s| &s.upstream_connect_time,
        ),
        (
            "header_duration_seconds",
            "The time spent on receiving first header from the upstream server",
            &bounds.time,
            |s| &s.upstream_header_time,
        ),
        (
            "request_size",
            "The request length (including request line, header, and request body)",
            &bounds.length,
            |s| &s.request_size,
        ),
        (
            "response_size",
            "The response length (including status line, header, and response body)",
            &bounds.length,
            |s| &s.response_size,
        ),
        (
            "bytes_sent",
            "DEPRECATED The number of bytes sent to a client (use response_size)",
            &bounds.size,
            |s| &s.bytes_sent,
        ),
    ];
    for (name, help, bounds, pick) in histogram_families {
        if exported(name) {
            histograms(out, &routed, name, help, bounds, pick);
        }
    }
}

/// A request histogram family: name, help, bounds, and the series' histogram.
type HistogramFamily<'b> = (
    &'static str,
    &'static str,
    &'b [f64],
    fn(&Series) -> &Buckets,
);

/// One histogram family: for each series, cumulative `_bucket` lines, `_sum` and `_count`.
fn histograms(
    out: &mut String,
    routed: &[(String, &Series)],
    name: &str,
    help: &str,
    bounds: &[f64],
    pick: fn(&Series) -> &Buckets,
) {
    family(out, &format!("{NGINX}_{name}"), "histogram", help);
    for (labels, series) in routed {
        let buckets = pick(series);
        let mut cumulative = 0;
        // A histogram never observed has no counts yet: all its buckets are 0.
        let counts = buckets.counts.iter().chain(std::iter::repeat(&0));
        for (bound, n) in bounds.iter().zip(counts) {
            cumulative += n;
            let _ = if bound.is_infinite() {
                writeln!(
                    out,
                    "{NGINX}_{name}_bucket{{{labels},le=\"+Inf\"}} {cumulative}"
                )
            } else {
                writeln!(
                    out,
                    "{NGINX}_{name}_bucket{{{labels},le=\"{bound}\"}} {cumulative}"
                )
            };
        }
        let _ = writeln!(out, "{NGINX}_{name}_sum{{{labels}}} {}", buckets.sum);
        let _ = writeln!(out, "{NGINX}_{name}_count{{{labels}}} {cumulative}");
    }
}

/// ingress-nginx's controller families. Nothing reloads: a configuration swap is what
/// ingress-nginx calls a successful reload, and none ever fails (a broken Ingress is a
/// diagnostic; the rest is swapped in). One family a block, in `/metrics` order (~85 lines).
fn controller_families(
    out: &mut String,
    shared: &Shared,
    config: Option<&Compiled>,
    controller: &str,
) {
    let swaps = shared.config_swaps.load(Ordering::Relaxed);
    let last_swap = shared.last_swap_unix_millis.load(Ordering::Relaxed) / 1000;
    family(
        out,
        &format!("{NGINX}_build_info"),
        "gauge",
        "A metric with a constant '1' labeled with information about the build.",
    );
    let _ = writeln!(
        out,
        "{NGINX}_build_info{{build=\"sluice\",{controller},release=\"{}\",repository=\"sluice\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    family(
        out,
        &format!("{NGINX}_config_hash"),
        "gauge",
        "Running configuration hash actually running",
    );
    let _ = writeln!(
        out,
        "{NGINX}_config_hash{{{controller}}} {}",
        shared.config_hash() as f64
    );
    family(
        out,
        &format!("{NGINX}_config_last_reload_successful"),
        "gauge",
        "Whether the last configuration reload attempt was successful (Sluice swaps configurations in memory and never fails one: 1 once the first is published)",
    );
    let _ = writeln!(
        out,
        "{NGINX}_config_last_reload_successful{{{controller}}} {}",
        u8::from(config.is_some())
    );
    family(
        out,
        &format!("{NGINX}_config_last_reload_successful_timestamp_seconds"),
        "gauge",
        "Timestamp of the last successful configuration reload (swap).",
    );
    let _ = writeln!(
        out,
        "{NGINX}_config_last_reload_successful_timestamp_seconds{{{controller}}} {last_swap}"
    );
    family(
        out,
        &format!("{NGINX}_success"),
        "counter",
        "Cumulative number of Ingress controller reload operations (configuration swaps)",
    );
    let _ = writeln!(out, "{NGINX}_success{{{controller}}} {swaps}");
    family(
        out,
        &format!("{NGINX}_errors"),
        "counter",
        "Cumulative number of Ingress controller errors during reload operations (always 0: see sluice_config_diagnostics)",
    );
    let _ = writeln!(out, "{NGINX}_errors{{{controller}}} 0");

    family(
        out,
        &format!("{NGINX}_leader_election_status"),
        "gauge",
        "Gauge reporting status of the leader election, 0 indicates follower, 1 indicates leader. 'name' is the string used to identify the lease",
    );
    if let Some((name, leading)) = shared.leader() {
        let _ = writeln!(
            out,
            "{NGINX}_leader_election_status{{{controller},name=\"{}\"}} {}",
            Escaped(&name),
            u8::from(leading)
        );
    }

    let Some(config) = config else { return };
    certificate_families(out, shared, config);
    orphan_ingresses(out, config, controller);
}

/// `ssl_expire_time_seconds` and `ssl_certificate_info` per host served with a Secret's
/// certificate, with ingress-nginx's labels (`namespace` is the Secret's).
fn certificate_families(out: &mut String, shared: &Shared, config: &Compiled) {
    let class = Escaped(&shared.identity.class);
    let served: Vec<_> = config
        .certificates
        .sources()
        .iter()
        .filter_map(|(host, secret)| {
            let info = config.certificates.details().get(secret)?;
            let (namespace, name) = secret.split_once('/').unwrap_or(("", secret));
            let labels = format!(
                "class=\"{class}\",host=\"{}\",identifier=\"{}\",namespace=\"{}\",secret_name=\"{}\"",
                Escaped(host),
                Escaped(&info.identifier()),
                Escaped(namespace),
                Escaped(name)
            );
            Some((labels, info))
        })
        .collect();
    family(
        out,
        &format!("{NGINX}_ssl_expire_time_seconds"),
        "gauge",
        "Number of seconds since 1970 to the SSL Certificate expire. An example to check if this certificate will expire in 10 days is: \"nginx_ingress_controller_ssl_expire_time_seconds < (time() + (10 * 24 * 3600))\"",
    );
    for (labels, info) in &served {
        let _ = writeln!(
            out,
            "{NGINX}_ssl_expire_time_seconds{{{labels}}} {}",
            info.not_after
        );
    }
    family(
        out,
        &format!("{NGINX}_ssl_certificate_info"),
        "gauge",
        "Hold all labels associated to a certificate",
    );
    for (labels, info) in &served {
        let _ = writeln!(
            out,
            "{NGINX}_ssl_certificate_info{{{labels},issuer_common_name=\"{}\",issuer_organization=\"{}\",public_key_algorithm=\"{}\",serial_number=\"{}\"}} 1",
            Escaped(&info.issuer_common_name),
            Escaped(&info.issuer_organization),
            Escaped(&info.public_key_algorithm),
            Escaped(&info.serial_number)
        );
    }
}

/// ingress-nginx's `orphan_ingress`: 1 per Ingress with a path whose Service is missing
/// (`no-service`) or has no ready endpoint (`no-endpoint`).
fn orphan_ingresses(out: &mut String, config: &Compiled, controller: &str) {
    fn orphaned(route: &Route) -> Option<(&str, &str, &'static str)> {
        if route.service.is_empty() {
            return None; // a resource backend, or a redirect-only rule
        }
        if route.alternative_name().is_some() {
            // A canary's rule: its backend is the canary Ingress's, its labels the main's.
            return None;
        }
        let kind = if route.backend.key().is_none() {
            "no-service"
        } else if route.backend.with_endpoints(|set| set.ready.is_empty()) {
            "no-endpoint"
        } else {
            return None;
        };
        Some((&route.ingress.namespace, &route.ingress.name, kind))
    }
    let hosts = config.routes.hosts();
    let orphans: std::collections::BTreeSet<_> = hosts
        .iter()
        .flat_map(|(_, host)| host.paths.iter().map(|p| &*p.route))
        .chain(config.routes.default_backend().map(|r| &**r))
        .filter_map(orphaned)
        .collect();
    family(
        out,
        &format!("{NGINX}_orphan_ingress"),
        "gauge",
        "Gauge reporting status of ingress orphanity, 1 indicates orphaned ingress. 'namespace' is the string used to identify namespace of ingress, 'ingress' for ingress name and 'type' for 'no-service' or 'no-endpoint' of orphanity",
    );
    for (namespace, ingress, kind) in orphans {
        let _ = writeln!(
            out,
            "{NGINX}_orphan_ingress{{{controller},ingress=\"{}\",namespace=\"{}\",type=\"{kind}\"}} 1",
            Escaped(ingress),
            Escaped(namespace)
        );
    }
}

/// What /proc says about this process.
#[derive(Default)]
struct ProcessStats {
    resident_bytes: Option<u64>,
    virtual_bytes: Option<u64>,
    cpu_seconds: Option<f64>,
    start_time_seconds: Option<f64>,
    read_bytes: Option<u64>,
    write_bytes: Option<u64>,
    open_fds: Option<u64>,
}

impl ProcessStats {
    fn read() -> ProcessStats {
        let mut stats = ProcessStats::default();
        let page = rustix::param::page_size() as u64;
        if let Ok(statm) = std::fs::read_to_string("/proc/self/statm") {
            let mut fields = statm.split_whitespace().map(|f| f.parse::<u64>().ok());
            stats.virtual_bytes = fields.next().flatten().map(|p| p * page);
            stats.resident_bytes = fields.next().flatten().map(|p| p * page);
        }
        let ticks = rustix::param::clock_ticks_per_second() as f64;
        if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
            // Fields after the command (which may hold spaces), counted from `state` (3).
            if let Some((_, rest)) = stat.rsplit_once(')') {
                let fields: Vec<&str> = rest.split_whitespace().collect();
                let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<f64>().ok());
                if let (Some(user), Some(system)) = (field(14), field(15)) {
                    stats.cpu_seconds = Some((user + system) / ticks);
                }
                let boot = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix("btime "))
                        .and_then(|t| t.trim().parse::<f64>().ok())
                });
                if let (Some(start), Some(boot)) = (field(22), boot) {
                    stats.start_time_seconds = Some(boot + start / ticks);
                }
            }
        }
        if let Ok(io) = std::fs::read_to_string("/proc/self/io") {
            let value = |key: &str| {
                io.lines()
                    .find_map(|l| l.strip_prefix(key))
                    .and_then(|v| v.trim().parse::<u64>().ok())
            };
            stats.read_bytes = value("read_bytes:");
            stats.write_bytes = value("write_bytes:");
        }
        if let Ok(entries) = std::fs::read_dir("/proc/self/fd") {
            stats.open_fds = Some(entries.count() as u64);
        }
        stats
    }
}

/// ingress-nginx's view of the nginx processes (`nginx_process_*`): here, the one Sluice
/// process. Connection states are nginx's stub_status ones: `active` every open client
/// connection, `writing` those with a request in flight, `waiting` idle keep-alive ones,
/// `reading` 0 (a connection reading a request head counts as idle until it is complete).
fn nginx_process_families(
    out: &mut String,
    total: &Snapshot,
    process: &ProcessStats,
    controller: &str,
) {
    let prefix = format!("{NGINX}_nginx_process");
    let (mut busy, mut idle) = (0, 0);
    for [active, waiting] in total.connections.0 {
        busy += active;
        idle += waiting;
    }
    family(
        out,
        &format!("{prefix}_connections"),
        "gauge",
        "current number of client connections with state {active, reading, writing, waiting}",
    );
    for (state, n) in [
        ("active", busy + idle),
        ("reading", 0),
        ("writing", busy),
        ("waiting", idle),
    ] {
        let _ = writeln!(
            out,
            "{prefix}_connections{{{controller},state=\"{state}\"}} {n}"
        );
    }
    family(
        out,
        &format!("{prefix}_connections_total"),
        "counter",
        "total number of connections with state {accepted, handled}",
    );
    for state in ["accepted", "handled"] {
        let _ = writeln!(
            out,
            "{prefix}_connections_total{{{controller},state=\"{state}\"}} {}",
            total.accepted
        );
    }
    let requests: u64 = total.series.values().map(|s| s.requests).sum();
    family(
        out,
        &format!("{prefix}_requests_total"),
        "counter",
        "total number of client requests",
    );
    let _ = writeln!(out, "{prefix}_requests_total{{{controller}}} {requests}");
    family(
        out,
        &format!("{prefix}_num_procs"),
        "gauge",
        "number of processes",
    );
    let _ = writeln!(out, "{prefix}_num_procs{{{controller}}} 1");
    for family_of in PROCESS_FAMILIES {
        if let (Some(name), Some(value)) = (family_of.nginx, (family_of.value)(process)) {
            family(
                out,
                &format!("{prefix}_{name}"),
                family_of.kind,
                family_of.help,
            );
            let _ = writeln!(out, "{prefix}_{name}{{{controller}}} {value}");
        }
    }
}

/// One process statistic, under ingress-nginx's `nginx_process_*` name, the standard
/// `process_*` name, or both.
struct ProcessFamily {
    nginx: Option<&'static str>,
    standard: Option<&'static str>,
    kind: &'static str,
    help: &'static str,
    value: fn(&ProcessStats) -> Option<f64>,
}

const PROCESS_FAMILIES: [ProcessFamily; 8] = [
    ProcessFamily {
        nginx: Some("cpu_seconds_total"),
        standard: Some("process_cpu_seconds_total"),
        kind: "counter",
        help: "Total user and system CPU time spent in seconds.",
        value: |p| p.cpu_seconds,
    },
    ProcessFamily {
        nginx: Some("resident_memory_bytes"),
        standard: Some("process_resident_memory_bytes"),
        kind: "gauge",
        help: "Resident memory size in bytes.",
        value: |p| p.resident_bytes.map(|b| b as f64),
    },
    ProcessFamily {
        nginx: Some("virtual_memory_bytes"),
        standard: Some("process_virtual_memory_bytes"),
        kind: "gauge",
        help: "Virtual memory size in bytes.",
        value: |p| p.virtual_bytes.map(|b| b as f64),
    },
    ProcessFamily {
        nginx: Some("oldest_start_time_seconds"),
        standard: Some("process_start_time_seconds"),
        kind: "gauge",
        help: "Start time of the process since unix epoch in seconds.",
        value: |p| p.start_time_seconds,
    },
    ProcessFamily {
        nginx: Some("read_bytes_total"),
        standard: None,
        kind: "counter",
        help: "number of bytes read",
        value: |p| p.read_bytes.map(|b| b as f64),
    },
    ProcessFamily {
        nginx: Some("write_bytes_total"),
        standard: None,
        kind: "counter",
        help: "number of bytes written",
        value: |p| p.write_bytes.map(|b| b as f64),
    },
    ProcessFamily {
        nginx: None,
        standard: Some("process_open_fds"),
        kind: "gauge",
        help: "Number of open file descriptors.",
        value: |p| p.open_fds.map(|n| n as f64),
    },
    ProcessFamily {
        nginx: None,
        standard: Some("process_max_fds"),
        kind: "gauge",
        help: "Maximum number of open file descriptors (the soft limit).",
        value: |_| Some(crate::fds::open_files_limit() as f64),
    },
];

/// The standard `process_*` families (Prometheus client libraries' process collector, which
/// ingress-nginx's Go exporter has too).
fn process_families(out: &mut String, process: &ProcessStats) {
    for family_of in PROCESS_FAMILIES {
        if let (Some(name), Some(value)) = (family_of.standard, (family_of.value)(process)) {
            single(out, name, family_of.kind, family_of.help, value);
        }
    }
}

/// Sluice's own families, in the order `/metrics` lists them (~235 lines: one family a
/// block, its HELP text next to its values, so the exposition reads like its output).
fn sluice_families(
    out: &mut String,
    total: &Snapshot,
    shared: &Shared,
    config: Option<&Compiled>,
    workers: usize,
) {
    family(
        out,
        "sluice_requests_total",
        "counter",
        "Requests answered, by Ingress (namespace/name), Service and status code; requests no rule matched have empty names (ingress-nginx's families leave them out).",
    );
    let mut requests = std::collections::BTreeMap::<(String, &str, u16), u64>::new();
    for ((route, _, status), series) in &total.series {
        let ingress = if route.ingress.is_empty() {
            String::new()
        } else {
            format!("{}/{}", route.namespace, route.ingress)
        };
        *requests
            .entry((ingress, route.service.as_str(), *status))
            .or_default() += series.requests;
    }
    for ((ingress, service, status), n) in &requests {
        let _ = writeln!(
            out,
            "sluice_requests_total{{ingress=\"{}\",service=\"{}\",status=\"{status}\"}} {n}",
            Escaped(ingress),
            Escaped(service)
        );
    }

    family(out, "sluice_error_responses_total", "counter", "Responses the proxy generated itself, by status (400, 404 no route, 408, 413, 431, 502, 503, 504, ...) and whose fault they were (source: client, upstream, proxy).");
    for ((status, source), n) in &total.errors {
        let source = source.as_str();
        let _ = writeln!(
            out,
            "sluice_error_responses_total{{status=\"{status}\",source=\"{source}\"}} {n}"
        );
    }

    single(
        out,
        "sluice_upstream_connect_errors_total",
        "counter",
        "Failed or timed-out connection attempts to endpoints.",
        total.connect_errors as f64,
    );
    single(
        out,
        "sluice_upstream_retries_total",
        "counter",
        "Requests sent again, to another endpoint or on a fresh connection.",
        total.retries as f64,
    );
    family(
        out,
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
    family(
        out,
        "sluice_mirror_requests_total",
        "counter",
        "Copies of requests sent to a mirror-target, by outcome (sent: the mirror answered; failed: no endpoint, connect, timeout or the body dropped on the way; dropped: not sent, mirror-max-in-flight reached or the target expanded to no valid request target).",
    );
    let mirrors = total.mirrors;
    for (outcome, n) in [
        ("sent", mirrors.sent),
        ("failed", mirrors.failed),
        ("dropped", mirrors.dropped),
    ] {
        let _ = writeln!(
            out,
            "sluice_mirror_requests_total{{outcome=\"{outcome}\"}} {n}"
        );
    }
    single(
        out,
        "sluice_client_connections_open",
        "gauge",
        "Client connections currently open.",
        total.open_connections as f64,
    );
    family(
        out,
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
    single(
        out,
        "sluice_client_connections_closed_idle_at_limit_total",
        "counter",
        "Idle keep-alive client connections closed to make room at max-worker-connections.",
        total.limits.idle_closed as f64,
    );
    single(
        out,
        "sluice_accept_paused_total",
        "counter",
        "Times a worker stopped accepting because all of its max-worker-connections were busy.",
        total.limits.accept_paused as f64,
    );
    single(
        out,
        "sluice_open_files_exhausted_total",
        "counter",
        "Accepts and upstream connects that failed because the process was out of file descriptors (EMFILE/ENFILE).",
        total.limits.fd_exhausted as f64,
    );
    single(
        out,
        "sluice_proxy_protocol_refused_total",
        "counter",
        "Client connections closed because use-proxy-protocol is on and they did not start with a valid PROXY protocol header within client-header-timeout.",
        total.proxy_protocol_refused as f64,
    );
    family(
        out,
        "sluice_ssl_passthrough_connections_total",
        "counter",
        "TLS connections passed through undecrypted (ssl-passthrough), by result (passed: spliced to an endpoint; failed: no endpoint could be reached, closed; refused: the route's allow- or deny-list refused the client, or the route is refused, closed unspliced).",
    );
    for (result, n) in [
        ("passed", total.passthrough.passed),
        ("failed", total.passthrough.failed),
        ("refused", total.passthrough.refused),
    ] {
        let _ = writeln!(
            out,
            "sluice_ssl_passthrough_connections_total{{result=\"{result}\"}} {n}"
        );
    }
    stream_services(out, &total.streams);
    single(
        out,
        "sluice_tunnels_closed_at_shutdown_total",
        "counter",
        "Upgraded connections (WebSocket) still open when worker-shutdown-timeout ended, closed.",
        shared.tunnels_closed_at_shutdown.load(Ordering::Relaxed) as f64,
    );
    single(
        out,
        "sluice_access_log_lines_dropped_total",
        "counter",
        "Access log lines dropped because the output (stdout or --access-log-path) was slower than traffic; workers never wait for it.",
        shared.access_log.dropped.load(Ordering::Relaxed) as f64,
    );
    single(
        out,
        "sluice_otel_spans_dropped_total",
        "counter",
        "Spans dropped because the export queue was full (otel-max-queuesize) or the export to otlp-collector-host failed; workers never wait for it.",
        shared.spans.dropped.load(Ordering::Relaxed) as f64,
    );
    single(
        out,
        "sluice_config_swaps_total",
        "counter",
        "Configurations published.",
        shared.config_swaps.load(Ordering::Relaxed) as f64,
    );
    single(
        out,
        "sluice_config_last_swap_timestamp_seconds",
        "gauge",
        "Unix time of the last configuration publish.",
        shared.last_swap_unix_millis.load(Ordering::Relaxed) as f64 / 1000.0,
    );
    single(
        out,
        "sluice_endpoint_swaps_total",
        "counter",
        "Endpoint changes applied in place (the fast path).",
        shared.endpoint_swaps.load(Ordering::Relaxed) as f64,
    );
    single(
        out,
        "sluice_ready",
        "gauge",
        "1 once a configuration has been published, 0 again once shutting down.",
        f64::from(u8::from(shared.is_ready())),
    );
    family(
        out,
        "sluice_config_diagnostics",
        "gauge",
        "Diagnostics of the current configuration, by kind of object and severity (error: left out or refused; unsupported: ignored input; difference: served unlike ingress-nginx; notice: an ingress-nginx trap). Details in /config and the log.",
    );
    if let Some(config) = config {
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
        out,
        "sluice_config_source_errors",
        "gauge",
        "Source documents that could not be used (their last good version is kept).",
        shared.source_errors().len() as f64,
    );
    single(
        out,
        "sluice_workers",
        "gauge",
        "Worker threads serving traffic.",
        workers as f64,
    );

    family(
        out,
        "sluice_backend_endpoints",
        "gauge",
        "Endpoints per backend in the current configuration, by state (ready, terminating; refused: addresses of the node itself left out in Kubernetes mode).",
    );
    if let Some(config) = config {
        backend_endpoints(out, config);
    }
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

/// TCP services (`--tcp-services-configmap`) and UDP services, labelled by listen port and
/// ingress-nginx's upstream name (`tcp-NAMESPACE-SERVICE-PORT`, `udp-…`): both come from the
/// ConfigMap, never a client. One family a block, in `/metrics` order (~95 lines).
fn stream_services(
    out: &mut String,
    streams: &std::collections::BTreeMap<crate::metrics::StreamKey, crate::metrics::StreamCounts>,
) {
    type Read = fn(&crate::metrics::StreamCounts) -> u64;
    type Reasons = [(&'static str, Read); 3];
    struct Families {
        prefix: &'static str,
        names: [&'static str; 4],
        helps: [&'static str; 4],
        reasons: Reasons,
    }
    let tcp = Families {
        prefix: "tcp-",
        names: [
            "sluice_tcp_connections_total",
            "sluice_tcp_connections_active",
            "sluice_tcp_connections_failed_total",
            "sluice_tcp_bytes_total",
        ],
        helps: [
            "TCP service connections accepted.",
            "TCP service connections open now.",
            "TCP service connections closed without a byte passed, by reason (no_endpoint: none could be reached; proxy_protocol: no valid PROXY header with :PROXY; endpoint_removed: spliced, closed worker-shutdown-timeout after its endpoint left the Service).",
            "Bytes through TCP service connections, open ones included (received: from clients; sent: to clients).",
        ],
        reasons: [
            ("no_endpoint", |c| c.failed),
            ("proxy_protocol", |c| c.refused),
            ("endpoint_removed", |c| c.endpoint_removed),
        ],
    };
    let udp = Families {
        prefix: "udp-",
        names: [
            "sluice_udp_sessions_total",
            "sluice_udp_sessions_active",
            "sluice_udp_sessions_failed_total",
            "sluice_udp_bytes_total",
        ],
        helps: [
            "UDP service sessions started (a client's datagrams to one endpoint).",
            "UDP service sessions open now.",
            "UDP service datagrams or sessions that failed, by reason (no_endpoint: none to send to, or it refused (ICMP unreachable); limit: a new client's datagram dropped at max-worker-connections; endpoint_removed: a session moved on because its endpoint left the Service).",
            "Payload bytes through UDP service sessions, open ones included (received: from clients; sent: to clients).",
        ],
        reasons: [
            ("no_endpoint", |c| c.failed),
            ("limit", |c| c.refused),
            ("endpoint_removed", |c| c.endpoint_removed),
        ],
    };
    for families in [tcp, udp] {
        let ours: Vec<_> = streams
            .iter()
            .filter(|((_, upstream), _)| upstream.starts_with(families.prefix))
            .collect();
        if families.prefix == "udp-" && ours.is_empty() {
            // No UDP service: no empty families (the TCP ones stay, as they always were).
            continue;
        }
        let reads: [Read; 2] = [|c| c.accepted, |c| c.active];
        for (i, name) in families.names.iter().enumerate() {
            let kind = if i == 1 { "gauge" } else { "counter" };
            family(out, name, kind, families.helps[i]);
            for ((port, upstream), counts) in &ours {
                let labels = format!("port=\"{port}\",upstream=\"{}\"", Escaped(upstream));
                match i {
                    0 | 1 => {
                        let _ = writeln!(out, "{name}{{{labels}}} {}", reads[i](counts));
                    }
                    2 => {
                        for (reason, read) in families.reasons {
                            let _ = writeln!(
                                out,
                                "{name}{{{labels},reason=\"{reason}\"}} {}",
                                read(counts)
                            );
                        }
                    }
                    _ => {
                        for (direction, n) in [
                            ("received", counts.bytes_received),
                            ("sent", counts.bytes_sent),
                        ] {
                            let _ =
                                writeln!(out, "{name}{{{labels},direction=\"{direction}\"}} {n}");
                        }
                    }
                }
            }
        }
    }
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
