use super::*;

/// A run with the given headline figures; CPU use derived from `sut_us`.
pub(crate) fn run(
    study: Study,
    case: &str,
    system: &str,
    workers: u32,
    round: u32,
    value: f64,
    sut_us: f64,
) -> Measurement {
    let duration = 10.0;
    let (rate, gbps, p99) = match study {
        Study::Throughput => (value * 1e9 / 8.0 / 1_048_576.0, value, 1.0),
        Study::Latency => (1000.0, 0.0, value),
        _ => (value, 0.0, 1.0),
    };
    let requests = (rate * duration) as u64;
    let sut_secs = sut_us * requests as f64 / 1e6;
    let cpu = CpuUse::new(
        duration, sut_secs, workers, 5.0, 1, 1.0, false, 20.0, 2, requests,
    );
    Measurement {
        study,
        case: case.to_owned(),
        system: system.to_owned(),
        workers,
        round,
        url: "http://app.example.com/1kb.bin".into(),
        connections: 100,
        threads: 1,
        rate_requested: (study == Study::Latency).then_some(1000.0),
        duration_secs: duration,
        requests,
        warmup_requests: 0,
        rate_achieved: rate,
        gbps,
        bytes_read: requests * 1024,
        errors: ErrorCounts::default(),
        handshakes: Handshakes::default(),
        latency_ms: LatencyMs {
            p99,
            ..LatencyMs::default()
        },
        cpu,
        bound: classify(&cpu, None, rate),
    }
}

fn cpu(sut: f64, sut_cpus: u32, load: f64, load_cpus: u32, pods: f64, shared: bool) -> CpuUse {
    CpuUse::new(
        10.0, sut, sut_cpus, load, load_cpus, pods, shared, 20.0, 2, 1000,
    )
}

#[test]
fn medians_and_spread_of_rounds() {
    let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
    assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
    assert!((s.relative() - 1.0).abs() < 1e-12);
    let even = Spread::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
    assert_eq!(even.median, 2.5);
    assert_eq!(Spread::of(&[]), None);
    assert_eq!(Spread::of(&[f64::NAN, 5.0]).unwrap().median, 5.0);
    assert_eq!(Spread::of(&[0.0]).unwrap().relative(), 0.0);
}

#[test]
fn cpu_shares_and_cost_per_request() {
    let c = CpuUse::new(10.0, 9.5, 1, 6.0, 1, 3.0, false, 19.0, 2, 950_000);
    assert!((c.sut_util - 0.95).abs() < 1e-12);
    assert!((c.load_util - 0.6).abs() < 1e-12);
    assert!((c.client_side_util - 0.9).abs() < 1e-12);
    assert!((c.sut_us_per_request - 10.0).abs() < 1e-9);
    assert!((c.per_cpu_second() - 100_000.0).abs() < 1e-6);
    // 19 busy − 18.5 ours = 0.5 s of others over 20 CPU-seconds.
    assert!((c.others_util - 0.025).abs() < 1e-12);
    assert!(!c.noisy());
    let empty = CpuUse::new(0.0, 0.0, 1, 0.0, 1, 0.0, false, 0.0, 2, 0);
    assert_eq!((empty.sut_util, empty.sut_us_per_request), (0.0, 0.0));
    assert_eq!(empty.per_cpu_second(), 0.0);
}

#[test]
fn saturation_is_classified_sut_first() {
    assert_eq!(
        classify(&cpu(9.6, 1, 9.7, 1, 0.0, false), None, 1.0),
        Bound::Sut
    );
    assert_eq!(
        classify(&cpu(6.0, 1, 9.2, 1, 0.3, false), None, 1.0),
        Bound::Client
    );
    // The load generator alone is not saturated, but with the pods its CPU is.
    assert_eq!(
        classify(&cpu(6.0, 1, 7.0, 1, 2.0, false), None, 1.0),
        Bound::Client
    );
    assert_eq!(
        classify(&cpu(5.0, 1, 5.0, 1, 1.0, false), None, 1.0),
        Bound::Latency
    );
    // Two workers on the same two CPUs as load and pods.
    assert_eq!(
        classify(&cpu(11.0, 2, 6.0, 2, 1.5, true), None, 1.0),
        Bound::SharedCpu
    );
    assert_eq!(
        classify(&cpu(6.0, 2, 4.0, 2, 1.0, true), None, 1.0),
        Bound::Latency
    );
    // Nobody of ours near 100 %, but the CPUs were busy: other processes took them.
    let taken = cpu(5.0, 1, 5.0, 1, 1.0, false).with_cpusets(0.97, 0.7);
    assert_eq!(classify(&taken, None, 1.0), Bound::Contended);
    let shared_taken = cpu(6.0, 2, 4.0, 2, 1.0, true).with_cpusets(0.95, 0.95);
    assert_eq!(classify(&shared_taken, None, 1.0), Bound::Contended);
    // A fixed rate that was kept up is not a bottleneck, whatever the CPUs did.
    let busy = cpu(9.6, 1, 9.7, 1, 0.0, false);
    assert_eq!(classify(&busy, Some(1000.0), 990.0), Bound::FixedRate);
    assert_eq!(classify(&busy, Some(1000.0), 800.0), Bound::Sut);
}

#[test]
fn aggregates_group_rounds_and_pick_the_usual_bound() {
    let runs = vec![
        run(Study::Rps, "http", "nginx", 1, 1, 80_000.0, 11.0),
        run(Study::Rps, "http", "nginx", 1, 2, 90_000.0, 10.0),
        run(Study::Rps, "http", "nginx", 1, 3, 85_000.0, 12.0),
        run(Study::Rps, "http", "sluice", 1, 1, 88_000.0, 9.0),
    ];
    let aggs = aggregate(&runs);
    assert_eq!(aggs.len(), 2);
    let n = find(&aggs, Study::Rps, "http", 1, "nginx").unwrap();
    assert_eq!(n.value.median, 85_000.0);
    assert_eq!(
        (n.value.min, n.value.max, n.value.n),
        (80_000.0, 90_000.0, 3)
    );
    assert!((n.sut_us_per_request.median - 11.0).abs() < 1e-9);
    assert_eq!(n.bound, runs[1].bound);
    assert!(find(&aggs, Study::Rps, "https", 1, "nginx").is_none());
    assert_eq!(system_order(&runs), vec!["sluice", "nginx"]);
    assert_eq!(worker_counts(&runs), vec![1]);
    assert_eq!(cases_of(&runs, Study::Rps), vec!["http"]);
}

#[test]
fn ratios_divide_sluice_by_nginx_against_targets() {
    let runs = vec![
        run(Study::Rps, "http", "sluice", 1, 1, 90_000.0, 8.0),
        run(Study::Rps, "http", "nginx", 1, 1, 85_000.0, 11.0),
        run(Study::Tps, "rsa-full", "sluice", 1, 1, 1_000.0, 900.0),
        run(Study::Tps, "rsa-full", "nginx", 1, 1, 1_000.0, 1_000.0),
        run(Study::Throughput, "1mb", "sluice", 1, 1, 8.0, 50.0),
        run(Study::Throughput, "1mb", "nginx", 1, 1, 10.0, 40.0),
        run(Study::Latency, "https", "sluice", 1, 1, 2.0, 10.0),
        run(Study::Latency, "https", "nginx", 1, 1, 4.0, 10.0),
        run(Study::Rps, "https", "sluice", 1, 1, 70_000.0, 12.0),
    ];
    let r = ratios(&aggregate(&runs));
    let get = |what: &str| r.iter().find(|x| x.what == what).unwrap();
    let http = get("CPU per request (µs), HTTP 1 KB");
    assert!((http.ratio - 8.0 / 11.0).abs() < 1e-9);
    assert_eq!(http.target.met(http.ratio), Some(true));
    let hs = get("Full TLS handshakes per CPU-second, RSA-2048");
    assert!((hs.ratio - 1000.0 / 900.0).abs() < 1e-6);
    assert_eq!(hs.target.met(hs.ratio), Some(true));
    let tput = get("1 MB throughput (Gbit/s)");
    assert!((tput.ratio - 0.8).abs() < 1e-9);
    assert_eq!(tput.target.met(tput.ratio), Some(false));
    let p99 = get("p99 at 50 % of nginx's RPS, HTTPS");
    assert!((p99.ratio - 0.5).abs() < 1e-9);
    // Only Sluice measured: no ratio.
    assert!(r
        .iter()
        .all(|x| x.what != "CPU per request (µs), HTTPS 1 KB"));
    assert_eq!(Target::None.met(2.0), None);
    assert_eq!(Target::AtMost(0.8).label(), "≤ 0.8");
}

#[test]
fn sizing_rows_measured_then_extrapolated_with_costs() {
    let runs = vec![
        run(Study::Rps, "http", "nginx", 1, 1, 80_000.0, 12.5),
        run(Study::Rps, "https", "nginx", 1, 1, 60_000.0, 15.0),
        run(Study::Tps, "rsa-full", "nginx", 1, 1, 1_000.0, 1_000.0),
        run(Study::Rps, "http", "nginx", 2, 1, 120_000.0, 13.0),
    ];
    let aggs = aggregate(&runs);
    let rows = sizing(&aggs, &["nginx".to_owned()], Some(0.05));
    let workers: Vec<(u32, bool)> = rows.iter().map(|r| (r.workers, r.measured)).collect();
    assert_eq!(
        workers,
        vec![(1, true), (2, true), (4, false), (8, false), (16, false)]
    );
    let one = &rows[0];
    assert_eq!(one.rps_http, Some(80_000.0));
    assert_eq!(one.tps_rsa_full, Some(1_000.0));
    assert_eq!(one.tps_rsa_resumed, None);
    // $0.05 per CPU-hour at 80k req/s: 0.05 / (80_000 × 3600) × 1e6.
    let want = 0.05 / (80_000.0 * 3600.0) * 1e6;
    assert!((one.cost_per_million_http.unwrap() - want).abs() < 1e-15);
    assert!((one.cost_per_month.unwrap() - 0.05 * HOURS_PER_MONTH).abs() < 1e-9);
    let two = &rows[1];
    assert_eq!(two.rps_https, None);
    assert!(
        (two.cost_per_million_http.unwrap() - 2.0 * 0.05 / (120_000.0 * 3600.0) * 1e6).abs()
            < 1e-15
    );
    // 4 workers: 4 × (1e6 / 12.5 µs) = 320k req/s, 4 × 1000 handshakes/s.
    let four = &rows[2];
    assert!((four.rps_http.unwrap() - 320_000.0).abs() < 1e-6);
    assert!((four.tps_rsa_full.unwrap() - 4_000.0).abs() < 1e-6);
    assert!(sizing(&aggs, &["nginx".to_owned()], None)[0]
        .cost_per_million_http
        .is_none());
    assert_eq!(cost_per_million(1.0, 1, 0.0), None);
}

#[test]
fn results_json_has_the_documented_shape_and_round_trips() {
    let results = CapacityResults {
        schema: SCHEMA.to_owned(),
        started_at: "2026-11-21T03:00:00Z".into(),
        command: "rps".into(),
        setup: Setup::default(),
        skipped: vec![],
        runs: vec![run(Study::Rps, "https", "sluice", 1, 1, 70_000.0, 14.0)],
        cost_per_cpu_hour: None,
    };
    let json = serde_json::to_value(&results).unwrap();
    let r = &json["runs"][0];
    assert_eq!(r["study"], "rps");
    assert_eq!(r["bound"], "sut");
    for key in [
        "case",
        "system",
        "workers",
        "round",
        "url",
        "connections",
        "threads",
        "rate_requested",
        "requests",
        "warmup_requests",
        "rate_achieved",
        "gbps",
        "errors",
        "handshakes",
        "latency_ms",
    ] {
        assert!(r.get(key).is_some(), "{key}");
    }
    for key in [
        "wall_secs",
        "sut_secs",
        "sut_cpus",
        "load_secs",
        "pods_secs",
        "sut_us_per_request",
        "sut_util",
        "load_util",
        "others_util",
    ] {
        assert!(r["cpu"][key].is_number(), "cpu.{key}");
    }
    assert_eq!(r["latency_ms"]["p99.9"], 0.0);
    let back: CapacityResults = serde_json::from_value(json).unwrap();
    assert_eq!(back.runs.len(), 1);
    assert_eq!(
        serde_json::to_value(Bound::SharedCpu).unwrap(),
        "shared-cpu"
    );
}

#[test]
fn merging_results_concatenates_runs_and_lists_sources() {
    let make = |cmd: &str, study| CapacityResults {
        schema: SCHEMA.to_owned(),
        started_at: "t".into(),
        command: cmd.into(),
        setup: Setup {
            pinning: vec![Pinning {
                workers: 1,
                sut_cpus: Some("0".into()),
                load_cpus: Some("1".into()),
                load_threads: 1,
                pods: 1,
                shared: false,
                description: "x".into(),
            }],
            ..Setup::default()
        },
        skipped: vec![],
        runs: vec![run(study, "x", "nginx", 1, 1, 1.0, 1.0)],
        cost_per_cpu_hour: None,
    };
    let merged = merge(vec![
        ("a.json".into(), make("rps", Study::Rps)),
        ("b.json".into(), make("tps", Study::Tps)),
    ])
    .unwrap();
    assert_eq!(merged.runs.len(), 2);
    assert_eq!(merged.setup.sources, vec!["a.json", "b.json"]);
    assert_eq!(merged.setup.pinning.len(), 1);
    assert!(merge(vec![]).is_none());
}
