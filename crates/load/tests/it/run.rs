//! End-to-end runs that succeed: rate accuracy, closed loop, warm-up, result files, HTTP/2.

use crate::support::{remove_temp, Behavior, ConnServer, TestServer};

#[test]
fn an_open_loop_run_sends_exactly_the_requested_rate_and_writes_its_files() {
    let server = TestServer::start(Behavior::Ok);
    let url = server.url("http");
    let json = crate::support::temp_path("results.json");
    let hgrm = crate::support::temp_path("latency.hgrm");
    let (json_arg, hgrm_arg) = (json.display().to_string(), hgrm.display().to_string());
    let argv = [
        "-t", "2", "-c", "4", "-R", "200", "-d", "1s", "--warmup", "500ms", "-L", "-U", "--json",
        &json_arg, "--hgrm", &hgrm_arg, &url,
    ];
    assert_eq!(load::run_cli(crate::support::args(&argv)).unwrap(), 0);

    let results: load::Results =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(results.schema, load::SCHEMA);
    assert_eq!(results.requests, 200, "exactly rate × duration");
    assert_eq!(results.achieved_rate, 200.0);
    assert_eq!(results.requested_rate, Some(200.0));
    assert_eq!(results.unsent, 0);
    assert_eq!(
        results.warmup.completed, 100,
        "the warm-up ran on the same schedule"
    );
    assert_eq!(
        results.latency.corrected.count, 200,
        "and stayed out of the histogram"
    );
    assert_eq!(server.count(|s| &s.requests), 300);
    assert_eq!(results.bytes_read, 200 * 43);
    assert_eq!(results.series.iter().map(|p| p.completed).sum::<u64>(), 200);
    // The early series (5 s by default) covers the whole 1 s run, 100 ms at a time, and the clock
    // started after the connections were ready.
    assert_eq!(results.early_series_secs, 5.0);
    assert!(
        (10..=12).contains(&results.early_series.len()),
        "{:?}",
        results.early_series
    );
    assert_eq!(
        results
            .early_series
            .iter()
            .map(|p| p.completed)
            .sum::<u64>(),
        200
    );
    assert!(results
        .early_series
        .iter()
        .all(|p| p.completed == 0 || p.send_late_max_us.is_some()));
    assert!(results.start_lead_secs >= 0.01);
    let after_second_0: u64 = results.series[1..].iter().map(|p| p.completed).sum();
    let without = results
        .latency
        .corrected_without_first_second
        .as_ref()
        .unwrap();
    assert_eq!(without.count, after_second_0);
    assert_eq!(results.status_codes[&200], 200);
    assert_eq!(results.tls_resumption, None);

    let hgrm_text = std::fs::read_to_string(&hgrm).unwrap();
    remove_temp(&json);
    remove_temp(&hgrm);
    assert!(hgrm_text.starts_with("       Value     Percentile TotalCount 1/(1-Percentile)\n\n"));
    assert!(hgrm_text.contains(&format!("Total count    = {:>12}]", results.requests)));
}

#[test]
fn a_closed_loop_run_goes_as_fast_as_it_can_on_kept_alive_connections() {
    let server = TestServer::start(Behavior::Ok);
    let results = crate::support::run(&["-t", "1", "-c", "2", "-d", "300ms", &server.url("http")]);
    assert_eq!(results.errors.total(), 0, "{:?}", results.error_examples);
    assert!(results.requests > 100, "{}", results.requests);
    assert_eq!(results.requested_rate, None);
    assert_eq!(results.unsent, 0);
    // Closed loop: the intended start is the send, so both histograms agree.
    assert_eq!(
        results.latency.corrected.hdr_histogram,
        results.latency.uncorrected.hdr_histogram
    );
    assert_eq!(server.count(|s| &s.accepted), 2);
}

#[test]
fn connect_to_overrides_the_urls_address_and_host_goes_to_the_server() {
    let server = TestServer::start(Behavior::Ok);
    let connect_to = server.addr.to_string();
    let results = crate::support::run(&[
        "-t",
        "1",
        "-c",
        "1",
        "-R",
        "50",
        "-d",
        "200ms",
        "--connect-to",
        &connect_to,
        "-H",
        "Host: app.example.com",
        "http://app.example.com:9/",
    ]);
    assert_eq!(results.errors.total(), 0, "{:?}", results.error_examples);
    assert_eq!(results.requests + results.unsent, 10);
    assert!(results.requests > 0);
}

#[test]
fn new_connection_per_request_opens_one_connection_per_request() {
    let server = TestServer::start(Behavior::Ok);
    let results = crate::support::run(&[
        "-t",
        "1",
        "-c",
        "2",
        "-R",
        "100",
        "-d",
        "300ms",
        "--new-connection-per-request",
        &server.url("http"),
    ]);
    assert_eq!(results.errors.total(), 0, "{:?}", results.error_examples);
    assert_eq!(results.requests + results.unsent, 30);
    assert_eq!(server.count(|s| &s.accepted), results.requests);
}

#[test]
fn http2_prior_knowledge_works_against_a_hyper_server() {
    use http_body_util::Full;
    use hyper::body::Bytes;

    let server = ConnServer::start(|socket| async move {
        let service = hyper::service::service_fn(|_req| async {
            Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(Bytes::from_static(
                b"hello over h2",
            ))))
        });
        let _ = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .serve_connection(hyper_util::rt::TokioIo::new(socket), service)
            .await;
    });
    let addr = server.addr;

    let url = format!("http://{addr}/");
    let results = crate::support::run(&[
        "-t", "1", "-c", "2", "-R", "100", "-d", "300ms", "--http2", &url,
    ]);
    assert_eq!(results.errors.total(), 0, "{:?}", results.error_examples);
    assert_eq!(results.requests + results.unsent, 30);
    assert_eq!(results.bytes_read, results.requests * 13);
}

#[test]
fn http2_connections_a_server_ends_with_goaway_are_replaced_without_an_error() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    use http_body_util::Full;
    use hyper::body::Bytes;

    // Like a proxy at its keep-alive-requests: each connection ends gracefully (GOAWAY) after its
    // third response. The requests after it were never sent on that connection.
    const PER_CONNECTION: u64 = 3;
    let connections = Arc::new(AtomicU64::new(0));
    let accepted = connections.clone();
    let server = ConnServer::start(move |socket| {
        accepted.fetch_add(1, Ordering::Relaxed);
        async move {
            let served = Arc::new(AtomicU64::new(0));
            let last = Arc::new(tokio::sync::Notify::new());
            let notify = last.clone();
            let service = hyper::service::service_fn(move |_req| {
                if served.fetch_add(1, Ordering::Relaxed) + 1 == PER_CONNECTION {
                    notify.notify_one();
                }
                async {
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                        Bytes::from_static(b"hello over h2"),
                    )))
                }
            });
            let conn =
                hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(socket), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                () = last.notified() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        }
    });
    let addr = server.addr;

    let url = format!("http://{addr}/");
    let results = crate::support::run(&[
        "-t", "1", "-c", "2", "-R", "100", "-d", "600ms", "--http2", &url,
    ]);
    assert_eq!(results.errors.total(), 0, "{:?}", results.error_examples);
    assert_eq!(results.requests + results.unsent, 60);
    // The server ended connections, and the load replaced them. (A request sent as the GOAWAY
    // travels is still served: hyper's graceful shutdown first announces the highest stream id.)
    let opened = connections.load(Ordering::Relaxed);
    assert!(
        opened >= results.requests / (PER_CONNECTION + 1),
        "{opened} connections for {} requests",
        results.requests
    );
}

#[test]
fn hold_idle_keeps_every_connection_open_after_one_request_each() {
    let server = TestServer::start(Behavior::Ok);
    let config = load::Config::try_from(crate::support::args(&[
        "--hold-idle",
        "-t",
        "2",
        "-c",
        "40",
        "-d",
        "300ms",
        &server.url("http"),
    ]))
    .expect("valid config");
    let mut seen_while_idle = None;
    let held = load::hold_idle(&config, |open, failed| {
        // Called once all are idle: the server has answered one request per connection, on
        // as many connections.
        seen_while_idle = Some((
            open,
            failed,
            server.count(|s| &s.accepted),
            server.count(|s| &s.requests),
        ));
    })
    .unwrap();
    assert_eq!(
        held,
        load::Held {
            open: 40,
            failed: 0
        }
    );
    assert_eq!(seen_while_idle, Some((40, 0, 40, 40)));
}
