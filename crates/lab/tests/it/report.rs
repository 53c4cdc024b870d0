//! results.json shape and the Markdown, HTML/SVG and text renderers, from recorded load results.

use lab::results::{
    LabResults, LatencyMs, Run, ScaleEvent, Setup, Skipped, PROTOCOL_HTTPS, SCHEMA,
};

fn load_fixture(name: &str) -> load::Results {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The fixtures predate the early series and the tail without second 0: this gives a run both.
/// Step 200–300 ms is the slow one (p99 12.35 ms), with the generator 7 ms late at worst.
fn with_start(mut load: load::Results) -> load::Results {
    load.early_series_secs = 5.0;
    load.early_series = (0..50)
        .map(|i| {
            let slow = i == 2;
            load::EarlyPoint {
                start_ms: i * 100,
                completed: 30,
                errors: load::ErrorCounts {
                    read: u64::from(i == 3),
                    ..Default::default()
                },
                p50_us: Some(600),
                p99_us: Some(if slow { 12_346 } else { 900 }),
                max_us: Some(if slow { 13_000 } else { 950 }),
                send_late_p50_us: Some(50),
                send_late_p99_us: Some(if slow { 6_500 } else { 99 }),
                send_late_max_us: Some(if slow { 7_000 } else { 100 }),
            }
        })
        .collect();
    let mut without = load.latency.corrected.clone();
    for p in &mut without.percentiles {
        if p.percentile == 99.99 {
            p.value_us = 1_234;
        } else if p.percentile == 99.999 {
            p.value_us = 2_346;
        }
    }
    load.latency.corrected_without_first_second = Some(without);
    load
}

fn lab_results() -> LabResults {
    let events = vec![
        ScaleEvent {
            at_secs: 3.05,
            from: 5,
            to: 7,
            ready_secs: 0.05,
        },
        ScaleEvent {
            at_secs: 5.01,
            from: 7,
            to: 5,
            ready_secs: 0.0,
        },
    ];
    LabResults {
        schema: SCHEMA.to_owned(),
        started_at: "2026-11-21T01:19:00Z".to_owned(),
        setup: Setup {
            cpus: 2,
            pinning: "system under test on CPU 0; load generator and pods on CPU 1".to_owned(),
            duration_secs: 8.0,
            rate: 300,
            connections: 20,
            threads: 1,
            tls: "RSA-2048".to_owned(),
            host: "app.example.com".to_owned(),
            churn: "5 <-> 7".to_owned(),
            protocol: PROTOCOL_HTTPS.to_owned(),
            machine: None,
        },
        skipped: vec![Skipped {
            system: "haproxy".to_owned(),
            reason: "haproxy is not installed: install the Debian package haproxy".to_owned(),
        }],
        runs: vec![
            Run::new(
                "sluice",
                "static",
                "none",
                Vec::new(),
                with_start(load_fixture("sluice-static.load.json")),
            ),
            Run::new(
                "nginx",
                "dynamic",
                "graceful",
                events,
                load_fixture("nginx-dynamic.load.json"),
            ),
        ],
    }
}

#[test]
fn runs_carry_the_load_numbers() {
    let results = lab_results();
    let nginx = &results.runs[1];
    assert_eq!(nginx.requests, 2361);
    assert_eq!(nginx.errors.read, 39);
    assert_eq!(nginx.rate_requested, 300.0);
    assert_eq!(nginx.group(), "dynamic/graceful");
    assert_eq!(results.runs[0].group(), "static");
    let l = nginx.latency_ms;
    assert_eq!(l.p50, 0.52);
    assert_eq!(l.p99, 5.659);
    assert_eq!(l.max, 14.439);
    assert!(l.p50 <= l.p99 && l.p99 <= l.p99_9 && l.p99_9 <= l.p99_99 && l.p99_9999 <= l.max);
}

#[test]
fn results_json_has_the_documented_shape_and_round_trips() {
    let results = lab_results();
    let json = serde_json::to_value(&results).unwrap();
    assert_eq!(json["schema"], SCHEMA);
    let run = &json["runs"][1];
    for key in [
        "system",
        "deployment",
        "termination",
        "rate_requested",
        "rate_achieved",
        "requests",
        "errors",
        "latency_ms",
        "load",
    ] {
        assert!(!run[key].is_null(), "missing {key}");
    }
    for key in ["connect", "read", "write", "timeout", "status"] {
        assert!(run["errors"][key].is_u64(), "errors.{key}");
    }
    for key in [
        "p50", "p99", "p99.9", "p99.99", "p99.999", "p99.9999", "max",
    ] {
        assert!(run["latency_ms"][key].is_f64(), "latency_ms.{key}");
    }
    let back: LabResults = serde_json::from_value(json).unwrap();
    assert_eq!(back.runs.len(), 2);
    assert_eq!(back.runs[1].latency_ms, results.runs[1].latency_ms);
    assert_eq!(LatencyMs::default().columns()[2].0, "p99.9");
}

#[test]
fn markdown_has_the_seeds_table_per_deployment() {
    let md = lab::render::markdown(&lab_results());
    assert!(md.contains("## static\n"));
    assert!(md.contains("## dynamic/graceful\n"));
    assert!(md.contains("| | nginx |"));
    assert!(md.contains("| Read errors | 39 |"));
    assert!(md.contains("| Connection errors | 0 |"));
    assert!(md.contains("| Connection timeouts | 0 |"));
    assert!(md.contains("| Requests completed | 2361 |"));
    assert!(md.contains("| Scale events | 2 |"));
    assert!(md.contains("| latency p99.9999 |"));
    assert!(md.contains("haproxy is not installed"));
}

#[test]
fn html_has_percentile_and_timeline_charts() {
    let html = lab::render::html(&lab_results());
    assert!(html.starts_with("<!doctype html>"));
    assert!(html.ends_with("</html>\n"));
    // One percentile chart per deployment group, one timeline per dynamic run.
    assert_eq!(html.matches("Latency by percentile").count(), 2);
    assert_eq!(html.matches("p99 and errors per second").count(), 1);
    assert!(html.contains("99.9999%"));
    assert!(html.contains("5→7") && html.contains("7→5"));
    assert!(
        html.contains("errors at"),
        "error bars for the nginx read errors"
    );
    assert_eq!(html.matches("<svg").count(), html.matches("</svg>").count());
    assert!(!html.contains("NaN") && !html.contains("inf"));
}

#[test]
fn percentile_points_span_the_nines_and_never_decrease() {
    let results = lab_results();
    let points = lab::render::percentile_points(&results.runs[1]);
    assert!(points.len() > 50);
    assert!((points[0].0 - std::f64::consts::LOG10_2).abs() < 1e-9);
    assert!((points.last().unwrap().0 - 6.0).abs() < 1e-9);
    assert!(points
        .windows(2)
        .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
    assert!(points.last().unwrap().1 <= results.runs[1].latency_ms.max + 0.1);
}

#[test]
fn summary_is_one_aligned_line_per_run() {
    let text = lab::render::summary(&lab_results());
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("sluice lab dynamic: 300 req/s"));
    assert!(lines[1].starts_with("system"));
    assert!(lines[2].starts_with("sluice  static"));
    assert!(lines[3].starts_with("nginx   dynamic/graceful"));
    assert!(lines[3].contains(" 39 "));
    assert!(lines[4].starts_with("(1st s p99: p99 of second 0;"));
    assert!(lines[5].starts_with("(host stalls: wakes of a sleeping probe"));
    // Results written before the probes existed: no stall figures, said as such.
    let cells: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(cells[cells.len() - 2..], ["–", "–"], "{}", lines[2]);
    assert!(lines[6].starts_with("skipped haproxy"));
}

#[test]
fn the_start_of_a_run_is_shown_apart_from_its_tail() {
    let results = lab_results();
    let sluice = &results.runs[0];
    let without = sluice.latency_ms_without_first_second.unwrap();
    assert_eq!((without.p99_99, without.p99_999), (1.234, 2.346));
    assert_eq!(
        sluice.latency_ms.p99_99, 18.543,
        "the whole run's figure is kept"
    );
    // The fixture's second 0.
    assert_eq!(sluice.first_second_p99_ms(), Some(8.767));
    // nginx's load results predate both.
    assert_eq!(results.runs[1].latency_ms_without_first_second, None);

    let json = serde_json::to_value(&results).unwrap();
    assert_eq!(
        json["runs"][0]["latency_ms_without_first_second"]["p99.99"],
        1.234
    );
    assert!(json["runs"][1]["latency_ms_without_first_second"].is_null());
    let mut old = json.clone();
    old["runs"][0]
        .as_object_mut()
        .unwrap()
        .remove("latency_ms_without_first_second");
    let back: LabResults = serde_json::from_value(old).unwrap();
    assert_eq!(back.runs[0].latency_ms_without_first_second, None);

    let summary = lab::render::summary(&results);
    let lines: Vec<&str> = summary.lines().collect();
    let header: Vec<&str> = lines[1]
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    let column = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let cells = |line: &str| {
        line.split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    // "sluice static" is two cells, as the header's first two.
    let sluice_row = cells(lines[2]);
    let nginx_row = cells(lines[3]);
    assert_eq!(sluice_row[column("1st s p99")], "8.77");
    assert_eq!(sluice_row[column("p99.99 ms")], "18.54");
    assert_eq!(sluice_row[column("p99.99 w/o s0")], "1.23");
    assert_eq!(sluice_row[column("p99.999 w/o s0")], "2.35");
    assert_eq!(nginx_row[column("p99.99 w/o s0")], "–");

    let md = lab::render::markdown(&results);
    assert!(md.contains("| first second's p99 | 8.77 |"), "{md}");
    assert!(md.contains("| latency p99.99 without second 0 | 1.23 |"));
    assert!(md.contains("| latency p99.999 without second 0 | 2.35 |"));
    assert!(
        md.contains("| latency p99.99 without second 0 | – |"),
        "nginx's group"
    );
    assert!(md.contains("### static: the first second per 100 ms\n"));
    assert!(
        !md.contains("### dynamic/graceful: the first second"),
        "nginx has no early series"
    );
    // The first second only: ten steps, the slow one with the generator's lateness beside it.
    assert!(md.contains("| 0–100 | 30 | 0 | 0.60 | 0.90 | 0.95 | 0.05 | 0.10 | 0.10 |"));
    assert!(md.contains("| 200–300 | 30 | 0 | 0.60 | 12.35 | 13.00 | 0.05 | 6.50 | 7.00 |"));
    assert!(md.contains("| 300–400 | 30 | 1 |"));
    assert!(md.contains("| 900–1000 |"));
    assert!(!md.contains("| 1000–1100 |"));

    let html = lab::render::html(&results);
    assert!(html.contains("<h3>static: the first second per 100 ms</h3>"));
    assert!(html.contains("<td>200–300</td><td>30</td><td>0</td><td>0.60</td><td>12.35</td>"));
    assert!(html.contains("<th>first second's p99</th><td>8.77</td>"));
}

#[test]
fn outputs_are_written_and_reread() {
    let dir = std::env::temp_dir().join(format!("lab-report-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    lab::write_outputs(&dir, &lab_results()).unwrap();
    let back: LabResults =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(back.runs[0].system, "sluice");
    assert!(dir.join("report.md").is_file() && dir.join("report.html").is_file());
    std::fs::remove_dir_all(&dir).unwrap();
}
