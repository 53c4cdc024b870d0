//! Sluice's own families (`sluice_*`): what ingress-nginx has no words for (swaps,
//! diagnostics, limits, endpoints per backend, TCP/UDP services).

use std::fmt::Write;
use std::sync::atomic::Ordering;

use model::Compiled;

use super::text::{family, single, Escaped};
use crate::metrics::{Snapshot, LOOP_LAG_BOUNDS, PROTOCOLS};
use crate::shared::Shared;

/// Sluice's own families, in the order `/metrics` lists them (~235 lines: one family a
/// block, its HELP text next to its values, so the exposition reads like its output).
pub(super) fn sluice_families(
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
    family(
        out,
        "sluice_auth_requests_total",
        "counter",
        "Requests of routes with external auth (auth-url), by how the auth server's answer was found (miss: a sub-request was sent; hit: the auth cache held it; shared: another request's sub-request with the same cache key was in flight and its answer was used).",
    );
    let auth = total.auth;
    for (result, n) in [
        ("miss", auth.misses),
        ("hit", auth.hits),
        ("shared", auth.shared),
    ] {
        let _ = writeln!(out, "sluice_auth_requests_total{{result=\"{result}\"}} {n}");
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
    family(
        out,
        "sluice_worker_loop_lag_seconds",
        "histogram",
        "How late each worker ran a timer due every 100 ms, all workers together: time its thread spent on other work in one go (a burst of TLS handshakes, a long poll) or the machine stalled it. Requests on that worker waited as long.",
    );
    let mut cumulative = 0;
    let counts = total.loop_lag.counts.iter().chain(std::iter::repeat(&0));
    for (bound, n) in LOOP_LAG_BOUNDS.iter().zip(counts) {
        cumulative += n;
        let le = if bound.is_infinite() {
            "+Inf".to_owned()
        } else {
            bound.to_string()
        };
        let _ = writeln!(
            out,
            "sluice_worker_loop_lag_seconds_bucket{{le=\"{le}\"}} {cumulative}"
        );
    }
    let _ = writeln!(
        out,
        "sluice_worker_loop_lag_seconds_sum {}",
        total.loop_lag.sum
    );
    let _ = writeln!(out, "sluice_worker_loop_lag_seconds_count {cumulative}");
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
        "sluice_limited_requests_total",
        "counter",
        "Requests refused by a route's limits (ingress-nginx counts them only under their status), by kind (requests: limit-rps or limit-rpm, answered limit-req-status-code; connections: limit-connections, answered limit-conn-status-code). One count for all workers.",
    );
    let zones = &shared.limits;
    for (kind, n) in [
        ("requests", &zones.limited_requests),
        ("connections", &zones.limited_connections),
    ] {
        let n = n.load(Ordering::Relaxed);
        let _ = writeln!(out, "sluice_limited_requests_total{{kind=\"{kind}\"}} {n}");
    }
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
        "sluice_config_freed_total",
        "counter",
        "Replaced configurations freed on the reclaim thread once nothing held them (a request or connection still on an old configuration holds it until it ends).",
        shared.reclaimer.freed() as f64,
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

pub(super) fn backend_endpoints(out: &mut String, config: &Compiled) {
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
pub(super) fn stream_services(
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
