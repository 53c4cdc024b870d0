//! TLS resumption, verified on the server side: off means every connection is a full handshake,
//! on means connections after the first resume. SNI follows the Host header.

use crate::support::{Behavior, TestServer, TestTls};

fn tls_run(server: &TestServer, tls: &TestTls, resumption: &str) -> load::Results {
    let cacert = tls.cacert.display().to_string();
    // The URL names the IP; the Host header names the certificate's name, and SNI must follow it.
    let url = format!("https://127.0.0.1:{}/", server.addr.port());
    crate::support::run(&[
        "-t",
        "1",
        "-c",
        "1",
        "-d",
        "1s",
        "--new-connection-per-request",
        "--cacert",
        &cacert,
        "-H",
        "Host: localhost",
        "--tls-resumption",
        resumption,
        &url,
    ])
}

#[test]
fn resumption_off_makes_every_connection_a_full_handshake() {
    let tls = TestTls::new();
    let server = TestServer::start_tls(Behavior::Ok, &tls);
    let results = tls_run(&server, &tls, "off");

    assert_eq!(results.errors.total(), 0, "{:?}", results.error_examples);
    let accepted = server.count(|s| &s.accepted);
    let full = server.count(|s| &s.full_handshakes);
    let resumed = server.count(|s| &s.resumed_handshakes);
    eprintln!("connections {accepted}, server saw {full} full / {resumed} resumed");
    assert!(accepted >= 5, "{accepted}");
    assert_eq!(resumed, 0);
    assert_eq!(full, accepted);
    assert_eq!(results.tls_handshakes.full, full);
    assert_eq!(results.tls_handshakes.resumed, 0);
    assert_eq!(results.tls_resumption, Some(false));
    let names = server.stats.server_names.lock().unwrap();
    assert!(names.iter().all(|n| n == "localhost"), "{names:?}");
}

#[test]
fn resumption_on_resumes_every_connection_after_the_first() {
    let tls = TestTls::new();
    let server = TestServer::start_tls(Behavior::Ok, &tls);
    let results = tls_run(&server, &tls, "on");

    assert_eq!(results.errors.total(), 0, "{:?}", results.error_examples);
    let accepted = server.count(|s| &s.accepted);
    let full = server.count(|s| &s.full_handshakes);
    let resumed = server.count(|s| &s.resumed_handshakes);
    eprintln!("connections {accepted}, server saw {full} full / {resumed} resumed");
    assert!(accepted >= 5, "{accepted}");
    assert_eq!(
        full, 1,
        "only the first connection pays for a full handshake"
    );
    assert_eq!(resumed, accepted - 1);
    assert_eq!(results.tls_handshakes.full, 1);
    assert_eq!(results.tls_handshakes.resumed, resumed);
}

#[test]
fn keep_alive_tls_handshakes_once_per_connection_and_rejects_an_unknown_ca() {
    let tls = TestTls::new();
    let server = TestServer::start_tls(Behavior::Ok, &tls);
    let cacert = tls.cacert.display().to_string();
    let url = format!("https://localhost:{}/", server.addr.port());
    let results = crate::support::run(&[
        "-t", "1", "-c", "3", "-R", "150", "-d", "400ms", "--cacert", &cacert, &url,
    ]);
    assert_eq!(results.errors.total(), 0, "{:?}", results.error_examples);
    assert_eq!(results.requests + results.unsent, 60);
    assert_eq!(results.tls_handshakes.full, 3);
    assert_eq!(server.count(|s| &s.accepted), 3);

    // Without --cacert the self-signed certificate is not trusted: connect errors, nothing else.
    let untrusted = crate::support::run(&["-t", "1", "-c", "1", "-R", "20", "-d", "200ms", &url]);
    assert_eq!(untrusted.errors.connect + untrusted.unsent, 4);
    assert_eq!(untrusted.errors.total(), untrusted.errors.connect);
    assert!(untrusted.error_examples[&load::ErrorClass::Connect].contains("tls"));
    // --insecure accepts it.
    let insecure = crate::support::run(&[
        "-t",
        "1",
        "-c",
        "1",
        "-R",
        "20",
        "-d",
        "200ms",
        "--insecure",
        &url,
    ]);
    assert_eq!(insecure.errors.total(), 0, "{:?}", insecure.error_examples);
}
