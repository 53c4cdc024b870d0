//! results.json shape and the Markdown, HTML/SVG and text renderers, from recorded load results.

use lab::results::{
    LabResults, LatencyMs, Run, ScaleEvent, Setup, Skipped, PROTOCOL_HTTPS, SCHEMA,
};

fn load_fixture(name: &str) -> load::Results {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
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
                load_fixture("sluice-static.load.json"),
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
    assert!(lines[4].starts_with("skipped haproxy"));
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
