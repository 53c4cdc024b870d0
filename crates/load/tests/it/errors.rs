//! Each error class against a server made to produce it; each failed request counts once.

use crate::support::{Behavior, TestServer};
use load::ErrorCounts;

fn only(errors: &ErrorCounts, class: &str) -> u64 {
    let others = match class {
        "connect" => errors.read + errors.write + errors.timeout + errors.status,
        "read" => errors.connect + errors.write + errors.timeout + errors.status,
        "timeout" => errors.connect + errors.read + errors.write + errors.status,
        "status" => errors.connect + errors.read + errors.write + errors.timeout,
        _ => unreachable!(),
    };
    assert_eq!(others, 0, "only {class} errors expected: {errors:?}");
    errors.total()
}

#[test]
fn a_refused_port_is_a_connect_error_per_request_and_exit_code_1() {
    let url = format!("http://{}/", testkit::closed_port());
    // 20/s for 500 ms on one connection: 10 requests due, each finds no server.
    let argv = [
        "-t",
        "1",
        "-c",
        "1",
        "-R",
        "20",
        "-d",
        "500ms",
        url.as_str(),
    ];
    let results = crate::support::run(&argv);
    // Every due request is either a connect error or, on a machine too busy to keep up at the
    // very end, unsent; never anything else.
    assert_eq!(only(&results.errors, "connect") + results.unsent, 10);
    assert!(results.errors.connect >= 8);
    assert_eq!(results.requests, 0);
    assert!(
        results.error_examples[&load::ErrorClass::Connect].contains("refused"),
        "{:?}",
        results.error_examples
    );
    assert_eq!(load::exit_code(&results), 1);
    assert_eq!(load::run_cli(crate::support::args(&argv)).unwrap(), 1);
}

#[test]
fn a_reset_mid_response_is_a_read_error() {
    let server = TestServer::start(Behavior::ResetMidResponse);
    let url = server.url("http");
    let results = crate::support::run(&["-t", "1", "-c", "1", "-R", "20", "-d", "500ms", &url]);
    let reads = only(&results.errors, "read");
    assert_eq!(reads + results.unsent, 10);
    assert!(reads >= 8);
    assert_eq!(results.requests, 0);
    // Every failure replaced the connection: one per request.
    assert_eq!(server.count(|s| &s.accepted), reads);
}

#[test]
fn a_server_that_never_answers_is_one_timeout_per_request() {
    let server = TestServer::start(Behavior::NeverAnswer);
    let url = server.url("http");
    // 10/s, 200 ms timeout, 1 s: each request waits 200 ms, so the connection falls behind; each
    // stuck request is one timeout (wrk2 would count it again per check) and the rest of the
    // schedule it never got to is reported as unsent.
    let results = crate::support::run(&[
        "-t",
        "1",
        "-c",
        "1",
        "-R",
        "10",
        "-d",
        "1s",
        "--timeout",
        "200ms",
        &url,
    ]);
    let timeouts = only(&results.errors, "timeout");
    assert!((4..=5).contains(&timeouts), "{timeouts}");
    assert_eq!(
        timeouts + results.unsent,
        10,
        "every due request is accounted for"
    );
    assert_eq!(server.count(|s| &s.requests), timeouts);
    assert_eq!(
        server.count(|s| &s.accepted),
        timeouts,
        "each timeout replaced its connection"
    );
}

#[test]
fn http_500_is_a_status_error_with_its_latency_recorded() {
    let server = TestServer::start(Behavior::Status(500));
    let url = server.url("http");
    let results = crate::support::run(&["-t", "2", "-c", "2", "-R", "100", "-d", "500ms", &url]);
    let statuses = only(&results.errors, "status");
    assert_eq!(statuses + results.unsent, 50);
    assert!(statuses >= 45);
    assert_eq!(results.requests, statuses);
    assert_eq!(results.status_codes[&500], statuses);
    assert_eq!(results.latency.corrected.count, statuses);
    // Keep-alive held: the two pre-opened connections carried everything.
    assert_eq!(server.count(|s| &s.accepted), 2);
}

#[test]
fn bad_input_is_exit_code_2() {
    assert_eq!(
        load::run_cli(crate::support::args(&["-d", "soon", "http://127.0.0.1:1/"])).unwrap(),
        2
    );
    assert_eq!(
        load::run_cli(crate::support::args(&[
            "-H",
            "nocolon",
            "http://127.0.0.1:1/"
        ]))
        .unwrap(),
        2
    );
    assert_eq!(
        load::run_cli(crate::support::args(&["127.0.0.1:1"])).unwrap(),
        2
    );
}
