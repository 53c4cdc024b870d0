//! ingress-nginx's families: per request (grouped by route), per controller (configuration,
//! reloads, leader, certificates) and the Ingresses whose Service is gone.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::Ordering;

use model::{Compiled, Route};

use super::text::{family, Escaped, NGINX};
use crate::metrics::{Bounds, Buckets, Series, Snapshot, METHODS};
use crate::shared::Shared;
use crate::MetricOptions;

/// ingress-nginx's per-request families. Requests no Ingress rule matched are left out, as
/// ingress-nginx leaves out hosts no Ingress defines (its `--metrics-per-undefined-host`
/// default); `sluice_requests_total` counts them. One function (~100 lines): the families
/// share one pass that groups the routes' series by label set.
pub(super) fn request_families(
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
pub(super) fn histograms(
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
pub(super) fn controller_families(
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
pub(super) fn certificate_families(out: &mut String, shared: &Shared, config: &Compiled) {
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
pub(super) fn orphan_ingresses(out: &mut String, config: &Compiled, controller: &str) {
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
