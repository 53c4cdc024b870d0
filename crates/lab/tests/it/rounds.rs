//! `sluice lab rounds`: several `lab dynamic` results read as one, from recorded load results
//! whose histograms are set so the per-round and the pooled answers differ.

use lab::results::{LabResults, Run, Setup, PROTOCOL_HTTPS, SCHEMA};
use lab::rounds::{combine, markdown, summary, Comparison, Rounds};

/// A static run of `system` whose requests are 100,000 at 0.5 ms and 20 at `slow_us`: 0.02 % of
/// them, so its p99.99 is `slow_us` and its p99.9 0.5 ms. Its first second's p99 is
/// `first_second_us`.
fn run(system: &str, slow_us: u64, first_second_us: u64) -> Run {
    let path = format!(
        "{}/tests/fixtures/sluice-static.load.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut load: load::Results =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut histogram = load::latency_histogram();
    histogram.record_n(500, 100_000).unwrap();
    histogram.record_n(slow_us, 20).unwrap();
    load.latency.corrected = load::LatencySummary::of(&histogram);
    load.requests = histogram.len();
    load.series[0].second = 0;
    load.series[0].p99_us = Some(first_second_us);
    Run::new(system, "static", "none", Vec::new(), load)
}

fn round(started_at: &str, runs: Vec<Run>) -> LabResults {
    LabResults {
        schema: SCHEMA.to_owned(),
        started_at: started_at.to_owned(),
        setup: Setup {
            cpus: 2,
            pinning: "system under test on CPU 0; load generator and pods on CPU 1".to_owned(),
            duration_secs: 180.0,
            rate: 3000,
            connections: 1000,
            threads: 1,
            tls: "RSA-2048".to_owned(),
            host: "app.example.com".to_owned(),
            churn: "5 <-> 7".to_owned(),
            protocol: PROTOCOL_HTTPS.to_owned(),
            machine: None,
        },
        skipped: Vec::new(),
        runs,
    }
}

/// Round 1: Sluice draws a 9 ms tail, HAProxy 4 ms; round 2: Sluice 3 ms, HAProxy 6 ms; nginx
/// ran in round 1 only.
fn two_rounds() -> Rounds {
    combine(&[
        (
            "round-1/results.json".to_owned(),
            round(
                "2026-11-29T01:00:00Z",
                vec![
                    run("sluice", 9_000, 700),
                    run("haproxy", 4_000, 400),
                    run("nginx", 20_000, 1_000),
                ],
            ),
        ),
        (
            "round-2/results.json".to_owned(),
            round(
                "2026-11-29T01:20:00Z",
                vec![run("haproxy", 6_000, 800), run("sluice", 3_000, 500)],
            ),
        ),
    ])
    .unwrap()
}

fn comparison<'a>(rounds: &'a Rounds, peer: &str, criterion: &str) -> &'a Comparison {
    rounds
        .comparisons
        .iter()
        .find(|c| c.peer == peer && c.criterion == criterion)
        .unwrap_or_else(|| panic!("no {criterion} against {peer}"))
}

fn near(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < b * 0.01)
}

#[test]
fn each_comparison_counts_rounds_and_pools_the_histograms() {
    let rounds = two_rounds();
    assert_eq!(rounds.rounds.len(), 2);
    assert_eq!(rounds.rounds[1].order, ["haproxy", "sluice"]);

    // Per round Sluice is above HAProxy once and below once; the medians are 6 and 5 ms.
    let tail = comparison(&rounds, "haproxy", "p99.99");
    assert_eq!(tail.system, "sluice");
    assert_eq!((tail.at_or_below, tail.rounds), (1, 2));
    assert!(
        near(tail.median_ms, 6.0) && near(tail.peer_median_ms, 5.0),
        "{tail:?}"
    );
    // Pooled, 40 slow requests of 200,040: p99.99 lands on each system's smaller tail (3 vs
    // 4 ms), p99.999 on its larger one (9 vs 6 ms).
    assert!(
        near(tail.pooled_ms, 3.0) && near(tail.peer_pooled_ms, 4.0),
        "{tail:?}"
    );
    let deeper = comparison(&rounds, "haproxy", "p99.999");
    assert!(
        near(deeper.pooled_ms, 9.0) && near(deeper.peer_pooled_ms, 6.0),
        "{deeper:?}"
    );

    // The first second has no histogram to pool: counted and medians only.
    let first = comparison(&rounds, "haproxy", "first second's p99");
    assert_eq!((first.at_or_below, first.rounds), (1, 2));
    assert!(near(first.median_ms, 0.6) && near(first.peer_median_ms, 0.6));
    assert_eq!((first.pooled_ms, first.peer_pooled_ms), (None, None));

    // nginx ran once: compared over that round only, its cell has no second round.
    // Pooled too: Sluice's 9 ms of round 1 against nginx's 20 ms, not its 3 ms of round 2.
    let nginx = comparison(&rounds, "nginx", "p99.99");
    assert_eq!((nginx.at_or_below, nginx.rounds), (1, 1));
    assert!(
        near(nginx.pooled_ms, 9.0) && near(nginx.peer_pooled_ms, 20.0),
        "{nginx:?}"
    );
    let cell = rounds.cells.iter().find(|c| c.system == "nginx").unwrap();
    assert!(cell.rounds[0].is_some() && cell.rounds[1].is_none());
    let sluice = rounds.cells.iter().find(|c| c.system == "sluice").unwrap();
    assert_eq!(sluice.pooled_requests, 200_040);
}

#[test]
fn renders_name_the_counts_and_the_pooled_figures() {
    let rounds = two_rounds();
    let md = markdown(&rounds);
    assert!(
        md.contains("| static | p99.99 | sluice | haproxy | 1 of 2 | 6.00 | 5.00 | 3.00 | 4.00 |"),
        "{md}"
    );
    assert!(md.contains("| 2 | 2026-11-29T01:20:00Z | haproxy, sluice | `round-2/results.json` |"));
    assert!(
        md.contains("| static | nginx | p99.99 | 20.02 | – | 20.02 |"),
        "{md}"
    );
    let text = summary(&rounds);
    assert!(text.contains("2 rounds of 3000 req/s"), "{text}");
    assert!(text.contains("errors over all rounds: none"), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("p99.99 ") && l.contains("haproxy"))
        .unwrap();
    assert!(line.contains("1 of 2"), "{line}");

    let json = serde_json::to_value(&rounds).unwrap();
    assert_eq!(json["schema"], "sluice-lab-rounds/1");
    let back: Rounds = serde_json::from_value(json).unwrap();
    assert_eq!(back.comparisons.len(), rounds.comparisons.len());
}

#[test]
fn rounds_of_different_experiments_are_refused_by_file_and_field() {
    let mut other = round("2026-11-29T02:00:00Z", vec![run("sluice", 3_000, 500)]);
    other.setup.rate = 1000;
    let error = combine(&[
        (
            "a/results.json".to_owned(),
            round("2026-11-29T01:00:00Z", vec![run("sluice", 3_000, 500)]),
        ),
        ("b/results.json".to_owned(), other),
    ])
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("b/results.json")
            && error.contains("setup.rate")
            && error.contains("a/results.json"),
        "{error}"
    );
    assert!(combine(&[]).is_err());
}

/// A run that drew `stalls_5ms` host stalls of 5 ms or more (all on one probe).
fn with_stalls(mut run: Run, stalls_5ms: u64) -> Run {
    run.host_stalls = Some(lab::stalls::HostStalls {
        probes: vec![lab::stalls::CpuStalls {
            cpus: "0".to_owned(),
            role: "system under test".to_owned(),
            raised: true,
            stalls: stalls_5ms * 3,
            stalls_5ms,
            longest_ms: 6.0,
            log: Vec::new(),
        }],
        slowest_seconds: Vec::new(),
    });
    run
}

#[test]
fn the_stall_adjusted_offset_is_what_is_left_once_each_runs_stalls_are_counted() {
    // Every run's p99.99 is 4 ms + 0.2 ms per stall ≥ 5 ms, and 0.5 ms less for Sluice: Sluice
    // drew more stalls (18 against 12), so its median is higher, but the fit finds −0.5.
    let tail = |stalls: u64, sluice: bool| 4_000 + 200 * stalls - if sluice { 500 } else { 0 };
    let rounds: Vec<(String, LabResults)> = [(2, 4), (10, 0), (6, 8)]
        .iter()
        .enumerate()
        .map(|(i, &(own, peer))| {
            (
                format!("round-{i}"),
                round(
                    "2026-11-29T01:00:00Z",
                    vec![
                        with_stalls(run("sluice", tail(own, true), 500), own),
                        with_stalls(run("haproxy", tail(peer, false), 500), peer),
                    ],
                ),
            )
        })
        .collect();
    let combined = combine(&rounds).unwrap();
    let fit = combined
        .stall_adjusted
        .iter()
        .find(|a| a.percentile == "p99.99")
        .expect("a p99.99 fit");
    assert_eq!(
        (fit.system.as_str(), fit.peer.as_str()),
        ("sluice", "haproxy")
    );
    assert_eq!((fit.runs, fit.stalls_5ms, fit.peer_stalls_5ms), (6, 18, 12));
    assert!((fit.offset_ms + 0.5).abs() < 0.02, "{fit:?}");
    assert!((fit.per_stall_ms - 0.2).abs() < 0.005, "{fit:?}");
    assert!(fit.r_squared > 0.99, "{fit:?}");
    assert!(markdown(&combined).contains("## With the host's stalls taken out"));
    assert!(summary(&combined).contains("-0.50") || summary(&combined).contains("-0.49"));

    // Without probes (the earlier rounds' results), no fit at all.
    assert!(two_rounds().stall_adjusted.is_empty());
}
