//! Renderers of [`CapacityResults`]: stdout summary, `report.md` and `report.html` (tables and SVG
//! bar charts by worker count, like the seeds' graphs).
//!
//! Pure: results in, text out. Tables are built once as data ([`Table`]) and written as aligned
//! text, Markdown or HTML.

use std::fmt::Write as _;

use super::{
    aggregate, case_title, cases_of, find, ratios, sizing, system_order, worker_counts, Aggregate,
    CapacityResults, Measurement, Ratio, SizingRow, Spread, Study,
};
use crate::render::{svg_open, BOTTOM, COLOURS, H, LEFT, RIGHT, TOP, W};
use crate::table::esc;

pub use crate::table::Table;

/// A number for a table: thousands separated above 1000, fewer decimals as it grows.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "—".to_owned();
    }
    if v == 0.0 {
        return "0".to_owned();
    }
    let a = v.abs();
    if a >= 1000.0 {
        let digits = format!("{:.0}", a);
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        if v < 0.0 {
            out.insert(0, '-');
        }
        out
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "—".to_owned(), num)
}

fn pct(v: f64) -> String {
    format!("{:.0} %", v * 100.0)
}

/// A price with three significant digits (costs per million requests are small).
pub fn money(v: Option<f64>) -> String {
    let Some(v) = v.filter(|v| v.is_finite()) else {
        return "—".to_owned();
    };
    if v == 0.0 {
        return "0".to_owned();
    }
    let digits = (2 - v.abs().log10().floor() as i32).max(0);
    format!("{v:.*}", usize::try_from(digits).unwrap_or(0))
}

/// Median with its range, e.g. `87,647 (85,878–91,874)`.
fn spread(s: &Spread) -> String {
    if s.n > 1 {
        format!("{} ({}–{})", num(s.median), num(s.min), num(s.max))
    } else {
        num(s.median)
    }
}

/// The per-case table: one row per worker count and system.
pub fn case_table(
    aggs: &[Aggregate],
    systems: &[String],
    workers: &[u32],
    study: Study,
    case: &str,
) -> Table {
    let per = if study == Study::Tps {
        "handshakes per SUT CPU-s"
    } else {
        "req per SUT CPU-s"
    };
    let value = format!("{} median (min–max)", study.unit());
    let mut header = vec![
        "workers",
        "system",
        value.as_str(),
        "SUT CPU µs/req",
        per,
        "SUT CPU",
        "load CPU",
        "saturated",
        "errors",
    ];
    if study == Study::Latency {
        header.insert(2, "rate (req/s)");
    }
    if study == Study::Tps {
        header.push("full / resumed");
    }
    let mut t = Table::new(&header, 2);
    for &w in workers {
        for s in systems {
            let Some(a) = find(aggs, study, case, w, s) else {
                continue;
            };
            let mut row = vec![
                w.to_string(),
                s.clone(),
                spread(&a.value),
                spread(&a.sut_us_per_request),
                num(a.per_cpu_second.median),
                pct(a.sut_util),
                pct(a.load_util),
                a.bound.label().to_owned()
                    + &if a.noisy_rounds > 0 {
                        format!(" (noisy ×{})", a.noisy_rounds)
                    } else {
                        String::new()
                    },
                a.errors.to_string(),
            ];
            if study == Study::Latency {
                row.insert(2, opt(a.rate_requested));
            }
            if study == Study::Tps {
                row.push(format!("{} / {}", a.handshakes.full, a.handshakes.resumed));
            }
            t.rows.push(row);
        }
    }
    t
}

/// The Sluice ÷ nginx table.
pub fn ratio_table(ratios: &[Ratio]) -> Table {
    let mut t = Table::new(
        &[
            "figure",
            "workers",
            "Sluice",
            "nginx",
            "Sluice ÷ nginx",
            "target",
            "met",
        ],
        1,
    );
    for r in ratios {
        t.rows.push(vec![
            r.what.to_owned(),
            r.workers.to_string(),
            num(r.sluice),
            num(r.nginx),
            format!("{:.3}", r.ratio),
            r.target.label(),
            match r.target.met(r.ratio) {
                Some(true) => "yes".to_owned(),
                Some(false) => "no".to_owned(),
                None => "—".to_owned(),
            },
        ]);
    }
    t
}

/// The EKS-style sizing table.
pub fn sizing_table(rows: &[SizingRow], cost: bool) -> Table {
    let mut header = vec![
        "system",
        "workers (CPUs)",
        "RPS HTTP",
        "RPS HTTPS",
        "TLS TPS RSA full",
        "TLS TPS RSA resumed",
        "HTTP req per SUT CPU-s",
        "HTTPS req per SUT CPU-s",
    ];
    if cost {
        header.extend(["cost per month", "per 1M HTTP req", "per 1M HTTPS req"]);
    }
    let mut t = Table::new(&header, 2);
    for r in rows {
        let mut row = vec![
            r.system.clone(),
            if r.measured {
                r.workers.to_string()
            } else {
                format!("{} (extrapolated)", r.workers)
            },
            opt(r.rps_http),
            opt(r.rps_https),
            opt(r.tps_rsa_full),
            opt(r.tps_rsa_resumed),
            opt(r.http_per_cpu_second),
            opt(r.https_per_cpu_second),
        ];
        if cost {
            row.extend([
                r.cost_per_month
                    .map_or_else(|| "—".to_owned(), |v| format!("{v:.2}")),
                money(r.cost_per_million_http),
                money(r.cost_per_million_https),
            ]);
        }
        t.rows.push(row);
    }
    t
}

/// Every run, one row each.
pub fn runs_table(runs: &[Measurement]) -> Table {
    let mut t = Table::new(
        &[
            "study/case",
            "system",
            "workers",
            "round",
            "figure",
            "requests",
            "SUT CPU s",
            "µs/req",
            "SUT",
            "load",
            "pods CPU s",
            "others",
            "saturated",
            "errors",
        ],
        2,
    );
    for m in runs {
        t.rows.push(vec![
            format!("{}/{}", m.study.label(), m.case),
            m.system.clone(),
            m.workers.to_string(),
            m.round.to_string(),
            format!("{} {}", num(super::headline(m)), m.study.unit()),
            (m.requests + m.warmup_requests).to_string(),
            format!("{:.2}", m.cpu.sut_secs),
            num(m.cpu.sut_us_per_request),
            pct(m.cpu.sut_util),
            pct(m.cpu.load_util),
            format!("{:.2}", m.cpu.pods_secs),
            pct(m.cpu.others_util),
            m.bound.label().to_owned(),
            m.errors.total().to_string(),
        ]);
    }
    t
}

fn title(results: &CapacityResults) -> &'static str {
    match results.command.as_str() {
        "rps" => "Sluice lab: requests per second by worker count",
        "tps" => "Sluice lab: TLS handshakes per second by worker count",
        "throughput" => "Sluice lab: throughput by worker count",
        _ => "Sluice lab: capacity and sizing by worker count",
    }
}

const STUDIES: [Study; 4] = [Study::Rps, Study::Latency, Study::Tps, Study::Throughput];

/// Everything the reports show, computed once.
struct View {
    aggs: Vec<Aggregate>,
    systems: Vec<String>,
    workers: Vec<u32>,
    ratios: Vec<Ratio>,
    sizing: Option<Vec<SizingRow>>,
}

fn view(results: &CapacityResults) -> View {
    let aggs = aggregate(&results.runs);
    let systems = system_order(&results.runs);
    let sizing =
        (results.command == "sizing").then(|| sizing(&aggs, &systems, results.cost_per_cpu_hour));
    View {
        ratios: ratios(&aggs),
        workers: worker_counts(&results.runs),
        systems,
        sizing,
        aggs,
    }
}

/// The summary printed at the end of a lab.
pub fn summary(results: &CapacityResults) -> String {
    let v = view(results);
    let s = &results.setup;
    let mut out = format!(
        "sluice lab {}: {} round(s) of {} s (+{} s warm-up), {} connections\n",
        results.command, s.rounds, s.duration_secs, s.warmup_secs, s.connections
    );
    for p in &s.pinning {
        let _ = writeln!(out, "  workers={}: {}", p.workers, p.description);
    }
    for study in STUDIES {
        for case in cases_of(&results.runs, study) {
            let _ = writeln!(out, "\n{}", case_title(study, &case));
            out += &case_table(&v.aggs, &v.systems, &v.workers, study, &case).text();
        }
    }
    if !v.ratios.is_empty() {
        out += "\nSluice ÷ nginx (medians)\n";
        out += &ratio_table(&v.ratios).text();
    }
    if let Some(rows) = &v.sizing {
        out += "\nSizing\n";
        out += &sizing_table(rows, results.cost_per_cpu_hour.is_some()).text();
    }
    for s in &results.skipped {
        let _ = writeln!(out, "skipped {}: {}", s.system, s.reason);
    }
    out
}

fn setup_lines(results: &CapacityResults) -> Vec<String> {
    let s = &results.setup;
    let mut lines = vec![
        format!(
            "started {}, {} CPUs ({}), CPU times in 1/{} s ticks",
            results.started_at, s.cpus, s.cpu_model, s.clock_ticks_per_second
        ),
        format!(
            "{} round(s) per system and case, {} s measured after a {} s warm-up, {} connections",
            s.rounds, s.duration_secs, s.warmup_secs, s.connections
        ),
    ];
    for p in &s.pinning {
        lines.push(format!("workers={}: {}", p.workers, p.description));
    }
    if !s.versions.is_empty() {
        lines.push(format!(
            "versions: {}",
            s.versions.values().cloned().collect::<Vec<_>>().join("; ")
        ));
    }
    if !s.sources.is_empty() {
        lines.push(format!("merged from: {}", s.sources.join(", ")));
    }
    if let Some(c) = results.cost_per_cpu_hour {
        lines.push(format!(
            "cost: {c} per CPU (worker) per hour; a month is {} hours",
            super::HOURS_PER_MONTH
        ));
    }
    lines
}

const SIZING_NOTE: &str = "Measured rows are medians of the runs at that worker count. \
    Extrapolated rows multiply the requests (handshakes) per SUT CPU-second measured with one \
    worker on its own CPU by the worker count: an upper bound, since the seeds saw scaling flatten \
    past 8–16 CPUs. Cost is per CPU-hour × workers; per million requests at the row's RPS.";

const RATIO_NOTE: &str = "CPU per request and handshakes per CPU-second come from the system's \
    own CPU time, so they hold whichever side was saturated; throughput and p99 are as measured.";

/// `report.md`.
pub fn markdown(results: &CapacityResults) -> String {
    let v = view(results);
    let mut md = format!("# {}\n\n", title(results));
    md += "The seeds' NGINX studies on one machine: RPS (1 KB), TLS TPS (new connection per \
           request, 0 KB) and throughput (1 MB) by worker count, with the CPU time each system \
           spent per request and which resource was saturated.\n\n";
    for line in setup_lines(results) {
        let _ = writeln!(md, "- {line}");
    }
    md.push('\n');
    if !results.setup.notes.is_empty() {
        md += "## Method\n\n";
        for note in &results.setup.notes {
            let _ = writeln!(md, "- {note}");
        }
        md.push('\n');
    }
    if !v.ratios.is_empty() {
        md += "## Sluice ÷ nginx\n\n";
        md += &ratio_table(&v.ratios).markdown();
        let _ = writeln!(md, "\n{RATIO_NOTE}\n");
    }
    if let Some(rows) = &v.sizing {
        md += "## Sizing\n\n";
        md += &sizing_table(rows, results.cost_per_cpu_hour.is_some()).markdown();
        let _ = writeln!(md, "\n{SIZING_NOTE}\n");
    }
    for study in STUDIES {
        for case in cases_of(&results.runs, study) {
            let _ = writeln!(md, "## {}\n", case_title(study, &case));
            md += &case_table(&v.aggs, &v.systems, &v.workers, study, &case).markdown();
            md.push('\n');
        }
    }
    md += &crate::render::skipped_markdown(&results.skipped);
    md += "## Every run\n\n";
    md += &runs_table(&results.runs).markdown();
    md += "\nCharts: `report.html`. Each run's full load results: `runs/*.load.json`.\n";
    md
}

/// `report.html`: the tables and a bar chart per case (and CPU per request), by worker count.
pub fn html(results: &CapacityResults) -> String {
    let v = view(results);
    let mut h = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{}</title>\n\
         <style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto;}}\
         table{{border-collapse:collapse;margin:1em 0;}}td,th{{border:1px solid #999;padding:2px 8px;}}\
         td{{text-align:right;}}td.l{{text-align:left;}}svg{{background:#fff;border:1px solid #ddd;margin:.5em 0;}}</style>\n\
         </head><body>\n<h1>{}</h1>\n<ul>",
        esc(title(results)),
        esc(title(results))
    );
    for line in setup_lines(results) {
        let _ = write!(h, "<li>{}</li>", esc(&line));
    }
    h += "</ul>\n";
    if !results.setup.notes.is_empty() {
        h += "<h2>Method</h2><ul>";
        for note in &results.setup.notes {
            let _ = write!(h, "<li>{}</li>", esc(note));
        }
        h += "</ul>\n";
    }
    if !v.ratios.is_empty() {
        h += "<h2>Sluice ÷ nginx</h2>\n";
        h += &ratio_table(&v.ratios).html();
        let _ = writeln!(h, "<p>{}</p>", esc(RATIO_NOTE));
    }
    if let Some(rows) = &v.sizing {
        h += "<h2>Sizing</h2>\n";
        h += &sizing_table(rows, results.cost_per_cpu_hour.is_some()).html();
        let _ = writeln!(h, "<p>{}</p>", esc(SIZING_NOTE));
    }
    for study in STUDIES {
        for case in cases_of(&results.runs, study) {
            let title = case_title(study, &case);
            let _ = writeln!(h, "<h2>{}</h2>", esc(&title));
            h += &bar_chart(
                &format!("{title} ({})", study.unit()),
                &v.workers,
                &v.systems,
                |s, w| find(&v.aggs, study, &case, w, s).map(|a| a.value),
            );
            let (what, figure): (&str, fn(&Aggregate) -> Spread) = if study == Study::Tps {
                ("handshakes per SUT CPU-second", |a| a.per_cpu_second)
            } else {
                ("SUT CPU µs per request", |a| a.sut_us_per_request)
            };
            h += &bar_chart(
                &format!("{title}: {what}"),
                &v.workers,
                &v.systems,
                |s, w| find(&v.aggs, study, &case, w, s).map(figure),
            );
            h += &case_table(&v.aggs, &v.systems, &v.workers, study, &case).html();
        }
    }
    h += &crate::render::skipped_html(&results.skipped);
    h += "<h2>Every run</h2>\n";
    h += &runs_table(&results.runs).html();
    h + "</body></html>\n"
}

/// A round number at or above `v` for the top of a linear axis (1, 2, 2.5, 5 × 10^k).
pub fn nice_max(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&m| m >= v * (1.0 - 1e-12))
        .unwrap_or(10.0 * p)
}

/// Grouped bars: one group per worker count, one bar per system (median), a whisker from min to
/// max of the rounds.
pub fn bar_chart(
    title: &str,
    workers: &[u32],
    systems: &[String],
    value: impl Fn(&str, u32) -> Option<Spread>,
) -> String {
    let value = &value;
    let max = workers
        .iter()
        .flat_map(|&w| systems.iter().filter_map(move |s| value(s, w)))
        .map(|s| s.max)
        .fold(0.0_f64, f64::max);
    let top = nice_max(max);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let y = |v: f64| H - BOTTOM - v / top * plot_h;
    let mut svg = svg_open(title);
    for i in 0..=4 {
        let v = top * f64::from(i) / 4.0;
        let yv = y(v);
        let _ = write!(
            svg,
            "<line x1=\"{LEFT}\" y1=\"{yv:.1}\" x2=\"{:.1}\" y2=\"{yv:.1}\" stroke=\"#eee\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{}</text>",
            W - RIGHT,
            LEFT - 4.0,
            yv + 4.0,
            esc(&num(v))
        );
    }
    let groups = workers.len().max(1) as f64;
    let group_w = plot_w / groups;
    let bar_w = (group_w * 0.8 / systems.len().max(1) as f64).min(60.0);
    for (g, &w) in workers.iter().enumerate() {
        let gx = LEFT + group_w * g as f64;
        let first = gx + (group_w - bar_w * systems.len() as f64) / 2.0;
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\">{w} worker{}</text>",
            gx + group_w / 2.0,
            H - BOTTOM + 18.0,
            if w == 1 { "" } else { "s" }
        );
        for (i, s) in systems.iter().enumerate() {
            let Some(v) = value(s, w) else { continue };
            let colour = COLOURS[i % COLOURS.len()];
            let x = first + bar_w * i as f64;
            let _ = write!(
                svg,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{colour}\">\
                 <title>{}: {}</title></rect>",
                y(v.median),
                bar_w * 0.9,
                (H - BOTTOM - y(v.median)).max(0.0),
                esc(s),
                esc(&num(v.median))
            );
            if v.n > 1 {
                let cx = x + bar_w * 0.45;
                let _ = write!(
                    svg,
                    "<line x1=\"{cx:.1}\" y1=\"{:.1}\" x2=\"{cx:.1}\" y2=\"{:.1}\" stroke=\"#333\"/>",
                    y(v.min),
                    y(v.max)
                );
            }
            let _ = write!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\">{}</text>",
                x + bar_w * 0.45,
                y(v.max) - 3.0,
                esc(&num(v.median))
            );
        }
    }
    for (i, s) in systems.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let yv = TOP + 14.0 + 16.0 * i as f64;
        let xv = W - RIGHT - 110.0;
        let _ = write!(
            svg,
            "<rect x=\"{xv:.1}\" y=\"{:.1}\" width=\"12\" height=\"10\" fill=\"{colour}\"/>\
             <text x=\"{:.1}\" y=\"{yv:.1}\" font-size=\"12\">{}</text>",
            yv - 9.0,
            xv + 18.0,
            esc(s)
        );
    }
    svg + "</svg>\n"
}

#[cfg(test)]
mod tests {
    use super::super::tests::run;
    use super::super::{CapacityResults, Setup, Skipped, SCHEMA};
    use super::*;

    fn results(command: &str) -> CapacityResults {
        let mut runs = Vec::new();
        for (round, (s, n)) in [(9.0, 11.0), (10.0, 12.0), (9.5, 11.5)]
            .into_iter()
            .enumerate()
        {
            let r = u32::try_from(round).unwrap() + 1;
            runs.push(run(Study::Rps, "http", "sluice", 1, r, 1e6 / s, s));
            runs.push(run(Study::Rps, "http", "nginx", 1, r, 1e6 / n, n));
        }
        runs.push(run(Study::Tps, "rsa-full", "sluice", 1, 1, 900.0, 1000.0));
        runs.push(run(Study::Tps, "rsa-full", "nginx", 1, 1, 800.0, 1100.0));
        runs.push(run(Study::Rps, "http", "sluice", 2, 1, 150_000.0, 12.0));
        CapacityResults {
            schema: SCHEMA.to_owned(),
            started_at: "2026-11-21T03:00:00Z".into(),
            command: command.into(),
            setup: Setup {
                cpus: 2,
                rounds: 3,
                notes: vec!["a <note>".into()],
                ..Setup::default()
            },
            skipped: vec![Skipped {
                system: "haproxy".into(),
                reason: "not installed".into(),
            }],
            runs,
            cost_per_cpu_hour: Some(0.04),
        }
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(num(87_647.4), "87,647");
        assert_eq!(num(1_234_567.0), "1,234,567");
        assert_eq!(num(-1500.0), "-1,500");
        assert_eq!(num(123.4), "123");
        assert_eq!(num(12.34), "12.3");
        assert_eq!(num(1.234), "1.23");
        assert_eq!(num(f64::NAN), "—");
        assert_eq!(num(0.0), "0");
        assert_eq!(money(Some(0.000_434_2)), "0.000434");
        assert_eq!(money(Some(36.5238)), "36.5");
        assert_eq!(money(Some(1234.6)), "1235");
        assert_eq!(money(None), "—");
        assert_eq!(nice_max(87_000.0), 100_000.0);
        assert_eq!(nice_max(1.7), 2.0);
        assert_eq!(nice_max(2.2), 2.5);
        assert_eq!(nice_max(0.0), 1.0);
    }

    #[test]
    fn tables_render_as_text_markdown_and_html() {
        let mut t = Table::new(&["system", "req/s"], 1);
        t.rows.push(vec!["sluice".into(), "87,647".into()]);
        t.rows.push(vec!["<x>".into(), "1".into()]);
        assert_eq!(t.text(), "system   req/s\nsluice  87,647\n<x>          1\n");
        assert_eq!(
            t.markdown(),
            "| system | req/s |\n|---|---:|\n| sluice | 87,647 |\n| <x> | 1 |\n"
        );
        assert!(t
            .html()
            .contains("<td class=\"l\">&lt;x&gt;</td><td>1</td>"));
    }

    #[test]
    fn the_report_has_the_case_ratio_and_sizing_tables() {
        let r = results("sizing");
        let md = markdown(&r);
        assert!(md.starts_with("# Sluice lab: capacity and sizing by worker count\n"));
        assert!(md.contains("## Sluice ÷ nginx\n"));
        assert!(md.contains(
            "| CPU per request (µs), HTTP 1 KB | 1 | 9.50 | 11.5 | 0.826 | ≤ 0.8 | no |"
        ));
        assert!(md.contains("| Full TLS handshakes per CPU-second, RSA-2048 | 1 |"));
        assert!(md.contains("## Sizing\n"));
        assert!(md.contains("| sluice | 4 (extrapolated) |"));
        assert!(md.contains("per 1M HTTP req"));
        assert!(md.contains("## RPS, 1 KB, HTTP\n"));
        // Median with the range of three rounds, and who was saturated.
        assert!(md.contains("| 1 | sluice | 105,263 (100,000–111,111) | 9.50 (9.00–10.0) |"));
        assert!(md.contains("SUT-bound"));
        assert!(md.contains("## Not run\n\n- haproxy: not installed\n"));
        assert!(md.contains("## Every run\n"));
        assert!(md.contains("- a <note>\n"));

        let html = html(&r);
        assert!(html.contains("<svg"));
        assert!(html.contains("RPS, 1 KB, HTTP (req/s)"));
        assert!(html.contains("1 worker</text>") && html.contains("2 workers</text>"));
        assert!(html.contains("a &lt;note&gt;"));
        assert!(html.ends_with("</body></html>\n"));

        let text = summary(&r);
        assert!(text.contains("Sluice ÷ nginx (medians)"));
        assert!(text.contains("Sizing"));
        assert!(text.contains("skipped haproxy: not installed"));

        // Only the sizing command gets the sizing table.
        assert!(!markdown(&results("rps")).contains("## Sizing"));
    }

    #[test]
    fn a_bar_chart_has_a_bar_and_a_whisker_per_measured_system() {
        let spread = Spread {
            median: 10.0,
            min: 8.0,
            max: 12.0,
            n: 3,
        };
        let svg = bar_chart("t", &[1, 2], &["sluice".into(), "nginx".into()], |s, w| {
            (s == "sluice" || w == 1).then_some(spread)
        });
        assert_eq!(svg.matches("<rect x=").count(), 1 + 3 + 2); // frame, bars, legend
        assert_eq!(svg.matches("stroke=\"#333\"").count(), 3);
        assert!(svg.ends_with("</svg>\n"));
    }
}
