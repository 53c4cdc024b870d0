//! The status page: a person's view of what the proxy serves, at `/` on the loopback status
//! listener. Plain server-rendered HTML with a little inline CSS; no script and no external
//! asset (the response's Content-Security-Policy forbids both, should escaping ever miss).
//!
//! ```text
//!  GET / ─▶ (admin.rs) one view at a time ─▶ every worker's counters ─▶ Snapshot::by_ingress
//!        ─▶ Traffic::since(the previous view)    rates over the interval between two views
//!        ─▶ Page { current Compiled, source errors, swap history, traffic }
//!        ─▶ render() ─▶ HTML: traffic · hosts and paths · TCP and UDP services (if any) ·
//!                             endpoints by condition ·
//!                             certificates · diagnostics · source errors · swaps
//! ```
//! Hosts, paths, names, annotation values and diagnostics come from tenants: every value goes
//! through [`Html`]. Each table stops at [`ROWS_SHOWN`] rows (the rest is in `/config`), so a
//! cluster with ten thousand Ingresses gets a page of bounded size.

use std::collections::BTreeMap;
use std::fmt::{self, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use model::routes::HostRoutes;
use model::{Backend, Compiled, Diagnostic, EndpointSet, Route};

use crate::history::{Swap, SWAPS_KEPT};

/// Rows per table at most.
const ROWS_SHOWN: usize = 500;

/// Endpoint addresses listed in one cell at most.
const ADDRESSES_SHOWN: usize = 4;

/// Seconds between automatic reloads of the page (each reload is a view: rates follow it).
const REFRESH_SECONDS: u32 = 10;

/// Everything one view of the page shows.
#[derive(Debug)]
pub(crate) struct Page {
    pub(crate) now: SystemTime,
    pub(crate) ready: bool,
    pub(crate) terminating: bool,
    pub(crate) config: Option<Arc<Compiled>>,
    pub(crate) source_errors: Vec<String>,
    pub(crate) config_swaps_total: u64,
    pub(crate) endpoint_swaps_total: u64,
    /// Newest first, at most [`SWAPS_KEPT`].
    pub(crate) config_swaps: Vec<Swap>,
    pub(crate) endpoint_swaps: Vec<Swap>,
    pub(crate) traffic: Traffic,
    pub(crate) workers: usize,
    /// Workers that reported their counters in time for this view.
    pub(crate) workers_answered: usize,
    /// Unix seconds: when the certificate Sluice serves when nothing matches expires.
    pub(crate) fallback_not_after: Option<i64>,
}

/// Requests per Ingress: totals since start, and rates since the previous view.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Traffic {
    /// Time since the previous view; `None` on the first.
    pub(crate) interval: Option<Duration>,
    /// Busiest first.
    pub(crate) by_ingress: Vec<IngressTraffic>,
}

#[derive(Debug, PartialEq)]
pub(crate) struct IngressTraffic {
    /// `namespace/name`; empty for requests no route matched.
    pub(crate) ingress: String,
    pub(crate) requests: u64,
    pub(crate) server_errors: u64,
    /// Requests and 5xx per second since the previous view.
    pub(crate) rates: Option<(f64, f64)>,
}

/// Totals `(requests, 5xx)` by Ingress, as [`crate::metrics::Snapshot::by_ingress`] gives them.
pub(crate) type Totals = BTreeMap<String, (u64, u64)>;

impl Traffic {
    /// Rates from the counters of the previous view (taken `interval` ago) to `current`.
    /// A counter lower than before (a worker that missed one view) counts as no traffic.
    pub(crate) fn since(previous: Option<(Duration, &Totals)>, current: &Totals) -> Traffic {
        let interval = previous
            .map(|(interval, _)| interval)
            .filter(|interval| !interval.is_zero());
        let mut by_ingress: Vec<IngressTraffic> = current
            .iter()
            .map(|(ingress, &(requests, server_errors))| {
                let rates = previous.zip(interval).map(|((_, before), interval)| {
                    let (requests_before, errors_before) =
                        before.get(ingress).copied().unwrap_or_default();
                    let seconds = interval.as_secs_f64();
                    (
                        requests.saturating_sub(requests_before) as f64 / seconds,
                        server_errors.saturating_sub(errors_before) as f64 / seconds,
                    )
                });
                IngressTraffic {
                    ingress: ingress.clone(),
                    requests,
                    server_errors,
                    rates,
                }
            })
            .collect();
        by_ingress.sort_by(|a, b| {
            b.requests
                .cmp(&a.requests)
                .then_with(|| a.ingress.cmp(&b.ingress))
        });
        Traffic {
            interval,
            by_ingress,
        }
    }
}

/// The whole page.
pub(crate) fn render(page: &Page) -> String {
    let mut out = String::with_capacity(16 * 1024);
    // Writing to a String cannot fail.
    let _ = write_page(&mut out, page);
    out
}

fn write_page(out: &mut String, page: &Page) -> fmt::Result {
    let state = match (page.ready, page.terminating) {
        (_, true) => ("bad", "shutting down"),
        (true, _) => ("ok", "ready"),
        (false, _) => ("bad", "not ready: no configuration published yet"),
    };
    writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>Sluice status</title><style>{STYLE}</style></head><body>\n\
         <header><h1>Sluice status</h1><p><span class=\"state {}\">{}</span> · {} workers · \
         page of {} (reloads every {REFRESH_SECONDS} s)</p>\n\
         <nav><a href=\"#traffic\">Traffic</a><a href=\"#hosts\">Hosts and paths</a>\
         <a href=\"#endpoints\">Endpoints</a><a href=\"#certificates\">Certificates</a>\
         <a href=\"#diagnostics\">Diagnostics</a><a href=\"#swaps\">Swaps</a>\
         <a href=\"/config\">/config (JSON)</a></nav></header>",
        state.0,
        state.1,
        page.workers,
        Html(&httpdate::fmt_http_date(page.now)),
    )?;
    write_cards(out, page)?;
    write_traffic(out, page)?;
    match &page.config {
        Some(config) => {
            write_hosts(out, config)?;
            write_stream_services(out, config)?;
            write_endpoints(out, config)?;
            write_certificates(out, config, page)?;
            write_diagnostics(out, config)?;
        }
        None => out.push_str(
            "<section><p class=\"note\">No configuration has been published yet: \
             hosts, endpoints, certificates and diagnostics appear once it is.</p></section>\n",
        ),
    }
    write_source_errors(out, &page.source_errors)?;
    write_swaps(out, page)?;
    out.push_str("</body></html>\n");
    Ok(())
}

fn write_cards(out: &mut String, page: &Page) -> fmt::Result {
    let config = page.config.as_deref();
    let count = |f: fn(&Compiled) -> usize| config.map_or(0, f);
    let cards = [
        ("Ingresses", count(|c| c.ingresses.len())),
        ("hosts", count(|c| c.routes.hosts().len())),
        ("backends", count(|c| c.backends.len())),
        ("diagnostics", count(|c| c.diagnostics.len())),
        ("source errors", page.source_errors.len()),
    ];
    out.push_str("<div class=\"cards\">");
    for (what, n) in cards {
        write!(out, "<div class=\"card\"><b>{n}</b>{what}</div>")?;
    }
    writeln!(
        out,
        "<div class=\"card\"><b>{}</b>configuration swaps</div>\
         <div class=\"card\"><b>{}</b>endpoint swaps</div></div>",
        page.config_swaps_total, page.endpoint_swaps_total
    )
}

fn write_traffic(out: &mut String, page: &Page) -> fmt::Result {
    let traffic = &page.traffic;
    out.push_str("<section id=\"traffic\"><h2>Requests by Ingress</h2>\n<p class=\"note\">");
    match traffic.interval {
        Some(interval) => write!(
            out,
            "Rates over the {:.1} s since the previous view of this page; totals since start.",
            interval.as_secs_f64()
        )?,
        None => out.push_str(
            "First view since start: rates appear from the next view (totals since start).",
        ),
    }
    if page.workers_answered < page.workers {
        write!(
            out,
            " Only {} of {} workers reported in time: their requests are missing here.",
            page.workers_answered, page.workers
        )?;
    }
    out.push_str("</p>\n");
    if traffic.by_ingress.is_empty() {
        out.push_str("<p class=\"note\">No request answered yet.</p></section>\n");
        return Ok(());
    }
    table_head(
        out,
        &["Ingress", "requests/s", "5xx/s", "requests", "5xx"],
        &[1, 2, 3, 4],
    );
    for row in traffic.by_ingress.iter().take(ROWS_SHOWN) {
        out.push_str("<tr><td>");
        if row.ingress.is_empty() {
            out.push_str("<i>no route (404)</i>");
        } else {
            write!(out, "{}", Html(&row.ingress))?;
        }
        match row.rates {
            Some((requests, errors)) => write!(
                out,
                "</td><td class=\"num\">{requests:.1}</td><td class=\"num{}\">{errors:.1}</td>",
                if errors > 0.0 { " bad" } else { "" }
            )?,
            None => out.push_str("</td><td class=\"num\">–</td><td class=\"num\">–</td>"),
        }
        writeln!(
            out,
            "<td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            row.requests, row.server_errors
        )?;
    }
    table_end(out, traffic.by_ingress.len());
    out.push_str("</section>\n");
    Ok(())
}

fn write_hosts(out: &mut String, config: &Compiled) -> fmt::Result {
    out.push_str("<section id=\"hosts\"><h2>Hosts and paths</h2>\n");
    let hosts = config.routes.hosts();
    if hosts.is_empty() && config.routes.default_backend().is_none() {
        out.push_str("<p class=\"note\">No Ingress rule is served.</p></section>\n");
        return Ok(());
    }
    table_head(
        out,
        &[
            "Host",
            "Path",
            "Ingress",
            "Service:port",
            "Endpoints taking traffic",
        ],
        &[],
    );
    let mut rows = 0;
    for (host, routes) in &hosts {
        for path in &routes.paths {
            rows += 1;
            if rows > ROWS_SHOWN {
                continue;
            }
            write!(
                out,
                "<tr><td>{}{}</td><td><code>{}</code> <span class=\"note\">{:?}</span></td>",
                Html(&host.to_string()),
                host_flags(routes),
                Html(&path.written),
                path.kind,
            )?;
            write_route_cells(out, &path.route)?;
        }
        if let Some(root) = &routes.root {
            rows += 1;
            if rows <= ROWS_SHOWN {
                write!(
                    out,
                    "<tr><td>{}{}</td><td><i>unmatched paths</i> <span class=\"note\">root</span></td>",
                    Html(&host.to_string()),
                    host_flags(routes),
                )?;
                write_route_cells(out, root)?;
            }
        }
    }
    if let Some(route) = config.routes.host_default() {
        rows += 1;
        if rows <= ROWS_SHOWN {
            out.push_str("<tr><td><i>hosts with rules</i></td><td><i>unmatched paths</i></td>");
            write_route_cells(out, route)?;
        }
    }
    if let Some(route) = config.routes.default_backend() {
        rows += 1;
        if rows <= ROWS_SHOWN {
            out.push_str("<tr><td><i>any</i></td><td><i>default backend</i></td>");
            write_route_cells(out, route)?;
        }
    }
    if let Some(route) = config.routes.default_server() {
        rows += 1;
        if rows <= ROWS_SHOWN {
            out.push_str("<tr><td><i>other hosts</i></td><td><i>any path</i></td>");
            write_route_cells(out, route)?;
        }
    }
    table_end(out, rows);
    out.push_str("</section>\n");
    Ok(())
}

fn host_flags(routes: &HostRoutes) -> &'static str {
    match (routes.tls, routes.regex) {
        (true, true) => " <span class=\"tag\">TLS</span> <span class=\"tag\">regex</span>",
        (true, false) => " <span class=\"tag\">TLS</span>",
        (false, true) => " <span class=\"tag\">regex</span>",
        (false, false) => "",
    }
}

/// Ingress, Service:port and the endpoints that take the route's traffic now.
fn write_route_cells(out: &mut String, route: &Route) -> fmt::Result {
    if route.ingress.name.is_empty() {
        // Sluice's own 404 behind the ConfigMap's policy: no Ingress, no Service.
        out.push_str("<td><i>none</i></td><td><i>none</i></td><td>");
    } else {
        write!(
            out,
            "<td>{}</td><td>{}:{}</td><td>",
            Html(&route.ingress.to_string()),
            Html(&route.service),
            Html(&route.site.service_port)
        )?;
    }
    if route.not_found && route.ingress.name.is_empty() {
        // The host default and the default server: no Ingress, the ConfigMap's policy.
        out.push_str("none: answers 404 once the ConfigMap's policy lets the request through");
    } else if route.not_found {
        out.push_str("none: answers 404 once the Ingress's policy lets the request through");
    } else if route.backend.key().is_none() {
        out.push_str("<span class=\"bad\">unresolved: answers 503</span>");
    } else {
        route.backend.with_endpoints(|set| {
            if !set.ready.is_empty() {
                write_addresses(out, &set.ready)
            } else if !set.terminating.is_empty() {
                out.push_str("<span class=\"warn\">only terminating:</span> ");
                write_addresses(out, &set.terminating)
            } else {
                out.push_str("<span class=\"bad\">none: answers 503</span>");
                Ok(())
            }
        })?;
    }
    out.push_str("</td></tr>\n");
    Ok(())
}

/// `--tcp-services-configmap`'s and `--udp-services-configmap`'s ports, when there are any.
fn write_stream_services(out: &mut String, config: &Compiled) -> fmt::Result {
    for (kind, services) in [("TCP", &config.tcp_services), ("UDP", &config.udp_services)] {
        if services.is_empty() {
            continue;
        }
        let id = kind.to_ascii_lowercase();
        write!(
            out,
            "<section id=\"{id}-services\"><h2>{kind} services</h2>\n<p class=\"note\">Ports of \
             the {kind} services ConfigMap and the Service port each forwards to. A port that \
             could not be bound is listed under <code>tcp_service_errors</code> in \
             <a href=\"/config\">/config</a>.</p>\n"
        )?;
        table_head(
            out,
            &[
                "Port",
                "Service",
                "PROXY protocol",
                "ready",
                "serving and terminating",
                "refused",
            ],
            &[0],
        );
        let mut rows = 0;
        for (port, service) in services {
            rows += 1;
            if rows > ROWS_SHOWN {
                continue;
            }
            let proxy = match (service.decode_proxy_protocol, service.encode_proxy_protocol) {
                (true, true) => "from clients, to the upstream",
                (true, false) => "from clients",
                (false, true) => "to the upstream",
                (false, false) => "",
            };
            write!(
                out,
                "<tr><td class=\"num\">{port}</td><td>{}:{}</td><td>{proxy}</td>",
                Html(&service.service.to_string()),
                Html(&service.service_port)
            )?;
            write_endpoint_cells(out, &service.backend)?;
        }
        table_end(out, rows);
        out.push_str("</section>\n");
    }
    Ok(())
}

fn write_endpoints(out: &mut String, config: &Compiled) -> fmt::Result {
    out.push_str(
        "<section id=\"endpoints\"><h2>Endpoints by condition</h2>\n<p class=\"note\">\
         As the EndpointSlices say now. <b>ready</b> endpoints take traffic; <b>serving and \
         terminating</b> ones only while a backend has no ready one. The model keeps no other \
         condition: an endpoint that is not ready and not serving-while-terminating takes no \
         traffic and is not listed. <b>refused</b>: addresses of the node itself, left out in \
         Kubernetes mode.</p>\n",
    );
    if config.backends.is_empty() && config.service_upstreams.is_empty() {
        out.push_str("<p class=\"note\">No backend.</p></section>\n");
        return Ok(());
    }
    table_head(
        out,
        &["Backend", "ready", "serving and terminating", "refused"],
        &[],
    );
    let backends =
        config
            .backends
            .iter()
            .map(|(key, backend)| (key, backend, ""))
            .chain(config.service_upstreams.iter().map(|(key, backend)| {
                (key, backend, " <span class=\"tag\">service-upstream</span>")
            }));
    let mut rows = 0;
    for (key, backend, tag) in backends {
        rows += 1;
        if rows > ROWS_SHOWN {
            continue;
        }
        write!(out, "<tr><td>{}{tag}</td>", Html(&key.to_string()))?;
        write_endpoint_cells(out, backend)?;
    }
    table_end(out, rows);
    out.push_str("</section>\n");
    Ok(())
}

fn write_endpoint_cells(out: &mut String, backend: &Backend) -> fmt::Result {
    backend.with_endpoints(|set: &EndpointSet| {
        for list in [&set.ready, &set.terminating] {
            write!(out, "<td><b>{}</b> ", list.len())?;
            write_addresses(out, list)?;
            out.push_str("</td>");
        }
        write!(out, "<td>{}", set.refused.len())?;
        for refused in set.refused.iter().take(ADDRESSES_SHOWN) {
            write!(
                out,
                "<br><code>{}</code> <span class=\"note\">{}</span>",
                refused.address,
                Html(refused.reason)
            )?;
        }
        out.push_str("</td></tr>\n");
        Ok(())
    })
}

fn write_addresses(out: &mut String, addresses: &[SocketAddr]) -> fmt::Result {
    for (i, address) in addresses.iter().take(ADDRESSES_SHOWN).enumerate() {
        write!(
            out,
            "{}<code>{address}</code>",
            if i == 0 { "" } else { ", " }
        )?;
    }
    if addresses.len() > ADDRESSES_SHOWN {
        write!(out, " and {} more", addresses.len() - ADDRESSES_SHOWN)?;
    }
    Ok(())
}

fn write_certificates(out: &mut String, config: &Compiled, page: &Page) -> fmt::Result {
    out.push_str(
        "<section id=\"certificates\"><h2>Certificates</h2>\n<p class=\"note\">Which Secret \
         serves which host, and until when. An expired one, or one that expires within 14 \
         days, is also a diagnostic.</p>\n",
    );
    table_head(
        out,
        &["Host", "Secret", "issuer", "not after", "days left"],
        &[4],
    );
    let now = unix_seconds(page.now);
    let sources = config.certificates.sources();
    for (host, secret) in sources.iter().take(ROWS_SHOWN) {
        let info = config.certificates.details().get(secret);
        write!(out, "<tr><td>{}</td><td>{}</td>", Html(host), Html(secret))?;
        write_validity(
            out,
            info.map(|i| (i.issuer_common_name.as_str(), i.not_after)),
            now,
        )?;
    }
    // Served to clients whose SNI matches nothing when no default certificate is configured.
    if !sources.contains_key("*") {
        out.push_str(
            "<tr><td><i>no match, no default</i></td>\
             <td><i>Sluice's own, self-signed</i></td>",
        );
        write_validity(out, page.fallback_not_after.map(|n| ("", n)), now)?;
    }
    table_end(out, sources.len());
    out.push_str("</section>\n");
    Ok(())
}

/// Issuer, not-after and days left; `None` when the certificate could not be read.
fn write_validity(out: &mut String, validity: Option<(&str, i64)>, now: i64) -> fmt::Result {
    let Some((issuer, not_after)) = validity else {
        return writeln!(
            out,
            "<td colspan=\"3\" class=\"note\">not known: the certificate could not be read</td></tr>"
        );
    };
    let left = not_after - now;
    let days = left.div_euclid(86_400);
    let class = if left <= 0 {
        "num bad"
    } else if left < 14 * 86_400 {
        "num warn"
    } else {
        "num"
    };
    write!(
        out,
        "<td>{}</td><td class=\"when\">{}</td><td class=\"{class}\">",
        Html(issuer),
        Html(&model::tls::utc_text(not_after))
    )?;
    if left <= 0 {
        out.push_str("expired");
    } else {
        write!(out, "{days}")?;
    }
    writeln!(out, "</td></tr>")
}

fn unix_seconds(at: SystemTime) -> i64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn write_diagnostics(out: &mut String, config: &Compiled) -> fmt::Result {
    out.push_str("<section id=\"diagnostics\"><h2>Diagnostics</h2>\n");
    let refused = config.endpoint_diagnostics();
    let all: Vec<&Diagnostic> = config.diagnostics.iter().chain(&refused).collect();
    if all.is_empty() {
        out.push_str("<p class=\"note\">None: every object is served as written.</p></section>\n");
        return Ok(());
    }
    table_head(out, &["Severity", "Object", "Message"], &[]);
    for diagnostic in all.iter().take(ROWS_SHOWN) {
        let severity = diagnostic.severity.as_str();
        writeln!(
            out,
            "<tr><td><span class=\"sev sev-{severity}\">{severity}</span></td>\
             <td>{}</td><td>{}</td></tr>",
            Html(&diagnostic.object.to_string()),
            Html(&diagnostic.reason)
        )?;
    }
    table_end(out, all.len());
    out.push_str("</section>\n");
    Ok(())
}

fn write_source_errors(out: &mut String, errors: &[String]) -> fmt::Result {
    out.push_str(
        "<section id=\"source-errors\"><h2>Source errors</h2>\n<p class=\"note\">Documents \
         that could not be used; the last good version of each object is kept.</p>\n",
    );
    if errors.is_empty() {
        out.push_str("<p class=\"note\">None.</p></section>\n");
        return Ok(());
    }
    out.push_str("<ul class=\"errors\">");
    for error in errors.iter().take(ROWS_SHOWN) {
        write!(out, "<li>{}</li>", Html(error))?;
    }
    out.push_str("</ul>");
    if errors.len() > ROWS_SHOWN {
        write!(
            out,
            "<p class=\"note\">{} more in /config.</p>",
            errors.len() - ROWS_SHOWN
        )?;
    }
    out.push_str("</section>\n");
    Ok(())
}

fn write_swaps(out: &mut String, page: &Page) -> fmt::Result {
    out.push_str("<section id=\"swaps\"><h2>Recent swaps</h2>\n");
    let kinds = [
        (
            "Configuration swaps",
            "a new compiled configuration replaced the whole route table",
            page.config_swaps_total,
            &page.config_swaps,
        ),
        (
            "Endpoint swaps",
            "backends' endpoint sets replaced in place, without a compile",
            page.endpoint_swaps_total,
            &page.endpoint_swaps,
        ),
    ];
    for (title, what, total, swaps) in kinds {
        writeln!(
            out,
            "<h3>{title}</h3><p class=\"note\">{total} since start ({what}); the last \
             {SWAPS_KEPT} are kept.</p>"
        )?;
        if swaps.is_empty() {
            out.push_str("<p class=\"note\">None yet.</p>\n");
            continue;
        }
        table_head(out, &["When", "What changed"], &[]);
        for swap in swaps {
            writeln!(
                out,
                "<tr><td class=\"when\">{} <span class=\"note\">({})</span></td><td>{}</td></tr>",
                Html(&httpdate::fmt_http_date(swap.at)),
                Ago(page.now.duration_since(swap.at).unwrap_or_default()),
                Html(&swap.summary)
            )?;
        }
        out.push_str("</tbody></table>\n");
    }
    out.push_str("</section>\n");
    Ok(())
}

/// Opens a table; `numeric` lists the columns whose cells are right-aligned numbers.
fn table_head(out: &mut String, columns: &[&str], numeric: &[usize]) {
    out.push_str("<table><thead><tr>");
    for (i, column) in columns.iter().enumerate() {
        if numeric.contains(&i) {
            out.push_str("<th class=\"num\">");
        } else {
            out.push_str("<th>");
        }
        out.push_str(column);
        out.push_str("</th>");
    }
    out.push_str("</tr></thead><tbody>\n");
}

/// Closes a table of `rows` rows, saying how many were left out.
fn table_end(out: &mut String, rows: usize) {
    out.push_str("</tbody></table>\n");
    if rows > ROWS_SHOWN {
        let _ = writeln!(
            out,
            "<p class=\"note\">{} more rows not shown: see <a href=\"/config\">/config</a>.</p>",
            rows - ROWS_SHOWN
        );
    }
}

/// A value shown as text: `&`, `<`, `>`, `"` and `'` escaped, so it can go in an element or a
/// quoted attribute.
pub(crate) struct Html<'a>(pub(crate) &'a str);

impl fmt::Display for Html<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(at) = rest.find(['&', '<', '>', '"', '\'']) {
            f.write_str(&rest[..at])?;
            f.write_str(match rest.as_bytes()[at] {
                b'&' => "&amp;",
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'"' => "&quot;",
                _ => "&#39;",
            })?;
            rest = &rest[at + 1..];
        }
        f.write_str(rest)
    }
}

/// A duration as a person says it: `4 s ago`, `12 min ago`, `3 h ago`, `2 d ago`.
struct Ago(Duration);

impl fmt::Display for Ago {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seconds = self.0.as_secs();
        match seconds {
            0..=119 => write!(f, "{seconds} s ago"),
            120..=7199 => write!(f, "{} min ago", seconds / 60),
            7200..=172_799 => write!(f, "{} h ago", seconds / 3600),
            _ => write!(f, "{} d ago", seconds / 86_400),
        }
    }
}

/// System fonts only: nothing is fetched.
const STYLE: &str = "\
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;\
margin:0 auto;max-width:1240px;padding:16px 24px 40px;color:#1d2330;background:#f5f6f8}\
h1{font-size:22px;margin:4px 0}h2{font-size:17px;margin:28px 0 6px}h3{font-size:15px;margin:16px 0 4px}\
header p{margin:4px 0 8px}nav a{margin-right:14px}a{color:#1f5fbf}\
table{border-collapse:collapse;width:100%;background:#fff;box-shadow:0 1px 2px rgba(0,0,0,.08)}\
th,td{text-align:left;padding:5px 10px;border-bottom:1px solid #e4e7eb;vertical-align:top;\
overflow-wrap:anywhere}th{background:#eceff3;font-weight:600}\
code{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:12.5px}\
.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\
.note{color:#5d6675;font-size:13px}.when{white-space:nowrap}\
.tag{font-size:11px;background:#e6ecf7;color:#2c4a80;border-radius:3px;padding:0 5px}\
.state{font-weight:600;padding:1px 8px;border-radius:10px}\
.state.ok{background:#dcf3e3;color:#17632f}.state.bad{background:#fde2e1;color:#9b1c12}\
.bad{color:#b3261e}.warn{color:#8a5a00}\
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0 0}\
.card{background:#fff;box-shadow:0 1px 2px rgba(0,0,0,.08);padding:6px 14px;min-width:92px}\
.card b{display:block;font-size:20px}\
.sev{font-size:12px;font-weight:600;border-radius:3px;padding:0 6px}\
.sev-error{background:#fde2e1;color:#9b1c12}.sev-missing{background:#fff1d6;color:#8a5a00}\
.sev-unsupported{background:#f1e4fb;color:#6a2c91}.sev-difference{background:#e6ecf7;color:#2c4a80}\
.sev-notice{background:#eceff3;color:#3d4654}.sev-expiring{background:#fff1d6;color:#8a5a00}\
ul.errors{background:#fff;padding:8px 28px;margin:0}";

#[cfg(test)]
mod tests;
