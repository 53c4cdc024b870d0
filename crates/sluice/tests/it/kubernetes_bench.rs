//! How fast Kubernetes changes reach traffic through `sluice serve --kubernetes`, and whether that
//! depends on how much is configured. Not tests: run them on a quiet machine with
//!
//! ```sh
//! cargo test --release -p sluice --test it -- --ignored --nocapture --test-threads 1 kubernetes_bench::
//! ```
//!
//! (or `scripts/bench-kube.sh`, which writes the report). Each prints a Markdown table, and appends
//! it to `$SLUICE_BENCH_KUBE_OUT` when that is set.
//!
//! Latencies run from the moment the API server answered the write (PUT/POST returned) to the
//! first response through Sluice that shows the change, polled in a tight loop over one kept-alive
//! connection (resolution: one proxied request, ~0.1 ms).

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use crate::support::bench::*;
use crate::support::kube::*;
use crate::support::*;
use serde_json::Value;

const PORT: u16 = 8080;
/// A poll that has not seen the change after this long is a failure.
const LIMIT: Duration = Duration::from_secs(30);

/// `198.18.1.i`: the addresses an endpoint moves to, one per sample (i in 1..=250).
fn probe_address(i: usize) -> Ipv4Addr {
    assert!((1..=250).contains(&i));
    Ipv4Addr::new(198, 18, 1, i as u8)
}

/// `198.19.x.y` for endpoint number `i` of the scale test: never listened on, only stored.
fn bulk_address(i: usize) -> String {
    format!("198.19.{}.{}", i / 250, i % 250 + 1)
}

/// One backend process listening on `198.18.0.11` and the first `probes` probe addresses: its
/// hello page says which local address answered, so one process stands for many pods.
fn probe_backend(cluster: &Cluster, probes: usize) -> Pod {
    let mut addresses = vec![Ipv4Addr::new(198, 18, 0, 11)];
    addresses.extend((1..=probes).map(probe_address));
    cluster.add_addresses(&addresses);
    let listen: Vec<String> = addresses
        .iter()
        .flat_map(|ip| ["--listen".to_owned(), format!("{ip}:{PORT}")])
        .collect();
    let mut args = vec!["backend", "--name", "probe"];
    args.extend(listen.iter().map(String::as_str));
    let process = run_sluice(&args);
    Pod {
        addr: format!("198.18.0.11:{PORT}").parse().unwrap(),
        process,
        name: "probe".into(),
    }
}

fn probe_slice(ns: &str, service: &str, ip: IpAddr) -> Value {
    endpoint_slice(
        ns,
        &format!("{service}-1"),
        service,
        PORT,
        &[Endpoint::ready(ip)],
    )
}

/// Moves Service `service`'s only endpoint to probe address 1, 2, … `samples` in turn; for each,
/// the time from the PUT returning to the first response from the new address.
fn endpoint_move_latencies(
    cluster: &Cluster,
    sluice: &KubeSluice,
    ns: &str,
    service: &str,
    host: &str,
    samples: usize,
) -> Vec<Duration> {
    let mut client = HttpClient::new(sluice.http, host);
    let mut latencies = Vec::with_capacity(samples);
    for i in 1..=samples {
        let ip = IpAddr::V4(probe_address(i));
        let needle = format!("Server address: {ip}:{PORT}\n");
        cluster.replace(&probe_slice(ns, service, ip));
        let written = Instant::now();
        if std::env::var_os("SLUICE_BENCH_DEBUG").is_some() {
            let unix = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap();
            eprintln!("PUT returned at unix_us={}", unix.as_micros());
        }
        loop {
            let response = client.get("/").expect("GET through Sluice");
            if response.status == 200 && response.text().contains(&needle) {
                latencies.push(written.elapsed());
                break;
            }
            assert!(
                written.elapsed() < LIMIT,
                "{host} not answered by {ip} within {LIMIT:?} (last: {} {})",
                response.status,
                response.text().lines().next().unwrap_or("")
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    latencies
}

/// A cluster with namespace `ns`, IngressClass sluice, Service `probe` whose one endpoint is
/// the probe backend, and Ingress `probe` routing `probe.test` to it.
fn probe_cluster(test: &str, ns: &str, probes: usize) -> (Cluster, Pod) {
    let cluster = Cluster::start(test);
    cluster.create(&namespace(ns));
    cluster.create(&ingress_class("sluice", CONTROLLER));
    let pod = probe_backend(&cluster, probes);
    cluster.create(&service(ns, "probe"));
    cluster.create(&probe_slice(ns, "probe", pod.addr.ip()));
    cluster.create(&ingress(ns, "probe", Some("sluice"), "probe.test", "probe"));
    (cluster, pod)
}

#[test]
#[ignore = "benchmark: cargo test --release -p sluice --test it -- --ignored --nocapture kubernetes_bench::"]
fn bench_changes_to_traffic() {
    let ns = "bench";
    let samples = 100;
    let (cluster, _pod) = probe_cluster("bench-latency", ns, samples);
    let sluice = cluster.sluice(ns, &[]);
    sluice.wait_served_by("probe.test", "probe", LIMIT);

    // (a) EndpointSlice update → the new endpoint answers.
    let moves = summarize(endpoint_move_latencies(
        &cluster,
        &sluice,
        ns,
        "probe",
        "probe.test",
        samples,
    ));

    // (b) Ingress created → its host's first 200.
    let mut created = Vec::with_capacity(samples);
    for i in 0..samples {
        let host = format!("new-{i}.test");
        let mut client = HttpClient::new(sluice.http, &host);
        assert_eq!(client.get("/").unwrap().status, 404, "{host} before");
        cluster.create(&ingress(
            ns,
            &format!("new-{i}"),
            Some("sluice"),
            &host,
            "probe",
        ));
        let written = Instant::now();
        loop {
            let status = client.get("/").expect("GET through Sluice").status;
            if status == 200 {
                created.push(written.elapsed());
                break;
            }
            assert!(
                written.elapsed() < LIMIT,
                "{host} not 200 within {LIMIT:?} (last {status})"
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let created = summarize(created);

    let row = |what: &str, s: &Summary| {
        format!(
            "| {what} | {} | {} | {} | {} |",
            s.samples,
            ms(s.p50),
            ms(s.p99),
            ms(s.max)
        )
    };
    report(&format!(
        "### Change → traffic (1 Service, {samples} samples each)\n\n\
         | change (clock starts when the API server answered the write) | samples | p50 | p99 | max |\n\
         |---|---:|---:|---:|---:|\n{}\n{}\n",
        row(
            "EndpointSlice replaced (endpoint moved to a new pod) → first response from the new pod",
            &moves
        ),
        row("Ingress created (new host) → first 200 for that host", &created),
    ));
}

/// One row of the scale table.
struct ScaleRow {
    ingresses: usize,
    endpoints: usize,
    objects: usize,
    create: Duration,
    ready: Duration,
    initial_sync: String,
    /// VmRSS when the Store held every object (before the first compile), from the log.
    rss_synced: f64,
    /// VmRSS right after the first compile was published, from the log.
    rss_compiled: f64,
    rss_ready: f64,
    /// Of `rss_ready`, anonymous memory (heap, stacks; the rest is the binary's pages).
    anon_ready: f64,
    rss_after: f64,
    moves: Summary,
    /// Median `elapsed_us` of Sluice's own "endpoints updated" log lines for those changes.
    swap_p50_us: u64,
    /// One kept-alive GET through Sluice to the probe Service, before the changes.
    requests: Summary,
}

/// `ingresses` Ingresses over `services` Services with `per_service` endpoints each (one slice
/// per Service), created before Sluice starts; then Sluice's time to ready, its RSS, and 20
/// EndpointSlice changes of the probe Service timed to traffic.
fn scale_run(test: &str, ingresses: usize, services: usize, per_service: usize) -> ScaleRow {
    let ns = "scale";
    let samples = 20;
    let (cluster, _pod) = probe_cluster(test, ns, samples);

    let mut objects = Vec::new();
    for s in 0..services {
        let name = format!("svc-{s}");
        objects.push(service(ns, &name));
        let endpoints: Vec<Value> = (0..per_service)
            .map(|e| {
                serde_json::json!({
                    "addresses": [bulk_address(s * per_service + e)],
                    "conditions": {"ready": true, "serving": true, "terminating": false},
                })
            })
            .collect();
        let mut slice = endpoint_slice(ns, &format!("{name}-1"), &name, PORT, &[]);
        slice["endpoints"] = Value::Array(endpoints);
        objects.push(slice);
    }
    for i in 0..ingresses {
        let service = format!("svc-{}", i % services);
        objects.push(ingress(
            ns,
            &format!("ing-{i}"),
            Some("sluice"),
            &format!("ing-{i}.test"),
            &service,
        ));
    }
    let count = objects.len();
    let started = Instant::now();
    cluster.create_many(objects, 64);
    let create = started.elapsed();
    eprintln!(
        "[{test}] created {count} objects in {:.1} s",
        create.as_secs_f64()
    );

    let started = Instant::now();
    let sluice = cluster.sluice_with(SluiceOptions {
        identity: "sluice-0",
        namespace: ns,
        kubeconfig: None,
        extra: &[],
        wait_ready: false,
        log: None,
        env: &[],
    });
    let deadline = started + Duration::from_secs(300);
    while sluice.ready_status() != Some(200) {
        assert!(
            Instant::now() < deadline && !sluice.has_exited(),
            "not ready within 300 s:\n{}",
            sluice.log_tail(20)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let ready = started.elapsed();
    let rss_ready = proc_mib(sluice.process.pid(), "status", "VmRSS:");
    let anon_ready = proc_mib(sluice.process.pid(), "smaps_rollup", "Anonymous:");
    // Time to look at the process as it is at ready (gdb, /proc/PID/smaps).
    if let Some(hold) = std::env::var("SLUICE_BENCH_HOLD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        eprintln!(
            "[{test}] holding {hold} s at ready: pid {}",
            sluice.process.pid()
        );
        std::thread::sleep(Duration::from_secs(hold));
    }
    // Every Ingress is routed (spot checks across the range).
    for i in [0, ingresses / 2, ingresses - 1] {
        let host = format!("ing-{i}.test");
        // Their endpoints exist only on paper: Sluice routes, the connect fails (502) or is
        // refused; a 404 would mean the Ingress is missing.
        let status = sluice.status(&host, "/");
        assert!(status.is_some_and(|s| s != 404), "{host}: {status:?}");
    }
    sluice.wait_served_by("probe.test", "probe", LIMIT);
    let mut client = HttpClient::new(sluice.http, "probe.test");
    let requests = summarize(
        (0..200)
            .map(|_| {
                let sent = Instant::now();
                assert_eq!(client.get("/").unwrap().status, 200);
                sent.elapsed()
            })
            .collect(),
    );
    let moves = summarize(endpoint_move_latencies(
        &cluster,
        &sluice,
        ns,
        "probe",
        "probe.test",
        samples,
    ));
    let rss_after = proc_mib(sluice.process.pid(), "status", "VmRSS:");
    let log = sluice.log_text();
    let swaps: Vec<u64> = log
        .lines()
        .filter(|l| l.contains("endpoints updated"))
        .filter_map(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix("elapsed_us="))
        })
        .filter_map(|v| v.parse().ok())
        .collect();
    let swaps = &swaps[swaps.len().saturating_sub(samples)..];
    if std::env::var_os("SLUICE_BENCH_DEBUG").is_some() {
        let tail: Vec<&str> = log.lines().rev().take(60).collect();
        eprintln!("{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
    }
    let mut sorted = swaps.to_vec();
    sorted.sort_unstable();
    let swap_p50 = sorted.get(sorted.len() / 2).copied().unwrap_or(0);
    let field = |line: &str, name: &str| -> Option<String> {
        let text = log.lines().find(|l| l.contains(line))?;
        let word = text.split_whitespace().find(|w| w.starts_with(name))?;
        Some(word.trim_start_matches(name).to_owned())
    };
    const SYNCED: &str = "initial sync with the Kubernetes API complete";
    let initial_sync = field(SYNCED, "elapsed_ms=")
        .map(|ms| format!("{ms} ms"))
        .unwrap_or_else(|| "?".into());
    let kib_as_mib = |kib: Option<String>| -> f64 {
        kib.and_then(|k| k.parse::<f64>().ok()).unwrap_or(f64::NAN) / 1024.0
    };
    let rss_synced = kib_as_mib(field(SYNCED, "resident_kib="));
    let rss_compiled = kib_as_mib(field("configuration compiled", "resident_kib="));
    ScaleRow {
        ingresses: ingresses + 1,
        endpoints: services * per_service + 1,
        objects: count + 3,
        create,
        ready,
        initial_sync,
        rss_synced,
        rss_compiled,
        rss_ready,
        anon_ready,
        rss_after,
        moves,
        swap_p50_us: swap_p50,
        requests,
    }
}

#[test]
#[ignore = "benchmark: cargo test --release -p sluice --test it -- --ignored --nocapture kubernetes_bench::"]
fn bench_scale() {
    let small = scale_run("bench-scale-small", 10, 5, 10);
    let large = scale_run("bench-scale-large", 10_000, 5_000, 10);
    let row = |r: &ScaleRow| {
        format!(
            "| {} | {} | {} in {:.1} s | {:.2} s | {} | {:.1} MiB | {:.1} MiB | {:.1} MiB ({:.1} MiB anonymous) | {:.1} MiB | {} | {} | {} | {} µs | {} / {} |",
            r.ingresses,
            r.endpoints,
            r.objects,
            r.create.as_secs_f64(),
            r.ready.as_secs_f64(),
            r.initial_sync,
            r.rss_synced,
            r.rss_compiled,
            r.rss_ready,
            r.anon_ready,
            r.rss_after,
            ms(r.moves.p50),
            ms(r.moves.p99),
            ms(r.moves.max),
            r.swap_p50_us,
            ms(r.requests.p50),
            ms(r.requests.p99),
        )
    };
    report(&format!(
        "### Scale: everything created before Sluice starts\n\n\
         | Ingresses | endpoints | objects created (64 concurrent POSTs) | start → /ready 200 | initial sync (log) | RSS: Store filled (log) | first compile published (log) | RSS at ready | RSS after | slice change → traffic p50 | p99 | max | endpoint swap in Sluice p50 (log) | one GET p50 / p99 |\n\
         |---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n{}\n{}\n\n\
         Endpoints: one EndpointSlice of 10 per Service; the probe Service (1 endpoint, 20 \
         changes) comes on top. --workers 1. RSS: VmRSS; anonymous: heap and stacks \
         (/proc/PID/smaps_rollup), the rest is the binary's pages.\n",
        row(&small),
        row(&large)
    ));
}
