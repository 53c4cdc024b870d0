//! What /proc/self says about the process, under ingress-nginx's `nginx_process_*` names and
//! the Prometheus client's standard `process_*` names.

use std::fmt::Write;

use super::text::{family, single, NGINX};
use crate::metrics::Snapshot;

/// What /proc says about this process.
#[derive(Default)]
pub(super) struct ProcessStats {
    resident_bytes: Option<u64>,
    virtual_bytes: Option<u64>,
    cpu_seconds: Option<f64>,
    start_time_seconds: Option<f64>,
    read_bytes: Option<u64>,
    write_bytes: Option<u64>,
    open_fds: Option<u64>,
}

impl ProcessStats {
    pub(super) fn read() -> ProcessStats {
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
pub(super) fn nginx_process_families(
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
pub(super) struct ProcessFamily {
    nginx: Option<&'static str>,
    standard: Option<&'static str>,
    kind: &'static str,
    help: &'static str,
    value: fn(&ProcessStats) -> Option<f64>,
}

pub(super) const PROCESS_FAMILIES: [ProcessFamily; 8] = [
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
pub(super) fn process_families(out: &mut String, process: &ProcessStats) {
    for family_of in PROCESS_FAMILIES {
        if let (Some(name), Some(value)) = (family_of.standard, (family_of.value)(process)) {
            single(out, name, family_of.kind, family_of.help, value);
        }
    }
}
