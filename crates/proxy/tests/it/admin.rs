//! The admin surfaces: what the exposed admin port serves (probes, metrics) and what only the
//! loopback status listener serves (the status page and `/config`, which describe every tenant).

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::*;
use http::StatusCode;
use proxy::{Proxy, ProxyConfig, StartError};
use serde_json::{json, Value};

#[tokio::test]
async fn config_is_served_only_on_the_status_listener() {
    let echo = start_backend("echo").await;
    let mut h = Harness::start();
    h.apply(&catch_all("echo", &[addr_of(&echo)]));
    assert!(h.status().ip().is_loopback());

    // The exposed port: probes and metrics, nothing that names a tenant's objects.
    assert_eq!(get(h.admin(), "a", "/healthz").await.status, StatusCode::OK);
    assert_eq!(get(h.admin(), "a", "/ready").await.status, StatusCode::OK);
    assert_eq!(get(h.admin(), "a", "/metrics").await.status, StatusCode::OK);
    let config = get(h.admin(), "a", "/config").await;
    assert_eq!(config.status, StatusCode::NOT_FOUND);
    assert!(
        config.text().contains("--status-listen"),
        "{}",
        config.text()
    );
    assert!(!config.text().contains("default/echo"), "{}", config.text());

    // The status listener: the page and /config.
    let config = get(h.status(), "a", "/config").await;
    assert_eq!(config.status, StatusCode::OK);
    assert!(
        config.json()["config"]["backends"]["default/echo:http"]["ready"].is_array(),
        "{}",
        config.text()
    );
    for path in ["/healthz", "/ready", "/metrics"] {
        assert_eq!(
            get(h.status(), "a", path).await.status,
            StatusCode::NOT_FOUND,
            "{path} on the status listener"
        );
    }
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn the_status_page_shows_swaps_and_request_rates_per_ingress_between_views() {
    let (one, two) = (start_backend("one").await, start_backend("two").await);
    let mut h = Harness::start();
    h.apply(&catch_all("web", &[addr_of(&one)]));
    assert_eq!(
        get(h.admin(), "a", "/").await.status,
        StatusCode::NOT_FOUND,
        "the page names tenants: never on the exposed port"
    );

    let first = get(h.status(), "s", "/").await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.headers["content-type"], "text/html; charset=utf-8");
    assert!(first.headers["content-security-policy"]
        .to_str()
        .unwrap()
        .starts_with("default-src 'none'"));
    let text = first.text();
    assert!(text.contains("First view since start"), "{text}");
    assert!(
        text.contains("first configuration: 1 Ingress, 1 host, 0 diagnostics"),
        "{text}"
    );

    // Traffic on two workers, an endpoint swap (the fast path), then the second view.
    for _ in 0..12 {
        assert_eq!(get(h.http(), "any.test", "/").await.status, StatusCode::OK);
    }
    h.update(&catch_all("web", &[addr_of(&one), addr_of(&two)]));
    let text = get(h.status(), "s", "/").await.text();
    assert!(text.contains("since the previous view"), "{text}");
    assert!(
        text.contains("<tr><td>default/web</td>"),
        "a traffic row for the Ingress: {text}"
    );
    // Every worker's count is in the total: twelve requests, none a 5xx.
    assert!(
        text.contains("<td class=\"num\">12</td><td class=\"num\">0</td>"),
        "{text}"
    );
    assert!(
        text.contains("default/web:http: 2 ready, 0 serving and terminating"),
        "the endpoint swap and what it changed: {text}"
    );
    assert!(
        text.contains(&format!("<code>{}</code>", addr_of(&two))),
        "{text}"
    );
    shutdown(h.control.proxy).await;
}

#[test]
fn a_status_listener_on_a_non_loopback_address_is_refused_at_start() {
    let any = SocketAddr::from((LOCALHOST, 0));
    for status_listen in ["0.0.0.0:0", "[::]:0", "192.0.2.1:10246"] {
        let started = Proxy::start(ProxyConfig {
            http_listen: any,
            https_listen: any,
            admin_listen: any,
            health: proxy::HealthCheck::default(),
            status_listen: status_listen.parse().unwrap(),
            workers: NonZeroUsize::MIN,
            access_log: proxy::AccessLogOutput::Stdout,
            metric_identity: proxy::MetricIdentity::default(),
            metric_options: proxy::MetricOptions::default(),
            port_retry_interval: proxy::DEFAULT_PORT_RETRY_INTERVAL,
        });
        let error = started.expect_err("a non-loopback status listener is refused");
        assert!(
            matches!(error, StartError::StatusNotLoopback { .. }),
            "{error:?}"
        );
        let text = error.to_string();
        assert!(text.contains("--status-listen"), "{text}");
        assert!(text.contains("127.0.0.1"), "{text}");
    }
}

/// A proxy on loopback whose admin listener also answers `/custom/health`, as `/healthz`
/// (`as_ready`: as `/ready`).
fn with_custom_health_path(as_ready: bool) -> Proxy {
    let loopback = SocketAddr::from((LOCALHOST, 0));
    Proxy::start(ProxyConfig {
        http_listen: loopback,
        https_listen: loopback,
        admin_listen: loopback,
        health: proxy::HealthCheck {
            extra_path: Some("/custom/health".into()),
            as_ready,
        },
        status_listen: loopback,
        workers: NonZeroUsize::MIN,
        access_log: proxy::AccessLogOutput::Stdout,
        metric_identity: proxy::MetricIdentity::default(),
        metric_options: proxy::MetricOptions::default(),
        port_retry_interval: proxy::DEFAULT_PORT_RETRY_INTERVAL,
    })
    .expect("proxy starts")
}

/// `--health-check-path`: the custom path answers as `/healthz` does, on the admin listener
/// only; `/healthz` keeps answering.
#[tokio::test]
async fn a_health_check_path_answers_as_healthz() {
    let proxy = with_custom_health_path(false);
    for path in ["/custom/health", "/healthz"] {
        let reply = get(proxy.admin_addr(), "probe", path).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
        assert_eq!(reply.text(), "ok\n");
    }
    assert_eq!(
        get(proxy.admin_addr(), "probe", "/custom").await.status,
        StatusCode::NOT_FOUND
    );
    assert_ne!(
        get(proxy.status_addr(), "probe", "/custom/health")
            .await
            .status,
        StatusCode::OK,
        "the status listener is not a probe"
    );
    shutdown(proxy).await;
}

/// `--healthz-as-ready` (set by the ingress-nginx chart's entry, whose probes all look at
/// `/healthz`): `/healthz` and the custom path answer as `/ready`, from not ready before the
/// first configuration, to ready, to not ready while terminating.
#[tokio::test]
async fn healthz_as_ready_answers_as_ready_through_start_and_shutdown() {
    let proxy = with_custom_health_path(true);
    let admin = proxy.admin_addr();
    let answers = |status: StatusCode, text: &'static str| async move {
        for path in ["/healthz", "/custom/health", "/ready"] {
            let reply = get(admin, "probe", path).await;
            assert_eq!(
                (reply.status, reply.text()),
                (status, text.to_owned()),
                "{path}"
            );
        }
    };
    answers(
        StatusCode::SERVICE_UNAVAILABLE,
        "not ready: no configuration published yet\n",
    )
    .await;
    proxy.publish(Arc::new(model::Compiled::default()));
    answers(StatusCode::OK, "ready\n").await;
    proxy.terminating();
    answers(
        StatusCode::SERVICE_UNAVAILABLE,
        "not ready: shutting down\n",
    )
    .await;
    shutdown(proxy).await;
}

/// Many tenants, so that `/config` and `/metrics` are large enough to cost something to render.
fn many_tenants(count: usize, endpoint: SocketAddr) -> Vec<Value> {
    let mut objects = Vec::with_capacity(count * 3);
    for i in 0..count {
        let name = format!("app-{i}");
        objects.push(service(&name, &[("http", 80)]));
        objects.extend(slices(&name, &[endpoint]));
        objects.push(ingress(
            &name,
            json!({"rules": [rule(&format!("{name}.test"), vec![
                path("/", "Prefix", to(&name)),
                path("/api", "Prefix", to(&name)),
            ])]}),
        ));
    }
    objects
}

/// Hammers `path` on `addr` over one keep-alive connection until `stop`; counts 200s.
async fn hammer(addr: SocketAddr, path: &'static str, stop: Arc<AtomicBool>, ok: Arc<AtomicU64>) {
    let mut client = KeepAliveClient::connect(addr).await;
    while !stop.load(Ordering::Relaxed) {
        let reply = client.get("hammer", path).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
        ok.fetch_add(1, Ordering::Relaxed);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn probes_answer_while_config_and_metrics_are_hammered() {
    // The issue asks for 100 ms. The median must meet it (one scheduling hiccup on a loaded CI
    // machine cannot move a median) and every probe a generous bound; the latencies are printed.
    // Measured on 2 busy cores, debug build: p50 0.4 ms, max 10-26 ms; with /config and the
    // /metrics render on the probes' thread (as before the split): p50 ~500 ms, max ~700 ms.
    const MEDIAN_BOUND: Duration = Duration::from_millis(100);
    const PROBE_BOUND: Duration = Duration::from_secs(1);
    const HAMMERERS: usize = 4;
    const PROBES: usize = 40;
    const TENANTS: usize = 1500;

    let echo = start_backend("echo").await;
    let mut h = Harness::start();
    h.apply(&many_tenants(TENANTS, addr_of(&echo)));
    let config_size = get(h.status(), "a", "/config").await.body.len();
    // Counters per route appear once a route has seen a request: give every tenant one.
    // (a connection per 500: keep-alive-requests closes one after 1000)
    for first in (0..TENANTS).step_by(500) {
        let mut client = Client::connect(h.http()).await;
        for i in first..(first + 500).min(TENANTS) {
            let reply = client.get(&format!("app-{i}.test"), "/healthz").await;
            assert_eq!(reply.status, StatusCode::OK);
        }
    }
    let metrics_size = get(h.admin(), "a", "/metrics").await.body.len();

    let stop = Arc::new(AtomicBool::new(false));
    let configs = Arc::new(AtomicU64::new(0));
    let scrapes = Arc::new(AtomicU64::new(0));
    let mut hammers = Vec::new();
    for _ in 0..HAMMERERS {
        hammers.push(tokio::spawn(hammer(
            h.status(),
            "/config",
            stop.clone(),
            configs.clone(),
        )));
        hammers.push(tokio::spawn(hammer(
            h.admin(),
            "/metrics",
            stop.clone(),
            scrapes.clone(),
        )));
    }
    // Start probing once both are under way.
    eventually_async(STEP, "the hammering is under way", || async {
        configs.load(Ordering::Relaxed) > 0 && scrapes.load(Ordering::Relaxed) > 0
    })
    .await;

    let (configs_before, scrapes_before) = (
        configs.load(Ordering::Relaxed),
        scrapes.load(Ordering::Relaxed),
    );
    let mut latencies = Vec::with_capacity(PROBES * 2);
    for i in 0..PROBES {
        let probe = if i % 2 == 0 { "/healthz" } else { "/ready" };
        let started = Instant::now();
        let reply = get(h.admin(), "kubelet", probe).await;
        latencies.push(started.elapsed());
        assert_eq!(reply.status, StatusCode::OK, "{probe}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let configs_during = configs.load(Ordering::Relaxed) - configs_before;
    let scrapes_during = scrapes.load(Ordering::Relaxed) - scrapes_before;
    stop.store(true, Ordering::Relaxed);
    for hammer in hammers {
        bounded(hammer).await.expect("a hammering task failed");
    }

    latencies.sort();
    let max = *latencies.last().unwrap();
    let median = latencies[latencies.len() / 2];
    eprintln!(
        "probes while hammered ({HAMMERERS}+{HAMMERERS} clients; /config {config_size} B, \
         /metrics {metrics_size} B; {configs_during} /config and {scrapes_during} /metrics \
         answered meanwhile): p50 {median:?}, p90 {:?}, max {max:?}",
        latencies[latencies.len() * 9 / 10],
    );
    assert!(
        configs_during > 0 && scrapes_during > 0,
        "the probes did not overlap the hammering"
    );
    assert!(
        median < MEDIAN_BOUND,
        "half the probes took {median:?} or more (all: {latencies:?})"
    );
    assert!(
        max < PROBE_BOUND,
        "a probe took {max:?} (all: {latencies:?})"
    );
    shutdown(h.control.proxy).await;
}

/// The value of one sample line of `/metrics` (exact series text before the value).
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn memory_and_connections_by_protocol_and_state_are_exposed() {
    let backend = start_backend("web").await;
    let ca = TestCa::new();
    let leaf = ca.leaf(&["conns.test"]);
    let mut h = Harness::start();
    let mut objects = catch_all("web", &[addr_of(&backend)]);
    objects.push(tls_secret("conns-tls", &leaf));
    // The certificate for every TLS client: the catch-all Ingress names no host.
    h.control.options.default_tls_secret = default_tls_secret("conns-tls");
    h.apply(&objects);

    // Two idle plain connections, one idle HTTP/1.1 over TLS, one idle HTTP/2, and one plain
    // connection with a request in flight.
    let mut idle_plain = Vec::new();
    for _ in 0..2 {
        let mut client = Client::connect(h.http()).await;
        assert_eq!(client.get("conns.test", "/").await.status, StatusCode::OK);
        idle_plain.push(client);
    }
    let (tls, _) = ca
        .connect(h.https(), "conns.test", &[b"http/1.1"])
        .await
        .unwrap();
    let mut tls_client = Client::over(tls).await;
    assert_eq!(
        tls_client.get("conns.test", "/").await.status,
        StatusCode::OK
    );
    let (tls, _) = ca.connect(h.https(), "conns.test", &[b"h2"]).await.unwrap();
    let mut h2 = H2Client::over(tls).await;
    assert_eq!(h2.get("https://conns.test/").await.status, StatusCode::OK);
    let mut busy = Client::connect(h.http()).await;
    let in_flight = tokio::spawn(async move { busy.get("conns.test", "/slow?ms=3000").await });

    let expected = [
        ("http1", "idle", 2.0),
        ("http1", "active", 1.0),
        ("https1", "idle", 1.0),
        ("https1", "active", 0.0),
        ("h2", "idle", 1.0),
        ("h2", "active", 0.0),
    ];
    eventually_async(STEP, "connection gauges to match", || async {
        let metrics = get(h.admin(), "a", "/metrics").await.text();
        // The scrape itself is on the admin listener, not counted here.
        expected.iter().all(|(protocol, state, n)| {
            sample(
                &metrics,
                &format!("sluice_client_connections{{protocol=\"{protocol}\",state=\"{state}\"}}"),
            ) == Some(*n)
        })
    })
    .await;
    let metrics = get(h.admin(), "a", "/metrics").await.text();
    let resident = sample(&metrics, "process_resident_memory_bytes").unwrap();
    assert!(resident > 1_000_000.0, "{resident}");
    assert!(sample(&metrics, "process_open_fds").unwrap() >= 5.0);
    assert!(sample(&metrics, "process_max_fds").unwrap() > 0.0);
    in_flight.abort();
    drop((idle_plain, tls_client, h2));
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn every_worker_probes_its_loop_lag_ten_times_a_second() {
    let mut h = Harness::with_workers(2);
    h.apply(&catch_all("web", &[]));
    let before = get(h.admin(), "a", "/metrics").await.text();
    let count = |text: &str| sample(text, "sluice_worker_loop_lag_seconds_count").unwrap();
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let after = get(h.admin(), "a", "/metrics").await.text();
    // Two workers, a probe each every 100 ms: ~20 in the second; a loaded machine delays
    // some, and a delayed probe is still counted once.
    let probes = count(&after) - count(&before);
    assert!(probes >= 10.0, "{probes} probes in a second\n{after}");
    assert_eq!(
        sample(&after, "sluice_worker_loop_lag_seconds_bucket{le=\"+Inf\"}"),
        Some(count(&after))
    );
    shutdown(h.control.proxy).await;
}
