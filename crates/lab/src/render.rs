//! Renderers of [`LabResults`]: a plain-text summary, Markdown and HTML with inline SVG charts.
//!
//! Pure: results in, text out, so a report re-renders from `results.json` without re-running.

use std::fmt::Write as _;

use crate::results::{LabResults, Run, Skipped, PROTOCOL_GRPC};
use crate::table::{esc, Table};

/// The nines axis: percentiles from 50 % to 99.9999 %, as −log10(1 − p).
const NINES_MAX: f64 = 6.0;
const NINES_MIN: f64 = std::f64::consts::LOG10_2; // −log10(0.5)

/// One table row: its label and how to get a run's cell.
type Row = (&'static str, fn(&Run) -> String);

/// The seeds' error table (plus write errors and non-2xx), then volume.
const ROWS: &[Row] = &[
    ("Connection errors", |r| r.errors.connect.to_string()),
    ("Connection timeouts", |r| r.errors.timeout.to_string()),
    ("Read errors", |r| r.errors.read.to_string()),
    ("Write errors", |r| r.errors.write.to_string()),
    ("Non-2xx responses", |r| r.errors.status.to_string()),
    ("Requests completed", |r| r.requests.to_string()),
    ("Achieved rate (req/s)", |r| {
        format!("{:.0}", r.rate_achieved)
    }),
    ("Scale events", |r| r.events.len().to_string()),
];

/// The start of a run against the rest: the first second's p99, and the tail without it.
const START_ROWS: &[Row] = &[
    ("first second's p99", |r| {
        optional_ms(r.first_second_p99_ms())
    }),
    ("latency p99.99 without second 0", |r| {
        optional_ms(r.latency_ms_without_first_second.map(|l| l.p99_99))
    }),
    ("latency p99.999 without second 0", |r| {
        optional_ms(r.latency_ms_without_first_second.map(|l| l.p99_999))
    }),
];

/// The machine's own stalls during the run (see [`crate::stalls`]).
const HOST_ROWS: &[Row] = &[
    ("host stalls ≥ 2 ms, by CPU", |r| {
        r.host_stalls
            .as_ref()
            .map_or_else(|| "–".to_owned(), |h| h.counts())
    }),
    ("longest host stall", |r| {
        optional_ms(r.host_stalls.as_ref().map(|h| h.longest_ms()))
    }),
    ("slowest seconds with a host stall in them", |r| {
        r.host_stalls
            .as_ref()
            .map_or_else(|| "–".to_owned(), |h| h.slowest_with_stall())
    }),
];

/// The columns of the first second's table: one row per 100 ms of the early series.
const STEP_HEADER: [&str; 9] = [
    "ms",
    "completed",
    "errors",
    "p50",
    "p99",
    "max",
    "send late p50",
    "send late p99",
    "send late max",
];

/// What the first second's tables say about their columns.
const STEP_NOTE: &str = "By completion time, latencies in ms (coordinated-omission corrected). \
    Send late: how late the load generator itself sent those requests after their intended start \
    (up to 0.1 ms is its send timer's step); the latency includes it.";

pub(crate) const COLOURS: [&str; 6] = [
    "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02",
];

/// The run table as aligned text (stdout at the end of a lab).
pub fn summary(results: &LabResults) -> String {
    let mut out = String::new();
    let header = [
        "system",
        "deployment",
        "connect",
        "timeout",
        "read",
        "write",
        "non-2xx",
        "requests",
        "req/s",
        "p50 ms",
        "p99 ms",
        "1st s p99",
        "p99.99 ms",
        "p99.999 ms",
        "p99.99 w/o s0",
        "p99.999 w/o s0",
        "max ms",
        "host stalls",
        "slow s w/ stall",
    ];
    let rows: Vec<Vec<String>> = results
        .runs
        .iter()
        .map(|r| {
            vec![
                r.system.clone(),
                r.group(),
                r.errors.connect.to_string(),
                r.errors.timeout.to_string(),
                r.errors.read.to_string(),
                r.errors.write.to_string(),
                r.errors.status.to_string(),
                r.requests.to_string(),
                format!("{:.0}", r.rate_achieved),
                ms(r.latency_ms.p50),
                ms(r.latency_ms.p99),
                optional_ms(r.first_second_p99_ms()),
                ms(r.latency_ms.p99_99),
                ms(r.latency_ms.p99_999),
                optional_ms(r.latency_ms_without_first_second.map(|l| l.p99_99)),
                optional_ms(r.latency_ms_without_first_second.map(|l| l.p99_999)),
                ms(r.latency_ms.max),
                r.host_stalls
                    .as_ref()
                    .map_or_else(|| "–".to_owned(), |h| h.total().to_string()),
                r.host_stalls
                    .as_ref()
                    .map_or_else(|| "–".to_owned(), |h| h.slowest_with_stall()),
            ]
        })
        .collect();
    let _ = writeln!(
        out,
        "sluice lab dynamic{}: {} req/s requested, {} connections, {} s per run",
        if results.setup.protocol == PROTOCOL_GRPC {
            " --protocol grpc (non-2xx: calls with a grpc-status other than OK)"
        } else {
            ""
        },
        results.setup.rate,
        results.setup.connections,
        results.setup.duration_secs
    );
    let mut table = Table::new(&header, 2);
    table.rows = rows;
    out += &table.text();
    out +=
        "(1st s p99: p99 of second 0; w/o s0: the whole run without what completed in second 0)\n";
    let _ = writeln!(
        out,
        "(host stalls: wakes of a sleeping probe >= {} ms late on the run's CPUs; slow s w/ stall: \
         how many of the run's {} slowest seconds had one)",
        crate::stalls::STALL_FROM_MS,
        crate::stalls::SLOWEST_SECONDS
    );
    for s in &results.skipped {
        let _ = writeln!(out, "skipped {}: {}", s.system, s.reason);
    }
    out
}

/// `report.md`.
pub fn markdown(results: &LabResults) -> String {
    let mut md = String::new();
    let s = &results.setup;
    let _ = writeln!(md, "# Sluice lab: dynamic Kubernetes deployment\n");
    let what = if s.protocol == PROTOCOL_GRPC {
        "unary gRPC calls (`grpc.testing.TestService/UnaryCall`, 1 KiB answers, over HTTP/2 with \
         TLS; a call with a grpc-status other than OK counts as non-2xx) at a constant rate through \
         each system under test to grpc-go pods (Sluice: `backend-protocol: GRPC`; nginx: \
         `grpc_pass`, as ingress-nginx renders it; HAProxy: `proto h2`)"
    } else {
        "HTTPS load at a constant rate through each system under test to `sluice backend` pods"
    };
    let _ = writeln!(
        md,
        "The seeds' experiment on one machine: {what}, with a static deployment (5 pods) and a \
         dynamic one ({}).\n",
        s.churn
    );
    let _ = writeln!(md, "- started {}, {} CPUs", results.started_at, s.cpus);
    let _ = writeln!(md, "- pinning: {}", s.pinning);
    if let Some(machine) = &s.machine {
        let _ = writeln!(md, "- {machine}");
    }
    let _ = writeln!(
        md,
        "- load: `sluice load -t{} -c{} -R{} -L`, {} s per run, host {}; {}",
        s.threads, s.connections, s.rate, s.duration_secs, s.host, s.tls
    );
    let _ = writeln!(
        md,
        "- latencies are coordinated-omission corrected (from the intended send time), in ms\n"
    );
    for group in groups(results) {
        let runs: Vec<&Run> = results.runs.iter().filter(|r| r.group() == group).collect();
        let _ = writeln!(md, "## {group}\n");
        let _ = write!(md, "| |");
        for r in &runs {
            let _ = write!(md, " {} |", r.system);
        }
        let _ = write!(md, "\n|---|");
        for _ in &runs {
            let _ = write!(md, "---:|");
        }
        md.push('\n');
        for &(label, cell) in ROWS {
            let _ = write!(md, "| {label} |");
            for r in &runs {
                let _ = write!(md, " {} |", cell(r));
            }
            md.push('\n');
        }
        for i in 0..7 {
            let _ = write!(
                md,
                "| latency {} |",
                runs.first().map_or("", |r| r.latency_ms.columns()[i].0)
            );
            for r in &runs {
                let _ = write!(md, " {} |", ms(r.latency_ms.columns()[i].1));
            }
            md.push('\n');
        }
        for &(label, cell) in START_ROWS.iter().chain(HOST_ROWS) {
            let _ = write!(md, "| {label} |");
            for r in &runs {
                let _ = write!(md, " {} |", cell(r));
            }
            md.push('\n');
        }
        md.push('\n');
        md += &first_second_markdown(&group, &runs);
        md += &slowest_seconds_markdown(&group, &runs);
    }
    md += &skipped_markdown(&results.skipped);
    let _ = writeln!(
        md,
        "Charts: `report.html`. Everything measured, including each run's full load results: \
         `results.json`."
    );
    md
}

/// `report.html`: the Markdown tables as HTML plus the charts.
pub fn html(results: &LabResults) -> String {
    let mut h = String::new();
    h += "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Sluice lab: dynamic</title>\n\
          <style>body{font-family:sans-serif;max-width:1000px;margin:2em auto;}\
          table{border-collapse:collapse;margin:1em 0;}td,th{border:1px solid #999;padding:2px 8px;}\
          td{text-align:right;}svg{background:#fff;border:1px solid #ddd;margin:.5em 0;}</style>\n\
          </head><body>\n<h1>Sluice lab: dynamic Kubernetes deployment</h1>\n";
    let s = &results.setup;
    let _ = writeln!(
        h,
        "<p>Started {} on {} CPUs. Pinning: {}. Load: {} req/s, {} connections, {} s per run, \
         {}. Churn: {}. Latencies are coordinated-omission corrected.</p>",
        esc(&results.started_at),
        s.cpus,
        esc(&s.pinning),
        s.rate,
        s.connections,
        s.duration_secs,
        esc(&s.tls),
        esc(&s.churn)
    );
    for group in groups(results) {
        let runs: Vec<&Run> = results.runs.iter().filter(|r| r.group() == group).collect();
        let _ = writeln!(h, "<h2>{}</h2>", esc(&group));
        h += "<table><tr><th></th>";
        for r in &runs {
            let _ = write!(h, "<th>{}</th>", esc(&r.system));
        }
        h += "</tr>\n";
        for &(label, cell) in ROWS.iter().chain(START_ROWS).chain(HOST_ROWS) {
            let _ = write!(h, "<tr><th>{label}</th>");
            for r in &runs {
                let _ = write!(h, "<td>{}</td>", cell(r));
            }
            h += "</tr>\n";
        }
        h += "</table>\n";
        h += &first_second_html(&group, &runs);
        h += &percentile_chart(&format!("Latency by percentile: {group}"), &runs);
        for r in runs.iter().filter(|r| r.deployment == "dynamic") {
            h += &timeline_chart(r);
        }
    }
    h += &skipped_html(&results.skipped);
    h += "</body></html>\n";
    h
}

/// Distinct run groups in first-seen order.
fn groups(results: &LabResults) -> Vec<String> {
    let mut groups: Vec<String> = Vec::new();
    for r in &results.runs {
        let g = r.group();
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    groups
}

/// (nines, latency ms) points of a run's corrected distribution from 50 % to 99.9999 %.
/// The "Not run" section of a Markdown report (empty when every system ran).
pub(crate) fn skipped_markdown(skipped: &[Skipped]) -> String {
    let mut md = String::new();
    if !skipped.is_empty() {
        md += "## Not run\n\n";
        for s in skipped {
            let _ = writeln!(md, "- {}: {}", s.system, s.reason);
        }
        md.push('\n');
    }
    md
}

/// The "Not run" section of an HTML report (empty when every system ran).
pub(crate) fn skipped_html(skipped: &[Skipped]) -> String {
    let mut h = String::new();
    if !skipped.is_empty() {
        h += "<h2>Not run</h2><ul>";
        for s in skipped {
            let _ = write!(h, "<li>{}: {}</li>", esc(&s.system), esc(&s.reason));
        }
        h += "</ul>\n";
    }
    h
}

pub fn percentile_points(run: &Run) -> Vec<(f64, f64)> {
    let mut points = Vec::new();
    if let Ok(hist) = run.load.corrected_histogram() {
        if !hist.is_empty() {
            let steps = 120;
            for i in 0..=steps {
                let nines = NINES_MIN + (NINES_MAX - NINES_MIN) * f64::from(i) / f64::from(steps);
                let q = 1.0 - 10f64.powf(-nines);
                points.push((nines, hist.value_at_quantile(q) as f64 / 1000.0));
            }
            return points;
        }
    }
    // No histogram: the summary percentiles.
    for (p, v) in [
        (50.0, run.latency_ms.p50),
        (99.0, run.latency_ms.p99),
        (99.9, run.latency_ms.p99_9),
        (99.99, run.latency_ms.p99_99),
        (99.999, run.latency_ms.p99_999),
        (99.9999, run.latency_ms.p99_9999),
    ] {
        points.push((-(1.0 - p / 100.0_f64).log10(), v));
    }
    points
}

pub(crate) const W: f64 = 900.0;
pub(crate) const H: f64 = 360.0;
pub(crate) const LEFT: f64 = 70.0;
pub(crate) const RIGHT: f64 = 20.0;
pub(crate) const TOP: f64 = 30.0;
pub(crate) const BOTTOM: f64 = 50.0;

/// Latency (log ms) against percentile (nines), one line per run.
fn percentile_chart(title: &str, runs: &[&Run]) -> String {
    let series: Vec<(&str, Vec<(f64, f64)>)> = runs
        .iter()
        .map(|r| (r.system.as_str(), percentile_points(r)))
        .collect();
    let max = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(_, v)| v))
        .fold(1.0_f64, f64::max);
    let (lo, hi) = (-1.0_f64, max.log10().ceil().max(0.0));
    let x = |nines: f64| LEFT + (nines - NINES_MIN) / (NINES_MAX - NINES_MIN) * (W - LEFT - RIGHT);
    let y = |ms: f64| {
        let v = ms.max(0.1).log10();
        H - BOTTOM - (v - lo) / (hi - lo) * (H - TOP - BOTTOM)
    };
    let mut svg = svg_open(title);
    for (nines, label) in [
        (NINES_MIN, "50%"),
        (1.0, "90%"),
        (2.0, "99%"),
        (3.0, "99.9%"),
        (4.0, "99.99%"),
        (5.0, "99.999%"),
        (6.0, "99.9999%"),
    ] {
        let xv = x(nines);
        let _ = write!(
            svg,
            "<line x1=\"{xv:.1}\" y1=\"{TOP}\" x2=\"{xv:.1}\" y2=\"{:.1}\" stroke=\"#eee\"/>\
             <text x=\"{xv:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{label}</text>",
            H - BOTTOM,
            H - BOTTOM + 16.0
        );
    }
    log_y_axis(&mut svg, lo, hi, &y);
    let _ = write!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\">percentile</text>",
        (W + LEFT) / 2.0,
        H - 12.0
    );
    for (i, (name, points)) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let path: Vec<String> = points
            .iter()
            .map(|&(n, v)| format!("{:.1},{:.1}", x(n), y(v)))
            .collect();
        let _ = write!(
            svg,
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>",
            path.join(" ")
        );
        legend(&mut svg, i, name, colour);
    }
    svg + "</svg>\n"
}

/// Per second: p99 (log ms, line) and errors (bars, linear right scale); scale events as lines.
fn timeline_chart(run: &Run) -> String {
    let series = &run.load.series;
    let seconds = series
        .iter()
        .map(|p| p.second + 1)
        .max()
        .unwrap_or(1)
        .max(run.load.duration_secs.ceil() as u64)
        .max(1) as f64;
    let max_p99 = series
        .iter()
        .filter_map(|p| p.p99_us)
        .map(|us| us as f64 / 1000.0)
        .fold(1.0_f64, f64::max);
    let max_err = series
        .iter()
        .map(|p| p.errors.total())
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let (lo, hi) = (-1.0_f64, max_p99.log10().ceil().max(0.0));
    let x = |s: f64| LEFT + s / seconds * (W - LEFT - RIGHT);
    let y = |ms: f64| {
        let v = ms.max(0.1).log10();
        H - BOTTOM - (v - lo) / (hi - lo) * (H - TOP - BOTTOM)
    };
    let title = format!(
        "{} {}/{}: p99 and errors per second (scale events dashed)",
        run.system, run.deployment, run.termination
    );
    let mut svg = svg_open(&title);
    log_y_axis(&mut svg, lo, hi, &y);
    let step = if seconds > 60.0 { 30.0 } else { 5.0 };
    let mut t = 0.0;
    while t <= seconds {
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{t:.0}s</text>",
            x(t),
            H - BOTTOM + 16.0
        );
        t += step;
    }
    let bar = ((W - LEFT - RIGHT) / seconds).max(1.0);
    for p in series {
        let e = p.errors.total();
        if e > 0 {
            let height = e as f64 / max_err * (H - TOP - BOTTOM);
            let _ = write!(
                svg,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{bar:.1}\" height=\"{height:.1}\" fill=\"#e41a1c\" \
                 opacity=\"0.6\"><title>{e} errors at {}s</title></rect>",
                x(p.second as f64),
                H - BOTTOM - height,
                p.second
            );
        }
    }
    for ev in &run.events {
        let xv = x(ev.at_secs);
        let _ = write!(
            svg,
            "<line x1=\"{xv:.1}\" y1=\"{TOP}\" x2=\"{xv:.1}\" y2=\"{:.1}\" stroke=\"#555\" \
             stroke-dasharray=\"4 3\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\">{}→{}</text>",
            H - BOTTOM,
            xv + 2.0,
            TOP + 10.0,
            ev.from,
            ev.to
        );
    }
    let points: Vec<String> = series
        .iter()
        .filter_map(|p| {
            p.p99_us.map(|us| {
                format!(
                    "{:.1},{:.1}",
                    x(p.second as f64 + 0.5),
                    y(us as f64 / 1000.0)
                )
            })
        })
        .collect();
    let _ = write!(
        svg,
        "<polyline fill=\"none\" stroke=\"#377eb8\" stroke-width=\"2\" points=\"{}\"/>",
        points.join(" ")
    );
    legend(&mut svg, 0, "p99 per second (ms)", "#377eb8");
    legend(
        &mut svg,
        1,
        &format!("errors per second (bar height: max {max_err:.0})"),
        "#e41a1c",
    );
    svg + "</svg>\n"
}

pub(crate) fn svg_open(title: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\">\
         <text x=\"{LEFT}\" y=\"18\" font-size=\"14\" font-weight=\"bold\">{}</text>\
         <rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>",
        esc(title),
        W - LEFT - RIGHT,
        H - TOP - BOTTOM
    )
}

fn log_y_axis(svg: &mut String, lo: f64, hi: f64, y: &dyn Fn(f64) -> f64) {
    let mut e = lo as i32;
    while f64::from(e) <= hi {
        let ms = 10f64.powi(e);
        let yv = y(ms);
        let label = if ms < 1.0 {
            format!("{ms}")
        } else {
            format!("{ms:.0}")
        };
        let _ = write!(
            svg,
            "<line x1=\"{LEFT}\" y1=\"{yv:.1}\" x2=\"{:.1}\" y2=\"{yv:.1}\" stroke=\"#eee\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{label} ms</text>",
            W - RIGHT,
            LEFT - 4.0,
            yv + 4.0
        );
        e += 1;
    }
}

pub(crate) fn legend(svg: &mut String, i: usize, name: &str, colour: &str) {
    let yv = TOP + 16.0 + 16.0 * i as f64;
    let _ = write!(
        svg,
        "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"12\" height=\"4\" fill=\"{colour}\"/>\
         <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\">{}</text>",
        LEFT + 10.0,
        yv - 4.0,
        LEFT + 28.0,
        yv,
        esc(name)
    );
}

/// The rows of a run's table for the first second, from its early series (none if it has none).
fn first_second_steps(run: &Run) -> Vec<[String; 9]> {
    let us = |v: Option<u64>| optional_ms(v.map(|us| us as f64 / 1000.0));
    run.load
        .early_series
        .iter()
        .take_while(|p| p.start_ms < 1000)
        .map(|p| {
            [
                format!("{}–{}", p.start_ms, p.start_ms + 100),
                p.completed.to_string(),
                p.errors.total().to_string(),
                us(p.p50_us),
                us(p.p99_us),
                us(p.max_us),
                us(p.send_late_p50_us),
                us(p.send_late_p99_us),
                us(p.send_late_max_us),
            ]
        })
        .collect()
}

/// Each run of a group that has an early series, with its first second's rows.
fn first_second_tables<'a>(runs: &[&'a Run]) -> Vec<(&'a Run, Vec<[String; 9]>)> {
    runs.iter()
        .map(|r| (*r, first_second_steps(r)))
        .filter(|(_, steps)| !steps.is_empty())
        .collect()
}

/// "The first second per 100 ms": one table per run of the group that has an early series.
fn first_second_markdown(group: &str, runs: &[&Run]) -> String {
    let mut md = String::new();
    let tables = first_second_tables(runs);
    if tables.is_empty() {
        return md;
    }
    let _ = writeln!(
        md,
        "### {group}: the first second per 100 ms\n\n{STEP_NOTE}\n"
    );
    for (run, steps) in tables {
        let _ = writeln!(md, "{}:\n", run.system);
        let _ = writeln!(md, "| {} |", STEP_HEADER.join(" | "));
        let _ = writeln!(md, "|---|{}", "---:|".repeat(STEP_HEADER.len() - 1));
        for step in steps {
            let _ = writeln!(md, "| {} |", step.join(" | "));
        }
        md.push('\n');
    }
    md
}

/// The HTML form of [`first_second_markdown`].
fn first_second_html(group: &str, runs: &[&Run]) -> String {
    let mut h = String::new();
    let tables = first_second_tables(runs);
    if tables.is_empty() {
        return h;
    }
    let _ = writeln!(
        h,
        "<h3>{}: the first second per 100 ms</h3>\n<p>{}</p>",
        esc(group),
        esc(STEP_NOTE)
    );
    for (run, steps) in tables {
        let _ = write!(h, "<p>{}:</p><table><tr>", esc(&run.system));
        for label in STEP_HEADER {
            let _ = write!(h, "<th>{label}</th>");
        }
        h += "</tr>\n";
        for step in steps {
            h += "<tr>";
            for cell in step {
                let _ = write!(h, "<td>{}</td>", esc(&cell));
            }
            h += "</tr>\n";
        }
        h += "</table>\n";
    }
    h
}

/// Each run's slowest seconds next to the longest host stall that could have delayed them.
fn slowest_seconds_markdown(group: &str, runs: &[&Run]) -> String {
    let mut md = String::new();
    for r in runs {
        let Some(host) = &r.host_stalls else { continue };
        if host.slowest_seconds.is_empty() {
            continue;
        }
        let _ = writeln!(
            md,
            "### {group}, {}: the slowest seconds and the host's stalls\n\n\
             Probes: {}.\n\n| second | slowest request | longest host stall (CPU) |\n|---:|---:|---|",
            r.system,
            host.probes
                .iter()
                .map(|p| format!(
                    "CPU {} ({}{}): {} stalls ≥ 2 ms, {} ≥ 5 ms, longest {}",
                    p.cpus,
                    p.role,
                    if p.raised { ", nice -20" } else { "" },
                    p.stalls,
                    p.stalls_5ms,
                    ms(p.longest_ms)
                ))
                .collect::<Vec<_>>()
                .join("; ")
        );
        for s in &host.slowest_seconds {
            let stall = s.stall.as_ref().map_or_else(
                || "none".to_owned(),
                |(late, cpus)| format!("{} ({cpus})", ms(*late)),
            );
            let _ = writeln!(md, "| {} | {} | {stall} |", s.second, ms(s.max_ms));
        }
        md.push('\n');
    }
    md
}

pub(crate) fn optional_ms(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), ms)
}

pub(crate) fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}
